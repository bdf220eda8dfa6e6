/*
 * geom.h - what a sample's colour and geometric stages draw, as one list
 * of steps in the order they apply: colour ops (color.h applies them),
 * maps (warp.h resamples through them), and, for the policies
 * (trivialaugment, randaugment, autoaugment), the ops each drew.
 *
 * A geometric step keeps the parameters torchvision's affine() or
 * rotate() would take (so that --explain can print them and a test can
 * hand them to torchvision) and its map: output point to input point, in
 * area coordinates of the s x s crop, as torchvision's tensor path builds
 * it (rotate about the centre, the policies' shears about the top-left
 * corner).
 *
 * Pure functions of (spec, s, rng): they allocate nothing.
 */
#ifndef LD_GEOM_H
#define LD_GEOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "color.h"
#include "ispec.h"
#include "rng.h"

/* Steps a sample may have: each stage gives one, randaugment N. */
#define GEOM_MAX_STEPS ISPEC_MAX_STEPS

enum geom_step_type {
	GEOM_NONE = 0, /* a policy's Identity, or an op that did not apply */
	GEOM_COLOR,
	GEOM_WARP,
};

struct geom_step {
	uint8_t type;	      /* enum geom_step_type */
	uint8_t stage;	      /* the spec's op (sp->ops[stage]) it is from */
	uint8_t policy_op;    /* a policy's op: its index in geom_op_name() */
	bool apply;	      /* its probability came up */
	struct ispec_op op;   /* GEOM_COLOR: the op, arguments in op.a */
	struct color_draw dr; /* GEOM_COLOR: what it drew */
	double mag;	      /* a policy op's signed magnitude */
	/* GEOM_WARP: what torchvision's affine() would take (rotate: the
	 * angle that rotate() takes, counter-clockwise) */
	double angle, tx, ty, scale, shx, shy;
	double zx, zy; /* affine's zoom, per axis */
	double m[6];   /* output -> input, area coordinates */
};

struct geom_draws {
	uint32_t n;
	struct geom_step step[GEOM_MAX_STEPS];
};

/*
 * Draw sp's colour and geometric stages for a sample whose crop is s x s,
 * from r, in spec order. Draws per stage: a colour stage as color_draw();
 * rotate: rng_unit (applies, < p), rng_unit (angle); affine: rng_unit
 * (applies), then one rng_unit each for angle, x and y translation,
 * scale, x and y zoom, x and y shear, whatever ranges are given;
 * trivialaugment: rng_below(14) (op), rng_below(31) (bin), rng_below(2)
 * (sign); randaugment: per op rng_below(14), rng_below(2); autoaugment:
 * rng_below(25) (sub-policy), two rng_unit (whether each op applies),
 * two rng_below(2) (signs).
 */
void geom_draw(const struct ispec *sp, uint32_t s, struct rng *r,
	       struct geom_draws *out);

/* A policy op's name as torchvision spells it ("ShearX"). */
const char *geom_op_name(unsigned policy_op);

/*
 * One step as a line of text (no newline): a colour stage as
 * color_explain(); "rotate APPLY ANGLE"; "affine APPLY angle A translate
 * TX TY scale S zoom ZX ZY shear SX SY"; a policy's op as "POLICY OP
 * APPLY MAGNITUDE" ("trivialaugment Rotate 1 -12.5"). Returns the length,
 * as snprintf.
 */
int geom_explain(const struct ispec *sp, const struct geom_step *st, char *buf,
		 size_t n);

#endif /* LD_GEOM_H */
