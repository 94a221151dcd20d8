import HTTPTypes
import Hummingbird
import NIOCore

// The per-user Server-Sent Events stream with Last-Event-ID replay (PROTOCOL.md §9).

enum EventStream {
    static func open(service: Service, config: ServerConfig, ctx: Ctx) async throws -> Response {
        let userId = try ctx.param(.userId)
        let lastEventField = HTTPField.Name("Last-Event-ID")!
        let lastEventText = ctx.headers[lastEventField] ?? ctx.input.query.first("last_event_id")
        var lastEventId: Int64? = nil
        if let text = lastEventText?.trimmingSpaces, !text.isEmpty {
            guard let v = Int64(text), v >= 0 else { throw APIError.invalid("Last-Event-ID", "must be a non-negative integer.") }
            lastEventId = v
        }
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .unbounded)
        var expiresAt: Int64 = 0
        let subscriberId: Int = try await service.run { s in
            let caller = try await s.authenticate(ctx.headers, apiToken: config.apiToken, now: ctx.now)
            if !caller.isAdmin && caller.userId != userId { throw APIError.forbidden("a session user can only open their own event stream.") }
            _ = try await s.user(userId)
            let open = s.subscribers.values.reduce(0) { $0 + ($1.userId == userId ? 1 : 0) }
            if open >= config.maxStreamsPerUser {
                throw APIError(status: 429, code: 400120,
                               message: "\"\(userId)\" already has \(open) open event streams (at most \(config.maxStreamsPerUser)).")
            }
            if !caller.isAdmin, let key = ctx.headers[HTTPField.Name("Session-Key")!], let session = try await s.session(key) {
                expiresAt = session.expiresAt
            }
            let id = s.nextSubscriberId
            s.nextSubscriberId += 1
            continuation.yield("retry: 1000\nevent: connected\ndata: \(JSON.obj([("user_id", .string(userId)), ("last_event_id", .int(s.seq))]).serialized())\n\n")
            if let last = lastEventId {
                if last > s.seq || last < s.prunedThrough {
                    let reason = last > s.seq ? "unknown_id" : "retention"
                    let data = JSON.obj([("reason", .string(reason)), ("last_event_id", .int(s.seq))]).serialized()
                    continuation.yield("id: \(s.seq)\nevent: resync\ndata: \(data)\n\n")
                } else {
                    var rendered: Set<String> = []
                    let events = try await s.events(after: last, for: userId)
                    // The channels the replay renders, each once, as they stand now.
                    try await s.loadChannels(Array(Set(events.compactMap(\.channelUrl))))
                    for event in events {
                        continuation.yield(s.replayFrame(event, for: userId, now: ctx.now, rendered: &rendered))
                    }
                }
            }
            // Registered under the same lock as the replay: nothing can fall between the two.
            s.subscribers[id] = Subscriber(id: id, userId: userId, continuation: continuation)
            return id
        }
        let heartbeat = Task {
            let interval = UInt64(max(0.05, config.heartbeatSeconds) * 1_000_000_000)
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: interval)
                if Task.isCancelled { break }
                continuation.yield(": heartbeat \(nowMillis())\n\n")
            }
        }
        // A stream opened with an expiring session key ends when the key expires.
        let expiry = Task { [expiresAt] in
            guard expiresAt > 0 else { return }
            let wait = max(0, expiresAt - nowMillis())
            try? await Task.sleep(nanoseconds: UInt64(wait) * 1_000_000)
            if Task.isCancelled { return }
            _ = try? await service.run { s in
                s.subscribers.removeValue(forKey: subscriberId)?.end(code: 400302, message: "The session key expired.")
            }
        }
        let cleanup: @Sendable () async -> Void = {
            heartbeat.cancel()
            expiry.cancel()
            _ = try? await service.run { s in
                guard s.subscribers.removeValue(forKey: subscriberId) != nil else { return }
                if !s.isOnline(userId), var u = try await s.userIfExists(userId) {
                    u.lastSeenAt = nowMillis()
                    s.save(u)
                }
            }
        }
        continuation.onTermination = { _ in
            Task { await cleanup() }
        }
        let body = ResponseBody { writer in
            do {
                for await frame in stream {
                    try await writer.write(ByteBuffer(string: frame))
                }
            } catch {
                continuation.finish()
                await cleanup()
                throw error
            }
            await cleanup()
            try await writer.finish(nil)
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
            body: body)
    }
}
