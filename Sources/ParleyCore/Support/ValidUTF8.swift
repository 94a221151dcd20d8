import Glibc

// The standard library's `String(validating:as:)` is generic over the encoding and is not
// specialized here: it cost a cached page more than reading its rows (perf, 2026-11-26).
// Decoding repairs invalid sequences on the fast, specialized path; comparing the result with
// the input tells whether anything was repaired.

extension String {
    /// The string these bytes encode, or nil when they are not valid UTF-8.
    init?(validUTF8 bytes: UnsafeBufferPointer<UInt8>) {
        var decoded = String(decoding: bytes, as: UTF8.self)
        let unchanged = decoded.withUTF8 { output in
            output.count == bytes.count && (bytes.isEmpty || memcmp(output.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
        }
        guard unchanged else { return nil }
        self = decoded
    }
}
