/*
 * augment.c - augmentation parameters with torchvision's semantics.
 *
 * The code follows torchvision's transforms step by step (the formulas
 * are quoted next to each), because the point is that a model trained
 * with torchvision sees the same distribution of crops from us.
 */
#include <errno.h>
#include <math.h>

#include "augment.h"

#define AUGMENT_TRIES 10

double augment_round_half_even(double x)
{
	double f, d, res;

	if (!isfinite(x))
		return x;
	/*
	 * Not rint()/nearbyint(): they follow the current rounding mode,
	 * which a caller may have changed. x - floor(x) is exact for every
	 * double (it is x's fraction bits), so the tie test is exact too.
	 */
	f = floor(x);
	d = x - f;
	if (d < 0.5)
		res = f;
	else if (d > 0.5)
		res = f + 1.0;
	else
		res = fmod(f, 2.0) == 0.0 ? f : f + 1.0;
	/* Python keeps the sign of a rounded-to-zero value: round(-0.4) == -0.0. */
	return res == 0.0 ? copysign(0.0, x) : res;
}

static bool range_ok(double lo, double hi)
{
	return isfinite(lo) && isfinite(hi) && lo <= hi;
}

/* Python's int(round(v)) for v >= 0, clamped to [1, max]. */
static uint32_t side(double v, uint32_t max)
{
	double s = augment_round_half_even(v);

	/*
	 * torchvision would hand a 0-pixel side on to the resize and fail
	 * there; only absurd ratio ranges (e.g. 1000:1 on a small image) get
	 * here, and one pixel is the closest crop that still works.
	 */
	if (!(s >= 1.0))
		return 1;
	if (s > (double)max)
		return max;
	return (uint32_t)s;
}

int augment_rrc(struct rng *r, uint32_t width, uint32_t height, double scale_lo,
		double scale_hi, double ratio_lo, double ratio_hi,
		struct augment_rect *out)
{
	double area = (double)width * (double)height;
	double lr_lo, lr_hi, in_ratio;
	uint32_t cw, ch;

	if (!width || !height || !range_ok(scale_lo, scale_hi) ||
	    scale_lo < 0.0 || !range_ok(ratio_lo, ratio_hi) || ratio_lo <= 0.0)
		return -EINVAL;

	lr_lo = log(ratio_lo);
	lr_hi = log(ratio_hi);
	for (int i = 0; i < AUGMENT_TRIES; i++) {
		/*
		 * target_area = area * uniform(scale); aspect = exp(uniform(
		 * log(ratio))); w = int(round(sqrt(target_area * aspect))),
		 * h = int(round(sqrt(target_area / aspect))). The scale draw
		 * comes first, as in torchvision.
		 */
		double target =
			area * (scale_lo + (scale_hi - scale_lo) * rng_unit(r));
		double aspect = exp(lr_lo + (lr_hi - lr_lo) * rng_unit(r));
		double w = augment_round_half_even(sqrt(target * aspect));
		double h = augment_round_half_even(sqrt(target / aspect));

		/* Compared as doubles: a huge scale must not wrap a uint32. */
		if (w > 0.0 && w <= (double)width && h > 0.0 &&
		    h <= (double)height) {
			/* torch.randint(0, height - h + 1), then the same for
			 * the left edge: both ends inclusive. */
			cw = (uint32_t)w;
			ch = (uint32_t)h;
			out->y = (double)rng_below(r,
						   (uint64_t)(height - ch) + 1);
			out->x = (double)rng_below(r,
						   (uint64_t)(width - cw) + 1);
			out->w = w;
			out->h = h;
			return 0;
		}
	}

	/*
	 * Fallback, torchvision's central crop: clamp the image's own aspect
	 * ratio to [min(ratio), max(ratio)] keeping the side that fits.
	 */
	in_ratio = (double)width / (double)height;
	if (in_ratio < ratio_lo) {
		cw = width;
		ch = side((double)cw / ratio_lo, height);
	} else if (in_ratio > ratio_hi) {
		ch = height;
		cw = side((double)ch * ratio_hi, width);
	} else {
		cw = width;
		ch = height;
	}
	/* (height - h) // 2: floor division of non-negative integers. */
	out->y = (double)((height - ch) / 2);
	out->x = (double)((width - cw) / 2);
	out->w = (double)cw;
	out->h = (double)ch;
	return 0;
}

int augment_resize_center(uint32_t width, uint32_t height,
			  uint32_t resize_short, uint32_t crop,
			  struct augment_rect *out, uint32_t *rw, uint32_t *rh)
{
	uint32_t s_in, l_in, top, left;
	double l_out;

	if (!width || !height || !resize_short || !crop || crop > resize_short)
		return -EINVAL;

	/*
	 * torchvision's _compute_resized_output_size: short, long = (w, h)
	 * if w <= h else (h, w); new_long = int(size * long / short). Python
	 * multiplies exactly and divides once, correctly rounded; the 64-bit
	 * product is exact in a double below 2^53, far beyond real images.
	 */
	s_in = width <= height ? width : height;
	l_in = width <= height ? height : width;
	l_out = floor((double)((uint64_t)resize_short * l_in) / (double)s_in);
	if (l_out > (double)UINT32_MAX)
		return -EINVAL;
	if (width <= height) {
		*rw = resize_short;
		*rh = (uint32_t)l_out;
	} else {
		*rw = (uint32_t)l_out;
		*rh = resize_short;
	}

	/* center_crop: int(round((image_side - crop) / 2.0)), ties to even. */
	top = (uint32_t)augment_round_half_even((double)(*rh - crop) / 2.0);
	left = (uint32_t)augment_round_half_even((double)(*rw - crop) / 2.0);

	/*
	 * Resizing maps resized pixel edge u to original edge u * in / out
	 * (PIL and torchvision both scale by in/out with pixel centres at
	 * +0.5), so resized columns [left, left + crop) are original
	 * [left * w / rw, (left + crop) * w / rw).
	 */
	out->x = (double)left * width / *rw;
	out->y = (double)top * height / *rh;
	out->w = (double)crop * width / *rw;
	out->h = (double)crop * height / *rh;
	return 0;
}

bool augment_flip(struct rng *r, double p)
{
	/* torchvision: if torch.rand(1) < self.p. One draw whatever p is. */
	return rng_unit(r) < p;
}
