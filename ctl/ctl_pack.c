/*
 * ctl_pack.c - loaderctl pack: a source into a sharded dataset.
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
#include <unistd.h>

#include <jansson.h>

#include "grow.h"
#include "codec.h"
#include "ctl.h"
#include "dataset.h"
#include "loader_error.h"
#include "opts.h"
#include "progress.h"
#include "rng.h"
#include "shard.h"
#include "source.h"
#include "zrec.h"

#define PACK_MAX_SPLITS 16
/* Fields smaller than this gain nothing from a zstd frame of their own. */
#define PACK_MIN_COMPRESS 32

struct pack_opts {
	const char *format;
	uint64_t shard_size;
	const char *compress;
	uint64_t level;
	bool dict;
	uint64_t dict_size;
	int64_t shuffle;
	uint64_t max_side;
	uint64_t quality;
	const char *classes;
	const char *split;
	bool skip_bad;
	bool force;
	bool json;
};

#define O(f) offsetof(struct pack_opts, f)
static const struct opt pack_table[] = {
	{ "format", 'F', OPT_STR, O(format), "auto", "FMT",
	  "source format: idx, imagefolder, tar or auto", 0, 0 },
	{ "shard-size", 's', OPT_SIZE, O(shard_size), "256M", "BYTES",
	  "target shard size; a record is never split", 0, 0 },
	{ "compress", 'c', OPT_STR, O(compress), "none", "none|zstd",
	  "compression of tensor and bytes fields (JPEGs are stored as-is)", 0,
	  0 },
	{ "level", 'l', OPT_U64, O(level), "3", "N", "zstd level, 1..22", 0,
	  0 },
	{ "dict", 0, OPT_FLAG, O(dict), NULL, NULL,
	  "train a zstd dictionary per compressed field and store it in each shard (implies --compress zstd)",
	  0, 0 },
	{ "dict-size", 0, OPT_SIZE, O(dict_size), "112K", "BYTES",
	  "largest dictionary to train", 0, 0 },
	{ "shuffle", 0, OPT_I64, O(shuffle), "-1", "SEED",
	  "shuffle the samples with SEED before packing (-1: keep source order)",
	  0, 0 },
	{ "max-side", 0, OPT_U64, O(max_side), "0", "N",
	  "re-encode JPEGs whose longer side exceeds N pixels down to N (0: store as-is)",
	  0, 0 },
	{ "quality", 0, OPT_U64, O(quality), "90", "N",
	  "JPEG quality when re-encoding", 0, 0 },
	{ "classes", 0, OPT_STR, O(classes), NULL, "A,B,...",
	  "class names, in label order (IDX files carry none)", 0, 0 },
	{ "split", 0, OPT_STR, O(split), NULL, "NAME",
	  "pack only this split of a source that has several (IDX: train, test)",
	  0, 0 },
	{ "skip-bad", 0, OPT_FLAG, O(skip_bad), NULL, NULL,
	  "skip samples that cannot be read or decoded (each is named) instead of stopping",
	  0, 0 },
	{ "force", 'f', OPT_FLAG, O(force), NULL, NULL,
	  "replace a dataset already in OUTDIR", 0, 0 },
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL,
	  "print the summary as one JSON object per split", 0, 0 },
	OPT_END,
};
#undef O

static const struct source_ops *const pack_sources[] = {
	&source_idx_ops,
	&source_tar_ops,
	&source_folder_ops,
	NULL,
};

struct pack_run {
	const struct pack_opts *o;
	const char *src_path;
	char outdir[4096];
	const char *split;
	struct source *src;
	struct schema schema;
	void *dict[SCHEMA_MAX_FIELDS];
	size_t dict_len[SCHEMA_MAX_FIELDS];
	struct zrec_enc *enc[SCHEMA_MAX_FIELDS];
	unsigned char *zbuf[SCHEMA_MAX_FIELDS];
	size_t zcap[SCHEMA_MAX_FIELDS];
	struct codec_ctx *codec;
	struct dataset ds;
	uint64_t bytes_out, skipped;
	struct diag d;
};

static bool compressible(const struct field *f)
{
	if (f->kind == FIELD_BYTES)
		return true;
	return f->kind == FIELD_TENSOR &&
	       field_fixed_size(f) >= PACK_MIN_COMPRESS;
}

