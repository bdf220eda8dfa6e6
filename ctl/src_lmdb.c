/*
 * src_lmdb.c - an LMDB database of samples as a pack source.
 *
 * The convention, and reading the database through LMDB's map, are
 * pipeline/format/lmdbds.c's (a stream reads LMDB datasets in place with it
 * too): this file hands its samples and class names to pack.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lmdbds.h"
#include "loader_error.h"
#include "source.h"

struct lmdb_source {
	struct source base;
	struct lmdbds *l;
};

static bool lmdb_detect(const char *path)
{
	return lmdbds_detect(path);
}

static void lmdb_close_source(struct source *base)
{
	struct lmdb_source *s = (struct lmdb_source *)base;

	if (!s)
		return;
	source_free_classes(base->classes, base->nclasses);
	lmdbds_close(s->l);
	free(s);
}

static int lmdb_open_source(struct source **out, const char *path,
			    const struct source_opts *o, struct diag *d)
{
	struct lmdb_source *s = calloc(1, sizeof(*s));
	char *const *names;
	uint32_t n;
	int err;

	if (!s)
		return -ENOMEM;
	s->base.ops = &source_lmdb_ops;
	err = lmdbds_open(&s->l, path, d);
	if (err)
		goto out;
	s->base.schema = *lmdbds_schema(s->l);
	s->base.count = lmdbds_count(s->l);
	n = lmdbds_classes(s->l, &names);
	if (n) {
		if (o && o->classes) {
			err = diag_set(
				d, LOADER_EUSAGE,
				"%s: --classes: the class names come from the keys",
				path);
			goto out;
		}
		s->base.classes = calloc(n, sizeof(*s->base.classes));
		if (!s->base.classes) {
			err = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 0; i < n; i++) {
			s->base.classes[i] = strdup(names[i]);
			if (!s->base.classes[i]) {
				s->base.nclasses = i;
				err = -ENOMEM;
				goto out;
			}
		}
		s->base.nclasses = n;
	} else if (o && o->classes) {
		err = source_parse_classes(o->classes, &s->base.classes,
					   &s->base.nclasses);
	}
out:
	if (err) {
		lmdb_close_source(&s->base);
		return err;
	}
	*out = &s->base;
	return 0;
}

static int lmdb_get(struct source *base, uint64_t i, struct codec_ctx *ctx,
		    struct shard_field *f, char *where, size_t wn,
		    struct diag *d)
{
	struct lmdb_source *s = (struct lmdb_source *)base;
	int err;

	(void)ctx;
	err = lmdbds_sample(s->l, i, f, where, wn, d);
	for (uint32_t k = 0; !err && k < base->schema.nfields; k++)
		f[k].raw_len = f[k].len;
	return err;
}

static uint64_t lmdb_bytes_in(const struct source *base)
{
	return lmdbds_bytes_in(((const struct lmdb_source *)base)->l);
}

const struct source_ops source_lmdb_ops = {
	.name = "lmdb",
	.detect = lmdb_detect,
	.open = lmdb_open_source,
	.get = lmdb_get,
	.bytes_in = lmdb_bytes_in,
	.close = lmdb_close_source,
};
