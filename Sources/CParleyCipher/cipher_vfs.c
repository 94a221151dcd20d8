/* The sealing VFS of parley_cipher.h. It wraps the default VFS: every file it opens holds
   the default VFS's file right after its own state, and every call ends in that file.
   Main database files, WALs and rollback journals whose database has a registered key are
   sealed; every other file passes through. */
#define _GNU_SOURCE
#include "parley_cipher.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NONCE_BYTES crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define TAG_BYTES crypto_aead_xchacha20poly1305_ietf_ABYTES
#define HASH_BYTES 32
#define FILE_ID_BYTES 16
#define WAL_HEADER_BYTES 32
#define WAL_FRAME_HEADER_BYTES 24

/* Header fields (offsets into the first PARLEY_CIPHER_HEADER_BYTES of a sealed file). */
#define AT_PAGE_SIZE 16
#define AT_RESERVE 20
#define AT_ALGORITHM 24
#define AT_OPSLIMIT 32
#define AT_MEMLIMIT 40
#define AT_SALT 48
#define AT_FILE_ID 64
#define AT_KEY_CHECK 80
#define AT_CHECKSUM 112
#define HEADER_USED (AT_CHECKSUM + HASH_BYTES)

static const uint8_t header_magic[16] = "Parley cache v1";
static const char subkey_context[crypto_kdf_CONTEXTBYTES] = {'P', 'r', 'l', 'y', 'C', 'a', 'c', 'h'};
enum { SUBKEY_PAGES = 1, SUBKEY_CHECK = 2, SUBKEY_RECORDS = 3 };
static const uint8_t record_context[] = "parley outbox record v1";

/* ---- key registry -------------------------------------------------------------------- */

/* The last WAL page opened: a checkpoint reads a page from the WAL and writes it to the
   database at once, and a page sealed for the WAL opens in the database too (the same
   associated data), so the write reuses the sealed bytes instead of sealing them again. */
typedef struct page_stash {
    pthread_mutex_t lock;
    uint32_t page_number; /* 0: empty */
    uint32_t page_size;
    uint8_t file_id[16];
    uint8_t *plain;
    uint8_t *sealed;
} page_stash;

/* A key registered for a database path. Counted: each attach and each open sealed file
   holds it; the last release zeroes and frees it. */
typedef struct registered_key {
    struct registered_key *next;
    char *path;
    int references;
    uint32_t page_size; /* learned from the main file, for its WAL and journal */
    parley_cipher_kdf kdf;
    uint8_t page_key[PARLEY_CIPHER_KEY_BYTES];
    uint8_t check_key[PARLEY_CIPHER_KEY_BYTES];
    uint8_t record_key[PARLEY_CIPHER_KEY_BYTES];
    page_stash stash;
} registered_key;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static registered_key *registry;
static sqlite3_vfs *base_vfs;

static void ensure_sodium(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, (void (*)(void))sodium_init);
}

/* The path as SQLite names the file (absolute, normalized); malloc'd, or NULL. */
static char *full_path(const char *path) {
    sqlite3_vfs *vfs = base_vfs ? base_vfs : sqlite3_vfs_find(NULL);
    if (vfs == NULL) return NULL;
    int size = vfs->mxPathname + 1;
    char *full = malloc((size_t)size);
    if (full == NULL) return NULL;
    if (vfs->xFullPathname(vfs, path, size, full) != SQLITE_OK) {
        free(full);
        return NULL;
    }
    return full;
}

/* Caller holds registry_lock. `length` bytes of `name` are the database path. */
static registered_key *find_key(const char *name, size_t length) {
    for (registered_key *entry = registry; entry != NULL; entry = entry->next) {
        if (strlen(entry->path) == length && memcmp(entry->path, name, length) == 0) return entry;
    }
    return NULL;
}

static void derive_subkeys(registered_key *entry, const uint8_t key[PARLEY_CIPHER_KEY_BYTES]) {
    crypto_kdf_derive_from_key(entry->page_key, sizeof entry->page_key, SUBKEY_PAGES, subkey_context, key);
    crypto_kdf_derive_from_key(entry->check_key, sizeof entry->check_key, SUBKEY_CHECK, subkey_context, key);
    crypto_kdf_derive_from_key(entry->record_key, sizeof entry->record_key, SUBKEY_RECORDS, subkey_context, key);
}

static void free_key(registered_key *entry) {
    free(entry->path);
    pthread_mutex_destroy(&entry->stash.lock);
    if (entry->stash.plain != NULL) sodium_memzero(entry->stash.plain, entry->stash.page_size);
    free(entry->stash.plain);
    free(entry->stash.sealed);
    sodium_free(entry); /* zeroes it */
}

/* A new entry's list link, path, count and stash (the rest is the caller's). */
static void start_key(registered_key *entry, char *path) {
    entry->path = path;
    entry->references = 1;
    entry->page_size = 0;
    memset(&entry->stash, 0, sizeof entry->stash);
    pthread_mutex_init(&entry->stash.lock, NULL);
    entry->next = registry;
    registry = entry;
}

/* Ends one hold of `entry`; caller holds registry_lock. */
static void release_key(registered_key *entry) {
    entry->references -= 1;
    if (entry->references > 0) return;
    for (registered_key **link = &registry; *link != NULL; link = &(*link)->next) {
        if (*link == entry) {
            *link = entry->next;
            break;
        }
    }
    free_key(entry);
}

