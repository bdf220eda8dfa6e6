/*
 * jpeg.c - JPEG decode and encode with TurboJPEG.
 */
#include <errno.h>
#include <string.h>

#include "codec_priv.h"
#include "jpeg.h"
#include "loader_error.h"

static int tj_handle(struct codec_ctx *ctx)
{
	if (!ctx->tj) {
		ctx->tj = tjInitDecompress();
		if (!ctx->tj)
			return -ENOMEM;
	}
	return 0;
}

/* The pixel format and channel count a colourspace decodes to. */
static void tj_format(int colorspace, int *pf, uint32_t *channels)
{
	switch (colorspace) {
	case TJCS_GRAY:
		*pf = TJPF_GRAY;
		*channels = 1;
		break;
	case TJCS_CMYK:
	case TJCS_YCCK:
		*pf = TJPF_CMYK;
		*channels = 4;
		break;
	default:
		*pf = TJPF_RGB;
		*channels = 3;
		break;
	}
}

static int jpg_header(struct codec_ctx *ctx, const void *src, size_t len,
		      int *w, int *h, int *cs, struct diag *d)
{
	int sub, err;

	err = tj_handle(ctx);
	if (err)
		return err;
	if (len == 0 || len > (unsigned long)-1)
		return diag_set(d, LOADER_EDECODE, "empty JPEG payload");
	*w = *h = 0; /* left unset for a tables-only stream */
	if (tjDecompressHeader3(ctx->tj, src, (unsigned long)len, w, h, &sub,
				cs) != 0)
		return diag_set(d, LOADER_EDECODE, "jpeg header: %s",
				tjGetErrorStr2(ctx->tj));
	if (*w <= 0 || *h <= 0)
		return diag_set(d, LOADER_EDECODE, "jpeg of %dx%d pixels", *w,
				*h);
	if ((uint64_t)*w * (uint64_t)*h > ctx->max_pixels)
		return diag_set(
			d, LOADER_ETOOBIG,
			"jpeg of %dx%d pixels exceeds the limit of %llu pixels",
			*w, *h, (unsigned long long)ctx->max_pixels);
	return 0;
}

int jpg_scale_for(struct codec_ctx *ctx, const void *src, size_t len,
		  uint32_t min_long_side, struct jpg_geom *g, struct diag *d)
{
	int w, h, cs, pf, err;
	uint32_t best = 8;

	err = jpg_header(ctx, src, len, &w, &h, &cs, d);
	if (err)
		return err;
	tj_format(cs, &pf, &g->channels);
	/* libjpeg-turbo scales by num/8 for num in 1..8 (among others). */
	for (uint32_t num = 1; num < 8; num++) {
		uint32_t lw = ((uint32_t)w * num + 7) / 8;
		uint32_t lh = ((uint32_t)h * num + 7) / 8;

		if ((lw > lh ? lw : lh) >= min_long_side) {
			best = num;
			break;
		}
	}
	g->scale_num = best;
	g->width = ((uint32_t)w * best + 7) / 8;
	g->height = ((uint32_t)h * best + 7) / 8;
	return 0;
}

static int tj_fail(struct codec_ctx *ctx, struct diag *d)
{
	int warn = tjGetErrorCode(ctx->tj) == TJERR_WARNING;

	return diag_set(d, LOADER_EDECODE, "jpeg %s: %s",
			warn ? "data damaged" : "decode",
			tjGetErrorStr2(ctx->tj));
}

int jpg_decode_scaled(struct codec_ctx *ctx, const void *src, size_t len,
		      const struct jpg_geom *g, void *dst, struct diag *d)
{
	int w, h, cs, pf;
	uint32_t ch;
	int err = jpg_header(ctx, src, len, &w, &h, &cs, d);

	if (err)
		return err;
	tj_format(cs, &pf, &ch);
	if (ch != g->channels)
		return diag_set(d, -EINVAL, "jpeg geometry does not match");
	if (tjDecompress2(ctx->tj, src, (unsigned long)len, dst, (int)g->width,
			  0, (int)g->height, pf, TJFLAG_STOPONWARNING) != 0)
		return tj_fail(ctx, d);
	return 0;
}

int jpg_encode(struct codec_ctx *ctx, const void *pixels, uint32_t width,
	       uint32_t height, uint32_t channels, int quality,
	       unsigned char **out, size_t *out_len, struct diag *d)
{
	int pf = channels == 1 ? TJPF_GRAY : TJPF_RGB;
	int sub = channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
	unsigned long n = 0;

	if (channels != 1 && channels != 3)
		return diag_set(
			d, -EINVAL,
			"jpeg encode: %u channels (1 gray or 3 RGB only)",
			channels);
	if (quality < 1 || quality > 100)
		return diag_set(d, -EINVAL,
				"jpeg encode: quality %d out of range 1..100",
				quality);
	if (!width || !height || width > 65535 || height > 65535)
		return diag_set(d, -EINVAL, "jpeg encode: %ux%u pixels", width,
				height);
	if (!ctx->tjc) {
		ctx->tjc = tjInitCompress();
		if (!ctx->tjc)
			return -ENOMEM;
	}
	*out = NULL;
	if (tjCompress2(ctx->tjc, pixels, (int)width, 0, (int)height, pf, out,
			&n, sub, quality, 0) != 0) {
		tjFree(*out);
		*out = NULL;
		return diag_set(d, LOADER_EDECODE, "jpeg encode: %s",
				tjGetErrorStr2(ctx->tjc));
	}
	*out_len = n;
	return 0;
}

void jpg_free(unsigned char *buf)
{
	tjFree(buf);
}

static int jpeg_probe(struct codec_ctx *ctx, const struct codec_src *src,
		      struct codec_info *info, struct diag *d)
{
	int w, h, cs, pf, err;

	memset(info, 0, sizeof(*info));
	err = jpg_header(ctx, src->data, src->len, &w, &h, &cs, d);
	if (err)
		return err;
	tj_format(cs, &pf, &info->channels);
	info->width = (uint32_t)w;
	info->height = (uint32_t)h;
	info->size = (size_t)w * (size_t)h * info->channels;
	return 0;
}

static int jpeg_decode(struct codec_ctx *ctx, const struct codec_src *src,
		       void *dst, size_t cap, struct codec_info *info,
		       struct diag *d)
{
	int err = jpeg_probe(ctx, src, info, d);
	int pf;
	uint32_t ch;

	if (err)
		return err;
	if (info->size > cap)
		return diag_set(d, LOADER_ETOOBIG,
				"jpeg decodes to %zu bytes, room for %zu",
				info->size, cap);
	tj_format(info->channels == 1 ? TJCS_GRAY :
		  info->channels == 4 ? TJCS_CMYK :
					TJCS_RGB,
		  &pf, &ch);
	if (tjDecompress2(ctx->tj, src->data, (unsigned long)src->len, dst,
			  (int)info->width, 0, (int)info->height, pf,
			  TJFLAG_STOPONWARNING) != 0)
		return tj_fail(ctx, d);
	return 0;
}

const struct codec_ops codec_jpeg_ops = {
	.name = "jpeg",
	.probe = jpeg_probe,
	.decode = jpeg_decode,
};
