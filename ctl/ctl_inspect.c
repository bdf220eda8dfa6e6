/*
 * ctl_inspect.c - loaderctl inspect: what a dataset or shard holds.
 *
 * Reads only manifests and shard headers and footers, so it is quick on
 * any size of dataset.
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
#include "pngd.h"
#include "progress.h"
#include "s3ds.h"
#include "shard.h"
#include "wds.h"

struct inspect_cli {
	bool json;
	bool shards;
	int64_t record; /* --record N; -1: none */
	const char *tmp_dir;
	uint64_t parallel;
	const char *aws_profile;
	/*
	 * Not options: an s3:// dataset's staging directory, and the URL
	 * shown in its place in everything printed.
	 */
	const char *stage, *url;
};

#define O(f) offsetof(struct inspect_cli, f)
static const struct opt inspect_table[] = {
	{ "shards", 's', OPT_FLAG, O(shards), NULL, NULL,
	  "list every shard of a dataset", 0, 0, 0 },
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL, "print JSON", 0, 0, 0 },
	{ "record", 'r', OPT_I64, O(record), "-1", "N",
	  "show record N of a dataset (counted over its shards from 0) or shard: where it lies, its source name, and each field",
	  -1, 9.2e18, 0 },
	S3DS_FETCH_OPTIONS,
	OPT_END,
};
#undef O

/* Room for a message or path with a staging directory shown as a URL. */
#define SHOWN_MAX (PATH_MAX + DIAG_MAX)

/* s, with an s3:// dataset's staging directory shown as its URL. */
static const char *shown(const struct inspect_cli *o, const char *s, char *buf)
{
	return s3ds_subst(buf, SHOWN_MAX, s, o->stage, o->url);
}

/* What the footers of a set of shards add up to. */
struct inspect_sum {
	const struct schema *schema;
	struct shard_field_stats f[SCHEMA_MAX_FIELDS];
	size_t dict[SCHEMA_MAX_FIELDS];
	uint64_t records, bytes;
};

static void add_shard(struct inspect_sum *s, const struct shard *sh)
{
	s->schema = shard_schema(sh);
	for (uint32_t k = 0; k < s->schema->nfields; k++) {
		struct shard_field_stats st = shard_stats(sh, k);
		size_t len;

		s->f[k].raw_bytes += st.raw_bytes;
		s->f[k].stored_bytes += st.stored_bytes;
		shard_dict(sh, k, &len);
		s->dict[k] = len;
	}
	s->records += shard_count(sh);
	s->bytes += shard_file_size(sh);
}

static double ratio(uint64_t raw, uint64_t stored)
{
	return stored ? (double)raw / (double)stored : 1.0;
}

static json_t *fields_json(const struct inspect_sum *s)
{
	json_t *a = json_array();
	char text[FIELD_TEXT_MAX];

	for (uint32_t k = 0; s->schema && k < s->schema->nfields; k++) {
		field_format(&s->schema->f[k], text, sizeof(text));
		json_array_append_new(
			a, json_pack("{s:s, s:s, s:I, s:I, s:f, s:I}", "name",
				     s->schema->f[k].name, "schema", text,
				     "raw_bytes", (json_int_t)s->f[k].raw_bytes,
				     "stored_bytes",
				     (json_int_t)s->f[k].stored_bytes, "ratio",
				     ratio(s->f[k].raw_bytes,
					   s->f[k].stored_bytes),
				     "dict_bytes", (json_int_t)s->dict[k]));
	}
	return a;
}

static void print_fields(const struct inspect_sum *s)
{
	char text[FIELD_TEXT_MAX], a[32], b[32];

	printf("fields:\n");
	for (uint32_t k = 0; s->schema && k < s->schema->nfields; k++) {
		field_format(&s->schema->f[k], text, sizeof(text));
		printf("  %-40s %10s raw %10s stored  ratio %5.2f", text,
		       progress_bytes((double)s->f[k].raw_bytes, a, sizeof(a)),
		       progress_bytes((double)s->f[k].stored_bytes, b,
				      sizeof(b)),
		       ratio(s->f[k].raw_bytes, s->f[k].stored_bytes));
		if (s->dict[k])
			printf("  dictionary %zu B", s->dict[k]);
		printf("\n");
	}
}

static uint64_t total_raw(const struct inspect_sum *s)
{
	uint64_t n = 0;

	for (uint32_t k = 0; s->schema && k < s->schema->nfields; k++)
		n += s->f[k].raw_bytes;
	return n;
}

