/*
 * ctl_status.c - loaderctl status, streams and stats: what a running
 * loaderd does, asked over its control socket (STATUS, STREAM_INFO).
 *
 * loaderctl speaks the protocol as the daemon does, through the client's
 * protocol headers (client/proto.h, client/msg.h): the one arrow from
 * ctl/ into client/, as from daemon/.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "ctl.h"
#include "daemon_query.h"
#include "escape.h"
#include "loader_error.h"
#include "opts.h"
#include "proto.h"

struct status_cli {
	const char *socket;
	double interval;
	bool watch;
	uint64_t count;
	bool json;
	bool prometheus;
	bool saved;
};

enum status_cmd { CMD_STATUS, CMD_STREAMS, CMD_STATS };

#define ON(cmd) (1u << (cmd))
#define O(f)	offsetof(struct status_cli, f)
/*
 * The options of status, streams and stats, in one table: each with the
 * commands that take it. A command parses and lists only its own
 * (own_opts()), so its --help shows what it takes, and another
 * command's option is an unknown one.
 */
static const struct status_opt {
	unsigned cmds; /* ON(CMD_...) of the commands that take it */
	struct opt opt;
} status_opts[] = {
	{ ON(CMD_STATUS) | ON(CMD_STREAMS) | ON(CMD_STATS),
	  DAEMON_SOCKET_OPT(O(socket)) },
	{ ON(CMD_STATS),
	  { "interval", 'i', OPT_F64, O(interval), "1", "SECONDS",
	    "the time between the two readings rates are taken over", 0.05,
	    3600, 0 } },
	{ ON(CMD_STATS),
	  { "watch", 'w', OPT_FLAG, O(watch), NULL, NULL,
	    "go on, a reading every interval (redrawn on a terminal)", 0, 0,
	    0 } },
	{ ON(CMD_STATS),
	  { "count", 'n', OPT_U64, O(count), "0", "N",
	    "with --watch: stop after N readings (0: until interrupted)", 0, 0,
	    0 } },
	{ ON(CMD_STATUS) | ON(CMD_STREAMS),
	  { "json", 0, OPT_FLAG, O(json), NULL, NULL, "print JSON", 0, 0, 0 } },
	{ ON(CMD_STATS),
	  { "json", 0, OPT_FLAG, O(json), NULL, NULL,
	    "print JSON, one object per reading, a line each", 0, 0, 0 } },
	{ ON(CMD_STATS),
	  { "prometheus", 0, OPT_FLAG, O(prometheus), NULL, NULL,
	    "print Prometheus's text format (counters, not rates)", 0, 0, 0 } },
	{ ON(CMD_STREAMS),
	  { "saved", 0, OPT_FLAG, O(saved), NULL, NULL,
	    "the saved named streams and their positions, instead of the live streams",
	    0, 0, 0 } },
};
#undef O

#define STATUS_NOPTS (sizeof(status_opts) / sizeof(status_opts[0]))

/* cmd's options out of status_opts, into table (STATUS_NOPTS + 1). */
static void own_opts(enum status_cmd cmd, struct opt *table)
{
	size_t n = 0;

	for (size_t i = 0; i < STATUS_NOPTS; i++)
		if (status_opts[i].cmds & ON(cmd))
			table[n++] = status_opts[i].opt;
	table[n] = (struct opt)OPT_END;
}

/* The same stream in an earlier reading, or NULL. */
static const struct proto_stream_info_ok *find(const struct daemon_reading *r,
					       uint64_t session)
{
	for (uint32_t i = 0; r && i < r->n; i++)
		if (r->s[i].session == session)
			return &r->s[i];
	return NULL;
}

/*
 * A stream over an interval: rates, and where its assembler's time went.
 * Against no earlier reading, since the stream opened.
 */
struct figures {
	double secs, samples_s, mb_s;
	double read_pct, decode_pct, slot_pct, waited_pct;
	uint64_t batches;
	const char *bottleneck;
};

static void figures(const struct proto_stream_info_ok *now,
		    const struct proto_stream_info_ok *then, double secs,
		    struct figures *f)
{
	struct proto_stream_info_ok z = { 0 };
	double wall;

