import CCurl
import CParleySystem
import Glibc

/// The network threads of the process: a few loops, each a thread driving one curl multi
/// handle through `curl_multi_socket_action` over an epoll set. Every `HTTPClient` is bound
/// to one loop for its life; all of its transfers run there, and clients of one loop share
/// that multi handle's keep-alive connections (each request still carries its own headers).
///
/// The loops start with the first client and live as long as the process: idle, a loop
/// sleeps in `epoll_wait` and costs nothing. Their number is fixed before the first client
/// (`configure(threads:)`), so the threads of a process do not grow with its clients.
public enum NetworkRuntime {
    private struct Settings {
        var requestedThreads: Int?
        var loops: [NetworkLoop]?
    }

    private static let settings = Locked(Settings())

    /// The default number of network threads: one per core, at least 1, at most 4.
    public static var defaultThreadCount: Int {
        let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        return min(max(cores, 1), 4)
    }

    /// The largest number of network threads `configure` accepts.
    public static let maxThreads = 64

    /// Sets the number of network threads. Allowed until the first client starts them;
    /// afterwards `.invalidState` unless the number is the one already running.
    public static func configure(threads: Int) throws(ParleyError) {
        guard threads >= 1, threads <= maxThreads else {
            throw .invalidArgument("network_threads must be 1..\(maxThreads) (got \(threads))")
        }
        try settings.withLock { (settings: inout Settings) throws(ParleyError) in
            if let loops = settings.loops {
                guard loops.count == threads else {
                    throw ParleyError(.invalidState, "the network threads already run (\(loops.count)); set their number before the first client")
                }
                return
            }
            settings.requestedThreads = threads
        }
    }

    /// How many network threads run (0 before the first client).
    public static var runningThreads: Int { settings.withLock { $0.loops?.count ?? 0 } }

    /// The loop with the fewest clients, starting the loops on first use.
    static func assignLoop() throws(ParleyError) -> NetworkLoop {
        try settings.withLock { (settings: inout Settings) throws(ParleyError) -> NetworkLoop in
            if settings.loops == nil {
                let count = settings.requestedThreads ?? defaultThreadCount
                var loops: [NetworkLoop] = []
                for index in 0..<count {
                    loops.append(try NetworkLoop.start(name: "parley-net-\(index)"))
                }
                settings.loops = loops
            }
            let loops = settings.loops ?? []
            let loop = loops.min { $0.clientCount < $1.clientCount } ?? loops[0]
            loop.clientCount += 1
            return loop
        }
    }

    static func release(_ loop: NetworkLoop) {
        settings.withLock { _ in loop.clientCount -= 1 }
    }
}

/// One network thread: a mailbox any thread may post to, and the curl multi handle with its
/// transfers, which only the loop's thread touches.
///
/// `@unchecked Sendable`: `active`, the timers and the multi handle belong to the loop's
/// thread; other threads only use `mailbox` (a lock) and the wake-up eventfd. `clientCount`
/// is guarded by `NetworkRuntime`'s lock.
final class NetworkLoop: @unchecked Sendable {
    private struct Mailbox {
        var incoming: [HTTPTransfer] = []
        var cancellations: [(HTTPTransfer, ParleyError)] = []
        /// The eventfd was written and the loop has not taken the mailbox since: posts
        /// meanwhile need no further write.
        var signalled = false
    }

    private let multi: UnsafeMutableRawPointer
    private let epollFD: Int32
    private let wakeFD: Int32
    private let mailbox = Locked(Mailbox())
    private var active: [UnsafeMutableRawPointer: HTTPTransfer] = [:]
    /// When curl wants `CURL_SOCKET_TIMEOUT` (its timer callback), if at all.
    private var curlDeadline: ContinuousClock.Instant?
    /// No transfer's idle watchdog fires before this; the transfers are looked at then.
    /// Deadlines only move later as bytes arrive, so one look per earliest deadline suffices.
    private var nextIdleCheck: ContinuousClock.Instant?
    /// Transfers whose connection was refused, to be started again at their time.
    private var retries: [(due: ContinuousClock.Instant, transfer: HTTPTransfer)] = []
    private var threadID = pthread_t()
    var clientCount = 0

