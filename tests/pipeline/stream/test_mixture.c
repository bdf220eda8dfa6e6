/*
 * test_mixture.c - a mixture's epochs (pipeline/stream/mixture.c): the
 * members' counts as Mosaic Streaming computes them, refusals, each
 * epoch's multiset of samples (whole copies and a remainder without
 * replacement), the virtual dataset's blocks, remainders that change
 * with the epoch and the seed and not otherwise, quasi remainders as
 * whole shards and one run, the uniformity of subsamples, and the order
 * dealing a mixture to three ranks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader_error.h"
#include "mixture.h"
#include "order.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* As test_order.c: loops over many samples report the first few fails. */
static unsigned fails;
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond) && fails++ < 10)                                   \
			cr_expect_fail(__VA_ARGS__);                           \
	} while (0)

/*
 * A member of n samples in shards of uneven sizes (empty and one-record
 * shards included, the last cut short), or of shards of one size.
 */
#define MAX_SHARDS 512
struct layout {
	uint32_t nshards;
	uint64_t rec[MAX_SHARDS];
};

static void make_layout(struct layout *l, uint64_t n)
{
	l->nshards = ut_shards(l->rec, MAX_SHARDS, n, 100);
	cr_assert_leq(l->nshards, MAX_SHARDS);
}

static void even_layout(struct layout *l, uint64_t n, uint64_t per)
{
	l->nshards = 0;
	for (uint64_t at = 0; at < n; at += per) {
		cr_assert_lt(l->nshards, MAX_SHARDS);
		l->rec[l->nshards++] = n - at < per ? n - at : per;
	}
}

/* Up to 4 members of a test, with their layouts. */
struct mix {
	uint32_t n;
	struct layout l[4];
	struct mixture_member m[4];
	struct mixture_params p;
};

static void mix_add(struct mix *x, uint64_t size, enum mixture_how how,
		    double value)
{
	cr_assert_lt(x->n, NELEM(x->m));
	make_layout(&x->l[x->n], size);
	x->m[x->n] = (struct mixture_member){ x->l[x->n].nshards,
					      x->l[x->n].rec, how, value };
	x->n++;
	x->p.nmembers = x->n;
	x->p.m = x->m;
}

static struct mixture *must_new(const struct mixture_params *p)
{
	struct mixture *mx = NULL;
	struct diag d = { "" };
	int err = mixture_new(&mx, p, &d);

	cr_assert_eq(err, 0, "mixture_new: %d %s", err, d.msg);
	cr_assert_not_null(mx);
	return mx;
}

/* mixture_new() refuses p, with a reason that holds want. */
static void refuses(const struct mixture_params *p, const char *want)
{
	struct mixture *mx = (struct mixture *)1;
	struct diag d = { "" };
	int err = mixture_new(&mx, p, &d);

	cr_expect_eq(err, LOADER_EUSAGE, "refused (%d) for \"%s\"", err, want);
	cr_expect_null(mx, "no mixture after a refusal");
	cr_expect(strstr(d.msg, want) != NULL, "\"%s\" holds \"%s\"", d.msg,
		  want);
	mixture_free(mx == (struct mixture *)1 ? NULL : mx);
}

static void expect_counts(const struct mixture_params *p, const uint64_t *want,
			  uint64_t e)
{
	struct mixture *mx = must_new(p);
	uint64_t sum = 0;

	cr_expect_eq(mixture_members(mx), p->nmembers);
	for (uint32_t i = 0; i < p->nmembers; i++) {
		cr_expect_eq(mixture_count(mx, i), want[i],
			     "member %u: %lu samples, want %lu", i,
			     (unsigned long)mixture_count(mx, i),
			     (unsigned long)want[i]);
		cr_expect_eq(mixture_base(mx, i), sum);
		sum += want[i];
	}
	cr_expect_eq(mixture_size(mx), e, "E %lu, want %lu",
		     (unsigned long)mixture_size(mx), (unsigned long)e);
	mixture_free(mx);
}

