/*
 * test_mix.c - the batch stages' kernels (pipeline/stream/mix.c): mixup
 * and cutmix in every dtype and layout with both pair modes, odd and
 * short batches, the cutmix box at the borders and its corrected lambda,
 * soft labels, and the Beta sampler.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "imgkern.h"
#include "mix.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* binary16 -> float, for the reference (the kernel has its own). */
static float half(uint16_t h)
{
	int e = (h >> 10) & 0x1f;
	float m = (float)(h & 0x3ff);
	float v = e ? ldexpf(1024 + m, e - 25) : ldexpf(m, -24);

	return h & 0x8000 ? -v : v;
}

/* Element k of sample i of a batch buffer, as a float. */
static float get(const unsigned char *base, uint64_t sb, unsigned dt,
		 uint32_t i, uint64_t k)
{
	const unsigned char *p = base + i * sb;

	switch (dt) {
	case DT_U8: return p[k];
	case DT_F16: {
		uint16_t h;
		memcpy(&h, p + 2 * k, 2);
		return half(h);
	}
	default: {
		float f;
		memcpy(&f, p + 4 * k, 4);
		return f;
	}
	}
}

/* Fill a batch with values that differ in every sample and element. */
static void fill(unsigned char *base, uint64_t sb, unsigned dt, uint32_t n,
		 uint64_t elems)
{
	for (uint32_t i = 0; i < n; i++)
		for (uint64_t k = 0; k < elems; k++) {
			unsigned char *p = base + i * sb;
			float v = (float)((i * 37 + k * 11) % 251);

			if (dt == DT_U8) {
				p[k] = (uint8_t)v;
			} else if (dt == DT_F16) {
				uint16_t h = imgkern_f32_to_f16(v / 7.0f - 9);
				memcpy(p + 2 * k, &h, 2);
			} else {
				float f = v / 7.0f - 9;
				memcpy(p + 4 * k, &f, 4);
			}
		}
}

/* Is element k (of 3 h w) inside d's box, in layout? */
static bool in_box(const struct mix_draw *d, unsigned layout, uint32_t h,
		   uint32_t w, uint64_t k)
{
	uint64_t x, y;

	if (layout == ISPEC_NCHW) {
		x = k % w;
		y = (k / w) % h;
	} else {
		x = (k / 3) % w;
		y = k / 3 / w;
	}
	return x >= d->box[0] && x < d->box[2] && y >= d->box[1] &&
	       y < d->box[3];
}

/*
 * Mix a batch of count samples (in a buffer of room samples) and check
 * every element of every sample against its own and its partner's
 * originals: a mix within the dtype's rounding, a copy in a cutmix box,
 * untouched elsewhere and in the samples past count.
 */
static void check_mix(const struct mix_draw *d, unsigned dt, unsigned layout,
		      uint32_t h, uint32_t w, uint32_t count, uint32_t room)
{
	uint64_t elems = 3ull * h * w, sb = elems * dtype_size(dt) + 64;
	unsigned char *buf = calloc(room, sb), *orig = malloc(room * sb);
	struct mix_image im = { buf, sb, count, (uint8_t)dt, (uint8_t)layout,
				h,   w };
	double lam = d->lam;

	cr_assert(buf && orig);
	fill(buf, sb, dt, room, elems);
	memcpy(orig, buf, room * sb);
	mix_image(d, &im);
	for (uint32_t i = 0; i < room; i++) {
		uint32_t p = i < count ? mix_partner(d->pair, i, count) : i;

		for (uint64_t k = 0; k < elems; k++) {
			float a = get(orig, sb, dt, i, k);
			float b = get(orig, sb, dt, p, k);
			float got = get(buf, sb, dt, i, k);
			float want = a;
			float tol = 0;

			if (i < count && d->kind == MIX_MIXUP) {
				want = (float)(lam * a + (1 - lam) * b);
				tol = dt == DT_U8 ? 0.5f + 1e-4f :
				      dt == DT_F16 ?
						    fabsf(want) / 1024 + 1e-3f :
						    fabsf(want) * 1e-6f + 1e-6f;
			} else if (i < count && d->kind == MIX_CUTMIX &&
				   in_box(d, layout, h, w, k)) {
				want = b;
			}
			if (fabsf(got - want) > tol) {
				cr_expect_fail(
					"dt %u layout %u pair %u count %u: "
					"sample %u (partner %u) element %lu: "
					"%g, want %g",
					dt, layout, d->pair, count, i, p,
					(unsigned long)k, got, want);
				goto out;
			}
		}
		/* The bytes between samples are no one's. */
		if (memcmp(buf + i * sb + elems * dtype_size(dt),
			   orig + i * sb + elems * dtype_size(dt), 64)) {
			cr_expect_fail("sample %u: wrote past its end", i);
			goto out;
		}
	}
out:
	free(buf);
	free(orig);
}

