import Glibc
import Testing
@testable import ParleyCore

// The outbox journal beside a file cache: what it holds after accepted, sent, canceled and
// rolled-back messages, a torn last line, compaction, and the recovery it makes possible
// when the cache file is destroyed as a whole.

private func temporaryDirectory() throws -> String { try temporaryDirectory(prefix: "parley-journal-test") }

private func fileBytes(_ path: String) -> [UInt8] {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return [] }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        bytes.append(contentsOf: chunk[0..<count])
    }
    return bytes
}

private func writeFile(_ path: String, _ bytes: [UInt8]) {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
}

private func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : -1
}

private func queue(_ cache: ChatCache, _ reqID: String, channel: String = "c1") throws(ParleyError) {
    _ = try cache.insertPendingMessage(
        ["req_id": .string(reqID), "channel_url": .string(channel), "created_at": 1, "message": .string("text \(reqID)")],
        outbox: OutboxRequest(kind: "user", requestJSON: #"{"message":"text \#(reqID)","req_id":"\#(reqID)"}"#))
}

private func serverCopy(_ reqID: String, id: Int64, channel: String = "c1") -> JSONValue {
    ["message_id": .int(id), "channel_url": .string(channel), "created_at": 2, "req_id": .string(reqID), "message": "sent"]
}

/// Destroys the file's header (what makes SQLite reject it as a whole).
private func destroyHeader(_ path: String) {
    let descriptor = open(path, O_WRONLY)
    let garbage = [UInt8](repeating: 0xDE, count: 100)
    _ = garbage.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    close(descriptor)
}

@Suite struct OutboxJournalTests {
    @Test func itHoldsExactlyTheUnsentMessagesAndIsEmptiedWhenNoneIsLeft() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let journalPath = OutboxJournal.path(forCache: path)
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        var info = stat()
        #expect(stat(journalPath, &info) == 0 && info.st_mode & 0o777 == 0o600)
        try queue(cache, "a")
        try queue(cache, "b")
        try queue(cache, "c", channel: "c2")
        #expect(OutboxJournal.read(path: journalPath).live.map(\.reqID) == ["a", "b", "c"])
        // Sent (the server's copy replaces it), canceled; a deleted channel's unsent message stays.
        try cache.upsertMessage(serverCopy("a", id: 1))
        try cache.removeLocalMessage(reqID: "b")
        let contents = OutboxJournal.read(path: journalPath)
        #expect(contents.failure == nil && contents.live.map(\.reqID) == ["c"])
        #expect(contents.live.first?.requestJSON == #"{"message":"text c","req_id":"c"}"#)
        try cache.deleteChannel(url: "c2")
        #expect(OutboxJournal.read(path: journalPath).live.map(\.reqID) == ["c"])
        try cache.removeLocalMessage(reqID: "c")
        #expect(fileSize(journalPath) == 0)
        // A rolled-back acceptance is never journaled.
        #expect(throws: ParleyError.self) {
            try cache.transaction { () throws(ParleyError) in
                try queue(cache, "d")
                throw ParleyError(.cache, "rolled back")
            }
        }
        #expect(fileSize(journalPath) == 0)
        // Inside a transaction the records wait for its commit.
        try cache.transaction { () throws(ParleyError) in
            try queue(cache, "e")
            #expect(fileSize(journalPath) == 0)
        }
        #expect(OutboxJournal.read(path: journalPath).live.map(\.reqID) == ["e"])
        try cache.clear()
        #expect(fileSize(journalPath) == 0)
    }

    @Test func aTornLastLineIsIgnoredAndABadLineMakesItUnreadable() throws {
        let add = #"{"op":"add","req_id":"a","channel_url":"c1","created_at":1,"kind":"user","message":{"req_id":"a"},"request":{}}"#
        let addB = #"{"op":"add","req_id":"b","channel_url":"c1","created_at":2,"kind":"user","message":{"req_id":"b"},"request":{}}"#
        let torn = OutboxJournal.parse(Array((add + "\n" + addB.prefix(40)).utf8))
        #expect(torn.failure == nil && torn.live.map(\.reqID) == ["a"])
        let done = OutboxJournal.parse(Array((add + "\n" + addB + "\n" + #"{"op":"done","req_id":"a"}"# + "\n").utf8))
        #expect(done.failure == nil && done.live.map(\.reqID) == ["b"] && done.recordCount == 3)
        let bad = OutboxJournal.parse(Array((add + "\n" + "garbage\n" + addB + "\n").utf8))
        #expect(bad.failure != nil)
        #expect(OutboxJournal.read(path: "/nonexistent/journal").failure != nil)
    }

    @Test func itIsCompactedAtOpenAndWhenItGrows() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let journalPath = OutboxJournal.path(forCache: path)
        do {
            let cache = try ChatCache(location: .file(path: path))
            try queue(cache, "keep")  // stays live: the file is never emptied
            for index in 0..<30 {
                try queue(cache, "sent\(index)")
                try cache.upsertMessage(serverCopy("sent\(index)", id: Int64(index + 1)))
            }
            #expect(OutboxJournal.read(path: journalPath).recordCount == 61)
            cache.close()
        }
        do {
            // Reopened: more than 4 records per live message, rewritten with the live one only.
            let cache = try ChatCache(location: .file(path: path))
            let contents = OutboxJournal.read(path: journalPath)
            #expect(contents.recordCount == 1 && contents.live.map(\.reqID) == ["keep"])
            // Past the size threshold it is compacted while running too.
            let padding = String(repeating: "x", count: 4096)
            for index in 0..<100 {
                _ = try cache.insertPendingMessage(
                    ["req_id": .string("big\(index)"), "channel_url": "c1", "created_at": 1, "message": .string(padding)],
                    outbox: OutboxRequest(kind: "user", requestJSON: "{}"))
                try cache.upsertMessage(serverCopy("big\(index)", id: Int64(100 + index)))
            }
            #expect(fileSize(journalPath) <= OutboxJournal.compactionBytes)
            #expect(OutboxJournal.read(path: journalPath).live.map(\.reqID) == ["keep"])
            cache.close()
        }
        // A journal that disagrees with the cache (a crash between a commit and its append)
        // is rewritten from the cache at open.
        writeFile(journalPath, [])
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(OutboxJournal.read(path: journalPath).live.map(\.reqID) == ["keep"])
    }

    @Test func aFileDestroyedAsAWholeGivesItsUnsentMessagesBackFromTheJournal() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        do {
            let cache = try ChatCache(location: .file(path: path))
            for reqID in ["a", "b", "c"] { try queue(cache, reqID) }
            try cache.markFailed(reqID: "b", error: ParleyError(.network, "offline"), retryable: true)
            cache.close()
        }
        destroyHeader(path)
        let replaced = try ChatCache(location: .file(path: path))
        defer { replaced.close() }
        let salvage = try #require(replaced.salvage)
        #expect(salvage.unreadable != nil && salvage.journalUnreadable == nil && !salvage.lostUnknown)
        #expect(salvage.restoredFromJournal == ["a", "b", "c"] && salvage.restoredReqIDs == ["a", "b", "c"])
        #expect(salvage.lost.isEmpty)
        let locals = try replaced.localMessages(channelURL: "c1")
        #expect(locals.map(\.reqID) == ["a", "b", "c"] && locals.allSatisfy { $0.status == .pending })
        #expect(try replaced.outboxEntries().map(\.reqID) == ["a", "b", "c"])
        #expect(try replaced.outboxEntries().allSatisfy { $0.attempts == 0 && $0.requestJSON.contains("text") })
        #expect(OutboxJournal.read(path: OutboxJournal.path(forCache: path)).live.map(\.reqID) == ["a", "b", "c"])
    }

    @Test func aDamagedJournalWithADestroyedFileLeavesTheLossesUnknown() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let journalPath = OutboxJournal.path(forCache: path)
        do {
            let cache = try ChatCache(location: .file(path: path))
            for reqID in ["a", "b"] { try queue(cache, reqID) }
            cache.close()
        }
        writeFile(journalPath, Array("not a record\n".utf8) + fileBytes(journalPath))
        destroyHeader(path)
        let replaced = try ChatCache(location: .file(path: path))
        defer { replaced.close() }
        let salvage = try #require(replaced.salvage)
        #expect(salvage.lostUnknown && salvage.journalUnreadable != nil && salvage.restoredReqIDs.isEmpty)
        // The damaged journal is kept beside the damaged file; a fresh one follows the cache.
        #expect(fileSize(salvage.movedTo + ".outbox") > 0)
        #expect(fileSize(journalPath) == 0)
    }
}
