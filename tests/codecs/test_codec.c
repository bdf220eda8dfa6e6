/*
 * test_codec.c - the codec table (raw, zstd, jpeg), zstd records and
 * dictionaries, JPEG scaling and encoding, diag and loader_strerror().
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <turbojpeg.h>

#include "codec.h"
#include "diag.h"
#include "jpeg.h"
#include "loader_error.h"
#include "zrec.h"
#include "../unit_util.h"

#define NSAMPLES 200
#define DICT_CAP 4096

static struct codec_ctx *ctx;

static void ctx_setup(void)
{
	cr_assert_eq(codec_ctx_new(&ctx, 0), 0);
}

static void ctx_teardown(void)
{
	codec_ctx_free(ctx);
	ctx = NULL;
}

/* Decode through the codec table; the diag is cleared first. */
static int decode(enum codec_id id, const void *src, size_t len,
		  const struct zrec_ddict *dd, void *dst, size_t cap,
		  struct codec_info *info, struct diag *d)
{
	struct codec_src s = { .data = src, .len = len, .ddict = dd };

	diag_clear(d);
	return codec_get(id)->decode(ctx, &s, dst, cap, info, d);
}

static int probe(enum codec_id id, const void *src, size_t len,
		 struct codec_info *info, struct diag *d)
{
	struct codec_src s = { .data = src, .len = len };

	diag_clear(d);
	return codec_get(id)->probe(ctx, &s, info, d);
}

/* Compress src with a new compressor; returns a malloc'd frame. */
static unsigned char *zcompress(int level, const void *dict, size_t dict_len,
				const void *src, size_t n, size_t *out_len)
{
	struct zrec_enc *enc = NULL;
	struct diag d = { "" };
	unsigned char *frame = malloc(zrec_bound(n));

	cr_assert_not_null(frame);
	cr_assert_eq(zrec_enc_new(&enc, level, dict, dict_len, &d), 0,
		     "zrec_enc_new(level %d): %s", level, d.msg);
	cr_assert_eq(
		zrec_compress(enc, src, n, frame, zrec_bound(n), out_len, &d),
		0, "zrec_compress: %s", d.msg);
	zrec_enc_free(enc);
	return frame;
}

/* NSAMPLES digits back to back, and a dictionary trained on them. */
static unsigned char samples[NSAMPLES * UT_DIGIT_SIZE];
static unsigned char dict[DICT_CAP];
static size_t dict_len;

static void train(void)
{
	size_t sizes[NSAMPLES];
	struct diag d = { "" };

	for (unsigned i = 0; i < NSAMPLES; i++) {
		ut_digit(samples + i * UT_DIGIT_SIZE, i);
		sizes[i] = UT_DIGIT_SIZE;
	}
	cr_assert_eq(zrec_train(dict, sizeof(dict), samples, sizes, NSAMPLES,
				&dict_len, &d),
		     0, "zrec_train: %s", d.msg);
	cr_assert(dict_len > 0 && dict_len <= sizeof(dict),
		  "dictionary of %zu bytes", dict_len);
}

/* --------------------------------------------------------------- table */

Test(codec, table)
{
	static const struct {
		enum codec_id id;
		const char *name;
	} t[] = {
		{ CODEC_RAW, "raw" },
		{ CODEC_ZSTD, "zstd" },
		{ CODEC_JPEG, "jpeg" },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const struct codec_ops *ops = codec_get(t[i].id);

		cr_assert_not_null(ops, "codec %d", t[i].id);
		cr_expect_str_eq(ops->name, t[i].name);
		cr_expect_not_null(ops->probe);
		cr_expect_not_null(ops->decode);
	}
	cr_expect_null(codec_get(CODEC_COUNT));
	cr_expect_null(codec_get((enum codec_id) - 1));
	cr_expect_null(codec_get((enum codec_id)1000));
}

Test(codec, ctx_free_null)
{
	codec_ctx_free(NULL);
	zrec_enc_free(NULL);
	zrec_ddict_free(NULL);
	jpg_free(NULL);
}

/* ----------------------------------------------------------------- raw */

