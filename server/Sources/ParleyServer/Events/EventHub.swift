import Foundation
import NIOCore
import Synchronization

// The open event streams and the one ordered queue that feeds them (PROTOCOL.md §9). Writers
// of this server may finish in another order than they took their numbers (SQLite's group
// commit): each registers in the write order (Writers/WriteOrder.swift) before it takes a sequence
// number and hands its committed events to the hub when it is done. The hub queues events in id order, and only those no
// unfinished writer can still precede (the watermark, `resolvedThrough`). Numbers that no
// writer of this server took were taken by another server on the same PostgreSQL database:
// their events are read from the log (`puller`) and delivered in their place. The hub renders
// and delivers on its own task, outside every lock the requests take; a stream opens on the
// same queue, so its replay ends exactly where its live events begin.

/// A live SSE subscriber. Fed only from the hub's queue, so it receives events in log order,
/// replay first.
final class Subscriber: @unchecked Sendable {
    let id: Int
    let userId: String
    let outbox: Outbox
    init(id: Int, userId: String, outbox: Outbox) {
        self.id = id
        self.userId = userId
        self.outbox = outbox
    }

    /// Ends the stream with an `error` event (PROTOCOL.md §9): its credential no longer holds.
    func end(code: Int, message: String) {
        let data = JSON.obj([("code", .int(Int64(code))), ("message", .string(message))]).serialized()
        outbox.append("event: error\ndata: \(data)\n\n")
        outbox.finish()
    }
}

/// A stream's frames not yet handed to its connection, in order, as one buffer: its writer
/// takes all of them in one write when woken. The hub appends an event's frames without
/// waking the writers and wakes them once its queue is drained, at most once per
/// `EventHub.flushWindow` under load (frames queued meanwhile go out together, in one write
/// per stream); a lone event goes out at once.
final class Outbox: @unchecked Sendable {
    private let mutex = NSLock()
    private var pending = ByteBuffer()
    /// The writer may take what is pending (woken since its last take).
    private var ready = false
    private var finished = false
    private var cancelled = false
    private var waiter: CheckedContinuation<ByteBuffer?, Never>?
    /// The newest event appended, the newest the writer took, and the newest it wrote to the
    /// connection (what a held push notification asks, OutgoingCalls/Push.swift).
    private var appendedThrough: Int64 = 0
    private var takenThrough: Int64 = 0
    private var wroteThrough: Int64 = 0

    /// Appends a frame (dropped once the stream is finished). True if nothing was pending.
    @discardableResult
    func append(_ frame: String) -> Bool {
        mutex.withLock {
            if finished { return false }
            let wasEmpty = pending.readableBytes == 0
            pending.writeString(frame)
            return wasEmpty
        }
    }

    /// Appends the frame of event `id` given in three parts (see `RecordRenderer.framer`).
    /// True if nothing was pending.
    @discardableResult
    func append(_ prefix: String, _ middle: String, _ suffix: String, event id: Int64) -> Bool {
        mutex.withLock {
            if finished { return false }
            appendedThrough = max(appendedThrough, id)
            let wasEmpty = pending.readableBytes == 0
            if wasEmpty {
                // Room for a few frames at once: under load a window gathers several.
                pending.reserveCapacity(Self.initialCapacity)
            }
            pending.writeString(prefix)
            pending.writeString(middle)
            pending.writeString(suffix)
            return wasEmpty
        }
    }

    private static let initialCapacity = 16_384

    /// Lets the writer take what is pending.
    func wake() {
        let (w, bytes): (CheckedContinuation<ByteBuffer?, Never>?, ByteBuffer?) = mutex.withLock {
            guard let w = waiter else {
                ready = true
                return (nil, nil)
            }
            if pending.readableBytes == 0 { return (nil, nil) }
            waiter = nil
            return (w, take())
        }
        w?.resume(returning: bytes)
    }

    /// The writer ends once it has taken what is pending.
    func finish() {
        let (w, bytes): (CheckedContinuation<ByteBuffer?, Never>?, ByteBuffer?) = mutex.withLock {
            finished = true
            ready = true
            guard let w = waiter else { return (nil, nil) }
            waiter = nil
            return (w, pending.readableBytes > 0 ? take() : nil)
        }
        w?.resume(returning: bytes)
    }

