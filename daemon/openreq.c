/*
 * openreq.c - from struct proto_open to struct stream_config, POSITIONS
 * gathered for it, a REMOTE's store into struct aws_cfg, and the names
 * a client gives its tars.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "awscfg.h"
#include "fault.h"
#include "fdio.h"
#include "loader_error.h"
#include "openreq.h"
#include "producer.h"
#include "tie.h"

/* The wire's numbers are the pipeline's: casts below rely on it. */
TIE(ORDER_SEQUENTIAL, PROTO_ORDER_SEQUENTIAL);
TIE(ORDER_RANDOM, PROTO_ORDER_RANDOM);
TIE(ORDER_QUASI, PROTO_ORDER_QUASI);
TIE(MIXTURE_PROPORTION, PROTO_MIX_PROPORTION);
TIE(MIXTURE_REPEAT, PROTO_MIX_REPEAT);
TIE(MIXTURE_CHOOSE, PROTO_MIX_CHOOSE);
TIE(STREAM_CAST_NONE, PROTO_CAST_NONE);
TIE(STREAM_CAST_F32_UNIT, PROTO_CAST_F32_UNIT);
TIE(STREAM_CAST_F32, PROTO_CAST_F32);
TIE(STREAM_BAD_FAIL, PROTO_BAD_FAIL);
TIE(STREAM_BAD_SKIP, PROTO_BAD_SKIP);
TIE(STREAM_MAX_OUTPUTS, PROTO_MAX_OUTPUTS);
TIE(STREAM_NAME_MAX, PROTO_NAME_MAX);
TIE(STREAM_MAX_BATCH, PROTO_MAX_BATCH);
TIE(STREAM_MAX_WORLD, PROTO_MAX_WORLD);

/* REMOTE's strings are awscfg.h's. */
_Static_assert(sizeof(((struct proto_remote *)0)->access_key) == AWS_KEY_MAX &&
		       sizeof(((struct proto_remote *)0)->secret_key) ==
			       AWS_SECRET_MAX &&
		       sizeof(((struct proto_remote *)0)->session_token) ==
			       AWS_TOKEN_MAX &&
		       sizeof(((struct proto_remote *)0)->region) ==
			       AWS_REGION_MAX &&
		       sizeof(((struct proto_remote *)0)->endpoint) ==
			       AWS_ENDPOINT_MAX &&
		       PROTO_URL_MAX >= AWS_BUCKET_MAX + AWS_PREFIX_MAX + 6,
	       "proto_remote and awscfg.h agree");

int openreq_config(const struct proto_open *m, struct stream_config *c,
		   struct diag *d)
{
	memset(c, 0, sizeof(*c));
	if (m->flags &
	    ~(PROTO_OPEN_DIRECT | PROTO_OPEN_FRESH | PROTO_OPEN_RAGGED |
	      PROTO_OPEN_TAR | PROTO_OPEN_LMDB | PROTO_OPEN_REMOTE |
	      PROTO_OPEN_POSITIONS | PROTO_OPEN_GO_ON | PROTO_OPEN_PAD |
	      PROTO_OPEN_MIXTURE))
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
	c->pad = m->flags & PROTO_OPEN_PAD;
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
	/* The ring's, checked here too: before a dataset is staged. */
	if (!producer_slots_ok(m->ring_slots))
		return diag_set(
			d, LOADER_EUSAGE,
			"ring slots %" PRIu32
			": a power of two in 2..%d, or 0 for the default",
			m->ring_slots, PRODUCER_MAX_SLOTS);
	/*
	 * Every value checked here, at the wire, before anything uses it:
	 * a named stream indexes its saved and given positions by rank
	 * before the stream is made.
	 */
	return stream_config_check(c, d);
}

