import CCurl
import CParleySystem
import Glibc

/// One request's life on the network thread: its curl easy handle, the bytes received so
/// far and the callbacks to run.
///
/// `@unchecked Sendable`: the request and the task-facing API are immutable; everything
/// else is touched only by the network thread (or, for a transfer rejected before it ever
/// reached that thread, only by the thread that created it).
final class HTTPTransfer: @unchecked Sendable {
    enum Mode {
        /// Keep the body, up to this many bytes, and hand it over at the end.
        case buffered(maxBodyBytes: Int)
        /// Hand each chunk to `onData` as it arrives; keep nothing.
        case stream
    }

    let request: HTTPRequest
    let mode: Mode
    let configuration: HTTPClientConfiguration
    /// A problem found in the request before any I/O; the transfer fails with it.
    let validationError: ParleyError?

    // Cleared when the transfer finishes, so that closures capturing the `HTTPTask` do
    // not keep it (and this transfer) alive in a cycle.
    private var onResponseStart: (@Sendable (Int, [HTTPHeader]) -> Void)?
    private var onData: (@Sendable (UnsafeRawBufferPointer) -> Bool)?
    private var completion: (@Sendable (Result<HTTPResponse, ParleyError>) -> Void)?
    private var uploadProgress: HTTPUploadProgress?
    /// Runs after the completion, so the owning client counts the transfer as ended only
    /// once its completion has run. Set before the transfer is submitted.
    var onEnd: (@Sendable (HTTPTransfer) -> Void)?

    private(set) var easy: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// The multipart body; curl reads it until the easy handle is cleaned up.
    private var mime: OpaquePointer?
    /// The files of the multipart body, kept to learn why reading one failed.
    private var uploadSources: [UploadFileSource] = []
    /// Upload bytes curl reported last, to notice sending as activity.
    private var uploadedSoFar: Int64 = 0
    private var lastReportedUpload: (sent: Int64, total: Int64, at: ContinuousClock.Instant)?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// Set by the socket opener when a connection would have taken one of the descriptors the
    /// library keeps free (`parley_descriptor_reserve`).
    private let descriptorRefused: UnsafeMutablePointer<Int32>
    private var status = 0
    private var headers: [HTTPHeader] = []
    private var body: [UInt8] = []
    private var responseStarted = false
    /// Why a callback of ours stopped the transfer; takes precedence over curl's code.
    private var abortReason: ParleyError?
    private(set) var isFinished = false
    /// When the idle watchdog (`lowSpeedTimeoutSec`) fires unless more bytes arrive.
    private(set) var idleDeadline: ContinuousClock.Instant?
    /// The first try's start: the timeouts of a request tried again count from there.
    private var firstStartedAt: ContinuousClock.Instant?
    private var refusedConnects = 0

    init(
        request: HTTPRequest,
        mode: Mode,
        configuration: HTTPClientConfiguration,
        onResponseStart: (@Sendable (Int, [HTTPHeader]) -> Void)? = nil,
        onData: (@Sendable (UnsafeRawBufferPointer) -> Bool)? = nil,
        completion: @escaping @Sendable (Result<HTTPResponse, ParleyError>) -> Void
    ) {
        // The progress closure lives apart from the kept request, so that clearing it at the
        // end breaks any cycle through a captured `HTTPTask`.
        var kept = request
        kept.uploadProgress = nil
        self.request = kept
        self.mode = mode
        self.configuration = configuration
        self.onResponseStart = onResponseStart
        self.onData = onData
        self.completion = completion
        self.uploadProgress = request.uploadProgress
        self.validationError = HTTPTransfer.validate(request)
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        descriptorRefused = .allocate(capacity: 1)
        descriptorRefused.initialize(to: 0)
    }

    deinit {
        // The network thread always releases the easy handle before dropping its reference.
        errorBuffer.deallocate()
        descriptorRefused.deallocate()
    }

