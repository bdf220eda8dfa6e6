/*
 * dsopen.c - datasets read in place (dsopen.h): tars, or an LMDB data
 * file, each a shard on its record index, kept between streams.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dsopen.h"
#include "fault.h"
#include "lmdbds.h"
#include "loader_error.h"
#include "plog.h"
#include "wds.h"

/* "a: jpeg, b: int64" (cut short to n bytes): a schema for messages. */
static void schema_brief(const struct schema *sc, char *buf, size_t n)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t k = 0; k < sc->nfields && at + 1 < n; k++) {
		char f[FIELD_TEXT_MAX];

		field_format(&sc->f[k], f, sizeof(f));
		at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? ", " : "",
				       f);
	}
}

/*
 * The index of file i: the one kept for this file, if its size, modification and change times and owner are still
 * the same, or a new scan's, kept for the next stream. The record kept
 * is those four, then the index (recindex_save()). A file's owner can
 * set its size and mtime, not its ctime: a file that took the place of
 * another (the same inode, its times set back) or was rewritten in place
 * is scanned again, never given the other's index.
 */
static int file_index(const struct dsopen_in *in, uint32_t i, const char *name,
		      struct recindex **out, struct diag *d)
{
	const struct recindex_store *io = in->store;
	int fd = in->fds[i];
	struct stat st;
	char id[64];
	uint64_t head[4];
	void *val = NULL, *blob;
	size_t len = 0, blen;
	int err;

	if (fstat(fd, &st))
		return diag_set(d, -errno, "%s: fstat: %s", name,
				strerror(errno));
	head[0] = (uint64_t)st.st_size;
	head[1] = (uint64_t)(st.st_mtim.tv_sec * 1000000000ll +
			     st.st_mtim.tv_nsec);
	head[2] = (uint64_t)(st.st_ctim.tv_sec * 1000000000ll +
			     st.st_ctim.tv_nsec);
	head[3] = (uint64_t)st.st_uid;
	snprintf(id, sizeof(id), "%llx:%llx", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	if (io)
		val = io->get(io->ctx, id, &len);
	if (val && len > sizeof(head) && !memcmp(val, head, sizeof(head))) {
		struct diag ld = { "" };

		err = recindex_load(out, (unsigned char *)val + sizeof(head),
				    len - sizeof(head), head[0], &ld);
		free(val);
		if (!err)
			return 0;
		plog(PLOG_WARN,
		     "%s: %s: the kept index is damaged (%s): scanning again",
		     in->log, name, ld.msg);
	} else {
		free(val);
	}
	/* An LMDB file is scanned in a child: LMDB trusts its pages. */
	err = in->lmdb ? lmdbds_index_fd(fd, name, LMDBDS_SCAN_MS, out, d) :
			 wds_index_scan(out, fd, name, d);
	if (err)
		return err;
	plog(PLOG_INFO, "%s: %s: scanned, %" PRIu64 " samples", in->log, name,
	     (*out)->count);
	if (io && !recindex_save(*out, &blob, &blen)) {
		val = mem_alloc(sizeof(head) + blen);
		if (val) {
			memcpy(val, head, sizeof(head));
			memcpy((unsigned char *)val + sizeof(head), blob, blen);
			io->put(io->ctx, id, val, sizeof(head) + blen);
			free(val);
		}
		free(blob);
	}
	return 0;
}

static int open_files(struct dataset **out, struct recindex ***ixp,
		      const struct dsopen_in *in, struct diag *d)
{
	uint32_t n = in->n;
	struct recindex **ix;
	struct dataset *ds;
	int err;

	if (!n)
		return diag_set(d, LOADER_EUSAGE,
				"a tar dataset needs at least one tar");
	if (in->lmdb && n != 1)
		return diag_set(
			d, LOADER_EUSAGE,
			"an LMDB dataset is one data file, not %" PRIu32, n);
	ds = mem_calloc(1, sizeof(*ds));
	ix = mem_calloc(n, sizeof(*ix));
	if (!ds || !ix) {
		free(ds);
		free(ix);
		return -ENOMEM;
	}
	*out = ds;
	*ixp = ix;
	ds->shards = mem_calloc(n, sizeof(*ds->shards));
	if (!ds->shards)
		return -ENOMEM;
	ds->nshards = n;
	ds->origin.shuffle_seed = -1;
	for (uint32_t i = 0; i < n; i++) {
		char name[32];
		const char *label;

		snprintf(name, sizeof(name), "tar-%05" PRIu32, i);
		ds->shards[i].file = mem_strdup(
			in->labels && in->labels[i] ? in->labels[i] : name);
		if (!ds->shards[i].file)
			return -ENOMEM;
		label = ds->shards[i].file;
		err = file_index(in, i, label, &ix[i], d);
		if (err)
			return err;
		if (!i) {
			ds->schema = ix[0]->schema;
		} else if (!schema_equal(&ds->schema, &ix[i]->schema)) {
			char a[FIELD_TEXT_MAX * 2], b[FIELD_TEXT_MAX * 2];

			schema_brief(&ds->schema, a, sizeof(a));
			schema_brief(&ix[i]->schema, b, sizeof(b));
			return diag_set(d, LOADER_ESCHEMA,
					"%s has the fields %s; %s has %s",
					label, b, ds->shards[0].file, a);
		}
		ds->shards[i].records = ix[i]->count;
		ds->shards[i].bytes = ix[i]->file_size;
		ds->records += ix[i]->count;
	}
	return 0;
}

int dsopen_inplace(struct dataset **ds, struct recindex ***ix,
		   const struct dsopen_in *in, struct diag *d)
{
	int err;

	*ds = NULL;
	*ix = NULL;
	err = open_files(ds, ix, in, d);
	if (err) {
		for (uint32_t i = 0; *ix && *ds && i < (*ds)->nshards; i++)
			recindex_free((*ix)[i]);
		free(*ix);
		dataset_free(*ds);
		*ds = NULL;
		*ix = NULL;
	}
	return err;
}
