import Glibc

// Sending through the outbox (shared/SEMANTICS.md "Sending"): a send is stored as a pending
// local message plus an outbox row in one transaction before any network I/O, then the
// outbox is drained in order, one channel at a time. The server dedups by `req_id`, so a
// resend after a timeout or a crash never makes a second copy.
//
// The client side checks the parameters and builds the pending message; the outbox itself
// (storing, draining, resending, canceling) is the Sync layer's (Sync/Engine+Outbox.swift).
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
        _ = try startOperation(completion) { (id, finish) throws(ParleyError) in
            let progress = progress.map(self.onCallbackContext)
            let stored = try engine.sync { () throws(ParleyError) -> CachedLocalMessage in
                guard let current = engine.session.current else { throw .invalidState("send: not connected (call connect first)") }
                var sender: [String: JSONValue] = ["user_id": .string(current.userID)]
                for key in ["nickname", "profile_url"] { if let value = engine.session.user?[key] { sender[key] = value } }
                message["user"] = .object(sender)
                return try engine.acceptSend(
                    .object(message), outbox: OutboxRequest(kind: kind, requestJSON: JSONValue.object(request).canonicalText),
                    progress: progress, finish: finish)
            }
            accepted = (id, stored.json)
        }
        guard let accepted else { throw ParleyError(.internalError, "send: not accepted") }
        return AcceptedSend(operationID: accepted.0, pendingMessage: accepted.1, reqID: reqID)
    }

    /// Resends a failed message (same `req_id`). The completion runs once with the outcome.
    public func resendMessage(
        reqID: String, progress: HTTPUploadProgress? = nil,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64 {
        let engine = self.engine
        return try startOperation(completion) { (_, finish) throws(ParleyError) in
            let progress = progress.map(self.onCallbackContext)
            try engine.sync { () throws(ParleyError) in try engine.resend(reqID: reqID, progress: progress, finish: finish) }
        }
    }

    /// Cancels a pending message not yet on the wire, or a file upload in progress: it is
    /// removed (event `message_canceled`) and its completion runs with `.cancelled`. A
    /// failed message is removed the same way. A user message already being sent cannot be
    /// canceled (`.invalidState`): the server may have it already.
    public func cancelMessage(reqID: String) throws(ParleyError) {
        let engine = self.engine
        try engine.sync { () throws(ParleyError) in try engine.cancel(reqID: reqID) }
    }

    /// Removes the channel's failed messages (event `message_canceled` each); returns their req_ids.
    @discardableResult
    public func removeFailedMessages(channelURL: String) throws(ParleyError) -> [String] {
        let engine = self.engine
        return try engine.sync { () throws(ParleyError) -> [String] in try engine.removeFailedMessages(channelURL: channelURL) }
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

    static func nowMs() -> Int64 { Engine.nowMs() }
}
