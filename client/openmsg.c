/*
 * openmsg.c - the OPEN message from the caller's struct loader_opts:
 * the struct as this library knows it, the defaults, and every check
 * that needs no daemon.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "loader.h"
#include "msg.h"
#include "openmsg.h"
#include "outputs.h"
#include "proto.h"
#include "tie.h"

TIE(LOADER_MAX_MEMBERS, PROTO_MAX_MEMBERS);
TIE(LOADER_MIX_PROPORTION, PROTO_MIX_PROPORTION);
TIE(LOADER_MIX_REPEAT, PROTO_MIX_REPEAT);
TIE(LOADER_MIX_CHOOSE, PROTO_MIX_CHOOSE);

#define LOADER_BATCH_DEFAULT	256
#define LOADER_PREFETCH_DEFAULT (64ull << 20)
#define LOADER_MIN_SLOTS	2
#define LOADER_MAX_SLOTS	1024
#define LOADER_MAX_PREFETCH	(64ull << 30) /* the daemon's, stream.h */
#define LOADER_MAX_RAGGED	(1ull << 30)  /* the daemon's, stream.h */
/*
 * The smallest struct loader_opts a caller can know: its layout at
 * LOADER_VERSION 1.0, the first with a size field. Later versions only
 * append fields.
 */
#define LOADER_OPTS_SIZE_1 (offsetof(struct loader_opts, start_batch) + 8)

/*
 * The caller's options as this library knows them: o->size bytes of
 * them, the rest zero. A caller built against a newer header may pass a
 * larger struct as long as the fields this library does not know are
 * zero (their defaults).
 */
int loader_copy_opts(const struct loader_opts *in, struct loader_opts *o,
		     char *why, size_t whylen)
{
	const unsigned char *p = (const unsigned char *)in;

	memset(o, 0, sizeof(*o));
	if (!in)
		return 0;
	if (in->size < LOADER_OPTS_SIZE_1)
		return msg_why(
			why, whylen, LOADER_EUSAGE,
			"struct loader_opts: size %u is not set (initialise it with LOADER_OPTS_INIT)",
			in->size);
	for (size_t i = sizeof(*o); i < in->size; i++)
		if (p[i])
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"struct loader_opts: byte %zu is set, past the %zu bytes this library (version %d.%d) knows",
				i, sizeof(*o), LOADER_VERSION_MAJOR,
				LOADER_VERSION_MINOR);
	memcpy(o, in, in->size < sizeof(*o) ? in->size : sizeof(*o));
	return 0;
}

