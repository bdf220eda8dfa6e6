/*
 * test_jroi.c - region-of-interest, DCT-scaled JPEG decoding against
 * TurboJPEG's full decode at the same scale, cropped; headers; damaged
 * data; the pixel limit; the scale table. The segment path too: the same
 * images transcoded to restart segments, decoded from the segments that
 * cover each region, against the original's full decode.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h> /* jpeglib.h needs FILE and size_t first */

#include <criterion/criterion.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include "diag.h"
#include "jroi.h"
#include "jrst.h"
#include "loader_error.h"
#include "../unit_util.h"
#include "../ut_jpeg.h"
#include "../ut_jrst.h"

/* Odd sizes whose scaled sizes differ for every num/8, 1..8. */
#define IMG_W 203
#define IMG_H 157

struct variant {
	const char *name;
	int pf; /* TJPF_RGB, TJPF_GRAY or TJPF_CMYK */
	int subsamp;
	int flags;
	uint32_t components;
	uint32_t channels;
	enum jroi_cs cs;
	bool progressive;
};

static const struct variant variants[] = {
	{ "rgb420", TJPF_RGB, TJSAMP_420, 0, 3, 3, JROI_CS_YCBCR, false },
	{ "rgb444", TJPF_RGB, TJSAMP_444, 0, 3, 3, JROI_CS_YCBCR, false },
	{ "rgb422", TJPF_RGB, TJSAMP_422, 0, 3, 3, JROI_CS_YCBCR, false },
	{ "rgb440", TJPF_RGB, TJSAMP_440, 0, 3, 3, JROI_CS_YCBCR, false },
	{ "rgb411", TJPF_RGB, TJSAMP_411, 0, 3, 3, JROI_CS_YCBCR, false },
	{ "gray", TJPF_GRAY, TJSAMP_GRAY, 0, 1, 1, JROI_CS_GRAY, false },
	{ "prog420", TJPF_RGB, TJSAMP_420, TJFLAG_PROGRESSIVE, 3, 3,
	  JROI_CS_YCBCR, true },
	{ "proggray", TJPF_GRAY, TJSAMP_GRAY, TJFLAG_PROGRESSIVE, 1, 1,
	  JROI_CS_GRAY, true },
	/* TurboJPEG stores CMYK as YCCK, subsampled like YCbCr */
	{ "cmyk420", TJPF_CMYK, TJSAMP_420, 0, 4, 3, JROI_CS_YCCK, false },
	{ "cmyk444", TJPF_CMYK, TJSAMP_444, 0, 4, 3, JROI_CS_YCCK, false },
};

#define NVARIANTS (sizeof(variants) / sizeof(variants[0]))

static struct jroi_dec *dec;

static void dec_setup(void)
{
	cr_assert_eq(jroi_new(&dec, 0), 0);
}

static void dec_teardown(void)
{
	jroi_free(dec);
	dec = NULL;
}

/*
 * Gradients, a disc and noise: texture in every block, so that a chroma
 * sample taken from the wrong column shows in the output.
 */
