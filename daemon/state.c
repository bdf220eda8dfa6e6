/*
 * state.c - named streams' checkpoints in LMDB (see state.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>

#include <lmdb.h>

#include "loader_error.h"
#include "plog.h"
#include "state.h"

/* Room for every checkpoint there will ever be: records are ~100 bytes. */
#define STATE_MAP_SIZE (4ull << 30) /* virtual: the file grows as used */
#define STATE_FILE     "loaderd.mdb"
/*
 * The lock file's blocks, allocated before LMDB maps it: more than its
 * table for LMDB's 126 readers (8 KiB), which then makes room for more.
 */
#define STATE_LOCK_BYTES (64u << 10)

/*
 * The records as stored: versioned, little-endian host. A job's record
 * is followed by its plan's words.
 */
#define STATE_REC_VERSION 2
/*
 * A job's record: 3 added from_id, 4 mix_id, 5 the weights (a 2 reads as
 * from_id 0, a 2 or 3 as mix_id 0, a 4 as no weights kept). The plan's
 * words follow, then (since 5) the weights and the earlier weights, as
 * weights_disk each: nweights and nbefore members.
 */
#define STATE_JOB_VERSION 5
struct job_disk {
	uint32_t version;
	uint32_t world;
	uint64_t dataset_id, opts_id, generation, batches_per_epoch;
	uint32_t epochs, start_epoch;
	uint64_t start_batch, updated_ms;
	uint64_t plan_words;
	uint64_t from_id; /* since 3 */
	uint64_t mix_id;  /* since 4 */
	/* since 5 */
	uint32_t counts_from;
	uint16_t nweights, nbefore;
	uint64_t before_batches;
};
#define JOB_DISK_2 offsetof(struct job_disk, from_id)
#define JOB_DISK_3 offsetof(struct job_disk, mix_id)
#define JOB_DISK_4 offsetof(struct job_disk, counts_from)

/* Weights as stored: the epoch size, then each member's how and value. */
struct weight_disk {
	uint32_t how, pad;
	double value;
};
#define WEIGHTS_DISK(n)                                                        \
	((n) ? sizeof(uint64_t) + (n) * sizeof(struct weight_disk) : 0)

struct pos_disk {
	uint32_t version;
	uint32_t flags; /* STATE_FINISHED */
	uint64_t generation;
	uint32_t epoch, pad;
	uint64_t batch, updated_ms;
};
#define STATE_FINISHED 1u

/* The separator of a position's key: below every byte of a name. */
#define STATE_POS_SEP '\x01'

/* Plans are small; a record claiming more is not one of ours. */
#define STATE_PLAN_MAX_WORDS (8u << 20)

/*
 * What each uid holds, kept in the database beside what it counts and
 * changed in the same transactions ("\0use/UID"): its names (job
 * records) and the bytes of its records, keys and values (jobs,
 * positions, and the pipeline's records it made). "\0use" alone says
 * every uid's use has been counted: a file of an older loaderd, which
 * has no such records, is counted once when opened.
 */
#define STATE_USE_VERSION 1
struct use_disk {
	uint32_t version;
	uint32_t names;
	uint64_t bytes;
};
#define USE_KIND "use"

/* A blob's value: when it was written, then the caller's bytes. */
struct blob_head {
	uint64_t updated_ms;
};

/* A transaction's change to one uid's use. */
struct delta {
	int64_t names, bytes;
};

struct state {
	MDB_env *env;
	MDB_dbi dbi;
	/* state_set_limits(), read by any thread (0: none). */
	uint32_t max_names;
	uint64_t max_bytes;
	char path[4200];
};

/* The key of a job ("UID/NAME") and of its rank's position. */
struct key {
	char buf[96];
	MDB_val job, pos;
};

static int make_key(struct key *k, uint32_t uid, const char *name,
		    uint32_t rank, struct diag *d)
{
	size_t len = strlen(name);
	int w;

	if (!len || len > STATE_NAME_MAX || memchr(name, '/', len))
		goto bad;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20)
			goto bad;
	w = snprintf(k->buf, sizeof(k->buf), "%" PRIu32 "/%s", uid, name);
	k->job = (MDB_val){ (size_t)w, k->buf };
	w += snprintf(k->buf + w, sizeof(k->buf) - (size_t)w, "%c%" PRIu32,
		      STATE_POS_SEP, rank);
	k->pos = (MDB_val){ (size_t)w, k->buf };
	return 0;
bad:
	return diag_set(
		d, LOADER_EUSAGE,
		"stream name \"%.80s\": 1 to %d bytes, no '/' or control characters",
		name, STATE_NAME_MAX);
}

static int lmdb_err(int rc, const char *what, const struct state *st,
		    struct diag *d)
{
	int err = rc == ENOMEM || rc == MDB_MAP_FULL ? -ENOMEM : -EIO;

	if (rc > 0 && rc < 1000)
		err = -rc;
	if (rc == MDB_MAP_FULL)
		return diag_set(
			d, err,
			"%s: %s: the state file is full (%llu bytes, every uid's named streams and indexes together): forget named streams (loaderctl forget), or wait for them to expire",
			st->path, what, STATE_MAP_SIZE);
	return diag_set(d, err, "%s: %s: %s", st->path, what, mdb_strerror(rc));
}

