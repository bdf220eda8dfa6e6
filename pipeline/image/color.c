/*
 * color.c - the colour stages (color.h), as torchvision 0.14 computes
 * them on uint8 tensors. The arithmetic is float32, as torch's is when a
 * uint8 tensor meets a Python float, and a result goes back to uint8 by
 * clamping and truncating (Tensor.to(torch.uint8)).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

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

static void brightness(uint8_t *p, size_t n, double f)
{
	struct ratio r = ratio_of(f);

	for (size_t i = 0; i < n * 3; i++)
		p[i] = blend(p[i], 0.0f, r);
}

static void contrast(uint8_t *p, size_t n, double f)
{
	struct ratio r = ratio_of(f);
	double sum = 0;
	float mean;

	/* The mean of the truncated grayscale image. */
	for (size_t i = 0; i < n; i++)
		sum += gray_of(p + 3 * i);
	mean = (float)(sum / (double)n);
	for (size_t i = 0; i < n * 3; i++)
		p[i] = blend(p[i], mean, r);
}

static void saturation(uint8_t *p, size_t n, double f)
{
	struct ratio r = ratio_of(f);

	for (size_t i = 0; i < n; i++, p += 3) {
		float g = gray_of(p);

		p[0] = blend(p[0], g, r);
		p[1] = blend(p[1], g, r);
		p[2] = blend(p[2], g, r);
	}
}

/* torch.remainder(a, 1.0): a - floor(a) in float32. */
static inline float rem1(float a)
{
	return a - floorf(a);
}

/* adjust_hue() of one pixel: _rgb2hsv, the shift, _hsv2rgb, x 255. */
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

static void hue(uint8_t *p, size_t n, double shift)
{
	for (size_t i = 0; i < n; i++)
		hue_px(p + 3 * i, (float)shift);
}

static void grayscale(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++, p += 3)
		p[0] = p[1] = p[2] = gray_of(p);
}

/* torch.round() (half to even) and .to(torch.uint8) of a conv's result. */
static inline uint8_t round_u8(float v)
{
	return to_u8(nearbyintf(v));
}

/*
 * autocontrast(): per channel, (x - min) * (255 / (max - min)), float32,
 * clamped and truncated; a channel with max == min is left as it is.
 */
