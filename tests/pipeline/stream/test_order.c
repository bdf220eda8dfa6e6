/*
 * test_order.c - the sample order contract: batch counts, exactly-once
 * delivery across ranks, determinism, epochs and seeds, quasi-random
 * locality, shard lookup, a statistical check of the random order,
 * parameter errors and huge datasets.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader_error.h"
#include "order.h"
#include "rng.h"
#include "../../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Checks inside loops of millions of samples go through CHECK(): it costs
 * an if while they hold, and reports only the first few that fail, so a
 * broken order gives a readable log instead of a million lines.
 */
static unsigned fails;
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond) && fails++ < 10)                                   \
			cr_expect_fail(__VA_ARGS__);                           \
	} while (0)

static const char *const kind_name[] = { "sequential", "random", "quasi" };

static const uint64_t sizes[] = { 1, 2, 3, 7, 100, 1000, 4097, 65537 };
static const uint32_t worlds[] = { 1, 2, 3, 8 };
static const uint32_t batch_sizes[] = { 1, 5, 64 };

/*
 * A dataset of n samples cut into shards of uneven sizes, empty and
 * one-record shards included; the last one is cut short to fit.
 */
#define MAX_SHARDS 4096
struct layout {
	uint32_t nshards;
	uint64_t rec[MAX_SHARDS];
};

static void make_layout(struct layout *l, uint64_t n)
{
	l->nshards = ut_shards(l->rec, MAX_SHARDS, n, 1000);
	cr_assert_leq(l->nshards, MAX_SHARDS);
}

static struct order_params params(enum order_kind kind, uint64_t seed,
				  uint32_t rank, uint32_t world, uint32_t bs,
				  bool drop, uint32_t window,
				  const struct layout *l)
{
	struct order_params p = {
		.kind = kind,
		.seed = seed,
		.rank = rank,
		.world = world,
		.batch_size = bs,
		.drop_last = drop,
		.window = window,
		.nshards = l->nshards,
		.shard_records = l->rec,
	};

	return p;
}

static struct order *must_new(const struct order_params *p)
{
	struct order *o = NULL;
	struct diag d = { "" };
	int err = order_new(&o, p, &d);

	cr_assert_eq(err, 0, "order_new: %d %s", err, d.msg);
	cr_assert_not_null(o);
	return o;
}

/*
 * The epoch's whole sequence, position by position, as one rank of a
 * world of one with batches of one sees it: seq[p] for p < N.
 */
static void epoch_seq(uint64_t *seq, const struct order_params *tmpl,
		      uint32_t epoch)
{
	struct order_params p = *tmpl;
	struct order *o;

	p.rank = 0;
	p.world = 1;
	p.batch_size = 1;
	p.drop_last = false;
	o = must_new(&p);
	order_set_epoch(o, epoch);
	for (uint64_t i = 0; i < order_size(o); i++)
		seq[i] = order_sample(o, i, 0);
	order_free(o);
}

/*
 * Run every rank of one configuration through an epoch and check the
 * batch counts, exactly-once (or, dropping, at-most-once and full)
 * delivery, and that each sample sits where the world-of-one sequence
 * ref[] puts its position.
 */
static void check_world(const struct order_params *tmpl, uint32_t epoch,
			const uint64_t *ref, unsigned char *seen)
{
	uint64_t n = 0, delivered = 0, batches = 0;
	uint32_t w = tmpl->world, bs = tmpl->batch_size;
	char what[128];

	snprintf(what, sizeof(what), "%s w=%u B=%u drop=%d W=%u",
		 kind_name[tmpl->kind], w, bs, tmpl->drop_last, tmpl->window);
	for (uint32_t r = 0; r < w; r++) {
		struct order_params p = *tmpl;
		struct order *o;

		p.rank = r;
		o = must_new(&p);
		order_set_epoch(o, epoch);
		n = order_size(o);
		if (r == 0) {
			uint64_t most = (n + w - 1) / w;

			batches = order_batches(o);
			memset(seen, 0, n);
			if (tmpl->drop_last)
				CHECK(batches == n / w / bs,
				      "%s N=%llu: %llu batches", what,
				      (unsigned long long)n,
				      (unsigned long long)batches);
			else
				CHECK(batches == (most + bs - 1) / bs,
				      "%s N=%llu: %llu batches", what,
				      (unsigned long long)n,
				      (unsigned long long)batches);
		}
		CHECK(order_batches(o) == batches, "%s N=%llu rank %u: batches",
		      what, (unsigned long long)n, r);
		CHECK(order_batch_count(o, batches) == 0, "%s: past the end",
		      what);
		if (!tmpl->drop_last && batches) {
			uint32_t cnt = order_batch_count(o, batches - 1);

			if (cnt < bs)
				CHECK(order_sample(o, batches - 1, cnt) ==
					      UINT64_MAX,
				      "%s: a sample past the end", what);
		}
		for (uint64_t b = 0; b < batches; b++) {
			uint32_t cnt = order_batch_count(o, b);

			CHECK(cnt <= bs, "%s: batch %llu has %u", what,
			      (unsigned long long)b, cnt);
			if (tmpl->drop_last)
				CHECK(cnt == bs, "%s: short batch %llu", what,
				      (unsigned long long)b);
			/* Only a rank's last batches may be short. */
			if (b + 1 < batches && cnt < bs)
				CHECK(order_batch_count(o, b + 1) == 0,
				      "%s: short batch %llu before the end",
				      what, (unsigned long long)b);
			for (uint32_t k = 0; k < cnt; k++) {
				uint64_t g = order_sample(o, b, k);
				uint64_t pos = (b * bs + k) * w + r;

				CHECK(g < n, "%s N=%llu: sample %llu", what,
				      (unsigned long long)n,
				      (unsigned long long)g);
				if (g >= n)
					continue;
				CHECK(!seen[g], "%s N=%llu: %llu twice", what,
				      (unsigned long long)n,
				      (unsigned long long)g);
				seen[g] = 1;
				CHECK(pos < n && ref[pos] == g,
				      "%s N=%llu: position %llu", what,
				      (unsigned long long)n,
				      (unsigned long long)pos);
				delivered++;
			}
		}
		order_free(o);
	}
	if (tmpl->drop_last)
		CHECK(delivered == (uint64_t)w * batches * bs,
		      "%s N=%llu: delivered %llu", what, (unsigned long long)n,
		      (unsigned long long)delivered);
	else
		CHECK(delivered == n, "%s N=%llu: delivered %llu of %llu", what,
		      (unsigned long long)n, (unsigned long long)delivered,
		      (unsigned long long)n);
}

