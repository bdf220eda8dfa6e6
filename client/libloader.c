/*
 * libloader.c - the client library: connect to loaderd, hand it the
 * dataset's files, map the stream's batch ring and read batches from it.
 * The options' OPEN message (openmsg.c), the dataset's files
 * (discover.c) and the check of the ring's header (ringcheck.c) have
 * files of their own; waiting, reading, releasing and reconnecting share
 * the ring's indices and stay here.
 *
 * A handle is not thread-safe: one thread at a time calls into it (the
 * trainer's consumer thread). The hot path, loader_next() with a batch
 * already published and loader_release() with the daemon not waiting,
 * makes no system call but the vDSO clock.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "discover.h"
#include "futex.h"
#include "libloader_priv.h"
#include "loader.h"
#include "mixfile.h"
#include "msg.h"
#include "openmsg.h"
#include "proto.h"
#include "ring.h"
#include "ringcheck.h"
#include "sockpath.h"
#include "tie.h"

/*
 * The public enums and limits travel as the protocol's and the ring's
 * numbers: a change to either side must not go unnoticed.
 */
TIE(LOADER_MAX_OUTPUTS, PROTO_MAX_OUTPUTS);
TIE(LOADER_MAX_DIMS, RING_MAX_DIMS);
TIE(LOADER_ORDER_SEQUENTIAL, PROTO_ORDER_SEQUENTIAL);
TIE(LOADER_ORDER_RANDOM, PROTO_ORDER_RANDOM);
TIE(LOADER_ORDER_QUASI, PROTO_ORDER_QUASI);
TIE(LOADER_BAD_FAIL, PROTO_BAD_FAIL);
TIE(LOADER_BAD_SKIP, PROTO_BAD_SKIP);
TIE(LOADER_DTYPE_U8, RING_DTYPE_U8);
TIE(LOADER_DTYPE_I8, RING_DTYPE_I8);
TIE(LOADER_DTYPE_U16, RING_DTYPE_U16);
TIE(LOADER_DTYPE_I16, RING_DTYPE_I16);
TIE(LOADER_DTYPE_U32, RING_DTYPE_U32);
TIE(LOADER_DTYPE_I32, RING_DTYPE_I32);
TIE(LOADER_DTYPE_U64, RING_DTYPE_U64);
TIE(LOADER_DTYPE_I64, RING_DTYPE_I64);
TIE(LOADER_DTYPE_F16, RING_DTYPE_F16);
TIE(LOADER_DTYPE_F32, RING_DTYPE_F32);
TIE(LOADER_DTYPE_F64, RING_DTYPE_F64);

#define LOADER_TIMEOUT_DEFAULT 10000 /* ms */
/*
 * How long an OPEN of an s3:// dataset may take at least: the daemon
 * fetches what its shard cache lacks before it answers.
 */
#define LOADER_STAGE_TIMEOUT (30 * 60 * 1000) /* ms */
/*
 * The smallest struct loader_stats a caller can know: its layout at
 * LOADER_VERSION 1.0, the first with a size field. Later versions only
 * append fields.
 */
#define LOADER_STATS_SIZE_1 (offsetof(struct loader_stats, daemon_rss) + 8)
/*
 * Spin this long before sleeping: a batch that is a few microseconds
 * away is cheaper to wait for awake than through a futex round trip.
 * Measured in time, not in rounds: a pause takes 10 cycles on some
 * CPUs and 140 on others. Not long: a waiting trainer that spins takes
 * a core from the daemon making its batches. On two cores, 4000 rounds
 * of 20 ns (80 us) kept the client of a fast stream spinning all the
 * time (0.44 s of CPU in a 0.54 s run). Of 2, 10, 50 and 200 us, 50
 * gave the raw path its best rate there (ldclient against the node
 * cache, three runs each): each sleep costs the daemon a wake-up, which
 * on that machine took as long as gathering a batch of 256 records.
 */
#define LOADER_SPIN_NS	   50000
#define LOADER_SPIN_ROUNDS 32 /* pauses between looks at the clock */
/* Sleep in slices this long, to notice a daemon that died. */
#define LOADER_SLICE_NS (50 * 1000000ll)

/* Every reply the client accepts, received in place. */
union loader_reply {
	struct proto_hello_ok hello;
	struct proto_open_ok open;
	struct proto_stats_ok stats;
	struct {
		struct proto_error e;
		char reason[PROTO_REASON_MAX];
	} err;
};

__attribute__((format(printf, 3, 4))) int loader_fail(struct loader *l, int err,
						      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->reason, sizeof(l->reason), fmt, ap);
	va_end(ap);
	return err;
}

/* The deadline timeout_ms from now, or -1 for none. */
static int64_t loader_deadline(int timeout_ms)
{
	if (timeout_ms < 0)
		return -1;
	return (int64_t)clock_mono_ns() + (int64_t)timeout_ms * 1000000;
}

static inline void loader_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Where the daemon is, in the order of sockpath.h. */
static int loader_sock_path(struct loader *l, const struct loader_opts *o,
			    struct sockaddr_un *sa)
{
	if (sockpath_find(o->socket_path, sa->sun_path, sizeof(sa->sun_path),
			  l->skipped, sizeof(l->skipped)))
		return loader_fail(l, -ENAMETOOLONG,
				   "socket path %s...: longer than %zu bytes",
				   sa->sun_path, sizeof(sa->sun_path) - 1);
	sa->sun_family = AF_UNIX;
	return 0;
}

/* ---- control socket ------------------------------------------------------ */