	if (!then) {
		then = &z;
		secs = (double)now->age_ms / 1e3;
	}
	memset(f, 0, sizeof(*f));
	f->secs = secs;
	if (secs <= 0)
		secs = 1e-3;
	wall = secs * 1e9;
	f->batches = now->batches - then->batches;
	f->samples_s = (double)(now->samples - then->samples) / secs;
	f->mb_s = (double)(now->bytes_read - then->bytes_read) / secs / 1e6;
	f->read_pct =
		100.0 * (double)(now->read_wait_ns - then->read_wait_ns) / wall;
	f->decode_pct =
		100.0 * (double)(now->decode_ns - then->decode_ns) / wall;
	f->slot_pct =
		100.0 * (double)(now->slot_wait_ns - then->slot_wait_ns) / wall;
	/*
	 * One thread's waits, timed by the daemon, over an interval timed
	 * here: the two clocks' readings differ by the request's trip, which
	 * can take a wait past 100 %. (Decoding is summed over threads.)
	 */
	if (f->read_pct > 100)
		f->read_pct = 100;
	if (f->slot_pct > 100)
		f->slot_pct = 100;
	f->waited_pct = f->batches ? 100.0 *
					     (double)(now->client_waits -
						      then->client_waits) /
					     (double)f->batches :
				     0;
	/*
	 * The assembler waits for one of three things. Mostly for a free
	 * slot: the trainer takes batches more slowly than they are made.
	 * Otherwise the larger of decoding and waiting for the reader is
	 * what the trainer waits for.
	 */
	if (f->slot_pct >= 50)
		f->bottleneck = "trainer";
	else if (f->decode_pct >= f->read_pct)
		f->bottleneck = "decode";
	else
		f->bottleneck = "storage";
}

/*
 * Decode time over the interval from then to now (since the daemon
 * started without then): the pool's use, a fraction of its threads, and
 * the cores all decoding kept busy, streams' own threads included.
 */
static void decode_use(const struct daemon_reading *now,
		       const struct daemon_reading *then, double *pool_use,
		       double *cores)
{
	double secs = then ? (double)(now->t_ns - then->t_ns) * 1e-9 :
			     (double)now->st.uptime_ms * 1e-3;
	uint64_t pool = now->st.pool_busy_ns, own = now->st.stream_busy_ns;

	if (then && pool >= then->st.pool_busy_ns &&
	    own >= then->st.stream_busy_ns) {
		pool -= then->st.pool_busy_ns;
		own -= then->st.stream_busy_ns;
	}
	*pool_use = secs > 0 && now->st.threads ?
			    (double)pool * 1e-9 / secs / now->st.threads :
			    0;
	*cores = secs > 0 ? (double)(pool + own) * 1e-9 / secs : 0;
}

static void print_decode(const struct daemon_reading *now,
			 const struct daemon_reading *then)
{
	double use, cores;

	decode_use(now, then, &use, &cores);
	printf("decode: pool of %" PRIu32
	       " threads %.0f%% busy, %.2f cores decoding with the streams' own threads (%s)\n",
	       now->st.threads, use * 100, cores,
	       then ? "over the interval" : "since start");
}

static void print_status(const struct daemon_reading *r)
{
	const struct proto_status_ok *st = &r->st;
	uint64_t s = st->uptime_ms / 1000;
	char ra[16], rb[16];

	printf("loaderd pid %" PRIu32 ", up %" PRIu64 "h%02" PRIu64
	       "m%02" PRIu64 "s, %" PRIu32
	       " decode threads (+1 per stream), RSS %.1f MB\n",
	       st->pid, s / 3600, s / 60 % 60, s % 60, st->threads,
	       (double)st->rss_bytes / 1e6);
	/* Sizes in the binary units the options that bound them take. */
	printf("sessions %" PRIu32 ", streams %" PRIu32 ", rings %s",
	       st->sessions_all, st->streams_all,
	       opts_size_str(st->ring_bytes, ra, sizeof(ra)));
	if (st->memory_budget)
		printf(", memory %s of %s (rings, prefetch, scratch and shard indexes)",
		       opts_size_str(st->memory_used, ra, sizeof(ra)),
		       opts_size_str(st->memory_budget, rb, sizeof(rb)));
	else
		printf(", memory %s (rings, prefetch, scratch and shard indexes; no budget)",
		       opts_size_str(st->memory_used, ra, sizeof(ra)));
	printf("; limits: ring %s a stream, %s and %" PRIu32
	       " streams a user\n",
	       opts_size_str(st->max_ring_bytes, ra, sizeof(ra)),
	       opts_size_str(st->max_uid_ring_bytes, rb, sizeof(rb)),
	       st->max_uid_streams);
	print_decode(r, NULL);
	printf("state in %s, cache in %s\n", st->state_dir, st->cache_dir);
	if (st->streams != st->streams_all)
		printf("(uid %" PRIu32 " sees its own %" PRIu32
		       " streams; root sees all)\n",
		       st->uid, st->streams);
}

