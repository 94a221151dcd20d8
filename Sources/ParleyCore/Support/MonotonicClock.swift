import Glibc

/// CLOCK_MONOTONIC in nanoseconds: durations that a change of the wall clock cannot bend.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}
