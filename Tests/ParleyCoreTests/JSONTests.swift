import CJansson
import Glibc
import Testing
@testable import ParleyCore

private func parseError(_ text: String, limits: JSONLimits = .default) -> ParleyError? {
    do {
        _ = try JSONValue.parse(text, limits: limits)
        return nil
    } catch {
        return error
    }
}

private func parseError(bytes: [UInt8], limits: JSONLimits = .default) -> ParleyError? {
    do {
        _ = try JSONValue.parse(bytes, limits: limits)
        return nil
    } catch {
        return error
    }
}

private func randomString(_ rng: inout SeededGenerator) -> String {
    let pool: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1F}", "\u{7F}",
                                  "é", "\u{301}", "€", "\u{2028}", "\u{FFFF}", "😀", "\u{10FFFF}", "中"]
    var scalars = String.UnicodeScalarView()
    for _ in 0..<Int.random(in: 0...8, using: &rng) {
        scalars.append(pool.randomElement(using: &rng) ?? "a")
    }
    return String(scalars)
}

private func randomValue(_ rng: inout SeededGenerator, depth: Int) -> JSONValue {
    let kind = Int.random(in: 0..<(depth >= 4 ? 5 : 7), using: &rng)
    switch kind {
    case 0: return .null
    case 1: return .bool(Bool.random(using: &rng))
    case 2:
        let special: [Int64] = [0, -1, 1, .max, .min, 9_007_199_254_740_993]
        return .int(Bool.random(using: &rng) ? special.randomElement(using: &rng) ?? 0 : Int64(bitPattern: rng.next()))
    case 3:
        var number: Double
        repeat { number = Double(bitPattern: rng.next()) } while !number.isFinite
        return .double(number)
    case 4: return .string(randomString(&rng))
    case 5:
        return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
    default:
        var fields: [String: JSONValue] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &rng) {
            fields[randomString(&rng)] = randomValue(&rng, depth: depth + 1)
        }
        return .object(fields)
    }
}

@Suite struct JSONValueTests {
    @Test func parsesAllTypes() throws {
        let value = try JSONValue.parse(#"{"n":null,"t":true,"f":false,"i":-42,"d":2.5,"e":1e3,"s":"hé","a":[1,[2]],"o":{"k":"v"}}"#)
        #expect(value["n"] == .null)
        #expect(value["t"] == .bool(true))
        #expect(value["f"]?.boolValue == false)
        #expect(value["i"] == .int(-42))
        #expect(value["d"] == .double(2.5))
        #expect(value["e"] == .double(1000))
        #expect(value["s"]?.stringValue == "hé")
        #expect(value["a"]?[1]?[0] == .int(2))
        #expect(value["o"]?["k"] == "v")
        #expect(value["missing"] == nil)
        #expect(value["a"]?[5] == nil)
        #expect(value["a"]?[-1] == nil)
        #expect(value[0] == nil)
        #expect(JSONValue.string("x")["k"] == nil)
    }

    @Test func topLevelScalarsAndWhitespace() throws {
        #expect(try JSONValue.parse("42") == .int(42))
        #expect(try JSONValue.parse(" \"x\" \n") == .string("x"))
        #expect(try JSONValue.parse("null") == .null)
        #expect(try JSONValue.parse("-0") == .int(0))
        #expect(try JSONValue.parse(Array("[true]".utf8)) == [true])
    }

    @Test func literalsBuildValues() {
        let value: JSONValue = ["a": 1, "b": [true, nil], "c": 1.5, "d": "text", "e": "\(3 + 4)"]
        #expect(value == .object([
            "a": .int(1), "b": .array([.bool(true), .null]), "c": .double(1.5), "d": .string("d" == "d" ? "text" : ""),
            "e": .string("7"),
        ]))
        #expect(value.canonicalText == #"{"a":1,"b":[true,null],"c":1.5,"d":"text","e":"7"}"#)
    }

    @Test func accessorsConvertNumbers() {
        #expect(JSONValue.double(3.0).int64Value == 3)
        #expect(JSONValue.double(3.5).int64Value == nil)
        #expect(JSONValue.double(1e19).int64Value == nil)
        #expect(JSONValue.double(-9.223372036854775808e18).int64Value == Int64.min)
        #expect(JSONValue.double(.nan).int64Value == nil)
        #expect(JSONValue.int(7).doubleValue == 7.0)
        #expect(JSONValue.string("7").int64Value == nil)
        #expect(JSONValue.null.isNull)
        #expect(!JSONValue.bool(false).isNull)
        #expect(JSONValue.array([1]).arrayValue == [1])
        #expect(JSONValue.object(["a": 1]).objectValue == ["a": 1])
        #expect(JSONValue.int(1).stringValue == nil)
        let names = ([nil, true, 1, 1.5, "s", [], [:]] as [JSONValue]).map(\.typeName)
        #expect(names == ["null", "boolean", "integer", "number", "string", "array", "object"])
    }

    @Test func equalityIsByteExact() {
        let composed = "\u{E9}"
        let decomposed = "e\u{301}"
        #expect(composed == decomposed)  // Swift's own String equality...
        #expect(JSONValue.string(composed) != JSONValue.string(decomposed))  // ...but not ours
        #expect(JSONValue.object([composed: 1]) != JSONValue.object([decomposed: 1]))
        #expect(JSONValue.double(0.0) != JSONValue.double(-0.0))
        #expect(JSONValue.double(.nan) == JSONValue.double(.nan))
        #expect(JSONValue.int(1) != JSONValue.double(1.0))
        #expect(JSONValue.object(["a": 1, "b": 2]) == JSONValue.object(["b": 2, "a": 1]))
        let set: Set<JSONValue> = [.int(1), .double(1), .string(composed), .string(decomposed), .double(0), .double(-0.0)]
        #expect(set.count == 6)
    }

    @Test func randomValuesRoundTripExactly() throws {
        var rng = SeededGenerator(state: 20_240_601)
        for _ in 0..<2000 {
            let value = randomValue(&rng, depth: 0)
            let text = value.canonicalText
            let parsed = try JSONValue.parse(text)
            #expect(parsed == value, "\(text)")
            #expect(parsed.canonicalText == text)
            #expect(parsed.hashValue == value.hashValue)
        }
    }
}

