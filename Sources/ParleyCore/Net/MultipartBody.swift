import CCurl
import Glibc

/// One part of a `multipart/form-data` request body (`HTTPRequest.multipart`).
///
/// Text fields go on the wire before file and byte parts, each group in the order given,
/// so that a server reading the body as a stream knows the fields before the file data.
public enum HTTPBodyPart: Sendable, Equatable {
    /// A text field: `Content-Disposition: form-data; name="…"`, no content type.
    case field(name: String, value: String)
    /// A local file, read while the request is sent. `fileName` nil: the last path
    /// component. `contentType` nil: guessed from the file name's extension for common
    /// types, otherwise `application/octet-stream`. A file that cannot be opened or is not
    /// a regular file fails the request with `.io` before anything is sent.
    case file(name: String, path: String, fileName: String?, contentType: String?)
    /// Bytes held in memory. With a `fileName` it is sent like a file (content type
    /// defaulted as for `.file`); without one, as a field with the given content type, if any.
    case bytes(name: String, data: [UInt8], fileName: String?, contentType: String?)

    public var name: String {
        switch self {
        case .field(let name, _), .file(let name, _, _, _), .bytes(let name, _, _, _): name
        }
    }

    var isField: Bool {
        if case .field = self { return true }
        return false
    }
}

extension [HTTPBodyPart] {
    /// A JSON object's members as form fields, in key order (nulls left out): strings as they
    /// are, booleans as `true`/`false`, anything else (lists, numbers) as JSON text, which the
    /// server reads.
    static func formFields(_ fields: [String: JSONValue]) -> [HTTPBodyPart] {
        fields.keys.sorted().compactMap { key in
            guard let value = fields[key], value != .null else { return nil }
            let text: String =
                switch value {
                case .string(let string): string
                case .bool(let flag): flag ? "true" : "false"
                default: value.canonicalText
                }
            return .field(name: key, value: text)
        }
    }
}

/// Part validation and the curl mime structure for one request. The checks that need
/// no I/O run on the submitting thread; opening files and building the mime structure run
/// on the network thread when the transfer starts.
enum MultipartBody {
    /// A problem in the parts that no I/O is needed to see.
    static func validationError(of parts: [HTTPBodyPart]) -> ParleyError? {
        if parts.isEmpty { return .invalidArgument("a multipart body needs at least one part") }
        for part in parts {
            if part.name.isEmpty { return .invalidArgument("a multipart part has an empty name") }
            if part.name.utf8.contains(0) { return .invalidArgument("the multipart part name '\(part.name)' contains NUL") }
            switch part {
            case .field:
                break
            case .file(_, let path, let fileName, let contentType):
                if path.isEmpty || path.utf8.contains(0) {
                    return .invalidArgument("the file path of part '\(part.name)' is empty or contains NUL")
                }
                if let error = check(fileName: fileName, contentType: contentType, part: part.name) { return error }
            case .bytes(_, _, let fileName, let contentType):
                if let error = check(fileName: fileName, contentType: contentType, part: part.name) { return error }
            }
        }
        return nil
    }