static void picture(unsigned char *px, uint32_t w, uint32_t h, uint32_t ch,
		    uint64_t seed)
{
	ut_picture(px, w, h, ch, (unsigned)seed);
	for (size_t i = 0; i < (size_t)w * h * ch; i++) {
		int v = px[i] + (int)(ut_rand(&seed) % 61) - 30;

		px[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
	}
}

/* Encode a variant of the test picture; free with tjFree(). */
static unsigned char *encode(const struct variant *v, uint32_t w, uint32_t h,
			     size_t *len)
{
	uint32_t ch = (uint32_t)tjPixelSize[v->pf];
	unsigned char *px = malloc((size_t)w * h * ch);
	unsigned char *jpg = NULL;
	unsigned long n = 0;
	tjhandle tc = tjInitCompress();

	cr_assert_not_null(px);
	cr_assert_not_null(tc);
	picture(px, w, h, ch, 42);
	cr_assert_eq(tjCompress2(tc, px, (int)w, 0, (int)h, v->pf, &jpg, &n,
				 v->subsamp, 90, v->flags),
		     0, "%s: %s", v->name, tjGetErrorStr2(tc));
	tjDestroy(tc);
	free(px);
	*len = n;
	return jpg;
}

/*
 * TurboJPEG's full decode at num/8 (default flags: accurate IDCT, fancy
 * upsampling), converted to RGB for CMYK the way libjpeg-turbo's tools
 * do it, in floating point. Returns a malloc'd image of *sw x *sh.
 */
static unsigned char *reference(const struct variant *v,
				const unsigned char *jpg, size_t len,
				uint32_t num, uint32_t *sw, uint32_t *sh)
{
	tjscalingfactor sf = { (int)num, 8 };
	tjhandle td = tjInitDecompress();
	int w, h, sub, cs, pf = v->pf;
	size_t n;
	unsigned char *px;

	cr_assert_not_null(td);
	cr_assert_eq(tjDecompressHeader3(td, jpg, len, &w, &h, &sub, &cs), 0);
	*sw = (uint32_t)TJSCALED(w, sf);
	*sh = (uint32_t)TJSCALED(h, sf);
	n = (size_t)*sw * *sh;
	px = malloc(n * (size_t)tjPixelSize[pf]);
	cr_assert_not_null(px);
	cr_assert_eq(tjDecompress2(td, jpg, len, px, (int)*sw, 0, (int)*sh, pf,
				   TJFLAG_STOPONWARNING),
		     0, "%s at %u/8: %s", v->name, num, tjGetErrorStr2(td));
	tjDestroy(td);
	if (pf == TJPF_CMYK) {
		for (size_t i = 0; i < n; i++) {
			const unsigned char *s = px + i * 4;
			double k = s[3];

			for (int c = 0; c < 3; c++)
				px[i * 3 + c] =
					(unsigned char)((double)s[c] * k /
								255.0 +
							0.5);
		}
	}
	return px;
}

/*
 * Decode req at a forced scale and compare every pixel with the
 * reference; also check the geometry in out against the request.
 */
static void check_region(const struct variant *v, const unsigned char *jpg,
			 size_t len, const unsigned char *ref, uint32_t sw,
			 uint32_t sh, const struct jroi_req *req)
{
	static unsigned char dst[IMG_W * IMG_H * 3];
	struct jroi_out out;
	struct diag d = { "" };
	uint32_t num = req->scale_num;
	int err;

	err = jroi_decode(dec, jpg, len, req, dst, 0, sizeof(dst), &out, &d);
	cr_assert_eq(err, 0, "%s %ux%u+%u+%u at %u/8: %s", v->name, req->w,
		     req->h, req->x, req->y, num, d.msg);
	cr_assert_eq(out.scale_num, num);
	cr_assert_eq(out.channels, v->channels);
	cr_assert_eq(out.scaled_w, sw);
	cr_assert_eq(out.scaled_h, sh);
	cr_assert_eq(out.x0, req->x * num / 8);
	cr_assert_eq(out.y0, req->y * num / 8);
	cr_assert_eq(out.x0 + out.width, ((req->x + req->w) * num + 7) / 8);
	cr_assert_eq(out.y0 + out.height, ((req->y + req->h) * num + 7) / 8);
	cr_assert(out.roi_x >= 0 && out.roi_x < 1 && out.roi_y >= 0 &&
		  out.roi_y < 1);
	cr_assert(out.roi_x + out.roi_w <= out.width + 1e-9 &&
		  out.roi_y + out.roi_h <= out.height + 1e-9);
	cr_assert_float_eq(out.roi_w, req->w * num / 8.0, 1e-9);

	for (uint32_t r = 0; r < out.height; r++) {
		const unsigned char *a =
			dst + (size_t)r * out.width * out.channels;
		const unsigned char *b =
			ref +
			((size_t)(out.y0 + r) * sw + out.x0) * out.channels;

		for (uint32_t i = 0; i < out.width * out.channels; i++)
			cr_assert_eq(
				a[i], b[i],
				"%s %ux%u+%u+%u at %u/8: row %u byte %u: %u, full decode %u",
				v->name, req->w, req->h, req->x, req->y, num, r,
				i, a[i], b[i]);
	}
}

/* ------------------------------------------------------------ bit-exact */

static const struct jroi_req fixed_crops[] = {
	{ 0, 0, IMG_W, IMG_H, 0, 0, 0 }, /* the whole image */
	{ 0, 0, 1, 1, 0, 0, 0 },	 /* corners, one pixel */
	{ IMG_W - 1, 0, 1, 1, 0, 0, 0 },
	{ 0, IMG_H - 1, 1, 1, 0, 0, 0 },
	{ IMG_W - 1, IMG_H - 1, 1, 1, 0, 0, 0 },
	{ 101, 77, 1, 1, 0, 0, 0 },  /* one pixel inside */
	{ 16, 16, 16, 16, 0, 0, 0 }, /* iMCU-aligned */
	{ 15, 15, 18, 18, 0, 0, 0 }, /* one short of aligned */
	{ 17, 9, 64, 48, 0, 0, 0 },  /* odd offsets */
	{ 1, 1, 5, 3, 0, 0, 0 },
	{ 100, 0, IMG_W - 100, IMG_H, 0, 0, 0 }, /* right part */
	{ 0, 80, IMG_W, IMG_H - 80, 0, 0, 0 },	 /* bottom part */
	{ 33, 45, 111, 99, 0, 0, 0 },
	{ 7, IMG_H - 7, 190, 7, 0, 0, 0 }, /* thin strips */
	{ IMG_W - 3, 2, 3, 150, 0, 0, 0 },
	{ 31, 31, 2, 2, 0, 0, 0 },
	{ 32, 32, 2, 2, 0, 0, 0 },
};

#define NFIXED	(sizeof(fixed_crops) / sizeof(fixed_crops[0]))
#define NRANDOM 40

static void check_variant(const struct variant *v)
{
	size_t len;
	unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);

	for (uint32_t num = 1; num <= 8; num++) {
		uint32_t sw, sh;
		unsigned char *ref = reference(v, jpg, len, num, &sw, &sh);
		uint64_t seed = 1000 + num;

		for (size_t i = 0; i < NFIXED + NRANDOM; i++) {
			struct jroi_req req;

			if (i < NFIXED) {
				req = fixed_crops[i];
			} else {
				req.w = 1 + (uint32_t)(ut_rand(&seed) % IMG_W);
				req.h = 1 + (uint32_t)(ut_rand(&seed) % IMG_H);
				req.x = (uint32_t)(ut_rand(&seed) %
						   (IMG_W - req.w + 1));
				req.y = (uint32_t)(ut_rand(&seed) %
						   (IMG_H - req.h + 1));
			}
			req.min_w = req.min_h = 0;
			req.scale_num = num;
			check_region(v, jpg, len, ref, sw, sh, &req);
		}
		free(ref);
	}
	tjFree(jpg);
}

