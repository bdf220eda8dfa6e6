/*
 * test_schema.c - dtypes, the field text form (parse and format), field
 * and schema checks.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader_error.h"
#include "schema.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A field as the table below spells it. */
struct want {
	const char *text;
	uint8_t kind, dtype, ndim, comp;
	int32_t level;
	uint32_t dims[SCHEMA_MAX_DIMS];
	uint64_t fixed; /* field_fixed_size() */
};

/* Texts in their canonical form: parse, then format back to the same. */
static const struct want good[] = {
	{ "label: int64", FIELD_TENSOR, DT_I64, 0, COMP_NONE, 0, { 0 }, 8 },
	{ "x: tensor u8 [28,28] zstd 3 dict",
	  FIELD_TENSOR,
	  DT_U8,
	  2,
	  COMP_ZSTD_DICT,
	  3,
	  { 28, 28 },
	  784 },
	{ "image: jpeg", FIELD_JPEG, 0, 0, COMP_NONE, 0, { 0 }, 0 },
	{ "b: bytes zstd 19", FIELD_BYTES, 0, 0, COMP_ZSTD, 19, { 0 }, 0 },
	{ "b: bytes", FIELD_BYTES, 0, 0, COMP_NONE, 0, { 0 }, 0 },
	{ "b: bytes zstd 1 dict",
	  FIELD_BYTES,
	  0,
	  0,
	  COMP_ZSTD_DICT,
	  1,
	  { 0 },
	  0 },
	{ "t: tensor f32 [3,224,224]",
	  FIELD_TENSOR,
	  DT_F32,
	  3,
	  COMP_NONE,
	  0,
	  { 3, 224, 224 },
	  4ull * 3 * 224 * 224 },
	{ "t: tensor f64 [1,2,3,4] zstd 22",
	  FIELD_TENSOR,
	  DT_F64,
	  4,
	  COMP_ZSTD,
	  22,
	  { 1, 2, 3, 4 },
	  8 * 24 },
	{ "s: tensor u16 []", FIELD_TENSOR, DT_U16, 0, COMP_NONE, 0, { 0 }, 2 },
	{ "n: int64 zstd 1", FIELD_TENSOR, DT_I64, 0, COMP_ZSTD, 1, { 0 }, 8 },
	{ "v: tensor i64 [5]", FIELD_TENSOR, DT_I64, 1, COMP_NONE, 0, { 5 }, 40 },
	{ "h: tensor f16 [2,2] zstd 5 dict",
	  FIELD_TENSOR,
	  DT_F16,
	  2,
	  COMP_ZSTD_DICT,
	  5,
	  { 2, 2 },
	  8 },
	{ "a.b-c_9: tensor i8 [4294967295]",
	  FIELD_TENSOR,
	  DT_I8,
	  1,
	  COMP_NONE,
	  0,
	  { 4294967295u },
	  4294967295ull },
	{ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcde: bytes",
	  FIELD_BYTES,
	  0,
	  0,
	  COMP_NONE,
	  0,
	  { 0 },
	  0 },
	{ "q: tensor u32 [1,1,1,1]",
	  FIELD_TENSOR,
	  DT_U32,
	  4,
	  COMP_NONE,
	  0,
	  { 1, 1, 1, 1 },
	  4 },
	/* Ragged: each sample its own first dimension, no fixed size. */
	{ "tok: tensor i32 [*]",
	  FIELD_TENSOR,
	  DT_I32,
	  1,
	  COMP_NONE,
	  0,
	  { 0 },
	  0 },
	{ "box: tensor f32 [*,4] zstd 3",
	  FIELD_TENSOR,
	  DT_F32,
	  2,
	  COMP_ZSTD,
	  3,
	  { 0, 4 },
	  0 },
};

