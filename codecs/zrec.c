/*
 * zrec.c - zstd records.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ZDICT_STATIC_LINKING_ONLY
#include <zdict.h>
#include <zstd_errors.h>

#include "codec_priv.h"
#include "fault.h"
#include "loader_error.h"
#include "zrec.h"

struct zrec_enc {
	ZSTD_CCtx *cc;
	ZSTD_CDict *cdict; /* NULL without a dictionary */
	int level;
};

struct zrec_ddict {
	ZSTD_DDict *dd;
};

int zrec_enc_new(struct zrec_enc **out, int level, const void *dict,
		 size_t dict_len, struct diag *d)
{
	struct zrec_enc *enc;

	if (level < 1 || level > ZSTD_maxCLevel())
		return diag_set(d, LOADER_EUSAGE,
				"zstd level %d out of range 1..%d", level,
				ZSTD_maxCLevel());
	enc = mem_calloc(1, sizeof(*enc));
	if (!enc)
		return -ENOMEM;
	enc->level = level;
	enc->cc = ZSTD_createCCtx();
	if (!enc->cc)
		goto nomem;
	if (dict_len) {
		enc->cdict = ZSTD_createCDict(dict, dict_len, level);
		if (!enc->cdict)
			goto nomem;
	}
	*out = enc;
	return 0;
nomem:
	zrec_enc_free(enc);
	return -ENOMEM;
}

void zrec_enc_free(struct zrec_enc *enc)
{
	if (!enc)
		return;
	ZSTD_freeCDict(enc->cdict);
	ZSTD_freeCCtx(enc->cc);
	free(enc);
}

size_t zrec_bound(size_t n)
{
	return ZSTD_compressBound(n);
}

int zrec_compress(struct zrec_enc *enc, const void *src, size_t n, void *dst,
		  size_t cap, size_t *out_len, struct diag *d)
{
	size_t r;

	if (enc->cdict)
		r = ZSTD_compress_usingCDict(enc->cc, dst, cap, src, n,
					     enc->cdict);
	else
		r = ZSTD_compressCCtx(enc->cc, dst, cap, src, n, enc->level);
	if (ZSTD_isError(r))
		return diag_set(
			d,
			ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall ?
				LOADER_ETOOBIG :
				-EINVAL,
			"zstd compression failed: %s", ZSTD_getErrorName(r));
	*out_len = r;
	return 0;
}

int zrec_ddict_new(struct zrec_ddict **out, const void *dict, size_t len,
		   struct diag *d)
{
	struct zrec_ddict *dd;

	if (!len)
		return diag_set(d, LOADER_EFORMAT, "empty zstd dictionary");
	dd = mem_calloc(1, sizeof(*dd));
	if (!dd)
		return -ENOMEM;
	dd->dd = ZSTD_createDDict(dict, len);
	if (!dd->dd) {
		free(dd);
		return -ENOMEM;
	}
	*out = dd;
	return 0;
}

void zrec_ddict_free(struct zrec_ddict *dd)
{
	if (!dd)
		return;
	ZSTD_freeDDict(dd->dd);
	free(dd);
}

int zrec_train(void *dict, size_t cap, const void *samples, const size_t *sizes,
	       unsigned n, size_t *out_len, struct diag *d)
{
	size_t r = ZDICT_trainFromBuffer(dict, cap, samples, sizes, n);

	if (ZDICT_isError(r))
		return diag_set(
			d, LOADER_EDECODE,
			"zstd dictionary training on %u samples failed: %s", n,
			ZDICT_getErrorName(r));
	*out_len = r;
	return 0;
}

static int zstd_probe(struct codec_ctx *ctx, const struct codec_src *src,
		      struct codec_info *info, struct diag *d)
{
	unsigned long long n = ZSTD_getFrameContentSize(src->data, src->len);

