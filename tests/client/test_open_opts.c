/*
 * test_open_opts.c - loader_open() and struct loader_opts: a refused
 * value comes back before it connects, with LOADER_EUSAGE and the option
 * and value as given (each refusal is tested on the OPEN message builder,
 * test_openmsg.c); and 0 still means the default. A mixture's members,
 * and a mixture file's, likewise (test_mixfile.c parses files alone).
 * No daemon: the socket path names nothing, so an accepted struct fails
 * at connect instead.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Where no daemon listens: ENOENT at connect, after every check. */
#define NO_SOCKET "/nonexistent/loaderd-test_open_opts.sock"

static int open_with(struct loader_opts *o, char *why, size_t len)
{
	struct loader *l = NULL;
	int err;

	o->socket_path = NO_SOCKET;
	err = loader_open(&l, "/nonexistent/dataset", o, why, len);
	cr_expect_null(l);
	return err;
}

/*
 * A refused value reaches the caller from loader_open() itself, before it
 * connects, with LOADER_EUSAGE and the builder's words: every refusal is
 * tested on the builder alone (test_openmsg.c); this one shows they pass
 * through.
 */
Test(open_opts, refusals_pass_through)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	char why[256];
	int err;

	o.batch_size = 65537;
	err = open_with(&o, why, sizeof(why));
	cr_expect_eq(err, LOADER_EUSAGE, "%d (%s)", err, why);
	cr_expect_str_eq(why, "batch_size 65537: at most 65536");
}

static void zeros(struct loader_opts *o)
{
	(void)o;
}

static void last_epoch(struct loader_opts *o)
{
	o->start_epoch = UINT32_MAX - 1;
	o->epochs = 1;
}

static void endless_from_the_last(struct loader_opts *o)
{
	o->start_epoch = UINT32_MAX;
	o->epochs = 0;
}

static void limits(struct loader_opts *o)
{
	o->batch_size = 65536;
	o->prefetch_bytes = 64ull << 30;
	o->ragged_bytes = 1ull << 30;
	o->reconnect_ms = INT32_MAX;
	o->ring_slots = 1024;
	o->rank = 65535;
	o->world = 65536;
	o->seed = UINT64_MAX;
	o->start_batch = UINT64_MAX;
	o->timeout_ms = -1;
}

/* 0 (the defaults) and the largest values pass every check. */
Test(open_opts, takes_zero_and_the_limits)
{
	static const struct {
		void (*set)(struct loader_opts *o);
		const char *what;
	} t[] = {
		{ zeros, "every field 0" },
		{ last_epoch, "epochs 1 from start_epoch 2^32 - 2" },
		{ endless_from_the_last, "endless from start_epoch 2^32 - 1" },
		{ limits, "every field at its limit" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_opts o = LOADER_OPTS_INIT;
		char why[256];
		int err;

		t[i].set(&o);
		err = open_with(&o, why, sizeof(why));
		cr_expect_eq(err, -ENOENT, "%s: %d (%s)", t[i].what, err, why);
		cr_expect_not_null(strstr(why, NO_SOCKET), "%s: %s", t[i].what,
				   why);
	}
}

/* ---- mixtures ------------------------------------------------------------ */

static const struct loader_member two[2] = {
	{ .dataset = "/nonexistent/a", .value = 0.7 },
	{ .dataset = "/nonexistent/b", .value = 0.3 },
};

/* Members name the datasets: dataset may be NULL, or a name. */
Test(open_opts, members_without_a_dataset)
{
	static const char *const names[] = { NULL, "my mixture" };

	for (size_t i = 0; i < NELEM(names); i++) {
		struct loader_opts o = LOADER_OPTS_INIT;
		struct loader *l = NULL;
		char why[256];
		int err;

		o.socket_path = NO_SOCKET;
		o.members = two;
		o.nmembers = 2;
		o.epoch_size = 1000;
		err = loader_open(&l, names[i], &o, why, sizeof(why));
		cr_expect_null(l);
		cr_expect_eq(err, -ENOENT, "%s: %d (%s)", names[i], err, why);
		cr_expect_not_null(strstr(why, NO_SOCKET), "%s", why);
	}
}

Test(open_opts, no_dataset_and_no_members)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct loader *l = NULL;
	char why[256];

	o.socket_path = NO_SOCKET;
	cr_expect_eq(loader_open(&l, NULL, &o, why, sizeof(why)), -EINVAL);
	cr_expect_str_eq(
		why, "loader_open: dataset is NULL, and opts has no members");
	cr_expect_eq(loader_open(&l, NULL, NULL, why, sizeof(why)), -EINVAL);
}

