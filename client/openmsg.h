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
#include <stdint.h>

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
 * of the dataset's kind (PROTO_OPEN_TAR, ...) are not set here;
 * PROTO_OPEN_MIXTURE is, when o has members (loader_make_members()
 * builds and checks them). o's strings are copied; nothing of o is
 * kept.
 *
 * Returns 0, or LOADER_EUSAGE with the reason in why (whylen bytes, may
 * be 0): an option out of its range, a name or pipeline too long, an
 * option that needs another one, or a bad outputs spec (outputs.h).
 * *po is then partly filled and must not be sent.
 */
int loader_make_open(const struct loader_opts *o, struct proto_open *po,
		     char *why, size_t whylen);

/*
 * The smallest struct loader_member a caller can know: its layout at
 * LOADER_VERSION 1.6, which brought it. Later versions only append.
 */
#define LOADER_MEMBER_SIZE_1                                                   \
	(offsetof(struct loader_member, pipeline) + sizeof(const char *))

/*
 * The most samples a member may choose and an epoch_size: the daemon's
 * bound on a mixture's epoch (pipeline/stream/mixture.h), and the most a
 * repeat or proportion may be, so that no value is beyond any count.
 */
#define LOADER_MIX_MAX (1ull << 48)

/*
 * Member i of o->members (o as loader_copy_opts() left it) into *m as
 * this library knows it: the first o->member_size bytes, the rest of *m
 * zero; a larger struct, from a newer header, is taken if every byte
 * past sizeof(*m) is zero. Checks nothing else: loader_make_members()
 * does. Returns 0, or LOADER_EUSAGE with the reason in why (whylen
 * bytes, may be 0).
 */
int loader_copy_member(const struct loader_opts *o, uint32_t i,
		       struct loader_member *m, char *why, size_t whylen);

/*
 * The MEMBER messages of a mixture, from o->members, o->nmembers and
 * o->epoch_size (o as loader_copy_opts() left it) into pm[0..nmembers -
 * 1] (room for PROTO_MAX_MEMBERS): index, how, value, epoch_size, the
 * pipeline ("" for the OPEN's) and the label (the member's dataset as
 * given; a path longer than the label's room keeps its end, after
 * "..."). Their flags stay 0: they are what the member's files turn out
 * to be (discover.h). Nothing of o is kept.
 *
 * Returns 0 (with no members, pm untouched), or LOADER_EUSAGE with the
 * reason in why (whylen bytes, may be 0): members without nmembers or
 * the other way round, more than PROTO_MAX_MEMBERS, member_size too
 * small or a larger member's unknown tail set, a member without a
 * dataset, an unknown how, a value that is not finite and above 0 (a
 * whole number for choose) or past LOADER_MIX_MAX, proportions beside
 * repeat or choose, epoch_size without proportions or past
 * LOADER_MIX_MAX, a pipeline too long for the protocol, a reserved word
 * set. Each names the member by its number and the field.
 */
int loader_make_members(const struct loader_opts *o, struct proto_member *pm,
			char *why, size_t whylen);

#endif /* LOADER_OPENMSG_H */
