/*
 * test_resize.c - the antialiased triangle resampler (pipeline/resize.c)
 * against known images and a plain double-precision reference.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "resize.h"
#include "../unit_util.h"

/* Sizes that exercise shrinking, enlarging, both at once, odd factors. */
static const struct geom {
	uint32_t in_w, in_h, out_w, out_h;
} geoms[] = {
	{ 64, 48, 32, 24 },   /* 2x down */
	{ 100, 75, 33, 17 },  /* odd factors down */
	{ 37, 29, 64, 51 },   /* up */
	{ 80, 20, 23, 57 },   /* down in x, up in y */
	{ 20, 80, 57, 23 },   /* up in x, down in y */
	{ 50, 40, 50, 13 },   /* x unchanged */
	{ 50, 40, 11, 40 },   /* y unchanged */
	{ 1, 1, 7, 5 },	      /* a single pixel */
	{ 300, 7, 1, 1 },     /* everything to one pixel */
	{ 257, 193, 64, 64 }, /* a typical thumbnail */
};

static const unsigned chans[] = { 1, 3, 4 };

#define NGEOMS (sizeof(geoms) / sizeof(geoms[0]))
#define NCHANS (sizeof(chans) / sizeof(chans[0]))

/*
 * Resize with a fresh plan and exactly the scratch the plan asks for, so
 * that a sanitizer build catches any write past it.
 */
static void resize(uint32_t in_w, uint32_t in_h, uint32_t out_w, uint32_t out_h,
		   const uint8_t *src, size_t src_stride, uint8_t *dst,
		   size_t dst_stride, unsigned ch)
{
	struct rsz_plan *p = NULL;
	void *scratch;
	size_t n;

	cr_assert_eq(rsz_plan_new(in_w, in_h, out_w, out_h, &p), 0);
	n = rsz_scratch_size(p, ch);
	scratch = n ? malloc(n) : NULL;
	cr_assert(!n || scratch);
	cr_assert_eq(rsz_run(p, src, src_stride, dst, dst_stride, ch, scratch),
		     0, "%ux%u -> %ux%u, %u channels", in_w, in_h, out_w, out_h,
		     ch);
	free(scratch);
	rsz_plan_free(p);
}

static uint8_t *random_image(size_t n, uint64_t seed)
{
	uint8_t *img = malloc(n ? n : 1);

	cr_assert(img);
	for (size_t i = 0; i < n; i++)
		img[i] = (uint8_t)(ut_rand(&seed) >> 56);
	return img;
}

static double tri(double t)
{
	t = t < 0 ? -t : t;
	return t < 1.0 ? 1.0 - t : 0.0;
}

/*
 * The filter written from its definition: output pixel j of an axis is
 * centred at (j + 0.5) * in / out in input coordinates; input pixel i at
 * i + 0.5 weighs tri(distance / max(1, in / out)); weights are
 * normalised over the whole axis. w gets out * in weights.
 */
static double *ref_weights(uint32_t in, uint32_t out)
{
	double scale = (double)in / out, fs = scale < 1 ? 1 : scale;
	double *w = calloc((size_t)in * out, sizeof(*w));

	cr_assert(w);
	for (uint32_t j = 0; j < out; j++) {
		double c = (j + 0.5) * scale, sum = 0;

		for (uint32_t i = 0; i < in; i++)
			sum += w[(size_t)j * in + i] = tri((i + 0.5 - c) / fs);
		for (uint32_t i = 0; i < in; i++)
			w[(size_t)j * in + i] /= sum;
	}
	return w;
}

/* Both passes in double precision, rounded once at the end. */
static void ref_resize(const struct geom *g, const uint8_t *src, size_t stride,
		       uint8_t *dst, unsigned ch)
{
	double *wx = ref_weights(g->in_w, g->out_w);
	double *wy = ref_weights(g->in_h, g->out_h);
	double *tmp = calloc((size_t)g->in_h * g->out_w * ch, sizeof(*tmp));

	cr_assert(tmp);
	for (uint32_t y = 0; y < g->in_h; y++)
		for (uint32_t j = 0; j < g->out_w; j++)
			for (unsigned c = 0; c < ch; c++) {
				double s = 0;

				for (uint32_t i = 0; i < g->in_w; i++)
					s += wx[(size_t)j * g->in_w + i] *
					     src[y * stride + i * ch + c];
				tmp[((size_t)y * g->out_w + j) * ch + c] = s;
			}
	for (uint32_t k = 0; k < g->out_h; k++)
		for (size_t x = 0; x < (size_t)g->out_w * ch; x++) {
			double s = 0;

			for (uint32_t y = 0; y < g->in_h; y++)
				s += wy[(size_t)k * g->in_h + y] *
				     tmp[(size_t)y * g->out_w * ch + x];
			s = s < 0 ? 0 : s > 255 ? 255 : s;
			dst[(size_t)k * g->out_w * ch + x] = (uint8_t)(s + 0.5);
		}
	free(wx);
	free(wy);
	free(tmp);
}

