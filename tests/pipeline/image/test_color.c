/*
 * test_color.c - the colour stages (color.c): the AVX2 loops give the
 * portable loops' bytes on random images and random parameters, both
 * give the bytes of the stages as they were computed one at a time (a
 * reference kept here), a jitter's fused sweeps give its components'
 * stages one after another, and the separable gaussian_blur stays
 * within a value of the 2-D one.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "color.h"
#include "ispec.h"
#include "rng.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

enum { MAXS = 256 }; /* the largest side tested */

/*
 * A w x h test image: random bytes, with some pixels gray (all three
 * channels equal), some with two channels equal, and some black or
 * white, so that hue's ties and grayscale's ends are all reached.
 */
static void random_image(uint8_t *px, uint32_t w, uint32_t h, uint64_t *s)
{
	for (size_t i = 0; i < (size_t)w * h; i++, px += 3) {
		uint64_t r = ut_rand(s);
		unsigned kind = (unsigned)(r >> 60);

		px[0] = (uint8_t)(r >> 8);
		px[1] = (uint8_t)(r >> 16);
		px[2] = (uint8_t)(r >> 24);
		if (kind == 0)
			px[1] = px[2] = px[0];
		else if (kind == 1)
			px[1] = px[0];
		else if (kind == 2)
			px[2] = px[1];
		else if (kind == 3)
			px[0] = px[2];
		else if (kind == 4)
			px[0] = px[1] = px[2] = (r >> 32) & 1 ? 255 : 0;
	}
}

/* Sizes with and without SIMD tails, degenerate ones, and the real one. */
static const uint32_t sizes[][2] = {
	{ 1, 1 },   { 2, 2 },  { 3, 3 },  { 4, 7 },   { 7, 3 },
	{ 11, 1 },  { 1, 11 }, { 6, 6 },  { 16, 16 }, { 17, 9 },
	{ 31, 33 }, { 64, 5 }, { 5, 64 }, { 90, 61 }, { 224, 224 },
};

/* Each stage, with parameters at and beyond the usual ranges. */
static const struct ispec_op ops[] = {
	{ .kind = ISPEC_OP_BRIGHTNESS, .p = 1, .a = { 0.4 } },
	{ .kind = ISPEC_OP_BRIGHTNESS, .p = 1, .a = { 1000 } },
	{ .kind = ISPEC_OP_CONTRAST, .p = 1, .a = { 0.6 } },
	{ .kind = ISPEC_OP_CONTRAST, .p = 1, .a = { 1000 } },
	{ .kind = ISPEC_OP_SATURATION, .p = 1, .a = { 0.8 } },
	{ .kind = ISPEC_OP_SATURATION, .p = 1, .a = { 1000 } },
	{ .kind = ISPEC_OP_HUE, .p = 1, .a = { 0.1 } },
	{ .kind = ISPEC_OP_HUE, .p = 1, .a = { 0.5 } },
	{ .kind = ISPEC_OP_JITTER, .p = 1, .a = { 0.4, 0.4, 0.4, 0.1 } },
	{ .kind = ISPEC_OP_JITTER, .p = 1, .a = { 0.4, 0.4, 0.4, 0 } },
	{ .kind = ISPEC_OP_JITTER, .p = 1, .a = { 0, 0.5, 0, 0.5 } },
	{ .kind = ISPEC_OP_JITTER, .p = 1, .a = { 0.9, 0, 0.9, 0 } },
	{ .kind = ISPEC_OP_JITTER, .p = 1, .a = { 1000, 1000, 1000, 0.5 } },
	{ .kind = ISPEC_OP_GRAYSCALE, .p = 1, .a = { 0 } },
	{ .kind = ISPEC_OP_INVERT, .p = 1, .a = { 0 } },
	{ .kind = ISPEC_OP_POSTERIZE, .p = 1, .a = { 1 } },
	{ .kind = ISPEC_OP_POSTERIZE, .p = 1, .a = { 4 } },
	{ .kind = ISPEC_OP_POSTERIZE, .p = 1, .a = { 8 } },
	{ .kind = ISPEC_OP_SOLARIZE, .p = 1, .a = { 0 } },
	{ .kind = ISPEC_OP_SOLARIZE, .p = 1, .a = { 127.5 } },
	{ .kind = ISPEC_OP_SOLARIZE, .p = 1, .a = { 200 } },
	{ .kind = ISPEC_OP_SOLARIZE, .p = 1, .a = { 255 } },
	{ .kind = ISPEC_OP_AUTOCONTRAST, .p = 1, .a = { 0 } },
	{ .kind = ISPEC_OP_EQUALIZE, .p = 1, .a = { 0 } },
	{ .kind = ISPEC_OP_SHARPNESS, .p = 1, .a = { 0 } },
	{ .kind = ISPEC_OP_SHARPNESS, .p = 1, .a = { 0.2 } },
	{ .kind = ISPEC_OP_SHARPNESS, .p = 1, .a = { 3 } },
	{ .kind = ISPEC_OP_SHARPNESS, .p = 1, .a = { 1000 } },
	{ .kind = ISPEC_OP_BLUR, .p = 1, .a = { 1, 0.1, 2 } },
	{ .kind = ISPEC_OP_BLUR, .p = 1, .a = { 3, 0.1, 2 } },
	{ .kind = ISPEC_OP_BLUR, .p = 1, .a = { 5, 0.1, 2 } },
	{ .kind = ISPEC_OP_BLUR, .p = 1, .a = { 9, 2, 3 } },
	{ .kind = ISPEC_OP_BLUR, .p = 1, .a = { 31, 0.5, 100 } },
	{ .kind = ISPEC_OP_CHANNEL_SHIFT, .p = 1, .a = { 60 } },
};

