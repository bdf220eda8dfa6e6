/*
 * proto.h - the control protocol between libloader and loaderd.
 *
 * Shared by the client library and the daemon; nothing else of ours is
 * included. The socket is a local SOCK_SEQPACKET Unix socket, so one
 * message is one packet, and byte order is the host's (both ends always
 * run on the same machine; little-endian hosts are assumed and checked
 * at compile time). Every message is a struct proto_hdr followed by
 * `length` bytes of payload of the type's fixed layout. A receiver
 * checks magic, version, type and length before it looks at a payload,
 * and every field's range before it uses one; anything wrong is answered
 * with PROTO_ERROR and a reason, and never crashes the daemon.
 *
 * A session (one connection, at most one stream):
 *   client                             daemon
 *   HELLO                      ->
 *                              <-      HELLO_OK
 *   FILES (fds, in batches)    ->      (no reply unless an error)
 *   OPEN                       ->
 *                              <-      OPEN_OK + 2 fds (ring, consumer)
 *   ... batches flow through the ring (ring.h) ...
 *   STATS                      ->
 *                              <-      STATS_OK
 *   close(socket): the daemon ends the stream and frees its memory.
 * The dataset's files travel with SCM_RIGHTS in FILES messages, at most
 * PROTO_MAX_FDS per message: index 0 is manifest.json, 1..n the shards in
 * manifest order. The daemon never opens a path a client names.
 */
#ifndef LOADER_PROTO_H
#define LOADER_PROTO_H

#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the loaderd protocol and ring assume a little-endian host"
#endif

#define PROTO_MAGIC 0x3150444cu /* "LDP1" in memory */
#define PROTO_VERSION                                                          \
	11 /* 2: OPEN's start_batch; 3: STATUS, STREAM_INFO;
				4: STATUS_OK's decode time, directories;
				5: OPEN's name, OPEN_OK's start, SAVED,
				FORGET; 6: ragged outputs;
				7: REMOTE, OPEN_REMOTE;
				8: POSITIONS, OPEN_POSITIONS;
				9: OPEN_GO_ON, OPEN_PAD;
				10: MEMBER, OPEN_MIXTURE;
				11: OPEN_OK's plan covers a pending
				change of a mixture's weights (and
				ring 8 says where it holds from) */
#define PROTO_MAX_MSG	   16384
#define PROTO_MAX_FDS	   250	      /* under the kernel's SCM_MAX_FD (253) */
#define PROTO_MAX_FILES	   (1u << 20) /* manifest + shards per dataset */
#define PROTO_MAX_OUTPUTS  8
#define PROTO_NAME_MAX	   32
#define PROTO_REASON_MAX   400
#define PROTO_PIPELINE_MAX 512	 /* image pipeline spec text, NUL included */
#define PROTO_STREAM_NAME  64	 /* a named stream's name, NUL included */
#define PROTO_MAX_BATCH	   65536 /* samples a batch, OPEN's batch_size */
#define PROTO_MAX_WORLD	   65536 /* ranks, OPEN's world */
#define PROTO_URL_MAX	   1100	 /* "s3://" bucket "/" prefix, NUL included */

enum proto_type {
	PROTO_HELLO = 1,
	PROTO_HELLO_OK = 2,
	PROTO_FILES = 3,
	PROTO_OPEN = 4,
	PROTO_OPEN_OK = 5,
	PROTO_STATS = 6,
	PROTO_STATS_OK = 7,
	PROTO_ERROR = 8,
	PROTO_STATUS = 9, /* the daemon, as loaderctl status shows it */
	PROTO_STATUS_OK = 10,
	PROTO_STREAM_INFO = 11, /* one stream of the daemon's, by index */
	PROTO_STREAM_INFO_OK = 12,
	PROTO_SAVED = 13, /* one saved named stream, by index */
	PROTO_SAVED_OK = 14,
	PROTO_FORGET = 15, /* drop a saved named stream */
	PROTO_FORGET_OK = 16,
	PROTO_REMOTE = 17,    /* the dataset is in an object store */
	PROTO_POSITIONS = 18, /* where an earlier world's ranks stopped */
	PROTO_MEMBER = 19,    /* closes one member of a mixture */
	PROTO_TYPE_END
};

struct proto_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length; /* payload bytes after this header */
	uint32_t seq;	 /* request number; replies echo it */
};

