/*
 * test_ringcheck.c - the client's check of the ring header the daemon
 * wrote (client/ringcheck.h), on crafted headers with no mapping: a
 * valid one is taken and its layout kept; each header that breaks one
 * rule is refused with its code and exact message.
 *
 * Only what a broken header could make libloader read outside a slot or
 * misread is checked: outputs that overlap one another or the sample
 * ids are not refused (the slot is the consumer's own memory; such a
 * batch is wrong, not unsafe), and nor is that here. A mixture's
 * members are refused over the ids or an output: libloader checks each
 * sample's member before it hands a batch out, and would misread them.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader.h"
#include "proto.h"
#include "ring.h"
#include "ringcheck.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/*
 * The valid ring: 4 slots of 704 bytes after the header page; batches
 * of 4. In a slot: its struct ring_slot (up to 384 bytes with its
 * outputs' shapes), the ids at 384 (32 bytes), "x" f32 [4, 2, 3] at 448
 * (96 bytes), and "r" ragged i16 [4, RING_RAGGED, 3] (rows of 6 bytes)
 * with 60 bytes of values at 576 and its 5 offsets at 640 (40 bytes).
 */
#define BATCH	   4
#define SLOT	   704
#define SLOTS	   4
#define RING_BYTES (RING_PAGE + SLOTS * SLOT)

static void valid(struct ring_hdr *h, struct proto_open *po)
{
	struct ring_output *x = &h->out[0], *r = &h->out[1];

	memset(h, 0, sizeof(*h));
	h->magic = RING_MAGIC;
	h->version = RING_VERSION;
	h->slot_count = SLOTS;
	h->noutputs = 2;
	h->slot_size = SLOT;
	h->slots_offset = RING_PAGE;
	h->total_bytes = RING_BYTES;
	h->batch_size = BATCH;
	h->ids_offset = 384;

	strcpy(x->name, "x");
	x->dtype = RING_DTYPE_F32;
	x->ndim = 3;
	x->shape[0] = BATCH;
	x->shape[1] = 2;
	x->shape[2] = 3;
	x->bytes = BATCH * 2 * 3 * 4;
	x->offset = 448;

	strcpy(r->name, "r");
	r->dtype = RING_DTYPE_I16;
	r->flags = RING_OUT_RAGGED;
	r->ndim = 3;
	r->shape[0] = BATCH;
	r->shape[1] = RING_RAGGED;
	r->shape[2] = 3;
	r->row = 6;
	r->bytes = 60;
	r->offset = 576;
	r->index = 640;

	memset(po, 0, sizeof(*po));
	po->batch_size = BATCH;
	po->noutputs = 2;
}

static int check(const struct ring_hdr *h, const struct proto_open *po,
		 struct loader_output *out, char *why, size_t len)
{
	memset(why, 0, len);
	return loader_check_hdr(h, RING_BYTES, po, 0, out, why, len);
}

Test(ringcheck, valid_header)
{
	struct loader_output out[PROTO_MAX_OUTPUTS];
	struct proto_open po;
	struct ring_hdr h;
	char why[512];

	valid(&h, &po);
	memset(out, 0xa5, sizeof(out));
	cr_assert_eq(check(&h, &po, out, why, sizeof(why)), 0, "%s", why);

	cr_expect_str_eq(out[0].name, "x");
	cr_expect_eq(out[0].dtype, LOADER_DTYPE_F32);
	cr_expect_eq(out[0].ndim, 3);
	cr_expect_eq(out[0].shape[0], BATCH);
	cr_expect_eq(out[0].shape[1], 2);
	cr_expect_eq(out[0].shape[2], 3);
	cr_expect_eq(out[0].offset, 448);
	cr_expect_eq(out[0].sample_bytes, 24);
	cr_expect_not(out[0].ragged);

	cr_expect_str_eq(out[1].name, "r");
	cr_expect_eq(out[1].dtype, LOADER_DTYPE_I16);
	cr_expect_eq(out[1].ndim, 3);
	cr_expect_eq(out[1].shape[1], RING_RAGGED);
	cr_expect_eq(out[1].offset, 576);
	cr_expect(out[1].ragged);
	cr_expect_eq(out[1].index, 640);
	cr_expect_eq(out[1].room, 60);
	cr_expect_eq(out[1].row, 6);
	cr_expect_eq(out[1].sample_bytes, 0);
}

