/*
 * test_jpeg.c - one JPEG decode path: the codec table's jpeg entry (what
 * verify decodes with), the stream's decoder (jroi_header() then
 * jroi_decode(), as imgpipe calls them) and pack's scaled decode
 * (jpg_scale_for() then jpg_decode_scaled(), as --max-side calls them)
 * give the same channels, sizes and pixels for gray, RGB (4:2:0 and
 * 4:4:4), CMYK, YCCK and progressive JPEGs, equal to libjpeg-turbo's own
 * full decode; and the same error code and reason for damaged ones and
 * for ones above the pixel limit.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include "codec.h"
#include "diag.h"
#include "jpeg.h"
#include "jroi.h"
#include "loader_error.h"
#include "../unit_util.h"
#include "../ut_jpeg.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Odd sizes whose scaled sizes differ for every num/8, 1..8. */
#define IMG_W 203
#define IMG_H 157

/* How a test JPEG is written. */
struct kind {
	const char *name;
	int pf;	     /* TJPF_GRAY, TJPF_RGB or TJPF_CMYK */
	int subsamp; /* TurboJPEG's, for colour */
	bool progressive;
	bool plain_cmyk;   /* libjpeg, CMYK stored as is (not YCCK) */
	enum jroi_cs cs;   /* what the header says */
	uint32_t channels; /* what every path decodes to */
};

static const struct kind kinds[] = {
	{ "gray", TJPF_GRAY, TJSAMP_GRAY, false, false, JROI_CS_GRAY, 1 },
	{ "rgb420", TJPF_RGB, TJSAMP_420, false, false, JROI_CS_YCBCR, 3 },
	{ "rgb444", TJPF_RGB, TJSAMP_444, false, false, JROI_CS_YCBCR, 3 },
	{ "cmyk", TJPF_CMYK, 0, false, true, JROI_CS_CMYK, 3 },
	/* TurboJPEG stores CMYK as YCCK, subsampled like YCbCr */
	{ "ycck420", TJPF_CMYK, TJSAMP_420, false, false, JROI_CS_YCCK, 3 },
	{ "ycck444", TJPF_CMYK, TJSAMP_444, false, false, JROI_CS_YCCK, 3 },
	{ "prog_gray", TJPF_GRAY, TJSAMP_GRAY, true, false, JROI_CS_GRAY, 1 },
	{ "prog_rgb420", TJPF_RGB, TJSAMP_420, true, false, JROI_CS_YCBCR, 3 },
	{ "prog_cmyk", TJPF_CMYK, 0, true, true, JROI_CS_CMYK, 3 },
	{ "prog_ycck420", TJPF_CMYK, TJSAMP_420, true, false, JROI_CS_YCCK, 3 },
};

static struct codec_ctx *ctx;
static struct jroi_dec *dec;

static void setup(void)
{
	cr_assert_eq(codec_ctx_new(&ctx, 0), 0);
	cr_assert_eq(jroi_new(&dec, 0), 0);
}

static void teardown(void)
{
	codec_ctx_free(ctx);
	jroi_free(dec);
	ctx = NULL;
	dec = NULL;
}