/* A refused member names the mixture, when it has a name. */
Test(open_opts, members_refused)
{
	struct loader_member m[2] = { two[0], two[1] };
	struct loader_opts o = LOADER_OPTS_INIT;
	char why[256];
	int err;

	o.members = m;
	o.nmembers = 2;
	m[1].how = LOADER_MIX_CHOOSE;
	err = open_with(&o, why, sizeof(why));
	cr_expect_eq(err, LOADER_EUSAGE, "%d (%s)", err, why);
	cr_expect_str_eq(
		why,
		"/nonexistent/dataset: member 1: choose 0.3: a whole number of samples, 1 to 2^48");

	o.nmembers = 33;
	err = loader_open(&(struct loader *){ NULL }, NULL, &o, why,
			  sizeof(why));
	cr_expect_eq(err, LOADER_EUSAGE, "%d (%s)", err, why);
	cr_expect_str_eq(why, "nmembers 33: a mixture has 1 to 32 members");

	o.members = NULL;
	o.nmembers = 0;
	o.epoch_size = 5;
	err = open_with(&o, why, sizeof(why));
	cr_expect_eq(err, LOADER_EUSAGE, "%d (%s)", err, why);
	cr_expect_str_eq(
		why, "epoch_size 5 without members: it sets a mixture's epoch");
}

static char tmp[64];

static void mkdir_tmp(void)
{
	strcpy(tmp, "/tmp/test_open_opts.XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
}

static void rm_tmp(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	cr_expect_eq(system(cmd), 0);
}

/* A mixture file in tmp, and loader_open() of it. */
static int open_file(const char *text, char *path, size_t plen, char *why,
		     size_t len)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct loader *l = NULL;
	FILE *f;
	int err;

	snprintf(path, plen, "%s/mix.json", tmp);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	o.socket_path = NO_SOCKET;
	err = loader_open(&l, path, &o, why, len);
	cr_expect_null(l);
	return err;
}

#define MIXFILE(members)                                                           \
	"{\"format\": \"loaderd-mixture\", \"version\": 1, \"members\": [" members \
	"]}"

/*
 * A mixture file's members are checked as options' are, the reason
 * beginning with the file; one that passes fails at connect.
 */
Test(open_opts, mixture_files, .init = mkdir_tmp, .fini = rm_tmp)
{
	static const struct {
		const char *text;
		int err;
		const char *why; /* after "PATH: " */
	} t[] = {
		{ MIXFILE("{\"path\": \"a\", \"proportion\": 0.7},"
			  " {\"path\": \"b\", \"proportion\": 0.3}"),
		  -ENOENT, NULL },
		{ MIXFILE("{\"path\": \"a\", \"proportion\": 0.7},"
			  " {\"path\": \"b\", \"repeat\": 2}"),
		  LOADER_EUSAGE,
		  "member 1: repeat beside member 0's proportion: either every member gives a proportion or none does" },
		{ MIXFILE("{\"path\": \"a\", \"choose\": 300000000000000}"),
		  LOADER_EUSAGE,
		  "member 0: choose 3e+14: a whole number of samples, 1 to 2^48" },
		{ "{\"format\": \"loaderd-mixture\", \"version\": 1,"
		  " \"epoch_size\": 10, \"members\": [{\"path\": \"a\","
		  " \"repeat\": 2}]}",
		  LOADER_EUSAGE,
		  "epoch_size 10 without proportions: members that repeat or choose give their own counts" },
		{ MIXFILE("{\"path\": \"a\", \"weight\": 2}"), LOADER_EFORMAT,
		  "member 0: unknown key \"weight\" (a member has path, proportion, repeat, choose and pipeline)" },
		{ "{\"format\": \"loaderd-dataset\", \"version\": 1}",
		  LOADER_EFORMAT,
		  "\"format\" is not \"loaderd-mixture\": not a mixture file" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		char path[128], why[512], want[512];
		int err = open_file(t[i].text, path, sizeof(path), why,
				    sizeof(why));

		cr_expect_eq(err, t[i].err, "%s: %d (%s)", t[i].text, err, why);
		if (!t[i].why) {
			cr_expect_not_null(strstr(why, NO_SOCKET), "%s", why);
			continue;
		}
		snprintf(want, sizeof(want), "%s: %s", path, t[i].why);
		cr_expect_str_eq(why, want);
	}
}

/* A mixture file gives the epoch_size, and options may not. */
Test(open_opts, mixture_file_and_epoch_size, .init = mkdir_tmp, .fini = rm_tmp)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct loader *l = NULL;
	char path[128], why[512], want[512];

	open_file(MIXFILE("{\"path\": \"a\", \"proportion\": 1}"), path,
		  sizeof(path), why, sizeof(why));
	o.socket_path = NO_SOCKET;
	o.epoch_size = 100;
	cr_expect_eq(loader_open(&l, path, &o, why, sizeof(why)),
		     LOADER_EUSAGE);
	snprintf(
		want, sizeof(want),
		"epoch_size 100 with the mixture file %s: the file says it (\"epoch_size\")",
		path);
	cr_expect_str_eq(why, want);
}