struct proto_hello {
	uint32_t version; /* PROTO_VERSION */
	uint32_t flags;	  /* 0 */
};

struct proto_hello_ok {
	uint32_t version;
	uint32_t max_fds;	 /* PROTO_MAX_FDS */
	uint64_t max_ring_bytes; /* per stream, this uid */
	uint32_t pid;		 /* the daemon's */
	uint32_t reserved;
};

/* Carries `count` fds (SCM_RIGHTS) for files first..first+count-1. */
struct proto_files {
	uint32_t first;
	uint32_t count;
	uint32_t total; /* files of the dataset in all */
	uint32_t reserved;
};

/*
 * Sample orders. libloader ties them to LOADER_ORDER_*, the daemon to its
 * pipeline's, at compile time; so are the casts and bad-sample policies
 * below.
 */
enum proto_order {
	PROTO_ORDER_SEQUENTIAL = 0,
	PROTO_ORDER_RANDOM = 1,
	PROTO_ORDER_QUASI = 2,
};

/* How a field becomes an output of the batch. */
enum proto_cast {
	PROTO_CAST_NONE = 0,	 /* the field's own dtype and bytes */
	PROTO_CAST_F32_UNIT = 1, /* u8 -> f32 in [0,1] (x / 255) */
	PROTO_CAST_F32 = 2,	 /* integer -> f32, value kept */
};

struct proto_output {
	char field[PROTO_NAME_MAX]; /* NUL-terminated schema field name */
	uint32_t cast;		    /* enum proto_cast */
	uint32_t reserved;
};

/* Read the shards with O_DIRECT (aligned reads, no page cache). */
#define PROTO_OPEN_DIRECT 1u
/* A named stream: drop its saved position and start where asked. */
#define PROTO_OPEN_FRESH 2u
/*
 * The client takes ragged outputs (ring.h): bytes fields. Without it
 * they are refused, as a program built for libloader 1.1 expects.
 */
#define PROTO_OPEN_RAGGED 4u
/*
 * The dataset is WebDataset .tar files read in place: file 0 holds
 * their names (labels for messages, a line each after the first line,
 * PROTO_TARS_MAGIC), files 1..n the tars.
 */
#define PROTO_OPEN_TAR	 8u
#define PROTO_TARS_MAGIC "loaderd-tars 1\n"
/* The dataset is an LMDB database read in place: file 1 its data file. */
#define PROTO_OPEN_LMDB 16u
/*
 * The dataset is the session's REMOTE, in an object store; no FILES are
 * sent. The daemon fetches it into its shard cache with the REMOTE's
 * credentials, which must be able to read every object it serves.
 */
#define PROTO_OPEN_REMOTE 32u
/*
 * A named stream that goes on from the positions the session's
 * POSITIONS messages gave (every rank of the earlier world), not from
 * what this daemon saved: the trainer's checkpoint holds them, gathered
 * from ranks that ran on other nodes. start_batch must be 0;
 * start_epoch and epochs still say where the stream ends.
 */
#define PROTO_OPEN_POSITIONS 64u
/*
 * A named stream's client that reconnects and goes on (a daemon that
 * went away): this rank resumes at its own saved position, not at the
 * least of its world's as a restarted job does, since its trainer has
 * consumed up to there and goes on from it.
 */
#define PROTO_OPEN_GO_ON 128u
/*
 * Pad the ranks short of a sample at an epoch's end with a repeat
 * (pipeline/stream/order.h), so that every rank's last batch has the same size;
 * the slot's repeats counts it. No effect with drop_last.
 */
#define PROTO_OPEN_PAD 256u

/*
 * The stream is a mixture of several datasets (pipeline/stream/mixture.h),
 * given by the session's MEMBER messages: each member's FILES (or its
 * REMOTE) come first, then its MEMBER, which closes them; the next
 * FILES or REMOTE begin the next member; OPEN follows the last MEMBER.
 * The OPEN's own TAR, LMDB and REMOTE flags must be 0 (each MEMBER has
 * its own); its pipeline is the members' unless a MEMBER gives one.
 */
#define PROTO_OPEN_MIXTURE 512u

/* Members a mixture may have. */
#define PROTO_MAX_MEMBERS 32

/* How a member's samples an epoch are set (Mosaic Streaming's terms). */
enum proto_mix_how {
	PROTO_MIX_PROPORTION = 0, /* value: its share of the epoch, > 0 */
	PROTO_MIX_REPEAT = 1,	  /* value: times its samples, > 0 */
	PROTO_MIX_CHOOSE = 2,	  /* value: samples, a whole number >= 1 */
};

