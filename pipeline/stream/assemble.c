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
#include "dataset.h"
#include "imgpipe.h"
#include "loader_error.h"
#include "mix.h"
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
	struct stream_batch *b;	    /* where the batch goes */
	const struct imgpipe *pipe; /* for the batch's epoch */
	/*
	 * Where bad samples are marked (skip policy): s->bad, or for a
	 * mixture's member its mixture's, by place in the batch.
	 */
	uint8_t *bad;
	uint32_t nbad; /* samples marked in bad */
	int err;       /* first error; set once */
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

/* -------------------------------------------------------- ragged outputs */

/*
 * rbig[i]: output k + 1 whose value sample i cannot have: larger than all
 * the room, or with this bit, not whole rows (which would misalign the
 * values after it).
 */
#define RAGGED_ROWS 0x80u

/* The private offsets of ragged output k: batch_size + 1 of them. */
static uint64_t *roff(const struct stream *s, uint32_t k)
{
	return s->roff + (uint64_t)k * (s->lay.batch_size + 1);
}

/*
 * Sample i's value of ragged output k into its place among the batch's
 * values (base): planned by place_ragged(), from the stream's own
 * offsets, never from the slot's (which the client may write).
 */
static int emit_ragged(struct stream *s, const struct shard *sh,
		       uint32_t worker, uint32_t k, uint32_t i,
		       const struct shard_field *f, unsigned char *base,
		       struct diag *d)
{
	const uint64_t *off = roff(s, k);
	uint64_t at = off[i], want = off[i + 1] - at;
	const struct stream_out *o = &s->out[k];
	size_t len;
	int err;

	if (s->rbig[i] == ((k + 1) | RAGGED_ROWS))
		return diag_set(d, LOADER_EFORMAT,
				"field %s: a value of %" PRIu64
				" bytes, not whole rows of %" PRIu64,
				s->ds->schema.f[o->field].name, s->rbig_size[i],
				s->lay.out[k].row_bytes);
	if (s->rbig[i] == k + 1)
		return diag_set(
			d, LOADER_ETOOBIG,
			"field %s: a value of %" PRIu64
			" bytes, more than the %" PRIu64
			" bytes of room for a batch's values (raise ragged_bytes)",
			s->ds->schema.f[o->field].name, s->rbig_size[i],
			s->lay.out[k].capacity);
	if (o->comp == COMP_NONE) {
		if (f->len != want)
			return diag_set(
				d, LOADER_EFORMAT,
				"field %s: %" PRIu32 " bytes, planned %" PRIu64,
				s->ds->schema.f[o->field].name, f->len, want);
		memcpy(base + at, f->data, want);
		return 0;
	}
	err = shard_unpack_field(sh, s->codec[worker], o->field, f, base + at,
				 want, &len, d);
	if (!err && len != want)
		err = diag_set(
			d, LOADER_EFORMAT,
			"field %s: unpacked to %zu bytes, its header said %" PRIu64,
			s->ds->schema.f[o->field].name, len, want);
	return err;
}

/* The batch's values of ragged output k do not fit: sample i crosses. */
static int ragged_full(struct stream *s, struct decode_job *j, uint32_t k,
		       uint32_t i, uint64_t total)
{
	const struct stream_pb *pb = j->pb;

	snprintf(j->msg, sizeof(j->msg),
		 "batch %" PRIu64 " of epoch %" PRIu32
		 ": output %s: the values up to sample %" PRIu64
		 " (shard %s, record %" PRIu64 ") take %" PRIu64
		 " bytes, more than the %" PRIu64
		 " bytes of room for a batch (raise ragged_bytes)",
		 pb->batch, pb->epoch, s->lay.out[k].name, pb->gidx[i],
		 shard_name(s->sh[pb->shard[i]]), pb->ridx[i], total,
		 s->lay.out[k].capacity);
	return LOADER_ETOOBIG;
}

/*
 * Before the workers start: each ragged value's size, from its record
 * (split without the checksum, which the worker checks; a zstd value's
 * frame header gives its size), and from the sizes the offsets of the
 * batch. A record that cannot be split plans 0 bytes: its worker finds
 * it bad. A value larger than all the room is marked (rbig) for its
 * worker to report. Returns 0, or LOADER_ETOOBIG with the reason in j
 * when the batch's values do not fit.
 */
