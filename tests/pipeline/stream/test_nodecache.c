/*
 * test_nodecache.c - the node cache (pipeline/stream/nodecache.c): a set per file
 * identity, records kept in place as first put, the budget spent and
 * then nothing added (no eviction under use), idle sets dropped for a
 * set in use, and lookups on other threads while one puts.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "nodecache.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static struct nodecache_file file(uint64_t ino, uint64_t records)
{
	return (struct nodecache_file){ .dev = 1,
					.ino = ino,
					.size = 1000,
					.mtime_ns = 5,
					.ctime_ns = 6,
					.records = records };
}

Test(nodecache, off_without_budget)
{
	struct nodecache *c = (struct nodecache *)1;
	struct nodecache_file f = file(1, 4);
	uint32_t len;

	cr_assert_eq(nodecache_new(&c, 0), 0);
	cr_expect_null(c);
	cr_expect_null(nodecache_attach(c, &f, 1));
	cr_expect_null(nodecache_get(NULL, 0, 0, &len));
	cr_expect(!nodecache_put(NULL, 0, 0, "x", 1));
	nodecache_free(c);
}

Test(nodecache, records_in_place_by_identity)
{
	struct nodecache *c;
	struct nodecache_file a[2] = { file(1, 10), file(2, 5) },
			      b = file(3, 10);
	struct nodecache_set *s, *t, *u;
	const unsigned char *p;
	uint32_t len = 0;
	struct nodecache_stats st;

	cr_assert_eq(nodecache_new(&c, 64u << 20), 0);
	s = nodecache_attach(c, a, 2);
	cr_assert_not_null(s);
	cr_expect_null(nodecache_get(s, 1, 4, &len), "nothing put yet");
	cr_expect(nodecache_put(s, 1, 4, "hello", 5));
	p = nodecache_get(s, 1, 4, &len);
	cr_assert_not_null(p);
	cr_expect_eq(len, 5);
	cr_expect(!memcmp(p, "hello", 5));
	/* Put again: the first copy stays, where it was. */
	cr_expect(nodecache_put(s, 1, 4, "world", 5));
	cr_expect_eq(nodecache_get(s, 1, 4, &len), p);
	cr_expect(!memcmp(p, "hello", 5));
	/* Out of range: shard or record. */
	cr_expect(!nodecache_put(s, 2, 0, "x", 1));
	cr_expect(!nodecache_put(s, 1, 5, "x", 1));
	cr_expect_null(nodecache_get(s, 0, 10, &len));
	/* The same files: the same set. Others (one inode off): another. */
	t = nodecache_attach(c, a, 2);
	cr_expect_eq(t, s);
	u = nodecache_attach(c, &b, 1);
	cr_assert_not_null(u);
	cr_expect_neq(u, s);
	cr_expect_null(nodecache_get(u, 0, 4, &len),
		       "no record of another file");
	a[1].ctime_ns++; /* written since: another set */
	t = nodecache_attach(c, a, 2);
	cr_expect_neq(t, s);
	cr_expect_null(nodecache_get(t, 1, 4, &len));
	nodecache_detach(t);
	/* An empty record is kept too. */
	cr_expect(nodecache_put(s, 0, 0, "", 0));
	cr_expect_not_null(nodecache_get(s, 0, 0, &len));
	cr_expect_eq(len, 0);
	nodecache_count(s, 3, 2);
	nodecache_stats(c, &st);
	cr_expect_eq(st.records, 2);
	cr_expect_eq(st.hits, 3);
	cr_expect_eq(st.misses, 2);
	cr_expect_eq(st.attached, 2);
	nodecache_detach(s);
	nodecache_detach(s);
	nodecache_detach(u);
	nodecache_stats(c, &st);
	cr_expect_eq(st.attached, 0);
	cr_expect_eq(st.sets, 3, "idle sets are kept");
	nodecache_free(c);
}

/*
 * With room for about half the records, the first half put stays and
 * the rest is refused: nothing is evicted while the set is used, so a
 * random order hits the same half every epoch.
 */
