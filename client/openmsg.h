/*
 * openmsg.h - the caller's struct loader_opts as an OPEN message
 * (struct proto_open): its size handled, its defaults filled in and
 * every value checked that can be without the daemon.
 *
 * Internal to libloader: compiled into it but not exported (the library
 * is built with -fvisibility=hidden); the unit tests compile openmsg.c
 * directly. Neither function needs a connection or keeps any state.
 */
#ifndef LOADER_OPENMSG_H
#define LOADER_OPENMSG_H

#include <stddef.h>

#include "loader.h"
#include "proto.h"

/*
 * Copy the caller's options *in into *o as this library knows them: the
 * first in->size bytes, the rest of *o zero. A NULL in is every option
 * at its default (*o all zero). in->size must reach at least the end of
 * the 1.0 struct (start_batch); a larger struct, from a newer header,
 * is taken if every byte past sizeof(*o) is zero.
 *
 * Returns 0, or LOADER_EUSAGE with the reason in why (whylen bytes, may
 * be 0). *o is zeroed either way before anything is copied.
 */
int loader_copy_opts(const struct loader_opts *in, struct loader_opts *o,
		     char *why, size_t whylen);

/*
 * Fill *po from *o (as loader_copy_opts() left it): zero fields take
 * their defaults (batch_size 256, prefetch_bytes 64 MiB, world 1), and
 * po->flags gets PROTO_OPEN_DIRECT, _FRESH, _POSITIONS and _PAD from
 * direct, fresh, from_world and pad, and PROTO_OPEN_RAGGED when o->size
 * reaches ragged_bytes (a caller that knows 1.2's options). The flags
 * of the dataset's kind (PROTO_OPEN_TAR, ...) are not set here. o's
 * strings are copied; nothing of o is kept.
 *
 * Returns 0, or LOADER_EUSAGE with the reason in why (whylen bytes, may
 * be 0): an option out of its range, a name or pipeline too long, an
 * option that needs another one, or a bad outputs spec (outputs.h).
 * *po is then partly filled and must not be sent.
 */
int loader_make_open(const struct loader_opts *o, struct proto_open *po,
		     char *why, size_t whylen);

#endif /* LOADER_OPENMSG_H */
