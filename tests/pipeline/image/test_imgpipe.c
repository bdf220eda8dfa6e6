/*
 * test_imgpipe.c - one JPEG through the image pipeline, against the
 * reference path torchvision takes: full decode (TurboJPEG), crop, then
 * PIL's filter (rsz on the whole crop), flip; bit for bit where the
 * pipeline decodes at 8/8, within a PSNR bound where a DCT scale
 * shrinks the region first. Reproducibility from the seed, gray input,
 * damaged input and the pixel limit.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <turbojpeg.h>

#include "augment.h"
#include "diag.h"
#include "imgpipe.h"
#include "ispec.h"
#include "jroi.h"
#include "jrst.h"
#include "loader_error.h"
#include "resize.h"
#include "rng.h"
#include "../../unit_util.h"
#include "../../ut_jrst.h"

#define S 224

/* A textured picture (gradients, a disc, noise), JPEG-encoded. */
static unsigned char *make_jpeg(uint32_t w, uint32_t h, int pf, int subsamp,
				unsigned seed, unsigned long *len)
{
	uint32_t ch = pf == TJPF_GRAY ? 1 : 3;
	unsigned char *px = malloc((size_t)w * h * ch), *jpg = NULL;
	uint64_t r = seed + 1;
	tjhandle tj = tjInitCompress();

	cr_assert(px && tj);
	ut_picture(px, w, h, ch, seed);
	for (size_t i = 0; i < (size_t)w * h * ch; i++) {
		int v = px[i] + (int)(ut_rand(&r) % 31) - 15;

		px[i] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
	}
	cr_assert_eq(tjCompress2(tj, px, (int)w, 0, (int)h, pf, &jpg, len,
				 subsamp, 90, 0),
		     0, "%s", tjGetErrorStr2(tj));
	tjDestroy(tj);
	free(px);
	return jpg;
}

/* Full decode to RGB (gray repeated into three channels). */
static unsigned char *full_rgb(const unsigned char *jpg, unsigned long len,
			       uint32_t *w, uint32_t *h)
{
	tjhandle tj = tjInitDecompress();
	int iw, ih, ss, cs;
	unsigned char *rgb;

	cr_assert(tj);
	cr_assert_eq(tjDecompressHeader3(tj, jpg, len, &iw, &ih, &ss, &cs), 0);
	rgb = malloc((size_t)iw * ih * 3);
	cr_assert(rgb);
	if (cs == TJCS_GRAY) {
		unsigned char *g = malloc((size_t)iw * ih);

		cr_assert_eq(
			tjDecompress2(tj, jpg, len, g, iw, 0, ih, TJPF_GRAY, 0),
			0);
		for (size_t i = 0; i < (size_t)iw * ih; i++)
			rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = g[i];
		free(g);
	} else {
		cr_assert_eq(tjDecompress2(tj, jpg, len, rgb, iw, 0, ih,
					   TJPF_RGB, 0),
			     0);
	}
	tjDestroy(tj);
	*w = (uint32_t)iw;
	*h = (uint32_t)ih;
	return rgb;
}

/* Resize the w x h window at (x, y) of an RGB image to S x S with rsz. */
static void ref_resize(const unsigned char *rgb, uint32_t iw, uint32_t x,
		       uint32_t y, uint32_t w, uint32_t h, uint32_t ow,
		       uint32_t oh, unsigned char *out)
{
	struct rsz_plan *p;
	void *scratch;

	cr_assert_eq(rsz_plan_new(w, h, ow, oh, &p), 0);
	scratch = malloc(rsz_scratch_size(p, 3) + 1);
	cr_assert_eq(rsz_run(p, rgb + ((size_t)y * iw + x) * 3, (size_t)iw * 3,
			     out, (size_t)ow * 3, 3, scratch),
		     0);
	free(scratch);
	rsz_plan_free(p);
}

