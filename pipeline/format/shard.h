/*
 * shard.h - shard files, format v1 (the spec is man/loader-shard.5).
 *
 * A shard is: a 64-byte header, records back to back, a footer (schema,
 * zstd dictionaries, index of offset/length/XXH3-64 per record) and a
 * 64-byte trailer that locates the footer. Opening a shard reads only the
 * header, the trailer and the footer, and checks every offset and length
 * in them against the file before anything uses them.
 *
 * Records are read by the caller (the daemon plans its own io_uring reads
 * from shard_rec()); shard_parse_record() then checks a record's bytes
 * and splits them into fields.
 */
#ifndef LD_SHARD_H
#define LD_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "schema.h"

#define SHARD_MAGIC	   "LDSHARD" /* 7 characters and a NUL: 8 bytes */
#define SHARD_VERSION	   1
#define SHARD_HEADER_SIZE  64
#define SHARD_TRAILER_SIZE 64
#define SHARD_FOOTER_HEAD  32
#define SHARD_FIELD_DESC   96
#define SHARD_INDEX_ENTRY  24
/* No record may be larger than this (lengths are u32 on disk). */
#define SHARD_MAX_RECORD UINT32_MAX
/*
 * Bounds of what a footer may hold, so that a reader knows the most it
 * may have to allocate before it reads one: records of one shard (an index
 * of 384 MiB at most), and the bytes of all its dictionaries (zstd's are
 * ~100 KiB; 64 fields of the default 112 KiB fit with room). The writer
 * refuses more; the reader rejects a footer larger than these allow.
 */
#define SHARD_MAX_RECORDS    (1u << 24)
#define SHARD_MAX_DICT_BYTES (16u << 20)

struct zrec_ddict;

/* A field's payload as the writer takes it and the reader returns it. */
struct shard_field {
	const void *data;
	uint32_t len;	  /* stored (possibly compressed) bytes */
	uint64_t raw_len; /* writer: bytes before compression */
};

/* One index entry. */
struct shard_rec {
	uint64_t offset; /* absolute file offset of the record */
	uint32_t length;
	uint64_t xxh3; /* XXH3-64 of the record's bytes */
};

/* Per-field totals kept in the footer. */
struct shard_field_stats {
	uint64_t raw_bytes;    /* before compression */
	uint64_t stored_bytes; /* as stored, without the length prefix */
};

/* A dictionary handed to the writer (NULL data for none). */
struct shard_dict {
	const void *data;
	size_t len;
};

/* --- writing --------------------------------------------------------- */

struct shard_writer;

/*
 * Start a shard on fd (opened for writing, positioned at 0; the writer
 * does not close it). name is used in error messages. dicts has one
 * entry per field and may be NULL when no field uses COMP_ZSTD_DICT; the
 * schema and dictionaries are copied. Returns 0 or a negative code.
 */
int shard_writer_new(struct shard_writer **out, int fd, const char *name,
		     const struct schema *s, const struct shard_dict *dicts,
		     struct diag *d);

/*
 * Append one record: one payload per schema field, already compressed as
 * the schema says. Uncompressed tensors must have exactly their fixed
 * size. Returns 0 or a negative code.
 */
int shard_writer_add(struct shard_writer *w, const struct shard_field *f,
		     struct diag *d);

/* Records added so far. */
uint64_t shard_writer_count(const struct shard_writer *w);

/*
 * Bytes the shard would have if finished now (header to trailer); call
 * before shard_writer_finish().
 */
uint64_t shard_writer_size(const struct shard_writer *w);

/* Write the footer and trailer and flush. Returns 0 or a negative code. */
int shard_writer_finish(struct shard_writer *w, struct diag *d);

/* Free the writer (finished or not). NULL is a no-op. */
void shard_writer_free(struct shard_writer *w);

/* --- reading --------------------------------------------------------- */

struct shard;

/*
 * Open the shard on fd: read and check header, trailer and footer, and
 * digest any dictionaries. fd stays owned by the caller and must stay
 * open while the shard is in use. The footer's size is checked against
 * the index and dictionaries it claims to hold (and the bounds above)
 * before it is allocated and read. Errors name the file and the offset:
 * LOADER_EFORMAT (bad magic or structure), LOADER_EVERSION,
 * LOADER_ETRUNC, LOADER_ECHECKSUM (header, trailer or footer), LOADER_ESCHEMA,
 * LOADER_ERANGE (an offset or length outside the file, or a footer whose
 * size disagrees with its index), LOADER_ETOOBIG (a footer above the
 * bounds), -errno for I/O.
 */
int shard_open(struct shard **out, int fd, const char *name, struct diag *d);

/*
 * A shard over a WebDataset tar read in place (wds.h): its records are
 * the samples' byte ranges, their fields found by ix (which must outlive
 * the shard), with no checksum to check. fd as for shard_open().
 */
struct recindex;
int shard_open_wds(struct shard **out, int fd, const char *name,
		   const struct recindex *ix, struct diag *d);

/*
 * Where a shard's trailer (its last SHARD_TRAILER_SIZE bytes) says the
 * footer begins, unchecked: for a reader that fetches the footer before
 * it has the file (shard_open() checks it all).
 */
uint64_t shard_trailer_footer(const unsigned char *trailer);

/* Close a shard (not its fd). NULL is a no-op. */
void shard_close(struct shard *sh);

