/*
 * test_shardid.c - object-store shards' identities in the node cache:
 * set, read back, and none where none was set.
 */
#include <stdint.h>

#include <criterion/criterion.h>

#include "shardid.h"
#include "../../unit_util.h"

Test(shardid, set_and_get)
{
	struct shardid *s;
	struct diag d = { "" };
	uint64_t id[2] = { 7, 9 }, got[2] = { 0, 0 };

	cr_assert_eq(shardid_new(&s, 3, &d), 0, "%s", d.msg);
	shardid_set(s, 1, id);
	cr_assert(shardid_get(s, 1, got));
	cr_assert(got[0] == 7 && got[1] == 9);
	cr_assert(!shardid_get(s, 0, got), "shard 0 has none");
	cr_assert(!shardid_get(s, 3, got), "past the last shard");
	cr_assert(!shardid_get(NULL, 1, got), "no identities at all");
	shardid_free(s);
	shardid_free(NULL);
}