Test(jroi, rgb420, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[0]);
}

Test(jroi, rgb444, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[1]);
}

Test(jroi, rgb422, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[2]);
}

Test(jroi, rgb440, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[3]);
}

Test(jroi, rgb411, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[4]);
}

Test(jroi, gray, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[5]);
}

Test(jroi, progressive, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[6]);
	check_variant(&variants[7]);
}

Test(jroi, cmyk, .init = dec_setup, .fini = dec_teardown)
{
	check_variant(&variants[8]);
	check_variant(&variants[9]);
}

/* A NULL request is the whole image at 8/8, packed. */
Test(jroi, whole_image, .init = dec_setup, .fini = dec_teardown)
{
	static unsigned char dst[IMG_W * IMG_H * 3];
	const struct variant *v = &variants[0];
	struct jroi_out out;
	struct diag d = { "" };
	uint32_t sw, sh;
	size_t len;
	unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);
	unsigned char *ref = reference(v, jpg, len, 8, &sw, &sh);

	cr_assert_eq(
		jroi_decode(dec, jpg, len, NULL, dst, 0, sizeof(dst), &out, &d),
		0, "%s", d.msg);
	cr_assert_eq(out.width, IMG_W);
	cr_assert_eq(out.height, IMG_H);
	cr_assert_eq(out.scale_num, 8);
	cr_assert_eq(memcmp(dst, ref, sizeof(dst)), 0);
	free(ref);
	tjFree(jpg);
}

/* Rows land dst_stride apart; the bytes between rows are not touched. */
Test(jroi, stride, .init = dec_setup, .fini = dec_teardown)
{
	const struct variant *v = &variants[0];
	struct jroi_req req = { 10, 20, 50, 30, 0, 0, 8 };
	size_t stride = 50 * 3 + 7, cap = 29 * stride + 50 * 3;
	unsigned char *dst = malloc(cap);
	struct jroi_out out;
	struct diag d = { "" };
	uint32_t sw, sh;
	size_t len;
	unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);
	unsigned char *ref = reference(v, jpg, len, 8, &sw, &sh);

	cr_assert_not_null(dst);
	memset(dst, 0xa5, cap);
	cr_assert_eq(
		jroi_decode(dec, jpg, len, &req, dst, stride, cap, &out, &d), 0,
		"%s", d.msg);
	for (uint32_t r = 0; r < 30; r++) {
		cr_assert_eq(memcmp(dst + r * stride,
				    ref + ((size_t)(20 + r) * sw + 10) * 3,
				    50 * 3),
			     0, "row %u", r);
		for (size_t i = 50 * 3; r < 29 && i < stride; i++)
			cr_assert_eq(dst[r * stride + i], 0xa5);
	}
	/* One byte short, or a stride shorter than a row: refused */
	cr_assert_eq(jroi_decode(dec, jpg, len, &req, dst, stride, cap - 1,
				 &out, &d),
		     LOADER_ETOOBIG);
	cr_assert_eq(jroi_decode(dec, jpg, len, &req, dst, 50 * 3 - 1, cap,
				 &out, &d),
		     LOADER_ETOOBIG);
	cr_assert_eq(jroi_decode(dec, jpg, len, &req, dst, stride, 0, &out, &d),
		     LOADER_ETOOBIG);
	free(dst);
	free(ref);
	tjFree(jpg);
}

/* -------------------------------------------------------------- header */

Test(jroi, header, .init = dec_setup, .fini = dec_teardown)
{
	for (size_t i = 0; i < NVARIANTS; i++) {
		const struct variant *v = &variants[i];
		struct jroi_info info;
		struct diag d = { "" };
		size_t len;
		unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);

		cr_assert_eq(jroi_header(dec, jpg, len, &info, &d), 0, "%s: %s",
			     v->name, d.msg);
		cr_expect_eq(info.width, IMG_W, "%s", v->name);
		cr_expect_eq(info.height, IMG_H, "%s", v->name);
		cr_expect_eq(info.components, v->components, "%s", v->name);
		cr_expect_eq(info.channels, v->channels, "%s", v->name);
		cr_expect_eq(info.cs, v->cs, "%s", v->name);
		cr_expect_eq(info.progressive, v->progressive, "%s", v->name);
		tjFree(jpg);
	}
}

/* ---------------------------------------------------------- scale table */

