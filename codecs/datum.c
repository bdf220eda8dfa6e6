/*
 * datum.c - Caffe's Datum message (see datum.h): a protocol-buffer
 * reader for its seven fields, nothing more.
 */
#include <string.h>

#include "datum.h"
#include "loader_error.h"

/* A base-128 varint at *p (< end): at most 10 bytes. */
static int varint(const unsigned char **p, const unsigned char *end,
		  uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return -1;
		x |= (uint64_t)(**p & 0x7f) << shift;
		if (!(*(*p)++ & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

int datum_parse(const void *buf, size_t len, struct datum *out, struct diag *d)
{
	const unsigned char *b = buf, *p = b, *end = b + len;

	memset(out, 0, sizeof(*out));
	while (p < end) {
		size_t at = (size_t)(p - b);
		uint64_t tag, v;
		unsigned field, wire;

		if (varint(&p, end, &tag))
			goto cut;
		field = (unsigned)(tag >> 3);
		wire = (unsigned)(tag & 7);
		if (field == 0)
			return diag_set(d, LOADER_EFORMAT,
					"datum: field number 0 at offset %zu",
					at);
		switch (wire) {
		case 0: /* varint */
			if (varint(&p, end, &v))
				goto cut;
			switch (field) {
			case 1: out->channels = (int32_t)v; break;
			case 2: out->height = (int32_t)v; break;
			case 3: out->width = (int32_t)v; break;
			case 5:
				out->label = (int32_t)v;
				out->has_label = true;
				break;
			case 7: out->encoded = v != 0; break;
			default: break;
			}
			break;
		case 1: /* 64-bit */
			if (end - p < 8)
				goto cut;
			p += 8;
			break;
		case 2: /* length-delimited */
			if (varint(&p, end, &v) || v > (uint64_t)(end - p))
				goto cut;
			if (field == 4) {
				out->data = p;
				out->data_len = (size_t)v;
			} else if (field == 6) {
				out->nfloats += (size_t)v / 4; /* packed */
			}
			p += v;
			break;
		case 5: /* 32-bit */
			if (end - p < 4)
				goto cut;
			if (field == 6)
				out->nfloats++;
			p += 4;
			break;
		default:
			return diag_set(d, LOADER_EFORMAT,
					"datum: wire type %u at offset %zu",
					wire, at);
		}
		continue;
	cut:
		return diag_set(
			d, LOADER_EFORMAT,
			"datum: field at offset %zu runs past the %zu-byte value",
			at, len);
	}
	if (out->channels < 0 || out->height < 0 || out->width < 0)
		return diag_set(d, LOADER_EFORMAT,
				"datum: negative size %lldx%lldx%lld",
				(long long)out->channels,
				(long long)out->height, (long long)out->width);
	return 0;
}
