/*
 * test_ispec.c - the image pipeline spec (parse, canonical format, bad
 * specs with their columns), the f16 conversion and the final
 * normalize/cast/layout kernel.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader_error.h"
#include "ispec.h"
#include "schema.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define IMNET_M                                                                \
	{                                                                      \
		0.485, 0.456, 0.406                                            \
	}
#define IMNET_S                                                                \
	{                                                                      \
		0.229, 0.224, 0.225                                            \
	}
#define RRC_DEF .scale = { 0.08, 1.0 }, .ratio = { 3.0 / 4, 4.0 / 3 }

/* A good spec, its canonical text (NULL: the same) and what it holds. */
struct good {
	const char *text, *canon;
	struct ispec want;
};

static const struct good good[] = {
	{ "decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F16,
	    .layout = ISPEC_NCHW,
	    .has_flip = true,
	    .has_normalize = true,
	    .size = 224,
	    RRC_DEF,
	    .flip = 0.5,
	    .mean = IMNET_M,
	    .std = IMNET_S } },
	{ "decode | resize 256 | center 224 | normalize imagenet | f32 | nchw",
	  NULL,
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_F32,
	    .has_normalize = true,
	    .size = 224,
	    .resize = 256,
	    .mean = IMNET_M,
	    .std = IMNET_S } },
	{ "decode | center 224 | u8 | nhwc",
	  NULL,
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_U8,
	    .layout = ISPEC_NHWC,
	    .size = 224 } },
	{ "decode|rrc 224",
	  "decode | rrc 224 | f32 | nchw",
	  { .geom = ISPEC_RRC, .dtype = DT_F32, .size = 224, RRC_DEF } },
	{ "  decode |  rrc   224 scale 0.25 1 ratio 0.75 1.5 |flip 0|f16\n",
	  "decode | rrc 224 scale 0.25 1 ratio 3/4 3/2 | flip 0 | f16 | nchw",
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F16,
	    .has_flip = true,
	    .size = 224,
	    .scale = { 0.25, 1 },
	    .ratio = { 0.75, 1.5 } } },
	{ "decode | rrc 224 ratio 3/4 4/3 scale 0.08 1.0",
	  "decode | rrc 224 | f32 | nchw",
	  { .geom = ISPEC_RRC, .dtype = DT_F32, .size = 224, RRC_DEF } },
	{ "decode | rrc 8192 ratio 1 1 | f32 | nchw",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F32,
	    .size = 8192,
	    .scale = { 0.08, 1 },
	    .ratio = { 1, 1 } } },
	{ "decode | rrc 1 ratio 1/3 2 | u8 | nchw",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_U8,
	    .size = 1,
	    .scale = { 0.08, 1 },
	    .ratio = { 1.0 / 3, 2 } } },
	{ "decode | center 32 | normalize 0.5,0.25,0.125 0.5,0.5,2 | f32 | nhwc",
	  NULL,
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_F32,
	    .layout = ISPEC_NHWC,
	    .has_normalize = true,
	    .size = 32,
	    .mean = { 0.5, 0.25, 0.125 },
	    .std = { 0.5, 0.5, 2 } } },
	{ "decode | resize 1 | center 1 | flip 1 | normalize 0,0,1 1e-3,1,1 | f16 | nhwc",
	  "decode | resize 1 | center 1 | flip 1 | normalize 0,0,1 0.001,1,1 | f16 | nhwc",
	  { .geom = ISPEC_CENTER,
	    .dtype = DT_F16,
	    .layout = ISPEC_NHWC,
	    .has_flip = true,
	    .has_normalize = true,
	    .size = 1,
	    .resize = 1,
	    .flip = 1,
	    .mean = { 0, 0, 1 },
	    .std = { 0.001, 1, 1 } } },
	{ "decode | rrc 224 | normalize 0.485,0.456,0.406 0.229,0.224,0.225",
	  "decode | rrc 224 | normalize imagenet | f32 | nchw",
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F32,
	    .has_normalize = true,
	    .size = 224,
	    RRC_DEF,
	    .mean = IMNET_M,
	    .std = IMNET_S } },
	{ "decode | rrc 224 scale 0.3 0.3 | flip 0.125 | f16 | nhwc",
	  NULL,
	  { .geom = ISPEC_RRC,
	    .dtype = DT_F16,
	    .layout = ISPEC_NHWC,
	    .has_flip = true,
	    .size = 224,
	    .scale = { 0.3, 0.3 },
	    .ratio = { 3.0 / 4, 4.0 / 3 },
	    .flip = 0.125 } },
};

