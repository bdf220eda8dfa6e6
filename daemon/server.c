/*
 * server.c - sessions: HELLO, FILES, OPEN, STATS over SOCK_SEQPACKET.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "loader_error.h"
#include "msg.h"
#include "openreq.h"
#include "plog.h"
#include "producer.h"
#include "proto.h"
#include "server.h"
#include "stream.h"

#define SERVER_ACCEPT_PAUSE_MS 200

/* Per-uid usage, for the limits. Few uids use one node: a list will do. */
struct uid_use {
	uid_t uid;
	uint32_t streams;
	uint64_t bytes;
	uint64_t files; /* descriptors held for this uid's sessions */
	struct uid_use *next;
};

struct session {
	struct server *srv;
	uv_poll_t poll;
	int fd;
	struct ucred cred;
	char label[96];
	bool hello;
	int *files;
	uint32_t files_total, files_got;
	uint32_t files_charged; /* counted in the uid's files */
	struct stream *stream;
	struct producer *prod; /* the stream's ring */
	uint64_t ring_bytes;
	struct session *next, **pprev;
};

struct server {
	uv_loop_t *loop;
	uv_poll_t poll;
	int fd;
	char path[108];
	struct pool *pool;
	struct server_limits lim;
	struct session *sessions;
	struct uid_use *uids;
	uint64_t next_id;
	uv_timer_t accept_pause; /* out of descriptors: accept later */
	bool accept_paused;
};

static struct uid_use *uid_use(struct server *srv, uid_t uid)
{
	struct uid_use *u;

