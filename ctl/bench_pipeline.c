/*
 * bench_pipeline.c - loaderctl bench pipeline: the real pipeline on a
 * dataset, measured stage by stage, the bottleneck named, and how many
 * accelerators the machine keeps fed.
 *
 * The stream runs in this process, as loaderd runs it (pipeline/stream/stream.h
 * with its reader, assembler and a pool of decode threads), into a sink
 * that takes every batch at once: what is measured is what the loader
 * can deliver, with no trainer to wait for. Stage times come from the
 * stream's own clocks (stream_stats, and stream_stages with timing on);
 * CPU time from getrusage over the whole process.
 *
 * Sizing (--step-ms) follows MLPerf Storage's question: how many
 * accelerators, each taking a batch every step, does this machine keep
 * busy at least --au of the time? The model is in loaderctl(1) and in
 * size_fleet() below.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bench_storage.h"
#include "clock.h"
#include "cores.h"
#include "ctl.h"
#include "daemon_query.h"
#include "dataset.h"
#include "loader.h"
#include "loader_error.h"
#include "opts.h"
#include "order.h"
#include "plog.h"
#include "pool.h"
#include "progress.h"
#include "schema.h"
#include "stream.h"

#define PFX "loaderctl bench pipeline: "

/* The pipeline a dataset with a jpeg field gets unless --pipeline says. */
#define BP_DEFAULT_PIPELINE "decode | rrc 224 | flip 0.5 | normalize imagenet"
/* Batches the sink hands out in turn: the stream never waits for one. */
#define BP_SLOTS 2
/* Longest run: a day. */
#define BP_SECONDS_MAX 86400.0

struct bp_cli {
	const char *outputs, *pipeline, *order, *socket;
	uint64_t batch, threads, epochs, prefetch, seed;
	double seconds, step_ms, au, host_cores, probe_seconds;
	bool direct, cold, warm, json;
};

#define O(f) offsetof(struct bp_cli, f)
static const struct opt bp_table[] = {
	{ "outputs", 0, OPT_STR, O(outputs), NULL, "LIST",
	  "fields to deliver, each NAME or NAME:unit (u8 to f32 in [0,1]) or NAME:f32 (default: every field)",
	  0, 0, 0 },
	{ "pipeline", 'p', OPT_STR, O(pipeline), NULL, "SPEC",
	  "image pipeline of jpeg fields (default: \"" BP_DEFAULT_PIPELINE
	  "\")",
	  0, 0, 0 },
	{ "batch", 'b', OPT_U64, O(batch), "256", "N", "samples per batch", 1,
	  STREAM_MAX_BATCH, 0 },
	{ "threads", 't', OPT_U64, O(threads), "0", "N",
	  "decode threads beside the stream's own (0: one per core, less one, as loaderd)",
	  0, 1024, 0 },
	{ "order", 0, OPT_CHOICE, O(order), "random", "sequential|random|quasi",
	  "sample order", 0, 0, 0 },
	{ "seed", 0, OPT_U64, O(seed), "1", "N", "seed of the order", 0, 0, 0 },
	{ "seconds", 0, OPT_F64, O(seconds), "10", "S",
	  "run for S seconds (unless --epochs)", 0.1, BP_SECONDS_MAX, 0 },
	{ "epochs", 0, OPT_U64, O(epochs), "0", "N",
	  "run N whole epochs instead (0: by --seconds)", 0, 1000000, 0 },
	{ "prefetch", 0, OPT_SIZE, O(prefetch), "64M", "BYTES",
	  "read-ahead budget of the stream", 4096, 64.0 * (1ull << 30), 0 },
	{ "direct", 0, OPT_FLAG, O(direct), NULL, NULL,
	  "read the shards with O_DIRECT (past the page cache)", 0, 0, 0 },
	{ "cold", 0, OPT_FLAG, O(cold), NULL, NULL,
	  "drop the shards' pages from the page cache first", 0, 0, 0 },
	{ "warm", 0, OPT_FLAG, O(warm), NULL, NULL,
	  "read the shards into the page cache first", 0, 0, 0 },
	{ "step-ms", 0, OPT_F64, O(step_ms), "0", "T",
	  "size a fleet: each accelerator takes a batch every T ms (0: no sizing)",
	  0, 1e7, 0 },
	{ "au", 0, OPT_F64, O(au), "90", "PCT",
	  "with --step-ms: the accelerator utilisation to keep (percent)", 1,
	  100, 0 },
	{ "host-cores", 0, OPT_F64, O(host_cores), "1", "H",
	  "with --step-ms: cores each accelerator's host thread keeps busy while it steps",
	  0, 64, 0 },
	{ "socket", 's', OPT_STR, O(socket), NULL, "PATH",
	  "run the stream in the loaderd on PATH instead, as a trainer would (\"\": libloader's default)",
	  0, 0, 0 },
	{ "probe-seconds", 0, OPT_F64, O(probe_seconds), "2", "S",
	  "with --step-ms: read the shards S seconds sequentially and S randomly with O_DIRECT, for the storage's limits (0: none)",
	  0, 3600, 0 },
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL, "print JSON", 0, 0, 0 },
	OPT_END,
};
#undef O

/* --- the sink: takes every batch at once ------------------------------- */

struct bp_sink {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;    /* the next acquire() ends the stream */
	bool stopped; /* an acquire() saw stop: nothing runs any more */
	bool done;    /* finish() ran */
	int err;
	char reason[DIAG_MAX];
	uint32_t noutputs;
	uint64_t *ids[BP_SLOTS];
	unsigned char *out[BP_SLOTS][STREAM_MAX_OUTPUTS];
	uint64_t next;
};

