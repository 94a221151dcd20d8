import Glibc
@testable import ParleyCore

/// A new directory under /tmp (mkdtemp) whose name starts with `prefix`.
func temporaryDirectory(prefix: String) throws -> String {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    let made: String? = template.withUnsafeMutableBufferPointer { buffer in
        guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
        return String(cString: base)
    }
    guard let path = made else { throw ParleyError(.io, "mkdtemp failed: errno \(errno)") }
    return path
}

/// Removes a directory made by `temporaryDirectory` with everything in it.
func removeTree(_ path: String) { _ = system("rm -rf '\(path)'") }