static void mirror(unsigned char *img, uint32_t w, uint32_t h)
{
	for (uint32_t r = 0; r < h; r++) {
		unsigned char *row = img + (size_t)r * w * 3;

		for (uint32_t a = 0, b = w - 1; a < b; a++, b--)
			for (int c = 0; c < 3; c++) {
				unsigned char t = row[a * 3 + c];

				row[a * 3 + c] = row[b * 3 + c];
				row[b * 3 + c] = t;
			}
	}
}

static double psnr(const unsigned char *a, const unsigned char *b, size_t n)
{
	double se = 0;

	for (size_t i = 0; i < n; i++)
		se += (double)(a[i] - b[i]) * (a[i] - b[i]);
	return se == 0 ? INFINITY : 10 * log10(255.0 * 255.0 * n / se);
}

static int max_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
	int m = 0;

	for (size_t i = 0; i < n; i++) {
		int d = abs(a[i] - b[i]);

		if (d > m)
			m = d;
	}
	return m;
}

static struct imgpipe *make_pipe(const char *text)
{
	struct ispec sp;
	struct diag d = { 0 };
	struct imgpipe *ip;

	cr_assert_eq(ispec_parse(&sp, text, &d), 0, "%s", d.msg);
	cr_assert_eq(imgpipe_new(&ip, &sp, 0, &d), 0, "%s", d.msg);
	return ip;
}

/*
 * A spec's pipeline, a worker state and two outputs, for tests that run
 * each sample twice and compare.
 */
struct twin {
	struct imgpipe *ip;
	struct imgpipe_ws *ws;
	unsigned char *x, *y;
	size_t n;
};

static void twin_open(struct twin *t, const char *spec)
{
	t->ip = make_pipe(spec);
	t->n = ispec_out_bytes(imgpipe_spec(t->ip));
	t->x = malloc(t->n);
	t->y = malloc(t->n);
	cr_assert(t->x && t->y);
	cr_assert_eq(imgpipe_ws_new(t->ip, false, &t->ws), 0);
}

static void twin_close(struct twin *t)
{
	imgpipe_ws_free(t->ws);
	imgpipe_free(t->ip);
	free(t->x);
	free(t->y);
}

struct rrc_case {
	uint32_t w, h;
	int pf, subsamp;
};

/*
 * RandomResizedCrop + flip, u8 NHWC, against full decode + crop + resize
 * + flip with the same parameters, over many seeds: equal where the
 * pipeline chose 8/8, and close where it chose a smaller DCT scale.
 */
