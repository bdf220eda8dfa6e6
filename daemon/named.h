/*
 * named.h - named streams: each rank's position in a job its client
 * named, kept in the state (state.h) so that a stream opened again under
 * that name resumes where it stopped.
 *
 * An OPEN of a name resolves it on the thread pool (named_resolve(): the
 * job's record read and checked against the dataset and options, and
 * where this rank starts: its saved position, the positions the OPEN
 * gives, or the rest of an earlier world's epochs), and records the job
 * once the stream is made (named_begin()). A saver thread then writes
 * the position as soon as the client releases a batch; the stream's
 * teardown stops it and writes the last one (named_write()). SAVED and
 * FORGET list and drop the records, and a sweep forgets those not
 * written for a while (named_expire()).
 *
 * Everything here that reads or writes the state runs off the loop
 * (LMDB may wait on the disk); sessions, limits and when to reply are
 * server.c's.
 */
#ifndef LD_NAMED_H
#define LD_NAMED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "openreq.h"
#include "order.h"
#include "proto.h"
#include "state.h"

struct producer;
struct stream;
struct stream_config;
struct stream_layout;

/*
 * A named stream's checkpoint: what identifies it and where it started.
 * It moves with the stream, from the OPEN to the session to the
 * teardown, which writes the final position.
 */
struct named {
	char name[PROTO_STREAM_NAME]; /* "" for a stream without a name */
	uint32_t uid, rank, world;
	uint64_t generation;  /* of the job's record (state.h) */
	uint32_t epochs;      /* the epoch it ends before; 0: endless */
	uint32_t start_epoch; /* where this stream started */
	uint64_t start_batch;
	struct order_sched sched; /* to count positions on from there */
	uint64_t written;	  /* batches released at the last checkpoint */
};

/* A named stream's saver thread (named_saver_start()). */
struct saver;

/*
 * What an OPEN of a name carries, from the loop to the thread pool and
 * back. The caller zeroes it and sets named.uid, fresh, go_on, given and
 * label on the loop; named_resolve() and named_begin() fill the rest.
 */
struct named_open {
	struct named named;
	bool fresh;	 /* PROTO_OPEN_FRESH: start the name over */
	bool go_on;	 /* PROTO_OPEN_GO_ON: each rank at its own position */
	bool resumed;	 /* from a saved or given position (OPEN_OK) */
	uint64_t mix_id; /* a mixture's counts (named.c); 0: one dataset */
	struct mixture_weights weights; /* the request's, of mix_id */
	const char *label; /* the session's, for logs: it outlives the OPEN */
	/* The job's record, as read, and whether this OPEN renews it. */
	struct state_job job;
	bool renew;
	uint32_t *from_epoch; /* the old world's positions (a new world) */
	uint64_t *from_batch;
	/* The session's POSITIONS, taken (all of them). */
	struct openreq_given given;
	struct saver *saver; /* made with the stream, for a named one */
};

/*
 * On the thread pool, for an OPEN of name with the dataset's files
 * fds[0..nfds - 1] and the request's config c: read the job's record
 * from st, check that it is this dataset with these options, and say in
 * c where this rank starts: its saved position, the job's start for a
 * rank with none, or (another world) the rest of the old world's epochs;
 * new or fresh, where the request says. Fills o->named and o->job; the
 * plan and old world's positions c is given stay o's (named_open_clear()).
 * Returns 0 or a negative code described in d (LOADER_EUSAGE without a
 * state, or for a record of another dataset or options; LOADER_EEND for
 * a name that has delivered all its epochs).
 */
int named_resolve(struct named_open *o, struct state *st, const char *name,
		  struct stream_config *c, const int *fds, uint32_t nfds,
		  struct diag *d);

/*
 * The stream s is made, starting at (start_epoch, start_batch), with
 * layout lay: record the job in st (renewed) and where this rank starts,
 * so that the name exists from now on, and keep in o->named what the
 * checkpoints need. A stream with nothing to deliver is not recorded:
 * o->named.name is emptied. Returns 0 or a negative code described in d.
 */
