/*
 * rread.h - the shards of an object-store dataset that the shard cache
 * does not hold, read in place: each batch's records fetched from the
 * store by ranged GETs, with the credentials of the client that opened
 * the stream.
 *
 * A dataset larger than the shard cache's budget is not refused: the
 * cache keeps as many whole shards as fit (the same ones every stage,
 * for as long as they are used: a fixed part of the dataset, as the
 * node cache keeps records, so that random order does not thrash it),
 * and the others are read through a struct rread. Their descriptors,
 * given to the stream as any shard's, are memfds of the object's size
 * holding only its header, footer and trailer, so that opening and
 * checking the shard is the local path's; the reader (reader.c) asks
 * rread_get() for every record of such a shard instead of reading the
 * memfd, whose other bytes are holes.
 *
 * Every range is asked for with If-Match on the ETag the stage's HEAD
 * gave: a shard replaced mid-epoch fails its reads (-ESTALE) instead of
 * mixing two versions, and the store checks each read against the
 * client's own credentials, which the struct rread keeps (wiped by
 * rread_free(), never written anywhere) for the stream's life.
 *
 * Not thread-safe: one reader thread uses it.
 */
#ifndef LD_RREAD_H
#define LD_RREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "awscfg.h"
#include "diag.h"
#include "s3.h"

struct rread;

/* One range to read: len bytes of a shard from off, into buf. */
struct rread_range {
	uint32_t shard;
	uint64_t off, len;
	unsigned char *buf;
	int err; /* 0, or why this range failed */
};

/* A reader of the bucket with cfg's credentials, for nshards shards. */
int rread_new(struct rread **out, const struct aws_cfg *cfg, const char *bucket,
	      uint32_t nshards, const struct s3_params *p, struct diag *d);
void rread_free(struct rread *r);

/* Shard i is read in place: the object key, version o. */
int rread_add(struct rread *r, uint32_t i, const char *key,
	      const struct s3_obj *o, struct diag *d);

/* Is shard i read in place? (NULL r: no shard is.) */
bool rread_has(const struct rread *r, uint32_t i);

/* Shards read in place. */
uint32_t rread_count(const struct rread *r);

/*
 * Read the n ranges, many at once. Returns 0 when every one came, else
 * the first failed one's error with d naming its object and offset;
 * each range's own outcome is in its err.
 */
int rread_get(struct rread *r, struct rread_range *v, size_t n, struct diag *d);

/* From now on, reads end with -ECANCELED when *cancel is set (s3.h). */
void rread_set_cancel(struct rread *r, const bool *cancel);

/* Requests, retries and bytes so far. */
struct s3_counts rread_counts(const struct rread *r);

#endif /* LD_RREAD_H */
