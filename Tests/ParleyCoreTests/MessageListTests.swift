import Glibc
import Testing
@testable import ParleyCore

// Collections hand cached messages out as the stored text, with the members the application
// did not ask for cut out of the text (Collections/MessageList.swift). The cut must give
// exactly what presenting the parsed value and encoding it again gives, and a damaged stored
// text must never reach the application.

/// Keys that matter to the cut, and keys and strings that could fool a scanner.
private let keyPool = ["reactions", "thread_info", "parent_message_info", "sorted_metaarray", "message", "a\"b", "r\\", "{", "}",
                       ",", "reactions2", "", "é"]
private let stringPool = ["", "}", "{\"reactions\":1}", "\\", "\"", ",", "]", "[", "x\ny", "😀"]

private func randomValue(_ rng: inout SeededGenerator, depth: Int) -> JSONValue {
    switch Int.random(in: 0..<(depth > 2 ? 5 : 7), using: &rng) {
    case 0: return .null
    case 1: return .bool(Bool.random(using: &rng))
    case 2: return .int(Int64.random(in: -1000...1000, using: &rng))
    case 3: return .double(Double(Int.random(in: -100...100, using: &rng)) / 8)
    case 4: return .string(stringPool.randomElement(using: &rng) ?? "")
    case 5: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
    default: return randomObject(&rng, depth: depth + 1)
    }
}

private func randomObject(_ rng: inout SeededGenerator, depth: Int) -> JSONValue {
    var fields: [String: JSONValue] = [:]
    for _ in 0..<Int.random(in: 0...6, using: &rng) {
        fields[keyPool.randomElement(using: &rng) ?? "k"] = randomValue(&rng, depth: depth)
    }
    return .object(fields)
}

/// A cache in a file of its own (the damage marker lies beside it), removed afterwards.
private func withCacheFile(_ body: (ChatCache, String) throws -> Void) throws {
    var template = Array("/tmp/parley-list-test-XXXXXX".utf8CString)
    let directory: String = template.withUnsafeMutableBufferPointer { buffer in
        mkdtemp(buffer.baseAddress!) != nil ? String(cString: buffer.baseAddress!) : "/tmp"
    }
    defer { _ = system("rm -rf '\(directory)'") }
    let path = directory + "/user.sqlite"
    let cache = try ChatCache(location: .file(path: path))
    defer { cache.close() }
    try body(cache, path)
}

