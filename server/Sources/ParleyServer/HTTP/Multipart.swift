import Foundation

// The multipart/form-data parser for file uploads (PROTOCOL.md §7.3).

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

/// A multipart request as a handler reads it: its text parts as the request's fields, and its
/// file parts (those with a filename) by name.
struct UploadForm {
    let input: Input
    let files: [String: MultipartPart]

    /// `fileFields`: the parts taken as files; `jsonFields`: the text parts holding JSON (a list,
    /// an object), taken as text when they do not parse. Every other part is text. A file larger
    /// than `limit` is 413.
    init(_ ctx: Ctx, fileFields: Set<String>, jsonFields: Set<String>, limit: Int) throws {
        var fields = JSONObject()
        var files: [String: MultipartPart] = [:]
        for part in try ctx.multipartParts() {
            if fileFields.contains(part.name) && part.filename != nil {
                if (part.filename ?? "").utf8.contains(0) || (part.contentType ?? "").utf8.contains(0) {
                    throw APIError.invalid(part.name, Input.nulMessage)
                }
                if part.data.count > limit { throw APIError.tooLarge }
                files[part.name] = part
                continue
            }
            let text = String(decoding: part.data, as: UTF8.self)
            if jsonFields.contains(part.name), let parsed = try? JSONParser.parse(text) {
                fields[part.name] = parsed
            } else {
                fields[part.name] = .string(text)
            }
        }
        if let field = Input.fieldWithNUL(body: fields, query: Query(nil)) { throw APIError.invalid(field, Input.nulMessage) }
        input = Input(body: fields, query: ctx.input.query)
        self.files = files
    }
}

/// What was made of a multipart request before the write lock (RouteHandler.prepared): its
/// parts, and the thumbnails of its upload for the boxes it asked for.
struct PreparedUpload: Sendable {
    var parts: [MultipartPart]
    var boxes: [ThumbnailBox] = []
    var thumbnails: [MadeThumbnail] = []
}

extension Ctx {
    var isMultipart: Bool { contentType.lowercased().hasPrefix("multipart/form-data") }

    /// The parts of a multipart body, parsed once.
    func multipartParts() throws -> [MultipartPart] {
        if let prepared { return prepared.parts }
        return try Multipart.parse(body: rawBody, contentType: contentType)
    }
}
