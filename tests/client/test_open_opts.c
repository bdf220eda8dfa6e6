/*
 * test_open_opts.c - loader_open() and struct loader_opts: a refused
 * value comes back before it connects, with LOADER_EUSAGE and the option
 * and value as given (each refusal is tested on the OPEN message builder,
 * test_openmsg.c); and 0 still means the default. No daemon: the socket
 * path names nothing, so an accepted struct fails at connect instead.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
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