Test(resize, constant_stays_constant)
{
	static const uint8_t values[] = { 0, 1, 137, 254, 255 };

	for (size_t gi = 0; gi < NGEOMS; gi++) {
		const struct geom *g = &geoms[gi];

		for (size_t ci = 0; ci < NCHANS; ci++) {
			unsigned ch = chans[ci];
			size_t in = (size_t)g->in_w * g->in_h * ch;
			size_t out = (size_t)g->out_w * g->out_h * ch;
			uint8_t *src = malloc(in), *dst = malloc(out);

			cr_assert(src && dst);
			for (size_t vi = 0; vi < sizeof(values); vi++) {
				memset(src, values[vi], in);
				memset(dst, 0x5a, out);
				resize(g->in_w, g->in_h, g->out_w, g->out_h,
				       src, (size_t)g->in_w * ch, dst,
				       (size_t)g->out_w * ch, ch);
				for (size_t i = 0; i < out; i++)
					cr_assert_eq(
						dst[i], values[vi],
						"%ux%u -> %ux%u ch %u value %u: byte %zu is %u",
						g->in_w, g->in_h, g->out_w,
						g->out_h, ch, values[vi], i,
						dst[i]);
			}
			free(src);
			free(dst);
		}
	}
}

Test(resize, identity_is_exact_copy)
{
	for (size_t ci = 0; ci < NCHANS; ci++) {
		unsigned ch = chans[ci];
		uint32_t w = 61, h = 43;
		/* Padded strides on both sides: only the pixels are copied. */
		size_t ss = w * ch + 5, ds = w * ch + 11;
		uint8_t *src = random_image(ss * h, 7 + ch);
		uint8_t *dst = malloc(ds * h);

		cr_assert(dst);
		memset(dst, 0xee, ds * h);
		resize(w, h, w, h, src, ss, dst, ds, ch);
		for (uint32_t y = 0; y < h; y++) {
			cr_assert_arr_eq(dst + y * ds, src + y * ss, w * ch,
					 "row %u, %u channels", y, ch);
			for (size_t i = w * ch; i < ds; i++)
				cr_assert_eq(dst[y * ds + i], 0xee,
					     "padding written in row %u", y);
		}
		free(src);
		free(dst);
	}
}

/*
 * Shrinking a linear ramp by 2 with a symmetric filter gives the value
 * at each 2x2 block's centre, which is the block's mean. The first and
 * last outputs of each axis see the border, so only interior ones count.
 */
Test(resize, half_of_ramp_is_block_mean)
{
	enum { W = 64, H = 48 };
	uint8_t src[W * H], dst[(W / 2) * (H / 2)];

	for (unsigned y = 0; y < H; y++)
		for (unsigned x = 0; x < W; x++)
			src[y * W + x] = (uint8_t)(10 + 2 * x + 2 * y);
	resize(W, H, W / 2, H / 2, src, W, dst, W / 2, 1);
	for (unsigned y = 1; y + 1 < H / 2; y++)
		for (unsigned x = 1; x + 1 < W / 2; x++) {
			const uint8_t *b = src + 2 * y * W + 2 * x;
			unsigned mean = (b[0] + b[1] + b[W] + b[W + 1]) / 4;

			cr_assert_eq(dst[y * (W / 2) + x], mean,
				     "(%u,%u): %u, block mean %u", x, y,
				     dst[y * (W / 2) + x], mean);
		}
}

/* A one-pixel checkerboard averages to mid-grey once shrunk by 2. */
Test(resize, half_of_checkerboard_is_grey)
{
	enum { W = 40, H = 40, CH = 3 };
	uint8_t src[W * H * CH], dst[(W / 2) * (H / 2) * CH];

	for (unsigned y = 0; y < H; y++)
		for (unsigned x = 0; x < W; x++)
			memset(src + (y * W + x) * CH, (x + y) & 1 ? 255 : 0,
			       CH);
	resize(W, H, W / 2, H / 2, src, W * CH, dst, (W / 2) * CH, CH);
	for (unsigned y = 1; y + 1 < H / 2; y++)
		for (unsigned x = 1; x + 1 < W / 2; x++)
			for (unsigned c = 0; c < CH; c++) {
				uint8_t v = dst[(y * (W / 2) + x) * CH + c];

				cr_assert(v == 127 || v == 128,
					  "(%u,%u,%u): %u", x, y, c, v);
			}
}

