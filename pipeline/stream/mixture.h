/*
 * mixture.h - a mixture's epochs: how many samples each member dataset
 * gives an epoch, and which ones (doc/design.md, "Mixtures").
 *
 * Members are given as Mosaic Streaming's Streams are: each by its
 * proportion of the epoch, or by repeat (a factor of its own size), or
 * by choose (a number of samples). Either every member gives a
 * proportion or none does. A member's count c_m, fixed for every epoch,
 * is computed as Mosaic's Stream.apply_weights() computes it, the same
 * double operations in the same order, so that both give one mixture
 * the same counts:
 *   proportion: the epoch has E = epoch_size samples (0: the members'
 *               sizes added up), and c_m = floor(E * (p_m / S)) in
 *               doubles, S the proportions' sum as NumPy adds them.
 *               What rounding down leaves short of E (fewer samples
 *               than members) goes one sample each to the members with
 *               the largest fractional parts of E * (p_m / S), the
 *               lower member number first among equal ones. (Mosaic
 *               gives it to members drawn with NumPy's generator
 *               seeded by the shuffle seed; here the counts depend on
 *               the members alone, not on the seed.)
 *   repeat:     c_m = floor(repeat_m * n_m) in doubles (Mosaic's int(),
 *               which truncates: repeat 0.5 of 3 samples gives 1).
 *   choose:     c_m = choose_m.
 * Without proportions E = sum(c_m). A member may give 0 samples (a
 * small proportion or repeat); the epoch may not.
 * Its count c_m is taken from the member's n_m samples as:
 *   c_m <= n_m: c_m of its samples, without replacement, drawn afresh
 *               each epoch (a subsample);
 *   c_m > n_m:  floor(c_m / n_m) whole copies of the member, and the
 *               remainder c_m mod n_m drawn as a subsample is.
 * The counts are the same every epoch; which samples a subsample takes
 * changes with the epoch.
 *
 * The mixture's epoch is a virtual dataset of E = sum(c_m) samples, laid
 * out member after member: member m's c_m places are its whole copies
 * (each its samples in dataset order) and then its remainder. The order
 * (order.h) permutes and deals those E places exactly as it does a
 * dataset's samples, with the virtual dataset's blocks
 * (mixture_blocks()) as its shards; mixture_map() turns a place into
 * (member, sample of the member). Everything is a pure function of the
 * members' sizes and shard sizes, their counts, the seed and the epoch:
 * threads, ranks and restarts change nothing.
 *
 * Blocks: each whole copy of member m contributes m's shards (their
 * sizes, empty ones included), and a remainder (when c_m mod n_m > 0)
 * one block of its size.
 * A quasi order (ORDER_QUASI) keeps reads within a few shards at a time:
 * with quasi, a remainder is drawn as whole shards of the member (its
 * shards in an order keyed by (seed, epoch, member), taken until the
 * remainder is reached, the last one in part: a run of consecutive
 * records, cyclically from an offset keyed the same way), each shard's
 * records in file order; empty shards are passed over. Otherwise a
 * remainder is the first places of a keyed permutation of the member's
 * samples (a uniform subsample). The keys are rng_mix(seed, epoch, a
 * salt of this module's XOR m), the permutations order.h's order_perm.
 *
 * Where this departs from Mosaic (whose draws come from NumPy's
 * generator, which we cannot reproduce):
 *   - the rounding shortfall of proportions (above);
 *   - which samples a remainder takes: Mosaic first spreads c_m over
 *     the member's shards (streaming/base/sampling.py, get_sampling():
 *     whole copies of every shard, then granules of the remainder in a
 *     NumPy permutation) and then draws within each shard; here the
 *     whole copies are of the member and the remainder is one keyed
 *     draw over the member. Without quasi both take a uniform subsample
 *     of c_m mod n_m samples (Mosaic's default granularity of 1); with
 *     quasi the remainder is whole shards, as Mosaic's with a
 *     granularity of a shard;
 *   - a value of 0 is refused (Mosaic takes it as "give nothing");
 *   - a member must say how it is weighted (Mosaic takes none as
 *     repeat 1, which a caller can write).
 */
#ifndef LD_MIXTURE_H
#define LD_MIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"

