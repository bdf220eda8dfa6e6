/*
 * test_producer.c - the daemon's side of a batch ring (daemon/producer.c),
 * seen as a client sees it: the two memfds from producer_reply(), mapped
 * here (the header read-only, the consumer page read-write), while the test
 * drives the sink by hand in place of a stream's assembler.
 *
 * A test that waits on the producer runs the blocking call on a thread
 * of its own and checks the outcome on the test's thread; the suite's
 * timeout turns a wait that never ends into a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "futex.h"
#include "loader_error.h"
#include "producer.h"
#include "ring.h"
#include "schema.h"
#include "../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
#define BATCH	 4
#define BIG	 (1ull << 30) /* a max_bytes that never binds */

/* Batches of 4: an image u8 [28,28] and a label i64 []. */
static void make_layout(struct stream_layout *lay)
{
	memset(lay, 0, sizeof(*lay));
	lay->batch_size = BATCH;
	lay->batches_per_epoch = 25;
	lay->samples = 100;
	lay->noutputs = 2;
	strcpy(lay->out[0].name, "image");
	lay->out[0].dtype = DT_U8;
	lay->out[0].ndim = 2;
	lay->out[0].shape[0] = 28;
	lay->out[0].shape[1] = 28;
	lay->out[0].sample_bytes = 28 * 28;
	strcpy(lay->out[1].name, "label");
	lay->out[1].dtype = DT_I64;
	lay->out[1].ndim = 0;
	lay->out[1].sample_bytes = 8;
}

/* One producer and the client's view of its ring. */
struct fix {
	struct stream_layout lay;
	struct producer *pr;
	const struct stream_sink *sink;
	struct proto_open_ok ok;
	int ring_fd, cons_fd;
	const struct ring_hdr *hdr; /* ours, read-only */
	struct ring_cons *cons;	    /* ours, read-write */
};

static int try_open(struct fix *f, uint32_t slots, uint64_t max_bytes,
		    struct diag *d)
{
	struct producer_params p = {
		.lay = &f->lay,
		.slots = slots,
		.epochs = 2,
		.start_epoch = 7,
		.max_bytes = max_bytes,
		.label = "unit",
	};

	make_layout(&f->lay);
	f->pr = NULL;
	return producer_new(&f->pr, &p, d);
}

static void open_ring(struct fix *f, uint32_t slots, uint64_t max_bytes)
{
	struct diag d = { "" };
	void *map;

	cr_assert_eq(try_open(f, slots, max_bytes, &d), 0, "%s", d.msg);
	f->sink = producer_sink(f->pr);
	cr_assert_not_null(f->sink);
	producer_reply(f->pr, &f->ok, &f->ring_fd, &f->cons_fd);
	cr_assert_geq(f->ring_fd, 0);
	cr_assert_geq(f->cons_fd, 0);
	map = mmap(NULL, f->ok.ring_bytes, PROT_READ, MAP_SHARED, f->ring_fd,
		   0);
	cr_assert_neq(map, MAP_FAILED, "mmap ring: %s", strerror(errno));
	f->hdr = map;
	map = mmap(NULL, f->ok.cons_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		   f->cons_fd, 0);
	cr_assert_neq(map, MAP_FAILED, "mmap cons: %s", strerror(errno));
	f->cons = map;
}

static void close_ring(struct fix *f)
{
	munmap((void *)f->hdr, f->ok.ring_bytes);
	munmap(f->cons, f->ok.cons_bytes);
	producer_free(f->pr);
}

static const unsigned char *slot_of(const struct fix *f, uint32_t k)
{
	return (const unsigned char *)f->hdr + f->hdr->slots_offset +
	       ring_slot_of(k, f->hdr->slot_count) * f->hdr->slot_size;
}

static int acquire(struct fix *f, struct stream_batch *b)
{
	memset(b, 0, sizeof(*b));
	return f->sink->ops->acquire(f->sink->ctx, b);
}

