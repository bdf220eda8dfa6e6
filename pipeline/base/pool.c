/*
 * pool.c - worker threads that share out the samples of a batch.
 *
 * A job is posted on a short list under the pool's lock (once per batch,
 * not per sample). Threads pick the oldest job that still has unclaimed
 * indices and room for another helper, then claim indices with an
 * atomic fetch-add until none are left. The caller works on its own job
 * too, so a batch never waits for a free pool thread, and then sleeps
 * until the helpers that joined have left.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>

#include "clock.h"
#include "pool.h"

struct pool_job {
	pool_fn fn;
	void *arg;
	uint32_t n;
	uint32_t max_workers;
	uint32_t next;	  /* atomic: next index to claim */
	uint32_t helpers; /* pool threads working on it (under lock) */
	struct pool_job *link;
};

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t work;   /* a job was posted, or stop */
	pthread_cond_t left;   /* a helper left a job */
	struct pool_job *jobs; /* FIFO: oldest first */
	bool stop;
	uint32_t n;
	pthread_t *threads;
	/* atomic: time spent running items, by the pool's threads and by callers */
	uint64_t busy_pool_ns, busy_caller_ns;
};

/*
 * Claim and run indices of j until none is left. Indices go in small runs:
 * one contended atomic per run rather than per item, while runs stay short
 * enough to share a batch out evenly. The last POOL_TAIL indices go one
 * at a time: with items of milliseconds (a JPEG), a run of 4 claimed at
 * the end would keep one thread busy while the others wait for the batch.
 * The look at `next` is only a hint; the fetch-add decides.
 */
#define POOL_RUN  4
#define POOL_TAIL 32

static void drain(struct pool_job *j, uint32_t worker)
{
	for (;;) {
		uint32_t seen = __atomic_load_n(&j->next, __ATOMIC_RELAXED);
		uint32_t run = seen + POOL_TAIL < j->n ? POOL_RUN : 1;
		uint32_t i =
			__atomic_fetch_add(&j->next, run, __ATOMIC_RELAXED);
		uint32_t end = i + run < j->n ? i + run : j->n;

		if (i >= j->n)
			return;
		for (; i < end; i++)
			j->fn(j->arg, i, worker);
	}
}

static void unlink_job(struct pool *p, struct pool_job *j)
{
	for (struct pool_job **pp = &p->jobs; *pp; pp = &(*pp)->link)
		if (*pp == j) {
			*pp = j->link;
			return;
		}
}

static struct pool_job *pick(struct pool *p)
{
	for (struct pool_job *j = p->jobs; j; j = j->link) {
		if (__atomic_load_n(&j->next, __ATOMIC_RELAXED) >= j->n)
			continue;
		if (j->max_workers && j->helpers >= j->max_workers)
			continue;
		return j;
	}
	return NULL;
}

struct pool_thread {
	struct pool *p;
	uint32_t id;
};

static void *pool_main(void *arg)
{
	struct pool_thread *t = arg;
	struct pool *p = t->p;
	uint32_t id = t->id;
	uint64_t t0;
	char name[16];

	/* "ld-decode/N": top -H and perf tell the decoders apart. */
	snprintf(name, sizeof(name), "ld-decode/%u", id);
	pthread_setname_np(pthread_self(), name);
	free(t);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct pool_job *j = NULL;

		while (!p->stop && !(j = pick(p)))
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stop)
			break;
		j->helpers++;
		pthread_mutex_unlock(&p->lock);
		t0 = clock_mono_ns();
		drain(j, id);
		__atomic_fetch_add(&p->busy_pool_ns, clock_mono_ns() - t0,
				   __ATOMIC_RELAXED);
		pthread_mutex_lock(&p->lock);
		j->helpers--;
		pthread_cond_broadcast(&p->left);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int pool_new(struct pool **out, uint32_t n)
{
	struct pool *p = calloc(1, sizeof(*p));
	int err = 0;

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->left, NULL);
	p->threads = calloc(n ? n : 1, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return -ENOMEM;
	}
	for (; p->n < n; p->n++) {
		struct pool_thread *t = malloc(sizeof(*t));

		if (!t) {
			err = -ENOMEM;
			break;
		}
		*t = (struct pool_thread){ p, p->n };
		err = -pthread_create(&p->threads[p->n], NULL, pool_main, t);
		if (err) {
			free(t);
			break;
		}
	}
	if (err) {
		pool_free(p);
		return err;
	}
	*out = p;
	return 0;
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (uint32_t i = 0; i < p->n; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->left);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

uint32_t pool_workers(const struct pool *p)
{
	return p->n;
}

void pool_run(struct pool *p, pool_fn fn, void *arg, uint32_t n,
	      uint32_t max_workers)
{
	struct pool_job j = {
		.fn = fn,
		.arg = arg,
		.n = n,
		.max_workers = max_workers,
	};
	struct pool_job **tail;
	uint64_t t0;

	if (n == 0)
		return;
	t0 = clock_mono_ns();
	if (p->n == 0 || n == 1) {
		j.next = n;
		for (uint32_t i = 0; i < n; i++)
			fn(arg, i, p->n);
		__atomic_fetch_add(&p->busy_caller_ns, clock_mono_ns() - t0,
				   __ATOMIC_RELAXED);
		return;
	}
	pthread_mutex_lock(&p->lock);
	for (tail = &p->jobs; *tail; tail = &(*tail)->link)
		;
	*tail = &j;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);

	drain(&j, p->n);
	__atomic_fetch_add(&p->busy_caller_ns, clock_mono_ns() - t0,
			   __ATOMIC_RELAXED);

	/* All indices are claimed; wait for helpers still running theirs. */
	pthread_mutex_lock(&p->lock);
	unlink_job(p, &j);
	while (j.helpers)
		pthread_cond_wait(&p->left, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

void pool_busy(const struct pool *p, uint64_t *pool_ns, uint64_t *caller_ns)
{
	*pool_ns = __atomic_load_n(&p->busy_pool_ns, __ATOMIC_RELAXED);
	*caller_ns = __atomic_load_n(&p->busy_caller_ns, __ATOMIC_RELAXED);
}