int parley_cipher_attach(const char *path, const uint8_t key[PARLEY_CIPHER_KEY_BYTES], const parley_cipher_kdf *kdf) {
    ensure_sodium();
    char *full = full_path(path);
    if (full == NULL) return -1;
    registered_key fresh;
    derive_subkeys(&fresh, key);
    pthread_mutex_lock(&registry_lock);
    registered_key *entry = find_key(full, strlen(full));
    if (entry != NULL) {
        free(full);
        if (sodium_memcmp(entry->page_key, fresh.page_key, sizeof fresh.page_key) != 0) {
            /* Another key for the same file (after a rekey): the new one wins. */
            memcpy(entry->page_key, fresh.page_key, sizeof fresh.page_key);
            memcpy(entry->check_key, fresh.check_key, sizeof fresh.check_key);
            memcpy(entry->record_key, fresh.record_key, sizeof fresh.record_key);
            entry->kdf = *kdf;
            entry->page_size = 0;
        }
        entry->references += 1;
    } else {
        entry = sodium_malloc(sizeof *entry);
        if (entry == NULL) {
            pthread_mutex_unlock(&registry_lock);
            free(full);
            sodium_memzero(&fresh, sizeof fresh);
            return -1;
        }
        memset(entry, 0, sizeof *entry);
        entry->kdf = *kdf;
        memcpy(entry->page_key, fresh.page_key, sizeof fresh.page_key);
        memcpy(entry->check_key, fresh.check_key, sizeof fresh.check_key);
        memcpy(entry->record_key, fresh.record_key, sizeof fresh.record_key);
        start_key(entry, full);
    }
    pthread_mutex_unlock(&registry_lock);
    sodium_memzero(&fresh, sizeof fresh);
    return 0;
}

int parley_cipher_alias(const char *existing, const char *other) {
    char *from = full_path(existing);
    char *to = full_path(other);
    int result = -1;
    if (from != NULL && to != NULL) {
        pthread_mutex_lock(&registry_lock);
        registered_key *source = find_key(from, strlen(from));
        registered_key *target = find_key(to, strlen(to));
        if (source != NULL && target != NULL) {
            target->references += 1;
            result = 0;
        } else if (source != NULL) {
            target = sodium_malloc(sizeof *target);
            if (target != NULL) {
                memcpy(target, source, sizeof *target);
                start_key(target, to);
                to = NULL;
                result = 0;
            }
        }
        pthread_mutex_unlock(&registry_lock);
    }
    free(from);
    free(to);
    return result;
}

int parley_cipher_has_key(const char *path) {
    char *full = full_path(path);
    if (full == NULL) return 0;
    pthread_mutex_lock(&registry_lock);
    int found = find_key(full, strlen(full)) != NULL;
    pthread_mutex_unlock(&registry_lock);
    free(full);
    return found;
}

void parley_cipher_detach(const char *path) {
    char *full = full_path(path);
    if (full == NULL) return;
    pthread_mutex_lock(&registry_lock);
    registered_key *entry = find_key(full, strlen(full));
    if (entry != NULL) release_key(entry);
    pthread_mutex_unlock(&registry_lock);
    free(full);
}

/* ---- header ---------------------------------------------------------------------------- */

static void put32(uint8_t *at, uint32_t value) {
    for (int index = 0; index < 4; index++) at[index] = (uint8_t)(value >> (8 * index));
}
static void put64(uint8_t *at, uint64_t value) {
    for (int index = 0; index < 8; index++) at[index] = (uint8_t)(value >> (8 * index));
}
static uint32_t get32(const uint8_t *at) {
    uint32_t value = 0;
    for (int index = 3; index >= 0; index--) value = (value << 8) | at[index];
    return value;
}
static uint64_t get64(const uint8_t *at) {
    uint64_t value = 0;
    for (int index = 7; index >= 0; index--) value = (value << 8) | at[index];
    return value;
}
static uint32_t get32_big_endian(const uint8_t *at) {
    return ((uint32_t)at[0] << 24) | ((uint32_t)at[1] << 16) | ((uint32_t)at[2] << 8) | at[3];
}

/* The key check covers every field but the page size (set when the first page is written). */
static void key_check(const uint8_t *header, const uint8_t check_key[PARLEY_CIPHER_KEY_BYTES], uint8_t out[HASH_BYTES]) {
    crypto_generichash_state state;
    crypto_generichash_init(&state, check_key, PARLEY_CIPHER_KEY_BYTES, HASH_BYTES);
    crypto_generichash_update(&state, header, AT_PAGE_SIZE);
    crypto_generichash_update(&state, header + AT_RESERVE, AT_KEY_CHECK - AT_RESERVE);
    crypto_generichash_final(&state, out, HASH_BYTES);
}

static void header_checksum(const uint8_t *header, uint8_t out[HASH_BYTES]) {
    crypto_generichash(out, HASH_BYTES, header, AT_CHECKSUM, NULL, 0);
}

static int header_is_sound(const uint8_t *header) {
    uint8_t sum[HASH_BYTES];
    header_checksum(header, sum);
    return memcmp(sum, header + AT_CHECKSUM, HASH_BYTES) == 0;
}

static void build_header(uint8_t *header, const registered_key *key) {
    memset(header, 0, HEADER_USED);
    memcpy(header, header_magic, sizeof header_magic);
    put32(header + AT_PAGE_SIZE, 0);
    put32(header + AT_RESERVE, PARLEY_CIPHER_RESERVE_BYTES);
    put32(header + AT_ALGORITHM, key->kdf.algorithm);
    put64(header + AT_OPSLIMIT, key->kdf.opslimit);
    put64(header + AT_MEMLIMIT, key->kdf.memlimit);
    memcpy(header + AT_SALT, key->kdf.salt, PARLEY_CIPHER_SALT_BYTES);
    randombytes_buf(header + AT_FILE_ID, FILE_ID_BYTES);
    key_check(header, key->check_key, header + AT_KEY_CHECK);
    header_checksum(header, header + AT_CHECKSUM);
}