Test(jroi, pick_scale)
{
	static const struct {
		struct jroi_req req;
		uint32_t w, h, num;
	} t[] = {
		/* whole 500x375 image to 224: 4/8 gives 250x188 < 224 tall */
		{ { 0, 0, 500, 375, 224, 224, 0 }, 500, 375, 8 },
		{ { 0, 0, 500, 448, 224, 224, 0 }, 500, 448, 4 },
		{ { 0, 0, 500, 447, 224, 224, 0 }, 500, 447, 8 },
		{ { 0, 0, 1000, 900, 224, 224, 0 }, 1000, 900, 2 },
		{ { 0, 0, 2000, 1800, 224, 224, 0 }, 2000, 1800, 1 },
		{ { 0, 0, 4000, 3000, 224, 224, 0 }, 4000, 3000, 1 },
		/* a small crop is enlarged by the resampler, from 8/8 */
		{ { 10, 10, 100, 100, 224, 224, 0 }, 500, 375, 8 },
		/* no minimum: the cheapest scale */
		{ { 0, 0, 500, 375, 0, 0, 0 }, 500, 375, 1 },
		/* forced scales, and out of range */
		{ { 0, 0, 500, 375, 224, 224, 7 }, 500, 375, 7 },
		{ { 0, 0, 500, 375, 0, 0, 16 }, 500, 375, 16 },
		{ { 0, 0, 500, 375, 0, 0, 17 }, 500, 375, 0 },
		/* regions outside the image */
		{ { 1, 0, 500, 375, 0, 0, 0 }, 500, 375, 0 },
		{ { 0, 0, 0, 375, 0, 0, 0 }, 500, 375, 0 },
		{ { 0, 4294967295u, 1, 1, 0, 0, 0 }, 500, 375, 0 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		cr_expect_eq(jroi_pick_scale(&t[i].req, t[i].w, t[i].h),
			     t[i].num, "row %zu", i);
}

/* The scale picked through jroi_decode() gives at least min size. */
Test(jroi, auto_scale, .init = dec_setup, .fini = dec_teardown)
{
	static unsigned char dst[800 * 600 * 3];
	struct variant v = variants[0];
	struct jroi_req req = { 0, 0, 800, 600, 100, 100, 0 };
	struct jroi_out out;
	struct diag d = { "" };
	size_t len;
	unsigned char *jpg = encode(&v, 800, 600, &len);

	cr_assert_eq(
		jroi_decode(dec, jpg, len, &req, dst, 0, sizeof(dst), &out, &d),
		0, "%s", d.msg);
	cr_expect_eq(out.scale_num, 2);
	cr_expect_eq(out.width, 200);
	cr_expect_eq(out.height, 150);
	req = (struct jroi_req){ 100, 100, 300, 300, 224, 224, 0 };
	cr_assert_eq(
		jroi_decode(dec, jpg, len, &req, dst, 0, sizeof(dst), &out, &d),
		0, "%s", d.msg);
	cr_expect_eq(out.scale_num, 8);
	cr_expect(out.roi_w >= 224 && out.roi_h >= 224);
	tjFree(jpg);
}

/* ------------------------------------------------------- bad input */

static int decode_all(const void *src, size_t len, struct diag *d)
{
	static unsigned char dst[IMG_W * IMG_H * 3];
	struct jroi_out out;

	diag_clear(d);
	return jroi_decode(dec, src, len, NULL, dst, 0, sizeof(dst), &out, d);
}

Test(jroi, empty, .init = dec_setup, .fini = dec_teardown)
{
	struct jroi_info info;
	struct diag d = { "" };
	static const unsigned char junk[64] = { 0xff, 0xd8, 0x00, 0x12 };

	cr_expect_eq(decode_all("", 0, &d), LOADER_EDECODE);
	cr_expect_eq(decode_all(NULL, 0, &d), LOADER_EDECODE);
	cr_expect_eq(jroi_header(dec, "", 0, &info, &d), LOADER_EDECODE);
	cr_expect_eq(decode_all("not a jpeg at all", 17, &d), LOADER_EDECODE);
	cr_expect(strstr(d.msg, "jpeg") != NULL, "message: %s", d.msg);
	cr_expect_eq(decode_all(junk, sizeof(junk), &d), LOADER_EDECODE);
	cr_expect_eq(jroi_header(dec, junk, sizeof(junk), &info, &d),
		     LOADER_EDECODE);
}

/*
 * Every truncation fails the whole-image decode with a message and
 * leaves the decoder usable; "premature end of data" is one of them.
 */
Test(jroi, truncated, .init = dec_setup, .fini = dec_teardown)
{
	for (size_t vi = 0; vi < NVARIANTS; vi++) {
		const struct variant *v = &variants[vi];
		struct diag d = { "" };
		size_t len;
		unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);

		for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
			cr_assert_eq(decode_all(jpg, cut, &d), LOADER_EDECODE,
				     "%s cut at %zu of %zu", v->name, cut, len);
			cr_assert(d.msg[0] != '\0');
		}
		cr_assert_eq(decode_all(jpg, len - 2, &d), LOADER_EDECODE,
			     "%s without EOI", v->name);
		cr_assert_eq(decode_all(jpg, len, &d), 0, "%s: %s", v->name,
			     d.msg);
		tjFree(jpg);
	}
}

