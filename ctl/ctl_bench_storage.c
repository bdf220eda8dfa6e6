/*
 * ctl_bench_storage.c - loaderctl bench storage: how fast the files under
 * a dataset (or a test file it writes) read, on io_uring as loaderd reads
 * them, with the page cache's part in the figures said out loud.
 *
 * The measuring is bench_storage.c's; this file is the command line:
 * options, --create and --remove, the progress line and the report.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench_storage.h"
#include "ctl.h"
#include "opts.h"
#include "progress.h"

#define PFX "loaderctl bench storage: "

/*
 * Residency above this share before a buffered run means the figures are
 * partly the page cache's.
 */
#define WARM_WARN 0.10

struct bstore_cli {
	const char *pattern;
	uint64_t bs, qd, threads, bytes, create;
	double seconds;
	bool direct, buffered, sqpoll, fixed_bufs, fixed_files, drop_cache;
	bool remove, json;
};

#define O(f) offsetof(struct bstore_cli, f)
static const struct opt bstore_table[] = {
	{ "pattern", 'p', OPT_CHOICE, O(pattern), "seq", "seq|rand",
	  "read blocks in order, or each block once per pass in random order",
	  0, 0, 0 },
	{ "bs", 'b', OPT_SIZE, O(bs), NULL, "SIZE",
	  "bytes per read (default: 1M seq, 4K rand)", 0, 0, 0 },
	{ "qd", 'q', OPT_U64, O(qd), "32", "N", "reads in flight per thread", 1,
	  BSTORE_QD_MAX, 0 },
	{ "direct", 0, OPT_FLAG, O(direct), NULL, NULL,
	  "read with O_DIRECT, past the page cache (the default)", 0, 0, 0 },
	{ "buffered", 0, OPT_FLAG, O(buffered), NULL, NULL,
	  "read through the page cache", 0, 0, 0 },
	{ "seconds", 't', OPT_F64, O(seconds), NULL, "S",
	  "run for S seconds (default: 10 unless --bytes)", 0.001, 1e6, 0 },
	{ "bytes", 0, OPT_SIZE, O(bytes), NULL, "SIZE",
	  "read SIZE bytes in all, a multiple of --bs, instead", 0, 0, 0 },
	{ "threads", 'j', OPT_U64, O(threads), "1", "N",
	  "threads, each with its own ring and share of the blocks", 1,
	  BSTORE_THREADS_MAX, 0 },
	{ "sqpoll", 0, OPT_FLAG, O(sqpoll), NULL, NULL,
	  "a kernel thread polls each ring's submissions (IORING_SETUP_SQPOLL)",
	  0, 0, 0 },
	{ "fixed-bufs", 0, OPT_FLAG, O(fixed_bufs), NULL, NULL,
	  "register the read buffers with io_uring", 0, 0, 0 },
	{ "fixed-files", 0, OPT_FLAG, O(fixed_files), NULL, NULL,
	  "register the files with io_uring", 0, 0, 0 },
	{ "drop-cache", 0, OPT_FLAG, O(drop_cache), NULL, NULL,
	  "drop the files' pages from the page cache first", 0, 0, 0 },
	{ "create", 0, OPT_SIZE, O(create), NULL, "SIZE",
	  "first write PATH (which must not exist): SIZE bytes of random data",
	  0, 0, 0 },
	{ "remove", 0, OPT_FLAG, O(remove), NULL, NULL,
	  "with --create: remove PATH when done, even after an error", 0, 0,
	  0 },
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL, "print JSON", 0, 0, 0 },
	OPT_END,
};
#undef O

static const char usage[] =
	"loaderctl bench storage [OPTIONS] PATH...\n"
	"       loaderctl bench storage --create SIZE [--remove] [OPTIONS] PATH";

static const char about[] =
	"Read the files (a directory: the regular files in it) with io_uring\n"
	"and report MB/s, IOPS, latency per read (p50, p99, p99.9), the\n"
	"process's CPU time and how much of the data was in the page cache\n"
	"before the run. O_DIRECT unless --buffered.";

static volatile int interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct show {
	const struct bstore_job *job;
	double t_last;
};