static void expect_same(const struct ispec *a, const struct ispec *b,
			const char *text)
{
	cr_expect_eq(a->geom, b->geom, "%s: geom", text);
	cr_expect_eq(a->dtype, b->dtype, "%s: dtype", text);
	cr_expect_eq(a->layout, b->layout, "%s: layout", text);
	cr_expect_eq(a->has_flip, b->has_flip, "%s: has_flip", text);
	cr_expect_eq(a->has_normalize, b->has_normalize, "%s: norm", text);
	cr_expect_eq(a->size, b->size, "%s: size", text);
	cr_expect_eq(a->resize, b->resize, "%s: resize", text);
	cr_expect_eq(a->flip, b->flip, "%s: flip", text);
	for (unsigned i = 0; i < 2; i++) {
		cr_expect_eq(a->scale[i], b->scale[i], "%s: scale", text);
		cr_expect_eq(a->ratio[i], b->ratio[i], "%s: ratio", text);
	}
	for (unsigned c = 0; c < 3; c++) {
		cr_expect_eq(a->mean[c], b->mean[c], "%s: mean", text);
		cr_expect_eq(a->std[c], b->std[c], "%s: std", text);
	}
}

Test(ispec, good_specs_parse_and_round_trip)
{
	for (size_t i = 0; i < NELEM(good); i++) {
		const struct good *g = &good[i];
		const char *canon = g->canon ? g->canon : g->text;
		struct ispec sp, again;
		struct diag d;
		char buf[ISPEC_TEXT_MAX];
		int rc = ispec_parse(&sp, g->text, &d);

		cr_assert_eq(rc, 0, "\"%s\": %d %s", g->text, rc, d.msg);
		expect_same(&sp, &g->want, g->text);
		rc = ispec_format(&sp, buf, sizeof(buf));
		cr_expect_eq(rc, (int)strlen(canon), "\"%s\"", g->text);
		cr_expect_str_eq(buf, canon, "\"%s\"", g->text);
		cr_assert_eq(ispec_parse(&again, buf, &d), 0, "%s", d.msg);
		cr_expect_eq(memcmp(&sp, &again, sizeof(sp)), 0, "\"%s\"", buf);
	}
}

Test(ispec, format_truncates_like_snprintf)
{
	struct ispec sp;
	char small[8];
	int rc;

	cr_assert_eq(ispec_parse(&sp, good[0].text, NULL), 0);
	rc = ispec_format(&sp, small, sizeof(small));
	cr_expect_eq(rc, (int)strlen(good[0].text));
	cr_expect_str_eq(small, "decode ");
	cr_expect_eq(ispec_format(&sp, NULL, 0), rc);
}

Test(ispec, out_shape)
{
	struct ispec sp;
	uint32_t dims[3];

	cr_assert_eq(ispec_parse(&sp, "decode | rrc 224 | f16", NULL), 0);
	cr_expect_eq(ispec_out_shape(&sp, dims), 3);
	cr_expect(dims[0] == 3 && dims[1] == 224 && dims[2] == 224);
	cr_expect_eq(ispec_out_bytes(&sp), 3 * 224 * 224 * 2);
	cr_assert_eq(ispec_parse(&sp, "decode | center 7 | u8 | nhwc", NULL),
		     0);
	ispec_out_shape(&sp, dims);
	cr_expect(dims[0] == 7 && dims[1] == 7 && dims[2] == 3);
	cr_expect_eq(ispec_out_bytes(&sp), 147);
}

/* A bad spec, the column its message names, and the word it quotes. */
struct bad {
	const char *text;
	unsigned col;
	const char *word;
};

