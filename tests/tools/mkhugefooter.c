/*
 * mkhugefooter.c - write a one-shard dataset whose shard claims a footer
 * of a given size, for the tests of hostile shards.
 *
 *	mkhugefooter OUTDIR FOOTER_BYTES
 *
 * OUTDIR/shard-00000.lds is a valid shard of one record ("label: int64")
 * whose trailer is moved FOOTER_BYTES past the footer's start, leaving a
 * hole: the file is sparse, costs a few blocks, and its trailer (with a
 * valid checksum) declares a footer of FOOTER_BYTES bytes. A reader that
 * trusted the declared size would allocate and read all of it before its
 * checksum failed. OUTDIR/manifest.json describes the shard as it is.
 * Exit status: 0, 1 on failure (the reason on stderr), 2 for bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "dataset.h"
#include "fdio.h"
#include "loader.h"
#include "schema.h"
#include "shard.h"

#define SHARD_FILE "shard-00000.lds"

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Move the trailer of the finished shard on fd to claim fsize bytes. */
static int claim(int fd, const char *path, uint64_t size, uint64_t fsize,
		 uint64_t *new_size, struct diag *d)
{
	unsigned char tr[SHARD_TRAILER_SIZE];
	uint64_t foff;
	int err;

	err = fdio_pread_all(fd, tr, sizeof(tr), size - sizeof(tr));
	if (err)
		return diag_set(d, err, "%s: read: %s", path,
				loader_strerror(err));
	foff = get64(tr);
	if (fsize < size - sizeof(tr) - foff)
		return diag_set(d, -EINVAL,
				"%s: the footer already has %" PRIu64 " bytes",
				path, size - sizeof(tr) - foff);
	put64(tr + 8, fsize);
	put64(tr + 48, XXH3_64bits(tr, 48));
	*new_size = foff + fsize + sizeof(tr);
	if (ftruncate(fd, (off_t)*new_size))
		return diag_set(d, -errno, "%s: truncate: %s", path,
				strerror(errno));
	if (pwrite(fd, tr, sizeof(tr), (off_t)(*new_size - sizeof(tr))) !=
	    (ssize_t)sizeof(tr))
		return diag_set(d, -EIO, "%s: write: %s", path,
				strerror(errno));
	return 0;
}

int main(int argc, char **argv)
{
	struct dataset ds = { 0 };
	struct dataset_shard entry = { 0 };
	struct schema sch = { 0 };
	struct shard_writer *w = NULL;
	struct shard_field f;
	struct diag d = { 0 };
	unsigned char lab[8] = { 0 };
	uint64_t fsize, size = 0;
	char path[4200], *end;
	int fd = -1, err, rc = 1;

	if (argc != 3) {
		fprintf(stderr, "usage: mkhugefooter OUTDIR FOOTER_BYTES\n");
		return 2;
	}
	errno = 0;
	fsize = strtoull(argv[2], &end, 10);
	if (errno || *end || !fsize) {
		fprintf(stderr, "mkhugefooter: bad size %s\n", argv[2]);
		return 2;
	}
	sch.nfields = 1;
	err = field_parse(&sch.f[0], "label: int64", &d);
	if (err)
		goto out;
	if (mkdir(argv[1], 0755) && errno != EEXIST) {
		err = diag_set(&d, -errno, "%s: %s", argv[1], strerror(errno));
		goto out;
	}
	snprintf(path, sizeof(path), "%s/%s", argv[1], SHARD_FILE);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = diag_set(&d, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	err = shard_writer_new(&w, fd, path, &sch, NULL, &d);
	if (!err) {
		f = (struct shard_field){ lab, sizeof(lab), sizeof(lab) };
		err = shard_writer_add(w, &f, &d);
	}
	if (err)
		goto out;
	size = shard_writer_size(w);
	err = shard_writer_finish(w, &d);
	if (!err)
		err = claim(fd, path, size, fsize, &size, &d);
	if (err)
		goto out;
	entry.file = SHARD_FILE;
	entry.records = 1;
	entry.bytes = size;
	ds.dir = argv[1];
	ds.schema = sch;
	ds.records = 1;
	ds.nshards = 1;
	ds.shards = &entry;
	ds.origin.shuffle_seed = -1;
	err = dataset_save(&ds, &d);
	if (!err)
		rc = 0;
out:
	if (err)
		fprintf(stderr, "mkhugefooter: %s\n",
			d.msg[0] ? d.msg : loader_strerror(err));
	shard_writer_free(w);
	if (fd >= 0)
		close(fd);
	return rc;
}
