/*
 * shardid.h - the identities an object-store dataset's shards have in
 * the node cache (nodecache.h): each its object's version, the hash of
 * its name in the shard cache. Whether a stream reads a shard from the
 * shard cache, as it arrives or in place, and whichever credentials
 * staged it, its records are the same, and so is its identity.
 */
#ifndef LD_SHARDID_H
#define LD_SHARDID_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"

struct shardid;

/* Identities for nshards shards, none set. Returns 0 or -ENOMEM. */
int shardid_new(struct shardid **out, uint32_t nshards, struct diag *d);
void shardid_free(struct shardid *s);

/* Shard i's identity. */
void shardid_set(struct shardid *s, uint32_t i, const uint64_t id[2]);

/* Shard i's identity into id; false when it has none (NULL s: none has). */
bool shardid_get(const struct shardid *s, uint32_t i, uint64_t id[2]);

#endif /* LD_SHARDID_H */
