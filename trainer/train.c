/*
 * train.c - loader-train, the reference consumer: an MLP (784-256-128-10,
 * see mlp.h) trained on Fashion-MNIST batches streamed from loaderd
 * through the public client API, evaluated on the test split after
 * every epoch.
 *
 * It is also the end-to-end measure of the loader: per epoch it reports
 * throughput and the data stall (time blocked in loader_next() over the
 * epoch's wall time), and with --simulate-step-ms it replaces the
 * compute by a busy-wait of fixed length per batch, an accelerator
 * stand-in as in MLPerf Storage, and reports the accelerator
 * utilisation (AU = compute time / wall time).
 *
 * Output: one line per epoch (unless --quiet), then exactly one summary
 * line of key=value pairs for scripts:
 *   test_accuracy= best_accuracy= epochs= samples= seconds=
 *   samples_per_s= stall_pct= au_pct= target= reached=
 * Every key is always present. Values that do not apply are "na":
 * au_pct without --simulate-step-ms; the accuracies (and reached) with
 * it, since nothing is trained then. seconds and the rates cover the
 * training epochs only, not the evaluations.
 *
 * Exit status: 0 when the target accuracy was reached at some epoch
 * (or --target 0, or with --simulate-step-ms), 1 when training ended
 * below the target, 2 on errors.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "loader.h"
#include "mlp.h"

/*
 * OpenBLAS's cblas.h declares this, netlib's does not; a repeated
 * declaration is harmless either way.
 */
void openblas_set_num_threads(int num_threads);

enum {
	EXIT_REACHED = 0,
	EXIT_BELOW = 1,
	EXIT_ERROR = 2,
};

#define IMG_SIDE   28
#define IMG_PIXELS (IMG_SIDE * IMG_SIDE)
#define NCLASSES   10
#define OUTPUTS	   "image:unit,label"

struct cfg {
	const char *data;
	const char *socket;
	uint64_t epochs, batch, seed, threads, blas_threads, timeout_ms;
	double lr, momentum, weight_decay, lr_decay, step_ms, target;
	bool early_stop, quiet, sleep;
};

/*
 * One table drives parsing, defaults, range checks and --help, so that
 * they cannot drift apart. getopt_long does the parsing: this program
 * uses libloader's public header and the C library only, so that it can
 * be copied out of the tree as the start of another consumer.
 */
enum arg_kind { ARG_FLAG, ARG_STR, ARG_U64, ARG_F64 };

struct arg {
	const char *name; /* long option, without "--" */
	enum arg_kind kind;
	size_t offset;	 /* of the value in struct cfg */
	const char *def; /* default as text; NULL for none */
	const char *meta;
	const char *help;
	double min, max; /* numbers: allowed range, checked when min < max */
};

#define CFG(f) offsetof(struct cfg, f)

static const struct arg args[] = {
	{ "data", ARG_STR, CFG(data), NULL, "DIR",
	  "dataset directory holding train/ and test/ (loaderctl pack)", 0, 0 },
	{ "socket", ARG_STR, CFG(socket), NULL, "PATH",
	  "daemon socket (default: $LOADERD_SOCKET, then the library's)", 0,
	  0 },
	{ "epochs", ARG_U64, CFG(epochs), "30", "N", "epochs to train at most",
	  1, UINT32_MAX },
	{ "early-stop", ARG_FLAG, CFG(early_stop), NULL, NULL,
	  "stop after the first epoch that reaches --target", 0, 0 },
	{ "batch", ARG_U64, CFG(batch), "128", "N", "samples per batch", 1,
	  65536 },
	{ "lr", ARG_F64, CFG(lr), "0.05", "RATE",
	  "learning rate of the first epoch", 1e-9, 10 },
	{ "lr-decay", ARG_F64, CFG(lr_decay), "0.85", "G",
	  "learning rate factor per epoch (1: constant)", 1e-6, 1 },
	{ "momentum", ARG_F64, CFG(momentum), "0.9", "M",
	  "SGD momentum (0: plain SGD)", 0, 0.999 },
	{ "weight-decay", ARG_F64, CFG(weight_decay), "0", "W",
	  "L2 weight decay on the weights", 0, 1 },
	{ "seed", ARG_U64, CFG(seed), "1", "N",
	  "seed of the weights and the sample order", 0, 0 },
	{ "threads", ARG_U64, CFG(threads), "0", "N",
	  "decode threads the daemon gives the streams (0: its own)", 0, 4096 },
	{ "blas-threads", ARG_U64, CFG(blas_threads), "1", "N",
	  "OpenBLAS threads; more than the free cores fight the daemon", 1,
	  1024 },
	{ "timeout-ms", ARG_U64, CFG(timeout_ms), "60000", "MS",
	  "longest wait for one batch before giving up (0: for ever)", 0,
	  INT_MAX },
	{ "simulate-step-ms", ARG_F64, CFG(step_ms), "0", "T",
	  "busy-wait T ms per batch instead of training; report AU", 0, 1e6 },
	{ "simulate-sleep", ARG_FLAG, CFG(sleep), NULL, NULL,
	  "with --simulate-step-ms: sleep instead, leaving the core to others",
	  0, 0 },
	{ "target", ARG_F64, CFG(target), "0.8833", "ACC",
	  "test accuracy to reach (0: none)", 0, 1 },
	{ "quiet", ARG_FLAG, CFG(quiet), NULL, NULL,
	  "print only the summary line", 0, 0 },
};

