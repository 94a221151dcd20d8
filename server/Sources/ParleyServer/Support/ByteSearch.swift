// Substring search by bytes. With Foundation imported, `String.contains(_: String)` goes through
// NSString's locale-aware search, which cost several percent of a server's CPU on the 8 KB
// statements of the other servers' reads (Stores/EventStore.swift).
import Glibc

/// Where `needle` first appears in `bytes` at or after `from`.
func firstOffset(of needle: UnsafeBufferPointer<UInt8>, in bytes: UnsafeBufferPointer<UInt8>, from: Int = 0) -> Int? {
    guard bytes.count - from >= needle.count else { return nil }
    guard !needle.isEmpty else { return from }
    guard let start = bytes.baseAddress, let first = needle.baseAddress else { return nil }
    var at = from
    let last = bytes.count - needle.count
    while at <= last {
        guard let hit = memchr(start + at, Int32(needle[0]), last - at + 1) else { return nil }
        let offset = UnsafeRawPointer(hit) - UnsafeRawPointer(start)
        if memcmp(start + offset, first, needle.count) == 0 { return offset }
        at = offset + 1
    }
    return nil
}

extension String {
    /// True if `needle`'s UTF-8 bytes appear in this string's.
    func containsBytes(of needle: String) -> Bool {
        var haystack = self
        var needle = needle
        return haystack.withUTF8 { hay in needle.withUTF8 { firstOffset(of: $0, in: hay) != nil } }
    }
}
