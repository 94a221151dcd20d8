// A small JSON value type with a strict parser and a deterministic serializer.
// Our own type (rather than JSONSerialization) because request validation must tell
// booleans from numbers and integers from floats, and responses must never contain
// floats where the protocol promises integers.

enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)

    var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int: return "integer"
        case .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// An object that keeps insertion order, so responses read in a stable, documented order.
struct JSONObject: Sendable, Equatable {
    private(set) var keys: [String] = []
    private var values: [String: JSON] = [:]

    init() {}

    subscript(key: String) -> JSON? {
        get { values[key] }
        set {
            if let newValue {
                if values.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if values.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    var isEmpty: Bool { keys.isEmpty }
    var count: Int { keys.count }
    var entries: [(String, JSON)] { keys.map { ($0, values[$0] ?? .null) } }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int64) { self = .int(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSON {
    static func obj(_ pairs: [(String, JSON?)]) -> JSON {
        var o = JSONObject()
        for (k, v) in pairs { if let v { o[k] = v } }
        return .object(o)
    }
    static func str(_ s: String) -> JSON { .string(s) }
    static func num(_ i: Int64) -> JSON { .int(i) }
    static func strings(_ a: [String]) -> JSON { .array(a.map { .string($0) }) }
    static func stringMap(_ m: [String: String]) -> JSON {
        var o = JSONObject()
        for k in m.keys.sorted() { o[k] = .string(m[k]!) }
        return .object(o)
    }
    static func intMap(_ m: [String: Int64]) -> JSON {
        var o = JSONObject()
        for k in m.keys.sorted() { o[k] = .int(m[k]!) }
        return .object(o)
    }
}

// MARK: - Serialization

extension JSON {
    func serialized() -> String {
        var out = ""
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d):
            if d.isFinite { out += String(d) } else { out += "0" }
        case .string(let s): JSON.writeString(s, to: &out)
        case .array(let a):
            out += "["
            for (i, v) in a.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case .object(let o):
            out += "{"
            var first = true
            for k in o.keys {
                JSON.writeMember(k, o[k] ?? .null, first: &first, to: &out)
            }
            out += "}"
        }
    }

    /// One `"key":value` of an object, with the comma before it unless it is the first.
    static func writeMember(_ key: String, _ value: JSON, first: inout Bool, to out: inout String) {
        if !first { out += "," }
        first = false
        writeString(key, to: &out)
        out += ":"
        value.write(to: &out)
    }

    /// The members an object built by `JSON.obj(fields)` would have (nil values left out),
    /// without the braces: lets a caller splice parts rendered once into many objects.
    /// The fields' keys must be distinct (`obj` keeps one member for a repeated key).
    static func writeFields(_ fields: [(String, JSON?)], first: inout Bool, to out: inout String) {
        for (k, v) in fields { if let v { writeMember(k, v, first: &first, to: &out) } }
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        // Bytes are scanned, and runs without anything to escape appended whole (most strings
        // are one such run). Escapes are all ASCII, so runs start and end on scalar
        // boundaries and the output equals a scalar-by-scalar copy.
        var s = s
        let plain: Bool = s.withUTF8 { bytes in
            guard var i = bytes.firstIndex(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else { return true }
            var runStart = 0
            while i < bytes.count {
                let b = bytes[i]
                if b >= 0x20 && b != 0x22 && b != 0x5C { i += 1; continue }
                if runStart < i { out += String(decoding: UnsafeBufferPointer(rebasing: bytes[runStart..<i]), as: UTF8.self) }
                switch b {
                case 0x22: out += "\\\""
                case 0x5C: out += "\\\\"
                case 0x0A: out += "\\n"
                case 0x0D: out += "\\r"
                case 0x09: out += "\\t"
                default:
                    let hex = String(b, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
                i += 1
                runStart = i
            }
            if runStart < bytes.count {
                out += String(decoding: UnsafeBufferPointer(rebasing: bytes[runStart...]), as: UTF8.self)
            }
            return false
        }
        if plain { out += s }
        out += "\""
    }
}

// MARK: - Parsing

struct JSONParseError: Error, Sendable {
    let message: String
}

struct JSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0
    private static let maxDepth = 64

    static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSON {
        var parser = JSONParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        if parser.index != parser.bytes.count {
            throw JSONParseError(message: "unexpected trailing characters at offset \(parser.index)")
        }
        return value
    }

    static func parse(_ text: String) throws(JSONParseError) -> JSON {
        try parse(Array(text.utf8))
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            let b = bytes[index]
            if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { index += 1 } else { break }
        }
    }

    private func fail(_ what: String) -> JSONParseError {
        JSONParseError(message: "\(what) at offset \(index)")
    }

    private mutating func parseValue() throws(JSONParseError) -> JSON {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: String) throws(JSONParseError) {
        for b in literal.utf8 {
            guard index < bytes.count, bytes[index] == b else { throw fail("invalid literal") }
            index += 1
        }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSON {
        depth += 1
        guard depth <= JSONParser.maxDepth else { throw fail("nesting too deep") }
        defer { depth -= 1 }
        index += 1
        var object = JSONObject()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected object key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            object[key] = try parseValue()
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw fail("expected ',' or '}'")
        }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSON {
        depth += 1
        guard depth <= JSONParser.maxDepth else { throw fail("nesting too deep") }
        defer { depth -= 1 }
        index += 1
        var items: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw fail("expected ',' or ']'")
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Most strings have no escape: their bytes are the string's, validated in place.
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let end = index
                index += 1
                let text = bytes.withUnsafeBufferPointer { all in
                    String(validating: UnsafeBufferPointer(rebasing: all[start..<end]), as: UTF8.self)
                }
                guard let text else { throw fail("invalid UTF-8 in string") }
                return text
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw fail("control character in string") }
            index += 1
        }
        var raw = Array(bytes[start..<index])
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") { index += 1; break }
            if b < 0x20 { throw fail("control character in string") }
            if b == UInt8(ascii: "\\") {
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): raw.append(0x22)
                case UInt8(ascii: "\\"): raw.append(0x5C)
                case UInt8(ascii: "/"): raw.append(0x2F)
                case UInt8(ascii: "b"): raw.append(0x08)
                case UInt8(ascii: "f"): raw.append(0x0C)
                case UInt8(ascii: "n"): raw.append(0x0A)
                case UInt8(ascii: "r"): raw.append(0x0D)
                case UInt8(ascii: "t"): raw.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800..<0xDC00).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                              bytes[index + 1] == UInt8(ascii: "u") else { throw fail("lone surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("invalid surrogate pair") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(code) {
                        throw fail("lone surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw fail("invalid code point") }
                    raw.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw fail("invalid escape")
                }
            } else {
                raw.append(b)
                index += 1
            }
        }
        guard let s = String(validating: raw, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
        return s
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
            throw fail("invalid number")
        }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digitsStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            if index == digitsStart { throw fail("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            if index == digitsStart { throw fail("invalid number") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let i = Int64(text) { return .int(i) }
        guard let d = Double(text) else { throw fail("invalid number") }
        return .double(d)
    }
}
