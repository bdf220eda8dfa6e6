/*
 * ispec.c - the image pipeline spec (parse, format) and the final
 * normalize/cast/layout kernel.
 *
 * Every parse error is LOADER_EUSAGE, not LOADER_ESCHEMA: a spec is an
 * argument the user typed (command line, config file, client call), and
 * EUSAGE tells them to fix what they wrote. ESCHEMA stays for data whose
 * schema is wrong or does not match, e.g. a spec applied to a field that
 * is not a JPEG, so that a caller can tell the two apart.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define ISPEC_X86 1
#endif

#include "loader_error.h"
#include "ispec.h"
#include "dtype.h"

#define ISPEC_ERR     LOADER_EUSAGE
#define MAX_WORDS     8	 /* rrc SIZE scale LO HI ratio LO HI */
#define WORD_SHOW_MAX 40 /* longest word quoted in a message */

static const double imagenet_mean[3] = { 0.485, 0.456, 0.406 };
static const double imagenet_std[3] = { 0.229, 0.224, 0.225 };
static const double rrc_scale_def[2] = { 0.08, 1.0 };
static const double rrc_ratio_def[2] = { 3.0 / 4.0, 4.0 / 3.0 };

/* A word of the text: where it starts, how long, its 1-based column. */
struct word {
	const char *p;
	size_t len;
	unsigned col;
};

/*
 * Stages must come in rank order; a rank seen twice is a duplicate. The
 * geometry has two ranks so that "resize" can be followed by "center".
 */
enum rank {
	R_NONE = 0,
	R_DECODE,
	R_GEOM,
	R_CENTER,
	R_FLIP,
	R_NORM,
	R_DTYPE,
	R_LAYOUT,
	R_COUNT
};

struct pstate {
	struct ispec *sp;
	struct diag *d;
	const char *text;
	unsigned rank;		   /* rank of the last stage */
	struct word seen[R_COUNT]; /* first word of each stage seen */
	bool have_geom;
	bool want_center; /* "resize" seen, "center" must come next */
};

struct stage {
	const char *name;
	uint8_t rank;
	uint8_t arg; /* dtype or layout for the stages that set one */
	int (*parse)(struct pstate *ps, const struct stage *st,
		     const struct word *w, unsigned n);
};

static bool word_is(const struct word *w, const char *s)
{
	return strlen(s) == w->len && !memcmp(w->p, s, w->len);
}

/*
 * Report an error about word w of stage "stage": "column C: stage: "word"
 * why". The column and the word are always there, so that a user (and a
 * test) can find the spot in a long spec.
 */
__attribute__((format(printf, 4, 5))) static int bad(struct pstate *ps,
						     const char *stage,
						     const struct word *w,
						     const char *fmt, ...)
{
	char why[256];
	va_list ap;
	int len = (int)(w->len > WORD_SHOW_MAX ? WORD_SHOW_MAX : w->len);

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	memset(ps->sp, 0, sizeof(*ps->sp));
	return diag_set(ps->d, ISPEC_ERR, "column %u: %s: \"%.*s%s\" %s",
			w->col, stage, len, w->p,
			w->len > WORD_SHOW_MAX ? "..." : "", why);
}

/* 1..ISPEC_SIZE_MAX in plain decimal digits. */
static bool parse_size(const struct word *w, uint32_t *out)
{
	uint32_t v = 0;

	if (w->len == 0 || w->len > 5)
		return false;
	for (size_t i = 0; i < w->len; i++) {
		if (!isdigit((unsigned char)w->p[i]))
			return false;
		v = v * 10 + (uint32_t)(w->p[i] - '0');
	}
	if (v < 1 || v > ISPEC_SIZE_MAX)
		return false;
	*out = v;
	return true;
}

/*
 * A finite decimal number. The character check keeps strtod from taking
 * "inf", "nan" or hex floats, which have no place in a spec.
 */