static const unsigned dts[] = { DT_U8, DT_F16, DT_F32 };

Test(mix, mixup_every_dtype_layout_pair_and_count)
{
	/* 5 and 7: odd, the middle sample pairs with itself under flip;
	 * 5 of room 8: a short last batch; 1: a batch of one. */
	static const uint32_t counts[][2] = { { 4, 4 }, { 5, 5 }, { 7, 7 },
					      { 5, 8 }, { 1, 3 }, { 2, 2 } };

	for (size_t t = 0; t < NELEM(dts); t++)
		for (unsigned layout = 0; layout < 2; layout++)
			for (unsigned pair = 0; pair < 2; pair++)
				for (size_t c = 0; c < NELEM(counts); c++) {
					struct mix_draw d = {
						.kind = MIX_MIXUP,
						.pair = (uint8_t)pair,
						.lam = 0.3137
					};

					/* 3 x 40 x 150: 18000 elements, more
					 * than one piece and chunk. */
					check_mix(&d, dts[t], layout, 40, 150,
						  counts[c][0], counts[c][1]);
				}
}

Test(mix, cutmix_every_dtype_layout_pair_and_count)
{
	static const uint32_t boxes[][4] = {
		{ 2, 3, 9, 8 }, { 0, 0, 5, 4 }, { 6, 2, 11, 9 }, { 0, 0, 11, 9 }
	};
	static const uint32_t counts[][2] = { { 4, 4 }, { 5, 5 }, { 3, 6 } };

	for (size_t t = 0; t < NELEM(dts); t++)
		for (unsigned layout = 0; layout < 2; layout++)
			for (unsigned pair = 0; pair < 2; pair++)
				for (size_t b = 0; b < NELEM(boxes); b++)
					for (size_t c = 0; c < NELEM(counts);
					     c++) {
						struct mix_draw d = {
							.kind = MIX_CUTMIX,
							.pair = (uint8_t)pair,
							.lam = 0.5
						};

						memcpy(d.box, boxes[b],
						       sizeof(d.box));
						check_mix(&d, dts[t], layout, 9,
							  11, counts[c][0],
							  counts[c][1]);
					}
}

/* The pieces are independent: any order (as a pool runs them) is one. */
Test(mix, pieces_in_any_order)
{
	uint32_t h = 64, w = 96, n = 6;
	uint64_t sb = 3ull * h * w * 4;
	unsigned char *a = malloc(n * sb), *b = malloc(n * sb);
	struct mix_draw d = { .kind = MIX_MIXUP,
			      .pair = ISPEC_PAIR_ROLL,
			      .lam = 0.77 };
	struct mix_image ia = { a, sb, n, DT_F32, ISPEC_NCHW, h, w };
	struct mix_image ib = { b, sb, n, DT_F32, ISPEC_NCHW, h, w };
	uint32_t pieces = mix_pieces(&d, &ia);

	cr_assert(a && b);
	cr_assert_gt(pieces, 1);
	fill(a, sb, DT_F32, n, 3ull * h * w);
	memcpy(b, a, n * sb);
	mix_image(&d, &ia);
	for (uint32_t k = pieces; k-- > 0;)
		mix_piece(&d, &ib, k);
	cr_expect_eq(memcmp(a, b, n * sb), 0);
	free(a);
	free(b);
}

