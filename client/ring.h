/*
 * ring.h - the batch ring in shared memory, shared by loaderd and libloader.
 *
 * Two memfds per stream:
 *  - the ring: a header page, then ring_slot_count slots of slot_size
 *    bytes. The daemon writes it and never reads any of it back (it
 *    works from its own copy of the layout); it seals the memfd against
 *    resizing. The client maps the ring read-write, header and slots
 *    alike (the header's copy of the producer index is a hint to wait
 *    on, never read back by the daemon), so that a consumer may modify a
 *    batch it holds in place
 *    (a Python user's x.sub_(1)): the memfd is this stream's alone, so
 *    such a write can reach no other client, and writing where it should
 *    not corrupts only this stream's batches.
 *  - the consumer page: the only memory the client writes. It holds the
 *    consumer index, which the daemon treats as untrusted input: it only
 *    ever moves forward, by at most the number of published batches.
 *
 * Indices are free-running 32-bit counters (compare with (int32_t)(a-b)).
 * Batch k lives in slot k % slot_count; slot_count is a power of two so
 * that this holds across the wrap of the indices. The daemon fills slot prod%n only
 * while prod - cons < n, then publishes it by storing prod+1 (release).
 * The client reads slot cons%n after seeing prod != cons (acquire), and
 * gives it back by storing cons+1 (release).
 *
 * A named stream's release is durable: the client stores cons, wakes the
 * daemon's saver if `saver_waiting` is set, and waits (spinning, then on
 * the futex `saved`) until the daemon has written the position and
 * stored `saved` past it.
 *
 * Waiting: the client spins briefly, then sets `client_waiting` and waits
 * with FUTEX_WAIT on `prod`; the daemon wakes it after publishing if the
 * flag is set. The daemon, when the ring is full, sets `daemon_waiting`
 * and waits on `cons` with a timeout; the client wakes it after a release
 * if that flag is set. Both sides store their index and then read the
 * other's flag with sequentially consistent atomics, so no wake-up is lost.
 * The mappings are shared between processes: FUTEX_WAIT/WAKE without the
 * PRIVATE flag.
 */
#ifndef LOADER_RING_H
#define LOADER_RING_H

#include <stdint.h>

#include "proto.h"

#define RING_MAGIC 0x47524c4cu /* "LLRG" in memory */
#define RING_VERSION                                                           \
	8 /* 2: slots writable by the client; 3: saved; 4: ragged outputs;
	     5: the slot's repeats; 6: the slot's shapes and mix;
	     7: a mixture's members; 8: counts_from, later_batches */
#define RING_PAGE     4096
#define RING_MAX_DIMS 5
#define RING_ALIGN    64 /* of slot_size, and of every output within a slot */
/* shape[1] of a ragged output: each sample has its own length there. */
#define RING_RAGGED UINT64_MAX

enum ring_state {
	RING_RUNNING = 0,
	RING_END = 1,	 /* all epochs delivered */
	RING_FAILED = 2, /* the stream stopped: error and reason say why */
};

/*
 * Element types of outputs: the shard format's numbers. libloader ties
 * them to LOADER_DTYPE_*, the daemon to its pipeline's, at compile time.
 */
enum ring_dtype {
	RING_DTYPE_U8 = 1,
	RING_DTYPE_I8 = 2,
	RING_DTYPE_U16 = 3,
	RING_DTYPE_I16 = 4,
	RING_DTYPE_U32 = 5,
	RING_DTYPE_I32 = 6,
	RING_DTYPE_U64 = 7,
	RING_DTYPE_I64 = 8,
	RING_DTYPE_F16 = 9,
	RING_DTYPE_F32 = 10,
	RING_DTYPE_F64 = 11,
};

/*
 * One output of every batch, as the ring header describes it.
 *
 * A ragged output (RING_OUT_RAGGED: a bytes field or a ragged tensor, one
 * value of its own length per sample) has shape [batch size, RING_RAGGED,
 * D2, ...], its values `row` bytes a row (the dtype's size times D2...:
 * 1 for a bytes field's u8); its samples lie
 * back to back in `bytes` bytes at `offset`, and at `index` the slot
 * holds count + 1 u64 byte offsets into them: sample i is
 * [index[i], index[i + 1]). The daemon writes them before it publishes;
 * the client checks them (rising, within `bytes`, whole rows) before it
 * hands the batch out.
 */
struct ring_output {
	char name[PROTO_NAME_MAX];
	uint32_t dtype;		       /* enum ring_dtype */
	uint32_t ndim;		       /* including the batch dimension */
	uint64_t shape[RING_MAX_DIMS]; /* shape[0] = batch size */
	uint64_t bytes;	 /* of a full batch; ragged: room for its values */
	uint64_t offset; /* from the start of a slot */
	uint64_t index;	 /* ragged: the offsets, from the start of a slot */
	uint32_t flags;	 /* RING_OUT_* */
	uint32_t reserved;
	uint64_t row; /* ragged: every offset is a multiple of it */
};

