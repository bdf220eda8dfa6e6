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

static struct s3fill *one(uint64_t have, uint64_t tail)
{
	struct s3fill *f;
	struct diag d = { "" };

	cr_assert_eq(s3fill_new(&f, 3, &d), 0, "%s", d.msg);
	s3fill_add(f, 1, have, tail);
	return f;
}

Test(s3fill, arrivals)
{
	struct s3fill *f = one(64, 1000);

	cr_assert(s3fill_has(f, 1));
	cr_assert(!s3fill_has(f, 2));
	cr_assert(!s3fill_has(f, 3), "past the last shard");
	cr_assert(!s3fill_has(NULL, 0));
	s3fill_put(f);
}

/* Bytes already there: the header, the tail, and what came. */
Test(s3fill, there_already)
{
	struct s3fill *f = one(64, 1000);
	struct diag d = { "" };
	bool stop = true; /* a wait for what is not there ends at once */

	cr_assert_eq(s3fill_wait(f, 1, 0, 64, &stop, &d), 0);
	cr_assert_eq(s3fill_wait(f, 1, 1000, 1200, &stop, &d), 0, "the tail");
	cr_assert_eq(s3fill_wait(f, 1, 64, 65, &stop, &d), -ECANCELED);
	s3fill_came(f, 1, 500);
	cr_assert_eq(s3fill_wait(f, 1, 100, 500, &stop, &d), 0);
	cr_assert_eq(s3fill_wait(f, 1, 100, 501, &stop, &d), -ECANCELED);
	s3fill_came(f, 1, 300);
	cr_assert_eq(s3fill_wait(f, 1, 100, 500, &stop, &d), 0,
		     "progress only grows");
	cr_assert(!s3fill_wanted(f, 1), "nobody had to wait");
	cr_assert(s3fill_waited(f) == 0.0, "nobody waited");
	/* Up to the tail is all: the tail itself was there. */
	s3fill_came(f, 1, 1000);
	cr_assert_eq(s3fill_wait(f, 1, 900, 1100, NULL, &d), 0);
	s3fill_put(f);
}

Test(s3fill, stop_ends_a_wait)
{
	struct s3fill *f = one(64, 1000);
	struct diag d = { "" };
	bool stop = true;
	int64_t t0 = clock_mono_ns();

	cr_assert_eq(s3fill_wait(f, 1, 64, 600, &stop, &d), -ECANCELED);
	cr_assert_lt(clock_mono_ns() - t0, 1000000000);
	s3fill_put(f);
}

Test(s3fill, failure_reaches_the_reader)
{
	struct s3fill *f = one(64, 1000);
	struct diag d = { "" };

	s3fill_came(f, 1, 200);
	s3fill_end(f, 1, -EIO, "s3://b/k: GET HTTP 500, after 6 tries");
	cr_assert_eq(s3fill_wait(f, 1, 64, 200, NULL, &d), 0,
		     "what came before the failure is there");
	cr_assert_eq(s3fill_wait(f, 1, 64, 600, NULL, &d), -EIO);
	cr_assert(strstr(d.msg, "s3://b/k: GET HTTP 500"), "%s", d.msg);
	s3fill_put(f);
}

Test(s3fill, whole_is_all_there)
{
	struct s3fill *f = one(64, 1000);
	struct diag d = { "" };

	s3fill_end(f, 1, 0, NULL);
	cr_assert_eq(s3fill_wait(f, 1, 64, 999, NULL, &d), 0);
	s3fill_put(f);
}

struct feeder {
	struct s3fill *f;
	uint64_t to;
};

static void *feed(void *arg)
{
	struct feeder *fd = arg;

	/* Nothing comes before a reader waits: it must have been woken. */
	for (int i = 0; i < 5000 && !s3fill_wanted(fd->f, 1); i++)
		usleep(1000);
	for (uint64_t at = 128; at <= fd->to; at += 64) {
		usleep(2000);
		s3fill_came(fd->f, 1, at);
	}
	s3fill_came(fd->f, 1, fd->to);
	s3fill_end(fd->f, 1, 0, NULL);
	return NULL;
}

