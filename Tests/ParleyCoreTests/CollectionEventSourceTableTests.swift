import Glibc
import Testing

@testable import ParleyCore

/// The one table of collection event sources (`CollectionEventSource.allCases`) and its two
/// generated copies: the `PARLEY_SOURCE_*` block of include/parley/group_channel_collection.h
/// and the members of the Python `CollectionEventSource` Enum. The test fails when a copy
/// differs from what the table produces; `PARLEY_GENERATE_SOURCES=1` rewrites both copies
/// instead (docs/C-API.md, "Event sources").
@Suite struct CollectionEventSourceTableTests {
    static let root = "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
    static let header = root + "/include/parley/group_channel_collection.h"
    static let python = root + "/bindings/python/parley/channel_collection.py"
    static let note = "from CollectionEventSource.allCases: do not edit (docs/C-API.md, \"Event sources\")"

    static var cBlock: [String] {
        ["/* BEGIN GENERATED \(note) */"]
            + CollectionEventSource.allCases.map { source in
                let name = "PARLEY_SOURCE_" + source.name.uppercased()
                return "#define " + name + String(repeating: " ", count: max(1, 43 - name.count)) + String(source.code)
            }
            + ["/* END GENERATED */"]
    }

    static var pythonBlock: [String] {
        ["    # BEGIN GENERATED \(note)"]
            + CollectionEventSource.allCases.map { "    \($0.name.uppercased()) = \"\($0.name)\"" }
            + ["    # END GENERATED"]
    }

    /// The file's lines with the generated block (from its BEGIN line to its END line) replaced.
    static func regenerated(_ path: String, block: [String]) throws -> (old: String, new: String) {
        let text = try readTextFile(path)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let begin = lines.firstIndex(where: { $0.contains("BEGIN GENERATED") }),
            let end = lines.firstIndex(where: { $0.contains("END GENERATED") }), begin < end
        else { throw ParleyError(.io, "\(path): no generated block") }
        let new = lines[..<begin] + block + lines[(end + 1)...]
        return (text, new.joined(separator: "\n"))
    }

    @Test func theTableKeepsItsCodes() {
        let codes = CollectionEventSource.allCases.map(\.code)
        #expect(Set(codes).count == codes.count && !codes.contains(0))
        #expect(CollectionEventSource.realtime(.messageReceived).code == 1 && CollectionEventSource.realtime(.mention).code == 4)
        #expect(CollectionEventSource.realtime(.pinnedMessageUpdated).code == 30)
        #expect(CollectionEventSource.channelChangelog.code == 100 && CollectionEventSource.unknownEvent.code == 108)
        #expect(CollectionEventSource.messageSent.code == 109 && CollectionEventSource.channelMemberCountChanged.code == 110)
        #expect(CollectionEventSource.channelRefresh.code == 111)
    }

    @Test func theHeaderAndThePythonEnumAreGeneratedFromTheTable() throws {
        let write = getenv("PARLEY_GENERATE_SOURCES").map { String(cString: $0) == "1" } ?? false
        for (path, block) in [(Self.header, Self.cBlock), (Self.python, Self.pythonBlock)] {
            let (old, new) = try Self.regenerated(path, block: block)
            if write && old != new {
                guard let file = fopen(path, "wb") else { throw ParleyError(.io, "cannot write \(path)") }
                fputs(new, file)
                fclose(file)
                continue
            }
            let same = old == new
            #expect(same, "\(path) differs from CollectionEventSource.allCases: run PARLEY_GENERATE_SOURCES=1 swift test --filter CollectionEventSourceTableTests")
        }
    }
}