static int sink_acquire(void *ctx, struct stream_batch *b)
{
	struct bp_sink *k = ctx;
	uint32_t slot;

	pthread_mutex_lock(&k->lock);
	if (k->stop) {
		k->stopped = true;
		pthread_cond_broadcast(&k->cond);
		pthread_mutex_unlock(&k->lock);
		return -ECANCELED;
	}
	slot = (uint32_t)(k->next++ % BP_SLOTS);
	pthread_mutex_unlock(&k->lock);
	b->ids = k->ids[slot];
	for (uint32_t i = 0; i < k->noutputs; i++)
		b->out[i] = k->out[slot][i];
	return 0;
}

static void sink_publish(void *ctx, const struct stream_batch *b)
{
	(void)ctx;
	(void)b;
}

static void sink_finish(void *ctx, int err, const char *reason)
{
	struct bp_sink *k = ctx;

	pthread_mutex_lock(&k->lock);
	k->done = true;
	k->err = err;
	if (reason)
		snprintf(k->reason, sizeof(k->reason), "%s", reason);
	pthread_cond_broadcast(&k->cond);
	pthread_mutex_unlock(&k->lock);
}

static void sink_cancel(void *ctx)
{
	struct bp_sink *k = ctx;

	pthread_mutex_lock(&k->lock);
	k->stop = true;
	pthread_mutex_unlock(&k->lock);
}

static const struct stream_sink_ops sink_ops = {
	.acquire = sink_acquire,
	.publish = sink_publish,
	.finish = sink_finish,
	.cancel = sink_cancel,
};

static void sink_free(struct bp_sink *k)
{
	for (uint32_t s = 0; s < BP_SLOTS; s++) {
		free(k->ids[s]);
		for (uint32_t i = 0; i < k->noutputs; i++)
			free(k->out[s][i]);
	}
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
}

static int sink_init(struct bp_sink *k, const struct stream_layout *lay)
{
	memset(k, 0, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->cond, NULL);
	k->noutputs = lay->noutputs;
	for (uint32_t s = 0; s < BP_SLOTS; s++) {
		k->ids[s] = calloc(lay->batch_size, sizeof(uint64_t));
		if (!k->ids[s])
			return -ENOMEM;
		for (uint32_t i = 0; i < lay->noutputs; i++) {
			/* calloc: the pages are mapped before the clock starts. */
			k->out[s][i] = calloc(lay->batch_size,
					      lay->out[i].sample_bytes);
			if (!k->out[s][i])
				return -ENOMEM;
		}
	}
	return 0;
}

/* --- the dataset's files and the page cache ---------------------------- */

struct bp_files {
	struct dataset *ds;
	int *fds; /* manifest, then shards: what stream_new() takes */
	uint32_t nfds;
	uint64_t bytes; /* of the shards */
};

static void files_close(struct bp_files *f)
{
	for (uint32_t i = 0; f->fds && i < f->nfds; i++)
		if (f->fds[i] >= 0)
			close(f->fds[i]);
	free(f->fds);
	f->fds = NULL;
	dataset_free(f->ds);
	f->ds = NULL;
}

static int files_open(struct bp_files *f, const char *dir, struct diag *d)
{
	char path[4096];
	int err;

	memset(f, 0, sizeof(*f));
	err = dataset_load(&f->ds, dir, d);
	if (err)
		return err;
	f->nfds = f->ds->nshards + 1;
	f->fds = malloc(f->nfds * sizeof(*f->fds));
	if (!f->fds)
		return -ENOMEM;
	for (uint32_t i = 0; i < f->nfds; i++)
		f->fds[i] = -1;
	for (uint32_t i = 0; i < f->nfds; i++) {
		const char *name =
			i ? f->ds->shards[i - 1].file : "manifest.json";
		struct stat st;

		dataset_path(f->ds, name, path, sizeof(path));
		f->fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (f->fds[i] < 0)
			return diag_set(d, -errno, "%s: %s", path,
					strerror(errno));
		if (i && !fstat(f->fds[i], &st))
			f->bytes += (uint64_t)st.st_size;
	}
	return 0;
}

/* Drop the shards' pages (--cold), or read them all in (--warm). */
static int files_cache(const struct bp_files *f, bool warm, struct diag *d)
{
	static unsigned char buf[1 << 20];
	unsigned bad = 0;
	int err;

	if (!warm) {
		err = bench_fds_drop(f->fds + 1, f->nfds - 1, &bad);
		return err ? diag_set(d, err, "%s: %s", f->ds->shards[bad].file,
				      strerror(-err)) :
			     0;
	}
	for (uint32_t i = 1; i < f->nfds; i++) {
		off_t off = 0;
		ssize_t r;

		while ((r = pread(f->fds[i], buf, sizeof(buf), off)) > 0)
			off += r;
		if (r < 0)
			return diag_set(d, -errno, "%s: %s",
					f->ds->shards[i - 1].file,
					strerror(errno));
	}
	return 0;
}

/* --- the stream's configuration ---------------------------------------- */

/* "a,b:unit,c:f32" into c->out; every field when list is NULL. */
static int parse_outputs(const char *list, const struct schema *sc,
			 struct stream_config *c, struct diag *d)
{
	char buf[512], *save = NULL;

	c->noutputs = 0;
	if (!list) {
		for (uint32_t i = 0; i < sc->nfields; i++) {
			if (c->noutputs == STREAM_MAX_OUTPUTS)
				break;
			/* A bytes field has no decoder: leave it out. */
			if (sc->f[i].kind == FIELD_BYTES)
				continue;
			snprintf(c->out[c->noutputs].field, STREAM_NAME_MAX,
				 "%s", sc->f[i].name);
			c->out[c->noutputs++].cast = STREAM_CAST_NONE;
		}
		return 0;
	}
	if (strlen(list) >= sizeof(buf))
		return diag_set(d, LOADER_EUSAGE, "--outputs: too long");
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		char *cast = strchr(t, ':');
		struct stream_output *o;