    var isStream: Bool {
        if case .stream = mode { return true }
        return false
    }

    // MARK: Finishing

    /// Runs the completion unless it already ran. Network thread (or the creating thread
    /// for a transfer that never got there).
    func finish(_ result: Result<HTTPResponse, ParleyError>) {
        guard !isFinished else { return }
        isFinished = true
        let completion = self.completion
        self.completion = nil
        onResponseStart = nil
        onData = nil
        uploadProgress = nil
        completion?(result)
        let onEnd = self.onEnd
        self.onEnd = nil
        onEnd?(self)
    }

    /// curl reported the transfer done with `code`; the handle has been removed from the multi.
    func complete(with code: CURLcode) {
        let result: Result<HTTPResponse, ParleyError>
        if code == CURLE_OK {
            status = responseCode()
            if isStream { startResponseIfNeeded() }
            reportFinalUploadProgress()
            result = .success(HTTPResponse(status: status, headers: headers, body: body))
        } else if let abortReason {
            result = .failure(abortReason)
        } else if let readFailure = uploadSources.lazy.compactMap(\.failure).first {
            result = .failure(readFailure)
        } else if descriptorRefused.pointee != 0 {
            result = .failure(Self.descriptorsExhausted())
        } else {
            let detail = String(cString: errorBuffer)
            result = .failure(parleyError(forCurlCode: code, detail: detail))
        }
        body = []
        releaseHandle()
        finish(result)
    }

    /// After curl's `code`: how long to wait before trying again, when the connection was
    /// refused, the request asks to ride that out and its connect timeout leaves room.
    func retryDelayAfterRefusedConnect(code: CURLcode) -> Duration? {
        // A connection refused for want of descriptors fails at once: waiting would not free any.
        guard request.retriesRefusedConnect, code == CURLE_COULDNT_CONNECT, abortReason == nil, !responseStarted,
            descriptorRefused.pointee == 0,
            let firstStartedAt
        else { return nil }
        let ceilingMs = min(50 << min(refusedConnects, 4), 500)
        let delay = Duration.milliseconds(Int.random(in: ceilingMs / 2...ceilingMs))
        let elapsed = ContinuousClock.now - firstStartedAt
        // curl's own default connect timeout when the request sets none.
        let connectLimitMs = request.connectTimeoutMs > 0 ? request.connectTimeoutMs : 300_000
        guard elapsed + delay < .milliseconds(connectLimitMs) else { return nil }
        if request.timeoutMs > 0, elapsed + delay >= .milliseconds(request.timeoutMs) { return nil }
        refusedConnects += 1
        return delay
    }

    /// Forgets the failed try (the handle must no longer be in a multi handle); `makeHandle`
    /// starts the next.
    func prepareRetry() {
        releaseHandle()
        status = 0
        headers = []
        body = []
        abortReason = nil
        uploadedSoFar = 0
        lastReportedUpload = nil
        errorBuffer[0] = 0
        descriptorRefused.pointee = 0
    }

    /// A connection refused because the process is out of descriptors but for the reserve.
    static func descriptorsExhausted() -> ParleyError {
        ParleyError(.network, "no file descriptor left for a connection: the process holds all but the last "
            + "\(PARLEY_DESCRIPTOR_RESERVE) of its limit (RLIMIT_NOFILE \(parley_descriptor_limit())), "
            + "which the library leaves free; close clients or raise the limit")
    }

    /// Milliseconds left of `limitMs` since the first try (at least 1); 0 stays 0 (no limit).
    private func remaining(ofMs limitMs: Int) -> Int {
        guard limitMs > 0, let firstStartedAt else { return limitMs }
        let (seconds, attoseconds) = (ContinuousClock.now - firstStartedAt).components
        let elapsedMs = Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
        return max(limitMs - elapsedMs, 1)
    }

