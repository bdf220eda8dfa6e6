/*
 * progress.h - a progress bar on stderr for long commands.
 *
 * Drawn only when stderr is a terminal, at most ten times a second, so it
 * costs nothing in scripts and logs.
 */
#ifndef LD_PROGRESS_H
#define LD_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct progress {
	const char *label;
	const char *unit; /* "B" for bytes (shown scaled), else a word */
	uint64_t total, done;
	double start, last;
	bool on;
};

/* Start a bar for total units (0 if unknown). */
void progress_start(struct progress *p, const char *label, const char *unit,
		    uint64_t total);

/* Advance by n units; redraws when due. */
void progress_add(struct progress *p, uint64_t n);

/* Erase the bar (the caller prints its summary next). */
void progress_end(struct progress *p);

/* Seconds on a monotonic clock. */
double progress_now(void);

/* Format a byte count as "12.3 MB" into buf (SI units). */
const char *progress_bytes(double bytes, char *buf, unsigned n);

#endif /* LD_PROGRESS_H */