static int read_fully(int descriptor, uint8_t *bytes, size_t count) {
    size_t done = 0;
    while (done < count) {
        ssize_t got = read(descriptor, bytes + done, count - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -errno;
        if (got == 0) break;
        done += (size_t)got;
    }
    return (int)done;
}

int parley_cipher_inspect(const char *path, parley_cipher_kdf *kdf) {
    ensure_sodium();
    int descriptor = open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return errno == ENOENT ? PARLEY_CIPHER_FILE_EMPTY : -errno;
    uint8_t header[HEADER_USED];
    int got = read_fully(descriptor, header, sizeof header);
    close(descriptor);
    if (got < 0) return got;
    if (got == 0) return PARLEY_CIPHER_FILE_EMPTY;
    if (got >= 16 && memcmp(header, "SQLite format 3", 16) == 0) return PARLEY_CIPHER_FILE_PLAIN;
    if (got < 16 || memcmp(header, header_magic, sizeof header_magic) != 0) return PARLEY_CIPHER_FILE_OTHER;
    if (got < (int)HEADER_USED || !header_is_sound(header)) return PARLEY_CIPHER_FILE_SEALED_DAMAGED;
    if (kdf != NULL) {
        kdf->algorithm = get32(header + AT_ALGORITHM);
        kdf->opslimit = get64(header + AT_OPSLIMIT);
        kdf->memlimit = get64(header + AT_MEMLIMIT);
        memcpy(kdf->salt, header + AT_SALT, PARLEY_CIPHER_SALT_BYTES);
    }
    return PARLEY_CIPHER_FILE_SEALED;
}

int parley_cipher_key_opens(const char *path, const uint8_t key[PARLEY_CIPHER_KEY_BYTES]) {
    ensure_sodium();
    int descriptor = open(path, O_RDONLY | O_CLOEXEC);
    if (descriptor < 0) return -errno;
    uint8_t header[HEADER_USED];
    int got = read_fully(descriptor, header, sizeof header);
    close(descriptor);
    if (got < 0) return got;
    if (got < (int)HEADER_USED || memcmp(header, header_magic, sizeof header_magic) != 0 || !header_is_sound(header)) {
        return -1000;
    }
    registered_key keys;
    derive_subkeys(&keys, key);
    uint8_t check[HASH_BYTES];
    key_check(header, keys.check_key, check);
    sodium_memzero(&keys, sizeof keys);
    return sodium_memcmp(check, header + AT_KEY_CHECK, HASH_BYTES) == 0 ? 1 : 0;
}

int parley_cipher_derive_key(uint8_t key[PARLEY_CIPHER_KEY_BYTES], const char *passphrase, size_t length,
                             const parley_cipher_kdf *kdf) {
    ensure_sodium();
    if (kdf->algorithm != PARLEY_CIPHER_KDF_ARGON2ID || kdf->opslimit < crypto_pwhash_OPSLIMIT_MIN
        || kdf->opslimit > crypto_pwhash_OPSLIMIT_MAX || kdf->memlimit < crypto_pwhash_MEMLIMIT_MIN
        || kdf->memlimit > crypto_pwhash_MEMLIMIT_MAX) {
        return -1;
    }
    return crypto_pwhash(key, PARLEY_CIPHER_KEY_BYTES, passphrase, length, kdf->salt, kdf->opslimit,
                         (size_t)kdf->memlimit, crypto_pwhash_ALG_ARGON2ID13) == 0 ? 0 : -1;
}

void parley_cipher_random(void *bytes, size_t count) {
    ensure_sodium();
    randombytes_buf(bytes, count);
}

void parley_cipher_zero(void *bytes, size_t count) { sodium_memzero(bytes, count); }

uint64_t parley_cipher_opslimit_min(void) { return crypto_pwhash_OPSLIMIT_MIN; }
uint64_t parley_cipher_opslimit_max(void) { return crypto_pwhash_OPSLIMIT_MAX; }
uint64_t parley_cipher_memlimit_min(void) { return crypto_pwhash_MEMLIMIT_MIN; }
uint64_t parley_cipher_memlimit_max(void) { return (uint64_t)crypto_pwhash_MEMLIMIT_MAX; }

/* ---- records ----------------------------------------------------------------------------- */

/* Copies the record key of `path` into `key`; 0, or -1 when it has none. */
static int record_key(const char *path, uint8_t key[PARLEY_CIPHER_KEY_BYTES]) {
    char *full = full_path(path);
    if (full == NULL) return -1;
    pthread_mutex_lock(&registry_lock);
    registered_key *entry = find_key(full, strlen(full));
    if (entry != NULL) memcpy(key, entry->record_key, PARLEY_CIPHER_KEY_BYTES);
    pthread_mutex_unlock(&registry_lock);
    free(full);
    return entry != NULL ? 0 : -1;
}

#define TEXT_VARIANT sodium_base64_VARIANT_ORIGINAL_NO_PADDING

size_t parley_cipher_sealed_text_size(size_t plain_length) {
    return sodium_base64_ENCODED_LEN(NONCE_BYTES + plain_length + TAG_BYTES, TEXT_VARIANT);
}

int parley_cipher_seal_text(const char *path, const uint8_t *plain, size_t plain_length, char *text) {
    uint8_t key[PARLEY_CIPHER_KEY_BYTES];
    if (record_key(path, key) != 0) return -1;
    size_t sealed_length = NONCE_BYTES + plain_length + TAG_BYTES;
    uint8_t *sealed = malloc(sealed_length);
    if (sealed == NULL) {
        sodium_memzero(key, sizeof key);
        return -1;
    }
    randombytes_buf(sealed, NONCE_BYTES);
    crypto_aead_xchacha20poly1305_ietf_encrypt(sealed + NONCE_BYTES, NULL, plain, plain_length, record_context,
                                               sizeof record_context - 1, NULL, sealed, key);
    sodium_memzero(key, sizeof key);
    sodium_bin2base64(text, parley_cipher_sealed_text_size(plain_length), sealed, sealed_length, TEXT_VARIANT);
    free(sealed);
    return 0;
}

int parley_cipher_open_text(const char *path, const char *text, size_t text_length, uint8_t *plain, size_t *plain_length) {
    uint8_t key[PARLEY_CIPHER_KEY_BYTES];
    if (record_key(path, key) != 0) return -1;
    uint8_t *sealed = malloc(text_length + 1);
    size_t sealed_length = 0;
    int result = -2;
    if (sealed != NULL
        && sodium_base642bin(sealed, text_length + 1, text, text_length, NULL, &sealed_length, NULL, TEXT_VARIANT) == 0
        && sealed_length >= NONCE_BYTES + TAG_BYTES) {
        unsigned long long opened_length = 0;
        if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &opened_length, NULL, sealed + NONCE_BYTES,
                                                       sealed_length - NONCE_BYTES, record_context,
                                                       sizeof record_context - 1, sealed, key) == 0) {
            *plain_length = (size_t)opened_length;
            result = 0;
        }
    }
    free(sealed);
    sodium_memzero(key, sizeof key);
    return result;
}

