/*
 * dtype.c - the element types of tensors: their names and sizes.
 */
#include <string.h>

#include "dtype.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[DT_COUNT] = {
	[DT_U8] = { "u8", 1 },	 [DT_I8] = { "i8", 1 },
	[DT_U16] = { "u16", 2 }, [DT_I16] = { "i16", 2 },
	[DT_U32] = { "u32", 4 }, [DT_I32] = { "i32", 4 },
	[DT_U64] = { "u64", 8 }, [DT_I64] = { "i64", 8 },
	[DT_F16] = { "f16", 2 }, [DT_F32] = { "f32", 4 },
	[DT_F64] = { "f64", 8 },
};

size_t dtype_size(unsigned dt)
{
	return dt < DT_COUNT ? dtypes[dt].size : 0;
}

const char *dtype_name(unsigned dt)
{
	return dt < DT_COUNT ? dtypes[dt].name : NULL;
}

unsigned dtype_parse(const char *name)
{
	for (unsigned i = 1; i < DT_COUNT; i++)
		if (!strcmp(dtypes[i].name, name))
			return i;
	return DT_NONE;
}
