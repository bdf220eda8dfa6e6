/*
 * fdio.c - whole reads and writes.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "loader_error.h"

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

int fdio_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int fdio_regular_size(int fd, uint64_t max, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*size = (uint64_t)st.st_size;
	if (*size > max)
		return LOADER_ETOOBIG;
	return 0;
}

int fdio_read_whole(int fd, size_t max, unsigned char **buf, size_t *len)
{
	uint64_t size = 0;
	int err;

	*buf = NULL;
	*len = 0;
	err = fdio_regular_size(fd, max, &size);
	if (err) {
		if (err == LOADER_ETOOBIG)
			*len = size > SIZE_MAX ? SIZE_MAX : (size_t)size;
		return err;
	}
	/* size <= max, so it fits a size_t. */
	*len = (size_t)size;
	*buf = malloc(*len ? *len : 1);
	if (!*buf)
		return -ENOMEM;
	err = fdio_pread_all(fd, *buf, *len, 0);
	if (err) {
		free(*buf);
		*buf = NULL;
	}
	return err;
}