	for (u = srv->uids; u; u = u->next)
		if (u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->uid = uid;
	u->next = srv->uids;
	srv->uids = u;
	return u;
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

static void reply_error(struct session *ss, uint32_t seq, int code,
			const char *reason)
{
	struct {
		struct proto_error e;
		char text[PROTO_REASON_MAX];
	} m;
	size_t n = strnlen(reason, PROTO_REASON_MAX);

	m.e.code = code;
	m.e.len = (uint32_t)n;
	memcpy(m.text, reason, n);
	plog(PLOG_INFO, "%s: refused: %s", ss->label, reason);
	msg_send(ss->fd, PROTO_ERROR, seq, &m, (uint32_t)(sizeof(m.e) + n),
		 NULL, 0);
}

static void close_files(struct session *ss)
{
	for (uint32_t i = 0; i < ss->files_got; i++)
		close(ss->files[i]);
	free(ss->files);
	ss->files = NULL;
	ss->files_got = ss->files_total = 0;
}

static void session_closed(uv_handle_t *h)
{
	free(h->data);
}

static void session_end(struct session *ss, const char *why)
{
	struct uid_use *u;

	plog(PLOG_INFO, "%s: session ends: %s", ss->label, why);
	u = uid_use(ss->srv, ss->cred.uid);
	if (ss->stream) {
		stream_free(ss->stream);
		producer_free(ss->prod);
		if (u) {
			u->streams--;
			u->bytes -= ss->ring_bytes;
		}
	}
	if (u)
		u->files -= ss->files_charged;
	close_files(ss);
	*ss->pprev = ss->next;
	if (ss->next)
		ss->next->pprev = ss->pprev;
	uv_poll_stop(&ss->poll);
	close(ss->fd);
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
	ss->hello = true;
	msg_send(ss->fd, PROTO_HELLO_OK, h->seq, &ok, sizeof(ok), NULL, 0);
}

static void on_files(struct session *ss, const struct proto_hdr *h,
		     const struct proto_files *m, int *fds, unsigned nfds)
{
	struct uid_use *u;
	char why[160];

	if (!ss->hello || ss->stream) {
		snprintf(why, sizeof(why), "FILES %s",
			 ss->stream ? "after OPEN" : "before HELLO");
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
		ss->files = calloc(m->total, sizeof(int));
		if (!ss->files) {
			snprintf(why, sizeof(why), "out of memory");
			goto bad;
		}
		ss->files_total = m->total;
	}
	u = uid_use(ss->srv, ss->cred.uid);
	if (!u || u->files + nfds > ss->srv->lim.max_uid_files) {
		snprintf(why, sizeof(why),
			 "uid %u holds %" PRIu64
			 " descriptors in this daemon, the limit is %" PRIu64,
			 (unsigned)ss->cred.uid, u ? u->files : 0,
			 ss->srv->lim.max_uid_files);
		goto bad;
	}
	for (unsigned i = 0; i < nfds; i++) {
		struct stat st;

		/* Only regular files: a pipe or socket could stall us. */
		if (fstat(fds[i], &st) || !S_ISREG(st.st_mode)) {
			snprintf(why, sizeof(why),
				 "file %" PRIu32 " is not a regular file",
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
	reply_error(ss, h->seq, LOADER_EPROTO, why);
}

static void on_open(struct session *ss, const struct proto_hdr *h,
		    const struct proto_open *m)
{
	struct server *srv = ss->srv;
	struct stream_config c;
	struct producer_params pp = {
		.slots = m->ring_slots,
		.epochs = m->epochs,
		.start_epoch = m->start_epoch,
		.max_bytes = srv->lim.max_ring_bytes,
		.label = ss->label,
	};
	struct stream *st = NULL;
	struct producer *pr = NULL;
	struct proto_open_ok ok = { 0 };
	struct uid_use *u;
	struct diag d = { { 0 } };
	int fds[2], err;

	if (!ss->hello || ss->stream) {
		reply_error(ss, h->seq, LOADER_EPROTO,
			    ss->stream ? "a session holds one stream" :
					 "OPEN before HELLO");
		return;
	}
	if (!ss->files_total || ss->files_got != ss->files_total) {
		reply_error(ss, h->seq, LOADER_EPROTO,
			    "OPEN before all the dataset's files were sent");
		return;
	}
	u = uid_use(srv, ss->cred.uid);
	if (!u) {
		reply_error(ss, h->seq, -ENOMEM, "out of memory");
		return;
	}
	if (u->streams >= srv->lim.max_uid_streams) {
		char why[128];

		snprintf(why, sizeof(why),
			 "uid %u has %" PRIu32 " streams, the limit",
			 (unsigned)ss->cred.uid, u->streams);
		reply_error(ss, h->seq, -EUSERS, why);
		return;
	}
	if (srv->lim.max_uid_bytes > u->bytes)
		pp.max_bytes =
			srv->lim.max_uid_bytes - u->bytes < pp.max_bytes ?
				srv->lim.max_uid_bytes - u->bytes :
				pp.max_bytes;
	else
		pp.max_bytes = 0;
	err = openreq_config(m, &c, &d);
	c.label = ss->label;
	c.max_pixels = srv->lim.max_pixels;
	/* The stream takes the files, whatever happens. */
	if (err)
		for (uint32_t i = 0; i < ss->files_got; i++)
			close(ss->files[i]);
	else
		err = stream_new(&st, &c, ss->files, ss->files_got, srv->pool,
				 &d);
	free(ss->files);
	ss->files = NULL;
	ss->files_got = ss->files_total = 0;
	if (!err) {
		pp.lay = stream_layout(st);
		err = producer_new(&pr, &pp, &d);
	}
	if (!err)
		err = stream_start(st, producer_sink(pr), &d);
	if (err) {
		stream_free(st);
		producer_free(pr);
		reply_error(ss, h->seq, err,
			    d.msg[0] ? d.msg : loader_strerror(err));
		return;
	}
	ss->stream = st;
	ss->prod = pr;
	producer_reply(pr, &ok, &fds[0], &fds[1]);
	ok.batches_per_epoch = pp.lay->batches_per_epoch;
	ok.samples = pp.lay->samples;
	ss->ring_bytes = ok.ring_bytes;
	u->streams++;
	u->bytes += ok.ring_bytes;
	plog(PLOG_INFO,
	     "%s: stream open: %" PRIu64 " samples, %" PRIu64
	     " batches per epoch, ring %" PRIu64 " bytes",
	     ss->label, ok.samples, ok.batches_per_epoch, ok.ring_bytes);
	err = msg_send(ss->fd, PROTO_OPEN_OK, h->seq, &ok, sizeof(ok), fds, 2);
	if (err)
		plog(PLOG_WARN, "%s: OPEN_OK: %s", ss->label,
		     loader_strerror(err));
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
	}
	st.rss_bytes = rss_bytes();
	msg_send(ss->fd, PROTO_STATS_OK, h->seq, &st, sizeof(st), NULL, 0);
}

static void on_session(uv_poll_t *poll, int status, int events)
{
	struct session *ss = poll->data;
	union {
		struct proto_hello hello;
		struct proto_files files;
		struct proto_open open;
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
	case PROTO_STATS: on_stats(ss, &h); break;
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

	srv->accept_paused = false;
	uv_poll_start(&srv->poll, UV_READABLE, on_accept);
}

static void on_accept(uv_poll_t *poll, int status, int events)
{
	struct server *srv = poll->data;
	struct session *ss;
	socklen_t len;
	int fd;

	if (status < 0)
		return;
	fd = accept4(srv->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE) {
			/*
			 * The pending connection stays readable: polling on
			 * would spin. Stop accepting for a moment instead.
			 */
			plog(PLOG_WARN, "accept: %s: not accepting for %d ms",
			     strerror(errno), SERVER_ACCEPT_PAUSE_MS);
			uv_poll_stop(&srv->poll);
			srv->accept_paused = true;
			uv_timer_start(&srv->accept_pause, on_accept_resume,
				       SERVER_ACCEPT_PAUSE_MS, 0);
		} else if (errno != EAGAIN && errno != EINTR) {
			plog(PLOG_WARN, "accept: %s", strerror(errno));
		}
		return;
	}
	ss = calloc(1, sizeof(*ss));
	if (!ss) {
		close(fd);
		return;
	}
	ss->srv = srv;
	ss->fd = fd;
	len = sizeof(ss->cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &ss->cred, &len))
		ss->cred.uid = (uid_t)-1;
	snprintf(ss->label, sizeof(ss->label),
		 "session %" PRIu64 " (pid %d uid %u gid %u)", ++srv->next_id,
		 (int)ss->cred.pid, (unsigned)ss->cred.uid,
		 (unsigned)ss->cred.gid);
	if (uv_poll_init(srv->loop, &ss->poll, fd)) {
		close(fd);
		free(ss);
		return;
	}
	ss->poll.data = ss;
	ss->next = srv->sessions;
	if (ss->next)
		ss->next->pprev = &ss->next;
	ss->pprev = &srv->sessions;
	srv->sessions = ss;
	uv_poll_start(&ss->poll, UV_READABLE | UV_DISCONNECT, on_session);
	plog(PLOG_INFO, "%s: connected", ss->label);
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

int server_new(struct server **out, uv_loop_t *loop, const char *path,
	       struct pool *pool, const struct server_limits *lim,
	       struct diag *d)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct server *srv;
	int err;

	if (strlen(path) >= sizeof(a.sun_path))
		return diag_set(d, -ENAMETOOLONG,
				"--socket %s: longer than %zu bytes", path,
				sizeof(a.sun_path) - 1);
	if (socket_alive(path))
		return diag_set(d, -EADDRINUSE,
				"%s: another loaderd is serving this socket",
				path);
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->loop = loop;
	srv->pool = pool;
	srv->lim = *lim;
	snprintf(srv->path, sizeof(srv->path), "%s", path);
	srv->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
			 0);
	if (srv->fd < 0) {
		err = diag_set(d, -errno, "socket: %s", strerror(errno));
		free(srv);
		return err;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	unlink(path); /* a stale socket from a dead daemon */
	if (bind(srv->fd, (struct sockaddr *)&a, sizeof(a)) ||
	    chmod(path, 0666) || listen(srv->fd, 64)) {
		err = diag_set(d, -errno, "%s: %s", path, strerror(errno));
		close(srv->fd);
		free(srv);
		return err;
	}
	uv_poll_init(loop, &srv->poll, srv->fd);
	srv->poll.data = srv;
	uv_timer_init(loop, &srv->accept_pause);
	srv->accept_pause.data = srv;
	uv_poll_start(&srv->poll, UV_READABLE, on_accept);
	*out = srv;
	return 0;
}

static void server_closed(uv_handle_t *h)
{
	free(h->data);
}

void server_free(struct server *srv)
{
	if (!srv)
		return;
	while (srv->sessions)
		session_end(srv->sessions, "daemon stopping");
	uv_poll_stop(&srv->poll);
	uv_timer_stop(&srv->accept_pause);
	uv_close((uv_handle_t *)&srv->accept_pause, NULL);
	close(srv->fd);
	unlink(srv->path);
	while (srv->uids) {
		struct uid_use *u = srv->uids;

		srv->uids = u->next;
		free(u);
	}
	/* The handle lives in srv: free it once libuv is done with it. */
	uv_close((uv_handle_t *)&srv->poll, server_closed);
}
