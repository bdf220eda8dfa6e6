/*
 * server.c - sessions: HELLO, FILES, OPEN, STATS over SOCK_SEQPACKET.
 *
 * The loop thread only answers messages. What can take long runs on
 * libuv's thread pool (uv_queue_work), the reply going out from the
 * after-work callback on the loop: opening a stream (it reads the
 * manifest and every shard's footer from files the client chose) and
 * freeing one (it joins the stream's threads, which finish the batch in
 * progress first: seconds of JPEG decoding).
 *
 * An OPEN of an s3:// dataset holds its thread while it stages, waiting
 * on a store the client chose, which may never answer. So stages are
 * counted, per uid and in all, and run only below both caps
 * (server_limits: max_uid_stages, max_stages, which leaves threads of
 * the pool to everything else); the others wait in srv->stage_q, off
 * the pool, and each is answered by its deadline, its wait included.
 *
 * Lifetimes. A session lives until its poll handle has closed and its
 * OPEN in flight, if any, has completed (ss->refs). The server lives
 * until its two handles have closed, its last session is freed and its
 * last stream teardown has finished (srv->refs); server_free() starts
 * that, and the loop's run finishes it.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fault.h"
#include "loader_error.h"
#include "msg.h"
#include "ncache.h"
#include "openreq.h"
#include "plog.h"
#include "pool.h"
#include "producer.h"
#include "proto.h"
#include "rcache.h"
#include "server.h"
#include "state.h"
#include "stream.h"

#include <xxhash.h>

#define SERVER_ACCEPT_PAUSE_MS 200
/* How often the state is swept for names that expired. */
#define SERVER_EXPIRY_MS (3600 * 1000)
/* How often what was checkpointed is flushed to the disk, at most. */
#define SERVER_SYNC_MS 1000
/*
 * Refusals a session may log a second; the rest are counted and the
 * count logged (a client sending garbage in a loop must not flood the
 * journal). Refused connections are logged as often, all together.
 */
#define SERVER_LOG_BURST 10

/*
 * A named stream's checkpoint: what identifies it and where it started.
 * It moves with the stream, from the OPEN to the session to the
 * teardown, which writes the final position.
 */
struct named {
	char name[PROTO_STREAM_NAME]; /* "" for a stream without a name */
	uint32_t uid, rank, world;
	uint64_t generation;  /* of the job's record (state.h) */
	uint32_t epochs;      /* the epoch it ends before; 0: endless */
	uint32_t start_epoch; /* where this stream started */
	uint64_t start_batch;
	struct order_sched sched; /* to count positions on from there */
	uint64_t written;	  /* batches released at the last checkpoint */
};

/*
 * A named stream's saver: a thread that writes the position as soon as
 * the client releases a batch and then tells the client (ring.h, saved),
 * whose release waits for that. One per named stream, from its OPEN to
 * its teardown, which stops it before the final write.
 */
struct saver {
	pthread_t thread;
	struct server *srv;
	struct state *state;
	struct producer *prod;
	struct named named; /* named.written: released at the last write */
	int stop;	    /* atomic */
	char label[96];
};

/*
 * What one stream holds against its uid's limits. It moves with the
 * stream: from the OPEN in flight, to the session, to the teardown, and
 * is given back when the stream's descriptors and ring are gone.
 */
struct charge {
	uint32_t streams;
	uint64_t bytes; /* ring bytes (reserved while the OPEN runs) */
	uint64_t files; /* dataset descriptors */
	uint64_t mem; /* ring, prefetch and scratch bytes, against the memory limits */
};

/* Per-uid usage, for the limits. Few uids use one node: a list will do. */
struct uid_use {
	uid_t uid;
	uint32_t sessions;
	uint32_t streams;
	uint64_t bytes;
	uint64_t files;	 /* descriptors held for this uid's sessions */
	uint64_t mem;	 /* rings, prefetch and scratch of its streams */
	uint32_t stages; /* s3:// OPENs of its staging on the pool now */
	struct uid_use *next;
};

struct open_job;

struct session {
	struct server *srv;
	uv_poll_t poll;
	int fd; /* closed with the poll handle */
	struct ucred cred;
	char label[96];
	bool hello;
	bool ended;    /* session_end() ran: nothing more is sent */
	unsigned refs; /* the poll handle; an OPEN in flight */
	int *files;
	uint32_t files_total, files_got;
	uint64_t files_charged;	  /* counted in the uid's files */
	struct open_job *opening; /* an OPEN in flight, or NULL */
	/* A dataset in an object store and the client's credentials. */
	struct proto_remote *remote;
	struct openreq_given given; /* POSITIONS so far */
	struct stream *stream;
	struct producer *prod; /* the ring stream fills */
	struct charge charge;  /* what stream holds */
	uint64_t id;
	/* What loaderctl streams shows of the stream. */
	char dataset[PROTO_INFO_TEXT];
	char pipeline[PROTO_INFO_TEXT];
	uint64_t opened_ms;
	struct named named;
	struct saver *saver; /* a named stream's, or NULL */
	/* Its log lines (session_may_log()). */
	uint64_t log_window_ms, log_suppressed;
	uint32_t log_count;
	struct session *next, **pprev;
};

/* An OPEN on the thread pool. */
struct open_job {
	uv_work_t req;
	struct session *ss; /* holds a reference until open_done() */
	struct proto_open open;
	int *fds; /* the session's files, taken */
	uint32_t nfds;
	/* Or the session's REMOTE, taken: staged by open_work(). */
	struct proto_remote *remote;
	uint32_t remote_files; /* descriptors the stage gave the stream */
	bool cancel;	       /* set when the session ends: the stage stops */
	/*
	 * When an s3:// OPEN must be answered (CLOCK_MONOTONIC ms), from its
	 * arrival and s3-stage-timeout then; whether it waits in
	 * srv->stage_q, or counts in the stages running (srv->stages).
	 */
	uint64_t arrived_ms, deadline_ms, stage_timeout_ms;
	bool queued, staging;
	bool uid_full; /* what held it back last: its uid's cap, or all's */
	struct open_job *next_stage;
	struct rcache_stats staged;
	uint64_t budget;      /* ring bytes the uid may still take */
	char budget_why[160]; /* which limit sets it */
	/* Memory the stream may take (ring included), and whose limit. */
	uint64_t mem_left;
	char mem_why[160];
	/*
	 * The limits the stream is made under, copied on the loop: a
	 * reload (server_set_limits()) may change srv->lim meanwhile.
	 */
	uint64_t max_pixels;
	bool direct;
	uint32_t io_depth;
	char dataset[PROTO_INFO_TEXT];
	uint32_t seq;
	struct state *state; /* NULL: no names */
	struct named named;
	bool fresh, resumed;
	/* A named one's job, as read, and whether this OPEN renews it. */
	struct state_job job;
	bool renew;
	uint32_t *from_epoch; /* the old world's positions (a new world) */
	uint64_t *from_batch;
	/* The session's POSITIONS, taken (all of them). */
	struct openreq_given given;
	uint64_t plan; /* the stream's, for OPEN_OK (plan_id()) */
	uint32_t plan_end;
	struct saver *saver;  /* made with the stream, for a named one */
	uint32_t start_epoch; /* where the stream starts */
	uint64_t start_batch;
	struct open_job *next_parked;
	struct charge charge;
	struct stream *stream; /* the result, started */
	struct producer *prod; /* its ring */
	int err;
	struct diag d;
};

/* A stream being freed on the thread pool. */
struct teardown {
	uv_work_t req;
	struct server *srv; /* holds a reference until teardown_done() */
	struct stream *stream;
	struct producer *prod;
	uid_t uid;
	struct charge charge;
	struct state *state;
	struct named named;
	struct saver *saver;
	/* Named teardowns are listed, with the OPENs of the same name that
	 * wait for the final checkpoint before they read it. */
	struct teardown *next;
	struct open_job *parked;
	uint64_t t0;
	char label[96];
};

/* An expiry pass over the state on the thread pool. */
struct expiry_job {
	uv_work_t req;
	struct server *srv; /* holds a reference until expiry_done() */
	uint64_t expire_ms; /* drop records not written for this long */
};

struct server {
	uv_loop_t *loop;
	uv_poll_t poll;
	int fd;
	char path[108];
	/* The socket file made there: removed at stop only if still ours. */
	dev_t sock_dev;
	ino_t sock_ino;
	struct pool *pool;
	struct ncache *cache;  /* the node cache; NULL: off */
	struct rcache *rcache; /* the shard cache of s3:// datasets */
	struct server_limits lim;
	struct session *sessions;
	struct uid_use *uids;
	uint64_t next_id;
	uint64_t mem_used; /* charge.mem of every stream */
	uint64_t started_ms;
	char state_dir[PROTO_INFO_TEXT], cache_dir[PROTO_INFO_TEXT];
	uv_timer_t accept_pause; /* out of descriptors: accept later */
	uv_timer_t expiry;	 /* the state's hourly sweep */
	struct state *state;	 /* NULL: named streams are refused */
	int state_err;		 /* why not (server_state_failed()) */
	char state_why[DIAG_MAX];
	struct teardown *named_down; /* named teardowns not yet done */
	uint64_t synced_ms;	     /* the last state_sync(), atomic */
	bool accept_paused;
	uint32_t nsessions;
	/* s3:// OPENs waiting their turn, oldest first, and those staging. */
	struct open_job *stage_q, **stage_tail;
	uint32_t stages;
	bool pumping;		/* stage_pump() runs */
	uv_timer_t stage_timer; /* while stage_q is not empty */
	char *endpoints;	/* s3-endpoints, copied; NULL: any */
	/* Connections refused for the limits: logged once a second. */
	uint64_t refused_log_ms, refused_unlogged;
	bool inherited; /* the socket came from systemd: not ours to unlink */
	bool sock_gone; /* server_check_socket() found it gone, and said so */
	bool stopping;	/* server_free() ran */
	/* Its two handles open, sessions alive, teardowns queued. */
	unsigned refs;
};

static uint64_t now_ms(void)
{
	return clock_mono_ns() / 1000000;
}

/* The wall clock in ms: when the state's records were written. */
static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The position of named stream n after released batches: the first
 * batch not yet released, and whether that is past its last epoch.
 */
static void named_at(const struct named *n, uint64_t released,
		     struct state_pos *p)
{
	p->generation = n->generation;
	p->epoch = n->start_epoch;
	p->batch = n->start_batch;
	order_advance(&n->sched, &p->epoch, &p->batch, released);
	p->finished = n->epochs && p->epoch >= n->epochs;
	p->updated_ms = wall_ms();
}

/*
 * Write the position of named stream n after released batches (into
 * *out too, unless NULL); sync the file if that was not done for a
 * while. Off the loop.
 */
static void named_write(struct server *srv, struct state *st,
			const struct named *n, uint64_t released,
			const char *label, struct state_pos *out)
{
	struct state_pos r;
	struct diag d;
	uint64_t now = now_ms();

	named_at(n, released, &r);
	if (state_put_pos(st, n->uid, n->name, n->rank, &r, &d))
		plog(PLOG_WARN, "%s: stream \"%s\": checkpoint: %s", label,
		     n->name, d.msg);
	if (now - __atomic_load_n(&srv->synced_ms, __ATOMIC_RELAXED) >=
	    SERVER_SYNC_MS) {
		__atomic_store_n(&srv->synced_ms, now, __ATOMIC_RELAXED);
		state_sync(st);
	}
	if (out)
		*out = r;
}

/* How long the saver sleeps at most between looks at the index. */
#define SAVER_POLL_NS (200 * 1000000ll)

static void *saver_main(void *arg)
{
	struct saver *sv = arg;

	pthread_setname_np(pthread_self(), "ld-save");
	for (;;) {
		uint64_t rel = producer_released(sv->prod);

		if (rel != sv->named.written) {
			named_write(sv->srv, sv->state, &sv->named, rel,
				    sv->label, NULL);
			sv->named.written = rel;
			producer_set_saved(sv->prod, rel);
		}
		if (__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE))
			break;
		producer_wait_release(sv->prod, (uint32_t)rel, SAVER_POLL_NS);
	}
	return NULL;
}

/* Start n's saver on prod; returns it, or NULL (then no saver). */
static struct saver *saver_start(struct server *srv, struct state *st,
				 struct producer *prod, const struct named *n,
				 const char *label)
{
	struct saver *sv = mem_calloc(1, sizeof(*sv));

	if (!sv)
		return NULL;
	sv->srv = srv;
	sv->state = st;
	sv->prod = prod;
	sv->named = *n;
	snprintf(sv->label, sizeof(sv->label), "%s", label);
	if (fault_alloc() ||
	    pthread_create(&sv->thread, NULL, saver_main, sv)) {
		free(sv);
		return NULL;
	}
	return sv;
}

/* Stop and free a saver (off the loop: it joins). NULL is a no-op. */
static void saver_stop(struct saver *sv)
{
	if (!sv)
		return;
	__atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
	producer_wake_saver(sv->prod);
	pthread_join(sv->thread, NULL);
	free(sv);
}

/* The uid's entry if it has one (never allocates: for giving back). */
static struct uid_use *uid_find(struct server *srv, uid_t uid)
{
	struct uid_use *u;

	for (u = srv->uids; u; u = u->next)
		if (u->uid == uid)
			return u;
	return NULL;
}

/* The uid's entry, made on its first use; NULL when out of memory. */
static struct uid_use *uid_use(struct server *srv, uid_t uid)
{
	struct uid_use *u = uid_find(srv, uid);

	if (u)
		return u;
	u = mem_calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = srv->uids;
	srv->uids = u;
	return u;
}

static void charge_release(struct server *srv, uid_t uid, struct charge *c)
{
	struct uid_use *u = uid_find(srv, uid);

	if (u) {
		u->streams -= c->streams;
		u->bytes -= c->bytes;
		u->files -= c->files;
		u->mem -= c->mem;
	}
	srv->mem_used -= c->mem;
	memset(c, 0, sizeof(*c));
}

static void server_put(struct server *srv)
{
	if (--srv->refs)
		return;
	while (srv->uids) {
		struct uid_use *u = srv->uids;

		srv->uids = u->next;
		free(u);
	}
	/* Every stream has been freed: no set of the cache is attached. */
	ncache_free(srv->cache);
	free(srv->endpoints);
	free(srv);
}

