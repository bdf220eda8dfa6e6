/*
 * augment.h - augmentation parameters: where to crop and whether to flip,
 * with torchvision's semantics (RandomResizedCrop.get_params, Resize of
 * the shorter side + CenterCrop, RandomHorizontalFlip).
 *
 * These are pure functions: they touch no pixels, allocate nothing and
 * keep no state. Every random number comes from the struct rng passed in,
 * which the caller seeds per sample with order_sample_seed(). The draws
 * are taken in a fixed sequence (documented at each function), so the
 * same seed gives the same parameters on any thread, in any order, on
 * any machine. Call them in a fixed order on one rng (e.g. augment_rrc()
 * then augment_flip()) and the whole sample's augmentation is reproducible.
 */
#ifndef LD_AUGMENT_H
#define LD_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "rng.h"

/*
 * A rectangle in source-image pixel coordinates: x, y is the top-left
 * corner, w, h the size. augment_rrc() gives integral values (whole pixels,
 * as torchvision); augment_resize_center() gives fractional ones.
 */
struct augment_rect {
	double x, y, w, h;
};

/*
 * Round to the nearest integer, ties to even (Python 3's round()):
 * 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0, -1.5 -> -2. Independent of
 * the floating-point rounding mode. NaN and infinities come back as is.
 */
double augment_round_half_even(double x);

/*
 * RandomResizedCrop.get_params for a width x height image: up to 10
 * tries of area fraction U[scale_lo, scale_hi) and log-aspect
 * U[log ratio_lo, log ratio_hi); the first crop that fits is placed
 * uniformly (top, then left, inclusive bounds). If none fits, the
 * center crop of the image clamped to the ratio range (torchvision's
 * fallback). The result in *out is integral, non-empty and inside the
 * image.
 *
 * Draws from r, in order: per try, rng_unit (scale) then rng_unit
 * (aspect); on the accepted try, rng_below (top) then rng_below (left).
 * The fallback draws nothing more. So the count of draws varies, but
 * is a function of the seed alone.
 *
 * Returns 0, or -EINVAL if width or height is 0, the scale range is not
 * 0 <= scale_lo <= scale_hi, or the ratio range is not
 * 0 < ratio_lo <= ratio_hi (all finite); then r and *out are untouched.
 */
int augment_rrc(struct rng *r, uint32_t width, uint32_t height, double scale_lo,
		double scale_hi, double ratio_lo, double ratio_hi,
		struct augment_rect *out);

/*
 * The evaluation path: Resize so the shorter side is resize_short (the
 * longer one becomes int(resize_short * long / short), truncated, as
 * torchvision), then CenterCrop(crop) with torchvision's offsets
 * int(round((side - crop) / 2.0)), ties to even.
 *
 * *rw, *rh get the intermediate resized size. *out gets the crop as a
 * rectangle of the ORIGINAL image (fractional): resizing that rectangle
 * of the original straight to crop x crop samples the same pixel grid
 * as resize-then-crop, so a decoder can do it in one step.
 *
 * Draws nothing. Returns 0, or -EINVAL if any size is 0, the crop is
 * larger than the resized shorter side (torchvision would pad; we do
 * not), or the resized longer side does not fit in 32 bits.
 */
int augment_resize_center(uint32_t width, uint32_t height,
			  uint32_t resize_short, uint32_t crop,
			  struct augment_rect *out, uint32_t *rw, uint32_t *rh);

/*
 * RandomHorizontalFlip: true with probability p (rng_unit(r) < p). Always
 * takes exactly one rng_unit draw, even for p <= 0 or p >= 1, so later
 * draws do not depend on p.
 */
bool augment_flip(struct rng *r, double p);

#endif /* LD_AUGMENT_H */