/* Fill the acquired batch as batch `seq` of the stream, and publish it. */
static void publish(struct fix *f, struct stream_batch *b, uint32_t seq)
{
	b->epoch = 7 + seq / 25;
	b->batch = seq % 25;
	b->count = seq % 3 ? BATCH : BATCH - 1;
	b->repeats = seq % 5 == 4;
	for (uint32_t i = 0; i < b->count; i++) {
		int64_t label = (int64_t)seq * 10 + i;

		b->ids[i] = 1000 + (uint64_t)seq * BATCH + i;
		memset(b->out[0] + i * 784, (int)(seq * 4 + i) & 0xff, 784);
		memcpy(b->out[1] + i * 8, &label, 8);
	}
	f->sink->ops->publish(f->sink->ctx, b);
}

/* Acquire and publish batches first..first+n-1; each must have room. */
static void fill(struct fix *f, uint32_t first, uint32_t n)
{
	for (uint32_t k = first; k < first + n; k++) {
		struct stream_batch b;

		cr_assert_eq(acquire(f, &b), 0, "acquire of batch %u", k);
		publish(f, &b, k);
		cr_assert_eq(__atomic_load_n(&f->hdr->prod, __ATOMIC_ACQUIRE),
			     k + 1);
	}
}

/* What the client reads of batch seq, against what publish() wrote. */
static void check_slot(const struct fix *f, uint32_t seq)
{
	const unsigned char *s = slot_of(f, seq);
	const struct ring_slot *rs = (const struct ring_slot *)s;
	const uint64_t *ids = (const uint64_t *)(s + f->hdr->ids_offset);
	uint32_t count = seq % 3 ? BATCH : BATCH - 1;

	cr_expect_eq(rs->seq, seq);
	cr_expect_eq(rs->epoch, 7 + seq / 25, "batch %u", seq);
	cr_expect_eq(rs->batch, seq % 25, "batch %u", seq);
	cr_expect_eq(rs->count, count, "batch %u", seq);
	cr_expect_eq(rs->repeats, seq % 5 == 4, "batch %u: repeats", seq);
	for (uint32_t i = 0; i < count; i++) {
		const unsigned char *img = s + f->hdr->out[0].offset + i * 784;
		int64_t label;

		cr_expect_eq(ids[i], 1000 + (uint64_t)seq * BATCH + i,
			     "batch %u sample %u", seq, i);
		cr_expect_eq(img[0], (seq * 4 + i) & 0xff);
		cr_expect_eq(img[783], (seq * 4 + i) & 0xff);
		memcpy(&label, s + f->hdr->out[1].offset + i * 8, 8);
		cr_expect_eq(label, (int64_t)seq * 10 + i);
	}
}

/* Give batches back up to cons, as libloader's loader_release() does. */
static void release(struct fix *f, uint32_t cons)
{
	__atomic_store_n(&f->cons->cons, cons, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&f->hdr->daemon_waiting, __ATOMIC_SEQ_CST))
		futex_wake_shared(&f->cons->cons);
}