/* Whether op, a gaussian_blur, can pad an image w x h by reflection. */
static bool fits(const struct ispec_op *op, uint32_t w, uint32_t h)
{
	uint32_t half = (uint32_t)op->a[0] / 2;

	return op->kind != ISPEC_OP_BLUR || (half < w && half < h);
}

struct bufs {
	uint8_t *img, *a, *b, *tmp;
};

static struct bufs bufs_new(void)
{
	struct bufs b = {
		malloc((size_t)MAXS * MAXS * 3),
		malloc((size_t)MAXS * MAXS * 3),
		malloc((size_t)MAXS * MAXS * 3),
		aligned_alloc(64, (color_scratch_bytes(MAXS) + 63) / 64 * 64),
	};

	cr_assert(b.img && b.a && b.b && b.tmp);
	return b;
}

static void bufs_free(struct bufs *b)
{
	free(b->img);
	free(b->a);
	free(b->b);
	free(b->tmp);
}

/* The first byte where a and b differ, or -1. */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (long)i;
	return -1;
}

/*
 * Every stage, drawn with random seeds, on random images of each size:
 * the AVX2 loops and the portable ones give the same bytes.
 */
Test(color, simd_equals_portable)
{
	struct bufs b = bufs_new();
	uint64_t s = 7;

	for (size_t k = 0; k < NELEM(ops); k++)
		for (size_t z = 0; z < NELEM(sizes); z++) {
			uint32_t w = sizes[z][0], h = sizes[z][1];
			size_t n = (size_t)w * h * 3;
			unsigned tries = w * h > 4096 ? 3 : 12;

			if (!fits(&ops[k], w, h))
				continue;
			for (unsigned t = 0; t < tries; t++) {
				struct color_draw dr;
				struct rng r;
				long d;

				rng_seed(&r, ut_rand(&s));
				color_draw(&ops[k], &r, &dr);
				dr.apply = true;
				random_image(b.img, w, h, &s);
				memcpy(b.a, b.img, n);
				memcpy(b.b, b.img, n);
				color_test_simd(true);
				color_apply(&ops[k], &dr, b.a, w, h, b.tmp);
				color_test_simd(false);
				color_apply(&ops[k], &dr, b.b, w, h, b.tmp);
				color_test_simd(true);
				d = first_diff(b.a, b.b, n);
				cr_expect(d < 0,
					  "%s %g %g %g %g on %ux%u (try %u): "
					  "byte %ld is %u by AVX2, %u portable",
					  ispec_op_name(ops[k].kind),
					  ops[k].a[0], ops[k].a[1], ops[k].a[2],
					  ops[k].a[3], w, h, t, d,
					  d < 0 ? 0 : b.a[d],
					  d < 0 ? 0 : b.b[d]);
				if (d >= 0)
					break;
			}
		}
	bufs_free(&b);
}