static int place_ragged(struct stream *s, struct decode_job *j)
{
	struct stream_pb *pb = j->pb;
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct diag d;

	memset(s->rbig, 0, pb->count);
	for (uint32_t i = 0; i < pb->count; i++) {
		const struct shard *sh = s->sh[pb->shard[i]];
		bool split = !pb->rerr[i] &&
			     !shard_split_record(sh, pb->ridx[i], pb->rec[i],
						 pb->len[i], f, &d);

		for (uint32_t k = 0; k < s->lay.noutputs; k++) {
			const struct stream_out *o = &s->out[k];
			size_t size = 0;

			if (!o->ragged)
				continue;
			if (split && o->comp == COMP_NONE)
				size = f[o->field].len;
			else if (split &&
				 shard_field_size(sh, s->codec[0], o->field,
						  &f[o->field], &size, &d))
				size = 0;
			if (size > s->lay.out[k].capacity ||
			    size % s->lay.out[k].row_bytes) {
				s->rbig[i] = (uint8_t)(k + 1);
				if (size <= s->lay.out[k].capacity)
					s->rbig[i] |= RAGGED_ROWS;
				s->rbig_size[i] = size;
				size = 0;
			}
			roff(s, k)[i + 1] = size;
		}
	}
	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		uint64_t *off = roff(s, k);

		if (!s->out[k].ragged)
			continue;
		off[0] = 0;
		for (uint32_t i = 0; i < pb->count; i++) {
			off[i + 1] += off[i];
			if (off[i + 1] > s->lay.out[k].capacity)
				return ragged_full(s, j, k, i, off[i + 1]);
		}
	}
	return 0;
}

/* Copy the private offsets of every ragged output into the slot. */
static void publish_offsets(struct stream *s, struct stream_batch *b)
{
	for (uint32_t k = 0; k < s->lay.noutputs; k++)
		if (s->out[k].ragged)
			memcpy(b->off[k], roff(s, k),
			       (b->count + 1) * sizeof(uint64_t));
}

/*
 * Sample i's label, for the batch stages to make its soft label from
 * (apply_mix()): kept aside, not in the slot, whose place for it holds
 * classes floats. A value that is not a class is a bad sample.
 */
