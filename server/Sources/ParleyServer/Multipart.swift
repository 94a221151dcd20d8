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
