/*
 * fdio.c - whole reads and writes.
 */
#include <errno.h>
#include <unistd.h>

#include "fdio.h"
#include "loader.h"

int fdio_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fdio_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return LOADER_ETRUNC;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}