static int read_label(struct stream *s, const struct shard *sh, uint32_t worker,
		      uint32_t i, const struct shard_field *f, struct diag *d)
{
	const struct stream_out *o = &s->out[s->soft];
	const unsigned char *src = f->data;
	size_t len;
	int64_t v;
	int err;

	if (o->comp != COMP_NONE) {
		err = shard_unpack_field(sh, s->codec[worker], o->field, f,
					 s->scratch[worker], o->field_bytes,
					 &len, d);
		if (err)
			return err;
		src = s->scratch[worker];
	}
	v = int_at(src, o->src_dtype, 0);
	/* A u64 above INT64_MAX reads negative: outside too. */
	if (v < 0 || v >= (int64_t)s->classes)
		return diag_set(d, LOADER_EFORMAT,
				"field %s: label %" PRId64
				" is not a class in [0, %" PRIu32 ")",
				s->ds->schema.f[o->field].name, v, s->classes);
	s->mixlab[i] = v;
	return 0;
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
	const char *key = NULL;
	char keybuf[160];
	struct diag d;
	/* Its place in the batch: a mixture's member's samples are spread. */
	uint32_t at = pb->pos ? pb->pos[i] : i;
	int err;

	j->b->ids[at] = pb->gidx[i];
	if (pb->rerr[i]) {
		struct shard_rec r;

		shard_rec(sh, pb->ridx[i], &r);
		err = diag_set(
			&d, pb->rerr[i],
			"reading %" PRIu32 " bytes at offset %" PRIu64 ": %s",
			r.length, r.offset, loader_strerror(pb->rerr[i]));
		goto fail;
	}
	/* A record from the node cache was checked when it went in. */
	err = pb->cached[i] ? shard_split_known(sh, pb->ridx[i], pb->rec[i],
						pb->len[i], f, &d) :
			      shard_parse_record(sh, pb->ridx[i], pb->rec[i],
						 pb->len[i], f, &d);
	if (err)
		goto fail;
	if (wt) /* parsing is part of decoding; images time their stages */
		stage(&wt->decode_ns, &t);
	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		const struct stream_out *o = &s->out[k];
		uint64_t bytes = j->b->sample_bytes[k];
		unsigned char *dst = j->b->out[k] + at * bytes;
		const unsigned char *src = f[o->field].data;
		size_t len;

		if (o->ragged) {
			err = emit_ragged(s, sh, worker, k, i, &f[o->field],
					  j->b->out[k], &d);
			if (wt)
				stage(&wt->emit_ns, &t);
			if (err)
				goto fail;
			continue;
		}
		if (o->soft) {
			err = read_label(s, sh, worker, i, &f[o->field], &d);
			if (wt)
				stage(&wt->decode_ns, &t);
			if (err)
				goto fail;
			continue;
		}
		if (o->image) {
			err = imgpipe_run(
				j->pipe, s->ws[worker], src, f[o->field].len,
				pb->sseed ? pb->sseed[i] :
					    order_seed_at(s->order, pb->epoch,
							  pb->gidx[i]),
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
	/* Which file it was, from the record's key (shard.h). */
	if (!pb->rerr[i])
		key = shard_record_key(sh, pb->ridx[i], pb->rec[i], pb->len[i],
				       keybuf, sizeof(keybuf));
	diag_wrap(&d, err,
		  "sample %" PRIu64 " (shard %s, record %" PRIu64 "%s%s)",
		  pb->gidx[i], shard_name(sh), pb->ridx[i],
		  key ? ", source " : "", key ? key : "");
	if (s->c.on_bad != STREAM_BAD_SKIP) {
		decode_fail(j, err, d.msg);
		return;
	}
	j->bad[at] = 1;
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
/*
 * Skip policy, ragged output k: a bad sample i takes the value of the
 * good sample rep[i], so sizes change and values move. Good values keep
 * their order and move by the sum of the changes before them. A value's
 * new place overlaps old places only of values that move its way, on
 * the side it moves to: so those moving right go first, last to first,
 * then those moving left, first to last, and none is overwritten before
 * it has moved. Then each bad sample copies its replacement's value from
 * its new place. Returns 0, or LOADER_ETOOBIG (reason in j) when the
 * values no longer fit.
 */
static int refill_ragged(struct stream *s, struct decode_job *j, uint32_t k)
{
	uint32_t n = j->pb->count;
	uint64_t *off = roff(s, k), *noff = s->roff2;
	unsigned char *base = j->b->out[k];

	noff[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = s->rep[i];

		noff[i + 1] = noff[i] + (off[g + 1] - off[g]);
		if (noff[i + 1] > s->lay.out[k].capacity)
			return ragged_full(s, j, k, i, noff[i + 1]);
	}
	for (uint32_t i = n; i-- > 0;)
		if (s->rep[i] == i && noff[i] > off[i])
			memmove(base + noff[i], base + off[i],
				off[i + 1] - off[i]);
	for (uint32_t i = 0; i < n; i++)
		if (s->rep[i] == i && noff[i] < off[i])
			memmove(base + noff[i], base + off[i],
				off[i + 1] - off[i]);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = s->rep[i];

		if (g != i)
			memcpy(base + noff[i], base + noff[g],
			       noff[i + 1] - noff[i]);
	}
	memcpy(off, noff, (n + 1) * sizeof(uint64_t));
	return 0;
}

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

		if (s->bad[i]) {
			do
				g = g + 1 == n ? 0 : g + 1;
			while (s->bad[g]);
		}
		s->rep[i] = g;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t g = s->rep[i];

		if (g == i)
			continue;
		ids[i] = ids[g];
		if (j->b->members)
			j->b->members[i] = j->b->members[g];
		if (s->mixlab)
			s->mixlab[i] = s->mixlab[g];
		for (uint32_t k = 0; k < s->lay.noutputs; k++) {
			uint64_t bytes = j->b->sample_bytes[k];
			unsigned char *base = j->b->out[k];

			if (!s->out[k].ragged)
				memcpy(base + i * bytes, base + g * bytes,
				       bytes);
		}
	}
	for (uint32_t k = 0; k < s->lay.noutputs && !err; k++)
		if (s->out[k].ragged)
			err = refill_ragged(s, j, k);
out:
	memset(s->bad, 0, n);
	return err;
}

/* ------------------------------------------------------- batch stages */

struct mix_job {
	const struct mix_draw *d;
	struct mix_image im[STREAM_MAX_OUTPUTS];
	uint32_t nim;
	uint32_t pieces[STREAM_MAX_OUTPUTS]; /* of each image output */
};