static bool parse_real(const char *p, size_t len, double *out)
{
	char buf[48], *end;
	double v;

	if (len == 0 || len >= sizeof(buf))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!strchr("0123456789.eE+-", p[i]))
			return false;
	memcpy(buf, p, len);
	buf[len] = '\0';
	errno = 0;
	v = strtod(buf, &end);
	if (*end || end == buf || errno || !isfinite(v))
		return false;
	*out = v;
	return true;
}

/* A number, or a fraction A/B of two numbers (B > 0). */
static bool parse_frac(const struct word *w, double *out)
{
	const char *slash = memchr(w->p, '/', w->len);
	double a, b;

	if (!slash)
		return parse_real(w->p, w->len, out);
	if (!parse_real(w->p, (size_t)(slash - w->p), &a) ||
	    !parse_real(slash + 1, w->len - (size_t)(slash + 1 - w->p), &b) ||
	    !(b > 0))
		return false;
	*out = a / b;
	return isfinite(*out);
}

/* Exactly three numbers separated by commas, no spaces. */
static bool parse_triple(const struct word *w, double v[3])
{
	const char *p = w->p, *end = w->p + w->len;

	for (unsigned i = 0; i < 3; i++) {
		const char *c = memchr(p, ',', (size_t)(end - p));

		if ((i < 2) != (c != NULL))
			return false;
		if (!c)
			c = end;
		if (!parse_real(p, (size_t)(c - p), &v[i]))
			return false;
		p = c + 1;
	}
	return true;
}

static int p_decode(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n)
{
	if (n > 1)
		return bad(ps, st->name, &w[1],
			   "is unexpected: %s takes no "
			   "arguments",
			   st->name);
	return 0;
}

static int p_rrc(struct pstate *ps, const struct stage *st,
		 const struct word *w, unsigned n)
{
	struct ispec *sp = ps->sp;
	bool have_scale = false, have_ratio = false;

	if (n < 2)
		return bad(ps, st->name, &w[0], "needs a SIZE (1..%d)",
			   ISPEC_SIZE_MAX);
	if (!parse_size(&w[1], &sp->size))
		return bad(ps, st->name, &w[1], "is not a SIZE in 1..%d",
			   ISPEC_SIZE_MAX);
	sp->geom = ISPEC_RRC;
	memcpy(sp->scale, rrc_scale_def, sizeof(sp->scale));
	memcpy(sp->ratio, rrc_ratio_def, sizeof(sp->ratio));
	for (unsigned i = 2; i < n; i += 3) {
		bool is_scale = word_is(&w[i], "scale");
		double *r = is_scale ? sp->scale : sp->ratio;
		bool *have = is_scale ? &have_scale : &have_ratio;

		if (!is_scale && !word_is(&w[i], "ratio"))
			return bad(ps, st->name, &w[i],
				   "is unexpected: expected scale LO HI or "
				   "ratio LO HI");
		if (*have)
			return bad(ps, st->name, &w[i], "is given twice");
		*have = true;
		if (i + 2 >= n)
			return bad(ps, st->name, &w[i], "needs LO and HI");
		for (unsigned k = 0; k < 2; k++)
			if (!(is_scale ? parse_real(w[i + 1 + k].p,
						    w[i + 1 + k].len, &r[k]) :
					 parse_frac(&w[i + 1 + k], &r[k])) ||
			    !(r[k] > 0) || (is_scale && r[k] > 1))
				return bad(ps, st->name, &w[i + 1 + k],
					   "is not a %s",
					   is_scale ? "scale in (0, 1]" :
						      "ratio > 0");
		if (r[0] > r[1])
			return bad(ps, st->name, &w[i + 2],
				   "is below LO: the range is LO HI");
	}
	return 0;
}

/* The one size argument of resize (SHORT side) and center (SIZE). */
static int one_size(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n, const char *what,
		    uint32_t *out)
{
	if (n != 2)
		return bad(ps, st->name, &w[n > 2 ? 2 : 0],
			   "%s: %s takes one %s (1..%d)",
			   n > 2 ? "is unexpected" : "is incomplete", st->name,
			   what, ISPEC_SIZE_MAX);
	if (!parse_size(&w[1], out))
		return bad(ps, st->name, &w[1], "is not a %s in 1..%d", what,
			   ISPEC_SIZE_MAX);
	return 0;
}

