/*
 * fuzz.h - what every fuzz target here shares: the libFuzzer entry point
 * and a memory file holding the input, for parsers that read a
 * descriptor. A target is built two ways: with clang's libFuzzer and
 * ASan+UBSan (make fuzz), and with replay.c (make check), which runs it
 * over the committed corpus.
 */
#ifndef LD_FUZZ_H
#define LD_FUZZ_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create() */
#endif
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A memfd holding data[0..size), offset 0; -1 if none could be made. */
static inline int fuzz_memfd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	size_t off = 0;

	if (fd < 0)
		return -1;
	while (off < size) {
		ssize_t n = write(fd, data + off, size - off);

		if (n <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	return fd;
}

#endif /* LD_FUZZ_H */
