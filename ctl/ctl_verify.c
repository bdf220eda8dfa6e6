/*
 * ctl_verify.c - loaderctl verify: every record of a dataset or shard.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "awscfg.h"
#include "ctl.h"
#include "dataset.h"
#include "lmdbds.h"
#include "loader_error.h"
#include "opts.h"
#include "progress.h"
#include "s3ds.h"
#include "shard.h"
#include "verify.h"
#include "wds.h"

struct verify_cli {
	bool quick;
	bool json;
	uint64_t max_report;
	uint64_t max_pixels;
	const char *tmp_dir;
	uint64_t parallel;
	const char *aws_profile;
};

#define O(f) offsetof(struct verify_cli, f)
static const struct opt verify_table[] = {
	{ "quick", 'q', OPT_FLAG, O(quick), NULL, NULL,
	  "check structure and checksums only; do not decode fields", 0, 0, 0 },
	{ "max-report", 0, OPT_U64, O(max_report), "100", "N",
	  "name at most N bad records per shard (all are counted)", 0, 0, 0 },
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL,
	  "print the summary as a JSON object", 0, 0, 0 },
	{ "max-pixels", 0, OPT_SIZE, O(max_pixels), "64M", "N",
	  "largest JPEG (width x height) to decode, as loaderd --max-pixels; larger ones are bad records",
	  0, 0, 0 },
	S3DS_FETCH_OPTIONS,
	OPT_END,
};
#undef O

struct verify_run {
	const struct verify_cli *o;
	struct progress pg;
	struct verify_stats st;
	uint64_t bad_shards, shards, reported;
	uint64_t not_datasets; /* arguments that are no dataset or shard */
	json_t *bad;	       /* --json: list of problems */
	/*
	 * An s3:// dataset being checked: its staging directory, shown as
	 * the URL in every report; the seconds its fetches took (not
	 * counted in the verify rate); whether a store could not be read.
	 */
	const char *stage, *url;
	double fetch_s;
	bool failed;
};

static void report(struct verify_run *r, const char *msg)
{
	char m[PATH_MAX + DIAG_MAX];

	progress_end(&r->pg);
	s3ds_subst(m, sizeof(m), msg, r->stage, r->url);
	if (r->bad)
		json_array_append_new(r->bad, json_string(m));
	else
		printf("bad: %s\n", m);
	fflush(stdout);
}

static void on_bad(void *arg, const struct shard *sh, uint64_t index, int err,
		   const char *msg)
{
	struct verify_run *r = arg;

	if (r->reported++ < r->o->max_report)
		report(r, msg);
	else if (r->reported == r->o->max_report + 1)
		report(r, "... more bad records in this shard (--max-report)");
}

static void on_progress(void *arg, uint64_t bytes)
{
	struct verify_run *r = arg;

	progress_add(&r->pg, bytes);
}

/* Verify one open shard; I/O errors make the shard bad. */
static void verify_one(struct verify_run *r, struct verify_ctx *vc,
		       struct shard *sh, int fd)
{
	struct verify_opts vo = {
		.decode = !r->o->quick,
		.max_pixels = r->o->max_pixels,
		.bad = on_bad,
		.progress = on_progress,
		.arg = r,
	};
	uint64_t bad0 = r->st.bad;
	struct diag d;
	int err;

	r->reported = 0;
	r->shards++;
	err = verify_shard(vc, sh, fd, &vo, &r->st, &d);
	if (err)
		report(r, d.msg);
	if (err || r->st.bad != bad0)
		r->bad_shards++;
}

/*
 * A shard file, or a WebDataset tar read in place (scanned here into *ix,
 * which the shard needs until it is closed).
 */
static int open_file(struct verify_run *r, const char *path, int *fd,
		     struct shard **sh, struct recindex **ix)
{
	struct diag d;
	int err;

	*ix = NULL;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		diag_set(&d, -errno, "%s: %s", path, strerror(errno));
		err = -errno;
		goto bad;
	}
	if (lmdbds_detect(path)) {
		close(*fd);
		err = lmdbds_index_path(path, fd, ix, &d);
		if (!err)
			err = shard_open_wds(sh, *fd, path, *ix, &d);
		if (err) {
			recindex_free(*ix);
			*ix = NULL;
		}
		if (err && *fd < 0)
			goto bad;
	} else if (wds_is_tar(*fd, path)) {
		err = wds_index_scan(ix, *fd, path, &d);
		if (!err)
			err = shard_open_wds(sh, *fd, path, *ix, &d);
		if (err) {
			recindex_free(*ix);
			*ix = NULL;
		}
	} else {
		err = shard_open(sh, *fd, path, &d);
	}
	if (!err)
		return 0;
	close(*fd);
	*fd = -1;
