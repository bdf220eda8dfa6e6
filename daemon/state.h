/*
 * state.h - the daemon's persistent state in LMDB: named streams'
 * checkpoints, under the state directory.
 *
 * One environment, STATE_DIR/loaderd.mdb (a single file with its lock
 * file beside it), one database of named streams keyed by the owner's
 * uid and the name, so that one user can neither see nor resume
 * another's: "UID/NAME" for the job (what identifies the dataset and the
 * options that fix the order, its world and plan), "UID/NAME" 0x01
 * "RANK" for each rank's position (the first batch not yet released),
 * which sort right after their job's key.
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
 * Quotas: what each uid holds (its names, and the bytes of its records:
 * jobs, positions and the pipeline's records it made) is counted in the
 * same transactions that change it, and a change that would take a uid
 * past state_set_limits() is refused with -EDQUOT and the reason, the
 * database unchanged: so that one user cannot fill the map, whose size
 * is fixed, and starve the others (loaderd(8), max-uid-names and
 * max-uid-state). A change that frees (forget, expiry, a smaller record)
 * is never refused. A file written by a loaderd that kept no such count
 * is counted when opened.
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
#include "mixture.h"

/* The longest stream name, in bytes, NUL excluded. */
#define STATE_NAME_MAX 63

/*
 * A named job: one record per name, and one position per rank. The
 * ranks of a job share its name, its dataset, its options and its world;
 * the job record changes only when a job starts, starts afresh or goes
 * on with another world (a new generation: the old positions go with the
 * old record, in the same transaction).
 */
struct state_job {
	uint64_t dataset_id; /* XXH3-64 of the dataset's manifest */
	uint64_t opts_id;    /* XXH3-64 of the options that fix the order */
	uint64_t generation; /* 1, 2, ...: which positions are this job's */
	uint64_t batches_per_epoch;
	uint32_t world;
	uint32_t epochs; /* the epoch the job ends before; 0: endless */
	/* Where a rank with no position of this generation begins. */
	uint32_t start_epoch;
	uint64_t start_batch;
	uint64_t updated_ms; /* wall clock of the record's last change */
	/* Elastic resume (order.h): the plan, or NULL and 0. */
	uint64_t *plan;
	size_t plan_words;
	/*
	 * A job that went on from positions given with the OPEN: their
	 * digest (so that its other ranks, given the same, join it); else 0.
	 */
	uint64_t from_id;
	/*
	 * A mixture's members' counts (what each gives an epoch; named.c),
	 * which may change between epochs; 0 for one dataset.
	 */
	uint64_t mix_id;
	/*
	 * The weights mix_id is of (weights.n 0: not kept, in a record
	 * written before version 5 or of one dataset). Counts that changed
	 * part-way through an epoch take effect from counts_from: the
	 * epochs before it are dealt with the earlier weights `before`, in
	 * before_batches batches (0: no change pending).
	 * batches_per_epoch is then that of the epochs from counts_from.
	 */
	struct mixture_weights weights;
	uint32_t counts_from;
	uint64_t before_batches;
	struct mixture_weights before;
};

/* Do two weights ask the same of the same members? */
bool state_weights_equal(const struct mixture_weights *a,
			 const struct mixture_weights *b);

/* One rank's position: its first batch not yet released. */
struct state_pos {
	uint64_t generation; /* of the job it belongs to */
	uint32_t epoch;
	uint64_t batch; /* its index within the epoch */
	uint64_t updated_ms;
	bool finished; /* every batch of every epoch released */
};

struct state;

/*
 * Open (or create) dir/loaderd.mdb. Returns 0 or a negative code; a file
 * LMDB cannot read is moved aside first (see above), which is not an
 * error.
 */
int state_open(struct state **out, const char *dir, struct diag *d);

/*
 * Take dir's lock (dir/loaderd.lock, flock()ed, with this process's pid
 * in it) for as long as *fd stays open: one daemon per state directory,
 * or two would serve the same named stream's rank at once. -EBUSY when
 * another process holds it, d naming the file and the pid written there;
 * another negative code when it cannot be taken.
 */
int state_lock(const char *dir, int *fd, struct diag *d);

/* Sync and close. NULL is a no-op. */
void state_close(struct state *st);

/*
 * From now on, at most max_names named streams and max_bytes bytes of
 * records per uid (0: no limit; the default). A uid already past a
 * lowered limit keeps what it has, and may only shrink it.
 */
