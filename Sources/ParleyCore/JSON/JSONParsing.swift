import CJansson
import Glibc

/// Bounds applied to JSON input before and while it is parsed.
public struct JSONLimits: Sendable, Hashable {
    /// Longest accepted text in bytes (default 16 MiB).
    public var maxBytes: Int
    /// Deepest accepted nesting of arrays/objects; `[]` has depth 1, a scalar 0 (default 64).
    /// jansson itself stops at `parserMaxDepth`, so larger values act as that.
    public var maxDepth: Int

    public init(maxBytes: Int = 16 * 1024 * 1024, maxDepth: Int = 64) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
    }

    public static let `default` = JSONLimits()

    /// jansson's fixed nesting limit (JSON_PARSER_MAX_DEPTH); deeper input fails in the parser.
    public static let parserMaxDepth = 2048
}

/// Parsing decisions:
/// - Any value may be the top level (`JSON_DECODE_ANY`), e.g. `"text"` or `42`.
/// - Text after the value is an error; whitespace is allowed around it.
/// - NUL is refused, both as a raw byte and as `\u0000` (jansson's default): text crosses the
///   C ABI as NUL-terminated strings, where an embedded NUL would silently cut a value.
/// - Duplicate object keys are refused (`JSON_REJECT_DUPLICATES`) rather than letting the last
///   one win silently; so are keys that differ only in Unicode normalization ("é" vs
///   "e\u{301}"), which a Swift dictionary would merge.
/// - Integers must fit in Int64; numbers too large for a double are refused.
/// - Invalid UTF-8 and lone surrogate escapes (`"\ud800"`) are refused.
extension JSONValue {
    /// Parses UTF-8 JSON text. Throws `.invalidJSON` ("invalid JSON at line L column C: reason")
    /// for malformed text and `.limitExceeded` when the text is longer or deeper than `limits`.
    public static func parse(_ text: String, limits: JSONLimits = .default) throws(ParleyError) -> JSONValue {
        let result: Result<JSONValue, ParleyError>? = text.utf8.withContiguousStorageIfAvailable { bytes in
            Result { () throws(ParleyError) in try parse(bytes: UnsafeRawBufferPointer(bytes), limits: limits) }
        }
        if let result { return try result.get() }
        return try parse(Array(text.utf8), limits: limits)
    }

    /// Parses UTF-8 JSON bytes; see `parse(_:limits:)`.
    public static func parse(_ bytes: [UInt8], limits: JSONLimits = .default) throws(ParleyError) -> JSONValue {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ParleyError) in try parse(bytes: buffer, limits: limits) }
        }
        return try result.get()
    }

    /// Parses a NUL-terminated UTF-8 string, as passed through the C ABI.
    public static func parse(cString: UnsafePointer<CChar>, limits: JSONLimits = .default) throws(ParleyError) -> JSONValue {
        try parse(bytes: UnsafeRawBufferPointer(start: cString, count: strlen(cString)), limits: limits)
    }

    /// Parses UTF-8 JSON bytes (not NUL-terminated; the buffer's count is the length).
    public static func parse(bytes: UnsafeRawBufferPointer, limits: JSONLimits = .default) throws(ParleyError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else {
            throw ParleyError(.limitExceeded, "JSON text is \(bytes.count) bytes, more than the limit of \(limits.maxBytes)")
        }
        var error = json_error_t()
        let flags = Int(JSON_DECODE_ANY | JSON_REJECT_DUPLICATES)
        let root: UnsafeMutablePointer<json_t>?
        if let base = bytes.baseAddress {
            root = json_loadb(base.assumingMemoryBound(to: CChar.self), bytes.count, flags, &error)
        } else {
            // An empty buffer may have no address; give jansson a valid one so it reports the
            // same "end of file" error as for any other empty text.
            var empty: CChar = 0
            root = json_loadb(&empty, 0, flags, &error)
        }
        guard let root else { throw parseError(error, limits: limits) }
        defer { json_decref(root) }
        var converter = JanssonConverter(maxDepth: limits.maxDepth)
        return try converter.convert(root, depth: 0)
    }

    private static func parseError(_ error: json_error_t, limits: JSONLimits) -> ParleyError {
        var error = error
        let reason = withUnsafeBytes(of: &error.text) { raw -> String in
            // The last byte of `text` holds jansson's error code, not text.
            let textBytes = raw.prefix(raw.count - 1)
            let length = textBytes.firstIndex(of: 0) ?? textBytes.count
            return String(decoding: textBytes.prefix(length), as: UTF8.self)
        }
        let position = "at line \(error.line) column \(error.column)"
        switch json_error_code(&error) {
        case json_error_stack_overflow:
            let limit = min(limits.maxDepth, JSONLimits.parserMaxDepth)
            return ParleyError(.limitExceeded, "JSON nesting is deeper than the limit of \(limit) \(position)")
        case json_error_out_of_memory:
            return ParleyError(.noMemory, "out of memory while parsing JSON \(position)")
        case json_error_null_character:
            return ParleyError(.invalidJSON, "invalid JSON \(position): \\u0000 (NUL) is not allowed in strings")
        case json_error_invalid_utf8:
            return ParleyError(.invalidJSON, "invalid JSON \(position): invalid UTF-8: \(reason)")
        case json_error_numeric_overflow:
            let rule = reason.hasPrefix("real") ? "numbers must fit in a double" : "integers must fit in 64 bits (signed)"
            return ParleyError(.invalidJSON, "invalid JSON \(position): \(reason) (\(rule))")
        default:
            return ParleyError(.invalidJSON, "invalid JSON \(position): \(reason)")
        }
    }
}