Test(imgpipe, rrc_matches_reference)
{
	static const struct rrc_case cases[] = {
		{ 500, 375, TJPF_RGB, TJSAMP_420 },
		{ 375, 500, TJPF_RGB, TJSAMP_420 },
		{ 333, 250, TJPF_RGB, TJSAMP_444 },
		{ 120, 90, TJPF_RGB, TJSAMP_420 }, /* smaller than the output */
		{ 500, 375, TJPF_GRAY, TJSAMP_GRAY },
		{ 1600, 1200, TJPF_RGB, TJSAMP_420 }, /* DCT-scaled crops */
	};
	struct imgpipe *ip =
		make_pipe("decode | rrc 224 | flip 0.5 | u8 | nhwc");
	const struct ispec *sp = imgpipe_spec(ip);
	struct imgpipe_ws *ws;
	unsigned char *out = malloc(S * S * 3), *ref = malloc(S * S * 3);
	unsigned exact = 0, scaled = 0, flips = 0;
	double worst = INFINITY;

	cr_assert_eq(imgpipe_ws_new(ip, false, &ws), 0);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		unsigned long len;
		unsigned char *jpg =
			make_jpeg(cases[c].w, cases[c].h, cases[c].pf,
				  cases[c].subsamp, (unsigned)c, &len);
		uint32_t iw, ih;
		unsigned char *rgb = full_rgb(jpg, len, &iw, &ih);

		for (uint64_t seed = 0; seed < 24; seed++) {
			struct diag d = { 0 };
			struct augment_rect r;
			struct rng g;
			struct jroi_req q;
			bool flip;

			cr_assert_eq(
				imgpipe_run(ip, ws, jpg, len, seed, out, &d), 0,
				"%s", d.msg);
			rng_seed(&g, seed);
			cr_assert_eq(augment_rrc(&g, iw, ih, sp->scale[0],
						 sp->scale[1], sp->ratio[0],
						 sp->ratio[1], &r),
				     0);
			flip = augment_flip(&g, 0.5);
			ref_resize(rgb, iw, (uint32_t)r.x, (uint32_t)r.y,
				   (uint32_t)r.w, (uint32_t)r.h, S, S, ref);
			if (flip) {
				mirror(ref, S, S);
				flips++;
			}
			q = (struct jroi_req){ .x = (uint32_t)r.x,
					       .y = (uint32_t)r.y,
					       .w = (uint32_t)r.w,
					       .h = (uint32_t)r.h,
					       .min_w = S,
					       .min_h = S };
			if (jroi_pick_scale(&q, iw, ih) == JROI_DENOM) {
				cr_expect_eq(
					memcmp(out, ref, S * S * 3), 0,
					"%ux%u seed %lu: 8/8 crop differs (max %d)",
					iw, ih, (unsigned long)seed,
					max_diff(out, ref, S * S * 3));
				exact++;
			} else {
				double p = psnr(out, ref, S * S * 3);

				if (p < worst)
					worst = p;
				cr_expect_geq(p, 30.0,
					      "%ux%u seed %lu: PSNR %.1f dB",
					      iw, ih, (unsigned long)seed, p);
				scaled++;
			}
		}
		free(rgb);
		tjFree(jpg);
	}
	cr_log_info(
		"rrc: %u exact at 8/8, %u DCT-scaled (worst PSNR %.1f dB), %u flipped",
		exact, scaled, worst, flips);
	cr_expect_gt(exact, 50);
	cr_expect_gt(scaled, 5);
	cr_expect_gt(flips, 20);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	free(out);
	free(ref);
}

/*
 * Resize 256 + center 224: torchvision resizes the whole image, then
 * crops. The pipeline decodes and resizes only the crop (with the
 * filter's reach around it): within one level of the reference.
 */
Test(imgpipe, resize_center_matches_reference)
{
	static const uint32_t sizes[][2] = {
		{ 500, 375 }, { 375, 500 }, { 256, 300 }, { 640, 480 }
	};
	struct imgpipe *ip =
		make_pipe("decode | resize 256 | center 224 | u8 | nhwc");
	struct imgpipe_ws *ws;
	unsigned char *out = malloc(S * S * 3);

	cr_assert_eq(imgpipe_ws_new(ip, false, &ws), 0);
	for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++) {
		unsigned long len;
		unsigned char *jpg =
			make_jpeg(sizes[c][0], sizes[c][1], TJPF_RGB,
				  TJSAMP_420, (unsigned)c + 40, &len);
		uint32_t iw, ih, rw, rh;
		unsigned char *rgb = full_rgb(jpg, len, &iw, &ih);
		struct augment_rect r;
		unsigned char *big, *ref = malloc(S * S * 3);
		struct diag d = { 0 };
		uint32_t top, left;

		cr_assert_eq(
			augment_resize_center(iw, ih, 256, S, &r, &rw, &rh), 0);
		big = malloc((size_t)rw * rh * 3);
		ref_resize(rgb, iw, 0, 0, iw, ih, rw, rh, big);
		top = (uint32_t)augment_round_half_even((rh - S) / 2.0);
		left = (uint32_t)augment_round_half_even((rw - S) / 2.0);
		for (uint32_t y = 0; y < S; y++)
			memcpy(ref + (size_t)y * S * 3,
			       big + (((size_t)(top + y) * rw) + left) * 3,
			       S * 3);
		cr_assert_eq(imgpipe_run(ip, ws, jpg, len, 7, out, &d), 0, "%s",
			     d.msg);
		cr_expect_leq(max_diff(out, ref, S * S * 3), 1,
			      "%ux%u: max diff %d", iw, ih,
			      max_diff(out, ref, S * S * 3));
		free(big);
		free(ref);
		free(rgb);
		tjFree(jpg);
	}
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	free(out);
}

