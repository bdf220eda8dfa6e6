/*
 * geom.c - a sample's colour and geometric steps (see geom.h).
 *
 * The policies' facts come from torchvision 0.14's
 * torchvision/transforms/autoaugment.py (Debian's python3-torchvision):
 * the op lists and their order (_augmentation_space), the magnitude bins
 * (torch.linspace in float32), which ops are signed, what each op does
 * (_apply_op), and AutoAugment's ImageNet sub-policies (_get_policies).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "augment.h"
#include "geom.h"
#include "warp.h"

/* The policies' ops, in _augmentation_space()'s order (Invert last). */
enum {
	OP_IDENTITY,
	OP_SHEAR_X,
	OP_SHEAR_Y,
	OP_TRANSLATE_X,
	OP_TRANSLATE_Y,
	OP_ROTATE,
	OP_BRIGHTNESS,
	OP_COLOR,
	OP_CONTRAST,
	OP_SHARPNESS,
	OP_POSTERIZE,
	OP_SOLARIZE,
	OP_AUTOCONTRAST,
	OP_EQUALIZE,
	OP_INVERT,
	OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"Identity",  "ShearX",	   "ShearY",	   "TranslateX", "TranslateY",
	"Rotate",    "Brightness", "Color",	   "Contrast",	 "Sharpness",
	"Posterize", "Solarize",   "AutoContrast", "Equalize",	 "Invert",
};

const char *geom_op_name(unsigned policy_op)
{
	return policy_op < OP_COUNT ? op_names[policy_op] : NULL;
}

/*
 * torch.linspace(a, b, steps)[i] as float32: the exact value, rounded
 * once. ATen's kernel rounds its steps in float32 and, vectorized, in an
 * order that depends on the CPU's lanes, so its bins may differ from
 * these in the last bit (never at a whole number, where int() and
 * Posterize would see it).
 */
static float linspace(float a, float b, int steps, int i)
{
	if (steps == 1)
		return a;
	return (float)((double)a + ((double)b - a) * i / (steps - 1));
}

/*
 * A policy's magnitude space: ops of TrivialAugmentWide (wide: true) or
 * of RandAugment and AutoAugment, with bins bins, for an s x s image;
 * magnitude of op at bin, and whether the op is signed.
 */
static double magnitude(unsigned op, bool wide, int bins, int bin, uint32_t s,
			bool *sign)
{
	float shear = wide ? 0.99f : 0.3f, tr, rot = wide ? 135.0f : 30.0f;
	float enh = wide ? 0.99f : 0.9f;

	/* 150.0 / 331.0 * image_size, in Python's double, then float32 */
	tr = wide ? 32.0f : (float)(150.0 / 331.0 * (double)s);
	*sign = true;
	switch (op) {
	case OP_SHEAR_X:
	case OP_SHEAR_Y: return linspace(0, shear, bins, bin);
	case OP_TRANSLATE_X:
	case OP_TRANSLATE_Y: return linspace(0, tr, bins, bin);
	case OP_ROTATE: return linspace(0, rot, bins, bin);
	case OP_BRIGHTNESS:
	case OP_COLOR:
	case OP_CONTRAST:
	case OP_SHARPNESS: return linspace(0, enh, bins, bin);
	default: break;
	}
	*sign = false;
	switch (op) {
	case OP_POSTERIZE: {
		/* 8 - (arange(bins) / ((bins - 1) / K)).round().int(), K 6
		 * (wide) or 4, the division in float32 */
		float q = (float)bin /
			  (float)((double)(bins - 1) / (wide ? 6 : 4));

		return 8 - nearbyintf(q);
	}
	case OP_SOLARIZE: return linspace(255.0f, 0, bins, bin);
	default: return 0;
	}
}

/* AutoAugmentPolicy.IMAGENET's 25 sub-policies: (op, p, bin) twice;
 * bin -1 where torchvision has None. */