/* ---- what is taken ---------------------------------------------------- */

static void all_outputs(struct ring_hdr *h, struct proto_open *po)
{
	(void)h;
	po->noutputs = 0; /* "all": the daemon says how many */
}

static void ids_at_the_end(struct ring_hdr *h, struct proto_open *po)
{
	(void)po;
	h->ids_offset = SLOT - BATCH * 8;
}

static void output_at_the_end(struct ring_hdr *h, struct proto_open *po)
{
	(void)po;
	h->out[0].shape[2] = 4; /* 128 bytes: 576..704 */
	h->out[0].bytes = BATCH * 2 * 4 * 4;
	h->out[0].offset = 576;
	h->noutputs = 1;
	po->noutputs = 1;
}

static void named_ring(struct ring_hdr *h, struct proto_open *po)
{
	(void)po;
	h->flags = RING_NAMED;
	h->epochs = 3;
	h->batches_per_epoch = 17;
}

static void smaller_slots(struct ring_hdr *h, struct proto_open *po)
{
	(void)po;
	h->slot_count = 2; /* the rest of the mapping unused */
}

static void one_sample_a_batch(struct ring_hdr *h, struct proto_open *po)
{
	h->batch_size = 1;
	po->batch_size = 1;
	h->out[0].shape[0] = 1;
	h->out[0].bytes = 24;
	h->out[1].shape[0] = 1;
}

