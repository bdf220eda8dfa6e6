/*
 * fuzz_proto.c - a session's first messages as the daemon receives
 * them. The input is up to 8 messages, each a flags byte (bit 0: carry a
 * descriptor), a length (2 bytes, little-endian; the last message takes
 * what is left when it overruns) and the datagram, sent over a
 * SOCK_SEQPACKET pair and read back through msg_recv() (framing,
 * lengths, types, descriptors). POSITIONS that frame are gathered as the
 * daemon gathers them (openreq_positions()); an OPEN that frames is
 * checked as the daemon checks it (openreq_config(), then
 * openreq_given_check() against the POSITIONS before it). One it
 * accepts must have its rank below its world, and the rank's own
 * position is then looked up as named_given() does (openreq_given_rank())
 * and read, so that ASan reports a read past the positions; an OPEN from
 * positions of its own world must find its rank's. Seeds that crashed
 * the daemon when accepted: corpus/proto/open-named-rank, a named OPEN
 * at rank 2^31-1 of world 1; corpus/proto/positions-named-rank, the same
 * OPEN from positions after POSITIONS of world 1. Descriptors received
 * are closed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "msg.h"
#include "openreq.h"
#include "proto.h"

#define MAX_MSGS 8

static int pair[2] = { -1, -1 };

static bool send_raw(const uint8_t *data, size_t size, bool with_fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)data, size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fd = with_fd ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	n = sendmsg(pair[0], &mh, MSG_DONTWAIT);
	if (fd >= 0)
		close(fd);
	return n >= 0;
}

/* What the daemon does with one message that framed. */
static void take(struct openreq_given *g, const struct proto_hdr *h,
		 const unsigned char *payload)
{
	static struct proto_positions pm;
	struct proto_open m;
	struct stream_config c;
	struct diag d;

	if (h->type == PROTO_POSITIONS && h->length == sizeof(pm)) {
		memcpy(&pm, payload, sizeof(pm));
		(void)openreq_positions(g, &pm, &d);
	} else if (h->type == PROTO_OPEN && h->length == sizeof(m)) {
		const struct proto_position *p;
		volatile uint64_t sink;
		uint32_t world;

		memcpy(&m, payload, sizeof(m));
		if (openreq_config(&m, &c, &d) ||
		    openreq_given_check(g, m.flags, &d))
			return;
		/*
		 * What is accepted is indexed by rank right away (a named
		 * stream's saved and given positions).
		 */
		world = c.world ? c.world : 1;
		if (c.rank >= world)
			abort();
		p = openreq_given_rank(g, world, c.rank);
		if (p)
			sink = p->batch + p->epoch;
		else if ((m.flags & PROTO_OPEN_POSITIONS) && g->world == world)
			abort();
		(void)sink;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char payload[PROTO_MAX_MSG];
	struct openreq_given g = { 0 };
	size_t off = 0;

	if (pair[0] < 0 &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		return 0;
	for (int k = 0; k < MAX_MSGS && off < size; k++) {
		struct proto_hdr h;
		char why[256];
		int fds[PROTO_MAX_FDS];
		unsigned nfds = 0;
		bool with_fd = data[off] & 1;
		size_t len = size - off - 1;

		if (size - off >= 3) {
			size_t want = data[off + 1] | (size_t)data[off + 2]
							      << 8;

			off += 3;
			len = want < size - off ? want : size - off;
		} else {
			off++;
		}
		if (len > 2 * PROTO_MAX_MSG ||
		    !send_raw(data + off, len, with_fd))
			break;
		off += len;
		if (msg_recv(pair[1], &h, payload, sizeof(payload), fds,
			     PROTO_MAX_FDS, &nfds, why, sizeof(why)) == 0)
			take(&g, &h, payload);
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
	}
	openreq_given_clear(&g);
	return 0;
}