/*
 * The expected counts are Mosaic's apply_weights() with NumPy 1.24
 * (floor of E * p / p.sum()), the shortfall given as mixture.h says.
 */
Test(mixture, proportions_default_epoch)
{
	struct mix x = { 0 };
	static const uint64_t want[] = { 769, 461, 307 };
	struct mixture *mx;

	/* 768.5, 461.1, 307.4: one short, to the largest part (.5). */
	mix_add(&x, 1000, MIXTURE_PROPORTION, 0.5);
	mix_add(&x, 37, MIXTURE_PROPORTION, 0.3);
	mix_add(&x, 500, MIXTURE_PROPORTION, 0.2);
	expect_counts(&x.p, want, 1537);
	mx = must_new(&x.p);
	cr_expect_eq(mixture_member_size(mx, 1), 37);
	mixture_free(mx);
}

Test(mixture, proportions_epoch_size)
{
	struct mix x = { 0 };
	static const uint64_t want[] = { 7000, 2000, 1000 };
	static const uint64_t want7[] = { 1, 2, 4 };

	/* 7000.000000000001, ...: the sum 0.7 + 0.2 + 0.1 is below 1. */
	mix_add(&x, 1000, MIXTURE_PROPORTION, 0.7);
	mix_add(&x, 37, MIXTURE_PROPORTION, 0.2);
	mix_add(&x, 500, MIXTURE_PROPORTION, 0.1);
	x.p.epoch_size = 10000;
	expect_counts(&x.p, want, 10000);
	/* Weights need not add up to 1: 7/6, 14/6, 21/6. */
	x.m[0].value = 1;
	x.m[1].value = 2;
	x.m[2].value = 3;
	x.p.epoch_size = 7;
	expect_counts(&x.p, want7, 7);
}

Test(mixture, proportions_ties_go_to_the_lower_member)
{
	struct mix x = { 0 };
	static const uint64_t w100[] = { 34, 33, 33 }, w101[] = { 34, 34, 33 };

	for (int i = 0; i < 3; i++)
		mix_add(&x, 10, MIXTURE_PROPORTION, 1);
	x.p.epoch_size = 100;
	expect_counts(&x.p, w100, 100);
	x.p.epoch_size = 101;
	expect_counts(&x.p, w101, 101);
}

/*
 * Eight members whose proportions NumPy adds (in eight running sums) to
 * 2.333333333333333, where adding them one by one gives
 * 2.3333333333333335: members 0 and 5 would get 2 and 4 samples.
 */
Test(mixture, proportions_summed_as_numpy_does)
{
	static const double p[] = {
		0.1, 0.15, 0.15, 0.7, 0.7, 1.0 / 3, 0.1, 0.1
	};
	static const uint64_t want[] = { 1, 2, 2, 9, 9, 5, 1, 1 };
	struct mixture_member m[NELEM(p)];
	uint64_t rec = 100;
	struct mixture_params mp = { .nmembers = NELEM(p),
				     .m = m,
				     .epoch_size = 30 };

	for (uint32_t i = 0; i < NELEM(p); i++)
		m[i] = (struct mixture_member){ 1, &rec, MIXTURE_PROPORTION,
						p[i] };
	expect_counts(&mp, want, 30);
}

