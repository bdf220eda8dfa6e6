/*
 * s3ds.c - datasets between a staging directory and an S3-API store.
 *
 * Uploads go up from several threads, each with its own client (a
 * struct s3 is for one thread): a dataset is mostly shards of a few
 * hundred megabytes, and one at a time would leave a fast link idle
 * between them. The parallel count is shared out: with T threads each
 * client runs parallel / T requests at once, so a single large shard
 * still goes up as parallel multipart parts, and many small ones as
 * parallel single PUTs. The main thread only draws the bar.
 *
 * Downloads use one client's s3_get_many() over slices of a few times
 * the parallel count, so that the bar moves between slices and no more
 * files are open at once than a slice needs.
 *
 * The store answers a HEAD of a missing object with a bare 404, the
 * same whether the key or the whole bucket is missing; only a GET's
 * error body says which (NoSuchKey, NoSuchBucket). So a 404 is told
 * apart by the store's code that s3.c puts in its message, "(Code)".
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "awscfg.h"
#include "dataset.h"
#include "loader_error.h"
#include "progress.h"
#include "s3.h"
#include "s3ds.h"

#define S3DS_URL_MAX	 (5 + AWS_BUCKET_MAX + 1 + AWS_PREFIX_MAX)
#define S3DS_SLICE	 4 /* objects fetched per s3_get_many(), per request */
#define S3DS_THREADS_MAX 64

struct s3ds {
	struct aws_cfg cfg;
	char bucket[AWS_BUCKET_MAX];
	char prefix[AWS_PREFIX_MAX];
	char url[S3DS_URL_MAX];
	struct s3ds_opts o;
	struct s3_params p;
	struct s3 *s3;	/* the calling thread's client */
	bool bucket_ok; /* the bucket is known to exist */
};

/* ---- process-wide ------------------------------------------------------ */

static int init_err = 1; /* 1: not yet called */

int s3ds_global_init(void)
{
	if (init_err == 1)
		init_err = s3_global_init();
	return init_err;
}

static volatile sig_atomic_t caught;

static void on_signal(int sig)
{
	caught = sig;
}

void s3ds_catch_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	/* The second signal finds the default action back: it kills. */
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

bool s3ds_interrupted(void)
{
	return caught != 0;
}

void s3ds_reraise(void)
{
	if (!caught)
		return;
	signal(caught, SIG_DFL);
	raise(caught);
}

/* ---- names ------------------------------------------------------------- */

/* a, b and c joined by '/', empty ones left out, into out (n bytes). */
static int join3(char *out, size_t n, const char *a, const char *b,
		 const char *c)
{
	const char *part[3] = { a, b, c };
	size_t o = 0;

	out[0] = '\0';
	for (int i = 0; i < 3; i++) {
		int k;

		if (!part[i] || !part[i][0])
			continue;
		k = snprintf(out + o, n - o, "%s%s", o ? "/" : "", part[i]);
		if (k < 0 || (size_t)k >= n - o)
			return -ENAMETOOLONG;
		o += (size_t)k;
	}
	return 0;
}

/* The key of name in the dataset PREFIX[/sub]. */
static int key_of(const struct s3ds *s, const char *sub, const char *name,
		  char out[S3_KEY_MAX], struct diag *d)
{
	if (join3(out, S3_KEY_MAX, s->prefix, sub, name))
		return diag_set(d, LOADER_EUSAGE,
				"s3://%s/%s/%s: key longer than %d bytes",
				s->bucket, s->prefix, sub ? sub : "",
				S3_KEY_MAX - 1);
	return 0;
}

/* The URL of the dataset PREFIX[/sub]. */
static void url_of(const struct s3ds *s, const char *sub, char *out, size_t n)
{
	char key[S3_KEY_MAX];

	if (join3(key, sizeof(key), s->prefix, sub, NULL))
		key[0] = '\0';
	snprintf(out, n, "s3://%s%s%s", s->bucket, key[0] ? "/" : "", key);
}

