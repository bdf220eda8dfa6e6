/*
 * resize.c - antialiased triangle resampling, PIL's way.
 *
 * Each axis gets a table: for output pixel j, the first input pixel it
 * reads (start), how many it reads (count) and their weights. The weights
 * follow Pillow's precompute_coeffs() step by step, in double precision,
 * then become 22-bit fixed point as in its normalize_coeffs_8bpc(), so
 * that the two agree to the bit (the unit test checks us against a plain
 * double-precision reference within +-1).
 *
 * The loops are scalar C, written so that the compiler can vectorise the
 * vertical pass (one multiply-add over a whole row per filter tap) and
 * unroll the horizontal one per channel count. Hand-written SIMD for both
 * passes comes with the image-pipeline work, behind this same interface.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "resize.h"

/*
 * 8 bits of pixel plus 22 of weight leave 2 bits of headroom in an
 * int32_t accumulator, the same split as Pillow's PRECISION_BITS; the
 * weights of one output are non-negative and sum to 1 (within rounding),
 * so the sum never overflows.
 */
#define RSZ_BITS 22
#define RSZ_HALF ((int32_t)1 << (RSZ_BITS - 1))

struct rsz_axis {
	uint32_t in, out;
	bool identity;	 /* in == out: the pass is a copy */
	uint32_t ksize;	 /* stride of coef between outputs */
	uint32_t window; /* input lines that must be held at once */
	uint32_t *start; /* first input line of output j */
	uint32_t *count; /* input lines output j reads */
	int32_t *coef;	 /* their weights, at coef + j * ksize */
};

struct rsz_plan {
	struct rsz_axis x, y;
};

/* The triangle: 1 at the centre, 0 at a distance of 1 and beyond. */
static double triangle(double t)
{
	if (t < 0.0)
		t = -t;
	return t < 1.0 ? 1.0 - t : 0.0;
}

static void axis_free(struct rsz_axis *a)
{
	free(a->start);
	free(a->count);
	free(a->coef);
}

static int axis_init(struct rsz_axis *a, uint32_t in, uint32_t out)
{
	double scale = (double)in / (double)out;
	double fscale = scale < 1.0 ? 1.0 : scale;
	double support = 1.0 * fscale;
	double *w;
	uint32_t reach = 0, ceil_support = (uint32_t)support;

	/* ceil() by hand, to keep libm out of the link for one call. */
	if ((double)ceil_support < support)
		ceil_support++;
	a->in = in;
	a->out = out;
	a->identity = in == out;
	a->ksize = ceil_support * 2 + 1;
	a->start = calloc(out, sizeof(*a->start));
	a->count = calloc(out, sizeof(*a->count));
	a->coef = calloc((size_t)out * a->ksize, sizeof(*a->coef));
	w = malloc(a->ksize * sizeof(*w));
	if (!a->start || !a->count || !a->coef || !w) {
		free(w);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < out; j++) {
		double center = ((double)j + 0.5) * scale;
		double sum = 0.0;
		/* The (int) casts truncate toward zero, as Pillow's do. */
		int lo = (int)(center - support + 0.5);
		int hi = (int)(center + support + 0.5);
		int32_t *k = a->coef + (size_t)j * a->ksize;

		if (lo < 0)
			lo = 0;
		if (hi > (int)in)
			hi = (int)in;
		/*
		 * hi - lo is at most 2 * support + 1 <= ksize; the check only
		 * keeps the writes inside the table whatever the rounding.
		 */
		if (hi - lo > (int)a->ksize)
			hi = lo + (int)a->ksize;
		for (int t = 0; t < hi - lo; t++) {
			w[t] = triangle(((double)(t + lo) - center + 0.5) /
					fscale);
			sum += w[t];
		}
		for (int t = 0; t < hi - lo; t++) {
			double v = sum != 0.0 ? w[t] / sum : w[t];

			v *= (double)(1 << RSZ_BITS);
			k[t] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
		}
		a->start[j] = (uint32_t)lo;
		a->count[j] = (uint32_t)(hi - lo);
		/*
		 * The vertical pass keeps a ring of resized rows: what it
		 * must hold at once is everything from this output's first
		 * line up to the furthest line read so far.
		 */
		if ((uint32_t)hi > reach)
			reach = (uint32_t)hi;
		if (reach - (uint32_t)lo > a->window)
			a->window = reach - (uint32_t)lo;
	}
	free(w);
	return 0;
}

int rsz_plan_new(uint32_t in_w, uint32_t in_h, uint32_t out_w, uint32_t out_h,
		 struct rsz_plan **out)
{
	struct rsz_plan *p;
	int err;

	*out = NULL;
	if (!in_w || !in_h || !out_w || !out_h || in_w > RSZ_MAX_SIDE ||
	    in_h > RSZ_MAX_SIDE || out_w > RSZ_MAX_SIDE || out_h > RSZ_MAX_SIDE)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	err = axis_init(&p->x, in_w, out_w);
	if (!err)
		err = axis_init(&p->y, in_h, out_h);
	if (err) {
		rsz_plan_free(p);
		return err;
	}
	*out = p;
	return 0;
}