/*
 * Train one dictionary per compressed field from samples spread evenly
 * over the dataset, about a hundred times the dictionary size in all, as
 * zstd's documentation advises.
 */
static int train_dicts(struct pack_run *r)
{
	const struct pack_opts *o = r->o;
	uint64_t n = r->src->count, budget = o->dict_size * 100;
	struct shard_field f[SCHEMA_MAX_FIELDS];
	char where[512];
	int err = 0;

	if (budget > (64u << 20))
		budget = 64u << 20;
	for (uint32_t k = 0; k < r->schema.nfields; k++) {
		unsigned char *buf = NULL;
		size_t *sizes = NULL, len = 0, cap = 0;
		uint64_t want, step, ns = 0;

		if (r->schema.f[k].comp != COMP_ZSTD_DICT)
			continue;
		/* Probe one sample for its size to pick the stride. */
		err = r->src->ops->get(r->src, 0, r->codec, f, where,
				       sizeof(where), &r->d);
		if (err)
			return diag_wrap(&r->d, err, "%s", where);
		want = f[k].len ? budget / f[k].len : n;
		want = want < 16 ? 16 : want;
		want = want > n ? n : want;
		step = n / want ? n / want : 1;
		sizes = calloc(want, sizeof(*sizes));
		if (!sizes)
			return -ENOMEM;
		for (uint64_t i = 0; i < n && ns < want && len < budget;
		     i += step) {
			err = r->src->ops->get(r->src, i, r->codec, f, where,
					       sizeof(where), &r->d);
			if (err) {
				if (o->skip_bad)
					continue;
				diag_wrap(&r->d, err, "%s", where);
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
			r->dict[k] = malloc(o->dict_size);
			err = r->dict[k] ? 0 : -ENOMEM;
		}
		if (!err)
			err = zrec_train(r->dict[k], o->dict_size, buf, sizes,
					 (unsigned)ns, &r->dict_len[k], &r->d);
		if (err)
			diag_wrap(&r->d, err, "field %s (drop --dict?)",
				  r->schema.f[k].name);
		free(buf);
		free(sizes);
		if (err)
			return err;
	}
	return 0;
}

static int prepare(struct pack_run *r)
{
	const struct pack_opts *o = r->o;
	bool zstd = o->dict || !strcmp(o->compress, "zstd");
	int err;

	if (!zstd && strcmp(o->compress, "none"))
		return diag_set(&r->d, LOADER_EUSAGE,
				"--compress: \"%s\" is neither none nor zstd",
				o->compress);
	r->schema = r->src->schema;
	for (uint32_t k = 0; k < r->schema.nfields; k++) {
		struct field *f = &r->schema.f[k];

		if (!zstd || !compressible(f))
			continue;
		f->comp = o->dict ? COMP_ZSTD_DICT : COMP_ZSTD;
		f->level = (int32_t)o->level;
	}
	err = schema_check(&r->schema, &r->d);
	if (err)
		return err;
	if (o->dict) {
		err = train_dicts(r);
		if (err)
			return err;
	}
	for (uint32_t k = 0; k < r->schema.nfields; k++) {
		if (r->schema.f[k].comp == COMP_NONE)
			continue;
		err = zrec_enc_new(&r->enc[k], (int)o->level, r->dict[k],
				   r->dict_len[k], &r->d);
		if (err)
			return err;
	}
	return 0;
}

/* mkdir -p: create dir and any missing parents. */
static int mkdir_p(const char *dir)
{
	char path[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, n + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0777) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0777) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Refuse to mix a new dataset into an old one, unless --force. */
static int prepare_outdir(struct pack_run *r)
{
	DIR *dir;
	struct dirent *e;
	char path[4200];
	int err;

	err = mkdir_p(r->outdir);
	if (err)
		return diag_set(&r->d, err, "%s: %s", r->outdir,
				strerror(-err));
	dir = opendir(r->outdir);
	if (!dir)
		return diag_set(&r->d, -errno, "%s: %s", r->outdir,
				strerror(errno));
	while ((e = readdir(dir))) {
		bool ours = !strcmp(e->d_name, DATASET_MANIFEST) ||
			    (!strncmp(e->d_name, "shard-", 6) &&
			     strstr(e->d_name, ".lds"));

		if (!ours)
			continue;
		if (!r->o->force) {
			diag_set(
				&r->d, -EEXIST,
				"%s already holds a dataset (%s); pass --force to replace it",
				r->outdir, e->d_name);
			closedir(dir);
			return -EEXIST;
		}
		snprintf(path, sizeof(path), "%s/%s", r->outdir, e->d_name);
		unlink(path);
	}
	closedir(dir);
	return 0;
}

static int add_shard_entry(struct pack_run *r, const char *name,
			   uint64_t records, uint64_t bytes)
{
	struct dataset_shard *s;

	s = realloc(r->ds.shards, (r->ds.nshards + 1) * sizeof(*s));
	if (!s)
		return -ENOMEM;
	r->ds.shards = s;
	s += r->ds.nshards;
	s->file = strdup(name);
	if (!s->file)
		return -ENOMEM;
	s->records = records;
	s->bytes = bytes;
	r->ds.nshards++;
	r->ds.records += records;
	r->bytes_out += bytes;
	return 0;
}

/* Close the current shard and record it in the manifest. */
static int finish_shard(struct pack_run *r, struct shard_writer **w, int *fd,
			const char *name)
{
	uint64_t count = shard_writer_count(*w);
	uint64_t size = shard_writer_size(*w);
	int err = shard_writer_finish(*w, &r->d);

	shard_writer_free(*w);
	*w = NULL;
	if (!err && close(*fd))
		err = diag_set(&r->d, -errno, "%s: close: %s", name,
			       strerror(errno));
	*fd = -1;
	if (!err)
		err = add_shard_entry(r, name, count, size);
	return err;
}

static int open_shard(struct pack_run *r, struct shard_writer **w, int *fd,
		      char *name, size_t n)
{
	struct shard_dict dicts[SCHEMA_MAX_FIELDS];
	char path[4200];

	for (uint32_t k = 0; k < r->schema.nfields; k++)
		dicts[k] = (struct shard_dict){ r->dict[k], r->dict_len[k] };
	snprintf(name, n, "shard-%05" PRIu32 ".lds", r->ds.nshards);
	snprintf(path, sizeof(path), "%s/%s", r->outdir, name);
	*fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (*fd < 0)
		return diag_set(&r->d, -errno, "%s: %s", path, strerror(errno));
	return shard_writer_new(w, *fd, path, &r->schema, dicts, &r->d);
}

static int write_all(struct pack_run *r, const uint64_t *order)
{
	const struct pack_opts *o = r->o;
	struct shard_field in[SCHEMA_MAX_FIELDS], out[SCHEMA_MAX_FIELDS];
	struct shard_writer *w = NULL;
	struct progress pg;
	char name[64], where[512];
	int fd = -1, err = 0;
	uint64_t n = r->src->count;

	progress_start(&pg, r->split ? r->split : "pack", "samples", n);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t rec = 4ull * r->schema.nfields;

		err = r->src->ops->get(r->src, order ? order[i] : i, r->codec,
				       in, where, sizeof(where), &r->d);
		if (err) {
			diag_wrap(&r->d, err, "%s", where);
			if (!o->skip_bad || err == -ENOMEM)
				break;
			progress_end(&pg);
			fprintf(stderr, "loaderctl pack: skipped %s\n",
				r->d.msg);
			r->skipped++;
			err = 0;
			continue;
		}
		for (uint32_t k = 0; k < r->schema.nfields && !err; k++) {
			size_t len;

			out[k] = in[k];
			if (!r->enc[k]) {
				rec += in[k].len;
				continue;
			}
			err = grow_buf(&r->zbuf[k], &r->zcap[k],
				       zrec_bound(in[k].len));
			if (!err)
				err = zrec_compress(r->enc[k], in[k].data,
						    in[k].len, r->zbuf[k],
						    r->zcap[k], &len, &r->d);
			if (!err && len > UINT32_MAX)
				err = diag_set(
					&r->d, LOADER_ETOOBIG,
					"field %s compresses to %zu bytes",
					r->schema.f[k].name, len);
			out[k].data = r->zbuf[k];
			out[k].len = (uint32_t)len;
			rec += len;
		}
		if (err) {
			diag_wrap(&r->d, err, "%s", where);
			break;
		}
		/* Start a new shard when this record would overflow the target. */
		if (w && shard_writer_count(w) &&
		    shard_writer_size(w) + rec + SHARD_INDEX_ENTRY >
			    o->shard_size) {
			err = finish_shard(r, &w, &fd, name);
			if (err)
				break;
		}
		if (!w) {
			err = open_shard(r, &w, &fd, name, sizeof(name));
			if (err)
				break;
		}
		err = shard_writer_add(w, out, &r->d);
		if (err) {
			diag_wrap(&r->d, err, "%s", where);
			break;
		}
		progress_add(&pg, 1);
	}
	progress_end(&pg);
	if (!err && w)
		err = finish_shard(r, &w, &fd, name);
	shard_writer_free(w);
	if (fd >= 0)
		close(fd);
	return err;
}