const char *s3ds_subst(char *out, size_t n, const char *s, const char *from,
		       const char *to)
{
	size_t o = 0, fl = from ? strlen(from) : 0, tl = to ? strlen(to) : 0;

	if (!n)
		return out;
	while (*s && o + 1 < n) {
		if (fl && !strncmp(s, from, fl)) {
			size_t k = tl < n - 1 - o ? tl : n - 1 - o;

			memcpy(out + o, to, k);
			o += k;
			s += fl;
		} else {
			out[o++] = *s++;
		}
	}
	out[o] = '\0';
	return out;
}

/*
 * Word a failure the way the user can act on it: a refusal names the
 * access key id that was refused, a missing bucket the bucket and the
 * endpoint. Returns err.
 */
static int explain(const struct s3ds *s, int err, struct diag *d)
{
	char m[DIAG_MAX];

	if (!d)
		return err;
	snprintf(m, sizeof(m), "%s", d->msg);
	if (err == -EACCES && s->cfg.access_key[0])
		return diag_set(
			d, err,
			"%s: access denied: the store refused access key id %s (a wrong secret key, a key without rights to bucket \"%s\", or a clock far off)",
			m, s->cfg.access_key, s->bucket);
	if (err == -EACCES)
		return diag_set(
			d, err,
			"%s: access denied to an anonymous request (no credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile)",
			m);
	if (err == -ENOENT && strstr(m, "(NoSuchBucket)"))
		return diag_set(
			d, err,
			"bucket \"%s\" does not exist at %s (%s); loaderctl makes no bucket",
			s->bucket, s->cfg.endpoint, m);
	return err;
}

/* ---- the handle -------------------------------------------------------- */

int s3ds_open(struct s3ds **out, const char *url, const struct s3ds_opts *o,
	      struct diag *d)
{
	struct s3ds *s;
	int err;

	*out = NULL;
	if (s3ds_global_init())
		return diag_set(d, -ENOMEM, "cannot initialise libcurl");
	s = calloc(1, sizeof(*s));
	if (!s)
		return diag_set(d, -ENOMEM, "out of memory");
	if (o)
		s->o = *o;
	err = aws_url_parse(url, s->bucket, s->prefix, d);
	if (!err)
		err = aws_cfg_resolve(&s->cfg, s->o.profile, d);
	if (err)
		goto fail;
	url_of(s, NULL, s->url, sizeof(s->url));
	s->p.parallel = s->o.parallel;
	s->p.part_bytes = s->o.part_bytes;
	err = s3_new(&s->s3, &s->cfg, s->bucket, &s->p, d);
	if (err)
		goto fail;
	*out = s;
	return 0;
fail:
	s3ds_free(s);
	return err;
}

void s3ds_free(struct s3ds *s)
{
	if (!s)
		return;
	s3_free(s->s3);
	aws_cfg_wipe(&s->cfg);
	free(s);
}

const char *s3ds_url(const struct s3ds *s)
{
	return s->url;
}

/* ---- staging ----------------------------------------------------------- */

static const char *stage_parent(const struct s3ds *s)
{
	const char *t = s->o.tmp_dir;

	if (!t || !t[0])
		t = getenv("TMPDIR");
	return t && t[0] ? t : S3DS_TMP_DEFAULT;
}

