/*
 * producer.c - a stream's batch ring: memfds, header, and the sink that
 * waits for free slots and publishes full ones.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fault.h"
#include "futex.h"
#include "loader_error.h"
#include "plog.h"
#include "producer.h"
#include "ring.h"
#include "schema.h"
#include "tie.h"

#define PRODUCER_DEFAULT_SLOTS 8
/* How often a producer waiting for a slot looks at the cancel flag. */
#define PRODUCER_POLL_NS (50 * 1000 * 1000)

/*
 * The ring tells the client each output's dtype in the shard format's
 * numbers (RING_DTYPE_*, which libloader ties to LOADER_DTYPE_*): the
 * pipeline's enum dtype must stay equal to them.
 */
TIE(MIX_NONE, RING_MIX_NONE);
TIE(MIX_MIXUP, RING_MIX_MIXUP);
TIE(MIX_CUTMIX, RING_MIX_CUTMIX);
TIE(ISPEC_PAIR_FLIP, RING_PAIR_FLIP);
TIE(ISPEC_PAIR_ROLL, RING_PAIR_ROLL);
TIE(DT_U8, RING_DTYPE_U8);
TIE(DT_I8, RING_DTYPE_I8);
TIE(DT_U16, RING_DTYPE_U16);
TIE(DT_I16, RING_DTYPE_I16);
TIE(DT_U32, RING_DTYPE_U32);
TIE(DT_I32, RING_DTYPE_I32);
TIE(DT_U64, RING_DTYPE_U64);
TIE(DT_I64, RING_DTYPE_I64);
TIE(DT_F16, RING_DTYPE_F16);
TIE(DT_F32, RING_DTYPE_F32);
TIE(DT_F64, RING_DTYPE_F64);
TIE(STREAM_MAX_OUTPUTS, PROTO_MAX_OUTPUTS);
/* A ring shape is the batch, then a sample's dimensions. */
TIE(STREAM_MAX_DIMS + 1, RING_MAX_DIMS);
TIE(STREAM_NAME_MAX, PROTO_NAME_MAX);

/*
 * The client maps the ring's slots writable (ring.h), and with them the
 * header: nothing in the ring is read back here. The layout the sink
 * works from is this private copy; the shared header is only written.
 */
struct producer {
	struct stream_sink sink;
	char label[128];
	int ring_fd, cons_fd;
	struct ring_hdr *hdr;
	struct ring_cons *cons;
	size_t ring_bytes;
	uint64_t slot_size;
	uint32_t slots, noutputs;
	uint64_t ids_offset;
	uint64_t members_offset; /* a mixture's; 0 otherwise */
	uint64_t offsets[STREAM_MAX_OUTPUTS];
	uint64_t index[STREAM_MAX_OUTPUTS]; /* ragged outputs' offsets */
	uint32_t ndim[STREAM_MAX_OUTPUTS];  /* of each output's samples */
	uint32_t prod, last_cons;
	/* producer_released()'s view of the consumer index */
	uint32_t released;
	uint64_t released_wraps;
	bool cancel;
	uint64_t stall_ns;     /* atomic */
	uint64_t client_waits; /* atomic: publishes the client waited for */
};

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int make_memfd(const char *name, size_t size, unsigned seals, void **map,
		      struct diag *d)
{
	int fd = fault_alloc() ?
			 (errno = ENOMEM, -1) :
			 memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return diag_set(d, -errno, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)size)) {
		int err = -errno;

		close(fd);
		return diag_set(d, err, "ring of %zu bytes: %s", size,
				strerror(-err));
	}
	*map = fault_alloc() ? (errno = ENOMEM, MAP_FAILED) :
			       mmap(NULL, size, PROT_READ | PROT_WRITE,
				    MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		int err = -errno;

		close(fd);
		return diag_set(d, err, "mmap ring: %s", strerror(-err));
	}
	/*
	 * Sealed after our own writable mapping exists: the client cannot
	 * resize the file (which would turn our writes into SIGBUS).
	 */
	if (fcntl(fd, F_ADD_SEALS, seals)) {
		int err = -errno;

		munmap(*map, size);
		close(fd);
		return diag_set(d, err, "seal ring: %s", strerror(-err));
	}
	return fd;
}

