/*
 * stream.h - one stream of batches: read, decode and assemble samples
 * into places that a sink provides.
 *
 * A stream owns the dataset's file descriptors and two threads:
 *  - the reader (reader.c) walks the order (order.h) ahead of the
 *    consumer, within the prefetch byte budget: for each batch it merges
 *    adjacent records into extents and reads them with io_uring into a
 *    circular arena;
 *  - the assembler (assemble.c) takes read batches in order, asks the
 *    sink for the place of the next batch, has the shared worker pool
 *    (pool.h) decode every sample straight into it, and hands it back.
 * The sink is the daemon's ring producer; this module knows nothing of
 * the wire or of shared memory. Memory is bounded by the prefetch budget
 * + fixed per-worker scratch, all allocated by stream_new().
 */
#ifndef LD_STREAM_H
#define LD_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "dsopen.h"
#include "mix.h"
#include "mixture.h"
#include "order.h"

struct nodecache;

#define STREAM_MAX_OUTPUTS 8
#define STREAM_NAME_MAX	   32 /* of an output's field name, NUL included */
#define STREAM_MAX_DIMS	   4  /* of one sample of an output */
#define STREAM_MAX_BATCH   65536
#define STREAM_MAX_WORLD   65536
/* Room for one ragged output's values in a batch, at most. */
#define STREAM_MAX_RAGGED (1ull << 30)
/* ... and by default at most (stream_config.ragged_bytes). */
#define STREAM_DEFAULT_RAGGED_MAX (64ull << 20)

/* How a tensor field becomes an output. */
enum stream_cast {
	STREAM_CAST_NONE = 0,	  /* the field's own dtype and bytes */
	STREAM_CAST_F32_UNIT = 1, /* u8 -> f32 in [0,1] (x / 255) */
	STREAM_CAST_F32 = 2,	  /* integer -> f32, value kept */
};

/* What a sample that cannot be decoded does to its stream. */
enum stream_bad {
	STREAM_BAD_FAIL = 0, /* the stream ends with an error naming it */
	STREAM_BAD_SKIP = 1, /* counted, logged once, replaced in its batch */
};

struct stream_output {
	char field[STREAM_NAME_MAX]; /* schema field name */
	enum stream_cast cast;
};

/* The prefetch budget of a stream that names none. */
#define STREAM_DEFAULT_PREFETCH (64ull << 20)
#define STREAM_DEFAULT_BATCH	256 /* samples, when batch_size is 0 */

/*
 * One dataset of a mixture (stream_config.members): its files and where
 * they come from, as stream_config says them for a stream of one
 * dataset, and how many samples it gives an epoch (mixture.h).
 */
struct stream_member {
	int *fds; /* taken by stream_new(), as its fds are */
	uint32_t nfds;
	bool tar, lmdb;
	char *const *tar_labels;
	struct s3read *s3read;	   /* taken, as stream_config's */
	struct s3fill *s3fill;	   /* taken */
	struct shardid *shard_ids; /* taken */
	const char *origin;
	/* The member's image pipeline; NULL: the stream's. */
	const char *pipeline;
	/* Where the client found it (its path or URL), for messages. */
	const char *label;
	enum mixture_how how;
	double value;
};

/*
 * What stream_new() does with a member it does not open: close its files
 * and drop its stores. For a caller that cannot give it one after all.
 */
void stream_member_drop(const struct stream_member *m);

