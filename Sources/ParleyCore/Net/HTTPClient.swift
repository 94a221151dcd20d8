import CCurl
import Glibc

import CCurl
import Glibc

/// An HTTP/1.1 + HTTP/2 client over libcurl. Its transfers run on one of the process's
/// network threads (`NetworkRuntime`), shared with other clients; all curl calls and all
/// callbacks run on that thread, so callers hop to their own executor in their callbacks
/// and must not block there.
///
/// At most `maxConnections` transfers of one client run at once (0: no limit); the others
/// wait, in order, for one to end.
public final class HTTPClient: Sendable {
    private let loop: NetworkLoop
    private let configuration: HTTPClientConfiguration
    private let transfers: ClientTransfers

    public init(configuration: HTTPClientConfiguration = HTTPClientConfiguration()) throws(ParleyError) {
        guard configuration.maxConnections >= 0, configuration.maxResponseBytes >= 0 else {
            throw .invalidArgument("maxConnections and maxResponseBytes must not be negative")
        }
        self.configuration = configuration
        self.loop = try NetworkRuntime.assignLoop()
        self.transfers = ClientTransfers(limit: configuration.maxConnections)
    }

    deinit {
        shutdown()
        NetworkRuntime.release(loop)
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
        let mode = HTTPTransfer.Mode.buffered(maxBodyBytes: configuration.maxResponseBytes)
        return submit(request, mode: mode, completion: completion)
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
        submit(request, mode: .stream, onResponseStart: onResponseStart, onData: onBytes, completion: completion)
    }

    /// Cancels every transfer of this client (each completes with `.cancelled`, once) and
    /// returns when their completions have run. Idempotent. Called on the network thread
    /// (from a callback of a transfer) it cannot wait for that thread: the completions then
    /// run right after the current callback returns.
    public func shutdown() {
        let ending = transfers.close()
        let error = ParleyError.cancelled("the HTTP client was shut down")
        for transfer in ending { loop.requestCancel(transfer, error) }
        if loop.isCurrentThread { return }
        transfers.waitUntilNoneRun()
    }

    private func submit(
        _ request: HTTPRequest,
        mode: HTTPTransfer.Mode,
        onResponseStart: (@Sendable (Int, [HTTPHeader]) -> Void)? = nil,
        onData: (@Sendable (UnsafeRawBufferPointer) -> Bool)? = nil,
        completion: @escaping @Sendable (Result<HTTPResponse, ParleyError>) -> Void
    ) -> HTTPTask {
        let transfers = self.transfers
        let loop = self.loop
        let transfer = HTTPTransfer(
            request: request, mode: mode, configuration: configuration,
            onResponseStart: onResponseStart, onData: onData, completion: completion)
        transfer.onEnd = { ended in
            if let next = transfers.ended(ended) { loop.submit(next) }
        }
        switch transfers.admit(transfer) {
        case .run: loop.submit(transfer)
        case .wait: break
        case .closed: transfer.finish(.failure(.invalidState("the HTTP client has been shut down")))
        }
        return HTTPTask(transfer: transfer, loop: loop)
    }
}

/// The transfers of one client: those running on its loop and those waiting for a place
/// under its limit.
private final class ClientTransfers: @unchecked Sendable {
    enum Admission { case run, wait, closed }

    private let limit: Int
    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var closed = false
    private var running: [ObjectIdentifier: HTTPTransfer] = [:]
    private var waiting: [HTTPTransfer] = []

    init(limit: Int) { self.limit = limit }

    func admit(_ transfer: HTTPTransfer) -> Admission {
        lock.withLock {
            if closed { return .closed }
            if limit == 0 || running.count < limit {
                running[ObjectIdentifier(transfer)] = transfer
                return .run
            }
            waiting.append(transfer)
            return .wait
        }
    }

    /// A transfer finished (its completion ran): returns the next one to start, if any.
    func ended(_ transfer: HTTPTransfer) -> HTTPTransfer? {
        lock.withLock {
            guard running.removeValue(forKey: ObjectIdentifier(transfer)) != nil else {
                // Cancelled while it waited.
                waiting.removeAll { $0 === transfer }
                return nil
            }
            defer { if running.isEmpty { lock.broadcast() } }
            guard !closed, !waiting.isEmpty else { return nil }
            let next = waiting.removeFirst()
            running[ObjectIdentifier(next)] = next
            return next
        }
    }

    /// Refuses new transfers; returns every transfer not yet finished, which now count as
    /// running until their completions ran.
    func close() -> [HTTPTransfer] {
        lock.withLock {
            closed = true
            for transfer in waiting { running[ObjectIdentifier(transfer)] = transfer }
            waiting = []
            return Array(running.values)
        }
    }

    func waitUntilNoneRun() {
        lock.withLock {
            while !running.isEmpty { lock.wait() }
        }
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
