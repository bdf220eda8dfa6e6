/*
 * test_state.c - the daemon's LMDB state (daemon/state.c): jobs per uid
 * and name with a position per rank, positions that never move back,
 * generations (a renewed job drops the old positions; ranks that begin
 * the same renewal together join it; a write of a gone generation is
 * refused; a renewal to the record already there keeps it), the job's
 * from_id, records of versions 2 and 4 still read, plans and a
 * mixture's weights kept, forget,
 * listing, expiry, names refused, and an
 * unreadable file moved aside with a fresh one made in its place.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <lmdb.h>

#include "loader_error.h"
#include "state.h"
#include "../unit_util.h"

static char dir[4096];
static struct state *st;

static void setup(void)
{
	struct diag d = { "" };

	ut_tmpl(dir, sizeof(dir), "test_state");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(state_open(&st, dir, &d), 0, "%s", d.msg);
}

static int rm_one(const char *path, const struct stat *s, int flag,
		  struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	state_close(st);
	st = NULL;
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static struct state_job job(uint32_t world)
{
	return (struct state_job){ .dataset_id = 0x1234,
				   .opts_id = 0x5678,
				   .batches_per_epoch = 100,
				   .world = world,
				   .epochs = 3,
				   .updated_ms = 5000 };
}

static struct state_pos pos(uint64_t gen, uint32_t epoch, uint64_t batch)
{
	return (struct state_pos){ .generation = gen,
				   .epoch = epoch,
				   .batch = batch,
				   .updated_ms = 5000 };
}

/* Begin rank of uid's name (renewing) at (epoch, batch); its generation. */
static uint64_t begin(uint32_t uid, const char *name, struct state_job *j,
		      bool renew, uint32_t rank, uint32_t epoch, uint64_t batch)
{
	struct state_pos p = pos(0, epoch, batch);
	struct diag d = { "" };
	uint64_t gen = 0;

	cr_assert_eq(state_begin(st, uid, name, j, renew, rank, &p, &gen, &d),
		     0, "%s", d.msg);
	return gen;
}

Test(state, job_and_positions_per_uid, .init = setup, .fini = teardown)
{
	struct state_job j = job(2), got;
	struct state_pos p;
	struct diag d = { "" };
	uint64_t gen;

	gen = begin(1000, "job", &j, true, 0, 1, 42);
	cr_expect_eq(gen, 1);
	j.generation = gen;
	cr_expect_eq(begin(1000, "job", &j, false, 1, 1, 40), 1);
	cr_assert_eq(state_get_job(st, 1000, "job", &got, NULL, &d), 0, "%s",
		     d.msg);
	cr_expect(got.dataset_id == 0x1234 && got.opts_id == 0x5678 &&
		  got.world == 2 && got.generation == 1 && !got.plan);
	state_job_clear(&got);
	cr_assert_eq(state_get_pos(st, 1000, "job", 0, 1, &p, &d), 0);
	cr_expect(p.epoch == 1 && p.batch == 42);
	cr_assert_eq(state_get_pos(st, 1000, "job", 1, 1, &p, &d), 0);
	cr_expect(p.epoch == 1 && p.batch == 40);
	cr_expect_eq(state_get_pos(st, 1000, "job", 2, 1, &p, &d), -ENOENT);
	cr_expect_eq(state_get_pos(st, 1000, "job", 0, 2, &p, &d), -ENOENT,
		     "another generation's");
	cr_expect_eq(state_get_job(st, 1001, "job", &got, NULL, &d), -ENOENT,
		     "another uid sees nothing");
	cr_expect_eq(state_get_job(st, 1000, "jo", &got, NULL, &d), -ENOENT);
	{
		struct state_pos *all;

		cr_assert_eq(state_get_job(st, 1000, "job", &got, &all, &d), 0);
		cr_expect(all[0].generation == 1 && all[0].batch == 42 &&
				  all[1].generation == 1 && all[1].batch == 40,
			  "the positions of every rank, with the job");
		free(all);
		state_job_clear(&got);
	}
}

