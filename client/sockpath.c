/*
 * sockpath.c - where a client finds loaderd (see sockpath.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "sockpath.h"

/* snprintf() into buf, or -ENAMETOOLONG. */
static int put(char *buf, size_t n, const char *a, const char *b)
{
	int w = snprintf(buf, n, "%s%s", a, b);

	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

int sockpath_find(const char *given, char *buf, size_t n, char *skipped,
		  size_t sn)
{
	const char *p = given, *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int err;

	if (skipped && sn)
		skipped[0] = '\0';
	if (!p || !*p)
		p = getenv("LOADERD_SOCKET");
	if (p && *p)
		return put(buf, n, p, "");
	if (xdg && *xdg) {
		err = put(buf, n, xdg, "/" SOCKPATH_NAME);
		if (err || (!stat(buf, &st) && S_ISSOCK(st.st_mode)))
			return err;
		if (skipped && sn)
			snprintf(skipped, sn, "%s", buf);
	}
	return put(buf, n, SOCKPATH_SYSTEM, "");
}