/* The bytes depend on the seed and the image only, not on the worker. */
Test(imgpipe, reproducible_from_seed)
{
	struct imgpipe *ip = make_pipe(
		"decode | rrc 64 | flip 0.5 | normalize imagenet | f16 | nchw");
	size_t n = ispec_out_bytes(imgpipe_spec(ip));
	struct imgpipe_ws *a, *b;
	unsigned char *x = malloc(n), *y = malloc(n), *z = malloc(n);
	unsigned long len;
	unsigned char *jpg = make_jpeg(400, 300, TJPF_RGB, TJSAMP_420, 9, &len);
	struct diag d = { 0 };
	struct imgpipe_times t;
	unsigned differ = 0;

	cr_assert_eq(ispec_out_bytes(imgpipe_spec(ip)), 3 * 64 * 64 * 2);
	cr_assert_eq(imgpipe_ws_new(ip, true, &a), 0);
	cr_assert_eq(imgpipe_ws_new(ip, false, &b), 0);
	for (uint64_t seed = 100; seed < 120; seed++) {
		cr_assert_eq(imgpipe_run(ip, a, jpg, len, seed, x, &d), 0);
		/* another worker, after other work */
		cr_assert_eq(imgpipe_run(ip, b, jpg, len, seed + 1, z, &d), 0);
		cr_assert_eq(imgpipe_run(ip, b, jpg, len, seed, y, &d), 0);
		cr_expect_eq(memcmp(x, y, n), 0, "seed %lu",
			     (unsigned long)seed);
		differ += memcmp(x, z, n) != 0;
	}
	cr_expect_eq(differ, 20, "different seeds give different crops");
	imgpipe_ws_times(a, &t);
	cr_expect_eq(t.images, 20);
	cr_expect_gt(t.decode_ns, 0);
	cr_expect_gt(t.resize_ns, 0);
	imgpipe_ws_times(b, &t);
	cr_expect_eq(t.images, 0, "no timing asked for");
	imgpipe_ws_free(a);
	imgpipe_ws_free(b);
	imgpipe_free(ip);
	tjFree(jpg);
	free(x);
	free(y);
	free(z);
}

/* Damaged input is an error with a reason, never a crash. */
Test(imgpipe, bad_input)
{
	/* every row and most columns are read: damage anywhere shows */
	struct imgpipe *ip =
		make_pipe("decode | resize 200 | center 200 | f32");
	struct ispec sp = *imgpipe_spec(ip);
	struct imgpipe *small;
	struct imgpipe_ws *ws, *sws;
	unsigned long len;
	unsigned char *jpg = make_jpeg(300, 200, TJPF_RGB, TJSAMP_420, 3, &len);
	unsigned char *out = malloc(ispec_out_bytes(&sp));
	unsigned char *bad = malloc(len);
	struct diag d = { 0 };

	cr_assert_eq(imgpipe_ws_new(ip, false, &ws), 0);
	cr_expect_eq(imgpipe_run(ip, ws, jpg, 0, 1, out, &d), LOADER_EDECODE);
	cr_expect(strstr(d.msg, "empty"), "%s", d.msg);
	cr_expect_eq(imgpipe_run(ip, ws, "not a jpeg", 10, 1, out, &d),
		     LOADER_EDECODE);
	/* cut in the middle of the entropy-coded data */
	cr_expect_eq(imgpipe_run(ip, ws, jpg, len / 2, 1, out, &d),
		     LOADER_EDECODE, "truncated: %s", d.msg);
	/* garbage in the scan */
	memcpy(bad, jpg, len);
	for (unsigned long i = len / 3; i < len / 3 + 64; i++)
		bad[i] = 0xff;
	cr_expect_neq(imgpipe_run(ip, ws, bad, len, 1, out, &d), 0,
		      "corrupt scan decoded");
	/* the decoder recovers: a good image right after */
	cr_expect_eq(imgpipe_run(ip, ws, jpg, len, 1, out, &d), 0, "%s", d.msg);

	/* the pixel limit, from the header */
	cr_assert_eq(imgpipe_new(&small, &sp, 300 * 200 - 1, &d), 0);
	cr_assert_eq(imgpipe_ws_new(small, false, &sws), 0);
	cr_expect_eq(imgpipe_run(small, sws, jpg, len, 1, out, &d),
		     LOADER_ETOOBIG, "%s", d.msg);
	imgpipe_ws_free(sws);
	imgpipe_free(small);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	tjFree(jpg);
	free(out);
	free(bad);
}