/* The orders as the tests run them: quasi both with its default and a
 * small window. */
struct variant {
	enum order_kind kind;
	uint32_t window;
};

static const struct variant variants[] = {
	{ ORDER_SEQUENTIAL, 0 },
	{ ORDER_RANDOM, 0 },
	{ ORDER_QUASI, 0 },
	{ ORDER_QUASI, 16 },
};

static void check_pad(const struct order_params *tmpl, const uint64_t *ref,
		      unsigned char *seen);

Test(order, cover)
{
	static struct layout l;
	uint64_t *ref = malloc(65537 * sizeof(*ref));
	unsigned char *seen = malloc(65537);

	cr_assert(ref && seen);
	for (size_t v = 0; v < NELEM(variants); v++) {
		for (size_t ni = 0; ni < NELEM(sizes); ni++) {
			struct order_params p;

			/*
			 * The sequence is a function of the position alone:
			 * every world and batch size must deal it out as the
			 * world of one sees it, dropping, not, and padded.
			 */
			make_layout(&l, sizes[ni]);
			p = params(variants[v].kind, 42, 0, 1, 1, false,
				   variants[v].window, &l);
			epoch_seq(ref, &p, 3);
			if (p.kind == ORDER_SEQUENTIAL)
				for (uint64_t i = 0; i < sizes[ni]; i++)
					CHECK(ref[i] == i, "sequential %llu",
					      (unsigned long long)i);
			for (size_t wi = 0; wi < NELEM(worlds); wi++) {
				for (size_t bi = 0; bi < NELEM(batch_sizes);
				     bi++) {
					p.world = worlds[wi];
					p.batch_size = batch_sizes[bi];
					p.drop_last = false;
					check_world(&p, 3, ref, seen);
					p.drop_last = true;
					check_world(&p, 3, ref, seen);
					p.drop_last = false;
					check_pad(&p, ref, seen);
				}
			}
		}
	}
	free(ref);
	free(seen);
}

/* Two orders from the same parameters agree, and so does reselecting an
 * epoch after another one. */
Test(order, deterministic)
{
	static struct layout l;

	make_layout(&l, 4097);
	for (size_t v = 0; v < NELEM(variants); v++) {
		struct order_params p = params(variants[v].kind, 7, 1, 3, 5,
					       false, variants[v].window, &l);
		struct order *a = must_new(&p), *b = must_new(&p);

		for (uint32_t e = 0; e < 3; e++) {
			order_set_epoch(a, e);
			order_set_epoch(b, 2 - e);
			order_set_epoch(b, e);
			cr_expect_eq(order_epoch(a), e);
			for (uint64_t i = 0; i < order_batches(a); i++)
				for (uint32_t k = 0;
				     k < order_batch_count(a, i); k++)
					CHECK(order_sample(a, i, k) ==
						      order_sample(b, i, k),
					      "%s epoch %u batch %llu",
					      kind_name[p.kind], e,
					      (unsigned long long)i);
		}
		order_free(a);
		order_free(b);
	}
}

/* Every batch of epochs 0 and 1 of p: order_batch() against order_sample(). */
static uint64_t batch_vs_sample(const struct order_params *p)
{
	static uint64_t out[256];
	struct order *o = must_new(p);
	uint64_t checked = 0;

	for (uint32_t e = 0; e < 2; e++) {
		order_set_epoch(o, e);
		for (uint64_t i = 0; i < order_batches(o); i++) {
			uint32_t n = order_batch_count(o, i);

			order_batch(o, i, n, out);
			for (uint32_t k = 0; k < n; k++, checked++)
				CHECK(out[k] == order_sample(o, i, k),
				      "%s world %u batch size %u: epoch %u batch %llu sample %u",
				      kind_name[p->kind], p->world,
				      p->batch_size, e, (unsigned long long)i,
				      k);
		}
	}
	order_free(o);
	return checked;
}

/*
 * order_batch() gives what order_sample() gives, sample by sample: eight
 * lanes at a time and the rest one by one, for every kind, world, rank
 * and batch size (short last batches and batches of fewer than eight).
 */
Test(order, batch_matches_sample)
{
	static struct layout l;
	static const uint64_t counts[] = { 1, 2, 13, 4097, 65537 };
	static const uint32_t bss[] = { 1, 7, 8, 64, 256 };
	uint64_t checked = 0;

	for (size_t z = 0; z < NELEM(counts); z++) {
		make_layout(&l, counts[z]);
		for (size_t v = 0; v < NELEM(variants); v++)
			for (size_t bi = 0; bi < NELEM(bss); bi++)
				for (uint32_t w = 1; w <= 3; w += 2) {
					struct order_params p =
						params(variants[v].kind, 11,
						       w - 1, w, bss[bi], false,
						       variants[v].window, &l);

					checked += batch_vs_sample(&p);
					/* The last rank's repeat, padded. */
					p.pad = true;
					checked += batch_vs_sample(&p);
				}
	}
	cr_expect_gt(checked, 500000, "%llu checked",
		     (unsigned long long)checked);
}

