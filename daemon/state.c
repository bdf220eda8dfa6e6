/*
 * state.c - named streams' checkpoints in LMDB (see state.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "loader_error.h"
#include "plog.h"
#include "state.h"

/* Room for every checkpoint there will ever be: records are ~100 bytes. */
#define STATE_MAP_SIZE (64ull << 20)
#define STATE_FILE     "loaderd.mdb"

/* The record as stored: versioned, fixed size, little-endian host. */
#define STATE_REC_VERSION 1
struct state_disk {
	uint32_t version;
	uint32_t flags; /* STATE_FINISHED */
	uint64_t dataset_id, opts_id, batches_per_epoch;
	uint32_t epochs, epoch;
	uint64_t batch, updated_ms;
	uint32_t rank, world;
};
#define STATE_FINISHED 1u

struct state {
	MDB_env *env;
	MDB_dbi dbi;
	char path[4200];
};

/* uid and name as a key: "UID/NAME", no NUL. */
static int make_key(char *buf, size_t n, uint32_t uid, const char *name,
		    MDB_val *k, struct diag *d)
{
	size_t len = strlen(name);
	int w;

	if (!len || len > STATE_NAME_MAX || memchr(name, '/', len))
		return diag_set(d, LOADER_EUSAGE,
				"stream name \"%.80s\": 1 to %d bytes, no '/'",
				name, STATE_NAME_MAX);
	w = snprintf(buf, n, "%" PRIu32 "/%s", uid, name);
	k->mv_data = buf;
	k->mv_size = (size_t)w;
	return 0;
}

static int lmdb_err(int rc, const char *what, const struct state *st,
		    struct diag *d)
{
	int err = rc == ENOMEM || rc == MDB_MAP_FULL ? -ENOMEM : -EIO;

	if (rc > 0 && rc < 1000)
		err = -rc;
	return diag_set(d, err, "%s: %s: %s", st->path, what, mdb_strerror(rc));
}

/* Open the environment and its database; rc is LMDB's code. */
static int try_open(struct state *st, int *rc)
{
	MDB_txn *txn;

	*rc = mdb_env_create(&st->env);
	if (*rc)
		return -1;
	mdb_env_set_mapsize(st->env, STATE_MAP_SIZE);
	/*
	 * MDB_NOSYNC: a commit is written, not flushed (state.h says what a
	 * power failure can lose); MDB_NOSUBDIR: one file, not a directory;
	 * MDB_NOTLS: read transactions are not tied to threads, since the
	 * daemon's thread pool calls in from any of its threads.
	 */
	*rc = mdb_env_open(st->env, st->path,
			   MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOTLS, 0600);
	if (!*rc)
		*rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (!*rc) {
		*rc = mdb_dbi_open(txn, NULL, 0, &st->dbi);
		if (*rc)
			mdb_txn_abort(txn);
		else
			*rc = mdb_txn_commit(txn);
	}
	if (*rc) {
		mdb_env_close(st->env);
		st->env = NULL;
		return -1;
	}
	return 0;
}

int state_open(struct state **out, const char *dir, struct diag *d)
{
	struct state *st = calloc(1, sizeof(*st));
	char aside[4300], lock[4300];
	int rc;

	*out = NULL;
	if (!st)
		return diag_set(d, -ENOMEM, "no memory for the state");
	snprintf(st->path, sizeof(st->path), "%s/%s", dir, STATE_FILE);
	if (!try_open(st, &rc)) {
		*out = st;
		return 0;
	}
	if (rc != MDB_INVALID && rc != MDB_VERSION_MISMATCH &&
	    rc != MDB_CORRUPTED && rc != MDB_PAGE_NOTFOUND) {
		int err = lmdb_err(rc, "cannot open", st, d);

		free(st);
		return err;
	}
	/*
	 * Not a state file LMDB can read: keep it for whoever wants to look
	 * (and the lock file with it), and start afresh, loudly.
	 */
	snprintf(aside, sizeof(aside), "%s.bad-%lld", st->path,
		 (long long)time(NULL));
	snprintf(lock, sizeof(lock), "%s-lock", st->path);
	if (rename(st->path, aside)) {
		int err = diag_set(
			d, -errno,
			"%s: unreadable (%s) and cannot be moved aside: %s",
			st->path, mdb_strerror(rc), strerror(errno));

		free(st);
		return err;
	}
	unlink(lock);
	plog(PLOG_WARN,
	     "state: %s is unreadable (%s): moved aside to %s; saved stream positions are lost, named streams start over",
	     st->path, mdb_strerror(rc), aside);
	if (try_open(st, &rc)) {
		int err = lmdb_err(rc, "cannot create", st, d);

		free(st);
		return err;
	}
	*out = st;
	return 0;
}

void state_close(struct state *st)
{
	if (!st)
		return;
	if (st->env) {
		mdb_env_sync(st->env, 1);
		mdb_env_close(st->env);
	}
	free(st);
}

const char *state_path(const struct state *st)
{
	return st->path;
}

int state_sync(struct state *st)
{
	int rc = mdb_env_sync(st->env, 1);

	return rc ? -EIO : 0;
}

static void to_disk(const struct state_rec *r, struct state_disk *s)
{
	memset(s, 0, sizeof(*s));
	s->version = STATE_REC_VERSION;
	s->flags = r->finished ? STATE_FINISHED : 0;
	s->dataset_id = r->dataset_id;
	s->opts_id = r->opts_id;
	s->batches_per_epoch = r->batches_per_epoch;
	s->epochs = r->epochs;
	s->epoch = r->epoch;
	s->batch = r->batch;
	s->updated_ms = r->updated_ms;
	s->rank = r->rank;
	s->world = r->world;
}

