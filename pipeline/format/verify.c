/*
 * verify.c - a full scan of a shard's records.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "codec.h"
#include "fdio.h"
#include "loader_error.h"
#include "jrst.h"
#include "verify.h"

/*
 * Records are read in chunks of whole records by a reader thread while
 * the calling thread checks the previous chunks: on a page-cached shard
 * the kernel's copy and the checksum then run on two cores side by side.
 * Chunks are small enough to stay in the cache between the two.
 */
#define VERIFY_CHUNK (1u << 20)
#define VERIFY_SLOTS 4

/* One chunk: records [first, last] read into buf. */
struct verify_slot {
	unsigned char *buf;
	size_t cap;
	uint64_t first, last, offset, span;
	int err; /* read error, described in msg */
	char msg[DIAG_MAX];
	/* Records whose checksum failed, ascending (the reader checks sums). */
	uint64_t *bad;
	size_t nbad, bad_cap;
};

struct verify_ctx {
	struct codec_ctx *codec;
	uint64_t max_pixels; /* the codec context's */
	struct verify_slot slot[VERIFY_SLOTS];
	/* Reader state, valid during verify_shard(). */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t produced, consumed; /* chunks; slot = count % SLOTS */
	bool stop;
	const struct shard *sh;
	int fd;
	unsigned char *scratch; /* unpacked field */
	size_t scratch_cap;
	unsigned char *pixels; /* decoded image */
	size_t pixels_cap;
};