/* The key of uid's use, "\0use/UID", in buf; "\0use" for the marker. */
static MDB_val use_key(char *buf, size_t n, const uint32_t *uid)
{
	int len = uid ? snprintf(buf + 1, n - 1, USE_KIND "/%" PRIu32, *uid) :
			snprintf(buf + 1, n - 1, USE_KIND);

	buf[0] = '\0';
	return (MDB_val){ (size_t)len + 1, buf };
}

/*
 * The uid a record is charged to: a stream's "UID/NAME..." or a blob's
 * "\0KIND/UID/ID". False for a record charged to none: the use records
 * and the marker, and blobs of an older loaderd (keyed without a uid).
 */
static bool rec_uid(const MDB_val *k, uint32_t *uid)
{
	const char *p = k->mv_data, *end = p + k->mv_size, *q;
	unsigned long long u = 0;

	if (!k->mv_size)
		return false;
	if (p[0] == '\0') {
		q = memchr(p + 1, '/', k->mv_size - 1);
		if (!q || ((size_t)(q - p - 1) == strlen(USE_KIND) &&
			   !memcmp(p + 1, USE_KIND, strlen(USE_KIND))))
			return false;
		p = q + 1;
	}
	for (q = p; q < end && q - p < 10 && *q >= '0' && *q <= '9'; q++)
		u = u * 10 + (unsigned)(*q - '0');
	if (q == p || q == end || *q != '/' || u > UINT32_MAX)
		return false;
	*uid = (uint32_t)u;
	return true;
}

/*
 * Apply dl to uid's use in txn, refusing growth beyond the limits: 0, an
 * LMDB code, or -EDQUOT with the reason in d (what: the record it is
 * for, in words).
 */
static int charge(MDB_txn *txn, const struct state *st, uint32_t uid,
		  const struct delta *dl, const char *what, struct diag *d)
{
	uint32_t max_names = __atomic_load_n(&st->max_names, __ATOMIC_RELAXED);
	uint64_t max_bytes = __atomic_load_n(&st->max_bytes, __ATOMIC_RELAXED);
	struct use_disk u = { 0 };
	char buf[32];
	MDB_val k = use_key(buf, sizeof(buf), &uid), v;
	int64_t names, bytes;
	int rc;

	if (!dl->names && !dl->bytes)
		return 0;
	rc = mdb_get(txn, st->dbi, &k, &v);
	if (!rc && v.mv_size == sizeof(u))
		memcpy(&u, v.mv_data, sizeof(u));
	else if (rc && rc != MDB_NOTFOUND)
		return rc;
	if (dl->names > 0 && max_names && u.names + dl->names > max_names)
		return diag_set(
			d, -EDQUOT,
			"%s: uid %" PRIu32 " holds %" PRIu32
			" named streams, as many as max-uid-names (%" PRIu32
			") allows: forget one (loaderctl forget NAME)",
			what, uid, u.names, max_names);
	if (dl->bytes > 0 && max_bytes &&
	    u.bytes + (uint64_t)dl->bytes > max_bytes)
		return diag_set(
			d, -EDQUOT,
			"%s: needs %" PRId64 " bytes of state, and uid %" PRIu32
			" holds %" PRIu64 " of the %" PRIu64
			" max-uid-state allows: forget named streams (loaderctl forget)",
			what, dl->bytes, uid, u.bytes, max_bytes);
	names = (int64_t)u.names + dl->names;
	bytes = (int64_t)u.bytes + dl->bytes;
	u = (struct use_disk){ .version = STATE_USE_VERSION,
			       .names = names > 0 ? (uint32_t)names : 0,
			       .bytes = bytes > 0 ? (uint64_t)bytes : 0 };
	if (!u.names && !u.bytes) {
		rc = mdb_del(txn, st->dbi, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	v = (MDB_val){ sizeof(u), &u };
	return mdb_put(txn, st->dbi, &k, &v, 0);
}

/*
 * Put k = v (flags: mdb_put()'s), counting in dl the change of size, and
 * a name when name and k is new.
 */
static int put_rec(MDB_txn *txn, const struct state *st, MDB_val *k, MDB_val *v,
		   unsigned flags, bool name, struct delta *dl)
{
	MDB_val old;
	int rc = mdb_get(txn, st->dbi, k, &old);

	if (rc == MDB_NOTFOUND) {
		dl->bytes += (int64_t)k->mv_size;
		dl->names += name;
	} else if (rc) {
		return rc;
	} else {
		dl->bytes -= (int64_t)old.mv_size;
	}
	dl->bytes += (int64_t)v->mv_size;
	return mdb_put(txn, st->dbi, k, v, flags);
}

/* Delete k, counting it (and a name when name) in dl. */
static int del_rec(MDB_txn *txn, const struct state *st, MDB_val *k, bool name,
		   struct delta *dl)
{
	MDB_val v;
	int rc = mdb_get(txn, st->dbi, k, &v);

	if (rc)
		return rc;
	dl->bytes -= (int64_t)(k->mv_size + v.mv_size);
	dl->names -= name;
	return mdb_del(txn, st->dbi, k, NULL);
}

/* What one uid holds, while recount() counts. */
struct tally {
	uint32_t uid, names;
	uint64_t bytes;
};

static struct tally *tally_of(struct tally **t, size_t *n, size_t *cap,
			      uint32_t uid)
{
	for (size_t i = *n; i-- > 0;)
		if ((*t)[i].uid == uid)
			return &(*t)[i];
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct tally *g = realloc(*t, c * sizeof(**t));

		if (!g)
			return NULL;
		*t = g;
		*cap = c;
	}
	(*t)[*n] = (struct tally){ .uid = uid };
	return &(*t)[(*n)++];
}

/*
 * Count what each uid holds, once for a file that has not been (one
 * written by an older loaderd): one transaction that writes every use
 * record and the marker, and drops the blobs no uid owns.
 */
static int recount(struct state *st, struct diag *d)
{
	struct tally *t = NULL, *u;
	size_t n = 0, cap = 0, dropped = 0;
	char buf[32];
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k = use_key(buf, sizeof(buf), NULL), v;
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);

	if (rc)
		return lmdb_err(rc, "write", st, d);
	rc = mdb_get(txn, st->dbi, &k, &v);
	if (!rc || rc != MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		return rc ? lmdb_err(rc, "read", st, d) : 0;
	}
	rc = mdb_cursor_open(txn, st->dbi, &c);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "read", st, d);
	}
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		const char *p = k.mv_data;
		uint32_t uid;

		if (!rec_uid(&k, &uid)) {
			/*
			 * Use records are counted afresh; another blob is an
			 * older loaderd's, under a key no uid owns: dropped,
			 * which costs its tar one scan.
			 */
			if (k.mv_size && !p[0]) {
				rc = mdb_cursor_del(c, 0);
				if (rc)
					break;
				dropped++;
			}
			continue;
		}
		u = tally_of(&t, &n, &cap, uid);
		if (!u) {
			rc = ENOMEM;
			break;
		}
		u->bytes += k.mv_size + v.mv_size;
		u->names += p[0] && !memchr(p, STATE_POS_SEP, k.mv_size);
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		struct use_disk s = { STATE_USE_VERSION, t[i].names,
				      t[i].bytes };

		k = use_key(buf, sizeof(buf), &t[i].uid);
		v = (MDB_val){ sizeof(s), &s };
		rc = mdb_put(txn, st->dbi, &k, &v, 0);
	}
	free(t);
	if (!rc) {
		uint32_t ver = STATE_USE_VERSION;

		k = use_key(buf, sizeof(buf), NULL);
		v = (MDB_val){ sizeof(ver), &ver };
		rc = mdb_put(txn, st->dbi, &k, &v, 0);
	}
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "count each uid's use", st, d);
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		return lmdb_err(rc, "commit", st, d);
	if (n || dropped)
		plog(PLOG_INFO,
		     "state: %s: counted what %zu uids hold; %zu index records of an older loaderd dropped",
		     st->path, n, dropped);
	return 0;
}

