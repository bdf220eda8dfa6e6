/*
 * fuzz_proto.c - protocol messages as either side receives them: one
 * datagram over a SOCK_SEQPACKET pair, carrying a descriptor when the
 * input's first byte is odd, through msg_recv() (framing, lengths, types,
 * descriptors); an OPEN that frames is then checked as the daemon checks
 * it (openreq_config()), and one it accepts must have its rank below its
 * world (corpus/proto/open-named-rank: a named OPEN at rank 2^31-1 of
 * world 1, which crashed the daemon when accepted). Descriptors received
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

static int pair[2] = { -1, -1 };

static void send_raw(const uint8_t *data, size_t size, bool with_fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)data, size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fd = with_fd ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;

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
	(void)sendmsg(pair[0], &mh, MSG_DONTWAIT);
	if (fd >= 0)
		close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char payload[PROTO_MAX_MSG];
	struct proto_hdr h;
	struct diag d;
	char why[256];
	int fds[PROTO_MAX_FDS];
	unsigned nfds = 0;
	bool with_fd;

	if (pair[0] < 0 &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		return 0;
	if (!size || size > 2 * PROTO_MAX_MSG)
		return 0;
	with_fd = data[0] & 1;
	send_raw(data + 1, size - 1, with_fd);
	if (msg_recv(pair[1], &h, payload, sizeof(payload), fds, PROTO_MAX_FDS,
		     &nfds, why, sizeof(why)) == 0 &&
	    h.type == PROTO_OPEN && h.length == sizeof(struct proto_open)) {
		struct proto_open m;
		struct stream_config c;

		memcpy(&m, payload, sizeof(m));
		/*
		 * What is accepted may be indexed by rank right away (a
		 * named stream's positions): it must be below the world.
		 */
		if (!openreq_config(&m, &c, &d) &&
		    c.rank >= (c.world ? c.world : 1))
			abort();
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	return 0;
}
