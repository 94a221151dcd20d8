import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

// Outgoing calls to endpoints the operator configured (webhooks: OutgoingCalls/Webhooks.swift).
// A call is a row of `hook_deliveries`, inserted in the transaction of the change that causes
// it: a change rolled back queues nothing, and a queued call survives a restart. After the
// commit the worker below claims the rows that are due and posts them, off every request's
// path. docs/SERVER.md "Webhooks" describes what a receiver sees.

/// One queued call, before it is stored.
struct QueuedHookCall: Sendable {
    let endpoint: String
    let category: String
    let channelUrl: String
    let body: String
}

/// A stored call claimed for delivery.
struct ClaimedHookCall: Sendable {
    let id: Int64
    let endpoint: String
    let category: String
    let body: String
    /// This attempt's number (1 for the first).
    let attempt: Int64
}

/// The statements of the queue, the same text on both backends.
enum HookQueue {
    static let pending = "pending"
    static let delivered = "delivered"
    static let failed = "failed"
    static let statuses = [pending, delivered, failed]
    /// Finished deliveries the log keeps; older ones are removed.
    static let keptFinished: Int64 = 10_000

    static func insert(_ calls: [QueuedHookCall], now: Int64, _ db: any SQLSession) async throws {
        for call in calls {
            try await db.execute("""
                INSERT INTO hook_deliveries (endpoint, category, channel_url, body, status, attempts, next_attempt_at,
                                             lease_until, created_at)
                VALUES (?, ?, ?, ?, 'pending', 0, ?, 0, ?)
                """, [.text(call.endpoint), .text(call.category), .text(call.channelUrl), .text(call.body), .int(now), .int(now)])
        }
    }

    /// Whether a delivery is due now (a cheap read before a claim, which writes).
    static func anyDue(now: Int64, _ db: any SQLSession) async throws -> Bool {
        try await !db.query("""
            SELECT 1 FROM hook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? AND lease_until <= ? LIMIT 1
            """, [.int(now), .int(now)]).isEmpty
    }

    /// Claims the due deliveries that `take` accepts (the worker's free places per endpoint),
    /// each the oldest pending one of its channel and endpoint, so that a channel's calls to
    /// an endpoint go out one at a time, in order. The claim is a lease: another server skips
    /// the rows until it ends (PostgreSQL: rows another server is claiming are skipped, not
    /// waited for). A server that dies mid-delivery leaves the lease to expire; the call is
    /// then made again.
    static func claim(now: Int64, leaseMillis: (String) -> Int64, take: (String) -> Bool,
                      _ db: any SQLSession) async throws -> [ClaimedHookCall] {
        let lock = db.dialect == .postgres ? " FOR UPDATE OF d SKIP LOCKED" : ""
        let rows = try await db.query("""
            SELECT d.id, d.endpoint, d.category, d.body, d.attempts FROM hook_deliveries d
            WHERE d.status = 'pending' AND d.next_attempt_at <= ? AND d.lease_until <= ?
              AND NOT EXISTS (SELECT 1 FROM hook_deliveries e WHERE e.status = 'pending' AND e.endpoint = d.endpoint
                              AND e.channel_url = d.channel_url AND e.id < d.id)
            ORDER BY d.id LIMIT 64\(lock)
            """, [.int(now), .int(now)])
        var claimed: [ClaimedHookCall] = []
        for row in rows {
            let endpoint = row.text(1)
            guard take(endpoint) else { continue }
            let attempt = row.int(4) + 1
            // Taken only as it was read: a row another server took meanwhile is theirs.
            let taken = try await db.execute("""
                UPDATE hook_deliveries SET lease_until = ?, attempts = ?
                WHERE id = ? AND status = 'pending' AND lease_until <= ? AND attempts = ?
                """, [.int(now + leaseMillis(endpoint)), .int(attempt), .int(row.int(0)), .int(now), .int(row.int(4))])
            guard taken == 1 else { continue }
            claimed.append(ClaimedHookCall(id: row.int(0), endpoint: endpoint, category: row.text(2), body: row.text(3),
                                           attempt: attempt))
        }
        return claimed
    }

