/*
 * grow.h - buffers that grow to the largest size asked of them.
 *
 * For tools and set-up paths (pack, verify), never for the daemon's hot
 * path, whose buffers are sized once.
 */
#ifndef LD_GROW_H
#define LD_GROW_H

#include <errno.h>
#include <stdlib.h>

/* Make *buf (of *cap bytes) hold at least n bytes. Returns 0 or -ENOMEM. */
static inline int grow_buf(unsigned char **buf, size_t *cap, size_t n)
{
	unsigned char *p;

	if (n <= *cap)
		return 0;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

#endif /* LD_GROW_H */