/* The progress line: only on a terminal, at most ten times a second. */
static void show_progress(void *arg, uint64_t bytes, double seconds)
{
	const struct bstore_job *job = ((struct show *)arg)->job;
	char a[32], b[32], r[32];

	if (job->bytes)
		fprintf(stderr, "\rbench storage: %s / %s, %s/s ",
			progress_bytes((double)bytes, a, sizeof(a)),
			progress_bytes((double)job->bytes, b, sizeof(b)),
			progress_bytes(seconds > 0 ? (double)bytes / seconds :
						     0,
				       r, sizeof(r)));
	else
		fprintf(stderr, "\rbench storage: %.1f / %.0f s, %s, %s/s ",
			seconds, job->seconds,
			progress_bytes((double)bytes, a, sizeof(a)),
			progress_bytes(seconds > 0 ? (double)bytes / seconds :
						     0,
				       r, sizeof(r)));
	fflush(stderr);
}

/* How many times over the run read its blocks. */
static double passes(const struct bstore_result *r)
{
	return r->span_bytes ? (double)r->bytes / (double)r->span_bytes : 0;
}

static void warn_cache(const struct bstore_job *job,
		       const struct bstore_result *r)
{
	if (job->fixed_bufs && !r->fixed_bufs)
		fprintf(stderr, PFX
			"warning: --fixed-bufs: io_uring refused to register the buffers (RLIMIT_MEMLOCK, ulimit -l?): plain buffers were used\n");
	if (job->direct)
		return;
	if (r->resident_before >= WARM_WARN)
		fprintf(stderr,
			PFX
			"warning: %.0f%% of the files' pages were in the page cache before the run%s: a buffered run reads them from memory, not the device%s\n",
			100 * r->resident_before,
			r->dropped ?
				" even after --drop-cache (mapped or locked elsewhere?)" :
				"",
			r->dropped ? "" : " (--drop-cache to start cold)");
	if (passes(r) > 1.01)
		fprintf(stderr,
			PFX
			"warning: the run read the files %.1f times over: what the first pass left in the page cache served the rest (--direct, or --bytes up to %" PRIu64
			")\n",
			passes(r), r->span_bytes);
}

static const char *pattern_name(enum bstore_pattern p)
{
	return p == BSTORE_RAND ? "rand" : "seq";
}

static void print_json(const struct bstore_job *job,
		       const struct bstore_result *r)
{
	json_t *paths = json_array();
	json_t *j;

	for (unsigned i = 0; i < job->npaths; i++)
		json_array_append_new(paths, json_string(job->paths[i]));
	j = json_pack(
		"{s:o, s:i, s:I, s:s, s:I, s:i, s:b, s:i, s:b, s:b, s:b,"
		" s:I, s:I, s:f, s:f, s:f, s:f,"
		" s:{s:f, s:f, s:f, s:f, s:f},"
		" s:f, s:f, s:f, s:{s:f, s:b, s:f}, s:b}",
		"paths", paths, "files", r->files, "span_bytes",
		(json_int_t)r->span_bytes, "pattern",
		pattern_name(job->pattern), "bs", (json_int_t)job->bs, "qd",
		job->qd, "direct", job->direct, "threads", job->threads,
		"sqpoll", r->sqpoll, "fixed_bufs", r->fixed_bufs, "fixed_files",
		r->fixed_files, "bytes", (json_int_t)r->bytes, "ios",
		(json_int_t)r->ios, "seconds", r->seconds, "bw_bytes_per_s",
		r->bw_bytes_per_s, "mb_per_s", r->bw_bytes_per_s / 1e6, "iops",
		r->iops, "lat_us", "p50", r->lat_us.p50, "p99", r->lat_us.p99,
		"p999", r->lat_us.p999, "mean", r->lat_us.mean, "max",
		r->lat_us.max, "cpu_pct", r->cpu_pct, "cpu_user_s",
		r->cpu_user_s, "cpu_sys_s", r->cpu_sys_s, "cache",
		"resident_before", r->resident_before, "dropped", r->dropped,
		"passes", passes(r), "stopped", r->stopped);
	json_dumpf(j, stdout,
		   JSON_INDENT(2) | JSON_PRESERVE_ORDER |
			   JSON_REAL_PRECISION(9));
	printf("\n");
	json_decref(j);
}

