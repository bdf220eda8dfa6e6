/*
 * warp.c - the geometric stages' one resampling pass (see warp.h).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "warp.h"

#define DEG (M_PI / 180.0)

void warp_identity(double m[6])
{
	m[0] = 1, m[1] = 0, m[2] = 0;
	m[3] = 0, m[4] = 1, m[5] = 0;
}

void warp_compose(double m[6], const double a[6])
{
	double r[6];

	r[0] = m[0] * a[0] + m[1] * a[3];
	r[1] = m[0] * a[1] + m[1] * a[4];
	r[2] = m[0] * a[2] + m[1] * a[5] + m[2];
	r[3] = m[3] * a[0] + m[4] * a[3];
	r[4] = m[3] * a[1] + m[4] * a[4];
	r[5] = m[3] * a[2] + m[4] * a[5] + m[5];
	memcpy(m, r, sizeof(r));
}

/*
 * torchvision/transforms/functional.py, _get_inverse_affine_matrix(),
 * inverted=True: M^-1 = C * T^-1 * RSS^-1 * C^-1, RSS = R(a) S(s) SHy SHx.
 */
void warp_affine_inverse(double m[6], double cx, double cy, double angle,
			 double tx, double ty, double scale, double shx,
			 double shy)
{
	double rot = angle * DEG, sx = shx * DEG, sy = shy * DEG;
	double a = cos(rot - sy) / cos(sy);
	double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
	double c = sin(rot - sy) / cos(sy);
	double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);

	m[0] = d / scale, m[1] = -b / scale, m[2] = 0;
	m[3] = -c / scale, m[4] = a / scale, m[5] = 0;
	m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx;
	m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty) + cy;
}

/* How far beyond the crop fill context reaches, in grid steps per side. */
static int32_t context_reach(uint32_t s)
{
	return (int32_t)(s / 2);
}

void warp_reach(const struct ispec *sp, const double m[6], uint32_t s,
		int32_t lo[2], int32_t hi[2])
{
	static const double corner[4][2] = {
		{ 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 }
	};
	int32_t a = 0, b = (int32_t)s - 1;

	if (sp->fill == ISPEC_FILL_CONTEXT) {
		a = -context_reach(s);
		b = (int32_t)s - 1 + context_reach(s);
	}
	for (unsigned k = 0; k < 2; k++) {
		double mn = INFINITY, mx = -INFINITY;

		for (unsigned c = 0; c < 4; c++) {
			double x = corner[c][0] * s, y = corner[c][1] * s;
			double v = m[3 * k] * x + m[3 * k + 1] * y +
				   m[3 * k + 2] - 0.5;

			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
		}
		/* nearest, reflect and wrap fold every point inside */
		if (sp->fill == ISPEC_FILL_CONSTANT ||
		    sp->fill == ISPEC_FILL_CONTEXT) {
			mn = floor(mn) - 1;
			mx = ceil(mx) + 1;
			mn = mn < a ? a : mn > b ? b : mn;
			mx = mx < a ? a : mx > b ? b : mx;
			lo[k] = (int32_t)mn;
			hi[k] = (int32_t)mx;
		} else {
			lo[k] = a;
			hi[k] = b;
		}
	}
}

/*
 * One axis's filter windows: grid index lo + i reads n[i] source pixels
 * from start[i] with weights w[i * taps ...].
 */
struct axis {
	int32_t lo, count, taps;
	int32_t *start, *n;
	float *w;
};

static size_t axis_bytes(uint32_t cols, uint32_t taps)
{
	return (size_t)cols * (2 * sizeof(int32_t) + taps * sizeof(float));
}

/* Point ax's arrays into mem (axis_bytes() of it). */
static void axis_carve(struct axis *ax, void *mem)
{
	ax->start = mem;
	ax->n = ax->start + ax->count;
	ax->w = (void *)(ax->n + ax->count);
}

/* The widest window a region of max_side pixels resized to s can need:
 * the triangle spans twice the scale, plus the pixels it touches. */
static uint32_t max_taps(uint32_t max_side, uint32_t s)
{
	return 2 * ((max_side + s - 1) / s) + 4;
}

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/*
 * The floats a grid column's padded window holds (warp_run()): its own
 * taps and the next column's, which starts at most a scale (plus one, for
 * the rounding) further on, in whole vectors of eight.
 */
static uint32_t max_span(uint32_t max_side, uint32_t s)
{
	return (uint32_t)round8(max_taps(max_side, s) + (max_side + s - 1) / s +
				1);
}

size_t warp_scratch_bytes(uint32_t s, uint32_t max_cols, uint32_t max_side)
{
	uint32_t taps = max_taps(max_side, s), span = max_span(max_side, s);

	return 2 * axis_bytes(max_cols, taps) +
	       (size_t)max_cols * sizeof(int32_t) +
	       (size_t)max_cols * 2 * span * sizeof(float) +
	       (size_t)max_cols * 3 * (round8(max_side) + span) *
		       sizeof(float) +
	       64;
}

static float tri(double x)
{
	x = fabs(x);
	return x < 1 ? (float)(1 - x) : 0;
}

/*
 * PIL's precompute_coeffs() (Resample.c) for grid indices lo..lo+count-1
 * of an axis whose crop spans [b0, b1) of in pixels resized to s: the
 * antialiased triangle centred at b0 + (g + 0.5) * scale, clipped to the
 * pixels and normalized. A centre off the pixels (fill context beyond
 * the image) is pulled back onto the edge pixel's centre.
 */
static int axis_build(struct axis *ax, double b0, double b1, uint32_t s,
		      uint32_t in)
{
	double scale = (b1 - b0) / s, fs = scale > 1 ? scale : 1;
	double support = fs, ss = 1.0 / fs;

	for (int32_t i = 0; i < ax->count; i++) {
		double c = b0 + (ax->lo + i + 0.5) * scale, ww = 0;
		int32_t x0, x1;
		float *w = ax->w + (size_t)i * ax->taps;

		if (c < 0.5)
			c = 0.5;
		if (c > in - 0.5)
			c = in - 0.5;
		x0 = (int32_t)(c - support + 0.5);
		x1 = (int32_t)(c + support + 0.5);
		if (x0 < 0)
			x0 = 0;
		if (x1 > (int32_t)in)
			x1 = (int32_t)in;
		if (x1 - x0 > ax->taps)
			return -ENOSPC;
		for (int32_t x = x0; x < x1; x++) {
			double k = tri((x - c + 0.5) * ss);

			w[x - x0] = (float)k;
			ww += k;
		}
		for (int32_t x = x0; x < x1; x++)
			w[x - x0] = ww != 0 ? (float)(w[x - x0] / ww) : 0;
		ax->start[i] = x0;
		ax->n[i] = x1 - x0;
	}
	return 0;
}