    static func markDelivered(_ id: Int64, statusCode: Int, now: Int64, _ db: any SQLSession) async throws {
        try await db.execute("""
            UPDATE hook_deliveries SET status = 'delivered', lease_until = 0, last_status_code = ?, last_error = NULL,
                                       finished_at = ? WHERE id = ?
            """, [.int(Int64(statusCode)), .int(now), .int(id)])
    }

    /// A failed attempt: the next one at `retryAt`, or none (nil: the delivery is given up).
    static func markFailed(_ id: Int64, statusCode: Int?, error: String, retryAt: Int64?, now: Int64,
                           _ db: any SQLSession) async throws {
        try await db.execute("""
            UPDATE hook_deliveries SET status = ?, lease_until = 0, next_attempt_at = ?, last_status_code = ?,
                                       last_error = ?, finished_at = ? WHERE id = ?
            """, [.text(retryAt == nil ? failed : pending), .int(retryAt ?? now), .optional(statusCode.map { Int64($0) }),
                  .text(String(error.prefix(500))), .optional(retryAt == nil ? now : nil), .int(id)])
    }

    /// Removes finished deliveries beyond the newest `keptFinished`.
    static func pruneFinished(_ db: any SQLSession) async throws {
        guard let boundary = try await db.queryOne("""
            SELECT id FROM hook_deliveries WHERE status <> 'pending' ORDER BY id DESC LIMIT 1 OFFSET ?
            """, [.int(keptFinished)])?.int(0) else { return }
        try await db.execute("DELETE FROM hook_deliveries WHERE status <> 'pending' AND id <= ?", [.int(boundary)])
    }

    static func depth(_ db: any SQLSession) async throws -> Int64 {
        try await db.queryOne("SELECT count(*) FROM hook_deliveries WHERE status = 'pending'", [])?.int(0) ?? 0
    }

    static func log(status: String?, before: Int64?, limit: Int, _ db: any SQLSession) async throws -> [HookDeliveryRecord] {
        var sql = """
            SELECT id, endpoint, category, channel_url, status, attempts, last_status_code, last_error, created_at,
                   next_attempt_at, finished_at FROM hook_deliveries WHERE id < ?
            """
        var binds: [SQLValue] = [.int(before ?? .max)]
        if let status {
            sql += " AND status = ?"
            binds.append(.text(status))
        }
        sql += " ORDER BY id DESC LIMIT ?"
        binds.append(.int(Int64(limit)))
        return try await db.query(sql, binds).map { row in
            HookDeliveryRecord(id: row.int(0), endpoint: row.text(1), category: row.text(2), channelUrl: row.text(3),
                               status: row.text(4), attempts: row.int(5), lastStatusCode: row.optionalInt(6),
                               lastError: row.optionalText(7), createdAt: row.int(8), nextAttemptAt: row.int(9),
                               finishedAt: row.optionalInt(10))
        }
    }
}

/// What a receiver checks: `X-Parley-Signature: sha256=HEX`, HEX being the HMAC-SHA256 of the
/// raw body under the shared secret, in lower-case hexadecimal.
enum HookSignature {
    static let header = "X-Parley-Signature"

    static func value(body: String, secret: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: SymmetricKey(data: Data(secret.utf8)))
        return "sha256=" + code.map { String(format: "%02x", $0) }.joined()
    }
}

/// Claims due deliveries and posts them, with at most each endpoint's concurrency in flight
/// on this server. Woken after this server's commits (`WebhookRegistry.wake`) and every
/// second, which also rereads the endpoints (another server's admin API may have changed
/// them) and picks up other servers' deliveries and retries that came due. A stop lets the
/// deliveries in flight end (each within its endpoint's timeout) and records them, so that a
/// clean restart sends nothing twice.
final class HookDeliveryWorker: ServiceLifecycle.Service, Sendable {
    private let runner: RequestRunner
    private let registry: WebhookRegistry
    private let secret: String
    private let logger: Logger
    private let client: HTTPClient
    private let wakeups: AsyncStream<Void>
    private let wakeup: AsyncStream<Void>.Continuation
    /// Deliveries in flight on this server, per endpoint.
    private let inFlight = Mutex<[String: Int]>([:])
    /// Set once the schema is migrated and the counters are read (`begin`): no pass runs before.
    private let begun = Mutex(false)