/* A ragged tensor's rows, and that only the first dimension may vary. */
Test(schema, ragged)
{
	static const char *bad[] = { "x: tensor u8 [4,*]", "x: tensor u8 [*,*]",
				     "x: tensor u8 [**]", "x: tensor u8 [*4]" };
	struct field f;
	struct diag d = { "" };

	cr_assert_eq(field_parse(&f, "b: tensor f16 [*,3,2]", &d), 0, "%s",
		     d.msg);
	cr_expect(field_ragged(&f));
	cr_expect_eq(field_row_size(&f), 12);
	cr_expect_eq(field_fixed_size(&f), 0);
	cr_assert_eq(field_parse(&f, "b: tensor f16 [3,2]", &d), 0);
	cr_expect(!field_ragged(&f));
	cr_expect_eq(field_row_size(&f), 4);
	cr_assert_eq(field_parse(&f, "b: bytes", &d), 0);
	cr_expect(!field_ragged(&f));
	for (size_t i = 0; i < NELEM(bad); i++)
		cr_expect_neq(field_parse(&f, bad[i], &d), 0, "%s", bad[i]);
	/* In binary form (a footer), only dims[0] may be 0. */
	cr_assert_eq(field_parse(&f, "b: tensor u8 [*,2]", &d), 0);
	f.dims[1] = 0;
	cr_expect_eq(field_check(&f, &d), LOADER_ESCHEMA);
}

static void expect_field(const struct field *f, const struct want *w)
{
	size_t nlen = (size_t)(strchr(w->text, ':') - w->text);

	cr_expect_eq(strlen(f->name), nlen, "%s: name", w->text);
	cr_expect(!strncmp(f->name, w->text, nlen), "%s: name %s", w->text,
		  f->name);
	cr_expect_eq(f->kind, w->kind, "%s: kind", w->text);
	cr_expect_eq(f->dtype, w->dtype, "%s: dtype", w->text);
	cr_expect_eq(f->ndim, w->ndim, "%s: ndim", w->text);
	cr_expect_eq(f->comp, w->comp, "%s: comp", w->text);
	cr_expect_eq(f->level, w->level, "%s: level", w->text);
	for (unsigned k = 0; k < SCHEMA_MAX_DIMS; k++)
		cr_expect_eq(f->dims[k], w->dims[k], "%s: dim %u", w->text, k);
	cr_expect_eq(field_fixed_size(f), w->fixed, "%s: fixed size", w->text);
}

Test(schema, parse_good)
{
	for (size_t i = 0; i < NELEM(good); i++) {
		struct field f;
		struct diag d = { "" };

		memset(&f, 0xa5, sizeof(f));
		cr_expect_eq(field_parse(&f, good[i].text, &d), 0, "%s: %s",
			     good[i].text, d.msg);
		expect_field(&f, &good[i]);
		cr_expect_eq(field_check(&f, &d), 0, "%s", good[i].text);
	}
}

Test(schema, format_round_trip)
{
	for (size_t i = 0; i < NELEM(good); i++) {
		struct field f, g;
		char buf[FIELD_TEXT_MAX];
		int n;

		cr_assert_eq(field_parse(&f, good[i].text, NULL), 0, "%s",
			     good[i].text);
		n = field_format(&f, buf, sizeof(buf));
		cr_expect_str_eq(buf, good[i].text);
		cr_expect_eq(n, (int)strlen(good[i].text), "%s", good[i].text);
		cr_assert_eq(field_parse(&g, buf, NULL), 0, "%s", buf);
		cr_expect(!memcmp(&f, &g, sizeof(f)), "%s", buf);
	}
}

