/*
 * test_resize.c - the antialiased triangle resampler (pipeline/image/resize.c)
 * against known images and a plain double-precision reference, for whole
 * images and boxes; its plans in caller memory; and its SIMD loops
 * against its portable ones.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "resize.h"
#include "../../unit_util.h"

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

/*
 * The same for a box, as PIL defines it: the box's corners are single
 * precision; output j is centred at x0 + (j + 0.5) * scale with scale =
 * (x1 - x0) / out; the filter reaches over the whole image, not only the
 * box.
 */
static double *ref_box_weights(uint32_t in, double x0, double x1, uint32_t out)
{
	float f0 = (float)x0, f1 = (float)x1;
	double scale = (double)(f1 - f0) / out, fs = scale < 1 ? 1 : scale;
	double *w = calloc((size_t)in * out, sizeof(*w));

	cr_assert(w);
	for (uint32_t j = 0; j < out; j++) {
		double c = f0 + (j + 0.5) * scale, sum = 0;

		for (uint32_t i = 0; i < in; i++)
			sum += w[(size_t)j * in + i] = tri((i + 0.5 - c) / fs);
		for (uint32_t i = 0; i < in; i++)
			w[(size_t)j * in + i] /= sum;
	}
	return w;
}

/*
 * Both passes in double precision with weights wx (out_w x in_w) and wy
 * (out_h x in_h), rounded once at the end. Both are freed.
 */
static void ref_apply(double *wx, double *wy, uint32_t in_w, uint32_t in_h,
		      uint32_t out_w, uint32_t out_h, const uint8_t *src,
		      size_t stride, uint8_t *dst, unsigned ch)
{
	double *tmp = calloc((size_t)in_h * out_w * ch, sizeof(*tmp));

	cr_assert(tmp);
	for (uint32_t y = 0; y < in_h; y++)
		for (uint32_t j = 0; j < out_w; j++)
			for (unsigned c = 0; c < ch; c++) {
				const double *w = wx + (size_t)j * in_w;
				double s = 0;

				for (uint32_t i = 0; i < in_w; i++)
					if (w[i] != 0)
						s += w[i] * src[y * stride +
								i * ch + c];
				tmp[((size_t)y * out_w + j) * ch + c] = s;
			}
	for (uint32_t k = 0; k < out_h; k++)
		for (size_t x = 0; x < (size_t)out_w * ch; x++) {
			const double *w = wy + (size_t)k * in_h;
			double s = 0;

			for (uint32_t y = 0; y < in_h; y++)
				if (w[y] != 0)
					s += w[y] *
					     tmp[(size_t)y * out_w * ch + x];
			s = s < 0 ? 0 : s > 255 ? 255 : s;
			dst[(size_t)k * out_w * ch + x] = (uint8_t)(s + 0.5);
		}
	free(wx);
	free(wy);
	free(tmp);
}

