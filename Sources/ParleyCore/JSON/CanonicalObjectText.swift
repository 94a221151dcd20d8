// Text operations on the canonical JSON the cache stores (CanonicalJSON.swift writes it: no
// whitespace, object keys in byte order), done on the bytes without parsing: views cut the
// members an application did not ask for, and the cache splices a channel's member list in.

/// Text operations on canonical JSON objects as the cache stores them (no whitespace, valid).
enum CanonicalObjectText {
    /// `text` without its top-level members named in `names` (the same string when it has
    /// none). Text that is not an object is returned as it is.
    static func removingMembers(_ names: [[UInt8]], from text: String) -> String {
        var text = text
        let cut = text.withUTF8 { bytes -> String? in
            guard bytes.count >= 2, bytes[0] == UInt8(ascii: "{") else { return nil }
            return removingMembers(names, fromObject: bytes)
        }
        return cut ?? text
    }

    /// The object text without its top-level members named in `names`; nil if it has none.
    private static func removingMembers(_ names: [[UInt8]], fromObject bytes: UnsafeBufferPointer<UInt8>) -> String? {
        // Member ranges to drop (with the comma that separates each from its neighbour).
        var dropped: [Range<Int>] = []
        var previousEnd = 1
        var keptAny = false
        let greatest = names.max { $0.lexicographicallyPrecedes($1) } ?? []
        forEachMember(of: bytes, upTo: greatest) { member in
            let named = names.contains { name in
                name.count == member.key.count && name.first == member.key.first && member.key.elementsEqual(name)
            }
            if named {
                // Before any kept member a member goes with the comma after it; after one,
                // with the comma before it.
                if !keptAny {
                    let end = member.valueEnd < bytes.count && bytes[member.valueEnd] == UInt8(ascii: ",") ? member.valueEnd + 1 : member.valueEnd
                    dropped.append(member.start..<end)
                } else {
                    dropped.append(previousEnd..<member.valueEnd)
                }
            } else {
                keptAny = true
            }
            previousEnd = member.valueEnd
            return true
        }
        guard !dropped.isEmpty else { return nil }
        let ranges = dropped
        let length = bytes.count - ranges.reduce(0) { $0 + $1.count }
        return String(unsafeUninitializedCapacity: length) { output in
            var written = 0
            var from = 0
            for range in ranges + [bytes.count..<bytes.count] {
                let count = range.lowerBound - from
                if count > 0 {
                    (output.baseAddress! + written).update(from: bytes.baseAddress! + from, count: count)
                    written += count
                }
                from = range.upperBound
            }
            return written
        }
    }

