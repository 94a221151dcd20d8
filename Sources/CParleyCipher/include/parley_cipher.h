#ifndef PARLEY_CIPHER_H
#define PARLEY_CIPHER_H
/* Encryption at rest of the cache: a SQLite VFS that seals every page of a database file,
   of its WAL and of its rollback journal with XChaCha20-Poly1305 (libsodium), and the
   sealing of the outbox journal's lines with the same key.

   A sealed database file starts with a header of PARLEY_CIPHER_HEADER_BYTES (magic, page
   size, key derivation parameters and salt, a file id, a key check value, a checksum);
   SQLite's pages follow it, each one sealed in place: the first page_size - 40 bytes
   encrypted, then the 24-byte nonce and the 16-byte tag in the page's reserved bytes
   (SQLite leaves them alone: the file is created with 40 reserved bytes per page). The
   associated data of a page names the file (its id) and the page (its number, in the file
   and in a WAL frame alike, so that a checkpoint copies a sealed page as it is; a rollback
   journal's page by its offset), so that a page cannot be moved unnoticed. WAL frame
   headers and the WAL header stay as SQLite writes them (page numbers, sizes, salts,
   checksums over the plaintext); the page images in the frames are sealed.

   Keys are registered per database path (as SQLite names it: the full path) while a
   connection may open it; files whose path has no key pass through unchanged. */
#include <stddef.h>
#include <stdint.h>

/* Internal to libparley: kept out of its exported symbols (which are parley_* otherwise). */
#pragma GCC visibility push(hidden)

#define PARLEY_CIPHER_VFS_NAME "parley-cipher"
#define PARLEY_CIPHER_KEY_BYTES 32
#define PARLEY_CIPHER_SALT_BYTES 16
#define PARLEY_CIPHER_HEADER_BYTES 4096
#define PARLEY_CIPHER_RESERVE_BYTES 40

/* How the key was obtained: given whole, or derived from a passphrase by Argon2id. */
#define PARLEY_CIPHER_KDF_NONE 0
#define PARLEY_CIPHER_KDF_ARGON2ID 1

typedef struct parley_cipher_kdf {
    uint32_t algorithm;
    uint64_t opslimit;
    uint64_t memlimit;
    uint8_t salt[PARLEY_CIPHER_SALT_BYTES];
} parley_cipher_kdf;

/* What a file is, by its first bytes. */
#define PARLEY_CIPHER_FILE_EMPTY 0          /* missing or empty */
#define PARLEY_CIPHER_FILE_PLAIN 1          /* a SQLite database */
#define PARLEY_CIPHER_FILE_SEALED 2         /* a sealed database with a sound header */
#define PARLEY_CIPHER_FILE_SEALED_DAMAGED 3 /* the sealed magic, but a header that fails its checksum */
#define PARLEY_CIPHER_FILE_OTHER 4          /* neither */

/* Registers the VFS (once per process; later calls do nothing). SQLITE_OK or an error. */
int parley_cipher_register_vfs(void);

/* Reads the first bytes of `path`: one of PARLEY_CIPHER_FILE_*, or -errno when it cannot
   be read. For a sealed file with a sound header, `kdf` receives its key derivation. */
int parley_cipher_inspect(const char *path, parley_cipher_kdf *kdf);

/* Whether `key` opens the sealed file at `path`: 1 yes, 0 no, -errno when unreadable,
   -1000 when the header is damaged. Nothing is written. */
int parley_cipher_key_opens(const char *path, const uint8_t key[PARLEY_CIPHER_KEY_BYTES]);

/* Derives the key of a passphrase (Argon2id with `kdf`'s salt and limits). 0 or -1 (out of
   memory or limits out of range). */
int parley_cipher_derive_key(uint8_t key[PARLEY_CIPHER_KEY_BYTES], const char *passphrase, size_t length,
                             const parley_cipher_kdf *kdf);

/* Fresh random bytes (salts). */
void parley_cipher_random(void *bytes, size_t count);

/* Registers `key` for the database at `path` (and its -wal and -journal): a new file
   opened through the VFS gets a header with `kdf`. Registrations are counted: each
   attach needs its detach. A path registered with another key is replaced. 0 or -1. */
int parley_cipher_attach(const char *path, const uint8_t key[PARLEY_CIPHER_KEY_BYTES], const parley_cipher_kdf *kdf);

/* Registers the key of `existing` for `other` too (a file moved aside, read for salvage;
   `other` may be `existing`: one more registration). 0, or -1 when `existing` has no key. */
int parley_cipher_alias(const char *existing, const char *other);

/* Whether a key is registered for `path`: 1 or 0. */
int parley_cipher_has_key(const char *path);

/* Ends one registration of `path`; the last one zeroes the keys. */
void parley_cipher_detach(const char *path);

/* Sealing of small records (outbox journal lines) under the key registered for `path`, as
   text: base64 (no padding) of nonce || ciphertext || tag. */
/* The text's size for `plain_length` bytes, its terminating NUL included. */
size_t parley_cipher_sealed_text_size(size_t plain_length);
/* Writes the NUL-terminated text into `text` (parley_cipher_sealed_text_size bytes). 0, or
   -1 when `path` has no key. */
int parley_cipher_seal_text(const char *path, const uint8_t *plain, size_t plain_length, char *text);
/* Opens `text` into `plain` (at least `text_length` bytes), its length in `plain_length`.
   0, -1 when `path` has no key, -2 when the text does not open (damaged, or another key). */
int parley_cipher_open_text(const char *path, const char *text, size_t text_length, uint8_t *plain, size_t *plain_length);

/* sodium_memzero. */
void parley_cipher_zero(void *bytes, size_t count);

/* Argon2id's limits accepted by parley_cipher_derive_key. */
uint64_t parley_cipher_opslimit_min(void);
uint64_t parley_cipher_opslimit_max(void);
uint64_t parley_cipher_memlimit_min(void);
uint64_t parley_cipher_memlimit_max(void);

#pragma GCC visibility pop

#endif
