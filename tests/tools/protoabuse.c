/*
 * protoabuse.c - test helper: speak loaderd's raw protocol badly and check
 * that the daemon answers, survives and keeps serving.
 *
 *	protoabuse SOCKET DATASET_DIR
 *
 * Every case connects afresh (unless it says otherwise), sends something
 * malformed or out of range, and expects a PROTO_ERROR with a non-empty
 * reason within PA_REPLY_MS; where the session should survive it, a valid
 * HELLO afterwards must still get its HELLO_OK. The ring cases open a real
 * stream on DATASET_DIR (a one-or-more-shard dataset made by loaderctl
 * pack) and attack the only memory a client writes, the consumer index.
 * The last cases check that a bystander session opened before all of this
 * still answers, that libloader still gets a whole epoch, that the daemon
 * process is alive, and that it leaked no descriptors.
 *
 * Prints TAP; exits 0 when every case passed, 1 when one failed, 2 on
 * usage errors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "futex.h"
#include "loader.h"
#include "msg.h"
#include "proto.h"
#include "ring.h"

#define PA_REPLY_MS	2000 /* how long a reply may take */
#define PA_RING_MS	2000 /* how long the ring may take to change state */
#define PA_MANIFEST_MAX (1 << 20)
#define PA_MAX_SHARDS	4096
#define PA_NOTES	4096
#define PA_NO_SEQ	UINT32_MAX /* the reply cannot echo a seq */

enum { PA_PASS = 0, PA_FAIL = 1, PA_SKIP = 2 };

struct ctx {
	const char *sock;
	const char *dir;
	char manifest[PATH_MAX];
	char *shard[PA_MAX_SHARDS];
	uint32_t nshards;
	uint32_t seq;
	pid_t pid;	 /* the daemon's, from HELLO_OK */
	int bystander;	 /* a session that lives through every case */
	int base_fds;	 /* the daemon's descriptors with only the bystander */
	char diag[1024]; /* why the current case failed */
	char notes[PA_NOTES]; /* comment lines for the current case */
	size_t nnotes;
};

/* Every message the daemon may send, received in place. */
union reply {
	struct proto_hello_ok hello;
	struct proto_open_ok open;
	struct proto_stats_ok stats;
	struct {
		struct proto_error e;
		char reason[PROTO_REASON_MAX];
	} err;
	char raw[PROTO_MAX_MSG];
};

/* A stream opened by hand: the session and the ring's two mappings. */
struct fx {
	int fd;
	int ring_fd, cons_fd;
	struct proto_open_ok ok;
	const struct ring_hdr *hdr;
	struct ring_cons *cons;
	char reason[PROTO_REASON_MAX + 1]; /* of a refused OPEN */
};

struct abuse_case {
	const char *desc;
	int (*run)(struct ctx *c, const void *arg);
	const void *arg;
};

/* ---- reporting ----------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static int fail(struct ctx *c,
						      const char *fmt, ...)
{
	va_list ap;

	/* The first failure explains the case; later ones are consequences. */
	if (c->diag[0])
		return PA_FAIL;
	va_start(ap, fmt);
	vsnprintf(c->diag, sizeof(c->diag), fmt, ap);
	va_end(ap);
	return PA_FAIL;
}

__attribute__((format(printf, 2, 3))) static void note(struct ctx *c,
						       const char *fmt, ...)
{
	va_list ap;
	int n;

	if (c->nnotes >= sizeof(c->notes) - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(c->notes + c->nnotes, sizeof(c->notes) - c->nnotes, fmt,
		      ap);
	va_end(ap);
	if (n < 0)
		return;
	c->nnotes += (size_t)n;
	if (c->nnotes >= sizeof(c->notes) - 1) {
		c->nnotes = sizeof(c->notes) - 2;
	}
	c->notes[c->nnotes++] = '\n';
	c->notes[c->nnotes] = '\0';
}

/* Print text of n bytes from the daemon as a safe, one-line string. */
static void clean_text(char *dst, size_t cap, const char *src, size_t n)
{
	size_t i;

	for (i = 0; i < n && i + 1 < cap; i++) {
		unsigned char ch = (unsigned char)src[i];

		dst[i] = ch < 0x20 || ch >= 0x7f ? '?' : (char)ch;
	}
	dst[i] = '\0';
}

static void report(struct ctx *c, unsigned n, const char *desc, int r)
{
	if (r == PA_SKIP)
		printf("ok %u - %s # SKIP %s\n", n, desc, c->diag);
	else
		printf("%s %u - %s\n", r == PA_PASS ? "ok" : "not ok", n, desc);
	if (r == PA_FAIL)
		printf("# %s\n", c->diag[0] ? c->diag : "failed");
	for (char *p = c->notes, *nl; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		if (!nl)
			break;
		printf("#   %.*s\n", (int)(nl - p), p);
	}
	fflush(stdout);
	c->diag[0] = '\0';
	c->notes[0] = '\0';
	c->nnotes = 0;
}

/* ---- time ------------------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- the dataset's files ------------------------------------------------- */

/*
 * Read the shard file names from the manifest: the strings after "file"
 * keys within the "shards" array. A minimal parse, enough for what
 * loaderctl pack writes; the daemon does the real parse.
 */
static int load_manifest(struct ctx *c)
{
	char *buf = malloc(PA_MANIFEST_MAX + 1), *p, *end;
	ssize_t n;
	int fd, err = -1;

	snprintf(c->manifest, sizeof(c->manifest), "%s/manifest.json", c->dir);
	fd = open(c->manifest, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || !buf) {
		fprintf(stderr, "protoabuse: %s: %s\n", c->manifest,
			strerror(errno));
		goto out;
	}
	n = read(fd, buf, PA_MANIFEST_MAX);
	if (n <= 0)
		goto out;
	buf[n] = '\0';
	p = strstr(buf, "\"shards\"");
	p = p ? strchr(p, '[') : NULL;
	end = p ? strchr(p, ']') : NULL; /* shard entries hold no arrays */
	if (!p || !end)
		goto out;
	*end = '\0';
	while ((p = strstr(p, "\"file\"")) && c->nshards < PA_MAX_SHARDS) {
		char *q, *name;

		p = strchr(p + 6, '"');
		if (!p)
			break;
		q = strchr(++p, '"');
		if (!q)
			break;
		*q = '\0';
		if (strchr(p, '/') || strchr(p, '\\'))
			goto out;
		if (asprintf(&name, "%s/%s", c->dir, p) < 0)
			goto out;
		c->shard[c->nshards++] = name;
		p = q + 1;
	}
	err = c->nshards ? 0 : -1;
out:
	if (err)
		fprintf(stderr, "protoabuse: %s: cannot find its shards\n",
			c->manifest);
	if (fd >= 0)
		close(fd);
	free(buf);
	return err;
}

/* Open manifest + shards into fds (room for 1 + nshards). */
static int open_dataset(struct ctx *c, int *fds)
{
	fds[0] = open(c->manifest, O_RDONLY | O_CLOEXEC);
	if (fds[0] < 0)
		return fail(c, "%s: %s", c->manifest, strerror(errno));
	for (uint32_t i = 0; i < c->nshards; i++) {
		fds[i + 1] = open(c->shard[i], O_RDONLY | O_CLOEXEC);
		if (fds[i + 1] < 0) {
			int e = errno;

			for (uint32_t k = 0; k <= i; k++)
				close(fds[k]);
			return fail(c, "%s: %s", c->shard[i], strerror(e));
		}
	}
	return 0;
}

static void close_all(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* A new, unlinked temporary file under $TMPDIR (or /tmp); -1 on failure. */
static int temp_fd(struct ctx *c)
{
	const char *dir = getenv("TMPDIR");
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/protoabuse.XXXXXX",
		 dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return fail(c, "mkstemp %s: %s", path, strerror(errno)), -1;
	unlink(path);
	return fd;
}

/* A temporary regular file holding text. */
static int temp_file(struct ctx *c, const char *text)
{
	size_t len = strlen(text);
	int fd = temp_fd(c);

	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		return fail(c, "writing a temporary file: short"), -1;
	}
	return fd;
}

/* ---- the socket ---------------------------------------------------------- */

static int dial(struct ctx *c)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return fail(c, "socket: %s", strerror(errno)), -1;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", c->sock);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		fail(c, "connect %s: %s", c->sock, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Send len bytes as one packet, with nfds descriptors, past msg_send(). */
static int raw_send(struct ctx *c, int fd, const void *buf, size_t len,
		    const int *fds, unsigned nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 256)];
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > 256)
		return fail(c, "raw_send: %u descriptors", nfds);
	if (nfds) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	n = sendmsg(fd, &m, MSG_NOSIGNAL);
	if (n < 0)
		return fail(c, "sendmsg of %zu bytes: %s", len,
			    strerror(errno));
	if ((size_t)n != len)
		return fail(c, "sendmsg sent %zd of %zu bytes", n, len);
	return 0;
}

static int send_msg(struct ctx *c, int fd, uint16_t type, uint32_t seq,
		    const void *payload, uint32_t len, const int *fds,
		    unsigned nfds)
{
	int err = msg_send(fd, type, seq, payload, len, fds, nfds);

	if (err)
		return fail(c, "sending %s: %s", msg_type_name(type),
			    loader_strerror(err));
	return 0;
}

/*
 * Receive the next message within PA_REPLY_MS. Descriptors it carries go
 * to fds (room for 2) when fds is given, else they are closed.
 */
static int recv_reply(struct ctx *c, int fd, struct proto_hdr *h,
		      union reply *r, int *fds, unsigned *nfds)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int got[2];
	unsigned n = 0;
	char why[256];
	int err;

	if (nfds)
		*nfds = 0;
	do
		err = poll(&p, 1, PA_REPLY_MS);
	while (err < 0 && errno == EINTR);
	if (err < 0)
		return fail(c, "poll: %s", strerror(errno));
	if (err == 0)
		return fail(c, "no reply within %d ms", PA_REPLY_MS);
	err = msg_recv(fd, h, r, sizeof(*r), got, 2, &n, why, sizeof(why));
	if (err == -EPIPE)
		return fail(
			c,
			"the daemon closed the connection instead of replying");
	if (err == LOADER_EPROTO)
		return fail(c, "malformed reply: %s", why);
	if (err)
		return fail(c, "recvmsg: %s", loader_strerror(err));
	if (fds) {
		memcpy(fds, got, n * sizeof(int));
		*nfds = n;
	} else {
		close_all(got, n);
	}
	return 0;
}

/* The reason of a PROTO_ERROR as a safe C string. */
static void error_reason(const union reply *r, char *dst, size_t cap)
{
	clean_text(dst, cap, r->err.reason, r->err.e.len);
}

/*
 * Expect a PROTO_ERROR answering seq (PA_NO_SEQ: whatever it echoes) with
 * a non-empty reason that contains want (case-insensitive; NULL: any).
 */
static int expect_error(struct ctx *c, int fd, uint32_t seq, const char *want)
{
	char reason[PROTO_REASON_MAX + 1];
	struct proto_hdr h;
	union reply r;

	if (recv_reply(c, fd, &h, &r, NULL, NULL))
		return PA_FAIL;
	if (h.type != PROTO_ERROR)
		return fail(c, "got %s (seq %" PRIu32 "), expected ERROR",
			    msg_type_name(h.type), h.seq);
	error_reason(&r, reason, sizeof(reason));
	note(c, "reason (code %" PRId32 "): %s", r.err.e.code, reason);
	if (seq != PA_NO_SEQ && h.seq != seq)
		return fail(c, "ERROR echoes seq %" PRIu32 ", sent %" PRIu32,
			    h.seq, seq);
	if (!r.err.e.len)
		return fail(c, "ERROR without a reason");
	if (r.err.e.code >= 0)
		return fail(c, "ERROR code %" PRId32 " is not negative",
			    r.err.e.code);
	if (want && !strcasestr(reason, want))
		return fail(c, "reason does not mention \"%s\"", want);
	return 0;
}

