
/// The application's connection and event handlers, each list keyed by an identifier (set,
/// replaced and removed any time, from any thread, also from inside a handler).
///
/// A delivery reads the list when it runs on the callback context, not when it was queued,
/// and checks each handler again just before calling it: a handler removed or replaced
/// (by another handler of the same delivery, or from another thread) is not called after
/// its removal returned, except for a call that is already running on another thread.
final class AppHandlers: Sendable {
    typealias ConnectionHandler = @Sendable (ConnectionEvent, ParleyError?) -> Void
    typealias EventHandler = @Sendable (_ category: String, _ channelURL: String, _ payloadJSON: String) -> Void

    /// The identifier of the handler `setConnectionHandler` / `setEventHandler` install.
    static let reservedID = ""

    let connection = KeyedHandlers<ConnectionHandler>()
    let event = KeyedHandlers<EventHandler>()

    func removeAll() {
        connection.removeAll()
        event.removeAll()
    }
}

/// Handlers keyed by identifier, called in the order their identifiers were first added.
final class KeyedHandlers<Handler: Sendable>: Sendable {
    /// A struct, not a tuple: see `Locked` on closures in its value.
    private struct Entry {
        let id: String
        /// Changes when the handler under `id` is replaced, so a delivery under way calls the new
        /// one only from the next delivery on.
        let generation: UInt64
        let handler: Handler
    }

    private struct State {
        var entries: [Entry] = []
        var nextGeneration: UInt64 = 1
    }

    private let state = Locked(State())

    func removeAll() { state.withLock { $0.entries.removeAll() } }

    /// Adds `handler` under `id`, replacing (in place) the one already there; nil removes it.
    func set(_ id: String, _ handler: Handler?) {
        state.withLock { state in
            let index = state.entries.firstIndex { $0.id == id }
            guard let handler else {
                if let index { state.entries.remove(at: index) }
                return
            }
            let entry = Entry(id: id, generation: state.nextGeneration, handler: handler)
            state.nextGeneration += 1
            if let index { state.entries[index] = entry } else { state.entries.append(entry) }
        }
    }

    var isEmpty: Bool { state.withLock { $0.entries.isEmpty } }

    /// Calls `body` with each handler registered now, in order, skipping one that an earlier
    /// call removed or replaced. Runs on the callback context; no lock is held during `body`.
    func forEach(_ body: (Handler) -> Void) {
        let snapshot = state.withLock { $0.entries.map { ($0.id, $0.generation) } }
        for (id, generation) in snapshot {
            let handler = state.withLock { state in
                state.entries.first { $0.id == id && $0.generation == generation }?.handler
            }
            if let handler { body(handler) }
        }
    }
}

/// The application's event handler as one subscriber of the change feed: it turns each
/// committed batch into the events the application sees (category name, channel URL, JSON
/// payload) and queues them on the callback context. Runs on the engine queue.
///
/// - a real-time event: the event itself (after the cache was updated), except the server's
///   echo of a message this client sent, which is reported once, as `message_sent`;
/// - `resync` (`{"reason", "channel_urls"}`): the stream resumed past the server's retention,
///   so events were lost; the channels the changelogs found changed meanwhile are named;
/// - channel changelogs: `channel_changelog` (the stored channel) and
///   `channel_changelog_deleted` (`{"channel_url"}`);
/// - message changelogs: `message_changelog` (a cached message that changed) and
///   `message_changelog_deleted` (`{"channel_url", "message_id"}`, a cached message deleted);
/// - sending: `message_pending`, `message_resend_started`, `message_failed` (with
///   `error_code` / `error_message`), `message_canceled`, `message_sent` (the server's message).
struct AppEventReporter: Sendable {
    let handlers: AppHandlers
    let dispatcher: CallbackDispatcher

    func report(_ batch: ChangeBatch) {
        // Nobody listening: skip formatting the payloads (a handler added now hears later events).
        guard !handlers.event.isEmpty else { return }
        let handlers = self.handlers
        for (name, channelURL, text) in Self.events(of: batch) {
            dispatcher.enqueue { handlers.event.forEach { $0(name, channelURL, text) } }
        }
    }