/* A stored value into r; false for one this version cannot read. */
static bool from_disk(const MDB_val *v, struct state_rec *r)
{
	struct state_disk s;

	if (v->mv_size != sizeof(s))
		return false;
	memcpy(&s, v->mv_data, sizeof(s));
	if (s.version != STATE_REC_VERSION)
		return false;
	*r = (struct state_rec){
		.dataset_id = s.dataset_id,
		.opts_id = s.opts_id,
		.batches_per_epoch = s.batches_per_epoch,
		.epochs = s.epochs,
		.epoch = s.epoch,
		.batch = s.batch,
		.updated_ms = s.updated_ms,
		.rank = s.rank,
		.world = s.world,
		.finished = s.flags & STATE_FINISHED,
	};
	return true;
}

int state_get(struct state *st, uint32_t uid, const char *name,
	      struct state_rec *r, struct diag *d)
{
	char key[96];
	MDB_val k, v;
	MDB_txn *txn;
	int rc, err;

	err = make_key(key, sizeof(key), uid, name, &k, d);
	if (err)
		return err;
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_err(rc, "read", st, d);
	rc = mdb_get(txn, st->dbi, &k, &v);
	if (rc == MDB_NOTFOUND) {
		err = -ENOENT;
	} else if (rc) {
		err = lmdb_err(rc, "read", st, d);
	} else if (!from_disk(&v, r)) {
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: the record of stream \"%s\" is not one this loaderd reads (%zu bytes)",
			st->path, name, v.mv_size);
	}
	mdb_txn_abort(txn);
	return err;
}

/* Is a further on than b? */
static bool further(const struct state_rec *a, const struct state_rec *b)
{
	return a->epoch != b->epoch ? a->epoch > b->epoch : a->batch > b->batch;
}

int state_put(struct state *st, uint32_t uid, const char *name,
	      const struct state_rec *r, bool force, struct diag *d)
{
	struct state_disk s;
	struct state_rec old;
	char key[96];
	MDB_val k, v = { sizeof(s), &s }, cur;
	MDB_txn *txn;
	int rc, err;

	err = make_key(key, sizeof(key), uid, name, &k, d);
	if (err)
		return err;
	to_disk(r, &s);
	rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc, "write", st, d);
	if (!force && !mdb_get(txn, st->dbi, &k, &cur) &&
	    from_disk(&cur, &old) && old.dataset_id == r->dataset_id &&
	    old.opts_id == r->opts_id && further(&old, r)) {
		mdb_txn_abort(txn);
		return 0;
	}
	rc = mdb_put(txn, st->dbi, &k, &v, 0);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "write", st, d);
	}
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
}

int state_forget(struct state *st, uint32_t uid, const char *name,
		 struct diag *d)
{
	char key[96];
	MDB_val k;
	MDB_txn *txn;
	int rc, err;

	err = make_key(key, sizeof(key), uid, name, &k, d);
	if (err)
		return err;
	rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc, "write", st, d);
	rc = mdb_del(txn, st->dbi, &k, NULL);
	if (rc) {
		mdb_txn_abort(txn);
		return rc == MDB_NOTFOUND ? -ENOENT :
					    lmdb_err(rc, "delete", st, d);
	}
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
}

/* Split a key "UID/NAME" into uid and name (NUL-terminated in buf). */
static bool parse_key(const MDB_val *k, uint32_t *uid, char *buf, size_t n)
{
	const char *p = k->mv_data, *slash;
	unsigned long long u;
	char num[16];

	slash = memchr(p, '/', k->mv_size);
	if (!slash || slash == p || (size_t)(slash - p) >= sizeof(num) ||
	    k->mv_size - (size_t)(slash - p) - 1 >= n)
		return false;
	memcpy(num, p, (size_t)(slash - p));
	num[slash - p] = '\0';
	u = strtoull(num, NULL, 10);
	if (u > UINT32_MAX)
		return false;
	*uid = (uint32_t)u;
	memcpy(buf, slash + 1, k->mv_size - (size_t)(slash - p) - 1);
	buf[k->mv_size - (size_t)(slash - p) - 1] = '\0';
	return true;
}

int state_each(struct state *st, uint32_t uid, bool all, state_each_fn *fn,
	       void *arg, struct diag *d)
{
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	int rc, stop = 0;

	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_err(rc, "read", st, d);
	rc = mdb_cursor_open(txn, st->dbi, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "read", st, d);
	}
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc && !stop;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		char name[STATE_NAME_MAX + 1];
		struct state_rec r;
		uint32_t owner;

		if (!parse_key(&k, &owner, name, sizeof(name)) ||
		    !from_disk(&v, &r) || (!all && owner != uid))
			continue;
		stop = fn(arg, owner, name, &r);
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc && rc != MDB_NOTFOUND)
		return lmdb_err(rc, "read", st, d);
	return 0;
}

int state_expire(struct state *st, uint64_t now_ms, uint64_t max_age_ms,
		 uint64_t *dropped, struct diag *d)
{
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	*dropped = 0;
	if (!max_age_ms)
		return 0;
	rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc, "write", st, d);
	rc = mdb_cursor_open(txn, st->dbi, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "write", st, d);
	}
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct state_rec r;

		/* A record this version cannot read is kept, not judged. */
		if (!from_disk(&v, &r) || r.updated_ms + max_age_ms > now_ms)
			continue;
		rc = mdb_cursor_del(c, 0);
		if (rc)
			break;
		(*dropped)++;
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "expire", st, d);
	}
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
}