/*
 * Where each output of a slot goes, after the slot head and the ids; a
 * ragged one's offsets (index) come before its values.
 */
static uint64_t lay_out_slot(const struct stream_layout *lay, uint64_t *ids,
			     uint64_t *members, uint64_t *offsets,
			     uint64_t *index)
{
	uint64_t pos = align_up(sizeof(struct ring_slot), RING_ALIGN);

	*ids = pos;
	pos = align_up(pos + (uint64_t)lay->batch_size * 8, RING_ALIGN);
	/* A mixture's: each sample's member, after the ids. */
	*members = 0;
	if (lay->nmembers) {
		*members = pos;
		pos = align_up(pos + (uint64_t)lay->batch_size * 4, RING_ALIGN);
	}
	for (uint32_t i = 0; i < lay->noutputs; i++) {
		const struct stream_tensor *t = &lay->out[i];

		index[i] = 0;
		if (t->ragged) {
			index[i] = pos;
			pos = align_up(pos + ((uint64_t)lay->batch_size + 1) *
						       8,
				       RING_ALIGN);
			offsets[i] = pos;
			pos = align_up(pos + t->capacity, RING_ALIGN);
			continue;
		}
		offsets[i] = pos;
		pos = align_up(pos + t->sample_bytes * lay->batch_size,
			       RING_ALIGN);
	}
	return align_up(pos, RING_PAGE);
}

static void write_header(struct producer *pr, const struct producer_params *p,
			 uint32_t slots, uint64_t ids, const uint64_t *offsets)
{
	const struct stream_layout *lay = p->lay;
	struct ring_hdr *h = pr->hdr;

	h->magic = RING_MAGIC;
	h->version = RING_VERSION;
	h->slot_count = slots;
	h->noutputs = lay->noutputs;
	h->slot_size = pr->slot_size;
	h->slots_offset = RING_PAGE;
	h->total_bytes = pr->ring_bytes;
	h->batch_size = lay->batch_size;
	h->epochs = p->epochs;
	h->start_epoch = p->start_epoch;
	h->batches_per_epoch = lay->batches_per_epoch;
	h->ids_offset = ids;
	h->flags = p->named ? RING_NAMED : 0;
	if (lay->nmembers) {
		h->flags |= RING_MIXTURE;
		h->members_offset = pr->members_offset;
		h->nmembers = lay->nmembers;
		h->counts_from = lay->sched.later_from;
		h->later_batches = lay->sched.later_batches;
	}
	for (uint32_t i = 0; i < lay->noutputs; i++) {
		const struct stream_tensor *t = &lay->out[i];
		struct ring_output *ro = &h->out[i];

		memcpy(ro->name, t->name, sizeof(ro->name));
		ro->dtype = t->dtype;
		ro->ndim = 1 + t->ndim;
		ro->shape[0] = lay->batch_size;
		for (uint32_t k = 0; k < t->ndim; k++)
			ro->shape[k + 1] = t->shape[k];
		ro->bytes = t->sample_bytes * lay->batch_size;
		ro->offset = offsets[i];
		if (t->ragged) {
			ro->shape[1] = RING_RAGGED;
			ro->row = t->row_bytes;
			ro->bytes = t->capacity;
			ro->index = pr->index[i];
			ro->flags = RING_OUT_RAGGED;
		}
	}
}

static void ring_finish(struct producer *pr, uint32_t state, int err,
			const char *reason)
{
	if (reason)
		snprintf(pr->hdr->reason, sizeof(pr->hdr->reason), "%s",
			 reason);
	pr->hdr->error = err;
	__atomic_store_n(&pr->hdr->state, state, __ATOMIC_SEQ_CST);
	futex_wake_shared(&pr->hdr->prod);
}