/* A plain center crop needs an image at least that large. */
Test(imgpipe, center_too_small)
{
	struct imgpipe *ip = make_pipe("decode | center 224 | u8");
	struct imgpipe_ws *ws;
	unsigned long len;
	unsigned char *jpg = make_jpeg(300, 200, TJPF_RGB, TJSAMP_420, 5, &len);
	unsigned char *out = malloc(S * S * 3);
	struct diag d = { 0 };

	cr_assert_eq(imgpipe_ws_new(ip, false, &ws), 0);
	cr_expect_eq(imgpipe_run(ip, ws, jpg, len, 1, out, &d), LOADER_ERANGE);
	cr_expect(strstr(d.msg, "300x200"), "%s", d.msg);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	tjFree(jpg);
	free(out);
}

/*
 * The pipeline's output from a JPEG transcoded to restart segments (the
 * segment path) equals its output from the original (the region path),
 * byte for byte: RandomResizedCrop + flip and resize + center crop,
 * f32 and u8, over many seeds, every sampling mode, sizes that make the
 * pipeline pick every DCT scale (1600x1200 and 2400x1800 go to 4/8 and
 * 2/8, small crops of them stay at 8/8), one and two MCUs a segment.
 */
Test(imgpipe, segments_match_region_path)
{
	static const char *const specs[] = {
		"decode | rrc 224 | flip 0.5 | normalize imagenet | f32 | nchw",
		"decode | resize 256 | center 224 | normalize imagenet | f32 | nchw",
		"decode | rrc 96 scale 0.01 1 | flip 0.5 | u8 | nhwc",
		"decode | center 64 | u8 | nhwc",
	};
	static const struct {
		uint32_t w, h;
		int pf, subsamp;
	} cases[] = {
		{ 1600, 1200, TJPF_RGB, TJSAMP_420 },
		{ 2400, 1800, TJPF_RGB, TJSAMP_420 },
		{ 500, 375, TJPF_RGB, TJSAMP_420 },
		{ 375, 500, TJPF_RGB, TJSAMP_444 },
		{ 503, 371, TJPF_RGB, TJSAMP_422 },
		{ 333, 250, TJPF_RGB, TJSAMP_440 },
		{ 640, 427, TJPF_GRAY, TJSAMP_GRAY },
		{ 300, 301, TJPF_RGB, TJSAMP_411 },
	};
	uint64_t segs = 0, runs = 0;

	for (size_t si = 0; si < sizeof(specs) / sizeof(specs[0]); si++) {
		struct twin tw;
		struct imgpipe_times t0, t1;

		twin_open(&tw, specs[si]);
		for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]);
		     ci++) {
			unsigned long len;
			unsigned char *jpg = make_jpeg(
				cases[ci].w, cases[ci].h, cases[ci].pf,
				cases[ci].subsamp, (unsigned)(ci + 31), &len);

			for (uint32_t iv = 1; iv <= 2; iv++) {
				size_t rlen;
				unsigned char *rst = ut_restart_copy(
					jpg, len, iv, true, &rlen);

				imgpipe_ws_times(tw.ws, &t0);
				for (uint64_t seed = 0; seed < 12; seed++) {
					struct diag d = { 0 };

					cr_assert_eq(imgpipe_run(tw.ip, tw.ws,
								 jpg, len, seed,
								 tw.x, &d),
						     0, "%s", d.msg);
					cr_assert_eq(imgpipe_run(tw.ip, tw.ws,
								 rst, rlen,
								 seed, tw.y,
								 &d),
						     0, "%s", d.msg);
					cr_assert_eq(
						memcmp(tw.x, tw.y, tw.n), 0,
						"%s on %ux%u (case %zu), %u MCUs a segment, seed %llu: outputs differ",
						specs[si], cases[ci].w,
						cases[ci].h, ci, iv,
						(unsigned long long)seed);
					runs++;
				}
				imgpipe_ws_times(tw.ws, &t1);
				segs += t1.segment_decodes - t0.segment_decodes;
				free(rst);
			}
			tjFree(jpg);
		}
		twin_close(&tw);
	}
	/* Only crops whose margin reaches over the whole image may not. */
	cr_expect_gt(segs, runs * 8 / 10,
		     "%llu of %llu transcoded runs took the segment path",
		     (unsigned long long)segs, (unsigned long long)runs);
}

