import Glibc
import Testing
@testable import ParleyCore

// Encryption at rest of the cache: no text of the corpus in any file of the cache folder,
// a wrong or missing key is an error that leaves the file byte for byte as it was, a damaged
// page is damage (recovered, unsent messages kept), a plain file is encrypted, and a key is
// changed or removed.

private let testKey = String(repeating: "5a", count: 32)
private let otherKey = String(repeating: "a5", count: 32)

/// Texts that must never appear in a file of an encrypted cache.
private let markers = ["ZEBRAMARKERTEXT", "MARKERUSERID", "MARKERCHANNELNAME", "MARKERSEARCHWORD", "MARKERPENDINGTEXT"]

private func corpusMessage(_ id: Int64, channel: String) -> JSONValue {
    [
        "message_id": .int(id), "channel_url": .string(channel), "created_at": .int(1_700_000_000_000 + id),
        "updated_at": 0, "type": "MESG", "message": .string("ZEBRAMARKERTEXT \(id) MARKERSEARCHWORD"),
        "req_id": .string("r\(id)"), "user": ["user_id": "MARKERUSERID"], "custom_type": "", "parent_message_id": 0,
    ]
}

/// Fills `cache` with the corpus: a channel, `count` messages, one pending message.
private func writeCorpus(_ cache: ChatCache, count: Int64 = 300) throws {
    try cache.upsertChannel(["channel_url": "c1", "name": "MARKERCHANNELNAME", "created_at": 1_700_000_000_000, "custom_type": ""])
    try cache.transaction { () throws(ParleyError) in
        for id in 1...count { try cache.upsertMessage(corpusMessage(id, channel: "c1")) }
    }
    _ = try cache.insertPendingMessage(
        ["req_id": "unsent", "channel_url": "c1", "created_at": 1_800_000_000_000, "message": "MARKERPENDINGTEXT"],
        outbox: OutboxRequest(kind: "user", requestJSON: #"{"message":"MARKERPENDINGTEXT","message_type":"MESG","req_id":"unsent"}"#))
}

/// An encrypted cache at `path` holding the corpus, checkpointed and closed; its page count.
@discardableResult
private func writeEncryptedCorpus(path: String, count: Int64) throws -> Int64 {
    let cache = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
    defer { cache.close() }
    try writeCorpus(cache, count: count)
    try cache.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return try cache.scalarInt("PRAGMA page_count")
}

/// Flips the bits of `mask` in the byte at `offset` of the file.
private func flipByte(_ path: String, at offset: off_t, mask: UInt8) {
    let descriptor = open(path, O_RDWR)
    var byte: UInt8 = 0
    _ = pread(descriptor, &byte, 1, offset)
    byte ^= mask
    _ = pwrite(descriptor, &byte, 1, offset)
    close(descriptor)
}

private func fileBytes(_ path: String) -> [UInt8] {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return [] }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = read(descriptor, &chunk, chunk.count)
        if count <= 0 { break }
        bytes.append(contentsOf: chunk[0..<count])
    }
    return bytes
}

private func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let pattern = Array(needle.utf8)
    guard haystack.count >= pattern.count else { return false }
    var index = 0
    while index <= haystack.count - pattern.count {
        guard let first = haystack[index...].firstIndex(of: pattern[0]), first <= haystack.count - pattern.count else { return false }
        if haystack[first..<(first + pattern.count)].elementsEqual(pattern) { return true }
        index = first + 1
    }
    return false
}

/// Markers found in the files of `directory`, as "file: marker".
private func markersFound(in directory: String) -> [String] {
    var found: [String] = []
    guard let listing = opendir(directory) else { return ["cannot list \(directory)"] }
    defer { closedir(listing) }
    while let entry = readdir(listing) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
        guard name != ".", name != ".." else { continue }
        let bytes = fileBytes(directory + "/" + name)
        for marker in markers where contains(bytes, marker) { found.append("\(name): \(marker)") }
    }
    return found
}

@Suite struct CacheEncryptionTests {
    @Test func noTextOfTheCorpusReachesAnyFileAndEverythingReadsBack() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let cache = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
        #expect(cache.isEncrypted)
        try writeCorpus(cache)
        // The WAL holds the writes (no checkpoint yet), the journal the unsent message.
        #expect(SQLiteFiles.hasContent(path + "-wal"))
        #expect(SQLiteFiles.hasContent(path + ".outbox"))
        #expect(markersFound(in: directory) == [])
        let query = CacheSearchQuery(match: try #require(try MessageSearchText.matchExpression("MARKERSEARCHWORD")))
        #expect(try cache.searchMessages(query, .first(limit: 1000)).count == 300)
        try cache.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        #expect(markersFound(in: directory) == [])
        cache.close()
        #expect(markersFound(in: directory) == [])
        #expect(!contains(Array(fileBytes(path).prefix(16)), "SQLite format 3"))

        let reopened = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
        defer { reopened.close() }
        #expect(reopened.recovery == nil)
        #expect(try reopened.channel(url: "c1") != nil)
        #expect(try reopened.messageCount(channelURL: "c1") == 300)
        #expect(try reopened.searchMessages(query, .first(limit: 1000)).count == 300)
        #expect(try reopened.outboxEntries().map(\.reqID) == ["unsent"])
        let reader = try ChatCache(readerOf: path)
        #expect(try reader.messageCount(channelURL: "c1") == 300)
        reader.close()
        #expect(SQLiteDatabase.quickCheck(path: path) == nil)
    }