static unsigned char *slot_at(struct producer *pr, uint32_t k)
{
	return (unsigned char *)pr->hdr + RING_PAGE +
	       ring_slot_of(k, pr->slots) * pr->slot_size;
}

/*
 * Wait until the slot for pr->prod is free. The consumer index is the
 * client's: it must only move forward, and never past what we published.
 */
static int sink_acquire(void *ctx, struct stream_batch *b)
{
	struct producer *pr = ctx;
	uint32_t slots = pr->slots;
	unsigned char *slot;

	for (;;) {
		uint32_t c = __atomic_load_n(&pr->cons->cons, __ATOMIC_ACQUIRE);
		uint64_t t0;

		/* Once cancelled, never hand out a place, free or not. */
		if (__atomic_load_n(&pr->cancel, __ATOMIC_ACQUIRE))
			return -ECANCELED;
		if (!ring_cons_valid(pr->prod, c, pr->last_cons, slots)) {
			char why[160];

			snprintf(why, sizeof(why),
				 "consumer index %" PRIu32
				 " is invalid (published %" PRIu32
				 ", released %" PRIu32 " before)",
				 c, pr->prod, pr->last_cons);
			plog(PLOG_ERR, "%s: stream failed: %s", pr->label, why);
			ring_finish(pr, RING_FAILED, LOADER_EPROTO, why);
			return LOADER_EPROTO;
		}
		pr->last_cons = c;
		if (ring_pending(pr->prod, c) < slots)
			break;
		__atomic_store_n(&pr->hdr->daemon_waiting, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&pr->cons->cons, __ATOMIC_SEQ_CST) == c) {
			t0 = clock_mono_ns();
			futex_wait_shared(&pr->cons->cons, c, PRODUCER_POLL_NS);
			__atomic_fetch_add(&pr->stall_ns, clock_mono_ns() - t0,
					   __ATOMIC_RELAXED);
		}
		__atomic_store_n(&pr->hdr->daemon_waiting, 0, __ATOMIC_SEQ_CST);
	}
	slot = slot_at(pr, pr->prod);
	b->ids = (uint64_t *)(slot + pr->ids_offset);
	b->members = pr->members_offset ?
			     (uint32_t *)(void *)(slot + pr->members_offset) :
			     NULL;
	for (uint32_t i = 0; i < pr->noutputs; i++) {
		b->out[i] = slot + pr->offsets[i];
		b->off[i] = pr->index[i] ?
				    (uint64_t *)(void *)(slot + pr->index[i]) :
				    NULL;
	}
	return 0;
}

static void sink_publish(void *ctx, const struct stream_batch *b)
{
	struct producer *pr = ctx;
	struct ring_slot *slot = (struct ring_slot *)slot_at(pr, pr->prod);

	slot->seq = pr->prod;
	slot->batch = b->batch;
	slot->epoch = b->epoch;
	slot->count = b->count;
	slot->repeats = b->repeats;
	for (uint32_t i = 0; i < pr->noutputs; i++) {
		slot->shape[i][0] = b->count;
		for (uint32_t k = 0; k < pr->ndim[i]; k++)
			slot->shape[i][k + 1] = b->shape[i][k];
		if (pr->index[i])
			slot->shape[i][1] = RING_RAGGED;
	}
	slot->mix = (struct ring_mix){ .kind = b->mix.kind,
				       .pair = b->mix.pair,
				       .lam = b->mix.kind ? b->mix.lam : 1 };
	memcpy(slot->mix.box, b->mix.box, sizeof(slot->mix.box));
	/* Release: producer_released() reads it on another thread. */
	__atomic_store_n(&pr->prod, pr->prod + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&pr->hdr->prod, pr->prod, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pr->cons->client_waiting, __ATOMIC_SEQ_CST)) {
		/* The trainer was asleep waiting for this batch. */
		__atomic_fetch_add(&pr->client_waits, 1, __ATOMIC_RELAXED);
		futex_wake_shared(&pr->hdr->prod);
	}
}