static int p_resize(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n)
{
	int err = one_size(ps, st, w, n, "SHORT side", &ps->sp->resize);

	if (err)
		return err;
	ps->sp->geom = ISPEC_CENTER;
	ps->want_center = true;
	return 0;
}

static int p_center(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n)
{
	int err = one_size(ps, st, w, n, "SIZE", &ps->sp->size);

	if (err)
		return err;
	ps->sp->geom = ISPEC_CENTER;
	ps->want_center = false;
	return 0;
}

static int p_flip(struct pstate *ps, const struct stage *st,
		  const struct word *w, unsigned n)
{
	double p;

	if (n != 2)
		return bad(ps, st->name, &w[n > 2 ? 2 : 0],
			   "%s: flip takes one probability P (0..1)",
			   n > 2 ? "is unexpected" : "is incomplete");
	if (!parse_real(w[1].p, w[1].len, &p) || !(p >= 0 && p <= 1))
		return bad(ps, st->name, &w[1], "is not a probability in 0..1");
	ps->sp->flip = p;
	ps->sp->has_flip = true;
	return 0;
}

static int p_normalize(struct pstate *ps, const struct stage *st,
		       const struct word *w, unsigned n)
{
	struct ispec *sp = ps->sp;

	if (n == 2 && word_is(&w[1], "imagenet")) {
		memcpy(sp->mean, imagenet_mean, sizeof(sp->mean));
		memcpy(sp->std, imagenet_std, sizeof(sp->std));
		sp->has_normalize = true;
		return 0;
	}
	if (n != 3)
		return bad(ps, st->name, &w[n > 3 ? 3 : n - 1],
			   "%s: expected \"imagenet\" or M0,M1,M2 S0,S1,S2",
			   n > 3 ? "is unexpected" : "is not enough");
	if (!parse_triple(&w[1], sp->mean))
		return bad(ps, st->name, &w[1], "is not three means M0,M1,M2");
	for (unsigned c = 0; c < 3; c++)
		if (!(sp->mean[c] >= 0 && sp->mean[c] <= 1))
			return bad(ps, st->name, &w[1],
				   "has a mean outside 0..1 (channel %u)", c);
	if (!parse_triple(&w[2], sp->std))
		return bad(ps, st->name, &w[2], "is not three stds S0,S1,S2");
	for (unsigned c = 0; c < 3; c++)
		if (!(sp->std[c] > 0))
			return bad(ps, st->name, &w[2],
				   "has a std that is not > 0 (channel %u)", c);
	sp->has_normalize = true;
	return 0;
}

static int p_dtype(struct pstate *ps, const struct stage *st,
		   const struct word *w, unsigned n)
{
	if (n > 1)
		return bad(ps, st->name, &w[1],
			   "is unexpected: %s takes no "
			   "arguments",
			   st->name);
	/* Normalized values are fractions, mostly negative: not bytes. */
	if (st->arg == DT_U8 && ps->sp->has_normalize)
		return bad(ps, st->name, &w[0],
			   "cannot hold normalized values: use f16 or f32, "
			   "or drop normalize (at column %u)",
			   ps->seen[R_NORM].col);
	ps->sp->dtype = st->arg;
	return 0;
}

static int p_layout(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n)
{
	if (n > 1)
		return bad(ps, st->name, &w[1],
			   "is unexpected: %s takes no "
			   "arguments",
			   st->name);
	ps->sp->layout = st->arg;
	return 0;
}

static const struct stage stages[] = {
	{ "decode", R_DECODE, 0, p_decode },
	{ "rrc", R_GEOM, 0, p_rrc },
	{ "resize", R_GEOM, 0, p_resize },
	{ "center", R_CENTER, 0, p_center },
	{ "flip", R_FLIP, 0, p_flip },
	{ "normalize", R_NORM, 0, p_normalize },
	{ "u8", R_DTYPE, DT_U8, p_dtype },
	{ "f16", R_DTYPE, DT_F16, p_dtype },
	{ "f32", R_DTYPE, DT_F32, p_dtype },
	{ "nchw", R_LAYOUT, ISPEC_NCHW, p_layout },
	{ "nhwc", R_LAYOUT, ISPEC_NHWC, p_layout },
};

