/*
 * test_npy.c - the .npy header (codecs/npy.c): what numpy writes is read
 * back exactly; damaged and unsupported headers are refused with the
 * right code; the writer's headers parse to what was written.
 */
#include <errno.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader_error.h"
#include "npy.h"

/* A version 1.0 .npy header around dict, padded as numpy pads it. */
static size_t npy1(const char *dict, unsigned char *out)
{
	size_t n = strlen(dict), total = (10 + n + 1 + 63) / 64 * 64;

	memcpy(out, "\x93NUMPY\x01\x00", 8);
	out[8] = (unsigned char)((total - 10) & 0xff);
	out[9] = (unsigned char)((total - 10) >> 8);
	memcpy(out + 10, dict, n);
	memset(out + 10 + n, ' ', total - 10 - n - 1);
	out[total - 1] = '\n';
	return total;
}

struct good {
	const char *dict;
	char order, kind;
	uint32_t itemsize, ndim;
	uint64_t dims[3];
	bool fortran;
};

static const struct good goods[] = {
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", '<',
	  'f', 4, 2, { 3, 4 }, false },
	{ "{'descr': '|u1', 'fortran_order': False, 'shape': (28, 28), }", '|',
	  'u', 1, 2, { 28, 28 }, false },
	{ "{'descr': '>i2', 'fortran_order': False, 'shape': (5,), }", '>', 'i',
	  2, 1, { 5 }, false },
	{ "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", '<', 'i',
	  8, 0, { 0 }, false },
	{ "{'descr': '|b1', 'fortran_order': True, 'shape': (2, 3, 4)}", '|',
	  'b', 1, 3, { 2, 3, 4 }, true },
	/* Keys in another order, double quotes, no trailing comma. */
	{ "{\"shape\": (7, 1), \"fortran_order\": False, \"descr\": \"<f8\"}",
	  '<', 'f', 8, 2, { 7, 1 }, false },
	{ "{'descr': '<f2', 'fortran_order': False, 'shape': (0, 3), }", '<',
	  'f', 2, 2, { 0, 3 }, false },
};

Test(npy, what_numpy_writes)
{
	for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
		const struct good *g = &goods[i];
		unsigned char buf[256];
		size_t len = npy1(g->dict, buf);
		struct npy_info n;
		struct diag d = { { 0 } };
		uint64_t count = 1;

		cr_assert_eq(npy_parse(buf, len, &n, &d), 0, "%s: %s", g->dict,
			     d.msg);
		cr_expect_eq(n.order, g->order, "%s", g->dict);
		cr_expect_eq(n.kind, g->kind, "%s", g->dict);
		cr_expect_eq(n.itemsize, g->itemsize, "%s", g->dict);
		cr_expect_eq(n.fortran, g->fortran, "%s", g->dict);
		cr_assert_eq(n.ndim, g->ndim, "%s", g->dict);
		for (uint32_t k = 0; k < n.ndim; k++) {
			cr_expect_eq(n.dims[k], g->dims[k], "%s", g->dict);
			count *= g->dims[k];
		}
		cr_expect_eq(n.count, count, "%s", g->dict);
		cr_expect_eq(n.data_off, len, "%s", g->dict);
	}
}

struct bad {
	const char *dict;
	int err;
};

static const struct bad bads[] = {
	{ "{'descr': '<f4', 'fortran_order': False}", LOADER_EFORMAT },
	{ "{'descr': '<f4', 'shape': (3,)}", LOADER_EFORMAT },
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}",
	  LOADER_EFORMAT },
	{ "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
	  LOADER_EFORMAT },
	{ "{'descr': '<f3', 'fortran_order': False, 'shape': (3,)}",
	  LOADER_EFORMAT },
	{ "{'descr': '<q4', 'fortran_order': False, 'shape': (3,)}",
	  LOADER_EFORMAT },
	{ "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,)}",
	  LOADER_EFORMAT },
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': (3, -1)}",
	  LOADER_EFORMAT },
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4]}",
	  LOADER_EFORMAT },
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk",
	  LOADER_EFORMAT },
	{ "'descr': '<f4', 'fortran_order': False, 'shape': (3,)",
	  LOADER_EFORMAT },
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}",
	  LOADER_ETOOBIG },
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
	  LOADER_EFORMAT },
	{ "{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}", -ENOTSUP },
	{ "{'descr': '|O', 'fortran_order': False, 'shape': (3,)}", -ENOTSUP },
	{ "{'descr': '<U10', 'fortran_order': False, 'shape': (3,)}", -ENOTSUP },
	{ "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}",
	  -ENOTSUP },
	{ "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}",
	  -ENOTSUP },
};

Test(npy, damaged_and_unsupported)
{
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		unsigned char buf[512];
		size_t len = npy1(bads[i].dict, buf);
		struct npy_info n;
		struct diag d = { { 0 } };

		cr_expect_eq(npy_parse(buf, len, &n, &d), bads[i].err, "%s: %s",
			     bads[i].dict, d.msg);
		cr_expect_neq(d.msg[0], '\0', "%s: a reason", bads[i].dict);
	}
}

Test(npy, framing)
{
	unsigned char buf[256];
	size_t len = npy1("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
			  buf);
	struct npy_info n;

	/* Cut anywhere inside the header. */
	for (size_t k = 0; k < len; k++)
		cr_expect_eq(npy_parse(buf, k, &n, NULL), LOADER_EFORMAT,
			     "cut at %zu", k);
	buf[0] = 'x';
	cr_expect_eq(npy_parse(buf, len, &n, NULL), LOADER_EFORMAT);
	buf[0] = 0x93;
	buf[6] = 4; /* no such version */
	cr_expect_eq(npy_parse(buf, len, &n, NULL), LOADER_EFORMAT);
	buf[6] = 2; /* version 2.0: a 4-byte length, here absurd */
	cr_expect_eq(npy_parse(buf, len, &n, NULL), LOADER_EFORMAT);
}

Test(npy, written_headers_parse_back)
{
	static const uint32_t dims[][3] = { { 224, 224, 3 }, { 5 }, { 0 } };
	static const uint32_t ndims[] = { 3, 1, 0 };
	static const char kinds[] = { 'u', 'f', 'i' };
	static const uint32_t sizes[] = { 1, 4, 8 };

	for (int i = 0; i < 3; i++) {
		unsigned char hdr[256];
		size_t len = npy_write_header(kinds[i], sizes[i], dims[i],
					      ndims[i], hdr, sizeof(hdr));
		struct npy_info n;
		struct diag d = { { 0 } };

		cr_assert_gt(len, 0);
		cr_expect_eq(len % 64, 0, "padded to 64 as numpy does");
		cr_assert_eq(npy_parse(hdr, len, &n, &d), 0, "%s", d.msg);
		cr_expect_eq(n.kind, kinds[i]);
		cr_expect_eq(n.itemsize, sizes[i]);
		cr_assert_eq(n.ndim, ndims[i]);
		for (uint32_t k = 0; k < n.ndim; k++)
			cr_expect_eq(n.dims[k], dims[i][k]);
		cr_expect_eq(n.data_off, len);
	}
	cr_expect_eq(npy_write_header('f', 4, dims[0], 3, (unsigned char[8]){ 0 },
				      8),
		     0, "a header that does not fit is not written");
}