@Suite struct MessageListTests {
    @Test func aChannelListCutsTheStoredTextAsItPresentsTheValue() throws {
        var rng = SeededGenerator(state: 13)
        let keys = ["members", "metadata", "metacounter", "name", "last_message", "a\"b", ""]
        for round in 0..<2000 {
            var fields: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...6, using: &rng) {
                fields[keys.randomElement(using: &rng) ?? "k"] = randomValue(&rng, depth: 1)
            }
            var query = GroupChannelListQuery()
            query.includeMemberList = round % 2 == 0
            query.includeMetadata = round % 3 == 0
            let channel = JSONValue.object(fields)
            #expect(query.presented(text: channel.canonicalText).text == query.presented(channel).canonicalText)
        }
    }

    @Test func insertingAMemberIntoTheTextEqualsSettingItOnTheValue() throws {
        // A cached channel's member list is spliced into its stored text (ChatCache+Channels.swift).
        var rng = SeededGenerator(state: 11)
        var checked = 0
        for _ in 0..<3000 {
            let object = randomObject(&rng, depth: 0)
            let name = keyPool.randomElement(using: &rng) ?? "k"
            let value = randomValue(&rng, depth: 1)
            guard case .object(var fields) = object else { continue }
            fields[name] = value
            let spliced = CanonicalObjectText.inserting(name: name, value: value.canonicalText, into: object.canonicalText)
            let expected = JSONValue.object(fields).canonicalText
            #expect(spliced == expected, "\(object.canonicalText) + \(name)")
            if spliced != expected { break }
            checked += 1
        }
        #expect(checked == 3000)
        #expect(CanonicalObjectText.inserting(name: "members", value: "[]", into: "{}") == #"{"members":[]}"#)
        #expect(CanonicalObjectText.inserting(name: "members", value: "[1]", into: #"{"a":1}"#) == #"{"a":1,"members":[1]}"#)
        #expect(CanonicalObjectText.inserting(name: "members", value: "[1]", into: #"{"z":1}"#) == #"{"members":[1],"z":1}"#)
        #expect(CanonicalObjectText.inserting(name: "members", value: "2", into: #"{"a":"}","members":1,"n":{}}"#)
            == #"{"a":"}","members":2,"n":{}}"#)
    }

    @Test func readingNamedMembersOfTheStoredTextEqualsParsingItWhole() throws {
        var rng = SeededGenerator(state: 11)
        var compared = 0
        for _ in 0..<3000 {
            let object = randomObject(&rng, depth: 0)
            let names = keyPool.filter { _ in Bool.random(using: &rng) } + ["absent"]
            guard case .object(let fields) = object else { continue }
            guard let read = CanonicalObjectText.members(named: names, in: object.canonicalText) else {
                // Only a text with an escaped key may be refused (its reader parses it whole).
                #expect(object.canonicalText.contains("\\"), "\(object.canonicalText)")
                continue
            }
            var expected: [String: JSONValue] = [:]
            for name in names { if let value = fields[name] { expected[name] = value } }
            // Compared as text: a double such as 2.0 is written as 2 and read back as an integer.
            let same = JSONValue.object(read).canonicalText == JSONValue.object(expected).canonicalText
            #expect(same, "\(object.canonicalText) \(names)")
            if !same { break }
            compared += 1
        }
        #expect(compared > 1500)  // the others have a key with an escape
        #expect(CanonicalObjectText.members(named: ["a"], in: #"{"a":[1,{"b":"}"}],"c":2}"#) == ["a": [1, ["b": "}"]]])
        #expect(CanonicalObjectText.members(named: ["c"], in: #"{"a":1,"c":{"d":"#) == nil)
        #expect(CanonicalObjectText.members(named: ["a"], in: "[1]") == nil)
        #expect(CanonicalObjectText.members(named: ["a"], in: "{}") == [:])
    }

    @Test func cuttingTheStoredTextEqualsPresentingTheValue() throws {
        var rng = SeededGenerator(state: 7)
        var checked = 0
        for round in 0..<3000 {
            let message = randomObject(&rng, depth: 0)
            var params = MessageListParams()
            params.includeReactions = round % 2 == 0
            params.includeThreadInfo = round % 3 == 0
            params.includeParentMessageInfo = round % 5 == 0
            params.includeMetaArray = round % 7 == 0
            let cut = MessageItem.text(message.canonicalText, reqID: "").presented(params, omitting: params.omittedMembers).canonicalText
            let expected = params.presented(message).canonicalText
            #expect(cut == expected, "\(message.canonicalText)")
            if cut != expected { break }
            checked += 1
        }
        #expect(checked == 3000)
        // Dropped members first, last, side by side, and all of them.
        let none = MessageListParams()
        let cases: [JSONValue] = [
            ["parent_message_info": ["reactions": 1], "reactions": [], "z": "}"],
            ["a": 1, "reactions": [["x": "\\\""]], "sorted_metaarray": [], "thread_info": [:]],
            ["reactions": [], "sorted_metaarray": [], "thread_info": ["a": [1, 2, "]"]]],
            [:], ["reactions": "only"],
        ]
        for message in cases {
            #expect(MessageItem.text(message.canonicalText, reqID: "").presented(none, omitting: none.omittedMembers).canonicalText == none.presented(message).canonicalText)
        }
        // Nothing asked to be left out: the text is handed out as stored.
        var all = MessageListParams()
        all.includeReactions = true
        all.includeThreadInfo = true
        all.includeParentMessageInfo = true
        all.includeMetaArray = true
        #expect(all.omittedMembers.isEmpty)
    }

    /// A text the cache wrote carries where its optional members lie: presenting it drops
    /// those spans while joining, and must give what the scan and the parsed value give.
    @Test func droppingStoredSpansEqualsPresentingTheValue() throws {
        var rng = SeededGenerator(state: 29)
        var withSpans = 0
        for round in 0..<3000 {
            var message = randomObject(&rng, depth: 0)
            // Most messages the server sends begin with keys that sort before the optional ones.
            if round % 4 != 0, case .object(var fields) = message {
                fields["channel_url"] = "c1"
                message = .object(fields)
            }
            var params = MessageListParams()
            params.includeReactions = round % 2 == 0
            params.includeThreadInfo = round % 3 == 0
            params.includeParentMessageInfo = round % 5 == 0
            params.includeMetaArray = round % 7 == 0
            let text = message.canonicalText
            let spans = OptionalMemberSpans.scanning(text)
            if spans != nil { withSpans += 1 }
            // What the cache stores and reads back is what it found.
            if let spans {
                let check = StoredTextCheck.value(of: text)
                let decoded = spans.encoded(textCheck: check).withUnsafeBytes { stored in
                    Array(text.utf8).withUnsafeBufferPointer { OptionalMemberSpans(decoding: stored, checkedAgainst: $0, textCheck: check) }
                }
                #expect(decoded == spans, "\(text)")
            }
            let item = MessageItem.text(text, reqID: "", spans: spans).presented(params, omitting: params.omittedMembers)
            let expected = params.presented(message).canonicalText
            #expect(item.canonicalText == expected, "\(text)")
            #expect(item.storedTextCount == expected.utf8.count)
            let list = MessageList(items: [item, .value(["n": 1]), item])
            #expect(list.jsonText == "[" + expected + ",{\"n\":1}," + expected + "]", "\(text)")
            if item.canonicalText != expected { break }
        }
        #expect(withSpans > 2000)
        // A member that comes first has no comma before it: no spans, the view scans.
        #expect(OptionalMemberSpans.scanning(#"{"reactions":[],"z":1}"#) == nil)
        #expect(OptionalMemberSpans.scanning(#"{"a":1,"reactions":[]}"#) != nil)
        #expect(OptionalMemberSpans.scanning(#"{"a":1"#) == nil)
        #expect(OptionalMemberSpans.scanning("[]") == nil)
    }

    /// Spans that do not describe the text they were stored with (a damaged value, or one
    /// of another text) are refused, never used to cut.
    @Test func storedSpansThatDoNotFitTheirTextAreRefused() throws {
        let message: JSONValue = [
            "channel_url": "c1", "message": "hi, there", "parent_message_info": ["a": [1, ","]], "reactions": [["key": "ok"], ["key": "no"]],
            "sorted_metaarray": [], "thread_info": ["reply_count": 2], "user": ["user_id": "u1"],
        ]
        let text = Array(message.canonicalText.utf8)
        let spans = try #require(text.withUnsafeBufferPointer { OptionalMemberSpans.scanning($0) })
        let check = text.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) }
        let stored = spans.encoded(textCheck: check)
        #expect(stored.count == 4 * 9 + 8)
        func decode(_ value: [UInt8], _ text: [UInt8], _ check: Int64) -> OptionalMemberSpans? {
            value.withUnsafeBytes { bytes in text.withUnsafeBufferPointer { OptionalMemberSpans(decoding: bytes, checkedAgainst: $0, textCheck: check) } }
        }
        #expect(decode(stored, text, check) == spans)
        var params = MessageListParams()
        params.includeMetaArray = true
        let expected = params.presented(message).canonicalText
        for index in stored.indices {
            for bit in 0..<8 {
                var changed = stored
                changed[index] ^= UInt8(1 << bit)
                #expect(decode(changed, text, check) == nil, "byte \(index) bit \(bit)")
            }
        }
        // Entries whose tie was made to fit still have to describe the text: each span is checked.
        var shifted = Array(stored.dropLast(8))
        shifted[10] &+= 1  // the second span starts a byte later
        let forged = shifted + withUnsafeBytes(of: (shifted.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) } ^ check).littleEndian) { Array($0) }
        #expect(decode(forged, text, check) == nil)
        // A span whose end was moved onto a comma inside the value, the tie made to fit: each
        // span must end where its value ends.
        let reactionsKey = Array(#""reactions":[{"key":"ok"},{"key":"no"}]"#.utf8)
        let reactionsStart = try #require((0...(text.count - reactionsKey.count)).first { Array(text[$0..<($0 + reactionsKey.count)]) == reactionsKey })
        let innerComma = text.firstIndex(of: UInt8(ascii: ","), after: reactionsStart)
        var moved = Array(stored.dropLast(8))
        withUnsafeBytes(of: UInt32(innerComma).littleEndian) { moved.replaceSubrange(14..<18, with: $0) }
        let movedForged = moved + withUnsafeBytes(of: (moved.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) } ^ check).littleEndian) { Array($0) }
        #expect(decode(movedForged, text, check) == nil)
        // The value of another text, a cut-off value, the value of the same spans with no members.
        let other = Array(#"{"channel_url":"c1","reactions":[1],"z":0}"#.utf8)
        #expect(decode(stored, other, other.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) }) == nil)
        #expect(decode(Array(stored.dropLast()), text, check) == nil)
        #expect(decode([], text, check) == nil)
        let presented = MessageItem.text(message.canonicalText, reqID: "", spans: spans).presented(params, omitting: params.omittedMembers)
        #expect(presented.canonicalText == expected)
        // Spans paired with a shorter text than their own reach past it: ignored, never followed.
        let misplaced = MessageItem.text(#"{"a":1}"#, reqID: "", spans: spans, omitting: params.omittedMembers)
        #expect(misplaced.canonicalText == #"{"a":1}"#)
        #expect(MessageList(items: [misplaced]).jsonText == #"[{"a":1}]"#)
    }

    /// The cache writes the spans with every message text and reads them back with it; a
    /// row without them (written before schema 10) or with a damaged value is presented by
    /// scanning, with the same result.
    @Test func theCacheKeepsSpansBesideEachText() throws {
        try withCacheFile { cache, _ throws in
            let messages: [JSONValue] = (1...4).map { id in
                ["message_id": .int(id), "channel_url": "c1", "created_at": .int(10 * id), "updated_at": 0, "type": "MESG",
                 "message": .string("text \(id)"), "reactions": [], "sorted_metaarray": [["key": "k", "value": ["v"]]],
                 "user": ["user_id": "u1"]]
            }
            try cache.upsertMessages(messages)
            var read = try cache.messages(channelURL: "c1", before: .newest, limit: 10)
            #expect(read.map { $0.optionalMembers } == messages.map { OptionalMemberSpans.scanning($0.canonicalText) })
            #expect(read.allSatisfy { $0.optionalMembers != nil })
            try cache.database.execute("UPDATE messages SET optional_members = NULL WHERE message_id = 2")
            try cache.database.execute("UPDATE messages SET optional_members = x'01000000000000000000' WHERE message_id = 3")
            try cache.database.execute("UPDATE messages SET optional_members = x'' WHERE message_id = 4")
            read = try cache.messages(channelURL: "c1", before: .newest, limit: 10)
            #expect(read.map { $0.optionalMembers == nil } == [false, true, true, true])
            let params = MessageListParams()
            let presented = read.map { MessageItem(stored: $0).presented(params, omitting: params.omittedMembers) }
            #expect(presented.map(\.canonicalText) == messages.map { params.presented($0).canonicalText })
            // Another row's value (the same spans, another text) is refused too.
            try cache.database.execute("UPDATE messages SET optional_members = (SELECT optional_members FROM messages WHERE message_id = 1) WHERE message_id = 4")
            #expect(try cache.messages(channelURL: "c1", before: .newest, limit: 10).map { $0.optionalMembers == nil } == [false, true, true, true])
            // An edit rewrites the spans with the text.
            var edited = messages[0]
            if case .object(var fields) = edited {
                fields["reactions"] = [["key": "smile", "user_ids": ["u1", "u2"]]]
                fields["updated_at"] = 5
                edited = .object(fields)
            }
            try cache.upsertMessages([edited])
            let again = try cache.messages(channelURL: "c1", before: .newest, limit: 1 + 3)
            #expect(again[0].optionalMembers == OptionalMemberSpans.scanning(edited.canonicalText))
            #expect(MessageItem(stored: again[0]).presented(params, omitting: params.omittedMembers).canonicalText
                == params.presented(edited).canonicalText)
        }
    }

    @Test func aListJoinsTextsAndValuesIntoOneArray() throws {
        let stored: JSONValue = ["message_id": 1, "message": "from the cache", "req_id": "r1"]
        let live: JSONValue = ["message_id": 2, "message": "from an event"]
        let list = MessageList(items: [.text(stored.canonicalText, reqID: "r1"), .value(live)])
        #expect(try JSONValue.parse(list.jsonText) == .array([stored, live]))
        #expect(Array(list) == [stored, live])
        #expect(list == MessageList([stored, live]))
        #expect(list != MessageList([live, stored]))
        #expect(list.items.map(\.reqID) == ["r1", ""])
        #expect(MessageList().jsonText == "[]")
    }

    /// A stored text that is not JSON (damage the checks at open could not see) fails the
    /// read with a cache error and marks the file for replacement; nothing invalid is handed out.
    @Test func aDamagedStoredMessageFailsThePageRead() throws {
        try withCacheFile { cache, path throws in
            try cache.database.execute("""
                INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                      parent_message_id, is_reply_to_channel, json)
                VALUES (1, 'c1', 10, 0, '', 'MESG', '', 'u1', 0, 0, '{"message":"fine"}'),
                       (2, 'c1', 20, 0, '', 'MESG', '', 'u1', 0, 0, '{"message":"cut off}')
                """)
            #expect(throws: ParleyError.self) { try cache.messages(channelURL: "c1", before: .newest, limit: 10) }
            do throws(ParleyError) {
                _ = try cache.messages(channelURL: "c1", before: .newest, limit: 10)
            } catch {
                #expect(error.code == .cache)
                #expect(error.message.contains("message 2"))
            }
            #expect(access(path + SQLiteDatabase.damageMarkerSuffix, F_OK) == 0)
            // The row before it is still readable on its own.
            #expect(try cache.messages(channelURL: "c1", before: MessageKey(createdAt: 15, messageID: 0), limit: 10).map(\.messageID) == [1])
        }
    }

    /// A text the cache wrote carries its check value: a read compares it instead of parsing,
    /// so a text changed behind the cache's back fails the read even when it is still valid
    /// JSON (which SQLite's JSON check would let through), in a page and in the JSON array.
    @Test func aStoredMessageChangedBehindTheCacheFailsItsCheck() throws {
        try withCacheFile { cache, path throws in
            let messages: [JSONValue] = (1...3).map { id in
                ["message_id": .int(id), "channel_url": "c1", "created_at": .int(10 * id), "updated_at": 0, "type": "MESG",
                 "message": .string("text \(id)"), "user": ["user_id": "u1"]]
            }
            try cache.upsertMessages(messages)
            #expect(try cache.messages(channelURL: "c1", before: .newest, limit: 10).map(\.json) == messages.map(\.canonicalText))
            var buffer: [UInt8] = []
            #expect(try cache.appendMessageTexts(channelURL: "c1", before: .newest, limit: 10, to: &buffer) == 3)
            // Same length, still JSON: only the check sees it.
            try cache.database.execute("UPDATE messages SET json = replace(json, 'text 2', 'text 9') WHERE message_id = 2")
            do throws(ParleyError) {
                _ = try cache.messages(channelURL: "c1", before: .newest, limit: 10)
                Issue.record("the changed text was read")
            } catch {
                #expect(error.code == .cache)
                #expect(error.message.contains("message 2"))
            }
            buffer = []
            #expect(throws: ParleyError.self) { try cache.appendMessageTexts(channelURL: "c1", before: .newest, limit: 10, to: &buffer) }
            #expect(access(path + SQLiteDatabase.damageMarkerSuffix, F_OK) == 0)
            #expect(try cache.messages(channelURL: "c1", before: MessageKey(createdAt: 15, messageID: 0), limit: 10).map(\.messageID) == [1])
        }
    }

    /// Bytes that are not UTF-8 fail the read even with a matching check value (the value
    /// vouches for the bytes, not for what wrote them), in a page and in the JSON array.
    @Test func invalidUTF8WithAMatchingCheckValueFailsTheRead() throws {
        try withCacheFile { cache, path throws in
            let bytes = Array(#"{"channel_url":"c1","message":"A"#.utf8) + [0xFF, 0x41] + Array(#"","message_id":1}"#.utf8)
            let check = bytes.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) }
            let hex = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
            try cache.database.execute("""
                INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                      parent_message_id, is_reply_to_channel, json, json_check)
                VALUES (1, 'c1', 10, 0, '', 'MESG', '', 'u1', 0, 0, CAST(x'\(hex)' AS TEXT), \(check))
                """)
            #expect(throws: ParleyError.self) { try cache.messages(channelURL: "c1", before: .newest, limit: 10) }
            var buffer: [UInt8] = []
            #expect(throws: ParleyError.self) { try cache.appendMessageTexts(channelURL: "c1", before: .newest, limit: 10, to: &buffer) }
            #expect(access(path + SQLiteDatabase.damageMarkerSuffix, F_OK) == 0)
        }
    }

    /// The check value is stored on disk, so its function must never change: these values
    /// were computed when it was written. Every single changed byte changes the value.
    @Test func theCheckValueIsStableAndSeesEveryByte() {
        let pinned: [(String, Int64)] = [
            ("", -5_159_250_663_659_831_294), ("{}", -4_634_312_058_671_413_881),
            ("{\"message\":\"héllo\",\"message_id\":1}", -6_481_236_665_721_529_972),
        ]
        for (text, value) in pinned { #expect(StoredTextCheck.value(of: text) == value, "\(text)") }
        let text = Array("{\"message\":\"a text of some length to cover words and a tail\",\"n\":1}".utf8)
        let original = text.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) }
        for index in text.indices {
            for bit in 0..<8 {
                var changed = text
                changed[index] ^= UInt8(1 << bit)
                #expect(changed.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) } != original, "byte \(index) bit \(bit)")
            }
        }
        // A longer or shorter text with the same words differs too.
        #expect(StoredTextCheck.value(of: "{}") != StoredTextCheck.value(of: "{}\u{0}"))
    }
}

private extension Array where Element == UInt8 {
    /// The first index of `byte` after `start` (the text's end when none).
    func firstIndex(of byte: UInt8, after start: Int) -> Int {
        self[start...].firstIndex(of: byte) ?? count
    }
}
