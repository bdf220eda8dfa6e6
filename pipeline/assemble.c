/*
 * assemble.c - a stream's assembler thread: takes read batches in order,
 * has the worker pool decode every sample straight into the place the
 * sink gives the batch, applies the bad-sample policy and publishes.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "codec.h"
#include "imgpipe.h"
#include "loader_error.h"
#include "order.h"
#include "plog.h"
#include "pool.h"
#include "schema.h"
#include "shard.h"
#include "stream_priv.h"

/* ------------------------------------------------------------ decoding */

struct decode_job {
	struct stream *s;
	struct stream_pb *pb;
	struct stream_batch *b; /* where the batch goes */
	uint32_t nbad;		/* samples marked in s->bad (skip policy) */
	int err;		/* first error; set once */
	char msg[DIAG_MAX];
};

/* dst is an output of a batch, as aligned as its sink made it. */
static void cast_unit(void *out, const uint8_t *src, uint64_t n)
{
	float *dst = out;
	const float k = 1.0f / 255.0f;

	for (uint64_t i = 0; i < n; i++)
		dst[i] = (float)src[i] * k;
}

/* Little-endian element i of an integer array as int64. */
static int64_t int_at(const unsigned char *p, unsigned dt, uint64_t i)
{
	switch (dt) {
	case DT_U8: return p[i];
	case DT_I8: return (int8_t)p[i];
	case DT_U16: {
		uint16_t v;
		memcpy(&v, p + 2 * i, 2);
		return v;
	}
	case DT_I16: {
		int16_t v;
		memcpy(&v, p + 2 * i, 2);
		return v;
	}
	case DT_U32: {
		uint32_t v;
		memcpy(&v, p + 4 * i, 4);
		return v;
	}
	case DT_I32: {
		int32_t v;
		memcpy(&v, p + 4 * i, 4);
		return v;
	}
	case DT_U64: {
		uint64_t v;
		memcpy(&v, p + 8 * i, 8);
		return (int64_t)v;
	}
	default: {
		int64_t v;
		memcpy(&v, p + 8 * i, 8);
		return v;
	}
	}
}

