/*
 * s3read.c - shards of an object-store dataset read in place (s3read.h).
 *
 * The fetch array is kept between calls and grown as needed, so that a
 * batch's reads allocate only what libcurl allocates per request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_error.h"
#include "s3read.h"

struct rshard {
	char *key; /* NULL: not read in place */
	struct s3_obj o;
};

struct s3read {
	struct s3 *s3;
	char bucket[AWS_BUCKET_MAX];
	uint32_t n, count;
	struct rshard *sh;
	struct s3_fetch *f;
	size_t capf;
};

int s3read_new(struct s3read **out, const struct aws_cfg *cfg,
	       const char *bucket, uint32_t nshards, const struct s3_params *p,
	       struct diag *d)
{
	struct s3read *r = calloc(1, sizeof(*r));
	int err;

	*out = NULL;
	if (!r)
		return diag_set(d, -ENOMEM, "out of memory");
	r->sh = calloc(nshards ? nshards : 1, sizeof(*r->sh));
	if (!r->sh) {
		free(r);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	r->n = nshards;
	snprintf(r->bucket, sizeof(r->bucket), "%s", bucket);
	err = s3_new(&r->s3, cfg, bucket, p, d);
	if (err) {
		s3read_free(r);
		return err;
	}
	*out = r;
	return 0;
}

void s3read_free(struct s3read *r)
{
	if (!r)
		return;
	s3_free(r->s3); /* wipes its copy of the credentials */
	for (uint32_t i = 0; i < r->n; i++)
		free(r->sh[i].key);
	free(r->sh);
	free(r->f);
	free(r);
}

int s3read_add(struct s3read *r, uint32_t i, const char *key,
	       const struct s3_obj *o, struct diag *d)
{
	if (i >= r->n || r->sh[i].key)
		return diag_set(d, LOADER_EUSAGE,
				"shard %" PRIu32 " added twice", i);
	r->sh[i].key = strdup(key);
	if (!r->sh[i].key)
		return diag_set(d, -ENOMEM, "out of memory");
	r->sh[i].o = *o;
	r->count++;
	return 0;
}

bool s3read_has(const struct s3read *r, uint32_t i)
{
	return r && i < r->n && r->sh[i].key;
}

int s3read_get(struct s3read *r, struct s3read_range *v, size_t n,
	       struct diag *d)
{
	int err;

	if (n > r->capf) {
		size_t cap = r->capf ? r->capf : 64;
		struct s3_fetch *f;

		while (cap < n)
			cap *= 2;
		f = realloc(r->f, cap * sizeof(*f));
		if (!f)
			return diag_set(d, -ENOMEM, "out of memory");
		r->f = f;
		r->capf = cap;
	}
	for (size_t k = 0; k < n; k++) {
		const struct rshard *sh = &r->sh[v[k].shard];

		if (!s3read_has(r, v[k].shard))
			return diag_set(d, LOADER_EUSAGE,
					"shard %" PRIu32
					" is not read in place",
					v[k].shard);
		r->f[k] = (struct s3_fetch){ .key = sh->key,
					     .fd = -1,
					     .buf = v[k].buf,
					     .off = v[k].off,
					     .len = v[k].len,
					     .want = sh->o };
	}
	err = s3_get_many(r->s3, r->f, n, d);
	for (size_t k = 0; k < n; k++)
		v[k].err = err && !r->f[k].err ? err : r->f[k].err;
	if (err && err != -ENOMEM) {
		for (size_t k = 0; k < n; k++)
			if (r->f[k].err) {
				diag_set(d, r->f[k].err,
					 "%s (range of %" PRIu64
					 " bytes at %" PRIu64 ")",
					 r->f[k].why, v[k].len, v[k].off);
				break;
			}
	}
	return err;
}

void s3read_set_cancel(struct s3read *r, const bool *cancel)
{
	s3_set_cancel(r->s3, cancel);
}