/* Random proportions and epochs: the counts always add up to E. */
Test(mixture, proportions_add_up)
{
	struct mixture_member m[MIXTURE_MAX_MEMBERS];
	uint64_t rec = 1000, s = 12345;

	for (int t = 0; t < 2000; t++) {
		struct mixture_params mp = { 0 };
		double sum = 0;
		struct mixture *mx;
		uint64_t got = 0;

		mp.nmembers = 1 + (uint32_t)(t % MIXTURE_MAX_MEMBERS);
		mp.m = m;
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		mp.epoch_size = t % 3 ? (s >> 20) % 1000000 : 0;
		for (uint32_t i = 0; i < mp.nmembers; i++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			m[i] = (struct mixture_member){
				1, &rec, MIXTURE_PROPORTION,
				(double)((s >> 33) % 1000 + 1) / 7.0
			};
			sum += m[i].value;
		}
		mx = must_new(&mp);
		for (uint32_t i = 0; i < mp.nmembers; i++) {
			double exact =
				(double)mixture_size(mx) * m[i].value / sum;

			got += mixture_count(mx, i);
			CHECK(fabs((double)mixture_count(mx, i) - exact) < 1.0,
			      "try %d member %u: %lu for %f", t, i,
			      (unsigned long)mixture_count(mx, i), exact);
		}
		CHECK(got == mixture_size(mx), "try %d: %lu of %lu", t,
		      (unsigned long)got, (unsigned long)mixture_size(mx));
		CHECK(mixture_size(mx) == (mp.epoch_size ?
						   mp.epoch_size :
						   1000ull * mp.nmembers),
		      "try %d: E", t);
		mixture_free(mx);
	}
}

Test(mixture, repeat_and_choose)
{
	struct mix x = { 0 };
	/* int(0.29 * 100) is 28 in Python: 28.999999999999996. */
	static const uint64_t want[] = { 2000, 18, 1250, 28 };
	static const uint64_t want_c[] = { 10, 37, 100 };

	mix_add(&x, 1000, MIXTURE_REPEAT, 2);
	mix_add(&x, 37, MIXTURE_REPEAT, 0.5);
	mix_add(&x, 500, MIXTURE_REPEAT, 2.5);
	mix_add(&x, 100, MIXTURE_REPEAT, 0.29);
	expect_counts(&x.p, want, 3296);
	/* choose below, equal to and above the member's size. */
	memset(&x, 0, sizeof(x));
	mix_add(&x, 1000, MIXTURE_CHOOSE, 10);
	mix_add(&x, 37, MIXTURE_CHOOSE, 37);
	mix_add(&x, 37, MIXTURE_CHOOSE, 100);
	expect_counts(&x.p, want_c, 147);
	/* repeat and choose mix; a member may give nothing. */
	memset(&x, 0, sizeof(x));
	mix_add(&x, 37, MIXTURE_REPEAT, 0.01);
	mix_add(&x, 500, MIXTURE_CHOOSE, 3);
	{
		static const uint64_t w[] = { 0, 3 };

		expect_counts(&x.p, w, 3);
	}
}

Test(mixture, refusals)
{
	struct mix x = { 0 };
	struct layout empty = { 3, { 0, 0, 0 } };
	struct mixture_params none = { 0 };

	mix_add(&x, 1000, MIXTURE_PROPORTION, 0.5);
	mix_add(&x, 37, MIXTURE_REPEAT, 1);
	refuses(&x.p, "member 1: repeat beside member 0's proportion");
	x.m[0].how = MIXTURE_CHOOSE;
	x.m[0].value = 5;
	x.m[1].how = MIXTURE_PROPORTION;
	refuses(&x.p, "member 1: proportion beside member 0's choose");
	x.m[1].how = MIXTURE_REPEAT;
	x.p.epoch_size = 100;
	refuses(&x.p, "epoch size (100) goes with proportions");
	x.p.epoch_size = 0;

	x.m[1].value = 0;
	refuses(&x.p, "member 1: repeat 0 is not a number above 0");
	x.m[1].value = -2;
	refuses(&x.p, "member 1: repeat -2 is not a number above 0");
	x.m[1].value = NAN;
	refuses(&x.p, "member 1: repeat nan is not a number above 0");
	x.m[1].value = INFINITY;
	refuses(&x.p, "member 1: repeat inf is not a number above 0");
	x.m[1].value = 1e13; /* times 37: more than 2^48 */
	refuses(&x.p, "member 1: repeat 1e+13 of 37 samples is more than 2^48");
	x.m[1].value = 1;
	x.m[0].value = 2.5;
	refuses(&x.p, "member 0: choose 2.5 is not a whole number");
	x.m[0].value = 0;
	refuses(&x.p, "member 0: choose 0 is not a number above 0");
	x.m[0].value = 5;
	x.m[0].how = (enum mixture_how)7;
	refuses(&x.p, "member 0: unknown kind 7");
	x.m[0].how = MIXTURE_CHOOSE;

	x.m[1].nshards = empty.nshards;
	x.m[1].shard_records = empty.rec;
	refuses(&x.p, "member 1: empty (its 3 shards hold no samples)");
	x.m[1].nshards = 0;
	refuses(&x.p, "member 1: no shards");
	x.m[1] = x.m[0];

	/* An epoch of nothing: every repeat rounds down to 0. */
	x.m[0].how = x.m[1].how = MIXTURE_REPEAT;
	x.m[0].value = x.m[1].value = 0.0001;
	refuses(&x.p, "an epoch of no samples");

	x.m[0] = (struct mixture_member){ x.l[0].nshards, x.l[0].rec,
					  MIXTURE_PROPORTION, 0 };
	x.m[1] = (struct mixture_member){ x.l[1].nshards, x.l[1].rec,
					  MIXTURE_PROPORTION, NAN };
	refuses(&x.p, "member 0: proportion 0 is not a number above 0");
	x.m[0].value = 1;
	refuses(&x.p, "member 1: proportion nan is not a number above 0");
	x.m[1].value = 1;
	x.p.epoch_size = (1ull << 48) + 1;
	refuses(&x.p, "more than 2^48");

	refuses(&none, "0 members (it takes 1 to 32)");
	none.nmembers = MIXTURE_MAX_MEMBERS + 1;
	none.m = x.m;
	refuses(&none, "33 members");
}

