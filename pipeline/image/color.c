/*
 * color.c - the colour stages (color.h), as torchvision 0.14 computes
 * them on uint8 tensors. The arithmetic is float32, as torch's is when a
 * uint8 tensor meets a Python float, and a result goes back to uint8 by
 * clamping and truncating (Tensor.to(torch.uint8)).
 *
 * The per-pixel stages run as sweeps (sweep()), a jitter's components
 * fused into as few as contrast's mean allows; sharpness works a row at
 * a time from a copy of the image, and gaussian_blur is separable, a
 * row at a time from a ring of rows; autocontrast, equalize and
 * channel_shift find each channel's range or histogram in one pass and
 * map every byte in another (a table, or autocontrast's float map).
 * Each has an AVX2 loop, chosen at run time, and a portable one that
 * gives the same bytes: both do the same float32 operations in the same
 * order (color_test_simd() lets the tests compare them).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define COLOR_X86 1
#endif

#include "color.h"

/* ColorJitter's components, in the order it draws their factors. */
enum { C_B, C_C, C_S, C_H };

static const char *const comp_name = "bcsh";

/* The factor range [max(0, 1 - x), 1 + x] of brightness, contrast and
 * saturation (ColorJitter._check_input), at u. */
static double factor_at(double x, double u)
{
	double lo = 1 - x > 0 ? 1 - x : 0, hi = 1 + x;

	return lo + u * (hi - lo);
}

void color_draw(const struct ispec_op *op, struct rng *r,
		struct color_draw *out)
{
	memset(out, 0, sizeof(*out));
	out->apply = rng_unit(r) < op->p;
	switch (op->kind) {
	case ISPEC_OP_BRIGHTNESS:
	case ISPEC_OP_CONTRAST:
	case ISPEC_OP_SATURATION:
		out->f[0] = factor_at(op->a[0], rng_unit(r));
		break;
	case ISPEC_OP_HUE:
	case ISPEC_OP_CHANNEL_SHIFT:
		out->f[0] = -op->a[0] + rng_unit(r) * 2 * op->a[0];
		break;
	case ISPEC_OP_BLUR: /* GaussianBlur.get_params: uniform sigma */
		out->f[0] = op->a[1] + rng_unit(r) * (op->a[2] - op->a[1]);
		break;
	case ISPEC_OP_JITTER: {
		uint8_t perm[4] = { 0, 1, 2, 3 };

		/* torch.randperm(4): any permutation, uniformly. */
		for (unsigned i = 3; i > 0; i--) {
			unsigned j = (unsigned)rng_below(r, i + 1);
			uint8_t t = perm[i];

			perm[i] = perm[j];
			perm[j] = t;
		}
		for (unsigned c = 0; c < 4; c++) {
			if (!(op->a[c] > 0))
				continue;
			out->f[c] = c == C_H ? -op->a[c] + rng_unit(r) * 2 *
								   op->a[c] :
					       factor_at(op->a[c], rng_unit(r));
		}
		for (unsigned i = 0; i < 4; i++)
			if (op->a[perm[i]] > 0)
				out->order[out->n++] = perm[i];
		break;
	}
	default: break;
	}
}

static inline uint8_t to_u8(float v)
{
	if (!(v > 0)) /* NaN too */
		return 0;
	if (v >= 255)
		return 255;
	return (uint8_t)v; /* truncation, as .to(torch.uint8) */
}

/* rgb_to_grayscale() of a uint8 pixel: float32 weights, truncated. */
static inline uint8_t gray_of(const uint8_t *px)
{
	return to_u8(0.2989f * px[0] + 0.587f * px[1] + 0.114f * px[2]);
}

/*
 * _blend(x, y, ratio): ratio * x + (1.0 - ratio) * y in float32, each
 * Python float (ratio, and 1.0 - ratio computed in double) rounded to
 * float32 on its own, as torch does with a scalar operand.
 */
struct ratio {
	float r, rest;
};

static struct ratio ratio_of(double f)
{
	return (struct ratio){ (float)f, (float)(1.0 - f) };
}

static inline uint8_t blend(uint8_t x, float y, struct ratio q)
{
	return to_u8(q.r * (float)x + q.rest * y);
}

/* torch.remainder(a, 1.0): a - floor(a) in float32. */
static inline float rem1(float a)
{
	return a - floorf(a);
}

/*
 * adjust_hue() of one pixel: _rgb2hsv, the shift, _hsv2rgb, x 255.
 * hue8() below is the same, operation for operation, on 8 pixels.
 */
static void hue_px(uint8_t *px, float shift)
{
	float r = px[0] / 255.0f, g = px[1] / 255.0f, b = px[2] / 255.0f;
	float maxc = fmaxf(r, fmaxf(g, b)), minc = fminf(r, fminf(g, b));
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
	h = rem1(h / 6.0f + 1.0f);
	h = rem1(h + shift);
	v = maxc;
	i = (int)floorf(h * 6.0f);
	f = h * 6.0f - (float)i;
	pp = fminf(fmaxf(v * (1.0f - s), 0.0f), 1.0f);
	q = fminf(fmaxf(v * (1.0f - s * f), 0.0f), 1.0f);
	t = fminf(fmaxf(v * (1.0f - s * (1.0f - f)), 0.0f), 1.0f);
	i %= 6;
	if (i < 0)
		i += 6;
	switch (i) {
	case 0: r = v, g = t, b = pp; break;
	case 1: r = q, g = v, b = pp; break;
	case 2: r = pp, g = v, b = t; break;
	case 3: r = pp, g = q, b = v; break;
	case 4: r = t, g = pp, b = v; break;
	default: r = v, g = pp, b = q; break;
	}
	/* Back to uint8 as adjust_hue() does: (x * 255.0).to(uint8). */
	px[0] = to_u8(r * 255.0f);
	px[1] = to_u8(g * 255.0f);
	px[2] = to_u8(b * 255.0f);
}

/*
 * The per-pixel stages (brightness, contrast, saturation, hue, jitter,
 * grayscale) run as sweeps: a list of steps applied to every pixel,
 * truncating to uint8 after each step as torch does between stages. The
 * AVX2 sweep takes a tile of pixels to floats, runs every step over it
 * and writes it back, so that a jitter's components cost one pass
 * instead of one each. Brightness and contrast are both _blend(x, y,
 * ratio) with one y for the whole image (0, or the grayscale mean), so
 * both are ST_LIN: to_u8(r * x + c), c = rest * y computed once, the
 * very product torch computes for every element.
 */