#define NARGS (sizeof(args) / sizeof(args[0]))

/* Store text v as the value of option a in c. Returns 0 or -EINVAL. */
static int set_arg(struct cfg *c, const struct arg *a, const char *v)
{
	void *p = (char *)c + a->offset;
	char *end;
	double x;

	errno = 0;
	switch (a->kind) {
	case ARG_FLAG: *(bool *)p = true; return 0;
	case ARG_STR: *(const char **)p = v; return 0;
	case ARG_U64: {
		unsigned long long u = strtoull(v, &end, 10);

		/* strtoull takes "-1" as ULLONG_MAX: refuse any sign. */
		if (errno || end == v || *end || strchr(v, '-'))
			goto bad;
		x = (double)u;
		if (a->min < a->max && (x < a->min || x > a->max))
			goto range;
		*(uint64_t *)p = u;
		return 0;
	}
	case ARG_F64:
		x = strtod(v, &end);
		if (errno || end == v || *end || isnan(x))
			goto bad;
		if (a->min < a->max && (x < a->min || x > a->max))
			goto range;
		*(double *)p = x;
		return 0;
	}
bad:
	fprintf(stderr, "loader-train: --%s: \"%s\" is not a%s number\n",
		a->name, v, a->kind == ARG_U64 ? " whole" : "");
	return -EINVAL;
range:
	fprintf(stderr, "loader-train: --%s: %s is outside [%.15g, %.15g]\n",
		a->name, v, a->min, a->max);
	return -EINVAL;
}

/*
 * Parse argv into c; *help is set by -h/--help. Returns 0, or -EINVAL
 * after printing why.
 */
