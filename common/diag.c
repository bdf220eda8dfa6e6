/*
 * diag.c - error messages for bad input.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "diag.h"

int diag_set(struct diag *d, int err, const char *fmt, ...)
{
	va_list ap;

	if (!d)
		return err;
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
	return err;
}

int diag_wrap(struct diag *d, int err, const char *fmt, ...)
{
	char prefix[DIAG_MAX], old[DIAG_MAX];
	va_list ap;

	if (!d)
		return err;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, d->msg, sizeof(old));
	snprintf(d->msg, sizeof(d->msg), "%s: %s", prefix,
		 old[0] ? old : "error");
	return err;
}