enum step_kind { ST_LIN, ST_SAT, ST_HUE, ST_GRAY };

struct step {
	uint8_t kind; /* enum step_kind */
	float r;      /* ST_LIN, ST_SAT: the ratio */
	float c;      /* ST_LIN: rest * y; ST_SAT: rest; ST_HUE: the shift */
};

/* A sweep's most steps: a jitter's four components. */
#define SWEEP_MAX 4

/*
 * ST_LIN steps over n bytes, each on its own; for many bytes through a
 * table of what the steps make of each value (the same arithmetic, once
 * per value).
 */
static void lin_c(const struct step *st, unsigned ns, uint8_t *p, size_t n)
{
	uint8_t lut[256];

	if (n < 256) {
		for (size_t i = 0; i < n; i++)
			for (unsigned k = 0; k < ns; k++)
				p[i] = to_u8(st[k].r * (float)p[i] + st[k].c);
		return;
	}
	for (unsigned v = 0; v < 256; v++) {
		lut[v] = (uint8_t)v;
		for (unsigned k = 0; k < ns; k++)
			lut[v] = to_u8(st[k].r * (float)lut[v] + st[k].c);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = lut[p[i]];
}

/*
 * The portable sweep: each step a loop of its own over the pixels (a
 * step takes each pixel on its own, so the order of the loops changes no
 * value), then, with sum, the sum of the grayscale values.
 */
static uint64_t sweep_c(const struct step *st, unsigned ns, uint8_t *p,
			size_t np, bool sum)
{
	uint64_t s = 0;

	for (unsigned k = 0; k < ns; k++) {
		const struct step *t = &st[k];
		uint8_t *q = p;

		switch (t->kind) {
		case ST_LIN: lin_c(t, 1, p, np * 3); break;
		case ST_SAT:
			for (size_t i = 0; i < np; i++, q += 3) {
				float y = t->c * (float)gray_of(q);

				for (unsigned c = 0; c < 3; c++)
					q[c] = to_u8(t->r * (float)q[c] + y);
			}
			break;
		case ST_HUE:
			for (size_t i = 0; i < np; i++, q += 3)
				hue_px(q, t->c);
			break;
		default:
			for (size_t i = 0; i < np; i++, q += 3)
				q[0] = q[1] = q[2] = gray_of(q);
			break;
		}
	}
	for (size_t i = 0; sum && i < np; i++)
		s += gray_of(p + 3 * i);
	return s;
}

/* torch.round() (half to even) and .to(torch.uint8) of a conv's result. */
static inline uint8_t round_u8(float v)
{
	return to_u8(nearbyintf(v));
}

/*
 * adjust_sharpness()'s smoothing at byte q of an inside pixel, rounded:
 * torch convolves in float32 with [[1,1,1],[1,5,1],[1,1,1]] / 13 and
 * rounds half to even. The exact value is S / 13, S the weighted sum of
 * the bytes (an integer, at most 3315), which is never within 1/26 of a
 * half, while float32's error over nine products of at most 255 stays
 * below 0.001: torch's rounding is always that of S / 13, which is
 * (S + 6) / 13 in integers.
 */
static inline unsigned sharp_at(const uint8_t *q, long row)
{
	unsigned s = q[-row - 3] + q[-row] + q[-row + 3] + q[-3] + 5u * q[0] +
		     q[3] + q[row - 3] + q[row] + q[row + 3];

	return (s + 6) / 13;
}

/*
 * gaussian_blur() is separable and its kernel symmetric: a column pass
 * over K rows (as floats) into a row of floats, then a row pass over
 * that. Each output is k[h] * centre, then, for d from 0 up, k[d] * (the
 * sum of the pair of taps d and K-1-d) added on, h = K / 2 (the AVX2
 * loops do the same).
 */
static void blur_col_c(const float *const *src, const float *k1, unsigned k,
		       float *out, size_t n)
{
	unsigned h = k / 2;

	for (size_t i = 0; i < n; i++) {
		float s = k1[h] * src[h][i];

		for (unsigned d = 0; d < h; d++)
			s += k1[d] * (src[d][i] + src[k - 1 - d][i]);
		out[i] = s;
	}
}

static void blur_row_c(const float *in, const float *k1, unsigned k,
		       uint8_t *out, size_t n)
{
	unsigned h = k / 2;

	for (size_t i = 0; i < n; i++) {
		float s = k1[h] * in[i + 3 * h];

		for (unsigned d = 0; d < h; d++)
			s += k1[d] * (in[i + 3 * d] + in[i + 3 * (k - 1 - d)]);
		out[i] = round_u8(s);
	}
}

/*
 * AVX2 versions of the loops above: 8 values a step, each computed by
 * the same float32 operations in the same order as the portable loops
 * (no fused multiply-add: the build passes -ffp-contract=off, and
 * target("avx2") does not enable FMA), or, for sharpness's smoothing,
 * the same integers; so the bytes are the same.
 */
#ifdef COLOR_X86
static bool color_simd = true; /* tests turn it off to compare */

static bool use_avx2(void)
{
	return color_simd && __builtin_cpu_supports("avx2");
}

#define AVX2 __attribute__((target("avx2")))

/* to_u8(), in float: clamp to [0, 255] (NaN to 0), truncate. */
AVX2 static inline __m256 u8f(__m256 v)
{
	v = _mm256_max_ps(v, _mm256_setzero_ps()); /* NaN: the 0 */
	v = _mm256_min_ps(v, _mm256_set1_ps(255.0f));
	return _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
}

AVX2 static inline __m256 vmul(__m256 a, __m256 b)
{
	return _mm256_mul_ps(a, b);
}

AVX2 static inline __m256 vadd(__m256 a, __m256 b)
{
	return _mm256_add_ps(a, b);
}

AVX2 static inline __m256 vsub(__m256 a, __m256 b)
{
	return _mm256_sub_ps(a, b);
}

AVX2 static inline __m256 vdiv(__m256 a, __m256 b)
{
	return _mm256_div_ps(a, b);
}

AVX2 static inline __m256 splat(float f)
{
	return _mm256_set1_ps(f);
}

/* gray_of() of 8 pixels, as floats. */
AVX2 static inline __m256 gray8(const __m256 *v)
{
	__m256 s = vadd(vmul(splat(0.2989f), v[0]), vmul(splat(0.587f), v[1]));

	return u8f(vadd(s, vmul(splat(0.114f), v[2])));
}

/* fminf(fmaxf(x, 0), 1), for the x of hue_px(), never NaN. */
AVX2 static inline __m256 clamp01(__m256 x)
{
	return _mm256_min_ps(_mm256_max_ps(x, _mm256_setzero_ps()),
			     splat(1.0f));
}

/* hue_px() of 8 pixels, v their channels as floats 0..255. */
AVX2 static void hue8(__m256 *v, float shift)
{
	const __m256 one = splat(1.0f);
	__m256 r = vdiv(v[0], splat(255.0f)), g = vdiv(v[1], splat(255.0f));
	__m256 b = vdiv(v[2], splat(255.0f));
	__m256 maxc = _mm256_max_ps(r, _mm256_max_ps(g, b));
	__m256 minc = _mm256_min_ps(r, _mm256_min_ps(g, b));
	__m256 eqc = _mm256_cmp_ps(maxc, minc, _CMP_EQ_OQ);
	__m256 cr = vsub(maxc, minc);
	__m256 s = vdiv(cr, _mm256_blendv_ps(maxc, one, eqc));
	__m256 crd = _mm256_blendv_ps(cr, one, eqc);
	__m256 rc = vdiv(vsub(maxc, r), crd), gc = vdiv(vsub(maxc, g), crd);
	__m256 bc = vdiv(vsub(maxc, b), crd);
	__m256 isr = _mm256_cmp_ps(maxc, r, _CMP_EQ_OQ);
	__m256 isg = _mm256_cmp_ps(maxc, g, _CMP_EQ_OQ);
	__m256 h, hs, fi, f, pp, q, t, m;
	__m256i i;

	/* The selects give +0 where hue_px() adds its 0.0f. */
	h = _mm256_and_ps(isr, vsub(bc, gc));
	h = vadd(h, _mm256_andnot_ps(
			    isr, _mm256_and_ps(isg, vsub(vadd(splat(2.0f), rc),
							 bc))));
	h = vadd(h, _mm256_andnot_ps(_mm256_or_ps(isr, isg),
				     vsub(vadd(splat(4.0f), gc), rc)));
	h = vadd(vdiv(h, splat(6.0f)), one);
	h = vsub(h, _mm256_floor_ps(h));
	h = vadd(h, splat(shift));
	h = vsub(h, _mm256_floor_ps(h));
	hs = vmul(h, splat(6.0f));
	fi = _mm256_floor_ps(hs);
	f = vsub(hs, fi);
	pp = clamp01(vmul(maxc, vsub(one, s)));
	q = clamp01(vmul(maxc, vsub(one, vmul(s, f))));
	t = clamp01(vmul(maxc, vsub(one, vmul(s, vsub(one, f)))));
	/*
	 * hue_px()'s switch. In sector i (h is in [0, 1], so i in [0, 6],
	 * and 6 is 0 again) the channels take maxc, pp and a middle value,
	 * t in even sectors and q in odd ones, in an order that one lookup
	 * of i gives: a word whose bits 31 and 30 say whether r takes pp or
	 * the middle value (neither: maxc), bits 29 and 28 the same for g,
	 * 27 and 26 for b. Each is moved to the sign bit, which is what
	 * blendv reads.
	 */
	i = _mm256_cvttps_epi32(fi);
	m = _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(
		_mm256_setr_epi32(0x18000000, 0x48000000, (int)0x84000000,
				  (int)0x90000000, 0x60000000, 0x24000000,
				  0x18000000, 0),
		i));
	q = _mm256_blendv_ps(t, q,
			     _mm256_castsi256_ps(_mm256_slli_epi32(i, 31)));
#define BIT(n) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(m), n))
	r = _mm256_blendv_ps(_mm256_blendv_ps(maxc, q, BIT(1)), pp, m);
	g = _mm256_blendv_ps(_mm256_blendv_ps(maxc, q, BIT(3)), pp, BIT(2));
	b = _mm256_blendv_ps(_mm256_blendv_ps(maxc, q, BIT(5)), pp, BIT(4));
#undef BIT
	v[0] = u8f(vmul(r, splat(255.0f)));
	v[1] = u8f(vmul(g, splat(255.0f)));
	v[2] = u8f(vmul(b, splat(255.0f)));
}