static int parse_opts(struct cfg *c, int argc, char **argv, int *help)
{
	struct option lo[NARGS + 2];
	int k;

	*help = 0;
	for (size_t i = 0; i < NARGS; i++) {
		lo[i] = (struct option){ args[i].name,
					 args[i].kind == ARG_FLAG ?
						 no_argument :
						 required_argument,
					 NULL, 256 + (int)i };
		if (args[i].def && set_arg(c, &args[i], args[i].def))
			return -EINVAL;
	}
	lo[NARGS] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[NARGS + 1] = (struct option){ NULL, 0, NULL, 0 };
	opterr = 0;
	while ((k = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		if (k == 'h') {
			*help = 1;
		} else if (k >= 256) {
			if (set_arg(c, &args[k - 256], optarg))
				return -EINVAL;
		} else {
			fprintf(stderr, "loader-train: %s: %s\n",
				argv[optind - 1],
				k == ':' ? "needs a value" : "unknown option");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "loader-train: unexpected argument \"%s\"\n",
			argv[optind]);
		return -EINVAL;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: loader-train --data DIR [OPTIONS]\n"
		"Train an MLP (784-256-128-10, SGD with momentum) on a Fashion-MNIST\n"
		"dataset streamed from loaderd; evaluate on DIR/test after every epoch.\n"
		"\nOptions:\n");
	for (size_t i = 0; i < NARGS; i++) {
		char left[40];

		snprintf(left, sizeof(left), "--%s%s%s", args[i].name,
			 args[i].meta ? " " : "",
			 args[i].meta ? args[i].meta : "");
		fprintf(f, "  %-24s %s", left, args[i].help);
		if (args[i].def)
			fprintf(f, " (default %s)", args[i].def);
		fputc('\n', f);
	}
	fprintf(f, "  %-24s %s\n", "-h, --help", "print this help");
	fprintf(f,
		"\nThe last line printed is a summary of key=value pairs:\n"
		"  test_accuracy best_accuracy epochs samples seconds samples_per_s\n"
		"  stall_pct au_pct target reached  (\"na\" where one does not apply)\n"
		"Exit status: 0 target reached (or no target, or --simulate-step-ms),\n"
		"1 finished below the target, 2 error.\n");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * The accelerator stand-in spins by default, as a host thread polling for
 * its accelerator's completion does, taking a core whenever the scheduler
 * gives it one (the step ends on the clock, run or not). With
 * --simulate-sleep it sleeps, as a host thread blocked in a synchronous
 * wait does, and leaves its core to the loader: it sleeps until
 * STEP_SPIN_S before the end and spins the rest, since a wake-up comes
 * late by tens of microseconds, which would lengthen every step.
 */
#define STEP_SPIN_S 100e-6

static void busy_wait(double seconds, bool sleep)
{
	double end = now() + seconds;

	if (sleep && seconds > STEP_SPIN_S) {
		double nap = end - STEP_SPIN_S;
		struct timespec ts = { .tv_sec = (time_t)nap,
				       .tv_nsec = (long)((nap - floor(nap)) *
							 1e9) };

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
				       NULL) == EINTR)
			;
	}
	while (now() < end)
		;
}

/* Report a loader failure with the daemon's reason, if it gave one. */
static void loader_fail(const char *what, int err, const char *reason)
{
	if (reason && *reason)
		fprintf(stderr, "loader-train: %s: %s (%s)\n", what,
			loader_strerror(err), reason);
	else
		fprintf(stderr, "loader-train: %s: %s\n", what,
			loader_strerror(err));
}

static const char *dtype_name(uint32_t dt)
{
	static const char *const names[] = {
		[LOADER_DTYPE_U8] = "u8",   [LOADER_DTYPE_I8] = "i8",
		[LOADER_DTYPE_U16] = "u16", [LOADER_DTYPE_I16] = "i16",
		[LOADER_DTYPE_U32] = "u32", [LOADER_DTYPE_I32] = "i32",
		[LOADER_DTYPE_U64] = "u64", [LOADER_DTYPE_I64] = "i64",
		[LOADER_DTYPE_F16] = "f16", [LOADER_DTYPE_F32] = "f32",
		[LOADER_DTYPE_F64] = "f64",
	};

	if (dt < sizeof(names) / sizeof(names[0]) && names[dt])
		return names[dt];
	return "?";
}