static const struct stage *stage_find(const struct word *w)
{
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++)
		if (word_is(w, stages[i].name))
			return &stages[i];
	return NULL;
}

/*
 * The checks between stages: order, duplicates, one geometry, and
 * "resize" followed by "center". Kept here, in one place, so that each
 * stage's parse function only looks at its own words.
 */
static int stage_order(struct pstate *ps, const struct stage *st,
		       const struct word *w)
{
	const struct word *prev = &ps->seen[ps->rank];
	bool geom = st->rank == R_GEOM || st->rank == R_CENTER;

	if (ps->rank == R_NONE && st->rank != R_DECODE)
		return bad(ps, st->name, w,
			   "cannot come first: a spec starts with decode");
	if (ps->want_center && st->rank != R_CENTER)
		return bad(ps, "resize", &ps->seen[R_GEOM],
			   "must be followed by center SIZE, not by %s",
			   st->name);
	if (geom && ps->have_geom && !(st->rank == R_CENTER && ps->want_center))
		return bad(ps, st->name, w,
			   "is a second geometry (one of rrc, resize + "
			   "center, center; first at column %u)",
			   ps->seen[R_GEOM].col ? ps->seen[R_GEOM].col :
						  ps->seen[R_CENTER].col);
	if (!geom && st->rank > R_CENTER && !ps->have_geom)
		return bad(ps, st->name, w,
			   "needs a geometry before it (rrc SIZE, or "
			   "[resize SHORT |] center SIZE)");
	if (st->rank == ps->rank || ps->seen[st->rank].col)
		return bad(ps, st->name, w,
			   "repeats a stage (first at column %u)",
			   ps->seen[st->rank].col);
	if (st->rank < ps->rank)
		return bad(ps, st->name, w, "must come before \"%.*s\"",
			   (int)(prev->len > WORD_SHOW_MAX ? WORD_SHOW_MAX :
							     prev->len),
			   prev->p);
	ps->rank = st->rank;
	ps->seen[st->rank] = *w;
	if (geom)
		ps->have_geom = true;
	return 0;
}

/* Split [b, e) into words; returns how many, or MAX_WORDS + 1. */
static unsigned split_words(struct pstate *ps, const char *b, const char *e,
			    struct word *w)
{
	unsigned n = 0;

	while (b < e) {
		const char *s;

		while (b < e && isspace((unsigned char)*b))
			b++;
		if (b == e)
			break;
		s = b;
		while (b < e && !isspace((unsigned char)*b))
			b++;
		if (n == MAX_WORDS + 1)
			break;
		w[n++] = (struct word){ s, (size_t)(b - s),
					(unsigned)(s - ps->text) + 1 };
	}
	return n;
}

int ispec_parse(struct ispec *sp, const char *text, struct diag *d)
{
	struct pstate ps = { .sp = sp, .d = d, .text = text };
	const char *b = text;
	struct word w[MAX_WORDS + 1];
	unsigned n;
	int err;

	memset(sp, 0, sizeof(*sp));
	sp->dtype = DT_F32;
	sp->layout = ISPEC_NCHW;
	for (;;) {
		const char *e = strchr(b, '|');
		const struct stage *st;

		if (!e)
			e = b + strlen(b);
		n = split_words(&ps, b, e, w);
		if (n == 0) {
			/* Point at the '|' next to the hole, or at the end. */
			struct word at = { e, *e ? 1 : 0,
					   (unsigned)(e - text) + 1 };

			if (b > text) {
				at = (struct word){ b - 1, 1,
						    (unsigned)(b - text) };
			}
			if (!*e && b == text) {
				at.col = 1;
				return bad(&ps, "spec", &at,
					   "is empty: a spec starts with "
					   "decode");
			}
			return bad(&ps, "spec", &at, "has an empty stage %s it",
				   b > text ? "after" : "before");
		}
		st = stage_find(&w[0]);
		if (!st)
			return bad(&ps, "spec", &w[0],
				   "is not a stage (decode, rrc, resize, "
				   "center, flip, normalize, u8, f16, f32, "
				   "nchw, nhwc)");
		if (n > MAX_WORDS)
			return bad(&ps, st->name, &w[MAX_WORDS],
				   "is one word too many");
		err = stage_order(&ps, st, &w[0]);
		if (!err)
			err = st->parse(&ps, st, w, n);
		if (err)
			return err;
		if (!*e)
			break;
		b = e + 1;
	}
	if (ps.want_center)
		return bad(&ps, "resize", &ps.seen[R_GEOM],
			   "must be followed by center SIZE");
	if (!ps.have_geom)
		return bad(&ps, "decode", &ps.seen[R_DECODE],
			   "ends the spec without a geometry (rrc SIZE, or "
			   "[resize SHORT |] center SIZE)");
	diag_clear(d);
	return 0;
}