void state_set_limits(struct state *st, uint32_t max_names, uint64_t max_bytes)
{
	__atomic_store_n(&st->max_names, max_names, __ATOMIC_RELAXED);
	__atomic_store_n(&st->max_bytes, max_bytes, __ATOMIC_RELAXED);
}

int state_use(struct state *st, uint32_t uid, uint32_t *names, uint64_t *bytes,
	      struct diag *d)
{
	struct use_disk u = { 0 };
	char buf[32];
	MDB_val k = use_key(buf, sizeof(buf), &uid), v;
	MDB_txn *txn;
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);

	if (rc)
		return lmdb_err(rc, "read", st, d);
	rc = mdb_get(txn, st->dbi, &k, &v);
	if (!rc && v.mv_size == sizeof(u))
		memcpy(&u, v.mv_data, sizeof(u));
	mdb_txn_abort(txn);
	if (rc && rc != MDB_NOTFOUND)
		return lmdb_err(rc, "read", st, d);
	*names = u.names;
	*bytes = u.bytes;
	return 0;
}

/*
 * LMDB writes its lock file through a shared mapping, so on a full
 * filesystem its first store to a block not yet allocated is SIGBUS,
 * not an error, and the file it leaves makes every later start fault
 * the same way. Allocate the blocks first: a full disk is then ENOSPC
 * here, named, and the daemon serves on without named streams. (The
 * data file LMDB writes with pwrite(), which fails cleanly.)
 */