static void sink_finish(void *ctx, int err, const char *reason)
{
	ring_finish(ctx, err ? RING_FAILED : RING_END, err, reason);
}

static void sink_cancel(void *ctx)
{
	struct producer *pr = ctx;

	__atomic_store_n(&pr->cancel, true, __ATOMIC_RELEASE);
	futex_wake_shared(&pr->cons->cons);
}

static const struct stream_sink_ops producer_ops = {
	.acquire = sink_acquire,
	.publish = sink_publish,
	.finish = sink_finish,
	.cancel = sink_cancel,
};

int producer_new(struct producer **out, const struct producer_params *p,
		 struct diag *d)
{
	uint64_t offsets[STREAM_MAX_OUTPUTS], ids;
	uint32_t slots = p->slots;
	struct producer *pr;
	void *map;
	int fd, err;

	if (!producer_slots_ok(slots))
		return diag_set(d, LOADER_EUSAGE,
				"ring slots %" PRIu32
				" must be a power of two in 2..%d",
				slots, PRODUCER_MAX_SLOTS);
	pr = mem_calloc(1, sizeof(*pr));
	if (!pr)
		return diag_set(d, -ENOMEM, "out of memory");
	pr->ring_fd = pr->cons_fd = -1;
	pr->sink = (struct stream_sink){ &producer_ops, pr };
	snprintf(pr->label, sizeof(pr->label), "%s", p->label ? p->label : "");
	pr->slot_size = lay_out_slot(p->lay, &ids, &pr->members_offset, offsets,
				     pr->index);
	/*
	 * No slot count asked for: PRODUCER_DEFAULT_SLOTS, or fewer (down
	 * to 2) when large batches (images) would not fit the limit so.
	 */
	if (!slots)
		for (slots = PRODUCER_DEFAULT_SLOTS;
		     slots > 2 &&
		     RING_PAGE + pr->slot_size * slots > p->max_bytes;
		     slots /= 2)
			;
	pr->ring_bytes = RING_PAGE + pr->slot_size * slots;
	if (pr->ring_bytes > p->max_bytes) {
		err = diag_set(d, LOADER_ETOOBIG,
			       "ring of %" PRIu32 " slots x %" PRIu64
			       " bytes exceeds the %" PRIu64
			       " %s (fewer slots or a smaller batch)",
			       slots, pr->slot_size, p->max_bytes,
			       p->max_bytes_why ? p->max_bytes_why :
						  "bytes allowed");
		goto fail;
	}
	/*
	 * No F_SEAL_FUTURE_WRITE: the client maps the slots writable, so
	 * that an in-place operation on a delivered tensor (a Python user's
	 * x.sub_(1)) works instead of killing the trainer with SIGSEGV. The
	 * memfd is this stream's alone, and nothing in it is read back.
	 */
	fd = make_memfd("loaderd-ring", pr->ring_bytes,
			F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &map, d);
	if (fd < 0) {
		err = fd;
		goto fail;
	}
	pr->ring_fd = fd;
	pr->hdr = map;
	fd = make_memfd("loaderd-cons", RING_PAGE,
			F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &map, d);
	if (fd < 0) {
		err = fd;
		goto fail;
	}
	pr->cons_fd = fd;
	pr->cons = map;
	pr->slots = slots;
	pr->noutputs = p->lay->noutputs;
	for (uint32_t i = 0; i < pr->noutputs; i++)
		pr->ndim[i] = p->lay->out[i].ndim;
	pr->ids_offset = ids;
	memcpy(pr->offsets, offsets, sizeof(pr->offsets));
	write_header(pr, p, slots, ids, offsets);
	*out = pr;
	return 0;
fail:
	producer_free(pr);
	return err;
}

const struct stream_sink *producer_sink(struct producer *pr)
{
	return &pr->sink;
}

