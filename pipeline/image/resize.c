/*
 * resize.c - antialiased triangle resampling, PIL's way.
 *
 * Each axis gets a table: for output pixel j, the first input pixel it
 * reads (start), how many it reads (count) and their weights. The weights
 * follow Pillow's precompute_coeffs() step by step, in double precision,
 * then become 22-bit fixed point as in its normalize_coeffs_8bpc(), so
 * that the two agree to the bit (the unit test checks us against a plain
 * double-precision reference within +-1, and bench/resize_pil.py against
 * Pillow itself).
 *
 * A plan is one block of memory: the struct, then the tables, at offsets
 * that depend only on the sizes and the filter's width (layout()), so
 * that rsz_plan_bytes() can bound them without building anything.
 *
 * Two sets of loops apply the tables: portable C, and AVX2 on x86-64
 * (chosen per plan when it is built). The AVX2 ones compute the very same
 * integer sums: see the comment above split() for why that is exact. The
 * vertical pass takes 32 bytes of a row at a time; the horizontal pass
 * takes blocks of 8 outputs, with weights laid out for it in the plan
 * (simd_tables()) in one of three ways by channel count and shrink
 * factor, whichever moves the fewest bytes.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "resize.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define RSZ_X86 1
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2")))
#else
#define RSZ_X86 0
#endif

/*
 * 8 bits of pixel plus 22 of weight leave 2 bits of headroom in an
 * int32_t accumulator, the same split as Pillow's PRECISION_BITS; the
 * weights of one output are non-negative and sum to 1 (within rounding),
 * so the sum never overflows.
 */
#define RSZ_BITS 22
#define RSZ_HALF ((int32_t)1 << (RSZ_BITS - 1))
#define RSZ_ONE	 ((int32_t)1 << RSZ_BITS)

struct rsz_axis {
	uint32_t in, out;
	uint32_t ksize;	 /* stride of coef between outputs: kstride() */
	uint32_t taps;	 /* the largest count */
	uint32_t window; /* input lines that must be held at once */
	bool copy;	 /* output j is input off + j, weight 1 */
	uint32_t off;
	uint32_t *start; /* first input line of output j */
	uint32_t *count; /* input lines output j reads */
	int32_t *coef;	 /* their weights, at coef + j * ksize */
};

struct rsz_plan {
	struct rsz_axis x, y;
	void *owned; /* what rsz_plan_free() frees: NULL in caller memory */
	/* The AVX2 loops, and their tables (see simd_tables()). */
	bool simd;
	bool gather1;	       /* 1 channel: byte gathers, else adds */
	bool gather3;	       /* 3 channels: byte gathers, else x34 */
	uint32_t ngr;	       /* x34: groups of 4 taps */
	uint32_t g1;	       /* x1: pairs of taps, or groups of 8 */
	uint32_t g3;	       /* x3: pairs of taps */
	uint32_t ypairs;       /* ypair: pairs of taps per output */
	const void *x34;       /* x weights, 3 and 4 channels */
	const void *x1;	       /* x weights, 1 channel */
	const void *x3;	       /* x weights, 3 channels gathered */
	const uint32_t *ypair; /* y weights, a pair of taps a word */
};

/* Where each table lies, in bytes from the (64-aligned) plan. */
struct rsz_layout {
	size_t xstart, xcount, xcoef, ystart, ycount, ycoef;
	size_t ypair, x34, x1, x3, end;
};

/* rsz_plan_bytes() asks this much more, to align whatever memory comes. */
#define RSZ_SLACK 63

static size_t align32(size_t n)
{
	return (n + 31) & ~(size_t)31;
}

static uint32_t div_up(uint32_t n, uint32_t d)
{
	return (n + d - 1) / d;
}

/* Blocks of 8 outputs, the unit of the AVX2 horizontal pass. */
static inline uint32_t blocks(uint32_t out)
{
	return div_up(out, 8);
}

/*
 * Pillow's ksize: 2 * ceil(support) + 1 coefficients per output, where
 * the support is the scale, or 1 when enlarging.
 */
static uint32_t ksize_for(double scale)
{
	double support = scale < 1.0 ? 1.0 : scale;
	uint32_t c = (uint32_t)support;

	/* ceil() by hand, to keep libm out of the link for one call. */
	if ((double)c < support)
		c++;
	return c * 2 + 1;
}

/*
 * The most pairs of taps byte gathers can take from 16 bytes: 8 of one
 * channel, 3 of three (see gathers_fit()). Beyond, other loops serve.
 */
#define GATHER1_MAX 8
#define GATHER3_MAX 3

/*
 * Weights stored per output: Pillow's ksize rounded up to 8 and padded
 * with zeros, so that the SIMD tables can take taps in groups of 2, 4 or
 * 8 without checking where each output's end.
 */
static uint32_t kstride(uint32_t ksize)
{
	return (ksize + 7) & ~7u;
}

/*
 * The tables of a plan whose axes have ksx and ksy coefficients per
 * output. The SIMD tables are sized for the widest grouping of ksx taps
 * whether or not the plan will use them, so that the size depends on the
 * build only, not on the processor or the flags.
 */
static void layout(struct rsz_layout *l, uint32_t ksx, uint32_t ksy,
		   uint32_t ow, uint32_t oh)
{
	size_t at = align32(sizeof(struct rsz_plan));

	l->xstart = at;
	at = align32(at + (size_t)ow * sizeof(uint32_t));
	l->xcount = at;
	at = align32(at + (size_t)ow * sizeof(uint32_t));
	l->xcoef = at;
	at = align32(at + (size_t)ow * kstride(ksx) * sizeof(int32_t));
	l->ystart = at;
	at = align32(at + (size_t)oh * sizeof(uint32_t));
	l->ycount = at;
	at = align32(at + (size_t)oh * sizeof(uint32_t));
	l->ycoef = at;
	at = align32(at + (size_t)oh * kstride(ksy) * sizeof(int32_t));
	l->ypair = l->x34 = l->x1 = l->x3 = at;
#if RSZ_X86
	/* Two 32-bit words (high and low halves) per pair of taps. */
	at = align32(at + (size_t)oh * kstride(ksy) * sizeof(uint32_t));
	/* Per block and group of 4 taps: 4 vectors x 2 pairs x 2 halves. */
	l->x34 = at;
	at += (size_t)blocks(ow) * 2 * div_up(ksx, 4) * 256;
	/*
	 * Per block: gathers (3 vectors a pair of taps, at most 8 pairs,
	 * see gathers_fit()) or adds (4 pairs of vectors per 8 taps).
	 */
	l->x1 = at;
	at += (size_t)blocks(ow) * (GATHER1_MAX * 96 > div_up(ksx, 8) * 256 ?
					    GATHER1_MAX * 96 :
					    div_up(ksx, 8) * 256);
	/* Per block: lane offsets, then 9 vectors a pair of taps, at most 3. */
	l->x3 = at;
	at += (size_t)blocks(ow) * (32 + GATHER3_MAX * 9 * 32);
#endif
	l->end = at;
}