    /// The values of the top-level members named in `names` that the object text has, each
    /// parsed alone: reading a few members of a stored object without parsing all of it. Nil
    /// when the text is not an object the cache wrote (cut short, or a key with an escape,
    /// which is not compared raw); the caller then parses the whole text.
    static func members(named names: [String], in text: String) -> [String: JSONValue]? {
        var text = text
        return text.withUTF8 { bytes -> [String: JSONValue]? in
            guard bytes.count >= 2, bytes[0] == UInt8(ascii: "{") else { return nil }
            let wanted = names.map { Array($0.utf8) }
            let greatest = wanted.max { $0.lexicographicallyPrecedes($1) } ?? []
            var found: [String: JSONValue] = [:]
            var readable = true
            let end = forEachMember(of: bytes, upTo: greatest) { member in
                guard !member.key.contains(UInt8(ascii: "\\")) else {
                    readable = false
                    return false
                }
                guard let index = wanted.firstIndex(where: { $0.count == member.key.count && member.key.elementsEqual($0) }) else {
                    return true
                }
                let value = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[(member.keyEnd + 1)..<member.valueEnd]))
                guard let parsed = try? JSONValue.parse(bytes: value) else {
                    readable = false
                    return false
                }
                found[names[index]] = parsed
                return true
            }
            return readable && end != .cutShort ? found : nil
        }
    }

    /// One top-level member of an object text: from its key's opening quote (`start`) to the
    /// end of its value; `key` is the key's raw bytes, between the quotes.
    struct Member {
        let start: Int
        let keyEnd: Int
        let valueEnd: Int
        let key: UnsafeBufferPointer<UInt8>
    }

    /// How a walk of an object's members ended.
    enum MemberWalkEnd {
        /// At the closing brace, the last byte: the whole object was read.
        case wholeObject
        /// At a key past the greatest name asked for.
        case pastGreatest
        /// `body` asked to stop.
        case stopped
        /// The text ended or broke off first: not an object the cache wrote.
        case cutShort
    }

    /// Calls `body` with each top-level member of the object text `bytes` (which starts with
    /// `{`), in order, until it returns false. Keys are in byte order, so the walk ends at the
    /// first key past `greatest`: none named up to it can follow (a key with an escape is not
    /// compared raw, and does not end the walk).
    @discardableResult
    static func forEachMember(
        of bytes: UnsafeBufferPointer<UInt8>, upTo greatest: [UInt8], _ body: (Member) -> Bool
    ) -> MemberWalkEnd {
        var index = 1
        while index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            let keyEnd = endOfString(bytes, from: index)
            guard keyEnd < bytes.count else { return .cutShort }
            let key = UnsafeBufferPointer(rebasing: bytes[(index + 1)..<(keyEnd - 1)])
            if greatest.lexicographicallyPrecedes(key), !key.contains(UInt8(ascii: "\\")) { return .pastGreatest }
            let valueEnd = endOfValue(bytes, from: keyEnd + 1)  // past the ':'
            guard body(Member(start: index, keyEnd: keyEnd, valueEnd: valueEnd, key: key)) else { return .stopped }
            index = valueEnd
            if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1 }
        }
        return index == bytes.count - 1 && bytes[index] == UInt8(ascii: "}") ? .wholeObject : .cutShort
    }

    /// `text` with the member `name: value` (`value` is JSON text) added at its place in
    /// key order (UTF-8 bytes of the unescaped keys, as the canonical writer sorts them),
    /// replacing a member of that name. Text that is not an object is returned as it is.
    static func inserting(name: String, value: String, into text: String) -> String {
        var text = text
        let key = Array(name.utf8)
        return text.withUTF8 { bytes -> String in
            guard bytes.count >= 2, bytes[0] == UInt8(ascii: "{") else { return String(decoding: bytes, as: UTF8.self) }
            var index = 1
            var replaced: Range<Int>?
            while index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                let keyEnd = endOfString(bytes, from: index)
                let valueEnd = endOfValue(bytes, from: keyEnd + 1)
                let quoted = UnsafeBufferPointer(rebasing: bytes[index..<keyEnd])
                let raw = quoted.dropFirst().dropLast()
                let order: (same: Bool, after: Bool)
                if raw.contains(UInt8(ascii: "\\")) {
                    // An escaped key (rare) compares by what it stands for.
                    let current = Array(((try? JSONValue.parse(String(decoding: quoted, as: UTF8.self)))?.stringValue ?? "").utf8)
                    order = (current == key, key.lexicographicallyPrecedes(current))
                } else {
                    // Compared where it lies: reading a channel splices its members into every key list.
                    order = (raw.elementsEqual(key), key.lexicographicallyPrecedes(raw))
                }
                if order.same {
                    replaced = index..<valueEnd
                    break
                }
                if order.after { break }
                index = valueEnd
                if index < bytes.count, bytes[index] == UInt8(ascii: ",") { index += 1 }
            }
            var member = JSONValue.string(name).canonicalText + ":" + value
            let head = String(decoding: UnsafeBufferPointer(rebasing: bytes[..<index]), as: UTF8.self)
            if let replaced {
                return head + member + String(decoding: UnsafeBufferPointer(rebasing: bytes[replaced.upperBound...]), as: UTF8.self)
            }
            // Before a following member the new one takes a comma after it; at the end, before it.
            if index < bytes.count - 1 {
                member += ","
            } else if index > 1 {
                member = "," + member
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<(bytes.count - 1)]), as: UTF8.self) + member + "}"
            }
            return head + member + String(decoding: UnsafeBufferPointer(rebasing: bytes[index...]), as: UTF8.self)
        }
    }

    /// The index just past the string that starts (with its quote) at `start`. A byte loop:
    /// keys and most values are short, where a call per string costs more than the scan.
    static func endOfString(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        let base = bytes.baseAddress!
        var index = start + 1
        while index < bytes.count {
            let byte = base[index]
            if byte == UInt8(ascii: "\"") { return index + 1 }
            index += byte == UInt8(ascii: "\\") ? 2 : 1  // an escape covers the byte after it
        }
        return bytes.count
    }

    /// The index just past the value that starts at `start`.
    static func endOfValue(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        let base = bytes.baseAddress!
        var index = start
        var depth = 0
        while index < bytes.count {
            switch base[index] {
            case UInt8(ascii: "\""):
                index = endOfString(bytes, from: index)
                if depth == 0 { return index }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return index }
                depth -= 1
                if depth == 0 { return index + 1 }
            case UInt8(ascii: ","):
                if depth == 0 { return index }
            default:
                break
            }
            index += 1
        }
        return bytes.count
    }
}
