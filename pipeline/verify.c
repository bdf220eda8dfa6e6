/*
 * verify.c - a full scan of a shard's records.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fdio.h"
#include "loader.h"
#include "verify.h"

#define VERIFY_CHUNK (8u << 20)

struct verify_ctx {
	struct codec_ctx *codec;
	unsigned char *buf;
	size_t cap;
	unsigned char *scratch;	/* unpacked field */
	size_t scratch_cap;
	unsigned char *pixels;	/* decoded image */
	size_t pixels_cap;
};

int verify_ctx_new(struct verify_ctx **out)
{
	struct verify_ctx *vc = calloc(1, sizeof(*vc));

	if (!vc)
		return -ENOMEM;
	vc->cap = VERIFY_CHUNK;
	vc->buf = malloc(vc->cap);
	if (!vc->buf || codec_ctx_new(&vc->codec, 0)) {
		verify_ctx_free(vc);
		return -ENOMEM;
	}
	*out = vc;
	return 0;
}

void verify_ctx_free(struct verify_ctx *vc)
{
	if (!vc)
		return;
	codec_ctx_free(vc->codec);
	free(vc->buf);
	free(vc->scratch);
	free(vc->pixels);
	free(vc);
}

/* Grow *buf to at least n bytes; scratch grows rarely, to the largest seen. */
static int reserve(unsigned char **buf, size_t *cap, size_t n)
{
	void *p;

	if (n <= *cap)
		return 0;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

static int check_fields(struct verify_ctx *vc, const struct shard *sh,
			uint64_t i, const struct shard_field *f,
			struct diag *d)
{
	const struct schema *s = shard_schema(sh);
	const struct codec_ops *jpeg = codec_get(CODEC_JPEG);
	struct shard_rec r;
	int err = 0;

	shard_rec(sh, i, &r);
	for (unsigned k = 0; k < s->nfields; k++) {
		const struct field *fd = &s->f[k];
		const void *payload = f[k].data;
		size_t len = f[k].len;
		struct codec_src src = { 0 };
		struct codec_info info;

		if (fd->comp != COMP_NONE) {
			err = shard_field_size(sh, vc->codec, k, &f[k], &len, d);
			if (!err && len > UINT32_MAX)
				err = diag_set(d, LOADER_ETOOBIG,
					       "%s: field %s unpacks to %zu bytes",
					       shard_name(sh), fd->name, len);
			if (!err)
				err = reserve(&vc->scratch, &vc->scratch_cap,
					      len ? len : 1);
			if (!err)
				err = shard_unpack_field(sh, vc->codec, k,
							 &f[k], vc->scratch,
							 vc->scratch_cap, &len,
							 d);
			if (err)
				break;
			payload = vc->scratch;
		}
		if (fd->kind != FIELD_JPEG)
			continue;
		src.data = payload;
		src.len = len;
		err = jpeg->probe(vc->codec, &src, &info, d);
		if (!err)
			err = reserve(&vc->pixels, &vc->pixels_cap, info.size);
		if (!err)
			err = jpeg->decode(vc->codec, &src, vc->pixels,
					   vc->pixels_cap, &info, d);
		if (err) {
			diag_wrap(d, err, "%s: field %s", shard_name(sh),
				  fd->name);
			break;
		}
	}
	if (err)
		diag_wrap(d, err, "record %" PRIu64 " at offset %" PRIu64, i,
			  r.offset);
	return err;
}

int verify_shard(struct verify_ctx *vc, const struct shard *sh, int fd,
		 const struct verify_opts *o, struct verify_stats *st,
		 struct diag *d)
{
	struct shard_field f[SCHEMA_MAX_FIELDS];
	uint64_t n = shard_count(sh), i = 0, begin, end;
	struct diag rd;
	int err;

	shard_data_range(sh, &begin, &end);
	posix_fadvise(fd, (off_t)begin, (off_t)(end - begin),
		      POSIX_FADV_SEQUENTIAL);
	while (i < n) {
		struct shard_rec first, r;
		uint64_t j = i, span;
		unsigned char *p;

		/* Take as many whole records as fit one chunk (at least one). */
		shard_rec(sh, i, &first);
		span = first.length;
		while (j + 1 < n) {
			shard_rec(sh, j + 1, &r);
			if (r.offset + r.length - first.offset > vc->cap)
				break;
			span = r.offset + r.length - first.offset;
			j++;
		}
		err = reserve(&vc->buf, &vc->cap, span);
		if (err)
			return diag_set(d, err, "%s: record %" PRIu64 " of %" PRIu64 " bytes",
					shard_name(sh), i, span);
		err = fdio_pread_all(fd, vc->buf, span, first.offset);
		if (err)
			return diag_set(d, err,
					"%s: read %" PRIu64 " bytes at offset %" PRIu64 ": %s",
					shard_name(sh), span, first.offset,
					loader_strerror(err));
		for (p = vc->buf; i <= j; i++) {
			shard_rec(sh, i, &r);
			err = shard_parse_record(sh, i, p, r.length, f, &rd);
			if (!err && o->decode)
				err = check_fields(vc, sh, i, f, &rd);
			if (err) {
				st->bad++;
				if (o->bad)
					o->bad(o->arg, sh, i, err, rd.msg);
			}
			st->records++;
			p += r.length;
		}
		st->bytes += span;
		if (o->progress)
			o->progress(o->arg, span);
	}
	return 0;
}
