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
 *
 * order.h exposes the primitive (order_perm_*) for the mixture's
 * subsamples, which must be drawn as uniformly and as reproducibly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "loader_error.h"
#include "order.h"
#include "rng.h"

/*
 * Eight rounds (ORDER_PERM_ROUNDS, order.h). Luby and Rackoff's bounds
 * (three or four rounds for a pseudo-random permutation) assume wide
 * halves; the halves here can be a bit or two wide (small n, small
 * windows), where few rounds leave visible structure. A pass costs about
 * 40 ns on our machines.
 */
#define FEISTEL_ROUNDS ORDER_PERM_ROUNDS

/*
 * Salts keep the permutations of one (seed, epoch) independent of each
 * other. They sit at the top of the 64-bit range, which no real
 * dataset's sample index reaches, so a key never equals a sample's seed
 * rng_mix(s, e, g).
 */
#define SALT_DATA   0xf1e7a5d0c3b29687ull
#define SALT_SHARD  0xe3c4b5a697887960ull
#define SALT_WINDOW 0xd5a4c3b2e1f00f1eull

/*
 * One stage of a planned epoch: world w was dealt a list of len_in
 * positions, of which it dealt the first `dealt` and its ranks released
 * some. What is left, in order, is the `listed` positions mid[] (those
 * between the least and the furthest rank, one by one) and then the
 * indices [tail, dealt) of the list, all unreleased.
 */
struct plan_stage {
	uint64_t len_in, dealt, tail, listed;
	uint64_t *mid; /* indices into the stage's input list, ascending */
};

/* A planned epoch: its stages, and the rest they leave, as dealt here. */
struct plan_epoch {
	uint32_t epoch, nstages;
	struct plan_stage *st;
	uint64_t len;	/* the rest's length R */
	uint64_t first; /* batches - (batches the rest deals) */
};

struct order {
	enum order_kind kind;
	uint64_t seed;
	uint32_t rank, world, batch_size;
	bool drop_last, pad;
	uint64_t window;
	uint32_t nshards;
	uint32_t epoch;

	uint64_t n;	       /* samples in the dataset */
	uint64_t batches;      /* per rank and epoch */
	uint64_t *shard_start; /* nshards + 1 prefix sums, dataset order */

	/* The plan, as given (for order_replan()), and as evaluated. */
	uint64_t *plan;
	size_t plan_words;
	uint32_t nplanned;
	struct plan_epoch planned[ORDER_PLAN_EPOCHS];

	/* The selected epoch's state. */
	const struct plan_epoch *cur; /* its plan, or NULL */
	struct order_perm data_perm;  /* ORDER_RANDOM */
	uint32_t *block_shard;	      /* ORDER_QUASI: shard at block j */
	uint64_t *block_start;	      /* ORDER_QUASI: nshards + 1 prefix sums */
};