/*
 * One member of a mixture (PROTO_OPEN_MIXTURE), after its files. Either
 * every member gives a proportion or none does. Strings NUL-terminated.
 */
struct proto_member {
	uint32_t index; /* 0, 1, ... in the order they come */
	uint32_t how;	/* enum proto_mix_how */
	/* PROTO_OPEN_TAR, PROTO_OPEN_LMDB or PROTO_OPEN_REMOTE: what the
	 * member's files are, as the OPEN's flags say for one dataset. */
	uint32_t flags;
	uint32_t reserved; /* 0 */
	double value;
	/*
	 * Samples an epoch of the whole mixture when members give
	 * proportions (0: the members' samples together); the same in every
	 * MEMBER, and 0 without proportions.
	 */
	uint64_t epoch_size;
	/* This member's image pipeline; "": the OPEN's. */
	char pipeline[PROTO_PIPELINE_MAX];
	/* Where the client found it (its path or URL), for messages. */
	char label[PROTO_URL_MAX];
};

/*
 * A dataset in an S3-API object store, and the client's credentials for
 * it, resolved in the client's process (common/awscfg.h) and sent
 * instead of FILES, before OPEN. Strings are NUL-terminated; the sizes
 * are awscfg.h's. The daemon uses them for this stream's requests only:
 * it never logs or stores them, and wipes them when the OPEN is done.
 */
struct proto_remote {
	char url[PROTO_URL_MAX];
	char endpoint[256];
	char region[64];
	char access_key[128]; /* "": anonymous requests */
	char secret_key[128];
	char session_token[4096];
	uint32_t addressing; /* 0 auto, 1 path-style, 2 virtual-host */
	uint32_t reserved;   /* 0 */
};

/*
 * Where the ranks of an earlier world of a named stream stopped: rank
 * first + i at its next batch (pos[i].epoch, pos[i].batch), and the plan
 * they ran under (OPEN_OK's plan and plan_end). Sent before OPEN (with
 * PROTO_OPEN_POSITIONS) in rank order, count ranks a message, until all
 * `world` are given; world and plan the same in each.
 */
#define PROTO_POSITIONS_MAX 512 /* ranks a message */
struct proto_position {
	uint32_t epoch;
	uint32_t reserved; /* 0 */
	uint64_t batch;
};
struct proto_positions {
	uint32_t world;	   /* 1..65536, the same in every message */
	uint32_t first;	   /* the ranks given so far */
	uint32_t count;	   /* 1..PROTO_POSITIONS_MAX, first + count <= world */
	uint32_t plan_end; /* the plan's, as OPEN_OK gave them */
	uint64_t plan;
	struct proto_position pos[PROTO_POSITIONS_MAX];
};

/* What a sample that cannot be decoded does to its stream. */
enum proto_bad {
	PROTO_BAD_FAIL = 0, /* the stream ends with an error naming it */
	PROTO_BAD_SKIP = 1, /* counted, logged once, replaced in its batch */
};

struct proto_open {
	uint32_t batch_size; /* 1..65536 */
	uint32_t order;	     /* enum proto_order */
	uint64_t seed;
	uint32_t epochs; /* 0: endless */
	uint32_t start_epoch;
	uint32_t rank, world;	 /* rank < world <= 65536 */
	uint32_t drop_last;	 /* 0 or 1 */
	uint32_t ring_slots;	 /* a power of two, 2..1024; 0: default */
	uint64_t prefetch_bytes; /* 0: default */
	uint32_t threads;  /* decode threads for this stream; 0: default */
	uint32_t noutputs; /* 0 (all fields as stored) or 1..PROTO_MAX_OUTPUTS */
	uint32_t flags;	   /* PROTO_OPEN_* */
	uint32_t reserved; /* 0 */
	struct proto_output out[PROTO_MAX_OUTPUTS];
	uint32_t on_bad;    /* enum proto_bad */
	uint32_t reserved2; /* 0 */
	/*
	 * The image pipeline (pipeline/image/ispec.h) that every jpeg output goes
	 * through, NUL-terminated; "" when there is none (then a jpeg field
	 * cannot be an output).
	 */
	char pipeline[PROTO_PIPELINE_MAX];
	/* The first batch of start_epoch to deliver (< batches per epoch). */
	uint64_t start_batch;
	/*
	 * "" or the stream's name, NUL-terminated (1..63 bytes, no '/'): the
	 * daemon saves the position of a named stream, per uid, as its
	 * batches are released, and resumes it there when the name is opened
	 * again (start_epoch and start_batch are then the saved ones).
	 */
	char name[PROTO_STREAM_NAME];
	/*
	 * Room in a batch for each ragged output's values, in bytes; 0: the
	 * daemon's default (loaderd(8), RAGGED OUTPUTS).
	 */
	uint64_t ragged_bytes;
};