static const struct bad bad[] = {
	{ "", 1, "" },
	{ "   ", 1, "" },
	{ "rrc 224", 1, "rrc" },
	{ "decode", 1, "decode" },
	{ "decode | flip 0.5", 10, "flip" },
	{ "decode | rrc 224 | center 224", 20, "center" },
	{ "decode | resize 256 | f32", 10, "resize" },
	{ "decode | resize 256", 10, "resize" },
	{ "decode | resize 256 | flip 0.5 | center 224", 10, "resize" },
	{ "decode | rrc 0", 14, "0" },
	{ "decode | rrc 9000", 14, "9000" },
	{ "decode | center 8193", 17, "8193" },
	{ "decode | rrc +224", 14, "+224" },
	{ "decode | rrc abc", 14, "abc" },
	{ "decode | center 224 | flip 1.5", 28, "1.5" },
	{ "decode | rrc 224 | normalize 0.5,0.5 0.2,0.2,0.2", 30, "0.5,0.5" },
	{ "decode | rrc 224 | normalize 0.5,0.5,0.5 0.2,0,0.2", 42,
	  "0.2,0,0.2" },
	{ "decode | rrc 224 | normalize 0.5,0.5,0.5 1,-1,1", 42, "1,-1,1" },
	{ "decode | rrc 224 | normalize 2,0.5,0.5 1,1,1", 30, "2,0.5,0.5" },
	{ "decode | rrc 224 | normalize", 20, "normalize" },
	{ "decode | rrc 224 | normalize imagenet extra", 30, "imagenet" },
	{ "decode | rrc 224 | normalize imagenet | u8", 41, "u8" },
	{ "decode | rrc 224 | blur 3", 20, "blur" },
	{ "decode | rrc 224 |", 18, "|" },
	{ "decode || rrc 224", 8, "|" },
	{ "| decode | rrc 224", 1, "|" },
	{ "decode | rrc 224 | flip 0.5 | flip 0.5", 31, "flip" },
	{ "decode | decode | rrc 224", 10, "decode" },
	{ "decode | rrc 224 | f32 | f16", 26, "f16" },
	{ "decode | rrc 224 | nchw | f32", 27, "f32" },
	{ "decode | rrc 224 | nchw | nhwc", 27, "nhwc" },
	{ "decode | rrc 224 | resize 256 | center 224", 20, "resize" },
	{ "decode | center 224 | resize 256", 23, "resize" },
	{ "decode | rrc 224 scale 0.5", 18, "scale" },
	{ "decode | rrc 224 scale 0.5 0.2", 28, "0.2" },
	{ "decode | rrc 224 scale 0 1", 24, "0" },
	{ "decode | rrc 224 scale 0.1 1.5", 28, "1.5" },
	{ "decode | rrc 224 ratio 3/0 4/3", 24, "3/0" },
	{ "decode | rrc 224 ratio 1 1 ratio 1 1", 28, "ratio" },
	{ "decode | rrc 224 zoom 2", 18, "zoom" },
	{ "decode | rrc 224 scale 0.5 1 ratio", 30, "ratio" },
	{ "decode | rrc 224 scale 0.5 1 ratio 1 1 scale", 40, "scale" },
	{ "decode | rrc 224 | flip", 20, "flip" },
	{ "decode | rrc 224 | flip nan", 25, "nan" },
	{ "decode | rrc 224 | flip 0x1p-1", 25, "0x1p-1" },
	{ "decode | rrc 224 | flip 0.5 0.5", 29, "0.5" },
	{ "decode 1 | rrc 224", 8, "1" },
	{ "decode | rrc 224 | f16 x", 24, "x" },
	{ "decode\t|\trrc 224 | bogus", 20, "bogus" },
	{ "decode | rrc 224 | "
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	  20, "xxxxxxxxxxxxxxxxxxxxxxxx" },
};

Test(ispec, bad_specs_name_column_and_word)
{
	for (size_t i = 0; i < NELEM(bad); i++) {
		const struct bad *b = &bad[i];
		struct ispec sp, zero;
		struct diag d;
		char col[32], word[80];
		int rc = ispec_parse(&sp, b->text, &d);

		memset(&zero, 0, sizeof(zero));
		cr_expect_eq(rc, LOADER_EUSAGE, "\"%s\": rc %d", b->text, rc);
		snprintf(col, sizeof(col), "column %u: ", b->col);
		snprintf(word, sizeof(word), "\"%s", b->word);
		cr_expect(strstr(d.msg, col) != NULL, "\"%s\": want %s in: %s",
			  b->text, col, d.msg);
		cr_expect(strstr(d.msg, word) != NULL, "\"%s\": want %s in: %s",
			  b->text, word, d.msg);
		cr_expect_eq(memcmp(&sp, &zero, sizeof(sp)), 0,
			     "\"%s\": spec not cleared", b->text);
	}
	cr_expect_eq(ispec_parse(&(struct ispec){ 0 }, "rrc", NULL),
		     LOADER_EUSAGE, "a NULL diag is allowed");
}

