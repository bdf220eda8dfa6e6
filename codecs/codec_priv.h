/*
 * codec_priv.h - the context shared by the codecs in this folder.
 */
#ifndef LD_CODEC_PRIV_H
#define LD_CODEC_PRIV_H

#include <zstd.h>
#include <turbojpeg.h>

#include "codec.h"

struct jroi_dec;

/* The bytes check() decodes into at a time. */
#define CODEC_CHECK_WINDOW 65536

struct codec_ctx {
	ZSTD_DCtx *zd;	     /* created on first zstd use */
	ZSTD_DCtx *zs;	     /* streaming, for check(); created on first */
	unsigned char *zwin; /* check()'s output window */
	struct jroi_dec *jd; /* created on first jpeg decode */
	tjhandle tjc;	     /* created on first jpeg encode */
	uint64_t max_pixels;
};

extern const struct codec_ops codec_raw_ops;
extern const struct codec_ops codec_zstd_ops;
extern const struct codec_ops codec_jpeg_ops;

#endif /* LD_CODEC_PRIV_H */
