/*
 * src_tar.c - a WebDataset-style tar file as a pack source.
 *
 * The scan of the tar into samples and schema is pipeline/format/wds.c's (a
 * stream reads tars in place with it too); this file opens the tar and
 * reads a sample's members with pread, converting what the schema says
 * (decimal labels to int64, .npy arrays to their data, swapped to
 * little-endian), so that samples can be taken in any order.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "loader_error.h"
#include "npy.h"
#include "source.h"
#include "wds.h"

struct tar_source {
	struct source base;
	char *path;
	int fd;
	struct wds *w;
	unsigned char *buf; /* the payloads of the last get() */
	size_t buf_cap;
	unsigned char ints[SCHEMA_MAX_FIELDS][8];
	uint64_t bytes_in;
	uint32_t nmembers; /* fields from members; the key comes after */
	int key;	   /* the __key__ field pack adds, or -1 */
};

/* A regular file named *.tar, or whose first block is a tar header. */
static bool tar_detect(const char *path)
{
	struct stat st;
	bool ok;
	int fd;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) /* by its name, then: open() will say why it cannot */
		return strlen(path) > 4 &&
		       !strcmp(path + strlen(path) - 4, ".tar");
	ok = wds_is_tar(fd, path);
	close(fd);
	return ok;
}

static void tar_close_source(struct source *base)
{
	struct tar_source *s = (struct tar_source *)base;

	if (!s)
		return;
	source_free_classes(base->classes, base->nclasses);
	if (s->fd >= 0)
		close(s->fd);
	wds_free(s->w);
	free(s->path);
	free(s->buf);
	free(s);
}

static int tar_open_source(struct source **out, const char *path,
			   const struct source_opts *o, struct diag *d)
{
	struct tar_source *s;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &source_tar_ops;
	s->fd = -1;
	s->path = strdup(path);
	if (!s->path) {
		err = -ENOMEM;
		goto out;
	}
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0) {
		err = diag_set(d, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	err = wds_scan(&s->w, s->fd, path, o ? o->ragged : NULL, d);
	if (err)
		goto out;
	s->base.schema = *wds_schema(s->w);
	s->base.count = wds_count(s->w);
	s->nmembers = s->base.schema.nfields;
	/* Each sample's key, as WebDataset has it, names it in reports. */
	s->key = -1;
	if (s->nmembers < SCHEMA_MAX_FIELDS &&
	    schema_find(&s->base.schema, SCHEMA_KEY) < 0) {
		struct field *f = &s->base.schema.f[s->nmembers];

		memset(f, 0, sizeof(*f));
		snprintf(f->name, sizeof(f->name), SCHEMA_KEY);
		f->kind = FIELD_BYTES;
		s->key = (int)s->base.schema.nfields++;
	}
	if (o && o->classes)
		err = source_parse_classes(o->classes, &s->base.classes,
					   &s->base.nclasses);
out:
	if (err) {
		tar_close_source(&s->base);
		return err;
	}
	*out = &s->base;
	return 0;
}

/*
 * A sample's .npy member (data, len bytes, read whole): check that its
 * header says what the first sample's did, and give the array's bytes,
 * little-endian (a big-endian array is swapped in place).
 */
static int npy_payload(const struct field *fl, unsigned char *data,
		       uint32_t len, struct shard_field *f, struct diag *d)
{
	struct npy_info n;
	int err = wds_check_npy(fl, data, len, len, &n, d);

	if (err)
		return err;
	f->data = data + n.data_off;
	f->len = (uint32_t)(len - n.data_off);
	if (n.order == '>') {
		unsigned char *p = data + n.data_off;

		for (uint64_t e = 0; e < n.count; e++, p += n.itemsize)
			for (uint32_t a = 0, b = n.itemsize - 1; a < b;
			     a++, b--) {
				unsigned char t = p[a];

				p[a] = p[b];
				p[b] = t;
			}
	}
	return 0;
}

static int tar_get(struct source *base, uint64_t i, struct codec_ctx *ctx,
		   struct shard_field *f, char *where, size_t wn,
		   struct diag *d)
{
	struct tar_source *s = (struct tar_source *)base;
	const struct schema *sch = &base->schema;
	const struct wds_item *it;
	size_t total = 0, pos = 0;
	int err;

	if (i >= base->count) {
		snprintf(where, wn, "%s", s->path);
		return diag_set(d, LOADER_ERANGE,
				"sample %" PRIu64 " out of range (%" PRIu64
				" samples)",
				i, base->count);
	}
	it = wds_item(s->w, i, 0);
	wds_where(s->w, i, 0, where, wn);
	for (uint32_t k = 0; k < s->nmembers; k++)
		total += it[k].len;
	/* At least one byte, so that buf + pos is never NULL + 0. */
	if (!s->buf || total > s->buf_cap) {
		void *p = realloc(s->buf, total ? total : 1);

		if (!p)
			return -ENOMEM;
		s->buf = p;
		s->buf_cap = total ? total : 1;
	}
	for (uint32_t k = 0; k < s->nmembers; k++) {
		unsigned char *data = s->buf + pos;
		uint32_t len = it[k].len;

		wds_where(s->w, i, k, where, wn);
		err = fdio_pread_all(s->fd, data, len, it[k].off);
		if (err)
			return diag_set(
				d, err, "read: %s",
				err == LOADER_ETRUNC ?
					"the tar file shrank since it was scanned" :
					loader_strerror(err));
		s->bytes_in += len;
		pos += len;
		f[k].data = data;
		f[k].len = len;
		if (sch->f[k].kind == FIELD_JPEG &&
		    (len < 2 || data[0] != 0xff || data[1] != 0xd8))
			return diag_set(d, LOADER_EDECODE,
					"not a JPEG (no FF D8 at the start)");
		if (wds_conv(s->w, k) == REC_NPY) {
			err = npy_payload(&sch->f[k], data, len, &f[k], d);
			if (err)
				return err;
		}
		if (wds_conv(s->w, k) == REC_INT_TEXT) {
			int64_t v = 0;

			err = wds_parse_int(data, len, &v, d);
			if (err)
				return err;
			for (unsigned b = 0; b < 8; b++)
				s->ints[k][b] =
					(unsigned char)((uint64_t)v >> (8 * b));
			f[k].data = s->ints[k];
			f[k].len = 8;
		}
		f[k].raw_len = f[k].len;
	}
	if (s->key >= 0) {
		const char *key = wds_key(s->w, i);

		f[s->key].data = key;
		f[s->key].len = (uint32_t)strlen(key);
		f[s->key].raw_len = f[s->key].len;
	}
	/* For errors met later on (compression, writing): the whole sample. */
	wds_where(s->w, i, 0, where, wn);
	return 0;
}

static uint64_t tar_bytes_in(const struct source *base)
{
	return ((const struct tar_source *)base)->bytes_in;
}

const struct source_ops source_tar_ops = {
	.name = "tar",
	.detect = tar_detect,
	.open = tar_open_source,
	.get = tar_get,
	.bytes_in = tar_bytes_in,
	.close = tar_close_source,
};
