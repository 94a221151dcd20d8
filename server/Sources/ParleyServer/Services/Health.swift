// GET /health/live and GET /health/ready (docs/SERVER.md "Health"): for a load balancer or
// an orchestrator. No credentials are asked for, and the answers say nothing a stranger could
// use: states only, no host names, no error texts.
import Hummingbird

enum HealthProbe: Sendable {
    /// The process runs and answers HTTP.
    case live
    /// The database answers, its schema is this server's, and event streams are accepted.
    case ready
}

enum Health {
    /// How long the database may take to answer the readiness check.
    static let databaseTimeoutMillis = 2_000

    static func answer(_ probe: HealthProbe, runner: RequestRunner) async -> Response {
        switch probe {
        case .live:
            return ParleyResponder.json(object([("status", "live"), ("version", ServerVersion.string)]))
        case .ready:
            let shared = runner.shared
            let schema = await schemaState(shared.database)
            // From the stop signal on, through the drain: a balancer takes the server out.
            let streams = shared.hub.isShuttingDown || shared.stop.isRequested ? "closing" : "accepting"
            let ready = schema == .current && streams == "accepting"
            let body = object([
                ("status", ready ? "ready" : "not_ready"),
                ("version", ServerVersion.string),
                ("database", schema == .unreachable ? "unreachable" : "ok"),
                ("schema", schema == .current ? "current" : schema == .unreachable ? "unknown" : "outdated"),
                ("event_streams", streams),
            ])
            var response = ParleyResponder.json(body, status: ready ? 200 : 503)
            if !ready { response.headers[.retryAfter] = String(ParleyResponder.retryAfterSeconds) }
            return response
        }
    }

    private static func object(_ fields: [(String, String)]) -> JSON {
        var object = JSONObject()
        for (key, value) in fields { object[key] = .string(value) }
        return .object(object)
    }

    enum SchemaState { case current, outdated, unreachable }

    /// Reads the applied schema version, giving up after `databaseTimeoutMillis`.
    static func schemaState(_ database: any SQLDatabase) async -> SchemaState {
        await withTaskGroup(of: SchemaState?.self) { group in
            group.addTask {
                do {
                    let version = try await database.read { db in try await Migrations.appliedVersion(db) }
                    return version == Migrations.latestVersion ? .current : .outdated
                } catch {
                    return .unreachable
                }
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(databaseTimeoutMillis))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .unreachable
        }
    }
}