static bool side_ok(uint32_t n)
{
	return n >= 1 && n <= RSZ_MAX_SIDE;
}

size_t rsz_plan_bytes(uint32_t max_in_w, uint32_t max_in_h, uint32_t out_w,
		      uint32_t out_h)
{
	struct rsz_layout l;

	if (!side_ok(max_in_w) || !side_ok(max_in_h) || !side_ok(out_w) ||
	    !side_ok(out_h))
		return 0;
	/*
	 * A box's width is at most the image's, and ksize grows with it, so
	 * the whole image of the largest size needs the most.
	 */
	layout(&l, ksize_for((double)max_in_w / (double)out_w),
	       ksize_for((double)max_in_h / (double)out_h), out_w, out_h);
	return l.end + RSZ_SLACK;
}

/*
 * The triangle: 1 at the centre, 0 at a distance of 1 and beyond. It is
 * Pillow's bilinear_filter() without its branches, which taps on either
 * side of the centre would mispredict half the time: |t| gives the same
 * value as its t < 0 ? -t : t (1 - -0 is 1 - 0), and 1 - |t| is positive
 * exactly when |t| < 1.
 */
static inline double triangle(double t)
{
	double r = 1.0 - __builtin_fabs(t);

	return r > 0.0 ? r : 0.0;
}

/*
 * Pillow rounds each product on its own: it is built for plain x86-64,
 * which has no fused multiply-add. A compiler allowed to fuse a * b + c
 * (GCC does by default when the target has FMA, as with -march=native)
 * would round once instead and drift from Pillow in the last bit, now
 * and then enough to change a weight. An empty asm hides the product, so
 * nothing can fuse across it; it costs no instruction.
 */
static inline double unfused(double v)
{
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
	__asm__("" : "+x"(v));
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
	__asm__("" : "+w"(v));
#else
	volatile double t = v;

	v = t;
#endif
	return v;
}

/* Weights axis_init() keeps on the stack: 512 bytes. */
#define RSZ_WBUF 64

/* Pillow's weight of input pixel i for an output centred on center. */
static inline double tri_tap(int i, double center, double ss)
{
	return triangle(unfused(((double)i - center + 0.5) * ss));
}

