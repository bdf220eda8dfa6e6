/*
 * outputs.c - parse a stream's outputs option ("image:unit,label").
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "loader_error.h"
#include "msg.h"
#include "outputs.h"

static const struct {
	const char *name;
	uint32_t cast;
} output_casts[] = {
	{ "unit", PROTO_CAST_F32_UNIT },
	{ "f32", PROTO_CAST_F32 },
};

/* A refused output list: LOADER_EUSAGE, and why. */
#define outputs_bad(why, whylen, ...)                                          \
	msg_why(why, whylen, LOADER_EUSAGE, __VA_ARGS__)

/*
 * The characters of a schema field name (pipeline/format/schema.c). Spelled
 * out rather than isalnum(), whose answer depends on the locale.
 */
static bool outputs_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

static int outputs_cast(const char *s, size_t len, uint32_t *cast)
{
	for (size_t i = 0; i < sizeof(output_casts) / sizeof(output_casts[0]);
	     i++) {
		if (strlen(output_casts[i].name) == len &&
		    !memcmp(output_casts[i].name, s, len)) {
			*cast = output_casts[i].cast;
			return 0;
		}
	}
	return -1;
}

int loader_parse_outputs(const char *spec, struct proto_output *out,
			 uint32_t *n, char *why, size_t whylen)
{
	const char *p = spec;
	uint32_t k = 0;
	int err;

	if (!out || !n)
		return -EINVAL;
	*n = 0;
	if (whylen)
		why[0] = '\0';
	if (!spec)
		return 0;
	if (!*spec)
		return outputs_bad(
			why, whylen,
			"outputs: empty list (leave it unset for every field)");
	memset(out, 0, sizeof(*out) * PROTO_MAX_OUTPUTS);
	for (;;) {
		const char *end = strchr(p, ',');
		const char *colon;
		size_t len, nlen;
		uint32_t cast = PROTO_CAST_NONE;

		len = end ? (size_t)(end - p) : strlen(p);
		colon = memchr(p, ':', len);
		nlen = colon ? (size_t)(colon - p) : len;
		if (nlen == 0) {
			err = outputs_bad(why, whylen,
					  "outputs: entry %u has no field name",
					  k + 1);
			goto fail;
		}
		if (nlen >= PROTO_NAME_MAX) {
			err = outputs_bad(
				why, whylen,
				"outputs: field name \"%.*s\" longer than %d characters",
				(int)nlen, p, PROTO_NAME_MAX - 1);
			goto fail;
		}
		for (size_t i = 0; i < nlen; i++) {
			if (!outputs_name_char(p[i])) {
				err = outputs_bad(
					why, whylen,
					"outputs: field name \"%.*s\" has a character other than [A-Za-z0-9_.-]",
					(int)nlen, p);
				goto fail;
			}
		}
		if (colon && outputs_cast(colon + 1, len - nlen - 1, &cast)) {
			err = outputs_bad(
				why, whylen,
				"outputs: \"%.*s\": unknown cast \"%.*s\" (unit or f32)",
				(int)len, p, (int)(len - nlen - 1), colon + 1);
			goto fail;
		}
		if (k == PROTO_MAX_OUTPUTS) {
			err = outputs_bad(why, whylen,
					  "outputs: more than %d entries",
					  PROTO_MAX_OUTPUTS);
			goto fail;
		}
		for (uint32_t j = 0; j < k; j++) {
			if (strlen(out[j].field) == nlen &&
			    !memcmp(out[j].field, p, nlen)) {
				err = outputs_bad(
					why, whylen,
					"outputs: field \"%.*s\" named twice",
					(int)nlen, p);
				goto fail;
			}
		}
		memcpy(out[k].field, p, nlen);
		out[k].cast = cast;
		k++;
		if (!end)
			break;
		p = end + 1;
	}
	*n = k;
	return 0;
fail:
	memset(out, 0, sizeof(*out) * PROTO_MAX_OUTPUTS);
	return err;
}
