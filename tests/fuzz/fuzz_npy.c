/*
 * fuzz_npy.c - the .npy header parser (npy_parse), as pack meets it in
 * a tar's .npy members: whatever the bytes, it answers without reading
 * past them, and what it accepts is self-consistent.
 */
#include <stdlib.h>

#include "fuzz.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct npy_info n;
	uint64_t count = 1;

	if (npy_parse(data, size, &n, NULL))
		return 0;
	for (uint32_t i = 0; i < n.ndim; i++)
		count *= n.dims[i];
	if (n.data_off > size || n.count != count || n.ndim > NPY_MAX_DIMS ||
	    !n.itemsize)
		abort();
	return 0;
}
