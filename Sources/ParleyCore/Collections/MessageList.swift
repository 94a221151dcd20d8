// Messages as a message collection holds and hands them out. A page read from the cache stays
// the cache's canonical JSON text (never parsed into a value and encoded again); messages that
// came as values (events, the server's pages) stay values. The C ABI gets the array text by
// joining; Swift callers get values, parsed when they read them.

/// One message of a view: the cache's canonical text (with its `req_id`, which the view
/// needs without parsing), or a value. A text read from the cache carries where its optional
/// members lie (`spans`, nil when the cache does not know); presenting it only notes which of
/// them to leave out (`omitting`), and they are dropped when the text is handed out.
enum MessageItem: Sendable {
    case text(String, reqID: String, spans: OptionalMemberSpans? = nil, omitting: OptionalMembers = [])
    case value(JSONValue)

    /// A message as the cache read it.
    init(stored message: CachedMessage) {
        self = .text(message.json, reqID: message.reqID, spans: message.optionalMembers)
    }

    /// The message as a value (a stored text is parsed; the cache vouched that it is valid).
    var value: JSONValue {
        switch self {
        case .text: (try? JSONValue.parse(canonicalText)) ?? .null
        case .value(let value): value
        }
    }

    var reqID: String {
        switch self {
        case .text(_, let reqID, _, _): reqID
        case .value(let value): WireMessage(value).reqID ?? ""
        }
    }

    var canonicalText: String {
        switch self {
        case .text(let text, _, let spans, let omitting):
            guard let spans = Self.spansToDrop(spans, omitting, textCount: text.utf8.count) else { return text }
            var whole = text
            return whole.withUTF8 { bytes in
                String(unsafeUninitializedCapacity: bytes.count - spans.droppedCount(omitting)) { output in
                    Self.copyKept(bytes, spans, omitting, to: output.baseAddress!)
                }
            }
        case .value(let value): return value.canonicalText
        }
    }

    /// How many bytes `canonicalText` has, when it is a stored text (nil for a value).
    var storedTextCount: Int? {
        guard case .text(let text, _, let spans, let omitting) = self else { return nil }
        let count = text.utf8.count
        return count - (Self.spansToDrop(spans, omitting, textCount: count)?.droppedCount(omitting) ?? 0)
    }

    /// The spans to leave out of a stored text, if any. Spans always come with the text they
    /// were read or found with; ones that would reach past it are ignored rather than trusted
    /// with memory.
    private static func spansToDrop(_ spans: OptionalMemberSpans?, _ omitting: OptionalMembers, textCount: Int) -> OptionalMemberSpans? {
        guard let spans, !omitting.isEmpty, spans.fit(textCount: textCount), spans.droppedCount(omitting) > 0 else { return nil }
        return spans
    }

    /// Copies a stored text without its omitted spans to `output`; returns the bytes written.
    private static func copyKept(
        _ bytes: UnsafeBufferPointer<UInt8>, _ spans: OptionalMemberSpans, _ omitting: OptionalMembers,
        to output: UnsafeMutablePointer<UInt8>
    ) -> Int {
        var written = 0
        guard let source = bytes.baseAddress else { return 0 }
        spans.forEachKeptRun(ofTextCount: bytes.count, omitting: omitting) { run in
            (output + written).update(from: source + run.lowerBound, count: run.count)
            written += run.count
        }
        return written
    }

    /// Writes `canonicalText` of a stored text (`storedTextCount` bytes) at `output`.
    fileprivate func writeStoredText(to output: UnsafeMutablePointer<UInt8>) -> Int {
        guard case .text(var text, _, let spans, let omitting) = self else { return 0 }
        return text.withUTF8 { bytes in
            guard let spans = Self.spansToDrop(spans, omitting, textCount: bytes.count) else {
                if let source = bytes.baseAddress { output.update(from: source, count: bytes.count) }
                return bytes.count
            }
            return Self.copyKept(bytes, spans, omitting, to: output)
        }
    }

    /// Same message content, byte for byte in canonical form.
    func sameContent(as other: MessageItem) -> Bool {
        if case .value(let mine) = self, case .value(let theirs) = other { return mine == theirs }
        return canonicalText == other.canonicalText
    }

    /// Without the top-level members the application did not ask for (MessageListParams;
    /// `omitted` is its `omittedMembers`, computed once per list). A stored text whose spans
    /// are known is not touched here; one without (or whose spans do not fit it) is cut now,
    /// by a scan.
    func presented(_ params: MessageListParams, omitting omitted: OptionalMembers) -> MessageItem {
        switch self {
        case .value(let value):
            return .value(params.presented(value))
        case .text(let text, let reqID, let spans, let omitting):
            if let spans, spans.fit(textCount: text.utf8.count) {
                return .text(text, reqID: reqID, spans: spans, omitting: omitting.union(omitted))
            }
            return omitted.isEmpty ? self : .text(CanonicalObjectText.removingMembers(omitted.names, from: text), reqID: reqID)
        }
    }
}

/// Messages handed to the application by a message collection, in the view's order. Reading
/// an element gives its value (parsed on each read for messages that came from the cache);
/// `jsonText` is the JSON array of them all, built without parsing.
public struct MessageList: RandomAccessCollection, Sendable, Equatable, ExpressibleByArrayLiteral {
    let items: [MessageItem]

    init(items: [MessageItem]) { self.items = items }

    public init(_ values: [JSONValue] = []) { items = values.map(MessageItem.value) }

    public init(arrayLiteral values: JSONValue...) { self.init(values) }

    public var startIndex: Int { 0 }
    public var endIndex: Int { items.count }
    public subscript(position: Int) -> JSONValue { items[position].value }

    /// The messages as one JSON array (canonical form). Stored texts are copied once, from
    /// the cache's strings into the array, leaving out what their presentation omits.
    public var jsonText: String {
        if items.isEmpty { return "[]" }
        let valueTexts = items.map { item -> String? in if case .value(let value) = item { value.canonicalText } else { nil } }
        var length = items.count + 1  // the brackets and the commas between items
        for (item, valueText) in zip(items, valueTexts) {
            length += valueText?.utf8.count ?? item.storedTextCount ?? 0
        }
        return String(unsafeUninitializedCapacity: length) { output in
            let base = output.baseAddress!
            base[0] = UInt8(ascii: "[")
            var written = 1
            for (index, (item, valueText)) in zip(items, valueTexts).enumerated() {
                if index > 0 {
                    base[written] = UInt8(ascii: ",")
                    written += 1
                }
                if var valueText {
                    written += valueText.withUTF8 { bytes in
                        if let source = bytes.baseAddress { (base + written).update(from: source, count: bytes.count) }
                        return bytes.count
                    }
                } else {
                    written += item.writeStoredText(to: base + written)
                }
            }
            base[written] = UInt8(ascii: "]")
            return written + 1
        }
    }

    public static func == (lhs: MessageList, rhs: MessageList) -> Bool {
        lhs.count == rhs.count && zip(lhs.items, rhs.items).allSatisfy { $0.sameContent(as: $1) }
    }
}
