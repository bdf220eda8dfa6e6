/*
 * pack.c - the pack engine: a source into a sharded dataset.
 *
 * One split at a time: open the source, settle the schema (compression,
 * dictionaries), clear the output directory, then read every sample in
 * source or shuffled order, compress its fields and append it to the
 * current shard, starting a new shard when the next record would pass
 * the target size. The manifest is written last, so that a directory
 * with a manifest always holds a complete dataset.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "grow.h"
#include "codec.h"
#include "dataset.h"
#include "jrst.h"
#include "loader_error.h"
#include "outdir.h"
#include "pack.h"
#include "pngd.h"
#include "rng.h"
#include "shard.h"
#include "source.h"
#include "zrec.h"

#define PACK_MAX_SPLITS 16
/* Fields smaller than this gain nothing from a zstd frame of their own. */
#define PACK_MIN_COMPRESS 32

static const struct source_ops *const pack_sources[] = {
	&source_idx_ops,
	&source_tar_ops,
	&source_lmdb_ops,
	&source_folder_ops,
	NULL,
};

/* One split being packed. */
struct pack_job {
	const struct pack_params *p;
	const struct source_ops *ops;
	char outdir[4096]; /* where the shards go: the temporary directory */
	const char *shown; /* the dataset directory, for reports */
	const char *split;
	struct source *src;
	struct schema schema;
	void *dict[SCHEMA_MAX_FIELDS];
	size_t dict_len[SCHEMA_MAX_FIELDS];
	struct zrec_enc *enc[SCHEMA_MAX_FIELDS];
	unsigned char *zbuf[SCHEMA_MAX_FIELDS];
	size_t zcap[SCHEMA_MAX_FIELDS];
	struct codec_ctx *codec;     /* checks what is stored */
	struct codec_ctx *src_codec; /* the source's, for scaling down */
	struct jrst_enc *jrst;	     /* when JPEG fields are transcoded */
	unsigned char *pixels;	     /* a JPEG decoded, to check it decodes */
	size_t pixels_cap;
	struct dataset ds;
	uint64_t bytes_out, skipped;
	uint64_t jpeg_transcoded, jpeg_as_is, jpeg_before, jpeg_after;
	uint64_t png;  /* image fields that hold a PNG */
	uint64_t done; /* samples read so far, for reports */
	struct diag d;
};

const struct source_ops *pack_source_find(const char *format, const char *path)
{
	bool detect = !format || !strcmp(format, "auto");

	for (unsigned i = 0; pack_sources[i]; i++) {
		if (detect ? pack_sources[i]->detect(path) :
			     !strcmp(format, pack_sources[i]->name))
			return pack_sources[i];
	}
	return NULL;
}

/* Tell the caller. A negative return from it stops the pack. */
static int report(struct pack_job *j, enum pack_event ev, uint64_t done,
		  const char *msg, const struct pack_stats *st)
{
	const struct pack_params *p = j->p;
	struct pack_progress pg = {
		.event = ev,
		.split = j->split,
		.outdir = j->shown,
		.done = done,
		.total = j->src->count,
		.msg = msg,
		.stats = st,
	};
	int err;

	if (!p->progress)
		return 0;
	err = p->progress(&pg, p->arg);
	if (err >= 0)
		return 0;
	return diag_set(&j->d, err, "%s: stopped by the caller", j->outdir);
}

static bool compressible(const struct field *f)
{
	if (f->kind == FIELD_BYTES || field_ragged(f))
		return true;
	return f->kind == FIELD_TENSOR &&
	       field_fixed_size(f) >= PACK_MIN_COMPRESS;
}

/*
 * Train one dictionary per compressed field from samples spread evenly
 * over the dataset, about a hundred times the dictionary size in all, as
 * zstd's documentation advises.
 */
