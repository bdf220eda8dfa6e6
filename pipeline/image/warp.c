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
		/*
		 * Nearest takes a point beyond an edge onto that edge, so
		 * within the map's own reach as clamped; reflect and wrap
		 * fold points anywhere inside.
		 */
		if (sp->fill == ISPEC_FILL_CONSTANT ||
		    sp->fill == ISPEC_FILL_CONTEXT ||
		    sp->fill == ISPEC_FILL_NEAREST) {
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

/* The taps a grid column's window takes: its own, made even. */
static uint32_t max_span(uint32_t max_side, uint32_t s)
{
	return (max_taps(max_side, s) + 1) & ~1u;
}

/* Slack for the three arrays warp_run() puts on 32-byte addresses. */
#define ALIGN_SLACK (3 * 32)

size_t warp_scratch_bytes(uint32_t s, uint32_t max_cols, uint32_t max_side)
{
	uint32_t taps = max_taps(max_side, s), span = max_span(max_side, s);

	return 2 * axis_bytes(max_cols, taps) +
	       (size_t)max_cols * sizeof(int32_t) +
	       (size_t)max_cols * 4 * span * sizeof(float) +
	       (size_t)4 * (max_side + span) * sizeof(float) +
	       (size_t)(max_cols + 1) * (max_cols + 1) * 4 * sizeof(float) +
	       ALIGN_SLACK;
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
 * elsewhere): eight floats (two points of G, or four pixels' x and y),
 * the four of a point or a pixel (RGB and a lane no output reads), and
 * their integer masks and indices. The grid and output loops are
 * compiled twice, for AVX2 and for the baseline, from the same code:
 * each lane's arithmetic written out, sums in a fixed order, multiplies
 * and adds separate (no FMA is enabled), so both round the same way and
 * give the same bytes. Eight-float vectors never cross a call (the
 * baseline's ABI passes them in memory, and GCC warns of that): the
 * helpers are inlined, and return them through pointers.
 */
typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint8_t v16b __attribute__((vector_size(16)));

#if defined(__clang__) || __GNUC__ >= 12
#define SHUF4(a, b, ...)  __builtin_shufflevector(a, b, __VA_ARGS__)
#define SHUF8(a, b, ...)  __builtin_shufflevector(a, b, __VA_ARGS__)
#define SHUF16(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUF4(a, b, ...)  __builtin_shuffle(a, b, (v4i){ __VA_ARGS__ })
#define SHUF8(a, b, ...)  __builtin_shuffle(a, b, (v8i){ __VA_ARGS__ })
#define SHUF16(a, b, ...) __builtin_shuffle(a, b, (v16b){ __VA_ARGS__ })
#endif

#define INLINE	   static inline __attribute__((always_inline))
#define LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define SPLAT8(f)  ((v8f){ (f), (f), (f), (f), (f), (f), (f), (f) })

/*
 * What a pass's parts share. G, the crop's s x s image where the map
 * reaches it, holds each grid point's value in float, as the separable
 * filter gives it and never rounded: four floats a point (R, G, B and a
 * lane no output reads; gray in all three), a row of nx points and one
 * more, a copy of the last, and ny rows and one more, a copy of the last,
 * so that bilinear's second point can always be loaded (the fills that
 * fold the point past the reach onto another than the last take the
 * general path there: copy_ok is false). V is the vertical half of the
 * filter for one grid row at a time, over the source columns its grid
 * columns read, four floats a column as in G, zero past the last column,
 * so that a window may run over the end. Grid column i's window starts at
 * V column off[i]: span taps (its own, then zeros), each weight four
 * times over at wx + 4 * span * i.
 */
struct pass {
	const struct warp_src *src;
	const struct axis *ay;
	const double *m;
	const int32_t *off;
	const float *wx;
	float *v, *g;
	uint8_t *out;
	size_t gstride;	      /* floats from a G row to the next */
	int32_t clo, ncols;   /* V column 0 is source column clo */
	int32_t lo[2], hi[2]; /* the grid the map reaches */
	int32_t nx, ny;	      /* its columns and rows */
	uint32_t s, span;     /* span: even */
	uint8_t fill;
	bool bilinear, copy_ok;
	v4f fillv;
};

/*
 * The vertical half for grid row lo[1] + k, columns x to n: each V
 * column its window of source rows, weighed, a sum in tap order, each
 * step one fused multiply-add. The portable loop; the AVX2 one
 * (vrow_avx2(), with FMA) does each column's arithmetic the same way.
 */
static void vrow_cols(const struct pass *p, int32_t k, int32_t x, int32_t n)
{
	const struct warp_src *src = p->src;
	const struct axis *ay = p->ay;
	const float *w = ay->w + (size_t)k * ay->taps;
	const uint8_t *row = src->px + (size_t)ay->start[k] * src->stride +
			     (size_t)p->clo * src->ch;

	for (; x < n; x++) {
		const uint8_t *px = row + src->ch * (size_t)x;
		float a[3] = { 0, 0, 0 }, *o = p->v + 4 * (size_t)x;

		for (int32_t t = 0; t < ay->n[k]; t++, px += src->stride) {
			for (unsigned c = 0; c < src->ch; c++)
				a[c] = fmaf(w[t], (float)px[c], a[c]);
		}
		if (src->ch == 1)
			a[1] = a[2] = a[0];
		o[0] = a[0], o[1] = a[1], o[2] = a[2], o[3] = a[2];
	}
}

/* Zero V past its last column, for the windows' last taps. */
static void vrow_pad(const struct pass *p)
{
	memset(p->v + 4 * (size_t)p->ncols, 0, 4 * p->span * sizeof(float));
}

/*
 * Grid column lo[0] + i of the current row, at o: its window's taps
 * weighed, two at a time in the halves of a vector (the even taps' sum
 * and the odd ones', each in tap order), then the halves added.
 */
INLINE void gpoint(const struct pass *p, int32_t i, uint32_t span, float *o)
{
	const float *w = p->wx + 4 * (size_t)span * i;
	const float *q = p->v + 4 * (size_t)p->off[i];
	v8f a, x, y;
	v4f lo, hi;

	LOAD(x, w);
	LOAD(y, q);
	a = x * y;
	for (uint32_t t = 2; t < span; t += 2) {
		LOAD(x, w + 4 * t);
		LOAD(y, q + 4 * t);
		a += x * y;
	}
	memcpy(&lo, &a, sizeof(lo));
	memcpy(&hi, (const char *)&a + sizeof(lo), sizeof(hi));
	lo += hi;
	memcpy(o, &lo, sizeof(lo));
}

/* The horizontal half for G row k, and the copy of its last point. */
INLINE void hrow_body(const struct pass *pp, int32_t k, uint32_t span)
{
	/* a copy that the stores to G cannot touch, as far as GCC knows */
	const struct pass c = *pp, *p = &c;
	float *gr = p->g + (size_t)k * p->gstride;

	for (int32_t i = 0; i < p->nx; i++)
		gpoint(p, i, span, gr + 4 * (size_t)i);
	memcpy(gr + 4 * (size_t)p->nx, gr + 4 * (size_t)(p->nx - 1),
	       4 * sizeof(float));
}

/* hrow_body() with the common windows' span known to the compiler. */
INLINE void hrow_any(const struct pass *p, int32_t k)
{
	switch (p->span) {
	case 2: hrow_body(p, k, 2); break;
	case 4: hrow_body(p, k, 4); break;
	case 6: hrow_body(p, k, 6); break;
	default: hrow_body(p, k, p->span); break;
	}
}

/* G's row past the last, a copy of it. */
static void grid_pad(const struct pass *p)
{
	memcpy(p->g + (size_t)p->ny * p->gstride,
	       p->g + (size_t)(p->ny - 1) * p->gstride,
	       p->gstride * sizeof(float));
}

/* G's rows k0 to k1 (and the copy past the last, with the last). */
static void grid_base(const struct pass *p, int32_t k0, int32_t k1)
{
	for (int32_t k = k0; k < k1; k++) {
		vrow_cols(p, k, 0, p->ncols);
		vrow_pad(p);
		hrow_any(p, k);
	}
	if (k1 == p->ny)
		grid_pad(p);
}

#if defined(__x86_64__)
#define AVX2	 __attribute__((target("avx2")))
#define AVX2_FMA __attribute__((target("avx2,fma")))

/* Eight bytes as eight floats. */
AVX2 static inline __m256 bytes8(const uint8_t *px)
{
	__m128i b = _mm_loadl_epi64((const __m128i *)(const void *)px);

	return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
}

/*
 * Eight columns at a time: RGB as three vectors of interleaved floats
 * (a: R0 G0 B0 R1 G1 B1 R2 G2, b: B2 R3 ... R5, c: G5 B5 ... B7), put
 * as V's columns by a blend and a permute a pair; gray's eight sums each
 * four times over.
 */
AVX2_FMA __attribute__((noinline)) static void vrow_avx2(const struct pass *p,
							 int32_t k)
{
	const struct warp_src *src = p->src;
	const struct axis *ay = p->ay;
	int32_t n = p->ncols, n8 = n < 8 ? 0 : n;
	size_t stride = src->stride;
	const __m256i i01 = _mm256_setr_epi32(0, 1, 2, 2, 3, 4, 5, 5);
	const __m256i i23 = _mm256_setr_epi32(6, 7, 0, 0, 1, 2, 3, 3);
	const __m256i i45 = _mm256_setr_epi32(4, 5, 6, 6, 7, 0, 1, 1);
	const __m256i i67 = _mm256_setr_epi32(2, 3, 4, 4, 5, 6, 7, 7);
	float *vr = p->v;
	const float *w = ay->w + (size_t)k * ay->taps;
	const uint8_t *row = src->px + (size_t)ay->start[k] * stride +
			     (size_t)p->clo * src->ch;
	int32_t nt = ay->n[k];

	/* the last eight end at the last column, again over some */
	for (int32_t i = 0; src->ch == 3 && i < n8; i += 8) {
		int32_t x = i < n - 8 ? i : n - 8;
		const uint8_t *px = row + 3 * (size_t)x;
		__m256 a = _mm256_setzero_ps(), b = a, c = a;
		float *o = vr + 4 * (size_t)x;

		for (int32_t t = 0; t < nt; t++, px += stride) {
			__m256 wv = _mm256_set1_ps(w[t]);

			a = _mm256_fmadd_ps(wv, bytes8(px), a);
			b = _mm256_fmadd_ps(wv, bytes8(px + 8), b);
			c = _mm256_fmadd_ps(wv, bytes8(px + 16), c);
		}
		_mm256_storeu_ps(o, _mm256_permutevar8x32_ps(a, i01));
		_mm256_storeu_ps(o + 8,
				 _mm256_permutevar8x32_ps(
					 _mm256_blend_ps(a, b, 0x0f), i23));
		_mm256_storeu_ps(o + 16,
				 _mm256_permutevar8x32_ps(
					 _mm256_blend_ps(b, c, 0x0f), i45));
		_mm256_storeu_ps(o + 24, _mm256_permutevar8x32_ps(c, i67));
	}
	for (int32_t i = 0; src->ch == 1 && i < n8; i += 8) {
		int32_t x = i < n - 8 ? i : n - 8;
		const uint8_t *px = row + x;
		__m256 a = _mm256_setzero_ps();
		float *o = vr + 4 * (size_t)x;

		for (int32_t t = 0; t < nt; t++, px += stride)
			a = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), bytes8(px),
					    a);
		for (int j = 0; j < 4; j++)
			_mm256_storeu_ps(
				o + 8 * j,
				_mm256_permutevar8x32_ps(
					a, _mm256_setr_epi32(
						   2 * j, 2 * j, 2 * j, 2 * j,
						   2 * j + 1, 2 * j + 1,
						   2 * j + 1, 2 * j + 1)));
	}
	if (!n8)
		vrow_cols(p, k, 0, n);
	vrow_pad(p);
}

/* Not FMA: hrow_any()'s sums must round as the portable loop's. */
AVX2 static void grid_avx2(const struct pass *p, int32_t k0, int32_t k1)
{
	for (int32_t k = k0; k < k1; k++) {
		vrow_avx2(p, k);
		hrow_any(p, k);
	}
	if (k1 == p->ny)
		grid_pad(p);
}
#endif

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

/*
 * Eight pixels' bytes, as store_px() makes them, from [r g b -] each in
 * the halves of t[0..3]: 24 bytes, or (room) 28, the last four to be
 * written again.
 */
INLINE void store8(uint8_t *o, const v8f t[4], bool room)
{
#if defined(__SSE2__)
	__m128i h[8], q0, q1;
	v16b b0, b1;

	for (unsigned k = 0; k < 4; k++) {
		v4f lo, hi;

		memcpy(&lo, &t[k], sizeof(lo));
		memcpy(&hi, (const char *)&t[k] + sizeof(lo), sizeof(hi));
		h[2 * k] = _mm_cvtps_epi32((__m128)lo);
		h[2 * k + 1] = _mm_cvtps_epi32((__m128)hi);
	}
	q0 = _mm_packus_epi16(_mm_packs_epi32(h[0], h[1]),
			      _mm_packs_epi32(h[2], h[3]));
	q1 = _mm_packus_epi16(_mm_packs_epi32(h[4], h[5]),
			      _mm_packs_epi32(h[6], h[7]));
	/* [r g b -] x 4 to [r g b] x 4, then four bytes no one reads */
	b0 = SHUF16((v16b)q0, (v16b)q0, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14,
		    15, 15, 15, 15);
	b1 = SHUF16((v16b)q1, (v16b)q1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14,
		    15, 15, 15, 15);
	if (room) {
		memcpy(o, &b0, sizeof(b0));
		memcpy(o + 12, &b1, sizeof(b1));
		return;
	}
	memcpy(o, &b0, 12);
	memcpy(o + 12, &b1, 12);
#else
	for (unsigned k = 0; k < 4; k++) {
		v4f lo, hi;

		memcpy(&lo, &t[k], sizeof(lo));
		memcpy(&hi, (const char *)&t[k] + sizeof(lo), sizeof(hi));
		store_px(o + 6 * k, lo, hi, 6, false);
	}
	(void)room;
#endif
}

#if defined(__x86_64__)
/*
 * store8() in AVX2, the same bytes: each pair's four lanes rounded and
 * packed to a 32-bit word, the words put in pixel order, each lane's
 * four compacted to 12 bytes.
 */
AVX2 static inline void store8_avx2(uint8_t *o, const v8f t[4], bool room)
{
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	const __m256i rgb = _mm256_setr_epi8(
		0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2,
		4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
	__m256i a = _mm256_cvtps_epi32((__m256)t[0]);
	__m256i b = _mm256_cvtps_epi32((__m256)t[1]);
	__m256i c = _mm256_cvtps_epi32((__m256)t[2]);
	__m256i d = _mm256_cvtps_epi32((__m256)t[3]);
	/* lanes: pixels 0 2 4 6, then 1 3 5 7, a word each */
	__m256i q = _mm256_packus_epi16(_mm256_packs_epi32(a, b),
					_mm256_packs_epi32(c, d));

	q = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(q, order), rgb);
	if (room) {
		_mm_storeu_si128((__m128i *)(void *)o,
				 _mm256_castsi256_si128(q));
		_mm_storeu_si128((__m128i *)(void *)(o + 12),
				 _mm256_extracti128_si256(q, 1));
		return;
	}
	{
		uint8_t x[32];

		_mm256_storeu_si256((__m256i *)(void *)x, q);
		memcpy(o, x, 12);
		memcpy(o + 12, x + 16, 12);
	}
}
#endif

/*
 * Where an output pixel's point falls: the grid point (bilinear: the
 * first of four) as a column and row of G (grid column lo[0] + gx, row
 * lo[1] + gy), and the fractions past it.
 */
struct at {
	int32_t gx, gy;
	float fx, fy;
};

/*
 * Four pixels' points, xy = [x y x' y' ...] in grid-index coordinates
 * (half a pixel less than area ones), as their grid points gi and
 * fractions fr: rounded half to even (nearest, as torch's nearbyint) by
 * adding and taking away 2^23 + 2^22, which rounds in float whatever the
 * instruction set, and floored (bilinear) from there. The points are
 * first clamped: onto [0, cmax] with cmax (fill nearest: its reach stops
 * short of an edge only where no point passes that edge, so a point
 * beyond the reach is beyond the crop, and takes the edge's value, as the
 * fill extends it), else onto +-2^21, where that rounding holds and every
 * grid is far behind.
 */
INLINE void locate4(const v8f *at, bool bilinear, const v8f *cmax, v8i *gi,
		    v8f *fr)
{
	v8f xy = *at;
	const v8f big = SPLAT8(0x1.8p23f), one = SPLAT8(1.0f);
	const v8f far = SPLAT8(0x1p21f), lo = cmax ? SPLAT8(0.0f) : -far;
	const v8f hi = cmax ? *cmax : far;
	v8i below = xy < lo;
	v8i above = xy > hi;
	v8f r;

	xy = (v8f)(((v8i)xy & ~below) | ((v8i)lo & below));
	xy = (v8f)(((v8i)xy & ~above) | ((v8i)hi & above));
	r = (xy + big) - big;
	*fr = SPLAT8(0.0f);
	if (bilinear) {
		r -= (v8f)((v8i)one & (r > xy));
		*fr = xy - r;
	}
	*gi = __builtin_convertvector(r, v8i);
}

#if defined(__x86_64__)
/*
 * locate4() in AVX2, the same values: the clamp as a max and a min, the
 * rounding by the instruction (exact, as the sums are). Not inlined but
 * into AVX2 callers.
 */
AVX2 static inline void locate4_avx2(const v8f *at, bool bilinear,
				     const v8f *cmax, v8i *gi, v8f *fr)
{
	const __m256 far = _mm256_set1_ps(0x1p21f);
	__m256 x = (__m256)*at, r;

	x = _mm256_max_ps(x, cmax ? _mm256_setzero_ps() : -far);
	x = _mm256_min_ps(x, cmax ? (__m256)*cmax : far);
	if (bilinear) {
		r = _mm256_round_ps(x,
				    _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
		*fr = (v8f)_mm256_sub_ps(x, r);
	} else {
		r = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT |
					       _MM_FROUND_NO_EXC);
		*fr = SPLAT8(0.0f);
	}
	*gi = (v8i)_mm256_cvtps_epi32(r);
}
#endif

/* Pixel k (0 or 1) of a pair's points and fractions (locate4()). */
INLINE struct at at_of(const v4i *gi, const v4f *fr, unsigned k)
{
	return (struct at){ (*gi)[2 * k], (*gi)[2 * k + 1], (*fr)[2 * k],
			    (*fr)[2 * k + 1] };
}

/*
 * Whether both pixels of a pair (g, from locate4()) have all their grid
 * points in G as they are: each first point's index below lim (per axis:
 * the count, less one for bilinear's second point where the copy past
 * the last is not what the fill gives).
 */
INLINE bool inside2(const v4i *g, const v4i *lim)
{
	v4i in = (v4i)((v4u)*g < (v4u)*lim);
	uint64_t w[2];

	memcpy(w, &in, sizeof(w));
	return (w[0] & w[1]) == ~(uint64_t)0;
}

/*
 * Whether bilinear's grid points at a are all off the grid on one side,
 * that is (for the constant fill) all the fill.
 */
INLINE bool off_grid(const struct pass *p, const struct at *a)
{
	return a->gx < -1 || a->gx > p->hi[0] - p->lo[0] || a->gy < -1 ||
	       a->gy > p->hi[1] - p->lo[1];
}

/*
 * Bilinear's sum, the same for every pixel, for two pixels at once (their
 * first rows' points from qa and qb, the second rows gstride on; f = [fx
 * fy fx' fy']): each column's two points blended by fy (t0 + fy (t1 -
 * t0)), then the two columns by fx, both pixels' columns in one vector:
 * *out = [r g b - r' g' b' -].
 */
INLINE void blend2(const float *qa, const float *qb, size_t gstride, v4f f,
		   v8f *out)
{
	v8f a0, a1, b0, b1, ta, tb, lo, hi;

	LOAD(a0, qa);
	LOAD(a1, qa + gstride);
	LOAD(b0, qb);
	LOAD(b1, qb + gstride);
	ta = a0 + SPLAT8(f[1]) * (a1 - a0);
	tb = b0 + SPLAT8(f[3]) * (b1 - b0);
	lo = SHUF8(ta, tb, 0, 1, 2, 3, 8, 9, 10, 11);
	hi = SHUF8(ta, tb, 4, 5, 6, 7, 12, 13, 14, 15);
	*out = lo + (v8f){ f[0], f[0], f[0], f[0], f[2], f[2], f[2], f[2] } *
			    (hi - lo);
}

/*
 * Grid point (gx, gy), both through fold(): its value, or the constant
 * fill's (fold()'s -1; fill context's points left of or above the crop
 * have indices below 0 of their own).
 */
INLINE v4f point(const struct pass *p, int32_t gx, int32_t gy)
{
	v4f v;

	if (p->fill == ISPEC_FILL_CONSTANT && (gx < 0 || gy < 0))
		return p->fillv;
	LOAD(v, p->g + (size_t)(gy - p->lo[1]) * p->gstride +
			4 * (size_t)(gx - p->lo[0]));
	return v;
}

/*
 * Any pixel, each of its grid points through the fill mode, then summed
 * by blend2() as a pixel inside is (a zero fraction weighs the second
 * point's value, whatever the fill made of it, to nothing).
 */
INLINE v4f pixel_any(const struct pass *p, struct at a)
{
	int32_t s = (int32_t)p->s, x = a.gx + p->lo[0], y = a.gy + p->lo[1];
	int32_t c0, c1, k0, k1;
	v4f v[4], r;
	v8f t;

	if (!p->bilinear)
		return point(p, fold(x, s, p->lo[0], p->hi[0], p->fill),
			     fold(y, s, p->lo[1], p->hi[1], p->fill));
	if (p->fill == ISPEC_FILL_CONSTANT && off_grid(p, &a))
		return p->fillv;
	c0 = fold(x, s, p->lo[0], p->hi[0], p->fill);
	c1 = fold(x + 1, s, p->lo[0], p->hi[0], p->fill);
	k0 = fold(y, s, p->lo[1], p->hi[1], p->fill);
	k1 = fold(y + 1, s, p->lo[1], p->hi[1], p->fill);
	v[0] = point(p, c0, k0);
	v[1] = point(p, c1, k0);
	v[2] = point(p, c0, k1);
	v[3] = point(p, c1, k1);
	/* the four as a two-column G of their own, taken as both pixels */
	blend2((const float *)v, (const float *)v, 8,
	       (v4f){ a.fx, a.fy, a.fx, a.fy }, &t);
	memcpy(&r, &t, sizeof(r));
	return r;
}

/*
 * Any pixel, its case known at run time: a call of its own (one copy per
 * instruction set), since the output loop calls it only near the crop's
 * edge.
 */
typedef v4f pixel_fn(const struct pass *p, struct at a);

/* Pixel pairs located at a time, before their values are made. */
#define PAIRS 64

/*
 * The output pixels, each at its inverse-mapped point, stepped along the
 * row: PAIRS pairs of points found first (their grid points as offsets
 * into G), then their values, from G at once where a pair's grid points
 * are all there, through the general path (one, the same instruction
 * set's) where not.
 */
INLINE void pixels_body(const struct pass *pp, bool bilinear, pixel_fn *one,
			bool avx2, uint32_t v0, uint32_t v1)
{
	/*
	 * A copy that the byte stores cannot touch (as far as the compiler
	 * knows), so that none of it is read again after each pixel.
	 */
	const struct pass c = *pp, *p = &c;
	const double *m = p->m;
	uint8_t *end = p->out + (size_t)p->s * p->s * 3;
	int32_t r = bilinear && !p->copy_ok;
	uint32_t gs = (uint32_t)p->gstride;
	const v4i lim4 = { p->nx - r, p->ny - r, p->nx - r, p->ny - r };
	v8u lim;
	const v8u mul = { 4, gs, 4, gs, 4, gs, 4, gs };
	const v8i low = { -1, -1, -1, -1, 0, 0, 0, 0 };
	const v8f cmax = { p->nx - 1, p->ny - 1, p->nx - 1, p->ny - 1,
			   p->nx - 1, p->ny - 1, p->nx - 1, p->ny - 1 };
	const v8f *clamp = p->fill == ISPEC_FILL_NEAREST ? &cmax : NULL;
	const v8f step = { m[0], m[3], m[0], m[3], m[0], m[3], m[0], m[3] };
	const v8f four = SPLAT8(4.0f);
	const v4f zero = { 0, 0, 0, 0 };

	memcpy(&lim, &lim4, sizeof(lim4)); /* per pair, twice */
	memcpy((char *)&lim + sizeof(lim4), &lim4, sizeof(lim4));
	for (uint32_t v = v0; v < v1; v++) {
		/* pixel u's point: row v's first, plus u steps, in float */
		float x = (float)(m[0] * 0.5 + m[1] * (v + 0.5) + m[2] - 0.5 -
				  p->lo[0]);
		float y = (float)(m[3] * 0.5 + m[4] * (v + 0.5) + m[5] - 0.5 -
				  p->lo[1]);
		const v8f base = { x, y, x, y, x, y, x, y };
		v8f u4 = { 0, 0, 1, 1, 2, 2, 3, 3 };
		uint8_t *o = p->out + (size_t)v * p->s * 3;
		uint32_t left = p->s / 2;
		v4i gi[PAIRS + 1];
		v4f fr[PAIRS + 1];
		int32_t off[2 * PAIRS + 2];

		while (left) {
			uint32_t n = left < PAIRS ? left : PAIRS, j = 0;
			v8i out = { 0 }, o8;

			/* the points; whether any grid point is not in G */
			for (; j < n; j += 2, u4 += four) {
				const v8f at = base + u4 * step;
				v8i g;
				v8u t;
				v8f f;

#if defined(__x86_64__)
				if (avx2)
					locate4_avx2(&at, bilinear, clamp, &g,
						     &f);
				else
#endif
					locate4(&at, bilinear, clamp, &g, &f);
				/* wrapping where far out: used only inside */
				t = (v8u)g * mul;
				t += SHUF8(t, t, 1, 0, 3, 2, 5, 4, 7, 6);
				/* a pair past the chunk's last: not counted */
				o8 = (v8i)((v8u)g >= lim);
				out |= j + 1 < n ? o8 : o8 & low;
				memcpy(&gi[j], &g, sizeof(g));
				memcpy(&fr[j], &f, sizeof(f));
				off[2 * j] = (int32_t)t[0];
				off[2 * j + 1] = (int32_t)t[2];
				off[2 * j + 2] = (int32_t)t[4];
				off[2 * j + 3] = (int32_t)t[6];
			}
			j = 0;
			if (bilinear && !(out[0] | out[1] | out[2] | out[3] |
					  out[4] | out[5] | out[6] | out[7])) {
				/* all in G: eight pixels a step */
				for (; j + 4 <= n; j += 4, o += 24) {
					v8f t[4];

#pragma GCC unroll 4
					for (unsigned k = 0; k < 4; k++)
						blend2(p->g + off[2 * (j + k)],
						       p->g + off[2 * (j + k) +
								  1],
						       p->gstride, fr[j + k],
						       &t[k]);
#if defined(__x86_64__)
					if (avx2)
						store8_avx2(o, t,
							    o + 28 <= end);
					else
#endif
						store8(o, t, o + 28 <= end);
				}
			}
			for (; j < n; j++, o += 6) {
				v4f lo, hi;

				if (!inside2(&gi[j], &lim4)) {
					lo = one(pp, at_of(&gi[j], &fr[j], 0));
					hi = one(pp, at_of(&gi[j], &fr[j], 1));
				} else if (bilinear) {
					v8f t;

					blend2(p->g + off[2 * j],
					       p->g + off[2 * j + 1],
					       p->gstride, fr[j], &t);
					memcpy(&lo, &t, sizeof(lo));
					memcpy(&hi,
					       (const char *)&t + sizeof(lo),
					       sizeof(hi));
				} else {
					LOAD(lo, p->g + off[2 * j]);
					LOAD(hi, p->g + off[2 * j + 1]);
				}
				store_px(o, SHUF4(lo, hi, 0, 1, 2, 4),
					 SHUF4(hi, hi, 1, 2, 1, 2), 6,
					 o + 8 <= end);
			}
			left -= n;
		}
		if (p->s & 1) {
			const v8f ul = SPLAT8((float)(p->s - 1));
			const v8f at = base + ul * step;
			v8i g;
			v8f f;
			v4i g4;
			v4f f4;

			locate4(&at, bilinear, clamp, &g, &f);
			memcpy(&g4, &g, sizeof(g4));
			memcpy(&f4, &f, sizeof(f4));
			store_px(o, one(pp, at_of(&g4, &f4, 0)), zero, 3,
				 o + 8 <= end);
		}
	}
}

#if defined(__x86_64__)
AVX2 __attribute__((noinline)) static v4f pixel_avx2(const struct pass *p,
						     struct at a)
{
	return pixel_any(p, a);
}

AVX2 static void pixels_avx2(const struct pass *p, uint32_t v0, uint32_t v1)
{
	if (p->bilinear)
		pixels_body(p, true, pixel_avx2, true, v0, v1);
	else
		pixels_body(p, false, pixel_avx2, true, v0, v1);
}
#endif

__attribute__((noinline)) static v4f pixel_base(const struct pass *p,
						struct at a)
{
	return pixel_any(p, a);
}

static void pixels_base(const struct pass *p, uint32_t v0, uint32_t v1)
{
	if (p->bilinear)
		pixels_body(p, true, pixel_base, false, v0, v1);
	else
		pixels_body(p, false, pixel_base, false, v0, v1);
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

typedef void grid_fn(const struct pass *, int32_t, int32_t);
typedef void pixels_fn(const struct pass *, uint32_t, uint32_t);

static void pick(grid_fn **grid, pixels_fn **pixels)
{
	*grid = grid_base;
	*pixels = pixels_base;
#if defined(__x86_64__)
	if (warp_simd && __builtin_cpu_supports("avx2") &&
	    __builtin_cpu_supports("fma")) {
		*grid = grid_avx2;
		*pixels = pixels_avx2;
	}
#endif
}

/*
 * Output rows a band of the pixel pass makes at a time; G's rows are made
 * just before the first band that reads them, so that the pixel pass
 * finds them still in cache (G is larger than a core's L2).
 */
#define BAND 8

/*
 * How many of G's rows output rows v0 to v1 need made (from the first):
 * past the lowest point of their rows, the row bilinear reads below it,
 * and one more (the pixel pass finds its points in float). Fill
 * nearest, constant and context read no row below that (a point beyond
 * the last row takes that row, the fill, or the row past it, which is
 * made with the last); reflect and wrap fold a point onto any row.
 */
static int32_t rows_needed(const struct pass *p, uint32_t v0, uint32_t v1)
{
	const double *m = p->m;
	double u = m[3] > 0 ? p->s - 0.5 : 0.5, y0, y1, y;

	if (p->fill == ISPEC_FILL_REFLECT || p->fill == ISPEC_FILL_WRAP)
		return p->ny;
	y0 = m[3] * u + m[4] * (v0 + 0.5) + m[5] - 0.5 - p->lo[1];
	y1 = m[3] * u + m[4] * (v1 - 0.5) + m[5] - 0.5 - p->lo[1];
	y = (y0 > y1 ? y0 : y1) + 3;
	return y >= p->ny ? p->ny : y < 1 ? 1 : (int32_t)y;
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
	int32_t lo[2], hi[2], clo, chi, taps, ch = (int32_t)src->ch, n = 1;
	uint32_t side;
	struct axis ax, ay;
	struct pass p;
	unsigned char *base = scratch;
	size_t used, off_at, wx_at, v_at, g_at;
	int32_t *off;
	float *wx;
	grid_fn *grid;
	pixels_fn *pixels;
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
	/* the filter's width is the crop's, which may pass the region's */
	side = src->w > src->h ? src->w : src->h;
	for (unsigned k = 0; k < 2; k++)
		if (src->box[k + 2] - src->box[k] > side)
			side = (uint32_t)ceil(src->box[k + 2] - src->box[k]);
	taps = (int32_t)max_taps(side, s);
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

	/* The source columns the grid columns read; the widest window. */
	clo = INT32_MAX;
	chi = 0;
	for (int32_t i = 0; i < ax.count; i++) {
		if (!ax.n[i])
			continue;
		clo = ax.start[i] < clo ? ax.start[i] : clo;
		chi = ax.start[i] + ax.n[i] > chi ? ax.start[i] + ax.n[i] : chi;
		n = ax.n[i] > n ? ax.n[i] : n;
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
		.nx = ax.count,
		.ny = ay.count,
		.s = s,
		.span = (uint32_t)(n + 1) & ~1u,
		.fill = sp->fill,
		.bilinear = sp->interp == ISPEC_INTERP_BILINEAR,
		/* fold() takes the point past hi onto hi, as the copy is */
		.copy_ok = sp->fill == ISPEC_FILL_NEAREST ||
			   sp->fill == ISPEC_FILL_REFLECT ||
			   sp->fill == ISPEC_FILL_CONTEXT,
		.fillv = { (float)sp->fill_rgb[0], (float)sp->fill_rgb[1],
			   (float)sp->fill_rgb[2], 0 },
	};
	p.gstride = 4 * ((size_t)p.nx + 1);
	/* the weights, V and G after the axes, vectors on 32 bytes */
	wx_at = align32(base, off_at + (size_t)ax.count * sizeof(int32_t));
	v_at = align32(base,
		       wx_at + (size_t)ax.count * 4 * p.span * sizeof(float));
	g_at = align32(base,
		       v_at + 4 * ((size_t)p.ncols + p.span) * sizeof(float));
	used = g_at + (size_t)(p.ny + 1) * p.gstride * sizeof(float);
	if (used > cap)
		return -ENOSPC;
	off = (void *)(base + off_at);
	wx = (void *)(base + wx_at);
	for (int32_t i = 0; i < ax.count; i++) {
		float *w = wx + (size_t)i * 4 * p.span;

		off[i] = ax.start[i] - clo;
		for (uint32_t t = 0; t < p.span; t++) {
			float f = (int32_t)t < ax.n[i] ?
					  ax.w[(size_t)i * ax.taps + t] :
					  0;

			w[4 * t] = w[4 * t + 1] = w[4 * t + 2] = w[4 * t + 3] =
				f;
		}
	}
	p.off = off;
	p.wx = wx;
	p.v = (void *)(base + v_at);
	p.g = (void *)(base + g_at);

	pick(&grid, &pixels);
	for (uint32_t v = 0, made = 0; v < s; v += BAND) {
		uint32_t v1 = v + BAND < s ? v + BAND : s;
		int32_t k = rows_needed(&p, v, v1);

		if (k > (int32_t)made) {
			grid(&p, (int32_t)made, k);
			made = (uint32_t)k;
		}
		pixels(&p, v, v1);
	}
	return 0;
}