/* Exact f16 bit patterns, from IEEE 754 binary16. */
static const struct {
	float in;
	uint16_t out;
} f16_table[] = {
	{ 0.0f, 0x0000 },
	{ -0.0f, 0x8000 },
	{ 1.0f, 0x3c00 },
	{ -2.0f, 0xc000 },
	{ 0.5f, 0x3800 },
	{ 0.1f, 0x2e66 },
	{ 0.333333343f, 0x3555 },
	{ 65504.0f, 0x7bff },
	{ 65505.0f, 0x7bff },
	{ 65519.0f, 0x7bff },
	{ 65520.0f, 0x7c00 }, /* the midpoint rounds to even: infinity */
	{ 1e6f, 0x7c00 },
	{ -1e6f, 0xfc00 },
	{ 6.10351562e-05f, 0x0400 }, /* smallest normal, 2^-14 */
	{ 5.96046448e-08f, 0x0001 }, /* smallest subnormal, 2^-24 */
	{ 2.98023224e-08f, 0x0000 }, /* 2^-25: a tie, to even 0 */
	{ 2.98023259e-08f, 0x0001 }, /* just above the tie */
	{ 8.94069672e-08f, 0x0002 }, /* 1.5 * 2^-24: tie, to even 2 */
	{ 1e-8f, 0x0000 },
	{ 6.09755516e-05f, 0x03ff }, /* largest subnormal */
	{ 1.00048828f, 0x3c00 },     /* 1 + 2^-11: tie, to even */
	{ 1.00146484f, 0x3c02 },     /* 1 + 3 * 2^-11: tie, to even */
	{ 2048.0f, 0x6800 },
	{ 2049.0f, 0x6800 },
	{ 2051.0f, 0x6802 },
	{ INFINITY, 0x7c00 },
	{ -INFINITY, 0xfc00 },
};

Test(ispec, f16_table)
{
	for (size_t i = 0; i < NELEM(f16_table); i++)
		cr_expect_eq(
			ispec_f32_to_f16(f16_table[i].in), f16_table[i].out,
			"%a: got %#x want %#x", (double)f16_table[i].in,
			ispec_f32_to_f16(f16_table[i].in), f16_table[i].out);
	uint16_t n = ispec_f32_to_f16(NAN), m = ispec_f32_to_f16(-NAN);

	cr_expect((n & 0x7c00) == 0x7c00 && (n & 0x3ff), "NaN: %#x", n);
	cr_expect((m & 0xfc00) == 0xfc00 && (m & 0x3ff), "-NaN: %#x", m);
}

/*
 * The value of an f16 bit pattern, decoded by hand: a check of the
 * conversion that shares nothing with it.
 */
static double f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f;
	double m = h & 0x3ff, v;

	if (e == 0x1f)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, -24);
	else
		v = ldexp(m + 1024, e - 25);
	return h & 0x8000 ? -v : v;
}

/*
 * double -> f16 bits, rounding in double on the f16 grid of v's binade
 * (nearbyint rounds ties to even), then encoding the exact result.
 */
static uint16_t f16_ref(double v)
{
	double a = fabs(v), ulp, r;
	int e;

	if (a >= 65520.0)
		return v < 0 ? 0xfc00 : 0x7c00;
	frexp(a, &e); /* a = f * 2^e, 0.5 <= f < 1 */
	ulp = a < 0x1p-14 ? 0x1p-24 : ldexp(1.0, e - 11);
	r = nearbyint(a / ulp) * ulp;
	/* r is on the f16 grid, so the conversion below is exact. */
	uint16_t h = ispec_f32_to_f16((float)r);

	cr_assert_eq(f16_value(h), r, "f16 grid value %a", r);
	return (uint16_t)(h | (v < 0 ? 0x8000 : 0));
}

Test(ispec, f16_against_double_rounding)
{
	uint64_t s = 42;

	/* Every f16 value, and random floats over the whole f16 range. */
	for (uint32_t h = 0; h < 0x7c00; h++) {
		float f = (float)f16_value((uint16_t)h);

		cr_assert_eq(ispec_f32_to_f16(f), h);
		cr_assert_eq(ispec_f32_to_f16(-f), h | 0x8000);
	}
	for (int i = 0; i < 1000000; i++) {
		uint32_t u = (uint32_t)ut_rand(&s);
		float f;

		/* Exponents 2^-26 .. 2^16 with a random mantissa and sign. */
		u = (u & 0x807fffffu) | ((101u + (u >> 8) % 43) << 23);
		memcpy(&f, &u, sizeof(f));
		cr_assert_eq(ispec_f32_to_f16(f), f16_ref(f), "%a", (double)f);
	}
}

