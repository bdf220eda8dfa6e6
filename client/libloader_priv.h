/*
 * libloader_priv.h - libloader's handle and the helpers its files share.
 *
 * libloader.c holds the connection, the ring and the batches; discover.c
 * sends the dataset's files over the connection, and so works on the
 * handle too. openmsg.c and ringcheck.c need no handle (their own
 * headers). Internal to libloader: never installed, and outside client/
 * nothing may include it (scripts/layers.sh).
 */
#ifndef LOADER_LIBLOADER_PRIV_H
#define LOADER_LIBLOADER_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "loader.h"
#include "proto.h"
#include "ring.h"
#include "ringcheck.h"

#define LOADER_REASON_LEN 1024

/*
 * The handle behind loader.h's struct loader: made by loader_open(),
 * freed by loader_close(), used by one thread at a time.
 */
struct loader {
	int sock;
	int timeout_ms;	  /* < 0: no limit */
	uint32_t seq;	  /* of the last request sent */
	uint32_t max_fds; /* per FILES message */

	struct ring_hdr *hdr; /* the ring, mapped read-only */
	size_t ring_bytes;
	struct ring_cons *cons; /* the consumer page, ours to write */
	size_t cons_bytes;

	/*
	 * The ring's layout, copied from its header and checked once: the
	 * header is the daemon's memory, so nothing there is trusted (or
	 * re-read) after loader_open().
	 */
	const unsigned char *slots;
	uint64_t slot_size;
	uint32_t slot_count;
	uint32_t batch_size;
	uint64_t ids_offset;
	uint64_t members_offset; /* a mixture's (RING_MIXTURE), else 0 */
	/* Counts that change at an epoch (ring.h): from it, its batches. */
	uint32_t counts_from;
	uint64_t later_batches;
	uint32_t noutputs;
	struct loader_output out[PROTO_MAX_OUTPUTS];

	/*
	 * Batches [released, next) are held by the caller: at most
	 * slot_count - 1 of them, so that the daemon always has a slot to
	 * fill. `released` is what we last stored in the consumer page.
	 */
	bool named; /* releases wait until saved (RING_NAMED) */
	/*
	 * Reconnecting (loader_opts.reconnect_ms): where the daemon is, the
	 * dataset to send again and the OPEN to repeat, and the absolute
	 * position of the current ring's batch 0 (epoch * bpe + batch).
	 */
	struct sockaddr_un sa;
	/* The per-user socket looked for and absent (sockpath.h), or "". */
	char skipped[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int reconnect_ms;
	char *dataset;
	/*
	 * A mixture: its members' MEMBER messages (each one's flags set as
	 * its files go) and the paths their files are opened from, sent
	 * again by a reconnect. The ring has as many (loader_check_hdr()).
	 */
	uint32_t nmembers;
	struct proto_member *pm;
	char *mpath[PROTO_MAX_MEMBERS];
	struct proto_open po;
	uint64_t base;
	uint32_t start_epoch; /* where loader_open() started (OPEN_OK) */
	uint64_t start_batch;
	int resumed;
	uint64_t plan; /* OPEN_OK's */
	uint32_t plan_end;
	uint32_t next;	   /* the next batch to read */
	uint32_t released; /* the oldest batch held, if any */
	int final; /* sticky: LOADER_EEND, LOADER_ESTREAM, -EPIPE, EPROTO */
	/*
	 * The ring before a reconnect, while the caller holds batches of it
	 * (old.left, the oldest old.first): its mappings stay until the last
	 * is released. The new ring delivers them again first; those copies
	 * are never handed out but released in their place, one for one, so
	 * that the daemon saves what the caller released.
	 */
	struct loader_old {
		struct ring_hdr *hdr;
		size_t ring_bytes;
		struct ring_cons *cons;
		size_t cons_bytes;
		const unsigned char *slots;
		uint64_t slot_size;
		uint32_t slot_count;
		uint32_t first, left;
	} old;
	/* The batch released last, to find where a new ring goes on. */
	bool have_last;
	uint32_t last_epoch;
	uint64_t last_batch;

	struct loader_stats st;
	char reason[LOADER_REASON_LEN];
};

/*
 * Put the reason for a failure (printf-style) in l->reason, where
 * loader_reason() and loader_open()'s errbuf find it, and return err.
 */
int loader_fail(struct loader *l, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * A send of a message of this type on l->sock failed with err: the
 * daemon's own PROTO_ERROR if it refused something and hung up, else
 * -ETIMEDOUT, -EPIPE or err, with the reason in l->reason.
 */
int loader_send_failed(struct loader *l, int err, uint16_t type);

#endif /* LOADER_LIBLOADER_PRIV_H */
