/*
 * s3fill.c - shards still arriving in the shard cache (s3fill.h).
 *
 * One lock for all shards: the fetch reports progress a few times per
 * 16 KiB chunk at most, and the reader asks once per extent. Progress
 * wakes the waiters of a shard only once it reaches the least of what
 * they wait for: a reader waiting for the far end of a shard is not
 * woken at every chunk, taking the cores the fetch and the store need.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3fill.h"

struct fshard {
	bool on, ended, wanted;
	int err;
	uint64_t have, tail;
	uint64_t need; /* the least end a waiter waits for; 0: none waits */
	char *why;     /* when err */
	/* Linked: the shard arrives in another stage's fetch, as its src_i. */
	struct s3fill *src;
	uint32_t src_i;
};

struct s3fill {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned refs;
	/*
	 * Streams its fetch is for: its own (until s3fill_cancel()) and
	 * those linked to it. The fetch stops when none is left.
	 */
	unsigned users;
	bool released;
	bool cancel;
	uint32_t n;
	uint64_t waited_ns; /* readers, waiting for bytes to come */
	struct fshard *sh;
	struct s3fill **srcs; /* the fetches linked to, a reference each */
	uint32_t nsrcs;
};

int s3fill_new(struct s3fill **out, uint32_t nshards, struct diag *d)
{
	struct s3fill *f = calloc(1, sizeof(*f));
	pthread_condattr_t ca;

	*out = NULL;
	if (f)
		f->sh = calloc(nshards ? nshards : 1, sizeof(*f->sh));
	if (!f || !f->sh) {
		free(f);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	f->refs = 1;
	f->users = 1;
	f->n = nshards;
	*out = f;
	return 0;
}

struct s3fill *s3fill_get(struct s3fill *f)
{
	pthread_mutex_lock(&f->mu);
	f->refs++;
	pthread_mutex_unlock(&f->mu);
	return f;
}

void s3fill_put(struct s3fill *f)
{
	unsigned left;

	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	left = --f->refs;
	pthread_mutex_unlock(&f->mu);
	if (left)
		return;
	for (uint32_t i = 0; i < f->n; i++)
		free(f->sh[i].why);
	for (uint32_t k = 0; k < f->nsrcs; k++)
		s3fill_put(f->srcs[k]);
	free(f->srcs);
	free(f->sh);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

void s3fill_add(struct s3fill *f, uint32_t i, uint64_t have, uint64_t tail)
{
	pthread_mutex_lock(&f->mu);
	f->sh[i].on = true;
	f->sh[i].have = have;
	f->sh[i].tail = tail;
	pthread_mutex_unlock(&f->mu);
}

int s3fill_link(struct s3fill *f, uint32_t i, struct s3fill *src, uint32_t si)
{
	struct s3fill **more;
	uint32_t k;

	for (k = 0; k < f->nsrcs && f->srcs[k] != src; k++)
		;
	if (k == f->nsrcs) {
		more = realloc(f->srcs, (f->nsrcs + 1) * sizeof(*more));
		if (!more)
			return -ENOMEM;
		f->srcs = more;
		pthread_mutex_lock(&src->mu);
		if (!src->users) {
			/* Its fetch is stopping: nothing more will come. */
			pthread_mutex_unlock(&src->mu);
			return -ECANCELED;
		}
		src->users++;
		src->refs++;
		pthread_mutex_unlock(&src->mu);
		f->srcs[f->nsrcs++] = src;
	}
	pthread_mutex_lock(&f->mu);
	f->sh[i].src = src;
	f->sh[i].src_i = si;
	f->sh[i].on = true;
	pthread_mutex_unlock(&f->mu);
	return 0;
}

bool s3fill_has(const struct s3fill *f, uint32_t i)
{
	return f && i < f->n && f->sh[i].on;
}

void s3fill_came(struct s3fill *f, uint32_t i, uint64_t end)
{
	pthread_mutex_lock(&f->mu);
	if (end > f->sh[i].have) {
		f->sh[i].have = end;
		if (f->sh[i].need && end >= f->sh[i].need) {
			f->sh[i].need = 0;
			pthread_cond_broadcast(&f->cv);
		}
	}
	pthread_mutex_unlock(&f->mu);
}

void s3fill_end(struct s3fill *f, uint32_t i, int err, const char *why)
{
	pthread_mutex_lock(&f->mu);
	f->sh[i].ended = true;
	f->sh[i].err = err;
	if (err && why && !f->sh[i].why)
		f->sh[i].why = strdup(why);
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

bool s3fill_wanted(struct s3fill *f, uint32_t i)
{
	bool w;

	pthread_mutex_lock(&f->mu);
	w = f->sh[i].wanted;
	pthread_mutex_unlock(&f->mu);
	return w;
}

/* Are bytes [off, end) of sh there? */
static bool came(const struct fshard *sh, uint64_t off, uint64_t end)
{
	if (sh->ended && !sh->err)
		return true;
	return off >= sh->tail || sh->have >= (end < sh->tail ? end : sh->tail);
}

int s3fill_wait(struct s3fill *f, uint32_t i, uint64_t off, uint64_t end,
		const bool *stop, struct diag *d)
{
	struct fshard *sh = &f->sh[i];
	uint64_t t0 = 0;
	int err = 0;

	/* Set before the stream has f, never unset. */
	if (sh->src)
		return s3fill_wait(sh->src, sh->src_i, off, end, stop, d);
	pthread_mutex_lock(&f->mu);
	while (!came(sh, off, end)) {
		struct timespec ts;
		uint64_t want;

		if (sh->ended) {
			err = sh->err;
			diag_set(d, err, "%s",
				 sh->why ? sh->why : "its fetch failed");
			break;
		}
		if (stop && __atomic_load_n(stop, __ATOMIC_RELAXED)) {
			err = diag_set(d, -ECANCELED, "the stream stops");
			break;
		}
		sh->wanted = true;
		want = end < sh->tail ? end : sh->tail;
		if (!sh->need || want < sh->need)
			sh->need = want;
		/* A stop is seen within 100 ms. */
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (!t0)
			t0 = (uint64_t)ts.tv_sec * 1000000000u +
			     (uint64_t)ts.tv_nsec;
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&f->cv, &f->mu, &ts);
	}
	if (t0) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		f->waited_ns += (uint64_t)ts.tv_sec * 1000000000u +
				(uint64_t)ts.tv_nsec - t0;
	}
	pthread_mutex_unlock(&f->mu);
	return err;
}

double s3fill_waited(struct s3fill *f)
{
	uint64_t ns;

	pthread_mutex_lock(&f->mu);
	ns = f->waited_ns;
	pthread_mutex_unlock(&f->mu);
	return (double)ns / 1e9;
}

/* One stream fewer uses f's fetch; with none left, it stops. */
static void unuse(struct s3fill *f)
{
	pthread_mutex_lock(&f->mu);
	if (f->users && !--f->users)
		__atomic_store_n(&f->cancel, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->mu);
}

void s3fill_cancel(struct s3fill *f)
{
	bool first;

	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	first = !f->released;
	f->released = true;
	pthread_mutex_unlock(&f->mu);
	if (!first)
		return;
	unuse(f);
	/* Set before the stream had f: no lock needed. */
	for (uint32_t k = 0; k < f->nsrcs; k++)
		unuse(f->srcs[k]);
}

void s3fill_stop(struct s3fill *f)
{
	if (f)
		__atomic_store_n(&f->cancel, true, __ATOMIC_RELAXED);
}

const bool *s3fill_cancelled(struct s3fill *f)
{
	return &f->cancel;
}
