/*
 * msg.c - one protocol message over the control socket: send, receive and
 * check it. Shared by libloader and loaderd.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "loader_error.h"
#include "msg.h"

/* Room for the most descriptors one message may carry. */
#define MSG_CMSG_ROOM CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)

static const char *const msg_names[PROTO_TYPE_END] = {
	[PROTO_HELLO] = "HELLO",
	[PROTO_HELLO_OK] = "HELLO_OK",
	[PROTO_FILES] = "FILES",
	[PROTO_OPEN] = "OPEN",
	[PROTO_OPEN_OK] = "OPEN_OK",
	[PROTO_STATS] = "STATS",
	[PROTO_STATS_OK] = "STATS_OK",
	[PROTO_ERROR] = "ERROR",
	[PROTO_STATUS] = "STATUS",
	[PROTO_STATUS_OK] = "STATUS_OK",
	[PROTO_STREAM_INFO] = "STREAM_INFO",
	[PROTO_STREAM_INFO_OK] = "STREAM_INFO_OK",
	[PROTO_SAVED] = "SAVED",
	[PROTO_SAVED_OK] = "SAVED_OK",
	[PROTO_FORGET] = "FORGET",
	[PROTO_FORGET_OK] = "FORGET_OK",
	[PROTO_REMOTE] = "REMOTE",
	[PROTO_POSITIONS] = "POSITIONS",
	[PROTO_MEMBER] = "MEMBER",
};

const char *msg_type_name(uint16_t type)
{
	if (type < PROTO_TYPE_END && msg_names[type])
		return msg_names[type];
	return "?";
}

