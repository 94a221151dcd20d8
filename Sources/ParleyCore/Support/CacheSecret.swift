import CParleyCipher

/// The secret that encrypts the cache at rest: a 32-byte key, or a passphrase from which
/// Argon2id derives one (with the salt and limits kept in the cache file's header).
///
/// The bytes live in memory of their own, zeroed (sodium_memzero) when the secret goes;
/// they are never logged or written anywhere (`description` names the kind only). A key
/// derived from them exists only while a cache file is being opened or rekeyed.
public final class CacheSecret: @unchecked Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case key
        case passphrase
    }

    public static let keyBytes = Int(PARLEY_CIPHER_KEY_BYTES)
    /// Argon2id's defaults (libsodium's "interactive" limits: about 0.1–0.3 s on one core).
    public static let defaultPassphraseIterations: UInt64 = 2
    public static let defaultPassphraseMemoryBytes: UInt64 = 64 << 20
    /// The limits `cache_passphrase_iterations` and `cache_passphrase_memory_mb` accept.
    public static let iterationRange: ClosedRange<UInt64> = 1...100
    public static let memoryRange: ClosedRange<UInt64> = (8 << 20)...(4096 << 20)

    public let kind: Kind
    /// Argon2id's limits for a file this secret creates or rekeys; a file keeps the limits
    /// it was written with.
    public let passphraseIterations: UInt64
    public let passphraseMemoryBytes: UInt64
    // Immutable after init; read only through `withBytes`.
    private let storage: UnsafeMutableRawBufferPointer

    /// A key given as 64 hexadecimal digits.
    public init(keyHex: String) throws(ParleyError) {
        var digits = Array(keyHex.utf8)
        defer { digits.withUnsafeMutableBytes { parley_cipher_zero($0.baseAddress, $0.count) } }
        guard digits.count == Self.keyBytes * 2 else {
            throw .invalidArgument("config.cache_key: expected \(Self.keyBytes * 2) hexadecimal digits (\(Self.keyBytes) bytes), got \(digits.count) characters")
        }
        storage = .allocate(byteCount: Self.keyBytes, alignment: 16)
        kind = .key
        passphraseIterations = Self.defaultPassphraseIterations
        passphraseMemoryBytes = Self.defaultPassphraseMemoryBytes
        for index in 0..<Self.keyBytes {
            guard let high = Self.hexValue(digits[2 * index]), let low = Self.hexValue(digits[2 * index + 1]) else {
                parley_cipher_zero(storage.baseAddress, storage.count)
                throw .invalidArgument("config.cache_key: expected hexadecimal digits only (0-9, a-f)")
            }
            storage[index] = high << 4 | low
        }
    }

    /// A passphrase (any non-empty text) and the Argon2id limits for files it creates.
    public init(passphrase: String, iterations: UInt64 = CacheSecret.defaultPassphraseIterations,
                memoryBytes: UInt64 = CacheSecret.defaultPassphraseMemoryBytes) throws(ParleyError) {
        var bytes = Array(passphrase.utf8)
        defer { bytes.withUnsafeMutableBytes { parley_cipher_zero($0.baseAddress, $0.count) } }
        guard !bytes.isEmpty else { throw .invalidArgument("config.cache_passphrase: must not be empty") }
        storage = .allocate(byteCount: bytes.count, alignment: 16)
        storage.copyBytes(from: bytes)
        kind = .passphrase
        passphraseIterations = iterations
        passphraseMemoryBytes = memoryBytes
    }

    deinit {
        parley_cipher_zero(storage.baseAddress, storage.count)
        storage.deallocate()
    }

    public var description: String { kind == .key ? "CacheSecret(key)" : "CacheSecret(passphrase)" }

    public static func == (lhs: CacheSecret, rhs: CacheSecret) -> Bool {
        lhs === rhs || (lhs.kind == rhs.kind && lhs.storage.count == rhs.storage.count
            && lhs.passphraseIterations == rhs.passphraseIterations && lhs.passphraseMemoryBytes == rhs.passphraseMemoryBytes
            && lhs.storage.elementsEqual(rhs.storage))
    }

    /// The key derivation for a file this secret creates: a fresh salt for a passphrase.
    func freshDerivation() -> parley_cipher_kdf {
        var kdf = parley_cipher_kdf()
        guard kind == .passphrase else { return kdf }
        kdf.algorithm = UInt32(PARLEY_CIPHER_KDF_ARGON2ID)
        kdf.opslimit = passphraseIterations
        kdf.memlimit = passphraseMemoryBytes
        withUnsafeMutableBytes(of: &kdf.salt) { parley_cipher_random($0.baseAddress, $0.count) }
        return kdf
    }

    /// Runs `body` with the key this secret gives under `kdf` (a file's derivation), zeroed
    /// afterwards. A passphrase with a key derivation that is not Argon2id, or a key with one
    /// that is, does not fit the file: `.cacheKey`.
    func withKey<T>(_ kdf: parley_cipher_kdf, _ body: (UnsafePointer<UInt8>) throws(ParleyError) -> T) throws(ParleyError) -> T {
        let key = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: Self.keyBytes)
        defer {
            parley_cipher_zero(key.baseAddress, Self.keyBytes)
            key.deallocate()
        }
        switch kind {
        case .key:
            guard kdf.algorithm == UInt32(PARLEY_CIPHER_KDF_NONE) else {
                throw ParleyError(.cacheKey, "the cache file was encrypted with a passphrase; a key (cache_key) cannot open it")
            }
            _ = key.initialize(from: storage.bindMemory(to: UInt8.self))
        case .passphrase:
            guard kdf.algorithm == UInt32(PARLEY_CIPHER_KDF_ARGON2ID) else {
                throw ParleyError(.cacheKey, "the cache file was encrypted with a key; a passphrase (cache_passphrase) cannot open it")
            }
            // Limits beyond what the configuration allows would make opening take minutes or all memory.
            guard Self.iterationRange.contains(kdf.opslimit), Self.memoryRange.contains(kdf.memlimit) else {
                throw ParleyError(.cacheKey, "the cache file asks for Argon2id limits out of range (\(kdf.opslimit) iterations, \(kdf.memlimit >> 20) MiB)")
            }
            var derivation = kdf
            let derived = storage.withMemoryRebound(to: CChar.self) { text in
                parley_cipher_derive_key(key.baseAddress, text.baseAddress, text.count, &derivation)
            }
            guard derived == 0 else {
                throw ParleyError(.cacheKey, "the passphrase's key could not be derived (Argon2id with \(kdf.opslimit) iterations and \(kdf.memlimit >> 20) MiB: out of memory, or limits out of range)")
            }
        }
        return try body(UnsafePointer(key.baseAddress!))
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