/* What a stream delivers; every value is checked by stream_new(). */
struct stream_config {
	uint32_t batch_size; /* 1..STREAM_MAX_BATCH; 0: default (256) */
	enum order_kind order;
	uint64_t seed;
	uint32_t epochs; /* 0: endless */
	uint32_t start_epoch;
	/* The first batch of start_epoch (< batches per epoch): resuming
	 * there delivers what an uninterrupted stream would. */
	uint64_t start_batch;
	uint32_t rank, world; /* rank < world <= STREAM_MAX_WORLD; 0: 1 */
	/*
	 * Elastic resume (order.h), read by stream_new() only. plan: the
	 * job's plan so far, or NULL. from_world: 0, or the world whose
	 * ranks stopped at from_epoch[r], from_batch[r] (from_world entries
	 * each): the stream goes on from there with its own world, makes
	 * the new plan (stream_plan()) and starts at the first batch of the
	 * least of those epochs (start_epoch must be that epoch; start_batch
	 * is ignored). In a planned epoch the stream starts no earlier than
	 * the epoch's first batch; stream_begins() says where it starts.
	 */
	const uint64_t *plan;
	size_t plan_words;
	uint32_t from_world;
	const uint32_t *from_epoch;
	const uint64_t *from_batch;
	bool drop_last;
	/*
	 * Fill the ranks short of a sample at the end of an epoch with a
	 * repeat, so that every rank's last batch has the same size (order.h,
	 * padding); no effect with drop_last.
	 */
	bool pad;
	/*
	 * The dataset is WebDataset tars read in place (wds.h): every fd is
	 * a tar, one shard each, in the client's order (no manifest). Their
	 * indexes are made by one scan each and kept through index (NULL:
	 * scanned for every stream), keyed by each file's device and inode,
	 * and made again when its size or modification time changed.
	 */
	bool tar;
	/*
	 * The dataset is an LMDB database read in place (lmdbds.h): fd 1 its
	 * data file, indexed as a tar is, by a scan in a child process.
	 */
	bool lmdb;
	const struct recindex_store *index;
	/*
	 * Tars or LMDB: each file's name for messages (nfds - 1 of them, as
	 * the client named them), or NULL: "tar-NNNNN". Copied.
	 */
	char *const *tar_labels;
	/*
	 * The node cache (nodecache.h), or NULL: records found there are not
	 * read, records read are added while it has room.
	 */
	struct nodecache *cache;
	/*
	 * Shards of an object-store dataset read in place (s3read.h), or
	 * NULL. The stream takes it (stream_new() frees it, even when it
	 * fails): the reader asks it for those shards' records, and their
	 * descriptors hold only header and footer.
	 */
	struct s3read *s3read;
	/*
	 * An object-store dataset's shards still arriving in the shard
	 * cache (s3fill.h), or NULL. The stream takes this reference
	 * (stream_new() drops it, even when it fails), and cancels their
	 * fetch when it ends: the reader waits for the bytes it reads.
	 */
	struct s3fill *s3fill;
	/*
	 * An object-store dataset's shards' identities in the node cache
	 * (shardid.h), or NULL. The stream takes it (stream_new() frees it,
	 * even when it fails).
	 */
	struct shardid *shard_ids;
	/*
	 * Where the shards are, for messages, or NULL: an object-store
	 * dataset's URL (s3://bucket/prefix), so that a shard's errors
	 * name its object. Used by stream_new() only.
	 */
	const char *origin;
	bool direct;		 /* read the shards with O_DIRECT */
	uint32_t io_depth;	 /* reads in flight, 1..64; 0: 64 */
	uint64_t prefetch_bytes; /* 0: default (64 MiB) */
	/*
	 * The most memory the stream may hold beside its ring: prefetch
	 * arena and decode scratch (0: no limit). Above it stream_new()
	 * fails with LOADER_ETOOBIG before allocating, the parts named.
	 */
	uint64_t max_mem;
	const char *max_mem_why; /* what sets max_mem, for the reason */
	uint32_t threads;	 /* decode threads of the pool; 0: all */
	enum stream_bad on_bad;
	/* 0: every field as stored; else the outputs, in order. */
	uint32_t noutputs;
	struct stream_output out[STREAM_MAX_OUTPUTS];
	/*
	 * The sink takes ragged outputs (bytes fields): without it they are
	 * refused. ragged_bytes: room for each one's values in a batch
	 * (<= STREAM_MAX_RAGGED); 0: batch_size times the larger of the
	 * dataset's largest record and twice the field's mean size, rounded
	 * up to 64 and at most STREAM_DEFAULT_RAGGED_MAX. A batch whose
	 * values do not fit fails the stream, naming the sample and the
	 * option; with the skip policy, one sample larger than the whole
	 * room is a bad sample.
	 */
	bool ragged;
	uint64_t ragged_bytes;
	/* The image pipeline (ispec.h) of jpeg outputs; NULL or "": none. */
	const char *pipeline;
	uint64_t max_pixels; /* of a JPEG; 0: JROI_DEFAULT_MAX_PIXELS */
	/*
	 * Time every stage of every sample (stream_stages()): two clock
	 * reads a stage, worth it for a benchmark, not for a tiny sample.
	 */
	bool timing;
	const char *label; /* for logs, e.g. "session 3 (pid 42 ...)" */
	/*
	 * A mixture (mixture.h): nmembers datasets, 1..MIXTURE_MAX_MEMBERS,
	 * whose samples share one order; stream_new() then takes no fds of
	 * its own, and tar, lmdb, tar_labels, s3read, s3fill, shard_ids and
	 * origin are the members'. Each member's outputs must have the same
	 * dtypes and shapes (its own pipeline may differ); ragged outputs
	 * and the batch stages are not (yet) mixed. epoch_size: with
	 * proportions, samples an epoch (0: the members' together).
	 */
	uint32_t nmembers;
	const struct stream_member *members;
	uint64_t epoch_size;
	/*
	 * A mixture whose counts changed part-way through an epoch of a
	 * named job, taking effect at the next one: the epochs before
	 * counts_from are dealt with the earlier weights `before` (its n
	 * the members'), those from counts_from on with the members'. Both
	 * give every rank at least one batch an epoch. 0 (before NULL):
	 * the members' hold for every epoch; a counts_from at or below
	 * start_epoch is the same. A plan, and the positions of another
	 * world, must lie before counts_from.
	 */
	uint32_t counts_from;
	const struct mixture_weights *before;
};

