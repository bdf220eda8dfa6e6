/*
 * futex.h - waiting on 32-bit words in memory shared between processes.
 *
 * The ring's indices live in memfd mappings shared by two processes, so
 * these use the shared (non-PRIVATE) futex operations.
 */
#ifndef LOADER_FUTEX_H
#define LOADER_FUTEX_H

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * Sleep while *word == expected, at most timeout_ns (< 0: no limit).
 * Returns 0 when woken (or when *word already differed), -ETIMEDOUT, or
 * -EINTR.
 */
static inline int futex_wait_shared(uint32_t *word, uint32_t expected,
				    int64_t timeout_ns)
{
	struct timespec ts, *tp = NULL;
	long r;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tp = &ts;
	}
	r = syscall(SYS_futex, word, FUTEX_WAIT, expected, tp, NULL, 0);
	if (r == 0 || errno == EAGAIN)
		return 0;
	return -errno;
}

/* Wake every waiter on word. */
static inline void futex_wake_shared(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

#endif /* LOADER_FUTEX_H */
