/*
 * dataset.c - manifest.json with jansson.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "dataset.h"
#include "fault.h"
#include "fdio.h"
#include "loader_error.h"
#include "shard.h"

void dataset_free(struct dataset *ds)
{
	if (!ds)
		return;
	for (uint32_t i = 0; i < ds->nclasses; i++)
		free(ds->classes[i]);
	free(ds->classes);
	for (uint32_t i = 0; i < ds->nshards; i++)
		free(ds->shards[i].file);
	free(ds->shards);
	free(ds->origin.source);
	free(ds->origin.source_format);
	free(ds->dir);
	free(ds);
}

const char *dataset_path(const struct dataset *ds, const char *name, char *buf,
			 size_t n)
{
	snprintf(buf, n, "%s/%s", ds->dir, name);
	return buf;
}

static bool plain_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int get_u64(json_t *o, const char *key, uint64_t *v)
{
	json_t *j = json_object_get(o, key);

	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return -1;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

static char *dup_str(json_t *j)
{
	return json_is_string(j) ? mem_strdup(json_string_value(j)) : NULL;
}

/* Check and take in a parsed manifest; path names it in messages. */
static int parse_manifest(struct dataset *ds, json_t *root, const char *path,
			  struct diag *d)
{
	json_t *j, *v;
	uint64_t sum = 0, version;
	size_t k;
	int err = LOADER_EFORMAT;

	j = json_object_get(root, "format");
	if (!json_is_string(j) ||
	    strcmp(json_string_value(j), DSFILES_FORMAT)) {
		err = diag_set(d, LOADER_EFORMAT,
			       "%s: \"format\" is not \"%s\"", path,
			       DSFILES_FORMAT);
		goto fail;
	}
	if (get_u64(root, "version", &version) || version != DSFILES_VERSION) {
		err = diag_set(d, LOADER_EVERSION, "%s: \"version\" is not %d",
			       path, DSFILES_VERSION);
		goto fail;
	}
	j = json_object_get(root, "schema");
	if (!json_is_array(j) || json_array_size(j) == 0 ||
	    json_array_size(j) > SCHEMA_MAX_FIELDS) {
		err = diag_set(
			d, LOADER_ESCHEMA,
			"%s: \"schema\" must be an array of 1..%d field strings",
			path, SCHEMA_MAX_FIELDS);
		goto fail;
	}
	json_array_foreach(j, k, v)
	{
		if (!json_is_string(v)) {
			err = diag_set(d, LOADER_ESCHEMA,
				       "%s: schema entry %zu is not a string",
				       path, k);
			goto fail;
		}
		err = field_parse(&ds->schema.f[k], json_string_value(v), d);
		if (err) {
			diag_wrap(d, err, "%s: schema entry %zu", path, k);
			goto fail;
		}
		ds->schema.nfields++;
	}
	err = schema_check(&ds->schema, d);
	if (err) {
		diag_wrap(d, err, "%s", path);
		goto fail;
	}
	j = json_object_get(root, "classes");
	if (j && !json_is_array(j)) {
		err = diag_set(d, LOADER_EFORMAT,
			       "%s: \"classes\" is not an array", path);
		goto fail;
	}
	if (json_array_size(j)) {
		ds->classes = mem_calloc(json_array_size(j), sizeof(char *));
		if (!ds->classes) {
			err = -ENOMEM;
			goto fail;
		}
		json_array_foreach(j, k, v)
		{
			if (!(ds->classes[k] = dup_str(v))) {
				err = diag_set(d, LOADER_EFORMAT,
					       "%s: class %zu is not a string",
					       path, k);
				goto fail;
			}
			ds->nclasses++;
		}
	}
	j = json_object_get(root, "shards");
	if (!json_is_array(j) || json_array_size(j) > UINT32_MAX) {
		err = diag_set(d, LOADER_EFORMAT,
			       "%s: \"shards\" is not an array", path);
		goto fail;
	}
	ds->shards = mem_calloc(json_array_size(j) + 1, sizeof(*ds->shards));
	if (!ds->shards) {
		err = -ENOMEM;
		goto fail;
	}
	json_array_foreach(j, k, v)
	{
		struct dataset_shard *s = &ds->shards[k];

		s->file = dup_str(json_object_get(v, "file"));
		ds->nshards++;
		if (!s->file || !plain_name(s->file) ||
		    get_u64(v, "records", &s->records) ||
		    get_u64(v, "bytes", &s->bytes)) {
			err = diag_set(
				d, LOADER_EFORMAT,
				"%s: shard %zu needs \"file\" (a plain file name), \"records\" and \"bytes\"",
				path, k);
			goto fail;
		}
		sum += s->records;
	}
	if (get_u64(root, "records", &ds->records) || ds->records != sum) {
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: \"records\" does not equal the sum over shards (%" PRIu64
			")",
			path, sum);
		goto fail;
	}
	j = json_object_get(root, "packed");
	if (json_is_object(j)) {
		json_int_t seed;

		ds->origin.source = dup_str(json_object_get(j, "source"));
		ds->origin.source_format =
			dup_str(json_object_get(j, "source_format"));
		get_u64(j, "bytes_in", &ds->origin.bytes_in);
		v = json_object_get(j, "shuffle_seed");
		seed = json_is_integer(v) ? json_integer_value(v) : -1;
		ds->origin.shuffle_seed = seed;
		v = json_object_get(j, "jpeg_restart");
		if (json_is_object(v)) {
			uint64_t n = 0;

			get_u64(v, "interval", &n);
			ds->origin.jpeg_restart =
				n <= UINT32_MAX ? (uint32_t)n : 0;
			get_u64(v, "transcoded", &ds->origin.jpeg_transcoded);
			get_u64(v, "as_is", &ds->origin.jpeg_as_is);
			get_u64(v, "bytes_before",
				&ds->origin.jpeg_bytes_before);
			get_u64(v, "bytes_after", &ds->origin.jpeg_bytes_after);
		}
	} else {
		ds->origin.shuffle_seed = -1;
	}
	return 0;