static int train_dicts(struct pack_job *j)
{
	const struct pack_params *p = j->p;
	uint64_t n = j->src->count, budget = p->dict_size * 100;
	struct shard_field f[SCHEMA_MAX_FIELDS];
	char where[512];
	int err = 0;

	if (budget > (64u << 20))
		budget = 64u << 20;
	for (uint32_t k = 0; k < j->schema.nfields; k++) {
		unsigned char *buf = NULL;
		size_t *sizes = NULL, len = 0, cap = 0;
		uint64_t want, step, ns = 0;

		if (j->schema.f[k].comp != COMP_ZSTD_DICT)
			continue;
		/* Probe one sample for its size to pick the stride. */
		err = j->src->ops->get(j->src, 0, j->src_codec, f, where,
				       sizeof(where), &j->d);
		if (err)
			return diag_wrap(&j->d, err, "%s", where);
		want = f[k].len ? budget / f[k].len : n;
		want = want < 16 ? 16 : want;
		want = want > n ? n : want;
		step = n / want ? n / want : 1;
		sizes = calloc(want, sizeof(*sizes));
		if (!sizes)
			return -ENOMEM;
		for (uint64_t i = 0; i < n && ns < want && len < budget;
		     i += step) {
			err = j->src->ops->get(j->src, i, j->src_codec, f,
					       where, sizeof(where), &j->d);
			if (err) {
				if (p->skip_bad)
					continue;
				diag_wrap(&j->d, err, "%s", where);
				break;
			}
			err = grow_buf(&buf, &cap, len + f[k].len);
			if (err)
				break;
			memcpy(buf + len, f[k].data, f[k].len);
			len += f[k].len;
			sizes[ns++] = f[k].len;
		}
		if (!err) {
			j->dict[k] = malloc(p->dict_size);
			err = j->dict[k] ? 0 : -ENOMEM;
		}
		if (!err)
			err = zrec_train(j->dict[k], p->dict_size, buf, sizes,
					 (unsigned)ns, &j->dict_len[k], &j->d);
		if (err)
			diag_wrap(&j->d, err, "field %s (drop --dict?)",
				  j->schema.f[k].name);
		free(buf);
		free(sizes);
		if (err)
			return err;
	}
	return 0;
}

static int prepare(struct pack_job *j)
{
	const struct pack_params *p = j->p;
	bool zstd = p->dict || p->compress == PACK_COMPRESS_ZSTD;
	int err;

	j->schema = j->src->schema;
	for (uint32_t k = 0; k < j->schema.nfields; k++) {
		struct field *f = &j->schema.f[k];

		/* The key stays readable as it is (schema.h). */
		if (!zstd || !compressible(f) || schema_meta_name(f->name))
			continue;
		f->comp = p->dict ? COMP_ZSTD_DICT : COMP_ZSTD;
		f->level = (int32_t)p->level;
	}
	err = schema_check(&j->schema, &j->d);
	if (err)
		return err;
	if (p->dict) {
		err = train_dicts(j);
		if (err)
			return err;
	}
	for (uint32_t k = 0; k < j->schema.nfields; k++) {
		if (j->schema.f[k].comp == COMP_NONE)
			continue;
		err = zrec_enc_new(&j->enc[k], p->level, j->dict[k],
				   j->dict_len[k], &j->d);
		if (err)
			return err;
	}
	return 0;
}

