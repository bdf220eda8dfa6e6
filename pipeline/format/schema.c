/*
 * schema.c - field descriptors and their text form.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_error.h"
#include "schema.h"

static bool name_char(int c)
{
	return isalnum(c) || c == '_' || c == '-' || c == '.';
}

bool field_ragged(const struct field *f)
{
	return f->kind == FIELD_TENSOR && f->ndim > 0 && f->dims[0] == 0;
}

uint64_t field_row_size(const struct field *f)
{
	uint64_t n;

	if (f->kind != FIELD_TENSOR)
		return 1;
	n = dtype_size(f->dtype);
	for (unsigned i = 1; i < f->ndim && i < SCHEMA_MAX_DIMS; i++)
		n *= f->dims[i];
	return n;
}

uint64_t field_fixed_size(const struct field *f)
{
	uint64_t n;

	if (f->kind != FIELD_TENSOR || field_ragged(f))
		return 0;
	n = dtype_size(f->dtype);
	for (unsigned i = 0; i < f->ndim && i < SCHEMA_MAX_DIMS; i++)
		n *= f->dims[i];
	return n;
}

int field_check(const struct field *f, struct diag *d)
{
	size_t len = strnlen(f->name, sizeof(f->name));
	uint64_t n = 1;

	if (len == 0 || len > SCHEMA_NAME_MAX)
		return diag_set(d, LOADER_ESCHEMA,
				"field name must have 1..%d characters",
				SCHEMA_NAME_MAX);
	for (size_t i = 0; i < len; i++)
		if (!name_char((unsigned char)f->name[i]))
			return diag_set(
				d, LOADER_ESCHEMA,
				"field name has a character other than [A-Za-z0-9_.-]");
	for (size_t i = len; i < sizeof(f->name); i++)
		if (f->name[i])
			return diag_set(d, LOADER_ESCHEMA,
					"field name is not NUL-padded");
	switch (f->kind) {
	case FIELD_BYTES:
	case FIELD_JPEG:
		if (f->dtype || f->ndim)
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: only tensors have a dtype or shape",
				f->name);
		break;
	case FIELD_TENSOR:
		if (!dtype_size(f->dtype))
			return diag_set(d, LOADER_ESCHEMA,
					"field %s: unknown dtype %u", f->name,
					f->dtype);
		if (f->ndim > SCHEMA_MAX_DIMS)
			return diag_set(d, LOADER_ESCHEMA,
					"field %s: %u dimensions, at most %d",
					f->name, f->ndim, SCHEMA_MAX_DIMS);
		n = dtype_size(f->dtype);
		for (unsigned i = 0; i < f->ndim; i++) {
			/* A first dimension of 0 is "*": each sample its own. */
			if (f->dims[i] == 0 && i == 0)
				continue;
			if (f->dims[i] == 0)
				return diag_set(d, LOADER_ESCHEMA,
						"field %s: dimension %u is 0",
						f->name, i);
			n *= f->dims[i];
			if (n > UINT32_MAX)
				return diag_set(
					d, LOADER_ESCHEMA,
					"field %s: tensor larger than 4 GiB",
					f->name);
		}
		break;
	default:
		return diag_set(d, LOADER_ESCHEMA, "field %s: unknown kind %u",
				f->name, f->kind);
	}
	for (unsigned i = f->kind == FIELD_TENSOR ? f->ndim : 0;
	     i < SCHEMA_MAX_DIMS; i++)
		if (f->dims[i])
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: unused dimension %u is not 0",
				f->name, i);
	switch (f->comp) {
	case COMP_NONE:
		if (f->level)
			return diag_set(d, LOADER_ESCHEMA,
					"field %s: level without compression",
					f->name);
		break;
	case COMP_ZSTD:
	case COMP_ZSTD_DICT:
		if (f->kind == FIELD_JPEG)
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: JPEG fields are stored as-is, not zstd",
				f->name);
		if (f->level < 1 || f->level > 22)
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: zstd level %d out of range 1..22",
				f->name, f->level);
		break;
	default:
		return diag_set(d, LOADER_ESCHEMA,
				"field %s: unknown compression %u", f->name,
				f->comp);
	}
	return 0;
}

/* A tiny tokenizer over the text form; tokens are words and [..] shapes. */
struct lex {
	const char *s, *p;
	char tok[64];
	bool overlong; /* a token did not fit tok */
};