Test(codec, raw_copy, .init = ctx_setup, .fini = ctx_teardown)
{
	static const char src[] = "some opaque bytes\0with a NUL";
	unsigned char dst[64];
	struct codec_info info;
	struct diag d;

	memset(dst, 0xee, sizeof(dst));
	cr_assert_eq(probe(CODEC_RAW, src, sizeof(src), &info, &d), 0);
	cr_expect_eq(info.size, sizeof(src));
	cr_assert_eq(decode(CODEC_RAW, src, sizeof(src), NULL, dst, sizeof(src),
			    &info, &d),
		     0);
	cr_expect_eq(info.size, sizeof(src));
	cr_expect_eq(info.width, 0);
	cr_expect_arr_eq(dst, src, sizeof(src));
	cr_expect_eq(dst[sizeof(src)], 0xee, "wrote past the payload");

	/* An empty payload is a valid raw payload. */
	cr_expect_eq(decode(CODEC_RAW, src, 0, NULL, dst, 0, &info, &d), 0);
	cr_expect_eq(info.size, 0);

	cr_expect_eq(decode(CODEC_RAW, src, sizeof(src), NULL, dst,
			    sizeof(src) - 1, &info, &d),
		     LOADER_ETOOBIG);
	cr_expect_str_not_empty(d.msg);
}

/* ---------------------------------------------------------------- zstd */

Test(zstd, round_trip, .init = ctx_setup, .fini = ctx_teardown)
{
	static const int levels[] = { 1, 3, 19 };
	static const size_t sizes[] = { 0, 1, UT_DIGIT_SIZE, 100000 };
	unsigned char *src = malloc(100000), *dst = malloc(100000 + 1);
	uint64_t s = 42;

	cr_assert(src && dst);
	/* Compressible but not trivial: a small alphabet. */
	for (size_t i = 0; i < 100000; i++)
		src[i] = (unsigned char)('a' + ut_rand(&s) % 4);
	ut_digit(src, 7);
	for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k], flen;
			unsigned char *fr =
				zcompress(levels[l], NULL, 0, src, n, &flen);
			struct codec_info info;
			struct diag d;

			cr_expect_leq(flen, zrec_bound(n));
			cr_assert_eq(probe(CODEC_ZSTD, fr, flen, &info, &d), 0,
				     "level %d, %zu bytes: %s", levels[l], n,
				     d.msg);
			cr_expect_eq(info.size, n, "probe of %zu bytes", n);
			memset(dst, 0xee, n + 1);
			cr_assert_eq(decode(CODEC_ZSTD, fr, flen, NULL, dst, n,
					    &info, &d),
				     0, "level %d, %zu bytes: %s", levels[l], n,
				     d.msg);
			cr_expect_eq(info.size, n);
			cr_expect_arr_eq(dst, src, n, "level %d, %zu bytes",
					 levels[l], n);
			cr_expect_eq(dst[n], 0xee, "wrote past %zu bytes", n);
			free(fr);
		}
	}
	free(src);
	free(dst);
}

Test(zstd, dict_round_trip, .init = ctx_setup, .fini = ctx_teardown)
{
	struct zrec_ddict *dd = NULL;
	struct diag d = { "" };
	size_t plain_total = 0, dict_total = 0;

	train();
	cr_assert_eq(zrec_ddict_new(&dd, dict, dict_len, &d), 0, "%s", d.msg);
	/* Samples the dictionary was trained on, and ones it never saw. */
	for (unsigned i = 0; i < NSAMPLES + 20; i += 5) {
		unsigned char img[UT_DIGIT_SIZE], out[UT_DIGIT_SIZE];
		struct codec_info info;
		size_t plen, flen;
		unsigned char *plain, *fr;

		ut_digit(img, i);
		plain = zcompress(3, NULL, 0, img, sizeof(img), &plen);
		fr = zcompress(3, dict, dict_len, img, sizeof(img), &flen);
		plain_total += plen;
		dict_total += flen;
		cr_assert_eq(probe(CODEC_ZSTD, fr, flen, &info, &d), 0, "%s",
			     d.msg);
		cr_expect_eq(info.size, sizeof(img));
		memset(out, 0, sizeof(out));
		cr_assert_eq(decode(CODEC_ZSTD, fr, flen, dd, out, sizeof(out),
				    &info, &d),
			     0, "sample %u: %s", i, d.msg);
		cr_expect_arr_eq(out, img, sizeof(img), "sample %u", i);

		/* A plain frame still decodes when a dictionary is given. */
		memset(out, 0, sizeof(out));
		cr_expect_eq(decode(CODEC_ZSTD, plain, plen, dd, out,
				    sizeof(out), &info, &d),
			     0, "%s", d.msg);
		cr_expect_arr_eq(out, img, sizeof(img));
		free(plain);
		free(fr);
	}
	/* The point of a dictionary: similar small records shrink. */
	cr_expect_lt(dict_total, plain_total,
		     "with dictionary %zu bytes, without %zu", dict_total,
		     plain_total);
	zrec_ddict_free(dd);
}