static void print_table(const struct bstore_job *job,
			const struct bstore_result *r)
{
	char a[32], b[32];

	printf("files       %u, %s of whole blocks\n", r->files,
	       progress_bytes((double)r->span_bytes, a, sizeof(a)));
	printf("job         %s, bs %" PRIu64 ", qd %u, %s, %u thread%s%s%s%s\n",
	       pattern_name(job->pattern), job->bs, job->qd,
	       job->direct ? "O_DIRECT" : "buffered", job->threads,
	       job->threads == 1 ? "" : "s", r->sqpoll ? ", sqpoll" : "",
	       r->fixed_bufs ? ", fixed bufs" : "",
	       r->fixed_files ? ", fixed files" : "");
	printf("read        %s in %.2f s (%" PRIu64 " reads)%s\n",
	       progress_bytes((double)r->bytes, b, sizeof(b)), r->seconds,
	       r->ios, r->stopped ? ", interrupted" : "");
	printf("bandwidth   %.1f MB/s\n", r->bw_bytes_per_s / 1e6);
	printf("IOPS        %.0f\n", r->iops);
	printf("latency us  p50 %.1f  p99 %.1f  p99.9 %.1f  mean %.1f  max %.1f\n",
	       r->lat_us.p50, r->lat_us.p99, r->lat_us.p999, r->lat_us.mean,
	       r->lat_us.max);
	printf("CPU         %.1f%% (100%% = one core; user %.2f s, system %.2f s)\n",
	       r->cpu_pct, r->cpu_user_s, r->cpu_sys_s);
	printf("page cache  %.1f%% resident before the run%s\n",
	       100 * r->resident_before,
	       r->dropped ? ", after --drop-cache" : "");
}

static int check_cli(const struct bstore_cli *o, int nargs, const char **why)
{
	if (!nargs)
		*why = "expected PATH";
	else if (o->direct && o->buffered)
		*why = "--direct or --buffered, not both";
	else if (o->create && nargs != 1)
		*why = "--create writes one PATH";
	else if (o->remove && !o->create)
		*why = "--remove removes only what --create wrote";
	else if (o->bytes && o->seconds > 0)
		*why = "--seconds or --bytes, not both";
	else
		return 0;
	return -1;
}

int ctl_bench_storage(int argc, char **argv)
{
	struct bstore_cli o = { 0 };
	struct bstore_job job = { 0 };
	struct bstore_result r;
	struct show sh = { &job, 0 };
	struct diag d = { { 0 } };
	const char *why = NULL;
	int nargs, help, err;
	bool created = false;

	err = opts_parse(bstore_table, &o, argc, argv, &nargs, &help, &d);
	if (!err && !help)
		check_cli(&o, nargs, &why);
	if (err || help || why) {
		if (help) {
			opts_help(stdout, usage, about, bstore_table);
			return CTL_OK;
		}
		fprintf(stderr, PFX "%s\nusage: %s\n(--help for options)\n",
			err ? d.msg : why, usage);
		return CTL_FAIL;
	}
	job.paths = (const char *const *)argv;
	job.npaths = (unsigned)nargs;
	job.pattern = strcmp(o.pattern, "rand") ? BSTORE_SEQ : BSTORE_RAND;
	job.bs = o.bs ? o.bs : job.pattern == BSTORE_RAND ? 4096 : 1u << 20;
	job.qd = (unsigned)o.qd;
	job.direct = !o.buffered;
	job.seconds = o.seconds;
	job.bytes = o.bytes;
	job.threads = (unsigned)o.threads;
	job.sqpoll = o.sqpoll;
	job.fixed_bufs = o.fixed_bufs;
	job.fixed_files = o.fixed_files;
	job.drop_cache = o.drop_cache;
	job.stop = &interrupted;
	if (!job.bytes && job.seconds <= 0)
		job.seconds = BSTORE_SECONDS_DEFAULT;
	if (isatty(STDERR_FILENO)) {
		job.progress = show_progress;
		job.progress_arg = &sh;
	}
	if (o.create) {
		err = bench_storage_create(argv[0], o.create, &d);
		if (err) {
			fprintf(stderr, PFX "%s\n", d.msg);
			return CTL_FAIL;
		}
		created = true;
	}
	signal(SIGINT, on_interrupt);
	signal(SIGTERM, on_interrupt);
	err = bench_storage_run(&job, &r, &d);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (job.progress)
		fprintf(stderr, "\r\033[K");
	if (created && o.remove && unlink(argv[0]))
		perror(argv[0]);
	if (err) {
		fprintf(stderr, PFX "%s\n", d.msg);
		return CTL_FAIL;
	}
	warn_cache(&job, &r);
	if (o.json)
		print_json(&job, &r);
	else
		print_table(&job, &r);
	return CTL_OK;
}
