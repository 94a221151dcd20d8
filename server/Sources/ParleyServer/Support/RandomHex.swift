/// `bytes` random bytes as lowercase hexadecimal (ids, keys).
func randomHex(_ bytes: Int) -> String {
    var g = SystemRandomNumberGenerator()
    var out = ""
    for _ in 0..<bytes {
        let b = UInt8.random(in: 0...255, using: &g)
        out += String(b >> 4, radix: 16) + String(b & 15, radix: 16)
    }
    return out
}