bad:
	r->shards++;
	r->bad_shards++;
	report(r, d.msg);
	return err;
}

/* Verify one shard or tar file. */
static void verify_path(struct verify_run *r, struct verify_ctx *vc,
			const char *path)
{
	struct recindex *ix;
	struct shard *sh;
	int fd;

	if (open_file(r, path, &fd, &sh, &ix))
		return;
	verify_one(r, vc, sh, fd);
	shard_close(sh);
	recindex_free(ix);
	close(fd);
}

/* One argument: a shard or tar file, a dataset, a directory of tars. */
static void verify_arg(struct verify_run *r, struct verify_ctx *vc,
		       const char *arg)
{
	struct diag d;
	int err;
	struct dataset *ds = NULL;
	struct shard *sh = NULL;
	struct stat st;
	int fd = -1;

	if (stat(arg, &st)) {
		diag_set(&d, -errno, "%s: %s", arg, strerror(errno));
		report(r, d.msg);
		r->not_datasets++;
		return;
	}
	if (S_ISREG(st.st_mode)) {
		verify_path(r, vc, arg);
		return;
	}
	{
		char m[4200], **names = NULL;
		size_t n = 0;

		snprintf(m, sizeof(m), "%s/%s", arg, DSFILES_MANIFEST);
		if (access(m, F_OK) && errno == ENOENT && lmdbds_detect(arg)) {
			verify_path(r, vc, arg);
			return;
		}
		if (access(m, F_OK) && errno == ENOENT) {
			/* A directory of tars, each read in place. */
			/*
			 * Not a dataset at all: a bad argument, not a bad
			 * shard.
			 */
			if (wds_list(arg, &names, &n, &d)) {
				report(r, d.msg);
				r->not_datasets++;
				return;
			}
			for (size_t i = 0; i < n; i++) {
				snprintf(m, sizeof(m), "%s/%s", arg, names[i]);
				if (!stat(m, &st))
					r->pg.total += (uint64_t)st.st_size;
			}
			for (size_t i = 0; i < n; i++) {
				snprintf(m, sizeof(m), "%s/%s", arg, names[i]);
				verify_path(r, vc, m);
				free(names[i]);
			}
			free(names);
			return;
		}
	}
	err = dataset_load(&ds, arg, &d);
	if (err) {
		report(r, d.msg);
		r->shards++;
		r->bad_shards++;
		return;
	}
	for (uint32_t i = 0; i < ds->nshards; i++)
		r->pg.total += ds->shards[i].bytes;
	for (uint32_t i = 0; i < ds->nshards && !s3ds_interrupted(); i++) {
		char path[4200];

		err = dataset_open_shard(ds, i, &fd, &sh, &d);
		if (!err && shard_file_size(sh) != ds->shards[i].bytes)
			err = diag_set(&d, LOADER_EFORMAT,
				       "%s: %" PRIu64
				       " bytes, the manifest says %" PRIu64,
				       dataset_path(ds, ds->shards[i].file,
						    path, sizeof(path)),
				       shard_file_size(sh),
				       ds->shards[i].bytes);
		if (err) {
			r->shards++;
			r->bad_shards++;
			report(r, d.msg);
		} else {
			verify_one(r, vc, sh, fd);
		}
		shard_close(sh);
		sh = NULL;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	dataset_free(ds);
}

/*
 * A dataset (or one object) in a store: fetched whole into a staging
 * directory, checked there as a local one with the URL shown in place of
 * the directory, then removed. A dataset that is not there (its bucket
 * or its manifest missing) is a bad one, as a missing directory is; a
 * store that cannot be read (credentials, network) makes verify exit 2,
 * as it could not check.
 */
static void verify_s3(struct verify_run *r, struct verify_ctx *vc,
		      const char *url)
{
	struct s3ds_opts so = {
		.profile = r->o->aws_profile,
		.tmp_dir = r->o->tmp_dir,
		.parallel = (unsigned)r->o->parallel,
	};
	struct diag d = { "" };
	struct s3ds_got *g = malloc(sizeof(*g));
	int err;

	progress_end(&r->pg);
	if (!g) {
		report(r, "out of memory");
		r->failed = true;
		return;
	}
	err = s3ds_get(g, url, &so, &d);
	r->fetch_s += g->x.seconds;
	r->stage = g->stage;
	r->url = g->s ? s3ds_url(g->s) : url;
	if (err && s3ds_interrupted()) {
		r->failed = true;
	} else if (err) {
		report(r, d.msg);
		r->shards++;
		r->bad_shards++;
		if (err != -ENOENT && err != LOADER_EFORMAT)
			r->failed = true;
	} else {
		s3ds_print_xfer(stderr, "fetched", "from", s3ds_url(g->s),
				&g->x);
		r->url = g->shown;
		verify_arg(r, vc, g->path);
	}
	r->stage = r->url = NULL;
	s3ds_got_free(g);
	free(g);
}

int ctl_verify(int argc, char **argv)
{
	static const char usage[] =
		"loaderctl verify [OPTIONS] DATASET|SHARD|TAR|s3://BUCKET[/PREFIX]...";
	struct verify_cli o = { 0 };
	struct verify_run r = { .o = &o };
	struct verify_ctx *vc = NULL;
	struct diag d = { { 0 } };
	uint64_t total = 0;
	double t0, secs;
	int nargs, help, err;

	err = opts_parse(verify_table, &o, argc, argv, &nargs, &help, &d);
	if (err || help || nargs < 1) {
		if (help) {
			opts_help(
				stdout, usage,
				"Check every shard's header, footer and index, every record's\n"
				"length and XXH3-64 checksum, and (without --quick) decode every\n"
				"field. Each bad record is named (shard, record, offset). A tar\n"
				"(or a directory of them without a manifest) is checked as a\n"
				"stream reads it in place: its headers, labels and .npy headers,\n"
				"and (without --quick) every field decoded. An s3:// dataset\n"
				"(or object) is fetched whole into a staging directory, checked\n"
				"there and removed. Exit status: 0 all good, 1 something is\n"
				"bad, 2 could not run (or a store could not be read).",
				verify_table);
			return CTL_OK;
		}
		fprintf(stderr,
			"loaderctl verify: %s\nusage: %s (--help for options)\n",
			err ? d.msg :
			      "expected a dataset directory or shard files",
			usage);
		return CTL_FAIL;
	}
	if (verify_ctx_new(&vc)) {
		fprintf(stderr, "loaderctl verify: out of memory\n");
		return CTL_FAIL;
	}
	if (o.json)
		r.bad = json_array();
	/* Total bytes first, for the progress bar. */
	for (int a = 0; a < nargs; a++) {
		struct stat st;

		if (!stat(argv[a], &st) && S_ISREG(st.st_mode))
			total += (uint64_t)st.st_size;
	}
	t0 = progress_now();
	progress_start(&r.pg, "verify", "B", total);
	for (int a = 0; a < nargs && !s3ds_interrupted(); a++) {
		if (aws_is_url(argv[a]))
			verify_s3(&r, vc, argv[a]);
		else
			verify_arg(&r, vc, argv[a]);
	}
	progress_end(&r.pg);
	/* The rate is the check's: time spent fetching is left out. */
	secs = progress_now() - t0 - r.fetch_s;
	if (o.json) {
		json_t *j = json_pack(
			"{s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:o}",
			"records", (json_int_t)r.st.records, "bad_records",
			(json_int_t)r.st.bad, "shards", (json_int_t)r.shards,
			"bad_shards", (json_int_t)r.bad_shards, "not_datasets",
			(json_int_t)r.not_datasets, "bytes",
			(json_int_t)r.st.bytes, "seconds", secs,
			"jpeg_segmented", (json_int_t)r.st.jpeg_segmented,
			"problems", r.bad);
		char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER |
						CTL_JSON_REAL);

		printf("%s\n", s ? s : "{}");
		free(s);
		json_decref(j);
	} else {
		char a[32], b[32];

		printf("verified %" PRIu64 " records in %" PRIu64
		       " shard%s (%s in %.2f s, %s/s%s): %" PRIu64
		       " bad record%s, %" PRIu64 " bad shard%s\n",
		       r.st.records, r.shards, r.shards == 1 ? "" : "s",
		       progress_bytes((double)r.st.bytes, a, sizeof(a)), secs,
		       progress_bytes(secs > 0 ? (double)r.st.bytes / secs : 0,
				      b, sizeof(b)),
		       o.quick ? ", checksums only" : "", r.st.bad,
		       r.st.bad == 1 ? "" : "s", r.bad_shards,
		       r.bad_shards == 1 ? "" : "s");
		if (r.not_datasets)
			printf("%" PRIu64
			       " argument%s neither a dataset nor a shard\n",
			       r.not_datasets,
			       r.not_datasets == 1 ? " is" : "s are");
		if (r.st.jpeg_segmented)
			printf("restart segments of %" PRIu64
			       " JPEGs checked, every marker in place\n",
			       r.st.jpeg_segmented);
	}
	verify_ctx_free(vc);
	if (s3ds_interrupted()) {
		fprintf(stderr, "loaderctl verify: interrupted\n");
		s3ds_reraise();
	}
	if (r.failed)
		return CTL_FAIL;
	return r.st.bad || r.bad_shards || r.not_datasets ? CTL_FOUND : CTL_OK;
}
