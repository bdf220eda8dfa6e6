/*
 * stream_priv.h - the state a stream's modules share: set-up and life
 * (stream.c), the reader (reader.c) and the assembler (assemble.c).
 * Nothing outside pipeline/stream*.c, reader.c and assemble.c includes it.
 */
#ifndef LD_STREAM_PRIV_H
#define LD_STREAM_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "diag.h"
#include "ispec.h"
#include "schema.h"
#include "stream.h"

/* O_DIRECT reads are whole blocks at block offsets into aligned memory. */
#define STREAM_DIRECT_ALIGN 4096
/* An x86-64 transparent huge page: the arena's alignment from this size on. */
#define STREAM_HUGE_PAGE (2u << 20)
/* Runs of records a quasi window may have to be read whole (reader.c). */
#define STREAM_WIN_RUNS 8
/*
 * The largest batch of plain copies the assembler gathers alone rather
 * than with the pool. A pool round (wake the threads, wait for the last
 * to leave) cost about 40 us per batch on two cores, while one thread
 * gathers about 5 GB/s of records from memory: the pool pays only for
 * batches of a few hundred KiB and more. Above this, copies go to the
 * pool like any decode.
 */
#define STREAM_LIGHT_MAX (1u << 20)
/* Bad samples a stream logs by name (skip policy); the rest are counted. */
#define STREAM_LOG_BAD_MAX 100

struct stream_out {
	uint32_t field;	       /* schema index */
	enum stream_cast cast; /* of a tensor field */
	uint64_t field_bytes;  /* unpacked field bytes per sample */
	uint64_t elems;	       /* elements per sample */
	uint32_t src_dtype;    /* the field's */
	uint32_t comp;	       /* the field's compression */
	bool image;	       /* a jpeg field through the image pipeline */
	bool ragged;	       /* a bytes field: values back to back */
	bool soft; /* the label output of the batch stages (mix.h) */
};

/*
 * One worker's stage times outside the image pipeline (which keeps its
 * own), written by that worker only; a line each, so that workers never
 * share one.
 */
struct stream_wtime {
	uint64_t decode_ns, emit_ns;
	unsigned char pad[64 - 2 * sizeof(uint64_t)];
};

/* A sample's record, for sorting a batch's reads by position. */
struct stream_ref {
	uint32_t shard;
	uint32_t k; /* position in the batch */
	uint64_t off;
	uint32_t len;
};

struct s3read_range;

/* One read: refs [first, last) of a shard, [off, end) of its file. */
struct stream_ext {
	uint32_t shard;
	uint32_t first, last;
	uint64_t off, end;
	unsigned char *buf; /* its place in the arena */
	uint64_t want;	    /* bytes the file has of [off, end) */
	uint64_t done;	    /* bytes read so far */
	int err;	    /* the read failed: 0 or -errno */
};

/* One batch read ahead: where each sample's record sits in the arena. */
struct stream_pb {
	uint32_t epoch;
	uint32_t count;
	uint32_t repeats; /* of count, at the end: padding (order.h) */
	uint64_t batch;
	uint64_t arena_end; /* arena position freed after this batch */
	const unsigned char **rec;
	uint32_t *len;
	uint64_t *gidx;
	uint32_t *shard;
	uint64_t *ridx;
	int *rerr;    /* 0, or why the record could not be read */
	bool *cached; /* checked against its checksum already (node cache) */
	/*
	 * A mixture's member (stream_priv.h, seq): each sample's place in
	 * the mixture's batch and the seed of its random numbers (from its
	 * place in the epoch, so that a sample repeated in an epoch is
	 * augmented afresh each time). NULL otherwise.
	 */
	uint32_t *pos;
	uint64_t *sseed;
	bool last; /* no batch follows */
	int err;
	char msg[DIAG_MAX];
};

struct stream {
	/* c.pipeline, c.label and c.before point nowhere */
	struct stream_config c;
	char label[128];
	struct dataset *ds;
	int *fds;
	uint32_t nfds;
	struct shard **sh;
	struct recindex **wix;	    /* per shard, of a tar read in place */
	struct nodecache_set *cset; /* the node cache's set of these files */
	struct order *order;
	uint64_t *plan; /* the order's plan (order.h), or NULL */
	size_t plan_words;
	struct pool *pool;
	uint32_t nworkers; /* pool threads + the assembler */
	struct stream_layout lay;
	struct stream_out out[STREAM_MAX_OUTPUTS];
	/*
	 * Every output a plain copy of its field (stored, no cast, no
	 * image, not ragged) and a batch of at most STREAM_LIGHT_MAX bytes:
	 * a batch is a gather the assembler does alone (assemble.c).
	 */
	bool light;
	/*
	 * Of a light stream whose records all share one layout
	 * (shard_fixed_layout()): their length (0: no common layout),
	 * head (fix_hlen bytes) and each field's place. A record from the node cache with
	 * this length and head is copied from these places without
	 * parsing it (assemble.c).
	 */
	uint32_t fix_len, fix_hlen;
	uint32_t fix_off[SCHEMA_MAX_FIELDS];
	unsigned char fix_head[4 * SCHEMA_MAX_FIELDS];
	uint64_t max_field; /* largest unpacked field: scratch size */
	/*
	 * Ragged outputs (assemble.c): their count, each one's offsets of
	 * the batch being made ([noutputs][batch_size + 1], kept here: the
	 * slot's copy is the client's to write), scratch offsets and the
	 * replacement of each sample (skip policy), and the samples whose
	 * value is larger than all the room, with their sizes.
	 */
	uint32_t nragged;
	uint64_t *roff, *roff2;
	uint32_t *rep;
	uint8_t *rbig;
	uint64_t *rbig_size;
	struct stream_sink sink;
	/*
	 * The batch stages (mix.h), when mixing (their values are each
	 * epoch's spec's): the label output (soft, f32 [classes] a sample),
	 * and each sample's label of the batch being made (batch_size of
	 * them), read by its worker.
	 */
	bool mixing;
	uint32_t classes;
	uint32_t soft;
	int64_t *mixlab;

