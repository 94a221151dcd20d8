import Foundation

// Uploaded file download, reports, and the multipart parser.

enum Files {
    static func download(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        guard let f = try await RecordTables.file(try ctx.param(.fileId), try s.db), let c = try await s.channelIfExists(f.channelUrl),
              try await s.messageRecord(f.messageId) != nil else {
            throw APIError.notFound("File")
        }
        try s.requireJoined(c, ctx)
        guard let bytes = try await RecordTables.fileBytes(f.id, try s.db) else { throw APIError.notFound("File") }
        return .file(bytes: bytes, contentType: f.type.isEmpty ? "application/octet-stream" : f.type)
    }
}

enum Reports {
    static let categories = ["suspicious", "harassing", "inappropriate", "spam"]

    static func reportJSON(_ s: ServerState, _ r: ReportRecord) -> JSON {
        .obj([
            ("report_id", .int(r.id)), ("report_type", .string(r.reportType)), ("report_category", .string(r.category)),
            ("reporting_user", r.reportingUserId.map { s.basicUser($0) }),
            ("offending_user", r.offendingUserId.map { s.basicUser($0) }),
            ("channel_url", r.channelUrl.map { .string($0) }), ("message_id", r.messageId.map { .int($0) }),
            ("report_description", .string(r.description)), ("created_at", .int(r.createdAt)),
        ])
    }

    private static func make(_ s: ServerState, _ ctx: Ctx, type: String, channel: ChannelRecord?, messageId: Int64?, offender: String?) async throws -> Reply {
        let category = try ctx.input.enumValue("report_category", categories, default: "")
        if category.isEmpty { throw APIError.missing("report_category") }
        let reporter = try ctx.actingUser("reporting_user_id", optional: true)
        if let reporter { _ = try await s.user(reporter) }
        if let channel, !ctx.caller.isAdmin, let me = ctx.caller.userId, channel.members[me] == nil {
            throw APIError.forbidden("the reporter is not a member of this channel.")
        }
        let description = try ctx.input.string("report_description", maxBytes: 2000) ?? ""
        let r = ReportRecord(id: s.allocateReportId(), reportType: type, category: category, reportingUserId: reporter,
                             offendingUserId: offender, channelUrl: channel?.url, messageId: messageId,
                             description: description, createdAt: ctx.now)
        try await s.save(r)
        try await s.loadUsers([reporter, offender].compactMap { $0 })
        return .json(reportJSON(s, r))
    }

    static func reportMessage(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        let m = try await s.message(c, ctx.messageId)
        return try await make(s, ctx, type: "message", channel: c, messageId: m.id, offender: m.senderId)
    }

    static func reportChannel(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let c = try await s.channel(ctx.param(.channelURL))
        return try await make(s, ctx, type: "channel", channel: c, messageId: nil, offender: nil)
    }

    static func reportUser(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        let offender = try await s.user(ctx.param(.userId))
        var channel: ChannelRecord? = nil
        if let url = try ctx.input.string("channel_url", maxBytes: 100) { channel = try await s.channel(url) }
        return try await make(s, ctx, type: "user", channel: channel, messageId: nil, offender: offender.userId)
    }

    static func list(_ s: ServerState, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        let limit = try ctx.input.limit()
        var after: Int64 = 0
        if let token = try ctx.input.string("token") {
            // The token is the last listed id, as every listing's: [id].
            guard let key = decodeToken(token) else { throw APIError.badToken() }
            if key.count == 1, case .int(let id) = key[0] { after = id } else {
                // A token of another listing: refused, unless there is nothing to list anyway.
                if try await s.db.queryOne("SELECT 1 FROM reports LIMIT 1") != nil { throw APIError.badToken() }
                after = .max
            }
        }
        let rows = try await s.db.query("SELECT \(RecordTables.reportColumns.joined(separator: ", ")) FROM reports "
                                        + "WHERE id > ? ORDER BY id LIMIT \(limit + 1)", [.int(after)])
        let page = rows.prefix(limit).map(RecordTables.report)
        try await s.loadUsers(page.flatMap { [$0.reportingUserId, $0.offendingUserId].compactMap { $0 } })
        let next = rows.count > limit ? encodeToken([.int(page.last!.id)]) : ""
        return .json(.obj([("reports", .array(page.map { reportJSON(s, $0) })), ("next", .string(next))]))
    }
}

