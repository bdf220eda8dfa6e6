/*
 * stream.c - reader, assembler and decoders of one client stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>
/*
 * The kernel fills io_uring's read buffers behind memcheck's back; the
 * reader says when they are defined. Without valgrind's header (it comes
 * with valgrind, installed for the tests) that is a no-op.
 */
#if defined(__has_include)
/* cppcheck-suppress preprocessorErrorDirective ; it knows no __has_include */
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_DEFINED
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) ((void)0)
#endif

#include "codec.h"
#include "dataset.h"
#include "fdio.h"
#include "futex.h"
#include "imgpipe.h"
#include "ispec.h"
#include "loader.h"
#include "order.h"
#include "plog.h"
#include "pool.h"
#include "ring.h"
#include "schema.h"
#include "shard.h"
#include "stream.h"

#define STREAM_DEFAULT_BATCH	256
#define STREAM_DEFAULT_SLOTS	8
#define STREAM_DEFAULT_PREFETCH (64ull << 20)
#define STREAM_MAX_BATCH	65536
#define STREAM_MAX_SLOTS	1024
#define STREAM_QD		64 /* io_uring queue depth per reader */
#define STREAM_READ_AHEAD	8  /* batches the reader may run ahead */
/* O_DIRECT reads are whole blocks at block offsets into aligned memory. */
#define STREAM_DIRECT_ALIGN 4096
/* Records closer than this are read as one extent: one I/O beats two. */
#define STREAM_MERGE_GAP 4096
/* How often a waiting thread looks at the stop flag. */
#define STREAM_POLL_NS (50 * 1000 * 1000)
/* Bad samples a stream logs by name (skip policy); the rest are counted. */
#define STREAM_LOG_BAD_MAX 100

struct stream_out {
	uint32_t field;	       /* schema index */
	uint32_t cast;	       /* enum proto_cast */
	uint32_t dtype;	       /* of the output */
	uint64_t sample_bytes; /* output bytes per sample */
	uint64_t field_bytes;  /* unpacked field bytes per sample */
	uint64_t elems;	       /* elements per sample */
	uint32_t src_dtype;    /* the field's */
	uint32_t comp;	       /* the field's compression */
	uint64_t offset;       /* in a slot */
	bool image;	       /* a jpeg field through the image pipeline */
};

/* A sample's record, for sorting a batch's reads by position. */
struct stream_ref {
	uint32_t shard;
	uint32_t k; /* position in the batch */
	uint64_t off;
	uint32_t len;
};

/* One read: refs [first, last) of a shard, [off, end) of its file. */
struct stream_ext {
	uint32_t shard;
	uint32_t first, last;
	uint64_t off, end;
};

/* One batch read ahead: where each sample's record sits in the arena. */
struct stream_pb {
	uint32_t epoch;
	uint32_t count;
	uint64_t batch;
	uint64_t arena_end; /* arena position freed after this batch */
	const unsigned char **rec;
	uint32_t *len;
	uint64_t *gidx;
	uint32_t *shard;
	uint64_t *ridx;
	bool last; /* no batch follows */
	int err;
	char msg[DIAG_MAX];
};

struct stream {
	struct proto_open o;
	char label[128];
	struct dataset *ds;
	int *fds;
	uint32_t nfds;
	struct shard **sh;
	struct order *order;
	struct pool *pool;
	uint32_t nworkers; /* pool threads + the assembler */
	uint32_t batch_size;
	uint64_t batches_per_epoch;

	uint32_t nout;
	struct stream_out out[PROTO_MAX_OUTPUTS];
	uint64_t max_field; /* largest unpacked field: scratch size */

	int ring_fd, cons_fd;
	struct ring_hdr *hdr;
	struct ring_cons *cons;
	size_t ring_bytes;
	uint64_t slot_size;
	uint32_t prod, last_cons;

	struct codec_ctx **codec; /* per worker */
	unsigned char **scratch;  /* per worker, max_field bytes */
	struct imgpipe *pipe;	  /* NULL: no image pipeline */
	struct imgpipe_ws **ws;	  /* per worker, with pipe */
	uint8_t *bad;		  /* per sample of the batch being made */
	/* Bad samples logged so far (skip policy), under bad_lock. */
	pthread_mutex_t bad_lock;
	uint32_t nlogged;
	uint64_t logged[STREAM_LOG_BAD_MAX];

	unsigned char *arena;
	uint64_t arena_size, arena_head, arena_tail; /* positions grow */
	struct stream_pb *pb;
	uint32_t npb;
	uint64_t pb_prod, pb_cons;
	struct stream_ref *refs; /* reader scratch, batch_size entries */
	struct stream_ext *ext;	 /* reader scratch, batch_size entries */
	bool direct;		 /* shards read with O_DIRECT */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop, started;
	pthread_t reader, assembler;