fail:
	return err;
}

int dataset_load(struct dataset **out, const char *dir, struct diag *d)
{
	char path[4096];
	struct dataset *ds;
	json_error_t je;
	json_t *root;
	int err;

	ds = mem_calloc(1, sizeof(*ds));
	if (!ds || !(ds->dir = mem_strdup(dir))) {
		free(ds);
		return -ENOMEM;
	}
	dataset_path(ds, DSFILES_MANIFEST, path, sizeof(path));
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		if (access(path, F_OK))
			err = diag_set(
				d, -ENOENT,
				"%s: no manifest: not a dataset directory (pack one with loaderctl pack)",
				path);
		else
			err = diag_set(d, LOADER_EFORMAT, "%s: line %d: %s",
				       path, je.line, je.text);
		dataset_free(ds);
		return err;
	}
	err = parse_manifest(ds, root, path, d);
	json_decref(root);
	if (err) {
		dataset_free(ds);
		return err;
	}
	*out = ds;
	return 0;
}

int dataset_load_fd(struct dataset **out, int fd, const char *name,
		    struct diag *d)
{
	struct dataset *ds;
	json_error_t je;
	json_t *root;
	int err;

	uint64_t size;
	char *buf;

	/*
	 * The descriptor comes from a client: take only a regular file of a
	 * sane size (never a pipe that could block us), read with pread.
	 */
	err = fdio_regular_size(fd, DSFILES_MANIFEST_MAX, &size);
	if (err == -EINVAL || err == LOADER_ETOOBIG)
		return diag_set(d, LOADER_EFORMAT,
				"%s: not a regular file of at most %d bytes",
				name, DSFILES_MANIFEST_MAX);
	if (err)
		return diag_set(d, err, "%s: %s", name, strerror(-err));
	buf = mem_alloc((size_t)size + 1);
	if (!buf)
		return -ENOMEM;
	err = fdio_pread_all(fd, buf, (size_t)size, 0);
	if (err) {
		free(buf);
		return diag_set(d, err, "%s: read: %s", name,
				loader_strerror(err));
	}
	ds = mem_calloc(1, sizeof(*ds));
	if (!ds) {
		free(buf);
		return -ENOMEM;
	}
	root = json_loadb(buf, (size_t)size, JSON_REJECT_DUPLICATES, &je);
	free(buf);
	if (!root) {
		dataset_free(ds);
		return diag_set(d, LOADER_EFORMAT, "%s: line %d: %s", name,
				je.line, je.text);
	}
	err = parse_manifest(ds, root, name, d);
	json_decref(root);
	if (err) {
		dataset_free(ds);
		return err;
	}
	*out = ds;
	return 0;
}