/* A mixture's members, a line each under its stream's. */
static void print_members(const struct proto_stream_info_ok *s)
{
	for (uint32_t m = 0; m < s->nmembers && m < PROTO_MAX_MEMBERS; m++) {
		const struct proto_member_info *mi = &s->member[m];
		char label[4 * sizeof(mi->label)];

		esc_text(label, sizeof(label), mi->label,
			 strnlen(mi->label, sizeof(mi->label)));
		printf("      member %" PRIu32 ": %" PRIu64
		       " samples an epoch, %" PRIu64 " delivered, %" PRIu64
		       " bad, %.1f MB read: %s\n",
		       m, mi->per_epoch, mi->samples, mi->bad_samples,
		       (double)mi->bytes_read / 1e6, label);
	}
}

static void print_table(const struct daemon_reading *now,
			const struct daemon_reading *then)
{
	double secs = then ? (double)(now->t_ns - then->t_ns) / 1e9 : 0;

	printf("%-5s %-7s %-5s %5s %5s %5s %9s %7s %5s %5s %5s %6s %4s %-10s %s\n",
	       "ID", "PID", "UID", "BATCH", "EPOCH", "RING", "SAMPLES/S",
	       "MB/S", "READ%", "DEC%", "SLOT%", "WAITD%", "BAD", "BOTTLENECK",
	       "DATASET");
	for (uint32_t i = 0; i < now->n; i++) {
		const struct proto_stream_info_ok *s = &now->s[i];
		/* A client's path: one cell, whatever is in it. */
		char ds[4 * sizeof(s->dataset)];
		struct figures f;

		figures(s, find(then, s->session), secs, &f);
		esc_text(ds, sizeof(ds), s->dataset,
			 strnlen(s->dataset, sizeof(s->dataset)));
		printf("%-5" PRIu64 " %-7" PRIu32 " %-5" PRIu32 " %5" PRIu32
		       " %5" PRIu32 " %2" PRIu32 "/%-2" PRIu32
		       " %9.0f %7.1f %5.1f %5.1f %5.1f %6.1f %4" PRIu64
		       " %-10s %s\n",
		       s->session, s->pid, s->uid, s->batch_size, s->epoch,
		       s->ring_used, s->slots, f.samples_s, f.mb_s, f.read_pct,
		       f.decode_pct, f.slot_pct, f.waited_pct, s->bad_samples,
		       f.batches ? f.bottleneck : "idle", ds);
		print_members(s);
	}
	if (!now->n)
		printf("(no streams)\n");
}