#ifdef __FLT16_MAX__
/* The compiler's own conversion, where it has one, must agree too. */
Test(ispec, f16_matches_Float16)
{
	uint64_t s = 7;

	for (int i = 0; i < 1000000; i++) {
		uint32_t u = (uint32_t)ut_rand(&s);
		float f;
		_Float16 g;
		uint16_t want;

		memcpy(&f, &u, sizeof(f));
		if (isnan(f))
			continue;
		g = (_Float16)f;
		memcpy(&want, &g, sizeof(want));
		cr_assert_eq(ispec_f32_to_f16(f), want, "%a", (double)f);
	}
}
#endif

/* A w x w RGB test image with every channel covering many values. */
static void picture(uint8_t *px, unsigned w)
{
	ut_picture(px, w, w, 3, 3);
	px[0] = 0;
	px[1] = 255;
	px[5] = 128;
}

static double ref_value(const struct ispec *sp, unsigned c, uint8_t x)
{
	if (!sp->has_normalize)
		return x / 255.0;
	return (x / 255.0 - sp->mean[c]) / sp->std[c];
}

/* Element (pixel i, channel c) in the output of sp. */
static size_t out_index(const struct ispec *sp, size_t np, size_t i, unsigned c)
{
	return sp->layout == ISPEC_NCHW ? c * np + i : i * 3 + c;
}

Test(ispec, emit_f32_against_double)
{
	static const char *const specs[] = {
		"decode | center 13 | normalize imagenet | f32 | nchw",
		"decode | center 13 | normalize imagenet | f32 | nhwc",
		"decode | center 13 | normalize 0.5,0.1,0.9 0.3,2,0.01",
		"decode | center 13 | f32 | nhwc",
	};
	enum { W = 13, NP = W * W };
	uint8_t px[NP * 3];
	float out[NP * 3];

	picture(px, W);
	for (size_t k = 0; k < NELEM(specs); k++) {
		struct ispec sp;

		cr_assert_eq(ispec_parse(&sp, specs[k], NULL), 0);
		cr_assert_eq(ispec_emit(&sp, px, W, W, out), 0);
		for (size_t i = 0; i < NP; i++) {
			for (unsigned c = 0; c < 3; c++) {
				uint8_t x = px[i * 3 + c];
				double want = ref_value(&sp, c, x);
				double got = out[out_index(&sp, NP, i, c)];
				/*
				 * Relative to the terms, not the result: near
				 * x / 255 == mean the result cancels to ~0 and
				 * only the inputs' rounding is left.
				 */
				double mag =
					x / 255.0 /
						(sp.has_normalize ? sp.std[c] :
								    1) +
					(sp.has_normalize ?
						 sp.mean[c] / sp.std[c] :
						 0);

				cr_assert_leq(fabs(got - want), 1e-6 * mag,
					      "%s: px %zu c %u x %u: %.9g %.9g",
					      specs[k], i, c, x, got, want);
			}
		}
	}
}

Test(ispec, emit_f16_every_u8_input)
{
	static const char *const specs[] = {
		"decode | center 16 | normalize imagenet | f16 | nhwc",
		"decode | center 16 | normalize imagenet | f16 | nchw",
		"decode | center 16 | f16 | nchw",
	};
	enum { W = 16, NP = W * W };
	uint8_t px[NP * 3];
	uint16_t out[NP * 3];
	unsigned inexact = 0;

	/* Pixel i holds i in channel 0, 255 - i in 1, i * 7 in 2. */
	for (unsigned i = 0; i < NP; i++) {
		px[i * 3] = (uint8_t)i;
		px[i * 3 + 1] = (uint8_t)(255 - i);
		px[i * 3 + 2] = (uint8_t)(i * 7);
	}
	for (size_t k = 0; k < NELEM(specs); k++) {
		struct ispec sp;

		cr_assert_eq(ispec_parse(&sp, specs[k], NULL), 0);
		cr_assert_eq(ispec_emit(&sp, px, W, W, out), 0);
		for (size_t i = 0; i < NP; i++) {
			for (unsigned c = 0; c < 3; c++) {
				uint8_t x = px[i * 3 + c];
				uint16_t want = f16_ref(ref_value(&sp, c, x));
				uint16_t got = out[out_index(&sp, NP, i, c)];
				int diff = (int)(got & 0x7fff) -
					   (int)(want & 0x7fff);

				/*
				 * The kernel rounds twice (to float, then to
				 * f16); that can differ from one rounding of
				 * the exact value only when it lies within a
				 * few float ulps of an f16 tie: one f16 ulp,
				 * and rarely.
				 */
				cr_assert((got & 0x8000) == (want & 0x8000) ||
						  !(got & 0x7fff) ||
						  !(want & 0x7fff),
					  "%s: x %u sign", specs[k], x);
				cr_assert_leq(abs(diff), 1,
					      "%s: x %u c %u: %#x want %#x",
					      specs[k], x, c, got, want);
				inexact += diff != 0;
			}
		}
	}
	cr_expect_leq(inexact, 3, "%u results off by one f16 ulp", inexact);
}