static void ref_resize(const struct geom *g, const uint8_t *src, size_t stride,
		       uint8_t *dst, unsigned ch)
{
	ref_apply(ref_weights(g->in_w, g->out_w),
		  ref_weights(g->in_h, g->out_h), g->in_w, g->in_h, g->out_w,
		  g->out_h, src, stride, dst, ch);
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
	cr_assert_eq(rsz_scratch_bytes(4, 2, 2, 2), 0, "a bad channel count");
	cr_assert_eq(rsz_scratch_bytes(0, 2, 2, 3), 0, "a bad size");
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

/*
 * FNV-1a hashes of what the resampler produced before plans could hold
 * boxes (commit 6e48811), for random images (random_image(n, 1000 + 16 *
 * index + channels)) of these sizes with 1, 3 and 4 channels. Whole-image
 * plans, however built, must still give those very bytes.
 */
static const struct {
	uint32_t in_w, in_h, out_w, out_h;
	uint64_t fnv[3];
} before[] = {
	{ 64,
	  48,
	  32,
	  24,
	  { 0x587dedc52be9fef4ull, 0x2e5d0ab92f2900e1ull,
	    0x8c7713a910524469ull } },
	{ 100,
	  75,
	  33,
	  17,
	  { 0xabd179e373556e3aull, 0x88c5e34d2cb19d9eull,
	    0xd9e6de9bfe50ad13ull } },
	{ 37,
	  29,
	  64,
	  51,
	  { 0x32cc9ccb7f388f8eull, 0xd7e63283752dde09ull,
	    0x59ceb62db711fda2ull } },
	{ 80,
	  20,
	  23,
	  57,
	  { 0x0ce8cd7b10d2a2fdull, 0x06579acf1f830314ull,
	    0x7ab8acfeea0434cfull } },
	{ 20,
	  80,
	  57,
	  23,
	  { 0xec49cbde7602a944ull, 0x440354eb098fd029ull,
	    0x936326b91087849full } },
	{ 50,
	  40,
	  50,
	  13,
	  { 0xee1c034fb71c77a8ull, 0x0f51ef6a333b141dull,
	    0xcfd21142bdf8b53aull } },
	{ 50,
	  40,
	  11,
	  40,
	  { 0x4894c8c5b8f50929ull, 0x75d84d015effbb22ull,
	    0x7bd811a29b938e3aull } },
	{ 1,
	  1,
	  7,
	  5,
	  { 0xd1478596402047a5ull, 0x8777f14536a12c55ull,
	    0xd78f597ca5f3e651ull } },
	{ 300,
	  7,
	  1,
	  1,
	  { 0xaf63f34c860213a1ull, 0x25e20e1adb93f22bull,
	    0x482c7237b0184472ull } },
	{ 257,
	  193,
	  64,
	  64,
	  { 0x62e28d9d030b9ff9ull, 0xc8b6522f6562aa87ull,
	    0x357d4d513bbad1ceull } },
	{ 375,
	  500,
	  224,
	  224,
	  { 0x2c6a4474e593514eull, 0xb3eb146bab08b220ull,
	    0xa5c22e1bffe94a70ull } },
	{ 448,
	  448,
	  224,
	  224,
	  { 0xdbf6f7f82798aa7aull, 0xbebc0d5328563a7bull,
	    0x8b3d4fa52552fe49ull } },
	{ 300,
	  260,
	  224,
	  224,
	  { 0xe95278a68a159667ull, 0xd40f3f42144425f4ull,
	    0x5911948ad63462eaull } },
	{ 600,
	  600,
	  224,
	  224,
	  { 0xa0ff7de341979265ull, 0x87eb5d731d6023ceull,
	    0x8479619b3ae91879ull } },
	{ 7,
	  9,
	  3,
	  2,
	  { 0xf90c4a6ec3f232edull, 0x7ef72ddc197913b8ull,
	    0x1e23dd084866596dull } },
	{ 224,
	  224,
	  224,
	  224,
	  { 0x2b087097c3244838ull, 0x6080e213539442b4ull,
	    0x0e02474a1963115bull } },
	{ 231,
	  190,
	  224,
	  224,
	  { 0x157ce5493249a36eull, 0xe7027d0385d49c8full,
	    0x55ded790bf2b4c84ull } },
	{ 1000,
	  3,
	  224,
	  224,
	  { 0x18910a1196118efdull, 0x15cb14e09e344990ull,
	    0x47e8a8a2c6a59f10ull } },
};

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * Resize the box of a plan built in exactly the memory rsz_plan_bytes()
 * asks for, at an odd address, and with exactly the scratch the plan
 * asks for, so that a sanitizer build catches any access past either.
 * box NULL is the whole image.
 */
static void resize_box(uint32_t in_w, uint32_t in_h, const double *box,
		       uint32_t out_w, uint32_t out_h, unsigned flags,
		       const uint8_t *src, size_t src_stride, uint8_t *dst,
		       size_t dst_stride, unsigned ch)
{
	size_t cap = rsz_plan_bytes(in_w, in_h, out_w, out_h), n;
	uint8_t *mem = malloc(cap + 1);
	struct rsz_plan *p = NULL;
	void *scratch;

	cr_assert(cap && mem);
	cr_assert_eq(rsz_plan_box(mem + 1, cap, in_w, in_h, box, out_w, out_h,
				  flags, &p),
		     0, "%ux%u -> %ux%u flags %u", in_w, in_h, out_w, out_h,
		     flags);
	n = rsz_scratch_size(p, ch);
	scratch = n ? malloc(n) : NULL;
	cr_assert(!n || scratch);
	cr_assert_eq(rsz_run(p, src, src_stride, dst, dst_stride, ch, scratch),
		     0);
	free(scratch);
	free(mem);
}

Test(resize, whole_image_bytes_unchanged)
{
	static const unsigned flags[] = { 0, RSZ_SCALAR };

	for (size_t bi = 0; bi < sizeof(before) / sizeof(before[0]); bi++)
		for (size_t ci = 0; ci < NCHANS; ci++) {
			unsigned ch = chans[ci];
			uint32_t iw = before[bi].in_w, ih = before[bi].in_h;
			uint32_t ow = before[bi].out_w, oh = before[bi].out_h;
			double box[4] = { 0, 0, iw, ih };
			size_t out = (size_t)ow * oh * ch;
			uint8_t *src = random_image((size_t)iw * ih * ch,
						    1000 + 16 * bi + ch);
			uint8_t *dst = malloc(out);

			cr_assert(dst);
			resize(iw, ih, ow, oh, src, (size_t)iw * ch, dst,
			       (size_t)ow * ch, ch);
			cr_assert_eq(fnv1a(dst, out), before[bi].fnv[ci],
				     "rsz_plan_new %ux%u -> %ux%u ch %u", iw,
				     ih, ow, oh, ch);
			for (size_t fi = 0; fi < 2; fi++) {
				memset(dst, 0, out);
				resize_box(iw, ih, fi ? box : NULL, ow, oh,
					   flags[fi], src, (size_t)iw * ch, dst,
					   (size_t)ow * ch, ch);
				cr_assert_eq(
					fnv1a(dst, out), before[bi].fnv[ci],
					"box %ux%u -> %ux%u ch %u flags %u", iw,
					ih, ow, oh, ch, flags[fi]);
			}
			free(src);
			free(dst);
		}
}

/* Boxes that exercise every edge of the arithmetic. */
static const struct boxcase {
	uint32_t in_w, in_h;
	double box[4];
	uint32_t out_w, out_h;
} boxes[] = {
	{ 64, 48, { 0, 0, 64, 48 }, 32, 24 },	       /* the whole image */
	{ 64, 48, { 10.5, 7.25, 50.75, 40 }, 24, 19 }, /* fractional, down */
	{ 64, 48, { 0.3, 0.6, 63.7, 47.9 }, 64, 48 },  /* nearly whole */
	{ 90, 70, { 17, 9, 58, 42 }, 41, 33 },	       /* a plain crop */
	{ 90, 70, { 17.5, 9.5, 58.5, 42.5 }, 41, 33 }, /* half a pixel off */
	{ 40, 30, { 5.2, 3.1, 12.9, 9.7 }, 50, 37 },   /* enlarged */
	{ 40, 30, { 39, 29, 40, 30 }, 5, 5 },	       /* the last pixel */
	{ 40, 30, { 0, 0, 0.5, 0.25 }, 9, 4 },	       /* under a pixel */
	{ 40, 30, { 0.1, 0.1, 39.9, 29.9 }, 3, 2 },    /* to a few pixels */
	{ 300, 20, { 12.3, 2, 287.9, 18.5 }, 23, 7 },  /* down by 12 */
	{ 1000, 12, { 3, 1, 997, 11 }, 16, 3 },	       /* down by 62 */
	{ 123, 77, { 1.0 / 3, 2.0 / 3, 100.1, 76.9 }, 37, 41 }, /* 1/3 */
	{ 500, 375, { 37.5, 20.25, 437.5, 355.75 }, 224, 224 }, /* typical */
};

#define NBOXES (sizeof(boxes) / sizeof(boxes[0]))

Test(resize, box_matches_double_reference)
{
	for (size_t bi = 0; bi < NBOXES; bi++) {
		const struct boxcase *b = &boxes[bi];

		for (size_t ci = 0; ci < NCHANS; ci++) {
			unsigned ch = chans[ci];
			size_t ss = (size_t)b->in_w * ch + 5;
			size_t out = (size_t)b->out_w * b->out_h * ch;
			uint8_t *src = random_image(ss * b->in_h, bi * 8 + ch);
			uint8_t *dst = malloc(out), *ref = malloc(out);
			int worst = 0;

			cr_assert(dst && ref);
			ut_picture(src, (unsigned)(ss / ch), b->in_h, ch,
				   (unsigned)bi);
			for (size_t i = 0; i < ss * b->in_h; i += 5)
				src[i] ^= (uint8_t)(i * 77);
			resize_box(b->in_w, b->in_h, b->box, b->out_w, b->out_h,
				   0, src, ss, dst, (size_t)b->out_w * ch, ch);
			ref_apply(ref_box_weights(b->in_w, b->box[0], b->box[2],
						  b->out_w),
				  ref_box_weights(b->in_h, b->box[1], b->box[3],
						  b->out_h),
				  b->in_w, b->in_h, b->out_w, b->out_h, src, ss,
				  ref, ch);
			for (size_t i = 0; i < out; i++) {
				int e = abs((int)dst[i] - (int)ref[i]);

				worst = e > worst ? e : worst;
			}
			cr_assert_leq(worst, 1, "box %zu ch %u: off by %d", bi,
				      ch, worst);
			free(src);
			free(dst);
			free(ref);
		}
	}
}

/*
 * A box on whole pixels as large as the output is a crop, bytes for
 * bytes (PIL takes a shortcut for it), and needs no scratch.
 */
Test(resize, whole_pixel_box_is_crop)
{
	enum { W = 90, H = 70, X = 17, Y = 9, OW = 41, OH = 33 };
	double box[4] = { X, Y, X + OW, Y + OH };
	struct rsz_plan *p;
	char mem[1 << 16];

	for (size_t ci = 0; ci < NCHANS; ci++) {
		unsigned ch = chans[ci];
		uint8_t *img = random_image((size_t)W * H * ch, 5 + ch);
		uint8_t *dst = malloc((size_t)OW * OH * ch);

		cr_assert(dst);
		resize_box(W, H, box, OW, OH, 0, img, (size_t)W * ch, dst,
			   (size_t)OW * ch, ch);
		for (unsigned y = 0; y < OH; y++)
			cr_assert_arr_eq(dst + (size_t)y * OW * ch,
					 img + ((size_t)(Y + y) * W + X) * ch,
					 (size_t)OW * ch, "row %u ch %u", y,
					 ch);
		free(img);
		free(dst);
	}
	cr_assert_eq(rsz_plan_box(mem, sizeof(mem), W, H, box, OW, OH, 0, &p),
		     0);
	cr_assert_eq(rsz_scratch_size(p, 3), 0);
}

/* Mirrored output is the plain output flipped, to the byte. */
Test(resize, mirror_flips)
{
	static const unsigned flags[] = { 0, RSZ_SCALAR };

	for (size_t bi = 0; bi < NBOXES; bi++) {
		const struct boxcase *b = &boxes[bi];

		for (size_t ci = 0; ci < NCHANS; ci++)
			for (size_t fi = 0; fi < 2; fi++) {
				unsigned ch = chans[ci];
				size_t row = (size_t)b->out_w * ch;
				size_t out = row * b->out_h;
				uint8_t *src = random_image(
					(size_t)b->in_w * b->in_h * ch,
					bi + ch);
				uint8_t *a = malloc(out), *m = malloc(out);

				cr_assert(a && m);
				resize_box(b->in_w, b->in_h, b->box, b->out_w,
					   b->out_h, flags[fi], src,
					   (size_t)b->in_w * ch, a, row, ch);
				resize_box(b->in_w, b->in_h, b->box, b->out_w,
					   b->out_h, flags[fi] | RSZ_MIRROR,
					   src, (size_t)b->in_w * ch, m, row,
					   ch);
				for (uint32_t y = 0; y < b->out_h; y++)
					for (uint32_t j = 0; j < b->out_w; j++)
						cr_assert_arr_eq(
							m + y * row + j * ch,
							a + y * row +
								(b->out_w - 1 -
								 j) * ch,
							ch,
							"box %zu ch %u flags %u: (%u,%u)",
							bi, ch, flags[fi], j,
							y);
				free(src);
				free(a);
				free(m);
			}
	}
}

/* A random box inside w x h, or the whole image one time in four. */
static void random_box(uint64_t *seed, uint32_t w, uint32_t h, double box[4])
{
	for (int axis = 0; axis < 2; axis++) {
		uint32_t n = axis ? h : w;
		double a = (double)(ut_rand(seed) % (n * 64u)) / 64;
		double b = (double)(ut_rand(seed) % (n * 64u)) / 64;

		if (ut_rand(seed) % 4 == 0) {
			a = 0;
			b = n;
		}
		if (a == b)
			b = a < n - 0.5 ? a + 0.5 : (double)n;
		box[axis] = a < b ? a : b;
		box[axis + 2] = a < b ? b : a;
	}
}

static uint32_t random_side(uint64_t *seed, uint32_t max)
{
	/* Small sizes more often: the edge cases live there. */
	return 1 + (uint32_t)(ut_rand(seed) % (ut_rand(seed) % 2 ? 16 : max));
}

/*
 * rsz_plan_bytes() bounds what any box of any image up to its sizes
 * needs; the whole box of the largest image needs exactly that; and a
 * plan that does not fit fails cleanly, writing nothing past cap.
 */
Test(resize, plan_bytes_bound)
{
	uint64_t seed = 42;

	for (int n = 0; n < 300; n++) {
		uint32_t mw = random_side(&seed, 700),
			 mh = random_side(&seed, 700);
		uint32_t ow = random_side(&seed, 300),
			 oh = random_side(&seed, 300);
		uint32_t w = 1 + (uint32_t)(ut_rand(&seed) % mw);
		uint32_t h = 1 + (uint32_t)(ut_rand(&seed) % mh);
		unsigned flags = (unsigned)(ut_rand(&seed) % 4);
		size_t cap = rsz_plan_bytes(mw, mh, ow, oh), lo = 0, hi = cap;
		uint8_t *buf = malloc(cap + 128);
		struct rsz_plan *p;
		double box[4];
		int err;

		cr_assert(cap && buf);
		random_box(&seed, w, h, box);
		cr_assert_eq(
			rsz_plan_box(buf, cap, w, h, box, ow, oh, flags, &p), 0,
			"%ux%u box in %ux%u -> %ux%u", w, h, mw, mh, ow, oh);
		/* rsz_scratch_bytes() bounds the plan's scratch likewise. */
		for (unsigned ch = 1; ch <= 4; ch += ch == 1 ? 2 : 1)
			cr_expect_leq(
				rsz_scratch_size(p, ch),
				rsz_scratch_bytes(mh, ow, oh, ch),
				"scratch: %ux%u box in %ux%u -> %ux%u, %u ch",
				w, h, mw, mh, ow, oh, ch);
		/* The smallest cap that works, by bisection. */
		while (lo + 1 < hi) {
			size_t mid = lo + (hi - lo) / 2;

			err = rsz_plan_box(buf, mid, w, h, box, ow, oh, flags,
					   &p);
			cr_assert(err == 0 || err == -ENOSPC);
			if (err)
				lo = mid;
			else
				hi = mid;
		}
		/* One byte less, at any alignment, fails and writes nothing. */
		for (size_t off = 0; off < 64; off += 7) {
			memset(buf, 0xa5, cap + 128);
			p = (struct rsz_plan *)1;
			cr_assert_eq(rsz_plan_box(buf + off, hi - 1, w, h, box,
						  ow, oh, flags, &p),
				     -ENOSPC);
			cr_assert_null(p);
			for (size_t i = 0; i < cap + 128; i++)
				cr_assert_eq(buf[i], 0xa5);
			/* Exactly enough works, and writes inside only. */
			cr_assert_eq(rsz_plan_box(buf + off, hi, w, h, box, ow,
						  oh, flags, &p),
				     0);
			for (size_t i = 0; i < off; i++)
				cr_assert_eq(buf[i], 0xa5);
			for (size_t i = off + hi; i < cap + 128; i++)
				cr_assert_eq(buf[i], 0xa5, "byte %zu of %zu",
					     i - off, hi);
		}
		free(buf);
		/* The whole largest image needs the bound exactly. */
		buf = malloc(cap);
		cr_assert(buf);
		cr_assert_eq(
			rsz_plan_box(buf, cap - 1, mw, mh, NULL, ow, oh, 0, &p),
			-ENOSPC);
		cr_assert_eq(
			rsz_plan_box(buf, cap, mw, mh, NULL, ow, oh, 0, &p), 0);
		free(buf);
	}
}

/*
 * The SIMD loops (where the processor has them) give the portable
 * loops' bytes, on random boxes, sizes, strides and flags; and on the
 * shapes that take their rarer paths: wide filters (many tap groups, no
 * byte gathers), blocks at a row's end too wide for the padded copy, and
 * outputs narrower than one block or one vector.
 */
Test(resize, simd_equals_scalar)
{
	static const struct boxcase fixed[] = {
		{ 1000, 9, { 0, 0, 1000, 9 }, 16, 40 },
		{ 2000, 5, { 1.5, 0, 1999, 5 }, 9, 3 },
		{ 700, 40, { 10, 3, 690, 37 }, 50, 7 },
		{ 40, 700, { 3, 10, 37, 690 }, 7, 50 },
		{ 300, 200, { 0, 0, 300, 200 }, 7, 31 },
		{ 60, 60, { 0, 0, 60, 60 }, 33, 8 },
		{ 17, 13, { 0.5, 0.5, 16.5, 12.5 }, 224, 224 },
	};
	uint64_t seed = 7;

	for (int n = 0; n < 400 + (int)(sizeof(fixed) / sizeof(fixed[0]));
	     n++) {
		struct boxcase b;
		unsigned ch = chans[ut_rand(&seed) % NCHANS];
		unsigned flags = ut_rand(&seed) % 2 ? RSZ_MIRROR : 0;
		size_t ss, ds, out;
		uint8_t *src, *d0, *d1;

		if (n < (int)(sizeof(fixed) / sizeof(fixed[0]))) {
			b = fixed[n];
		} else {
			b.in_w = random_side(&seed, 400);
			b.in_h = random_side(&seed, 300);
			b.out_w = random_side(&seed, 120);
			b.out_h = random_side(&seed, 120);
			random_box(&seed, b.in_w, b.in_h, b.box);
		}
		ss = (size_t)b.in_w * ch + ut_rand(&seed) % 9;
		ds = (size_t)b.out_w * ch + ut_rand(&seed) % 9;
		out = ds * b.out_h;
		src = random_image(ss * b.in_h, (uint64_t)n + 1);
		d0 = malloc(out);
		d1 = malloc(out);
		cr_assert(d0 && d1);
		memset(d0, 0x3c, out);
		memset(d1, 0x3c, out);
		resize_box(b.in_w, b.in_h, b.box, b.out_w, b.out_h,
			   flags | RSZ_SCALAR, src, ss, d0, ds, ch);
		resize_box(b.in_w, b.in_h, b.box, b.out_w, b.out_h, flags, src,
			   ss, d1, ds, ch);
		cr_assert_arr_eq(d0, d1, out,
				 "%ux%u (%g,%g,%g,%g) -> %ux%u ch %u flags %u",
				 b.in_w, b.in_h, b.box[0], b.box[1], b.box[2],
				 b.box[3], b.out_w, b.out_h, ch, flags);
		free(src);
		free(d0);
		free(d1);
	}
}

Test(resize, bad_box_arguments)
{
	static const double bad[][4] = {
		{ -0.5, 0, 10, 10 }, { 0, -1, 10, 10 },	  { 0, 0, 10.5, 10 },
		{ 0, 0, 10, 11 },    { 5, 0, 5, 10 },	  { 6, 0, 5, 10 },
		{ 0, 3, 10, 3 },     { 0, 0, 1e300, 10 },
	};
	static struct rsz_plan *const sentinel = (struct rsz_plan *)1;
	size_t cap = rsz_plan_bytes(10, 10, 4, 4);
	double nan_box[4] = { 0, 0, 10, 10 };
	struct rsz_plan *p = sentinel;
	void *mem = malloc(cap);

	cr_assert(mem);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = sentinel;
		cr_assert_eq(
			rsz_plan_box(mem, cap, 10, 10, bad[i], 4, 4, 0, &p),
			-EINVAL, "box %zu", i);
		cr_assert_null(p);
	}
	nan_box[2] = __builtin_nan("");
	cr_assert_eq(rsz_plan_box(mem, cap, 10, 10, nan_box, 4, 4, 0, &p),
		     -EINVAL);
	cr_assert_eq(rsz_plan_box(mem, cap, 10, 10, NULL, 4, 4, 4, &p), -EINVAL,
		     "an unknown flag");
	cr_assert_eq(rsz_plan_box(NULL, cap, 10, 10, NULL, 4, 4, 0, &p),
		     -EINVAL);
	cr_assert_eq(rsz_plan_box(mem, cap, 10, 10, NULL, 4, 4, 0, NULL),
		     -EINVAL);
	cr_assert_eq(rsz_plan_box(mem, cap, 0, 10, NULL, 4, 4, 0, &p), -EINVAL);
	cr_assert_eq(rsz_plan_box(mem, cap, 10, 10, NULL, 4, RSZ_MAX_SIDE + 1,
				  0, &p),
		     -EINVAL);
	cr_assert_eq(rsz_plan_bytes(0, 10, 4, 4), 0);
	cr_assert_eq(rsz_plan_bytes(10, 10, RSZ_MAX_SIDE + 1, 4), 0);
	cr_assert_eq(rsz_plan_box(mem, 0, 10, 10, NULL, 4, 4, 0, &p), -ENOSPC);
	cr_assert_null(p);
	/* A plan in caller memory is the caller's: freeing it is a no-op. */
	cr_assert_eq(rsz_plan_box(mem, cap, 10, 10, NULL, 4, 4, 0, &p), 0);
	rsz_plan_free(p);
	free(mem);
}