/*
 * One output of every batch, as stream_new() laid it out. A ragged one
 * (a bytes field: u8, one dimension; a ragged tensor [*,D1,...]: each
 * sample its own number of rows of row_bytes) has shape[0] 0,
 * sample_bytes 0 and room for `capacity` bytes of values a batch.
 * With batch stages in the pipeline (mix.h), the label output is f32
 * [classes] a sample: its soft labels.
 */
struct stream_tensor {
	char name[STREAM_NAME_MAX];
	uint32_t dtype; /* enum dtype (schema.h) */
	uint32_t ndim;	/* of one sample */
	uint64_t shape[STREAM_MAX_DIMS];
	uint64_t sample_bytes;
	bool ragged;
	uint64_t capacity;
	uint64_t row_bytes; /* ragged: a value is a whole number of these */
};

/* What every batch of a stream holds, and how many there are. */
struct stream_layout {
	uint32_t batch_size;
	uint64_t batches_per_epoch;
	uint64_t samples;	  /* of this rank, per epoch */
	struct order_sched sched; /* where each epoch starts (order.h) */
	/* Prefetch arena, decode scratch and indexes (index_bytes). */
	uint64_t mem_bytes;
	/*
	 * Of mem_bytes, what the dataset's indexes take: the shards'
	 * footers (or tars' indexes), and the memory holding the header and
	 * tail of each s3:// shard read in place.
	 */
	uint64_t index_bytes;
	uint32_t noutputs;
	struct stream_tensor out[STREAM_MAX_OUTPUTS];
	/* A mixture's members (stream_batch.members); 0 for one dataset. */
	uint32_t nmembers;
};

/*
 * The place of one batch, given by the sink. The sink sets ids (one u64
 * per sample: its global index) and out[] (each output's first sample;
 * sample i of output k is at out[k] + i * sample_bytes[k]); the stream
 * fills them and sets epoch, batch, count and repeats before publish(). A ragged
 * output k has room for capacity bytes at out[k] and batch_size + 1 u64
 * at off[k]: the stream writes count + 1 offsets there, sample i being
 * out[k] + [off[k][i], off[k][i + 1]).
 */
struct stream_batch {
	uint64_t *ids;
	/* A mixture's: each sample's member (its id is then its index
	 * within that member). NULL for one dataset. */
	uint32_t *members;
	unsigned char *out[STREAM_MAX_OUTPUTS];
	uint64_t *off[STREAM_MAX_OUTPUTS];
	/*
	 * Set by the stream: each output's sample shape in this batch (the
	 * layout's ndim, each dimension at most the layout's) and its bytes,
	 * the samples lying back to back from out[k]. They differ from the
	 * layout's only where a schedule makes an epoch's images smaller.
	 */
	uint64_t shape[STREAM_MAX_OUTPUTS][STREAM_MAX_DIMS];
	uint64_t sample_bytes[STREAM_MAX_OUTPUTS];
	uint32_t epoch;
	uint64_t batch; /* index within its epoch */
	uint32_t count; /* samples, <= batch_size */
	/* Of count, those at the end that repeat a sample of the epoch
	 * (padding, stream_config.pad): 0 or 1. */
	uint32_t repeats;
	/* What the batch stages drew (mix.h); kind MIX_NONE without. */
	struct mix_draw mix;
};

/*
 * Where batches go. Each callback runs on the stream's assembler thread,
 * except cancel, which stream_free() calls on its caller's.
 */
struct stream_sink_ops {
	/*
	 * Wait for a free place for the next batch and describe it in b.
	 * Returns 0; -ECANCELED once cancel() has run; or another negative
	 * code after the sink has ended the stream itself (the stream then
	 * stops without calling finish()).
	 */
	int (*acquire)(void *ctx, struct stream_batch *b);
	/* The batch last acquired is complete: hand it to the consumer. */
	void (*publish)(void *ctx, const struct stream_batch *b);
	/*
	 * The stream ends: err 0 after its last batch, else it failed and
	 * reason (never NULL then) says why. No callback follows.
	 */
	void (*finish)(void *ctx, int err, const char *reason);
	/* Make a waiting acquire() return -ECANCELED, now and from now on. */
	void (*cancel)(void *ctx);
};

struct stream_sink {
	const struct stream_sink_ops *ops;
	void *ctx;
};