static int inspect_shard(const struct inspect_cli *o, const char *path)
{
	char sb[SHOWN_MAX];
	struct inspect_sum s = { 0 };
	struct shard *sh;
	struct diag d;
	char a[32];
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "loaderctl inspect: %s: %s\n",
			shown(o, path, sb), strerror(errno));
		return CTL_FAIL;
	}
	err = shard_open(&sh, fd, path, &d);
	if (err) {
		fprintf(stderr, "loaderctl inspect: %s\n", shown(o, d.msg, sb));
		close(fd);
		return CTL_FAIL;
	}
	add_shard(&s, sh);
	if (o->json) {
		json_t *j = json_pack("{s:s, s:s, s:i, s:I, s:I, s:f, s:o}",
				      "shard", shown(o, path, sb), "format",
				      "loaderd-shard", "version", SHARD_VERSION,
				      "records", (json_int_t)s.records, "bytes",
				      (json_int_t)s.bytes, "ratio",
				      ratio(total_raw(&s), s.bytes), "fields",
				      fields_json(&s));
		json_dumpf(j, stdout,
			   JSON_INDENT(2) | JSON_PRESERVE_ORDER |
				   CTL_JSON_REAL);
		printf("\n");
		json_decref(j);
	} else {
		printf("shard:    %s\n", shown(o, path, sb));
		printf("format:   loaderd shard v%d\n", SHARD_VERSION);
		printf("records:  %" PRIu64 "\n", s.records);
		printf("size:     %s (%" PRIu64 " bytes), ratio %.2f\n",
		       progress_bytes((double)s.bytes, a, sizeof(a)), s.bytes,
		       ratio(total_raw(&s), s.bytes));
		print_fields(&s);
	}
	shard_close(sh);
	close(fd);
	return CTL_OK;
}

/*
 * WebDataset tars, read in place as a stream reads them: one .tar file
 * (dir false: path is it), or every .tar of a directory without a
 * manifest. Each is scanned here (the daemon keeps its index; this tool
 * keeps nothing).
 */
static int inspect_tars(const struct inspect_cli *o, const char *path, bool dir)
{
	char sb[SHOWN_MAX];
	struct inspect_sum s = { 0 };
	struct recindex **ix = NULL;
	struct shard **sh = NULL;
	char **names = NULL, a[32];
	size_t n = 0;
	struct diag d = { "" };
	int ret = CTL_FAIL, err;
	bool lmdb = false;

	if (lmdbds_detect(path)) {
		names = malloc(sizeof(*names));
		err = names && (names[0] = strdup(path)) ? 0 : -ENOMEM;
		n = err ? 0 : 1;
		if (err)
			diag_set(&d, err, "out of memory");
		lmdb = true;
	} else if (dir) {
		err = wds_list(path, &names, &n, &d);
	} else {
		names = malloc(sizeof(*names));
		err = names && (names[0] = strdup(path)) ? 0 : -ENOMEM;
		n = err ? 0 : 1;
		if (err)
			diag_set(&d, err, "out of memory");
	}
	if (err) {
		fprintf(stderr, "loaderctl inspect: %s\n", shown(o, d.msg, sb));
		free(names);
		return CTL_FAIL;
	}
	ix = calloc(n, sizeof(*ix));
	sh = calloc(n, sizeof(*sh));
	if (!ix || !sh)
		goto out;
	for (size_t i = 0; i < n; i++) {
		char file[4200];
		int fd;

		snprintf(file, sizeof(file), "%s%s%s", dir && !lmdb ? path : "",
			 dir && !lmdb ? "/" : "", names[i]);
		if (lmdb) {
			err = lmdbds_index_path(file, &fd, &ix[i], &d);
			if (err) {
				fprintf(stderr, "loaderctl inspect: %s\n",
					shown(o, d.msg, sb));
				goto out;
			}
		} else {
			fd = open(file, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				fprintf(stderr, "loaderctl inspect: %s: %s\n",
					shown(o, file, sb), strerror(errno));
				goto out;
			}
			err = wds_index_scan(&ix[i], fd, file, &d);
		}
		if (!err)
			err = shard_open_wds(&sh[i], fd, file, ix[i], &d);
		close(fd); /* the index and counts are all inspect needs */
		if (err) {
			fprintf(stderr, "loaderctl inspect: %s\n",
				shown(o, d.msg, sb));
			goto out;
		}
		if (i &&
		    !schema_equal(shard_schema(sh[0]), shard_schema(sh[i]))) {
			fprintf(stderr,
				"loaderctl inspect: %s: its fields differ from %s's\n",
				file, names[0]);
			goto out;
		}
		add_shard(&s, sh[i]);
	}
	if (o->json) {
		json_t *files = json_array();
		json_t *j;

		for (size_t i = 0; i < n; i++)
			json_array_append_new(
				files,
				json_pack("{s:s, s:I, s:I}", "file", names[i],
					  "samples",
					  (json_int_t)shard_count(sh[i]),
					  "bytes",
					  (json_int_t)shard_file_size(sh[i])));
		j = json_pack("{s:s, s:s, s:I, s:I, s:o, s:o}", "dataset",
			      shown(o, path, sb), "format", "webdataset-tar",
			      "samples", (json_int_t)s.records, "bytes",
			      (json_int_t)s.bytes, "fields", fields_json(&s),
			      "tars", files);
		json_dumpf(j, stdout,
			   JSON_INDENT(2) | JSON_PRESERVE_ORDER |
				   CTL_JSON_REAL);
		printf("\n");
		json_decref(j);
	} else {
		printf("dataset:  %s\n", shown(o, path, sb));
		if (lmdb)
			printf("format:   LMDB database, read in place\n");
		else
			printf("format:   WebDataset tar, read in place (%zu file%s)\n",
			       n, n == 1 ? "" : "s");
		printf("samples:  %" PRIu64 "\n", s.records);
		printf("size:     %s (%" PRIu64 " bytes)\n",
		       progress_bytes((double)s.bytes, a, sizeof(a)), s.bytes);
		print_fields(&s);
		if (o->shards)
			for (size_t i = 0; i < n; i++)
				printf("  %-30s %10" PRIu64
				       " samples %12" PRIu64 " bytes\n",
				       names[i], shard_count(sh[i]),
				       shard_file_size(sh[i]));
	}
	ret = CTL_OK;
out:
	for (size_t i = 0; i < n; i++) {
		if (sh)
			shard_close(sh[i]);
		if (ix)
			recindex_free(ix[i]);
		free(names[i]);
	}
	free(sh);
	free(ix);
	free(names);
	return ret;
}

