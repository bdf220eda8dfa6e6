/*
 * ispec.c - the image pipeline spec: parse and format (the kernel that
 * applies its last stages is imgkern.c).
 *
 * Every parse error is LOADER_EUSAGE, not LOADER_ESCHEMA: a spec is an
 * argument the user typed (command line, config file, client call), and
 * EUSAGE tells them to fix what they wrote. ESCHEMA stays for data whose
 * schema is wrong or does not match, e.g. a spec applied to a field that
 * is not a JPEG, so that a caller can tell the two apart.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_error.h"
#include "ispec.h"
#include "dtype.h"

#define ISPEC_ERR LOADER_EUSAGE
/* affine rotate LO HI translate FX FY scale LO HI zoom LO HI shear (4)
 * interp I fill F p P */
#define MAX_WORDS     28
#define WORD_SHOW_MAX 40 /* longest word quoted in a message */
/* A word's schedules' values, as text: three numbers and two commas. */
#define SUB_MAX 104

/* One schedule: keys (epoch, value) in rising epochs, and its step. */
struct sched {
	unsigned nkeys;
	uint32_t ep[ISPEC_SCHED_KEYS];
	double v[ISPEC_SCHED_KEYS];
	double step; /* 0: none */
};

static const double imagenet_mean[3] = { 0.485, 0.456, 0.406 };
static const double imagenet_std[3] = { 0.229, 0.224, 0.225 };
static const double rrc_scale_def[2] = { 0.08, 1.0 };
static const double rrc_ratio_def[2] = { 3.0 / 4.0, 4.0 / 3.0 };

/*
 * A word of the text: where it starts, how long, its 1-based column. A
 * word that holds a schedule (ispec.h, SCHEDULES) is replaced by its
 * value at the epoch parsed: p then points at that value's text, and src
 * at the schedule as written, for messages.
 */
struct word {
	const char *p;
	size_t len;
	unsigned col;
	const char *src; /* NULL: no schedule */
	size_t srclen;
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
	R_VFLIP,
	R_COLOR, /* may repeat: colour stages, in any order */
	R_NORM,
	R_ERASE,
	R_CUTOUT,
	R_DTYPE,
	R_LAYOUT,
	R_MIXUP, /* the batch stages (ispec.h, struct ispec_batch) */
	R_CUTMIX,
	R_SWITCH,
	R_PAIR,
	R_SMOOTH,
	R_CLASSES,
	R_AT,
	R_COUNT
};

struct pstate {
	struct ispec *sp;
	struct diag *d;
	const char *text;
	unsigned rank;		   /* rank of the last stage */
	struct word seen[R_COUNT]; /* first word of each stage seen */
	bool have_geom;
	bool want_center;      /* "resize" seen, "center" must come next */
	struct word interp_at; /* where interp, fill were first given */
	struct word fill_at;
	uint32_t epoch;	 /* schedules are read at this epoch */
	unsigned nsched; /* schedules met so far */
	struct sched sched[ISPEC_MAX_SCHED];
	bool has_at; /* an "at" stage: its epoch, or final */
	bool at_final;
	uint32_t at;
	char sub[MAX_WORDS + 1][SUB_MAX]; /* the stage's values, as text */
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
	char why[DIAG_MAX];
	va_list ap;
	int len = (int)(w->len > WORD_SHOW_MAX ? WORD_SHOW_MAX : w->len);

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	memset(ps->sp, 0, sizeof(*ps->sp));
	if (w->src) {
		int slen = (int)(w->srclen > WORD_SHOW_MAX ? WORD_SHOW_MAX :
							     w->srclen);

		return diag_set(ps->d, ISPEC_ERR,
				"column %u: %s: \"%.*s%s\" %s (the value of "
				"schedule \"%.*s%s\" at epoch %" PRIu32 ")",
				w->col, stage, len, w->p,
				w->len > WORD_SHOW_MAX ? "..." : "", why, slen,
				w->src, w->srclen > WORD_SHOW_MAX ? "..." : "",
				ps->epoch);
	}
	return diag_set(ps->d, ISPEC_ERR, "column %u: %s: \"%.*s%s\" %s",
			w->col, stage, len, w->p,
			w->len > WORD_SHOW_MAX ? "..." : "", why);
}

static bool parse_real(const char *p, size_t len, double *out);

/*
 * An integer argument given by a schedule takes its value rounded to the
 * nearest integer, ties to even (as NumPy's round): a ramp of sizes or
 * magnitudes moves through whole numbers.
 */
static void sched_round(const struct word *w, double *v)
{
	if (w->src)
		*v = nearbyint(*v);
}

/*
 * A whole number in lo..hi in at most maxlen plain decimal digits
 * ([p, p + len), maxlen <= 19): what sizes, epochs and counts are
 * written as.
 */