static int lock_room(const struct state *st, struct diag *d)
{
	char lock[4300];
	int fd, err;

	snprintf(lock, sizeof(lock), "%s-lock", st->path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return diag_set(d, -errno, "%s: %s", lock, strerror(errno));
	err = posix_fallocate(fd, 0, STATE_LOCK_BYTES);
	close(fd);
	if (err)
		return diag_set(d, -err, "%s: cannot allocate its %u bytes: %s",
				lock, STATE_LOCK_BYTES, strerror(err));
	return 0;
}

int state_lock(const char *dir, int *fd, struct diag *d)
{
	char path[4200], pid[32] = "";
	ssize_t n;
	int len;

	snprintf(path, sizeof(path), "%s/loaderd.lock", dir);
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (*fd < 0)
		return diag_set(d, -errno, "%s: %s", path, strerror(errno));
	if (flock(*fd, LOCK_EX | LOCK_NB)) {
		int err = -errno;

		n = pread(*fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, " \n")] = '\0';
		close(*fd);
		*fd = -1;
		if (err == -EWOULDBLOCK)
			return diag_set(
				d, -EBUSY,
				"%s: held by loaderd pid %s: another daemon uses this state directory (give each its own --state-dir)",
				path, pid[0] ? pid : "(unknown)");
		return diag_set(d, err, "%s: flock: %s", path, strerror(-err));
	}
	/*
	 * Always the same length, written over the last holder's: a file
	 * that held a pid needs no new block (a full disk lets it be).
	 */
	len = snprintf(pid, sizeof(pid), "%-20ld\n", (long)getpid());
	if (pwrite(*fd, pid, (size_t)len, 0) != len || ftruncate(*fd, len)) {
		int err = diag_set(d, -errno, "%s: %s", path, strerror(errno));

		close(*fd);
		*fd = -1;
		return err;
	}
	return 0;
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
	rc = lock_room(st, d);
	if (rc) {
		free(st);
		return rc;
	}
	if (!try_open(st, &rc))
		goto counted;
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
	rc = lock_room(st, d);
	if (rc) {
		free(st);
		return rc;
	}
	if (try_open(st, &rc)) {
		int err = lmdb_err(rc, "cannot create", st, d);

		free(st);
		return err;
	}
counted:
	rc = recount(st, d);
	if (rc) {
		state_close(st);
		return rc;
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

/* The keys of uid's name (and rank's position), and a transaction. */
static int txn_open(struct state *st, uint32_t uid, const char *name,
		    uint32_t rank, unsigned flags, struct key *k, MDB_txn **txn,
		    struct diag *d)
{
	int rc, err = make_key(k, uid, name, rank, d);

	if (err)
		return err;
	rc = mdb_txn_begin(st->env, NULL, flags, txn);
	return rc ? lmdb_err(rc, flags & MDB_RDONLY ? "read" : "write", st, d) :
		    0;
}

/* Weights of n members from p (WEIGHTS_DISK(n) bytes) into *w. */
static bool weights_from_disk(const unsigned char *p, uint32_t n,
			      struct mixture_weights *w)
{
	memset(w, 0, sizeof(*w));
	if (!n)
		return true;
	if (n > MIXTURE_MAX_MEMBERS)
		return false;
	w->n = n;
	memcpy(&w->epoch_size, p, sizeof(w->epoch_size));
	p += sizeof(w->epoch_size);
	for (uint32_t m = 0; m < n; m++, p += sizeof(struct weight_disk)) {
		struct weight_disk wd;

		memcpy(&wd, p, sizeof(wd));
		if (wd.how > MIXTURE_CHOOSE)
			return false;
		w->how[m] = (enum mixture_how)wd.how;
		w->value[m] = wd.value;
	}
	return true;
}

static unsigned char *weights_to_disk(unsigned char *p,
				      const struct mixture_weights *w)
{
	if (!w->n)
		return p;
	memcpy(p, &w->epoch_size, sizeof(w->epoch_size));
	p += sizeof(w->epoch_size);
	for (uint32_t m = 0; m < w->n; m++, p += sizeof(struct weight_disk)) {
		struct weight_disk wd = { .how = (uint32_t)w->how[m],
					  .value = w->value[m] };

		memcpy(p, &wd, sizeof(wd));
	}
	return p;
}

bool state_weights_equal(const struct mixture_weights *a,
			 const struct mixture_weights *b)
{
	if (a->n != b->n || a->epoch_size != b->epoch_size)
		return false;
	for (uint32_t m = 0; m < a->n; m++)
		if (a->how[m] != b->how[m] ||
		    memcmp(&a->value[m], &b->value[m], sizeof(double)))
			return false;
	return true;
}

static bool job_from_disk(const MDB_val *v, struct state_job *j, bool with_plan)
{
	struct job_disk s = { 0 };
	size_t head = sizeof(s), tail = 0;
	const unsigned char *w;

	if (v->mv_size < JOB_DISK_2)
		return false;
	memcpy(&s, v->mv_data, JOB_DISK_2);
	if (s.version == STATE_REC_VERSION)
		head = JOB_DISK_2;
	else if (s.version == 3 && v->mv_size >= JOB_DISK_3)
		head = JOB_DISK_3;
	else if (s.version == 4 && v->mv_size >= JOB_DISK_4)
		head = JOB_DISK_4;
	else if (s.version != STATE_JOB_VERSION || v->mv_size < sizeof(s))
		return false;
	memcpy(&s, v->mv_data, head);
	if (head == sizeof(s))
		tail = WEIGHTS_DISK(s.nweights) + WEIGHTS_DISK(s.nbefore);
	if (!s.world || s.plan_words > STATE_PLAN_MAX_WORDS ||
	    v->mv_size != head + s.plan_words * sizeof(uint64_t) + tail)
		return false;
	*j = (struct state_job){
		.dataset_id = s.dataset_id,
		.opts_id = s.opts_id,
		.generation = s.generation,
		.batches_per_epoch = s.batches_per_epoch,
		.world = s.world,
		.epochs = s.epochs,
		.start_epoch = s.start_epoch,
		.start_batch = s.start_batch,
		.updated_ms = s.updated_ms,
		.from_id = s.from_id,
		.mix_id = s.mix_id,
		.counts_from = s.counts_from,
		.before_batches = s.before_batches,
	};
	w = (const unsigned char *)v->mv_data + head +
	    s.plan_words * sizeof(uint64_t);
	if (!weights_from_disk(w, s.nweights, &j->weights) ||
	    !weights_from_disk(w + WEIGHTS_DISK(s.nweights), s.nbefore,
			       &j->before))
		return false;
	if (with_plan && s.plan_words) {
		j->plan = malloc(s.plan_words * sizeof(uint64_t));
		if (!j->plan)
			return false;
		memcpy(j->plan, (const char *)v->mv_data + head,
		       s.plan_words * sizeof(uint64_t));
		j->plan_words = s.plan_words;
	}
	return true;
}

static bool pos_from_disk(const MDB_val *v, struct state_pos *p)
{
	struct pos_disk s;

	if (v->mv_size != sizeof(s))
		return false;
	memcpy(&s, v->mv_data, sizeof(s));
	if (s.version != STATE_REC_VERSION)
		return false;
	*p = (struct state_pos){
		.generation = s.generation,
		.epoch = s.epoch,
		.batch = s.batch,
		.updated_ms = s.updated_ms,
		.finished = s.flags & STATE_FINISHED,
	};
	return true;
}

static int put_job(MDB_txn *txn, const struct state *st, MDB_val *k,
		   const struct state_job *j, uint64_t gen, struct delta *dl)
{
	struct job_disk s = {
		.version = STATE_JOB_VERSION,
		.world = j->world,
		.dataset_id = j->dataset_id,
		.opts_id = j->opts_id,
		.generation = gen,
		.batches_per_epoch = j->batches_per_epoch,
		.epochs = j->epochs,
		.start_epoch = j->start_epoch,
		.start_batch = j->start_batch,
		.updated_ms = j->updated_ms,
		.plan_words = j->plan_words,
		.from_id = j->from_id,
		.mix_id = j->mix_id,
		.counts_from = j->counts_from,
		.nweights = (uint16_t)j->weights.n,
		.nbefore = (uint16_t)(j->counts_from ? j->before.n : 0),
		.before_batches = j->counts_from ? j->before_batches : 0,
	};
	MDB_val v = { sizeof(s) + j->plan_words * sizeof(uint64_t) +
			      WEIGHTS_DISK(s.nweights) +
			      WEIGHTS_DISK(s.nbefore),
		      NULL };
	int rc = put_rec(txn, st, k, &v, MDB_RESERVE, true, dl);
	unsigned char *p;

	if (rc)
		return rc;
	memcpy(v.mv_data, &s, sizeof(s));
	p = (unsigned char *)v.mv_data + sizeof(s);
	if (j->plan_words)
		memcpy(p, j->plan, j->plan_words * sizeof(uint64_t));
	p = weights_to_disk(p + j->plan_words * sizeof(uint64_t), &j->weights);
	if (s.nbefore)
		weights_to_disk(p, &j->before);
	return 0;
}

static int put_pos(MDB_txn *txn, const struct state *st, MDB_val *k,
		   const struct state_pos *p, uint64_t gen, struct delta *dl)
{
	struct pos_disk s = {
		.version = STATE_REC_VERSION,
		.flags = p->finished ? STATE_FINISHED : 0,
		.generation = gen,
		.epoch = p->epoch,
		.batch = p->batch,
		.updated_ms = p->updated_ms,
	};
	MDB_val v = { sizeof(s), &s };

	return put_rec(txn, st, k, &v, 0, false, dl);
}

/*
 * Delete the positions of the job whose key is job (not the job),
 * counting them in dl.
 */
static int del_positions(MDB_txn *txn, const struct state *st,
			 const MDB_val *job, struct delta *dl)
{
	char pre[96];
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	if (job->mv_size + 1 > sizeof(pre))
		return MDB_BAD_VALSIZE;
	memcpy(pre, job->mv_data, job->mv_size);
	pre[job->mv_size] = STATE_POS_SEP;
	rc = mdb_cursor_open(txn, st->dbi, &c);
	if (rc)
		return rc;
	k = (MDB_val){ job->mv_size + 1, pre };
	for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size <= job->mv_size + 1 ||
		    memcmp(k.mv_data, pre, job->mv_size + 1))
			break;
		dl->bytes -= (int64_t)(k.mv_size + v.mv_size);
		rc = mdb_cursor_del(c, 0);
		if (rc)
			break;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/* charge() for uid's stream name. */
static int charge_name(MDB_txn *txn, const struct state *st, uint32_t uid,
		       const char *name, const struct delta *dl, struct diag *d)
{
	char what[STATE_NAME_MAX + 16];

	snprintf(what, sizeof(what), "stream \"%s\"", name);
	return charge(txn, st, uid, dl, what, d);
}

int state_get_job(struct state *st, uint32_t uid, const char *name,
		  struct state_job *j, struct state_pos **pos, struct diag *d)
{
	struct key key = { .buf = { 0 } };
	MDB_val v;
	MDB_txn *txn;
	int rc, err;

	memset(j, 0, sizeof(*j));
	if (pos)
		*pos = NULL;
	err = txn_open(st, uid, name, 0, MDB_RDONLY, &key, &txn, d);
	if (err)
		return err;
	rc = mdb_get(txn, st->dbi, &key.job, &v);
	if (rc == MDB_NOTFOUND)
		err = -ENOENT;
	else if (rc)
		err = lmdb_err(rc, "read", st, d);
	else if (!job_from_disk(&v, j, true))
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: the record of stream \"%s\" is not one this loaderd reads (%zu bytes): open it with a fresh start, or forget it",
			st->path, name, v.mv_size);
	if (!err && pos) {
		/* In the same transaction: positions of this generation. */
		*pos = calloc(j->world, sizeof(**pos));
		if (!*pos)
			err = diag_set(d, -ENOMEM, "out of memory");
		for (uint32_t r = 0; !err && r < j->world; r++) {
			struct state_pos p;

			make_key(&key, uid, name, r, d);
			rc = mdb_get(txn, st->dbi, &key.pos, &v);
			if (!rc && pos_from_disk(&v, &p) &&
			    p.generation == j->generation)
				(*pos)[r] = p;
			else if (rc && rc != MDB_NOTFOUND)
				err = lmdb_err(rc, "read", st, d);
		}
		if (err) {
			free(*pos);
			*pos = NULL;
			state_job_clear(j);
		}
	}
	mdb_txn_abort(txn);
	return err;
}

void state_job_clear(struct state_job *j)
{
	free(j->plan);
	j->plan = NULL;
	j->plan_words = 0;
}

int state_get_pos(struct state *st, uint32_t uid, const char *name,
		  uint32_t rank, uint64_t gen, struct state_pos *p,
		  struct diag *d)
{
	struct key key = { .buf = { 0 } };
	MDB_val v;
	MDB_txn *txn;
	int rc, err;

	err = txn_open(st, uid, name, rank, MDB_RDONLY, &key, &txn, d);
	if (err)
		return err;
	rc = mdb_get(txn, st->dbi, &key.pos, &v);
	if (rc == MDB_NOTFOUND)
		err = -ENOENT;
	else if (rc)
		err = lmdb_err(rc, "read", st, d);
	else if (!pos_from_disk(&v, p) || p->generation != gen)
		err = -ENOENT; /* an older job's, or unreadable: none */
	mdb_txn_abort(txn);
	return err;
}

/* Do a and b deal a mixture's epochs alike (weights kept alike)? */
static bool same_counts(const struct state_job *a, const struct state_job *b)
{
	return a->mix_id == b->mix_id && a->counts_from == b->counts_from &&
	       state_weights_equal(&a->weights, &b->weights) &&
	       (!a->counts_from ||
		(a->before_batches == b->before_batches &&
		 state_weights_equal(&a->before, &b->before)));
}

/* Do a and b describe the same job (as two of its ranks would)? */
static bool same_job(const struct state_job *a, const struct state_job *b)
{
	return a->dataset_id == b->dataset_id && a->opts_id == b->opts_id &&
	       a->world == b->world &&
	       a->batches_per_epoch == b->batches_per_epoch &&
	       a->start_epoch == b->start_epoch &&
	       a->start_batch == b->start_batch && a->from_id == b->from_id &&
	       a->mix_id == b->mix_id && a->plan_words == b->plan_words &&
	       (!a->plan_words ||
		!memcmp(a->plan, b->plan, a->plan_words * sizeof(uint64_t))) &&
	       same_counts(a, b);
}

int state_begin(struct state *st, uint32_t uid, const char *name,
		const struct state_job *j, bool renew, uint32_t rank,
		const struct state_pos *p, uint64_t *gen, struct diag *d)
{
	struct state_job cur = { 0 };
	struct delta dl = { 0 };
	bool have = false;
	struct key key = { .buf = { 0 } };
	MDB_val v;
	MDB_txn *txn;
	int rc, err;

	err = txn_open(st, uid, name, rank, 0, &key, &txn, d);
	if (err)
		return err;
	rc = mdb_get(txn, st->dbi, &key.job, &v);
	if (!rc)
		have = job_from_disk(&v, &cur, true);
	else if (rc != MDB_NOTFOUND)
		goto fail;
	rc = 0;
	*gen = have ? cur.generation : 0;
	if (*gen != j->generation) {
		/* Another rank began the job since this one read it. */
		if (!renew || !have || !same_job(&cur, j)) {
			mdb_txn_abort(txn);
			state_job_clear(&cur);
			return diag_set(
				d, -EAGAIN,
				"stream \"%s\" changed while rank %" PRIu32
				" opened (another rank began it%s with world %" PRIu32
				"): open again",
				name, rank, renew ? " differently" : "",
				have ? cur.world : 0);
		}
	} else if (renew && !(have && same_job(&cur, j))) {
		/* (Renewing a record to the same job changes nothing.) */
		(*gen)++;
		rc = del_positions(txn, st, &key.job, &dl);
		if (!rc)
			rc = put_job(txn, st, &key.job, j, *gen, &dl);
	} else if (!renew && have && !same_counts(&cur, j)) {
		/*
		 * A mixture's counts changed, from an epoch no rank had
		 * begun (named.c checked), or the weights were not kept: the
		 * job goes on, its positions kept, with them.
		 */
		rc = put_job(txn, st, &key.job, j, *gen, &dl);
	}
	state_job_clear(&cur);
	if (!rc)
		rc = put_pos(txn, st, &key.pos, p, *gen, &dl);
	if (!rc)
		rc = charge_name(txn, st, uid, name, &dl, d);
	if (rc < 0) {
		mdb_txn_abort(txn);
		return rc;
	}
	if (rc)
		goto fail;
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
fail:
	mdb_txn_abort(txn);
	state_job_clear(&cur);
	return lmdb_err(rc, "write", st, d);
}

/* Is a further on than b? */
static bool further(const struct state_pos *a, const struct state_pos *b)
{
	return a->epoch != b->epoch ? a->epoch > b->epoch : a->batch > b->batch;
}

int state_put_pos(struct state *st, uint32_t uid, const char *name,
		  uint32_t rank, const struct state_pos *p, struct diag *d)
{
	struct state_job j;
	struct state_pos old;
	struct delta dl = { 0 };
	struct key key = { .buf = { 0 } };
	MDB_val v;
	MDB_txn *txn;
	int rc, err;

	err = txn_open(st, uid, name, rank, 0, &key, &txn, d);
	if (err)
		return err;
	rc = mdb_get(txn, st->dbi, &key.job, &v);
	if (rc == MDB_NOTFOUND || (!rc && (!job_from_disk(&v, &j, false) ||
					   j.generation != p->generation))) {
		mdb_txn_abort(txn);
		return diag_set(
			d, -ESTALE,
			"stream \"%s\" rank %" PRIu32
			": the job was started again or forgotten: position not saved",
			name, rank);
	}
	if (rc)
		goto fail;
	if (!mdb_get(txn, st->dbi, &key.pos, &v) && pos_from_disk(&v, &old) &&
	    old.generation == p->generation && further(&old, p)) {
		mdb_txn_abort(txn);
		return 0;
	}
	rc = put_pos(txn, st, &key.pos, p, p->generation, &dl);
	if (!rc)
		rc = charge_name(txn, st, uid, name, &dl, d);
	if (rc < 0) {
		mdb_txn_abort(txn);
		return rc;
	}
	if (rc)
		goto fail;
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
fail:
	mdb_txn_abort(txn);
	return lmdb_err(rc, "write", st, d);
}

int state_forget(struct state *st, uint32_t uid, const char *name,
		 struct diag *d)
{
	struct delta dl = { 0 };
	struct key key = { .buf = { 0 } };
	MDB_txn *txn;
	int rc, err;

	err = txn_open(st, uid, name, 0, 0, &key, &txn, d);
	if (err)
		return err;
	rc = del_rec(txn, st, &key.job, true, &dl);
	if (rc) {
		mdb_txn_abort(txn);
		return rc == MDB_NOTFOUND ? -ENOENT :
					    lmdb_err(rc, "delete", st, d);
	}
	rc = del_positions(txn, st, &key.job, &dl);
	if (!rc)
		rc = charge(txn, st, uid, &dl, name, d);
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "delete", st, d);
	}
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
}

