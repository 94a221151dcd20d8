import Foundation

/// A mutual-exclusion lock for async code: waiters suspend instead of blocking a thread,
/// and get the lock in the order they asked for it.
final class AsyncLock: @unchecked Sendable {
    private let mutex = NSLock()
    private var held = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var nextWaiter = 0

    func lock() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            if acquireOrQueue(waiter) { waiter.resume() }
        }
    }

    private func acquireOrQueue(_ waiter: CheckedContinuation<Void, Never>) -> Bool {
        mutex.lock()
        defer { mutex.unlock() }
        if held {
            waiters.append(waiter)
            return false
        }
        held = true
        return true
    }

    /// Somebody waits for the lock (a hint: the answer may be out of date at once).
    var hasWaiters: Bool {
        mutex.lock()
        defer { mutex.unlock() }
        return nextWaiter < waiters.count
    }

    /// Hands the lock straight to the first waiter, if any, so nobody can overtake it.
    func unlock() {
        mutex.lock()
        guard nextWaiter < waiters.count else {
            held = false
            waiters.removeAll(keepingCapacity: true)
            nextWaiter = 0
            mutex.unlock()
            return
        }
        let waiter = waiters[nextWaiter]
        nextWaiter += 1
        if nextWaiter > 64 && nextWaiter * 2 > waiters.count {
            waiters.removeFirst(nextWaiter)
            nextWaiter = 0
        }
        mutex.unlock()
        waiter.resume()
    }

    func withLock<T>(_ body: () async throws -> T) async rethrows -> T {
        await lock()
        defer { unlock() }
        return try await body()
    }
}

/// A fixed set of resources lent to one task at a time; borrowers wait their turn.
final class AsyncPool<Resource: Sendable>: @unchecked Sendable {
    private let mutex = NSLock()
    private var idle: [Resource]
    private var waiters: [CheckedContinuation<Resource, Never>] = []

    init(_ resources: [Resource]) { idle = resources }

    func borrow() async -> Resource {
        if let resource = takeOne() { return resource }
        return await withCheckedContinuation { (waiter: CheckedContinuation<Resource, Never>) in
            if let resource = takeOneOrQueue(waiter) { waiter.resume(returning: resource) }
        }
    }

    private func takeOne() -> Resource? {
        mutex.lock()
        defer { mutex.unlock() }
        return idle.popLast()
    }

    private func takeOneOrQueue(_ waiter: CheckedContinuation<Resource, Never>) -> Resource? {
        mutex.lock()
        defer { mutex.unlock() }
        if let resource = idle.popLast() { return resource }
        waiters.append(waiter)
        return nil
    }

    func giveBack(_ resource: Resource) {
        mutex.lock()
        if waiters.isEmpty {
            idle.append(resource)
            mutex.unlock()
            return
        }
        let waiter = waiters.removeFirst()
        mutex.unlock()
        waiter.resume(returning: resource)
    }

    /// The resources not lent out at the moment (for closing them).
    func takeIdle() -> [Resource] {
        mutex.lock()
        defer { mutex.unlock() }
        let all = idle
        idle = []
        return all
    }
}

/// One `AsyncLock` per key, made when first asked for and dropped once nobody holds or waits
/// for it: PostgreSQL writers of one channel queue here rather than on the database's lock,
/// holding no connection while they wait.
final class KeyedAsyncLocks: @unchecked Sendable {
    private let mutex = NSLock()
    private var locks: [String: (lock: AsyncLock, users: Int)] = [:]

    func lock(_ key: String) async {
        let lock: AsyncLock = mutex.withLock {
            let entry = locks[key] ?? (AsyncLock(), 0)
            locks[key] = (entry.lock, entry.users + 1)
            return entry.lock
        }
        await lock.lock()
    }

    /// Someone waits for `key` besides its holder.
    func hasWaiters(_ key: String) -> Bool {
        mutex.withLock { (locks[key]?.users ?? 0) > 1 }
    }

    func unlock(_ key: String) {
        let lock: AsyncLock? = mutex.withLock {
            guard let entry = locks[key] else { return nil }
            if entry.users == 1 { locks.removeValue(forKey: key) } else { locks[key] = (entry.lock, entry.users - 1) }
            return entry.lock
        }
        lock?.unlock()
    }
}
