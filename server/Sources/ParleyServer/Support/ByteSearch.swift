// Substring tests by bytes. With Foundation imported, `String.contains(_: String)` goes through
// NSString's locale-aware search, which cost several percent of a server's CPU on the 8 KB
// statements of the other servers' reads (Stores/EventStore.swift).
import Glibc

extension String {
    /// True if `needle`'s UTF-8 bytes appear in this string's.
    func containsBytes(of needle: String) -> Bool {
        var haystack = self
        var needle = needle
        return haystack.withUTF8 { hay in
            needle.withUTF8 { pin in
                guard !pin.isEmpty else { return true }
                guard let hayStart = hay.baseAddress, let pinStart = pin.baseAddress, hay.count >= pin.count else { return false }
                var at = 0
                let last = hay.count - pin.count
                while at <= last {
                    guard let hit = memchr(hayStart + at, Int32(pin[0]), last - at + 1) else { return false }
                    let offset = UnsafeRawPointer(hit) - UnsafeRawPointer(hayStart)
                    if memcmp(hayStart + offset, pinStart, pin.count) == 0 { return true }
                    at = offset + 1
                }
                return false
            }
        }
    }
}