    private static func check(fileName: String?, contentType: String?, part: String) -> ParleyError? {
        if let fileName, fileName.isEmpty || fileName.utf8.contains(0) {
            return .invalidArgument("the file name of part '\(part)' is empty or contains NUL")
        }
        // It becomes a header line of its own: no control characters that could end it.
        if let contentType, contentType.isEmpty || contentType.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            return .invalidArgument("the content type of part '\(part)' is empty or contains control characters")
        }
        return nil
    }

    /// Builds the mime structure on `easy`: fields first, then the other parts. On success
    /// the caller owns the mime handle (free it with `curl_mime_free` after the easy
    /// handle is cleaned up); the returned sources report read failures during the upload.
    static func build(
        _ parts: [HTTPBodyPart], on easy: UnsafeMutableRawPointer
    ) -> Result<(OpaquePointer, [UploadFileSource]), ParleyError> {
        guard let mime = curl_mime_init(easy) else {
            return .failure(ParleyError(.noMemory, "curl_mime_init failed"))
        }
        var sources: [UploadFileSource] = []
        let ordered = parts.filter(\.isField) + parts.filter { !$0.isField }
        for part in ordered {
            if let error = add(part, to: mime, sources: &sources) {
                // Frees the parts added so far, and closes their files through curl's free callbacks.
                curl_mime_free(mime)
                return .failure(error)
            }
        }
        return .success((mime, sources))
    }

    private static func add(_ part: HTTPBodyPart, to mime: OpaquePointer, sources: inout [UploadFileSource]) -> ParleyError? {
        guard let handle = curl_mime_addpart(mime) else {
            return ParleyError(.noMemory, "curl_mime_addpart failed")
        }
        var failure: ParleyError?
        func check(_ code: CURLcode, _ what: String) {
            if code != CURLE_OK, failure == nil {
                failure = parleyError(forCurlCode: code, detail: "cannot set the \(what) of part '\(part.name)'")
            }
        }
        check(curl_mime_name(handle, part.name), "name")
        switch part {
        case .field(_, let value):
            check(setData(Array(value.utf8), on: handle), "value")
        case .bytes(_, let data, let fileName, let contentType):
            check(setData(data, on: handle), "data")
            if let fileName {
                check(curl_mime_filename(handle, fileName), "file name")
                check(curl_mime_type(handle, contentType ?? guessedContentType(forFileName: fileName)), "content type")
            } else if let contentType {
                check(curl_mime_type(handle, contentType), "content type")
            }
        case .file(_, let path, let fileName, let contentType):
            let source: UploadFileSource
            switch UploadFileSource.open(path: path) {
            case .success(let opened): source = opened
            case .failure(let error): return error
            }
            sources.append(source)
            check(source.attach(to: handle), "file data")
            let name = fileName ?? lastPathComponent(path)
            check(curl_mime_filename(handle, name), "file name")
            check(curl_mime_type(handle, contentType ?? guessedContentType(forFileName: name)), "content type")
        }
        return failure
    }

    /// curl copies the bytes, so the array need not outlive the call.
    private static func setData(_ data: [UInt8], on part: OpaquePointer) -> CURLcode {
        data.withUnsafeBufferPointer { buffer in
            // A zero size with a non-NULL pointer: curl would otherwise take the pointer as a C string.
            let empty: CChar = 0
            guard let base = buffer.baseAddress, !buffer.isEmpty else {
                return withUnsafePointer(to: empty) { curl_mime_data(part, $0, 0) }
            }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                curl_mime_data(part, $0, buffer.count)
            }
        }
    }

    static func lastPathComponent(_ path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.last == "/" { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return String(trimmed) }
        let component = trimmed[trimmed.index(after: slash)...]
        return component.isEmpty ? String(trimmed) : String(component)
    }

    /// A content type for common chat attachments, so that images and media arrive typed
    /// as such when the caller did not say; anything else is opaque bytes.
    static func guessedContentType(forFileName fileName: String) -> String {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else {
            return "application/octet-stream"
        }
        switch asciiLowercased(String(fileName[fileName.index(after: dot)...])) {
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "heic": return "image/heic"
        case "svg": return "image/svg+xml"
        case "mp4": return "video/mp4"
        case "mov": return "video/quicktime"
        case "webm": return "video/webm"
        case "mp3": return "audio/mpeg"
        case "m4a": return "audio/mp4"
        case "ogg": return "audio/ogg"
        case "wav": return "audio/wav"
        case "pdf": return "application/pdf"
        case "zip": return "application/zip"
        case "json": return "application/json"
        case "txt": return "text/plain"
        case "csv": return "text/csv"
        case "htm", "html": return "text/html"
        default: return "application/octet-stream"
        }
    }
}