/*
 * A grid index outside the crop (or outside [a, b]) through the fill
 * mode: an index in [a, b], or -1 for the constant fill (the only mode
 * that has no index to give).
 */
static int32_t fold_out(int32_t g, int32_t s, int32_t a, int32_t b,
			uint8_t fill)
{
	switch (fill) {
	case ISPEC_FILL_CONSTANT: return g >= a && g <= b ? g : -1;
	case ISPEC_FILL_NEAREST: g = g < 0 ? 0 : g >= s ? s - 1 : g; break;
	case ISPEC_FILL_REFLECT: {
		int32_t p = 2 * s;

		g %= p;
		if (g < 0)
			g += p;
		if (g >= s)
			g = p - 1 - g;
		break;
	}
	case ISPEC_FILL_WRAP:
		g %= s;
		if (g < 0)
			g += s;
		break;
	default: break; /* context: clamped to what was read */
	}
	return g < a ? a : g > b ? b : g;
}

/* A grid index through the fill mode (fold_out()), inside at once. */
static inline int32_t fold(int32_t g, int32_t s, int32_t a, int32_t b,
			   uint8_t fill)
{
	if (g >= a && g <= b && g >= 0 && g < s)
		return g;
	return fold_out(g, s, a, b, fill);
}

/*
 * Vectors of the compiler's (SSE on x86-64, whatever the target has
 * elsewhere): eight floats of a row, the four of a pixel (RGB and a lane
 * that is never used), two pixels' points in double. The output loop is
 * compiled twice, for AVX2 and for the baseline, from the same code:
 * each lane's arithmetic written out, sums in a fixed order, multiplies
 * and adds separate (no FMA is enabled), so both round the same way and
 * give the same bytes. Eight-float vectors never cross a call (the
 * baseline's ABI passes them in memory, and GCC warns of that): the
 * helpers are inlined and take pointers.
 */
typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));

#if defined(__clang__) || __GNUC__ >= 12
#define SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int32_t v8i __attribute__((vector_size(32)));
#define SHUF8(a, b, ...) __builtin_shuffle(a, b, (v8i){ __VA_ARGS__ })
#endif

#define INLINE	   static inline __attribute__((always_inline))
#define LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define SPLAT8(f)  ((v8f){ (f), (f), (f), (f), (f), (f), (f), (f) })

/*
 * What a pass's two halves share. V, the vertical half of the crop's
 * filter, holds a row per grid row the map reaches, over the source
 * columns its grid columns read: planes of pstride floats (R, G, B; one
 * for gray), zero past the last column, so that a window's full vectors
 * may run over the end. Grid column i's window starts at V column off[i];
 * pair holds, per grid column, 2 * span floats: its weights from there,
 * zero-padded, then column i + 1's weights placed from the same start, so
 * that bilinear's two columns weigh one span of V.
 */
struct pass {
	const struct warp_src *src;
	const struct axis *ay;
	const double *m;
	const int32_t *off;
	const float *pair;
	float *v;
	uint8_t *out;
	size_t pstride, vstride;
	int32_t clo, ncols;	/* V column 0 is source column clo */
	int32_t lo[2], hi[2];	/* the grid the map reaches */
	uint32_t s, span, nvec; /* nvec: span / 8 */
	unsigned planes;
	uint8_t fill;
	bool bilinear;
	v4f fillv;
};

/*
 * The vertical half: each V row is its grid row's window of source rows,
 * weighed, a sum in tap order per column. The portable loop; the AVX2 one
 * (vpass_avx2()) does each column's arithmetic the same way.
 */
static void vpass_cols(const struct pass *p, int32_t k, int32_t x, int32_t n)
{
	const struct warp_src *src = p->src;
	const struct axis *ay = p->ay;
	const float *w = ay->w + (size_t)k * ay->taps;
	const uint8_t *row = src->px + (size_t)ay->start[k] * src->stride +
			     (size_t)p->clo * src->ch;
	float *vr = p->v + (size_t)k * p->vstride;

	for (; x < n; x++) {
		const uint8_t *px = row + src->ch * (size_t)x;
		float a[3] = { 0, 0, 0 };

		for (int32_t t = 0; t < ay->n[k]; t++, px += src->stride) {
			for (unsigned c = 0; c < src->ch; c++)
				a[c] += w[t] * (float)px[c];
		}
		for (unsigned c = 0; c < src->ch; c++)
			vr[c * p->pstride + (size_t)x] = a[c];
	}
}

/* Zero V row k past its last column, for the windows' last vectors. */
static void vpass_pad(const struct pass *p, int32_t k)
{
	float *vr = p->v + (size_t)k * p->vstride;

	for (unsigned c = 0; c < p->planes; c++)
		memset(vr + c * p->pstride + p->ncols, 0,
		       (p->pstride - (size_t)p->ncols) * sizeof(float));
}

static void vpass_base(const struct pass *p)
{
	for (int32_t k = 0; k < p->ay->count; k++) {
		vpass_cols(p, k, 0, p->ncols);
		vpass_pad(p, k);
	}
}

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2")))

/* Eight bytes as eight floats. */
AVX2 static inline __m256 bytes8(const uint8_t *px)
{
	__m128i b = _mm_loadl_epi64((const __m128i *)(const void *)px);

	return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
}

/*
 * Eight columns at a time: RGB as three vectors of interleaved floats,
 * then as three planes. In a, b and c, R sits in lanes {0, 3, 6}, {1, 4,
 * 7} and {2, 5}, G and B likewise one and two lanes on: each plane is
 * one blend of the three, its lanes then put in order.
 */
