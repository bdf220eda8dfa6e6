/*
 * test_pool.c - the shared worker pool: every index runs exactly once,
 * from one caller or several at once, with and without pool threads and
 * under a helper cap; and its busy-time counters add up to the work done.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <criterion/criterion.h>

#include "pool.h"
#include "../../unit_util.h"

#define N_ITEMS 5000

struct job {
	uint32_t hits[N_ITEMS];
	uint32_t max_worker; /* atomic: the largest worker id seen */
	uint32_t workers;    /* pool_workers() of the pool */
	long sleep_ns;	     /* per item */
};

static void count(void *arg, uint32_t i, uint32_t worker)
{
	struct job *j = arg;
	uint32_t seen = __atomic_load_n(&j->max_worker, __ATOMIC_RELAXED);

	__atomic_fetch_add(&j->hits[i], 1, __ATOMIC_RELAXED);
	while (worker > seen && !__atomic_compare_exchange_n(
					&j->max_worker, &seen, worker, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	if (j->sleep_ns) {
		struct timespec ts = { 0, j->sleep_ns };

		nanosleep(&ts, NULL);
	}
}

static void check_once(const struct job *j, uint32_t n)
{
	for (uint32_t i = 0; i < N_ITEMS; i++)
		cr_assert_eq(j->hits[i], i < n ? 1u : 0u,
			     "index %u ran %u times (n %u)", i, j->hits[i], n);
	cr_assert_leq(j->max_worker, j->workers,
		      "worker id %u past the caller's (%u)", j->max_worker,
		      j->workers);
}

Test(pool, every_index_once)
{
	static const uint32_t threads[] = { 0, 1, 3 };
	static const uint32_t sizes[] = { 0, 1, 2, 33, 4999, N_ITEMS };

	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
		struct pool *p;

		cr_assert_eq(pool_new(&p, threads[t]), 0);
		cr_assert_eq(pool_workers(p), threads[t]);
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
			for (uint32_t cap = 0; cap < 3; cap++) {
				struct job *j = calloc(1, sizeof(*j));

				j->workers = threads[t];
				pool_run(p, count, j, sizes[k], cap);
				check_once(j, sizes[k]);
				free(j);
			}
		pool_free(p);
	}
	pool_free(NULL);
}

struct caller {
	struct pool *p;
	struct job j;
};

static void *call(void *arg)
{
	struct caller *c = arg;

	for (int r = 0; r < 20; r++) {
		for (uint32_t i = 0; i < N_ITEMS; i++)
			c->j.hits[i] = 0;
		pool_run(c->p, count, &c->j, N_ITEMS, 0);
		for (uint32_t i = 0; i < N_ITEMS; i++)
			if (c->j.hits[i] != 1)
				return (void *)1;
	}
	return NULL;
}

/* Streams call pool_run() side by side: their jobs must not mix. */
Test(pool, concurrent_callers)
{
	struct caller c[4];
	pthread_t t[4];
	struct pool *p;

	cr_assert_eq(pool_new(&p, 2), 0);
	for (int k = 0; k < 4; k++) {
		c[k] = (struct caller){ .p = p };
		c[k].j.workers = 2;
		cr_assert_eq(pthread_create(&t[k], NULL, call, &c[k]), 0);
	}
	for (int k = 0; k < 4; k++) {
		void *bad;

		cr_assert_eq(pthread_join(t[k], &bad), 0);
		cr_expect_null(bad,
			       "caller %d saw an index run other than once", k);
	}
	pool_free(p);
}

/*
 * Items that each sleep 1 ms: the pool's threads and the caller together
 * are busy for at least the items' total, and for no more than three
 * threads could have been over the wall time. Helpers count their time
 * before they leave a job, so pool_run() returns with all of it counted.
 */
Test(pool, busy_time)
{
	struct job *j = calloc(1, sizeof(*j));
	uint64_t pool_ns, caller_ns, wall;
	struct timespec a, b;
	struct pool *p;
	uint32_t n = 200;

	cr_assert_eq(pool_new(&p, 2), 0);
	pool_busy(p, &pool_ns, &caller_ns);
	cr_assert_eq(pool_ns + caller_ns, 0);
	j->workers = 2;
	j->sleep_ns = 1000000;
	clock_gettime(CLOCK_MONOTONIC, &a);
	pool_run(p, count, j, n, 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	check_once(j, n);
	wall = (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u +
	       (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec;
	pool_busy(p, &pool_ns, &caller_ns);
	cr_expect_geq(pool_ns + caller_ns, (uint64_t)n * 1000000u,
		      "busy %lu + %lu ns for %u items of 1 ms",
		      (unsigned long)pool_ns, (unsigned long)caller_ns, n);
	cr_expect_leq(pool_ns + caller_ns, 3 * wall,
		      "busy %lu + %lu ns in %lu ns on 3 threads",
		      (unsigned long)pool_ns, (unsigned long)caller_ns,
		      (unsigned long)wall);
	cr_expect_gt(caller_ns, 0, "the caller works on its own job");
	/* One item: the caller runs it alone, and counts it. */
	j->sleep_ns = 0;
	for (uint32_t i = 0; i < N_ITEMS; i++)
		j->hits[i] = 0;
	pool_busy(p, &pool_ns, &caller_ns);
	wall = caller_ns;
	pool_run(p, count, j, 1, 0);
	pool_busy(p, &pool_ns, &caller_ns);
	cr_expect_gt(caller_ns, wall);
	pool_free(p);
	free(j);
}
