/*
 * bench_storage.h - a read benchmark of files on io_uring: the engine of
 * loaderctl bench storage, and of anything else that wants to know how
 * fast the storage under a dataset reads (loaderctl bench pipeline).
 *
 * A job names files (or directories, whose regular files it reads), a
 * pattern, a block size and a queue depth; bench_storage_run() reads
 * them with one io_uring per thread for a time or a byte count and
 * fills a result: bytes, rates, latency percentiles from a log-bucketed
 * histogram, the process's CPU time, and how much of the data was in
 * the page cache before the run. The engine prints nothing; it reports
 * progress through an optional callback and errors through a diag.
 */
#ifndef LD_BENCH_STORAGE_H
#define LD_BENCH_STORAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"

enum bstore_pattern {
	BSTORE_SEQ,  /* each thread reads its blocks in order, wrapping */
	BSTORE_RAND, /* each block of a thread's share once per pass */
};

/* Limits a job must respect (bench_storage_run checks them). */
#define BSTORE_QD_MAX	   4096
#define BSTORE_THREADS_MAX 256
#define BSTORE_BS_MAX	   (256ull << 20)

/* Seconds a job runs when it names neither seconds nor bytes. */
#define BSTORE_SECONDS_DEFAULT 10.0

/*
 * Called on the thread that runs bench_storage_run(), about ten times a
 * second: the bytes completed so far and the seconds since the reads
 * began.
 */
typedef void (*bstore_progress_fn)(void *arg, uint64_t bytes, double seconds);

struct bstore_job {
	/*
	 * Files or directories to read, borrowed for the call. A directory
	 * stands for the regular files directly in it (sorted by name,
	 * hidden ones skipped); of those, files shorter than one block
	 * are left out. A file named itself must hold a block.
	 */
	const char *const *paths;
	unsigned npaths;
	enum bstore_pattern pattern;
	uint64_t bs;	  /* bytes per read; > 0 */
	unsigned qd;	  /* reads in flight per thread, 1..BSTORE_QD_MAX */
	bool direct;	  /* O_DIRECT; else through the page cache */
	double seconds;	  /* run this long (0 with bytes 0: the default) */
	uint64_t bytes;	  /* or read this many, a multiple of bs (0: time) */
	unsigned threads; /* 1..BSTORE_THREADS_MAX, each with its own ring */
	bool sqpoll;	  /* IORING_SETUP_SQPOLL: refused is an error */
	bool fixed_bufs;  /* io_uring_register_buffers, if the kernel lets */
	bool fixed_files; /* io_uring_register_files */
	bool drop_cache;  /* fdatasync + POSIX_FADV_DONTNEED each file first */
	uint64_t seed;	  /* of the random order (BSTORE_RAND) */
	bstore_progress_fn progress; /* NULL for none */
	void *progress_arg;
	/* When non-NULL and set non-zero (a signal handler), stop early. */
	const volatile int *stop;
};

struct bstore_lat {
	double p50, p99, p999, mean, max; /* microseconds */
};

struct bstore_result {
	uint64_t bytes; /* read, all threads together */
	uint64_t ios;	/* reads completed */
	double seconds; /* first submission to last completion */
	double bw_bytes_per_s;
	double iops;
	/* Each read's submission to its completion, over all threads. */
	struct bstore_lat lat_us;
	/*
	 * The process's user + system CPU time (getrusage, io_uring's
	 * kernel threads for it included) over the wall time: 100 is one
	 * core busy, so n cores give up to 100 n.
	 */
	double cpu_pct;
	double cpu_user_s, cpu_sys_s;
	unsigned files;	     /* files read */
	uint64_t span_bytes; /* bytes the blocks read from cover */
	/*
	 * The share of the files' pages that were in the page cache when
	 * the reads began (after drop_cache, if set), 0..1, from mincore()
	 * on a mapping of each file.
	 */
	double resident_before;
	bool dropped; /* drop_cache was done */
	/* What was used: fixed_bufs may fall back (RLIMIT_MEMLOCK). */
	bool sqpoll, fixed_bufs, fixed_files;
	bool stopped; /* job->stop ended the run early */
};

/*
 * Run job and fill *res. Returns 0, or -errno / LOADER_EUSAGE with a
 * message in d naming the file or the job's field at fault (by its
 * loaderctl option, e.g. "--bs"): a path that is missing or not a
 * regular file or directory, a directory without a regular file of a
 * block or more, a file shorter than bs, bs not aligned as O_DIRECT
 * needs, a read that failed or came back short, io_uring refused.
 */
int bench_storage_run(const struct bstore_job *job, struct bstore_result *res,
		      struct diag *d);

/*
 * Create path (it must not exist) with size bytes of non-zero
 * pseudo-random data, fsync it, and drop its pages from the page cache,
 * so that a run after it starts cold. A failure removes what was
 * written. Returns 0 or -errno, with a message in d.
 */
int bench_storage_create(const char *path, uint64_t size, struct diag *d);

/*
 * The fraction of n files' pages in the page cache (mincore over a
 * read-only mapping, a window at a time), 0..1; 0 for no pages.
 */
double bench_fds_resident(const int *fds, unsigned n);

/*
 * Drop n files' pages from the page cache: fdatasync (dirty pages stay
 * otherwise), then POSIX_FADV_DONTNEED. Every file is tried; returns 0,
 * or the first failure as a negative errno with its index in *bad.
 */
int bench_fds_drop(const int *fds, unsigned n, unsigned *bad);

#endif /* LD_BENCH_STORAGE_H */