struct pool;
struct stream;

/* Counters, read while the stream runs. */
struct stream_stats {
	uint64_t batches; /* handed to the sink */
	uint64_t samples;
	uint64_t bytes_read;   /* from storage */
	uint64_t reads;	       /* read requests: merged neighbours count once */
	uint64_t cache_hits;   /* records served by the node cache */
	uint64_t cache_misses; /* records looked up there and read */
	/*
	 * Batches the assembler made itself, every record in the node
	 * cache: no reader thread between (reader.c, hand_over()).
	 */
	uint64_t served;
	uint64_t bad_samples;
	/*
	 * Where the assembler's time goes, batch after batch: waiting for
	 * the reader to bring a batch's records (storage is the limit),
	 * decoding them on the pool (the CPU is), and waiting for the sink
	 * to give a place (the consumer is).
	 */
	uint64_t read_wait_ns;
	uint64_t decode_ns;
	uint64_t slot_wait_ns;
	uint32_t epoch; /* of the batch handed over last */
};

/*
 * Check c's values, each against its range (batch size, order, rank
 * below world and world at most STREAM_MAX_WORLD, bad-sample policy,
 * outputs, epochs, prefetch) without touching the dataset: what
 * stream_new() checks first, for a caller that uses them before (the
 * daemon's named streams index by rank). Returns 0 or LOADER_EUSAGE
 * described in d.
 */
int stream_config_check(const struct stream_config *c, struct diag *d);

/*
 * Create a stream over the dataset in fds (the manifest, then every
 * shard in the manifest's order): parse the manifest, open and check
 * every shard, build the order and lay out the batches. It reads files
 * and allocates the prefetch budget: call it off any event loop. The
 * stream takes the descriptors (not the array) whatever happens.
 * Returns 0, or LOADER_EUSAGE for a bad config, a shard format error or
 * -ENOMEM, described in d.
 */
int stream_new(struct stream **out, const struct stream_config *c, int *fds,
	       uint32_t nfds, struct pool *pool, struct diag *d);

/* The batch layout; valid for the life of the stream. */
const struct stream_layout *stream_layout(const struct stream *s);

/*
 * Where the stream begins (its first batch) and how many epochs it runs
 * from there (0: endless): the configuration's, moved on to a planned
 * epoch's first batch, and past an epoch with nothing left.
 */
void stream_begins(const struct stream *s, uint32_t *epoch, uint64_t *batch,
		   uint32_t *epochs);

/*
 * The stream's plan (order.h) into *plan and *words: the one it was
 * given, or the one it made to resume from from_world; NULL and 0 for
 * none. Valid for the life of the stream.
 */
void stream_plan(const struct stream *s, const uint64_t **plan, size_t *words);

/*
 * Start the reader and assembler, which hand batches to sink (the sink
 * must outlive the stream). Returns 0 or -errno, described in d.
 */
int stream_start(struct stream *s, const struct stream_sink *sink,
		 struct diag *d);

/*
 * Stop the threads (if started: it cancels the sink's acquire and joins
 * them, so it waits for the batch being decoded) and free everything.
 * Call it off any event loop. NULL is a no-op.
 */
void stream_free(struct stream *s);

/* A mixture's: summed over its members. */
void stream_stats(const struct stream *s, struct stream_stats *st);

/* Members of a mixture; 0 for a stream of one dataset. */
uint32_t stream_members(const struct stream *s);

/*
 * Member m of a mixture: what it read and its bad samples (st's
 * bytes_read, reads, cache_hits, cache_misses, bad_samples), the samples
 * of it delivered (st->samples), and its label and per-epoch count.
 */
void stream_member_stats(const struct stream *s, uint32_t m,
			 struct stream_stats *st, const char **label,
			 uint64_t *per_epoch);

/*
 * Where the decoding threads' time went, summed over threads, with
 * stream_config.timing (zeros without): decode (record parse, JPEG
 * header and entropy decode, zstd), augment (crop, resize, flip) and
 * emit (normalize, cast, copy into the batch). Exact once the stream has
 * finished (the sink saw finish()); while it runs, a figure may lag.
 */
struct stream_stages {
	uint64_t decode_ns;
	uint64_t augment_ns;
	uint64_t emit_ns;
};

void stream_stages(const struct stream *s, struct stream_stages *t);

/*
 * CPU time of the stream's reader and assembler threads (the assembler's
 * includes its share of decoding), in nanoseconds, as of each one's last
 * batch; with stream_config.timing only (zeros without). It tells a
 * reader that computes (reads served from the page cache) from one that
 * waits for the device.
 */
void stream_thread_cpu(const struct stream *s, uint64_t *reader_ns,
		       uint64_t *assembler_ns);

#endif /* LD_STREAM_H */
