/*
 * test_augment.c - augmentation parameters (pipeline/image/augment.c): Python's
 * round(), RandomResizedCrop's tries and fallback, its statistics,
 * reproducibility from the seed, Resize + CenterCrop against torchvision's
 * formulas worked by hand, and the flip probability.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "augment.h"
#include "rng.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Loops over thousands of draws report only their first few failures. */
static unsigned fails;
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond) && fails++ < 10)                                   \
			cr_expect_fail(__VA_ARGS__);                           \
	} while (0)

/* torchvision's defaults. */
#define SLO 0.08
#define SHI 1.0
#define RLO (3.0 / 4.0)
#define RHI (4.0 / 3.0)

/* A per-sample rng as the pipeline seeds it: from (seed, epoch, index). */
static void sample_rng(struct rng *r, uint64_t seed, uint64_t index)
{
	rng_seed(r, rng_mix(seed, 0, index));
}

static bool rect_eq(const struct augment_rect *a, const struct augment_rect *b)
{
	return a->x == b->x && a->y == b->y && a->w == b->w && a->h == b->h;
}

/* Values are Python 3's round() of the same doubles. */
static const struct {
	double in, out;
} rounds[] = {
	{ 0.5, 0.0 },
	{ 1.5, 2.0 },
	{ 2.5, 2.0 },
	{ 3.5, 4.0 },
	{ -0.5, -0.0 },
	{ -1.5, -2.0 },
	{ -2.5, -2.0 },
	{ 2.4999, 2.0 },
	{ 2.5001, 3.0 },
	{ 0.49999999999999994, 0.0 },
	{ 1e15 + 0.5, 1e15 },
	{ 0.0, 0.0 },
	{ 7.0, 7.0 },
	{ -7.6, -8.0 },
	{ 58.5, 58.0 },
	{ 59.5, 60.0 },
	{ 4503599627370495.5, 4503599627370496.0 },
	{ 9007199254740993.0, 9007199254740992.0 }, /* 2^53+1 is 2^53 already */
};

Test(augment, round_half_even_table)
{
	for (size_t i = 0; i < NELEM(rounds); i++) {
		double got = augment_round_half_even(rounds[i].in);

		cr_expect_eq(got, rounds[i].out,
			     "round(%.17g) = %.17g, want %.17g", rounds[i].in,
			     got, rounds[i].out);
		cr_expect_eq(signbit(got), signbit(rounds[i].out),
			     "sign of round(%.17g)", rounds[i].in);
	}
	cr_expect(isnan(augment_round_half_even(NAN)));
	cr_expect_eq(augment_round_half_even(INFINITY), INFINITY);
	cr_expect_eq(augment_round_half_even(-INFINITY), -INFINITY);
}

/* Sizes from one pixel to extreme strips, in both orientations. */
static const uint32_t shapes[][2] = {
	{ 500, 375 }, { 375, 500 }, { 1, 1 },	  { 2, 3 },	  { 7, 1 },
	{ 1000, 10 }, { 10, 1000 }, { 224, 224 }, { 4000, 3000 }, { 33, 17 },
};

Test(augment, rrc_inside_and_integral)
{
	struct rng r;
	struct augment_rect c;

	fails = 0;
	for (size_t s = 0; s < NELEM(shapes); s++) {
		uint32_t w = shapes[s][0], h = shapes[s][1];

		for (uint64_t i = 0; i < 2000; i++) {
			sample_rng(&r, 42 + s, i);
			cr_assert_eq(
				augment_rrc(&r, w, h, SLO, SHI, RLO, RHI, &c),
				0);
			CHECK(c.x == floor(c.x) && c.y == floor(c.y) &&
				      c.w == floor(c.w) && c.h == floor(c.h),
			      "%ux%u: not integral", w, h);
			CHECK(c.x >= 0 && c.y >= 0 && c.w >= 1 && c.h >= 1 &&
				      c.x + c.w <= w && c.y + c.h <= h,
			      "%ux%u: %g,%g %gx%g outside", w, h, c.x, c.y, c.w,
			      c.h);
		}
	}
}

/*
 * A 1000x10 strip: a crop of at least 8% (800 px) with aspect at most
 * 4/3 needs h >= sqrt(800 * 3/4) ~ 24.5 > 10, so every try fails and the
 * fallback clamps the ratio 100 to 4/3: h = 10, w = round(13.33) = 13,
 * left = (1000 - 13) // 2 = 493. The tall strip is the transpose, with
 * h = round(10 / 0.75) = 13. scale (2, 2) on a square can never fit and
 * its ratio 1 is inside the range, so it falls back to the whole image.
 */
