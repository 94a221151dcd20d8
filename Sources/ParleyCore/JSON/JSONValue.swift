import Glibc

/// A JSON document held as a Swift value: what the engine reads from config, wire answers
/// and the cache, and what it writes back out (see `canonicalText`).
///
/// Numbers keep the distinction JSON text makes: `1` is `.int(1)`, `1.0` and `1e3` are
/// `.double`. Integers are signed 64-bit; jansson refuses larger ones when parsing.
///
/// Equality is byte-exact, because equal values must produce identical canonical text:
/// strings and object keys compare by their UTF-8 bytes (Swift's own `String ==` treats
/// canonically equivalent spellings such as "é" and "e\u{301}" as equal), doubles by bit
/// pattern (so `0.0 != -0.0`, and a NaN equals itself). `.int(1) != .double(1.0)`.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

// MARK: - Equality and hashing

extension JSONValue: Hashable {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null):
            return true
        case let (.bool(left), .bool(right)):
            return left == right
        case let (.int(left), .int(right)):
            return left == right
        case let (.double(left), .double(right)):
            return left.bitPattern == right.bitPattern
        case let (.string(left), .string(right)):
            return utf8Equal(left, right)
        case let (.array(left), .array(right)):
            return left == right
        case let (.object(left), .object(right)):
            guard left.count == right.count else { return false }
            for (key, value) in left {
                // Dictionary lookup matches canonically equivalent keys; confirm the bytes.
                guard let index = right.index(forKey: key) else { return false }
                let (otherKey, otherValue) = right[index]
                guard utf8Equal(key, otherKey), value == otherValue else { return false }
            }
            return true
        default:
            return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        // String's own hash is consistent with byte equality (byte-equal strings hash alike),
        // so it can be used even though our equality is stricter than String's.
        switch self {
        case .null:
            hasher.combine(0 as UInt8)
        case .bool(let value):
            hasher.combine(1 as UInt8)
            hasher.combine(value)
        case .int(let value):
            hasher.combine(2 as UInt8)
            hasher.combine(value)
        case .double(let value):
            hasher.combine(3 as UInt8)
            hasher.combine(value.bitPattern)
        case .string(let value):
            hasher.combine(4 as UInt8)
            hasher.combine(value)
        case .array(let elements):
            hasher.combine(5 as UInt8)
            hasher.combine(elements)
        case .object(let fields):
            hasher.combine(6 as UInt8)
            hasher.combine(fields)
        }
    }
}

/// True when both strings have the same UTF-8 bytes (not merely canonically equivalent).
@inline(__always)
func utf8Equal(_ left: String, _ right: String) -> Bool {
    let result = left.utf8.withContiguousStorageIfAvailable { leftBytes in
        right.utf8.withContiguousStorageIfAvailable { rightBytes -> Bool in
            guard leftBytes.count == rightBytes.count else { return false }
            guard let leftBase = leftBytes.baseAddress, let rightBase = rightBytes.baseAddress else { return true }
            return memcmp(leftBase, rightBase, leftBytes.count) == 0
        }
    }
    if let result, let result { return result }
    return left.utf8.elementsEqual(right.utf8)
}

/// Byte-wise (UTF-8) ordering, the key order of canonical text. This equals code point
/// order, and unlike Swift's `<` it never normalizes.
@inline(__always)
func utf8Precedes(_ left: String, _ right: String) -> Bool {
    let result = left.utf8.withContiguousStorageIfAvailable { leftBytes in
        right.utf8.withContiguousStorageIfAvailable { rightBytes -> Bool in
            let common = min(leftBytes.count, rightBytes.count)
            if common > 0, let leftBase = leftBytes.baseAddress, let rightBase = rightBytes.baseAddress {
                let order = memcmp(leftBase, rightBase, common)
                if order != 0 { return order < 0 }
            }
            return leftBytes.count < rightBytes.count
        }
    }
    if let result, let result { return result }
    return left.utf8.lexicographicallyPrecedes(right.utf8)
}

// MARK: - Literals

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByStringInterpolation,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }

    /// A repeated key in a dictionary literal keeps the last value (a literal is code, not input).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var fields = [String: JSONValue](minimumCapacity: elements.count)
        for (key, value) in elements { fields[key] = value }
        self = .object(fields)
    }
}

// MARK: - Read access

extension JSONValue {
    /// The member `key` of an object; nil when missing or when this is not an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let fields) = self else { return nil }
        return fields[key]
    }

    /// The element at `index` of an array; nil when out of range or when this is not an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, also from a double that is integral and within Int64 (`3.0` gives 3).
    public var int64Value: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int64(exactly: value)
        default: return nil
        }
    }

    /// The number as a double, also from an integer (rounded to the nearest double above 2^53).
    public var doubleValue: Double? {
        switch self {
        case .double(let value): return value
        case .int(let value): return Double(value)
        default: return nil
        }
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The JSON type's name for messages: "null", "boolean", "integer", "number", "string",
    /// "array" or "object".
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// The canonical text (handy in logs and test failures).
    public var description: String { canonicalText }
}

/// JSON as text, parsed only when read as a value: what the cache stores can be handed on
/// (to C callers, into another text) without a parse and an encode on the way.
public struct JSONText: Sendable, Hashable, CustomStringConvertible {
    /// The JSON text (canonical when it comes from the cache).
    public let text: String

    public init(_ text: String) { self.text = text }

    public init(encoding value: JSONValue) { text = value.canonicalText }

    /// The text parsed (`.null` if it is not JSON, which the cache never hands out).
    public var value: JSONValue { (try? JSONValue.parse(text)) ?? .null }

    public static let null = JSONText("null")

    /// The JSON array text of `items`, joined without a parse.
    public static func arrayText(_ items: [JSONText]) -> String {
        var text = "["
        text.reserveCapacity(items.reduce(2) { $0 + $1.text.utf8.count + 1 })
        for (index, item) in items.enumerated() {
            if index > 0 { text += "," }
            text += item.text
        }
        text += "]"
        return text
    }

    public var description: String { text }
}