/* Texts that parse to the same field as a canonical one. */
Test(schema, parse_normalizes)
{
	static const struct {
		const char *in, *canon;
	} t[] = {
		{ "  label  :   int64  ", "label: int64" },
		{ "label:int64", "label: int64" },
		{ "x: tensor i64 []", "x: int64" },
		{ "b: bytes zstd", "b: bytes zstd 3" },
		{ "b: bytes zstd dict", "b: bytes zstd 3 dict" },
		{ "b: bytes\tzstd\t7", "b: bytes zstd 7" },
		{ "t: tensor u8 [ 28 , 28 ]", "t: tensor u8 [28,28]" },
		{ "t: tensor u8[28,28]zstd", "t: tensor u8 [28,28] zstd 3" },
		{ "t: tensor u8 [028,1]", "t: tensor u8 [28,1]" },
		{ "n: int64 zstd 05", "n: int64 zstd 5" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct field f, g;
		char buf[FIELD_TEXT_MAX];
		struct diag d = { "" };

		cr_expect_eq(field_parse(&f, t[i].in, &d), 0, "\"%s\": %s",
			     t[i].in, d.msg);
		field_format(&f, buf, sizeof(buf));
		cr_expect_str_eq(buf, t[i].canon, "\"%s\"", t[i].in);
		cr_assert_eq(field_parse(&g, t[i].canon, NULL), 0);
		cr_expect(!memcmp(&f, &g, sizeof(f)), "\"%s\"", t[i].in);
	}
}

Test(schema, parse_bad)
{
	static const struct {
		const char *text, *why;
	} t[] = {
		{ "", "empty" },
		{ "label int64", "missing colon" },
		{ ": int64", "empty name" },
		{ "   : int64", "blank name" },
		{ "label:", "missing type" },
		{ "label:   ", "blank type" },
		{ "x: float", "unknown type" },
		{ "x: Bytes", "type is case-sensitive" },
		{ "x: tensor", "tensor without dtype" },
		{ "x: tensor u7 [2]", "unknown dtype" },
		{ "x: tensor int64 [2]", "type name as dtype" },
		{ "x: tensor u8", "tensor without shape" },
		{ "x: tensor u8 28,28", "shape without brackets" },
		{ "x: tensor u8 [28,0]", "zero dim" },
		{ "x: tensor u8 [0]", "zero dim alone" },
		{ "x: tensor u8 [1,2,3,4,5]", "5 dims" },
		{ "x: tensor u8 [28", "unterminated shape" },
		{ "x: tensor u8 [a]", "letter in shape" },
		{ "x: tensor u8 [-1]", "negative dim" },
		{ "x: tensor u8 [,28]", "empty first dim" },
		{ "x: tensor u8 [28,,3]", "empty middle dim" },
		{ "x: tensor u8 [28 28]", "missing comma" },
		{ "x: tensor u8 [4294967296]", "dim above u32" },
		{ "x: tensor u32 [65536,65536]", "tensor above 4 GiB" },
		{ "x: tensor u8 [2] [3]", "two shapes" },
		{ "image: jpeg zstd", "jpeg with zstd" },
		{ "image: jpeg zstd 3 dict", "jpeg with zstd dict" },
		{ "image: jpeg [2]", "jpeg with a shape" },
		{ "b: bytes zstd 0", "level 0" },
		{ "b: bytes zstd 23", "level 23" },
		{ "b: bytes zstd -3", "negative level" },
		{ "b: bytes zstd 3x", "level with garbage" },
		{ "b: bytes zstd 3 dict dict", "dict twice" },
		{ "b: bytes zstd dict 3", "level after dict" },
		{ "b: bytes zstd 3 dict extra", "garbage after dict" },
		{ "b: bytes gzip", "unknown compression" },
		{ "b: bytes dict", "dict without zstd" },
		{ "b: bytes zstd zstd", "zstd twice" },
		{ "label: int64 extra", "trailing garbage" },
		{ "label: int64 [3]", "int64 with a shape" },
		{ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef: bytes", "name of 32" },
		{ "bad name: int64", "space in name" },
		{ "a/b: int64", "slash in name" },
		{ "a:b: int64", "colon in name" },
		{ "caf\xc3\xa9: int64", "non-ASCII name" },
		{ "b: bytes zstd 3 5", "level twice" },
		{ "x: tensor u8 [28,]", "trailing comma in shape" },
		{ "b: bytes zstd 0000000000000000000000000000000000000000000000000000000000003dict",
		  "overlong word split into level and dict" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct field f;
		struct diag d = { "" };

		cr_expect_eq(field_parse(&f, t[i].text, &d), LOADER_ESCHEMA,
			     "%s: \"%s\" accepted", t[i].why, t[i].text);
		cr_expect_str_not_empty(d.msg, "%s: no message", t[i].why);
		/* NULL diag works too. */
		cr_expect_eq(field_parse(&f, t[i].text, NULL), LOADER_ESCHEMA);
	}
}

/* Messages say which field and what is wrong. */
Test(schema, parse_messages)
{
	static const struct {
		const char *text, *needle;
	} t[] = {
		{ "x: float", "float" },
		{ "x: tensor u8 [28,0]", "x" },
		{ "weights: tensor f32 [1,2,3,4,5]", "weights" },
		{ "label int64", "label int64" },
		{ "b: bytes zstd 23", "23" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct field f;
		struct diag d = { "" };

		field_parse(&f, t[i].text, &d);
		cr_expect(strstr(d.msg, t[i].needle), "\"%s\": message \"%s\"",
			  t[i].text, d.msg);
	}
}

Test(schema, dtypes)
{
	static const struct {
		unsigned dt;
		const char *name;
		size_t size;
	} t[] = {
		{ DT_U8, "u8", 1 },   { DT_I8, "i8", 1 },
		{ DT_U16, "u16", 2 }, { DT_I16, "i16", 2 },
		{ DT_U32, "u32", 4 }, { DT_I32, "i32", 4 },
		{ DT_U64, "u64", 8 }, { DT_I64, "i64", 8 },
		{ DT_F16, "f16", 2 }, { DT_F32, "f32", 4 },
		{ DT_F64, "f64", 8 },
	};

	cr_assert_eq(NELEM(t), DT_COUNT - 1);
	for (size_t i = 0; i < NELEM(t); i++) {
		char text[64];
		struct field f;

		cr_expect_str_eq(dtype_name(t[i].dt), t[i].name);
		cr_expect_eq(dtype_size(t[i].dt), t[i].size, "%s", t[i].name);
		cr_expect_eq(dtype_parse(t[i].name), t[i].dt, "%s", t[i].name);
		/* Every dtype works in a field, with its element size. */
		snprintf(text, sizeof(text), "t: tensor %s [3,5]", t[i].name);
		cr_expect_eq(field_parse(&f, text, NULL), 0, "%s", text);
		cr_expect_eq(field_fixed_size(&f), 15 * t[i].size, "%s", text);
	}
	cr_expect_eq(dtype_size(DT_NONE), 0);
	cr_expect_eq(dtype_size(DT_COUNT), 0);
	cr_expect_eq(dtype_size(1000), 0);
	cr_expect_null(dtype_name(DT_COUNT));
	cr_expect_null(dtype_name(1000));
	cr_expect_eq(dtype_parse(""), DT_NONE);
	cr_expect_eq(dtype_parse("U8"), DT_NONE);
	cr_expect_eq(dtype_parse("u128"), DT_NONE);
	cr_expect_eq(dtype_parse("int64"), DT_NONE);
}

/* A valid field, built by hand for field_check(). */
static struct field tensor_field(void)
{
	struct field f;

	memset(&f, 0, sizeof(f));
	strcpy(f.name, "x");
	f.kind = FIELD_TENSOR;
	f.dtype = DT_F32;
	f.ndim = 2;
	f.dims[0] = 3;
	f.dims[1] = 4;
	return f;
}

Test(schema, field_check)
{
	static const char *const what[] = {
		"name not NUL-padded",
		"empty name",
		"bad name char",
		"kind 0",
		"kind 4",
		"bytes with dtype",
		"jpeg with ndim",
		"tensor dtype 0",
		"tensor dtype 12",
		"ndim 5",
		"dim 0",
		"unused dim set",
		"level without compression",
		"compression 3",
		"zstd level 0",
		"zstd level 23",
		"jpeg with zstd",
		"name of 32 characters",
	};
	struct field ok = tensor_field();

	cr_expect_eq(field_check(&ok, NULL), 0);
	for (size_t i = 0; i < NELEM(what); i++) {
		struct field f = tensor_field();
		struct diag d = { "" };

		switch (i) {
		case 0: f.name[5] = 'y'; break;
		case 1: f.name[0] = '\0'; break;
		case 2: f.name[0] = '*'; break;
		case 3: f.kind = 0; break;
		case 4: f.kind = 4; break;
		case 5:
			f.kind = FIELD_BYTES;
			f.ndim = 0;
			f.dims[0] = f.dims[1] = 0;
			break;
		case 6:
			f.kind = FIELD_JPEG;
			f.dtype = 0;
			break;
		case 7: f.dtype = DT_NONE; break;
		case 8: f.dtype = DT_COUNT; break;
		case 9: f.ndim = 5; break;
		case 10: f.dims[1] = 0; break;
		case 11: f.dims[3] = 7; break;
		case 12: f.level = 3; break;
		case 13: f.comp = 3; break;
		case 14:
			f.comp = COMP_ZSTD;
			f.level = 0;
			break;
		case 15:
			f.comp = COMP_ZSTD_DICT;
			f.level = 23;
			break;
		case 16:
			f = (struct field){ .name = "img",
					    .kind = FIELD_JPEG,
					    .comp = COMP_ZSTD,
					    .level = 3 };
			break;
		default: memset(f.name, 'a', sizeof(f.name)); break;
		}
		cr_expect_eq(field_check(&f, &d), LOADER_ESCHEMA, "%s",
			     what[i]);
		cr_expect_str_not_empty(d.msg, "%s", what[i]);
	}
}

Test(schema, format_fits)
{
	/* The longest fields the checks allow fit FIELD_TEXT_MAX. */
	static const char *const t[] = {
		"abcdefghijklmnopqrstuvwxyz01234: tensor f64 [1,1,1,536870911] zstd 22 dict",
		"abcdefghijklmnopqrstuvwxyz01234: tensor u8 [4294967295,1,1,1] zstd 22 dict",
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct field f;
		char buf[FIELD_TEXT_MAX], small[8];
		struct diag d = { "" };
		int n;

		cr_assert_eq(field_parse(&f, t[i], &d), 0, "%s: %s", t[i],
			     d.msg);
		n = field_format(&f, buf, sizeof(buf));
		cr_expect_lt(n, FIELD_TEXT_MAX);
		cr_expect_str_eq(buf, t[i]);
		/* Like snprintf: the full length, a cut NUL-terminated text. */
		memset(small, 'z', sizeof(small));
		cr_expect_eq(field_format(&f, small, sizeof(small)), n);
		cr_expect_eq(small[sizeof(small) - 1], '\0');
		cr_expect(!strncmp(small, t[i], sizeof(small) - 1));
	}
}

/* A schema of n fields called f0, f1, ... (tensor or int64). */
static void make_schema(struct schema *s, unsigned n)
{
	memset(s, 0, sizeof(*s));
	s->nfields = n;
	for (unsigned i = 0; i < n && i < SCHEMA_MAX_FIELDS; i++) {
		char text[64];

		snprintf(text, sizeof(text), "f%u: %s", i,
			 i % 2 ? "int64" : "tensor u8 [4,4] zstd 3");
		cr_assert_eq(field_parse(&s->f[i], text, NULL), 0);
	}
}

Test(schema, schema_check)
{
	struct schema s;
	struct diag d = { "" };

	make_schema(&s, 1);
	cr_expect_eq(schema_check(&s, &d), 0, "%s", d.msg);
	make_schema(&s, SCHEMA_MAX_FIELDS);
	cr_expect_eq(schema_check(&s, &d), 0, "%s", d.msg);

	make_schema(&s, 0);
	cr_expect_eq(schema_check(&s, &d), LOADER_ESCHEMA);
	cr_expect_str_not_empty(d.msg);
	make_schema(&s, SCHEMA_MAX_FIELDS);
	s.nfields = SCHEMA_MAX_FIELDS + 1;
	diag_clear(&d);
	cr_expect_eq(schema_check(&s, &d), LOADER_ESCHEMA);
	cr_expect_str_not_empty(d.msg);

	/* Duplicate names, adjacent and far apart. */
	make_schema(&s, 3);
	strcpy(s.f[1].name, "f0");
	diag_clear(&d);
	cr_expect_eq(schema_check(&s, &d), LOADER_ESCHEMA);
	cr_expect(strstr(d.msg, "f0"), "message \"%s\"", d.msg);
	make_schema(&s, SCHEMA_MAX_FIELDS);
	memset(s.f[63].name, 0, sizeof(s.f[63].name));
	strcpy(s.f[63].name, "f2");
	cr_expect_eq(schema_check(&s, NULL), LOADER_ESCHEMA);

	/* A bad field anywhere makes the schema bad. */
	make_schema(&s, 5);
	s.f[4].dtype = DT_COUNT; /* unknown (a first dimension of 0 is "*") */
	cr_expect_eq(schema_check(&s, NULL), LOADER_ESCHEMA);
}

Test(schema, find_and_equal)
{
	struct schema a, b;

	make_schema(&a, 5);
	cr_expect_eq(schema_find(&a, "f0"), 0);
	cr_expect_eq(schema_find(&a, "f4"), 4);
	cr_expect_eq(schema_find(&a, "f5"), -1);
	cr_expect_eq(schema_find(&a, "f"), -1);
	cr_expect_eq(schema_find(&a, ""), -1);

	make_schema(&b, 5);
	cr_expect(schema_equal(&a, &b));
	/* Unused slots do not count. */
	b.f[10].kind = 9;
	cr_expect(schema_equal(&a, &b));
	b.f[2].level = 4;
	cr_expect_not(schema_equal(&a, &b), "level differs");
	make_schema(&b, 5);
	b.f[3].dims[0] = 1;
	cr_expect_not(schema_equal(&a, &b), "dim differs");
	make_schema(&b, 4);
	cr_expect_not(schema_equal(&a, &b), "field count differs");
	make_schema(&b, 5);
	b.f[0] = a.f[1];
	b.f[1] = a.f[0];
	cr_expect_not(schema_equal(&a, &b), "order differs");
}