	/* counters, updated with atomics */
	uint64_t n_batches, n_samples, n_read, n_bad, stall_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static bool stopping(struct stream *s)
{
	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------ set-up */

static int check_open(const struct proto_open *o, struct diag *d)
{
	if (o->batch_size > STREAM_MAX_BATCH)
		return diag_set(d, LOADER_EUSAGE,
				"batch size %" PRIu32 " above %d",
				o->batch_size, STREAM_MAX_BATCH);
	if (o->order > ORDER_QUASI)
		return diag_set(d, LOADER_EUSAGE, "unknown order %" PRIu32,
				o->order);
	if (o->world > 65536 || o->rank >= (o->world ? o->world : 1))
		return diag_set(d, LOADER_EUSAGE,
				"rank %" PRIu32 " of world %" PRIu32
				" (need rank < world <= 65536)",
				o->rank, o->world);
	if (o->flags & ~PROTO_OPEN_DIRECT || o->reserved || o->reserved2)
		return diag_set(d, LOADER_EUSAGE, "unknown flags %#" PRIx32,
				o->flags);
	if (o->drop_last > 1)
		return diag_set(d, LOADER_EUSAGE, "drop_last is 0 or 1");
	if (o->on_bad > PROTO_BAD_SKIP)
		return diag_set(d, LOADER_EUSAGE,
				"bad sample policy %" PRIu32
				" (0 fail, 1 skip)",
				o->on_bad);
	if (!memchr(o->pipeline, '\0', sizeof(o->pipeline)))
		return diag_set(d, LOADER_EPROTO, "pipeline not terminated");
	/*
	 * A power of two, so that the free-running 32-bit indices map to
	 * the same slot on both sides of their wrap.
	 */
	if (o->ring_slots == 1 || o->ring_slots > STREAM_MAX_SLOTS ||
	    (o->ring_slots & (o->ring_slots - 1)))
		return diag_set(d, LOADER_EUSAGE,
				"ring slots %" PRIu32
				" must be a power of two in 2..%d",
				o->ring_slots, STREAM_MAX_SLOTS);
	if (o->noutputs > PROTO_MAX_OUTPUTS)
		return diag_set(d, LOADER_EUSAGE,
				"%" PRIu32 " outputs, at most %d", o->noutputs,
				PROTO_MAX_OUTPUTS);
	if (o->epochs > 0 && (uint64_t)o->start_epoch + o->epochs > UINT32_MAX)
		return diag_set(d, LOADER_EUSAGE, "epochs out of range");
	return 0;
}

static int add_output(struct stream *s, const char *name, uint32_t cast,
		      struct diag *d)
{
	const struct schema *sc = &s->ds->schema;
	int k = schema_find(sc, name);
	const struct field *f;
	struct stream_out *o = &s->out[s->nout];
	uint64_t n;

	if (k < 0)
		return diag_set(d, LOADER_EUSAGE,
				"output %s: no such field in the dataset",
				name);
	f = &sc->f[k];
	for (uint32_t i = 0; i < s->nout; i++)
		if (s->out[i].field == (uint32_t)k)
			return diag_set(d, LOADER_EUSAGE,
					"output %s named twice", name);
	if (f->kind == FIELD_JPEG) {
		const struct ispec *sp;

		if (!s->pipe)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: a jpeg field needs an image pipeline (e.g. \"decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw\")",
				name);
		if (cast != PROTO_CAST_NONE)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: a jpeg field takes no cast; the pipeline sets its type",
				name);
		sp = imgpipe_spec(s->pipe);
		/* jpeg fields are stored as they are: nothing to unpack */
		o->field = (uint32_t)k;
		o->image = true;
		o->dtype = sp->dtype;
		o->sample_bytes = ispec_out_bytes(sp);
		s->nout++;
		return 0;
	}
	if (f->kind != FIELD_TENSOR)
		return diag_set(
			d, LOADER_EUSAGE,
			"output %s: bytes fields have no decoder; only tensor and jpeg fields are delivered",
			name);
	n = field_fixed_size(f) / dtype_size(f->dtype);
	o->field = (uint32_t)k;
	o->cast = cast;
	switch (cast) {
	case PROTO_CAST_NONE: o->dtype = f->dtype; break;
	case PROTO_CAST_F32_UNIT:
		if (f->dtype != DT_U8)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: \"unit\" needs a u8 field, it is %s",
				name, dtype_name(f->dtype));
		o->dtype = DT_F32;
		break;
	case PROTO_CAST_F32:
		if (f->dtype == DT_F16 || f->dtype == DT_F64)
			return diag_set(
				d, LOADER_EUSAGE,
				"output %s: \"f32\" casts integer fields, it is %s",
				name, dtype_name(f->dtype));
		o->dtype = DT_F32;
		break;
	default:
		return diag_set(d, LOADER_EUSAGE,
				"output %s: unknown cast %" PRIu32, name, cast);
	}
	o->sample_bytes = n * dtype_size(o->dtype);
	o->field_bytes = field_fixed_size(f);
	o->elems = n;
	o->src_dtype = f->dtype;
	o->comp = f->comp;
	if (field_fixed_size(f) > s->max_field)
		s->max_field = field_fixed_size(f);
	s->nout++;
	return 0;
}

/* The image pipeline, when the client gave one. */
static int setup_pipeline(struct stream *s, uint64_t max_pixels, struct diag *d)
{
	struct ispec sp;
	char text[ISPEC_TEXT_MAX];
	int err;

	if (!s->o.pipeline[0])
		return 0;
	err = ispec_parse(&sp, s->o.pipeline, d);
	if (err)
		return diag_wrap(d, err, "pipeline");
	err = imgpipe_new(&s->pipe, &sp, max_pixels, d);
	if (err)
		return err;
	ispec_format(&sp, text, sizeof(text));
	plog(PLOG_INFO, "%s: pipeline \"%s\", bad samples: %s", s->label, text,
	     s->o.on_bad == PROTO_BAD_SKIP ? "skip" : "fail");
	return 0;
}

