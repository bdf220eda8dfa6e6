/*
 * erase.h - the stages that erase a rectangle of the finished sample,
 * after normalize, as torchvision's RandomErasing does (so that value 0
 * is the mean colour): erase (RandomErasing's sampling of area and
 * aspect, up to 10 tries, its value 0, per channel, or random normal)
 * and cutout (a square of SIZE at a uniform centre, clipped at the
 * edges, of 0, as DeVries and Taylor's Cutout).
 *
 * Their parameters are drawn with the others, after the colour stages,
 * from the sample's rng; a random value's numbers come from an rng
 * seeded by one draw of it, so that what follows does not depend on the
 * rectangle's size.
 */
#ifndef LD_ERASE_H
#define LD_ERASE_H

#include <stdbool.h>
#include <stdint.h>

#include "ispec.h"
#include "rng.h"

/* What erase and cutout drew for one sample of side size. */
struct erase_draw {
	bool erase;		 /* erase applies, and a rectangle fitted */
	uint32_t ei, ej, eh, ew; /* its top row, left column, height, width */
	uint64_t seed;		 /* of a random value's numbers */
	bool cutout;		 /* cutout applies */
	uint32_t y0, x0, y1, x1; /* its rows [y0, y1), columns [x0, x1) */
};

/*
 * Draw for a sample of side size, from r, in order: erase (when the spec
 * has it): one rng_unit (applies: < p); then up to 10 tries of one
 * rng_unit (area fraction) and one rng_unit (log-aspect), and on the
 * first that fits rng_below (top) and rng_below (left); then one
 * rng_next (the random value's seed). cutout (when the spec has it): one
 * rng_unit (applies), rng_below (centre row), rng_below (centre column).
 */
void erase_draw_params(const struct ispec *sp, uint32_t size, struct rng *r,
		       struct erase_draw *out);

/* Apply what was drawn to the sample at dst (sp's dtype and layout). */
void erase_apply(const struct ispec *sp, const struct erase_draw *dr,
		 void *dst);

/* What was drawn, as text: "erase 1 I J H W\n" and "cutout 1 Y0 X0 Y1
 * X1\n" for the stages the spec has. Returns the length, as snprintf. */
int erase_explain(const struct ispec *sp, const struct erase_draw *dr,
		  char *buf, size_t n);

#endif /* LD_ERASE_H */