Test(state, monotonic, .init = setup, .fini = teardown)
{
	struct state_job j = job(1);
	struct state_pos p, got;
	struct diag d = { "" };
	uint64_t gen = begin(1, "j", &j, true, 0, 1, 50);

	p = pos(gen, 1, 60);
	cr_assert_eq(state_put_pos(st, 1, "j", 0, &p, &d), 0, "%s", d.msg);
	p.batch = 55; /* a checkpoint written late */
	cr_assert_eq(state_put_pos(st, 1, "j", 0, &p, &d), 0);
	cr_assert_eq(state_get_pos(st, 1, "j", 0, gen, &got, &d), 0);
	cr_expect_eq(got.batch, 60, "never moved back");
	p.epoch = 2;
	p.batch = 0;
	p.finished = true;
	cr_assert_eq(state_put_pos(st, 1, "j", 0, &p, &d), 0);
	cr_assert_eq(state_get_pos(st, 1, "j", 0, gen, &got, &d), 0);
	cr_expect(got.epoch == 2 && got.batch == 0 && got.finished);
	/* Beginning again (a resume, or a fresh start) writes over. */
	j.generation = gen;
	begin(1, "j", &j, false, 0, 0, 0);
	cr_assert_eq(state_get_pos(st, 1, "j", 0, gen, &got, &d), 0);
	cr_expect(got.epoch == 0 && got.batch == 0 && !got.finished);
}

Test(state, generations, .init = setup, .fini = teardown)
{
	uint64_t plan[] = { 1, 1 | (2ull << 32), 30, 40 }, g1, g2;
	struct state_job j = job(2), j3, got;
	struct state_pos p;
	struct diag d = { "" };

	g1 = begin(5, "e", &j, true, 0, 1, 3);
	j.generation = g1;
	begin(5, "e", &j, false, 1, 1, 4);
	/* World 3 goes on: a new generation with the plan. */
	j3 = job(3);
	j3.generation = g1;
	j3.plan = plan;
	j3.plan_words = 4;
	j3.start_epoch = 1;
	j3.start_batch = 9;
	g2 = begin(5, "e", &j3, true, 2, 1, 9);
	cr_expect_eq(g2, g1 + 1);
	cr_expect_eq(state_get_pos(st, 5, "e", 1, g1, &p, &d), -ENOENT,
		     "the old positions went with the old record");
	cr_expect_eq(state_get_pos(st, 5, "e", 0, g2, &p, &d), -ENOENT);
	cr_assert_eq(state_get_pos(st, 5, "e", 2, g2, &p, &d), 0);
	cr_assert_eq(state_get_job(st, 5, "e", &got, NULL, &d), 0);
	cr_expect(got.world == 3 && got.plan_words == 4 &&
		  !memcmp(got.plan, plan, sizeof(plan)) &&
		  got.start_batch == 9);
	state_job_clear(&got);
	/* Another rank of world 3 that read the old record joins. */
	cr_expect_eq(begin(5, "e", &j3, true, 0, 1, 9), g2);
	cr_assert_eq(state_get_pos(st, 5, "e", 2, g2, &p, &d), 0,
		     "and drops nobody's position");
	/* One that renews differently is told to open again. */
	j3.plan_words = 0;
	p = pos(0, 0, 0);
	cr_expect_eq(state_begin(st, 5, "e", &j3, true, 1, &p, &g2, &d),
		     -EAGAIN);
	cr_expect(strstr(d.msg, "open again"), "%s", d.msg);
	/* A checkpoint of the old generation is dropped, loudly. */
	p = pos(g1, 2, 0);
	cr_expect_eq(state_put_pos(st, 5, "e", 0, &p, &d), -ESTALE);
	cr_expect(strstr(d.msg, "not saved"), "%s", d.msg);
}

Test(state, renew_same_and_from_id, .init = setup, .fini = teardown)
{
	struct state_job j = job(4), k, got;
	struct state_pos p;
	struct diag d = { "" };
	uint64_t g1, g2;

	j.from_id = 0xabcdef;
	j.start_epoch = 1;
	g1 = begin(6, "f", &j, true, 0, 1, 0);
	cr_assert_eq(state_get_job(st, 6, "f", &got, NULL, &d), 0);
	cr_expect_eq(got.from_id, 0xabcdef, "from_id kept");
	state_job_clear(&got);
	/* A rank that read the renewed record renews it to the same. */
	j.generation = g1;
	cr_expect_eq(begin(6, "f", &j, true, 1, 1, 0), g1,
		     "renewing to the record there changes nothing");
	cr_expect_eq(state_get_pos(st, 6, "f", 0, g1, &p, &d), 0,
		     "and drops nobody's position");
	/* From other positions it is another job. */
	k = j;
	k.from_id = 0x123;
	g2 = begin(6, "f", &k, true, 2, 1, 0);
	cr_expect_eq(g2, g1 + 1);
	cr_expect_eq(state_get_pos(st, 6, "f", 0, g2, &p, &d), -ENOENT);
}

