/*
 * nodecache.h - the node cache: stored records shared by every stream on the
 * same dataset files, within one byte budget for the whole daemon.
 *
 * A set is one dataset as its files are: each shard's device, inode,
 * size, mtime and ctime, taken with fstat() from the descriptors a
 * client passed. Only a stream holding descriptors of those very files
 * reaches the set, so the cache gives no one a record of a file they
 * could not open themselves (the fd-passing model, doc/design.md "Security");
 * a file written since (its ctime moves, and no user can set a ctime
 * back) is another set.
 *
 * Policy: records are kept as they are first read, and never evicted
 * while a stream uses their set. When the budget is spent, nothing more
 * is added: under random order LRU would evict every record before its
 * next use (each epoch touches all of them once), while a fixed part of
 * the dataset is hit every epoch (the "MinIO" policy of the data-stall
 * literature: hit rate = budget / dataset size). Sets no stream uses
 * are kept for the next stream on the same files, and dropped, the
 * oldest first, when a set in use needs their room.
 *
 * Records are stored by (shard, record index) and served in place: a
 * cached record's bytes stay where they are until its set is freed,
 * which no stream attached can see, so readers take the pointer with no
 * lock and no copy. Adding takes the set's lock and copies the record
 * once.
 */
#ifndef LD_NODECACHE_H
#define LD_NODECACHE_H

#include <stdbool.h>
#include <stdint.h>

/* The smallest piece of memory the cache takes from its budget. */
#define NODECACHE_CHUNK (4u << 20)

struct nodecache;
struct nodecache_set;

/* What makes a shard file the same file. */
struct nodecache_file {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
	uint64_t records;
};

/*
 * A cache of at most budget bytes (records, their chunks' slack and each
 * set's index). budget 0: *out is NULL and every call below is a no-op
 * that finds nothing. Returns 0 or -ENOMEM.
 */
int nodecache_new(struct nodecache **out, uint64_t budget);

/* Free the cache; no set may be attached. NULL is a no-op. */
void nodecache_free(struct nodecache *c);

/*
 * The set of these n files (a stream's shards, in manifest order), found
 * or made, and attached: it stays until nodecache_detach(). NULL when the
 * cache is off, full of sets in use, or out of memory: the stream reads
 * from storage as if there were no cache.
 */
struct nodecache_set *nodecache_attach(struct nodecache *c,
				       const struct nodecache_file *files,
				       uint32_t n);

/* Let go of a set (NULL is a no-op); it stays cached until its room is needed. */
void nodecache_detach(struct nodecache_set *s);

/*
 * Record rec of shard i, if cached: its bytes, *len of them. Lock-free;
 * NULL if not. Only records whose checksum the caller checked are put,
 * so what comes back needs no check again.
 */
const unsigned char *nodecache_get(const struct nodecache_set *s, uint32_t i,
				   uint64_t rec, uint32_t *len);

/* Start bringing record rec's entry into the CPU cache (a batch's first pass). */
void nodecache_prefetch(const struct nodecache_set *s, uint32_t i,
			uint64_t rec);

/*
 * Keep a copy of record rec of shard i (len bytes at p, checked against
 * its checksum), if it is not cached yet and the budget has room.
 * Returns true if it is cached now.
 */
bool nodecache_put(struct nodecache_set *s, uint32_t i, uint64_t rec,
		   const void *p, uint32_t len);

/*
 * Has s met the end of the budget (nothing more will be put)? Lets a
 * caller skip the work before a put (a checksum) that would be refused.
 */
bool nodecache_full(const struct nodecache_set *s);

/*
 * Does s hold every record of its files? Records never leave a set in
 * use: once true, it stays true for as long as the caller is attached,
 * and every nodecache_get() on s finds its record.
 */
bool nodecache_complete(const struct nodecache_set *s);

/* The cache as a whole. */
struct nodecache_stats {
	uint64_t budget;
	uint64_t used;	   /* bytes taken from the budget */
	uint64_t records;  /* cached, all sets */
	uint32_t sets;	   /* kept */
	uint32_t attached; /* sets some stream uses */
	uint64_t hits;	   /* records served from the cache */
	uint64_t misses;   /* looked up and not there */
};

void nodecache_stats(struct nodecache *c, struct nodecache_stats *st);

/* Count a lookup's outcome (the reader calls it once per batch). */
void nodecache_count(struct nodecache_set *s, uint64_t hits, uint64_t misses);

#endif /* LD_NODECACHE_H */