int named_begin(struct named_open *o, struct state *st, struct stream *s,
		uint32_t start_epoch, uint64_t start_batch,
		const struct stream_layout *lay, struct diag *d);

/*
 * Free what named_resolve() read or made (the job's record, the old
 * world's positions) and the POSITIONS taken; named, resumed and saver
 * stay.
 */
void named_open_clear(struct named_open *o);

/*
 * A plan's identity (XXH3-64 of its words, never 0) and one past the
 * last epoch it deals, into *end; 0 and 0 for none.
 */
uint64_t named_plan_id(const uint64_t *plan, size_t words, uint32_t *end);

/*
 * What a trainer keeps with its ranks' positions (OPEN_OK's plan and
 * plan_end): the identity of what only a loaderd that ran the job knows
 * of the epochs before *end. That is the plan of words (an elastic
 * resume's), and a change of job's mixture weights that waits for
 * job->counts_from (the earlier weights deal the epochs before it).
 * named_plan_id() of the plan where there is no such change.
 */
uint64_t named_job_plan(const struct state_job *job, const uint64_t *plan,
			size_t words, uint32_t *end);

/*
 * Write the position of named stream n after released batches to st
 * (into *out too, unless NULL); sync the file if that was not done for a
 * while: *synced_ms (CLOCK_MONOTONIC ms, read and written atomically) is
 * when it last was, shared by every writer of st. A failure is logged,
 * with label. Off the loop.
 */
void named_write(uint64_t *synced_ms, struct state *st, const struct named *n,
		 uint64_t released, const char *label, struct state_pos *out);

/*
 * Start n's saver on prod: a thread that writes the position (as
 * named_write() does, with synced_ms) as soon as the client releases a
 * batch, and then tells the client (producer_set_saved()). Returns it,
 * or NULL (then no saver). st and prod must outlive it.
 */
struct saver *named_saver_start(uint64_t *synced_ms, struct state *st,
				struct producer *prod, const struct named *n,
				const char *label);

/* Stop and free a saver (off the loop: it joins). NULL is a no-op. */
void named_saver_stop(struct saver *sv);

/*
 * A SAVED or FORGET request: checked on the loop (named_query_set()), run
 * on the thread pool (named_query_run()), answered from the loop
 * (named_query_reply(), or an ERROR of err and d).
 */
struct named_query {
	uint16_t type;		      /* PROTO_SAVED or PROTO_FORGET */
	uint32_t index;		      /* SAVED */
	uint32_t uid;		      /* FORGET: whose */
	bool all;		      /* SAVED: every uid's */
	char name[PROTO_STREAM_NAME]; /* FORGET */
	uint32_t seen;		      /* SAVED: records counted so far */
	struct proto_saved_ok ok;
	int err;
	struct diag d;
};

/*
 * q from message m of type (PROTO_SAVED: struct proto_saved; else
 * struct proto_forget) of a peer of uid: super (root or the daemon's own
 * uid) sees every uid's, and may forget another's. Returns 0, or
 * LOADER_EPROTO (malformed) or -EPERM with the reason in d.
 */
int named_query_set(struct named_query *q, uint16_t type, const void *m,
		    uint32_t uid, bool super, struct diag *d);

/* Run q against st, its result in q->err, q->d and q->ok. Off the loop. */
void named_query_run(struct named_query *q, struct state *st);

/*
 * Answer a query that succeeded on fd (SAVED_OK or FORGET_OK, seq), and
 * log a FORGET with label. A reply that cannot go is the peer's loss.
 */
void named_query_reply(const struct named_query *q, int fd, uint32_t seq,
		       const char *label);

/*
 * Forget the names in st not checkpointed for expire_ms, and log how
 * many (or why not). Off the loop.
 */
void named_expire(struct state *st, uint64_t expire_ms);

#endif /* LD_NAMED_H */
