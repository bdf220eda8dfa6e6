/*
 * loader.h - the public interface of loaderd's client library (libloader).
 *
 * The public interface is this header and loader_error.h, which it
 * includes (the error codes and loader_strerror(), shared by every layer
 * of the project); both depend on nothing but the C library.
 *
 * Conventions: every function that acts returns 0 (or a count) on success
 * and a negative error code on failure: either -errno, or one of the
 * LOADER_E* codes of loader_error.h, which live in a range that no errno
 * reaches. loader_strerror() describes both.
 *
 * A struct loader is one stream from the daemon: loader_open() connects,
 * hands the daemon the dataset's files (opened here, with the caller's
 * permissions) and maps the stream's batch ring. loader_next() returns a
 * view of the next batch straight in that shared memory; the view stays
 * valid until loader_release() gives the slot back. The library links no
 * libuv or liburing; it is not thread-safe per handle (one consumer
 * thread per stream).
 */
#ifndef LOADER_H
#define LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "loader_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The library's version. LOADER_VERSION is what this header describes;
 * loader_version() what the library that was loaded implements. A
 * program built against major M runs with any library of major M and a
 * minor at least as high as its own (the structs below only grow, at
 * their end, and their size field tells the library which layout the
 * caller knows).
 */
#define LOADER_VERSION_MAJOR 1
#define LOADER_VERSION_MINOR 7
#define LOADER_VERSION	     (LOADER_VERSION_MAJOR * 1000 + LOADER_VERSION_MINOR)

/* Sample orders (doc/design.md, "Sample order"). */
enum loader_order {
	LOADER_ORDER_SEQUENTIAL = 0,
	LOADER_ORDER_RANDOM = 1,
	LOADER_ORDER_QUASI = 2,
};

/* Element types of outputs; the numbers are those of the shard format. */
enum loader_dtype {
	LOADER_DTYPE_U8 = 1,
	LOADER_DTYPE_I8 = 2,
	LOADER_DTYPE_U16 = 3,
	LOADER_DTYPE_I16 = 4,
	LOADER_DTYPE_U32 = 5,
	LOADER_DTYPE_I32 = 6,
	LOADER_DTYPE_U64 = 7,
	LOADER_DTYPE_I64 = 8,
	LOADER_DTYPE_F16 = 9,
	LOADER_DTYPE_F32 = 10,
	LOADER_DTYPE_F64 = 11,
};

/* What a sample that cannot be decoded does to its stream. */
enum loader_bad {
	/* The stream stops; loader_next() returns LOADER_ESTREAM and
	 * loader_reason() names the sample (shard and record). */
	LOADER_BAD_FAIL = 0,
	/* The sample is counted (loader_stats().daemon_bad_samples),
	 * logged by the daemon the first time, and its place in the batch
	 * is taken by the next good sample of the same batch (its copy,
	 * id included), so batches stay full and their contents stay a
	 * function of the order alone. A batch with no good sample fails
	 * the stream. */
	LOADER_BAD_SKIP = 1,
};

#define LOADER_MAX_OUTPUTS 8
#define LOADER_MAX_DIMS	   5
#define LOADER_MAX_MEMBERS 32 /* of a mixture */

/*
 * How a mixture's member says how many samples it gives each epoch, in
 * Mosaic Streaming's terms (libloader(3), Mixtures). Either every member
 * of a mixture gives a proportion or none does.
 */
enum loader_mix_how {
	/* value > 0: its share of the epoch; the shares need not add up
	 * to 1 (each is taken over their sum). */
	LOADER_MIX_PROPORTION = 0,
	/* value > 0: times its own samples, floor(value * size): 0.5 is a
	 * half of it drawn afresh each epoch, 3 is three copies. */
	LOADER_MIX_REPEAT = 1,
	/* value: that many samples, a whole number >= 1. */
	LOADER_MIX_CHOOSE = 2,
};

/*
 * One member of a mixture (loader_opts.members, since 1.6): a dataset as
 * loader_open() takes one, and how many samples it gives an epoch. The
 * strings are the caller's, read during loader_open() only.
 *
 * The struct may grow at its end in a later minor release: the caller
 * says which layout it knows in loader_opts.member_size (which
 * LOADER_OPTS_INIT sets), as loader_opts.size does for loader_opts.
 */
