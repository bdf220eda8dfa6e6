/*
 * verify.h - check every record of a shard: checksum, structure, and
 * that every field decodes (zstd frames, JPEG images, tensor sizes).
 *
 * Records are read sequentially in large chunks; a bad record is reported
 * through a callback and the scan goes on, so one pass names every bad
 * record. Only I/O errors stop a scan.
 */
#ifndef LD_VERIFY_H
#define LD_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "shard.h"

struct verify_ctx;

/* Called once per bad record; msg names file, record and offset. */
typedef void (*verify_bad_fn)(void *arg, const struct shard *sh, uint64_t index,
			      int err, const char *msg);
/* Called as records are done, with the bytes of records done since last. */
typedef void (*verify_progress_fn)(void *arg, uint64_t bytes);

struct verify_opts {
	bool decode; /* decode every field, not only checksums */
	/*
	 * Largest JPEG (width x height) decoded; 0: the default, which is a
	 * stream's default too. JPEG fields are decoded by the decoder a
	 * stream uses, so with a stream's limit a record is bad here when a
	 * stream would find it bad, for the same reason.
	 */
	uint64_t max_pixels;
	verify_bad_fn bad;
	verify_progress_fn progress;
	void *arg;
};

struct verify_stats {
	uint64_t records; /* records checked */
	uint64_t bad;	  /* of which bad */
	uint64_t bytes;	  /* record bytes read */
	/* JPEG payloads with restart segments, every segment walked */
	uint64_t jpeg_segmented;
};

/*
 * A context holds the read buffer and decode scratch; reuse it across
 * shards. Not thread-safe. Returns 0 or -ENOMEM.
 */
int verify_ctx_new(struct verify_ctx **out);
void verify_ctx_free(struct verify_ctx *vc);

/*
 * Verify every record of sh (read from its fd), adding to st. Returns 0
 * when the scan completed (bad records are counted in st, not errors),
 * or a negative code for an I/O error, described in d.
 */
int verify_shard(struct verify_ctx *vc, const struct shard *sh, int fd,
		 const struct verify_opts *o, struct verify_stats *st,
		 struct diag *d);

#endif /* LD_VERIFY_H */
