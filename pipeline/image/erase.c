/*
 * erase.c - RandomErasing and Cutout on the finished sample (erase.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "augment.h"
#include "dtype.h"
#include "erase.h"
#include "imgkern.h"

/* RandomErasing.get_params for an h x w image; false when none fits. */
static bool erase_rect(const struct ispec *sp, uint32_t side, struct rng *r,
		       struct erase_draw *out)
{
	double area = (double)side * side;
	double lr0 = log(sp->erase.ratio[0]), lr1 = log(sp->erase.ratio[1]);

	for (int t = 0; t < 10; t++) {
		double ea = area * (sp->erase.scale[0] +
				    rng_unit(r) * (sp->erase.scale[1] -
						   sp->erase.scale[0]));
		double ar = exp(lr0 + rng_unit(r) * (lr1 - lr0));
		double h = augment_round_half_even(sqrt(ea * ar));
		double w = augment_round_half_even(sqrt(ea / ar));

		if (!(h < side && w < side))
			continue;
		out->eh = (uint32_t)h;
		out->ew = (uint32_t)w;
		out->ei = (uint32_t)rng_below(r, side - out->eh + 1);
		out->ej = (uint32_t)rng_below(r, side - out->ew + 1);
		return true;
	}
	return false;
}

void erase_draw_params(const struct ispec *sp, uint32_t size, struct rng *r,
		       struct erase_draw *out)
{
	memset(out, 0, sizeof(*out));
	if (sp->has_erase) {
		bool on = rng_unit(r) < sp->erase.p;
		bool fit = erase_rect(sp, size, r, out);

		out->erase = on && fit;
		out->seed = rng_next(r);
	}
	if (sp->has_cutout) {
		bool on = rng_unit(r) < sp->cutout.p;
		uint32_t cy = (uint32_t)rng_below(r, size);
		uint32_t cx = (uint32_t)rng_below(r, size);
		uint32_t half = sp->cutout.size / 2;

		out->cutout = on;
		out->y0 = cy > half ? cy - half : 0;
		out->x0 = cx > half ? cx - half : 0;
		out->y1 = cy + half < size ? cy + half : size;
		out->x1 = cx + half < size ? cx + half : size;
	}
}

/* A standard normal number (Box-Muller; one of the pair). */
static double normal(struct rng *r)
{
	double u1 = 1.0 - rng_unit(r), u2 = rng_unit(r);

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static void put(const struct ispec *sp, void *dst, uint32_t c, uint32_t y,
		uint32_t x, double v)
{
	size_t s = sp->size, i;

	i = sp->layout == ISPEC_NCHW ? (size_t)c * s * s + (size_t)y * s + x :
				       ((size_t)y * s + x) * 3 + c;
	switch (sp->dtype) {
	case DT_F32: ((float *)dst)[i] = (float)v; break;
	case DT_F16: ((uint16_t *)dst)[i] = imgkern_f32_to_f16((float)v); break;
	default:
		/* A float assigned to a uint8 tensor: truncated, saturated. */
		((uint8_t *)dst)[i] = v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
		break;
	}
}

static void fill(const struct ispec *sp, void *dst, uint32_t y0, uint32_t x0,
		 uint32_t y1, uint32_t x1, const double v[3], struct rng *rnd)
{
	for (uint32_t c = 0; c < 3; c++)
		for (uint32_t y = y0; y < y1; y++)
			for (uint32_t x = x0; x < x1; x++)
				put(sp, dst, c, y, x, rnd ? normal(rnd) : v[c]);
}

void erase_apply(const struct ispec *sp, const struct erase_draw *dr, void *dst)
{
	static const double zero[3] = { 0, 0, 0 };

	if (dr->erase) {
		struct rng rnd;

		rng_seed(&rnd, dr->seed);
		fill(sp, dst, dr->ei, dr->ej, dr->ei + dr->eh, dr->ej + dr->ew,
		     sp->erase.value == ISPEC_ERASE_RGB ? sp->erase.rgb : zero,
		     sp->erase.value == ISPEC_ERASE_RANDOM ? &rnd : NULL);
	}
	if (dr->cutout)
		fill(sp, dst, dr->y0, dr->x0, dr->y1, dr->x1, zero, NULL);
}

int erase_explain(const struct ispec *sp, const struct erase_draw *dr,
		  char *buf, size_t n)
{
	int len = 0;
	size_t at;

	if (n)
		buf[0] = '\0';
	if (sp->has_erase)
		len = snprintf(buf, n, "erase %d %u %u %u %u\n", dr->erase,
			       dr->ei, dr->ej, dr->eh, dr->ew);
	at = (size_t)len < n ? (size_t)len : n;
	if (sp->has_cutout)
		len += snprintf(buf + at, n - at, "cutout %d %u %u %u %u\n",
				dr->cutout, dr->y0, dr->x0, dr->y1, dr->x1);
	return len;
}