/* ---- the VFS ----------------------------------------------------------------------------- */

enum file_kind { KIND_PLAIN = 0, KIND_DATABASE = 'D', KIND_WAL = 'W', KIND_JOURNAL = 'J' };

typedef struct sealed_file {
    sqlite3_file base;
    sqlite3_file *real; /* the default VFS's file, right after this struct */
    int kind;
    /* A main file that is not a sound sealed database: reads give zeros, so SQLite finds
       no database in it ("file is not a database") and the cache's recovery replaces it. */
    int unreadable;
    sqlite3_int64 offset; /* where SQLite's byte 0 lies in the file */
    uint32_t page_size;
    const char *database_path; /* SQLite's name of the file, valid until xClose */
    size_t database_path_length;
    registered_key *key; /* held while the file is open */
    /* WAL: the page number of the frame header written last, and where. */
    uint32_t frame_page_number;
    sqlite3_int64 frame_header_offset;
    uint8_t file_id[FILE_ID_BYTES];
    uint8_t page_key[PARLEY_CIPHER_KEY_BYTES];
    uint8_t *scratch; /* one page, for sealing and for partial reads */
    uint8_t header[HEADER_USED]; /* the used part: the rest of the header is zeros */
} sealed_file;

static const sqlite3_io_methods sealed_methods;
static const sqlite3_io_methods passing_methods;

static size_t usable(const sealed_file *file) { return file->page_size - PARLEY_CIPHER_RESERVE_BYTES; }

/* A database page, in the file or in a WAL frame, is named by its page number (so that the
   checkpoint can copy a sealed WAL page as it is); a journal page by its offset. */
static void associated_data(const sealed_file *file, sqlite3_int64 position, uint8_t out[FILE_ID_BYTES + 9]) {
    memcpy(out, file->file_id, FILE_ID_BYTES);
    out[FILE_ID_BYTES] = file->kind == KIND_JOURNAL ? 'J' : 'P';
    put64(out + FILE_ID_BYTES + 1, (uint64_t)position);
}

/* Keeps `sealed` and `plain` (one page of `file`, a WAL) as the last page opened. */
static void stash_page(sealed_file *file, uint32_t page_number, const uint8_t *sealed, const uint8_t *plain) {
    page_stash *stash = &file->key->stash;
    pthread_mutex_lock(&stash->lock);
    if (stash->page_size != file->page_size) {
        if (stash->plain != NULL) sodium_memzero(stash->plain, stash->page_size);
        free(stash->plain);
        free(stash->sealed);
        stash->plain = malloc(file->page_size);
        stash->sealed = malloc(file->page_size);
        stash->page_size = stash->plain && stash->sealed ? file->page_size : 0;
    }
    if (stash->page_size != 0) {
        memcpy(stash->plain, plain, file->page_size);
        memcpy(stash->sealed, sealed, file->page_size);
        memcpy(stash->file_id, file->file_id, FILE_ID_BYTES);
        stash->page_number = page_number;
    }
    pthread_mutex_unlock(&stash->lock);
}

/* Copies into `out` the sealed form of `page` (page `page_number` of the database `file`)
   when it is the page the WAL opened last: 1, else 0. */
static int reuse_stashed_page(sealed_file *file, uint32_t page_number, const uint8_t *page, uint8_t *out) {
    page_stash *stash = &file->key->stash;
    int reused = 0;
    pthread_mutex_lock(&stash->lock);
    if (stash->page_number == page_number && stash->page_size == file->page_size
        && memcmp(stash->file_id, file->file_id, FILE_ID_BYTES) == 0
        && memcmp(stash->plain, page, file->page_size - PARLEY_CIPHER_RESERVE_BYTES) == 0) {
        memcpy(out, stash->sealed, file->page_size);
        reused = 1;
    }
    pthread_mutex_unlock(&stash->lock);
    return reused;
}

/* Seals `page` (page_size bytes) into `out`. */
static void seal_page(const sealed_file *file, const uint8_t *page, uint8_t *out, sqlite3_int64 position) {
    uint8_t ad[FILE_ID_BYTES + 9];
    associated_data(file, position, ad);
    uint8_t *nonce = out + usable(file);
    randombytes_buf(nonce, NONCE_BYTES);
    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(out, nonce + NONCE_BYTES, NULL, page, usable(file), ad,
                                                        sizeof ad, NULL, nonce, file->page_key);
}

/* Opens a sealed page in place; its reserved bytes read as zeros (what SQLite wrote there).
   0, or -1 when the tag fails. */
static int open_page(const sealed_file *file, uint8_t *page, sqlite3_int64 position) {
    uint8_t ad[FILE_ID_BYTES + 9];
    associated_data(file, position, ad);
    uint8_t nonce[NONCE_BYTES];
    uint8_t tag[TAG_BYTES];
    memcpy(nonce, page + usable(file), NONCE_BYTES);
    memcpy(tag, page + usable(file) + NONCE_BYTES, TAG_BYTES);
    int opened = crypto_aead_xchacha20poly1305_ietf_decrypt_detached(page, NULL, page, usable(file), tag, ad,
                                                                     sizeof ad, nonce, file->page_key);
    memset(page + usable(file), 0, PARLEY_CIPHER_RESERVE_BYTES);
    return opened == 0 ? 0 : -1;
}

static int all_zero(const uint8_t *bytes, size_t count) {
    for (size_t index = 0; index < count; index++) {
        if (bytes[index] != 0) return 0;
    }
    return 1;
}

static int valid_page_size(uint32_t size) {
    return size >= 512 && size <= 65536 && (size & (size - 1)) == 0;
}

static int ensure_scratch(sealed_file *file) {
    if (file->scratch == NULL) file->scratch = sqlite3_malloc((int)file->page_size);
    return file->scratch != NULL ? SQLITE_OK : SQLITE_NOMEM;
}

