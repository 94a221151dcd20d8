// A transport test fixture: a TCP listener on 127.0.0.1 whose every byte on the wire is
// scripted by the test (fixed answers, delays, chunked streams with pauses, silence,
// connections closed mid-response). It is not a model of the chat server.
import Dispatch
import Glibc
import Synchronization
@testable import ParleyCore

/// Runs `body` on a new detached POSIX thread (blocking socket work stays off the
/// cooperative pool).
func startDetachedThread(_ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    let created = pthread_create(&thread, nil, { context in
        guard let context else { return nil }
        Unmanaged<Box>.fromOpaque(context).takeRetainedValue().body()
        return nil
    }, context)
    if created == 0 {
        pthread_detach(thread)
    } else {
        Unmanaged<Box>.fromOpaque(context).release()
    }
}

struct LoopbackError: Error, CustomStringConvertible {
    var description: String
}

/// A request as the peer read it off the wire.
struct RecordedRequest: Sendable {
    var method: String
    var target: String
    /// Names lower-cased, in arrival order.
    var headers: [HTTPHeader]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name == name.lowercased() }?.value
    }
}

/// One accepted connection, used by the scripted handler on its own thread.
final class LoopbackConnection: @unchecked Sendable {
    private let fd: Int32
    private var pending: [UInt8] = []
    private let onRequest: @Sendable (RecordedRequest) -> Void
    private(set) var isClosed = false

    fileprivate init(fd: Int32, onRequest: @escaping @Sendable (RecordedRequest) -> Void) {
        self.fd = fd
        self.onRequest = onRequest
    }

    deinit { close() }

    /// Reads one request (head, then a Content-Length body). nil on EOF or timeout.
    func readRequest(timeoutMs: Int = 3000) -> RecordedRequest? {
        let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
        var headEnd: Int?
        while headEnd == nil {
            headEnd = findHeadEnd()
            if headEnd == nil, !receiveMore(until: deadline) { return nil }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: pending[..<headEnd], as: UTF8.self)
        pending.removeFirst(headEnd + 4)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.removeFirst().split(separator: " ").map(String.init)
        guard requestLine.count == 3 else { return nil }
        var headers: [HTTPHeader] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingHTTPSpaces()
            headers.append(HTTPHeader(name, value))
        }
        let length = headers.first { $0.name == "content-length" }.flatMap { Int($0.value) } ?? 0
        while pending.count < length {
            if !receiveMore(until: deadline) { return nil }
        }
        let body = Array(pending[..<length])
        pending.removeFirst(length)
        let request = RecordedRequest(method: requestLine[0], target: requestLine[1], headers: headers, body: body)
        onRequest(request)
        return request
    }

    /// Reads and discards whatever arrives until at least one byte came. False on EOF/timeout.
    func readSomething(timeoutMs: Int = 3000) -> Bool {
        if !pending.isEmpty {
            pending = []
            return true
        }
        let ok = receiveMore(until: ContinuousClock.now + .milliseconds(timeoutMs))
        pending = []
        return ok
    }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += sent
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Sends one chunk of a `Transfer-Encoding: chunked` body.
    @discardableResult
    func sendChunk(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return send(String(bytes.count, radix: 16) + "\r\n" + text + "\r\n")
    }

    /// Sends a complete response with a Content-Length.
    @discardableResult
    func respond(status: Int = 200, reason: String = "OK", headers: [String] = [], body: [UInt8]) -> Bool {
        var head = "HTTP/1.1 \(status) \(reason)\r\nContent-Length: \(body.count)\r\n"
        for header in headers { head += header + "\r\n" }
        return send(Array((head + "\r\n").utf8) + body)
    }

    func pause(ms: Int) {
        usleep(UInt32(ms) * 1000)
    }

    /// Waits (reading and discarding) until the client closes the connection.
    /// True if it did within the time.
    func waitForClientClose(timeoutMs: Int = 5000) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
        while true {
            if ContinuousClock.now >= deadline { return false }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 50)
            if ready < 0 && errno != EINTR { return true }
            if ready > 0 {
                var scratch = [UInt8](repeating: 0, count: 4096)
                let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { return true }
            }
        }
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(fd)
    }

    private func findHeadEnd() -> Int? {
        guard pending.count >= 4 else { return nil }
        for index in 0...(pending.count - 4)
        where pending[index] == 13 && pending[index + 1] == 10 && pending[index + 2] == 13 && pending[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// Appends whatever arrives before the deadline; false on EOF, error or timeout.
    private func receiveMore(until deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { return false }
            let milliseconds = Int32(min(remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000, 1000))
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, max(1, milliseconds))
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            if ready == 0 { continue }
            var scratch = [UInt8](repeating: 0, count: 16384)
            let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return false }
            pending.append(contentsOf: scratch[..<count])
            return true
        }
    }
}

