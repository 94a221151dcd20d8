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
        WireField.pollID, WireField.targetLanguages, WireField.pushNotificationDeliveryOption, WireField.appleCriticalAlertOptions,
    ]
    /// `file_path` is the library's own (a local file to upload); the others are the server's send fields.
    static let fileMessageKeys: Set<String> = [
        WireField.url, "file_path", WireField.fileName, WireField.fileSize, WireField.fileType, WireField.mimeType,
        WireField.thumbnails, WireField.thumbnailSizes, WireField.reqID, WireField.customType, WireField.data, WireField.mentionType, WireField.mentionedUserIDs, WireField.sortedMetaarray,
        WireField.parentMessageID, WireField.isReplyToChannel, WireField.isSilent, WireField.markAsRead,
        WireField.pushNotificationDeliveryOption, WireField.appleCriticalAlertOptions,
    ]

    /// A user message (`MESG`).
    static func user(channelURL: String, params: JSONValue) throws(ParleyError) -> OutgoingMessage {
        let reader = try JSONReader(params, path: "params")
        try UnsupportedFeatures.reject(reader.fields, in: "params", accepted: userMessageKeys)
        try reader.rejectUnknownKeys(allowed: userMessageKeys)
        try UnsupportedFeatures.checkPushParameters(reader)
        try UnsupportedFeatures.checkTargetLanguages(reader)
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
        let given = try JSONReader(params, path: "params")
        if given.has(WireField.targetLanguages) {
            throw given.error(WireField.targetLanguages, "message translation applies to user messages, not file messages")
        }
        try UnsupportedFeatures.reject(given.fields, in: "params", accepted: fileMessageKeys)
        try given.rejectUnknownKeys(allowed: fileMessageKeys)
        try UnsupportedFeatures.checkPushParameters(given)
        let reader = try withFileTypeSpelledOnce(given)
        try checkThumbnailSizes(reader)
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

    /// The most thumbnail boxes a send may ask for, and the largest side of one (the server's).
    static let thumbnailSizeLimit = 3
    static let thumbnailSideRange: ClosedRange<Int64> = 1...4096

    /// The parameters with the SDK's `mime_type` given as `file_type`, the server's spelling;
    /// both at once must agree.
    private static func withFileTypeSpelledOnce(_ reader: JSONReader) throws(ParleyError) -> JSONReader {
        guard let mimeType = try reader.optionalString(WireField.mimeType) else { return reader }
        if let fileType = try reader.optionalString(WireField.fileType), fileType != mimeType {
            throw reader.error(WireField.mimeType, "differs from file_type ('\(mimeType)' and '\(fileType)'); give one of them")
        }
        var fields = reader.fields
        fields.removeValue(forKey: WireField.mimeType)
        fields[WireField.fileType] = .string(mimeType)
        return JSONReader(fields: fields, path: reader.path, errorCode: reader.errorCode)
    }

    /// `thumbnail_sizes`: up to 3 boxes `{max_width, max_height}`, each side 1 to 4096.
    private static func checkThumbnailSizes(_ reader: JSONReader) throws(ParleyError) {
        guard let boxes = try reader.optionalObjects(WireField.thumbnailSizes) else { return }
        if boxes.count > thumbnailSizeLimit {
            throw reader.error(WireField.thumbnailSizes, "at most \(thumbnailSizeLimit) sizes, got \(boxes.count)")
        }
        for box in boxes {
            try box.rejectUnknownKeys(allowed: ["max_width", "max_height"])
            _ = try box.int("max_width", in: thumbnailSideRange)
            _ = try box.int("max_height", in: thumbnailSideRange)
        }
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