/*
 * The stages as they were computed before the sweeps and the SIMD
 * loops, one stage and one pass at a time: the reference for the bytes.
 */
static uint8_t ref_u8(float v)
{
	if (!(v > 0))
		return 0;
	if (v >= 255)
		return 255;
	return (uint8_t)v;
}

static uint8_t ref_gray(const uint8_t *px)
{
	return ref_u8(0.2989f * px[0] + 0.587f * px[1] + 0.114f * px[2]);
}

static uint8_t ref_blend(uint8_t x, float y, double f)
{
	return ref_u8((float)f * (float)x + (float)(1.0 - f) * y);
}

static void ref_brightness(uint8_t *p, size_t n, double f)
{
	for (size_t i = 0; i < n * 3; i++)
		p[i] = ref_blend(p[i], 0.0f, f);
}

static void ref_contrast(uint8_t *p, size_t n, double f)
{
	double sum = 0;
	float mean;

	for (size_t i = 0; i < n; i++)
		sum += ref_gray(p + 3 * i);
	mean = (float)(sum / (double)n);
	for (size_t i = 0; i < n * 3; i++)
		p[i] = ref_blend(p[i], mean, f);
}

static void ref_saturation(uint8_t *p, size_t n, double f)
{
	for (size_t i = 0; i < n; i++, p += 3) {
		float g = ref_gray(p);

		for (unsigned c = 0; c < 3; c++)
			p[c] = ref_blend(p[c], g, f);
	}
}

static float ref_rem1(float a)
{
	return a - floorf(a);
}

static void ref_hue(uint8_t *px, size_t n, double shift)
{
	for (size_t k = 0; k < n; k++, px += 3) {
		float r = px[0] / 255.0f, g = px[1] / 255.0f,
		      b = px[2] / 255.0f;
		float maxc = fmaxf(r, fmaxf(g, b)),
		      minc = fminf(r, fminf(g, b));
		bool eqc = maxc == minc;
		float cr = maxc - minc, s, crd, rc, gc, bc, h, v, f, pp, q, t;
		int i;

		s = cr / (eqc ? 1.0f : maxc);
		crd = eqc ? 1.0f : cr;
		rc = (maxc - r) / crd;
		gc = (maxc - g) / crd;
		bc = (maxc - b) / crd;
		h = (maxc == r) ? (bc - gc) : 0.0f;
		h += (maxc == g && maxc != r) ? (2.0f + rc - bc) : 0.0f;
		h += (maxc != g && maxc != r) ? (4.0f + gc - rc) : 0.0f;
		h = ref_rem1(h / 6.0f + 1.0f);
		h = ref_rem1(h + (float)shift);
		v = maxc;
		i = (int)floorf(h * 6.0f);
		f = h * 6.0f - (float)i;
		pp = fminf(fmaxf(v * (1.0f - s), 0.0f), 1.0f);
		q = fminf(fmaxf(v * (1.0f - s * f), 0.0f), 1.0f);
		t = fminf(fmaxf(v * (1.0f - s * (1.0f - f)), 0.0f), 1.0f);
		switch (i % 6) {
		case 0: r = v, g = t, b = pp; break;
		case 1: r = q, g = v, b = pp; break;
		case 2: r = pp, g = v, b = t; break;
		case 3: r = pp, g = q, b = v; break;
		case 4: r = t, g = pp, b = v; break;
		default: r = v, g = pp, b = q; break;
		}
		px[0] = ref_u8(r * 255.0f);
		px[1] = ref_u8(g * 255.0f);
		px[2] = ref_u8(b * 255.0f);
	}
}

