/*
 * state.h - the daemon's persistent state in LMDB: named streams'
 * checkpoints, under the state directory.
 *
 * One environment, STATE_DIR/loaderd.mdb (a single file with its lock
 * file beside it), one database of named streams keyed by the owner's
 * uid and the name, so that one user can neither see nor resume
 * another's. A record holds what identifies the dataset and the options
 * that fix the order, and the position: the first batch not yet released.
 *
 * Durability: the environment is opened with MDB_NOSYNC. A commit is in
 * the page cache when state_put() returns, so a crash of the daemon (or
 * SIGKILL) loses nothing committed; the data reaches the disk at the
 * next state_sync() (the daemon calls it every second while there are
 * commits) or when the kernel writes it back, so a power failure can
 * lose the last second of checkpoints: those batches are delivered
 * again (at least once), never skipped. LMDB's copy-on-write B-tree
 * keeps the file readable whatever point a crash interrupts a commit at.
 *
 * A file LMDB refuses (not an LMDB file, another version, corrupt) is
 * moved aside, with a warning that names both paths, and a fresh one is
 * made: the daemon starts, the saved positions are lost (streams start
 * over, and say so), never the daemon.
 *
 * Every function may be called from any thread; LMDB serializes writers
 * itself. Functions return 0 or a negative code (-ENOENT for a name not
 * saved), with the reason in d where there is one.
 */
#ifndef LD_STATE_H
#define LD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* The longest stream name, in bytes, NUL excluded. */
#define STATE_NAME_MAX 63

/* One named stream's record. */
struct state_rec {
	uint64_t dataset_id; /* XXH3-64 of the dataset's manifest */
	uint64_t opts_id;    /* XXH3-64 of the options that fix the order */
	uint64_t batches_per_epoch;
	uint32_t epochs;      /* 0: endless */
	uint32_t epoch;	      /* of the first batch not yet released */
	uint64_t batch;	      /* its index within the epoch */
	uint64_t updated_ms;  /* wall clock of the last checkpoint */
	uint32_t rank, world; /* as last opened */
	bool finished;	      /* every batch of every epoch released */
};

struct state;

/*
 * Open (or create) dir/loaderd.mdb. Returns 0 or a negative code; a file
 * LMDB cannot read is moved aside first (see above), which is not an
 * error.
 */
int state_open(struct state **out, const char *dir, struct diag *d);

/* Sync and close. NULL is a no-op. */
void state_close(struct state *st);

/* The record of uid's stream name into *r; -ENOENT if there is none. */
int state_get(struct state *st, uint32_t uid, const char *name,
	      struct state_rec *r, struct diag *d);

/*
 * Write the record of uid's stream name (one committed transaction).
 * Unless force, a record already there whose position is further on
 * (a later epoch, or a later batch of the same) is kept: checkpoints
 * written out of order never move a stream back.
 */
int state_put(struct state *st, uint32_t uid, const char *name,
	      const struct state_rec *r, bool force, struct diag *d);

/* Drop uid's stream name; -ENOENT if there was none. */
int state_forget(struct state *st, uint32_t uid, const char *name,
		 struct diag *d);

/*
 * Call fn for each saved stream of uid (every uid when all), in key
 * order, until it returns non-zero. name is valid during the call.
 * Returns 0 or a negative code.
 */
typedef int state_each_fn(void *arg, uint32_t uid, const char *name,
			  const struct state_rec *r);
int state_each(struct state *st, uint32_t uid, bool all, state_each_fn *fn,
	       void *arg, struct diag *d);

/*
 * Drop every record not updated for max_age_ms (0: none); *dropped gets
 * how many. Returns 0 or a negative code.
 */
int state_expire(struct state *st, uint64_t now_ms, uint64_t max_age_ms,
		 uint64_t *dropped, struct diag *d);

/* Flush what was committed to the disk (fdatasync of the file). */
int state_sync(struct state *st);

/* The path of the environment's file (for logs). */
const char *state_path(const struct state *st);

#endif /* LD_STATE_H */
