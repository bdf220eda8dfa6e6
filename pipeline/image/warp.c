/*
 * warp.c - the geometric stages' one resampling pass (see warp.h).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#if defined(__SSE2__)
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

/* One axis's filter windows: grid index lo + i reads n[i] source pixels
 * from start[i] with weights w[i * taps ...]. */
struct axis {
	int32_t lo, count, taps;
	int32_t *start, *n;
	float *w;
};

static size_t axis_bytes(uint32_t cols, uint32_t taps)
{
	return (size_t)cols * (2 * sizeof(int32_t) + taps * sizeof(float));
}

/* The widest window a region of max_side pixels resized to s can need:
 * the triangle spans twice the scale, plus the pixels it touches. */
static uint32_t max_taps(uint32_t max_side, uint32_t s)
{
	return 2 * ((max_side + s - 1) / s) + 4;
}

size_t warp_scratch_bytes(uint32_t s, uint32_t max_cols, uint32_t max_side)
{
	uint32_t taps = max_taps(max_side, s);

	return 2 * axis_bytes(max_cols, taps) +
	       (size_t)max_cols * (3 * (size_t)max_side + 16) * sizeof(float) +
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

/* floor() as an integer, without a call. */
static inline int32_t ifloor(double v)
{
	int32_t i = (int32_t)v;

	return v < i ? i - 1 : i;
}

/* Round half to even, as torch's nearest grid_sample (nearbyint). */
static inline int32_t round_even(double v)
{
#if defined(__SSE2__)
	return _mm_cvtsd_si32(_mm_set_sd(v)); /* MXCSR: nearest even */
#else
	return (int32_t)nearbyint(v);
#endif
}

/*
 * Vectors of the compiler's (SSE on x86-64, whatever the target has
 * elsewhere): one RGB pixel and a lane that is never used, and eight
 * floats of a row. Multiplies and adds stay separate (no FMA is
 * enabled), so every path rounds the same way and gives the same bytes.
 */
typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef uint8_t v8u8 __attribute__((vector_size(8)));

/* row[0..n) += w * px[0..n) */
static inline void axpy_body(float *restrict row, const uint8_t *restrict px,
			     size_t n, float w)
{
	size_t i = 0;
	v8f wv = { w, w, w, w, w, w, w, w };

	for (; i + 8 <= n; i += 8) {
		v8u8 b;
		v8f r;

		memcpy(&b, px + i, sizeof(b));
		memcpy(&r, row + i, sizeof(r));
		r += wv * __builtin_convertvector(b, v8f);
		memcpy(row + i, &r, sizeof(r));
	}
	for (; i < n; i++)
		row[i] += w * (float)px[i];
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void
axpy_avx2(float *restrict row, const uint8_t *restrict px, size_t n, float w)
{
	axpy_body(row, px, n, w);
}
#endif

static void axpy_base(float *restrict row, const uint8_t *restrict px, size_t n,
		      float w)
{
	axpy_body(row, px, n, w);
}

static bool warp_simd = true;

void warp_test_simd(bool on)
{
	warp_simd = on;
}

typedef void axpy_fn(float *restrict, const uint8_t *restrict, size_t, float);

static axpy_fn *pick_axpy(void)
{
#if defined(__x86_64__)
	if (warp_simd && __builtin_cpu_supports("avx2"))
		return axpy_avx2;
#endif
	return axpy_base;
}

/*
 * An RGB pixel from the first three lanes: rounded half to even (as
 * torch.round), clamped to bytes.
 */
static inline void store_rgb(uint8_t *o, v4f a)
{
#if defined(__SSE2__)
	__m128i i = _mm_cvtps_epi32((__m128)a); /* MXCSR: nearest even */

	i = _mm_packs_epi32(i, i);
	i = _mm_packus_epi16(i, i);
	uint32_t w = (uint32_t)_mm_cvtsi128_si32(i);

	o[0] = (uint8_t)w, o[1] = (uint8_t)(w >> 8), o[2] = (uint8_t)(w >> 16);
#else
	for (unsigned c = 0; c < 3; c++) {
		float v = nearbyintf(a[c]);

		o[c] = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
	}
#endif
}

/* One grid point: its column's window over a row of the vertical pass. */
static inline v4f dot(const float *vrow, const float *w, int32_t n)
{
	v4f a = { 0, 0, 0, 0 };

	for (int32_t t = 0; t < n; t++, vrow += 3) {
		v4f px, wv = { w[t], w[t], w[t], w[t] };

		memcpy(&px, vrow, sizeof(px));
		a += wv * px;
	}
	return a;
}

int warp_run(const struct warp_src *src, const double m[6], uint32_t s,
	     const struct ispec *sp, uint8_t *out, void *scratch, size_t cap)
{
	int32_t lo[2], hi[2], clo, chi, taps, ch = (int32_t)src->ch;
	struct axis ax, ay;
	unsigned char *p = scratch;
	size_t need, vstride;
	float *vsum;
	v4f fill;
	bool bilinear = sp->interp == ISPEC_INTERP_BILINEAR;
	bool constant = sp->fill == ISPEC_FILL_CONSTANT;
	axpy_fn *axpy = pick_axpy();
	int err;

	if ((ch != 1 && ch != 3) || !src->w || !src->h || !s)
		return -EINVAL;
	warp_reach(sp, m, s, lo, hi);
	taps = (int32_t)max_taps(src->w > src->h ? src->w : src->h, s);
	ax = (struct axis){ .lo = lo[0],
			    .count = hi[0] - lo[0] + 1,
			    .taps = taps };
	ay = (struct axis){ .lo = lo[1],
			    .count = hi[1] - lo[1] + 1,
			    .taps = taps };
	need = axis_bytes((uint32_t)ax.count, (uint32_t)taps) +
	       axis_bytes((uint32_t)ay.count, (uint32_t)taps);
	if (need > cap)
		return -ENOSPC;
	ax.start = (int32_t *)p;
	ax.n = ax.start + ax.count;
	ax.w = (float *)(ax.n + ax.count);
	p += axis_bytes((uint32_t)ax.count, (uint32_t)taps);
	ay.start = (int32_t *)p;
	ay.n = ay.start + ay.count;
	ay.w = (float *)(ay.n + ay.count);
	p += axis_bytes((uint32_t)ay.count, (uint32_t)taps);
	err = axis_build(&ax, src->box[0], src->box[2], s, src->w);
	if (!err)
		err = axis_build(&ay, src->box[1], src->box[3], s, src->h);
	if (err)
		return err;

	/*
	 * The vertical half of the crop's filter, at every grid row the map
	 * reaches, over the source columns its grid columns read: RGB
	 * floats, a row of the pass each (one float of padding, which the
	 * last pixel's four-lane load reads and ignores).
	 */
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
	vstride = 3 * (size_t)(chi - clo) + 4;
	vsum = (float *)(((uintptr_t)p + 31) & ~(uintptr_t)31);
	need = (size_t)((unsigned char *)vsum - (unsigned char *)scratch) +
	       (size_t)ay.count * vstride * sizeof(float);
	if (need > cap)
		return -ENOSPC;
	for (int32_t k = 0; k < ay.count; k++) {
		float *vr = vsum + (size_t)k * vstride;
		const float *w = ay.w + (size_t)k * taps;

		memset(vr, 0, vstride * sizeof(float));
		for (int32_t t = 0; t < ay.n[k]; t++) {
			const uint8_t *row =
				src->px +
				(size_t)(ay.start[k] + t) * src->stride +
				(size_t)clo * ch;

			if (ch == 3) {
				axpy(vr, row, 3 * (size_t)(chi - clo), w[t]);
				continue;
			}
			for (int32_t x = 0; x < chi - clo; x++) {
				float v = w[t] * (float)row[x];

				vr[3 * x] += v;
				vr[3 * x + 1] += v;
				vr[3 * x + 2] += v;
			}
		}
	}

	fill = (v4f){ (float)sp->fill_rgb[0], (float)sp->fill_rgb[1],
		      (float)sp->fill_rgb[2], 0 };
	for (uint32_t v = 0; v < s; v++) {
		double x = m[0] * 0.5 + m[1] * (v + 0.5) + m[2];
		double y = m[3] * 0.5 + m[4] * (v + 0.5) + m[5];
		uint8_t *o = out + (size_t)v * s * 3;

		for (uint32_t u = 0; u < s; u++, o += 3, x += m[0], y += m[3]) {
			int32_t gx[2], gy[2];
			float bx[2], by[2], wf = 0;
			v4f acc = { 0, 0, 0, 0 };
			unsigned nx = 1, ny = 1;

			if (bilinear) {
				double fx, fy;

				gx[0] = ifloor(x - 0.5), gx[1] = gx[0] + 1;
				gy[0] = ifloor(y - 0.5), gy[1] = gy[0] + 1;
				fx = gx[0], fy = gy[0];
				bx[1] = (float)(x - 0.5 - fx),
				bx[0] = 1 - bx[1];
				by[1] = (float)(y - 0.5 - fy),
				by[0] = 1 - by[1];
				nx = bx[1] != 0 ? 2 : 1;
				ny = by[1] != 0 ? 2 : 1;
			} else {
				gx[0] = round_even(x - 0.5);
				gy[0] = round_even(y - 0.5);
				bx[0] = by[0] = 1;
			}
			for (unsigned i = 0; i < nx; i++)
				gx[i] = fold(gx[i], (int32_t)s, lo[0], hi[0],
					     sp->fill);
			for (unsigned k = 0; k < ny; k++)
				gy[k] = fold(gy[k], (int32_t)s, lo[1], hi[1],
					     sp->fill);
			for (unsigned k = 0; k < ny; k++) {
				const float *vr;
				v4f row = { 0, 0, 0, 0 };

				if (gy[k] < 0 && constant) {
					wf += by[k];
					continue;
				}
				vr = vsum + (size_t)(gy[k] - lo[1]) * vstride;
				for (unsigned i = 0; i < nx; i++) {
					int32_t xi = gx[i] - lo[0];
					v4f b = { bx[i], bx[i], bx[i], bx[i] };

					if (gx[i] < 0 && constant) {
						wf += bx[i] * by[k];
						continue;
					}
					row += b *
					       dot(vr + 3 * (size_t)(ax.start[xi] -
								     clo),
						   ax.w + (size_t)xi * taps,
						   ax.n[xi]);
				}
				acc += (v4f){ by[k], by[k], by[k], by[k] } *
				       row;
			}
			acc += (v4f){ wf, wf, wf, wf } * fill;
			store_rgb(o, acc);
		}
	}
	return 0;
}
