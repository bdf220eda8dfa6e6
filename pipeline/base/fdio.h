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
int fdio_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/*
 * Check that fd is open on a regular file of at most max bytes, the test
 * to pass before reading a file whole, and put its size in *size.
 * Returns 0; -EINVAL when it is not a regular file (a pipe or a device,
 * which could block or never end); LOADER_ETOOBIG when it holds more
 * than max bytes, with *size still set; or -errno from fstat(), which
 * never fails with EINVAL.
 */
int fdio_regular_size(int fd, uint64_t max, uint64_t *size);

/*
 * Read the whole of the regular file open on fd, from offset 0, into a
 * new buffer: *buf, which the caller frees, holds *len bytes (and is a
 * valid allocation even for an empty file). Returns 0, or one of
 * fdio_regular_size()'s codes (on LOADER_ETOOBIG *len gets the file's
 * size, at most SIZE_MAX), -ENOMEM, LOADER_ETRUNC when the file shrank
 * while being read, or -errno from pread(). On failure *buf is NULL.
 * The caller opens and closes fd, so that an error from open() stays
 * its own.
 */
int fdio_read_whole(int fd, size_t max, unsigned char **buf, size_t *len);

#endif /* LD_FDIO_H */