/*
 * The shortest decimal that reads back as exactly v, so that format and
 * parse round-trip and the text stays readable ("0.485", not 17 digits).
 */
static int put_real(char *buf, size_t n, double v)
{
	char tmp[40];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			break;
	}
	return snprintf(buf, n, "%s", tmp);
}

/*
 * A ratio prints as a small fraction when one gives back exactly v:
 * "4/3" reads better than "1.3333333333333333" and parses to the same
 * double, because a/b is correctly rounded.
 */
static int put_frac(char *buf, size_t n, double v)
{
	for (unsigned den = 2; den <= 16; den++) {
		double num = nearbyint(v * den);

		if (num >= 1 && num < 1e6 && num / den == v &&
		    fmod(num, den) != 0)
			return snprintf(buf, n, "%.0f/%u", num, den);
	}
	return put_real(buf, n, v);
}

/* Append to a fixed buffer, counting what did not fit, as snprintf. */
struct out {
	char *buf;
	size_t n;
	size_t len;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o,
						      const char *fmt, ...)
{
	va_list ap;
	size_t room = o->len < o->n ? o->n - o->len : 0;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (r > 0)
		o->len += (size_t)r;
}

static void put_triple(struct out *o, const double v[3])
{
	char num[40];

	for (unsigned c = 0; c < 3; c++) {
		put_real(num, sizeof(num), v[c]);
		put(o, "%s%s", c ? "," : "", num);
	}
}

int ispec_format(const struct ispec *sp, char *buf, size_t n)
{
	struct out o = { buf, n, 0 };
	char a[40], b[40];

	if (n)
		buf[0] = '\0';
	put(&o, "decode");
	if (sp->geom == ISPEC_RRC) {
		put(&o, " | rrc %u", (unsigned)sp->size);
		if (memcmp(sp->scale, rrc_scale_def, sizeof(sp->scale))) {
			put_real(a, sizeof(a), sp->scale[0]);
			put_real(b, sizeof(b), sp->scale[1]);
			put(&o, " scale %s %s", a, b);
		}
		if (memcmp(sp->ratio, rrc_ratio_def, sizeof(sp->ratio))) {
			put_frac(a, sizeof(a), sp->ratio[0]);
			put_frac(b, sizeof(b), sp->ratio[1]);
			put(&o, " ratio %s %s", a, b);
		}
	} else {
		if (sp->resize)
			put(&o, " | resize %u", (unsigned)sp->resize);
		put(&o, " | center %u", (unsigned)sp->size);
	}
	if (sp->has_flip) {
		put_real(a, sizeof(a), sp->flip);
		put(&o, " | flip %s", a);
	}
	if (sp->has_normalize) {
		put(&o, " | normalize");
		if (!memcmp(sp->mean, imagenet_mean, sizeof(sp->mean)) &&
		    !memcmp(sp->std, imagenet_std, sizeof(sp->std))) {
			put(&o, " imagenet");
		} else {
			put(&o, " ");
			put_triple(&o, sp->mean);
			put(&o, " ");
			put_triple(&o, sp->std);
		}
	}
	put(&o, " | %s | %s",
	    dtype_name(sp->dtype) ? dtype_name(sp->dtype) : "?",
	    sp->layout == ISPEC_NHWC ? "nhwc" : "nchw");
	return (int)o.len;
}