static void print_summary(struct pack_run *r, double secs)
{
	uint64_t in = r->src->ops->bytes_in(r->src);
	double ratio = r->bytes_out ? (double)in / (double)r->bytes_out : 0;
	char a[32], b[32];

	if (r->o->json) {
		json_t *j = json_pack(
			"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f}",
			"split", r->split ? r->split : "", "dataset", r->outdir,
			"samples", (json_int_t)r->ds.records, "skipped",
			(json_int_t)r->skipped, "shards",
			(json_int_t)r->ds.nshards, "bytes_in", (json_int_t)in,
			"bytes_out", (json_int_t)r->bytes_out, "ratio", ratio,
			"seconds", secs);
		char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);

		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(j);
		return;
	}
	printf("packed %" PRIu64 " samples into %" PRIu32
	       " shard%s in %s: %s in, %s out, ratio %.2f, %.2f s (%.0f samples/s)",
	       r->ds.records, r->ds.nshards, r->ds.nshards == 1 ? "" : "s",
	       r->outdir, progress_bytes((double)in, a, sizeof(a)),
	       progress_bytes((double)r->bytes_out, b, sizeof(b)), ratio, secs,
	       secs > 0 ? (double)r->ds.records / secs : 0);
	if (r->skipped)
		printf(", %" PRIu64 " skipped", r->skipped);
	printf("\n");
}