static int setup_outputs(struct stream *s, struct diag *d)
{
	const struct proto_open *o = &s->o;
	int err;

	if (o->noutputs == 0) {
		for (uint32_t k = 0; k < s->ds->schema.nfields; k++) {
			err = add_output(s, s->ds->schema.f[k].name,
					 PROTO_CAST_NONE, d);
			if (err)
				return err;
		}
		return 0;
	}
	for (uint32_t i = 0; i < o->noutputs; i++) {
		char name[PROTO_NAME_MAX];

		if (!memchr(o->out[i].field, '\0', PROTO_NAME_MAX))
			return diag_set(
				d, LOADER_EPROTO,
				"output %" PRIu32 ": name not terminated", i);
		memcpy(name, o->out[i].field, PROTO_NAME_MAX);
		err = add_output(s, name, o->out[i].cast, d);
		if (err)
			return err;
	}
	return 0;
}

static int make_memfd(const char *name, size_t size, unsigned seals, void **map,
		      struct diag *d)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return diag_set(d, -errno, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)size)) {
		int err = -errno;

		close(fd);
		return diag_set(d, err, "ring of %zu bytes: %s", size,
				strerror(-err));
	}
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		int err = -errno;

		close(fd);
		return diag_set(d, err, "mmap ring: %s", strerror(-err));
	}
	/*
	 * Sealed after our own writable mapping exists: the client cannot
	 * resize the file, and (ring) cannot map it writable.
	 */
	if (fcntl(fd, F_ADD_SEALS, seals)) {
		int err = -errno;

		munmap(*map, size);
		close(fd);
		return diag_set(d, err, "seal ring: %s", strerror(-err));
	}
	return fd;
}

static int setup_ring(struct stream *s, uint64_t max_bytes, struct diag *d)
{
	uint32_t slots = s->o.ring_slots;
	uint64_t pos = align_up(sizeof(struct ring_slot), RING_ALIGN);
	uint64_t ids = pos;
	struct ring_hdr *h;
	void *map;
	int fd;

	pos = align_up(pos + (uint64_t)s->batch_size * 8, RING_ALIGN);
	for (uint32_t i = 0; i < s->nout; i++) {
		s->out[i].offset = pos;
		pos = align_up(pos + s->out[i].sample_bytes * s->batch_size,
			       RING_ALIGN);
	}
	s->slot_size = align_up(pos, RING_PAGE);
	/*
	 * No slot count asked for: STREAM_DEFAULT_SLOTS, or fewer (down to
	 * 2) when large batches (images) would not fit the limit so.
	 */
	if (!slots)
		for (slots = STREAM_DEFAULT_SLOTS;
		     slots > 2 && RING_PAGE + s->slot_size * slots > max_bytes;
		     slots /= 2)
			;
	s->ring_bytes = RING_PAGE + s->slot_size * slots;
	if (s->ring_bytes > max_bytes)
		return diag_set(d, LOADER_ETOOBIG,
				"ring of %" PRIu32 " slots x %" PRIu64
				" bytes exceeds the limit of %" PRIu64
				" bytes (fewer slots or a smaller batch)",
				slots, s->slot_size, max_bytes);
	fd = make_memfd("loaderd-ring", s->ring_bytes,
			F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
				F_SEAL_SEAL,
			&map, d);
	if (fd < 0)
		return fd;
	s->ring_fd = fd;
	s->hdr = h = map;
	fd = make_memfd("loaderd-cons", RING_PAGE,
			F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, &map, d);
	if (fd < 0)
		return fd;
	s->cons_fd = fd;
	s->cons = map;

	h->magic = RING_MAGIC;
	h->version = RING_VERSION;
	h->slot_count = slots;
	h->noutputs = s->nout;
	h->slot_size = s->slot_size;
	h->slots_offset = RING_PAGE;
	h->total_bytes = s->ring_bytes;
	h->batch_size = s->batch_size;
	h->epochs = s->o.epochs;
	h->start_epoch = s->o.start_epoch;
	h->batches_per_epoch = s->batches_per_epoch;
	h->ids_offset = ids;
	for (uint32_t i = 0; i < s->nout; i++) {
		const struct field *f = &s->ds->schema.f[s->out[i].field];
		struct ring_output *ro = &h->out[i];

		snprintf(ro->name, sizeof(ro->name), "%s", f->name);
		ro->dtype = s->out[i].dtype;
		ro->shape[0] = s->batch_size;
		if (s->out[i].image) {
			uint32_t dims[3];

			ro->ndim = 1 +
				   ispec_out_shape(imgpipe_spec(s->pipe), dims);
			for (uint32_t k = 0; k < 3; k++)
				ro->shape[k + 1] = dims[k];
		} else {
			ro->ndim = 1 + f->ndim;
			for (uint32_t k = 0;
			     k < f->ndim && k + 1 < RING_MAX_DIMS; k++)
				ro->shape[k + 1] = f->dims[k];
		}
		ro->bytes = s->out[i].sample_bytes * s->batch_size;
		ro->offset = s->out[i].offset;
	}
	return 0;
}