struct proto_open_ok {
	uint64_t ring_bytes; /* size of the ring memfd */
	uint64_t cons_bytes; /* size of the consumer memfd */
	uint64_t batches_per_epoch;
	uint64_t samples; /* N */
	/* Where the stream starts: asked for, or a named stream's saved. */
	uint32_t start_epoch;
	uint32_t resumed; /* 1: from the name's saved position */
	uint64_t start_batch;
	/*
	 * The job's plan (an elastic resume's; order.h): XXH3-64 of its
	 * words and one past the last epoch it deals, or 0 and 0; a named
	 * mixture's change of weights that waits for an epoch is folded in,
	 * and the plan then ends no earlier than that epoch (named.h,
	 * named_job_plan()). A trainer keeps them with its ranks'
	 * positions and gives them back with POSITIONS.
	 */
	uint64_t plan;
	uint32_t plan_end;
	uint32_t reserved; /* 0 */
};

struct proto_stats_ok {
	uint64_t batches; /* published so far */
	uint64_t samples;
	uint64_t bytes_read; /* from storage */
	uint64_t bad_samples;
	uint64_t stall_ns;     /* time the producer waited for a free slot */
	uint64_t rss_bytes;    /* the daemon's resident set */
	uint64_t cache_hits;   /* records served by the node cache */
	uint64_t cache_misses; /* records looked up there and read */
};

/*
 * The daemon as a whole. Streams and sessions are those the asking uid
 * may see: its own, or all for root and the daemon's own uid.
 */
#define PROTO_INFO_TEXT 128

struct proto_status_ok {
	uint32_t pid;
	uint32_t threads; /* of the decode pool */
	uint64_t uptime_ms;
	uint64_t rss_bytes;
	uint32_t sessions; /* visible */
	uint32_t streams;  /* visible; STREAM_INFO takes 0..streams-1 */
	uint32_t sessions_all;
	uint32_t streams_all;
	uint64_t ring_bytes; /* of all streams */
	uint64_t max_ring_bytes;
	uint64_t max_uid_ring_bytes;
	uint32_t max_uid_streams;
	uint32_t uid;		/* the asking peer's, as the daemon sees it */
	uint64_t memory_used;	/* rings and prefetch budgets of all streams */
	uint64_t memory_budget; /* 0: none */
	/*
	 * Time spent decoding since the daemon started, summed over threads:
	 * by the decode pool's `threads`, and by the streams' own threads
	 * (each works on its batch beside the pool).
	 */
	uint64_t pool_busy_ns;
	uint64_t stream_busy_ns;
	char state_dir[PROTO_INFO_TEXT]; /* NUL-terminated, maybe cut short */
	char cache_dir[PROTO_INFO_TEXT];
};

struct proto_stream_info {
	uint32_t index; /* 0..streams-1 of the last STATUS_OK */
	uint32_t reserved;
};

/* One stream, and where its time goes (the assembler's clock). */
struct proto_stream_info_ok {
	uint64_t session; /* the session's number, as the log shows it */
	uint32_t pid, uid, gid;
	uint32_t batch_size;
	uint32_t slots;
	uint32_t ring_used; /* batches published and not released */
	uint64_t ring_bytes;
	uint64_t age_ms; /* since the stream opened */
	uint32_t epoch;	 /* of the batch published last */
	uint32_t reserved;
	uint64_t batches; /* published */
	uint64_t samples;
	uint64_t bytes_read; /* from storage */
	uint64_t bad_samples;
	uint64_t read_wait_ns; /* waiting for the reader: storage */
	uint64_t decode_ns;    /* decoding a batch on the pool */
	uint64_t slot_wait_ns; /* waiting for a free slot: the trainer */
	uint64_t client_waits; /* batches the client was waiting for */
	char dataset[PROTO_INFO_TEXT];	/* the manifest's directory */
	char pipeline[PROTO_INFO_TEXT]; /* truncated, NUL-terminated */
	/* A mixture's members, as the client named them; 0 for one dataset. */
	uint32_t nmembers;
	uint32_t reserved2;
	struct proto_member_info {
		char label[PROTO_INFO_TEXT]; /* truncated, NUL-terminated */
		uint64_t per_epoch;	     /* samples it gives an epoch */
		uint64_t samples;	     /* of it delivered */
		uint64_t bad_samples;
		uint64_t bytes_read;
	} member[PROTO_MAX_MEMBERS];
};

