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
        WireField.message, WireField.reqID, WireField.customType, WireField.data, WireField.mentionType, WireField.mentionedUserIDs,
        WireField.sortedMetaarray, WireField.parentMessageID, WireField.isReplyToChannel, WireField.isSilent, WireField.markAsRead,
        WireField.pollID,
    ]
    /// `file_path` is the library's own (a local file to upload); the others are the server's send fields.
    static let fileMessageKeys: Set<String> = [
        WireField.url, "file_path", WireField.fileName, WireField.fileSize, WireField.fileType, WireField.thumbnails, WireField.reqID,
        WireField.customType, WireField.data, WireField.mentionType, WireField.mentionedUserIDs, WireField.sortedMetaarray,
        WireField.parentMessageID, WireField.isReplyToChannel, WireField.isSilent, WireField.markAsRead,
    ]

    /// A user message (`MESG`).
    static func user(channelURL: String, params: JSONValue) throws(ParleyError) -> OutgoingMessage {
        let reader = try JSONReader(params, path: "params")
        try UnsupportedFeatures.reject(reader.fields, in: "params")
        try reader.rejectUnknownKeys(allowed: userMessageKeys)
        let text = try reader.string(WireField.message)
        guard !text.isEmpty else { throw .invalidArgument("params.message: must not be empty") }
        var request = reader.fields
        request[WireField.messageType] = .string("MESG")
        var pending = pendingFields(reader.fields)
        pending[WireField.type] = .string("MESG")
        pending[WireField.message] = .string(text)
        return try OutgoingMessage(channelURL: channelURL, kind: "user", request: request, pending: pending, reader: reader)
    }

    /// A file message (`FILE`): `url` for a file hosted elsewhere, or `file_path` for a local
    /// file uploaded with the message (its name, size and type read from the file unless given).
    static func file(channelURL: String, params: JSONValue) throws(ParleyError) -> OutgoingMessage {
        let reader = try JSONReader(params, path: "params")
        try UnsupportedFeatures.reject(reader.fields, in: "params")
        try reader.rejectUnknownKeys(allowed: fileMessageKeys)
        let url = try reader.optionalString(WireField.url)
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
            let name = try reader.optionalString(WireField.fileName) ?? String(path.split(separator: "/").last ?? "file")
            file = [WireField.name: .string(name), WireField.size: .int(Int64(info.st_size)), WireField.url: .string(""),
                    WireField.type: .string(try reader.optionalString(WireField.fileType) ?? "")]
        } else if let url {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw .invalidArgument("params.url: expected an http:// or https:// URL, got '\(url)'")
            }
            file = [WireField.url: .string(url), WireField.name: .string(try reader.optionalString(WireField.fileName) ?? ""),
                    WireField.size: .int(try reader.optionalInt(WireField.fileSize, in: 0...Int64.max) ?? 0),
                    WireField.type: .string(try reader.optionalString(WireField.fileType) ?? "")]
        }
        var request = reader.fields
        request[WireField.messageType] = .string("FILE")
        var pending = pendingFields(reader.fields)
        pending[WireField.type] = .string("FILE")
        pending[WireField.message] = .string("")
        pending[WireField.file] = .object(file)
        if let thumbnails = reader.fields[WireField.thumbnails] { pending[WireField.thumbnails] = thumbnails }
        return try OutgoingMessage(channelURL: channelURL, kind: kind, request: request, pending: pending, reader: reader)
    }

    private init(
        channelURL: String, kind: String, request: [String: JSONValue], pending: [String: JSONValue], reader: JSONReader
    ) throws(ParleyError) {
        guard !channelURL.isEmpty else { throw .invalidArgument("channel_url must not be empty") }
        if let parent = request[WireField.parentMessageID], (parent.int64Value ?? -1) < 0 {
            throw .invalidArgument("params.parent_message_id: expected a non-negative integer")
        }
        let reqID = try reader.optionalString(WireField.reqID) ?? Self.newRequestID()
        guard !reqID.isEmpty, reqID.utf8.count <= 64 else { throw .invalidArgument("params.req_id: must be 1 to 64 bytes long") }
        self.channelURL = channelURL
        self.reqID = reqID
        self.kind = kind
        self.request = request
        self.request[WireField.reqID] = .string(reqID)
        self.pending = pending
        self.pending[WireField.reqID] = .string(reqID)
        self.pending[WireField.channelURL] = .string(channelURL)
        self.pending[WireField.channelType] = .string("group")
        self.pending[WireField.createdAt] = .int(Engine.nowMs())
        self.pending[WireField.updatedAt] = .int(0)
    }

    /// The fields a pending message copies from the send parameters.
    private static func pendingFields(_ params: [String: JSONValue]) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [:]
        for key in [
            WireField.customType, WireField.data, WireField.mentionType, WireField.sortedMetaarray, WireField.parentMessageID,
            WireField.isReplyToChannel,
        ] {
            if let value = params[key] { fields[key] = value }
        }
        if let ids = params[WireField.mentionedUserIDs]?.arrayValue {
            fields[WireField.mentionedUsers] = .array(ids.map { .object([WireField.userID: $0]) })
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