/*
 * A fused warp with fill constant or nearest decodes only the part of
 * the crop its map reaches (and the filter's reach around it): the same
 * bytes as decoding the whole crop, at every DCT scale, from the file as
 * it is and from restart segments.
 */
Test(imgpipe, tight_warp_request_changes_nothing)
{
	static const char *const specs[] = {
		"decode | resize 256 | center 224 | flip 0.5 | affine rotate 20 translate 0.1 0.1 zoom 0.8 1.2 shear 0.2 interp bilinear fill nearest | u8 | nhwc",
		"decode | resize 256 | center 224 | affine rotate 30 translate 0.3 0.3 zoom 0.4 1.1 fill 0 | u8 | nhwc",
		"decode | rrc 96 scale 0.01 1 | rotate 30 interp bilinear | u8 | nhwc",
		"decode | rrc 64 | vflip 0.5 | affine rotate 45 translate 0.2 0.2 zoom 0.3 0.9 interp bilinear fill nearest | u8 | nhwc",
		"decode | rrc 48 scale 0.5 1 | affine rotate 10 scale 1.5 3 fill 9,8,7 | u8 | nhwc",
	};
	static const struct {
		uint32_t w, h;
		int subsamp;
	} cases[] = {
		{ 500, 375, TJSAMP_420 },
		{ 375, 500, TJSAMP_444 },
		{ 1600, 1200, TJSAMP_420 },
		{ 2400, 1800, TJSAMP_422 },
	};

	for (size_t si = 0; si < sizeof(specs) / sizeof(specs[0]); si++) {
		struct twin tw;

		twin_open(&tw, specs[si]);
		for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]);
		     ci++) {
			unsigned long len;
			size_t rlen;
			unsigned char *jpg = make_jpeg(
				cases[ci].w, cases[ci].h, TJPF_RGB,
				cases[ci].subsamp, (unsigned)(ci + 7), &len);
			unsigned char *rst =
				ut_restart_copy(jpg, len, 1, true, &rlen);

			for (uint64_t seed = 0; seed < 24; seed++) {
				const unsigned char *f = seed & 1 ? rst : jpg;
				size_t fl = seed & 1 ? rlen : len;
				struct diag d = { 0 };

				imgpipe_test_tight(false);
				cr_assert_eq(imgpipe_run(tw.ip, tw.ws, f, fl,
							 seed, tw.x, &d),
					     0, "%s", d.msg);
				imgpipe_test_tight(true);
				cr_assert_eq(imgpipe_run(tw.ip, tw.ws, f, fl,
							 seed, tw.y, &d),
					     0, "%s", d.msg);
				cr_assert_eq(
					memcmp(tw.x, tw.y, tw.n), 0,
					"%s on %ux%u, seed %llu: decoding the whole crop gives other bytes",
					specs[si], cases[ci].w, cases[ci].h,
					(unsigned long long)seed);
			}
			free(rst);
			tjFree(jpg);
		}
		twin_close(&tw);
	}
}