/*
 * Close the state, put value v under key k as an older loaderd wrote
 * it, and open the state again.
 */
static void put_raw(MDB_val *k, MDB_val *v)
{
	char path[4200];
	struct diag d = { "" };
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;

	state_close(st);
	st = NULL;
	snprintf(path, sizeof(path), "%s/loaderd.mdb", dir);
	cr_assert_eq(mdb_env_create(&env), 0);
	cr_assert_eq(mdb_env_set_mapsize(env, 1 << 20), 0);
	cr_assert_eq(mdb_env_open(env, path, MDB_NOSUBDIR, 0600), 0);
	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	cr_assert_eq(mdb_put(txn, dbi, k, v, 0), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	cr_assert_eq(state_open(&st, dir, &d), 0, "%s", d.msg);
}

/* A job's record as loaderd wrote it before from_id (version 2). */
Test(state, record_version_2_read, .init = setup, .fini = teardown)
{
	struct {
		uint32_t version, world;
		uint64_t dataset_id, opts_id, generation, bpe;
		uint32_t epochs, start_epoch;
		uint64_t start_batch, updated_ms, plan_words;
		uint64_t plan[4];
	} v2 = { 2, 3, 0x1234, 0x5678, 7, 100,
		 3, 1, 9,      5000,   4, { 1, 1 | (2ull << 32), 30, 40 } };
	MDB_val k = { 4, "6/v2" }, v = { sizeof(v2), &v2 };
	struct state_job got;
	struct diag d = { "" };

	put_raw(&k, &v);
	cr_assert_eq(state_get_job(st, 6, "v2", &got, NULL, &d), 0, "%s",
		     d.msg);
	cr_expect(got.world == 3 && got.generation == 7 &&
		  got.start_batch == 9 && got.plan_words == 4 &&
		  got.plan[3] == 40 && got.from_id == 0);
	state_job_clear(&got);
}

/*
 * A mixture's weights are kept (version 5) beside a plan, with the
 * earlier weights and where the new ones begin; a rank that changes
 * them (not renewing) rewrites the record and keeps the positions.
 */
Test(state, weights_kept, .init = setup, .fini = teardown)
{
	struct mixture_weights a = { .n = 2,
				     .epoch_size = 20000,
				     .how = { MIXTURE_PROPORTION,
					      MIXTURE_PROPORTION },
				     .value = { 0.6, 0.4 } },
			       b = { .n = 3,
				     .how = { MIXTURE_REPEAT, MIXTURE_CHOOSE,
					      MIXTURE_REPEAT },
				     .value = { 1, 5000, 0.25 } };
	uint64_t plan[4] = { 1, 1 | (2ull << 32), 30, 40 };
	struct state_job j = job(2), got;
	struct state_pos p;
	struct diag d = { "" };
	uint64_t g;

	j.mix_id = 7;
	j.weights = a;
	j.plan = plan;
	j.plan_words = 4;
	g = begin(6, "w", &j, true, 0, 0, 0);
	cr_assert_eq(state_get_job(st, 6, "w", &got, NULL, &d), 0, "%s", d.msg);
	cr_expect(state_weights_equal(&got.weights, &a), "weights kept");
	cr_expect(got.counts_from == 0 && got.before.n == 0);
	cr_expect(got.plan_words == 4 && got.plan[3] == 40, "plan kept");
	state_job_clear(&got);
	j.generation = g;
	begin(6, "w", &j, false, 1, 0, 7);
	/* Rank 1 changes them from epoch 2: the record says so. */
	j.mix_id = 8;
	j.before = a;
	j.before_batches = 100;
	j.weights = b;
	j.counts_from = 2;
	j.batches_per_epoch = 75;
	cr_expect_eq(begin(6, "w", &j, false, 1, 0, 9), g, "same generation");
	cr_assert_eq(state_get_job(st, 6, "w", &got, NULL, &d), 0, "%s", d.msg);
	cr_expect(got.mix_id == 8 && got.counts_from == 2 &&
			  got.before_batches == 100 &&
			  got.batches_per_epoch == 75,
		  "the change kept");
	cr_expect(got.plan_words == 4 && got.plan[3] == 40, "plan kept");
	cr_expect(state_weights_equal(&got.weights, &b), "new weights");
	cr_expect(state_weights_equal(&got.before, &a), "earlier weights");
	cr_expect(!state_weights_equal(&a, &b));
	state_job_clear(&got);
	cr_expect_eq(state_get_pos(st, 6, "w", 0, g, &p, &d), 0,
		     "rank 0's position kept");
}

/* A record of version 4 (a mixture's counts' digest, no weights) is read. */
Test(state, record_version_4_read, .init = setup, .fini = teardown)
{
	struct {
		uint32_t version, world;
		uint64_t dataset_id, opts_id, generation, bpe;
		uint32_t epochs, start_epoch;
		uint64_t start_batch, updated_ms, plan_words, from_id, mix_id;
	} v4 = { 4, 1, 0x1234, 0x5678, 7, 100, 3, 0, 0, 5000, 0, 0, 99 };
	MDB_val k = { 4, "6/v4" }, v = { sizeof(v4), &v4 };
	struct state_job got;
	struct diag d = { "" };

	put_raw(&k, &v);
	cr_assert_eq(state_get_job(st, 6, "v4", &got, NULL, &d), 0, "%s",
		     d.msg);
	cr_expect(got.mix_id == 99 && got.weights.n == 0 &&
		  got.counts_from == 0 && got.generation == 7);
	state_job_clear(&got);
}

/*
 * Records of version 5 whose weights cannot be: more members than a
 * mixture has, a kind that is none of the three, a size that is not the
 * weights' are refused as records this version cannot read.
 */
Test(state, record_version_5_refused, .init = setup, .fini = teardown)
{
	struct rec5 {
		uint32_t version, world;
		uint64_t dataset_id, opts_id, generation, bpe;
		uint32_t epochs, start_epoch;
		uint64_t start_batch, updated_ms, plan_words, from_id, mix_id;
		uint32_t counts_from;
		uint16_t nweights, nbefore;
		uint64_t before_batches;
		uint64_t epoch_size;
		struct {
			uint32_t how, pad;
			double value;
		} w[MIXTURE_MAX_MEMBERS + 1];
	} r;
	const struct {
		const char *key;
		uint16_t n;
		uint32_t how;
		size_t cut;
	} t[] = {
		{ "6/good", 2, MIXTURE_CHOOSE, 0 },
		{ "6/many", MIXTURE_MAX_MEMBERS + 1, MIXTURE_REPEAT, 0 },
		{ "6/kind", 2, 3, 0 },
		{ "6/short", 2, MIXTURE_REPEAT, 1 },
	};
	struct state_job got;
	struct diag d = { "" };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		MDB_val k = { strlen(t[i].key), (void *)t[i].key }, v;

		memset(&r, 0, sizeof(r));
		r.version = 5;
		r.world = 1;
		r.generation = 3;
		r.mix_id = 9;
		r.nweights = t[i].n;
		for (uint32_t m = 0; m < t[i].n; m++) {
			r.w[m].how = t[i].how;
			r.w[m].value = 2;
		}
		v.mv_size = offsetof(struct rec5, w) + t[i].n * sizeof(r.w[0]) -
			    t[i].cut;
		v.mv_data = &r;
		put_raw(&k, &v);
	}
	cr_assert_eq(state_get_job(st, 6, "good", &got, NULL, &d), 0, "%s",
		     d.msg);
	cr_expect(got.weights.n == 2 && got.weights.how[1] == MIXTURE_CHOOSE &&
		  got.weights.value[1] == 2);
	state_job_clear(&got);
	cr_expect_eq(state_get_job(st, 6, "many", &got, NULL, &d),
		     LOADER_EFORMAT, "33 members");
	cr_expect_eq(state_get_job(st, 6, "kind", &got, NULL, &d),
		     LOADER_EFORMAT, "kind 3");
	cr_expect_eq(state_get_job(st, 6, "short", &got, NULL, &d),
		     LOADER_EFORMAT, "a byte short");
}