static bool parse_uint(const char *p, size_t len, size_t maxlen, uint32_t lo,
		       uint32_t hi, uint32_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > maxlen)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)p[i]))
			return false;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	if (v < lo || v > hi)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* 1..ISPEC_SIZE_MAX in plain decimal digits (or a schedule's value). */
static bool parse_size(const struct word *w, uint32_t *out)
{
	if (w->src) {
		double x;

		if (!parse_real(w->p, w->len, &x))
			return false;
		sched_round(w, &x);
		if (!(x >= 1 && x <= ISPEC_SIZE_MAX))
			return false;
		*out = (uint32_t)x;
		return true;
	}
	return parse_uint(w->p, w->len, 5, 1, ISPEC_SIZE_MAX, out);
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

/* flip P, vflip P: one probability, into the flip st->arg names. */
static int p_flip(struct pstate *ps, const struct stage *st,
		  const struct word *w, unsigned n)
{
	bool v = st->arg;
	double p;

	if (n != 2)
		return bad(ps, st->name, &w[n > 2 ? 2 : 0],
			   "%s: %s takes one probability P (0..1)",
			   n > 2 ? "is unexpected" : "is incomplete", st->name);
	if (!parse_real(w[1].p, w[1].len, &p) || !(p >= 0 && p <= 1))
		return bad(ps, st->name, &w[1], "is not a probability in 0..1");
	*(v ? &ps->sp->vflip : &ps->sp->flip) = p;
	*(v ? &ps->sp->has_vflip : &ps->sp->has_flip) = true;
	return 0;
}

static const double erase_scale_def[2] = { 0.02, 0.33 };
static const double erase_ratio_def[2] = { 0.3, 3.3 };

/* erase [p P] [scale LO HI] [ratio LO HI] [value 0|V0,V1,V2|random] */
static int p_erase(struct pstate *ps, const struct stage *st,
		   const struct word *w, unsigned n)
{
	struct ispec *sp = ps->sp;
	bool seen[4] = { false };

	sp->has_erase = true;
	sp->erase.p = 0.5;
	memcpy(sp->erase.scale, erase_scale_def, sizeof(sp->erase.scale));
	memcpy(sp->erase.ratio, erase_ratio_def, sizeof(sp->erase.ratio));
	for (unsigned i = 1; i < n;) {
		unsigned k = word_is(&w[i], "p")     ? 0 :
			     word_is(&w[i], "scale") ? 1 :
			     word_is(&w[i], "ratio") ? 2 :
			     word_is(&w[i], "value") ? 3 :
						       4;
		unsigned need = k == 1 || k == 2 ? 2 : 1;

		if (k == 4)
			return bad(ps, st->name, &w[i],
				   "is unexpected: expected p P, scale LO HI, "
				   "ratio LO HI or value 0|V0,V1,V2|random");
		if (seen[k])
			return bad(ps, st->name, &w[i], "is given twice");
		seen[k] = true;
		if (i + need >= n)
			return bad(ps, st->name, &w[i], "is incomplete");
		if (k == 0 &&
		    (!parse_real(w[i + 1].p, w[i + 1].len, &sp->erase.p) ||
		     !(sp->erase.p >= 0 && sp->erase.p <= 1)))
			return bad(ps, st->name, &w[i + 1],
				   "is not a probability in 0..1");
		if (k == 1 || k == 2) {
			double *r = k == 1 ? sp->erase.scale : sp->erase.ratio;

			for (unsigned j = 0; j < 2; j++)
				if (!parse_real(w[i + 1 + j].p,
						w[i + 1 + j].len, &r[j]) ||
				    !(r[j] > 0) || (k == 1 && r[j] > 1) ||
				    (k == 2 && r[j] > 100))
					return bad(ps, st->name, &w[i + 1 + j],
						   "is not a %s",
						   k == 1 ?
							   "scale in (0, 1]" :
							   "ratio in (0, 100]");
			if (r[0] > r[1])
				return bad(ps, st->name, &w[i + 2],
					   "is below LO: the range is LO HI");
		}
		if (k == 3) {
			const struct word *v = &w[i + 1];

			if (word_is(v, "random")) {
				sp->erase.value = ISPEC_ERASE_RANDOM;
			} else if (word_is(v, "0")) {
				sp->erase.value = ISPEC_ERASE_ZERO;
			} else if (parse_triple(v, sp->erase.rgb) &&
				   fabs(sp->erase.rgb[0]) <= 1e6 &&
				   fabs(sp->erase.rgb[1]) <= 1e6 &&
				   fabs(sp->erase.rgb[2]) <= 1e6) {
				sp->erase.value = ISPEC_ERASE_RGB;
			} else {
				return bad(ps, st->name, v,
					   "is not 0, three values V0,V1,V2 "
					   "or random");
			}
		}
		i += 1 + need;
	}
	return 0;
}

static int p_cutout(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n)
{
	struct ispec *sp = ps->sp;

	sp->has_cutout = true;
	sp->cutout.p = 1;
	if (n < 2 || !parse_size(&w[1], &sp->cutout.size))
		return bad(ps, st->name, &w[n < 2 ? 0 : 1],
			   "needs a SIZE in 1..%d", ISPEC_SIZE_MAX);
	if (n == 2)
		return 0;
	if (n != 4 || !word_is(&w[2], "p"))
		return bad(ps, st->name, &w[2],
			   "is unexpected: after SIZE, cutout takes only "
			   "\"p P\"");
	if (!parse_real(w[3].p, w[3].len, &sp->cutout.p) ||
	    !(sp->cutout.p >= 0 && sp->cutout.p <= 1))
		return bad(ps, st->name, &w[3], "is not a probability in 0..1");
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

/*
 * A batch stage's one argument: w[1] alone, or an error naming the
 * stage and what it takes.
 */
static int one_arg(struct pstate *ps, const struct stage *st,
		   const struct word *w, unsigned n, const char *what)
{
	if (n != 2)
		return bad(ps, st->name, &w[n > 2 ? 2 : 0], "%s: %s takes %s",
			   n > 2 ? "is unexpected" : "is incomplete", st->name,
			   what);
	ps->sp->batch.on = true;
	/* Defaults of the stages that may follow (ispec.h). */
	if (st->rank == R_MIXUP || st->rank == R_CUTMIX)
		ps->sp->batch.cut_p = 0.5;
	return 0;
}

/* mixup ALPHA, cutmix ALPHA: Beta(ALPHA, ALPHA)'s parameter. */
static int p_alpha(struct pstate *ps, const struct stage *st,
		   const struct word *w, unsigned n)
{
	struct ispec_batch *b = &ps->sp->batch;
	double a;
	int err = one_arg(ps, st, w, n, "one ALPHA (0 < ALPHA <= 1000)");

	if (err)
		return err;
	if (!parse_real(w[1].p, w[1].len, &a) ||
	    !(a > 0 && a <= ISPEC_ALPHA_MAX))
		return bad(ps, st->name, &w[1], "is not an ALPHA in (0, %d]",
			   ISPEC_ALPHA_MAX);
	*(st->rank == R_MIXUP ? &b->mixup : &b->cutmix) = a;
	return 0;
}

static int p_switch(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n)
{
	struct ispec_batch *b = &ps->sp->batch;
	int err = one_arg(ps, st, w, n, "one probability P (0..1)");

	if (err)
		return err;
	if (!parse_real(w[1].p, w[1].len, &b->cut_p) ||
	    !(b->cut_p >= 0 && b->cut_p <= 1))
		return bad(ps, st->name, &w[1], "is not a probability in 0..1");
	if (!b->mixup || !b->cutmix)
		return bad(ps, st->name, &w[0],
			   "needs both mixup and cutmix before it: it is the "
			   "probability that a batch uses cutmix");
	return 0;
}

static int p_pair(struct pstate *ps, const struct stage *st,
		  const struct word *w, unsigned n)
{
	struct ispec_batch *b = &ps->sp->batch;
	int err = one_arg(ps, st, w, n, "flip or roll");

	if (err)
		return err;
	if (word_is(&w[1], "flip"))
		b->pair = ISPEC_PAIR_FLIP;
	else if (word_is(&w[1], "roll"))
		b->pair = ISPEC_PAIR_ROLL;
	else
		return bad(ps, st->name, &w[1], "is not flip or roll");
	if (!b->mixup && !b->cutmix)
		return bad(ps, st->name, &w[0],
			   "needs mixup or cutmix before it");
	return 0;
}

static int p_smooth(struct pstate *ps, const struct stage *st,
		    const struct word *w, unsigned n)
{
	struct ispec_batch *b = &ps->sp->batch;
	int err = one_arg(ps, st, w, n, "one E (0 <= E < 1)");

	if (err)
		return err;
	if (!parse_real(w[1].p, w[1].len, &b->smoothing) ||
	    !(b->smoothing >= 0 && b->smoothing < 1))
		return bad(ps, st->name, &w[1], "is not an E in [0, 1)");
	b->has_smoothing = true;
	return 0;
}

static int p_classes(struct pstate *ps, const struct stage *st,
		     const struct word *w, unsigned n)
{
	struct ispec_batch *b = &ps->sp->batch;
	bool before = b->on;
	int err = one_arg(ps, st, w, n, "one count N (1..1000000)");

	if (err)
		return err;
	if (w[1].src)
		return bad(ps, st->name, &w[1],
			   "cannot change by epoch: it is the label output's "
			   "shape");
	if (!parse_uint(w[1].p, w[1].len, 19, 1, ISPEC_CLASSES_MAX,
			&b->classes))
		return bad(ps, st->name, &w[1], "is not a count N in 1..%d",
			   ISPEC_CLASSES_MAX);
	if (!before)
		return bad(ps, st->name, &w[0],
			   "needs a batch stage before it (mixup, cutmix or "
			   "label_smoothing): alone it changes nothing");
	return 0;
}

/* A colour stage's name, and its default probability. */
static const struct {
	const char *name;
	double p;
} op_info[] = {
	[ISPEC_OP_BRIGHTNESS] = { "brightness", 1 },
	[ISPEC_OP_CONTRAST] = { "contrast", 1 },
	[ISPEC_OP_SATURATION] = { "saturation", 1 },
	[ISPEC_OP_HUE] = { "hue", 1 },
	[ISPEC_OP_JITTER] = { "jitter", 1 },
	[ISPEC_OP_GRAYSCALE] = { "grayscale", 0.1 },
	[ISPEC_OP_INVERT] = { "invert", 0.5 },
	[ISPEC_OP_POSTERIZE] = { "posterize", 0.5 },
	[ISPEC_OP_SOLARIZE] = { "solarize", 0.5 },
	[ISPEC_OP_AUTOCONTRAST] = { "autocontrast", 0.5 },
	[ISPEC_OP_EQUALIZE] = { "equalize", 0.5 },
	[ISPEC_OP_SHARPNESS] = { "sharpness", 0.5 },
	[ISPEC_OP_BLUR] = { "gaussian_blur", 1 },
	[ISPEC_OP_CHANNEL_SHIFT] = { "channel_shift", 1 },
	[ISPEC_OP_ROTATE] = { "rotate", 1 },
	[ISPEC_OP_AFFINE] = { "affine", 1 },
	[ISPEC_OP_TRIVIAL] = { "trivialaugment", 1 },
	[ISPEC_OP_RANDAUG] = { "randaugment", 1 },
	[ISPEC_OP_AUTOAUG] = { "autoaugment", 1 },
};

/* How many numbers a colour stage takes before its optional "p P". */
static unsigned op_nargs(unsigned kind)
{
	switch (kind) {
	case ISPEC_OP_JITTER: return 4;
	case ISPEC_OP_BLUR: return 3;
	case ISPEC_OP_GRAYSCALE:
	case ISPEC_OP_INVERT:
	case ISPEC_OP_AUTOCONTRAST:
	case ISPEC_OP_EQUALIZE: return 0;
	default: return 1;
	}
}

/* Check argument k of a colour stage; NULL, or what it must be. */
static const char *op_arg_check(unsigned kind, unsigned k, double v)
{
	switch (kind) {
	case ISPEC_OP_HUE:
		return v >= 0 && v <= 0.5 ? NULL : "a hue range in 0..0.5";
	case ISPEC_OP_JITTER:
		if (k == 3)
			return v >= 0 && v <= 0.5 ? NULL :
						    "a hue range in 0..0.5";
		return v >= 0 && v <= 1000 ? NULL : "a range in 0..1000";
	case ISPEC_OP_POSTERIZE:
		return v >= 1 && v <= 8 && v == floor(v) ? NULL :
							   "BITS in 1..8";
	case ISPEC_OP_SOLARIZE:
		return v >= 0 && v <= 255 ? NULL : "a threshold in 0..255";
	case ISPEC_OP_BLUR:
		if (k == 0)
			return v >= 1 && v <= 31 && v == floor(v) &&
					       fmod(v, 2) == 1 ?
				       NULL :
				       "an odd kernel size in 1..31";
		return v > 0 && v <= 100 ? NULL : "a sigma in (0, 100]";
	case ISPEC_OP_CHANNEL_SHIFT:
		return v >= 0 && v <= 255 ? NULL : "a shift range in 0..255";
	default: return v >= 0 && v <= 1000 ? NULL : "a range in 0..1000";
	}
}

/* Whether argument k of a colour stage is a whole number. */
static bool op_arg_integer(unsigned kind, unsigned k)
{
	return kind == ISPEC_OP_POSTERIZE || (kind == ISPEC_OP_BLUR && k == 0);
}

/*
 * Whether a sample can draw op's ops after those of the stages before it:
 * a stage draws one, randaugment N, autoaugment two.
 */
static unsigned op_steps(const struct ispec_op *op)
{
	return op->kind == ISPEC_OP_RANDAUG ? (unsigned)op->a[0] :
	       op->kind == ISPEC_OP_AUTOAUG ? 2 :
					      1;
}

static int room_for_steps(struct pstate *ps, const struct stage *st,
			  const struct word *w, const struct ispec_op *op)
{
	unsigned k = op_steps(op);

	for (uint32_t j = 0; j < ps->sp->nops; j++)
		k += op_steps(&ps->sp->ops[j]);
	if (k > ISPEC_MAX_STEPS)
		return bad(ps, st->name, &w[0],
			   "makes %u ops a sample may draw, more than %d", k,
			   ISPEC_MAX_STEPS);
	return 0;
}

static int p_color(struct pstate *ps, const struct stage *st,
		   const struct word *w, unsigned n)
{
	struct ispec *sp = ps->sp;
	unsigned na = op_nargs(st->arg);
	struct ispec_op op = { .kind = st->arg, .p = op_info[st->arg].p };

	if (sp->nops == ISPEC_MAX_OPS)
		return bad(ps, st->name, &w[0],
			   "is one colour stage too many (at most %d)",
			   ISPEC_MAX_OPS);
	if (n < 1 + na)
		return bad(ps, st->name, &w[n - 1],
			   "is not enough: %s takes %u number%s", st->name, na,
			   na == 1 ? "" : "s");
	for (unsigned k = 0; k < na; k++) {
		const char *why = NULL;

		bool num = parse_real(w[1 + k].p, w[1 + k].len, &op.a[k]);

		if (num && op_arg_integer(st->arg, k))
			sched_round(&w[1 + k], &op.a[k]);
		if (!num || (why = op_arg_check(st->arg, k, op.a[k])))
			return bad(ps, st->name, &w[1 + k], "is not %s",
				   why ? why : "a number");
	}
	if (st->arg == ISPEC_OP_BLUR && op.a[1] > op.a[2])
		return bad(ps, st->name, &w[3],
			   "is below LO: the sigma range is LO HI");
	if (n == 1 + na)
		goto done;
	if (n != 3 + na || !word_is(&w[1 + na], "p"))
		return bad(ps, st->name, &w[1 + na],
			   "is unexpected: after its %u number%s, %s takes "
			   "only \"p P\"",
			   na, na == 1 ? "" : "s", st->name);
	if (!parse_real(w[2 + na].p, w[2 + na].len, &op.p) ||
	    !(op.p >= 0 && op.p <= 1))
		return bad(ps, st->name, &w[2 + na],
			   "is not a probability in 0..1");
done:
	if (room_for_steps(ps, st, w, &op))
		return LOADER_EUSAGE;
	sp->ops[sp->nops++] = op;
	return 0;
}

bool ispec_op_geometric(unsigned kind)
{
	return kind >= ISPEC_OP_ROTATE && kind <= ISPEC_OP_AUTOAUG;
}

bool ispec_has_warp(const struct ispec *sp)
{
	for (uint32_t i = 0; i < sp->nops; i++)
		if (ispec_op_geometric(sp->ops[i].kind))
			return true;
	return false;
}

static const char *const interp_names[] = { "nearest", "bilinear" };
static const char *const fill_names[] = { "", "nearest", "reflect", "wrap",
					  "context" };

/*
 * interp I or fill F of a geometric stage, into sp: the first stage that
 * gives one sets it, a later one must agree (a spec has one of each).
 */
static int geo_mode(struct pstate *ps, const struct stage *st,
		    const struct word *key, const struct word *v)
{
	struct ispec *sp = ps->sp;
	bool is_fill = word_is(key, "fill");
	struct word *at = is_fill ? &ps->fill_at : &ps->interp_at;
	uint8_t mode = 0;
	double rgb[3] = { 0, 0, 0 };
	bool found = false;

	if (!is_fill) {
		for (uint8_t i = 0; i < 2 && !found; i++)
			if (word_is(v, interp_names[i])) {
				mode = i;
				found = true;
			}
		if (!found)
			return bad(ps, st->name, v,
				   "is not an interpolation: nearest or "
				   "bilinear");
	} else {
		for (uint8_t i = 1; i < 5 && !found; i++)
			if (word_is(v, fill_names[i])) {
				mode = i;
				found = true;
			}
		if (!found && (parse_triple(v, rgb) ||
			       parse_real(v->p, v->len, &rgb[0]))) {
			if (!memchr(v->p, ',', v->len))
				rgb[1] = rgb[2] = rgb[0];
			for (unsigned c = 0; c < 3; c++)
				if (!(rgb[c] >= 0 && rgb[c] <= 255))
					return bad(ps, st->name, v,
						   "is not a fill value in "
						   "0..255");
			mode = ISPEC_FILL_CONSTANT;
			found = true;
		}
		if (!found)
			return bad(ps, st->name, v,
				   "is not a fill: V or V0,V1,V2 (0..255), "
				   "nearest, reflect, wrap or context");
	}
	if (at->col) {
		bool same =
			is_fill ? sp->fill == mode && !memcmp(sp->fill_rgb, rgb,
							      sizeof(rgb)) :
				  sp->interp == mode;

		if (!same)
			return bad(ps, st->name, v,
				   "differs from the %s given at column %u: "
				   "a spec's geometric stages share one",
				   is_fill ? "fill" : "interp", at->col);
		return 0;
	}
	*at = *v;
	if (is_fill) {
		sp->fill = mode;
		memcpy(sp->fill_rgb, rgb, sizeof(rgb));
	} else {
		sp->interp = mode;
	}
	return 0;
}

/* How many numbers follow w[i] (at most max), before a word that is not. */
static unsigned count_numbers(const struct word *w, unsigned i, unsigned n,
			      unsigned max)
{
	unsigned k = 0;
	double v;

	while (k < max && i + k < n && parse_real(w[i + k].p, w[i + k].len, &v))
		k++;
	return k;
}

/* Numbers w[i..i+k) into v, each in [lo, hi]; what they must be in why. */
static int geo_numbers(struct pstate *ps, const struct stage *st,
		       const struct word *w, unsigned k, double *v, double lo,
		       double hi, bool open, bool range, const char *why)
{
	for (unsigned j = 0; j < k; j++) {
		parse_real(w[j].p, w[j].len, &v[j]);
		if (open ? !(v[j] > lo && v[j] < hi) :
			   !(v[j] >= lo && v[j] <= hi))
			return bad(ps, st->name, &w[j], "is not %s", why);
		if (range && j % 2 == 1 && v[j - 1] > v[j])
			return bad(ps, st->name, &w[j],
				   "is below LO: the range is LO HI");
	}
	return 0;
}

/*
 * The numbers a key of rotate or affine takes: at least min, at most max,
 * each in [lo, hi] ((lo, hi) when open), pairs of them LO HI ranges when
 * range; one number where min is 1 is a symmetric range [-D, D], D in
 * 0..hi. geo_keys[k] fills geo_key_dst(af, k).
 */
struct geo_key {
	const char *name;
	uint8_t min, max;
	bool open, range;
	double lo, hi;
	const char *why, *why_one, *need;
};

static const struct geo_key geo_keys[] = {
	{ "rotate", 1, 2, false, true, -180, 180, "an angle in -180..180",
	  "an angle range D in 0..180", "D or LO HI" },
	{ "translate", 2, 2, false, false, 0, 1, "a fraction in 0..1", NULL,
	  "FX FY" },
	{ "scale", 2, 2, true, true, 0, 10, "a factor in (0, 10)", NULL,
	  "LO HI" },
	{ "zoom", 2, 2, true, true, 0, 10, "a factor in (0, 10)", NULL,
	  "LO HI" },
	{ "shear", 1, 4, false, true, -89, 89, "an angle in -89..89",
	  "an angle in -89..89", "SX, XLO XHI or XLO XHI YLO YHI" },
};

/* Where geo_keys[k]'s numbers go. */
static double *geo_key_dst(struct ispec_affine *af, unsigned k)
{
	double *const dst[] = { af->deg, af->translate, af->scale, af->zoom,
				af->shear };

	return dst[k];
}

/*
 * The numbers of key after w[at], into dst; *used gets how many. The
 * error names the word at fault and what it must be.
 */
static int geo_key_numbers(struct pstate *ps, const struct stage *st,
			   const struct word *w, unsigned at, unsigned n,
			   const struct geo_key *key, double *dst,
			   unsigned *used)
{
	unsigned k = count_numbers(w, at + 1, n, key->max);
	int err;

	if (k < key->min || (key->max == 4 && k == 3))
		return bad(ps, st->name, k ? &w[at + k] : &w[at], "needs %s",
			   key->need);
	if (k == 1 && key->min == 1) {
		err = geo_numbers(ps, st, &w[at + 1], 1, dst, 0, key->hi, false,
				  false, key->why_one);
		dst[1] = dst[0];
		dst[0] = -dst[0];
	} else {
		err = geo_numbers(ps, st, &w[at + 1], k, dst, key->lo, key->hi,
				  key->open, key->range, key->why);
	}
	*used = k;
	return err;
}

#define NKEYS (sizeof(geo_keys) / sizeof(geo_keys[0]))

/*
 * rotate D|LO HI, affine [KEY ARGS]..., trivialaugment, randaugment N M,
 * autoaugment imagenet; each then [interp I] [fill F] [p P] (p not for
 * policies, whose ops draw their own).
 */
static int p_geo(struct pstate *ps, const struct stage *st,
		 const struct word *w, unsigned n)
{
	struct ispec *sp = ps->sp;
	struct ispec_op op = { .kind = st->arg, .p = 1 };
	struct ispec_affine *af = &op.af;
	bool policy = st->arg >= ISPEC_OP_TRIVIAL, seen_p = false;
	unsigned i = 1, k, seen = 0;
	int err;

	if (sp->nops == ISPEC_MAX_OPS)
		return bad(ps, st->name, &w[0],
			   "is one stage too many (at most %d colour and "
			   "geometric stages)",
			   ISPEC_MAX_OPS);
	af->scale[0] = af->scale[1] = 1;
	af->zoom[0] = af->zoom[1] = 1;
	switch (st->arg) {
	case ISPEC_OP_ROTATE:
		err = geo_key_numbers(ps, st, w, 0, n, &geo_keys[0], op.a, &k);
		if (err)
			return err;
		i = 1 + k;
		break;
	case ISPEC_OP_RANDAUG:
		if (count_numbers(w, 1, n, 2) < 2)
			return bad(ps, st->name, &w[n > 1 ? n - 1 : 0],
				   "needs N M: how many ops (1..%d) and "
				   "their magnitude (0..30)",
				   ISPEC_MAX_OPS);
		parse_real(w[1].p, w[1].len, &op.a[0]);
		parse_real(w[2].p, w[2].len, &op.a[1]);
		sched_round(&w[1], &op.a[0]);
		sched_round(&w[2], &op.a[1]);
		if (!(op.a[0] >= 1 && op.a[0] <= ISPEC_MAX_OPS &&
		      op.a[0] == floor(op.a[0])))
			return bad(ps, st->name, &w[1],
				   "is not a count of ops in 1..%d",
				   ISPEC_MAX_OPS);
		if (!(op.a[1] >= 0 && op.a[1] <= 30 &&
		      op.a[1] == floor(op.a[1])))
			return bad(ps, st->name, &w[2],
				   "is not a magnitude in 0..30 (one of "
				   "RandAugment's 31 bins)");
		i = 3;
		break;
	case ISPEC_OP_AUTOAUG:
		if (n < 2 || !word_is(&w[1], "imagenet"))
			return bad(ps, st->name, &w[n > 1 ? 1 : 0],
				   "needs its policy: imagenet");
		op.a[0] = ISPEC_POLICY_IMAGENET;
		i = 2;
		break;
	default: break;
	}
	for (; i < n;) {
		const struct word *key = &w[i];
		bool mode = word_is(key, "interp") || word_is(key, "fill");

		if (mode || word_is(key, "p")) {
			if (i + 1 >= n)
				return bad(ps, st->name, key, "is incomplete");
			if (mode) {
				err = geo_mode(ps, st, key, &w[i + 1]);
				if (err)
					return err;
			} else if (policy || seen_p) {
				return bad(ps, st->name, key,
					   policy ? "is unexpected: a "
						    "policy's ops draw "
						    "their own" :
						    "is given twice");
			} else if (!parse_real(w[i + 1].p, w[i + 1].len,
					       &op.p) ||
				   !(op.p >= 0 && op.p <= 1)) {
				return bad(ps, st->name, &w[i + 1],
					   "is not a probability in 0..1");
			} else {
				seen_p = true;
			}
			i += 2;
			continue;
		}
		if (st->arg != ISPEC_OP_AFFINE)
			return bad(ps, st->name, key,
				   "is unexpected: expected interp I, fill F%s",
				   policy ? "" : " or p P");
		for (k = 0; k < NKEYS && !word_is(key, geo_keys[k].name); k++)
			;
		if (k == NKEYS)
			return bad(ps, st->name, key,
				   "is unexpected: expected rotate, translate, "
				   "scale, zoom, shear, interp, fill or p");
		if (seen & 1u << k)
			return bad(ps, st->name, key, "is given twice");
		seen |= 1u << k;
		err = geo_key_numbers(ps, st, w, i, n, &geo_keys[k],
				      geo_key_dst(af, k), &k);
		if (err)
			return err;
		i += 1 + k;
	}
	err = room_for_steps(ps, st, w, &op);
	if (err)
		return err;
	sp->ops[sp->nops++] = op;
	return 0;
}

/* ------------------------------------------------------------ schedules */

static int put_real(char *buf, size_t n, double v);

/* An epoch of a schedule's key: plain digits, 0..ISPEC_SCHED_EPOCH_MAX. */
static bool parse_epoch(const char *p, size_t len, uint32_t *out)
{
	return parse_uint(p, len, 6, 0, ISPEC_SCHED_EPOCH_MAX, out);
}

/*
 * The schedule in [p, p + len): VALUE@EPOCH..VALUE@EPOCH[..]...[/STEP].
 * Returns NULL, or what is wrong with it.
 */
static const char *sched_parse(const char *p, size_t len, struct sched *sc)
{
	const char *end = p + len, *at = NULL, *slash = NULL;

	memset(sc, 0, sizeof(*sc));
	for (const char *c = p; c < end; c++) {
		if (*c == '@')
			at = c;
		else if (*c == '/')
			slash = c;
	}
	if (slash && slash > at) {
		if (!parse_real(slash + 1, (size_t)(end - slash - 1),
				&sc->step) ||
		    !(sc->step > 0))
			return "has a step that is not a number > 0 after "
			       "its last '/'";
		end = slash;
	}
	while (p < end) {
		const char *dots = p, *a, *slash2;
		struct word vw;

		while (dots + 1 < end && !(dots[0] == '.' && dots[1] == '.'))
			dots++;
		if (dots + 1 >= end)
			dots = end;
		a = memchr(p, '@', (size_t)(dots - p));
		if (sc->nkeys == ISPEC_SCHED_KEYS)
			return "has too many keys (at most "
			       "8 VALUE@EPOCH)";
		if (!a)
			return "has a key without '@': keys are VALUE@EPOCH, "
			       "joined by ..";
		vw = (struct word){ p, (size_t)(a - p), 0, NULL, 0 };
		slash2 = memchr(p, '/', (size_t)(a - p));
		if (!(slash2 ? parse_frac(&vw, &sc->v[sc->nkeys]) :
			       parse_real(vw.p, vw.len, &sc->v[sc->nkeys])))
			return "has a key whose VALUE is not a number";
		if (!parse_epoch(a + 1, (size_t)(dots - a - 1),
				 &sc->ep[sc->nkeys]))
			return "has a key whose EPOCH is not a whole "
			       "number in 0..100000";
		if (sc->nkeys && sc->ep[sc->nkeys] <= sc->ep[sc->nkeys - 1])
			return "has keys whose epochs do not rise";
		sc->nkeys++;
		p = dots == end ? end : dots + 2;
		if (dots != end && p == end)
			return "ends with '..'";
	}
	if (sc->nkeys < 2)
		return "needs two keys or more: VALUE@EPOCH..VALUE@EPOCH";
	return NULL;
}

/*
 * A schedule's value at epoch e: the first key's value up to its epoch,
 * the last's from its epoch on, and between two keys the straight line
 * (as NumPy's interp), rounded to the nearest multiple of the step (ties
 * to even, as ffcv's get_resolution) and kept within the two keys.
 */
static double sched_at(const struct sched *sc, uint32_t e)
{
	unsigned k = 0;
	double v, lo, hi;

	if (e <= sc->ep[0])
		return sc->v[0];
	if (e >= sc->ep[sc->nkeys - 1])
		return sc->v[sc->nkeys - 1];
	while (sc->ep[k + 1] <= e)
		k++;
	if (e == sc->ep[k])
		return sc->v[k];
	v = (sc->v[k + 1] - sc->v[k]) / (double)(sc->ep[k + 1] - sc->ep[k]) *
		    (double)(e - sc->ep[k]) +
	    sc->v[k];
	if (sc->step > 0) {
		lo = fmin(sc->v[k], sc->v[k + 1]);
		hi = fmax(sc->v[k], sc->v[k + 1]);
		v = nearbyint(v / sc->step) * sc->step;
		v = v < lo ? lo : v > hi ? hi : v;
	}
	return v;
}

/*
 * Replace each word of a stage that holds a schedule (an '@' in it; in a
 * comma list, each element on its own) by its value at ps->epoch, as
 * text in ps->sub. The word keeps its column and remembers the schedule.
 */
static int sched_words(struct pstate *ps, const struct stage *st,
		       struct word *w, unsigned n)
{
	for (unsigned i = 1; i < n; i++) {
		const char *p = w[i].p, *end = w[i].p + w[i].len;
		char *out = ps->sub[i];
		size_t used = 0;

		if (!memchr(p, '@', w[i].len))
			continue;
		while (p <= end) {
			const char *c = memchr(p, ',', (size_t)(end - p));
			const char *why;
			struct sched *sc;

			if (!c)
				c = end;
			if (!memchr(p, '@', (size_t)(c - p))) {
				if (used + (size_t)(c - p) + 2 > SUB_MAX)
					return bad(ps, st->name, &w[i],
						   "is too long");
				memcpy(out + used, p, (size_t)(c - p));
				used += (size_t)(c - p);
			} else {
				if (ps->nsched == ISPEC_MAX_SCHED)
					return bad(ps, st->name, &w[i],
						   "is one schedule too many "
						   "(at most %d a spec)",
						   ISPEC_MAX_SCHED);
				sc = &ps->sched[ps->nsched];
				why = sched_parse(p, (size_t)(c - p), sc);
				if (why)
					return bad(ps, st->name, &w[i],
						   "is not a schedule: it %s",
						   why);
				ps->nsched++;
				if (used + 40 > SUB_MAX)
					return bad(ps, st->name, &w[i],
						   "is too long");
				used += (size_t)put_real(
					out + used, SUB_MAX - used,
					sched_at(sc, ps->epoch));
			}
			if (c < end)
				out[used++] = ',';
			p = c + 1;
		}
		out[used] = '\0';
		w[i].src = w[i].p;
		w[i].srclen = w[i].len;
		w[i].p = out;
		w[i].len = used;
	}
	return 0;
}

/* at final | at EPOCH: read every schedule at that epoch. */
static int p_at(struct pstate *ps, const struct stage *st, const struct word *w,
		unsigned n)
{
	if (n != 2)
		return bad(ps, st->name, &w[n > 2 ? 2 : 0],
			   "%s: at takes one epoch (0..%d) or final",
			   n > 2 ? "is unexpected" : "is incomplete",
			   ISPEC_SCHED_EPOCH_MAX);
	ps->has_at = true;
	ps->at_final = word_is(&w[1], "final");
	if (!ps->at_final && !parse_epoch(w[1].p, w[1].len, &ps->at))
		return bad(ps, st->name, &w[1],
			   "is not an epoch in 0..%d or final",
			   ISPEC_SCHED_EPOCH_MAX);
	return 0;
}

/* The last key's epoch of every schedule ps met; 0 for none. */
static uint32_t sched_end(const struct pstate *ps)
{
	uint32_t end = 0;

	for (unsigned i = 0; i < ps->nsched; i++) {
		uint32_t e = ps->sched[i].ep[ps->sched[i].nkeys - 1];

		end = e > end ? e : end;
	}
	return end;
}

/* Whether some schedule of ps has another value at e than at e - 1. */
static bool sched_moves(const struct pstate *ps, uint32_t e)
{
	for (unsigned i = 0; i < ps->nsched; i++)
		if (sched_at(&ps->sched[i], e) !=
		    sched_at(&ps->sched[i], e - 1))
			return true;
	return false;
}

static const struct stage stages[] = {
	{ "decode", R_DECODE, 0, p_decode },
	{ "rrc", R_GEOM, 0, p_rrc },
	{ "resize", R_GEOM, 0, p_resize },
	{ "center", R_CENTER, 0, p_center },
	{ "flip", R_FLIP, 0, p_flip },
	{ "vflip", R_VFLIP, 1, p_flip },
	{ "brightness", R_COLOR, ISPEC_OP_BRIGHTNESS, p_color },
	{ "contrast", R_COLOR, ISPEC_OP_CONTRAST, p_color },
	{ "saturation", R_COLOR, ISPEC_OP_SATURATION, p_color },
	{ "hue", R_COLOR, ISPEC_OP_HUE, p_color },
	{ "jitter", R_COLOR, ISPEC_OP_JITTER, p_color },
	{ "grayscale", R_COLOR, ISPEC_OP_GRAYSCALE, p_color },
	{ "invert", R_COLOR, ISPEC_OP_INVERT, p_color },
	{ "posterize", R_COLOR, ISPEC_OP_POSTERIZE, p_color },
	{ "solarize", R_COLOR, ISPEC_OP_SOLARIZE, p_color },
	{ "autocontrast", R_COLOR, ISPEC_OP_AUTOCONTRAST, p_color },
	{ "equalize", R_COLOR, ISPEC_OP_EQUALIZE, p_color },
	{ "sharpness", R_COLOR, ISPEC_OP_SHARPNESS, p_color },
	{ "gaussian_blur", R_COLOR, ISPEC_OP_BLUR, p_color },
	{ "channel_shift", R_COLOR, ISPEC_OP_CHANNEL_SHIFT, p_color },
	{ "rotate", R_COLOR, ISPEC_OP_ROTATE, p_geo },
	{ "affine", R_COLOR, ISPEC_OP_AFFINE, p_geo },
	{ "trivialaugment", R_COLOR, ISPEC_OP_TRIVIAL, p_geo },
	{ "randaugment", R_COLOR, ISPEC_OP_RANDAUG, p_geo },
	{ "autoaugment", R_COLOR, ISPEC_OP_AUTOAUG, p_geo },
	{ "normalize", R_NORM, 0, p_normalize },
	{ "erase", R_ERASE, 0, p_erase },
	{ "cutout", R_CUTOUT, 0, p_cutout },
	{ "u8", R_DTYPE, DT_U8, p_dtype },
	{ "f16", R_DTYPE, DT_F16, p_dtype },
	{ "f32", R_DTYPE, DT_F32, p_dtype },
	{ "nchw", R_LAYOUT, ISPEC_NCHW, p_layout },
	{ "nhwc", R_LAYOUT, ISPEC_NHWC, p_layout },
	{ "mixup", R_MIXUP, 0, p_alpha },
	{ "cutmix", R_CUTMIX, 0, p_alpha },
	{ "switch", R_SWITCH, 0, p_switch },
	{ "pair", R_PAIR, 0, p_pair },
	{ "label_smoothing", R_SMOOTH, 0, p_smooth },
	{ "classes", R_CLASSES, 0, p_classes },
	{ "at", R_AT, 0, p_at },
};

/* Edit distance between w and s, at most 3 (enough to spot a typo). */
static unsigned distance(const struct word *w, const char *s)
{
	size_t n = strlen(s), m = w->len > 40 ? 40 : w->len;
	unsigned row[41], prev;

	if (n > 40)
		return 3;
	for (size_t j = 0; j <= n; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= m; i++) {
		prev = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= n; j++) {
			unsigned cur = row[j];
			unsigned best = prev + (w->p[i - 1] != s[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			prev = cur;
			row[j] = best;
		}
	}
	return row[n] < 3 ? row[n] : 3;
}

static const struct stage *stage_find(const struct word *w)
{
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++)
		if (word_is(w, stages[i].name))
			return &stages[i];
	return NULL;
}

/* A word that is no stage: the closest name when one is near, and all. */
static int not_a_stage(struct pstate *ps, const struct word *w)
{
	char names[1024], near[64] = "";
	size_t at = 0;
	unsigned best = 3;

	names[0] = '\0';
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
		unsigned dist = distance(w, stages[i].name);

		if (dist < best && (dist <= 1 || w->len >= 5)) {
			best = dist;
			snprintf(near, sizeof(near), "did you mean \"%s\"? ",
				 stages[i].name);
		}
		if (at < sizeof(names))
			at += (size_t)snprintf(names + at, sizeof(names) - at,
					       "%s%s", i ? ", " : "",
					       stages[i].name);
	}
	return bad(ps, "spec", w, "is not a stage: %s(stages: %s)", near,
		   names);
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
	if (st->rank != R_COLOR &&
	    (st->rank == ps->rank || ps->seen[st->rank].col))
		return bad(ps, st->name, w,
			   "repeats a stage (first at column %u)",
			   ps->seen[st->rank].col);
	if (st->rank < ps->rank)
		return bad(ps, st->name, w, "must come before \"%.*s\"",
			   (int)(prev->len > WORD_SHOW_MAX ? WORD_SHOW_MAX :
							     prev->len),
			   prev->p);
	ps->rank = st->rank;
	if (!ps->seen[st->rank].col)
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
					(unsigned)(s - ps->text) + 1, NULL, 0 };
	}
	return n;
}