    @Test func theCheckOfAnEncryptedFileWithoutItsKeyFindsNoDamage() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        try writeEncryptedCorpus(path: path, count: 10)
        #expect(!CacheSealing.isSealed(path: path))
        #expect(SQLiteDatabase.quickCheck(path: path) == nil)
    }

    @Test func aPlainControlShowsTheMarkers() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let cache = try ChatCache(location: .file(path: directory + "/user.sqlite"))
        try writeCorpus(cache, count: 5)
        #expect(!markersFound(in: directory).isEmpty)
        cache.close()
    }

    @Test func aWrongKeyOrNoKeyIsAnErrorThatTouchesNothing() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        do {
            let cache = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
            try writeCorpus(cache, count: 20)
            cache.close()
        }
        let before = ["", "-wal", "-shm", ".outbox"].map { fileBytes(path + $0) }
        for secret in [try CacheSecret(keyHex: otherKey), nil, try CacheSecret(passphrase: "not the key", iterations: 1, memoryBytes: 8 << 20)] {
            #expect {
                _ = try ChatCache(location: .file(path: path), secret: secret)
            } throws: { error in
                (error as? ParleyError)?.code == .cacheKey
            }
            #expect(["", "-wal", "-shm", ".outbox"].map { fileBytes(path + $0) } == before)
        }
        let listing = markersFound(in: directory)
        #expect(listing == [])
        // Nothing was moved aside.
        #expect(system("ls '\(directory)' | grep -q corrupt") != 0)
        let cache = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
        defer { cache.close() }
        #expect(try cache.messageCount(channelURL: "c1") == 20)
    }

    @Test func aFlippedByteInAPageIsDamageRecoveredWithTheUnsentMessages() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        try writeEncryptedCorpus(path: path, count: 200)
        // One byte of page 1 (after the 4096-byte header), which every open reads.
        flipByte(path, at: 4096 + 200, mask: 0x01)

        let cache = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
        defer { cache.close() }
        let recovery = try #require(cache.recovery)
        #expect(recovery.movedTo.hasPrefix(path + ".corrupt-"))
        #expect(cache.salvage?.restoredReqIDs == ["unsent"])
        #expect(try cache.outboxEntries().map(\.reqID) == ["unsent"])
        #expect(cache.isEncrypted)
        #expect(markersFound(in: directory) == [])
    }

    @Test func aDamagedPageDeepInTheFileIsFoundAsDamage() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let pageCount = try writeEncryptedCorpus(path: path, count: 400)
        flipByte(path, at: off_t(4096 + (pageCount - 2) * 4096 + 10), mask: 0x80)
        // A file this small gets the full structural check at open: it reads the page.
        let cache = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
        defer { cache.close() }
        #expect(cache.recovery?.movedTo.hasPrefix(path + ".corrupt-") == true)
        #expect(cache.salvage?.restoredReqIDs == ["unsent"])
    }

    @Test func aPlainCacheIsEncryptedThenRekeyedThenMadePlainAgain() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        do {
            let cache = try ChatCache(location: .file(path: path))
            try writeCorpus(cache, count: 50)
            cache.close()
        }
        #expect(!markersFound(in: directory).isEmpty)
        let first = try CacheSecret(keyHex: testKey)
        do {
            let cache = try ChatCache(location: .file(path: path), secret: first)
            #expect(cache.recovery == nil && cache.isEncrypted)
            #expect(try cache.messageCount(channelURL: "c1") == 50)
            #expect(try cache.outboxEntries().map(\.reqID) == ["unsent"])
            cache.close()
        }
        #expect(markersFound(in: directory) == [])
        let second = try CacheSecret(passphrase: "correct horse battery staple", iterations: 1, memoryBytes: 8 << 20)
        try CacheSealing.rewrite(path: path, from: first, to: second)
        #expect(markersFound(in: directory) == [])
        #expect(throws: ParleyError.self) { _ = try ChatCache(location: .file(path: path), secret: first) }
        do {
            let cache = try ChatCache(location: .file(path: path), secret: second)
            #expect(cache.recovery == nil)
            #expect(try cache.messageCount(channelURL: "c1") == 50)
            cache.close()
        }
        try CacheSealing.rewrite(path: path, from: second, to: nil)
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.recovery == nil && !cache.isEncrypted)
        #expect(try cache.messageCount(channelURL: "c1") == 50)
        #expect(try cache.outboxEntries().map(\.reqID) == ["unsent"])
    }

    @Test func aDamagedPlainFileGivenAKeyIsReplacedByAnEncryptedOneKeepingTheUnsentMessage() throws {
        let directory = try temporaryDirectory(prefix: "parley-enc")
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        var pageCount: Int64 = 0
        do {
            let cache = try ChatCache(location: .file(path: path))
            try writeCorpus(cache, count: 200)
            try cache.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pageCount = try cache.scalarInt("PRAGMA page_count")
            cache.close()
        }
        let descriptor = open(path, O_RDWR)
        let garbage = [UInt8](repeating: 0xAB, count: 4096)
        _ = garbage.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t((pageCount - 3) * 4096)) }
        close(descriptor)
        let cache = try ChatCache(location: .file(path: path), secret: try CacheSecret(keyHex: testKey))
        defer { cache.close() }
        #expect(cache.recovery?.movedTo.hasPrefix(path + ".corrupt-") == true)
        #expect(cache.isEncrypted)
        #expect(try cache.outboxEntries().map(\.reqID) == ["unsent"])
        for file in [path, path + "-wal", path + ".outbox"] {
            #expect(!markers.contains { contains(fileBytes(file), $0) }, "\(file)")
        }
    }

    @Test func theConfigurationReadsAKeyOrAPassphraseAndRefusesBadOnes() throws {
        let keyed = try ClientConfiguration(json: #"{"cache_key":"\#(testKey)"}"#)
        #expect(keyed.cacheSecret?.kind == .key)
        #expect(keyed.cacheSecret?.description == "CacheSecret(key)")
        let passphrase = try ClientConfiguration(json: #"{"cache_passphrase":"pass","cache_passphrase_iterations":3,"cache_passphrase_memory_mb":16}"#)
        #expect(passphrase.cacheSecret?.kind == .passphrase)
        #expect(passphrase.cacheSecret?.passphraseIterations == 3)
        #expect(passphrase.cacheSecret?.passphraseMemoryBytes == 16 << 20)
        for bad in [#"{"cache_key":"abc"}"#, #"{"cache_key":"\#(String(repeating: "zz", count: 32))"}"#,
                    #"{"cache_key":"\#(testKey)","cache_passphrase":"x"}"#, #"{"cache_passphrase":""}"#,
                    #"{"cache_passphrase":"x","cache_passphrase_iterations":0}"#] {
            #expect(throws: ParleyError.self) { _ = try ClientConfiguration(json: bad) }
        }
    }
}

/// The client: a key error fails `connect`, and `rekeyCache` changes the key of the open file.
@Suite(.serialized) struct CacheEncryptionClientTests {
    private func client(_ server: EngineTestServer, secret: CacheSecret?) throws -> ParleyClient {
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = server.directory + "/cache"
        configuration.cacheSecret = secret
        return try ParleyClient(configuration: configuration)
    }

    @Test func connectFailsWithTheWrongKeyAndRekeyChangesIt() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["MARKERUSERID", "bob"], admin: admin)
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels",
                              body: ["user_ids": ["MARKERUSERID", "bob"], "channel_url": "enc-room", "name": "MARKERCHANNELNAME"],
                              completion: done)
        }
        let token = try #require(tokens["MARKERUSERID"])
        let first = try CacheSecret(keyHex: testKey)
        do {
            let user = try client(server, secret: first)
            defer { user.close() }
            _ = try waitFor { done throws(ParleyError) in try user.connect(userID: "MARKERUSERID", sessionToken: token, completion: done) }
            _ = try waitFor { done throws(ParleyError) in
                _ = try user.sendUserMessage(channelURL: "enc-room", params: ["message": "ZEBRAMARKERTEXT MARKERSEARCHWORD"], completion: done)
                return 0
            }
            #expect(try user.cachedMessages(channelURL: "enc-room").contains("ZEBRAMARKERTEXT"))
            let directory = server.directory + "/cache/" + URLEncoding.percentEncode(String(server.url.dropFirst("http://".count)))
            #expect(markersFound(in: directory) == [])
            let second = try CacheSecret(passphrase: "MARKERPENDINGTEXT passphrase", iterations: 1, memoryBytes: 8 << 20)
            try user.rekeyCache(secret: second)
            #expect(try user.cachedMessages(channelURL: "enc-room").contains("ZEBRAMARKERTEXT"))
            #expect(markersFound(in: directory) == [])
            try user.rekeyCache(json: #"{"cache_key":"\#(otherKey)"}"#)
            #expect(try user.cachedMessages(channelURL: "enc-room").contains("ZEBRAMARKERTEXT"))
            user.disconnect()
        }
        for secret in [first, nil] {
            let user = try client(server, secret: secret)
            defer { user.close() }
            #expect {
                _ = try waitFor { done throws(ParleyError) in try user.connect(userID: "MARKERUSERID", sessionToken: token, completion: done) }
            } throws: { error in
                (error as? ParleyError)?.code == .cacheKey
            }
        }
        let user = try client(server, secret: try CacheSecret(keyHex: otherKey))
        defer { user.close() }
        _ = try waitFor { done throws(ParleyError) in try user.connect(userID: "MARKERUSERID", sessionToken: token, completion: done) }
        #expect(try user.cachedMessages(channelURL: "enc-room").contains("ZEBRAMARKERTEXT"))
    }
}