struct seen {
	char names[16][80];
	int n;
};

static int collect(void *arg, uint32_t uid, const char *name,
		   const struct state_job *j, uint32_t rank,
		   const struct state_pos *p)
{
	struct seen *s = arg;

	if (s->n < 16)
		snprintf(s->names[s->n++], 80, "%u/%s/%u of %u at %u.%llu", uid,
			 name, rank, j->world, p->epoch,
			 (unsigned long long)p->batch);
	return 0;
}

Test(state, forget_each_expire, .init = setup, .fini = teardown)
{
	struct state_job j = job(2);
	struct state_pos p;
	struct seen seen = { .n = 0 };
	struct diag d = { "" };
	uint64_t n, gen;

	gen = begin(7, "a", &j, true, 0, 0, 1);
	j.generation = gen;
	begin(7, "a", &j, false, 1, 0, 2);
	j.generation = 0;
	begin(7, "ab", &j, true, 1, 0, 3);
	begin(8, "c", &j, true, 0, 0, 4);
	cr_assert_eq(state_each(st, 7, false, collect, &seen, &d), 0);
	cr_assert_eq(seen.n, 3);
	cr_expect_str_eq(seen.names[0], "7/a/0 of 2 at 0.1");
	cr_expect_str_eq(seen.names[1], "7/a/1 of 2 at 0.2");
	cr_expect_str_eq(seen.names[2], "7/ab/1 of 2 at 0.3");
	seen.n = 0;
	cr_assert_eq(state_each(st, 0, true, collect, &seen, &d), 0);
	cr_expect_eq(seen.n, 4, "every uid's");
	cr_expect_eq(state_forget(st, 7, "a", &d), 0);
	cr_expect_eq(state_forget(st, 7, "a", &d), -ENOENT);
	cr_expect_eq(state_get_pos(st, 7, "a", 1, gen, &p, &d), -ENOENT,
		     "its positions went with it");
	seen.n = 0;
	cr_assert_eq(state_each(st, 7, false, collect, &seen, &d), 0);
	cr_expect_eq(seen.n, 1, "ab kept");
	/* A job is as old as its newest position. */
	p = pos(1, 0, 9);
	p.updated_ms = 5800;
	cr_assert_eq(state_put_pos(st, 8, "c", 0, &p, &d), 0, "%s", d.msg);
	cr_assert_eq(state_expire(st, 6000, 2000, &n, &d), 0);
	cr_expect_eq(n, 0, "nothing 2 s old");
	cr_assert_eq(state_expire(st, 6000, 500, &n, &d), 0);
	cr_expect_eq(n, 1, "ab, not c (a position of c is recent)");
	seen.n = 0;
	cr_assert_eq(state_each(st, 0, true, collect, &seen, &d), 0);
	cr_expect_eq(seen.n, 1);
	cr_expect_str_eq(seen.names[0], "8/c/0 of 2 at 0.9");
	cr_assert_eq(state_expire(st, 6000, 0, &n, &d), 0, "0: never");
	cr_expect_eq(n, 0);
}