    /// The writer ends now, whatever is pending: its task is cancelled, or its client is gone.
    func abandon() {
        let w: CheckedContinuation<ByteBuffer?, Never>? = mutex.withLock {
            cancelled = true
            finished = true
            defer { waiter = nil }
            return waiter
        }
        w?.resume(returning: nil)
    }

    private func take() -> ByteBuffer {
        ready = false
        takenThrough = appendedThrough
        let bytes = pending
        pending = ByteBuffer()
        return bytes
    }

    /// The writer wrote what it took last to the connection.
    func wrote() { mutex.withLock { wroteThrough = takenThrough } }

    /// The newest event written to the connection.
    var writtenThrough: Int64 { mutex.withLock { wroteThrough } }

    /// The writer: what to write next, once woken; nil when the stream ends.
    func next() async -> ByteBuffer? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<ByteBuffer?, Never>) in
                let (now, bytes): (Bool, ByteBuffer?) = mutex.withLock {
                    if cancelled { return (true, nil) }
                    if ready, pending.readableBytes > 0 { return (true, take()) }
                    if finished { return (true, nil) }
                    ready = false
                    waiter = c
                    return (false, nil)
                }
                if now { c.resume(returning: bytes) }
            }
        } onCancel: {
            self.abandon()
        }
    }
}

/// What one committed request hands to the hub: its events (with those that end streams,
/// `StoredEvent.endStreamsCategory`), and the request's renderer, whose loaded channels and
/// users render the events as of the commit. The request is finished when it is handed over;
/// from then on only the hub's task reads it.
struct CommittedChanges: @unchecked Sendable {
    let events: [StoredEvent]
    /// The sequence numbers the request took, used or not, in order: no other writer has them.
    let taken: [ClosedRange<Int64>]
    let renderer: RecordRenderer
}

/// A committed event waiting for its turn, with the finished request that renders it (read
/// only by the hub's task from then on).
struct HeldEvent: @unchecked Sendable {
    let event: StoredEvent
    let renderer: RecordRenderer
}

/// Another server's events read for the hub. `pruned`: some of the numbers asked for were at
/// or below the log's retention boundary when they were read, so events may be gone (this
/// server lagged more than `event_retention` events behind).
struct PulledEvents: Sendable {
    var events: [HeldEvent]
    var pruned: Bool
}

/// A delivery's numbers to read from the log, its bound, this server's events it sends and
/// the writers waiting for it, which later bounds and writers may extend until the delivery
/// begins (`EventHub.openPull`). Read and written under the hub's lock.
private final class QueuedPull: @unchecked Sendable {
    var ranges: [ClosedRange<Int64>]
    var through: Int64
    /// When the first announcement this read serves was heard (nil: only catch-ups asked).
    var heardAt: ContinuousClock.Instant?
    var ready: [HeldEvent]
    var deliveries: [Delivery]

    init(ranges: [ClosedRange<Int64>], through: Int64, heardAt: ContinuousClock.Instant?, ready: [HeldEvent],
         delivery: Delivery?) {
        self.ranges = ranges
        self.through = through
        self.heardAt = heardAt
        self.ready = ready
        deliveries = delivery.map { [$0] } ?? []
    }
}