		if (c->noutputs == STREAM_MAX_OUTPUTS)
			return diag_set(d, LOADER_EUSAGE,
					"--outputs: at most %d",
					STREAM_MAX_OUTPUTS);
		o = &c->out[c->noutputs++];
		if (cast)
			*cast++ = '\0';
		if (schema_find(sc, t) < 0)
			return diag_set(
				d, LOADER_EUSAGE,
				"--outputs: no field \"%s\" in the dataset", t);
		if (strlen(t) >= STREAM_NAME_MAX)
			return diag_set(d, LOADER_EUSAGE,
					"--outputs: \"%s\": name too long", t);
		snprintf(o->field, sizeof(o->field), "%s", t);
		if (!cast)
			o->cast = STREAM_CAST_NONE;
		else if (!strcmp(cast, "unit"))
			o->cast = STREAM_CAST_F32_UNIT;
		else if (!strcmp(cast, "f32"))
			o->cast = STREAM_CAST_F32;
		else
			return diag_set(
				d, LOADER_EUSAGE,
				"--outputs: \"%s:%s\": the cast is unit or f32",
				t, cast);
	}
	return 0;
}

/* --- what a run measured ------------------------------------------------ */

struct bp_run {
	double seconds, cpu_s;
	uint32_t cores;	  /* this process may run on */
	uint32_t threads; /* decode threads: the pool's and the stream's */
	double resident;  /* of the shards, before the run */
	bool image, zstd; /* what the decode stage runs */
	struct stream_stats st;
	struct stream_stages sg;
	uint64_t pool_ns, own_ns; /* decoding, by the pool and the stream */
	uint64_t reader_ns;	  /* the reader thread's CPU time */
	/* --socket: the client's side of the handoff, and the daemon's CPU. */
	bool daemon;
	bool daemon_cpu; /* its CPU time could be read (/proc) */
	double wait_s;	 /* in loader_next(), in all */
	double next_p50_us, next_p99_us;
};

static double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Run the stream to the end (epochs) or for the time asked. */
static int run_stream(const struct bp_cli *o, struct bp_files *f,
		      struct stream_config *c, struct bp_run *r, struct diag *d)
{
	struct pool *pool = NULL;
	struct stream *s = NULL;
	struct bp_sink k;
	struct stream_sink sink = { &sink_ops, &k };
	struct progress bar;
	double t0, cpu0, end;
	uint64_t p0, o0;
	int err;

	r->cores = cores_usable();
	r->threads = (uint32_t)(o->threads   ? o->threads :
				r->cores > 1 ? r->cores - 1 :
					       1);
	err = pool_new(&pool, r->threads);
	if (err)
		return diag_set(d, err, "cannot start %" PRIu32 " threads",
				r->threads);
	r->threads++; /* the stream's own */
	/* The stream takes the descriptors, whatever happens. */
	err = stream_new(&s, c, f->fds, f->nfds, pool, d);
	free(f->fds);
	f->fds = NULL;
	if (err) {
		pool_free(pool);
		return err;
	}
	err = sink_init(&k, stream_layout(s));
	if (err) {
		sink_free(&k);
		stream_free(s);
		pool_free(pool);
		return diag_set(d, err, "out of memory for the batches");
	}
	progress_start(&bar, "bench", "samples",
		       o->epochs ? o->epochs * stream_layout(s)->samples : 0);
	pool_busy(pool, &p0, &o0);
	cpu0 = cpu_seconds();
	t0 = clock_mono_s();
	end = t0 + o->seconds;
	err = stream_start(s, &sink, d);
	if (!err) {
		uint64_t shown = 0;

		pthread_mutex_lock(&k.lock);
		while (!k.done && !k.stopped) {
			struct timespec ts;
			struct stream_stats now;
			double t = clock_mono_s();

			if (!o->epochs && t >= end)
				k.stop = true;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&k.cond, &k.lock, &ts);
			pthread_mutex_unlock(&k.lock);
			stream_stats(s, &now);
			progress_add(&bar, now.samples - shown);
			shown = now.samples;
			pthread_mutex_lock(&k.lock);
		}
		/* Nothing decodes any more: the figures are final. */
		r->seconds = clock_mono_s() - t0;
		r->cpu_s = cpu_seconds() - cpu0;
		stream_stats(s, &r->st);
		stream_stages(s, &r->sg);
		stream_thread_cpu(s, &r->reader_ns, &(uint64_t){ 0 });
		pool_busy(pool, &r->pool_ns, &r->own_ns);
		r->pool_ns -= p0;
		r->own_ns -= o0;
		if (k.done && k.err)
			err = diag_set(d, k.err, "%s", k.reason);
		pthread_mutex_unlock(&k.lock);
	}
	progress_end(&bar);
	stream_free(s);
	sink_free(&k);
	pool_free(pool);
	return err;
}

/* --- against a running loaderd (--socket) ----------------------------- */

/* A process's CPU seconds from /proc/PID/stat, or -1. */
static double proc_cpu_seconds(uint32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%" PRIu32 "/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The name may hold blanks and parentheses: skip past the last ')'. */
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 1,
		   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		   &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Our stream in the daemon's reading (STREAM_INFO), found by our pid. */
static const struct proto_stream_info_ok *
own_stream(const struct daemon_reading *r)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->s[i].pid == (uint32_t)getpid())
			return &r->s[i];
	return NULL;
}

/*
 * The same run through loaderd, as a trainer would: libloader opens the
 * stream, and every batch is released as soon as it arrives. The
 * daemon's side (its stream's counters, its pool, its CPU time) comes
 * over its control socket and from /proc.
 */