#define MIXTURE_MAX_MEMBERS 32
/* Samples of one member, and of an epoch, at most. */
#define MIXTURE_MAX_SAMPLES (1ull << 48)
/*
 * Blocks at most (8 bytes each here, and about 20 more in an order):
 * whole copies of a member of many shards add up.
 */
#define MIXTURE_MAX_BLOCKS (1u << 24)

enum mixture_how {
	MIXTURE_PROPORTION = 0, /* value > 0: its share of the epoch */
	MIXTURE_REPEAT = 1,	/* value > 0: times its own size */
	MIXTURE_CHOOSE = 2,	/* value: a whole number of samples, >= 1 */
};

struct mixture_member {
	uint32_t nshards;
	const uint64_t *shard_records; /* its shards' samples; copied */
	enum mixture_how how;
	double value;
};

/*
 * What a mixture's members are asked to give an epoch, the inputs of
 * its counts: each member's how and value, and epoch_size. A stream
 * whose counts change at an epoch keeps the earlier ones in one
 * (stream.h, counts_from).
 */
struct mixture_weights {
	uint32_t n;
	uint64_t epoch_size;
	enum mixture_how how[MIXTURE_MAX_MEMBERS];
	double value[MIXTURE_MAX_MEMBERS];
};

struct mixture_params {
	uint32_t nmembers; /* 1..MIXTURE_MAX_MEMBERS */
	const struct mixture_member *m;
	/* With proportions: samples an epoch (0: the members' sizes added
	 * up). Must be 0 without. */
	uint64_t epoch_size;
	uint64_t seed;
	bool quasi; /* draw remainders as whole shards (above) */
};

struct mixture;

/*
 * Make the mixture of p, epoch 0 selected. Returns 0, -ENOMEM, or
 * LOADER_EUSAGE with the reason in d (d may be NULL), naming the member
 * by its number (from 0, "mixture: member 2: ..."): an empty member, a
 * value out of range (0, negative, NaN, infinite, a choose that is not
 * whole), proportions beside repeat/choose, an epoch_size without
 * proportions, an epoch of no samples, more than MIXTURE_MAX_SAMPLES
 * (a member, an epoch, a choose, repeat times size), or more than
 * MIXTURE_MAX_BLOCKS blocks. On failure *out is NULL.
 */
int mixture_new(struct mixture **out, const struct mixture_params *p,
		struct diag *d);

/* Free a mixture. NULL is a no-op. */
void mixture_free(struct mixture *mx);

uint32_t mixture_members(const struct mixture *mx);

/* Samples of member m's dataset (the sum of its shards). */
uint64_t mixture_member_size(const struct mixture *mx, uint32_t m);

/* Samples an epoch, E. */
uint64_t mixture_size(const struct mixture *mx);

/* Samples member m gives each epoch, c_m. */
uint64_t mixture_count(const struct mixture *mx, uint32_t m);

/* The first place of member m in the virtual dataset (c_0 + ... + c_{m-1}). */
uint64_t mixture_base(const struct mixture *mx, uint32_t m);

/*
 * The virtual dataset's blocks, in order: their number, and their sizes
 * in *records (valid for the life of mx), for order_params.nshards and
 * shard_records. The same for every epoch.
 */
uint32_t mixture_blocks(const struct mixture *mx, const uint64_t **records);

/*
 * Select the epoch mixture_map() answers for (it draws the epoch's
 * remainders' shards, with quasi). Not thread-safe against
 * mixture_map(); allocates nothing (mixture_new() did).
 */
void mixture_set_epoch(struct mixture *mx, uint32_t epoch);

uint32_t mixture_epoch(const struct mixture *mx);

/*
 * Place v (0..E-1) of the selected epoch's virtual dataset: its member
 * and its sample within that member (0..n_m - 1, counting its shards in
 * order). v >= E (order_sample()'s UINT64_MAX) gives UINT32_MAX and
 * UINT64_MAX. O(log shards of the member) after a search among the
 * members; thread-safe between mixture_set_epoch() calls; allocates
 * nothing.
 */
void mixture_map(const struct mixture *mx, uint64_t v, uint32_t *member,
		 uint64_t *index);

#endif /* LD_MIXTURE_H */