unsigned ispec_out_shape(const struct ispec *sp, uint32_t dims[3])
{
	bool chw = sp->layout == ISPEC_NCHW;

	dims[0] = chw ? ISPEC_CHANNELS : sp->size;
	dims[1] = sp->size;
	dims[2] = chw ? sp->size : ISPEC_CHANNELS;
	return 3;
}

size_t ispec_out_bytes(const struct ispec *sp)
{
	return (size_t)sp->size * sp->size * ISPEC_CHANNELS *
	       dtype_size(sp->dtype);
}

static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * binary32 -> binary16 with round to nearest even, after F. Giesen's
 * float_to_half_fast3_rtne. Written as three candidates and a select, no
 * loops and no table, so that the loops calling it can be vectorised.
 *
 * Normal results: rebias the exponent and round the 13 dropped mantissa
 * bits by adding 0xfff plus the lowest kept bit (ties go to even); a
 * carry out of the mantissa bumps the exponent, up to infinity for
 * values >= 65520. Subnormal results: adding 0.5f puts the value's bits
 * at the right place in a float whose exponent is fixed, and the FPU's
 * own round-to-nearest-even does the rounding. Values >= 65536 and
 * inf/NaN are handled apart; NaN becomes a quiet NaN with its sign.
 */
uint16_t ispec_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	uint32_t a = x & 0x7fffffffu;
	uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
	uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
	uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1)) >> 13;
	uint32_t h;

	/* 0xc8000fff is (15 - 127) << 23 plus the rounding 0xfff. */
	if (a >= 0x47800000u)
		h = big;
	else if (a < 0x38800000u)
		h = sub;
	else
		h = norm;
	return (uint16_t)(h | sign);
}

/* Per-channel y = x * scale + bias, the whole of normalize. */
struct affine {
	float scale[3];
	float bias[3];
};

/*
 * (x / 255 - mean) / std == x * (1 / (255 std)) + (-mean / std). Both
 * coefficients are computed in double and rounded once to float, and
 * every output is x * scale + bias in float.
 */
static void affine_init(const struct ispec *sp, struct affine *af)
{
	for (unsigned c = 0; c < 3; c++) {
		double m = sp->has_normalize ? sp->mean[c] : 0.0;
		double s = sp->has_normalize ? sp->std[c] : 1.0;

		af->scale[c] = (float)(1.0 / (255.0 * s));
		af->bias[c] = (float)(-m / s);
	}
}

/*
 * A u8 input has 256 values per channel, so both float outputs are table
 * lookups: the table holds, for every value, exactly what the multiply-
 * add (and the rounding to f16) gives, and costs 768 of them per image
 * instead of one per element.
 */
/*
 * x * scale + bias as a multiply, rounded, then an add: never one fused
 * multiply-add, whatever -ffp-contract and -march say, so that the
 * tables and the SIMD loops below (mul then add) agree to the bit.
 */
static float affine_at(const struct affine *af, unsigned c, unsigned v)
{
	volatile float p = (float)v * af->scale[c];

	return p + af->bias[c];
}

#ifdef ISPEC_X86
static bool ispec_simd = true; /* tests turn it off to compare */

/*
 * Eight RGB pixels (24 bytes at px) as three vectors of eight 32-bit
 * integers, one per channel. Reads 32 bytes: the caller keeps 8 bytes of
 * slack before the end of px.
 */