final class EventHub: @unchecked Sendable {
    private let mutex = NSLock()
    private var subscribers: [Int: Subscriber] = [:]
    /// The same streams by user, in the order they opened.
    private var subscribersByUser: [String: [Subscriber]] = [:]
    /// Open streams per user, so that `isOnline` (asked for every member of every render) is
    /// a lookup.
    private var openStreams: [String: Int] = [:]
    private var nextSubscriberId = 1
    /// The newest sequence number whose request's events were all delivered: a stream that
    /// opens now replays up to here and receives what follows live.
    private var delivered: Int64 = 0
    /// Deliveries queued and not yet done.
    private var queuedDeliveries = 0
    /// Writers whose events are in a delivery queued and not yet done (`backlog`).
    private var waitingWriters = 0
    /// This server's writers that have not finished (they register there).
    private let order: WriteOrder
    /// Committed events held back because an unfinished writer may still commit a lower id,
    /// in id order, each with the request that renders it.
    private var held: [HeldEvent] = []
    /// The highest sequence number a finished writer took.
    private var highestFinished: Int64 = 0
    /// PostgreSQL: every number up to here that another server took is committed or never
    /// will be (Writers/StreamPositions.swift; `advance`). On SQLite this server takes every number.
    private var othersBound: Int64 = .max
    /// Every sequence number up to here is committed or will never be: no writer can still
    /// commit one. A changelog's "now" (read before its snapshot).
    private var resolved: Int64 = 0
    /// Every sequence number up to here is in a delivery queued (or done).
    private var scheduled: Int64 = 0
    /// Batches lost events to pruning and no `resync` went out for them yet (`deliver`).
    private var resyncOwed = false
    /// The numbers finished writers of this server took, past `scheduled`.
    private var localRanges: [ClosedRange<Int64>] = []
    /// PostgreSQL: the queue's last job while it has not begun. A bound that arrives meanwhile
    /// adds its numbers to that job, and a writer that finishes its events, instead of queuing
    /// one of their own: bounds and writers that come faster than reads complete share one
    /// read of other servers' events rather than each waiting behind the last (the
    /// cross-server tail).
    private var openPull: QueuedPull?
    /// Reads the committed events whose ids are in the given ranges, with what renders them:
    /// numbers no writer of this server took (another server's, on PostgreSQL). Returns only
    /// once it has read them. Nil on SQLite, where this server is the only writer.
    private var puller: (@Sendable ([ClosedRange<Int64>]) async -> PulledEvents)?
    private var shuttingDown = false
    private let jobs: AsyncStream<@Sendable () async -> Void>.Continuation
    private let queue: AsyncStream<@Sendable () async -> Void>

    /// The hub's thread: its queue runs there, and so do the tasks that feed it announcements
    /// of other servers' commits (Writers/PeerFollower.swift), one hand-off between threads fewer.
    let thread = ThreadExecutor(name: "parley-hub")

    init(order: WriteOrder) {
        self.order = order
        (queue, jobs) = AsyncStream<@Sendable () async -> Void>.makeStream(bufferingPolicy: .unbounded)
    }

    /// Runs the queue until the process ends. `seq` is the committed sequence at start.
    func start(deliveredThrough seq: Int64, puller: (@Sendable ([ClosedRange<Int64>]) async -> PulledEvents)? = nil) {
        mutex.withLock {
            delivered = seq
            resolved = seq
            scheduled = seq
            highestFinished = seq
            if puller != nil { othersBound = seq }
            self.puller = puller
        }
        let queue = self.queue
        // On a thread of its own rather than the two of the shared pool (on 2 cores), where
        // each delivery would hold one and the requests whose commits feed it wait behind it
        // (P7 at 50 streams: about 12% more accepted messages per second).
        let thread = self.thread
        Task(executorPreference: thread) {
            for await job in queue { await job() }
        }
    }

    var deliveredThrough: Int64 { mutex.withLock { delivered } }

    /// See `resolved`.
    var resolvedThrough: Int64 { mutex.withLock { resolved } }

    func isOnline(_ userId: String) -> Bool { mutex.withLock { openStreams[userId] != nil } }

    /// Some of `users` has a stream here. Asked by a read of other servers' events, which runs
    /// in a job of the queue: no stream registers (`inOrder`) between it and their delivery.
    func streamsAny(of users: [String]) -> Bool {
        mutex.withLock { !subscribersByUser.isEmpty && users.contains { subscribersByUser[$0] != nil } }
    }

    func openStreamCount(of userId: String) -> Int { mutex.withLock { openStreams[userId] ?? 0 } }

    /// Every open stream of this server.
    var openStreamTotal: Int { mutex.withLock { subscribers.count } }

