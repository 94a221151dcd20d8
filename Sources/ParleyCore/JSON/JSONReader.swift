/// Typed, validated access to the members of one JSON object, for config documents, user
/// parameters and server answers. Every failure names the member's full path and what was
/// wrong, e.g. `config.cache.size_limit_mb: expected integer, got string` or
/// `message_id: missing required field`, with the reader's `errorCode` (`.invalidArgument`
/// for what the application passes in, `.protocolViolation` for server answers).
///
/// Conventions for every accessor:
/// - required (`string(_:)`): missing or `null` is an error;
/// - optional (`optionalString(_:)`): missing or `null` gives nil; a wrong type is an error;
/// - with a default (`string(_:default:)`): missing or `null` gives the default;
/// - integers also accept integral doubles within Int64 (`5.0`); doubles accept integers;
///   booleans are only `true`/`false`.
public struct JSONReader: Sendable {
    /// The object's members.
    public let fields: [String: JSONValue]
    /// Where this object sits, e.g. "config.cache"; empty for a top-level object.
    public let path: String
    public let errorCode: ParleyErrorCode

    /// Throws when `value` is not an object ("config: expected object, got array").
    public init(_ value: JSONValue, path: String = "", errorCode: ParleyErrorCode = .invalidArgument) throws(ParleyError) {
        guard case .object(let fields) = value else {
            let subject = path.isEmpty ? "value" : path
            throw ParleyError(errorCode, "\(subject): expected object, got \(value.typeName)")
        }
        self.init(fields: fields, path: path, errorCode: errorCode)
    }

    public init(fields: [String: JSONValue], path: String = "", errorCode: ParleyErrorCode = .invalidArgument) {
        self.fields = fields
        self.path = path
        self.errorCode = errorCode
    }

    /// The raw member, nil when missing (a `null` member is `.null`).
    public subscript(key: String) -> JSONValue? { fields[key] }

    /// True when the member is present and not null.
    public func has(_ key: String) -> Bool {
        guard let value = fields[key] else { return false }
        return !value.isNull
    }

