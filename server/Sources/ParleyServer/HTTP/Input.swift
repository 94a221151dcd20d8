// Request parameters: typed accessors over the JSON body and the query string that turn
// every wrong type or value into a 400 naming the parameter.

struct APIError: Error, Sendable {
    let status: Int
    let code: Int
    let message: String

    static func invalid(_ name: String, _ detail: String) -> APIError {
        APIError(status: 400, code: 400100, message: "\"\(name)\" \(detail)")
    }
    static func missing(_ name: String) -> APIError {
        APIError(status: 400, code: 400111, message: "\"\(name)\" is required.")
    }
    static func malformed(_ detail: String) -> APIError {
        APIError(status: 400, code: 400102, message: "Malformed request body: \(detail)")
    }
    static func tooLong(_ name: String, _ max: Int) -> APIError {
        APIError(status: 400, code: 400104, message: "\"\(name)\" is longer than \(max) bytes.")
    }
    static func exists(_ what: String) -> APIError {
        APIError(status: 400, code: 400202, message: "\(what) already exists.")
    }
    static func badToken(_ name: String = "token") -> APIError {
        APIError(status: 400, code: 400110, message: "\"\(name)\" is not a valid pagination token.")
    }
    static func notFound(_ what: String) -> APIError {
        APIError(status: 404, code: 400201, message: "\(what) not found.")
    }
    /// A send repeated with the request id of a message that was stored and deleted since.
    static func sentThenDeleted(_ messageId: Int64) -> APIError {
        APIError(status: 410, code: 400203, message: "The message this req_id sent (\(messageId)) was deleted since.")
    }
    static func unavailable(_ detail: String) -> APIError {
        APIError(status: 503, code: 500902, message: "The database is unavailable: \(detail)")
    }
    static func forbidden(_ detail: String) -> APIError {
        APIError(status: 403, code: 400108, message: "Not allowed: \(detail)")
    }
    static let banned = APIError(status: 403, code: 900041, message: "The user is banned from this channel.")
    static let muted = APIError(status: 403, code: 900050, message: "The user is muted in this channel.")
    static let frozen = APIError(status: 403, code: 900060, message: "The channel is frozen.")
    static let notPublic = APIError(status: 403, code: 400109, message: "The channel is not public.")
    static let methodNotAllowed = APIError(status: 405, code: 400105, message: "Method not allowed on this path.")
    static let tooLarge = APIError(status: 413, code: 400113, message: "The upload is larger than the server's limit.")
    static let bodyTooLarge = APIError(status: 413, code: 400113, message: "The request body is larger than 1 MiB.")
    static let unauthorizedSession = APIError(status: 401, code: 400301, message: "Invalid or missing \"Session-Key\".")
    static let expiredSession = APIError(status: 401, code: 400302, message: "The session key has expired.")
    static let unauthorizedApiToken = APIError(status: 401, code: 400401, message: "Invalid \"Api-Token\".")
    static func `internal`(_ detail: String) -> APIError {
        APIError(status: 500, code: 500901, message: "Internal error: \(detail)")
    }

    var json: JSON {
        .obj([("error", .bool(true)), ("code", .int(Int64(code))), ("message", .string(message))])
    }
}

/// Query-string parameters: repeated keys keep every value.
struct Query: Sendable {
    private(set) var values: [String: [String]] = [:]

    init(_ raw: Substring?) {
        guard let raw else { return }
        for pair in raw.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = percentDecode(parts[0], plusIsSpace: true)
            let value = parts.count > 1 ? percentDecode(parts[1], plusIsSpace: true) : ""
            values[key, default: []].append(value)
        }
    }

    func first(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String]? { values[name] }
}

