/*
 * jpeg.c - the codec table's JPEG entry and pack's scaled decode, both
 * through jroi (the decoder streams use), and encoding with TurboJPEG.
 */
#include <errno.h>
#include <string.h>

#include "codec_priv.h"
#include "jpeg.h"
#include "jroi.h"
#include "loader_error.h"
#include "pngd.h"

/* The context's decoder, made on first use with the context's limit. */
static int jpg_dec(struct codec_ctx *ctx, struct diag *d)
{
	if (!ctx->jd && jroi_new(&ctx->jd, ctx->max_pixels))
		return diag_set(d, -ENOMEM, "no memory for a jpeg decoder");
	return 0;
}

/*
 * Read the header as a stream does (jroi_header(): the same checks, the
 * same pixel limit, the same messages).
 */
static int jpg_header(struct codec_ctx *ctx, const void *src, size_t len,
		      struct jroi_info *info, struct diag *d)
{
	int err = jpg_dec(ctx, d);

	if (err)
		return err;
	return jroi_header(ctx->jd, src, len, info, d);
}

int jpg_scale_for(struct codec_ctx *ctx, const void *src, size_t len,
		  uint32_t min_long_side, struct jpg_geom *g, struct diag *d)
{
	struct jroi_info info;
	uint32_t best = JROI_DENOM, w, h;
	int err;

	err = jpg_header(ctx, src, len, &info, d);
	if (err)
		return err;
	w = info.width;
	h = info.height;
	g->channels = info.channels;
	/*
	 * libjpeg-turbo scales by num/8 for num in 1..8 (among others); a
	 * PNG only by powers of two (block averages, pngd.h).
	 */
	for (uint32_t num = 1; num < JROI_DENOM;
	     num += pngd_is(src, len) ? num : 1) {
		uint32_t lw = (w * num + JROI_DENOM - 1) / JROI_DENOM;
		uint32_t lh = (h * num + JROI_DENOM - 1) / JROI_DENOM;

		if ((lw > lh ? lw : lh) >= min_long_side) {
			best = num;
			break;
		}
	}
	g->scale_num = best;
	g->width = (w * best + JROI_DENOM - 1) / JROI_DENOM;
	g->height = (h * best + JROI_DENOM - 1) / JROI_DENOM;
	return 0;
}

int jpg_decode_scaled(struct codec_ctx *ctx, const void *src, size_t len,
		      const struct jpg_geom *g, void *dst, struct diag *d)
{
	struct jroi_info info;
	struct jroi_req req;
	struct jroi_out out;
	int err = jpg_header(ctx, src, len, &info, d);

	if (err)
		return err;
	if (info.channels != g->channels)
		return diag_set(d, -EINVAL, "jpeg geometry does not match");
	req = (struct jroi_req){ .w = info.width,
				 .h = info.height,
				 .scale_num = g->scale_num };
	err = jroi_decode(ctx->jd, src, len, &req, dst, 0,
			  (size_t)g->width * g->height * g->channels, &out, d);
	if (!err && (out.width != g->width || out.height != g->height))
		err = diag_set(d, -EINVAL, "jpeg geometry does not match");
	return err;
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
	struct jroi_info ji;
	int err;

	memset(info, 0, sizeof(*info));
	err = jpg_header(ctx, src->data, src->len, &ji, d);
	if (err)
		return err;
	info->width = ji.width;
	info->height = ji.height;
	info->channels = ji.channels;
	info->size = (size_t)ji.width * ji.height * ji.channels;
	return 0;
}

/*
 * The header first, then the whole image at 8/8: the two calls a stream
 * makes, so that a payload fails here with the code and the reason a
 * stream would give it.
 */
static int jpeg_decode(struct codec_ctx *ctx, const struct codec_src *src,
		       void *dst, size_t cap, struct codec_info *info,
		       struct diag *d)
{
	struct jroi_out out;
	int err = jpeg_probe(ctx, src, info, d);

	if (err)
		return err;
	if (info->size > cap)
		return diag_set(d, LOADER_ETOOBIG,
				"jpeg decodes to %zu bytes, room for %zu",
				info->size, cap);
	return jroi_decode(ctx->jd, src->data, src->len, NULL, dst, 0, cap,
			   &out, d);
}

const struct codec_ops codec_jpeg_ops = {
	.name = "jpeg",
	.probe = jpeg_probe,
	.decode = jpeg_decode,
};