static int run_daemon(const struct bp_cli *o, const struct bp_files *f,
		      const struct stream_config *c, struct bp_run *r,
		      struct diag *d)
{
	struct loader_opts lo = LOADER_OPTS_INIT;
	struct loader_stats ls = LOADER_STATS_INIT;
	struct daemon_reading a = { 0 }, b = { 0 };
	const struct proto_stream_info_ok *s;
	char outputs[512] = "", why[DIAG_MAX], buf[108];
	double t0, cpu0, dcpu0, end, *lat = NULL;
	size_t nlat = 0, cap = 0;
	struct progress bar;
	struct loader *l = NULL;
	uint32_t seq = 0;
	int fd, err;

	for (uint32_t i = 0, n = 0; i < c->noutputs; i++)
		n += (uint32_t)snprintf(
			outputs + n,
			n < sizeof(outputs) ? sizeof(outputs) - n : 0, "%s%s%s",
			i ? "," : "", c->out[i].field,
			c->out[i].cast == STREAM_CAST_F32_UNIT ? ":unit" :
			c->out[i].cast == STREAM_CAST_F32      ? ":f32" :
								 "");
	lo.socket_path = *o->socket ? o->socket : NULL;
	lo.outputs = outputs;
	lo.pipeline = c->pipeline;
	lo.batch_size = c->batch_size;
	lo.order = c->order == ORDER_SEQUENTIAL ? LOADER_ORDER_SEQUENTIAL :
		   c->order == ORDER_QUASI	? LOADER_ORDER_QUASI :
						  LOADER_ORDER_RANDOM;
	lo.seed = c->seed;
	lo.epochs = c->epochs;
	lo.prefetch_bytes = c->prefetch_bytes;
	lo.threads = (uint32_t)o->threads;
	lo.direct = c->direct;
	fd = daemon_dial(daemon_socket_path(lo.socket_path, buf, sizeof(buf)),
			 &seq, why, sizeof(why));
	if (fd < 0)
		return diag_set(d, fd, "%s", why);
	r->daemon = true;
	r->cores = cores_usable();
	err = daemon_read(fd, &seq, &a, why, sizeof(why));
	if (err) {
		err = diag_set(d, err, "%s", why);
		goto out;
	}
	err = loader_open(&l, f->ds->dir, &lo, why, sizeof(why));
	if (err) {
		err = diag_set(d, err, "%s: %s", f->ds->dir,
			       *why ? why : loader_strerror(err));
		goto out;
	}
	r->threads = a.st.threads + 1;
	progress_start(&bar, "bench", "samples",
		       o->epochs ? o->epochs * loader_samples(l) : 0);
	dcpu0 = proc_cpu_seconds(a.st.pid);
	cpu0 = cpu_seconds();
	t0 = clock_mono_s();
	end = t0 + o->seconds;
	for (;;) {
		struct loader_batch lb;
		double t = clock_mono_s();

		if (!o->epochs && t >= end)
			break;
		err = loader_next(l, &lb, 60000);
		if (err == LOADER_EEND) {
			err = 0;
			break;
		}
		if (err) {
			err = diag_set(
				d, err, "batch: %s%s%s", loader_strerror(err),
				loader_reason(l) ? ": " : "",
				loader_reason(l) ? loader_reason(l) : "");
			break;
		}
		if (nlat == cap) {
			double *m = realloc(lat, (cap ? 2 * cap : 4096) *
							 sizeof(*lat));

			if (!m) {
				err = diag_set(d, -ENOMEM, "out of memory");
				break;
			}
			lat = m;
			cap = cap ? 2 * cap : 4096;
		}
		lat[nlat++] = (clock_mono_s() - t) * 1e6;
		progress_add(&bar, lb.count);
		err = loader_release(l, &lb);
		if (err) {
			err = diag_set(d, err, "release: %s",
				       loader_strerror(err));
			break;
		}
	}
	progress_end(&bar);
	if (err)
		goto out;
	/* The daemon's view of our stream, before it ends. */
	err = daemon_read(fd, &seq, &b, why, sizeof(why));
	r->seconds = clock_mono_s() - t0;
	r->cpu_s = cpu_seconds() - cpu0;
	if (!err && loader_stats(l, &ls))
		ls.wait_ns = 0;
	if (err) {
		err = diag_set(d, err, "%s", why);
		goto out;
	}
	if (dcpu0 >= 0) {
		double dcpu = proc_cpu_seconds(a.st.pid);

		r->daemon_cpu = dcpu >= 0;
		if (r->daemon_cpu)
			r->cpu_s += dcpu - dcpu0;
	}
	s = own_stream(&b);
	if (!s) {
		err = diag_set(d, LOADER_EPROTO,
			       "loaderd shows no stream of pid %d",
			       (int)getpid());
		goto out;
	}
	r->st.batches = s->batches;
	r->st.samples = s->samples;
	r->st.bytes_read = s->bytes_read;
	r->st.bad_samples = s->bad_samples;
	r->st.read_wait_ns = s->read_wait_ns;
	r->st.decode_ns = s->decode_ns;
	r->st.slot_wait_ns = s->slot_wait_ns;
	r->pool_ns = b.st.pool_busy_ns - a.st.pool_busy_ns;
	r->own_ns = b.st.stream_busy_ns - a.st.stream_busy_ns;
	r->wait_s = (double)ls.wait_ns * 1e-9;
	if (nlat) {
		qsort(lat, nlat, sizeof(*lat), cmp_double);
		r->next_p50_us = lat[nlat / 2];
		r->next_p99_us = lat[(size_t)((double)(nlat - 1) * 0.99)];
	}
out:
	loader_close(l);
	free(lat);
	daemon_reading_free(&a);
	daemon_reading_free(&b);
	close(fd);
	return err;
}