/// Percent-decoding that never fails: invalid escapes stay as they are, invalid UTF-8 is repaired.
func percentDecode<S: StringProtocol>(_ s: S, plusIsSpace: Bool) -> String {
    var bytes: [UInt8] = []
    let utf8 = Array(s.utf8)
    var i = 0
    func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 48...57: return b - 48
        case 65...70: return b - 55
        case 97...102: return b - 87
        default: return nil
        }
    }
    while i < utf8.count {
        let b = utf8[i]
        if b == UInt8(ascii: "%"), i + 2 < utf8.count, let h = hexValue(utf8[i + 1]), let l = hexValue(utf8[i + 2]) {
            bytes.append(h * 16 + l)
            i += 3
        } else if b == UInt8(ascii: "+") && plusIsSpace {
            bytes.append(0x20)
            i += 1
        } else {
            bytes.append(b)
            i += 1
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Lookup over the JSON body first, then the query string.
/// A path segment with every byte outside [A-Za-z0-9-._~] percent-encoded: the one form
/// the router matches (Routes.routable) and the server writes (file URLs).
func percentEncodePathSegment(_ segment: String) -> String {
    var out = ""
    out.reserveCapacity(segment.utf8.count)
    let hex = Array("0123456789ABCDEF".utf8)
    for b in segment.utf8 {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(b))
        default:
            out.unicodeScalars.append("%")
            out.unicodeScalars.append(Unicode.Scalar(hex[Int(b >> 4)]))
            out.unicodeScalars.append(Unicode.Scalar(hex[Int(b & 0x0F)]))
        }
    }
    return out
}

struct Input: Sendable {
    let body: JSONObject
    let query: Query
    static let maxStringBytes = 65535

    private func raw(_ name: String) -> JSON? {
        if let v = body[name], v != .null { return v }
        if let q = query.first(name) { return .string(q) }
        return nil
    }

    func has(_ name: String) -> Bool { raw(name) != nil }

    /// No text the server takes may hold U+0000: PostgreSQL cannot store it, and both backends
    /// answer alike (PROTOCOL.md §1).
    static let nulMessage = "must not contain the character U+0000."

    /// The first field of a request whose text (a key or a value, at any depth) holds U+0000.
    static func fieldWithNUL(body: JSONObject, query: Query) -> String? {
        func holds(_ value: JSON) -> Bool {
            switch value {
            case .string(let s): return s.utf8.contains(0)
            case .array(let items): return items.contains(where: holds)
            case .object(let o): return o.entries.contains { $0.0.utf8.contains(0) || holds($0.1) }
            default: return false
            }
        }
        for (key, value) in body.entries where key.utf8.contains(0) || holds(value) { return key }
        for (key, values) in query.values where key.utf8.contains(0) || values.contains(where: { $0.utf8.contains(0) }) {
            return key
        }
        return nil
    }

    func string(_ name: String, maxBytes: Int = Input.maxStringBytes) throws(APIError) -> String? {
        guard let v = raw(name) else { return nil }
        guard case .string(let s) = v else { throw APIError.invalid(name, "must be a string, not \(v.typeName).") }
        if s.utf8.count > maxBytes { throw APIError.tooLong(name, maxBytes) }
        return s
    }

    func requiredString(_ name: String, maxBytes: Int = Input.maxStringBytes) throws(APIError) -> String {
        guard let s = try string(name, maxBytes: maxBytes) else { throw APIError.missing(name) }
        return s
    }

    func nonEmptyString(_ name: String, maxBytes: Int = Input.maxStringBytes) throws(APIError) -> String {
        let s = try requiredString(name, maxBytes: maxBytes)
        if s.isEmpty { throw APIError.invalid(name, "must not be empty.") }
        return s
    }

    func int(_ name: String, min: Int64? = nil, max: Int64? = nil) throws(APIError) -> Int64? {
        guard let v = raw(name) else { return nil }
        let value: Int64
        switch v {
        case .int(let i): value = i
        case .string(let s):
            guard let i = Int64(s.trimmingSpaces) else { throw APIError.invalid(name, "must be an integer.") }
            value = i
        default: throw APIError.invalid(name, "must be an integer, not \(v.typeName).")
        }
        if let min, value < min { throw APIError.invalid(name, "must be at least \(min).") }
        if let max, value > max { throw APIError.invalid(name, "must be at most \(max).") }
        return value
    }

