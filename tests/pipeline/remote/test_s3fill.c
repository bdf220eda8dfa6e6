/*
 * test_s3fill.c - shards arriving while their stream reads them: what a
 * reader's wait returns, and when.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "clock.h"
#include "s3fill.h"
#include "../../unit_util.h"

static struct rfill *one(uint64_t have, uint64_t tail)
{
	struct rfill *f;
	struct diag d = { "" };

	cr_assert_eq(rfill_new(&f, 3, &d), 0, "%s", d.msg);
	rfill_add(f, 1, have, tail);
	return f;
}

Test(rfill, arrivals)
{
	struct rfill *f = one(64, 1000);

	cr_assert(rfill_has(f, 1));
	cr_assert(!rfill_has(f, 2));
	cr_assert(!rfill_has(f, 3), "past the last shard");
	cr_assert(!rfill_has(NULL, 0));
	rfill_put(f);
}

/* Bytes already there: the header, the tail, and what came. */
Test(rfill, there_already)
{
	struct rfill *f = one(64, 1000);
	struct diag d = { "" };
	bool stop = true; /* a wait for what is not there ends at once */

	cr_assert_eq(rfill_wait(f, 1, 0, 64, &stop, &d), 0);
	cr_assert_eq(rfill_wait(f, 1, 1000, 1200, &stop, &d), 0, "the tail");
	cr_assert_eq(rfill_wait(f, 1, 64, 65, &stop, &d), -ECANCELED);
	rfill_came(f, 1, 500);
	cr_assert_eq(rfill_wait(f, 1, 100, 500, &stop, &d), 0);
	cr_assert_eq(rfill_wait(f, 1, 100, 501, &stop, &d), -ECANCELED);
	rfill_came(f, 1, 300);
	cr_assert_eq(rfill_wait(f, 1, 100, 500, &stop, &d), 0,
		     "progress only grows");
	cr_assert(!rfill_wanted(f, 1), "nobody had to wait");
	cr_assert(rfill_waited(f) == 0.0, "nobody waited");
	/* Up to the tail is all: the tail itself was there. */
	rfill_came(f, 1, 1000);
	cr_assert_eq(rfill_wait(f, 1, 900, 1100, NULL, &d), 0);
	rfill_put(f);
}

Test(rfill, stop_ends_a_wait)
{
	struct rfill *f = one(64, 1000);
	struct diag d = { "" };
	bool stop = true;
	int64_t t0 = clock_mono_ns();

	cr_assert_eq(rfill_wait(f, 1, 64, 600, &stop, &d), -ECANCELED);
	cr_assert_lt(clock_mono_ns() - t0, 1000000000);
	rfill_put(f);
}

Test(rfill, failure_reaches_the_reader)
{
	struct rfill *f = one(64, 1000);
	struct diag d = { "" };

	rfill_came(f, 1, 200);
	rfill_end(f, 1, -EIO, "s3://b/k: GET HTTP 500, after 6 tries");
	cr_assert_eq(rfill_wait(f, 1, 64, 200, NULL, &d), 0,
		     "what came before the failure is there");
	cr_assert_eq(rfill_wait(f, 1, 64, 600, NULL, &d), -EIO);
	cr_assert(strstr(d.msg, "s3://b/k: GET HTTP 500"), "%s", d.msg);
	rfill_put(f);
}

Test(rfill, whole_is_all_there)
{
	struct rfill *f = one(64, 1000);
	struct diag d = { "" };

	rfill_end(f, 1, 0, NULL);
	cr_assert_eq(rfill_wait(f, 1, 64, 999, NULL, &d), 0);
	rfill_put(f);
}

struct feeder {
	struct rfill *f;
	uint64_t to;
};

static void *feed(void *arg)
{
	struct feeder *fd = arg;

	/* Nothing comes before a reader waits: it must have been woken. */
	for (int i = 0; i < 5000 && !rfill_wanted(fd->f, 1); i++)
		usleep(1000);
	for (uint64_t at = 128; at <= fd->to; at += 64) {
		usleep(2000);
		rfill_came(fd->f, 1, at);
	}
	rfill_came(fd->f, 1, fd->to);
	rfill_end(fd->f, 1, 0, NULL);
	return NULL;
}