/*
 * Corrupted bytes anywhere: an error or some image, never a crash, and
 * the decoder still decodes a good image afterwards. Regions of every
 * kind go through the damaged data too.
 */
Test(jroi, corrupt, .init = dec_setup, .fini = dec_teardown)
{
	static unsigned char dst[IMG_W * IMG_H * 3];
	uint64_t seed = 7;
	unsigned errors = 0;

	for (size_t vi = 0; vi < NVARIANTS; vi++) {
		const struct variant *v = &variants[vi];
		struct diag d = { "" };
		size_t len;
		unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);
		unsigned char *bad = malloc(len);

		cr_assert_not_null(bad);
		for (int k = 0; k < 60; k++) {
			struct jroi_req req = {
				3, 5, 100, 90, 0, 0, 1 + (uint32_t)(k % 8)
			};
			struct jroi_out out;

			memcpy(bad, jpg, len);
			for (int j = 0; j < 1 + k % 4; j++)
				bad[ut_rand(&seed) % len] ^=
					(unsigned char)(1 +
							ut_rand(&seed) % 255);
			if (decode_all(bad, len, &d) != 0)
				errors++;
			(void)jroi_decode(dec, bad, len, &req, dst, 0,
					  sizeof(dst), &out, &d);
		}
		cr_assert_eq(decode_all(jpg, len, &d), 0, "%s: %s", v->name,
			     d.msg);
		free(bad);
		tjFree(jpg);
	}
	cr_expect(errors > 0, "no corruption was ever detected");
}

/* The header's size bounds the decode before libjpeg allocates for it. */
Test(jroi, pixel_limit)
{
	const struct variant *v = &variants[0];
	struct jroi_dec *small = NULL;
	struct jroi_info info;
	struct diag d = { "" };
	size_t len;
	unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);
	static unsigned char dst[IMG_W * IMG_H * 3];
	struct jroi_out out;

	cr_assert_eq(jroi_new(&small, (uint64_t)IMG_W * IMG_H - 1), 0);
	cr_expect_eq(jroi_header(small, jpg, len, &info, &d), LOADER_ETOOBIG);
	cr_expect_eq(info.width, IMG_W, "header still described");
	cr_expect_eq(jroi_decode(small, jpg, len, NULL, dst, 0, sizeof(dst),
				 &out, &d),
		     LOADER_ETOOBIG);
	cr_expect(strstr(d.msg, "limit") != NULL, "message: %s", d.msg);
	jroi_free(small);

	cr_assert_eq(jroi_new(&small, (uint64_t)IMG_W * IMG_H), 0);
	cr_expect_eq(jroi_decode(small, jpg, len, NULL, dst, 0, sizeof(dst),
				 &out, &d),
		     0, "%s", d.msg);

	/* A tiny file claiming 65000x65000 pixels: refused by default. */
	jroi_free(small);
	cr_assert_eq(jroi_new(&small, 0), 0);
	for (size_t i = 0; i + 9 < len; i++) {
		if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
			jpg[i + 5] = jpg[i + 7] = 0xfd;
			jpg[i + 6] = jpg[i + 8] = 0xe8;
			break;
		}
	}
	cr_expect_eq(jroi_decode(small, jpg, len, NULL, dst, 0, sizeof(dst),
				 &out, &d),
		     LOADER_ETOOBIG, "%s", d.msg);
	cr_expect_eq(jroi_header(small, jpg, len, &info, &d), LOADER_ETOOBIG);
	cr_expect_eq(info.width, 65000);
	jroi_free(small);
	jroi_free(NULL);
	tjFree(jpg);
}

/*
 * A progressive JPEG of 190 scans (a scan bomb: each scan is a pass over
 * the whole image, whatever the region) is damaged data, caught in its
 * 65th scan; one of libjpeg's 10 scans decodes, before and after.
 */
Test(jroi, scan_bomb, .init = dec_setup, .fini = dec_teardown)
{
	static unsigned char px[256 * 256 * 3], dst[256 * 256 * 3];
	struct jroi_req req = { .x = 16, .y = 16, .w = 32, .h = 32 };
	unsigned char *bomb, *fine;
	size_t blen, flen;
	struct jroi_out out;
	struct diag d = { "" };

	picture(px, 256, 256, 3, 7);
	bomb = ut_encode_scans(px, 256, 256, &blen);
	fine = ut_encode_lj(px, 256, 256, JCS_RGB, true, false, &flen);
	cr_expect_eq(jroi_decode(dec, fine, flen, &req, dst, 0, sizeof(dst),
				 &out, &d),
		     0, "%s", d.msg);
	cr_expect_eq(jroi_decode(dec, bomb, blen, &req, dst, 0, sizeof(dst),
				 &out, &d),
		     LOADER_EDECODE);
	cr_expect(strstr(d.msg, "more than 64 scans"), "%s", d.msg);
	cr_expect_eq(jroi_decode(dec, bomb, blen, NULL, dst, 0, sizeof(dst),
				 &out, &d),
		     LOADER_EDECODE, "the whole image too");
	cr_expect_eq(jroi_decode(dec, fine, flen, &req, dst, 0, sizeof(dst),
				 &out, &d),
		     0, "the decoder is fine after: %s", d.msg);
	free(bomb);
	free(fine);
}