/* The page size a WAL or journal learns from its database's registration. */
static void learn_page_size(sealed_file *file) {
    if (file->page_size != 0) return;
    pthread_mutex_lock(&registry_lock);
    registered_key *entry = find_key(file->database_path, file->database_path_length);
    if (entry != NULL) file->page_size = entry->page_size;
    pthread_mutex_unlock(&registry_lock);
}

static void publish_page_size(sealed_file *file) {
    pthread_mutex_lock(&registry_lock);
    registered_key *entry = find_key(file->database_path, file->database_path_length);
    if (entry != NULL) entry->page_size = file->page_size;
    pthread_mutex_unlock(&registry_lock);
}

static int sealed_close(sqlite3_file *handle) {
    sealed_file *file = (sealed_file *)handle;
    int rc = file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
    if (file->key != NULL) {
        pthread_mutex_lock(&registry_lock);
        release_key(file->key);
        pthread_mutex_unlock(&registry_lock);
    }
    if (file->scratch != NULL) sodium_memzero(file->scratch, file->page_size);
    sqlite3_free(file->scratch);
    sodium_memzero(file->page_key, sizeof file->page_key);
    return rc;
}

static int read_database(sealed_file *file, uint8_t *out, int amount, sqlite3_int64 offset) {
    if (file->unreadable || file->page_size == 0) {
        memset(out, 0, (size_t)amount);
        return file->unreadable ? SQLITE_OK : SQLITE_IOERR_SHORT_READ;
    }
    sqlite3_int64 size = file->page_size;
    sqlite3_int64 start = offset - offset % size;
    if (offset + amount > start + size) return SQLITE_IOERR_READ; /* SQLite never reads across pages */
    int whole = offset == start && amount == (int)size;
    if (!whole && ensure_scratch(file) != SQLITE_OK) return SQLITE_NOMEM;
    uint8_t *page = whole ? out : file->scratch;
    int rc = file->real->pMethods->xRead(file->real, page, (int)size, file->offset + start);
    if (rc == SQLITE_IOERR_SHORT_READ && all_zero(page, (size_t)size)) {
        memset(out, 0, (size_t)amount);
        return rc; /* past the end: no page there */
    }
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
    int opened = rc == SQLITE_OK ? open_page(file, page, start / size + 1) : -1;
    if (opened != 0) {
        /* A page that does not open under the right key is damage. Reads of part of page 1
           (the header read while the connection opens) give zeros instead: SQLite then
           meets the damage when it reads the page whole, as a statement's error. */
        if (!whole) {
            memset(out, 0, (size_t)amount);
            return SQLITE_OK;
        }
        return SQLITE_CORRUPT;
    }
    if (!whole) memcpy(out, page + (offset - start), (size_t)amount);
    return SQLITE_OK;
}

/* The page number in the WAL frame header at `offset`: the one written last, or read from
   the file; 0 when it cannot be read. */
static uint32_t frame_page_number(sealed_file *file, sqlite3_int64 offset) {
    if (offset == file->frame_header_offset) return file->frame_page_number;
    uint8_t number[4];
    if (offset < WAL_HEADER_BYTES || file->real->pMethods->xRead(file->real, number, 4, offset) != SQLITE_OK) return 0;
    return get32_big_endian(number);
}

/* WAL frames: the page images are sealed, the WAL header and frame headers are not. A
   read of a whole frame (header and page: WAL recovery) gives a page that does not open
   as zeros, so that SQLite's checksum rejects the frame as it rejects a torn write; a read
   of a page alone (a frame recovery accepted) that does not open is damage. */
static int read_log(sealed_file *file, uint8_t *out, int amount, sqlite3_int64 offset) {
    int rc = file->real->pMethods->xRead(file->real, out, amount, offset);
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
    if (file->kind == KIND_WAL && offset == 0 && amount >= WAL_HEADER_BYTES && rc == SQLITE_OK) {
        uint32_t size = get32_big_endian(out + 8);
        if (size == 1) size = 65536;
        if (valid_page_size(size)) file->page_size = size;
    }
    if (file->kind == KIND_JOURNAL && offset == 24 && amount == 4 && rc == SQLITE_OK) {
        uint32_t size = get32_big_endian(out);
        if (valid_page_size(size)) file->page_size = size;
    }
    learn_page_size(file);
    if (file->page_size == 0) return rc;
    int size = (int)file->page_size;
    if (file->kind == KIND_WAL && (amount == size || amount == size + WAL_FRAME_HEADER_BYTES)) {
        int frame = amount != size;
        uint8_t *page = out + (frame ? WAL_FRAME_HEADER_BYTES : 0);
        if (rc == SQLITE_IOERR_SHORT_READ && all_zero(page, (size_t)size)) return rc;
        uint32_t page_number = 0;
        if (rc == SQLITE_OK) page_number = frame ? get32_big_endian(out) : frame_page_number(file, offset - WAL_FRAME_HEADER_BYTES);
        if (!frame && page_number != 0 && ensure_scratch(file) == SQLITE_OK) memcpy(file->scratch, page, (size_t)size);
        if (page_number == 0 || open_page(file, page, page_number) != 0) {
            memset(page, 0, (size_t)size);
            return frame ? SQLITE_OK : SQLITE_CORRUPT;
        }
        if (!frame && file->scratch != NULL) stash_page(file, page_number, file->scratch, page);
        return SQLITE_OK;
    }
    if (file->kind == KIND_JOURNAL && amount == size && offset % 8 == 4) {
        /* A record's page: a torn one reads as zeros, which its checksum then rejects. */
        if (rc != SQLITE_OK || open_page(file, out, offset) != 0) memset(out, 0, (size_t)size);
        return rc;
    }
    return rc;
}

static int sealed_read(sqlite3_file *handle, void *out, int amount, sqlite3_int64 offset) {
    sealed_file *file = (sealed_file *)handle;
    if (file->kind == KIND_DATABASE) return read_database(file, out, amount, offset);
    return read_log(file, out, amount, offset);
}