static void ref_sharpness(uint8_t *p, uint32_t w, uint32_t h, double f)
{
	float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
	size_t row = (size_t)w * 3;
	uint8_t *tmp;

	if (w <= 2 || h <= 2)
		return;
	tmp = malloc(row * h);
	cr_assert(tmp);
	memcpy(tmp, p, row * h);
	for (uint32_t y = 1; y + 1 < h; y++)
		for (size_t i = 3; i + 3 < row; i++) {
			const uint8_t *q = p + y * row + i;
			float s = 0;

			for (int dy = -1; dy <= 1; dy++)
				for (int dx = -1; dx <= 1; dx++)
					s += (dy || dx ? k1 : k5) *
					     (float)q[dy * (long)row + dx * 3];
			tmp[y * row + i] = ref_u8(nearbyintf(s));
		}
	for (size_t i = 0; i < row * h; i++)
		p[i] = ref_blend(p[i], (float)tmp[i], f);
	free(tmp);
}

/*
 * autocontrast, equalize and channel_shift as they were computed before
 * their tables and SIMD loops: a channel at a time, a byte at a time.
 */
static void ref_autocontrast(uint8_t *p, size_t n)
{
	for (unsigned c = 0; c < 3; c++) {
		uint8_t lo = 255, hi = 0;
		float scale, minimum;

		for (size_t i = 0; i < n; i++) {
			lo = p[3 * i + c] < lo ? p[3 * i + c] : lo;
			hi = p[3 * i + c] > hi ? p[3 * i + c] : hi;
		}
		if (lo == hi)
			continue;
		minimum = lo;
		scale = 255.0f / ((float)hi - minimum);
		for (size_t i = 0; i < n; i++)
			p[3 * i + c] =
				ref_u8(((float)p[3 * i + c] - minimum) * scale);
	}
}

static void ref_equalize(uint8_t *p, size_t n)
{
	for (unsigned c = 0; c < 3; c++) {
		uint64_t hist[256] = { 0 }, sum = 0, last = 0, step, cum = 0;
		uint8_t lut[256];

		for (size_t i = 0; i < n; i++)
			hist[p[3 * i + c]]++;
		for (unsigned v = 0; v < 256; v++)
			if (hist[v]) {
				sum += hist[v];
				last = hist[v];
			}
		step = (sum - last) / 255;
		if (!step)
			continue;
		lut[0] = 0;
		for (unsigned v = 0; v < 255; v++) {
			uint64_t t;

			cum += hist[v];
			t = (cum + step / 2) / step;
			lut[v + 1] = (uint8_t)(t > 255 ? 255 : t);
		}
		for (size_t i = 0; i < n; i++)
			p[3 * i + c] = lut[p[3 * i + c]];
	}
}

static void ref_channel_shift(uint8_t *p, size_t n, double shift)
{
	uint8_t lo = 255, hi = 0;

	for (size_t i = 0; i < n * 3; i++) {
		lo = p[i] < lo ? p[i] : lo;
		hi = p[i] > hi ? p[i] : hi;
	}
	for (size_t i = 0; i < n * 3; i++) {
		double v = p[i] + shift;

		v = v < lo ? lo : v > hi ? hi : v;
		p[i] = (uint8_t)nearbyint(v);
	}
}