/* Regions outside the image and forced scales out of range. */
Test(jroi, bad_request, .init = dec_setup, .fini = dec_teardown)
{
	static const struct jroi_req t[] = {
		{ 0, 0, 0, 1, 0, 0, 0 },
		{ 0, 0, IMG_W + 1, 1, 0, 0, 0 },
		{ IMG_W, 0, 1, 1, 0, 0, 0 },
		{ 0, IMG_H - 1, 1, 2, 0, 0, 0 },
		{ 4294967295u, 0, 2, 1, 0, 0, 0 },
		{ 0, 0, 1, 1, 0, 0, 17 },
	};
	static unsigned char dst[IMG_W * IMG_H * 3];
	const struct variant *v = &variants[0];
	struct jroi_out out;
	struct diag d = { "" };
	size_t len;
	unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		cr_expect_eq(jroi_decode(dec, jpg, len, &t[i], dst, 0,
					 sizeof(dst), &out, &d),
			     LOADER_ERANGE, "row %zu", i);
	cr_expect_eq(decode_all(jpg, len, &d), 0, "%s", d.msg);
	tjFree(jpg);
}

/* ------------------------------------------------------------ segments */

/*
 * The JPEG jpg re-written with the same coefficients and a restart
 * marker every interval MCUs, or every MCU row with in_rows, straight
 * through libjpeg (so that layouts jrst_transcode() never writes can be
 * tried too). Returns a malloc'd file and its length in *out_len.
 */
static unsigned char *restarted(const unsigned char *jpg, size_t len,
				unsigned interval, bool in_rows,
				size_t *out_len)
{
	struct jpeg_decompress_struct di;
	struct jpeg_compress_struct co;
	struct jpeg_error_mgr e1, e2;
	jvirt_barray_ptr *coefs;
	unsigned char *out = NULL, *copy;
	unsigned long n = 0;

	di.err = jpeg_std_error(&e1);
	co.err = jpeg_std_error(&e2);
	jpeg_create_decompress(&di);
	jpeg_create_compress(&co);
	jpeg_mem_src(&di, jpg, (unsigned long)len);
	jpeg_read_header(&di, TRUE);
	coefs = jpeg_read_coefficients(&di);
	jpeg_copy_critical_parameters(&di, &co);
	if (in_rows)
		co.restart_in_rows = (int)interval;
	else
		co.restart_interval = interval;
	jpeg_mem_dest(&co, &out, &n);
	jpeg_write_coefficients(&co, coefs);
	jpeg_finish_compress(&co);
	jpeg_finish_decompress(&di);
	jpeg_destroy_compress(&co);
	jpeg_destroy_decompress(&di);
	copy = malloc(n);
	cr_assert_not_null(copy);
	memcpy(copy, out, n);
	free(out);
	*out_len = n;
	return copy;
}

/*
 * The sub-JPEG the segment path cuts for req at scale num (the rectangle
 * jrst_cover_scaled() gives, as jroi uses it), into buf;
 * returns its length, or 0 when the file gives none. cover_for() says
 * whether the path cuts anything at all (not when the region and its
 * margin reach over the whole image).
 */
static bool cover_for(const unsigned char *jpg, size_t len,
		      const struct jroi_req *req, uint32_t num,
		      struct jrst_map *mp, struct jrst_rect *cp)
{
	struct jrst_map m;
	struct jrst_rect r = { req->x, req->y, req->w, req->h }, c;

	if (jrst_parse(jpg, len, &m, NULL))
		return false;
	jrst_cover_scaled(&m, &r, num, &c);
	*mp = m;
	*cp = c;
	return c.w != m.width || c.h != m.height;
}

static size_t cut_for(const unsigned char *jpg, size_t len,
		      const struct jroi_req *req, uint32_t num,
		      unsigned char *buf, size_t cap)
{
	struct jrst_map m;
	struct jrst_rect c;
	size_t n;

	if (!cover_for(jpg, len, req, num, &m, &c) ||
	    jrst_build(&m, jpg, len, &c, buf, cap, &n, NULL))
		return 0;
	return n;
}

/*
 * Every region of check_variant() and more, at every scale, decoded from
 * rst (v's test picture re-written with restart segments) and compared
 * with the full decode of the original; expect_segments: how many of the
 * decodes must have taken the segment path (every one but those of the
 * whole image), or 0 when none may.
 */
