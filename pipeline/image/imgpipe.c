/*
 * imgpipe.c - one JPEG through the image pipeline (see imgpipe.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "augment.h"
#include "clock.h"
#include "color.h"
#include "erase.h"
#include "fault.h"
#include "geom.h"
#include "imgkern.h"
#include "imgpipe.h"
#include "jroi.h"
#include "loader_error.h"
#include "resize.h"
#include "rng.h"
#include "warp.h"

/*
 * The largest side of a decoded region a worker is sized for, besides
 * twice the output size: a JPEG side is at most 65535, and at the
 * coarsest scale (1/8) that is 8192 pixels, plus the covering pixel.
 */
#define IMGPIPE_WIDE_SIDE (65535u / JROI_DENOM + 2)

struct imgpipe {
	struct ispec sp;
	uint64_t max_pixels;
	uint32_t max_side;  /* of a decoded region */
	size_t dec_cap;	    /* bytes of a decoded region */
	size_t plan_cap;    /* bytes of a resize plan */
	size_t scratch_cap; /* bytes of resize scratch */
	size_t tmp_cap;	    /* bytes of the colour stages' scratch */
	bool warp;	    /* the spec has geometric stages */
	uint32_t warp_side; /* largest decoded side a warp takes */
	size_t warp_cap;    /* bytes of warp scratch */
	size_t ws_bytes;    /* all of a worker's buffers */
};

struct imgpipe_ws {
	struct jroi_dec *dec;
	bool timing;
	struct imgpipe_times t;
	unsigned char *mem; /* one allocation for everything below */
	unsigned char *dec_buf;
	void *plan_mem;
	void *scratch;
	unsigned char *rgb;  /* size x size x 3 */
	unsigned char *tmp;  /* size x size x 3: the colour stages' scratch */
	unsigned char *gray; /* size x size */
	unsigned char *rgb2; /* size x size x 3: a warp of rgb (warp specs) */
	void *warp_scratch;
	struct geom_draws gd; /* the sample's steps */
	uint64_t chain_ns;    /* this sample's warps after the first pass */
};

static size_t round64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

int imgpipe_new(struct imgpipe **out, const struct ispec *sp,
		uint64_t max_pixels, struct diag *d)
{
	struct imgpipe *ip;
	uint64_t s, px;

	*out = NULL;
	if (sp->size == 0 || sp->size > ISPEC_SIZE_MAX)
		return diag_set(d, LOADER_EUSAGE, "image size %u out of range",
				sp->size);
	ip = mem_calloc(1, sizeof(*ip));
	if (!ip)
		return -ENOMEM;
	ip->sp = *sp;
	ip->max_pixels = max_pixels ? max_pixels : JROI_DEFAULT_MAX_PIXELS;
	s = sp->size;
	/*
	 * A region decoded at the scale jroi picks is under twice the
	 * output size per side (a finer scale than needed is chosen only
	 * when the coarser one is too small), unless even 1/8 is larger
	 * than needed: then it is at most an eighth of the image per side.
	 * Room for both; a region that would still not fit (an extreme
	 * aspect ratio) is decoded at a coarser scale instead.
	 */
	ip->max_side = 2 * (uint32_t)s + 32;
	if (ip->max_side < IMGPIPE_WIDE_SIDE)
		ip->max_side = IMGPIPE_WIDE_SIDE;
	px = (2 * s + 32) * (2 * s + 32) * 2;
	if (px < ip->max_pixels / 64 + 4ull * IMGPIPE_WIDE_SIDE)
		px = ip->max_pixels / 64 + 4ull * IMGPIPE_WIDE_SIDE;
	ip->dec_cap = round64(px * 3);
	ip->plan_cap = round64(rsz_plan_bytes(ip->max_side, ip->max_side,
					      (uint32_t)s, (uint32_t)s));
	ip->scratch_cap = round64(
		rsz_scratch_bytes(ip->max_side, (uint32_t)s, (uint32_t)s, 3));
	/* The colour stages' scratch, for specs that have one. */
	ip->tmp_cap = sp->nops || sp->has_vflip ?
			      round64(color_scratch_bytes((uint32_t)s)) :
			      0;
	/*
	 * A warp reads the crop (or, for fill context, up to s / 2 grid
	 * steps around it) from a region of at most warp_side a side: a
	 * scale with more pixels than that is passed over for a coarser one.
	 */
	ip->warp = ispec_has_warp(sp);
	if (ip->warp) {
		bool ctx = sp->fill == ISPEC_FILL_CONTEXT;
		uint32_t cols = (uint32_t)s + (ctx ? 2 * ((uint32_t)s / 2) : 0);

		ip->warp_side = (uint32_t)(ctx ? 3 * s : 2 * s) + 64;
		ip->warp_cap = round64(
			warp_scratch_bytes((uint32_t)s, cols, ip->warp_side));
	}
	ip->ws_bytes = ip->dec_cap + ip->plan_cap + ip->scratch_cap +
		       round64(s * s * 3) + ip->tmp_cap + round64(s * s) +
		       (ip->warp ? round64(s * s * 3) + ip->warp_cap : 0);
	*out = ip;
	return 0;
}