/* The splitmix64 step: the round keys are its stream from the key. */
static inline uint64_t splitmix_next(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void feistel_init(struct order_perm *f, uint64_t n, uint64_t key)
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

static inline uint64_t feistel_pass(const struct order_perm *f, uint64_t x)
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
static inline uint64_t feistel_apply(const struct order_perm *f, uint64_t x)
{
	if (f->n <= 1)
		return 0;
	do
		x = feistel_pass(f, x);
	while (x >= f->n);
	return x;
}

/*
 * The permutation for other modules (mixture.c): the same functions, so
 * that there is one Feistel network in the tree; the order's own hot
 * paths keep calling the inline ones.
 */
void order_perm_init(struct order_perm *p, uint64_t n, uint64_t key)
{
	feistel_init(p, n, key);
}

uint64_t order_perm_apply(const struct order_perm *p, uint64_t x)
{
	return feistel_apply(p, x);
}

uint32_t order_last_at_or_below(const uint64_t *start, uint32_t n, uint64_t v)
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

/* Batches per rank that a list of len positions deals to world w. */
static uint64_t deal_batches(const struct order *o, uint64_t len, uint32_t w)
{
	uint64_t most;

	if (o->drop_last)
		return len / w / o->batch_size;
	most = len / w + (len % w != 0);
	return most / o->batch_size + (most % o->batch_size != 0);
}

/* Positions of a list of len that world w deals (drop_last keeps full). */
static uint64_t deal_len(const struct order *o, uint64_t len, uint32_t w)
{
	if (!o->drop_last)
		return len;
	return deal_batches(o, len, w) * o->batch_size * w;
}

/* Rank r's share of the first len positions of a list dealt to w. */
static uint64_t share(uint64_t len, uint32_t w, uint32_t r)
{
	return len > r ? (len - r - 1) / w + 1 : 0;
}

/*
 * Evaluate stage st of world w with done[] against an input list of
 * len_in: what its ranks left. *listed counts against the plan's cap.
 */
static int stage_build(const struct order *o, struct plan_stage *st,
		       uint64_t len_in, uint32_t w, const uint64_t *done,
		       uint64_t *listed, struct diag *d)
{
	uint64_t lo = UINT64_MAX, hi = 0, end, n = 0;

	st->len_in = len_in;
	st->dealt = deal_len(o, len_in, w);
	for (uint32_t r = 0; r < w; r++) {
		uint64_t c = done[r], s = share(st->dealt, w, r);

		if (c > s)
			c = s;
		if (c < lo)
			lo = c;
		if (c > hi)
			hi = c;
	}
	/* Positions below lo * w all went; from hi * w on none did. */
	end = hi * w < st->dealt ? hi * w : st->dealt;
	st->tail = end;
	if (end - lo * w > ORDER_PLAN_MAX_LISTED - *listed)
		return diag_set(
			d, LOADER_EUSAGE,
			"order: the ranks of world %u are %" PRIu64
			" samples of their shares apart, more than a resume with another world can list",
			w, hi - lo);
	for (uint64_t j = lo * w; j < end; j++)
		if (j / w >= done[j % w])
			n++;
	st->mid = n ? mem_alloc(n * sizeof(uint64_t)) : NULL;
	if (n && !st->mid)
		return -ENOMEM;
	st->listed = 0;
	for (uint64_t j = lo * w; j < end; j++)
		if (j / w >= done[j % w])
			st->mid[st->listed++] = j;
	*listed += n;
	return 0;
}

/* Length of what stage st left. */
static uint64_t stage_left(const struct plan_stage *st)
{
	return st->listed + (st->dealt - st->tail);
}

/*
 * Read and evaluate p's plan into o: stages grouped by epoch, epochs
 * ascending, at most ORDER_PLAN_EPOCHS of them, worlds that fit.
 */
static int plan_build(struct order *o, const struct order_params *p,
		      struct diag *d)
{
	const uint64_t *w = p->plan, *end = p->plan + p->plan_words;
	uint64_t nst, listed = 0;
	int err;

	if (!p->plan || !p->plan_words)
		return 0;
	o->plan = mem_alloc(p->plan_words * sizeof(uint64_t));
	if (!o->plan)
		return -ENOMEM;
	memcpy(o->plan, p->plan, p->plan_words * sizeof(uint64_t));
	o->plan_words = p->plan_words;
	nst = *w++;
	for (uint64_t i = 0; i < nst; i++) {
		struct plan_epoch *pe;
		struct plan_stage *st;
		uint32_t epoch, world;

		if (w >= end)
			goto bad;
		epoch = (uint32_t)*w;
		world = (uint32_t)(*w >> 32);
		w++;
		if (!world || world > (uint64_t)(end - w))
			goto bad;
		pe = o->nplanned ? &o->planned[o->nplanned - 1] : NULL;
		if (pe && epoch < pe->epoch)
			goto bad;
		if (!pe || epoch != pe->epoch) {
			if (o->nplanned == ORDER_PLAN_EPOCHS)
				return diag_set(
					d, LOADER_EUSAGE,
					"order: a plan of more than %d epochs",
					ORDER_PLAN_EPOCHS);
			pe = &o->planned[o->nplanned++];
			pe->epoch = epoch;
			pe->len = o->n;
		}
		st = mem_realloc(pe->st, (pe->nstages + 1) * sizeof(*st));
		if (!st)
			return -ENOMEM;
		pe->st = st;
		st += pe->nstages++;
		memset(st, 0, sizeof(*st));
		err = stage_build(o, st, pe->len, world, w, &listed, d);
		if (err)
			return err;
		pe->len = stage_left(st);
		w += world;
	}
	if (w != end)
		goto bad;
	for (uint32_t i = 0; i < o->nplanned; i++)
		o->planned[i].first =
			o->batches -
			deal_batches(o, o->planned[i].len, o->world);
	return 0;
bad:
	return diag_set(d, LOADER_EUSAGE,
			"order: the plan's %zu words do not parse",
			p->plan_words);
}

static const struct plan_epoch *plan_find(const struct order *o, uint32_t e)
{
	for (uint32_t i = 0; i < o->nplanned; i++)
		if (o->planned[i].epoch == e)
			return &o->planned[i];
	return NULL;
}

/* The epoch position of place j of a planned epoch's rest. */
static uint64_t plan_position(const struct plan_epoch *pe, uint64_t j)
{
	for (uint32_t s = pe->nstages; s-- > 0;) {
		const struct plan_stage *st = &pe->st[s];

		j = j < st->listed ? st->mid[j] : st->tail + (j - st->listed);
	}
	return j;
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
	o = mem_calloc(1, sizeof(*o));
	if (!o)
		goto out;
	o->kind = p->kind;
	o->seed = p->seed;
	o->rank = p->rank;
	o->world = p->world;
	o->batch_size = p->batch_size;
	o->drop_last = p->drop_last;
	o->pad = p->pad && !p->drop_last;
	o->window = p->window ? p->window : ORDER_QUASI_WINDOW;
	o->nshards = p->nshards;
	o->n = n;
	o->shard_start = mem_calloc((size_t)p->nshards + 1, sizeof(uint64_t));
	if (!o->shard_start)
		goto out;
	for (uint32_t i = 0; i < p->nshards; i++)
		o->shard_start[i + 1] = o->shard_start[i] + p->shard_records[i];
	if (o->kind == ORDER_QUASI) {
		o->block_shard = mem_calloc(p->nshards, sizeof(uint32_t));
		o->block_start =
			mem_calloc((size_t)p->nshards + 1, sizeof(uint64_t));
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
	err = plan_build(o, p, d);
	if (err)
		goto out;
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
	for (uint32_t i = 0; i < o->nplanned; i++) {
		for (uint32_t s = 0; s < o->planned[i].nstages; s++)
			free(o->planned[i].st[s].mid);
		free(o->planned[i].st);
	}
	free(o->plan);
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

/*
 * Of batch b's places, from its first: those the rank has (*count), and
 * of them those below N or R (*fresh). Padded, every rank has as many
 * places as rank 0.
 */
static void batch_places(const struct order *o, uint64_t b, uint32_t *count,
			 uint32_t *fresh)
{
	uint64_t len = o->cur ? o->cur->len : o->n, first, mine, real;

	*count = *fresh = 0;
	if (b >= o->batches || (o->cur && b < o->cur->first))
		return;
	if (o->drop_last) {
		*count = *fresh = o->batch_size;
		return;
	}
	if (o->cur)
		b -= o->cur->first;
	/* Positions rank, rank + w, ... below N (or R). */
	real = share(len, o->world, o->rank);
	mine = o->pad ? share(len, o->world, 0) : real;
	first = b * o->batch_size;
	if (mine > first)
		*count = mine - first < o->batch_size ?
				 (uint32_t)(mine - first) :
				 o->batch_size;
	if (real > first)
		*fresh = real - first < *count ? (uint32_t)(real - first) :
						 *count;
}

uint32_t order_batch_count(const struct order *o, uint64_t b)
{
	uint32_t n, fresh;

	batch_places(o, b, &n, &fresh);
	return n;
}

uint32_t order_repeats(const struct order *o, uint64_t b)
{
	uint32_t n, fresh;

	batch_places(o, b, &n, &fresh);
	return n - fresh;
}

uint32_t order_window(const struct order *o, uint64_t b, struct order_run *runs,
		      uint32_t max, uint64_t *id)
{
	uint32_t n = order_batch_count(o, b), nr = 0;
	uint64_t p0, p1, base, end, q;

	if (o->kind != ORDER_QUASI || o->cur || !n)
		return 0;
	p0 = b * o->batch_size * o->world + o->rank;
	p1 = (b * o->batch_size + n - 1) * o->world + o->rank;
	if (p1 >= o->n || p0 / o->window != p1 / o->window)
		return 0;
	*id = p0 / o->window;
	base = *id * o->window;
	end = o->n - base < o->window ? o->n : base + o->window;
	for (q = base; q < end;) {
		uint32_t j =
			order_last_at_or_below(o->block_start, o->nshards, q);
		uint64_t stop = o->block_start[j + 1] < end ?
					o->block_start[j + 1] :
					end;

		if (stop <= q || nr == max) /* (the first cannot be) */
			return 0;
		runs[nr++] =
			(struct order_run){ o->block_shard[j],
					    q - o->block_start[j], stop - q };
		q = stop;
	}
	return nr;
}

void order_set_epoch(struct order *o, uint32_t epoch)
{
	struct order_perm sp;

	o->epoch = epoch;
	o->cur = plan_find(o, epoch);
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
	struct order_perm f;
	uint64_t q;
	uint32_t j;

	/*
	 * The window's key mixes the salt into the seed rather than using
	 * rng_mix(seed, epoch, w) as is, which is sample w's own seed
	 * (order_sample_seed()).
	 */
	feistel_init(&f, len, rng_mix(o->seed ^ SALT_WINDOW, o->epoch, w));
	q = base + feistel_apply(&f, p - base);
	j = order_last_at_or_below(o->block_start, o->nshards, q);
	return o->shard_start[o->block_shard[j]] + (q - o->block_start[j]);
}

/*
 * Is place p >= len (of a list of len dealt to the world) one that
 * padding fills: one of rank 0's share's length?
 */
static bool pad_place(const struct order *o, uint64_t p, uint64_t len)
{
	return o->pad && len && p / o->world < share(len, o->world, 0);
}

uint64_t order_sample(const struct order *o, uint64_t b, uint32_t k)
{
	uint64_t p;

	if (o->cur) {
		if (b < o->cur->first)
			return UINT64_MAX;
		p = ((b - o->cur->first) * o->batch_size + k) * o->world +
		    o->rank;
		if (p >= o->cur->len && !pad_place(o, p, o->cur->len))
			return UINT64_MAX;
		p = plan_position(o->cur, p % o->cur->len);
	} else {
		p = (b * o->batch_size + k) * o->world + o->rank;
		if (p >= o->n && pad_place(o, p, o->n))
			p %= o->n;
	}
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

/*
 * Eight feistel_pass()es side by side in AVX-512 (64-bit lanes, and
 * vpmullq for the multiplies), where the CPU has it: the same values,
 * for a quarter of the scalar passes' time on a batch.
 */
#if defined(__GNUC__) && defined(__x86_64__)
#define ORDER_LANES 8
typedef uint64_t order_u64x8 __attribute__((vector_size(64)));

__attribute__((target("avx512f,avx512dq"))) static void
feistel_pass8(const struct order_perm *f, uint64_t *x)
{
	order_u64x8 v, l, r;
	unsigned half = f->half;

	memcpy(&v, x, sizeof(v));
	l = v >> half;
	r = v & f->mask;
	for (int i = 0; i < FEISTEL_ROUNDS; i++) {
		order_u64x8 z = r ^ f->key[i];

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		z = l ^ (z >> (64 - half));
		l = r;
		r = z;
	}
	v = (l << half) | r;
	memcpy(x, &v, sizeof(v));
}

static bool have_lanes(void)
{
	return __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512dq");
}
#else
#define ORDER_LANES 1
static void feistel_pass8(const struct order_perm *f, uint64_t *x)
{
	(void)f;
	(void)x;
}

static bool have_lanes(void)
{
	return false;
}
#endif

void order_batch(const struct order *o, uint64_t b, uint32_t n, uint64_t *out)
{
	const struct order_perm *f = &o->data_perm;
	uint64_t p = (b * o->batch_size) * o->world + o->rank;
	uint32_t k = 0;

	/* Planned epochs and the other orders: one by one. */
	if (o->cur || o->kind != ORDER_RANDOM || f->n <= 1) {
		for (k = 0; k < n; k++)
			out[k] = order_sample(o, b, k);
		return;
	}
	/*
	 * One pass for every sample first, with no branch on the data, then
	 * the cycle walks of the few whose image fell outside [0, n).
	 */
	for (k = 0; k < n; k++)
		out[k] = p + (uint64_t)k * o->world;
	k = 0;
	if (have_lanes())
		for (; k + ORDER_LANES <= n; k += ORDER_LANES)
			feistel_pass8(f, out + k);
	for (; k < n; k++)
		out[k] = feistel_pass(f, out[k]);
	for (k = 0; k < n; k++) {
		if (p + (uint64_t)k * o->world >= o->n) {
			/* Past the epoch's end: nothing, or padding. */
			out[k] = order_sample(o, b, k);
			continue;
		}
		while (out[k] >= o->n)
			out[k] = feistel_pass(f, out[k]);
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
	uint32_t s = order_last_at_or_below(o->shard_start, o->nshards, g);

	*shard = s;
	*record = g - o->shard_start[s];
}

uint64_t order_first_batch(const struct order *o, uint32_t e)
{
	const struct plan_epoch *pe = plan_find(o, e);

	return pe ? pe->first : 0;
}

void order_schedule(const struct order *o, struct order_sched *s)
{
	memset(s, 0, sizeof(*s));
	s->batches = o->batches;
	s->n = o->nplanned;
	for (uint32_t i = 0; i < o->nplanned; i++) {
		s->epoch[i] = o->planned[i].epoch;
		s->first[i] = o->planned[i].first;
	}
}

static uint64_t sched_first(const struct order_sched *s, uint32_t e)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->epoch[i] == e)
			return s->first[i];
	return 0;
}

/* Batches of epoch e by the schedule. */
static uint64_t sched_batches(const struct order_sched *s, uint32_t e)
{
	return s->later_from && e >= s->later_from ? s->later_batches :
						     s->batches;
}

void order_advance(const struct order_sched *s, uint32_t *epoch,
		   uint64_t *batch, uint64_t n)
{
	uint64_t b = *batch, f = sched_first(s, *epoch), per;
	uint32_t e = *epoch;

	if (!s->batches || (s->later_from && !s->later_batches))
		return;
	if (b < f)
		b = f;
	/* An epoch reached at its end (or with an empty rest) is passed. */
	for (;;) {
		per = sched_batches(s, e);
		if (n < per - b)
			break;
		n -= per - b;
		e++;
		b = sched_first(s, e);
		/*
		 * Past the plan (and the change of counts) every epoch is
		 * whole and as long: n may be large.
		 */
		if ((!s->n || e > s->epoch[s->n - 1]) &&
		    (!s->later_from || e >= s->later_from)) {
			uint64_t skip = n / (per = sched_batches(s, e));

			e += (uint32_t)skip;
			n -= skip * per;
		}
	}
	*epoch = e;
	*batch = b + n;
}

int order_replan(const struct order *o, const uint32_t *epoch,
		 const uint64_t *batch, uint64_t **plan, size_t *words,
		 uint32_t *from, struct diag *d)
{
	const uint64_t *w = o->plan;
	uint32_t lo = UINT32_MAX, hi = 0, last;
	uint64_t nst = 0, *out, *at;
	size_t n = 1;

	*plan = NULL;
	*words = 0;
	for (uint32_t r = 0; r < o->world; r++) {
		if (epoch[r] < lo)
			lo = epoch[r];
		if (epoch[r] > hi)
			hi = epoch[r];
	}
	*from = lo;
	last = hi;
	if (hi - lo >= ORDER_PLAN_EPOCHS)
		return diag_set(
			d, LOADER_EUSAGE,
			"order: the ranks of world %u stopped %u epochs apart (at most %d can be resumed with another world)",
			o->world, hi - lo, ORDER_PLAN_EPOCHS - 1);
	/* The old stages kept, and one new stage per epoch in [lo, hi]. */
	if (w) {
		const uint64_t *end = w + o->plan_words;

		for (w++; w < end; w += 1 + (*w >> 32))
			if ((uint32_t)*w >= lo)
				n += 1 + (*w >> 32);
	}
	n += (size_t)(hi - lo + 1) * (1 + o->world);
	out = mem_alloc(n * sizeof(uint64_t));
	if (!out)
		return -ENOMEM;
	at = out + 1;
	if (o->nplanned && o->planned[o->nplanned - 1].epoch > last)
		last = o->planned[o->nplanned - 1].epoch;
	for (uint32_t e = lo;; e++) {
		uint64_t f = order_first_batch(o, e), any = 0;
		bool planned = plan_find(o, e) != NULL;

		/* The stages e had before, in their order. */
		if (planned) {
			const uint64_t *end = o->plan + o->plan_words;

			for (w = o->plan + 1; w < end; w += 1 + (*w >> 32))
				if ((uint32_t)*w == e) {
					size_t len = 1 + (size_t)(*w >> 32);

					memcpy(at, w, len * sizeof(uint64_t));
					at += len;
					nst++;
				}
		}
		if (e > hi)
			goto next; /* no rank of this world began it */
		at[0] = e | ((uint64_t)o->world << 32);
		for (uint32_t r = 0; r < o->world; r++) {
			uint64_t b = batch[r] < f ? f : batch[r];

			if (b > o->batches)
				b = o->batches;
			if (epoch[r] > e)
				b = o->batches;
			else if (epoch[r] < e)
				b = f;
			at[1 + r] = (b - f) * o->batch_size;
			any |= at[1 + r];
		}
		/* An epoch nobody began, and no plan had, is a whole one. */
		if (any || planned) {
			at += 1 + o->world;
			nst++;
		}
	next:
		if (e == last)
			break;
	}
	out[0] = nst;
	*plan = out;
	*words = (size_t)(at - out);
	return 0;
}
