/*
 * ctl_pack.c - loaderctl pack: the command line of the pack engine
 * (pack.h). It parses and checks the options, shows progress and prints
 * one summary per split; the engine does the packing.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "awscfg.h"
#include "ctl.h"
#include "loader_error.h"
#include "opts.h"
#include "pack.h"
#include "progress.h"
#include "s3ds.h"
#include "source.h"

struct pack_opts {
	const char *format;
	uint64_t shard_size;
	const char *compress;
	uint64_t level;
	bool dict;
	uint64_t dict_size;
	int64_t shuffle;
	uint64_t max_side;
	uint64_t max_pixels;
	uint64_t quality;
	const char *jpeg_restart;
	const char *classes;
	const char *ragged;
	const char *split;
	bool skip_bad;
	bool force;
	bool json;
	const char *tmp_dir;
	uint64_t part_size;
	uint64_t parallel;
	const char *aws_profile;
};

#define O(f) offsetof(struct pack_opts, f)
static const struct opt pack_table[] = {
	{ "format", 'F', OPT_STR, O(format), "auto", "FMT",
	  "source format: idx, imagefolder, tar, lmdb or auto", 0, 0, 0 },
	{ "shard-size", 's', OPT_SIZE, O(shard_size), "256M", "BYTES",
	  "target shard size; a record is never split", 0, 0, 0 },
	{ "compress", 'c', OPT_STR, O(compress), "none", "none|zstd",
	  "compression of tensor and bytes fields (for JPEGs see --jpeg-restart)",
	  0, 0, 0 },
	{ "level", 'l', OPT_U64, O(level), "3", "N", "zstd level, 1..22", 0, 0,
	  0 },
	{ "dict", 0, OPT_FLAG, O(dict), NULL, NULL,
	  "train a zstd dictionary per compressed field and store it in each shard (implies --compress zstd)",
	  0, 0, 0 },
	{ "dict-size", 0, OPT_SIZE, O(dict_size), "112K", "BYTES",
	  "largest dictionary to train", 0, 0, 0 },
	{ "shuffle", 0, OPT_I64, O(shuffle), "-1", "SEED",
	  "shuffle the samples with SEED before packing (-1: keep source order)",
	  0, 0, 0 },
	{ "max-side", 0, OPT_U64, O(max_side), "0", "N",
	  "re-encode images (JPEG, PNG) whose longer side exceeds N pixels down to N, as JPEGs (0: store as-is)",
	  0, 0, 0 },
	{ "max-pixels", 0, OPT_SIZE, O(max_pixels), "0", "N",
	  "re-encode images of more than N pixels (K, M, G suffixes) scaled down to at most N, aspect kept, as JPEGs (0: store as-is); with this or --max-side, images up to 1G pixels are decoded to be scaled",
	  0, 0, 0 },
	{ "quality", 0, OPT_U64, O(quality), "90", "N",
	  "JPEG quality when re-encoding", 0, 0, 0 },
	{ "jpeg-restart", 0, OPT_STR, O(jpeg_restart), "1", "N|off",
	  "transcode JPEGs losslessly to baseline with a restart marker every N MCUs (1..64) and optimal Huffman tables, so that a crop decodes from its own segments; off: store them as they are",
	  0, 0, 0 },
	{ "classes", 0, OPT_STR, O(classes), NULL, "A,B,...",
	  "class names, in label order (IDX files carry none)", 0, 0, 0 },
	{ "ragged", 0, OPT_STR, O(ragged), NULL, "F,G,...",
	  "tar: .npy fields whose first dimension varies (tokens, boxes): stored as ragged tensors [*,...], their other dimensions and dtype still the same in every sample",
	  0, 0, 0 },
	{ "split", 0, OPT_STR, O(split), NULL, "NAME",
	  "pack only this split of a source that has several (IDX: train, test)",
	  0, 0, 0 },
	{ "skip-bad", 0, OPT_FLAG, O(skip_bad), NULL, NULL,
	  "skip samples that cannot be read or decoded (each is named) instead of stopping",
	  0, 0, 0 },
	{ "force", 'f', OPT_FLAG, O(force), NULL, NULL,
	  "replace a dataset already in OUTDIR (or at the s3:// URL)", 0, 0,
	  0 },
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL,
	  "print the summary as one JSON object per split", 0, 0, 0 },
	{ "tmp-dir", 0, OPT_STR, O(tmp_dir), NULL, "DIR",
	  "s3://: pack into a staging directory made in DIR, removed after the upload (default: $TMPDIR, else " S3DS_TMP_DEFAULT
	  ")",
	  0, 0, 0 },
	{ "part-size", 0, OPT_SIZE, O(part_size), "64M", "BYTES",
	  "s3://: upload a shard larger than this as a multipart upload, in parts of this size (5M..5G)",
	  5.0 * 1024 * 1024, 5.0 * 1024 * 1024 * 1024, 0 },
	{ "parallel", 0, OPT_U64, O(parallel), "8", "N",
	  "s3://: requests in flight at once (shards and parts)", 1, 64, 0 },
	{ "aws-profile", 0, OPT_STR, O(aws_profile), NULL, "NAME",
	  "s3://: the AWS profile whose credentials, region, endpoint and addressing to use (default: $AWS_PROFILE, else $AWS_DEFAULT_PROFILE, else default)",
	  0, 0, 0 },
	OPT_END,
};
#undef O

/* Datasets one pack may write (an IDX source's splits). */
#define PACK_VIEW_MAX 16