int imgpipe_derive(struct imgpipe **out, const struct imgpipe *ip,
		   const struct ispec *sp, struct diag *d)
{
	const struct ispec *was = &ip->sp;
	struct imgpipe *n;

	*out = NULL;
	if (sp->size > was->size || sp->nops != was->nops ||
	    sp->has_vflip != was->has_vflip || sp->fill != was->fill ||
	    ispec_has_warp(sp) != ip->warp)
		return diag_set(
			d, LOADER_EUSAGE,
			"the spec of size %" PRIu32
			" does not fit the pipeline made for size %" PRIu32,
			sp->size, was->size);
	n = mem_calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	*n = *ip;
	n->sp = *sp;
	*out = n;
	return 0;
}

void imgpipe_free(struct imgpipe *ip)
{
	free(ip);
}

const struct ispec *imgpipe_spec(const struct imgpipe *ip)
{
	return &ip->sp;
}

size_t imgpipe_ws_bytes(const struct imgpipe *ip)
{
	return ip->ws_bytes;
}

int imgpipe_ws_new(const struct imgpipe *ip, bool timing,
		   struct imgpipe_ws **out)
{
	struct imgpipe_ws *ws;
	size_t s = ip->sp.size;
	unsigned char *p;

	*out = NULL;
	ws = mem_calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	ws->timing = timing;
	if (jroi_new(&ws->dec, ip->max_pixels) ||
	    !(ws->mem = mem_aligned(64, ip->ws_bytes))) {
		imgpipe_ws_free(ws);
		return -ENOMEM;
	}
	p = ws->mem;
	ws->dec_buf = p;
	p += ip->dec_cap;
	ws->plan_mem = p;
	p += ip->plan_cap;
	ws->scratch = p;
	p += ip->scratch_cap;
	ws->rgb = p;
	p += round64(s * s * 3);
	ws->tmp = p;
	p += ip->tmp_cap;
	ws->gray = p;
	p += round64(s * s);
	if (ip->warp) {
		ws->rgb2 = p;
		p += round64(s * s * 3);
		ws->warp_scratch = p;
	}
	*out = ws;
	return 0;
}

void imgpipe_ws_free(struct imgpipe_ws *ws)
{
	if (!ws)
		return;
	jroi_free(ws->dec);
	free(ws->mem);
	free(ws);
}

void imgpipe_ws_times(const struct imgpipe_ws *ws, struct imgpipe_times *t)
{
	struct jroi_counts c;

	*t = ws->t;
	jroi_get_counts(ws->dec, &c);
	t->segment_decodes = c.segments;
}

static uint64_t clock_ns(const struct imgpipe_ws *ws)
{
	return ws->timing ? clock_mono_ns() : 0;
}

/*
 * Pin the request's scale: the one jroi would pick, or, if that region
 * would not fit the worker's buffers, the finest coarser one that does.
 */