/* The reference of op as drawn; false for a stage it does not cover. */
static bool ref_apply(const struct ispec_op *op, const struct color_draw *dr,
		      uint8_t *p, uint32_t w, uint32_t h)
{
	size_t n = (size_t)w * h;

	switch (op->kind) {
	case ISPEC_OP_BRIGHTNESS: ref_brightness(p, n, dr->f[0]); break;
	case ISPEC_OP_CONTRAST: ref_contrast(p, n, dr->f[0]); break;
	case ISPEC_OP_SATURATION: ref_saturation(p, n, dr->f[0]); break;
	case ISPEC_OP_HUE: ref_hue(p, n, dr->f[0]); break;
	case ISPEC_OP_JITTER:
		for (unsigned i = 0; i < dr->n; i++) {
			unsigned c = dr->order[i];

			if (c == 0)
				ref_brightness(p, n, dr->f[c]);
			else if (c == 1)
				ref_contrast(p, n, dr->f[c]);
			else if (c == 2)
				ref_saturation(p, n, dr->f[c]);
			else
				ref_hue(p, n, dr->f[c]);
		}
		break;
	case ISPEC_OP_GRAYSCALE:
		for (size_t i = 0; i < n; i++)
			p[3 * i] = p[3 * i + 1] = p[3 * i + 2] =
				ref_gray(p + 3 * i);
		break;
	case ISPEC_OP_INVERT:
		for (size_t i = 0; i < n * 3; i++)
			p[i] = (uint8_t)(255 - p[i]);
		break;
	case ISPEC_OP_POSTERIZE:
		for (size_t i = 0; i < n * 3; i++)
			p[i] &= (uint8_t)(0xff << (8 - (unsigned)op->a[0]));
		break;
	case ISPEC_OP_SOLARIZE:
		for (size_t i = 0; i < n * 3; i++)
			if ((float)p[i] >= (float)op->a[0])
				p[i] = (uint8_t)(255 - p[i]);
		break;
	case ISPEC_OP_SHARPNESS: ref_sharpness(p, w, h, op->a[0]); break;
	case ISPEC_OP_AUTOCONTRAST: ref_autocontrast(p, n); break;
	case ISPEC_OP_EQUALIZE: ref_equalize(p, n); break;
	case ISPEC_OP_CHANNEL_SHIFT: ref_channel_shift(p, n, dr->f[0]); break;
	default: return false;
	}
	return true;
}

/*
 * Both loops give the reference's bytes for every stage it covers: the
 * sweeps, fused or not, change no value.
 */
Test(color, equals_reference)
{
	struct bufs b = bufs_new();
	uint64_t s = 11;

	for (size_t k = 0; k < NELEM(ops); k++)
		for (size_t z = 0; z < NELEM(sizes); z++) {
			uint32_t w = sizes[z][0], h = sizes[z][1];
			size_t n = (size_t)w * h * 3;

			for (unsigned t = 0; t < 6; t++) {
				struct color_draw dr;
				struct rng r;
				bool simd = t & 1;
				long d;

				rng_seed(&r, ut_rand(&s));
				color_draw(&ops[k], &r, &dr);
				dr.apply = true;
				random_image(b.img, w, h, &s);
				memcpy(b.a, b.img, n);
				memcpy(b.b, b.img, n);
				if (!ref_apply(&ops[k], &dr, b.b, w, h))
					break;
				color_test_simd(simd);
				color_apply(&ops[k], &dr, b.a, w, h, b.tmp);
				color_test_simd(true);
				d = first_diff(b.a, b.b, n);
				cr_expect(
					d < 0,
					"%s %g %g %g %g on %ux%u (%s): byte "
					"%ld is %u, the reference's %u",
					ispec_op_name(ops[k].kind), ops[k].a[0],
					ops[k].a[1], ops[k].a[2], ops[k].a[3],
					w, h, simd ? "AVX2" : "portable", d,
					d < 0 ? 0 : b.a[d], d < 0 ? 0 : b.b[d]);
			}
		}
	bufs_free(&b);
}

/*
 * A jitter in each of the 24 orders of its four components gives the
 * bytes of its components as stages of their own, one after another.
 */