int msg_why(char *why, size_t whylen, int code, const char *fmt, ...)
{
	va_list ap;

	if (whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* A malformed message: LOADER_EPROTO, and why. */
#define msg_bad(why, whylen, ...)                                              \
	msg_why(why, whylen, LOADER_EPROTO, __VA_ARGS__)

int msg_send(int fd, uint16_t type, uint32_t seq, const void *payload,
	     uint32_t len, const int *fds, unsigned nfds)
{
	union {
		struct cmsghdr align;
		char buf[MSG_CMSG_ROOM];
	} ctl;
	struct proto_hdr h = {
		.magic = PROTO_MAGIC,
		.version = PROTO_VERSION,
		.type = type,
		.length = len,
		.seq = seq,
	};
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	ssize_t n;

	if (nfds > PROTO_MAX_FDS || (nfds && !fds) || (len && !payload))
		return -EINVAL;
	if (len > PROTO_MAX_MSG - sizeof(h))
		return -EMSGSIZE;
	if (nfds) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(fd, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* A packet goes whole or not at all; anything else is a bug. */
	if ((size_t)n != sizeof(h) + len)
		return -EIO;
	return 0;
}

/*
 * Check the payload's length against its type. The header's own length
 * has already been matched with the bytes received.
 */
static int msg_check_len(const struct proto_hdr *h, const void *payload,
			 char *why, size_t whylen)
{
	struct proto_error e;

	if (h->type != PROTO_ERROR) {
		/*
		 * proto_payload_size() answers 0 both for "empty" (STATS) and
		 * for "varies"; PROTO_ERROR, handled below, is the only type
		 * whose length varies.
		 */
		if (h->length != proto_payload_size(h->type))
			return msg_bad(
				why, whylen,
				"%s message of %u payload bytes, expected %u",
				msg_type_name(h->type), h->length,
				proto_payload_size(h->type));
		return 0;
	}
	if (h->length < sizeof(e))
		return msg_bad(
			why, whylen,
			"ERROR message of %u payload bytes, shorter than its %zu-byte head",
			h->length, sizeof(e));
	memcpy(&e, payload, sizeof(e));
	if (e.len > PROTO_REASON_MAX || h->length != sizeof(e) + e.len)
		return msg_bad(
			why, whylen,
			"ERROR message of %u payload bytes with a %u-byte reason",
			h->length, e.len);
	return 0;
}

/* Has the peer shut its end of the connection? */
static bool peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) < 0 ||
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

int msg_recv(int fd, struct proto_hdr *h, void *payload, uint32_t cap, int *fds,
	     unsigned maxfds, unsigned *nfds, char *why, size_t whylen)
{
	union {
		struct cmsghdr align;
		char buf[MSG_CMSG_ROOM];
	} ctl;
	struct iovec iov[2] = {
		{ .iov_base = h, .iov_len = sizeof(*h) },
		{ .iov_base = payload, .iov_len = cap },
	};
	struct msghdr m = {
		.msg_iov = iov,
		.msg_iovlen = cap ? 2 : 1,
		.msg_control = ctl.buf,
		/*
		 * Room for exactly maxfds descriptors: CMSG_LEN, not
		 * CMSG_SPACE, which rounds up and would let the kernel
		 * install one more than we can take.
		 */
		.msg_controllen = maxfds ? CMSG_LEN(sizeof(int) * maxfds) : 0,
	};
	unsigned got = 0;
	bool extra = false;
	ssize_t n;
	int err;

	if (nfds)
		*nfds = 0;
	if (whylen)
		why[0] = '\0';
	if (maxfds > PROTO_MAX_FDS || (maxfds && (!fds || !nfds)) ||
	    (cap && !payload))
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	if (!maxfds)
		m.msg_control = NULL;
	do
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	/*
	 * Collect the descriptors first, whatever else is wrong, so that
	 * every failure below can close them: a malformed message must not
	 * leak descriptors into the receiver.
	 */
	for (struct cmsghdr *c = m.msg_controllen ? CMSG_FIRSTHDR(&m) : NULL; c;
	     c = CMSG_NXTHDR(&m, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int d;

			memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(d));
			if (got < maxfds) {
				fds[got++] = d;
			} else {
				close(d);
				extra = true;
			}
		}
	}

	/*
	 * On SOCK_SEQPACKET a 0-byte packet reads just like end of file;
	 * only the socket's shutdown state, which poll() reports as
	 * POLLRDHUP, tells a peer that sent nothing from one that left.
	 */
	if (n == 0 && !peer_gone(fd)) {
		err = msg_bad(why, whylen,
			      "empty packet: a header is %zu bytes",
			      sizeof(*h));
		goto fail;
	}
	if (n == 0) {
		err = -EPIPE;
		if (whylen)
			snprintf(why, whylen, "the peer closed the connection");
		goto fail;
	}
	if (m.msg_flags & MSG_CTRUNC || extra) {
		err = msg_bad(why, whylen,
			      "message carried more than %u descriptors",
			      maxfds);
		goto fail;
	}
	if ((size_t)n < sizeof(*h)) {
		memset(h, 0, sizeof(*h));
		err = msg_bad(why, whylen,
			      "short packet: %zd bytes, a header is %zu", n,
			      sizeof(*h));
		goto fail;
	}
	if (h->magic != PROTO_MAGIC) {
		err = msg_bad(why, whylen, "bad magic 0x%08x", h->magic);
		goto fail;
	}
	if (h->version != PROTO_VERSION) {
		err = msg_bad(why, whylen, "protocol version %u, expected %u",
			      h->version, PROTO_VERSION);
		goto fail;
	}
	if (h->type == 0 || h->type >= PROTO_TYPE_END) {
		err = msg_bad(why, whylen, "unknown message type %u", h->type);
		goto fail;
	}
	if (m.msg_flags & MSG_TRUNC) {
		err = msg_bad(why, whylen,
			      "%s message longer than %u payload bytes",
			      msg_type_name(h->type), cap);
		goto fail;
	}
	if (h->length != (size_t)n - sizeof(*h)) {
		err = msg_bad(why, whylen,
			      "%s header says %u payload bytes, %zu came",
			      msg_type_name(h->type), h->length,
			      (size_t)n - sizeof(*h));
		goto fail;
	}
	err = msg_check_len(h, payload, why, whylen);
	if (err)
		goto fail;
	if (nfds)
		*nfds = got;
	return 0;
fail:
	for (unsigned i = 0; i < got; i++)
		close(fds[i]);
	return err;
}

int msg_request(int fd, uint16_t type, uint32_t seq, const void *req,
		uint32_t len, uint16_t want, void *reply, uint32_t cap,
		int timeout_ms, char *why, size_t whylen)
{
	union {
		struct proto_error e;
		char raw[PROTO_MAX_MSG];
	} r;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct proto_hdr h;
	int err, n;

	err = msg_send(fd, type, seq, req, len, NULL, 0);
	/* Refused and closed (a connection limit): the reason is waiting. */
	if ((err == -EPIPE || err == -ECONNRESET) && poll(&p, 1, 0) == 1 &&
	    !msg_recv(fd, &h, &r, sizeof(r), NULL, 0, NULL, why, whylen) &&
	    h.type == PROTO_ERROR)
		goto refused;
	if (err)
		return msg_why(why, whylen, err, "sending %s: %s",
			       msg_type_name(type), loader_strerror(err));
	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return msg_why(why, whylen, -ETIMEDOUT,
			       "no reply to %s within %d ms",
			       msg_type_name(type), timeout_ms);
	err = msg_recv(fd, &h, &r, sizeof(r), NULL, 0, NULL, why, whylen);
	if (err == -EPIPE)
		return msg_why(why, whylen, err,
			       "loaderd closed the connection");
	if (err && err != LOADER_EPROTO)
		return msg_why(why, whylen, err, "receiving: %s",
			       loader_strerror(err));
	if (err)
		return err; /* why says how the message was malformed */
	if (h.type == PROTO_ERROR)
		goto refused;
	if (h.type != want || h.seq != seq)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "%s %u answered with %s %u", msg_type_name(type),
			       seq, msg_type_name(h.type), h.seq);
	memcpy(reply, r.raw, cap);
	return 0;
refused:
	return msg_why(why, whylen, r.e.code < 0 ? r.e.code : LOADER_EPROTO,
		       "loaderd: %.*s", (int)r.e.len, r.raw + sizeof(r.e));
}