/* "f32 [128,28,28]" */
static void describe(const struct loader_tensor *t, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s [", dtype_name(t->dtype));

	for (uint32_t i = 0; i < t->ndim && i < LOADER_MAX_DIMS && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64,
				      i ? "," : "", t->shape[i]);
	if (n < len)
		snprintf(buf + n, len - n, "]");
}

static const struct loader_tensor *find_output(const struct loader_batch *b,
					       const char *name)
{
	for (uint32_t i = 0; i < b->noutputs && i < LOADER_MAX_OUTPUTS; i++)
		if (b->out[i].name && !strcmp(b->out[i].name, name))
			return &b->out[i];
	return NULL;
}

/* Elements per sample: the product of the dimensions after the first. */
static uint64_t per_sample(const struct loader_tensor *t)
{
	uint64_t n = 1;

	for (uint32_t i = 1; i < t->ndim && i < LOADER_MAX_DIMS; i++)
		n = t->shape[i] && n > UINT64_MAX / t->shape[i] ?
			    UINT64_MAX :
			    n * t->shape[i];
	return n;
}

/*
 * Check that batch b carries what the net expects, f32 images of 28x28
 * in [0,1] (u8 as "image:unit") and int64 labels, one per sample, and
 * point x and y at them. The batch lives in memory the daemon writes:
 * every size is checked before anything is read. Returns 0 or
 * LOADER_ESCHEMA after printing why.
 */
static int batch_views(const struct loader_batch *b, uint32_t max,
		       const float **x, const int64_t **y)
{
	const struct loader_tensor *img = find_output(b, "image");
	const struct loader_tensor *lab = find_output(b, "label");
	char gi[96] = "missing", gl[96] = "missing";

	if (img)
		describe(img, gi, sizeof(gi));
	if (lab)
		describe(lab, gl, sizeof(gl));
	if (!img || !lab || b->count > max || img->dtype != LOADER_DTYPE_F32 ||
	    img->ndim < 2 || img->ndim > LOADER_MAX_DIMS ||
	    img->shape[0] != b->count || per_sample(img) != IMG_PIXELS ||
	    img->bytes < (size_t)b->count * IMG_PIXELS * sizeof(float) ||
	    (uintptr_t)img->data % sizeof(float) ||
	    lab->dtype != LOADER_DTYPE_I64 || lab->ndim < 1 ||
	    lab->ndim > LOADER_MAX_DIMS || lab->shape[0] != b->count ||
	    per_sample(lab) != 1 ||
	    lab->bytes < (size_t)b->count * sizeof(int64_t) ||
	    (uintptr_t)lab->data % sizeof(int64_t)) {
		fprintf(stderr,
			"loader-train: the dataset is not 28x28 u8 images with int64 labels:\n"
			"  want image f32 [n,28,28] (from \"image:unit\") and label i64 [n],"
			" n <= %" PRIu32 "\n"
			"  got  image %s and label %s, n = %" PRIu32 "\n",
			max, gi, gl, b->count);
		return LOADER_ESCHEMA;
	}
	*x = img->data;
	*y = lab->data;
	return 0;
}

static int join(char *buf, size_t len, const char *dir, const char *sub)
{
	int n = snprintf(buf, len, "%s/%s", dir, sub);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void stream_opts(const struct cfg *c, struct loader_opts *lo)
{
	*lo = (struct loader_opts)LOADER_OPTS_INIT;
	lo->socket_path = c->socket;
	lo->outputs = OUTPUTS;
	lo->batch_size = (uint32_t)c->batch;
	lo->seed = c->seed;
	lo->threads = (uint32_t)c->threads;
}

static int next_timeout(const struct cfg *c)
{
	return c->timeout_ms ? (int)c->timeout_ms : -1;
}

/*
 * Accuracy of m on the dataset in dir: one sequential pass over a
 * stream of its own. Returns 0 and *acc, or a negative code after
 * printing why.
 */
static int evaluate(const struct cfg *c, struct mlp *m, const char *dir,
		    double *acc, double *loss)
{
	struct loader_opts lo;
	struct loader_batch b;
	struct loader *l = NULL;
	char errbuf[256] = "";
	uint64_t total = 0, right = 0;
	double lsum = 0.0;
	const float *x;
	const int64_t *y;
	uint32_t ok;
	float bl;
	int err;

	stream_opts(c, &lo);
	lo.order = LOADER_ORDER_SEQUENTIAL;
	lo.epochs = 1;
	err = loader_open(&l, dir, &lo, errbuf, sizeof(errbuf));
	if (err) {
		loader_fail("open test stream", err, errbuf);
		return err;
	}
	for (;;) {
		err = loader_next(l, &b, next_timeout(c));
		if (err == LOADER_EEND) {
			err = 0;
			break;
		}
		if (err) {
			loader_fail("test batch", err, loader_reason(l));
			goto out;
		}
		err = b.count ? batch_views(&b, (uint32_t)c->batch, &x, &y) : 0;
		if (!err && b.count) {
			err = mlp_eval(m, x, y, b.count, &ok, &bl);
			if (err)
				fprintf(stderr,
					"loader-train: test batch %" PRIu64
					": %s (a label outside 0..9?)\n",
					b.seq, strerror(-err));
		}
		if (err) {
			loader_release(l, &b);
			goto out;
		}
		right += ok;
		lsum += (double)bl * b.count;
		total += b.count;
		err = loader_release(l, &b);
		if (err) {
			loader_fail("release test batch", err,
				    loader_reason(l));
			goto out;
		}
	}
	if (!total) {
		fprintf(stderr, "loader-train: the test split is empty\n");
		err = LOADER_ESCHEMA;
		goto out;
	}
	*acc = (double)right / (double)total;
	*loss = lsum / (double)total;
out:
	loader_close(l);
	return err;
}

/* What one epoch of the train stream did. */
struct epoch {
	bool open;
	uint32_t epoch;
	uint64_t samples;
	double loss; /* summed over samples */
	double start, wait, compute;
};

/* Totals over the epochs trained. */
struct run {
	uint32_t epochs;
	uint64_t samples;
	double wall, wait, compute;
	double acc, best;
	bool reached, stop;
};

/*
 * Close epoch e at time end: evaluate (unless simulating), print its
 * line and fold it into r. Returns 0 or a negative code.
 */
static int end_epoch(const struct cfg *c, struct mlp *m, const char *test,
		     struct epoch *e, double end, struct run *r)
{
	double wall = end - e->start, acc = 0.0, tloss = 0.0;
	double rate, stall;
	int err;

	e->open = false;
	if (wall <= 0.0)
		wall = 1e-9;
	rate = (double)e->samples / wall;
	stall = 100.0 * e->wait / wall;
	r->epochs++;
	r->samples += e->samples;
	r->wall += wall;
	r->wait += e->wait;
	r->compute += e->compute;

	if (c->step_ms > 0.0) {
		if (!c->quiet)
			printf("epoch %" PRIu32 "/%" PRIu64
			       " samples/s %.0f stall %.1f%% au %.1f%%"
			       " time %.2fs\n",
			       e->epoch + 1, c->epochs, rate, stall,
			       100.0 * e->compute / wall, wall);
		return 0;
	}
	err = evaluate(c, m, test, &acc, &tloss);
	if (err)
		return err;
	r->acc = acc;
	if (acc > r->best)
		r->best = acc;
	if (c->target > 0.0 && acc >= c->target) {
		r->reached = true;
		if (c->early_stop)
			r->stop = true;
	}
	if (!c->quiet)
		printf("epoch %" PRIu32 "/%" PRIu64
		       " loss %.4f test_loss %.4f test_acc %.4f"
		       " samples/s %.0f stall %.1f%% time %.2fs\n",
		       e->epoch + 1, c->epochs,
		       e->samples ? e->loss / (double)e->samples : 0.0, tloss,
		       acc, rate, stall, wall);
	fflush(stdout);
	return 0;
}

static void summary(const struct cfg *c, const struct run *r)
{
	bool sim = c->step_ms > 0.0;
	double wall = r->wall > 0.0 ? r->wall : 1e-9;
	char acc[32] = "na", best[32] = "na", au[32] = "na", hit[8] = "na";

	if (!sim) {
		snprintf(acc, sizeof(acc), "%.4f", r->acc);
		snprintf(best, sizeof(best), "%.4f", r->best);
		if (c->target > 0.0)
			snprintf(hit, sizeof(hit), "%d", r->reached);
	} else {
		snprintf(au, sizeof(au), "%.2f", 100.0 * r->compute / wall);
	}
	printf("test_accuracy=%s best_accuracy=%s epochs=%" PRIu32
	       " samples=%" PRIu64 " seconds=%.2f samples_per_s=%.0f"
	       " stall_pct=%.2f au_pct=%s target=%.4f reached=%s\n",
	       acc, best, r->epochs, r->samples, r->wall,
	       (double)r->samples / wall, 100.0 * r->wait / wall, au, c->target,
	       hit);
	fflush(stdout);
}

/*
 * Train over the whole train stream. The stream covers every epoch; an
 * epoch ends after its batches_per_epoch-th batch when the library
 * knows that number, else when a batch of the next epoch arrives, and
 * in any case at LOADER_EEND. Returns 0 or a negative code.
 */
static int train(const struct cfg *c, struct mlp *m, const char *trainp,
		 const char *testp, struct run *r)
{
	struct loader_opts lo;
	struct loader_batch b;
	struct loader *l = NULL;
	struct epoch e = { 0 };
	char errbuf[256] = "";
	uint64_t bpe = 0;
	uint32_t first = 0;
	bool last;
	const float *x;
	const int64_t *y;
	double t0, t1, tc, lr = c->lr;
	float loss = 0.0f;
	int err;

	stream_opts(c, &lo);
	lo.order = LOADER_ORDER_RANDOM;
	lo.epochs = (uint32_t)c->epochs;
	lo.drop_last = 0;
	err = loader_open(&l, trainp, &lo, errbuf, sizeof(errbuf));
	if (err) {
		loader_fail("open train stream", err, errbuf);
		return err;
	}
	bpe = loader_batches_per_epoch(l);

	for (;;) {
		t0 = now();
		err = loader_next(l, &b, next_timeout(c));
		t1 = now();
		if (err == LOADER_EEND) {
			err = 0;
			break;
		}
		if (err) {
			loader_fail("train batch", err, loader_reason(l));
			goto out;
		}
		if (e.open && b.epoch != e.epoch) {
			err = end_epoch(c, m, testp, &e, t0, r);
			if (err || r->stop) {
				loader_release(l, &b);
				goto out;
			}
		}
		if (!e.open) {
			if (!r->epochs)
				first = b.epoch;
			e = (struct epoch){ .open = true,
					    .epoch = b.epoch,
					    .start = t0 };
			lr = c->lr *
			     pow(c->lr_decay, (double)(b.epoch - first));
		}
		e.wait += t1 - t0;

		err = b.count ? batch_views(&b, (uint32_t)c->batch, &x, &y) : 0;
		if (!err && b.count) {
			tc = now();
			if (c->step_ms > 0.0)
				busy_wait(c->step_ms * 1e-3, c->sleep);
			else
				err = mlp_train_step(m, x, y, b.count,
						     (float)lr, &loss);
			e.compute += now() - tc;
			if (err)
				fprintf(stderr,
					"loader-train: train batch %" PRIu64
					": %s (a label outside 0..9?)\n",
					b.seq, strerror(-err));
			else if (m)
				e.loss += (double)loss * b.count;
		}
		if (err) {
			loader_release(l, &b);
			goto out;
		}
		e.samples += b.count;
		/* Only b's own fields, not what it points at, outlive this. */
		last = bpe && b.index + 1 >= bpe;
		err = loader_release(l, &b);
		if (err) {
			loader_fail("release train batch", err,
				    loader_reason(l));
			goto out;
		}
		if (last) {
			err = end_epoch(c, m, testp, &e, now(), r);
			if (err || r->stop)
				goto out;
		}
	}
	/* A stream whose last epoch ran short of bpe (or bpe unknown). */
	if (e.open)
		err = end_epoch(c, m, testp, &e, now(), r);
out:
	loader_close(l);
	return err;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { IMG_PIXELS, 256, 128, NCLASSES };
	struct cfg c = { 0 };
	struct run r = { 0 };
	struct mlp *m = NULL;
	char trainp[4096], testp[4096];
	int err, help, status = EXIT_ERROR;

	if (parse_opts(&c, argc, argv, &help)) {
		fprintf(stderr, "Try 'loader-train --help'.\n");
		return EXIT_ERROR;
	}
	if (help) {
		usage(stdout);
		return EXIT_REACHED;
	}
	if (!c.data) {
		fprintf(stderr,
			"loader-train: --data DIR is required; try 'loader-train --help'.\n");
		return EXIT_ERROR;
	}
	if (join(trainp, sizeof(trainp), c.data, "train") ||
	    join(testp, sizeof(testp), c.data, "test")) {
		fprintf(stderr, "loader-train: --data: path too long\n");
		return EXIT_ERROR;
	}
	/*
	 * OpenBLAS starts a thread per core by default; on a small machine
	 * they compete with the daemon's decode threads for the same cores.
	 */
	openblas_set_num_threads((int)c.blas_threads);

	if (c.step_ms <= 0.0) {
		err = mlp_new(&m, sizes, sizeof(sizes) / sizeof(sizes[0]),
			      (uint32_t)c.batch, c.seed);
		if (!err)
			err = mlp_set_optim(m, (float)c.momentum,
					    (float)c.weight_decay);
		if (err) {
			fprintf(stderr, "loader-train: model: %s\n",
				strerror(-err));
			goto out;
		}
	}
	err = train(&c, m, trainp, testp, &r);
	if (err)
		goto out;
	summary(&c, &r);
	if (c.step_ms > 0.0 || c.target <= 0.0 || r.reached)
		status = EXIT_REACHED;
	else
		status = EXIT_BELOW;
out:
	mlp_free(m);
	return status;
}