static void fit_scale(const struct imgpipe *ip, struct jroi_req *q,
		      uint32_t width, uint32_t height, uint32_t max_side)
{
	uint32_t k = jroi_pick_scale(q, width, height);

	for (; k > 1; k--) {
		uint64_t w, h;

		jroi_region_size(q, k, &w, &h);
		if (w <= max_side && h <= max_side && w * h * 3 <= ip->dec_cap)
			break;
	}
	q->scale_num = k ? k : 1;
}

/*
 * The source rectangle r (fractional for the resize + center path) and
 * the request that decodes it: r's bounding whole pixels, widened for
 * the resize + center path by the filter's reach, so that the pixels
 * just outside r weigh in as they do when torchvision resizes the
 * whole image first.
 */
static int geometry(const struct imgpipe *ip, struct rng *r, uint32_t width,
		    uint32_t height, struct augment_rect *rect,
		    struct jroi_req *q, struct diag *d)
{
	const struct ispec *sp = &ip->sp;
	uint32_t rw, rh;
	double reach_x, reach_y, x0, y0, x1, y1;
	int err;

	*q = (struct jroi_req){ 0 };
	if (sp->geom == ISPEC_RRC) {
		err = augment_rrc(r, width, height, sp->scale[0], sp->scale[1],
				  sp->ratio[0], sp->ratio[1], rect);
		if (err)
			return diag_set(d, LOADER_EUSAGE,
					"rrc parameters refused");
		goto whole;
	}
	if (!sp->resize) {
		if (width < sp->size || height < sp->size)
			return diag_set(
				d, LOADER_ERANGE,
				"image of %ux%u is smaller than the center crop of %u",
				width, height, sp->size);
		rect->x = augment_round_half_even((double)(width - sp->size) /
						  2.0);
		rect->y = augment_round_half_even((double)(height - sp->size) /
						  2.0);
		rect->w = rect->h = sp->size;
		goto whole;
	}
	if (augment_resize_center(width, height, sp->resize, sp->size, rect,
				  &rw, &rh))
		return diag_set(
			d, LOADER_ERANGE,
			"image of %ux%u cannot be resized to %u and cropped to %u",
			width, height, sp->resize, sp->size);
	reach_x = rect->w / sp->size + 1.0;
	reach_y = rect->h / sp->size + 1.0;
	x0 = floor(rect->x - reach_x);
	y0 = floor(rect->y - reach_y);
	x1 = ceil(rect->x + rect->w + reach_x);
	y1 = ceil(rect->y + rect->h + reach_y);
	if (x0 < 0)
		x0 = 0;
	if (y0 < 0)
		y0 = 0;
	if (x1 > width)
		x1 = width;
	if (y1 > height)
		y1 = height;
	q->x = (uint32_t)x0;
	q->y = (uint32_t)y0;
	q->w = (uint32_t)(x1 - x0);
	q->h = (uint32_t)(y1 - y0);
	/* The scale must give the rectangle, not the request, size pixels. */
	q->min_w = (uint32_t)ceil(sp->size * (x1 - x0) / rect->w);
	q->min_h = (uint32_t)ceil(sp->size * (y1 - y0) / rect->h);
	return 0;
whole:
	/* A rectangle of whole pixels, decoded as it is. */
	q->x = (uint32_t)rect->x;
	q->y = (uint32_t)rect->y;
	q->w = (uint32_t)rect->w;
	q->h = (uint32_t)rect->h;
	q->min_w = q->min_h = sp->size;
	return 0;
}

/*
 * Everything a sample draws, from its header and seed alone, in the one
 * order that both imgpipe_run() and imgpipe_explain() take: the crop,
 * the flips, each colour and geometric stage (geom.h), then erase and
 * cutout.
 */
static int draw(const struct imgpipe *ip, struct imgpipe_ws *ws,
		const void *jpeg, size_t len, uint64_t seed,
		struct jroi_info *info, struct augment_rect *rect,
		struct jroi_req *q, bool *flip, bool *vflip,
		struct erase_draw *ed, struct diag *d)
{
	const struct ispec *sp = &ip->sp;
	struct rng r;
	int err;

