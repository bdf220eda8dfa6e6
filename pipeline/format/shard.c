/*
 * shard.c - shard format v1: writer and reader (man/loader-shard.5).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xxhash.h>
#if defined(__x86_64__)
/*
 * libxxhash's runtime dispatch: the AVX2/AVX-512 kernels when the CPU has
 * them. Same XXH3-64 values, computed about twice as fast on long records.
 */
#include <xxh_x86dispatch.h>
#endif

#include "fault.h"
#include "fdio.h"
#include "loader_error.h"
#include "shard.h"
#include "recindex.h"
#include "codec.h"
#include "zrec.h"

#define WBUF_SIZE (4u << 20)

/* Does a tensor of len bytes fit field f: its size, or whole rows? */
static bool tensor_fits(const struct field *f, uint64_t len)
{
	return field_ragged(f) ? len % field_row_size(f) == 0 :
				 len == field_fixed_size(f);
}

static inline uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static inline void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static inline void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t align8(uint64_t v)
{
	return (v + 7) & ~(uint64_t)7;
}

/* Bytes of the footer before the index: head, descriptors, dictionaries. */
static uint64_t footer_pre_index(const struct schema *s, const uint64_t *dl)
{
	uint64_t pos =
		SHARD_FOOTER_HEAD + (uint64_t)s->nfields * SHARD_FIELD_DESC;

	for (uint32_t i = 0; i < s->nfields; i++)
		if (s->f[i].comp == COMP_ZSTD_DICT)
			pos = align8(pos + dl[i]);
	return pos;
}

/* ---------------------------------------------------------------- writer */

struct shard_writer {
	int fd;
	char name[256];
	struct schema schema;
	void *dict[SCHEMA_MAX_FIELDS];
	uint64_t dict_len[SCHEMA_MAX_FIELDS];
	struct shard_field_stats stats[SCHEMA_MAX_FIELDS];
	XXH3_state_t *xx;
	unsigned char *buf;
	size_t buf_len;
	uint64_t off;	      /* bytes of the file so far, buffered included */
	unsigned char *index; /* SHARD_INDEX_ENTRY bytes per record */
	uint64_t count, index_cap;
	bool failed;
};

void shard_writer_free(struct shard_writer *w)
{
	if (!w)
		return;
	for (unsigned i = 0; i < SCHEMA_MAX_FIELDS; i++)
		free(w->dict[i]);
	XXH3_freeState(w->xx);
	free(w->buf);
	free(w->index);
	free(w);
}

static int wflush(struct shard_writer *w)
{
	int err = fdio_write_all(w->fd, w->buf, w->buf_len);

	w->buf_len = 0;
	return err;
}

static int wput(struct shard_writer *w, const void *p, size_t len)
{
	int err;

	if (len > WBUF_SIZE - w->buf_len) {
		err = wflush(w);
		if (err)
			return err;
	}
	if (len >= WBUF_SIZE) {
		err = fdio_write_all(w->fd, p, len);
		if (err)
			return err;
	} else if (len) { /* p may be NULL when len is 0 */
		memcpy(w->buf + w->buf_len, p, len);
		w->buf_len += len;
	}
	w->off += len;
	return 0;
}

int shard_writer_new(struct shard_writer **out, int fd, const char *name,
		     const struct schema *s, const struct shard_dict *dicts,
		     struct diag *d)
{
	unsigned char hdr[SHARD_HEADER_SIZE] = { 0 };
	struct shard_writer *w;
	uint64_t dict_total = 0;
	int err;

	err = schema_check(s, d);
	if (err)
		return diag_wrap(d, err, "%s", name);
	w = mem_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->schema = *s;
	w->xx = XXH3_createState();
	w->buf = mem_alloc(WBUF_SIZE);
	if (!w->xx || !w->buf) {
		err = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < s->nfields; i++) {
		if (s->f[i].comp != COMP_ZSTD_DICT)
			continue;
		if (!dicts || !dicts[i].data || !dicts[i].len) {
			err = diag_set(d, LOADER_ESCHEMA,
				       "%s: field %s needs a dictionary", name,
				       s->f[i].name);
			goto fail;
		}
		/* Readers refuse more: see SHARD_MAX_DICT_BYTES. */
		dict_total += dicts[i].len;
		if (dict_total > SHARD_MAX_DICT_BYTES) {
			err = diag_set(
				d, LOADER_ETOOBIG,
				"%s: dictionaries of %" PRIu64
				" bytes up to field %s, a shard holds at most %u",
				name, dict_total, s->f[i].name,
				SHARD_MAX_DICT_BYTES);
			goto fail;
		}
		w->dict[i] = mem_alloc(dicts[i].len);
		if (!w->dict[i]) {
			err = -ENOMEM;
			goto fail;
		}
		memcpy(w->dict[i], dicts[i].data, dicts[i].len);
		w->dict_len[i] = dicts[i].len;
	}
	memcpy(hdr, SHARD_MAGIC, 8);
	put32(hdr + 8, SHARD_VERSION);
	put32(hdr + 12, SHARD_HEADER_SIZE);
	put64(hdr + 56, XXH3_64bits(hdr, 56));
	err = wput(w, hdr, sizeof(hdr));
	if (err) {
		diag_set(d, err, "%s: write: %s", name, loader_strerror(err));
		goto fail;
	}
	*out = w;
	return 0;
fail:
	shard_writer_free(w);
	return err;
}

int shard_writer_add(struct shard_writer *w, const struct shard_field *f,
		     struct diag *d)
{
	unsigned char lens[4 * SCHEMA_MAX_FIELDS];
	uint32_t nf = w->schema.nfields;
	uint64_t total = (uint64_t)4 * nf;
	unsigned char *e;
	int err;