/*
 * Padding: every rank of a world gets ceil(N/w) samples in the batches
 * it had unpadded, the last batch of each the same size (never empty);
 * each sample of the epoch comes once outside the repeats, in its
 * unpadded place; the repeats are the last of their rank's last batch,
 * order_repeats() counts them, and each is the sample of position
 * p mod N; there are ceil(N/w) * w - N of them. drop_last ignores it.
 */
static void check_pad(const struct order_params *tmpl, const uint64_t *ref,
		      unsigned char *seen)
{
	uint32_t w = tmpl->world, bs = tmpl->batch_size, last = 0;
	uint64_t n = 0, fresh = 0, repeats = 0;
	char what[128];

	snprintf(what, sizeof(what), "%s w=%u B=%u W=%u padded",
		 kind_name[tmpl->kind], w, bs, tmpl->window);
	for (uint32_t r = 0; r < w; r++) {
		struct order_params p = *tmpl, q;
		struct order *o, *u;
		uint64_t batches, mine = 0;

		p.rank = r;
		p.pad = true;
		q = p;
		q.pad = false;
		o = must_new(&p);
		u = must_new(&q);
		order_set_epoch(o, 3);
		order_set_epoch(u, 3);
		n = order_size(o);
		batches = order_batches(o);
		CHECK(batches == order_batches(u), "%s N=%llu: batches", what,
		      (unsigned long long)n);
		if (r == 0)
			memset(seen, 0, n);
		for (uint64_t b = 0; b < batches; b++) {
			uint32_t cnt = order_batch_count(o, b);
			uint32_t rep = order_repeats(o, b);
			uint32_t un = order_batch_count(u, b);

			CHECK(cnt == un + rep && order_repeats(u, b) == 0,
			      "%s N=%llu rank %u batch %llu: %u = %u + %u",
			      what, (unsigned long long)n, r,
			      (unsigned long long)b, cnt, un, rep);
			CHECK(!rep || b + 1 == batches,
			      "%s: a repeat before the last batch", what);
			mine += cnt;
			for (uint32_t k = 0; k < cnt; k++) {
				uint64_t g = order_sample(o, b, k);
				uint64_t pos = (b * bs + k) * w + r;

				CHECK(g < n && ref[pos % n] == g,
				      "%s N=%llu rank %u batch %llu: %u", what,
				      (unsigned long long)n, r,
				      (unsigned long long)b, k);
				if (k >= cnt - rep) {
					CHECK(pos >= n, "%s: repeat %llu", what,
					      (unsigned long long)pos);
					repeats++;
					continue;
				}
				CHECK(g == order_sample(u, b, k),
				      "%s: another sample", what);
				if (g < n) {
					CHECK(!seen[g], "%s: %llu twice", what,
					      (unsigned long long)g);
					seen[g] = 1;
					fresh++;
				}
			}
		}
		CHECK(mine == (n + w - 1) / w,
		      "%s N=%llu rank %u: %llu samples", what,
		      (unsigned long long)n, r, (unsigned long long)mine);
		if (r == 0)
			last = batches ? order_batch_count(o, batches - 1) : 0;
		CHECK(!batches || (last >= 1 &&
				   order_batch_count(o, batches - 1) == last),
		      "%s N=%llu rank %u: last batch %u, rank 0's %u", what,
		      (unsigned long long)n, r,
		      batches ? order_batch_count(o, batches - 1) : 0, last);
		order_free(o);
		order_free(u);
	}
	CHECK(fresh == n && repeats == (n + w - 1) / w * w - n,
	      "%s N=%llu: %llu fresh, %llu repeats", what,
	      (unsigned long long)n, (unsigned long long)fresh,
	      (unsigned long long)repeats);
}

/*
 * The case that asked for padding: 10000 samples, world 3, batches of
 * 101. Unpadded, the last batches hold 1, 0 and 0 samples; padded, 1
 * each, ranks 1 and 2 repeating one; dropping, there is no last batch.
 */
Test(order, pad_uneven_world)
{
	static struct layout l;
	uint32_t unpadded[3], padded[3], reps[3];

	make_layout(&l, 10000);
	for (uint32_t r = 0; r < 3; r++) {
		struct order_params p =
			params(ORDER_RANDOM, 1, r, 3, 101, false, 0, &l);
		struct order *o = must_new(&p);

		cr_expect_eq(order_batches(o), 34);
		unpadded[r] = order_batch_count(o, 33);
		order_free(o);
		p.pad = true;
		o = must_new(&p);
		padded[r] = order_batch_count(o, 33);
		reps[r] = order_repeats(o, 33);
		cr_expect_eq(order_repeats(o, 32), 0);
		order_free(o);
		p.drop_last = true;
		o = must_new(&p);
		cr_expect_eq(order_batches(o), 33);
		cr_expect_eq(order_repeats(o, 32), 0);
		cr_expect_eq(order_batch_count(o, 32), 101);
		order_free(o);
	}
	cr_expect(unpadded[0] == 1 && unpadded[1] == 0 && unpadded[2] == 0,
		  "unpadded %u %u %u", unpadded[0], unpadded[1], unpadded[2]);
	cr_expect(padded[0] == 1 && padded[1] == 1 && padded[2] == 1,
		  "padded %u %u %u", padded[0], padded[1], padded[2]);
	cr_expect(reps[0] == 0 && reps[1] == 1 && reps[2] == 1,
		  "repeats %u %u %u", reps[0], reps[1], reps[2]);
}