/* Wait until the socket has something to read (or hung up). */
static int loader_wait_readable(int fd, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r, ms;

	for (;;) {
		ms = -1;
		if (deadline >= 0) {
			int64_t left = deadline - (int64_t)clock_mono_ns();

			if (left <= 0)
				left = 0;
			/* Round up: poll(0) would spin until the deadline. */
			ms = (int)((left + 999999) / 1000000);
		}
		r = poll(&p, 1, ms);
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* The daemon's PROTO_ERROR: its code, and its reason in l->reason. */
static int loader_daemon_error(struct loader *l, const union loader_reply *r)
{
	char text[PROTO_REASON_MAX + 1];
	uint32_t len = r->err.e.len; /* <= PROTO_REASON_MAX: msg_recv */
	int code = r->err.e.code;

	/* The reason goes to terminals and logs: no control characters. */
	for (uint32_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)r->err.reason[i];

		text[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	text[len] = '\0';
	if (code >= 0)
		return loader_fail(l, LOADER_EPROTO,
				   "loaderd sent an error with code %d: %s",
				   code, text);
	if (!len)
		return loader_fail(l, code, "loaderd: %s",
				   loader_strerror(code));
	return loader_fail(l, code, "loaderd: %s", text);
}

/*
 * Wait for the reply to the request l->seq. A PROTO_ERROR that answers
 * any request from first_seq on (a FILES message gets no reply unless it
 * fails) ends the wait with the daemon's code. Replies to requests before
 * first_seq are late answers to calls that timed out: skipped.
 */
static int loader_reply(struct loader *l, uint32_t first_seq, uint16_t want,
			union loader_reply *r, int *fds, unsigned maxfds,
			unsigned *nfds)
{
	int64_t deadline = loader_deadline(l->timeout_ms);
	char why[256];
	struct proto_hdr h;
	unsigned got;
	int err;

	for (;;) {
		err = loader_wait_readable(l->sock, deadline);
		if (err == -ETIMEDOUT)
			return loader_fail(l, err,
					   "no %s from loaderd within %d ms",
					   msg_type_name(want), l->timeout_ms);
		if (err)
			return loader_fail(l, err, "poll: %s", strerror(-err));
		err = msg_recv(l->sock, &h, r, sizeof(*r), fds, maxfds, &got,
			       why, sizeof(why));
		if (err == -EPIPE)
			return loader_fail(
				l, err,
				"loaderd closed the connection (waiting for %s)",
				msg_type_name(want));
		if (err == LOADER_EPROTO)
			return loader_fail(l, err,
					   "malformed message from loaderd: %s",
					   why);
		if (err)
			return loader_fail(l, err, "receiving from loaderd: %s",
					   strerror(-err));
		/* Sequence 0: the daemon refused the connection itself. */
		if (h.type == PROTO_ERROR && h.seq == 0) {
			err = loader_daemon_error(l, r);
			goto fail;
		}
		if ((int32_t)(h.seq - first_seq) < 0) {
			for (unsigned i = 0; i < got; i++)
				close(fds[i]);
			continue;
		}
		if (h.type == PROTO_ERROR && (int32_t)(h.seq - l->seq) <= 0) {
			err = loader_daemon_error(l, r);
			goto fail;
		}
		if (h.seq != l->seq) {
			err = loader_fail(
				l, LOADER_EPROTO,
				"loaderd answered request %u with %s, expected %s to %u",
				h.seq, msg_type_name(h.type),
				msg_type_name(want), l->seq);
			goto fail;
		}
		if (h.type != want) {
			err = loader_fail(
				l, LOADER_EPROTO,
				"loaderd answered with %s, expected %s",
				msg_type_name(h.type), msg_type_name(want));
			goto fail;
		}
		if (nfds)
			*nfds = got;
		return 0;
	}
fail:
	for (unsigned i = 0; i < got; i++)
		close(fds[i]);
	return err;
}

/*
 * A send failed. If the daemon refused something and hung up, its
 * PROTO_ERROR may be waiting to be read: prefer its reason to EPIPE.
 */
int loader_send_failed(struct loader *l, int err, uint16_t type)
{
	union loader_reply r;
	struct pollfd p = { .fd = l->sock, .events = POLLIN };
	struct proto_hdr h;
	char why[64];

	if (err == -EAGAIN)
		return loader_fail(l, -ETIMEDOUT,
				   "loaderd did not take %s within %d ms",
				   msg_type_name(type), l->timeout_ms);
	if ((err == -EPIPE || err == -ECONNRESET) && poll(&p, 1, 0) == 1 &&
	    !msg_recv(l->sock, &h, &r, sizeof(r), NULL, 0, NULL, why,
		      sizeof(why)) &&
	    h.type == PROTO_ERROR)
		return loader_daemon_error(l, &r);
	if (err == -EPIPE || err == -ECONNRESET)
		return loader_fail(l, -EPIPE,
				   "loaderd closed the connection (sending %s)",
				   msg_type_name(type));
	return loader_fail(l, err, "sending %s: %s", msg_type_name(type),
			   strerror(-err));
}

/* Connect to the daemon at l->sa (loader_connect(), and a reconnect). */
static int loader_dial(struct loader *l)
{
	struct sockaddr_un sa = l->sa;
	int err;

	l->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (l->sock < 0)
		return loader_fail(l, -errno, "socket: %s", strerror(errno));
	/*
	 * A Unix connect() blocks while the daemon's listen queue is full,
	 * and a send while its receive queue is: both for at most
	 * SO_SNDTIMEO. (A non-blocking connect would not help: on a Unix
	 * socket it fails with EAGAIN instead of going on in the
	 * background.)
	 */
	if (l->timeout_ms > 0) {
		struct timeval tv = {
			.tv_sec = l->timeout_ms / 1000,
			.tv_usec = (l->timeout_ms % 1000) * 1000,
		};

		if (setsockopt(l->sock, SOL_SOCKET, SO_SNDTIMEO, &tv,
			       sizeof(tv)))
			return loader_fail(l, -errno, "SO_SNDTIMEO: %s",
					   strerror(errno));
	}
	while (connect(l->sock, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		if (err == -EINTR)
			continue;
		if (err == -EAGAIN)
			return loader_fail(
				l, -ETIMEDOUT,
				"connect %s: loaderd did not accept within %d ms",
				sa.sun_path, l->timeout_ms);
		if (err == -ENOENT || err == -ECONNREFUSED)
			return loader_fail(
				l, err,
				"connect %s: %s (is loaderd running?%s%s%s)",
				sa.sun_path, strerror(-err),
				l->skipped[0] ? " and no socket at " : "",
				l->skipped, l->skipped[0] ? " either" : "");
		return loader_fail(l, err, "connect %s: %s", sa.sun_path,
				   strerror(-err));
	}
	return 0;
}

static int loader_connect(struct loader *l, const struct loader_opts *o)
{
	int err;

	memset(&l->sa, 0, sizeof(l->sa));
	err = loader_sock_path(l, o, &l->sa);
	if (err)
		return err;
	return loader_dial(l);
}

static int loader_hello(struct loader *l)
{
	struct proto_hello hello = { .version = PROTO_VERSION };
	union loader_reply r;
	int err;

	err = msg_send(l->sock, PROTO_HELLO, ++l->seq, &hello, sizeof(hello),
		       NULL, 0);
	if (err)
		return loader_send_failed(l, err, PROTO_HELLO);
	err = loader_reply(l, l->seq, PROTO_HELLO_OK, &r, NULL, 0, NULL);
	if (err)
		return err;
	if (r.hello.version != PROTO_VERSION)
		return loader_fail(
			l, LOADER_EVERSION,
			"loaderd speaks protocol version %u, this library %d",
			r.hello.version, PROTO_VERSION);
	if (r.hello.max_fds == 0)
		return loader_fail(l, LOADER_EPROTO,
				   "loaderd takes 0 descriptors per message");
	/* Never more than the protocol allows, whatever the daemon says. */
	l->max_fds = r.hello.max_fds < PROTO_MAX_FDS ? r.hello.max_fds :
						       PROTO_MAX_FDS;
	return 0;
}

/* ---- the ring ------------------------------------------------------------ */

/*
 * Check the ring's header against the mapping and the request, on a
 * private copy (the daemon could change the shared one between a check
 * and a use), and keep the layout in the handle.
 */
static int loader_check_ring(struct loader *l, const struct proto_open *po)
{
	struct ring_hdr h;
	int err;

	memcpy(&h, l->hdr, offsetof(struct ring_hdr, prod));
	err = loader_check_hdr(&h, l->ring_bytes, po, l->nmembers, l->out,
			       l->reason, sizeof(l->reason));
	if (err)
		return err;
	l->named = h.flags & RING_NAMED;
	l->members_offset = h.members_offset;
	l->counts_from = h.counts_from;
	l->later_batches = h.later_batches;
	l->slots = (const unsigned char *)l->hdr + RING_PAGE;
	l->slot_size = h.slot_size;
	l->slot_count = h.slot_count;
	l->batch_size = h.batch_size;
	l->ids_offset = h.ids_offset;
	l->noutputs = h.noutputs;
	return 0;
}

/* Map the two memfds of OPEN_OK; the descriptors are closed either way. */
static int loader_map(struct loader *l, int fds[2],
		      const struct proto_open_ok *ok)
{
	struct stat st;
	int seals, err = 0;

	if (ok->ring_bytes < RING_PAGE || ok->ring_bytes > SIZE_MAX ||
	    ok->cons_bytes < sizeof(struct ring_cons) ||
	    ok->cons_bytes > SIZE_MAX) {
		err = loader_fail(
			l, LOADER_EPROTO,
			"OPEN_OK: ring of %llu bytes, consumer page of %llu",
			(unsigned long long)ok->ring_bytes,
			(unsigned long long)ok->cons_bytes);
		goto out;
	}
	if (fstat(fds[0], &st) || (uint64_t)st.st_size != ok->ring_bytes) {
		err = loader_fail(l, LOADER_EPROTO,
				  "ring memfd is not the %llu bytes announced",
				  (unsigned long long)ok->ring_bytes);
		goto out;
	}
	/*
	 * A ring that could shrink under the mapping would turn a read into
	 * SIGBUS in the trainer; ring.h promises a sealed memfd.
	 */
	seals = fcntl(fds[0], F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		err = loader_fail(l, LOADER_EPROTO,
				  "ring memfd is not sealed against shrinking");
		goto out;
	}
	if (fstat(fds[1], &st) || (uint64_t)st.st_size < ok->cons_bytes) {
		err = loader_fail(
			l, LOADER_EPROTO,
			"consumer memfd is smaller than the %llu bytes announced",
			(unsigned long long)ok->cons_bytes);
		goto out;
	}
	/*
	 * The slots writable, so that a consumer may change a batch it holds
	 * in place (ring.h); the header read-only, so that a stray write to
	 * it faults here rather than confuse this library later.
	 */
	l->hdr = mmap(NULL, (size_t)ok->ring_bytes, PROT_READ | PROT_WRITE,
		      MAP_SHARED, fds[0], 0);
	if (l->hdr == MAP_FAILED) {
		l->hdr = NULL;
		if (errno == EPERM)
			err = loader_fail(
				l, LOADER_EVERSION,
				"the ring cannot be mapped writable: loaderd is older than this library (ring version %d)",
				RING_VERSION);
		else
			err = loader_fail(l, -errno, "mmap ring: %s",
					  strerror(errno));
		goto out;
	}
	l->ring_bytes = (size_t)ok->ring_bytes;
	if (mprotect(l->hdr, RING_PAGE, PROT_READ)) {
		err = loader_fail(l, -errno, "mprotect ring header: %s",
				  strerror(errno));
		goto out;
	}
	l->cons = mmap(NULL, (size_t)ok->cons_bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED, fds[1], 0);
	if (l->cons == MAP_FAILED) {
		l->cons = NULL;
		err = loader_fail(l, -errno, "mmap consumer page: %s",
				  strerror(errno));
		goto out;
	}
	l->cons_bytes = (size_t)ok->cons_bytes;
out:
	/* The mappings keep the memory; the descriptors are not needed. */
	close(fds[0]);
	close(fds[1]);
	return err;
}

/*
 * The dataset's files, or a mixture's members each closed by its MEMBER,
 * before the OPEN: *flags gets the OPEN's flags of the dataset's kind (0
 * for a mixture, whose members carry their own), *remote whether the
 * daemon stages any of it from an object store.
 */
static int loader_send_dataset(struct loader *l, const char *dataset,
			       uint32_t *first_seq, uint32_t *flags,
			       bool *remote)
{
	int err;

	*flags = 0;
	if (l->nmembers)
		return loader_send_members(l, first_seq, remote);
	err = loader_send_files(l, dataset, first_seq, flags);
	*remote = *flags & PROTO_OPEN_REMOTE;
	return err;
}

/*
 * OPEN, map the ring; the OPEN_OK goes to *ok unless it is NULL. remote:
 * the daemon stages data from an object store before it answers.
 */
static int loader_stream(struct loader *l, const struct proto_open *po,
			 uint32_t first_seq, bool remote,
			 struct proto_open_ok *ok)
{
	union loader_reply r;
	unsigned nfds = 0;
	int fds[2], err, timeout = l->timeout_ms;

	err = msg_send(l->sock, PROTO_OPEN, ++l->seq, po, sizeof(*po), NULL, 0);
	if (err)
		return loader_send_failed(l, err, PROTO_OPEN);
	/* Staging an s3:// dataset may take longer than a reply should. */
	if (remote && l->timeout_ms >= 0 &&
	    l->timeout_ms < LOADER_STAGE_TIMEOUT)
		l->timeout_ms = LOADER_STAGE_TIMEOUT;
	err = loader_reply(l, first_seq, PROTO_OPEN_OK, &r, fds, 2, &nfds);
	l->timeout_ms = timeout;
	if (err)
		return err;
	if (nfds != 2) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		return loader_fail(l, LOADER_EPROTO,
				   "OPEN_OK carried %u descriptors, expected 2",
				   nfds);
	}
	err = loader_map(l, fds, &r.open);
	if (err)
		return err;
	err = loader_check_ring(l, po);
	if (err)
		return err;
	l->st.batches_per_epoch = r.open.batches_per_epoch;
	l->st.dataset_samples = r.open.samples;
	if (ok)
		*ok = r.open;
	l->base = (uint64_t)r.open.start_epoch * r.open.batches_per_epoch +
		  r.open.start_batch;
	/*
	 * Start at the daemon's idea of the consumer index: a resumed stream
	 * need not start at 0.
	 */
	l->next = __atomic_load_n(&l->cons->cons, __ATOMIC_ACQUIRE);
	l->released = l->next;
	return 0;
}

/*
 * A mixture's members from opt (its own, or a mixture file's): their
 * MEMBER messages and paths into the handle, and its name (the file, or
 * loader_open()'s dataset; may be NULL) in l->dataset, which begins the
 * reasons of failures about members.
 */
static int loader_keep_members(struct loader *l, const struct loader_opts *opt,
			       const char *name)
{
	struct loader_member m;
	int err;

	if (!opt->members && !opt->nmembers)
		return loader_make_members(opt, NULL, l->reason,
					   sizeof(l->reason));
	l->pm = calloc(PROTO_MAX_MEMBERS, sizeof(*l->pm));
	if (!l->pm || (name && !(l->dataset = strdup(name))))
		return loader_fail(l, -ENOMEM, "out of memory");
	err = loader_make_members(opt, l->pm, l->reason, sizeof(l->reason));
	if (err && name) {
		char why[sizeof(l->reason)];

		memcpy(why, l->reason, sizeof(why));
		return loader_fail(l, err, "%s: %s", name, why);
	}
	if (err)
		return err;
	for (uint32_t i = 0; i < opt->nmembers; i++) {
		/* Checked by loader_make_members(): no failure here. */
		loader_copy_member(opt, i, &m, NULL, 0);
		l->mpath[i] = strdup(m.dataset);
		if (!l->mpath[i])
			return loader_fail(l, -ENOMEM, "out of memory");
		l->nmembers = i + 1;
	}
	return 0;
}

LOADER_API int loader_open(struct loader **out, const char *dataset,
			   const struct loader_opts *opts, char *errbuf,
			   size_t errlen)
{
	struct loader_mixfile *mf = NULL;
	struct loader_opts opt;
	struct proto_open po;
	struct proto_open_ok ok;
	struct loader *l;
	uint32_t first_seq = 0, tflags = 0;
	bool remote = false;
	int err;

	if (errlen)
		errbuf[0] = '\0';
	if (!out) {
		if (errlen)
			snprintf(errbuf, errlen, "loader_open: out is NULL");
		return -EINVAL;
	}
	*out = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->sock = -1;
	err = loader_copy_opts(opts, &opt, l->reason, sizeof(l->reason));
	if (err)
		goto fail;
	l->timeout_ms =
		opt.timeout_ms ? opt.timeout_ms : LOADER_TIMEOUT_DEFAULT;
	/* Members name the datasets: dataset is then a name, if anything. */
	if (!opt.members && !opt.nmembers && !dataset) {
		err = loader_fail(
			l, -EINVAL,
			"loader_open: dataset is NULL, and opts has no members");
		goto fail;
	}
	if (!opt.members && !opt.nmembers && loader_is_mixfile(dataset)) {
		if (opt.epoch_size) {
			err = loader_fail(
				l, LOADER_EUSAGE,
				"epoch_size %" PRIu64
				" with the mixture file %s: the file says it (\"epoch_size\")",
				opt.epoch_size, dataset);
			goto fail;
		}
		mf = malloc(sizeof(*mf));
		if (!mf) {
			err = -ENOMEM;
			goto fail;
		}
		err = loader_mixfile_load(mf, dataset, l->reason,
					  sizeof(l->reason));
		if (err) {
			free(mf);
			mf = NULL;
			goto fail;
		}
		opt.members = mf->m;
		opt.nmembers = mf->nmembers;
		opt.member_size = sizeof(mf->m[0]);
		opt.epoch_size = mf->epoch_size;
	}

	err = loader_make_open(&opt, &po, l->reason, sizeof(l->reason));
	if (!err)
		err = loader_keep_members(l, &opt, dataset);
	if (mf) {
		/* Kept as MEMBER messages and paths: the strings may go. */
		loader_mixfile_free(mf);
		free(mf);
		opt.members = NULL;
	}
	if (err)
		goto fail;
	err = loader_connect(l, &opt);
	if (err)
		goto fail;
	err = loader_hello(l);
	if (err)
		goto fail;
	err = loader_send_dataset(l, dataset, &first_seq, &tflags, &remote);
	if (!err && opt.from_world)
		err = loader_send_positions(l, &opt);
	if (err)
		goto fail;
	po.flags |= tflags;
	err = loader_stream(l, &po, first_seq, remote, &ok);
	if (err)
		goto fail;
	/* A named stream rides a daemon restart by default (loader.h). */
	if (opt.reconnect_ms == 0 && opt.name)
		opt.reconnect_ms = LOADER_RECONNECT_DEFAULT_MS;
	if (opt.reconnect_ms > 0) {
		l->reconnect_ms = opt.reconnect_ms;
		l->po = po;
		/* A mixture's members are kept already (l->pm, l->mpath). */
		if (!l->nmembers && !l->dataset &&
		    !(l->dataset = strdup(dataset))) {
			err = -ENOMEM;
			goto fail;
		}
	}
	l->start_epoch = ok.start_epoch;
	l->start_batch = ok.start_batch;
	l->resumed = ok.resumed == 1;
	l->plan = ok.plan;
	l->plan_end = ok.plan_end;
	l->reason[0] = '\0';
	*out = l;
	return 0;
fail:
	if (errlen)
		snprintf(errbuf, errlen, "%s",
			 l->reason[0] ? l->reason : loader_strerror(err));
	loader_close(l);
	return err;
}

/* ---- batches --------------------------------------------------------------- */

/* Has the daemon hung up (exited, crashed, closed the session)? */
static bool loader_peer_gone(const struct loader *l)
{
	struct pollfd p = { .fd = l->sock, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 &&
	       (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/*
 * The daemon failed the ring because it is stopping (a service stop or
 * restart, a package upgrade: producer_notice()), and this stream
 * reconnects: that is the daemon going away, which the caller rides out
 * as -EPIPE, not a failure of the stream.
 */
static bool loader_daemon_stopping(const struct loader *l, uint32_t state,
				   int32_t code)
{
	return state == RING_FAILED && code == -ESHUTDOWN && l->reconnect_ms;
}

/*
 * No batch is ready: has the stream ended or failed? The state is read
 * before prod again, so that the batches published before the daemon
 * set RING_END (release) are all seen and delivered first.
 */
static int loader_check_state(struct loader *l, uint32_t *prod)
{
	uint32_t state = __atomic_load_n(&l->hdr->state, __ATOMIC_ACQUIRE);
	char text[PROTO_REASON_MAX];
	int code;

	*prod = __atomic_load_n(&l->hdr->prod, __ATOMIC_ACQUIRE);
	if (*prod != l->next || state == RING_RUNNING)
		return 0;
	if (state == RING_END)
		return loader_fail(l, LOADER_EEND, "the stream has ended");
	code = l->hdr->error;
	memcpy(text, l->hdr->reason, sizeof(text));
	text[sizeof(text) - 1] = '\0';
	if (loader_daemon_stopping(l, state, code))
		return loader_fail(l, -EPIPE, "%s", text);
	if (state != RING_FAILED)
		return loader_fail(l, LOADER_EPROTO, "ring: unknown state %u",
				   state);
	if (!text[0])
		return loader_fail(l, LOADER_ESTREAM, "stream failed: %s",
				   loader_strerror(code));
	return loader_fail(l, LOADER_ESTREAM, "%s", text);
}

/*
 * Wait until prod moves past l->next, the stream ends, the daemon goes
 * away or the time runs out. On success *prod is the new value.
 */
static int loader_wait(struct loader *l, int timeout_ms, uint32_t *prod)
{
	int64_t t0 = (int64_t)clock_mono_ns(), left, slice;
	int64_t deadline =
		timeout_ms < 0 ? -1 : t0 + (int64_t)timeout_ms * 1000000;
	bool flagged = false;
	int err = 0;

	for (int i = 1; timeout_ms; i++) {
		loader_cpu_relax();
		*prod = __atomic_load_n(&l->hdr->prod, __ATOMIC_ACQUIRE);
		if (*prod != l->next)
			goto out;
		if (i % LOADER_SPIN_ROUNDS == 0 &&
		    (int64_t)clock_mono_ns() - t0 >= LOADER_SPIN_NS)
			break;
	}
	for (;;) {
		err = loader_check_state(l, prod);
		if (err || *prod != l->next)
			break;
		if (loader_peer_gone(l)) {
			err = loader_fail(
				l, -EPIPE,
				"loaderd went away (the socket hung up)");
			break;
		}
		slice = LOADER_SLICE_NS;
		if (deadline >= 0) {
			left = deadline - (int64_t)clock_mono_ns();
			if (left <= 0) {
				err = -ETIMEDOUT;
				break;
			}
			if (left < slice)
				slice = left;
		}
		/*
		 * Raise the flag, then look at prod once more: the daemon
		 * stores prod and then reads the flag (both seq_cst), so
		 * either we see its new prod here or it sees our flag and
		 * wakes us.
		 */
		if (!flagged) {
			__atomic_store_n(&l->cons->client_waiting, 1,
					 __ATOMIC_SEQ_CST);
			flagged = true;
		}
		*prod = __atomic_load_n(&l->hdr->prod, __ATOMIC_SEQ_CST);
		if (*prod != l->next)
			break;
		err = futex_wait_shared(&l->hdr->prod, l->next, slice);
		if (err && err != -ETIMEDOUT && err != -EINTR) {
			err = loader_fail(l, err, "futex wait: %s",
					  strerror(-err));
			break;
		}
		err = 0;
	}
	if (flagged)
		__atomic_store_n(&l->cons->client_waiting, 0, __ATOMIC_SEQ_CST);
out:
	l->st.wait_ns += (uint64_t)((int64_t)clock_mono_ns() - t0);
	return err;
}

/* Wait until the ring has published batch k (prod is past it). */
static int loader_wait_for(struct loader *l, uint32_t k)
{
	uint32_t next = l->next, prod;
	int err = 0;

	for (;;) {
		prod = __atomic_load_n(&l->hdr->prod, __ATOMIC_ACQUIRE);
		if ((int32_t)(prod - k) > 0)
			break;
		l->next = prod;
		err = loader_wait(l, -1, &prod);
		l->next = next;
		if (err)
			break;
	}
	return err;
}

/* The header of batch k of a ring of count slots of size bytes. */
static struct ring_slot loader_slot(const unsigned char *slots, uint64_t size,
				    uint32_t count, uint32_t k)
{
	struct ring_slot rs;

	memcpy(&rs, slots + (uint64_t)ring_slot_of(k, count) * size,
	       sizeof(rs));
	return rs;
}

static void loader_unmap_old(struct loader *l)
{
	if (l->old.hdr)
		munmap(l->old.hdr, l->old.ring_bytes);
	if (l->old.cons)
		munmap(l->old.cons, l->old.cons_bytes);
	memset(&l->old, 0, sizeof(l->old));
}

/*
 * After a reconnect: the new ring starts at the daemon's saved position,
 * which may be behind what the caller released (releases it could not
 * save before it died, from batch saved of the old ring on). Release
 * again here, without handing them out, the copies of batches the
 * caller gave back; then the copies of the batches still held come
 * (l->old), counted as held. The new ring's first batch is one of the
 * old ring's [saved, released] (a daemon never saves past the consumer
 * index): look that far.
 */
static int loader_skip_copies(struct loader *l, uint32_t saved,
			      uint32_t released)
{
	uint32_t look = released - saved + 1, found = UINT32_MAX;
	struct ring_slot os = { 0 };

	if (l->old.left)
		os = loader_slot(l->old.slots, l->old.slot_size,
				 l->old.slot_count, l->old.first);
	else if (!l->have_last || saved == released)
		return 0; /* everything given back was saved */
	for (uint32_t i = 0; i < look && found == UINT32_MAX; i++) {
		uint32_t k = l->released + i;
		struct ring_slot rs;
		int err = loader_wait_for(l, k);

		if (err)
			return err;
		rs = loader_slot(l->slots, l->slot_size, l->slot_count, k);
		if ((uint32_t)rs.seq != k)
			return loader_fail(l, LOADER_EPROTO,
					   "ring: slot of batch %" PRIu32
					   " holds batch %" PRIu64,
					   k, rs.seq);
		if (l->old.left) {
			if (rs.epoch == os.epoch && rs.batch == os.batch)
				found = i; /* the first held: keep it */
		} else if (rs.epoch == l->last_epoch &&
			   rs.batch == l->last_batch) {
			found = i + 1; /* the last given back: skip it too */
		}
	}
	if (found == UINT32_MAX) {
		if (l->old.left)
			return loader_fail(
				l, LOADER_EPROTO,
				"after reconnecting, the stream did not go on at the batch held (epoch %" PRIu32
				" batch %" PRIu64 ")",
				os.epoch, os.batch);
		return 0; /* the daemon had saved them all */
	}
	if (found) {
		l->released += found;
		__atomic_store_n(&l->cons->cons, l->released, __ATOMIC_SEQ_CST);
		futex_wake_shared(&l->cons->cons);
	}
	l->next = l->released + l->old.left;
	/* The copies of the held ones come first: wait for them all. */
	return l->old.left ? loader_wait_for(l, l->next - 1) : 0;
}

/*
 * The daemon went away: connect again (for up to reconnect_ms, a try
 * every 100 ms), send the dataset's files again and open the stream at
 * the first batch not released (a named stream where the daemon saved
 * it, which a release it did not confirm may have passed; another where
 * this client counts). The old ring goes, or, while the caller holds
 * batches of it, stays until they are released (l->old).
 */
static int loader_reconnect(struct loader *l)
{
	int64_t deadline =
		(int64_t)clock_mono_ns() + (int64_t)l->reconnect_ms * 1000000;
	uint64_t bpe = l->st.batches_per_epoch, at = l->base + l->released;
	uint32_t end = l->po.epochs ? l->po.start_epoch + l->po.epochs : 0;
	struct proto_open po = l->po;
	uint32_t saved, released;
	int err;

	/*
	 * The stream goes on: whatever was saved, it is this one's (the
	 * positions it began from included).
	 */
	po.flags &= ~(uint32_t)(PROTO_OPEN_FRESH | PROTO_OPEN_POSITIONS);
	/* A named rank goes on at its own position, not its world's least. */
	if (l->po.name[0])
		po.flags |= PROTO_OPEN_GO_ON;
	if (!l->po.name[0] && bpe) {
		po.start_epoch = (uint32_t)(at / bpe);
		po.start_batch = at % bpe;
		if (end && po.start_epoch >= end)
			return loader_fail(l, LOADER_EEND,
					   "the stream has ended");
		po.epochs = end ? end - po.start_epoch : 0;
	}
	/* What the daemon saved of what was released (a named stream). */
	saved = l->named && l->hdr ?
			__atomic_load_n(&l->hdr->saved, __ATOMIC_ACQUIRE) :
			l->released;
	if ((int32_t)(l->released - saved) < 0)
		saved = l->released;
	released = l->released;
	if (l->next != l->released) {
		if (l->old.left)
			return loader_fail(
				l, -EPIPE,
				"loaderd went away again while batches delivered before the last reconnect are held");
		l->old = (struct loader_old){
			.hdr = l->hdr,
			.ring_bytes = l->ring_bytes,
			.cons = l->cons,
			.cons_bytes = l->cons_bytes,
			.slots = l->slots,
			.slot_size = l->slot_size,
			.slot_count = l->slot_count,
			.first = l->released,
			.left = l->next - l->released,
		};
	} else {
		if (l->hdr)
			munmap(l->hdr, l->ring_bytes);
		if (l->cons)
			munmap(l->cons, l->cons_bytes);
	}
	l->hdr = NULL;
	l->cons = NULL;
	for (;;) {
		uint32_t first_seq = 0, tflags = 0;
		bool remote = false;

		if (l->sock >= 0)
			close(l->sock);
		l->sock = -1;
		err = loader_dial(l);
		if (!err)
			err = loader_hello(l);
		/* Every member again, each with its MEMBER, for a mixture. */
		if (!err)
			err = loader_send_dataset(l, l->dataset, &first_seq,
						  &tflags, &remote);
		if (!err)
			err = loader_stream(l, &po, first_seq, remote, NULL);
		if (!err)
			return loader_skip_copies(l, saved, released);
		/* A refusal with a reason (not a daemon still away) is final. */
		if (err != -ECONNREFUSED && err != -ENOENT && err != -EPIPE &&
		    err != -ECONNRESET && err != -ETIMEDOUT)
			return err;
		if ((int64_t)clock_mono_ns() >= deadline) {
			/* The last try's reason, copied: it is rewritten. */
			char last[sizeof(l->reason)];

			memcpy(last, l->reason, sizeof(last));
			return loader_fail(
				l, -EPIPE,
				"loaderd went away and did not come back within %d ms (%s)",
				l->reconnect_ms, last);
		}
		usleep(100000);
	}
}

/*
 * A ragged output's offsets in a slot just published: rising from 0 and
 * within the room. Read once each, from memory the caller could write
 * (the slot is theirs), so a check and a use see the same value; the
 * total is the output's bytes.
 */
static int loader_check_offsets(struct loader *l, const unsigned char *slot,
				const struct loader_output *o, uint32_t count,
				size_t *bytes)
{
	const uint64_t *off = (const uint64_t *)(const void *)(slot + o->index);
	uint64_t prev = __atomic_load_n(&off[0], __ATOMIC_RELAXED);

	if (prev)
		return loader_fail(l, LOADER_EPROTO,
				   "ring output %s: first offset %llu, not 0",
				   o->name, (unsigned long long)prev);
	for (uint32_t i = 1; i <= count; i++) {
		uint64_t v = __atomic_load_n(&off[i], __ATOMIC_RELAXED);

		if (v < prev || v > o->room || v % o->row)
			return loader_fail(
				l, LOADER_EPROTO,
				"ring output %s: offset %u is %llu, after %llu, in %llu bytes of room (rows of %llu)",
				o->name, i, (unsigned long long)v,
				(unsigned long long)prev,
				(unsigned long long)o->room,
				(unsigned long long)o->row);
		prev = v;
	}
	*bytes = (size_t)prev;
	return 0;
}

/*
 * A mixture's slot just published: each sample's member is one of the
 * stream's. Read once each, from memory the caller could write, as
 * ragged offsets are.
 */
static int loader_check_members(struct loader *l, const unsigned char *slot,
				const struct ring_slot *rs)
{
	const uint32_t *m =
		(const uint32_t *)(const void *)(slot + l->members_offset);

	for (uint32_t i = 0; i < rs->count; i++) {
		uint32_t v = __atomic_load_n(&m[i], __ATOMIC_RELAXED);

		if (v >= l->nmembers)
			return loader_fail(
				l, LOADER_EPROTO,
				"ring: batch %" PRIu64 " (epoch %" PRIu32
				", index %" PRIu64 "): sample %" PRIu32
				" is of member %" PRIu32 ", of %" PRIu32,
				rs->seq, rs->epoch, rs->batch, i, v,
				l->nmembers);
	}
	return 0;
}

/* Is p the start of one of slots' count slots of size bytes? */
static bool loader_is_slot(const unsigned char *p, const unsigned char *slots,
			   uint64_t size, uint32_t count)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)slots;

	return slots && a >= b && (a - b) % size == 0 && (a - b) / size < count;
}

LOADER_API const uint64_t *
loader_offsets(const struct loader *l, const struct loader_batch *b, uint32_t k)
{
	const struct loader_output *o;
	const unsigned char *slot;

	if (!l || !b || k >= l->noutputs || k >= b->noutputs)
		return NULL;
	o = &l->out[k];
	if (!o->ragged || !b->out[k].data)
		return NULL;
	/* The batch's slot, in this ring or the one before a reconnect. */
	slot = (const unsigned char *)b->out[k].data - o->offset;
	if (!loader_is_slot(slot, l->slots, l->slot_size, l->slot_count) &&
	    !(l->old.left &&
	      loader_is_slot(slot, l->old.slots, l->old.slot_size,
			     l->old.slot_count)))
		return NULL;
	return (const uint64_t *)(const void *)(slot + o->index);
}

/*
 * The head of held batch b's slot, in this ring or the one before a
 * reconnect, into *rs. Returns 0, or -EINVAL if b is not held.
 */
static int loader_held_slot(const struct loader *l,
			    const struct loader_batch *b, struct ring_slot *rs)
{
	const unsigned char *slot;

	if (!l || !b || !b->ids)
		return -EINVAL;
	slot = (const unsigned char *)b->ids - l->ids_offset;
	if (!loader_is_slot(slot, l->slots, l->slot_size, l->slot_count) &&
	    !(l->old.left &&
	      loader_is_slot(slot, l->old.slots, l->old.slot_size,
			     l->old.slot_count)))
		return -EINVAL;
	memcpy(rs, slot, sizeof(*rs));
	return rs->seq == b->seq ? 0 : -EINVAL;
}

LOADER_API const uint32_t *loader_members(const struct loader *l,
					  const struct loader_batch *b)
{
	struct ring_slot rs;

	if (!l || !l->nmembers || loader_held_slot(l, b, &rs))
		return NULL;
	/* Every ring of the stream has the same layout (the same OPEN). */
	return (const uint32_t *)(const void *)((const unsigned char *)b->ids -
						l->ids_offset +
						l->members_offset);
}

LOADER_API uint32_t loader_nmembers(const struct loader *l)
{
	return l ? l->nmembers : 0;
}

LOADER_API int loader_repeats(const struct loader *l,
			      const struct loader_batch *b)
{
	struct ring_slot rs;
	int err = loader_held_slot(l, b, &rs);

	if (err)
		return err;
	/* The slot is the caller's to spoil: never more than the batch. */
	return (int)(rs.repeats < b->count ? rs.repeats : b->count);
}

TIE(LOADER_MIX_NONE, RING_MIX_NONE);
TIE(LOADER_MIX_MIXUP, RING_MIX_MIXUP);
TIE(LOADER_MIX_CUTMIX, RING_MIX_CUTMIX);
TIE(LOADER_PAIR_FLIP, RING_PAIR_FLIP);
TIE(LOADER_PAIR_ROLL, RING_PAIR_ROLL);

LOADER_API int loader_mix(const struct loader *l, const struct loader_batch *b,
			  struct loader_mix *m)
{
	struct ring_slot rs;
	uint64_t side = 0;
	int err;

	if (!m)
		return -EINVAL;
	err = loader_held_slot(l, b, &rs);
	if (err)
		return err;
	/* A box lies within an image, no side larger than an output's. */
	for (uint32_t k = 0; k < l->noutputs; k++)
		for (uint32_t i = 1; i < l->out[k].ndim; i++)
			if (l->out[k].shape[i] > side &&
			    l->out[k].shape[i] != RING_RAGGED)
				side = l->out[k].shape[i];
	if (rs.mix.kind > RING_MIX_CUTMIX || rs.mix.pair > RING_PAIR_ROLL ||
	    !(rs.mix.lam >= 0 && rs.mix.lam <= 1) ||
	    rs.mix.box[0] > rs.mix.box[2] || rs.mix.box[1] > rs.mix.box[3] ||
	    rs.mix.box[2] > side || rs.mix.box[3] > side ||
	    (rs.mix.kind != RING_MIX_CUTMIX && rs.mix.box[2] | rs.mix.box[3]))
		return LOADER_EPROTO;
	m->kind = rs.mix.kind;
	m->pair = rs.mix.pair;
	m->lam = rs.mix.lam;
	memcpy(m->box, rs.mix.box, sizeof(m->box));
	return 0;
}

LOADER_API int loader_next(struct loader *l, struct loader_batch *b,
			   int timeout_ms)
{
	const unsigned char *slot;
	struct ring_slot rs;
	uint32_t prod;
	size_t bytes = 0;
	int err;

	if (!l || !b)
		return -EINVAL;
	if (l->final)
		return l->final;
	if (l->next - l->released >= l->slot_count - 1)
		return -EBUSY;
	prod = __atomic_load_n(&l->hdr->prod, __ATOMIC_ACQUIRE);
	if (prod == l->next) {
		err = loader_wait(l, timeout_ms, &prod);
		if (err == -EPIPE && l->reconnect_ms && !l->old.left) {
			err = loader_reconnect(l);
			if (!err)
				return loader_next(l, b, timeout_ms);
		}
		if (err) {
			if (err != -ETIMEDOUT)
				l->final = err;
			return err;
		}
	}
	/* The daemon fills a slot only while prod - cons < slot_count. */
	if (ring_pending(prod, l->next) > l->slot_count) {
		l->final = loader_fail(
			l, LOADER_EPROTO,
			"ring: %u batches published ahead of %u in %u slots",
			prod - l->next, l->next, l->slot_count);
		return l->final;
	}
	slot = l->slots +
	       (uint64_t)ring_slot_of(l->next, l->slot_count) * l->slot_size;
	memcpy(&rs, slot, sizeof(rs));
	/* loader_release() knows a batch by its seq: it must be its index. */
	if ((uint32_t)rs.seq != l->next) {
		l->final = loader_fail(l, LOADER_EPROTO,
				       "ring: slot of batch %" PRIu32
				       " holds batch %" PRIu64,
				       l->next, rs.seq);
		return l->final;
	}
	if (rs.count > l->batch_size || rs.repeats > rs.count) {
		l->final = loader_fail(
			l, LOADER_EPROTO,
			"ring: batch %llu has %u samples (%u repeated), more than %u",
			(unsigned long long)rs.seq, rs.count, rs.repeats,
			l->batch_size);
		return l->final;
	}
	if (l->nmembers) {
		err = loader_check_members(l, slot, &rs);
		if (err)
			return l->final = err;
	}
	b->seq = rs.seq;
	b->index = rs.batch;
	b->epoch = rs.epoch;
	b->count = rs.count;
	b->ids = (const uint64_t *)(const void *)(slot + l->ids_offset);
	b->noutputs = l->noutputs;
	for (uint32_t i = 0; i < l->noutputs; i++) {
		const struct loader_output *o = &l->out[i];
		struct loader_tensor *t = &b->out[i];

		t->name = o->name;
		t->data = slot + o->offset;
		t->dtype = o->dtype;
		t->ndim = o->ndim;
		memcpy(t->shape, o->shape, sizeof(t->shape));
		t->shape[0] = rs.count;
		t->bytes = (size_t)(rs.count * o->sample_bytes);
		if (!o->ragged) {
			uint64_t n;
			char why[PROTO_REASON_MAX];

			if (loader_check_shape(o, rs.shape[i], rs.count, &n,
					       why, sizeof(why)))
				return l->final = loader_fail(l, LOADER_EPROTO,
							      "%s", why);
			memcpy(t->shape, rs.shape[i], sizeof(t->shape));
			t->bytes = (size_t)n;
		}
		if (o->ragged) {
			err = loader_check_offsets(l, slot, o, rs.count,
						   &t->bytes);
			if (err)
				return l->final = err;
		}
		bytes += t->bytes;
	}
	l->next++;
	l->st.batches++;
	l->st.samples += rs.count;
	l->st.bytes += bytes;
	return 0;
}

/*
 * A named stream's release returns once the daemon has saved it (ring.h):
 * spin a little (the saver commits in microseconds), then sleep on
 * `saved`, looking at the socket between sleeps. Gives up after the
 * handle's timeout, or when the daemon is gone: the release is then
 * perhaps not saved, and the batch may be delivered again.
 */
static int loader_wait_saved(struct loader *l, uint32_t want)
{
	int64_t t0 = (int64_t)clock_mono_ns();
	int64_t deadline = l->timeout_ms < 0 ?
				   -1 :
				   (int64_t)clock_mono_ns() +
					   (int64_t)l->timeout_ms * 1000000;
	uint32_t saved, state;

	for (int i = 1;; i++) {
		saved = __atomic_load_n(&l->hdr->saved, __ATOMIC_ACQUIRE);
		if ((int32_t)(saved - want) >= 0)
			return 0;
		loader_cpu_relax();
		if (i % LOADER_SPIN_ROUNDS == 0 &&
		    (int64_t)clock_mono_ns() - t0 >= LOADER_SPIN_NS)
			break;
	}
	for (;;) {
		int64_t slice = LOADER_SLICE_NS;

		saved = __atomic_load_n(&l->hdr->saved, __ATOMIC_ACQUIRE);
		if ((int32_t)(saved - want) >= 0)
			return 0;
		state = __atomic_load_n(&l->hdr->state, __ATOMIC_ACQUIRE);
		if (loader_daemon_stopping(l, state, l->hdr->error))
			return loader_fail(
				l, -EPIPE,
				"loaderd stopped before it saved the release");
		if (state == RING_FAILED)
			return loader_fail(
				l, LOADER_ESTREAM,
				"the stream failed before the release was saved");
		if (loader_peer_gone(l))
			return loader_fail(
				l, -EPIPE,
				"loaderd went away before it saved the release");
		if (deadline >= 0) {
			int64_t left = deadline - (int64_t)clock_mono_ns();

			if (left <= 0)
				return loader_fail(
					l, -ETIMEDOUT,
					"loaderd did not save the release in %d ms",
					l->timeout_ms);
			if (left < slice)
				slice = left;
		}
		futex_wait_shared(&l->hdr->saved, saved, slice);
	}
}

LOADER_API int loader_release(struct loader *l, const struct loader_batch *b)
{
	int err;

	if (!l || !b)
		return -EINVAL;
	if (!l->hdr) {
		/*
		 * A reconnect failed: the stream is over (loader_next()
		 * returned why) and has no ring. The batches still held of
		 * the old one are given back here alone.
		 */
		if (!l->old.left || (uint32_t)b->seq != l->old.first)
			return -EINVAL;
		l->old.first++;
		if (!--l->old.left)
			loader_unmap_old(l);
		return 0;
	}
	if (l->old.left) {
		/* A batch of the ring before the reconnect: its copy goes. */
		struct ring_slot os;

		if ((uint32_t)b->seq != l->old.first)
			return -EINVAL;
		os = loader_slot(l->old.slots, l->old.slot_size,
				 l->old.slot_count, l->old.first);
		err = loader_wait_for(l, l->released);
		if (err)
			return err;
		{
			struct ring_slot rs =
				loader_slot(l->slots, l->slot_size,
					    l->slot_count, l->released);

			if (rs.epoch != os.epoch || rs.batch != os.batch)
				return l->final = loader_fail(
					       l, LOADER_EPROTO,
					       "after reconnecting, batch %" PRIu32
					       " is epoch %" PRIu32
					       " batch %" PRIu64
					       ", not the held one (epoch %" PRIu32
					       " batch %" PRIu64 ")",
					       l->released, rs.epoch, rs.batch,
					       os.epoch, os.batch);
		}
		l->last_epoch = os.epoch;
		l->last_batch = os.batch;
		l->old.first++;
		if (!--l->old.left)
			loader_unmap_old(l);
	} else if (l->released == l->next || (uint32_t)b->seq != l->released) {
		/* Only the oldest batch held: the index says "all before". */
		return -EINVAL;
	} else {
		struct ring_slot rs = loader_slot(l->slots, l->slot_size,
						  l->slot_count, l->released);

		l->last_epoch = rs.epoch;
		l->last_batch = rs.batch;
	}
	l->have_last = true;
	l->released++;
	/*
	 * Store cons, then read the daemon's flag, both seq_cst: the mirror
	 * of the daemon's side (ring.h), so that a daemon waiting for a free
	 * slot is never left asleep.
	 */
	__atomic_store_n(&l->cons->cons, l->released, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&l->hdr->daemon_waiting, __ATOMIC_SEQ_CST) ||
	    (l->named &&
	     __atomic_load_n(&l->hdr->saver_waiting, __ATOMIC_SEQ_CST)))
		futex_wake_shared(&l->cons->cons);
	if (!l->named)
		return 0;
	err = loader_wait_saved(l, l->released);
	/*
	 * The daemon is gone: with reconnect_ms the release is kept here
	 * and saved once loader_next() has reconnected.
	 */
	return err == -EPIPE && l->reconnect_ms ? 0 : err;
}

LOADER_API int loader_stats(struct loader *l, struct loader_stats *st)
{
	union loader_reply r;
	int err;

	struct loader_stats all;
	uint32_t size;

	if (!l || !st)
		return -EINVAL;
	size = st->size;
	if (size < LOADER_STATS_SIZE_1)
		return loader_fail(
			l, LOADER_EUSAGE,
			"struct loader_stats: size %u is not set (initialise it with LOADER_STATS_INIT)",
			size);
	all = l->st;
	err = msg_send(l->sock, PROTO_STATS, ++l->seq, NULL, 0, NULL, 0);
	if (err)
		return loader_send_failed(l, err, PROTO_STATS);
	err = loader_reply(l, l->seq, PROTO_STATS_OK, &r, NULL, 0, NULL);
	if (err)
		return err;
	all.daemon_bytes_read = r.stats.bytes_read;
	all.daemon_bad_samples = r.stats.bad_samples;
	all.daemon_rss = r.stats.rss_bytes;
	all.daemon_cache_hits = r.stats.cache_hits;
	all.daemon_cache_misses = r.stats.cache_misses;
	all.size = size;
	memcpy(st, &all, size < sizeof(all) ? size : sizeof(all));
	return 0;
}

LOADER_API int loader_start(const struct loader *l, uint32_t *epoch,
			    uint64_t *batch)
{
	if (epoch)
		*epoch = l->start_epoch;
	if (batch)
		*batch = l->start_batch;
	return l->resumed;
}

LOADER_API uint64_t loader_plan(const struct loader *l, uint32_t *end_epoch)
{
	if (end_epoch)
		*end_epoch = l->plan_end;
	return l->plan;
}

LOADER_API uint64_t loader_batches_per_epoch(const struct loader *l)
{
	return l ? l->st.batches_per_epoch : 0;
}

LOADER_API uint64_t loader_batches_in_epoch(const struct loader *l,
					    uint32_t epoch)
{
	if (!l)
		return 0;
	if (l->counts_from && epoch >= l->counts_from)
		return l->later_batches;
	return l->st.batches_per_epoch;
}

LOADER_API uint64_t loader_samples(const struct loader *l)
{
	return l ? l->st.dataset_samples : 0;
}

LOADER_API uint32_t loader_slots(const struct loader *l)
{
	return l ? l->slot_count : 0;
}

LOADER_API int loader_version(void)
{
	return LOADER_VERSION;
}

LOADER_API const char *loader_reason(const struct loader *l)
{
	return l ? l->reason : "";
}

LOADER_API void loader_close(struct loader *l)
{
	if (!l)
		return;
	loader_unmap_old(l);
	if (l->hdr)
		munmap(l->hdr, l->ring_bytes);
	if (l->cons)
		munmap(l->cons, l->cons_bytes);
	/* Closing the socket is what ends the stream in the daemon. */
	if (l->sock >= 0)
		close(l->sock);
	free(l->dataset);
	for (uint32_t i = 0; i < l->nmembers; i++)
		free(l->mpath[i]);
	free(l->pm);
	free(l);
}