	if (w->failed)
		return diag_set(d, -EIO, "%s: an earlier write failed",
				w->name);
	for (uint32_t i = 0; i < nf; i++) {
		const struct field *fd = &w->schema.f[i];

		if (fd->kind == FIELD_TENSOR && fd->comp == COMP_NONE &&
		    !tensor_fits(fd, f[i].len))
			return diag_set(
				d, LOADER_ESCHEMA,
				"%s: record %" PRIu64 ": field %s has %" PRIu32
				" bytes, its shape needs %s%" PRIu64,
				w->name, w->count, fd->name, f[i].len,
				field_ragged(fd) ? "a multiple of " : "",
				field_ragged(fd) ? field_row_size(fd) :
						   field_fixed_size(fd));
		if (fd->kind == FIELD_TENSOR && fd->comp != COMP_NONE &&
		    field_ragged(fd) && f[i].raw_len % field_row_size(fd))
			return diag_set(d, LOADER_ESCHEMA,
					"%s: record %" PRIu64
					": field %s unpacks to %" PRIu64
					" bytes, not whole rows of %" PRIu64,
					w->name, w->count, fd->name,
					f[i].raw_len, field_row_size(fd));
		put32(lens + 4 * i, f[i].len);
		total += f[i].len;
	}
	if (total > SHARD_MAX_RECORD)
		return diag_set(d, LOADER_ETOOBIG,
				"%s: record %" PRIu64 " of %" PRIu64
				" bytes exceeds 4 GiB",
				w->name, w->count, total);
	if (w->count >= SHARD_MAX_RECORDS)
		return diag_set(d, LOADER_ETOOBIG,
				"%s: a shard holds at most %u records: start "
				"another shard",
				w->name, SHARD_MAX_RECORDS);
	if (w->count == w->index_cap) {
		uint64_t cap = w->index_cap ? w->index_cap * 2 : 1024;
		void *p = mem_realloc(w->index, cap * SHARD_INDEX_ENTRY);

		if (!p)
			return -ENOMEM;
		w->index = p;
		w->index_cap = cap;
	}
	e = w->index + w->count * SHARD_INDEX_ENTRY;
	put64(e, w->off);
	put32(e + 8, (uint32_t)total);
	put32(e + 12, 0);

	XXH3_64bits_reset(w->xx);
	XXH3_64bits_update(w->xx, lens, 4u * nf);
	err = wput(w, lens, 4u * nf);
	for (uint32_t i = 0; i < nf && !err; i++) {
		XXH3_64bits_update(w->xx, f[i].data, f[i].len);
		err = wput(w, f[i].data, f[i].len);
		w->stats[i].stored_bytes += f[i].len;
		/* Without compression, raw is what is stored, whatever given. */
		w->stats[i].raw_bytes += w->schema.f[i].comp == COMP_NONE ?
						 f[i].len :
						 f[i].raw_len;
	}
	if (err) {
		w->failed = true;
		return diag_set(d, err, "%s: write: %s", w->name,
				loader_strerror(err));
	}
	put64(e + 16, XXH3_64bits_digest(w->xx));
	w->count++;
	return 0;
}

uint64_t shard_writer_count(const struct shard_writer *w)
{
	return w->count;
}

uint64_t shard_writer_size(const struct shard_writer *w)
{
	return w->off + footer_pre_index(&w->schema, w->dict_len) +
	       w->count * SHARD_INDEX_ENTRY + SHARD_TRAILER_SIZE;
}

int shard_writer_finish(struct shard_writer *w, struct diag *d)
{
	const struct schema *s = &w->schema;
	uint64_t pre = footer_pre_index(s, w->dict_len);
	uint64_t fsize = pre + w->count * SHARD_INDEX_ENTRY;
	uint64_t foff = w->off, pos;
	unsigned char *ft = NULL;
	unsigned char tr[SHARD_TRAILER_SIZE] = { 0 };
	int err;

	if (w->failed)
		return diag_set(d, -EIO, "%s: an earlier write failed",
				w->name);
	ft = mem_calloc(1, pre);
	if (!ft)
		return -ENOMEM;
	put32(ft, s->nfields);
	put32(ft + 4, SHARD_FIELD_DESC);
	put32(ft + 8, SHARD_INDEX_ENTRY);
	put64(ft + 16, w->count);
	put64(ft + 24, pre);
	pos = SHARD_FOOTER_HEAD + (uint64_t)s->nfields * SHARD_FIELD_DESC;
	for (uint32_t i = 0; i < s->nfields; i++) {
		const struct field *f = &s->f[i];
		unsigned char *p =
			ft + SHARD_FOOTER_HEAD + i * SHARD_FIELD_DESC;

		memcpy(p, f->name, sizeof(f->name));
		p[32] = f->kind;
		p[33] = f->dtype;
		p[34] = f->ndim;
		p[35] = f->comp;
		put32(p + 36, (uint32_t)f->level);
		for (unsigned k = 0; k < SCHEMA_MAX_DIMS; k++)
			put32(p + 40 + 4 * k, f->dims[k]);
		if (f->comp == COMP_ZSTD_DICT) {
			put64(p + 56, pos);
			put64(p + 64, w->dict_len[i]);
			memcpy(ft + pos, w->dict[i], w->dict_len[i]);
			pos = align8(pos + w->dict_len[i]);
		}
		put64(p + 72, w->stats[i].raw_bytes);
		put64(p + 80, w->stats[i].stored_bytes);
	}

	XXH3_64bits_reset(w->xx);
	XXH3_64bits_update(w->xx, ft, pre);
	XXH3_64bits_update(w->xx, w->index, w->count * SHARD_INDEX_ENTRY);
	err = wput(w, ft, pre);
	if (!err)
		err = wput(w, w->index, w->count * SHARD_INDEX_ENTRY);

	put64(tr, foff);
	put64(tr + 8, fsize);
	put64(tr + 16, w->count);
	put64(tr + 24, XXH3_64bits_digest(w->xx));
	put32(tr + 32, SHARD_VERSION);
	put64(tr + 48, XXH3_64bits(tr, 48));
	memcpy(tr + 56, SHARD_MAGIC, 8);
	if (!err)
		err = wput(w, tr, sizeof(tr));
	if (!err)
		err = wflush(w);
	free(ft);
	if (err) {
		w->failed = true;
		return diag_set(d, err, "%s: write: %s", w->name,
				loader_strerror(err));
	}
	return 0;
}

