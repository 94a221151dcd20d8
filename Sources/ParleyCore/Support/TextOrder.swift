/// The order of metadata values (docs/PROTOCOL.md, "Sort orders"), shared with the server:
/// texts compare by the UTF-8 bytes of their NFC form, so that a value typed with a combining
/// accent and the same value precomposed sort as one (ties are then broken by `channel_url`).
/// Names add case folding (`nameOrderKey`). The server computes the same keys with the same
/// functions.
///
/// `_nfcCodeUnits` is the standard library's own normalizer (the one `String ==` uses);
/// it is public, needs no Foundation, and is the same code on both sides.
func textOrderKey(_ text: String) -> String {
    // ASCII is its own NFC form: skip the normalizer for the common case.
    if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }
    return String(decoding: text._nfcCodeUnits, as: UTF8.self)
}

/// The order of channel names and nicknames, the server's too: the NFC text case-folded
/// (lowercased, in NFC again), then U+0001, then the NFC text itself, so that names that
/// differ only in case sort together and ties go by the exact bytes.
func nameOrderKey(_ text: String) -> String {
    let exact = textOrderKey(text)
    return textOrderKey(exact.lowercased()) + "\u{1}" + exact
}