/* Piece i of all the image outputs' pieces, in output order. */
static void mix_one(void *arg, uint32_t i, uint32_t worker)
{
	struct mix_job *j = arg;
	uint32_t k = 0;

	(void)worker;
	while (i >= j->pieces[k])
		i -= j->pieces[k++];
	mix_piece(j->d, &j->im[k], i);
}

/*
 * The batch stages (mix.h), once the batch's samples are made and the
 * bad ones replaced: draw the batch's mixing, mix every image output in
 * place and write the soft labels. The pixel work goes to the pool like
 * a decode. On one thread here, mixup of a batch of 256 224 x 224 images
 * took 21 ms in f32, 102 ms in f16 and 30 ms in u8 (cutmix of a 158 x
 * 158 box 3 to 9 ms), against 108 ms for one thread to make the batch's
 * samples (rrc 224, normalize, f32: 422 us an image of 500 x 375): a
 * fifth of the batch's work and more, not a few per cent.
 */
static void apply_mix(struct stream *s, struct stream_batch *b,
		      const struct imgpipe *pipe)
{
	/* The batch's epoch's spec: its images' size, its stages' values. */
	const struct ispec *sp = imgpipe_spec(pipe);
	struct mix_job job = { .d = &b->mix };
	uint32_t n = 0;

	mix_draw(&sp->batch, mix_seed(s->c.seed, s->c.rank, b->epoch, b->batch),
		 sp->size, sp->size, &b->mix);
	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		struct mix_image *im = &job.im[job.nim];

		if (!s->out[k].image)
			continue;
		*im = (struct mix_image){ .base = b->out[k],
					  .sample_bytes = b->sample_bytes[k],
					  .count = b->count,
					  .dtype = sp->dtype,
					  .layout = sp->layout,
					  .h = sp->size,
					  .w = sp->size };
		job.pieces[job.nim] = mix_pieces(&b->mix, im);
		n += job.pieces[job.nim++];
	}
	if (n)
		pool_run(s->pool, mix_one, &job, n, s->c.threads);
	mix_labels(&b->mix, s->mixlab, b->count, s->classes,
		   sp->batch.smoothing, (float *)(void *)b->out[s->soft]);
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

/*
 * A light stream's batch (stream_priv.h) is a gather: each sample's
 * fields copied from its record, wherever the record lies (in the node
 * cache, under random order: anywhere in memory). What bounds it is the
 * wait for memory, not the copying: so every line of the record
 * GATHER_AHEAD samples on is asked for before a sample is copied, and
 * the loads of many records overlap. The assembler does it alone: for
 * a batch of copies, waking a pool thread and waiting for it to leave
 * costs more than the half of the batch it would take: on two cores,
 * 256 records of 792 bytes from the node cache under random order came
 * 2.6 times as fast so as through the pool (0.30 against 0.11 x memcpy,
 * medians of nine runs of ldclient, alternating).
 */
#define GATHER_AHEAD 16

static void prefetch_record(const struct stream_pb *pb, uint32_t i)
{
	if (pb->rerr[i])
		return;
	for (uint32_t c = 0; c < pb->len[i]; c += 64)
		__builtin_prefetch(pb->rec[i] + c);
}

/*
 * Sample i's outputs copied straight from its record's fixed places
 * (stream_priv.h, fix_len), when the record came from the node cache
 * (its checksum checked) with the length and head of that layout: what
 * parsing it would give, for a third of the gather's time (24 against 15
 * us a batch of 256 records of 792 bytes, here). Returns false when the
 * record must be parsed (decode_one()).
 */
static bool copy_fixed(struct decode_job *j, uint32_t i)
{
	const struct stream *s = j->s;
	const struct stream_pb *pb = j->pb;
	const unsigned char *rec = pb->rec[i];
	uint32_t nf = s->lay.noutputs, at = pb->pos ? pb->pos[i] : i;

	if (!pb->cached[i] || pb->rerr[i] || pb->len[i] != s->fix_len ||
	    memcmp(rec, s->fix_head, s->fix_hlen))
		return false;
	j->b->ids[at] = pb->gidx[i];
	for (uint32_t k = 0; k < nf; k++) {
		uint64_t bytes = j->b->sample_bytes[k];

		memcpy(j->b->out[k] + at * bytes,
		       rec + s->fix_off[s->out[k].field], bytes);
	}
	return true;
}

