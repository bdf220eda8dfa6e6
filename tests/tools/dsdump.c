/*
 * dsdump.c - print what a packed dataset holds, for tests.
 *
 *	dsdump DIR			one line per record, in dataset order:
 *					"INDEX NAME=XXH3 NAME=XXH3 ..."
 *	dsdump --raw INDEX FIELD DIR	the unpacked bytes of one field
 *
 * The hashes are XXH3-64 (16 hex digits) of each field's bytes after
 * undoing the shard's compression, so datasets packed with and without
 * compression print the same lines. Exit status: 0, 1 when the dataset
 * cannot be read (the reason on stderr), 2 for bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "codec.h"
#include "dataset.h"
#include "fdio.h"
#include "loader_error.h"
#include "shard.h"

struct dump {
	struct dataset *ds;
	struct codec_ctx *ctx;
	unsigned char *rec, *out;
	size_t rec_cap, out_cap;
	bool raw;
	uint64_t raw_index;
	const char *raw_field;
	bool raw_done;
	struct diag d;
};

static int reserve(unsigned char **buf, size_t *cap, size_t n)
{
	void *p;

	if (n <= *cap && *buf)
		return 0;
	p = realloc(*buf, n ? n : 1);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n ? n : 1;
	return 0;
}

/* Unpack field k of a parsed record into du->out; its length in *len. */
static int unpack(struct dump *du, const struct shard *sh, unsigned k,
		  const struct shard_field *f, size_t *len)
{
	size_t size;
	int err;

	err = shard_field_size(sh, du->ctx, k, f, &size, &du->d);
	if (!err)
		err = reserve(&du->out, &du->out_cap, size);
	if (!err)
		err = shard_unpack_field(sh, du->ctx, k, f, du->out, size, len,
					 &du->d);
	return err;
}

/* Dump the records of one shard; *index counts records across shards. */
static int dump_shard(struct dump *du, const struct shard *sh, uint64_t *index)
{
	const struct schema *sch = shard_schema(sh);
	struct shard_field f[SCHEMA_MAX_FIELDS];
	uint64_t n = shard_count(sh);
	int err;

	for (uint64_t r = 0; r < n; r++, (*index)++) {
		struct shard_rec rec;
		size_t len;

		if (du->raw && *index != du->raw_index)
			continue;
		err = shard_rec(sh, r, &rec);
		if (!err)
			err = reserve(&du->rec, &du->rec_cap, rec.length);
		if (!err)
			err = shard_read_record(sh, r, du->rec, du->rec_cap, f,
						&du->d);
		if (err)
			return err;
		if (!du->raw)
			printf("%" PRIu64, *index);
		for (unsigned k = 0; k < sch->nfields; k++) {
			if (du->raw && strcmp(sch->f[k].name, du->raw_field))
				continue;
			err = unpack(du, sh, k, &f[k], &len);
			if (err)
				return diag_wrap(&du->d, err, "record %" PRIu64,
						 *index);
			if (du->raw) {
				err = fdio_write_all(STDOUT_FILENO, du->out,
						     len);
				if (err)
					return diag_set(&du->d, err,
							"stdout: %s",
							strerror(-err));
				du->raw_done = true;
				continue;
			}
			printf(" %s=%016" PRIx64, sch->f[k].name,
			       (uint64_t)XXH3_64bits(du->out, len));
		}
		if (!du->raw)
			printf("\n");
	}
	return 0;
}

static int dump(struct dump *du, const char *dir)
{
	uint64_t index = 0;
	int err;

	err = dataset_load(&du->ds, dir, &du->d);
	if (err)
		return err;
	if (du->raw && schema_find(&du->ds->schema, du->raw_field) < 0)
		return diag_set(&du->d, -ENOENT, "%s: no field \"%s\"", dir,
				du->raw_field);
	if (du->raw && du->raw_index >= du->ds->records)
		return diag_set(&du->d, LOADER_ERANGE,
				"%s: record %" PRIu64 " out of range (%" PRIu64
				" records)",
				dir, du->raw_index, du->ds->records);
	err = codec_ctx_new(&du->ctx, 0);
	for (uint32_t i = 0; !err && i < du->ds->nshards && !du->raw_done;
	     i++) {
		struct shard *sh = NULL;
		int fd = -1;

		err = dataset_open_shard(du->ds, i, &fd, &sh, &du->d);
		if (!err)
			err = dump_shard(du, sh, &index);
		shard_close(sh);
		if (fd >= 0)
			close(fd);
	}
	if (!err && index != du->ds->records && !du->raw_done)
		err = diag_set(&du->d, LOADER_EFORMAT,
			       "%s: %" PRIu64
			       " records read, the manifest says %" PRIu64,
			       dir, index, du->ds->records);
	return err;
}

int main(int argc, char **argv)
{
	struct dump du = { 0 };
	const char *dir = NULL;
	char *end;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--raw") && i + 2 < argc) {
			errno = 0;
			du.raw_index = strtoull(argv[i + 1], &end, 10);
			if (errno || *end || end == argv[i + 1])
				goto usage;
			du.raw_field = argv[i + 2];
			du.raw = true;
			i += 2;
		} else if (!dir && argv[i][0] != '-') {
			dir = argv[i];
		} else {
			goto usage;
		}
	}
	if (!dir)
		goto usage;
	err = dump(&du, dir);
	if (fflush(stdout) && !err)
		err = diag_set(&du.d, -errno, "stdout: %s", strerror(errno));
	if (err)
		fprintf(stderr, "dsdump: %s\n",
			du.d.msg[0] ? du.d.msg : loader_strerror(err));
	dataset_free(du.ds);
	codec_ctx_free(du.ctx);
	free(du.rec);
	free(du.out);
	return err ? 1 : 0;
usage:
	fprintf(stderr,
		"usage: dsdump DIR\n       dsdump --raw INDEX FIELD DIR\n");
	return 2;
}