/* Whole copies of many shards beyond MIXTURE_MAX_BLOCKS are refused. */
Test(mixture, too_many_blocks)
{
	struct layout l;
	struct mixture_member m;
	struct mixture_params p = { .nmembers = 1, .m = &m };

	even_layout(&l, 512, 1); /* 512 shards of one sample */
	m = (struct mixture_member){ l.nshards, l.rec, MIXTURE_CHOOSE,
				     512.0 * (MIXTURE_MAX_BLOCKS / 512 + 1) };
	refuses(&p, "member 0: 32769 whole copies of its 512 shards");
	m.value = 512.0 * 100 + 3;
	mixture_free(must_new(&p));
}

/*
 * One epoch of mx: every place mapped. Per member, each sample comes
 * floor(c/n) times or once more, c mod n of them once more, all
 * indices < n, and the places of member m are [base_m, base_m + c_m).
 * The remainder's samples go to rem[m] (a bitmap of n_m bits per
 * member, cleared here), for the callers that compare epochs.
 */
static void check_epoch(const struct mixture *mx, uint8_t **rem)
{
	uint32_t nm = mixture_members(mx);

	for (uint32_t i = 0; i < nm; i++) {
		uint64_t n = mixture_member_size(mx, i);
		uint64_t c = mixture_count(mx, i), base = mixture_base(mx, i);
		uint64_t q = c / n, more = 0;
		uint32_t *seen = calloc(n, sizeof(uint32_t));

		cr_assert_not_null(seen);
		if (rem)
			memset(rem[i], 0, (n + 7) / 8);
		for (uint64_t v = base; v < base + c; v++) {
			uint32_t m;
			uint64_t k;

			mixture_map(mx, v, &m, &k);
			CHECK(m == i, "place %lu: member %u, want %u",
			      (unsigned long)v, m, i);
			CHECK(k < n, "place %lu: sample %lu of %lu",
			      (unsigned long)v, (unsigned long)k,
			      (unsigned long)n);
			if (m != i || k >= n)
				continue;
			seen[k]++;
			/* Whole copies first: each in dataset order. */
			if (v - base < q * n)
				CHECK(k == (v - base) % n, "place %lu",
				      (unsigned long)v);
			else if (rem)
				rem[i][k / 8] |= (uint8_t)(1u << (k % 8));
		}
		for (uint64_t k = 0; k < n; k++) {
			CHECK(seen[k] == q || seen[k] == q + 1,
			      "member %u sample %lu: %u times, want %lu or one more",
			      i, (unsigned long)k, seen[k], (unsigned long)q);
			more += seen[k] == q + 1;
		}
		CHECK(more == c % n,
		      "member %u: %lu samples once more, want c mod n = %lu", i,
		      (unsigned long)more, (unsigned long)(c % n));
		free(seen);
	}
}