struct loader_member {
	/* A dataset directory, .tar or LMDB file, or s3:// URL (not a
	 * mixture file: mixtures do not nest). */
	const char *dataset;
	uint32_t how;	   /* enum loader_mix_how */
	uint32_t reserved; /* 0 */
	double value;
	/* This member's image pipeline; NULL or "": loader_opts.pipeline. */
	const char *pipeline;
};

/*
 * Stream options. Initialise with LOADER_OPTS_INIT (or zero and set
 * size), then set what you need: every other zero field means its
 * default.
 */
struct loader_opts {
	/*
	 * sizeof(struct loader_opts) as the caller was compiled: the
	 * library reads only that much and takes later fields as zero, and
	 * refuses a larger struct whose unknown tail is not zero.
	 */
	uint32_t size;
	/* Daemon socket; NULL: $LOADERD_SOCKET, else
	 * $XDG_RUNTIME_DIR/loaderd.sock if a socket is there, else
	 * /run/loaderd/loaderd.sock. */
	const char *socket_path;
	/*
	 * Outputs, comma-separated: FIELD[:CAST], CAST being "unit" (u8 to
	 * f32 in [0,1]) or "f32" (integer to f32). NULL: every field of the
	 * schema as stored, but those named "__..." (the record's source
	 * name, "__key__"), which come only when named. E.g.
	 * "image:unit,label". A jpeg field is
	 * delivered through the pipeline below, with no CAST.
	 */
	const char *outputs;
	/*
	 * The image pipeline for jpeg fields (loaderd(8), "PIPELINE"), e.g.
	 * "decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw".
	 * NULL: none; then a jpeg field cannot be an output.
	 */
	const char *pipeline;
	uint32_t on_bad;     /* enum loader_bad; default LOADER_BAD_FAIL */
	uint32_t batch_size; /* default 256 */
	uint32_t order;	     /* enum loader_order; default sequential (0) */
	uint64_t seed;
	uint32_t epochs; /* 0: endless */
	uint32_t start_epoch;
	uint32_t rank, world; /* world 0 means 1 */
	uint32_t drop_last;
	uint32_t ring_slots;	 /* a power of two; default 8, or fewer (down
				    to 2) where 8 exceed the daemon's --max-ring */
	uint64_t prefetch_bytes; /* default 64 MiB */
	uint32_t threads;	 /* decode threads; default: the daemon's */
	uint32_t direct;	 /* 1: the daemon reads with O_DIRECT (bypassing
			   the page cache; for datasets larger than RAM) */
	int timeout_ms;		 /* for connect and replies; default 10000 */
	/*
	 * The first batch of start_epoch to deliver (0..batches per epoch
	 * - 1): a stream resumed at (start_epoch, start_batch) delivers the
	 * very batches an uninterrupted one would from there on.
	 */
	uint64_t start_batch;
	/* ---- 1.1 ---- */
	/*
	 * NULL, or the stream's name (1..63 bytes, no '/' or control
	 * characters), scoped to the calling user. The daemon saves a named
	 * stream's position in its state directory as batches are released
	 * (libloader(3), NAMED STREAMS), and a stream opened again under the
	 * name resumes at the first batch not released: start_epoch and
	 * start_batch are then the saved ones, and loader_start() says so.
	 * A saved stream of another dataset, or with another batch size,
	 * order, seed or drop_last, is refused with the reason. The ranks
	 * of a job share its name; opened with another world, the job goes
	 * on from where each old rank stopped (libloader(3), elastic
	 * resume).
	 */
	const char *name;
	/* With a name: drop what is saved and start where asked. */
	uint32_t fresh;
	/*
	 * When the daemon goes away (a crash, a restart, a package upgrade),
	 * loader_next() connects again for up to reconnect_ms, sends the
	 * dataset's files again and goes on at the first batch not
	 * released, instead of returning -EPIPE. 0: the default, which is
	 * LOADER_RECONNECT_DEFAULT_MS for a named stream and never for
	 * another (since 1.5; before, 0 was never for all);
	 * LOADER_RECONNECT_NEVER: never. Meant for named streams,
	 * whose position the daemon keeps; without a name the stream goes on
	 * where this client counts. Batches held then stay valid (the old
	 * ring stays mapped until they are released); the daemon delivers
	 * them again first and libloader releases those copies in their
	 * place as the caller releases them, so loader_next() returns the
	 * batch after them. A second loss of the daemon while batches from
	 * before the first are still held returns -EPIPE.
	 */
	int reconnect_ms;
	/* ---- 1.2 ---- */
	/*
	 * Room in each batch for a ragged output's values (bytes fields:
	 * struct loader_tensor, loader_offsets()), in bytes; 0: the
	 * daemon's default, batch_size times the larger of the dataset's
	 * largest record and twice the field's mean size, at most 64 MiB.
	 * A batch whose values do not fit fails the stream, naming the
	 * sample (with on_bad = skip, one value larger than all the room is
	 * a bad sample). At most 1 GiB. A program built against 1.1 does
	 * not know ragged outputs: it is refused bytes fields, as before.
	 */
	uint64_t ragged_bytes;
	/* ---- 1.3 ---- */
	/*
	 * With a name: go on from where every rank of the job's earlier
	 * world stopped, as the trainer's checkpoint keeps them, instead of
	 * from what this daemon saved. A daemon keeps the positions of the
	 * ranks that ran on its node only; a job restarted with another
	 * world on several nodes gathers them (e.g. all_gather at each
	 * checkpoint) and gives every new rank all of them (libloader(3),
	 * "Elastic resume across nodes"). from_world ranks; rank r's next
	 * batch is (from_epoch[r], from_batch[r]): the epoch and index + 1
	 * of the last batch it released (0, 0 for a rank that released
	 * none). start_batch must be 0; start_epoch and epochs still say
	 * where the stream ends. 0: none (the default). from_plan and
	 * from_plan_end: loader_plan() of that world's ranks (all the
	 * same); a daemon that lacks a plan still in force refuses.
	 */
	uint32_t from_world;
	uint32_t from_plan_end;
	const uint32_t *from_epoch;
	const uint64_t *from_batch;
	uint64_t from_plan;
	/* ---- 1.4 ---- */
	/*
	 * 1: pad the epoch's end, as torch's DistributedSampler does. When
	 * the dataset's N samples do not divide among the world's ranks,
	 * ranks get ceil(N/world) samples each, those short of one taking a
	 * sample of the epoch again, so that every rank's last batch has
	 * the same size and none is empty (world 3, batch 101 and 10000
	 * samples: 1, 1 and 1 samples rather than 1, 0 and 0). Each repeat
	 * is the last sample of its rank's last batch, and
	 * loader_repeats() counts it, so that a loss can mask it; at most
	 * world - 1 samples an epoch come twice. Batch counts, positions
	 * and the other samples are those of an unpadded stream, so a named
	 * stream may be resumed with or without padding. No effect with
	 * drop_last, or when world divides N. 0: no padding (the default).
	 */
	uint32_t pad;
	/* ---- 1.6 ---- */
	/*
	 * A mixture: one stream drawn from nmembers datasets (1 to
	 * LOADER_MAX_MEMBERS) at set proportions (libloader(3), Mixtures).
	 * loader_open()'s dataset is then only the mixture's name in
	 * messages, and may be NULL. A batch's ids are then each sample's
	 * index within its member, and loader_members() says which member.
	 * NULL and 0: one dataset (the default).
	 */
	const struct loader_member *members;
	uint32_t nmembers;
	/*
	 * sizeof(struct loader_member) as the caller was compiled, the
	 * stride of members[]: LOADER_OPTS_INIT sets it. Only read with
	 * members; the rules of size above apply to each member.
	 */
	uint32_t member_size;
	/*
	 * With proportions: the samples of an epoch of the mixture, all
	 * ranks; 0: the members' samples added up. Must be 0 without.
	 */
	uint64_t epoch_size;
};