/* How much the restart transcode changed the JPEG payloads, in per cent. */
static double restart_pct(const struct dataset_origin *o)
{
	if (!o->jpeg_bytes_before)
		return 0;
	return 100.0 *
	       ((double)o->jpeg_bytes_after / (double)o->jpeg_bytes_before - 1);
}

static bool has_jpeg(const struct schema *s)
{
	for (uint32_t k = 0; k < s->nfields; k++) {
		if (s->f[k].kind == FIELD_JPEG)
			return true;
	}
	return false;
}

static int inspect_dataset(const struct inspect_cli *o, const char *dir)
{
	char sb[SHOWN_MAX];
	struct inspect_sum s = { 0 };
	struct dataset *ds;
	struct diag d;
	char a[32], b[32];
	json_t *shards = json_array();
	int rc = CTL_OK;

	if (dataset_load(&ds, dir, &d)) {
		fprintf(stderr, "loaderctl inspect: %s\n", shown(o, d.msg, sb));
		json_decref(shards);
		return CTL_FAIL;
	}
	for (uint32_t i = 0; i < ds->nshards; i++) {
		struct shard *sh;
		int fd;

		if (dataset_open_shard(ds, i, &fd, &sh, &d)) {
			fprintf(stderr, "loaderctl inspect: %s\n",
				shown(o, d.msg, sb));
			rc = CTL_FAIL;
			goto out;
		}
		add_shard(&s, sh);
		json_array_append_new(
			shards,
			json_pack("{s:s, s:I, s:I}", "file", ds->shards[i].file,
				  "records", (json_int_t)shard_count(sh),
				  "bytes", (json_int_t)shard_file_size(sh)));
		shard_close(sh);
		close(fd);
	}
	s.schema = &ds->schema;
	if (o->json) {
		json_t *cl = json_array();
		json_t *j;

		for (uint32_t i = 0; i < ds->nclasses; i++)
			json_array_append_new(cl, json_string(ds->classes[i]));
		j = json_pack(
			"{s:s, s:s, s:i, s:I, s:I, s:I, s:f, s:o, s:o, s:o}",
			"dataset", shown(o, dir, sb), "format", DSFILES_FORMAT,
			"version", DSFILES_VERSION, "records",
			(json_int_t)s.records, "shard_count",
			(json_int_t)ds->nshards, "bytes", (json_int_t)s.bytes,
			"ratio", ratio(total_raw(&s), s.bytes), "fields",
			fields_json(&s), "classes", cl, "shards",
			json_incref(shards));
		if (ds->origin.source)
			json_object_set_new(
				j, "packed",
				json_pack("{s:s, s:s, s:I, s:I}", "source",
					  ds->origin.source, "source_format",
					  ds->origin.source_format ?
						  ds->origin.source_format :
						  "",
					  "bytes_in",
					  (json_int_t)ds->origin.bytes_in,
					  "shuffle_seed",
					  (json_int_t)ds->origin.shuffle_seed));
		if (ds->origin.jpeg_transcoded || ds->origin.jpeg_as_is) {
			json_t *r = dataset_restart_json(&ds->origin);

			if (r)
				json_object_set_new(
					r, "size_change_pct",
					json_real(restart_pct(&ds->origin)));
			json_object_set_new(j, "jpeg_restart", r);
		}
		json_dumpf(j, stdout,
			   JSON_INDENT(2) | JSON_PRESERVE_ORDER |
				   CTL_JSON_REAL);
		printf("\n");
		json_decref(j);
		goto out;
	}
	printf("dataset:  %s\n", shown(o, dir, sb));
	printf("records:  %" PRIu64 " in %" PRIu32 " shard%s\n", s.records,
	       ds->nshards, ds->nshards == 1 ? "" : "s");
	printf("size:     %s (%" PRIu64 " bytes), ratio %.2f\n",
	       progress_bytes((double)s.bytes, a, sizeof(a)), s.bytes,
	       ratio(total_raw(&s), s.bytes));
	if (ds->origin.source) {
		printf("packed:   from %s (%s), %s in, ratio %.2f",
		       ds->origin.source,
		       ds->origin.source_format ? ds->origin.source_format :
						  "?",
		       progress_bytes((double)ds->origin.bytes_in, b,
				      sizeof(b)),
		       ratio(ds->origin.bytes_in, s.bytes));
		if (ds->origin.shuffle_seed >= 0)
			printf(", shuffled with seed %" PRId64,
			       ds->origin.shuffle_seed);
		printf("\n");
	}
	if (ds->origin.jpeg_transcoded || ds->origin.jpeg_as_is)
		printf("jpeg:     %" PRIu64 " of %" PRIu64
		       " JPEGs restart-indexed (a marker every %" PRIu32
		       " MCU%s), %+.2f %% in size (%s before, %s after)\n",
		       ds->origin.jpeg_transcoded,
		       ds->origin.jpeg_transcoded + ds->origin.jpeg_as_is,
		       ds->origin.jpeg_restart,
		       ds->origin.jpeg_restart == 1 ? "" : "s",
		       restart_pct(&ds->origin),
		       progress_bytes((double)ds->origin.jpeg_bytes_before, a,
				      sizeof(a)),
		       progress_bytes((double)ds->origin.jpeg_bytes_after, b,
				      sizeof(b)));
	else if (has_jpeg(&ds->schema))
		printf("jpeg:     stored as they were (packed without restart segments)\n");
	print_fields(&s);
	if (ds->nclasses) {
		printf("classes:  %" PRIu32 ":", ds->nclasses);
		for (uint32_t i = 0; i < ds->nclasses && i < 20; i++)
			printf("%s %u=%s", i ? "," : "", i, ds->classes[i]);
		if (ds->nclasses > 20)
			printf(", ... (%" PRIu32 " more)", ds->nclasses - 20);
		printf("\n");
	} else {
		printf("classes:  none recorded\n");
	}
	if (o->shards) {
		printf("shards:\n");
		for (uint32_t i = 0; i < ds->nshards; i++)
			printf("  %-24s %10" PRIu64 " records %10s\n",
			       ds->shards[i].file, ds->shards[i].records,
			       progress_bytes((double)ds->shards[i].bytes, a,
					      sizeof(a)));
	}
out:
	json_decref(shards);
	dataset_free(ds);
	return rc;
}

