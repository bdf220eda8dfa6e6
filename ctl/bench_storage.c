/*
 * bench_storage.c - the storage read benchmark: files read in blocks
 * with io_uring, one ring per thread, timed per read.
 *
 * The files' whole blocks form one sequence of blocks (a file's tail
 * shorter than a block is never read); each thread takes a contiguous
 * share of it and reads that share in order (seq) or as a fresh random
 * permutation per pass (rand), so that like fio's random map every
 * block of the share is read once before any is read again. A thread
 * keeps its queue full: each round it refills the queue, handing the
 * reads to the kernel BSTORE_SUBMIT_BATCH at a time as fio does (not
 * the whole queue at once, which runs the device in lockstep), then one
 * io_uring_submit_and_wait() submits the rest and waits for a
 * completion, and every completion then in the queue is reaped in the
 * same round. One clock
 * read per round stamps both the completions reaped and the reads
 * queued next, so timing costs no system call per read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "bench_storage.h"
#include "clock.h"
#include "loader_error.h"

#define BSTORE_ALIGN  4096	 /* of read buffers: every O_DIRECT device's */
#define BSTORE_SECTOR 512	 /* the smallest O_DIRECT block */
#define BSTORE_CHUNK  (1u << 20) /* --create's writes */
/* mincore() over windows of this size: its vector stays small. */
#define BSTORE_WINDOW (256ull << 20)

/*
 * The latency histogram: values in ns below 2^HIST_SUB_BITS exactly,
 * above that HIST_SUB buckets per power of two, so a percentile is off
 * by at most 1/HIST_SUB (1.6 %) of its value.
 */
#define HIST_SUB_BITS 6
#define HIST_SUB      (1u << HIST_SUB_BITS)
#define HIST_EXP_MAX  44 /* 2^44 ns: about five hours */
#define HIST_N	      (HIST_SUB + (HIST_EXP_MAX - HIST_SUB_BITS) * HIST_SUB)

struct bfile {
	char *path;
	int fd;
	uint64_t size;
	uint64_t first;	 /* its first block in the sequence of all */
	uint64_t blocks; /* whole blocks in it */
};

struct slot {
	uint64_t t_ns; /* when queued */
	uint64_t off;
	unsigned file;
};

/*
 * The start line: workers set up their rings, then wait here so that
 * every thread's reads start together, after the CPU time is sampled.
 */
struct gate {
	pthread_mutex_t m;
	pthread_cond_t c;
	unsigned ready;
	int state; /* 0 closed, 1 go, 2 called off */
};

struct worker {
	const struct bstore_job *job;
	const struct bfile *files;
	unsigned nfiles;
	uint64_t lo, n; /* its share: blocks [lo, lo + n) */
	uint64_t limit; /* reads to issue; UINT64_MAX: until the time */
	struct gate *go;
	atomic_uint *finished;
	atomic_uint_fast64_t done_bytes;
	/* Results. */
	uint64_t ios, bytes, t_first, t_last, lat_sum, lat_max;
	uint64_t *hist;
	bool fixed_bufs;
	int err;
	struct diag d;
};

