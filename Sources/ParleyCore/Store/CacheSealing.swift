import CParleyCipher
import CSQLite
import Glibc

// Encryption at rest of a cache file (Sources/CParleyCipher): before SQLite opens the file,
// the secret is checked against the file's header and its key registered with the sealing
// VFS for the file's path; every connection to that path (the writer, the reader, a
// salvage or check) then goes through the VFS. A key that does not open the file, or no key
// for a sealed file, is `.cacheKey` and nothing is touched: such a file is never "damaged".

/// One registration of a key with the sealing VFS, for one path; `release` ends it (once).
/// Sendable so that a thread may hold one; only its one holder releases it.
final class SealedFileKey: @unchecked Sendable {
    let path: String
    private var registered = true

    fileprivate init(path: String) { self.path = path }

    /// A registration of the key of `path` for `other` as well (a file moved aside), or of
    /// `path` again; nil when `path` has no key.
    static func sharing(_ path: String, with other: String) -> SealedFileKey? {
        parley_cipher_alias(path, other) == 0 ? SealedFileKey(path: other) : nil
    }

    func release() {
        guard registered else { return }
        registered = false
        parley_cipher_detach(path)
    }

    deinit { release() }
}

enum CacheSealing {
    static let vfsName = PARLEY_CIPHER_VFS_NAME
    static let reserveBytes = Int32(PARLEY_CIPHER_RESERVE_BYTES)

    enum FileKind {
        case empty, plain, sealed(parley_cipher_kdf), sealedDamaged, other
    }

    /// Whether connections to `path` go through the sealing VFS.
    static func isSealed(path: String) -> Bool {
        parley_cipher_has_key(path) == 1
    }

    static func kind(of path: String) throws(ParleyError) -> FileKind {
        var kdf = parley_cipher_kdf()
        let kind = parley_cipher_inspect(path, &kdf)
        switch kind {
        case PARLEY_CIPHER_FILE_EMPTY: return .empty
        case PARLEY_CIPHER_FILE_PLAIN: return .plain
        case PARLEY_CIPHER_FILE_SEALED: return .sealed(kdf)
        case PARLEY_CIPHER_FILE_SEALED_DAMAGED: return .sealedDamaged
        case PARLEY_CIPHER_FILE_OTHER: return .other
        default: throw ParleyError(.cache, "reading \(path): \(String(cString: strerror(-kind)))")
        }
    }

    /// Registers the key of `secret` for the cache file at `path` after checking that it
    /// opens the file; with no secret, refuses a sealed file. A plain file is encrypted
    /// first (`rewrite`). Returns the registration (nil without a secret).
    static func register(path: String, secret: CacheSecret?) throws(ParleyError) -> SealedFileKey? {
        parley_cipher_register_vfs()
        let kind = try kind(of: path)
        guard let secret else {
            switch kind {
            case .sealed, .sealedDamaged:
                throw ParleyError(.cacheKey, "the cache file \(path) is encrypted: configure cache_key or cache_passphrase to open it")
            default:
                return nil
            }
        }
        switch kind {
        case .sealed(let kdf):
            return try attach(path: path, secret: secret, kdf: kdf, requireMatch: true)
        case .plain:
            do throws(ParleyError) {
                try rewrite(path: path, from: nil, to: secret)
            } catch {
                // A damaged plain file cannot be copied: the recovery replaces it (sealed).
                guard SQLiteDatabase.quickCheck(path: path) != nil else { throw error }
                return try attach(path: path, secret: secret, kdf: secret.freshDerivation(), requireMatch: false)
            }
            return try register(path: path, secret: secret)
        case .empty, .other, .sealedDamaged:
            // A new file, or one the recovery replaces: the fresh file gets this key.
            return try attach(path: path, secret: secret, kdf: secret.freshDerivation(), requireMatch: false)
        }
    }

    private static func attach(path: String, secret: CacheSecret, kdf: parley_cipher_kdf, requireMatch: Bool)
        throws(ParleyError) -> SealedFileKey
    {
        var derivation = kdf
        try secret.withKey(kdf) { key throws(ParleyError) in
            if requireMatch {
                let opens = parley_cipher_key_opens(path, key)
                guard opens == 1 else {
                    if opens == 0 {
                        throw ParleyError(.cacheKey, "the \(secret.kind == .key ? "key" : "passphrase") given does not open the encrypted cache file \(path)")
                    }
                    throw ParleyError(.cache, "reading the header of \(path): \(opens == -1000 ? "damaged" : String(cString: strerror(-opens)))")
                }
            }
            guard parley_cipher_attach(path, key, &derivation) == 0 else {
                throw ParleyError(.noMemory, "registering the cache key of \(path)")
            }
        }
        return SealedFileKey(path: path)
    }

    /// Rewrites the cache file at `path` (closed by its owner) under another key: `from`
    /// opens it as it is (nil: plain), `to` seals the copy (nil: plain). The copy is written
    /// beside it (VACUUM INTO), synced, and renamed over it: a crash leaves the file under
    /// one key or the other, whole.
    static func rewrite(path: String, from: CacheSecret?, to: CacheSecret?) throws(ParleyError) {
        parley_cipher_register_vfs()
        let temporary = path + ".rekey"
        removeWithCompanions(temporary)
        let source = try register(path: path, secret: from)
        defer { source?.release() }
        var target: SealedFileKey?
        if let to {
            target = try attach(path: temporary, secret: to, kdf: to.freshDerivation(), requireMatch: false)
        }
        defer { target?.release() }
        do throws(ParleyError) {
            try SQLiteDatabase.copy(path: path, into: temporary, reserveBytes: to == nil ? 0 : reserveBytes)
            try SQLiteFiles.syncFile(temporary)
            // The file's own WAL was checkpointed into it and removed by the copy's close: a
            // WAL left beside the renamed file would be replayed into it.
            guard !SQLiteFiles.hasContent(path + "-wal") else {
                throw ParleyError(.cache, "rekeying \(path): its WAL could not be checkpointed (another connection holds it)")
            }
            guard rename(temporary, path) == 0 else {
                throw ParleyError(.cache, "rekeying \(path): rename: \(SQLiteFiles.errnoText())")
            }
        } catch {
            removeWithCompanions(temporary)
            throw error
        }
        unlink(path + "-shm")
        SQLiteFiles.syncDirectory(of: path)
    }

    private static func removeWithCompanions(_ path: String) {
        unlink(path)
        for suffix in SQLiteFiles.companionSuffixes { unlink(path + suffix) }
    }
}