/* Texture in every block: a misplaced chroma sample shows. */
static unsigned char *picture(uint32_t ch, uint64_t seed)
{
	size_t n = (size_t)IMG_W * IMG_H * ch;
	unsigned char *px = malloc(n);

	cr_assert_not_null(px);
	ut_picture(px, IMG_W, IMG_H, ch, (unsigned)seed);
	for (size_t i = 0; i < n; i++) {
		int v = px[i] + (int)(ut_rand(&seed) % 41) - 20;

		px[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
	}
	return px;
}

/* A JPEG of kind k; free with free(). */
static unsigned char *encode(const struct kind *k, size_t *len)
{
	uint32_t ch = (uint32_t)tjPixelSize[k->pf];
	unsigned char *px = picture(ch, 7), *jpg;

	if (k->plain_cmyk)
		jpg = ut_encode_cmyk(px, IMG_W, IMG_H, k->progressive, len);
	else
		jpg = ut_encode_tj(px, IMG_W, IMG_H, k->pf, k->subsamp,
				   k->progressive, len);
	free(px);
	return jpg;
}

/*
 * libjpeg-turbo's own full decode at num/8 (TurboJPEG, default flags):
 * gray to 1 channel, colour to RGB, CMYK and YCCK to CMYK, then to RGB
 * by the inverted-CMYK formula R = C * K / 255, rounded. Returns a
 * malloc'd image of *w x *h x *ch.
 */
static unsigned char *reference(const unsigned char *jpg, size_t len,
				uint32_t num, uint32_t *w, uint32_t *h,
				uint32_t *ch)
{
	tjscalingfactor sf = { (int)num, 8 };
	tjhandle td = tjInitDecompress();
	int iw, ih, sub, cs, pf;
	unsigned char *px;
	size_t n;

	cr_assert_not_null(td);
	cr_assert_eq(tjDecompressHeader3(td, jpg, (unsigned long)len, &iw, &ih,
					 &sub, &cs),
		     0);
	pf = cs == TJCS_GRAY			? TJPF_GRAY :
	     cs == TJCS_CMYK || cs == TJCS_YCCK ? TJPF_CMYK :
						  TJPF_RGB;
	*w = (uint32_t)TJSCALED(iw, sf);
	*h = (uint32_t)TJSCALED(ih, sf);
	n = (size_t)*w * *h;
	px = malloc(n * (size_t)tjPixelSize[pf]);
	cr_assert_not_null(px);
	cr_assert_eq(tjDecompress2(td, jpg, (unsigned long)len, px, (int)*w, 0,
				   (int)*h, pf, TJFLAG_STOPONWARNING),
		     0, "%s", tjGetErrorStr2(td));
	tjDestroy(td);
	*ch = pf == TJPF_GRAY ? 1 : 3;
	if (pf == TJPF_CMYK) {
		for (size_t i = 0; i < n; i++) {
			const unsigned char *s = px + i * 4;

			for (int c = 0; c < 3; c++)
				px[i * 3 + c] =
					(unsigned char)((2u * s[c] * s[3] +
							 255u) /
							510u);
		}
	}
	return px;
}

/* What one entry point made of a JPEG. */
struct result {
	int err;
	char msg[DIAG_MAX];
	uint32_t w, h, ch;
	unsigned char *px; /* malloc'd; NULL after an error */
};

static void result_free(struct result *r)
{
	free(r->px);
	r->px = NULL;
}

/* The codec table's jpeg entry, as verify calls it: probe, then decode. */
static void via_codec(struct codec_ctx *c, const void *jpg, size_t len,
		      struct result *r)
{
	const struct codec_ops *ops = codec_get(CODEC_JPEG);
	struct codec_src src = { .data = jpg, .len = len };
	struct codec_info info;
	struct diag d = { "" };

	memset(r, 0, sizeof(*r));
	r->err = ops->probe(c, &src, &info, &d);
	if (!r->err) {
		r->px = malloc(info.size + 1);
		cr_assert_not_null(r->px);
		r->px[info.size] = 0xa5;
		r->err = ops->decode(c, &src, r->px, info.size, &info, &d);
		if (!r->err)
			cr_expect_eq(r->px[info.size], 0xa5,
				     "wrote past %zu bytes", info.size);
	}
	r->w = info.width;
	r->h = info.height;
	r->ch = info.channels;
	snprintf(r->msg, sizeof(r->msg), "%s", d.msg);
	if (r->err)
		result_free(r);
}

/* The codec table's decode alone, with room for any test image. */
static void via_decode(struct codec_ctx *c, const void *jpg, size_t len,
		       struct result *r)
{
	const struct codec_ops *ops = codec_get(CODEC_JPEG);
	struct codec_src src = { .data = jpg, .len = len };
	struct codec_info info;
	struct diag d = { "" };
	size_t cap = (size_t)IMG_W * IMG_H * 3;

	memset(r, 0, sizeof(*r));
	r->px = malloc(cap);
	cr_assert_not_null(r->px);
	r->err = ops->decode(c, &src, r->px, cap, &info, &d);
	r->w = info.width;
	r->h = info.height;
	r->ch = info.channels;
	snprintf(r->msg, sizeof(r->msg), "%s", d.msg);
	if (r->err)
		result_free(r);
}

/*
 * The stream's decoder, as imgpipe calls it for a crop of the whole
 * image to its own size: the header, then a region decode whose scale
 * jroi picks (8/8, since every coarser scale is too small).
 */
static void via_stream(struct jroi_dec *jd, const void *jpg, size_t len,
		       struct result *r)
{
	struct jroi_info info;
	struct jroi_req q;
	struct jroi_out out;
	struct diag d = { "" };
	size_t cap;

	memset(r, 0, sizeof(*r));
	r->err = jroi_header(jd, jpg, len, &info, &d);
	if (!r->err) {
		q = (struct jroi_req){ 0,	   0,
				       info.width, info.height,
				       info.width, info.height,
				       0 };
		cap = (size_t)info.width * info.height * info.channels;
		r->px = malloc(cap);
		cr_assert_not_null(r->px);
		r->err = jroi_decode(jd, jpg, len, &q, r->px, 0, cap, &out, &d);
		if (!r->err)
			cr_expect_eq(out.scale_num, 8);
		r->w = out.width;
		r->h = out.height;
		r->ch = out.channels;
	}
	snprintf(r->msg, sizeof(r->msg), "%s", d.msg);
	if (r->err)
		result_free(r);
}

/*
 * Pack's --max-side decode, as src_folder.c calls it: the scale for a
 * longer side of at least min_long_side, then the scaled decode. A
 * min_long_side of the image's own longer side gives 8/8.
 */
static void via_pack(struct codec_ctx *c, const void *jpg, size_t len,
		     uint32_t min_long_side, struct result *r,
		     uint32_t *scale_num)
{
	struct jpg_geom g = { 0 };
	struct diag d = { "" };

	memset(r, 0, sizeof(*r));
	r->err = jpg_scale_for(c, jpg, len, min_long_side, &g, &d);
	if (!r->err) {
		size_t n = (size_t)g.width * g.height * g.channels;

		r->px = malloc(n + 1);
		cr_assert_not_null(r->px);
		r->px[n] = 0xa5;
		r->err = jpg_decode_scaled(c, jpg, len, &g, r->px, &d);
		if (!r->err)
			cr_expect_eq(r->px[n], 0xa5, "wrote past %zu bytes", n);
		r->w = g.width;
		r->h = g.height;
		r->ch = g.channels;
	}
	if (scale_num)
		*scale_num = g.scale_num;
	snprintf(r->msg, sizeof(r->msg), "%s", d.msg);
	if (r->err)
		result_free(r);
}

/* a and b decoded alike: size, channels and every byte. */
static void expect_same(const char *what, const struct result *a,
			const char *an, const struct result *b, const char *bn)
{
	size_t n = (size_t)a->w * a->h * a->ch;

	cr_assert_eq(a->err, 0, "%s: %s: %s", what, an, a->msg);
	cr_assert_eq(b->err, 0, "%s: %s: %s", what, bn, b->msg);
	cr_assert_eq(a->w, b->w, "%s: width %s %u, %s %u", what, an, a->w, bn,
		     b->w);
	cr_assert_eq(a->h, b->h, "%s: height %s %u, %s %u", what, an, a->h, bn,
		     b->h);
	cr_assert_eq(a->ch, b->ch, "%s: channels %s %u, %s %u", what, an, a->ch,
		     bn, b->ch);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(a->px[i], b->px[i], "%s: byte %zu: %s %u, %s %u",
			     what, i, an, a->px[i], bn, b->px[i]);
}

/* ----------------------------------------------------------- full decode */

Test(jpath, full_decode, .init = setup, .fini = teardown)
{
	for (size_t i = 0; i < NELEM(kinds); i++) {
		const struct kind *k = &kinds[i];
		struct result verify, decode, stream, pack, ref = { 0 };
		struct jroi_info info;
		struct diag d = { "" };
		uint32_t num = 0;
		size_t len;
		unsigned char *jpg = encode(k, &len);

		cr_assert_eq(jroi_header(dec, jpg, len, &info, &d), 0, "%s: %s",
			     k->name, d.msg);
		cr_expect_eq(info.cs, k->cs, "%s: colour space %d", k->name,
			     (int)info.cs);
		cr_expect_eq(info.progressive, k->progressive, "%s", k->name);

		via_codec(ctx, jpg, len, &verify);
		via_decode(ctx, jpg, len, &decode);
		via_stream(dec, jpg, len, &stream);
		via_pack(ctx, jpg, len, IMG_W, &pack, &num);
		ref.px = reference(jpg, len, 8, &ref.w, &ref.h, &ref.ch);

		cr_expect_eq(num, 8, "%s: pack decoded at %u/8", k->name, num);
		cr_expect_eq(verify.w, IMG_W, "%s", k->name);
		cr_expect_eq(verify.h, IMG_H, "%s", k->name);
		cr_expect_eq(verify.ch, k->channels, "%s: %u channels", k->name,
			     verify.ch);
		expect_same(k->name, &verify, "verify", &decode, "decode");
		expect_same(k->name, &verify, "verify", &stream, "stream");
		expect_same(k->name, &verify, "verify", &pack, "pack");
		expect_same(k->name, &verify, "verify", &ref, "libjpeg-turbo");
		result_free(&verify);
		result_free(&decode);
		result_free(&stream);
		result_free(&pack);
		result_free(&ref);
		free(jpg);
	}
}

/*
 * At every scale pack may pick, its decode is the stream decoder's at
 * that scale and libjpeg-turbo's: the bytes pack re-encodes for gray and
 * colour images are the ones TurboJPEG gave it before both went through
 * one decoder.
 */
Test(jpath, scaled_decode, .init = setup, .fini = teardown)
{
	static unsigned char buf[IMG_W * IMG_H * 3];

	for (size_t i = 0; i < NELEM(kinds); i++) {
		const struct kind *k = &kinds[i];
		size_t len;
		unsigned char *jpg = encode(k, &len);

		for (uint32_t num = 1; num <= 8; num++) {
			struct result pack, stream = { 0 }, ref = { 0 };
			struct jroi_req q = { 0, 0, IMG_W, IMG_H, 0, 0, num };
			struct jroi_out out;
			struct diag d = { "" };
			uint32_t got = 0;
			char what[64];

			snprintf(what, sizeof(what), "%s at %u/8", k->name,
				 num);
			via_pack(ctx, jpg, len, (IMG_W * num + 7) / 8, &pack,
				 &got);
			cr_assert_eq(got, num, "%s: pack picked %u/8", what,
				     got);
			stream.err = jroi_decode(dec, jpg, len, &q, buf, 0,
						 sizeof(buf), &out, &d);
			cr_assert_eq(stream.err, 0, "%s: %s", what, d.msg);
			stream.w = out.width;
			stream.h = out.height;
			stream.ch = out.channels;
			stream.px = buf;
			ref.px = reference(jpg, len, num, &ref.w, &ref.h,
					   &ref.ch);
			expect_same(what, &pack, "pack", &stream, "stream");
			expect_same(what, &pack, "pack", &ref, "libjpeg-turbo");
			result_free(&pack);
			result_free(&ref);
		}
		free(jpg);
	}
}

/* ---------------------------------------------------------- bad input */

/* How a test damages a good JPEG of len bytes; returns the bytes to use. */
typedef size_t (*damage_fn)(unsigned char *b, size_t len);

static size_t dmg_empty(unsigned char *b, size_t len)
{
	return 0;
}

static size_t dmg_text(unsigned char *b, size_t len)
{
	static const char junk[] = "GIF89a, not a JPEG";

	memcpy(b, junk, sizeof(junk));
	return sizeof(junk);
}

static size_t dmg_soi(unsigned char *b, size_t len)
{
	return 2;
}

static size_t dmg_soi_eoi(unsigned char *b, size_t len)
{
	b[2] = 0xff;
	b[3] = 0xd9;
	return 4;
}

static size_t dmg_20(unsigned char *b, size_t len)
{
	return 20;
}

static size_t dmg_half(unsigned char *b, size_t len)
{
	return len / 2;
}

static size_t dmg_no_eoi(unsigned char *b, size_t len)
{
	return len - 2;
}

static size_t dmg_last_quarter(unsigned char *b, size_t len)
{
	return len - len / 4;
}

/* A frame header claiming 65000 x 65000 pixels: a decompression bomb. */
static size_t dmg_huge(unsigned char *b, size_t len)
{
	for (size_t i = 0; i + 9 < len; i++) {
		if (b[i] == 0xff && (b[i + 1] == 0xc0 || b[i + 1] == 0xc2)) {
			b[i + 5] = b[i + 7] = 0xfd;
			b[i + 6] = b[i + 8] = 0xe8;
			return len;
		}
	}
	cr_assert_fail("no SOF marker");
	return len;
}

/* The first scan's marker overwritten: no image data at all. */
static size_t dmg_no_sos(unsigned char *b, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (b[i] == 0xff && b[i + 1] == 0xda) {
			b[i + 1] = 0xd9;
			return i + 2;
		}
	}
	cr_assert_fail("no SOS marker");
	return len;
}