Test(state, names_refused, .init = setup, .fini = teardown)
{
	struct state_job j = job(1);
	struct state_pos p = pos(0, 0, 0);
	struct diag d = { "" };
	char big[80];
	uint64_t gen;

	memset(big, 'x', sizeof(big));
	big[64] = '\0';
	cr_expect_eq(state_begin(st, 1, "", &j, true, 0, &p, &gen, &d),
		     LOADER_EUSAGE);
	cr_expect_eq(state_begin(st, 1, "a/b", &j, true, 0, &p, &gen, &d),
		     LOADER_EUSAGE);
	cr_expect_eq(state_begin(st, 1,
				 "a\x01"
				 "b",
				 &j, true, 0, &p, &gen, &d),
		     LOADER_EUSAGE);
	cr_expect_eq(state_begin(st, 1, big, &j, true, 0, &p, &gen, &d),
		     LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "1 to 63 bytes"), "%s", d.msg);
	big[63] = '\0';
	cr_expect_eq(state_begin(st, 1, big, &j, true, 0, &p, &gen, &d), 0,
		     "%s", d.msg);
}

Test(state, reopen_and_damage, .init = setup, .fini = teardown)
{
	struct state_job j = job(1), got;
	struct state_pos p;
	struct diag d = { "" };
	char path[4200];
	uint64_t gen;
	int fd;

	gen = begin(3, "keep", &j, true, 0, 2, 7);
	state_close(st);
	cr_assert_eq(state_open(&st, dir, &d), 0, "%s", d.msg);
	cr_assert_eq(state_get_job(st, 3, "keep", &got, NULL, &d), 0);
	state_job_clear(&got);
	cr_assert_eq(state_get_pos(st, 3, "keep", 0, gen, &p, &d), 0);
	cr_expect_eq(p.batch, 7);
	state_close(st);
	st = NULL;

	snprintf(path, sizeof(path), "%s/loaderd.mdb", dir);
	fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(write(fd, "garbage, not LMDB..............", 32),
			     32);
	close(fd);
	cr_assert_eq(state_open(&st, dir, &d), 0, "%s", d.msg);
	cr_expect_eq(state_get_job(st, 3, "keep", &got, NULL, &d), -ENOENT,
		     "a fresh file");
	begin(3, "keep", &j, true, 0, 0, 0);
	{
		char cmd[4400];

		snprintf(cmd, sizeof(cmd),
			 "ls %s | grep -q '^loaderd.mdb.bad-[0-9]*$'", dir);
		cr_expect_eq(system(cmd), 0, "the old file was moved aside");
	}
}

