/*
 * fuzz_datum.c - Caffe's Datum parser (datum_parse), as pack meets it in
 * an LMDB's values: whatever the bytes, it answers without reading past
 * them, and the data it points at lies inside them.
 */
#include <stdlib.h>

#include "datum.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct datum dt;

	if (datum_parse(data, size, &dt, NULL))
		return 0;
	if (dt.data && (dt.data < data || dt.data_len > size ||
			(size_t)(dt.data - data) > size - dt.data_len))
		abort();
	return 0;
}
