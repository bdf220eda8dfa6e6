/*
 * test_state.c - the daemon's LMDB state (daemon/state.c): records per
 * uid and name, checkpoints that never move a stream back unless forced,
 * forget, listing, expiry, names refused, and an unreadable file moved
 * aside with a fresh one made in its place.
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

static struct state_rec rec(uint32_t epoch, uint64_t batch)
{
	return (struct state_rec){ .dataset_id = 0x1234, .opts_id = 0x5678,
				   .batches_per_epoch = 100, .epochs = 3,
				   .epoch = epoch, .batch = batch,
				   .updated_ms = 1000, .world = 1 };
}

Test(state, put_get_per_uid, .init = setup, .fini = teardown)
{
	struct state_rec r = rec(1, 42), got;
	struct diag d = { "" };

	cr_assert_eq(state_put(st, 1000, "job", &r, false, &d), 0, "%s", d.msg);
	cr_assert_eq(state_get(st, 1000, "job", &got, &d), 0, "%s", d.msg);
	cr_expect_eq(got.epoch, 1);
	cr_expect_eq(got.batch, 42);
	cr_expect_eq(got.dataset_id, 0x1234);
	cr_expect_eq(got.opts_id, 0x5678);
	cr_expect_eq(got.epochs, 3);
	cr_expect_eq(state_get(st, 1001, "job", &got, &d), -ENOENT,
		     "another uid does not see it");
	cr_expect_eq(state_get(st, 1000, "other", &got, &d), -ENOENT);
}

/* Checkpoints written out of order never move a stream back. */
Test(state, monotonic, .init = setup, .fini = teardown)
{
	struct state_rec r = rec(1, 50), got;
	struct diag d = { "" };

	cr_assert_eq(state_put(st, 1, "j", &r, false, &d), 0);
	r = rec(1, 40);
	cr_assert_eq(state_put(st, 1, "j", &r, false, &d), 0);
	cr_assert_eq(state_get(st, 1, "j", &got, &d), 0);
	cr_expect_eq(got.batch, 50, "an older checkpoint is not written");
	r = rec(2, 0);
	cr_assert_eq(state_put(st, 1, "j", &r, false, &d), 0);
	cr_assert_eq(state_get(st, 1, "j", &got, &d), 0);
	cr_expect_eq(got.epoch, 2);
	r = rec(0, 3);
	cr_assert_eq(state_put(st, 1, "j", &r, true, &d), 0);
	cr_assert_eq(state_get(st, 1, "j", &got, &d), 0);
	cr_expect_eq(got.epoch * 100 + got.batch, 3, "a forced one is");
	/* another identity replaces it (a fresh start of other options) */
	r = rec(0, 1);
	r.opts_id = 9;
	cr_assert_eq(state_put(st, 1, "j", &r, false, &d), 0);
	cr_assert_eq(state_get(st, 1, "j", &got, &d), 0);
	cr_expect_eq(got.opts_id, 9);
}

static int collect(void *arg, uint32_t uid, const char *name,
		   const struct state_rec *r)
{
	char *out = arg;

	sprintf(out + strlen(out), "%u/%s@%u.%llu ", uid, name, r->epoch,
		(unsigned long long)r->batch);
	return 0;
}

Test(state, forget_each_expire, .init = setup, .fini = teardown)
{
	struct state_rec r = rec(0, 1);
	struct diag d = { "" };
	char seen[512] = "";
	uint64_t n;

	cr_assert_eq(state_put(st, 7, "a", &r, false, &d), 0);
	r.updated_ms = 5000;
	cr_assert_eq(state_put(st, 7, "b", &r, false, &d), 0);
	cr_assert_eq(state_put(st, 8, "c", &r, false, &d), 0);
	cr_assert_eq(state_each(st, 7, false, collect, seen, &d), 0);
	cr_expect_str_eq(seen, "7/a@0.1 7/b@0.1 ");
	seen[0] = '\0';
	cr_assert_eq(state_each(st, 0, true, collect, seen, &d), 0);
	cr_expect_str_eq(seen, "7/a@0.1 7/b@0.1 8/c@0.1 ");
	cr_expect_eq(state_forget(st, 7, "a", &d), 0);
	cr_expect_eq(state_forget(st, 7, "a", &d), -ENOENT);
	/* now 6000: b and c (5000) are 1000 old, kept at 2000, gone at 500 */
	cr_assert_eq(state_expire(st, 6000, 2000, &n, &d), 0);
	cr_expect_eq(n, 0);
	cr_assert_eq(state_expire(st, 6000, 500, &n, &d), 0);
	cr_expect_eq(n, 2);
	seen[0] = '\0';
	cr_assert_eq(state_each(st, 0, true, collect, seen, &d), 0);
	cr_expect_str_eq(seen, "");
	cr_assert_eq(state_expire(st, 6000, 0, &n, &d), 0, "0: never");
}

Test(state, names_refused, .init = setup, .fini = teardown)
{
	struct state_rec r = rec(0, 0);
	struct diag d = { "" };
	char big[80];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_expect_eq(state_put(st, 1, "", &r, false, &d), LOADER_EUSAGE);
	cr_expect_eq(state_put(st, 1, "a/b", &r, false, &d), LOADER_EUSAGE);
	cr_expect_eq(state_put(st, 1, big, &r, false, &d), LOADER_EUSAGE);
	cr_expect(strstr(d.msg, "1 to 63 bytes"), "%s", d.msg);
	big[STATE_NAME_MAX] = '\0';
	cr_expect_eq(state_put(st, 1, big, &r, false, &d), 0, "%s", d.msg);
}

/* What survives a close, and what an unreadable file becomes. */
Test(state, reopen_and_damage, .init = setup, .fini = teardown)
{
	struct state_rec r = rec(2, 7), got;
	struct diag d = { "" };
	char path[4200];
	int fd;

	cr_assert_eq(state_put(st, 3, "keep", &r, false, &d), 0);
	state_close(st);
	cr_assert_eq(state_open(&st, dir, &d), 0, "%s", d.msg);
	cr_assert_eq(state_get(st, 3, "keep", &got, &d), 0);
	cr_expect_eq(got.batch, 7);
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
	cr_expect_eq(state_get(st, 3, "keep", &got, &d), -ENOENT,
		     "a fresh file");
	cr_expect_eq(state_put(st, 3, "keep", &r, false, &d), 0, "%s", d.msg);
	{
		char cmd[4400];

		snprintf(cmd, sizeof(cmd),
			 "ls %s | grep -q '^loaderd.mdb.bad-[0-9]*$'", dir);
		cr_expect_eq(system(cmd), 0, "the old file was moved aside");
	}
}