	/* The decoder's checks, shared with verify: an empty payload too. */
	err = jroi_header(ws->dec, jpeg, len, info, d);
	if (err)
		return err;
	rng_seed(&r, seed);
	err = geometry(ip, &r, info->width, info->height, rect, q, d);
	if (err)
		return err;
	*flip = sp->has_flip && augment_flip(&r, sp->flip);
	*vflip = sp->has_vflip && augment_flip(&r, sp->vflip);
	geom_draw(sp, sp->size, &r, &ws->gd);
	erase_draw_params(sp, sp->size, &r, ed);
	return 0;
}

/*
 * How a sample's geometric steps run. The first that applies (nwarp of
 * them apply) is fused with the crop and the flips into one pass from the
 * decoded pixels, unless a colour step that applies comes before it: then
 * the crop is resized and coloured first and the warp resamples that, as
 * the two-pass chain does. *m: the first pass's map. Each later
 * geometric step resamples the one before's output, so that its fill
 * applies where that output ends, as it does in the chain.
 */
struct plan {
	uint32_t first; /* the first geometric step that applies */
	uint32_t nwarp;
	bool fused;
	bool shift; /* the first moves whole pixels: after the resize */
	double m[6];
};

/*
 * A first geometric step that only moves the crop by whole pixels (a
 * policy's translate, an affine that drew no angle, scale or shear)
 * interpolates nothing: the resize makes the crop and the step copies it
 * (warp_run() sees the shift), which is the same one resampling pass as
 * the fused one, at a resize's cost. Fill context alone needs the pixels
 * around the crop, which only the fused pass reads.
 */
static void plan_warp(const struct geom_draws *gd, bool flip, bool vflip,
		      uint32_t s, uint8_t fill, struct plan *pl)
{
	bool colour_first = false;

	pl->nwarp = 0;
	pl->first = gd->n;
	warp_identity(pl->m);
	for (uint32_t i = 0; i < gd->n; i++) {
		const struct geom_step *st = &gd->step[i];

		if (!st->apply)
			continue;
		if (st->type == GEOM_COLOR && !pl->nwarp)
			colour_first = true;
		if (st->type != GEOM_WARP)
			continue;
		if (!pl->nwarp++)
			pl->first = i;
	}
	pl->shift = pl->nwarp && !colour_first && fill != ISPEC_FILL_CONTEXT &&
		    warp_is_shift(gd->step[pl->first].m);
	pl->fused = pl->nwarp && !colour_first && !pl->shift;
	if (pl->fused && flip) {
		const double f[6] = { -1, 0, s, 0, 1, 0 };

		warp_compose(pl->m, f);
	}
	if (pl->fused && vflip) {
		const double f[6] = { 1, 0, 0, 0, -1, s };

		warp_compose(pl->m, f);
	}
	if (pl->nwarp)
		warp_compose(pl->m, gd->step[pl->first].m);
}

static bool tight_request = true; /* tests turn it off to compare */

void imgpipe_test_tight(bool on)
{
	tight_request = on;
}

/*
 * A fused warp decodes what its map reads: the source pixels of the
 * grid rows and columns warp_reach() gives, widened by what the filter
 * reads around them, within the image.
 *
 * Fill context reads around the crop too: its margin is 9 pixels beyond
 * a grid step, enough at any scale. Fill constant and nearest (which
 * takes a point beyond the crop onto its edge) read only the grid points
 * of the crop the map reaches, so never more than geometry()'s request q
 * (the crop and what its filter reads beyond it), and less where the map
 * zooms in or moves the crop partly out. Their request is pinned to the
 * scale q would get, num / 8 (so that the pixels never depend on how
 * much is decoded), where grid point g's window is centred at source x +
 * (g + 0.5) kx, kx either way (the scale leaves at least one decoded
 * pixel a grid step), its ends rounded to decoded pixels (half of one,
 * 0.5 * 8 / num source pixels); the region takes one more decoded pixel
 * and one more source pixel on each side. Reflect and wrap may fold a
 * point anywhere in the crop: they decode q as it is.
 */
