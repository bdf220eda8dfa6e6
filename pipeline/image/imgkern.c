/*
 * imgkern.c - the image pipeline's last step (imgkern.h): a resized RGB
 * image to its output, normalized, cast and laid out, with AVX2 and
 * F16C where the CPU has them and portable loops that give the same
 * bytes elsewhere.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define IMGKERN_X86 1
#endif

#include "dtype.h"
#include "imgkern.h"

static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * binary32 -> binary16 with round to nearest even, after F. Giesen's
 * float_to_half_fast3_rtne. Written as three candidates and a select, no
 * loops and no table, so that the loops calling it can be vectorised.
 *
 * Normal results: rebias the exponent and round the 13 dropped mantissa
 * bits by adding 0xfff plus the lowest kept bit (ties go to even); a
 * carry out of the mantissa bumps the exponent, up to infinity for
 * values >= 65520. Subnormal results: adding 0.5f puts the value's bits
 * at the right place in a float whose exponent is fixed, and the FPU's
 * own round-to-nearest-even does the rounding. Values >= 65536 and
 * inf/NaN are handled apart; NaN becomes a quiet NaN with its sign.
 */
uint16_t imgkern_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	uint32_t a = x & 0x7fffffffu;
	uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
	uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
	uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1)) >> 13;
	uint32_t h;

	/* 0xc8000fff is (15 - 127) << 23 plus the rounding 0xfff. */
	if (a >= 0x47800000u)
		h = big;
	else if (a < 0x38800000u)
		h = sub;
	else
		h = norm;
	return (uint16_t)(h | sign);
}

/* Per-channel y = x * scale + bias, the whole of normalize. */
struct affine {
	float scale[3];
	float bias[3];
};

/*
 * (x / 255 - mean) / std == x * (1 / (255 std)) + (-mean / std). Both
 * coefficients are computed in double and rounded once to float, and
 * every output is x * scale + bias in float.
 */
static void affine_init(const struct ispec *sp, struct affine *af)
{
	for (unsigned c = 0; c < 3; c++) {
		double m = sp->has_normalize ? sp->mean[c] : 0.0;
		double s = sp->has_normalize ? sp->std[c] : 1.0;

		af->scale[c] = (float)(1.0 / (255.0 * s));
		af->bias[c] = (float)(-m / s);
	}
}

/*
 * A u8 input has 256 values per channel, so both float outputs are table
 * lookups: the table holds, for every value, exactly what the multiply-
 * add (and the rounding to f16) gives, and costs 768 of them per image
 * instead of one per element.
 */
/*
 * x * scale + bias as a multiply, rounded, then an add: never one fused
 * multiply-add, whatever -ffp-contract and -march say, so that the
 * tables and the SIMD loops below (mul then add) agree to the bit.
 */
static float affine_at(const struct affine *af, unsigned c, unsigned v)
{
	volatile float p = (float)v * af->scale[c];

	return p + af->bias[c];
}

#ifdef IMGKERN_X86
static bool kern_simd = true; /* tests turn it off to compare */

/*
 * Eight RGB pixels (24 bytes at px) as three vectors of eight 32-bit
 * integers, one per channel. Reads 32 bytes: the caller keeps 8 bytes of
 * slack before the end of px.
 */
__attribute__((target("avx2"))) static inline void
rgb8(const uint8_t *px, __m256i *r, __m256i *g, __m256i *b)
{
	const __m128i a = _mm_loadu_si128((const __m128i *)px);
	const __m128i z = _mm_loadu_si128((const __m128i *)(px + 16));
	const __m128i ra = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1,
					 -1, -1, -1, -1, -1);
	const __m128i rz = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i ga = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i gz = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i ba = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i bz = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1,
					 -1, -1, -1, -1, -1, -1);

	*r = _mm256_cvtepu8_epi32(
		_mm_or_si128(_mm_shuffle_epi8(a, ra), _mm_shuffle_epi8(z, rz)));
	*g = _mm256_cvtepu8_epi32(
		_mm_or_si128(_mm_shuffle_epi8(a, ga), _mm_shuffle_epi8(z, gz)));
	*b = _mm256_cvtepu8_epi32(
		_mm_or_si128(_mm_shuffle_epi8(a, ba), _mm_shuffle_epi8(z, bz)));
}

__attribute__((target("avx2"))) static inline __m256
affine8(__m256i v, float scale, float bias)
{
	return _mm256_add_ps(
		_mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(scale)),
		_mm256_set1_ps(bias));
}

/*
 * NCHW f32, 8 pixels a step, with streaming stores: the daemon never
 * reads the batch again, so the lines need not be fetched nor kept.
 * Returns the pixels done (a multiple of 8); the rest is the caller's.
 */
__attribute__((target("avx2"))) static size_t
chw_f32_avx2(const struct affine *af, const uint8_t *px, size_t np, float *out)
{
	size_t i = 0;
	bool aligned = ((uintptr_t)out | (np * sizeof(float))) % 32 == 0;

	for (; i + 8 <= np && 3 * i + 32 <= 3 * np; i += 8) {
		__m256i r, g, b;
		__m256 vr, vg, vb;

		rgb8(px + 3 * i, &r, &g, &b);
		vr = affine8(r, af->scale[0], af->bias[0]);
		vg = affine8(g, af->scale[1], af->bias[1]);
		vb = affine8(b, af->scale[2], af->bias[2]);
		if (aligned) {
			_mm256_stream_ps(out + i, vr);
			_mm256_stream_ps(out + np + i, vg);
			_mm256_stream_ps(out + 2 * np + i, vb);
		} else {
			_mm256_storeu_ps(out + i, vr);
			_mm256_storeu_ps(out + np + i, vg);
			_mm256_storeu_ps(out + 2 * np + i, vb);
		}
	}
	_mm_sfence();
	return i;
}