void rsz_plan_free(struct rsz_plan *p)
{
	if (!p)
		return;
	axis_free(&p->x);
	axis_free(&p->y);
	free(p);
}

/* Bytes of the row ring, rounded up so the accumulators after it align. */
static size_t ring_bytes(const struct rsz_plan *p, unsigned ch)
{
	size_t n;

	if (p->x.identity)
		return 0;
	n = (size_t)p->y.window * p->x.out * ch;
	return (n + 63) & ~(size_t)63;
}

static bool channels_ok(unsigned ch)
{
	return ch == 1 || ch == 3 || ch == 4;
}

size_t rsz_scratch_size(const struct rsz_plan *p, unsigned channels)
{
	if (!channels_ok(channels) || p->y.identity)
		return 0;
	return ring_bytes(p, channels) +
	       (size_t)p->x.out * channels * sizeof(int32_t);
}

static inline uint8_t clip8(int32_t v)
{
	if (v < 0)
		return 0;
	if (v >= (int32_t)256 << RSZ_BITS)
		return 255;
	return (uint8_t)(v >> RSZ_BITS);
}

/*
 * One row through the horizontal filter. ch is a constant in each caller
 * below, so the channel loops unroll and the accumulators live in
 * registers.
 */
static inline void hrow(const struct rsz_axis *a, const uint8_t *in,
			uint8_t *out, unsigned ch)
{
	for (uint32_t j = 0; j < a->out; j++) {
		const int32_t *k = a->coef + (size_t)j * a->ksize;
		const uint8_t *px = in + (size_t)a->start[j] * ch;
		int32_t acc[4] = { RSZ_HALF, RSZ_HALF, RSZ_HALF, RSZ_HALF };

		for (uint32_t t = 0; t < a->count[j]; t++)
			for (unsigned c = 0; c < ch; c++)
				acc[c] += k[t] * (int32_t)px[t * ch + c];
		for (unsigned c = 0; c < ch; c++)
			out[(size_t)j * ch + c] = clip8(acc[c]);
	}
}

static void hrow1(const struct rsz_axis *a, const uint8_t *in, uint8_t *out)
{
	hrow(a, in, out, 1);
}

static void hrow3(const struct rsz_axis *a, const uint8_t *in, uint8_t *out)
{
	hrow(a, in, out, 3);
}

static void hrow4(const struct rsz_axis *a, const uint8_t *in, uint8_t *out)
{
	hrow(a, in, out, 4);
}

typedef void (*hrow_fn)(const struct rsz_axis *, const uint8_t *, uint8_t *);

static const hrow_fn hrow_by_ch[5] = {
	[1] = hrow1,
	[3] = hrow3,
	[4] = hrow4,
};

int rsz_run(const struct rsz_plan *p, const uint8_t *src, size_t src_stride,
	    uint8_t *dst, size_t dst_stride, unsigned channels, void *scratch)
{
	size_t in_row, out_row;
	uint8_t *ring = scratch;
	int32_t *acc;
	uint32_t next = 0;
	hrow_fn h;

	if (!channels_ok(channels))
		return -EINVAL;
	in_row = (size_t)p->x.in * channels;
	out_row = (size_t)p->x.out * channels;
	if (src_stride < in_row || dst_stride < out_row)
		return -EINVAL;
	h = hrow_by_ch[channels];

	/* Same height: the vertical weights are all 1, so skip the pass. */
	if (p->y.identity) {
		for (uint32_t r = 0; r < p->y.out; r++) {
			const uint8_t *s = src + (size_t)r * src_stride;
			uint8_t *d = dst + (size_t)r * dst_stride;

			if (p->x.identity)
				memcpy(d, s, in_row);
			else
				h(&p->x, s, d);
		}
		return 0;
	}

	acc = (int32_t *)(ring + ring_bytes(p, channels));
	for (uint32_t j = 0; j < p->y.out; j++) {
		const int32_t *k = p->y.coef + (size_t)j * p->y.ksize;
		uint32_t lo = p->y.start[j], n = p->y.count[j];
		uint8_t *d = dst + (size_t)j * dst_stride;

		/*
		 * Resize the input rows this output needs that no earlier
		 * one did; the window guarantees that the older ones it
		 * shares with its predecessor are still in the ring.
		 */
		if (!p->x.identity) {
			for (uint32_t r = lo > next ? lo : next; r < lo + n;
			     r++)
				h(&p->x, src + (size_t)r * src_stride,
				  ring + (size_t)(r % p->y.window) * out_row);
			if (lo + n > next)
				next = lo + n;
		}
		for (size_t i = 0; i < out_row; i++)
			acc[i] = RSZ_HALF;
		for (uint32_t t = 0; t < n; t++) {
			const uint8_t *line =
				p->x.identity ?
					src + (size_t)(lo + t) * src_stride :
					ring + (size_t)((lo + t) %
							p->y.window) *
							out_row;
			int32_t kt = k[t];

			for (size_t i = 0; i < out_row; i++)
				acc[i] += kt * (int32_t)line[i];
		}
		for (size_t i = 0; i < out_row; i++)
			d[i] = clip8(acc[i]);
	}
	return 0;
}
