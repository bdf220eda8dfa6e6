/*
 * error.c - loader_strerror(): one description for -errno and our codes.
 */
#include <string.h>

#include "loader_error.h"

static const char *const loader_errors[] = {
	[-(LOADER_EFORMAT)-4096] = "malformed data",
	[-(LOADER_EVERSION)-4096] = "unsupported version",
	[-(LOADER_ETRUNC)-4096] = "data truncated",
	[-(LOADER_ECHECKSUM)-4096] = "checksum mismatch",
	[-(LOADER_ESCHEMA)-4096] = "invalid or mismatched schema",
	[-(LOADER_EDECODE)-4096] = "payload does not decode",
	[-(LOADER_ERANGE)-4096] = "value out of range",
	[-(LOADER_ETOOBIG)-4096] = "size above limit",
	[-(LOADER_EUSAGE)-4096] = "invalid option or argument",
	[-(LOADER_EPROTO)-4096] = "malformed protocol message",
	[-(LOADER_EEND)-4096] = "end of stream",
	[-(LOADER_ESTREAM)-4096] = "stream failed in the daemon",
};

LOADER_API const char *loader_strerror(int err)
{
	size_t i;

	if (err >= 0)
		return "success";
	if (err >= -LOADER_ERRNO_MAX)
		return strerror(-err);
	i = (size_t)(-(long long)err) - 4096;
	if (i < sizeof(loader_errors) / sizeof(loader_errors[0]) &&
	    loader_errors[i])
		return loader_errors[i];
	return "unknown error";
}
