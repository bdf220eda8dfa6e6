/*
 * fdio.h - whole reads and writes on file descriptors, retrying short
 * transfers and EINTR. Each returns 0 or -errno; a read that meets end of
 * file early returns LOADER_ETRUNC.
 */
#ifndef LD_FDIO_H
#define LD_FDIO_H

#include <stddef.h>
#include <stdint.h>

int fdio_write_all(int fd, const void *buf, size_t len);
int fdio_pread_all(int fd, void *buf, size_t len, uint64_t off);

#endif /* LD_FDIO_H */