/* ---------------------------------------------------------------- reader */

struct shard {
	int fd;
	char name[256];
	uint64_t file_size, count, data_end;
	struct schema schema;
	unsigned char *footer;
	uint64_t footer_size;
	const unsigned char *index;
	uint64_t dict_off[SCHEMA_MAX_FIELDS], dict_len[SCHEMA_MAX_FIELDS];
	struct zrec_ddict *ddict[SCHEMA_MAX_FIELDS];
	struct shard_field_stats stats[SCHEMA_MAX_FIELDS];
	/* A tar read in place (shard_open_wds()): its index, else NULL. */
	const struct recindex *wds;
};

void shard_close(struct shard *sh)
{
	if (!sh)
		return;
	for (unsigned i = 0; i < SCHEMA_MAX_FIELDS; i++)
		zrec_ddict_free(sh->ddict[i]);
	free(sh->footer);
	free(sh);
}

static int check_header(struct shard *sh, const unsigned char *h,
			struct diag *d)
{
	uint64_t want = XXH3_64bits(h, 56);

	if (memcmp(h, SHARD_MAGIC, 8))
		return diag_set(d, LOADER_EFORMAT,
				"%s: offset 0: bad magic, not a loaderd shard",
				sh->name);
	if (get32(h + 8) != SHARD_VERSION)
		return diag_set(d, LOADER_EVERSION,
				"%s: offset 8: format version %" PRIu32
				", this reader knows %d",
				sh->name, get32(h + 8), SHARD_VERSION);
	if (get64(h + 56) != want)
		return diag_set(d, LOADER_ECHECKSUM,
				"%s: offset 56: header checksum %016" PRIx64
				", computed %016" PRIx64,
				sh->name, get64(h + 56), want);
	if (get32(h + 12) != SHARD_HEADER_SIZE)
		return diag_set(d, LOADER_EFORMAT,
				"%s: offset 12: header size %" PRIu32
				", expected %d",
				sh->name, get32(h + 12), SHARD_HEADER_SIZE);
	if (get64(h + 16))
		return diag_set(d, LOADER_EVERSION,
				"%s: offset 16: unknown header flags %#" PRIx64,
				sh->name, get64(h + 16));
	for (unsigned i = 24; i < 56; i++)
		if (h[i])
			return diag_set(
				d, LOADER_EFORMAT,
				"%s: offset %u: reserved header byte is not zero",
				sh->name, i);
	return 0;
}

uint64_t shard_trailer_footer(const unsigned char *trailer)
{
	return get64(trailer);
}

static int check_trailer(struct shard *sh, const unsigned char *t,
			 uint64_t *foff, uint64_t *fsize, struct diag *d)
{
	uint64_t at = sh->file_size - SHARD_TRAILER_SIZE;
	uint64_t want = XXH3_64bits(t, 48);

	if (memcmp(t + 56, SHARD_MAGIC, 8))
		return diag_set(
			d, LOADER_ETRUNC,
			"%s: offset %" PRIu64
			": no trailer magic at the end of the file: truncated or unfinished shard",
			sh->name, at + 56);
	if (get64(t + 48) != want)
		return diag_set(d, LOADER_ECHECKSUM,
				"%s: offset %" PRIu64
				": trailer checksum %016" PRIx64
				", computed %016" PRIx64,
				sh->name, at + 48, get64(t + 48), want);
	if (get32(t + 32) != SHARD_VERSION)
		return diag_set(d, LOADER_EVERSION,
				"%s: offset %" PRIu64
				": trailer version %" PRIu32 ", expected %d",
				sh->name, at + 32, get32(t + 32),
				SHARD_VERSION);
	if (get32(t + 36) || get64(t + 40))
		return diag_set(d, LOADER_EFORMAT,
				"%s: offset %" PRIu64
				": reserved trailer bytes are not zero",
				sh->name, at + 36);
	*foff = get64(t);
	*fsize = get64(t + 8);
	sh->count = get64(t + 16);
	/* Footer must sit exactly between the records and the trailer. */
	if (*foff < SHARD_HEADER_SIZE || *foff > at || *fsize != at - *foff)
		return diag_set(
			d, LOADER_ERANGE,
			"%s: offset %" PRIu64 ": footer at %" PRIu64
			" of %" PRIu64
			" bytes does not end at the trailer (offset %" PRIu64
			")",
			sh->name, at, *foff, *fsize, at);
	if (sh->count > *fsize / SHARD_INDEX_ENTRY)
		return diag_set(d, LOADER_ERANGE,
				"%s: offset %" PRIu64 ": %" PRIu64
				" records cannot fit a footer of %" PRIu64
				" bytes",
				sh->name, at + 16, sh->count, *fsize);
	return 0;
}

/*
 * Check the footer's size against what its head says it holds, before
 * the footer is allocated and read. The size comes from the file, and a
 * sparse file declares gigabytes that cost its writer nothing: all of it
 * would be allocated and read here (and hashed, only to find a bad
 * checksum). The head is not yet covered by a checksum, so these checks
 * can only refuse; parse_fields() checks it again once the footer is
 * read and its checksum holds.
 *
 * A footer is its head, F descriptors, the dictionaries (padded to 8
 * bytes each) and the index of 24 bytes per record, so it can be no
 * larger than SHARD_MAX_RECORDS entries and SHARD_MAX_DICT_BYTES of
 * dictionaries allow, and it must end exactly where its index ends.
 */
