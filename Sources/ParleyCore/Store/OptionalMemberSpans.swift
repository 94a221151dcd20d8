import Glibc

// Where the members a message collection may leave out lie in a stored message text, kept
// beside the text (messages.optional_members, schema 10). A view presents a page of cached
// messages without the members the application did not ask for (MessageListParams); with
// the spans it drops their bytes while joining the page, without scanning each text.
//
// On disk: for each member present, in key order, one byte (its index in `names`) and the
// span's two ends as 32-bit little-endian byte offsets; then 8 bytes that tie the value to
// its text: the check value (StoredTextCheck) of the entries, xor the text's own check value
// (messages.json_check). A value that is damaged, or that belongs to another text, fails that
// check or the check of each span against the text, and is not used: the view then scans the
// text, which the read has checked. NULL (rows written before schema 10): the view scans.

/// The byte spans of a stored message's optional members: for each one present, from the
/// comma before it to the end of its value, so that dropping the span leaves valid JSON.
struct OptionalMemberSpans: Sendable, Hashable {
    /// The members, in the order a canonical text holds them (keys in byte order).
    static let names: [[UInt8]] = [
        WireField.parentMessageInfo, WireField.reactions, WireField.sortedMetaarray, WireField.threadInfo,
    ].map { Array($0.utf8) }

    /// Span starts and ends, indexed as `names`; -1 for a member the text does not have.
    private(set) var starts = SIMD4<Int32>(repeating: -1)
    private(set) var ends = SIMD4<Int32>(repeating: -1)

    /// No member found (yet).
    private init() {}