/* The same for f16, rounded to nearest even by F16C. */
__attribute__((target("avx2,f16c"))) static size_t
chw_f16_avx2(const struct affine *af, const uint8_t *px, size_t np,
	     uint16_t *out)
{
	size_t i = 0;
	bool aligned = ((uintptr_t)out | (np * sizeof(uint16_t))) % 16 == 0;

	for (; i + 8 <= np && 3 * i + 32 <= 3 * np; i += 8) {
		__m256i r, g, b;
		__m128i hr, hg, hb;

		rgb8(px + 3 * i, &r, &g, &b);
		hr = _mm256_cvtps_ph(affine8(r, af->scale[0], af->bias[0]),
				     _MM_FROUND_TO_NEAREST_INT);
		hg = _mm256_cvtps_ph(affine8(g, af->scale[1], af->bias[1]),
				     _MM_FROUND_TO_NEAREST_INT);
		hb = _mm256_cvtps_ph(affine8(b, af->scale[2], af->bias[2]),
				     _MM_FROUND_TO_NEAREST_INT);
		if (aligned) {
			_mm_stream_si128((__m128i *)(out + i), hr);
			_mm_stream_si128((__m128i *)(out + np + i), hg);
			_mm_stream_si128((__m128i *)(out + 2 * np + i), hb);
		} else {
			_mm_storeu_si128((__m128i *)(out + i), hr);
			_mm_storeu_si128((__m128i *)(out + np + i), hg);
			_mm_storeu_si128((__m128i *)(out + 2 * np + i), hb);
		}
	}
	_mm_sfence();
	return i;
}
#endif

void imgkern_test_simd(bool on)
{
#ifdef IMGKERN_X86
	kern_simd = on;
#else
	(void)on;
#endif
}

/*
 * With fewer pixels than this left (the SIMD loops' tail, small images),
 * computing each element costs less than filling the tables.
 */
#define EMIT_TABLE_MIN 256

static void emit_f32(const struct affine *af, const uint8_t *restrict px,
		     size_t np, bool chw, float *restrict out)
{
	float lut[3][256];
	/* Element (pixel i, channel c) goes to i * step + c * plane. */
	size_t step = chw ? 1 : 3, plane = chw ? np : 1, i = 0;

#ifdef IMGKERN_X86
	if (chw && kern_simd && __builtin_cpu_supports("avx2"))
		i = chw_f32_avx2(af, px, np, out);
#endif
	if (np - i < EMIT_TABLE_MIN) {
		for (; i < np; i++)
			for (unsigned c = 0; c < 3; c++)
				out[i * step + c * plane] =
					affine_at(af, c, px[3 * i + c]);
		return;
	}
	for (unsigned c = 0; c < 3; c++)
		for (unsigned v = 0; v < 256; v++)
			lut[c][v] = affine_at(af, c, v);
	for (; i < np; i++) {
		out[i * step] = lut[0][px[3 * i]];
		out[i * step + plane] = lut[1][px[3 * i + 1]];
		out[i * step + 2 * plane] = lut[2][px[3 * i + 2]];
	}
}

#ifdef IMGKERN_X86
/*
 * F16C (CPUID leaf 1, ECX bit 29), asked of the CPU directly: not every
 * compiler's __builtin_cpu_supports() knows the name (clang 14 does not).
 */
static bool has_f16c(void)
{
	static int known = -1; /* any thread may find it out first */
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
	unsigned a, b, c, d;

	if (k < 0) {
		k = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}
#endif

static void emit_f16(const struct affine *af, const uint8_t *restrict px,
		     size_t np, bool chw, uint16_t *restrict out)
{
	uint16_t lut[3][256];
	size_t step = chw ? 1 : 3, plane = chw ? np : 1, i = 0;

#ifdef IMGKERN_X86
	if (chw && kern_simd && __builtin_cpu_supports("avx2") && has_f16c())
		i = chw_f16_avx2(af, px, np, out);
#endif
	if (np - i < EMIT_TABLE_MIN) {
		for (; i < np; i++)
			for (unsigned c = 0; c < 3; c++)
				out[i * step + c * plane] = imgkern_f32_to_f16(
					affine_at(af, c, px[3 * i + c]));
		return;
	}
	for (unsigned c = 0; c < 3; c++)
		for (unsigned v = 0; v < 256; v++)
			lut[c][v] = imgkern_f32_to_f16(affine_at(af, c, v));
	for (; i < np; i++) {
		out[i * step] = lut[0][px[3 * i]];
		out[i * step + plane] = lut[1][px[3 * i + 1]];
		out[i * step + 2 * plane] = lut[2][px[3 * i + 2]];
	}
}

static void emit_u8(const uint8_t *restrict px, size_t np, bool chw,
		    uint8_t *restrict out)
{
	if (!chw) {
		memcpy(out, px, np * 3);
		return;
	}
	for (size_t i = 0; i < np; i++) {
		out[i] = px[3 * i];
		out[np + i] = px[3 * i + 1];
		out[2 * np + i] = px[3 * i + 2];
	}
}

int imgkern_emit(const struct ispec *sp, const uint8_t *hwc, uint32_t w,
		 uint32_t h, void *dst)
{
	size_t np = (size_t)w * h;
	bool chw = sp->layout == ISPEC_NCHW;
	struct affine af;

	if (w != sp->size || h != sp->size || !w)
		return -EINVAL;
	affine_init(sp, &af);
	switch (sp->dtype) {
	case DT_U8: emit_u8(hwc, np, chw, dst); return 0;
	case DT_F16: emit_f16(&af, hwc, np, chw, dst); return 0;
	case DT_F32: emit_f32(&af, hwc, np, chw, dst); return 0;
	default: return -EINVAL;
	}
}