@Suite struct JSONCanonicalTests {
    @Test func keysSortedByBytesWithoutWhitespace() throws {
        let value = try JSONValue.parse(#"{ "b" : 1, "a" : { "z": [1, 2], "A": null }, "é": 0, "aa": 2, "": 3, "Z": 4 }"#)
        #expect(value.canonicalText == #"{"":3,"Z":4,"a":{"A":null,"z":[1,2]},"aa":2,"b":1,"é":0}"#)
    }

    @Test func byteOrderNotSwiftStringOrder() {
        // Swift compares normalized text; canonical order compares raw bytes ("e" 0x65 < "é" 0xC3).
        let value: JSONValue = .object(["\u{E9}": 1, "e\u{301}x": 2, "f": 3])
        #expect(value.canonicalText == "{\"e\u{301}x\":2,\"f\":3,\"\u{E9}\":1}")
        #expect(JSONValue.object(["\u{1F600}": 1, "\u{FFFF}": 2]).canonicalText == "{\"\u{FFFF}\":2,\"\u{1F600}\":1}")
    }

    @Test func keysSharingTheirFirstEightBytesAndKeysWithNULAreInByteOrder() {
        // The writer orders by an 8-byte prefix first: ties, prefixes of each other and NUL
        // bytes (a zero in the prefix) must still come out in byte order.
        let keys = ["is_access_code_required", "is_access", "is_acces", "is_acce", "is_accessible", "ab", "ab\0", "ab\0\0c", "ab\0c",
                    "a\u{FF}", "\u{E9}t\u{E9}", "12345678", "123456789", "12345677z", ""]
        var fields: [String: JSONValue] = [:]
        for (index, key) in keys.enumerated() { fields[key] = .int(Int64(index)) }
        let expected = keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        let text = JSONValue.object(fields).canonicalText
        let written = expected.map { key in JSONValue.string(key).canonicalText + ":" + String(fields[key]!.int64Value!) }
        #expect(text == "{" + written.joined(separator: ",") + "}")
        // And random keys over a small alphabet (many shared prefixes), against a plain byte sort.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var random: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 2...30, using: &generator) {
                let length = Int.random(in: 0...12, using: &generator)
                let key = String((0..<length).map { _ in ["a", "b", "\0", "é"].randomElement(using: &generator)! })
                random[key] = .null
            }
            let order = random.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            let canonical = "{" + order.map { JSONValue.string($0).canonicalText + ":null" }.joined(separator: ",") + "}"
            #expect(JSONValue.object(random).canonicalText == canonical)
        }
    }

    @Test func stringEscapes() {
        let value = JSONValue.string("q\"b\\s/\u{8}\u{C}\n\r\t\u{1}\u{1F}\u{7F}é😀\u{2028}")
        #expect(value.canonicalText == "\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\\u001f\u{7F}é😀\u{2028}\"")
        #expect(JSONValue.string("\0").canonicalText == "\"\\u0000\"")
        #expect(JSONValue.string("").canonicalText == "\"\"")
    }

    @Test func unicodeEscapesInInputAreDecoded() throws {
        #expect(try JSONValue.parse(#""\u00e9\ud83d\ude00\/""#) == .string("é😀/"))
        #expect(try JSONValue.parse(#""\u00e9\ud83d\ude00""#).canonicalText == "\"é😀\"")
    }

    @Test func integersAndDoubles() throws {
        #expect(JSONValue.int(0).canonicalText == "0")
        #expect(JSONValue.int(-7).canonicalText == "-7")
        #expect(JSONValue.int(.max).canonicalText == "9223372036854775807")
        #expect(JSONValue.int(.min).canonicalText == "-9223372036854775808")
        #expect(try JSONValue.parse("9223372036854775807") == .int(.max))
        #expect(try JSONValue.parse("-9223372036854775808") == .int(.min))
        #expect(JSONValue.double(1).canonicalText == "1.0")
        #expect(JSONValue.double(-0.0).canonicalText == "-0.0")
        #expect(JSONValue.double(0.1).canonicalText == "0.1")
        #expect(JSONValue.double(1e100).canonicalText == "1e+100")
        #expect(JSONValue.double(.leastNonzeroMagnitude).canonicalText == "5e-324")
        #expect(JSONValue.double(.greatestFiniteMagnitude).canonicalText == "1.7976931348623157e+308")
        #expect(try JSONValue.parse("-0.0") == .double(-0.0))
        #expect(try JSONValue.parse("1E2").canonicalText == "100.0")
        #expect(try JSONValue.parse("1.50").canonicalText == "1.5")
        #expect(try JSONValue.parse("1e-400") == .double(0))
        for number in [1.0, 0.1, 1e100, .leastNonzeroMagnitude, -0.0, 123456.789, 1e16, 1e15, 1e-7, 2.0.squareRoot()] {
            let parsed = try JSONValue.parse(JSONValue.double(number).canonicalText)
            #expect(parsed == .double(number), "\(number)")
        }
    }

    @Test func nonFiniteDoublesBecomeNull() {
        let value: JSONValue = [.double(.nan), .double(.infinity), .double(-.infinity)]
        #expect(value.canonicalText == "[null,null,null]")
    }

    @Test func equalValuesGiveIdenticalText() throws {
        let first = try JSONValue.parse(#"{"b":[1,2.0,"x"],"a":{"d":null,"c":true}}"#)
        let second = try JSONValue.parse("{\n \"a\" : {\"c\":true, \"d\":null},\n \"b\":[1, 2.0, \"\\u0078\"]}")
        #expect(first == second)
        #expect(first.canonicalText == second.canonicalText)
        #expect(first.canonicalUTF8 == Array(first.canonicalText.utf8))
    }

    @Test func appendsToAnExistingBuffer() {
        var buffer: [UInt8] = Array("prefix:".utf8)
        JSONValue.object(["k": [1, "v"]]).appendCanonicalUTF8(to: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == #"prefix:{"k":[1,"v"]}"#)
        #expect(JSONValue.array([]).description == "[]")
    }
}

@Suite struct JSONMalformedTests {
    /// Each must be `.invalidJSON` with a line/column position in the message.
    @Test(arguments: [
        ("", "end of file"),
        ("   ", "end of file"),
        (#"{"a": [1, 2"#, "expected"),
        ("[1,2,]", "unexpected token"),
        ("{\"a\":1,}", "string or '}' expected"),
        ("{} x", "end of file expected"),
        ("[1] [2]", "end of file expected"),
        (#""\ud800""#, "invalid Unicode"),
        (#""a\udc00b""#, "invalid Unicode"),
        (#""\u0000""#, "NUL"),
        ("\"a\tb\"", "control character"),
        ("99999999999999999999", "64 bits"),
        ("-99999999999999999999", "64 bits"),
        ("1e400", "must fit in a double"),
        ("NaN", "invalid token"),
        ("01", "invalid token"),
        ("{'a':1}", "string or '}' expected"),
        (#"{"a":1,"a":2}"#, "duplicate object key"),
        ("tru", "invalid token"),
    ])
    func reportsPosition(text: String, reasonFragment: String) {
        let error = parseError(text)
        #expect(error?.code == .invalidJSON, "\(text)")
        #expect(error?.message.contains("at line 1 column ") == true, "\(error?.message ?? "no error")")
        #expect(error?.message.contains(reasonFragment) == true, "\(error?.message ?? "no error")")
    }

    @Test func positionCountsLinesAndCharacters() {
        #expect(parseError("[1,\n  2,\n  x]")?.message == "invalid JSON at line 3 column 3: invalid token near 'x'")
        #expect(parseError("[\"ééé\", x]")?.message.hasPrefix("invalid JSON at line 1 column 9:") == true)
    }

    @Test func invalidBytes() {
        let cases: [[UInt8]] = [
            [0x22, 0xFF, 0x22],  // not UTF-8 at all
            [0x22, 0xC3, 0x22],  // truncated sequence
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // encoded surrogate
            [0x22, 0xC0, 0xAF, 0x22],  // overlong
            [0x22, 0x61, 0x00, 0x62, 0x22],  // raw NUL inside a string
            [0x5B, 0x31, 0x5D, 0x00],  // NUL after the value
            [0xEF, 0xBB, 0xBF, 0x5B, 0x5D],  // byte order mark
        ]
        for bytes in cases {
            let error = parseError(bytes: bytes)
            #expect(error?.code == .invalidJSON, "\(bytes)")
            #expect(error?.message.contains(" at line 1 column ") == true, "\(error?.message ?? "no error")")
        }
        #expect(parseError(bytes: [0x22, 0xFF, 0x22])?.message.contains("invalid UTF-8") == true)
        #expect(parseError(bytes: [])?.code == .invalidJSON)
        #expect(throws: ParleyError.self) { try JSONValue.parse(bytes: UnsafeRawBufferPointer(start: nil, count: 0)) }
    }

    @Test func keysDifferingOnlyInNormalizationAreRefused() {
        let error = parseError("{\"\u{E9}\":1,\"e\u{301}\":2}")
        #expect(error?.code == .invalidJSON)
        #expect(error?.message.contains("Unicode normalization") == true)
    }
}

@Suite struct JSONLimitTests {
    private func nested(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }

    @Test func depthLimit() throws {
        #expect(try JSONValue.parse(nested(64)) != .null)
        let error = parseError(nested(65))
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("64") == true)
        let objects = String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65)
        #expect(parseError(objects)?.code == .limitExceeded)
        #expect(try JSONValue.parse(nested(3), limits: JSONLimits(maxDepth: 3)) == [[[]]])
        #expect(parseError(nested(4), limits: JSONLimits(maxDepth: 3))?.code == .limitExceeded)
        #expect(try JSONValue.parse("1", limits: JSONLimits(maxDepth: 0)) == 1)
        #expect(parseError("[]", limits: JSONLimits(maxDepth: 0))?.code == .limitExceeded)
    }

    @Test func hugeNestingFailsWithoutCrashing() throws {
        let error = parseError(nested(100_000))
        #expect(error?.code == .limitExceeded)
        let unclosed = parseError(String(repeating: "[", count: 100_000), limits: JSONLimits(maxDepth: 1_000_000))
        #expect(unclosed?.code == .limitExceeded)
        #expect(unclosed?.message.contains("2048") == true)
        // Within jansson's own limit a larger maxDepth is honoured.
        #expect(try JSONValue.parse(nested(2000), limits: JSONLimits(maxDepth: 5000)).arrayValue?.count == 1)
    }

    @Test func sizeLimit() throws {
        let text = #"{"a":"0123456789"}"#  // 18 bytes
        #expect(try JSONValue.parse(text, limits: JSONLimits(maxBytes: 18)) == ["a": "0123456789"])
        let error = parseError(text, limits: JSONLimits(maxBytes: 17))
        #expect(error?.code == .limitExceeded)
        #expect(error?.message.contains("18 bytes") == true)
        #expect(JSONLimits.default.maxBytes == 16 * 1024 * 1024)
        #expect(JSONLimits.default.maxDepth == 64)
        // Bytes, not characters.
        #expect(parseError("\"éé\"", limits: JSONLimits(maxBytes: 5))?.code == .limitExceeded)
    }
}

/// Counts jansson's live allocations made on one thread, to prove every parsed tree is freed.
private let janssonAllocations = Locked<(thread: pthread_t?, live: Int, total: Int)>((nil, 0, 0))

private func installCountingAllocator() {
    json_set_alloc_funcs(
        { size in
            janssonAllocations.withLock { state in
                if state.thread == pthread_self() {
                    state.live += 1
                    state.total += 1
                }
            }
            return malloc(size)
        },
        { pointer in
            guard let pointer else { return }
            janssonAllocations.withLock { state in
                if state.thread == pthread_self() { state.live -= 1 }
            }
            free(pointer)
        })
}

@Suite struct JSONLeakTests {
    @Test func manySmallDocumentsFreeEverything() throws {
        installCountingAllocator()
        janssonAllocations.withLock { $0 = (pthread_self(), 0, 0) }
        defer { janssonAllocations.withLock { $0 = (nil, 0, 0) } }
        var totalBytes = 0
        for index in 0..<10_000 {
            let text = #"{"message_id":\#(index),"channel_url":"c-\#(index % 7)","message":"hi \#(index)","#
                + #""created_at":1700000000000,"data":{"x":[1,2.5,null,true]},"mentioned_users":[]}"#
            let value = try JSONValue.parse(text)
            let canonical = value.canonicalText
            #expect(try JSONValue.parse(canonical) == value)
            totalBytes += canonical.utf8.count
            if index % 1000 == 0 {
                #expect(parseError(text + "x") != nil)  // error paths free too
            }
        }
        #expect(totalBytes > 10_000 * 100)
        let (live, total) = janssonAllocations.withLock { ($0.live, $0.total) }
        #expect(total > 10_000 * 10)  // the counter saw the parser's allocations
        #expect(live == 0)
    }
}

@Suite struct JSONReaderTests {
    enum Order: String, CaseIterable { case chronological, latest_last_message }

    let config: JSONValue = [
        "name": "app", "count": 5, "ratio": 0.5, "whole": 7.0, "flag": true, "nothing": nil,
        "tags": ["a", "b"], "mixed": ["a", 2],
        "cache": ["size_limit_mb": "big", "path": "/tmp/x"],
        "members": [["user_id": "u1"], ["user_id": 3], "not-an-object"],
        "senders": [["user_id": "u1"], ["user_id": 3]],
        "order": "latest_last_message", "bad_order": "random",
    ]

    @Test func readsTypedValues() throws {
        let reader = try JSONReader(config, path: "config")
        #expect(try reader.string("name") == "app")
        #expect(try reader.int("count") == 5)
        #expect(try reader.int("whole") == 7)
        #expect(try reader.double("ratio") == 0.5)
        #expect(try reader.double("count") == 5.0)
        #expect(try reader.bool("flag"))
        #expect(try reader.strings("tags") == ["a", "b"])
        #expect(try reader.array("mixed").count == 2)
        #expect(try reader.object("cache").string("path") == "/tmp/x")
        #expect(try reader.optionalString("nothing") == nil)
        #expect(try reader.optionalString("absent") == nil)
        #expect(try reader.int("absent", default: 9) == 9)
        #expect(try reader.int("nothing", default: 9) == 9)
        #expect(try reader.bool("absent", default: true))
        #expect(try reader.string("absent", default: "d") == "d")
        #expect(try reader.enumeration("order", as: Order.self) == .latest_last_message)
        #expect(try reader.enumeration("absent", default: Order.chronological) == .chronological)
        #expect(try reader.objectOrEmpty("absent").fields.isEmpty)
        #expect(reader.has("name") && !reader.has("nothing") && !reader.has("absent"))
        #expect(reader["nothing"] == .null)
    }

    @Test func errorsNamePathAndTypes() throws {
        let reader = try JSONReader(config, path: "config")
        func message(_ body: () throws -> Void) -> String? {
            do {
                try body()
                return nil
            } catch let error as ParleyError {
                return error.code == .invalidArgument ? error.message : "wrong code \(error.code)"
            } catch {
                return "not a ParleyError"
            }
        }
        #expect(message { _ = try reader.object("cache").int("size_limit_mb") }
            == "config.cache.size_limit_mb: expected integer, got string")
        #expect(message { _ = try reader.string("message_id") } == "config.message_id: missing required field")
        #expect(message { _ = try reader.string("nothing") } == "config.nothing: expected string, got null")
        #expect(message { _ = try reader.bool("count") } == "config.count: expected boolean, got integer")
        #expect(message { _ = try reader.int("ratio") } == "config.ratio: expected integer, got number 0.5")
        #expect(message { _ = try reader.int("count", in: 10...20) } == "config.count: must be between 10 and 20, got 5")
        #expect(message { _ = try reader.optionalInt("count", in: 10...20) } != nil)
        #expect(message { _ = try reader.double("ratio", in: 1...2) } == "config.ratio: must be between 1.0 and 2.0, got 0.5")
        #expect(message { _ = try reader.strings("mixed") } == "config.mixed[1]: expected string, got integer")
        #expect(message { _ = try reader.array("name") } == "config.name: expected array, got string")
        #expect(message { _ = try reader.object("tags") } == "config.tags: expected object, got array")
        #expect(message { _ = try reader.objects("senders")[1].string("user_id") }
            == "config.senders[1].user_id: expected string, got integer")
        #expect(message { _ = try reader.objects("members") } == "config.members[2]: expected object, got string")
        #expect(message { _ = try reader.enumeration("bad_order", as: Order.self) }
            == "config.bad_order: expected one of 'chronological', 'latest_last_message', got 'random'")
        #expect(message { _ = try JSONReader(["a", 1], path: "config") } == "config: expected object, got array")
        #expect(message { _ = try JSONReader(1) } == "value: expected object, got integer")
        #expect(message { _ = try JSONReader(["x": 1.5e20]).int("x") } == "x: integer out of 64-bit range: 1.5e+20")
        #expect(message { throw reader.error("order", "unsupported") } == "config.order: unsupported")
    }

    @Test func topLevelPathIsJustTheField() throws {
        let reader = try JSONReader(["message_id": "12"], errorCode: .protocolViolation)
        do {
            _ = try reader.int("message_id")
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .protocolViolation)
            #expect(error.message == "message_id: expected integer, got string")
        }
        #expect(throws: ParleyError.self) { try reader.int("req_id") }
    }

    @Test func parsesDocumentsIntoReaders() throws {
        let reader = try JSONReader.parse(#"{"message_id": 5}"#, errorCode: .protocolViolation)
        #expect(try reader.int("message_id") == 5)
        let body = Array(#"{"a": "#.utf8)
        let malformed = body.withUnsafeBytes { bytes in
            Result { () throws(ParleyError) in try JSONReader.parse(bytes: bytes, errorCode: .protocolViolation) }
        }
        #expect(throws: ParleyError(.protocolViolation, "invalid JSON at line 1 column 6: unexpected token near end of file")) {
            try malformed.get()
        }
        #expect(throws: ParleyError(.invalidJSON, "invalid JSON at line 1 column 1: invalid token near 'x'")) {
            try JSONReader.parse("x")
        }
        #expect(throws: ParleyError(.protocolViolation, "response: expected object, got array")) {
            try JSONReader.parse("[]", path: "response", errorCode: .protocolViolation)
        }
        #expect(throws: ParleyError.self) { try JSONReader.parse("[[]]", limits: JSONLimits(maxDepth: 1)) }
        let cText: [CChar] = Array(#"{"k":[1]}"#.utf8CString)
        #expect(try cText.withUnsafeBufferPointer { buffer in try JSONValue.parse(cString: buffer.baseAddress!) } == ["k": [1]])
    }

    @Test func rejectsUnknownKeys() throws {
        let reader = try JSONReader(["a": 1, "foo": 2, "bar": 3], path: "config")
        #expect(throws: Never.self) { try reader.rejectUnknownKeys(allowed: ["a", "foo", "bar", "extra"]) }
        do {
            try reader.rejectUnknownKeys(allowed: ["a", "bar"])
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message == "config: unknown key 'foo'")
        }
        do {
            try JSONReader(["x": 1, "b": 2]).rejectUnknownKeys(allowed: [])
            Issue.record("expected an error")
        } catch {
            #expect(error.message == "unknown keys 'b', 'x'")
        }
    }
}