Test(mix, partners)
{
	cr_expect_eq(mix_partner(ISPEC_PAIR_FLIP, 0, 5), 4);
	cr_expect_eq(mix_partner(ISPEC_PAIR_FLIP, 2, 5), 2);
	cr_expect_eq(mix_partner(ISPEC_PAIR_FLIP, 4, 5), 0);
	cr_expect_eq(mix_partner(ISPEC_PAIR_ROLL, 0, 5), 4);
	cr_expect_eq(mix_partner(ISPEC_PAIR_ROLL, 3, 5), 2);
	cr_expect_eq(mix_partner(ISPEC_PAIR_ROLL, 0, 1), 0);
	cr_expect_eq(mix_partner(ISPEC_PAIR_FLIP, 0, 1), 0);
}

/*
 * timm's rand_bbox with correct_lam, replayed from the same draws: the
 * box is [clip(c - cut // 2), clip(c + cut // 2)) on each axis, and lam
 * is 1 - its area over the image's. Over many batches the box meets
 * every border (and is clipped there) and lam stays in [0, 1].
 */
Test(mix, cutmix_box_and_corrected_lambda)
{
	struct ispec_batch sb = { .on = true, .cutmix = 1, .cut_p = 0.5 };
	uint32_t h = 7, w = 13;
	bool clipped[4] = { false }, inner = false;

	for (uint64_t b = 0; b < 20000; b++) {
		uint64_t seed = mix_seed(42, 0, 3, b);
		struct mix_draw d;
		struct rng r;
		double lam, rat;
		int64_t ch, cw, cy, cx, want[4];

		mix_draw(&sb, seed, h, w, &d);
		rng_seed(&r, seed);
		lam = mix_beta(&r, 1, 1);
		rat = sqrt(1 - lam);
		ch = (int64_t)(h * rat);
		cw = (int64_t)(w * rat);
		cy = (int64_t)rng_below(&r, h);
		cx = (int64_t)rng_below(&r, w);
		want[0] = cx - cw / 2 < 0 ? 0 : cx - cw / 2;
		want[1] = cy - ch / 2 < 0 ? 0 : cy - ch / 2;
		want[2] = cx + cw / 2 > w ? w : cx + cw / 2;
		want[3] = cy + ch / 2 > h ? h : cy + ch / 2;
		cr_assert_eq(d.kind, MIX_CUTMIX);
		for (unsigned k = 0; k < 4; k++)
			cr_assert_eq(d.box[k], (uint32_t)want[k],
				     "batch %lu, box[%u]", (unsigned long)b, k);
		cr_assert(fabs(d.lam - (1 - (double)(d.box[2] - d.box[0]) *
						    (d.box[3] - d.box[1]) /
						    (h * w))) < 1e-15);
		cr_assert(d.lam >= 0 && d.lam <= 1);
		clipped[0] |= cx - cw / 2 < 0;
		clipped[1] |= cy - ch / 2 < 0;
		clipped[2] |= cx + cw / 2 > w;
		clipped[3] |= cy + ch / 2 > h;
		/* Clipped, the corrected lam is above the drawn one. */
		if (cx - cw / 2 < 0 && cw / 2 > 0)
			cr_assert_gt(d.lam, lam - 1e-12);
		inner |= d.box[2] - d.box[0] == (uint32_t)(cw / 2 * 2) &&
			 d.box[3] - d.box[1] == (uint32_t)(ch / 2 * 2) &&
			 cw > 1 && ch > 1;
	}
	cr_expect(clipped[0] && clipped[1] && clipped[2] && clipped[3]);
	cr_expect(inner);
}

/* Both given: cutmix in about cut_p of the batches, mixup otherwise. */
Test(mix, switch_probability)
{
	struct ispec_batch sb = {
		.on = true, .mixup = 0.2, .cutmix = 1, .cut_p = 0.3
	};
	uint32_t cuts = 0, n = 20000;

	for (uint64_t b = 0; b < n; b++) {
		struct mix_draw d;

		mix_draw(&sb, mix_seed(7, 1, 0, b), 32, 32, &d);
		cr_assert(d.kind == MIX_MIXUP || d.kind == MIX_CUTMIX);
		cuts += d.kind == MIX_CUTMIX;
		if (d.kind == MIX_MIXUP)
			cr_assert(d.box[0] == 0 && d.box[2] == 0);
	}
	/* Binomial(20000, 0.3): sd 64.8; five of them. */
	cr_expect(fabs(cuts - 0.3 * n) < 5 * 64.8, "%u cuts", cuts);
}