Test(ispec, emit_u8_layouts)
{
	enum { W = 5, NP = W * W };
	uint8_t px[NP * 3], out[NP * 3];
	struct ispec sp;

	picture(px, W);
	cr_assert_eq(ispec_parse(&sp, "decode | center 5 | u8 | nchw", NULL),
		     0);
	cr_assert_eq(ispec_emit(&sp, px, W, W, out), 0);
	for (unsigned y = 0; y < W; y++)
		for (unsigned x = 0; x < W; x++)
			for (unsigned c = 0; c < 3; c++)
				cr_assert_eq(out[(c * W + y) * W + x],
					     px[(y * W + x) * 3 + c]);
	cr_assert_eq(ispec_parse(&sp, "decode | center 5 | u8 | nhwc", NULL),
		     0);
	cr_assert_eq(ispec_emit(&sp, px, W, W, out), 0);
	cr_assert_eq(memcmp(out, px, sizeof(px)), 0);
}

Test(ispec, emit_checks_size)
{
	uint8_t px[4 * 4 * 3] = { 0 };
	float out[4 * 4 * 3];
	struct ispec sp;

	cr_assert_eq(ispec_parse(&sp, "decode | center 4", NULL), 0);
	cr_expect_eq(ispec_emit(&sp, px, 4, 3, out), -EINVAL);
	cr_expect_eq(ispec_emit(&sp, px, 3, 4, out), -EINVAL);
	cr_expect_eq(ispec_emit(&sp, px, 4, 4, out), 0);
}

/*
 * The SIMD loops (AVX2, F16C, streaming stores) give the portable loops'
 * bytes, for every dtype and layout, sizes with and without a tail of
 * fewer than 8 pixels, and an output that is not 32-byte aligned.
 */
Test(ispec, emit_simd_equals_portable)
{
	static const char *const specs[] = {
		" | normalize imagenet | f32 | nchw",
		" | normalize imagenet | f16 | nchw",
		" | normalize 0.5,0.1,0.9 0.3,2,0.01 | f16",
		" | f32 | nhwc",
		" | f16 | nhwc",
		" | u8 | nchw",
	};
	static const unsigned sides[] = { 1, 3, 13, 16, 224 };
	enum { MAXW = 224, MAXB = MAXW * MAXW * 3 * 4 };
	uint8_t *px = malloc(MAXW * MAXW * 3);
	unsigned char *a = malloc(MAXB + 128), *b = malloc(MAXB + 128);
	uint64_t seed = 99;

	cr_assert(px && a && b);
	for (size_t i = 0; i < MAXW * MAXW * 3; i++)
		px[i] = (uint8_t)(ut_rand(&seed) >> 56);
	for (size_t k = 0; k < NELEM(specs); k++)
		for (size_t w = 0; w < NELEM(sides); w++)
			for (unsigned off = 0; off <= 4; off += 4) {
				char text[128];
				struct ispec sp;
				size_t n;

				snprintf(text, sizeof(text),
					 "decode | center %u%s", sides[w],
					 specs[k]);
				cr_assert_eq(ispec_parse(&sp, text, NULL), 0);
				n = ispec_out_bytes(&sp);
				memset(a, 0xa5, MAXB + 128);
				memset(b, 0x5a, MAXB + 128);
				ispec_test_simd(true);
				cr_assert_eq(ispec_emit(&sp, px, sides[w],
							sides[w], a + 64 + off),
					     0);
				ispec_test_simd(false);
				cr_assert_eq(ispec_emit(&sp, px, sides[w],
							sides[w], b + 64 + off),
					     0);
				ispec_test_simd(true);
				cr_expect_eq(
					memcmp(a + 64 + off, b + 64 + off, n),
					0, "%s, output offset %u", text, off);
				/* nothing written around the output */
				cr_expect_eq(a[63 + off], 0xa5);
				cr_expect_eq(a[64 + off + n], 0xa5);
			}
	free(px);
	free(a);
	free(b);
}