static bool seq_equal(const struct order_params *p1, uint32_t e1,
		      const struct order_params *p2, uint32_t e2, uint64_t n)
{
	uint64_t *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b));
	bool same;

	cr_assert(a && b);
	epoch_seq(a, p1, e1);
	epoch_seq(b, p2, e2);
	same = !memcmp(a, b, n * sizeof(*a));
	free(a);
	free(b);
	return same;
}

/* The random orders change with the epoch and the seed. */
Test(order, epochs_and_seeds)
{
	static struct layout l;

	for (size_t v = 1; v < NELEM(variants); v++) {
		for (size_t ni = 0; ni < NELEM(sizes); ni++) {
			uint64_t n = sizes[ni];
			struct order_params p, q;

			if (n < 8)
				continue;
			make_layout(&l, n);
			p = params(variants[v].kind, 1, 0, 1, 1, false,
				   variants[v].window, &l);
			q = p;
			q.seed = 2;
			cr_expect(!seq_equal(&p, 0, &p, 1, n),
				  "%s W=%u N=%llu: epochs 0 and 1 agree",
				  kind_name[p.kind], p.window,
				  (unsigned long long)n);
			cr_expect(!seq_equal(&p, 0, &q, 0, n),
				  "%s W=%u N=%llu: seeds 1 and 2 agree",
				  kind_name[p.kind], p.window,
				  (unsigned long long)n);
			if (p.kind == ORDER_RANDOM) {
				struct order_params s = p;

				s.kind = ORDER_SEQUENTIAL;
				cr_expect(!seq_equal(&p, 0, &s, 0, n),
					  "random N=%llu is the identity",
					  (unsigned long long)n);
			}
		}
	}
}

/* Tiny datasets: every ordering of 2 and 3 samples turns up. */
Test(order, tiny)
{
	static struct layout l;

	for (uint64_t n = 1; n <= 3; n++) {
		unsigned seen_perm[27] = { 0 }, distinct = 0;

		make_layout(&l, n);
		for (uint64_t seed = 0; seed < 300; seed++) {
			struct order_params p = params(ORDER_RANDOM, seed, 0, 1,
						       1, false, 0, &l);
			uint64_t seq[3] = { 0 };
			unsigned code = 0;

			epoch_seq(seq, &p, 0);
			for (uint64_t i = 0; i < n; i++)
				code = code * 3 + (unsigned)seq[i];
			cr_assert_lt(code, 27);
			distinct += !seen_perm[code]++;
		}
		cr_expect_eq(distinct,
			     n == 1 ? 1 :
			     n == 2 ? 2 :
				      6,
			     "N=%llu: %u orderings", (unsigned long long)n,
			     distinct);
	}
}

/*
 * Shard order as the sequence reveals it: sort the non-empty shards by
 * the windows of their first and last records. Shards that tie lie
 * within one window, where their relative order changes no window's
 * set of block positions.
 */
struct span {
	uint32_t shard;
	uint64_t first, last;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	if (x->last != y->last)
		return x->last < y->last ? -1 : 1;
	return x->shard < y->shard ? -1 : x->shard > y->shard;
}

/*
 * Quasi: with shards in the order the sequence reveals, the block
 * position q of the sample at each position p lies in p's window, that
 * is, each window of positions covers exactly the block positions
 * [w*W, w*W + L). Writes the revealed shard order to order_out.
 */
static void check_quasi_windows(const struct layout *l, uint32_t win,
				uint64_t seed, uint32_t epoch,
				uint32_t *order_out)
{
	struct order_params p =
		params(ORDER_QUASI, seed, 0, 1, 1, false, win, l);
	struct order *o = must_new(&p);
	uint64_t n = order_size(o);
	uint64_t *seq = malloc(n * sizeof(*seq));
	uint64_t *pos = malloc(n * sizeof(*pos)); /* position of sample g */
	uint64_t *start = malloc(l->nshards * sizeof(*start));
	uint64_t *bstart = malloc(l->nshards * sizeof(*bstart));
	struct span *sp = malloc(l->nshards * sizeof(*sp));
	uint32_t m = 0;
	uint64_t at = 0;

	cr_assert(seq && pos && start && bstart && sp);
	order_set_epoch(o, epoch);
	for (uint64_t i = 0; i < n; i++) {
		seq[i] = order_sample(o, i, 0);
		pos[seq[i]] = i;
	}
	for (uint32_t s = 0; s < l->nshards; s++) {
		start[s] = at;
		at += l->rec[s];
		if (!l->rec[s])
			continue;
		sp[m].shard = s;
		sp[m].first = pos[start[s]] / win;
		sp[m].last = pos[start[s] + l->rec[s] - 1] / win;
		m++;
	}
	qsort(sp, m, sizeof(*sp), span_cmp);
	at = 0;
	for (uint32_t j = 0; j < m; j++) {
		bstart[sp[j].shard] = at;
		at += l->rec[sp[j].shard];
		if (order_out)
			order_out[j] = sp[j].shard;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint32_t s;
		uint64_t rec, q;

		order_locate(o, seq[i], &s, &rec);
		q = bstart[s] + rec;
		CHECK(q / win == i / win,
		      "W=%u N=%llu epoch %u: position %llu (shard %u record %llu) reads block position %llu",
		      win, (unsigned long long)n, epoch, (unsigned long long)i,
		      s, (unsigned long long)rec, (unsigned long long)q);
	}
	order_free(o);
	free(seq);
	free(pos);
	free(start);
	free(bstart);
	free(sp);
}

Test(order, quasi_windows)
{
	static struct layout l;
	static const uint64_t ns[] = { 1, 7, 100, 1000, 4097 };
	static const uint32_t wins[] = { 1, 3, 16, 64 };

	for (size_t ni = 0; ni < NELEM(ns); ni++) {
		make_layout(&l, ns[ni]);
		for (size_t wi = 0; wi < NELEM(wins); wi++)
			for (uint32_t e = 0; e < 3; e++)
				check_quasi_windows(&l, wins[wi], 9, e, NULL);
	}
}

