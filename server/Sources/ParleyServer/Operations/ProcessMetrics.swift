// The standard process metrics of Prometheus's client libraries (`process_*`), read from
// /proc at each scrape, so that the dashboards made for any exporter show this server too.
import Foundation

enum ProcessMetrics {
    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    private static let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))

    /// The exposition lines; a value /proc does not give (another kernel, a hardened mount)
    /// is left out rather than reported as 0.
    static func exposition() -> [UInt8] {
        var text = ""
        func add(_ name: String, _ type: String, _ help: String, _ value: Double?) {
            guard let value else { return }
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(format(value))\n"
        }
        let stat = statFields()
        let cpuTicks = stat.flatMap { fields in field(fields, 14).flatMap { user in field(fields, 15).map { user + $0 } } }
        add("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            cpuTicks.map { $0 / ticksPerSecond })
        add("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
            stat.flatMap { field($0, 24) }.map { $0 * pageSize })
        add("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", stat.flatMap { field($0, 23) })
        let bootTime = self.bootTime()
        add("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
            stat.flatMap { field($0, 22) }.flatMap { ticks in bootTime.map { $0 + ticks / ticksPerSecond } })
        add("process_open_fds", "gauge", "Number of open file descriptors.", openDescriptors())
        add("process_max_fds", "gauge", "Maximum number of open file descriptors.", maxDescriptors())
        return Array(text.utf8)
    }

    /// Whole seconds print without a fraction; others with up to 6 decimals (Prometheus reads both).
    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(format: "%.6f", value)
    }

    private static func read(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// /proc/self/stat's fields from the third on (after the command name, which may hold
    /// spaces and parentheses: it ends at the last ')'), so that field N of proc(5) is at N - 3.
    private static func statFields() -> [Substring]? {
        guard let stat = read("/proc/self/stat"), let end = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: end)...].split(separator: " ")
    }

    /// Field `number` of /proc/self/stat as proc(5) numbers them (from 1).
    private static func field(_ fields: [Substring], _ number: Int) -> Double? {
        let index = number - 3
        guard fields.indices.contains(index) else { return nil }
        return Double(fields[index].trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// When the machine booted, in seconds since 1970 (/proc/stat's `btime`).
    private static func bootTime() -> Double? {
        guard let stat = read("/proc/stat") else { return nil }
        for line in stat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    private static func openDescriptors() -> Double? {
        // The listing's own descriptor is counted too, as every client library's is.
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map { Double($0.count) }
    }

    private static func maxDescriptors() -> Double? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        // RLIM_INFINITY is all ones (Glibc's macro does not import as a value Swift can compare).
        return limit.rlim_cur == rlim_t.max ? nil : Double(limit.rlim_cur)
    }
}