Test(ringcheck, takes)
{
	static const struct {
		void (*set)(struct ring_hdr *h, struct proto_open *po);
		const char *what;
	} t[] = {
		{ all_outputs, "every output, as the daemon has them" },
		{ ids_at_the_end, "sample ids that end with the slot" },
		{ output_at_the_end, "an output that ends with the slot" },
		{ named_ring, "a named stream's ring" },
		{ smaller_slots, "slots that fill less than the mapping" },
		{ one_sample_a_batch, "batches of one sample" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_output out[PROTO_MAX_OUTPUTS];
		struct proto_open po;
		struct ring_hdr h;
		char why[512];

		valid(&h, &po);
		t[i].set(&h, &po);
		cr_expect_eq(check(&h, &po, out, why, sizeof(why)), 0, "%s: %s",
			     t[i].what, why);
	}
}

/* ---- what is refused ---------------------------------------------------- */

/* One rule broken in a valid header (po: the request it answers). */
#define BREAK(fn, stmt)                                                        \
	static void fn(struct ring_hdr *h, struct proto_open *po)              \
	{                                                                      \
		(void)h;                                                       \
		(void)po;                                                      \
		stmt;                                                          \
	}

BREAK(magic_zero, h->magic = 0)
BREAK(magic_swapped, h->magic = 0x4c4c5247)
BREAK(version_newer, h->version = RING_VERSION + 1)
BREAK(version_older, h->version = RING_VERSION - 1)
BREAK(total_larger, h->total_bytes = RING_BYTES + RING_PAGE)
BREAK(total_smaller, h->total_bytes = RING_BYTES - SLOT)
BREAK(slots_elsewhere, h->slots_offset = 0)
BREAK(no_slots, h->slot_count = 0)
BREAK(three_slots, h->slot_count = 3)
BREAK(six_slots, h->slot_count = 6)
BREAK(eight_slots, h->slot_count = 8)
BREAK(slots_past_u32, h->slot_count = 1u << 31)
BREAK(slot_unaligned, h->slot_size = SLOT - 32)
BREAK(slot_empty, h->slot_size = 0)
BREAK(slot_huge, h->slot_size = UINT64_MAX - 63)
BREAK(batch_other, h->batch_size = 8)
BREAK(no_outputs, h->noutputs = 0)
BREAK(nine_outputs, {
	h->noutputs = 9;
	po->noutputs = 0;
})
BREAK(outputs_other, h->noutputs = 1)
BREAK(ids_unaligned, h->ids_offset = 388)
BREAK(ids_in_the_slot_head, h->ids_offset = 24)
BREAK(ids_past_the_slot, h->ids_offset = SLOT - 24)
BREAK(ids_wrapping, h->ids_offset = UINT64_MAX - 7)
BREAK(name_unterminated, memset(h->out[0].name, 'a', PROTO_NAME_MAX))
BREAK(name_empty, h->out[0].name[0] = '\0')
BREAK(name_unterminated_1, memset(h->out[1].name, 'a', PROTO_NAME_MAX))
BREAK(dtype_zero, h->out[0].dtype = 0)
BREAK(dtype_past, h->out[0].dtype = RING_DTYPE_F64 + 1)
BREAK(flags_unknown, h->out[0].flags = 2)
BREAK(ndim_zero, h->out[0].ndim = 0)
BREAK(ndim_past, h->out[0].ndim = RING_MAX_DIMS + 1)
BREAK(first_dim_other, h->out[0].shape[0] = BATCH - 1)
BREAK(dim_zero, h->out[0].shape[2] = 0)
BREAK(dim_past_slot, h->out[0].shape[1] = SLOT / 4 + 1)
BREAK(dims_wrapping, {
	h->out[0].shape[1] = 1ull << 32;
	h->out[0].shape[2] = 1ull << 32;
})
BREAK(bytes_short, h->out[0].bytes -= 1)
BREAK(sample_past_slot, {
	h->out[0].shape[1] = 5;
	h->out[0].shape[2] = 5; /* 100 bytes a sample, 400 a batch */
	h->out[0].bytes = 96;
})
BREAK(output_unaligned, h->out[0].offset = 448 + 8)
BREAK(output_in_the_slot_head, h->out[0].offset = 0)
BREAK(output_past_the_slot, h->out[0].offset = 640)
BREAK(output_wrapping, h->out[0].offset = UINT64_MAX - 63)
BREAK(ragged_dtype_zero, h->out[1].dtype = 0)
BREAK(ragged_ndim_one, h->out[1].ndim = 1)
BREAK(ragged_ndim_past, h->out[1].ndim = RING_MAX_DIMS + 1)
BREAK(ragged_not_ragged, h->out[1].shape[1] = 7)
BREAK(ragged_first_dim_other, h->out[1].shape[0] = BATCH + 1)
BREAK(ragged_dim_zero, h->out[1].shape[2] = 0)
BREAK(ragged_row_other, h->out[1].row = 5)
BREAK(ragged_values_unaligned, h->out[1].offset = 576 + 4)
BREAK(ragged_index_unaligned, h->out[1].index = 640 + 8)
BREAK(ragged_values_in_the_slot_head, h->out[1].offset = 0)
BREAK(ragged_index_in_the_slot_head, {
	h->out[1].index = 0;
	h->out[1].offset = 640; /* so that only the index is wrong */
})
BREAK(ragged_values_past_the_slot, h->out[1].bytes = SLOT - 576 + 1)
BREAK(ragged_index_past_the_slot, h->out[1].index = SLOT)
BREAK(ragged_values_wrapping, h->out[1].bytes = UINT64_MAX - 255)
BREAK(ragged_overlap, h->out[1].index = 576)
BREAK(ragged_overlap_tail, h->out[1].bytes = 65)

Test(ringcheck, refuses)
{
	static const struct {
		void (*set)(struct ring_hdr *h, struct proto_open *po);
		int err;
		const char *why;
	} t[] = {
		{ magic_zero, LOADER_EPROTO, "ring: bad magic 0x00000000" },
		{ magic_swapped, LOADER_EPROTO, "ring: bad magic 0x4c4c5247" },
		{ total_larger, LOADER_EPROTO,
		  "ring: 11008 bytes with slots at 4096, mapped 6912" },
		{ total_smaller, LOADER_EPROTO,
		  "ring: 6208 bytes with slots at 4096, mapped 6912" },
		{ slots_elsewhere, LOADER_EPROTO,
		  "ring: 6912 bytes with slots at 0, mapped 6912" },
		{ no_slots, LOADER_EPROTO,
		  "ring: 0 slots of 704 bytes do not fit 6912 bytes" },
		{ three_slots, LOADER_EPROTO,
		  "ring: 3 slots of 704 bytes do not fit 6912 bytes" },
		{ six_slots, LOADER_EPROTO,
		  "ring: 6 slots of 704 bytes do not fit 6912 bytes" },
		{ eight_slots, LOADER_EPROTO,
		  "ring: 8 slots of 704 bytes do not fit 6912 bytes" },
		{ slots_past_u32, LOADER_EPROTO,
		  "ring: 2147483648 slots of 704 bytes do not fit 6912 bytes" },
		{ slot_unaligned, LOADER_EPROTO,
		  "ring: 4 slots of 672 bytes do not fit 6912 bytes" },
		{ slot_empty, LOADER_EPROTO,
		  "ring: 4 slots of 0 bytes do not fit 6912 bytes" },
		{ slot_huge, LOADER_EPROTO,
		  "ring: 4 slots of 18446744073709551552 bytes do not fit 6912 bytes" },
		{ batch_other, LOADER_EPROTO,
		  "ring: batch size 8, asked for 4" },
		{ no_outputs, LOADER_EPROTO,
		  "ring: 0 outputs, asked for 2 (0: all)" },
		{ nine_outputs, LOADER_EPROTO,
		  "ring: 9 outputs, asked for 0 (0: all)" },
		{ outputs_other, LOADER_EPROTO,
		  "ring: 1 outputs, asked for 2 (0: all)" },
		{ ids_unaligned, LOADER_EPROTO,
		  "ring: sample ids at 388 outside a 704-byte slot or misaligned" },
		{ ids_in_the_slot_head, LOADER_EPROTO,
		  "ring: sample ids at 24 outside a 704-byte slot or misaligned" },
		{ ids_past_the_slot, LOADER_EPROTO,
		  "ring: sample ids at 680 outside a 704-byte slot or misaligned" },
		{ ids_wrapping, LOADER_EPROTO,
		  "ring: sample ids at 18446744073709551608 outside a 704-byte slot or misaligned" },
		{ name_unterminated, LOADER_EPROTO,
		  "ring output 0: name not a string" },
		{ name_empty, LOADER_EPROTO,
		  "ring output 0: name not a string" },
		{ name_unterminated_1, LOADER_EPROTO,
		  "ring output 1: name not a string" },
		{ dtype_zero, LOADER_EPROTO, "ring output x: unknown dtype 0" },
		{ dtype_past, LOADER_EPROTO,
		  "ring output x: unknown dtype 12" },
		{ flags_unknown, LOADER_EPROTO,
		  "ring output x: unknown flags 0x2" },
		{ ndim_zero, LOADER_EPROTO,
		  "ring output x: bad shape (ndim 0, first dimension 4)" },
		{ ndim_past, LOADER_EPROTO,
		  "ring output x: bad shape (ndim 6, first dimension 4)" },
		{ first_dim_other, LOADER_EPROTO,
		  "ring output x: bad shape (ndim 3, first dimension 3)" },
		{ dim_zero, LOADER_EPROTO, "ring output x: dimension 2 is 0" },
		{ dim_past_slot, LOADER_EPROTO,
		  "ring output x: dimension 1 is 177" },
		{ dims_wrapping, LOADER_EPROTO,
		  "ring output x: dimension 1 is 4294967296" },
		{ bytes_short, LOADER_EPROTO,
		  "ring output x: 95 bytes for 4 samples of 24" },
		{ sample_past_slot, LOADER_EPROTO,
		  "ring output x: 96 bytes for 4 samples of 100" },
		{ output_unaligned, LOADER_EPROTO,
		  "ring output x: offset 456, 96 bytes, outside a 704-byte slot or misaligned" },
		{ output_in_the_slot_head, LOADER_EPROTO,
		  "ring output x: offset 0, 96 bytes, outside a 704-byte slot or misaligned" },
		{ output_past_the_slot, LOADER_EPROTO,
		  "ring output x: offset 640, 96 bytes, outside a 704-byte slot or misaligned" },
		{ output_wrapping, LOADER_EPROTO,
		  "ring output x: offset 18446744073709551552, 96 bytes, outside a 704-byte slot or misaligned" },
		{ ragged_dtype_zero, LOADER_EPROTO,
		  "ring output r: unknown dtype 0" },
		{ ragged_ndim_one, LOADER_EPROTO,
		  "ring output r: ragged, but dtype 4, ndim 1" },
		{ ragged_ndim_past, LOADER_EPROTO,
		  "ring output r: ragged, but dtype 4, ndim 6" },
		{ ragged_not_ragged, LOADER_EPROTO,
		  "ring output r: ragged, but dtype 4, ndim 3" },
		{ ragged_first_dim_other, LOADER_EPROTO,
		  "ring output r: ragged, but dtype 4, ndim 3" },
		{ ragged_dim_zero, LOADER_EPROTO,
		  "ring output r: dimension 2 is 0" },
		{ ragged_row_other, LOADER_EPROTO,
		  "ring output r: rows of 5 bytes, not 6" },
		{ ragged_values_unaligned, LOADER_EPROTO,
		  "ring output r: values at 580 (60 bytes) and offsets at 640, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_index_unaligned, LOADER_EPROTO,
		  "ring output r: values at 576 (60 bytes) and offsets at 648, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_values_in_the_slot_head, LOADER_EPROTO,
		  "ring output r: values at 0 (60 bytes) and offsets at 640, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_index_in_the_slot_head, LOADER_EPROTO,
		  "ring output r: values at 640 (60 bytes) and offsets at 0, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_values_past_the_slot, LOADER_EPROTO,
		  "ring output r: values at 576 (129 bytes) and offsets at 640, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_index_past_the_slot, LOADER_EPROTO,
		  "ring output r: values at 576 (60 bytes) and offsets at 704, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_values_wrapping, LOADER_EPROTO,
		  "ring output r: values at 576 (18446744073709551360 bytes) and offsets at 640, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_overlap, LOADER_EPROTO,
		  "ring output r: values at 576 (60 bytes) and offsets at 576, outside a 704-byte slot, misaligned or overlapping" },
		{ ragged_overlap_tail, LOADER_EPROTO,
		  "ring output r: values at 576 (65 bytes) and offsets at 640, outside a 704-byte slot, misaligned or overlapping" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_output out[PROTO_MAX_OUTPUTS];
		struct proto_open po;
		struct ring_hdr h;
		char why[512];
		int err;

		valid(&h, &po);
		t[i].set(&h, &po);
		err = check(&h, &po, out, why, sizeof(why));
		cr_expect_eq(err, t[i].err, "%s: %d (%s)", t[i].why, err, why);
		cr_expect_str_eq(why, t[i].why);
		/* No room for the reason: the same answer, nothing written. */
		cr_expect_eq(
			loader_check_hdr(&h, RING_BYTES, &po, 0, out, NULL, 0),
			t[i].err, "%s, without a buffer", t[i].why);
	}
}

/* Another ring version: LOADER_EVERSION, naming both. */
Test(ringcheck, refuses_other_versions)
{
	static void (*const set[])(struct ring_hdr *, struct proto_open *) = {
		version_newer,
		version_older,
	};

	for (size_t i = 0; i < NELEM(set); i++) {
		struct loader_output out[PROTO_MAX_OUTPUTS];
		struct proto_open po;
		struct ring_hdr h;
		char why[512], want[512];

		valid(&h, &po);
		set[i](&h, &po);
		snprintf(want, sizeof(want),
			 "ring version %u, this library knows %d", h.version,
			 RING_VERSION);
		cr_expect_eq(check(&h, &po, out, why, sizeof(why)),
			     LOADER_EVERSION, "%s", why);
		cr_expect_str_eq(why, want);
	}
}

/*
 * The checks run in order, so a header broken in several ways names
 * the first: magic before version, the ring before its outputs.
 */
Test(ringcheck, names_the_first_fault)
{
	struct loader_output out[PROTO_MAX_OUTPUTS];
	struct proto_open po;
	struct ring_hdr h;
	char why[512];

	valid(&h, &po);
	h.magic = 1;
	h.version = 0;
	h.slot_count = 3;
	cr_expect_eq(check(&h, &po, out, why, sizeof(why)), LOADER_EPROTO);
	cr_expect_str_eq(why, "ring: bad magic 0x00000001");

	valid(&h, &po);
	h.out[0].dtype = 0;
	h.ids_offset = 1;
	cr_expect_eq(check(&h, &po, out, why, sizeof(why)), LOADER_EPROTO);
	cr_expect_str_eq(
		why,
		"ring: sample ids at 1 outside a 704-byte slot or misaligned");
}

/* ---- a batch's shape, from its slot ---------------------------------- */

Test(ringcheck, batch_shapes)
{
	struct loader_output out[PROTO_MAX_OUTPUTS];
	struct proto_open po;
	struct ring_hdr h;
	char why[512];
	uint64_t bytes = 0;

	valid(&h, &po);
	cr_assert_eq(check(&h, &po, out, why, sizeof(why)), 0, "%s", why);
	/* x is f32 [4, 2, 3]: a full batch, a short one, smaller samples */
	cr_expect_eq(loader_check_shape(&out[0],
					(uint64_t[RING_MAX_DIMS]){ 4, 2, 3 }, 4,
					&bytes, why, sizeof(why)),
		     0, "%s", why);
	cr_expect_eq(bytes, 4 * 2 * 3 * 4);
	cr_expect_eq(loader_check_shape(&out[0],
					(uint64_t[RING_MAX_DIMS]){ 3, 1, 2 }, 3,
					&bytes, why, sizeof(why)),
		     0, "%s", why);
	cr_expect_eq(bytes, 3 * 1 * 2 * 4);
	cr_expect_eq(loader_check_shape(&out[0],
					(uint64_t[RING_MAX_DIMS]){ 4, 2, 4 }, 4,
					&bytes, why, sizeof(why)),
		     LOADER_EPROTO);
	cr_expect_str_eq(
		why,
		"ring output x: dimension 2 of a batch is 4, outside 1..3");
	cr_expect_eq(loader_check_shape(&out[0],
					(uint64_t[RING_MAX_DIMS]){ 4, 0, 3 }, 4,
					&bytes, why, sizeof(why)),
		     LOADER_EPROTO);
	cr_expect_str_eq(
		why,
		"ring output x: dimension 1 of a batch is 0, outside 1..2");
	cr_expect_eq(loader_check_shape(
			     &out[0],
			     (uint64_t[RING_MAX_DIMS]){ 4, UINT64_MAX, 3 }, 4,
			     &bytes, why, sizeof(why)),
		     LOADER_EPROTO);
	cr_expect_eq(loader_check_shape(&out[0],
					(uint64_t[RING_MAX_DIMS]){ 4, 2, 3 }, 3,
					&bytes, why, sizeof(why)),
		     LOADER_EPROTO);
	cr_expect_str_eq(why,
			 "ring output x: a batch of 3 samples, shaped for 4");
}

/* ---- a mixture's members ------------------------------------------------ */

/*
 * The valid ring as a mixture of 3 members: each sample's member (a u32,
 * 16 bytes a batch) at 416, between the ids (384..416) and "x"
 * (448..544). *asked: the members the client asked for.
 */
static void mixture(struct ring_hdr *h, struct proto_open *po, uint32_t *asked)
{
	valid(h, po);
	h->flags |= RING_MIXTURE;
	h->nmembers = 3;
	h->members_offset = 416;
	*asked = 3;
}

#define MIX(fn, stmt)                                                          \
	static void fn(struct ring_hdr *h, struct proto_open *po,              \
		       uint32_t *asked)                                        \
	{                                                                      \
		mixture(h, po, asked);                                         \
		stmt;                                                          \
	}

MIX(as_is, (void)0)
MIX(members_after_x, h->members_offset = 544)
MIX(members_at_the_end, h->members_offset = SLOT - BATCH * 4)
MIX(one_member, {
	h->nmembers = 1;
	*asked = 1;
})
MIX(every_member, {
	h->nmembers = PROTO_MAX_MEMBERS;
	*asked = PROTO_MAX_MEMBERS;
})
MIX(named_mixture, h->flags |= RING_NAMED)
MIX(counts_change, {
	h->flags |= RING_NAMED;
	h->counts_from = 3;
	h->later_batches = 22;
})

/* loader_check_hdr() of the mixture's header as set makes it. */
static int check_mixture(void (*set)(struct ring_hdr *h, struct proto_open *po,
				     uint32_t *asked),
			 char why[512])
{
	struct loader_output out[PROTO_MAX_OUTPUTS];
	struct proto_open po;
	struct ring_hdr h;
	uint32_t asked;

	set(&h, &po, &asked);
	return loader_check_hdr(&h, RING_BYTES, &po, asked, out, why, 512);
}

Test(ringcheck, takes_mixtures)
{
	static const struct {
		void (*set)(struct ring_hdr *h, struct proto_open *po,
			    uint32_t *asked);
		const char *what;
	} t[] = {
		{ as_is, "3 members between the ids and an output" },
		{ members_after_x, "members between two outputs" },
		{ members_at_the_end, "members that end with the slot" },
		{ one_member, "a mixture of one" },
		{ every_member, "PROTO_MAX_MEMBERS members" },
		{ named_mixture, "a named mixture" },
		{ counts_change, "a named mixture whose counts change" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		char why[512] = "";

		cr_expect_eq(check_mixture(t[i].set, why), 0, "%s: %s",
			     t[i].what, why);
	}
}

/* One dataset: no flag, no members, asked for none. */
MIX(single_with_members, {
	h->flags = 0;
	h->members_offset = 0;
	*asked = 0;
})
MIX(single_with_offset, {
	h->flags = 0;
	h->nmembers = 0;
	*asked = 0;
})
MIX(single_asked_members, {
	h->flags = 0;
	h->nmembers = 0;
	h->members_offset = 0;
})
MIX(no_members, h->nmembers = 0)
MIX(too_many_members, {
	h->nmembers = PROTO_MAX_MEMBERS + 1;
	*asked = PROTO_MAX_MEMBERS + 1;
})
MIX(fewer_members, h->nmembers = 2)
MIX(unasked_mixture, *asked = 0)
MIX(members_unaligned, h->members_offset = 418)
MIX(members_in_the_slot_head, h->members_offset = 24)
MIX(members_past_the_slot, h->members_offset = SLOT - 12)
MIX(members_wrapping, h->members_offset = UINT64_MAX - 3)
MIX(members_over_ids, h->members_offset = 400)
MIX(members_over_x, h->members_offset = 440)
MIX(members_over_x_tail, h->members_offset = 540)
MIX(members_over_ragged_values, h->members_offset = 624)
MIX(members_over_ragged_offsets, h->members_offset = 664)
/* Counts that change: both fields or neither, and only in a mixture. */
MIX(single_counts_change, {
	h->flags = 0;
	h->nmembers = 0;
	h->members_offset = 0;
	*asked = 0;
	h->counts_from = 2;
	h->later_batches = 7;
})
MIX(counts_from_alone, h->counts_from = 2)
MIX(later_batches_alone, h->later_batches = 7)

Test(ringcheck, refuses_mixtures)
{
	static const struct {
		void (*set)(struct ring_hdr *h, struct proto_open *po,
			    uint32_t *asked);
		const char *why;
	} t[] = {
		{ single_with_members,
		  "ring: not a mixture, but 3 members at 0 (asked for 0), counts from epoch 0" },
		{ single_with_offset,
		  "ring: not a mixture, but 0 members at 416 (asked for 0), counts from epoch 0" },
		{ single_asked_members,
		  "ring: not a mixture, but 0 members at 0 (asked for 3), counts from epoch 0" },
		{ single_counts_change,
		  "ring: not a mixture, but 0 members at 0 (asked for 0), counts from epoch 2" },
		{ counts_from_alone,
		  "ring: counts change at epoch 2 to 0 batches" },
		{ later_batches_alone,
		  "ring: counts change at epoch 0 to 7 batches" },
		{ no_members, "ring: a mixture of 0 members, asked for 3" },
		{ too_many_members,
		  "ring: a mixture of 33 members, asked for 33" },
		{ fewer_members, "ring: a mixture of 2 members, asked for 3" },
		{ unasked_mixture,
		  "ring: a mixture of 3 members, asked for 0" },
		{ members_unaligned,
		  "ring: sample members at 418 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_in_the_slot_head,
		  "ring: sample members at 24 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_past_the_slot,
		  "ring: sample members at 692 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_wrapping,
		  "ring: sample members at 18446744073709551612 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_over_ids,
		  "ring: sample members at 400 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_over_x,
		  "ring: sample members at 440 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_over_x_tail,
		  "ring: sample members at 540 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_over_ragged_values,
		  "ring: sample members at 624 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
		{ members_over_ragged_offsets,
		  "ring: sample members at 664 (16 bytes) outside a 704-byte slot, misaligned or overlapping" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		char why[512] = "";
		int err = check_mixture(t[i].set, why);

		cr_expect_eq(err, LOADER_EPROTO, "%s: %d (%s)", t[i].why, err,
			     why);
		cr_expect_str_eq(why, t[i].why);
	}
}
