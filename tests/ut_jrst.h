/*
 * ut_jrst.h - a JPEG transcoded to restart segments as loaderctl pack
 * does it (codecs/jrst.h), for the unit tests of every layer that reads
 * such files.
 *
 * Include after <criterion/criterion.h>; link with libcodecs.
 */
#ifndef UT_JRST_H
#define UT_JRST_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jrst.h"

/*
 * jpg[0..len) transcoded with interval MCUs a segment (optimal tables if
 * asked); a failure fails the test. Returns a malloc'd copy and its
 * length in *out_len.
 */
static inline unsigned char *ut_restart_copy(const void *jpg, size_t len,
					     uint32_t interval, bool optimize,
					     size_t *out_len)
{
	struct jrst_params p = { interval, optimize };
	struct jrst_enc *e;
	const unsigned char *o;
	unsigned char *copy;
	struct diag d = { "" };

	cr_assert_eq(jrst_enc_new(&e, 0), 0);
	cr_assert_eq(jrst_transcode(e, jpg, len, &p, &o, out_len, &d), 0,
		     "%s", d.msg);
	copy = malloc(*out_len);
	cr_assert_not_null(copy);
	memcpy(copy, o, *out_len);
	jrst_enc_free(e);
	return copy;
}

#endif /* UT_JRST_H */
