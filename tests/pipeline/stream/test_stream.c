/*
 * test_stream.c - a stream (pipeline/stream/stream.c, reader.c, assemble.c) over
 * a tiny dataset, with a sink of the test's own in place of the daemon's
 * ring producer: every sample once per epoch, in its place, with the
 * right bytes; finish() after the last batch; stream_free() cancelling a
 * sink that waits. The integration tests cover the same through a real
 * daemon; this one needs none.
 *
 * The sink's callbacks run on the stream's assembler thread, where
 * criterion cannot assert: they record what they see under a lock, and
 * the test's thread checks the record.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "dataset.h"
#include "loader_error.h"
#include "nodecache.h"
#include "pool.h"
#include "schema.h"
#include "shard.h"
#include "stream.h"
#include "../../unit_util.h"

#define NELEM(a)    (sizeof(a) / sizeof((a)[0]))
#define NSHARDS	    2
#define NSAMPLES    13 /* 7 + 6: batches of 3 leave a short one */
#define X_BYTES	    6  /* x: tensor u8 [2,3] */
#define MAX_BATCHES 64 /* recorded per run */
#define MAX_EPOCHS  2

static const uint64_t shard_records[NSHARDS] = { 7, 6 };

/* What sample g holds: its label and its x. */
static int64_t label_of(uint64_t g)
{
	return 1000 + (int64_t)g;
}

static unsigned char x_of(uint64_t g, unsigned j)
{
	return (unsigned char)((g * 37 + j * 11 + 5) & 0xff);
}

/* ------------------------------------------------------------ dataset */

/*
 * The dataset's files, opened once per test and unlinked at once (with
 * their directory): a stream gets dup()s of them, as the daemon gets a
 * client's descriptors, and nothing is left behind by a crash.
 */
static int ds_fds[1 + NSHARDS] = { -1, -1, -1 };

