/*
 * resize_bench.c - what the resampler costs per image, and a raw mode
 * through which bench/resize_pil.py compares it with Pillow.
 *
 *   resize_bench [runs]
 *	For crops of the sizes the image pipeline sees, resized to 224x224
 *	with 3 and 1 channels: the time per image (building the plan in
 *	preallocated memory, then running it) of the portable loops and of
 *	the default ones (AVX2 where the processor has it), measured in
 *	alternating runs of about 20 ms: the median of each, the best of
 *	the default, the ratio of the medians, and the median time of
 *	building the plan alone. Run it on an idle machine: other load
 *	inflates the medians (the ratio less so).
 *
 *   resize_bench --raw in_w in_h ch x0 y0 x1 y1 out_w out_h flags
 *	Read in_h rows of in_w * ch bytes on stdin, resize the box (x0, y0,
 *	x1, y1) to out_w x out_h with rsz_plan_box() flags (1 mirror, 2
 *	scalar) and write the out_h rows of out_w * ch bytes to stdout.
 *
 * Exit status 0, or 1 with a message on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resize.h"

#define OUT_SIDE 224

static const struct bcase {
	const char *name;
	uint32_t in_w, in_h;
	double box[4]; /* all zero: the whole image */
	unsigned flags;
} cases[] = {
	{ "375x500 -> 224x224", 375, 500, { 0 }, 0 },
	{ "448x448 -> 224x224", 448, 448, { 0 }, 0 },
	{ "300x260 -> 224x224", 300, 260, { 0 }, 0 },
	{ "600x600 -> 224x224", 600, 600, { 0 }, 0 },
	{ "500x375 box, mirror",
	  500,
	  375,
	  { 37.5, 20.25, 437.5, 355.75 },
	  RSZ_MIRROR },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		p[i] = (uint8_t)(seed >> 24);
	}
}

struct work {
	const struct bcase *c;
	unsigned ch, flags;
	const uint8_t *src;
	uint8_t *dst;
	void *mem, *scratch;
	size_t cap;
};

/* One image: the plan, then the resize, as a pipeline worker does. */
static int one(const struct work *w, bool run)
{
	const struct bcase *c = w->c;
	const double *box = c->box[2] > 0 ? c->box : NULL;
	struct rsz_plan *p;
	int err;

	err = rsz_plan_box(w->mem, w->cap, c->in_w, c->in_h, box, OUT_SIDE,
			   OUT_SIDE, c->flags | w->flags, &p);
	if (err || !run)
		return err;
	return rsz_run(p, w->src, (size_t)c->in_w * w->ch, w->dst,
		       (size_t)OUT_SIDE * w->ch, w->ch, w->scratch);
}

/* Nanoseconds per image over n images. */
static double timed(const struct work *w, unsigned n, bool run)
{
	double t0 = now_ns();

	for (unsigned i = 0; i < n; i++)
		if (one(w, run)) {
			fprintf(stderr, "resize_bench: resize failed\n");
			exit(1);
		}
	return (now_ns() - t0) / n;
}

