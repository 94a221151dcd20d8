import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

// The per-user Server-Sent Events stream with Last-Event-ID replay (PROTOCOL.md §9).

enum EventStream {
    /// What the event stream uses of a request (Services/Interfaces.swift).
    typealias Needs = UserRecords & ChannelRecords & EventLog

    static func open(runner: RequestRunner, config: ServerConfig, ctx: Ctx, connection: any Channel) async throws -> Response {
        let userId = try ctx.param(.userId)
        let lastEventField = HTTPField.Name("Last-Event-ID")!
        let lastEventText = ctx.headers[lastEventField] ?? ctx.input.query.first("last_event_id")
        var requestedLastEventId: Int64? = nil
        if let text = lastEventText?.trimmingSpaces, !text.isEmpty {
            guard let v = Int64(text), v >= 0 else { throw APIError.invalid("Last-Event-ID", "must be a non-negative integer.") }
            requestedLastEventId = v
        }
        let lastEventId = requestedLastEventId
        let outbox = Outbox()
        let expiresAt: Int64 = try await runner.run(readOnly: true) { s in
            try await admit(s, userId: userId, ctx: ctx, config: config, now: ctx.now)
        }
        let hub = runner.shared.hub
        let cluster = runner.shared.cluster
        // Several servers: the limit counts the user's streams on every one of them.
        try await cluster?.admit(userId, limit: config.maxStreamsPerUser)
        let admission = Admission()
        let now = ctx.now
        let subscriberId: Int
        do {
            // A resume replays what every server committed up to now: a client may come from
            // another server, or have written just before (on PostgreSQL this server's own
            // commits are delivered once the bound, read after them, passes them).
            // A writer of this server still in flight holds back the events committed after
            // it took its number (EventHub delivers in id order): an edit committed before this
            // request, behind such a writer (say the user's last-seen time, written as their
            // previous stream closed), would otherwise come after `connected` as a live event
            // rather than in the replay. The writers that began before the request finish first.
            if lastEventId != nil {
                await runner.shared.order.waitForWritersInFlight()
                try await runner.catchUp()
            }
            // The bulk of a resume's replay, rendered before the hub's queue: its renders (a
            // channel and its members per channel) are the costly part, and the queue's other
            // jobs (every live delivery) would wait behind them, in a reconnect storm behind
            // thousands. It covers what was delivered before it began.
            var early: EarlyReplay? = nil
            if let lastEventId {
                let through = hub.deliveredThrough
                if through > lastEventId {
                    let frames: [String] = try await runner.read { s in
                        try await replayFrames(s, userId: userId, after: lastEventId, through: through, now: now)
                    }
                    early = EarlyReplay(through: through, frames: frames)
                }
            }
            let earlyPart = early
            // On the hub's queue: the replay covers the events delivered so far, the stream is
            // registered before the next delivery, so nothing falls between the two.
            subscriberId = try await hub.inOrder {
                let open = hub.openStreamCount(of: userId)
                if cluster == nil, open >= config.maxStreamsPerUser {
                    throw APIError(status: 429, code: 400120,
                                   message: "\"\(userId)\" already has \(open) open event streams (at most \(config.maxStreamsPerUser)).")
                }
                let delivered = hub.deliveredThrough
                let frames: [String] = try await runner.read { s in
                    try await replay(s, userId: userId, after: lastEventId, delivered: delivered, early: earlyPart, ctx: ctx,
                                     config: config, now: now)
                }
                for frame in frames { outbox.append(frame) }
                outbox.wake()
                return hub.register(userId: userId, outbox: outbox)
            }
        } catch {
            if admission.end() { await cluster?.release(userId) }
            throw error
        }
        let heartbeat = Task {
            let interval = UInt64(max(0.05, config.heartbeatSeconds) * 1_000_000_000)
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: interval)
                if Task.isCancelled { break }
                outbox.append(": heartbeat \(nowMillis())\n\n")
                outbox.wake()
            }
        }
        // A stream opened with an expiring session key ends when the key expires.
        let expiry = Task { [expiresAt] in
            guard expiresAt > 0 else { return }
            let wait = max(0, expiresAt - nowMillis())
            try? await Task.sleep(nanoseconds: UInt64(wait) * 1_000_000)
            if Task.isCancelled { return }
            // On the queue, so that no event frame follows the error frame.
            _ = try? await hub.inOrder { hub.remove(subscriberId)?.end(code: 400302, message: "The session key expired.") }
        }
        // The stream ends as soon as its client closes the connection, not at the next write;
        // a connection lost without a close ends once a write stays unacknowledged
        // (ConnectionEnd.swift): the user is online exactly while a stream of theirs is open.
        await ConnectionEndHandler.limitUnacknowledged(connection)
        let connectionEnd = await ConnectionEndHandler.end(of: connection)
        connectionEnd?.onEnd { outbox.abandon() }
        let cleanup: @Sendable (_ writeFailed: Bool) async -> Void = { writeFailed in
            heartbeat.cancel()
            expiry.cancel()
            // Before the user may count as offline: the events written to a connection that
            // was not lost reached the client, so their held push notifications are dropped.
            if !writeFailed && connectionEnd?.lost != true {
                runner.shared.pushHold.reached(userId, through: outbox.writtenThrough)
            }
            let removedHere = hub.remove(subscriberId) != nil
            // The last-seen time is committed before the other servers hear that the stream
            // closed: a server that shows the user offline shows when they were last seen.
            if removedHere, !runner.shared.isOnline(userId) {
                _ = try? await runner.run { s in try await markLastSeen(s, userId: userId, at: nowMillis()) }
            }
            if admission.end() { await cluster?.release(userId) }
        }
        // Should the body never run (or once it is done and dropped), the stream ends all the same.
        let dropped = OnDrop { Task { await cleanup(false) } }
        let body = ResponseBody { writer in
            _ = dropped
            do {
                while let bytes = await outbox.next() {
                    try await writer.write(bytes)
                    outbox.wrote()
                }
            } catch {
                outbox.finish()
                await cleanup(true)
                throw error
            }
            await cleanup(false)
            try await writer.finish(nil)
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: body)
    }

    /// The caller may open the user's stream; returns when its session key expires (0: never).
    private static func admit(_ s: some Needs, userId: String, ctx: Ctx, config: ServerConfig, now: Int64) async throws -> Int64 {
        let caller = try await s.authenticate(ctx.headers, apiToken: config.apiToken, now: now)
        ctx.record.caller = caller.isAdmin ? "admin" : caller.userId ?? "-"
        if !caller.isAdmin && caller.userId != userId { throw APIError.forbidden("a session user can only open their own event stream.") }
        _ = try await s.user(userId)
        if !caller.isAdmin, let key = ctx.headers[HTTPField.Name("Session-Key")!], let session = try await s.session(key) {
            return session.expiresAt
        }
        return 0
    }

    /// The frames of a replay's events rendered before the hub's queue, up to `through`.
    private struct EarlyReplay: Sendable {
        let through: Int64
        let frames: [String]
    }

    /// The frames a stream starts with: `connected`, then the events after `last` up to
    /// `delivered` (or a `resync` when they are gone or unknown): those of `early`, then the
    /// ones after it.
    private static func replay(_ s: some Needs, userId: String, after lastEventId: Int64?, delivered: Int64, early: EarlyReplay?,
                               ctx: Ctx, config: ServerConfig, now: Int64) async throws -> [String] {
        // Again, in a snapshot taken after every delivered commit: a deactivation or
        // deletion delivered since the check above found no stream to end, so this
        // one must not open.
        let caller = try await s.authenticate(ctx.headers, apiToken: config.apiToken, now: now)
        if !caller.isAdmin && caller.userId != userId { throw APIError.forbidden("a session user can only open their own event stream.") }
        _ = try await s.user(userId)
        var frames = ["retry: 1000\nevent: connected\ndata: \(JSON.obj([("user_id", .string(userId)), ("last_event_id", .int(delivered))]).serialized())\n\n"]
        guard let last = lastEventId else { return frames }
        let pruned = try await s.prunedThrough()
        if last > delivered || last < pruned {
            let reason = last > delivered ? "unknown_id" : "retention"
            let data = JSON.obj([("reason", .string(reason)), ("last_event_id", .int(delivered))]).serialized()
            frames.append("id: \(delivered)\nevent: resync\ndata: \(data)\n\n")
            return frames
        }
        var from = last
        if let early, early.through <= delivered {
            frames += early.frames
            from = early.through
        }
        frames += try await replayFrames(s, userId: userId, after: from, through: delivered, now: now)
        return frames
    }

    /// The replayed events after `after` up to `through`, the first of each channel with the
    /// channel as it stands now, its members or the ones the events changed (PROTOCOL.md §9.1).
    private static func replayFrames(_ s: some Needs, userId: String, after: Int64, through: Int64, now: Int64) async throws -> [String] {
        guard through > after else { return [] }
        var frames: [String] = []
        let events = try await s.events(after: after, through: through, for: userId)
        let data = events.map(\.parsedData)
        var urls = Set<String>()
        for case let fields? in data { if case .string(let url)? = fields["channel_url"] { urls.insert(url) } }
        try await s.loadChannels(Array(urls))
        let replayed = zip(events, data).filter { event, _ in event.category != StoredEvent.endStreamsCategory }
        var plan = ReplayPlan(replayed)
        for (event, fields) in replayed {
            frames.append(s.replayFrame(event, data: fields, for: userId, now: now, plan: &plan))
        }
        return frames
    }

    /// The user's last stream closed (or the server that had it was forgotten): they were
    /// last seen `at`, unless another stream opened meanwhile.
    static func markLastSeen(_ s: some Needs, userId: String, at time: Int64) async throws {
        if !s.isOnline(userId), var u = try await s.userIfExists(userId), u.lastSeenAt < time {
            u.lastSeenAt = time
            s.save(u)
        }
    }
}

/// A stream's admission, ended once: by the stream's end or by its failure to open.
private final class Admission: Sendable {
    private let ended = Mutex(false)
    /// True the first time.
    func end() -> Bool { ended.withLock { was in defer { was = true }; return !was } }
}

/// Runs its action when released.
private final class OnDrop: Sendable {
    let action: @Sendable () -> Void
    init(_ action: @escaping @Sendable () -> Void) { self.action = action }
    deinit { action() }
}
