import Glibc

/// A value behind a pthread mutex. Used instead of `Synchronization.Mutex`, which on Linux
/// locks with raw futex calls that ThreadSanitizer cannot see (every access it guards would
/// be reported as a race); pthread mutexes are intercepted, so `scripts/sanitize.sh thread`
/// checks the real locking. Uncontended cost is the same (a futex either way).
///
/// Closures must not sit directly in `Value` as a tuple or function type: the generic
/// storage keeps them in another representation than the caller's, so every `withLock`
/// (an `inout` access) wraps each stored closure in two more conversion thunks, forever —
/// calls through it then walk a chain that grows with every access (a client that had
/// delivered 10,000 events spent most of its callback thread there). Put them in a struct.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, the lock held.
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