static const struct {
	uint32_t w, h;
	double slo, shi;
	struct augment_rect want;
} fallbacks[] = {
	{ 1000, 10, SLO, SHI, { 493, 0, 13, 10 } },
	{ 10, 1000, SLO, SHI, { 0, 493, 10, 13 } },
	{ 100, 100, 2.0, 2.0, { 0, 0, 100, 100 } },
	{ 640, 100, 2.0, 2.0, { 253, 0, 133, 100 } }, /* round(133.33) */
	{ 100, 640, 2.0, 2.0, { 0, 253, 100, 133 } },
	{ 3, 1000, SLO, SHI, { 0, 498, 3, 4 } }, /* round(4.0) */
	{ 1000, 3, SLO, SHI, { 498, 0, 4, 3 } },
	{ 1000, 9, SLO, SHI, { 494, 0, 12, 9 } }, /* round(12.0) */
	{ 6, 1000, SLO, SHI, { 0, 496, 6, 8 } },
};

Test(augment, rrc_fallback)
{
	struct rng r, ref;
	struct augment_rect c;

	for (size_t i = 0; i < NELEM(fallbacks); i++) {
		for (uint64_t k = 0; k < 200; k++) {
			sample_rng(&r, 7, k);
			ref = r;
			cr_assert_eq(
				augment_rrc(&r, fallbacks[i].w, fallbacks[i].h,
					    fallbacks[i].slo, fallbacks[i].shi,
					    RLO, RHI, &c),
				0);
			cr_assert(rect_eq(&c, &fallbacks[i].want),
				  "%ux%u seed %lu: got %g,%g %gx%g",
				  fallbacks[i].w, fallbacks[i].h,
				  (unsigned long)k, c.x, c.y, c.w, c.h);
			/* Ten tries of two draws each, and nothing else. */
			for (int d = 0; d < 20; d++)
				rng_next(&ref);
			cr_assert_eq(memcmp(&r, &ref, sizeof(r)), 0,
				     "fallback took other than 20 draws");
		}
	}
}

/*
 * 20000 crops of a 500x375 image. The accepted area fraction is U(0.08,
 * 1) conditioned on fitting, which rejects most large fractions with a
 * far-from-4:3 aspect, so the mean sits below the unconditioned 0.54.
 */
Test(augment, rrc_statistics)
{
	const uint32_t w = 500, h = 375;
	const double area = (double)w * h;
	double sum = 0, mn = 2, mx = 0, cx = 0, cy = 0;
	unsigned whole = 0;
	const unsigned n = 20000;
	struct rng r;
	struct augment_rect c;

	fails = 0;
	for (unsigned i = 0; i < n; i++) {
		double f;

		sample_rng(&r, 2024, i);
		cr_assert_eq(augment_rrc(&r, w, h, SLO, SHI, RLO, RHI, &c), 0);
		f = c.w * c.h / area;
		sum += f;
		mn = fmin(mn, f);
		mx = fmax(mx, f);
		whole += c.w == w && c.h == h;
		/* Both sides rounded by at most half a pixel. */
		CHECK((c.w + 0.5) / (c.h - 0.5) >= RLO &&
			      (c.w - 0.5) / (c.h + 0.5) <= RHI,
		      "aspect %g/%g out of [3/4, 4/3]", c.w, c.h);
		cx += (c.x + c.w / 2) / w;
		cy += (c.y + c.h / 2) / h;
	}
	sum /= n;
	cx /= n;
	cy /= n;
	cr_expect(sum > 0.3 && sum < 0.65, "mean area fraction %g", sum);
	cr_expect(mn >= 0.075, "min area fraction %g", mn);
	cr_expect(mx <= 1.0, "max area fraction %g", mx);
	cr_expect(mx > 0.9, "no large crops (max %g)", mx);
	/* Placement is uniform, so crop centres average to the middle. */
	cr_expect(fabs(cx - 0.5) < 0.01 && fabs(cy - 0.5) < 0.01,
		  "mean centre %g,%g", cx, cy);
	cr_expect(whole < n / 20, "%u whole-image crops", whole);
}

