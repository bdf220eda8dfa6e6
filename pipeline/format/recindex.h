/*
 * recindex.h - a record index: where each sample of a file read in place
 * lies, and each of its fields within it, as a shard's footer says it for
 * a shard. Two scans make one: a WebDataset tar's (wds.h) and an LMDB
 * database's (lmdbds.h); a shard is opened on it (shard_open_wds()), and
 * the daemon keeps it, serialized, keyed by the file's identity.
 */
#ifndef LD_RECINDEX_H
#define LD_RECINDEX_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "schema.h"

/* What a field's bytes in a record become. */
enum rec_conv {
	REC_AS_IS = 0,	  /* jpeg and bytes fields: the member's bytes */
	REC_INT_TEXT = 1, /* a decimal integer, as int64 */
	REC_NPY = 2,	  /* a .npy array's data, after its header */
};

/*
 * The index of one file as a stream reads it: per sample its byte range
 * (as a shard index entry: offset, length, no checksum) and per field
 * its place in that range, or an int64 field's value. Tar members and
 * LMDB values carry no checksum: their scans check the file's own
 * structure.
 */
struct recindex {
	struct schema schema;
	uint64_t count;
	unsigned char *index; /* count shard index entries (shard.h) */
	/*
	 * count * nfields: the field's offset in its record (low 32 bits)
	 * and length (high 32), or an int64 field's value.
	 */
	uint64_t *ent;
	uint64_t raw_bytes[SCHEMA_MAX_FIELDS]; /* per field, all samples */
	uint8_t conv[SCHEMA_MAX_FIELDS];       /* enum rec_conv */
	uint64_t file_size;
};

void recindex_free(struct recindex *ix);

/*
 * An empty index of count samples and nfields fields, and sample i's
 * record placed at off, len bytes. REC_INT_TEXT marks a field whose
 * int64 value is kept in the index itself.
 */
struct recindex *recindex_new(uint64_t count, uint32_t nfields);
void recindex_set(struct recindex *ix, uint64_t i, uint64_t off, uint32_t len);

/* Serialize an index into a new buffer (*blob, *len; the caller frees). */
int recindex_save(const struct recindex *ix, void **blob, size_t *len);

/*
 * An index from what recindex_save() made, every offset checked against
 * file_size (the file's size now) as a shard footer's are. A blob that
 * does not hold together is LOADER_EFORMAT (the caller scans again).
 */
int recindex_load(struct recindex **out, const void *blob, size_t len,
		  uint64_t file_size, struct diag *d);

#endif /* LD_RECINDEX_H */