    private init(multi: UnsafeMutableRawPointer, epollFD: Int32, wakeFD: Int32) {
        self.multi = multi
        self.epollFD = epollFD
        self.wakeFD = wakeFD
    }

    /// Idle keep-alive connections a loop keeps for the requests of its clients. curl's own
    /// limit counts the connections in use too and defaults to four per transfer: after a
    /// thousand clients connected together, a thousand idle sockets would stay. So the limit
    /// follows the transfers running, plus these (`limitIdleConnections`): a request ending
    /// while more are open closes the oldest idle one, and curl closes those idle for
    /// `idleConnectionMaxAgeSeconds`.
    static let idleConnectionsKept = 16
    static let idleConnectionMaxAgeSeconds = 30
    /// Requests (not streams) running at once on a loop; more wait here, in order. Thousands
    /// of clients catching up together would otherwise each hold connections of their own
    /// for their requests in flight, and the process could run out of descriptors.
    static let maxRunningRequests = 64
    private var waitingRequests: [HTTPTransfer] = []
    private var runningStreams = 0
    private var connectionLimitFor = -1

    static func start(name: String) throws(ParleyError) -> NetworkLoop {
        guard curlGlobalInitCode == CURLE_OK else {
            throw parleyError(forCurlCode: curlGlobalInitCode, detail: "curl_global_init failed")
        }
        guard let multi = curl_multi_init() else { throw ParleyError(.noMemory, "curl_multi_init failed") }
        let epollFD = parley_epoll_create()
        let wakeFD = parley_eventfd_nonblocking()
        guard epollFD >= 0, wakeFD >= 0, parley_epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, EPOLLIN.rawValue) == 0 else {
            let error = errno
            if epollFD >= 0 { close(epollFD) }
            if wakeFD >= 0 { close(wakeFD) }
            curl_multi_cleanup(multi)
            throw ParleyError(.internalError, "cannot set up the network loop: errno \(error)")
        }
        let loop = NetworkLoop(multi: multi, epollFD: epollFD, wakeFD: wakeFD)
        let context = Unmanaged.passUnretained(loop).toOpaque()
        _ = parley_curl_multi_setopt_socket_fn(multi, curlSocketCallback)
        _ = parley_curl_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, context)
        _ = parley_curl_multi_setopt_timer_fn(multi, curlTimerCallback)
        _ = parley_curl_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, context)
        // The loops live as long as the process: the thread keeps its loop.
        let thread = try NativeThread.start(name: name) { loop.run() }
        loop.mailbox.withLock { _ in loop.threadID = thread.handle }
        thread.detach()
        return loop
    }

    // MARK: Any thread

    var isCurrentThread: Bool {
        mailbox.withLock { _ in pthread_equal(threadID, pthread_self()) != 0 }
    }

    func submit(_ transfer: HTTPTransfer) {
        post { $0.incoming.append(transfer) }
    }

    /// Stops a transfer (queued, running or not yet started); its completion runs on the
    /// loop with `error` unless it already ran.
    func requestCancel(_ transfer: HTTPTransfer, _ error: ParleyError = .cancelled()) {
        post { $0.cancellations.append((transfer, error)) }
    }

    private func post(_ change: (inout Mailbox) -> Void) {
        let wakes = mailbox.withLock { box in
            change(&box)
            guard !box.signalled else { return false }
            box.signalled = true
            return true
        }
        // Written after the lock is given up: the loop it wakes takes the mailbox at once and
        // would otherwise block on the lock and be woken a second time.
        if wakes {
            var one: UInt64 = 1
            _ = write(wakeFD, &one, 8)
        }
    }

    // MARK: The loop's thread

    private func run() {
        var readyFDs = [Int32](repeating: 0, count: 256)
        var readyEvents = [UInt32](repeating: 0, count: 256)
        while true {
            takeMailbox()
            startDueRetries()
            let count = readyFDs.withUnsafeMutableBufferPointer { fds in
                readyEvents.withUnsafeMutableBufferPointer { events in
                    parley_epoll_wait(epollFD, fds.baseAddress, events.baseAddress, 256, waitTimeoutMs())
                }
            }
            var running: Int32 = 0
            if count > 0 {
                for index in 0..<Int(count) {
                    let fd = readyFDs[index]
                    if fd == wakeFD {
                        var value: UInt64 = 0
                        _ = read(wakeFD, &value, 8)
                        continue
                    }
                    let code = curl_multi_socket_action(multi, fd, Self.curlSelectMask(readyEvents[index]), &running)
                    if code != CURLM_OK { failAll(multiCode: code) }
                }
            }
            if let deadline = curlDeadline, deadline <= .now {
                curlDeadline = nil
                let code = curl_multi_socket_action(multi, CURL_SOCKET_BAD, 0, &running)
                if code != CURLM_OK { failAll(multiCode: code) }
            }
            collectFinished()
            if let check = nextIdleCheck, check <= .now { enforceIdleDeadlines() }
            startWaitingRequests()
            limitIdleConnections()
        }
    }

    private func startWaitingRequests() {
        var started = 0
        while started < waitingRequests.count, active.count - runningStreams < Self.maxRunningRequests {
            start(waitingRequests[started])
            started += 1
        }
        if started > 0 { waitingRequests.removeFirst(started) }
    }

    private func limitIdleConnections() {
        guard active.count != connectionLimitFor else { return }
        connectionLimitFor = active.count
        _ = parley_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, active.count + Self.idleConnectionsKept)
    }

    private func track(_ transfer: HTTPTransfer, easy: UnsafeMutableRawPointer) {
        active[easy] = transfer
        if transfer.isStream { runningStreams += 1 }
    }

    private func untrack(easy: UnsafeMutableRawPointer) -> HTTPTransfer? {
        guard let transfer = active.removeValue(forKey: easy) else { return nil }
        if transfer.isStream { runningStreams -= 1 }
        return transfer
    }

    private static func curlSelectMask(_ events: UInt32) -> Int32 {
        var mask: Int32 = 0
        if events & EPOLLIN.rawValue != 0 { mask |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { mask |= CURL_CSELECT_OUT }
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { mask |= CURL_CSELECT_ERR }
        return mask
    }

    private func waitTimeoutMs() -> Int32 {
        let deadlines = [curlDeadline, nextIdleCheck, retries.lazy.map(\.due).min()].compactMap { $0 }
        guard let earliest = deadlines.min() else { return -1 }
        let remaining = earliest - .now
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        // Rounded up: waking a little late is harmless, waking early spins.
        return Int32(min(seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1, 3_600_000))
    }

    private func takeMailbox() {
        let (incoming, cancellations) = mailbox.withLock { box in
            defer {
                box.incoming = []
                box.cancellations = []
                box.signalled = false
            }
            return (box.incoming, box.cancellations)
        }
        for transfer in incoming { start(transfer) }
        for (transfer, error) in cancellations { cancel(transfer, error) }
    }

    private func start(_ transfer: HTTPTransfer) {
        // Cancelled while it waited for its client's turn or the loop's.
        guard !transfer.isFinished, transfer.easy == nil else { return }
        if !transfer.isStream && active.count - runningStreams >= Self.maxRunningRequests {
            waitingRequests.append(transfer)
            return
        }
        if let error = transfer.validationError ?? transfer.makeHandle() {
            transfer.finish(.failure(error))
            return
        }
        guard let easy = transfer.easy else { return }
        let code = curl_multi_add_handle(multi, easy)
        guard code == CURLM_OK else {
            transfer.releaseHandle()
            transfer.finish(.failure(ParleyError(
                .internalError, "cannot start the transfer: \(String(cString: curl_multi_strerror(code)))")))
            return
        }
        track(transfer, easy: easy)
        if let deadline = transfer.idleDeadline {
            nextIdleCheck = min(nextIdleCheck ?? deadline, deadline)
        }
    }

    private func cancel(_ transfer: HTTPTransfer, _ error: ParleyError) {
        guard !transfer.isFinished else { return }
        if let easy = transfer.easy {
            _ = untrack(easy: easy)
            curl_multi_remove_handle(multi, easy)
            transfer.releaseHandle()
        }
        transfer.finish(.failure(error))
    }

    private func collectFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            // Read before removal: removing the handle invalidates the message.
            let code = message.pointee.data.result
            guard let transfer = untrack(easy: easy) else { continue }
            curl_multi_remove_handle(multi, easy)
            if let delay = transfer.retryDelayAfterRefusedConnect(code: code) {
                transfer.prepareRetry()
                retries.append((.now + delay, transfer))
                continue
            }
            transfer.complete(with: code)
        }
    }

    /// A transfer cancelled while it waited is finished: `start` passes over it.
    private func startDueRetries() {
        guard !retries.isEmpty else { return }
        let now = ContinuousClock.now
        let due = retries.filter { $0.due <= now }
        guard !due.isEmpty else { return }
        retries.removeAll { $0.due <= now }
        for (_, transfer) in due { start(transfer) }
    }

    /// Fails the transfers whose idle watchdog expired and notes when the next could.
    private func enforceIdleDeadlines() {
        let now = ContinuousClock.now
        var next: ContinuousClock.Instant?
        for transfer in Array(active.values) {
            guard let deadline = transfer.idleDeadline else { continue }
            if deadline <= now {
                let seconds = transfer.request.lowSpeedTimeoutSec
                cancel(transfer, ParleyError(.timeout, "no data received for \(seconds) s"))
            } else {
                next = min(next ?? deadline, deadline)
            }
        }
        nextIdleCheck = next
    }

    /// The multi handle itself failed (out of memory): no transfer can make progress, so
    /// fail them all rather than leave them hanging.
    private func failAll(multiCode: CURLMcode) {
        let error = ParleyError(.internalError, "curl multi failure: \(String(cString: curl_multi_strerror(multiCode)))")
        for transfer in Array(active.values) { cancel(transfer, error) }
    }

    // MARK: curl's callbacks (inside curl_multi_socket_action / add_handle)

    fileprivate func watch(socket: curl_socket_t, what: Int32) {
        if what == CURL_POLL_REMOVE {
            // The socket may be closed already; epoll then forgot it by itself.
            _ = parley_epoll_ctl(epollFD, EPOLL_CTL_DEL, socket, 0)
            return
        }
        var events: UInt32 = 0
        if what & CURL_POLL_IN != 0 { events |= EPOLLIN.rawValue }
        if what & CURL_POLL_OUT != 0 { events |= EPOLLOUT.rawValue }
        // curl says ADD or MOD only through `what`; a descriptor number reused after a close
        // may still be known or not, so each op falls back to the other.
        if parley_epoll_ctl(epollFD, EPOLL_CTL_MOD, socket, events) != 0 {
            _ = parley_epoll_ctl(epollFD, EPOLL_CTL_ADD, socket, events)
        }
    }

    fileprivate func setTimer(milliseconds: Int) {
        curlDeadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
    }
}

/// curl_global_init must run once per process before any other curl call; a global's
/// lazy initializer runs exactly once, thread-safely.
let curlGlobalInitCode: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

private let curlSocketCallback: curl_socket_callback = { _, socket, what, context, _ in
    guard let context else { return 0 }
    Unmanaged<NetworkLoop>.fromOpaque(context).takeUnretainedValue().watch(socket: socket, what: what)
    return 0
}

private let curlTimerCallback: curl_multi_timer_callback = { _, milliseconds, context in
    guard let context else { return 0 }
    Unmanaged<NetworkLoop>.fromOpaque(context).takeUnretainedValue().setTimer(milliseconds: milliseconds)
    return 0
}
