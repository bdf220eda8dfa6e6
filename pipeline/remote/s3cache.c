/*
 * s3cache.c - the node-local shard cache of datasets in an object store.
 *
 * A stage runs in rounds. Each round, under the cache's lock, sorts the
 * shards still without a descriptor into three: those in the cache for
 * the ETag the caller's HEAD gave (opened at once, under the lock, so
 * that an eviction by another stage cannot take them away between the
 * look and the open: an unlinked file stays readable through its
 * descriptor), those another stage is fetching now (waited for, then
 * looked at again next round), and those this stage fetches. Fetching
 * and checking happen outside the lock; only the rename into place and
 * the in-flight list are under it.
 *
 * Recency for eviction is the order in which stages used the files since
 * the daemon started, kept in memory: not in the files' times, because
 * the node cache knows a file by its times (stream.c), and a touched file
 * would be new to it at every stage. Files not used since the start go
 * first, oldest modification time first.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#if defined(__x86_64__)
/* The AVX2/AVX-512 kernels when the CPU has them (as shard.c). */
#include <xxh_x86dispatch.h>
#endif

#include "clock.h"
#include "dataset.h"
#include "fdio.h"
#include "loader_error.h"
#include "plog.h"
#include "s3cache.h"
#include "s3fill.h"
#include "shardid.h"
#include "s3read.h"
#include "shard.h"
#include "verify.h"

#define MEMO_N	   4096 /* remembered HEAD answers */
#define MEMO_PROBE 8
#define NAME_LEN   48 /* "<32 hex>.shard" and its NUL */
#define ROUNDS	   4

struct memo {
	uint64_t cred, obj, expires_ms;
	struct s3_obj o;
};

/*
 * A shard a stage is fetching. Once its records arrive (start_fill()),
 * another stage may read it as it comes: f, fi and tmp say where.
 */
struct flight {
	char name[NAME_LEN];
	uint64_t bytes;
	struct s3fill *f; /* the fetch's; NULL until then */
	uint32_t fi;
	char tmp[32];
	struct flight *next;
};

/* A file a stage used, and when (a count, not a clock). */
struct use {
	char name[NAME_LEN];
	uint64_t tick;
};

struct fill_job;

struct s3cache {
	int dfd;
	char *dir;
	struct s3cache_params p;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct memo *memo;
	struct flight *flights;
	struct use *uses; /* by the lock, like flights */
	size_t nuses, capuses;
	uint64_t tick;
	uint64_t seed;
	uint64_t tmps;	       /* temporary files named (atomic) */
	struct fill_job *jobs; /* fetches still running, by the lock */
};

static bool is_shard_name(const char *n)
{
	size_t l = strlen(n);

	return l == 38 && !strcmp(n + 32, ".shard");
}

/*
 * Whether the process that named a temporary file ".tmp-PID-N" still
 * runs (a name without a pid counts as a dead one's).
 */
static bool tmp_owner_alive(const char *name)
{
	char *end;
	long pid = strtol(name + 5, &end, 10);

	if (end == name + 5 || *end != '-' || pid <= 0 || pid > INT_MAX)
		return false;
	return pid != getpid() && (!kill((pid_t)pid, 0) || errno == EPERM);
}

int s3cache_new(struct s3cache **out, const char *dir,
		const struct s3cache_params *p, struct diag *d)
{
	struct s3cache *c;
	DIR *dh;
	struct dirent *de;
	int fd;

	*out = NULL;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return diag_set(d, -errno, "%s: %s", dir, strerror(errno));
	c = calloc(1, sizeof(*c));
	if (!c)
		return diag_set(d, -ENOMEM, "out of memory");
	c->memo = calloc(MEMO_N, sizeof(*c->memo));
	c->dir = strdup(dir);
	c->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!c->memo || !c->dir || c->dfd < 0) {
		int err = c->dfd < 0 && c->dir && c->memo ? -errno : -ENOMEM;

		if (c->dfd < 0)
			c->dfd = -1;
		s3cache_free(c);
		return diag_set(d, err, "%s: %s", dir, strerror(-err));
	}
	if (p)
		c->p = *p;
	if (!c->p.access_ttl_s)
		c->p.access_ttl_s = 60;
	c->seed = clock_mono_ms() ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)c;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	/*
	 * Temporary files of a run that ended mid-fetch are garbage; those
	 * of a process still running (another daemon on this directory,
	 * say one about to find the socket taken) are its fetches.
	 */
	fd = dup(c->dfd);
	dh = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dh && fd >= 0)
		close(fd);
	while (dh && (de = readdir(dh)))
		if (!strncmp(de->d_name, ".tmp-", 5) &&
		    !tmp_owner_alive(de->d_name))
			(void)unlinkat(c->dfd, de->d_name, 0);
	if (dh)
		closedir(dh);
	*out = c;
	return 0;
}

static void stop_jobs(struct s3cache *c);

void s3cache_free(struct s3cache *c)
{
	if (!c)
		return;
	if (c->dfd >= 0) {
		/* Fetches still running stop; their partial files go. */
		stop_jobs(c);
		close(c->dfd);
		pthread_mutex_destroy(&c->mu);
		pthread_cond_destroy(&c->cv);
	}
	free(c->memo);
	free(c->uses);
	free(c->dir);
	free(c);
}

/* ---- the directory ----------------------------------------------------- */

struct entry {
	char name[NAME_LEN];
	uint64_t bytes;
	uint64_t tick; /* 0: not used since the start */
	struct timespec mtime;
};

static struct use *use_find(struct s3cache *c, const char *name)
{
	for (size_t i = 0; i < c->nuses; i++)
		if (!strcmp(c->uses[i].name, name))
			return &c->uses[i];
	return NULL;
}

/* A stage used name now (under the lock). Without memory, it is not noted. */
static void use_note(struct s3cache *c, const char *name)
{
	struct use *u = use_find(c, name);

	if (!u && c->nuses == c->capuses) {
		size_t cap = c->capuses ? c->capuses * 2 : 64;
		struct use *nu = realloc(c->uses, cap * sizeof(*nu));

		if (!nu)
			return;
		c->uses = nu;
		c->capuses = cap;
	}
	if (!u) {
		u = &c->uses[c->nuses++];
		memcpy(u->name, name, NAME_LEN);
	}
	u->tick = ++c->tick;
}

static void use_forget(struct s3cache *c, const char *name)
{
	struct use *u = use_find(c, name);

	if (u)
		*u = c->uses[--c->nuses];
}

static int by_use(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->tick != y->tick)
		return x->tick < y->tick ? -1 : 1;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The cache's shard files, least recently used first (*out malloc'd). */
