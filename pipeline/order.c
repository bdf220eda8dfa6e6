/*
 * order.c - the sample order: which global sample sits at each position
 * of an epoch, for every rank, without storing anything that grows with N.
 *
 * Every random order is built from one primitive: a keyed permutation of
 * [0, n) that is evaluated one position at a time. It is a balanced
 * Feistel network over the smallest domain of 4^h values that holds n
 * (so both halves have h bits), made to stay inside [0, n) by cycle
 * walking: a value that lands at or above n is pushed through the network
 * again until it does not. The walk ends because the network permutes
 * the whole domain, so following the cycle from x < n must reach another
 * value below n before it comes back to x. As the domain is under 4n, a
 * walk takes fewer than 4 passes on average.
 *
 * ORDER_RANDOM is that permutation over the whole dataset. ORDER_QUASI
 * permutes the shards once per epoch (an array of nshards, kept here),
 * lays their records out back to back in that order ("block order"),
 * and permutes positions only within aligned windows of W of that
 * sequence, each window with its own key. Reads then stay inside about
 * W consecutive records of at most a few shards at a time.
 */
#include <errno.h>
#include <stdlib.h>

#include "loader_error.h"
#include "order.h"
#include "rng.h"

/*
 * Eight rounds. Luby and Rackoff's bounds (three or four rounds for a
 * pseudo-random permutation) assume wide halves; the halves here can be
 * a bit or two wide (small n, small windows), where few rounds leave
 * visible structure. A pass costs about 40 ns on our machines.
 */
#define FEISTEL_ROUNDS 8

/*
 * Salts keep the permutations of one (seed, epoch) independent of each
 * other. They sit at the top of the 64-bit range, which no real
 * dataset's sample index reaches, so a key never equals a sample's seed
 * rng_mix(s, e, g).
 */
#define SALT_DATA   0xf1e7a5d0c3b29687ull
#define SALT_SHARD  0xe3c4b5a697887960ull
#define SALT_WINDOW 0xd5a4c3b2e1f00f1eull

struct feistel {
	uint64_t n;    /* permutes [0, n) */
	unsigned half; /* bits per half, >= 1 */
	uint64_t mask; /* (1 << half) - 1 */
	uint64_t key[FEISTEL_ROUNDS];
};

struct order {
	enum order_kind kind;
	uint64_t seed;
	uint32_t rank, world, batch_size;
	bool drop_last;
	uint64_t window;
	uint32_t nshards;
	uint32_t epoch;

	uint64_t n;	       /* samples in the dataset */
	uint64_t batches;      /* per rank and epoch */
	uint64_t *shard_start; /* nshards + 1 prefix sums, dataset order */

	/* The selected epoch's state. */
	struct feistel data_perm; /* ORDER_RANDOM */
	uint32_t *block_shard;	  /* ORDER_QUASI: shard at block j */
	uint64_t *block_start;	  /* ORDER_QUASI: nshards + 1 prefix sums */
};

