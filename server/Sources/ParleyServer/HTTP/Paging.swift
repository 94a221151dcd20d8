// Keyset paging, in one place: sort keys (texts by their NFC form, compared bytewise), the
// opaque page token (hex of a JSON array holding the last sort key of a page), and paging
// over a list in memory (the listings within one loaded channel). Listings of the database
// page in SQL with the same keys (Stores/ChannelQueries.swift).

/// The page token of a sort key.
func encodeToken(_ key: [JSON]) -> String {
    let text = JSON.array(key).serialized()
    return text.utf8.map { b in (b < 16 ? "0" : "") + String(b, radix: 16) }.joined()
}

func decodeToken(_ token: String) -> [JSON]? {
    let chars = Array(token.utf8)
    guard !chars.isEmpty, chars.count % 2 == 0, chars.count <= 4096 else { return nil }
    var bytes: [UInt8] = []
    var i = 0
    while i < chars.count {
        guard let b = UInt8(String(decoding: chars[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
        bytes.append(b)
        i += 2
    }
    guard case .array(let a)? = try? JSONParser.parse(bytes) else { return nil }
    return a
}

/// The sort key of a metadata value (PROTOCOL.md "Sort orders"): the text in NFC, so that
/// canonically equivalent texts (precomposed or combining marks) sort as one; names add case
/// folding (`nameOrderKey`).
/// `_nfcCodeUnits` is the standard library's own normalizer; the client uses the same.
func textOrderKey(_ text: String) -> JSON { .string(orderKeyText(text)) }

/// The sort key of a text as text (stored in the `*_key` columns of Storage/Migrations.swift).
func orderKeyText(_ text: String) -> String {
    // ASCII is its own NFC form: most names skip the normalizer.
    text.utf8.allSatisfy({ $0 < 0x80 }) ? text : String(decoding: text._nfcCodeUnits, as: UTF8.self)
}

/// The sort key of a channel name or a nickname (PROTOCOL.md "Sort orders"): the NFC text
/// case-folded (lowercased, in NFC again), then U+0001, then the NFC text itself, so that
/// names differing only in case sort together and ties go by the exact bytes. The client
/// computes the same key (Sources/ParleyCore/Support/TextOrder.swift).
func nameOrderKeyText(_ text: String) -> String {
    let exact = orderKeyText(text)
    return orderKeyText(exact.lowercased()) + "\u{1}" + exact
}

func nameOrderKey(_ text: String) -> JSON { .string(nameOrderKeyText(text)) }

/// Lexicographic sort keys for keyset pagination. Strings compare by their UTF-8 bytes:
/// Swift's `<` and `==` treat canonically equivalent strings as equal, which is no total
/// order for keys that are not normalized (and the client compares bytes).
func compareKeys(_ a: [JSON], _ b: [JSON]) -> Int {
    for (x, y) in zip(a, b) {
        switch (x, y) {
        case (.int(let p), .int(let q)): if p != q { return p < q ? -1 : 1 }
        case (.string(let p), .string(let q)):
            if !p.utf8.elementsEqual(q.utf8) { return p.utf8.lexicographicallyPrecedes(q.utf8) ? -1 : 1 }
        default: return 0
        }
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

func sameShape(_ a: [JSON], _ b: [JSON]) -> Bool {
    guard a.count == b.count else { return false }
    for (x, y) in zip(a, b) {
        switch (x, y) {
        case (.int, .int), (.string, .string): continue
        default: return false
        }
    }
    return true
}

/// Sorts items by key, starts after `token`, returns one page and the next token ("" at the end).
func keysetPage<T>(_ items: [T], key: (T) -> [JSON], token: String?, limit: Int) throws -> ([T], String) {
    var keyed = items.map { (key($0), $0) }
    keyed.sort { compareKeys($0.0, $1.0) < 0 }
    if let token {
        guard let after = decodeToken(token) else { throw APIError.badToken() }
        if let sample = keyed.first, !sameShape(sample.0, after) { throw APIError.badToken() }
        keyed.removeAll { compareKeys($0.0, after) <= 0 }
    }
    let page = Array(keyed.prefix(limit))
    let next = keyed.count > limit ? encodeToken(page.last!.0) : ""
    return (page.map { $0.1 }, next)
}