static void check_mixture(struct mix *x, bool quasi)
{
	struct mixture *mx;
	const uint64_t *rec;
	uint64_t sum = 0;
	uint32_t nb, m;
	uint64_t k;

	x->p.quasi = quasi;
	x->p.seed = 77;
	mx = must_new(&x->p);
	nb = mixture_blocks(mx, &rec);
	for (uint32_t b = 0; b < nb; b++)
		sum += rec[b];
	cr_expect_eq(sum, mixture_size(mx), "the blocks hold E samples");
	for (uint32_t e = 0; e < 3; e++) {
		mixture_set_epoch(mx, e);
		cr_expect_eq(mixture_epoch(mx), e);
		check_epoch(mx, NULL);
	}
	mixture_map(mx, mixture_size(mx), &m, &k);
	cr_expect_eq(m, UINT32_MAX);
	cr_expect_eq(k, UINT64_MAX);
	mixture_free(mx);
}

Test(mixture, every_epoch_proportions)
{
	struct mix x = { 0 };

	mix_add(&x, 1000, MIXTURE_PROPORTION, 0.2);
	mix_add(&x, 37, MIXTURE_PROPORTION, 0.5);
	mix_add(&x, 500, MIXTURE_PROPORTION, 0.3);
	x.p.epoch_size = 2345;
	check_mixture(&x, false);
	check_mixture(&x, true);
}

Test(mixture, every_epoch_repeat_choose)
{
	struct mix x = { 0 };

	mix_add(&x, 1000, MIXTURE_REPEAT, 0.4);
	mix_add(&x, 37, MIXTURE_CHOOSE, 100);
	mix_add(&x, 500, MIXTURE_REPEAT, 2.5);
	mix_add(&x, 1, MIXTURE_CHOOSE, 3);
	check_mixture(&x, false);
	check_mixture(&x, true);
}

/*
 * The blocks: each whole copy of a member its shards, a remainder one
 * block; with quasi, a block's places read the member's records in
 * file order, so a whole copy's block is one of its shards.
 */
Test(mixture, blocks)
{
	struct mix x = { 0 };
	struct mixture *mx;
	const uint64_t *rec;
	uint32_t nb, b = 0;
	uint64_t v = 0;

	mix_add(&x, 500, MIXTURE_CHOOSE, 1100); /* 2 copies and 100 */
	mix_add(&x, 37, MIXTURE_CHOOSE, 37);	/* 1 copy */
	mix_add(&x, 300, MIXTURE_CHOOSE, 30);	/* a remainder */
	x.p.quasi = true;
	mx = must_new(&x.p);
	nb = mixture_blocks(mx, &rec);
	cr_assert_eq(nb, 2 * x.l[0].nshards + 1 + x.l[1].nshards + 1);
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t n = mixture_member_size(mx, i);
		uint64_t q = mixture_count(mx, i) / n;

		for (uint64_t c = 0; c < q; c++) {
			uint64_t first = 0;

			for (uint32_t s = 0; s < x.l[i].nshards; s++, b++) {
				cr_expect_eq(rec[b], x.l[i].rec[s]);
				for (uint64_t r = 0; r < rec[b]; r++, v++) {
					uint32_t m;
					uint64_t k;

					mixture_map(mx, v, &m, &k);
					CHECK(m == i && k == first + r,
					      "copy %lu of member %u, shard %u",
					      (unsigned long)c, i, s);
				}
				first += x.l[i].rec[s];
			}
		}
		if (mixture_count(mx, i) % n) {
			cr_expect_eq(rec[b], mixture_count(mx, i) % n);
			v += rec[b++];
		}
	}
	cr_expect_eq(b, nb);
	cr_expect_eq(v, mixture_size(mx));
	mixture_free(mx);
}