int dataset_check_shard(const struct dataset *ds, uint32_t i,
			const struct shard *sh, struct diag *d)
{
	const struct dataset_shard *s = &ds->shards[i];

	if (!schema_equal(shard_schema(sh), &ds->schema))
		return diag_set(d, LOADER_ESCHEMA,
				"%s: schema differs from the manifest's",
				shard_name(sh));
	if (shard_count(sh) != s->records)
		return diag_set(d, LOADER_EFORMAT,
				"%s: %" PRIu64
				" records, the manifest says %" PRIu64,
				shard_name(sh), shard_count(sh), s->records);
	return 0;
}

json_t *dataset_restart_json(const struct dataset_origin *o)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I}", "interval",
			 (json_int_t)o->jpeg_restart, "transcoded",
			 (json_int_t)o->jpeg_transcoded, "as_is",
			 (json_int_t)o->jpeg_as_is, "bytes_before",
			 (json_int_t)o->jpeg_bytes_before, "bytes_after",
			 (json_int_t)o->jpeg_bytes_after);
}

int dataset_save(const struct dataset *ds, struct diag *d)
{
	char path[4096], tmp[4200], text[FIELD_TEXT_MAX];
	json_t *root = json_object(), *a;
	int err = -ENOMEM, fd;
	bool bad;

	if (!root)
		return -ENOMEM;
	json_object_set_new(root, "format", json_string(DSFILES_FORMAT));
	json_object_set_new(root, "version", json_integer(DSFILES_VERSION));
	json_object_set_new(root, "records",
			    json_integer((json_int_t)ds->records));
	a = json_array();
	for (uint32_t i = 0; i < ds->schema.nfields; i++) {
		field_format(&ds->schema.f[i], text, sizeof(text));
		json_array_append_new(a, json_string(text));
	}
	json_object_set_new(root, "schema", a);
	a = json_array();
	for (uint32_t i = 0; i < ds->nclasses; i++)
		json_array_append_new(a, json_string(ds->classes[i]));
	json_object_set_new(root, "classes", a);
	a = json_array();
	for (uint32_t i = 0; i < ds->nshards; i++)
		json_array_append_new(
			a,
			json_pack("{s:s, s:I, s:I}", "file", ds->shards[i].file,
				  "records", (json_int_t)ds->shards[i].records,
				  "bytes", (json_int_t)ds->shards[i].bytes));
	json_object_set_new(root, "shards", a);
	if (ds->origin.source) {
		json_t *o = json_pack(
			"{s:s, s:s, s:I}", "source", ds->origin.source,
			"source_format",
			ds->origin.source_format ? ds->origin.source_format :
						   "",
			"bytes_in", (json_int_t)ds->origin.bytes_in);

		if (o && ds->origin.shuffle_seed >= 0)
			json_object_set_new(
				o, "shuffle_seed",
				json_integer(ds->origin.shuffle_seed));
		if (o && (ds->origin.jpeg_transcoded || ds->origin.jpeg_as_is))
			json_object_set_new(o, "jpeg_restart",
					    dataset_restart_json(&ds->origin));
		json_object_set_new(root, "packed", o);
	}
	dataset_path(ds, DSFILES_MANIFEST, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* A new file, never through a symbolic link planted there. */
	if (unlink(tmp) && errno != ENOENT) {
		err = diag_set(d, -errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0644);
	if (fd < 0) {
		err = diag_set(d, -errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	bad = json_dumpfd(root, fd, JSON_INDENT(2) | JSON_PRESERVE_ORDER) ||
	      fsync(fd);
	if (close(fd))
		bad = true;
	if (bad) {
		err = diag_set(d, -EIO, "%s: cannot write", tmp);
		unlink(tmp);
		goto out;
	}
	if (rename(tmp, path)) {
		err = diag_set(d, -errno, "%s: rename: %s", path,
			       strerror(errno));
		unlink(tmp);
		goto out;
	}
	err = 0;
out:
	json_decref(root);
	return err;
}

int dataset_open_shard(const struct dataset *ds, uint32_t i, int *fd,
		       struct shard **sh, struct diag *d)
{
	const struct dataset_shard *s = &ds->shards[i];
	char path[4096];
	int err;

	dataset_path(ds, s->file, path, sizeof(path));
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return diag_set(d, -errno, "%s: %s", path, strerror(errno));
	err = shard_open(sh, *fd, path, d);
	if (err)
		goto fail;
	err = dataset_check_shard(ds, i, *sh, d);
	if (err)
		goto fail_shard;
	return 0;
fail_shard:
	shard_close(*sh);
	*sh = NULL;
fail:
	close(*fd);
	*fd = -1;
	return err;
}
