/*
 * mkbadds.c - write a one-shard image dataset that holds given files as
 * they are, for the tests of damaged JPEGs.
 *
 *	mkbadds [--claim-footer BYTES] OUTDIR FILE...
 *
 * Record i of OUTDIR/shard-00000.lds is FILE i (in argument order): its
 * bytes verbatim in field "image: jpeg", and i in field "label: int64".
 * OUTDIR/manifest.json describes the shard, with no class names.
 *
 * --claim-footer BYTES makes a hostile shard instead: its trailer is moved
 * BYTES past the footer's start, leaving a hole, so that the file is
 * sparse, costs a few blocks, and its trailer (with a valid checksum)
 * declares a footer of BYTES bytes. A reader that trusted the declared
 * size would allocate and read all of it before its checksum failed.
 *
 * `loaderctl pack` refuses what cannot be a JPEG (an ImageFolder file
 * must have a JPEG header, a tar member must start with FF D8), so an
 * empty file or one that is not a JPEG at all can only reach the daemon
 * through a dataset written like this. The shard and manifest come from
 * the writers the packer uses (pipeline/format/shard.h, pipeline/format/dataset.h), so
 * everything but the payloads is well formed. Exit status: 0, 1 on
 * failure (the reason on stderr), 2 for bad usage.
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
#include "loader_error.h"
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

/*
 * Move the trailer of the finished shard of size bytes on fd so that it
 * claims a footer of fsize bytes; *new_size gets the file's new size.
 */
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

/* Read path whole into *buf (grown as needed); *len gets its size. */
static int slurp(const char *path, unsigned char **buf, size_t *cap,
		 size_t *len, struct diag *d)
{
	struct stat st;
	int fd, err = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return diag_set(d, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		err = diag_set(d, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > UINT32_MAX) {
		err = diag_set(d, -EINVAL,
			       "%s: not a regular file of at most 4 GiB", path);
		goto out;
	}
	if ((size_t)st.st_size + 1 > *cap) {
		/* One spare byte: an empty file still gets a valid pointer. */
		unsigned char *p = realloc(*buf, (size_t)st.st_size + 1);

		if (!p) {
			err = -ENOMEM;
			goto out;
		}
		*buf = p;
		*cap = (size_t)st.st_size + 1;
	}
	err = fdio_pread_all(fd, *buf, (size_t)st.st_size, 0);
	if (err)
		err = diag_set(d, err, "%s: read: %s", path,
			       loader_strerror(err));
	*len = (size_t)st.st_size;
out:
	close(fd);
	return err;
}

int main(int argc, char **argv)
{
	struct dataset ds = { 0 };
	struct dataset_shard entry = { 0 };
	struct schema sch = { 0 };
	struct shard_writer *w = NULL;
	struct shard_field f[2];
	struct diag d = { 0 };
	unsigned char *buf = NULL, lab[8];
	size_t cap = 0, len = 0;
	char path[4200], *end;
	uint64_t fsize = 0;
	int fd = -1, err, rc = 1;

	if (argc > 2 && !strcmp(argv[1], "--claim-footer")) {
		errno = 0;
		fsize = strtoull(argv[2], &end, 10);
		if (errno || *end || !fsize || argv[2][0] == '-') {
			fprintf(stderr,
				"mkbadds: --claim-footer: bad size %s\n",
				argv[2]);
			return 2;
		}
		argc -= 2;
		argv += 2;
	}
	if (argc < 3) {
		fprintf(stderr,
			"usage: mkbadds [--claim-footer BYTES] OUTDIR FILE...\n");
		return 2;
	}
	sch.nfields = 2;
	err = field_parse(&sch.f[0], "image: jpeg", &d);
	if (!err)
		err = field_parse(&sch.f[1], "label: int64", &d);
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
	for (int i = 2; i < argc && !err; i++) {
		uint64_t v = (uint64_t)(i - 2);

		err = slurp(argv[i], &buf, &cap, &len, &d);
		if (err)
			break;
		for (unsigned k = 0; k < 8; k++)
			lab[k] = (unsigned char)(v >> (8 * k));
		f[0] = (struct shard_field){ buf, (uint32_t)len, len };
		f[1] = (struct shard_field){ lab, sizeof(lab), sizeof(lab) };
		err = shard_writer_add(w, f, &d);
	}
	if (err)
		goto out;
	entry.file = SHARD_FILE;
	entry.records = shard_writer_count(w);
	entry.bytes = shard_writer_size(w);
	err = shard_writer_finish(w, &d);
	if (!err && fsize)
		err = claim(fd, path, entry.bytes, fsize, &entry.bytes, &d);
	if (err)
		goto out;
	if (close(fd)) {
		fd = -1;
		err = diag_set(&d, -errno, "%s: close: %s", path,
			       strerror(errno));
		goto out;
	}
	fd = -1;
	ds.dir = argv[1];
	ds.schema = sch;
	ds.records = entry.records;
	ds.nshards = 1;
	ds.shards = &entry;
	ds.origin.shuffle_seed = -1;
	err = dataset_save(&ds, &d);
	if (!err)
		rc = 0;
out:
	if (err)
		fprintf(stderr, "mkbadds: %s\n",
			d.msg[0] ? d.msg : loader_strerror(err));
	shard_writer_free(w);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}
