/*
 * openreq.h - an OPEN request off the wire: check the fields that only
 * the protocol has (flags, reserved words, terminated strings, enum
 * values) and turn it into the pipeline's stream configuration, so that
 * pipeline/ never sees a protocol struct.
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

#endif /* LD_OPENREQ_H */
