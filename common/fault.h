/*
 * fault.h - failures injected on purpose, for the tests.
 *
 * The tests must see what the daemon does when a disk returns EIO, a
 * read comes back short or an allocation fails, and this machine has
 * neither device-mapper's error/flakey targets nor a way to make
 * io_uring fail a read from outside the process. So the places that can
 * fail ask this module first. Unarmed (the default), every question is
 * one load and one branch; loaderd arms it from $LOADERD_FAULT at start,
 * and says so in its log.
 *
 * The spec is a comma-separated list of:
 *   read-eio=INO	reads of the file with inode INO fail with EIO
 *   read-eio=INO@OFF	reads of that file that cover byte OFF fail
 *   read-short=INO	reads of that file return half of what was
 *			asked (at least 4096 bytes, in whole 4096s)
 *   alloc-open	stream opens fail an allocation: the n-th OPEN
 *			of the process fails its n-th allocation point
 * Depends on nothing of ours but diag; every layer may use it.
 */
#ifndef LD_FAULT_H
#define LD_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* Nonzero once fault_setup() armed something; read with a plain load. */
extern int fault_armed;

/*
 * Arm the faults of spec (NULL or "" arms nothing). Call once, before
 * any thread asks. Returns 0, or -EINVAL naming the bad item in d.
 */
int fault_setup(const char *spec, struct diag *d);

/*
 * What to do with a read of len bytes at off of fd: 0 (read it), -EIO
 * (fail it), or a positive length below len (read only that much).
 */
int64_t fault_read_slow(int fd, uint64_t off, uint64_t len);
static inline int64_t fault_read(int fd, uint64_t off, uint64_t len)
{
	return fault_armed ? fault_read_slow(fd, off, len) : 0;
}

/*
 * An OPEN begins or has ended (the daemon's control loop says which).
 * Between the two, each allocation point counts, and with alloc-open
 * the n-th OPEN's n-th point fails. fault_open_end() says whether this
 * OPEN had one failed on purpose (or that alloc-open is not armed).
 */
enum fault_open { FAULT_OPEN_UNARMED, FAULT_OPEN_PASSED, FAULT_OPEN_FAILED };
void fault_open_begin(void);
enum fault_open fault_open_end(void);

/*
 * Whether the allocation (or other resource: mapping, memfd, thread)
 * about to be made must fail. The mem_ wrappers ask it.
 */
bool fault_alloc_slow(void);
static inline bool fault_alloc(void)
{
	return fault_armed && fault_alloc_slow();
}

/*
 * malloc, calloc, realloc, strdup and posix_memalign (align a power of
 * two) that fail when fault_alloc() says so; all freed with free().
 */
void *mem_alloc(size_t n);
void *mem_calloc(size_t n, size_t size);
void *mem_realloc(void *p, size_t n);
char *mem_strdup(const char *s);
void *mem_aligned(size_t align, size_t n);

#endif /* LD_FAULT_H */
