import CCurl
import Glibc

/// curl_global_init must run once per process before any other curl call; a global's
/// lazy initializer runs exactly once, thread-safely.
private let curlGlobalInitCode: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

/// An HTTP/1.1 + HTTP/2 client over libcurl. It owns one network thread that drives a
/// curl multi handle; all curl calls and all callbacks run on that thread, so callers
/// hop to their own executor in their callbacks and must not block there.
public final class HTTPClient: Sendable {
    private let loop: NetworkLoop
    private let thread: Locked<pthread_t?>

    public init(configuration: HTTPClientConfiguration = HTTPClientConfiguration()) throws(ParleyError) {
        guard curlGlobalInitCode == CURLE_OK else {
            throw parleyError(forCurlCode: curlGlobalInitCode, detail: "curl_global_init failed")
        }
        guard configuration.maxConnections >= 0, configuration.maxResponseBytes >= 0 else {
            throw .invalidArgument("maxConnections and maxResponseBytes must not be negative")
        }
        guard let multi = curl_multi_init() else {
            throw ParleyError(.noMemory, "curl_multi_init failed")
        }
        let code = parley_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
        if code != CURLM_OK {
            curl_multi_cleanup(multi)
            throw ParleyError(.internalError, "cannot limit connections: \(String(cString: curl_multi_strerror(code)))")
        }
        let loop = NetworkLoop(multi: multi, configuration: configuration)
        var threadID = pthread_t()
        let context = Unmanaged.passRetained(loop).toOpaque()
        let created = pthread_create(&threadID, nil, { context in
            guard let context else { return nil }
            let loop = Unmanaged<NetworkLoop>.fromOpaque(context).takeRetainedValue()
            loop.run()
            return nil
        }, context)
        guard created == 0 else {
            Unmanaged<NetworkLoop>.fromOpaque(context).release()
            loop.closeWithoutThread()
            throw ParleyError(.internalError, "cannot start the network thread (error \(created))")
        }
        self.loop = loop
        self.thread = Locked(threadID)
    }

    deinit {
        shutdown()
    }

    /// Sends a request and buffers the whole response (up to `maxResponseBytes`).
    ///
    /// `completion` runs exactly once, on the network thread, with the response (whatever
    /// its status) or a `ParleyError`: `.network` (refused, reset, DNS, partial reply),
    /// `.timeout`, `.tls`, `.cancelled`, `.limitExceeded`, `.invalidArgument` (a malformed
    /// request). After `shutdown` it runs at once, on the calling thread, with `.invalidState`.
    @discardableResult
    public func send(
        _ request: HTTPRequest,
        completion: @escaping @Sendable (Result<HTTPResponse, ParleyError>) -> Void
    ) -> HTTPTask {
        let mode = HTTPTransfer.Mode.buffered(maxBodyBytes: loop.configuration.maxResponseBytes)
        return submit(HTTPTransfer(request: request, mode: mode, completion: completion))
    }

    /// Sends a request and hands the response body over as it arrives.
    ///
    /// `onResponseStart(status, headers)` runs once, when the final response's headers are
    /// complete (at the latest before `completion`, if a response arrived at all). `onData`
    /// runs for each chunk, in order; returning false stops the transfer and completes it
    /// with `.cancelled`. `completion` runs exactly once, last, with the status and headers
    /// (empty body) or an error as for `send`. All on the network thread.
    @discardableResult
    public func stream(
        _ request: HTTPRequest,
        onResponseStart: @escaping @Sendable (_ status: Int, _ headers: [HTTPHeader]) -> Void,
        onData: @escaping @Sendable (_ chunk: [UInt8]) -> Bool,
        completion: @escaping @Sendable (Result<HTTPResponse, ParleyError>) -> Void
    ) -> HTTPTask {
        stream(request, onResponseStart: onResponseStart, onBytes: { onData(Array($0)) }, completion: completion)
    }

    /// `stream(_:onResponseStart:onData:completion:)` handing each chunk over where libcurl
    /// holds it, valid only during the call: a reader that parses the bytes at once (the
    /// event stream) copies nothing.
    @discardableResult
    public func stream(
        _ request: HTTPRequest,
        onResponseStart: @escaping @Sendable (_ status: Int, _ headers: [HTTPHeader]) -> Void,
        onBytes: @escaping @Sendable (_ chunk: UnsafeRawBufferPointer) -> Bool,
        completion: @escaping @Sendable (Result<HTTPResponse, ParleyError>) -> Void
    ) -> HTTPTask {
        submit(HTTPTransfer(
            request: request, mode: .stream,
            onResponseStart: onResponseStart, onData: onBytes, completion: completion))
    }

    /// Cancels every transfer in flight (each completes with `.cancelled`, once), then stops
    /// and joins the network thread. Idempotent. Called from one of this client's own
    /// callbacks it cannot wait for its own thread: the thread then finishes on its own,
    /// right after that callback returns.
    public func shutdown() {
        loop.requestStop()
        let threadID = thread.withLock { threadID in
            defer { threadID = nil }
            return threadID
        }
        guard let threadID else { return }
        if pthread_equal(threadID, pthread_self()) != 0 {
            pthread_detach(threadID)
        } else {
            pthread_join(threadID, nil)
        }
    }