/*
 * The saved named streams the asking uid may see (its own; every uid's
 * for root and the daemon's own uid), in the daemon's key order; index
 * 0..total-1, total as of this reply (0 and no record when none).
 */
struct proto_saved {
	uint32_t index;
	uint32_t reserved;
};
struct proto_saved_ok {
	uint32_t total;
	uint32_t uid; /* the stream's owner */
	char name[PROTO_STREAM_NAME];
	uint32_t epoch;	 /* of the first batch not released */
	uint32_t epochs; /* the last epoch asked for, + 1; 0: endless */
	uint64_t batch;
	uint64_t batches_per_epoch;
	uint64_t updated_ms; /* wall clock of its last checkpoint */
	uint32_t rank, world;
	uint32_t finished; /* 1: every batch of its epochs released */
	uint32_t reserved;
};

/* Drop the saved stream name of uid (only root and the daemon's own uid
 * may name another uid than their own). */
#define PROTO_FORGET_UID 1u /* uid is given; else the asking peer's */
struct proto_forget {
	char name[PROTO_STREAM_NAME];
	uint32_t uid;
	uint32_t flags; /* PROTO_FORGET_* */
};
struct proto_forget_ok {
	uint32_t uid; /* whose stream was dropped */
	uint32_t reserved;
};

struct proto_error {
	int32_t code; /* -errno or LOADER_E* */
	/* Bytes of reason that follow (<= PROTO_REASON_MAX), no NUL. */
	uint32_t len;
};

/*
 * The payload length each type must have. 0 is ambiguous: STATS is empty,
 * ERROR varies (struct proto_error + len bytes) and unknown types have none;
 * a receiver rejects unknown types first and checks ERROR on its own.
 */
static inline uint32_t proto_payload_size(uint16_t type)
{
	switch (type) {
	case PROTO_HELLO: return sizeof(struct proto_hello);
	case PROTO_HELLO_OK: return sizeof(struct proto_hello_ok);
	case PROTO_FILES: return sizeof(struct proto_files);
	case PROTO_OPEN: return sizeof(struct proto_open);
	case PROTO_OPEN_OK: return sizeof(struct proto_open_ok);
	case PROTO_STATS: return 0;
	case PROTO_STATS_OK: return sizeof(struct proto_stats_ok);
	case PROTO_STATUS: return 0;
	case PROTO_STATUS_OK: return sizeof(struct proto_status_ok);
	case PROTO_STREAM_INFO: return sizeof(struct proto_stream_info);
	case PROTO_STREAM_INFO_OK: return sizeof(struct proto_stream_info_ok);
	case PROTO_SAVED: return sizeof(struct proto_saved);
	case PROTO_SAVED_OK: return sizeof(struct proto_saved_ok);
	case PROTO_FORGET: return sizeof(struct proto_forget);
	case PROTO_FORGET_OK: return sizeof(struct proto_forget_ok);
	case PROTO_REMOTE: return sizeof(struct proto_remote);
	case PROTO_POSITIONS: return sizeof(struct proto_positions);
	case PROTO_MEMBER: return sizeof(struct proto_member);
	default: return 0;
	}
}

_Static_assert(sizeof(struct proto_hdr) == 16, "proto_hdr layout");
_Static_assert(sizeof(struct proto_positions) + sizeof(struct proto_hdr) <=
		       PROTO_MAX_MSG,
	       "a POSITIONS message fits");
_Static_assert(sizeof(struct proto_open) == 64 + 40 * PROTO_MAX_OUTPUTS + 8 +
						    PROTO_PIPELINE_MAX + 8 +
						    PROTO_STREAM_NAME + 8,
	       "proto_open layout");

#endif /* LOADER_PROTO_H */
