/*
 * test_warp.c - the geometric stages' one resampling pass
 * (pipeline/image/warp.c): its AVX2 loops against its portable ones,
 * byte for byte; the pass against a plain double-precision reference of
 * the two-pass chain it stands for (the crop resized to s x s with PIL's
 * triangle filter, then sampled bilinear or nearest, through every fill);
 * and, with the identity map over the whole image, against the plain
 * resize.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ispec.h"
#include "resize.h"
#include "warp.h"
#include "../../unit_util.h"

static const uint8_t fills[] = { ISPEC_FILL_CONSTANT, ISPEC_FILL_NEAREST,
				 ISPEC_FILL_REFLECT, ISPEC_FILL_WRAP,
				 ISPEC_FILL_CONTEXT };
static const uint8_t interps[] = { ISPEC_INTERP_NEAREST,
				   ISPEC_INTERP_BILINEAR };
static const unsigned chans[] = { 1, 3 };

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Random cases per channel count, interpolation and fill. */
#define NRAND 6

/* One pass to check: a source, the crop in it, a map, an output side. */
struct wcase {
	uint32_t w, h, s;
	unsigned ch;
	double box[4], m[6];
	uint8_t *px;
	struct ispec sp;
};

/* Uniform in [a, b). */
static double uni(uint64_t *rs, double a, double b)
{
	return a + (b - a) * (double)(ut_rand(rs) >> 11) / 9007199254740992.0;
}

/* A source of w x h random pixels, ch bytes each. */
static uint8_t *noise(uint64_t *rs, uint32_t w, uint32_t h, unsigned ch)
{
	size_t n = (size_t)w * h * ch;
	uint8_t *px = malloc(n);

	cr_assert(px);
	for (size_t i = 0; i < n; i++)
		px[i] = (uint8_t)(ut_rand(rs) >> 56);
	return px;
}

/*
 * A random case: output sides from a few pixels to a few dozen, sources
 * from a few pixels (the crop enlarged) to four times the output (shrunk,
 * with windows wider than one vector), any crop inside the source, and a
 * map that rotates, scales, shears, moves and perhaps mirrors about the
 * centre, reaching well outside the crop.
 */
static void wcase_rand(struct wcase *c, uint64_t *rs, unsigned ch,
		       uint8_t interp, uint8_t fill)
{
	static const uint32_t sides[] = { 5, 9, 16, 31, 48 };
	double half, bw, bh;

	memset(c, 0, sizeof(*c));
	c->s = sides[ut_rand(rs) % N(sides)];
	c->ch = ch;
	c->w = 3 + (uint32_t)(ut_rand(rs) % (4 * c->s));
	c->h = 3 + (uint32_t)(ut_rand(rs) % (4 * c->s));
	c->px = noise(rs, c->w, c->h, ch);
	bw = uni(rs, 0.3, 1.0) * c->w;
	bh = uni(rs, 0.3, 1.0) * c->h;
	c->box[0] = uni(rs, 0, c->w - bw);
	c->box[1] = uni(rs, 0, c->h - bh);
	c->box[2] = c->box[0] + bw;
	c->box[3] = c->box[1] + bh;
	half = c->s / 2.0;
	warp_affine_inverse(c->m, half, half, uni(rs, -180, 180),
			    uni(rs, -0.3, 0.3) * c->s,
			    uni(rs, -0.3, 0.3) * c->s, uni(rs, 0.6, 1.5),
			    uni(rs, -20, 20), uni(rs, -20, 20));
	if (ut_rand(rs) & 1) {
		const double flip[6] = { -1, 0, c->s, 0, 1, 0 };

		warp_compose(c->m, flip);
	}
	c->sp.interp = interp;
	c->sp.fill = fill;
	for (unsigned k = 0; k < 3; k++)
		c->sp.fill_rgb[k] = (double)(ut_rand(rs) % 256);
}