AVX2 static void vpass_avx2(const struct pass *p)
{
	const struct warp_src *src = p->src;
	const struct axis *ay = p->ay;
	int32_t n = p->ncols, n8 = n < 8 ? 0 : n;
	size_t ps = p->pstride, stride = src->stride;
	const __m256i ir = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
	const __m256i ig = _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6);
	const __m256i ib = _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7);

	for (int32_t k = 0; k < ay->count; k++) {
		float *vr = p->v + (size_t)k * p->vstride;
		const float *w = ay->w + (size_t)k * ay->taps;
		const uint8_t *row = src->px + (size_t)ay->start[k] * stride +
				     (size_t)p->clo * src->ch;
		int32_t nt = ay->n[k];

		/* the last eight end at the last column, again over some */
		for (int32_t i = 0; src->ch == 3 && i < n8; i += 8) {
			int32_t x = i < n - 8 ? i : n - 8;
			const uint8_t *px = row + 3 * (size_t)x;
			__m256 a = _mm256_setzero_ps(), b = a, c = a, r, g, l;

			for (int32_t t = 0; t < nt; t++, px += stride) {
				__m256 wv = _mm256_set1_ps(w[t]);

				a = _mm256_add_ps(
					a, _mm256_mul_ps(wv, bytes8(px)));
				b = _mm256_add_ps(
					b, _mm256_mul_ps(wv, bytes8(px + 8)));
				c = _mm256_add_ps(
					c, _mm256_mul_ps(wv, bytes8(px + 16)));
			}
			r = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x92), c,
					    0x24);
			g = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x24), c,
					    0x49);
			l = _mm256_blend_ps(_mm256_blend_ps(a, b, 0x49), c,
					    0x92);
			_mm256_storeu_ps(vr + x,
					 _mm256_permutevar8x32_ps(r, ir));
			_mm256_storeu_ps(vr + ps + x,
					 _mm256_permutevar8x32_ps(g, ig));
			_mm256_storeu_ps(vr + 2 * ps + x,
					 _mm256_permutevar8x32_ps(l, ib));
		}
		for (int32_t i = 0; src->ch == 1 && i < n8; i += 8) {
			int32_t x = i < n - 8 ? i : n - 8;
			const uint8_t *px = row + x;
			__m256 a = _mm256_setzero_ps();

			for (int32_t t = 0; t < nt; t++, px += stride)
				a = _mm256_add_ps(
					a, _mm256_mul_ps(_mm256_set1_ps(w[t]),
							 bytes8(px)));
			_mm256_storeu_ps(vr + x, a);
		}
		if (!n8)
			vpass_cols(p, k, 0, n);
		vpass_pad(p, k);
	}
}
#endif

/*
 * Lane sums. Every one is ((0 + 2) + (1 + 3)) + ((4 + 6) + (5 + 7)), so
 * that a pixel's bytes do not depend on which of these gives them.
 */
#define SUM2(a, b)                                                             \
	(SHUF8(a, b, 0, 1, 8, 9, 4, 5, 12, 13) +                               \
	 SHUF8(a, b, 2, 3, 10, 11, 6, 7, 14, 15))
#define SUM4(a, b)                                                             \
	(SHUF8(a, b, 0, 2, 8, 10, 4, 6, 12, 14) +                              \
	 SHUF8(a, b, 1, 3, 9, 11, 5, 7, 13, 15))

/* The low four lanes plus the high four. */
INLINE v4f halves(const v8f *a)
{
	v4f lo, hi;

	memcpy(&lo, a, sizeof(lo));
	memcpy(&hi, (const char *)a + sizeof(lo), sizeof(hi));
	return lo + hi;
}

/* One pixel's three vectors: [r g b b]. */
INLINE v4f hsum3(const v8f *r, const v8f *g, const v8f *b)
{
	v8f t0 = SUM2(*r, *g), t1 = SUM2(*b, *b), t = SUM4(t0, t1);

	return halves(&t);
}

/* Two pixels' six vectors: *p0 = [r g b r'], *p1 = [g' b' g' b']. */
INLINE void hsum6(const v8f *r, const v8f *g, const v8f *b, const v8f *r2,
		  const v8f *g2, const v8f *b2, v4f *p0, v4f *p1)
{
	v8f t0 = SUM2(*r, *g), t1 = SUM2(*b, *r2), t2 = SUM2(*g2, *b2);
	v8f u0 = SUM4(t0, t1), u1 = SUM4(t2, t2);

	*p0 = halves(&u0);
	*p1 = halves(&u1);
}

/*
 * Bytes from the lanes of a, then b: rounded half to even (as
 * torch.round) and clamped, n of them (3 or 6) or, where room says the
 * bytes after those are still to be written, 8.
 */
static inline void store_px(uint8_t *o, v4f a, v4f b, size_t n, bool room)
{
#if defined(__SSE2__)
	__m128i i = _mm_packs_epi32(_mm_cvtps_epi32((__m128)a),
				    _mm_cvtps_epi32((__m128)b));
	uint8_t q[8];

	i = _mm_packus_epi16(i, i); /* MXCSR: nearest even */
	if (room) {
		_mm_storel_epi64((__m128i *)(void *)o, i);
		return;
	}
	_mm_storel_epi64((__m128i *)(void *)q, i);
	memcpy(o, q, n);
#else
	float f[8];

	memcpy(f, &a, sizeof(a));
	memcpy(f + 4, &b, sizeof(b));
	for (size_t c = 0; c < n; c++) {
		float v = nearbyintf(f[c]);

		o[c] = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
	}
	(void)room;
#endif
}

/* *acc = t, or (acc) *acc += t. */
#define ACC(acc, first, t) (*(acc) = (first) ? (t) : *(acc) + (t))

/*
 * One grid point, column lo[0] + i and row lo[1] + k, both read: its
 * column's window times its row of V, lane by lane, in *r, *g and *b (a
 * plane each; gray: *r only). point_vec() is one vector of it, from j.
 */
INLINE void point_vec(const struct pass *p, const float *pw, const float *q,
		      size_t j, bool gray, bool first, v8f *r, v8f *g, v8f *b)
{
	v8f w, t;

	LOAD(w, pw + j);
	LOAD(t, q + j);
	ACC(r, first, w * t);
	if (gray)
		return;
	LOAD(t, q + p->pstride + j);
	ACC(g, first, w * t);
	LOAD(t, q + 2 * p->pstride + j);
	ACC(b, first, w * t);
}