/* --- the bottleneck, in words ----------------------------------------- */

struct bp_verdict {
	const char *resource; /* "storage", "decode" */
	char text[256];
};

static void name_bottleneck(const struct bp_run *r, struct bp_verdict *v)
{
	double w = r->seconds > 0 ? r->seconds : 1e-9;
	double read = (double)r->st.read_wait_ns * 1e-9 / w;
	double dec = (double)r->st.decode_ns * 1e-9 / w;
	double reader = (double)r->reader_ns * 1e-9 / w;
	double busy = (double)(r->pool_ns + r->own_ns) * 1e-9 / w;
	double stages =
		(double)(r->sg.decode_ns + r->sg.augment_ns + r->sg.emit_ns);
	double kb = r->st.reads ? (double)r->st.bytes_read /
					  (double)r->st.reads / 1e3 :
				  0;
	const char *what = "decoding";
	double share = 0;

	/* The stream waits for its reads longer than it decodes. */
	if (read > dec) {
		if (r->daemon) {
			/* No per-thread CPU time from the daemon. */
			v->resource = "storage";
			snprintf(
				v->text, sizeof(v->text),
				"read-bound: the daemon's stream waited for reads %.0f%% of the time, at %.1f MB/s",
				read * 100, (double)r->st.bytes_read / w / 1e6);
		} else if (reader >= 0.8) {
			v->resource = "reader";
			snprintf(
				v->text, sizeof(v->text),
				"read-bound, on CPU: the reader thread was busy %.2f of a core issuing %.0f reads/s of %.1f kB%s; the stream waited for reads %.0f%% of the time",
				reader, (double)r->st.reads / w, kb,
				r->resident > 0.9 ? " from the page cache" : "",
				read * 100);
		} else {
			v->resource = "storage";
			snprintf(
				v->text, sizeof(v->text),
				"storage-bound: the stream waited for reads %.0f%% of the time, at %.1f MB/s and %.0f reads/s of %.1f kB",
				read * 100, (double)r->st.bytes_read / w / 1e6,
				(double)r->st.reads / w, kb);
		}
		return;
	}
	v->resource = "decode";
	if (stages > 0) {
		const double t[3] = { (double)r->sg.decode_ns,
				      (double)r->sg.augment_ns,
				      (double)r->sg.emit_ns };
		static const char *const img[3] = {
			"JPEG decode (libjpeg-turbo)", "crop and resize",
			"normalize and cast"
		};
		static const char *const raw[3] = { "record parsing",
						    "crop and resize",
						    "casting and copying" };
		unsigned m = t[1] > t[0] ? 1 : 0;

		if (t[2] > t[m])
			m = 2;
		share = t[m] / stages;
		what = r->image	     ? img[m] :
		       r->zstd && !m ? "zstd decompression" :
				       raw[m];
	}
	snprintf(v->text, sizeof(v->text),
		 "decode-bound: %.2f of %" PRIu32 " cores decoding (%" PRIu32
		 " threads), %.0f%% of it in %s; the reader took %.2f",
		 busy, r->cores, r->threads, share * 100, what, reader);
}

/* --- sizing ------------------------------------------------------------- */

struct bp_fleet {
	double rate;   /* samples/s one accelerator takes at AU 100% */
	double cpu_ps; /* CPU seconds per sample */
	double n_cpu;  /* accelerators the cores keep at --au */
	double n_max;  /* ... and all resources together */
	/* The storage probe: what the device gives past the page cache. */
	bool probed;
	char probe_why[DIAG_MAX]; /* why not, when not */
	double bw, iops;	  /* seq 1 MiB qd 32; rand at the mean read */
	uint64_t probe_bs;
	double bytes_ps, reads_ps; /* per sample, as the run read them */
	double n_bw, n_iops;
	/*
	 * Whether they bound the fleet: not when the dataset stays in the
	 * page cache (buffered reads, and it takes under half the memory
	 * available): after its first epoch the device is not read.
	 */
	bool binds;
	double au[4];	   /* predicted AU of 1..4 accelerators */
	uint32_t n;	   /* accelerators kept at --au or more */
	const char *limit; /* what runs out first */
};

/*
 * N accelerators at utilisation a each take N a r samples/s (r = batch /
 * step) and keep N a h cores busy on their host threads; decoding costs
 * c CPU seconds a sample, so the cores C bound a by
 *	N a (h + r c) <= C,  a(N) = min(1, C / (N (h + r c))),
 * and N accelerators stay at a target t or more while N <= C / (t (h + r c)).
 */
static void size_fleet(const struct bp_cli *o, const struct bp_run *r,
		       struct bp_fleet *fl)
{
	double t = o->au / 100, h = o->host_cores;
	double need, n;

	fl->rate = (double)o->batch / (o->step_ms * 1e-3);
	fl->cpu_ps = r->st.samples ? r->cpu_s / (double)r->st.samples : 0;
	need = h + fl->rate * fl->cpu_ps;
	fl->n_cpu = need > 0 ? (double)r->cores / (t * need) : INFINITY;
	fl->n_bw = fl->n_iops = INFINITY;
	fl->bytes_ps = r->st.samples ? (double)r->st.bytes_read /
					       (double)r->st.samples :
				       0;
	fl->reads_ps =
		r->st.samples ? (double)r->st.reads / (double)r->st.samples : 0;
	if (fl->probed && fl->bytes_ps > 0)
		fl->n_bw = fl->bw / (t * fl->rate * fl->bytes_ps);
	if (fl->probed && fl->reads_ps > 0)
		fl->n_iops = fl->iops / (t * fl->rate * fl->reads_ps);
	n = fl->n_cpu;
	fl->limit = "decode CPU";
	if (!fl->binds)
		goto done;
	if (fl->n_bw < n) {
		n = fl->n_bw;
		fl->limit = "storage bandwidth";
	}
	if (fl->n_iops < n) {
		n = fl->n_iops;
		fl->limit = "storage IOPS";
	}
done:
	fl->n_max = n;
	/* a(N) = min(1, n(t) t / N): each bound scales as 1 / N. */
	for (unsigned k = 1; k <= 4; k++) {
		double a = isfinite(n) ? n * t / k : 1;

		fl->au[k - 1] = a < 1 ? a : 1;
	}
	fl->n = isfinite(n) ? (uint32_t)floor(n + 1e-9) : UINT32_MAX;
}

