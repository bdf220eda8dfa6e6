/*
 * recindex.c - the record index (recindex.h): made, placed, serialized
 * and checked when loaded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "loader_error.h"
#include "recindex.h"
#include "shard.h"

#define WDS_INDEX_MAGIC	  "LDWDSIX1"
#define WDS_INDEX_VERSION 1

void recindex_free(struct recindex *ix)
{
	if (!ix)
		return;
	free(ix->index);
	free(ix->ent);
	free(ix);
}

struct recindex *recindex_new(uint64_t count, uint32_t nf)
{
	struct recindex *ix = mem_calloc(1, sizeof(*ix));

	if (!ix)
		return NULL;
	ix->count = count;
	ix->index = mem_calloc(count ? count : 1, SHARD_INDEX_ENTRY);
	ix->ent = mem_calloc(count * nf > 0 ? count * nf : 1, sizeof(*ix->ent));
	if (!ix->index || !ix->ent) {
		recindex_free(ix);
		return NULL;
	}
	return ix;
}

void recindex_set(struct recindex *ix, uint64_t i, uint64_t off, uint32_t len)
{
	unsigned char *e = ix->index + i * SHARD_INDEX_ENTRY;

	memset(e, 0, SHARD_INDEX_ENTRY);
	memcpy(e, &off, 8); /* little-endian hosts (proto.h) */
	memcpy(e + 8, &len, 4);
}

/*
 * The serialized form: magic, version, nfields, count, file size; each
 * field's text form in FIELD_TEXT_MAX bytes; raw_bytes per field; the
 * index entries; the field entries. Host byte order (one machine).
 */
struct wds_blob_head {
	char magic[8];
	uint32_t version;
	uint32_t nfields;
	uint64_t count;
	uint64_t file_size;
};

int recindex_save(const struct recindex *ix, void **blob, size_t *len)
{
	uint32_t nf = ix->schema.nfields;
	struct wds_blob_head h = { .version = WDS_INDEX_VERSION,
				   .nfields = nf,
				   .count = ix->count,
				   .file_size = ix->file_size };
	size_t n = sizeof(h) + (size_t)nf * (FIELD_TEXT_MAX + 9) +
		   ix->count * SHARD_INDEX_ENTRY + ix->count * nf * 8;
	unsigned char *p = mem_calloc(1, n), *q = p;

	if (!p)
		return -ENOMEM;
	memcpy(h.magic, WDS_INDEX_MAGIC, 8);
	memcpy(q, &h, sizeof(h));
	q += sizeof(h);
	for (uint32_t k = 0; k < nf; k++, q += FIELD_TEXT_MAX)
		field_format(&ix->schema.f[k], (char *)q, FIELD_TEXT_MAX);
	memcpy(q, ix->raw_bytes, nf * 8);
	q += nf * 8;
	memcpy(q, ix->conv, nf);
	q += nf;
	memcpy(q, ix->index, ix->count * SHARD_INDEX_ENTRY);
	q += ix->count * SHARD_INDEX_ENTRY;
	memcpy(q, ix->ent, ix->count * nf * 8);
	*blob = p;
	*len = n;
	return 0;
}

int recindex_load(struct recindex **out, const void *blob, size_t len,
		  uint64_t file_size, struct diag *d)
{
	const unsigned char *p = blob;
	struct wds_blob_head h;
	struct recindex *ix;
	size_t need;

	*out = NULL;
	if (len < sizeof(h))
		return diag_set(d, LOADER_EFORMAT, "tar index: %zu bytes", len);
	memcpy(&h, p, sizeof(h));
	if (memcmp(h.magic, WDS_INDEX_MAGIC, 8) ||
	    h.version != WDS_INDEX_VERSION || !h.nfields ||
	    h.nfields > SCHEMA_MAX_FIELDS || h.file_size != file_size ||
	    h.count > (len / SHARD_INDEX_ENTRY))
		return diag_set(d, LOADER_EFORMAT,
				"tar index: not one of this version and file");
	need = sizeof(h) + (size_t)h.nfields * (FIELD_TEXT_MAX + 9) +
	       h.count * SHARD_INDEX_ENTRY + h.count * h.nfields * 8;
	if (len != need)
		return diag_set(d, LOADER_EFORMAT,
				"tar index: %zu bytes, its head says %zu", len,
				need);
	ix = recindex_new(h.count, h.nfields);
	if (!ix)
		return diag_set(d, -ENOMEM, "tar index: out of memory");
	p += sizeof(h);
	ix->schema.nfields = h.nfields;
	for (uint32_t k = 0; k < h.nfields; k++, p += FIELD_TEXT_MAX) {
		char text[FIELD_TEXT_MAX];

		memcpy(text, p, FIELD_TEXT_MAX);
		text[FIELD_TEXT_MAX - 1] = '\0';
		if (field_parse(&ix->schema.f[k], text, d))
			goto bad;
	}
	if (schema_check(&ix->schema, d))
		goto bad;
	memcpy(ix->raw_bytes, p, h.nfields * 8);
	p += h.nfields * 8;
	memcpy(ix->conv, p, h.nfields);
	p += h.nfields;
	for (uint32_t k = 0; k < h.nfields; k++)
		if (ix->conv[k] > REC_NPY ||
		    (ix->conv[k] == REC_INT_TEXT &&
		     (ix->schema.f[k].kind != FIELD_TENSOR ||
		      ix->schema.f[k].dtype != DT_I64 || ix->schema.f[k].ndim)))
			goto bad_conv;
	memcpy(ix->index, p, h.count * SHARD_INDEX_ENTRY);
	p += h.count * SHARD_INDEX_ENTRY;
	memcpy(ix->ent, p, h.count * h.nfields * 8);
	ix->file_size = file_size;
	/* Everything a reader will trust, checked against the file. */
	for (uint64_t i = 0; i < h.count; i++) {
		uint64_t off, *e = &ix->ent[i * h.nfields];
		uint32_t rl;

		memcpy(&off, ix->index + i * SHARD_INDEX_ENTRY, 8);
		memcpy(&rl, ix->index + i * SHARD_INDEX_ENTRY + 8, 4);
		if (off > file_size || rl > file_size - off)
			goto range;
		for (uint32_t k = 0; k < h.nfields; k++) {
			if (ix->conv[k] == REC_INT_TEXT)
				continue; /* a value, not a place */
			if ((e[k] & 0xffffffffu) > rl ||
			    e[k] >> 32 > rl - (e[k] & 0xffffffffu))
				goto range;
		}
	}
	*out = ix;
	return 0;
range:
	diag_set(d, LOADER_EFORMAT, "tar index: an entry outside the file");
	goto bad;
bad_conv:
	diag_set(d, LOADER_EFORMAT, "tar index: a field of an unknown kind");
bad:
	recindex_free(ix);
	return LOADER_EFORMAT;
}