/*
 * Split a key "UID/NAME" or "UID/NAME" SEP "RANK" into uid, name
 * (NUL-terminated in buf) and *rank (UINT32_MAX for a job's key).
 */
static bool parse_key(const MDB_val *k, uint32_t *uid, char *buf, size_t n,
		      uint32_t *rank)
{
	const char *p = k->mv_data, *end = p + k->mv_size, *slash, *sep;
	unsigned long long u;
	char num[16];

	if (!k->mv_size || !p[0])
		return false; /* the daemon's own: "\0KIND/..." */
	slash = memchr(p, '/', k->mv_size);
	if (!slash || slash == p || (size_t)(slash - p) >= sizeof(num))
		return false;
	memcpy(num, p, (size_t)(slash - p));
	num[slash - p] = '\0';
	u = strtoull(num, NULL, 10);
	if (u > UINT32_MAX)
		return false;
	*uid = (uint32_t)u;
	sep = memchr(slash + 1, STATE_POS_SEP, (size_t)(end - slash - 1));
	if (!sep)
		sep = end;
	if ((size_t)(sep - slash - 1) >= n)
		return false;
	memcpy(buf, slash + 1, (size_t)(sep - slash - 1));
	buf[sep - slash - 1] = '\0';
	*rank = UINT32_MAX;
	if (sep != end) {
		size_t len = (size_t)(end - sep - 1);

		if (!len || len >= sizeof(num))
			return false;
		memcpy(num, sep + 1, len);
		num[len] = '\0';
		u = strtoull(num, NULL, 10);
		if (u >= UINT32_MAX)
			return false;
		*rank = (uint32_t)u;
	}
	return true;
}