static int write_header(sealed_file *file) {
    uint8_t block[PARLEY_CIPHER_HEADER_BYTES] = {0};
    memcpy(block, file->header, HEADER_USED);
    return file->real->pMethods->xWrite(file->real, block, PARLEY_CIPHER_HEADER_BYTES, 0);
}

static int sealed_write(sqlite3_file *handle, const void *data, int amount, sqlite3_int64 offset) {
    sealed_file *file = (sealed_file *)handle;
    const uint8_t *bytes = data;
    if (file->kind == KIND_DATABASE) {
        if (file->unreadable) return SQLITE_IOERR_WRITE;
        if (file->page_size == 0) {
            /* The first page written sets the page size, recorded in the header. It need not
               be page 1: a copy (VACUUM INTO) larger than its page cache spills other pages
               before it. */
            if (!valid_page_size((uint32_t)amount) || offset % amount != 0) return SQLITE_IOERR_WRITE;
            file->page_size = (uint32_t)amount;
            put32(file->header + AT_PAGE_SIZE, file->page_size);
            header_checksum(file->header, file->header + AT_CHECKSUM);
            int rc = write_header(file);
            if (rc != SQLITE_OK) {
                file->page_size = 0;
                return rc;
            }
            publish_page_size(file);
        }
        if (amount != (int)file->page_size || offset % file->page_size != 0) return SQLITE_IOERR_WRITE;
        if (ensure_scratch(file) != SQLITE_OK) return SQLITE_NOMEM;
        uint32_t page_number = (uint32_t)(offset / file->page_size + 1);
        if (!reuse_stashed_page(file, page_number, bytes, file->scratch)) seal_page(file, bytes, file->scratch, page_number);
        return file->real->pMethods->xWrite(file->real, file->scratch, amount, file->offset + offset);
    }
    if (file->kind == KIND_WAL && offset == 0 && amount >= WAL_HEADER_BYTES) {
        uint32_t size = get32_big_endian(bytes + 8);
        if (size == 1) size = 65536;
        if (valid_page_size(size)) file->page_size = size;
    }
    if (file->kind == KIND_JOURNAL && offset == 0 && amount >= 28) {
        uint32_t size = get32_big_endian(bytes + 24);
        if (valid_page_size(size)) file->page_size = size;
    }
    learn_page_size(file);
    int size = (int)file->page_size;
    int sealed = size != 0 && amount == size && (file->kind == KIND_WAL || offset % 8 == 4);
    if (!sealed) {
        if (file->kind == KIND_WAL && amount > WAL_HEADER_BYTES) return SQLITE_IOERR_WRITE; /* part of a page */
        if (file->kind == KIND_WAL && amount == WAL_FRAME_HEADER_BYTES) {
            file->frame_page_number = get32_big_endian(bytes);
            file->frame_header_offset = offset;
        }
        return file->real->pMethods->xWrite(file->real, data, amount, offset);
    }
    sqlite3_int64 position = offset;
    if (file->kind == KIND_WAL) {
        position = frame_page_number(file, offset - WAL_FRAME_HEADER_BYTES);
        if (position == 0) return SQLITE_IOERR_WRITE;
    }
    if (ensure_scratch(file) != SQLITE_OK) return SQLITE_NOMEM;
    seal_page(file, bytes, file->scratch, position);
    return file->real->pMethods->xWrite(file->real, file->scratch, amount, offset);
}

static int sealed_truncate(sqlite3_file *handle, sqlite3_int64 size) {
    sealed_file *file = (sealed_file *)handle;
    return file->real->pMethods->xTruncate(file->real, size + file->offset);
}

static int sealed_file_size(sqlite3_file *handle, sqlite3_int64 *size) {
    sealed_file *file = (sealed_file *)handle;
    int rc = file->real->pMethods->xFileSize(file->real, size);
    if (rc == SQLITE_OK) *size = *size > file->offset ? *size - file->offset : 0;
    return rc;
}

static int sealed_file_control(sqlite3_file *handle, int op, void *argument) {
    sealed_file *file = (sealed_file *)handle;
    if (op == SQLITE_FCNTL_SIZE_HINT && argument != NULL) {
        sqlite3_int64 hint = *(sqlite3_int64 *)argument + file->offset;
        return file->real->pMethods->xFileControl(file->real, op, &hint);
    }
    if (op == SQLITE_FCNTL_MMAP_SIZE) return SQLITE_NOTFOUND; /* pages must pass through xRead */
    return file->real->pMethods->xFileControl(file->real, op, argument);
}