static void warp_request(const struct imgpipe *ip, const double m[6],
			 const struct augment_rect *rect, uint32_t width,
			 uint32_t height, struct jroi_req *q)
{
	uint32_t s = ip->sp.size;
	int32_t lo[2], hi[2];
	double kx = rect->w / s, ky = rect->h / s, x0, y0, x1, y1, e;
	bool ctx = ip->sp.fill == ISPEC_FILL_CONTEXT;
	struct jroi_req c = *q;

	if (!ctx && !(tight_request && (ip->sp.fill == ISPEC_FILL_CONSTANT ||
					ip->sp.fill == ISPEC_FILL_NEAREST)))
		return;
	warp_reach(&ip->sp, m, s, lo, hi);
	if (ctx) {
		x0 = floor(rect->x + lo[0] * kx - kx - 9);
		y0 = floor(rect->y + lo[1] * ky - ky - 9);
		x1 = ceil(rect->x + (hi[0] + 1) * kx + kx + 9);
		y1 = ceil(rect->y + (hi[1] + 1) * ky + ky + 9);
	} else {
		fit_scale(ip, &c, width, height, ip->warp_side);
		q->scale_num = c.scale_num;
		e = 1.5 * JROI_DENOM / c.scale_num + 1;
		x0 = floor(rect->x + (lo[0] + 0.5) * kx - kx - e);
		y0 = floor(rect->y + (lo[1] + 0.5) * ky - ky - e);
		x1 = ceil(rect->x + (hi[0] + 0.5) * kx + kx + e);
		y1 = ceil(rect->y + (hi[1] + 0.5) * ky + ky + e);
		x0 = x0 < q->x ? q->x : x0;
		y0 = y0 < q->y ? q->y : y0;
		x1 = x1 > (double)q->x + q->w ? (double)q->x + q->w : x1;
		y1 = y1 > (double)q->y + q->h ? (double)q->y + q->h : y1;
	}
	x0 = x0 < 0 ? 0 : x0 >= width ? width - 1 : x0;
	y0 = y0 < 0 ? 0 : y0 >= height ? height - 1 : y0;
	x1 = x1 > width ? width : x1 <= x0 ? x0 + 1 : x1;
	y1 = y1 > height ? height : y1 <= y0 ? y0 + 1 : y1;
	q->x = (uint32_t)x0;
	q->y = (uint32_t)y0;
	q->w = (uint32_t)(x1 - x0);
	q->h = (uint32_t)(y1 - y0);
	/* the crop still gets its size x size pixels */
	q->min_w = (uint32_t)ceil(s * (x1 - x0) / rect->w);
	q->min_h = (uint32_t)ceil(s * (y1 - y0) / rect->h);
}

/* RandomVerticalFlip: the rows of an s x s RGB image in reverse order. */
static void flip_rows(unsigned char *rgb, uint32_t s, unsigned char *tmp)
{
	size_t row = (size_t)s * 3;

	for (uint32_t y = 0; y < s / 2; y++) {
		unsigned char *a = rgb + y * row, *b = rgb + (s - 1 - y) * row;

		memcpy(tmp, a, row);
		memcpy(a, b, row);
		memcpy(b, tmp, row);
	}
}

/*
 * The steps from from on, in order, on the s x s image *img: colour steps
 * in place, each geometric one a pass into the other buffer (ws->rgb or
 * ws->rgb2). Returns 0 or a warp_run() error.
 */
static int later_steps(const struct imgpipe *ip, struct imgpipe_ws *ws,
		       uint32_t from, unsigned char **img)
{
	uint32_t s = ip->sp.size;

	for (uint32_t i = from; i < ws->gd.n; i++) {
		const struct geom_step *st = &ws->gd.step[i];
		unsigned char *out = *img == ws->rgb ? ws->rgb2 : ws->rgb;
		struct warp_src src = { *img, (size_t)s * 3, s, s,
					3,    { 0, 0, s, s } };
		uint64_t t;
		int err;

		if (!st->apply)
			continue;
		if (st->type == GEOM_COLOR) {
			color_apply(&st->op, &st->dr, *img, s, s, ws->tmp);
			continue;
		}
		if (st->type != GEOM_WARP)
			continue;
		t = clock_ns(ws);
		err = warp_run(&src, st->m, s, &ip->sp, out, ws->warp_scratch,
			       ip->warp_cap);
		if (err)
			return err;
		ws->chain_ns += clock_ns(ws) - t;
		*img = out;
	}
	return 0;
}