Test(color, jitter_as_its_stages)
{
	static const uint8_t kinds[4] = {
		ISPEC_OP_BRIGHTNESS,
		ISPEC_OP_CONTRAST,
		ISPEC_OP_SATURATION,
		ISPEC_OP_HUE,
	};
	const struct ispec_op jit = { .kind = ISPEC_OP_JITTER,
				      .p = 1,
				      .a = { 0.5, 0.5, 0.5, 0.2 } };
	struct bufs b = bufs_new();
	uint32_t w = 37, h = 29;
	size_t n = (size_t)w * h * 3;
	uint64_t s = 5;
	unsigned orders = 0;

	for (unsigned o = 0; o < 256; o++) {
		uint8_t perm[4] = { o & 3, (o >> 2) & 3, (o >> 4) & 3,
				    (o >> 6) & 3 };
		struct color_draw dr = { .apply = true, .n = 4 };

		if ((1u << perm[0] | 1u << perm[1] | 1u << perm[2] |
		     1u << perm[3]) != 15)
			continue; /* not a permutation */
		orders++;
		memcpy(dr.order, perm, 4);
		for (unsigned c = 0; c < 3; c++)
			dr.f[c] = 0.5 + (double)(ut_rand(&s) >> 11) * 0x1p-53;
		dr.f[3] = -0.2 + (double)(ut_rand(&s) >> 11) * 0x1p-53 * 0.4;
		for (unsigned simd = 0; simd < 2; simd++) {
			color_test_simd(simd);
			random_image(b.img, w, h, &s);
			memcpy(b.a, b.img, n);
			memcpy(b.b, b.img, n);
			color_apply(&jit, &dr, b.a, w, h, b.tmp);
			for (unsigned i = 0; i < 4; i++) {
				struct ispec_op one = { .kind = kinds[perm[i]],
							.p = 1,
							.a = { 0.5 } };
				struct color_draw d1 = { .apply = true };

				d1.f[0] = dr.f[perm[i]];
				color_apply(&one, &d1, b.b, w, h, b.tmp);
			}
			cr_expect(memcmp(b.a, b.b, n) == 0,
				  "order %u,%u,%u,%u (%s): byte %ld differs",
				  perm[0], perm[1], perm[2], perm[3],
				  simd ? "AVX2" : "portable",
				  first_diff(b.a, b.b, n));
		}
	}
	color_test_simd(true);
	cr_expect_eq(orders, 24);
	bufs_free(&b);
}

/* The 2-D gaussian_blur, as it was computed before it was separable. */
static void ref_blur(uint8_t *p, uint32_t w, uint32_t h, unsigned k,
		     double sigma)
{
	float k1[COLOR_BLUR_MAX], sum = 0, sg = (float)sigma;
	long half = (long)k / 2;
	size_t row = (size_t)w * 3;
	uint8_t *src = malloc(row * h);

	cr_assert(src);
	memcpy(src, p, row * h);
	for (unsigned i = 0; i < k; i++) {
		float x = (float)i - (float)(k - 1) * 0.5f, t = x / sg;

		k1[i] = expf(-0.5f * (t * t));
		sum += k1[i];
	}
	for (unsigned i = 0; i < k; i++)
		k1[i] /= sum;
	for (long y = 0; y < (long)h; y++)
		for (long x = 0; x < (long)w; x++)
			for (unsigned c = 0; c < 3; c++) {
				float acc = 0;

				for (long dy = 0; dy < (long)k; dy++)
					for (long dx = 0; dx < (long)k; dx++) {
						long yy = y + dy - half,
						     xx = x + dx - half;

						yy = yy < 0 ?
							     -yy :
						     yy >= (long)h ?
							     2 * ((long)h - 1) -
								     yy :
							     yy;
						xx = xx < 0 ?
							     -xx :
						     xx >= (long)w ?
							     2 * ((long)w - 1) -
								     xx :
							     xx;
						acc += k1[dy] * k1[dx] *
						       (float)src[(size_t)yy *
									  row +
								  (size_t)xx * 3 +
								  c];
					}
				p[(size_t)y * row + (size_t)x * 3 + c] =
					ref_u8(nearbyintf(acc));
			}
	free(src);
}

/*
 * The separable gaussian_blur against the 2-D one: the same sums in
 * another grouping, so within 1 everywhere and equal nearly everywhere;
 * a flat image stays flat, and a kernel of 1 changes nothing.
 */
