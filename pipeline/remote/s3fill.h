/*
 * s3fill.h - shards of an object-store dataset still arriving in the shard
 * cache while their stream reads them.
 *
 * A cold stage does not hold its stream back until every shard is in the
 * cache. It fetches each shard's header and tail (footer and trailer)
 * first, into the shard's temporary file, and gives the stream that file;
 * the records then arrive in the background (s3cache.c), each shard from
 * its start, those the reader waits for first. The reader (reader.c)
 * waits for the bytes of each extent it reads (s3fill_wait()), so the
 * first batch comes as soon as its records have, and fetching overlaps
 * decoding.
 *
 * Nothing unchecked is served: every record the reader takes is checked
 * against its checksum, as any shard's are, and a shard goes into the
 * cache only whole and checked (its footer against the manifest, every
 * record's checksum).
 *
 * Shared by the stream's reader thread and the fetching thread, each
 * holding a reference; the last s3fill_put() frees it.
 */
#ifndef LD_S3FILL_H
#define LD_S3FILL_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"

struct s3fill;

int s3fill_new(struct s3fill **out, uint32_t nshards, struct diag *d);
/* Another reference to f (returned). */
struct s3fill *s3fill_get(struct s3fill *f);
/* Drop a reference (NULL: nothing). */
void s3fill_put(struct s3fill *f);

/*
 * Shard i arrives: bytes [0, have) and [tail, its end) are there now,
 * those between will come.
 */
void s3fill_add(struct s3fill *f, uint32_t i, uint64_t have, uint64_t tail);

/*
 * Shard i arrives in another stage's fetch, as src's shard si (the same
 * object, in the same temporary file): the reader waits on src, and
 * src's fetch goes on until every stream linked to it is done too.
 * Before the stream has f. Returns 0, -ENOMEM, or -ECANCELED when src's
 * fetch is stopping (no stream left to it): wait for it to end instead.
 */
int s3fill_link(struct s3fill *f, uint32_t i, struct s3fill *src, uint32_t si);

/* Is shard i one that arrives? (NULL f: none is.) */
bool s3fill_has(const struct s3fill *f, uint32_t i);

/* The fetch: bytes [0, end) of shard i came (end only grows). */
void s3fill_came(struct s3fill *f, uint32_t i, uint64_t end);

/*
 * Shard i is whole (err 0), or will not come: err, and why (naming the
 * object). Wakes its readers.
 */
void s3fill_end(struct s3fill *f, uint32_t i, int err, const char *why);

/* Has a reader waited for shard i? The fetch takes those first. */
bool s3fill_wanted(struct s3fill *f, uint32_t i);

/*
 * The reader: wait until bytes [off, end) of shard i are there. Returns
 * 0; the shard's error, with d saying why, if they will not come; or
 * -ECANCELED once *stop (may be NULL) is set.
 */
int s3fill_wait(struct s3fill *f, uint32_t i, uint64_t off, uint64_t end,
		const bool *stop, struct diag *d);

/*
 * The seconds readers have spent in s3fill_wait() on f's shards, waiting
 * for their bytes (those linked elsewhere count there).
 */
double s3fill_waited(struct s3fill *f);

/*
 * Its stream is done with it (again: nothing). The fetch stops within
 * about 100 ms, keeping the shards whose bytes all came, once no stream
 * linked to it (s3fill_link()) is left either; so do the fetches f is
 * linked to.
 */
void s3fill_cancel(struct s3fill *f);

/* Stop the fetch now, whoever uses it (the daemon stops). */
void s3fill_stop(struct s3fill *f);

/* The flag s3fill_cancel() sets, for s3_params.cancel. */
const bool *s3fill_cancelled(struct s3fill *f);

#endif /* LD_S3FILL_H */