static int bench(unsigned runs)
{
	/* Room for every case: one plan and one scratch, sized once. */
	size_t cap = rsz_plan_bytes(600, 600, OUT_SIDE, OUT_SIDE);
	size_t scap = (size_t)OUT_SIDE * 4 * 16 * 4;
	void *mem = malloc(cap), *scratch = malloc(scap);
	uint8_t *src = malloc((size_t)600 * 600 * 3);
	uint8_t *dst = malloc((size_t)OUT_SIDE * OUT_SIDE * 3);
	double *t = calloc((size_t)runs * 3, sizeof(*t));

	if (!mem || !scratch || !src || !dst || !t) {
		fprintf(stderr, "resize_bench: out of memory\n");
		return 1;
	}
	fill_random(src, (size_t)600 * 600 * 3, 0x2545f4914f6cdd1dull);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
	if (!__builtin_cpu_supports("avx2"))
		printf("no AVX2 here: both columns time the portable loops\n");
#endif
	printf("%-22s %2s %10s %10s %10s %8s %8s\n", "image", "ch", "scalar ns",
	       "default ns", "(best)", "speedup", "plan ns");
	for (size_t ci = 0; ci < NCASES; ci++)
		for (unsigned k = 0; k < 2; k++) {
			unsigned ch = k ? 1 : 3;
			struct work ws = { &cases[ci], ch,  RSZ_SCALAR, src,
					   dst,	       mem, scratch,	cap };
			struct work wd = ws;
			struct rsz_plan *p;
			unsigned n;

			wd.flags = 0;
			if (rsz_plan_box(mem, cap, ws.c->in_w, ws.c->in_h,
					 ws.c->box[2] > 0 ? ws.c->box : NULL,
					 OUT_SIDE, OUT_SIDE, 0, &p) ||
			    rsz_scratch_size(p, ch) > scap) {
				fprintf(stderr, "resize_bench: bad plan\n");
				return 1;
			}
			/* Calibrate to about 20 ms a run, then interleave. */
			n = (unsigned)(20e6 / timed(&wd, 20, true)) + 1;
			for (unsigned r = 0; r < runs; r++) {
				t[r] = timed(&ws, n, true);
				t[runs + r] = timed(&wd, n, true);
				t[2 * runs + r] = timed(&wd, n, false);
			}
			for (unsigned m = 0; m < 3; m++)
				qsort(t + m * runs, runs, sizeof(*t),
				      cmp_double);
			printf("%-22s %2u %10.0f %10.0f %10.0f %7.2fx %8.0f\n",
			       ws.c->name, ch, t[runs / 2], t[runs + runs / 2],
			       t[runs], t[runs / 2] / t[runs + runs / 2],
			       t[2 * runs + runs / 2]);
			fflush(stdout);
		}
	free(mem);
	free(scratch);
	free(src);
	free(dst);
	free(t);
	return 0;
}

static int raw(char **argv)
{
	uint32_t in_w = (uint32_t)strtoul(argv[0], NULL, 10);
	uint32_t in_h = (uint32_t)strtoul(argv[1], NULL, 10);
	unsigned ch = (unsigned)strtoul(argv[2], NULL, 10);
	double box[4];
	uint32_t out_w = (uint32_t)strtoul(argv[7], NULL, 10);
	uint32_t out_h = (uint32_t)strtoul(argv[8], NULL, 10);
	unsigned flags = (unsigned)strtoul(argv[9], NULL, 10);
	size_t cap = rsz_plan_bytes(in_w, in_h, out_w, out_h);
	size_t in = (size_t)in_w * in_h * ch, out = (size_t)out_w * out_h * ch;
	void *mem = malloc(cap ? cap : 1), *scratch = NULL;
	uint8_t *src = malloc(in ? in : 1), *dst = malloc(out ? out : 1);
	struct rsz_plan *p;
	int err;

	for (int i = 0; i < 4; i++)
		box[i] = strtod(argv[3 + i], NULL);
	if (!mem || !src || !dst) {
		fprintf(stderr, "resize_bench: out of memory\n");
		return 1;
	}
	if (fread(src, 1, in, stdin) != in) {
		fprintf(stderr, "resize_bench: short input\n");
		return 1;
	}
	err = rsz_plan_box(mem, cap, in_w, in_h, box, out_w, out_h, flags, &p);
	if (!err && rsz_scratch_size(p, ch)) {
		scratch = malloc(rsz_scratch_size(p, ch));
		if (!scratch)
			err = -ENOMEM;
	}
	if (!err)
		err = rsz_run(p, src, (size_t)in_w * ch, dst,
			      (size_t)out_w * ch, ch, scratch);
	if (err) {
		fprintf(stderr, "resize_bench: %s\n", strerror(-err));
		return 1;
	}
	if (fwrite(dst, 1, out, stdout) != out || fflush(stdout)) {
		fprintf(stderr, "resize_bench: write failed\n");
		return 1;
	}
	free(mem);
	free(scratch);
	free(src);
	free(dst);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned runs = 9;

	if (argc == 12 && !strcmp(argv[1], "--raw"))
		return raw(argv + 2);
	if (argc == 2)
		runs = (unsigned)strtoul(argv[1], NULL, 10);
	if (argc > 2 || !runs) {
		fprintf(stderr,
			"usage: resize_bench [runs]\n"
			"       resize_bench --raw in_w in_h ch x0 y0 x1 y1 "
			"out_w out_h flags\n");
		return 1;
	}
	return bench(runs);
}