static void gather(struct decode_job *j)
{
	const struct stream_pb *pb = j->pb;
	uint32_t n = pb->count, self = j->s->nworkers - 1;
	/* Stage times (with timing) come from decode_one() only. */
	bool fixed = j->s->fix_len && !j->s->wt;

	for (uint32_t i = 0; i < n && i < GATHER_AHEAD; i++)
		prefetch_record(pb, i);
	for (uint32_t i = 0; i < n; i++) {
		if (i + GATHER_AHEAD < n)
			prefetch_record(pb, i + GATHER_AHEAD);
		if (!fixed || !copy_fixed(j, i))
			decode_one(j, i, self);
	}
}

/*
 * Each output's shape in batch b, and the pipeline its images take: the
 * layout's; but a pipeline with schedules takes the spec of b's epoch,
 * made when the first batch of an epoch comes (a stream goes through its
 * epochs in order), and its images that spec's shape.
 */
static int batch_shapes(struct stream *s, struct stream_batch *b,
			const struct imgpipe **pipe, struct diag *d)
{
	const struct ispec *sp;

	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		memcpy(b->shape[k], s->lay.out[k].shape, sizeof(b->shape[k]));
		b->sample_bytes[k] = s->lay.out[k].sample_bytes;
	}
	*pipe = s->pipe;
	if (!s->sched)
		return 0;
	if (!s->ep_pipe || s->ep_epoch != b->epoch) {
		uint32_t was = s->ep_pipe ? imgpipe_spec(s->ep_pipe)->size : 0;
		struct imgpipe *ip;
		struct ispec esp;
		int err = ispec_parse_epoch(&esp, s->spec_text, b->epoch, d);

		if (!err)
			err = imgpipe_derive(&ip, s->pipe, &esp, d);
		if (err)
			return diag_wrap(d, err, "pipeline at epoch %" PRIu32,
					 b->epoch);
		imgpipe_free(s->ep_pipe);
		s->ep_pipe = ip;
		s->ep_epoch = b->epoch;
		if (esp.size != was)
			plog(PLOG_INFO,
			     "%s: epoch %" PRIu32 ": images %" PRIu32
			     " x %" PRIu32,
			     s->label, b->epoch, esp.size, esp.size);
	}
	*pipe = s->ep_pipe;
	sp = imgpipe_spec(s->ep_pipe);
	for (uint32_t k = 0; k < s->lay.noutputs; k++) {
		uint32_t dims[3];
		unsigned nd;

		if (!s->out[k].image)
			continue;
		nd = ispec_out_shape(sp, dims);
		for (unsigned i = 0; i < nd; i++)
			b->shape[k][i] = dims[i];
		b->sample_bytes[k] = ispec_out_bytes(sp);
	}
	return 0;
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

	pthread_setname_np(pthread_self(), "ld-stream");
	/*
	 * Four clock reads a batch (vDSO, no system call) tell where the
	 * stream's time goes: see struct stream_stats.
	 */
	for (;;) {
		struct stream_pb *pb;
		struct stream_batch b = { 0 };
		struct decode_job job;
		struct diag d;
		uint64_t arena;
		bool wake, serve;
		int err;

		pthread_mutex_lock(&s->lock);
		while (!s->stop && s->pb_cons == s->pb_prod && !s->serve) {
			s->assembler_waits = true;
			pthread_cond_wait(&s->cond, &s->lock);
		}
		/* The reader's batches first, then our own (stream_priv.h). */
		serve = s->serve && s->pb_cons == s->pb_prod;
		if (serve)
			s->pb_prod++;
		arena = s->arena_head;
		pthread_mutex_unlock(&s->lock);
		if (stream_stopping(s))
			return NULL;
		pb = &s->pb[s->pb_cons % s->npb];
		if (serve) {
			reader_serve(s, pb);
			pb->arena_end = arena;
			__atomic_fetch_add(&s->n.served, !pb->last,
					   __ATOMIC_RELAXED);
		}
		/* Locating the records ourselves counts as reading them. */
		account(&s->n.read_wait_ns, &t);
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
		b.repeats = pb->repeats;
		job = (struct decode_job){
			.s = s, .pb = pb, .b = &b, .bad = s->bad
		};
		err = batch_shapes(s, &b, &job.pipe, &d);
		if (err)
			return finish(s, err, d.msg);
		if (s->nragged)
			job.err = place_ragged(s, &job);
		if (!job.err && s->light)
			gather(&job);
		else if (!job.err)
			pool_run(s->pool, decode_one, &job, pb->count, threads);
		account(&s->n.decode_ns, &t);
		if (!job.err && job.nbad)
			job.err = fill_bad(s, &job);
		if (job.err)
			return finish(s, job.err, job.msg);
		if (s->mixing) {
			apply_mix(s, &b, job.pipe);
			account(&s->n.decode_ns, &t);
		}
		if (s->nragged)
			publish_offsets(s, &b);
		s->sink.ops->publish(s->sink.ctx, &b);
		if (s->c.timing)
			stream_note_cpu(&s->assembler_cpu_ns);
		__atomic_fetch_add(&s->n.batches, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->n.samples, pb->count, __ATOMIC_RELAXED);
		__atomic_store_n(&s->n.epoch, pb->epoch, __ATOMIC_RELAXED);

		pthread_mutex_lock(&s->lock);
		s->arena_tail = pb->arena_end;
		s->pb_cons++;
		wake = s->reader_waits;
		s->reader_waits = false;
		pthread_mutex_unlock(&s->lock);
		if (wake)
			pthread_cond_broadcast(&s->cond);
	}
}

