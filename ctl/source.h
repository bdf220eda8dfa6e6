/*
 * source.h - what loaderctl pack reads: an ops table per input format.
 *
 * A source gives random access to its samples, so that pack can write
 * them in any order (--shuffle) without holding the dataset in memory
 * (an IDX file, which is small by nature, is the exception). Payloads come
 * uncompressed; pack applies the compression chosen on its command line.
 */
#ifndef LD_SOURCE_H
#define LD_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "schema.h"
#include "shard.h"

struct codec_ctx;

/* The pack options a source may look at. */
struct source_opts {
	const char *split;   /* the split to open, from ops->splits() */
	const char *classes; /* comma-separated class names, or NULL */
	uint64_t max_side; /* ImageFolder: re-encode larger JPEGs; 0 = as-is */
	uint64_t max_pixels; /* ImageFolder: likewise by pixels; 0 = as-is */
	uint64_t quality;    /* JPEG quality when re-encoding */
	/*
	 * tar: comma-separated .npy fields whose first dimension varies
	 * from sample to sample (ragged tensors, "[*,D1,...]"), or NULL.
	 */
	const char *ragged;
};

/* Room for the names a source lists in struct source_left. */
#define SOURCE_NAMES_MAX 512

/*
 * What a source found and did not pack, for the summary (ImageFolder;
 * zero for the others).
 */
struct source_left {
	uint64_t hidden;      /* files and directories named ".*" */
	uint64_t not_image;   /* files without an image name */
	uint64_t unsupported; /* images pack cannot store: .bmp, .tif, ... */
	/* Comma-separated, cut with "..." when long; "" for none. */
	char unsupported_ext[64];	       /* their extensions */
	char empty_classes[SOURCE_NAMES_MAX];  /* classes without a sample */
	char hidden_classes[SOURCE_NAMES_MAX]; /* ".*" directories in SRC */
};

struct source {
	const struct source_ops *ops;
	struct source_left left;
	struct schema schema; /* fields, all without compression */
	uint64_t count;
	uint32_t nclasses;
	char **classes; /* owned by the source */
};

struct source_ops {
	const char *name; /* as given to --format */
	/* True when path looks like this format (for auto-detection). */
	bool (*detect)(const char *path);
	/*
	 * Optional: the splits found at path (e.g. "train", "test" for an
	 * IDX directory), written into names[max][32]; returns their count
	 * or a negative code. Without it, a source has one unnamed split.
	 */
	int (*splits)(const char *path, char (*names)[32], unsigned max,
		      struct diag *d);
	int (*open)(struct source **out, const char *path,
		    const struct source_opts *o, struct diag *d);
	/*
	 * Sample i: one payload per schema field (raw_len = len). The
	 * payloads stay valid until the next get() or close(). where gets a
	 * name for error messages (file, tar member). ctx is for sources
	 * that decode (re-encoding JPEGs).
	 */
	int (*get)(struct source *s, uint64_t i, struct codec_ctx *ctx,
		   struct shard_field *f, char *where, size_t wn,
		   struct diag *d);
	/* Source payload bytes read so far (for the summary). */
	uint64_t (*bytes_in)(const struct source *s);
	void (*close)(struct source *s);
};

extern const struct source_ops source_idx_ops;
extern const struct source_ops source_folder_ops;
extern const struct source_ops source_tar_ops;
extern const struct source_ops source_lmdb_ops;

/* Free a class list of n names. */
void source_free_classes(char **classes, uint32_t n);

/* Split "a,b,c" into *out (n names); returns 0 or -ENOMEM. */
int source_parse_classes(const char *list, char ***out, uint32_t *n);

#endif /* LD_SOURCE_H */