static bool lex_next(struct lex *lx)
{
	size_t n = 0;

	while (isspace((unsigned char)*lx->p))
		lx->p++;
	if (!*lx->p)
		return false;
	if (*lx->p == '[') {
		while (*lx->p && *lx->p != ']' && n < sizeof(lx->tok) - 2)
			lx->tok[n++] = *lx->p++;
		if (*lx->p == ']')
			lx->tok[n++] = *lx->p++;
		else if (*lx->p)
			lx->overlong = true;
	} else {
		while (*lx->p && !isspace((unsigned char)*lx->p) &&
		       *lx->p != '[' && n < sizeof(lx->tok) - 1)
			lx->tok[n++] = *lx->p++;
		if (*lx->p && !isspace((unsigned char)*lx->p) && *lx->p != '[')
			lx->overlong = true;
	}
	lx->tok[n] = '\0';
	return true;
}

/* After a dimension: spaces, then a comma (and more) or the "]". */
static const char *next_dim(const char *p)
{
	while (*p == ' ')
		p++;
	if (*p == ',' && p[1] != ']')
		return p + 1;
	return *p == ']' ? p : NULL;
}

static int parse_shape(struct field *f, const char *tok, struct diag *d)
{
	const char *p = tok + 1;
	size_t len = strlen(tok);

	if (len < 2 || tok[len - 1] != ']')
		return diag_set(d, LOADER_ESCHEMA,
				"field %s: shape \"%s\" is not [D0,D1,...]",
				f->name, tok);
	while (*p != ']') {
		char *end;
		unsigned long v;

		while (*p == ' ')
			p++;
		if (*p == ']')
			break;
		if (f->ndim == SCHEMA_MAX_DIMS)
			return diag_set(d, LOADER_ESCHEMA,
					"field %s: more than %d dimensions",
					f->name, SCHEMA_MAX_DIMS);
		if (*p == '*' && f->ndim == 0) {
			/* Ragged: each sample has its own first dimension. */
			f->dims[f->ndim++] = 0;
			p = next_dim(p + 1);
			if (!p)
				return diag_set(d, LOADER_ESCHEMA,
						"field %s: bad shape \"%s\"",
						f->name, tok);
			continue;
		}
		errno = 0;
		v = strtoul(p, &end, 10);
		if (end == p || errno || v == 0 || v > UINT32_MAX)
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: bad dimension in shape \"%s\"",
				f->name, tok);
		f->dims[f->ndim++] = (uint32_t)v;
		p = next_dim(end);
		if (!p)
			return diag_set(d, LOADER_ESCHEMA,
					"field %s: bad shape \"%s\"", f->name,
					tok);
	}
	return 0;
}

int field_parse(struct field *f, const char *text, struct diag *d)
{
	struct lex lx = { .s = text, .p = text };
	const char *colon = strchr(text, ':');
	const char *b = text, *e;
	int err;

	memset(f, 0, sizeof(*f));
	if (!colon)
		return diag_set(d, LOADER_ESCHEMA,
				"field \"%s\": expected NAME: TYPE", text);
	while (isspace((unsigned char)*b))
		b++;
	e = colon;
	while (e > b && isspace((unsigned char)e[-1]))
		e--;
	if (e == b || (size_t)(e - b) > SCHEMA_NAME_MAX)
		return diag_set(d, LOADER_ESCHEMA,
				"field \"%s\": name must have 1..%d characters",
				text, SCHEMA_NAME_MAX);
	memcpy(f->name, b, (size_t)(e - b));
	lx.p = colon + 1;
	if (!lex_next(&lx))
		return diag_set(d, LOADER_ESCHEMA, "field %s: missing type",
				f->name);
	if (!strcmp(lx.tok, "bytes")) {
		f->kind = FIELD_BYTES;
	} else if (!strcmp(lx.tok, "jpeg")) {
		f->kind = FIELD_JPEG;
	} else if (!strcmp(lx.tok, "int64")) {
		f->kind = FIELD_TENSOR;
		f->dtype = DT_I64;
	} else if (!strcmp(lx.tok, "tensor")) {
		f->kind = FIELD_TENSOR;
		if (!lex_next(&lx) ||
		    !(f->dtype = (uint8_t)dtype_parse(lx.tok)))
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: tensor needs a dtype (u8, i8, u16, i16, u32, i32, u64, i64, f16, f32, f64)",
				f->name);
		if (!lex_next(&lx) || lx.tok[0] != '[')
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: tensor needs a shape [D0,D1,...]",
				f->name);
		err = parse_shape(f, lx.tok, d);
		if (err)
			return err;
	} else {
		return diag_set(
			d, LOADER_ESCHEMA,
			"field %s: unknown type \"%s\" (bytes, jpeg, int64, tensor)",
			f->name, lx.tok);
	}
	if (lex_next(&lx)) {
		if (strcmp(lx.tok, "zstd"))
			return diag_set(
				d, LOADER_ESCHEMA,
				"field %s: unexpected \"%s\" (compression is zstd [LEVEL] [dict])",
				f->name, lx.tok);
		bool have_level = false;

		f->comp = COMP_ZSTD;
		f->level = 3;
		while (lex_next(&lx)) {
			char *end;
			long v;

			if (!strcmp(lx.tok, "dict") && f->comp == COMP_ZSTD) {
				f->comp = COMP_ZSTD_DICT;
				continue;
			}
			v = strtol(lx.tok, &end, 10);
			if (*end || end == lx.tok || v < 1 || v > 22 ||
			    f->comp == COMP_ZSTD_DICT || have_level)
				return diag_set(
					d, LOADER_ESCHEMA,
					"field %s: unexpected \"%s\" after zstd",
					f->name, lx.tok);
			f->level = (int32_t)v;
			have_level = true;
		}
	}
	if (lx.overlong)
		return diag_set(d, LOADER_ESCHEMA,
				"field %s: a word longer than %zu characters",
				f->name, sizeof(lx.tok) - 1);
	return field_check(f, d);
}