INLINE void point(const struct pass *p, const float *pw, const float *q,
		  unsigned nvec, bool gray, v8f *r, v8f *g, v8f *b)
{
	point_vec(p, pw, q, 0, gray, true, r, g, b);
	for (unsigned j = 1; j < nvec; j++)
		point_vec(p, pw, q, 8 * (size_t)j, gray, false, r, g, b);
}

/*
 * Bilinear as a separable kernel: grid column lo[0] + i's window and the
 * next one's, weighed x0 and x1 into one (pair), times two rows of V
 * (from r0 and r1, the window's start in each) weighed y0 and y1 into
 * one; lane by lane, in *r, *g and *b. sep_vec() is one vector of it.
 */
INLINE void sep_vec(const struct pass *p, const float *pa, const float *pb,
		    const float *r0, const float *r1, const float k[4],
		    size_t j, bool gray, bool first, v8f *r, v8f *g, v8f *b)
{
	v8f u, v, w, x0 = SPLAT8(k[0]), x1 = SPLAT8(k[1]);
	v8f y0 = SPLAT8(k[2]), y1 = SPLAT8(k[3]);
	size_t ps = p->pstride;

	LOAD(u, pa + j);
	LOAD(v, pb + j);
	w = x0 * u + x1 * v;
	LOAD(u, r0 + j);
	LOAD(v, r1 + j);
	ACC(r, first, w * (y0 * u + y1 * v));
	if (gray)
		return;
	LOAD(u, r0 + ps + j);
	LOAD(v, r1 + ps + j);
	ACC(g, first, w * (y0 * u + y1 * v));
	LOAD(u, r0 + 2 * ps + j);
	LOAD(v, r1 + 2 * ps + j);
	ACC(b, first, w * (y0 * u + y1 * v));
}

INLINE void sep(const struct pass *p, const float *pw, const float *r0,
		const float *r1, float x0, float x1, float y0, float y1,
		unsigned nvec, bool gray, v8f *r, v8f *g, v8f *b)
{
	const float k[4] = { x0, x1, y0, y1 };

	sep_vec(p, pw, pw + 8 * nvec, r0, r1, k, 0, gray, true, r, g, b);
	for (unsigned j = 1; j < nvec; j++)
		sep_vec(p, pw, pw + 8 * nvec, r0, r1, k, 8 * (size_t)j, gray,
			false, r, g, b);
}

/* A pixel's sums: [r g b b]. */
INLINE v4f sums(const v8f *r, const v8f *g, const v8f *b, bool gray)
{
	return gray ? hsum3(r, r, r) : hsum3(r, g, b);
}

/* V row lo[1] + k from grid column lo[0] + i's window's start. */
INLINE const float *vrow(const struct pass *p, int32_t i, int32_t k)
{
	return p->v + (size_t)k * p->vstride + p->off[i];
}

/* Grid column lo[0] + i's padded windows (pair). */
INLINE const float *pair_of(const struct pass *p, int32_t i, unsigned nvec)
{
	return p->pair + (size_t)i * 16 * nvec;
}

/*
 * Bilinear where the constant fill takes some of the grid points: those
 * the fill's weight, the rest their own.
 */
INLINE v4f bilinear_mixed(const struct pass *p, const int32_t gx[2],
			  const int32_t gy[2], const float bx[2],
			  const float by[2], unsigned nvec, bool gray)
{
	v4f acc = { 0, 0, 0, 0 };
	float wf = 0;

	for (unsigned k = 0; k < 2; k++) {
		v4f row = { 0, 0, 0, 0 };

		if (gy[k] < 0) {
			wf += by[k];
			continue;
		}
		for (unsigned i = 0; i < 2; i++) {
			v8f r, g = { 0 }, b = { 0 };

			if (gx[i] < 0) {
				wf += bx[i] * by[k];
				continue;
			}
			point(p, pair_of(p, gx[i] - p->lo[0], nvec),
			      vrow(p, gx[i] - p->lo[0], gy[k] - p->lo[1]), nvec,
			      gray, &r, &g, &b);
			row += (v4f){ bx[i], bx[i], bx[i], bx[i] } *
			       sums(&r, &g, &b, gray);
		}
		acc += (v4f){ by[k], by[k], by[k], by[k] } * row;
	}
	return acc + (v4f){ wf, wf, wf, wf } * p->fillv;
}

/*
 * Bilinear near the crop's edge, each of the (up to four) grid points
 * through the fill mode, where aim() gives no kernel: the constant fill's
 * edge, the fill weighed in for the points it takes, and wrap's seam, a
 * window each for two columns apart (the rest as aim()).
 */
INLINE v4f bilinear_out(const struct pass *p, int32_t gx0, int32_t gy0,
			float fx, float fy, unsigned nvec, bool gray)
{
	int32_t s = (int32_t)p->s, gx[2] = { gx0, gx0 + 1 };
	int32_t gy[2] = { gy0, gy0 + 1 }, c0, c1, k0, k1;
	float bx[2] = { 1 - fx, fx }, by[2] = { 1 - fy, fy }, x0, x1;
	v8f r, g = { 0 }, b = { 0 }, r2, g2 = { 0 }, b2 = { 0 };

	/* a zero fraction weighs nothing on the second point: not read */
	gx[0] = fold(gx[0], s, p->lo[0], p->hi[0], p->fill);
	gy[0] = fold(gy[0], s, p->lo[1], p->hi[1], p->fill);
	gx[1] = fx != 0 ? fold(gx[1], s, p->lo[0], p->hi[0], p->fill) : gx[0];
	gy[1] = fy != 0 ? fold(gy[1], s, p->lo[1], p->hi[1], p->fill) : gy[0];
	if (p->fill == ISPEC_FILL_CONSTANT &&
	    (gx[0] < 0 || gx[1] < 0 || gy[0] < 0 || gy[1] < 0)) {
		if ((gx[0] < 0 && gx[1] < 0) || (gy[0] < 0 && gy[1] < 0))
			return p->fillv;
		return bilinear_mixed(p, gx, gy, bx, by, nvec, gray);
	}
	k0 = gy[0] - p->lo[1], k1 = gy[1] - p->lo[1];
	c0 = gx[0] - p->lo[0], c1 = gx[1] - p->lo[0];
	if (c0 - c1 > 1 || c1 - c0 > 1) {
		/* apart (wrapped): a window each */
		sep(p, pair_of(p, c0, nvec), vrow(p, c0, k0), vrow(p, c0, k1),
		    bx[0], 0, by[0], by[1], nvec, gray, &r, &g, &b);
		sep(p, pair_of(p, c1, nvec), vrow(p, c1, k0), vrow(p, c1, k1),
		    bx[1], 0, by[0], by[1], nvec, gray, &r2, &g2, &b2);
		return sums(&r, &g, &b, gray) + sums(&r2, &g2, &b2, gray);
	}
	/* one column, or two next to each other in either order */
	x0 = c0 < c1 ? bx[0] : c0 > c1 ? bx[1] : bx[0] + bx[1];
	x1 = c0 < c1 ? bx[1] : c0 > c1 ? bx[0] : 0;
	c0 = c0 < c1 ? c0 : c1;
	sep(p, pair_of(p, c0, nvec), vrow(p, c0, k0), vrow(p, c0, k1), x0, x1,
	    by[0], by[1], nvec, gray, &r, &g, &b);
	return sums(&r, &g, &b, gray);
}