Test(zstd, dict_frame_needs_dict, .init = ctx_setup, .fini = ctx_teardown)
{
	unsigned char img[UT_DIGIT_SIZE], out[UT_DIGIT_SIZE];
	struct codec_info info;
	struct diag d;
	size_t flen;
	unsigned char *fr;

	train();
	ut_digit(img, 3);
	fr = zcompress(3, dict, dict_len, img, sizeof(img), &flen);
	/* The header alone does not need the dictionary... */
	cr_expect_eq(probe(CODEC_ZSTD, fr, flen, &info, &d), 0);
	cr_expect_eq(info.size, sizeof(img));
	/* ...but the frame does. */
	cr_expect_eq(
		decode(CODEC_ZSTD, fr, flen, NULL, out, sizeof(out), &info, &d),
		LOADER_EDECODE);
	cr_expect_str_not_empty(d.msg);
	free(fr);
}

Test(zstd, wrong_dict, .init = ctx_setup, .fini = ctx_teardown)
{
	unsigned char img[UT_DIGIT_SIZE], out[UT_DIGIT_SIZE];
	unsigned char other[DICT_CAP];
	size_t sizes[NSAMPLES], other_len, flen;
	struct zrec_ddict *dd = NULL;
	struct codec_info info;
	struct diag d = { "" };
	unsigned char *fr;

	train();
	/* A second dictionary, trained on inverted samples. */
	for (size_t i = 0; i < sizeof(samples); i++)
		samples[i] = (unsigned char)~samples[i];
	for (unsigned i = 0; i < NSAMPLES; i++)
		sizes[i] = UT_DIGIT_SIZE;
	cr_assert_eq(zrec_train(other, sizeof(other), samples, sizes, NSAMPLES,
				&other_len, &d),
		     0, "%s", d.msg);
	cr_assert_eq(zrec_ddict_new(&dd, other, other_len, &d), 0);
	ut_digit(img, 11);
	fr = zcompress(3, dict, dict_len, img, sizeof(img), &flen);
	cr_expect_eq(
		decode(CODEC_ZSTD, fr, flen, dd, out, sizeof(out), &info, &d),
		LOADER_EDECODE);
	cr_expect_str_not_empty(d.msg);
	free(fr);
	zrec_ddict_free(dd);
}

/* How a test damages a good frame of len bytes; returns the bytes to use. */
typedef size_t (*damage_fn)(unsigned char *buf, size_t len);

static size_t dmg_magic(unsigned char *b, size_t len)
{
	b[0] ^= 0xff;
	return len;
}

static size_t dmg_last(unsigned char *b, size_t len)
{
	return len - 1;
}

static size_t dmg_half(unsigned char *b, size_t len)
{
	return len / 2;
}

static size_t dmg_three(unsigned char *b, size_t len)
{
	return 3;
}

static size_t dmg_empty(unsigned char *b, size_t len)
{
	return 0;
}

static size_t dmg_text(unsigned char *b, size_t len)
{
	static const char junk[] = "this is not a zstd frame at all";

	memcpy(b, junk, sizeof(junk));
	return sizeof(junk);
}

/* Zeros after the frame: a second frame that is not one. */
static size_t dmg_trailing(unsigned char *b, size_t len)
{
	memset(b + len, 0, 16);
	return len + 16;
}