/*
 * Eight RGB pixels (24 bytes at px) as three vectors of floats, one per
 * channel. Reads 32 bytes: the caller keeps 8 bytes of slack before the
 * end of px.
 */
AVX2 static inline void load8(const uint8_t *px, __m256 *v)
{
	/* Pixels 0-3 to the low lane, 4-7 to the high lane, 12 bytes each. */
	const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 2, 3, 4, 5, 5);
	const __m256i a = _mm256_permutevar8x32_epi32(
		_mm256_loadu_si256((const __m256i *)px), lanes);

	for (int c = 0; c < 3; c++) {
		const __m256i sel = _mm256_setr_epi8(
			(char)c, -1, -1, -1, (char)(c + 3), -1, -1, -1,
			(char)(c + 6), -1, -1, -1, (char)(c + 9), -1, -1, -1,
			(char)c, -1, -1, -1, (char)(c + 3), -1, -1, -1,
			(char)(c + 6), -1, -1, -1, (char)(c + 9), -1, -1, -1);

		v[c] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(a, sel));
	}
}

/* The inverse of load8(), v whole numbers 0..255; writes 24 bytes. */
AVX2 static inline void store8(uint8_t *px, const __m256 *v)
{
	const __m256i pack = _mm256_setr_epi8(
		0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2,
		4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
	const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
	__m256i a = _mm256_cvttps_epi32(v[0]);

	a = _mm256_or_si256(a, _mm256_slli_epi32(_mm256_cvttps_epi32(v[1]), 8));
	a = _mm256_or_si256(a,
			    _mm256_slli_epi32(_mm256_cvttps_epi32(v[2]), 16));
	a = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(a, pack), lanes);
	_mm_storeu_si128((__m128i *)px, _mm256_castsi256_si128(a));
	_mm_storel_epi64((__m128i *)(px + 16), _mm256_extracti128_si256(a, 1));
}

