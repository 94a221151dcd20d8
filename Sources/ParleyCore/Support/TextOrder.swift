/// The one order of channel names and metadata values (docs/PROTOCOL.md, "Sort orders"),
/// shared with the server: texts compare by the UTF-8 bytes of their NFC form, so that a
/// name typed with a combining accent and the same name precomposed sort as one (ties are
/// then broken by `channel_url`). The server computes the same key with the same function.
///
/// `_nfcCodeUnits` is the standard library's own normalizer (the one `String ==` uses);
/// it is public, needs no Foundation, and is the same code on both sides.
func textOrderKey(_ text: String) -> String {
    // ASCII is its own NFC form: skip the normalizer for the common case.
    if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }
    return String(decoding: text._nfcCodeUnits, as: UTF8.self)
}