int field_format(const struct field *f, char *buf, size_t n)
{
	char type[80];
	int len = 0;

	if (f->kind == FIELD_BYTES) {
		snprintf(type, sizeof(type), "bytes");
	} else if (f->kind == FIELD_JPEG) {
		snprintf(type, sizeof(type), "jpeg");
	} else if (f->dtype == DT_I64 && f->ndim == 0) {
		snprintf(type, sizeof(type), "int64");
	} else {
		len = snprintf(type, sizeof(type), "tensor %s [",
			       dtype_name(f->dtype) ? dtype_name(f->dtype) :
						      "?");
		for (unsigned i = 0; i < f->ndim && i < SCHEMA_MAX_DIMS; i++)
			len += !i && !f->dims[0] ?
				       snprintf(type + len,
						sizeof(type) - (size_t)len,
						"*") :
				       snprintf(type + len,
						sizeof(type) - (size_t)len,
						"%s%" PRIu32, i ? "," : "",
						f->dims[i]);
		snprintf(type + len, sizeof(type) - (size_t)len, "]");
	}
	if (f->comp == COMP_NONE)
		return snprintf(buf, n, "%s: %s", f->name, type);
	return snprintf(buf, n, "%s: %s zstd %d%s", f->name, type, f->level,
			f->comp == COMP_ZSTD_DICT ? " dict" : "");
}

int schema_check(const struct schema *s, struct diag *d)
{
	int err;

	if (s->nfields == 0 || s->nfields > SCHEMA_MAX_FIELDS)
		return diag_set(d, LOADER_ESCHEMA,
				"schema has %u fields, expected 1..%d",
				s->nfields, SCHEMA_MAX_FIELDS);
	for (uint32_t i = 0; i < s->nfields; i++) {
		err = field_check(&s->f[i], d);
		if (err)
			return err;
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(s->f[i].name, s->f[j].name))
				return diag_set(d, LOADER_ESCHEMA,
						"field name %s appears twice",
						s->f[i].name);
	}
	return 0;
}

int schema_find(const struct schema *s, const char *name)
{
	for (uint32_t i = 0; i < s->nfields; i++)
		if (!strcmp(s->f[i].name, name))
			return (int)i;
	return -1;
}

bool schema_meta_name(const char *name)
{
	return name[0] == '_' && name[1] == '_';
}

int schema_key(const struct schema *s)
{
	int k = schema_find(s, SCHEMA_KEY);

	if (k < 0 || s->f[k].kind != FIELD_BYTES || s->f[k].comp != COMP_NONE)
		return -1;
	return k;
}

bool schema_equal(const struct schema *a, const struct schema *b)
{
	if (a->nfields != b->nfields)
		return false;
	return !memcmp(a->f, b->f, a->nfields * sizeof(a->f[0]));
}
