/*
 * warp.h - the geometric stages' one resampling pass: the crop, the
 * flips, rotate, affine and the policies' geometric ops, from the decoded
 * image straight to the output, with no image in between.
 *
 * The two-pass chain it stands for is torchvision's: resize the crop to
 * s x s with the antialiased triangle filter (resize.h), then sample that
 * image at each output pixel's inverse-mapped point, bilinear or nearest,
 * with a fill where the point leaves it. Here the crop's s x s image is
 * never made as bytes: its values at the grid points the map reaches are
 * the separable filter evaluated there, straight from the decoded pixels
 * (the vertical half for a grid row, then the horizontal), kept in float,
 * unrounded and unclamped; each output pixel then blends the (up to four)
 * grid points around its point. The same kernel as the chain, composed,
 * in float, rounded once, the fill applying where the composed map leaves
 * the crop. Making each grid point once, rather than inside every pixel
 * that reads it, is what keeps the pass at two loads and a blend a pixel
 * (warp_scratch_bytes() counts the grid). The grid's rows are made a few
 * at a time, just before the first band of output rows that reads them,
 * so that the pixels find them still in cache.
 *
 * Maps are 2 x 3 affine matrices m (x' = m0 x + m1 y + m2, y' = m3 x +
 * m4 y + m5) in area coordinates: pixel i covers [i, i + 1), its centre
 * is i + 0.5. A warp's map takes an output point to the crop's s x s
 * grid, the way torchvision's grid for affine() and rotate() does.
 */
#ifndef LD_WARP_H
#define LD_WARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ispec.h"

/* The identity map. */
void warp_identity(double m[6]);

/* m = m after a: a point goes through a first, then through m. */
void warp_compose(double m[6], const double a[6]);

/*
 * torchvision's _get_inverse_affine_matrix(center, angle, translate,
 * scale, shear): the map from an output point to the input point of
 * affine(angle, translate, scale, shear) about centre (cx, cy), all in
 * area coordinates; angles in degrees.
 */
void warp_affine_inverse(double m[6], double cx, double cy, double angle,
			 double tx, double ty, double scale, double shx,
			 double shy);

/* The decoded pixels a pass reads, and where the crop lies in them. */
struct warp_src {
	const uint8_t *px; /* h rows of w * ch bytes, stride apart */
	size_t stride;
	uint32_t w, h;
	unsigned ch;   /* 1 or 3 */
	double box[4]; /* the crop: x0, y0, x1, y1 in these pixels */
};

/*
 * The crop-grid rectangle a pass with map m reads, as the grid columns
 * and rows [lo[0], hi[0]] x [lo[1], hi[1]] (inclusive): inside 0..s-1,
 * but for fill context, which may reach up to s / 2 beyond each side.
 */
void warp_reach(const struct ispec *sp, const double m[6], uint32_t s,
		int32_t lo[2], int32_t hi[2]);

/*
 * Scratch bytes for a pass to s x s whose grid columns number at most
 * max_cols (s, or 2 s for fill context), over a decoded region of at
 * most max_side pixels a side.
 */
size_t warp_scratch_bytes(uint32_t s, uint32_t max_cols, uint32_t max_side);

/*
 * Resample src through m into out (s x s RGB, rows of s * 3 bytes), with
 * sp's interpolation and fill. Gray sources give gray RGB. Returns 0, or
 * -ENOSPC when the pass needs more than cap bytes of scratch, -EINVAL for
 * a bad source. Allocates nothing.
 */
int warp_run(const struct warp_src *src, const double m[6], uint32_t s,
	     const struct ispec *sp, uint8_t *out, void *scratch, size_t cap);

/*
 * Whether m moves points by whole pixels and does nothing else (x' = x +
 * M2, y' = y + M5, M2 and M5 integers): a pass through it to an s x s
 * output from an s x s image interpolates nothing, and warp_run() copies
 * (but for fill context, which has no pixels around the image to give).
 */
bool warp_is_shift(const double m[6]);

/*
 * Tests only: false makes warp_run() use its portable loops (the default,
 * true, uses AVX2 where the CPU has it); the bytes are the same either
 * way. Not thread-safe.
 */
void warp_test_simd(bool on);

/*
 * Tests only: false makes warp_run() resample a shift as any other map
 * (the default, true, copies it); the bytes are the same either way. Not
 * thread-safe.
 */
void warp_test_shift(bool on);

#endif /* LD_WARP_H */
