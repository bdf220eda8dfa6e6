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
 * Named streams are named.c's: resolving a name, the saver thread, the
 * SAVED and FORGET requests and the expiry sweep. What stays here is
 * when they run: on which thread, which OPEN waits for which teardown,
 * and which session may see or open what.
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
#include "named.h"
#include "nodecache.h"
#include "openreq.h"
#include "plog.h"
#include "pool.h"
#include "producer.h"
#include "proto.h"
#include "s3cache.h"
#include "shardid.h"
#include "server.h"
#include "state.h"
#include "stream.h"

#define SERVER_ACCEPT_PAUSE_MS 200
/* How often the state is swept for names that expired. */
#define SERVER_EXPIRY_MS (3600 * 1000)
/*
 * Refusals a session may log a second; the rest are counted and the
 * count logged (a client sending garbage in a loop must not flood the
 * journal). Refused connections are logged as often, all together.
 */
#define SERVER_LOG_BURST 10

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
	/* A mixture's members closed so far (MEMBER), with their files. */
	struct mix_member *mix;
	uint32_t nmix;
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

/*
 * One member of a mixture as its MEMBER closed it: its files, or its
 * REMOTE (credentials: wiped when freed), and the message.
 */
struct mix_member {
	int *files;
	uint32_t nfiles;
	struct proto_remote *remote;
	struct proto_member m;
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
	/* Or a mixture's members, taken (their files, or REMOTEs). */
	struct mix_member *mix;
	uint32_t nmix;
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
	struct s3cache_stats staged;
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
	struct state *state;  /* NULL: no names, no tar indexes kept */
	struct named_open nm; /* a named stream's (named.h) */
	uint64_t plan;	      /* the stream's, for OPEN_OK (named_plan_id()) */
	uint32_t plan_end;
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
	struct nodecache *cache; /* the node cache; NULL: off */
	struct s3cache *s3cache; /* the shard cache of s3:// datasets */
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

/* The wall clock in ms: when the state's records were written. */
static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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
	nodecache_free(srv->cache);
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

/* Members' files closed, their credentials wiped, and the array freed. */
static void mix_free(struct mix_member *mx, uint32_t n)
{
	for (uint32_t i = 0; mx && i < n; i++) {
		for (uint32_t k = 0; k < mx[i].nfiles; k++)
			close(mx[i].files[k]);
		free(mx[i].files);
		remote_free(mx[i].remote);
	}
	free(mx);
}

/* The first of j's object-store datasets' URL: its own, or a member's. */
static const char *job_url(const struct open_job *j)
{
	if (j->remote)
		return j->remote->url;
	for (uint32_t i = 0; i < j->nmix; i++)
		if (j->mix[i].remote)
			return j->mix[i].remote->url;
	return NULL;
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
	uint64_t now = clock_mono_ms();

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
		job_url(j), stage_secs(j), held);
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
	uint64_t now = clock_mono_ms();

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
	if (!job_url(j))
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
	named_saver_stop(t->saver);
	t->saver = NULL;
	/*
	 * The stream's threads are gone and the client with them (or it is
	 * going): what it released is final. Written before the ring goes,
	 * so that a client of the same name that opens next resumes after
	 * every batch this one released.
	 */
	if (t->named.name[0] && t->prod && t->state) {
		struct state_pos r;

		named_write(&t->srv->synced_ms, t->state, &t->named,
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
	     clock_mono_ms() - t->t0);
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
		t->t0 = clock_mono_ms();
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
		named_saver_stop(sv);
		if (n && n->name[0] && srv->state && pr)
			named_write(&srv->synced_ms, srv->state, n,
				    producer_released(pr), label, NULL);
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
	mix_free(ss->mix, ss->nmix);
	ss->mix = NULL;
	ss->nmix = 0;
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
	else if (!ss->srv->s3cache) {
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
 * A mixture's member: the files (or the REMOTE) received since the last
 * MEMBER are its own. Its values (how many samples it gives) are
 * checked where the mixture is made (mixture.h), and their errors go
 * back with the OPEN.
 */
static void on_member(struct session *ss, const struct proto_hdr *h,
		      const struct proto_member *m)
{
	uint32_t kind = m->flags &
			(PROTO_OPEN_TAR | PROTO_OPEN_LMDB | PROTO_OPEN_REMOTE);
	char why[PROTO_REASON_MAX] = "";
	int code = LOADER_EPROTO;
	struct mix_member *mx;

	if (!ss->hello || ss->stream || ss->opening)
		snprintf(why, sizeof(why), "MEMBER %s",
			 !ss->hello ? "before HELLO" : "after OPEN");
	else if (m->index != ss->nmix || ss->nmix >= PROTO_MAX_MEMBERS)
		snprintf(why, sizeof(why),
			 "MEMBER %" PRIu32 " where member %" PRIu32
			 " was due (at most %d)",
			 m->index, ss->nmix, PROTO_MAX_MEMBERS);
	else if (m->reserved || m->flags != kind || (kind & (kind - 1)) != 0 ||
		 m->how > PROTO_MIX_CHOOSE)
		snprintf(why, sizeof(why),
			 "MEMBER %" PRIu32
			 ": unknown or conflicting flags, or an unknown kind",
			 m->index);
	else if (!memchr(m->pipeline, '\0', sizeof(m->pipeline)) ||
		 !memchr(m->label, '\0', sizeof(m->label)))
		snprintf(why, sizeof(why),
			 "MEMBER %" PRIu32 " with a string not terminated",
			 m->index);
	else if (!(kind & PROTO_OPEN_REMOTE) != !ss->remote)
		snprintf(why, sizeof(why),
			 "MEMBER %" PRIu32
			 ": its flags and what came before it (%s) disagree",
			 m->index, ss->remote ? "a REMOTE" : "files");
	else if (!ss->remote &&
		 (!ss->files_total || ss->files_got != ss->files_total))
		snprintf(why, sizeof(why),
			 "MEMBER %" PRIu32 " before all its files were sent",
			 m->index);
	else if (ss->nmix && m->epoch_size != ss->mix[0].m.epoch_size)
		snprintf(why, sizeof(why),
			 "MEMBER %" PRIu32 ": epoch size %" PRIu64
			 ", member 0's %" PRIu64,
			 m->index, m->epoch_size, ss->mix[0].m.epoch_size);
	if (!why[0] && ss->remote) {
		char hp[300];

		/* Checked before anything connects, and refused for good. */
		if (!endpoint_allowed(ss->srv, ss->remote->endpoint, hp,
				      sizeof(hp))) {
			snprintf(
				why, sizeof(why),
				"member %" PRIu32
				": %.160s: endpoint %s is not one loaderd may connect to (s3-endpoints in its loaderd.conf)",
				m->index, ss->remote->url, hp);
			code = -EACCES;
		}
	}
	if (!why[0] && !ss->mix) {
		ss->mix = mem_calloc(PROTO_MAX_MEMBERS, sizeof(*ss->mix));
		if (!ss->mix) {
			snprintf(why, sizeof(why), "out of memory");
			code = -ENOMEM;
		}
	}
	if (why[0]) {
		reply_error(ss, h->seq, code, why);
		return;
	}
	mx = &ss->mix[ss->nmix++];
	mx->files = ss->files;
	mx->nfiles = ss->files_got;
	mx->remote = ss->remote;
	mx->m = *m;
	ss->files = NULL;
	ss->files_got = ss->files_total = 0;
	ss->remote = NULL;
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

/*
 * Tars read in place keep their indexes in the state (pipeline/format/wds.h):
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
static void open_stream(struct open_job *j, struct stream_config *cp);
static void open_mixture(struct open_job *j, struct stream_config *c);

/*
 * Stage the object-store dataset of r into the shard cache with its
 * credentials (wiped here): *out as stream_new() takes a dataset's
 * files. Returns 0 or j's error, described in j->d.
 */
static int stage_remote(struct open_job *j, const struct proto_remote *r,
			struct s3cache_staged *out)
{
	struct server *srv = j->ss->srv;
	struct aws_cfg cfg;
	int err;

	openreq_remote_cfg(r, &cfg);
	memset(out, 0, sizeof(*out));
	err = s3cache_stage(srv->s3cache, &cfg, r->url, j->ss->label,
			    &j->cancel, j->deadline_ms, out, &j->staged, &j->d);
	if (err == -ETIMEDOUT) {
		char last[DIAG_MAX];

		snprintf(last, sizeof(last), "%s", j->d.msg);
		diag_set(
			&j->d, -ETIMEDOUT,
			"%.120s: not staged within %g s (s3-stage-timeout): endpoint %.100s did not answer in time: %s",
			r->url, stage_secs(j), cfg.endpoint, last);
	}
	if (err == -ECANCELED)
		plog(PLOG_INFO, "%s: %s: staging stopped, the client gone",
		     j->ss->label, r->url);
	aws_cfg_wipe(&cfg);
	return err;
}

/*
 * A mixture's OPEN: each member's files (its object-store dataset staged
 * first), then the stream of them all (open_stream()).
 */
static void open_mixture(struct open_job *j, struct stream_config *c)
{
	struct stream_member sm[PROTO_MAX_MEMBERS] = { { 0 } };
	char **labels[PROTO_MAX_MEMBERS] = { 0 };
	int *staged[PROTO_MAX_MEMBERS] = { 0 };
	uint32_t n = j->nmix, got = 0;
	size_t at = 0;

	at = (size_t)snprintf(j->dataset, sizeof(j->dataset),
			      "mixture of %" PRIu32 ":", n);
	for (; got < n; got++) {
		struct mix_member *mx = &j->mix[got];
		const struct proto_member *pm = &mx->m;
		struct stream_member *mb = &sm[got];

		if (pm->epoch_size != j->mix[0].m.epoch_size) {
			j->err = diag_set(
				&j->d, LOADER_EPROTO,
				"MEMBER %" PRIu32 ": epoch size %" PRIu64
				", member 0's %" PRIu64,
				got, pm->epoch_size, j->mix[0].m.epoch_size);
			break;
		}
		if (mx->remote) {
			struct s3cache_staged out;

			j->err = stage_remote(j, mx->remote, &out);
			remote_free(mx->remote);
			mx->remote = NULL;
			mb->fds = out.fds;
			mb->nfds = out.nfds;
			mb->s3read = out.rr;
			mb->s3fill = out.fill;
			mb->shard_ids = out.ids;
			staged[got] = out.fds;
			if (j->err) {
				/* A stage that failed holds nothing. */
				memset(mb, 0, sizeof(*mb));
				diag_wrap(&j->d, j->err, "member %" PRIu32,
					  got);
				break;
			}
			j->remote_files += out.nfds;
			mb->origin = pm->label; /* its URL */
		} else {
			mb->fds = mx->files;
			mb->nfds = mx->nfiles;
			mx->nfiles = 0; /* the stream's now */
		}
		mb->tar = pm->flags & PROTO_OPEN_TAR;
		mb->lmdb = pm->flags & PROTO_OPEN_LMDB;
		if ((mb->tar || mb->lmdb) && mb->nfds > 1)
			labels[got] =
				openreq_tar_labels(mb->fds[0], mb->nfds - 1);
		mb->tar_labels = labels[got];
		mb->pipeline = pm->pipeline[0] ? pm->pipeline : NULL;
		mb->label = pm->label;
		mb->how = (enum mixture_how)pm->how;
		mb->value = pm->value;
		if (at < sizeof(j->dataset))
			at += (size_t)snprintf(j->dataset + at,
					       sizeof(j->dataset) - at, " %s",
					       pm->label);
	}
	if (got < n) {
		for (uint32_t m = 0; m < got; m++)
			stream_member_drop(&sm[m]);
	} else {
		c->nmembers = n;
		c->members = sm;
		c->epoch_size = j->mix[0].m.epoch_size;
		open_stream(j, c);
	}
	for (uint32_t m = 0; m < n; m++) {
		openreq_labels_free(labels[m], sm[m].nfds ? sm[m].nfds - 1 : 0);
		free(staged[m]);
	}
}

static void open_work(uv_work_t *req)
{
	struct open_job *j = req->data;
	struct stream_config c;

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
	 * until they have, s3fill.h).
	 */
	if (j->nmix) {
		open_mixture(j, &c);
		goto out;
	}
	if (j->remote) {
		struct s3cache_staged out;

		snprintf(j->dataset, sizeof(j->dataset), "%s", j->remote->url);
		j->err = stage_remote(j, j->remote, &out);
		j->fds = out.fds;
		j->nfds = out.nfds;
		c.s3read = out.rr;
		c.s3fill = out.fill;
		c.shard_ids = out.ids;
		c.origin = j->dataset; /* its URL: errors name the object */
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
	open_stream(j, &c);
out:
	/* The stream has its own copy of the descriptors (or closed them). */
	free(j->fds);
	j->fds = NULL;
	j->nfds = 0;
	named_open_clear(&j->nm);
}

/*
 * The stream of c (its dataset's files in j->fds, or its members'), and
 * its ring: named, made, started. The stream takes the files whatever
 * happens; the result, or j->err and j->d, in j.
 */
static void open_stream(struct open_job *j, struct stream_config *cp)
{
	struct recindex_store tar_index = { tar_index_get, tar_index_put,
					    NULL };
	struct server *srv = j->ss->srv;
	struct stream_config c = *cp;
	struct tar_index_ctx tix;
	char **labels = NULL;
	char why[256];
	struct producer_params pp = {
		.slots = j->open.ring_slots,
		.epochs = j->open.epochs,
		.start_epoch = j->open.start_epoch,
		.max_bytes = j->budget,
		.label = j->ss->label, /* the session outlives the job */
	};

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
		j->err = named_resolve(&j->nm, j->state, j->open.name, &c,
				       j->fds, j->nfds, &j->d);
		if (j->err) {
			for (uint32_t i = 0; i < j->nfds; i++)
				close(j->fds[i]);
			s3read_free(c.s3read);
			s3fill_cancel(c.s3fill);
			s3fill_put(c.s3fill);
			shardid_free(c.shard_ids);
			for (uint32_t m = 0; m < c.nmembers; m++)
				stream_member_drop(&c.members[m]);
			return;
		}
	}
	if ((c.tar || c.lmdb) && j->nfds > 1)
		labels = openreq_tar_labels(j->fds[0], j->nfds - 1);
	c.tar_labels = labels;
	j->err = stream_new(&j->stream, &c, j->fds, j->nfds, srv->pool, &j->d);
	openreq_labels_free(labels, j->nfds - 1);
	if (j->err)
		return;
	/* A plan may move the start on (stream_begins()). */
	stream_begins(j->stream, &j->start_epoch, &j->start_batch, &pp.epochs);
	{
		const uint64_t *plan;
		size_t words;

		stream_plan(j->stream, &plan, &words);
		j->plan = named_job_plan(&j->nm.job, plan, words, &j->plan_end);
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
		j->err =
			named_begin(&j->nm, j->state, j->stream, j->start_epoch,
				    j->start_batch, pp.lay, &j->d);
	if (!j->err && j->nm.named.name[0]) {
		j->nm.saver =
			named_saver_start(&srv->synced_ms, j->state, j->prod,
					  &j->nm.named, j->ss->label);
		if (!j->nm.saver)
			j->err = diag_set(
				&j->d, -ENOMEM,
				"stream \"%s\": cannot start its saver",
				j->nm.named.name);
	}
	if (!j->err)
		j->err = stream_start(j->stream, producer_sink(j->prod), &j->d);
	if (j->err) {
		named_saver_stop(j->nm.saver);
		j->nm.saver = NULL;
		stream_free(j->stream);
		producer_free(j->prod);
		j->stream = NULL;
		j->prod = NULL;
		j->nm.named.name[0] = '\0';
	}
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
	mix_free(j->mix, j->nmix); /* the members open_work() did not take */
	j->mix = NULL;
	j->nmix = 0;
	openreq_given_clear(&j->nm.given);
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
	ok.resumed = j->nm.resumed;
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
			 NULL, j->nm.saver, ss->label);
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
			 &j->nm.named, j->nm.saver, ss->label);
		goto out;
	}
	ss->stream = j->stream;
	ss->prod = j->prod;
	ss->charge = j->charge;
	ss->named = j->nm.named;
	ss->saver = j->nm.saver;
	ss->opened_ms = clock_mono_ms();
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
		     j->nm.resumed ? "resumed" : "starts", j->start_epoch,
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
	if ((m->flags & PROTO_OPEN_MIXTURE) &&
	    (!ss->nmix || ss->files_total || ss->remote ||
	     (m->flags &
	      (PROTO_OPEN_TAR | PROTO_OPEN_LMDB | PROTO_OPEN_REMOTE)))) {
		reply_error(
			ss, h->seq, LOADER_EPROTO,
			!ss->nmix ?
				"an OPEN of a mixture before its MEMBERs" :
			ss->files_total || ss->remote ?
				"files or a REMOTE after a mixture's last MEMBER" :
				"a mixture's OPEN with TAR, LMDB or REMOTE: those are its MEMBERs'");
		return;
	}
	if (!(m->flags & PROTO_OPEN_MIXTURE) && ss->nmix) {
		reply_error(
			ss, h->seq, LOADER_EPROTO,
			"MEMBERs were sent, and the OPEN is not of a mixture");
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
	if (!ss->remote && !ss->nmix &&
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
	j->mix = ss->mix;
	j->nmix = ss->nmix;
	j->nm.given = ss->given;
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
	j->nm.named.uid = ss->cred.uid;
	j->nm.fresh = m->flags & PROTO_OPEN_FRESH;
	j->nm.go_on = m->flags & PROTO_OPEN_GO_ON;
	j->nm.label = ss->label;
	j->arrived_ms = clock_mono_ms();
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
	ss->mix = NULL;
	ss->nmix = 0;
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
		.uptime_ms = clock_mono_ms() - srv->started_ms,
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
	r.age_ms = clock_mono_ms() - o->opened_ms;
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
	r.nmembers = stream_members(o->stream);
	for (uint32_t i = 0; i < r.nmembers && i < PROTO_MAX_MEMBERS; i++) {
		struct proto_member_info *mi = &r.member[i];
		const char *label;

		stream_member_stats(o->stream, i, &n, &label, &mi->per_epoch);
		snprintf(mi->label, sizeof(mi->label), "%s", label);
		mi->samples = n.samples;
		mi->bad_samples = n.bad_samples;
		mi->bytes_read = n.bytes_read;
	}
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
	uint32_t seq;
	struct named_query q;
};

static void saved_work(uv_work_t *req)
{
	struct saved_job *j = req->data;

	named_query_run(&j->q, j->ss->srv->state);
}

static void saved_done(uv_work_t *req, int status)
{
	struct saved_job *j = req->data;
	struct session *ss = j->ss;

	if (status == UV_ECANCELED)
		j->q.err = -ECANCELED;
	if (ss->ended) {
		/* nobody to tell */
	} else if (j->q.err) {
		reply_error(ss, j->seq, j->q.err,
			    j->q.d.msg[0] ? j->q.d.msg :
					    loader_strerror(j->q.err));
	} else {
		named_query_reply(&j->q, ss->fd, j->seq, ss->label);
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
	struct diag d;
	int err;

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
	j->seq = h->seq;
	err = named_query_set(&j->q, h->type, m, ss->cred.uid, super, &d);
	if (err) {
		free(j);
		reply_error(ss, h->seq, err, d.msg);
		return;
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
		struct proto_member member;
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
	case PROTO_MEMBER: on_member(ss, &h, &m.member); break;
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
	now = clock_mono_ms();
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
	srv->started_ms = clock_mono_ms();
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
	if (nodecache_new(&srv->cache, lim->cache_memory)) {
		free(srv->endpoints);
		free(srv);
		return diag_set(d, -ENOMEM, "node cache: out of memory");
	}
	err = l->fd >= 0 ? server_inherit(srv, l, d) : server_bind(srv, l, d);
	if (err) {
		nodecache_free(srv->cache);
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
		nodecache_free(srv->cache);
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

	named_expire(c->srv->state, c->expire_ms);
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

void server_set_remote(struct server *srv, struct s3cache *rc)
{
	srv->s3cache = rc;
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
