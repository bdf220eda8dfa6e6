/*
 * mixture.c - a mixture's epochs (mixture.h): each member's count, the
 * virtual dataset's blocks, and which sample of which member sits at a
 * place of an epoch.
 *
 * The counts are fixed in mixture_new(), as Mosaic Streaming's
 * Stream.apply_weights() fixes them: the same floating-point operations
 * in the same order (NumPy's summation included), so that a mixture
 * written for one gives the other's per-member counts. Mosaic hands a
 * rounding shortfall to members drawn with NumPy's generator, which we
 * cannot reproduce; the largest remainders take it here, so the counts
 * depend on the members alone and not on the seed.
 *
 * An epoch changes only the remainders (the partial copy of a member
 * whose count is not a multiple of its size). mixture_set_epoch() keys
 * them by (seed, epoch, member) into state that mixture_new() sized:
 * a permutation of the member's samples (a few words), or, with quasi,
 * the list of the member's shards the remainder takes (at most its
 * shards). So nothing grows with the number of samples, and
 * mixture_map() is a search among at most 32 members and one among a
 * member's shards.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "loader_error.h"
#include "mixture.h"
#include "order.h"
#include "rng.h"

/*
 * Salts of the remainders' keys, as order.c's are: at the top of the
 * 64-bit range, where no sample index reaches, and apart from order.c's
 * in their high bits, so that a member's number XORed into the low bits
 * never makes one of them. A key is rng_mix(seed, epoch, salt ^ member).
 */
#define SALT_MIX_SAMPLES 0xc6a4a7935bd1e995ull /* a uniform subsample */
#define SALT_MIX_SHARDS	 0xb492b66fbe98f273ull /* quasi: the shards' order */
#define SALT_MIX_RUN	 0x9ae16a3b2f90404full /* quasi: the run's start */

struct mx_member {
	uint64_t n;	 /* samples of the member's dataset */
	uint64_t count;	 /* c: samples it gives an epoch */
	uint64_t copies; /* floor(c / n) whole copies */
	uint64_t rem;	 /* and c mod n more */
	uint32_t nshards;
	const uint64_t *start; /* nshards + 1 prefix sums, in mx->starts */

	/* The selected epoch's remainder. */
	struct order_perm perm; /* not quasi: over [0, n) */
	uint32_t *taken;	/* quasi: the shards taken, in order */
	uint64_t *taken_at;	/* quasi: ntaken + 1 prefix sums */
	uint32_t ntaken;
	uint64_t run_first; /* quasi: where the last one's run begins */
};

struct mixture {
	uint32_t nmembers;
	uint32_t epoch;
	bool quasi;
	uint64_t seed;
	uint64_t size;			    /* E */
	uint64_t base[MIXTURE_MAX_MEMBERS]; /* each member's first place */
	struct mx_member m[MIXTURE_MAX_MEMBERS];
	uint32_t nblocks;
	uint64_t *blocks;
	/* What the members' pointers point into, one allocation each. */
	uint64_t *starts;
	uint32_t *taken;
	uint64_t *taken_at;
};

static const char *const how_name[] = { "proportion", "repeat", "choose" };

/*
 * ndarray.sum() of float64s as NumPy adds them (pairwise_sum in its
 * loops, for up to 128 values): one by one below 8, else in eight
 * running sums combined as a tree, then the rest one by one. Mosaic
 * divides by this sum; adding in another order can move a count at an
 * exact boundary.
 */
static double numpy_sum(const double *a, uint32_t n)
{
	double r[8], res = 0.;
	uint32_t i;

	if (n < 8) {
		for (i = 0; i < n; i++)
			res += a[i];
		return res;
	}
	for (int k = 0; k < 8; k++)
		r[k] = a[k];
	for (i = 8; i < n - n % 8; i += 8)
		for (int k = 0; k < 8; k++)
			r[k] += a[i + k];
	res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
	for (; i < n; i++)
		res += a[i];
	return res;
}

