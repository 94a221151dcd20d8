// Where the server keeps its data, from the `database` setting (Config/Settings.swift): a SQLite
// file by plain path or `sqlite:PATH`, or a PostgreSQL server by
// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=...]`.
// Descriptions and errors never contain the password: they end up in logs.
import Foundation

enum DatabaseLocation: Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(PostgresURL)

    static let defaultSQLitePath = "parley-server.sqlite"

    static func parse(_ value: String) throws(DatabaseURLError) -> DatabaseLocation {
        if value.isEmpty { throw DatabaseURLError("the database location is empty") }
        if let scheme = urlScheme(of: value) {
            switch scheme.lowercased() {
            case "postgres", "postgresql":
                return .postgres(try PostgresURL(parsing: value))
            case "sqlite":
                // `sqlite:///abs/path` and `sqlite://relative/path`, as other tools write them.
                let path = String(value.dropFirst("sqlite://".count))
                if path.isEmpty { throw DatabaseURLError("'sqlite://' needs a file path after it") }
                return .sqlite(path: path)
            default:
                throw DatabaseURLError(
                    "unsupported database URL scheme '\(scheme)' (use a file path, sqlite:PATH or postgres://...)")
            }
        }
        if value.lowercased().hasPrefix("sqlite:") {
            let path = String(value.dropFirst("sqlite:".count))
            if path.isEmpty { throw DatabaseURLError("'sqlite:' needs a file path after the colon") }
            return .sqlite(path: path)
        }
        return .sqlite(path: value)
    }

    /// The scheme of `SCHEME://...`, or nil for anything else (plain paths, `sqlite:PATH`).
    private static func urlScheme(of value: String) -> String? {
        guard let range = value.range(of: "://") else { return nil }
        let scheme = value[..<range.lowerBound]
        guard let first = scheme.first, first.isASCII, first.isLetter,
              scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+.-".contains($0)) })
        else { return nil }
        return String(scheme)
    }

    var description: String {
        switch self {
        case .sqlite(let path): return "sqlite:\(path)"
        case .postgres(let url): return url.description
        }
    }
}

/// TLS use towards the PostgreSQL server, as libpq's `sslmode` names it. As in libpq,
/// `prefer` and `require` encrypt without checking the server's certificate;
/// `verify-full` checks it against the system's trust roots and the host name.
enum PostgresTLSMode: String, Sendable, Equatable, CaseIterable {
    case disable
    case prefer
    case require
    case verifyFull = "verify-full"
}

struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    static let defaultPort = 5432
    private static let shape = "postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=disable|prefer|require|verify-full]"

    var host: String
    var port: Int
    var user: String
    var password: String?
    var database: String
    var tlsMode: PostgresTLSMode

    init(host: String, port: Int = PostgresURL.defaultPort, user: String, password: String? = nil,
         database: String, tlsMode: PostgresTLSMode = .disable) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.tlsMode = tlsMode
    }

    /// Parses `postgres://` or `postgresql://` URLs. Error messages quote only the part at
    /// fault, never the whole value, which may hold a password.
    init(parsing value: String) throws(DatabaseURLError) {
        var rest = Substring(value)
        var matchedScheme = false
        for scheme in ["postgres://", "postgresql://"] where rest.lowercased().hasPrefix(scheme) {
            rest = rest.dropFirst(scheme.count)
            matchedScheme = true
            break
        }
        guard matchedScheme else { throw DatabaseURLError("a PostgreSQL URL starts with postgres:// or postgresql://") }

        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let slash = rest.firstIndex(of: "/") else {
            throw DatabaseURLError("the PostgreSQL URL has no database name; expected \(Self.shape)")
        }
        let authority = rest[..<slash]
        let path = rest[rest.index(after: slash)...]

        // The password may contain '@' only percent-encoded, but take the last '@' anyway:
        // host names never contain one.
        guard let at = authority.lastIndex(of: "@") else {
            throw DatabaseURLError("the PostgreSQL URL has no user name; expected \(Self.shape)")
        }
        let userInfo = authority[..<at]
        let hostPort = authority[authority.index(after: at)...]

        let rawUser: Substring
        var rawPassword: Substring?
        if let colon = userInfo.firstIndex(of: ":") {
            rawUser = userInfo[..<colon]
            rawPassword = userInfo[userInfo.index(after: colon)...]
        } else {
            rawUser = userInfo
        }
        guard let user = String(rawUser).removingPercentEncoding, !user.isEmpty else {
            throw DatabaseURLError(rawUser.isEmpty
                ? "the PostgreSQL URL has an empty user name"
                : "the user name in the PostgreSQL URL has an invalid %-escape")
        }
        var password: String?
        if let rawPassword {
            guard let decoded = String(rawPassword).removingPercentEncoding else {
                throw DatabaseURLError("the password in the PostgreSQL URL has an invalid %-escape")
            }
            // `user:@host` means no password, as in libpq.
            password = decoded.isEmpty ? nil : decoded
        }

        let (host, port) = try Self.parseHostPort(hostPort)

        guard !path.isEmpty else {
            throw DatabaseURLError("the PostgreSQL URL has no database name; expected \(Self.shape)")
        }
        guard !path.contains("/"), let database = String(path).removingPercentEncoding, !database.isEmpty else {
            throw DatabaseURLError("the database name in the PostgreSQL URL is not valid: '\(path)'")
        }

        var tlsMode = PostgresTLSMode.disable
        for parameter in query.split(separator: "&", omittingEmptySubsequences: true) {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pair[0]
            let setting = pair.count > 1 ? pair[1] : ""
            guard name == "sslmode" else {
                throw DatabaseURLError("unsupported PostgreSQL URL parameter '\(name)' (supported: sslmode)")
            }
            guard let mode = PostgresTLSMode(rawValue: String(setting)) else {
                let modes = PostgresTLSMode.allCases.map(\.rawValue).joined(separator: ", ")
                throw DatabaseURLError("unsupported sslmode '\(setting)' (supported: \(modes))")
            }
            tlsMode = mode
        }

        self.init(host: host, port: port, user: user, password: password, database: database, tlsMode: tlsMode)
    }

    private static func parseHostPort(_ hostPort: Substring) throws(DatabaseURLError) -> (String, Int) {
        var host: Substring
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            // An IPv6 literal: its colons are not the port separator.
            guard let close = hostPort.firstIndex(of: "]") else {
                throw DatabaseURLError("the PostgreSQL URL has an unterminated [IPv6] host")
            }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else {
                    throw DatabaseURLError("unexpected text after the [IPv6] host in the PostgreSQL URL")
                }
                portText = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { throw DatabaseURLError("the PostgreSQL URL has no host; expected \(shape)") }
        var port = defaultPort
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw DatabaseURLError("the port in the PostgreSQL URL must be 1...65535, not '\(portText)'")
            }
            port = number
        }
        return (String(host), port)
    }

    /// The URL with the password replaced by `***`: safe for logs and messages.
    var description: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let secret = password == nil ? "" : ":***"
        let query = tlsMode == .disable ? "" : "?sslmode=\(tlsMode.rawValue)"
        return "postgres://\(user)\(secret)@\(hostPart):\(port)/\(database)\(query)"
    }
}

struct DatabaseURLError: Error, CustomStringConvertible, Equatable {
    let description: String
    init(_ description: String) { self.description = description }
}