    /// The full path of a member, e.g. "config.cache" + "size_limit_mb".
    public func path(of key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// An error about a member in this reader's style, for checks the reader cannot do itself:
    /// `error("order", "unknown channel order 'x'")` gives "query.order: unknown channel order 'x'".
    public func error(_ key: String, _ message: String) -> ParleyError {
        ParleyError(errorCode, "\(path(of: key)): \(message)")
    }

    /// Parses text that must hold an object and returns a reader on it. With an `errorCode`
    /// other than `.invalidArgument` (e.g. `.protocolViolation` for a server answer), malformed
    /// text is reported with that code instead of `.invalidJSON`; limit errors keep their code.
    public static func parse(
        _ text: String, path: String = "", errorCode: ParleyErrorCode = .invalidArgument, limits: JSONLimits = .default
    ) throws(ParleyError) -> JSONReader {
        let value: JSONValue
        do {
            value = try JSONValue.parse(text, limits: limits)
        } catch {
            throw recoded(error, errorCode)
        }
        return try JSONReader(value, path: path, errorCode: errorCode)
    }

    /// `parse(_:path:errorCode:limits:)` for bytes, e.g. an HTTP response body.
    public static func parse(
        bytes: UnsafeRawBufferPointer, path: String = "", errorCode: ParleyErrorCode = .invalidArgument,
        limits: JSONLimits = .default
    ) throws(ParleyError) -> JSONReader {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes: bytes, limits: limits)
        } catch {
            throw recoded(error, errorCode)
        }
        return try JSONReader(value, path: path, errorCode: errorCode)
    }

    private static func recoded(_ error: ParleyError, _ errorCode: ParleyErrorCode) -> ParleyError {
        guard error.code == .invalidJSON, errorCode != .invalidArgument else { return error }
        var recoded = error
        recoded.code = errorCode
        return recoded
    }

    // MARK: Unknown keys

    /// Refuses members outside `allowed` ("config: unknown key 'foo'"), so that a typo in a
    /// config document is reported instead of silently ignored.
    public func rejectUnknownKeys(allowed: Set<String>) throws(ParleyError) {
        let unknown = fields.keys.filter { !allowed.contains($0) }.sorted(by: utf8Precedes)
        guard !unknown.isEmpty else { return }
        let subject = path.isEmpty ? "" : "\(path): "
        let list = unknown.map { "'\($0)'" }.joined(separator: ", ")
        throw ParleyError(errorCode, "\(subject)unknown key\(unknown.count == 1 ? "" : "s") \(list)")
    }

    // MARK: Strings

    public func string(_ key: String) throws(ParleyError) -> String {
        try required(key, "string", optionalString(key))
    }

    public func optionalString(_ key: String) throws(ParleyError) -> String? {
        guard let value = present(key) else { return nil }
        guard case .string(let text) = value else { throw typeError(key, expected: "string", got: value) }
        return text
    }

    public func string(_ key: String, default defaultValue: String) throws(ParleyError) -> String {
        try optionalString(key) ?? defaultValue
    }

    /// A string that must be one of `E`'s raw values ("expected one of 'a', 'b', got 'c'").
    public func enumeration<E: RawRepresentable & CaseIterable>(_ key: String, as type: E.Type) throws(ParleyError) -> E
    where E.RawValue == String {
        try required(key, "string", optionalEnumeration(key, as: type))
    }

    public func optionalEnumeration<E: RawRepresentable & CaseIterable>(_ key: String, as type: E.Type) throws(ParleyError) -> E?
    where E.RawValue == String {
        guard let text = try optionalString(key) else { return nil }
        if let value = E(rawValue: text) { return value }
        let choices = E.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ")
        throw error(key, "expected one of \(choices), got '\(text)'")
    }

    public func enumeration<E: RawRepresentable & CaseIterable>(_ key: String, default defaultValue: E) throws(ParleyError) -> E
    where E.RawValue == String {
        try optionalEnumeration(key, as: E.self) ?? defaultValue
    }

    // MARK: Integers

    /// A required integer, optionally limited to `range` ("must be between 64 and 4096, got 10").
    public func int(_ key: String, in range: ClosedRange<Int64>? = nil) throws(ParleyError) -> Int64 {
        try required(key, "integer", optionalInt(key, in: range))
    }

    public func optionalInt(_ key: String, in range: ClosedRange<Int64>? = nil) throws(ParleyError) -> Int64? {
        guard let value = present(key) else { return nil }
        let number: Int64
        switch value {
        case .int(let integer):
            number = integer
        case .double(let real):
            guard let integer = Int64(exactly: real) else {
                let integral = real.isFinite && real == real.rounded()
                throw error(key, integral ? "integer out of 64-bit range: \(real)" : "expected integer, got number \(real)")
            }
            number = integer
        default:
            throw typeError(key, expected: "integer", got: value)
        }
        if let range, !range.contains(number) {
            throw error(key, "must be between \(range.lowerBound) and \(range.upperBound), got \(number)")
        }
        return number
    }

    public func int(_ key: String, default defaultValue: Int64, in range: ClosedRange<Int64>? = nil) throws(ParleyError) -> Int64 {
        try optionalInt(key, in: range) ?? defaultValue
    }

    // MARK: Doubles

    public func double(_ key: String, in range: ClosedRange<Double>? = nil) throws(ParleyError) -> Double {
        try required(key, "number", optionalDouble(key, in: range))
    }

    public func optionalDouble(_ key: String, in range: ClosedRange<Double>? = nil) throws(ParleyError) -> Double? {
        guard let value = present(key) else { return nil }
        guard let number = value.doubleValue else { throw typeError(key, expected: "number", got: value) }
        if let range, !range.contains(number) {
            throw error(key, "must be between \(range.lowerBound) and \(range.upperBound), got \(number)")
        }
        return number
    }

    public func double(_ key: String, default defaultValue: Double, in range: ClosedRange<Double>? = nil) throws(ParleyError) -> Double {
        try optionalDouble(key, in: range) ?? defaultValue
    }

    // MARK: Booleans

    public func bool(_ key: String) throws(ParleyError) -> Bool {
        try required(key, "boolean", optionalBool(key))
    }

    public func optionalBool(_ key: String) throws(ParleyError) -> Bool? {
        guard let value = present(key) else { return nil }
        guard case .bool(let flag) = value else { throw typeError(key, expected: "boolean", got: value) }
        return flag
    }

    public func bool(_ key: String, default defaultValue: Bool) throws(ParleyError) -> Bool {
        try optionalBool(key) ?? defaultValue
    }

    // MARK: Arrays

    public func array(_ key: String) throws(ParleyError) -> [JSONValue] {
        try required(key, "array", optionalArray(key))
    }

    public func optionalArray(_ key: String) throws(ParleyError) -> [JSONValue]? {
        guard let value = present(key) else { return nil }
        guard case .array(let elements) = value else { throw typeError(key, expected: "array", got: value) }
        return elements
    }

    /// An array of strings ("members[2]: expected string, got integer").
    public func strings(_ key: String) throws(ParleyError) -> [String] {
        try required(key, "array", optionalStrings(key))
    }

    public func optionalStrings(_ key: String) throws(ParleyError) -> [String]? {
        guard let elements = try optionalArray(key) else { return nil }
        var result = [String]()
        result.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard case .string(let text) = element else {
                throw ParleyError(errorCode, "\(path(of: key))[\(index)]: expected string, got \(element.typeName)")
            }
            result.append(text)
        }
        return result
    }

    /// An array of objects, each as a reader with path "key[i]".
    public func objects(_ key: String) throws(ParleyError) -> [JSONReader] {
        try required(key, "array", optionalObjects(key))
    }

    public func optionalObjects(_ key: String) throws(ParleyError) -> [JSONReader]? {
        guard let elements = try optionalArray(key) else { return nil }
        var result = [JSONReader]()
        result.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            result.append(try JSONReader(element, path: "\(path(of: key))[\(index)]", errorCode: errorCode))
        }
        return result
    }

    // MARK: Objects

    /// A nested object as a reader whose path continues this one's.
    public func object(_ key: String) throws(ParleyError) -> JSONReader {
        try required(key, "object", optionalObject(key))
    }

    public func optionalObject(_ key: String) throws(ParleyError) -> JSONReader? {
        guard let value = present(key) else { return nil }
        guard case .object(let members) = value else { throw typeError(key, expected: "object", got: value) }
        return JSONReader(fields: members, path: path(of: key), errorCode: errorCode)
    }

    /// A nested object, or an empty one when missing or null (for optional config sections).
    public func objectOrEmpty(_ key: String) throws(ParleyError) -> JSONReader {
        try optionalObject(key) ?? JSONReader(fields: [:], path: path(of: key), errorCode: errorCode)
    }

    // MARK: Helpers

    /// The member unless missing or null.
    private func present(_ key: String) -> JSONValue? {
        guard let value = fields[key], !value.isNull else { return nil }
        return value
    }

    private func required<T>(_ key: String, _ expected: String, _ value: T?) throws(ParleyError) -> T {
        guard let value else {
            if fields[key] == nil { throw error(key, "missing required field") }
            throw error(key, "expected \(expected), got null")
        }
        return value
    }

    private func typeError(_ key: String, expected: String, got value: JSONValue) -> ParleyError {
        error(key, "expected \(expected), got \(value.typeName)")
    }
}
