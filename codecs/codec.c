/*
 * codec.c - the codec table, contexts, and the raw codec.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec_priv.h"
#include "fault.h"
#include "jroi.h"
#include "loader_error.h"

static const struct codec_ops *const codec_table[CODEC_COUNT] = {
	[CODEC_RAW] = &codec_raw_ops,
	[CODEC_ZSTD] = &codec_zstd_ops,
	[CODEC_JPEG] = &codec_jpeg_ops,
};

const struct codec_ops *codec_get(enum codec_id id)
{
	if ((unsigned)id >= CODEC_COUNT)
		return NULL;
	return codec_table[id];
}

int codec_ctx_new(struct codec_ctx **out, uint64_t max_pixels)
{
	struct codec_ctx *ctx = mem_calloc(1, sizeof(*ctx));

	if (!ctx)
		return -ENOMEM;
	ctx->max_pixels = max_pixels ? max_pixels : CODEC_DEFAULT_MAX_PIXELS;
	*out = ctx;
	return 0;
}

void codec_ctx_free(struct codec_ctx *ctx)
{
	if (!ctx)
		return;
	ZSTD_freeDCtx(ctx->zd);
	ZSTD_freeDCtx(ctx->zs);
	free(ctx->zwin);
	jroi_free(ctx->jd);
	if (ctx->tjc)
		tjDestroy(ctx->tjc);
	free(ctx);
}

static int raw_probe(struct codec_ctx *ctx, const struct codec_src *src,
		     struct codec_info *info, struct diag *d)
{
	memset(info, 0, sizeof(*info));
	info->size = src->len;
	return 0;
}

static int raw_decode(struct codec_ctx *ctx, const struct codec_src *src,
		      void *dst, size_t cap, struct codec_info *info,
		      struct diag *d)
{
	if (src->len > cap)
		return diag_set(d, LOADER_ETOOBIG,
				"raw payload of %zu bytes exceeds %zu",
				src->len, cap);
	memcpy(dst, src->data, src->len);
	return raw_probe(ctx, src, info, d);
}

const struct codec_ops codec_raw_ops = {
	.name = "raw",
	.probe = raw_probe,
	.decode = raw_decode,
};