static int check_footer_size(struct shard *sh, uint64_t foff, uint64_t fsize,
			     const unsigned char *head, struct diag *d)
{
	uint32_t nf = get32(head);
	uint64_t ioff = get64(head + 24), min_pre, max_pre, max_size;

	if (sh->count > SHARD_MAX_RECORDS)
		return diag_set(d, LOADER_ETOOBIG,
				"%s: offset %" PRIu64 ": footer of %" PRIu64
				" bytes for %" PRIu64
				" records: a shard holds at most %u",
				sh->name, foff, fsize, sh->count,
				SHARD_MAX_RECORDS);
	max_size = SHARD_FOOTER_HEAD +
		   (uint64_t)SCHEMA_MAX_FIELDS * (SHARD_FIELD_DESC + 8) +
		   SHARD_MAX_DICT_BYTES + sh->count * SHARD_INDEX_ENTRY;
	if (fsize > max_size)
		return diag_set(
			d, LOADER_ETOOBIG,
			"%s: offset %" PRIu64 ": footer of %" PRIu64
			" bytes, but an index of %" PRIu64
			" records with the largest schema and dictionaries takes at most %" PRIu64,
			sh->name, foff, fsize, sh->count, max_size);
	if (nf == 0 || nf > SCHEMA_MAX_FIELDS)
		return diag_set(d, LOADER_ESCHEMA,
				"%s: offset %" PRIu64 ": %" PRIu32
				" fields, expected 1..%d (footer of %" PRIu64
				" bytes)",
				sh->name, foff, nf, SCHEMA_MAX_FIELDS, fsize);
	min_pre = SHARD_FOOTER_HEAD + (uint64_t)nf * SHARD_FIELD_DESC;
	max_pre = min_pre + (uint64_t)nf * 8 + SHARD_MAX_DICT_BYTES;
	if (get64(head + 16) != sh->count || ioff < min_pre || ioff > max_pre ||
	    fsize != ioff + sh->count * SHARD_INDEX_ENTRY)
		return diag_set(d, LOADER_ERANGE,
				"%s: offset %" PRIu64 ": footer of %" PRIu64
				" bytes does not match its index: %" PRIu64
				" records (trailer %" PRIu64
				") of %d bytes at %" PRIu64 ", after %" PRIu32
				" fields and their dictionaries (%" PRIu64
				"..%" PRIu64 " bytes)",
				sh->name, foff, fsize, get64(head + 16),
				sh->count, SHARD_INDEX_ENTRY, ioff, nf, min_pre,
				max_pre);
	/* Every record holds its F lengths at least. */
	if (sh->count > (sh->data_end - SHARD_HEADER_SIZE) / ((uint64_t)4 * nf))
		return diag_set(d, LOADER_ERANGE,
				"%s: offset %" PRIu64 ": footer of %" PRIu64
				" bytes indexes %" PRIu64
				" records of at least %" PRIu64
				" bytes, more than the %" PRIu64
				" bytes before it hold",
				sh->name, foff, fsize, sh->count,
				(uint64_t)4 * nf,
				sh->data_end - SHARD_HEADER_SIZE);
	return 0;
}