/// Copies a jansson tree into `JSONValue`s, enforcing the depth limit. Recursion depth is
/// bounded by `maxDepth` and by jansson's own limit of 2048.
private struct JanssonConverter {
    let maxDepth: Int

    mutating func convert(_ node: UnsafeMutablePointer<json_t>, depth: Int) throws(ParleyError) -> JSONValue {
        switch parley_json_typeof(node) {
        case JSON_OBJECT:
            try checkDepth(depth + 1)
            var fields = [String: JSONValue](minimumCapacity: json_object_size(node))
            var iterator = json_object_iter(node)
            while let current = iterator {
                let key = Self.string(json_object_iter_key(current), length: json_object_iter_key_len(current))
                guard let child = json_object_iter_value(current) else {
                    throw ParleyError(.internalError, "jansson returned an object member without a value")
                }
                let value = try convert(child, depth: depth + 1)
                if fields.updateValue(value, forKey: key) != nil {
                    // jansson already refused byte-identical duplicates; this key differs only in
                    // Unicode normalization from another one, which Swift treats as the same key.
                    throw ParleyError(
                        .invalidJSON,
                        "invalid JSON: object key '\(key)' duplicates another key written in a different Unicode normalization")
                }
                iterator = json_object_iter_next(node, current)
            }
            return .object(fields)
        case JSON_ARRAY:
            try checkDepth(depth + 1)
            let count = json_array_size(node)
            var elements = [JSONValue]()
            elements.reserveCapacity(count)
            for index in 0..<count {
                guard let child = json_array_get(node, index) else {
                    throw ParleyError(.internalError, "jansson returned an array without element \(index)")
                }
                elements.append(try convert(child, depth: depth + 1))
            }
            return .array(elements)
        case JSON_STRING:
            return .string(Self.string(json_string_value(node), length: json_string_length(node)))
        case JSON_INTEGER:
            return .int(Int64(json_integer_value(node)))
        case JSON_REAL:
            return .double(json_real_value(node))
        case JSON_TRUE:
            return .bool(true)
        case JSON_FALSE:
            return .bool(false)
        case JSON_NULL:
            return .null
        default:
            throw ParleyError(.internalError, "jansson returned an unknown value type")
        }
    }

    private func checkDepth(_ depth: Int) throws(ParleyError) {
        if depth > maxDepth {
            throw ParleyError(.limitExceeded, "JSON nesting is deeper than the limit of \(maxDepth)")
        }
    }

    /// jansson has validated the UTF-8 already; decoding copies the bytes into a Swift string.
    private static func string(_ pointer: UnsafePointer<CChar>?, length: Int) -> String {
        guard let pointer, length > 0 else { return "" }
        let bytes = UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self)
        return String(decoding: UnsafeBufferPointer(start: bytes, count: length), as: UTF8.self)
    }
}