static int add_shard_entry(struct pack_job *j, const char *name,
			   uint64_t records, uint64_t bytes)
{
	struct dataset_shard *s;

	s = realloc(j->ds.shards, (j->ds.nshards + 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	j->ds.shards = s;
	s += j->ds.nshards;
	s->file = strdup(name);
	if (!s->file)
		return -ENOMEM;
	s->records = records;
	s->bytes = bytes;
	j->ds.nshards++;
	j->ds.records += records;
	j->bytes_out += bytes;
	return 0;
}

/* Close the current shard and record it in the manifest. */
static int finish_shard(struct pack_job *j, struct shard_writer **w, int *fd,
			const char *name)
{
	uint64_t count = shard_writer_count(*w);
	uint64_t size = shard_writer_size(*w);
	int err = shard_writer_finish(*w, &j->d);

	shard_writer_free(*w);
	*w = NULL;
	/* On the disk before the dataset is swapped in (outdir.h). */
	if (!err && fsync(*fd))
		err = diag_set(&j->d, -errno, "%s: fsync: %s", name,
			       strerror(errno));
	if (!err && close(*fd))
		err = diag_set(&j->d, -errno, "%s: close: %s", name,
			       strerror(errno));
	*fd = -1;
	if (!err)
		err = add_shard_entry(j, name, count, size);
	return err;
}

static int open_shard(struct pack_job *j, struct shard_writer **w, int *fd,
		      char *name, size_t n)
{
	struct shard_dict dicts[SCHEMA_MAX_FIELDS];
	char path[4200];

	for (uint32_t k = 0; k < j->schema.nfields; k++)
		dicts[k] = (struct shard_dict){ j->dict[k], j->dict_len[k] };
	snprintf(name, n, "shard-%05" PRIu32 ".lds", j->ds.nshards);
	snprintf(path, sizeof(path), "%s/%s", j->outdir, name);
	/* A new file in our own new directory, never through a link. */
	*fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		   0644);
	if (*fd < 0)
		return diag_set(&j->d, -errno, "%s: %s", path, strerror(errno));
	return shard_writer_new(w, *fd, path, &j->schema, dicts, &j->d);
}

/*
 * Decode a JPEG payload whole, with the stream's decoder (its header
 * checks, pixel limit and colour policy, as verify does): a file that
 * fails here would fail a stream, so it is a bad sample now.
 */
static int check_decodes(struct pack_job *j, const struct shard_field *f,
			 const char *where)
{
	const struct codec_ops *jpeg = codec_get(CODEC_JPEG);
	struct codec_src src = { .data = f->data, .len = f->len };
	struct codec_info info;
	struct diag d = { { 0 } };
	int err;

	err = jpeg->probe(j->codec, &src, &info, &d);
	if (!err && grow_buf(&j->pixels, &j->pixels_cap, info.size))
		return diag_set(&j->d, -ENOMEM, "%s: no memory for %zu pixels",
				where, info.size);
	if (!err)
		err = jpeg->decode(j->codec, &src, j->pixels, j->pixels_cap,
				   &info, &d);
	if (err)
		return diag_set(&j->d, err == -ENOMEM ? err : LOADER_EDECODE,
				"%s: does not decode: %s", where, d.msg);
	return 0;
}

/*
 * A JPEG field's payload, transcoded to restart segments in place of the
 * original (f then points into the transcoder, valid until its next
 * call). One that cannot be transcoded but decodes (arithmetic-coded,
 * progressive without every bit) is kept as it is and reported; one
 * that is damaged (libjpeg's warnings count) is a bad sample:
 * LOADER_EDECODE, naming it.
 */
static int transcode_jpeg(struct pack_job *j, struct shard_field *f,
			  const char *where)
{
	struct jrst_params jp = { j->p->jpeg_restart, true };
	const unsigned char *o;
	struct diag d = { { 0 } };
	char msg[sizeof(d.msg) + 600];
	size_t len;
	int err;

	/* A PNG (by its signature, whatever its name) is stored as it is. */
	if (pngd_is(f->data, f->len)) {
		err = check_decodes(j, f, where);
		if (!err)
			j->png++;
		return err;
	}
	if (!j->jrst)
		return check_decodes(j, f, where);
	err = jrst_transcode(j->jrst, f->data, f->len, &jp, &o, &len, &d);
	if (!err && len <= UINT32_MAX) {
		j->jpeg_before += f->len;
		f->data = o;
		f->len = (uint32_t)len;
		j->jpeg_after += len;
		j->jpeg_transcoded++;
		return 0;
	}
	if (err == -ENOMEM)
		return diag_set(&j->d, err, "%s: %s", where, d.msg);
	if (err == LOADER_EDECODE)
		return diag_set(&j->d, err, "%s: damaged JPEG: %s", where,
				d.msg);
	err = check_decodes(j, f, where);
	if (err)
		return err;
	j->jpeg_before += f->len;
	j->jpeg_after += f->len;
	j->jpeg_as_is++;
	snprintf(msg, sizeof(msg), "%s: %s", where,
		 d.msg[0] ? d.msg : "transcoded JPEG above 4 GiB");
	return report(j, PACK_ASIS, j->done, msg, NULL);
}

static int write_all(struct pack_job *j, const uint64_t *order)
{
	const struct pack_params *p = j->p;
	struct shard_field in[SCHEMA_MAX_FIELDS], out[SCHEMA_MAX_FIELDS];
	struct shard_writer *w = NULL;
	char name[64], where[512];
	int fd = -1, err;
	uint64_t n = j->src->count;

	err = report(j, PACK_BEGIN, 0, NULL, NULL);
	for (uint64_t i = 0; i < n && !err; i++) {
		uint64_t rec = 4ull * j->schema.nfields;

		j->done = i + 1;

		err = j->src->ops->get(j->src, order ? order[i] : i,
				       j->src_codec, in, where, sizeof(where),
				       &j->d);
		if (err) {
			diag_wrap(&j->d, err, "%s", where);
			if (!p->skip_bad || err == -ENOMEM)
				break;
			j->skipped++;
			err = report(j, PACK_SKIP, i + 1, j->d.msg, NULL);
			continue;
		}
		for (uint32_t k = 0; k < j->schema.nfields && !err; k++) {
			size_t len;

			out[k] = in[k];
			if (j->schema.f[k].kind == FIELD_JPEG) {
				err = transcode_jpeg(j, &out[k], where);
				rec += out[k].len;
				continue;
			}
			if (!j->enc[k]) {
				rec += in[k].len;
				continue;
			}
			err = grow_buf(&j->zbuf[k], &j->zcap[k],
				       zrec_bound(in[k].len));
			if (!err)
				err = zrec_compress(j->enc[k], in[k].data,
						    in[k].len, j->zbuf[k],
						    j->zcap[k], &len, &j->d);
			if (!err && len > UINT32_MAX)
				err = diag_set(
					&j->d, LOADER_ETOOBIG,
					"field %s compresses to %zu bytes",
					j->schema.f[k].name, len);
			if (err)
				diag_wrap(&j->d, err, "%s", where);
			out[k].data = j->zbuf[k];
			out[k].len = (uint32_t)len;
			rec += len;
		}
		/* A damaged JPEG is a bad sample, as one that cannot be read. */
		if (err == LOADER_EDECODE && p->skip_bad) {
			j->skipped++;
			err = report(j, PACK_SKIP, i + 1, j->d.msg, NULL);
			continue;
		}
		if (err)
			break;
		/*
		 * Start a new shard when this record would overflow the
		 * target, or the records a shard may hold (tiny records).
		 */
		if (w && shard_writer_count(w) &&
		    (shard_writer_size(w) + rec + SHARD_INDEX_ENTRY >
			     p->shard_size ||
		     shard_writer_count(w) == SHARD_MAX_RECORDS)) {
			err = finish_shard(j, &w, &fd, name);
			if (err)
				break;
		}
		if (!w) {
			err = open_shard(j, &w, &fd, name, sizeof(name));
			if (err)
				break;
		}
		err = shard_writer_add(w, out, &j->d);
		if (err) {
			diag_wrap(&j->d, err, "%s", where);
			break;
		}
		err = report(j, PACK_SAMPLE, i + 1, NULL, NULL);
	}
	if (!err && w)
		err = finish_shard(j, &w, &fd, name);
	shard_writer_free(w);
	if (fd >= 0)
		close(fd);
	return err;
}

static void job_free(struct pack_job *j)
{
	for (uint32_t k = 0; k < SCHEMA_MAX_FIELDS; k++) {
		free(j->dict[k]);
		zrec_enc_free(j->enc[k]);
		free(j->zbuf[k]);
	}
	for (uint32_t i = 0; i < j->ds.nshards; i++)
		free(j->ds.shards[i].file);
	free(j->ds.shards);
	free(j->ds.origin.source);
	free(j->ds.origin.source_format);
	codec_ctx_free(j->codec);
	codec_ctx_free(j->src_codec);
	jrst_enc_free(j->jrst);
	free(j->pixels);
	if (j->src)
		j->src->ops->close(j->src);
}

/*
 * Pack one split (or the whole of a source without splits) into the
 * directory dir, a new one of our own; shown is where it is going, for
 * reports. st gets its figures. PACK_DONE is the caller's to report,
 * once the dataset is in place.
 */
static int pack_split(const struct pack_params *p, const char *dir,
		      const char *shown, const char *split,
		      struct pack_stats *st, struct diag *d)
{
	struct source_opts so = {
		.split = split,
		.classes = p->classes,
		.ragged = p->ragged,
		.max_side = p->max_side,
		.max_pixels = p->max_pixels,
		.quality = p->quality,
	};
	struct pack_job j = { .p = p, .ops = p->format, .split = split };
	uint64_t *order = NULL;
	double t0 = clock_mono_s();
	int err;

	snprintf(j.outdir, sizeof(j.outdir), "%s", dir);
	j.shown = shown;
	/*
	 * The source decodes what it scales down, larger than a stream
	 * would; what is stored is checked with a stream's limit.
	 */
	err = codec_ctx_new(&j.src_codec, p->max_side || p->max_pixels ?
						  PACK_DECODE_PIXELS_MAX :
						  0);
	if (!err)
		err = codec_ctx_new(&j.codec, 0);
	if (!err && p->jpeg_restart)
		err = jrst_enc_new(&j.jrst, 0);
	if (!err)
		err = j.ops->open(&j.src, p->src, &so, &j.d);
	if (!err && j.src->count == 0)
		err = diag_set(&j.d, -ENOENT, "%s: no samples found", p->src);
	if (!err)
		err = prepare(&j);
	if (!err && p->shuffle >= 0) {
		struct rng g;

		order = malloc(j.src->count * sizeof(*order));
		if (!order) {
			err = -ENOMEM;
		} else {
			for (uint64_t i = 0; i < j.src->count; i++)
				order[i] = i;
			rng_seed(&g, (uint64_t)p->shuffle);
			rng_shuffle_u64(&g, order, j.src->count);
		}
	}
	if (!err)
		err = write_all(&j, order);
	if (!err && j.ds.records == 0)
		err = diag_set(&j.d, -ENOENT, "%s: every sample was skipped",
			       p->src);
	if (!err) {
		j.ds.dir = j.outdir;
		j.ds.schema = j.schema;
		j.ds.classes = j.src->classes;
		j.ds.nclasses = j.src->nclasses;
		j.ds.origin.source = strdup(p->src);
		j.ds.origin.source_format = strdup(j.ops->name);
		j.ds.origin.bytes_in = j.ops->bytes_in(j.src);
		j.ds.origin.shuffle_seed = p->shuffle;
		j.ds.origin.jpeg_restart = p->jpeg_restart;
		j.ds.origin.jpeg_transcoded = j.jpeg_transcoded;
		j.ds.origin.jpeg_as_is = j.jpeg_as_is;
		j.ds.origin.jpeg_bytes_before = j.jpeg_before;
		j.ds.origin.jpeg_bytes_after = j.jpeg_after;
		err = dataset_save(&j.ds, &j.d);
		j.ds.classes = NULL;
		j.ds.nclasses = 0;
		j.ds.dir = NULL;
	}
	if (!err) {
		st->records = j.ds.records;
		st->skipped = j.skipped;
		st->shards = j.ds.nshards;
		st->bytes_in = j.ops->bytes_in(j.src);
		st->bytes_out = j.bytes_out;
		st->seconds = clock_mono_s() - t0;
		st->jpeg_transcoded = j.jpeg_transcoded;
		st->jpeg_as_is = j.jpeg_as_is;
		st->jpeg_bytes_before = j.jpeg_before;
		st->jpeg_bytes_after = j.jpeg_after;
		st->png = j.png;
		st->left = j.src->left;
	}
	if (err)
		diag_set(d, err, "%s",
			 j.d.msg[0] ? j.d.msg : loader_strerror(err));
	free(order);
	job_free(&j);
	return err;
}

static int check_params(const struct pack_params *p, struct diag *d)
{
	if (!p->format || !p->src || !p->outdir)
		return diag_set(d, LOADER_EUSAGE,
				"pack: format, source and output are required");
	if (p->compress != PACK_COMPRESS_NONE &&
	    p->compress != PACK_COMPRESS_ZSTD)
		return diag_set(d, LOADER_EUSAGE,
				"pack: unknown compression %d", p->compress);
	if (p->shard_size < PACK_SHARD_SIZE_MIN || p->level < PACK_LEVEL_MIN ||
	    p->level > PACK_LEVEL_MAX || p->quality < PACK_QUALITY_MIN ||
	    p->quality > PACK_QUALITY_MAX ||
	    p->dict_size < PACK_DICT_SIZE_MIN ||
	    p->max_side > PACK_MAX_SIDE_MAX ||
	    p->jpeg_restart > PACK_JPEG_RESTART_MAX)
		return diag_set(
			d, LOADER_EUSAGE,
			"pack: out of range: shard size >= %u, level %d..%d, quality %u..%u, dictionary size >= %u, max side <= %u, jpeg restart <= %u",
			PACK_SHARD_SIZE_MIN, PACK_LEVEL_MIN, PACK_LEVEL_MAX,
			PACK_QUALITY_MIN, PACK_QUALITY_MAX, PACK_DICT_SIZE_MIN,
			PACK_MAX_SIDE_MAX, PACK_JPEG_RESTART_MAX);
	/*
	 * Every shard stores its dictionaries: a shard size not above them
	 * would make each record a shard of its own.
	 */
	if (p->dict && p->shard_size <= p->dict_size)
		return diag_set(
			d, LOADER_EUSAGE,
			"--shard-size %" PRIu64
			" is not above --dict-size %" PRIu64
			": every shard stores its dictionaries, so each would hold a single record; raise --shard-size (or lower --dict-size)",
			(uint64_t)p->shard_size, (uint64_t)p->dict_size);
	return 0;
}

/* Pass a note of outdir.c on to the caller, once. */
static void report_note(const struct pack_params *p, const char *split,
			const char *outdir, char *msg)
{
	struct pack_progress pg = {
		.event = PACK_NOTE,
		.split = split,
		.outdir = outdir,
		.msg = msg,
	};

	if (p->progress && msg[0])
		p->progress(&pg, p->arg);
	msg[0] = '\0';
}

/* One dataset a pack writes: a split, or the whole source. */
struct pack_target {
	const char *split;
	char path[4096];
	struct outdir od;
	struct pack_stats st;
};

/*
 * Every dataset is packed into its own temporary directory first; only
 * when all are, they are swapped into place one after the other. So a
 * failure leaves every dataset as it was, and a kill between two swaps
 * leaves each one whole, old or new.
 */
int pack_run(const struct pack_params *p, struct diag *d)
{
	char splits[PACK_MAX_SPLITS][32];
	struct pack_target *t;
	int n = 1, nt = 0, begun = 0, packed = 0, done = 0, err;

	diag_clear(d);
	err = check_params(p, d);
	if (err)
		return err;
	if (p->format->splits) {
		n = p->format->splits(p->src, splits, PACK_MAX_SPLITS, d);
		if (n < 0)
			return n;
	}
	t = calloc((size_t)n, sizeof(*t));
	if (!t)
		return diag_set(d, -ENOMEM, "out of memory");
	for (int i = 0; i < n; i++) {
		struct pack_target *x = &t[nt];

		if (!p->format->splits) {
			snprintf(x->path, sizeof(x->path), "%s", p->outdir);
		} else {
			if (p->split && strcmp(p->split, splits[i]))
				continue;
			x->split = splits[i];
			snprintf(x->path, sizeof(x->path), "%s/%s", p->outdir,
				 splits[i]);
		}
		nt++;
	}
	if (p->split && !nt) {
		err = diag_set(d, -ENOENT, "%s has no split \"%s\"", p->src,
			       p->split);
		goto out;
	}
	/* Every refusal before any packing. */
	for (; begun < nt; begun++) {
		err = outdir_begin(&t[begun].od, t[begun].path, p->force, d);
		if (err)
			goto out;
		report_note(p, t[begun].split, t[begun].od.target,
			    t[begun].od.note);
	}
	for (; packed < nt; packed++) {
		err = pack_split(p, t[packed].od.tmp, t[packed].od.target,
				 t[packed].split, &t[packed].st, d);
		if (err)
			goto out;
	}
	for (; done < nt; done++) {
		struct pack_progress pg = {
			.event = PACK_DONE,
			.split = t[done].split,
			.outdir = t[done].od.target,
			.done = t[done].st.records + t[done].st.skipped,
			.total = t[done].st.records + t[done].st.skipped,
			.stats = &t[done].st,
		};

		err = outdir_commit(&t[done].od, d);
		if (err)
			goto out;
		report_note(p, t[done].split, t[done].od.target,
			    t[done].od.note);
		if (p->progress)
			p->progress(&pg, p->arg);
	}
out:
	/* What was not swapped in goes, the last made first. */
	for (int i = begun - 1; i >= done && i >= 0; i--)
		outdir_abort(&t[i].od);
	free(t);
	return err;
}