static unsigned hist_index(uint64_t v)
{
	unsigned e;

	if (v < HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	if (e >= HIST_EXP_MAX)
		return HIST_N - 1;
	return HIST_SUB + (e - HIST_SUB_BITS) * HIST_SUB +
	       (unsigned)((v >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1));
}

/* The middle of bucket i, in ns. */
static double hist_value(unsigned i)
{
	unsigned e, sub;
	double lo, width;

	if (i < HIST_SUB)
		return i;
	e = (i - HIST_SUB) / HIST_SUB + HIST_SUB_BITS;
	sub = (i - HIST_SUB) % HIST_SUB;
	width = (double)(1ull << (e - HIST_SUB_BITS));
	lo = (double)(1ull << e) + sub * width;
	return lo + width / 2;
}

/* The value below which a fraction q of the n samples lie, in ns. */
static double hist_quantile(const uint64_t *h, uint64_t n, double q)
{
	uint64_t want = (uint64_t)(q * (double)n), seen = 0;

	if (!n)
		return 0;
	if (want >= n)
		want = n - 1;
	for (unsigned i = 0; i < HIST_N; i++) {
		seen += h[i];
		if (seen > want)
			return hist_value(i);
	}
	return hist_value(HIST_N - 1);
}

/*
 * A bijection of [0, 2^bits): keyed rounds of xor, multiplication by an
 * odd number and xor-shift, each invertible modulo 2^bits. Walking its
 * cycle until the value falls below n (at most 2^bits < 2n, so under two
 * steps on average) makes a bijection of [0, n): a random order of a
 * thread's blocks that needs no memory, however many there are.
 */
/* Reads handed to the kernel per submission (see worker_main()). */
#define BSTORE_SUBMIT_BATCH 8

static uint64_t permute(uint64_t x, uint64_t n, unsigned bits, uint64_t key)
{
	uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
	unsigned s = bits / 2 + 1;

	do {
		for (unsigned r = 0; r < 3; r++) {
			x ^= (key >> (r * 7)) & mask;
			x = (x * (0x9e3779b97f4a7c15ull ^ (key << 1) ^
				  ((uint64_t)r << 33))) &
			    mask;
			x ^= x >> s;
		}
	} while (x >= n);
	return x;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The file holding block b of the sequence of all. */
static unsigned file_of(const struct bfile *f, unsigned n, uint64_t b)
{
	unsigned lo = 0, hi = n;

	while (hi - lo > 1) {
		unsigned mid = lo + (hi - lo) / 2;

		if (f[mid].first <= b)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static int ring_setup(struct worker *w, struct io_uring *ring)
{
	const struct bstore_job *job = w->job;
	struct io_uring_params p = { 0 };
	int r;

	if (job->sqpoll) {
		p.flags = IORING_SETUP_SQPOLL;
		r = io_uring_queue_init_params(job->qd, ring, &p);
		if (r)
			return diag_set(&w->d, r,
					"--sqpoll: io_uring refused SQPOLL: %s",
					strerror(-r));
		return 0;
	}
	/*
	 * One thread submits and reaps: let the kernel skip the locking
	 * and interrupts that serve many. Older kernels refuse the flags.
	 */
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
	r = io_uring_queue_init_params(job->qd, ring, &p);
	if (r == -EINVAL) {
		memset(&p, 0, sizeof(p));
		r = io_uring_queue_init_params(job->qd, ring, &p);
	}
	if (r)
		return diag_set(&w->d, r, "io_uring_queue_init: %s",
				strerror(-r));
	return 0;
}

static int register_all(struct worker *w, struct io_uring *ring, char *bufs)
{
	const struct bstore_job *job = w->job;
	int r;

	if (job->fixed_files) {
		int *fds = malloc(w->nfiles * sizeof(*fds));

		if (!fds)
			return diag_set(&w->d, -ENOMEM, "out of memory");
		for (unsigned i = 0; i < w->nfiles; i++)
			fds[i] = w->files[i].fd;
		r = io_uring_register_files(ring, fds, w->nfiles);
		free(fds);
		if (r)
			return diag_set(
				&w->d, r,
				"--fixed-files: io_uring_register_files: %s",
				strerror(-r));
	}
	if (job->fixed_bufs) {
		struct iovec *iov = malloc(job->qd * sizeof(*iov));

		if (!iov)
			return diag_set(&w->d, -ENOMEM, "out of memory");
		for (unsigned i = 0; i < job->qd; i++) {
			iov[i].iov_base = bufs + (size_t)i * job->bs;
			iov[i].iov_len = job->bs;
		}
		/*
		 * Registered buffers are pinned, charged to RLIMIT_MEMLOCK
		 * for a user without CAP_IPC_LOCK: when refused, the reads
		 * go on with plain buffers and the result says so.
		 */
		w->fixed_bufs =
			io_uring_register_buffers(ring, iov, job->qd) == 0;
		free(iov);
	}
	return 0;
}

/* The block of read number s of this thread. */
static uint64_t block_of(const struct worker *w, uint64_t s, unsigned bits)
{
	uint64_t pass = s / w->n, i = s % w->n;

	if (w->job->pattern == BSTORE_RAND)
		i = permute(i, w->n, bits,
			    mix64(w->job->seed ^ mix64(w->lo) ^ mix64(pass)));
	return w->lo + i;
}

static void queue_read(struct worker *w, struct io_uring_sqe *sqe,
		       struct slot *sl, unsigned idx, char *bufs,
		       uint64_t block)
{
	const struct bstore_job *job = w->job;
	unsigned f = file_of(w->files, w->nfiles, block);
	void *buf = bufs + (size_t)idx * job->bs;
	int fd = job->fixed_files ? (int)f : w->files[f].fd;

	sl->off = (block - w->files[f].first) * job->bs;
	sl->file = f;
	if (w->fixed_bufs)
		io_uring_prep_read_fixed(sqe, fd, buf, (unsigned)job->bs,
					 sl->off, (int)idx);
	else
		io_uring_prep_read(sqe, fd, buf, (unsigned)job->bs, sl->off);
	if (job->fixed_files)
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, idx);
}

/* A completion: its latency, or the thread's first error. */
static void complete(struct worker *w, const struct slot *sl, int res,
		     uint64_t now)
{
	uint64_t lat = now - sl->t_ns;

	if (res != (int)w->job->bs) {
		if (!w->err) {
			if (res < 0)
				w->err = diag_set(
					&w->d, res,
					"%s: read of %" PRIu64
					" bytes at %" PRIu64 ": %s%s",
					w->files[sl->file].path, w->job->bs,
					sl->off, strerror(-res),
					res == -EINVAL && w->job->direct ?
						" (O_DIRECT: is --bs a multiple of the device's block size?)" :
						"");
			else
				w->err = diag_set(&w->d, -EIO,
						  "%s: short read at %" PRIu64
						  ": %d of %" PRIu64 " bytes",
						  w->files[sl->file].path,
						  sl->off, res, w->job->bs);
		}
		return;
	}
	w->ios++;
	w->bytes += w->job->bs;
	w->hist[hist_index(lat)]++;
	w->lat_sum += lat;
	if (lat > w->lat_max)
		w->lat_max = lat;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct bstore_job *job = w->job;
	struct io_uring ring;
	struct slot *slots = NULL;
	unsigned *free_idx = NULL, nfree = 0, inflight = 0, bits = 1;
	char *bufs = NULL;
	bool have_ring = false, issuing = true;
	uint64_t issued = 0, now, deadline = UINT64_MAX;

	while (bits < 64 && (1ull << bits) < w->n)
		bits++;
	w->hist = calloc(HIST_N, sizeof(*w->hist));
	slots = calloc(job->qd, sizeof(*slots));
	free_idx = calloc(job->qd, sizeof(*free_idx));
	if (!w->hist || !slots || !free_idx ||
	    posix_memalign((void **)&bufs, BSTORE_ALIGN,
			   (size_t)job->qd * job->bs)) {
		bufs = NULL;
		w->err = diag_set(&w->d, -ENOMEM,
				  "out of memory for %u buffers of %" PRIu64
				  " bytes",
				  job->qd, job->bs);
	}
	if (!w->err) {
		/* Touch the buffers now, not on the first reads. */
		memset(bufs, 0, (size_t)job->qd * job->bs);
		w->err = ring_setup(w, &ring);
		have_ring = !w->err;
	}
	if (!w->err)
		w->err = register_all(w, &ring, bufs);
	for (unsigned i = 0; i < job->qd; i++)
		free_idx[nfree++] = job->qd - 1 - i;

	pthread_mutex_lock(&w->go->m);
	w->go->ready++;
	pthread_cond_broadcast(&w->go->c);
	while (!w->go->state)
		pthread_cond_wait(&w->go->c, &w->go->m);
	if (w->go->state != 1)
		issuing = false;
	pthread_mutex_unlock(&w->go->m);
	now = clock_mono_ns();
	w->t_first = w->t_last = now;
	if (job->bytes == 0)
		deadline = now + (uint64_t)(job->seconds * 1e9);
	if (w->err)
		issuing = false;

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0, queued = 0;
		int r;

		if (now >= deadline || (job->stop && *job->stop))
			issuing = false;
		while (issuing && nfree && issued < w->limit) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			unsigned idx;

			if (!sqe)
				break;
			idx = free_idx[--nfree];
			slots[idx].t_ns = now;
			queue_read(w, sqe, &slots[idx], idx, bufs,
				   block_of(w, issued, bits));
			issued++;
			queued++;
			/*
			 * Hand the device reads a few at a time: one
			 * submission of the whole queue holds its requests
			 * in the block layer's plug until the last is
			 * prepared, so the device would idle, then get them
			 * all at once and finish them all at once, in
			 * lockstep.
			 */
			if (queued % BSTORE_SUBMIT_BATCH == 0 &&
			    io_uring_submit(&ring) < 0)
				break;
		}
		inflight += queued;
		if (!inflight)
			break;
		r = io_uring_submit_and_wait(&ring, 1);
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			/*
			 * The ring itself failed: nothing more will complete
			 * that we could wait for.
			 */
			if (!w->err)
				w->err =
					diag_set(&w->d, r,
						 "io_uring_submit_and_wait: %s",
						 strerror(-r));
			break;
		}
		now = clock_mono_ns();
		io_uring_for_each_cqe(&ring, head, cqe)
		{
			unsigned idx = (unsigned)io_uring_cqe_get_data64(cqe);

			complete(w, &slots[idx], cqe->res, now);
			free_idx[nfree++] = idx;
			seen++;
		}
		io_uring_cq_advance(&ring, seen);
		inflight -= seen;
		if (seen) {
			w->t_last = now;
			atomic_store_explicit(&w->done_bytes, w->bytes,
					      memory_order_relaxed);
		}
		if (w->err)
			issuing = false;
	}
	if (have_ring)
		io_uring_queue_exit(&ring);
	free(bufs);
	free(slots);
	free(free_idx);
	atomic_fetch_add(w->finished, 1);
	return NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct flist {
	struct bfile *f;
	unsigned n, cap;
};

static int flist_add(struct flist *l, const char *path, uint64_t size)
{
	if (l->n == l->cap) {
		unsigned cap = l->cap ? 2 * l->cap : 16;
		struct bfile *f = realloc(l->f, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		l->f = f;
		l->cap = cap;
	}
	l->f[l->n].path = strdup(path);
	if (!l->f[l->n].path)
		return -ENOMEM;
	l->f[l->n].fd = -1;
	l->f[l->n].size = size;
	l->n++;
	return 0;
}

/* The regular files directly in dir, sorted, those of a block or more. */
static int add_dir(struct flist *l, const char *dir, uint64_t bs,
		   struct diag *d)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	char **names = NULL, path[4096];
	unsigned n = 0, cap = 0, regular = 0, taken = 0;
	int err = 0;

	if (!dp)
		return diag_set(d, -errno, "%s: %s", dir, strerror(errno));
	while ((e = readdir(dp))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn;

			cap = cap ? 2 * cap : 64;
			nn = realloc(names, cap * sizeof(*nn));
			if (!nn) {
				err = -ENOMEM;
				goto out;
			}
			names = nn;
		}
		names[n] = strdup(e->d_name);
		if (!names[n]) {
			err = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (unsigned i = 0; i < n; i++) {
		struct stat st;

		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				     names[i]) >= sizeof(path) ||
		    stat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		regular++;
		if ((uint64_t)st.st_size < bs)
			continue;
		err = flist_add(l, path, (uint64_t)st.st_size);
		if (err)
			goto out;
		taken++;
	}
	if (!regular)
		err = diag_set(d, LOADER_EUSAGE,
			       "%s: a directory without regular files", dir);
	else if (!taken)
		err = diag_set(
			d, LOADER_EUSAGE,
			"%s: no file in it holds a block of --bs %" PRIu64
			" bytes",
			dir, bs);
out:
	if (err == -ENOMEM)
		diag_set(d, err, "out of memory");
	for (unsigned i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(dp);
	return err;
}

static int collect(const struct bstore_job *job, struct flist *l,
		   struct diag *d)
{
	for (unsigned i = 0; i < job->npaths; i++) {
		const char *p = job->paths[i];
		struct stat st;
		int err;

		if (stat(p, &st))
			return diag_set(d, -errno, "%s: %s", p,
					strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			err = add_dir(l, p, job->bs, d);
		} else if (!S_ISREG(st.st_mode)) {
			return diag_set(d, LOADER_EUSAGE,
					"%s: not a regular file or directory",
					p);
		} else if ((uint64_t)st.st_size < job->bs) {
			return diag_set(d, LOADER_EUSAGE,
					"%s: %" PRIu64
					" bytes, smaller than --bs %" PRIu64,
					p, (uint64_t)st.st_size, job->bs);
		} else {
			err = flist_add(l, p, (uint64_t)st.st_size);
			if (err)
				diag_set(d, err, "out of memory");
		}
		if (err)
			return err;
	}
	return 0;
}

/*
 * O_DIRECT wants offsets and lengths aligned to the device's logical
 * block, 512 or 4096 bytes: one read of the first two blocks' second
 * (or the first) tells whether bs satisfies the device before the run
 * can fail on it.
 */
static int probe_direct(const struct bfile *f, uint64_t bs, struct diag *d)
{
	uint64_t off = f->blocks > 1 ? bs : 0;
	void *buf;
	ssize_t r;

	if (posix_memalign(&buf, BSTORE_ALIGN, bs))
		return diag_set(d, -ENOMEM, "out of memory");
	r = pread(f->fd, buf, bs, (off_t)off);
	free(buf);
	if (r < 0 && errno == EINVAL)
		return diag_set(
			d, LOADER_EUSAGE,
			"--bs %" PRIu64
			": %s refuses O_DIRECT reads of that size: use a multiple of its block size (4096), or --buffered",
			bs, f->path);
	if (r < 0)
		return diag_set(d, -errno, "%s: %s", f->path, strerror(errno));
	return 0;
}

static int open_all(const struct bstore_job *job, struct flist *l,
		    struct diag *d)
{
	int flags = O_RDONLY | O_CLOEXEC | (job->direct ? O_DIRECT : 0);

	for (unsigned i = 0; i < l->n; i++) {
		struct bfile *f = &l->f[i];

		f->fd = open(f->path, flags);
		if (f->fd < 0 && errno == EINVAL && job->direct)
			return diag_set(
				d, -EINVAL,
				"%s: the file system refuses O_DIRECT (use --buffered)",
				f->path);
		if (f->fd < 0)
			return diag_set(d, -errno, "%s: %s", f->path,
					strerror(errno));
		f->blocks = f->size / job->bs;
		f->first = i ? l->f[i - 1].first + l->f[i - 1].blocks : 0;
	}
	return 0;
}

/* The share of the files' pages in the page cache, 0..1. */
double bench_fds_resident(const int *fds, unsigned n)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t pages = 0, in = 0;
	unsigned char *vec = malloc(BSTORE_WINDOW / (uint64_t)page);

	if (!vec)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		struct stat st;
		uint64_t size;

		if (fstat(fds[i], &st) || st.st_size <= 0)
			continue;
		size = (uint64_t)st.st_size;
		for (uint64_t off = 0; off < size; off += BSTORE_WINDOW) {
			uint64_t len = size - off < BSTORE_WINDOW ?
					       size - off :
					       BSTORE_WINDOW;
			uint64_t np =
				(len + (uint64_t)page - 1) / (uint64_t)page;
			void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fds[i],
				       (off_t)off);

			if (m == MAP_FAILED)
				break;
			if (!mincore(m, len, vec)) {
				pages += np;
				for (uint64_t p = 0; p < np; p++)
					in += vec[p] & 1;
			}
			munmap(m, len);
		}
	}
	free(vec);
	return pages ? (double)in / (double)pages : 0;
}