static void check_segmented_at(const struct variant *v, uint32_t w,
			       uint32_t h, const unsigned char *jpg,
			       size_t len, const unsigned char *rst,
			       size_t rst_len, bool expect_segments)
{
	struct jroi_counts c0, c1;
	uint64_t asked = 0;
	bool fixed = w == IMG_W && h == IMG_H;

	jroi_get_counts(dec, &c0);
	for (uint32_t num = 1; num <= 8; num++) {
		uint32_t sw, sh;
		unsigned char *ref = reference(v, jpg, len, num, &sw, &sh);
		uint64_t seed = 2000 + num + w * 7 + h;

		for (size_t i = fixed ? 0 : NFIXED; i < NFIXED + NRANDOM; i++) {
			struct jroi_req req;

			if (i < NFIXED) {
				req = fixed_crops[i];
			} else {
				req.w = 1 + (uint32_t)(ut_rand(&seed) % w);
				req.h = 1 + (uint32_t)(ut_rand(&seed) % h);
				req.x = (uint32_t)(ut_rand(&seed) %
						   (w - req.w + 1));
				req.y = (uint32_t)(ut_rand(&seed) %
						   (h - req.h + 1));
			}
			req.min_w = req.min_h = 0;
			req.scale_num = num;
			check_region(v, rst, rst_len, ref, sw, sh, &req);
			{
				struct jrst_map m;
				struct jrst_rect c;

				asked += cover_for(rst, rst_len, &req, num, &m,
						   &c);
			}
		}
		free(ref);
	}
	jroi_get_counts(dec, &c1);
	if (expect_segments)
		cr_assert_eq(c1.segments - c0.segments, asked,
			      "%s: %llu of %llu regions took the segment path",
			      v->name,
			      (unsigned long long)(c1.segments - c0.segments),
			      (unsigned long long)asked);
	else
		cr_assert_eq(c1.segments, c0.segments,
			     "%s: the segment path was taken", v->name);
}

static void check_segmented(const struct variant *v, const unsigned char *jpg,
			    size_t len, const unsigned char *rst,
			    size_t rst_len, bool expect_segments)
{
	check_segmented_at(v, IMG_W, IMG_H, jpg, len, rst, rst_len,
			   expect_segments);
}

/*
 * Every variant, transcoded by jrst with one and with four MCUs a
 * segment (four divides no row here: 203 pixels are 13, 26 or 51 MCUs,
 * so the transcoder falls back to one), and re-written by libjpeg with a
 * marker every MCU row: the same pixels as the original everywhere, from
 * the segments.
 */
Test(jroi_segments, every_variant, .init = dec_setup, .fini = dec_teardown)
{
	for (size_t vi = 0; vi < NVARIANTS; vi++) {
		const struct variant *v = &variants[vi];
		size_t len, rlen;
		unsigned char *jpg = encode(v, IMG_W, IMG_H, &len), *rst;

		for (uint32_t iv = 1; iv <= 4; iv += 3) {
			rst = ut_restart_copy(jpg, len, iv, true, &rlen);
			check_segmented(v, jpg, len, rst, rlen, true);
			free(rst);
		}
		rst = restarted(jpg, len, 1, true, &rlen);
		check_segmented(v, jpg, len, rst, rlen, true);
		free(rst);
		tjFree(jpg);
	}
}

/*
 * Other sizes: whole MCUs, one MCU row or column, tall and wide, with
 * one, two and four MCUs a segment where they divide the row.
 */
Test(jroi_segments, sizes, .init = dec_setup, .fini = dec_teardown)
{
	static const uint32_t sizes[][2] = {
		{ 64, 48 }, { 16, 160 }, { 300, 16 }, { 250, 100 },
		{ 17, 301 }, { 129, 65 }, { 8, 8 }, { 40, 24 },
	};

	for (size_t vi = 0; vi < NVARIANTS; vi++) {
		const struct variant *v = &variants[vi];

		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]);
		     si++) {
			uint32_t w = sizes[si][0], h = sizes[si][1];
			size_t len, rlen;
			unsigned char *jpg = encode(v, w, h, &len), *rst;

			for (uint32_t iv = 1; iv <= 4; iv *= 2) {
				rst = ut_restart_copy(jpg, len, iv, true, &rlen);
				check_segmented_at(v, w, h, jpg, len, rst,
						   rlen, true);
				free(rst);
			}
			tjFree(jpg);
		}
	}
}

/*
 * Intervals that straddle rows (5 MCUs of rows of 13), and files without
 * markers, take the region path, with the same pixels.
 */
Test(jroi_segments, straddling_interval, .init = dec_setup,
     .fini = dec_teardown)
{
	const struct variant *v = &variants[0];
	size_t len, rlen;
	unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);
	unsigned char *rst = restarted(jpg, len, 5, false, &rlen);

	check_segmented(v, jpg, len, rst, rlen, false);
	check_segmented(v, jpg, len, jpg, len, false);
	free(rst);
	tjFree(jpg);
}

/* With the segment path off, a segmented file decodes the old way. */
Test(jroi_segments, switch_off, .init = dec_setup, .fini = dec_teardown)
{
	const struct variant *v = &variants[0];
	size_t len, rlen;
	unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);
	unsigned char *rst = ut_restart_copy(jpg, len, 1, true, &rlen);

	jroi_set_segments(dec, false);
	check_segmented(v, jpg, len, rst, rlen, false);
	jroi_set_segments(dec, true);
	check_segmented(v, jpg, len, rst, rlen, true);
	free(rst);
	tjFree(jpg);
}