/*
 * Run the pass with exactly the scratch warp_scratch_bytes() promises
 * (so that a sanitizer build catches a write past it): 0 or -errno.
 */
static int run(const struct wcase *c, uint8_t *out)
{
	struct warp_src src = { c->px, (size_t)c->w * c->ch, c->w, c->h, c->ch,
				{ 0 } };
	uint32_t cols = c->s;
	size_t n;
	void *scratch;
	int err;

	memcpy(src.box, c->box, sizeof(src.box));
	if (c->sp.fill == ISPEC_FILL_CONTEXT)
		cols += 2 * (c->s / 2);
	n = warp_scratch_bytes(c->s, cols, c->w > c->h ? c->w : c->h);
	scratch = malloc(n);
	cr_assert(scratch);
	/* NaNs: a grid value read before it is made spoils the pixel */
	memset(scratch, 0xff, n);
	err = warp_run(&src, c->m, c->s, &c->sp, out, scratch, n);
	free(scratch);
	return err;
}

/*
 * The reference: PIL's precompute_coeffs() for grid index g of an axis
 * whose crop spans [b0, b1) of in pixels resized to s, in double. A
 * centre off the pixels (fill context beyond the image) is pulled back
 * onto the edge pixel's centre. Returns the count, from *x0.
 */
static int ref_window(double b0, double b1, uint32_t s, uint32_t in, int g,
		      int *x0, double *w)
{
	double scale = (b1 - b0) / s, fs = scale > 1 ? scale : 1, sum = 0;
	double c = b0 + (g + 0.5) * scale;
	int lo, hi;

	c = c < 0.5 ? 0.5 : c > in - 0.5 ? in - 0.5 : c;
	lo = (int)(c - fs + 0.5);
	hi = (int)(c + fs + 0.5);
	lo = lo < 0 ? 0 : lo;
	hi = hi > (int)in ? (int)in : hi;
	for (int x = lo; x < hi; x++) {
		double t = fabs((x - c + 0.5) / fs);

		w[x - lo] = t < 1 ? 1 - t : 0;
		sum += w[x - lo];
	}
	for (int x = lo; x < hi; x++)
		w[x - lo] /= sum;
	*x0 = lo;
	return hi - lo;
}

/* The crop's resized image at grid point (gx, gy), channel k. */
static double ref_grid(const struct wcase *c, int gx, int gy, unsigned k)
{
	double wx[512], wy[512], v = 0;
	int x0, y0, nx, ny;

	nx = ref_window(c->box[0], c->box[2], c->s, c->w, gx, &x0, wx);
	ny = ref_window(c->box[1], c->box[3], c->s, c->h, gy, &y0, wy);
	cr_assert(nx <= 512 && ny <= 512);
	for (int j = 0; j < ny; j++) {
		double row = 0;

		for (int i = 0; i < nx; i++)
			row += wx[i] *
			       c->px[((size_t)(y0 + j) * c->w + x0 + i) * c->ch +
				     (c->ch == 3 ? k : 0)];
		v += wy[j] * row;
	}
	return v;
}

/*
 * A grid index through the fill (Keras's fill modes; context keeps the
 * photograph's own pixels up to s / 2 beyond the crop): false for the
 * constant fill's outside.
 */
static bool ref_fold(int *g, int s, uint8_t fill)
{
	int p = 2 * s, half = s / 2;

	switch (fill) {
	case ISPEC_FILL_CONSTANT: return *g >= 0 && *g < s;
	case ISPEC_FILL_NEAREST: *g = *g < 0 ? 0 : *g >= s ? s - 1 : *g; break;
	case ISPEC_FILL_REFLECT:
		*g = ((*g % p) + p) % p;
		*g = *g < s ? *g : p - 1 - *g;
		break;
	case ISPEC_FILL_WRAP: *g = ((*g % s) + s) % s; break;
	default:
		*g = *g < -half ? -half : *g > s - 1 + half ? s - 1 + half : *g;
	}
	return true;
}

