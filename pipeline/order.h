/*
 * order.h - the sample order contract (DESIGN.md, "Sample order").
 *
 * For dataset size N (and shard sizes), seed s, epoch e, rank r of world
 * w, batch size B and drop_last, the samples of every batch are a pure
 * function of those values: not of threads, timing or restarts. Nothing
 * here grows with N: permutations are computed per position (a keyed
 * Feistel network with cycle walking), never stored.
 *
 * Position p of an epoch's global sequence goes to rank p mod w, so rank
 * r's i-th sample is at p = i*w + r. Every rank gets the same number of
 * batches per epoch:
 *   drop_last = 0: ceil(ceil(N/w) / B) batches; each sample of the epoch
 *                  is delivered exactly once across the ranks, and the
 *                  last batch of a rank may be short (even empty, when
 *                  N is small against w*B);
 *   drop_last = 1: floor(floor(N/w) / B) full batches; the samples past
 *                  them are not delivered this epoch (which ones changes
 *                  with the epoch under the random orders).
 * Orders:
 *   ORDER_SEQUENTIAL  p -> p.
 *   ORDER_RANDOM      a full pseudo-random permutation of [0, N) per epoch.
 *   ORDER_QUASI       shards (blocks) in a random order per epoch, then a
 *                     random permutation within each window of W
 *                     consecutive positions: reads stay within about
 *                     W samples of each other (for HDDs and huge data).
 *                     Precisely: the shards, permuted, are laid out back
 *                     to back with their records in file order (the
 *                     block order); epoch positions [k*W, k*W + L), with
 *                     L = min(W, N - k*W), are a permutation of the same
 *                     positions of the block order, keyed per window.
 * Every random choice is keyed by (seed, epoch), so an epoch's order
 * does not depend on w, r, B or drop_last: those only deal it out.
 */
#ifndef LD_ORDER_H
#define LD_ORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"

enum order_kind {
	ORDER_SEQUENTIAL = 0,
	ORDER_RANDOM = 1,
	ORDER_QUASI = 2,
};

#define ORDER_QUASI_WINDOW 4096 /* default W */

struct order_params {
	enum order_kind kind;
	uint64_t seed;
	uint32_t rank, world; /* rank < world, world >= 1 */
	uint32_t batch_size;  /* >= 1 */
	bool drop_last;
	uint32_t window; /* ORDER_QUASI: W; 0 means ORDER_QUASI_WINDOW */
	/*
	 * Dataset: nshards blocks of shard_records[i] samples, in order.
	 * Empty shards are allowed; the total must be at least 1.
	 */
	uint32_t nshards;
	const uint64_t *shard_records; /* copied */
};

struct order;

/*
 * Create an order for p, with epoch 0 selected. Returns 0, -ENOMEM, or
 * LOADER_EUSAGE with the reason in d (rank >= world, zero batch size,
 * empty dataset, ...); d may be NULL. On failure *out is NULL.
 */
int order_new(struct order **out, const struct order_params *p, struct diag *d);

/* Free an order. NULL is a no-op. */
void order_free(struct order *o);

/* Total samples N of the dataset. */
uint64_t order_size(const struct order *o);

/* Batches per epoch; the same for every rank. */
uint64_t order_batches(const struct order *o);

/* Samples in batch b of an epoch (0 <= b < order_batches()); 0 past them. */
uint32_t order_batch_count(const struct order *o, uint64_t b);

/*
 * Select the epoch that order_sample() answers for (it prepares the
 * epoch's shard permutation). Not thread-safe against order_sample().
 */
void order_set_epoch(struct order *o, uint32_t epoch);

/* The epoch selected last. */
uint32_t order_epoch(const struct order *o);

/*
 * Global sample index (0..N-1, counting shards in dataset order) of the
 * k-th sample of batch b in the selected epoch, k < order_batch_count().
 * A (b, k) whose epoch position i*w + r (i = b*B + k) is N or more gives
 * UINT64_MAX. Thread-safe between order_set_epoch() calls; allocates
 * nothing.
 */
uint64_t order_sample(const struct order *o, uint64_t b, uint32_t k);

/*
 * The seed of sample g's random numbers in the selected epoch:
 * rng_mix(seed, epoch, g). Augmentation draws only from it, so a
 * sample's randomness does not depend on which thread or rank made it.
 */
uint64_t order_sample_seed(const struct order *o, uint64_t g);

/*
 * The same for any epoch: rng_mix(seed, epoch, g). Thread-safe at any
 * time (it reads only the seed), so workers decoding batches of several
 * epochs need not select one.
 */
uint64_t order_seed_at(const struct order *o, uint32_t epoch, uint64_t g);

/*
 * Map a global sample index to its shard and record within the shard.
 * O(log nshards).
 */
void order_locate(const struct order *o, uint64_t g, uint32_t *shard,
		  uint64_t *record);

#endif /* LD_ORDER_H */
