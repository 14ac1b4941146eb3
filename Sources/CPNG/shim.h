// libpng for the Snapshots target (headers from libpng-dev, found by pkg-config libpng).
//
// Decoding uses libpng's simplified png_image API straight from Swift. Encoding
// needs the classic API, the only one that sets the zlib level and the row filter
// (the simplified writer's fastest setting is zlib level 3 with no filter, about
// 2.5x slower on a snapshot than level 1 with the Up filter). The classic API
// reports errors by longjmp, which must not cross Swift frames, so the whole
// encode runs here in C, with setjmp, and returns 0 or -1 and a message.
#ifndef APH_CPNG_SHIM_H
#define APH_CPNG_SHIM_H

#include <png.h>
#include <zlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/// PNG_FORMAT_RGBA is a composite macro that does not import into Swift.
static const png_uint_32 aph_png_format_rgba = PNG_FORMAT_RGBA;

/// The encoder's output: a malloc'd buffer (the caller frees `data`), or a message.
typedef struct aph_png_output {
    unsigned char *data;
    size_t size;
    size_t capacity;
    char message[256];
} aph_png_output;

static void aph_png_error_fn(png_structp png, png_const_charp message) {
    aph_png_output *out = (aph_png_output *)png_get_error_ptr(png);
    snprintf(out->message, sizeof out->message, "%s", message);
    png_longjmp(png, 1);
}

static void aph_png_warning_fn(png_structp png, png_const_charp message) {
    (void)png;
    (void)message;
}

static void aph_png_write_fn(png_structp png, png_bytep data, size_t length) {
    aph_png_output *out = (aph_png_output *)png_get_io_ptr(png);
    if (length > out->capacity - out->size) {
        size_t capacity = out->capacity ? out->capacity : 256 * 1024;
        while (capacity - out->size < length) {
            if (capacity > SIZE_MAX / 2) png_error(png, "PNG output too large");
            capacity *= 2;
        }
        unsigned char *grown = (unsigned char *)realloc(out->data, capacity);
        if (grown == NULL) png_error(png, "out of memory for the PNG output");
        out->data = grown;
        out->capacity = capacity;
    }
    memcpy(out->data + out->size, data, length);
    out->size += length;
}

static void aph_png_flush_fn(png_structp png) {
    (void)png;
}

/// Encodes 8-bit straight RGBA rows (`width * 4` bytes each) as a PNG: colour type
/// RGBA, or RGB with the alpha bytes dropped when `opaque` is nonzero. `level` is
/// zlib's (0-9); `filters` a PNG_FILTER_* mask. Returns 0 with `out->data` holding
/// `out->size` bytes, or -1 with `out->message` set and no buffer.
static inline int aph_png_encode_rgba(const unsigned char *pixels, uint32_t width, uint32_t height,
                                      int opaque, int level, int filters, aph_png_output *out) {
    out->data = NULL;
    out->size = 0;
    out->capacity = 0;
    out->message[0] = 0;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, out, aph_png_error_fn, aph_png_warning_fn);
    if (png == NULL) {
        snprintf(out->message, sizeof out->message, "png_create_write_struct failed");
        return -1;
    }
    png_infop info = png_create_info_struct(png);
    if (info == NULL) {
        png_destroy_write_struct(&png, NULL);
        snprintf(out->message, sizeof out->message, "png_create_info_struct failed");
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(out->data);
        out->data = NULL;
        out->size = 0;
        out->capacity = 0;
        return -1;
    }
    png_set_write_fn(png, out, aph_png_write_fn, aph_png_flush_fn);
    png_set_IHDR(png, info, width, height, 8, opaque ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(png, level);
    png_set_compression_strategy(png, Z_DEFAULT_STRATEGY);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, filters);
    png_write_info(png, info);
    // After png_write_info: libpng checks the filler against the colour type written.
    if (opaque) png_set_filler(png, 0, PNG_FILLER_AFTER);
    for (uint32_t y = 0; y < height; y++) {
        png_write_row(png, pixels + (size_t)y * width * 4);
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return 0;
}

#endif