int imgpipe_run(const struct imgpipe *ip, struct imgpipe_ws *ws,
		const void *jpeg, size_t len, uint64_t seed, void *dst,
		struct diag *d)
{
	const struct ispec *sp = &ip->sp;
	uint32_t s = sp->size;
	struct jroi_info info;
	struct jroi_out jo;
	struct jroi_req q;
	struct augment_rect rect;
	struct rsz_plan *plan;
	struct erase_draw ed;
	struct plan pl = { 0 };
	struct warp_src src;
	unsigned char *img = ws->rgb;
	double box[4], k;
	bool flip, vflip;
	uint64_t t0, t1, t2, t3, t4, t5, t6;
	unsigned ch;
	int err;

	t0 = clock_ns(ws);
	ws->chain_ns = 0;
	err = draw(ip, ws, jpeg, len, seed, &info, &rect, &q, &flip, &vflip,
		   &ed, d);
	if (err)
		return err;
	if (ip->warp)
		plan_warp(&ws->gd, flip, vflip, s, sp->fill, &pl);
	if (pl.fused)
		warp_request(ip, pl.m, &rect, info.width, info.height, &q);
	fit_scale(ip, &q, info.width, info.height,
		  pl.fused ? ip->warp_side : ip->max_side);
	t1 = clock_ns(ws);

	err = jroi_decode(ws->dec, jpeg, len, &q, ws->dec_buf, 0, ip->dec_cap,
			  &jo, d);
	if (err)
		return err;
	t2 = clock_ns(ws);

	/* The rectangle in the decoded region's pixels. */
	k = (double)jo.scale_num / JROI_DENOM;
	box[0] = rect.x * k - jo.x0;
	box[1] = rect.y * k - jo.y0;
	box[2] = (rect.x + rect.w) * k - jo.x0;
	box[3] = (rect.y + rect.h) * k - jo.y0;
	ch = jo.channels;
	if (pl.fused) {
		/* the crop as it lies, in or beyond the region decoded */
		src = (struct warp_src){
			ws->dec_buf, (size_t)jo.width * ch,
			jo.width,    jo.height,
			ch,	     { box[0], box[1], box[2], box[3] }
		};
		err = warp_run(&src, pl.m, s, sp, ws->rgb, ws->warp_scratch,
			       ip->warp_cap);
		if (err)
			return diag_set(d, LOADER_ETOOBIG,
					"warp of a %ux%u region to %u: %s",
					jo.width, jo.height, s, strerror(-err));
		t3 = clock_ns(ws);
		err = later_steps(ip, ws, pl.first + 1, &img);
		goto emit;
	}
	/* A box plan reads inside the region only. */
	if (box[0] < 0)
		box[0] = 0;
	if (box[1] < 0)
		box[1] = 0;
	if (box[2] > jo.width)
		box[2] = jo.width;
	if (box[3] > jo.height)
		box[3] = jo.height;
	err = rsz_plan_box(ws->plan_mem, ip->plan_cap, jo.width, jo.height, box,
			   s, s, flip ? RSZ_MIRROR : 0, &plan);
	if (!err && rsz_scratch_size(plan, ch) > ip->scratch_cap)
		err = -ENOSPC;
	if (!err)
		err = rsz_run(plan, ws->dec_buf, (size_t)jo.width * ch,
			      ch == 1 ? ws->gray : ws->rgb, (size_t)s * ch, ch,
			      ws->scratch);
	if (err)
		return diag_set(d, LOADER_ETOOBIG,
				"resize of a %ux%u region to %u: %s", jo.width,
				jo.height, s, strerror(-err));
	if (ch == 1) {
		const unsigned char *g = ws->gray;
		unsigned char *o = ws->rgb;

		for (size_t i = 0; i < (size_t)s * s; i++, o += 3)
			o[0] = o[1] = o[2] = g[i];
	}
	t3 = clock_ns(ws);
	if (vflip)
		flip_rows(ws->rgb, s, ws->tmp);
	if (!pl.nwarp) {
		err = later_steps(ip, ws, 0, &img);
		goto emit;
	}
	/* A colour step first: the two-pass chain, from the coloured crop. */
	err = later_steps(ip, ws, 0, &img);
emit:
	if (err)
		return diag_set(d, LOADER_ETOOBIG, "warp of %ux%u: %s", s, s,
				strerror(-err));
	t4 = clock_ns(ws);
	imgkern_emit(sp, img, s, s, dst);
	t5 = clock_ns(ws);
	erase_apply(sp, &ed, dst);
	t6 = clock_ns(ws);
	if (ws->timing) {
		ws->t.images++;
		ws->t.header_ns += t1 - t0;
		ws->t.decode_ns += t2 - t1;
		ws->t.resize_ns += pl.fused ? 0 : t3 - t2;
		ws->t.warp_ns += (pl.fused ? t3 - t2 : 0) + ws->chain_ns;
		ws->t.color_ns += t4 - t3 - ws->chain_ns;
		ws->t.emit_ns += t5 - t4;
		ws->t.erase_ns += t6 - t5;
	}
	return 0;
}