/* A reader waits while another thread's fetch brings the bytes. */
Test(rfill, woken_by_the_fetch)
{
	struct rfill *f = one(64, 1000);
	struct feeder fd = { rfill_get(f), 1000 };
	struct diag d = { "" };
	pthread_t t;
	bool stop = false;
	int64_t t0 = clock_mono_ns();
	double took;

	cr_assert_eq(pthread_create(&t, NULL, feed, &fd), 0);
	for (uint64_t end = 100; end <= 1000; end += 150) {
		cr_assert_eq(rfill_wait(f, 1, end - 36, end, &stop, &d), 0,
			     "%s", d.msg);
	}
	took = (double)(clock_mono_ns() - t0) / 1e9;
	cr_assert(rfill_wanted(f, 1), "the fetch was told a reader waited");
	/* 1000 bytes at 64 per 2 ms: the reader waited most of 28 ms. */
	cr_assert(rfill_waited(f) >= 0.014 && rfill_waited(f) <= took,
		  "waited %.3f s of %.3f", rfill_waited(f), took);
	pthread_join(t, NULL);
	rfill_put(fd.f);
	rfill_put(f);
}

Test(rfill, cancel_flag)
{
	struct rfill *f = one(64, 1000);
	const bool *c = rfill_cancelled(f);

	cr_assert(!*c);
	rfill_cancel(f);
	cr_assert(*c);
	rfill_cancel(NULL);
	rfill_put(f);
	rfill_put(NULL);
}

/*
 * A second stage's shard linked to a fetch in progress: its reader waits
 * on that fetch, which goes on until both streams are done with it.
 */
Test(rfill, linked_shard_waits_on_its_fetch)
{
	struct rfill *src = one(64, 1000), *f;
	const bool *c = rfill_cancelled(src);
	struct diag d = { "" };
	bool stop = true;

	cr_assert_eq(rfill_new(&f, 5, &d), 0, "%s", d.msg);
	cr_assert_eq(rfill_link(f, 4, src, 1), 0);
	cr_assert_eq(rfill_link(f, 2, src, 1), 0, "a second link, one use");
	cr_assert(rfill_has(f, 4));
	cr_assert(!rfill_has(f, 3));
	cr_assert_eq(rfill_wait(f, 4, 0, 64, &stop, &d), 0, "the header");
	cr_assert_eq(rfill_wait(f, 4, 64, 200, &stop, &d), -ECANCELED);
	rfill_came(src, 1, 200);
	cr_assert_eq(rfill_wait(f, 4, 64, 200, &stop, &d), 0,
		     "what came to its fetch");
	rfill_cancel(src);
	cr_assert(!*c, "the fetch goes on for the linked stream");
	rfill_cancel(src);
	cr_assert(!*c, "a stream done twice is done once");
	rfill_end(src, 1, -EIO, "s3://b/k: GET HTTP 500");
	cr_assert_eq(rfill_wait(f, 4, 300, 400, &stop, &d), -EIO);
	cr_assert(strstr(d.msg, "HTTP 500"), "%s", d.msg);
	/* The source's own reference goes; the link keeps it. */
	rfill_put(src);
	rfill_cancel(f);
	cr_assert(*c, "both streams done: the fetch stops");
	rfill_put(f);
}

Test(rfill, no_link_to_a_stopping_fetch)
{
	struct rfill *src = one(64, 1000), *f, *g;
	struct diag d = { "" };

	cr_assert_eq(rfill_new(&f, 2, &d), 0, "%s", d.msg);
	cr_assert_eq(rfill_new(&g, 2, &d), 0, "%s", d.msg);
	cr_assert_eq(rfill_link(f, 0, src, 1), 0);
	rfill_cancel(src);
	rfill_cancel(f);
	cr_assert(*rfill_cancelled(src));
	cr_assert_eq(rfill_link(g, 0, src, 1), -ECANCELED);
	cr_assert(!rfill_has(g, 0));
	rfill_put(g);
	rfill_put(f);
	rfill_put(src);
}

Test(rfill, stop_whoever_uses_it)
{
	struct rfill *src = one(64, 1000), *f;
	struct diag d = { "" };

	cr_assert_eq(rfill_new(&f, 2, &d), 0, "%s", d.msg);
	cr_assert_eq(rfill_link(f, 0, src, 1), 0);
	rfill_stop(src);
	cr_assert(*rfill_cancelled(src), "the daemon stops: the fetch stops");
	rfill_stop(NULL);
	rfill_cancel(f);
	rfill_cancel(src);
	rfill_put(f);
	rfill_put(src);
}
