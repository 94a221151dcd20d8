import Glibc

// Sending through the outbox (shared/SEMANTICS.md "Sending"): a send is stored as a pending
// local message plus an outbox row in one transaction before any network I/O, then the
// outbox is drained in order, one channel at a time. The server dedups by `req_id`, so a
// resend after a timeout or a crash never makes a second copy.
//
// Local events (through the event handler): `message_pending` (stored), `message_sent`
// (accepted; payload = the server's message), `message_failed` (payload = the failed local
// message, with `error_code` / `error_message`), `message_canceled`, `message_resend_started`.

/// A send the engine accepted: its operation id (for the completion) and the pending
/// message (`message_id` 0, `sending_status` "pending", its `req_id`), as JSON text.
public struct AcceptedSend: Sendable {
    public let operationID: UInt64
    public let pendingMessage: String
    public let reqID: String
}

extension ParleyClient {
    static let userMessageKeys: Set<String> = [
        "message", "req_id", "custom_type", "data", "mention_type", "mentioned_user_ids", "sorted_metaarray",
        "parent_message_id", "is_reply_to_channel", "is_silent", "mark_as_read",
    ]
    static let fileMessageKeys: Set<String> = [
        "url", "file_path", "file_name", "file_size", "file_type", "thumbnails", "req_id", "custom_type", "data",
        "mention_type", "mentioned_user_ids", "sorted_metaarray", "parent_message_id", "is_reply_to_channel",
        "is_silent", "mark_as_read",
    ]

    /// Sends a user message (`MESG`). Returns at once with the pending message, already
    /// stored; the completion runs once with the server's message or the failure.
    public func sendUserMessage(
        channelURL: String, params: JSONValue,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> AcceptedSend {
        let reader = try JSONReader(params, path: "params")
        try reader.rejectUnknownKeys(allowed: Self.userMessageKeys)
        let text = try reader.string("message")
        guard !text.isEmpty else { throw .invalidArgument("params.message: must not be empty") }
        var request = reader.fields
        request["message_type"] = .string("MESG")
        var pending = Self.pendingFields(reader.fields)
        pending["type"] = .string("MESG")
        pending["message"] = .string(text)
        return try acceptSend(channelURL: channelURL, kind: "user", request: request, pending: pending, reader: reader,
                              progress: nil, completion: completion)
    }

    /// Sends a file message (`FILE`): `url` (with optional `file_name`, `file_size`,
    /// `file_type`) for a file hosted elsewhere, or `file_path` for a local file that is
    /// uploaded with the message (`progress` reports bytes sent / total; `cancelMessage`
    /// stops it). Returns at once with the pending message.
    public func sendFileMessage(
        channelURL: String, params: JSONValue, progress: HTTPUploadProgress? = nil,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> AcceptedSend {
        let reader = try JSONReader(params, path: "params")
        try reader.rejectUnknownKeys(allowed: Self.fileMessageKeys)
        let url = try reader.optionalString("url")
        let path = try reader.optionalString("file_path")
        guard (url == nil) != (path == nil) else {
            throw .invalidArgument("params: give exactly one of url (a hosted file) and file_path (a local file to upload)")
        }
        var file: [String: JSONValue] = [:]
        var kind = "file_url"
        if let path {
            guard !path.isEmpty else { throw .invalidArgument("params.file_path: must not be empty") }
            var info = stat()
            guard stat(path, &info) == 0 else {
                throw ParleyError(.io, "params.file_path: cannot read '\(path)': \(String(cString: strerror(errno)))")
            }
            guard (info.st_mode & S_IFMT) == S_IFREG else { throw .invalidArgument("params.file_path: '\(path)' is not a regular file") }
            kind = "file_upload"
            let name = try reader.optionalString("file_name") ?? String(path.split(separator: "/").last ?? "file")
            file = ["name": .string(name), "size": .int(Int64(info.st_size)), "url": .string(""),
                    "type": .string(try reader.optionalString("file_type") ?? "")]
        } else if let url {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw .invalidArgument("params.url: expected an http:// or https:// URL, got '\(url)'")
            }
            file = ["url": .string(url), "name": .string(try reader.optionalString("file_name") ?? ""),
                    "size": .int(try reader.optionalInt("file_size", in: 0...Int64.max) ?? 0),
                    "type": .string(try reader.optionalString("file_type") ?? "")]
        }
        var request = reader.fields
        request["message_type"] = .string("FILE")
        var pending = Self.pendingFields(reader.fields)
        pending["type"] = .string("FILE")
        pending["message"] = .string("")
        pending["file"] = .object(file)
        if let thumbnails = reader.fields["thumbnails"] { pending["thumbnails"] = thumbnails }
        return try acceptSend(channelURL: channelURL, kind: kind, request: request, pending: pending, reader: reader,
                              progress: progress, completion: completion)
    }

    /// Progress reports reach the app on the callback context, like every other callback.
    private func onCallbackContext(_ progress: @escaping HTTPUploadProgress) -> HTTPUploadProgress {
        let dispatcher = self.dispatcher
        return { sent, total in dispatcher.enqueue { progress(sent, total) } }
    }

    /// The fields a pending message copies from the send parameters.
    private static func pendingFields(_ params: [String: JSONValue]) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [:]
        for key in ["custom_type", "data", "mention_type", "sorted_metaarray", "parent_message_id", "is_reply_to_channel"] {
            if let value = params[key] { fields[key] = value }
        }
        if let ids = params["mentioned_user_ids"]?.arrayValue {
            fields["mentioned_users"] = .array(ids.map { .object(["user_id": $0]) })
        }
        return fields
    }

