/*
 * s3.h - requests to an S3-API object store (AWS S3, Ceph RGW, MinIO),
 * through libcurl.
 *
 * One struct s3 is one bucket seen with one set of credentials
 * (common/awscfg.h). It signs every request with SigV4 as libcurl does
 * it (CURLOPT_AWS_SIGV4, the payload declared UNSIGNED-PAYLOAD), keeps
 * its connections alive across requests, and runs many requests at once
 * through one curl multi handle. Every request is retried on what a
 * store or a network does now and then (connection refused or reset,
 * timeouts, 5xx, 503 SlowDown, a body shorter than announced), after a
 * backoff that doubles with full jitter; what a retry cannot change
 * (403, 404, 412: the object changed) ends it at once.
 *
 * Errors: -EACCES (403), -ENOENT (404), -ESTALE (412: the object is not
 * the one asked for any more), -EIO (retries spent; d says the last
 * cause), LOADER_ETOOBIG (larger than the caller allowed), -ENOMEM,
 * -ECANCELED (s3_params.cancel was set), -ETIMEDOUT (s3_params.deadline_ms
 * passed: d names the request in flight and its last fault).
 * Every message names the object as s3://bucket/key. No secret is ever
 * put into a message.
 *
 * Not thread-safe: one struct s3 per thread.
 */
#ifndef LD_S3_H
#define LD_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "awscfg.h"
#include "diag.h"

#define S3_ETAG_MAX 80 /* quoted hex, or hex-N for a multipart object */
#define S3_KEY_MAX  1100

/* What a HEAD or GET says of an object. */
struct s3_obj {
	uint64_t size;
	char etag[S3_ETAG_MAX]; /* as the store sent it, quotes included */
};

struct s3_params {
	unsigned tries;		 /* attempts per request; 0: 6 */
	unsigned backoff_ms;	 /* first retry's backoff bound; 0: 100 */
	unsigned backoff_max_ms; /* 0: 5000 */
	unsigned connect_s;	 /* connect timeout; 0: 10 */
	/* A transfer slower than 1 KiB/s for this long is cut; 0: 30 */
	unsigned stall_s;
	unsigned parallel; /* requests in flight at once; 0: 8 */
	/* Multipart upload above this size, in parts of it; 0: 64 MiB */
	uint64_t part_bytes;
	/*
	 * Set (by another thread) when the caller no longer wants what is
	 * in progress: the operation ends within about 100 ms with
	 * -ECANCELED, its transfers dropped. NULL: never.
	 */
	const bool *cancel;
	/*
	 * When every operation must be over, on the CLOCK_MONOTONIC clock in
	 * milliseconds (clock.h): past it the operation in progress ends
	 * within about 100 ms with -ETIMEDOUT, its transfers dropped and no
	 * retry started, however long each request's own timeouts would
	 * have let it wait. 0: none.
	 */
	uint64_t deadline_ms;
};

struct s3;

/*
 * Call once per process before any thread makes a struct s3 (libcurl's
 * global state), and before anything else uses libcurl or OpenSSL. It
 * gives both an allocator that zeroes every block before freeing it, so
 * that the copies they make of a client's credentials (libcurl's user
 * name and password, the session token's header, the signing key, TLS
 * buffers) are wiped when they free them: by s3_free() at the latest.
 * OpenSSL takes it only before its first allocation; when something
 * made one earlier, its own buffers are freed unwiped (libcurl's copies
 * still are wiped). Returns 0 or -ENOMEM.
 */
int s3_global_init(void);

/*
 * A client for bucket at cfg's endpoint with cfg's credentials (copied;
 * s3_free() wipes the copy, and libcurl's copies are wiped as it frees
 * them, those its kept connections hold by s3_free(): see
 * s3_global_init()). p may be NULL (defaults). Returns 0 or a negative
 * code described in d.
 */
int s3_new(struct s3 **out, const struct aws_cfg *cfg, const char *bucket,
	   const struct s3_params *p, struct diag *d);
void s3_free(struct s3 *s);