/* A member's shards and value, each checked; its size in *n. */
static int check_member(const struct mixture_member *mm, uint32_t i,
			uint64_t *n, struct diag *d)
{
	double v = mm->value;
	uint64_t sum = 0;

	if (mm->how != MIXTURE_PROPORTION && mm->how != MIXTURE_REPEAT &&
	    mm->how != MIXTURE_CHOOSE)
		return diag_set(d, LOADER_EUSAGE,
				"mixture: member %u: unknown kind %d", i,
				(int)mm->how);
	if (!mm->nshards || !mm->shard_records)
		return diag_set(d, LOADER_EUSAGE,
				"mixture: member %u: no shards", i);
	for (uint32_t s = 0; s < mm->nshards; s++) {
		if (mm->shard_records[s] > MIXTURE_MAX_SAMPLES - sum)
			return diag_set(
				d, LOADER_EUSAGE,
				"mixture: member %u: more than 2^48 samples (at shard %u)",
				i, s);
		sum += mm->shard_records[s];
	}
	if (!sum)
		return diag_set(
			d, LOADER_EUSAGE,
			"mixture: member %u: empty (its %u shard%s hold no samples)",
			i, mm->nshards, mm->nshards == 1 ? "" : "s");
	/* Written so that NaN fails the test. */
	if (!(v > 0 && isfinite(v)))
		return diag_set(
			d, LOADER_EUSAGE,
			"mixture: member %u: %s %g is not a number above 0", i,
			how_name[mm->how], v);
	if (mm->how == MIXTURE_CHOOSE &&
	    (v != floor(v) || v > (double)MIXTURE_MAX_SAMPLES))
		return diag_set(
			d, LOADER_EUSAGE,
			"mixture: member %u: choose %g is not a whole number from 1 to 2^48",
			i, v);
	if (mm->how == MIXTURE_REPEAT &&
	    !(v * (double)sum <= (double)MIXTURE_MAX_SAMPLES))
		return diag_set(d, LOADER_EUSAGE,
				"mixture: member %u: repeat %g of %" PRIu64
				" samples is more than 2^48",
				i, v, sum);
	*n = sum;
	return 0;
}

/*
 * Proportions: Mosaic's floor(E * (p_m / sum(p))), in doubles (E and
 * every count are below 2^53, so exact as doubles), then the shortfall
 * from rounding down, one sample each to the members with the largest
 * fractional parts, the lower number first among equal ones (Mosaic
 * draws them with NumPy's generator). The shortfall is below the number
 * of members: the exact shares add up to E, and the doubles' errors
 * (ulps of E, E <= 2^48) move it by less than one.
 */
static int count_proportions(struct mixture *mx, const struct mixture_params *p,
			     struct diag *d)
{
	double prop[MIXTURE_MAX_MEMBERS], frac[MIXTURE_MAX_MEMBERS];
	bool got[MIXTURE_MAX_MEMBERS] = { false };
	uint64_t e = p->epoch_size, sum = 0, left;
	double total, ed;

	if (!e)
		for (uint32_t i = 0; i < mx->nmembers; i++)
			e += mx->m[i].n; /* at most 32 * 2^48 */
	if (e > MIXTURE_MAX_SAMPLES)
		return diag_set(d, LOADER_EUSAGE,
				"mixture: an epoch of %" PRIu64
				" samples, more than 2^48",
				e);
	for (uint32_t i = 0; i < mx->nmembers; i++)
		prop[i] = p->m[i].value;
	total = numpy_sum(prop, mx->nmembers);
	if (!isfinite(total))
		return diag_set(
			d, LOADER_EUSAGE,
			"mixture: the proportions add up past a double");
	ed = (double)e;
	for (uint32_t i = 0; i < mx->nmembers; i++) {
		double x = ed * (prop[i] / total);

		mx->m[i].count = (uint64_t)x;
		frac[i] = x - floor(x);
		sum += mx->m[i].count;
	}
	/* (sum > e cannot happen, by the bound above; never wrap.) */
	left = sum < e ? e - sum : 0;
	while (left) {
		uint32_t best = UINT32_MAX;

		for (uint32_t i = 0; i < mx->nmembers; i++)
			if (!got[i] &&
			    (best == UINT32_MAX || frac[i] > frac[best]))
				best = i;
		if (best == UINT32_MAX) { /* every one has one: go round */
			memset(got, 0, sizeof(got));
			continue;
		}
		got[best] = true;
		mx->m[best].count++;
		left--;
	}
	mx->size = e;
	return 0;
}

/*
 * repeat: Mosaic's int(repeat * n), which truncates; choose: the value.
 * Without proportions the epoch is what the members give.
 */
static int count_absolute(struct mixture *mx, const struct mixture_params *p,
			  struct diag *d)
{
	uint64_t e = 0;

	if (p->epoch_size)
		return diag_set(
			d, LOADER_EUSAGE,
			"mixture: an epoch size (%" PRIu64
			") goes with proportions, and the members give repeat or choose",
			p->epoch_size);
	for (uint32_t i = 0; i < mx->nmembers; i++) {
		const struct mixture_member *mm = &p->m[i];
		struct mx_member *m = &mx->m[i];

		if (mm->how == MIXTURE_REPEAT)
			m->count = (uint64_t)(mm->value * (double)m->n);
		else
			m->count = (uint64_t)mm->value;
		/* Each is at most 2^48 (check_member()): no wrap. */
		e += m->count;
	}
	if (!e)
		return diag_set(
			d, LOADER_EUSAGE,
			"mixture: an epoch of no samples (every member's repeat rounds down to 0)");
	if (e > MIXTURE_MAX_SAMPLES)
		return diag_set(d, LOADER_EUSAGE,
				"mixture: an epoch of %" PRIu64
				" samples, more than 2^48",
				e);
	mx->size = e;
	return 0;
}