Test(zstd, corrupt, .init = ctx_setup, .fini = ctx_teardown)
{
	static const struct {
		const char *what;
		damage_fn fn;
	} t[] = {
		{ "bad magic", dmg_magic },
		{ "last byte missing", dmg_last },
		{ "half a frame", dmg_half },
		{ "3 bytes", dmg_three },
		{ "empty", dmg_empty },
		{ "text", dmg_text },
		{ "trailing zeros", dmg_trailing },
	};
	unsigned char img[UT_DIGIT_SIZE], out[UT_DIGIT_SIZE], bad[4096];
	struct codec_info info;
	size_t flen;
	unsigned char *fr;

	ut_digit(img, 1);
	fr = zcompress(3, NULL, 0, img, sizeof(img), &flen);
	cr_assert_lt(flen + 16, sizeof(bad));
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct diag d = { "" };
		size_t len;
		int err;

		memcpy(bad, fr, flen);
		len = t[i].fn(bad, flen);
		err = decode(CODEC_ZSTD, bad, len, NULL, out, sizeof(out),
			     &info, &d);
		cr_expect_eq(err, LOADER_EDECODE, "%s: %d", t[i].what, err);
		cr_expect_str_not_empty(d.msg, "%s", t[i].what);
	}
	free(fr);
}

Test(zstd, dst_too_small, .init = ctx_setup, .fini = ctx_teardown)
{
	unsigned char img[UT_DIGIT_SIZE], out[UT_DIGIT_SIZE];
	struct codec_info info;
	struct diag d;
	size_t flen;
	unsigned char *fr;

	ut_digit(img, 2);
	fr = zcompress(3, NULL, 0, img, sizeof(img), &flen);
	memset(out, 0xee, sizeof(out));
	cr_expect_eq(decode(CODEC_ZSTD, fr, flen, NULL, out, sizeof(out) - 1,
			    &info, &d),
		     LOADER_ETOOBIG);
	cr_expect_str_not_empty(d.msg);
	cr_expect_eq(decode(CODEC_ZSTD, fr, flen, NULL, out, 0, &info, &d),
		     LOADER_ETOOBIG);
	free(fr);
}

Test(zstd, compress_errors)
{
	unsigned char img[UT_DIGIT_SIZE], small[8];
	static const int bad_levels[] = { 0, -1, 23, 100 };
	struct zrec_enc *enc = NULL;
	struct diag d;
	size_t n = 12345;

	for (size_t i = 0; i < sizeof(bad_levels) / sizeof(bad_levels[0]);
	     i++) {
		diag_clear(&d);
		cr_expect_eq(zrec_enc_new(&enc, bad_levels[i], NULL, 0, &d),
			     LOADER_EUSAGE, "level %d", bad_levels[i]);
		cr_expect_str_not_empty(d.msg);
	}
	ut_digit(img, 5);
	cr_assert_eq(zrec_enc_new(&enc, 3, NULL, 0, &d), 0);
	cr_expect_eq(zrec_compress(enc, img, sizeof(img), small, sizeof(small),
				   &n, &d),
		     LOADER_ETOOBIG);
	cr_expect_eq(n, 12345, "out_len set on failure");
	zrec_enc_free(enc);
}

Test(zstd, train_and_ddict_errors)
{
	unsigned char tiny[5 * 8], out[1024];
	size_t sizes[5] = { 8, 8, 8, 8, 8 }, len = 0;
	struct zrec_ddict *dd = NULL;
	struct diag d = { "" };

	memset(tiny, 'x', sizeof(tiny));
	cr_expect_eq(zrec_train(out, sizeof(out), tiny, sizes, 5, &len, &d),
		     LOADER_EDECODE);
	cr_expect_str_not_empty(d.msg);
	diag_clear(&d);
	cr_expect_eq(zrec_ddict_new(&dd, tiny, 0, &d), LOADER_EFORMAT);
	cr_expect_str_not_empty(d.msg);
	cr_expect_null(dd);
}

/* ---------------------------------------------------------------- jpeg */

/* Encode a synthetic picture; returns the JPEG (free with jpg_free). */
static unsigned char *make_jpeg(unsigned w, unsigned h, unsigned ch,
				unsigned char **pixels, size_t *len)
{
	unsigned char *px = malloc((size_t)w * h * ch), *out = NULL;
	struct diag d = { "" };

	cr_assert_not_null(px);
	ut_picture(px, w, h, ch, 1);
	cr_assert_eq(jpg_encode(ctx, px, w, h, ch, 95, &out, len, &d), 0,
		     "jpg_encode %ux%ux%u: %s", w, h, ch, d.msg);
	cr_assert_not_null(out);
	cr_assert_gt(*len, 2);
	cr_expect(out[0] == 0xff && out[1] == 0xd8, "no SOI marker");
	if (pixels)
		*pixels = px;
	else
		free(px);
	return out;
}

