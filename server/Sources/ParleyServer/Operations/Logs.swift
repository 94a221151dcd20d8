// What the server writes to stderr (docs/SERVER.md "Logs"): swift-log, as text or as one JSON
// object per line, and one access-log line per request at level info. The access log names
// the route template, never the path (which holds user and channel ids only the template
// generalizes), and never a header value (but the client's address, Operations/ClientAddress.swift)
// or a body.
import Foundation
import Logging

enum LogFormat: String, Sendable {
    case text, json
}

enum ServerLogging {
    /// Points every logger of the process (the server's, Hummingbird's) at
    /// stderr in `format`. Once, before any logger is made.
    static func bootstrap(format: LogFormat, level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler
            switch format {
            case .text: handler = StreamLogHandler.standardError(label: label)
            case .json: handler = JSONLineLogHandler(label: label)
            }
            handler.logLevel = level
            return handler
        }
    }
}

/// One JSON object per line: `time` (UTC, milliseconds), `level`, `logger`, `message`, then the
/// metadata's keys.
struct JSONLineLogHandler: LogHandler {
    let label: String
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var logLevel: Logger.Level = .info

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object = JSONObject()
        object["time"] = .string(Self.timestamp(nowMillis()))
        object["level"] = .string(event.level.rawValue)
        object["logger"] = .string(label)
        object["message"] = .string(event.message.description)
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let given = event.metadata { merged.merge(given) { _, new in new } }
        if let error = event.error { merged["error"] = .string("\(error)") }
        for key in merged.keys.sorted() where object[key] == nil {
            object[key] = Self.json(merged[key]!)
        }
        StandardError.writeLine(JSON.object(object).serialized())
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSON {
        switch value {
        case .string(let text): return .string(text)
        case .stringConvertible(let convertible):
            // Numbers stay numbers, for whoever queries the lines.
            if let number = convertible as? Int { return .int(Int64(number)) }
            if let number = convertible as? Double { return .double(number) }
            return .string(convertible.description)
        case .array(let values): return .array(values.map(json))
        case .dictionary(let entries):
            var object = JSONObject()
            for key in entries.keys.sorted() { object[key] = json(entries[key]!) }
            return .object(object)
        }
    }

    /// `2026-11-25T06:12:18.123Z`.
    static func timestamp(_ millis: Int64) -> String {
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let fraction = Int(millis % 1000)
        let milliseconds = fraction < 10 ? "00\(fraction)" : fraction < 100 ? "0\(fraction)" : "\(fraction)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(milliseconds)Z"
    }
}

/// Whole lines to stderr, one write each, so that lines from several threads never mix.
enum StandardError {
    private static let lock = NSLock()

    static func writeLine(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
                if written <= 0 {
                    if written < 0 && errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}

/// What the access log and the metrics learn about a request while it is answered (its id,
/// the method as sent, the route template, the caller). Each request's context holds one
/// (ParleyRequestContext); handlers on other tasks write to it, hence the lock.
final class RequestRecord: @unchecked Sendable {
    private let lock = NSLock()
    private var id = "-"
    private var sentMethod: String?
    private var routeTemplate = "-"
    private var callerName = "-"

    var requestId: String {
        get { lock.withLock { id } }
        set { lock.withLock { id = newValue } }
    }

    /// Set when the router sees another method than the one sent (Routes.routable).
    var method: String? {
        get { lock.withLock { sentMethod } }
        set { lock.withLock { sentMethod = newValue } }
    }

    /// The matched route's template; "-" for no route.
    var route: String {
        get { lock.withLock { routeTemplate } }
        set { lock.withLock { routeTemplate = newValue } }
    }

    /// "admin", the session user's id, or "-" before (or without) authentication.
    var caller: String {
        get { lock.withLock { callerName } }
        set { lock.withLock { callerName = newValue } }
    }

    /// The request id a client sent in `X-Request-Id` when it is a sane token (1–128 of
    /// [A-Za-z0-9._:-]), else a new one: a balancer's id carries through.
    static func requestId(given: String?) -> String {
        if let given, (1...128).contains(given.utf8.count),
           given.utf8.allSatisfy({ byte in
               (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                   || byte == 0x2E || byte == 0x5F || byte == 0x3A || byte == 0x2D
           }) {
            return given
        }
        return randomHex(8)
    }
}
