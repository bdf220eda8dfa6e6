/*
 * server.h - loaderd's control socket and client sessions (libuv).
 *
 * The main thread runs a libuv loop. The listening socket and every
 * session socket are SOCK_SEQPACKET Unix sockets driven by uv_poll_t with
 * plain recvmsg/sendmsg, because descriptors travel with SCM_RIGHTS and
 * libuv's own pipes frame messages their own way. A session holds at most
 * one stream; closing the connection ends the stream and frees its memory.
 * Opening and freeing a stream run on libuv's thread pool (uv_queue_work):
 * the loop never waits on disk or on a stream's threads.
 */
#ifndef LD_SERVER_H
#define LD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "diag.h"

struct pool;

struct server_limits {
	uint64_t max_ring_bytes; /* per stream */
	uint64_t max_uid_bytes;	 /* ring bytes of all streams of one uid */
	uint32_t max_uid_streams;
	uint64_t max_uid_files;	   /* descriptors one uid's sessions may hold */
	uint32_t max_sessions;	   /* connections at once, all uids */
	uint32_t max_uid_sessions; /* connections of one uid at once */
	uint64_t max_pixels;	   /* largest image a pipeline decodes */
	bool direct;		   /* every stream reads with O_DIRECT */
	uint32_t io_depth;	   /* reads in flight per stream (1..64) */
	/*
	 * All streams' rings and prefetch budgets together (0: no limit):
	 * what the daemon's memory is bounded by, beside fixed scratch.
	 */
	uint64_t memory_budget;
	/*
	 * The node cache's budget (pipeline/stream/nodecache.h): records shared by
	 * every stream on the same files; 0: no cache.
	 */
	uint64_t cache_memory;
	/* One uid's streams' rings, prefetch and scratch together. */
	uint64_t max_uid_memory;
	/* Drop named streams not checkpointed for this long (0: never). */
	uint64_t stream_expiry_ms;
	/*
	 * The state one uid may hold (state.h): named streams, and bytes of
	 * records (streams' and tar indexes'); 0: no limit.
	 */
	uint32_t max_uid_names;
	uint64_t max_uid_state;
	/*
	 * OPENs of s3:// datasets stage on libuv's thread pool, and a stage
	 * waits on a store the client chose. At most max_uid_stages of one
	 * uid and max_stages of all uids (fewer than the pool's threads, so
	 * that local OPENs, teardowns and the state's work always find one)
	 * run at once; the others wait their turn off the pool. Each is
	 * answered within stage_timeout_ms of its arrival, its wait
	 * included: past it, it is refused with -ETIMEDOUT.
	 */
	uint32_t max_uid_stages;
	uint32_t max_stages;
	uint64_t stage_timeout_ms;
	/*
	 * The store endpoints an s3:// OPEN may name, as
	 * server_endpoints_check() accepts them; NULL or "": any. Copied by
	 * server_new() and server_set_limits().
	 */
	const char *s3_endpoints;
};

/* Where the server listens. */
struct server_listen {
	const char *path; /* the socket's path (for logs when inherited) */
	/*
	 * A listening SOCK_SEQPACKET socket to take (systemd's socket
	 * activation), or -1 to bind path: then mode is the socket file's
	 * mode and gid (unless -1) its group.
	 */
	int fd;
	unsigned mode;
	long gid;
};

/* What the daemon is doing, for its status line. */
struct server_status {
	uint32_t sessions;
	uint32_t streams;
	uint64_t batches;    /* published by the streams alive now */
	uint64_t bytes_read; /* from storage, by the streams alive now */
};

struct server;

/*
 * Listen as l says (a path: an existing socket file is replaced if no
 * daemon answers on it; a live daemon there is an error). Returns 0 or a
 * negative code described in d; on failure, what was already registered
 * with the loop is freed when the loop next runs. An inherited socket
 * is closed by server_free(), its path left to whoever made it.
 */
int server_new(struct server **out, uv_loop_t *loop,
	       const struct server_listen *l, struct pool *pool,
	       const struct server_limits *lim, struct diag *d);

/*
 * Is list a valid s3-endpoints value: entries HOST or HOST:PORT apart by
 * commas or blanks, HOST a host name, an IPv4 address or an IPv6 one in
 * brackets, with fnmatch(3) wildcards, PORT a number or "*"? Returns 0,
 * or LOADER_EUSAGE with the entry at fault in d.
 */
int server_endpoints_check(const char *list, struct diag *d);

/*
 * New limits, from now on: streams already open keep what they hold,
 * and a uid above a lowered limit gets no new stream until it is below.
 */
void server_set_limits(struct server *srv, const struct server_limits *lim);

/*
 * The persistent state (state.h) named streams are saved in; NULL (the
 * default) refuses them. It must outlive the server.
 */
struct state;
void server_set_state(struct server *srv, struct state *st);

/*
 * Log, once, that the socket file this daemon made is gone from its path
 * (removed, or replaced by another daemon's): called now and then.
 */
void server_check_socket(struct server *srv);

/*
 * Why there is no state (state_open()'s error and reason): named
 * streams and the saved-streams requests are refused with it, until
 * server_set_state() gives one.
 */
void server_state_failed(struct server *srv, int err, const char *why);

/*
 * The shard cache that s3:// datasets are staged in (pipeline/remote/s3cache.h);
 * NULL (the default) refuses them. It must outlive the server.
 */
struct s3cache;
void server_set_remote(struct server *srv, struct s3cache *rc);

/* The state and cache directories, as STATUS reports them. */
void server_set_dirs(struct server *srv, const char *state, const char *cache);

void server_status(const struct server *srv, struct server_status *st);

/*
 * Stop: end every session, close the listening socket and unlink the
 * path. Memory is freed later, on the loop, once the server's handles
 * have closed and the streams being opened or torn down on libuv's
 * thread pool are gone: run the loop until it returns (nothing of the
 * server is left on it then). NULL, or a second call, is a no-op.
 */
void server_free(struct server *srv);

#endif /* LD_SERVER_H */