Test(jpeg, encode_probe_decode, .init = ctx_setup, .fini = ctx_teardown)
{
	static const struct {
		unsigned w, h, ch;
	} t[] = {
		{ 64, 48, 3 }, { 64, 48, 1 }, { 33, 17, 3 }, { 33, 17, 1 },
		{ 1, 1, 3 },   { 1, 1, 1 },   { 200, 8, 3 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		size_t n = (size_t)t[i].w * t[i].h * t[i].ch, len;
		unsigned char *px, *jpg, *out = malloc(n + 1);
		struct codec_info info;
		struct diag d;
		double mae;

		cr_assert_not_null(out);
		jpg = make_jpeg(t[i].w, t[i].h, t[i].ch, &px, &len);
		cr_assert_eq(probe(CODEC_JPEG, jpg, len, &info, &d), 0, "%s",
			     d.msg);
		cr_expect_eq(info.width, t[i].w);
		cr_expect_eq(info.height, t[i].h);
		cr_expect_eq(info.channels, t[i].ch);
		cr_expect_eq(info.size, n);
		memset(out, 0xee, n + 1);
		memset(&info, 0, sizeof(info));
		cr_assert_eq(
			decode(CODEC_JPEG, jpg, len, NULL, out, n, &info, &d),
			0, "%ux%ux%u: %s", t[i].w, t[i].h, t[i].ch, d.msg);
		cr_expect_eq(info.width, t[i].w);
		cr_expect_eq(info.height, t[i].h);
		cr_expect_eq(info.channels, t[i].ch);
		cr_expect_eq(info.size, n);
		cr_expect_eq(out[n], 0xee, "wrote past the image");
		mae = ut_mae(out, px, n);
		cr_expect_lt(mae, 4.0, "%ux%ux%u: mean abs error %.2f", t[i].w,
			     t[i].h, t[i].ch, mae);
		jpg_free(jpg);
		free(px);
		free(out);
	}
}

/*
 * CMYK JPEGs (written here straight through TurboJPEG, which stores them
 * as YCCK) decode to 3 channels RGB, as a stream delivers them: R = C *
 * K / 255, and likewise G from M and B from Y.
 */
Test(jpeg, cmyk, .init = ctx_setup, .fini = ctx_teardown)
{
	unsigned w = 32, h = 24;
	size_t n = (size_t)w * h * 4, m = (size_t)w * h * 3;
	unsigned char *px = malloc(n), *rgb = malloc(m), *out = malloc(m);
	unsigned char *jpg = NULL;
	unsigned long len = 0;
	tjhandle tc = tjInitCompress();
	struct codec_info info;
	struct diag d;

	cr_assert(px && rgb && out && tc);
	ut_picture(px, w, h, 4, 2);
	for (size_t i = 0; i < (size_t)w * h; i++) {
		const unsigned char *s = px + i * 4;

		for (int c = 0; c < 3; c++)
			rgb[i * 3 + c] =
				(unsigned char)((2u * s[c] * s[3] + 255u) /
						510u);
	}
	cr_assert_eq(tjCompress2(tc, px, (int)w, 0, (int)h, TJPF_CMYK, &jpg,
				 &len, TJSAMP_444, 95, 0),
		     0, "%s", tjGetErrorStr2(tc));
	cr_assert_eq(probe(CODEC_JPEG, jpg, len, &info, &d), 0, "%s", d.msg);
	cr_expect_eq(info.channels, 3);
	cr_expect_eq(info.size, m);
	cr_assert_eq(decode(CODEC_JPEG, jpg, len, NULL, out, m, &info, &d), 0,
		     "%s", d.msg);
	cr_expect_eq(info.channels, 3);
	cr_expect_lt(ut_mae(out, rgb, m), 4.0);
	tjFree(jpg);
	tjDestroy(tc);
	free(px);
	free(rgb);
	free(out);
}

/*
 * Fill the stack below us with a non-zero pattern, so that a callee that
 * reads a local it never set sees garbage rather than a lucky zero.
 */
static void __attribute__((noinline)) dirty_stack(void)
{
	volatile unsigned char junk[8192];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = 0x01;
}

Test(jpeg, damaged, .init = ctx_setup, .fini = ctx_teardown)
{
	static const unsigned char soi[] = { 0xff, 0xd8 };
	static const unsigned char soi_eoi[] = { 0xff, 0xd8, 0xff, 0xd9 };
	static const char text[] = "GIF89a, not a JPEG";
	unsigned char out[64 * 48 * 3], *jpg;
	struct codec_info info;
	size_t len;
	struct {
		const char *what;
		const void *data;
		size_t len;
		bool no_header; /* probe and scale_for must fail too */
	} t[] = {
		{ "cut at half", NULL, 0, false },
		{ "cut 2 bytes short (no EOI)", NULL, 0, false },
		{ "cut after 20 bytes", NULL, 20, true },
		{ "zero length", NULL, 0, true },
		{ "SOI only", soi, sizeof(soi), true },
		{ "SOI and EOI, tables only", soi_eoi, sizeof(soi_eoi), true },
		{ "not a JPEG", text, sizeof(text), true },
	};

	jpg = make_jpeg(64, 48, 3, NULL, &len);
	t[0].len = len / 2;
	t[1].len = len - 2;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const void *data = t[i].data ? t[i].data : jpg;
		struct diag d = { "" };
		struct jpg_geom g;
		int err;

		/* Probe may pass on a truncated body; decode must not. */
		dirty_stack();
		err = decode(CODEC_JPEG, data, t[i].len, NULL, out, sizeof(out),
			     &info, &d);
		cr_expect_eq(err, LOADER_EDECODE, "%s: decode %d (%s)",
			     t[i].what, err, d.msg);
		cr_expect_str_not_empty(d.msg, "%s", t[i].what);
		if (!t[i].no_header)
			continue;
		dirty_stack();
		err = probe(CODEC_JPEG, data, t[i].len, &info, &d);
		cr_expect_eq(err, LOADER_EDECODE, "%s: probe %d (%s)",
			     t[i].what, err, d.msg);
		dirty_stack();
		err = jpg_scale_for(ctx, data, t[i].len, 8, &g, &d);
		cr_expect_eq(err, LOADER_EDECODE, "%s: scale_for %d (%s)",
			     t[i].what, err, d.msg);
	}
	jpg_free(jpg);
}