/* Count the blocks (mixture.h), within MIXTURE_MAX_BLOCKS. */
static int count_blocks(const struct mixture *mx, uint32_t *out, struct diag *d)
{
	uint64_t nb = 0;

	for (uint32_t i = 0; i < mx->nmembers; i++) {
		const struct mx_member *m = &mx->m[i];

		if (m->copies > (MIXTURE_MAX_BLOCKS - nb) / m->nshards ||
		    m->copies * m->nshards + (m->rem != 0) >
			    MIXTURE_MAX_BLOCKS - nb)
			return diag_set(
				d, LOADER_EUSAGE,
				"mixture: member %u: %" PRIu64
				" whole copies of its %u shards make more than %u blocks",
				i, m->copies, m->nshards,
				(unsigned)MIXTURE_MAX_BLOCKS);
		nb += m->copies * m->nshards + (m->rem != 0);
	}
	*out = (uint32_t)nb;
	return 0;
}

static int make_blocks(struct mixture *mx, const struct mixture_params *p)
{
	uint32_t at = 0;

	mx->blocks =
		mem_calloc(mx->nblocks ? mx->nblocks : 1, sizeof(uint64_t));
	if (!mx->blocks)
		return -ENOMEM;
	for (uint32_t i = 0; i < mx->nmembers; i++) {
		const struct mx_member *m = &mx->m[i];

		for (uint64_t c = 0; c < m->copies; c++) {
			memcpy(mx->blocks + at, p->m[i].shard_records,
			       m->nshards * sizeof(uint64_t));
			at += m->nshards;
		}
		if (m->rem)
			mx->blocks[at++] = m->rem;
	}
	return 0;
}

/* The members' shard prefix sums, and with quasi the remainders' room. */
static int make_members(struct mixture *mx, const struct mixture_params *p)
{
	size_t shards = 0, at = 0, taken = 0;

	for (uint32_t i = 0; i < mx->nmembers; i++)
		shards += mx->m[i].nshards;
	mx->starts = mem_alloc((shards + mx->nmembers) * sizeof(uint64_t));
	if (!mx->starts)
		return -ENOMEM;
	if (mx->quasi) {
		mx->taken = mem_alloc(shards * sizeof(uint32_t));
		mx->taken_at =
			mem_alloc((shards + mx->nmembers) * sizeof(uint64_t));
		if (!mx->taken || !mx->taken_at)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < mx->nmembers; i++) {
		struct mx_member *m = &mx->m[i];
		uint64_t *st = mx->starts + at + i;

		st[0] = 0;
		for (uint32_t s = 0; s < m->nshards; s++)
			st[s + 1] = st[s] + p->m[i].shard_records[s];
		m->start = st;
		if (mx->quasi) {
			m->taken = mx->taken + taken;
			m->taken_at = mx->taken_at + taken + i;
		}
		at += m->nshards;
		taken += m->nshards;
	}
	return 0;
}

int mixture_new(struct mixture **out, const struct mixture_params *p,
		struct diag *d)
{
	struct mixture *mx = NULL;
	bool prop;
	int err;

	*out = NULL;
	if (!p->nmembers || p->nmembers > MIXTURE_MAX_MEMBERS || !p->m) {
		err = diag_set(d, LOADER_EUSAGE,
			       "mixture: %u members (it takes 1 to %d)",
			       p->nmembers, MIXTURE_MAX_MEMBERS);
		goto out;
	}
	err = -ENOMEM;
	mx = mem_calloc(1, sizeof(*mx));
	if (!mx)
		goto out;
	mx->nmembers = p->nmembers;
	mx->seed = p->seed;
	mx->quasi = p->quasi;
	prop = p->m[0].how == MIXTURE_PROPORTION;
	for (uint32_t i = 0; i < p->nmembers; i++) {
		err = check_member(&p->m[i], i, &mx->m[i].n, d);
		if (err)
			goto out;
		/*
		 * As Mosaic's validate_weights(): shares of an epoch and
		 * amounts of their own do not mix, and the first member
		 * says which the mixture has.
		 */
		if ((p->m[i].how == MIXTURE_PROPORTION) != prop) {
			err = diag_set(
				d, LOADER_EUSAGE,
				"mixture: member %u: %s beside member 0's %s (proportions do not mix with repeat or choose)",
				i, how_name[p->m[i].how],
				how_name[p->m[0].how]);
			goto out;
		}
		mx->m[i].nshards = p->m[i].nshards;
	}
	err = prop ? count_proportions(mx, p, d) : count_absolute(mx, p, d);
	if (err)
		goto out;
	for (uint32_t i = 0; i < mx->nmembers; i++) {
		struct mx_member *m = &mx->m[i];

		m->copies = m->count / m->n;
		m->rem = m->count % m->n;
		mx->base[i] = i ? mx->base[i - 1] + mx->m[i - 1].count : 0;
	}
	err = count_blocks(mx, &mx->nblocks, d);
	if (err)
		goto out;
	err = make_blocks(mx, p);
	if (!err)
		err = make_members(mx, p);
	if (err)
		goto out;
	mixture_set_epoch(mx, 0);
	*out = mx;
	mx = NULL;
out:
	mixture_free(mx);
	return err;
}