/*
 * The storage's own limits, past the page cache: the dataset's shards
 * read with O_DIRECT, sequentially in 1 MiB reads (bandwidth), then at
 * random in reads of the size the stream made on average (IOPS).
 */
/* MemAvailable of /proc/meminfo, in bytes (0 if unknown). */
static uint64_t mem_available(void)
{
	unsigned long long kb = 0;
	char line[256];
	FILE *m = fopen("/proc/meminfo", "re");

	if (!m)
		return 0;
	while (fgets(line, sizeof(line), m))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(m);
	return (uint64_t)kb * 1024;
}

static void probe_storage(const struct bp_cli *o, const struct bp_files *f,
			  const struct bp_run *r, struct bp_fleet *fl)
{
	const char *dir = f->ds->dir;
	struct bstore_job j = {
		.paths = &dir,
		.npaths = 1,
		.pattern = BSTORE_SEQ,
		.bs = 1 << 20,
		.qd = 32,
		.direct = true,
		.seconds = o->probe_seconds,
		.threads = 1,
		.seed = 1,
	};
	struct bstore_result res;
	struct diag d = { { 0 } };
	uint64_t mean = r->st.reads ? r->st.bytes_read / r->st.reads : 4096;

	if (o->probe_seconds <= 0) {
		snprintf(fl->probe_why, sizeof(fl->probe_why),
			 "--probe-seconds 0");
		return;
	}
	if (bench_storage_run(&j, &res, &d)) {
		snprintf(fl->probe_why, sizeof(fl->probe_why), "%s", d.msg);
		return;
	}
	fl->bw = res.bw_bytes_per_s;
	j.pattern = BSTORE_RAND;
	/* The reader's reads are whole 4 KiB blocks under O_DIRECT. */
	j.bs = (mean + 2048) / 4096 * 4096;
	if (j.bs < 4096)
		j.bs = 4096;
	j.qd = 32;
	if (bench_storage_run(&j, &res, &d)) {
		snprintf(fl->probe_why, sizeof(fl->probe_why), "%s", d.msg);
		return;
	}
	fl->iops = res.iops;
	fl->probe_bs = j.bs;
	fl->probed = true;
	fl->binds = o->direct || f->bytes >= mem_available() / 2;
}

/* --- output ------------------------------------------------------------- */

static void print_text(const struct bp_cli *o, const struct bp_files *f,
		       const struct stream_config *c, const struct bp_run *r,
		       const struct bp_verdict *v, const struct bp_fleet *fl)
{
	double w = r->seconds > 0 ? r->seconds : 1e-9;
	double stages =
		(double)(r->sg.decode_ns + r->sg.augment_ns + r->sg.emit_ns);
	char b1[32];

	printf("dataset %s: %" PRIu64 " samples, %s in %" PRIu32
	       " shards; batch %" PRIu64 ", order %s, %" PRIu32
	       " decode threads on %" PRIu32
	       " cores, %s, %.0f%% of it cached before\n",
	       f->ds->dir, f->ds->records,
	       progress_bytes((double)f->bytes, b1, sizeof(b1)), f->ds->nshards,
	       o->batch, o->order, r->threads, r->cores,
	       c->direct ? "O_DIRECT" : "buffered", r->resident * 100);
	if (c->pipeline)
		printf("pipeline %s\n", c->pipeline);
	printf("%.2f s: %" PRIu64 " batches, %" PRIu64 " samples, %" PRIu64
	       " bad\n",
	       r->seconds, r->st.batches, r->st.samples, r->st.bad_samples);
	printf("  samples/s   %.0f\n", (double)r->st.samples / w);
	if (r->daemon)
		printf("  read        %.1f MB/s\n",
		       (double)r->st.bytes_read / w / 1e6);
	else
		printf("  read        %.1f MB/s, %.0f reads/s of %.1f kB on average\n",
		       (double)r->st.bytes_read / w / 1e6,
		       (double)r->st.reads / w,
		       r->st.reads ? (double)r->st.bytes_read /
					     (double)r->st.reads / 1e3 :
				     0);
	if (r->daemon)
		printf("  CPU         %.2f cores (%s; decoding %.2f), %.3f s per 1000 samples\n",
		       r->cpu_s / w,
		       r->daemon_cpu ?
			       "loaderd and this client" :
			       "this client only: loaderd's is not readable",
		       (double)(r->pool_ns + r->own_ns) * 1e-9 / w,
		       r->st.samples ? r->cpu_s * 1000 / (double)r->st.samples :
				       0);
	else
		printf("  CPU         %.2f cores (reader %.2f, decoding %.2f), %.3f s per 1000 samples\n",
		       r->cpu_s / w, (double)r->reader_ns * 1e-9 / w,
		       (double)(r->pool_ns + r->own_ns) * 1e-9 / w,
		       r->st.samples ? r->cpu_s * 1000 / (double)r->st.samples :
				       0);
	printf("  the stream  read wait %.1f%%, decode %.1f%%, waiting for a free slot %.1f%%\n",
	       (double)r->st.read_wait_ns * 1e-7 / w,
	       (double)r->st.decode_ns * 1e-7 / w,
	       (double)r->st.slot_wait_ns * 1e-7 / w);
	if (r->daemon)
		printf("  handoff     loader_next p50 %.1f us, p99 %.1f us; the client waited %.1f%% of the time\n",
		       r->next_p50_us, r->next_p99_us, r->wait_s * 100 / w);
	else
		printf("  handoff     none in-process: a batch is taken as soon as it is made\n");
	if (r->daemon)
		printf("  decoding    (the split between stages is measured in-process only)\n");
	else if (stages > 0)
		printf("  decoding    decode %.1f%%, augment %.1f%%, emit %.1f%% of %.2f core-seconds\n",
		       (double)r->sg.decode_ns * 100 / stages,
		       (double)r->sg.augment_ns * 100 / stages,
		       (double)r->sg.emit_ns * 100 / stages, stages * 1e-9);
	printf("bottleneck: %s\n", v->text);
	if (!fl)
		return;
	printf("sizing: a batch of %" PRIu64
	       " every %g ms is %.0f samples/s per accelerator; %.3f CPU ms a sample, %g host cores each\n",
	       o->batch, o->step_ms, fl->rate, fl->cpu_ps * 1e3, o->host_cores);
	printf("  %" PRIu32
	       " accelerators kept at AU >= %g%% (%s runs out first: %.2f)\n",
	       fl->n, o->au, fl->limit, fl->n_max);
	if (fl->probed)
		printf("  storage (O_DIRECT, past the page cache): %.1f MB/s in 1 MiB reads, %.0f IOPS of %" PRIu64
		       " kB; %.1f kB and %.2f reads a sample: %.2f accelerators by bandwidth, %.2f by IOPS\n",
		       fl->bw / 1e6, fl->iops, fl->probe_bs / 1024,
		       fl->bytes_ps / 1e3, fl->reads_ps, fl->n_bw, fl->n_iops);
	else
		printf("  storage not probed: %s\n", fl->probe_why);
	if (fl->probed && !fl->binds)
		printf("  (the dataset stays in the page cache, read buffered: after its first epoch storage is not read, and does not bound the fleet)\n");
	printf("  predicted AU: 1: %.0f%%, 2: %.0f%%, 3: %.0f%%, 4: %.0f%%\n",
	       fl->au[0] * 100, fl->au[1] * 100, fl->au[2] * 100,
	       fl->au[3] * 100);
}