Test(nodecache, budget_keeps_the_first)
{
	enum { N = 8000, LEN = 1000 }; /* a chunk holds about 4190 */
	static unsigned char rec[LEN];
	struct nodecache *c;
	struct nodecache_file f = file(7, N);
	struct nodecache_set *s;
	struct nodecache_stats st;
	uint32_t len, kept = 0, first_refused = N;

	/* The index (16 bytes a record) and a budget of one chunk. */
	cr_assert_eq(nodecache_new(&c, NODECACHE_CHUNK + 16 * N), 0);
	s = nodecache_attach(c, &f, 1);
	cr_assert_not_null(s);
	for (uint32_t i = 0; i < N; i++) {
		memset(rec, (int)(i & 0xff), sizeof(rec));
		if (nodecache_put(s, 0, i, rec, LEN))
			kept++;
		else if (first_refused == N)
			first_refused = i;
	}
	cr_expect_gt(kept, NODECACHE_CHUNK / (LEN + 8) - 2);
	cr_expect_leq(kept, NODECACHE_CHUNK / LEN);
	cr_expect_eq(first_refused, kept, "kept: the first ones, then none");
	for (uint32_t i = 0; i < N; i++) {
		const unsigned char *p = nodecache_get(s, 0, i, &len);

		if (i < kept) {
			cr_assert_not_null(p, "record %u", i);
			cr_expect_eq(p[0], i & 0xff);
			cr_expect_eq(p[LEN - 1], i & 0xff);
		} else {
			cr_expect_null(p, "record %u", i);
		}
	}
	nodecache_stats(c, &st);
	cr_expect_leq(st.used, st.budget);
	nodecache_detach(s);
	nodecache_free(c);
}

/* A set in use takes the room of sets no stream uses, the oldest first. */
Test(nodecache, idle_sets_make_room)
{
	/* More than half a chunk: one record a chunk. */
	static unsigned char rec[NODECACHE_CHUNK - 64];
	struct nodecache *c;
	struct nodecache_file f[3] = { file(1, 8), file(2, 8), file(3, 8) };
	struct nodecache_set *s[3];
	struct nodecache_stats st;
	uint32_t len;

	cr_assert_eq(nodecache_new(&c, 2 * NODECACHE_CHUNK + 1024), 0);
	for (int k = 0; k < 2; k++) {
		s[k] = nodecache_attach(c, &f[k], 1);
		cr_assert_not_null(s[k]);
		cr_expect(nodecache_put(s[k], 0, 0, rec, sizeof(rec)));
		nodecache_detach(s[k]);
	}
	nodecache_stats(c, &st);
	cr_expect_eq(st.sets, 2);
	/* Set 1 used again: the newest. Set 2 needs room: set 0 goes. */
	cr_expect_eq(nodecache_attach(c, &f[1], 1), s[1]);
	s[2] = nodecache_attach(c, &f[2], 1);
	cr_assert_not_null(s[2]);
	cr_expect(nodecache_put(s[2], 0, 0, rec, sizeof(rec)),
		  "an idle set gave its room");
	nodecache_stats(c, &st);
	cr_expect_eq(st.sets, 2);
	cr_expect_not_null(nodecache_get(s[1], 0, 0, &len),
			   "the set in use stays");
	/* Both in use: no room for more, and nothing evicted. */
	cr_expect(!nodecache_put(s[2], 0, 1, rec, sizeof(rec)));
	cr_expect_not_null(nodecache_get(s[1], 0, 0, &len));
	cr_expect_not_null(nodecache_get(s[2], 0, 0, &len));
	nodecache_detach(s[1]);
	nodecache_detach(s[2]);
	nodecache_free(c);
}

struct race {
	struct nodecache_set *s;
	uint32_t n;
	int bad;
};

/* Readers see a record whole or not at all, while another thread puts. */
static void *reader(void *arg)
{
	struct race *r = arg;

	for (int round = 0; round < 200; round++)
		for (uint32_t i = 0; i < r->n; i++) {
			uint32_t len;
			const unsigned char *p =
				nodecache_get(r->s, 0, i, &len);

			if (p && (len != 64 || p[0] != (i & 0xff) ||
				  p[63] != (i & 0xff)))
				__atomic_fetch_add(&r->bad, 1,
						   __ATOMIC_RELAXED);
		}
	return NULL;
}

Test(nodecache, lookups_while_putting)
{
	struct nodecache *c;
	struct nodecache_file f = file(9, 5000);
	struct race r = { .n = 5000 };
	pthread_t t[3];
	unsigned char rec[64];

	cr_assert_eq(nodecache_new(&c, 64u << 20), 0);
	r.s = nodecache_attach(c, &f, 1);
	cr_assert_not_null(r.s);
	for (size_t k = 0; k < NELEM(t); k++)
		cr_assert_eq(pthread_create(&t[k], NULL, reader, &r), 0);
	for (uint32_t i = 0; i < r.n; i++) {
		memset(rec, (int)(i & 0xff), sizeof(rec));
		cr_expect(nodecache_put(r.s, 0, i, rec, sizeof(rec)));
	}
	for (size_t k = 0; k < NELEM(t); k++)
		pthread_join(t[k], NULL);
	cr_expect_eq(r.bad, 0, "a record seen half written");
	nodecache_detach(r.s);
	nodecache_free(c);
}