static void write_dataset(void)
{
	struct dataset ds = { 0 };
	struct dataset_shard entries[NSHARDS];
	struct schema sch = { 0 };
	struct diag d = { "" };
	char dir[PATH_MAX], path[PATH_MAX + 32];
	uint64_t g = 0;

	ut_tmpl(dir, sizeof(dir), "loaderd-stream");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	sch.nfields = 2;
	cr_assert_eq(field_parse(&sch.f[0], "label: int64", &d), 0, "%s",
		     d.msg);
	cr_assert_eq(field_parse(&sch.f[1], "x: tensor u8 [2,3]", &d), 0, "%s",
		     d.msg);
	for (unsigned s = 0; s < NSHARDS; s++) {
		static char names[NSHARDS][32];
		struct shard_writer *w;
		int fd;

		snprintf(names[s], sizeof(names[s]), "shard-%05u.lds", s);
		snprintf(path, sizeof(path), "%s/%s", dir, names[s]);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
		cr_assert_eq(shard_writer_new(&w, fd, names[s], &sch, NULL, &d),
			     0, "%s", d.msg);
		for (uint64_t r = 0; r < shard_records[s]; r++, g++) {
			int64_t label = label_of(g);
			unsigned char x[X_BYTES];
			struct shard_field f[2] = {
				{ &label, sizeof(label), sizeof(label) },
				{ x, sizeof(x), sizeof(x) },
			};

			for (unsigned j = 0; j < X_BYTES; j++)
				x[j] = x_of(g, j);
			cr_assert_eq(shard_writer_add(w, f, &d), 0, "%s",
				     d.msg);
		}
		entries[s] = (struct dataset_shard){
			.file = names[s],
			.records = shard_writer_count(w),
			.bytes = shard_writer_size(w),
		};
		cr_assert_eq(shard_writer_finish(w, &d), 0, "%s", d.msg);
		shard_writer_free(w);
		ds_fds[1 + s] = fd;
	}
	ds.dir = dir;
	ds.schema = sch;
	ds.records = g;
	ds.nshards = NSHARDS;
	ds.shards = entries;
	ds.origin.shuffle_seed = -1;
	cr_assert_eq(dataset_save(&ds, &d), 0, "%s", d.msg);

	snprintf(path, sizeof(path), "%s/%s", dir, DSFILES_MANIFEST);
	ds_fds[0] = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(ds_fds[0], 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(unlink(path), 0);
	for (unsigned s = 0; s < NSHARDS; s++) {
		snprintf(path, sizeof(path), "%s/%s", dir, entries[s].file);
		cr_assert_eq(unlink(path), 0);
	}
	cr_assert_eq(rmdir(dir), 0);
}

static void close_dataset(void)
{
	for (unsigned i = 0; i < NELEM(ds_fds); i++) {
		if (ds_fds[i] >= 0)
			close(ds_fds[i]);
		ds_fds[i] = -1;
	}
}

/* Fresh descriptors of the dataset, for one stream to take. */
static void dup_fds(int *fds)
{
	for (unsigned i = 0; i < NELEM(ds_fds); i++) {
		fds[i] = fcntl(ds_fds[i], F_DUPFD_CLOEXEC, 0);
		cr_assert_geq(fds[i], 0);
	}
}

static struct pool *pool;

static void setup(void)
{
	write_dataset();
	cr_assert_eq(pool_new(&pool, 1), 0);
}

static void teardown(void)
{
	pool_free(pool);
	pool = NULL;
	close_dataset();
}

TestSuite(stream, .init = setup, .fini = teardown, .timeout = 30);

/* ---------------------------------------------------------- the sink */

struct rec {
	uint32_t epoch;
	uint64_t batch;
	uint32_t count;
	uint64_t ids[8];
	uint32_t members[8]; /* a mixture's */
};

/*
 * A sink over malloc'd places: one batch at a time, which is all the
 * assembler asks for. Everything below the lock is written by the
 * callbacks and read by the test.
 */
struct tsink {
	struct stream_sink sink;
	const struct stream_layout *lay;
	uint64_t *ids;
	uint32_t *members; /* a mixture's, or NULL */
	unsigned char *out[2];
	uint32_t block_after; /* acquire waits for cancel after this many */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t nrec;
	struct rec recs[MAX_BATCHES];
	char bad[256]; /* the first wrong sample, if any */
	bool waiting;  /* in an acquire that blocks */
	bool cancelled;
	int acquire_ret; /* of the last acquire */
	bool finished;
	int err;
	char reason[DIAG_MAX];
	uint32_t nrec_at_finish;
	uint32_t calls_after_finish;
};

static void tsink_note_bad(struct tsink *t, const char *what, uint32_t k,
			   uint64_t id)
{
	if (!t->bad[0])
		snprintf(t->bad, sizeof(t->bad),
			 "batch %u sample %u (id %llu): %s", t->nrec, k,
			 (unsigned long long)id, what);
}

static int tsink_acquire(void *ctx, struct stream_batch *b)
{
	struct tsink *t = ctx;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	if (t->finished)
		t->calls_after_finish++;
	if (t->nrec >= t->block_after) {
		t->waiting = true;
		pthread_cond_broadcast(&t->cond);
		while (!t->cancelled)
			pthread_cond_wait(&t->cond, &t->lock);
		t->waiting = false;
	}
	if (t->cancelled)
		ret = -ECANCELED;
	t->acquire_ret = ret;
	pthread_mutex_unlock(&t->lock);
	if (ret)
		return ret;
	/* Poison, so that a sample the stream leaves out shows. */
	memset(t->ids, 0xff, t->lay->batch_size * sizeof(*t->ids));
	for (unsigned k = 0; k < 2; k++) {
		memset(t->out[k], 0xee,
		       t->lay->batch_size * t->lay->out[k].sample_bytes);
		b->out[k] = t->out[k];
	}
	b->ids = t->ids;
	b->members = t->members;
	if (t->members)
		memset(t->members, 0xff,
		       t->lay->batch_size * sizeof(*t->members));
	return 0;
}

static void tsink_publish(void *ctx, const struct stream_batch *b)
{
	struct tsink *t = ctx;
	struct rec *r;

	pthread_mutex_lock(&t->lock);
	if (t->finished)
		t->calls_after_finish++;
	if (t->nrec == MAX_BATCHES) {
		tsink_note_bad(t, "too many batches", 0, 0);
		goto out;
	}
	r = &t->recs[t->nrec];
	r->epoch = b->epoch;
	r->batch = b->batch;
	r->count = b->count;
	for (uint32_t k = 0; k < b->count && k < NELEM(r->ids); k++) {
		uint64_t id = b->ids[k];
		int64_t label;
		const float *x = (const float *)(b->out[1] + k * 6 * 4);
		/* x as stored (no cast: a plain copy) */
		const unsigned char *x8 = b->out[1] + k * X_BYTES;

		r->ids[k] = id;
		if (t->members) {
			r->members[k] = b->members[k];
			if (b->members[k] >= t->lay->nmembers)
				tsink_note_bad(t, "member out of range", k, id);
		}
		if (id >= NSAMPLES) {
			tsink_note_bad(t, "id out of range", k, id);
			continue;
		}
		memcpy(&label, b->out[0] + k * 8, 8);
		if (label != label_of(id))
			tsink_note_bad(t, "label", k, id);
		for (unsigned j = 0; j < X_BYTES; j++)
			if (t->lay->out[1].dtype == DT_U8 ?
				    x8[j] != x_of(id, j) :
				    fabsf(x[j] - (float)x_of(id, j) / 255.0f) >
					    1e-6f)
				tsink_note_bad(t, "x", k, id);
	}
	t->nrec++;
out:
	pthread_mutex_unlock(&t->lock);
}

static void tsink_finish(void *ctx, int err, const char *reason)
{
	struct tsink *t = ctx;

	pthread_mutex_lock(&t->lock);
	if (t->finished)
		t->calls_after_finish++;
	t->finished = true;
	t->err = err;
	snprintf(t->reason, sizeof(t->reason), "%s", reason ? reason : "");
	t->nrec_at_finish = t->nrec;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void tsink_cancel(void *ctx)
{
	struct tsink *t = ctx;

	pthread_mutex_lock(&t->lock);
	t->cancelled = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static const struct stream_sink_ops tsink_ops = {
	.acquire = tsink_acquire,
	.publish = tsink_publish,
	.finish = tsink_finish,
	.cancel = tsink_cancel,
};

static void tsink_init(struct tsink *t, const struct stream_layout *lay)
{
	memset(t, 0, sizeof(*t));
	t->sink = (struct stream_sink){ &tsink_ops, t };
	t->lay = lay;
	t->block_after = UINT32_MAX;
	t->ids = malloc(lay->batch_size * sizeof(*t->ids));
	cr_assert_not_null(t->ids);
	if (lay->nmembers) {
		t->members = malloc(lay->batch_size * sizeof(*t->members));
		cr_assert_not_null(t->members);
	}
	for (unsigned k = 0; k < 2; k++) {
		t->out[k] = malloc(lay->batch_size * lay->out[k].sample_bytes);
		cr_assert_not_null(t->out[k]);
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
}

static void tsink_fini(struct tsink *t)
{
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t->ids);
	free(t->members);
	free(t->out[0]);
	free(t->out[1]);
}

/* Wait until *flag holds (under t->lock); the suite's timeout bounds it. */
static void tsink_wait(struct tsink *t, const bool *flag)
{
	pthread_mutex_lock(&t->lock);
	while (!*flag)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
}

/* ---------------------------------------------------------- streams */

/* Batches of 3: the label as stored, x cast to f32 in [0,1]. */
static void base_config(struct stream_config *c)
{
	memset(c, 0, sizeof(*c));
	c->batch_size = 3;
	c->order = ORDER_RANDOM;
	c->seed = 42;
	c->epochs = 2;
	c->prefetch_bytes = 1 << 20;
	c->noutputs = 2;
	strcpy(c->out[0].field, "label");
	c->out[0].cast = STREAM_CAST_NONE;
	strcpy(c->out[1].field, "x");
	c->out[1].cast = STREAM_CAST_F32_UNIT;
	c->label = "unit";
}

static struct stream *open_stream(const struct stream_config *c)
{
	int fds[1 + NSHARDS];
	struct stream *s = NULL;
	struct diag d = { "" };

	dup_fds(fds);
	cr_assert_eq(stream_new(&s, c, fds, NELEM(fds), pool, &d), 0, "%s",
		     d.msg);
	return s;
}

/* Run c to its end into t; t is set up here, freed by the caller. */
static void run_stream(const struct stream_config *c, struct tsink *t)
{
	struct stream *s = open_stream(c);
	struct diag d = { "" };

	tsink_init(t, stream_layout(s));
	cr_assert_eq(stream_start(s, &t->sink, &d), 0, "%s", d.msg);
	tsink_wait(t, &t->finished);
	stream_free(s);
}

Test(stream, layout)
{
	struct stream_config c;
	struct stream *s;
	const struct stream_layout *lay;

	base_config(&c);
	s = open_stream(&c);
	lay = stream_layout(s);
	cr_expect_eq(lay->batch_size, 3);
	cr_expect_eq(lay->batches_per_epoch, 5);
	cr_expect_eq(lay->samples, NSAMPLES);
	cr_assert_eq(lay->noutputs, 2);
	cr_expect_str_eq(lay->out[0].name, "label");
	cr_expect_eq(lay->out[0].dtype, DT_I64);
	cr_expect_eq(lay->out[0].ndim, 0);
	cr_expect_eq(lay->out[0].sample_bytes, 8);
	cr_expect_str_eq(lay->out[1].name, "x");
	cr_expect_eq(lay->out[1].dtype, DT_F32);
	cr_expect_eq(lay->out[1].ndim, 2);
	cr_expect_eq(lay->out[1].shape[0], 2);
	cr_expect_eq(lay->out[1].shape[1], 3);
	cr_expect_eq(lay->out[1].sample_bytes, X_BYTES * 4);
	stream_free(s);
}

/*
 * Two epochs, random order: batches in order, every sample exactly once
 * per epoch with its own bytes, then finish(0) and nothing after it.
 */
Test(stream, random_two_epochs)
{
	struct stream_config c;
	struct tsink t;
	bool same_order = true, in_file_order = true;

	base_config(&c);
	c.start_epoch = 4;
	run_stream(&c, &t);
	cr_expect_eq(t.err, 0, "%s", t.reason);
	cr_expect_str_eq(t.bad, "");
	cr_assert_eq(t.nrec, 10);
	cr_expect_eq(t.nrec_at_finish, 10, "finish before the last batch");
	cr_expect_eq(t.calls_after_finish, 0);
	for (uint32_t e = 0; e < 2; e++) {
		uint32_t seen[NSAMPLES] = { 0 };

		for (uint32_t b = 0; b < 5; b++) {
			const struct rec *r = &t.recs[e * 5 + b];

			cr_expect_eq(r->epoch, 4 + e);
			cr_expect_eq(r->batch, b);
			cr_expect_eq(r->count, b < 4 ? 3 : 1, "batch %u", b);
			for (uint32_t k = 0; k < r->count; k++) {
				const struct rec *o = &t.recs[(1 - e) * 5 + b];
				uint64_t id = r->ids[k];

				if (id < NSAMPLES)
					seen[id]++;
				same_order &= id == o->ids[k];
				in_file_order &= id == b * 3 + k;
			}
		}
		for (uint32_t g = 0; g < NSAMPLES; g++)
			cr_expect_eq(seen[g], 1,
				     "epoch %u: sample %u seen %u times", e, g,
				     seen[g]);
	}
	/* Random: not the file's order, and not the same in both epochs. */
	cr_expect_not(in_file_order);
	cr_expect_not(same_order);
	tsink_fini(&t);
}

/* The same config gives the same batches; another seed, others. */
Test(stream, order_is_a_function_of_the_config)
{
	struct stream_config c;
	struct tsink t[3];
	bool same = true, other = true;

	base_config(&c);
	c.epochs = 1;
	run_stream(&c, &t[0]);
	c.io_depth = 1; /* one read at a time: the same batches */
	run_stream(&c, &t[1]);
	c.io_depth = 0;
	c.seed = 43;
	run_stream(&c, &t[2]);
	for (unsigned i = 0; i < 3; i++) {
		cr_expect_eq(t[i].err, 0, "%s", t[i].reason);
		cr_expect_str_eq(t[i].bad, "");
		cr_assert_eq(t[i].nrec, 5);
	}
	for (uint32_t b = 0; b < 5; b++)
		for (uint32_t k = 0; k < t[0].recs[b].count; k++) {
			same &= t[0].recs[b].ids[k] == t[1].recs[b].ids[k];
			other &= t[0].recs[b].ids[k] == t[2].recs[b].ids[k];
		}
	cr_expect(same, "one config (reads 64 or 1 at a time), two orders");
	cr_expect_not(other, "seeds 42 and 43 gave the same order");
	for (unsigned i = 0; i < 3; i++)
		tsink_fini(&t[i]);
}

/*
 * The quasi order read one read at a time (io_depth 1), when records far
 * apart are read as one extent, gives the batches it gives otherwise.
 */
Test(stream, quasi_one_read_at_a_time)
{
	struct stream_config c;
	struct tsink t[2];
	bool same = true;

	base_config(&c);
	c.epochs = 2;
	c.order = ORDER_QUASI;
	run_stream(&c, &t[0]);
	c.io_depth = 1;
	run_stream(&c, &t[1]);
	for (unsigned i = 0; i < 2; i++) {
		cr_expect_eq(t[i].err, 0, "%s", t[i].reason);
		cr_expect_str_eq(t[i].bad, "");
	}
	cr_assert_eq(t[0].nrec, t[1].nrec);
	for (uint32_t b = 0; b < t[0].nrec; b++)
		for (uint32_t k = 0; k < t[0].recs[b].count; k++)
			same &= t[0].recs[b].ids[k] == t[1].recs[b].ids[k];
	cr_expect(same, "the same batches, read 64 or 1 at a time");
	for (unsigned i = 0; i < 2; i++)
		tsink_fini(&t[i]);
}

/*
 * The quasi order reads each window once, whole: here one window (13
 * samples, under the default W) of two runs (its two shards), so two
 * reads an epoch and each record's bytes read once; in the sequential
 * order, batch by batch, more reads for the same bytes.
 */
Test(stream, quasi_reads_a_window_once)
{
	struct stream_config c;
	struct stream *s;
	struct tsink t;
	struct stream_stats st;
	struct diag d = { "" };
	/* A record: 2 field lengths, the label, x. */
	uint64_t recs = NSAMPLES * (2 * 4 + 8 + X_BYTES);

	base_config(&c);
	c.epochs = 2;
	c.order = ORDER_QUASI;
	s = open_stream(&c);
	tsink_init(&t, stream_layout(s));
	cr_assert_eq(stream_start(s, &t.sink, &d), 0, "%s", d.msg);
	tsink_wait(&t, &t.finished);
	stream_stats(s, &st);
	cr_expect_eq(t.err, 0, "%s", t.reason);
	cr_expect_str_eq(t.bad, "");
	cr_expect_eq(st.reads, 4, "one read per run and epoch, %" PRIu64,
		     st.reads);
	cr_expect_eq(st.bytes_read, 2 * recs,
		     "every record's bytes once an epoch");
	stream_free(s);
	tsink_fini(&t);
}

/*
 * Every output a plain copy (x as stored): the assembler gathers the
 * batch itself, without the pool. Every sample once per epoch, with its
 * own bytes, in every order.
 */
/* The 5 batches of epoch e recorded in t (from its first) hold every sample once. */
static void expect_epoch_once(const struct tsink *t, uint32_t e, unsigned order)
{
	uint32_t seen[NSAMPLES] = { 0 };

	cr_assert_geq(t->nrec, e * 5 + 5);
	for (uint32_t b = 0; b < 5; b++)
		for (uint32_t k = 0; k < t->recs[e * 5 + b].count; k++)
			if (t->recs[e * 5 + b].ids[k] < NSAMPLES)
				seen[t->recs[e * 5 + b].ids[k]]++;
	for (uint32_t g = 0; g < NSAMPLES; g++)
		cr_expect_eq(seen[g], 1,
			     "order %u epoch %u: sample %u seen %u times",
			     order, e, g, seen[g]);
}

Test(stream, plain_copies_gathered)
{
	static const enum order_kind orders[] = { ORDER_RANDOM, ORDER_QUASI,
						  ORDER_SEQUENTIAL };

	for (unsigned o = 0; o < NELEM(orders); o++) {
		struct stream_config c;
		struct stream *s;
		struct tsink t;

		base_config(&c);
		c.order = orders[o];
		c.out[1].cast = STREAM_CAST_NONE;
		s = open_stream(&c);
		cr_expect_eq(stream_layout(s)->out[1].dtype, DT_U8);
		stream_free(s);
		run_stream(&c, &t);
		cr_expect_eq(t.err, 0, "%s", t.reason);
		cr_expect_str_eq(t.bad, "", "order %u", orders[o]);
		cr_assert_eq(t.nrec, 10);
		for (uint32_t e = 0; e < 2; e++)
			expect_epoch_once(&t, e, orders[o]);
		tsink_fini(&t);
	}
}

/*
 * A damaged record in a gathered batch: under the skip policy its place
 * holds the next good sample of the batch (id and bytes), and it is
 * counted; under the fail policy the stream fails naming it.
 */
Test(stream, plain_copies_damaged_record)
{
	struct stream_config c;
	struct stream *s;
	struct shard *sh;
	struct shard_rec r;
	struct stream_stats st;
	struct tsink t;
	struct diag d = { "" };
	unsigned char junk = 0;
	uint32_t seen[NSAMPLES] = { 0 };

	/* Record 2 of shard 0 (sample 2): one byte of x changed. */
	cr_assert_eq(shard_open(&sh, ds_fds[1], "shard-00000.lds", &d), 0, "%s",
		     d.msg);
	cr_assert_eq(shard_rec(sh, 2, &r), 0);
	shard_close(sh);
	cr_assert_eq(pread(ds_fds[1], &junk, 1, (off_t)r.offset + r.length - 1),
		     1);
	junk ^= 0x5a;
	cr_assert_eq(
		pwrite(ds_fds[1], &junk, 1, (off_t)r.offset + r.length - 1), 1);

	base_config(&c);
	c.order = ORDER_SEQUENTIAL;
	c.epochs = 1;
	c.out[1].cast = STREAM_CAST_NONE;
	c.on_bad = STREAM_BAD_SKIP;
	s = open_stream(&c);
	tsink_init(&t, stream_layout(s));
	cr_assert_eq(stream_start(s, &t.sink, &d), 0, "%s", d.msg);
	tsink_wait(&t, &t.finished);
	stream_stats(s, &st);
	stream_free(s);
	cr_expect_eq(t.err, 0, "%s", t.reason);
	cr_expect_str_eq(t.bad, "", "every place holds its id's bytes");
	cr_expect_eq(st.bad_samples, 1);
	cr_assert_eq(t.nrec, 5);
	/* Batch 0 is samples 0, 1, 2: sample 2's place takes sample 0. */
	cr_expect_eq(t.recs[0].ids[2], 0);
	for (uint32_t b = 0; b < 5; b++)
		for (uint32_t k = 0; k < t.recs[b].count; k++)
			if (t.recs[b].ids[k] < NSAMPLES)
				seen[t.recs[b].ids[k]]++;
	cr_expect_eq(seen[2], 0);
	cr_expect_eq(seen[0], 2);
	tsink_fini(&t);

	c.on_bad = STREAM_BAD_FAIL;
	run_stream(&c, &t);
	cr_expect_eq(t.err, LOADER_ECHECKSUM, "%d %s", t.err, t.reason);
	cr_expect(strstr(t.reason, "record 2") != NULL, "%s", t.reason);
	cr_expect_eq(t.nrec, 0);
	tsink_fini(&t);
}

/* Run c to its end into t, and take its counters. */
static void run_stream_stats(const struct stream_config *c, struct tsink *t,
			     struct stream_stats *st)
{
	struct stream *s = open_stream(c);
	struct diag d = { "" };

	tsink_init(t, stream_layout(s));
	cr_assert_eq(stream_start(s, &t->sink, &d), 0, "%s", d.msg);
	tsink_wait(t, &t->finished);
	stream_stats(s, st);
	stream_free(s);
}

/* The batches of a and b are the same: positions, ids and count. */
static void expect_same_batches(const struct tsink *a, const struct tsink *b)
{
	cr_assert_eq(a->nrec, b->nrec);
	for (uint32_t i = 0; i < a->nrec; i++) {
		const struct rec *x = &a->recs[i], *y = &b->recs[i];

		cr_expect_eq(x->epoch, y->epoch, "batch %u", i);
		cr_expect_eq(x->batch, y->batch, "batch %u", i);
		cr_assert_eq(x->count, y->count, "batch %u", i);
		for (uint32_t k = 0; k < x->count; k++)
			cr_expect_eq(x->ids[k], y->ids[k],
				     "batch %u sample %u: %" PRIu64
				     " against %" PRIu64,
				     i, k, x->ids[k], y->ids[k]);
	}
}

/*
 * Once every record is in the node cache, the assembler makes a light
 * stream's batches itself (reader.c, hand_over()): the same batches, ids
 * and bytes as read from the files, epoch after epoch, and from a
 * position in the middle of an epoch (a resume).
 */
Test(stream, cached_batches_made_by_the_assembler)
{
	static const struct {
		uint32_t start_epoch, epochs;
		uint64_t start_batch;
	} runs[] = { { 0, 3, 0 }, { 1, 2, 2 } };
	struct nodecache *nc;
	struct nodecache_stats ns;
	struct stream_config c;
	struct stream_stats st;
	struct tsink t, ref;

	cr_assert_eq(nodecache_new(&nc, 1 << 20), 0);
	base_config(&c);
	c.out[1].cast = STREAM_CAST_NONE;
	c.cache = nc;
	c.epochs = 1;
	/* One epoch reads every record, and keeps it. */
	run_stream_stats(&c, &t, &st);
	cr_expect_eq(t.err, 0, "%s", t.reason);
	cr_expect_eq(st.served, 0, "made before the cache held every record");
	tsink_fini(&t);
	nodecache_stats(nc, &ns);
	cr_assert_eq(ns.records, NSAMPLES);

	for (unsigned r = 0; r < NELEM(runs); r++) {
		uint64_t batches = 5 * runs[r].epochs - runs[r].start_batch;

		c.start_epoch = runs[r].start_epoch;
		c.start_batch = runs[r].start_batch;
		c.epochs = runs[r].epochs;
		c.cache = NULL;
		run_stream(&c, &ref);
		c.cache = nc;
		run_stream_stats(&c, &t, &st);
		cr_expect_eq(t.err, 0, "%s", t.reason);
		cr_expect_str_eq(t.bad, "", "run %u", r);
		cr_expect_eq(t.nrec, batches, "run %u", r);
		cr_expect_eq(st.served, batches, "run %u", r);
		cr_expect_eq(st.cache_misses, 0, "run %u", r);
		cr_expect_eq(st.bytes_read, 0, "run %u", r);
		expect_same_batches(&t, &ref);
		/* Each epoch whole: every sample once. */
		for (uint32_t e = 0; r == 0 && e < runs[r].epochs; e++)
			expect_epoch_once(&t, e, ORDER_RANDOM);
		tsink_fini(&t);
		tsink_fini(&ref);
	}
	nodecache_free(nc);
}

/* Two ranks of a world of 2: disjoint halves that cover the epoch. */
Test(stream, ranks_share_an_epoch)
{
	struct stream_config c;
	struct tsink t[2];
	uint32_t seen[NSAMPLES] = { 0 };

	base_config(&c);
	c.epochs = 1;
	c.world = 2;
	for (uint32_t r = 0; r < 2; r++) {
		c.rank = r;
		run_stream(&c, &t[r]);
		cr_expect_eq(t[r].err, 0, "%s", t[r].reason);
		cr_expect_str_eq(t[r].bad, "");
		/* ceil(ceil(13 / 2) / 3) = 3 batches each. */
		cr_assert_eq(t[r].nrec, 3, "rank %u", r);
		for (uint32_t b = 0; b < t[r].nrec; b++)
			for (uint32_t k = 0; k < t[r].recs[b].count; k++)
				if (t[r].recs[b].ids[k] < NSAMPLES)
					seen[t[r].recs[b].ids[k]]++;
	}
	for (uint32_t g = 0; g < NSAMPLES; g++)
		cr_expect_eq(seen[g], 1, "sample %u seen %u times", g, seen[g]);
	tsink_fini(&t[0]);
	tsink_fini(&t[1]);
}

/*
 * stream_free() while the sink's acquire waits for room: it cancels the
 * sink, the acquire returns -ECANCELED, and the stream stops without
 * calling finish().
 */
Test(stream, free_cancels_a_waiting_acquire)
{
	struct stream_config c;
	struct stream *s;
	struct tsink t;
	struct diag d = { "" };

	base_config(&c);
	c.epochs = 0; /* endless: only stream_free() ends it */
	s = open_stream(&c);
	tsink_init(&t, stream_layout(s));
	t.block_after = 2;
	cr_assert_eq(stream_start(s, &t.sink, &d), 0, "%s", d.msg);
	tsink_wait(&t, &t.waiting);
	stream_free(s);
	cr_expect(t.cancelled);
	cr_expect_not(t.waiting);
	cr_expect_eq(t.acquire_ret, -ECANCELED);
	cr_expect_not(t.finished, "finish after a cancel: %d %s", t.err,
		      t.reason);
	cr_expect_eq(t.nrec, 2);
	cr_expect_str_eq(t.bad, "");
	tsink_fini(&t);
}

/* A stream that never started frees without touching its sink. */
Test(stream, free_unstarted)
{
	struct stream_config c;

	base_config(&c);
	stream_free(open_stream(&c));
	stream_free(NULL);
}

/* What stream_new() refuses; it takes the descriptors whatever happens. */
static void shards_missing(struct stream_config *c, uint32_t *nfds)
{
	*nfds = NSHARDS;
}

static void manifest_only(struct stream_config *c, uint32_t *nfds)
{
	*nfds = 1;
}

static void no_such_field(struct stream_config *c, uint32_t *nfds)
{
	strcpy(c->out[1].field, "y");
}

static void rank_outside_world(struct stream_config *c, uint32_t *nfds)
{
	c->rank = 2;
	c->world = 2;
}

static void bad_order(struct stream_config *c, uint32_t *nfds)
{
	c->order = (enum order_kind)3;
}

Test(stream, new_refuses)
{
	static const struct {
		const char *why;
		void (*mut)(struct stream_config *c, uint32_t *nfds);
		const char *needle;
	} t[] = {
		{ "a shard missing", shards_missing,
		  "manifest lists 2 shards" },
		{ "no shard", manifest_only, "at least one shard" },
		{ "no such field", no_such_field,
		  "output y: no such field in the dataset (its fields: label, x)" },
		{ "rank outside the world", rank_outside_world,
		  "rank 2 of world 2" },
		{ "order 3", bad_order, "unknown order 3" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct stream_config c;
		struct stream *s = NULL;
		struct diag d = { "" };
		int fds[1 + NSHARDS];
		uint32_t nfds = NELEM(fds);
		int err;

		base_config(&c);
		t[i].mut(&c, &nfds);
		dup_fds(fds);
		err = stream_new(&s, &c, fds, nfds, pool, &d);
		cr_expect_eq(err, LOADER_EUSAGE, "%s: %d (%s)", t[i].why, err,
			     d.msg);
		cr_expect_null(s, "%s", t[i].why);
		cr_expect_not_null(strstr(d.msg, t[i].needle),
				   "%s: \"%s\" lacks \"%s\"", t[i].why, d.msg,
				   t[i].needle);
		for (uint32_t k = 0; k < NELEM(fds); k++) {
			int r = fcntl(fds[k], F_GETFD);

			/* Taken: closed. Not handed over: still ours. */
			cr_expect_eq(r == -1, k < nfds, "%s: fd %u", t[i].why,
				     k);
			if (k >= nfds)
				close(fds[k]);
		}
	}
}

/* ------------------------------------------------------------ mixtures */

/*
 * A mixture of the dataset with itself: member 0 whole (repeat 1),
 * member 1 five samples an epoch (choose 5). Each rank's batches hold
 * the epoch's 18 places once: member 0's 13 samples each once, member
 * 1's five distinct, every sample's bytes its own (the sink checks).
 */
/* The two members into c (member 1 choose samples an epoch), fds dup'd. */
static void two_members(struct stream_config *c, struct stream_member *m,
			    int fds[2][1 + NSHARDS], double choose)
{
	for (unsigned i = 0; i < 2; i++) {
		dup_fds(fds[i]);
		m[i] = (struct stream_member){ .fds = fds[i],
					       .nfds = 1 + NSHARDS,
					       .label = i ? "b" : "a" };
	}
	m[0].how = MIXTURE_REPEAT;
	m[0].value = 1;
	m[1].how = MIXTURE_CHOOSE;
	m[1].value = choose;
	c->nmembers = 2;
	c->members = m;
}

static struct stream *open_mixture_of(struct stream_config *c,
				      struct stream_member *m,
				      int fds[2][1 + NSHARDS], double choose)
{
	struct stream *s = NULL;
	struct diag d = { "" };

	two_members(c, m, fds, choose);
	cr_assert_eq(stream_new(&s, c, NULL, 0, pool, &d), 0, "%s", d.msg);
	return s;
}

static struct stream *open_mixture(struct stream_config *c,
				   struct stream_member *m,
				   int fds[2][1 + NSHARDS])
{
	return open_mixture_of(c, m, fds, 5);
}

/*
 * Run mixture s to its end into t (set up here, freed by the caller),
 * with no error and every sample right.
 */
static void run_to_end(struct stream *s, struct tsink *t)
{
	struct diag d = { "" };

	tsink_init(t, stream_layout(s));
	cr_assert_eq(stream_start(s, &t->sink, &d), 0, "%s", d.msg);
	tsink_wait(t, &t->finished);
	cr_assert_eq(t->err, 0, "%s", t->reason);
	cr_assert_str_empty(t->bad, "%s", t->bad);
}

/* Count epoch e's samples in t into seen[member * NSAMPLES + index]. */
static void expect_mixture_epoch(const struct tsink *t, uint32_t e,
				 unsigned *seen)
{
	for (uint32_t i = 0; i < t->nrec; i++) {
		const struct rec *r = &t->recs[i];

		if (r->epoch != e)
			continue;
		for (uint32_t k = 0; k < r->count; k++) {
			cr_assert_lt(r->members[k], 2);
			seen[r->members[k] * NSAMPLES + r->ids[k]]++;
		}
	}
}

/*
 * Epoch e's counts as open_mixture()'s plan has them: each of member 0's
 * samples once, five distinct of member 1's.
 */
static void expect_mixture_plan(const unsigned *seen, uint32_t e)
{
	unsigned chosen = 0;

	for (unsigned g = 0; g < NSAMPLES; g++) {
		cr_assert_eq(seen[g], 1,
			     "epoch %u: member 0 sample %u %u times", e, g,
			     seen[g]);
		cr_assert_leq(seen[NSAMPLES + g], 1,
			      "epoch %u: member 1 sample %u %u times", e, g,
			      seen[NSAMPLES + g]);
		chosen += seen[NSAMPLES + g];
	}
	cr_assert_eq(chosen, 5, "epoch %u: member 1 gave %u", e, chosen);
}

Test(stream, mixture_counts)
{
	int fds[2][1 + NSHARDS];
	struct stream_member m[2];
	struct stream_config c;
	struct tsink t;
	struct stream *s;

	base_config(&c);
	s = open_mixture(&c, m, fds);
	cr_assert_eq(stream_layout(s)->nmembers, 2);
	cr_assert_eq(stream_layout(s)->samples, 18);
	cr_assert_eq(stream_layout(s)->batches_per_epoch, 6);
	run_to_end(s, &t);
	cr_assert_eq(t.nrec, 12);
	for (uint32_t e = 0; e < 2; e++) {
		unsigned seen[2 * NSAMPLES] = { 0 };

		expect_mixture_epoch(&t, e, seen);
		expect_mixture_plan(seen, e);
	}
	{
		struct stream_stats st;
		const char *label;
		uint64_t per;

		stream_member_stats(s, 1, &st, &label, &per);
		cr_assert_str_eq(label, "b");
		cr_assert_eq(per, 5);
		cr_assert_eq(st.samples, 10);
	}
	stream_free(s);
	tsink_fini(&t);
}

/* Three ranks together deal each epoch's places once. */
Test(stream, mixture_ranks)
{
	unsigned seen[2][2 * NSAMPLES] = { { 0 } };

	for (uint32_t r = 0; r < 3; r++) {
		int fds[2][1 + NSHARDS];
		struct stream_member m[2];
		struct stream_config c;
		struct tsink t;
		struct stream *s;

		base_config(&c);
		c.rank = r;
		c.world = 3;
		s = open_mixture(&c, m, fds);
		run_to_end(s, &t);
		for (uint32_t e = 0; e < 2; e++)
			expect_mixture_epoch(&t, e, seen[e]);
		stream_free(s);
		tsink_fini(&t);
	}
	for (uint32_t e = 0; e < 2; e++)
		expect_mixture_plan(seen[e], e);
}

/*
 * Counts that change at epoch 1 (stream_config.counts_from): member 1
 * gives 5 samples in epoch 0, from a start part-way through it, and 8
 * in epochs 1 and 2, which have 7 batches to epoch 0's 6; the schedule
 * counts positions across the change.
 */
Test(stream, mixture_counts_change)
{
	struct mixture_weights before = { .n = 2,
					  .how = { MIXTURE_REPEAT,
						   MIXTURE_CHOOSE },
					  .value = { 1, 5 } };
	unsigned seen[3][2 * NSAMPLES] = { { 0 } };
	int fds[2][1 + NSHARDS];
	struct stream_member m[2];
	struct stream_config c;
	struct diag d = { "" };
	const struct stream_layout *lay;
	struct stream_stats st;
	const char *label;
	uint64_t per, b = 4;
	uint32_t e = 0;
	struct tsink t;
	struct stream *s = NULL;

	base_config(&c);
	c.epochs = 3;
	c.counts_from = 1;
	two_members(&c, m, fds, 8);
	/* Without the earlier weights: refused, the members dropped. */
	cr_assert_eq(stream_new(&s, &c, NULL, 0, pool, &d), LOADER_EUSAGE);
	cr_assert(strstr(d.msg, "earlier weights of all 2 members"), "%s",
		  d.msg);
	for (unsigned i = 0; i < 2; i++)
		dup_fds(fds[i]);
	c.before = &before;
	c.start_batch = 4;
	cr_assert_eq(stream_new(&s, &c, NULL, 0, pool, &d), 0, "%s", d.msg);
	lay = stream_layout(s);
	cr_assert_eq(lay->batches_per_epoch, 6);
	cr_assert_eq(lay->sched.later_from, 1);
	cr_assert_eq(lay->sched.later_batches, 7);
	order_advance(&lay->sched, &e, &b, 2);
	cr_assert(e == 1 && b == 0, "(%u, %llu)", e, (unsigned long long)b);
	order_advance(&lay->sched, &e, &b, 7 + 3);
	cr_assert(e == 2 && b == 3, "(%u, %llu)", e, (unsigned long long)b);
	run_to_end(s, &t);
	cr_assert_eq(t.nrec, 2 + 7 + 7);
	for (uint32_t k = 0; k < t.nrec; k++)
		cr_assert_eq(t.recs[k].batch, k < 2 ? 4 + k : (k - 2) % 7,
			     "record %u: batch %llu", k,
			     (unsigned long long)t.recs[k].batch);
	for (uint32_t ep = 1; ep < 3; ep++) {
		unsigned chosen = 0;

		expect_mixture_epoch(&t, ep, seen[ep]);
		for (unsigned g = 0; g < NSAMPLES; g++) {
			cr_assert_eq(seen[ep][g], 1, "epoch %u sample %u", ep,
				     g);
			cr_assert_leq(seen[ep][NSAMPLES + g], 1);
			chosen += seen[ep][NSAMPLES + g];
		}
		cr_assert_eq(chosen, 8, "epoch %u: member 1 gave %u", ep,
			     chosen);
	}
	stream_member_stats(s, 1, &st, &label, &per);
	cr_assert_eq(per, 8);
	stream_free(s);
	tsink_fini(&t);
}

/*
 * The last two batches of epoch 0, with the earlier counts, are those an
 * unchanged stream of those counts gives.
 */
Test(stream, mixture_counts_change_same_start)
{
	struct mixture_weights before = { .n = 2,
					  .how = { MIXTURE_REPEAT,
						   MIXTURE_CHOOSE },
					  .value = { 1, 5 } };
	struct rec a[2], bb[2];

	for (int k = 0; k < 2; k++) {
		int fds[2][1 + NSHARDS];
		struct stream_member m[2];
		struct stream_config c;
		struct tsink t;
		struct stream *s;

		base_config(&c);
		c.epochs = k ? 3 : 1;
		c.start_batch = 4;
		if (k) {
			c.counts_from = 1;
			c.before = &before;
		}
		s = open_mixture_of(&c, m, fds, k ? 8 : 5);
		if (k)
			cr_assert_eq(stream_layout(s)->sched.later_batches, 7);
		run_to_end(s, &t);
		memcpy(k ? bb : a, t.recs, sizeof(a));
		stream_free(s);
		tsink_fini(&t);
	}
	cr_assert(!memcmp(a, bb, sizeof(a)));
}