int verify_ctx_new(struct verify_ctx **out)
{
	struct verify_ctx *vc = calloc(1, sizeof(*vc));

	if (!vc)
		return -ENOMEM;
	for (unsigned k = 0; k < VERIFY_SLOTS; k++) {
		vc->slot[k].cap = VERIFY_CHUNK;
		vc->slot[k].buf = malloc(VERIFY_CHUNK);
		if (!vc->slot[k].buf) {
			verify_ctx_free(vc);
			return -ENOMEM;
		}
	}
	vc->max_pixels = CODEC_DEFAULT_MAX_PIXELS;
	if (codec_ctx_new(&vc->codec, vc->max_pixels)) {
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
	for (unsigned k = 0; k < VERIFY_SLOTS; k++) {
		free(vc->slot[k].buf);
		free(vc->slot[k].bad);
	}
	free(vc->scratch);
	free(vc->pixels);
	free(vc);
}

static int check_fields(struct verify_ctx *vc, const struct shard *sh,
			uint64_t i, const struct shard_field *f,
			struct verify_stats *st, struct diag *d)
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
		struct jrst_map m;

		/*
		 * Only a JPEG is looked at decoded; any other field is
		 * checked through a small window, whatever size it claims.
		 */
		if (fd->comp != COMP_NONE && fd->kind != FIELD_JPEG) {
			err = shard_check_field(sh, vc->codec, k, &f[k], &len,
						d);
			if (err)
				break;
			continue;
		}
		if (fd->comp != COMP_NONE) {
			err = shard_field_size(sh, vc->codec, k, &f[k], &len,
					       d);
			if (!err && len > UINT32_MAX)
				err = diag_set(
					d, LOADER_ETOOBIG,
					"%s: field %s unpacks to %zu bytes",
					shard_name(sh), fd->name, len);
			if (!err && grow_buf(&vc->scratch, &vc->scratch_cap,
					     len ? len : 1))
				err = diag_set(
					d, -ENOMEM,
					"%s: field %s: no memory for %zu bytes",
					shard_name(sh), fd->name, len);
			if (!err)
				err = shard_unpack_field(
					sh, vc->codec, k, &f[k], vc->scratch,
					vc->scratch_cap, &len, d);
			if (err)
				break;
			payload = vc->scratch;
		}
		if (fd->kind != FIELD_JPEG)
			continue;
		/*
		 * The jpeg codec is the stream's decoder: its header checks,
		 * pixel limit, colour policy and messages.
		 */
		src.data = payload;
		src.len = len;
		err = jpeg->probe(vc->codec, &src, &info, d);
		if (!err && grow_buf(&vc->pixels, &vc->pixels_cap, info.size))
			err = diag_set(d, -ENOMEM, "no memory for %zu pixels",
				       info.size);
		if (!err)
			err = jpeg->decode(vc->codec, &src, vc->pixels,
					   vc->pixels_cap, &info, d);
		/*
		 * A stream cuts crops out of restart segments where the file
		 * has them: every marker must be where its number says, or
		 * crops would fall back to the whole file (same pixels, but
		 * not what pack meant). Walk them all.
		 */
		if (!err && jrst_parse(payload, len, &m, NULL) == 0) {
			err = jrst_check(&m, payload, len, d);
			if (err)
				diag_wrap(d, err, "restart segments");
			else
				st->jpeg_segmented++;
		}
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

/* Plan the chunk that starts at record i: as many whole records as fit. */
static void plan_chunk(const struct shard *sh, uint64_t i,
		       struct verify_slot *sl)
{
	uint64_t n = shard_count(sh), j = i;
	struct shard_rec first, r;

	shard_rec(sh, i, &first);
	sl->first = i;
	sl->offset = first.offset;
	sl->span = first.length;
	/*
	 * Records after the first in the file, within a chunk of it. Those of
	 * a database read in place (an LMDB's values) need not follow one
	 * another: the chunk ends at one that lies before the first.
	 */
	while (j + 1 < n) {
		shard_rec(sh, j + 1, &r);
		if (r.offset < first.offset ||
		    r.offset + r.length - first.offset > VERIFY_CHUNK)
			break;
		if (r.offset + r.length - first.offset > sl->span)
			sl->span = r.offset + r.length - first.offset;
		j++;
	}
	sl->last = j;
}

static void note_bad(struct verify_slot *sl, uint64_t k)
{
	if (sl->nbad == sl->bad_cap) {
		size_t cap = sl->bad_cap ? sl->bad_cap * 2 : 16;
		uint64_t *p = realloc(sl->bad, cap * sizeof(*p));

		if (!p) {
			/* No room to remember: the checker then checks all. */
			sl->nbad = SIZE_MAX;
			return;
		}
		sl->bad = p;
		sl->bad_cap = cap;
	}
	if (sl->nbad != SIZE_MAX)
		sl->bad[sl->nbad++] = k;
}

static void *reader_main(void *arg)
{
	struct verify_ctx *vc = arg;
	uint64_t n = shard_count(vc->sh), i = 0;

	pthread_setname_np(pthread_self(), "ld-verify-read");
	while (i < n) {
		struct verify_slot *sl;

		pthread_mutex_lock(&vc->lock);
		while (!vc->stop && vc->produced - vc->consumed == VERIFY_SLOTS)
			pthread_cond_wait(&vc->cond, &vc->lock);
		pthread_mutex_unlock(&vc->lock);
		if (vc->stop)
			break;
		sl = &vc->slot[vc->produced % VERIFY_SLOTS];
		plan_chunk(vc->sh, i, sl);
		sl->err = grow_buf(&sl->buf, &sl->cap, sl->span);
		if (!sl->err)
			sl->err = fdio_pread_all(vc->fd, sl->buf, sl->span,
						 sl->offset);
		if (sl->err)
			snprintf(sl->msg, sizeof(sl->msg),
				 "%s: read %" PRIu64 " bytes at offset %" PRIu64
				 ": %s",
				 shard_name(vc->sh), sl->span, sl->offset,
				 loader_strerror(sl->err));
		/*
		 * Checksums here, while the bytes are hot in this core's
		 * cache; the checking thread checks structure, decodes,
		 * and redoes the failures to describe them.
		 */
		sl->nbad = 0;
		if (!sl->err) {
			const unsigned char *p = sl->buf;

			for (uint64_t k = sl->first; k <= sl->last; k++) {
				struct shard_rec r;

				shard_rec(vc->sh, k, &r);
				if (shard_check_sum(vc->sh, k, p, r.length,
						    NULL))
					note_bad(sl, k);
				p += r.length;
			}
		}
		i = sl->last + 1;
		pthread_mutex_lock(&vc->lock);
		vc->produced++;
		pthread_cond_broadcast(&vc->cond);
		pthread_mutex_unlock(&vc->lock);
		if (sl->err)
			break;
	}
	return NULL;
}

/* Check the records of one chunk. */

/*
 * Add the record's source name (its key field, schema.h) to the end of
 * a report, when the record's fields can still be told apart.
 */
static void name_source(const struct shard *sh, uint64_t i,
			const unsigned char *p, uint32_t len, struct diag *d)
{
	char key[160];
	size_t n;

	if (!shard_record_key(sh, i, p, len, key, sizeof(key)))
		return;
	n = strlen(d->msg);
	snprintf(d->msg + n, sizeof(d->msg) - n, " (source %s)", key);
}

static void check_chunk(struct verify_ctx *vc, const struct shard *sh,
			const struct verify_slot *sl,
			const struct verify_opts *o, struct verify_stats *st)
{
	struct shard_field f[SCHEMA_MAX_FIELDS];
	const unsigned char *p;
	struct shard_rec r;
	struct diag rd;
	size_t nb = 0;
	int err;

	for (uint64_t i = sl->first; i <= sl->last; i++) {
		bool bad = sl->nbad == SIZE_MAX ||
			   (nb < sl->nbad && sl->bad[nb] == i);

		st->records++;
		shard_rec(sh, i, &r);
		p = sl->buf + (r.offset - sl->offset);
		if (bad) {
			nb++;
			err = shard_parse_record(sh, i, p, r.length, f, &rd);
		} else {
			err = shard_split_record(sh, i, p, r.length, f, &rd);
		}
		if (!err && o->decode)
			err = check_fields(vc, sh, i, f, st, &rd);
		if (err) {
			st->bad++;
			name_source(sh, i, p, r.length, &rd);
			if (o->bad)
				o->bad(o->arg, sh, i, err, rd.msg);
		}
	}
	st->bytes += sl->span;
	if (o->progress)
		o->progress(o->arg, sl->span);
}

int verify_shard(struct verify_ctx *vc, const struct shard *sh, int fd,
		 const struct verify_opts *o, struct verify_stats *st,
		 struct diag *d)
{
	uint64_t n = shard_count(sh), done = 0, begin, end;
	uint64_t max_px =
		o->max_pixels ? o->max_pixels : CODEC_DEFAULT_MAX_PIXELS;
	pthread_t reader;
	int err = 0;

	if (n == 0)
		return 0;
	if (o->decode && max_px != vc->max_pixels) {
		struct codec_ctx *c = NULL;

		if (codec_ctx_new(&c, max_px))
			return diag_set(d, -ENOMEM, "no memory for a decoder");
		codec_ctx_free(vc->codec);
		vc->codec = c;
		vc->max_pixels = max_px;
	}
	shard_data_range(sh, &begin, &end);
	posix_fadvise(fd, (off_t)begin, (off_t)(end - begin),
		      POSIX_FADV_SEQUENTIAL);
	pthread_mutex_init(&vc->lock, NULL);
	pthread_cond_init(&vc->cond, NULL);
	vc->produced = vc->consumed = 0;
	vc->stop = false;
	vc->sh = sh;
	vc->fd = fd;
	err = -pthread_create(&reader, NULL, reader_main, vc);
	if (err) {
		diag_set(d, err, "%s: cannot start a reader thread: %s",
			 shard_name(sh), loader_strerror(err));
		goto out;
	}
	while (done < n) {
		struct verify_slot *sl;

		pthread_mutex_lock(&vc->lock);
		while (vc->produced == vc->consumed)
			pthread_cond_wait(&vc->cond, &vc->lock);
		pthread_mutex_unlock(&vc->lock);
		sl = &vc->slot[vc->consumed % VERIFY_SLOTS];
		if (sl->err) {
			err = diag_set(d, sl->err, "%s", sl->msg);
			break;
		}
		check_chunk(vc, sh, sl, o, st);
		done = sl->last + 1;
		pthread_mutex_lock(&vc->lock);
		vc->consumed++;
		pthread_cond_broadcast(&vc->cond);
		pthread_mutex_unlock(&vc->lock);
	}
	pthread_mutex_lock(&vc->lock);
	vc->stop = true;
	pthread_cond_broadcast(&vc->cond);
	pthread_mutex_unlock(&vc->lock);
	pthread_join(reader, NULL);
out:
	pthread_cond_destroy(&vc->cond);
	pthread_mutex_destroy(&vc->lock);
	return err;
}