static void print_json(const struct bp_cli *o, const struct bp_files *f,
		       const struct stream_config *c, const struct bp_run *r,
		       const struct bp_verdict *v, const struct bp_fleet *fl)
{
	double w = r->seconds > 0 ? r->seconds : 1e-9;
	json_t *j = json_object(), *st = json_object();

	json_object_set_new(j, "dataset", json_string(f->ds->dir));
	json_object_set_new(j, "mode",
			    json_string(r->daemon ? "daemon" : "in-process"));
	json_object_set_new(j, "pipeline",
			    c->pipeline ? json_string(c->pipeline) :
					  json_null());
	json_object_set_new(j, "batch", json_integer((json_int_t)o->batch));
	json_object_set_new(j, "order", json_string(o->order));
	json_object_set_new(j, "direct", json_boolean(c->direct));
	json_object_set_new(j, "cores", json_integer(r->cores));
	json_object_set_new(j, "threads", json_integer(r->threads));
	json_object_set_new(j, "resident_before", json_real(r->resident));
	json_object_set_new(j, "seconds", json_real(r->seconds));
	json_object_set_new(j, "batches",
			    json_integer((json_int_t)r->st.batches));
	json_object_set_new(j, "samples",
			    json_integer((json_int_t)r->st.samples));
	json_object_set_new(j, "bad_samples",
			    json_integer((json_int_t)r->st.bad_samples));
	json_object_set_new(j, "samples_per_s",
			    json_real((double)r->st.samples / w));
	json_object_set_new(j, "bytes_read",
			    json_integer((json_int_t)r->st.bytes_read));
	json_object_set_new(j, "read_bytes_per_s",
			    json_real((double)r->st.bytes_read / w));
	json_object_set_new(j, "reads", json_integer((json_int_t)r->st.reads));
	json_object_set_new(j, "cpu_seconds", json_real(r->cpu_s));
	json_object_set_new(
		j, "cpu_s_per_1000_samples",
		json_real(r->st.samples ?
				  r->cpu_s * 1000 / (double)r->st.samples :
				  0));
	json_object_set_new(j, "cores_busy", json_real(r->cpu_s / w));
	json_object_set_new(j, "reader_cores",
			    json_real((double)r->reader_ns * 1e-9 / w));
	json_object_set_new(
		j, "decoding_cores",
		json_real((double)(r->pool_ns + r->own_ns) * 1e-9 / w));
	json_object_set_new(st, "read_wait_s",
			    json_real((double)r->st.read_wait_ns * 1e-9));
	json_object_set_new(st, "decode_s",
			    json_real((double)r->st.decode_ns * 1e-9));
	json_object_set_new(st, "slot_wait_s",
			    json_real((double)r->st.slot_wait_ns * 1e-9));
	json_object_set_new(st, "decode_cpu_s",
			    json_real((double)r->sg.decode_ns * 1e-9));
	json_object_set_new(st, "augment_cpu_s",
			    json_real((double)r->sg.augment_ns * 1e-9));
	json_object_set_new(st, "emit_cpu_s",
			    json_real((double)r->sg.emit_ns * 1e-9));
	if (r->daemon) {
		json_object_set_new(st, "client_wait_s", json_real(r->wait_s));
		json_object_set_new(st, "next_p50_us",
				    json_real(r->next_p50_us));
		json_object_set_new(st, "next_p99_us",
				    json_real(r->next_p99_us));
		json_object_set_new(j, "daemon_cpu_counted",
				    json_boolean(r->daemon_cpu));
	}
	json_object_set_new(j, "stages", st);
	json_object_set_new(j, "bottleneck",
			    json_pack("{s:s, s:s}", "resource", v->resource,
				      "text", v->text));
	if (fl) {
		json_t *au = json_array();

		for (unsigned n = 0; n < 4; n++)
			json_array_append_new(au, json_real(fl->au[n]));
		json_object_set_new(
			j, "sizing",
			json_pack(
				"{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:s, s:o}",
				"step_ms", o->step_ms, "au_target", o->au / 100,
				"host_cores", o->host_cores,
				"samples_per_s_per_accelerator", fl->rate,
				"cpu_s_per_sample", fl->cpu_ps,
				"accelerators_cpu", fl->n_cpu,
				"accelerators_max", fl->n_max, "accelerators",
				(json_int_t)fl->n, "limit", fl->limit,
				"au_predicted", au));
		json_object_set_new(
			json_object_get(j, "sizing"), "storage",
			fl->probed ?
				json_pack(
					"{s:f, s:f, s:I, s:f, s:f, s:f, s:f, s:b}",
					"bw_bytes_per_s", fl->bw, "iops",
					fl->iops, "rand_bs",
					(json_int_t)fl->probe_bs,
					"bytes_per_sample", fl->bytes_ps,
					"reads_per_sample", fl->reads_ps,
					"accelerators_bw",
					isfinite(fl->n_bw) ? fl->n_bw : -1,
					"accelerators_iops",
					isfinite(fl->n_iops) ? fl->n_iops : -1,
					"binds", fl->binds) :
				json_pack("{s:s}", "not_probed",
					  fl->probe_why));
	}
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
	putchar('\n');
	json_decref(j);
}