/// A listener on 127.0.0.1 with an ephemeral port. Each accepted connection runs
/// `handler` on its own thread; the connection is closed when the handler returns.
/// Listening stops with `stop()` or when the peer is released.
final class LoopbackPeer: Sendable {
    /// What the accept thread holds, so that releasing the peer can stop it.
    private final class Listener: Sendable {
        let fd: Int32
        let stopping = Atomic<Bool>(false)
        let acceptLoopDone = DispatchSemaphore(value: 0)
        let recorded = Locked<[RecordedRequest]>([])
        let accepted = Atomic<Int>(0)

        init(fd: Int32) { self.fd = fd }

        func run(_ handler: @escaping @Sendable (LoopbackConnection) -> Void) {
            defer { acceptLoopDone.signal() }
            while !stopping.load(ordering: .relaxed) {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 20) > 0 else { continue }
                let client = accept(fd, nil, nil)
                guard client >= 0 else { continue }
                accepted.add(1, ordering: .relaxed)
                let connection = LoopbackConnection(fd: client) { [self] request in
                    recorded.withLock { $0.append(request) }
                }
                startDetachedThread {
                    handler(connection)
                    connection.close()
                }
            }
        }

        func stop() {
            if stopping.exchange(true, ordering: .relaxed) { return }
            _ = acceptLoopDone.wait(timeout: .now() + 2)
            Glibc.close(fd)
        }
    }

    let port: UInt16
    private let listener: Listener

    init(handler: @escaping @Sendable (LoopbackConnection) -> Void) throws {
        let (fd, port) = try LoopbackPeer.bindLoopback(listen: true)
        let listener = Listener(fd: fd)
        self.listener = listener
        self.port = port
        startDetachedThread { listener.run(handler) }
    }

    deinit { listener.stop() }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Requests read so far by all connections, in reading order.
    var requests: [RecordedRequest] { listener.recorded.withLock { $0 } }
    var connectionCount: Int { listener.accepted.load(ordering: .relaxed) }

    /// Stops accepting (handlers already running finish on their own).
    func stop() { listener.stop() }

    /// A socket bound to 127.0.0.1 on a free port. Without `listen` it holds the port so
    /// that connections to it are refused.
    static func bindLoopback(listen shouldListen: Bool) throws -> (Int32, UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LoopbackError(description: "socket failed: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            Glibc.close(fd)
            throw LoopbackError(description: "bind failed: \(errno)")
        }
        if shouldListen {
            guard listen(fd, 64) == 0 else {
                Glibc.close(fd)
                throw LoopbackError(description: "listen failed: \(errno)")
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            Glibc.close(fd)
            throw LoopbackError(description: "getsockname failed: \(errno)")
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }
}

/// Collects completion results across threads and lets a test wait for them, bounded.
final class CompletionLog: Sendable {
    private let results = Locked<[Result<HTTPResponse, ParleyError>]>([])
    private let arrivals = DispatchSemaphore(value: 0)

    func record(_ result: Result<HTTPResponse, ParleyError>) {
        results.withLock { $0.append(result) }
        arrivals.signal()
    }

    var callback: @Sendable (Result<HTTPResponse, ParleyError>) -> Void {
        { [self] result in record(result) }
    }

    /// Waits until `count` results have arrived in total; false on timeout.
    func wait(count: Int = 1, timeoutMs: Int = 10_000) -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(timeoutMs)
        while all.count < count {
            if arrivals.wait(timeout: deadline) == .timedOut { return all.count >= count }
        }
        return true
    }

    var all: [Result<HTTPResponse, ParleyError>] { results.withLock { $0 } }
    var count: Int { all.count }

    var errorCodes: [ParleyErrorCode?] {
        all.map { if case .failure(let error) = $0 { error.code } else { nil } }
    }
}

/// Blocks until `condition` holds or the time runs out; returns the condition's last value.
func pollUntil(timeoutMs: Int = 3000, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        usleep(5000)
    }
    return true
}

extension Duration {
    var wholeMilliseconds: Int {
        Int(components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000)
    }
}

extension StringProtocol {
    func trimmingHTTPSpaces() -> String {
        var slice = Substring(self)
        while slice.first == " " || slice.first == "\t" { slice = slice.dropFirst() }
        while slice.last == " " || slice.last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
