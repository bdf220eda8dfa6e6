/*
 * codec.h - one small interface for every payload decoder.
 *
 * A codec turns the stored bytes of one field into the bytes the pipeline
 * works on: raw copies them, zstd decompresses them (optionally with a
 * trained dictionary), jpeg decodes them to pixels. Each sits behind the
 * same ops table, so callers select a codec by id and never switch on it.
 *
 * A struct codec_ctx holds the per-thread decoder state (zstd context,
 * JPEG decoder). It is not thread-safe: give each thread its own.
 * Decoding never allocates once the context has been used for a codec
 * (libjpeg keeps its own per-image pools).
 *
 * The jpeg entry is the decoder streams use (jroi.h), so a payload
 * decodes here to the pixels, channels and errors a stream gets from it:
 * grayscale to 1 channel, every other colour space (YCbCr, RGB, CMYK,
 * YCCK) to 3 channels RGB, with the same header checks and pixel limit.
 */
#ifndef LD_CODEC_H
#define LD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "jroi.h"

enum codec_id { CODEC_RAW = 0, CODEC_ZSTD, CODEC_JPEG, CODEC_COUNT };

struct zrec_ddict;

/* One payload to decode. The caller owns every pointer. */
struct codec_src {
	const void *data;
	size_t len;
	/* zstd only: the digested dictionary, or NULL for plain frames. */
	const struct zrec_ddict *ddict;
};

/* What a payload decodes to. width/height/channels are set for images. */
struct codec_info {
	size_t size; /* decoded bytes */
	uint32_t width, height, channels;
};

struct codec_ctx;

struct codec_ops {
	const char *name;
	/*
	 * Learn what src decodes to without decoding it (headers only where
	 * the format has them). Returns 0 or a negative code, with a reason
	 * in d.
	 */
	int (*probe)(struct codec_ctx *ctx, const struct codec_src *src,
		     struct codec_info *info, struct diag *d);
	/*
	 * Decode src into dst (cap bytes). Fails with LOADER_ETOOBIG if the
	 * result does not fit and LOADER_EDECODE if the payload is corrupt.
	 * On success info describes what was written: info->size bytes at
	 * dst. A decoder may use the rest of dst as scratch, so bytes past
	 * info->size are undefined after the call.
	 */
	int (*decode)(struct codec_ctx *ctx, const struct codec_src *src,
		      void *dst, size_t cap, struct codec_info *info,
		      struct diag *d);
	/*
	 * Optional: check that src decodes, to the info->size bytes its
	 * header says, without keeping the result: a bounded scratch only,
	 * whatever size the header claims (a checker must not allocate what
	 * a hostile file declares). NULL: probe() says all there is.
	 */
	int (*check)(struct codec_ctx *ctx, const struct codec_src *src,
		     struct codec_info *info, struct diag *d);
};

/* The ops of a codec; NULL for an id out of range. */
const struct codec_ops *codec_get(enum codec_id id);

/*
 * Create a decoding context. max_pixels bounds the images a context will
 * decode (a guard against decompression bombs); 0 means the default,
 * CODEC_DEFAULT_MAX_PIXELS, which is the stream's default too. Returns 0
 * or -ENOMEM.
 */
#define CODEC_DEFAULT_MAX_PIXELS JROI_DEFAULT_MAX_PIXELS
int codec_ctx_new(struct codec_ctx **out, uint64_t max_pixels);

/* Free a context. NULL is a no-op. */
void codec_ctx_free(struct codec_ctx *ctx);

#endif /* LD_CODEC_H */