/* An acquire on a thread of its own, for the waits. */
struct waiter {
	struct fix *f;
	struct stream_batch b;
	int ret;
	bool done;
	pthread_t th;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = acquire(w->f, &w->b);
	__atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Start an acquire and return once the producer sleeps in it. */
static void start_waiter(struct waiter *w, struct fix *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->ret = 1;
	cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
	while (!__atomic_load_n(&f->hdr->daemon_waiting, __ATOMIC_ACQUIRE))
		usleep(1000);
	cr_assert_not(__atomic_load_n(&w->done, __ATOMIC_ACQUIRE),
		      "acquire returned on a full ring");
}

static int join_waiter(struct waiter *w)
{
	cr_assert_eq(pthread_join(w->th, NULL), 0);
	return w->ret;
}

/*
 * A producer that fails to return from a wait (the bug some of these
 * tests look for) fails its test instead of hanging the suite.
 */
TestSuite(producer, .timeout = 30);

/* ------------------------------------------------------------ header */

Test(producer, header_describes_layout)
{
	struct fix f;
	struct stat st;
	uint64_t lo[3], hi[3];

	open_ring(&f, 4, BIG);
	cr_expect_eq(f.hdr->magic, RING_MAGIC);
	cr_expect_eq(f.hdr->version, RING_VERSION);
	cr_expect_eq(f.hdr->slot_count, 4);
	cr_expect_eq(f.hdr->noutputs, 2);
	cr_expect_eq(f.hdr->batch_size, BATCH);
	cr_expect_eq(f.hdr->epochs, 2);
	cr_expect_eq(f.hdr->start_epoch, 7);
	cr_expect_eq(f.hdr->batches_per_epoch, 25);
	cr_expect_eq(f.hdr->slots_offset, RING_PAGE);
	cr_expect_gt(f.hdr->slot_size, 0);
	cr_expect_eq(f.hdr->slot_size % RING_PAGE, 0, "slot size %lu",
		     (unsigned long)f.hdr->slot_size);
	cr_expect_eq(f.hdr->total_bytes, RING_PAGE + 4 * f.hdr->slot_size);
	cr_expect_eq(f.ok.ring_bytes, f.hdr->total_bytes);
	cr_expect_eq(f.ok.cons_bytes, RING_PAGE);
	cr_assert_eq(fstat(f.ring_fd, &st), 0);
	cr_expect_eq((uint64_t)st.st_size, f.ok.ring_bytes);
	cr_assert_eq(fstat(f.cons_fd, &st), 0);
	cr_expect_eq((uint64_t)st.st_size, f.ok.cons_bytes);

	/* Outputs as [batch, sample dims...]. */
	cr_expect_str_eq(f.hdr->out[0].name, "image");
	cr_expect_eq(f.hdr->out[0].dtype, RING_DTYPE_U8);
	cr_expect_eq(f.hdr->out[0].ndim, 3);
	cr_expect_eq(f.hdr->out[0].shape[0], BATCH);
	cr_expect_eq(f.hdr->out[0].shape[1], 28);
	cr_expect_eq(f.hdr->out[0].shape[2], 28);
	cr_expect_eq(f.hdr->out[0].bytes, BATCH * 784);
	cr_expect_str_eq(f.hdr->out[1].name, "label");
	cr_expect_eq(f.hdr->out[1].dtype, RING_DTYPE_I64);
	cr_expect_eq(f.hdr->out[1].ndim, 1);
	cr_expect_eq(f.hdr->out[1].shape[0], BATCH);
	cr_expect_eq(f.hdr->out[1].bytes, BATCH * 8);

	/*
	 * The slot head, the ids and each output: aligned, within the slot,
	 * and apart (every region ends before the next begins).
	 */
	lo[0] = f.hdr->ids_offset;
	hi[0] = lo[0] + BATCH * 8;
	for (unsigned i = 0; i < 2; i++) {
		lo[i + 1] = f.hdr->out[i].offset;
		hi[i + 1] = lo[i + 1] + f.hdr->out[i].bytes;
	}
	cr_expect_geq(lo[0], sizeof(struct ring_slot));
	for (unsigned i = 0; i < 3; i++) {
		cr_expect_eq(lo[i] % RING_ALIGN, 0, "region %u at %lu", i,
			     (unsigned long)lo[i]);
		cr_expect_leq(hi[i], f.hdr->slot_size, "region %u", i);
		for (unsigned k = 0; k < i; k++)
			cr_expect(hi[k] <= lo[i] || hi[i] <= lo[k],
				  "regions %u and %u overlap", k, i);
	}

	/* A stream that has not started: nothing published or released. */
	cr_expect_eq(f.hdr->prod, 0);
	cr_expect_eq(f.hdr->state, RING_RUNNING);
	cr_expect_eq(f.hdr->daemon_waiting, 0);
	cr_expect_eq(f.cons->cons, 0);
	cr_expect_eq(f.cons->client_waiting, 0);
	cr_expect_eq(producer_stall_ns(f.pr), 0);
	close_ring(&f);
}

/*
 * The ring can be mapped writable (a client's in-place writes to a batch
 * it holds) but not resized, nor its seals changed; the same holds for
 * the consumer page.
 */
Test(producer, memfds_sealed)
{
	struct fix f;
	void *map;

	open_ring(&f, 2, BIG);
	cr_expect_eq(fcntl(f.ring_fd, F_GET_SEALS),
		     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	cr_expect_eq(fcntl(f.cons_fd, F_GET_SEALS),
		     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);

	map = mmap(NULL, f.ok.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		   f.ring_fd, 0);
	cr_expect_neq(map, MAP_FAILED, "the ring not mappable writable: %s",
		      strerror(errno));
	if (map != MAP_FAILED)
		munmap(map, f.ok.ring_bytes);

	cr_expect_neq(ftruncate(f.ring_fd, 0), 0, "ring shrunk");
	cr_expect_neq(ftruncate(f.ring_fd, (off_t)f.ok.ring_bytes * 2), 0,
		      "ring grown");
	cr_expect_neq(ftruncate(f.cons_fd, 0), 0, "consumer page shrunk");
	cr_expect_neq(ftruncate(f.cons_fd, 2 * RING_PAGE), 0,
		      "consumer page grown");
	cr_expect_neq(fcntl(f.ring_fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
	close_ring(&f);
}

/*
 * A client that scribbles over the whole ring, header included, cannot
 * move the producer's writes: it works from its own copy of the layout,
 * so every place it hands out stays inside the slot it belongs to.
 */
Test(producer, header_not_trusted)
{
	struct stream_batch b;
	struct ring_hdr h;
	struct fix f;
	unsigned char *w;

	open_ring(&f, 4, BIG);
	memcpy(&h, f.hdr, sizeof(h));
	w = mmap(NULL, f.ok.ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		 f.ring_fd, 0);
	cr_assert_neq(w, MAP_FAILED, "%s", strerror(errno));
	for (uint32_t k = 0; k < 6; k++) {
		const unsigned char *s;
		uint64_t id;

		memset(w, 0xff, RING_PAGE);
		cr_assert_eq(acquire(&f, &b), 0);
		b.ids[0] = 0xabc0 + k;
		for (uint32_t i = 0; i < f.lay.noutputs; i++)
			b.out[i][0] = (unsigned char)(0x50 + 16 * i + k);
		f.sink->ops->publish(f.sink->ctx, &b);
		s = w + RING_PAGE + ring_slot_of(k, h.slot_count) * h.slot_size;
		memcpy(&id, s + h.ids_offset, sizeof(id));
		cr_expect_eq(id, 0xabc0 + k, "batch %u: ids not in its slot",
			     k);
		for (uint32_t i = 0; i < f.lay.noutputs; i++)
			cr_expect_eq(s[h.out[i].offset], 0x50 + 16 * i + k,
				     "batch %u: output %u not in its slot", k,
				     i);
		__atomic_store_n(&f.cons->cons, k + 1, __ATOMIC_SEQ_CST);
	}
	munmap(w, f.ok.ring_bytes);
	close_ring(&f);
}

/* ---------------------------------------------------------- slot counts */

Test(producer, slot_counts)
{
	static const struct {
		uint32_t slots;
		int code;
	} t[] = {
		{ 0, 0 },
		{ 1, LOADER_EUSAGE },
		{ 2, 0 },
		{ 3, LOADER_EUSAGE },
		{ 4, 0 },
		{ 6, LOADER_EUSAGE },
		{ 1024, 0 },
		{ 1023, LOADER_EUSAGE },
		{ 2048, LOADER_EUSAGE },
		{ 1u << 31, LOADER_EUSAGE },
		{ UINT32_MAX, LOADER_EUSAGE },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct fix f;
		struct diag d = { "" };
		int err = try_open(&f, t[i].slots, BIG, &d);

		cr_expect_eq(err, t[i].code, "%u slots: %d (%s)", t[i].slots,
			     err, d.msg);
		if (err) {
			cr_expect_null(f.pr);
			cr_expect_not_null(strstr(d.msg, "power of two"),
					   "%u slots: %s", t[i].slots, d.msg);
			continue;
		}
		producer_reply(f.pr, &f.ok, &f.ring_fd, &f.cons_fd);
		f.hdr = mmap(NULL, RING_PAGE, PROT_READ, MAP_SHARED, f.ring_fd,
			     0);
		cr_assert_neq(f.hdr, MAP_FAILED);
		cr_expect_eq(f.hdr->slot_count, t[i].slots ? t[i].slots : 8,
			     "%u slots", t[i].slots);
		cr_expect_eq(f.ok.ring_bytes,
			     RING_PAGE + f.hdr->slot_count * f.hdr->slot_size);
		munmap((void *)f.hdr, RING_PAGE);
		producer_free(f.pr);
	}
}

/*
 * max_bytes: a slot count asked for must fit; the default (8) halves
 * down to 2 to fit, and fails only when 2 slots do not.
 */
Test(producer, max_bytes)
{
	struct fix f;
	struct diag d = { "" };
	uint64_t ss;

	/* The slot size of this layout, from a ring that fits anyway. */
	cr_assert_eq(try_open(&f, 2, BIG, &d), 0, "%s", d.msg);
	producer_reply(f.pr, &f.ok, &f.ring_fd, &f.cons_fd);
	ss = (f.ok.ring_bytes - RING_PAGE) / 2;
	producer_free(f.pr);

	const struct {
		uint32_t slots;
		uint64_t max_bytes;
		int code;
		uint32_t want; /* slots, when it fits */
	} t[] = {
		{ 4, RING_PAGE + 4 * ss, 0, 4 },
		{ 4, RING_PAGE + 4 * ss - 1, LOADER_ETOOBIG, 0 },
		{ 1024, RING_PAGE + 1023 * ss, LOADER_ETOOBIG, 0 },
		{ 0, RING_PAGE + 8 * ss, 0, 8 },
		{ 0, RING_PAGE + 8 * ss - 1, 0, 4 },
		{ 0, RING_PAGE + 4 * ss, 0, 4 },
		{ 0, RING_PAGE + 4 * ss - 1, 0, 2 },
		{ 0, RING_PAGE + 2 * ss, 0, 2 },
		{ 0, RING_PAGE + 2 * ss - 1, LOADER_ETOOBIG, 0 },
		{ 0, 0, LOADER_ETOOBIG, 0 },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		int err;

		d.msg[0] = '\0';
		err = try_open(&f, t[i].slots, t[i].max_bytes, &d);
		cr_expect_eq(err, t[i].code, "case %zu: %d (%s)", i, err,
			     d.msg);
		if (err) {
			cr_expect_null(f.pr);
			cr_expect_not_null(
				strstr(d.msg, " bytes allowed (fewer slots"),
				"case %zu: %s", i, d.msg);
			continue;
		}
		producer_reply(f.pr, &f.ok, &f.ring_fd, &f.cons_fd);
		cr_expect_eq(f.ok.ring_bytes, RING_PAGE + t[i].want * ss,
			     "case %zu", i);
		cr_expect_leq(f.ok.ring_bytes, t[i].max_bytes, "case %zu", i);
		producer_free(f.pr);
	}
}

/* ------------------------------------------------------------- the sink */

/* Fill the ring, then empty it and fill it again: slots come round. */
Test(producer, fill_release_refill)
{
	struct fix f;
	struct stream_batch b;

	open_ring(&f, 4, BIG);
	/* acquire hands out the places the header describes. */
	cr_assert_eq(acquire(&f, &b), 0);
	cr_expect_eq((unsigned char *)b.ids + f.hdr->out[0].offset -
			     f.hdr->ids_offset,
		     b.out[0]);
	cr_expect_eq(b.out[0] + f.hdr->out[1].offset - f.hdr->out[0].offset,
		     b.out[1]);
	publish(&f, &b, 0);
	fill(&f, 1, 3);
	for (uint32_t k = 0; k < 4; k++)
		check_slot(&f, k);

	release(&f, 4);
	fill(&f, 4, 4);
	cr_expect_eq(f.hdr->prod, 8);
	for (uint32_t k = 4; k < 8; k++)
		check_slot(&f, k);
	/* Releasing one at a time frees one slot at a time. */
	for (uint32_t k = 8; k < 12; k++) {
		release(&f, k - 3);
		fill(&f, k, 1);
		check_slot(&f, k);
	}
	cr_expect_eq(f.hdr->state, RING_RUNNING);
	close_ring(&f);
}

/* On a full ring acquire waits, and returns when the client releases. */
Test(producer, full_ring_waits_for_release)
{
	struct fix f;
	struct waiter w;

	open_ring(&f, 4, BIG);
	fill(&f, 0, 4);
	start_waiter(&w, &f);
	/* Still asleep a while later, nothing published meanwhile. */
	usleep(120 * 1000);
	cr_expect_not(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE));
	cr_expect_eq(f.hdr->prod, 4);

	release(&f, 1);
	cr_assert_eq(join_waiter(&w), 0);
	cr_expect_eq(f.hdr->daemon_waiting, 0);
	cr_expect_gt(producer_stall_ns(f.pr), 0);
	/* The place given is slot 0, batch 0's, now free again. */
	publish(&f, &w.b, 4);
	cr_expect_eq(f.hdr->prod, 5);
	check_slot(&f, 4);
	for (uint32_t k = 1; k < 4; k++)
		check_slot(&f, k);
	close_ring(&f);
}

/*
 * A consumer index that moves backwards, or past what was published,
 * fails the stream: acquire returns LOADER_EPROTO and the header says
 * why. published/released/more: batches published, then the index that
 * an acquire saw, then batches published after it; bad: the index set.
 */
Test(producer, untrusted_consumer_index)
{
	static const struct {
		const char *why;
		uint32_t published, released, more, bad;
	} t[] = {
		{ "backwards", 2, 2, 1, 1 },
		{ "backwards to 0", 3, 3, 1, 0 },
		{ "past prod", 2, 0, 0, 3 },
		{ "past prod on an empty ring", 0, 0, 0, 1 },
		{ "half the index space ahead", 1, 0, 0, 1u << 31 },
		{ "backwards across the wrap", 1, 0, 0, UINT32_MAX },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct fix f;
		struct stream_batch b;
		int err;

		open_ring(&f, 4, BIG);
		fill(&f, 0, t[i].published);
		release(&f, t[i].released);
		fill(&f, t[i].published, t[i].more);
		release(&f, t[i].bad);
		err = acquire(&f, &b);
		cr_expect_eq(err, LOADER_EPROTO, "%s: %d", t[i].why, err);
		cr_expect_eq(f.hdr->state, RING_FAILED, "%s", t[i].why);
		cr_expect_eq(f.hdr->error, LOADER_EPROTO, "%s", t[i].why);
		cr_expect_not_null(strstr(f.hdr->reason, "consumer index"),
				   "%s: reason \"%s\"", t[i].why,
				   f.hdr->reason);
		cr_expect_eq(f.hdr->prod, t[i].published + t[i].more, "%s",
			     t[i].why);
		close_ring(&f);
	}
}

/* The same, while the producer waits on a full ring. */
Test(producer, bad_index_while_waiting)
{
	struct fix f;
	struct waiter w;

	open_ring(&f, 2, BIG);
	fill(&f, 0, 2);
	start_waiter(&w, &f);
	release(&f, 3);
	cr_expect_eq(join_waiter(&w), LOADER_EPROTO);
	cr_expect_eq(f.hdr->state, RING_FAILED);
	cr_expect_not_null(strstr(f.hdr->reason, "consumer index"), "%s",
			   f.hdr->reason);
	close_ring(&f);
}

/* cancel makes a waiting acquire return -ECANCELED, and later ones too. */
Test(producer, cancel_while_waiting)
{
	struct fix f;
	struct waiter w;
	struct stream_batch b;

	open_ring(&f, 2, BIG);
	fill(&f, 0, 2);
	start_waiter(&w, &f);
	f.sink->ops->cancel(f.sink->ctx);
	cr_expect_eq(join_waiter(&w), -ECANCELED);
	cr_expect_eq(acquire(&f, &b), -ECANCELED);
	/* Cancelling is not a failure of the stream the client sees. */
	cr_expect_eq(f.hdr->state, RING_RUNNING);
	cr_expect_eq(f.hdr->prod, 2);
	close_ring(&f);
}

/* Once cancelled, acquire refuses even when a slot is free. */
Test(producer, cancel_before_acquire)
{
	struct fix f;
	struct stream_batch b;

	open_ring(&f, 4, BIG);
	fill(&f, 0, 1);
	f.sink->ops->cancel(f.sink->ctx);
	cr_expect_eq(acquire(&f, &b), -ECANCELED);
	cr_expect_eq(f.hdr->prod, 1);
	close_ring(&f);
}

Test(producer, finish_end)
{
	struct fix f;

	open_ring(&f, 2, BIG);
	fill(&f, 0, 1);
	f.sink->ops->finish(f.sink->ctx, 0, NULL);
	cr_expect_eq(f.hdr->state, RING_END);
	cr_expect_eq(f.hdr->error, 0);
	cr_expect_str_eq(f.hdr->reason, "");
	cr_expect_eq(f.hdr->prod, 1);
	close_ring(&f);
}

Test(producer, finish_failed)
{
	static const struct {
		int err;
		size_t len; /* of the reason */
	} t[] = {
		{ LOADER_EDECODE, 20 },
		{ -EIO, 1 },
		{ LOADER_EPROTO, PROTO_REASON_MAX - 1 },
		{ -ENOMEM, 3 * PROTO_REASON_MAX }, /* cut to fit, terminated */
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		char reason[3 * PROTO_REASON_MAX + 1];
		size_t want = t[i].len < PROTO_REASON_MAX ?
				      t[i].len :
				      PROTO_REASON_MAX - 1;
		struct fix f;

		for (size_t k = 0; k < t[i].len; k++)
			reason[k] = (char)('a' + (k + i) % 26);
		reason[t[i].len] = '\0';
		open_ring(&f, 2, BIG);
		f.sink->ops->finish(f.sink->ctx, t[i].err, reason);
		cr_expect_eq(f.hdr->state, RING_FAILED, "case %zu", i);
		cr_expect_eq(f.hdr->error, t[i].err, "case %zu", i);
		cr_expect_eq(strnlen(f.hdr->reason, PROTO_REASON_MAX), want,
			     "case %zu", i);
		cr_expect_eq(memcmp(f.hdr->reason, reason, want), 0, "case %zu",
			     i);
		close_ring(&f);
	}
}

/* producer_free closes both memfds; the client's mappings outlive it. */
Test(producer, free)
{
	struct fix f;

	producer_free(NULL);
	open_ring(&f, 2, BIG);
	fill(&f, 0, 1);
	producer_free(f.pr);
	for (unsigned i = 0; i < 2; i++) {
		int r = fcntl(i ? f.cons_fd : f.ring_fd, F_GETFD), err = errno;

		cr_expect(r == -1 && err == EBADF, "memfd %u left open", i);
	}
	cr_expect_eq(f.hdr->magic, RING_MAGIC);
	check_slot(&f, 0);
	munmap((void *)f.hdr, f.ok.ring_bytes);
	munmap(f.cons, f.ok.cons_bytes);
}