static const struct {
	uint8_t op;
	float p;
	int8_t bin;
} imagenet[25][2] = {
	{ { OP_POSTERIZE, 0.4f, 8 }, { OP_ROTATE, 0.6f, 9 } },
	{ { OP_SOLARIZE, 0.6f, 5 }, { OP_AUTOCONTRAST, 0.6f, -1 } },
	{ { OP_EQUALIZE, 0.8f, -1 }, { OP_EQUALIZE, 0.6f, -1 } },
	{ { OP_POSTERIZE, 0.6f, 7 }, { OP_POSTERIZE, 0.6f, 6 } },
	{ { OP_EQUALIZE, 0.4f, -1 }, { OP_SOLARIZE, 0.2f, 4 } },
	{ { OP_EQUALIZE, 0.4f, -1 }, { OP_ROTATE, 0.8f, 8 } },
	{ { OP_SOLARIZE, 0.6f, 3 }, { OP_EQUALIZE, 0.6f, -1 } },
	{ { OP_POSTERIZE, 0.8f, 5 }, { OP_EQUALIZE, 1.0f, -1 } },
	{ { OP_ROTATE, 0.2f, 3 }, { OP_SOLARIZE, 0.6f, 8 } },
	{ { OP_EQUALIZE, 0.6f, -1 }, { OP_POSTERIZE, 0.4f, 6 } },
	{ { OP_ROTATE, 0.8f, 8 }, { OP_COLOR, 0.4f, 0 } },
	{ { OP_ROTATE, 0.4f, 9 }, { OP_EQUALIZE, 0.6f, -1 } },
	{ { OP_EQUALIZE, 0.0f, -1 }, { OP_EQUALIZE, 0.8f, -1 } },
	{ { OP_INVERT, 0.6f, -1 }, { OP_EQUALIZE, 1.0f, -1 } },
	{ { OP_COLOR, 0.6f, 4 }, { OP_CONTRAST, 1.0f, 8 } },
	{ { OP_ROTATE, 0.8f, 8 }, { OP_COLOR, 1.0f, 2 } },
	{ { OP_COLOR, 0.8f, 8 }, { OP_SOLARIZE, 0.8f, 7 } },
	{ { OP_SHARPNESS, 0.4f, 7 }, { OP_INVERT, 0.6f, -1 } },
	{ { OP_SHEAR_X, 0.6f, 5 }, { OP_EQUALIZE, 1.0f, -1 } },
	{ { OP_COLOR, 0.4f, 0 }, { OP_EQUALIZE, 0.6f, -1 } },
	{ { OP_EQUALIZE, 0.4f, -1 }, { OP_SOLARIZE, 0.2f, 4 } },
	{ { OP_SOLARIZE, 0.6f, 5 }, { OP_AUTOCONTRAST, 0.6f, -1 } },
	{ { OP_INVERT, 0.6f, -1 }, { OP_EQUALIZE, 1.0f, -1 } },
	{ { OP_COLOR, 0.6f, 4 }, { OP_CONTRAST, 1.0f, 8 } },
	{ { OP_EQUALIZE, 0.8f, -1 }, { OP_EQUALIZE, 0.6f, -1 } },
};

/* A geometric step from torchvision affine()'s arguments about (cx, cy). */
static void set_affine(struct geom_step *st, double cx, double cy, double angle,
		       double tx, double ty, double scale, double shx,
		       double shy)
{
	st->type = GEOM_WARP;
	st->angle = angle, st->tx = tx, st->ty = ty, st->scale = scale;
	st->shx = shx, st->shy = shy, st->zx = st->zy = 1;
	warp_affine_inverse(st->m, cx, cy, angle, tx, ty, scale, shx, shy);
}