	struct codec_ctx **codec; /* per worker */
	unsigned char **scratch;  /* per worker, max_field bytes */
	struct imgpipe *pipe;	  /* NULL: no image pipeline */
	/*
	 * A pipeline with schedules (ispec.h): its text; pipe is made for
	 * the epoch of the largest output, ep_pipe for ep_epoch's batches
	 * (the assembler's, made again when a batch of another epoch comes).
	 */
	bool sched;
	char spec_text[ISPEC_TEXT_MAX];
	struct imgpipe *ep_pipe;
	uint32_t ep_epoch;
	struct imgpipe_ws **ws;	 /* per worker, with pipe */
	struct stream_wtime *wt; /* per worker, with c.timing */
	uint8_t *bad;		 /* per sample of the batch being made */
	/* Bad samples logged so far (skip policy), under bad_lock. */
	pthread_mutex_t bad_lock;
	uint32_t nlogged;
	uint64_t logged[STREAM_LOG_BAD_MAX];

	unsigned char *arena;
	uint64_t arena_size, arena_head, arena_tail; /* positions grow */
	struct stream_pb *pb;
	uint32_t npb;
	uint64_t pb_prod, pb_cons;
	/*
	 * The quasi order's window read whole (reader.c): its epoch and
	 * number, its arena region, and for each run of records the buffer
	 * where the run's first byte read (file offset win_off) lies.
	 */
	bool win_held;
	uint32_t win_epoch;
	uint64_t win_id, win_start;
	uint32_t win_nruns;
	struct order_run win_run[STREAM_WIN_RUNS];
	unsigned char *win_buf[STREAM_WIN_RUNS];
	uint64_t win_off[STREAM_WIN_RUNS];
	struct stream_ref *refs; /* reader scratch, batch_size entries */
	struct stream_ext *ext;	 /* reader scratch, batch_size entries */
	/* Reads of shards read in place (s3read.h): as many, or NULL. */
	struct s3read_range *rq;
	bool s3read_told; /* a failed read in place was logged */
	bool s3fill_told; /* a shard that did not arrive was logged */

	/*
	 * lock and cond guard the arena and pb positions, stop, and who
	 * waits: the reader (for a free pb or arena room) and the
	 * assembler (for a read batch) are woken only when they wait, not
	 * at every move of the other.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop, started;
	/* Its threads: both; a mixture's member has only a reader, a
	 * mixture only its assembler (mixture_main()). */
	bool run_reader, run_assembler;
	bool reader_waits, assembler_waits;
	/*
	 * Set by the reader as it ends, when every record is in the node
	 * cache (reader.c, hand_over()): the assembler makes the batches
	 * from serve_batch of serve_epoch on, once the pbs are taken
	 * (reader_serve()). The two positions are then the assembler's.
	 */
	bool serve;
	uint32_t serve_epoch;
	uint64_t serve_batch;
	pthread_t reader, assembler;

	/*
	 * A mixture (stream_config.members): its member streams, which read
	 * (their reader threads) and decode (on this stream's assembler, a
	 * mixture's only one: mixture_main()); the epochs' plan, for the
	 * assembler; each member's samples delivered, and its label.
	 */
	uint32_t nmembers;
	struct stream **member;
	struct mixture *mix;
	uint64_t *delivered;
	char (*member_label)[128];
	/*
	 * A mixture whose counts change at an epoch (stream_config,
	 * counts_from): mix is the counts of the epochs before later_from,
	 * later_mix those from there on (NULL for none).
	 */
	uint32_t later_from;
	struct mixture *later_mix;
	/*
	 * A member of a mixture: the mixture's order and plan (its own
	 * copies: the reader selects their epochs), which say the batches
	 * and which of their samples are this member's (member_no); its
	 * own order (order) only locates them. vbuf: the reader's, a
	 * batch's places. seq and vmix are those of the epoch the reader
	 * selected: seqs[0] and vmixes[0] before later_from, [1] from there
	 * on (NULL for none), owned there.
	 */
	struct order *seq;
	struct mixture *vmix;
	struct order *seqs[2];
	struct mixture *vmixes[2];
	uint32_t member_no;
	uint64_t *vbuf;

	/* counters, updated with atomics */
	struct stream_stats n;
	/* With c.timing: each thread's CPU time, stored by that thread. */
	uint64_t reader_cpu_ns, assembler_cpu_ns;
};

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Store the calling thread's CPU time in *c (one system call). */
static inline void stream_note_cpu(uint64_t *c)
{
	uint64_t ns = clock_thread_cpu_ns();

	if (ns)
		__atomic_store_n(c, ns, __ATOMIC_RELAXED);
}

static inline bool stream_stopping(struct stream *s)
{
	return __atomic_load_n(&s->stop, __ATOMIC_ACQUIRE);
}

/* reader.c: the reader thread's body; arg is the stream. */
void *reader_main(void *arg);
/*
 * reader.c: with s->serve, the next batch into pb, located in the node
 * cache (or pb->last, after the last), in the assembler's thread; pb->err
 * and pb->msg say what went wrong. pb->arena_end is the caller's.
 */
void reader_serve(struct stream *s, struct stream_pb *pb);

/* assemble.c: the assembler thread's body; arg is the stream. */
void *assembler_main(void *arg);

/* assemble.c: a mixture's assembler (stream_priv.h, member). */
void *mixture_main(void *arg);

#endif /* LD_STREAM_PRIV_H */