static int setup_prefetch(struct stream *s, struct diag *d)
{
	uint32_t b = s->batch_size;

	s->arena_size = s->o.prefetch_bytes ? s->o.prefetch_bytes :
					      STREAM_DEFAULT_PREFETCH;
	if (s->arena_size > (64ull << 30))
		return diag_set(d, LOADER_EUSAGE,
				"prefetch budget above 64 GiB");
	/* Page-aligned: O_DIRECT reads land in it. */
	s->arena_size = align_up(s->arena_size, STREAM_DIRECT_ALIGN);
	if (posix_memalign((void **)&s->arena, STREAM_DIRECT_ALIGN,
			   s->arena_size))
		s->arena = NULL;
	/*
	 * How many batches the reader may run ahead, within the byte budget.
	 * Deep enough to keep storage busy, shallow enough that batches read
	 * from the page cache are still in the CPU cache when decoded.
	 */
	s->npb = STREAM_READ_AHEAD;
	s->pb = calloc(s->npb, sizeof(*s->pb));
	s->refs = calloc(b, sizeof(*s->refs));
	s->ext = calloc(b, sizeof(*s->ext));
	if (!s->arena || !s->pb || !s->refs || !s->ext)
		return diag_set(d, -ENOMEM, "prefetch of %" PRIu64 " bytes",
				s->arena_size);
	for (uint32_t i = 0; i < s->npb; i++) {
		struct stream_pb *p = &s->pb[i];

		p->rec = calloc(b, sizeof(*p->rec));
		p->len = calloc(b, sizeof(*p->len));
		p->gidx = calloc(b, sizeof(*p->gidx));
		p->shard = calloc(b, sizeof(*p->shard));
		p->ridx = calloc(b, sizeof(*p->ridx));
		if (!p->rec || !p->len || !p->gidx || !p->shard || !p->ridx)
			return -ENOMEM;
	}
	return 0;
}

static int setup_workers(struct stream *s)
{
	s->nworkers = pool_workers(s->pool) + 1;
	s->codec = calloc(s->nworkers, sizeof(*s->codec));
	s->scratch = calloc(s->nworkers, sizeof(*s->scratch));
	s->ws = calloc(s->nworkers, sizeof(*s->ws));
	s->bad = calloc(s->batch_size, 1);
	if (!s->codec || !s->scratch || !s->ws || !s->bad)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nworkers; i++) {
		if (codec_ctx_new(&s->codec[i], 0))
			return -ENOMEM;
		s->scratch[i] = malloc(s->max_field ? s->max_field : 1);
		if (!s->scratch[i])
			return -ENOMEM;
		if (s->pipe && imgpipe_ws_new(s->pipe, false, &s->ws[i]))
			return -ENOMEM;
	}
	return 0;
}

static int open_dataset(struct stream *s, const struct stream_params *p,
			struct diag *d)
{
	uint64_t *counts;
	struct order_params op;
	int err;

	if (p->nfds < 2)
		return diag_set(
			d, LOADER_EUSAGE,
			"a dataset needs its manifest and at least one shard");
	err = dataset_load_fd(&s->ds, s->fds[0], "manifest.json", d);
	if (err)
		return err;
	if (s->ds->nshards != p->nfds - 1)
		return diag_set(d, LOADER_EUSAGE,
				"manifest lists %" PRIu32
				" shards, client sent %" PRIu32,
				s->ds->nshards, p->nfds - 1);
	s->sh = calloc(s->ds->nshards, sizeof(*s->sh));
	counts = calloc(s->ds->nshards, sizeof(*counts));
	if (!s->sh || !counts) {
		free(counts);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->ds->nshards; i++) {
		err = shard_open(&s->sh[i], s->fds[i + 1],
				 s->ds->shards[i].file, d);
		if (!err)
			err = dataset_check_shard(s->ds, i, s->sh[i], d);
		if (err) {
			free(counts);
			return err;
		}
		counts[i] = shard_count(s->sh[i]);
		if (s->direct) {
			int fl = fcntl(s->fds[i + 1], F_GETFL);

			/* The client closed its copies: the flag is ours alone. */
			if (fl < 0 ||
			    fcntl(s->fds[i + 1], F_SETFL, fl | O_DIRECT)) {
				err = diag_set(d, -errno,
					       "%s: O_DIRECT not possible: %s",
					       s->ds->shards[i].file,
					       strerror(errno));
				free(counts);
				return err;
			}
		}
	}
	op = (struct order_params){
		.kind = (enum order_kind)s->o.order,
		.seed = s->o.seed,
		.rank = s->o.rank,
		.world = s->o.world ? s->o.world : 1,
		.batch_size = s->batch_size,
		.drop_last = s->o.drop_last,
		.nshards = s->ds->nshards,
		.shard_records = counts,
	};
	err = order_new(&s->order, &op, d);
	free(counts);
	if (err)
		return err;
	s->batches_per_epoch = order_batches(s->order);
	return 0;
}

