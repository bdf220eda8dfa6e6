/*
 * fuzz_manifest.c - a dataset's manifest.json (jansson, then every
 * field's type and range checked by dataset_load_fd()).
 */
#include "dataset.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dataset *ds = NULL;
	struct diag d;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	if (!dataset_load_fd(&ds, fd, "manifest.json", &d))
		dataset_free(ds);
	close(fd);
	return 0;
}