Test(jpeg, dst_too_small, .init = ctx_setup, .fini = ctx_teardown)
{
	unsigned char out[64 * 48 * 3];
	struct codec_info info;
	struct diag d;
	size_t len;
	unsigned char *jpg = make_jpeg(64, 48, 3, NULL, &len);

	cr_expect_eq(decode(CODEC_JPEG, jpg, len, NULL, out, sizeof(out) - 1,
			    &info, &d),
		     LOADER_ETOOBIG);
	cr_expect_str_not_empty(d.msg);
	jpg_free(jpg);
}

Test(jpeg, scale_for, .init = ctx_setup, .fini = ctx_teardown)
{
	static const struct {
		unsigned w, h, ch, want; /* image, requested long side */
		unsigned num, gw, gh;	 /* expected scale, geometry */
	} t[] = {
		{ 800, 600, 3, 200, 2, 200, 150 },
		{ 800, 600, 3, 100, 1, 100, 75 },
		{ 800, 600, 3, 101, 2, 200, 150 },
		{ 800, 600, 3, 201, 3, 300, 225 },
		{ 800, 600, 3, 700, 7, 700, 525 },
		{ 800, 600, 3, 701, 8, 800, 600 },
		{ 800, 600, 3, 5000, 8, 800, 600 },
		{ 800, 600, 3, 0, 1, 100, 75 },
		{ 600, 800, 1, 200, 2, 150, 200 },
		{ 601, 401, 3, 76, 1, 76, 51 },
		{ 601, 401, 3, 77, 2, 151, 101 },
		{ 7, 5, 1, 1, 1, 1, 1 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct jpg_geom g;
		struct diag d = { "" };
		size_t len;
		unsigned char *jpg =
			make_jpeg(t[i].w, t[i].h, t[i].ch, NULL, &len);

		memset(&g, 0, sizeof(g));
		cr_assert_eq(jpg_scale_for(ctx, jpg, len, t[i].want, &g, &d), 0,
			     "%s", d.msg);
		cr_expect_eq(g.scale_num, t[i].num, "%ux%u for %u: %u/8",
			     t[i].w, t[i].h, t[i].want, g.scale_num);
		cr_expect_eq(g.width, t[i].gw, "%ux%u for %u: width %u", t[i].w,
			     t[i].h, t[i].want, g.width);
		cr_expect_eq(g.height, t[i].gh, "%ux%u for %u: height %u",
			     t[i].w, t[i].h, t[i].want, g.height);
		cr_expect_eq(g.channels, t[i].ch);
		jpg_free(jpg);
	}
}

Test(jpeg, decode_scaled, .init = ctx_setup, .fini = ctx_teardown)
{
	static const struct {
		unsigned w, h, ch, want;
	} t[] = {
		{ 800, 600, 3, 200 },
		{ 800, 600, 1, 300 },
		{ 601, 401, 3, 77 },
		{ 64, 48, 3, 1000 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct jpg_geom g;
		struct diag d = { "" };
		unsigned char *px, *out, *ref;
		size_t len, n;
		unsigned char *jpg =
			make_jpeg(t[i].w, t[i].h, t[i].ch, &px, &len);

		cr_assert_eq(jpg_scale_for(ctx, jpg, len, t[i].want, &g, &d), 0,
			     "%s", d.msg);
		n = (size_t)g.width * g.height * g.channels;
		out = malloc(n + 1);
		ref = malloc(n);
		cr_assert(out && ref);
		out[n] = 0xee;
		cr_assert_eq(jpg_decode_scaled(ctx, jpg, len, &g, out, &d), 0,
			     "%s", d.msg);
		cr_expect_eq(out[n], 0xee, "wrote past the scaled image");
		/* Compare with the source sampled at the same scale. */
		for (unsigned y = 0; y < g.height; y++)
			for (unsigned x = 0; x < g.width; x++)
				for (unsigned c = 0; c < g.channels; c++) {
					unsigned sx = x * t[i].w / g.width;
					unsigned sy = y * t[i].h / g.height;

					ref[((size_t)y * g.width + x) *
						    g.channels +
					    c] = px[((size_t)sy * t[i].w + sx) *
							    t[i].ch +
						    c];
				}
		cr_expect_lt(ut_mae(out, ref, n), 8.0,
			     "%ux%u at %u/8: mean abs error %.2f", t[i].w,
			     t[i].h, g.scale_num, ut_mae(out, ref, n));

		/* A geometry with the wrong channel count is refused. */
		g.channels = g.channels == 1 ? 3 : 1;
		cr_expect_lt(jpg_decode_scaled(ctx, jpg, len, &g, out, &d), 0);
		jpg_free(jpg);
		free(px);
		free(out);
		free(ref);
	}
}

Test(jpeg, pixel_limit)
{
	struct codec_ctx *enc_ctx = NULL, *small = NULL;
	unsigned char out[64 * 48 * 3], *px = malloc(64 * 48 * 3), *jpg = NULL;
	struct codec_src src;
	struct codec_info info;
	struct jpg_geom g;
	struct diag d = { "" };
	size_t len;

	cr_assert_not_null(px);
	cr_assert_eq(codec_ctx_new(&enc_ctx, 0), 0);
	ut_picture(px, 64, 48, 3, 0);
	cr_assert_eq(jpg_encode(enc_ctx, px, 64, 48, 3, 90, &jpg, &len, &d), 0);

	/* 64x48 = 3072 pixels: one pixel over the limit, then at it. */
	cr_assert_eq(codec_ctx_new(&small, 3071), 0);
	src = (struct codec_src){ .data = jpg, .len = len };
	cr_expect_eq(codec_get(CODEC_JPEG)->probe(small, &src, &info, &d),
		     LOADER_ETOOBIG);
	cr_expect_str_not_empty(d.msg);
	diag_clear(&d);
	cr_expect_eq(codec_get(CODEC_JPEG)
			     ->decode(small, &src, out, sizeof(out), &info, &d),
		     LOADER_ETOOBIG);
	cr_expect_str_not_empty(d.msg);
	cr_expect_eq(jpg_scale_for(small, jpg, len, 8, &g, &d), LOADER_ETOOBIG);
	codec_ctx_free(small);

	cr_assert_eq(codec_ctx_new(&small, 3072), 0);
	cr_expect_eq(codec_get(CODEC_JPEG)
			     ->decode(small, &src, out, sizeof(out), &info, &d),
		     0, "%s", d.msg);
	codec_ctx_free(small);
	codec_ctx_free(enc_ctx);
	jpg_free(jpg);
	free(px);
}

Test(jpeg, encode_errors, .init = ctx_setup, .fini = ctx_teardown)
{
	unsigned char px[16 * 16 * 4] = { 0 }, *out = NULL;
	static const unsigned bad_ch[] = { 0, 2, 4 };
	size_t len = 0;

	for (size_t i = 0; i < sizeof(bad_ch) / sizeof(bad_ch[0]); i++) {
		struct diag d = { "" };

		cr_expect_eq(jpg_encode(ctx, px, 16, 16, bad_ch[i], 90, &out,
					&len, &d),
			     -EINVAL, "%u channels", bad_ch[i]);
		cr_expect_str_not_empty(d.msg);
	}
}

/* -------------------------------------------------------- diag, errors */

Test(diag, set_and_wrap)
{
	struct diag d;
	char longer[DIAG_MAX * 2];

	diag_clear(&d);
	cr_expect_str_empty(d.msg);
	cr_expect_eq(diag_set(&d, -EIO, "read %s at %d", "x.shard", 64), -EIO);
	cr_expect_str_eq(d.msg, "read x.shard at 64");
	cr_expect_eq(diag_wrap(&d, -EIO, "record %u", 3u), -EIO);
	cr_expect_str_eq(d.msg, "record 3: read x.shard at 64");
	diag_clear(&d);
	cr_expect_eq(diag_wrap(&d, LOADER_EFORMAT, "ctx"), LOADER_EFORMAT);
	cr_expect_str_eq(d.msg, "ctx: error");

	/* NULL is allowed and only returns the code. */
	cr_expect_eq(diag_set(NULL, LOADER_ERANGE, "x"), LOADER_ERANGE);
	cr_expect_eq(diag_wrap(NULL, LOADER_ERANGE, "x"), LOADER_ERANGE);
	diag_clear(NULL);

	/* Long messages are cut, never overrun. */
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	diag_set(&d, -EINVAL, "%s", longer);
	cr_expect_eq(strlen(d.msg), DIAG_MAX - 1);
	diag_wrap(&d, -EINVAL, "%s", longer);
	cr_expect_eq(strlen(d.msg), DIAG_MAX - 1);
}

Test(error, strerror)
{
	static const int ours[] = {
		LOADER_EFORMAT,	  LOADER_EVERSION, LOADER_ETRUNC,
		LOADER_ECHECKSUM, LOADER_ESCHEMA,  LOADER_EDECODE,
		LOADER_ERANGE,	  LOADER_ETOOBIG,  LOADER_EUSAGE,
		LOADER_EPROTO,	  LOADER_EEND,	   LOADER_ESTREAM,
	};
	static const int errnos[] = { EIO, ENOENT, ENOMEM, EINVAL, EAGAIN };
	const size_t n = sizeof(ours) / sizeof(ours[0]);

	for (size_t i = 0; i < n; i++) {
		const char *s = loader_strerror(ours[i]);

		cr_assert_not_null(s);
		cr_expect_str_not_empty(s, "code %d", ours[i]);
		cr_expect_str_neq(s, "unknown error", "code %d", ours[i]);
		cr_expect_lt(ours[i], -LOADER_ERRNO_MAX, "code %d", ours[i]);
		/* Each code has its own text. */
		for (size_t j = 0; j < i; j++)
			cr_expect_str_neq(s, loader_strerror(ours[j]),
					  "codes %d and %d", ours[i], ours[j]);
	}
	cr_expect_str_eq(loader_strerror(LOADER_ECHECKSUM),
			 "checksum mismatch");
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		cr_expect_str_eq(loader_strerror(-errnos[i]),
				 strerror(errnos[i]), "errno %d", errnos[i]);
	cr_expect_str_eq(loader_strerror(0), "success");
	cr_expect_str_eq(loader_strerror(5), "success");
	cr_expect_str_eq(loader_strerror(LOADER_ESTREAM - 1), "unknown error");
	cr_expect_str_eq(loader_strerror(-100000), "unknown error");
	cr_expect_str_eq(loader_strerror(INT_MIN), "unknown error");
	cr_expect_not_null(loader_strerror(-LOADER_ERRNO_MAX));
}
