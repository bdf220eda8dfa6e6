/*
 * ringcheck.c - the client's check of a ring header that loaderd wrote:
 * the trust boundary between the daemon's memory and this library.
 */
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "loader.h"
#include "msg.h"
#include "proto.h"
#include "ring.h"
#include "ringcheck.h"

static size_t loader_dtype_size(uint32_t dtype)
{
	static const uint8_t size[] = {
		[LOADER_DTYPE_U8] = 1,	[LOADER_DTYPE_I8] = 1,
		[LOADER_DTYPE_U16] = 2, [LOADER_DTYPE_I16] = 2,
		[LOADER_DTYPE_U32] = 4, [LOADER_DTYPE_I32] = 4,
		[LOADER_DTYPE_U64] = 8, [LOADER_DTYPE_I64] = 8,
		[LOADER_DTYPE_F16] = 2, [LOADER_DTYPE_F32] = 4,
		[LOADER_DTYPE_F64] = 8,
	};

	return dtype < sizeof(size) ? size[dtype] : 0;
}

/* Is [off, off + len) inside [0, size)? Without overflow. */
static bool loader_inside(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* Keep output ro's checked layout in *o: never read from the ring again. */
static void loader_keep(struct loader_output *o, const struct ring_output *ro,
			uint64_t sample_bytes)
{
	memcpy(o->name, ro->name, sizeof(o->name));
	o->dtype = ro->dtype;
	o->ndim = ro->ndim;
	memcpy(o->shape, ro->shape, sizeof(o->shape));
	o->offset = ro->offset;
	o->sample_bytes = sample_bytes;
	/* A plain output's; a ragged one sets them after. */
	o->ragged = false;
	o->index = o->room = o->row = 0;
}

/*
 * Multiply *n (bytes) by dimensions from..ndim of output ro, each one
 * nonzero and the product within a slot (so it never overflows).
 */
static int loader_dims(const struct ring_output *ro, uint32_t from,
		       const struct ring_hdr *h, uint64_t *n, char *why,
		       size_t whylen)
{
	for (uint32_t d = from; d < ro->ndim; d++) {
		if (!ro->shape[d] || ro->shape[d] > h->slot_size / *n)
			return msg_why(why, whylen, LOADER_EPROTO,
				       "ring output %s: dimension %u is %llu",
				       ro->name, d,
				       (unsigned long long)ro->shape[d]);
		*n *= ro->shape[d];
	}
	return 0;
}

/*
 * A ragged output (ring.h): shape [batch, RING_RAGGED, D2...] of a known
 * dtype, rows of `row` bytes, the offsets and the room for values inside
 * a slot and apart.
 */
static int loader_check_ragged(const struct ring_output *ro,
			       const struct ring_hdr *h,
			       struct loader_output *o, char *why,
			       size_t whylen)
{
	uint64_t ib = ((uint64_t)h->batch_size + 1) * sizeof(uint64_t);
	uint64_t row = loader_dtype_size(ro->dtype);
	int err;

	if (!row || ro->ndim < 2 || ro->ndim > RING_MAX_DIMS ||
	    ro->shape[0] != h->batch_size || ro->shape[1] != RING_RAGGED)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring output %s: ragged, but dtype %u, ndim %u",
			       ro->name, ro->dtype, ro->ndim);
	err = loader_dims(ro, 2, h, &row, why, whylen);
	if (err)
		return err;
	if (row != ro->row)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring output %s: rows of %llu bytes, not %llu",
			       ro->name, (unsigned long long)ro->row,
			       (unsigned long long)row);
	if (ro->offset % RING_ALIGN || ro->index % RING_ALIGN ||
	    ro->offset < sizeof(struct ring_slot) ||
	    ro->index < sizeof(struct ring_slot) ||
	    !loader_inside(ro->offset, ro->bytes, h->slot_size) ||
	    !loader_inside(ro->index, ib, h->slot_size) ||
	    (ro->index < ro->offset + ro->bytes && ro->offset < ro->index + ib))
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring output %s: values at %llu (%llu bytes) and offsets at %llu, outside a %llu-byte slot, misaligned or overlapping",
			ro->name, (unsigned long long)ro->offset,
			(unsigned long long)ro->bytes,
			(unsigned long long)ro->index,
			(unsigned long long)h->slot_size);
	loader_keep(o, ro, 0);
	o->ragged = true;
	o->index = ro->index;
	o->room = ro->bytes;
	o->row = row;
	return 0;
}