/* --- the command -------------------------------------------------------- */

int ctl_bench_pipeline(int argc, char **argv)
{
	static const char usage[] =
		"loaderctl bench pipeline [OPTIONS] DATASET";
	struct bp_cli o = { 0 };
	struct stream_config c = { 0 };
	struct bp_files f = { 0 };
	struct bp_run r = { 0 };
	struct bp_verdict v = { 0 };
	struct bp_fleet fl = { 0 };
	struct diag d = { { 0 } };
	int nargs, help, err;
	bool has_jpeg = false;

	err = opts_parse(bp_table, &o, argc, argv, &nargs, &help, &d);
	if (!err && !help && nargs != 1)
		err = diag_set(&d, LOADER_EUSAGE,
			       nargs ? "one DATASET, not %d" :
				       "a DATASET to read%.0d",
			       nargs);
	if (!err && o.cold && o.warm)
		err = diag_set(&d, LOADER_EUSAGE, "--cold or --warm, not both");
	if (err || help) {
		FILE *out = help ? stdout : stderr;

		if (!help)
			fprintf(stderr, PFX "%s\n", d.msg);
		opts_help(
			out, usage,
			"Run the real pipeline on DATASET in this process, as loaderd would,\n"
			"and say where the time goes and what runs out first.",
			bp_table);
		return help ? CTL_OK : CTL_FAIL;
	}
	plog_set_level(PLOG_WARN);
	err = files_open(&f, argv[0], &d);
	if (err)
		goto fail;
	for (uint32_t i = 0; i < f.ds->schema.nfields; i++) {
		has_jpeg |= f.ds->schema.f[i].kind == FIELD_JPEG;
		r.zstd |= f.ds->schema.f[i].comp != COMP_NONE;
	}
	c = (struct stream_config){
		.batch_size = (uint32_t)o.batch,
		.order = !strcmp(o.order, "sequential") ? ORDER_SEQUENTIAL :
			 !strcmp(o.order, "quasi")	? ORDER_QUASI :
							  ORDER_RANDOM,
		.seed = o.seed,
		.epochs = (uint32_t)o.epochs,
		.direct = o.direct,
		.prefetch_bytes = o.prefetch,
		.pipeline = o.pipeline ? o.pipeline :
			    has_jpeg   ? BP_DEFAULT_PIPELINE :
					 NULL,
		.timing = true,
		.label = "bench",
	};
	err = parse_outputs(o.outputs, &f.ds->schema, &c, &d);
	if (err)
		goto fail;
	for (uint32_t i = 0; i < c.noutputs; i++) {
		int k = schema_find(&f.ds->schema, c.out[i].field);

		r.image |= f.ds->schema.f[k].kind == FIELD_JPEG;
	}
	if (o.cold || o.warm) {
		err = files_cache(&f, o.warm, &d);
		if (err)
			goto fail;
	}
	r.resident = bench_fds_resident(f.fds + 1, f.nfds - 1);
	err = o.socket ? run_daemon(&o, &f, &c, &r, &d) :
			 run_stream(&o, &f, &c, &r, &d);
	if (err)
		goto fail;
	name_bottleneck(&r, &v);
	if (o.step_ms > 0) {
		probe_storage(&o, &f, &r, &fl);
		size_fleet(&o, &r, &fl);
	}
	if (o.json)
		print_json(&o, &f, &c, &r, &v, o.step_ms > 0 ? &fl : NULL);
	else
		print_text(&o, &f, &c, &r, &v, o.step_ms > 0 ? &fl : NULL);
	files_close(&f);
	return CTL_OK;
fail:
	fprintf(stderr, PFX "%s\n", d.msg);
	files_close(&f);
	return CTL_FAIL;
}