	memset(info, 0, sizeof(*info));
	if (n == ZSTD_CONTENTSIZE_ERROR)
		return diag_set(d, LOADER_EDECODE,
				"not a zstd frame (%zu bytes)", src->len);
	if (n == ZSTD_CONTENTSIZE_UNKNOWN)
		return diag_set(d, LOADER_EDECODE,
				"zstd frame without a content size");
	info->size = (size_t)n;
	return 0;
}

static int zstd_decode(struct codec_ctx *ctx, const struct codec_src *src,
		       void *dst, size_t cap, struct codec_info *info,
		       struct diag *d)
{
	size_t r;
	int err;

	err = zstd_probe(ctx, src, info, d);
	if (err)
		return err;
	if (info->size > cap)
		return diag_set(d, LOADER_ETOOBIG,
				"zstd frame decodes to %zu bytes, room for %zu",
				info->size, cap);
	if (!ctx->zd) {
		ctx->zd = ZSTD_createDCtx();
		if (!ctx->zd)
			return -ENOMEM;
	}
	if (src->ddict)
		r = ZSTD_decompress_usingDDict(ctx->zd, dst, cap, src->data,
					       src->len, src->ddict->dd);
	else
		r = ZSTD_decompressDCtx(ctx->zd, dst, cap, src->data, src->len);
	if (ZSTD_isError(r))
		return diag_set(d, LOADER_EDECODE, "zstd: %s",
				ZSTD_getErrorName(r));
	if (r != info->size)
		return diag_set(
			d, LOADER_EDECODE,
			"zstd frame decoded to %zu bytes, header says %zu", r,
			info->size);
	return 0;
}

/* Decode through a 64 KiB window, counting what comes out. */
static int zstd_check(struct codec_ctx *ctx, const struct codec_src *src,
		      struct codec_info *info, struct diag *d)
{
	ZSTD_inBuffer in = { src->data, src->len, 0 };
	size_t total = 0, r;
	int err;

	err = zstd_probe(ctx, src, info, d);
	if (err)
		return err;
	if (!ctx->zs) {
		ctx->zs = ZSTD_createDCtx();
		if (!ctx->zs)
			return -ENOMEM;
	}
	if (!ctx->zwin) {
		ctx->zwin = mem_alloc(CODEC_CHECK_WINDOW);
		if (!ctx->zwin)
			return -ENOMEM;
	}
	ZSTD_DCtx_reset(ctx->zs, ZSTD_reset_session_and_parameters);
	if (src->ddict) {
		r = ZSTD_DCtx_refDDict(ctx->zs, src->ddict->dd);
		if (ZSTD_isError(r))
			return diag_set(d, LOADER_EDECODE, "zstd: %s",
					ZSTD_getErrorName(r));
	}
	do {
		ZSTD_outBuffer out = { ctx->zwin, CODEC_CHECK_WINDOW, 0 };

		r = ZSTD_decompressStream(ctx->zs, &out, &in);
		if (ZSTD_isError(r))
			return diag_set(d, LOADER_EDECODE, "zstd: %s",
					ZSTD_getErrorName(r));
		total += out.pos;
		if (total > info->size)
			return diag_set(
				d, LOADER_EDECODE,
				"zstd frame decodes to more than the %zu bytes its header says",
				info->size);
		if (r && in.pos == in.size && out.pos < CODEC_CHECK_WINDOW)
			return diag_set(d, LOADER_EDECODE,
					"zstd frame cut short after %zu bytes",
					total);
	} while (r);
	if (in.pos != in.size)
		return diag_set(d, LOADER_EDECODE,
				"%zu bytes after the zstd frame",
				in.size - in.pos);
	if (total != info->size)
		return diag_set(
			d, LOADER_EDECODE,
			"zstd frame decoded to %zu bytes, header says %zu",
			total, info->size);
	return 0;
}

const struct codec_ops codec_zstd_ops = {
	.name = "zstd",
	.probe = zstd_probe,
	.decode = zstd_decode,
	.check = zstd_check,
};