/* Credentials are wiped before their memory is given back. */
static void remote_free(struct proto_remote *r)
{
	if (!r)
		return;
	explicit_bzero(r, sizeof(*r));
	free(r);
}

static uint64_t rss_bytes(void)
{
	unsigned long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * May session ss log one more line now? SERVER_LOG_BURST a second; past
 * that the lines are counted, and the count is logged when the next
 * second's first line is (or the session ends).
 */
static bool session_may_log(struct session *ss)
{
	uint64_t now = now_ms();

	if (now - ss->log_window_ms >= 1000) {
		if (ss->log_suppressed)
			plog(PLOG_WARN,
			     "%s: %" PRIu64 " more refusals not logged",
			     ss->label, ss->log_suppressed);
		ss->log_window_ms = now;
		ss->log_count = 0;
		ss->log_suppressed = 0;
	}
	if (ss->log_count < SERVER_LOG_BURST) {
		ss->log_count++;
		return true;
	}
	ss->log_suppressed++;
	return false;
}

/* An ERROR message of code and reason on fd, answering seq. */
static void send_error(int fd, uint32_t seq, int code, const char *reason)
{
	struct {
		struct proto_error e;
		char text[PROTO_REASON_MAX];
	} m;
	size_t n = strnlen(reason, PROTO_REASON_MAX);

	m.e.code = code;
	m.e.len = (uint32_t)n;
	memcpy(m.text, reason, n);
	/*
	 * A reply that cannot go (the peer hung up: its poll reports it and
	 * ends the session; or it does not read and its socket is full:
	 * never wait on one client) is the peer's loss alone. The same holds
	 * for every reply below but OPEN_OK, which hands over a stream.
	 */
	(void)msg_send(fd, PROTO_ERROR, seq, &m, (uint32_t)(sizeof(m.e) + n),
		       NULL, 0);
}

static void reply_error(struct session *ss, uint32_t seq, int code,
			const char *reason)
{
	/*
	 * A refusal for want of the daemon's own resources (disk, memory,
	 * descriptors, I/O) is the operator's to see; any other is the
	 * client's affair.
	 */
	bool ours = code == -ENOSPC || code == -ENOMEM || code == -EIO ||
		    code == -ENFILE;

	if (session_may_log(ss))
		plog(ours ? PLOG_WARN : PLOG_INFO, "%s: refused: %s", ss->label,
		     reason);
	send_error(ss->fd, seq, code, reason);
}

/* The end of an OPEN's allocation window (fault.h): the tests read this. */
static void fault_open_note(const struct session *ss)
{
	switch (fault_open_end()) {
	case FAULT_OPEN_UNARMED: break;
	case FAULT_OPEN_PASSED:
		plog(PLOG_WARN, "%s: fault: no allocation of this OPEN failed",
		     ss->label);
		break;
	case FAULT_OPEN_FAILED:
		plog(PLOG_WARN,
		     "%s: fault: an allocation of this OPEN failed on purpose",
		     ss->label);
		break;
	}
}

/* An OPEN refused before its job was queued: its window ends too. */
static void open_refused(struct session *ss, uint32_t seq, int code,
			 const char *reason)
{
	fault_open_note(ss);
	reply_error(ss, seq, code, reason);
}

static void close_files(struct session *ss)
{
	for (uint32_t i = 0; i < ss->files_got; i++)
		close(ss->files[i]);
	free(ss->files);
	ss->files = NULL;
	ss->files_got = ss->files_total = 0;
}

static void open_work(uv_work_t *req);
static void open_done(uv_work_t *req, int status);

/* ---- s3:// OPENs: their turn on the pool, their deadline ---------------- */

static void stage_unqueue(struct server *srv, struct open_job *j)
{
	struct open_job **pp = &srv->stage_q;

	while (*pp && *pp != j)
		pp = &(*pp)->next_stage;
	if (!*pp)
		return;
	*pp = j->next_stage;
	if (srv->stage_tail == &j->next_stage)
		srv->stage_tail = pp;
	j->next_stage = NULL;
	j->queued = false;
}

/* The time an s3:// OPEN has to be answered in, for messages. */
static double stage_secs(const struct open_job *j)
{
	return (double)j->stage_timeout_ms / 1000.0;
}

/*
 * Queued job j's deadline passed before it had its turn: refuse it,
 * with what held it back.
 */
static void stage_expire(struct server *srv, struct open_job *j)
{
	char held[160];

	if (j->uid_full)
		snprintf(held, sizeof(held),
			 "uid %u's earlier ones took its %" PRIu32
			 " at once (max-uid-stages)",
			 (unsigned)j->ss->cred.uid, srv->lim.max_uid_stages);
	else
		snprintf(
			held, sizeof(held),
			"all users' took the %" PRIu32
			" at once that loaderd runs (half of libuv's thread pool)",
			srv->lim.max_stages);
	j->err = diag_set(
		&j->d, -ETIMEDOUT,
		"%s: not staged within %g s (s3-stage-timeout): no turn came to stage it: %s",
		j->remote->url, stage_secs(j), held);
	open_done(&j->req, 0);
}

static void on_stage_timer(uv_timer_t *t);

/* The least time left that an s3:// OPEN's stage starts with. */
#define STAGE_MIN_MS 1000

/*
 * Start the queued s3:// OPENs whose uid and the daemon are below their
 * caps, oldest first, and refuse those whose deadline has passed. Runs
 * whenever that may have changed: an OPEN queued or done, limits
 * reloaded, and every 100 ms while any waits (deadlines).
 */
static void stage_pump(struct server *srv)
{
	struct open_job *j, *next;
	uint64_t now = now_ms();

	/* open_done() of a job refused here pumps again: once is enough. */
	if (srv->pumping)
		return;
	srv->pumping = true;
	for (j = srv->stage_q; j; j = next) {
		struct uid_use *u = uid_find(srv, j->ss->cred.uid);

		next = j->next_stage;
		if (now >= j->deadline_ms) {
			stage_unqueue(srv, j);
			stage_expire(srv, j);
			continue;
		}
		/*
		 * A turn that comes with less than STAGE_MIN_MS left could
		 * not even connect: it waits for its deadline instead.
		 */
		if (!u || u->stages >= srv->lim.max_uid_stages) {
			j->uid_full = true;
			continue;
		}
		if (srv->stages >= srv->lim.max_stages) {
			j->uid_full = false;
			continue;
		}
		if (j->deadline_ms - now < STAGE_MIN_MS)
			continue;
		stage_unqueue(srv, j);
		j->staging = true;
		srv->stages++;
		u->stages++;
		if (uv_queue_work(srv->loop, &j->req, open_work, open_done))
			open_done(&j->req, UV_ECANCELED);
	}
	srv->pumping = false;
	if (!srv->stopping) {
		if (srv->stage_q &&
		    !uv_is_active((uv_handle_t *)&srv->stage_timer))
			(void)uv_timer_start(&srv->stage_timer, on_stage_timer,
					     100, 100);
		else if (!srv->stage_q)
			(void)uv_timer_stop(&srv->stage_timer);
	}
}

static void on_stage_timer(uv_timer_t *t)
{
	stage_pump(t->data);
}

/*
 * Queue job j: an s3:// OPEN waits for its turn (stage_pump() starts
 * it, the caller calls that), any other runs on the pool at once.
 */
static int open_submit(struct server *srv, struct open_job *j)
{
	if (!j->remote)
		return uv_queue_work(srv->loop, &j->req, open_work, open_done);
	j->queued = true;
	j->next_stage = NULL;
	*srv->stage_tail = j;
	srv->stage_tail = &j->next_stage;
	return 0;
}

/* A port, [p, end): 1..65535 in decimal, into *port; false if not one. */
static bool parse_port(const char *p, const char *end, unsigned *port)
{
	unsigned v = 0;

	if (p == end)
		return false;
	for (; p < end; p++) {
		if (!isdigit((unsigned char)*p) || v > 6553)
			return false;
		v = v * 10 + (unsigned)(*p - '0');
	}
	if (!v || v > 65535)
		return false;
	*port = v;
	return true;
}

/*
 * The host and port an endpoint URL (scheme://[user@]host[:port][/...])
 * connects to: the host lower-cased, an IPv6 address without its
 * brackets, the scheme's port when none is named. False for a URL that
 * names none.
 */
static bool endpoint_split(const char *url, char *host, size_t n,
			   unsigned *port)
{
	const char *a = strstr(url, "://"), *end, *h, *he, *p = NULL;
	bool https;
	size_t len;

	if (!a)
		return false;
	https = a - url == 5 && !strncasecmp(url, "https", 5);
	a += 3;
	end = a + strcspn(a, "/?#");
	for (const char *c = a; c < end; c++)
		if (*c == '@')
			a = c + 1;
	if (*a == '[') {
		h = a + 1;
		he = memchr(h, ']', (size_t)(end - h));
		if (!he)
			return false;
		if (he + 1 < end) {
			if (he[1] != ':')
				return false;
			p = he + 2;
		}
	} else {
		h = a;
		he = memchr(h, ':', (size_t)(end - h));
		if (he)
			p = he + 1;
		else
			he = end;
	}
	len = (size_t)(he - h);
	if (!len || len >= n)
		return false;
	for (size_t i = 0; i < len; i++)
		host[i] = (char)tolower((unsigned char)h[i]);
	host[len] = '\0';
	*port = https ? 443 : 80;
	return !p || parse_port(p, end, port);
}

/*
 * One s3-endpoints entry, e[0..len): HOST, HOST:PORT, [IPV6] or
 * [IPV6]:PORT. The host pattern lower-cased into host, the port into
 * *port (0: any). False for one that is not such.
 */
static bool entry_split(const char *e, size_t len, char *host, size_t n,
			unsigned *port)
{
	const char *end = e + len, *h = e, *he, *p = NULL;

	if (*e == '[') {
		h = e + 1;
		he = memchr(h, ']', (size_t)(end - h));
		if (!he || (he + 1 < end && he[1] != ':'))
			return false;
		if (he + 1 < end)
			p = he + 2;
	} else {
		he = memchr(h, ':', len);
		if (he && memchr(he + 1, ':', (size_t)(end - he - 1)))
			return false; /* a bare IPv6 address: brackets */
		if (he)
			p = he + 1;
		else
			he = end;
	}
	if (he == h || (size_t)(he - h) >= n)
		return false;
	for (size_t i = 0; i < (size_t)(he - h); i++)
		host[i] = (char)tolower((unsigned char)h[i]);
	host[he - h] = '\0';
	*port = 0;
	if (p && end - p == 1 && *p == '*')
		return true;
	return !p || parse_port(p, end, port);
}

#define ENDPOINT_SEP ", \t"

int server_endpoints_check(const char *list, struct diag *d)
{
	const char *e = list;

	while (e && *e) {
		size_t len;
		char host[256];
		unsigned port;

		e += strspn(e, ENDPOINT_SEP);
		len = strcspn(e, ENDPOINT_SEP);
		if (len && !entry_split(e, len, host, sizeof(host), &port))
			return diag_set(
				d, LOADER_EUSAGE,
				"s3-endpoints: \"%.*s\" is not HOST, HOST:PORT or [IPV6]:PORT",
				(int)len, e);
		e += len;
	}
	return 0;
}

/*
 * May an s3:// OPEN make the daemon connect to endpoint url, by
 * s3-endpoints? Its host and port go into hp, for the refusal.
 */
static bool endpoint_allowed(const struct server *srv, const char *url,
			     char *hp, size_t n)
{
	const char *e = srv->endpoints;
	bool any = !e || !e[strspn(e, ENDPOINT_SEP)];
	char host[256];
	unsigned port;

	if (!endpoint_split(url, host, sizeof(host), &port)) {
		/* No host to connect to: libcurl refuses it, if it may. */
		snprintf(hp, n, "\"%.200s\"", url);
		return any;
	}
	snprintf(hp, n, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	if (any)
		return true;
	while (*e) {
		char pat[256];
		unsigned pport;
		size_t len;

		e += strspn(e, ENDPOINT_SEP);
		len = strcspn(e, ENDPOINT_SEP);
		if (len && entry_split(e, len, pat, sizeof(pat), &pport) &&
		    (!pport || pport == port) && !fnmatch(pat, host, 0))
			return true;
		e += len;
	}
	return false;
}

/*
 * Queue the OPENs that waited for a named stream's teardown: its final
 * checkpoint is written, they may read it now.
 */
static void open_unpark(struct server *srv, struct open_job *j)
{
	while (j) {
		struct open_job *next = j->next_parked;
		int err = open_submit(srv, j);

		if (err)
			open_done(&j->req, UV_ECANCELED);
		j = next;
	}
	stage_pump(srv);
}

static void teardown_work(uv_work_t *req)
{
	struct teardown *t = req->data;

	stream_free(t->stream);
	saver_stop(t->saver);
	t->saver = NULL;
	/*
	 * The stream's threads are gone and the client with them (or it is
	 * going): what it released is final. Written before the ring goes,
	 * so that a client of the same name that opens next resumes after
	 * every batch this one released.
	 */
	if (t->named.name[0] && t->prod && t->state) {
		struct state_pos r;

		named_write(t->srv, t->state, &t->named,
			    producer_released(t->prod), t->label, &r);
		state_sync(t->state);
		plog(PLOG_INFO,
		     "%s: stream \"%s\" rank %" PRIu32
		     " saved at epoch %" PRIu32 " batch %" PRIu64 "%s",
		     t->label, t->named.name, t->named.rank, r.epoch, r.batch,
		     r.finished ? " (finished)" : "");
	}
	producer_free(t->prod);
}

static void teardown_done(uv_work_t *req, int status)
{
	struct teardown *t = req->data;

	/*
	 * status is 0: nothing cancels a teardown, it must run. The uid
	 * gets its stream, ring bytes and descriptors back only now, when
	 * the ring is unmapped and the files closed, so that its limits
	 * bound what the daemon really holds. Given back at once, a client
	 * that reconnects in a loop could pile up streams still being torn
	 * down (each with its ring and threads) past its limits.
	 */
	charge_release(t->srv, t->uid, &t->charge);
	plog(PLOG_INFO, "%s: stream freed after %" PRIu64 " ms", t->label,
	     now_ms() - t->t0);
	if (t->named.name[0]) {
		struct teardown **pp = &t->srv->named_down;

		while (*pp && *pp != t)
			pp = &(*pp)->next;
		if (*pp)
			*pp = t->next;
		open_unpark(t->srv, t->parked);
	}
	server_put(t->srv);
	free(t);
}

/*
 * Free stream s off the loop: stream_free() joins the stream's threads,
 * which first finish the batch in progress. c (what s holds) moves to
 * the teardown, and is given back when it is done.
 */
static void teardown(struct server *srv, struct stream *s, struct producer *pr,
		     uid_t uid, struct charge *c, const struct named *n,
		     struct saver *sv, const char *label)
{
	struct teardown *t = mem_calloc(1, sizeof(*t));
	int err = t ? 0 : -ENOMEM;

	if (t) {
		t->req.data = t;
		t->srv = srv;
		t->stream = s;
		t->prod = pr;
		t->uid = uid;
		t->charge = *c;
		if (n && n->name[0] && srv->state) {
			t->named = *n;
			t->state = srv->state;
		}
		t->saver = sv;
		t->t0 = now_ms();
		snprintf(t->label, sizeof(t->label), "%s", label);
		err = uv_queue_work(srv->loop, &t->req, teardown_work,
				    teardown_done);
	}
	if (err) {
		/* Better a loop that waits once than a stream that leaks. */
		plog(PLOG_WARN, "%s: freeing the stream on the loop: %s", label,
		     loader_strerror(err));
		free(t);
		stream_free(s);
		saver_stop(sv);
		if (n && n->name[0] && srv->state && pr)
			named_write(srv, srv->state, n, producer_released(pr),
				    label, NULL);
		producer_free(pr);
		charge_release(srv, uid, c);
		return;
	}
	if (t->named.name[0]) {
		t->next = srv->named_down;
		srv->named_down = t;
	}
	memset(c, 0, sizeof(*c));
	srv->refs++;
}

static void session_put(struct session *ss)
{
	struct server *srv = ss->srv;

	if (--ss->refs)
		return;
	free(ss);
	server_put(srv);
}

static void session_closed(uv_handle_t *h)
{
	struct session *ss = h->data;

	/* Closed only now: libuv is done with it, the number can be reused. */
	close(ss->fd);
	session_put(ss);
}

/*
 * The client is gone (or the daemon stops): stop reading and replying,
 * and free what the session holds. Its stream is torn down off the loop;
 * an OPEN in flight ends its stream itself when it completes.
 */
static void session_end(struct session *ss, const char *why)
{
	struct uid_use *u;

	if (ss->ended)
		return;
	ss->ended = true;
	if (ss->log_suppressed)
		plog(PLOG_WARN, "%s: %" PRIu64 " more refusals not logged",
		     ss->label, ss->log_suppressed);
	plog(PLOG_INFO, "%s: session ends: %s", ss->label, why);
	if (ss->stream) {
		teardown(ss->srv, ss->stream, ss->prod, ss->cred.uid,
			 &ss->charge, &ss->named, ss->saver, ss->label);
		ss->saver = NULL;
		ss->stream = NULL;
		ss->prod = NULL;
	}
	/*
	 * An OPEN still queued is cancelled (open_done() then closes its
	 * descriptors); one already running cannot be, and uv_cancel() says
	 * so with UV_EBUSY: it completes, and open_done() frees its stream.
	 */
	if (ss->opening && ss->opening->queued) {
		/* Waiting for its turn, off the pool: it ends here. */
		struct open_job *j = ss->opening;

		stage_unqueue(ss->srv, j);
		open_done(&j->req, UV_ECANCELED);
	} else if (ss->opening) {
		__atomic_store_n(&ss->opening->cancel, true, __ATOMIC_RELAXED);
		(void)uv_cancel((uv_req_t *)&ss->opening->req);
	}
	u = uid_find(ss->srv, ss->cred.uid);
	if (u) {
		u->files -= ss->files_charged;
		u->sessions--;
	}
	ss->srv->nsessions--;
	ss->files_charged = 0;
	close_files(ss);
	remote_free(ss->remote);
	ss->remote = NULL;
	openreq_given_clear(&ss->given);
	*ss->pprev = ss->next;
	if (ss->next)
		ss->next->pprev = ss->pprev;
	uv_close((uv_handle_t *)&ss->poll, session_closed);
}

static void on_hello(struct session *ss, const struct proto_hdr *h,
		     const struct proto_hello *m)
{
	struct proto_hello_ok ok = {
		.version = PROTO_VERSION,
		.max_fds = PROTO_MAX_FDS,
		.max_ring_bytes = ss->srv->lim.max_ring_bytes,
		.pid = (uint32_t)getpid(),
	};

	if (m->version != PROTO_VERSION) {
		reply_error(ss, h->seq, LOADER_EVERSION,
			    "protocol version not supported");
		return;
	}
	if (m->flags) {
		char why[64];

		snprintf(why, sizeof(why),
			 "HELLO flags %#" PRIx32 ": none are defined",
			 m->flags);
		reply_error(ss, h->seq, LOADER_EPROTO, why);
		return;
	}
	ss->hello = true;
	/* A lost reply is the peer's alone (see reply_error()). */
	(void)msg_send(ss->fd, PROTO_HELLO_OK, h->seq, &ok, sizeof(ok), NULL,
		       0);
}

static void on_files(struct session *ss, const struct proto_hdr *h,
		     const struct proto_files *m, int *fds, unsigned nfds)
{
	struct uid_use *u;
	char why[160];
	int code = LOADER_EPROTO;

	if (!ss->hello || ss->stream || ss->opening || ss->remote) {
		snprintf(why, sizeof(why), "FILES %s",
			 !ss->hello ? "before HELLO" :
			 ss->remote ? "after REMOTE" :
				      "after OPEN");
		goto bad;
	}
	if (m->total == 0 || m->total > PROTO_MAX_FILES ||
	    (ss->files_total && m->total != ss->files_total) ||
	    m->first != ss->files_got || m->count != nfds || m->count == 0 ||
	    m->count > m->total - m->first) {
		snprintf(why, sizeof(why),
			 "FILES first %" PRIu32 " count %" PRIu32
			 " total %" PRIu32
			 " with %u descriptors does not follow the %" PRIu32
			 " files received",
			 m->first, m->count, m->total, nfds, ss->files_got);
		goto bad;
	}
	if (!ss->files) {
		ss->files = mem_calloc(m->total, sizeof(int));
		if (!ss->files) {
			snprintf(why, sizeof(why), "out of memory");
			goto bad;
		}
		ss->files_total = m->total;
	}
	u = uid_use(ss->srv, ss->cred.uid);
	if (!u || u->files + nfds > ss->srv->lim.max_uid_files) {
		snprintf(
			why, sizeof(why),
			"uid %u holds %" PRIu64
			" dataset descriptors in this daemon; %u more would pass max-uid-files %" PRIu64,
			(unsigned)ss->cred.uid, u ? u->files : 0, nfds,
			ss->srv->lim.max_uid_files);
		code = -EMFILE;
		goto bad;
	}
	for (unsigned i = 0; i < nfds; i++) {
		struct stat st;

		int fl;

		/* Only regular files: a pipe or socket could stall us. */
		if (fstat(fds[i], &st) || !S_ISREG(st.st_mode)) {
			snprintf(why, sizeof(why),
				 "file %" PRIu32 " is not a regular file",
				 m->first + i);
			goto bad;
		}
		/*
		 * Opened for reading: a write-only or O_PATH descriptor
		 * would fail every read, after the OPEN seemed to work.
		 */
		fl = fcntl(fds[i], F_GETFL);
		if (fl < 0 || (fl & O_PATH) || (fl & O_ACCMODE) == O_WRONLY) {
			snprintf(
				why, sizeof(why),
				"file %" PRIu32
				" is not open for reading (write-only or O_PATH)",
				m->first + i);
			goto bad;
		}
	}
	memcpy(ss->files + ss->files_got, fds, nfds * sizeof(int));
	ss->files_got += nfds;
	ss->files_charged += nfds;
	u->files += nfds;
	return;
bad:
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	reply_error(ss, h->seq, code, why);
}

/*
 * A dataset in an object store, with the client's credentials: kept
 * until the OPEN takes it. Every string must be terminated; the values
 * are checked where they are used (aws_url_parse(), the endpoint's
 * scheme), and their errors go back with the OPEN.
 */
static void on_remote(struct session *ss, const struct proto_hdr *h,
		      const struct proto_remote *m)
{
	const char *why = NULL;
	int code = LOADER_EPROTO;

	if (!ss->hello || ss->stream || ss->opening)
		why = !ss->hello ? "REMOTE before HELLO" : "REMOTE after OPEN";
	else if (ss->files_total || ss->remote)
		why = ss->remote ? "a second REMOTE" : "REMOTE after FILES";
	else if (!memchr(m->url, '\0', sizeof(m->url)) ||
		 !memchr(m->endpoint, '\0', sizeof(m->endpoint)) ||
		 !memchr(m->region, '\0', sizeof(m->region)) ||
		 !memchr(m->access_key, '\0', sizeof(m->access_key)) ||
		 !memchr(m->secret_key, '\0', sizeof(m->secret_key)) ||
		 !memchr(m->session_token, '\0', sizeof(m->session_token)))
		why = "REMOTE with a string not terminated";
	else if (m->addressing > AWS_ADDR_VIRTUAL || m->reserved)
		why = "REMOTE with an unknown addressing style or reserved bits";
	else if (!ss->srv->rcache) {
		code = -ENOTSUP;
		why = "this loaderd has no shard cache for s3:// datasets (its cache directory could not be made, or libcurl could not be initialised: see its log)";
	}
	if (why) {
		reply_error(ss, h->seq, code, why);
		return;
	}
	ss->remote = malloc(sizeof(*ss->remote));
	if (!ss->remote) {
		reply_error(ss, h->seq, -ENOMEM, "out of memory");
		return;
	}
	memcpy(ss->remote, m, sizeof(*m));
}

/*
 * Where an earlier world's ranks stopped, as the trainer's checkpoint
 * kept them: gathered in rank order until the OPEN takes them. Their
 * values are the client's to choose (they only say which of its own
 * samples it gets next); open_work() checks them against the dataset.
 */
static void on_positions(struct session *ss, const struct proto_hdr *h,
			 const struct proto_positions *m)
{
	struct diag d;
	int err;

	if (!ss->hello || ss->stream || ss->opening) {
		reply_error(ss, h->seq, LOADER_EPROTO,
			    !ss->hello ? "POSITIONS before HELLO" :
					 "POSITIONS after OPEN");
		return;
	}
	err = openreq_positions(&ss->given, m, &d);
	if (err)
		reply_error(ss, h->seq, err == -ENOMEM ? err : LOADER_EPROTO,
			    d.msg);
}

/* The identity of a dataset: XXH3-64 of its manifest, read from fd. */
static int dataset_id(int fd, uint64_t *id, struct diag *d)
{
	XXH3_state_t *x = XXH3_createState();
	unsigned char buf[65536];
	uint64_t off = 0;
	ssize_t n;

	if (!x)
		return diag_set(d, -ENOMEM, "out of memory");
	XXH3_64bits_reset(x);
	while ((n = pread(fd, buf, sizeof(buf), (off_t)off)) > 0 &&
	       off < (64u << 20)) {
		XXH3_64bits_update(x, buf, (size_t)n);
		off += (uint64_t)n;
	}
	*id = XXH3_64bits_digest(x);
	XXH3_freeState(x);
	if (n < 0)
		return diag_set(d, -errno, "manifest: %s", strerror(errno));
	return 0;
}

/*
 * The identity of the options that fix a job's order (DESIGN.md,
 * "Sample order"): batch size, order, seed, drop_last. Rank and world
 * deal it out (the job record keeps the world; a new one resumes
 * elastically). Outputs, pipeline and threads change bytes or speed,
 * not the order, and may change across a resume; so may the number of
 * epochs.
 */
static uint64_t opts_id(const struct stream_config *c)
{
	struct {
		uint32_t batch, order;
		uint64_t seed;
		uint32_t drop_last, pad;
	} k;

	memset(&k, 0, sizeof(k));
	k.batch = c->batch_size ? c->batch_size : STREAM_DEFAULT_BATCH;
	k.order = (uint32_t)c->order;
	k.seed = c->seed;
	k.drop_last = c->drop_last;
	return XXH3_64bits(&k, sizeof(k));
}

/* A name whose every epoch up to end was released: say so. */
static int named_finished(struct open_job *j, uint32_t end)
{
	return diag_set(&j->d, LOADER_EEND,
			"stream \"%s\" has released every batch of its %" PRIu32
			" epochs; ask for more epochs, or a fresh start",
			j->named.name, end);
}

/*
 * This rank starts at (epoch, batch), and runs to the job's end (0:
 * endless); a start at or past the end says the name is finished.
 */
static int named_start(struct open_job *j, struct stream_config *c,
		       uint32_t epoch, uint64_t batch, uint32_t end)
{
	if (end && epoch >= end)
		return named_finished(j, end);
	c->start_epoch = epoch;
	c->start_batch = batch;
	c->epochs = end ? end - epoch : 0;
	return 0;
}

/*
 * The ranks of world `from` stopped at j->from_epoch[r], from_batch[r]:
 * the rest of their epochs is dealt to this world (order.h, "Elastic
 * resume"), from the least of those epochs; the record is renewed.
 */
static int named_go_on(struct open_job *j, struct stream_config *c,
		       uint32_t from, uint32_t end)
{
	uint32_t lo = UINT32_MAX;
	int err;

	for (uint32_t r = 0; r < from; r++)
		if (j->from_epoch[r] < lo)
			lo = j->from_epoch[r];
	err = named_start(j, c, lo, 0, end);
	if (err)
		return err;
	c->from_world = from;
	c->from_epoch = j->from_epoch;
	c->from_batch = j->from_batch;
	j->renew = true;
	plog(PLOG_INFO,
	     "%s: stream \"%s\" goes on from world %" PRIu32
	     " with world %" PRIu32 " (rank %" PRIu32 "), from epoch %" PRIu32,
	     j->ss->label, j->named.name, from, c->world ? c->world : 1,
	     c->rank, lo);
	return 0;
}

/* Room for the positions of an old world of n ranks. */
static int named_from_alloc(struct open_job *j, uint32_t n)
{
	j->from_epoch = mem_calloc(n, sizeof(*j->from_epoch));
	j->from_batch = mem_calloc(n, sizeof(*j->from_batch));
	if (!j->from_epoch || !j->from_batch)
		return diag_set(&j->d, -ENOMEM, "out of memory");
	return 0;
}

/*
 * A job saved with another world goes on with this one: every rank of
 * the old world must have a position here (ranks on other nodes have
 * theirs in their own loaderd, unless the OPEN gives them).
 */
static int named_from_world(struct open_job *j, struct stream_config *c,
			    const struct state_pos *pos, uint32_t end)
{
	const struct state_job *old = &j->job;
	char missing[96] = "";
	uint32_t nmiss = 0;
	size_t at = 0;
	int err = named_from_alloc(j, old->world);

	if (err)
		return err;
	for (uint32_t r = 0; r < old->world; r++) {
		if (!pos[r].generation) {
			if (nmiss++ < 8 && at < sizeof(missing) - 12)
				at += (size_t)snprintf(
					missing + at, sizeof(missing) - at,
					"%s%" PRIu32, nmiss > 1 ? ", " : "", r);
			continue;
		}
		j->from_epoch[r] = pos[r].epoch;
		j->from_batch[r] = pos[r].batch;
	}
	if (nmiss)
		return diag_set(
			&j->d, LOADER_EUSAGE,
			"stream \"%s\" was saved with world %" PRIu32
			" and this loaderd has no position of %" PRIu32
			" of its ranks (%s%s): they ran on another node or never opened; go on with world %" PRIu32
			", or open it with a fresh start",
			j->named.name, old->world, nmiss, missing,
			nmiss > 8 ? ", ..." : "", old->world);
	return named_go_on(j, c, old->world, end);
}

static int named_resume(struct open_job *j, struct stream_config *c,
			const struct state_pos *pos, uint64_t dsid,
			uint64_t oid, uint32_t world, uint32_t end);
static int named_given(struct open_job *j, struct stream_config *c,
		       uint64_t dsid, uint64_t oid, uint32_t world,
		       uint32_t end);

/*
 * On the thread pool, for a named stream: read its job's record, check
 * that it is this dataset with these options, and say where this rank
 * starts: its saved position, the job's start for a rank with none, or
 * (another world) the rest of the old world's epochs; new or fresh,
 * where the request says. Fills j->named and j->job.
 */
static int named_resolve(struct open_job *j, struct stream_config *c)
{
	struct named *n = &j->named;
	struct state_job *old = &j->job;
	uint32_t end, world = c->world ? c->world : 1;
	struct state_pos *pos = NULL;
	uint64_t dsid = 0, oid;
	int err;

	if (!j->state)
		return diag_set(
			&j->d, LOADER_EUSAGE,
			"named streams need loaderd's state directory, and this loaderd has none");
	snprintf(n->name, sizeof(n->name), "%s", j->open.name);
	n->rank = c->rank;
	n->world = world;
	err = dataset_id(j->fds[0], &dsid, &j->d);
	if (err)
		return err;
	/*
	 * Tars read in place have no manifest: file 0 is their names, and
	 * their sizes stand for the record counts a manifest would give.
	 */
	for (uint32_t i = 1; (c->tar || c->lmdb) && i < j->nfds; i++) {
		struct stat st;

		if (fstat(j->fds[i], &st))
			return diag_set(&j->d, -errno, "tar %" PRIu32 ": %s",
					i - 1, strerror(errno));
		dsid = XXH3_64bits_withSeed(&st.st_size, sizeof(st.st_size),
					    dsid);
	}
	oid = opts_id(c);
	/* The last epoch, counted from 0 (the request counts from its start). */
	end = c->epochs ? c->start_epoch + c->epochs : 0;
	n->epochs = end;
	err = state_get_job(j->state, n->uid, n->name, old, &pos, &j->d);
	if (err == -ENOENT || (err == LOADER_EFORMAT && j->fresh)) {
		memset(old, 0, sizeof(*old));
		j->renew = true;
		err = 0;
	} else if (!err && j->fresh) {
		/*
		 * Every rank of a job started afresh says so: the first
		 * renews a record of another kind, the others find it alike
		 * and only start their own positions over.
		 */
		j->renew = old->dataset_id != dsid || old->opts_id != oid ||
			   old->world != world || old->plan_words ||
			   old->start_epoch != c->start_epoch ||
			   old->start_batch != c->start_batch;
	}
	if (!err && j->given.pos)
		err = named_given(j, c, dsid, oid, world, end);
	else if (!err)
		err = named_resume(j, c, pos, dsid, oid, world, end);
	free(pos);
	return err;
}

/*
 * A plan's identity (XXH3-64 of its words, never 0) and one past the
 * last epoch it deals; 0 and 0 for none.
 */
static uint64_t plan_id(const uint64_t *plan, size_t words, uint32_t *end)
{
	uint64_t id;

	*end = 0;
	if (!words)
		return 0;
	for (const uint64_t *w = plan + 1; w < plan + words;
	     w += 1 + (*w >> 32))
		if ((uint32_t)*w >= *end)
			*end = (uint32_t)*w + 1;
	id = XXH3_64bits(plan, words * sizeof(*plan));
	return id ? id : 1;
}

/* The identity of what an OPEN's POSITIONS say (never 0). */
static uint64_t given_id(const struct openreq_given *g)
{
	struct {
		uint32_t world, plan_end;
		uint64_t plan;
	} k = { g->world, g->plan_end, g->plan };
	uint64_t id = XXH3_64bits_withSeed(g->pos, g->world * sizeof(*g->pos),
					   XXH3_64bits(&k, sizeof(k)));

	return id ? id : 1;
}

/* Is the job's record (read, not renewed) of this dataset and options? */
static int named_same(struct open_job *j, uint64_t dsid, uint64_t oid)
{
	const struct state_job *old = &j->job;
	const char *name = j->named.name;

	if (old->dataset_id != dsid)
		return diag_set(
			&j->d, LOADER_EUSAGE,
			"stream \"%s\" was saved for another dataset (its manifest differs); open it with a fresh start to begin again",
			name);
	if (old->opts_id != oid)
		return diag_set(
			&j->d, LOADER_EUSAGE,
			"stream \"%s\" was saved with other batch size, order, seed or drop_last; open it with a fresh start to begin again",
			name);
	return 0;
}

/*
 * named_resolve() for an OPEN that says where every rank of the job's
 * earlier world stopped (POSITIONS: the trainer's checkpoint, gathered
 * from ranks on every node). Those positions, not this loaderd's, say
 * where the job goes on: with the same world, this rank at its own;
 * with another, the rest of the old world's epochs dealt to the new
 * one. The plan of the record read here holds only if the record is of
 * that earlier world (a node that ran it); elsewhere the earlier world
 * is taken to have dealt whole epochs (libloader(3), "Elastic resume
 * across nodes").
 */
static int named_given(struct open_job *j, struct stream_config *c,
		       uint64_t dsid, uint64_t oid, uint32_t world,
		       uint32_t end)
{
	struct state_job *old = &j->job;
	const struct openreq_given *g = &j->given;
	/* This rank's position, when the positions are of its own world. */
	const struct proto_position *mine =
		openreq_given_rank(g, world, c->rank);
	uint32_t lo = UINT32_MAX, rend;
	bool have = !j->fresh && !j->renew, dropped = false;
	uint64_t rec, from = given_id(g);
	int err;

	if (have) {
		err = named_same(j, dsid, oid);
		if (err)
			return err;
	}
	if (have && old->world == world && old->from_id == from) {
		/*
		 * Another rank of this job went on from these very positions
		 * (it renewed the record): join it, this rank from where the
		 * job starts, or with the same world at its own position.
		 */
		j->resumed = true;
		c->plan = old->plan;
		c->plan_words = old->plan_words;
		return mine ? named_start(j, c, mine->epoch, mine->batch, end) :
			      named_start(j, c, old->start_epoch,
					  old->start_batch, end);
	}
	old->from_id = from;
	for (uint32_t r = 0; r < g->world; r++)
		if (g->pos[r].epoch < lo)
			lo = g->pos[r].epoch;
	/*
	 * The earlier world's plan matters while a rank is in an epoch it
	 * deals: this loaderd must have it (a record of that world, of the
	 * same plan). Past its epochs, no plan is the same as it.
	 */
	rec = have && old->world == g->world ?
		      plan_id(old->plan, old->plan_words, &rend) :
		      0;
	if (g->plan && lo < g->plan_end && rec != g->plan)
		return diag_set(
			&j->d, LOADER_EUSAGE,
			"stream \"%s\": the positions given are of world %" PRIu32
			", which went on from another world part-way through an epoch before %" PRIu32
			" (plan %016" PRIx64
			"), and this loaderd has %s: open it on a node that ran world %" PRIu32
			", or give positions of epoch %" PRIu32 " or later",
			j->named.name, g->world, g->plan_end, g->plan,
			rec ? "another plan" : "no record of that world",
			g->world, g->plan_end);
	if (!g->plan || lo >= g->plan_end) {
		dropped = old->plan_words != 0;
		state_job_clear(old);
	}
	c->plan = old->plan;
	c->plan_words = old->plan_words;
	old->dataset_id = dsid;
	old->opts_id = oid;
	j->resumed = true;
	if (g->world != world) {
		old->world = world; /* the renewed record's */
		err = named_from_alloc(j, g->world);
		if (err)
			return err;
		for (uint32_t r = 0; r < g->world; r++) {
			j->from_epoch[r] = g->pos[r].epoch;
			j->from_batch[r] = g->pos[r].batch;
		}
		return named_go_on(j, c, g->world, end);
	}
	/*
	 * The same world: each rank at its own position. A record of
	 * another job (or none, or one whose plan the positions do not
	 * need) is renewed alike by every rank of this one, starting where
	 * its least rank does.
	 */
	if (!have || old->world != world || dropped) {
		j->renew = true;
		old->start_epoch = lo;
		old->start_batch = 0;
	}
	old->world = world;
	if (!mine) /* openreq_config() refused such a rank already */
		return diag_set(&j->d, LOADER_EUSAGE,
				"rank %" PRIu32 " of world %" PRIu32, c->rank,
				world);
	err = named_start(j, c, mine->epoch, mine->batch, end);
	if (!err)
		plog(PLOG_INFO,
		     "%s: stream \"%s\" rank %" PRIu32
		     " goes on from the position given, epoch %" PRIu32
		     " batch %" PRIu64,
		     j->ss->label, j->named.name, c->rank, mine->epoch,
		     mine->batch);
	return err;
}

/*
 * The least of the positions this daemon saved of job's ranks (pos,
 * job->world of them; generation 0: none), or none (generation 0) when
 * it saved none. A rank it has no position of is skipped: it may run on
 * another node, whose daemon keeps its position.
 */
static struct state_pos least_position(const struct state_job *job,
				       const struct state_pos *pos)
{
	struct state_pos least = { .generation = 0 };

	for (uint32_t r = 0; r < job->world; r++) {
		const struct state_pos *p = &pos[r];

		if (p->generation &&
		    (!least.generation || p->epoch < least.epoch ||
		     (p->epoch == least.epoch && p->batch < least.batch)))
			least = *p;
	}
	return least;
}

/* named_resolve() with the job's record and positions read. */
static int named_resume(struct open_job *j, struct stream_config *c,
			const struct state_pos *pos, uint64_t dsid,
			uint64_t oid, uint32_t world, uint32_t end)
{
	struct named *n = &j->named;
	struct state_job *old = &j->job;
	struct state_pos p;
	int err;

	old->from_id = 0; /* a record it renews is not from positions given */
	if (j->fresh || j->renew) {
		if (j->renew) {
			state_job_clear(old);
			old->start_epoch = c->start_epoch;
			old->start_batch = c->start_batch;
		}
		old->dataset_id = dsid;
		old->opts_id = oid;
		old->world = world;
		return 0;
	}
	err = named_same(j, dsid, oid);
	if (err)
		return err;
	/* Resumed: from a saved position, not from where the request says. */
	j->resumed = true;
	c->plan = old->plan;
	c->plan_words = old->plan_words;
	if (old->world != world) {
		err = named_from_world(j, c, pos, end);
		old->world = world; /* the renewed record's */
		return err;
	}
	/* Same world: pos has old->world entries, and rank is below it. */
	if (n->rank >= old->world)
		return diag_set(&j->d, LOADER_EUSAGE,
				"rank %" PRIu32 " of world %" PRIu32, n->rank,
				old->world);
	/*
	 * A rank that resumes goes on at the least of the positions saved
	 * here of its world's ranks (ranks on other nodes are their
	 * daemons'). Ranks that stopped apart, one killed holding a batch it
	 * had not released, so go on with as many batches each, as DDP's
	 * lockstep needs; a rank that had released batches past that point
	 * is given them again (at least once, never skipped: loader(7)). A
	 * rank that has not run yet starts where the job does, whatever its
	 * world's ranks that opened before it have delivered since.
	 */
	p = pos[n->rank];
	if (p.generation && !(j->open.flags & PROTO_OPEN_GO_ON))
		p = least_position(old, pos);
	if (!p.generation) {
		p.epoch = old->start_epoch;
		p.batch = old->start_batch;
		j->resumed = old->plan_words ||
			     old->start_epoch != c->start_epoch ||
			     old->start_batch != c->start_batch;
	}
	return named_start(j, c, p.epoch, p.batch, end);
}

/*
 * The stream is made (bpe batches an epoch): record the job (renewed)
 * and where this rank starts, so that the name exists from now on, and
 * keep what the checkpoints need.
 */
static int named_begin(struct open_job *j, const struct stream_layout *lay)
{
	struct named *n = &j->named;
	struct state_job *job = &j->job;
	struct state_pos p;
	const uint64_t *plan;
	size_t words;
	struct diag d;
	int err;

	if (!lay->batches_per_epoch) {
		n->name[0] = '\0'; /* nothing to deliver: nothing to save */
		return 0;
	}
	n->start_epoch = j->start_epoch;
	n->start_batch = j->start_batch;
	n->sched = lay->sched;
	n->written = 0;
	job->batches_per_epoch = lay->batches_per_epoch;
	job->epochs = n->epochs;
	job->updated_ms = wall_ms();
	if (j->renew) {
		/* A new world's ranks all start where the plan does. */
		stream_plan(j->stream, &plan, &words);
		state_job_clear(job);
		job->plan = (uint64_t *)plan; /* not freed: the stream's */
		job->plan_words = words;
		if (j->from_epoch) {
			job->start_epoch = j->start_epoch;
			job->start_batch = j->start_batch;
		}
	}
	p = (struct state_pos){ .epoch = j->start_epoch,
				.batch = j->start_batch,
				.updated_ms = job->updated_ms };
	err = state_begin(j->state, n->uid, n->name, job, j->renew, n->rank, &p,
			  &n->generation, &d);
	if (j->renew) {
		job->plan = NULL;
		job->plan_words = 0;
	}
	if (err)
		return diag_set(&j->d, err, "stream \"%s\": %s", n->name,
				d.msg);
	return 0;
}

/*
 * Tars read in place keep their indexes in the state (pipeline/wds.h):
 * on the thread pool, like every LMDB access. A failure costs the next
 * stream a scan, nothing else. Each uid's indexes apart: a user is only
 * ever given an index that a stream of its own kept.
 */
struct tar_index_ctx {
	struct state *state;
	uint32_t uid;
};

static void *tar_index_get(void *ctx, const char *id, size_t *len)
{
	const struct tar_index_ctx *t = ctx;
	struct diag d = { "" };
	void *val;

	return state_get_blob(t->state, t->uid, "tarix", id, &val, len, &d) ?
		       NULL :
		       val;
}

static void tar_index_put(void *ctx, const char *id, const void *val,
			  size_t len)
{
	const struct tar_index_ctx *t = ctx;
	struct diag d = { "" };

	if (state_put_blob(t->state, t->uid, "tarix", id, val, len, wall_ms(),
			   &d))
		plog(PLOG_WARN, "uid %" PRIu32 ": tar index %s not kept: %s",
		     t->uid, id, d.msg);
}

/*
 * On the thread pool: check the request, open and check the dataset,
 * make the ring, start. The stream takes the files, whatever happens.
 */
static void open_work(uv_work_t *req)
{
	struct stream_index_ops tar_index = { tar_index_get, tar_index_put,
					      NULL };
	struct tar_index_ctx tix;
	struct open_job *j = req->data;
	struct server *srv = j->ss->srv;
	struct stream_config c;
	char why[256];
	struct producer_params pp = {
		.slots = j->open.ring_slots,
		.epochs = j->open.epochs,
		.start_epoch = j->open.start_epoch,
		.max_bytes = j->budget,
		.label = j->ss->label, /* the session outlives the job */
	};

	/* The OPEN's own fields first: a bad one costs no fetch. */
	j->err = openreq_config(&j->open, &c, &j->d);
	if (j->err) {
		for (uint32_t i = 0; i < j->nfds; i++)
			close(j->fds[i]);
		goto out;
	}
	/*
	 * A dataset in an object store: staged into the shard cache with
	 * the client's credentials, it is then what a client's FILES would
	 * have been. The credentials are wiped here as soon as that is
	 * done (the fetch of the shards still arriving keeps its own copy
	 * until they have, rfill.h).
	 */
	if (j->remote) {
		struct aws_cfg cfg;

		openreq_remote_cfg(j->remote, &cfg);
		snprintf(j->dataset, sizeof(j->dataset), "%s", j->remote->url);
		struct rcache_staged out;

		j->err = rcache_stage(srv->rcache, &cfg, j->remote->url,
				      j->ss->label, &j->cancel, j->deadline_ms,
				      &out, &j->staged, &j->d);
		if (j->err == -ETIMEDOUT) {
			char last[DIAG_MAX];

			snprintf(last, sizeof(last), "%s", j->d.msg);
			diag_set(
				&j->d, -ETIMEDOUT,
				"%.120s: not staged within %g s (s3-stage-timeout): endpoint %.100s did not answer in time: %s",
				j->remote->url, stage_secs(j), cfg.endpoint,
				last);
		}
		j->fds = out.fds;
		j->nfds = out.nfds;
		c.rread = out.rr;
		c.rfill = out.fill;
		c.origin = j->dataset; /* its URL: errors name the object */
		if (j->err == -ECANCELED)
			plog(PLOG_INFO,
			     "%s: %s: staging stopped, the client gone",
			     j->ss->label, j->remote->url);
		aws_cfg_wipe(&cfg);
		remote_free(j->remote);
		j->remote = NULL;
		if (j->err)
			goto out;
		j->remote_files = j->nfds;
	} else if (j->nfds) {
		/*
		 * The dataset's directory, for loaderctl streams: where the
		 * client's manifest is (information only; nothing is opened
		 * by it).
		 */
		char link[64], *slash;
		ssize_t n;

		/* A tar dataset's file 0 is the tars' names (a memfd). */
		snprintf(link, sizeof(link), "/proc/self/fd/%d",
			 (j->open.flags & (PROTO_OPEN_TAR | PROTO_OPEN_LMDB)) &&
					 j->nfds > 1 ?
				 j->fds[1] :
				 j->fds[0]);
		n = readlink(link, j->dataset, sizeof(j->dataset) - 1);
		j->dataset[n > 0 ? n : 0] = '\0';
		slash = strrchr(j->dataset, '/');
		if (slash && slash != j->dataset)
			*slash = '\0';
	}
	c.label = j->ss->label;
	c.max_pixels = j->max_pixels;
	c.max_mem = j->mem_left; /* not 0: on_open() refused that */
	c.max_mem_why = j->mem_why;
	c.direct = c.direct || j->direct;
	c.io_depth = j->io_depth;
	c.cache = srv->cache;
	if (j->state) {
		tix = (struct tar_index_ctx){ j->state, j->ss->cred.uid };
		tar_index.ctx = &tix;
		c.index = &tar_index;
	}
	if (j->open.name[0]) {
		j->err = named_resolve(j, &c);
		if (j->err) {
			for (uint32_t i = 0; i < j->nfds; i++)
				close(j->fds[i]);
			rread_free(c.rread);
			rfill_cancel(c.rfill);
			rfill_put(c.rfill);
			goto out;
		}
	}
	j->err = stream_new(&j->stream, &c, j->fds, j->nfds, srv->pool, &j->d);
	if (j->err)
		goto out;
	/* A plan may move the start on (stream_begins()). */
	stream_begins(j->stream, &j->start_epoch, &j->start_batch, &pp.epochs);
	{
		const uint64_t *plan;
		size_t words;

		stream_plan(j->stream, &plan, &words);
		j->plan = plan_id(plan, words, &j->plan_end);
	}
	pp.start_epoch = j->start_epoch;
	pp.lay = stream_layout(j->stream);
	/* The ring takes what the stream's other memory leaves. */
	pp.max_bytes_why = j->budget_why;
	if (pp.max_bytes > j->mem_left - pp.lay->mem_bytes) {
		pp.max_bytes = j->mem_left - pp.lay->mem_bytes;
		snprintf(why, sizeof(why),
			 "%s, less the %" PRIu64
			 " its prefetch, scratch and indexes take",
			 j->mem_why, pp.lay->mem_bytes);
		pp.max_bytes_why = why;
	}
	/* Releases wait for the saver (named_begin() keeps the name then). */
	pp.named = j->open.name[0] && pp.lay->batches_per_epoch;
	j->err = producer_new(&j->prod, &pp, &j->d);
	if (!j->err && j->open.name[0])
		j->err = named_begin(j, pp.lay);
	if (!j->err && j->named.name[0]) {
		j->saver = saver_start(srv, j->state, j->prod, &j->named,
				       j->ss->label);
		if (!j->saver)
			j->err = diag_set(
				&j->d, -ENOMEM,
				"stream \"%s\": cannot start its saver",
				j->named.name);
	}
	if (!j->err)
		j->err = stream_start(j->stream, producer_sink(j->prod), &j->d);
	if (j->err) {
		saver_stop(j->saver);
		j->saver = NULL;
		stream_free(j->stream);
		producer_free(j->prod);
		j->stream = NULL;
		j->prod = NULL;
		j->named.name[0] = '\0';
	}
out:
	/* The stream has its own copy of the descriptors (or closed them). */
	free(j->fds);
	j->fds = NULL;
	j->nfds = 0;
	state_job_clear(&j->job);
	free(j->from_epoch);
	free(j->from_batch);
	j->from_epoch = NULL;
	j->from_batch = NULL;
	openreq_given_clear(&j->given);
}

/*
 * Would a stream whose ring takes ring bytes and whose prefetch, scratch
 * and indexes take mem (index of it the indexes) pass uid u's limits or
 * the daemon's memory budget, with what the streams hold now? Says by
 * how much in why.
 */
static bool stream_over(const struct server *srv, const struct uid_use *u,
			uint64_t ring, uint64_t mem, uint64_t index, char *why,
			size_t n)
{
	uint64_t rings = u ? u->bytes : 0, held = u ? u->mem : 0;
	unsigned uid = u ? (unsigned)u->uid : 0;

	if (rings + ring > srv->lim.max_uid_bytes) {
		snprintf(why, n,
			 "ring of %" PRIu64
			 " bytes: uid %u's streams hold %" PRIu64
			 " ring bytes of its %" PRIu64
			 " (max-uid-ring; its other streams opened meanwhile)",
			 ring, uid, rings, srv->lim.max_uid_bytes);
		return true;
	}
	if (held + ring + mem > srv->lim.max_uid_memory) {
		snprintf(
			why, n,
			"stream of %" PRIu64 " bytes (ring %" PRIu64
			", prefetch and scratch %" PRIu64
			", shard indexes %" PRIu64
			"): uid %u's streams hold %" PRIu64 " of its %" PRIu64
			" (max-uid-memory; its other streams opened meanwhile)",
			ring + mem, ring, mem - index, index, uid, held,
			srv->lim.max_uid_memory);
		return true;
	}
	if (srv->lim.memory_budget &&
	    srv->mem_used + ring + mem > srv->lim.memory_budget) {
		snprintf(why, n,
			 "stream of %" PRIu64 " bytes (ring %" PRIu64
			 ", prefetch and scratch %" PRIu64
			 ", shard indexes %" PRIu64
			 "): the streams hold %" PRIu64
			 " of the memory budget of %" PRIu64
			 " bytes (other streams opened meanwhile)",
			 ring + mem, ring, mem - index, index, srv->mem_used,
			 srv->lim.memory_budget);
		return true;
	}
	return false;
}

/* On the loop: reply, or end the stream if nobody is left to take it. */
static void open_done(uv_work_t *req, int status)
{
	struct open_job *j = req->data;
	struct session *ss = j->ss;
	struct server *srv = ss->srv;
	struct proto_open_ok ok = { 0 };
	struct uid_use *u;
	char why[PROTO_REASON_MAX];
	uint64_t mem;
	int fds[2], err;
	bool pump = false;

	fault_open_note(ss);
	ss->opening = NULL;
	if (j->staging) {
		/* Its thread is free: a waiting stage may have it. */
		u = uid_find(srv, ss->cred.uid);
		if (u)
			u->stages--;
		srv->stages--;
		j->staging = false;
		pump = true;
	}
	remote_free(j->remote); /* still here if it never ran */
	j->remote = NULL;
	openreq_given_clear(&j->given);
	if (status == UV_ECANCELED) {
		/* Cancelled before it ran: the descriptors are still ours. */
		for (uint32_t i = 0; i < j->nfds; i++)
			close(j->fds[i]);
		free(j->fds);
		j->err = -ECANCELED;
	}
	if (j->err) {
		charge_release(srv, ss->cred.uid, &j->charge);
		if (!ss->ended)
			reply_error(ss, j->seq, j->err,
				    j->d.msg[0] ? j->d.msg :
						  loader_strerror(j->err));
		goto out;
	}
	producer_reply(j->prod, &ok, &fds[0], &fds[1]);
	ok.batches_per_epoch = stream_layout(j->stream)->batches_per_epoch;
	ok.samples = stream_layout(j->stream)->samples;
	ok.start_epoch = j->start_epoch;
	ok.start_batch = j->start_batch;
	ok.resumed = j->resumed;
	ok.plan = j->plan;
	ok.plan_end = j->plan_end;
	/*
	 * Charge the ring now, on the loop: OPENs that ran together were
	 * each sized against what was held when they came, and together may
	 * pass a limit; the one that would is refused.
	 */
	u = uid_find(srv, ss->cred.uid);
	mem = stream_layout(j->stream)->mem_bytes;
	if (!ss->ended && stream_over(srv, u, ok.ring_bytes, mem,
				      stream_layout(j->stream)->index_bytes,
				      why, sizeof(why))) {
		teardown(srv, j->stream, j->prod, ss->cred.uid, &j->charge,
			 NULL, j->saver, ss->label);
		reply_error(ss, j->seq, LOADER_ETOOBIG, why);
		goto out;
	}
	if (u) {
		u->bytes += ok.ring_bytes;
		u->mem += ok.ring_bytes + mem;
		/* A staged dataset's descriptors are the daemon's own. */
		u->files += j->remote_files;
	}
	j->charge.files += j->remote_files;
	srv->mem_used += ok.ring_bytes + mem;
	j->charge.bytes = ok.ring_bytes;
	j->charge.mem = ok.ring_bytes + mem;
	if (ss->ended) {
		/* The client left (or the daemon stops) while it opened. */
		teardown(srv, j->stream, j->prod, ss->cred.uid, &j->charge,
			 &j->named, j->saver, ss->label);
		goto out;
	}
	ss->stream = j->stream;
	ss->prod = j->prod;
	ss->charge = j->charge;
	ss->named = j->named;
	ss->saver = j->saver;
	ss->opened_ms = now_ms();
	memcpy(ss->dataset, j->dataset, sizeof(ss->dataset));
	snprintf(ss->pipeline, sizeof(ss->pipeline), "%s", j->open.pipeline);
	if (j->remote_files)
		plog(PLOG_INFO,
		     "%s: %s: %" PRIu32 " shards: %" PRIu32
		     " from the shard cache, %" PRIu32 " fetching (%" PRIu64
		     " bytes) as the stream reads, %" PRIu32
		     " fetched by another stream meanwhile, %" PRIu32
		     " read in place (no room in the cache); %" PRIu64
		     " HEADs, %" PRIu64 " retries, %" PRIu64 " bytes evicted",
		     ss->label, j->dataset, j->staged.shards, j->staged.hits,
		     j->staged.fetched, j->staged.bytes_fetched,
		     j->staged.waited, j->staged.direct, j->staged.heads,
		     j->staged.retries, j->staged.evicted);
	plog(PLOG_INFO,
	     "%s: stream open: %" PRIu64 " samples, %" PRIu64
	     " batches per epoch, ring %" PRIu64 " bytes, other memory %" PRIu64
	     " (shard indexes %" PRIu64 ")",
	     ss->label, ok.samples, ok.batches_per_epoch, ok.ring_bytes, mem,
	     stream_layout(j->stream)->index_bytes);
	if (ss->named.name[0])
		plog(PLOG_INFO,
		     "%s: stream \"%s\" %s at epoch %" PRIu32 " batch %" PRIu64,
		     ss->label, ss->named.name,
		     j->resumed ? "resumed" : "starts", j->start_epoch,
		     j->start_batch);
	err = msg_send(ss->fd, PROTO_OPEN_OK, j->seq, &ok, sizeof(ok), fds, 2);
	if (err)
		plog(PLOG_WARN, "%s: OPEN_OK: %s", ss->label,
		     loader_strerror(err));
out:
	free(j);
	if (pump)
		stage_pump(srv);
	session_put(ss);
}

/* Has the client of session s hung up (its end of the socket closed)? */
static bool peer_gone(const struct session *s)
{
	struct pollfd p = { .fd = s->fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 &&
	       (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/*
 * May rank of world open uid's stream name now? Not while that rank is
 * open, or being opened, in another session, nor while a rank of
 * another world is (a job goes on with another world only from where
 * every rank of the old one stopped). A session whose client has hung
 * up but whose hang-up the loop has not read yet (a trainer killed and
 * started again at once) is ended here, so that its teardown writes the
 * position the new OPEN then waits for. Says why not in why.
 */
static bool name_busy(struct server *srv, uint32_t uid, const char *name,
		      uint32_t rank, uint32_t world, char *why, size_t n)
{
	struct session *s = srv->sessions, *next;

	for (; s; s = next) {
		const struct proto_open *o =
			s->opening ? &s->opening->open : NULL;
		const char *other = s->stream ? s->named.name :
				    o	      ? o->name :
						"";
		uint32_t orank = s->stream ? s->named.rank : o ? o->rank : 0;
		uint32_t oworld = s->stream ? s->named.world :
				  o	    ? (o->world ? o->world : 1) :
					      1;

		next = s->next;
		if (s->cred.uid != uid || !other[0] ||
		    strncmp(other, name, PROTO_STREAM_NAME) ||
		    (orank != rank && oworld == world))
			continue;
		if (peer_gone(s)) {
			session_end(s, "client disconnected");
			continue;
		}
		if (orank == rank && oworld == world)
			snprintf(why, n,
				 "stream \"%.63s\" rank %" PRIu32
				 " is open in another session of uid %u",
				 name, rank, (unsigned)uid);
		else
			snprintf(why, n,
				 "stream \"%.63s\" is open with world %" PRIu32
				 " (rank %" PRIu32
				 "): it goes on with world %" PRIu32
				 " only when every rank of world %" PRIu32
				 " has closed",
				 name, oworld, orank, world, oworld);
		return true;
	}
	return false;
}

/* The teardown of uid's stream name not yet done, or NULL. */
static struct teardown *named_teardown(const struct server *srv, uint32_t uid,
				       const char *name)
{
	for (struct teardown *t = srv->named_down; t; t = t->next) {
		if (t->named.uid == uid &&
		    !strncmp(t->named.name, name, PROTO_STREAM_NAME))
			return t;
	}
	return NULL;
}

/*
 * A request that needs the state, without one: refused with why there is
 * none (what: what is refused, in words).
 */
static void refuse_no_state(struct session *ss, uint32_t seq, const char *what)
{
	const struct server *srv = ss->srv;
	char why[PROTO_REASON_MAX];

	if (srv->state_why[0])
		snprintf(
			why, sizeof(why),
			"%s are refused: loaderd could not open its state (%s); it tries again on SIGHUP",
			what, srv->state_why);
	else
		snprintf(why, sizeof(why),
			 "%s are refused: this loaderd keeps no state", what);
	reply_error(ss, seq, srv->state_err ? srv->state_err : LOADER_EUSAGE,
		    why);
}

/*
 * The memory a new stream of uid u may take, ring, prefetch and scratch
 * together, with what the streams hold now, and which limit sets it.
 */
static void mem_allowance(const struct server *srv, const struct uid_use *u,
			  uint64_t *left, char *why, size_t n)
{
	uint64_t uid_left = srv->lim.max_uid_memory > u->mem ?
				    srv->lim.max_uid_memory - u->mem :
				    0;

	*left = uid_left;
	snprintf(why, n,
		 "bytes uid %u may still hold (its streams hold %" PRIu64
		 " of max-uid-memory %" PRIu64 ")",
		 (unsigned)u->uid, u->mem, srv->lim.max_uid_memory);
	if (srv->lim.memory_budget) {
		uint64_t all = srv->lim.memory_budget > srv->mem_used ?
				       srv->lim.memory_budget - srv->mem_used :
				       0;

		if (all < uid_left) {
			*left = all;
			snprintf(
				why, n,
				"bytes left of loaderd's memory budget (the streams hold %" PRIu64
				" of %" PRIu64 ")",
				srv->mem_used, srv->lim.memory_budget);
		}
	}
}

/*
 * OPEN: check the session and the uid's limits here, then make the
 * stream on the thread pool (open_work) and reply from open_done(). The
 * uid is charged the stream now, and the job takes over the charge of
 * the session's dataset descriptors. Its ring and other memory are not
 * reserved: they are sized within what the uid's limits and the memory
 * budget leave now (j->budget, j->mem_left), and charged by open_done(),
 * which refuses the stream if OPENs that ran together would pass a
 * limit.
 */
static void on_open(struct session *ss, const struct proto_hdr *h,
		    const struct proto_open *m)
{
	struct server *srv = ss->srv;
	struct open_job *j;
	struct teardown *down;
	struct uid_use *u;
	struct diag d;
	uint64_t mem_left;
	char mem_why[160];
	int err;

	if (!ss->hello || ss->stream || ss->opening) {
		reply_error(ss, h->seq, LOADER_EPROTO,
			    !ss->hello	? "OPEN before HELLO" :
			    ss->opening ? "an OPEN is already in progress" :
					  "a session holds one stream");
		return;
	}
	if ((m->flags & PROTO_OPEN_REMOTE) && !ss->remote) {
		reply_error(ss, h->seq, LOADER_EPROTO,
			    "an OPEN of a remote dataset before its REMOTE");
		return;
	}
	if (!(m->flags & PROTO_OPEN_REMOTE) && ss->remote) {
		reply_error(
			ss, h->seq, LOADER_EPROTO,
			"REMOTE was sent, and the OPEN is not of a remote dataset");
		return;
	}
	if (ss->remote) {
		char hp[300], why[PROTO_REASON_MAX];

		/* Checked before anything connects, and refused for good. */
		if (!endpoint_allowed(srv, ss->remote->endpoint, hp,
				      sizeof(hp))) {
			snprintf(
				why, sizeof(why),
				"%.160s: endpoint %s is not one loaderd may connect to (s3-endpoints in its loaderd.conf)",
				ss->remote->url, hp);
			remote_free(ss->remote);
			ss->remote = NULL;
			reply_error(ss, h->seq, -EACCES, why);
			return;
		}
	}
	if (openreq_given_check(&ss->given, m->flags, &d)) {
		reply_error(ss, h->seq, LOADER_EPROTO, d.msg);
		return;
	}
	if (!ss->remote &&
	    (!ss->files_total || ss->files_got != ss->files_total)) {
		reply_error(ss, h->seq, LOADER_EPROTO,
			    "OPEN before all the dataset's files were sent");
		return;
	}
	if (m->name[0] && !srv->state) {
		refuse_no_state(ss, h->seq, "named streams");
		return;
	}
	if (m->name[0] && memchr(m->name, '\0', sizeof(m->name))) {
		char why[256];

		if (name_busy(srv, ss->cred.uid, m->name, m->rank,
			      m->world ? m->world : 1, why, sizeof(why))) {
			reply_error(ss, h->seq, -EBUSY, why);
			return;
		}
	}
	/* From here until open_done(), allocations count (fault.h). */
	fault_open_begin();
	u = uid_use(srv, ss->cred.uid);
	if (!u) {
		open_refused(ss, h->seq, -ENOMEM, "out of memory");
		return;
	}
	if (u->streams >= srv->lim.max_uid_streams) {
		char why[128];

		snprintf(why, sizeof(why),
			 "uid %u has %" PRIu32 " streams, the limit",
			 (unsigned)ss->cred.uid, u->streams);
		open_refused(ss, h->seq, -EUSERS, why);
		return;
	}
	mem_allowance(srv, u, &mem_left, mem_why, sizeof(mem_why));
	if (!mem_left) {
		char why[PROTO_REASON_MAX];

		snprintf(why, sizeof(why), "no memory left for a stream: 0 %s",
			 mem_why);
		open_refused(ss, h->seq, LOADER_ETOOBIG, why);
		return;
	}
	j = mem_calloc(1, sizeof(*j));
	if (!j) {
		open_refused(ss, h->seq, -ENOMEM, "out of memory");
		return;
	}
	j->budget = 0;
	if (srv->lim.max_uid_bytes > u->bytes)
		j->budget = srv->lim.max_uid_bytes - u->bytes;
	snprintf(
		j->budget_why, sizeof(j->budget_why),
		"ring bytes uid %u may still take (its streams' rings hold %" PRIu64
		" of max-uid-ring %" PRIu64 ")",
		(unsigned)ss->cred.uid, u->bytes, srv->lim.max_uid_bytes);
	if (j->budget > srv->lim.max_ring_bytes) {
		j->budget = srv->lim.max_ring_bytes;
		snprintf(j->budget_why, sizeof(j->budget_why),
			 "bytes of max-ring, the largest ring of a stream");
	}
	j->req.data = j;
	j->ss = ss;
	j->open = *m;
	j->seq = h->seq;
	/* The stream takes the files, whatever happens. */
	j->fds = ss->files;
	j->nfds = ss->files_got;
	j->remote = ss->remote;
	j->given = ss->given;
	j->mem_left = mem_left;
	memcpy(j->mem_why, mem_why, sizeof(j->mem_why));
	j->max_pixels = srv->lim.max_pixels;
	j->direct = srv->lim.direct;
	j->io_depth = srv->lim.io_depth;
	/*
	 * The ring is charged when it is made (open_done()): reserving the
	 * largest it may get here would refuse the ranks of one job opening
	 * together long before their rings reach the limits.
	 */
	j->charge = (struct charge){ 1, 0, ss->files_charged, 0 };
	j->state = srv->state;
	j->named.uid = ss->cred.uid;
	j->fresh = m->flags & PROTO_OPEN_FRESH;
	j->arrived_ms = now_ms();
	j->stage_timeout_ms = srv->lim.stage_timeout_ms;
	j->deadline_ms = j->arrived_ms + j->stage_timeout_ms;
	/*
	 * A stream of this name still being torn down has yet to write where
	 * its client stopped: this OPEN waits for that (teardown_done()
	 * queues it), or it would resume from an older checkpoint.
	 */
	down = m->name[0] ? named_teardown(srv, ss->cred.uid, m->name) : NULL;
	if (down) {
		j->next_parked = down->parked;
		down->parked = j;
		err = 0;
	} else {
		err = open_submit(srv, j);
	}
	if (err) {
		free(j);
		open_refused(ss, h->seq, err, "cannot queue the open");
		return;
	}
	u->streams++;
	ss->files_charged = 0;
	ss->remote = NULL;
	ss->given = (struct openreq_given){ 0 };
	ss->files = NULL;
	ss->files_got = ss->files_total = 0;
	ss->opening = j;
	ss->refs++;
	stage_pump(srv); /* an s3:// OPEN: now, or when its turn comes */
}

/*
 * May the peer of ss see other's streams? Root and the daemon's own uid
 * see all; everyone else only theirs (a dataset's path, a pipeline and a
 * pid are another user's business).
 */
static bool may_see(const struct session *ss, const struct session *other)
{
	return ss->cred.uid == 0 || ss->cred.uid == getuid() ||
	       ss->cred.uid == other->cred.uid;
}

static void on_status(struct session *ss, const struct proto_hdr *h)
{
	const struct server *srv = ss->srv;
	struct proto_status_ok st = {
		.pid = (uint32_t)getpid(),
		.threads = pool_workers(srv->pool),
		.uptime_ms = now_ms() - srv->started_ms,
		.rss_bytes = rss_bytes(),
		.max_ring_bytes = srv->lim.max_ring_bytes,
		.max_uid_ring_bytes = srv->lim.max_uid_bytes,
		.max_uid_streams = srv->lim.max_uid_streams,
		.uid = (uint32_t)ss->cred.uid,
		.memory_used = srv->mem_used,
		.memory_budget = srv->lim.memory_budget,
	};

	pool_busy(srv->pool, &st.pool_busy_ns, &st.stream_busy_ns);
	memcpy(st.state_dir, srv->state_dir, sizeof(st.state_dir));
	memcpy(st.cache_dir, srv->cache_dir, sizeof(st.cache_dir));

	for (const struct session *o = srv->sessions; o; o = o->next) {
		bool seen = may_see(ss, o);

		st.sessions_all++;
		st.sessions += seen;
		if (!o->stream)
			continue;
		st.streams_all++;
		st.streams += seen;
		st.ring_bytes += o->charge.bytes;
	}
	(void)msg_send(ss->fd, PROTO_STATUS_OK, h->seq, &st, sizeof(st), NULL,
		       0);
}

static void on_stream_info(struct session *ss, const struct proto_hdr *h,
			   const struct proto_stream_info *m)
{
	struct proto_stream_info_ok r = { 0 };
	const struct session *o;
	struct stream_stats n;
	uint32_t k = 0;

	for (o = ss->srv->sessions; o; o = o->next) {
		if (!o->stream || !may_see(ss, o))
			continue;
		if (k++ == m->index)
			break;
	}
	if (!o) {
		char why[96];

		snprintf(why, sizeof(why),
			 "stream %" PRIu32 ": there are %" PRIu32, m->index, k);
		reply_error(ss, h->seq, LOADER_ERANGE, why);
		return;
	}
	stream_stats(o->stream, &n);
	r.session = o->id;
	r.pid = (uint32_t)o->cred.pid;
	r.uid = (uint32_t)o->cred.uid;
	r.gid = (uint32_t)o->cred.gid;
	r.batch_size = stream_layout(o->stream)->batch_size;
	producer_ring(o->prod, &r.slots, &r.ring_used, &r.ring_bytes);
	r.age_ms = now_ms() - o->opened_ms;
	r.epoch = n.epoch;
	r.batches = n.batches;
	r.samples = n.samples;
	r.bytes_read = n.bytes_read;
	r.bad_samples = n.bad_samples;
	r.read_wait_ns = n.read_wait_ns;
	r.decode_ns = n.decode_ns;
	r.slot_wait_ns = n.slot_wait_ns;
	r.client_waits = producer_client_waits(o->prod);
	memcpy(r.dataset, o->dataset, sizeof(r.dataset));
	memcpy(r.pipeline, o->pipeline, sizeof(r.pipeline));
	(void)msg_send(ss->fd, PROTO_STREAM_INFO_OK, h->seq, &r, sizeof(r),
		       NULL, 0);
}

static void on_stats(struct session *ss, const struct proto_hdr *h)
{
	struct proto_stats_ok st = { 0 };

	if (ss->stream) {
		struct stream_stats n;

		stream_stats(ss->stream, &n);
		st.batches = n.batches;
		st.samples = n.samples;
		st.bytes_read = n.bytes_read;
		st.bad_samples = n.bad_samples;
		st.stall_ns = producer_stall_ns(ss->prod);
		st.cache_hits = n.cache_hits;
		st.cache_misses = n.cache_misses;
	}
	st.rss_bytes = rss_bytes();
	/* A lost reply is the peer's alone (see reply_error()). */
	(void)msg_send(ss->fd, PROTO_STATS_OK, h->seq, &st, sizeof(st), NULL,
		       0);
}

/* SAVED or FORGET on the thread pool (LMDB may wait on the disk). */
struct saved_job {
	uv_work_t req;
	struct session *ss; /* holds a reference until saved_done() */
	uint16_t type;	    /* PROTO_SAVED or PROTO_FORGET */
	uint32_t seq;
	uint32_t index;		      /* SAVED */
	uint32_t uid;		      /* FORGET: whose */
	bool all;		      /* SAVED: every uid's */
	char name[PROTO_STREAM_NAME]; /* FORGET */
	uint32_t seen;		      /* SAVED: records counted so far */
	struct proto_saved_ok ok;
	int err;
	struct diag d;
};

static int saved_one(void *arg, uint32_t uid, const char *name,
		     const struct state_job *job, uint32_t rank,
		     const struct state_pos *p)
{
	struct saved_job *j = arg;

	if (j->seen++ != j->index)
		return 0;
	j->ok.uid = uid;
	snprintf(j->ok.name, sizeof(j->ok.name), "%s", name);
	j->ok.epoch = p->epoch;
	j->ok.epochs = job->epochs;
	j->ok.batch = p->batch;
	j->ok.batches_per_epoch = job->batches_per_epoch;
	j->ok.updated_ms = p->updated_ms;
	j->ok.rank = rank;
	j->ok.world = job->world;
	j->ok.finished = p->finished;
	return 0; /* go on: total counts them all */
}

static void saved_work(uv_work_t *req)
{
	struct saved_job *j = req->data;
	struct state *st = j->ss->srv->state;

	if (j->type == PROTO_FORGET) {
		j->err = state_forget(st, j->uid, j->name, &j->d);
		if (j->err == -ENOENT)
			diag_set(&j->d, -ENOENT,
				 "no saved stream \"%s\" of uid %" PRIu32,
				 j->name, j->uid);
		else if (!j->err)
			state_sync(st);
		return;
	}
	j->err = state_each(st, j->uid, j->all, saved_one, j, &j->d);
	j->ok.total = j->seen;
	if (!j->err && j->seen && j->index >= j->seen)
		j->err = diag_set(&j->d, LOADER_EUSAGE,
				  "saved stream %" PRIu32 " of %" PRIu32,
				  j->index, j->seen);
}

static void saved_done(uv_work_t *req, int status)
{
	struct saved_job *j = req->data;
	struct session *ss = j->ss;

	if (status == UV_ECANCELED)
		j->err = -ECANCELED;
	if (ss->ended) {
		/* nobody to tell */
	} else if (j->err) {
		reply_error(ss, j->seq, j->err,
			    j->d.msg[0] ? j->d.msg : loader_strerror(j->err));
	} else if (j->type == PROTO_FORGET) {
		struct proto_forget_ok ok = { .uid = j->uid };

		plog(PLOG_INFO,
		     "%s: forgot saved stream \"%s\" of uid %" PRIu32,
		     ss->label, j->name, j->uid);
		(void)msg_send(ss->fd, PROTO_FORGET_OK, j->seq, &ok, sizeof(ok),
			       NULL, 0);
	} else {
		(void)msg_send(ss->fd, PROTO_SAVED_OK, j->seq, &j->ok,
			       sizeof(j->ok), NULL, 0);
	}
	free(j);
	session_put(ss);
}

/*
 * SAVED and FORGET: the named streams this peer may see or drop. Its own
 * uid's; root and the daemon's own uid see and may name every uid's.
 */
static void on_saved(struct session *ss, const struct proto_hdr *h,
		     const void *m)
{
	struct server *srv = ss->srv;
	bool super = ss->cred.uid == 0 || ss->cred.uid == getuid();
	struct saved_job *j;

	if (!srv->state) {
		refuse_no_state(ss, h->seq, "saved streams");
		return;
	}
	j = mem_calloc(1, sizeof(*j));
	if (!j) {
		reply_error(ss, h->seq, -ENOMEM, "out of memory");
		return;
	}
	j->req.data = j;
	j->ss = ss;
	j->type = h->type;
	j->seq = h->seq;
	j->uid = ss->cred.uid;
	if (h->type == PROTO_SAVED) {
		const struct proto_saved *q = m;

		j->index = q->index;
		j->all = super;
	} else {
		const struct proto_forget *q = m;

		if (!memchr(q->name, '\0', sizeof(q->name)) || !q->name[0] ||
		    (q->flags & ~PROTO_FORGET_UID)) {
			free(j);
			reply_error(
				ss, h->seq, LOADER_EPROTO,
				"FORGET: name not terminated, empty, or unknown flags");
			return;
		}
		if ((q->flags & PROTO_FORGET_UID) && q->uid != ss->cred.uid &&
		    !super) {
			free(j);
			reply_error(
				ss, h->seq, -EPERM,
				"only root may forget another user's streams");
			return;
		}
		if (q->flags & PROTO_FORGET_UID)
			j->uid = q->uid;
		memcpy(j->name, q->name, sizeof(j->name));
	}
	if (uv_queue_work(srv->loop, &j->req, saved_work, saved_done)) {
		free(j);
		reply_error(ss, h->seq, -ENOMEM, "cannot queue the request");
		return;
	}
	ss->refs++;
}

static void on_session(uv_poll_t *poll, int status, int events)
{
	struct session *ss = poll->data;
	union {
		struct proto_hello hello;
		struct proto_files files;
		struct proto_open open;
		struct proto_stream_info info;
		struct proto_saved saved;
		struct proto_forget forget;
		struct proto_remote remote;
		struct proto_positions positions;
		char raw[PROTO_MAX_MSG];
	} m;
	struct proto_hdr h;
	int fds[PROTO_MAX_FDS];
	unsigned nfds = 0;
	char why[DIAG_MAX];
	int err;

	if (status < 0 || (events & UV_DISCONNECT)) {
		session_end(ss, status < 0 ? uv_strerror(status) :
					     "client disconnected");
		return;
	}
	err = msg_recv(ss->fd, &h, &m, sizeof(m), fds, PROTO_MAX_FDS, &nfds,
		       why, sizeof(why));
	if (err == -EAGAIN || err == -EINTR)
		return;
	if (err == LOADER_EPROTO) {
		/* Malformed: say why, keep serving this client. */
		reply_error(ss, h.seq, LOADER_EPROTO, why);
		return;
	}
	if (err) {
		session_end(ss, err == -EPIPE ? "client disconnected" :
						loader_strerror(err));
		return;
	}
	if (h.type != PROTO_FILES && nfds) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		reply_error(ss, h.seq, LOADER_EPROTO,
			    "descriptors on a message that takes none");
		return;
	}
	switch (h.type) {
	case PROTO_HELLO: on_hello(ss, &h, &m.hello); break;
	case PROTO_FILES: on_files(ss, &h, &m.files, fds, nfds); break;
	case PROTO_OPEN: on_open(ss, &h, &m.open); break;
	case PROTO_POSITIONS: on_positions(ss, &h, &m.positions); break;
	case PROTO_REMOTE:
		on_remote(ss, &h, &m.remote);
		/* The secret is not left on the stack. */
		explicit_bzero(&m, sizeof(m));
		break;
	case PROTO_STATS:
	case PROTO_STATUS:
	case PROTO_STREAM_INFO:
		if (!ss->hello)
			reply_error(ss, h.seq, LOADER_EPROTO,
				    h.type == PROTO_STATS ?
					    "STATS before HELLO" :
				    h.type == PROTO_STATUS ?
					    "STATUS before HELLO" :
					    "STREAM_INFO before HELLO");
		else if (h.type == PROTO_STREAM_INFO && m.info.reserved)
			reply_error(ss, h.seq, LOADER_EPROTO,
				    "STREAM_INFO: reserved word not 0");
		else if (h.type == PROTO_STATS)
			on_stats(ss, &h);
		else if (h.type == PROTO_STATUS)
			on_status(ss, &h);
		else
			on_stream_info(ss, &h, &m.info);
		break;
	case PROTO_SAVED:
	case PROTO_FORGET:
		if (!ss->hello)
			reply_error(ss, h.seq, LOADER_EPROTO,
				    "SAVED or FORGET before HELLO");
		else if (h.type == PROTO_SAVED && m.saved.reserved)
			reply_error(ss, h.seq, LOADER_EPROTO,
				    "SAVED: reserved word not 0");
		else
			on_saved(ss, &h,
				 h.type == PROTO_SAVED ?
					 (const void *)&m.saved :
					 (const void *)&m.forget);
		break;
	default:
		snprintf(why, sizeof(why), "a client does not send %s",
			 msg_type_name(h.type));
		reply_error(ss, h.seq, LOADER_EPROTO, why);
		break;
	}
}

static void on_accept(uv_poll_t *poll, int status, int events);

static void on_accept_resume(uv_timer_t *t)
{
	struct server *srv = t->data;
	int err;

	err = uv_poll_start(&srv->poll, UV_READABLE, on_accept);
	if (!err) {
		srv->accept_paused = false;
		return;
	}
	/* Never stay deaf: try again after another pause. */
	plog(PLOG_ERR, "cannot poll the listening socket: %s: retrying",
	     uv_strerror(err));
	err = uv_timer_start(&srv->accept_pause, on_accept_resume,
			     SERVER_ACCEPT_PAUSE_MS, 0);
	if (err)
		plog(PLOG_ERR, "not accepting connections any more: %s",
		     uv_strerror(err));
}

/*
 * Over a connection limit, the peer gets an ERROR (sequence 0: before
 * any request) with the reason, and its connection is closed at once:
 * a refused peer holds nothing. Returns whether it was refused.
 */
static bool refuse_connection(struct server *srv, int fd,
			      const struct ucred *cred, const struct uid_use *u)
{
	char why[PROTO_REASON_MAX];
	uint64_t now;

	if (srv->nsessions >= srv->lim.max_sessions)
		snprintf(why, sizeof(why),
			 "loaderd has %" PRIu32
			 " connections, its limit (max-sessions)",
			 srv->nsessions);
	else if (u->sessions >= srv->lim.max_uid_sessions)
		snprintf(
			why, sizeof(why),
			"uid %u has %" PRIu32
			" connections to loaderd, the limit (max-uid-sessions)",
			(unsigned)cred->uid, u->sessions);
	else
		return false;
	send_error(fd, 0, -EUSERS, why);
	/*
	 * Closing with a request unread would reset the connection, and the
	 * peer would read the reset instead of the reason: stop it sending,
	 * then drop what it sent.
	 */
	shutdown(fd, SHUT_RD);
	for (int i = 0; i < 64; i++) {
		char buf[64];
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	now = now_ms();
	if (now - srv->refused_log_ms >= 1000) {
		if (srv->refused_unlogged)
			plog(PLOG_WARN,
			     "%" PRIu64 " more connections refused, not logged",
			     srv->refused_unlogged);
		plog(PLOG_WARN, "connection of pid %d uid %u refused: %s",
		     (int)cred->pid, (unsigned)cred->uid, why);
		srv->refused_log_ms = now;
		srv->refused_unlogged = 0;
	} else {
		srv->refused_unlogged++;
	}
	return true;
}

static void on_accept(uv_poll_t *poll, int status, int events)
{
	struct server *srv = poll->data;
	struct uid_use *u;
	struct session *ss;
	socklen_t len;
	int fd, err;

	if (status < 0) {
		plog(PLOG_WARN, "listening socket: %s", uv_strerror(status));
		return;
	}
	fd = accept4(srv->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE) {
			/*
			 * The pending connection stays readable: polling on
			 * would spin. Stop accepting for a moment instead.
			 */
			plog(PLOG_WARN, "accept: %s: not accepting for %d ms",
			     strerror(errno), SERVER_ACCEPT_PAUSE_MS);
			err = uv_timer_start(&srv->accept_pause,
					     on_accept_resume,
					     SERVER_ACCEPT_PAUSE_MS, 0);
			if (err) {
				/* Spinning beats never accepting again. */
				plog(PLOG_ERR, "accept pause: %s",
				     uv_strerror(err));
				return;
			}
			/* uv_poll_stop() fails on nothing but a NULL. */
			(void)uv_poll_stop(&srv->poll);
			srv->accept_paused = true;
		} else if (errno != EAGAIN && errno != EINTR) {
			plog(PLOG_WARN, "accept: %s", strerror(errno));
		}
		return;
	}
	ss = mem_calloc(1, sizeof(*ss));
	if (!ss) {
		close(fd);
		return;
	}
	ss->srv = srv;
	ss->fd = fd;
	len = sizeof(ss->cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &ss->cred, &len))
		ss->cred.uid = (uid_t)-1;
	u = uid_use(srv, ss->cred.uid);
	if (!u || refuse_connection(srv, fd, &ss->cred, u)) {
		close(fd);
		free(ss);
		return;
	}
	ss->id = ++srv->next_id;
	snprintf(ss->label, sizeof(ss->label),
		 "session %" PRIu64 " (pid %d uid %u gid %u)", ss->id,
		 (int)ss->cred.pid, (unsigned)ss->cred.uid,
		 (unsigned)ss->cred.gid);
	err = uv_poll_init(srv->loop, &ss->poll, fd);
	if (err) {
		plog(PLOG_WARN, "%s: %s", ss->label, uv_strerror(err));
		close(fd);
		free(ss);
		return;
	}
	ss->poll.data = ss;
	ss->refs = 1;
	u->sessions++;
	srv->nsessions++;
	srv->refs++;
	ss->next = srv->sessions;
	if (ss->next)
		ss->next->pprev = &ss->next;
	ss->pprev = &srv->sessions;
	srv->sessions = ss;
	plog(PLOG_INFO, "%s: connected", ss->label);
	err = uv_poll_start(&ss->poll, UV_READABLE | UV_DISCONNECT, on_session);
	if (err)
		session_end(ss, uv_strerror(err));
}

/* Is a daemon answering on path? */
static bool socket_alive(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	alive = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return alive;
}

/*
 * 0 when path is absent or a socket, which may be replaced; else
 * -EEXIST, with d saying what is there.
 */
static int replaceable(const char *path, struct diag *d)
{
	struct stat st;

	if (lstat(path, &st) || S_ISSOCK(st.st_mode))
		return 0;
	return diag_set(
		d, -EEXIST,
		"%s: exists and is not a socket; loaderd replaces only a socket it left (name another with --socket)",
		path);
}

/* Bind and listen on l->path, with l's mode and group. */
static int server_bind(struct server *srv, const struct server_listen *l,
		       struct diag *d)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *path = l->path;

	if (strlen(path) >= sizeof(a.sun_path))
		return diag_set(d, -ENAMETOOLONG,
				"socket %s: longer than %zu bytes", path,
				sizeof(a.sun_path) - 1);
	if (socket_alive(path))
		return diag_set(d, -EADDRINUSE,
				"%s: another loaderd is serving this socket",
				path);
	/*
	 * Only a socket (one a daemon left) is ever replaced: a file of
	 * another kind at the path, or at the temporary name, is someone's
	 * data, and a mistyped --socket must not destroy it.
	 */
	if (replaceable(path, d))
		return -EEXIST;
	srv->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
			 0);
	if (srv->fd < 0)
		return diag_set(d, -errno, "socket: %s", strerror(errno));
	/*
	 * Bound under a temporary name and renamed once it listens: a
	 * client that finds the path never finds a socket that refuses it
	 * (between bind() and listen()). A path too long for the extra
	 * letters is bound in place.
	 */
	if (snprintf(a.sun_path, sizeof(a.sun_path), "%s.new", path) >=
	    (int)sizeof(a.sun_path))
		memcpy(a.sun_path, path, strlen(path) + 1);
	if (strcmp(a.sun_path, path) && replaceable(a.sun_path, d)) {
		close(srv->fd);
		return -EEXIST;
	}
	unlink(a.sun_path);
	/*
	 * Who may connect is the socket file's mode and group: set both
	 * before listen(), so that no client gets in under others.
	 */
	if (bind(srv->fd, (struct sockaddr *)&a, sizeof(a)) ||
	    (l->gid >= 0 && chown(a.sun_path, (uid_t)-1, (gid_t)l->gid)) ||
	    chmod(a.sun_path, l->mode) || listen(srv->fd, 64) ||
	    (strcmp(a.sun_path, path) && rename(a.sun_path, path))) {
		int err = diag_set(d, -errno, "%s: %s", path, strerror(errno));

		close(srv->fd);
		unlink(a.sun_path);
		return err;
	}
	{
		struct stat st;

		if (!stat(path, &st)) {
			srv->sock_dev = st.st_dev;
			srv->sock_ino = st.st_ino;
		}
	}
	return 0;
}

/* Is path still the socket this daemon bound? */
static bool socket_ours(const struct server *srv)
{
	struct stat st;

	return !lstat(srv->path, &st) && S_ISSOCK(st.st_mode) &&
	       st.st_dev == srv->sock_dev && st.st_ino == srv->sock_ino;
}

void server_check_socket(struct server *srv)
{
	if (srv->inherited || srv->sock_gone || socket_ours(srv))
		return;
	srv->sock_gone = true;
	plog(PLOG_WARN,
	     "%s: the socket file is gone (removed, or another file took its place): new clients cannot reach this loaderd; restart it to make the socket again",
	     srv->path);
}

/*
 * Remove the socket file this daemon made, unless another file took its
 * place (a daemon started on the same path after it).
 */
static void unlink_socket(const struct server *srv)
{
	if (socket_ours(srv))
		unlink(srv->path);
}

/* Take the socket systemd listens on: it must be what we would make. */
static int server_inherit(struct server *srv, const struct server_listen *l,
			  struct diag *d)
{
	int type = 0, listening = 0, fl;
	socklen_t n = sizeof(type);
	struct sockaddr_un a;
	socklen_t an = sizeof(a);

	if (getsockopt(l->fd, SOL_SOCKET, SO_TYPE, &type, &n) ||
	    type != SOCK_SEQPACKET ||
	    getsockname(l->fd, (struct sockaddr *)&a, &an) ||
	    a.sun_family != AF_UNIX)
		return diag_set(
			d, -EINVAL,
			"the socket passed by systemd (fd %d) is not a Unix SOCK_SEQPACKET socket: use ListenSequentialPacket=",
			l->fd);
	n = sizeof(listening);
	if (getsockopt(l->fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &n) ||
	    !listening)
		return diag_set(
			d, -EINVAL,
			"the socket passed by systemd (fd %d) is not listening",
			l->fd);
	fl = fcntl(l->fd, F_GETFL);
	if (fl < 0 || fcntl(l->fd, F_SETFL, fl | O_NONBLOCK) ||
	    fcntl(l->fd, F_SETFD, FD_CLOEXEC))
		return diag_set(d, -errno, "fd %d: %s", l->fd, strerror(errno));
	srv->fd = l->fd;
	srv->inherited = true;
	return 0;
}

int server_new(struct server **out, uv_loop_t *loop,
	       const struct server_listen *l, struct pool *pool,
	       const struct server_limits *lim, struct diag *d)
{
	struct server *srv;
	const char *path = l->path;
	int err;

	srv = mem_calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->loop = loop;
	srv->pool = pool;
	srv->started_ms = now_ms();
	srv->lim = *lim;
	srv->stage_tail = &srv->stage_q;
	if (lim->s3_endpoints && *lim->s3_endpoints) {
		srv->endpoints = strdup(lim->s3_endpoints);
		if (!srv->endpoints) {
			free(srv);
			return diag_set(d, -ENOMEM, "out of memory");
		}
	}
	srv->lim.s3_endpoints = srv->endpoints;
	snprintf(srv->path, sizeof(srv->path), "%s", path);
	if (ncache_new(&srv->cache, lim->cache_memory)) {
		free(srv->endpoints);
		free(srv);
		return diag_set(d, -ENOMEM, "node cache: out of memory");
	}
	err = l->fd >= 0 ? server_inherit(srv, l, d) : server_bind(srv, l, d);
	if (err) {
		ncache_free(srv->cache);
		free(srv->endpoints);
		free(srv);
		return err;
	}
	err = uv_poll_init(loop, &srv->poll, srv->fd);
	if (err) {
		err = diag_set(d, err, "%s: %s", path, uv_strerror(err));
		if (!srv->inherited) {
			close(srv->fd);
			unlink_socket(srv);
		}
		ncache_free(srv->cache);
		free(srv->endpoints);
		free(srv);
		return err;
	}
	srv->poll.data = srv;
	/* It only fills in the struct: it returns 0 in every libuv. */
	(void)uv_timer_init(loop, &srv->accept_pause);
	srv->accept_pause.data = srv;
	(void)uv_timer_init(loop, &srv->expiry);
	srv->expiry.data = srv;
	(void)uv_timer_init(loop, &srv->stage_timer);
	srv->stage_timer.data = srv;
	srv->refs = 4; /* the four handles */
	err = uv_poll_start(&srv->poll, UV_READABLE, on_accept);
	if (err) {
		err = diag_set(d, err, "%s: %s", path, uv_strerror(err));
		server_free(srv);
		return err;
	}
	*out = srv;
	return 0;
}

static void on_expiry(uv_timer_t *timer);

void server_set_limits(struct server *srv, const struct server_limits *lim)
{
	bool sweep = lim->stream_expiry_ms != srv->lim.stream_expiry_ms;
	char *e = NULL;

	/* Out of memory: the endpoints in effect stay. */
	if (lim->s3_endpoints && *lim->s3_endpoints) {
		e = strdup(lim->s3_endpoints);
		if (!e)
			plog(PLOG_ERR,
			     "reload: out of memory: s3-endpoints unchanged");
	}
	srv->lim = *lim;
	if (e || !lim->s3_endpoints || !*lim->s3_endpoints) {
		free(srv->endpoints);
		srv->endpoints = e;
	}
	srv->lim.s3_endpoints = srv->endpoints;
	/* Raised caps give waiting s3:// OPENs their turn now. */
	stage_pump(srv);
	if (srv->state)
		state_set_limits(srv->state, lim->max_uid_names,
				 lim->max_uid_state);
	/* A new stream-expiry applies now, not at the next hourly sweep. */
	if (sweep && srv->state)
		(void)uv_timer_start(&srv->expiry, on_expiry, 0,
				     SERVER_EXPIRY_MS);
}

static void expiry_work(uv_work_t *req)
{
	struct expiry_job *c = req->data;
	uint64_t n;
	struct diag d;

	if (state_expire(c->srv->state, wall_ms(), c->expire_ms, &n, &d))
		plog(PLOG_WARN, "state: expiry: %s", d.msg);
	else if (n)
		plog(PLOG_INFO,
		     "state: forgot %" PRIu64
		     " named streams not checkpointed for %" PRIu64 " hours",
		     n, c->expire_ms / 3600000);
}

static void expiry_done(uv_work_t *req, int status)
{
	struct expiry_job *c = req->data;

	(void)status;
	server_put(c->srv);
	free(c);
}

/*
 * At the start and then every hour: forget the names that expired, on
 * the thread pool (the loop never waits on the disk). Positions are each
 * saver's to write.
 */
static void on_expiry(uv_timer_t *timer)
{
	struct server *srv = timer->data;
	struct expiry_job *c;

	if (!srv->lim.stream_expiry_ms)
		return;
	c = mem_calloc(1, sizeof(*c));
	if (!c)
		return;
	c->req.data = c;
	c->srv = srv;
	c->expire_ms = srv->lim.stream_expiry_ms;
	if (uv_queue_work(srv->loop, &c->req, expiry_work, expiry_done))
		free(c);
	else
		srv->refs++;
}

void server_state_failed(struct server *srv, int err, const char *why)
{
	srv->state_err = err;
	snprintf(srv->state_why, sizeof(srv->state_why), "%s", why);
}

void server_set_state(struct server *srv, struct state *st)
{
	srv->state = st;
	if (st)
		state_set_limits(st, srv->lim.max_uid_names,
				 srv->lim.max_uid_state);
	if (st)
		(void)uv_timer_start(&srv->expiry, on_expiry, 0,
				     SERVER_EXPIRY_MS);
}

void server_set_remote(struct server *srv, struct rcache *rc)
{
	srv->rcache = rc;
}

void server_set_dirs(struct server *srv, const char *state, const char *cache)
{
	snprintf(srv->state_dir, sizeof(srv->state_dir), "%s", state);
	snprintf(srv->cache_dir, sizeof(srv->cache_dir), "%s", cache);
}

void server_status(const struct server *srv, struct server_status *st)
{
	memset(st, 0, sizeof(*st));
	for (const struct session *ss = srv->sessions; ss; ss = ss->next) {
		struct stream_stats s;

		st->sessions++;
		if (!ss->stream)
			continue;
		st->streams++;
		stream_stats(ss->stream, &s);
		st->batches += s.batches;
		st->bytes_read += s.bytes_read;
	}
}

static void server_handle_closed(uv_handle_t *h)
{
	struct server *srv = h->data;

	if (h == (uv_handle_t *)&srv->poll)
		close(srv->fd);
	server_put(srv);
}

void server_free(struct server *srv)
{
	if (!srv || srv->stopping)
		return;
	srv->stopping = true;
	/*
	 * Tell each client why its stream ends before its socket closes: it
	 * gets the batches already published, then LOADER_ESTREAM with this
	 * reason, rather than a bare hang-up.
	 */
	for (struct session *ss = srv->sessions; ss; ss = ss->next)
		if (ss->prod)
			producer_notice(
				ss->prod,
				"loaderd is stopping (its service was stopped or restarted)");
	while (srv->sessions)
		session_end(srv->sessions, "daemon stopping");
	/*
	 * The handles live in srv, and libuv runs close callbacks in no
	 * order we may rely on: each one gives its reference back, and the
	 * last of everything (handles, sessions, teardowns) frees srv.
	 */
	uv_close((uv_handle_t *)&srv->accept_pause, server_handle_closed);
	uv_close((uv_handle_t *)&srv->expiry, server_handle_closed);
	uv_close((uv_handle_t *)&srv->stage_timer, server_handle_closed);
	uv_close((uv_handle_t *)&srv->poll, server_handle_closed);
	/* systemd made an inherited socket, and keeps it for the next start. */
	if (!srv->inherited)
		unlink_socket(srv);
}
