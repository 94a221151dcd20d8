// A check value stored beside each message's JSON text (messages.json_check), so that a read
// proves the text is the one the cache wrote without parsing it: a page of 100 messages costs
// a few microseconds this way, where SQLite's json_valid costs about 2 µs per message. Any
// changed byte is caught, which json_valid does not promise (it sees only broken syntax).
//
// The value is stored on disk: the function must never change. It reads the text as 64-bit
// little-endian words, mixes each into the state with a multiply and a rotation, mixes in the
// tail bytes and the length, and ends with a finalizer that spreads every input bit.

enum StoredTextCheck {
    static func value(of bytes: UnsafeBufferPointer<UInt8>) -> Int64 {
        let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
        var state: UInt64 = 0x5045_524C_4559_0001 ^ (UInt64(bytes.count) &* multiplier)
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return Int64(bitPattern: finalized(state)) }
        let words = bytes.count / 8
        for index in 0..<words {
            let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self))
            state = ((state ^ word) &* multiplier).rotatedLeft(by: 29)
        }
        var tail: UInt64 = 0
        for offset in stride(from: bytes.count - 1, through: words * 8, by: -1) {
            tail = (tail << 8) | UInt64(bytes[offset])
        }
        state = ((state ^ tail) &* multiplier).rotatedLeft(by: 29)
        return Int64(bitPattern: finalized(state))
    }

    static func value(of text: String) -> Int64 {
        var text = text
        return text.withUTF8 { value(of: $0) }
    }

    /// The finalizer of splitmix64: each output bit depends on every input bit.
    private static func finalized(_ input: UInt64) -> UInt64 {
        var state = input
        state = (state ^ (state >> 30)) &* 0xBF58_476D_1CE4_E5B9
        state = (state ^ (state >> 27)) &* 0x94D0_49BB_1331_11EB
        return state ^ (state >> 31)
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(by count: UInt64) -> UInt64 { (self << count) | (self >> (64 - count)) }
}