/* The step of a policy's op at a signed magnitude (_apply_op()). */
static void policy_step(struct geom_step *st, unsigned op, double mag,
			uint32_t s)
{
	double c = s * 0.5, sh = atan(mag) * (180.0 / M_PI);

	st->policy_op = (uint8_t)op;
	st->mag = mag;
	st->apply = true;
	memset(&st->op, 0, sizeof(st->op));
	memset(&st->dr, 0, sizeof(st->dr));
	st->op.p = 1;
	st->dr.apply = true;
	st->type = GEOM_COLOR;
	switch (op) {
	case OP_IDENTITY: st->type = GEOM_NONE; break;
	/* shears about the top-left corner (center=[0, 0]) */
	case OP_SHEAR_X: set_affine(st, 0, 0, 0, 0, 0, 1, sh, 0); break;
	case OP_SHEAR_Y: set_affine(st, 0, 0, 0, 0, 0, 1, 0, sh); break;
	/* translate=[int(magnitude), 0]: truncated */
	case OP_TRANSLATE_X:
		set_affine(st, c, c, 0, trunc(mag), 0, 1, 0, 0);
		break;
	case OP_TRANSLATE_Y:
		set_affine(st, c, c, 0, 0, trunc(mag), 1, 0, 0);
		break;
	/* rotate() passes -angle to the inverse matrix */
	case OP_ROTATE:
		set_affine(st, c, c, -mag, 0, 0, 1, 0, 0);
		st->angle = mag;
		break;
	case OP_BRIGHTNESS: st->op.kind = ISPEC_OP_BRIGHTNESS; goto factor;
	case OP_COLOR: st->op.kind = ISPEC_OP_SATURATION; goto factor;
	case OP_CONTRAST: st->op.kind = ISPEC_OP_CONTRAST; goto factor;
	case OP_SHARPNESS:
		st->op.kind = ISPEC_OP_SHARPNESS;
	factor:
		st->op.a[0] = st->dr.f[0] = 1.0 + mag;
		break;
	case OP_POSTERIZE:
		st->op.kind = ISPEC_OP_POSTERIZE;
		st->op.a[0] = mag;
		break;
	case OP_SOLARIZE:
		st->op.kind = ISPEC_OP_SOLARIZE;
		st->op.a[0] = mag;
		break;
	case OP_AUTOCONTRAST: st->op.kind = ISPEC_OP_AUTOCONTRAST; break;
	case OP_EQUALIZE: st->op.kind = ISPEC_OP_EQUALIZE; break;
	case OP_INVERT: st->op.kind = ISPEC_OP_INVERT; break;
	default: st->type = GEOM_NONE; break;
	}
}

static double uniform(struct rng *r, const double range[2])
{
	return range[0] + rng_unit(r) * (range[1] - range[0]);
}

/* RandomAffine.get_params(), and Keras' zoom about the centre. */
static void draw_affine(const struct ispec_affine *af, uint32_t s,
			struct rng *r, struct geom_step *st)
{
	double c = s * 0.5, angle, tx, ty, scale, zx, zy, shx, shy, z[6];
	double mx[2] = { -af->translate[0] * s, af->translate[0] * s };
	double my[2] = { -af->translate[1] * s, af->translate[1] * s };

	angle = uniform(r, af->deg);
	tx = augment_round_half_even(uniform(r, mx));
	ty = augment_round_half_even(uniform(r, my));
	scale = uniform(r, af->scale);
	zx = uniform(r, af->zoom);
	zy = uniform(r, af->zoom);
	shx = uniform(r, af->shear);
	shy = uniform(r, af->shear + 2);
	set_affine(st, c, c, angle, tx, ty, scale, shx, shy);
	st->zx = zx, st->zy = zy;
	z[0] = zx, z[1] = 0, z[2] = c * (1 - zx);
	z[3] = 0, z[4] = zy, z[5] = c * (1 - zy);
	warp_compose(st->m, z);
}

static struct geom_step *next(struct geom_draws *out, unsigned stage)
{
	struct geom_step *st;

	if (out->n == GEOM_MAX_STEPS)
		return NULL;
	st = &out->step[out->n++];
	memset(st, 0, sizeof(*st));
	st->stage = (uint8_t)stage;
	return st;
}