/* Calls that need no change: straight to the real file. */
static int forward_sync(sqlite3_file *f, int flags) { return ((sealed_file *)f)->real->pMethods->xSync(((sealed_file *)f)->real, flags); }
static int forward_lock(sqlite3_file *f, int level) { return ((sealed_file *)f)->real->pMethods->xLock(((sealed_file *)f)->real, level); }
static int forward_unlock(sqlite3_file *f, int level) { return ((sealed_file *)f)->real->pMethods->xUnlock(((sealed_file *)f)->real, level); }
static int forward_check_lock(sqlite3_file *f, int *out) {
    return ((sealed_file *)f)->real->pMethods->xCheckReservedLock(((sealed_file *)f)->real, out);
}
static int forward_sector_size(sqlite3_file *f) { return ((sealed_file *)f)->real->pMethods->xSectorSize(((sealed_file *)f)->real); }
static int forward_device(sqlite3_file *f) {
    return ((sealed_file *)f)->real->pMethods->xDeviceCharacteristics(((sealed_file *)f)->real);
}
static int forward_shm_map(sqlite3_file *f, int region, int size, int extend, void volatile **out) {
    return ((sealed_file *)f)->real->pMethods->xShmMap(((sealed_file *)f)->real, region, size, extend, out);
}
static int forward_shm_lock(sqlite3_file *f, int offset, int count, int flags) {
    return ((sealed_file *)f)->real->pMethods->xShmLock(((sealed_file *)f)->real, offset, count, flags);
}
static void forward_shm_barrier(sqlite3_file *f) { ((sealed_file *)f)->real->pMethods->xShmBarrier(((sealed_file *)f)->real); }
static int forward_shm_unmap(sqlite3_file *f, int delete_flag) {
    return ((sealed_file *)f)->real->pMethods->xShmUnmap(((sealed_file *)f)->real, delete_flag);
}
static int forward_read(sqlite3_file *f, void *out, int amount, sqlite3_int64 offset) {
    return ((sealed_file *)f)->real->pMethods->xRead(((sealed_file *)f)->real, out, amount, offset);
}
static int forward_write(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    return ((sealed_file *)f)->real->pMethods->xWrite(((sealed_file *)f)->real, data, amount, offset);
}
static int forward_truncate(sqlite3_file *f, sqlite3_int64 size) {
    return ((sealed_file *)f)->real->pMethods->xTruncate(((sealed_file *)f)->real, size);
}
static int forward_file_size(sqlite3_file *f, sqlite3_int64 *size) {
    return ((sealed_file *)f)->real->pMethods->xFileSize(((sealed_file *)f)->real, size);
}
static int forward_file_control(sqlite3_file *f, int op, void *argument) {
    return ((sealed_file *)f)->real->pMethods->xFileControl(((sealed_file *)f)->real, op, argument);
}
static int forward_fetch(sqlite3_file *f, sqlite3_int64 offset, int amount, void **out) {
    sqlite3_file *real = ((sealed_file *)f)->real;
    if (real->pMethods->iVersion < 3) {
        *out = NULL;
        return SQLITE_OK;
    }
    return real->pMethods->xFetch(real, offset, amount, out);
}
static int forward_unfetch(sqlite3_file *f, sqlite3_int64 offset, void *page) {
    sqlite3_file *real = ((sealed_file *)f)->real;
    if (real->pMethods->iVersion < 3) return SQLITE_OK;
    return real->pMethods->xUnfetch(real, offset, page);
}
static int passing_close(sqlite3_file *f) { return ((sealed_file *)f)->real->pMethods->xClose(((sealed_file *)f)->real); }

/* Version 2: no xFetch, so SQLite never maps a sealed file's pages. */
static const sqlite3_io_methods sealed_methods = {
    2, sealed_close, sealed_read, sealed_write, sealed_truncate, forward_sync, sealed_file_size, forward_lock,
    forward_unlock, forward_check_lock, sealed_file_control, forward_sector_size, forward_device, forward_shm_map,
    forward_shm_lock, forward_shm_barrier, forward_shm_unmap, NULL, NULL,
};

static const sqlite3_io_methods passing_methods = {
    3, passing_close, forward_read, forward_write, forward_truncate, forward_sync, forward_file_size, forward_lock,
    forward_unlock, forward_check_lock, forward_file_control, forward_sector_size, forward_device, forward_shm_map,
    forward_shm_lock, forward_shm_barrier, forward_shm_unmap, forward_fetch, forward_unfetch,
};

/* Reads the main file's header, or writes one into an empty file. SQLITE_OK (the file may
   be marked unreadable), SQLITE_AUTH when the key is not the file's, or an I/O error. */
static int prepare_database(sealed_file *file, const registered_key *key, int read_only) {
    sqlite3_int64 size = 0;
    int rc = file->real->pMethods->xFileSize(file->real, &size);
    if (rc != SQLITE_OK) return rc;
    file->offset = PARLEY_CIPHER_HEADER_BYTES;
    if (size == 0) {
        if (read_only) return SQLITE_OK;
        build_header(file->header, key);
        memcpy(file->file_id, file->header + AT_FILE_ID, FILE_ID_BYTES);
        return write_header(file);
    }
    rc = file->real->pMethods->xRead(file->real, file->header, HEADER_USED, 0);
    if (rc == SQLITE_IOERR_SHORT_READ || size < PARLEY_CIPHER_HEADER_BYTES || memcmp(file->header, header_magic, sizeof header_magic) != 0
        || !header_is_sound(file->header)) {
        file->unreadable = 1;
        file->offset = 0;
        return SQLITE_OK;
    }
    if (rc != SQLITE_OK) return rc;
    uint8_t check[HASH_BYTES];
    key_check(file->header, key->check_key, check);
    if (sodium_memcmp(check, file->header + AT_KEY_CHECK, HASH_BYTES) != 0) return SQLITE_AUTH;
    memcpy(file->file_id, file->header + AT_FILE_ID, FILE_ID_BYTES);
    uint32_t page_size = get32(file->header + AT_PAGE_SIZE);
    if (page_size != 0 && (!valid_page_size(page_size) || page_size <= PARLEY_CIPHER_RESERVE_BYTES)) {
        file->unreadable = 1;
        file->offset = 0;
        return SQLITE_OK;
    }
    file->page_size = page_size;
    return SQLITE_OK;
}

static size_t database_name_length(const char *name, int flags) {
    size_t length = strlen(name);
    const char *suffix = (flags & SQLITE_OPEN_WAL) ? "-wal" : (flags & SQLITE_OPEN_MAIN_JOURNAL) ? "-journal" : "";
    size_t suffix_length = strlen(suffix);
    if (suffix_length > 0 && length > suffix_length && strcmp(name + length - suffix_length, suffix) == 0) {
        return length - suffix_length;
    }
    return suffix_length > 0 ? 0 : length;
}

