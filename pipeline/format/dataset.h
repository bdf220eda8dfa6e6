/*
 * dataset.h - a dataset directory: shards plus manifest.json.
 *
 * The manifest is small, readable JSON (man/loader-shard.5 describes it):
 * the schema in its text form, the class names, and the shard files with
 * their record counts and sizes. Shard names are plain file names inside
 * the dataset directory; a manifest naming anything else is rejected.
 */
#ifndef LD_DATASET_H
#define LD_DATASET_H

#include <stdint.h>

#include "diag.h"
#include "dsfiles.h" /* the manifest's name, format and version */
#include "schema.h"

struct shard;

struct dataset_shard {
	char *file; /* plain file name inside the directory */
	uint64_t records;
	uint64_t bytes;
};

/* Informational pack record, kept in the manifest. */
struct dataset_origin {
	char *source;	      /* what was packed (path) */
	char *source_format;  /* idx, imagefolder, tar */
	uint64_t bytes_in;    /* source payload bytes */
	int64_t shuffle_seed; /* -1: not shuffled */
	/*
	 * JPEG fields' lossless transcode to restart segments (pack
	 * --jpeg-restart): MCUs per segment (0: off, files stored as-is),
	 * records transcoded and stored as they were, and the bytes of the
	 * JPEG payloads before and after.
	 */
	uint32_t jpeg_restart;
	uint64_t jpeg_transcoded, jpeg_as_is;
	uint64_t jpeg_bytes_before, jpeg_bytes_after;
};

/* A loaded manifest. Every pointer is owned by the struct. */
struct dataset {
	char *dir;
	struct schema schema;
	uint64_t records;
	uint32_t nclasses;
	char **classes;
	uint32_t nshards;
	struct dataset_shard *shards;
	struct dataset_origin origin;
};

/*
 * Load dir/manifest.json and check it: format, version, schema, shard
 * names, and that the shard counts add up. Returns 0 or a negative code
 * with the file and the problem in d.
 */
int dataset_load(struct dataset **out, const char *dir, struct diag *d);

/*
 * Load a manifest from an open file (the daemon gets the client's file
 * descriptor, never a path). name is used in messages; ds->dir is NULL.
 */
int dataset_load_fd(struct dataset **out, int fd, const char *name,
		    struct diag *d);

/* Check that shard sh agrees with the manifest's entry i. */
int dataset_check_shard(const struct dataset *ds, uint32_t i,
			const struct shard *sh, struct diag *d);

/*
 * Write ds->dir/manifest.json (atomically: a temporary file renamed over
 * the old one). Returns 0 or a negative code.
 */
int dataset_save(const struct dataset *ds, struct diag *d);

/*
 * The manifest's record of the JPEG restart transcode (packed.jpeg_restart:
 * interval, transcoded, as_is, bytes_before, bytes_after) as a new jansson
 * object the caller owns, or NULL without memory.
 */
struct json_t;
struct json_t *dataset_restart_json(const struct dataset_origin *o);

/* Free a dataset. NULL is a no-op. */
void dataset_free(struct dataset *ds);

/*
 * Open shard i: its file read-only (*fd, the caller closes it) and the
 * shard (*sh, shard_close()). Checks that the shard's schema and record
 * count agree with the manifest.
 */
int dataset_open_shard(const struct dataset *ds, uint32_t i, int *fd,
		       struct shard **sh, struct diag *d);

/* Join dir and name into buf; returns buf. */
const char *dataset_path(const struct dataset *ds, const char *name, char *buf,
			 size_t n);

#endif /* LD_DATASET_H */