/* loader_opts.reconnect_ms: a named stream's default, and never. */
#define LOADER_RECONNECT_DEFAULT_MS 60000
#define LOADER_RECONNECT_NEVER	    (-1)

/* clang-format off */
#define LOADER_OPTS_INIT  { .size = sizeof(struct loader_opts), \
			    .member_size = sizeof(struct loader_member) }
#define LOADER_STATS_INIT { .size = sizeof(struct loader_stats) }
/* clang-format on */

/*
 * One output of a batch: a view into the ring. The memory is this
 * stream's alone and mapped writable, so a consumer may modify a batch
 * in place while it holds it (the daemon never reads slot data back);
 * a write after loader_release() corrupts only batches of this stream.
 *
 * A ragged output (a bytes field: captions, JSON, encoded audio; or a
 * ragged tensor "tensor DTYPE [*,D2,...]": tokens, boxes) has shape
 * {count, LOADER_RAGGED, D2, ...}: dtype LOADER_DTYPE_U8 and ndim 2 for
 * a bytes field. Its samples' values lie back to back at data, `bytes`
 * of them in all, each a whole number of rows (D2 x ... elements), and
 * loader_offsets() gives where each begins, in bytes.
 */
#define LOADER_RAGGED UINT64_MAX

struct loader_tensor {
	const char *name;
	const void *data;
	uint32_t dtype; /* enum loader_dtype */
	uint32_t ndim;
	uint64_t shape[LOADER_MAX_DIMS]; /* shape[0] = count */
	size_t bytes;			 /* of this batch's data */
};

