/*
 * producer.h - the daemon's side of a stream's batch ring (client/ring.h):
 * the memfds, the ring header, and the sink (pipeline/stream/stream.h) through
 * which a stream's assembler fills and publishes slots.
 *
 * The client's consumer index is untrusted input: the producer checks it
 * on every read, and ends the stream with LOADER_EPROTO if it ever moves
 * backwards or past what was published.
 */
#ifndef LD_PRODUCER_H
#define LD_PRODUCER_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "proto.h"
#include "stream.h"

struct producer;

/* The most slots a ring may have. */
#define PRODUCER_MAX_SLOTS 1024

/*
 * May a ring be asked for slots: 0 (the default), or a power of two in
 * 2..PRODUCER_MAX_SLOTS, so that the free-running 32-bit indices map to
 * the same slot on both sides of their wrap?
 */
static inline bool producer_slots_ok(uint32_t slots)
{
	return slots != 1 && slots <= PRODUCER_MAX_SLOTS &&
	       !(slots & (slots - 1));
}

struct producer_params {
	const struct stream_layout *lay;
	uint32_t slots;	 /* a power of two in 2..1024; 0: default */
	uint32_t epochs; /* 0: endless; told to the client */
	uint32_t start_epoch;
	uint64_t max_bytes;	   /* refuse a larger ring */
	const char *max_bytes_why; /* what sets it, for the reason */
	const char *label;	   /* for logs; copied */
	bool named; /* the client waits for each release to be saved */
};

/*
 * Create the ring for batches of p->lay: two sealed memfds, mapped here
 * read-write, with the header written. Returns 0, LOADER_EUSAGE (slot
 * count), LOADER_ETOOBIG (above max_bytes) or -errno, described in d.
 */
int producer_new(struct producer **out, const struct producer_params *p,
		 struct diag *d);

/* The sink a stream hands its batches to; valid until producer_free(). */
const struct stream_sink *producer_sink(struct producer *pr);

/*
 * The OPEN_OK sizes, and the ring and consumer memfds to send with it.
 * The descriptors stay the producer's.
 */
void producer_reply(const struct producer *pr, struct proto_open_ok *ok,
		    int *ring_fd, int *cons_fd);

/*
 * Tell the client its stream ends with reason: after the batches already
 * published (and one the stream may still be finishing), loader_next()
 * returns LOADER_ESTREAM with that reason. For a daemon that stops.
 */
void producer_notice(struct producer *pr, const char *reason);

/*
 * Batches the client has released, as far as the daemon can trust it:
 * the consumer index if it is one the client could have reached (at most
 * what was published, at most a ring behind it), else the last such
 * value seen. For checkpoints of named streams: any thread, one at a
 * time (the loop while the session lives, then its teardown).
 */
uint64_t producer_released(struct producer *pr);

/*
 * A named stream's saver: sleep until the consumer index differs from
 * seen (or timeout_ns passes, or producer_wake_saver()); then, having
 * written the position, tell the client its releases up to released
 * are saved (ring.h, `saved`).
 */
void producer_wait_release(struct producer *pr, uint32_t seen,
			   int64_t timeout_ns);
void producer_wake_saver(struct producer *pr);
void producer_set_saved(struct producer *pr, uint64_t released);

/* Nanoseconds the stream waited for the client to free a slot. */
uint64_t producer_stall_ns(const struct producer *pr);

/*
 * Batches the client was asleep waiting for when they were published
 * (it had set client_waiting): the trainer waited for the loader.
 */
uint64_t producer_client_waits(const struct producer *pr);

/* The ring's slots, how many hold unreleased batches now, its bytes. */
void producer_ring(const struct producer *pr, uint32_t *slots, uint32_t *used,
		   uint64_t *bytes);

/* Unmap and close everything. Free the stream first. NULL is a no-op. */
void producer_free(struct producer *pr);

#endif /* LD_PRODUCER_H */