void stream_free(struct stream *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		__atomic_store_n(&s->stop, true, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		if (s->cons)
			futex_wake_shared(&s->cons->cons);
		pthread_join(s->reader, NULL);
		pthread_join(s->assembler, NULL);
	}
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->bad_lock);
	for (uint32_t i = 0; s->codec && i < s->nworkers; i++)
		codec_ctx_free(s->codec[i]);
	for (uint32_t i = 0; s->scratch && i < s->nworkers; i++)
		free(s->scratch[i]);
	for (uint32_t i = 0; s->ws && i < s->nworkers; i++)
		imgpipe_ws_free(s->ws[i]);
	free(s->codec);
	free(s->scratch);
	free(s->ws);
	free(s->bad);
	imgpipe_free(s->pipe);
	for (uint32_t i = 0; s->pb && i < s->npb; i++) {
		free(s->pb[i].rec);
		free(s->pb[i].len);
		free(s->pb[i].gidx);
		free(s->pb[i].shard);
		free(s->pb[i].ridx);
	}
	free(s->pb);
	free(s->refs);
	free(s->ext);
	free(s->arena);
	if (s->hdr)
		munmap(s->hdr, s->ring_bytes);
	if (s->cons)
		munmap(s->cons, RING_PAGE);
	if (s->ring_fd >= 0)
		close(s->ring_fd);
	if (s->cons_fd >= 0)
		close(s->cons_fd);
	order_free(s->order);
	for (uint32_t i = 0; s->sh && s->ds && i < s->ds->nshards; i++)
		shard_close(s->sh[i]);
	free(s->sh);
	dataset_free(s->ds);
	for (uint32_t i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->fds);
	free(s);
}

int stream_new(struct stream **out, const struct stream_params *p,
	       struct diag *d)
{
	struct stream *s = calloc(1, sizeof(*s));
	int err;

	if (!s) {
		for (uint32_t i = 0; i < p->nfds; i++)
			close(p->fds[i]);
		return -ENOMEM;
	}
	s->ring_fd = s->cons_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->bad_lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->fds = malloc((p->nfds ? p->nfds : 1) * sizeof(int));
	if (!s->fds) {
		for (uint32_t i = 0; i < p->nfds; i++)
			close(p->fds[i]);
		free(s);
		return -ENOMEM;
	}
	memcpy(s->fds, p->fds, p->nfds * sizeof(int));
	s->nfds = p->nfds;
	s->o = *p->open;
	s->pool = p->pool;
	snprintf(s->label, sizeof(s->label), "%s", p->label ? p->label : "");
	s->direct = s->o.flags & PROTO_OPEN_DIRECT;
	s->batch_size =
		s->o.batch_size ? s->o.batch_size : STREAM_DEFAULT_BATCH;
	err = check_open(&s->o, d);
	if (!err)
		err = setup_pipeline(s, p->max_pixels, d);
	if (!err)
		err = open_dataset(s, p, d);
	if (!err)
		err = setup_outputs(s, d);
	if (!err)
		err = setup_ring(s, p->max_ring_bytes, d);
	if (!err)
		err = setup_prefetch(s, d);
	if (!err)
		err = setup_workers(s);
	if (err) {
		if (err == -ENOMEM && !d->msg[0])
			diag_set(d, err, "out of memory");
		stream_free(s);
		return err;
	}
	*out = s;
	return 0;
}

void stream_reply(const struct stream *s, struct proto_open_ok *ok,
		  int *ring_fd, int *cons_fd)
{
	memset(ok, 0, sizeof(*ok));
	ok->ring_bytes = s->ring_bytes;
	ok->cons_bytes = RING_PAGE;
	ok->batches_per_epoch = s->batches_per_epoch;
	ok->samples = order_size(s->order);
	*ring_fd = s->ring_fd;
	*cons_fd = s->cons_fd;
}

