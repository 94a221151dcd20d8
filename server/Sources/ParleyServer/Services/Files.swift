// Uploaded files: the download (PROTOCOL.md §7.3); uploads arrive with a message (Messages.send).

enum Files {
    /// What the file service uses of a request (Services/Interfaces.swift): no events, no rendering.
    typealias Needs = ChannelRecords & MessageRecords

    static func download(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        guard let f = try await s.file(try ctx.param(.fileId)), let c = try await s.channelIfExists(f.channelUrl),
              try await s.messageRecord(f.messageId) != nil else {
            throw APIError.notFound("File")
        }
        try s.requireJoined(c, ctx)
        guard let bytes = try await s.fileBytes(f.id) else { throw APIError.notFound("File") }
        return .file(bytes: bytes, contentType: f.type.isEmpty ? "application/octet-stream" : f.type)
    }
}
