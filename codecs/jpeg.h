/*
 * jpeg.h - JPEG through libjpeg-turbo's TurboJPEG API.
 *
 * Plain decoding goes through the codec table (CODEC_JPEG): grayscale
 * images decode to 1 channel, colour (YCbCr, RGB) to 3 channels RGB, and
 * CMYK/YCCK to 4 channels CMYK. This header adds what packing needs:
 * decoding at a reduced DCT scale and encoding.
 *
 * TurboJPEG catches libjpeg's errors inside the library (its own setjmp),
 * so a corrupt image is a return code here and never a longjmp through
 * our frames. Libjpeg warnings (e.g. "premature end of data") count as
 * errors: the image would decode to something other than what was stored.
 */
#ifndef LD_JPEG_H
#define LD_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"

/* Geometry of an image as stored and as it would decode. */
struct jpg_geom {
	uint32_t width, height, channels;
	/* DCT scale chosen by jpg_scale_for(): num/8 */
	uint32_t scale_num;
};

/*
 * Read the header of a JPEG and choose the smallest DCT scale whose
 * result still has a longer side of at least min_long_side pixels (or
 * scale 8/8 if none is smaller). g gets the scaled geometry. Fails with
 * LOADER_EDECODE for a payload that is not a JPEG and LOADER_ETOOBIG for
 * one above the context's pixel limit.
 */
int jpg_scale_for(struct codec_ctx *ctx, const void *src, size_t len,
		  uint32_t min_long_side, struct jpg_geom *g, struct diag *d);

/*
 * Decode at the geometry g from jpg_scale_for() into dst, which holds
 * g->height rows of g->width * g->channels bytes.
 */
int jpg_decode_scaled(struct codec_ctx *ctx, const void *src, size_t len,
		      const struct jpg_geom *g, void *dst, struct diag *d);

/*
 * Encode packed pixels (channels 1 = gray, 3 = RGB) at quality 1..100,
 * 4:2:0 chroma for colour. *out is allocated by TurboJPEG: free it with
 * jpg_free().
 */
int jpg_encode(struct codec_ctx *ctx, const void *pixels, uint32_t width,
	       uint32_t height, uint32_t channels, int quality,
	       unsigned char **out, size_t *out_len, struct diag *d);

/* Free a buffer from jpg_encode(). NULL is a no-op. */
void jpg_free(unsigned char *buf);

#endif /* LD_JPEG_H */