/* Parse text into sp, every schedule read at epoch; ps is the parser's. */
static int parse_text(struct pstate *ps, struct ispec *sp, const char *text,
		      uint32_t epoch, struct diag *d)
{
	const char *b = text;
	struct word w[MAX_WORDS + 1];
	unsigned n;
	int err;

	memset(ps, 0, sizeof(*ps));
	ps->sp = sp;
	ps->d = d;
	ps->text = text;
	ps->epoch = epoch;
	memset(sp, 0, sizeof(*sp));
	sp->dtype = DT_F32;
	sp->layout = ISPEC_NCHW;
	for (;;) {
		const char *e = strchr(b, '|');
		const struct stage *st;

		if (!e)
			e = b + strlen(b);
		n = split_words(ps, b, e, w);
		if (n == 0) {
			/* Point at the '|' next to the hole, or at the end. */
			struct word at = { e, *e ? 1 : 0,
					   (unsigned)(e - text) + 1, NULL, 0 };

			if (b > text) {
				at = (struct word){ b - 1, 1,
						    (unsigned)(b - text), NULL,
						    0 };
			}
			if (!*e && b == text) {
				at.col = 1;
				return bad(ps, "spec", &at,
					   "is empty: a spec starts with "
					   "decode");
			}
			return bad(ps, "spec", &at, "has an empty stage %s it",
				   b > text ? "after" : "before");
		}
		st = stage_find(&w[0]);
		if (!st)
			return not_a_stage(ps, &w[0]);
		if (n > MAX_WORDS)
			return bad(ps, st->name, &w[MAX_WORDS],
				   "is one word too many");
		err = sched_words(ps, st, w, n);
		if (!err)
			err = stage_order(ps, st, &w[0]);
		if (!err)
			err = st->parse(ps, st, w, n);
		if (err)
			return err;
		if (!*e)
			break;
		b = e + 1;
	}
	if (ps->want_center)
		return bad(ps, "resize", &ps->seen[R_GEOM],
			   "must be followed by center SIZE");
	if (!ps->have_geom)
		return bad(ps, "decode", &ps->seen[R_DECODE],
			   "ends the spec without a geometry (rrc SIZE, or "
			   "[resize SHORT |] center SIZE)");
	sp->size_max = sp->size;
	sp->sched = ps->nsched > 0;
	sp->sched_end = sched_end(ps);
	sp->at = ps->has_at;
	diag_clear(d);
	return 0;
}

