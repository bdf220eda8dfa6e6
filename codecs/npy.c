/*
 * npy.c - the .npy header (see npy.h).
 *
 * The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * followed by spaces and a newline. We parse the subset numpy writes
 * (and hand-written files use): the three keys in any order, strings in
 * single or double quotes, True/False, a tuple of non-negative integers.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "loader_error.h"
#include "npy.h"

#define NPY_MAGIC     "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN     64

struct cur {
	const char *p, *end;
};

static void skip_space(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
				 *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static bool take(struct cur *c, char ch)
{
	skip_space(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

/* A quoted string into out (cap bytes, NUL-terminated). */
static bool string(struct cur *c, char *out, size_t cap)
{
	char q;
	size_t n = 0;

	skip_space(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return false;
	q = *c->p++;
	while (c->p < c->end && *c->p != q) {
		if (*c->p == '\\' || n + 1 >= cap)
			return false;
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return false;
	c->p++;
	out[n] = '\0';
	return true;
}

static bool word(struct cur *c, const char *w)
{
	size_t n = strlen(w);

	skip_space(c);
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n))
		return false;
	c->p += n;
	return true;
}

static bool number(struct cur *c, uint64_t *v)
{
	uint64_t x = 0;

	skip_space(c);
	if (c->p >= c->end || *c->p < '0' || *c->p > '9')
		return false;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned dig = (unsigned)(*c->p++ - '0');

		if (x > (UINT64_MAX - dig) / 10)
			return false;
		x = x * 10 + dig;
	}
	*v = x;
	return true;
}

/* A plain dtype: byte order, kind, item size ("<f4", "|u1", "=i8"). */
static int parse_descr(const char *s, struct npy_info *info, struct diag *d)
{
	uint32_t size;

	if (strlen(s) != 3 || !strchr("<>|=", s[0]) || s[2] < '1' || s[2] > '8')
		goto other;
	size = (uint32_t)(s[2] - '0');
	info->kind = s[1];
	info->itemsize = size;
	info->order = s[0];
	if (s[0] == '=')
		info->order =
			__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '<' : '>';
	switch (s[1]) {
	case 'b':
		if (size != 1)
			goto bad;
		break;
	case 'i':
	case 'u':
		if (size != 1 && size != 2 && size != 4 && size != 8)
			goto bad;
		break;
	case 'f':
		if (size != 2 && size != 4 && size != 8)
			goto bad;
		break;
	default: goto other;
	}
	if (size == 1)
		info->order = '|';
	return 0;
other:
	/* Complex, strings, objects, dates, sizes like '<U10'. */
	if (strlen(s) >= 2 && strchr("<>|=", s[0]) && strchr("cSUVOMm", s[1]))
		return diag_set(
			d, -ENOTSUP,
			".npy dtype '%s': only bool, integers and floats are taken",
			s);
bad:
	return diag_set(d, LOADER_EFORMAT, ".npy dtype '%s' is not a dtype", s);
}

static int parse_shape(struct cur *c, struct npy_info *info, struct diag *d)
{
	info->ndim = 0;
	info->count = 1;
	if (!take(c, '('))
		return diag_set(d, LOADER_EFORMAT,
				".npy header: 'shape' is not a tuple");
	while (!take(c, ')')) {
		uint64_t v;

		if (!number(c, &v))
			return diag_set(
				d, LOADER_EFORMAT,
				".npy header: a dimension of 'shape' is not a number");
		if (info->ndim == NPY_MAX_DIMS)
			return diag_set(d, -ENOTSUP,
					".npy array of more than %d dimensions",
					NPY_MAX_DIMS);
		info->dims[info->ndim++] = v;
		if (v && info->count > UINT64_MAX / v)
			return diag_set(d, LOADER_ETOOBIG,
					".npy shape overflows 64 bits");
		info->count *= v;
		if (!take(c, ',')) {
			if (!take(c, ')'))
				return diag_set(
					d, LOADER_EFORMAT,
					".npy header: 'shape' is not a tuple of numbers");
			break;
		}
	}
	/* (3) is a number in Python, (3,) a tuple: numpy writes the latter. */
	return 0;
}

int npy_parse(const void *buf, size_t len, struct npy_info *info,
	      struct diag *d)
{
	const unsigned char *b = buf;
	bool seen_descr = false, seen_order = false, seen_shape = false;
	uint64_t hlen;
	size_t pre;
	struct cur c;
	int err;