    /// Frees the curl resources. The handle must no longer be in a multi handle.
    func releaseHandle() {
        if let easy {
            curl_easy_cleanup(easy)
            self.easy = nil
        }
        // After the easy handle, which may read the body until its cleanup.
        if let mime {
            curl_mime_free(mime)
            self.mime = nil
        }
        if let headerList {
            curl_slist_free_all(headerList)
            self.headerList = nil
        }
    }

    // MARK: Setting up

    /// Creates and configures the easy handle. On failure nothing is left allocated.
    func makeHandle() -> ParleyError? {
        if firstStartedAt == nil { firstStartedAt = .now }
        noteActivity()
        guard let easy = curl_easy_init() else {
            return ParleyError(.noMemory, "curl_easy_init failed")
        }
        self.easy = easy
        if let error = configure(easy, configuration) {
            releaseHandle()
            return error
        }
        return nil
    }

    private func configure(_ easy: UnsafeMutableRawPointer, _ configuration: HTTPClientConfiguration) -> ParleyError? {
        var failure: ParleyError?
        func check(_ code: CURLcode, _ what: String) {
            if code != CURLE_OK, failure == nil {
                failure = parleyError(forCurlCode: code, detail: "cannot set \(what)")
            }
        }
        func setLong(_ option: CURLoption, _ value: Int, _ what: String) {
            check(parley_curl_easy_setopt_long(easy, option, value), what)
        }
        func setString(_ option: CURLoption, _ value: String, _ what: String) {
            check(value.withCString { parley_curl_easy_setopt_ptr(easy, option, $0) }, what)
        }

        let context = Unmanaged.passUnretained(self).toOpaque()
        check(parley_curl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer), "the error buffer")
        check(parley_curl_easy_setopt_opensocket(easy, curlOpenSocketCallback, descriptorRefused), "the socket opener")
        setString(CURLOPT_URL, request.url, "the URL")
        // Signals cannot be used for timeouts in a multi-threaded host process.
        setLong(CURLOPT_NOSIGNAL, 1, "NOSIGNAL")
        setString(CURLOPT_PROTOCOLS_STR, "http,https", "the allowed protocols")
        setString(CURLOPT_REDIR_PROTOCOLS_STR, "http,https", "the allowed redirect protocols")
        setLong(CURLOPT_FOLLOWLOCATION, 0, "FOLLOWLOCATION")
        setString(CURLOPT_USERAGENT, configuration.userAgent, "the user agent")
        setLong(CURLOPT_SSL_VERIFYPEER, configuration.verifyTLS ? 1 : 0, "SSL_VERIFYPEER")
        setLong(CURLOPT_SSL_VERIFYHOST, configuration.verifyTLS ? 2 : 0, "SSL_VERIFYHOST")
        if let caFile = configuration.caFile { setString(CURLOPT_CAINFO, caFile, "the CA file") }
        if let proxy = configuration.proxy { setString(CURLOPT_PROXY, proxy, "the proxy") }
        setLong(CURLOPT_TIMEOUT_MS, remaining(ofMs: request.timeoutMs), "the timeout")
        setLong(CURLOPT_CONNECTTIMEOUT_MS, remaining(ofMs: request.connectTimeoutMs), "the connect timeout")
        // Notices a dead peer on a long idle stream.
        setLong(CURLOPT_TCP_KEEPALIVE, 1, "TCP_KEEPALIVE")
        setLong(CURLOPT_MAXAGE_CONN, NetworkLoop.idleConnectionMaxAgeSeconds, "MAXAGE_CONN")
        check(parley_curl_easy_setopt_write_fn(easy, CURLOPT_WRITEFUNCTION, curlWriteCallback), "the write callback")
        check(parley_curl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, context), "the write context")
        check(parley_curl_easy_setopt_write_fn(easy, CURLOPT_HEADERFUNCTION, curlHeaderCallback), "the header callback")
        check(parley_curl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, context), "the header context")
        if case .buffered(let maxBodyBytes) = mode {
            // Any encoding curl can decode; the size limit applies to the decoded bytes.
            setString(CURLOPT_ACCEPT_ENCODING, "", "ACCEPT_ENCODING")
            // Refuses early when Content-Length already says too much.
            check(parley_curl_easy_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxBodyBytes)), "MAXFILESIZE")
        }
        if uploadProgress != nil || request.lowSpeedTimeoutSec > 0 {
            check(parley_curl_easy_setopt_xferinfo_fn(easy, CURLOPT_XFERINFOFUNCTION, curlTransferInfoCallback), "the progress callback")
            check(parley_curl_easy_setopt_ptr(easy, CURLOPT_XFERINFODATA, context), "the progress context")
            setLong(CURLOPT_NOPROGRESS, 0, "NOPROGRESS")
        }
        if let error = failure { return error }

        if let parts = request.multipart {
            if let error = setMultipart(easy, parts) { return error }
            return setHeaders(easy, usesBody: true, multipart: true)
        }
        let usesBody = setMethodAndBody(easy, check: check)
        if let error = failure { return error }
        return setHeaders(easy, usesBody: usesBody, multipart: false)
    }

    /// Opens the files and builds the multipart body; curl then sends it with POST (or the
    /// request's own method).
    private func setMultipart(_ easy: UnsafeMutableRawPointer, _ parts: [HTTPBodyPart]) -> ParleyError? {
        switch MultipartBody.build(parts, on: easy) {
        case .failure(let error):
            return error
        case .success(let (mime, sources)):
            self.mime = mime
            uploadSources = sources
        }
        var code = parley_curl_easy_setopt_ptr(easy, CURLOPT_MIMEPOST, UnsafeRawPointer(mime))
        if code == CURLE_OK && request.method != "POST" {
            code = request.method.withCString { parley_curl_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, $0) }
        }
        return code == CURLE_OK ? nil : parleyError(forCurlCode: code, detail: "cannot set the multipart body")
    }

    /// Returns whether the request carries a body (curl's POSTFIELDS path).
    private func setMethodAndBody(_ easy: UnsafeMutableRawPointer, check: (CURLcode, String) -> Void) -> Bool {
        let method = request.method
        if method == "HEAD" {
            check(parley_curl_easy_setopt_long(easy, CURLOPT_NOBODY, 1), "NOBODY")
            return false
        }
        if request.body == nil && method == "GET" {
            check(parley_curl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1), "HTTPGET")
            return false
        }
        // A POST without a body still says `Content-Length: 0`.
        let body = request.body ?? (method == "POST" ? [] : nil)
        if let body {
            check(parley_curl_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)), "the body size")
            // COPYPOSTFIELDS: curl keeps its own copy, so the array need not outlive this call.
            let code = body.withUnsafeBytes { raw in
                if let base = raw.baseAddress, !raw.isEmpty {
                    return parley_curl_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, base)
                }
                return "".withCString { parley_curl_easy_setopt_ptr(easy, CURLOPT_COPYPOSTFIELDS, $0) }
            }
            check(code, "the body")
        }
        if method != "POST" || body == nil {
            check(method.withCString { parley_curl_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, $0) }, "the method")
        }
        return body != nil
    }

    private func setHeaders(_ easy: UnsafeMutableRawPointer, usesBody: Bool, multipart: Bool) -> ParleyError? {
        var lines: [String] = []
        var hasExpect = false
        var hasContentType = false
        for header in request.headers {
            let name = asciiLowercased(header.name)
            if name == "expect" { hasExpect = true }
            if name == "content-type" { hasContentType = true }
            // "Name:" with nothing after it would tell curl to drop the header; "Name;" sends it empty.
            lines.append(header.value.isEmpty ? "\(header.name);" : "\(header.name): \(header.value)")
        }
        // No "Expect: 100-continue" round trip before sending a body.
        if !hasExpect { lines.append("Expect:") }
        // No invented form content type: the body goes out as the caller labelled it. A
        // multipart body's type names its boundary, which only curl knows.
        if usesBody && !multipart && !hasContentType { lines.append("Content-Type:") }
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            guard let extended = curl_slist_append(list, line) else {
                if let list { curl_slist_free_all(list) }
                return ParleyError(.noMemory, "cannot build the header list")
            }
            list = extended
        }
        headerList = list
        let code = parley_curl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, UnsafeRawPointer(list))
        return code == CURLE_OK ? nil : parleyError(forCurlCode: code, detail: "cannot set the headers")
    }

    // MARK: curl callbacks (network thread, inside curl_multi_socket_action)

    private func noteActivity() {
        if request.lowSpeedTimeoutSec > 0 {
            idleDeadline = .now + .seconds(request.lowSpeedTimeoutSec)
        }
    }

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        noteActivity()
        guard !bytes.isEmpty else { return 0 }
        switch mode {
        case .stream:
            startResponseIfNeeded()
            guard let onData else { return bytes.count }
            if onData(bytes) { return bytes.count }
            abortReason = .cancelled("the stream was stopped by its data handler")
            return 0
        case .buffered(let maxBodyBytes):
            if body.count + bytes.count > maxBodyBytes {
                abortReason = ParleyError(.limitExceeded, "the response body exceeds \(maxBodyBytes) bytes")
                return 0
            }
            body.append(contentsOf: bytes)
            return bytes.count
        }
    }

    fileprivate func receiveHeaderLine(_ raw: UnsafeRawBufferPointer) -> Int {
        noteActivity()
        var line = raw[...]
        while let last = line.last, last == 0x0A || last == 0x0D { line = line.dropLast() }
        if line.isEmpty {
            // End of a header block. 1xx and proxy CONNECT blocks report no final code yet.
            if isStream && !responseStarted && responseCode() >= 200 { startResponseIfNeeded() }
            return raw.count
        }
        if line.starts(with: "HTTP/".utf8) {
            // A new response (after 1xx or a proxy's CONNECT answer): keep only the final one's headers.
            headers = []
            return raw.count
        }
        if let first = line.first, first == 0x20 || first == 0x09, !headers.isEmpty {
            // Obsolete line folding: continues the previous header's value.
            let more = trimmed(line)
            headers[headers.count - 1].value += " " + String(decoding: more, as: UTF8.self)
            return raw.count
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return raw.count }
        let name = asciiLowercased(String(decoding: line[..<colon], as: UTF8.self))
        let value = String(decoding: trimmed(line[(colon + 1)...]), as: UTF8.self)
        headers.append(HTTPHeader(name, value))
        return raw.count
    }

    /// curl's progress report (upload and download counters), inside curl_multi_socket_action.
    fileprivate func transferInfo(uploadTotal: Int64, uploaded: Int64) -> Int32 {
        if uploaded > uploadedSoFar {
            uploadedSoFar = uploaded
            noteActivity()
        }
        // curl reports a total of 0 until it knows the body's size.
        if uploadTotal > 0 { reportUploadProgress(sent: uploaded, total: uploadTotal) }
        return 0
    }

    /// Throttled: a call when 50 ms passed or another percent went out since the last
    /// call, and always for the last byte. Never a smaller `sent` than reported before
    /// (curl restarts its counter when it rewinds the body for a retry).
    private func reportUploadProgress(sent: Int64, total: Int64) {
        guard let uploadProgress, sent <= total else { return }
        let now = ContinuousClock.now
        if let last = lastReportedUpload {
            if sent < last.sent || (sent == last.sent && total == last.total) { return }
            let newPercent = sent * 100 / total > last.sent * 100 / total
            if sent != total && !newPercent && now - last.at < .milliseconds(50) { return }
        }
        lastReportedUpload = (sent, total, now)
        uploadProgress(sent, total)
    }

    /// The transfer succeeded: if the whole body went out and the last report did not say
    /// so yet (curl had no callback after the last byte), say it now, before the completion.
    private func reportFinalUploadProgress() {
        guard uploadProgress != nil, let easy else { return }
        var total: curl_off_t = -1
        var sent: curl_off_t = -1
        guard parley_curl_easy_getinfo_off(easy, CURLINFO_CONTENT_LENGTH_UPLOAD_T, &total) == CURLE_OK,
            parley_curl_easy_getinfo_off(easy, CURLINFO_SIZE_UPLOAD_T, &sent) == CURLE_OK,
            total >= 0, sent == total
        else { return }
        if let last = lastReportedUpload, last.sent == sent, last.total == total { return }
        lastReportedUpload = (Int64(sent), Int64(total), .now)
        uploadProgress?(Int64(sent), Int64(total))
    }

    private func startResponseIfNeeded() {
        guard !responseStarted else { return }
        responseStarted = true
        status = responseCode()
        onResponseStart?(status, headers)
    }

    private func responseCode() -> Int {
        guard let easy else { return status }
        var code = 0
        return parley_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK ? code : 0
    }

    private func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        var result = bytes
        while let first = result.first, first == 0x20 || first == 0x09 { result = result.dropFirst() }
        while let last = result.last, last == 0x20 || last == 0x09 { result = result.dropLast() }
        return result
    }

    // MARK: Validation

    private static func validate(_ request: HTTPRequest) -> ParleyError? {
        if request.method.isEmpty || !request.method.utf8.allSatisfy(isTokenByte) {
            return .invalidArgument("invalid HTTP method '\(request.method)'")
        }
        if request.url.isEmpty || request.url.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            return .invalidArgument("the URL is empty or contains control characters")
        }
        for header in request.headers {
            if header.name.isEmpty || !header.name.utf8.allSatisfy(isTokenByte) {
                return .invalidArgument("invalid HTTP header name '\(header.name)'")
            }
            if header.value.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D || $0 == 0 }) {
                return .invalidArgument("the value of header '\(header.name)' contains CR, LF or NUL")
            }
        }
        if request.timeoutMs < 0 || request.connectTimeoutMs < 0 || request.lowSpeedTimeoutSec < 0 {
            return .invalidArgument("timeouts must not be negative")
        }
        if let parts = request.multipart {
            if request.body != nil {
                return .invalidArgument("a request has either a body or a multipart body, not both")
            }
            if request.method == "HEAD" {
                return .invalidArgument("a HEAD request cannot carry a multipart body")
            }
            if request.headers.contains(where: { asciiLowercased($0.name) == "content-type" }) {
                return .invalidArgument("a multipart request gets its Content-Type (with the boundary) from the client")
            }
            return MultipartBody.validationError(of: parts)
        }
        return nil
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

private let curlWriteCallback: curl_write_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<HTTPTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
}

private let curlTransferInfoCallback: curl_xferinfo_callback = { context, _, _, uploadTotal, uploaded in
    guard let context else { return 0 }
    let transfer = Unmanaged<HTTPTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.transferInfo(uploadTotal: Int64(uploadTotal), uploaded: Int64(uploaded))
}

private let curlHeaderCallback: curl_write_callback = { data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<HTTPTransfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: size * count))
}

/// curl's socket opener: refuses a socket that would take one of the descriptors the library
/// keeps free (`PARLEY_DESCRIPTOR_RESERVE`), and sets the transfer's flag to say why.
private let curlOpenSocketCallback: curl_opensocket_callback = { refused, _, address in
    guard let address else { return CURL_SOCKET_BAD }
    let fd = socket(address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
    if fd >= 0, parley_descriptor_in_reserve(Int(fd)) != 0 {
        close(fd)
        refused?.assumingMemoryBound(to: Int32.self).pointee = 1
        return CURL_SOCKET_BAD
    }
    return fd
}