void producer_reply(const struct producer *pr, struct proto_open_ok *ok,
		    int *ring_fd, int *cons_fd)
{
	ok->ring_bytes = pr->ring_bytes;
	ok->cons_bytes = RING_PAGE;
	*ring_fd = pr->ring_fd;
	*cons_fd = pr->cons_fd;
}

void producer_notice(struct producer *pr, const char *reason)
{
	ring_finish(pr, RING_FAILED, -ESHUTDOWN, reason);
}

uint64_t producer_client_waits(const struct producer *pr)
{
	return __atomic_load_n(&pr->client_waits, __ATOMIC_RELAXED);
}

void producer_ring(const struct producer *pr, uint32_t *slots, uint32_t *used,
		   uint64_t *bytes)
{
	uint32_t prod = __atomic_load_n(&pr->prod, __ATOMIC_RELAXED);
	uint32_t cons = __atomic_load_n(&pr->cons->cons, __ATOMIC_RELAXED);

	*slots = pr->slots;
	/* The client's index is untrusted: a reading, never more than all. */
	*used = ring_pending(prod, cons) <= pr->slots ?
			ring_pending(prod, cons) :
			pr->slots;
	*bytes = pr->ring_bytes;
}

uint64_t producer_released(struct producer *pr)
{
	/*
	 * The daemon's own producer index, never the header's copy: the
	 * client can write its mapping of the header, and a prod it chose
	 * would let a consumer index far past anything delivered pass the
	 * check below (a named stream would save that position).
	 */
	uint32_t prod = __atomic_load_n(&pr->prod, __ATOMIC_ACQUIRE);
	uint32_t cons = __atomic_load_n(&pr->cons->cons, __ATOMIC_ACQUIRE);
	uint32_t last = __atomic_load_n(&pr->released, __ATOMIC_RELAXED);

	/*
	 * The index is the client's to write: take it only if it moved
	 * forward from the last one taken and no further than what was
	 * published (32-bit indices: a stream of more than 2^32 batches
	 * counts its wraps).
	 */
	if ((int32_t)(cons - last) >= 0 && (int32_t)(prod - cons) >= 0 &&
	    prod - cons <= pr->slots) {
		pr->released_wraps += cons < last;
		__atomic_store_n(&pr->released, cons, __ATOMIC_RELAXED);
		last = cons;
	}
	return ((uint64_t)pr->released_wraps << 32) | last;
}

void producer_wait_release(struct producer *pr, uint32_t seen,
			   int64_t timeout_ns)
{
	/*
	 * The flag, then the index once more (both seq_cst), as the
	 * producer's own wait does: a release stored before the flag is
	 * seen here, one after it wakes us.
	 */
	__atomic_store_n(&pr->hdr->saver_waiting, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pr->cons->cons, __ATOMIC_SEQ_CST) == seen)
		futex_wait_shared(&pr->cons->cons, seen, timeout_ns);
	__atomic_store_n(&pr->hdr->saver_waiting, 0, __ATOMIC_SEQ_CST);
}

void producer_wake_saver(struct producer *pr)
{
	futex_wake_shared(&pr->cons->cons);
}

void producer_set_saved(struct producer *pr, uint64_t released)
{
	__atomic_store_n(&pr->hdr->saved, (uint32_t)released, __ATOMIC_RELEASE);
	futex_wake_shared(&pr->hdr->saved);
}

uint64_t producer_stall_ns(const struct producer *pr)
{
	return __atomic_load_n(&pr->stall_ns, __ATOMIC_RELAXED);
}

void producer_free(struct producer *pr)
{
	if (!pr)
		return;
	if (pr->hdr)
		munmap(pr->hdr, pr->ring_bytes);
	if (pr->cons)
		munmap(pr->cons, RING_PAGE);
	if (pr->ring_fd >= 0)
		close(pr->ring_fd);
	if (pr->cons_fd >= 0)
		close(pr->cons_fd);
	free(pr);
}