/* The pixels a tile of sweep_avx2() holds, as floats, between steps. */
#define TILE 64

/*
 * One step on a tile: t its three planes of floats (channel c of pixel
 * j at t[c * TILE + j]), n pixels, a multiple of 8.
 */
AVX2 static void step_avx2(const struct step *st, float *t, unsigned n)
{
	const __m256 r = splat(st->r), c = splat(st->c);
	__m256 v[3], y;

	switch (st->kind) {
	case ST_LIN: /* each value on its own */
		for (unsigned k = 0; k < 3; k++)
			for (unsigned j = 0; j < n; j += 8) {
				float *at = t + k * TILE + j;

				_mm256_store_ps(
					at,
					u8f(vadd(vmul(r, _mm256_load_ps(at)),
						 c)));
			}
		break;
	case ST_SAT:
		for (unsigned j = 0; j < n; j += 8) {
			for (int k = 0; k < 3; k++)
				v[k] = _mm256_load_ps(t + k * TILE + j);
			y = vmul(c, gray8(v));
			for (int k = 0; k < 3; k++)
				_mm256_store_ps(t + k * TILE + j,
						u8f(vadd(vmul(r, v[k]), y)));
		}
		break;
	case ST_HUE:
		for (unsigned j = 0; j < n; j += 8) {
			for (int k = 0; k < 3; k++)
				v[k] = _mm256_load_ps(t + k * TILE + j);
			hue8(v, st->c);
			for (int k = 0; k < 3; k++)
				_mm256_store_ps(t + k * TILE + j, v[k]);
		}
		break;
	default:
		for (unsigned j = 0; j < n; j += 8) {
			for (int k = 0; k < 3; k++)
				v[k] = _mm256_load_ps(t + k * TILE + j);
			y = gray8(v);
			for (int k = 0; k < 3; k++)
				_mm256_store_ps(t + k * TILE + j, y);
		}
		break;
	}
}

/*
 * sweep() a tile of up to TILE pixels at a time: the tile's channels go
 * to floats once, every step runs over the tile in L1 (a loop of
 * independent groups of 8, which the CPU overlaps), and the tile goes
 * back to bytes once. Returns the pixels done, a multiple of 8; the rest
 * (up to 10, as load8() reads ahead) is the caller's. The grayscale
 * values are summed in 32-bit lanes, flushed often enough that no lane
 * overflows.
 */
AVX2 static size_t sweep_avx2(const struct step *st, unsigned ns, uint8_t *p,
			      size_t np, bool sum, uint64_t *total)
{
	_Alignas(32) float t[3 * TILE];
	__m256i acc = _mm256_setzero_si256();
	size_t i = 0, since = 0;
	uint32_t lane[8];

	while (i + 11 <= np) {
		unsigned n = (unsigned)((np - i - 11) / 8 + 1) * 8;
		__m256 v[3];

		n = n < TILE ? n : TILE;
		for (unsigned j = 0; j < n; j += 8) {
			load8(p + 3 * (i + j), v);
			if (!ns) /* the sum alone */
				acc = _mm256_add_epi32(
					acc, _mm256_cvttps_epi32(gray8(v)));
			for (int k = 0; ns && k < 3; k++)
				_mm256_store_ps(t + k * TILE + j, v[k]);
		}
		for (unsigned k = 0; k < ns; k++)
			step_avx2(&st[k], t, n);
		for (unsigned j = 0; ns && j < n; j += 8) {
			for (int k = 0; k < 3; k++)
				v[k] = _mm256_load_ps(t + k * TILE + j);
			if (sum)
				acc = _mm256_add_epi32(
					acc, _mm256_cvttps_epi32(gray8(v)));
			store8(p + 3 * (i + j), v);
		}
		i += n;
		since += n;
		if (since >= ((size_t)1 << 20) || i + 11 > np) {
			_mm256_storeu_si256((__m256i *)lane, acc);
			for (int l = 0; l < 8; l++)
				*total += lane[l];
			acc = _mm256_setzero_si256();
			since = 0;
		}
	}
	return i;
}

/* Eight bytes at q as floats. */
AVX2 static inline __m256 ld8(const uint8_t *q)
{
	return _mm256_cvtepi32_ps(
		_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* 16 floats, whole numbers 0..255, as 16 bytes: a's 8, then b's. */
AVX2 static inline __m128i pack16(__m256 a, __m256 b)
{
	__m256i w = _mm256_packus_epi32(_mm256_cvttps_epi32(a),
					_mm256_cvttps_epi32(b));

	/* Lanes: a0-3 b0-3 | a4-7 b4-7 as words; bytes, then in order. */
	w = _mm256_packus_epi16(w, w);
	w = _mm256_permutevar8x32_epi32(
		w, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
	return _mm256_castsi256_si128(w);
}

/* lin_bytes(), 32 bytes a step; returns the bytes done. */
AVX2 static size_t lin_avx2(const struct step *st, unsigned ns, uint8_t *p,
			    size_t n)
{
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 v[4];

		for (int q = 0; q < 4; q++) {
			v[q] = ld8(p + i + 8 * q);
			for (unsigned k = 0; k < ns; k++)
				v[q] = u8f(vadd(vmul(splat(st[k].r), v[q]),
						splat(st[k].c)));
		}
		_mm_storeu_si128((__m128i *)(p + i), pack16(v[0], v[1]));
		_mm_storeu_si128((__m128i *)(p + i + 16), pack16(v[2], v[3]));
	}
	return i;
}

/*
 * sharp_at(), then its blend with q's own value (sharpness()), for 16
 * bytes, in 16-bit lanes: (S + 6) / 13 is (S + 6) * 5042 >> 16 for every
 * S + 6 up to 3321 (5042 is 2^16 / 13 rounded up, and its excess, under
 * 0.04 there, never carries past the next multiple of 13).
 */
AVX2 static inline __m128i sharp16(const uint8_t *q, long row, struct ratio r)
{
#define LD16(o)                                                                \
	_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(q + (o))))
	const __m256i c = LD16(0);
	__m256i s = _mm256_add_epi16(LD16(-row - 3), LD16(-row));
	__m256 x[2], y[2];

	s = _mm256_add_epi16(s, LD16(-row + 3));
	s = _mm256_add_epi16(s, LD16(-3));
	s = _mm256_add_epi16(s, LD16(3));
	s = _mm256_add_epi16(s, LD16(row - 3));
	s = _mm256_add_epi16(s, LD16(row));
	s = _mm256_add_epi16(s, LD16(row + 3));
#undef LD16
	s = _mm256_add_epi16(s, _mm256_add_epi16(_mm256_slli_epi16(c, 2), c));
	s = _mm256_mulhi_epu16(_mm256_add_epi16(s, _mm256_set1_epi16(6)),
			       _mm256_set1_epi16(5042));
	for (int k = 0; k < 2; k++) {
		__m128i ck = k ? _mm256_extracti128_si256(c, 1) :
				 _mm256_castsi256_si128(c);
		__m128i sk = k ? _mm256_extracti128_si256(s, 1) :
				 _mm256_castsi256_si128(s);

		x[k] = _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(ck));
		y[k] = _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(sk));
		x[k] = u8f(vadd(vmul(splat(r.r), x[k]),
				vmul(splat(r.rest), y[k])));
	}
	return pack16(x[0], x[1]);
}