    /// The application events a batch stands for, in order, each with its payload's text. A
    /// stored channel's is the text the cache writer already has (a channel of many members
    /// is not written out again).
    static func events(of batch: ChangeBatch) -> [(String, String, String)] {
        var events: [(String, String, String)] = []
        func add(_ name: String, _ channelURL: String, _ value: JSONValue) { events.append((name, channelURL, value.canonicalText)) }
        switch batch.cause {
        case .realtime(let event) where !event.isOwnEcho && !event.isOwnEdit:
            events.append((event.name, event.channelURL, event.dataText ?? event.data.canonicalText))
        case .channelChangelog:
            for change in batch.changes {
                switch change {
                case .channelUpserted(let upsert):
                    events.append((EventCategory.channelChangelog.name, upsert.url, upsert.channelText.text))
                case .channelRemoved(let url, _):
                    add(EventCategory.channelChangelogDeleted.name, url, .object([WireField.channelURL: .string(url)]))
                default: break
                }
            }
        case .messageChangelog:
            for change in batch.changes {
                switch change {
                case .messageUpserted(let upsert) where !upsert.inserted:
                    add(EventCategory.messageChangelog.name, upsert.channelURL, upsert.message)
                case .messageRemoved(let url, let id):
                    add(EventCategory.messageChangelogDeleted.name, url, .object([
                        WireField.channelURL: .string(url), WireField.messageID: .int(id),
                    ]))
                default: break
                }
            }
        case .pollChangelog:
            for change in batch.changes {
                if case .messageUpserted(let upsert) = change, !upsert.inserted {
                    add(EventCategory.pollChangelog.name, upsert.channelURL, upsert.message)
                }
            }
        case .cacheUnavailable(let reason):
            add(EventCategory.cacheUnavailable.name, "", .object(["reason": .string(reason)]))
        case .cacheRecovered(let salvage):
            var fields: [String: JSONValue] = [
                "reason": .string(salvage.reason), "moved_to": .string(salvage.movedTo),
                "restored_req_ids": .array(salvage.restoredReqIDs.map(JSONValue.string)),
                "lost": .array(salvage.lost.map {
                    .object([WireField.reqID: .string($0.reqID), WireField.channelURL: .string($0.channelURL)])
                }),
            ]
            if let unreadable = salvage.unreadable { fields["unreadable"] = .string(unreadable) }
            fields["restored_from_journal"] = .array(salvage.restoredFromJournal.map(JSONValue.string))
            if let journal = salvage.journalUnreadable { fields["journal_unreadable"] = .string(journal) }
            // Unsent messages the file held but could not even list, and the outbox journal
            // could not list either, are in no count: say so.
            fields["lost_unknown"] = .bool(salvage.lostUnknown)
            add(EventCategory.cacheRecovered.name, "", .object(fields))
        case .resync(let reason, let channelURLs):
            add(EventCategory.resync.name, "", .object([
                "reason": .string(reason), "channel_urls": .array(channelURLs.map(JSONValue.string)),
            ]))
        default:
            break
        }
        for change in batch.changes {
            guard case .localMessageStatusChanged(let local) = change else { continue }
            let category: EventCategory =
                switch local.status {
                case .pending:
                    if case .resend = batch.cause { .messageResendStarted } else { .messagePending }
                case .failed: .messageFailed
                case .canceled: .messageCanceled
                case .succeeded: .messageSent
                }
            add(category.name, local.channelURL, local.message)
        }
        return events
    }
}

/// An observer of the change feed, until `cancel()` (or until the client closes).
public final class ChangeObservation: Sendable {
    private let engine: any ClientEngine
    private let id: UInt64

    init(engine: any ClientEngine, id: UInt64) {
        self.engine = engine
        self.id = id
    }

    /// Stops delivery; after it returns the observer is not called again. Idempotent.
    public func cancel() {
        let engine = self.engine
        let id = self.id
        engine.runNow { engine.unsubscribe(id) }
    }
}

extension ParleyClient {
    /// Calls `observer` with every batch of cache changes committed from now on, in commit
    /// order, each with its cause. It runs on the engine queue, after the commit and before
    /// anything else changes the cache: it must return quickly and must not call this
    /// client's synchronous methods (they wait for that queue). The application's event
    /// handler is one such observer.
    public func observeChanges(_ observer: @escaping @Sendable (ChangeBatch) -> Void) -> ChangeObservation {
        let engine = self.engine
        let id = engine.runNow { engine.subscribe(observer) }
        return ChangeObservation(engine: engine, id: id)
    }
}
