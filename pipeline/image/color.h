/*
 * color.h - the colour stages of the image pipeline (ispec.h: brightness,
 * contrast, saturation, hue, jitter, grayscale, invert, posterize,
 * solarize), with torchvision 0.14's semantics on uint8 images
 * (torchvision/transforms/functional_tensor.py): ColorJitter's factor
 * ranges and random order, _blend()'s float32 arithmetic truncated back
 * to uint8, rgb_to_grayscale()'s 0.2989/0.587/0.114 weights truncated,
 * adjust_hue()'s HSV round trip through float32 and its x 255 back,
 * posterize's bit mask, solarize's threshold, autocontrast's and
 * equalize's per-channel tables, adjust_sharpness()'s 3 x 3 smoothing,
 * gaussian_blur()'s reflect-padded kernel; Keras' apply_channel_shift()
 * for channel_shift.
 *
 * Each stage's parameters are drawn first, for every stage of the spec
 * in order, from the sample's rng after the geometry's draws (so that
 * what a sample gets depends on its seed alone, and can be told without
 * its pixels: color_explain()); they are applied to the resized RGB
 * image, in place, afterwards.
 */
#ifndef LD_COLOR_H
#define LD_COLOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ispec.h"
#include "rng.h"

/* The largest gaussian_blur kernel (ispec.c checks it). */
#define COLOR_BLUR_MAX 31

/* What one colour stage drew for one sample. */
struct color_draw {
	bool apply;	  /* its probability came up */
	uint8_t order[4]; /* jitter: the components' order (0 b, 1 c, 2 s, 3 h) */
	uint8_t n;	  /* jitter: how many components it has (range > 0) */
	double f[4];	  /* the factors: b, c, s, h (a single stage: f[0]) */
};

/*
 * Draw op's parameters from r. Draws, in order: one rng_unit (whether it
 * applies, < p); then, whether it applies or not, the parameters:
 * brightness, contrast, saturation: one rng_unit for the factor in
 * [max(0, 1 - X), 1 + X]; hue: one for the shift in [-H, H]; jitter: a
 * permutation of its four components (rng_below for each place, as a
 * Fisher-Yates shuffle), then one rng_unit per component whose range is
 * not 0, in the order b, c, s, h (ColorJitter draws none for a range of
 * 0, and leaves that component out); gaussian_blur: one for its sigma
 * in [LO, HI]; channel_shift: one for its shift in [-X, X]; the others
 * draw nothing more.
 */
void color_draw(const struct ispec_op *op, struct rng *r,
		struct color_draw *out);

/* The scratch color_apply() needs for an image of side s. */
size_t color_scratch_bytes(uint32_t s);

/*
 * Apply op, as drawn, to rgb: w x h pixels, 3 bytes each (RGB, rows of
 * w * 3 bytes, back to back). Nothing when it does not apply. tmp:
 * color_scratch_bytes(max(w, h)) bytes, 16-byte aligned (sharpness,
 * gaussian_blur, vflip).
 */
void color_apply(const struct ispec_op *op, const struct color_draw *dr,
		 uint8_t *rgb, uint32_t w, uint32_t h, uint8_t *tmp);

/*
 * Tests only: false makes color_apply() use its portable loops (the
 * default, true, uses AVX2 where the CPU has it); the bytes are the same
 * either way. Not thread-safe.
 */
void color_test_simd(bool on);

/*
 * What op drew, as one line of text (no newline): the stage's name, 1 or
 * 0 for whether it applies, then its parameters: "brightness 1 1.2345",
 * "jitter 1 order 2,0,3,1 b 1.1 c 0.9 s 1.3 h -0.02" (components with a
 * range of 0 left out), "posterize 0 4". Returns the length, as
 * snprintf.
 */
int color_explain(const struct ispec_op *op, const struct color_draw *dr,
		  char *buf, size_t n);

#endif /* LD_COLOR_H */