/*
 * The inside bytes of a row of sharpness(): o the row of the original,
 * out the same bytes of the result, n bytes (n >= 16). The last step may
 * overlap the one before: it reads o and writes out, so doing a byte
 * twice gives it the same value.
 */
AVX2 static void sharp_row_avx2(const uint8_t *o, long row, uint8_t *out,
				size_t n, struct ratio r)
{
	for (size_t i = 0;; i += 16) {
		if (i + 16 > n)
			i = n - 16;
		_mm_storeu_si128((__m128i *)(out + i), sharp16(o + i, row, r));
		if (i + 16 == n)
			break;
	}
}

/* n bytes as floats, n >= 8, the last step overlapping as above. */
AVX2 static void floats_avx2(const uint8_t *in, float *out, size_t n)
{
	for (size_t i = 0;; i += 8) {
		if (i + 8 > n)
			i = n - 8;
		_mm256_storeu_ps(out + i, ld8(in + i));
		if (i + 8 == n)
			break;
	}
}

/* blur_col_c(), n >= 8, the last step overlapping. */
AVX2 static void blur_col_avx2(const float *const *src, const float *k1,
			       unsigned k, float *out, size_t n)
{
	unsigned h = k / 2;

	for (size_t i = 0;; i += 8) {
		__m256 s;

		if (i + 8 > n)
			i = n - 8;
		s = vmul(splat(k1[h]), _mm256_loadu_ps(src[h] + i));
		for (unsigned d = 0; d < h; d++)
			s = vadd(s, vmul(splat(k1[d]),
					 vadd(_mm256_loadu_ps(src[d] + i),
					      _mm256_loadu_ps(src[k - 1 - d] +
							      i))));
		_mm256_storeu_ps(out + i, s);
		if (i + 8 == n)
			break;
	}
}

/* blur_row_c() of 8 values. */
AVX2 static inline __m256 blur_row8(const float *in, const float *k1,
				    unsigned k)
{
	unsigned h = k / 2;
	__m256 s = vmul(splat(k1[h]), _mm256_loadu_ps(in + 3 * h));

	for (unsigned d = 0; d < h; d++)
		s = vadd(s, vmul(splat(k1[d]),
				 vadd(_mm256_loadu_ps(in + 3 * d),
				      _mm256_loadu_ps(in + 3 * (k - 1 - d)))));
	return u8f(_mm256_round_ps(s, _MM_FROUND_CUR_DIRECTION));
}

/* blur_row_c(), n >= 16, the last step overlapping. */
AVX2 static void blur_row_avx2(const float *in, const float *k1, unsigned k,
			       uint8_t *out, size_t n)
{
	for (size_t i = 0;; i += 16) {
		if (i + 16 > n)
			i = n - 16;
		_mm_storeu_si128((__m128i *)(out + i),
				 pack16(blur_row8(in + i, k1, k),
					blur_row8(in + i + 8, k1, k)));
		if (i + 16 == n)
			break;
	}
}

/*
 * invert, posterize and solarize, 32 bytes a step; returns the bytes
 * done. arg: posterize's mask, or solarize's least byte that passes
 * (bytes()).
 */
AVX2 static size_t bytes_avx2(unsigned kind, uint8_t arg, uint8_t *p, size_t n)
{
	const __m256i a = _mm256_set1_epi8((char)arg);
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256i x = _mm256_loadu_si256((const __m256i *)(p + i));

		if (kind == ISPEC_OP_INVERT)
			x = _mm256_xor_si256(x, _mm256_set1_epi8(-1));
		else if (kind == ISPEC_OP_POSTERIZE)
			x = _mm256_and_si256(x, a);
		else /* 255 - x is x ^ 0xff */
			x = _mm256_xor_si256(
				x, _mm256_cmpeq_epi8(_mm256_max_epu8(x, a), x));
		_mm256_storeu_si256((__m256i *)(p + i), x);
	}
	return i;
}

/*
 * The least and greatest byte of each channel, folded into lo and hi,
 * over the n pixels at p in whole steps of 32 pixels (96 bytes, three
 * vectors); returns the pixels done. Byte j of a step is channel j % 3.
 */
AVX2 static size_t minmax_avx2(const uint8_t *p, size_t n, uint8_t lo[3],
			       uint8_t hi[3])
{
	__m256i mn[3], mx[3];
	uint8_t a[96], b[96];
	size_t i = 0;

	for (int k = 0; k < 3; k++) {
		mn[k] = _mm256_set1_epi8(-1);
		mx[k] = _mm256_setzero_si256();
	}
	for (; i + 32 <= n; i += 32) {
		for (int k = 0; k < 3; k++) {
			__m256i x = _mm256_loadu_si256(
				(const __m256i *)(p + 3 * i + 32 * k));

			mn[k] = _mm256_min_epu8(mn[k], x);
			mx[k] = _mm256_max_epu8(mx[k], x);
		}
	}
	for (int k = 0; k < 3; k++) {
		_mm256_storeu_si256((__m256i *)(a + 32 * k), mn[k]);
		_mm256_storeu_si256((__m256i *)(b + 32 * k), mx[k]);
	}
	for (unsigned j = 0; j < 96; j++) {
		lo[j % 3] = a[j] < lo[j % 3] ? a[j] : lo[j % 3];
		hi[j % 3] = b[j] > hi[j % 3] ? b[j] : hi[j % 3];
	}
	return i;
}