void state_set_limits(struct state *st, uint32_t max_names, uint64_t max_bytes);

/* What uid holds: its named streams and the bytes of its records. */
int state_use(struct state *st, uint32_t uid, uint32_t *names, uint64_t *bytes,
	      struct diag *d);

/*
 * The record of uid's job name into *j (j->plan malloc'd: give it back
 * with state_job_clear()) and, unless pos is NULL, the positions of its
 * ranks 0 .. j->world - 1 into *pos (malloc'd, j->world of them; a rank
 * with no position of the job's generation has generation 0 there),
 * read together. -ENOENT if there is none, LOADER_EFORMAT for one this
 * version cannot read.
 */
int state_get_job(struct state *st, uint32_t uid, const char *name,
		  struct state_job *j, struct state_pos **pos, struct diag *d);

/* Free what state_get_job() gave j (its plan). */
void state_job_clear(struct state_job *j);

/*
 * The position of rank of uid's job name into *p; -ENOENT if there is
 * none of generation gen (there is none, or an older job's).
 */
int state_get_pos(struct state *st, uint32_t uid, const char *name,
		  uint32_t rank, uint64_t gen, struct state_pos *p,
		  struct diag *d);

/*
 * A rank of job name begins (one committed transaction), at *p:
 * - renew: the job record becomes *j, of a new generation (one past
 *   the record's there, or 1), and the positions of the old one go;
 *   unless the record there already equals *j (same world, plan and
 *   start: another rank of this job renewed it), which is then kept;
 * - else the record must be of generation j->generation still, and
 *   only the rank's position is written (over any).
 * j->generation is what the caller read (0: no record). If the record
 * changed since (another rank of the same job began first), a renewing
 * rank whose *j equals the new record (same world, plan and start) joins
 * that generation; otherwise -EAGAIN, with the reason in d. On success
 * *gen is the generation the rank's positions are of.
 */
int state_begin(struct state *st, uint32_t uid, const char *name,
		const struct state_job *j, bool renew, uint32_t rank,
		const struct state_pos *p, uint64_t *gen, struct diag *d);

/*
 * Write rank's position of uid's job name (one committed transaction).
 * A position already there that is further on (a later epoch, or a
 * later batch of the same) is kept: checkpoints written out of order
 * never move a stream back. A position of a generation the job no
 * longer has is dropped: -ESTALE.
 */
int state_put_pos(struct state *st, uint32_t uid, const char *name,
		  uint32_t rank, const struct state_pos *p, struct diag *d);

/* Drop uid's job name and its positions; -ENOENT if there was none. */
int state_forget(struct state *st, uint32_t uid, const char *name,
		 struct diag *d);

/*
 * Call fn for each position of each job of uid (every uid when all), in
 * key order, until it returns non-zero; name, j and p are valid during
 * the call (j->plan is NULL there). Returns 0 or a negative code.
 */
typedef int state_each_fn(void *arg, uint32_t uid, const char *name,
			  const struct state_job *j, uint32_t rank,
			  const struct state_pos *p);
int state_each(struct state *st, uint32_t uid, bool all, state_each_fn *fn,
	       void *arg, struct diag *d);

/*
 * Drop every job of which nothing (record or position) was written for
 * max_age_ms (0: none), and every blob as old; *dropped gets how many.
 * Returns 0 or a negative code.
 */
int state_expire(struct state *st, uint64_t now_ms, uint64_t max_age_ms,
		 uint64_t *dropped, struct diag *d);

/* Flush what was committed to the disk (fdatasync of the file). */
int state_sync(struct state *st);

/*
 * Opaque records of the pipeline's (a tar's index, wds.h), uid's under
 * keys of kind/ID: stored apart from named streams (a key no name can
 * have), never listed with them, charged to uid, and expired by
 * state_expire() when now_ms, the time state_put_blob() was given, is
 * as old as a job would be. state_get_blob() gives a copy the caller
 * frees, or -ENOENT (never another uid's); state_put_blob() replaces
 * what was there, or refuses with -EDQUOT past uid's limit.
 */
int state_get_blob(struct state *st, uint32_t uid, const char *kind,
		   const char *id, void **val, size_t *len, struct diag *d);
int state_put_blob(struct state *st, uint32_t uid, const char *kind,
		   const char *id, const void *val, size_t len, uint64_t now_ms,
		   struct diag *d);

/* The path of the environment's file (for logs). */
const char *state_path(const struct state *st);

#endif /* LD_STATE_H */