/* The epoch an "at" stage of ps names, else epoch. */
static uint32_t at_epoch(const struct pstate *ps, uint32_t epoch)
{
	if (!ps->has_at)
		return epoch;
	return ps->at_final ? sched_end(ps) : ps->at;
}

int ispec_parse(struct ispec *sp, const char *text, struct diag *d)
{
	struct pstate ps, ps2;
	struct ispec tmp;
	uint32_t end, at, best, best_ep = 0;
	int err = parse_text(&ps, sp, text, 0, d);

	if (err || (!ps.nsched && !ps.has_at))
		return err;
	/*
	 * Every epoch up to the last key whose values differ from the
	 * epoch's before must parse: a ramp between two valid values can
	 * still cross a whole number that is not (an even kernel size).
	 */
	end = sched_end(&ps);
	best = sp->size;
	for (uint32_t e = 1; e <= end; e++) {
		if (!sched_moves(&ps, e))
			continue;
		err = parse_text(&ps2, &tmp, text, e, d);
		if (err) {
			memset(sp, 0, sizeof(*sp));
			return err;
		}
		if (tmp.size > best) {
			best = tmp.size;
			best_ep = e;
		}
	}
	at = at_epoch(&ps, 0);
	if (at) {
		err = parse_text(&ps2, sp, text, at, d);
		if (err)
			return err;
	}
	if (ps.has_at) {
		best = sp->size;
		best_ep = at;
	}
	sp->size_max = best;
	sp->size_max_epoch = best_ep;
	return 0;
}

