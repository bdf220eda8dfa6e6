/*
 * order.h - the sample order contract (doc/design.md, "Sample order").
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
 * Padding (pad, with drop_last = 0) fills the ranks that the positions
 * below N leave a sample short: every rank gets ceil(N/w) samples, in
 * the same batches, the position p >= N of the sequence standing for
 * p mod N. So each rank's last batch has the same size (never 0), and
 * at most w - 1 samples an epoch come twice: each is the last sample of
 * its rank's last batch, and order_repeats() counts it, so that a loss
 * can leave it out. Padding changes no batch count and no position
 * below N: a stream may be resumed with or without it.
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
 *
 * Elastic resume. A job whose ranks of world w stopped part-way through
 * an epoch may go on with another world w' (same dataset, seed, order,
 * batch size and drop_last). The epoch's positions that no rank of w
 * released ("the rest", of length R) are listed in epoch order and
 * dealt to the new ranks as any epoch is: the rest's j-th position goes
 * to rank j mod w', in batches of B, and every rank gets the same
 * number of batches nb by the rules above with R in place of N: under
 * drop_last = 1, nb = floor(floor(R/w')/B) and the rest's positions
 * past w' * nb * B are not delivered that epoch (fewer than w' * B, as
 * at the end of any epoch); under drop_last = 0, nb = ceil(ceil(R/w')/B)
 * and the last batch of a rank may be short, or empty (with pad, each
 * rank gets ceil(R/w') places, the place j >= R standing for j mod R).
 * Those batches are the last of the epoch under w',
 * numbered bpe' - nb to bpe' - 1, so that a position (epoch, batch)
 * counts on as in any epoch resumed part-way; later epochs are whole.
 *
 * A plan records this, so that the new world may itself stop and resume
 * (with its own world or yet another). It is a flat array of 64-bit
 * words: the number of stages, then each stage as one word (epoch in the
 * low 32 bits, world W in the high 32) followed by W words done[0..W-1]:
 * in that epoch, rank r of world W had released done[r] samples of its
 * share of the list it was dealt (batches released times B). The stages
 * of an epoch apply in order: the first is dealt [0, N), each later one
 * the rest its predecessor left. At most ORDER_PLAN_EPOCHS epochs.
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
	bool pad; /* fill the short ranks (above); ignored with drop_last */
	uint32_t window; /* ORDER_QUASI: W; 0 means ORDER_QUASI_WINDOW */
	/*
	 * Dataset: nshards blocks of shard_records[i] samples, in order.
	 * Empty shards are allowed; the total must be at least 1.
	 */
	uint32_t nshards;
	const uint64_t *shard_records; /* copied */
	/* Elastic resume: a plan (see above), or NULL; copied. */
	const uint64_t *plan;
	size_t plan_words;
};

/* Epochs a plan may cover: ranks that far apart at most. */
#define ORDER_PLAN_EPOCHS 4
/*
 * Positions a plan may list one by one (those between the least and the
 * furthest rank of a stage): 8 bytes each, held by the order.
 */
#define ORDER_PLAN_MAX_LISTED (1ull << 24)

/*
 * Where each epoch starts, as a plan left it: enough to count positions
 * on (order_advance()) without the order. A mixture whose counts change
 * at an epoch (stream.h, counts_from) has another number of batches
 * from there on: later_from and later_batches, set by its stream (0
 * and 0 for none); the plan's epochs all come before later_from.
 */
struct order_sched {
	uint64_t batches; /* per epoch */
	uint32_t n;	  /* planned epochs */
	uint32_t epoch[ORDER_PLAN_EPOCHS];
	uint64_t first[ORDER_PLAN_EPOCHS]; /* its first batch */
	uint32_t later_from;
	uint64_t later_batches;
};

/*
 * The keyed pseudo-random permutation of [0, n) that every random order
 * here is built from, for other modules that must draw as the order
 * draws (a mixture's subsamples, mixture.h): a balanced Feistel network
 * of ORDER_PERM_ROUNDS rounds over the smallest domain of 4^h values
 * that holds n, kept inside [0, n) by cycle walking. Evaluated one value
 * at a time; nothing grows with n. A plain value: copy it freely, there
 * is nothing to free. The same (n, key) gives the same permutation on
 * every machine and in every release that keeps this header's rounds.
 */
#define ORDER_PERM_ROUNDS 8

struct order_perm {
	uint64_t n;    /* permutes [0, n) */
	unsigned half; /* bits per half, >= 1 */
	uint64_t mask; /* (1 << half) - 1 */
	uint64_t key[ORDER_PERM_ROUNDS];
};