/* Pillow's normalize_coeffs_8bpc() of one weight. */
static inline int32_t to_fixed(double v, double sum)
{
	if (sum != 0.0)
		v /= sum;
	v *= (double)(1 << RSZ_BITS);
	return (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
}

#if RSZ_X86
/*
 * The n weights of pixels lo.. into w (one more when n is odd), two at a
 * time with SSE2, which every x86-64 has: each operation is the scalar
 * one's, so the doubles are the same. Returns their sum, added one by
 * one in Pillow's order.
 */
static double raw_weights(double *w, int lo, int n, double center, double ss)
{
	const __m128d c = _mm_set1_pd(center), half = _mm_set1_pd(0.5);
	const __m128d m = _mm_set1_pd(ss), one = _mm_set1_pd(1.0);
	const __m128d sign = _mm_set1_pd(-0.0), two = _mm_set1_pd(2.0);
	__m128d i = _mm_setr_pd(lo, lo + 1);
	double sum = 0.0;

	for (int t = 0; t < n; t += 2, i = _mm_add_pd(i, two)) {
		__m128d x = _mm_mul_pd(_mm_add_pd(_mm_sub_pd(i, c), half), m);

		/* triangle(): max(1 - |x|, 0), as max keeps the +0. */
		x = _mm_max_pd(_mm_sub_pd(one, _mm_andnot_pd(sign, x)),
			       _mm_setzero_pd());
		_mm_storeu_pd(w + t, x);
	}
	for (int t = 0; t < n; t++)
		sum += w[t];
	return sum;
}

/*
 * to_fixed() of w[0..n), two at a time into k (one more when n is odd:
 * k has room, and the caller's zeros follow). Triangle weights are never
 * negative, so rounding is adding 1/2 and truncating.
 */
static void fixed_weights(int32_t *k, const double *w, int n, double sum)
{
	const __m128d d = _mm_set1_pd(sum), f = _mm_set1_pd(1 << RSZ_BITS);
	const __m128d half = _mm_set1_pd(0.5);

	for (int t = 0; t < n; t += 2) {
		__m128d v = _mm_loadu_pd(w + t);

		if (sum != 0.0)
			v = _mm_div_pd(v, d);
		v = _mm_add_pd(_mm_mul_pd(v, f), half);
		_mm_storel_epi64((__m128i *)(void *)(k + t),
				 _mm_cvttpd_epi32(v));
	}
}
#else
static double raw_weights(double *w, int lo, int n, double center, double ss)
{
	double sum = 0.0;

	for (int t = 0; t < n; t++)
		sum += w[t] = tri_tap(t + lo, center, ss);
	return sum;
}

static void fixed_weights(int32_t *k, const double *w, int n, double sum)
{
	for (int t = 0; t < n; t++)
		k[t] = to_fixed(w[t], sum);
}
#endif

/*
 * One axis, as Pillow's precompute_coeffs() and normalize_coeffs_8bpc():
 * in0 and in1 are single precision because Pillow's box is, and the
 * filter window is clipped to the image [0, in), not to the box. With
 * mirror, output j's weights are stored as output out - 1 - j's.
 */
static void axis_init(struct rsz_axis *a, uint32_t in, float in0, float in1,
		      uint32_t out, uint32_t ksize, bool mirror)
{
	/* Pillow subtracts in float, then widens: so do we. */
	float span = in1 - in0;
	double scale = (double)span / (double)out;
	double fscale = scale < 1.0 ? 1.0 : scale;
	double support = 1.0 * fscale;
	double ss = 1.0 / fscale, w[RSZ_WBUF];
	uint32_t reach = 0;

	a->in = in;
	a->out = out;
	a->ksize = ksize;
	a->taps = 0;
	a->window = 0;
	for (uint32_t j = 0; j < out; j++) {
		double center =
			(double)in0 + unfused(((double)j + 0.5) * scale);
		double sum = 0.0;
		/* The (int) casts truncate toward zero, as Pillow's do. */
		int lo = (int)(center - support + 0.5);
		int hi = (int)(center + support + 0.5);
		uint32_t e = mirror ? out - 1 - j : j;
		int32_t *k = a->coef + (size_t)e * ksize;
		int n, t;

		if (lo < 0)
			lo = 0;
		if (hi > (int)in)
			hi = (int)in;
		/*
		 * hi - lo is at most 2 * support + 1 <= ksize; the check only
		 * keeps the writes inside the table whatever the rounding.
		 */
		if (hi - lo > (int)ksize)
			hi = lo + (int)ksize;
		n = hi - lo;
		/*
		 * Two passes over the taps, as Pillow's: the sum must be
		 * complete before the first division. The weights wait in
		 * w; past its size (shrinking by more than 30 times) the
		 * second pass computes them again, which gives the same
		 * doubles, rather than ask for memory.
		 */
		if (n <= RSZ_WBUF) {
			sum = raw_weights(w, lo, n, center, ss);
			fixed_weights(k, w, n, sum);
			t = n;
		} else {
			for (t = 0; t < n; t++)
				sum += tri_tap(t + lo, center, ss);
			for (t = 0; t < n; t++)
				k[t] = to_fixed(tri_tap(t + lo, center, ss),
						sum);
		}
		for (; t < (int)ksize; t++)
			k[t] = 0;
		a->start[e] = (uint32_t)lo;
		a->count[e] = (uint32_t)n;
		if ((uint32_t)n > a->taps)
			a->taps = (uint32_t)n;
		/*
		 * The vertical pass keeps a ring of resized rows: what it
		 * must hold at once is everything from this output's first
		 * line up to the furthest line read so far.
		 */
		if ((uint32_t)hi > reach)
			reach = (uint32_t)hi;
		if (reach - (uint32_t)lo > a->window)
			a->window = reach - (uint32_t)lo;
	}

	/*
	 * Same size and a box on whole pixels (the whole image, say): each
	 * output is one input at weight 1, and the pass is a copy. The
	 * weights say so directly, whatever the box's arithmetic was.
	 */
	a->copy = !mirror;
	a->off = a->start[0];
	for (uint32_t j = 0; j < out && a->copy; j++) {
		const int32_t *k = a->coef + (size_t)j * ksize;

		if (a->start[j] != a->off + j || k[0] != RSZ_ONE)
			a->copy = false;
		for (uint32_t t = 1; t < a->count[j] && a->copy; t++)
			if (k[t])
				a->copy = false;
	}
}

/*
 * Why the AVX2 loops are exact. They multiply with vpmaddwd, 16-bit by
 * 16-bit, two taps at a time, but the weights have 23 bits. So each
 * weight k is split as k = kh * 2^15 + kl with 0 <= kl < 2^15 (kh <= 128),
 * the loops sum H = sum(kh * p) and L = sum(kl * p) separately, and
 * (H << 15) + L is sum(k * p) as an integer, equal to the scalar loop's:
 * no product or partial sum comes near 2^31, and integer addition does
 * not care about order. Taps added to fill a group have weight 0 and add
 * nothing, whatever pixel they read.
 */
static inline uint32_t split(int32_t k, bool high)
{
	return (uint16_t)(high ? k >> 15 : k & 0x7fff);
}

/*
 * Taps t and t + 1 of a row of weights, their high or low halves in one
 * word. Rows are zero-padded to a multiple of 8 taps (kstride()), which
 * covers every group the tables below read.
 */
static inline uint32_t pair(const int32_t *k, uint32_t t, bool high)
{
	return split(k[t], high) | split(k[t + 1], high) << 16;
}

#if RSZ_X86
/* The first output of block b: the last block overlaps the one before. */
static uint32_t block_base(uint32_t b, uint32_t out)
{
	return b * 8 + 8 <= out ? b * 8 : out - 8;
}

static uint32_t min2(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static uint32_t max2(uint32_t a, uint32_t b)
{
	return a < b ? b : a;
}

/*
 * Whether, in every block, the 4 outputs of each 128-bit half read nq
 * pairs of taps within 16 bytes, as one channel's byte gathers need.
 * Starts only grow (or, mirrored, only fall) along a block, so its ends
 * bound it.
 */
static bool gathers_fit(const struct rsz_axis *a, uint32_t nq)
{
	if (nq > GATHER1_MAX)
		return false;
	for (uint32_t b = 0; b < blocks(a->out); b++)
		for (uint32_t half = 0; half < 8; half += 4) {
			const uint32_t *s =
				a->start + block_base(b, a->out) + half;

			if (max2(s[0], s[3]) - min2(s[0], s[3]) + 2 * nq > 16)
				return false;
		}
	return true;
}

/*
 * For 3 channels, the 24 bytes a block outputs are three vectors of 8
 * 32-bit lanes: half h (0..5) of them holds bytes 4h .. 4h + 3, of one
 * or two outputs. It loads 16 bytes from the lowest input byte these
 * read, at base[h] from the block's lowest start times 3; their taps must
 * all lie in those 16 bytes. Returns false when some do not (shrinking by
 * more than about 2), and rsz_run() takes x34 instead.
 */
static bool lanes3(const uint32_t *s, uint32_t nq, uint16_t base[6])
{
	uint32_t lo = min2(s[0], s[7]) * 3;

	for (unsigned h = 0; h < 6; h++) {
		uint32_t first = UINT32_MAX, last = 0;

		for (unsigned i = 4 * h; i < 4 * h + 4; i++) {
			first = min2(first, s[i / 3] * 3 + i % 3);
			last = max2(last, (s[i / 3] + 2 * nq - 1) * 3 + i % 3);
		}
		if (last - first > 15)
			return false;
		base[h] = (uint16_t)(first - lo);
	}
	return true;
}

/*
 * The AVX2 weight tables. A block of 8 outputs is computed as vectors
 * whose two 128-bit halves the packing instructions put back together.
 *
 * x34, for 3 and 4 channels: vector k holds outputs base + k (low half)
 * and base + k + 4 (high); its 32-bit lanes are channels, each holding a
 * pair of taps (t, t + 1). Per vector and pair of taps, one 32-byte
 * vector of the weights' high halves and one of the low, each pair
 * repeated in the 4 lanes of its output.
 *
 * x1, for 1 channel, when gathers fit: one vector per block, 32-bit lane
 * i for output base + i; per pair of taps a byte shuffle that gathers
 * each lane's pixels from 16 bytes loaded at the lowest start of its
 * half, then the high and the low weights.
 *
 * x1 otherwise: vector k as in x34, its 16-bit lanes 8 taps of each
 * output; per group of 8 taps a vector of high halves and one of low.
 *
 * x3, for 3 channels when gathers fit: per block the 6 halves' offsets
 * (lanes3(), 16 bits each, in a 32-byte header), then per vector v
 * (bytes 8v .. 8v + 7 of the block's output) and pair of taps a byte
 * shuffle, the high and the low weights.
 *
 * Every field is copied to a local first: the stores below may alias
 * the plan, and would otherwise make each read of it a load.
 */
static void simd_tables(struct rsz_plan *p, void *x34, void *x1, void *x3,
			uint32_t *ypair)
{
	const uint32_t *start = p->x.start, out = p->x.out;
	const int32_t *coef = p->x.coef;
	const size_t ks = p->x.ksize;
	const uint32_t nq34 = p->ngr * 2, g1 = p->g1, g3 = p->g3;
	const bool gather1 = p->gather1;
	bool gather3 = out >= 8 && g3 <= GATHER3_MAX;
	uint32_t *w34 = x34;
	uint8_t *w1 = x1, *w3 = x3;
	uint16_t off[16] = { 0 };

	/* rsz_run() takes the plain loop for fewer than 8 outputs. */
	for (uint32_t b = 0; out >= 8 && b < blocks(out); b++) {
		uint32_t base = block_base(b, out);
		const uint32_t *s = start + base;
		const int32_t *k = coef + base * ks;

		for (uint32_t v = 0; v < 4; v++)
			for (uint32_t q = 0; q < nq34; q++, w34 += 16)
				for (unsigned h = 0; h < 2; h++) {
					const int32_t *kj =
						k + (v + 4 * h) * ks;
					uint32_t hi = pair(kj, 2 * q, true);
					uint32_t lo = pair(kj, 2 * q, false);

					for (unsigned i = 0; i < 4; i++) {
						w34[4 * h + i] = hi;
						w34[8 + 4 * h + i] = lo;
					}
				}
		for (uint32_t q = 0; gather1 && q < g1; q++, w1 += 96) {
			uint32_t m[8], wh[8], wl[8];

			for (unsigned i = 0; i < 8; i++) {
				uint32_t h = i / 4 * 4;
				uint32_t d =
					s[i] + 2 * q - min2(s[h], s[h + 3]);

				/* Bytes d and d + 1, zero-extended. */
				m[i] = d | 0x8000u | (d + 1) << 16 |
				       0x80000000u;
				wh[i] = pair(k + i * ks, 2 * q, true);
				wl[i] = pair(k + i * ks, 2 * q, false);
			}
			memcpy(w1, m, 32);
			memcpy(w1 + 32, wh, 32);
			memcpy(w1 + 64, wl, 32);
		}
		for (uint32_t v = 0; !gather1 && v < 4; v++)
			for (uint32_t g = 0; g < g1; g++, w1 += 64) {
				uint16_t wh[16], wl[16];

				for (unsigned i = 0; i < 16; i++) {
					int32_t t = k[(v + i / 8 * 4) * ks +
						      8 * g + i % 8];

					wh[i] = (uint16_t)split(t, true);
					wl[i] = (uint16_t)split(t, false);
				}
				memcpy(w1, wh, 32);
				memcpy(w1 + 32, wl, 32);
			}
		/* x3 stays unused if the gathers do not fit some block. */
		if (gather3 && !lanes3(s, g3, off))
			gather3 = false;
		if (gather3) {
			memcpy(w3, off, 32);
			w3 += 32;
			for (unsigned v = 0; v < 3; v++)
				for (uint32_t q = 0; q < g3; q++, w3 += 96) {
					uint32_t lo = min2(s[0], s[7]) * 3;
					uint32_t m[8], wh[8], wl[8];

					for (unsigned i = 0; i < 8; i++) {
						unsigned byte = 8 * v + i;
						uint32_t j = byte / 3;
						uint32_t d =
							(s[j] + 2 * q) * 3 +
							byte % 3 - lo -
							off[byte / 4];

						/* Bytes d and d + 3. */
						m[i] = d | 0x8000u |
						       (d + 3) << 16 |
						       0x80000000u;
						wh[i] = pair(k + j * ks, 2 * q,
							     true);
						wl[i] = pair(k + j * ks, 2 * q,
							     false);
					}
					memcpy(w3, m, 32);
					memcpy(w3 + 32, wh, 32);
					memcpy(w3 + 64, wl, 32);
				}
		}
	}
	p->gather3 = gather3;
	for (uint32_t j = 0; j < p->y.out; j++) {
		const int32_t *k = p->y.coef + (size_t)j * p->y.ksize;
		uint32_t *w = ypair + (size_t)j * p->ypairs * 2;

		for (uint32_t q = 0; q < div_up(p->y.count[j], 2); q++) {
			w[2 * q] = pair(k, 2 * q, true);
			w[2 * q + 1] = pair(k, 2 * q, false);
		}
	}
}

static bool have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}
#endif

int rsz_plan_box(void *mem, size_t cap, uint32_t in_w, uint32_t in_h,
		 const double box[4], uint32_t out_w, uint32_t out_h,
		 unsigned flags, struct rsz_plan **out)
{
	double whole[4] = { 0, 0, in_w, in_h };
	struct rsz_layout l;
	struct rsz_plan *p;
	uint32_t ksx, ksy;
	uint8_t *at;
	float b[4];

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!box)
		box = whole;
	/* Written so that a NaN fails every test. */
	if (!mem || !side_ok(in_w) || !side_ok(in_h) || !side_ok(out_w) ||
	    !side_ok(out_h) || flags & ~(unsigned)(RSZ_MIRROR | RSZ_SCALAR) ||
	    !(box[0] >= 0 && box[0] < box[2] && box[2] <= in_w) ||
	    !(box[1] >= 0 && box[1] < box[3] && box[3] <= in_h))
		return -EINVAL;
	/*
	 * Pillow takes the box as four floats: rounding ours the same way is
	 * what keeps fractional boxes bit-exact. Rounding keeps 0 <= x0 <= x1
	 * <= in_w, as in_w is a float exactly; x0 may now equal x1, which
	 * the arithmetic below takes in its stride (every output then
	 * samples x0).
	 */
	for (int i = 0; i < 4; i++)
		b[i] = (float)box[i];
	ksx = ksize_for((double)(float)(b[2] - b[0]) / (double)out_w);
	ksy = ksize_for((double)(float)(b[3] - b[1]) / (double)out_h);
	layout(&l, ksx, ksy, out_w, out_h);
	if (cap < l.end + RSZ_SLACK)
		return -ENOSPC;

	at = (uint8_t *)mem + (-(uintptr_t)mem & 63);
	p = (struct rsz_plan *)(void *)at;
	memset(p, 0, sizeof(*p));
	p->x.start = (uint32_t *)(void *)(at + l.xstart);
	p->x.count = (uint32_t *)(void *)(at + l.xcount);
	p->x.coef = (int32_t *)(void *)(at + l.xcoef);
	p->y.start = (uint32_t *)(void *)(at + l.ystart);
	p->y.count = (uint32_t *)(void *)(at + l.ycount);
	p->y.coef = (int32_t *)(void *)(at + l.ycoef);
	axis_init(&p->x, in_w, b[0], b[2], out_w, kstride(ksx),
		  flags & RSZ_MIRROR);
	axis_init(&p->y, in_h, b[1], b[3], out_h, kstride(ksy), false);
#if RSZ_X86
	p->simd = !(flags & RSZ_SCALAR) && have_avx2();
	if (p->simd) {
		p->ngr = div_up(p->x.taps, 4);
		p->g1 = div_up(p->x.taps, 2);
		p->gather1 = p->x.out >= 8 && p->g1 <= GATHER1_MAX &&
			     gathers_fit(&p->x, p->g1);
		if (!p->gather1)
			p->g1 = div_up(p->x.taps, 8);
		p->g3 = div_up(p->x.taps, 2);
		p->x3 = at + l.x3;
		p->ypairs = p->y.ksize / 2;
		p->x34 = at + l.x34;
		p->x1 = at + l.x1;
		p->ypair = (const uint32_t *)(const void *)(at + l.ypair);
		simd_tables(p, at + l.x34, at + l.x1, at + l.x3,
			    (uint32_t *)(void *)(at + l.ypair));
	}
#endif
	*out = p;
	return 0;
}

