import Glibc
import CParleySystem

/// A pthread mutex with one condition variable. `Synchronization.Mutex` has no
/// condition, and the callback thread and `dispatch`/`destroy` need to wait for queue
/// state changes without spinning.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
    func broadcast() { pthread_cond_broadcast(condition) }
    /// Wakes one waiter: for waiters that are interchangeable (the callback pool's idle workers).
    func signal() { pthread_cond_signal(condition) }

    /// Waits for a broadcast; the lock must be held. Returns false on timeout.
    @discardableResult
    func wait(timeoutMs: Int? = nil) -> Bool {
        guard let timeoutMs else {
            pthread_cond_wait(condition, mutex)
            return true
        }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanos = Int(deadline.tv_nsec) + (timeoutMs % 1000) * 1_000_000
        deadline.tv_sec += timeoutMs / 1000 + nanos / 1_000_000_000
        deadline.tv_nsec = nanos % 1_000_000_000
        return pthread_cond_timedwait(condition, mutex, &deadline) == 0
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// Starts a detached-or-joinable pthread running `body`. Threads here are few and long-lived
/// (network, the callback pool's workers), so a plain pthread is enough.
struct NativeThread: @unchecked Sendable {
    let handle: pthread_t

    static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(ParleyError) -> NativeThread {
        final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { raw in
            guard let raw else { return nil }
            let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
            box.body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            throw ParleyError(.internalError, "could not start thread '\(name)': error \(result)")
        }
        // Linux limits thread names to 15 bytes.
        _ = parley_thread_set_name(handle, String(name.prefix(15)))
        return NativeThread(handle: handle)
    }

    var isCurrent: Bool { pthread_equal(handle, pthread_self()) != 0 }

    func join() { pthread_join(handle, nil) }
    func detach() { pthread_detach(handle) }
}