/*
 * Set *p to the permutation of [0, n) keyed by key (any 64-bit value;
 * derive it with rng_mix() and a salt of your own, so that it is not
 * another permutation's or a sample's seed). n may be 0 or 1.
 */
void order_perm_init(struct order_perm *p, uint64_t n, uint64_t key);

/*
 * The image of x under *p, for x < p->n (0 when p->n <= 1; x >= p->n is
 * a caller's error, and may not return). Thread-safe; allocates
 * nothing. Fewer than 4 passes of the network on average.
 */
uint64_t order_perm_apply(const struct order_perm *p, uint64_t x);

struct order;

/*
 * Create an order for p, with epoch 0 selected. Returns 0, -ENOMEM, or
 * LOADER_EUSAGE with the reason in d (rank >= world, zero batch size,
 * empty dataset, ...); d may be NULL. On failure *out is NULL.
 */
int order_new(struct order **out, const struct order_params *p, struct diag *d);

/*
 * The last index j < n with start[j] <= v, for non-decreasing start[]
 * with start[0] = 0 <= v: of prefix sums, the entry that holds v (the
 * last of equal starts skips the empty entries before it). O(log n).
 */
uint32_t order_last_at_or_below(const uint64_t *start, uint32_t n, uint64_t v);

/* Free an order. NULL is a no-op. */
void order_free(struct order *o);

/* Total samples N of the dataset. */
uint64_t order_size(const struct order *o);

/* Batches per epoch; the same for every rank. */
uint64_t order_batches(const struct order *o);

/*
 * Samples in batch b of the selected epoch (0 <= b < order_batches());
 * 0 past them, and before order_first_batch() of a planned epoch.
 */
uint32_t order_batch_count(const struct order *o, uint64_t b);

/*
 * Of the order_batch_count(o, b) samples of batch b, how many at its end
 * repeat a sample of the epoch (padding): 0, or 1 in a rank's last batch.
 */
uint32_t order_repeats(const struct order *o, uint64_t b);

/* A run of consecutive records of one shard (record indexes in it). */
struct order_run {
	uint32_t shard;
	uint64_t first, count;
};

/*
 * ORDER_QUASI, in an epoch without a plan: the window that every sample
 * of batch b of the selected epoch lies in, as runs of consecutive
 * records in block order (at most max), and its number in *id (the same
 * for every batch of the window). Returns the number of runs, or 0 when
 * the batch spans two windows, the order is another, the epoch has a
 * plan, or more than max runs would be needed. A reader that reads the
 * runs once serves all the window's batches from them.
 */
uint32_t order_window(const struct order *o, uint64_t b, struct order_run *runs,
		      uint32_t max, uint64_t *id);

/*
 * The first batch of epoch e: 0, or for an epoch of the plan
 * order_batches() minus the batches of its rest (order_batches() when
 * the rest deals no batch). Thread-safe.
 */
uint64_t order_first_batch(const struct order *o, uint32_t e);

/* The schedule of o's epochs, for order_advance() (no later_from). */
void order_schedule(const struct order *o, struct order_sched *s);

/*
 * Move the position (*epoch, *batch) on by n batches of the schedule
 * (into a planned epoch at its first batch). A schedule whose epochs
 * (of either count) deal no batch leaves it as it is.
 */
void order_advance(const struct order_sched *s, uint32_t *epoch,
		   uint64_t *batch, uint64_t n);

/*
 * The plan that resumes, with another world, the job whose ranks of o's
 * world stopped at epoch[r], batch[r] (each rank's first batch not
 * released; o may be any rank's order, with the job's plan so far). The
 * plan has the stages of o's plan from the least of those epochs on and
 * a stage for each epoch some rank had begun: give it to the new
 * world's orders and start them at the least epoch's first batch.
 * *plan is malloc'd (the caller frees it), *words its length; *from the
 * least epoch. Returns 0, -ENOMEM, or LOADER_EUSAGE with the reason in
 * d (ranks too far apart).
 */
int order_replan(const struct order *o, const uint32_t *epoch,
		 const uint64_t *batch, uint64_t **plan, size_t *words,
		 uint32_t *from, struct diag *d);

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
 * UINT64_MAX (in a planned epoch: whose place j in the rest is R or
 * more), unless padding makes it a repeat, which gives the sample of
 * position p mod N (place j mod R). Thread-safe between order_set_epoch()
 * calls; allocates nothing.
 */
uint64_t order_sample(const struct order *o, uint64_t b, uint32_t k);

/*
 * order_sample(o, b, k) for k = 0..n-1, into out[k]: the same values,
 * computed side by side (the permutations of independent samples
 * overlap in the CPU rather than one after another).
 */
void order_batch(const struct order *o, uint64_t b, uint32_t n, uint64_t *out);

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