int rsz_plan_new(uint32_t in_w, uint32_t in_h, uint32_t out_w, uint32_t out_h,
		 struct rsz_plan **out)
{
	size_t n = rsz_plan_bytes(in_w, in_h, out_w, out_h);
	void *mem;
	int err;

	*out = NULL;
	if (!n)
		return -EINVAL;
	mem = mem_alloc(n);
	if (!mem)
		return -ENOMEM;
	err = rsz_plan_box(mem, n, in_w, in_h, NULL, out_w, out_h, 0, out);
	if (err) {
		free(mem);
		return err;
	}
	(*out)->owned = mem;
	return 0;
}

void rsz_plan_free(struct rsz_plan *p)
{
	if (p)
		free(p->owned);
}

/* Bytes of the row ring, rounded up so the accumulators after it align. */
static size_t ring_bytes(const struct rsz_plan *p, unsigned ch)
{
	size_t n;

	if (p->x.copy)
		return 0;
	n = (size_t)p->y.window * p->x.out * ch;
	return (n + 63) & ~(size_t)63;
}

static bool channels_ok(unsigned ch)
{
	return ch == 1 || ch == 3 || ch == 4;
}

size_t rsz_scratch_bytes(uint32_t max_in_h, uint32_t out_w, uint32_t out_h,
			 unsigned channels)
{
	size_t ring;

	if (!channels_ok(channels) || !side_ok(max_in_h) || !side_ok(out_w) ||
	    !side_ok(out_h))
		return 0;
	/*
	 * Each output row reads at most ksize input rows, and the windows of
	 * successive rows only move down, so the ring never holds more than
	 * ksize rows; ksize grows with the box's height.
	 */
	ring = (size_t)ksize_for((double)max_in_h / (double)out_h) * out_w *
	       channels;
	return ((ring + 63) & ~(size_t)63) +
	       (size_t)out_w * channels * sizeof(int32_t);
}

