/*
 * shardid.c - object-store shards' identities in the node cache
 * (shardid.h): set once while the dataset is staged, read by its stream.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "shardid.h"

struct shardid {
	uint32_t n;
	bool *named;
	uint64_t (*id)[2];
};

int shardid_new(struct shardid **out, uint32_t nshards, struct diag *d)
{
	struct shardid *s = mem_calloc(1, sizeof(*s));
	size_t n = nshards ? nshards : 1;

	*out = NULL;
	if (s) {
		s->named = mem_calloc(n, sizeof(*s->named));
		s->id = mem_calloc(n, sizeof(*s->id));
	}
	if (!s || !s->named || !s->id) {
		shardid_free(s);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	s->n = nshards;
	*out = s;
	return 0;
}

void shardid_free(struct shardid *s)
{
	if (!s)
		return;
	free(s->named);
	free(s->id);
	free(s);
}

void shardid_set(struct shardid *s, uint32_t i, const uint64_t id[2])
{
	memcpy(s->id[i], id, sizeof(s->id[i]));
	s->named[i] = true;
}

bool shardid_get(const struct shardid *s, uint32_t i, uint64_t id[2])
{
	if (!s || i >= s->n || !s->named[i])
		return false;
	memcpy(id, s->id[i], sizeof(s->id[i]));
	return true;
}