Test(jpath, damaged, .init = setup, .fini = teardown)
{
	static const struct {
		const char *what;
		damage_fn fn;
		int err;
	} t[] = {
		{ "empty", dmg_empty, LOADER_EDECODE },
		{ "not a JPEG", dmg_text, LOADER_EDECODE },
		{ "SOI only", dmg_soi, LOADER_EDECODE },
		{ "SOI and EOI, tables only", dmg_soi_eoi, LOADER_EDECODE },
		{ "cut after 20 bytes", dmg_20, LOADER_EDECODE },
		{ "cut at half", dmg_half, LOADER_EDECODE },
		{ "cut 2 bytes short (no EOI)", dmg_no_eoi, LOADER_EDECODE },
		{ "last quarter missing", dmg_last_quarter, LOADER_EDECODE },
		{ "EOI instead of the first scan", dmg_no_sos, LOADER_EDECODE },
		{ "65000x65000 in the header", dmg_huge, LOADER_ETOOBIG },
	};

	for (size_t i = 0; i < NELEM(kinds); i++) {
		const struct kind *k = &kinds[i];
		size_t len;
		unsigned char *jpg = encode(k, &len);
		unsigned char *bad = malloc(len + 64);

		cr_assert_not_null(bad);
		for (size_t j = 0; j < NELEM(t); j++) {
			struct result verify, decode, stream, pack;
			size_t n;
			char what[128];

			memcpy(bad, jpg, len);
			n = t[j].fn(bad, len);
			snprintf(what, sizeof(what), "%s, %s", k->name,
				 t[j].what);
			via_codec(ctx, bad, n, &verify);
			via_decode(ctx, bad, n, &decode);
			via_stream(dec, bad, n, &stream);
			via_pack(ctx, bad, n, IMG_W, &pack, NULL);
			cr_expect_eq(stream.err, t[j].err, "%s: stream %d (%s)",
				     what, stream.err, stream.msg);
			cr_expect_eq(verify.err, stream.err,
				     "%s: verify %d, stream %d", what,
				     verify.err, stream.err);
			cr_expect_eq(decode.err, stream.err,
				     "%s: decode %d, stream %d", what,
				     decode.err, stream.err);
			cr_expect_eq(pack.err, stream.err,
				     "%s: pack %d, stream %d", what, pack.err,
				     stream.err);
			cr_expect_str_not_empty(stream.msg, "%s", what);
			cr_expect_str_eq(verify.msg, stream.msg, "%s", what);
			cr_expect_str_eq(decode.msg, stream.msg, "%s", what);
			cr_expect_str_eq(pack.msg, stream.msg, "%s", what);
			result_free(&verify);
			result_free(&decode);
			result_free(&stream);
			result_free(&pack);
		}
		/* Every path still decodes a good image afterwards. */
		{
			struct result verify, stream;

			via_codec(ctx, jpg, len, &verify);
			via_stream(dec, jpg, len, &stream);
			expect_same(k->name, &verify, "verify", &stream,
				    "stream");
			result_free(&verify);
			result_free(&stream);
		}
		free(bad);
		free(jpg);
	}
}