int bench_fds_drop(const int *fds, unsigned n, unsigned *bad)
{
	int first = 0;

	/*
	 * Dirty pages cannot be dropped: write them first. Pages another
	 * process has mapped stay; a residency sample after this says how
	 * much did.
	 */
	for (unsigned i = 0; i < n; i++) {
		int err = fdatasync(fds[i]) ? errno : 0;

		if (!err)
			err = posix_fadvise(fds[i], 0, 0, POSIX_FADV_DONTNEED);
		if (err && !first) {
			first = -err;
			*bad = i;
		}
	}
	return first;
}

/* The descriptors of l's files, for the two above (NULL: no memory). */
static int *flist_fds(const struct flist *l)
{
	int *fds = malloc((l->n ? l->n : 1) * sizeof(*fds));

	for (unsigned i = 0; fds && i < l->n; i++)
		fds[i] = l->f[i].fd;
	return fds;
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static int check_job(const struct bstore_job *job, struct diag *d)
{
	if (!job->npaths)
		return diag_set(d, LOADER_EUSAGE, "no file to read");
	if (!job->bs || job->bs > BSTORE_BS_MAX)
		return diag_set(d, LOADER_EUSAGE,
				"--bs %" PRIu64 ": not in [1, %llu]", job->bs,
				BSTORE_BS_MAX);
	if (job->direct && job->bs % BSTORE_SECTOR)
		return diag_set(
			d, LOADER_EUSAGE,
			"--bs %" PRIu64
			": not a multiple of %u, as O_DIRECT needs (or use --buffered)",
			job->bs, BSTORE_SECTOR);
	if (!job->qd || job->qd > BSTORE_QD_MAX)
		return diag_set(d, LOADER_EUSAGE, "--qd %u: not in [1, %u]",
				job->qd, BSTORE_QD_MAX);
	if (!job->threads || job->threads > BSTORE_THREADS_MAX)
		return diag_set(d, LOADER_EUSAGE,
				"--threads %u: not in [1, %u]", job->threads,
				BSTORE_THREADS_MAX);
	if (job->bytes && job->seconds > 0)
		return diag_set(d, LOADER_EUSAGE,
				"--seconds or --bytes, not both");
	if (job->seconds < 0 || job->seconds > 1e6)
		return diag_set(d, LOADER_EUSAGE,
				"--seconds %g: not in (0, 1000000]",
				job->seconds);
	if (job->bytes % job->bs)
		return diag_set(d, LOADER_EUSAGE,
				"--bytes %" PRIu64
				": not a multiple of --bs %" PRIu64,
				job->bytes, job->bs);
	if (job->bytes && job->bytes / job->bs < job->threads)
		return diag_set(d, LOADER_EUSAGE,
				"--bytes %" PRIu64
				": less than a block for each of --threads %u",
				job->bytes, job->threads);
	return 0;
}

static void merge(struct bstore_result *res, struct worker *w, unsigned n)
{
	uint64_t *h = calloc(HIST_N, sizeof(*h)), t0 = UINT64_MAX, t1 = 0;
	uint64_t sum = 0, max = 0;

	res->fixed_bufs = w[0].job->fixed_bufs;
	for (unsigned i = 0; i < n; i++) {
		res->ios += w[i].ios;
		res->bytes += w[i].bytes;
		sum += w[i].lat_sum;
		if (w[i].lat_max > max)
			max = w[i].lat_max;
		if (w[i].t_first < t0)
			t0 = w[i].t_first;
		if (w[i].t_last > t1)
			t1 = w[i].t_last;
		if (!w[i].fixed_bufs)
			res->fixed_bufs = false;
		for (unsigned b = 0; h && w[i].hist && b < HIST_N; b++)
			h[b] += w[i].hist[b];
	}
	res->seconds = t1 > t0 ? (double)(t1 - t0) * 1e-9 : 0;
	if (res->seconds > 0) {
		res->bw_bytes_per_s = (double)res->bytes / res->seconds;
		res->iops = (double)res->ios / res->seconds;
	}
	if (h && res->ios) {
		double qs[3] = { 0.50, 0.99, 0.999 }, v[3];

		/* A bucket's middle may lie above the largest value in it. */
		for (unsigned i = 0; i < 3; i++) {
			v[i] = hist_quantile(h, res->ios, qs[i]);
			if (v[i] > (double)max)
				v[i] = (double)max;
		}
		res->lat_us.p50 = v[0] / 1e3;
		res->lat_us.p99 = v[1] / 1e3;
		res->lat_us.p999 = v[2] / 1e3;
		res->lat_us.mean = (double)sum / (double)res->ios / 1e3;
		res->lat_us.max = (double)max / 1e3;
	}
	free(h);
}

static void report_progress(const struct bstore_job *job, struct worker *w,
			    unsigned n, atomic_uint *finished, uint64_t t0)
{
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	while (atomic_load(finished) < n) {
		uint64_t bytes = 0;

		nanosleep(&ts, NULL);
		for (unsigned i = 0; i < n; i++)
			bytes += atomic_load_explicit(&w[i].done_bytes,
						      memory_order_relaxed);
		job->progress(job->progress_arg, bytes,
			      (double)(clock_mono_ns() - t0) * 1e-9);
	}
}

int bench_storage_run(const struct bstore_job *job, struct bstore_result *res,
		      struct diag *d)
{
	struct bstore_job j = *job;
	struct flist l = { 0 };
	struct worker *w = NULL;
	pthread_t *tid = NULL;
	struct gate go = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			   0, 0 };
	atomic_uint finished = 0;
	struct rusage ru0, ru1;
	uint64_t total, t0, t1;
	unsigned started = 0;
	int err, *fds;

	memset(res, 0, sizeof(*res));
	err = check_job(job, d);
	if (err)
		return err;
	if (!j.bytes && j.seconds <= 0)
		j.seconds = BSTORE_SECONDS_DEFAULT;
	err = collect(job, &l, d);
	if (!err)
		err = open_all(job, &l, d);
	if (err)
		goto out;
	total = l.f[l.n - 1].first + l.f[l.n - 1].blocks;
	if (total < j.threads) {
		err = diag_set(d, LOADER_EUSAGE,
			       "--threads %u: more than the %" PRIu64
			       " blocks of the files",
			       j.threads, total);
		goto out;
	}
	if (j.direct) {
		err = probe_direct(&l.f[0], j.bs, d);
		if (err)
			goto out;
	}
	res->files = l.n;
	res->span_bytes = total * j.bs;
	fds = flist_fds(&l);
	if (!fds) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	/* What could not be dropped shows in the residency sampled next. */
	if (j.drop_cache)
		(void)bench_fds_drop(fds, l.n, &(unsigned){ 0 });
	res->dropped = j.drop_cache;
	res->resident_before = bench_fds_resident(fds, l.n);
	free(fds);

	w = calloc(j.threads, sizeof(*w));
	tid = calloc(j.threads, sizeof(*tid));
	if (!w || !tid) {
		err = diag_set(d, -ENOMEM, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < j.threads; i++) {
		uint64_t nb = j.bytes / j.bs;

		w[i].job = &j;
		w[i].files = l.f;
		w[i].nfiles = l.n;
		w[i].lo = total * i / j.threads;
		w[i].n = total * (i + 1) / j.threads - w[i].lo;
		w[i].limit = j.bytes ? nb * (i + 1) / j.threads -
					       nb * i / j.threads :
				       UINT64_MAX;
		w[i].go = &go;
		w[i].finished = &finished;
		w[i].fixed_bufs = false;
		atomic_init(&w[i].done_bytes, 0);
		err = -pthread_create(&tid[i], NULL, worker_main, &w[i]);
		if (err) {
			diag_set(d, err, "pthread_create: %s", strerror(-err));
			break;
		}
		started++;
	}
	pthread_mutex_lock(&go.m);
	while (go.ready < started)
		pthread_cond_wait(&go.c, &go.m);
	getrusage(RUSAGE_SELF, &ru0);
	t0 = clock_mono_ns();
	/* A thread that did not start calls the run off. */
	go.state = started == j.threads ? 1 : 2;
	pthread_cond_broadcast(&go.c);
	pthread_mutex_unlock(&go.m);
	if (j.progress && started == j.threads)
		report_progress(&j, w, j.threads, &finished, t0);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	t1 = clock_mono_ns();
	getrusage(RUSAGE_SELF, &ru1);
	if (err)
		goto out;
	for (unsigned i = 0; i < j.threads && !err; i++)
		if (w[i].err) {
			err = w[i].err;
			*d = w[i].d;
		}
	if (err)
		goto out;
	merge(res, w, j.threads);
	res->sqpoll = j.sqpoll;
	res->fixed_files = j.fixed_files;
	res->stopped = j.stop && *j.stop;
	res->cpu_user_s = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
	res->cpu_sys_s = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	if (t1 > t0)
		res->cpu_pct = 100.0 * (res->cpu_user_s + res->cpu_sys_s) /
			       ((double)(t1 - t0) * 1e-9);
out:
	for (unsigned i = 0; w && i < j.threads; i++)
		free(w[i].hist);
	free(w);
	free(tid);
	for (unsigned i = 0; i < l.n; i++) {
		if (l.f[i].fd >= 0)
			close(l.f[i].fd);
		free(l.f[i].path);
	}
	free(l.f);
	return err;
}

int bench_storage_create(const char *path, uint64_t size, struct diag *d)
{
	uint64_t *buf = malloc(BSTORE_CHUNK), x = 0x9e3779b97f4a7c15ull;
	uint64_t done = 0;
	int fd, err = 0;

	if (!buf)
		return diag_set(d, -ENOMEM, "out of memory");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = diag_set(d, -errno, "--create: %s: %s", path,
			       strerror(errno));
		free(buf);
		return err;
	}
	while (done < size && !err) {
		size_t n = size - done < BSTORE_CHUNK ? (size_t)(size - done) :
							BSTORE_CHUNK;
		size_t off = 0;

		/* xorshift64: never zero, and nothing a disk compresses. */
		for (size_t i = 0; i < BSTORE_CHUNK / sizeof(*buf); i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = x;
		}
		while (off < n) {
			ssize_t r = write(fd, (char *)buf + off, n - off);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				err = diag_set(d, -errno, "--create: %s: %s",
					       path, strerror(errno));
				break;
			}
			off += (size_t)r;
		}
		done += off;
	}
	if (!err && fsync(fd))
		err = diag_set(d, -errno, "--create: %s: fsync: %s", path,
			       strerror(errno));
	if (!err)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	if (err)
		unlink(path);
	free(buf);
	return err;
}