    /// Runs `body` in queue order (after every job queued before it) and returns its result.
    func inOrder<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
            // Under the lock, as `schedule` queues: no later announcement joins a read queued
            // before this job (a stream registered here must not miss it, nor see it twice).
            mutex.withLock {
                openPull = nil
                jobs.yield {
                    do { done.resume(returning: try await body()) } catch { done.resume(throwing: error) }
                }
            }
        }
    }

    /// The writer registered as `ticket` (Writers/WriteOrder.swift) is done: `changes` are what it committed (nil when it failed; the next
    /// writer takes the numbers it took). Queues every held event that no unfinished writer can
    /// still precede, and returns at once; `wait` later resumes when that batch is delivered.
    func finishWriter(_ ticket: Int, _ changes: CommittedChanges?) -> Delivery {
        let delivery = Delivery()
        if let changes {
            ServerMetrics.shared.stored(messages: changes.events.reduce(0) { $0 + ($1.category == "message_received" ? 1 : 0) })
        }
        mutex.withLock {
            order.endWriter(ticket)
            if let changes {
                if let last = changes.taken.last { highestFinished = max(highestFinished, last.upperBound) }
                localRanges += changes.taken
                if !changes.events.isEmpty {
                    let fresh = changes.events.map { HeldEvent(event: $0, renderer: changes.renderer) }
                    let inOrder = held.last.map { $0.event.id < fresh[0].event.id } ?? true
                    held += fresh
                    if !inOrder { held.sort { $0.event.id < $1.event.id } }
                }
            }
            let bound = min(order.lowestInFlight.map { $0 - 1 } ?? highestFinished, othersBound)
            schedule(through: bound, delivery: delivery)
        }
        return delivery
    }

    /// Every number up to `seq` that another server took is committed or never will be (the
    /// bound, Writers/StreamPositions.swift, read after an announcement heard at `heardAt` or a commit
    /// of this server's): their events are delivered once no unfinished writer of this server
    /// can precede them.
    func advance(committedThrough seq: Int64, heardAt: ContinuousClock.Instant? = nil) {
        mutex.withLock {
            othersBound = max(othersBound, seq)
            let bound = order.lowestInFlight.map { min(seq, $0 - 1) } ?? seq
            guard bound > scheduled else { return }
            highestFinished = max(highestFinished, bound)
            schedule(through: bound, delivery: nil, heardAt: heardAt)
        }
    }

    /// Under `mutex`: queues the delivery of everything up to `bound` not queued yet: the held
    /// events of this server's writers, and those of the numbers none of them took (read by
    /// `puller` when the job runs, in id order with the others).
    private func schedule(through bound: Int64, delivery: Delivery?, heardAt: ContinuousClock.Instant? = nil) {
        resolved = max(resolved, bound)
        let ready = held.prefix { $0.event.id <= bound }
        held.removeFirst(ready.count)
        var gaps: [ClosedRange<Int64>] = []
        if bound > scheduled {
            localRanges.sort { $0.lowerBound < $1.lowerBound }
            var next = scheduled + 1
            for range in localRanges where range.upperBound >= next && range.lowerBound <= bound {
                if range.lowerBound > next { gaps.append(next...(range.lowerBound - 1)) }
                next = range.upperBound + 1
            }
            if next <= bound { gaps.append(next...bound) }
            localRanges.removeAll { $0.upperBound <= bound }
            scheduled = bound
        }
        let through = resolved
        if let open = openPull {
            // Adjacent ranges merged: the read checks each event against every range.
            for gap in gaps {
                if let last = open.ranges.last, last.upperBound + 1 >= gap.lowerBound {
                    open.ranges[open.ranges.count - 1] = last.lowerBound...max(last.upperBound, gap.upperBound)
                } else {
                    open.ranges.append(gap)
                }
            }
            open.through = through
            if open.heardAt == nil { open.heardAt = heardAt }
            open.ready += ready
            if let delivery {
                open.deliveries.append(delivery)
                waitingWriters += 1
            }
            return
        }
        if ready.isEmpty, gaps.isEmpty || puller == nil, queuedDeliveries == 0 {
            // Nothing to send and every earlier batch is out: the watermark moves now
            // rather than by a job of the queue.
            delivered = max(delivered, through)
            delivery?.finish()
            return
        }
        queuedDeliveries += 1
        if delivery != nil { waitingWriters += 1 }
        let queued = QueuedPull(ranges: gaps, through: through, heardAt: heardAt, ready: Array(ready), delivery: delivery)
        // Only where other servers' events are read: on SQLite each writer's delivery stays a
        // job of its own.
        let pull = puller
        openPull = pull != nil ? queued : nil
        // Yielded under the lock, so that batches queue in the order of their bounds.
        jobs.yield {
            let (missing, through, heardAt, ready, streams) = self.mutex.withLock {
                if self.openPull === queued { self.openPull = nil }
                return (queued.ranges, queued.through, queued.heardAt, queued.ready, !self.subscribersByUser.isEmpty)
            }
            // With no stream here (none registers while this job runs), other servers' events
            // reach no one: they are not read.
            if let pull, !missing.isEmpty, streams {
                let readBegan = ContinuousClock.now
                let pulled = await pull(missing)
                var events = ready + pulled.events
                events.sort { $0.event.id < $1.event.id }
                let deliveryBegan = ContinuousClock.now
                self.deliver(events, through: through, lost: pulled.pruned)
                ServerMetrics.shared.readOtherServersEvents(waited: heardAt.map { $0.duration(to: readBegan) },
                                                            read: readBegan.duration(to: deliveryBegan),
                                                            delivered: deliveryBegan.duration(to: .now))
            } else {
                self.deliver(ready.sorted { $0.event.id < $1.event.id }, through: through)
            }
            let (drained, deliveries) = self.mutex.withLock {
                self.queuedDeliveries -= 1
                self.waitingWriters -= queued.deliveries.count
                return (self.queuedDeliveries == 0, queued.deliveries)
            }
            if drained { self.flushSoon() }
            for delivery in deliveries { delivery.finish() }
        }
    }

    /// Writers whose events are in deliveries queued and not yet done.
    var backlog: Int { mutex.withLock { waitingWriters } }

    /// `lost`: events up to `through` may be missing (PulledEvents.pruned). Every stream then
    /// gets a `resync` after the events that were found, so that its client runs changelogs
    /// instead of resuming past what it never received (docs/PROTOCOL.md §9): one for a run of
    /// such batches, sent with the first batch that lost nothing or when no batch is left
    /// queued, with that batch's bound as its id.
    private func deliver(_ events: [HeldEvent], through: Int64, lost: Bool = false) {
        let now = nowMillis()
        var framesQueued = 0
        var middle = ""
        middle.reserveCapacity(1024)
        defer { ServerMetrics.shared.delivered(events: events.count, frames: framesQueued) }
        for held in events {
            let event = held.event
            if event.category == StoredEvent.endStreamsCategory {
                let data = event.parsedData
                guard case .int(let code)? = data?["code"], case .string(let message)? = data?["message"] else { continue }
                for userId in event.recipients { endStreams(of: userId, code: Int(code), message: message) }
                continue
            }
            // One rendering per user, whatever their number of streams.
            let targets: [[Subscriber]] = mutex.withLock {
                if subscribersByUser.isEmpty { return [] }
                var targets: [[Subscriber]] = []
                for userId in event.recipients { if let subs = subscribersByUser[userId] { targets.append(subs) } }
                return targets
            }
            if targets.isEmpty { continue }
            let frame = held.renderer.framer(event, now: now)
            for subs in targets {
                let (prefix, suffix) = frame(subs[0].userId, &middle)
                for sub in subs {
                    framesQueued += 1
                    if sub.outbox.append(prefix, middle, suffix, event: event.id) { flushMutex.withLock { unflushed.append(sub.outbox) } }
                }
            }
        }
        let sendsResync = mutex.withLock {
            if lost { resyncOwed = true }
            guard resyncOwed, !lost || queuedDeliveries <= 1 else { return false }
            resyncOwed = false
            return true
        }
        if sendsResync {
            let data = JSON.obj([("reason", .string("lagged")), ("last_event_id", .int(through))]).serialized()
            let frame = "id: \(through)\nevent: resync\ndata: \(data)\n\n"
            let everyone = mutex.withLock { Array(subscribers.values) }
            for sub in everyone where sub.outbox.append(frame) { flushMutex.withLock { unflushed.append(sub.outbox) } }
            ServerMetrics.shared.resyncedAfterLag(streams: everyone.count)
        }
        mutex.withLock { delivered = max(delivered, through) }
    }

    /// The longest a frame waits for its stream's writer to be woken, under load: the writers
    /// are woken at most once per window, so that frames queued meanwhile go out in one write.
    /// 3 ms: P3's messages (one every 5 ms or more) go out at once; a burst into a channel of
    /// 50 (P7) goes out in about one write per stream per 2–3 messages.
    static let flushWindow: UInt64 = 3_000_000
    /// Streams with frames appended since the last flush (read and written by the hub's jobs
    /// and its flush timer, under `flushMutex`).
    private var unflushed: [Outbox] = []
    private let flushMutex = NSLock()
    private var lastFlush: UInt64 = 0
    private var flushScheduled = false

    private static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// The queue is drained: wakes the writers of the streams with frames waiting, now if the
    /// last wake-up is a window ago, else at the end of the window.
    private func flushSoon() {
        let now = Self.monotonicNanos()
        let wait: UInt64? = flushMutex.withLock {
            if unflushed.isEmpty || flushScheduled { return nil }
            if now &- lastFlush >= Self.flushWindow { return 0 }
            flushScheduled = true
            return lastFlush + Self.flushWindow - now
        }
        guard let wait else { return }
        if wait == 0 {
            flushNow()
        } else {
            Task.detached {
                try? await Task.sleep(nanoseconds: wait)
                self.flushNow()
            }
        }
    }

    private func flushNow() {
        let outboxes: [Outbox] = flushMutex.withLock {
            flushScheduled = false
            lastFlush = Self.monotonicNanos()
            defer { unflushed.removeAll(keepingCapacity: true) }
            return unflushed
        }
        for outbox in outboxes { outbox.wake() }
    }

    /// Registers a stream. Call it from a job of `inOrder`, after the stream's replay. Once the
    /// server is shutting down, the stream ends at once (its client reconnects elsewhere).
    func register(userId: String, outbox: Outbox) -> Int {
        let (id, closing): (Int, Bool) = mutex.withLock {
            let id = nextSubscriberId
            nextSubscriberId += 1
            let sub = Subscriber(id: id, userId: userId, outbox: outbox)
            subscribers[id] = sub
            subscribersByUser[userId, default: []].append(sub)
            openStreams[userId, default: 0] += 1
            return (id, shuttingDown)
        }
        if closing { outbox.finish() }
        return id
    }

    /// Removes a stream; nil if it was gone already.
    @discardableResult
    func remove(_ id: Int) -> Subscriber? {
        mutex.withLock {
            guard let sub = subscribers.removeValue(forKey: id) else { return nil }
            if var subs = subscribersByUser.removeValue(forKey: sub.userId) {
                subs.removeAll { $0.id == id }
                if !subs.isEmpty { subscribersByUser[sub.userId] = subs }
            }
            let left = (openStreams[sub.userId] ?? 1) - 1
            openStreams[sub.userId] = left > 0 ? left : nil
            return sub
        }
    }

    /// Ends every open stream of the user with an `error` event.
    func endStreams(of userId: String, code: Int, message: String) {
        let ids = mutex.withLock { subscribers.values.filter { $0.userId == userId }.map(\.id) }
        for id in ids { remove(id)?.end(code: code, message: message) }
    }

    /// `finishAll` ran: the server is stopping.
    var isShuttingDown: Bool { mutex.withLock { shuttingDown } }

    /// Ends every stream with `stoppingFrame`, and every stream that opens from now on (shutdown:
    /// clients reconnect and resume).
    func finishAll() {
        let all = mutex.withLock {
            shuttingDown = true
            return Array(subscribers.values)
        }
        for sub in all {
            sub.outbox.append(Self.stoppingFrame)
            sub.outbox.finish()
        }
    }

    /// The last bytes of a stream the server ends because it stops: a comment saying so, and
    /// a short reconnection time (the client resumes by Last-Event-ID, on another server
    /// behind a balancer).
    static let stoppingFrame = ": the server is stopping; reconnect and resume\nretry: 250\n\n"
}

/// The delivery of one batch of events, awaited by the writer whose finish queued it.
final class Delivery: @unchecked Sendable {
    private let mutex = NSLock()
    private var done = false
    private var waiter: CheckedContinuation<Void, Never>?

    fileprivate func finish() {
        let waiting: CheckedContinuation<Void, Never>? = mutex.withLock {
            done = true
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume()
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finished: Bool = mutex.withLock {
                if done { return true }
                waiter = continuation
                return false
            }
            if finished { continuation.resume() }
        }
    }
}