struct MultipartPart: Sendable {
    var name: String
    var filename: String?
    var contentType: String?
    var data: [UInt8]
}

enum Multipart {
    static func parse(body: [UInt8], contentType: String) throws -> [MultipartPart] {
        guard let range = contentType.range(of: "boundary=", options: .caseInsensitive) else {
            throw APIError.malformed("multipart body without a boundary.")
        }
        var boundary = String(contentType[range.upperBound...])
        if let semi = boundary.firstIndex(of: ";") { boundary = String(boundary[..<semi]) }
        boundary = boundary.trimmingSpaces
        if boundary.hasPrefix("\"") && boundary.hasSuffix("\"") && boundary.count >= 2 { boundary = String(boundary.dropFirst().dropLast()) }
        if boundary.isEmpty || boundary.utf8.count > 200 { throw APIError.malformed("invalid multipart boundary.") }
        let delimiter = Array(("--" + boundary).utf8)
        var parts: [MultipartPart] = []
        var positions: [Int] = []
        var i = 0
        while let p = find(delimiter, in: body, from: i) {
            positions.append(p)
            i = p + delimiter.count
        }
        guard positions.count >= 2 else { throw APIError.malformed("multipart body has no parts.") }
        for (a, b) in zip(positions, positions.dropFirst()) {
            var start = a + delimiter.count
            if start + 1 < body.count, body[start] == 0x0D, body[start + 1] == 0x0A { start += 2 }
            var end = b
            if end >= 2, body[end - 2] == 0x0D, body[end - 1] == 0x0A { end -= 2 }
            guard start <= end else { throw APIError.malformed("truncated multipart part.") }
            let chunk = Array(body[start..<end])
            guard let headerEnd = find([0x0D, 0x0A, 0x0D, 0x0A], in: chunk, from: 0) else {
                throw APIError.malformed("multipart part without headers.")
            }
            let headerText = String(decoding: chunk[0..<headerEnd], as: UTF8.self)
            var part = MultipartPart(name: "", filename: nil, contentType: nil, data: Array(chunk[(headerEnd + 4)...]))
            for line in headerText.split(separator: "\r\n") {
                let lower = line.lowercased()
                if lower.hasPrefix("content-disposition:") {
                    part.name = param("name", in: String(line)) ?? ""
                    part.filename = param("filename", in: String(line))
                } else if lower.hasPrefix("content-type:") {
                    part.contentType = String(line.dropFirst("content-type:".count)).trimmingSpaces
                }
            }
            if part.name.isEmpty { throw APIError.malformed("multipart part without a name.") }
            parts.append(part)
        }
        return parts
    }

    private static func param(_ name: String, in header: String) -> String? {
        for piece in header.split(separator: ";") {
            let t = piece.trimmingSpaces
            guard t.lowercased().hasPrefix(name + "=") else { continue }
            var v = String(t.dropFirst(name.count + 1))
            if v.hasPrefix("\"") && v.hasSuffix("\"") && v.count >= 2 { v = String(v.dropFirst().dropLast()) }
            return v
        }
        return nil
    }

    private static func find(_ needle: [UInt8], in hay: [UInt8], from: Int) -> Int? {
        guard !needle.isEmpty, hay.count >= needle.count, from <= hay.count - needle.count else { return nil }
        var i = from
        let last = hay.count - needle.count
        while i <= last {
            if hay[i] == needle[0] {
                var j = 1
                while j < needle.count && hay[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}