/* A dataset directory, a directory of tars, a tar, an LMDB or a shard. */
/*
 * One field of a record, as text: a key or other bytes as text when
 * printable, an image's format and size, a small tensor's values.
 */
static void field_text(const struct field *fd, const struct shard_field *f,
		       char *out, size_t n)
{
	const unsigned char *p = f->data;

	if (fd->comp != COMP_NONE) {
		snprintf(out, n, "%" PRIu32 " bytes, compressed", f->len);
		return;
	}
	if (fd->kind == FIELD_JPEG) {
		struct pngd_info pi;

		if (pngd_header(p, f->len, &pi, NULL) == 0)
			snprintf(out, n,
				 "PNG %" PRIu32 "x%" PRIu32 ", %" PRIu32
				 " bytes",
				 pi.width, pi.height, f->len);
		else
			snprintf(out, n, "%s, %" PRIu32 " bytes",
				 f->len > 2 && p[0] == 0xff && p[1] == 0xd8 ?
					 "JPEG" :
					 "not a JPEG",
				 f->len);
		return;
	}
	if (fd->kind == FIELD_TENSOR && fd->dtype == DT_I64 && f->len == 8) {
		uint64_t v = 0;

		for (int b = 7; b >= 0; b--)
			v = v << 8 | p[b];
		snprintf(out, n, "%" PRId64, (int64_t)v);
		return;
	}
	if (fd->kind == FIELD_BYTES) {
		char key[256];
		bool text = f->len < sizeof(key);

		for (uint32_t i = 0; text && i < f->len; i++)
			text = p[i] >= 0x20 && p[i] < 0x7f;
		if (text) {
			memcpy(key, p, f->len);
			key[f->len] = '\0';
			snprintf(out, n, "\"%s\"", key);
			return;
		}
	}
	snprintf(out, n, "%" PRIu32 " bytes", f->len);
}

