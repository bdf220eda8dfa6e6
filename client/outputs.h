/*
 * outputs.h - a stream's outputs option, "FIELD[:CAST],...", as the
 * proto_output entries of an OPEN message.
 *
 * Internal to libloader: compiled into it but not exported (the library
 * is built with -fvisibility=hidden); the unit tests compile outputs.c
 * directly.
 */
#ifndef LOADER_OUTPUTS_H
#define LOADER_OUTPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/*
 * Parse spec into out[0..*n-1] (out has room for PROTO_MAX_OUTPUTS).
 * spec is a comma-separated list of FIELD or FIELD:CAST with no blanks:
 * FIELD has 1..PROTO_NAME_MAX-1 characters of [A-Za-z0-9_.-] (a schema
 * field name) and appears once; CAST is "unit" (PROTO_CAST_F32_UNIT) or
 * "f32" (PROTO_CAST_F32); without one the cast is PROTO_CAST_NONE.
 * Every entry is zero-filled past its name. A NULL spec means every
 * field as stored: *n = 0.
 *
 * Returns 0, or LOADER_EUSAGE with the reason in why (whylen bytes, may
 * be 0) and *n = 0, or -EINVAL if out or n is NULL.
 */
int loader_parse_outputs(const char *spec, struct proto_output *out,
			 uint32_t *n, char *why, size_t whylen);

#endif /* LOADER_OUTPUTS_H */
