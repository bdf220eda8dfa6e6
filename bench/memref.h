/*
 * memref.h - the limit the raw path is held to: memcpy of a volume of
 * bytes, chunk by chunk (a batch at a time), between two buffers too
 * large for the caches, as the stream's data is. Shared by ldclient
 * (--memcpy-ref) and bench/gather_limit, so that both compare against
 * the same thing. Header-only: the two are programs of their own.
 */
#ifndef LD_MEMREF_H
#define LD_MEMREF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct memref {
	uint64_t bytes; /* copied in the timed part */
	uint64_t ns;	/* it took */
	unsigned check; /* a byte of the copy, so that it is not elided */
};

/*
 * Copy bytes in chunks of chunk between buffers of min(bytes, 1 GiB),
 * after one untimed pass that touches every page (first touches cost a
 * fault each, which no stream pays in its steady state). Returns 0, or
 * -1 when the buffers cannot be had.
 */
static inline int memref_run(uint64_t bytes, uint64_t chunk, struct memref *m)
{
	uint64_t span = bytes < (1ull << 30) ? bytes : 1ull << 30;
	unsigned char *src = span ? malloc(span) : NULL;
	unsigned char *dst = span ? malloc(span) : NULL;
	uint64_t done = 0, off = 0, n = chunk < span ? chunk : span;
	struct timespec t0, t1;

	if (!src || !dst || !n) {
		free(src);
		free(dst);
		return -1;
	}
	memset(src, 1, span);
	memset(dst, 2, span);
	memcpy(dst, src, span);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < bytes) {
		if (off + n > span)
			off = 0;
		memcpy(dst + off, src + off, n);
		off += n;
		done += n;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	m->bytes = done;
	m->ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
		(uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
	m->check = dst[span / 2];
	free(src);
	free(dst);
	return 0;
}

#endif /* LD_MEMREF_H */
