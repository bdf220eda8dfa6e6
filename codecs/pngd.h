/*
 * pngd.h - PNG decoding (libpng) for image fields, region by region.
 *
 * An image field holds a JPEG or a PNG, told apart by the file's own
 * signature, never by a name: ImageNet stores PNGs named .JPEG. jroi.h
 * is the one image decoder callers use; it hands PNGs to this module, so
 * streams, verify and pack see one colour policy and one set of errors.
 *
 * Pixels are what Pillow's Image.open(f).convert("RGB") gives, which is
 * what torchvision's ImageFolder loads: a palette expanded to RGB, alpha
 * dropped (not composited), 16-bit samples cut to their high byte, no
 * gamma or colour profile applied; gray (with or without alpha) stays
 * one channel here, as a gray JPEG does, and becomes RGB where the
 * pipeline makes it so. (Pillow differs for 16-bit gray, which it clips
 * to 255 rather than cutting to the high byte.)
 *
 * A PNG has no DCT to scale by, so a scale num/8 below 8/8 (num 4, 2 or
 * 1) is made by averaging each f x f block of pixels (f = 8/num),
 * rounded, partial blocks at the right and bottom edges over the pixels
 * they have. Rows are decoded one at a time and only those the region
 * needs are kept; an interlaced PNG is decoded whole first.
 *
 * libpng reports errors with a longjmp, caught inside this module's
 * functions. Its warnings (a bad ancillary chunk) are ignored, as
 * Pillow ignores them; a damaged or cut image is an error, whatever
 * region is asked for: every chunk's CRC is checked before decoding.
 *
 * A decoder is not thread-safe: keep one per thread.
 */
#ifndef LD_PNGD_H
#define LD_PNGD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

struct pngd;

/* What pngd_header() reads from the IHDR chunk. */
struct pngd_info {
	uint32_t width, height;
	uint32_t channels; /* as decoded: 1 (gray) or 3 (RGB) */
	uint32_t bit_depth, color_type;
	bool interlaced;
};

/* Whether src[0..len) starts with the PNG signature. */
bool pngd_is(const void *src, size_t len);

/*
 * Read the header of the PNG in src[0..len). Returns 0, or
 * LOADER_EDECODE for a header that is missing or not a PNG's, with the
 * reason in d.
 */
int pngd_header(const void *src, size_t len, struct pngd_info *info,
		struct diag *d);

/* A decoder; 0 or -ENOMEM. Free with pngd_free() (NULL: no-op). */
int pngd_new(struct pngd **out);
void pngd_free(struct pngd *p);

/*
 * Decode the rectangle [x0, x1) x [y0, y1) of the image scaled by 1/f
 * (f = 1, 2, 4 or 8; the scaled image is ceil(width / f) x
 * ceil(height / f)) into dst, row r at dst + r * stride, info->channels
 * bytes a pixel. The rectangle must lie in the scaled image. A rectangle
 * whose last row is the image's reads the file to its end, so that
 * damage anywhere is found. Returns 0, LOADER_EDECODE for damaged data,
 * -ENOMEM; d gets the reason.
 */
int pngd_decode(struct pngd *p, const void *src, size_t len, uint32_t f,
		uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
		unsigned char *dst, size_t stride, struct diag *d);

#endif /* LD_PNGD_H */
