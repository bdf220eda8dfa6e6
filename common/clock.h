/*
 * clock.h - the monotonic clock, for every layer that times something.
 *
 * clock_gettime(CLOCK_MONOTONIC) goes through the vDSO: no system call,
 * cheap enough for a few reads a batch.
 */
#ifndef LD_CLOCK_H
#define LD_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary point that never moves backwards. */
static inline uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same in milliseconds, for deadlines and timeouts. */
static inline uint64_t clock_mono_ms(void)
{
	return clock_mono_ns() / 1000000u;
}

/* The same in seconds, for rates and progress. */
static inline double clock_mono_s(void)
{
	return (double)clock_mono_ns() * 1e-9;
}

/* The calling thread's CPU time in nanoseconds (a system call); 0 on error. */
static inline uint64_t clock_thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* LD_CLOCK_H */