int ispec_parse_epoch(struct ispec *sp, const char *text, uint32_t epoch,
		      struct diag *d)
{
	struct pstate ps;
	uint32_t at;
	int err = parse_text(&ps, sp, text, epoch, d);

	if (err || !ps.has_at)
		return err;
	at = at_epoch(&ps, epoch);
	return at == epoch ? 0 : parse_text(&ps, sp, text, at, d);
}

/*
 * The shortest decimal that reads back as exactly v, so that format and
 * parse round-trip and the text stays readable ("0.485", not 17 digits).
 */
static int put_real(char *buf, size_t n, double v)
{
	char tmp[40];

	/* A whole number as one ("1000", not "1e+03"). */
	if (v == floor(v) && fabs(v) < 1e15)
		return snprintf(buf, n, "%.0f", v);
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

/* A range: "D" when it is [-D, D], else "LO HI". */
static void put_range(struct out *o, const double r[2])
{
	char a[40], b[40];

	put_real(a, sizeof(a), r[1]);
	if (r[0] == -r[1]) {
		put(o, " %s", a);
		return;
	}
	put_real(b, sizeof(b), r[0]);
	put(o, " %s %s", b, a);
}

/* A geometric stage's arguments; the pass's interp and fill on the first. */
static void put_geo(struct out *o, const struct ispec *sp,
		    const struct ispec_op *op, bool first)
{
	const struct ispec_affine *af = &op->af;
	char a[40], b[40];

	switch (op->kind) {
	case ISPEC_OP_ROTATE: put_range(o, op->a); break;
	case ISPEC_OP_RANDAUG: put(o, " %.0f %.0f", op->a[0], op->a[1]); break;
	case ISPEC_OP_AUTOAUG: put(o, " imagenet"); break;
	case ISPEC_OP_AFFINE:
		if (af->deg[0] || af->deg[1]) {
			put(o, " rotate");
			put_range(o, af->deg);
		}
		if (af->translate[0] || af->translate[1]) {
			put_real(a, sizeof(a), af->translate[0]);
			put_real(b, sizeof(b), af->translate[1]);
			put(o, " translate %s %s", a, b);
		}
		for (unsigned k = 0; k < 2; k++) {
			const double *r = k ? af->zoom : af->scale;

			if (r[0] == 1 && r[1] == 1)
				continue;
			put_real(a, sizeof(a), r[0]);
			put_real(b, sizeof(b), r[1]);
			put(o, " %s %s %s", k ? "zoom" : "scale", a, b);
		}
		if (af->shear[2] || af->shear[3]) {
			put(o, " shear");
			for (unsigned k = 0; k < 4; k++) {
				put_real(a, sizeof(a), af->shear[k]);
				put(o, " %s", a);
			}
		} else if (af->shear[0] || af->shear[1]) {
			put(o, " shear");
			put_range(o, af->shear);
		}
		break;
	default: break;
	}
	if (first && sp->interp != ISPEC_INTERP_NEAREST)
		put(o, " interp %s", interp_names[sp->interp]);
	if (first && sp->fill != ISPEC_FILL_CONSTANT) {
		put(o, " fill %s", fill_names[sp->fill]);
	} else if (first &&
		   (sp->fill_rgb[0] || sp->fill_rgb[1] || sp->fill_rgb[2])) {
		put(o, " fill ");
		put_triple(o, sp->fill_rgb);
	}
	if (op->p != 1) {
		put_real(a, sizeof(a), op->p);
		put(o, " p %s", a);
	}
}

/* The batch stages: each one given, defaults left out. */
static void put_batch(struct out *o, const struct ispec_batch *b)
{
	char a[40];

	if (!b->on)
		return;
	if (b->mixup) {
		put_real(a, sizeof(a), b->mixup);
		put(o, " | mixup %s", a);
	}
	if (b->cutmix) {
		put_real(a, sizeof(a), b->cutmix);
		put(o, " | cutmix %s", a);
	}
	if (b->mixup && b->cutmix && b->cut_p != 0.5) {
		put_real(a, sizeof(a), b->cut_p);
		put(o, " | switch %s", a);
	}
	if (b->pair == ISPEC_PAIR_ROLL)
		put(o, " | pair roll");
	if (b->has_smoothing) {
		put_real(a, sizeof(a), b->smoothing);
		put(o, " | label_smoothing %s", a);
	}
	if (b->classes)
		put(o, " | classes %u", (unsigned)b->classes);
}

int ispec_format(const struct ispec *sp, char *buf, size_t n)
{
	struct out o = { buf, n, 0 };
	char a[40], b[40];
	bool geo_done = false;

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
	if (sp->has_vflip) {
		put_real(a, sizeof(a), sp->vflip);
		put(&o, " | vflip %s", a);
	}
	for (uint32_t i = 0; i < sp->nops; i++) {
		const struct ispec_op *op = &sp->ops[i];

		put(&o, " | %s", op_info[op->kind].name);
		if (ispec_op_geometric(op->kind)) {
			put_geo(&o, sp, op, !geo_done);
			geo_done = true;
			continue;
		}
		for (unsigned k = 0; k < op_nargs(op->kind); k++) {
			put_real(a, sizeof(a), op->a[k]);
			put(&o, " %s", a);
		}
		if (op->p != op_info[op->kind].p) {
			put_real(a, sizeof(a), op->p);
			put(&o, " p %s", a);
		}
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
	if (sp->has_erase) {
		put(&o, " | erase");
		if (sp->erase.p != 0.5) {
			put_real(a, sizeof(a), sp->erase.p);
			put(&o, " p %s", a);
		}
		if (memcmp(sp->erase.scale, erase_scale_def,
			   sizeof(erase_scale_def))) {
			put_real(a, sizeof(a), sp->erase.scale[0]);
			put_real(b, sizeof(b), sp->erase.scale[1]);
			put(&o, " scale %s %s", a, b);
		}
		if (memcmp(sp->erase.ratio, erase_ratio_def,
			   sizeof(erase_ratio_def))) {
			put_real(a, sizeof(a), sp->erase.ratio[0]);
			put_real(b, sizeof(b), sp->erase.ratio[1]);
			put(&o, " ratio %s %s", a, b);
		}
		if (sp->erase.value == ISPEC_ERASE_RANDOM) {
			put(&o, " value random");
		} else if (sp->erase.value == ISPEC_ERASE_RGB) {
			put(&o, " value ");
			put_triple(&o, sp->erase.rgb);
		}
	}
	if (sp->has_cutout) {
		put(&o, " | cutout %u", (unsigned)sp->cutout.size);
		if (sp->cutout.p != 1) {
			put_real(a, sizeof(a), sp->cutout.p);
			put(&o, " p %s", a);
		}
	}
	put(&o, " | %s | %s",
	    dtype_name(sp->dtype) ? dtype_name(sp->dtype) : "?",
	    sp->layout == ISPEC_NHWC ? "nhwc" : "nchw");
	put_batch(&o, &sp->batch);
	return (int)o.len;
}

const char *ispec_op_name(unsigned kind)
{
	return kind < sizeof(op_info) / sizeof(op_info[0]) ?
		       op_info[kind].name :
		       NULL;
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