int s3ds_stage(const struct s3ds *s, char *dir, size_t n, struct diag *d)
{
	const char *parent = stage_parent(s);
	int k = snprintf(dir, n, "%s/loaderctl-XXXXXX", parent);

	if (k < 0 || (size_t)k >= n) {
		dir[0] = '\0';
		return diag_set(d, -ENAMETOOLONG, "%s: path too long", parent);
	}
	if (!mkdtemp(dir)) {
		int err = -errno;

		dir[0] = '\0';
		return diag_set(
			d, err,
			"cannot make a staging directory in %s: %s (--tmp-dir or TMPDIR names another)",
			parent, strerror(-err));
	}
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

void s3ds_unstage(const char *dir)
{
	if (dir && dir[0])
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Whether dir's file system has room for need bytes, said in d if not. */
static int check_room(const struct s3ds *s, const char *dir, uint64_t need,
		      struct diag *d)
{
	struct statvfs v;
	uint64_t room;
	char a[32], b[32];

	if (statvfs(dir, &v))
		return 0; /* unknown: the writes will say */
	room = (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
	if (room >= need)
		return 0;
	return diag_set(
		d, -ENOSPC,
		"%s needs %s of local room, and %s has %s free (--tmp-dir or TMPDIR names another place)",
		s->url, progress_bytes((double)need, a, sizeof(a)),
		stage_parent(s), progress_bytes((double)room, b, sizeof(b)));
}

/* ---- pack: the target -------------------------------------------------- */

/*
 * key was not found: find out whether the bucket is there (a GET's 404
 * says which of the two is missing), once per handle.
 */
static int check_bucket(struct s3ds *s, const char *key, struct diag *d)
{
	void *buf = NULL;
	size_t len;
	int err;

	if (s->bucket_ok)
		return 0;
	err = s3_get_mem(s->s3, key, 1, &buf, &len, NULL, d);
	free(buf);
	if (err == -ENOENT && strstr(d->msg, "(NoSuchBucket)"))
		return explain(s, err, d);
	if (err && err != -ENOENT && err != LOADER_ETOOBIG)
		return explain(s, err, d);
	/* NoSuchKey, or the object has just come: the bucket is there. */
	diag_clear(d);
	s->bucket_ok = true;
	return 0;
}

int s3ds_check_target(struct s3ds *s, const char *sub, bool force,
		      struct diag *d)
{
	char key[S3_KEY_MAX], url[S3DS_URL_MAX];
	struct s3_obj o;
	int err;

	err = key_of(s, sub, DSFILES_MANIFEST, key, d);
	if (err)
		return err;
	err = s3_head(s->s3, key, &o, d);
	if (!err) {
		s->bucket_ok = true;
		if (force)
			return 0;
		url_of(s, sub, url, sizeof(url));
		return diag_set(d, -EEXIST,
				"%s already holds a dataset (%s, %" PRIu64
				" bytes); pass --force to replace it",
				url, DSFILES_MANIFEST, o.size);
	}
	if (err != -ENOENT)
		return explain(s, err, d);
	return check_bucket(s, key, d);
}

/* ---- pack: upload ------------------------------------------------------ */

/* A dataset in the store that a push replaces. */
struct push_old {
	const char *sub;     /* where: PREFIX[/sub] */
	bool there;	     /* a manifest.json is there */
	struct dataset *ds;  /* what it names, when it could be read */
	struct dataset *now; /* the dataset that replaces it */
};

struct push_obj {
	char key[S3_KEY_MAX];
	char path[PATH_MAX];
	uint64_t size;
};

/* The upload of a list of objects, shared by its threads. */
struct push_run {
	struct s3ds *s;
	const struct push_obj *obj;
	size_t n, next, done;
	uint64_t bytes;
	struct s3_params p; /* each thread's client */
	unsigned running;
	struct s3_counts counts;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int err;
	struct diag d;
};

/* Store one file with client c. */
static int put_file(struct s3 *c, const struct push_obj *ob, struct diag *d)
{
	int fd = open(ob->path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return diag_set(d, -errno, "%s: %s", ob->path, strerror(errno));
	err = s3_put_fd(c, ob->key, fd, ob->size, NULL, d);
	close(fd);
	return err;
}

static void *push_worker(void *arg)
{
	struct push_run *r = arg;
	struct s3 *c = NULL;
	struct diag d = { "" };
	int err;

	err = s3_new(&c, &r->s->cfg, r->s->bucket, &r->p, &d);
	pthread_mutex_lock(&r->mu);
	while (!err && !r->err && r->next < r->n) {
		size_t i = r->next++;

		if (s3ds_interrupted()) {
			err = diag_set(&d, -EINTR, "interrupted");
			break;
		}
		pthread_mutex_unlock(&r->mu);
		err = put_file(c, &r->obj[i], &d);
		pthread_mutex_lock(&r->mu);
		if (!err) {
			r->done++;
			r->bytes += r->obj[i].size;
			pthread_cond_signal(&r->cv);
		}
	}
	if (err && !r->err) {
		r->err = err;
		r->d = d;
	}
	if (c) {
		struct s3_counts k = s3_counts(c);

		r->counts.requests += k.requests;
		r->counts.retries += k.retries;
	}
	r->running--;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	s3_free(c);
	return NULL;
}

/* The label of a transfer's bar: what, and objects done of all. */
static void bar_label(char *buf, size_t n, const char *what, size_t done,
		      size_t all)
{
	snprintf(buf, n, "%s %zu/%zu", what, done, all);
}

/* Store n objects in parallel threads; the bar counts their bytes. */
static int push_many(struct s3ds *s, const struct push_obj *obj, size_t n,
		     struct progress *pg, char *label, size_t ln, size_t all,
		     size_t before, struct s3ds_xfer *x, struct diag *d)
{
	pthread_t th[S3DS_THREADS_MAX];
	struct push_run r = { .s = s, .obj = obj, .n = n };
	unsigned want = s->p.parallel ? s->p.parallel : 8, started = 0;
	uint64_t shown = 0;

	if (!n)
		return 0;
	if (want > n)
		want = (unsigned)n;
	if (want > S3DS_THREADS_MAX)
		want = S3DS_THREADS_MAX;
	r.p = s->p;
	r.p.parallel = (s->p.parallel ? s->p.parallel : 8) / want;
	if (!r.p.parallel)
		r.p.parallel = 1;
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	pthread_mutex_lock(&r.mu);
	for (; started < want; started++) {
		if (pthread_create(&th[started], NULL, push_worker, &r))
			break;
		r.running++;
	}
	if (!started) {
		r.err = diag_set(&r.d, -EAGAIN,
				 "cannot start an upload thread");
	}
	while (r.running) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&r.cv, &r.mu, &ts);
		bar_label(label, ln, "upload", before + r.done, all);
		progress_add(pg, r.bytes - shown);
		shown = r.bytes;
	}
	pthread_mutex_unlock(&r.mu);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	x->objects += r.done;
	x->bytes += r.bytes;
	x->requests += r.counts.requests;
	x->retries += r.counts.retries;
	if (r.err) {
		if (d)
			*d = r.d;
		return explain(s, r.err, d);
	}
	return 0;
}

/* Whether ds names a shard called name. */
static bool names_shard(const struct dataset *ds, const char *name)
{
	for (uint32_t i = 0; ds && i < ds->nshards; i++)
		if (!strcmp(ds->shards[i].file, name))
			return true;
	return false;
}

/*
 * The dataset a push replaces at PREFIX[/sub]: whether a manifest is
 * there, and what it names when it can be read (a manifest that cannot
 * be read is replaced all the same, but its shards are not known, so
 * none is removed).
 */
static int remote_old(struct s3ds *s, const char *sub, struct push_old *old,
		      struct diag *d)
{
	char key[S3_KEY_MAX], url[S3DS_URL_MAX + 32];
	struct diag ignore = { "" };
	void *buf = NULL;
	size_t len, done = 0;
	int fd, err;

	err = key_of(s, sub, DSFILES_MANIFEST, key, d);
	if (err)
		return err;
	err = s3_get_mem(s->s3, key, DSFILES_MANIFEST_MAX, &buf, &len, NULL, d);
	if (err == -ENOENT && !strstr(d->msg, "(NoSuchBucket)")) {
		diag_clear(d);
		return 0;
	}
	if (err && err != LOADER_ETOOBIG)
		return explain(s, err, d);
	diag_clear(d);
	old->there = true;
	fd = err ? -1 : memfd_create("manifest", MFD_CLOEXEC);
	while (fd >= 0 && done < len) {
		ssize_t w = write(fd, (const char *)buf + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	url_of(s, sub, url, sizeof(url));
	strncat(url, "/" DSFILES_MANIFEST, sizeof(url) - strlen(url) - 1);
	if (fd >= 0 && done == len && !lseek(fd, 0, SEEK_SET) &&
	    dataset_load_fd(&old->ds, fd, url, &ignore))
		old->ds = NULL;
	if (fd >= 0)
		close(fd);
	free(buf);
	return 0;
}

/*
 * Give the staged dataset ds (in local) shard names that the one it
 * replaces does not use, "shard-TAG-NNNNN.lds" with a random TAG, and
 * save its manifest again: its shards then go up beside the old ones,
 * which stay readable until the new manifest is stored.
 */
static int retag(const char *local, struct dataset *ds,
		 const struct push_old *old, struct diag *d)
{
	char name[64], from[PATH_MAX], to[PATH_MAX];
	uint32_t tag = 0;
	bool clash = true;

	for (int tries = 0; clash && tries < 64; tries++) {
		if (getrandom(&tag, sizeof(tag), 0) != sizeof(tag))
			tag = (uint32_t)time(NULL) ^ (uint32_t)getpid() ^
			      (uint32_t)tries * 2654435761u;
		clash = false;
		for (uint32_t i = 0; !clash && i < ds->nshards; i++) {
			snprintf(name, sizeof(name),
				 "shard-%08" PRIx32 "-%05" PRIu32 ".lds", tag,
				 i);
			clash = names_shard(old->ds, name);
		}
	}
	for (uint32_t i = 0; i < ds->nshards; i++) {
		char *dup;

		snprintf(name, sizeof(name),
			 "shard-%08" PRIx32 "-%05" PRIu32 ".lds", tag, i);
		if (join3(from, sizeof(from), local, ds->shards[i].file,
			  NULL) ||
		    join3(to, sizeof(to), local, name, NULL))
			return diag_set(d, -ENAMETOOLONG, "%s: path too long",
					local);
		if (rename(from, to))
			return diag_set(d, -errno, "%s: rename: %s", from,
					strerror(errno));
		dup = strdup(name);
		if (!dup)
			return diag_set(d, -ENOMEM, "out of memory");
		free(ds->shards[i].file);
		ds->shards[i].file = dup;
	}
	return dataset_save(ds, d);
}

/*
 * Add what dir/sub's manifest names, and the manifest, to the lists.
 * When a dataset is there in the store already (old), the staged one's
 * shards are renamed first, so that the two share no name.
 */
static int list_dataset(struct s3ds *s, const char *dir, const char *sub,
			bool force, struct push_obj **sh, size_t *ns,
			struct push_obj *man, struct push_old *old,
			struct diag *d)
{
	char local[PATH_MAX];
	struct dataset *ds = NULL;
	struct push_obj *v;
	struct stat st;
	int err;

	if (join3(local, sizeof(local), dir, sub, NULL))
		return diag_set(d, -ENAMETOOLONG, "%s: path too long", dir);
	err = dataset_load(&ds, local, d);
	if (!err)
		err = remote_old(s, sub, old, d);
	/* One may have come while this one was packed: look again. */
	if (!err && old->there && !force)
		err = s3ds_check_target(s, sub, false, d);
	if (!err && old->there)
		err = retag(local, ds, old, d);
	if (err) {
		dataset_free(ds);
		return err;
	}
	old->sub = sub;
	old->now = ds;
	v = realloc(*sh, (*ns + ds->nshards) * sizeof(*v));
	if (!v)
		return diag_set(d, -ENOMEM, "out of memory");
	*sh = v;
	for (uint32_t i = 0; i < ds->nshards; i++) {
		struct push_obj *ob = &v[*ns];

		err = key_of(s, sub, ds->shards[i].file, ob->key, d);
		if (!err && join3(ob->path, sizeof(ob->path), local,
				  ds->shards[i].file, NULL))
			err = diag_set(d, -ENAMETOOLONG, "%s: path too long",
				       local);
		if (!err && stat(ob->path, &st))
			err = diag_set(d, -errno, "%s: %s", ob->path,
				       strerror(errno));
		if (err)
			break;
		ob->size = (uint64_t)st.st_size;
		++*ns;
	}
	if (err)
		return err;
	err = key_of(s, sub, DSFILES_MANIFEST, man->key, d);
	if (!err &&
	    join3(man->path, sizeof(man->path), local, DSFILES_MANIFEST, NULL))
		err = diag_set(d, -ENAMETOOLONG, "%s: path too long", local);
	if (!err && stat(man->path, &st))
		err = diag_set(d, -errno, "%s: %s", man->path, strerror(errno));
	if (!err)
		man->size = (uint64_t)st.st_size;
	return err;
}

/*
 * Once the new manifest is stored: delete the shards the replaced one
 * named and the new one does not. A failure leaves them in the store,
 * named by nothing; x counts them and says why.
 */
static void remove_old(struct s3ds *s, const struct push_old *old,
		       struct s3ds_xfer *x)
{
	char key[S3_KEY_MAX];
	struct diag d = { "" };

	for (uint32_t i = 0; old->ds && i < old->ds->nshards; i++) {
		const char *name = old->ds->shards[i].file;

		if (names_shard(old->now, name))
			continue;
		if (key_of(s, old->sub, name, key, &d) ||
		    s3_delete(s->s3, key, &d)) {
			if (!x->left++)
				snprintf(x->why, sizeof(x->why), "%s", d.msg);
			continue;
		}
		x->removed++;
	}
}

int s3ds_push(struct s3ds *s, const char *dir, const char *const *subs,
	      size_t n, bool force, struct s3ds_xfer *x, struct diag *d)
{
	struct push_obj *sh = NULL, *man = calloc(n ? n : 1, sizeof(*man));
	struct push_old *old = calloc(n ? n : 1, sizeof(*old));
	struct s3_counts k0 = s3_counts(s->s3), k1;
	struct progress pg;
	char label[64];
	size_t ns = 0;
	uint64_t total = 0;
	double t0 = progress_now();
	int err = 0;

	memset(x, 0, sizeof(*x));
	if (!man || !old) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; !err && i < n; i++)
		err = list_dataset(s, dir, subs[i], force, &sh, &ns, &man[i],
				   &old[i], d);
	if (err)
		goto out;
	for (size_t i = 0; i < ns; i++)
		total += sh[i].size;
	for (size_t i = 0; i < n; i++)
		total += man[i].size;
	bar_label(label, sizeof(label), "upload", 0, ns + n);
	progress_start(&pg, label, "B", total);
	err = push_many(s, sh, ns, &pg, label, sizeof(label), ns + n, 0, x, d);
	/*
	 * Only now, with every shard stored, the manifests: a reader that
	 * finds one finds all it names. The replaced dataset's shards go
	 * only after its manifest was replaced.
	 */
	for (size_t i = 0; !err && i < n; i++) {
		if (s3ds_interrupted()) {
			err = diag_set(d, -EINTR, "interrupted");
			break;
		}
		err = put_file(s->s3, &man[i], d);
		if (err) {
			err = explain(s, err, d);
			break;
		}
		x->objects++;
		x->bytes += man[i].size;
		bar_label(label, sizeof(label), "upload", ns + i + 1, ns + n);
		progress_add(&pg, man[i].size);
		remove_old(s, &old[i], x);
	}
	progress_end(&pg);
	k1 = s3_counts(s->s3);
	x->requests += k1.requests - k0.requests;
	x->retries += k1.retries - k0.retries;
out:
	x->seconds = progress_now() - t0;
	for (size_t i = 0; old && i < n; i++) {
		dataset_free(old[i].ds);
		dataset_free(old[i].now);
	}
	free(old);
	free(sh);
	free(man);
	return err;
}

/* ---- inspect, verify: download ----------------------------------------- */

/* Write len bytes of buf as the new file path. */
static int write_new(const char *path, const void *buf, size_t len,
		     struct diag *d)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	size_t done = 0;
	int err = 0;

	if (fd < 0)
		return diag_set(d, -errno, "%s: %s", path, strerror(errno));
	while (done < len) {
		ssize_t w = write(fd, (const char *)buf + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			err = diag_set(d, -errno, "%s: %s", path,
				       strerror(errno));
			break;
		}
		done += (size_t)w;
	}
	if (close(fd) && !err)
		err = diag_set(d, -errno, "%s: %s", path, strerror(errno));
	return err;
}

/* Every shard ds names, into dir under its own name, a slice at a time. */
static int fetch_shards(struct s3ds *s, const struct dataset *ds,
			const char *dir, struct s3ds_xfer *x, struct diag *d)
{
	size_t slice = (s->p.parallel ? s->p.parallel : 8) * S3DS_SLICE;
	struct s3_fetch *f = calloc(slice, sizeof(*f));
	char(*keys)[S3_KEY_MAX] = calloc(slice, sizeof(*keys));
	struct progress pg;
	char label[64], path[PATH_MAX];
	uint64_t total = 0;
	int err = 0;

	if (!f || !keys) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < ds->nshards; i++)
		total += ds->shards[i].bytes;
	bar_label(label, sizeof(label), "fetch", 0, ds->nshards);
	progress_start(&pg, label, "B", total);
	for (size_t at = 0; !err && at < ds->nshards; at += slice) {
		size_t m = ds->nshards - at < slice ? ds->nshards - at : slice;
		size_t opened = 0;

		if (s3ds_interrupted()) {
			err = diag_set(d, -EINTR, "interrupted");
			break;
		}
		for (; !err && opened < m; opened++) {
			const char *file = ds->shards[at + opened].file;

			memset(&f[opened], 0, sizeof(f[opened]));
			err = key_of(s, NULL, file, keys[opened], d);
			if (err)
				break;
			if (join3(path, sizeof(path), dir, file, NULL)) {
				err = diag_set(d, -ENAMETOOLONG,
					       "%s: path too long", dir);
				break;
			}
			f[opened].key = keys[opened];
			f[opened].fd = open(
				path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
				0600);
			if (f[opened].fd < 0) {
				err = diag_set(d, -errno, "%s: %s", path,
					       strerror(errno));
				break;
			}
		}
		if (!err)
			err = s3_get_many(s->s3, f, m, d);
		for (size_t j = 0; j < opened; j++) {
			close(f[j].fd);
			if (err)
				continue;
			x->objects++;
			x->bytes += f[j].got.size;
			/* x counts the manifest too. */
			bar_label(label, sizeof(label), "fetch",
				  (size_t)x->objects - 1, ds->nshards);
			progress_add(&pg, f[j].got.size);
		}
		if (err)
			err = explain(s, err, d);
	}
	progress_end(&pg);
out:
	free(f);
	free(keys);
	return err;
}

/* The single object PREFIX into dir under its base name. */
static int fetch_object(struct s3ds *s, const char *dir, char *path, size_t pn,
			char *shown, size_t sn, struct s3ds_xfer *x,
			struct diag *d)
{
	const char *base = strrchr(s->prefix, '/');
	struct s3_obj o, got;
	int fd, err;

	err = s3_head(s->s3, s->prefix, &o, d);
	if (err == -ENOENT)
		return diag_set(
			d, err,
			"%s: no such dataset (no %s/%s) and no such object",
			s->url, s->url, DSFILES_MANIFEST);
	if (err)
		return explain(s, err, d);
	err = check_room(s, dir, o.size, d);
	if (err)
		return err;
	base = base ? base + 1 : s->prefix;
	if (join3(path, pn, dir, base, NULL))
		return diag_set(d, -ENAMETOOLONG, "%s: path too long", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return diag_set(d, -errno, "%s: %s", path, strerror(errno));
	/* If-Match on the ETag just seen: the version whose size we know. */
	err = s3_get_fd(s->s3, s->prefix, fd, 0, &o, &got, d);
	close(fd);
	if (err)
		return explain(s, err, d);
	x->objects = 1;
	x->bytes = got.size;
	/* Shown in place of dir: the URL of the object's "directory". */
	snprintf(shown, sn, "s3://%s%s%.*s", s->bucket,
		 base > s->prefix ? "/" : "",
		 base > s->prefix ? (int)(base - 1 - s->prefix) : 0, s->prefix);
	return 0;
}

static int s3ds_fetch(struct s3ds *s, const char *dir, char *path, size_t pn,
		      char *shown, size_t sn, struct s3ds_xfer *x,
		      struct diag *d);

int s3ds_get(struct s3ds_got *g, const char *url, const struct s3ds_opts *o,
	     struct diag *d)
{
	int err;

	memset(g, 0, sizeof(*g));
	err = s3ds_open(&g->s, url, o, d);
	if (err)
		return err;
	s3ds_catch_signals();
	err = s3ds_stage(g->s, g->stage, sizeof(g->stage), d);
	if (!err)
		err = s3ds_fetch(g->s, g->stage, g->path, sizeof(g->path),
				 g->shown, sizeof(g->shown), &g->x, d);
	return err;
}

void s3ds_got_free(struct s3ds_got *g)
{
	s3ds_unstage(g->stage);
	g->stage[0] = '\0';
	s3ds_free(g->s);
	g->s = NULL;
}

/*
 * Fetch what the URL names into the staging directory dir: a dataset
 * (PREFIX/manifest.json and every shard it names, each under its own
 * name), or else the single object PREFIX (under its base name). path
 * (pn bytes) gets the local path to run the command on: dir, or
 * dir/NAME. shown (sn bytes) gets the URL to show in place of dir: the
 * URL, or its parent's for an object. Refuses, before fetching shards,
 * when dir's file system lacks the room for them. x gets what came.
 */
static int s3ds_fetch(struct s3ds *s, const char *dir, char *path, size_t pn,
		      char *shown, size_t sn, struct s3ds_xfer *x,
		      struct diag *d)
{
	char key[S3_KEY_MAX], local[PATH_MAX];
	struct s3_counts k0 = s3_counts(s->s3), k1;
	struct dataset *ds = NULL;
	double t0 = progress_now();
	void *buf = NULL;
	size_t len;
	uint64_t need = 0;
	int err;

	memset(x, 0, sizeof(*x));
	err = key_of(s, NULL, DSFILES_MANIFEST, key, d);
	if (err)
		return err;
	err = s3_get_mem(s->s3, key, DSFILES_MANIFEST_MAX, &buf, &len, NULL, d);
	if (err == -ENOENT && !strstr(d->msg, "(NoSuchBucket)")) {
		if (!s->prefix[0])
			return diag_set(d, err, "%s: no dataset (no %s/%s)",
					s->url, s->url, DSFILES_MANIFEST);
		err = fetch_object(s, dir, path, pn, shown, sn, x, d);
		goto out;
	}
	if (err)
		return explain(s, err, d);
	x->objects = 1;
	x->bytes = len;
	if (join3(local, sizeof(local), dir, DSFILES_MANIFEST, NULL))
		err = diag_set(d, -ENAMETOOLONG, "%s: path too long", dir);
	if (!err)
		err = write_new(local, buf, len, d);
	free(buf);
	/* The local check of the manifest: shard names are plain names. */
	if (!err)
		err = dataset_load(&ds, dir, d);
	if (err)
		goto out;
	for (uint32_t i = 0; i < ds->nshards; i++)
		need += ds->shards[i].bytes;
	err = check_room(s, dir, need, d);
	if (!err)
		err = fetch_shards(s, ds, dir, x, d);
	dataset_free(ds);
	if (!err) {
		snprintf(path, pn, "%s", dir);
		snprintf(shown, sn, "%s", s->url);
	}
out:
	k1 = s3_counts(s->s3);
	x->requests = k1.requests - k0.requests;
	x->retries = k1.retries - k0.retries;
	x->seconds = progress_now() - t0;
	return err;
}

void s3ds_print_xfer(FILE *f, const char *verb, const char *prep,
		     const char *url, const struct s3ds_xfer *x)
{
	char a[32], b[32];

	fprintf(f, "%s %" PRIu64 " object%s, %s %s %s in %.2f s (%s/s)", verb,
		x->objects, x->objects == 1 ? "" : "s",
		progress_bytes((double)x->bytes, a, sizeof(a)), prep, url,
		x->seconds,
		progress_bytes(x->seconds > 0 ? (double)x->bytes / x->seconds :
						0,
			       b, sizeof(b)));
	if (x->retries)
		fprintf(f, ", %" PRIu64 " of %" PRIu64 " requests retried",
			x->retries, x->requests);
	fprintf(f, "\n");
}
