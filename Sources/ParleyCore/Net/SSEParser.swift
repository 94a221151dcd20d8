/// One dispatched Server-Sent Event.
public struct SSEEvent: Sendable, Equatable {
    /// The last event ID in effect when the event was dispatched (it persists across
    /// events until an `id` field changes it); nil when none has been set or it was reset
    /// with an empty `id`. This is what a reconnect sends as `Last-Event-ID`.
    public var id: String?
    /// The `event` field, "message" when absent.
    public var type: String
    /// The `data` lines joined with "\n".
    public var data: String
    /// A valid `retry` field that arrived in this event's block, in milliseconds.
    public var retry: Int?

    public init(id: String? = nil, type: String = "message", data: String, retry: Int? = nil) {
        self.id = id
        self.type = type
        self.data = data
        self.retry = retry
    }
}

/// An incremental parser of the `text/event-stream` format, following the WHATWG HTML
/// "server-sent events" interpretation rules. Bytes may be fed in chunks split anywhere
/// (inside a CRLF, inside a UTF-8 sequence); events come out when their blank line arrives.
/// An unfinished event at the end of the stream is never dispatched.
public struct SSEParser: Sendable {
    /// Longest accepted line, and largest accepted event data, in bytes.
    public let maxEventBytes: Int
    /// The last event ID in effect (see `SSEEvent.id`).
    public private(set) var lastEventID: String?
    /// The last valid `retry` value received, in milliseconds.
    public private(set) var reconnectionTimeMs: Int?
    /// How many comment lines (`:` first) arrived. Servers send them as heartbeats, so a
    /// change proves the connection alive even when no event arrives.
    public private(set) var commentCount = 0
    /// How many bytes were fed in total.
    public private(set) var bytesReceived = 0

    private var line: [UInt8] = []
    private var data: [UInt8] = []
    private var eventType: [UInt8] = []
    private var retryInBlock: Int?
    /// The previous chunk ended with CR: a LF at the start of the next one belongs to it.
    private var skipLeadingLF = false
    private var isFirstLine = true
    private var failure: ParleyError?

    public init(maxEventBytes: Int = 1 << 20, lastEventID: String? = nil) {
        self.maxEventBytes = max(1, maxEventBytes)
        self.lastEventID = lastEventID?.isEmpty == true ? nil : lastEventID
    }

    /// Feeds bytes and returns the events completed by them, in order.
    /// Throws `.limitExceeded` when a line or an event's data grows beyond `maxEventBytes`;
    /// the parser then stays failed (the connection should be dropped).
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(ParleyError) -> [SSEEvent] {
        var events: [SSEEvent] = []
        try feed(bytes) { events.append($0) }
        return events
    }

    /// Feeds bytes and calls `onEvent` for each completed event as soon as it is complete,
    /// so events before a size violation in the same chunk are still delivered.
    public mutating func feed(
        _ bytes: some Sequence<UInt8>, onEvent: (SSEEvent) -> Void
    ) throws(ParleyError) {
        if let failure { throw failure }
        let fed: Result<Void, ParleyError>? = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(ParleyError) in try feedContiguous(buffer, onEvent) }
        }
        if let fed { return try fed.get() }
        for byte in bytes {
            try withUnsafePointer(to: byte) { (pointer) throws(ParleyError) in
                try feedContiguous(UnsafeBufferPointer(start: pointer, count: 1), onEvent)
            }
        }
    }

    /// Appends each run of bytes up to a line end to the line at once (a chunk of the
    /// stream is mostly one long data line).
    private mutating func feedContiguous(_ buffer: UnsafeBufferPointer<UInt8>, _ onEvent: (SSEEvent) -> Void) throws(ParleyError) {
        var start = 0
        while start < buffer.count {
            if skipLeadingLF {
                skipLeadingLF = false
                if buffer[start] == 0x0A {
                    bytesReceived += 1
                    start += 1
                    continue
                }
            }
            var end = start
            while end < buffer.count, buffer[end] != 0x0A, buffer[end] != 0x0D { end += 1 }
            if end > start {
                guard line.count + (end - start) <= maxEventBytes else {
                    // Counted up to the byte that made the line too long, as a byte loop would.
                    bytesReceived += maxEventBytes - line.count + 1
                    throw fail("a line of the event stream exceeds \(maxEventBytes) bytes")
                }
                line.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<end]))
                bytesReceived += end - start
            }
            guard end < buffer.count else { return }
            bytesReceived += 1
            if buffer[end] == 0x0D { skipLeadingLF = true }
            try endLine(onEvent)
            start = end + 1
        }
    }

    private mutating func fail(_ message: String) -> ParleyError {
        let error = ParleyError(.limitExceeded, message)
        failure = error
        line = []
        data = []
        return error
    }

    private mutating func endLine(_ onEvent: (SSEEvent) -> Void) throws(ParleyError) {
        // The line is moved out while it is read, and emptied once nothing refers to it:
        // emptying it while a slice of it lives would copy its whole buffer.
        var current: [UInt8] = []
        swap(&current, &line)
        try handleLine(current[...], onEvent)
        current.removeAll(keepingCapacity: true)
        swap(&current, &line)
    }

    private mutating func handleLine(_ line: ArraySlice<UInt8>, _ onEvent: (SSEEvent) -> Void) throws(ParleyError) {
        var text = line
        if isFirstLine {
            isFirstLine = false
            // One UTF-8 byte order mark may open the stream.
            if text.starts(with: [0xEF, 0xBB, 0xBF]) { text = text.dropFirst(3) }
        }
        if text.isEmpty {
            dispatch(onEvent)
            return
        }
        if text.first == UInt8(ascii: ":") {
            commentCount += 1
            return
        }
        let name: ArraySlice<UInt8>
        var value: ArraySlice<UInt8>
        if let colon = text.firstIndex(of: UInt8(ascii: ":")) {
            name = text[..<colon]
            value = text[(colon + 1)...]
            if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        } else {
            name = text
            value = []
        }
        switch String(decoding: name, as: UTF8.self) {
        case "event":
            eventType = Array(value)
        case "data":
            guard data.count + value.count + 1 <= maxEventBytes else {
                throw fail("the data of an event exceeds \(maxEventBytes) bytes")
            }
            data.append(contentsOf: value)
            data.append(0x0A)
        case "id":
            if !value.contains(0) {
                lastEventID = value.isEmpty ? nil : String(decoding: value, as: UTF8.self)
            }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let milliseconds = Int(String(decoding: value, as: UTF8.self))
            {
                reconnectionTimeMs = milliseconds
                retryInBlock = milliseconds
            }
        default:
            break  // Unknown fields are ignored.
        }
    }

    private mutating func dispatch(_ onEvent: (SSEEvent) -> Void) {
        defer {
            data.removeAll(keepingCapacity: true)
            eventType = []
            retryInBlock = nil
        }
        guard !data.isEmpty else { return }
        data.removeLast()  // The newline after the last data line.
        let type = eventType.isEmpty ? "message" : String(decoding: eventType, as: UTF8.self)
        onEvent(SSEEvent(id: lastEventID, type: type, data: String(decoding: data, as: UTF8.self), retry: retryInBlock))
    }
}