void mixture_free(struct mixture *mx)
{
	if (!mx)
		return;
	free(mx->blocks);
	free(mx->starts);
	free(mx->taken);
	free(mx->taken_at);
	free(mx);
}

uint32_t mixture_members(const struct mixture *mx)
{
	return mx->nmembers;
}

uint64_t mixture_member_size(const struct mixture *mx, uint32_t m)
{
	return mx->m[m].n;
}

uint64_t mixture_size(const struct mixture *mx)
{
	return mx->size;
}

uint64_t mixture_count(const struct mixture *mx, uint32_t m)
{
	return mx->m[m].count;
}

uint64_t mixture_base(const struct mixture *mx, uint32_t m)
{
	return mx->base[m];
}

uint32_t mixture_blocks(const struct mixture *mx, const uint64_t **records)
{
	*records = mx->blocks;
	return mx->nblocks;
}

/*
 * Quasi: member i's remainder as whole shards in a keyed order, empty
 * ones skipped (they give nothing, and the search in mixture_map()
 * stays among shards that hold a place), the last one as a run of what
 * is left, from a keyed record, wrapping round the shard's end. The
 * walk ends within the member's shards, since the remainder is fewer
 * than the member's samples.
 */
static void draw_shards(struct mixture *mx, uint32_t i)
{
	struct mx_member *m = &mx->m[i];
	struct order_perm sp;
	uint64_t left = m->rem, at = 0;
	uint32_t k = 0;

	order_perm_init(&sp, m->nshards,
			rng_mix(mx->seed, mx->epoch, SALT_MIX_SHARDS ^ i));
	m->run_first = 0;
	for (uint64_t j = 0; left && j < m->nshards; j++) {
		uint32_t s = (uint32_t)order_perm_apply(&sp, j);
		uint64_t size = m->start[s + 1] - m->start[s];
		uint64_t take = size < left ? size : left;

		if (!size)
			continue;
		m->taken[k] = s;
		m->taken_at[k++] = at;
		at += take;
		left -= take;
		if (take < size) {
			struct rng r;

			rng_seed(&r, rng_mix(mx->seed, mx->epoch,
					     SALT_MIX_RUN ^ i));
			m->run_first = rng_below(&r, size);
		}
	}
	m->taken_at[k] = at;
	m->ntaken = k;
}

void mixture_set_epoch(struct mixture *mx, uint32_t epoch)
{
	mx->epoch = epoch;
	for (uint32_t i = 0; i < mx->nmembers; i++) {
		struct mx_member *m = &mx->m[i];

		if (!m->rem)
			continue;
		if (mx->quasi)
			draw_shards(mx, i);
		else
			order_perm_init(
				&m->perm, m->n,
				rng_mix(mx->seed, epoch, SALT_MIX_SAMPLES ^ i));
	}
}

uint32_t mixture_epoch(const struct mixture *mx)
{
	return mx->epoch;
}

void mixture_map(const struct mixture *mx, uint64_t v, uint32_t *member,
		 uint64_t *index)
{
	const struct mx_member *m;
	uint64_t u, whole, t, rec, size;
	uint32_t i, j, s;

	if (v >= mx->size) {
		*member = UINT32_MAX;
		*index = UINT64_MAX;
		return;
	}
	/* The last member whose base is at or below v: none of count 0. */
	i = order_last_at_or_below(mx->base, mx->nmembers, v);
	m = &mx->m[i];
	*member = i;
	u = v - mx->base[i];
	whole = m->copies * m->n;
	if (u < whole) {
		*index = u % m->n;
		return;
	}
	t = u - whole;
	if (!mx->quasi) {
		*index = order_perm_apply(&m->perm, t);
		return;
	}
	j = order_last_at_or_below(m->taken_at, m->ntaken, t);
	s = m->taken[j];
	size = m->start[s + 1] - m->start[s];
	rec = t - m->taken_at[j];
	/* Only the last shard taken can be a run: the others start at 0. */
	if (j == m->ntaken - 1)
		rec = (rec + m->run_first) % size;
	*index = m->start[s] + rec;
}