int openreq_positions(struct openreq_given *g, const struct proto_positions *m,
		      struct diag *d)
{
	if (!m->world || m->world > STREAM_MAX_WORLD)
		return diag_set(d, LOADER_EPROTO,
				"POSITIONS of world %" PRIu32 " (1..%d)",
				m->world, STREAM_MAX_WORLD);
	if (g->pos && (m->plan != g->plan || m->plan_end != g->plan_end))
		return diag_set(
			d, LOADER_EPROTO,
			"POSITIONS with another plan than the ranks before");
	if ((g->pos && m->world != g->world) || m->first != g->got ||
	    !m->count || m->count > PROTO_POSITIONS_MAX ||
	    m->count > m->world - m->first)
		return diag_set(d, LOADER_EPROTO,
				"POSITIONS first %" PRIu32 " count %" PRIu32
				" world %" PRIu32
				" does not follow the %" PRIu32
				" ranks received",
				m->first, m->count, m->world, g->got);
	for (uint32_t i = 0; i < m->count; i++)
		if (m->pos[i].reserved)
			return diag_set(d, LOADER_EPROTO,
					"POSITIONS: rank %" PRIu32
					" has reserved bits set",
					m->first + i);
	if (!g->pos) {
		g->pos = mem_calloc(m->world, sizeof(*g->pos));
		if (!g->pos)
			return diag_set(d, -ENOMEM, "out of memory");
		g->world = m->world;
		g->plan = m->plan;
		g->plan_end = m->plan_end;
	}
	memcpy(g->pos + m->first, m->pos, m->count * sizeof(*m->pos));
	g->got += m->count;
	return 0;
}

int openreq_given_check(const struct openreq_given *g, uint32_t flags,
			struct diag *d)
{
	if (flags & PROTO_OPEN_POSITIONS) {
		if (!g->pos || g->got != g->world)
			return diag_set(
				d, LOADER_EPROTO,
				"an OPEN from positions before all of them were sent");
	} else if (g->pos) {
		return diag_set(
			d, LOADER_EPROTO,
			"POSITIONS were sent, and the OPEN is not from positions");
	}
	return 0;
}

const struct proto_position *openreq_given_rank(const struct openreq_given *g,
						uint32_t world, uint32_t rank)
{
	return g->pos && g->world == world && rank < g->world ? &g->pos[rank] :
								NULL;
}

void openreq_given_clear(struct openreq_given *g)
{
	free(g->pos);
	*g = (struct openreq_given){ 0 };
}

char **openreq_tar_labels(int fd, uint32_t n)
{
	enum { MAX = 1 << 24 };
	const size_t ml = sizeof(PROTO_TARS_MAGIC) - 1;
	struct stat st;
	char *buf, *p, *nl, **out = NULL;
	uint32_t i = 0;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > MAX ||
	    (size_t)st.st_size < ml || !n)
		return NULL;
	buf = mem_alloc((size_t)st.st_size + 1);
	out = mem_calloc(n, sizeof(*out));
	if (!buf || !out)
		goto bad;
	if (fdio_pread_all(fd, buf, (size_t)st.st_size, 0) ||
	    memcmp(buf, PROTO_TARS_MAGIC, ml))
		goto bad;
	buf[st.st_size] = '\0';
	for (p = buf + ml; i < n && (nl = strchr(p, '\n')); p = nl + 1, i++) {
		size_t len = (size_t)(nl - p);

		*nl = '\0';
		if (!len || len > 200)
			goto bad;
		for (size_t k = 0; k < len; k++)
			if ((unsigned char)p[k] < 0x20 || p[k] == 0x7f)
				goto bad;
		out[i] = mem_strdup(p);
		if (!out[i])
			goto bad;
	}
	if (i == n && !*p) {
		free(buf);
		return out;
	}
bad:
	openreq_labels_free(out, n);
	free(buf);
	return NULL;
}

void openreq_labels_free(char **labels, uint32_t n)
{
	for (uint32_t i = 0; labels && i < n; i++)
		free(labels[i]);
	free(labels);
}

void openreq_remote_cfg(const struct proto_remote *r, struct aws_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	memcpy(cfg->access_key, r->access_key, sizeof(cfg->access_key));
	memcpy(cfg->secret_key, r->secret_key, sizeof(cfg->secret_key));
	memcpy(cfg->session_token, r->session_token,
	       sizeof(cfg->session_token));
	memcpy(cfg->region, r->region, sizeof(cfg->region));
	memcpy(cfg->endpoint, r->endpoint, sizeof(cfg->endpoint));
	cfg->addressing = (int)r->addressing;
}
