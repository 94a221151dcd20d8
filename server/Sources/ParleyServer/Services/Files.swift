// Uploaded files: the download (PROTOCOL.md §7.3); uploads arrive with a message (Messages.send)
// or as a channel's cover (Channels.create, Channels.update). The server's thumbnails of an
// uploaded image are files of its message; a cover is a file of its channel with no message.

enum Files {
    /// What the file service uses of a request (Services/Interfaces.swift): no events, no rendering.
    typealias Needs = ChannelRecords & MessageRecords

    static func download(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        guard let f = try await s.file(try ctx.param(.fileId)), let c = try await s.channelIfExists(f.channelUrl) else {
            throw APIError.notFound("File")
        }
        if f.messageId == 0 {
            // A cover: whoever may see the channel (Channels.get).
            if !ctx.caller.isAdmin, let me = ctx.caller.userId, c.members[me] == nil && !c.isPublic {
                throw APIError.forbidden("the user is not a member of this channel.")
            }
        } else {
            guard try await s.messageRecord(f.messageId) != nil else { throw APIError.notFound("File") }
            try s.requireJoined(c, ctx)
        }
        guard let bytes = try await s.fileBytes(f.id) else { throw APIError.notFound("File") }
        return .file(bytes: bytes, contentType: f.type.isEmpty ? "application/octet-stream" : f.type)
    }

    /// The download path of a stored file.
    static func path(_ fileId: String, name: String) -> String {
        "/v3/files/\(fileId)/\(name.isEmpty ? "file" : percentEncodePathSegment(name))"
    }

    /// The stored file a server URL names ("…/v3/files/{file_id}/…"), else nil.
    static func fileId(in url: String) -> String? {
        guard let marker = url.range(of: "/v3/files/") else { return nil }
        let id = url[marker.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return id.isEmpty ? nil : String(id)
    }

    // MARK: thumbnails

    /// The thumbnails of an upload for the boxes asked for, each with the file record to store
    /// it under (its message id set by the caller): made before the write lock when the route
    /// prepared them, else here.
    static func thumbnailFiles(_ prepared: PreparedUpload?, of upload: [UInt8], boxes: [ThumbnailBox],
                               channel: String) -> [(MadeThumbnail, FileRecord)] {
        guard !boxes.isEmpty else { return [] }
        let made = prepared.flatMap { $0.boxes == boxes ? $0.thumbnails : nil } ?? Images.thumbnails(of: upload, boxes: boxes)
        return made.enumerated().map { index, thumbnail in
            let record = FileRecord(id: randomHex(16), channelUrl: channel, messageId: 0,
                                    name: "thumbnail-\(index + 1).\(thumbnail.fileExtension)", type: thumbnail.contentType,
                                    size: Int64(thumbnail.bytes.count))
            return (thumbnail, record)
        }
    }

    /// A made thumbnail as the message lists it: `width` and `height` are the box asked for,
    /// `real_width` and `real_height` the image's own size.
    static func thumbnailRecord(_ made: MadeThumbnail, _ file: FileRecord) -> ThumbnailRecord {
        ThumbnailRecord(url: path(file.id, name: file.name), width: Int64(made.box.maxWidth), height: Int64(made.box.maxHeight),
                        realWidth: Int64(made.width), realHeight: Int64(made.height), fileId: file.id)
    }
}

extension Messages {
    /// Before the write lock: a file upload asking for `thumbnail_sizes` gets its thumbnails
    /// made here, so that decoding and scaling never hold up other writers. Bad sizes are left
    /// for `send` to refuse (after it has checked the caller).
    static func prepareUpload(_ ctx: inout Ctx) throws {
        guard ctx.isMultipart else { return }
        ctx.prepared = PreparedUpload(parts: try Multipart.parse(body: ctx.rawBody, contentType: ctx.contentType))
        // The body's size was checked on arrival (Endpoint.handle); `send` checks the file's.
        guard let form = try? UploadForm(ctx, fileFields: ["file"], jsonFields: [], limit: .max),
              let upload = form.files["file"], (try? form.input.string("message_type")) == "FILE",
              let boxes = try? Images.requestedBoxes(form.input), !boxes.isEmpty else { return }
        ctx.prepared?.boxes = boxes
        ctx.prepared?.thumbnails = Images.thumbnails(of: upload.data, boxes: boxes)
    }
}

// MARK: covers

extension MessageRecords {
    /// Stores an uploaded cover image of a channel, as a file of the channel with no message;
    /// returns its download path, the channel's `cover_url`. Not an image the server reads → 400.
    func storeCover(_ part: MultipartPart, channel url: String) async throws -> String {
        var type = part.contentType ?? ""
        if Images.available {
            guard let header = Images.header(part.data) else {
                throw APIError.invalid("cover_file", "must be a JPEG, PNG, GIF or WebP image.")
            }
            type = header.contentType
        }
        let name = part.filename.flatMap { $0.isEmpty ? nil : $0 } ?? "cover"
        let record = FileRecord(id: randomHex(16), channelUrl: url, messageId: 0, name: name,
                                type: type.isEmpty ? "application/octet-stream" : type, size: Int64(part.data.count))
        try await store(record, bytes: part.data)
        return Files.path(record.id, name: name)
    }

    /// Sets a channel's `cover_url`, deleting the uploaded cover it replaces. The same cover
    /// given back (as rendered, absolute) stays as it is; a `cover_url` set by hand may name any
    /// file, so only a cover file of this channel is deleted.
    func replaceCover(_ c: inout ChannelRecord, with url: String) async throws {
        let current = Files.fileId(in: c.coverUrl)
        if url == c.coverUrl || (current != nil && Files.fileId(in: url) == current) { return }
        if let current, let f = try await file(current), f.channelUrl == c.url, f.messageId == 0 {
            try await deleteFile(current)
        }
        c.coverUrl = url
    }
}