    private func acceptSend(
        channelURL: String, kind: String, request: [String: JSONValue], pending: [String: JSONValue], reader: JSONReader,
        progress: HTTPUploadProgress?, completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> AcceptedSend {
        guard !channelURL.isEmpty else { throw .invalidArgument("channel_url must not be empty") }
        if let parent = request["parent_message_id"], parent.int64Value == nil || parent.int64Value! < 0 {
            throw .invalidArgument("params.parent_message_id: expected a non-negative integer")
        }
        let reqID = try reader.optionalString("req_id") ?? Self.newRequestID()
        guard !reqID.isEmpty, reqID.utf8.count <= 64 else { throw .invalidArgument("params.req_id: must be 1 to 64 bytes long") }
        var request = request
        request["req_id"] = .string(reqID)
        var message = pending
        message["req_id"] = .string(reqID)
        message["channel_url"] = .string(channelURL)
        message["channel_type"] = .string("group")
        message["created_at"] = .int(Self.nowMs())
        message["updated_at"] = .int(0)
        let engine = self.engine
        var accepted: (UInt64, String)?
        var failure: ParleyError?
        _ = try startOperation(completion) { (id, finish) throws(ParleyError) in
            engine.queue.sync { () -> Void in
                guard let session = engine.session, let cache = engine.cache else {
                    failure = .invalidState("send: not connected (call connect first)")
                    return
                }
                var sender: [String: JSONValue] = ["user_id": .string(session.userID)]
                for key in ["nickname", "profile_url"] { if let value = engine.user?[key] { sender[key] = value } }
                message["user"] = .object(sender)
                do throws(ParleyError) {
                    let stored = try cache.insertPendingMessage(
                        .object(message), outbox: OutboxRequest(kind: kind, requestJSON: JSONValue.object(request).canonicalText))
                    engine.sendFinishers[reqID] = finish
                    if let progress { engine.uploadProgress[reqID] = self.onCallbackContext(progress) }
                    accepted = (id, stored.json)
                    if let json = try? JSONValue.parse(stored.json) {
                        self.emitEvent("message_pending", channelURL: channelURL, payload: json)
                    }
                    self.drainOutbox()
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
        }
        guard let accepted else { throw failure ?? ParleyError(.internalError, "send: not accepted") }
        return AcceptedSend(operationID: accepted.0, pendingMessage: accepted.1, reqID: reqID)
    }

    /// Resends a failed message (same `req_id`). The completion runs once with the outcome.
    public func resendMessage(
        reqID: String, progress: HTTPUploadProgress? = nil,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64 {
        let engine = self.engine
        var failure: ParleyError?
        let id = try startOperation(completion) { (_, finish) throws(ParleyError) in
            engine.queue.sync { () -> Void in
                guard engine.session != nil, let cache = engine.cache else {
                    failure = .invalidState("resend: not connected (call connect first)")
                    return
                }
                do throws(ParleyError) {
                    guard let local = try cache.localMessage(reqID: reqID) else {
                        throw ParleyError(.notFound, "resend: no pending or failed message with req_id '\(reqID)'")
                    }
                    guard local.status == .failed else { throw .invalidState("resend: message '\(reqID)' is already pending") }
                    try cache.markPending(reqID: reqID)
                    engine.sendFinishers[reqID] = finish
                    if let progress { engine.uploadProgress[reqID] = self.onCallbackContext(progress) }
                    if let json = try cache.localMessage(reqID: reqID).flatMap({ try? JSONValue.parse($0.json) }) {
                        self.emitEvent("message_resend_started", channelURL: local.channelURL, payload: json)
                    }
                    self.drainOutbox()
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
        }
        return id
    }

    /// Cancels a pending message not yet on the wire, or a file upload in progress: it is
    /// removed (event `message_canceled`) and its completion runs with `.cancelled`. A
    /// failed message is removed the same way. A user message already being sent cannot be
    /// canceled (`.invalidState`): the server may have it already.
    public func cancelMessage(reqID: String) throws(ParleyError) {
        let engine = self.engine
        try engine.sync { () throws(ParleyError) in
            guard let cache = engine.cache else { throw .invalidState("cancel: no cache open (call connect first)") }
            guard let local = try cache.localMessage(reqID: reqID) else {
                throw ParleyError(.notFound, "cancel: no pending or failed message with req_id '\(reqID)'")
            }
            if engine.sendsInFlight.contains(reqID) {
                guard let task = engine.uploadTasks[reqID] else {
                    throw .invalidState("cancel: message '\(reqID)' is on its way to the server and cannot be canceled")
                }
                engine.canceledUploads.insert(reqID)
                task.cancel()
                return
            }
            try cancelLocal(local, cache: cache)
        }
    }

    private func cancelLocal(_ local: CachedLocalMessage, cache: ChatCache) throws(ParleyError) {
        try cache.removeLocalMessage(reqID: local.reqID)
        var fields = (try? JSONValue.parse(local.json))?.objectValue ?? [:]
        fields["sending_status"] = .string("canceled")
        emitEvent("message_canceled", channelURL: local.channelURL, payload: .object(fields))
        engine.uploadProgress[local.reqID] = nil
        engine.sendFinishers.removeValue(forKey: local.reqID)?(.failure(.cancelled("the message was canceled")))
    }

    /// Removes the channel's failed messages; returns their req_ids.
    @discardableResult
    public func removeFailedMessages(channelURL: String) throws(ParleyError) -> [String] {
        let engine = self.engine
        return try engine.sync { () throws(ParleyError) -> [String] in
            guard let cache = engine.cache else { throw .invalidState("no cache open (call connect first)") }
            return try cache.removeFailedMessages(channelURL: channelURL)
        }
    }

    // MARK: Draining the outbox (engine queue)

    /// Sends what the outbox holds, oldest first, one channel at a time; a connection
    /// failure stops that channel (its later messages fail with it and wait for the next
    /// reconnect), a refusal fails only the message refused.
    func drainOutbox() {
        let engine = self.engine
        engine.assertOnQueue()
        if engine.draining {
            engine.drainRequestedAgain = true
            return
        }
        guard engine.session != nil else { return }
        var channels: [String] = []
        engine.withCache("reading the outbox", log: engineLog) { cache throws(ParleyError) in
            channels = try cache.outboxChannelURLs(retryableOnly: true)
        }
        guard !channels.isEmpty else { return }
        engine.draining = true
        engine.drainRequestedAgain = false
        drainChannels(channels, index: 0)
    }

    private func drainChannels(_ channels: [String], index: Int) {
        let engine = self.engine
        guard index < channels.count, engine.session != nil else {
            engine.draining = false
            if engine.drainRequestedAgain { drainOutbox() }
            return
        }
        drainChannel(channels[index]) { self.drainChannels(channels, index: index + 1) }
    }

    private func drainChannel(_ channelURL: String, then next: @escaping @Sendable () -> Void) {
        let engine = self.engine
        var entry: OutboxEntry?
        engine.withCache("reading the outbox", log: engineLog) { cache throws(ParleyError) in
            entry = try cache.outboxEntries(channelURL: channelURL, retryableOnly: true).first
        }
        guard let entry, engine.session != nil else { return next() }
        sendEntry(entry) { connectionLost in
            if let connectionLost {
                self.failRemaining(channelURL: channelURL, error: connectionLost)
                next()
            } else {
                self.drainChannel(channelURL, then: next)
            }
        }
    }

    /// After a connection failure: the channel's other queued messages fail too (retryable),
    /// so that the app sees their state; the next reconnect resends them in order.
    private func failRemaining(channelURL: String, error: ParleyError) {
        var failed: [CachedLocalMessage] = []
        engine.withCache("failing queued messages", log: engineLog) { cache throws(ParleyError) in
            for local in try cache.localMessages(channelURL: channelURL, status: .pending) where !engine.sendsInFlight.contains(local.reqID) {
                try cache.markFailed(reqID: local.reqID, error: error, retryable: true)
                if let updated = try cache.localMessage(reqID: local.reqID) { failed.append(updated) }
            }
        }
        for local in failed { reportFailure(local, error: error) }
    }

    private func reportFailure(_ local: CachedLocalMessage, error: ParleyError) {
        var fields = (try? JSONValue.parse(local.json))?.objectValue ?? [:]
        fields["error_code"] = .int(Int64(error.code.rawValue))
        fields["error_message"] = .string(error.message)
        emitEvent("message_failed", channelURL: local.channelURL, payload: .object(fields))
        engine.uploadProgress[local.reqID] = nil
        engine.sendFinishers.removeValue(forKey: local.reqID)?(.failure(error))
    }

    /// Sends one outbox entry; `done(nil)` unless the connection failed (then `done(error)`).
    private func sendEntry(_ entry: OutboxEntry, done: @escaping @Sendable (ParleyError?) -> Void) {
        let engine = self.engine
        guard let session = engine.session else { return done(nil) }
        let reqID = entry.reqID
        var request: HTTPRequest?
        do throws(ParleyError) {
            guard case .object(var body) = try JSONValue.parse(entry.requestJSON) else {
                throw ParleyError(.cache, "outbox entry \(reqID): request is not a JSON object")
            }
            let path = "/v3/group_channels/\(URLEncoding.encodePathSegment(entry.channelURL))/messages"
            if entry.kind == "file_upload" {
                guard let filePath = body.removeValue(forKey: "file_path")?.stringValue else {
                    throw ParleyError(.cache, "outbox entry \(reqID): upload without file_path")
                }
                request = makeRequest(method: "POST", pathAndQuery: path, body: nil, credential: .session(session.token))
                var parts: [HTTPBodyPart] = []
                for key in body.keys.sorted() {
                    guard let value = body[key] else { continue }
                    let text: String =
                        switch value {
                        case .string(let string): string
                        case .bool(let flag): flag ? "true" : "false"
                        default: value.canonicalText
                        }
                    parts.append(.field(name: key, value: text))
                }
                parts.append(.file(name: "file", path: filePath, fileName: body["file_name"]?.stringValue,
                                   contentType: body["file_type"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }))
                request?.multipart = parts
                request?.uploadProgress = engine.uploadProgress[reqID]
                // Uploads may take long: no whole-transfer limit, a stall limit instead.
                request?.timeoutMs = 0
                request?.lowSpeedTimeoutSec = max(30, configuration.requestTimeoutMs / 1000)
            } else {
                request = makeRequest(method: "POST", pathAndQuery: path, body: .object(body), credential: .session(session.token))
            }
            try engine.cache?.recordOutboxAttempt(reqID: reqID)
        } catch {
            finishSend(reqID: reqID, channelURL: entry.channelURL, .failure(error), done: done)
            return
        }
        guard let request else { return finishSend(reqID: reqID, channelURL: entry.channelURL, .failure(.invalidState("no server_url")), done: done) }
        engine.sendsInFlight.insert(reqID)
        log(.debug, "outbox: sending \(reqID) to \(entry.channelURL)")
        let task = http.send(request) { result in
            let outcome = result.flatMap(Self.decodeAnswer)
            engine.queue.async {
                engine.sendsInFlight.remove(reqID)
                engine.uploadTasks[reqID] = nil
                self.finishSend(reqID: reqID, channelURL: entry.channelURL, outcome, done: done)
            }
        }
        if entry.kind == "file_upload" { engine.uploadTasks[reqID] = task }
    }

    private func finishSend(
        reqID: String, channelURL: String, _ outcome: Result<JSONValue, ParleyError>, done: @escaping @Sendable (ParleyError?) -> Void
    ) {
        let engine = self.engine
        switch outcome {
        case .success(let message):
            engine.withCache("storing a sent message", log: engineLog) { cache throws(ParleyError) in
                try cache.appendRealtimeMessage(message)
                // An answer without our req_id (never from parley-server) must not leave the copy behind.
                try cache.removeLocalMessage(reqID: reqID)
            }
            reportSent(message, reqID: reqID, channelURL: channelURL)
            done(nil)
        case .failure(let error):
            if error.code != .cancelled, let message = acceptedCopy(reqID: reqID, channelURL: channelURL) {
                // The answer was lost, but the server's real-time echo already brought the
                // message (it replaced the pending one): it was delivered, so this is a success.
                log(.info, "outbox: \(reqID) failed on the way back (\(error.message)) but the server has it")
                reportSent(message, reqID: reqID, channelURL: channelURL)
                return done(nil)
            }
            if error.code == .cancelled && engine.canceledUploads.remove(reqID) != nil {
                engine.withCache("canceling an upload", log: engineLog) { cache throws(ParleyError) in
                    if let local = try cache.localMessage(reqID: reqID) { try cancelLocal(local, cache: cache) }
                }
                return done(nil)
            }
            let connectionLost = Self.isConnectionFailure(error)
            var failed: CachedLocalMessage?
            engine.withCache("marking a send failed", log: engineLog) { cache throws(ParleyError) in
                try cache.markFailed(reqID: reqID, error: error, retryable: connectionLost)
                failed = try cache.localMessage(reqID: reqID)
            }
            if let failed { reportFailure(failed, error: error) }
            done(connectionLost ? error : nil)
        }
    }

    /// Tells the app a send was delivered: `message_sent` and the send's completion.
    func reportSent(_ message: JSONValue, reqID: String, channelURL: String) {
        var message = message
        if case .object(var fields) = message {
            fields["sending_status"] = .string("succeeded")
            message = .object(fields)
        }
        engine.recentlySent.insert(reqID)
        emitEvent("message_sent", channelURL: channelURL, payload: message)
        engine.uploadProgress[reqID] = nil
        engine.sendFinishers.removeValue(forKey: reqID)?(.success(message))
    }

    /// The server's copy of a send whose local message is gone (replaced by the echo).
    private func acceptedCopy(reqID: String, channelURL: String) -> JSONValue? {
        var copy: JSONValue?
        engine.withCache("looking up a sent message", log: engineLog) { cache throws(ParleyError) in
            guard try cache.localMessage(reqID: reqID) == nil,
                let stored = try cache.message(channelURL: channelURL, reqID: reqID)
            else { return }
            copy = try JSONValue.parse(stored.json)
        }
        return copy
    }

    /// Failures that resending can fix: the network, timeouts, the server's own trouble.
    static func isConnectionFailure(_ error: ParleyError) -> Bool {
        switch error.code {
        case .network, .timeout: true
        case .server: error.httpStatus >= 500 || error.httpStatus == 429 || error.httpStatus == 408
        default: false
        }
    }

    /// A fresh random request id (32 hex digits).
    public static func newRequestID() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        for _ in 0..<2 {
            var value = generator.next() as UInt64
            for _ in 0..<16 {
                bytes.append(hex[Int(value & 0xF)])
                value >>= 4
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func nowMs() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}
