/*
 * s3cache.h - the node-local shard cache of datasets in an S3-API object
 * store (loaderd(8), S3 DATASETS).
 *
 * A dataset at s3://bucket/prefix is what loaderctl pack makes, stored
 * as objects: prefix/manifest.json and the shards it names. Staging it
 * gives the caller the same files a local dataset's client would pass:
 * the manifest (a memfd) and every shard, read-only, so that everything
 * downstream (order, rank and world, resume, the node cache) is the
 * local path's. Shards are kept in the cache directory under a name made
 * of the store, bucket, key and ETag, so a changed object is a new file
 * and streams on the same objects share one copy whoever opened them.
 *
 * Access: the cache never serves what the caller's own credentials
 * cannot read. Every object of a stage is asked of the store with the
 * caller's credentials: the manifest is fetched with them each time,
 * each shard is HEADed with them (the answer remembered for a bounded
 * time per credentials, object and manifest version), and a shard is
 * served from the cache only for the ETag that HEAD gave. So a stage
 * after a pack to the same prefix sees the new shards at once; a shard
 * replaced alone, under the same manifest, is seen when the remembered
 * answer expires (access_ttl_s). Credentials are used, never
 * kept past the call, logged or written anywhere.
 *
 * A fetched shard is written under a temporary name, checked (its size
 * and ETag against the HEAD, its footer against the manifest, every
 * record's checksum), and only then renamed into place. The stage does
 * not wait for that: it fetches each shard's header and tail, gives the
 * stream the temporary file, and the records arrive while the stream
 * reads them (s3fill.h), so that a cold epoch's decoding overlaps its
 * fetching. The cache keeps
 * to a byte budget: before fetching, it removes the least recently
 * staged shards that no stage in progress needs. What still has no room
 * (a dataset larger than the budget) is read in place (s3read.h): the
 * shards the cache holds stay there, stage after stage, and the others
 * are read from the store record by record as the stream needs them.
 *
 * Thread-safe: stages run at once, and one shard wanted by two is
 * fetched once, the second waiting for the first.
 */
#ifndef LD_S3CACHE_H
#define LD_S3CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "awscfg.h"
#include "diag.h"
#include "s3fill.h"
#include "s3read.h"
#include "s3.h"

struct s3cache;

struct s3cache_params {
	uint64_t budget;       /* bytes of shards kept; 0: no bound */
	unsigned access_ttl_s; /* how long a HEAD's answer is trusted; 0: 60 */
	struct s3_params s3;   /* retries, parallel requests, timeouts */
};

/* What one stage did. */
struct s3cache_stats {
	uint32_t shards;	/* in the dataset */
	uint32_t hits;		/* served from the cache */
	uint32_t fetched;	/* fetched by this stage, as its stream reads */
	uint32_t waited;	/* fetched by another stage meanwhile */
	uint64_t bytes_fetched; /* their bytes */
	uint64_t heads;		/* HEAD requests made (others remembered) */
	uint64_t retries;	/* requests retried */
	uint64_t evicted;	/* shard bytes removed to make room */
	uint32_t direct;	/* read in place: no room (s3read.h) */
};

/*
 * A cache in dir (made if missing; left-over temporary files of a
 * previous run are removed). Returns 0 or a negative code in d.
 */
int s3cache_new(struct s3cache **out, const char *dir,
		const struct s3cache_params *p, struct diag *d);
void s3cache_free(struct s3cache *c);

/* What a stage gives its stream. */
struct s3cache_staged {
	int *fds; /* [0] the manifest, [1..] the shards, in order */
	uint32_t nfds;
	struct s3read *rr;   /* shards read in place, or NULL */
	struct s3fill *fill; /* shards still arriving, or NULL */
	struct shardid *ids; /* the shards' identities (shardid.h) */
};

/*
 * Stage the dataset at url (s3://bucket/prefix) with cfg's credentials.
 * On success out->fds is a malloc'd array of out->nfds descriptors, the
 * caller's to close and free: [0] the manifest, [1..] the shards in
 * manifest order. Shards the budget has no room for are read in place:
 * out->rr is then the caller's struct s3read for them (s3read.h). Shards
 * not in the cache are fetched after the call, on a thread of the
 * cache's, while the stream reads them: out->fill is then the caller's
 * reference (s3fill.h), whose s3fill_cancel() stops the fetch when the
 * stream ends, and out->ids the shards' identities in the node cache,
 * the caller's to free (shardid.h); that thread logs, under label, what it fetched. st (may
 * be NULL) receives what was done. When *cancel (may be NULL) is set
 * meanwhile, the stage ends within about 100 ms with -ECANCELED; so it
 * does with -ETIMEDOUT at deadline_ms (CLOCK_MONOTONIC milliseconds, 0:
 * none), which bounds the whole stage: its connects, stalls, retries and
 * its waits for other stages' fetches of the same shards. Returns
 * 0 or a negative code, with d naming the object (s3://bucket/key) at
 * fault: -EACCES where cfg's credentials may not read it, -ENOENT,
 * -ESTALE if it kept changing, LOADER_EFORMAT for a shard that is not
 * what the manifest says.
 */
int s3cache_stage(struct s3cache *c, const struct aws_cfg *cfg, const char *url,
		  const char *label, const bool *cancel, uint64_t deadline_ms,
		  struct s3cache_staged *out, struct s3cache_stats *st,
		  struct diag *d);

#endif /* LD_S3CACHE_H */
