/*
 * msg.h - one protocol message over the control socket, both directions.
 *
 * Shared by libloader and loaderd: it knows proto.h and the C library,
 * nothing else of ours. A message is one SOCK_SEQPACKET packet: a struct
 * proto_hdr, then `length` bytes of payload, with descriptors (if any) in
 * one or more SCM_RIGHTS control messages.
 *
 * Not thread-safe per socket: one sender and one receiver at a time.
 */
#ifndef LOADER_MSG_H
#define LOADER_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/*
 * Send one message of type `type` with request number `seq`: a header,
 * `len` bytes of payload (payload may be NULL when len is 0) and nfds
 * descriptors (at most PROTO_MAX_FDS). The descriptors stay the caller's:
 * the peer receives duplicates, so the caller closes its own afterwards.
 * Never raises SIGPIPE.
 *
 * Returns 0, -EINVAL (bad arguments, too many fds), -EMSGSIZE (the
 * message would exceed PROTO_MAX_MSG), or the -errno of sendmsg: -EPIPE
 * or -ECONNRESET when the peer went away, -EAGAIN on a non-blocking
 * socket that is full or when SO_SNDTIMEO expired.
 */
int msg_send(int fd, uint16_t type, uint32_t seq, const void *payload,
	     uint32_t len, const int *fds, unsigned nfds);

/*
 * Receive one message. The header goes to *h, the payload to `payload`
 * (room for cap bytes), and up to maxfds received descriptors (made
 * close-on-exec) to fds[0..*nfds-1], which then belong to the caller.
 * fds and nfds may be NULL when maxfds is 0; maxfds is at most
 * PROTO_MAX_FDS.
 *
 * Everything is checked before it is returned: a whole header, magic,
 * version, a known type, a declared length that equals the bytes that
 * came, fits cap, and is the type's length (proto_payload_size(); for
 * PROTO_ERROR a struct proto_error whose len, at most PROTO_REASON_MAX,
 * accounts for the rest), and no more descriptors than maxfds. The
 * request number is not checked: matching it is the caller's business.
 *
 * Returns 0; LOADER_EPROTO for a malformed message, with the reason in
 * why (whylen bytes, may be 0) and, when at least a header arrived, that
 * header in *h (zeroed otherwise) so that a server can still echo its seq
 * in its PROTO_ERROR answer (a 0-byte packet from a peer still there is
 * LOADER_EPROTO, "empty packet"); -EPIPE when the peer closed the
 * connection;
 * -EAGAIN on a non-blocking socket with nothing to read; or another
 * -errno from recvmsg. On every failure all received descriptors have
 * been closed and *nfds is 0.
 */
int msg_recv(int fd, struct proto_hdr *h, void *payload, uint32_t cap, int *fds,
	     unsigned maxfds, unsigned *nfds, char *why, size_t whylen);

/*
 * One request without descriptors and its reply, for tools that ask one
 * thing at a time (loaderctl status, test tools): send type with seq,
 * wait up to timeout_ms for the reply, which must be want with the same
 * seq; its payload goes to reply (cap bytes, its type's exact length).
 * Returns 0, or the daemon's code when it answered with an ERROR (its
 * reason in why), -ETIMEDOUT, LOADER_EPROTO (a reply out of place), or
 * what msg_send()/msg_recv() returned; why says what happened.
 */
int msg_request(int fd, uint16_t type, uint32_t seq, const void *req,
		uint32_t len, uint16_t want, void *reply, uint32_t cap,
		int timeout_ms, char *why, size_t whylen);

/* Name of a message type ("HELLO", "OPEN_OK", ...), or "?" if unknown. */
const char *msg_type_name(uint16_t type);

/*
 * Say why in why (whylen bytes, printf-style; whylen 0: nothing), and
 * return code: how the client's checks of messages, options and rings
 * report, into a caller's buffer.
 */
int msg_why(char *why, size_t whylen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif /* LOADER_MSG_H */