size_t rsz_scratch_size(const struct rsz_plan *p, unsigned channels)
{
	if (!channels_ok(channels) || p->y.copy)
		return 0;
	return ring_bytes(p, channels) +
	       (size_t)p->x.out * channels * sizeof(int32_t);
}

static inline uint8_t clip8(int32_t v)
{
	if (v < 0)
		return 0;
	if (v >= (int32_t)256 << RSZ_BITS)
		return 255;
	return (uint8_t)(v >> RSZ_BITS);
}

/*
 * Output pixel j of one row through the horizontal filter. ch is a
 * constant in each caller, so the channel loops unroll and the
 * accumulators live in registers.
 */
static inline void hpix(const struct rsz_axis *a, const uint8_t *in,
			uint8_t *out, uint32_t j, unsigned ch)
{
	const int32_t *k = a->coef + (size_t)j * a->ksize;
	const uint8_t *px = in + (size_t)a->start[j] * ch;
	int32_t acc[4] = { RSZ_HALF, RSZ_HALF, RSZ_HALF, RSZ_HALF };

	for (uint32_t t = 0; t < a->count[j]; t++)
		for (unsigned c = 0; c < ch; c++)
			acc[c] += k[t] * (int32_t)px[t * ch + c];
	for (unsigned c = 0; c < ch; c++)
		out[(size_t)j * ch + c] = clip8(acc[c]);
}

static inline void hrow(const struct rsz_plan *p, const uint8_t *in,
			uint8_t *out, unsigned ch)
{
	for (uint32_t j = 0; j < p->x.out; j++)
		hpix(&p->x, in, out, j, ch);
}

static void hrow1(const struct rsz_plan *p, const uint8_t *in, uint8_t *out)
{
	hrow(p, in, out, 1);
}

static void hrow3(const struct rsz_plan *p, const uint8_t *in, uint8_t *out)
{
	hrow(p, in, out, 3);
}

static void hrow4(const struct rsz_plan *p, const uint8_t *in, uint8_t *out)
{
	hrow(p, in, out, 4);
}

/*
 * The lines an output row reads, wherever they are: line t is row
 * first + t of base, counted modulo wrap (0: no wrap), stride bytes
 * apart. The ring of resized rows wraps; the source, when the horizontal
 * pass is a copy, does not.
 */
struct rsz_lines {
	const uint8_t *base;
	size_t stride;
	uint32_t first, wrap;
};

static void vrow_c(const struct rsz_plan *p, uint32_t j,
		   const struct rsz_lines *ln, uint8_t *d, size_t len,
		   int32_t *acc)
{
	const int32_t *k = p->y.coef + (size_t)j * p->y.ksize;
	uint32_t r = ln->first;

	for (size_t i = 0; i < len; i++)
		acc[i] = RSZ_HALF;
	for (uint32_t t = 0; t < p->y.count[j]; t++) {
		const uint8_t *line = ln->base + (size_t)r * ln->stride;
		int32_t kt = k[t];

		for (size_t i = 0; i < len; i++)
			acc[i] += kt * (int32_t)line[i];
		if (++r == ln->wrap)
			r = 0;
	}
	for (size_t i = 0; i < len; i++)
		d[i] = clip8(acc[i]);
}

typedef void (*hrow_fn)(const struct rsz_plan *, const uint8_t *, uint8_t *);
typedef void (*vrow_fn)(const struct rsz_plan *, uint32_t,
			const struct rsz_lines *, uint8_t *, size_t, int32_t *);

#if RSZ_X86
/*
 * A stack buffer for the blocks at a row's end, whose 16-byte loads
 * would run past it: the row's tail is copied here and zero-padded.
 * Blocks whose reads span more than this (shrinking by more than about
 * 20 times) take the scalar loop instead.
 */
#define RSZ_PAD 1024

/* The block loops below are specialised by inlining constant arguments. */
#define INLINE inline __attribute__((always_inline))