static int list_entries(struct s3cache *c, struct entry **out, size_t *n,
			uint64_t *total)
{
	struct entry *v = NULL;
	size_t cap = 0, k = 0;
	struct dirent *de;
	int fd = dup(c->dfd);
	DIR *dh = fd >= 0 ? fdopendir(fd) : NULL;

	*total = 0;
	if (!dh) {
		int err = -errno;

		if (fd >= 0)
			close(fd);
		return err;
	}
	rewinddir(dh);
	while ((de = readdir(dh))) {
		const struct use *u;
		struct stat st;

		if (!is_shard_name(de->d_name) ||
		    fstatat(c->dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		if (k == cap) {
			struct entry *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(dh);
				return -ENOMEM;
			}
			v = nv;
		}
		snprintf(v[k].name, sizeof(v[k].name), "%s", de->d_name);
		v[k].bytes = (uint64_t)st.st_size;
		v[k].mtime = st.st_mtim;
		u = use_find(c, de->d_name);
		v[k].tick = u ? u->tick : 0;
		*total += (uint64_t)st.st_size;
		k++;
	}
	closedir(dh);
	if (k)
		qsort(v, k, sizeof(*v), by_use);
	*out = v;
	*n = k;
	return 0;
}

static struct flight *flight_of(const struct s3cache *c, const char *name)
{
	for (struct flight *f = c->flights; f; f = f->next)
		if (!strcmp(f->name, name))
			return f;
	return NULL;
}

static bool in_flight(const struct s3cache *c, const char *name)
{
	return flight_of(c, name) != NULL;
}

/* May another stage read fl's shard as it arrives, now? */
static bool joinable(const struct flight *fl)
{
	return fl->f &&
	       !__atomic_load_n(s3fill_cancelled(fl->f), __ATOMIC_RELAXED);
}

/* ---- access memory ----------------------------------------------------- */

/* Strings joined with their NULs, for hashing; returns the length. */
static size_t join(char *buf, size_t cap, const char *const *parts, int n)
{
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		size_t l = strlen(parts[i]) + 1;

		if (len + l > cap)
			l = cap - len;
		memcpy(buf + len, parts[i], l);
		len += l;
	}
	return len;
}

static uint64_t cred_hash(const struct s3cache *c, const struct aws_cfg *cfg)
{
	const char *parts[] = { cfg->endpoint, cfg->access_key, cfg->secret_key,
				cfg->session_token };
	char buf[sizeof(*cfg)];
	size_t len = join(buf, sizeof(buf), parts, 4);
	uint64_t h = XXH3_64bits_withSeed(buf, len, c->seed);

	explicit_bzero(buf, sizeof(buf));
	return h;
}

static bool memo_get(struct s3cache *c, uint64_t cred, uint64_t obj,
		     struct s3_obj *o)
{
	uint64_t now = clock_mono_ms();
	bool hit = false;

