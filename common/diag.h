/*
 * diag.h - a caller-owned buffer for a human-readable error message.
 *
 * Functions that can fail on bad input return a negative code and, when
 * given a non-NULL struct diag, describe what went wrong in it: which
 * file, which offset, what was expected and what was found. The caller
 * owns the struct; the message stays valid until the next call that is
 * handed the same struct. This is the lowest layer of the project: it
 * depends on nothing of ours, and every layer may use it.
 */
#ifndef LD_DIAG_H
#define LD_DIAG_H

#include <stddef.h>

#define DIAG_MAX 512

struct diag {
	char msg[DIAG_MAX];
};

/*
 * Set the message (printf-style) and return err unchanged, so that a
 * failure path reads "return diag_set(d, -EINVAL, "...", ...);".
 * d may be NULL, in which case only err is returned.
 */
int diag_set(struct diag *d, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Prefix the current message with a context string (printf-style), e.g.
 * the file name, leaving "context: old message". Returns err unchanged.
 */
int diag_wrap(struct diag *d, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Clear the message. d may be NULL. */
static inline void diag_clear(struct diag *d)
{
	if (d)
		d->msg[0] = '\0';
}

#endif /* LD_DIAG_H */
