/*
 * s3read.h - the shards of an object-store dataset that the shard cache
 * does not hold, read in place: each batch's records fetched from the
 * store by ranged GETs, with the credentials of the client that opened
 * the stream.
 *
 * A dataset larger than the shard cache's budget is not refused: the
 * cache keeps as many whole shards as fit (the same ones every stage,
 * for as long as they are used: a fixed part of the dataset, as the
 * node cache keeps records, so that random order does not thrash it),
 * and the others are read through a struct s3read. Their descriptors,
 * given to the stream as any shard's, are memfds of the object's size
 * holding only its header, footer and trailer, so that opening and
 * checking the shard is the local path's; the reader (reader.c) asks
 * s3read_get() for every record of such a shard instead of reading the
 * memfd, whose other bytes are holes.
 *
 * Every range is asked for with If-Match on the ETag the stage's HEAD
 * gave: a shard replaced mid-epoch fails its reads (-ESTALE) instead of
 * mixing two versions, and the store checks each read against the
 * client's own credentials, which the struct s3read keeps (wiped by
 * s3read_free(), never written anywhere) for the stream's life.
 *
 * Not thread-safe: one reader thread uses it.
 */
#ifndef LD_S3READ_H
#define LD_S3READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "awscfg.h"
#include "diag.h"
#include "s3.h"

struct s3read;

/* One range to read: len bytes of a shard from off, into buf. */
struct s3read_range {
	uint32_t shard;
	uint64_t off, len;
	unsigned char *buf;
	int err; /* 0, or why this range failed */
};

/* A reader of the bucket with cfg's credentials, for nshards shards. */
int s3read_new(struct s3read **out, const struct aws_cfg *cfg,
	       const char *bucket, uint32_t nshards, const struct s3_params *p,
	       struct diag *d);
void s3read_free(struct s3read *r);

/* Shard i is read in place: the object key, version o. */
int s3read_add(struct s3read *r, uint32_t i, const char *key,
	       const struct s3_obj *o, struct diag *d);

/* Is shard i read in place? (NULL r: no shard is.) */
bool s3read_has(const struct s3read *r, uint32_t i);

/*
 * Read the n ranges, many at once. Returns 0 when every one came, else
 * the first failed one's error with d naming its object and offset;
 * each range's own outcome is in its err.
 */
int s3read_get(struct s3read *r, struct s3read_range *v, size_t n,
	       struct diag *d);

/* From now on, reads end with -ECANCELED when *cancel is set (s3.h). */
void s3read_set_cancel(struct s3read *r, const bool *cancel);

#endif /* LD_S3READ_H */