/* The splitmix64 step: the round keys are its stream from the key. */
static inline uint64_t splitmix_next(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void feistel_init(struct feistel *f, uint64_t n, uint64_t key)
{
	/*
	 * Bits for the values 0..n-1, rounded up to even, and at least 2:
	 * a half of zero bits would leave nothing to mix.
	 */
	unsigned bits = n > 1 ? 64 - (unsigned)__builtin_clzll(n - 1) : 0;

	bits = (bits + 1) & ~1u;
	if (bits < 2)
		bits = 2;
	f->n = n;
	f->half = bits / 2;
	f->mask = (1ull << f->half) - 1;
	for (int i = 0; i < FEISTEL_ROUNDS; i++)
		f->key[i] = splitmix_next(&key);
}

/*
 * The round function: splitmix64's finalizer (a full-avalanche 64-bit
 * mixer) of the right half XORed with the round key. The top bits of
 * the result are taken, as they depend on every input bit.
 */
static inline uint64_t feistel_round(uint64_t r, uint64_t k, unsigned half)
{
	uint64_t z = r ^ k;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z >> (64 - half);
}

static inline uint64_t feistel_pass(const struct feistel *f, uint64_t x)
{
	uint64_t l = x >> f->half, r = x & f->mask;

	for (int i = 0; i < FEISTEL_ROUNDS; i++) {
		uint64_t t = l ^ feistel_round(r, f->key[i], f->half);

		l = r;
		r = t;
	}
	return (l << f->half) | r;
}

/* The image of x < f->n under the permutation of [0, f->n). */
static inline uint64_t feistel_apply(const struct feistel *f, uint64_t x)
{
	if (f->n <= 1)
		return 0;
	do
		x = feistel_pass(f, x);
	while (x >= f->n);
	return x;
}

/*
 * The last index j < n with start[j] <= v, for non-decreasing start[]
 * with start[0] = 0 <= v. Taking the last one skips empty shards (whose
 * start equals the next one's), so the shard found holds v.
 */
static uint32_t last_at_or_below(const uint64_t *start, uint32_t n, uint64_t v)
{
	uint32_t lo = 0, hi = n; /* the answer is in [lo, hi) */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (start[mid] <= v)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static int check_params(const struct order_params *p, uint64_t *total,
			struct diag *d)
{
	uint64_t n = 0;

	if (p->kind != ORDER_SEQUENTIAL && p->kind != ORDER_RANDOM &&
	    p->kind != ORDER_QUASI)
		return diag_set(d, LOADER_EUSAGE, "order: unknown kind %d",
				(int)p->kind);
	if (p->world == 0)
		return diag_set(d, LOADER_EUSAGE,
				"order: world size must be at least 1");
	if (p->rank >= p->world)
		return diag_set(d, LOADER_EUSAGE,
				"order: rank %u is not below world size %u",
				p->rank, p->world);
	if (p->batch_size == 0)
		return diag_set(d, LOADER_EUSAGE,
				"order: batch size must be at least 1");
	if (p->nshards == 0 || !p->shard_records)
		return diag_set(d, LOADER_EUSAGE,
				"order: the dataset has no shards");
	for (uint32_t i = 0; i < p->nshards; i++) {
		if (p->shard_records[i] > UINT64_MAX - n)
			return diag_set(
				d, LOADER_EUSAGE,
				"order: record counts overflow 64 bits at shard %u",
				i);
		n += p->shard_records[i];
	}
	if (n == 0)
		return diag_set(
			d, LOADER_EUSAGE,
			"order: the dataset has no samples (%u empty shards)",
			p->nshards);
	*total = n;
	return 0;
}

int order_new(struct order **out, const struct order_params *p, struct diag *d)
{
	struct order *o = NULL;
	uint64_t n = 0;
	int err;

	*out = NULL;
	err = check_params(p, &n, d);
	if (err)
		goto out;
	err = -ENOMEM;
	o = calloc(1, sizeof(*o));
	if (!o)
		goto out;
	o->kind = p->kind;
	o->seed = p->seed;
	o->rank = p->rank;
	o->world = p->world;
	o->batch_size = p->batch_size;
	o->drop_last = p->drop_last;
	o->window = p->window ? p->window : ORDER_QUASI_WINDOW;
	o->nshards = p->nshards;
	o->n = n;
	o->shard_start = calloc((size_t)p->nshards + 1, sizeof(uint64_t));
	if (!o->shard_start)
		goto out;
	for (uint32_t i = 0; i < p->nshards; i++)
		o->shard_start[i + 1] = o->shard_start[i] + p->shard_records[i];
	if (o->kind == ORDER_QUASI) {
		o->block_shard = calloc(p->nshards, sizeof(uint32_t));
		o->block_start =
			calloc((size_t)p->nshards + 1, sizeof(uint64_t));
		if (!o->block_shard || !o->block_start)
			goto out;
	}

	/*
	 * drop_last = 0: every rank runs as many batches as the rank with
	 * the most samples (ceil(N/w) of them), so that collective steps in
	 * the trainer line up; the others end short. drop_last = 1: every
	 * rank stops at the full batches that the rank with the fewest
	 * samples (floor(N/w)) can fill.
	 */
	if (o->drop_last) {
		o->batches = n / o->world / o->batch_size;
	} else {
		uint64_t most = n / o->world + (n % o->world != 0);

		o->batches = most / o->batch_size + (most % o->batch_size != 0);
	}
	order_set_epoch(o, 0);
	*out = o;
	o = NULL;
	err = 0;
out:
	order_free(o);
	return err;
}

void order_free(struct order *o)
{
	if (!o)
		return;
	free(o->shard_start);
	free(o->block_shard);
	free(o->block_start);
	free(o);
}

uint64_t order_size(const struct order *o)
{
	return o->n;
}

uint64_t order_batches(const struct order *o)
{
	return o->batches;
}

uint32_t order_batch_count(const struct order *o, uint64_t b)
{
	uint64_t mine, first;

	if (b >= o->batches)
		return 0;
	if (o->drop_last)
		return o->batch_size;
	/* Positions rank, rank + w, ... below N. */
	mine = o->n > o->rank ? (o->n - o->rank - 1) / o->world + 1 : 0;
	first = b * o->batch_size;
	if (mine <= first)
		return 0;
	mine -= first;
	return mine < o->batch_size ? (uint32_t)mine : o->batch_size;
}

void order_set_epoch(struct order *o, uint32_t epoch)
{
	struct feistel sp;

	o->epoch = epoch;
	if (o->kind == ORDER_RANDOM)
		feistel_init(&o->data_perm, o->n,
			     rng_mix(o->seed, epoch, SALT_DATA));
	if (o->kind != ORDER_QUASI)
		return;
	feistel_init(&sp, o->nshards, rng_mix(o->seed, epoch, SALT_SHARD));
	o->block_start[0] = 0;
	for (uint32_t j = 0; j < o->nshards; j++) {
		uint32_t s = (uint32_t)feistel_apply(&sp, j);

		o->block_shard[j] = s;
		o->block_start[j + 1] =
			o->block_start[j] +
			(o->shard_start[s + 1] - o->shard_start[s]);
	}
}

uint32_t order_epoch(const struct order *o)
{
	return o->epoch;
}

/* ORDER_QUASI: epoch position p to global sample index. */
static uint64_t quasi_sample(const struct order *o, uint64_t p)
{
	uint64_t w = p / o->window, base = w * o->window;
	uint64_t len = o->n - base < o->window ? o->n - base : o->window;
	struct feistel f;
	uint64_t q;
	uint32_t j;

	/*
	 * The window's key mixes the salt into the seed rather than using
	 * rng_mix(seed, epoch, w) as is, which is sample w's own seed
	 * (order_sample_seed()).
	 */
	feistel_init(&f, len, rng_mix(o->seed ^ SALT_WINDOW, o->epoch, w));
	q = base + feistel_apply(&f, p - base);
	j = last_at_or_below(o->block_start, o->nshards, q);
	return o->shard_start[o->block_shard[j]] + (q - o->block_start[j]);
}

uint64_t order_sample(const struct order *o, uint64_t b, uint32_t k)
{
	uint64_t p = (b * o->batch_size + k) * o->world + o->rank;

	/*
	 * Cycle walking from a value outside [0, n) need not come back
	 * inside: a caller's slip past the end must not spin forever.
	 */
	if (p >= o->n)
		return UINT64_MAX;
	switch (o->kind) {
	case ORDER_RANDOM: return feistel_apply(&o->data_perm, p);
	case ORDER_QUASI: return quasi_sample(o, p);
	case ORDER_SEQUENTIAL:
	default: return p;
	}
}

uint64_t order_sample_seed(const struct order *o, uint64_t g)
{
	return order_seed_at(o, o->epoch, g);
}

uint64_t order_seed_at(const struct order *o, uint32_t epoch, uint64_t g)
{
	return rng_mix(o->seed, epoch, g);
}

void order_locate(const struct order *o, uint64_t g, uint32_t *shard,
		  uint64_t *record)
{
	uint32_t s = last_at_or_below(o->shard_start, o->nshards, g);

	*shard = s;
	*record = g - o->shard_start[s];
}