/* uid's use, asserted readable. */
static void use(uint32_t uid, uint32_t *names, uint64_t *bytes)
{
	struct diag d = { "" };

	cr_assert_eq(state_use(st, uid, names, bytes, &d), 0, "%s", d.msg);
}

Test(state, quota_names, .init = setup, .fini = teardown)
{
	struct state_job j = job(2);
	struct state_pos p = pos(0, 0, 0);
	struct diag d = { "" };
	uint32_t names;
	uint64_t bytes, gen;

	state_set_limits(st, 2, 0);
	gen = begin(7, "a", &j, true, 0, 0, 1);
	begin(7, "b", &j, true, 0, 0, 1);
	cr_expect_eq(state_begin(st, 7, "c", &j, true, 0, &p, &gen, &d),
		     -EDQUOT, "a third name of uid 7");
	cr_expect(strstr(d.msg, "max-uid-names (2)") &&
			  strstr(d.msg, "uid 7 holds 2"),
		  "%s", d.msg);
	{
		struct state_job got;

		cr_expect_eq(state_get_job(st, 7, "c", &got, NULL, &d), -ENOENT,
			     "nothing written");
	}
	begin(8, "c", &j, true, 0, 0, 1);
	j.generation = 1;
	begin(7, "a", &j, false, 1, 0, 2);
	j.generation = 0;
	use(7, &names, &bytes);
	cr_expect_eq(names, 2, "another rank of a name is no new name");
	cr_expect(bytes > 0);
	cr_assert_eq(state_forget(st, 7, "a", &d), 0, "%s", d.msg);
	use(7, &names, &bytes);
	cr_expect_eq(names, 1);
	begin(7, "c", &j, true, 0, 0, 1);
	state_set_limits(st, 1, 0);
	cr_expect_eq(state_forget(st, 7, "b", &d), 0,
		     "past a lowered limit: forgetting still works");
	use(8, &names, &bytes);
	cr_expect_eq(names, 1, "uid 8 counted apart");
}

Test(state, quota_bytes, .init = setup, .fini = teardown)
{
	uint64_t plan[256] = { 1 };
	struct state_job j = job(1), big = job(1), got;
	struct state_pos p = pos(0, 0, 0);
	struct diag d = { "" };
	uint32_t names;
	uint64_t bytes, gen, held;

	big.plan = plan;
	big.plan_words = 256;
	begin(7, "small", &j, true, 0, 0, 1);
	use(7, &names, &bytes);
	cr_expect_eq(names, 1);
	held = bytes;
	cr_expect(held > sizeof(uint64_t) * 8 && held < 400,
		  "a job and a position: %llu bytes", (unsigned long long)held);
	state_set_limits(st, 0, held + 1024);
	cr_expect_eq(state_begin(st, 7, "big", &big, true, 0, &p, &gen, &d),
		     -EDQUOT, "a plan of 2 KiB past the limit");
	cr_expect(strstr(d.msg, "stream \"big\"") &&
			  strstr(d.msg, "max-uid-state"),
		  "%s", d.msg);
	cr_expect_eq(state_get_job(st, 7, "big", &got, NULL, &d), -ENOENT);
	use(7, &names, &bytes);
	cr_expect(names == 1 && bytes == held, "the refused change left none");
	p = pos(0, 0, 0);
	cr_expect_eq(state_begin(st, 8, "small", &j, true, 0, &p, &gen, &d), 0,
		     "uid 8 has its own room: %s", d.msg);
	/* A position written over is no growth: at the limit it passes. */
	state_set_limits(st, 0, held);
	p = pos(1, 0, 5);
	cr_expect_eq(state_put_pos(st, 7, "small", 0, &p, &d), 0, "%s", d.msg);
	cr_expect_eq(state_put_pos(st, 7, "small", 1, &p, &d), -EDQUOT,
		     "a new position is");
	use(7, &names, &bytes);
	cr_expect_eq(bytes, held);
	/* Shrinking, forgetting and expiry bring the count back to 0. */
	cr_assert_eq(state_forget(st, 7, "small", &d), 0, "%s", d.msg);
	use(7, &names, &bytes);
	cr_expect(names == 0 && bytes == 0, "%u %llu", names,
		  (unsigned long long)bytes);
}