/* What the progress callback needs: the bar and how to print summaries. */
struct pack_view {
	bool json;
	bool bar_on; /* between PACK_BEGIN and PACK_DONE or a failure */
	struct progress bar;
	/*
	 * An s3:// pack: the staging directory, shown as the URL, and the
	 * datasets packed in it (relative to it; "" for itself).
	 */
	const char *stage, *url;
	char packed[PACK_VIEW_MAX][64];
	size_t npacked;
};

static bool left_any(const struct source_left *l);

static void print_summary(const struct pack_progress *pg,
			  const struct pack_view *v)
{
	const struct pack_stats *st = pg->stats;
	bool json = v->json;
	char outdir[PATH_MAX];
	double ratio = st->bytes_out ?
			       (double)st->bytes_in / (double)st->bytes_out :
			       0;
	double grow = st->jpeg_bytes_before ?
			      100.0 * ((double)st->jpeg_bytes_after /
					       (double)st->jpeg_bytes_before -
				       1) :
			      0;
	char a[32], b[32];

	s3ds_subst(outdir, sizeof(outdir), pg->outdir, v->stage, v->url);
	if (json) {
		json_t *j = json_pack(
			"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f}",
			"split", pg->split ? pg->split : "", "dataset", outdir,
			"samples", (json_int_t)st->records, "skipped",
			(json_int_t)st->skipped, "shards",
			(json_int_t)st->shards, "bytes_in",
			(json_int_t)st->bytes_in, "bytes_out",
			(json_int_t)st->bytes_out, "ratio", ratio, "seconds",
			st->seconds);
		char *s;

		if (j && (st->jpeg_transcoded || st->jpeg_as_is))
			json_object_set_new(
				j, "jpeg_restart",
				json_pack("{s:I, s:I, s:I, s:I, s:f}",
					  "transcoded",
					  (json_int_t)st->jpeg_transcoded,
					  "as_is", (json_int_t)st->jpeg_as_is,
					  "bytes_before",
					  (json_int_t)st->jpeg_bytes_before,
					  "bytes_after",
					  (json_int_t)st->jpeg_bytes_after,
					  "size_change_pct", grow));
		if (j && st->png)
			json_object_set_new(j, "png",
					    json_integer((json_int_t)st->png));
		if (j && left_any(&st->left))
			json_object_set_new(
				j, "not_packed",
				json_pack("{s:I, s:I, s:I, s:s, s:s, s:s}",
					  "hidden", (json_int_t)st->left.hidden,
					  "not_image",
					  (json_int_t)st->left.not_image,
					  "unsupported",
					  (json_int_t)st->left.unsupported,
					  "unsupported_ext",
					  st->left.unsupported_ext,
					  "empty_classes",
					  st->left.empty_classes,
					  "hidden_classes",
					  st->left.hidden_classes));
		s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER |
					  CTL_JSON_REAL);

		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(j);
		return;
	}
	printf("packed %" PRIu64 " samples into %" PRIu32
	       " shard%s in %s: %s in, %s out, ratio %.2f, %.2f s (%.0f samples/s)",
	       st->records, st->shards, st->shards == 1 ? "" : "s", outdir,
	       progress_bytes((double)st->bytes_in, a, sizeof(a)),
	       progress_bytes((double)st->bytes_out, b, sizeof(b)), ratio,
	       st->seconds,
	       st->seconds > 0 ? (double)st->records / st->seconds : 0);
	if (st->skipped)
		printf(", %" PRIu64 " skipped", st->skipped);
	if (st->jpeg_transcoded || st->jpeg_as_is)
		printf("; JPEGs: %" PRIu64
		       " with restart segments (%+.2f %% in size), %" PRIu64
		       " stored as they were",
		       st->jpeg_transcoded, grow, st->jpeg_as_is);
	if (st->png)
		printf("; %" PRIu64 " PNG%s stored as they were", st->png,
		       st->png == 1 ? "" : "s");
	if (st->left.hidden || st->left.not_image || st->left.unsupported)
		printf("; not packed: %" PRIu64 " hidden, %" PRIu64
		       " not images, %" PRIu64
		       " images of formats pack cannot store%s%s%s",
		       st->left.hidden, st->left.not_image,
		       st->left.unsupported,
		       st->left.unsupported_ext[0] ? " (" : "",
		       st->left.unsupported_ext,
		       st->left.unsupported_ext[0] ? ")" : "");
	printf("\n");
}

