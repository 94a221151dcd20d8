import CParleyABI
import Glibc
import ParleyCore
import Synchronization

// The machinery every export shares: handle tables, the thread-local error message,
// status mapping, and C string helpers. No business logic lives in this module.

/// Maps opaque C handles to live objects. Handle values come from one process-wide
/// counter and are never reused, so a destroyed or wrong-kind handle is simply not
/// found (PARLEY_E_INVALID_HANDLE) instead of pointing at freed memory.
final class HandleTable<Object: AnyObject & Sendable>: Sendable {
    private let objects = Locked<[UInt: Object]>([:])
    let kind: String

    init(kind: String) { self.kind = kind }

    func insert(_ object: Object) -> OpaquePointer {
        let value = nextHandleValue()
        objects.withLock { $0[value] = object }
        return OpaquePointer(bitPattern: value)!  // never zero: the counter starts at 1
    }

    func lookup(_ handle: OpaquePointer?) throws(ParleyError) -> Object {
        guard let handle else { throw ParleyError(.invalidHandle, "\(kind) handle is NULL") }
        let value = UInt(bitPattern: handle)
        guard let object = objects.withLock({ $0[value] }) else {
            throw ParleyError(.invalidHandle, "not a live \(kind) handle (destroyed, or another kind)")
        }
        return object
    }

    /// Removes and returns the object: the first destroy wins, later ones fail.
    func remove(_ handle: OpaquePointer?) throws(ParleyError) -> Object {
        guard let handle else { throw ParleyError(.invalidHandle, "\(kind) handle is NULL") }
        guard let object = objects.withLock({ $0.removeValue(forKey: UInt(bitPattern: handle)) }) else {
            throw ParleyError(.invalidHandle, "not a live \(kind) handle (destroyed, or another kind)")
        }
        return object
    }
}

private let handleCounter = Atomic<UInt>(0)

/// Handle values step by 16 so they look like aligned pointers to tools (and never 0).
private func nextHandleValue() -> UInt {
    (handleCounter.add(1, ordering: .relaxed).newValue) << 4
}

// MARK: Thread-local last error

/// Key of the thread-local slot holding the last error message (a malloc'd C string,
/// freed when replaced and when the thread exits).
private let lastErrorKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key) { free($0) }
    return key
}()

func setLastError(_ message: String) {
    let old = pthread_getspecific(lastErrorKey)
    pthread_setspecific(lastErrorKey, strdup(message))
    free(old)
}

private nonisolated(unsafe) let emptyCString: UnsafeMutablePointer<CChar> = strdup("")

@_cdecl("parley_last_error_message")
public func exportLastErrorMessage() -> UnsafePointer<CChar> {
    guard let message = pthread_getspecific(lastErrorKey) else { return UnsafePointer(emptyCString) }
    return UnsafePointer(message.assumingMemoryBound(to: CChar.self))
}

/// Runs an export's body and turns a thrown error into its status code + message.
@inline(__always)
func withStatus(_ body: () throws(ParleyError) -> Void) -> Int32 {
    do {
        try body()
        return PARLEY_OK
    } catch {
        setLastError(error.description)
        return error.code.rawValue
    }
}

// MARK: Strings

func requiredString(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(ParleyError) -> String {
    guard let pointer else { throw .invalidArgument("\(name) is NULL") }
    return try validatedString(pointer, name)
}

/// Copies a C string, refusing invalid UTF-8 rather than silently repairing it.
func validatedString(_ pointer: UnsafePointer<CChar>, _ name: String) throws(ParleyError) -> String {
    let length = strlen(pointer)
    let bytes = UnsafeRawBufferPointer(start: pointer, count: length).bindMemory(to: UInt8.self)
    guard let string = String(validating: bytes, as: UTF8.self) else {
        throw .invalidArgument("\(name) is not valid UTF-8")
    }
    return string
}

/// Parses an optional JSON argument: NULL gives nil, bad JSON PARLEY_E_INVALID_JSON.
func optionalJSON(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(ParleyError) -> JSONValue? {
    guard let pointer else { return nil }
    let text = try validatedString(pointer, name)
    do throws(ParleyError) {
        return try JSONValue.parse(text)
    } catch {
        throw ParleyError(error.code, "\(name): \(error.message)")
    }
}

/// Static C strings for names returned by the library (never freed).
final class StaticCStrings: Sendable {
    private let strings: Locked<[String: UInt]> = Locked([:])

    func pointer(for string: String) -> UnsafePointer<CChar> {
        let address = strings.withLock { table in
            if let existing = table[string] { return existing }
            let copy = UInt(bitPattern: strdup(string))
            table[string] = copy
            return copy
        }
        return UnsafePointer(bitPattern: address)!
    }
}

let staticStrings = StaticCStrings()

// MARK: Callback plumbing

/// A C function pointer with its user data, carried across threads. The application
/// vouches for the thread-safety of its user data by handing it to us.
struct CCallback<Function>: @unchecked Sendable {
    let function: Function
    let userData: UnsafeMutableRawPointer?
}

/// Calls `body` with a borrowed `parley_error` describing `error`.
func withCError<T>(_ error: ParleyError, _ body: (UnsafePointer<parley_error>) -> T) -> T {
    error.message.withCString { message in
        var cError = parley_error(
            code: error.code.rawValue, message: message,
            http_status: Int32(clamping: error.httpStatus), server_code: Int32(clamping: error.serverCode))
        return withUnsafePointer(to: &cError) { body($0) }
    }
}
