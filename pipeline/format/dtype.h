/*
 * dtype.h - the element types of tensors, with the numbers the shard
 * format stores (man/loader-shard.5) and libloader's enum loader_dtype
 * repeats. The image pipeline names its output type with them, and may
 * use this header alone of format/.
 */
#ifndef LD_DTYPE_H
#define LD_DTYPE_H

#include <stddef.h>

enum dtype {
	DT_NONE = 0,
	DT_U8,
	DT_I8,
	DT_U16,
	DT_I16,
	DT_U32,
	DT_I32,
	DT_U64,
	DT_I64,
	DT_F16,
	DT_F32,
	DT_F64,
	DT_COUNT
};

/* Bytes per element of a dtype; 0 for an invalid one. */
size_t dtype_size(unsigned dt);

/* Short name ("u8", "f32"); NULL for an invalid dtype. */
const char *dtype_name(unsigned dt);

/* Parse a dtype name; returns DT_NONE if unknown. */
unsigned dtype_parse(const char *name);

#endif /* LD_DTYPE_H */