    /// What the worker does with a 2xx answer of a call of a category (a translator's
    /// translations): nil when done, else why not (the call then counts as failed).
    typealias AnswerHandler = @Sendable (_ call: ClaimedHookCall, _ answer: String) async -> String?
    private let answerHandlers: [String: AnswerHandler]

    init(runner: RequestRunner, registry: WebhookRegistry, apiToken: String, logger: Logger,
         answerHandlers: [String: AnswerHandler] = [:]) {
        self.answerHandlers = answerHandlers
        self.runner = runner
        self.registry = registry
        secret = registry.defaults.secret ?? apiToken
        self.logger = logger
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        // A refused connection fails the attempt at once: the queue's own retries, with their
        // pauses and log entries, take over (the client would otherwise try until the timeout).
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = WebhookEndpoint.concurrencyRange.upperBound
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        wakeups = stream
        wakeup = continuation
        registry.onWake { [wakeup] in wakeup.yield() }
    }

    /// The server has migrated its schema and read its counters: the stored endpoints are
    /// read (before the port opens: a request queues for them) and passes may run.
    func begin() async {
        await refreshEndpoints()
        begun.withLock { $0 = true }
        wakeup.yield()
    }

    func run() async throws {
        let ticker = Task { [wakeup] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                wakeup.yield()
            }
        }
        var passes = 0
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await _ in wakeups where begun.withLock({ $0 }) {
                    passes += 1
                    if passes % 60 == 1 { await prune() }
                    await refreshEndpoints()
                    for call in await claimDue() {
                        group.addTask { await self.deliver(call) }
                    }
                }
                // Stopping: the group waits for the deliveries in flight.
            }
        } onGracefulShutdown: { [wakeup] in
            wakeup.finish()
        }
        ticker.cancel()
        try? await client.shutdown()
    }

    /// The stored endpoints as the last pass read them (nil inside: none stored; nil: not read yet).
    private let storedSeen = Mutex<String??>(nil)

    /// Takes in the stored endpoints when they changed since the last pass: another server's
    /// admin API. This server's own change is in force already (`storeWebhookSettings`), set
    /// before its commit, which a pass reading meanwhile must not undo with the row before it.
    private func refreshEndpoints() async {
        do {
            let stored = try await runner.run(readOnly: true, { s in try await s.storedWebhookSettings() })
            let changed = storedSeen.withLock { seen in
                defer { seen = .some(stored) }
                return seen.map { $0 != stored } ?? true
            }
            if changed { registry.update(registry.resolved(stored: stored)) }
        } catch {
            // Unchanged while the database does not answer: the next pass tries again.
        }
    }

    private func endpoint(_ url: String) -> WebhookEndpoint? {
        registry.defaults.serviceEndpoints.first { $0.url == url } ?? registry.settings.endpoints.first { $0.url == url }
    }

    private func timeout(_ url: String) -> Double { endpoint(url)?.timeoutSeconds ?? registry.defaults.timeoutSeconds }

    private func claimDue() async -> [ClaimedHookCall] {
        let now = nowMillis()
        do {
            guard try await runner.run(readOnly: true, { s in try await HookQueue.anyDue(now: now, s.db) }) else { return [] }
            var places: [String: Int] = [:]
            let claimed = try await runner.run { s in
                places = [:]
                return try await HookQueue.claim(now: now, leaseMillis: { url in Int64((self.timeout(url) + 60) * 1000) }, take: { url in
                    let limit = self.endpoint(url)?.concurrency ?? self.registry.defaults.concurrency
                    let busy = self.inFlight.withLock { $0[url, default: 0] } + places[url, default: 0]
                    guard busy < limit else { return false }
                    places[url, default: 0] += 1
                    return true
                }, s.db)
            }
            inFlight.withLock { counts in for call in claimed { counts[call.endpoint, default: 0] += 1 } }
            return claimed
        } catch {
            logger.warning("webhook deliveries could not be claimed", metadata: ["error": "\(error)"])
            return []
        }
    }

    private func deliver(_ call: ClaimedHookCall) async {
        defer {
            inFlight.withLock { counts in counts[call.endpoint, default: 1] -= 1 }
            wakeup.yield()
        }
        var request = HTTPClientRequest(url: call.endpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "parley-server/\(ServerVersion.string)")
        request.headers.add(name: HookSignature.header, value: HookSignature.value(body: call.body, secret: secret))
        request.headers.add(name: "X-Parley-Delivery", value: String(call.id))
        request.headers.add(name: "X-Parley-Event", value: call.category)
        request.headers.add(name: "X-Parley-Attempt", value: String(call.attempt))
        request.body = .bytes(ByteBuffer(string: call.body))
        var statusCode: Int? = nil
        var failure: String? = nil
        do {
            let response = try await client.execute(request, timeout: .milliseconds(Int64(timeout(call.endpoint) * 1000)))
            statusCode = Int(response.status.code)
            // Read the answer (a translator's is used), so that the connection can serve the next call.
            let answer = try? await response.body.collect(upTo: 1 << 20)
            if !(200..<300).contains(Int(response.status.code)) {
                failure = "answered \(response.status.code)"
            } else if let handle = answerHandlers[call.category] {
                failure = await handle(call, answer.map { String(buffer: $0) } ?? "")
            }
        } catch {
            failure = Self.describe(error)
        }
        await record(call, statusCode: statusCode, failure: failure)
    }

    private func record(_ call: ClaimedHookCall, statusCode: Int?, failure: String?) async {
        let defaults = registry.defaults
        let outcome: String
        let now = nowMillis()
        var retryAt: Int64? = nil
        if failure == nil {
            outcome = "delivered"
        } else if call.attempt < Int64(defaults.maxAttempts) {
            outcome = "retried"
            let pause = min(defaults.retryMaxSeconds, pow(2, Double(call.attempt - 1)))
            retryAt = now + Int64(pause * 1000)
        } else {
            outcome = "failed"
        }
        ServerMetrics.shared.hookDelivery(endpoint: call.endpoint, outcome: outcome)
        // The outcome must be stored, or the call is made again once its lease ends: a
        // database that does not answer is tried again, each pause longer, up to 2 s, for
        // about a minute.
        var pause: UInt64 = 50_000_000
        for _ in 0..<40 {
            do {
                try await runner.run { s in
                    if let failure {
                        try await HookQueue.markFailed(call.id, statusCode: statusCode, error: failure, retryAt: retryAt, now: now, s.db)
                    } else {
                        try await HookQueue.markDelivered(call.id, statusCode: statusCode ?? 200, now: now, s.db)
                    }
                }
                return
            } catch {
                if pause >= 2_000_000_000 {
                    logger.warning("a webhook delivery's outcome could not be stored", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(nanoseconds: pause)
                pause = min(pause * 2, 2_000_000_000)
            }
        }
        logger.error("a webhook delivery's outcome was not stored: it is made again once its lease ends",
                     metadata: ["delivery": "\(call.id)"])
    }

    private func prune() async {
        _ = try? await runner.run { s in try await HookQueue.pruneFinished(s.db) }
    }

    /// A short reason for the log: "connection refused", "timed out", ...
    private static func describe(_ error: any Error) -> String {
        if let client = error as? HTTPClientError {
            if client == .deadlineExceeded || client == .readTimeout || client == .connectTimeout { return "timed out" }
            return "\(client)"
        }
        let text = "\(error)"
        if text.lowercased().contains("connection refused") { return "connection refused" }
        return text
    }
}
