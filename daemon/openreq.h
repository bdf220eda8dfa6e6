/*
 * openreq.h - an OPEN request off the wire: check the fields that only
 * the protocol has (flags, reserved words, terminated strings, enum
 * values) and turn it into the pipeline's stream configuration, so that
 * pipeline/ never sees a protocol struct; and the POSITIONS messages
 * that may come before it, checked and gathered. Every field of both is
 * checked here, before the daemon uses any. A REMOTE's store and
 * credentials become the S3 client's config here too.
 */
#ifndef LD_OPENREQ_H
#define LD_OPENREQ_H

#include "diag.h"
#include "proto.h"
#include "stream.h"

/*
 * Fill c from m. c->pipeline points into m (valid while m is), c->label
 * and c->max_pixels are left to the caller. Returns 0, LOADER_EPROTO
 * (malformed) or LOADER_EUSAGE (a value out of range), described in d.
 * The ranges that are the stream's own are checked by stream_new().
 */
int openreq_config(const struct proto_open *m, struct stream_config *c,
		   struct diag *d);

/*
 * POSITIONS received: where an earlier world's ranks stopped, pos[0..
 * got - 1] of world, and the plan they ran under (OPEN_OK's). Zeroed:
 * none yet.
 */
struct openreq_given {
	struct proto_position *pos;
	uint32_t world, got, plan_end;
	uint64_t plan;
};

/*
 * Take POSITIONS m into g (pos allocated by the first): the next ranks
 * in order, of the same world and plan as those before. Returns 0, or
 * LOADER_EPROTO (or -ENOMEM) with the reason in d, g unchanged. Whether
 * the session may send one now is the caller's to check.
 */
int openreq_positions(struct openreq_given *g, const struct proto_positions *m,
		      struct diag *d);

/*
 * Does an OPEN with flags go with the POSITIONS in g: all of them for an
 * OPEN from positions, none for another? 0 or LOADER_EPROTO.
 */
int openreq_given_check(const struct openreq_given *g, uint32_t flags,
			struct diag *d);

/*
 * The position g holds for rank of world: NULL unless g's positions are
 * of that world (and rank is below it).
 */
const struct proto_position *openreq_given_rank(const struct openreq_given *g,
						uint32_t world, uint32_t rank);

/* Free g's positions and zero it. */
void openreq_given_clear(struct openreq_given *g);

/*
 * The tars' names the client gave in file 0 of a tar or LMDB dataset
 * (fd; PROTO_TARS_MAGIC, then a name a line), as labels for messages: n
 * of them, or NULL. They are the client's word: unless file 0 holds
 * exactly n names of 1..200 printable bytes, none is taken, and the
 * stream names its files "tar-NNNNN". Free with openreq_labels_free().
 */
char **openreq_tar_labels(int fd, uint32_t n);
void openreq_labels_free(char **labels, uint32_t n);

/*
 * The store and credentials of REMOTE r into cfg, for the S3 client
 * (common/awscfg.h): every string copied whole, byte for byte, and the
 * addressing style as its number. Nothing is checked here: the daemon
 * refused a REMOTE with a string not terminated or an unknown style when
 * it came. r's URL is not cfg's. cfg holds a secret: the caller wipes it
 * (aws_cfg_wipe()).
 */
struct aws_cfg;
void openreq_remote_cfg(const struct proto_remote *r, struct aws_cfg *cfg);

#endif /* LD_OPENREQ_H */