/* autocontrast()'s map, 8 pixels a step; returns the pixels done. */
AVX2 static size_t autocontrast_avx2(uint8_t *p, size_t n, const float *lo,
				     const float *scale)
{
	size_t i = 0;

	/* load8() reads 8 bytes past its pixels */
	for (; i + 8 <= n && 3 * (i + 8) + 8 <= 3 * n; i += 8) {
		__m256 v[3];

		load8(p + 3 * i, v);
		for (int c = 0; c < 3; c++)
			v[c] = u8f(vmul(vsub(v[c], splat(lo[c])),
					splat(scale[c])));
		store8(p + 3 * i, v);
	}
	return i;
}
#else
static bool use_avx2(void)
{
	return false;
}
#endif

void color_test_simd(bool on)
{
#ifdef COLOR_X86
	color_simd = on;
#else
	(void)on;
#endif
}

/* Steps that are all ST_LIN take each byte on its own. */
static bool all_lin(const struct step *st, unsigned ns)
{
	for (unsigned k = 0; k < ns; k++)
		if (st[k].kind != ST_LIN)
			return false;
	return true;
}

/*
 * Apply st to the np pixels at p, in place; with sum, return the sum of
 * their grayscale values after it (with no steps, only that).
 */
static uint64_t sweep(const struct step *st, unsigned ns, uint8_t *p, size_t np,
		      bool sum)
{
	uint64_t s = 0;
	size_t i = 0;

	if (!sum && all_lin(st, ns)) {
#ifdef COLOR_X86
		if (use_avx2())
			i = lin_avx2(st, ns, p, np * 3);
#endif
		lin_c(st, ns, p + i, np * 3 - i);
		return 0;
	}
#ifdef COLOR_X86
	if (use_avx2())
		i = sweep_avx2(st, ns, p, np, sum, &s);
#endif
	return s + sweep_c(st, ns, p + 3 * i, np - i, sum);
}

static struct step lin_step(double f, float y)
{
	struct ratio q = ratio_of(f);

	return (struct step){ ST_LIN, q.r, q.rest * y };
}

/*
 * A jitter's components in its order, or a single stage (its one
 * component), in as few sweeps as they allow: contrast needs the
 * grayscale mean of the image as it stands before it, so the steps
 * before a contrast are applied in a sweep that also sums the grayscale
 * values of its results (with nothing before it, a sweep that only
 * reads), and the contrast and what follows it in one more; without a
 * contrast, one sweep does all. Each step truncates to uint8 as torch
 * does between stages, so the bytes are those of the stages one after
 * another.
 */
static void jitter(const uint8_t *order, unsigned n, const double *f,
		   uint8_t *p, size_t np)
{
	struct step st[SWEEP_MAX];
	unsigned ns = 0;

	for (unsigned i = 0; i < n && i < SWEEP_MAX; i++) {
		unsigned c = order[i];
		struct ratio q = ratio_of(f[c]);

		if (c == C_B) {
			st[ns++] = lin_step(f[c], 0.0f);
		} else if (c == C_C) {
			uint64_t sum = sweep(st, ns, p, np, true);

			/* The mean of the truncated grayscale image. */
			ns = 0;
			st[ns++] = lin_step(f[c],
					    (float)((double)sum / (double)np));
		} else if (c == C_S) {
			st[ns++] = (struct step){ ST_SAT, q.r, q.rest };
		} else {
			st[ns++] = (struct step){ ST_HUE, 0, (float)f[c] };
		}
	}
	if (ns)
		sweep(st, ns, p, np, false);
}

/*
 * adjust_sharpness(): a blend with the image whose inside pixels are the
 * 3 x 3 smoothing (sharp_at()), the border blended with itself; images
 * of 2 pixels or fewer a side as they are. The original is copied to
 * tmp, and each row of the result blended from it.
 */
static void sharpness(uint8_t *p, uint32_t w, uint32_t h, double f,
		      uint8_t *tmp)
{
	struct ratio r = ratio_of(f);
	size_t row = (size_t)w * 3;
	bool simd;

	if (w <= 2 || h <= 2)
		return;
	simd = use_avx2() && row - 6 >= 16;
	memcpy(tmp, p, row * h);
	for (uint32_t y = 0; y < h; y++) {
		const uint8_t *o = tmp + y * row;
		uint8_t *d = p + y * row;
		bool inside = y > 0 && y + 1 < h;
		size_t i = 0;

		for (; i < (inside ? 3 : row); i++)
			d[i] = blend(o[i], (float)o[i], r);
		if (!inside)
			continue;
#ifdef COLOR_X86
		if (simd) {
			sharp_row_avx2(o + 3, (long)row, d + 3, row - 6, r);
			i = row - 3;
		}
#endif
		for (; i < row - 3; i++)
			d[i] = blend(o[i], (float)sharp_at(o + i, (long)row),
				     r);
		for (; i < row; i++)
			d[i] = blend(o[i], (float)o[i], r);
	}
}

/* Reflect-padding's index (numpy's "reflect": the edge not repeated). */
static inline long reflect(long i, long n)
{
	if (n == 1)
		return 0;
	while (i < 0 || i >= n)
		i = i < 0 ? -i : 2 * (n - 1) - i;
	return i;
}

/* gaussian_blur()'s floats for an image w wide: a ring of rows, a row. */
static size_t blur_floats(size_t w)
{
	return COLOR_BLUR_MAX * w * 3 + (w + 2 * (COLOR_BLUR_MAX / 2)) * 3;
}

size_t color_scratch_bytes(uint32_t s)
{
	/* sharpness(): a copy of the image; gaussian_blur(): floats. */
	size_t copy = (size_t)s * s * 3, blur = blur_floats(s) * sizeof(float);

	return copy > blur ? copy : blur;
}

static void floats_c(const uint8_t *in, float *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = in[i];
}

/* gaussian_blur()'s loops: the portable ones, then AVX2's (rows >= 16). */
static const struct blur_kern {
	void (*floats)(const uint8_t *in, float *out, size_t n);
	void (*col)(const float *const *src, const float *k1, unsigned k,
		    float *out, size_t n);
	void (*row)(const float *in, const float *k1, unsigned k, uint8_t *out,
		    size_t n);
} blur_kern[] = {
	{ floats_c, blur_col_c, blur_row_c },
#ifdef COLOR_X86
	{ floats_avx2, blur_col_avx2, blur_row_avx2 },
#endif
};