/*
 * Record r of a dataset (rec over all its shards) or shard: its shard,
 * index there and place, its checksum checked, its source and fields.
 */
static int inspect_record(const struct inspect_cli *o, const char *path,
			  uint64_t rec)
{
	struct dataset *ds = NULL;
	struct shard *sh = NULL;
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct shard_rec r;
	const struct schema *sc;
	char sb[SHOWN_MAX], file[PATH_MAX], text[320];
	struct diag d = { "" };
	unsigned char *buf = NULL;
	uint64_t in = rec;
	struct stat st;
	int fd = -1, err, rc = CTL_FAIL;

	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		err = dataset_load(&ds, path, &d);
		if (err)
			goto fail;
		for (uint32_t i = 0;; i++) {
			if (i == ds->nshards) {
				diag_set(&d, LOADER_ERANGE,
					 "%s: record %" PRIu64
					 " of a dataset of %" PRIu64
					 " records (counted from 0)",
					 path, rec, ds->records);
				goto fail;
			}
			if (in < ds->shards[i].records) {
				err = dataset_open_shard(ds, i, &fd, &sh, &d);
				if (err)
					goto fail;
				break;
			}
			in -= ds->shards[i].records;
		}
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			diag_set(&d, -errno, "%s: %s", path, strerror(errno));
			goto fail;
		}
		err = shard_open(&sh, fd, path, &d);
		if (err)
			goto fail;
	}
	if (shard_rec(sh, in, &r)) {
		diag_set(&d, LOADER_ERANGE,
			 "%s: record %" PRIu64 " of a shard of %" PRIu64
			 " records (counted from 0)",
			 shard_name(sh), in, shard_count(sh));
		goto fail;
	}
	buf = malloc(r.length ? r.length : 1);
	if (!buf) {
		diag_set(&d, -ENOMEM, "out of memory");
		goto fail;
	}
	sc = shard_schema(sh);
	snprintf(file, sizeof(file), "%s", shown(o, shard_name(sh), sb));
	err = shard_read_record(sh, in, buf, r.length, f, &d);
	printf("record:   %" PRIu64 "%s, in %s as its record %" PRIu64
	       ", %" PRIu32 " bytes at offset %" PRIu64 "\n",
	       rec, ds ? " of the dataset" : "", file, in, r.length, r.offset);
	if (err) {
		printf("checksum: bad: %s\n", shown(o, d.msg, sb));
		/* Read, but bad: its fields may still say where it came from. */
		if ((err == LOADER_ECHECKSUM || err == LOADER_EFORMAT) &&
		    shard_record_key(sh, in, buf, r.length, text, sizeof(text)))
			printf("source:   %s\n", text);
		rc = CTL_FOUND;
		goto out;
	}
	printf("checksum: ok\n");
	if (shard_key_text(sc, f, text, sizeof(text)))
		printf("source:   %s\n", text);
	printf("fields:\n");
	for (uint32_t k = 0; k < sc->nfields; k++) {
		char kind[FIELD_TEXT_MAX];

		field_format(&sc->f[k], kind, sizeof(kind));
		field_text(&sc->f[k], &f[k], text, sizeof(text));
		printf("  %-40s %s\n", kind, text);
	}
	rc = CTL_OK;
	goto out;
