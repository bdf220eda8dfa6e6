/*
 * openreq.c - from struct proto_open to struct stream_config.
 */
#include <inttypes.h>
#include <string.h>

#include "loader_error.h"
#include "openreq.h"
#include "tie.h"

/* The wire's numbers are the pipeline's: casts below rely on it. */
TIE(ORDER_SEQUENTIAL, PROTO_ORDER_SEQUENTIAL);
TIE(ORDER_RANDOM, PROTO_ORDER_RANDOM);
TIE(ORDER_QUASI, PROTO_ORDER_QUASI);
TIE(STREAM_CAST_NONE, PROTO_CAST_NONE);
TIE(STREAM_CAST_F32_UNIT, PROTO_CAST_F32_UNIT);
TIE(STREAM_CAST_F32, PROTO_CAST_F32);
TIE(STREAM_BAD_FAIL, PROTO_BAD_FAIL);
TIE(STREAM_BAD_SKIP, PROTO_BAD_SKIP);
TIE(STREAM_MAX_OUTPUTS, PROTO_MAX_OUTPUTS);
TIE(STREAM_NAME_MAX, PROTO_NAME_MAX);

int openreq_config(const struct proto_open *m, struct stream_config *c,
		   struct diag *d)
{
	memset(c, 0, sizeof(*c));
	if (m->flags & ~(PROTO_OPEN_DIRECT | PROTO_OPEN_FRESH |
			 PROTO_OPEN_RAGGED | PROTO_OPEN_TAR | PROTO_OPEN_LMDB |
			 PROTO_OPEN_REMOTE | PROTO_OPEN_POSITIONS))
		return diag_set(d, LOADER_EUSAGE, "unknown flags %#" PRIx32,
				m->flags);
	if (m->reserved || m->reserved2)
		return diag_set(d, LOADER_EUSAGE,
				"reserved %#" PRIx32 ", reserved2 %#" PRIx32
				" (both must be 0)",
				m->reserved, m->reserved2);
	if (m->order > PROTO_ORDER_QUASI)
		return diag_set(d, LOADER_EUSAGE, "unknown order %" PRIu32,
				m->order);
	if (m->drop_last > 1)
		return diag_set(d, LOADER_EUSAGE, "drop_last is 0 or 1");
	if (m->on_bad > PROTO_BAD_SKIP)
		return diag_set(d, LOADER_EUSAGE,
				"bad sample policy %" PRIu32
				" (0 fail, 1 skip)",
				m->on_bad);
	if (!memchr(m->pipeline, '\0', sizeof(m->pipeline)))
		return diag_set(d, LOADER_EPROTO, "pipeline not terminated");
	if (!memchr(m->name, '\0', sizeof(m->name)))
		return diag_set(d, LOADER_EPROTO, "stream name not terminated");
	for (const char *p = m->name; *p; p++) {
		if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
			return diag_set(
				d, LOADER_EUSAGE,
				"stream name \"%.63s\": no '/' or control characters",
				m->name);
	}
	if ((m->flags & PROTO_OPEN_REMOTE) &&
	    (m->flags & (PROTO_OPEN_TAR | PROTO_OPEN_LMDB)))
		return diag_set(
			d, LOADER_EUSAGE,
			"a dataset in an object store is one made by loaderctl pack, not tar or LMDB files");
	if ((m->flags & PROTO_OPEN_FRESH) && !m->name[0])
		return diag_set(d, LOADER_EUSAGE,
				"a fresh start needs a stream name");
	if ((m->flags & PROTO_OPEN_POSITIONS) && !m->name[0])
		return diag_set(
			d, LOADER_EUSAGE,
			"positions of an earlier world need a stream name");
	if ((m->flags & PROTO_OPEN_POSITIONS) && m->start_batch)
		return diag_set(
			d, LOADER_EUSAGE,
			"start batch %" PRIu64
			" with positions of an earlier world: they say where each rank starts",
			m->start_batch);
	if (m->ragged_bytes && !(m->flags & PROTO_OPEN_RAGGED))
		return diag_set(d, LOADER_EUSAGE,
				"ragged_bytes given without ragged outputs");
	if (m->ragged_bytes > STREAM_MAX_RAGGED)
		return diag_set(d, LOADER_EUSAGE,
				"ragged_bytes %" PRIu64 ": at most %llu",
				m->ragged_bytes,
				(unsigned long long)STREAM_MAX_RAGGED);
	if (m->noutputs > PROTO_MAX_OUTPUTS)
		return diag_set(d, LOADER_EUSAGE,
				"%" PRIu32 " outputs, at most %d", m->noutputs,
				PROTO_MAX_OUTPUTS);
	for (uint32_t i = 0; i < m->noutputs; i++) {
		if (!memchr(m->out[i].field, '\0', PROTO_NAME_MAX))
			return diag_set(
				d, LOADER_EPROTO,
				"output %" PRIu32 ": name not terminated", i);
		if (m->out[i].cast > PROTO_CAST_F32)
			return diag_set(d, LOADER_EUSAGE,
					"output %s: unknown cast %" PRIu32,
					m->out[i].field, m->out[i].cast);
		memcpy(c->out[i].field, m->out[i].field, PROTO_NAME_MAX);
		c->out[i].cast = (enum stream_cast)m->out[i].cast;
	}
	c->noutputs = m->noutputs;
	c->batch_size = m->batch_size;
	c->order = (enum order_kind)m->order;
	c->seed = m->seed;
	c->epochs = m->epochs;
	c->start_epoch = m->start_epoch;
	c->start_batch = m->start_batch;
	c->rank = m->rank;
	c->world = m->world;
	c->drop_last = m->drop_last;
	c->direct = m->flags & PROTO_OPEN_DIRECT;
	c->prefetch_bytes = m->prefetch_bytes;
	c->threads = m->threads;
	c->on_bad = (enum stream_bad)m->on_bad;
	c->pipeline = m->pipeline;
	c->ragged = m->flags & PROTO_OPEN_RAGGED;
	c->tar = m->flags & PROTO_OPEN_TAR;
	c->lmdb = m->flags & PROTO_OPEN_LMDB;
	if (c->tar && c->lmdb)
		return diag_set(
			d, LOADER_EUSAGE,
			"a dataset is tars or an LMDB database, not both");
	c->ragged_bytes = m->ragged_bytes;
	/*
	 * Every value checked here, at the wire, before anything uses it:
	 * a named stream indexes its saved and given positions by rank
	 * before the stream is made.
	 */
	return stream_config_check(c, d);
}