/* Shards longer than two windows: their order is fully revealed, and it
 * changes between epochs. */
Test(order, quasi_shard_order)
{
	static struct layout l;
	uint32_t a[8], b[8];

	l.nshards = 8;
	for (unsigned i = 0; i < 8; i++)
		l.rec[i] = 40 + i;
	check_quasi_windows(&l, 16, 5, 0, a);
	check_quasi_windows(&l, 16, 5, 1, b);
	cr_expect(memcmp(a, b, sizeof(a)), "shard order is the same");

	/* Four shards: still not the same in epochs 0..3. */
	l.nshards = 4;
	check_quasi_windows(&l, 16, 5, 0, a);
	for (uint32_t e = 1; e < 4; e++) {
		check_quasi_windows(&l, 16, 5, e, b);
		cr_expect(memcmp(a, b, 4 * sizeof(a[0])),
			  "4 shards: epoch %u repeats epoch 0", e);
	}
}

/*
 * One shard leaves nothing to the shard order: the windows alone must
 * shuffle, differently per epoch, and each window only among its own
 * positions.
 */
Test(order, quasi_one_shard)
{
	static struct layout l;
	static uint64_t a[1000], b[1000];
	struct order_params p;
	unsigned moved = 0;

	l.nshards = 1;
	l.rec[0] = 1000;
	p = params(ORDER_QUASI, 3, 0, 1, 1, false, 16, &l);
	epoch_seq(a, &p, 0);
	epoch_seq(b, &p, 1);
	cr_expect(memcmp(a, b, sizeof(a)), "epochs 0 and 1 agree");
	for (uint64_t i = 0; i < 1000; i++) {
		CHECK(a[i] / 16 == i / 16, "position %llu reads %llu",
		      (unsigned long long)i, (unsigned long long)a[i]);
		moved += a[i] != i;
	}
	/* A random permutation of 16 fixes one point on average. */
	cr_expect_gt(moved, 800, "only %u of 1000 moved", moved);
}

Test(order, locate)
{
	static struct layout l;

	for (size_t ni = 0; ni < NELEM(sizes); ni++) {
		struct order_params p;
		struct order *o;
		uint64_t at = 0;

		make_layout(&l, sizes[ni]);
		p = params(ORDER_RANDOM, 1, 0, 1, 1, false, 0, &l);
		o = must_new(&p);
		cr_expect_eq(order_size(o), sizes[ni]);
		for (uint32_t s = 0; s < l.nshards; s++) {
			for (uint64_t r = 0; r < l.rec[s]; r++) {
				uint32_t fs = UINT32_MAX;
				uint64_t fr = UINT64_MAX;

				order_locate(o, at + r, &fs, &fr);
				CHECK(fs == s && fr == r,
				      "N=%llu: %llu -> %u/%llu, want %u/%llu",
				      (unsigned long long)sizes[ni],
				      (unsigned long long)(at + r), fs,
				      (unsigned long long)fr, s,
				      (unsigned long long)r);
			}
			at += l.rec[s];
		}
		order_free(o);
	}
}

/*
 * The random order against simple statistics of a uniform permutation
 * of 1000, over 200 seeds: each sample's mean position is near the
 * middle (the mean of 200 uniform positions spreads by about 20), the
 * correlation of position and sample is near 0 (spread 0.032 per
 * seed), and about half the neighbours ascend (spread 0.016).
 */
Test(order, random_uniform)
{
	static struct layout l;
	static double sum[1000];
	double lo = 1e9, hi = -1, worst_r = 0, worst_up = 0.5;

	make_layout(&l, 1000);
	for (uint64_t seed = 0; seed < 200; seed++) {
		struct order_params p = params(ORDER_RANDOM, seed * 7919 + 1, 0,
					       1, 1000, false, 0, &l);
		struct order *o = must_new(&p);
		double sxy = 0, r, up = 0;
		uint64_t prev = 0;

		for (uint32_t k = 0; k < 1000; k++) {
			uint64_t g = order_sample(o, 0, k);

			sum[g] += k;
			sxy += ((double)k - 499.5) * ((double)g - 499.5);
			up += k && g > prev;
			prev = g;
		}
		/* Both are 0..999 in some order: the variances are known. */
		r = sxy / (1000.0 * (1000.0 * 1000.0 - 1) / 12);
		up /= 999;
		worst_r = r * r > worst_r * worst_r ? r : worst_r;
		if ((up - 0.5) * (up - 0.5) >
		    (worst_up - 0.5) * (worst_up - 0.5))
			worst_up = up;
		order_free(o);
	}
	for (unsigned g = 0; g < 1000; g++) {
		double mean = sum[g] / 200;

		lo = mean < lo ? mean : lo;
		hi = mean > hi ? mean : hi;
	}
	cr_expect(lo > 499.5 - 120 && hi < 499.5 + 120,
		  "mean positions from %.1f to %.1f", lo, hi);
	cr_expect(worst_r > -0.2 && worst_r < 0.2, "correlation %.3f", worst_r);
	cr_expect(worst_up > 0.4 && worst_up < 0.6, "ascending %.3f", worst_up);
}

Test(order, sample_seed)
{
	static struct layout l;
	struct order_params p;
	struct order *o;

	make_layout(&l, 100);
	p = params(ORDER_QUASI, 12345, 0, 1, 1, false, 0, &l);
	o = must_new(&p);
	cr_expect_eq(order_epoch(o), 0);
	order_set_epoch(o, 6);
	cr_expect_eq(order_epoch(o), 6);
	for (uint64_t g = 0; g < 100; g++)
		cr_expect_eq(order_sample_seed(o, g), rng_mix(12345, 6, g));
	order_free(o);
}