/* Number of records. */
uint64_t shard_count(const struct shard *sh);

/* The schema; valid until shard_close(). */
const struct schema *shard_schema(const struct shard *sh);

/* The name given to shard_open(); valid until shard_close(). */
const char *shard_name(const struct shard *sh);

/* File size, and the [begin, end) byte range that holds the records. */
uint64_t shard_file_size(const struct shard *sh);

/*
 * Bytes of memory the open shard holds for its index: its footer, copied
 * to the heap, or the index of a tar read in place (which the caller
 * keeps).
 */
uint64_t shard_index_bytes(const struct shard *sh);
void shard_data_range(const struct shard *sh, uint64_t *begin, uint64_t *end);

/* Index entry i. Returns 0 or LOADER_ERANGE. */
int shard_rec(const struct shard *sh, uint64_t i, struct shard_rec *r);

/* Footer totals of field i (i < nfields). */
struct shard_field_stats shard_stats(const struct shard *sh, unsigned i);

/*
 * The digested dictionary of field i, or NULL if it has none. Valid until
 * shard_close(); shareable between threads.
 */
const struct zrec_ddict *shard_ddict(const struct shard *sh, unsigned i);

/* The dictionary bytes of field i (NULL and 0 if none). */
const void *shard_dict(const struct shard *sh, unsigned i, size_t *len);

/*
 * Check record i's bytes (buf, len, as read from the file at its index
 * offset) against its length and checksum, then split it into one
 * shard_field per schema field (out has nfields entries, pointing into
 * buf). Uncompressed tensors are checked against their fixed size.
 * Returns 0, LOADER_ECHECKSUM or LOADER_EFORMAT, naming file, record and
 * offset in d.
 */
int shard_parse_record(const struct shard *sh, uint64_t i, const void *buf,
		       size_t len, struct shard_field *out, struct diag *d);

/*
 * The two halves of shard_parse_record(), for callers that spread them
 * over threads: check record i's length and checksum; split a record
 * whose checksum was checked into its fields (with the same checks of
 * structure).
 */
int shard_check_sum(const struct shard *sh, uint64_t i, const void *buf,
		    size_t len, struct diag *d);
int shard_split_record(const struct shard *sh, uint64_t i, const void *buf,
		       size_t len, struct shard_field *out, struct diag *d);
/*
 * The same for a record whose length and checksum were checked against
 * its index entry before (the node cache's): the entry is not read
 * again, so messages name no offset.
 */
int shard_split_known(const struct shard *sh, uint64_t i, const void *buf,
		      size_t len, struct shard_field *out, struct diag *d);

/*
 * The layout every record of sh shares, where they share one: each field
 * an uncompressed tensor of fixed size, in a packed shard (not a tar read
 * in place). Then every record is the same bytes long, starts with the
 * same head (its fields' lengths, 4 bytes each) and has field k at the
 * same place: off[k] (nfields entries). head gets the head's bytes (4 *
 * SCHEMA_MAX_FIELDS room). Returns the records' length, or 0 when they
 * have no common layout. A record whose checksum was checked, whose
 * length is this and whose head is head splits as shard_split_known()
 * would split it.
 */
uint32_t shard_fixed_layout(const struct shard *sh, uint32_t *off,
			    unsigned char *head);

/*
 * Read record i with pread into buf (cap bytes) and parse it as above.
 * A convenience for tools; the daemon plans its own reads.
 */
int shard_read_record(const struct shard *sh, uint64_t i, void *buf, size_t cap,
		      struct shard_field *out, struct diag *d);

/*
 * Undo field i's compression: the size payload f unpacks to (probe), and
 * the unpacking itself into dst (cap bytes). Uncompressed fields are
 * copied; the caller may as well use f->data directly. Errors name the
 * file and field; the caller adds the record.
 */
struct codec_ctx;
int shard_field_size(const struct shard *sh, struct codec_ctx *ctx, unsigned i,
		     const struct shard_field *f, size_t *size, struct diag *d);
int shard_unpack_field(const struct shard *sh, struct codec_ctx *ctx,
		       unsigned i, const struct shard_field *f, void *dst,
		       size_t cap, size_t *out_len, struct diag *d);

/*
 * Check that field i of a record decodes to the size its header says
 * (and, for a tensor, to its shape's size), into *size, without keeping
 * the result: what a hostile header declares is never allocated.
 * Returns 0 or a negative code, with the shard and field in d.
 */
int shard_check_field(const struct shard *sh, struct codec_ctx *ctx, unsigned i,
		      const struct shard_field *f, size_t *size,
		      struct diag *d);

/*
 * The key of a parsed record (f: its fields, of schema s; schema.h,
 * SCHEMA_KEY) as text into buf (n bytes): the name up to n - 1 bytes,
 * any byte that is not printable ASCII as '?'. Returns buf, or NULL when
 * s has no key field.
 */
const char *shard_key_text(const struct schema *s, const struct shard_field *f,
			   char *buf, size_t n);

/*
 * The key of record i from its bytes (rec, len, as read at its index
 * offset), split without checking its checksum: what names the source
 * of a record found bad, even one whose checksum failed, as long as its
 * fields still split. Into buf as shard_key_text(); NULL when they do not
 * split or the schema has no key.
 */
const char *shard_record_key(const struct shard *sh, uint64_t i,
			     const void *rec, size_t len, char *buf, size_t n);

#endif /* LD_SHARD_H */