int state_each(struct state *st, uint32_t uid, bool all, state_each_fn *fn,
	       void *arg, struct diag *d)
{
	char jname[STATE_NAME_MAX + 1] = "";
	struct state_job j;
	uint32_t juid = 0;
	bool have = false;
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
		struct state_pos p;
		uint32_t owner, rank;

		if (!parse_key(&k, &owner, name, sizeof(name), &rank) ||
		    (!all && owner != uid))
			continue;
		if (rank == UINT32_MAX) {
			/* A job: its positions follow its key. */
			have = job_from_disk(&v, &j, false);
			juid = owner;
			memcpy(jname, name, sizeof(jname));
			continue;
		}
		if (!have || owner != juid || strcmp(name, jname) ||
		    !pos_from_disk(&v, &p) || p.generation != j.generation)
			continue;
		stop = fn(arg, owner, name, &j, rank, &p);
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	if (rc && rc != MDB_NOTFOUND)
		return lmdb_err(rc, "read", st, d);
	return 0;
}

/* A job or blob found stale by state_expire(), dropped after the walk. */
struct stale {
	struct stale *next;
	MDB_val key;
	char buf[256];
};

int state_expire(struct state *st, uint64_t now_ms, uint64_t max_age_ms,
		 uint64_t *dropped, struct diag *d)
{
	struct stale *list = NULL, *s;
	char cur[256];
	size_t curlen = 0;
	uint64_t newest = 0;
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
	/*
	 * A job and its positions are one group of keys in a row; a group
	 * is stale when its newest write is. A blob is a group of its own.
	 * A record this version cannot read is kept, not judged, and so are
	 * the use records.
	 */
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		bool blob = !rc && k.mv_size && !*(const char *)k.mv_data;
		const char *sep = rc || blob ? NULL :
					       memchr(k.mv_data, STATE_POS_SEP,
						      k.mv_size);
		size_t glen = rc  ? 0 :
			      sep ? (size_t)(sep - (const char *)k.mv_data) :
				    k.mv_size;
		struct state_job j;
		struct state_pos p;
		uint64_t when = UINT64_MAX;

		if (curlen &&
		    (rc || glen != curlen || memcmp(k.mv_data, cur, curlen))) {
			if (newest != UINT64_MAX &&
			    newest + max_age_ms <= now_ms) {
				s = malloc(sizeof(*s));
				if (!s) {
					rc = ENOMEM;
					break;
				}
				memcpy(s->buf, cur, curlen);
				s->key = (MDB_val){ curlen, s->buf };
				s->next = list;
				list = s;
			}
			curlen = 0;
		}
		if (rc)
			break;
		if (blob) {
			struct blob_head h;
			uint32_t uid;

			if (rec_uid(&k, &uid) && v.mv_size >= sizeof(h)) {
				memcpy(&h, v.mv_data, sizeof(h));
				when = h.updated_ms;
			}
		} else if (sep ? pos_from_disk(&v, &p) :
				 job_from_disk(&v, &j, false)) {
			when = sep ? p.updated_ms : j.updated_ms;
		}
		if (!curlen && glen <= sizeof(cur)) {
			memcpy(cur, k.mv_data, glen);
			curlen = glen;
			newest = 0;
		}
		if (curlen && when > newest)
			newest = when;
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	for (; list; list = s) {
		s = list->next;
		if (!rc) {
			const char *key = list->key.mv_data;
			struct delta dl = { 0 };
			uint32_t uid;
			int r = del_rec(txn, st, &list->key, key[0], &dl);

			if (r && r != MDB_NOTFOUND)
				rc = r;
			if (!rc && key[0])
				rc = del_positions(txn, st, &list->key, &dl);
			if (!rc && rec_uid(&list->key, &uid))
				rc = charge(txn, st, uid, &dl, "expiry", d);
			if (!rc)
				(*dropped)++;
		}
		free(list);
	}
	if (rc) {
		mdb_txn_abort(txn);
		*dropped = 0;
		return lmdb_err(rc, "expire", st, d);
	}
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
}