static bool left_any(const struct source_left *l)
{
	return l->hidden || l->not_image || l->unsupported ||
	       l->empty_classes[0] || l->hidden_classes[0];
}

/*
 * What torchvision's ImageFolder would do otherwise, on stderr: a class
 * directory without images stays a class here, and a hidden directory
 * (.ipynb_checkpoints) is no class here but one there, so that every
 * label after it differs.
 */
static void warn_left(const struct source_left *l, const char *outdir)
{
	if (l->empty_classes[0])
		fprintf(stderr,
			"loaderctl pack: warning: %s: class directories without an image, kept as classes with no sample (torchvision's ImageFolder refuses such a tree): %s\n",
			outdir, l->empty_classes);
	if (l->hidden_classes[0])
		fprintf(stderr,
			"loaderctl pack: warning: %s: hidden directories are not classes here, but torchvision's ImageFolder counts them, so its labels differ: %s\n",
			outdir, l->hidden_classes);
}

static void bar_end(struct pack_view *v)
{
	if (v->bar_on)
		progress_end(&v->bar);
	v->bar_on = false;
}

static int on_progress(const struct pack_progress *pg, void *arg)
{
	struct pack_view *v = arg;

	/* An s3:// pack stops on a signal, to remove its staging directory. */
	if (v->stage && s3ds_interrupted())
		return -EINTR;
	switch (pg->event) {
	case PACK_BEGIN:
		bar_end(v);
		progress_start(&v->bar, pg->split ? pg->split : "pack",
			       "samples", pg->total);
		v->bar_on = true;
		break;
	case PACK_SAMPLE: progress_add(&v->bar, 1); break;
	case PACK_SKIP:
		/* Erase the bar so the line stands alone; the next sample redraws it. */
		progress_end(&v->bar);
		fprintf(stderr, "loaderctl pack: skipped %s\n", pg->msg);
		break;
	case PACK_ASIS:
		progress_end(&v->bar);
		fprintf(stderr,
			"loaderctl pack: stored as it is, without restart segments: %s\n",
			pg->msg);
		break;
	case PACK_NOTE:
		bar_end(v);
		fprintf(stderr, "loaderctl pack: %s\n", pg->msg);
		break;
	case PACK_DONE:
		bar_end(v);
		print_summary(pg, v);
		warn_left(&pg->stats->left, pg->outdir);
		if (v->stage && v->npacked < PACK_VIEW_MAX &&
		    !strncmp(pg->outdir, v->stage, strlen(v->stage))) {
			const char *rel = pg->outdir + strlen(v->stage);

			snprintf(v->packed[v->npacked++], sizeof(v->packed[0]),
				 "%s", *rel == '/' ? rel + 1 : rel);
		}
		break;
	}
	return 0;
}

int ctl_parse_restart(const char *prog, const char *s, uint32_t *out)
{
	char *end;
	unsigned long n;

	if (!strcmp(s, "off")) {
		*out = 0;
		return CTL_OK;
	}
	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || end == s || *end || n < 1 || n > PACK_JPEG_RESTART_MAX ||
	    s[0] < '0' || s[0] > '9') {
		fprintf(stderr,
			"%s: --jpeg-restart: \"%s\" is neither off nor 1..%u MCUs\n",
			prog, s, PACK_JPEG_RESTART_MAX);
		return CTL_FAIL;
	}
	*out = (uint32_t)n;
	return CTL_OK;
}

