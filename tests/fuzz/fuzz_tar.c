/*
 * fuzz_tar.c - tar headers (ustar, GNU long names, pax), member by
 * member to the end or the first error.
 */
#include "fuzz.h"
#include "tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tar_reader *t = NULL;
	struct tar_member m;
	struct diag d;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	if (!tar_open(&t, fd, "fuzz.tar", &d)) {
		for (int i = 0; i < 100000 && tar_next(t, &m, &d) == 1; i++)
			;
		tar_close(t);
	}
	close(fd);
	return 0;
}
