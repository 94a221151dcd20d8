import CParleyABI
import Glibc
import ParleyCore

// include/parley/common.h: the version, status names, the retry rule and freeing.

@_cdecl("parley_version")
public func exportVersion() -> UnsafePointer<CChar> { staticStrings.pointer(for: ParleyVersion.string) }

@_cdecl("parley_error_name")
public func exportErrorName(_ code: Int32) -> UnsafePointer<CChar> {
    if code == 0 { return staticStrings.pointer(for: "ok") }
    return staticStrings.pointer(for: ParleyErrorCode(rawValue: code)?.name ?? "unknown")
}

@_cdecl("parley_error_is_retryable")
public func exportErrorIsRetryable(_ error: UnsafePointer<parley_error>?) -> Int32 {
    guard let error, let code = ParleyErrorCode(rawValue: error.pointee.code) else { return 0 }
    return ParleyError.isRetryable(code: code, httpStatus: Int(error.pointee.http_status)) ? 1 : 0
}

@_cdecl("parley_free")
public func exportFree(_ pointer: UnsafeMutableRawPointer?) { free(pointer) }

func ownedCString(_ text: String) throws(ParleyError) -> UnsafeMutablePointer<CChar> {
    guard let copy = strdup(text) else { throw ParleyError(.noMemory, "out of memory copying a result") }
    return copy
}

/// A malloc'ed, NUL-terminated copy of UTF-8 `bytes` for the caller to `parley_free`.
func ownedCString(bytes: [UInt8]) throws(ParleyError) -> UnsafeMutablePointer<CChar> {
    guard let copy = malloc(bytes.count + 1)?.assumingMemoryBound(to: CChar.self) else {
        throw ParleyError(.noMemory, "out of memory copying a result")
    }
    bytes.withUnsafeBytes { source in
        if let base = source.baseAddress { memcpy(copy, base, source.count) }
    }
    copy[bytes.count] = 0
    return copy
}
