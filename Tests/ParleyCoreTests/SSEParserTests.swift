import Testing
@testable import ParleyCore

private func parseWhole(_ text: String, maxEventBytes: Int = 1 << 20) throws -> [SSEEvent] {
    var parser = SSEParser(maxEventBytes: maxEventBytes)
    return try parser.feed(Array(text.utf8))
}

private func parse(_ bytes: [UInt8], splitAt cuts: [Int]) throws -> [SSEEvent] {
    var parser = SSEParser()
    var events: [SSEEvent] = []
    var start = 0
    for cut in cuts.sorted() + [bytes.count] where cut >= start {
        events += try parser.feed(bytes[start..<cut])
        start = cut
    }
    return events
}

@Suite struct SSEParserTests {
    static let document = "\u{FEFF}: stream opened\n"
        + "retry: 2500\n"
        + "id: 41\n"
        + "event: message_added\n"
        + "data: {\"text\":\"héllo 🎉 wörld\"}\r\n"
        + "\r\n"
        + "data: line one\r"
        + "data:line two\r"
        + "data:  indented\r"
        + "\r"
        + ":heartbeat\n"
        + "id: 42\n"
        + "event: resync\n"
        + "unknown: ignored\n"
        + "data\n"
        + "\n"
        + "id: 4\u{0}3\n"
        + "data: after a NUL id\n"
        + "\n"
        + "data: unfinished at the end"

    static let expected = [
        SSEEvent(id: "41", type: "message_added", data: "{\"text\":\"héllo 🎉 wörld\"}", retry: 2500),
        SSEEvent(id: "41", type: "message", data: "line one\nline two\n indented"),
        SSEEvent(id: "42", type: "resync", data: ""),
        SSEEvent(id: "42", type: "message", data: "after a NUL id"),
    ]

    @Test func parsesAWholeDocument() throws {
        var parser = SSEParser()
        let events = try parser.feed(Array(Self.document.utf8))
        #expect(events == Self.expected)
        #expect(parser.commentCount == 2)
        #expect(parser.lastEventID == "42")
        #expect(parser.reconnectionTimeMs == 2500)
        #expect(parser.bytesReceived == Self.document.utf8.count)
    }

    @Test func bytesWithoutContiguousStorageGiveTheSameEvents() throws {
        // Such bytes take the parser's path of one byte at a time.
        var parser = SSEParser()
        #expect(try parser.feed(AnySequence(Array(Self.document.utf8))) == Self.expected)
        #expect(parser.bytesReceived == Self.document.utf8.count)
        #expect(parser.lastEventID == "42")
    }

    @Test func byteByByteGivesTheSameEvents() throws {
        let bytes = Array(Self.document.utf8)
        #expect(try parse(bytes, splitAt: Array(0..<bytes.count)) == Self.expected)
    }

    @Test func randomSplitsGiveTheSameEvents() throws {
        let bytes = Array(Self.document.utf8)
        var generator = SeededGenerator(state: 20_240_601)
        for _ in 0..<300 {
            let cutCount = Int.random(in: 1...12, using: &generator)
            let cuts = (0..<cutCount).map { _ in Int.random(in: 0...bytes.count, using: &generator) }
            let events = try parse(bytes, splitAt: cuts)
            #expect(events == Self.expected, "cuts: \(cuts.sorted())")
            if events != Self.expected { break }
        }
    }

    @Test(arguments: ["\n", "\r", "\r\n"])
    func everyLineEndStyleWorks(lineEnd: String) throws {
        let text = ["event: a", "data: 1", "data: 2", "", ": c", "data: 3", "", ""].joined(separator: lineEnd)
        #expect(try parseWhole(text) == [SSEEvent(type: "a", data: "1\n2"), SSEEvent(data: "3")])
    }

    @Test func crlfSplitAcrossChunksIsOneLineEnd() throws {
        // Were the LF taken for a second line end, "a" and "b" would be two events.
        var parser = SSEParser()
        #expect(try parser.feed(Array("data: a\r".utf8)).isEmpty)
        #expect(try parser.feed(Array("\ndata: b\r".utf8)).isEmpty)
        #expect(try parser.feed(Array("\n\r".utf8)) == [SSEEvent(data: "a\nb")])
        #expect(try parser.feed(Array("\n".utf8)).isEmpty)
        #expect(try parser.feed(Array("data: c\n\n".utf8)) == [SSEEvent(data: "c")])
    }

    @Test func mixedLineEndsInOneStream() throws {
        #expect(try parseWhole("data: a\rdata: b\r\ndata: c\n\r\n") == [SSEEvent(data: "a\nb\nc")])
        // CR CR is two line ends: the second one dispatches.
        #expect(try parseWhole("data: x\r\rdata: y\n\n") == [SSEEvent(data: "x"), SSEEvent(data: "y")])
    }

    @Test func multiByteCharactersSplitAnywhere() throws {
        let bytes = Array("data: ä€𝄞\n\n".utf8)
        for cut in 0...bytes.count {
            #expect(try parse(bytes, splitAt: [cut]) == [SSEEvent(data: "ä€𝄞")], "cut at \(cut)")
        }
    }

