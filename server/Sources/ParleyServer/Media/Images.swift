import CParleyVips

// Images the server reads: thumbnails of uploaded images (PROTOCOL.md §7.3) and the check that a
// channel's uploaded cover is an image (§6.1), through libvips (server/Sources/CParleyVips).

/// A box a thumbnail must fit in: one item of `thumbnail_sizes`.
struct ThumbnailBox: Sendable, Equatable {
    let maxWidth: Int
    let maxHeight: Int
}

/// A thumbnail made of an uploaded image, not stored yet.
struct MadeThumbnail: Sendable {
    let box: ThumbnailBox
    let bytes: [UInt8]
    let width: Int
    let height: Int
    let contentType: String
    let fileExtension: String
}

/// What the header of an image says (no pixel decoded).
struct ImageHeader: Sendable {
    let width: Int
    let height: Int
    let contentType: String
}

enum Images {
    static let maxThumbnailSizes = 3
    static let maxThumbnailSide = 4096
    /// Larger images get no thumbnails (their file is stored all the same): a small file can
    /// declare a huge image, and decoding it would take the memory and the time of many requests.
    static let maxSourcePixels = 50_000_000

    /// libvips started (once, at the first use; App.run starts it before serving). False if it
    /// could not start: uploads then get no thumbnails and covers are taken unchecked.
    static let available: Bool = parley_images_start("parley-server") == 0

    /// The header of an image in a format the server decodes (JPEG, PNG, GIF, WebP), else nil.
    static func header(_ bytes: [UInt8]) -> ImageHeader? {
        guard available, !bytes.isEmpty else { return nil }
        return bytes.withUnsafeBytes { raw -> ImageHeader? in
            let type: String
            switch parley_image_format(raw.baseAddress, raw.count) {
            case 1: type = "image/jpeg"
            case 2: type = "image/png"
            case 3: type = "image/gif"
            case 4: type = "image/webp"
            default: return nil
            }
            var width: Int32 = 0, height: Int32 = 0
            guard parley_image_dimensions(raw.baseAddress, raw.count, &width, &height) == 0, width > 0, height > 0 else { return nil }
            return ImageHeader(width: Int(width), height: Int(height), contentType: type)
        }
    }

    /// One thumbnail per box, in order; none at all when the bytes are not an image the server
    /// decodes, have more than `maxSourcePixels` pixels, or fail to decode. CPU work: run it
    /// before the write lock (Messages.prepareUpload).
    static func thumbnails(of bytes: [UInt8], boxes: [ThumbnailBox]) -> [MadeThumbnail] {
        guard !boxes.isEmpty, let header = header(bytes), header.width * header.height <= maxSourcePixels else { return [] }
        var made: [MadeThumbnail] = []
        for box in boxes {
            let thumbnail = bytes.withUnsafeBytes { raw -> MadeThumbnail? in
                var out: UnsafeMutableRawPointer? = nil
                var length = 0
                var width: Int32 = 0, height: Int32 = 0, isPNG: Int32 = 0
                guard parley_image_thumbnail(raw.baseAddress, raw.count, Int32(box.maxWidth), Int32(box.maxHeight),
                                             &out, &length, &width, &height, &isPNG) == 0, let out else { return nil }
                defer { parley_image_free(out) }
                let encoded = Array(UnsafeRawBufferPointer(start: out, count: length))
                return MadeThumbnail(box: box, bytes: encoded, width: Int(width), height: Int(height),
                                     contentType: isPNG != 0 ? "image/png" : "image/jpeg", fileExtension: isPNG != 0 ? "png" : "jpg")
            }
            guard let thumbnail else { return [] }
            made.append(thumbnail)
        }
        return made
    }

    /// `thumbnail_sizes`: a list of up to 3 `{"max_width": W, "max_height": H}` (or `"W,H"`
    /// strings), as JSON or as a form field holding JSON; or the form fields `thumbnail1` …
    /// `thumbnail3`, each `"W,H"`. Each side from 1 to `maxThumbnailSide`.
    static func requestedBoxes(_ i: Input) throws -> [ThumbnailBox] {
        let name = "thumbnail_sizes"
        var items: [JSON] = []
        if let value = i.body[name], value != .null {
            items = try list(value, name)
        } else if let text = i.query.first(name) {
            items = try list(.string(text), name)
        } else {
            for field in ["thumbnail1", "thumbnail2", "thumbnail3"] {
                if let text = try i.string(field, maxBytes: 64) { items.append(.string(text)) }
            }
        }
        if items.count > maxThumbnailSizes { throw APIError.invalid(name, "may hold at most \(maxThumbnailSizes) sizes.") }
        return try items.map { try box($0, name) }
    }

    private static func list(_ value: JSON, _ name: String) throws -> [JSON] {
        switch value {
        case .array(let items): return items
        case .string(let text):
            guard case .array(let items)? = try? JSONParser.parse(text) else {
                throw APIError.invalid(name, "must be a JSON list of {\"max_width\", \"max_height\"} objects.")
            }
            return items
        default: throw APIError.invalid(name, "must be a list, not \(value.typeName).")
        }
    }

    private static func box(_ item: JSON, _ name: String) throws -> ThumbnailBox {
        let sides: (JSON?, JSON?)
        switch item {
        case .object(let o): sides = (o["max_width"], o["max_height"])
        case .string(let text):
            let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2, let w = Int64(parts[0].trimmingSpaces), let h = Int64(parts[1].trimmingSpaces) else {
                throw APIError.invalid(name, "items must be {\"max_width\": W, \"max_height\": H} or \"W,H\".")
            }
            sides = (.int(w), .int(h))
        default: throw APIError.invalid(name, "items must be {\"max_width\": W, \"max_height\": H} objects.")
        }
        func side(_ value: JSON?, _ key: String) throws -> Int {
            guard case .int(let v)? = value else { throw APIError.invalid(name, "\"\(key)\" must be an integer.") }
            guard v >= 1 && v <= Int64(maxThumbnailSide) else {
                throw APIError.invalid(name, "\"\(key)\" must be from 1 to \(maxThumbnailSide).")
            }
            return Int(v)
        }
        return ThumbnailBox(maxWidth: try side(sides.0, "max_width"), maxHeight: try side(sides.1, "max_height"))
    }
}