/* A grid point's value, or the fill where it has none. */
static double ref_point(const struct wcase *c, int gx, int gy, unsigned k)
{
	if (!ref_fold(&gx, (int)c->s, c->sp.fill) ||
	    !ref_fold(&gy, (int)c->s, c->sp.fill))
		return c->sp.fill_rgb[k];
	return ref_grid(c, gx, gy, k);
}

/*
 * Output pixel (u, v), channel k, unrounded: torch's grid_sample (no
 * corners aligned) at the mapped point, bilinear or nearest (half to
 * even), the fill weighing in for the points it takes.
 */
static double ref_pixel(const struct wcase *c, uint32_t u, uint32_t v,
			unsigned k)
{
	double x = c->m[0] * (u + 0.5) + c->m[1] * (v + 0.5) + c->m[2] - 0.5;
	double y = c->m[3] * (u + 0.5) + c->m[4] * (v + 0.5) + c->m[5] - 0.5;
	double fx, fy, acc = 0;
	int gx, gy;

	if (c->sp.interp == ISPEC_INTERP_NEAREST)
		return ref_point(c, (int)nearbyint(x), (int)nearbyint(y), k);
	gx = (int)floor(x), gy = (int)floor(y);
	fx = x - gx, fy = y - gy;
	for (int j = 0; j < 2; j++) {
		for (int i = 0; i < 2; i++) {
			double w = (i ? fx : 1 - fx) * (j ? fy : 1 - fy);

			if (w != 0)
				acc += w * ref_point(c, gx + i, gy + j, k);
		}
	}
	return acc;
}

