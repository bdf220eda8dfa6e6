/*
 * reader.c - a stream's reader thread: plans each batch's reads from the
 * epoch's order and reads them with io_uring into the prefetch arena.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <liburing.h>
/*
 * The kernel fills io_uring's read buffers behind memcheck's back; the
 * reader says when they are defined. Built without valgrind (configure
 * looks for it; the tests install it) that is a no-op.
 */
#ifdef HAVE_VALGRIND
#include <valgrind/memcheck.h>
#else
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) ((void)0)
#endif

#include "dataset.h"
#include "fault.h"
#include "fdio.h"
#include "loader_error.h"
#include "nodecache.h"
#include "order.h"
#include "plog.h"
#include "s3fill.h"
#include "s3read.h"
#include "shard.h"
#include "stream_priv.h"

#define STREAM_QD 64 /* io_uring queue depth per reader */
/* Records closer than this are read as one extent: one I/O beats two. */
#define STREAM_MERGE_GAP 4096
/*
 * The quasi order with one read in flight (--io-depth 1: a disk that
 * seeks) reads records up to this far apart as one: a seek costs more
 * than reading over the gap (10 ms is about 1.5 MB at 150 MB/s), and a
 * batch's records lie within one window of W consecutive records. Not
 * for the random order, whose batches span the whole dataset: merged
 * there, each batch would read most of it. Merged extents are kept to
 * half the prefetch arena.
 */
#define STREAM_SEEK_GAP (1u << 20)