/*
 * Pack into a staging directory, then store it at url: every shard, then
 * the manifests. The checks that need no packing (the URL, the
 * credentials, the bucket, a dataset already there) come first, so that
 * a long pack is not thrown away for them.
 */
static int pack_s3(const struct pack_opts *o, struct pack_params *p,
		   struct pack_view *v, const char *url)
{
	struct s3ds_opts so = {
		.profile = o->aws_profile,
		.tmp_dir = o->tmp_dir,
		.parallel = (unsigned)o->parallel,
		.part_bytes = o->part_size,
	};
	char stage[PATH_MAX] = "", splits[PACK_VIEW_MAX][32], msg[DIAG_MAX];
	const char *subs[PACK_VIEW_MAX];
	struct diag d = { "" };
	struct s3ds *s = NULL;
	struct s3ds_xfer x;
	bool pushing = false, force = p->force;
	int n = 1, err, rc = CTL_FAIL;

	err = s3ds_open(&s, url, &so, &d);
	if (err)
		goto out;
	/* The datasets the pack will write: one per split packed. */
	splits[0][0] = '\0';
	if (p->format->splits) {
		n = p->format->splits(p->src, splits, PACK_VIEW_MAX, &d);
		if (n < 0) {
			err = n;
			goto out;
		}
	}
	for (int i = 0; i < n; i++) {
		if (p->format->splits && p->split &&
		    strcmp(p->split, splits[i]))
			continue;
		err = s3ds_check_target(s, splits[i], p->force, &d);
		if (err)
			goto out;
	}
	s3ds_catch_signals();
	err = s3ds_stage(s, stage, sizeof(stage), &d);
	if (err)
		goto out;
	p->outdir = stage;
	p->force = false; /* the staging directory is new and empty */
	v->stage = stage;
	v->url = s3ds_url(s);
	err = pack_run(p, &d);
	bar_end(v);
	if (!err && s3ds_interrupted())
		err = -EINTR;
	if (err)
		goto out;
	for (size_t i = 0; i < v->npacked; i++)
		subs[i] = v->packed[i];
	pushing = true;
	err = s3ds_push(s, stage, subs, v->npacked, force, &x, &d);
	if (err)
		goto out;
	if (o->json) {
		json_t *j =
			json_pack("{s:s, s:I, s:I, s:f, s:I, s:I}", "uploaded",
				  s3ds_url(s), "objects", (json_int_t)x.objects,
				  "bytes", (json_int_t)x.bytes, "seconds",
				  x.seconds, "requests", (json_int_t)x.requests,
				  "retries", (json_int_t)x.retries);
		char *t;

		if (j && (x.removed || x.left))
			json_object_set_new(
				j, "replaced",
				json_pack("{s:I, s:I}", "shards_removed",
					  (json_int_t)x.removed, "shards_left",
					  (json_int_t)x.left));
		t = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER |
					  CTL_JSON_REAL);
		if (t)
			printf("%s\n", t);
		free(t);
		json_decref(j);
	} else {
		s3ds_print_xfer(stdout, "uploaded", "to", s3ds_url(s), &x);
		if (x.removed)
			printf("removed %" PRIu64
			       " shard%s of the dataset it replaced\n",
			       x.removed, x.removed == 1 ? "" : "s");
	}
	if (x.left)
		fprintf(stderr,
			"loaderctl pack: %" PRIu64
			" shard%s of the replaced dataset could not be deleted and stay%s in the store, named by nothing (first: %s)\n",
			x.left, x.left == 1 ? "" : "s", x.left == 1 ? "s" : "",
			x.why);
	rc = CTL_OK;
out:
	if ((err == -EINTR || (err && s3ds_interrupted())) && !pushing)
		fprintf(stderr,
			"loaderctl pack: interrupted before the upload; nothing was stored\n");
	else if (err == -EINTR || (err && s3ds_interrupted()))
		fprintf(stderr,
			"loaderctl pack: interrupted during the upload; a dataset whose manifest.json was not stored is not there (its shards stored so far stay, named by nothing)\n");
	else if (err)
		fprintf(stderr, "loaderctl pack: %s\n",
			s3ds_subst(msg, sizeof(msg),
				   d.msg[0] ? d.msg : loader_strerror(err),
				   stage, s ? s3ds_url(s) : url));
	s3ds_unstage(stage);
	s3ds_free(s);
	s3ds_reraise();
	return rc;
}