/* A reader waits while another thread's fetch brings the bytes. */
Test(s3fill, woken_by_the_fetch)
{
	struct s3fill *f = one(64, 1000);
	struct feeder fd = { s3fill_get(f), 1000 };
	struct diag d = { "" };
	pthread_t t;
	bool stop = false;
	int64_t t0 = clock_mono_ns();
	double took;

	cr_assert_eq(pthread_create(&t, NULL, feed, &fd), 0);
	for (uint64_t end = 100; end <= 1000; end += 150) {
		cr_assert_eq(s3fill_wait(f, 1, end - 36, end, &stop, &d), 0,
			     "%s", d.msg);
	}
	took = (double)(clock_mono_ns() - t0) / 1e9;
	cr_assert(s3fill_wanted(f, 1), "the fetch was told a reader waited");
	/* 1000 bytes at 64 per 2 ms: the reader waited most of 28 ms. */
	cr_assert(s3fill_waited(f) >= 0.014 && s3fill_waited(f) <= took,
		  "waited %.3f s of %.3f", s3fill_waited(f), took);
	pthread_join(t, NULL);
	s3fill_put(fd.f);
	s3fill_put(f);
}

Test(s3fill, cancel_flag)
{
	struct s3fill *f = one(64, 1000);
	const bool *c = s3fill_cancelled(f);

	cr_assert(!*c);
	s3fill_cancel(f);
	cr_assert(*c);
	s3fill_cancel(NULL);
	s3fill_put(f);
	s3fill_put(NULL);
}

/*
 * A second stage's shard linked to a fetch in progress: its reader waits
 * on that fetch, which goes on until both streams are done with it.
 */
Test(s3fill, linked_shard_waits_on_its_fetch)
{
	struct s3fill *src = one(64, 1000), *f;
	const bool *c = s3fill_cancelled(src);
	struct diag d = { "" };
	bool stop = true;

	cr_assert_eq(s3fill_new(&f, 5, &d), 0, "%s", d.msg);
	cr_assert_eq(s3fill_link(f, 4, src, 1), 0);
	cr_assert_eq(s3fill_link(f, 2, src, 1), 0, "a second link, one use");
	cr_assert(s3fill_has(f, 4));
	cr_assert(!s3fill_has(f, 3));
	cr_assert_eq(s3fill_wait(f, 4, 0, 64, &stop, &d), 0, "the header");
	cr_assert_eq(s3fill_wait(f, 4, 64, 200, &stop, &d), -ECANCELED);
	s3fill_came(src, 1, 200);
	cr_assert_eq(s3fill_wait(f, 4, 64, 200, &stop, &d), 0,
		     "what came to its fetch");
	s3fill_cancel(src);
	cr_assert(!*c, "the fetch goes on for the linked stream");
	s3fill_cancel(src);
	cr_assert(!*c, "a stream done twice is done once");
	s3fill_end(src, 1, -EIO, "s3://b/k: GET HTTP 500");
	cr_assert_eq(s3fill_wait(f, 4, 300, 400, &stop, &d), -EIO);
	cr_assert(strstr(d.msg, "HTTP 500"), "%s", d.msg);
	/* The source's own reference goes; the link keeps it. */
	s3fill_put(src);
	s3fill_cancel(f);
	cr_assert(*c, "both streams done: the fetch stops");
	s3fill_put(f);
}

Test(s3fill, no_link_to_a_stopping_fetch)
{
	struct s3fill *src = one(64, 1000), *f, *g;
	struct diag d = { "" };

	cr_assert_eq(s3fill_new(&f, 2, &d), 0, "%s", d.msg);
	cr_assert_eq(s3fill_new(&g, 2, &d), 0, "%s", d.msg);
	cr_assert_eq(s3fill_link(f, 0, src, 1), 0);
	s3fill_cancel(src);
	s3fill_cancel(f);
	cr_assert(*s3fill_cancelled(src));
	cr_assert_eq(s3fill_link(g, 0, src, 1), -ECANCELED);
	cr_assert(!s3fill_has(g, 0));
	s3fill_put(g);
	s3fill_put(f);
	s3fill_put(src);
}

Test(s3fill, stop_whoever_uses_it)
{
	struct s3fill *src = one(64, 1000), *f;
	struct diag d = { "" };

	cr_assert_eq(s3fill_new(&f, 2, &d), 0, "%s", d.msg);
	cr_assert_eq(s3fill_link(f, 0, src, 1), 0);
	s3fill_stop(src);
	cr_assert(*s3fill_cancelled(src), "the daemon stops: the fetch stops");
	s3fill_stop(NULL);
	s3fill_cancel(f);
	s3fill_cancel(src);
	s3fill_put(f);
	s3fill_put(src);
}