static void run_free(struct pack_run *r)
{
	for (uint32_t k = 0; k < SCHEMA_MAX_FIELDS; k++) {
		free(r->dict[k]);
		zrec_enc_free(r->enc[k]);
		free(r->zbuf[k]);
	}
	for (uint32_t i = 0; i < r->ds.nshards; i++)
		free(r->ds.shards[i].file);
	free(r->ds.shards);
	free(r->ds.origin.source);
	free(r->ds.origin.source_format);
	codec_ctx_free(r->codec);
	if (r->src)
		r->src->ops->close(r->src);
}

/* Remove the shards a failed pack wrote, so no half dataset is left. */
static void remove_partial(struct pack_run *r)
{
	char path[4200];

	for (uint32_t i = 0; i < r->ds.nshards; i++) {
		snprintf(path, sizeof(path), "%s/%s", r->outdir,
			 r->ds.shards[i].file);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/shard-%05" PRIu32 ".lds", r->outdir,
		 r->ds.nshards);
	unlink(path);
}

static int pack_one(const struct source_ops *ops, const struct pack_opts *o,
		    const char *src, const char *outdir, const char *split)
{
	struct source_opts so = {
		.split = split,
		.classes = o->classes,
		.max_side = o->max_side,
		.quality = o->quality,
	};
	struct pack_run r = { .o = o, .src_path = src, .split = split };
	uint64_t *order = NULL;
	double t0 = progress_now();
	int err;

	snprintf(r.outdir, sizeof(r.outdir), "%s", outdir);
	err = codec_ctx_new(&r.codec, 0);
	if (!err)
		err = ops->open(&r.src, src, &so, &r.d);
	if (!err && r.src->count == 0)
		err = diag_set(&r.d, -ENOENT, "%s: no samples found", src);
	if (!err)
		err = prepare(&r);
	if (!err)
		err = prepare_outdir(&r);
	if (!err && o->shuffle >= 0) {
		struct rng g;

		order = malloc(r.src->count * sizeof(*order));
		if (!order) {
			err = -ENOMEM;
		} else {
			for (uint64_t i = 0; i < r.src->count; i++)
				order[i] = i;
			rng_seed(&g, (uint64_t)o->shuffle);
			rng_shuffle_u64(&g, order, r.src->count);
		}
	}
	if (!err)
		err = write_all(&r, order);
	if (!err && r.ds.records == 0)
		err = diag_set(&r.d, -ENOENT, "%s: every sample was skipped",
			       src);
	if (!err) {
		r.ds.dir = r.outdir;
		r.ds.schema = r.schema;
		r.ds.classes = r.src->classes;
		r.ds.nclasses = r.src->nclasses;
		r.ds.origin.source = strdup(src);
		r.ds.origin.source_format = strdup(ops->name);
		r.ds.origin.bytes_in = ops->bytes_in(r.src);
		r.ds.origin.shuffle_seed = o->shuffle;
		err = dataset_save(&r.ds, &r.d);
		r.ds.classes = NULL;
		r.ds.nclasses = 0;
		r.ds.dir = NULL;
	}
	if (err) {
		fprintf(stderr, "loaderctl pack: %s\n",
			r.d.msg[0] ? r.d.msg : loader_strerror(err));
		remove_partial(&r);
	} else {
		print_summary(&r, progress_now() - t0);
	}
	free(order);
	run_free(&r);
	return err ? CTL_FAIL : CTL_OK;
}

