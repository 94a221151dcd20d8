import Glibc

// A message the application sends, checked and built before it enters the outbox: the
// request the outbox will POST and the pending message the views show until the server's
// copy replaces it (Engine+Outbox.swift, `acceptSend`).

/// A send's parameters checked, with its request and the pending message's fields.
struct OutgoingMessage: Sendable {
    var channelURL: String
    var reqID: String
    /// The outbox's kind: `user`, `file_url` or `file_upload`.
    var kind: String
    var request: [String: JSONValue]
    /// The pending message without its sender (the engine adds the connected user).
    var pending: [String: JSONValue]

    static let userMessageKeys: Set<String> = [
        "message", "req_id", "custom_type", "data", "mention_type", "mentioned_user_ids", "sorted_metaarray",
        "parent_message_id", "is_reply_to_channel", "is_silent", "mark_as_read",
    ]
    static let fileMessageKeys: Set<String> = [
        "url", "file_path", "file_name", "file_size", "file_type", "thumbnails", "req_id", "custom_type", "data",
        "mention_type", "mentioned_user_ids", "sorted_metaarray", "parent_message_id", "is_reply_to_channel",
        "is_silent", "mark_as_read",
    ]

    /// A user message (`MESG`).
    static func user(channelURL: String, params: JSONValue) throws(ParleyError) -> OutgoingMessage {
        let reader = try JSONReader(params, path: "params")
        try reader.rejectUnknownKeys(allowed: userMessageKeys)
        let text = try reader.string("message")
        guard !text.isEmpty else { throw .invalidArgument("params.message: must not be empty") }
        var request = reader.fields
        request["message_type"] = .string("MESG")
        var pending = pendingFields(reader.fields)
        pending["type"] = .string("MESG")
        pending["message"] = .string(text)
        return try OutgoingMessage(channelURL: channelURL, kind: "user", request: request, pending: pending, reader: reader)
    }

    /// A file message (`FILE`): `url` for a file hosted elsewhere, or `file_path` for a local
    /// file uploaded with the message (its name, size and type read from the file unless given).
    static func file(channelURL: String, params: JSONValue) throws(ParleyError) -> OutgoingMessage {
        let reader = try JSONReader(params, path: "params")
        try reader.rejectUnknownKeys(allowed: fileMessageKeys)
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
        var pending = pendingFields(reader.fields)
        pending["type"] = .string("FILE")
        pending["message"] = .string("")
        pending["file"] = .object(file)
        if let thumbnails = reader.fields["thumbnails"] { pending["thumbnails"] = thumbnails }
        return try OutgoingMessage(channelURL: channelURL, kind: kind, request: request, pending: pending, reader: reader)
    }

    private init(
        channelURL: String, kind: String, request: [String: JSONValue], pending: [String: JSONValue], reader: JSONReader
    ) throws(ParleyError) {
        guard !channelURL.isEmpty else { throw .invalidArgument("channel_url must not be empty") }
        if let parent = request["parent_message_id"], (parent.int64Value ?? -1) < 0 {
            throw .invalidArgument("params.parent_message_id: expected a non-negative integer")
        }
        let reqID = try reader.optionalString("req_id") ?? Self.newRequestID()
        guard !reqID.isEmpty, reqID.utf8.count <= 64 else { throw .invalidArgument("params.req_id: must be 1 to 64 bytes long") }
        self.channelURL = channelURL
        self.reqID = reqID
        self.kind = kind
        self.request = request
        self.request["req_id"] = .string(reqID)
        self.pending = pending
        self.pending["req_id"] = .string(reqID)
        self.pending["channel_url"] = .string(channelURL)
        self.pending["channel_type"] = .string("group")
        self.pending["created_at"] = .int(Engine.nowMs())
        self.pending["updated_at"] = .int(0)
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

    /// A fresh random request id (32 hex digits).
    static func newRequestID() -> String {
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
}