/*
 * The byte shuffles that turn 16 bytes of one output's pixels (taps t..
 * t + 3, from 3 or 4 channels) into 16-bit pairs (tap t, tap t + 1) and
 * (t + 2, t + 3) per 32-bit channel lane, zero-extended (-1 gives 0).
 */
static const int8_t shuf3[2][32] __attribute__((aligned(32))) = {
#define S3(b)                                                                  \
	b, -1, b + 3, -1, b + 1, -1, b + 4, -1, b + 2, -1, b + 5, -1, -1, -1,  \
		-1, -1
	{ S3(0), S3(0) },
	{ S3(6), S3(6) },
#undef S3
};

static const int8_t shuf4[2][32] __attribute__((aligned(32))) = {
#define S4(b)                                                                  \
	b, -1, b + 4, -1, b + 1, -1, b + 5, -1, b + 2, -1, b + 6, -1, b + 3,   \
		-1, b + 7, -1
	{ S4(0), S4(0) },
	{ S4(8), S4(8) },
#undef S4
};

/* Drop every fourth byte of each 128-bit half: RGBX to RGB. */
static const int8_t pack3[32] __attribute__((aligned(32))) = {
	0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
	0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
};

AVX2 static INLINE __m256i load2(const uint8_t *lo, const uint8_t *hi)
{
	return _mm256_inserti128_si256(
		_mm256_castsi128_si256(
			_mm_loadu_si128((const __m128i *)(const void *)lo)),
		_mm_loadu_si128((const __m128i *)(const void *)hi), 1);
}

/*
 * (H << 15) + L scaled back to pixels, see split(); L started at 1/2 for
 * the rounding.
 */
AVX2 static INLINE __m256i join(__m256i h, __m256i l)
{
	return _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(h, 15), l),
				 RSZ_BITS);
}

/*
 * Two outputs of 3 or 4 channels, one per 128-bit half: ngr groups of 4
 * taps, each from one 16-byte load, step bytes apart.
 */
AVX2 static INLINE __m256i hpair34(const uint8_t *r0, const uint8_t *r1,
				   const __m256i *w, uint32_t ngr, size_t step,
				   __m256i m0, __m256i m1)
{
	__m256i h = _mm256_setzero_si256(), l = _mm256_set1_epi32(RSZ_HALF);

	for (uint32_t g = 0; g < ngr; g++, w += 4) {
		__m256i px = load2(r0 + g * step, r1 + g * step);
		__m256i a = _mm256_shuffle_epi8(px, m0);
		__m256i b = _mm256_shuffle_epi8(px, m1);

		h = _mm256_add_epi32(
			h, _mm256_add_epi32(_mm256_madd_epi16(a, w[0]),
					    _mm256_madd_epi16(b, w[2])));
		l = _mm256_add_epi32(
			l, _mm256_add_epi32(_mm256_madd_epi16(a, w[1]),
					    _mm256_madd_epi16(b, w[3])));
	}
	return join(h, l);
}

/*
 * One block of 8 outputs of 3 or 4 channels. Pixel j reads row + (s[j] -
 * origin) * ch: origin is 0 for the row itself and the first pixel
 * copied for the padded tail.
 */
AVX2 static INLINE void hblock34(const uint8_t *row, uint32_t origin,
				 const uint32_t *s, const __m256i *w,
				 uint32_t ngr, unsigned ch, __m256i m0,
				 __m256i m1, uint8_t *out)
{
	size_t step = ch == 3 ? 12 : 16;
	__m256i v[4], px;

#pragma GCC unroll 4
	for (unsigned k = 0; k < 4; k++)
		v[k] = hpair34(row + (size_t)(s[k] - origin) * ch,
			       row + (size_t)(s[k + 4] - origin) * ch,
			       w + (size_t)k * 4 * ngr, ngr, step, m0, m1);
	/*
	 * Saturating packs are clip8(): the sums shifted down lie within
	 * 16 bits, and packus clamps them to 0..255. Halves hold outputs
	 * 0-3 and 4-7 in order after the two steps.
	 */
	px = _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]),
				 _mm256_packs_epi32(v[2], v[3]));
	if (ch == 4) {
		_mm256_storeu_si256((__m256i *)(void *)out, px);
		return;
	}
	px = _mm256_shuffle_epi8(
		px, _mm256_load_si256((const __m256i *)(const void *)pack3));
	px = _mm256_permutevar8x32_epi32(
		px, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7));
	_mm_storeu_si128((__m128i *)(void *)out, _mm256_castsi256_si128(px));
	_mm_storel_epi64((__m128i *)(void *)(out + 16),
			 _mm256_extracti128_si256(px, 1));
}

/* Eight 32-bit pixel sums, in order, to bytes. */
AVX2 static INLINE void store8(__m256i v, uint8_t *out)
{
	v = _mm256_packus_epi16(_mm256_packs_epi32(v, v),
				_mm256_setzero_si256());
	_mm_storel_epi64((__m128i *)(void *)out,
			 _mm_unpacklo_epi32(_mm256_castsi256_si128(v),
					    _mm256_extracti128_si256(v, 1)));
}

/*
 * 8 outputs of 1 channel by byte gathers: one 16-byte load per half, at
 * the lowest start of its 4 outputs, then per pair of taps a shuffle
 * into 16-bit pairs per output lane and the two multiply-adds.
 */
AVX2 static INLINE void hblock1g(const uint8_t *row, uint32_t origin,
				 const uint32_t *s, const __m256i *w,
				 uint32_t nq, uint8_t *out)
{
	__m256i px = load2(row + (min2(s[0], s[3]) - origin),
			   row + (min2(s[4], s[7]) - origin));
	__m256i h = _mm256_setzero_si256(), l = _mm256_set1_epi32(RSZ_HALF);

	for (uint32_t q = 0; q < nq; q++, w += 3) {
		__m256i a = _mm256_shuffle_epi8(px, w[0]);

		h = _mm256_add_epi32(h, _mm256_madd_epi16(a, w[1]));
		l = _mm256_add_epi32(l, _mm256_madd_epi16(a, w[2]));
	}
	store8(join(h, l), out);
}

/*
 * 8 outputs of 1 channel where gathers do not fit (shrinking by more
 * than about 3): vector k has 8 taps of one output per half, and
 * horizontal adds fold its lanes.
 */
