/*
 * stream.h - one client stream: read, decode and deliver batches into a
 * shared-memory ring (client/ring.h).
 *
 * A stream owns the dataset's file descriptors (received from the client),
 * its ring memfds and two threads:
 *  - the reader walks the order (order.h) ahead of the consumer, within
 *    the prefetch byte budget: for each batch it merges adjacent records
 *    into extents and reads them with io_uring into a circular arena;
 *  - the assembler takes read batches in order, waits for a free ring
 *    slot, has the shared worker pool (pool.h) decode every sample straight
 *    into its place in the slot, and publishes the slot.
 * Memory is bounded by prefetch budget + ring + fixed per-worker scratch,
 * all allocated when the stream is created.
 */
#ifndef LD_STREAM_H
#define LD_STREAM_H

#include <stdint.h>

#include "diag.h"
#include "proto.h"

struct pool;
struct stream;

struct stream_params {
	const struct proto_open *open; /* validated here */
	int *fds; /* manifest, then shards; the stream takes them */
	uint32_t nfds;
	struct pool *pool;
	uint64_t max_ring_bytes; /* refuse larger rings */
	uint64_t max_pixels;	 /* of a JPEG; 0: JROI_DEFAULT_MAX_PIXELS */
	const char *label;	 /* for logs, e.g. "uid 1000 pid 42" */
};

/*
 * Create a stream: parse the manifest, open and check every shard, build
 * the order and the ring. On success the stream owns params->fds; on
 * failure they are closed too. Errors (LOADER_EUSAGE for bad options,
 * shard format errors, -ENOMEM) are described in d.
 */
int stream_new(struct stream **out, const struct stream_params *p,
	       struct diag *d);

/* The ring's memfds (to send to the client) and the reply's sizes. */
void stream_reply(const struct stream *s, struct proto_open_ok *ok,
		  int *ring_fd, int *cons_fd);

/* Start the reader and assembler threads. */
int stream_start(struct stream *s, struct diag *d);

/* Stop the threads (if started) and free everything. NULL is a no-op. */
void stream_free(struct stream *s);

/* Counters for PROTO_STATS. */
void stream_stats(const struct stream *s, struct proto_stats_ok *st);

#endif /* LD_STREAM_H */