/* Nearest near the crop's edge: the grid point through the fill mode. */
INLINE v4f nearest_out(const struct pass *p, int32_t gx, int32_t gy,
		       unsigned nvec, bool gray)
{
	int32_t s = (int32_t)p->s;
	v8f r, g = { 0 }, b = { 0 };

	gx = fold(gx, s, p->lo[0], p->hi[0], p->fill);
	gy = fold(gy, s, p->lo[1], p->hi[1], p->fill);
	if (p->fill == ISPEC_FILL_CONSTANT && (gx < 0 || gy < 0))
		return p->fillv;
	point(p, pair_of(p, gx - p->lo[0], nvec),
	      vrow(p, gx - p->lo[0], gy - p->lo[1]), nvec, gray, &r, &g, &b);
	return sums(&r, &g, &b, gray);
}

/*
 * Where an output pixel's point falls: the grid point (bilinear: the
 * first of four) as a column and row of V and the pair table (grid
 * column lo[0] + gx, row lo[1] + gy), and the fractions past it.
 */
struct at {
	int32_t gx, gy;
	float fx, fy;
};

/*
 * Two pixels' points, xy = [x y x' y'] in grid-index coordinates (half a
 * pixel less than area ones), as their grid points and fractions: rounded
 * half to even (nearest, as torch's nearbyint) by adding and taking away
 * 2^52 + 2^51, which rounds in double whatever the instruction set, and
 * floored (bilinear) from there.
 */
INLINE void locate2(const v4d *xy, bool bilinear, struct at *a, struct at *b,
		    v4i *gi)
{
	const v4d big = { 0x1.8p52, 0x1.8p52, 0x1.8p52, 0x1.8p52 };
	const v4d one = { 1, 1, 1, 1 };
	v4d r = (*xy + big) - big;
	v4i g;
	v4f f = { 0, 0, 0, 0 };

	if (bilinear) {
		r -= (v4d)((v4l)one & (r > *xy));
		f = __builtin_convertvector(*xy - r, v4f);
	}
	g = __builtin_convertvector(r, v4i);
	*gi = g;
	a->gx = g[0], a->gy = g[1], a->fx = f[0], a->fy = f[1];
	b->gx = g[2], b->gy = g[3], b->fx = f[2], b->fy = f[3];
}

/*
 * Whether all of the grid points at a are read as they are: those the
 * map reaches, since the reach never takes in more than fold() leaves
 * alone. The first point's index is below lim (the count, one less for
 * bilinear, whose second point is one on).
 */
INLINE bool inside_at(const struct at *a, const v4i *lim)
{
	return (uint32_t)a->gx < (uint32_t)(*lim)[0] &&
	       (uint32_t)a->gy < (uint32_t)(*lim)[1];
}

/* Whether both pixels of locate2()'s g are inside_at(). */
INLINE bool inside2(const v4i *g, const v4i *lim)
{
	v4i in = (v4i)((v4u)*g < (v4u)*lim);
	uint64_t w[2];

	memcpy(w, &in, sizeof(w));
	return (w[0] & w[1]) == ~(uint64_t)0;
}

/*
 * Whether the grid points at a are all off the grid on one side, that is
 * (for the constant fill) all the fill.
 */
INLINE bool off_grid(const struct pass *p, const struct at *a, bool bilinear)
{
	int32_t r = bilinear ? 1 : 0;

	return a->gx < -r || a->gx > p->hi[0] - p->lo[0] || a->gy < -r ||
	       a->gy > p->hi[1] - p->lo[1];
}

/*
 * A pixel's separable kernel: grid column lo[0] + c's windows (pair),
 * weighed x0 and x1, over V rows from r0 and r1, weighed y0 and y1
 * (nearest: the first window over r0).
 */
struct kern {
	int32_t c;
	const float *r0, *r1;
	float x0, x1, y0, y1;
};

/*
 * aim() for fill nearest, whose reach is the whole grid (lo is 0): each
 * point clamped onto it, with no branch. Columns clamped onto one take
 * both weights on it; the second column (and row) is never left of the
 * first. The same kernel as fold() gives.
 */
INLINE bool aim_clamped(const struct pass *p, const struct at *a, float bx0,
			float bx1, struct kern *k)
{
	int32_t s1 = (int32_t)p->s - 1, c0, c1, k0, k1;

	c0 = a->gx < 0 ? 0 : a->gx > s1 ? s1 : a->gx;
	c1 = a->gx + 1 < 0 ? 0 : a->gx + 1 > s1 ? s1 : a->gx + 1;
	k0 = a->gy < 0 ? 0 : a->gy > s1 ? s1 : a->gy;
	k1 = a->gy + 1 < 0 ? 0 : a->gy + 1 > s1 ? s1 : a->gy + 1;
	/* a zero fraction weighs nothing on the second point: not read */
	c1 = a->fx != 0 ? c1 : c0;
	k1 = a->fy != 0 ? k1 : k0;
	k->x0 = c0 < c1 ? bx0 : bx0 + bx1;
	k->x1 = c0 < c1 ? bx1 : 0;
	k->c = c0;
	k->r0 = vrow(p, c0, k0);
	k->r1 = vrow(p, c0, k1);
	return true;
}