/*
 * Damage to a segmented file: flipped bytes, cut data, markers
 * renumbered or turned into data. The segment path gives an error, or
 * exactly what the region path gives for the same bytes, or, when only
 * the region path fails, exactly the undamaged file's pixels as long as
 * what it cut equals what it cuts from the undamaged file (the damage
 * was elsewhere). Never a crash, never other pixels.
 */
Test(jroi_segments, damaged, .init = dec_setup, .fini = dec_teardown)
{
	static unsigned char a[IMG_W * IMG_H * 3], b[IMG_W * IMG_H * 3],
		good[IMG_W * IMG_H * 3], s1[1 << 17], s2[1 << 17];
	uint64_t seed = 99;
	unsigned same = 0, failed = 0, spared = 0, inside = 0;

	for (size_t vi = 0; vi < NVARIANTS; vi++) {
		const struct variant *v = &variants[vi];
		size_t len, rlen;
		unsigned char *jpg = encode(v, IMG_W, IMG_H, &len);
		unsigned char *rst = ut_restart_copy(jpg, len, 1, true, &rlen);
		unsigned char *bad = malloc(rlen);
		struct jrst_map m;

		cr_assert_not_null(bad);
		cr_assert_eq(jrst_parse(rst, rlen, &m, NULL), 0);
		for (int k = 0; k < 160; k++) {
			struct jroi_req req = { 0 };
			struct jroi_out oa, ob, og;
			struct diag d = { "" };
			size_t blen = rlen, n1, n2, at;
			int ea, eb;

			req.w = 1 + (uint32_t)(ut_rand(&seed) % (IMG_W / 2));
			req.h = 1 + (uint32_t)(ut_rand(&seed) % (IMG_H / 2));
			req.x = (uint32_t)(ut_rand(&seed) % (IMG_W - req.w + 1));
			req.y = (uint32_t)(ut_rand(&seed) % (IMG_H - req.h + 1));
			req.scale_num = 1 + (uint32_t)(k % 8);
			memcpy(bad, rst, rlen);
			at = m.entropy + ut_rand(&seed) % (rlen - m.entropy);
			switch (k % 4) {
			case 0: /* one flipped byte of entropy-coded data */
				bad[at] ^= (unsigned char)(1 + ut_rand(&seed) % 255);
				break;
			case 1: /* cut short */
				blen = at;
				break;
			case 2: /* the next marker renumbered, or made data */
				while (at + 1 < rlen &&
				       !(bad[at] == 0xFF && bad[at + 1] >= 0xD0 &&
					 bad[at + 1] <= 0xD7))
					at++;
				if (at + 1 < rlen)
					bad[at + 1] =
						k % 8 == 2 ?
							0x00 :
							(unsigned char)(0xD0 +
									(bad[at + 1] + 1) % 8);
				break;
			default: /* one byte anywhere, header included */
				bad[ut_rand(&seed) % rlen] ^=
					(unsigned char)(1 + ut_rand(&seed) % 255);
			}
			ea = jroi_decode(dec, bad, blen, &req, a, 0, sizeof(a),
					 &oa, &d);
			jroi_set_segments(dec, false);
			eb = jroi_decode(dec, bad, blen, &req, b, 0, sizeof(b),
					 &ob, &d);
			jroi_set_segments(dec, true);
			if (ea) {
				failed++;
				continue;
			}
			if (!eb) {
				cr_assert_eq(memcmp(&oa, &ob, sizeof(oa)), 0,
					     "%s case %d: geometry differs",
					     v->name, k);
				cr_assert_eq(memcmp(a, b,
						    (size_t)oa.width * oa.height *
							    oa.channels),
					     0, "%s case %d: pixels differ",
					     v->name, k);
				same++;
				continue;
			}
			n1 = cut_for(bad, blen, &req, req.scale_num, s1,
				     sizeof(s1));
			n2 = cut_for(rst, rlen, &req, req.scale_num, s2,
				     sizeof(s2));
			cr_assert(n1 > 0, "%s case %d: only the region path failed, yet no segments were cut",
				  v->name, k);
			if (n1 != n2 || memcmp(s1, s2, n1)) {
				/* damage inside the region that libjpeg missed */
				inside++;
				continue;
			}
			cr_assert_eq(jroi_decode(dec, rst, rlen, &req, good, 0,
						 sizeof(good), &og, &d),
				     0);
			cr_assert_eq(memcmp(&oa, &og, sizeof(oa)), 0);
			cr_assert_eq(memcmp(a, good,
					    (size_t)oa.width * oa.height *
						    oa.channels),
				     0,
				     "%s case %d: pixels differ from the undamaged file's",
				     v->name, k);
			spared++;
		}
		free(bad);
		free(rst);
		tjFree(jpg);
	}
	cr_log_info("damaged: %u failed, %u as the region path, %u spared, %u inside",
		    failed, same, spared, inside);
	cr_expect(failed > 0 && same > 0 && spared > 0,
		  "failed %u, same %u, spared %u: every outcome should occur",
		  failed, same, spared);
}