/* Fill the OPEN message from the caller's options and their defaults. */
int loader_make_open(const struct loader_opts *o, struct proto_open *po,
		     char *why, size_t whylen)
{
	char bad[256];
	int err;

	memset(po, 0, sizeof(*po));
	po->batch_size = o->batch_size ? o->batch_size : LOADER_BATCH_DEFAULT;
	po->order = o->order;
	po->seed = o->seed;
	po->epochs = o->epochs;
	po->start_epoch = o->start_epoch;
	po->rank = o->rank;
	po->world = o->world ? o->world : 1;
	po->drop_last = o->drop_last;
	po->ring_slots = o->ring_slots; /* 0: the daemon's choice */
	po->prefetch_bytes =
		o->prefetch_bytes ? o->prefetch_bytes : LOADER_PREFETCH_DEFAULT;
	po->threads = o->threads;
	po->flags = o->direct ? PROTO_OPEN_DIRECT : 0;
	if (o->members || o->nmembers)
		po->flags |= PROTO_OPEN_MIXTURE;
	/*
	 * A caller that knows 1.2's options knows ragged outputs (its
	 * loader_opts reaches ragged_bytes; loader_opts_in() kept the size).
	 */
	if (o->size >= offsetof(struct loader_opts, ragged_bytes) +
			       sizeof(o->ragged_bytes))
		po->flags |= PROTO_OPEN_RAGGED;
	po->ragged_bytes = o->ragged_bytes;
	po->on_bad = o->on_bad;
	po->start_batch = o->start_batch;
	if (o->name) {
		size_t n = strlen(o->name);

		if (!n || n >= sizeof(po->name))
			return msg_why(why, whylen, LOADER_EUSAGE,
				       "name of %zu bytes: 1 to %zu", n,
				       sizeof(po->name) - 1);
		memcpy(po->name, o->name, n + 1);
	}
	if (o->fresh) {
		if (!o->name)
			return msg_why(why, whylen, LOADER_EUSAGE,
				       "fresh without a name");
		po->flags |= PROTO_OPEN_FRESH;
	}
	if (o->from_world) {
		if (!o->name)
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"from_world without a name: positions of an earlier world resume a named stream");
		if (o->from_world > PROTO_MAX_WORLD || !o->from_epoch ||
		    !o->from_batch)
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"from_world %u: 1..%d, with from_epoch and from_batch",
				o->from_world, PROTO_MAX_WORLD);
		if (o->start_batch)
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"start_batch %" PRIu64
				" with from_world: the positions say where each rank starts",
				o->start_batch);
		po->flags |= PROTO_OPEN_POSITIONS;
	}
	if (o->pad > 1)
		return msg_why(why, whylen, LOADER_EUSAGE, "pad %u: 0 or 1",
			       o->pad);
	if (o->pad)
		po->flags |= PROTO_OPEN_PAD;
	if (o->pipeline) {
		size_t n = strlen(o->pipeline);

		if (n >= sizeof(po->pipeline))
			return msg_why(why, whylen, LOADER_EUSAGE,
				       "pipeline of %zu bytes: at most %zu", n,
				       sizeof(po->pipeline) - 1);
		memcpy(po->pipeline, o->pipeline, n + 1);
	}

	/*
	 * The daemon checks all of this again; checking here too gives the
	 * caller a precise message without a round trip.
	 */
	if (po->batch_size > PROTO_MAX_BATCH)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "batch_size %u: at most %d", po->batch_size,
			       PROTO_MAX_BATCH);
	if (po->order > LOADER_ORDER_QUASI)
		return msg_why(why, whylen, LOADER_EUSAGE, "unknown order %u",
			       po->order);
	if (po->world > PROTO_MAX_WORLD || po->rank >= po->world)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "rank %u of world %u: need rank < world <= %d",
			       po->rank, po->world, PROTO_MAX_WORLD);
	if (po->drop_last > 1)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "drop_last %u: 0 or 1", po->drop_last);
	if (po->on_bad > LOADER_BAD_SKIP)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "on_bad %u: LOADER_BAD_FAIL or LOADER_BAD_SKIP",
			       po->on_bad);
	if (po->ring_slots && (po->ring_slots < LOADER_MIN_SLOTS ||
			       po->ring_slots > LOADER_MAX_SLOTS))
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "ring_slots %u: %d..%d", po->ring_slots,
			       LOADER_MIN_SLOTS, LOADER_MAX_SLOTS);
	/*
	 * The stream's last epoch, start_epoch + epochs, is a uint32_t on
	 * the wire and in the daemon: a sum past it would wrap to an epoch
	 * before the first (and loader_reconnect() computes it again).
	 */
	if (o->epochs && (uint64_t)o->start_epoch + o->epochs > UINT32_MAX)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "epochs %" PRIu32 " from start_epoch %" PRIu32
			       ": the last epoch would be past %" PRIu32,
			       o->epochs, o->start_epoch, UINT32_MAX);
	if (o->prefetch_bytes > LOADER_MAX_PREFETCH)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "prefetch_bytes %" PRIu64 ": at most %llu",
			       o->prefetch_bytes, LOADER_MAX_PREFETCH);
	if (o->ragged_bytes > LOADER_MAX_RAGGED)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "ragged_bytes %" PRIu64 ": at most %llu",
			       o->ragged_bytes, LOADER_MAX_RAGGED);
	/* Another negative time would pass for a deadline already past. */
	if (o->reconnect_ms < LOADER_RECONNECT_NEVER)
		return msg_why(
			why, whylen, LOADER_EUSAGE,
			"reconnect_ms %d: 0 (the default: %d for a named stream, never for another), -1 (never) or a positive number of milliseconds",
			o->reconnect_ms, LOADER_RECONNECT_DEFAULT_MS);
	err = loader_parse_outputs(o->outputs, po->out, &po->noutputs, bad,
				   sizeof(bad));
	if (err)
		return msg_why(why, whylen, err, "%s", bad);
	return 0;
}

/*
 * A member_size past this is no struct loader_member's but a field left
 * unset: reading that far past each member would leave the caller's
 * array.
 */
#define LOADER_MEMBER_SIZE_MAX 1024

int loader_copy_member(const struct loader_opts *o, uint32_t i,
		       struct loader_member *m, char *why, size_t whylen)
{
	const unsigned char *p;

	memset(m, 0, sizeof(*m));
	if (o->member_size < LOADER_MEMBER_SIZE_1 ||
	    o->member_size > LOADER_MEMBER_SIZE_MAX ||
	    o->member_size % _Alignof(struct loader_member))
		return msg_why(
			why, whylen, LOADER_EUSAGE,
			"member_size %u: not a struct loader_member's size (set it to sizeof(struct loader_member), as LOADER_OPTS_INIT does)",
			o->member_size);
	p = (const unsigned char *)o->members + (size_t)i * o->member_size;
	for (size_t k = sizeof(*m); k < o->member_size; k++)
		if (p[k])
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"member %" PRIu32
				": byte %zu is set, past the %zu bytes of struct loader_member this library (version %d.%d) knows",
				i, k, sizeof(*m), LOADER_VERSION_MAJOR,
				LOADER_VERSION_MINOR);
	memcpy(m, p, o->member_size < sizeof(*m) ? o->member_size : sizeof(*m));
	return 0;
}