static json_t *json_reading(const struct daemon_reading *now,
			    const struct daemon_reading *then)
{
	double secs = then ? (double)(now->t_ns - then->t_ns) / 1e9 : 0;
	double use, cores;
	json_t *o = json_object(), *a = json_array();

	json_object_set_new(o, "pid", json_integer(now->st.pid));
	json_object_set_new(o, "uptime_s",
			    json_real((double)now->st.uptime_ms / 1e3));
	json_object_set_new(o, "threads", json_integer(now->st.threads));
	json_object_set_new(o, "rss_bytes",
			    json_integer((json_int_t)now->st.rss_bytes));
	json_object_set_new(o, "sessions", json_integer(now->st.sessions_all));
	json_object_set_new(o, "streams_all",
			    json_integer(now->st.streams_all));
	json_object_set_new(o, "ring_bytes",
			    json_integer((json_int_t)now->st.ring_bytes));
	json_object_set_new(o, "memory_used",
			    json_integer((json_int_t)now->st.memory_used));
	json_object_set_new(o, "memory_budget",
			    json_integer((json_int_t)now->st.memory_budget));
	json_object_set_new(o, "limits",
			    json_pack("{s:I, s:I, s:i}", "max_ring_bytes",
				      (json_int_t)now->st.max_ring_bytes,
				      "max_uid_ring_bytes",
				      (json_int_t)now->st.max_uid_ring_bytes,
				      "max_uid_streams",
				      (int)now->st.max_uid_streams));
	json_object_set_new(o, "interval_s", json_real(secs));
	decode_use(now, then, &use, &cores);
	json_object_set_new(o, "decode_pool_use_pct", json_real(use * 100));
	json_object_set_new(o, "decode_cores", json_real(cores));
	json_object_set_new(o, "state_dir", json_string(now->st.state_dir));
	json_object_set_new(o, "cache_dir", json_string(now->st.cache_dir));
	for (uint32_t i = 0; i < now->n; i++) {
		const struct proto_stream_info_ok *s = &now->s[i];
		json_t *j = json_object();
		struct figures f;

		figures(s, find(then, s->session), secs, &f);
		json_object_set_new(j, "session",
				    json_integer((json_int_t)s->session));
		json_object_set_new(j, "pid", json_integer(s->pid));
		json_object_set_new(j, "uid", json_integer(s->uid));
		json_object_set_new(j, "dataset", json_string(s->dataset));
		json_object_set_new(j, "pipeline", json_string(s->pipeline));
		json_object_set_new(j, "batch_size",
				    json_integer(s->batch_size));
		json_object_set_new(j, "epoch", json_integer(s->epoch));
		json_object_set_new(j, "ring_used", json_integer(s->ring_used));
		json_object_set_new(j, "ring_slots", json_integer(s->slots));
		json_object_set_new(j, "batches",
				    json_integer((json_int_t)s->batches));
		json_object_set_new(j, "samples",
				    json_integer((json_int_t)s->samples));
		json_object_set_new(j, "bytes_read",
				    json_integer((json_int_t)s->bytes_read));
		json_object_set_new(j, "bad_samples",
				    json_integer((json_int_t)s->bad_samples));
		json_object_set_new(j, "samples_per_s", json_real(f.samples_s));
		json_object_set_new(j, "read_mb_per_s", json_real(f.mb_s));
		json_object_set_new(j, "read_wait_pct", json_real(f.read_pct));
		json_object_set_new(j, "decode_pct", json_real(f.decode_pct));
		json_object_set_new(j, "slot_wait_pct", json_real(f.slot_pct));
		json_object_set_new(j, "trainer_waited_pct",
				    json_real(f.waited_pct));
		json_object_set_new(
			j, "bottleneck",
			json_string(f.batches ? f.bottleneck : "idle"));
		if (s->nmembers) {
			json_t *ms = json_array();

			for (uint32_t m = 0;
			     m < s->nmembers && m < PROTO_MAX_MEMBERS; m++) {
				const struct proto_member_info *mi =
					&s->member[m];

				json_array_append_new(
					ms,
					json_pack("{s:s, s:I, s:I, s:I, s:I}",
						  "dataset", mi->label,
						  "per_epoch",
						  (json_int_t)mi->per_epoch,
						  "samples",
						  (json_int_t)mi->samples,
						  "bad_samples",
						  (json_int_t)mi->bad_samples,
						  "bytes_read",
						  (json_int_t)mi->bytes_read));
			}
			json_object_set_new(j, "members", ms);
		}
		json_array_append_new(a, j);
	}
	json_object_set_new(o, "streams", a);
	return o;
}

static void print_json(const struct daemon_reading *now,
		       const struct daemon_reading *then)
{
	json_t *o = json_reading(now, then);

	json_dumpf(o, stdout, JSON_COMPACT | CTL_JSON_REAL);
	putchar('\n');
	json_decref(o);
}

/* Prometheus's loaderd_up: 1 while the daemon answers, 0 when not. */
static void print_up(int up)
{
	printf("# HELP loaderd_up 1 while loaderd answers\n"
	       "# TYPE loaderd_up gauge\nloaderd_up %d\n",
	       up);
	fflush(stdout);
}

/* Prometheus's text exposition format: counters and gauges, no rates. */
/*
 * A mixture's members, labelled by session and member number (their
 * paths are the clients' words, and may not be valid label text).
 */
static void print_prometheus_members(const struct daemon_reading *r)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} m[] = {
#define F(f) offsetof(struct proto_member_info, f)
		{ "loaderd_member_samples_total",
		  "samples of a mixture's member published", F(samples) },
		{ "loaderd_member_bad_samples_total",
		  "samples of a mixture's member that could not be decoded",
		  F(bad_samples) },
		{ "loaderd_member_read_bytes_total",
		  "bytes of a mixture's member read from storage",
		  F(bytes_read) },
#undef F
	};

	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		printf("# HELP %s %s\n# TYPE %s counter\n", m[k].name,
		       m[k].help, m[k].name);
		for (uint32_t i = 0; i < r->n; i++)
			for (uint32_t j = 0;
			     j < r->s[i].nmembers && j < PROTO_MAX_MEMBERS;
			     j++) {
				uint64_t v;

				memcpy(&v,
				       (const char *)&r->s[i].member[j] +
					       m[k].off,
				       sizeof(v));
				printf("%s{session=\"%" PRIu64
				       "\",member=\"%" PRIu32 "\"} %" PRIu64
				       "\n",
				       m[k].name, r->s[i].session, j, v);
			}
	}
}