/* ------------------------------------------------------------ mixtures */

/*
 * A member's next read batch (its reader's, in the mixture's batch
 * order), or NULL once the mixture stops (stream_free() stops its
 * members too).
 */
static struct stream_pb *member_take(struct stream *m)
{
	struct stream_pb *pb = NULL;

	pthread_mutex_lock(&m->lock);
	while (!m->stop && m->pb_cons == m->pb_prod) {
		m->assembler_waits = true;
		pthread_cond_wait(&m->cond, &m->lock);
	}
	if (!m->stop)
		pb = &m->pb[m->pb_cons % m->npb];
	pthread_mutex_unlock(&m->lock);
	return pb;
}

/* Give the member's batch pb (taken last) back to its reader. */
static void member_give(struct stream *m, const struct stream_pb *pb)
{
	bool wake;

	pthread_mutex_lock(&m->lock);
	m->arena_tail = pb->arena_end;
	m->pb_cons++;
	wake = m->reader_waits;
	m->reader_waits = false;
	pthread_mutex_unlock(&m->lock);
	if (wake)
		pthread_cond_broadcast(&m->cond);
}

/*
 * Batch b's shapes and each member's pipeline for it (batch_shapes() of
 * each): the same shapes for every member, or the stream fails naming
 * the two that differ (a schedule may move one member's images and not
 * another's).
 */
static int mixture_shapes(struct stream *s, struct stream_batch *b,
			  const struct imgpipe **pipe, struct diag *d)
{
	for (uint32_t m = 0; m < s->nmembers; m++) {
		struct stream_batch mb = *b;
		int err = batch_shapes(s->member[m], &mb, &pipe[m], d);

		if (err)
			return diag_wrap(d, err, "member %" PRIu32 " (%s)", m,
					 s->member_label[m]);
		if (!m) {
			memcpy(b->shape, mb.shape, sizeof(b->shape));
			memcpy(b->sample_bytes, mb.sample_bytes,
			       sizeof(b->sample_bytes));
			continue;
		}
		for (uint32_t k = 0; k < s->lay.noutputs; k++)
			if (memcmp(mb.shape[k], b->shape[k],
				   sizeof(b->shape[k])))
				return diag_set(
					d, LOADER_EUSAGE,
					"epoch %" PRIu32
					": output %s of member %" PRIu32
					" (%s) is %" PRIu64 " x %" PRIu64
					" a sample, of member 0 (%s) %" PRIu64
					" x %" PRIu64
					": a schedule must move the members alike",
					b->epoch, s->lay.out[k].name, m,
					s->member_label[m], mb.shape[k][0],
					mb.shape[k][1], s->member_label[0],
					b->shape[k][0], b->shape[k][1]);
	}
	return 0;
}

/*
 * A mixture's batch for the pool: each member's decode job, and where its
 * samples begin among the batch's (start[m]; start[nmembers] = count).
 */
struct mixture_job {
	struct decode_job j[MIXTURE_MAX_MEMBERS];
	uint32_t start[MIXTURE_MAX_MEMBERS + 1];
};

/* Sample i of the batch: its member's sample i - start[m]. */
static void mixture_decode(void *arg, uint32_t i, uint32_t worker)
{
	struct mixture_job *mj = arg;
	uint32_t m = 0;

	while (i >= mj->start[m + 1])
		m++;
	decode_one(&mj->j[m], i - mj->start[m], worker);
}

