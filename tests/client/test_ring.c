/*
 * test_ring.c - the ring's index arithmetic (client/ring.h), shared by
 * loaderd and libloader: slots and bounds across the 2^32 wrap.
 */
#include <stdint.h>

#include <criterion/criterion.h>

#include "ring.h"
#include "../unit_util.h"

/* Consecutive batches land in consecutive slots, across the wrap too. */
Test(ring, slots_follow_across_wrap)
{
	static const uint32_t slots[] = { 2, 8, 64, 1024 };

	for (size_t s = 0; s < sizeof(slots) / sizeof(slots[0]); s++) {
		uint32_t n = slots[s];

		for (uint32_t k = UINT32_MAX - 3 * n; k != 3 * n; k++) {
			cr_assert_eq(ring_slot_of(k + 1, n),
				     (ring_slot_of(k, n) + 1) % n,
				     "batch %u of %u slots", k, n);
			cr_assert_eq(ring_slot_of(k, n), k % n);
		}
	}
}

Test(ring, pending_across_wrap)
{
	cr_expect_eq(ring_pending(5, 3), 2);
	cr_expect_eq(ring_pending(2, UINT32_MAX - 1), 4);
	cr_expect_eq(ring_pending(0, 0), 0);
	cr_expect_eq(ring_pending(7, 7), 0);
}

/* The daemon's check of the untrusted consumer index, as a table. */
Test(ring, consumer_index_bounds)
{
	static const struct {
		uint32_t prod, cons, last, slots;
		int valid;
		const char *why;
	} t[] = {
		{ 10, 10, 10, 8, 1, "all released" },
		{ 10, 2, 2, 8, 1, "all slots full" },
		{ 10, 5, 2, 8, 1, "released three" },
		{ 10, 1, 1, 8, 0, "more pending than slots" },
		{ 10, 11, 10, 8, 0, "past what was published" },
		{ 10, 4, 5, 8, 0, "moved backwards" },
		{ 10, 10 + (1u << 31), 10, 8, 0, "half the space ahead" },
		{ 2, UINT32_MAX - 3, UINT32_MAX - 5, 8, 1, "across the wrap" },
		{ 2, 2, UINT32_MAX - 5, 8, 1, "all released across the wrap" },
		{ 2, 3, UINT32_MAX - 5, 8, 0, "past prod across the wrap" },
		{ 2, UINT32_MAX - 6, UINT32_MAX - 5, 8, 0,
		  "backwards across the wrap" },
		{ 0, 0, 0, 2, 1, "nothing yet" },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		cr_expect_eq(!!ring_cons_valid(t[i].prod, t[i].cons, t[i].last,
					       t[i].slots),
			     t[i].valid, "%s: prod %u cons %u last %u",
			     t[i].why, t[i].prod, t[i].cons, t[i].last);
}