/*
 * A member taken in half (choose n/2): its remainder is the whole of
 * it. Different epochs take different halves, the same (seed, epoch)
 * the same one, another seed another.
 */
static void remainder_keys(bool quasi)
{
	struct mix x = { 0 };
	struct mixture *a, *b;
	uint8_t *ra[1], *rb[1];
	size_t len = (1000 + 7) / 8;

	mix_add(&x, 1000, MIXTURE_CHOOSE, 500);
	/*
	 * With quasi, ten shards of 100: the remainder is five whole ones,
	 * so that only the shards' order can change it, not a run's start.
	 */
	if (quasi) {
		even_layout(&x.l[0], 1000, 100);
		x.m[0].nshards = x.l[0].nshards;
	}
	x.p.quasi = quasi;
	x.p.seed = 5;
	a = must_new(&x.p);
	b = must_new(&x.p);
	ra[0] = malloc(len);
	rb[0] = malloc(len);
	cr_assert(ra[0] && rb[0]);
	check_epoch(a, ra);
	mixture_set_epoch(b, 1);
	check_epoch(b, rb);
	cr_expect(memcmp(ra[0], rb[0], len) != 0,
		  "epochs 0 and 1 take different samples (%s)",
		  quasi ? "quasi" : "random");
	mixture_set_epoch(b, 0);
	check_epoch(b, rb);
	cr_expect(memcmp(ra[0], rb[0], len) == 0,
		  "epoch 0 again takes the same samples");
	for (uint64_t v = 0; v < mixture_size(a); v++) {
		uint32_t ma, mb;
		uint64_t ka, kb;

		mixture_map(a, v, &ma, &ka);
		mixture_map(b, v, &mb, &kb);
		CHECK(ma == mb && ka == kb, "place %lu differs", v);
	}
	mixture_free(b);
	x.p.seed = 6;
	b = must_new(&x.p);
	check_epoch(b, rb);
	cr_expect(memcmp(ra[0], rb[0], len) != 0,
		  "another seed takes other samples");
	mixture_free(a);
	mixture_free(b);
	free(ra[0]);
	free(rb[0]);
}

/* Two members alike draw apart: each has its own key. */
Test(mixture, members_drawn_apart)
{
	for (int quasi = 0; quasi < 2; quasi++) {
		struct mix x = { 0 };
		struct mixture *mx;
		uint8_t *r[2];
		size_t len = (1000 + 7) / 8;

		mix_add(&x, 1000, MIXTURE_CHOOSE, 500);
		mix_add(&x, 1000, MIXTURE_CHOOSE, 500);
		for (int i = 0; quasi && i < 2; i++) { /* whole shards only */
			even_layout(&x.l[i], 1000, 100);
			x.m[i].nshards = x.l[i].nshards;
		}
		x.p.quasi = quasi;
		mx = must_new(&x.p);
		r[0] = malloc(len);
		r[1] = malloc(len);
		cr_assert(r[0] && r[1]);
		check_epoch(mx, r);
		cr_expect(memcmp(r[0], r[1], len) != 0,
			  "members 0 and 1 take different samples (%s)",
			  quasi ? "quasi" : "random");
		free(r[0]);
		free(r[1]);
		mixture_free(mx);
	}
}

Test(mixture, remainder_random_keys)
{
	remainder_keys(false);
}

Test(mixture, remainder_quasi_keys)
{
	remainder_keys(true);
}

/*
 * Quasi: a remainder is whole shards of the member and one run of
 * consecutive records (cyclic) of one more shard, each shard's records
 * in file order. Count, per shard, the records taken and the runs they
 * form.
 */