/*
 * One pixel over the limit: refused by all three with the stream's code
 * and message; at the limit, decoded by all three.
 */
Test(jpath, pixel_limit)
{
	static const uint64_t limits[] = { (uint64_t)IMG_W * IMG_H - 1,
					   (uint64_t)IMG_W * IMG_H };

	for (size_t i = 0; i < NELEM(kinds); i++) {
		const struct kind *k = &kinds[i];
		size_t len;
		unsigned char *jpg = encode(k, &len);

		for (size_t j = 0; j < NELEM(limits); j++) {
			struct codec_ctx *c = NULL;
			struct jroi_dec *jd = NULL;
			struct result verify, decode, stream, pack;
			int want = j == 0 ? LOADER_ETOOBIG : 0;

			cr_assert_eq(codec_ctx_new(&c, limits[j]), 0);
			cr_assert_eq(jroi_new(&jd, limits[j]), 0);
			via_codec(c, jpg, len, &verify);
			via_decode(c, jpg, len, &decode);
			via_stream(jd, jpg, len, &stream);
			via_pack(c, jpg, len, IMG_W, &pack, NULL);
			cr_expect_eq(stream.err, want, "%s, limit %llu: %d",
				     k->name, (unsigned long long)limits[j],
				     stream.err);
			cr_expect_eq(verify.err, want, "%s: verify %d (%s)",
				     k->name, verify.err, verify.msg);
			cr_expect_eq(pack.err, want, "%s: pack %d (%s)",
				     k->name, pack.err, pack.msg);
			cr_expect_eq(decode.err, want, "%s: decode %d (%s)",
				     k->name, decode.err, decode.msg);
			cr_expect_str_eq(verify.msg, stream.msg, "%s", k->name);
			cr_expect_str_eq(decode.msg, stream.msg, "%s", k->name);
			cr_expect_str_eq(pack.msg, stream.msg, "%s", k->name);
			if (want)
				cr_expect(strstr(stream.msg, "limit"), "%s",
					  stream.msg);
			result_free(&verify);
			result_free(&decode);
			result_free(&stream);
			result_free(&pack);
			jroi_free(jd);
			codec_ctx_free(c);
		}
		free(jpg);
	}
}

/* The default limits agree: verify's is a stream's. */
Test(jpath, default_limit)
{
	cr_expect_eq((uint64_t)CODEC_DEFAULT_MAX_PIXELS,
		     (uint64_t)JROI_DEFAULT_MAX_PIXELS);
}