static int cmp_ref(const void *a, const void *b)
{
	const struct stream_ref *x = a, *y = b;

	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * Reads go through io_uring when we have one, else pread. Each extent's
 * read carries the extent's index: a read that comes back short is sent
 * again for the rest (the kernel may cut a read at any point), one that
 * fails marks its extent, and the batch goes on with the others.
 */
struct reader_io {
	struct io_uring ring;
	bool have_ring;
	bool registered; /* the arena is a registered buffer */
	bool fixed;	 /* the shards are registered files */
	unsigned inflight;
	unsigned depth; /* the most reads in flight (stream_config.io_depth) */
};

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

/* Read extent x with pread, to its end or the first error. */
static void io_pread(struct stream *s, struct stream_ext *e)
{
	int fd = s->fds[e->shard + 1];

	while (e->done < e->want) {
		uint64_t len = e->end - e->off - e->done;
		int64_t f = fault_read(fd, e->off + e->done, len);
		ssize_t r;

		if (f < 0) {
			e->err = (int)f;
			return;
		}
		if (f > 0)
			len = (uint64_t)f;
		r = pread(fd, e->buf + e->done, len, (off_t)(e->off + e->done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			e->err = r < 0 ? -errno : LOADER_ETRUNC;
			return;
		}
		e->done += (uint64_t)r;
	}
}

static int io_reap(struct reader_io *io, struct stream *s);

/*
 * Queue the read of what extent x still lacks, once fewer than depth
 * reads are in flight. Returns 0, or the error of a ring that no longer
 * takes reads (which fails the batch).
 */
static int io_queue(struct reader_io *io, struct stream *s, uint32_t x)
{
	struct stream_ext *e = &s->ext[x];
	int fd = s->fds[e->shard + 1];
	uint64_t len = e->end - e->off - e->done;
	struct io_uring_sqe *sqe;
	int64_t f;

	if (!io->have_ring) {
		io_pread(s, e);
		return 0;
	}
	if (len > (1u << 30)) {
		e->err = LOADER_ETOOBIG;
		return 0;
	}
	f = fault_read(fd, e->off + e->done, len);
	if (f < 0) {
		e->err = (int)f;
		return 0;
	}
	if (f > 0)
		len = (uint64_t)f;
	while (io->inflight >= io->depth) {
		int err = io_reap(io, s);

		if (err)
			return err;
	}
	sqe = io_uring_get_sqe(&io->ring);
	if (!sqe) {
		int err = io_submit(io);

		if (err)
			return err;
		sqe = io_uring_get_sqe(&io->ring);
		if (!sqe) /* not with the queue just submitted */
			return -EAGAIN;
	}
	/* Registered files spare the kernel a file lookup per read. */
	if (io->fixed)
		fd = (int)e->shard;
	if (io->registered)
		io_uring_prep_read_fixed(sqe, fd, e->buf + e->done,
					 (unsigned)len, e->off + e->done, 0);
	else
		io_uring_prep_read(sqe, fd, e->buf + e->done, (unsigned)len,
				   e->off + e->done);
	if (io->fixed)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, x);
	io->inflight++;
	/* The kernel fills it. */
	VALGRIND_MAKE_MEM_DEFINED(e->buf + e->done, len);
	return 0;
}

/*
 * Wait for one read (submitting what is queued first) and take it: a
 * read that came back short is sent again for the rest, one that failed
 * marks its extent. Returns 0, or the error of the ring itself.
 */
static int io_reap(struct reader_io *io, struct stream *s)
{
	struct io_uring_cqe *cqe;
	struct stream_ext *e;
	uint32_t x;
	int r, res;

	if (io_uring_sq_ready(&io->ring)) {
		r = io_submit(io);
		if (r)
			return r;
		if (!io->inflight)
			return 0;
	}
	do
		r = io_uring_wait_cqe(&io->ring, &cqe);
	while (r == -EINTR);
	if (r < 0)
		return r;
	x = (uint32_t)io_uring_cqe_get_data64(cqe);
	res = cqe->res;
	io_uring_cqe_seen(&io->ring, cqe);
	io->inflight--;
	e = &s->ext[x];
	if (res == -EINTR || res == -EAGAIN) {
		res = 0; /* nothing read: ask again */
	} else if (res < 0) {
		e->err = res;
		return 0;
	} else if (res == 0) {
		e->err = LOADER_ETRUNC; /* the file ends early */
		return 0;
	}
	e->done += (uint64_t)res;
	if (e->done >= e->want)
		return 0;
	/*
	 * O_DIRECT reads go on only from a block boundary; a cut anywhere
	 * else is the file's end.
	 */
	if (s->c.direct && e->done % STREAM_DIRECT_ALIGN) {
		e->err = LOADER_ETRUNC;
		return 0;
	}
	return io_queue(io, s, x);
}

/* Wait for every read queued. */
static int io_drain(struct reader_io *io, struct stream *s)
{
	while (io->inflight || io_uring_sq_ready(&io->ring)) {
		int err = io_reap(io, s);

		if (err)
			return err;
	}
	return 0;
}

/*
 * A merged extent that failed loses only the records that fail alone:
 * read each record of it again by itself (a bad block takes the records
 * on it, not its neighbours). With O_DIRECT the records are not aligned
 * and the whole extent stays failed.
 */
static void retry_records(struct stream *s, struct stream_pb *pb,
			  const struct stream_ext *e)
{
	int fd = s->fds[e->shard + 1];

	for (uint32_t m = e->first; m < e->last; m++) {
		const struct stream_ref *r = &s->refs[m];
		unsigned char *buf = e->buf + (r->off - e->off);
		int64_t f = fault_read(fd, r->off, r->len);
		int err = f < 0 ? (int)f :
				  fdio_pread_all(fd, buf, r->len, r->off);

		pb->rerr[r->k] = err;
	}
}

/* Sample k of batch b: its global index, shard and record, into pb. */
static void locate(struct stream *s, struct stream_pb *pb, uint64_t b,
		   uint32_t k)
{
	pb->gidx[k] = order_sample(s->order, b, k);
	order_locate(s->order, pb->gidx[k], &pb->shard[k], &pb->ridx[k]);
}

/*
 * A contiguous region of need bytes of the arena at *start (skipping its
 * tail end if the region would wrap), once the assembler has freed it.
 * When no batch is pending, the assembler holds no byte of the arena and
 * the region starts at the next wrap: counting the skipped tail end as
 * held would leave a region above half the arena waiting forever once
 * the head stopped below need (a short last batch, records of other
 * sizes). Returns 0, or -ECANCELED when the stream stops meanwhile.
 */
static int arena_take(struct stream *s, uint64_t need, uint64_t *start)
{
	pthread_mutex_lock(&s->lock);
	for (;;) {
		*start = s->arena_head;
		if (*start % s->arena_size + need > s->arena_size)
			*start = align_up(*start + 1, s->arena_size);
		if (s->pb_cons == s->pb_prod)
			s->arena_tail = *start; /* the assembler's, but idle */
		if (s->stop || *start + need - s->arena_tail <= s->arena_size)
			break;
		s->reader_waits = true;
		pthread_cond_wait(&s->cond, &s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return stream_stopping(s) ? -ECANCELED : 0;
}

/*
 * The extents of shards read in place (s->rq[0..nq), in extent order
 * among extents 0..next-1), from the store: each extent's outcome into
 * it. The first failure of the stream is logged, naming the object; the
 * records' errors go to the bad-sample policy as any read's.
 */
static void read_in_place(struct stream *s, uint32_t nq, uint32_t next)
{
	struct diag d = { "" };
	int err = s3read_get(s->c.s3read, s->rq, nq, &d);

	for (uint32_t x = 0, k = 0; x < next && k < nq; x++) {
		struct stream_ext *e = &s->ext[x];

		if (!s3read_has(s->c.s3read, e->shard))
			continue;
		e->err = s->rq[k].err;
		e->done = e->err ? 0 : e->want;
		k++;
	}
	/* Cancelled: the stream is stopping, which is no failure to tell. */
	if (err && err != -ECANCELED && !s->s3read_told) {
		s->s3read_told = true;
		plog(PLOG_WARN, "%s: reading in place: %s", s->label, d.msg);
	}
}

/*
 * An extent of a shard still arriving (s3fill.h): wait for its bytes.
 * Returns 0 when they came, else sets the extent's error (the records'
 * go to the bad-sample policy) and returns it. The stream's first shard
 * that will not come is logged.
 */
static int await(struct stream *s, struct stream_ext *e)
{
	struct diag d = { "" };
	int err = s3fill_wait(s->c.s3fill, e->shard, e->off, e->off + e->want,
			      &s->stop, &d);

	if (!err)
		return 0;
	e->err = err;
	e->done = 0;
	if (err != -ECANCELED && !s->s3fill_told) {
		s->s3fill_told = true;
		plog(PLOG_WARN, "%s: a shard did not arrive: %s", s->label,
		     d.msg);
	}
	return err;
}

/*
 * Read extents 0..next-1 into the arena from position *pos on (moved past
 * them): each one placed (block-aligned with O_DIRECT), its records'
 * places set in pb (if not NULL), queued, and all of them waited for.
 * Returns 0 or the error of the reads as a whole; an extent's own
 * failure is in its err.
 */
static int read_extents(struct stream *s, struct reader_io *io, uint32_t next,
			uint64_t *pos, struct stream_pb *pb)
{
	uint32_t nq = 0;
	int err = 0;

	for (uint32_t x = 0; x < next && !err; x++) {
		struct stream_ext *e = &s->ext[x];
		uint64_t len = e->end - e->off;

		e->want = len;
		if (s->c.direct) {
			uint64_t size = shard_file_size(s->sh[e->shard]);

			*pos = align_up(*pos, STREAM_DIRECT_ALIGN);
			/* The last block of a file comes back short. */
			if (e->end > size)
				e->want = size - e->off;
		}
		e->buf = s->arena + *pos % s->arena_size;
		e->done = 0;
		e->err = 0;
		for (uint32_t m = e->first; pb && m < e->last; m++)
			pb->rec[s->refs[m].k] =
				e->buf + (s->refs[m].off - e->off);
		*pos += len;
		if (s3fill_has(s->c.s3fill, e->shard) && await(s, e))
			continue;
		if (s3read_has(s->c.s3read, e->shard))
			s->rq[nq++] = (struct s3read_range){ .shard = e->shard,
							     .off = e->off,
							     .len = e->want,
							     .buf = e->buf };
		else
			err = io_queue(io, s, x);
	}
	if (io->have_ring && !err)
		err = io_submit(io);
	/* The store's reads run while the kernel does the local ones. */
	if (nq && !err)
		read_in_place(s, nq, next);
	if (io->have_ring) {
		int r = io_drain(io, s);

		if (!err)
			err = r;
	}
	return err;
}

/*
 * The quasi order reads whole windows: W consecutive records in block
 * order (order.h), of which each batch takes a random B. Read batch by
 * batch, their records lie so far apart that one read at a time seeks
 * for each, and merged into extents every batch reads most of the
 * window again (W / B times as much as it uses). Instead the window's
 * runs of records are read once, sequentially, into one region of the
 * arena, and every batch of the window is served from it: the first
 * batch's arena_end frees what lies before the region (the previous
 * window's, whose batches all came first), later ones free nothing.
 *
 * pb's batch, epoch and count are set by the caller. Returns 0 with pb
 * filled, 1 when the window cannot be read so (too
 * large for a quarter of the arena, too many runs, a read that failed:
 * the batch is then read as any other, which handles errors record by
 * record), or a negative code that fails the batch.
 */
static int window_batch(struct stream *s, struct reader_io *io,
			struct stream_pb *pb, uint64_t b, struct diag *d)
{
	struct order_run runs[STREAM_WIN_RUNS];
	uint32_t max = s->lay.batch_size < STREAM_WIN_RUNS ? s->lay.batch_size :
							     STREAM_WIN_RUNS;
	uint32_t epoch = order_epoch(s->order), nr;
	uint64_t id, need = 0, start, pos;
	int err = 0;

	nr = order_window(s->order, b, runs, max, &id);
	if (!nr)
		return 1;
	if (!s->win_held || s->win_epoch != epoch || s->win_id != id) {
		s->win_held = false;
		for (uint32_t x = 0; x < nr; x++) {
			struct shard_rec r0, r1;
			struct stream_ext *e = &s->ext[x];

			shard_rec(s->sh[runs[x].shard], runs[x].first, &r0);
			shard_rec(s->sh[runs[x].shard],
				  runs[x].first + runs[x].count - 1, &r1);
			*e = (struct stream_ext){ .shard = runs[x].shard,
						  .off = r0.offset,
						  .end = r1.offset +
							 r1.length };
			if (e->end < e->off)
				return 1; /* records not in file order */
			if (s->c.direct) {
				e->off -= e->off % STREAM_DIRECT_ALIGN;
				e->end = align_up(e->end, STREAM_DIRECT_ALIGN);
			}
			need += e->end - e->off +
				(s->c.direct ? STREAM_DIRECT_ALIGN : 0);
		}
		if (need > s->arena_size / 4)
			return 1;
		err = arena_take(s, need, &start);
		if (err)
			return err;
		pos = start;
		err = read_extents(s, io, nr, &pos, NULL);
		for (uint32_t x = 0; x < nr; x++) {
			s->win_buf[x] = s->ext[x].buf;
			s->win_off[x] = s->ext[x].off;
			s->win_run[x] = runs[x];
		}
		if (err)
			return diag_set(d, err, "batch %" PRIu64 ": read: %s",
					b, loader_strerror(err));
		for (uint32_t x = 0; x < nr; x++)
			if (s->ext[x].err)
				return 1;
		__atomic_fetch_add(&s->n.bytes_read, pos - start,
				   __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->n.reads, nr, __ATOMIC_RELAXED);
		s->win_held = true;
		s->win_epoch = epoch;
		s->win_id = id;
		s->win_start = start;
		s->win_nruns = nr;
		pthread_mutex_lock(&s->lock);
		s->arena_head = pos;
		pthread_mutex_unlock(&s->lock);
	}
	for (uint32_t k = 0; k < pb->count; k++) {
		struct shard_rec r;
		uint32_t x;

		locate(s, pb, b, k);
		for (x = 0; x < s->win_nruns; x++)
			if (s->win_run[x].shard == pb->shard[k] &&
			    pb->ridx[k] - s->win_run[x].first <
				    s->win_run[x].count)
				break;
		if (x == s->win_nruns)
			return diag_set(d, LOADER_ERANGE,
					"batch %" PRIu64 ": sample %" PRIu64
					" outside its window",
					b, pb->gidx[k]);
		shard_rec(s->sh[pb->shard[k]], pb->ridx[k], &r);
		pb->rec[k] = s->win_buf[x] + (r.offset - s->win_off[x]);
		pb->len[k] = r.length;
		pb->rerr[k] = 0;
		pb->cached[k] = false;
	}
	pb->arena_end = s->win_start; /* the reader's own: no lock */
	return 0;
}

/* The order whose batches the reader walks: a mixture's, for a member. */
static struct order *walk_order(const struct stream *s)
{
	return s->seq ? s->seq : s->order;
}

/*
 * Select epoch e of the orders the reader walks (a member's of the
 * counts that epoch has: stream_priv.h, seqs).
 */
static void select_epoch(struct stream *s, uint32_t e)
{
	if (s->seqs[1]) {
		int k = e >= s->later_from;

		s->seq = s->seqs[k];
		s->vmix = s->vmixes[k];
	}
	order_set_epoch(walk_order(s), e);
	if (s->vmix)
		mixture_set_epoch(s->vmix, e);
}

/*
 * Batch b of the selected epoch into pb: its count and repeats. A
 * mixture's member takes its own of the mixture's batch: their indexes
 * in the member (gidx), their places in the batch and their seeds, which
 * come from their places in the mixture's epoch (stream_priv.h).
 */
static void batch_samples(struct stream *s, struct stream_pb *pb, uint64_t b)
{
	uint32_t n, got = 0;

	if (!s->seq) {
		pb->count = order_batch_count(s->order, b);
		pb->repeats = order_repeats(s->order, b);
		return;
	}
	n = order_batch_count(s->seq, b);
	pb->repeats = order_repeats(s->seq, b);
	order_batch(s->seq, b, n, s->vbuf);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t m;
		uint64_t idx;

		mixture_map(s->vmix, s->vbuf[k], &m, &idx);
		if (m != s->member_no)
			continue;
		pb->gidx[got] = idx;
		pb->pos[got] = k;
		pb->sseed[got] = order_seed_at(s->seq, pb->epoch, s->vbuf[k]);
		got++;
	}
	pb->count = got;
}

/*
 * Locate batch b's pb->count records, and take those the node cache holds
 * where they lie; the others are listed in s->refs, to be read. Returns
 * their number.
 */
static uint32_t lookup_batch(struct stream *s, struct stream_pb *pb, uint64_t b)
{
	uint32_t n = pb->count, nr = 0;

	/*
	 * A first pass locates every record and asks for its cache entry,
	 * so that the misses of a random batch overlap instead of coming one
	 * after another.
	 */
	if (!s->seq) /* a member's are in pb already (batch_samples()) */
		order_batch(s->order, b, n, pb->gidx);
	for (uint32_t k = 0; k < n; k++) {
		order_locate(s->order, pb->gidx[k], &pb->shard[k],
			     &pb->ridx[k]);
		nodecache_prefetch(s->cset, pb->shard[k], pb->ridx[k]);
	}
	for (uint32_t k = 0; k < n; k++) {
		struct shard_rec r;

		pb->rerr[k] = 0;
		/* Cached (and checked): served where it lies, nothing read. */
		pb->rec[k] = nodecache_get(s->cset, pb->shard[k], pb->ridx[k],
					   &pb->len[k]);
		pb->cached[k] = pb->rec[k] != NULL;
		if (pb->cached[k])
			continue;
		shard_rec(s->sh[pb->shard[k]], pb->ridx[k], &r);
		pb->len[k] = r.length;
		s->refs[nr++] = (struct stream_ref){ pb->shard[k], k, r.offset,
						     r.length };
	}
	if (s->cset) {
		nodecache_count(s->cset, n - nr, nr);
		__atomic_fetch_add(&s->n.cache_hits, n - nr, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->n.cache_misses, nr, __ATOMIC_RELAXED);
	}
	return nr;
}

/*
 * Plan batch b of the current epoch into pb: locate every record, sort
 * by position, merge neighbours into extents, take arena space and read.
 * A read that fails marks its records in pb->rerr (the assembler applies
 * the bad-sample policy); only a failure of the reader itself fails the
 * batch.
 */
static int read_batch(struct stream *s, struct reader_io *io,
		      struct stream_pb *pb, uint64_t b, struct diag *d)
{
	uint32_t n, next = 0, nr = 0;
	uint64_t gap = io->depth == 1 && s->c.order == ORDER_QUASI ?
			       STREAM_SEEK_GAP :
			       STREAM_MERGE_GAP;
	uint64_t need = 0, start, pos;
	int err = 0;

	pb->batch = b;
	pb->epoch = order_epoch(walk_order(s));
	batch_samples(s, pb, b);
	/*
	 * The quasi order, outside the node cache's way: whole windows. A
	 * rank of several uses 1/world of its window's records: reading all
	 * of it pays only on a device that seeks (io_depth 1).
	 */
	if (s->c.order == ORDER_QUASI && !s->cset && !s->c.lmdb && !s->seq &&
	    (s->c.world <= 1 || io->depth == 1)) {
		err = window_batch(s, io, pb, b, d);
		if (err != 1)
			return err;
		err = 0;
	}
	n = nr = lookup_batch(s, pb, b);
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
		       s->refs[j].off <= e->end + gap &&
		       s->refs[j].off >= e->off) {
			uint64_t end = s->refs[j].off + s->refs[j].len;

			if (end < e->end)
				end = e->end;
			/* Reading over a gap: only while the arena has room. */
			if (s->refs[j].off > e->end &&
			    need + (end - e->off) > s->arena_size / 2)
				break;
			e->end = end;
			j++;
		}
		e->last = j;
		if (s->c.direct) {
			e->off -= e->off % STREAM_DIRECT_ALIGN;
			e->end = align_up(e->end, STREAM_DIRECT_ALIGN);
		}
		need += e->end - e->off +
			(s->c.direct ? STREAM_DIRECT_ALIGN : 0);
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
	err = arena_take(s, need, &start);
	if (err)
		return err;
	pos = start;
	err = read_extents(s, io, next, &pos, pb);
	if (err)
		return diag_set(d, err, "batch %" PRIu64 ": read: %s", b,
				loader_strerror(err));
	for (uint32_t x = 0; x < next; x++) {
		const struct stream_ext *e = &s->ext[x];

		if (!e->err)
			continue;
		if (e->err == -EIO && !s->c.direct && e->last - e->first > 1 &&
		    !s3read_has(s->c.s3read, e->shard) &&
		    !s3fill_has(s->c.s3fill, e->shard)) {
			retry_records(s, pb, e);
			continue;
		}
		for (uint32_t m = e->first; m < e->last; m++)
			pb->rerr[s->refs[m].k] = e->err;
	}
	/*
	 * What was read whole and matches its checksum goes into the node
	 * cache while it has room, and is not checked again there.
	 */
	for (uint32_t m = 0; s->cset && !nodecache_full(s->cset) && m < n;
	     m++) {
		uint32_t k = s->refs[m].k;
		struct diag cd;

		if (pb->rerr[k] ||
		    shard_check_sum(s->sh[pb->shard[k]], pb->ridx[k],
				    pb->rec[k], pb->len[k], &cd))
			continue;
		if (!nodecache_put(s->cset, pb->shard[k], pb->ridx[k],
				   pb->rec[k], pb->len[k]))
			break;
		pb->cached[k] = true;
	}
	__atomic_fetch_add(&s->n.bytes_read, pos - start, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->n.reads, next, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->lock);
	s->arena_head = pos;
	pb->arena_end = pos;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static struct stream_pb *next_free_pb(struct stream *s)
{
	struct stream_pb *pb = NULL;

	pthread_mutex_lock(&s->lock);
	while (!s->stop && s->pb_prod - s->pb_cons == s->npb) {
		s->reader_waits = true;
		pthread_cond_wait(&s->cond, &s->lock);
	}
	if (!s->stop)
		pb = &s->pb[s->pb_prod % s->npb];
	pthread_mutex_unlock(&s->lock);
	return pb;
}

static void post_pb(struct stream *s)
{
	bool wake;

	pthread_mutex_lock(&s->lock);
	s->pb_prod++;
	wake = s->assembler_waits;
	s->assembler_waits = false;
	pthread_mutex_unlock(&s->lock);
	if (wake)
		pthread_cond_broadcast(&s->cond);
}

/*
 * The batch to make at (*e, *b), or after it: past the end of an epoch,
 * the next epoch's first batch (the order moved to that epoch). Returns
 * false once the stream's epochs are done. The reader's walk, and the
 * assembler's once it makes the batches (reader_serve()).
 */
static bool next_batch(struct stream *s, uint32_t *e, uint64_t *b)
{
	while (*b >= order_batches(walk_order(s))) {
		/* An empty epoch, for ever: nothing to loop over. */
		if (s->lay.batches_per_epoch == 0 && s->c.epochs == 0)
			return false;
		++*e;
		if (s->c.epochs && *e >= s->c.start_epoch + s->c.epochs)
			return false;
		select_epoch(s, *e);
		*b = order_first_batch(walk_order(s), *e);
	}
	return true;
}

/*
 * Every record of a light stream is in the node cache, and stays there:
 * making a batch is locating its records, which the assembler does
 * itself from batch b of epoch e on (stream_priv.h, serve), once it has
 * taken the batches made before. The reader ends here: no more wake-ups
 * between the two threads, two a batch, which cost more than the locating
 * on a machine of few cores.
 */
static void hand_over(struct stream *s, uint32_t e, uint64_t b)
{
	bool wake;

	plog(PLOG_DEBUG,
	     "%s: every record in the node cache: batches from %" PRIu64
	     " of epoch %" PRIu32 " made by the assembler",
	     s->label, b, e);
	pthread_mutex_lock(&s->lock);
	s->serve = true;
	s->serve_epoch = e;
	s->serve_batch = b;
	wake = s->assembler_waits;
	s->assembler_waits = false;
	pthread_mutex_unlock(&s->lock);
	if (wake)
		pthread_cond_broadcast(&s->cond);
}

void reader_serve(struct stream *s, struct stream_pb *pb)
{
	uint32_t e = s->serve_epoch;
	uint64_t b = s->serve_batch;

	if (!next_batch(s, &e, &b)) {
		pb->last = true;
		pb->err = 0;
		pb->count = 0;
		return;
	}
	pb->last = false;
	pb->err = 0;
	pb->batch = b;
	pb->epoch = e;
	batch_samples(s, pb, b);
	if (lookup_batch(s, pb, b)) {
		const struct stream_ref *r = &s->refs[0];

		/* nodecache_complete() says this cannot be. */
		pb->err = LOADER_ERANGE;
		snprintf(
			pb->msg, sizeof(pb->msg),
			"epoch %" PRIu32 " batch %" PRIu64 ": record %" PRIu64
			" of %s is not in the node cache, which held every record",
			e, b, pb->ridx[r->k], shard_name(s->sh[r->shard]));
	}
	s->serve_epoch = e;
	s->serve_batch = b + 1;
}

void *reader_main(void *arg)
{
	struct stream *s = arg;
	struct reader_io io = { 0 };
	uint32_t e = s->c.start_epoch;
	struct stream_pb *pb;
	int r;

	pthread_setname_np(pthread_self(), "ld-read");
	io.depth = s->c.io_depth && s->c.io_depth < STREAM_QD ? s->c.io_depth :
								STREAM_QD;
	r = io_uring_queue_init(STREAM_QD, &io.ring, 0);
	io.have_ring = r == 0;
	if (io.have_ring)
		io.fixed = io_uring_register_files(&io.ring, s->fds + 1,
						   s->ds->nshards) == 0;
	if (io.have_ring && s->c.direct) {
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
	select_epoch(s, e);
	for (uint64_t b = s->c.start_batch; next_batch(s, &e, &b); b++) {
		struct diag d = { { 0 } };

		/* A mixture's member keeps reading: its mixture assembles. */
		if (s->light && !s->seq && nodecache_complete(s->cset)) {
			hand_over(s, e, b);
			goto out;
		}
		pb = next_free_pb(s);
		if (!pb)
			goto out;
		pb->last = false;
		pb->err = read_batch(s, &io, pb, b, &d);
		if (s->c.timing)
			stream_note_cpu(&s->reader_cpu_ns);
		if (pb->err == -ECANCELED)
			goto out;
		if (pb->err)
			snprintf(pb->msg, sizeof(pb->msg),
				 "epoch %" PRIu32 " %s", e, d.msg);
		post_pb(s);
		if (pb->err)
			goto out;
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