/*
 * The kernel of the pixel at a: one whose grid points are all read as
 * they are (in), or, through a fill that folds, whose columns fall on one
 * or two next to each other (rows may fall anywhere). false where the
 * general path must take the pixel: the constant fill's edge and wrap's
 * seam.
 */
INLINE bool aim(const struct pass *p, const struct at *a, bool in,
		bool bilinear, struct kern *k)
{
	int32_t s = (int32_t)p->s, c0, c1, k0, k1;
	float bx0 = 1 - a->fx, bx1 = a->fx;

	k->y0 = 1 - a->fy, k->y1 = a->fy;
	if (in) {
		k->c = a->gx;
		k->r0 = vrow(p, a->gx, a->gy);
		k->r1 = bilinear ? k->r0 + p->vstride : k->r0;
		k->x0 = bx0, k->x1 = bx1;
		return true;
	}
	if (p->fill == ISPEC_FILL_CONSTANT)
		return false;
	if (p->fill == ISPEC_FILL_NEAREST)
		return aim_clamped(p, a, bx0, bx1, k);
	/* a zero fraction weighs nothing on the second point: not read */
	c0 = fold(a->gx + p->lo[0], s, p->lo[0], p->hi[0], p->fill) - p->lo[0];
	k0 = fold(a->gy + p->lo[1], s, p->lo[1], p->hi[1], p->fill) - p->lo[1];
	c1 = a->fx != 0 ? fold(a->gx + 1 + p->lo[0], s, p->lo[0], p->hi[0],
			       p->fill) -
				  p->lo[0] :
			  c0;
	k1 = a->fy != 0 ? fold(a->gy + 1 + p->lo[1], s, p->lo[1], p->hi[1],
			       p->fill) -
				  p->lo[1] :
			  k0;
	if (c0 - c1 > 1 || c1 - c0 > 1)
		return false;
	k->x0 = c0 < c1 ? bx0 : c0 > c1 ? bx1 : bx0 + bx1;
	k->x1 = c0 < c1 ? bx1 : c0 > c1 ? bx0 : 0;
	k->c = c0 < c1 ? c0 : c1;
	k->r0 = vrow(p, k->c, k0);
	k->r1 = vrow(p, k->c, k1);
	return true;
}

/* A pixel's kernel, lane by lane: sums() of them is its value. */
INLINE void apply(const struct pass *p, const struct kern *k, unsigned nvec,
		  bool gray, bool bilinear, v8f *r, v8f *g, v8f *b)
{
	const float *pw = pair_of(p, k->c, nvec);

	if (bilinear)
		sep(p, pw, k->r0, k->r1, k->x0, k->x1, k->y0, k->y1, nvec, gray,
		    r, g, b);
	else
		point(p, pw, k->r0, nvec, gray, r, g, b);
}

/* Any pixel: [r g b b]. */
INLINE v4f pixel(const struct pass *p, const struct at *a, bool in,
		 unsigned nvec, bool gray, bool bilinear)
{
	v8f r, g = { 0 }, b = { 0 };
	struct kern k;

	if (aim(p, a, in, bilinear, &k)) {
		apply(p, &k, nvec, gray, bilinear, &r, &g, &b);
		return sums(&r, &g, &b, gray);
	}
	return bilinear ? bilinear_out(p, a->gx + p->lo[0], a->gy + p->lo[1],
				       a->fx, a->fy, nvec, gray) :
			  nearest_out(p, a->gx + p->lo[0], a->gy + p->lo[1],
				      nvec, gray);
}

/*
 * Any pixel, its case known at run time: a call of its own (one copy per
 * instruction set), since the output loop calls it only near the crop's
 * edge.
 */
typedef v4f pixel_fn(const struct pass *p, struct at a, bool in);

INLINE v4f pixel_any(const struct pass *p, struct at a, bool in)
{
	if (p->nvec == 1 && p->planes == 3)
		return p->bilinear ? pixel(p, &a, in, 1, false, true) :
				     pixel(p, &a, in, 1, false, false);
	return pixel(p, &a, in, p->nvec, p->planes == 1, p->bilinear);
}

/*
 * The output pixels, each at its inverse-mapped point, stepped along the
 * row, two at a time. Two pixels that aim() gives kernels are summed
 * together; the rest, one by one, by the general path (one, the same
 * instruction set's), the constant fill's own pixels at once.
 */
