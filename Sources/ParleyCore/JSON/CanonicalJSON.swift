/// Canonical JSON text: the one spelling of a value that the cache stores and the C ABI
/// hands out, so that equal values always give identical bytes.
///
/// - No whitespace. Object members sorted by key, comparing UTF-8 bytes.
/// - Strings as UTF-8; escaped are only `"` and `\` and the control characters below
///   U+0020 (`\b \f \n \r \t`, others as `\u00XX` with lower-case hex). A NUL is written
///   as `\u0000`, which `JSONValue.parse` refuses, so strings meant to round-trip (and to
///   cross the C ABI) must not contain NUL.
/// - `.int` as plain decimal digits. `.double` as the shortest text that reads back to the
///   same bits, always with a `.` or an exponent so it reads back as a double
///   (`1.0`, `-0.0`, `0.1`, `1e+100`, `5e-324`).
/// - Non-finite doubles (NaN, ±infinity) have no JSON spelling: they are written as `null`,
///   as JavaScript's JSON.stringify does. Parsed values never contain them.
///
/// Written by hand rather than with `json_dumps` because jansson's real formatting is not
/// shortest-round-trip and its output would need a second pass to be canonical.
extension JSONValue {
    /// The canonical compact text of this value.
    public var canonicalText: String {
        String(decoding: canonicalUTF8, as: UTF8.self)
    }

    /// The canonical text as UTF-8 bytes (no terminating NUL).
    public var canonicalUTF8: [UInt8] {
        var writer = CanonicalJSONWriter()
        writer.write(self)
        return writer.output
    }

    /// Appends the canonical text's UTF-8 bytes to `buffer` (e.g. to build a C string).
    public func appendCanonicalUTF8(to buffer: inout [UInt8]) {
        var writer = CanonicalJSONWriter(output: buffer)
        buffer = []  // hand the storage to the writer so appending does not copy it
        writer.write(self)
        buffer = writer.output
    }
}

struct CanonicalJSONWriter {
    var output: [UInt8]

    init(output: [UInt8] = []) {
        self.output = output
        self.output.reserveCapacity(output.count + 256)
    }

    mutating func write(_ value: JSONValue) {
        switch value {
        case .null:
            appendASCII("null")
        case .bool(let flag):
            appendASCII(flag ? "true" : "false")
        case .int(let number):
            writeInteger(number)
        case .double(let number):
            writeDouble(number)
        case .string(let text):
            writeString(text)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                write(element)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let fields):
            output.append(UInt8(ascii: "{"))
            if fields.count == 1, let (key, member) = fields.first {
                writeString(key)
                output.append(UInt8(ascii: ":"))
                write(member)
            } else if !fields.isEmpty {
                // Sorted by each key's first 8 bytes as one integer, the whole keys compared
                // only when those are equal: a channel's ~40 keys sort about 4 times faster
                // than by comparing strings throughout (this runs for every live message).
                var entries: [(order: UInt64, key: String, member: JSONValue)] = []
                entries.reserveCapacity(fields.count)
                for (key, member) in fields { entries.append((Self.orderPrefix(key), key, member)) }
                entries.sort { $0.order != $1.order ? $0.order < $1.order : utf8Precedes($0.key, $1.key) }
                var first = true
                for entry in entries {
                    if !first { output.append(UInt8(ascii: ",")) }
                    first = false
                    writeString(entry.key)
                    output.append(UInt8(ascii: ":"))
                    write(entry.member)
                }
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// The key's first 8 UTF-8 bytes, big-endian, zero-padded: keys whose values differ are
    /// ordered as their bytes are (a shorter key that is a prefix of a longer one has a zero
    /// where the longer has a byte, or ties when that byte is NUL and the keys are compared).
    static func orderPrefix(_ key: String) -> UInt64 {
        var prefix: UInt64 = 0
        var shift: UInt64 = 56
        for byte in key.utf8 {
            prefix |= UInt64(byte) << shift
            if shift == 0 { break }
            shift -= 8
        }
        return prefix
    }

    private mutating func appendASCII(_ text: StaticString) {
        text.withUTF8Buffer { output.append(contentsOf: $0) }
    }

    private mutating func writeInteger(_ number: Int64) {
        if number < 0 { output.append(UInt8(ascii: "-")) }
        var magnitude = number.magnitude
        // 20 digits hold UInt64.max; digits are produced from the right.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            output.append(contentsOf: UnsafeMutableBufferPointer(rebasing: digits[start...]))
        }
    }

    private mutating func writeDouble(_ number: Double) {
        guard number.isFinite else {
            appendASCII("null")
            return
        }
        // Swift's description is the shortest text that parses back to the same bits, and it
        // always carries a "." or an exponent ("1.0", "1e+100"), so it reads back as a double.
        output.append(contentsOf: number.description.utf8)
    }

    private mutating func writeString(_ text: String) {
        output.append(UInt8(ascii: "\""))
        let handled: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            appendEscaped(bytes)
        }
        if handled == nil {
            Array(text.utf8).withUnsafeBufferPointer { appendEscaped($0) }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Copies runs of bytes that need no escape in one go. Swift strings are valid UTF-8,
    /// so the output is too.
    private mutating func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                index += 1
                continue
            }
            if runStart < index {
                output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
            }
            output.append(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""): output.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): output.append(UInt8(ascii: "\\"))
            case 0x08: output.append(UInt8(ascii: "b"))
            case 0x0C: output.append(UInt8(ascii: "f"))
            case 0x0A: output.append(UInt8(ascii: "n"))
            case 0x0D: output.append(UInt8(ascii: "r"))
            case 0x09: output.append(UInt8(ascii: "t"))
            default:
                let hexDigits: StaticString = "0123456789abcdef"
                output.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                hexDigits.withUTF8Buffer { hex in
                    output.append(hex[Int(byte >> 4)])
                    output.append(hex[Int(byte & 0x0F)])
                }
            }
            index += 1
            runStart = index
        }
        if runStart < bytes.count {
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
        }
    }
}