/*
 * A spec with schedules: the pipeline made for its largest epoch, and
 * each epoch's derived from it (imgpipe_derive(), as the assembler does),
 * run on the first one's worker states, give the bytes of a pipeline
 * made for that epoch's spec alone; a spec that does not fit is refused.
 */
Test(imgpipe, derived_epochs_match_their_own)
{
	const char *text = "decode | rrc 32@0..96@4/32 | flip 0.5 | "
			   "rotate 10@0..30@4 fill context | "
			   "normalize imagenet | f16 | nchw";
	unsigned long len;
	unsigned char *jpg = make_jpeg(400, 300, TJPF_RGB, TJSAMP_420, 5, &len);
	struct ispec sp, ep;
	struct diag d = { 0 };
	struct imgpipe *big, *own, *der;
	struct imgpipe_ws *wb, *wo;
	size_t cap = 3 * 96 * 96 * 2;
	unsigned char *x = malloc(cap), *y = malloc(cap);

	cr_assert_eq(ispec_parse(&sp, text, &d), 0, "%s", d.msg);
	cr_assert_eq(sp.size_max, 96);
	cr_assert_eq(ispec_parse_epoch(&ep, text, sp.size_max_epoch, &d), 0);
	cr_assert_eq(imgpipe_new(&big, &ep, 0, &d), 0, "%s", d.msg);
	cr_assert_eq(imgpipe_ws_new(big, false, &wb), 0);
	for (uint32_t e = 0; e <= 5; e++) {
		size_t n;

		cr_assert_eq(ispec_parse_epoch(&ep, text, e, &d), 0);
		cr_assert_eq(imgpipe_derive(&der, big, &ep, &d), 0, "%s",
			     d.msg);
		cr_assert_eq(imgpipe_new(&own, &ep, 0, &d), 0);
		cr_assert_eq(imgpipe_ws_new(own, false, &wo), 0);
		n = ispec_out_bytes(imgpipe_spec(der));
		cr_expect_eq(n, ispec_out_bytes(&ep));
		for (uint64_t seed = 1; seed <= 4; seed++) {
			cr_assert_eq(
				imgpipe_run(der, wb, jpg, len, seed, x, &d), 0,
				"%s", d.msg);
			cr_assert_eq(
				imgpipe_run(own, wo, jpg, len, seed, y, &d), 0,
				"%s", d.msg);
			cr_expect_eq(memcmp(x, y, n), 0, "epoch %u seed %lu", e,
				     (unsigned long)seed);
		}
		imgpipe_ws_free(wo);
		imgpipe_free(own);
		imgpipe_free(der);
	}
	/* larger than the pipeline, or other stages: refused */
	cr_assert_eq(ispec_parse(&ep,
				 "decode | rrc 128 | flip 0.5 | rotate 5 "
				 "fill context | normalize imagenet | f16",
				 &d),
		     0);
	cr_expect_eq(imgpipe_derive(&der, big, &ep, &d), LOADER_EUSAGE);
	cr_assert_eq(ispec_parse(&ep, "decode | rrc 32 | flip 0.5 | f16", &d),
		     0);
	cr_expect_eq(imgpipe_derive(&der, big, &ep, &d), LOADER_EUSAGE);
	imgpipe_ws_free(wb);
	imgpipe_free(big);
	tjFree(jpg);
	free(x);
	free(y);
}