__attribute__((target("avx2"))) static inline void
rgb8(const uint8_t *px, __m256i *r, __m256i *g, __m256i *b)
{
	const __m128i a = _mm_loadu_si128((const __m128i *)px);
	const __m128i z = _mm_loadu_si128((const __m128i *)(px + 16));
	const __m128i ra = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1,
					 -1, -1, -1, -1, -1);
	const __m128i rz = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i ga = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i gz = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i ba = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1,
					 -1, -1, -1, -1, -1, -1);
	const __m128i bz = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1,
					 -1, -1, -1, -1, -1, -1);

	*r = _mm256_cvtepu8_epi32(
		_mm_or_si128(_mm_shuffle_epi8(a, ra), _mm_shuffle_epi8(z, rz)));
	*g = _mm256_cvtepu8_epi32(
		_mm_or_si128(_mm_shuffle_epi8(a, ga), _mm_shuffle_epi8(z, gz)));
	*b = _mm256_cvtepu8_epi32(
		_mm_or_si128(_mm_shuffle_epi8(a, ba), _mm_shuffle_epi8(z, bz)));
}

__attribute__((target("avx2"))) static inline __m256
affine8(__m256i v, float scale, float bias)
{
	return _mm256_add_ps(
		_mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(scale)),
		_mm256_set1_ps(bias));
}

/*
 * NCHW f32, 8 pixels a step, with streaming stores: the daemon never
 * reads the batch again, so the lines need not be fetched nor kept.
 * Returns the pixels done (a multiple of 8); the rest is the caller's.
 */
__attribute__((target("avx2"))) static size_t
chw_f32_avx2(const struct affine *af, const uint8_t *px, size_t np, float *out)
{
	size_t i = 0;
	bool aligned = ((uintptr_t)out | (np * sizeof(float))) % 32 == 0;

	for (; i + 8 <= np && 3 * i + 32 <= 3 * np; i += 8) {
		__m256i r, g, b;
		__m256 vr, vg, vb;

		rgb8(px + 3 * i, &r, &g, &b);
		vr = affine8(r, af->scale[0], af->bias[0]);
		vg = affine8(g, af->scale[1], af->bias[1]);
		vb = affine8(b, af->scale[2], af->bias[2]);
		if (aligned) {
			_mm256_stream_ps(out + i, vr);
			_mm256_stream_ps(out + np + i, vg);
			_mm256_stream_ps(out + 2 * np + i, vb);
		} else {
			_mm256_storeu_ps(out + i, vr);
			_mm256_storeu_ps(out + np + i, vg);
			_mm256_storeu_ps(out + 2 * np + i, vb);
		}
	}
	_mm_sfence();
	return i;
}

/* The same for f16, rounded to nearest even by F16C. */
__attribute__((target("avx2,f16c"))) static size_t
chw_f16_avx2(const struct affine *af, const uint8_t *px, size_t np,
	     uint16_t *out)
{
	size_t i = 0;
	bool aligned = ((uintptr_t)out | (np * sizeof(uint16_t))) % 16 == 0;

	for (; i + 8 <= np && 3 * i + 32 <= 3 * np; i += 8) {
		__m256i r, g, b;
		__m128i hr, hg, hb;

		rgb8(px + 3 * i, &r, &g, &b);
		hr = _mm256_cvtps_ph(affine8(r, af->scale[0], af->bias[0]),
				     _MM_FROUND_TO_NEAREST_INT);
		hg = _mm256_cvtps_ph(affine8(g, af->scale[1], af->bias[1]),
				     _MM_FROUND_TO_NEAREST_INT);
		hb = _mm256_cvtps_ph(affine8(b, af->scale[2], af->bias[2]),
				     _MM_FROUND_TO_NEAREST_INT);
		if (aligned) {
			_mm_stream_si128((__m128i *)(out + i), hr);
			_mm_stream_si128((__m128i *)(out + np + i), hg);
			_mm_stream_si128((__m128i *)(out + 2 * np + i), hb);
		} else {
			_mm_storeu_si128((__m128i *)(out + i), hr);
			_mm_storeu_si128((__m128i *)(out + np + i), hg);
			_mm_storeu_si128((__m128i *)(out + 2 * np + i), hb);
		}
	}
	_mm_sfence();
	return i;
}
#endif

void ispec_test_simd(bool on)
{
#ifdef ISPEC_X86
	ispec_simd = on;
#else
	(void)on;
#endif
}

