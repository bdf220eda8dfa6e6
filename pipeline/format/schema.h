/*
 * schema.h - the fields of a sample: names, types, shapes, compression.
 *
 * A schema is what both a shard footer and a dataset manifest describe
 * (man/loader-shard.5). Its text form, one field per string, is shared by
 * loaderctl, the manifest and the man pages:
 *
 *	NAME: bytes|jpeg|int64|tensor DTYPE [D0,D1,...] [zstd [LEVEL] [dict]]
 *
 * where D0 may be "*": a ragged tensor, each sample its own number of
 * rows (field_ragged()).
 *
 * e.g. "image: tensor u8 [28,28] zstd 3 dict" or "label: int64".
 * "int64" is shorthand for "tensor i64 []", a scalar.
 */
#ifndef LD_SCHEMA_H
#define LD_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "dtype.h"

#define SCHEMA_MAX_FIELDS 64
#define SCHEMA_MAX_DIMS	  4
#define SCHEMA_NAME_MAX	  31
/* Largest text form of one field, with its terminating NUL. */
#define FIELD_TEXT_MAX 128

enum field_kind {
	FIELD_BYTES = 1,  /* opaque bytes */
	FIELD_JPEG = 2,	  /* a JPEG file, stored as-is */
	FIELD_TENSOR = 3, /* dtype + fixed shape */
};

enum field_comp {
	COMP_NONE = 0,
	COMP_ZSTD = 1,
	COMP_ZSTD_DICT = 2, /* zstd with a dictionary stored in the shard */
};

struct field {
	char name[SCHEMA_NAME_MAX + 1];
	uint8_t kind;  /* enum field_kind */
	uint8_t dtype; /* enum dtype; DT_NONE unless a tensor */
	uint8_t ndim;  /* 0..SCHEMA_MAX_DIMS; 0 unless a tensor */
	uint8_t comp;  /* enum field_comp */
	int32_t level; /* zstd level; 0 without compression */
	uint32_t dims[SCHEMA_MAX_DIMS]; /* unused ones are 0 */
};

struct schema {
	uint32_t nfields;
	struct field f[SCHEMA_MAX_FIELDS];
};

/*
 * Parse one field's text form into f. Returns 0, or LOADER_ESCHEMA with
 * the reason (and the column) in d.
 */
int field_parse(struct field *f, const char *text, struct diag *d);

/*
 * Write the text form of f into buf (FIELD_TEXT_MAX bytes suffice).
 * Returns the length, as snprintf.
 */
int field_format(const struct field *f, char *buf, size_t n);

/*
 * Check that f is well formed: a valid name, kind, dtype and shape, and
 * a compression that the kind allows. Returns 0 or LOADER_ESCHEMA.
 */
int field_check(const struct field *f, struct diag *d);

/*
 * The decoded size of a tensor field (product of dims times the element
 * size), or 0 for a variable-size field (bytes, jpeg, a ragged tensor).
 */
uint64_t field_fixed_size(const struct field *f);

/*
 * A ragged tensor: "tensor DTYPE [*,D1,...]", dims[0] 0, each sample a
 * whole number of rows of shape [D1,...] (tokens, boxes, audio frames).
 */
bool field_ragged(const struct field *f);

/* Bytes of one row of a tensor (its dtype times dims[1..]); 1 otherwise. */
uint64_t field_row_size(const struct field *f);

/* Check every field and that names are unique. Returns 0 or LOADER_ESCHEMA. */
int schema_check(const struct schema *s, struct diag *d);

/* Index of the field called name, or -1. */
int schema_find(const struct schema *s, const char *name);

/*
 * The key field: "__key__", bytes, uncompressed, holding each record's
 * source name (an ImageFolder file's path under SRC, a tar sample's
 * key), as WebDataset's __key__. Fields whose names start with "__" are
 * about the sample, not of it: a stream does not deliver them unless
 * they are named as outputs.
 */
#define SCHEMA_KEY "__key__"

/* Whether name is such a field's ("__..."). */
bool schema_meta_name(const char *name);

/*
 * Index of s's key field, or -1 when it has none (or one that is not
 * uncompressed bytes, which is no key).
 */
int schema_key(const struct schema *s);

/* True when a and b describe the same fields in the same order. */
bool schema_equal(const struct schema *a, const struct schema *b);

#endif /* LD_SCHEMA_H */
