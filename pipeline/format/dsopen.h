/*
 * dsopen.h - datasets read in place: WebDataset tars, or one LMDB data
 * file, opened as a dataset of one shard per file on each file's record
 * index (recindex.h), the indexes kept between streams by a store (the
 * daemon's state), keyed by the file's identity.
 */
#ifndef LD_DSOPEN_H
#define LD_DSOPEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "diag.h"
#include "recindex.h"

/*
 * Where the record indexes of files read in place are kept between
 * streams: opaque records under an id. get() returns a copy the caller
 * frees, or NULL; put() may fail silently (the next stream scans again).
 */
struct recindex_store {
	void *(*get)(void *ctx, const char *id, size_t *len);
	void (*put)(void *ctx, const char *id, const void *val, size_t len);
	void *ctx;
};

struct dsopen_in {
	const int *fds; /* the files: tars, or one LMDB data file */
	uint32_t n;
	bool lmdb;
	/* Each file's name for messages, or NULL: "tar-NNNNN". */
	char *const *labels;
	const struct recindex_store *store; /* or NULL */
	const char *log;		    /* who opens, for the log */
};

/*
 * Open the files of in as a dataset: each a shard named by its label,
 * every one with the first's fields, the manifest made in memory from
 * their indexes (*ix: one per file, recindex_free() each and free the
 * array; dataset_free() *ds). An index kept in the store is used while
 * the file's size, modification and change times and owner are the
 * same; else the file is scanned (an LMDB file in a child process) and
 * the new index kept. Returns 0, or a negative code with the reason in d
 * (*ds and *ix are then NULL).
 */
int dsopen_inplace(struct dataset **ds, struct recindex ***ix,
		   const struct dsopen_in *in, struct diag *d);

#endif /* LD_DSOPEN_H */