void stream_stats(const struct stream *s, struct proto_stats_ok *st)
{
	memset(st, 0, sizeof(*st));
	st->batches = __atomic_load_n(&s->n_batches, __ATOMIC_RELAXED);
	st->samples = __atomic_load_n(&s->n_samples, __ATOMIC_RELAXED);
	st->bytes_read = __atomic_load_n(&s->n_read, __ATOMIC_RELAXED);
	st->bad_samples = __atomic_load_n(&s->n_bad, __ATOMIC_RELAXED);
	st->stall_ns = __atomic_load_n(&s->stall_ns, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ reader */

static int cmp_ref(const void *a, const void *b)
{
	const struct stream_ref *x = a, *y = b;

	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Read [off, off+len) of fd into buf: io_uring if we have one, else pread. */
struct reader_io {
	struct io_uring ring;
	bool have_ring;
	bool registered; /* the arena is a registered buffer */
	bool fixed;	 /* the shards are registered files */
	unsigned inflight;
};

static int io_drain(struct reader_io *io, struct stream *s)
{
	int err = 0;

	while (io->inflight) {
		struct io_uring_cqe *cqe;
		int r = io_uring_wait_cqe(&io->ring, &cqe);

		if (r == -EINTR)
			continue;
		if (r < 0)
			return r;
		if (cqe->res < 0 && !err)
			err = cqe->res;
		else if (!err &&
			 (uint64_t)cqe->res != io_uring_cqe_get_data64(cqe))
			err = LOADER_ETRUNC;
		io_uring_cqe_seen(&io->ring, cqe);
		io->inflight--;
	}
	return err;
}

/*
 * Submit the reads queued. What the kernel does not take (io_uring_submit
 * failed, or took fewer) will never complete: it is no longer waited for,
 * and the error fails the batch; io_uring_queue_exit() drops the rest.
 */
static int io_submit(struct reader_io *io)
{
	unsigned queued = io_uring_sq_ready(&io->ring);
	int r = io_uring_submit(&io->ring);

	if (r >= 0 && (unsigned)r >= queued)
		return 0;
	io->inflight -= queued - (r > 0 ? (unsigned)r : 0);
	return r < 0 ? r : -EAGAIN;
}

static int io_read(struct reader_io *io, struct stream *s, uint32_t shard,
		   void *buf, uint64_t len, uint64_t want, uint64_t off)
{
	int fd = s->fds[shard + 1];
	struct io_uring_sqe *sqe;
	int err;

	if (!io->have_ring) {
		ssize_t r;

		if (!s->direct)
			return fdio_pread_all(fd, buf, len, off);
		/* O_DIRECT: one aligned read; the file's end may cut it. */
		r = pread(fd, buf, len, (off_t)off);
		if (r < 0)
			return -errno;
		return (uint64_t)r == want ? 0 : LOADER_ETRUNC;
	}
	if (len > (1u << 30))
		return LOADER_ETOOBIG;
	sqe = io_uring_get_sqe(&io->ring);
	if (!sqe) {
		err = io_submit(io);
		if (!err)
			err = io_drain(io, s);
		if (err)
			return err;
		sqe = io_uring_get_sqe(&io->ring);
		if (!sqe) /* not after a whole queue completed */
			return -EAGAIN;
	}
	/* Registered files spare the kernel a file lookup per read. */
	if (io->fixed)
		fd = (int)shard;
	if (io->registered)
		io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)len, off, 0);
	else
		io_uring_prep_read(sqe, fd, buf, (unsigned)len, off);
	if (io->fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	/* The expected length rides along to catch short reads. */
	io_uring_sqe_set_data64(sqe, want);
	io->inflight++;
	VALGRIND_MAKE_MEM_DEFINED(buf, want); /* the kernel fills it */
	return 0;
}

/*
 * Plan batch b of the current epoch into pb: locate every record, sort
 * by position, merge neighbours into extents, take arena space and read.
 */
static int read_batch(struct stream *s, struct reader_io *io,
		      struct stream_pb *pb, uint64_t b, struct diag *d)
{
	uint32_t n = order_batch_count(s->order, b), next = 0;
	uint64_t need = 0, start, pos;
	int err;

	pb->batch = b;
	pb->epoch = order_epoch(s->order);
	pb->count = n;
	for (uint32_t k = 0; k < n; k++) {
		struct shard_rec r;
		uint64_t g = order_sample(s->order, b, k);

		pb->gidx[k] = g;
		order_locate(s->order, g, &pb->shard[k], &pb->ridx[k]);
		shard_rec(s->sh[pb->shard[k]], pb->ridx[k], &r);
		pb->len[k] = r.length;
		s->refs[k] = (struct stream_ref){ pb->shard[k], k, r.offset,
						  r.length };
	}
	/* Sequential orders come sorted already: skip the sort then. */
	for (uint32_t k = 1; k < n; k++)
		if (cmp_ref(&s->refs[k - 1], &s->refs[k]) > 0) {
			qsort(s->refs, n, sizeof(*s->refs), cmp_ref);
			break;
		}
	/*
	 * Merge neighbours into extents (one read each); with O_DIRECT an
	 * extent is widened to whole blocks, and starts on a block in the
	 * arena too.
	 */
	for (uint32_t k = 0; k < n;) {
		const struct stream_ref *r = &s->refs[k];
		struct stream_ext *e = &s->ext[next];
		uint32_t j = k + 1;

		e->shard = r->shard;
		e->first = k;
		e->off = r->off;
		e->end = r->off + r->len;
		while (j < n && s->refs[j].shard == r->shard &&
		       s->refs[j].off <= e->end + STREAM_MERGE_GAP &&
		       s->refs[j].off >= e->off) {
			if (s->refs[j].off + s->refs[j].len > e->end)
				e->end = s->refs[j].off + s->refs[j].len;
			j++;
		}
		e->last = j;
		if (s->direct) {
			e->off -= e->off % STREAM_DIRECT_ALIGN;
			e->end = align_up(e->end, STREAM_DIRECT_ALIGN);
		}
		need += e->end - e->off + (s->direct ? STREAM_DIRECT_ALIGN : 0);
		next++;
		k = j;
	}
	if (need > s->arena_size)
		return diag_set(
			d, LOADER_ETOOBIG,
			"batch %" PRIu64 " needs %" PRIu64
			" bytes of reads, above the prefetch budget of %" PRIu64,
			b, need, s->arena_size);
	/* Take a contiguous region: skip the arena's tail end if needed. */
	pthread_mutex_lock(&s->lock);
	start = s->arena_head;
	if (start % s->arena_size + need > s->arena_size)
		start = align_up(start + 1, s->arena_size);
	while (!s->stop && start + need - s->arena_tail > s->arena_size)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	if (stopping(s))
		return -ECANCELED;
	pos = start;
	for (uint32_t x = 0; x < next; x++) {
		const struct stream_ext *e = &s->ext[x];
		uint64_t len = e->end - e->off, want = len;
		unsigned char *base;

		if (s->direct) {
			uint64_t size = shard_file_size(s->sh[e->shard]);

			pos = align_up(pos, STREAM_DIRECT_ALIGN);
			/* The last block of a file comes back short. */
			if (e->end > size)
				want = size - e->off;
		}
		base = s->arena + pos % s->arena_size;
		for (uint32_t m = e->first; m < e->last; m++)
			pb->rec[s->refs[m].k] =
				base + (s->refs[m].off - e->off);
		err = io_read(io, s, e->shard, base, len, want, e->off);
		if (err)
			goto fail;
		pos += len;
	}
	if (io->have_ring) {
		err = io_submit(io);
		if (!err)
			err = io_drain(io, s);
		if (err)
			goto fail;
	}
	__atomic_fetch_add(&s->n_read, pos - start, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->lock);
	s->arena_head = pos;
	pb->arena_end = pos;
	pthread_mutex_unlock(&s->lock);
	return 0;
fail:
	if (io->have_ring)
		io_drain(io, s);
	return diag_set(d, err, "batch %" PRIu64 ": read: %s", b,
			loader_strerror(err));
}

static struct stream_pb *next_free_pb(struct stream *s)
{
	struct stream_pb *pb = NULL;

	pthread_mutex_lock(&s->lock);
	while (!s->stop && s->pb_prod - s->pb_cons == s->npb)
		pthread_cond_wait(&s->cond, &s->lock);
	if (!s->stop)
		pb = &s->pb[s->pb_prod % s->npb];
	pthread_mutex_unlock(&s->lock);
	return pb;
}

static void post_pb(struct stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->pb_prod++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *reader_main(void *arg)
{
	struct stream *s = arg;
	struct reader_io io = { 0 };
	uint32_t e = s->o.start_epoch;
	struct stream_pb *pb;
	int r;

	r = io_uring_queue_init(STREAM_QD, &io.ring, 0);
	io.have_ring = r == 0;
	if (io.have_ring)
		io.fixed = io_uring_register_files(&io.ring, s->fds + 1,
						   s->ds->nshards) == 0;
	if (io.have_ring && s->direct) {
		struct iovec iov = { s->arena, s->arena_size };

		/*
		 * A registered arena spares pinning pages per O_DIRECT read
		 * (buffered reads gain little, and registering would fault
		 * in the whole arena). RLIMIT_MEMLOCK often forbids it for
		 * users: plain reads then.
		 */
		io.registered =
			io_uring_register_buffers(&io.ring, &iov, 1) == 0;
		plog(PLOG_DEBUG, "%s: arena of %" PRIu64 " bytes %sregistered",
		     s->label, s->arena_size, io.registered ? "" : "not ");
	}
	if (r)
		plog(PLOG_WARN,
		     "%s: io_uring unavailable (%s): reading with pread",
		     s->label, strerror(-r));
	for (; s->o.epochs == 0 || e < s->o.start_epoch + s->o.epochs; e++) {
		order_set_epoch(s->order, e);
		for (uint64_t b = 0; b < s->batches_per_epoch; b++) {
			struct diag d = { { 0 } };

			pb = next_free_pb(s);
			if (!pb)
				goto out;
			pb->last = false;
			pb->err = read_batch(s, &io, pb, b, &d);
			if (pb->err == -ECANCELED)
				goto out;
			if (pb->err)
				snprintf(pb->msg, sizeof(pb->msg),
					 "epoch %" PRIu32 " %s", e, d.msg);
			post_pb(s);
			if (pb->err)
				goto out;
		}
		if (s->batches_per_epoch == 0 && s->o.epochs == 0)
			break; /* nothing to loop over for ever */
	}
	pb = next_free_pb(s);
	if (pb) {
		pb->last = true;
		pb->err = 0;
		pb->count = 0;
		pthread_mutex_lock(&s->lock);
		pb->arena_end = s->arena_head;
		pthread_mutex_unlock(&s->lock);
		post_pb(s);
	}
out:
	if (io.have_ring)
		io_uring_queue_exit(&io.ring);
	return NULL;
}

/* ------------------------------------------------------------ decoding */

struct decode_job {
	struct stream *s;
	struct stream_pb *pb;
	unsigned char *slot;
	uint32_t nbad; /* samples marked in s->bad (skip policy) */
	int err;       /* first error; set once */
	char msg[DIAG_MAX];
};

/* dst is a 64-byte aligned output in a slot (RING_ALIGN). */
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

static void decode_one(void *arg, uint32_t i, uint32_t worker)
{
	struct decode_job *j = arg;
	struct stream *s = j->s;
	struct stream_pb *pb = j->pb;
	const struct shard *sh = s->sh[pb->shard[i]];
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct diag d;
	int err;

	((uint64_t *)(j->slot + s->hdr->ids_offset))[i] = pb->gidx[i];
	err = shard_parse_record(sh, pb->ridx[i], pb->rec[i], pb->len[i], f,
				 &d);
	if (err)
		goto fail;
	for (uint32_t k = 0; k < s->nout; k++) {
		const struct stream_out *o = &s->out[k];
		unsigned char *dst = j->slot + o->offset + i * o->sample_bytes;
		const unsigned char *src = f[o->field].data;
		size_t len;

		if (o->image) {
			err = imgpipe_run(
				s->pipe, s->ws[worker], src, f[o->field].len,
				order_seed_at(s->order, pb->epoch, pb->gidx[i]),
				dst, &d);
			if (err)
				goto fail;
			continue;
		}
		if (o->comp != COMP_NONE) {
			/* Straight into the slot when no cast follows. */
			unsigned char *to = o->cast == PROTO_CAST_NONE ?
						    dst :
						    s->scratch[worker];

			err = shard_unpack_field(sh, s->codec[worker], o->field,
						 &f[o->field], to,
						 o->field_bytes, &len, &d);
			if (err)
				goto fail;
			src = to;
			if (o->cast == PROTO_CAST_NONE)
				continue;
		}
		switch (o->cast) {
		case PROTO_CAST_NONE: memcpy(dst, src, o->sample_bytes); break;
		case PROTO_CAST_F32_UNIT: cast_unit(dst, src, o->elems); break;
		default: cast_f32(dst, src, o->src_dtype, o->elems); break;
		}
	}
	return;
fail:
	__atomic_fetch_add(&s->n_bad, 1, __ATOMIC_RELAXED);
	diag_wrap(&d, err, "sample %" PRIu64 " (shard %s, record %" PRIu64 ")",
		  pb->gidx[i], shard_name(sh), pb->ridx[i]);
	if (s->o.on_bad != PROTO_BAD_SKIP) {
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
	uint64_t *ids = (uint64_t *)(j->slot + s->hdr->ids_offset);
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
		for (uint32_t k = 0; k < s->nout; k++) {
			const struct stream_out *o = &s->out[k];
			unsigned char *base = j->slot + o->offset;

			memcpy(base + i * o->sample_bytes,
			       base + g * o->sample_bytes, o->sample_bytes);
		}
	}
out:
	memset(s->bad, 0, n);
	return err;
}

/* ------------------------------------------------------------ assembler */

static void ring_finish(struct stream *s, uint32_t state, int err,
			const char *reason)
{
	if (reason)
		snprintf(s->hdr->reason, sizeof(s->hdr->reason), "%s", reason);
	s->hdr->error = err;
	__atomic_store_n(&s->hdr->state, state, __ATOMIC_SEQ_CST);
	futex_wake_shared(&s->hdr->prod);
	if (state == RING_FAILED)
		plog(PLOG_ERR, "%s: stream failed: %s", s->label, reason);
	else
		plog(PLOG_INFO, "%s: stream delivered all its batches",
		     s->label);
}

/*
 * Wait until the slot for s->prod is free. The consumer index is the
 * client's: it must only move forward, and never past what we published.
 */
static int wait_slot(struct stream *s)
{
	uint32_t slots = s->hdr->slot_count;

	for (;;) {
		uint32_t c = __atomic_load_n(&s->cons->cons, __ATOMIC_ACQUIRE);
		uint64_t t0;

		if (!ring_cons_valid(s->prod, c, s->last_cons, slots)) {
			char why[160];

			snprintf(why, sizeof(why),
				 "consumer index %" PRIu32
				 " is invalid (published %" PRIu32
				 ", released %" PRIu32 " before)",
				 c, s->prod, s->last_cons);
			ring_finish(s, RING_FAILED, LOADER_EPROTO, why);
			return LOADER_EPROTO;
		}
		s->last_cons = c;
		if (ring_pending(s->prod, c) < slots)
			return 0;
		if (stopping(s))
			return -ECANCELED;
		__atomic_store_n(&s->hdr->daemon_waiting, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&s->cons->cons, __ATOMIC_SEQ_CST) == c) {
			t0 = now_ns();
			futex_wait_shared(&s->cons->cons, c, STREAM_POLL_NS);
			__atomic_fetch_add(&s->stall_ns, now_ns() - t0,
					   __ATOMIC_RELAXED);
		}
		__atomic_store_n(&s->hdr->daemon_waiting, 0, __ATOMIC_SEQ_CST);
	}
}

static void *assembler_main(void *arg)
{
	struct stream *s = arg;
	uint32_t threads = s->o.threads;

	for (;;) {
		struct stream_pb *pb;
		struct ring_slot *slot;
		struct decode_job job;

		pthread_mutex_lock(&s->lock);
		while (!s->stop && s->pb_cons == s->pb_prod)
			pthread_cond_wait(&s->cond, &s->lock);
		pthread_mutex_unlock(&s->lock);
		if (stopping(s))
			return NULL;
		pb = &s->pb[s->pb_cons % s->npb];
		if (pb->err) {
			ring_finish(s, RING_FAILED, pb->err, pb->msg);
			return NULL;
		}
		if (pb->last) {
			ring_finish(s, RING_END, 0, NULL);
			return NULL;
		}
		if (wait_slot(s))
			return NULL;
		slot = (struct ring_slot *)((unsigned char *)s->hdr +
					    RING_PAGE +
					    ring_slot_of(s->prod,
							 s->hdr->slot_count) *
						    s->slot_size);
		slot->seq = s->prod;
		slot->batch = pb->batch;
		slot->epoch = pb->epoch;
		slot->count = pb->count;
		job = (struct decode_job){ .s = s,
					   .pb = pb,
					   .slot = (unsigned char *)slot };
		pool_run(s->pool, decode_one, &job, pb->count, threads);
		if (!job.err && job.nbad)
			job.err = fill_bad(s, &job);
		if (job.err) {
			ring_finish(s, RING_FAILED, job.err, job.msg);
			return NULL;
		}
		s->prod++;
		__atomic_store_n(&s->hdr->prod, s->prod, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&s->cons->client_waiting, __ATOMIC_SEQ_CST))
			futex_wake_shared(&s->hdr->prod);
		__atomic_fetch_add(&s->n_batches, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->n_samples, pb->count, __ATOMIC_RELAXED);

		pthread_mutex_lock(&s->lock);
		s->arena_tail = pb->arena_end;
		s->pb_cons++;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
	}
}

int stream_start(struct stream *s, struct diag *d)
{
	int err = -pthread_create(&s->reader, NULL, reader_main, s);

	if (err)
		return diag_set(d, err, "reader thread: %s", strerror(-err));
	err = -pthread_create(&s->assembler, NULL, assembler_main, s);
	if (err) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->reader, NULL);
		return diag_set(d, err, "assembler thread: %s", strerror(-err));
	}
	s->started = true;
	return 0;
}
