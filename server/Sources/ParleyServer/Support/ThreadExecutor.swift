import Foundation
import Synchronization

/// A task executor with a thread of its own, which runs its jobs in the order they come.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    /// The thread's pthread id once it runs (0 before).
    private let threadID = Atomic<UInt>(0)

    /// True on the executor's own thread.
    var isCurrent: Bool { threadID.load(ordering: .acquiring) == UInt(pthread_self()) }

    init(name: String) {
        let thread = Thread { [self] in self.run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .releasing)
        var batch: [UnownedJob] = []
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            swap(&batch, &jobs)
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