Test(color, blur_as_2d)
{
	static const struct {
		unsigned k;
		double sigma;
	} cases[] = { { 1, 1 },	  { 3, 0.1 }, { 3, 1 },	  { 5, 0.7 }, { 5, 2 },
		      { 9, 2.5 }, { 15, 4 },  { 31, 10 }, { 31, 100 } };
	struct bufs b = bufs_new();
	uint32_t w = 61, h = 47;
	size_t n = (size_t)w * h * 3;
	uint64_t s = 3;

	for (size_t i = 0; i < NELEM(cases); i++) {
		struct ispec_op op = { .kind = ISPEC_OP_BLUR,
				       .p = 1,
				       .a = { cases[i].k, cases[i].sigma,
					      cases[i].sigma } };
		struct color_draw dr = { .apply = true,
					 .f = { cases[i].sigma } };
		size_t same = 0;
		int worst = 0;

		ut_picture(b.img, w, h, 3, (unsigned)i);
		for (size_t j = 0; j < n; j++) /* some noise on it */
			if (!(ut_rand(&s) & 3))
				b.img[j] = (uint8_t)ut_rand(&s);
		memcpy(b.a, b.img, n);
		memcpy(b.b, b.img, n);
		color_apply(&op, &dr, b.a, w, h, b.tmp);
		ref_blur(b.b, w, h, cases[i].k, cases[i].sigma);
		for (size_t j = 0; j < n; j++) {
			int d = abs((int)b.a[j] - (int)b.b[j]);

			worst = d > worst ? d : worst;
			same += d == 0;
		}
		cr_expect(worst <= 1 && same >= n * 99 / 100,
			  "k %u sigma %g: max |diff| %d, %zu of %zu equal",
			  cases[i].k, cases[i].sigma, worst, same, n);
		if (cases[i].k == 1)
			cr_expect(memcmp(b.a, b.img, n) == 0,
				  "a kernel of 1 changed the image");
		memset(b.a, 77, n);
		memset(b.b, 77, n);
		color_apply(&op, &dr, b.a, w, h, b.tmp);
		cr_expect(memcmp(b.a, b.b, n) == 0,
			  "k %u: a flat image did not stay flat", cases[i].k);
	}
	bufs_free(&b);
}

/*
 * The per-pixel stages whose AVX2 loops compute something else than a
 * value at a time (hue's HSV round trip, saturation's and grayscale's
 * weights) on every one of the 2^24 colours: the same bytes as the
 * portable loops, for a shift at each end and one between.
 */
Test(color, every_colour, .timeout = 120)
{
	static const struct {
		struct ispec_op op;
		double f;
	} cases[] = {
		{ { .kind = ISPEC_OP_HUE, .p = 1, .a = { 0.5 } }, 0.5 },
		{ { .kind = ISPEC_OP_HUE, .p = 1, .a = { 0.5 } }, -0.5 },
		{ { .kind = ISPEC_OP_HUE, .p = 1, .a = { 0.5 } }, 0.1234567 },
		{ { .kind = ISPEC_OP_SATURATION, .p = 1, .a = { 0.9 } },
		  1.7654321 },
		{ { .kind = ISPEC_OP_GRAYSCALE, .p = 1, .a = { 0 } }, 0 },
	};
	struct bufs b = bufs_new();
	size_t n = (size_t)MAXS * MAXS * 3;

	for (size_t k = 0; k < NELEM(cases); k++) {
		struct color_draw dr = { .apply = true, .f = { cases[k].f } };
		long bad = -1;
		unsigned red = 0;

		for (; red < 256 && bad < 0; red++) {
			for (size_t i = 0; i < (size_t)MAXS * MAXS; i++) {
				b.img[3 * i] = (uint8_t)red;
				b.img[3 * i + 1] = (uint8_t)(i >> 8);
				b.img[3 * i + 2] = (uint8_t)i;
			}
			memcpy(b.a, b.img, n);
			memcpy(b.b, b.img, n);
			color_test_simd(true);
			color_apply(&cases[k].op, &dr, b.a, MAXS, MAXS, b.tmp);
			color_test_simd(false);
			color_apply(&cases[k].op, &dr, b.b, MAXS, MAXS, b.tmp);
			color_test_simd(true);
			bad = first_diff(b.a, b.b, n);
		}
		cr_expect(bad < 0,
			  "%s %g: colour %u,%u,%u is %u,%u,%u by AVX2, "
			  "%u,%u,%u portable",
			  ispec_op_name(cases[k].op.kind), cases[k].f, red - 1,
			  bad < 0 ? 0 : b.img[bad / 3 * 3 + 1],
			  bad < 0 ? 0 : b.img[bad / 3 * 3 + 2],
			  bad < 0 ? 0 : b.a[bad / 3 * 3],
			  bad < 0 ? 0 : b.a[bad / 3 * 3 + 1],
			  bad < 0 ? 0 : b.a[bad / 3 * 3 + 2],
			  bad < 0 ? 0 : b.b[bad / 3 * 3],
			  bad < 0 ? 0 : b.b[bad / 3 * 3 + 1],
			  bad < 0 ? 0 : b.b[bad / 3 * 3 + 2]);
	}
	bufs_free(&b);
}

