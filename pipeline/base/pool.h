/*
 * pool.h - the daemon's worker threads, shared by every stream.
 *
 * Work is handed over a batch at a time: pool_run() runs fn(arg, i,
 * worker) for every i in [0, n) on up to max_workers pool threads plus
 * the calling thread, and returns when all have finished. Indices are
 * claimed with one atomic increment each: no lock and no syscall per
 * item. Jobs from several streams queue and run side by side.
 */
#ifndef LD_POOL_H
#define LD_POOL_H

#include <stdint.h>

struct pool;

/*
 * fn runs once per index. `worker` identifies the thread running it, in
 * [0, pool_workers(p)], the caller being pool_workers(p): use it to pick
 * per-thread scratch memory and decoder state.
 */
typedef void (*pool_fn)(void *arg, uint32_t i, uint32_t worker);

/* Start n worker threads (0: none; the caller then does all the work). */
int pool_new(struct pool **out, uint32_t n);

/* Stop and join the threads. NULL is a no-op. No job may be running. */
void pool_free(struct pool *p);

/* Number of pool threads (callers add one for themselves). */
uint32_t pool_workers(const struct pool *p);

/*
 * Time spent running items since the pool started, in nanoseconds summed
 * over threads: by the pool's threads (pool_ns; their use is pool_ns /
 * (pool_workers() x elapsed time)) and by the callers of pool_run()
 * (caller_ns), each of which works on its own job. A drain in progress
 * counts when it ends: the figures lag by at most one batch.
 */
void pool_busy(const struct pool *p, uint64_t *pool_ns, uint64_t *caller_ns);

/*
 * Run fn for i in [0, n) with at most max_workers pool threads helping
 * (0: all of them). Blocks until done. Thread-safe: streams call it
 * concurrently from their own threads.
 */
void pool_run(struct pool *p, pool_fn fn, void *arg, uint32_t n,
	      uint32_t max_workers);

#endif /* LD_POOL_H */
