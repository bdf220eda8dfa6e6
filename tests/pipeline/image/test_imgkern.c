/*
 * test_imgkern.c - the image pipeline's last step: the f16 conversion and
 * the normalize/cast/layout kernel, vectorized and portable.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader_error.h"
#include "imgkern.h"
#include "ispec.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

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

Test(imgkern, f16_table)
{
	for (size_t i = 0; i < NELEM(f16_table); i++)
		cr_expect_eq(
			imgkern_f32_to_f16(f16_table[i].in), f16_table[i].out,
			"%a: got %#x want %#x", (double)f16_table[i].in,
			imgkern_f32_to_f16(f16_table[i].in), f16_table[i].out);
	uint16_t n = imgkern_f32_to_f16(NAN), m = imgkern_f32_to_f16(-NAN);

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
	uint16_t h = imgkern_f32_to_f16((float)r);

	cr_assert_eq(f16_value(h), r, "f16 grid value %a", r);
	return (uint16_t)(h | (v < 0 ? 0x8000 : 0));
}

Test(imgkern, f16_against_double_rounding)
{
	uint64_t s = 42;

	/* Every f16 value, and random floats over the whole f16 range. */
	for (uint32_t h = 0; h < 0x7c00; h++) {
		float f = (float)f16_value((uint16_t)h);

		cr_assert_eq(imgkern_f32_to_f16(f), h);
		cr_assert_eq(imgkern_f32_to_f16(-f), h | 0x8000);
	}
	for (int i = 0; i < 1000000; i++) {
		uint32_t u = (uint32_t)ut_rand(&s);
		float f;

		/* Exponents 2^-26 .. 2^16 with a random mantissa and sign. */
		u = (u & 0x807fffffu) | ((101u + (u >> 8) % 43) << 23);
		memcpy(&f, &u, sizeof(f));
		cr_assert_eq(imgkern_f32_to_f16(f), f16_ref(f), "%a",
			     (double)f);
	}
}

#ifdef __FLT16_MAX__
/* The compiler's own conversion, where it has one, must agree too. */
Test(imgkern, f16_matches_Float16)
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
		cr_assert_eq(imgkern_f32_to_f16(f), want, "%a", (double)f);
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

Test(imgkern, emit_f32_against_double)
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
		cr_assert_eq(imgkern_emit(&sp, px, W, W, out), 0);
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

Test(imgkern, emit_f16_every_u8_input)
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
		cr_assert_eq(imgkern_emit(&sp, px, W, W, out), 0);
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

Test(imgkern, emit_u8_layouts)
{
	enum { W = 5, NP = W * W };
	uint8_t px[NP * 3], out[NP * 3];
	struct ispec sp;

	picture(px, W);
	cr_assert_eq(ispec_parse(&sp, "decode | center 5 | u8 | nchw", NULL),
		     0);
	cr_assert_eq(imgkern_emit(&sp, px, W, W, out), 0);
	for (unsigned y = 0; y < W; y++)
		for (unsigned x = 0; x < W; x++)
			for (unsigned c = 0; c < 3; c++)
				cr_assert_eq(out[(c * W + y) * W + x],
					     px[(y * W + x) * 3 + c]);
	cr_assert_eq(ispec_parse(&sp, "decode | center 5 | u8 | nhwc", NULL),
		     0);
	cr_assert_eq(imgkern_emit(&sp, px, W, W, out), 0);
	cr_assert_eq(memcmp(out, px, sizeof(px)), 0);
}

Test(imgkern, emit_checks_size)
{
	uint8_t px[4 * 4 * 3] = { 0 };
	float out[4 * 4 * 3];
	struct ispec sp;

	cr_assert_eq(ispec_parse(&sp, "decode | center 4", NULL), 0);
	cr_expect_eq(imgkern_emit(&sp, px, 4, 3, out), -EINVAL);
	cr_expect_eq(imgkern_emit(&sp, px, 3, 4, out), -EINVAL);
	cr_expect_eq(imgkern_emit(&sp, px, 4, 4, out), 0);
}

/*
 * The SIMD loops (AVX2, F16C, streaming stores) give the portable loops'
 * bytes, for every dtype and layout, sizes with and without a tail of
 * fewer than 8 pixels, and an output that is not 32-byte aligned.
 */
Test(imgkern, emit_simd_equals_portable)
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
				imgkern_test_simd(true);
				cr_assert_eq(imgkern_emit(&sp, px, sides[w],
							  sides[w],
							  a + 64 + off),
					     0);
				imgkern_test_simd(false);
				cr_assert_eq(imgkern_emit(&sp, px, sides[w],
							  sides[w],
							  b + 64 + off),
					     0);
				imgkern_test_simd(true);
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