    private func submit(_ transfer: HTTPTransfer) -> HTTPTask {
        let task = HTTPTask(transfer: transfer, loop: loop)
        if !loop.submit(transfer) {
            transfer.finish(.failure(.invalidState("the HTTP client has been shut down")))
        }
        return task
    }
}

/// A handle on one submitted request.
public final class HTTPTask: Sendable {
    private let transfer: HTTPTransfer
    private let loop: NetworkLoop

    init(transfer: HTTPTransfer, loop: NetworkLoop) {
        self.transfer = transfer
        self.loop = loop
    }

    /// Stops the transfer; its completion runs with `.cancelled` unless it already ran.
    /// Thread-safe and idempotent. The completion runs on the network thread, possibly
    /// after `cancel` returned.
    public func cancel() {
        loop.requestCancel(transfer)
    }
}

/// The network thread's state: a mailbox that any thread may post to, and the curl multi
/// handle with its transfers, which only the network thread touches.
///
/// `@unchecked Sendable`: `active` and the multi handle's transfers belong to the network
/// thread; other threads only use `mailbox` (a lock) and `curl_multi_wakeup`, which curl
/// documents as callable from any thread, and which is only called under the mailbox lock
/// while the multi handle is alive.
final class NetworkLoop: @unchecked Sendable {
    private enum Phase { case running, stopping, stopped }

    private struct Mailbox {
        var phase = Phase.running
        var incoming: [HTTPTransfer] = []
        var cancellations: [HTTPTransfer] = []
    }

    let configuration: HTTPClientConfiguration
    private let multi: UnsafeMutableRawPointer
    private let mailbox = Locked(Mailbox())
    private var active: [UnsafeMutableRawPointer: HTTPTransfer] = [:]

    init(multi: UnsafeMutableRawPointer, configuration: HTTPClientConfiguration) {
        self.multi = multi
        self.configuration = configuration
    }

    // MARK: Any thread

    /// Queues a transfer for the network thread; false once the loop is stopping.
    func submit(_ transfer: HTTPTransfer) -> Bool {
        mailbox.withLock { box in
            guard box.phase == .running else { return false }
            box.incoming.append(transfer)
            curl_multi_wakeup(multi)
            return true
        }
    }

    func requestCancel(_ transfer: HTTPTransfer) {
        mailbox.withLock { box in
            // While stopping, the loop cancels everything anyway.
            guard box.phase == .running else { return }
            box.cancellations.append(transfer)
            curl_multi_wakeup(multi)
        }
    }

    func requestStop() {
        mailbox.withLock { box in
            guard box.phase == .running else { return }
            box.phase = .stopping
            curl_multi_wakeup(multi)
        }
    }

    /// Releases the multi handle when the network thread could not be started.
    func closeWithoutThread() {
        mailbox.withLock { $0.phase = .stopped }
        curl_multi_cleanup(multi)
    }

    // MARK: Network thread

    func run() {
        while true {
            let (incoming, cancellations, phase) = mailbox.withLock { box in
                defer {
                    box.incoming = []
                    box.cancellations = []
                }
                return (box.incoming, box.cancellations, box.phase)
            }
            for transfer in incoming { start(transfer) }
            for transfer in cancellations { cancel(transfer, .cancelled()) }
            if phase != .running { break }

            var running: Int32 = 0
            let performCode = curl_multi_perform(multi, &running)
            collectFinished()
            if performCode != CURLM_OK { failAll(multiCode: performCode) }
            let pollCode = curl_multi_poll(multi, nil, 0, enforceIdleDeadlines(), nil)
            if pollCode != CURLM_OK { failAll(multiCode: pollCode) }
        }
        // Submissions stopped when the phase left `.running`, so nothing new can arrive.
        for transfer in Array(active.values) {
            cancel(transfer, .cancelled("the HTTP client was shut down"))
        }
        mailbox.withLock { $0.phase = .stopped }
        curl_multi_cleanup(multi)
    }

    private func start(_ transfer: HTTPTransfer) {
        if let error = transfer.validationError ?? transfer.makeHandle(configuration: configuration) {
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
        active[easy] = transfer
    }

    private func cancel(_ transfer: HTTPTransfer, _ error: ParleyError) {
        guard !transfer.isFinished else { return }
        if let easy = transfer.easy {
            active[easy] = nil
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
            guard let transfer = active.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(multi, easy)
            transfer.complete(with: code)
        }
    }

    /// Fails the transfers whose idle watchdog expired; returns how long the loop may
    /// sleep before the next one could expire (at most a second).
    private func enforceIdleDeadlines() -> Int32 {
        let now = ContinuousClock.now
        var sleep = Duration.seconds(1)
        for transfer in Array(active.values) {
            guard let deadline = transfer.idleDeadline else { continue }
            if deadline <= now {
                let seconds = transfer.request.lowSpeedTimeoutSec
                cancel(transfer, ParleyError(.timeout, "no data received for \(seconds) s"))
            } else {
                sleep = min(sleep, deadline - now)
            }
        }
        let (seconds, attoseconds) = sleep.components
        return Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000) + 1
    }

    /// The multi handle itself failed (out of memory, broken wakeup pipe): no transfer can
    /// make progress, so fail them all rather than leave them hanging.
    private func failAll(multiCode: CURLMcode) {
        let error = ParleyError(.internalError, "curl multi failure: \(String(cString: curl_multi_strerror(multiCode)))")
        for transfer in Array(active.values) { cancel(transfer, error) }
    }
}