Test(augment, rrc_deterministic)
{
	struct rng a, b;
	struct augment_rect ca, cb;
	unsigned same = 0;

	for (uint64_t i = 0; i < 1000; i++) {
		sample_rng(&a, 99, i);
		sample_rng(&b, 99, i);
		cr_assert_eq(augment_rrc(&a, 500, 375, SLO, SHI, RLO, RHI, &ca),
			     0);
		cr_assert_eq(augment_rrc(&b, 500, 375, SLO, SHI, RLO, RHI, &cb),
			     0);
		cr_assert(rect_eq(&ca, &cb), "seed 99 sample %lu differs",
			  (unsigned long)i);
		cr_assert_eq(augment_flip(&a, 0.5), augment_flip(&b, 0.5));

		sample_rng(&b, 100, i);
		cr_assert_eq(augment_rrc(&b, 500, 375, SLO, SHI, RLO, RHI, &cb),
			     0);
		same += rect_eq(&ca, &cb);
	}
	/* Two seeds agree only by chance: a few small crops at most. */
	cr_expect(same < 10, "%u of 1000 rects equal across seeds", same);
}

Test(augment, rrc_errors)
{
	static const struct {
		uint32_t w, h;
		double slo, shi, rlo, rhi;
	} bad[] = {
		{ 0, 10, SLO, SHI, RLO, RHI },
		{ 10, 0, SLO, SHI, RLO, RHI },
		{ 10, 10, 0.5, 0.4, RLO, RHI },
		{ 10, 10, -0.1, SHI, RLO, RHI },
		{ 10, 10, SLO, SHI, 0.0, RHI },
		{ 10, 10, SLO, SHI, 2.0, 1.0 },
		{ 10, 10, SLO, SHI, -1.0, RHI },
		{ 10, 10, NAN, SHI, RLO, RHI },
		{ 10, 10, SLO, INFINITY, RLO, RHI },
		{ 10, 10, SLO, SHI, RLO, NAN },
	};
	struct rng r, ref;
	struct augment_rect c = { 1, 2, 3, 4 }, keep = c;

	rng_seed(&r, 5);
	ref = r;
	for (size_t i = 0; i < NELEM(bad); i++) {
		cr_expect_eq(augment_rrc(&r, bad[i].w, bad[i].h, bad[i].slo,
					 bad[i].shi, bad[i].rlo, bad[i].rhi,
					 &c),
			     -EINVAL, "case %zu", i);
		cr_expect(rect_eq(&c, &keep), "case %zu wrote *out", i);
		cr_expect_eq(memcmp(&r, &ref, sizeof(r)), 0,
			     "case %zu drew numbers", i);
	}
}

/*
 * Expected values from torchvision's formulas, by hand:
 *
 * 500x375, Resize(256): short = 375, new_long = int(256 * 500 / 375) =
 * int(341.33) = 341, so 341x256. CenterCrop(224): top = int(round((256 -
 * 224) / 2.0)) = round(16.0) = 16; left = int(round((341 - 224) / 2.0)) =
 * round(58.5) = 58 (ties to even). In the original: x = 58 * 500 / 341 =
 * 85.043988..., y = 16 * 375 / 256 = 23.4375, w = 224 * 500 / 341 =
 * 328.445747..., h = 224 * 375 / 256 = 328.125.
 *
 * 375x500 is the transpose: 256x341, top 58, left 16.
 *
 * 640x427, Resize(256): int(256 * 640 / 427) = int(383.70) = 383;
 * left = round(159 / 2.0) = round(79.5) = 80, top = 16.
 *
 * 256x256, Resize(256), CenterCrop(224): 16, 16, 224x224, unscaled.
 * 300x200, Resize(224), CenterCrop(224): int(224 * 300 / 200) = 336,
 * left = round(112 / 2.0) = 56, top = 0.
 * 1000x3, Resize(1), CenterCrop(1): int(1 * 1000 / 3) = 333, left =
 * round(332 / 2.0) = 166, top = 0; x = 166 * 1000 / 333.
 */