/* The object's size and ETag. */
int s3_head(struct s3 *s, const char *key, struct s3_obj *o, struct diag *d);

/*
 * The whole object into fd from offset 0 (fd is truncated to its size).
 * With want (NULL: any), only that version (If-Match on its ETag, and
 * its size); got (may be NULL) receives what came. Above max bytes
 * (0: no bound) it fails with LOADER_ETOOBIG.
 */
int s3_get_fd(struct s3 *s, const char *key, int fd, uint64_t max,
	      const struct s3_obj *want, struct s3_obj *got, struct diag *d);

/*
 * The whole object into a malloc'd buffer (*buf, the caller frees it; a
 * NUL is added after its *len bytes), at most max bytes.
 */
int s3_get_mem(struct s3 *s, const char *key, size_t max, void **buf,
	       size_t *len, struct s3_obj *got, struct diag *d);

/* One object, or one range of it, of a batch fetched by s3_get_many(). */
struct s3_fetch {
	const char *key;
	int fd; /* written from offset 0, truncated to size; -1: HEAD only */
	/*
	 * With buf, only the len bytes from off, into buf (fd unused); with
	 * len and no buf, those bytes written into fd at off (not
	 * truncated). A ranged GET fails unless all of them came from the
	 * object want names.
	 */
	unsigned char *buf;
	uint64_t off, len;
	/*
	 * Called (on the caller's thread, inside s3_get_many()) as the body
	 * is written into fd: the bytes of the file up to end came, of the
	 * version want names. A retry writes them again from the start.
	 */
	void (*progress)(void *arg, uint64_t end);
	/*
	 * Called likewise with each piece of the body as it is written
	 * into fd, at the file's offset off (NULL: not called).
	 */
	void (*data)(void *arg, uint64_t off, const void *buf, size_t len);
	void *arg;
	struct s3_obj want; /* size and ETag; an empty etag: any */
	struct s3_obj got;  /* what came */
	int err;	    /* 0 or the object's error */
	char why[DIAG_MAX]; /* when err: what went wrong */
};

/*
 * Fetch n objects, up to the client's parallel count at once over its
 * kept-alive connections. Returns 0 when every one came (each f[i].err
 * 0), else the first failed one's error, with d naming it; every
 * object's own outcome is in f[i].
 */
int s3_get_many(struct s3 *s, struct s3_fetch *f, size_t n, struct diag *d);

/*
 * Fetch what next() hands out (it fills f and returns true; false: none
 * now), up to the client's parallel count at once, asking for the next
 * as soon as one ends, so that the store is never left with a slot
 * idle while others finish. done() is told of each one's outcome (f's
 * err, why and got, as for s3_get_many()); both run on the caller's
 * thread, inside this call. Returns 0 once next() has none and none is
 * in flight, or the run's error (-ECANCELED: cancelled), after done()
 * was told of each one still in flight, with that error.
 */
int s3_get_fed(struct s3 *s, bool (*next)(void *arg, struct s3_fetch *f),
	       void (*done)(void *arg, struct s3_fetch *f), void *arg,
	       struct diag *d);

/*
 * Store size bytes of fd (from offset 0) as key: one PUT up to the part
 * size, else a multipart upload whose parts go up in parallel, aborted
 * if it fails. Every part carries its Content-MD5, which the store
 * checks. o (may be NULL) receives the stored ETag and size.
 */
int s3_put_fd(struct s3 *s, const char *key, int fd, uint64_t size,
	      struct s3_obj *o, struct diag *d);

/*
 * Delete the object key; one that is not there is no error (S3's own
 * answer). -EACCES when the store refuses.
 */
int s3_delete(struct s3 *s, const char *key, struct diag *d);

/* From now on, end operations when *cancel is set (NULL: never). */
void s3_set_cancel(struct s3 *s, const bool *cancel);

/* Requests made and retried, and bytes received, since s3_new(). */
struct s3_counts {
	uint64_t requests, retries, bytes_in, bytes_out;
};
struct s3_counts s3_counts(const struct s3 *s);

#endif /* LD_S3_H */