static int parse_fields(struct shard *sh, uint64_t foff, struct diag *d)
{
	const unsigned char *ft = sh->footer;
	uint32_t nf = get32(ft);
	uint64_t pos, stored = 0;
	int err;

	if (nf == 0 || nf > SCHEMA_MAX_FIELDS)
		return diag_set(d, LOADER_ESCHEMA,
				"%s: offset %" PRIu64 ": %" PRIu32
				" fields, expected 1..%d",
				sh->name, foff, nf, SCHEMA_MAX_FIELDS);
	if (get32(ft + 4) != SHARD_FIELD_DESC ||
	    get32(ft + 8) != SHARD_INDEX_ENTRY || get32(ft + 12))
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64 ": descriptor size %" PRIu32
			" / index entry size %" PRIu32
			" not those of version 1",
			sh->name, foff + 4, get32(ft + 4), get32(ft + 8));
	if (get64(ft + 16) != sh->count)
		return diag_set(d, LOADER_EFORMAT,
				"%s: offset %" PRIu64 ": footer counts %" PRIu64
				" records, trailer %" PRIu64,
				sh->name, foff + 16, get64(ft + 16), sh->count);
	pos = SHARD_FOOTER_HEAD + (uint64_t)nf * SHARD_FIELD_DESC;
	if (pos > sh->footer_size)
		return diag_set(d, LOADER_ERANGE,
				"%s: offset %" PRIu64 ": %" PRIu32
				" field descriptors overrun the footer",
				sh->name, foff, nf);
	sh->schema.nfields = nf;
	for (uint32_t i = 0; i < nf; i++) {
		const unsigned char *p =
			ft + SHARD_FOOTER_HEAD + i * SHARD_FIELD_DESC;
		uint64_t at = foff + SHARD_FOOTER_HEAD + i * SHARD_FIELD_DESC;
		struct field *f = &sh->schema.f[i];

		memcpy(f->name, p, sizeof(f->name));
		f->kind = p[32];
		f->dtype = p[33];
		f->ndim = p[34];
		f->comp = p[35];
		f->level = (int32_t)get32(p + 36);
		for (unsigned k = 0; k < SCHEMA_MAX_DIMS; k++)
			f->dims[k] = get32(p + 40 + 4 * k);
		err = field_check(f, d);
		if (err)
			return diag_wrap(d, err,
					 "%s: offset %" PRIu64
					 ": field %" PRIu32,
					 sh->name, at, i);
		sh->stats[i].raw_bytes = get64(p + 72);
		sh->stats[i].stored_bytes = get64(p + 80);
		if (get64(p + 88))
			return diag_set(d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": reserved field bytes are not zero",
					sh->name, at + 88);
		if (f->comp != COMP_ZSTD_DICT) {
			if (get64(p + 56) || get64(p + 64))
				return diag_set(
					d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": field %s has a dictionary but no dictionary compression",
					sh->name, at + 56, f->name);
		} else {
			/* Dictionaries follow the descriptors in field order. */
			uint64_t o = get64(p + 56), n = get64(p + 64);

			if (o != pos || n == 0 || pos > sh->footer_size ||
			    n > sh->footer_size - pos)
				return diag_set(
					d, LOADER_ERANGE,
					"%s: offset %" PRIu64
					": dictionary of field %s at %" PRIu64
					"+%" PRIu64
					" is not where it belongs (%" PRIu64
					") or overruns the footer",
					sh->name, at + 56, f->name, o, n, pos);
			sh->dict_off[i] = o;
			sh->dict_len[i] = n;
			pos = align8(pos + n);
		}
		if (f->comp == COMP_NONE &&
		    sh->stats[i].raw_bytes != sh->stats[i].stored_bytes)
			return diag_set(
				d, LOADER_EFORMAT,
				"%s: offset %" PRIu64
				": field %s is uncompressed but raw and stored totals differ",
				sh->name, at + 72, f->name);
		if (field_ragged(f) &&
		    sh->stats[i].raw_bytes % field_row_size(f))
			return diag_set(
				d, LOADER_EFORMAT,
				"%s: offset %" PRIu64
				": ragged field %s totals %" PRIu64
				" raw bytes, not whole rows of %" PRIu64,
				sh->name, at + 72, f->name,
				sh->stats[i].raw_bytes, field_row_size(f));
		if (f->kind == FIELD_TENSOR && !field_ragged(f) &&
		    sh->stats[i].raw_bytes != field_fixed_size(f) * sh->count)
			return diag_set(d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": field %s totals %" PRIu64
					" raw bytes, %" PRIu64
					" records of its shape need %" PRIu64,
					sh->name, at + 72, f->name,
					sh->stats[i].raw_bytes, sh->count,
					field_fixed_size(f) * sh->count);
		if (f->kind == FIELD_TENSOR && !field_ragged(f) &&
		    f->comp == COMP_NONE &&
		    sh->stats[i].stored_bytes !=
			    field_fixed_size(f) * sh->count)
			return diag_set(d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": field %s totals %" PRIu64
					" bytes, %" PRIu64
					" records of its shape need %" PRIu64,
					sh->name, at + 80, f->name,
					sh->stats[i].stored_bytes, sh->count,
					field_fixed_size(f) * sh->count);
		if (sh->stats[i].stored_bytes > sh->file_size)
			return diag_set(
				d, LOADER_ERANGE,
				"%s: offset %" PRIu64
				": field %s totals more bytes than the file has",
				sh->name, at + 80, f->name);
		stored += sh->stats[i].stored_bytes;
	}
	err = schema_check(&sh->schema, d);
	if (err)
		return diag_wrap(d, err, "%s: offset %" PRIu64, sh->name, foff);
	if (get64(ft + 24) != pos ||
	    pos + sh->count * SHARD_INDEX_ENTRY != sh->footer_size)
		return diag_set(d, LOADER_ERANGE,
				"%s: offset %" PRIu64 ": index at %" PRIu64
				" with %" PRIu64
				" entries does not fill the footer (%" PRIu64
				" bytes)",
				sh->name, foff + 24, get64(ft + 24), sh->count,
				sh->footer_size);
	for (uint64_t k = SHARD_FOOTER_HEAD + (uint64_t)nf * SHARD_FIELD_DESC;
	     k < pos; k++) {
		bool in_dict = false;

		for (uint32_t i = 0; i < nf; i++)
			if (sh->dict_len[i] && k >= sh->dict_off[i] &&
			    k < sh->dict_off[i] + sh->dict_len[i])
				in_dict = true;
		if (!in_dict && ft[k])
			return diag_set(d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": footer padding is not zero",
					sh->name, foff + k);
	}
	if (stored + (uint64_t)4 * nf * sh->count !=
	    sh->data_end - SHARD_HEADER_SIZE)
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64 ": field totals (%" PRIu64
			" bytes) do not add up to the record region (%" PRIu64
			" bytes)",
			sh->name, foff, stored + (uint64_t)4 * nf * sh->count,
			sh->data_end - SHARD_HEADER_SIZE);
	sh->index = ft + pos;
	return 0;
}

static int check_index(struct shard *sh, uint64_t foff, struct diag *d)
{
	uint64_t expect = SHARD_HEADER_SIZE;
	uint64_t min = (uint64_t)4 * sh->schema.nfields;
	uint64_t ioff = foff + (uint64_t)(sh->index - sh->footer);

	/* Records are back to back: each starts where the previous ended. */
	for (uint64_t i = 0; i < sh->count; i++) {
		const unsigned char *e = sh->index + i * SHARD_INDEX_ENTRY;
		uint64_t off = get64(e);
		uint32_t len = get32(e + 8);

		if (off != expect || len < min || len > sh->data_end - off ||
		    get32(e + 12))
			return diag_set(
				d, LOADER_ERANGE,
				"%s: offset %" PRIu64 ": index entry %" PRIu64
				" (record at %" PRIu64 ", %" PRIu32
				" bytes) is not the next record (expected at %" PRIu64
				", at least %" PRIu64
				" bytes, ending by %" PRIu64 ")",
				sh->name, ioff + i * SHARD_INDEX_ENTRY, i, off,
				len, expect, min, sh->data_end);
		expect = off + len;
	}
	if (expect != sh->data_end)
		return diag_set(d, LOADER_ERANGE,
				"%s: offset %" PRIu64
				": records end at %" PRIu64
				" but the footer starts at %" PRIu64,
				sh->name, expect, expect, sh->data_end);
	return 0;
}