/*
 * gaussian_blur(): the kernel exp(-0.5 (x / sigma)^2) / sum over x =
 * -(K-1)/2 .. (K-1)/2, float32, over the image padded by reflection,
 * rounded half to even. torch convolves with the 2-D kernel, the outer
 * product of that one with itself; here it is applied a dimension at a
 * time (blur_col_c(), blur_row_c()), which adds the same products in
 * another grouping and may move a value by one, as torch's own order
 * may. The K source rows of an output row are all within K rows of it,
 * so each row is made floats once, into a ring of K rows in tmp, before
 * the output rows overwrite it; their weighted sum goes to a row of
 * floats after the ring, reflected at both ends, and the row pass
 * writes the result.
 */
static void gaussian_blur(uint8_t *p, uint32_t w, uint32_t h, unsigned k,
			  double sigma, uint8_t *tmp)
{
	float k1[COLOR_BLUR_MAX] = { 0 }, sum = 0, sg = (float)sigma;
	long half = (long)k / 2, next = 0;
	size_t row = (size_t)w * 3;
	float *ring = (float *)(void *)tmp, *fr = ring + k * row,
	      *mid = fr + half * 3;
	const float *src[COLOR_BLUR_MAX];
	const struct blur_kern *kern = &blur_kern[0];

#ifdef COLOR_X86
	if (use_avx2() && row >= 16)
		kern = &blur_kern[1];
#endif
	for (unsigned i = 0; i < k; i++) {
		float x = (float)i - (float)(k - 1) * 0.5f;
		float t = x / sg;

		k1[i] = expf(-0.5f * (t * t));
		sum += k1[i];
	}
	for (unsigned i = 0; i < k; i++)
		k1[i] /= sum;
	for (long y = 0; y < (long)h; y++) {
		/* Rows up to y + half, each into slot (its index) mod K. */
		for (; next < (long)h && next <= y + half; next++)
			kern->floats(p + (size_t)next * row,
				     ring + (size_t)(next % (long)k) * row,
				     row);
		for (unsigned d = 0; d < k; d++) {
			long at = reflect(y + (long)d - half, (long)h);

			src[d] = ring + (size_t)(at % (long)k) * row;
		}
		kern->col(src, k1, k, mid, row);
		for (long x = 0; x < half; x++) {
			memcpy(fr + x * 3, mid + reflect(x - half, w) * 3,
			       3 * sizeof(float));
			memcpy(mid + (w + x) * 3,
			       mid + reflect((long)w + x, w) * 3,
			       3 * sizeof(float));
		}
		kern->row(fr, k1, k, p + y * row, row);
	}
}

/* The least and greatest byte of each channel of the n pixels at p. */
static void minmax(const uint8_t *p, size_t n, uint8_t lo[3], uint8_t hi[3])
{
	size_t i = 0;

	lo[0] = lo[1] = lo[2] = 255;
	hi[0] = hi[1] = hi[2] = 0;
#ifdef COLOR_X86
	if (use_avx2())
		i = minmax_avx2(p, n, lo, hi);
#endif
	for (; i < n; i++) {
		for (unsigned c = 0; c < 3; c++) {
			uint8_t v = p[3 * i + c];

			lo[c] = v < lo[c] ? v : lo[c];
			hi[c] = v > hi[c] ? v : hi[c];
		}
	}
}

/* Every byte of the n pixels at p through its channel's table. */
static void remap(uint8_t *p, size_t n, const uint8_t lut[3][256])
{
	for (size_t i = 0; i < n; i++, p += 3) {
		p[0] = lut[0][p[0]];
		p[1] = lut[1][p[1]];
		p[2] = lut[2][p[2]];
	}
}

/*
 * Keras' apply_channel_shift(): every channel moved by the same shift,
 * clipped to the image's own [min, max] (over all channels); rounded to
 * the nearest value here (Keras keeps floats). A byte's result depends
 * on the byte alone: a table.
 */
static void channel_shift(uint8_t *p, size_t n, double shift)
{
	uint8_t lo[3], hi[3], lut[3][256];

	minmax(p, n, lo, hi);
	for (unsigned c = 1; c < 3; c++) { /* all channels' range, in [0] */
		lo[0] = lo[c] < lo[0] ? lo[c] : lo[0];
		hi[0] = hi[c] > hi[0] ? hi[c] : hi[0];
	}
	for (unsigned x = 0; x < 256; x++) {
		double v = x + shift;

		v = v < lo[0] ? lo[0] : v > hi[0] ? hi[0] : v;
		lut[0][x] = lut[1][x] = lut[2][x] = (uint8_t)nearbyint(v);
	}
	remap(p, n, lut);
}

/*
 * autocontrast(): per channel, (x - min) * (255 / (max - min)), float32,
 * clamped and truncated; a channel with max == min is left as it is
 * (here: min 0 and scale 1, which give each byte back).
 */
static void autocontrast(uint8_t *p, size_t n)
{
	uint8_t lo[3], hi[3];
	float minimum[3], scale[3];
	size_t i = 0;

	minmax(p, n, lo, hi);
	for (unsigned c = 0; c < 3; c++) {
		minimum[c] = lo[c] == hi[c] ? 0 : lo[c];
		scale[c] = lo[c] == hi[c] ?
				   1 :
				   255.0f / ((float)hi[c] - minimum[c]);
	}
#ifdef COLOR_X86
	if (use_avx2())
		i = autocontrast_avx2(p, n, minimum, scale);
#endif
	for (; i < n; i++)
		for (unsigned c = 0; c < 3; c++)
			p[3 * i + c] = to_u8(
				((float)p[3 * i + c] - minimum[c]) * scale[c]);
}

/*
 * equalize(): per channel, _scale_channel(): a histogram, step =
 * floor(the count of all but the last nonzero bin / 255), the table
 * floor((cumsum + floor(step / 2)) / step) shifted one place right and
 * clamped to 255; a step of 0 leaves the channel as it is. One pass
 * counts all three channels, one maps them.
 */