int ctl_pack(int argc, char **argv)
{
	static const char usage[] =
		"loaderctl pack [OPTIONS] SRC OUTDIR|s3://BUCKET[/PREFIX]";
	struct pack_opts o = { 0 };
	struct pack_view view = { 0 };
	struct pack_params p;
	struct diag d = { { 0 } };
	uint32_t restart;
	int nargs, help, err;

	err = opts_parse(pack_table, &o, argc, argv, &nargs, &help, &d);
	if (err || help || nargs != 2) {
		if (help) {
			opts_help(
				stdout, usage,
				"Pack SRC into the dataset directory OUTDIR: an IDX directory\n"
				"(MNIST family; one dataset per split, in OUTDIR/SPLIT), an\n"
				"ImageFolder tree (CLASS/*.jpg) or a WebDataset-style tar.\n"
				"To an s3:// URL: packed in a staging directory, then every\n"
				"shard is uploaded, and manifest.json last.",
				pack_table);
			return CTL_OK;
		}
		fprintf(stderr, "loaderctl pack: %s\n",
			err ? d.msg : "expected SRC and OUTDIR");
		fprintf(stderr, "usage: %s (--help for options)\n", usage);
		return CTL_FAIL;
	}
	if (o.shard_size < PACK_SHARD_SIZE_MIN || o.level < PACK_LEVEL_MIN ||
	    o.level > PACK_LEVEL_MAX || o.quality < PACK_QUALITY_MIN ||
	    o.quality > PACK_QUALITY_MAX || o.dict_size < PACK_DICT_SIZE_MIN ||
	    o.max_side > PACK_MAX_SIDE_MAX) {
		fprintf(stderr,
			"loaderctl pack: out of range: --shard-size >= 4K, --level 1..22, --quality 1..100, --dict-size >= 1K, --max-side <= 65535\n");
		return CTL_FAIL;
	}
	/* --dict implies zstd, whatever --compress says. */
	if (!o.dict && strcmp(o.compress, "none") &&
	    strcmp(o.compress, "zstd")) {
		fprintf(stderr,
			"loaderctl pack: --compress: \"%s\" is neither none nor zstd\n",
			o.compress);
		return CTL_FAIL;
	}
	if (ctl_parse_restart("loaderctl pack", o.jpeg_restart, &restart))
		return CTL_FAIL;
	if (aws_is_url(argv[0])) {
		fprintf(stderr,
			"loaderctl pack: %s: packing from an object store is not supported; fetch the source first\n",
			argv[0]);
		return CTL_FAIL;
	}
	p = (struct pack_params){
		.format = pack_source_find(o.format, argv[0]),
		.src = argv[0],
		.outdir = argv[1],
		.split = o.split,
		.classes = o.classes,
		.ragged = o.ragged,
		.shard_size = o.shard_size,
		.compress = strcmp(o.compress, "zstd") ? PACK_COMPRESS_NONE :
							 PACK_COMPRESS_ZSTD,
		.level = (int)o.level,
		.dict = o.dict,
		.dict_size = o.dict_size,
		.shuffle = o.shuffle,
		.max_side = o.max_side,
		.max_pixels = o.max_pixels,
		.quality = o.quality,
		.jpeg_restart = restart,
		.skip_bad = o.skip_bad,
		.force = o.force,
		.progress = on_progress,
		.arg = &view,
	};
	if (!p.format) {
		if (strcmp(o.format, "auto"))
			fprintf(stderr,
				"loaderctl pack: --format: unknown format \"%s\" (idx, imagefolder, tar, lmdb)\n",
				o.format);
		else
			fprintf(stderr,
				"loaderctl pack: %s: not an IDX directory, ImageFolder tree, tar file or LMDB database (or unreadable); --format names one\n",
				argv[0]);
		return CTL_FAIL;
	}
	view.json = o.json;
	if (aws_is_url(argv[1]))
		return pack_s3(&o, &p, &view, argv[1]);
	err = pack_run(&p, &d);
	bar_end(&view);
	if (err) {
		fprintf(stderr, "loaderctl pack: %s\n",
			d.msg[0] ? d.msg : loader_strerror(err));
		return CTL_FAIL;
	}
	return CTL_OK;
}