void geom_draw(const struct ispec *sp, uint32_t s, struct rng *r,
	       struct geom_draws *out)
{
	out->n = 0;
	for (uint32_t i = 0; i < sp->nops; i++) {
		const struct ispec_op *op = &sp->ops[i];
		struct geom_step *st = next(out, i);
		bool sign;

		if (!st)
			return;
		switch (op->kind) {
		case ISPEC_OP_ROTATE: {
			double c = s * 0.5, angle;

			st->apply = rng_unit(r) < op->p;
			angle = uniform(r, op->a);
			set_affine(st, c, c, -angle, 0, 0, 1, 0, 0);
			st->angle = angle;
			break;
		}
		case ISPEC_OP_AFFINE:
			st->apply = rng_unit(r) < op->p;
			draw_affine(&op->af, s, r, st);
			break;
		case ISPEC_OP_TRIVIAL: {
			unsigned o = (unsigned)rng_below(r, OP_INVERT);
			int bin = (int)rng_below(r, 31);
			bool neg = rng_below(r, 2);
			double mag = magnitude(o, true, 31, bin, s, &sign);

			policy_step(st, o, sign && neg ? -mag : mag, s);
			break;
		}
		case ISPEC_OP_RANDAUG:
			for (unsigned k = 0; k < (unsigned)op->a[0]; k++) {
				unsigned o = (unsigned)rng_below(r, OP_INVERT);
				bool neg = rng_below(r, 2);
				double mag = magnitude(o, false, 31,
						       (int)op->a[1], s, &sign);

				if (k && !(st = next(out, i)))
					return;
				policy_step(st, o, sign && neg ? -mag : mag, s);
			}
			break;
		case ISPEC_OP_AUTOAUG: {
			unsigned id = (unsigned)rng_below(r, 25);
			double u[2], neg[2];

			u[0] = rng_unit(r), u[1] = rng_unit(r);
			neg[0] = (double)rng_below(r, 2);
			neg[1] = (double)rng_below(r, 2);
			for (unsigned k = 0; k < 2; k++) {
				unsigned o = imagenet[id][k].op;
				int bin = imagenet[id][k].bin;
				double mag = bin < 0 ? 0 :
						       magnitude(o, false, 10,
								 bin, s, &sign);

				if (bin < 0)
					sign = false;
				if (k && !(st = next(out, i)))
					return;
				policy_step(st, o, sign && neg[k] ? -mag : mag,
					    s);
				/* torchvision: probs[i] <= p */
				st->apply = (float)u[k] <= imagenet[id][k].p;
			}
			break;
		}
		default:
			st->type = GEOM_COLOR;
			st->op = *op;
			color_draw(op, r, &st->dr);
			st->apply = st->dr.apply;
			break;
		}
	}
}

int geom_explain(const struct ispec *sp, const struct geom_step *st, char *buf,
		 size_t n)
{
	const struct ispec_op *op = &sp->ops[st->stage];

	switch (op->kind) {
	case ISPEC_OP_ROTATE:
		return snprintf(buf, n, "rotate %d %.17g", st->apply,
				st->angle);
	case ISPEC_OP_AFFINE:
		return snprintf(buf, n,
				"affine %d angle %.17g translate %.17g %.17g "
				"scale %.17g zoom %.17g %.17g shear %.17g "
				"%.17g",
				st->apply, st->angle, st->tx, st->ty, st->scale,
				st->zx, st->zy, st->shx, st->shy);
	case ISPEC_OP_TRIVIAL:
	case ISPEC_OP_RANDAUG:
	case ISPEC_OP_AUTOAUG:
		return snprintf(buf, n, "%s %s %d %.17g",
				ispec_op_name(op->kind),
				op_names[st->policy_op], st->apply, st->mag);
	default: return color_explain(&st->op, &st->dr, buf, n);
	}
}