int shard_open_wds(struct shard **out, int fd, const char *name,
		   const struct recindex *ix, struct diag *d)
{
	struct shard *sh = mem_calloc(1, sizeof(*sh));

	*out = NULL;
	if (!sh)
		return diag_set(d, -ENOMEM, "%s: out of memory", name);
	sh->fd = fd;
	snprintf(sh->name, sizeof(sh->name), "%s", name);
	sh->file_size = ix->file_size;
	sh->data_end = ix->file_size;
	sh->count = ix->count;
	sh->schema = ix->schema;
	sh->index = ix->index;
	sh->wds = ix;
	for (uint32_t k = 0; k < ix->schema.nfields; k++)
		sh->stats[k] = (struct shard_field_stats){ ix->raw_bytes[k],
							   ix->raw_bytes[k] };
	*out = sh;
	return 0;
}

int shard_open(struct shard **out, int fd, const char *name, struct diag *d)
{
	unsigned char hdr[SHARD_HEADER_SIZE], tr[SHARD_TRAILER_SIZE];
	unsigned char head[SHARD_FOOTER_HEAD];
	uint64_t foff = 0, fsize = 0, want;
	struct shard *sh;
	struct stat st;
	int err;

	sh = mem_calloc(1, sizeof(*sh));
	if (!sh)
		return -ENOMEM;
	sh->fd = fd;
	snprintf(sh->name, sizeof(sh->name), "%s", name);
	if (fstat(fd, &st)) {
		err = diag_set(d, -errno, "%s: stat: %s", name,
			       strerror(errno));
		goto fail;
	}
	sh->file_size = (uint64_t)st.st_size;
	if (sh->file_size <
	    SHARD_HEADER_SIZE + SHARD_TRAILER_SIZE + SHARD_FOOTER_HEAD) {
		err = diag_set(
			d, sh->file_size >= 8 ? LOADER_ETRUNC : LOADER_EFORMAT,
			"%s: %" PRIu64
			" bytes is too short for a shard (at least %d)",
			name, sh->file_size,
			SHARD_HEADER_SIZE + SHARD_TRAILER_SIZE +
				SHARD_FOOTER_HEAD);
		goto fail;
	}
	err = fdio_pread_all(fd, hdr, sizeof(hdr), 0);
	if (!err)
		err = fdio_pread_all(fd, tr, sizeof(tr),
				     sh->file_size - SHARD_TRAILER_SIZE);
	if (err) {
		diag_set(d, err, "%s: read: %s", name, loader_strerror(err));
		goto fail;
	}
	err = check_header(sh, hdr, d);
	if (!err)
		err = check_trailer(sh, tr, &foff, &fsize, d);
	if (err)
		goto fail;
	sh->data_end = foff;
	if (fsize < SHARD_FOOTER_HEAD) {
		err = diag_set(d, LOADER_ERANGE,
			       "%s: offset %" PRIu64 ": footer of %" PRIu64
			       " bytes",
			       name, foff, fsize);
		goto fail;
	}
	err = fdio_pread_all(fd, head, sizeof(head), foff);
	if (err) {
		diag_set(d, err, "%s: read footer: %s", name,
			 loader_strerror(err));
		goto fail;
	}
	err = check_footer_size(sh, foff, fsize, head, d);
	if (err)
		goto fail;
	sh->footer_size = fsize;
	sh->footer = mem_alloc(fsize);
	if (!sh->footer) {
		err = diag_set(d, -ENOMEM, "%s: footer of %" PRIu64 " bytes",
			       name, fsize);
		goto fail;
	}
	err = fdio_pread_all(fd, sh->footer, fsize, foff);
	if (err) {
		diag_set(d, err, "%s: read footer: %s", name,
			 loader_strerror(err));
		goto fail;
	}
	want = XXH3_64bits(sh->footer, fsize);
	if (want != get64(tr + 24)) {
		err = diag_set(d, LOADER_ECHECKSUM,
			       "%s: offset %" PRIu64
			       ": footer checksum %016" PRIx64
			       ", computed %016" PRIx64,
			       name, foff, get64(tr + 24), want);
		goto fail;
	}
	err = parse_fields(sh, foff, d);
	if (!err)
		err = check_index(sh, foff, d);
	if (err)
		goto fail;
	for (uint32_t i = 0; i < sh->schema.nfields; i++) {
		if (!sh->dict_len[i])
			continue;
		err = zrec_ddict_new(&sh->ddict[i],
				     sh->footer + sh->dict_off[i],
				     sh->dict_len[i], d);
		if (err) {
			diag_wrap(d, err, "%s: dictionary of field %s", name,
				  sh->schema.f[i].name);
			goto fail;
		}
	}
	*out = sh;
	return 0;
fail:
	shard_close(sh);
	return err;
}

uint64_t shard_count(const struct shard *sh)
{
	return sh->count;
}

const struct schema *shard_schema(const struct shard *sh)
{
	return &sh->schema;
}

const char *shard_name(const struct shard *sh)
{
	return sh->name;
}

uint64_t shard_file_size(const struct shard *sh)
{
	return sh->file_size;
}

uint64_t shard_index_bytes(const struct shard *sh)
{
	if (sh->wds)
		return sh->count * (SHARD_INDEX_ENTRY +
				    sh->wds->schema.nfields * sizeof(uint64_t));
	return sh->footer_size;
}

void shard_data_range(const struct shard *sh, uint64_t *begin, uint64_t *end)
{
	*begin = sh->wds ? 0 : SHARD_HEADER_SIZE;
	*end = sh->data_end;
}

int shard_rec(const struct shard *sh, uint64_t i, struct shard_rec *r)
{
	const unsigned char *e;

	if (i >= sh->count)
		return LOADER_ERANGE;
	e = sh->index + i * SHARD_INDEX_ENTRY;
	r->offset = get64(e);
	r->length = get32(e + 8);
	r->xxh3 = get64(e + 16);
	return 0;
}

struct shard_field_stats shard_stats(const struct shard *sh, unsigned i)
{
	return sh->stats[i];
}