static void autocontrast(uint8_t *p, size_t n)
{
	for (unsigned c = 0; c < 3; c++) {
		uint8_t lo = 255, hi = 0;
		float scale, minimum;

		for (size_t i = 0; i < n; i++) {
			uint8_t v = p[3 * i + c];

			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		if (lo == hi)
			continue; /* scale inf: min 0, scale 1, the same */
		minimum = lo;
		scale = 255.0f / ((float)hi - minimum);
		for (size_t i = 0; i < n; i++)
			p[3 * i + c] =
				to_u8(((float)p[3 * i + c] - minimum) * scale);
	}
}

/*
 * equalize(): per channel, _scale_channel(): a histogram, step =
 * floor(the count of all but the last nonzero bin / 255), the table
 * floor((cumsum + floor(step / 2)) / step) shifted one place right and
 * clamped to 255; a step of 0 leaves the channel as it is.
 */
static void equalize(uint8_t *p, size_t n)
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

/*
 * adjust_sharpness(): a blend with the image whose inside pixels are the
 * 3 x 3 smoothing [[1,1,1],[1,5,1],[1,1,1]] / 13 (float32, rounded half
 * to even), the border kept; images of 2 pixels or fewer a side as they
 * are.
 */
static void sharpness(uint8_t *p, uint32_t w, uint32_t h, double f,
		      uint8_t *tmp)
{
	float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
	struct ratio r = ratio_of(f);
	size_t row = (size_t)w * 3;

	if (w <= 2 || h <= 2)
		return;
	memcpy(tmp, p, row * h);
	for (uint32_t y = 1; y + 1 < h; y++)
		for (uint32_t x = 1; x + 1 < w; x++)
			for (unsigned c = 0; c < 3; c++) {
				const uint8_t *q = p + y * row + x * 3 + c;
				float s = 0;

				for (int dy = -1; dy <= 1; dy++)
					for (int dx = -1; dx <= 1; dx++)
						s += (dy || dx ? k1 : k5) *
						     (float)q[dy * (long)row +
							      dx * 3];
				tmp[y * row + x * 3 + c] = round_u8(s);
			}
	for (size_t i = 0; i < row * h; i++)
		p[i] = blend(p[i], (float)tmp[i], r);
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

size_t color_scratch_bytes(uint32_t s)
{
	size_t side = (size_t)s + 2 * (COLOR_BLUR_MAX / 2);

	/* The padded image (gaussian_blur), then a row of sums. */
	return side * side * 3 + 16 + (size_t)s * 3 * sizeof(float);
}

/*
 * gaussian_blur(): the 2-D kernel outer(k, k) of the 1-D one
 * exp(-0.5 (x / sigma)^2) / sum over x = -(K-1)/2 .. (K-1)/2, float32,
 * over the image padded by reflection, rounded half to even. The image
 * is padded once, and each output row sums its taps over whole rows (a
 * loop the compiler vectorizes); torch's conv2d adds the same products
 * in another order, which may move a value by one.
 */
static void gaussian_blur(uint8_t *p, uint32_t w, uint32_t h, unsigned k,
			  double sigma, uint8_t *tmp)
{
	float k1[COLOR_BLUR_MAX] = { 0 }, sum = 0, sg = (float)sigma;
	long half = (long)k / 2, row = (long)w * 3;
	long pw = (long)w + 2 * half, prow = pw * 3;
	uint8_t *pad = tmp;
	float *acc = (float *)(void *)(tmp + ((size_t)((long)h + 2 * half) *
						      (size_t)prow +
					      15) / 16 *
						     16);

	for (unsigned i = 0; i < k; i++) {
		float x = (float)i - (float)(k - 1) * 0.5f;
		float t = x / sg;

		k1[i] = expf(-0.5f * (t * t));
		sum += k1[i];
	}
	for (unsigned i = 0; i < k; i++)
		k1[i] /= sum;
	for (long y = 0; y < (long)h + 2 * half; y++) {
		const uint8_t *src = p + reflect(y - half, h) * row;
		uint8_t *dst = pad + y * prow;

		for (long x = 0; x < pw; x++)
			memcpy(dst + x * 3, src + reflect(x - half, w) * 3, 3);
	}
	for (long y = 0; y < (long)h; y++) {
		for (long i = 0; i < row; i++)
			acc[i] = 0;
		for (long dy = 0; dy < (long)k; dy++) {
			const uint8_t *src = pad + (y + dy) * prow;

			for (long dx = 0; dx < (long)k; dx++) {
				float kk = k1[dy] * k1[dx];
				const uint8_t *s = src + dx * 3;

				for (long i = 0; i < row; i++)
					acc[i] += kk * (float)s[i];
			}
		}
		for (long i = 0; i < row; i++)
			p[y * row + i] = round_u8(acc[i]);
	}
}

/*
 * Keras' apply_channel_shift(): every channel moved by the same shift,
 * clipped to the image's own [min, max] (over all channels); rounded to
 * the nearest value here (Keras keeps floats).
 */
static void channel_shift(uint8_t *p, size_t n, double shift)
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

void color_apply(const struct ispec_op *op, const struct color_draw *dr,
		 uint8_t *rgb, uint32_t w, uint32_t h, uint8_t *tmp)
{
	size_t n = (size_t)w * h;

	if (!dr->apply || !n)
		return;
	switch (op->kind) {
	case ISPEC_OP_BRIGHTNESS: brightness(rgb, n, dr->f[0]); break;
	case ISPEC_OP_CONTRAST: contrast(rgb, n, dr->f[0]); break;
	case ISPEC_OP_SATURATION: saturation(rgb, n, dr->f[0]); break;
	case ISPEC_OP_HUE: hue(rgb, n, dr->f[0]); break;
	case ISPEC_OP_JITTER:
		for (unsigned i = 0; i < dr->n; i++) {
			unsigned c = dr->order[i];
			double f = dr->f[c];

			if (c == C_B)
				brightness(rgb, n, f);
			else if (c == C_C)
				contrast(rgb, n, f);
			else if (c == C_S)
				saturation(rgb, n, f);
			else
				hue(rgb, n, f);
		}
		break;
	case ISPEC_OP_GRAYSCALE: grayscale(rgb, n); break;
	case ISPEC_OP_INVERT:
		for (size_t i = 0; i < n * 3; i++)
			rgb[i] = (uint8_t)(255 - rgb[i]);
		break;
	case ISPEC_OP_POSTERIZE: {
		uint8_t mask = (uint8_t)(0xff << (8 - (unsigned)op->a[0]));

		for (size_t i = 0; i < n * 3; i++)
			rgb[i] &= mask;
		break;
	}
	case ISPEC_OP_SOLARIZE: {
		float t = (float)op->a[0];

		for (size_t i = 0; i < n * 3; i++)
			if ((float)rgb[i] >= t)
				rgb[i] = (uint8_t)(255 - rgb[i]);
		break;
	}
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