    /// The spans found by scanning `bytes` (up to the last of the names); nil when the text is
    /// not an object, or when one of the members comes first (no comma before it: the view
    /// then cuts by scanning).
    static func scanning(_ bytes: UnsafeBufferPointer<UInt8>) -> OptionalMemberSpans? {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "{"), bytes.count <= Int(Int32.max) else { return nil }
        var spans = OptionalMemberSpans()
        var previousEnd = -1
        let walk = CanonicalObjectText.forEachMember(of: bytes, upTo: names[3]) { member in
            guard bytes[member.keyEnd] == UInt8(ascii: ":") else { return false }
            if let index = names.firstIndex(where: { $0.count == member.key.count && member.key.elementsEqual($0) }) {
                guard previousEnd >= 0 else { return false }
                spans.starts[index] = Int32(previousEnd)
                spans.ends[index] = Int32(member.valueEnd)
            }
            previousEnd = member.valueEnd
            return true
        }
        return walk == .wholeObject || walk == .pastGreatest ? spans : nil
    }

    static func scanning(_ text: String) -> OptionalMemberSpans? {
        var text = text
        return text.withUTF8 { scanning($0) }
    }

    /// The stored form (see the top of this file), for the text whose check value is `textCheck`.
    func encoded(textCheck: Int64) -> [UInt8] {
        var bytes: [UInt8] = []
        for member in 0..<4 where starts[member] >= 0 {
            bytes.append(UInt8(member))
            for offset in [starts[member], ends[member]] {
                withUnsafeBytes(of: UInt32(offset).littleEndian) { bytes.append(contentsOf: $0) }
            }
        }
        let tie = bytes.withUnsafeBufferPointer { StoredTextCheck.value(of: $0) } ^ textCheck
        withUnsafeBytes(of: tie.littleEndian) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Decodes `stored` and checks it against `text`, the message it was stored with (whose
    /// check value is `textCheck`): the tie, and every span holding exactly `,"name":value`.
    /// Nil when anything does not match.
    init?(decoding stored: UnsafeRawBufferPointer, checkedAgainst text: UnsafeBufferPointer<UInt8>, textCheck: Int64) {
        guard stored.count >= 8, (stored.count - 8) % 9 == 0 else { return nil }
        let entries = UnsafeRawBufferPointer(rebasing: stored[..<(stored.count - 8)])
        let tie = Int64(littleEndian: stored.loadUnaligned(fromByteOffset: stored.count - 8, as: Int64.self))
        guard StoredTextCheck.value(of: entries.assumingMemoryBound(to: UInt8.self)) ^ textCheck == tie else { return nil }
        var previousMember = -1
        var previousEnd = 0
        for entry in 0..<(entries.count / 9) {
            let member = Int(entries[entry * 9])
            let start = Int(UInt32(littleEndian: entries.loadUnaligned(fromByteOffset: entry * 9 + 1, as: UInt32.self)))
            let end = Int(UInt32(littleEndian: entries.loadUnaligned(fromByteOffset: entry * 9 + 5, as: UInt32.self)))
            guard member > previousMember, member < 4, start >= previousEnd,
                Self.holdsMember(Self.names[member], from: start, to: end, in: text)
            else { return nil }
            starts[member] = Int32(start)
            ends[member] = Int32(end)
            previousMember = member
            previousEnd = end
        }
    }

    /// Whether `text[start..<end]` is `,"name":value`, followed by `,` or the closing `}`.
    private static func holdsMember(_ name: [UInt8], from start: Int, to end: Int, in text: UnsafeBufferPointer<UInt8>) -> Bool {
        let valueStart = start + name.count + 4
        guard start > 0, valueStart < end, end < text.count,
            text[start] == UInt8(ascii: ","), text[start + 1] == UInt8(ascii: "\""),
            name.withUnsafeBufferPointer({ memcmp(text.baseAddress! + start + 2, $0.baseAddress!, name.count) }) == 0,
            text[valueStart - 2] == UInt8(ascii: "\""), text[valueStart - 1] == UInt8(ascii: ":"),
            text[end] == UInt8(ascii: ",") || (end == text.count - 1 && text[end] == UInt8(ascii: "}"))
        else { return false }
        return CanonicalObjectText.endOfValue(text, from: valueStart) == end
    }

    /// Whether every span lies inside a text of `textCount` bytes, in order.
    func fit(textCount: Int) -> Bool {
        var previousEnd: Int32 = 0
        for member in 0..<4 where starts[member] >= 0 {
            guard starts[member] >= previousEnd, ends[member] > starts[member], Int(ends[member]) <= textCount else { return false }
            previousEnd = ends[member]
        }
        return true
    }

    /// Calls `body` with each run of bytes of the text (`count` bytes long) that is kept
    /// when the members in `omitted` are dropped, in order.
    func forEachKeptRun(ofTextCount count: Int, omitting omitted: OptionalMembers, _ body: (Range<Int>) -> Void) {
        var from = 0
        for member in 0..<4 where omitted.contains(OptionalMembers(index: member)) && starts[member] >= 0 {
            body(from..<Int(starts[member]))
            from = Int(ends[member])
        }
        body(from..<count)
    }

    /// How many bytes dropping the members in `omitted` takes out of the text.
    func droppedCount(_ omitted: OptionalMembers) -> Int {
        var count = 0
        for member in 0..<4 where omitted.contains(OptionalMembers(index: member)) && starts[member] >= 0 {
            count += Int(ends[member] - starts[member])
        }
        return count
    }
}

/// A set of the members of `OptionalMemberSpans.names`.
struct OptionalMembers: OptionSet, Sendable, Hashable {
    let rawValue: UInt8
    init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The member at `index` in `OptionalMemberSpans.names`.
    init(index: Int) { rawValue = 1 << UInt8(index) }

    static let parentMessageInfo = OptionalMembers(index: 0)
    static let reactions = OptionalMembers(index: 1)
    static let sortedMetaarray = OptionalMembers(index: 2)
    static let threadInfo = OptionalMembers(index: 3)

    /// Their names, in key order.
    var names: [[UInt8]] { Self.namesOfEverySet[Int(rawValue & 0xF)] }

    private static let namesOfEverySet: [[[UInt8]]] = (0..<16).map { set in
        (0..<4).filter { set & (1 << $0) != 0 }.map { OptionalMemberSpans.names[$0] }
    }
}