#define RING_OUT_RAGGED 1u

struct ring_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t slot_count;
	uint32_t noutputs;
	uint64_t slot_size;
	uint64_t slots_offset; /* RING_PAGE */
	uint64_t total_bytes;
	uint32_t batch_size;
	uint32_t epochs; /* 0: endless */
	uint64_t batches_per_epoch;
	uint32_t start_epoch;
	uint32_t flags;	     /* RING_NAMED, RING_MIXTURE */
	uint64_t ids_offset; /* u64 global sample index per sample, in a slot */
	/*
	 * A mixture (RING_MIXTURE): its members, and where a slot holds one
	 * u32 per sample, the member it came from (0..nmembers - 1); the
	 * sample's id is then its index within that member. 0 otherwise.
	 */
	uint64_t members_offset;
	uint32_t nmembers;
	/*
	 * A mixture whose counts change at an epoch after start_epoch (a
	 * named job's new weights): the epochs from counts_from on have
	 * later_batches batches, not batches_per_epoch. 0 and 0 otherwise
	 * (both or neither).
	 */
	uint32_t counts_from;
	uint64_t later_batches;
	struct ring_output out[PROTO_MAX_OUTPUTS];
	/* Written by the daemon while the stream runs; each on its own line. */
	_Alignas(64) uint32_t prod; /* batches published */
	_Alignas(64) uint32_t daemon_waiting;
	_Alignas(64) uint32_t state;   /* enum ring_state */
	int32_t error;		       /* when RING_FAILED */
	char reason[PROTO_REASON_MAX]; /* NUL-terminated */
	/*
	 * A named stream (RING_NAMED): batches whose release the daemon has
	 * saved (state.h), and the flag its saver raises before it sleeps
	 * on cons. The client's release waits until saved reaches it, so
	 * that a release that returned is never delivered again.
	 */
	_Alignas(64) uint32_t saved;
	uint32_t saver_waiting;
};

/* ring_hdr.flags */
#define RING_NAMED   1u
#define RING_MIXTURE 2u

/* The consumer memfd's page: written by the client. */
struct ring_cons {
	_Alignas(64) uint32_t cons; /* batches released */
	_Alignas(64) uint32_t client_waiting;
};

/* The head of every slot; outputs and ids follow at their offsets. */
struct ring_slot {
	uint64_t seq; /* the batch's number in the stream (prod before publish) */
	uint64_t batch; /* index within its epoch */
	uint32_t epoch;
	uint32_t count; /* samples in this batch (<= batch_size) */
	/* Of count, those at the end that repeat a sample of the epoch
	 * (PROTO_OPEN_PAD). */
	uint32_t repeats;
	uint32_t reserved; /* 0 */
	/*
	 * Each output's shape in this batch: [count, the sample's
	 * dimensions], ndim as the header's, each sample dimension at most
	 * the header's (which sized the slot); the samples lie back to back
	 * at the output's offset. A schedule (progressive resizing) makes
	 * them smaller in some epochs. A ragged output's is the header's.
	 */
	uint64_t shape[PROTO_MAX_OUTPUTS][RING_MAX_DIMS];
	/*
	 * What the batch stages drew for this batch (mixup, cutmix: the
	 * pipeline's mix.h): kind RING_MIX_*, the pair mode (RING_PAIR_*),
	 * lambda (cutmix's corrected to the box's area) and cutmix's box
	 * x0, y0, x1, y1 (ends exclusive; 0 otherwise). Kind none, lam 1
	 * without them.
	 */
	struct ring_mix {
		uint32_t kind;
		uint32_t pair;
		double lam;
		uint32_t box[4];
	} mix;
};

enum ring_mix_kind {
	RING_MIX_NONE = 0,
	RING_MIX_MIXUP = 1,
	RING_MIX_CUTMIX = 2,
};

enum ring_pair {
	RING_PAIR_FLIP = 0,
	RING_PAIR_ROLL = 1,
};

_Static_assert(sizeof(struct ring_hdr) <= RING_PAGE, "ring header fits a page");

/* Index arithmetic, shared by both sides (and unit-tested on its own). */

/* The slot of batch k; slots is a power of two. */
static inline uint32_t ring_slot_of(uint32_t k, uint32_t slots)
{
	return k & (slots - 1);
}

/* Batches published and not released: exact across the 2^32 wrap. */
static inline uint32_t ring_pending(uint32_t prod, uint32_t cons)
{
	return prod - cons;
}

/*
 * May the producer accept consumer index cons, having published prod
 * batches and last seen last? It only moves forward, and never past prod
 * (then prod - cons, computed modulo 2^32, would exceed the slot count).
 */
static inline int ring_cons_valid(uint32_t prod, uint32_t cons, uint32_t last,
				  uint32_t slots)
{
	return (int32_t)(cons - last) >= 0 && prod - cons <= slots &&
	       prod - last <= slots;
}

#endif /* LOADER_RING_H */
