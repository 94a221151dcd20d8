import Foundation

/// Makes the writer's commits durable on a thread of its own, so that the write lock is not
/// held across an fsync. The writer's connection runs with `synchronous=NORMAL`, which in
/// WAL mode does not sync at COMMIT: it only appends the transaction to the WAL (in the
/// page cache). (It does sync the WAL's new header when the WAL starts over after a full
/// checkpoint, before old frames are overwritten.) Each commit takes a number
/// before it starts (`beginCommit`); this thread then `fdatasync`s the WAL file, and one
/// sync covers every commit appended before it began. Nothing is answered or shown before
/// its commit is durable:
/// - a writer answers (and hands its events to the hub) only after `durable(number)`;
/// - a reader's snapshot may hold commits not yet synced, so a read waits, after its
///   transaction, for every commit that had begun by then (`durableThroughBegun`).
/// The next commit group meanwhile runs and appends behind the one being synced; a power
/// loss takes only commits not yet synced, none of which was answered or shown.
/// Checkpoints run on the checkpointer's connection (`synchronous=FULL`: it syncs the WAL
/// before copying it and the database file after), never with the writer's settings.
/// If a sync fails, what the page cache held may be lost, so every commit from then on
/// fails too (the process must restart and let SQLite recover the WAL from the disk).
final class WALSyncer: @unchecked Sendable {
    private let walPath: String
    /// The WAL file, opened by the syncing thread at its first sync.
    private var descriptor: Int32 = -1
    /// The WAL's directory was synced once (its entry for the file SQLite may just have made).
    private var directorySynced = false
    private let condition = NSCondition()
    // Guarded by `condition`. Commits are numbered in the order they begin, and the writer
    // runs them one at a time, so every commit up to `requested` has finished appending.
    private var begun: UInt64 = 0
    private var requested: UInt64 = 0
    private var synced: UInt64 = 0
    private var failure: StorageError? = nil
    private var waiters: [(number: UInt64, waiter: CheckedContinuation<Void, any Error>)] = []
    /// Tests only (`PARLEY_TEST_HOOKS=1` with `PARLEY_TEST_WAL_SYNC_DELAY_MS`): each sync
    /// takes this much longer, so that a test can see who waits for it.
    private let testDelayMicroseconds: UInt32

    /// `walPath`: the WAL file SQLite uses (`SQLiteConnection.walPath`).
    init(walPath: String) {
        self.walPath = walPath
        let environment = ProcessInfo.processInfo.environment
        let delay = environment["PARLEY_TEST_HOOKS"] == "1"
            ? environment["PARLEY_TEST_WAL_SYNC_DELAY_MS"].flatMap { UInt32($0) } ?? 0 : 0
        testDelayMicroseconds = min(delay, 10_000) * 1_000
        let thread = Thread { [self] in run() }
        thread.name = "parley-wal-sync"
        thread.start()
    }

    /// The writer, just before a COMMIT: from here on readers may see it. Throws once a sync
    /// has failed.
    func beginCommit() throws -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        if let failure { throw failure }
        begun += 1
        return begun
    }

    /// The writer, once the COMMIT returned (whether or not it succeeded: a failed one
    /// appended nothing, and its number is passed by the next sync).
    func requestSync(through number: UInt64) {
        condition.lock()
        requested = max(requested, number)
        condition.signal()
        condition.unlock()
    }

    /// Every commit that has begun so far (what a snapshot taken before now may hold).
    var visibleThrough: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return begun
    }

    /// Returns once every commit begun so far (what a snapshot taken before now may hold)
    /// is on the disk; throws if a sync failed first.
    func durableThroughBegun() async throws {
        if let pending = lastBegunIfUnsynced() { try await durable(pending) }
    }

    /// The last commit begun, unless it is synced already.
    private func lastBegunIfUnsynced() -> UInt64? {
        condition.lock()
        defer { condition.unlock() }
        return synced >= begun ? nil : begun
    }

    /// Returns once commits up to `number` are on the disk; throws if a sync failed first.
    func durable(_ number: UInt64) async throws {
        if try alreadyDurable(number) { return }
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            condition.lock()
            if synced >= number {
                condition.unlock()
                waiter.resume()
            } else if let failure {
                condition.unlock()
                waiter.resume(throwing: failure)
            } else {
                // Only the writer asks for syncs, once its COMMIT has returned: a sync begun
                // while a COMMIT still appends would not cover it. Every commit begun is
                // followed by that request, so a reader waiting for one is woken by it.
                waiters.append((number, waiter))
                condition.unlock()
            }
        }
    }

    private func alreadyDurable(_ number: UInt64) throws -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if synced >= number { return true }
        if let failure { throw failure }
        return false
    }

    private func run() {
        while true {
            condition.lock()
            while requested <= synced || failure != nil { condition.wait() }
            let target = requested
            condition.unlock()
            if testDelayMicroseconds > 0 { usleep(testDelayMicroseconds) }
            let error = syncWAL()
            condition.lock()
            if let error {
                failure = error
            } else {
                synced = target
            }
            var ready: [CheckedContinuation<Void, any Error>] = []
            var stillWaiting: [(number: UInt64, waiter: CheckedContinuation<Void, any Error>)] = []
            for entry in waiters {
                if error != nil || entry.number <= synced { ready.append(entry.waiter) } else { stillWaiting.append(entry) }
            }
            waiters = stillWaiting
            condition.unlock()
            for waiter in ready {
                if let error { waiter.resume(throwing: error) } else { waiter.resume() }
            }
        }
    }

    /// `fdatasync` of the WAL file (and once of its directory). The descriptor is opened
    /// again if the file it names was removed (SQLite removes the WAL only when its last
    /// connection closes). A WAL missing after a commit is an error: the commit is nowhere
    /// this thread can sync.
    private func syncWAL() -> StorageError? {
        var status = stat()
        if descriptor >= 0, fstat(descriptor, &status) == 0, status.st_nlink == 0 {
            close(descriptor)
            descriptor = -1
        }
        if descriptor < 0 {
            descriptor = open(walPath, O_RDONLY | O_CLOEXEC)
            if descriptor < 0 { return StorageError("sqlite: cannot open the WAL \(walPath) to sync it: errno \(errno)") }
        }
        while fdatasync(descriptor) != 0 {
            if errno == EINTR { continue }
            return StorageError("sqlite: the WAL could not be written to the disk (fdatasync: errno \(errno)); restart the server")
        }
        if !directorySynced {
            let slash = walPath.lastIndex(of: "/")
            let directory = slash.map { $0 == walPath.startIndex ? "/" : String(walPath[..<$0]) } ?? "."
            let handle = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard handle >= 0 else { return StorageError("sqlite: cannot open \(directory) to sync it: errno \(errno)") }
            defer { close(handle) }
            // As PostgreSQL does: a file system that cannot sync a directory says EINVAL.
            if fsync(handle) != 0, errno != EINVAL {
                return StorageError("sqlite: the WAL's directory could not be written to the disk (fsync: errno \(errno)); restart the server")
            }
            directorySynced = true
        }
        return nil
    }
}