/* Check one output of the ring header and keep it in *o. */
static int loader_check_output(unsigned i, const struct ring_output *ro,
			       const struct ring_hdr *h,
			       struct loader_output *o, char *why,
			       size_t whylen)
{
	uint64_t n = loader_dtype_size(ro->dtype);
	int err;

	if (!memchr(ro->name, '\0', sizeof(ro->name)) || !ro->name[0])
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring output %u: name not a string", i);
	if (!n)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring output %s: unknown dtype %u", ro->name,
			       ro->dtype);
	if (ro->flags & ~RING_OUT_RAGGED)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring output %s: unknown flags %#x", ro->name,
			       ro->flags);
	if (ro->flags & RING_OUT_RAGGED)
		return loader_check_ragged(ro, h, o, why, whylen);
	if (ro->ndim < 1 || ro->ndim > RING_MAX_DIMS ||
	    ro->shape[0] != h->batch_size)
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring output %s: bad shape (ndim %u, first dimension %llu)",
			ro->name, ro->ndim, (unsigned long long)ro->shape[0]);
	err = loader_dims(ro, 1, h, &n, why, whylen);
	if (err)
		return err;
	/* n, the bytes of one sample, is <= slot_size here: no overflow. */
	if (n > h->slot_size / h->batch_size || ro->bytes != n * h->batch_size)
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring output %s: %llu bytes for %u samples of %llu",
			ro->name, (unsigned long long)ro->bytes, h->batch_size,
			(unsigned long long)n);
	if (ro->offset % RING_ALIGN || ro->offset < sizeof(struct ring_slot) ||
	    !loader_inside(ro->offset, ro->bytes, h->slot_size))
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring output %s: offset %llu, %llu bytes, outside a %llu-byte slot or misaligned",
			ro->name, (unsigned long long)ro->offset,
			(unsigned long long)ro->bytes,
			(unsigned long long)h->slot_size);
	loader_keep(o, ro, n);
	return 0;
}

/* Do [a, a + an) and [b, b + bn) meet? Both inside a slot: no overflow. */
static bool loader_overlap(uint64_t a, uint64_t an, uint64_t b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

/*
 * A mixture's members (RING_MIXTURE): as many as asked for, and each
 * sample's u32 inside a slot, aligned, and clear of the ids and of every
 * output (checked already, so inside the slot too): unlike an output
 * over another, a member number over a value would make libloader fail
 * good batches or pass bad ones.
 */
static int loader_check_members(const struct ring_hdr *h, uint32_t nmembers,
				const struct loader_output *out, char *why,
				size_t whylen)
{
	uint64_t mb = (uint64_t)h->batch_size * sizeof(uint32_t);
	uint64_t ib = (uint64_t)h->batch_size * sizeof(uint64_t);
	uint64_t at = h->members_offset;
	bool clear;

	if (!(h->flags & RING_MIXTURE)) {
		if (h->nmembers || h->members_offset || nmembers ||
		    h->counts_from || h->later_batches)
			return msg_why(
				why, whylen, LOADER_EPROTO,
				"ring: not a mixture, but %u members at %llu (asked for %u), counts from epoch %u",
				h->nmembers, (unsigned long long)at, nmembers,
				h->counts_from);
		return 0;
	}
	if (!h->counts_from != !h->later_batches)
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring: counts change at epoch %u to %llu batches",
			h->counts_from, (unsigned long long)h->later_batches);
	if (h->nmembers < 1 || h->nmembers > PROTO_MAX_MEMBERS ||
	    h->nmembers != nmembers)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring: a mixture of %u members, asked for %u",
			       h->nmembers, nmembers);
	clear = at % sizeof(uint32_t) == 0 && at >= sizeof(struct ring_slot) &&
		loader_inside(at, mb, h->slot_size) &&
		!loader_overlap(at, mb, h->ids_offset, ib);
	for (uint32_t i = 0; clear && i < h->noutputs; i++) {
		const struct loader_output *o = &out[i];
		uint64_t n =
			o->ragged ? o->room : o->sample_bytes * h->batch_size;

		/* A ragged output's offsets: count + 1 of them. */
		clear = !loader_overlap(at, mb, o->offset, n) &&
			!(o->ragged && loader_overlap(at, mb, o->index,
						      ib + sizeof(uint64_t)));
	}
	if (!clear)
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring: sample members at %llu (%llu bytes) outside a %llu-byte slot, misaligned or overlapping",
			(unsigned long long)at, (unsigned long long)mb,
			(unsigned long long)h->slot_size);
	return 0;
}

