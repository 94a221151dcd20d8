import Glibc

/// The names of the process's threads, as /proc/self/task/*/comm gives them. Tests count
/// threads by name: the other tests of the process run beside them and start threads of their
/// own (Dispatch's among them), which a count of every thread would include.
func processThreadNames() -> [String] {
    guard let directory = opendir("/proc/self/task") else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let task = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        // A thread that ended since readdir has no comm file any more: skipped.
        guard task.first != ".", let file = fopen("/proc/self/task/\(task)/comm", "r") else { continue }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 64)
        if fgets(&buffer, Int32(buffer.count), file) != nil {
            names.append(String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
    return names
}