static int sealed_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *handle, int flags, int *out_flags) {
    (void)vfs;
    sealed_file *file = (sealed_file *)handle;
    memset(file, 0, sizeof *file);
    file->real = (sqlite3_file *)(file + 1);
    int rc = base_vfs->xOpen(base_vfs, name, file->real, flags, out_flags);
    if (rc != SQLITE_OK) {
        file->real->pMethods = NULL;
        return rc;
    }
    int kind = KIND_PLAIN;
    if (name != NULL) {
        if (flags & SQLITE_OPEN_MAIN_DB) kind = KIND_DATABASE;
        else if (flags & SQLITE_OPEN_WAL) kind = KIND_WAL;
        else if (flags & SQLITE_OPEN_MAIN_JOURNAL) kind = KIND_JOURNAL;
    }
    size_t length = kind == KIND_PLAIN ? 0 : database_name_length(name, flags);
    registered_key key;
    int registered = 0;
    if (length > 0) {
        pthread_mutex_lock(&registry_lock);
        registered_key *entry = find_key(name, length);
        if (entry != NULL) {
            memcpy(&key, entry, sizeof key);
            entry->references += 1;
            file->key = entry;
            registered = 1;
        }
        pthread_mutex_unlock(&registry_lock);
    }
    if (!registered) {
        handle->pMethods = &passing_methods;
        return SQLITE_OK;
    }
    file->kind = kind;
    file->database_path = name;
    file->database_path_length = length;
    file->frame_header_offset = -1;
    memcpy(file->page_key, key.page_key, sizeof key.page_key);
    if (kind == KIND_DATABASE) {
        rc = prepare_database(file, &key, (flags & SQLITE_OPEN_READONLY) != 0);
        if (rc == SQLITE_OK && file->page_size != 0) publish_page_size(file);
    } else {
        /* The WAL and journal are named by the database's file id, learned when it opened. */
        file->page_size = key.page_size;
        rc = SQLITE_OK;
        char *database_name = sqlite3_mprintf("%.*s", (int)length, name);
        if (database_name == NULL) {
            rc = SQLITE_NOMEM;
        } else {
            int descriptor = open(database_name, O_RDONLY | O_CLOEXEC);
            uint8_t header[HEADER_USED];
            int got = descriptor >= 0 ? read_fully(descriptor, header, sizeof header) : -1;
            if (descriptor >= 0) close(descriptor);
            if (got == (int)HEADER_USED && memcmp(header, header_magic, sizeof header_magic) == 0 && header_is_sound(header)) {
                memcpy(file->file_id, header + AT_FILE_ID, FILE_ID_BYTES);
            } else {
                rc = SQLITE_CANTOPEN;
            }
            sqlite3_free(database_name);
        }
    }
    sodium_memzero(&key, sizeof key);
    if (rc != SQLITE_OK) {
        file->real->pMethods->xClose(file->real);
        file->real->pMethods = NULL;
        sodium_memzero(file->page_key, sizeof file->page_key);
        pthread_mutex_lock(&registry_lock);
        release_key(file->key);
        pthread_mutex_unlock(&registry_lock);
        file->key = NULL;
        return rc;
    }
    handle->pMethods = &sealed_methods;
    return SQLITE_OK;
}

static int vfs_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
    (void)vfs;
    return base_vfs->xDelete(base_vfs, name, sync_dir);
}
static int vfs_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    return base_vfs->xAccess(base_vfs, name, flags, out);
}
static int vfs_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) {
    (void)vfs;
    return base_vfs->xFullPathname(base_vfs, name, size, out);
}
static void *vfs_dl_open(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return base_vfs->xDlOpen(base_vfs, name);
}
static void vfs_dl_error(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    base_vfs->xDlError(base_vfs, size, out);
}
static void (*vfs_dl_sym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return base_vfs->xDlSym(base_vfs, library, symbol);
}
static void vfs_dl_close(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    base_vfs->xDlClose(base_vfs, library);
}
static int vfs_randomness(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return base_vfs->xRandomness(base_vfs, size, out);
}
static int vfs_sleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return base_vfs->xSleep(base_vfs, microseconds);
}
static int vfs_current_time(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    return base_vfs->xCurrentTime(base_vfs, out);
}
static int vfs_last_error(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return base_vfs->xGetLastError ? base_vfs->xGetLastError(base_vfs, size, out) : 0;
}
static int vfs_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    if (base_vfs->iVersion >= 2 && base_vfs->xCurrentTimeInt64) return base_vfs->xCurrentTimeInt64(base_vfs, out);
    double now = 0;
    int rc = base_vfs->xCurrentTime(base_vfs, &now);
    *out = (sqlite3_int64)(now * 86400000.0);
    return rc;
}

static sqlite3_vfs sealing_vfs;
static int registration_result = SQLITE_ERROR;

static void register_once(void) {
    ensure_sodium();
    base_vfs = sqlite3_vfs_find(NULL);
    if (base_vfs == NULL) return;
    sealing_vfs.iVersion = 2;
    sealing_vfs.szOsFile = (int)sizeof(sealed_file) + base_vfs->szOsFile;
    sealing_vfs.mxPathname = base_vfs->mxPathname;
    sealing_vfs.zName = PARLEY_CIPHER_VFS_NAME;
    sealing_vfs.xOpen = sealed_open;
    sealing_vfs.xDelete = vfs_delete;
    sealing_vfs.xAccess = vfs_access;
    sealing_vfs.xFullPathname = vfs_full_pathname;
    sealing_vfs.xDlOpen = vfs_dl_open;
    sealing_vfs.xDlError = vfs_dl_error;
    sealing_vfs.xDlSym = vfs_dl_sym;
    sealing_vfs.xDlClose = vfs_dl_close;
    sealing_vfs.xRandomness = vfs_randomness;
    sealing_vfs.xSleep = vfs_sleep;
    sealing_vfs.xCurrentTime = vfs_current_time;
    sealing_vfs.xGetLastError = vfs_last_error;
    sealing_vfs.xCurrentTimeInt64 = vfs_current_time_int64;
    registration_result = sqlite3_vfs_register(&sealing_vfs, 0);
}

int parley_cipher_register_vfs(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_once);
    return registration_result;
}

/* Not the VFS, but the library's other setting under SQLite, made as early as it can be.
   SQLite keeps process-wide memory statistics by default (SQLITE_DEFAULT_MEMSTATUS=1 in
   Debian's build, which also omits lookaside): every sqlite3_malloc and sqlite3_free then
   takes one global mutex, the hottest lock of a process whose many clients write their
   caches on different threads. They are turned off when the library is loaded, before SQLite
   initializes; if the process initialized SQLite earlier, the call is refused and nothing
   changes (docs/C-API.md, "Many users in one process"). */
__attribute__((constructor)) static void parley_sqlite_memory_statistics_off(void) {
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