/* Delete every "\0use..." record, as a file of an older loaderd has none. */
static void drop_use_records(void)
{
	char path[4200];
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_cursor *c;
	MDB_val k, v;
	int n = 0;

	state_close(st);
	st = NULL;
	snprintf(path, sizeof(path), "%s/loaderd.mdb", dir);
	cr_assert_eq(mdb_env_create(&env), 0);
	cr_assert_eq(mdb_env_set_mapsize(env, 4ull << 30), 0);
	cr_assert_eq(mdb_env_open(env, path, MDB_NOSUBDIR, 0600), 0);
	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	cr_assert_eq(mdb_cursor_open(txn, dbi, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size >= 4 && !memcmp(k.mv_data, "\0use", 4)) {
			cr_assert_eq(mdb_cursor_del(c, 0), 0);
			n++;
		}
	/* And an index an older loaderd kept, under no uid. */
	k = (MDB_val){ 13, "\0tarix/1:2:34" };
	v = (MDB_val){ 3, "old" };
	cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
	mdb_cursor_close(c);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
	cr_expect(n >= 3, "the marker and two uids' use: %d", n);
}

Test(state, blobs_and_recount, .init = setup, .fini = teardown)
{
	struct state_job j = job(3);
	struct diag d = { "" };
	uint32_t n7, n9;
	uint64_t b7, b9, b7_before, n;
	size_t len;
	void *val;

	begin(7, "a", &j, true, 0, 0, 1);
	begin(7, "a", &j, true, 2, 0, 1);
	begin(9, "b", &j, true, 1, 0, 1);
	use(7, &n7, &b7_before);
	cr_assert_eq(
		state_put_blob(st, 7, "tarix", "1:2", "index", 5, 5000, &d), 0,
		"%s", d.msg);
	use(7, &n7, &b7);
	cr_expect(n7 == 1 && b7 > b7_before + 5, "the index is charged to 7");
	cr_expect_eq(state_get_blob(st, 9, "tarix", "1:2", &val, &len, &d),
		     -ENOENT, "another uid is never given it");
	cr_assert_eq(state_get_blob(st, 7, "tarix", "1:2", &val, &len, &d), 0);
	cr_expect(len == 5 && !memcmp(val, "index", 5));
	free(val);
	state_set_limits(st, 0, b7);
	cr_expect_eq(state_put_blob(st, 7, "tarix", "1:3", "more", 4, 5000, &d),
		     -EDQUOT, "a second index past the limit");
	state_set_limits(st, 0, 0);
	use(9, &n9, &b9);
	drop_use_records();
	cr_assert_eq(state_open(&st, dir, &d), 0, "%s", d.msg);
	{
		uint32_t a;
		uint64_t b;

		use(7, &a, &b);
		cr_expect(a == n7 && b == b7, "7 counted again: %u %llu", a,
			  (unsigned long long)b);
		use(9, &a, &b);
		cr_expect(a == n9 && b == b9, "9 counted again");
	}
	/* The blob expires as a job does; its bytes go with it. */
	cr_assert_eq(state_expire(st, 5100, 1000, &n, &d), 0, "%s", d.msg);
	cr_expect_eq(n, 0);
	cr_assert_eq(state_expire(st, 6000, 1000, &n, &d), 0, "%s", d.msg);
	cr_expect_eq(n, 3, "a, b and the index");
	use(7, &n7, &b7);
	cr_expect(n7 == 0 && b7 == 0, "%u %llu", n7, (unsigned long long)b7);
}
