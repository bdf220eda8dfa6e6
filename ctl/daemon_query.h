/*
 * daemon_query.h - a running loaderd's state over its control socket
 * (daemon_query.c).
 */
#ifndef LD_DAEMON_QUERY_H
#define LD_DAEMON_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* One reading: STATUS, then every stream it counts that we may see. */
struct daemon_reading {
	uint64_t t_ns; /* when it was taken (monotonic clock) */
	struct proto_status_ok st;
	uint32_t n;
	struct proto_stream_info_ok *s;
};

/*
 * The --socket entry of an option table (opts.h) whose field at offset
 * off is a const char *: the commands that talk to a running daemon.
 */
#define DAEMON_SOCKET_OPT(off)                                                                                                                      \
	{                                                                                                                                           \
		"socket", 's', OPT_STR, (off), NULL, "PATH",                                                                                        \
			"loaderd's socket (default: $LOADERD_SOCKET, else $XDG_RUNTIME_DIR/loaderd.sock if there, else /run/loaderd/loaderd.sock)", \
			0, 0, 0                                                                                                                     \
	}

/*
 * The socket as libloader finds it (client/sockpath.h, libloader(3)):
 * opt, else $LOADERD_SOCKET, else $XDG_RUNTIME_DIR/loaderd.sock when a
 * socket is there, else /run/loaderd/loaderd.sock. Returns buf, which
 * holds it.
 */
const char *daemon_socket_path(const char *opt, char *buf, size_t n);

/*
 * Connect to path and say HELLO. Returns the socket, or a negative code
 * with the reason (and the likely cause) in why.
 */
int daemon_dial(const char *path, uint32_t *seq, char *why, size_t whylen);

/* One request and its reply of type want (or the daemon's error, in why). */
int daemon_ask(int fd, uint32_t *seq, uint16_t type, const void *req,
	       uint32_t len, uint16_t want, void *reply, uint32_t cap,
	       char *why, size_t whylen);

/* Take a reading into r (its streams array reallocated). */
int daemon_read(int fd, uint32_t *seq, struct daemon_reading *r, char *why,
		size_t whylen);

/*
 * Print the daemon's saved named streams (a table, or with json a JSON
 * array) over fd; prog names the command in errors. Returns CTL_OK or
 * CTL_FAIL.
 */
int ctl_saved_list(int fd, uint32_t *seq, bool json, const char *prog);

/* Free r's streams. */
void daemon_reading_free(struct daemon_reading *r);

#endif /* LD_DAEMON_QUERY_H */