/*
 * A batch: valid from loader_next() until loader_release() (or
 * loader_close()). All pointers point into the shared ring.
 */
struct loader_batch {
	uint64_t seq;	/* number of the batch in the stream, from 0 */
	uint64_t index; /* within its epoch */
	uint32_t epoch;
	uint32_t count;	     /* samples */
	const uint64_t *ids; /* global sample index of each sample */
	uint32_t noutputs;
	struct loader_tensor out[LOADER_MAX_OUTPUTS];
};

struct loader_stats {
	/* sizeof(struct loader_stats) as the caller knows it, set by the
	 * caller: the library fills that much. */
	uint32_t size;
	uint32_t reserved;
	uint64_t batches; /* received by this client */
	uint64_t samples;
	uint64_t bytes;	  /* output bytes received */
	uint64_t wait_ns; /* time blocked in loader_next() */
	uint64_t batches_per_epoch;
	uint64_t dataset_samples;
	/* From the daemon (loader_stats() asks it): */
	uint64_t daemon_bytes_read;
	uint64_t daemon_bad_samples;
	uint64_t daemon_rss;
	/* ---- 1.2 ---- */
	/* Records of this stream the daemon's node cache served, and
	 * those it looked up there and read from storage. */
	uint64_t daemon_cache_hits;
	uint64_t daemon_cache_misses;
};

struct loader;

/*
 * Open a stream on the dataset directory `dataset` (made by loaderctl
 * pack; or a .tar or LMDB file or directory, an s3:// URL). Returns 0
 * and *out, or a negative code; the daemon's reason for a refusal is
 * copied to errbuf (errlen bytes, may be 0).
 *
 * A mixture (since 1.6) is opened either from opts->members (dataset is
 * then only its name in messages, and may be NULL) or from a mixture
 * file: a JSON file {"format": "loaderd-mixture", "version": 1, ...}
 * named by dataset, whose members' relative paths are taken from the
 * file's directory (libloader(3), Mixtures). A member refused here
 * returns LOADER_EUSAGE, a malformed file LOADER_EFORMAT, with a reason
 * naming the file, the member's number and the field.
 */
LOADER_API int loader_open(struct loader **out, const char *dataset,
			   const struct loader_opts *opts, char *errbuf,
			   size_t errlen);

/*
 * Wait up to timeout_ms (< 0: for ever) for the next batch and describe
 * it in *b. A client may hold up to ring slots - 1 batches at once
 * (loader_slots() - 1), released in the order they came. Returns 0,
 * -ETIMEDOUT, LOADER_EEND after the last epoch, LOADER_ESTREAM if the
 * daemon failed the stream, -EPIPE if the daemon went away, or -EBUSY
 * if that many batches are held.
 */
LOADER_API int loader_next(struct loader *l, struct loader_batch *b,
			   int timeout_ms);

/*
 * Give batch b's slot back to the daemon; b stops being valid. b must
 * be the oldest batch held: -EINVAL otherwise.
 */
LOADER_API int loader_release(struct loader *l, const struct loader_batch *b);

/*
 * The count + 1 byte offsets of ragged output k of batch b (held):
 * sample i's value is out[k].data + [off[i], off[i + 1]), off[0] is 0 and
 * off[count] is out[k].bytes. NULL if output k is not ragged or b is not
 * a batch held. They are in the ring, beside the values, and were
 * checked by loader_next() (rising, within the batch's room); like the
 * values, they are the caller's to spoil. Since 1.2.
 */
LOADER_API const uint64_t *loader_offsets(const struct loader *l,
					  const struct loader_batch *b,
					  uint32_t k);

/*
 * Counters, including the daemon's (one round trip). st->size must be
 * set (LOADER_STATS_INIT); fields past it are left alone.
 */
LOADER_API int loader_stats(struct loader *l, struct loader_stats *st);