/*
 * With fewer pixels than this left (the SIMD loops' tail, small images),
 * computing each element costs less than filling the tables.
 */
#define EMIT_TABLE_MIN 256

static void emit_f32(const struct affine *af, const uint8_t *restrict px,
		     size_t np, bool chw, float *restrict out)
{
	float lut[3][256];
	/* Element (pixel i, channel c) goes to i * step + c * plane. */
	size_t step = chw ? 1 : 3, plane = chw ? np : 1, i = 0;

#ifdef ISPEC_X86
	if (chw && ispec_simd && __builtin_cpu_supports("avx2"))
		i = chw_f32_avx2(af, px, np, out);
#endif
	if (np - i < EMIT_TABLE_MIN) {
		for (; i < np; i++)
			for (unsigned c = 0; c < 3; c++)
				out[i * step + c * plane] =
					affine_at(af, c, px[3 * i + c]);
		return;
	}
	for (unsigned c = 0; c < 3; c++)
		for (unsigned v = 0; v < 256; v++)
			lut[c][v] = affine_at(af, c, v);
	for (; i < np; i++) {
		out[i * step] = lut[0][px[3 * i]];
		out[i * step + plane] = lut[1][px[3 * i + 1]];
		out[i * step + 2 * plane] = lut[2][px[3 * i + 2]];
	}
}

#ifdef ISPEC_X86
/*
 * F16C (CPUID leaf 1, ECX bit 29), asked of the CPU directly: not every
 * compiler's __builtin_cpu_supports() knows the name (clang 14 does not).
 */
static bool has_f16c(void)
{
	static int known = -1; /* any thread may find it out first */
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
	unsigned a, b, c, d;

	if (k < 0) {
		k = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	return k;
}
#endif

static void emit_f16(const struct affine *af, const uint8_t *restrict px,
		     size_t np, bool chw, uint16_t *restrict out)
{
	uint16_t lut[3][256];
	size_t step = chw ? 1 : 3, plane = chw ? np : 1, i = 0;

#ifdef ISPEC_X86
	if (chw && ispec_simd && __builtin_cpu_supports("avx2") && has_f16c())
		i = chw_f16_avx2(af, px, np, out);
#endif
	if (np - i < EMIT_TABLE_MIN) {
		for (; i < np; i++)
			for (unsigned c = 0; c < 3; c++)
				out[i * step + c * plane] = ispec_f32_to_f16(
					affine_at(af, c, px[3 * i + c]));
		return;
	}
	for (unsigned c = 0; c < 3; c++)
		for (unsigned v = 0; v < 256; v++)
			lut[c][v] = ispec_f32_to_f16(affine_at(af, c, v));
	for (; i < np; i++) {
		out[i * step] = lut[0][px[3 * i]];
		out[i * step + plane] = lut[1][px[3 * i + 1]];
		out[i * step + 2 * plane] = lut[2][px[3 * i + 2]];
	}
}

static void emit_u8(const uint8_t *restrict px, size_t np, bool chw,
		    uint8_t *restrict out)
{
	if (!chw) {
		memcpy(out, px, np * 3);
		return;
	}
	for (size_t i = 0; i < np; i++) {
		out[i] = px[3 * i];
		out[np + i] = px[3 * i + 1];
		out[2 * np + i] = px[3 * i + 2];
	}
}

int ispec_emit(const struct ispec *sp, const uint8_t *hwc, uint32_t w,
	       uint32_t h, void *dst)
{
	size_t np = (size_t)w * h;
	bool chw = sp->layout == ISPEC_NCHW;
	struct affine af;

	if (w != sp->size || h != sp->size || !w)
		return -EINVAL;
	affine_init(sp, &af);
	switch (sp->dtype) {
	case DT_U8: emit_u8(hwc, np, chw, dst); return 0;
	case DT_F16: emit_f16(&af, hwc, np, chw, dst); return 0;
	case DT_F32: emit_f32(&af, hwc, np, chw, dst); return 0;
	default: return -EINVAL;
	}
}