/*
 * The label is for messages only: a path too long for it keeps its end,
 * which names the dataset best.
 */
static void loader_label(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n < cap) {
		memcpy(dst, src, n + 1);
		return;
	}
	memcpy(dst, "...", 3);
	memcpy(dst + 3, src + n - (cap - 4), cap - 4);
	dst[cap - 1] = '\0';
}

/* One member's value, as its how wants it. */
static int loader_check_value(uint32_t i, const struct loader_member *m,
			      char *why, size_t whylen)
{
	static const char *const name[] = {
		[LOADER_MIX_PROPORTION] = "proportion",
		[LOADER_MIX_REPEAT] = "repeat",
		[LOADER_MIX_CHOOSE] = "choose",
	};
	double v = m->value;

	/* Written so that a NaN fails too. */
	if (!(v > 0 && v <= (double)LOADER_MIX_MAX))
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "member %" PRIu32 ": %s %g: %s", i, name[m->how],
			       v,
			       m->how == LOADER_MIX_CHOOSE ?
				       "a whole number of samples, 1 to 2^48" :
				       "a finite number above 0, at most 2^48");
	if (m->how == LOADER_MIX_CHOOSE && v != (double)(uint64_t)v)
		return msg_why(
			why, whylen, LOADER_EUSAGE,
			"member %" PRIu32
			": choose %g: a whole number of samples, 1 to 2^48",
			i, v);
	return 0;
}

int loader_make_members(const struct loader_opts *o, struct proto_member *pm,
			char *why, size_t whylen)
{
	struct loader_member m;
	bool prop = false;
	int err;

	if (!o->members && !o->nmembers) {
		if (o->epoch_size)
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"epoch_size %" PRIu64
				" without members: it sets a mixture's epoch",
				o->epoch_size);
		return 0;
	}
	if (!o->members)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "nmembers %" PRIu32 " without members (NULL)",
			       o->nmembers);
	if (!o->nmembers || o->nmembers > PROTO_MAX_MEMBERS)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "nmembers %" PRIu32
			       ": a mixture has 1 to %d members",
			       o->nmembers, PROTO_MAX_MEMBERS);
	if (o->epoch_size > LOADER_MIX_MAX)
		return msg_why(why, whylen, LOADER_EUSAGE,
			       "epoch_size %" PRIu64 ": at most 2^48 (%llu)",
			       o->epoch_size, LOADER_MIX_MAX);
	for (uint32_t i = 0; i < o->nmembers; i++) {
		size_t n;

		err = loader_copy_member(o, i, &m, why, whylen);
		if (err)
			return err;
		if (!m.dataset || !m.dataset[0])
			return msg_why(why, whylen, LOADER_EUSAGE,
				       "member %" PRIu32 ": no dataset", i);
		if (m.reserved)
			return msg_why(why, whylen, LOADER_EUSAGE,
				       "member %" PRIu32
				       ": reserved is %" PRIu32 ", not 0",
				       i, m.reserved);
		if (m.how > LOADER_MIX_CHOOSE)
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"member %" PRIu32 ": how %" PRIu32
				": LOADER_MIX_PROPORTION, LOADER_MIX_REPEAT or LOADER_MIX_CHOOSE",
				i, m.how);
		err = loader_check_value(i, &m, why, whylen);
		if (err)
			return err;
		/*
		 * Proportions share out an epoch; repeat and choose count
		 * samples: the two do not mix (Mosaic Streaming's rule).
		 */
		if (i == 0)
			prop = m.how == LOADER_MIX_PROPORTION;
		else if ((m.how == LOADER_MIX_PROPORTION) != prop)
			return msg_why(
				why, whylen, LOADER_EUSAGE,
				"member %" PRIu32
				": %s beside member 0's %s: either every member gives a proportion or none does",
				i,
				m.how == LOADER_MIX_PROPORTION ? "proportion" :
				m.how == LOADER_MIX_REPEAT     ? "repeat" :
								 "choose",
				prop ? "proportion" : "repeat or choose");
		n = m.pipeline ? strlen(m.pipeline) : 0;
		if (n >= sizeof(pm[i].pipeline))
			return msg_why(why, whylen, LOADER_EUSAGE,
				       "member %" PRIu32
				       ": pipeline of %zu bytes: at most %zu",
				       i, n, sizeof(pm[i].pipeline) - 1);
		memset(&pm[i], 0, sizeof(pm[i]));
		pm[i].index = i;
		pm[i].how = m.how;
		pm[i].value = m.value;
		pm[i].epoch_size = o->epoch_size;
		if (n)
			memcpy(pm[i].pipeline, m.pipeline, n + 1);
		loader_label(pm[i].label, sizeof(pm[i].label), m.dataset);
	}
	if (o->epoch_size && !prop)
		return msg_why(
			why, whylen, LOADER_EUSAGE,
			"epoch_size %" PRIu64
			" without proportions: members that repeat or choose give their own counts",
			o->epoch_size);
	return 0;
}
