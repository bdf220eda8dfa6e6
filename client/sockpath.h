/*
 * sockpath.h - where a client finds loaderd: one lookup order for
 * libloader, loaderctl and everything built on them (libloader(3),
 * loaderctl(1)):
 *
 *   1. the path the caller gives, else $LOADERD_SOCKET;
 *   2. the user's own daemon, $XDG_RUNTIME_DIR/loaderd.sock, when a
 *      socket is there;
 *   3. the system service's, /run/loaderd/loaderd.sock.
 *
 * So a login session (which always has XDG_RUNTIME_DIR) reaches the
 * system service unless the user runs a daemon of their own.
 */
#ifndef LD_SOCKPATH_H
#define LD_SOCKPATH_H

#include <stddef.h>

#define SOCKPATH_NAME	"loaderd.sock"
#define SOCKPATH_SYSTEM "/run/loaderd/" SOCKPATH_NAME

/*
 * The socket to connect to, into buf (n bytes). skipped (sn bytes, may
 * be NULL) gets the per-user path looked for and not found when the
 * system's is chosen, else "", for the error should that fail too.
 * Returns 0, or -ENAMETOOLONG (buf then holds what fitted).
 */
int sockpath_find(const char *given, char *buf, size_t n, char *skipped,
		  size_t sn);

#endif /* LD_SOCKPATH_H */