AVX2 static INLINE void hblock1a(const uint8_t *row, uint32_t origin,
				 const uint32_t *s, const __m256i *w,
				 uint32_t ng, uint8_t *out)
{
	__m256i v[4], sum;

#pragma GCC unroll 4
	for (unsigned k = 0; k < 4; k++, w += 2 * ng) {
		__m256i h = _mm256_setzero_si256(), l = h;
		const uint8_t *r0 = row + (s[k] - origin);
		const uint8_t *r1 = row + (s[k + 4] - origin);

		for (uint32_t g = 0; g < ng; g++) {
			__m256i px = _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(
				_mm_loadl_epi64(
					(const __m128i *)(const void *)(r0 +
									8 * g)),
				_mm_loadl_epi64((
					const __m128i *)(const void *)(r1 +
								       8 * g))));

			h = _mm256_add_epi32(h,
					     _mm256_madd_epi16(px, w[2 * g]));
			l = _mm256_add_epi32(
				l, _mm256_madd_epi16(px, w[2 * g + 1]));
		}
		v[k] = _mm256_add_epi32(_mm256_slli_epi32(h, 15), l);
	}
	/* Three horizontal adds leave outputs 0-3 and 4-7 in the halves. */
	sum = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]),
				_mm256_hadd_epi32(v[2], v[3]));
	sum = _mm256_add_epi32(sum, _mm256_set1_epi32(RSZ_HALF));
	store8(_mm256_srai_epi32(sum, RSZ_BITS), out);
}

/*
 * 8 outputs of 3 channels by byte gathers: the block's 24 output bytes
 * are three vectors of 32-bit lanes, each half loading 16 bytes at the
 * offset the table's header gives, then per pair of taps a shuffle into
 * 16-bit pairs per lane and the two multiply-adds.
 */
AVX2 static INLINE void hblock3g(const uint8_t *row, uint32_t origin,
				 const uint32_t *s, const __m256i *w,
				 uint32_t nq, uint8_t *out)
{
	const uint8_t *r = row + (size_t)(min2(s[0], s[7]) - origin) * 3;
	uint16_t off[6];
	__m256i v[3], px;

	memcpy(off, w++, sizeof(off));
#pragma GCC unroll 3
	for (unsigned k = 0; k < 3; k++) {
		__m256i h = _mm256_setzero_si256();
		__m256i l = _mm256_set1_epi32(RSZ_HALF);

		px = load2(r + off[2 * k], r + off[2 * k + 1]);
		for (uint32_t q = 0; q < nq; q++, w += 3) {
			__m256i a = _mm256_shuffle_epi8(px, w[0]);

			h = _mm256_add_epi32(h, _mm256_madd_epi16(a, w[1]));
			l = _mm256_add_epi32(l, _mm256_madd_epi16(a, w[2]));
		}
		v[k] = join(h, l);
	}
	/* Halves hold bytes 0-3, 8-11, 16-19 (twice) and 4-7, 12-15, .... */
	px = _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]),
				 _mm256_packs_epi32(v[2], v[2]));
	px = _mm256_permutevar8x32_epi32(
		px, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
	_mm_storeu_si128((__m128i *)(void *)out, _mm256_castsi256_si128(px));
	_mm_storel_epi64((__m128i *)(void *)(out + 16),
			 _mm256_extracti128_si256(px, 1));
}

enum { HB34, HB1G, HB1A, HB3G };

AVX2 static INLINE void hblock(int kind, const uint8_t *row, uint32_t origin,
			       const uint32_t *s, const __m256i *w,
			       uint32_t groups, unsigned ch, __m256i m0,
			       __m256i m1, uint8_t *out)
{
	if (kind == HB34)
		hblock34(row, origin, s, w, groups, ch, m0, m1, out);
	else if (kind == HB1G)
		hblock1g(row, origin, s, w, groups, out);
	else if (kind == HB3G)
		hblock3g(row, origin, s, w, groups, out);
	else
		hblock1a(row, origin, s, w, groups, out);
}

/*
 * A row in blocks of 8 outputs, with kind, ch and groups constant after
 * inlining. Blocks whose loads would pass the row's end (the last one or
 * two, or the first with mirror) read a padded copy of its tail instead,
 * so nothing outside the row is ever read.
 */
AVX2 static INLINE void hrow_blocks(const struct rsz_plan *p, const uint8_t *in,
				    uint8_t *out, unsigned ch, int kind,
				    const void *tab, uint32_t groups)
{
	const struct rsz_axis *a = &p->x;
	const __m256i *w = tab;
	const int8_t(*m)[32] = ch == 3 ? shuf3 : shuf4;
	__m256i m0 = _mm256_load_si256((const __m256i *)(const void *)m[0]);
	__m256i m1 = _mm256_load_si256((const __m256i *)(const void *)m[1]);
	size_t row = (size_t)a->in * ch, per, reach;
	uint8_t pad[RSZ_PAD] __attribute__((aligned(32)));

	if (kind == HB34) {
		per = 16 * groups;
		reach = ch == 3 ? 12 * groups + 4 : 16 * groups;
	} else if (kind == HB1G) {
		per = 3 * groups;
		reach = 16;
	} else if (kind == HB3G) {
		/* A half starts at most 2 bytes past the highest start * 3. */
		per = 1 + 9 * groups;
		reach = 18;
	} else {
		per = 8 * groups;
		reach = 8 * groups;
	}
	for (uint32_t b = 0; b < blocks(a->out); b++, w += per) {
		uint32_t base = block_base(b, a->out);
		const uint32_t *s = a->start + base;
		uint32_t lo = min2(s[0], s[7]), hi = max2(s[0], s[7]);
		size_t need, have;

		if ((size_t)hi * ch + reach <= row) {
			hblock(kind, in, 0, s, w, groups, ch, m0, m1,
			       out + (size_t)base * ch);
			continue;
		}
		need = (size_t)(hi - lo) * ch + reach;
		have = row - (size_t)lo * ch;
		if (need <= sizeof(pad)) {
			memcpy(pad, in + (size_t)lo * ch, have);
			memset(pad + have, 0, need - have);
			hblock(kind, pad, lo, s, w, groups, ch, m0, m1,
			       out + (size_t)base * ch);
			continue;
		}
		for (uint32_t j = base; j < base + 8; j++)
			hpix(a, in, out, j, ch);
	}
}

/* The usual group counts get loops of their own, fully unrolled. */
AVX2 static void hrow1_avx2(const struct rsz_plan *p, const uint8_t *in,
			    uint8_t *out)
{
	if (!p->gather1)
		hrow_blocks(p, in, out, 1, HB1A, p->x1, p->g1);
	else if (p->g1 == 2)
		hrow_blocks(p, in, out, 1, HB1G, p->x1, 2);
	else
		hrow_blocks(p, in, out, 1, HB1G, p->x1, p->g1);
}

