/*
 * jpeg.h - JPEG for the codec table and for packing: one decoder, jroi.
 *
 * Every JPEG decode in the tree goes through jroi.h, the decoder streams
 * use, so a JPEG gets one verdict and one set of pixels wherever it is
 * decoded: a stream, `loaderctl verify` (the codec table, CODEC_JPEG),
 * and `loaderctl pack --max-side` (jpg_scale_for() and
 * jpg_decode_scaled() below). One colour policy follows: grayscale
 * images decode to 1 channel (a stream repeats it into R, G and B after
 * resampling), every other colour space (YCbCr, RGB, CMYK, YCCK) to 3
 * channels RGB, CMYK and YCCK through libjpeg-turbo's inverted-CMYK
 * formula (jroi.h). Headers are checked and the pixel limit applied as a
 * stream does, with the same codes and messages.
 *
 * Libjpeg's errors never cross our frames (jroi catches them), and its
 * warnings (e.g. "premature end of data") count as errors: the image
 * would decode to something other than what was stored.
 *
 * Encoding (for pack's re-encoded images) uses TurboJPEG.
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
 * g->height rows of g->width * g->channels bytes. The pixels are
 * libjpeg-turbo's full decode at that scale (tjDecompress2() to the
 * scaled size gives the same bytes for gray and colour images), CMYK
 * and YCCK converted to RGB. Fails with -EINVAL when g does not match
 * the image, otherwise as jroi_decode().
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
