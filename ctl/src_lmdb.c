/*
 * src_lmdb.c - an LMDB database of samples as a pack source.
 *
 * The convention (loaderctl(1), pack): every key/value pair of the main
 * database is a sample, in key order. A value is one of
 *   - a Caffe Datum (codecs/datum.h), as Caffe's convert_imageset writes
 *     ImageNet: fields jpg (its encoded image) or image (its pixels, a
 *     u8 tensor [channels, height, width]), and cls (its label);
 *   - a JPEG (FF D8 first): field jpg;
 *   - anything else: field value, bytes.
 * For the last two, keys of the form CLASS/NAME give a label, field cls:
 * the index of CLASS among the sorted class names (as ImageFolder's), or
 * every key has one or none does. The kind is the first value's; every
 * other value must be of it (and a Datum's pixels of its shape).
 *
 * The environment is opened read-only without a lock file (MDB_NOLOCK:
 * pack reads a database nothing writes meanwhile), one read transaction
 * for the whole pack: the values are read in place through LMDB's map.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb.h>

#include "datum.h"
#include "fdio.h"
#include "loader_error.h"
#include "source.h"

#define LMDB_MAGIC 0xBEEFC0DEu

enum lmdb_kind { LK_DATUM_JPEG, LK_DATUM_PIXELS, LK_JPEG, LK_BYTES };

struct lmdb_source {
	struct source base;
	char *path;
	MDB_env *env;
	MDB_txn *txn;
	MDB_val *keys, *vals; /* count of each, valid while txn is */
	enum lmdb_kind kind;
	bool labels;	      /* a cls field */
	unsigned char lab[8]; /* the last label, little-endian */
	uint64_t bytes_in;
};

static bool lmdb_detect(const char *path)
{
	char p[4096];
	unsigned char m[20];
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
	ok = !fdio_pread_all(fd, m, sizeof(m), 0) &&
	     (uint32_t)(m[16] | m[17] << 8 | m[18] << 16 |
			(uint32_t)m[19] << 24) == LMDB_MAGIC;
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
static int collect_classes(struct lmdb_source *s, struct diag *d)
{
	char **v = NULL;
	uint32_t n = 0, cap = 0;

	for (uint64_t i = 0; i < s->base.count; i++) {
		size_t cl = class_len(&s->keys[i]);
		char kt[256];

		if (!cl) {
			key_text(&s->keys[i], kt, sizeof(kt));
			source_free_classes(v, n);
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
	s->base.classes = v;
	s->base.nclasses = n;
	return 0;
nomem:
	source_free_classes(v, n);
	return -ENOMEM;
}

static void lmdb_close_source(struct source *base)
{
	struct lmdb_source *s = (struct lmdb_source *)base;

	if (!s)
		return;
	source_free_classes(base->classes, base->nclasses);
	if (s->txn)
		mdb_txn_abort(s->txn);
	if (s->env)
		mdb_env_close(s->env);
	free(s->keys);
	free(s->vals);
	free(s->path);
	free(s);
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
static int make_schema(struct lmdb_source *s, struct diag *d)
{
	struct schema *sch = &s->base.schema;
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

static int lmdb_open_source(struct source **out, const char *path,
			    const struct source_opts *o, struct diag *d)
{
	struct lmdb_source *s = calloc(1, sizeof(*s));
	unsigned flags = MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS;
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	struct stat st;
	uint64_t cap = 0;
	MDB_dbi dbi;
	int rc, err = 0;

	if (!s)
		return -ENOMEM;
	s->base.ops = &source_lmdb_ops;
	s->path = strdup(path);
	if (!s->path) {
		err = -ENOMEM;
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
				     s->base.count ? MDB_NEXT : MDB_FIRST))) {
		if (s->base.count == cap) {
			uint64_t c = cap ? 2 * cap : 1024;
			MDB_val *a = realloc(s->keys, c * sizeof(*a));

			if (a)
				s->keys = a;
			a = a ? realloc(s->vals, c * sizeof(*a)) : NULL;
			if (!a) {
				err = -ENOMEM;
				goto out;
			}
			s->vals = a;
			cap = c;
		}
		s->keys[s->base.count] = k;
		s->vals[s->base.count] = v;
		s->base.count++;
	}
	if (rc != MDB_NOTFOUND) {
		err = diag_set(d, LOADER_EFORMAT, "%s: reading: %s", path,
			       mdb_strerror(rc));
		goto out;
	}
	if (!s->base.count) {
		err = diag_set(d, LOADER_EFORMAT, "%s: the database is empty",
			       path);
		goto out;
	}
	err = make_schema(s, d);
	if (!err && o->classes) {
		if (!s->base.nclasses) {
			err = source_parse_classes(o->classes, &s->base.classes,
						   &s->base.nclasses);
		} else {
			err = diag_set(
				d, LOADER_EUSAGE,
				"%s: --classes: the class names come from the keys",
				path);
		}
	}
out:
	if (cur)
		mdb_cursor_close(cur);
	if (err) {
		lmdb_close_source(&s->base);
		return err;
	}
	*out = &s->base;
	return 0;
}

static void put_label(struct lmdb_source *s, int64_t v, struct shard_field *f)
{
	for (unsigned b = 0; b < 8; b++)
		s->lab[b] = (unsigned char)((uint64_t)v >> (8 * b));
	f->data = s->lab;
	f->len = 8;
	f->raw_len = 8;
}

/* The label of a CLASS/NAME key: CLASS's index among the sorted names. */
static int64_t key_label(const struct lmdb_source *s, const MDB_val *k)
{
	size_t cl = class_len(k);
	uint32_t lo = 0, hi = s->base.nclasses;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const char *c = s->base.classes[mid];
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

static int lmdb_get(struct source *base, uint64_t i, struct codec_ctx *ctx,
		    struct shard_field *f, char *where, size_t wn,
		    struct diag *d)
{
	struct lmdb_source *s = (struct lmdb_source *)base;
	const struct field *sch = base->schema.f;
	const MDB_val *v;
	const unsigned char *p;
	struct datum dt;
	char kt[256];
	int err;

	(void)ctx;
	if (i >= base->count)
		return diag_set(d, LOADER_ERANGE,
				"sample %" PRIu64 " out of range (%" PRIu64
				" samples)",
				i, base->count);
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

static uint64_t lmdb_bytes_in(const struct source *base)
{
	return ((const struct lmdb_source *)base)->bytes_in;
}

const struct source_ops source_lmdb_ops = {
	.name = "lmdb",
	.detect = lmdb_detect,
	.open = lmdb_open_source,
	.get = lmdb_get,
	.bytes_in = lmdb_bytes_in,
	.close = lmdb_close_source,
};