    func bool(_ name: String) throws(APIError) -> Bool? {
        guard let v = raw(name) else { return nil }
        switch v {
        case .bool(let b): return b
        case .string(let s):
            switch s.lowercased() {
            case "true", "1": return true
            case "false", "0": return false
            default: throw APIError.invalid(name, "must be a boolean (true or false).")
            }
        default: throw APIError.invalid(name, "must be a boolean, not \(v.typeName).")
        }
    }

    func bool(_ name: String, default value: Bool) throws(APIError) -> Bool {
        try bool(name) ?? value
    }

    /// A list: a JSON array of strings, a comma-separated string, or repeated query keys.
    func stringList(_ name: String) throws(APIError) -> [String]? {
        if let v = body[name], v != .null {
            switch v {
            case .array(let items):
                var out: [String] = []
                for item in items {
                    guard case .string(let s) = item else { throw APIError.invalid(name, "must be a list of strings.") }
                    if s.utf8.count > Input.maxStringBytes { throw APIError.tooLong(name, Input.maxStringBytes) }
                    out.append(s)
                }
                return out
            case .string(let s):
                return s.split(separator: ",").map { String($0) }.filter { !$0.isEmpty }
            default:
                throw APIError.invalid(name, "must be a list of strings, not \(v.typeName).")
            }
        }
        guard let values = query.all(name) else { return nil }
        return values.flatMap { $0.split(separator: ",").map(String.init) }.filter { !$0.isEmpty }
    }

    func enumValue(_ name: String, _ allowed: [String], default value: String, caseInsensitive: Bool = true) throws(APIError) -> String {
        guard let s = try string(name) else { return value }
        let probe = caseInsensitive ? s.lowercased() : s
        guard let match = allowed.first(where: { (caseInsensitive ? $0.lowercased() : $0) == probe }) else {
            throw APIError.invalid(name, "must be one of: \(allowed.joined(separator: ", ")).")
        }
        return match
    }

    func object(_ name: String) throws(APIError) -> JSONObject? {
        guard let v = body[name], v != .null else {
            if let q = query.first(name) {
                guard case .object(let o)? = try? JSONParser.parse(q) else {
                    throw APIError.invalid(name, "must be a JSON object.")
                }
                return o
            }
            return nil
        }
        guard case .object(let o) = v else { throw APIError.invalid(name, "must be an object, not \(v.typeName).") }
        return o
    }

    func stringMap(_ name: String) throws(APIError) -> [String: String]? {
        guard let o = try object(name) else { return nil }
        var out: [String: String] = [:]
        for (k, v) in o.entries {
            guard case .string(let s) = v else { throw APIError.invalid("\(name).\(k)", "must be a string.") }
            if k.isEmpty || k.utf8.count > 128 { throw APIError.invalid(name, "keys must be 1 to 128 bytes.") }
            if s.utf8.count > 190_000 { throw APIError.tooLong("\(name).\(k)", 190_000) }
            out[k] = s
        }
        return out
    }

    func intMap(_ name: String) throws(APIError) -> [String: Int64]? {
        guard let o = try object(name) else { return nil }
        var out: [String: Int64] = [:]
        for (k, v) in o.entries {
            guard case .int(let i) = v else { throw APIError.invalid("\(name).\(k)", "must be an integer.") }
            if k.isEmpty || k.utf8.count > 128 { throw APIError.invalid(name, "keys must be 1 to 128 bytes.") }
            out[k] = i
        }
        return out
    }

    func limit(_ name: String = "limit", default value: Int64 = 10, max: Int64 = 100, min: Int64 = 1) throws(APIError) -> Int {
        Int(try int(name, min: min, max: max) ?? value)
    }
}

extension StringProtocol {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " { s.removeFirst() }
        while let l = s.last, l == " " { s.removeLast() }
        return String(s)
    }
}