static const struct {
	uint32_t w, h, rs, crop, rw, rh;
	struct augment_rect want;
} centers[] = {
	{ 500,
	  375,
	  256,
	  224,
	  341,
	  256,
	  { 58.0 * 500 / 341, 16.0 * 375 / 256, 224.0 * 500 / 341,
	    224.0 * 375 / 256 } },
	{ 375,
	  500,
	  256,
	  224,
	  256,
	  341,
	  { 16.0 * 375 / 256, 58.0 * 500 / 341, 224.0 * 375 / 256,
	    224.0 * 500 / 341 } },
	{ 640,
	  427,
	  256,
	  224,
	  383,
	  256,
	  { 80.0 * 640 / 383, 16.0 * 427 / 256, 224.0 * 640 / 383,
	    224.0 * 427 / 256 } },
	{ 256, 256, 256, 224, 256, 256, { 16, 16, 224, 224 } },
	{ 300,
	  200,
	  224,
	  224,
	  336,
	  224,
	  { 56.0 * 300 / 336, 0, 224.0 * 300 / 336, 224.0 * 200 / 224 } },
	{ 1000, 3, 1, 1, 333, 1, { 166.0 * 1000 / 333, 0, 1000.0 / 333, 3 } },
};

Test(augment, resize_center_by_hand)
{
	struct augment_rect c;
	uint32_t rw, rh;

	for (size_t i = 0; i < NELEM(centers); i++) {
		cr_assert_eq(augment_resize_center(
				     centers[i].w, centers[i].h, centers[i].rs,
				     centers[i].crop, &c, &rw, &rh),
			     0);
		cr_expect(rw == centers[i].rw && rh == centers[i].rh,
			  "%ux%u: resized %ux%u", centers[i].w, centers[i].h,
			  rw, rh);
		cr_expect(fabs(c.x - centers[i].want.x) < 1e-9 &&
				  fabs(c.y - centers[i].want.y) < 1e-9 &&
				  fabs(c.w - centers[i].want.w) < 1e-9 &&
				  fabs(c.h - centers[i].want.h) < 1e-9,
			  "%ux%u: %.9g,%.9g %.9gx%.9g", centers[i].w,
			  centers[i].h, c.x, c.y, c.w, c.h);
	}
	/* The hand-worked numbers, spelled out once. */
	cr_assert_eq(augment_resize_center(500, 375, 256, 224, &c, &rw, &rh),
		     0);
	cr_expect(fabs(c.x - 85.0439882697947) < 1e-9);
	cr_expect(fabs(c.y - 23.4375) < 1e-12);
	cr_expect(fabs(c.w - 328.445747800587) < 1e-9);
	cr_expect(fabs(c.h - 328.125) < 1e-12);
}

Test(augment, resize_center_errors)
{
	struct augment_rect c;
	uint32_t rw, rh;

	cr_expect_eq(augment_resize_center(0, 10, 8, 4, &c, &rw, &rh), -EINVAL);
	cr_expect_eq(augment_resize_center(10, 0, 8, 4, &c, &rw, &rh), -EINVAL);
	cr_expect_eq(augment_resize_center(10, 10, 0, 0, &c, &rw, &rh),
		     -EINVAL);
	cr_expect_eq(augment_resize_center(10, 10, 8, 0, &c, &rw, &rh),
		     -EINVAL);
	/* torchvision would pad a crop larger than the short side. */
	cr_expect_eq(augment_resize_center(10, 10, 8, 9, &c, &rw, &rh),
		     -EINVAL);
	/* The long side would need more than 32 bits. */
	cr_expect_eq(augment_resize_center(UINT32_MAX, 1, UINT32_MAX, 1, &c,
					   &rw, &rh),
		     -EINVAL);
	cr_expect_eq(augment_resize_center(UINT32_MAX, 1, 1, 1, &c, &rw, &rh),
		     0);
	cr_expect_eq(rw, UINT32_MAX);
}

Test(augment, flip_frequency)
{
	static const double ps[] = { 0.0, 0.1, 0.5, 0.9, 1.0 };
	const unsigned n = 100000;
	struct rng r, ref;

	for (size_t i = 0; i < NELEM(ps); i++) {
		unsigned hits = 0;
		double f;

		for (unsigned k = 0; k < n; k++) {
			sample_rng(&r, 11, k);
			ref = r;
			hits += augment_flip(&r, ps[i]);
			rng_next(&ref);
			/* Exactly one draw, whatever p. */
			if (k < 100)
				cr_assert_eq(memcmp(&r, &ref, sizeof(r)), 0);
		}
		f = (double)hits / n;
		/* 5 sigma of a binomial at p = 0.5 is 0.008. */
		cr_expect(fabs(f - ps[i]) < 0.008, "p %g: frequency %g", ps[i],
			  f);
	}
}
