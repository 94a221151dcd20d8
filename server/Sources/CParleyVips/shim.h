#ifndef PARLEY_SERVER_VIPS_SHIM_H
#define PARLEY_SERVER_VIPS_SHIM_H
/* The server's use of libvips (server/Sources/ParleyServer/Images.swift), one fixed function per
 * call: libvips's options are C varargs, which Swift cannot call.
 *
 * The few libvips and GLib functions used are declared here as libvips 8.14 and GLib 2.74 declare
 * them (Debian 12's libvips-dev), instead of including <vips/vips.h>: that header needs GLib's
 * include directories, which only pkg-config knows, and SwiftPM warns about the `-pthread` flag
 * pkg-config gives for libvips. The linker still checks every name against the libraries. */
#include <stddef.h>
#include <string.h>

typedef struct _VipsImage VipsImage;

int vips_init(const char *argv0);
void vips_cache_set_max(int max);
void vips_cache_set_max_mem(size_t max_mem);
void vips_cache_set_max_files(int max_files);
void vips_concurrency_set(int concurrency);
void vips_block_untrusted_set(int state);
void vips_error_clear(void);
const char *vips_foreign_find_load_buffer(const void *data, size_t size);
VipsImage *vips_image_new_from_buffer(const void *buf, size_t len, const char *option_string, ...);
int vips_image_get_width(const VipsImage *image);
int vips_image_get_height(const VipsImage *image);
int vips_image_hasalpha(VipsImage *image);
int vips_thumbnail_buffer(void *buf, size_t len, VipsImage **out, int width, ...);
int vips_jpegsave_buffer(VipsImage *in, void **buf, size_t *len, ...);
int vips_pngsave_buffer(VipsImage *in, void **buf, size_t *len, ...);
void g_object_unref(void *object);
void g_free(void *memory);
unsigned int g_log_set_handler(const char *log_domain, int log_levels,
                               void (*log_func)(const char *, int, const char *, void *), void *user_data);

/* VipsSize's VIPS_SIZE_DOWN and GLib's log levels WARNING | MESSAGE | INFO. */
enum { PARLEY_VIPS_SIZE_DOWN = 2, PARLEY_G_LOG_NOTICES = (1 << 4) | (1 << 5) | (1 << 6) };

/* libvips's own warnings (a damaged image, say) would go to stderr beside the server's log; the
 * outcome of each call is reported to the caller instead. */
static void parley_vips_drop_log(const char *domain, int level, const char *message, void *data) {
    (void)domain; (void)level; (void)message; (void)data;
}

/* Once, at start: 0 on success. No operation cache (memory stays bounded by the requests in
 * flight), one worker thread per image, and loaders libvips marks untrusted refused. */
static inline int parley_images_start(const char *program) {
    if (vips_init(program) != 0) return -1;
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(1);
    vips_block_untrusted_set(1);
    g_log_set_handler("VIPS", PARLEY_G_LOG_NOTICES, parley_vips_drop_log, NULL);
    return 0;
}

/* The formats the server decodes: 1 JPEG, 2 PNG, 3 GIF, 4 WebP; 0 for anything else (libvips
 * reads many more, e.g. PDF and SVG, which the server leaves alone). */
static inline int parley_image_format(const void *data, size_t length) {
    const char *loader = vips_foreign_find_load_buffer(data, length);
    if (loader == NULL) { vips_error_clear(); return 0; }
    if (strncmp(loader, "VipsForeignLoadJpeg", 19) == 0) return 1;
    if (strncmp(loader, "VipsForeignLoadPng", 18) == 0) return 2;
    if (strncmp(loader, "VipsForeignLoadGif", 18) == 0) return 3;
    if (strncmp(loader, "VipsForeignLoadWebp", 19) == 0) return 4;
    return 0;
}

/* Reads the header only (no pixels): 0 and the dimensions, or -1. */
static inline int parley_image_dimensions(const void *data, size_t length, int *width, int *height) {
    VipsImage *image = vips_image_new_from_buffer(data, length, "", NULL);
    if (image == NULL) { vips_error_clear(); return -1; }
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
    g_object_unref(image);
    return 0;
}

/* A thumbnail fitting in max_width x max_height, the aspect ratio kept, never enlarged, turned
 * upright by its orientation tag, metadata dropped: PNG when it has an alpha channel, else JPEG.
 * 0 with *out (free it with parley_image_free), its length and dimensions; -1 when the image
 * does not decode (a decoding error fails it rather than leaving grey rows). */
static inline int parley_image_thumbnail(const void *data, size_t length, int max_width, int max_height,
                                         void **out, size_t *out_length, int *width, int *height, int *is_png) {
    VipsImage *thumbnail = NULL;
    if (vips_thumbnail_buffer((void *)data, length, &thumbnail, max_width, "height", max_height,
                              "size", PARLEY_VIPS_SIZE_DOWN, "option_string", "fail_on=error", NULL) != 0) {
        vips_error_clear();
        return -1;
    }
    int alpha = vips_image_hasalpha(thumbnail) ? 1 : 0;
    int status = alpha
        ? vips_pngsave_buffer(thumbnail, out, out_length, "strip", 1, NULL)
        : vips_jpegsave_buffer(thumbnail, out, out_length, "Q", 85, "strip", 1, NULL);
    *width = vips_image_get_width(thumbnail);
    *height = vips_image_get_height(thumbnail);
    *is_png = alpha;
    g_object_unref(thumbnail);
    if (status != 0) { vips_error_clear(); return -1; }
    return 0;
}

static inline void parley_image_free(void *bytes) { g_free(bytes); }

#endif