/*
 * A mixture's assembler: each batch's samples come from its members'
 * read batches of the same number (their readers walk the mixture's
 * order, each keeping its own samples), decoded by each member's codecs
 * and pipeline straight into their places in the one slot; then the
 * bad-sample policy over the whole batch, and publish.
 */
void *mixture_main(void *arg)
{
	struct stream *s = arg;
	uint32_t threads = s->c.threads;
	uint64_t t = clock_mono_ns();

	pthread_setname_np(pthread_self(), "ld-mixture");
	for (;;) {
		struct stream_pb *mp[MIXTURE_MAX_MEMBERS] = { 0 };
		const struct imgpipe *pipe[MIXTURE_MAX_MEMBERS];
		struct stream_batch b = { 0 };
		struct stream_pb whole = { 0 };
		struct mixture_job mj;
		struct decode_job job;
		uint32_t count = 0, nbad = 0;
		struct diag d;
		int err;

		for (uint32_t m = 0; m < s->nmembers; m++) {
			mp[m] = member_take(s->member[m]);
			if (!mp[m])
				return NULL;
			if (mp[m]->err) {
				snprintf(d.msg, sizeof(d.msg),
					 "member %" PRIu32 " (%s): %s", m,
					 s->member_label[m], mp[m]->msg);
				return finish(s, mp[m]->err, d.msg);
			}
			if (mp[m]->last != mp[0]->last ||
			    (!mp[m]->last && (mp[m]->epoch != mp[0]->epoch ||
					      mp[m]->batch != mp[0]->batch))) {
				snprintf(d.msg, sizeof(d.msg),
					 "member %" PRIu32
					 " read another batch than member 0",
					 m);
				return finish(s, LOADER_ERANGE, d.msg);
			}
			count += mp[m]->count;
		}
		account(&s->n.read_wait_ns, &t);
		if (mp[0]->last)
			return finish(s, 0, NULL);
		if (s->sink.ops->acquire(s->sink.ctx, &b))
			return NULL;
		account(&s->n.slot_wait_ns, &t);
		b.batch = mp[0]->batch;
		b.epoch = mp[0]->epoch;
		b.count = count;
		b.repeats = mp[0]->repeats;
		err = mixture_shapes(s, &b, pipe, &d);
		if (err)
			return finish(s, err, d.msg);
		mj.start[0] = 0;
		for (uint32_t m = 0; m < s->nmembers; m++) {
			struct stream_pb *pb = mp[m];

			for (uint32_t i = 0; i < pb->count; i++)
				b.members[pb->pos[i]] = m;
			mj.j[m] = (struct decode_job){ .s = s->member[m],
						       .pb = pb,
						       .b = &b,
						       .pipe = pipe[m],
						       .bad = s->bad };
			mj.start[m + 1] = mj.start[m] + pb->count;
			/* Plain copies of a small batch: gathered here. */
			if (s->light)
				gather(&mj.j[m]);
		}
		/* Every member's samples in one round of the pool. */
		if (!s->light)
			pool_run(s->pool, mixture_decode, &mj, count, threads);
		for (uint32_t m = 0; m < s->nmembers; m++) {
			if (mj.j[m].err) {
				snprintf(d.msg, sizeof(d.msg),
					 "member %" PRIu32 " (%s): %s", m,
					 s->member_label[m], mj.j[m].msg);
				return finish(s, mj.j[m].err, d.msg);
			}
			nbad += mj.j[m].nbad;
			__atomic_fetch_add(&s->delivered[m], mp[m]->count,
					   __ATOMIC_RELAXED);
		}
		account(&s->n.decode_ns, &t);
		if (nbad) {
			whole.count = count;
			whole.batch = b.batch;
			whole.epoch = b.epoch;
			job = (struct decode_job){
				.s = s, .pb = &whole, .b = &b, .nbad = nbad
			};
			err = fill_bad(s, &job);
			if (err)
				return finish(s, err, job.msg);
		}
		s->sink.ops->publish(s->sink.ctx, &b);
		if (s->c.timing)
			stream_note_cpu(&s->assembler_cpu_ns);
		__atomic_fetch_add(&s->n.batches, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->n.samples, count, __ATOMIC_RELAXED);
		__atomic_store_n(&s->n.epoch, b.epoch, __ATOMIC_RELAXED);
		for (uint32_t m = 0; m < s->nmembers; m++)
			member_give(s->member[m], mp[m]);
	}
}