static uint8_t to_byte(double v)
{
	v = nearbyint(v);
	return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

static const char *fill_name(uint8_t fill)
{
	static const char *names[] = { "constant", "nearest", "reflect", "wrap",
				       "context" };

	return fill < N(names) ? names[fill] : "?";
}

/* The AVX2 loops and the portable ones give the same bytes. */
Test(warp, simd_matches_portable)
{
	uint64_t rs = 0x5eed;

	for (size_t ci = 0; ci < N(chans); ci++) {
		for (size_t ii = 0; ii < N(interps); ii++) {
			for (size_t fi = 0; fi < N(fills); fi++) {
				for (unsigned r = 0; r < NRAND + 2; r++) {
					struct wcase c;
					uint8_t *a, *b;
					size_t n;

					wcase_rand(&c, &rs, chans[ci],
						   interps[ii], fills[fi]);
					/* and two at a full size */
					if (r >= NRAND) {
						free(c.px);
						c.s = 224, c.w = 260, c.h = 300;
						c.px = noise(&rs, c.w, c.h,
							     c.ch);
						c.box[0] = 3.3, c.box[1] = 5.7;
						c.box[2] = 257.9;
						c.box[3] = 295.6;
						warp_affine_inverse(
							c.m, 112, 112,
							r == NRAND ? 30 : -20,
							10, -5, 0.8, 10, 0);
					}
					n = (size_t)c.s * c.s * 3;
					a = malloc(n);
					b = malloc(n);
					cr_assert(a && b);
					warp_test_simd(false);
					cr_assert_eq(run(&c, a), 0);
					warp_test_simd(true);
					cr_assert_eq(run(&c, b), 0);
					cr_assert(
						!memcmp(a, b, n),
						"%ux%u ch %u -> %u, %s, fill "
						"%s, case %u: the loops differ",
						c.w, c.h, c.ch, c.s,
						interps[ii] ? "bilinear" :
							      "nearest",
						fill_name(fills[fi]), r);
					free(a);
					free(b);
					free(c.px);
				}
			}
		}
	}
}

/*
 * A shift by whole pixels of an s x s image (a later step's source, or
 * the crop resized first) is copied: the same bytes as the resampling
 * loops give, for every fill but context, both interpolations, gray and
 * colour values alike, shifts that leave part or none of the image.
 */
Test(warp, shift_is_copy)
{
	static const uint32_t sides[] = { 1, 2, 5, 16, 224 };
	static const int32_t by[] = { 0, 1, -1, 3, -7, 15, -16, 17, -40, 451 };
	uint64_t rs = 0x5417;
	unsigned cases = 0;

	for (size_t si = 0; si < N(sides); si++) {
		uint32_t s = sides[si];
		size_t n = (size_t)s * s * 3;
		uint8_t *px = noise(&rs, s, s, 3), *a = malloc(n),
			*b = malloc(n);
		size_t cap = warp_scratch_bytes(s, s, s);
		void *scratch = malloc(cap);

		cr_assert(a && b && scratch);
		for (size_t ii = 0; ii < N(interps); ii++) {
			for (size_t fi = 0; fi + 1 < N(fills); fi++) {
				for (size_t k = 0; k < N(by) * N(by); k++) {
					struct warp_src src = {
						px, (size_t)s * 3, s, s,
						3,  { 0, 0, s, s }
					};
					struct ispec sp = { 0 };
					double m[6] = { 1, 0, by[k % N(by)],
							0, 1, by[k / N(by)] };

					sp.interp = interps[ii];
					sp.fill = fills[fi];
					sp.fill_rgb[0] = 7;
					sp.fill_rgb[1] = 200.5;
					sp.fill_rgb[2] = 255;
					cr_assert(warp_is_shift(m));
					warp_test_shift(false);
					cr_assert_eq(warp_run(&src, m, s, &sp,
							      a, scratch, cap),
						     0);
					warp_test_shift(true);
					memset(b, 0x5a, n);
					cr_assert_eq(warp_run(&src, m, s, &sp,
							      b, scratch, 0),
						     0);
					cr_assert(!memcmp(a, b, n),
						  "%ux%u shifted %g %g, %s, "
						  "fill %s: the copy differs",
						  s, s, m[2], m[5],
						  interps[ii] ? "bilinear" :
								"nearest",
						  fill_name(fills[fi]));
					cases++;
				}
			}
		}
		free(px);
		free(a);
		free(b);
		free(scratch);
	}
	cr_assert_eq(cases, 5 * 2 * 4 * 100);
	{
		const double no[][6] = { { 1, 0, 0.5, 0, 1, 0 },
					 { -1, 0, 4, 0, 1, 0 },
					 { 1, 0.1, 0, 0, 1, 0 },
					 { 1, 0, 0, 0, 1, 1e30 } };

		for (size_t i = 0; i < N(no); i++)
			cr_assert(!warp_is_shift(no[i]), "map %zu", i);
	}
}

/* Within 1 of the two-pass chain, computed in double. */
Test(warp, matches_reference)
{
	uint64_t rs = 0xfeed;

	for (size_t ci = 0; ci < N(chans); ci++) {
		for (size_t ii = 0; ii < N(interps); ii++) {
			for (size_t fi = 0; fi < N(fills); fi++) {
				for (unsigned r = 0; r < NRAND; r++) {
					struct wcase c;
					uint8_t *out;
					int worst = 0;

					wcase_rand(&c, &rs, chans[ci],
						   interps[ii], fills[fi]);
					out = malloc((size_t)c.s * c.s * 3);
					cr_assert(out);
					cr_assert_eq(run(&c, out), 0);
					for (uint32_t v = 0; v < c.s; v++) {
						for (uint32_t u = 0; u < c.s;
						     u++) {
							for (unsigned k = 0;
							     k < 3; k++) {
								int d = out[(v * c.s +
									     u) * 3 +
									    k] -
									to_byte(ref_pixel(
										&c,
										u,
										v,
										k));

								d = d < 0 ? -d :
									    d;
								worst = d > worst ?
										d :
										worst;
							}
						}
					}
					cr_assert_leq(
						worst, 1,
						"%ux%u ch %u, box %.2f %.2f "
						"%.2f %.2f -> %u, %s, fill %s: "
						"max |diff| %d",
						c.w, c.h, c.ch, c.box[0],
						c.box[1], c.box[2], c.box[3],
						c.s,
						interps[ii] ? "bilinear" :
							      "nearest",
						fill_name(fills[fi]), worst);
					free(out);
					free(c.px);
				}
			}
		}
	}
}

/*
 * The identity map over the whole image samples the grid points
 * themselves: the plain resize, within 1 (its integer weights against
 * the pass's floats).
 */
Test(warp, identity_is_resize)
{
	static const struct {
		uint32_t w, h, s;
	} sizes[] = {
		{ 64, 48, 32 }, { 100, 75, 33 }, { 37, 29, 64 },
		{ 80, 20, 23 }, { 7, 9, 16 },	 { 257, 193, 64 },
	};
	uint64_t rs = 0xbeef;

	for (size_t i = 0; i < N(sizes); i++) {
		for (size_t ci = 0; ci < N(chans); ci++) {
			for (size_t ii = 0; ii < N(interps); ii++) {
				struct wcase c = { .w = sizes[i].w,
						   .h = sizes[i].h,
						   .s = sizes[i].s,
						   .ch = chans[ci] };
				struct rsz_plan *p = NULL;
				uint8_t *out, *want;
				size_t n = (size_t)c.s * c.s * 3;
				void *scratch;
				int worst = 0;

				c.px = noise(&rs, c.w, c.h, c.ch);
				c.box[2] = c.w, c.box[3] = c.h;
				warp_identity(c.m);
				c.sp.interp = interps[ii];
				out = malloc(n);
				want = malloc(n);
				cr_assert(out && want);
				cr_assert_eq(run(&c, out), 0);
				cr_assert_eq(
					rsz_plan_new(c.w, c.h, c.s, c.s, &p),
					0);
				scratch = malloc(rsz_scratch_size(p, c.ch) + 1);
				cr_assert(scratch);
				cr_assert_eq(rsz_run(p, c.px,
						     (size_t)c.w * c.ch, want,
						     (size_t)c.s * c.ch, c.ch,
						     scratch),
					     0);
				for (size_t j = 0; j < n; j++) {
					int d = out[j] -
						want[c.ch == 3 ? j : j / 3];

					d = d < 0 ? -d : d;
					worst = d > worst ? d : worst;
				}
				cr_assert_leq(worst, 1,
					      "%ux%u ch %u -> %u, %s: max "
					      "|diff| %d",
					      c.w, c.h, c.ch, c.s,
					      interps[ii] ? "bilinear" :
							    "nearest",
					      worst);
				free(scratch);
				rsz_plan_free(p);
				free(out);
				free(want);
				free(c.px);
			}
		}
	}
}

/* A source it cannot read, and scratch too small, are refused. */
Test(warp, refuses)
{
	uint8_t px[4 * 4 * 3] = { 0 }, out[4 * 4 * 3];
	struct warp_src src = { px, 12, 4, 4, 3, { 0, 0, 4, 4 } };
	struct ispec sp = { 0 };
	double m[6];
	size_t n = warp_scratch_bytes(4, 4, 4);
	void *scratch = malloc(n);

	cr_assert(scratch);
	warp_identity(m);
	cr_assert_eq(warp_run(&src, m, 4, &sp, out, scratch, n), 0);
	/* a shift copies, with no scratch; half a pixel more resamples */
	cr_assert_eq(warp_run(&src, m, 4, &sp, out, scratch, 0), 0);
	m[2] = 0.5;
	cr_assert_eq(warp_run(&src, m, 4, &sp, out, scratch, 16), -ENOSPC);
	src.ch = 2;
	cr_assert_eq(warp_run(&src, m, 4, &sp, out, scratch, n), -EINVAL);
	src.ch = 3;
	src.box[2] = 0;
	cr_assert_eq(warp_run(&src, m, 4, &sp, out, scratch, n), -EINVAL);
	free(scratch);
}