const struct zrec_ddict *shard_ddict(const struct shard *sh, unsigned i)
{
	return i < SCHEMA_MAX_FIELDS ? sh->ddict[i] : NULL;
}

const void *shard_dict(const struct shard *sh, unsigned i, size_t *len)
{
	if (i >= SCHEMA_MAX_FIELDS || !sh->dict_len[i]) {
		*len = 0;
		return NULL;
	}
	*len = sh->dict_len[i];
	return sh->footer + sh->dict_off[i];
}

int shard_check_sum(const struct shard *sh, uint64_t i, const void *buf,
		    size_t len, struct diag *d)
{
	if (sh->wds) {
		struct shard_rec r;

		/* Tar members carry no checksum; their length is checked. */
		if (shard_rec(sh, i, &r) || len != r.length)
			return diag_set(
				d, LOADER_ERANGE,
				"%s: sample %" PRIu64
				" of %zu bytes does not match the index",
				sh->name, i, len);
		return 0;
	}
	struct shard_rec r;
	uint64_t h;

	if (shard_rec(sh, i, &r))
		return diag_set(d, LOADER_ERANGE,
				"%s: record %" PRIu64 " out of range (%" PRIu64
				" records)",
				sh->name, i, sh->count);
	if (len != r.length)
		return diag_set(d, LOADER_ETRUNC,
				"%s: record %" PRIu64 " at offset %" PRIu64
				": %zu bytes given, index says %" PRIu32,
				sh->name, i, r.offset, len, r.length);
	h = XXH3_64bits(buf, len);
	if (h != r.xxh3)
		return diag_set(d, LOADER_ECHECKSUM,
				"%s: record %" PRIu64 " at offset %" PRIu64
				": checksum %016" PRIx64
				", computed %016" PRIx64,
				sh->name, i, r.offset, r.xxh3, h);
	return 0;
}

/*
 * A tar sample's fields, as its index places them (checked when it was
 * made or loaded); an int64 label is its value, kept in the index.
 */
static int split_wds(const struct shard *sh, uint64_t i, const void *buf,
		     size_t len, struct shard_field *out, struct diag *d)
{
	const struct recindex *ix = sh->wds;
	uint32_t nf = sh->schema.nfields;
	const uint64_t *e = ix->ent + i * nf;

	if (i >= sh->count)
		return diag_set(d, LOADER_ERANGE,
				"%s: sample %" PRIu64 " out of range", sh->name,
				i);
	for (uint32_t k = 0; k < nf; k++) {
		const struct field *f = &sh->schema.f[k];
		uint32_t off = (uint32_t)e[k], l = (uint32_t)(e[k] >> 32);

		out[k].raw_len = 0;
		if (ix->conv[k] == REC_INT_TEXT) {
			out[k].data = &e[k];
			out[k].len = 8;
			continue;
		}
		if (off > len || l > len - off)
			return diag_set(d, LOADER_ERANGE,
					"%s: sample %" PRIu64
					": field %s outside its %zu bytes",
					sh->name, i, f->name, len);
		if (f->kind == FIELD_TENSOR && !tensor_fits(f, l))
			return diag_set(d, LOADER_EFORMAT,
					"%s: sample %" PRIu64
					": field %s has %" PRIu32
					" bytes, its shape needs %s%" PRIu64,
					sh->name, i, f->name, l,
					field_ragged(f) ? "a multiple of " : "",
					field_ragged(f) ? field_row_size(f) :
							  field_fixed_size(f));
		out[k].data = (const unsigned char *)buf + off;
		out[k].len = l;
	}
	return 0;
}

/*
 * Split record i into its fields; with check, against its index entry
 * first (without, the caller did: the entry is not read, and messages
 * give no offset).
 */
static int split(const struct shard *sh, uint64_t i, const void *buf,
		 size_t len, struct shard_field *out, bool check,
		 struct diag *d)
{
	const unsigned char *p = buf;
	uint32_t nf = sh->schema.nfields;
	struct shard_rec r = { .offset = 0 };
	uint64_t sum = (uint64_t)4 * nf;

	if (check && (shard_rec(sh, i, &r) || len != r.length))
		return diag_set(d, LOADER_ERANGE,
				"%s: record %" PRIu64
				" of %zu bytes does not match the index",
				sh->name, i, len);
	if (sh->wds)
		return split_wds(sh, i, buf, len, out, d);
	if (len < sum)
		return diag_set(d, LOADER_EFORMAT,
				"%s: record %" PRIu64
				" of %zu bytes, shorter than its field lengths",
				sh->name, i, len);
	for (uint32_t k = 0; k < nf; k++) {
		out[k].len = get32(p + 4 * k);
		out[k].raw_len = 0;
		sum += out[k].len;
	}
	if (sum != len)
		return diag_set(d, LOADER_EFORMAT,
				"%s: record %" PRIu64 " at offset %" PRIu64
				": field lengths add up to %" PRIu64
				" bytes, record has %zu",
				sh->name, i, r.offset, sum, len);
	p += 4 * nf;
	for (uint32_t k = 0; k < nf; k++) {
		const struct field *f = &sh->schema.f[k];

		if (f->kind == FIELD_TENSOR && f->comp == COMP_NONE &&
		    !tensor_fits(f, out[k].len))
			return diag_set(
				d, LOADER_EFORMAT,
				"%s: record %" PRIu64 " at offset %" PRIu64
				": field %s has %" PRIu32
				" bytes, its shape needs %s%" PRIu64,
				sh->name, i, r.offset, f->name, out[k].len,
				field_ragged(f) ? "a multiple of " : "",
				field_ragged(f) ? field_row_size(f) :
						  field_fixed_size(f));
		out[k].data = p;
		p += out[k].len;
	}
	return 0;
}