/// An opened file whose bytes curl reads while sending a `.file` part.
///
/// The file is opened and measured once, before the transfer starts, and read from that
/// descriptor: the bytes sent are those of the file that was checked, and the size in the
/// `Content-Length` is the size it had then. If the file shrinks meanwhile, the transfer
/// fails with `.io` instead of sending a short body. Used on the network thread only.
final class UploadFileSource: @unchecked Sendable {
    let path: String
    let size: Int64
    private var descriptor: Int32
    private var offset: Int64 = 0
    /// Why reading failed during the transfer; the transfer's error then.
    private(set) var failure: ParleyError?

    private init(path: String, descriptor: Int32, size: Int64) {
        self.path = path
        self.descriptor = descriptor
        self.size = size
    }

    deinit { closeFile() }

    static func open(path: String) -> Result<UploadFileSource, ParleyError> {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            return .failure(ParleyError(.io, "cannot open the file to upload '\(path)': \(errnoText())"))
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let error = ParleyError(.io, "cannot inspect the file to upload '\(path)': \(errnoText())")
            Glibc.close(descriptor)
            return .failure(error)
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(descriptor)
            return .failure(ParleyError(.io, "the file to upload '\(path)' is not a regular file"))
        }
        return .success(UploadFileSource(path: path, descriptor: descriptor, size: Int64(status.st_size)))
    }

    /// Hands this source to curl as the part's data; curl's free callback drops the
    /// reference it holds when the mime structure is freed.
    func attach(to part: OpaquePointer) -> CURLcode {
        let context = Unmanaged.passRetained(self).toOpaque()
        let code = curl_mime_data_cb(part, curl_off_t(size), uploadReadCallback, uploadSeekCallback, uploadFreeCallback, context)
        // curl only fails before taking the callbacks (a NULL part), so the reference is still ours.
        if code != CURLE_OK { Unmanaged<UploadFileSource>.fromOpaque(context).release() }
        return code
    }

    fileprivate func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        let remaining = size - offset
        guard remaining > 0 else { return 0 }
        let wanted = Int(min(Int64(capacity), remaining))
        while true {
            let count = pread(descriptor, buffer, wanted, off_t(offset))
            if count > 0 {
                offset += Int64(count)
                return count
            }
            if count < 0 && errno == EINTR { continue }
            failure = count < 0
                ? ParleyError(.io, "cannot read the file to upload '\(path)': \(errnoText())")
                : ParleyError(.io, "the file to upload '\(path)' shrank below \(size) bytes while it was sent")
            return Int(CURL_READFUNC_ABORT)
        }
    }

    /// curl rewinds a part to resend it (a retried connection, an auth round).
    fileprivate func seek(to newOffset: Int64, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, newOffset >= 0, newOffset <= size else { return CURL_SEEKFUNC_CANTSEEK }
        offset = newOffset
        return CURL_SEEKFUNC_OK
    }

    fileprivate func closeFile() {
        if descriptor >= 0 {
            Glibc.close(descriptor)
            descriptor = -1
        }
    }
}

private func errnoText() -> String {
    String(cString: strerror(errno))
}

private let uploadReadCallback: curl_read_callback = { buffer, size, count, context in
    guard let buffer, let context else { return Int(CURL_READFUNC_ABORT) }
    let source = Unmanaged<UploadFileSource>.fromOpaque(context).takeUnretainedValue()
    return source.read(into: buffer, capacity: size * count)
}

private let uploadSeekCallback: curl_seek_callback = { context, offset, origin in
    guard let context else { return CURL_SEEKFUNC_FAIL }
    let source = Unmanaged<UploadFileSource>.fromOpaque(context).takeUnretainedValue()
    return source.seek(to: Int64(offset), origin: origin)
}

private let uploadFreeCallback: curl_free_callback = { context in
    guard let context else { return }
    let source = Unmanaged<UploadFileSource>.fromOpaque(context).takeRetainedValue()
    // The mime structure is gone, so nothing reads any more: close now rather than when
    // the transfer that keeps the source for its `failure` is released.
    source.closeFile()
}