	pthread_mutex_lock(&c->mu);
	for (unsigned k = 0; k < MEMO_PROBE; k++) {
		struct memo *m = &c->memo[((cred ^ obj) + k) & (MEMO_N - 1)];

		if (m->cred == cred && m->obj == obj && m->expires_ms > now) {
			*o = m->o;
			hit = true;
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return hit;
}

static void memo_put(struct s3cache *c, uint64_t cred, uint64_t obj,
		     const struct s3_obj *o)
{
	struct memo *victim = NULL;

	pthread_mutex_lock(&c->mu);
	for (unsigned k = 0; k < MEMO_PROBE; k++) {
		struct memo *m = &c->memo[((cred ^ obj) + k) & (MEMO_N - 1)];

		if (m->cred == cred && m->obj == obj) {
			victim = m;
			break;
		}
		if (!victim || m->expires_ms < victim->expires_ms)
			victim = m;
	}
	victim->cred = cred;
	victim->obj = obj;
	victim->o = *o;
	victim->expires_ms = clock_mono_ms() + c->p.access_ttl_s * 1000ull;
	pthread_mutex_unlock(&c->mu);
}

/* ---- a stage ----------------------------------------------------------- */

struct item {
	char key[S3_KEY_MAX];
	char name[NAME_LEN];
	uint64_t obj; /* hash of endpoint, bucket and key */
	struct s3_obj o;
	int fd;
	int tmpfd;
	char tmp[32];
	bool mine;
	bool direct;   /* read in place (s3read.h): the cache has no room */
	bool arriving; /* fetched while the stream reads it (s3fill.h) */
	uint64_t tail; /* direct or arriving: where its fetched tail starts */
	uint64_t head; /* direct or arriving: the bytes fetched from 0 */
	uint32_t idx;  /* arriving, in its fetch: the shard's index */
	uint64_t records; /* the manifest's count */
};

/* The shard's identity to the node cache: its cache name's hash. */
static void item_id(const struct item *it, uint64_t id[2])
{
	XXH128_hash_t h = XXH3_128bits(it->name, strlen(it->name));

	id[0] = h.high64;
	id[1] = h.low64;
}

static void cache_name(const struct aws_cfg *cfg, const char *bucket,
		       struct item *it)
{
	char size[24], buf[AWS_ENDPOINT_MAX + AWS_BUCKET_MAX + S3_KEY_MAX +
			   S3_ETAG_MAX + 24];
	const char *parts[] = { cfg->endpoint, bucket, it->key, it->o.etag,
				size };
	XXH128_hash_t h;

	snprintf(size, sizeof(size), "%" PRIu64, it->o.size);
	h = XXH3_128bits(buf, join(buf, sizeof(buf), parts, 5));
	snprintf(it->name, sizeof(it->name),
		 "%016" PRIx64 "%016" PRIx64 ".shard", h.high64, h.low64);
}

/*
 * What a remembered HEAD answer is for: the object, as one version of
 * the manifest names it. A dataset packed again (its manifest goes up
 * last, with a new ETag) is looked at afresh at once; a shard replaced
 * under an unchanged manifest is seen when the answer expires.
 */
static uint64_t obj_hash(const struct aws_cfg *cfg, const char *bucket,
			 const char *key, const char *manifest_etag)
{
	char buf[AWS_ENDPOINT_MAX + AWS_BUCKET_MAX + S3_KEY_MAX + S3_ETAG_MAX];
	const char *parts[] = { cfg->endpoint, bucket, key, manifest_etag };

	return XXH3_64bits(buf, join(buf, sizeof(buf), parts, 4));
}

/*
 * The checksums of sh's records that ok does not mark as checked
 * already: read back from fd, runs of adjacent records up to 1 MiB at a
 * time. Counts those that do not match in *bad.
 */
static int check_rest(const struct shard *sh, int fd, const uint8_t *ok,
		      uint64_t *bad, struct diag *d)
{
	uint64_t n = shard_count(sh), k = 0;
	unsigned char *buf = NULL;
	size_t cap = 0;
	int err = 0;

	while (!err && k < n) {
		struct shard_rec r, e;
		uint64_t m = k, span;

		if (ok[k] || shard_rec(sh, k, &r)) {
			k++;
			continue;
		}
		/* Records k..m-1: adjacent in the file, none checked. */
		span = r.length;
		for (m = k + 1; m < n && !ok[m] && !shard_rec(sh, m, &e) &&
				e.offset == r.offset + span &&
				span + e.length <= (1u << 20);
		     m++)
			span += e.length;
		if (span > cap) {
			unsigned char *nb = realloc(buf, span);

			if (!nb) {
				err = diag_set(d, -ENOMEM, "out of memory");
				break;
			}
			buf = nb;
			cap = span;
		}
		err = fdio_pread_all(fd, buf, span, r.offset);
		if (err) {
			diag_set(d, err,
				 "%s: reading %" PRIu64
				 " bytes at offset %" PRIu64 ": %s",
				 shard_name(sh), span, r.offset,
				 strerror(-err));
			break;
		}
		for (const unsigned char *p = buf; k < m; k++) {
			shard_rec(sh, k, &e);
			*bad += shard_check_sum(sh, k, p, e.length, NULL) != 0;
			p += e.length;
		}
	}
	free(buf);
	return err;
}

/*
 * A fetched copy of shard i is the shard the manifest names: footer,
 * schema and count, and every record's checksum; those that ok marks
 * were checked as their bytes came (NULL: none was).
 */
static int check_copy(const struct dataset *ds, uint32_t i, struct item *it,
		      const char *bucket, struct verify_ctx *vc,
		      const uint8_t *ok, struct diag *d)
{
	struct verify_opts vo = { 0 };
	struct verify_stats vs = { 0 };
	struct shard *sh = NULL;
	char label[S3_KEY_MAX + AWS_BUCKET_MAX + 8];
	int err;

	snprintf(label, sizeof(label), "s3://%s/%s", bucket, it->key);
	err = shard_open(&sh, it->tmpfd, label, d);
	if (!err)
		err = dataset_check_shard(ds, i, sh, d);
	if (!err && ok) {
		err = check_rest(sh, it->tmpfd, ok, &vs.bad, d);
		vs.records = shard_count(sh);
	} else if (!err) {
		err = verify_shard(vc, sh, it->tmpfd, &vo, &vs, d);
	}
	if (!err && vs.bad)
		err = diag_set(
			d, LOADER_ECHECKSUM,
			"%s: %" PRIu64 " of its %" PRIu64
			" records do not match their checksums as fetched (the copy is discarded)",
			label, vs.bad, vs.records);
	shard_close(sh);
	return err;
}

static void drop_flights(struct s3cache *c, struct item *v, uint32_t n)
{
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < n; i++) {
		struct flight **pp = &c->flights;

		if (!v[i].mine)
			continue;
		v[i].mine = false;
		while (*pp) {
			if (!strcmp((*pp)->name, v[i].name)) {
				struct flight *f = *pp;

				*pp = f->next;
				free(f);
				break;
			}
			pp = &(*pp)->next;
		}
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* Open name from the cache if it is there with size bytes; -1 if not. */
static int open_cached(struct s3cache *c, const char *name, uint64_t size)
{
	struct stat st;
	int fd = openat(c->dfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || (uint64_t)st.st_size != size) {
		close(fd);
		(void)unlinkat(c->dfd, name, 0);
		use_forget(c, name);
		return -1;
	}
	use_note(c, name);
	return fd;
}

/*
 * Shard i of this stage is fl's, arriving: read it from fl's file as it
 * comes, linked to fl's fetch. Under the lock. Returns 0 or an error
 * (the stage then waits for the flight to end).
 */
static int join_flight(struct s3cache *c, struct flight *fl,
		       struct s3fill *fill, struct item *it, uint32_t i)
{
	int fd = openat(c->dfd, fl->tmp, O_RDONLY | O_CLOEXEC), err;

	/* Gone: whole and renamed, or dropped, an instant ago. */
	if (fd < 0)
		return -errno;
	err = s3fill_link(fill, i, fl->f, fl->fi);
	if (err) {
		close(fd);
		return err;
	}
	it->fd = fd;
	return 0;
}

/* Whether the shard name may be removed: not kept, not being fetched. */
static bool evictable(const struct s3cache *c, const char *name,
		      char (*keep)[NAME_LEN], size_t nkeep)
{
	if (in_flight(c, name))
		return false;
	for (size_t k = 0; k < nkeep; k++)
		if (!strcmp(keep[k], name))
			return false;
	return true;
}

/*
 * Wait, under the lock, for another stage's shard key to move on, as
 * this stage's own requests would: until sp's cancel is set or its
 * deadline passes, looking every 100 ms. Returns 0, -ECANCELED or
 * -ETIMEDOUT (in d).
 */
static int wait_theirs(struct s3cache *c, const struct s3_params *sp,
		       const char *key, struct diag *d)
{
	struct timespec ts;

	if (sp->cancel && __atomic_load_n(sp->cancel, __ATOMIC_RELAXED))
		return diag_set(d, -ECANCELED, "%s: cancelled", key);
	if (sp->deadline_ms && clock_mono_ms() >= sp->deadline_ms)
		return diag_set(
			d, -ETIMEDOUT,
			"%s: another stage's fetch of it not done by the deadline",
			key);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100 * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	(void)pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	return 0;
}

/*
 * Make room, under the lock, for the shards v[which[0..nf)] that will
 * be cached: those, in order, that fit what removing the oldest shards
 * not in keep[0..nkeep) and not being fetched could free. Only that
 * room is made: a shard larger than it is read in place without taking
 * anyone's cached shards. *room receives the bytes free under the
 * budget after it (UINT64_MAX: no budget).
 */
static int evict(struct s3cache *c, const struct item *it,
		 const uint32_t *which, uint32_t nf, char (*keep)[NAME_LEN],
		 size_t nkeep, uint64_t *evicted, uint64_t *room,
		 struct diag *d)
{
	struct entry *v = NULL;
	uint64_t total, pinned, most, need = 0;
	size_t n = 0;
	int err;

	*room = UINT64_MAX;
	if (!c->p.budget)
		return 0;
	err = list_entries(c, &v, &n, &total);
	if (err)
		return diag_set(d, err, "%s: listing the shard cache: %s",
				c->dir, strerror(-err));
	/*
	 * What other stages are fetching will be there too (a file renamed
	 * into place before its flight ends is counted once).
	 */
	for (const struct flight *f = c->flights; f; f = f->next)
		total += f->bytes;
	for (size_t i = 0; i < n; i++)
		if (in_flight(c, v[i].name))
			total -= v[i].bytes;
	pinned = total;
	for (size_t i = 0; i < n; i++)
		if (evictable(c, v[i].name, keep, nkeep))
			pinned -= v[i].bytes;
	most = pinned < c->p.budget ? c->p.budget - pinned : 0;
	for (uint32_t k = 0; k < nf; k++)
		if (it[which[k]].o.size <= most - need)
			need += it[which[k]].o.size;
	for (size_t i = 0; i < n && total + need > c->p.budget; i++) {
		if (!evictable(c, v[i].name, keep, nkeep) ||
		    unlinkat(c->dfd, v[i].name, 0))
			continue;
		use_forget(c, v[i].name);
		total -= v[i].bytes;
		*evicted += v[i].bytes;
	}
	free(v);
	*room = total < c->p.budget ? c->p.budget - total : 0;
	return 0;
}

/*
 * A round: the shards in the cache are opened; shards other stages are
 * fetching whose records have started to arrive are read as they come
 * (join_flight()); if other stages are fetching others, they are waited
 * for, this stage taking none meanwhile (a stage never waits while
 * holding shards others may wait for, so stages cannot wait on each
 * other); else this stage takes the others,
 * as many as fit the budget (the rest is read in place), each given a
 * temporary file of its size. They are fetched after the stage
 * (fill_main()), while the stream reads them.
 */
static int fetch_round(struct s3cache *c, struct item *v, uint32_t n,
		       struct s3fill *fill, const struct s3_params *sp,
		       struct s3cache_stats *st, struct diag *d)
{
	uint32_t *which = NULL, nf = 0, theirs = 0;
	char(*keep)[NAME_LEN] = NULL;
	size_t nkeep = 0;
	uint64_t room;
	int err = 0;

	which = calloc(n ? n : 1, sizeof(*which));
	keep = calloc(n ? n : 1, sizeof(*keep));
	if (!which || !keep) {
		free(which);
		free(keep);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < n; i++) {
		struct flight *fl;

		if (v[i].fd >= 0 || v[i].direct || v[i].arriving)
			continue;
		fl = flight_of(c, v[i].name);
		if (fl && joinable(fl) && !join_flight(c, fl, fill, &v[i], i)) {
			st->waited++;
			continue;
		}
		/*
		 * In the cache; or, with a flight still there, just put
		 * there: fill_done() renames a whole shard into the cache
		 * before its flight goes, and one this stage counted as
		 * another's in that instant made the stage go round again
		 * without waiting, and fail after ROUNDS.
		 */
		v[i].fd = open_cached(c, v[i].name, v[i].o.size);
		if (v[i].fd >= 0) {
			st->hits++;
			memcpy(keep[nkeep++], v[i].name, NAME_LEN);
			continue;
		}
		if (fl) {
			theirs++;
			continue;
		}
		which[nf++] = i;
	}
	if (theirs) {
		/*
		 * Wait for the other stages (until their shards arrive as
		 * the stream reads, or are done); the next round looks
		 * again.
		 */
		for (uint32_t i = 0; i < n; i++) {
			struct flight *fl;

			while (!err && v[i].fd < 0 && !v[i].mine &&
			       (fl = flight_of(c, v[i].name)) && !joinable(fl))
				err = wait_theirs(c, sp, v[i].key, d);
		}
		pthread_mutex_unlock(&c->mu);
		if (err)
			goto out;
		st->waited += theirs;
		goto out;
	}
	err = evict(c, v, which, nf, keep, nkeep, &st->evicted, &room, d);
	/*
	 * What the budget has no room for is read in place, the same
	 * shards at every stage while the cache keeps the others: a
	 * fixed part of the dataset stays cached, as in the node cache.
	 */
	for (uint32_t k = 0; !err && k < nf; k++) {
		struct item *it = &v[which[k]];
		struct flight *fl;

		if (it->o.size > room) {
			it->direct = true;
			continue;
		}
		fl = calloc(1, sizeof(*fl));
		if (!fl) {
			err = diag_set(d, -ENOMEM, "out of memory");
			break;
		}
		room -= it->o.size;
		memcpy(fl->name, it->name, NAME_LEN);
		fl->bytes = it->o.size;
		fl->next = c->flights;
		c->flights = fl;
		it->mine = true;
		it->arriving = true;
		st->fetched++;
		st->bytes_fetched += it->o.size;
	}
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; !err && i < n; i++) {
		struct item *it = &v[i];

		if (!it->arriving || it->tmpfd >= 0)
			continue;
		/*
		 * A name no other stage of this process has used: another
		 * stage's fetch may still be writing its own for minutes,
		 * and one made from where this stage's items lie in memory
		 * (freed and handed out again) could be the same.
		 */
		snprintf(it->tmp, sizeof(it->tmp), ".tmp-%d-%" PRIu64,
			 (int)getpid(),
			 __atomic_fetch_add(&c->tmps, 1, __ATOMIC_RELAXED));
		it->tmpfd = openat(c->dfd, it->tmp,
				   O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (it->tmpfd < 0 || ftruncate(it->tmpfd, (off_t)it->o.size)) {
			err = diag_set(d, -errno, "%s/%s: %s", c->dir, it->tmp,
				       strerror(errno));
			/* Not made here: not for abandon() to remove. */
			if (it->tmpfd < 0)
				it->tmp[0] = '\0';
		}
	}
out:
	free(which);
	free(keep);
	return err;
}

/*
 * Shards this stage took and will not fetch after all (the stage
 * failed): their temporary files go, and others may take them.
 */
static void abandon(struct s3cache *c, struct item *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (v[i].tmpfd >= 0)
			close(v[i].tmpfd);
		v[i].tmpfd = -1;
		if (v[i].tmp[0])
			(void)unlinkat(c->dfd, v[i].tmp, 0);
		v[i].tmp[0] = '\0';
	}
	drop_flights(c, v, n);
}

/* The manifest, fetched with the caller's credentials, in a memfd. */
static int get_manifest(struct s3 *s, const char *key, int *mfd,
			struct dataset **ds, struct s3_obj *got, struct diag *d)
{
	void *buf = NULL;
	size_t len = 0;
	int err, fd;

	*mfd = -1;
	err = s3_get_mem(s, key, DSFILES_MANIFEST_MAX, &buf, &len, got, d);
	if (err)
		return err;
	fd = memfd_create("manifest.json", MFD_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return diag_set(d, -errno, "memfd_create: %s", strerror(errno));
	}
	err = fdio_write_all(fd, buf, len);
	if (err)
		diag_set(d, err, "memfd: %s", strerror(-err));
	free(buf);
	if (!err)
		err = dataset_load_fd(ds, fd, key, d);
	if (err) {
		close(fd);
		return err;
	}
	*mfd = fd;
	return 0;
}

/*
 * A shard read in place, or still arriving, is given to the stream as a
 * file of the object's size (a memfd, or its temporary file in the
 * cache) that holds its header and its tail (footer and trailer) when
 * the stream opens it. They come by ranged GETs, all at once:
 *
 * - the header; of a shard arriving, its first HEAD_FIRST bytes, the
 *   first records with it. A GET whose body is a few bytes is answered
 *   late by a server that writes headers and body apart with Nagle's
 *   algorithm on (Ceph's RGW by default): the small body waits for the
 *   acknowledgement that a kept-alive connection delays (40 ms on
 *   Linux). A body of many segments is not held so.
 * - the tail: TAIL bytes more than the index of as many records as the
 *   manifest counts, so that one GET holds the footer of a shard
 *   without large dictionaries; then, when the trailer places the
 *   footer before it, the rest of the footer.
 */
#define TAIL		(64u << 10)
#define HEAD_FIRST	(1u << 20)
#define S3READ_PARALLEL 32 /* requests in flight for reads in place */

/* The bytes of shard it's tail to fetch first. */
static uint64_t tail_len(const struct item *it)
{
	uint64_t want = TAIL;

	if (it->records <= SHARD_MAX_RECORDS)
		want += it->records * SHARD_INDEX_ENTRY;
	return want < it->o.size ? want : it->o.size;
}

/* Where shard it's header and tail go. */
static int ends_fd(const struct item *it)
{
	return it->direct ? it->fd : it->tmpfd;
}

/*
 * Header and tail of every shard read in place or arriving, written
 * where it goes; it->tail is then the first byte of the tail fetched.
 */
static int get_ends(struct s3 *s, const char *bucket, struct item *v,
		    uint32_t n, struct diag *d)
{
	struct s3_fetch *g = NULL, *x = NULL;
	uint32_t *of = NULL, ng = 0, nx = 0;
	int err = 0;

	g = calloc(2 * (size_t)n + 1, sizeof(*g));
	of = calloc(2 * (size_t)n + 1, sizeof(*of));
	x = calloc((size_t)n + 1, sizeof(*x));
	if (!g || !of || !x) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	/* Header and tail of each: one range for a small object. */
	for (uint32_t i = 0; i < n; i++) {
		uint64_t size = v[i].o.size, tail = tail_len(&v[i]);

		if (!v[i].direct && !v[i].arriving)
			continue;
		if (size < SHARD_HEADER_SIZE + SHARD_TRAILER_SIZE) {
			err = diag_set(d, LOADER_EFORMAT,
				       "s3://%s/%s: %" PRIu64
				       " bytes is too short for a shard",
				       bucket, v[i].key, size);
			goto out;
		}
		v[i].tail = size - tail;
		v[i].head = SHARD_HEADER_SIZE;
		if (v[i].arriving)
			v[i].head = HEAD_FIRST;
		if (v[i].head > v[i].tail)
			v[i].head = v[i].tail;
		if (v[i].head) {
			of[ng] = i;
			g[ng++] = (struct s3_fetch){ .key = v[i].key,
						     .fd = ends_fd(&v[i]),
						     .off = 0,
						     .len = v[i].head,
						     .want = v[i].o };
		}
		of[ng] = i;
		g[ng++] = (struct s3_fetch){ .key = v[i].key,
					     .fd = ends_fd(&v[i]),
					     .off = size - tail,
					     .len = tail,
					     .want = v[i].o };
	}
	if (ng)
		err = s3_get_many(s, g, ng, d);
	/* Footers longer than the tail: the rest of each, all at once. */
	for (uint32_t k = 0; !err && k < ng; k++) {
		struct s3_fetch *t = &g[k];
		struct item *it = &v[of[k]];
		unsigned char tr[SHARD_TRAILER_SIZE];
		uint64_t foff;

		if (t->off + t->len != it->o.size ||
		    t->len < SHARD_TRAILER_SIZE)
			continue;
		err = fdio_pread_all(t->fd, tr, sizeof(tr),
				     it->o.size - sizeof(tr));
		if (err) {
			err = diag_set(d, err, "s3://%s/%s: its copy: %s",
				       bucket, it->key, strerror(-err));
			break;
		}
		foff = shard_trailer_footer(tr);
		/* A footer out of place is shard_open()'s to report. */
		if (foff >= t->off || foff < SHARD_HEADER_SIZE)
			continue;
		it->tail = foff;
		if (it->head > foff)
			it->head = foff;
		x[nx] = *t;
		x[nx].len = t->off - foff;
		x[nx++].off = foff;
	}
	if (!err && nx)
		err = s3_get_many(s, x, nx, d);
out:
	free(g);
	free(of);
	free(x);
	return err;
}

/*
 * Shards with no room in the cache: a memfd of the object's size each,
 * and the caller's struct s3read that reads their records.
 */
static int open_direct(const struct aws_cfg *cfg, const struct s3cache *c,
		       const char *bucket, struct item *v, uint32_t n,
		       struct s3read **rr, struct s3cache_stats *st,
		       struct diag *d)
{
	struct s3_params p = c->p.s3;
	uint32_t nd = 0;
	int err;

	for (uint32_t i = 0; i < n; i++)
		nd += v[i].direct;
	if (!nd)
		return 0;
	/*
	 * A batch's reads are many small requests, whose latency more of
	 * them at once hides (32: 15% faster than 8 here, against a
	 * gateway on the same 2 cores; 64 no better).
	 */
	if (p.parallel < S3READ_PARALLEL)
		p.parallel = S3READ_PARALLEL;
	p.cancel = NULL; /* the stream sets its own */
	err = s3read_new(rr, cfg, bucket, n, &p, d);
	for (uint32_t i = 0; !err && i < n; i++) {
		if (!v[i].direct)
			continue;
		err = s3read_add(*rr, i, v[i].key, &v[i].o, d);
		if (err)
			break;
		v[i].fd = memfd_create("s3-shard", MFD_CLOEXEC);
		if (v[i].fd < 0 || ftruncate(v[i].fd, (off_t)v[i].o.size))
			err = diag_set(d, -errno, "memfd for s3://%s/%s: %s",
				       bucket, v[i].key, strerror(errno));
	}
	st->direct = nd;
	return err;
}

/* ---- fetching while the stream reads ----------------------------------- */

/* The fetch of a stage's arriving shards, on a thread of its own. */
struct fill_job {
	struct s3cache *c;
	struct s3 *s; /* the client's credentials, wiped at the end */
	struct dataset *ds;
	struct verify_ctx *vc; /* checks each shard that came whole */
	struct s3fill *f;
	struct item *v; /* the arriving shards */
	uint32_t n;
	char bucket[AWS_BUCKET_MAX];
	char url[AWS_BUCKET_MAX + AWS_PREFIX_MAX + 8];
	char label[64];
	uint64_t bytes;	       /* of the shards kept */
	struct fchunk *chunks; /* the records' ranges, shard by shard */
	uint32_t nchunks;
	uint32_t cursor;	 /* chunks before it have all started */
	struct fshard_run *runs; /* one per arriving shard */
	uint64_t t0;
	uint32_t kept, failed, open; /* shards, as the fetch goes */
	char first[DIAG_MAX];	     /* the first shard's failure */
	pthread_t thread;
	bool over;
	struct fill_job *next;
};

/*
 * The records of each shard arrive in chunks of CHUNK bytes, ranged GETs
 * fetched up to the parallel count at once, in the order the reader
 * needs them: the chunks of the shards it waits for first, then the
 * others, each shard's from its start. So the region the reader is at
 * comes at the store's whole rate, even from a single large shard (a
 * GET at a time from a shard of 256 MiB, loaderctl pack's default,
 * would leave the store's parallelism unused), and a shard's bytes come
 * from its start on.
 *
 * A chunk's GET starts as soon as another ends (s3_get_fed()): fetched
 * in rounds, every round waited for its slowest chunk, and its chunks,
 * started together, ended together, so that the reader saw nothing of
 * a round until all of it came.
 *
 * The chunks start HEAD_FIRST bytes into the shard, which puts their
 * bounds off the 4 MiB stripes Ceph's RGW stores objects in: chunks of
 * 8 MiB on those bounds (4 or 8 MiB in) took twice as long to come here,
 * and so did chunks of 1, 2 and 4 MiB first, which put every later one
 * on them. 4 MiB chunks came faster than 8 MiB ones (the JPEG corpus's
 * 204 MB shard: 0.54-0.64 s against 0.63-0.98 s, 5 runs each, with the
 * readers waiting 0.02-0.07 s for them against 0.06-0.19 s). 16 at
 * once was no faster than 8.
 */
#define CHUNK (4u << 20)

struct fchunk {
	struct fill_job *j;
	uint32_t item; /* in j->v */
	uint64_t off, len;
	uint64_t got; /* bytes from off written (this try) */
	/*
	 * The checksum of the record the bytes come to (rec; in: its
	 * first byte came), and the file offset the next byte is for.
	 */
	XXH3_state_t *xs;
	uint64_t at, rec;
	bool in;
};

/*
 * Per arriving shard: its chunks [c0, c0 + nc), and how far they came;
 * its records as the tail gives them, and which of them matched their
 * checksums as their bytes came (ok; NULL: none checked so).
 */
struct fshard_run {
	uint32_t c0, nc;
	uint32_t first; /* the first chunk not whole */
	uint32_t next;	/* the first chunk not started */
	uint32_t left;	/* chunks not ended */
	int err;
	char why[DIAG_MAX];
	struct shard *sh;
	uint8_t *ok;
};

/* The first of sh's records at or after offset off (by its index). */
static uint64_t rec_at(const struct shard *sh, uint64_t off)
{
	uint64_t lo = 0, hi = shard_count(sh);

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct shard_rec r;

		if (!shard_rec(sh, mid, &r) && r.offset < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * s3_fetch.data of a chunk: each record whose bytes all come in it, in
 * order, is checked against its checksum as they do, so that the shard's
 * check when it is whole need not read them back (the bytes hashed are
 * those written). Records that began in the chunk before, or end in the
 * next, and any whose bytes do not come in order, are left to that
 * check.
 */
static void fill_data(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct fchunk *ch = arg;
	struct fshard_run *r = &ch->j->runs[ch->item];
	const unsigned char *p = buf;
	uint64_t n;

	if (!r->ok)
		return;
	if (!ch->xs) {
		ch->xs = XXH3_createState();
		if (!ch->xs)
			return;
		ch->at = UINT64_MAX;
	}
	n = shard_count(r->sh);
	if (off != ch->at) {
		/*
		 * The chunk's first bytes, or a try again from its start: what
		 * an earlier try checked is written over, and checked again.
		 * Its bytes count as come only as this try writes them: a try
		 * that came whole and then failed, followed by one that ends
		 * before writing, must not leave the chunk whole with marks
		 * made from bytes that never reached the file.
		 */
		struct shard_rec rec;

		ch->got = 0;
		ch->at = off;
		ch->in = false;
		ch->rec = rec_at(r->sh, off);
		for (uint64_t k = ch->rec;
		     k < n && !shard_rec(r->sh, k, &rec) &&
		     rec.offset < ch->off + ch->len;
		     k++)
			r->ok[k] = 0;
	}
	while (len && ch->rec < n) {
		struct shard_rec rec;
		uint64_t left;
		size_t k;

		if (shard_rec(r->sh, ch->rec, &rec))
			break;
		if (!ch->in) {
			if (rec.offset < ch->at) {
				ch->rec++; /* its start did not come here */
				continue;
			}
			if (rec.offset - ch->at >= len)
				break;
			p += rec.offset - ch->at;
			len -= rec.offset - ch->at;
			ch->at = rec.offset;
			XXH3_64bits_reset(ch->xs);
			ch->in = true;
		}
		left = rec.offset + rec.length - ch->at;
		k = len < left ? len : (size_t)left;
		XXH3_64bits_update(ch->xs, p, k);
		p += k;
		len -= k;
		ch->at += k;
		if (k == left) {
			r->ok[ch->rec] = XXH3_64bits_digest(ch->xs) == rec.xxh3;
			ch->rec++;
			ch->in = false;
		}
	}
	ch->at += len;
}

/*
 * s3_fetch.progress of a chunk: the shard's bytes from its start came
 * as far as its whole chunks and the first one's progress reach.
 */
static void fill_came(void *arg, uint64_t end)
{
	struct fchunk *ch = arg, *v = ch->j->chunks;
	struct fshard_run *r = &ch->j->runs[ch->item];
	struct item *it = &ch->j->v[ch->item];
	uint64_t at;

	ch->got = end - ch->off;
	while (r->first < r->c0 + r->nc && v[r->first].got == v[r->first].len)
		r->first++;
	at = r->first < r->c0 + r->nc ? v[r->first].off + v[r->first].got :
					it->tail;
	s3fill_came(ch->j->f, it->idx, at);
}

/*
 * Shard it (index i of the dataset) is done: whole and checked, it is
 * renamed into the cache; else its file goes. Either way it is no
 * longer in flight, and its readers learn of it.
 */
static bool fill_done(struct fill_job *j, struct item *it, uint32_t i,
		      const uint8_t *ok, int err, const char *why)
{
	struct s3cache *c = j->c;
	struct diag d = { "" };
	bool kept = false;

	if (!err) {
		err = j->vc ? check_copy(j->ds, i, it, j->bucket, j->vc, ok,
					 &d) :
			      diag_set(&d, -ENOMEM, "out of memory");
		if (!err && renameat(c->dfd, it->tmp, c->dfd, it->name))
			err = diag_set(&d, -errno, "%s/%s: %s", c->dir,
				       it->name, strerror(errno));
		why = d.msg;
	}
	if (!err) {
		it->tmp[0] = '\0';
		kept = true;
		pthread_mutex_lock(&c->mu);
		use_note(c, it->name);
		pthread_mutex_unlock(&c->mu);
	}
	if (err && why && why != j->first && !j->first[0])
		snprintf(j->first, sizeof(j->first), "%s", why);
	close(it->tmpfd);
	it->tmpfd = -1;
	if (it->tmp[0])
		(void)unlinkat(c->dfd, it->tmp, 0);
	it->tmp[0] = '\0';
	drop_flights(c, it, 1);
	s3fill_end(j->f, i, err, why);
	return kept;
}

/*
 * The next chunk: of a shard a reader waits for first, else the first
 * not started. A shard's chunks start in order either way.
 */
static bool fill_pick(struct fill_job *j, uint32_t *pick)
{
	for (uint32_t q = 0; q < j->n; q++) {
		struct fshard_run *r = &j->runs[q];

		if (r->next < r->c0 + r->nc &&
		    s3fill_wanted(j->f, j->v[q].idx)) {
			*pick = r->next++;
			return true;
		}
	}
	/* The cursor's chunk, when not started, is its shard's next. */
	while (j->cursor < j->nchunks &&
	       j->cursor < j->runs[j->chunks[j->cursor].item].next)
		j->cursor++;
	if (j->cursor == j->nchunks)
		return false;
	*pick = j->runs[j->chunks[j->cursor].item].next++;
	return true;
}

/*
 * What a fetch holds but its s3fill and its place in the list: the
 * client's credentials (wiped), the manifest, its shards and chunks.
 */
static void fill_job_drop(struct fill_job *j)
{
	s3_free(j->s);
	dataset_free(j->ds);
	verify_ctx_free(j->vc);
	for (uint32_t k = 0; j->runs && k < j->n; k++) {
		shard_close(j->runs[k].sh);
		free(j->runs[k].ok);
	}
	for (uint32_t k = 0; j->chunks && k < j->nchunks; k++)
		XXH3_freeState(j->chunks[k].xs);
	free(j->v);
	free(j->chunks);
	free(j->runs);
}

/* s3_get_fed()'s next: the next chunk to fetch. */
static bool fill_next(void *arg, struct s3_fetch *g)
{
	struct fill_job *j = arg;
	struct fchunk *ch;
	struct item *it;
	uint32_t k;

	if (!fill_pick(j, &k))
		return false;
	ch = &j->chunks[k];
	it = &j->v[ch->item];
	*g = (struct s3_fetch){
		.key = it->key,
		.fd = it->tmpfd,
		.off = ch->off,
		.len = ch->len,
		.want = it->o,
		.progress = fill_came,
		.data = fill_data,
		.arg = ch,
	};
	return true;
}

/* The shard's run ended: the shard is kept or dropped. */
static void fill_shard_end(struct fill_job *j, struct item *it,
			   struct fshard_run *r)
{
	if (fill_done(j, it, it->idx, r->ok, r->err, r->why))
		j->kept++, j->bytes += it->o.size;
	else
		j->failed++;
	j->open--;
}

/* s3_get_fed()'s done: a chunk ended. */
static void fill_chunk_end(void *arg, struct s3_fetch *g)
{
	struct fill_job *j = arg;
	struct fchunk *ch = g->arg;
	struct fshard_run *r = &j->runs[ch->item];
	int e = g->err;

	/* What came whole is kept, a cancel or not. */
	if (ch->got == ch->len)
		e = 0;
	else if (!e)
		e = -EIO;
	if (e && !r->err) {
		r->err = e;
		snprintf(r->why, sizeof(r->why), "%s",
			 g->why[0] ? g->why : strerror(-e));
	}
	XXH3_freeState(ch->xs);
	ch->xs = NULL;
	if (!--r->left)
		fill_shard_end(j, &j->v[ch->item], r);
}

static void *fill_main(void *arg)
{
	struct fill_job *j = arg;
	struct diag d = { "" };
	int stop = 0;

	pthread_setname_np(pthread_self(), "ld-fetch");
	j->open = j->n;
	if (!j->runs || (j->nchunks && !j->chunks)) {
		snprintf(j->first, sizeof(j->first), "out of memory");
		stop = -ENOMEM;
	}
	/* Shards whose header and tail were all of them are whole now. */
	for (uint32_t k = 0; !stop && k < j->n; k++)
		if (!j->runs[k].nc)
			fill_shard_end(j, &j->v[k], &j->runs[k]);
	/*
	 * The others' records, to check as they come; a shard whose tail
	 * does not open is checked whole at its end (and fails).
	 */
	for (uint32_t k = 0; !stop && k < j->n; k++) {
		struct fshard_run *r = &j->runs[k];
		struct diag od = { "" };

		if (!r->nc ||
		    shard_open(&r->sh, j->v[k].tmpfd, j->v[k].key, &od)) {
			r->sh = NULL;
			continue;
		}
		r->ok = calloc(shard_count(r->sh) ? shard_count(r->sh) : 1, 1);
	}
	if (!stop && j->open) {
		int err = s3_get_fed(j->s, fill_next, fill_chunk_end, j, &d);

		stop = err;
		if (err && err != -ECANCELED && !j->first[0])
			snprintf(j->first, sizeof(j->first), "%s", d.msg);
	}
	/* Stopped: the shards not whole will not come. */
	for (uint32_t k = 0; k < j->n; k++)
		if (j->v[k].tmpfd >= 0) {
			fill_done(j, &j->v[k], j->v[k].idx, NULL, stop,
				  stop == -ECANCELED ? "the stream ended" :
						       j->first);
			j->failed++;
		}
	if (!j->failed)
		plog(PLOG_INFO,
		     "%s: %s: %" PRIu32 " shards fetched (%" PRIu64
		     " bytes) into the shard cache in %.2f s (%.2f s of this"
		     " thread's CPU), %" PRIu64
		     " retries; the readers waited %.2f s for them",
		     j->label, j->url, j->kept, j->bytes,
		     (double)(clock_mono_ns() - j->t0) / 1e9,
		     (double)clock_thread_cpu_ns() / 1e9,
		     s3_counts(j->s).retries, s3fill_waited(j->f));
	else if (stop == -ECANCELED)
		plog(PLOG_INFO,
		     "%s: %s: fetching stopped, its stream ended: %" PRIu32
		     " of %" PRIu32 " shards fetched (%" PRIu64
		     " bytes), kept in the shard cache",
		     j->label, j->url, j->kept, j->n, j->bytes);
	else
		plog(PLOG_WARN,
		     "%s: %s: %" PRIu32 " of %" PRIu32
		     " shards could not be fetched (their records fail as bad samples): %s",
		     j->label, j->url, j->failed, j->n, j->first);
	fill_job_drop(j);
	pthread_mutex_lock(&j->c->mu);
	j->over = true;
	pthread_mutex_unlock(&j->c->mu);
	return NULL;
}

/* Join the fetches that ended (all of them, with all). */
static void reap_jobs(struct s3cache *c, bool all)
{
	for (;;) {
		struct fill_job **pp, *j = NULL;

		pthread_mutex_lock(&c->mu);
		for (pp = &c->jobs; *pp; pp = &(*pp)->next)
			if ((*pp)->over || all) {
				j = *pp;
				*pp = j->next;
				break;
			}
		pthread_mutex_unlock(&c->mu);
		if (!j)
			return;
		pthread_join(j->thread, NULL);
		s3fill_put(j->f);
		free(j);
	}
}

static void stop_jobs(struct s3cache *c)
{
	pthread_mutex_lock(&c->mu);
	for (struct fill_job *j = c->jobs; j; j = j->next)
		s3fill_stop(j->f);
	pthread_mutex_unlock(&c->mu);
	reap_jobs(c, true);
}

/*
 * The arriving shards (their ends in place): each given to the stream
 * as its temporary file, read-only, and fetched by a thread of their
 * own. The job takes ds, and the items' files and flights.
 */
static int start_fill(struct s3cache *c, const struct aws_cfg *cfg,
		      const char *bucket, const char *prefix, const char *label,
		      struct dataset **ds, struct item *v, uint32_t n,
		      struct s3fill *fill, struct diag *d)
{
	struct s3_params sp = c->p.s3;
	struct fill_job *j;
	uint32_t na = 0, k = 0;
	int err;

	for (uint32_t i = 0; i < n; i++)
		na += v[i].arriving;
	if (!na)
		return 0;
	j = calloc(1, sizeof(*j));
	if (!j || !(j->v = calloc(na, sizeof(*j->v)))) {
		free(j);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	j->f = s3fill_get(fill);
	sp.cancel = s3fill_cancelled(fill);
	err = s3_new(&j->s, cfg, bucket, &sp, d);
	for (uint32_t i = 0; !err && i < n; i++) {
		if (!v[i].arriving)
			continue;
		v[i].fd = openat(c->dfd, v[i].tmp, O_RDONLY | O_CLOEXEC);
		if (v[i].fd < 0) {
			err = diag_set(d, -errno, "%s/%s: %s", c->dir, v[i].tmp,
				       strerror(errno));
			break;
		}
		s3fill_add(fill, i, v[i].head, v[i].tail);
	}
	if (err) {
		fill_job_drop(j);
		s3fill_put(j->f);
		free(j);
		return err;
	}
	/* The job has the files and flights from here on. */
	for (uint32_t i = 0; i < n; i++) {
		if (!v[i].arriving)
			continue;
		j->v[k] = v[i];
		j->v[k].idx = i;
		j->v[k].fd = -1;
		k++;
		v[i].tmpfd = -1;
		v[i].tmp[0] = '\0';
		v[i].mine = false;
	}
	/* The records' chunks, shard by shard, each from its start. */
	for (uint32_t q = 0; q < na; q++)
		if (j->v[q].tail > j->v[q].head)
			j->nchunks += (uint32_t)((j->v[q].tail - j->v[q].head +
						  CHUNK - 1) /
						 CHUNK);
	j->chunks = calloc(j->nchunks ? j->nchunks : 1, sizeof(*j->chunks));
	j->runs = calloc(na, sizeof(*j->runs));
	for (uint32_t q = 0, m = 0; j->chunks && j->runs && q < na; q++) {
		struct fshard_run *r = &j->runs[q];

		r->c0 = r->first = r->next = m;
		for (uint64_t off = j->v[q].head; off < j->v[q].tail;
		     off += CHUNK) {
			uint64_t len = j->v[q].tail - off;

			j->chunks[m++] = (struct fchunk){
				.j = j,
				.item = q,
				.off = off,
				.len = len < CHUNK ? len : CHUNK,
			};
		}
		r->nc = r->left = m - r->c0;
	}
	j->c = c;
	j->n = na;
	j->ds = *ds;
	if (verify_ctx_new(&j->vc))
		j->vc = NULL; /* each shard's check then fails: no memory */
	snprintf(j->bucket, sizeof(j->bucket), "%s", bucket);
	snprintf(j->url, sizeof(j->url), "s3://%s%s%s", bucket,
		 prefix[0] ? "/" : "", prefix);
	snprintf(j->label, sizeof(j->label), "%s", label ? label : "stage");
	j->t0 = clock_mono_ns();
	/* Other stages may read these shards as they arrive, from now. */
	pthread_mutex_lock(&c->mu);
	for (uint32_t q = 0; q < na; q++) {
		struct flight *fl = flight_of(c, j->v[q].name);

		fl->f = j->f;
		fl->fi = j->v[q].idx;
		memcpy(fl->tmp, j->v[q].tmp, sizeof(fl->tmp));
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (pthread_create(&j->thread, NULL, fill_main, j)) {
		/* The items are the job's: undo it by hand. */
		for (uint32_t q = 0; q < na; q++) {
			s3fill_end(j->f, j->v[q].idx, -EAGAIN,
				   "no thread to fetch with");
			close(j->v[q].tmpfd);
			(void)unlinkat(c->dfd, j->v[q].tmp, 0);
			v[j->v[q].idx].mine = true;
		}
		drop_flights(c, v, n);
		j->ds = NULL; /* still the caller's */
		fill_job_drop(j);
		s3fill_put(j->f);
		free(j);
		return diag_set(d, -EAGAIN, "no thread to fetch with");
	}
	*ds = NULL;
	pthread_mutex_lock(&c->mu);
	j->next = c->jobs;
	c->jobs = j;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int stage_once(struct s3cache *c, struct s3 *s,
		      const struct aws_cfg *cfg, const struct s3_params *sp,
		      const char *bucket, const char *prefix, const char *label,
		      struct s3cache_staged *out, struct s3cache_stats *st,
		      struct diag *d)
{
	struct dataset *ds = NULL;
	struct item *v = NULL;
	struct s3_fetch *h = NULL;
	uint32_t *hi = NULL, nh = 0, n = 0;
	uint64_t cred = cred_hash(c, cfg), total = 0;
	struct s3_obj mobj = { 0 };
	char mkey[S3_KEY_MAX];
	int mfd = -1, err;

	snprintf(mkey, sizeof(mkey), "%s%s%s", prefix, prefix[0] ? "/" : "",
		 DSFILES_MANIFEST);
	err = get_manifest(s, mkey, &mfd, &ds, &mobj, d);
	if (err)
		goto out;
	n = ds->nshards;
	st->shards = n;
	v = calloc(n ? n : 1, sizeof(*v));
	h = calloc(n ? n : 1, sizeof(*h));
	hi = calloc(n ? n : 1, sizeof(*hi));
	if (!v || !h || !hi) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		int l = snprintf(v[i].key, sizeof(v[i].key), "%s%s%s", prefix,
				 prefix[0] ? "/" : "", ds->shards[i].file);

		v[i].fd = v[i].tmpfd = -1;
		v[i].records = ds->shards[i].records;
		if (l < 0 || (size_t)l >= sizeof(v[i].key)) {
			err = diag_set(d, LOADER_EUSAGE,
				       "s3://%s/%s: key too long", bucket,
				       ds->shards[i].file);
			goto out;
		}
		v[i].obj = obj_hash(cfg, bucket, v[i].key, mobj.etag);
		if (memo_get(c, cred, v[i].obj, &v[i].o))
			continue;
		h[nh].key = v[i].key;
		h[nh].fd = -1;
		hi[nh++] = i;
	}
	/* May these credentials read each shard, and which version is it? */
	if (nh) {
		struct s3_counts before = s3_counts(s);

		err = s3_get_many(s, h, nh, d);
		st->heads += s3_counts(s).requests - before.requests;
		if (err)
			goto out;
	}
	for (uint32_t k = 0; k < nh; k++) {
		v[hi[k]].o = h[k].got;
		memo_put(c, cred, v[hi[k]].obj, &h[k].got);
	}
	for (uint32_t i = 0; i < n; i++) {
		if (ds->shards[i].bytes && ds->shards[i].bytes != v[i].o.size) {
			err = diag_set(d, LOADER_EFORMAT,
				       "s3://%s/%s: %" PRIu64
				       " bytes, the manifest says %" PRIu64,
				       bucket, v[i].key, v[i].o.size,
				       ds->shards[i].bytes);
			goto out;
		}
		total += v[i].o.size;
		cache_name(cfg, bucket, &v[i]);
	}
	err = s3fill_new(&out->fill, n, d);
	if (!err)
		err = shardid_new(&out->ids, n, d);
	for (uint32_t i = 0; !err && i < n; i++) {
		uint64_t id[2];

		item_id(&v[i], id);
		shardid_set(out->ids, i, id);
	}
	if (err)
		goto out;
	for (int round = 0; round < ROUNDS; round++) {
		bool all = true;

		err = fetch_round(c, v, n, out->fill, sp, st, d);
		if (err)
			goto out;
		for (uint32_t i = 0; i < n; i++)
			all = all &&
			      (v[i].fd >= 0 || v[i].direct || v[i].arriving);
		if (all)
			break;
		if (round + 1 == ROUNDS) {
			err = diag_set(
				d, -EAGAIN,
				"s3://%s/%s: other stages kept failing to fetch its shards",
				bucket, prefix);
			goto out;
		}
	}
	err = open_direct(cfg, c, bucket, v, n, &out->rr, st, d);
	if (!err)
		err = get_ends(s, bucket, v, n, d);
	if (!err)
		err = start_fill(c, cfg, bucket, prefix, label, &ds, v, n,
				 out->fill, d);
	if (err)
		goto out;
	out->fds = malloc((n + 1) * sizeof(int));
	if (!out->fds) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	out->fds[0] = mfd;
	mfd = -1;
	for (uint32_t i = 0; i < n; i++) {
		out->fds[i + 1] = v[i].fd;
		v[i].fd = -1;
	}
	out->nfds = n + 1;
out:
	if (v) {
		for (uint32_t i = 0; i < n; i++)
			if (v[i].fd >= 0)
				close(v[i].fd);
		abandon(c, v, n);
	}
	if (mfd >= 0)
		close(mfd);
	if (err) {
		s3read_free(out->rr);
		out->rr = NULL;
		/* Its stream will not come: the fetch stops. */
		s3fill_cancel(out->fill);
		s3fill_put(out->fill);
		out->fill = NULL;
		shardid_free(out->ids);
		out->ids = NULL;
	}
	dataset_free(ds);
	free(v);
	free(h);
	free(hi);
	return err;
}

int s3cache_stage(struct s3cache *c, const struct aws_cfg *cfg, const char *url,
		  const char *label, const bool *cancel, uint64_t deadline_ms,
		  struct s3cache_staged *out, struct s3cache_stats *st,
		  struct diag *d)
{
	struct s3_params sp = c->p.s3;
	char bucket[AWS_BUCKET_MAX], prefix[AWS_PREFIX_MAX];
	struct s3cache_stats mine = { 0 };
	struct s3 *s = NULL;
	int err;

	memset(out, 0, sizeof(*out));
	if (!st)
		st = &mine;
	memset(st, 0, sizeof(*st));
	reap_jobs(c, false);
	sp.cancel = cancel;
	/* The fetch after the stage (start_fill()) is not bound by it. */
	sp.deadline_ms = deadline_ms;
	/*
	 * The stage's requests are small (HEADs, headers, tails): more of
	 * them at once hide their latency, as for reads in place.
	 */
	if (sp.parallel < S3READ_PARALLEL)
		sp.parallel = S3READ_PARALLEL;
	err = aws_url_parse(url, bucket, prefix, d);
	if (!err)
		err = s3_new(&s, cfg, bucket, &sp, d);
	if (err)
		return err;
	/*
	 * An object that changed between its HEAD and its GET (412) is
	 * looked at again once: the new version is a new cache file.
	 */
	for (int i = 0; i < 2; i++) {
		memset(st, 0, sizeof(*st));
		err = stage_once(c, s, cfg, &sp, bucket, prefix, label, out, st,
				 d);
		if (err != -ESTALE)
			break;
		/* Forget what these credentials were told of it. */
		pthread_mutex_lock(&c->mu);
		memset(c->memo, 0, MEMO_N * sizeof(*c->memo));
		pthread_mutex_unlock(&c->mu);
	}
	st->retries += s3_counts(s).retries;
	s3_free(s);
	return err;
}
