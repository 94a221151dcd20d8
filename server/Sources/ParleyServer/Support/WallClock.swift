import Foundation

/// Milliseconds since the Unix epoch, as the protocol's timestamps count.
func nowMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}
