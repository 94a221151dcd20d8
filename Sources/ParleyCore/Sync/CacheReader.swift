import Dispatch

// Reads of the cache that do not wait for the engine queue.
//
// The application's cached reads (`cached_messages`, `cached_channels`, `cached_channel`)
// used to run on the engine queue, behind whatever it was doing: during a catch-up of
// thousands of events a page waited for seconds. A persistent cache is a WAL file, where a
// second connection reads the last committed state while the writer works, so these reads
// go to a read-only connection of their own, on the caller's thread. What they see is
// always committed: everything the engine reported (a send returned, a completion ran, an
// event was delivered) was committed before it was reported. An in-memory cache has no
// second connection; its reads still go to the engine queue.

//
// The connection is closed again once it has been idle for `idleCloseSeconds`: a process
// holding thousands of clients should not hold two more descriptors for each (the file and
// its WAL) for reads made now and then.
final class CacheReader: Sendable {
    private struct State {
        /// The file of the open cache; nil when none is open or it lives in memory.
        var path: String?
        var reader: ChatCache?
        /// The reader's last `statistics`.
        var statistics = CacheStatisticsKeeper()
        var lastUse = ContinuousClock.now
        var idleCheckScheduled = false

        mutating func closeReader() {
            reader?.close()
            reader = nil
            // Its data_version counts for this connection only.
            statistics = CacheStatisticsKeeper()
        }
    }

    static let idleCloseSeconds = 5

    private let state = Locked(State())

    /// Engine queue: the cache at `path` is open now (nil: none, or in memory).
    func attach(path: String?) {
        state.withLock { state in
            state.closeReader()
            state.path = path
        }
    }

    /// Whether the read-only connection is open now.
    var isOpen: Bool { state.withLock { $0.reader != nil } }

    /// Runs `body` with the read-only connection (opened on first use), one read at a time;
    /// nil when there is no file to read (the caller reads on the engine queue instead).
    func read<T>(_ body: (ChatCache) throws(ParleyError) -> T) throws(ParleyError) -> T? {
        try withReader { _, reader throws(ParleyError) in try body(reader) }
    }

    /// The cache's sizes, read again only when the engine committed since the last time
    /// (`CacheStatisticsKeeper`); nil when there is no file to read.
    func statistics() throws(ParleyError) -> CacheStatistics? {
        try withReader { state, reader throws(ParleyError) -> CacheStatistics in
            try state.statistics.statistics(of: reader, dataVersion: try reader.dataVersion())
        }
    }

    private func withReader<T>(_ body: (inout State, ChatCache) throws(ParleyError) -> T) throws(ParleyError) -> T? {
        let (result, scheduleCheck) = try state.withLock { state throws(ParleyError) -> (T?, Bool) in
            guard let path = state.path else { return (nil, false) }
            if state.reader == nil { state.reader = try ChatCache(readerOf: path) }
            guard let reader = state.reader else { return (nil, false) }
            defer { state.lastUse = .now }
            let scheduleCheck = !state.idleCheckScheduled
            state.idleCheckScheduled = true
            return (try body(&state, reader), scheduleCheck)
        }
        if scheduleCheck { scheduleIdleCheck(after: .seconds(Self.idleCloseSeconds)) }
        return result
    }

    private func scheduleIdleCheck(after delay: Duration) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000) + 1
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
            self?.closeIfIdle()
        }
    }

    private func closeIfIdle() {
        let remaining = state.withLock { state -> Duration? in
            guard state.reader != nil else {
                state.idleCheckScheduled = false
                return nil
            }
            let idle = ContinuousClock.now - state.lastUse
            if idle >= .seconds(Self.idleCloseSeconds) {
                state.closeReader()
                state.idleCheckScheduled = false
                return nil
            }
            return .seconds(Self.idleCloseSeconds) - idle
        }
        if let remaining { scheduleIdleCheck(after: remaining) }
    }
}