	memset(info, 0, sizeof(*info));
	if (len < NPY_MAGIC_LEN + 4 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN))
		return diag_set(d, LOADER_EFORMAT,
				"not a .npy file (no \\x93NUMPY at the start)");
	if (b[6] == 1) {
		pre = 10;
		hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8;
	} else if (b[6] == 2 || b[6] == 3) {
		pre = 12;
		if (len < pre)
			return diag_set(d, LOADER_EFORMAT,
					".npy header cut short");
		hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8 |
		       (uint64_t)b[10] << 16 | (uint64_t)b[11] << 24;
	} else {
		return diag_set(d, LOADER_EFORMAT, ".npy version %u.%u", b[6],
				b[7]);
	}
	if (hlen > NPY_HEADER_MAX)
		return diag_set(d, LOADER_EFORMAT,
				".npy header of %llu bytes (at most %d)",
				(unsigned long long)hlen, NPY_HEADER_MAX);
	if (len < pre + hlen)
		return diag_set(d, LOADER_EFORMAT,
				".npy header of %llu bytes, %zu in the file",
				(unsigned long long)hlen, len - pre);
	c.p = (const char *)b + pre;
	c.end = c.p + hlen;
	if (!take(&c, '{'))
		goto syntax;
	while (!take(&c, '}')) {
		char key[32], val[16];

		if (!string(&c, key, sizeof(key)) || !take(&c, ':'))
			goto syntax;
		if (!strcmp(key, "descr") && !seen_descr) {
			if (!string(&c, val, sizeof(val))) {
				skip_space(&c);
				if (c.p < c.end && *c.p == '[')
					return diag_set(
						d, -ENOTSUP,
						".npy structured dtype: only plain arrays are taken");
				goto syntax;
			}
			err = parse_descr(val, info, d);
			if (err)
				return err;
			seen_descr = true;
		} else if (!strcmp(key, "fortran_order") && !seen_order) {
			if (word(&c, "True"))
				info->fortran = true;
			else if (!word(&c, "False"))
				goto syntax;
			seen_order = true;
		} else if (!strcmp(key, "shape") && !seen_shape) {
			err = parse_shape(&c, info, d);
			if (err)
				return err;
			seen_shape = true;
		} else {
			return diag_set(
				d, LOADER_EFORMAT,
				".npy header: key '%s' unknown or repeated",
				key);
		}
		if (!take(&c, ',')) {
			if (!take(&c, '}'))
				goto syntax;
			break;
		}
	}
	skip_space(&c);
	if (c.p != c.end)
		goto syntax;
	if (!seen_descr || !seen_order || !seen_shape)
		return diag_set(d, LOADER_EFORMAT, ".npy header without '%s'",
				!seen_descr ? "descr" :
				!seen_order ? "fortran_order" :
					      "shape");
	if (info->count > UINT64_MAX / info->itemsize)
		return diag_set(d, LOADER_ETOOBIG,
				".npy shape overflows 64 bits");
	info->data_off = pre + (size_t)hlen;
	return 0;
syntax:
	return diag_set(
		d, LOADER_EFORMAT,
		".npy header is not a dict of descr, fortran_order and shape");
}

int npy_check_size(const struct npy_info *info, size_t len, struct diag *d)
{
	uint64_t bytes = info->count * info->itemsize;

	if (len < info->data_off || len - info->data_off != bytes)
		return diag_set(d, LOADER_EFORMAT,
				"%zu bytes, but its header says %zu + %llu",
				len, info->data_off, (unsigned long long)bytes);
	return 0;
}

size_t npy_write_header(char kind, uint32_t itemsize, const uint32_t *dims,
			uint32_t ndim, unsigned char *hdr, size_t cap)
{
	char dict[NPY_HEADER_MAX];
	size_t n, total;
	int len;

	if (ndim > NPY_MAX_DIMS)
		return 0;
	len = snprintf(dict, sizeof(dict),
		       "{'descr': '%c%c%u', 'fortran_order': False, 'shape': (",
		       itemsize == 1				 ? '|' :
		       __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '<' :
								   '>',
		       kind, itemsize);
	for (uint32_t i = 0; i < ndim; i++)
		len += snprintf(dict + len, sizeof(dict) - (size_t)len, "%u%s",
				dims[i], ndim == 1 || i + 1 < ndim ? ", " : "");
	len += snprintf(dict + len, sizeof(dict) - (size_t)len, "), }");
	n = (size_t)len;
	/* Spaces, then a newline, up to the alignment numpy writes. */
	total = (10 + n + 1 + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
	if (total > cap || total - 10 > 0xffff)
		return 0;
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (unsigned char)((total - 10) & 0xff);
	hdr[9] = (unsigned char)((total - 10) >> 8);
	memcpy(hdr + 10, dict, n);
	memset(hdr + 10 + n, ' ', total - 10 - n - 1);
	hdr[total - 1] = '\n';
	return total;
}