static void cast_f32(void *out, const unsigned char *src, unsigned dt,
		     uint64_t n)
{
	float *dst = out;
	if (dt == DT_F32) {
		memcpy(dst, src, n * 4);
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		dst[i] = (float)int_at(src, dt, i);
}

static void decode_fail(struct decode_job *j, int err, const char *msg)
{
	int zero = 0;

	if (__atomic_compare_exchange_n(&j->err, &zero, err, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		snprintf(j->msg, sizeof(j->msg), "%s", msg);
}

/*
 * Log a skipped sample the first time it is found bad. That need not be
 * its first epoch: a region decode reads only the rows its crop needs,
 * so damage further down shows only in an epoch whose crop reaches it.
 * The ids logged are remembered; a dataset with more bad samples than
 * that logs the first STREAM_LOG_BAD_MAX and then says so once. Bad
 * samples are rare, so a lock and a linear search cost nothing.
 */
static void log_bad(struct stream *s, uint64_t gidx, const char *msg)
{
	bool seen = false, full;

	pthread_mutex_lock(&s->bad_lock);
	for (uint32_t k = 0; k < s->nlogged && !seen; k++)
		seen = s->logged[k] == gidx;
	full = s->nlogged == STREAM_LOG_BAD_MAX;
	if (!seen && !full) {
		s->logged[s->nlogged++] = gidx;
		plog(PLOG_WARN, "%s: skipped bad %s", s->label, msg);
		if (s->nlogged == STREAM_LOG_BAD_MAX)
			plog(PLOG_WARN,
			     "%s: %d bad samples logged; more are counted in the stats, not logged",
			     s->label, STREAM_LOG_BAD_MAX);
	}
	pthread_mutex_unlock(&s->bad_lock);
}

/*
 * Add the time since *t to a worker's own counter, and move *t to now.
 * Only that worker writes it: a relaxed store, no locked add.
 */
static void stage(uint64_t *c, uint64_t *t)
{
	uint64_t now = clock_mono_ns();

	__atomic_store_n(c, *c + (now - *t), __ATOMIC_RELAXED);
	*t = now;
}

static void decode_one(void *arg, uint32_t i, uint32_t worker)
{
	struct decode_job *j = arg;
	struct stream *s = j->s;
	struct stream_pb *pb = j->pb;
	const struct shard *sh = s->sh[pb->shard[i]];
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct stream_wtime *wt = s->wt ? &s->wt[worker] : NULL;
	uint64_t t = wt ? clock_mono_ns() : 0;
	struct diag d;
	int err;

	j->b->ids[i] = pb->gidx[i];
	if (pb->rerr[i]) {
		struct shard_rec r;

		shard_rec(sh, pb->ridx[i], &r);
		err = diag_set(
			&d, pb->rerr[i],
			"reading %" PRIu32 " bytes at offset %" PRIu64 ": %s",
			r.length, r.offset, loader_strerror(pb->rerr[i]));
		goto fail;
	}
	err = shard_parse_record(sh, pb->ridx[i], pb->rec[i], pb->len[i], f,
				 &d);
	if (err)
		goto fail;
	if (wt) /* parsing is part of decoding; images time their stages */
		stage(&wt->decode_ns, &t);
	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		const struct stream_out *o = &s->out[k];
		uint64_t bytes = s->lay.out[k].sample_bytes;
		unsigned char *dst = j->b->out[k] + i * bytes;
		const unsigned char *src = f[o->field].data;
		size_t len;

		if (o->image) {
			err = imgpipe_run(
				s->pipe, s->ws[worker], src, f[o->field].len,
				order_seed_at(s->order, pb->epoch, pb->gidx[i]),
				dst, &d);
			if (wt)
				t = clock_mono_ns();
			if (err)
				goto fail;
			continue;
		}
		if (o->comp != COMP_NONE) {
			/* Straight into the slot when no cast follows. */
			unsigned char *to = o->cast == STREAM_CAST_NONE ?
						    dst :
						    s->scratch[worker];

			err = shard_unpack_field(sh, s->codec[worker], o->field,
						 &f[o->field], to,
						 o->field_bytes, &len, &d);
			if (wt)
				stage(&wt->decode_ns, &t);
			if (err)
				goto fail;
			src = to;
			if (o->cast == STREAM_CAST_NONE)
				continue;
		}
		switch (o->cast) {
		case STREAM_CAST_NONE: memcpy(dst, src, bytes); break;
		case STREAM_CAST_F32_UNIT: cast_unit(dst, src, o->elems); break;
		default: cast_f32(dst, src, o->src_dtype, o->elems); break;
		}
		if (wt)
			stage(&wt->emit_ns, &t);
	}
	return;
fail:
	__atomic_fetch_add(&s->n.bad_samples, 1, __ATOMIC_RELAXED);
	diag_wrap(&d, err, "sample %" PRIu64 " (shard %s, record %" PRIu64 ")",
		  pb->gidx[i], shard_name(sh), pb->ridx[i]);
	if (s->c.on_bad != STREAM_BAD_SKIP) {
		decode_fail(j, err, d.msg);
		return;
	}
	s->bad[i] = 1;
	__atomic_fetch_add(&j->nbad, 1, __ATOMIC_RELAXED);
	log_bad(s, pb->gidx[i], d.msg);
}

/*
 * Skip policy: give every bad sample's place the copy of the next good
 * sample of the same batch (cyclically), id included. The batch stays
 * full, and what it holds is still a function of the order and the
 * data alone: no later batch shifts, so a stream resumed at any batch
 * sees the same batches. Returns 0, or LOADER_EDECODE (with a reason in
 * job) when no sample of the batch is good.
 */
static int fill_bad(struct stream *s, struct decode_job *j)
{
	uint32_t n = j->pb->count;
	uint64_t *ids = j->b->ids;
	int err = 0;

	if (j->nbad >= n) {
		snprintf(j->msg, sizeof(j->msg),
			 "every sample of batch %" PRIu64 " of epoch %" PRIu32
			 " is bad (%" PRIu32 " samples)",
			 j->pb->batch, j->pb->epoch, n);
		err = LOADER_EDECODE;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = i;

		if (!s->bad[i])
			continue;
		do
			g = g + 1 == n ? 0 : g + 1;
		while (s->bad[g]);
		ids[i] = ids[g];
		for (uint32_t k = 0; k < s->lay.noutputs; k++) {
			uint64_t bytes = s->lay.out[k].sample_bytes;
			unsigned char *base = j->b->out[k];

			memcpy(base + i * bytes, base + g * bytes, bytes);
		}
	}
out:
	memset(s->bad, 0, n);
	return err;
}

/*
 * End the stream through the sink: err 0 after the last batch. A failure
 * is logged here, once, with the stream's label.
 */
static void *finish(struct stream *s, int err, const char *reason)
{
	if (err)
		plog(PLOG_ERR, "%s: stream failed: %s", s->label, reason);
	else
		plog(PLOG_INFO, "%s: stream delivered all its batches",
		     s->label);
	s->sink.ops->finish(s->sink.ctx, err, reason);
	return NULL;
}

/* Add the time since *t to counter c, and move *t to now. */
static void account(uint64_t *c, uint64_t *t)
{
	uint64_t now = clock_mono_ns();

	__atomic_fetch_add(c, now - *t, __ATOMIC_RELAXED);
	*t = now;
}

void *assembler_main(void *arg)
{
	struct stream *s = arg;
	uint32_t threads = s->c.threads;
	uint64_t t = clock_mono_ns();

	/*
	 * Four clock reads a batch (vDSO, no system call) tell where the
	 * stream's time goes: see struct stream_stats.
	 */
	for (;;) {
		struct stream_pb *pb;
		struct stream_batch b = { 0 };
		struct decode_job job;

		pthread_mutex_lock(&s->lock);
		while (!s->stop && s->pb_cons == s->pb_prod)
			pthread_cond_wait(&s->cond, &s->lock);
		pthread_mutex_unlock(&s->lock);
		if (stream_stopping(s))
			return NULL;
		account(&s->n.read_wait_ns, &t);
		pb = &s->pb[s->pb_cons % s->npb];
		if (pb->err)
			return finish(s, pb->err, pb->msg);
		if (pb->last)
			return finish(s, 0, NULL);
		/* The sink ended the stream itself, or we are stopping. */
		if (s->sink.ops->acquire(s->sink.ctx, &b))
			return NULL;
		account(&s->n.slot_wait_ns, &t);
		b.batch = pb->batch;
		b.epoch = pb->epoch;
		b.count = pb->count;
		job = (struct decode_job){ .s = s, .pb = pb, .b = &b };
		pool_run(s->pool, decode_one, &job, pb->count, threads);
		account(&s->n.decode_ns, &t);
		if (!job.err && job.nbad)
			job.err = fill_bad(s, &job);
		if (job.err)
			return finish(s, job.err, job.msg);
		s->sink.ops->publish(s->sink.ctx, &b);
		if (s->c.timing)
			stream_note_cpu(&s->assembler_cpu_ns);
		__atomic_fetch_add(&s->n.batches, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->n.samples, pb->count, __ATOMIC_RELAXED);
		__atomic_store_n(&s->n.epoch, pb->epoch, __ATOMIC_RELAXED);

		pthread_mutex_lock(&s->lock);
		s->arena_tail = pb->arena_end;
		s->pb_cons++;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}