static void print_prometheus(const struct daemon_reading *r)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
		double scale;
	} m[] = {
#define F(f) offsetof(struct proto_stream_info_ok, f)
		{ "loaderd_stream_batches_total", "counter",
		  "batches published", F(batches), 1 },
		{ "loaderd_stream_samples_total", "counter",
		  "samples published", F(samples), 1 },
		{ "loaderd_stream_read_bytes_total", "counter",
		  "bytes read from storage", F(bytes_read), 1 },
		{ "loaderd_stream_bad_samples_total", "counter",
		  "samples that could not be decoded", F(bad_samples), 1 },
		{ "loaderd_stream_read_wait_seconds_total", "counter",
		  "time waiting for the reader (storage)", F(read_wait_ns),
		  1e-9 },
		{ "loaderd_stream_decode_seconds_total", "counter",
		  "time decoding batches", F(decode_ns), 1e-9 },
		{ "loaderd_stream_slot_wait_seconds_total", "counter",
		  "time waiting for a free ring slot (the trainer)",
		  F(slot_wait_ns), 1e-9 },
		{ "loaderd_stream_trainer_waits_total", "counter",
		  "batches the trainer was waiting for", F(client_waits), 1 },
#undef F
	};

	print_up(1);
	printf("# HELP loaderd_resident_bytes the daemon's resident memory\n"
	       "# TYPE loaderd_resident_bytes gauge\nloaderd_resident_bytes %" PRIu64
	       "\n",
	       r->st.rss_bytes);
	printf("# HELP loaderd_streams streams open\n# TYPE loaderd_streams gauge\n"
	       "loaderd_streams %" PRIu32 "\n",
	       r->st.streams_all);
	printf("# HELP loaderd_sessions sessions connected\n# TYPE loaderd_sessions gauge\n"
	       "loaderd_sessions %" PRIu32 "\n",
	       r->st.sessions_all);
	printf("# HELP loaderd_decode_threads threads of the decode pool\n"
	       "# TYPE loaderd_decode_threads gauge\nloaderd_decode_threads %" PRIu32
	       "\n",
	       r->st.threads);
	printf("# HELP loaderd_decode_busy_seconds_total time spent decoding, by the pool's threads and by the streams' own\n"
	       "# TYPE loaderd_decode_busy_seconds_total counter\n"
	       "loaderd_decode_busy_seconds_total{threads=\"pool\"} %.9g\n"
	       "loaderd_decode_busy_seconds_total{threads=\"stream\"} %.9g\n",
	       (double)r->st.pool_busy_ns * 1e-9,
	       (double)r->st.stream_busy_ns * 1e-9);
	printf("# HELP loaderd_stream_ring_used batches published and not released\n"
	       "# TYPE loaderd_stream_ring_used gauge\n");
	for (uint32_t i = 0; i < r->n; i++)
		printf("loaderd_stream_ring_used{session=\"%" PRIu64
		       "\",pid=\"%" PRIu32 "\",uid=\"%" PRIu32 "\"} %" PRIu32
		       "\n",
		       r->s[i].session, r->s[i].pid, r->s[i].uid,
		       r->s[i].ring_used);
	for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
		printf("# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help,
		       m[k].name, m[k].type);
		for (uint32_t i = 0; i < r->n; i++) {
			uint64_t v;

			memcpy(&v, (const char *)&r->s[i] + m[k].off,
			       sizeof(v));
			printf("%s{session=\"%" PRIu64 "\",pid=\"%" PRIu32
			       "\",uid=\"%" PRIu32 "\"} %.9g\n",
			       m[k].name, r->s[i].session, r->s[i].pid,
			       r->s[i].uid, (double)v * m[k].scale);
		}
	}
	print_prometheus_members(r);
}

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void nap(double secs)
{
	struct timespec ts = { (time_t)secs,
			       (long)((secs - floor(secs)) * 1e9) };

	while (!interrupted && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int run(enum status_cmd cmd, int argc, char **argv)
{
	static const char *const usage[] = {
		"loaderctl status [--socket PATH] [--json]",
		"loaderctl streams [--socket PATH] [--saved] [--json]",
		"loaderctl stats [--socket PATH] [--interval S] [--watch [--count N]] [--json | --prometheus]",
	};
	static const char *const about[] = {
		"The daemon, and its streams since each opened.",
		"Its streams since each opened, a line each.",
		"Its streams over an interval: rates, where the time goes, the bottleneck.",
	};
	struct status_cli o = { 0 };
	struct opt table[STATUS_NOPTS + 1];
	struct daemon_reading a = { 0 }, b = { 0 }, *now = &a, *then = NULL;
	struct diag d = { { 0 } };
	char why[DIAG_MAX], buf[108];
	bool tty = isatty(STDOUT_FILENO);
	int nargs, help, err, fd, rc = CTL_OK;
	uint32_t seq = 0;
	uint64_t shown = 0;

	own_opts(cmd, table);
	err = opts_parse(table, &o, argc, argv, &nargs, &help, &d);
	if (err || help || nargs > 1) {
		FILE *f = help ? stdout : stderr;

		if (!help)
			fprintf(stderr, "loaderctl %s: %s\n", argv[0],
				err ? d.msg : "unexpected argument");
		opts_help(f, usage[cmd], about[cmd], table);
		return help ? CTL_OK : CTL_FAIL;
	}
	if (o.json && o.prometheus) {
		fprintf(stderr,
			"loaderctl %s: --json or --prometheus, not both\n",
			argv[0]);
		return CTL_FAIL;
	}
	/* One exposition a scrape: its HELP and TYPE once, its samples once. */
	if (o.prometheus && o.watch) {
		fprintf(stderr,
			"loaderctl %s: --prometheus prints one reading, as a scrape takes it: not with --watch\n",
			argv[0]);
		return CTL_FAIL;
	}
	fd = daemon_dial(daemon_socket_path(o.socket, buf, sizeof(buf)), &seq,
			 why, sizeof(why));
	if (fd < 0) {
		fprintf(stderr, "loaderctl %s: %s\n", argv[0], why);
		if (o.prometheus)
			print_up(0);
		return CTL_FAIL;
	}
	if (o.saved) {
		rc = ctl_saved_list(fd, &seq, o.json, "loaderctl streams");
		close(fd);
		return rc;
	}
	signal(SIGINT, on_interrupt);
	signal(SIGTERM, on_interrupt);
	err = daemon_read(fd, &seq, now, why, sizeof(why));
	if (!err && cmd == CMD_STATS) {
		/* Rates need two readings. */
		nap(o.interval);
		then = now;
		now = &b;
		err = daemon_read(fd, &seq, now, why, sizeof(why));
	}
	while (!err) {
		if (o.json && cmd == CMD_STATUS) {
			json_t *j = json_reading(now, NULL);

			json_object_set_new(j, "uid",
					    json_integer(now->st.uid));
			json_dumpf(j, stdout, JSON_INDENT(2));
			putchar('\n');
			json_decref(j);
		} else if (o.json) {
			print_json(now, then);
		} else if (o.prometheus) {
			print_prometheus(now);
		} else {
			if (o.watch && tty)
				printf("\033[H\033[2J");
			if (cmd == CMD_STATUS) {
				print_status(now);
				putchar('\n');
			} else if (cmd == CMD_STATS) {
				print_decode(now, then);
			}
			print_table(now, then);
			if (o.watch && !tty)
				putchar('\n');
		}
		fflush(stdout);
		shown++;
		if (cmd != CMD_STATS || !o.watch || interrupted ||
		    (o.count && shown >= o.count))
			break;
		nap(o.interval);
		if (interrupted)
			break;
		/* The newer reading becomes the older one. */
		then = now;
		now = now == &a ? &b : &a;
		err = daemon_read(fd, &seq, now, why, sizeof(why));
	}
	if (err) {
		fprintf(stderr, "loaderctl %s: %s\n", argv[0], why);
		/* The metric a scrape needs most: the daemon did not answer. */
		if (o.prometheus)
			print_up(0);
		rc = CTL_FAIL;
	}
	close(fd);
	daemon_reading_free(&a);
	daemon_reading_free(&b);
	return rc;
}

int ctl_status(int argc, char **argv)
{
	return run(CMD_STATUS, argc, argv);
}

int ctl_streams(int argc, char **argv)
{
	return run(CMD_STREAMS, argc, argv);
}

int ctl_stats(int argc, char **argv)
{
	return run(CMD_STATS, argc, argv);
}