Test(mixture, quasi_whole_shards_and_one_run)
{
	struct mix x = { 0 };
	struct mixture *mx;
	static const double choose[] = { 1, 2, 70, 333, 999, 1000, 1234 };

	for (uint32_t t = 0; t < NELEM(choose); t++) {
		memset(&x, 0, sizeof(x));
		mix_add(&x, 1000, MIXTURE_CHOOSE, choose[t]);
		x.p.quasi = true;
		x.p.seed = 99 + t;
		mx = must_new(&x.p);
		for (uint32_t e = 0; e < 4; e++) {
			uint64_t n = 1000, rem = (uint64_t)choose[t] % n;
			uint64_t base = (uint64_t)choose[t] - rem;
			uint8_t taken[1000] = { 0 }, left[MAX_SHARDS] = { 0 };
			uint32_t partial = 0, prev_shard = UINT32_MAX;
			uint64_t first = 0, prev = 0;

			mixture_set_epoch(mx, e);
			check_epoch(mx, NULL);
			for (uint64_t v = base; v < base + rem; v++) {
				uint32_t m, s;
				uint64_t k;

				mixture_map(mx, v, &m, &k);
				taken[k] = 1;
				/* The member's shard of k. */
				first = 0;
				for (s = 0; k >= first + x.l[0].rec[s]; s++)
					first += x.l[0].rec[s];
				/* Within a shard: the next record, cyclically. */
				if (s == prev_shard)
					CHECK(k == prev + 1 ||
						      (k == first &&
						       prev == first +
								       x.l[0].rec
									       [s] -
								       1),
					      "choose %g epoch %u: %lu after %lu",
					      choose[t], e, (unsigned long)k,
					      (unsigned long)prev);
				/* A shard's records come together, once. */
				if (s != prev_shard && prev_shard != UINT32_MAX)
					left[prev_shard] = 1;
				CHECK(!left[s],
				      "choose %g epoch %u: shard %u again",
				      choose[t], e, s);
				prev_shard = s;
				prev = k;
			}
			/* Per shard: none, all, or (once) a cyclic run. */
			first = 0;
			for (uint32_t s = 0; s < x.l[0].nshards; s++) {
				uint64_t size = x.l[0].rec[s], got = 0,
					 runs = 0;

				for (uint64_t r = 0; r < size; r++) {
					got += taken[first + r];
					runs += taken[first + r] &&
						!taken[first +
						       (r + size - 1) % size];
				}
				if (got && got < size) {
					partial++;
					CHECK(runs == 1,
					      "choose %g epoch %u shard %u: %lu runs",
					      choose[t], e, s,
					      (unsigned long)runs);
				}
				first += size;
			}
			CHECK(partial <= 1, "choose %g epoch %u: %u partial",
			      choose[t], e, partial);
		}
		mixture_free(mx);
	}
}

/*
 * Uniformity of random subsamples: over 4000 epochs each of 100 samples
 * is taken about 4000 * c / n times (binomial), within 5 sigma; and a
 * remainder beside whole copies (choose 130: one copy and 30) likewise.
 */
Test(mixture, subsample_uniform)
{
	static const double choose[] = { 30, 130 };

	for (uint32_t t = 0; t < NELEM(choose); t++) {
		struct mix x = { 0 };
		struct mixture *mx;
		uint32_t hits[100] = { 0 }, epochs = 4000;
		uint64_t q = (uint64_t)choose[t] / 100;
		double pr = (choose[t] - 100.0 * (double)q) / 100.0;
		double mean = epochs * pr, sd = sqrt(epochs * pr * (1 - pr));

		mix_add(&x, 100, MIXTURE_CHOOSE, choose[t]);
		x.p.seed = 3;
		mx = must_new(&x.p);
		for (uint32_t e = 0; e < epochs; e++) {
			mixture_set_epoch(mx, e);
			for (uint64_t v = 100 * q; v < mixture_size(mx); v++) {
				uint32_t m;
				uint64_t k;

				mixture_map(mx, v, &m, &k);
				hits[k]++;
			}
		}
		for (uint32_t k = 0; k < 100; k++)
			CHECK(fabs(hits[k] - mean) < 5 * sd,
			      "choose %g: sample %u taken %u times of %u, want %.0f +- %.0f",
			      choose[t], k, hits[k], epochs, mean, 5 * sd);
		mixture_free(mx);
	}
}

