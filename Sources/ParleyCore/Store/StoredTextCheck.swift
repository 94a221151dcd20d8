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
        var mixer = Mixer(length: bytes.count)
        guard let base = UnsafeRawPointer(bytes.baseAddress) else { return Int64(bitPattern: mixer.finalized) }
        let words = bytes.count / 8
        mixer.add(words: base, count: words)
        return Int64(bitPattern: mixer.finished(tail: UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[(words * 8)...])))
    }

    static func value(of text: String) -> Int64 {
        var text = text
        return text.withUTF8 { value(of: $0) }
    }

    /// The value over bytes given in parts (a file read in chunks): `length` in all, every
    /// part but the last a whole number of words.
    struct Mixer {
        private static let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
        private var state: UInt64

        init(length: Int) {
            state = 0x5045_524C_4559_0001 ^ (UInt64(length) &* Self.multiplier)
        }

        /// Mixes in `count` 64-bit little-endian words from `base`.
        mutating func add(words base: UnsafeRawPointer, count: Int) {
            for index in 0..<count {
                add(word: base.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self))
            }
        }

        /// Mixes in one word, read little-endian.
        @inline(__always)
        mutating func add(word: UInt64) {
            state = ((state ^ UInt64(littleEndian: word)) &* Self.multiplier).rotatedLeft(by: 29)
        }

        /// Mixes in the last bytes (fewer than 8) and returns the value.
        mutating func finished(tail bytes: UnsafeRawBufferPointer) -> UInt64 {
            var tail: UInt64 = 0
            for offset in stride(from: bytes.count - 1, through: 0, by: -1) {
                tail = (tail << 8) | UInt64(bytes[offset])
            }
            state = ((state ^ tail) &* Self.multiplier).rotatedLeft(by: 29)
            return finalized
        }

        /// The finalizer of splitmix64: each output bit depends on every input bit.
        var finalized: UInt64 {
            var value = state
            value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
            value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
            return value ^ (value >> 31)
        }
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(by count: UInt64) -> UInt64 { (self << count) | (self >> (64 - count)) }
}