INLINE void pixels_body(const struct pass *pp, unsigned nvec, bool gray,
			bool bilinear, pixel_fn *one)
{
	/*
	 * A copy that the byte stores cannot touch (as far as the compiler
	 * knows), so that none of it is read again after each pixel.
	 */
	const struct pass c = *pp, *p = &c;
	const double m[6] = { p->m[0], p->m[1], p->m[2],
			      p->m[3], p->m[4], p->m[5] };
	uint8_t *end = p->out + (size_t)p->s * p->s * 3;
	/* how many first grid points have all theirs inside, per axis */
	int32_t nx = p->hi[0] - p->lo[0] + !bilinear;
	int32_t ny = p->hi[1] - p->lo[1] + !bilinear;
	v4i lim = { nx, ny, nx, ny };
	v4f zero = { 0, 0, 0, 0 };
	v4d step = { 2 * m[0], 2 * m[3], 2 * m[0], 2 * m[3] };
	bool constant = p->fill == ISPEC_FILL_CONSTANT;

	for (uint32_t v = 0; v < p->s; v++) {
		double x =
			m[0] * 0.5 + m[1] * (v + 0.5) + m[2] - 0.5 - p->lo[0];
		double y =
			m[3] * 0.5 + m[4] * (v + 0.5) + m[5] - 0.5 - p->lo[1];
		v4d xy = { x, y, x + m[0], y + m[3] };
		uint8_t *o = p->out + (size_t)v * p->s * 3;
		uint32_t u = 0;
		struct at a, b;
		v4i gi;

		/*
		 * Each pair's points are found an iteration ahead, so that
		 * its loads need not wait for them (the last, past the row,
		 * is not used).
		 */
		locate2(&xy, bilinear, &a, &b, &gi);
		for (; u + 2 <= p->s; u += 2, o += 6) {
			struct at na, nb;
			struct kern ka, kb;
			v8f r, g, l, r2, g2, l2;
			v4f lo, hi;
			v4i ngi;
			bool ok;

			xy += step;
			locate2(&xy, bilinear, &na, &nb, &ngi);
			if (inside2(&gi, &lim)) {
				aim(p, &a, true, bilinear, &ka);
				aim(p, &b, true, bilinear, &kb);
				ok = true;
			} else {
				ok = !constant &&
				     aim(p, &a, inside_at(&a, &lim), bilinear,
					 &ka) &&
				     aim(p, &b, inside_at(&b, &lim), bilinear,
					 &kb);
			}
			if (ok) {
				apply(p, &ka, nvec, gray, bilinear, &r, &g, &l);
				apply(p, &kb, nvec, gray, bilinear, &r2, &g2,
				      &l2);
				if (gray)
					hsum6(&r, &r, &r, &r2, &r2, &r2, &lo,
					      &hi);
				else
					hsum6(&r, &g, &l, &r2, &g2, &l2, &lo,
					      &hi);
				store_px(o, lo, hi, 6, o + 8 <= end);
			} else {
				lo = constant && off_grid(p, &a, bilinear) ?
					     p->fillv :
					     one(pp, a, inside_at(&a, &lim));
				store_px(o, lo, zero, 3, o + 8 <= end);
				hi = constant && off_grid(p, &b, bilinear) ?
					     p->fillv :
					     one(pp, b, inside_at(&b, &lim));
				store_px(o + 3, hi, zero, 3, o + 11 <= end);
			}
			a = na, b = nb, gi = ngi;
		}
		if (u < p->s)
			store_px(o, one(pp, a, inside_at(&a, &lim)), zero, 3,
				 o + 8 <= end);
	}
}

/*
 * The output loop for p's case, with the common window (one vector), the
 * channels and the interpolation known to the compiler.
 */
INLINE void pixels_any(const struct pass *p, pixel_fn *one)
{
	unsigned n = p->nvec;
	bool gray = p->planes == 1;

	switch ((n == 1) << 2 | gray << 1 | p->bilinear) {
	case 0: pixels_body(p, n, false, false, one); break;
	case 1: pixels_body(p, n, false, true, one); break;
	case 2: pixels_body(p, n, true, false, one); break;
	case 3: pixels_body(p, n, true, true, one); break;
	case 4: pixels_body(p, 1, false, false, one); break;
	case 5: pixels_body(p, 1, false, true, one); break;
	case 6: pixels_body(p, 1, true, false, one); break;
	default: pixels_body(p, 1, true, true, one); break;
	}
}

#if defined(__x86_64__)
AVX2 __attribute__((noinline)) static v4f pixel_avx2(const struct pass *p,
						     struct at a, bool in)
{
	return pixel_any(p, a, in);
}

AVX2 static void pixels_avx2(const struct pass *p)
{
	pixels_any(p, pixel_avx2);
}
#endif

__attribute__((noinline)) static v4f pixel_base(const struct pass *p,
						struct at a, bool in)
{
	return pixel_any(p, a, in);
}

static void pixels_base(const struct pass *p)
{
	pixels_any(p, pixel_base);
}

static bool warp_simd = true, warp_shift = true;

void warp_test_simd(bool on)
{
	warp_simd = on;
}

void warp_test_shift(bool on)
{
	warp_shift = on;
}

bool warp_is_shift(const double m[6])
{
	/* bounded, so that the offsets convert to int32_t and add safely */
	return m[0] == 1 && m[1] == 0 && m[3] == 0 && m[4] == 1 &&
	       m[2] == floor(m[2]) && m[5] == floor(m[5]) &&
	       fabs(m[2]) <= 1 << 24 && fabs(m[5]) <= 1 << 24;
}

/* Output pixel o of a shifted row: source column g through the fill. */
static inline void shift_px(uint8_t *o, const uint8_t *row, int32_t g,
			    int32_t s, uint8_t fill, const uint8_t fv[3])
{
	g = fold(g, s, 0, s - 1, fill);
	memcpy(o, g < 0 ? fv : row + 3 * (size_t)g, 3);
}

/*
 * A shift of an s x s RGB image by whole pixels (warp_is_shift()): each
 * output pixel's point is a grid point, whose value is its own pixel's
 * (the filter at scale 1 weighs it alone, and a zero fraction weighs
 * nothing on the next), so the pass is a copy: the part of each row
 * that stays inside at once, the rest pixel by pixel through fold(),
 * the constant fill's bytes as store_px() makes them. The same bytes as
 * the loops above give, faster.
 */
static void shift_run(const struct warp_src *src, int32_t dx, int32_t dy,
		      int32_t s, const struct ispec *sp, uint8_t *out)
{
	/* output columns [u0, u1) read source columns u0 + dx ... inside */
	int32_t u0 = dx < 0 ? (-dx < s ? -dx : s) : 0;
	int32_t u1 = dx > 0 ? (dx < s ? s - dx : 0) : s;
	const v4f zero = { 0, 0, 0, 0 };
	const v4f f = { (float)sp->fill_rgb[0], (float)sp->fill_rgb[1],
			(float)sp->fill_rgb[2], 0 };
	uint8_t fv[3];

	store_px(fv, f, zero, 3, false);
	for (int32_t v = 0; v < s; v++) {
		uint8_t *o = out + (size_t)v * s * 3;
		int32_t gy = fold(v + dy, s, 0, s - 1, sp->fill);
		const uint8_t *row;

		if (gy < 0) { /* the constant fill's, whole */
			for (int32_t u = 0; u < s; u++)
				memcpy(o + 3 * (size_t)u, fv, 3);
			continue;
		}
		row = src->px + (size_t)gy * src->stride;
		for (int32_t u = 0; u < u0; u++)
			shift_px(o + 3 * (size_t)u, row, u + dx, s, sp->fill,
				 fv);
		if (u1 > u0)
			memcpy(o + 3 * (size_t)u0, row + 3 * (size_t)(u0 + dx),
			       3 * (size_t)(u1 - u0));
		for (int32_t u = u1; u < s; u++)
			shift_px(o + 3 * (size_t)u, row, u + dx, s, sp->fill,
				 fv);
	}
}