/* Seeds: a batch's own domain, apart from samples', batches and ranks. */
Test(mix, seeds)
{
	cr_expect_neq(mix_seed(1, 0, 2, 3), rng_mix(1, 2, 3));
	cr_expect_neq(mix_seed(1, 0, 2, 3), mix_seed(1, 0, 2, 4));
	cr_expect_neq(mix_seed(1, 0, 2, 3), mix_seed(1, 0, 3, 3));
	cr_expect_neq(mix_seed(1, 0, 2, 3), mix_seed(1, 1, 2, 3));
	cr_expect_neq(mix_seed(1, 0, 2, 3), mix_seed(2, 0, 2, 3));
	cr_expect_eq(mix_seed(1, 0, 2, 3), mix_seed(1, 0, 2, 3));
}

/*
 * Beta(a, b): mean a / (a + b) and variance ab / ((a + b)^2 (a + b + 1))
 * over N draws, each within five standard errors: the mean's is
 * sqrt(var / N); a variance's is below sqrt(var / N) too, since
 * |x - mean| <= 1 makes E(x - mean)^4 <= var. And the same draws from the
 * same seed.
 */
Test(mix, beta_moments_and_determinism)
{
	static const double ab[][2] = {
		{ 0.2, 0.2 }, { 1, 1 }, { 0.5, 2 }, { 5, 5 }, { 0.01, 0.01 }
	};
	const uint32_t n = 200000;

	for (size_t t = 0; t < NELEM(ab); t++) {
		double a = ab[t][0], b = ab[t][1], s = 0, s2 = 0;
		double mean = a / (a + b);
		double var = a * b / ((a + b) * (a + b) * (a + b + 1));
		double se = sqrt(var / n);
		struct rng r, r2;

		rng_seed(&r, 1234 + t);
		rng_seed(&r2, 1234 + t);
		for (uint32_t i = 0; i < n; i++) {
			double x = mix_beta(&r, a, b);

			cr_assert(x >= 0 && x <= 1, "Beta(%g, %g): %g", a, b,
				  x);
			if (i < 1000)
				cr_assert_eq(x, mix_beta(&r2, a, b));
			s += x;
			s2 += (x - mean) * (x - mean);
		}
		cr_expect(fabs(s / n - mean) < 5 * se,
			  "Beta(%g, %g): mean %g, want %g +- %g", a, b, s / n,
			  mean, 5 * se);
		cr_expect(fabs(s2 / n - var) < 5 * se,
			  "Beta(%g, %g): variance %g, want %g +- %g", a, b,
			  s2 / n, var, 5 * se);
	}
}

/* Soft labels: the formula, each row summing to 1, for both pairs. */
Test(mix, soft_labels)
{
	static const int64_t lab[5] = { 3, 0, 3, 9, 1 };
	const uint32_t C = 10, n = 5;
	float out[5 * 10];

	for (unsigned pair = 0; pair < 2; pair++)
		for (unsigned kind = 0; kind < 3; kind++) {
			struct mix_draw d = { .kind = (uint8_t)kind,
					      .pair = (uint8_t)pair,
					      .lam = 0.7 };
			double lam = kind ? 0.7 : 1, e = 0.1;

			mix_labels(&d, lab, n, C, e, out);
			for (uint32_t i = 0; i < n; i++) {
				int64_t p = lab[mix_partner(pair, i, n)];
				double sum = 0;

				for (uint32_t c = 0; c < C; c++) {
					double want = ((c == lab[i]) * lam +
						       (c == p) * (1 - lam)) *
							      (1 - e) +
						      e / C;

					cr_expect(fabs(out[i * C + c] - want) <
							  1e-7,
						  "pair %u kind %u: y[%u][%u] "
						  "%g, want %g",
						  pair, kind, i, c,
						  out[i * C + c], want);
					sum += out[i * C + c];
				}
				cr_expect(fabs(sum - 1) < 1e-6);
			}
		}
}
