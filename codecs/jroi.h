/*
 * jroi.h - region-of-interest, DCT-scaled JPEG decoding (libjpeg API).
 *
 * A RandomResizedCrop needs a rectangle of the image at no more than
 * the output resolution. This decoder reads only the rows and columns
 * that rectangle covers (jpeg_skip_scanlines, jpeg_crop_scanline) and
 * lets the IDCT scale them by num/8, choosing the cheapest scale that
 * still gives at least the requested size.
 *
 * The pixels written equal libjpeg-turbo's full decode at the same scale
 * (e.g. tjDecompress2() to the scaled size, default flags) on the same
 * rectangle, bit for bit. Colour images (YCbCr, RGB) decode to 3
 * channels RGB, grayscale to 1 channel, CMYK and YCCK to 3 channels RGB
 * through libjpeg-turbo's own formula for inverted (Adobe) CMYK:
 * R = C * K / 255, rounded, and likewise G from M and B from Y.
 *
 * This is the one JPEG decoder of the tree: streams call it directly,
 * and the codec table's jpeg entry (verify) and pack's scaled decode
 * call it through jpeg.h, so its colour policy, header checks, pixel
 * limit and messages are everyone's.
 *
 * A JPEG with restart markers whose segments hold whole MCUs of a row
 * (what loaderctl pack writes, jrst.h) is decoded by the segment path:
 * the segments that cover the region and a margin are cut out as a JPEG
 * of their own and only that is decoded, so the cost is the region's own
 * entropy-coded data, not everything above and beside it. Its pixels are
 * the same bytes as the region path's (the DCT coefficients are the same
 * and the margin keeps chroma upsampling exact); when anything about the
 * file does not allow it, the region path decodes it instead.
 *
 * Libjpeg reports errors with a longjmp; this module catches every one
 * of them inside its own functions, so a caller never sees one cross
 * its frames. Libjpeg warnings (e.g. "premature end of data") count as
 * errors. Data after the last row a request needs is not read, so
 * damage there goes unnoticed: the pixels returned are still exactly
 * those the image stores. A whole-image request reads to the end.
 *
 * A decoder is not thread-safe: keep one per thread.
 */
#ifndef LD_JROI_H
#define LD_JROI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* Pixel limit of a decoder created with max_pixels = 0. */
#define JROI_DEFAULT_MAX_PIXELS (64u << 20)

/* The denominator of every DCT scale: a scale is num / JROI_DENOM. */
#define JROI_DENOM 8

struct jroi_dec;

/* The colour space stored in the file (not the one decoded to). */
enum jroi_cs {
	JROI_CS_GRAY,
	JROI_CS_YCBCR,
	JROI_CS_RGB,
	JROI_CS_CMYK,
	JROI_CS_YCCK,
	JROI_CS_OTHER, /* refused by jroi_decode() */
};

/* What jroi_header() finds. */
struct jroi_info {
	uint32_t width, height; /* source pixels */
	uint32_t components;	/* as stored: 1, 3 or 4 */
	uint32_t channels;	/* as decoded: 1 (gray) or 3 (RGB) */
	enum jroi_cs cs;
	bool progressive;
};

/*
 * A region and the least size it must decode to. The region is in source
 * pixels and must lie inside the image (w, h >= 1). min_w x min_h is the
 * size the caller will resample the region to: the scale chosen is the
 * cheapest whose scaled region is at least that large in both directions
 * (so the resampler never enlarges what a finer scale would have given),
 * or 8/8 if none is. scale_num, when not 0, forces num/8 (1..16) instead.
 */
struct jroi_req {
	uint32_t x, y, w, h;
	uint32_t min_w, min_h;
	uint32_t scale_num;
};

/*
 * What jroi_decode() wrote. dst holds height rows of width * channels
 * bytes: the smallest whole-pixel rectangle of the scaled image that
 * covers the requested region, starting at (x0, y0) of the scaled image
 * (scaled_w x scaled_h). The region itself, in dst's pixel coordinates,
 * is roi_x, roi_y, roi_w, roi_h; these are fractions when the scale
 * does not map the region's edges onto whole pixels. A resampler that
 * maps exactly that rectangle onto its output takes exactly the crop.
 */
struct jroi_out {
	uint32_t width, height, channels;
	uint32_t scale_num; /* scale used: scale_num / JROI_DENOM */
	uint32_t scaled_w, scaled_h;
	uint32_t x0, y0;
	double roi_x, roi_y, roi_w, roi_h;
};

/* How a decoder's jroi_decode() calls with a region were decoded. */
struct jroi_counts {
	uint64_t segments; /* by the segment path */
	uint64_t whole;	   /* from the whole file (region path or full) */
};

/*
 * Create a decoder. Images of more than max_pixels source pixels (0:
 * JROI_DEFAULT_MAX_PIXELS) are refused before libjpeg allocates for
 * them. Returns 0 or -ENOMEM; free with jroi_free().
 */
int jroi_new(struct jroi_dec **out, uint64_t max_pixels);

/* Free a decoder. NULL is a no-op. */
void jroi_free(struct jroi_dec *dec);

/*
 * Let jroi_decode() take the segment path when it can (on, the default)
 * or never (off: for comparisons and tests).
 */
void jroi_set_segments(struct jroi_dec *dec, bool on);

/* The decoder's counts since it was made. */
void jroi_get_counts(const struct jroi_dec *dec, struct jroi_counts *c);

/*
 * The scale (num of num/8) the table picks for a request on an image of
 * width x height, without decoding; req->scale_num is honoured. Returns
 * 0 for a region outside the image.
 */
uint32_t jroi_pick_scale(const struct jroi_req *req, uint32_t width,
			 uint32_t height);

/*
 * The size, w x h pixels, that request req decodes to at scale num/8
 * (the width and height of struct jroi_out), without decoding: for a
 * caller that sizes buffers or picks a coarser scale by it.
 */
void jroi_region_size(const struct jroi_req *req, uint32_t num, uint64_t *w,
		      uint64_t *h);

/*
 * Read the header of the JPEG in src[0..len) into info without decoding
 * any pixels. Returns 0, LOADER_EDECODE (not a JPEG, damaged header),
 * LOADER_ETOOBIG (above the pixel limit; info is still filled) or
 * -ENOMEM. d, if not NULL, gets the reason.
 */
int jroi_header(struct jroi_dec *dec, const void *src, size_t len,
		struct jroi_info *info, struct diag *d);

/*
 * Decode the region req (NULL: the whole image at 8/8) of the JPEG in
 * src[0..len) into dst, row r at dst + r * dst_stride (dst_stride 0:
 * rows packed, out->width * out->channels bytes apart). dst_cap bytes
 * are writable at dst. out describes the result (see struct jroi_out).
 * Returns 0; LOADER_EDECODE for damaged data or an unsupported colour
 * space; LOADER_ETOOBIG above the pixel limit or when the result does
 * not fit dst_cap or dst_stride; LOADER_ERANGE for a region outside the
 * image or a forced scale outside 1..16; -ENOMEM. dst's contents are
 * undefined after an error. d, if not NULL, gets the reason.
 */
int jroi_decode(struct jroi_dec *dec, const void *src, size_t len,
		const struct jroi_req *req, void *dst, size_t dst_stride,
		size_t dst_cap, struct jroi_out *out, struct diag *d);

#endif /* LD_JROI_H */