fail:
	fprintf(stderr, "loaderctl inspect: %s\n", shown(o, d.msg, sb));
out:
	free(buf);
	shard_close(sh);
	if (fd >= 0)
		close(fd);
	dataset_free(ds);
	return rc;
}

static int inspect_path(const struct inspect_cli *o, const char *path)
{
	struct stat st;

	if (o->record >= 0)
		return inspect_record(o, path, (uint64_t)o->record);
	if (stat(path, &st)) {
		fprintf(stderr, "loaderctl inspect: %s: %s\n", path,
			strerror(errno));
		return CTL_FAIL;
	}
	if (S_ISDIR(st.st_mode)) {
		char m[4200];

		snprintf(m, sizeof(m), "%s/%s", path, DSFILES_MANIFEST);
		if (access(m, F_OK) && errno == ENOENT)
			return inspect_tars(o, path, true);
		return inspect_dataset(o, path);
	}
	{
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		bool tar = fd >= 0 && wds_is_tar(fd, path);

		if (fd >= 0)
			close(fd);
		if (tar || lmdbds_detect(path))
			return inspect_tars(o, path, false);
	}
	return inspect_shard(o, path);
}

/*
 * A dataset (or one object) in a store: fetched whole into a staging
 * directory, inspected there as a local one, with the URL shown in place
 * of the directory, then removed.
 */
static int inspect_s3(struct inspect_cli *o, const char *url)
{
	struct s3ds_opts so = {
		.profile = o->aws_profile,
		.tmp_dir = o->tmp_dir,
		.parallel = (unsigned)o->parallel,
	};
	char sb[SHOWN_MAX];
	struct diag d = { "" };
	struct s3ds_got *g = malloc(sizeof(*g));
	int rc = CTL_FAIL;

	if (!g) {
		fprintf(stderr, "loaderctl inspect: out of memory\n");
		return CTL_FAIL;
	}
	if (s3ds_get(g, url, &so, &d)) {
		o->stage = g->stage;
		o->url = g->s ? s3ds_url(g->s) : url;
		fprintf(stderr, "loaderctl inspect: %s\n",
			s3ds_interrupted() ? "interrupted" :
					     shown(o, d.msg, sb));
		goto out;
	}
	s3ds_print_xfer(stderr, "fetched", "from", s3ds_url(g->s), &g->x);
	o->stage = g->stage;
	o->url = g->shown;
	rc = inspect_path(o, g->path);
out:
	s3ds_got_free(g);
	free(g);
	s3ds_reraise();
	return rc;
}

int ctl_inspect(int argc, char **argv)
{
	static const char usage[] =
		"loaderctl inspect [OPTIONS] DATASET|SHARD|TAR|s3://BUCKET[/PREFIX]";
	struct inspect_cli o = { 0 };
	struct diag d = { { 0 } };
	int nargs, help, err;

	err = opts_parse(inspect_table, &o, argc, argv, &nargs, &help, &d);
	if (err || help || nargs != 1) {
		if (help) {
			opts_help(
				stdout, usage,
				"Show the schema, record count, sizes, compression ratio per\n"
				"field and class names of a dataset directory or one shard file;\n"
				"or of WebDataset tars read in place (a .tar file, or a directory\n"
				"of them without a manifest). Reads only the manifest and the\n"
				"shards' headers and footers; a tar's member headers, labels and\n"
				".npy headers. An s3:// dataset (or object) is fetched whole\n"
				"into a staging directory first, and removed after.",
				inspect_table);
			return CTL_OK;
		}
		fprintf(stderr,
			"loaderctl inspect: %s\nusage: %s (--help for options)\n",
			err ? d.msg :
			      "expected one dataset directory or shard file",
			usage);
		return CTL_FAIL;
	}
	if (o.record >= 0 && (o.json || o.shards)) {
		fprintf(stderr,
			"loaderctl inspect: --record prints one record as text; drop --json and --shards\n");
		return CTL_FAIL;
	}
	if (aws_is_url(argv[0]))
		return inspect_s3(&o, argv[0]);
	return inspect_path(&o, argv[0]);
}