/*
 * autocontrast, equalize and channel_shift on photographs' kind of
 * range, each channel narrower than 0..255 and all three different (on
 * random bytes autocontrast would have nothing to stretch): the bytes of
 * the reference, AVX2 and portable, on sizes that leave every tail.
 */
Test(color, tables_equal_reference)
{
	static const uint32_t dims[][2] = { { 1, 1 },	 { 3, 5 },
					    { 11, 3 },	 { 33, 1 },
					    { 37, 29 },	 { 224, 224 },
					    { 225, 223 } };
	static const struct ispec_op tops[] = {
		{ .kind = ISPEC_OP_AUTOCONTRAST, .p = 1, .a = { 0 } },
		{ .kind = ISPEC_OP_EQUALIZE, .p = 1, .a = { 0 } },
		{ .kind = ISPEC_OP_CHANNEL_SHIFT, .p = 1, .a = { 60 } },
	};
	struct bufs b = bufs_new();
	uint64_t s = 29;
	unsigned stretched = 0;

	for (size_t k = 0; k < NELEM(tops); k++)
		for (size_t z = 0; z < NELEM(dims); z++)
			for (unsigned t = 0; t < 4; t++) {
				uint32_t w = dims[z][0], h = dims[z][1];
				size_t n = (size_t)w * h * 3;
				unsigned lo[3], span[3];
				struct color_draw dr;
				struct rng r;
				bool simd = t & 1;
				long d;

				for (unsigned c = 0; c < 3; c++) {
					lo[c] = (unsigned)(ut_rand(&s) % 100);
					span[c] = 1 +
						  (unsigned)(ut_rand(&s) % 150);
				}
				for (size_t i = 0; i < n; i++)
					b.img[i] =
						(uint8_t)(lo[i % 3] +
							  ut_rand(&s) %
								  span[i % 3]);
				rng_seed(&r, ut_rand(&s));
				color_draw(&tops[k], &r, &dr);
				dr.apply = true;
				memcpy(b.a, b.img, n);
				memcpy(b.b, b.img, n);
				cr_assert(ref_apply(&tops[k], &dr, b.b, w, h));
				color_test_simd(simd);
				color_apply(&tops[k], &dr, b.a, w, h, b.tmp);
				color_test_simd(true);
				stretched += memcmp(b.a, b.img, n) != 0;
				d = first_diff(b.a, b.b, n);
				cr_expect(d < 0,
					  "%s on %ux%u (%s): byte %ld is %u, "
					  "the reference's %u",
					  ispec_op_name(tops[k].kind), w, h,
					  simd ? "AVX2" : "portable", d,
					  d < 0 ? 0 : b.a[d],
					  d < 0 ? 0 : b.b[d]);
			}
	/* most images change: the maps were exercised, not only copies */
	cr_expect(stretched > NELEM(tops) * NELEM(dims) * 4 / 2, "%u changed",
		  stretched);
	bufs_free(&b);
}