struct bad {
	const char *why;
	enum order_kind kind;
	uint32_t rank, world, bs, nshards;
	const uint64_t *rec;
};

static const uint64_t one[] = { 10 };
static const uint64_t empty[] = { 0, 0 };
static const uint64_t huge[] = { UINT64_MAX - 5, 3, 3 };

static const struct bad bads[] = {
	{ "world 0", ORDER_RANDOM, 0, 0, 1, 1, one },
	{ "rank == world", ORDER_RANDOM, 2, 2, 1, 1, one },
	{ "rank > world", ORDER_QUASI, 9, 2, 1, 1, one },
	{ "batch 0", ORDER_SEQUENTIAL, 0, 1, 0, 1, one },
	{ "no shards", ORDER_RANDOM, 0, 1, 1, 0, one },
	{ "no shard array", ORDER_RANDOM, 0, 1, 1, 1, NULL },
	{ "no samples", ORDER_QUASI, 0, 1, 1, 2, empty },
	{ "count overflow", ORDER_RANDOM, 0, 1, 1, 3, huge },
	{ "bad kind", (enum order_kind)7, 0, 1, 1, 1, one },
};

Test(order, bad_params)
{
	for (size_t i = 0; i < NELEM(bads); i++) {
		struct order_params p = {
			.kind = bads[i].kind,
			.rank = bads[i].rank,
			.world = bads[i].world,
			.batch_size = bads[i].bs,
			.nshards = bads[i].nshards,
			.shard_records = bads[i].rec,
		};
		struct order *o = (struct order *)&p;
		struct diag d = { "" };

		cr_expect_eq(order_new(&o, &p, &d), LOADER_EUSAGE, "%s",
			     bads[i].why);
		cr_expect_null(o, "%s", bads[i].why);
		cr_expect_neq(d.msg[0], '\0', "%s: no message", bads[i].why);
		/* A NULL diag is fine too. */
		cr_expect_eq(order_new(&o, &p, NULL), LOADER_EUSAGE, "%s",
			     bads[i].why);
	}
	order_free(NULL);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* 2^40 samples in one shard: nothing grows with N, answers stay in range. */
Test(order, huge)
{
	static const uint64_t rec[] = { 1ull << 40 };
	enum { M = 4096 };
	static uint64_t got[M];

	for (size_t v = 0; v < NELEM(variants); v++) {
		struct order_params p = {
			.kind = variants[v].kind,
			.seed = 99,
			.rank = 5,
			.world = 8,
			.batch_size = 256,
			.window = variants[v].window,
			.nshards = 1,
			.shard_records = rec,
		};
		struct order *o = must_new(&p);

		cr_expect_eq(order_batches(o), (1ull << 37) / 256);
		cr_expect_eq(order_batch_count(o, order_batches(o) - 1), 256);
		for (unsigned i = 0; i < M; i++) {
			got[i] = order_sample(o, i / 256, i % 256);
			CHECK(got[i] < rec[0], "%s: %llu", kind_name[p.kind],
			      (unsigned long long)got[i]);
		}
		/* And at the far end of the epoch. */
		for (uint32_t k = 0; k < 256; k++)
			CHECK(order_sample(o, order_batches(o) - 1, k) < rec[0],
			      "%s: last batch", kind_name[p.kind]);
		qsort(got, M, sizeof(got[0]), u64_cmp);
		for (unsigned i = 1; i < M; i++)
			CHECK(got[i] != got[i - 1], "%s: %llu twice",
			      kind_name[p.kind], (unsigned long long)got[i]);
		order_free(o);
	}
}

/*
 * Elastic resume. A job runs with one world, every rank stops a few
 * batches from the others (some across an epoch's end), the job goes on
 * with another world from the plan, stops again, and a third world runs
 * to the end: every sample of every epoch is delivered exactly once
 * (dropping: at most once, and only fewer than w * B per world short
 * per epoch), every rank of a world has the same batches, and the plan
 * is what the next world resumes from.
 */
#define EL_EPOCHS 3

struct el_world {
	uint32_t world;
	bool pad;
	struct order **o;
	struct order_sched sched;
	uint32_t *epoch; /* where each rank stops (its first batch not run) */
	uint64_t *batch;
};

static uint64_t el_rand(uint64_t *x)
{
	return rng_mix(++*x, 0x51ed, 0);
}

/* Make world w's orders from p with the plan; all must agree on it. */
static void el_make(struct el_world *ew, const struct order_params *tmpl,
		    uint32_t w, const uint64_t *plan, size_t words)
{
	struct order_params p = *tmpl;

	ew->world = w;
	ew->o = calloc(w, sizeof(*ew->o));
	ew->epoch = calloc(w, sizeof(*ew->epoch));
	ew->batch = calloc(w, sizeof(*ew->batch));
	cr_assert(ew->o && ew->epoch && ew->batch);
	p.world = w;
	p.plan = plan;
	p.plan_words = words;
	ew->pad = p.pad && !p.drop_last;
	for (uint32_t r = 0; r < w; r++) {
		struct order_sched s;

		p.rank = r;
		ew->o[r] = must_new(&p);
		order_schedule(ew->o[r], &s);
		if (r == 0)
			ew->sched = s;
		/* Equal batch counts: every rank's epochs start alike. */
		CHECK(!memcmp(&s, &ew->sched, sizeof(s)),
		      "rank %u of %u: another schedule", r, w);
	}
}

static void el_free(struct el_world *ew)
{
	for (uint32_t r = 0; r < ew->world; r++)
		order_free(ew->o[r]);
	free(ew->o);
	free(ew->epoch);
	free(ew->batch);
}

/* Rank 0's count of batch b of epoch e: padded, every rank's. */
static uint32_t last_count(struct el_world *ew, uint32_t e, uint64_t b)
{
	if (order_epoch(ew->o[0]) != e)
		order_set_epoch(ew->o[0], e);
	return order_batch_count(ew->o[0], b);
}

/*
 * Run world ew from (e0, b0) for about t batches a rank (each rank a
 * little more or less, up to spread; t = UINT64_MAX: to the end of
 * EL_EPOCHS), counting deliveries in seen[epoch * n + g].
 */
static void el_run(struct el_world *ew, uint32_t e0, uint64_t b0, uint64_t t,
		   unsigned spread, uint64_t *rnd, unsigned char *seen,
		   uint64_t n)
{
	for (uint32_t r = 0; r < ew->world; r++) {
		struct order *o = ew->o[r];
		uint32_t e = e0;
		uint64_t b = b0, run = t;

		if (t != UINT64_MAX && spread) {
			uint64_t d = el_rand(rnd) % (2 * spread + 1);

			run = t + d >= spread ? t + d - spread : 0;
		}
		order_advance(&ew->sched, &e, &b, 0);
		if (!ew->sched.batches)
			run = 0; /* dropping, a world too large has no batch */
		for (uint64_t i = 0; i < run && e < EL_EPOCHS; i++) {
			uint32_t cnt, rep;

			if (order_epoch(o) != e)
				order_set_epoch(o, e);
			cnt = order_batch_count(o, b);
			CHECK(cnt <= order_batch_count(
					     o, order_first_batch(o, e)) ||
				      !order_batch_count(
					      o, order_first_batch(o, e)),
			      "batch %llu larger than the epoch's first",
			      (unsigned long long)b);
			rep = order_repeats(o, b);
			CHECK(cnt == last_count(ew, e, b) ||
				      b + 1 < ew->sched.batches || !ew->pad,
			      "padded: rank %u's last batch of epoch %u has %u",
			      r, e, cnt);
			for (uint32_t k = 0; k < cnt; k++) {
				uint64_t g = order_sample(o, b, k);

				if (k >= cnt - rep) { /* padding */
					CHECK(g < n, "a repeat %llu",
					      (unsigned long long)g);
					continue;
				}
				CHECK(g < n,
				      "rank %u epoch %u batch %llu: %llu", r, e,
				      (unsigned long long)b,
				      (unsigned long long)g);
				if (g < n && seen[(uint64_t)e * n + g] < 255)
					seen[(uint64_t)e * n + g]++;
			}
			order_advance(&ew->sched, &e, &b, 1);
		}
		ew->epoch[r] = e;
		ew->batch[r] = b;
	}
}

static void el_replan(struct el_world *ew, uint64_t **plan, size_t *words,
		      uint32_t *from)
{
	struct diag d = { "" };
	int err;

	free(*plan);
	err = order_replan(ew->o[0], ew->epoch, ew->batch, plan, words, from,
			   &d);
	cr_assert_eq(err, 0, "order_replan: %d %s", err, d.msg);
}

static void el_case(enum order_kind kind, uint64_t n, uint32_t bs, bool drop,
		    const uint32_t ws[3], uint64_t seed, bool pad)
{
	static struct layout l;
	struct order_params p;
	struct el_world a, b, c;
	unsigned char *seen = calloc(EL_EPOCHS * n, 1);
	uint64_t *plan = NULL, rnd = seed, t, short_by = 0;
	size_t words = 0;
	uint32_t from;

	cr_assert(seen);
	make_layout(&l, n);
	p = params(kind, seed, 0, 1, bs, drop, 64, &l);
	p.pad = pad;
	el_make(&a, &p, ws[0], NULL, 0);
	t = el_rand(&rnd) % (2 * a.sched.batches + 1);
	el_run(&a, 0, 0, t, 2, &rnd, seen, n);
	el_replan(&a, &plan, &words, &from);

	el_make(&b, &p, ws[1], plan, words);
	t = el_rand(&rnd) % (a.sched.batches + 2);
	el_run(&b, from, order_first_batch(b.o[0], from), t, 3, &rnd, seen, n);
	el_replan(&b, &plan, &words, &from);

	el_make(&c, &p, ws[2], plan, words);
	el_run(&c, from, order_first_batch(c.o[0], from), UINT64_MAX, 0, &rnd,
	       seen, n);
	/* Dropping, each world may leave fewer than w * B per epoch. */
	if (drop)
		short_by = (uint64_t)(ws[0] + ws[1] + ws[2]) * bs;
	for (uint32_t e = 0; e < EL_EPOCHS; e++) {
		uint64_t once = 0;

		for (uint64_t g = 0; g < n; g++) {
			unsigned char s = seen[(uint64_t)e * n + g];

			CHECK(s <= 1,
			      "%s n=%llu B=%u drop=%d %u>%u>%u: epoch %u sample %llu %u times",
			      kind_name[kind], (unsigned long long)n, bs, drop,
			      ws[0], ws[1], ws[2], e, (unsigned long long)g, s);
			once += s == 1;
		}
		CHECK(once + short_by >= n && (drop || once == n),
		      "%s n=%llu B=%u drop=%d %u>%u>%u: epoch %u has %llu of %llu",
		      kind_name[kind], (unsigned long long)n, bs, drop, ws[0],
		      ws[1], ws[2], e, (unsigned long long)once,
		      (unsigned long long)n);
	}
	el_free(&a);
	el_free(&b);
	el_free(&c);
	free(plan);
	free(seen);
}

Test(order, elastic)
{
	static const uint32_t seqs[][3] = {
		{ 4, 3, 5 }, { 1, 2, 1 }, { 8, 3, 2 }, { 3, 3, 7 }, { 2, 5, 5 },
	};
	static const uint64_t ns[] = { 1, 7, 100, 1000, 4097 };
	static const uint32_t bss[] = { 1, 5, 64 };

	for (int kind = 0; kind < 3; kind++)
		for (size_t ni = 0; ni < NELEM(ns); ni++)
			for (size_t bi = 0; bi < NELEM(bss); bi++)
				for (size_t si = 0; si < NELEM(seqs); si++)
					for (uint64_t seed = 1; seed <= 3;
					     seed++) {
						el_case(kind, ns[ni], bss[bi],
							false, seqs[si], seed,
							false);
						el_case(kind, ns[ni], bss[bi],
							true, seqs[si], seed,
							false);
						el_case(kind, ns[ni], bss[bi],
							false, seqs[si], seed,
							true);
					}
}

/* A resumed epoch's batches are the last ones, numbered as such. */
Test(order, elastic_numbering)
{
	static struct layout l;
	struct order_params p;
	struct order *o;
	uint32_t ep[4] = { 1, 1, 1, 1 }, from;
	uint64_t bt[4] = { 10, 10, 11, 8 }, *plan = NULL;
	size_t words;
	struct diag d = { "" };
	struct order_sched s;
	uint32_t e;
	uint64_t b;

	make_layout(&l, 1000);
	p = params(ORDER_RANDOM, 5, 0, 4, 10, false, 0, &l);
	o = must_new(&p); /* 25 batches an epoch */
	cr_assert_eq(order_replan(o, ep, bt, &plan, &words, &from, &d), 0);
	order_free(o);
	cr_expect_eq(from, 1);
	cr_expect_eq(plan[0], 1, "one stage");
	cr_expect_eq(plan[1], 1 | (4ull << 32));
	cr_expect_eq(plan[2], 100);
	cr_expect_eq(plan[4], 110);
	cr_expect_eq(plan[5], 80);
	cr_expect_eq(words, 6);
	/* 1000 - 390 = 610 left, to 3 ranks: 204, 203, 203: 21 batches */
	p.world = 3;
	p.rank = 2;
	p.plan = plan;
	p.plan_words = words;
	o = must_new(&p);
	cr_expect_eq(order_batches(o), 34);
	cr_expect_eq(order_first_batch(o, 1), 13);
	cr_expect_eq(order_first_batch(o, 0), 0);
	cr_expect_eq(order_first_batch(o, 2), 0);
	order_set_epoch(o, 1);
	cr_expect_eq(order_batch_count(o, 12), 0);
	cr_expect_eq(order_batch_count(o, 13), 10);
	cr_expect_eq(order_batch_count(o, 33), 3, "203 = 20 * 10 + 3");
	cr_expect_eq(order_sample(o, 12, 0), UINT64_MAX);
	cr_expect_eq(order_sample(o, 33, 3), UINT64_MAX);
	cr_expect_lt(order_sample(o, 33, 2), 1000);
	order_schedule(o, &s);
	e = 1;
	b = 0;
	order_advance(&s, &e, &b, 0);
	cr_expect(e == 1 && b == 13, "start of the rest: %u %llu", e,
		  (unsigned long long)b);
	order_advance(&s, &e, &b, 21);
	cr_expect(e == 2 && b == 0, "after the rest: %u %llu", e,
		  (unsigned long long)b);
	order_advance(&s, &e, &b, 34 * 5 + 3);
	cr_expect(e == 7 && b == 3, "whole epochs later: %u %llu", e,
		  (unsigned long long)b);
	order_free(o);
	free(plan);
}

/* Plans that do not parse, or ranks too far apart, are refused. */
Test(order, elastic_refused)
{
	static struct layout l;
	struct order_params p;
	struct order *o = NULL;
	struct diag d = { "" };
	uint64_t bad1[] = { 2, 1 | (2ull << 32), 0, 0 };
	uint64_t bad2[] = { 1, 1 | (3ull << 32), 0, 0 };
	uint64_t bad3[] = { 2, 2 | (1ull << 32), 0, 1 | (1ull << 32), 0 };
	uint64_t five[] = { 5, 0 | (1ull << 32), 1, 1 | (1ull << 32),
			    1, 2 | (1ull << 32), 1, 3 | (1ull << 32),
			    1, 4 | (1ull << 32), 1 };
	uint32_t ep[2] = { 0, 4 }, from;
	uint64_t bt[2] = { 0, 0 }, *plan;
	size_t words;

	make_layout(&l, 100);
	p = params(ORDER_RANDOM, 5, 0, 2, 10, false, 0, &l);
	p.plan = bad1;
	p.plan_words = NELEM(bad1);
	cr_expect_eq(order_new(&o, &p, &d), LOADER_EUSAGE, "stages missing");
	cr_expect(strstr(d.msg, "do not parse"), "%s", d.msg);
	p.plan = bad2;
	p.plan_words = NELEM(bad2);
	cr_expect_eq(order_new(&o, &p, &d), LOADER_EUSAGE, "short stage");
	p.plan = bad3;
	p.plan_words = NELEM(bad3);
	cr_expect_eq(order_new(&o, &p, &d), LOADER_EUSAGE, "epochs backwards");
	p.plan = five;
	p.plan_words = NELEM(five);
	cr_expect_eq(order_new(&o, &p, &d), LOADER_EUSAGE, "five epochs");
	cr_expect(strstr(d.msg, "more than 4 epochs"), "%s", d.msg);
	cr_expect_null(o);
	p.plan = NULL;
	o = must_new(&p);
	cr_expect_eq(order_replan(o, ep, bt, &plan, &words, &from, &d),
		     LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "4 epochs apart"), "%s", d.msg);
	order_free(o);
}
