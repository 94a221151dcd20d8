// The client's address in the access log (docs/SERVER.md "Logs"): the peer of the
// connection, unless that peer is a configured trusted proxy (a balancer); then the address
// its `X-Forwarded-For` names. A header from any other peer is ignored: anyone can send one.
import Foundation

/// An IPv4 or IPv6 address as its bytes (4 or 16). An IPv4 address written as IPv6
/// (`::ffff:10.0.0.1`, how a server bound to `::` sees an IPv4 peer) is its IPv4 form.
struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    let bytes: [UInt8]

    init?(_ text: String) {
        var text = text.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let all = withUnsafeBytes(of: &v6) { Array($0) }
        let mappedPrefix: [UInt8] = Array(repeating: 0, count: 10) + [0xFF, 0xFF]
        bytes = Array(all.prefix(12)) == mappedPrefix ? Array(all.suffix(4)) : all
    }

    var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let written = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return "-" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The `trusted_proxies` setting: addresses and CIDR ranges, comma-separated
/// (`127.0.0.1, 10.0.0.0/24, ::1`).
struct TrustedProxies: Sendable {
    struct AddressRange: Sendable {
        let network: IPAddress
        let prefixLength: Int

        func contains(_ address: IPAddress) -> Bool {
            guard address.bytes.count == network.bytes.count else { return false }
            var remaining = prefixLength
            for (given, expected) in zip(address.bytes, network.bytes) where remaining > 0 {
                let bits = min(8, remaining)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if given & mask != expected & mask { return false }
                remaining -= bits
            }
            return true
        }
    }

    private(set) var ranges: [AddressRange] = []

    var isEmpty: Bool { ranges.isEmpty }

    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ text: String) throws(ParseError) -> TrustedProxies {
        var proxies = TrustedProxies()
        for entry in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            let parts = entry.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count <= 2, let address = IPAddress(String(parts[0])) else {
                throw ParseError(description: "'\(entry)' is neither an IP address nor a range ADDRESS/BITS")
            }
            let width = address.bytes.count * 8
            var prefixLength = width
            if parts.count == 2 {
                guard let bits = Int(parts[1]), (0...width).contains(bits) else {
                    throw ParseError(description: "'\(entry)': the prefix length must be a whole number in 0...\(width)")
                }
                prefixLength = bits
            }
            proxies.ranges.append(AddressRange(network: address, prefixLength: prefixLength))
        }
        return proxies
    }

    func contains(_ address: IPAddress) -> Bool { ranges.contains { $0.contains(address) } }

    /// As the setting is written, normalized ("none" for none).
    var description: String {
        ranges.isEmpty ? "none" : ranges.map { range in
            range.prefixLength == range.network.bytes.count * 8 ? "\(range.network)" : "\(range.network)/\(range.prefixLength)"
        }.joined(separator: ",")
    }

    /// The client's address: the peer, or, when the peer is a trusted proxy, the last address
    /// of `X-Forwarded-For` (over every such header, in order) that is not itself a trusted
    /// proxy: each proxy appends the address it was reached from, so entries further left
    /// were written by whoever sent the request and prove nothing. An unreadable entry ends
    /// the walk at the address before it.
    func clientAddress(peer: IPAddress?, forwardedFor headers: [String]) -> IPAddress? {
        guard var client = peer, contains(client), !headers.isEmpty else { return peer }
        let entries = headers.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for entry in entries.reversed() {
            guard let address = IPAddress(entry) else { break }
            client = address
            if !contains(address) { break }
        }
        return client
    }
}