int imgpipe_explain(const struct imgpipe *ip, struct imgpipe_ws *ws,
		    const void *jpeg, size_t len, uint64_t seed, char *buf,
		    size_t n, struct diag *d)
{
	const struct ispec *sp = &ip->sp;
	struct jroi_info info;
	struct jroi_req q;
	struct augment_rect rect;
	struct erase_draw ed;
	struct plan pl = { 0 };
	bool flip, vflip;
	size_t at;
	int err, len_out;

	err = draw(ip, ws, jpeg, len, seed, &info, &rect, &q, &flip, &vflip,
		   &ed, d);
	if (err)
		return err;
	len_out = snprintf(buf, n,
			   "crop %.17g %.17g %.17g %.17g\nflip %d\nvflip %d\n",
			   rect.x, rect.y, rect.w, rect.h, flip, vflip);
#define MORE(...)                                                              \
	do {                                                                   \
		at = len_out > 0 && (size_t)len_out < n ? (size_t)len_out : n; \
		len_out += snprintf(buf + at, n - at, __VA_ARGS__);            \
	} while (0)
	for (uint32_t i = 0; i < ws->gd.n; i++) {
		at = len_out > 0 && (size_t)len_out < n ? (size_t)len_out : n;
		len_out += geom_explain(sp, &ws->gd.step[i], buf + at, n - at);
		MORE("\n");
	}
	if (ip->warp) {
		plan_warp(&ws->gd, flip, vflip, sp->size, sp->fill, &pl);
		MORE("warp %s %.17g %.17g %.17g %.17g %.17g %.17g\n",
		     !pl.nwarp ? "none" :
		     pl.fused  ? "fused" :
		     pl.shift  ? "shift" :
				 "after-colour",
		     pl.m[0], pl.m[1], pl.m[2], pl.m[3], pl.m[4], pl.m[5]);
		for (uint32_t i = pl.first + 1; i < ws->gd.n; i++) {
			const struct geom_step *st = &ws->gd.step[i];

			if (st->apply && st->type == GEOM_WARP)
				MORE("warp chained %.17g %.17g %.17g %.17g "
				     "%.17g %.17g\n",
				     st->m[0], st->m[1], st->m[2], st->m[3],
				     st->m[4], st->m[5]);
		}
	}
#undef MORE
	at = len_out > 0 && (size_t)len_out < n ? (size_t)len_out : n;
	len_out += erase_explain(sp, &ed, buf + at, n - at);
	return len_out;
}
