import Foundation

/// Copies the WAL into the database file on a thread of its own, so that no commit waits
/// for it. SQLite's automatic checkpoint runs inside the commit that takes the WAL past
/// 1,000 pages: under the server's write lock, with every request of the commit group
/// waiting (a send writes about 14 pages, so one commit in 70 carried a checkpoint of
/// about 1,000 page writes and an fsync of the file). Here the writer's commit only reports
/// the WAL's size; from `wakeAt` pages on, this thread runs a PASSIVE checkpoint on its own
/// connection, which waits for no reader and no writer, while commits go on. Should it
/// fall behind (the WAL past `writerChecksAt` pages), the writer waits after its commit
/// for a checkpoint on the same connection, as SQLite would have made it wait. Checkpoints
/// run only here: this connection syncs (`synchronous=FULL`: the WAL before the copy, the
/// database file after it); the writer's commits are synced by WALSyncer.swift.
final class WALCheckpointer: @unchecked Sendable {
    static let wakeAt: Int32 = 1_000
    static let writerChecksAt: Int32 = 10_000

    private let connection: SQLiteConnection
    private let condition = NSCondition()
    /// A checkpoint is wanted (guarded by `condition`).
    private var wanted = false
    /// Held while `connection` checkpoints (its thread, or the writer that fell back on it).
    private let checkpointing = NSLock()

    init(path: String) throws {
        connection = try SQLiteConnection(path: path, readOnly: false)
        try connection.executeScriptNow("PRAGMA synchronous=FULL;")
        let thread = Thread { [self] in run() }
        thread.name = "parley-wal-checkpoint"
        thread.start()
    }

    /// From the writer's commit hook: the WAL now holds `walPages` pages.
    func writerCommitted(walPages: Int32) {
        if walPages >= Self.writerChecksAt {
            checkpointing.withLock { _ = connection.checkpointPassively() }
        } else if walPages >= Self.wakeAt {
            condition.lock()
            wanted = true
            condition.signal()
            condition.unlock()
        }
    }

    private func run() {
        while true {
            condition.lock()
            while !wanted { condition.wait() }
            wanted = false
            condition.unlock()
            checkpointing.withLock { _ = connection.checkpointPassively() }
        }
    }
}