typedef void pass_fn(const struct pass *);

static void pick(pass_fn **vpass, pass_fn **pixels)
{
	*vpass = vpass_base;
	*pixels = pixels_base;
#if defined(__x86_64__)
	if (warp_simd && __builtin_cpu_supports("avx2")) {
		*vpass = vpass_avx2;
		*pixels = pixels_avx2;
	}
#endif
}

/*
 * The floats (a multiple of eight) that hold any grid column's window and
 * the next one's from the same start: pass's pair. Windows only move
 * right, column by column; 0 if one does not.
 */
static uint32_t pairs_span(const struct axis *ax)
{
	int32_t span = 0;

	for (int32_t i = 0; i < ax->count; i++) {
		int32_t e = ax->n[i];

		if (i + 1 < ax->count) {
			int32_t d = ax->start[i + 1] - ax->start[i];

			if (d < 0)
				return 0;
			e = d + ax->n[i + 1] > e ? d + ax->n[i + 1] : e;
		}
		span = e > span ? e : span;
	}
	return (uint32_t)round8((size_t)(span ? span : 1));
}

/* pass's off and pair for the windows of ax. */
static void pairs_build(const struct axis *ax, int32_t clo, uint32_t span,
			int32_t *off, float *pair)
{
	for (int32_t i = 0; i < ax->count; i++) {
		float *a = pair + (size_t)i * 2 * span, *b = a + span;

		off[i] = ax->start[i] - clo;
		memset(a, 0, 2 * span * sizeof(float));
		memcpy(a, ax->w + (size_t)i * ax->taps,
		       (size_t)ax->n[i] * sizeof(float));
		if (i + 1 < ax->count)
			memcpy(b + ax->start[i + 1] - ax->start[i],
			       ax->w + (size_t)(i + 1) * ax->taps,
			       (size_t)ax->n[i + 1] * sizeof(float));
	}
}

/* base + n bytes, rounded up to an address that is a multiple of 32. */
static size_t align32(const void *base, size_t n)
{
	return (size_t)((((uintptr_t)base + n + 31) & ~(uintptr_t)31) -
			(uintptr_t)base);
}

int warp_run(const struct warp_src *src, const double m[6], uint32_t s,
	     const struct ispec *sp, uint8_t *out, void *scratch, size_t cap)
{
	int32_t lo[2], hi[2], clo, chi, taps, ch = (int32_t)src->ch;
	struct axis ax, ay;
	struct pass p;
	unsigned char *base = scratch;
	size_t used, off_at, pair_at, v_at;
	int32_t *off;
	float *pair;
	pass_fn *vpass, *pixels;
	int err;

	if ((ch != 1 && ch != 3) || !src->w || !src->h || !s ||
	    !(src->box[2] > src->box[0]) || !(src->box[3] > src->box[1]))
		return -EINVAL;
	if (warp_shift && ch == 3 && src->w == s && src->h == s &&
	    src->box[0] == 0 && src->box[1] == 0 && src->box[2] == s &&
	    src->box[3] == s && sp->fill != ISPEC_FILL_CONTEXT &&
	    warp_is_shift(m)) {
		shift_run(src, (int32_t)m[2], (int32_t)m[5], (int32_t)s, sp,
			  out);
		return 0;
	}
	warp_reach(sp, m, s, lo, hi);
	taps = (int32_t)max_taps(src->w > src->h ? src->w : src->h, s);
	ax = (struct axis){ .lo = lo[0],
			    .count = hi[0] - lo[0] + 1,
			    .taps = taps };
	ay = (struct axis){ .lo = lo[1],
			    .count = hi[1] - lo[1] + 1,
			    .taps = taps };
	off_at = axis_bytes((uint32_t)ax.count, (uint32_t)taps) +
		 axis_bytes((uint32_t)ay.count, (uint32_t)taps);
	if (off_at + (size_t)ax.count * sizeof(int32_t) > cap)
		return -ENOSPC;
	axis_carve(&ax, base);
	axis_carve(&ay, base + axis_bytes((uint32_t)ax.count, (uint32_t)taps));
	err = axis_build(&ax, src->box[0], src->box[2], s, src->w);
	if (!err)
		err = axis_build(&ay, src->box[1], src->box[3], s, src->h);
	if (err)
		return err;

	/* The source columns the grid columns read. */
	clo = INT32_MAX;
	chi = 0;
	for (int32_t i = 0; i < ax.count; i++) {
		if (!ax.n[i])
			continue;
		clo = ax.start[i] < clo ? ax.start[i] : clo;
		chi = ax.start[i] + ax.n[i] > chi ? ax.start[i] + ax.n[i] : chi;
	}
	if (clo >= chi)
		return -EINVAL;

	p = (struct pass){
		.src = src,
		.ay = &ay,
		.m = m,
		.out = out,
		.clo = clo,
		.ncols = chi - clo,
		.lo = { lo[0], lo[1] },
		.hi = { hi[0], hi[1] },
		.s = s,
		.span = pairs_span(&ax),
		.planes = ch == 3 ? 3 : 1,
		.fill = sp->fill,
		.bilinear = sp->interp == ISPEC_INTERP_BILINEAR,
		.fillv = { (float)sp->fill_rgb[0], (float)sp->fill_rgb[1],
			   (float)sp->fill_rgb[2], 0 },
	};
	if (!p.span)
		return -EINVAL;
	p.nvec = p.span / 8;
	p.pstride = round8((size_t)p.ncols) + p.span;
	p.vstride = p.planes * p.pstride;
	/* the pair table and V after the axes, vectors on 32 bytes */
	pair_at = align32(base, off_at + (size_t)ax.count * sizeof(int32_t));
	v_at = pair_at + (size_t)ax.count * 2 * p.span * sizeof(float);
	used = v_at + (size_t)ay.count * p.vstride * sizeof(float);
	if (used > cap)
		return -ENOSPC;
	off = (void *)(base + off_at);
	pair = (void *)(base + pair_at);
	p.off = off;
	p.pair = pair;
	p.v = (void *)(base + v_at);
	pairs_build(&ax, clo, p.span, off, pair);

	pick(&vpass, &pixels);
	vpass(&p);
	pixels(&p);
	return 0;
}