static int hello(struct ctx *c, int fd)
{
	struct proto_hello m = { .version = PROTO_VERSION };
	uint32_t seq = ++c->seq;
	struct proto_hdr h;
	union reply r;

	if (send_msg(c, fd, PROTO_HELLO, seq, &m, sizeof(m), NULL, 0) ||
	    recv_reply(c, fd, &h, &r, NULL, NULL))
		return PA_FAIL;
	if (h.type == PROTO_ERROR) {
		char reason[PROTO_REASON_MAX + 1];

		error_reason(&r, reason, sizeof(reason));
		return fail(c, "HELLO refused: %s", reason);
	}
	if (h.type != PROTO_HELLO_OK || h.seq != seq)
		return fail(c, "HELLO answered with %s seq %" PRIu32,
			    msg_type_name(h.type), h.seq);
	if (r.hello.version != PROTO_VERSION || !r.hello.pid)
		return fail(c, "HELLO_OK version %" PRIu32 " pid %" PRIu32,
			    r.hello.version, r.hello.pid);
	c->pid = (pid_t)r.hello.pid;
	return 0;
}

/*
 * A session that said HELLO, and the dataset's files opened into fds:
 * the session's descriptor, or -1 (the reason in c->diag, nothing left
 * open).
 */
static int greet(struct ctx *c, int *fds)
{
	int fd = dial(c);

	if (fd < 0)
		return -1;
	if (hello(c, fd) || open_dataset(c, fds)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* After a refused message: is the session still good for a HELLO? */
static int still_usable(struct ctx *c, int fd)
{
	if (hello(c, fd))
		return fail(c, "the session is not usable after the error");
	return 0;
}

/* One FILES message with explicit fields, and whatever fds are given. */
static int files_msg(struct ctx *c, int fd, uint32_t seq, uint32_t first,
		     uint32_t count, uint32_t total, const int *fds,
		     unsigned nfds)
{
	struct proto_files m = { .first = first,
				 .count = count,
				 .total = total };

	return send_msg(c, fd, PROTO_FILES, seq, &m, sizeof(m), fds, nfds);
}

/* Send fds as the dataset's files, in batches; the daemon answers none. */
static int send_files(struct ctx *c, int fd, const int *fds, uint32_t n)
{
	for (uint32_t first = 0; first < n; first += PROTO_MAX_FDS) {
		uint32_t k =
			n - first < PROTO_MAX_FDS ? n - first : PROTO_MAX_FDS;

		if (files_msg(c, fd, ++c->seq, first, k, n, fds + first, k))
			return PA_FAIL;
	}
	return 0;
}

/* A connected session that said HELLO and sent the whole dataset. */
static int ready_session(struct ctx *c)
{
	int fds[PA_MAX_SHARDS + 1];
	int fd = dial(c);
	int err;

	if (fd < 0)
		return -1;
	if (hello(c, fd) || open_dataset(c, fds)) {
		close(fd);
		return -1;
	}
	err = send_files(c, fd, fds, c->nshards + 1);
	close_all(fds, c->nshards + 1);
	if (err) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A small, valid OPEN: image and label as stored, one epoch. */
static void base_open(struct proto_open *o)
{
	memset(o, 0, sizeof(*o));
	o->batch_size = 64;
	o->epochs = 1;
	o->world = 1;
	o->ring_slots = 4;
	o->noutputs = 2;
	snprintf(o->out[0].field, PROTO_NAME_MAX, "image");
	snprintf(o->out[1].field, PROTO_NAME_MAX, "label");
}

/* ---- a stream by hand ---------------------------------------------------- */

static void fx_close(struct fx *x)
{
	if (x->hdr)
		munmap((void *)x->hdr, x->ok.ring_bytes);
	if (x->cons)
		munmap(x->cons, x->ok.cons_bytes);
	if (x->ring_fd >= 0)
		close(x->ring_fd);
	if (x->cons_fd >= 0)
		close(x->cons_fd);
	if (x->fd >= 0)
		close(x->fd);
	x->hdr = NULL;
	x->cons = NULL;
	x->fd = x->ring_fd = x->cons_fd = -1;
}

/*
 * HELLO, FILES (fds, or the dataset when fds is NULL), OPEN o; then map
 * the ring read-only and the consumer page read-write. Returns 0 with the
 * stream in x; 1 when the daemon refused the OPEN (reason in x->reason,
 * session still in x->fd); PA_FAIL otherwise.
 */
static int fx_open(struct ctx *c, struct fx *x, const struct proto_open *o)
{
	uint32_t seq;
	struct proto_hdr h;
	union reply r;
	struct stat st;
	int fds[2];
	unsigned n;
	void *map;

	memset(x, 0, sizeof(*x));
	x->fd = x->ring_fd = x->cons_fd = -1;
	x->fd = ready_session(c);
	if (x->fd < 0)
		return PA_FAIL;
	seq = ++c->seq;
	if (send_msg(c, x->fd, PROTO_OPEN, seq, o, sizeof(*o), NULL, 0) ||
	    recv_reply(c, x->fd, &h, &r, fds, &n))
		return PA_FAIL;
	if (h.type == PROTO_ERROR) {
		error_reason(&r, x->reason, sizeof(x->reason));
		note(c, "OPEN refused: %s", x->reason);
		return r.err.e.len ? 1 :
				     fail(c, "OPEN refused without a reason");
	}
	if (h.type != PROTO_OPEN_OK || h.seq != seq || n != 2) {
		close_all(fds, n);
		return fail(c,
			    "OPEN answered with %s seq %" PRIu32 " and %u fds",
			    msg_type_name(h.type), h.seq, n);
	}
	x->ok = r.open;
	x->ring_fd = fds[0];
	x->cons_fd = fds[1];
	if (fstat(x->ring_fd, &st) ||
	    (uint64_t)st.st_size != x->ok.ring_bytes ||
	    x->ok.ring_bytes < RING_PAGE)
		return fail(c, "ring memfd of %jd bytes, OPEN_OK says %" PRIu64,
			    (intmax_t)st.st_size, x->ok.ring_bytes);
	if (fstat(x->cons_fd, &st) ||
	    (uint64_t)st.st_size != x->ok.cons_bytes ||
	    x->ok.cons_bytes < sizeof(struct ring_cons))
		return fail(
			c, "consumer memfd of %jd bytes, OPEN_OK says %" PRIu64,
			(intmax_t)st.st_size, x->ok.cons_bytes);
	map = mmap(NULL, x->ok.ring_bytes, PROT_READ, MAP_SHARED, x->ring_fd,
		   0);
	if (map == MAP_FAILED)
		return fail(c, "mmap ring read-only: %s", strerror(errno));
	x->hdr = map;
	map = mmap(NULL, x->ok.cons_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		   x->cons_fd, 0);
	if (map == MAP_FAILED)
		return fail(c, "mmap consumer page read-write: %s",
			    strerror(errno));
	x->cons = map;
	if (x->hdr->magic != RING_MAGIC || x->hdr->version != RING_VERSION)
		return fail(c, "ring magic 0x%08" PRIx32 " version %" PRIu32,
			    x->hdr->magic, x->hdr->version);
	return 0;
}

static uint32_t ring_state(const struct fx *x)
{
	return __atomic_load_n(&x->hdr->state, __ATOMIC_ACQUIRE);
}

static uint32_t ring_prod(const struct fx *x)
{
	return __atomic_load_n(&x->hdr->prod, __ATOMIC_ACQUIRE);
}

/* Wait up to ms for the ring to leave RING_RUNNING; its state. */
static uint32_t wait_state(const struct fx *x, int ms)
{
	int64_t end = now_ms() + ms;

	while (ring_state(x) == RING_RUNNING && now_ms() < end)
		nap_ms(2);
	return ring_state(x);
}

/*
 * Expect the ring to fail within PA_RING_MS with a reason naming want.
 */
static int expect_ring_failed(struct ctx *c, const struct fx *x,
			      const char *want)
{
	char reason[PROTO_REASON_MAX + 1];
	uint32_t st = wait_state(x, PA_RING_MS);

	clean_text(reason, sizeof(reason), x->hdr->reason,
		   strnlen(x->hdr->reason, PROTO_REASON_MAX));
	if (st != RING_FAILED)
		return fail(c,
			    "ring state %" PRIu32
			    " after %d ms, expected RING_FAILED (%d)",
			    st, PA_RING_MS, RING_FAILED);
	note(c, "ring failed (error %" PRId32 "): %s", x->hdr->error, reason);
	if (!reason[0])
		return fail(c, "the failed ring gives no reason");
	if (want && !strcasestr(reason, want))
		return fail(c, "ring reason does not mention \"%s\"", want);
	return 0;
}

/* STATS on a live session: still answered? */
static int stats(struct ctx *c, int fd, struct proto_stats_ok *out)
{
	uint32_t seq = ++c->seq;
	struct proto_hdr h;
	union reply r;

	if (send_msg(c, fd, PROTO_STATS, seq, NULL, 0, NULL, 0) ||
	    recv_reply(c, fd, &h, &r, NULL, NULL))
		return PA_FAIL;
	if (h.type != PROTO_STATS_OK || h.seq != seq)
		return fail(c, "STATS answered with %s seq %" PRIu32,
			    msg_type_name(h.type), h.seq);
	if (out)
		*out = r.stats;
	return 0;
}

/* ---- malformed packets ------------------------------------------------- */

/* A header as bytes, with its fields chosen freely. */
struct raw_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length;  /* the header's claim */
	uint32_t payload; /* bytes actually sent after the header */
	uint32_t cut;	  /* send only this many bytes in all (0: whole) */
	bool empty;	  /* send a 0-byte packet */
	bool no_seq;	  /* the reply cannot echo our seq */
};

static int case_raw(struct ctx *c, const void *arg)
{
	const struct raw_hdr *k = arg;
	static char buf[PROTO_MAX_MSG + 4096];
	struct proto_hdr h = {
		.magic = k->magic,
		.version = k->version,
		.type = k->type,
		.length = k->length,
		.seq = ++c->seq,
	};
	size_t len = sizeof(h) + k->payload;
	int fd = dial(c);
	int r;

	if (fd < 0)
		return PA_FAIL;
	if (len > sizeof(buf))
		len = sizeof(buf);
	memset(buf, 0, sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	if (k->cut)
		len = k->cut;
	if (k->empty)
		len = 0;
	r = raw_send(c, fd, buf, len, NULL, 0);
	if (!r)
		r = expect_error(c, fd, k->no_seq ? PA_NO_SEQ : h.seq, NULL);
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

static const struct raw_hdr raw_empty = { .empty = true, .no_seq = true };
static const struct raw_hdr raw_short = { .magic = PROTO_MAGIC,
					  .cut = 3,
					  .no_seq = true };
static const struct raw_hdr raw_header_only_15 = { .magic = PROTO_MAGIC,
						   .version = PROTO_VERSION,
						   .type = PROTO_HELLO,
						   .cut = 15,
						   .no_seq = true };
static const struct raw_hdr raw_magic = { .magic = 0xdeadbeef,
					  .version = PROTO_VERSION,
					  .type = PROTO_HELLO,
					  .length = 8,
					  .payload = 8 };
static const struct raw_hdr raw_version = { .magic = PROTO_MAGIC,
					    .version = 7,
					    .type = PROTO_HELLO,
					    .length = 8,
					    .payload = 8 };
static const struct raw_hdr raw_type999 = { .magic = PROTO_MAGIC,
					    .version = PROTO_VERSION,
					    .type = 999,
					    .length = 8,
					    .payload = 8 };
static const struct raw_hdr raw_type0 = {
	.magic = PROTO_MAGIC,
	.version = PROTO_VERSION,
	.type = 0,
};
static const struct raw_hdr raw_hello4 = { .magic = PROTO_MAGIC,
					   .version = PROTO_VERSION,
					   .type = PROTO_HELLO,
					   .length = 4,
					   .payload = 4 };
static const struct raw_hdr raw_longer = { .magic = PROTO_MAGIC,
					   .version = PROTO_VERSION,
					   .type = PROTO_HELLO,
					   .length = 200,
					   .payload = 8 };
static const struct raw_hdr raw_huge = { .magic = PROTO_MAGIC,
					 .version = PROTO_VERSION,
					 .type = PROTO_HELLO,
					 .length = 0xffffffffu,
					 .payload = 8 };
static const struct raw_hdr raw_oversize = { .magic = PROTO_MAGIC,
					     .version = PROTO_VERSION,
					     .type = PROTO_OPEN,
					     .length = PROTO_MAX_MSG + 2000,
					     .payload = PROTO_MAX_MSG + 2000 };
static const struct raw_hdr raw_stats4 = { .magic = PROTO_MAGIC,
					   .version = PROTO_VERSION,
					   .type = PROTO_STATS,
					   .length = 4,
					   .payload = 4 };
static const struct raw_hdr raw_error_bad = {
	/* An ERROR whose 0-byte reason leaves 8 bytes unaccounted. */
	.magic = PROTO_MAGIC,
	.version = PROTO_VERSION,
	.type = PROTO_ERROR,
	.length = 16,
	.payload = 16
};

/* A well-formed message of a type only the daemon sends. */
static int case_daemon_type(struct ctx *c, const void *arg)
{
	const uint16_t *type = arg;
	union reply m;
	uint32_t len = proto_payload_size(*type), seq = ++c->seq;
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	memset(&m, 0, sizeof(m));
	if (*type == PROTO_ERROR) {
		m.err.e.code = -EINVAL;
		m.err.e.len = 3;
		memcpy(m.err.reason, "bad", 3);
		len = sizeof(m.err.e) + 3;
	}
	r = send_msg(c, fd, *type, seq, &m, len, NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq, NULL);
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

static const uint16_t type_hello_ok = PROTO_HELLO_OK;
static const uint16_t type_open_ok = PROTO_OPEN_OK;
static const uint16_t type_error = PROTO_ERROR;

/* ---- HELLO --------------------------------------------------------------- */

/* HELLO of a newer version, or (arg non-NULL) with flags, none defined. */
static int case_hello_v2(struct ctx *c, const void *arg)
{
	struct proto_hello m = { .version = PROTO_VERSION + !arg,
				 .flags = arg ? 4 : 0 };
	uint32_t seq = ++c->seq;
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	r = send_msg(c, fd, PROTO_HELLO, seq, &m, sizeof(m), NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq,
				 arg ? "none are defined" : "version");
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/* HELLO (or STATS) carrying descriptors, which only FILES may. */
static int case_fds_on(struct ctx *c, const void *arg)
{
	const uint16_t *type = arg;
	struct proto_hello m = { .version = PROTO_VERSION };
	uint32_t seq = ++c->seq, len = *type == PROTO_HELLO ? sizeof(m) : 0;
	int fds[PA_MAX_SHARDS + 1];
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	if (open_dataset(c, fds)) {
		close(fd);
		return PA_FAIL;
	}
	r = send_msg(c, fd, *type, seq, len ? &m : NULL, len, fds, 2);
	close_all(fds, c->nshards + 1);
	if (!r)
		r = expect_error(c, fd, seq, "descriptor");
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

static const uint16_t type_hello = PROTO_HELLO;
static const uint16_t type_stats = PROTO_STATS;

/* ---- OPEN out of turn ------------------------------------------------- */

static int case_open_before_hello(struct ctx *c, const void *arg)
{
	struct proto_open o;
	uint32_t seq = ++c->seq;
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	base_open(&o);
	r = send_msg(c, fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq, "hello");
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/*
 * loaderctl's requests out of place: STATUS (or STATS) before HELLO,
 * STREAM_INFO of a stream that is not there, of the wrong length, and
 * with its reserved word set.
 */
enum status_abuse {
	SA_BEFORE_HELLO,
	SA_PAST_END,
	SA_SHORT,
	SA_RESERVED,
	SA_STATS_BEFORE_HELLO
};

static int case_status(struct ctx *c, const void *arg)
{
	const enum status_abuse *k = arg;
	struct proto_stream_info q = { .index = 100000 };
	uint32_t seq;
	int fd = dial(c), r = 0;

	if (fd < 0)
		return PA_FAIL;
	if (*k != SA_BEFORE_HELLO && *k != SA_STATS_BEFORE_HELLO)
		r = hello(c, fd);
	seq = ++c->seq;
	if (*k == SA_RESERVED)
		q = (struct proto_stream_info){ .index = 0, .reserved = 1 };
	if (!r && (*k == SA_BEFORE_HELLO || *k == SA_STATS_BEFORE_HELLO))
		r = send_msg(c, fd,
			     *k == SA_BEFORE_HELLO ? PROTO_STATUS : PROTO_STATS,
			     seq, NULL, 0, NULL, 0);
	else if (!r)
		r = send_msg(c, fd, PROTO_STREAM_INFO, seq, &q,
			     *k == SA_SHORT ? 4 : sizeof(q), NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq,
				 *k == SA_BEFORE_HELLO ? "STATUS before HELLO" :
				 *k == SA_STATS_BEFORE_HELLO ?
							 "STATS before HELLO" :
				 *k == SA_PAST_END ? "stream 100000" :
				 *k == SA_RESERVED ? "reserved word not 0" :
						     "expected 8");
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/*
 * The saved-streams requests out of place: SAVED before HELLO, SAVED of
 * the wrong length, FORGET with an unterminated name, with unknown
 * flags, and of a name that is not saved.
 */
enum saved_abuse {
	SV_BEFORE_HELLO,
	SV_SHORT,
	SV_RESERVED,
	SV_UNTERMINATED,
	SV_FLAGS,
	SV_NOT_SAVED
};

static int case_saved(struct ctx *c, const void *arg)
{
	const enum saved_abuse *k = arg;
	struct proto_saved q = { 0 };
	struct proto_forget f = { .name = "never-saved" };
	static const char *const want[] = {
		"before HELLO",	  "expected 8",	   "reserved word not 0",
		"not terminated", "unknown flags", "no saved stream"
	};
	uint32_t seq;
	int fd = dial(c), r = 0;

	if (fd < 0)
		return PA_FAIL;
	if (*k != SV_BEFORE_HELLO)
		r = hello(c, fd);
	seq = ++c->seq;
	if (*k == SV_UNTERMINATED)
		memset(f.name, 'n', sizeof(f.name));
	if (*k == SV_FLAGS)
		f.flags = 8;
	if (*k == SV_RESERVED)
		q.reserved = 1;
	if (!r && *k <= SV_RESERVED)
		r = send_msg(c, fd, PROTO_SAVED, seq, &q,
			     *k == SV_SHORT ? 4 : sizeof(q), NULL, 0);
	else if (!r)
		r = send_msg(c, fd, PROTO_FORGET, seq, &f, sizeof(f), NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq, want[*k]);
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/*
 * REMOTE (an s3:// dataset and the client's credentials) out of place or
 * malformed: each is refused with a reason, and the session goes on.
 * Nothing here reaches a store: every case is refused before a stage.
 */
enum remote_abuse {
	RM_BEFORE_HELLO,
	RM_UNTERMINATED,
	RM_ADDRESSING,
	RM_TWICE,
	RM_AFTER_FILES,
	RM_OPEN_LOCAL,
};

static int case_remote(struct ctx *c, const void *arg)
{
	const enum remote_abuse *k = arg;
	static const char *const want[] = {
		"before HELLO",	 "not terminated",     "addressing",
		"second REMOTE", "REMOTE after FILES", "not of a remote dataset"
	};
	struct proto_remote *m = calloc(1, sizeof(*m));
	struct proto_open o;
	uint32_t seq;
	int fd = dial(c), tfd = -1, r = 0;

	if (fd < 0 || !m) {
		free(m);
		if (fd >= 0)
			close(fd);
		return PA_FAIL;
	}
	snprintf(m->url, sizeof(m->url), "s3://bucket/prefix");
	snprintf(m->endpoint, sizeof(m->endpoint), "http://127.0.0.1:9");
	snprintf(m->region, sizeof(m->region), "us-east-1");
	if (*k != RM_BEFORE_HELLO)
		r = hello(c, fd);
	if (*k == RM_UNTERMINATED)
		memset(m->secret_key, 's', sizeof(m->secret_key));
	if (*k == RM_ADDRESSING)
		m->addressing = 7;
	if (!r && *k == RM_AFTER_FILES) {
		tfd = temp_fd(c);
		r = tfd < 0 ? PA_FAIL :
			      files_msg(c, fd, ++c->seq, 0, 1, 2, &tfd, 1);
	}
	if (!r && *k == RM_TWICE)
		r = send_msg(c, fd, PROTO_REMOTE, ++c->seq, m, sizeof(*m), NULL,
			     0);
	seq = ++c->seq;
	if (!r)
		r = send_msg(c, fd, PROTO_REMOTE, seq, m, sizeof(*m), NULL, 0);
	if (!r && *k == RM_OPEN_LOCAL) {
		base_open(&o);
		seq = ++c->seq;
		r = send_msg(c, fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	}
	if (!r)
		r = expect_error(c, fd, seq, want[*k]);
	if (!r)
		r = still_usable(c, fd);
	if (tfd >= 0)
		close(tfd);
	close(fd);
	free(m);
	return r;
}

/*
 * POSITIONS (where an earlier world's ranks stopped) out of place or
 * malformed: each is refused with a reason, and the session goes on.
 */
enum positions_abuse {
	PS_BEFORE_HELLO,
	PS_WORLD0,
	PS_WORLD_BIG,
	PS_GAP,
	PS_COUNT0,
	PS_PAST_WORLD,
	PS_OTHER_WORLD,
	PS_OTHER_PLAN,
	PS_RESERVED,
	PS_OPEN_PLAIN,
	PS_OPEN_PARTIAL,
	PS_OPEN_RANK, /* all of world 1 sent, an OPEN at rank 2^31-1 */
};

static int case_positions(struct ctx *c, const void *arg)
{
	const enum positions_abuse *k = arg;
	static const char *const want[] = {
		"before HELLO",	      "world 0",
		"world 65537",	      "does not follow",
		"does not follow",    "does not follow",
		"does not follow",    "another plan",
		"reserved bits",      "not from positions",
		"before all of them", "rank"
	};
	struct proto_positions *m = calloc(1, sizeof(*m));
	bool opens = *k == PS_OPEN_PLAIN || *k == PS_OPEN_PARTIAL ||
		     *k == PS_OPEN_RANK;
	struct proto_open o;
	uint32_t seq;
	int fd, r = 0;

	if (!m)
		return PA_FAIL;
	fd = opens ? ready_session(c) : dial(c);
	if (fd < 0) {
		free(m);
		return PA_FAIL;
	}
	m->world = *k == PS_OPEN_RANK ? 1 : 4;
	m->count = *k == PS_OPEN_RANK ? 1 : 2;
	m->plan = 0x1234;
	m->plan_end = 1;
	if (*k != PS_BEFORE_HELLO && !opens)
		r = hello(c, fd);
	if (!r && (*k == PS_OTHER_WORLD || *k == PS_OTHER_PLAN || opens)) {
		/* Ranks 0 and 1 first, accepted. */
		r = send_msg(c, fd, PROTO_POSITIONS, ++c->seq, m, sizeof(*m),
			     NULL, 0);
		m->first = 2;
	}
	if (*k == PS_OPEN_PLAIN)
		m->first = 0; /* not sent: the OPEN comes instead */
	switch (*k) {
	case PS_WORLD0: m->world = 0; break;
	case PS_WORLD_BIG: m->world = 65537; break;
	case PS_GAP: m->first = 2; break;
	case PS_COUNT0: m->count = 0; break;
	case PS_PAST_WORLD: m->count = 5; break;
	case PS_OTHER_WORLD: m->world = 5; break;
	case PS_OTHER_PLAN: m->plan = 0x4321; break;
	case PS_RESERVED: m->pos[1].reserved = 1; break;
	default: break;
	}
	seq = ++c->seq;
	if (!r && !opens)
		r = send_msg(c, fd, PROTO_POSITIONS, seq, m, sizeof(*m), NULL,
			     0);
	if (!r && opens) {
		base_open(&o);
		snprintf(o.name, sizeof(o.name), "pa");
		if (*k != PS_OPEN_PLAIN)
			o.flags |= PROTO_OPEN_POSITIONS;
		if (*k == PS_OPEN_RANK)
			o.rank = 0x7fffffff;
		r = send_msg(c, fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	}
	if (!r)
		r = expect_error(c, fd, seq, want[*k]);
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	free(m);
	return r;
}

static const enum positions_abuse ps_before_hello = PS_BEFORE_HELLO;
static const enum positions_abuse ps_world0 = PS_WORLD0;
static const enum positions_abuse ps_world_big = PS_WORLD_BIG;
static const enum positions_abuse ps_gap = PS_GAP;
static const enum positions_abuse ps_count0 = PS_COUNT0;
static const enum positions_abuse ps_past_world = PS_PAST_WORLD;
static const enum positions_abuse ps_other_world = PS_OTHER_WORLD;
static const enum positions_abuse ps_other_plan = PS_OTHER_PLAN;
static const enum positions_abuse ps_reserved = PS_RESERVED;
static const enum positions_abuse ps_open_plain = PS_OPEN_PLAIN;
static const enum positions_abuse ps_open_partial = PS_OPEN_PARTIAL;
static const enum positions_abuse ps_open_rank = PS_OPEN_RANK;

static const enum remote_abuse rm_before_hello = RM_BEFORE_HELLO;
static const enum remote_abuse rm_unterminated = RM_UNTERMINATED;
static const enum remote_abuse rm_addressing = RM_ADDRESSING;
static const enum remote_abuse rm_twice = RM_TWICE;
static const enum remote_abuse rm_after_files = RM_AFTER_FILES;
static const enum remote_abuse rm_open_local = RM_OPEN_LOCAL;

/*
 * MEMBER (a mixture's member) out of place or malformed, and OPENs that
 * do not go with the MEMBERs sent: each is refused with a reason, and
 * the session goes on; a member's value the plan refuses fails the OPEN,
 * naming the member.
 */
enum member_abuse {
	MB_BEFORE_HELLO,
	MB_INDEX,	 /* member 5 first */
	MB_FLAGS,	 /* TAR and LMDB at once */
	MB_UNTERMINATED, /* a label without NUL */
	MB_NO_FILES,	 /* no files before it */
	MB_REMOTE_FLAG,	 /* REMOTE's flag after FILES */
	MB_OPEN_PLAIN,	 /* MEMBER, then an OPEN not of a mixture */
	MB_OPEN_EMPTY,	 /* an OPEN of a mixture without MEMBERs */
	MB_EPOCH_SIZE,	 /* two MEMBERs of other epoch sizes */
	MB_NAN,		 /* a proportion that is not a number */
};

static int case_member(struct ctx *c, const void *arg)
{
	const enum member_abuse *k = arg;
	static const char *const want[] = {
		"before HELLO",	     "was due",
		"conflicting flags", "not terminated",
		"before all its",    "disagree",
		"not of a mixture",  "before its MEMBERs",
		"epoch size",	     "member 0",
	};
	struct proto_member *m = calloc(1, sizeof(*m));
	int fds[PA_MAX_SHARDS + 1], fd = dial(c), r = 0, have = 0;
	struct proto_open o;
	uint32_t seq;

	if (fd < 0 || !m) {
		free(m);
		if (fd >= 0)
			close(fd);
		return PA_FAIL;
	}
	m->how = PROTO_MIX_PROPORTION;
	m->value = 1;
	snprintf(m->label, sizeof(m->label), "member");
	if (*k != MB_BEFORE_HELLO)
		r = hello(c, fd);
	if (!r && *k != MB_BEFORE_HELLO && *k != MB_NO_FILES &&
	    *k != MB_OPEN_EMPTY) {
		r = open_dataset(c, fds);
		have = !r;
		if (!r)
			r = send_files(c, fd, fds, c->nshards + 1);
	}
	if (*k == MB_INDEX)
		m->index = 5;
	if (*k == MB_FLAGS)
		m->flags = PROTO_OPEN_TAR | PROTO_OPEN_LMDB;
	if (*k == MB_UNTERMINATED)
		memset(m->label, 'l', sizeof(m->label));
	if (*k == MB_REMOTE_FLAG)
		m->flags = PROTO_OPEN_REMOTE;
	if (*k == MB_NAN)
		m->value = __builtin_nan("");
	seq = ++c->seq;
	if (!r && *k != MB_OPEN_EMPTY)
		r = send_msg(c, fd, PROTO_MEMBER, seq, m, sizeof(*m), NULL, 0);
	if (!r && *k == MB_EPOCH_SIZE) {
		r = send_files(c, fd, fds, c->nshards + 1);
		m->index = 1;
		m->epoch_size = 7;
		seq = ++c->seq;
		if (!r)
			r = send_msg(c, fd, PROTO_MEMBER, seq, m, sizeof(*m),
				     NULL, 0);
	}
	if (!r &&
	    (*k == MB_OPEN_PLAIN || *k == MB_OPEN_EMPTY || *k == MB_NAN)) {
		base_open(&o);
		if (*k != MB_OPEN_PLAIN)
			o.flags |= PROTO_OPEN_MIXTURE;
		seq = ++c->seq;
		r = send_msg(c, fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	}
	if (!r)
		r = expect_error(c, fd, seq, want[*k]);
	if (!r)
		r = still_usable(c, fd);
	if (have)
		close_all(fds, c->nshards + 1);
	close(fd);
	free(m);
	return r;
}

static const enum member_abuse mb_before_hello = MB_BEFORE_HELLO;
static const enum member_abuse mb_index = MB_INDEX;
static const enum member_abuse mb_flags = MB_FLAGS;
static const enum member_abuse mb_unterminated = MB_UNTERMINATED;
static const enum member_abuse mb_no_files = MB_NO_FILES;
static const enum member_abuse mb_remote_flag = MB_REMOTE_FLAG;
static const enum member_abuse mb_open_plain = MB_OPEN_PLAIN;
static const enum member_abuse mb_open_empty = MB_OPEN_EMPTY;
static const enum member_abuse mb_epoch_size = MB_EPOCH_SIZE;
static const enum member_abuse mb_nan = MB_NAN;

static const enum saved_abuse sv_before_hello = SV_BEFORE_HELLO;
static const enum saved_abuse sv_short = SV_SHORT;
static const enum saved_abuse sv_reserved = SV_RESERVED;
static const enum saved_abuse sv_unterminated = SV_UNTERMINATED;
static const enum saved_abuse sv_flags = SV_FLAGS;
static const enum saved_abuse sv_not_saved = SV_NOT_SAVED;

static const enum status_abuse sa_before_hello = SA_BEFORE_HELLO;
static const enum status_abuse sa_past_end = SA_PAST_END;
static const enum status_abuse sa_short = SA_SHORT;
static const enum status_abuse sa_reserved = SA_RESERVED;
static const enum status_abuse sa_stats_before_hello = SA_STATS_BEFORE_HELLO;

/*
 * OPEN o must be refused with a reason that mentions want (unless NULL),
 * and the session must serve on.
 */
static int open_refused_naming(struct ctx *c, const struct proto_open *o,
			       const char *want)
{
	struct fx x;
	int r = fx_open(c, &x, o);

	if (r == 0)
		r = fail(c, "OPEN accepted");
	else if (r == 1 && want && !strcasestr(x.reason, want))
		r = fail(c, "reason does not mention \"%s\"", want);
	else if (r == 1)
		r = 0;
	if (!r)
		r = still_usable(c, x.fd);
	fx_close(&x);
	return r;
}

/*
 * A saved named stream (made at rank 0 of world 1) opened at a rank past
 * its world: refused at the OPEN, before the daemon indexes the record's
 * positions by that rank.
 */
static int case_named_rank(struct ctx *c, const void *arg)
{
	struct proto_open o;
	struct fx x;
	int r;

	(void)arg;
	base_open(&o);
	snprintf(o.name, sizeof(o.name), "pa_rank_saved");
	r = fx_open(c, &x, &o);
	fx_close(&x);
	if (r)
		return r == 1 ? fail(c, "the OPEN at rank 0 was refused") : r;
	o.rank = 0x7fffffff;
	return open_refused_naming(c, &o, "rank");
}

static int case_open_before_files(struct ctx *c, const void *arg)
{
	struct proto_open o;
	uint32_t seq;
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	base_open(&o);
	r = hello(c, fd);
	seq = ++c->seq;
	if (!r)
		r = send_msg(c, fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq, "files");
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/* OPEN after the first of two FILES messages: files are still missing. */
static int case_open_partial_files(struct ctx *c, const void *arg)
{
	int fds[PA_MAX_SHARDS + 1];
	struct proto_open o;
	uint32_t seq;
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	base_open(&o);
	r = hello(c, fd);
	if (!r)
		r = open_dataset(c, fds);
	if (r) {
		close(fd);
		return r;
	}
	r = files_msg(c, fd, ++c->seq, 0, 1, c->nshards + 2, fds, 1);
	close_all(fds, c->nshards + 1);
	seq = ++c->seq;
	if (!r)
		r = send_msg(c, fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq, "files");
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/* ---- FILES --------------------------------------------------------------- */

/*
 * One FILES message after HELLO: its fields, and which descriptors ride
 * with it: `real` of the dataset's files, then `pipes` pipe ends.
 */
struct files_abuse {
	uint32_t first, count, total;
	unsigned real, pipes;
	bool before_hello;
	bool twice; /* first send a valid {0, 1, total 3} */
	const char *want;
};

static int case_files(struct ctx *c, const void *arg)
{
	const struct files_abuse *k = arg;
	int fds[PA_MAX_SHARDS + 1], send[8], p[2] = { -1, -1 };
	unsigned n = 0;
	uint32_t seq;
	int fd = dial(c), r = 0;

	if (fd < 0)
		return PA_FAIL;
	if (!k->before_hello)
		r = hello(c, fd);
	if (!r)
		r = open_dataset(c, fds);
	if (r) {
		close(fd);
		return r;
	}
	if (k->pipes && pipe2(p, O_CLOEXEC)) {
		r = fail(c, "pipe: %s", strerror(errno));
		goto out;
	}
	for (unsigned i = 0; i < k->real && n < 8; i++)
		send[n++] = fds[i % (c->nshards + 1)];
	for (unsigned i = 0; i < k->pipes && n < 8; i++)
		send[n++] = p[i % 2];
	if (k->twice)
		r = files_msg(c, fd, ++c->seq, 0, 1, 3, fds, 1);
	seq = ++c->seq;
	if (!r)
		r = files_msg(c, fd, seq, k->first, k->count, k->total, send,
			      n);
	if (!r)
		r = expect_error(c, fd, seq, k->want);
	if (!r)
		r = still_usable(c, fd);
out:
	close_all(fds, c->nshards + 1);
	close_all(p, 2);
	close(fd);
	return r;
}

static const struct files_abuse files_gap = {
	/* Starts at 1 with nothing received. */
	.first = 1,
	.count = 1,
	.total = 2,
	.real = 1,
	.want = "first"
};
static const struct files_abuse files_beyond_total = {
	.first = 0, .count = 3, .total = 2, .real = 3, .want = "count"
};
static const struct files_abuse files_fewer_fds = {
	.first = 0, .count = 2, .total = 2, .real = 1, .want = "descriptor"
};
static const struct files_abuse files_more_fds = {
	.first = 0, .count = 1, .total = 2, .real = 2, .want = "descriptor"
};
static const struct files_abuse files_total0 = {
	.first = 0, .count = 0, .total = 0, .want = "total"
};
static const struct files_abuse files_total_huge = { .first = 0,
						     .count = 1,
						     .total = PROTO_MAX_FILES +
							      1,
						     .real = 1,
						     .want = "total" };
static const struct files_abuse files_total_changes = { .first = 1,
							.count = 1,
							.total = 5,
							.real = 1,
							.twice = true,
							.want = "total" };
static const struct files_abuse files_pipe = { .first = 0,
					       .count = 2,
					       .total = 2,
					       .real = 1,
					       .pipes = 1,
					       .want = "regular" };
static const struct files_abuse files_before_hello = { .first = 0,
						       .count = 2,
						       .total = 2,
						       .real = 2,
						       .before_hello = true,
						       .want = "hello" };

/* 253 descriptors (the kernel's most) on one FILES: above PROTO_MAX_FDS. */
/*
 * A client parking descriptors one FILES message at a time, with a huge
 * total, must hit the per-uid limit (the test runs the daemon with
 * --max-uid-files 1000) instead of exhausting the daemon's descriptors.
 */
/*
 * Descriptors of things other than readable regular files, sent as the
 * dataset's first shard: each is refused at FILES, with the reason, and
 * the session still answers. None of them may make the daemon block,
 * read what the sender could not, or write anything.
 */
enum odd_fd {
	ODD_DIR,
	ODD_FIFO,
	ODD_SOCKET,
	ODD_DEV_ZERO,
	ODD_DEV_NULL,
	ODD_WRITE_ONLY,
	ODD_O_PATH,
	ODD_EVENTFD,
	ODD_MEMFD_WRITE_ONLY,
};

static int odd_open(struct ctx *c, enum odd_fd k, int *aux)
{
	char path[PATH_MAX];
	int fd = -1, sv[2];

	switch (k) {
	case ODD_DIR:
		fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		break;
	case ODD_FIFO:
		/* Our own FIFO: opened read-write it never blocks us. */
		snprintf(path, sizeof(path), "%s/protoabuse.%d.fifo",
			 getenv("TMPDIR") && *getenv("TMPDIR") ?
				 getenv("TMPDIR") :
				 "/tmp",
			 (int)getpid());
		unlink(path);
		if (!mkfifo(path, 0600))
			fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		unlink(path);
		break;
	case ODD_SOCKET:
		if (!socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
			fd = sv[0];
			*aux = sv[1];
		}
		break;
	case ODD_DEV_ZERO: fd = open("/dev/zero", O_RDONLY | O_CLOEXEC); break;
	case ODD_DEV_NULL: fd = open("/dev/null", O_RDONLY | O_CLOEXEC); break;
	case ODD_WRITE_ONLY:
		/* Our copy of the shard, opened for writing only. */
		fd = open(c->shard[0], O_WRONLY | O_CLOEXEC);
		break;
	case ODD_O_PATH: fd = open(c->shard[0], O_PATH | O_CLOEXEC); break;
	case ODD_EVENTFD: fd = eventfd(0, EFD_CLOEXEC); break;
	case ODD_MEMFD_WRITE_ONLY: {
		int m = memfd_create("odd", MFD_CLOEXEC);

		/* A memfd reopened write-only through /proc. */
		if (m >= 0 && !ftruncate(m, 1 << 20)) {
			snprintf(path, sizeof(path), "/proc/self/fd/%d", m);
			fd = open(path, O_WRONLY | O_CLOEXEC);
		}
		if (m >= 0)
			close(m);
		break;
	}
	}
	if (fd < 0)
		fail(c, "making the descriptor: %s", strerror(errno));
	return fd;
}

struct odd_case {
	enum odd_fd kind;
	const char *want;
};

static int case_odd_fd(struct ctx *c, const void *arg)
{
	const struct odd_case *k = arg;
	int fds[PA_MAX_SHARDS + 1], aux = -1, odd;
	uint32_t seq;
	int fd = greet(c, fds), r;

	if (fd < 0)
		return PA_FAIL;
	odd = odd_open(c, k->kind, &aux);
	if (odd < 0) {
		r = PA_FAIL;
		goto out;
	}
	close(fds[1]);
	fds[1] = odd;
	seq = ++c->seq;
	r = files_msg(c, fd, seq, 0, c->nshards + 1, c->nshards + 1, fds,
		      c->nshards + 1);
	if (!r)
		r = expect_error(c, fd, seq, k->want);
	if (!r)
		r = still_usable(c, fd);
out:
	close_all(fds, c->nshards + 1);
	if (aux >= 0)
		close(aux);
	close(fd);
	return r;
}

static const struct odd_case odd_dir = { ODD_DIR, "not a regular file" };
static const struct odd_case odd_fifo = { ODD_FIFO, "not a regular file" };
static const struct odd_case odd_socket = { ODD_SOCKET, "not a regular file" };
static const struct odd_case odd_zero = { ODD_DEV_ZERO, "not a regular file" };
static const struct odd_case odd_null = { ODD_DEV_NULL, "not a regular file" };
static const struct odd_case odd_wronly = { ODD_WRITE_ONLY,
					    "not open for reading" };
static const struct odd_case odd_opath = { ODD_O_PATH, "not open for reading" };
static const struct odd_case odd_eventfd = { ODD_EVENTFD,
					     "not a regular file" };
static const struct odd_case odd_memfd_wronly = { ODD_MEMFD_WRITE_ONLY,
						  "not open for reading" };

static int case_files_hoard(struct ctx *c, const void *arg)
{
	int fd = dial(c), one, r;

	if (fd < 0)
		return PA_FAIL;
	one = open(c->manifest, O_RDONLY | O_CLOEXEC);
	if (one < 0) {
		close(fd);
		return fail(c, "%s: %s", c->manifest, strerror(errno));
	}
	r = hello(c, fd);
	for (uint32_t k = 0; !r && k < 1100; k++)
		r = files_msg(c, fd, ++c->seq, k, 1, PROTO_MAX_FILES, &one, 1);
	close(one);
	/* The daemon answers nothing but the first refusal. */
	if (!r)
		r = expect_error(c, fd, PA_NO_SEQ, "max-uid-files");
	close(fd);
	return r;
}

static int case_files_too_many(struct ctx *c, const void *arg)
{
	struct {
		struct proto_hdr h;
		struct proto_files f;
	} m = {
		.h = { .magic = PROTO_MAGIC,
		       .version = PROTO_VERSION,
		       .type = PROTO_FILES,
		       .length = sizeof(m.f),
		       .seq = ++c->seq },
		.f = { .first = 0, .count = 253, .total = 253 },
	};
	int fds[253], one;
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	one = open(c->manifest, O_RDONLY | O_CLOEXEC);
	if (one < 0) {
		close(fd);
		return fail(c, "%s: %s", c->manifest, strerror(errno));
	}
	for (unsigned i = 0; i < 253; i++)
		fds[i] = one;
	r = hello(c, fd);
	if (!r)
		r = raw_send(c, fd, &m, sizeof(m), fds, 253);
	close(one);
	if (!r)
		r = expect_error(c, fd, m.h.seq, "descriptors");
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/* FILES after the stream is open; OPEN twice; STATS still works. */
static int case_after_open(struct ctx *c, const void *arg)
{
	struct proto_open o;
	struct fx x;
	uint32_t seq;
	int fds[PA_MAX_SHARDS + 1];
	int r;

	base_open(&o);
	r = fx_open(c, &x, &o);
	if (r == 1)
		r = fail(c, "a valid OPEN was refused: %s", x.reason);
	seq = ++c->seq;
	if (!r)
		r = send_msg(c, x.fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	if (!r)
		r = expect_error(c, x.fd, seq, "stream");
	if (!r)
		r = open_dataset(c, fds);
	if (!r) {
		seq = ++c->seq;
		r = files_msg(c, x.fd, seq, 0, 1, c->nshards + 1, fds, 1);
		close_all(fds, c->nshards + 1);
	}
	if (!r)
		r = expect_error(c, x.fd, seq, "open");
	if (!r)
		r = stats(c, x.fd, NULL);
	if (!r)
		r = still_usable(c, x.fd);
	fx_close(&x);
	return r;
}

static int case_stats_first(struct ctx *c, const void *arg)
{
	struct proto_stats_ok st;
	int fd = dial(c), r;

	if (fd < 0)
		return PA_FAIL;
	r = hello(c, fd);
	if (!r)
		r = stats(c, fd, &st);
	if (!r && (st.batches || st.samples || st.bytes_read ||
		   st.bad_samples || st.stall_ns))
		r = fail(c,
			 "STATS before OPEN: batches %" PRIu64
			 " samples %" PRIu64 " bytes %" PRIu64,
			 st.batches, st.samples, st.bytes_read);
	if (!r)
		note(c, "daemon rss %" PRIu64 " bytes", st.rss_bytes);
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

/* ---- OPEN with out-of-range values --------------------------------------- */

struct open_abuse {
	void (*mutate)(const struct ctx *c, struct proto_open *o);
	const char *want; /* in the reason */
};

static void o_batch(const struct ctx *c, struct proto_open *o)
{
	o->batch_size = 10000000;
}

static void o_slots1(const struct ctx *c, struct proto_open *o)
{
	o->ring_slots = 1;
}

static void o_slots5000(const struct ctx *c, struct proto_open *o)
{
	o->ring_slots = 5000;
}

static void o_slots3(const struct ctx *c, struct proto_open *o)
{
	o->ring_slots = 3;
}

static void o_rank(const struct ctx *c, struct proto_open *o)
{
	o->rank = 4;
	o->world = 4;
}

static void o_world(const struct ctx *c, struct proto_open *o)
{
	o->world = 100000;
}

static void o_order(const struct ctx *c, struct proto_open *o)
{
	o->order = 7;
}

static void o_drop_last(const struct ctx *c, struct proto_open *o)
{
	o->drop_last = 2;
}

static void o_epochs(const struct ctx *c, struct proto_open *o)
{
	o->start_epoch = UINT32_MAX - 1;
	o->epochs = 5;
}

static void o_noutputs(const struct ctx *c, struct proto_open *o)
{
	o->noutputs = 99;
}

static void o_unterminated(const struct ctx *c, struct proto_open *o)
{
	memset(o->out[0].field, 'x', PROTO_NAME_MAX);
}

static void o_name_unterminated(const struct ctx *c, struct proto_open *o)
{
	memset(o->name, 'n', sizeof(o->name));
}

static void o_name_slash(const struct ctx *c, struct proto_open *o)
{
	strcpy(o->name, "a/b");
}

static void o_fresh_unnamed(const struct ctx *c, struct proto_open *o)
{
	o->flags |= PROTO_OPEN_FRESH;
}

static void o_flag_unknown(const struct ctx *c, struct proto_open *o)
{
	o->flags |= 1024;
}

/* PROTO_OPEN_POSITIONS with no POSITIONS sent. */
static void o_positions_unsent(const struct ctx *c, struct proto_open *o)
{
	o->flags |= PROTO_OPEN_POSITIONS;
	snprintf(o->name, sizeof(o->name), "pa");
}

/* PROTO_OPEN_REMOTE on a session that sent FILES and no REMOTE. */
static void o_remote_unsent(const struct ctx *c, struct proto_open *o)
{
	o->flags |= PROTO_OPEN_REMOTE;
}

static void o_ragged_noflag(const struct ctx *c, struct proto_open *o)
{
	o->flags &= ~PROTO_OPEN_RAGGED;
	o->ragged_bytes = 4096;
}

static void o_ragged_huge(const struct ctx *c, struct proto_open *o)
{
	o->flags |= PROTO_OPEN_RAGGED;
	o->ragged_bytes = (1ull << 30) + 1;
}

static void o_missing(const struct ctx *c, struct proto_open *o)
{
	snprintf(o->out[1].field, PROTO_NAME_MAX, "nosuchfield");
}

static void o_twice(const struct ctx *c, struct proto_open *o)
{
	snprintf(o->out[1].field, PROTO_NAME_MAX, "image");
}

static void o_cast9(const struct ctx *c, struct proto_open *o)
{
	o->out[0].cast = 9;
}

static void o_unit_label(const struct ctx *c, struct proto_open *o)
{
	o->out[1].cast = PROTO_CAST_F32_UNIT;
}

static void o_big_ring(const struct ctx *c, struct proto_open *o)
{
	o->batch_size = 65536;
	o->ring_slots = 1024;
}

static void o_prefetch_huge(const struct ctx *c, struct proto_open *o)
{
	o->prefetch_bytes = UINT64_MAX;
}

static const struct open_abuse open_batch = { o_batch, "batch" };
static const struct open_abuse open_slots1 = { o_slots1, "slots" };
static const struct open_abuse open_slots5000 = { o_slots5000, "slots" };
static const struct open_abuse open_slots3 = { o_slots3, "slots" };
static const struct open_abuse open_rank = { o_rank, "rank" };
static const struct open_abuse open_world = { o_world, "world" };
static const struct open_abuse open_order = { o_order, "order" };
static const struct open_abuse open_drop_last = { o_drop_last, "drop_last" };
static const struct open_abuse open_epochs = { o_epochs, "epoch" };
static const struct open_abuse open_noutputs = { o_noutputs, "output" };
static const struct open_abuse open_unterminated = { o_unterminated, "output" };
static const struct open_abuse open_missing = { o_missing, "nosuchfield" };
static const struct open_abuse open_name_unterminated = {
	o_name_unterminated, "name not terminated"
};
static const struct open_abuse open_name_slash = { o_name_slash, "no '/'" };
static const struct open_abuse open_fresh_unnamed = { o_fresh_unnamed,
						      "needs a stream name" };
static const struct open_abuse open_flag_unknown = { o_flag_unknown,
						     "unknown flags" };
static const struct open_abuse open_positions_unsent = {
	o_positions_unsent, "before all of them were sent"
};
static const struct open_abuse open_remote_unsent = { o_remote_unsent,
						      "before its REMOTE" };
static const struct open_abuse open_ragged_noflag = {
	o_ragged_noflag, "ragged_bytes given without ragged outputs"
};
static const struct open_abuse open_ragged_huge = { o_ragged_huge,
						    "ragged_bytes" };
static const struct open_abuse open_twice = { o_twice, "image" };
static const struct open_abuse open_cast9 = { o_cast9, "cast" };
static const struct open_abuse open_unit_label = { o_unit_label, "unit" };
static const struct open_abuse open_big_ring = { o_big_ring, "max-ring" };
static const struct open_abuse open_prefetch_huge = { o_prefetch_huge,
						      "prefetch" };

static int case_open(struct ctx *c, const void *arg)
{
	const struct open_abuse *k = arg;
	struct proto_open o;

	base_open(&o);
	k->mutate(c, &o);
	return open_refused_naming(c, &o, k->want);
}

/*
 * A prefetch budget smaller than one batch's records: the daemon may
 * refuse the OPEN or fail the stream, either way saying "prefetch".
 */
static int case_open_prefetch_small(struct ctx *c, const void *arg)
{
	struct proto_open o;
	struct fx x;
	int r;

	base_open(&o);
	o.prefetch_bytes = 1000;
	r = fx_open(c, &x, &o);
	if (r == 1 && !strcasestr(x.reason, "prefetch"))
		r = fail(c, "reason does not mention \"prefetch\"");
	else if (r == 1)
		r = 0;
	else if (r == 0)
		r = expect_ring_failed(c, &x, "prefetch");
	if (!r)
		r = stats(c, x.fd, NULL);
	fx_close(&x);
	return r;
}

/* ---- the dataset's files, wrong ------------------------------------------ */

enum files_kind {
	FK_NOT_DATASET,	      /* a JSON manifest that is no dataset */
	FK_NOT_JSON,	      /* a manifest that is no JSON */
	FK_SWAPPED,	      /* shard first, then manifest */
	FK_NO_SHARDS,	      /* the manifest alone */
	FK_EXTRA_SHARD,	      /* one shard more than the manifest lists */
	FK_MANIFEST_AS_SHARD, /* the manifest in place of every shard */
	FK_EMPTY_MANIFEST,    /* an empty regular file */
};

static int case_bad_files(struct ctx *c, const void *arg)
{
	const enum files_kind *k = arg;
	int fds[PA_MAX_SHARDS + 2], t = -1;
	uint32_t n = c->nshards + 1, seq;
	struct proto_open o;
	int fd = greet(c, fds), r = 0;

	if (fd < 0)
		return PA_FAIL;
	switch (*k) {
	case FK_NOT_DATASET:
		t = temp_file(
			c,
			"{\"format\": \"something-else\", \"answer\": [42]}\n");
		break;
	case FK_NOT_JSON: t = temp_file(c, "this is not { json\n"); break;
	case FK_EMPTY_MANIFEST: t = temp_file(c, ""); break;
	case FK_SWAPPED: {
		int m = fds[0];

		fds[0] = fds[n - 1];
		fds[n - 1] = m;
		break;
	}
	case FK_NO_SHARDS: n = 1; break;
	case FK_EXTRA_SHARD:
		fds[n] = dup(fds[n - 1]);
		n++;
		break;
	case FK_MANIFEST_AS_SHARD:
		for (uint32_t i = 1; i < n; i++) {
			close(fds[i]);
			fds[i] = dup(fds[0]);
		}
		break;
	}
	if (t >= 0) {
		close(fds[0]);
		fds[0] = t;
	}
	if (!c->diag[0])
		r = send_files(c, fd, fds, n);
	else
		r = PA_FAIL;
	close_all(fds, *k == FK_NO_SHARDS ? c->nshards + 1 : n);
	base_open(&o);
	seq = ++c->seq;
	if (!r)
		r = send_msg(c, fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	if (!r)
		r = expect_error(c, fd, seq, NULL);
	if (!r)
		r = still_usable(c, fd);
	close(fd);
	return r;
}

static const enum files_kind fk_not_dataset = FK_NOT_DATASET;
static const enum files_kind fk_not_json = FK_NOT_JSON;
static const enum files_kind fk_empty_manifest = FK_EMPTY_MANIFEST;
static const enum files_kind fk_swapped = FK_SWAPPED;
static const enum files_kind fk_no_shards = FK_NO_SHARDS;
static const enum files_kind fk_extra_shard = FK_EXTRA_SHARD;
static const enum files_kind fk_manifest_as_shard = FK_MANIFEST_AS_SHARD;

/* ---- the ring ------------------------------------------------------------ */

/* The ring memfd is sealed: no writable mapping, no write, no resize. */
/*
 * The client may map its ring writable (in-place ops on the batches it
 * holds), but nothing it writes there reaches the daemon: it scribbles
 * over the whole ring, header included, while an endless stream runs
 * and it releases batch after batch, and the daemon goes on filling
 * slots. The memfds still cannot be resized.
 */
static int case_ring_scribbled(struct ctx *c, const void *arg)
{
	struct proto_open o;
	struct fx x;
	unsigned char *map = MAP_FAILED;
	uint32_t released = 0, known = 0;
	int64_t end;
	int r;

	base_open(&o);
	o.epochs = 0;
	o.ring_slots = 2;
	r = fx_open(c, &x, &o);
	if (r == 1)
		r = fail(c, "a valid OPEN was refused: %s", x.reason);
	if (r)
		goto out;
	map = mmap(NULL, x.ok.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		   x.ring_fd, 0);
	if (map == MAP_FAILED) {
		r = fail(c, "mmap PROT_WRITE MAP_SHARED: %s", strerror(errno));
		goto out;
	}
	/*
	 * Twenty batches, each released after the whole ring was
	 * overwritten: the producer reads back nothing of it.
	 */
	end = now_ms() + PA_RING_MS;
	while (released < 20 && now_ms() < end) {
		uint32_t prod = ring_prod(&x);

		/* Our own scribbles read as garbage until the next publish. */
		if (prod - released <= o.ring_slots &&
		    (int32_t)(prod - known) > 0)
			known = prod;
		if (known == released) {
			nap_ms(1);
			continue;
		}
		memset(map, 0xa5, x.ok.ring_bytes);
		released++;
		__atomic_store_n(&x.cons->cons, released, __ATOMIC_SEQ_CST);
		futex_wake_shared(&x.cons->cons);
	}
	if (released < 20) {
		r = fail(c, "only %" PRIu32 " batches within %d ms", released,
			 PA_RING_MS);
		goto out;
	}
	if (!ftruncate(x.ring_fd, (off_t)x.ok.ring_bytes / 2))
		r = fail(c, "the ring memfd could be shrunk");
	if (!r && !ftruncate(x.cons_fd, 0))
		r = fail(c, "the consumer memfd could be shrunk");
	if (!r)
		r = stats(c, x.fd, NULL);
	if (!r)
		note(c,
		     "ring of %" PRIu64
		     " bytes overwritten 20 times while streaming; resize refused",
		     x.ok.ring_bytes);
out:
	if (map != MAP_FAILED)
		munmap(map, x.ok.ring_bytes);
	fx_close(&x);
	return r;
}

/*
 * fx_open() o, then wait for its first batch to be published: 0 with
 * the producer index in *prod, or PA_FAIL having said why.
 */
static int open_published(struct ctx *c, struct fx *x,
			  const struct proto_open *o, uint32_t *prod)
{
	int64_t end;
	int r = fx_open(c, x, o);

	if (r == 1)
		return fail(c, "a valid OPEN was refused: %s", x->reason);
	if (r)
		return r;
	end = now_ms() + PA_RING_MS;
	while (!(*prod = ring_prod(x)) && ring_state(x) == RING_RUNNING &&
	       now_ms() < end)
		nap_ms(1);
	if (!*prod)
		return fail(c,
			    "no batch published within %d ms (state %" PRIu32
			    ")",
			    PA_RING_MS, ring_state(x));
	return 0;
}

/* Wait until a batch is published; then set cons to whatever *arg says. */
enum cons_attack {
	CA_BEYOND,    /* prod + 100 */
	CA_BACKWARDS, /* before the first batch */
	CA_FAR,	      /* prod + 2^31 */
};

static int case_cons(struct ctx *c, const void *arg)
{
	const enum cons_attack *k = arg;
	struct proto_open o;
	struct fx x;
	uint32_t prod = 0, cons = 0;
	int r;

	/* Endless, with few slots: the daemon keeps reading our index. */
	base_open(&o);
	o.epochs = 0;
	o.ring_slots = 2;
	r = open_published(c, &x, &o, &prod);
	if (r)
		goto out;
	switch (*k) {
	case CA_BEYOND: cons = prod + 100; break;
	case CA_BACKWARDS: cons = (uint32_t)-5; break;
	case CA_FAR: cons = prod + (1u << 31); break;
	}
	note(c, "published %" PRIu32 ", consumer index set to %" PRIu32, prod,
	     cons);
	__atomic_store_n(&x.cons->cons, cons, __ATOMIC_SEQ_CST);
	r = expect_ring_failed(c, &x, "consumer index");
	/* The stream failed; the session lives on. */
	if (!r)
		r = stats(c, x.fd, NULL);
	if (!r)
		r = still_usable(c, x.fd);
out:
	fx_close(&x);
	return r;
}

/*
 * The saved position of stream name, through SAVED: 0 with it in *out,
 * PA_FAIL when it is not there.
 */
static int saved_of(struct ctx *c, const char *name, struct proto_saved_ok *out)
{
	int fd = dial(c), r;
	uint32_t total = 1;

	if (fd < 0)
		return PA_FAIL;
	r = hello(c, fd);
	for (uint32_t i = 0; !r && i < total; i++) {
		struct proto_saved q = { .index = i };
		uint32_t seq = ++c->seq;
		struct proto_hdr h;
		union reply rep;
		int fds[2];
		unsigned n;

		r = send_msg(c, fd, PROTO_SAVED, seq, &q, sizeof(q), NULL, 0);
		if (!r)
			r = recv_reply(c, fd, &h, &rep, fds, &n);
		if (!r && h.type != PROTO_SAVED_OK)
			r = fail(c, "SAVED %" PRIu32 " answered type %u", i,
				 h.type);
		if (r)
			break;
		memcpy(out, rep.raw, sizeof(*out));
		total = out->total;
		if (!strncmp(out->name, name, sizeof(out->name))) {
			close(fd);
			return 0;
		}
	}
	close(fd);
	return r ? r : fail(c, "no saved stream \"%s\"", name);
}

/*
 * The client writes the producer index in its own mapping of the ring
 * header, and the consumer index as far beyond: the daemon bounds the
 * consumer index by its own producer index, so the stream fails and
 * the named stream's saved position is not moved past what it
 * delivered.
 */
static int case_forged_prod(struct ctx *c, const void *arg)
{
	struct proto_saved_ok sv;
	struct ring_hdr *w = MAP_FAILED;
	struct proto_open o;
	struct fx x;
	uint32_t prod = 0, forged;
	int r;

	(void)arg;
	base_open(&o);
	snprintf(o.name, sizeof(o.name), "pa_forged_prod");
	o.ring_slots = 2;
	r = open_published(c, &x, &o, &prod);
	if (r)
		goto out;
	w = mmap(NULL, x.ok.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		 x.ring_fd, 0);
	if (w == MAP_FAILED) {
		r = fail(c, "the ring cannot be mapped writable: %s",
			 strerror(errno));
		goto out;
	}
	forged = prod + 100000;
	note(c,
	     "published %" PRIu32 ", header and consumer index set to %" PRIu32,
	     prod, forged);
	__atomic_store_n(&w->prod, forged, __ATOMIC_SEQ_CST);
	__atomic_store_n(&x.cons->cons, forged, __ATOMIC_SEQ_CST);
	futex_wake_shared(&x.cons->cons);
	r = expect_ring_failed(c, &x, "consumer index");
	fx_close(&x);
	if (!r)
		r = saved_of(c, "pa_forged_prod", &sv);
	if (!r && (sv.epoch != 0 || sv.batch > prod || sv.finished))
		r = fail(c,
			 "saved at epoch %" PRIu32 " batch %" PRIu64
			 "%s, past the %" PRIu32 " batches published",
			 sv.epoch, sv.batch, sv.finished ? " (finished)" : "",
			 prod);
out:
	if (w != MAP_FAILED)
		munmap(w, x.ok.ring_bytes);
	fx_close(&x);
	return r;
}

static const enum cons_attack ca_beyond = CA_BEYOND;
static const enum cons_attack ca_backwards = CA_BACKWARDS;
static const enum cons_attack ca_far = CA_FAR;

/*
 * The client shrinks a shard file under a running stream (it keeps
 * write access to its own files): the stream must fail, not the daemon.
 */
static int case_shard_truncated(struct ctx *c, const void *arg)
{
	int fds[PA_MAX_SHARDS + 1], in = -1, out = -1;
	struct proto_open o;
	struct proto_hdr h;
	union reply rep;
	struct stat st;
	struct fx x;
	unsigned n = 0;
	uint32_t seq;
	int64_t end;
	int r;

	memset(&x, 0, sizeof(x));
	x.fd = x.ring_fd = x.cons_fd = -1;
	in = open(c->shard[0], O_RDONLY | O_CLOEXEC);
	/* A copy in a file of ours, or in a memfd (arg non-NULL). */
	out = arg ? memfd_create("shrinks", MFD_CLOEXEC) : temp_fd(c);
	if (in < 0 || out < 0 || fstat(in, &st)) {
		r = fail(c, "copying %s: %s", c->shard[0], strerror(errno));
		goto done;
	}
	for (off_t off = 0; off < st.st_size;) {
		char buf[1 << 16];
		ssize_t k = pread(in, buf, sizeof(buf), off);

		if (k <= 0 || write(out, buf, (size_t)k) != k) {
			r = fail(c, "copying %s: short", c->shard[0]);
			goto done;
		}
		off += k;
	}
	x.fd = dial(c);
	if (x.fd < 0 || hello(c, x.fd) || open_dataset(c, fds)) {
		r = PA_FAIL;
		goto done;
	}
	/*
	 * Send the copy as the first shard (read first, in sequential
	 * order); keep our descriptor to shrink it.
	 */
	close(fds[1]);
	fds[1] = out;
	r = send_files(c, x.fd, fds, c->nshards + 1);
	fds[1] = -1;
	close_all(fds, c->nshards + 1);
	if (r)
		goto done;
	/* Small reads ahead, so that most of the shard is read after. */
	base_open(&o);
	o.epochs = 0;
	o.ring_slots = 2;
	o.prefetch_bytes = 256 << 10;
	seq = ++c->seq;
	r = send_msg(c, x.fd, PROTO_OPEN, seq, &o, sizeof(o), NULL, 0);
	if (!r)
		r = recv_reply(c, x.fd, &h, &rep, fds, &n);
	if (r)
		goto done;
	if (h.type != PROTO_OPEN_OK || n != 2) {
		close_all(fds, n);
		r = fail(c, "OPEN answered with %s", msg_type_name(h.type));
		goto done;
	}
	x.ok = rep.open;
	x.ring_fd = fds[0];
	x.cons_fd = fds[1];
	x.hdr = mmap(NULL, x.ok.ring_bytes, PROT_READ, MAP_SHARED, x.ring_fd,
		     0);
	x.cons = mmap(NULL, x.ok.cons_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		      x.cons_fd, 0);
	if (x.hdr == MAP_FAILED || x.cons == MAP_FAILED) {
		r = fail(c, "mmap: %s", strerror(errno));
		if (x.hdr == MAP_FAILED)
			x.hdr = NULL;
		if (x.cons == MAP_FAILED)
			x.cons = NULL;
		goto done;
	}
	/* The daemon has checked the footer: now cut the records away. */
	if (ftruncate(out, 4096)) {
		r = fail(c, "ftruncate: %s", strerror(errno));
		goto done;
	}
	/* Consume released batches until the ring fails. */
	end = now_ms() + 5000;
	while (ring_state(&x) == RING_RUNNING && now_ms() < end) {
		uint32_t p = ring_prod(&x), cn = x.cons->cons;

		if (p != cn)
			__atomic_store_n(&x.cons->cons, cn + 1,
					 __ATOMIC_SEQ_CST);
		else
			nap_ms(1);
	}
	r = expect_ring_failed(c, &x, NULL);
	if (!r)
		r = still_usable(c, x.fd);
done:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	fx_close(&x);
	return r;
}

/* ---- the daemon after it all --------------------------------------------- */

static int case_bystander(struct ctx *c, const void *arg)
{
	if (stats(c, c->bystander, NULL))
		return fail(c, "the session opened before the abuse is gone");
	return still_usable(c, c->bystander);
}

static int case_libloader(struct ctx *c, const void *arg)
{
	struct loader_opts o = {
		.size = sizeof(o),
		.socket_path = c->sock,
		.outputs = "image:unit,label",
		.epochs = 1,
		.timeout_ms = 5000,
	};
	char err[512] = "";
	struct loader *l = NULL;
	struct loader_batch b;
	uint64_t batches = 0, samples = 0;
	int r;

	r = loader_open(&l, c->dir, &o, err, sizeof(err));
	if (r)
		return fail(c, "loader_open: %s: %s", loader_strerror(r), err);
	for (;;) {
		r = loader_next(l, &b, 5000);
		if (r)
			break;
		if (b.noutputs != 2 || b.out[0].dtype != LOADER_DTYPE_F32 ||
		    b.out[1].dtype != LOADER_DTYPE_I64) {
			r = fail(c,
				 "batch %" PRIu64 ": %" PRIu32
				 " outputs, dtypes %" PRIu32 "/%" PRIu32,
				 b.seq, b.noutputs, b.out[0].dtype,
				 b.out[1].dtype);
			break;
		}
		batches++;
		samples += b.count;
		loader_release(l, &b);
	}
	if (r == LOADER_EEND)
		r = 0;
	else if (!c->diag[0])
		r = fail(c, "loader_next: %s: %s", loader_strerror(r),
			 loader_reason(l));
	loader_close(l);
	if (!r && (!batches || !samples))
		r = fail(c, "no batches arrived");
	if (!r)
		note(c, "%" PRIu64 " batches, %" PRIu64 " samples", batches,
		     samples);
	return r;
}

static int case_alive(struct ctx *c, const void *arg)
{
	if (!c->pid)
		return fail(c, "no pid from HELLO_OK");
	if (kill(c->pid, 0) && errno != EPERM)
		return fail(c, "kill(%d, 0): %s", (int)c->pid, strerror(errno));
	return 0;
}

/* The daemon's open descriptors, or -1 if /proc does not tell. */
static int daemon_fds(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int case_no_leak(struct ctx *c, const void *arg)
{
	int64_t end = now_ms() + 3000;
	int n;

	if (c->base_fds < 0) {
		snprintf(c->diag, sizeof(c->diag), "cannot read /proc/%d/fd",
			 (int)c->pid);
		return PA_SKIP;
	}
	/* Sessions end asynchronously, after our close(). */
	while ((n = daemon_fds(c->pid)) > c->base_fds && now_ms() < end)
		nap_ms(20);
	note(c, "%d descriptors before, %d after", c->base_fds, n);
	if (n > c->base_fds)
		return fail(
			c,
			"the daemon holds %d descriptors, %d before the abuse",
			n, c->base_fds);
	return 0;
}

/* ---- the table ------------------------------------------------------------ */

static const struct abuse_case cases[] = {
	{ "empty packet (0 bytes)", case_raw, &raw_empty },
	{ "3-byte packet", case_raw, &raw_short },
	{ "15-byte packet (a header short by one)", case_raw,
	  &raw_header_only_15 },
	{ "bad magic", case_raw, &raw_magic },
	{ "wrong protocol version in the header", case_raw, &raw_version },
	{ "unknown type 999", case_raw, &raw_type999 },
	{ "type 0", case_raw, &raw_type0 },
	{ "HELLO with a 4-byte payload", case_raw, &raw_hello4 },
	{ "length field larger than the packet", case_raw, &raw_longer },
	{ "length field 0xffffffff", case_raw, &raw_huge },
	{ "packet above PROTO_MAX_MSG", case_raw, &raw_oversize },
	{ "STATS with a payload", case_raw, &raw_stats4 },
	{ "ERROR whose reason length disagrees", case_raw, &raw_error_bad },
	{ "client sends HELLO_OK", case_daemon_type, &type_hello_ok },
	{ "client sends OPEN_OK", case_daemon_type, &type_open_ok },
	{ "client sends a well-formed ERROR", case_daemon_type, &type_error },
	{ "HELLO with a newer version", case_hello_v2, NULL },
	{ "HELLO with flags none defines", case_hello_v2, "flags" },
	{ "descriptors attached to HELLO", case_fds_on, &type_hello },
	{ "descriptors attached to STATS", case_fds_on, &type_stats },
	{ "OPEN before HELLO", case_open_before_hello, NULL },
	{ "STATUS before HELLO", case_status, &sa_before_hello },
	{ "STREAM_INFO of a stream that is not there", case_status,
	  &sa_past_end },
	{ "STREAM_INFO of 4 bytes", case_status, &sa_short },
	{ "STREAM_INFO with its reserved word set", case_status, &sa_reserved },
	{ "STATS before HELLO", case_status, &sa_stats_before_hello },
	{ "OPEN before FILES", case_open_before_files, NULL },
	{ "OPEN with files still missing", case_open_partial_files, NULL },
	{ "FILES before HELLO", case_files, &files_before_hello },
	{ "FILES starting past the files received", case_files, &files_gap },
	{ "FILES with count beyond total", case_files, &files_beyond_total },
	{ "FILES count 2 with 1 descriptor", case_files, &files_fewer_fds },
	{ "FILES count 1 with 2 descriptors", case_files, &files_more_fds },
	{ "FILES with total 0", case_files, &files_total0 },
	{ "FILES with total above PROTO_MAX_FILES", case_files,
	  &files_total_huge },
	{ "FILES whose total changes", case_files, &files_total_changes },
	{ "FILES with a pipe", case_files, &files_pipe },
	{ "FILES with a directory", case_odd_fd, &odd_dir },
	{ "FILES with a FIFO", case_odd_fd, &odd_fifo },
	{ "FILES with a socket", case_odd_fd, &odd_socket },
	{ "FILES with /dev/zero", case_odd_fd, &odd_zero },
	{ "FILES with /dev/null", case_odd_fd, &odd_null },
	{ "FILES with a shard opened write-only", case_odd_fd, &odd_wronly },
	{ "FILES with an O_PATH descriptor", case_odd_fd, &odd_opath },
	{ "FILES with an eventfd", case_odd_fd, &odd_eventfd },
	{ "FILES with a write-only memfd", case_odd_fd, &odd_memfd_wronly },
	{ "FILES with 253 descriptors", case_files_too_many, NULL },
	{ "FILES parking descriptors past the per-uid limit", case_files_hoard,
	  NULL },
	{ "OPEN batch_size 10^7", case_open, &open_batch },
	{ "OPEN ring_slots 1", case_open, &open_slots1 },
	{ "OPEN ring_slots 5000", case_open, &open_slots5000 },
	{ "OPEN ring_slots 3, not a power of two", case_open, &open_slots3 },
	{ "OPEN rank 4 of world 4", case_open, &open_rank },
	{ "OPEN world 100000", case_open, &open_world },
	{ "OPEN order 7", case_open, &open_order },
	{ "OPEN drop_last 2", case_open, &open_drop_last },
	{ "OPEN epochs past 2^32", case_open, &open_epochs },
	{ "OPEN noutputs 99", case_open, &open_noutputs },
	{ "OPEN output name without NUL", case_open, &open_unterminated },
	{ "OPEN output naming a missing field", case_open, &open_missing },
	{ "OPEN stream name without NUL", case_open, &open_name_unterminated },
	{ "OPEN stream name with a slash", case_open, &open_name_slash },
	{ "OPEN fresh without a name", case_open, &open_fresh_unnamed },
	{ "OPEN with an unknown flag", case_open, &open_flag_unknown },
	{ "OPEN from positions with none sent", case_open,
	  &open_positions_unsent },
	{ "OPEN of a saved named stream at rank 2^31-1 of world 1",
	  case_named_rank, NULL },
	{ "POSITIONS of world 1, then an OPEN from them at rank 2^31-1",
	  case_positions, &ps_open_rank },
	{ "a forged producer index in the client's mapping of the header",
	  case_forged_prod, NULL },
	{ "POSITIONS before HELLO", case_positions, &ps_before_hello },
	{ "POSITIONS of world 0", case_positions, &ps_world0 },
	{ "POSITIONS of world 65537", case_positions, &ps_world_big },
	{ "POSITIONS starting past the ranks sent", case_positions, &ps_gap },
	{ "POSITIONS of no ranks", case_positions, &ps_count0 },
	{ "POSITIONS past the world's last rank", case_positions,
	  &ps_past_world },
	{ "POSITIONS changing world", case_positions, &ps_other_world },
	{ "POSITIONS changing plan", case_positions, &ps_other_plan },
	{ "POSITIONS with a reserved word set", case_positions, &ps_reserved },
	{ "POSITIONS, then an OPEN not from them", case_positions,
	  &ps_open_plain },
	{ "half the POSITIONS, then an OPEN from them", case_positions,
	  &ps_open_partial },
	{ "OPEN of a remote dataset with no REMOTE sent", case_open,
	  &open_remote_unsent },
	{ "REMOTE before HELLO", case_remote, &rm_before_hello },
	{ "REMOTE with a secret without NUL", case_remote, &rm_unterminated },
	{ "REMOTE with addressing style 7", case_remote, &rm_addressing },
	{ "REMOTE twice", case_remote, &rm_twice },
	{ "REMOTE after FILES", case_remote, &rm_after_files },
	{ "REMOTE, then an OPEN of local files", case_remote, &rm_open_local },
	{ "MEMBER before HELLO", case_member, &mb_before_hello },
	{ "MEMBER 5 first", case_member, &mb_index },
	{ "MEMBER with TAR and LMDB", case_member, &mb_flags },
	{ "MEMBER with a label without NUL", case_member, &mb_unterminated },
	{ "MEMBER before its files", case_member, &mb_no_files },
	{ "MEMBER with REMOTE's flag after FILES", case_member,
	  &mb_remote_flag },
	{ "MEMBER, then an OPEN not of a mixture", case_member,
	  &mb_open_plain },
	{ "an OPEN of a mixture without MEMBERs", case_member, &mb_open_empty },
	{ "MEMBERs of other epoch sizes", case_member, &mb_epoch_size },
	{ "MEMBER of a proportion NaN, then OPEN", case_member, &mb_nan },
	{ "OPEN with ragged_bytes but no ragged flag", case_open,
	  &open_ragged_noflag },
	{ "OPEN with ragged_bytes above 1 GiB", case_open, &open_ragged_huge },
	{ "SAVED before HELLO", case_saved, &sv_before_hello },
	{ "SAVED of 4 bytes", case_saved, &sv_short },
	{ "SAVED with its reserved word set", case_saved, &sv_reserved },
	{ "FORGET with a name without NUL", case_saved, &sv_unterminated },
	{ "FORGET with unknown flags", case_saved, &sv_flags },
	{ "FORGET of a name never saved", case_saved, &sv_not_saved },
	{ "OPEN output naming a field twice", case_open, &open_twice },
	{ "OPEN cast 9", case_open, &open_cast9 },
	{ "OPEN cast unit on the int64 label", case_open, &open_unit_label },
	{ "OPEN ring above --max-ring (65536 x 1024 slots)", case_open,
	  &open_big_ring },
	{ "OPEN prefetch_bytes 2^64-1", case_open, &open_prefetch_huge },
	{ "OPEN prefetch_bytes 1000, below one batch", case_open_prefetch_small,
	  NULL },
	{ "manifest: JSON but not a dataset", case_bad_files, &fk_not_dataset },
	{ "manifest: not JSON", case_bad_files, &fk_not_json },
	{ "manifest: empty file", case_bad_files, &fk_empty_manifest },
	{ "manifest and shard swapped", case_bad_files, &fk_swapped },
	{ "manifest without its shards", case_bad_files, &fk_no_shards },
	{ "one shard more than the manifest lists", case_bad_files,
	  &fk_extra_shard },
	{ "the manifest in place of a shard", case_bad_files,
	  &fk_manifest_as_shard },
	{ "second OPEN and FILES after OPEN", case_after_open, NULL },
	{ "STATS before OPEN: STATS_OK with zeros", case_stats_first, NULL },
	{ "a client scribbling over its ring harms only itself",
	  case_ring_scribbled, NULL },
	{ "consumer index beyond the published batches", case_cons,
	  &ca_beyond },
	{ "consumer index moved backwards", case_cons, &ca_backwards },
	{ "consumer index 2^31 ahead", case_cons, &ca_far },
	{ "shard truncated under a running stream", case_shard_truncated,
	  NULL },
	{ "memfd shard shrunk under a running stream", case_shard_truncated,
	  "memfd" },
	{ "a session opened before the abuse still answers", case_bystander,
	  NULL },
	{ "libloader still streams an epoch", case_libloader, NULL },
	{ "daemon process alive", case_alive, NULL },
	{ "no descriptor leaked in the daemon", case_no_leak, NULL },
};

int main(int argc, char **argv)
{
	struct ctx c = { .seq = 1000 };
	unsigned failed = 0, n = sizeof(cases) / sizeof(cases[0]);

	if (argc != 3) {
		fprintf(stderr, "usage: protoabuse SOCKET DATASET_DIR\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	c.sock = argv[1];
	c.dir = argv[2];
	if (load_manifest(&c))
		return 2;
	printf("1..%u\n", n);
	fflush(stdout);
	c.bystander = dial(&c);
	if (c.bystander < 0 || hello(&c, c.bystander)) {
		printf("Bail out! %s\n", c.diag);
		return 1;
	}
	c.diag[0] = '\0';
	c.base_fds = daemon_fds(c.pid);
	for (unsigned i = 0; i < n; i++) {
		int r = cases[i].run(&c, cases[i].arg);

		if (r == PA_FAIL)
			failed++;
		report(&c, i + 1, cases[i].desc, r);
	}
	close(c.bystander);
	for (uint32_t i = 0; i < c.nshards; i++)
		free(c.shard[i]);
	if (failed)
		printf("# %u of %u cases failed\n", failed, n);
	return failed ? 1 : 0;
}