/*
 * The stream's shape, known since loader_open() (no round trip):
 * batches per epoch, samples in the dataset (all ranks), and ring slots.
 */
LOADER_API uint64_t loader_batches_per_epoch(const struct loader *l);
LOADER_API uint64_t loader_samples(const struct loader *l);
LOADER_API uint32_t loader_slots(const struct loader *l);

/*
 * Where the stream started: *epoch and *batch (either may be NULL).
 * Returns 1 if that is a named stream's saved position (it resumed),
 * 0 if it is what the options asked for. Since 1.1.
 */
LOADER_API int loader_start(const struct loader *l, uint32_t *epoch,
			    uint64_t *batch);

/*
 * The plan the stream runs under: an elastic resume's record of how the
 * rest of an epoch was dealt to a new world. Returns its identity (0:
 * none) and sets *end_epoch (may be NULL) to one past the last epoch it
 * deals. A trainer that gathers its ranks' positions keeps these with
 * them and gives them back in from_plan and from_plan_end. Since 1.3.
 */
LOADER_API uint64_t loader_plan(const struct loader *l, uint32_t *end_epoch);

/*
 * Of batch b's count samples (held), how many at its end repeat a sample
 * the epoch delivered already: padding (loader_opts.pad), 0 or 1, and 0
 * in every batch but a rank's last of an epoch. The samples
 * 0..count - repeats - 1 are the epoch's own. -EINVAL if b is not a
 * batch held. Since 1.4.
 */
LOADER_API int loader_repeats(const struct loader *l,
			      const struct loader_batch *b);

/*
 * What the pipeline's batch stages (mixup, cutmix) drew for a batch:
 * its kind, the pair mode (sample i's partner: count - 1 - i for flip,
 * i - 1 and count - 1 for sample 0 for roll), lambda (the weight of a
 * sample's own pixels and label; cutmix's corrected to its box's area)
 * and cutmix's box, x0, y0, x1, y1 in pixels, ends exclusive. Kind
 * LOADER_MIX_NONE and lam 1 for a batch of a stream without them.
 */
enum loader_mix_kind {
	LOADER_MIX_NONE = 0,
	LOADER_MIX_MIXUP = 1,
	LOADER_MIX_CUTMIX = 2,
};

enum loader_pair {
	LOADER_PAIR_FLIP = 0,
	LOADER_PAIR_ROLL = 1,
};

struct loader_mix {
	uint32_t kind; /* enum loader_mix_kind */
	uint32_t pair; /* enum loader_pair */
	double lam;
	uint32_t box[4];
};

/*
 * Batch b's draw (held) into *m. Returns 0; -EINVAL if b is not a batch
 * held; LOADER_EPROTO if the slot's values are out of range (the slot is
 * the caller's to spoil: they are checked, never trusted). Since 1.5.
 */
LOADER_API int loader_mix(const struct loader *l, const struct loader_batch *b,
			  struct loader_mix *m);

/*
 * A mixture's batch b (held): the member each of its count samples came
 * from, 0..loader_nmembers() - 1 (in the order of loader_opts.members or
 * of the file); b->ids are then each sample's index within its member.
 * NULL for a stream of one dataset, or if b is not a batch held. They lie
 * in the ring, beside the ids, and were checked by loader_next(); like
 * the ids they are the caller's to spoil. Since 1.6.
 */
LOADER_API const uint32_t *loader_members(const struct loader *l,
					  const struct loader_batch *b);

/* The members of the stream's mixture; 0 for one dataset. Since 1.6. */
LOADER_API uint32_t loader_nmembers(const struct loader *l);

/*
 * Batches of epoch `epoch` for this rank: loader_batches_per_epoch(),
 * except in a named mixture whose weights changed part-way through an
 * epoch, where the epochs from the next one no rank had begun have the
 * new weights' number (libloader(3), "Mixtures"). Since 1.7.
 */
LOADER_API uint64_t loader_batches_in_epoch(const struct loader *l,
					    uint32_t epoch);

/* LOADER_VERSION of the library that was loaded. */
LOADER_API int loader_version(void);

/* The daemon's reason for the last failure; never NULL. */
LOADER_API const char *loader_reason(const struct loader *l);

/* End the stream and free everything. NULL is a no-op. */
LOADER_API void loader_close(struct loader *l);

#ifdef __cplusplus
}
#endif

#endif /* LOADER_H */