int ctl_pack(int argc, char **argv)
{
	static const char usage[] = "loaderctl pack [OPTIONS] SRC OUTDIR";
	struct pack_opts o = { 0 };
	const struct source_ops *ops = NULL;
	char splits[PACK_MAX_SPLITS][32];
	struct diag d = { { 0 } };
	int nargs, help, n, err;

	err = opts_parse(pack_table, &o, argc, argv, &nargs, &help, &d);
	if (err || help || nargs != 2) {
		if (help) {
			opts_help(
				stdout, usage,
				"Pack SRC into the dataset directory OUTDIR: an IDX directory\n"
				"(MNIST family; one dataset per split, in OUTDIR/SPLIT), an\n"
				"ImageFolder tree (CLASS/*.jpg) or a WebDataset-style tar.",
				pack_table);
			return CTL_OK;
		}
		fprintf(stderr, "loaderctl pack: %s\n",
			err ? d.msg : "expected SRC and OUTDIR");
		fprintf(stderr, "usage: %s (--help for options)\n", usage);
		return CTL_FAIL;
	}
	if (o.shard_size < 4096 || o.level < 1 || o.level > 22 ||
	    o.quality < 1 || o.quality > 100 || o.dict_size < 1024 ||
	    o.max_side > 65535) {
		fprintf(stderr,
			"loaderctl pack: out of range: --shard-size >= 4K, --level 1..22, --quality 1..100, --dict-size >= 1K, --max-side <= 65535\n");
		return CTL_FAIL;
	}
	for (unsigned i = 0; pack_sources[i]; i++) {
		if (strcmp(o.format, "auto") ?
			    !strcmp(o.format, pack_sources[i]->name) :
			    pack_sources[i]->detect(argv[0])) {
			ops = pack_sources[i];
			break;
		}
	}
	if (!ops) {
		if (strcmp(o.format, "auto"))
			fprintf(stderr,
				"loaderctl pack: --format: unknown format \"%s\" (idx, imagefolder, tar)\n",
				o.format);
		else
			fprintf(stderr,
				"loaderctl pack: %s: not an IDX directory, ImageFolder tree or tar file (or unreadable); --format names one\n",
				argv[0]);
		return CTL_FAIL;
	}
	if (!ops->splits)
		return pack_one(ops, &o, argv[0], argv[1], NULL);

	n = ops->splits(argv[0], splits, PACK_MAX_SPLITS, &d);
	if (n < 0) {
		fprintf(stderr, "loaderctl pack: %s\n", d.msg);
		return CTL_FAIL;
	}
	err = mkdir_p(argv[1]);
	if (err) {
		fprintf(stderr, "loaderctl pack: %s: %s\n", argv[1],
			strerror(-err));
		return CTL_FAIL;
	}
	for (int i = 0; i < n; i++) {
		char out[4096];
		int rc;

		if (o.split && strcmp(o.split, splits[i]))
			continue;
		snprintf(out, sizeof(out), "%s/%s", argv[1], splits[i]);
		rc = pack_one(ops, &o, argv[0], out, splits[i]);
		if (rc)
			return rc;
		err = 1;
	}
	if (o.split && err != 1) {
		fprintf(stderr, "loaderctl pack: %s has no split \"%s\"\n",
			argv[0], o.split);
		return CTL_FAIL;
	}
	return CTL_OK;
}