/* Enlarging never reorders values: a ramp stays a ramp in x and in y. */
Test(resize, upscaled_ramp_stays_monotone)
{
	enum { W = 13, H = 9, OW = 100, OH = 71 };
	uint8_t src[W * H], dst[OW * OH];

	for (unsigned y = 0; y < H; y++)
		for (unsigned x = 0; x < W; x++)
			src[y * W + x] = (uint8_t)(x * x / 2 + 2 * y * y);
	resize(W, H, OW, OH, src, W, dst, OW, 1);
	for (unsigned y = 0; y < OH; y++)
		for (unsigned x = 0; x < OW; x++) {
			uint8_t v = dst[y * OW + x];

			if (x)
				cr_assert_geq(v, dst[y * OW + x - 1],
					      "x falls at (%u,%u)", x, y);
			if (y)
				cr_assert_geq(v, dst[(y - 1) * OW + x],
					      "y falls at (%u,%u)", x, y);
		}
	cr_assert_eq(dst[0], src[0]);
	cr_assert_eq(dst[OW * OH - 1], src[W * H - 1]);
}

Test(resize, matches_double_reference)
{
	for (size_t gi = 0; gi < NGEOMS; gi++) {
		const struct geom *g = &geoms[gi];

		for (size_t ci = 0; ci < NCHANS; ci++) {
			unsigned ch = chans[ci];
			size_t ss = (size_t)g->in_w * ch + 3;
			size_t out = (size_t)g->out_w * g->out_h * ch;
			uint8_t *src = random_image(ss * g->in_h, gi * 8 + ch);
			uint8_t *dst = malloc(out), *ref = malloc(out);
			int worst = 0;

			cr_assert(dst && ref);
			/* Smooth the noise a little so both extremes occur. */
			ut_picture(src, (unsigned)(ss / ch), g->in_h, ch,
				   (unsigned)gi);
			for (size_t i = 0; i < ss * g->in_h; i += 7)
				src[i] ^= (uint8_t)(i * 131);
			resize(g->in_w, g->in_h, g->out_w, g->out_h, src, ss,
			       dst, (size_t)g->out_w * ch, ch);
			ref_resize(g, src, ss, ref, ch);
			for (size_t i = 0; i < out; i++) {
				int e = abs((int)dst[i] - (int)ref[i]);

				worst = e > worst ? e : worst;
			}
			cr_assert_leq(worst, 1,
				      "%ux%u -> %ux%u ch %u: off by %d",
				      g->in_w, g->in_h, g->out_w, g->out_h, ch,
				      worst);
			free(src);
			free(dst);
			free(ref);
		}
	}
}

/*
 * A crop is a pointer into the image and the crop's size: the result is
 * the same as resizing a copy of the rectangle, so nothing outside it
 * leaks in.
 */
Test(resize, crop_by_pointer_equals_copied_crop)
{
	enum { W = 90, H = 70, CH = 3, X = 17, Y = 9 };
	enum { CROP_W = 41, CROP_H = 33, OW = 24, OH = 19 };
	uint8_t *img = random_image(W * H * CH, 99);
	uint8_t crop[CROP_W * CROP_H * CH], a[OW * OH * CH], b[OW * OH * CH];

	for (unsigned y = 0; y < CROP_H; y++)
		memcpy(crop + y * CROP_W * CH, img + ((Y + y) * W + X) * CH,
		       CROP_W * CH);
	resize(CROP_W, CROP_H, OW, OH, img + (Y * W + X) * CH, W * CH, a,
	       OW * CH, CH);
	resize(CROP_W, CROP_H, OW, OH, crop, CROP_W * CH, b, OW * CH, CH);
	cr_assert_arr_eq(a, b, sizeof(a));
	free(img);
}

Test(resize, bad_arguments)
{
	static struct rsz_plan *const sentinel = (struct rsz_plan *)1;
	struct rsz_plan *p = sentinel;
	uint8_t px[16] = { 0 }, out[16];

	cr_assert_eq(rsz_plan_new(0, 4, 4, 4, &p), -EINVAL);
	cr_assert_null(p);
	cr_assert_eq(rsz_plan_new(4, 4, 4, RSZ_MAX_SIDE + 1, &p), -EINVAL);
	cr_assert_eq(rsz_plan_new(4, 4, 2, 2, &p), 0);
	cr_assert_eq(rsz_scratch_size(p, 2), 0);
	cr_assert_eq(rsz_run(p, px, 4, out, 2, 2, NULL), -EINVAL);
	cr_assert_eq(rsz_run(p, px, 3, out, 2, 1, NULL), -EINVAL,
		     "a source stride shorter than a row");
	rsz_plan_free(p);
	rsz_plan_free(NULL);
}

/* The scratch a plan asks for is a few rows, not the whole image. */
Test(resize, scratch_is_a_window)
{
	struct rsz_plan *p;

	cr_assert_eq(rsz_plan_new(4000, 3000, 224, 168, &p), 0);
	cr_assert_lt(rsz_scratch_size(p, 3), (size_t)64 * 224 * 3);
	rsz_plan_free(p);
	cr_assert_eq(rsz_plan_new(640, 480, 320, 480, &p), 0);
	cr_assert_eq(rsz_scratch_size(p, 3), 0, "height unchanged");
	rsz_plan_free(p);
}