int shard_split_record(const struct shard *sh, uint64_t i, const void *buf,
		       size_t len, struct shard_field *out, struct diag *d)
{
	return split(sh, i, buf, len, out, true, d);
}

int shard_split_known(const struct shard *sh, uint64_t i, const void *buf,
		      size_t len, struct shard_field *out, struct diag *d)
{
	return split(sh, i, buf, len, out, false, d);
}

uint32_t shard_fixed_layout(const struct shard *sh, uint32_t *off,
			    unsigned char *head)
{
	uint32_t nf = sh->schema.nfields;
	uint64_t pos = (uint64_t)4 * nf;

	if (sh->wds || !nf)
		return 0;
	for (uint32_t k = 0; k < nf; k++) {
		const struct field *f = &sh->schema.f[k];
		uint64_t size = field_fixed_size(f);

		if (f->kind != FIELD_TENSOR || f->comp != COMP_NONE ||
		    field_ragged(f) || size > UINT32_MAX ||
		    pos + size > UINT32_MAX)
			return 0;
		put32(head + 4 * k, (uint32_t)size);
		off[k] = (uint32_t)pos;
		pos += size;
	}
	return (uint32_t)pos;
}

int shard_parse_record(const struct shard *sh, uint64_t i, const void *buf,
		       size_t len, struct shard_field *out, struct diag *d)
{
	int err = shard_check_sum(sh, i, buf, len, d);

	return err ? err : shard_split_record(sh, i, buf, len, out, d);
}

int shard_read_record(const struct shard *sh, uint64_t i, void *buf, size_t cap,
		      struct shard_field *out, struct diag *d)
{
	struct shard_rec r;
	int err;

	if (shard_rec(sh, i, &r))
		return diag_set(d, LOADER_ERANGE,
				"%s: record %" PRIu64 " out of range (%" PRIu64
				" records)",
				sh->name, i, sh->count);
	if (r.length > cap)
		return diag_set(d, LOADER_ETOOBIG,
				"%s: record %" PRIu64 " has %" PRIu32
				" bytes, buffer %zu",
				sh->name, i, r.length, cap);
	err = fdio_pread_all(sh->fd, buf, r.length, r.offset);
	if (err)
		return diag_set(d, err,
				"%s: record %" PRIu64 " at offset %" PRIu64
				": read: %s",
				sh->name, i, r.offset, loader_strerror(err));
	return shard_parse_record(sh, i, buf, r.length, out, d);
}

static void field_src(const struct shard *sh, unsigned i,
		      const struct shard_field *f, struct codec_src *src,
		      const struct codec_ops **ops)
{
	src->data = f->data;
	src->len = f->len;
	src->ddict = sh->ddict[i];
	*ops = codec_get(sh->schema.f[i].comp == COMP_NONE ? CODEC_RAW :
							     CODEC_ZSTD);
}

int shard_field_size(const struct shard *sh, struct codec_ctx *ctx, unsigned i,
		     const struct shard_field *f, size_t *size, struct diag *d)
{
	const struct codec_ops *ops;
	struct codec_src src;
	struct codec_info info;
	int err;

	field_src(sh, i, f, &src, &ops);
	err = ops->probe(ctx, &src, &info, d);
	if (err)
		return diag_wrap(d, err, "%s: field %s", sh->name,
				 sh->schema.f[i].name);
	*size = info.size;
	return 0;
}

/*
 * What decoding (or checking) field i came to: err with the shard and
 * field named, or the size, which a tensor's shape must match.
 */
static int field_outcome(const struct shard *sh, unsigned i, int err,
			 const struct codec_info *info, size_t *size,
			 struct diag *d)
{
	const struct field *fd = &sh->schema.f[i];

	if (err)
		return diag_wrap(d, err, "%s: field %s", sh->name, fd->name);
	if (fd->kind == FIELD_TENSOR && !tensor_fits(fd, info->size))
		return diag_set(
			d, LOADER_EDECODE,
			"%s: field %s unpacks to %zu bytes, its shape needs %s%" PRIu64,
			sh->name, fd->name, info->size,
			field_ragged(fd) ? "a multiple of " : "",
			field_ragged(fd) ? field_row_size(fd) :
					   field_fixed_size(fd));
	*size = info->size;
	return 0;
}

int shard_check_field(const struct shard *sh, struct codec_ctx *ctx, unsigned i,
		      const struct shard_field *f, size_t *size, struct diag *d)
{
	const struct codec_ops *ops;
	struct codec_src src;
	struct codec_info info;
	int err;

	field_src(sh, i, f, &src, &ops);
	err = ops->check ? ops->check(ctx, &src, &info, d) :
			   ops->probe(ctx, &src, &info, d);
	return field_outcome(sh, i, err, &info, size, d);
}

int shard_unpack_field(const struct shard *sh, struct codec_ctx *ctx,
		       unsigned i, const struct shard_field *f, void *dst,
		       size_t cap, size_t *out_len, struct diag *d)
{
	const struct codec_ops *ops;
	struct codec_src src;
	struct codec_info info;
	int err;

	field_src(sh, i, f, &src, &ops);
	err = ops->decode(ctx, &src, dst, cap, &info, d);
	return field_outcome(sh, i, err, &info, out_len, d);
}

const char *shard_key_text(const struct schema *s, const struct shard_field *f,
			   char *buf, size_t n)
{
	int k = schema_key(s);
	size_t len;

	if (k < 0 || !n)
		return NULL;
	len = f[k].len < n - 1 ? f[k].len : n - 1;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = ((const unsigned char *)f[k].data)[i];

		buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	buf[len] = '\0';
	return buf;
}

const char *shard_record_key(const struct shard *sh, uint64_t i,
			     const void *rec, size_t len, char *buf, size_t n)
{
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct diag ignore;

	if (shard_split_record(sh, i, rec, len, f, &ignore))
		return NULL;
	return shard_key_text(shard_schema(sh), f, buf, n);
}