/*
 * h is the caller's private copy: the daemon could change the shared
 * header between a check and a use.
 */
int loader_check_hdr(const struct ring_hdr *h, size_t ring_bytes,
		     const struct proto_open *po, uint32_t nmembers,
		     struct loader_output *out, char *why, size_t whylen)
{
	int err;

	if (h->magic != RING_MAGIC)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring: bad magic 0x%08x", h->magic);
	if (h->version != RING_VERSION)
		return msg_why(why, whylen, LOADER_EVERSION,
			       "ring version %u, this library knows %d",
			       h->version, RING_VERSION);
	if (h->total_bytes != ring_bytes || h->slots_offset != RING_PAGE)
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring: %llu bytes with slots at %llu, mapped %zu",
			(unsigned long long)h->total_bytes,
			(unsigned long long)h->slots_offset, ring_bytes);
	/*
	 * Slots start on a page and are a multiple of RING_ALIGN long, so
	 * that every output (aligned within its slot) is aligned in memory
	 * and can be read as its dtype.
	 */
	if (!h->slot_count || (h->slot_count & (h->slot_count - 1)) ||
	    h->slot_size < sizeof(struct ring_slot) ||
	    h->slot_size % RING_ALIGN ||
	    h->slot_size > (ring_bytes - RING_PAGE) / h->slot_count)
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring: %u slots of %llu bytes do not fit %zu bytes",
			h->slot_count, (unsigned long long)h->slot_size,
			ring_bytes);
	if (h->batch_size != po->batch_size)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring: batch size %u, asked for %u",
			       h->batch_size, po->batch_size);
	if (h->noutputs < 1 || h->noutputs > PROTO_MAX_OUTPUTS ||
	    (po->noutputs && h->noutputs != po->noutputs))
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring: %u outputs, asked for %u (0: all)",
			       h->noutputs, po->noutputs);
	if (h->ids_offset % sizeof(uint64_t) ||
	    h->ids_offset < sizeof(struct ring_slot) ||
	    !loader_inside(h->ids_offset,
			   (uint64_t)h->batch_size * sizeof(uint64_t),
			   h->slot_size))
		return msg_why(
			why, whylen, LOADER_EPROTO,
			"ring: sample ids at %llu outside a %llu-byte slot or misaligned",
			(unsigned long long)h->ids_offset,
			(unsigned long long)h->slot_size);
	for (uint32_t i = 0; i < h->noutputs; i++) {
		err = loader_check_output(i, &h->out[i], h, &out[i], why,
					  whylen);
		if (err)
			return err;
	}
	return loader_check_members(h, nmembers, out, why, whylen);
}

int loader_check_shape(const struct loader_output *o,
		       const uint64_t shape[RING_MAX_DIMS], uint32_t count,
		       uint64_t *bytes, char *why, size_t whylen)
{
	uint64_t n = loader_dtype_size(o->dtype);

	if (shape[0] != count)
		return msg_why(why, whylen, LOADER_EPROTO,
			       "ring output %s: a batch of %u samples, shaped "
			       "for %llu",
			       o->name, count, (unsigned long long)shape[0]);
	for (uint32_t d = 1; d < o->ndim; d++) {
		if (!shape[d] || shape[d] > o->shape[d])
			return msg_why(why, whylen, LOADER_EPROTO,
				       "ring output %s: dimension %u of a "
				       "batch is %llu, outside 1..%llu",
				       o->name, d, (unsigned long long)shape[d],
				       (unsigned long long)o->shape[d]);
		n *= shape[d];
	}
	/* Each dimension within the header's: n <= sample_bytes. */
	*bytes = n * count;
	return 0;
}