static void equalize(uint8_t *p, size_t n)
{
	/* two sets, even and odd pixels, so that runs of one value do not
	 * wait on their own increments */
	uint32_t hist[2][3][256] = { { { 0 } } };
	uint8_t lut[3][256];
	const uint8_t *q = p;
	size_t i = 0;

	for (; i + 2 <= n; i += 2, q += 6) {
		hist[0][0][q[0]]++;
		hist[0][1][q[1]]++;
		hist[0][2][q[2]]++;
		hist[1][0][q[3]]++;
		hist[1][1][q[4]]++;
		hist[1][2][q[5]]++;
	}
	if (i < n) {
		hist[0][0][q[0]]++;
		hist[0][1][q[1]]++;
		hist[0][2][q[2]]++;
	}
	for (unsigned c = 0; c < 3; c++) {
		uint64_t sum = 0, last = 0, step, cum = 0;

		for (unsigned v = 0; v < 256; v++) {
			hist[0][c][v] += hist[1][c][v];
			lut[c][v] = (uint8_t)v;
			if (hist[0][c][v]) {
				sum += hist[0][c][v];
				last = hist[0][c][v];
			}
		}
		step = (sum - last) / 255;
		if (!step)
			continue;
		lut[c][0] = 0;
		for (unsigned v = 0; v < 255; v++) {
			uint64_t t;

			cum += hist[0][c][v];
			t = (cum + step / 2) / step;
			lut[c][v + 1] = (uint8_t)(t > 255 ? 255 : t);
		}
	}
	remap(p, n, lut);
}

/*
 * invert, posterize and solarize: each byte on its own. Solarize's
 * (float)x >= t holds from the least byte thr that passes on, so both
 * loops compare bytes with thr.
 */
static void bytes(unsigned kind, double a, uint8_t *p, size_t n)
{
	uint8_t mask = 0;
	unsigned thr = 0;
	size_t i = 0;

	if (kind == ISPEC_OP_POSTERIZE)
		mask = (uint8_t)(0xff << (8 - (unsigned)a));
	if (kind == ISPEC_OP_SOLARIZE) {
		while (thr < 256 && !((float)thr >= (float)a))
			thr++;
		if (thr > 255)
			return; /* no byte passes */
	}
#ifdef COLOR_X86
	if (use_avx2())
		i = bytes_avx2(kind,
			       kind == ISPEC_OP_POSTERIZE ? mask : (uint8_t)thr,
			       p, n);
#endif
	switch (kind) {
	case ISPEC_OP_INVERT:
		for (; i < n; i++)
			p[i] = (uint8_t)(255 - p[i]);
		break;
	case ISPEC_OP_POSTERIZE:
		for (; i < n; i++)
			p[i] &= mask;
		break;
	default:
		for (; i < n; i++)
			if (p[i] >= thr)
				p[i] = (uint8_t)(255 - p[i]);
		break;
	}
}

/* A single stage's component, as a jitter's. */
static uint8_t comp_of(unsigned kind)
{
	switch (kind) {
	case ISPEC_OP_CONTRAST: return C_C;
	case ISPEC_OP_SATURATION: return C_S;
	case ISPEC_OP_HUE: return C_H;
	default: return C_B;
	}
}

void color_apply(const struct ispec_op *op, const struct color_draw *dr,
		 uint8_t *rgb, uint32_t w, uint32_t h, uint8_t *tmp)
{
	size_t n = (size_t)w * h;
	const struct step gray = { ST_GRAY, 0, 0 };

	if (!dr->apply || !n)
		return;
	switch (op->kind) {
	case ISPEC_OP_BRIGHTNESS:
	case ISPEC_OP_CONTRAST:
	case ISPEC_OP_SATURATION:
	case ISPEC_OP_HUE: { /* a jitter of one component */
		uint8_t one[1] = { comp_of(op->kind) };
		double f[4] = { 0 };

		f[one[0]] = dr->f[0];
		jitter(one, 1, f, rgb, n);
		break;
	}
	case ISPEC_OP_JITTER: jitter(dr->order, dr->n, dr->f, rgb, n); break;
	case ISPEC_OP_GRAYSCALE: sweep(&gray, 1, rgb, n, false); break;
	case ISPEC_OP_INVERT:
	case ISPEC_OP_POSTERIZE:
	case ISPEC_OP_SOLARIZE: bytes(op->kind, op->a[0], rgb, n * 3); break;
	case ISPEC_OP_AUTOCONTRAST: autocontrast(rgb, n); break;
	case ISPEC_OP_EQUALIZE: equalize(rgb, n); break;
	case ISPEC_OP_SHARPNESS: sharpness(rgb, w, h, op->a[0], tmp); break;
	case ISPEC_OP_BLUR:
		gaussian_blur(rgb, w, h, (unsigned)op->a[0], dr->f[0], tmp);
		break;
	case ISPEC_OP_CHANNEL_SHIFT: channel_shift(rgb, n, dr->f[0]); break;
	default: break;
	}
}

int color_explain(const struct ispec_op *op, const struct color_draw *dr,
		  char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s %d", ispec_op_name(op->kind), dr->apply);
	size_t at;

#define MORE(...)                                                              \
	do {                                                                   \
		at = len > 0 && (size_t)len < n ? (size_t)len : n;             \
		len += snprintf(buf + at, n - at, __VA_ARGS__);                \
	} while (0)
	switch (op->kind) {
	case ISPEC_OP_BRIGHTNESS:
	case ISPEC_OP_CONTRAST:
	case ISPEC_OP_SATURATION:
	case ISPEC_OP_HUE:
	case ISPEC_OP_CHANNEL_SHIFT: MORE(" %.17g", dr->f[0]); break;
	case ISPEC_OP_BLUR: MORE(" %.17g %.17g", op->a[0], dr->f[0]); break;
	case ISPEC_OP_SHARPNESS: MORE(" %.17g", op->a[0]); break;
	case ISPEC_OP_JITTER:
		MORE(" order ");
		for (unsigned i = 0; i < dr->n; i++)
			MORE("%s%u", i ? "," : "", dr->order[i]);
		for (unsigned c = 0; c < 4; c++)
			if (op->a[c] > 0)
				MORE(" %c %.17g", comp_name[c], dr->f[c]);
		break;
	case ISPEC_OP_POSTERIZE:
	case ISPEC_OP_SOLARIZE: MORE(" %.17g", op->a[0]); break;
	default: break;
	}
#undef MORE
	return len;
}
