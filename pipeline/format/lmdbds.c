/*
 * lmdbds.c - an LMDB database of samples (lmdbds.h): the convention's
 * kinds, schema and labels, each sample's fields through the map, and
 * the index to read it in place, made in a child process for a daemon.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lmdb.h>

#include "clock.h"
#include "datum.h"
#include "dsfiles.h"
#include "fault.h"
#include "fdio.h"
#include "lmdbds.h"
#include "loader_error.h"
#include "recindex.h"

enum lmdb_kind { LK_DATUM_JPEG, LK_DATUM_PIXELS, LK_JPEG, LK_BYTES };

struct lmdbds {
	char *path;
	MDB_env *env;
	MDB_txn *txn;
	MDB_val *keys, *vals; /* count of each, valid while txn is */
	uint64_t count;
	struct schema schema;
	enum lmdb_kind kind;
	bool labels;	/* a cls field */
	char **classes; /* from CLASS/NAME keys, sorted */
	uint32_t nclasses;
	unsigned char lab[8]; /* the last label, little-endian */
	uint64_t bytes_in;
};

static void free_names(char **v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void lmdbds_close(struct lmdbds *s)
{
	if (!s)
		return;
	free_names(s->classes, s->nclasses);
	if (s->txn)
		mdb_txn_abort(s->txn);
	if (s->env)
		mdb_env_close(s->env);
	free(s->keys);
	free(s->vals);
	free(s->path);
	free(s);
}

const struct schema *lmdbds_schema(const struct lmdbds *l)
{
	return &l->schema;
}

uint64_t lmdbds_count(const struct lmdbds *l)
{
	return l->count;
}

uint32_t lmdbds_classes(const struct lmdbds *l, char *const **names)
{
	*names = l->classes;
	return l->nclasses;
}

uint64_t lmdbds_bytes_in(const struct lmdbds *l)
{
	return l->bytes_in;
}

bool lmdbds_detect(const char *path)
{
	char p[4096];
	unsigned char m[DSFILES_LMDB_META];
	struct stat st;
	const char *f = path;
	int fd;
	bool ok;

	if (stat(path, &st))
		return false;
	if (S_ISDIR(st.st_mode)) {
		snprintf(p, sizeof(p), "%s/data.mdb", path);
		f = p;
	}
	fd = open(f, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = !fdio_pread_all(fd, m, sizeof(m), 0) && dsfiles_lmdb_meta(m);
	close(fd);
	return ok;
}

/* The key as text for messages: printable as it is, else hex. */
static void key_text(const MDB_val *k, char *out, size_t n)
{
	const unsigned char *p = k->mv_data;
	bool printable = k->mv_size > 0;
	size_t o = 0;

	for (size_t i = 0; i < k->mv_size; i++)
		printable &= p[i] >= ' ' && p[i] <= '~';
	if (printable) {
		snprintf(out, n, "\"%.*s\"",
			 (int)(k->mv_size < 200 ? k->mv_size : 200),
			 (const char *)p);
		return;
	}
	for (size_t i = 0; i < k->mv_size && i < 32 && o + 3 < n; i++)
		o += (size_t)snprintf(out + o, n - o, "%02x", p[i]);
	if (o < n)
		out[o] = '\0';
}

/* The CLASS of a CLASS/NAME key: its length, 0 if the key has none. */
static size_t class_len(const MDB_val *k)
{
	const char *s = k->mv_data, *slash = memchr(s, '/', k->mv_size);

	return slash && slash != s ? (size_t)(slash - s) : 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Class names: every key's CLASS, sorted, once each. */
static int collect_classes(struct lmdbds *s, struct diag *d)
{
	char **v = NULL;
	uint32_t n = 0, cap = 0;

	for (uint64_t i = 0; i < s->count; i++) {
		size_t cl = class_len(&s->keys[i]);
		char kt[256];

		if (!cl) {
			key_text(&s->keys[i], kt, sizeof(kt));
			free_names(v, n);
			return diag_set(
				d, LOADER_ESCHEMA,
				"%s: key %s has no CLASS/ (the first key has one: every key must)",
				s->path, kt);
		}
		if (n && strlen(v[n - 1]) == cl &&
		    !memcmp(v[n - 1], s->keys[i].mv_data, cl))
			continue; /* keys are sorted: a class's keys are together */
		if (n == cap) {
			char **p =
				realloc(v, (cap ? 2 * cap : 16) * sizeof(*v));

			if (!p)
				goto nomem;
			v = p;
			cap = cap ? 2 * cap : 16;
		}
		v[n] = strndup(s->keys[i].mv_data, cl);
		if (!v[n])
			goto nomem;
		n++;
	}
	qsort(v, n, sizeof(*v), cmp_names);
	s->classes = v;
	s->nclasses = n;
	return 0;
nomem:
	free_names(v, n);
	return -ENOMEM;
}

static void add_field(struct schema *sch, const char *name, uint8_t kind,
		      uint8_t dtype)
{
	struct field *f = &sch->f[sch->nfields++];

	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->kind = kind;
	f->dtype = dtype;
}

/* The kind and schema, from the first value. */
static int make_schema(struct lmdbds *s, struct diag *d)
{
	struct schema *sch = &s->schema;
	const MDB_val *v = &s->vals[0];
	const unsigned char *p = v->mv_data;
	struct datum dt;

	sch->nfields = 0;
	if (v->mv_size >= 2 && p[0] == 0xff && p[1] == 0xd8) {
		s->kind = LK_JPEG;
		add_field(sch, "jpg", FIELD_JPEG, DT_NONE);
	} else if (!datum_parse(p, v->mv_size, &dt, NULL) && dt.data &&
		   (dt.encoded || dt.channels > 0)) {
		if (dt.encoded) {
			s->kind = LK_DATUM_JPEG;
			add_field(sch, "jpg", FIELD_JPEG, DT_NONE);
		} else {
			struct field *f;

			if (dt.channels * dt.height * dt.width !=
				    (int64_t)dt.data_len ||
			    dt.height <= 0 || dt.width <= 0)
				return diag_set(
					d, LOADER_EFORMAT,
					"%s: the first Datum holds %zu bytes of pixels for %lldx%lldx%lld",
					s->path, dt.data_len,
					(long long)dt.channels,
					(long long)dt.height,
					(long long)dt.width);
			s->kind = LK_DATUM_PIXELS;
			add_field(sch, "image", FIELD_TENSOR, DT_U8);
			f = &sch->f[0];
			f->ndim = 3;
			f->dims[0] = (uint32_t)dt.channels;
			f->dims[1] = (uint32_t)dt.height;
			f->dims[2] = (uint32_t)dt.width;
		}
		s->labels = dt.has_label;
	} else {
		s->kind = LK_BYTES;
		add_field(sch, "value", FIELD_BYTES, DT_NONE);
	}
	if (s->kind == LK_JPEG || s->kind == LK_BYTES) {
		s->labels = class_len(&s->keys[0]) > 0;
		if (s->labels) {
			int err = collect_classes(s, d);

			if (err)
				return err;
		}
	}
	if (s->labels) {
		add_field(sch, "cls", FIELD_TENSOR, DT_I64);
		sch->f[sch->nfields - 1].ndim = 0;
	}
	return 0;
}

int lmdbds_open(struct lmdbds **out, const char *path, struct diag *d)
{
	struct lmdbds *s = mem_calloc(1, sizeof(*s));
	unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	struct stat st;
	uint64_t cap = 0;
	MDB_dbi dbi;
	int rc, err = 0;

	*out = NULL;
	if (!s)
		return diag_set(d, -ENOMEM, "%s: out of memory", path);
	s->path = mem_strdup(path);
	if (!s->path) {
		err = diag_set(d, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	if (!stat(path, &st) && !S_ISDIR(st.st_mode))
		flags |= MDB_NOSUBDIR;
	rc = mdb_env_create(&s->env);
	if (!rc)
		rc = mdb_env_open(s->env, path, flags, 0);
	if (!rc)
		rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn);
	if (!rc)
		rc = mdb_dbi_open(s->txn, NULL, 0, &dbi);
	if (!rc)
		rc = mdb_cursor_open(s->txn, dbi, &cur);
	if (rc) {
		err = diag_set(d, LOADER_EFORMAT,
			       "%s: not an LMDB database: %s", path,
			       mdb_strerror(rc));
		goto out;
	}
	while (!(rc = mdb_cursor_get(cur, &k, &v,
				     s->count ? MDB_NEXT : MDB_FIRST))) {
		if (s->count == cap) {
			uint64_t c = cap ? 2 * cap : 1024;
			MDB_val *a = mem_realloc(s->keys, c * sizeof(*a));

			if (a)
				s->keys = a;
			a = a ? mem_realloc(s->vals, c * sizeof(*a)) : NULL;
			if (!a) {
				err = diag_set(d, -ENOMEM, "%s: out of memory",
					       path);
				goto out;
			}
			s->vals = a;
			cap = c;
		}
		s->keys[s->count] = k;
		s->vals[s->count] = v;
		s->count++;
	}
	if (rc != MDB_NOTFOUND) {
		err = diag_set(d, LOADER_EFORMAT, "%s: reading: %s", path,
			       mdb_strerror(rc));
		goto out;
	}
	if (!s->count) {
		err = diag_set(d, LOADER_EFORMAT, "%s: the database is empty",
			       path);
		goto out;
	}
	err = make_schema(s, d);
out:
	if (cur)
		mdb_cursor_close(cur);
	if (err) {
		lmdbds_close(s);
		return err;
	}
	*out = s;
	return 0;
}

static void put_label(struct lmdbds *s, int64_t v, struct shard_field *f)
{
	for (unsigned b = 0; b < 8; b++)
		s->lab[b] = (unsigned char)((uint64_t)v >> (8 * b));
	f->data = s->lab;
	f->len = 8;
	f->raw_len = 8;
}

/* The label of a CLASS/NAME key: CLASS's index among the sorted names. */
static int64_t key_label(const struct lmdbds *s, const MDB_val *k)
{
	size_t cl = class_len(k);
	uint32_t lo = 0, hi = s->nclasses;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const char *c = s->classes[mid];
		int r = strncmp(c, k->mv_data, cl);

		if (!r)
			r = c[cl] ? 1 : 0;
		if (!r)
			return mid;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int lmdbds_sample(struct lmdbds *s, uint64_t i, struct shard_field *f,
		  char *where, size_t wn, struct diag *d)
{
	const struct field *sch = s->schema.f;
	const MDB_val *v;
	const unsigned char *p;
	struct datum dt;
	char kt[256];
	int err;

	if (i >= s->count)
		return diag_set(d, LOADER_ERANGE,
				"sample %" PRIu64 " out of range (%" PRIu64
				" samples)",
				i, s->count);
	v = &s->vals[i];
	p = v->mv_data;
	key_text(&s->keys[i], kt, sizeof(kt));
	snprintf(where, wn, "%s: key %s", s->path, kt);
	s->bytes_in += v->mv_size;
	if (v->mv_size > UINT32_MAX)
		return diag_set(d, LOADER_ETOOBIG, "a value of %zu bytes",
				v->mv_size);
	if (s->kind == LK_JPEG || s->kind == LK_BYTES) {
		f[0].data = p;
		f[0].len = (uint32_t)v->mv_size;
		f[0].raw_len = f[0].len;
		if (s->kind == LK_JPEG &&
		    (v->mv_size < 2 || p[0] != 0xff || p[1] != 0xd8))
			return diag_set(d, LOADER_EDECODE,
					"not a JPEG (no FF D8 at the start)");
		if (s->labels)
			put_label(s, key_label(s, &s->keys[i]), &f[1]);
		return 0;
	}
	err = datum_parse(p, v->mv_size, &dt, d);
	if (err)
		return err;
	if (!dt.data || dt.encoded != (s->kind == LK_DATUM_JPEG))
		return diag_set(
			d, LOADER_ESCHEMA, "a Datum %s, the first one %s",
			!dt.data   ? "without data" :
			dt.encoded ? "encoded" :
				     "of pixels",
			s->kind == LK_DATUM_JPEG ? "encoded" : "of pixels");
	if (s->kind == LK_DATUM_PIXELS &&
	    (dt.channels != sch[0].dims[0] || dt.height != sch[0].dims[1] ||
	     dt.width != sch[0].dims[2] ||
	     (int64_t)dt.data_len != dt.channels * dt.height * dt.width))
		return diag_set(
			d, LOADER_ESCHEMA,
			"a Datum of %lldx%lldx%lld pixels (%zu bytes), the first one %ux%ux%u",
			(long long)dt.channels, (long long)dt.height,
			(long long)dt.width, dt.data_len, sch[0].dims[0],
			sch[0].dims[1], sch[0].dims[2]);
	if (s->kind == LK_DATUM_JPEG &&
	    (dt.data_len < 2 || dt.data[0] != 0xff || dt.data[1] != 0xd8))
		return diag_set(d, LOADER_EDECODE,
				"the Datum's encoded image is not a JPEG");
	if (s->labels != dt.has_label)
		return diag_set(d, LOADER_ESCHEMA,
				"a Datum %s a label, the first one %s",
				dt.has_label ? "with" : "without",
				s->labels ? "has one" : "has none");
	f[0].data = dt.data;
	f[0].len = (uint32_t)dt.data_len;
	f[0].raw_len = f[0].len;
	if (s->labels)
		put_label(s, dt.label, &f[1]);
	return 0;
}

/* ---- read in place ---------------------------------------------------- */

/*
 * Where LMDB mapped the data file (from offset 0): LMDB does not say
 * (mdb_env_info()'s address is the one a fixed map asked for), so it is
 * the mapping of the data file's inode in /proc/self/maps. NULL if none.
 */
static const unsigned char *map_base(const struct lmdbds *l)
{
	mdb_filehandle_t fd;
	struct stat st;
	char line[4608];
	const unsigned char *base = NULL;
	FILE *f;

	if (mdb_env_get_fd(l->env, &fd) || fstat(fd, &st))
		return NULL;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (!base && fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off, ino;
		unsigned maj, mnr;

		if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &start, &end,
			   &off, &maj, &mnr, &ino) == 6 &&
		    ino == (unsigned long long)st.st_ino && off == 0 &&
		    makedev(maj, mnr) == st.st_dev)
			base = (const unsigned char *)(uintptr_t)start;
	}
	fclose(f);
	return base;
}

/*
 * The index for reading the database in place: each sample's value as
 * a record at its offset in the data file, its fields placed in it, a
 * label kept in the index. file_size: the data file's size.
 */
static int lmdbds_index(struct lmdbds *l, uint64_t file_size,
			struct recindex **out, struct diag *d)
{
	uint32_t nf = l->schema.nfields;
	struct recindex *ix;
	const unsigned char *base = map_base(l);

	*out = NULL;
	if (!base)
		return diag_set(d, LOADER_EFORMAT,
				"%s: the data file's map is not to be found",
				l->path);
	ix = recindex_new(l->count, nf);
	if (!ix)
		return diag_set(d, -ENOMEM, "%s: index of %" PRIu64 " samples",
				l->path, l->count);
	ix->schema = l->schema;
	ix->file_size = file_size;
	for (uint32_t k = 0; k < nf; k++)
		ix->conv[k] =
			l->labels && k == nf - 1 ? REC_INT_TEXT : REC_AS_IS;
	for (uint64_t i = 0; i < l->count; i++) {
		struct shard_field f[SCHEMA_MAX_FIELDS];
		const unsigned char *v = l->vals[i].mv_data;
		uint64_t off = (uint64_t)(v - base), len = l->vals[i].mv_size;
		char where[300];
		int err;

		if (v < base || off > file_size || len > file_size - off ||
		    len > SHARD_MAX_RECORD)
			return recindex_free(ix),
			       diag_set(d, LOADER_EFORMAT,
					"%s: value %" PRIu64
					" lies outside the data file",
					l->path, i);
		err = lmdbds_sample(l, i, f, where, sizeof(where), d);
		if (err) {
			recindex_free(ix);
			return diag_wrap(d, err, "%s", where);
		}
		recindex_set(ix, i, off, (uint32_t)len);
		for (uint32_t k = 0; k < nf; k++) {
			uint64_t *e = &ix->ent[i * nf + k];

			if (ix->conv[k] == REC_INT_TEXT) {
				memcpy(e, f[k].data, 8);
			} else {
				*e = (uint64_t)((const unsigned char *)f[k].data -
						v) |
				     (uint64_t)f[k].len << 32;
			}
			ix->raw_bytes[k] +=
				ix->conv[k] == REC_INT_TEXT ? 8 : f[k].len;
		}
	}
	*out = ix;
	return 0;
}

/* Read all of fd (a pipe) into a new buffer, until EOF or the deadline. */
static int read_all(int fd, int timeout_ms, void **buf, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	unsigned char *p = mem_alloc(cap);
	uint64_t t0 = clock_mono_ms();

	if (!p)
		return -ENOMEM;
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long el = (long)(clock_mono_ms() - t0);
		ssize_t r;

		if (el >= timeout_ms) {
			free(p);
			return -ETIMEDOUT;
		}
		if (poll(&pf, 1, (int)(timeout_ms - el)) < 0 &&
		    errno != EINTR) {
			free(p);
			return -errno;
		}
		if (n == cap) {
			unsigned char *q = mem_realloc(p, cap * 2);

			if (!q) {
				free(p);
				return -ENOMEM;
			}
			p = q;
			cap *= 2;
		}
		r = read(fd, p + n, cap - n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0) {
			free(p);
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*buf = p;
	*len = n;
	return 0;
}

/*
 * The child: open the database through the descriptor, index it, and
 * write a status byte, then the saved index or the reason, to the pipe.
 */
static void scan_child(int fd, const char *name, int out)
{
	char path[64];
	struct lmdbds *l = NULL;
	struct recindex *ix = NULL;
	struct diag d = { "" };
	struct stat st;
	void *blob = NULL;
	size_t len = 0;
	unsigned char ok = 0;
	int err;

	/*
	 * A fault here is the damaged file's, and the parent reports it:
	 * die of it quietly, with no handler (a sanitizer's) writing to the
	 * daemon's log, and nothing of ours on its stderr.
	 */
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	signal(SIGFPE, SIG_DFL);
	signal(SIGILL, SIG_DFL);
	{
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null >= 0)
			dup2(null, STDERR_FILENO);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	err = fstat(fd, &st) ? -errno : lmdbds_open(&l, path, &d);
	if (!err)
		err = lmdbds_index(l, (uint64_t)st.st_size, &ix, &d);
	if (!err)
		err = recindex_save(ix, &blob, &len);
	if (!err) {
		ok = 1;
		(void)!write(out, &ok, 1);
		(void)fdio_write_all(out, blob, len);
	} else {
		/* The path is the child's own: name the client's file. */
		char msg[DIAG_MAX + 64];
		char *at = strstr(d.msg, path);

		snprintf(msg, sizeof(msg), "%.*s%s%s",
			 at ? (int)(at - d.msg) : (int)strlen(d.msg), d.msg,
			 at ? name : "", at ? at + strlen(path) : "");
		(void)!write(out, &ok, 1);
		(void)fdio_write_all(out, msg, strlen(msg));
	}
	_exit(err ? 1 : 0);
}

int lmdbds_index_fd(int fd, const char *name, int timeout_ms,
		    struct recindex **out, struct diag *d)
{
	struct stat st;
	void *buf = NULL;
	size_t len = 0;
	int p[2], status = 0, err;
	pid_t pid;

	*out = NULL;
	if (fstat(fd, &st))
		return diag_set(d, -errno, "%s: %s", name, strerror(errno));
	if (pipe2(p, O_CLOEXEC))
		return diag_set(d, -errno, "%s: pipe: %s", name,
				strerror(errno));
	pid = fault_alloc() ? (errno = EAGAIN, -1) : fork();
	if (pid < 0) {
		err = -errno;
		close(p[0]);
		close(p[1]);
		return diag_set(d, err, "%s: fork: %s", name, strerror(-err));
	}
	if (pid == 0) {
		close(p[0]);
		scan_child(fd, name, p[1]);
	}
	close(p[1]);
	err = read_all(p[0], timeout_ms, &buf, &len);
	close(p[0]);
	if (err == -ETIMEDOUT)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (err) {
		free(buf);
		return diag_set(
			d, err, "%s: scanning the LMDB database: %s", name,
			err == -ETIMEDOUT ? "took too long" : strerror(-err));
	}
	if (WIFSIGNALED(status) || len < 1) {
		free(buf);
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: scanning the LMDB database failed (%s %d): a damaged database?",
			name, WIFSIGNALED(status) ? "signal" : "exit status",
			WIFSIGNALED(status) ? WTERMSIG(status) :
					      WEXITSTATUS(status));
	}
	if (((unsigned char *)buf)[0] != 1) {
		err = diag_set(d, LOADER_EFORMAT, "%.*s", (int)(len - 1),
			       (char *)buf + 1);
		free(buf);
		return err;
	}
	err = recindex_load(out, (unsigned char *)buf + 1, len - 1,
			    (uint64_t)st.st_size, d);
	free(buf);
	return err ? diag_wrap(d, err, "%s", name) : 0;
}

int lmdbds_index_path(const char *path, int *fd, struct recindex **ix,
		      struct diag *d)
{
	char data[4200];
	struct stat st;
	int err;

	*fd = -1;
	*ix = NULL;
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		snprintf(data, sizeof(data), "%s/data.mdb", path);
	else
		snprintf(data, sizeof(data), "%s", path);
	*fd = open(data, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return diag_set(d, -errno, "%s: %s", data, strerror(errno));
	/* In a child too: a damaged database must not crash the tool. */
	err = lmdbds_index_fd(*fd, data, LMDBDS_SCAN_MS, ix, d);
	if (err) {
		close(*fd);
		*fd = -1;
	}
	return err;
}