/*
 * The order over the mixture's blocks, world 3: across the ranks every
 * (member, sample) comes as many times as the epoch's multiset holds
 * it (the places of [0, E), each once).
 */
static void deal(struct mix *x, enum order_kind kind)
{
	struct mixture *mx;
	const uint64_t *rec;
	uint32_t nb, world = 3;
	uint64_t e_size, total = 0;
	uint32_t *want[4], *got[4];

	x->p.quasi = kind == ORDER_QUASI;
	x->p.seed = 2024;
	mx = must_new(&x->p);
	nb = mixture_blocks(mx, &rec);
	e_size = mixture_size(mx);
	for (uint32_t i = 0; i < x->n; i++) {
		want[i] = calloc(mixture_member_size(mx, i), sizeof(uint32_t));
		got[i] = calloc(mixture_member_size(mx, i), sizeof(uint32_t));
		cr_assert(want[i] && got[i]);
	}
	for (uint32_t e = 0; e < 2; e++) {
		mixture_set_epoch(mx, e);
		for (uint32_t i = 0; i < x->n; i++) {
			memset(want[i], 0,
			       mixture_member_size(mx, i) * sizeof(uint32_t));
			memset(got[i], 0,
			       mixture_member_size(mx, i) * sizeof(uint32_t));
		}
		for (uint64_t v = 0; v < e_size; v++) {
			uint32_t m;
			uint64_t k;

			mixture_map(mx, v, &m, &k);
			want[m][k]++;
		}
		total = 0;
		for (uint32_t r = 0; r < world; r++) {
			struct order_params op = {
				.kind = kind,
				.seed = 2024,
				.rank = r,
				.world = world,
				.batch_size = 32,
				.window = 256,
				.nshards = nb,
				.shard_records = rec,
			};
			struct order *o = NULL;
			struct diag d = { "" };

			cr_assert_eq(order_new(&o, &op, &d), 0, "%s", d.msg);
			order_set_epoch(o, e);
			for (uint64_t b = 0; b < order_batches(o); b++)
				for (uint32_t k = 0;
				     k < order_batch_count(o, b); k++) {
					uint64_t v = order_sample(o, b, k), s;
					uint32_t m;

					mixture_map(mx, v, &m, &s);
					CHECK(m < x->n, "rank %u: place %lu", r,
					      (unsigned long)v);
					if (m < x->n)
						got[m][s]++;
					total++;
				}
			order_free(o);
		}
		cr_expect_eq(total, e_size, "the ranks get E places");
		for (uint32_t i = 0; i < x->n; i++)
			for (uint64_t k = 0; k < mixture_member_size(mx, i);
			     k++)
				CHECK(got[i][k] == want[i][k],
				      "epoch %u member %u sample %lu: %u, want %u",
				      e, i, (unsigned long)k, got[i][k],
				      want[i][k]);
	}
	for (uint32_t i = 0; i < x->n; i++) {
		free(want[i]);
		free(got[i]);
	}
	mixture_free(mx);
}

Test(mixture, order_deals_proportions)
{
	struct mix x = { 0 };

	mix_add(&x, 1000, MIXTURE_PROPORTION, 0.5);
	mix_add(&x, 37, MIXTURE_PROPORTION, 0.3);
	mix_add(&x, 500, MIXTURE_PROPORTION, 0.2);
	deal(&x, ORDER_RANDOM);
	deal(&x, ORDER_QUASI);
	x.p.epoch_size = 4000;
	deal(&x, ORDER_RANDOM);
	deal(&x, ORDER_QUASI);
}

Test(mixture, order_deals_repeat_choose)
{
	struct mix x = { 0 };

	mix_add(&x, 1000, MIXTURE_REPEAT, 1.5);
	mix_add(&x, 37, MIXTURE_CHOOSE, 100);
	mix_add(&x, 500, MIXTURE_CHOOSE, 200);
	deal(&x, ORDER_RANDOM);
	deal(&x, ORDER_QUASI);
	deal(&x, ORDER_SEQUENTIAL);
}