AVX2 static void hrow3_avx2(const struct rsz_plan *p, const uint8_t *in,
			    uint8_t *out)
{
	if (p->gather3 && p->g3 == 2)
		hrow_blocks(p, in, out, 3, HB3G, p->x3, 2);
	else if (p->gather3)
		hrow_blocks(p, in, out, 3, HB3G, p->x3, p->g3);
	else if (p->ngr == 1)
		hrow_blocks(p, in, out, 3, HB34, p->x34, 1);
	else if (p->ngr == 2)
		hrow_blocks(p, in, out, 3, HB34, p->x34, 2);
	else
		hrow_blocks(p, in, out, 3, HB34, p->x34, p->ngr);
}

AVX2 static void hrow4_avx2(const struct rsz_plan *p, const uint8_t *in,
			    uint8_t *out)
{
	if (p->ngr == 1)
		hrow_blocks(p, in, out, 4, HB34, p->x34, 1);
	else if (p->ngr == 2)
		hrow_blocks(p, in, out, 4, HB34, p->x34, 2);
	else
		hrow_blocks(p, in, out, 4, HB34, p->x34, p->ngr);
}

/*
 * One output row of the vertical pass, 32 bytes at a time with all taps
 * in registers: bytes of two lines are interleaved and zero-extended
 * into 16-bit pairs (line t, line t + 1), for vpmaddwd with the pair of
 * weights. A row not a multiple of 32 ends with a block overlapping the
 * one before, which only writes the same bytes again.
 */
AVX2 static void vrow_avx2(const struct rsz_plan *p, uint32_t j,
			   const struct rsz_lines *ln, uint8_t *d, size_t len,
			   int32_t *acc)
{
	const uint32_t *w = p->ypair + (size_t)j * p->ypairs * 2;
	uint32_t n = p->y.count[j];
	const __m256i z = _mm256_setzero_si256();
	const __m256i half = _mm256_set1_epi32(RSZ_HALF);

	if (len < 32) {
		vrow_c(p, j, ln, d, len, acc);
		return;
	}
	for (size_t i = 0;; i += 32) {
		__m256i h0 = z, h1 = z, h2 = z, h3 = z;
		__m256i l0 = half, l1 = half, l2 = half, l3 = half;
		uint32_t r = ln->first;

		if (i + 32 > len)
			i = len - 32;
		for (uint32_t t = 0; t < n; t += 2) {
			const uint8_t *la = ln->base + (size_t)r * ln->stride;
			const uint8_t *lb = la;
			__m256i a, b, x0, x1, u;
			__m256i wh = _mm256_set1_epi32((int)w[t]);
			__m256i wl = _mm256_set1_epi32((int)w[t + 1]);

			if (++r == ln->wrap)
				r = 0;
			/* An odd last tap pairs with its own line, weight 0. */
			if (t + 1 < n) {
				lb = ln->base + (size_t)r * ln->stride;
				if (++r == ln->wrap)
					r = 0;
			}
			a = _mm256_loadu_si256(
				(const __m256i *)(const void *)(la + i));
			b = _mm256_loadu_si256(
				(const __m256i *)(const void *)(lb + i));
			x0 = _mm256_unpacklo_epi8(a, b);
			x1 = _mm256_unpackhi_epi8(a, b);
			u = _mm256_unpacklo_epi8(x0, z);
			h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(u, wh));
			l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(u, wl));
			u = _mm256_unpackhi_epi8(x0, z);
			h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(u, wh));
			l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(u, wl));
			u = _mm256_unpacklo_epi8(x1, z);
			h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(u, wh));
			l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(u, wl));
			u = _mm256_unpackhi_epi8(x1, z);
			h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(u, wh));
			l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(u, wl));
		}
		/*
		 * The unpacks interleaved bytes 0-3, 4-7, 8-11, 12-15 (and
		 * 16-31 likewise in the high half); the packs restore the
		 * order.
		 */
		_mm256_storeu_si256(
			(__m256i *)(void *)(d + i),
			_mm256_packus_epi16(
				_mm256_packs_epi32(join(h0, l0), join(h1, l1)),
				_mm256_packs_epi32(join(h2, l2),
						   join(h3, l3))));
		if (i + 32 >= len)
			break;
	}
}
#endif

static const hrow_fn hrow_c_by_ch[5] = {
	[1] = hrow1,
	[3] = hrow3,
	[4] = hrow4,
};

#if RSZ_X86
static const hrow_fn hrow_avx2_by_ch[5] = {
	[1] = hrow1_avx2,
	[3] = hrow3_avx2,
	[4] = hrow4_avx2,
};
#endif

int rsz_run(const struct rsz_plan *p, const uint8_t *src, size_t src_stride,
	    uint8_t *dst, size_t dst_stride, unsigned channels, void *scratch)
{
	size_t in_row, out_row, xoff;
	uint8_t *ring = scratch;
	int32_t *acc;
	uint32_t next = 0;
	hrow_fn h = NULL;
	vrow_fn v = vrow_c;

	if (!channels_ok(channels))
		return -EINVAL;
	in_row = (size_t)p->x.in * channels;
	out_row = (size_t)p->x.out * channels;
	if (src_stride < in_row || dst_stride < out_row)
		return -EINVAL;
	xoff = (size_t)p->x.off * channels;
	h = hrow_c_by_ch[channels];
#if RSZ_X86
	if (p->simd) {
		/* Blocks of 8 outputs: fewer take the plain loop. */
		if (p->x.out >= 8)
			h = hrow_avx2_by_ch[channels];
		v = vrow_avx2;
	}
#endif

	/* Each output row is one input row: skip the vertical pass. */
	if (p->y.copy) {
		for (uint32_t r = 0; r < p->y.out; r++) {
			const uint8_t *s =
				src + (size_t)(p->y.off + r) * src_stride;
			uint8_t *d = dst + (size_t)r * dst_stride;

			if (p->x.copy)
				memcpy(d, s + xoff, out_row);
			else
				h(p, s, d);
		}
		return 0;
	}

	acc = (int32_t *)(void *)(ring + ring_bytes(p, channels));
	for (uint32_t j = 0; j < p->y.out; j++) {
		uint32_t lo = p->y.start[j], n = p->y.count[j];
		struct rsz_lines ln;

		if (p->x.copy) {
			ln.base = src + xoff;
			ln.stride = src_stride;
			ln.first = lo;
			ln.wrap = 0;
		} else {
			/*
			 * Resize the input rows this output needs that no
			 * earlier one did; the window guarantees that the
			 * older ones it shares with its predecessor are still
			 * in the ring.
			 */
			for (uint32_t r = lo > next ? lo : next; r < lo + n;
			     r++)
				h(p, src + (size_t)r * src_stride,
				  ring + (size_t)(r % p->y.window) * out_row);
			if (lo + n > next)
				next = lo + n;
			ln.base = ring;
			ln.stride = out_row;
			ln.first = lo % p->y.window;
			ln.wrap = p->y.window;
		}
		v(p, j, &ln, dst + (size_t)j * dst_stride, out_row, acc);
	}
	return 0;
}