    @Test func fieldSyntax() throws {
        #expect(try parseWhole("data:x\n\n") == [SSEEvent(data: "x")])
        #expect(try parseWhole("data:  two spaces\n\n") == [SSEEvent(data: " two spaces")])
        #expect(try parseWhole("data: a: b\n\n") == [SSEEvent(data: "a: b")])
        #expect(try parseWhole("data\ndata\n\n") == [SSEEvent(data: "\n")])
        #expect(try parseWhole("Data: case matters\n\n").isEmpty)
        #expect(try parseWhole("event: typed\n\n").isEmpty, "no data, no event")
        #expect(try parseWhole("event: t\ndata: 1\n\ndata: 2\n\n") == [SSEEvent(type: "t", data: "1"), SSEEvent(data: "2")])
        #expect(try parseWhole("event\ndata: 1\n\n") == [SSEEvent(type: "message", data: "1")])
        #expect(try parseWhole("data: never finished\n").isEmpty)
    }

    @Test func commentsAreCountedNotDispatched() throws {
        var parser = SSEParser()
        #expect(try parser.feed(Array(":\n: ping\n\n:ping\r\n".utf8)).isEmpty)
        #expect(parser.commentCount == 3)
        #expect(try parser.feed(Array("data: x\n:in the middle\n\n".utf8)) == [SSEEvent(data: "x")])
        #expect(parser.commentCount == 4)
    }

    @Test func eventIDsPersistAndNULIsIgnored() throws {
        var parser = SSEParser(lastEventID: "7")
        var events = try parser.feed(Array("data: a\n\nid: 8\n\ndata: b\n\n".utf8))
        #expect(events == [SSEEvent(id: "7", data: "a"), SSEEvent(id: "8", data: "b")])
        events = try parser.feed(Array("id: 9\u{0}\ndata: c\n\n".utf8))
        #expect(events == [SSEEvent(id: "8", data: "c")])
        events = try parser.feed(Array("id\ndata: d\n\nid: 10\ndata: e\n\n".utf8))
        #expect(events == [SSEEvent(id: nil, data: "d"), SSEEvent(id: "10", data: "e")])
        #expect(parser.lastEventID == "10")
    }

    @Test func retryTakesDigitsOnly() throws {
        var parser = SSEParser()
        var events = try parser.feed(Array("retry: 3000\ndata: a\n\ndata: b\n\n".utf8))
        #expect(events == [SSEEvent(data: "a", retry: 3000), SSEEvent(data: "b")])
        for bad in ["retry: 12a", "retry: -5", "retry: 1.5", "retry:", "retry:  100", "retry: 99999999999999999999999"] {
            events = try parser.feed(Array("\(bad)\ndata: x\n\n".utf8))
            #expect(events == [SSEEvent(data: "x")], "\(bad)")
        }
        #expect(parser.reconnectionTimeMs == 3000)
        _ = try parser.feed(Array("retry:0\n\n".utf8))
        #expect(parser.reconnectionTimeMs == 0)
    }

    @Test func byteOrderMarkOnlyAtTheStart() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let body = Array("data: a\n\n".utf8)
        for cut in 0...4 {
            #expect(try parse(bom + body, splitAt: [cut]) == [SSEEvent(data: "a")], "cut at \(cut)")
        }
        // A second BOM belongs to the field name, which then is unknown.
        #expect(try parse(bom + bom + body, splitAt: []).isEmpty)
        #expect(try parseWhole("data: a\n\n\u{FEFF}data: b\n\n") == [SSEEvent(data: "a")])
        #expect(try parseWhole("data: \u{FEFF}kept\n\n") == [SSEEvent(data: "\u{FEFF}kept")])
    }

    @Test func invalidUTF8IsReplacedNotFatal() throws {
        let bytes = Array("data: a".utf8) + [0xFF, 0xC3] + Array("\ndata: b\n\n".utf8)
        #expect(try parse(bytes, splitAt: []) == [SSEEvent(data: "a\u{FFFD}\u{FFFD}\nb")])
    }

    @Test func anOverlongLineFailsAndStaysFailed() throws {
        var parser = SSEParser(maxEventBytes: 64)
        var delivered: [SSEEvent] = []
        let stream = Array("data: fine\n\n".utf8) + Array(repeating: UInt8(ascii: "x"), count: 100)
        #expect(throws: ParleyError.self) {
            try parser.feed(stream) { delivered.append($0) }
        }
        #expect(delivered == [SSEEvent(data: "fine")], "events before the violation are delivered")
        let error = #expect(throws: ParleyError.self) { try parser.feed(Array("\n\ndata: more\n\n".utf8)) }
        #expect(error?.code == .limitExceeded)
    }

    @Test func anOversizedEventFailsEvenWithShortLines() throws {
        var parser = SSEParser(maxEventBytes: 64)
        let line = Array("data: 0123456789\n".utf8)
        #expect(try parser.feed(line + line + line).isEmpty)
        let error = #expect(throws: ParleyError.self) { try parser.feed(line + line + line) }
        #expect(error?.code == .limitExceeded)
        // Within the limit, a line of exactly the maximum is fine.
        var exact = SSEParser(maxEventBytes: 16)
        #expect(try exact.feed(Array("data:0123456789a\n\n".utf8)) == [SSEEvent(data: "0123456789a")])
    }
}
