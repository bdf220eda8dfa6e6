/*
 * daemon_query.c - a running loaderd's state, asked over its control
 * socket (STATUS, STREAM_INFO): what loaderctl status and stats show, and
 * what loaderctl bench pipeline --socket reads of its own stream.
 *
 * loaderctl speaks the protocol as the daemon does, through the client's
 * protocol headers (client/proto.h, client/msg.h): the arrow from ctl/
 * into client/ that DESIGN's layers allow for this.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "daemon_query.h"
#include "loader_error.h"
#include "msg.h"
#include "sockpath.h"

#define DAEMON_TIMEOUT_MS  5000
#define DAEMON_MAX_STREAMS 4096

/*
 * The per-user socket daemon_socket_path() looked for and did not find,
 * for daemon_dial()'s error (loaderctl asks one daemon per run).
 */
static char skipped[108];

/* The socket as libloader finds it (sockpath.h). */
const char *daemon_socket_path(const char *opt, char *buf, size_t n)
{
	sockpath_find(opt, buf, n, skipped, sizeof(skipped));
	return buf;
}

/* One request and its reply (or the daemon's error, in why). */
int daemon_ask(int fd, uint32_t *seq, uint16_t type, const void *req,
	       uint32_t len, uint16_t want, void *reply, uint32_t cap,
	       char *why, size_t whylen)
{
	return msg_request(fd, type, ++*seq, req, len, want, reply, cap,
			   DAEMON_TIMEOUT_MS, why, whylen);
}

int daemon_dial(const char *path, uint32_t *seq, char *why, size_t whylen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct proto_hello hello = { .version = PROTO_VERSION };
	struct proto_hello_ok ok;
	int fd, err;

	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(why, whylen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return -errno;
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		err = -errno;
		if (err == -ENOENT || err == -ECONNREFUSED)
			snprintf(why, whylen,
				 "connect %s: %s (is loaderd running?%s%s%s)",
				 path, strerror(-err),
				 skipped[0] ? " and no socket at " : "",
				 skipped, skipped[0] ? " either" : "");
		else
			snprintf(why, whylen, "connect %s: %s", path,
				 strerror(-err));
		close(fd);
		return err;
	}
	err = daemon_ask(fd, seq, PROTO_HELLO, &hello, sizeof(hello),
			 PROTO_HELLO_OK, &ok, sizeof(ok), why, whylen);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

/* One reading: STATUS, then every stream it counts. */
int daemon_read(int fd, uint32_t *seq, struct daemon_reading *r, char *why,
		size_t whylen)
{
	int err;

	r->t_ns = clock_mono_ns();
	err = daemon_ask(fd, seq, PROTO_STATUS, NULL, 0, PROTO_STATUS_OK,
			 &r->st, sizeof(r->st), why, whylen);
	if (err)
		return err;
	r->n = r->st.streams < DAEMON_MAX_STREAMS ? r->st.streams :
						    DAEMON_MAX_STREAMS;
	free(r->s);
	r->s = calloc(r->n ? r->n : 1, sizeof(*r->s));
	if (!r->s)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->n; i++) {
		struct proto_stream_info q = { .index = i };

		err = daemon_ask(fd, seq, PROTO_STREAM_INFO, &q, sizeof(q),
				 PROTO_STREAM_INFO_OK, &r->s[i],
				 sizeof(r->s[i]), why, whylen);
		/* A stream that ended meanwhile shortens the list. */
		if (err == LOADER_ERANGE) {
			r->n = i;
			return 0;
		}
		if (err)
			return err;
		r->s[i].dataset[PROTO_INFO_TEXT - 1] = '\0';
		r->s[i].pipeline[PROTO_INFO_TEXT - 1] = '\0';
	}
	return 0;
}

void daemon_reading_free(struct daemon_reading *r)
{
	free(r->s);
	r->s = NULL;
	r->n = 0;
}