/* "\0KIND/UID/ID": no stream's key starts with a NUL (they start with a uid). */
static int blob_key(uint32_t uid, const char *kind, const char *id, char *buf,
		    size_t n, MDB_val *k)
{
	int len = snprintf(buf + 1, n - 1, "%s/%" PRIu32 "/%s", kind, uid, id);

	if (len < 0 || (size_t)len >= n - 1)
		return -ENAMETOOLONG;
	buf[0] = '\0';
	k->mv_data = buf;
	k->mv_size = (size_t)len + 1;
	return 0;
}

int state_get_blob(struct state *st, uint32_t uid, const char *kind,
		   const char *id, void **val, size_t *len, struct diag *d)
{
	struct blob_head h;
	char buf[256];
	MDB_val k, v;
	MDB_txn *txn;
	int rc, err = blob_key(uid, kind, id, buf, sizeof(buf), &k);

	*val = NULL;
	*len = 0;
	if (err)
		return diag_set(d, err, "%s: key %s/%s too long", st->path,
				kind, id);
	rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return lmdb_err(rc, "read", st, d);
	rc = mdb_get(txn, st->dbi, &k, &v);
	if (!rc && v.mv_size < sizeof(h))
		rc = MDB_NOTFOUND; /* not one of ours: none */
	if (!rc) {
		size_t n = v.mv_size - sizeof(h);

		*val = malloc(n ? n : 1);
		if (*val) {
			memcpy(*val, (const char *)v.mv_data + sizeof(h), n);
			*len = n;
		}
	}
	mdb_txn_abort(txn);
	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return lmdb_err(rc, "read", st, d);
	return *val ? 0 : diag_set(d, -ENOMEM, "%s: out of memory", st->path);
}

int state_put_blob(struct state *st, uint32_t uid, const char *kind,
		   const char *id, const void *val, size_t len, uint64_t now_ms,
		   struct diag *d)
{
	struct blob_head h = { .updated_ms = now_ms };
	struct delta dl = { 0 };
	char buf[256];
	MDB_val k, v = { .mv_size = sizeof(h) + len };
	MDB_txn *txn;
	int rc, err = blob_key(uid, kind, id, buf, sizeof(buf), &k);

	if (err)
		return diag_set(d, err, "%s: key %s/%s too long", st->path,
				kind, id);
	rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc)
		return lmdb_err(rc, "write", st, d);
	rc = put_rec(txn, st, &k, &v, MDB_RESERVE, false, &dl);
	if (!rc) {
		memcpy(v.mv_data, &h, sizeof(h));
		memcpy((char *)v.mv_data + sizeof(h), val, len);
		rc = charge(txn, st, uid, &dl, kind, d);
	}
	if (rc < 0) {
		mdb_txn_abort(txn);
		return rc;
	}
	if (rc) {
		mdb_txn_abort(txn);
		return lmdb_err(rc, "write", st, d);
	}
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_err(rc, "commit", st, d) : 0;
}
