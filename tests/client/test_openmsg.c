/*
 * test_openmsg.c - struct loader_opts to the OPEN message, with no
 * daemon and no handle (client/openmsg.h): the struct's size handling,
 * the defaults, the flags each option sets, the length limits of the
 * name and the pipeline, and every refusal with its exact message; and
 * a mixture's members to its MEMBER messages, likewise.
 * test_open_opts.c checks some of the same refusals through
 * loader_open(); this one calls the builder directly.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "loader.h"
#include "openmsg.h"
#include "outputs.h"
#include "proto.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* The end of the 1.0 struct, and of the field that 1.2 appended. */
#define SIZE_1_0 (offsetof(struct loader_opts, start_batch) + 8)
#define SIZE_1_2 (offsetof(struct loader_opts, ragged_bytes) + 8)
/* The 1.5 struct, its tail padding included: where 1.6 appended. */
#define SIZE_1_5 (offsetof(struct loader_opts, pad) + 8)

/* Two members: a local dataset and one in a store, by proportion. */
static const struct loader_member two[2] = {
	{ .dataset = "fm-a/test", .how = LOADER_MIX_PROPORTION, .value = 0.7 },
	{ .dataset = "s3://bucket/prefix",
	  .how = LOADER_MIX_PROPORTION,
	  .value = 0.3,
	  .pipeline = "decode | center 224 | f32" },
};

static const uint32_t from_epoch[2] = { 3, 3 };
static const uint64_t from_batch[2] = { 7, 8 };

/* A name or pipeline of n bytes, in buf (n + 1 bytes). */
static const char *string_of(char *buf, size_t n)
{
	memset(buf, 'a', n);
	buf[n] = '\0';
	return buf;
}

static int make(const struct loader_opts *o, struct proto_open *po, char *why,
		size_t len)
{
	memset(why, 0, len);
	return loader_make_open(o, po, why, len);
}

/* ---- loader_make_open: defaults and values ------------------------------ */

Test(openmsg, defaults)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct proto_open po, want;
	char why[256];

	memset(&want, 0, sizeof(want));
	want.batch_size = 256;
	want.prefetch_bytes = 64ull << 20;
	want.world = 1;
	want.flags = PROTO_OPEN_RAGGED; /* a caller that knows 1.2 */
	memset(&po, 0xa5, sizeof(po));
	cr_assert_eq(make(&o, &po, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(po.batch_size, 256);
	cr_expect_eq(po.prefetch_bytes, 64ull << 20);
	cr_expect_eq(po.world, 1);
	cr_expect_eq(po.flags, PROTO_OPEN_RAGGED);
	cr_expect_eq(po.noutputs, 0);
	cr_expect_str_empty(po.name);
	cr_expect_str_empty(po.pipeline);
	/* Every other byte zero: reserved fields and padding included. */
	cr_expect_eq(memcmp(&po, &want, sizeof(po)), 0);
}

Test(openmsg, values_pass_through)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct proto_open po;
	char why[256];

	o.outputs = "image:unit,label";
	o.pipeline = "decode | f16";
	o.on_bad = LOADER_BAD_SKIP;
	o.batch_size = 32;
	o.order = LOADER_ORDER_QUASI;
	o.seed = 0x123456789abcdefull;
	o.epochs = 4;
	o.start_epoch = 2;
	o.rank = 2;
	o.world = 3;
	o.drop_last = 1;
	o.ring_slots = 16;
	o.prefetch_bytes = 1 << 20;
	o.threads = 5;
	o.start_batch = 9;
	o.name = "job";
	o.ragged_bytes = 4096;
	/* Options of the handle alone: not in the message. */
	o.timeout_ms = 77;
	o.reconnect_ms = 1000;
	o.socket_path = "/nonexistent";
	cr_assert_eq(make(&o, &po, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(po.batch_size, 32);
	cr_expect_eq(po.order, PROTO_ORDER_QUASI);
	cr_expect_eq(po.seed, 0x123456789abcdefull);
	cr_expect_eq(po.epochs, 4);
	cr_expect_eq(po.start_epoch, 2);
	cr_expect_eq(po.rank, 2);
	cr_expect_eq(po.world, 3);
	cr_expect_eq(po.drop_last, 1);
	cr_expect_eq(po.ring_slots, 16);
	cr_expect_eq(po.prefetch_bytes, 1 << 20);
	cr_expect_eq(po.threads, 5);
	cr_expect_eq(po.on_bad, PROTO_BAD_SKIP);
	cr_expect_eq(po.start_batch, 9);
	cr_expect_eq(po.ragged_bytes, 4096);
	cr_expect_str_eq(po.name, "job");
	cr_expect_str_eq(po.pipeline, "decode | f16");
	cr_expect_eq(po.flags, PROTO_OPEN_RAGGED);
	cr_assert_eq(po.noutputs, 2);
	cr_expect_str_eq(po.out[0].field, "image");
	cr_expect_eq(po.out[0].cast, PROTO_CAST_F32_UNIT);
	cr_expect_str_eq(po.out[1].field, "label");
	cr_expect_eq(po.out[1].cast, PROTO_CAST_NONE);
}

/* ---- loader_make_open: flags -------------------------------------------- */

static void none(struct loader_opts *o)
{
	(void)o;
}

static void direct(struct loader_opts *o)
{
	o->direct = 1;
}

static void fresh(struct loader_opts *o)
{
	o->name = "job";
	o->fresh = 1;
}

static void named(struct loader_opts *o)
{
	o->name = "job";
}

static void positions(struct loader_opts *o)
{
	o->name = "job";
	o->from_world = 2;
	o->from_epoch = from_epoch;
	o->from_batch = from_batch;
}

static void pad(struct loader_opts *o)
{
	o->pad = 1;
}

static void size_1_2(struct loader_opts *o)
{
	o->size = SIZE_1_2;
}

static void size_1_1(struct loader_opts *o)
{
	o->size = SIZE_1_2 - 8;
}

static void size_1_0(struct loader_opts *o)
{
	o->size = SIZE_1_0;
}

static void mixed(struct loader_opts *o)
{
	o->members = two;
	o->nmembers = 2;
}

static void all_flags(struct loader_opts *o)
{
	positions(o);
	o->direct = 1;
	o->fresh = 1;
	o->pad = 1;
}

Test(openmsg, flags)
{
	static const struct {
		void (*set)(struct loader_opts *o);
		uint32_t flags;
		const char *what;
	} t[] = {
		{ none, PROTO_OPEN_RAGGED, "nothing set" },
		{ direct, PROTO_OPEN_DIRECT | PROTO_OPEN_RAGGED, "direct" },
		{ fresh, PROTO_OPEN_FRESH | PROTO_OPEN_RAGGED, "fresh" },
		{ named, PROTO_OPEN_RAGGED, "a name alone" },
		{ positions, PROTO_OPEN_POSITIONS | PROTO_OPEN_RAGGED,
		  "from_world" },
		{ pad, PROTO_OPEN_PAD | PROTO_OPEN_RAGGED, "pad" },
		{ mixed, PROTO_OPEN_MIXTURE | PROTO_OPEN_RAGGED, "members" },
		{ size_1_2, PROTO_OPEN_RAGGED, "a 1.2 struct" },
		{ size_1_1, 0, "a struct that ends before ragged_bytes" },
		{ size_1_0, 0, "a 1.0 struct" },
		{ all_flags,
		  PROTO_OPEN_DIRECT | PROTO_OPEN_FRESH | PROTO_OPEN_POSITIONS |
			  PROTO_OPEN_PAD | PROTO_OPEN_RAGGED,
		  "all of them" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_opts o = LOADER_OPTS_INIT;
		struct proto_open po;
		char why[256];

		t[i].set(&o);
		cr_assert_eq(make(&o, &po, why, sizeof(why)), 0, "%s: %s",
			     t[i].what, why);
		cr_expect_eq(po.flags, t[i].flags, "%s: flags %#x, not %#x",
			     t[i].what, po.flags, t[i].flags);
	}
}

/* ---- loader_make_open: lengths ------------------------------------------ */

Test(openmsg, name_and_pipeline_lengths)
{
	char buf[PROTO_PIPELINE_MAX + 2], why[256];
	struct loader_opts o = LOADER_OPTS_INIT;
	struct proto_open po;
	size_t name_max = sizeof(po.name) - 1;
	size_t pipeline_max = sizeof(po.pipeline) - 1;

	cr_assert_eq(name_max, 63);
	cr_assert_eq(pipeline_max, 511);

	o.name = string_of(buf, name_max);
	cr_assert_eq(make(&o, &po, why, sizeof(why)), 0, "%s", why);
	cr_expect_str_eq(po.name, buf);
	o.name = string_of(buf, name_max + 1);
	cr_expect_eq(make(&o, &po, why, sizeof(why)), LOADER_EUSAGE);
	cr_expect_str_eq(why, "name of 64 bytes: 1 to 63");
	o.name = "";
	cr_expect_eq(make(&o, &po, why, sizeof(why)), LOADER_EUSAGE);
	cr_expect_str_eq(why, "name of 0 bytes: 1 to 63");
	o.name = "a";
	cr_expect_eq(make(&o, &po, why, sizeof(why)), 0, "%s", why);
	cr_expect_str_eq(po.name, "a");
	o.name = NULL;

	o.pipeline = string_of(buf, pipeline_max);
	cr_assert_eq(make(&o, &po, why, sizeof(why)), 0, "%s", why);
	cr_expect_str_eq(po.pipeline, buf);
	o.pipeline = string_of(buf, pipeline_max + 1);
	cr_expect_eq(make(&o, &po, why, sizeof(why)), LOADER_EUSAGE);
	cr_expect_str_eq(why, "pipeline of 512 bytes: at most 511");
	/* An empty pipeline is none. */
	o.pipeline = "";
	cr_expect_eq(make(&o, &po, why, sizeof(why)), 0, "%s", why);
	cr_expect_str_empty(po.pipeline);
}

/* ---- loader_make_open: refusals ------------------------------------------ */

static void empty_name(struct loader_opts *o)
{
	o->name = "";
}

static void fresh_unnamed(struct loader_opts *o)
{
	o->fresh = 1;
}

static void positions_unnamed(struct loader_opts *o)
{
	positions(o);
	o->name = NULL;
}

static void big_from_world(struct loader_opts *o)
{
	positions(o);
	o->from_world = 65537;
}

static void positions_no_epochs(struct loader_opts *o)
{
	positions(o);
	o->from_epoch = NULL;
}

static void positions_no_batches(struct loader_opts *o)
{
	positions(o);
	o->from_batch = NULL;
}

static void positions_and_start(struct loader_opts *o)
{
	positions(o);
	o->start_batch = 5;
}

static void pad_two(struct loader_opts *o)
{
	o->pad = 2;
}

static void big_batch(struct loader_opts *o)
{
	o->batch_size = 65537;
}

static void bad_order(struct loader_opts *o)
{
	o->order = 3;
}

static void big_world(struct loader_opts *o)
{
	o->world = 65537;
}

static void rank_of_one(struct loader_opts *o)
{
	o->rank = 1; /* world 0: 1 */
}

static void rank_is_world(struct loader_opts *o)
{
	o->rank = 4;
	o->world = 4;
}

static void drop_last_two(struct loader_opts *o)
{
	o->drop_last = 2;
}

static void bad_on_bad(struct loader_opts *o)
{
	o->on_bad = 2;
}

static void one_slot(struct loader_opts *o)
{
	o->ring_slots = 1;
}

static void big_ring(struct loader_opts *o)
{
	o->ring_slots = 1025;
}

static void past_epochs(struct loader_opts *o)
{
	o->start_epoch = UINT32_MAX;
	o->epochs = 2;
}

static void big_prefetch(struct loader_opts *o)
{
	o->prefetch_bytes = (64ull << 30) + 1;
}

static void big_ragged(struct loader_opts *o)
{
	o->ragged_bytes = (1ull << 30) + 1;
}

static void negative_reconnect(struct loader_opts *o)
{
	o->reconnect_ms = -2; /* -1 is LOADER_RECONNECT_NEVER */
}

Test(openmsg, refusals)
{
	static const struct {
		void (*set)(struct loader_opts *o);
		const char *why;
	} t[] = {
		{ empty_name, "name of 0 bytes: 1 to 63" },
		{ fresh_unnamed, "fresh without a name" },
		{ positions_unnamed,
		  "from_world without a name: positions of an earlier world resume a named stream" },
		{ big_from_world,
		  "from_world 65537: 1..65536, with from_epoch and from_batch" },
		{ positions_no_epochs,
		  "from_world 2: 1..65536, with from_epoch and from_batch" },
		{ positions_no_batches,
		  "from_world 2: 1..65536, with from_epoch and from_batch" },
		{ positions_and_start,
		  "start_batch 5 with from_world: the positions say where each rank starts" },
		{ pad_two, "pad 2: 0 or 1" },
		{ big_batch, "batch_size 65537: at most 65536" },
		{ bad_order, "unknown order 3" },
		{ big_world,
		  "rank 0 of world 65537: need rank < world <= 65536" },
		{ rank_of_one,
		  "rank 1 of world 1: need rank < world <= 65536" },
		{ rank_is_world,
		  "rank 4 of world 4: need rank < world <= 65536" },
		{ drop_last_two, "drop_last 2: 0 or 1" },
		{ bad_on_bad, "on_bad 2: LOADER_BAD_FAIL or LOADER_BAD_SKIP" },
		{ one_slot, "ring_slots 1: 2..1024" },
		{ big_ring, "ring_slots 1025: 2..1024" },
		{ past_epochs,
		  "epochs 2 from start_epoch 4294967295: the last epoch would be past 4294967295" },
		{ big_prefetch,
		  "prefetch_bytes 68719476737: at most 68719476736" },
		{ big_ragged, "ragged_bytes 1073741825: at most 1073741824" },
		{ negative_reconnect,
		  "reconnect_ms -2: 0 (the default: 60000 for a named stream, never for another), -1 (never) or a positive number of milliseconds" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_opts o = LOADER_OPTS_INIT;
		struct proto_open po;
		char why[256];
		int err;

		t[i].set(&o);
		err = make(&o, &po, why, sizeof(why));
		cr_expect_eq(err, LOADER_EUSAGE, "%s: %d (%s)", t[i].why, err,
			     why);
		cr_expect_str_eq(why, t[i].why);
		/* No room for the reason: the same answer, nothing written. */
		cr_expect_eq(loader_make_open(&o, &po, NULL, 0), LOADER_EUSAGE,
			     "%s, without a buffer", t[i].why);
	}
}

static void limits(struct loader_opts *o)
{
	o->name = "job";
	o->batch_size = 65536;
	o->order = LOADER_ORDER_QUASI;
	o->rank = 65535;
	o->world = 65536;
	o->drop_last = 1;
	o->on_bad = LOADER_BAD_SKIP;
	o->ring_slots = 1024;
	o->start_epoch = UINT32_MAX - 1;
	o->epochs = 1;
	o->prefetch_bytes = 64ull << 30;
	o->ragged_bytes = 1ull << 30;
	o->reconnect_ms = INT32_MAX;
	o->pad = 1;
}

static void low_limits(struct loader_opts *o)
{
	o->batch_size = 1;
	o->ring_slots = 2;
	o->world = 1;
	o->start_epoch = UINT32_MAX; /* endless from the last epoch */
}

static void widest_positions(struct loader_opts *o)
{
	positions(o);
	o->from_world = 65536; /* only the pointers are looked at here */
}

/* The largest (and smallest) values each check lets through. */
Test(openmsg, takes_the_limits)
{
	static const struct {
		void (*set)(struct loader_opts *o);
		const char *what;
	} t[] = {
		{ limits, "every field at its upper limit" },
		{ low_limits, "every field at its lower limit" },
		{ widest_positions, "from_world 65536" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_opts o = LOADER_OPTS_INIT;
		struct proto_open po;
		char why[256];

		t[i].set(&o);
		cr_expect_eq(make(&o, &po, why, sizeof(why)), 0, "%s: %s",
			     t[i].what, why);
	}
}

/* A bad outputs spec is refused with the parser's own reason. */
Test(openmsg, outputs_refused)
{
	static const char *const bad[] = { "x:nope", "a,a", "", "a b" };

	for (size_t i = 0; i < NELEM(bad); i++) {
		struct loader_opts o = LOADER_OPTS_INIT;
		struct proto_output out[PROTO_MAX_OUTPUTS];
		struct proto_open po;
		char why[256], want[256];
		uint32_t n;

		cr_assert_eq(loader_parse_outputs(bad[i], out, &n, want,
						  sizeof(want)),
			     LOADER_EUSAGE, "\"%s\"", bad[i]);
		o.outputs = bad[i];
		cr_expect_eq(make(&o, &po, why, sizeof(why)), LOADER_EUSAGE,
			     "\"%s\"", bad[i]);
		cr_expect_str_eq(why, want, "\"%s\"", bad[i]);
	}
}

/* ---- loader_copy_opts ----------------------------------------------------- */

Test(openmsg, copy_null_is_defaults)
{
	struct loader_opts o, zero;
	char why[256] = "";

	memset(&o, 0xa5, sizeof(o));
	memset(&zero, 0, sizeof(zero));
	cr_assert_eq(loader_copy_opts(NULL, &o, why, sizeof(why)), 0);
	cr_expect_eq(memcmp(&o, &zero, sizeof(o)), 0);
	cr_expect_str_empty(why);
}

Test(openmsg, copy_refuses_unset_size)
{
	static const uint32_t sizes[] = { 0, 4, SIZE_1_0 - 1 };

	for (size_t i = 0; i < NELEM(sizes); i++) {
		struct loader_opts in = LOADER_OPTS_INIT, o;
		char why[256], want[256];

		in.size = sizes[i];
		snprintf(
			want, sizeof(want),
			"struct loader_opts: size %u is not set (initialise it with LOADER_OPTS_INIT)",
			sizes[i]);
		cr_expect_eq(loader_copy_opts(&in, &o, why, sizeof(why)),
			     LOADER_EUSAGE, "size %u", sizes[i]);
		cr_expect_str_eq(why, want);
	}
}

/* An older caller's struct: what lies past its size is not read. */
Test(openmsg, copy_reads_only_size_bytes)
{
	struct loader_opts in, o;
	char why[256];

	memset(&in, 0xa5, sizeof(in));
	in.size = SIZE_1_0;
	in.batch_size = 8;
	in.start_batch = 3;
	cr_assert_eq(loader_copy_opts(&in, &o, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(o.size, SIZE_1_0);
	cr_expect_eq(o.batch_size, 8);
	cr_expect_eq(o.start_batch, 3);
	cr_expect_null(o.name);
	cr_expect_eq(o.fresh, 0);
	cr_expect_eq(o.reconnect_ms, 0);
	cr_expect_eq(o.ragged_bytes, 0);
	cr_expect_eq(o.from_world, 0);
	cr_expect_eq(o.pad, 0);
	cr_expect_null(o.members);
	cr_expect_eq(o.nmembers, 0);
	cr_expect_eq(o.member_size, 0);
	cr_expect_eq(o.epoch_size, 0);
}

/*
 * 1.6 appended past the 1.5 struct's tail padding, which a 1.5 caller
 * copies too: whatever those 4 bytes hold, no 1.6 field reads them.
 */
Test(openmsg, copy_of_1_5_leaves_the_mixture_out)
{
	struct loader_opts in, o;
	char why[256];

	cr_assert_eq(SIZE_1_5, offsetof(struct loader_opts, members));
	memset(&in, 0xa5, sizeof(in));
	in.size = SIZE_1_5;
	in.pad = 1;
	cr_assert_eq(loader_copy_opts(&in, &o, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(o.pad, 1);
	cr_expect_null(o.members);
	cr_expect_eq(o.nmembers, 0);
	cr_expect_eq(o.epoch_size, 0);
}

/* A newer caller's struct: taken while its unknown tail is zero. */
Test(openmsg, copy_takes_a_larger_zero_tail)
{
	struct {
		struct loader_opts o;
		unsigned char tail[16];
	} in;
	struct loader_opts o;
	char why[256], want[256];

	memset(&in, 0, sizeof(in));
	in.o.size = sizeof(in);
	in.o.batch_size = 8;
	in.o.pad = 1;
	cr_assert_eq(loader_copy_opts(&in.o, &o, why, sizeof(why)), 0, "%s",
		     why);
	cr_expect_eq(o.batch_size, 8);
	cr_expect_eq(o.pad, 1);
	cr_expect_eq(o.size, sizeof(in));

	in.tail[5] = 1;
	snprintf(
		want, sizeof(want),
		"struct loader_opts: byte %zu is set, past the %zu bytes this library (version %d.%d) knows",
		offsetof(__typeof__(in), tail) + 5, sizeof(struct loader_opts),
		LOADER_VERSION_MAJOR, LOADER_VERSION_MINOR);
	cr_expect_eq(loader_copy_opts(&in.o, &o, why, sizeof(why)),
		     LOADER_EUSAGE);
	cr_expect_str_eq(why, want);
}

/* ---- loader_make_members --------------------------------------------------- */

static struct proto_member pm[PROTO_MAX_MEMBERS];

static int members(const struct loader_opts *o, char *why, size_t len)
{
	memset(why, 0, len);
	memset(pm, 0xa5, sizeof(pm));
	return loader_make_members(o, pm, why, len);
}

Test(openmsg, members_none)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	char why[256];

	cr_expect_eq(members(&o, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(pm[0].index, 0xa5a5a5a5u, "no member written");
}

Test(openmsg, members_built)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct proto_member want[2];
	char why[256];

	o.members = two;
	o.nmembers = 2;
	o.epoch_size = 1000;
	o.pipeline = "decode | f32"; /* the OPEN's: not copied to members */
	cr_assert_eq(members(&o, why, sizeof(why)), 0, "%s", why);
	memset(want, 0, sizeof(want));
	want[0].index = 0;
	want[0].how = PROTO_MIX_PROPORTION;
	want[0].value = 0.7;
	want[0].epoch_size = 1000;
	strcpy(want[0].label, "fm-a/test");
	want[1].index = 1;
	want[1].how = PROTO_MIX_PROPORTION;
	want[1].value = 0.3;
	want[1].epoch_size = 1000;
	strcpy(want[1].pipeline, "decode | center 224 | f32");
	strcpy(want[1].label, "s3://bucket/prefix");
	for (int i = 0; i < 2; i++) {
		cr_expect_eq(pm[i].index, want[i].index);
		cr_expect_eq(pm[i].how, want[i].how);
		cr_expect_eq(pm[i].flags, 0, "what the files are: set later");
		cr_expect_eq(pm[i].value, want[i].value);
		cr_expect_eq(pm[i].epoch_size, 1000);
		cr_expect_str_eq(pm[i].pipeline, want[i].pipeline);
		cr_expect_str_eq(pm[i].label, want[i].label);
		/* Every other byte zero: reserved and padding included. */
		cr_expect_eq(memcmp(&pm[i], &want[i], sizeof(pm[i])), 0,
			     "member %d", i);
	}
	cr_expect_eq(pm[2].index, 0xa5a5a5a5u, "only nmembers written");
}

Test(openmsg, members_repeat_and_choose)
{
	static const struct loader_member m[3] = {
		{ .dataset = "a", .how = LOADER_MIX_REPEAT, .value = 0.5 },
		{ .dataset = "b", .how = LOADER_MIX_CHOOSE, .value = 1000 },
		{ .dataset = "c", .how = LOADER_MIX_REPEAT, .value = 3 },
	};
	struct loader_opts o = LOADER_OPTS_INIT;
	char why[256];

	o.members = m;
	o.nmembers = 3;
	cr_assert_eq(members(&o, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(pm[0].how, PROTO_MIX_REPEAT);
	cr_expect_eq(pm[0].value, 0.5);
	cr_expect_eq(pm[1].how, PROTO_MIX_CHOOSE);
	cr_expect_eq(pm[1].value, 1000);
	cr_expect_eq(pm[2].index, 2);
	for (int i = 0; i < 3; i++)
		cr_expect_eq(pm[i].epoch_size, 0);
}

/* A path longer than the label's room keeps its end. */
Test(openmsg, members_long_label)
{
	static char path[2001];
	struct loader_member m = { .dataset = path, .value = 1 };
	struct loader_opts o = LOADER_OPTS_INIT;
	size_t cap = sizeof(pm[0].label);
	char why[256];

	memset(path, 'a', sizeof(path) - 1);
	memcpy(path + sizeof(path) - 6, "/last", 5);
	o.members = &m;
	o.nmembers = 1;
	cr_assert_eq(members(&o, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(strlen(pm[0].label), cap - 1);
	cr_expect_eq(strncmp(pm[0].label, "...aaa", 6), 0, "%.10s",
		     pm[0].label);
	cr_expect_str_eq(pm[0].label + cap - 6, "/last");
}

/* Member 1 of a pair (member 0 a valid proportion), set by each test. */
static struct loader_member pair[2];
static struct loader_opts mo;

static void pair_of(double v0, uint32_t how1, double v1)
{
	memset(pair, 0, sizeof(pair));
	pair[0] = (struct loader_member){ .dataset = "a", .value = v0 };
	pair[1] = (struct loader_member){ .dataset = "b",
					  .how = how1,
					  .value = v1 };
	mo = (struct loader_opts)LOADER_OPTS_INIT;
	mo.members = pair;
	mo.nmembers = 2;
}

static void no_count(void)
{
	pair_of(1, 0, 1);
	mo.nmembers = 0;
}

static void no_members(void)
{
	pair_of(1, 0, 1);
	mo.members = NULL;
}

static void too_many(void)
{
	pair_of(1, 0, 1);
	mo.nmembers = 33;
}

static void size_zero(void)
{
	pair_of(1, 0, 1);
	mo.member_size = 0;
}

static void size_short(void)
{
	pair_of(1, 0, 1);
	mo.member_size = sizeof(struct loader_member) - 8;
}

static void size_odd(void)
{
	pair_of(1, 0, 1);
	mo.member_size = sizeof(struct loader_member) + 4;
}

static void size_huge(void)
{
	pair_of(1, 0, 1);
	mo.member_size = 4096;
}

static void null_dataset(void)
{
	pair_of(1, 0, 1);
	pair[1].dataset = NULL;
}

static void empty_dataset(void)
{
	pair_of(1, 0, 1);
	pair[0].dataset = "";
}

static void reserved_set(void)
{
	pair_of(1, 0, 1);
	pair[0].reserved = 7;
}

static void unknown_how(void)
{
	pair_of(1, 3, 1);
}

static void zero_proportion(void)
{
	pair_of(0, 0, 1);
}

static void negative_proportion(void)
{
	pair_of(1, 0, -0.5);
}

static void nan_proportion(void)
{
	pair_of(1, 0, NAN);
}

static void infinite_proportion(void)
{
	pair_of(1, 0, INFINITY);
}

static void huge_proportion(void)
{
	pair_of(1, 0, 0x1p49);
}

static void zero_repeat(void)
{
	pair_of(1, 0, 1);
	pair[0].how = LOADER_MIX_REPEAT;
	pair[0].value = 0;
}

static void nan_repeat(void)
{
	pair_of(1, 0, 1);
	pair[0].how = LOADER_MIX_REPEAT;
	pair[0].value = NAN;
}

static void fraction_choose(void)
{
	pair_of(1, 0, 1);
	pair[0].how = LOADER_MIX_CHOOSE;
	pair[0].value = 0.5;
}

static void zero_choose(void)
{
	pair_of(1, 0, 1);
	pair[0].how = LOADER_MIX_CHOOSE;
	pair[0].value = 0;
}

static void big_choose(void)
{
	pair_of(1, 0, 1);
	pair[0].how = LOADER_MIX_CHOOSE;
	pair[0].value = 0x1p48 + 1;
}

static void proportion_and_repeat(void)
{
	pair_of(1, LOADER_MIX_REPEAT, 2);
}

static void choose_and_proportion(void)
{
	pair_of(1, LOADER_MIX_PROPORTION, 2);
	pair[0].how = LOADER_MIX_CHOOSE;
}

static void epoch_without_proportions(void)
{
	pair_of(1, LOADER_MIX_REPEAT, 2);
	pair[0].how = LOADER_MIX_REPEAT;
	mo.epoch_size = 100;
}

static void epoch_without_members(void)
{
	mo = (struct loader_opts)LOADER_OPTS_INIT;
	mo.epoch_size = 100;
}

static void huge_epoch(void)
{
	pair_of(1, 0, 1);
	mo.epoch_size = (1ull << 48) + 1;
}

static void long_pipeline(void)
{
	static char p[513];

	pair_of(1, 0, 1);
	memset(p, 'x', 512);
	pair[1].pipeline = p;
}

Test(openmsg, members_refused)
{
	static const struct {
		void (*set)(void);
		const char *why;
	} t[] = {
		{ no_count, "nmembers 0: a mixture has 1 to 32 members" },
		{ no_members, "nmembers 2 without members (NULL)" },
		{ too_many, "nmembers 33: a mixture has 1 to 32 members" },
		{ size_zero,
		  "member_size 0: not a struct loader_member's size (set it to sizeof(struct loader_member), as LOADER_OPTS_INIT does)" },
		{ size_short,
		  "member_size 24: not a struct loader_member's size (set it to sizeof(struct loader_member), as LOADER_OPTS_INIT does)" },
		{ size_odd,
		  "member_size 36: not a struct loader_member's size (set it to sizeof(struct loader_member), as LOADER_OPTS_INIT does)" },
		{ size_huge,
		  "member_size 4096: not a struct loader_member's size (set it to sizeof(struct loader_member), as LOADER_OPTS_INIT does)" },
		{ null_dataset, "member 1: no dataset" },
		{ empty_dataset, "member 0: no dataset" },
		{ reserved_set, "member 0: reserved is 7, not 0" },
		{ unknown_how,
		  "member 1: how 3: LOADER_MIX_PROPORTION, LOADER_MIX_REPEAT or LOADER_MIX_CHOOSE" },
		{ zero_proportion,
		  "member 0: proportion 0: a finite number above 0, at most 2^48" },
		{ negative_proportion,
		  "member 1: proportion -0.5: a finite number above 0, at most 2^48" },
		{ nan_proportion,
		  "member 1: proportion nan: a finite number above 0, at most 2^48" },
		{ infinite_proportion,
		  "member 1: proportion inf: a finite number above 0, at most 2^48" },
		{ huge_proportion,
		  "member 1: proportion 5.6295e+14: a finite number above 0, at most 2^48" },
		{ zero_repeat,
		  "member 0: repeat 0: a finite number above 0, at most 2^48" },
		{ nan_repeat,
		  "member 0: repeat nan: a finite number above 0, at most 2^48" },
		{ fraction_choose,
		  "member 0: choose 0.5: a whole number of samples, 1 to 2^48" },
		{ zero_choose,
		  "member 0: choose 0: a whole number of samples, 1 to 2^48" },
		{ big_choose,
		  "member 0: choose 2.81475e+14: a whole number of samples, 1 to 2^48" },
		{ proportion_and_repeat,
		  "member 1: repeat beside member 0's proportion: either every member gives a proportion or none does" },
		{ choose_and_proportion,
		  "member 1: proportion beside member 0's repeat or choose: either every member gives a proportion or none does" },
		{ epoch_without_proportions,
		  "epoch_size 100 without proportions: members that repeat or choose give their own counts" },
		{ epoch_without_members,
		  "epoch_size 100 without members: it sets a mixture's epoch" },
		{ huge_epoch,
		  "epoch_size 281474976710657: at most 2^48 (281474976710656)" },
		{ long_pipeline,
		  "member 1: pipeline of 512 bytes: at most 511" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		char why[256];
		int err;

		t[i].set();
		err = members(&mo, why, sizeof(why));
		cr_expect_eq(err, LOADER_EUSAGE, "%s: %d (%s)", t[i].why, err,
			     why);
		cr_expect_str_eq(why, t[i].why);
		/* No room for the reason: the same answer, nothing written. */
		cr_expect_eq(loader_make_members(&mo, pm, NULL, 0),
			     LOADER_EUSAGE, "%s, without a buffer", t[i].why);
	}
}

static void tiny_proportion(void)
{
	pair_of(1e-300, 0, 1);
}

static void largest_values(void)
{
	pair_of(0x1p48, 0, 0x1p48);
	mo.epoch_size = 1ull << 48;
}

static void largest_choose(void)
{
	pair_of(1, LOADER_MIX_CHOOSE, 0x1p48);
	pair[0].how = LOADER_MIX_REPEAT;
	pair[0].value = 0x1p48;
}

static void every_member(void)
{
	static struct loader_member m[LOADER_MAX_MEMBERS];

	for (int i = 0; i < LOADER_MAX_MEMBERS; i++)
		m[i] = (struct loader_member){ .dataset = "d",
					       .how = LOADER_MIX_CHOOSE,
					       .value = 1 };
	mo = (struct loader_opts)LOADER_OPTS_INIT;
	mo.members = m;
	mo.nmembers = LOADER_MAX_MEMBERS;
}

static void longest_pipeline(void)
{
	static char p[512];

	pair_of(1, 0, 1);
	memset(p, 'x', 511);
	pair[1].pipeline = p;
}

static void empty_pipeline(void)
{
	pair_of(1, 0, 1);
	pair[1].pipeline = "";
}

Test(openmsg, members_take_the_limits)
{
	static const struct {
		void (*set)(void);
		const char *what;
	} t[] = {
		{ tiny_proportion, "a proportion of 1e-300" },
		{ largest_values, "proportions and epoch_size of 2^48" },
		{ largest_choose, "choose and repeat 2^48" },
		{ every_member, "32 members" },
		{ longest_pipeline, "a pipeline of 511 bytes" },
		{ empty_pipeline, "an empty pipeline (the OPEN's)" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		char why[256];

		t[i].set();
		cr_expect_eq(members(&mo, why, sizeof(why)), 0, "%s: %s",
			     t[i].what, why);
	}
}

/* A newer caller's member: taken while its unknown tail is zero. */
Test(openmsg, members_of_a_larger_struct)
{
	struct {
		struct loader_member m;
		uint64_t more;
	} in[2];
	struct loader_opts o = LOADER_OPTS_INIT;
	char why[256], want[256];

	memset(in, 0, sizeof(in));
	in[0].m = two[0];
	in[1].m = two[1];
	o.members = &in[0].m;
	o.nmembers = 2;
	o.member_size = sizeof(in[0]);
	cr_assert_eq(members(&o, why, sizeof(why)), 0, "%s", why);
	cr_expect_str_eq(pm[1].label, "s3://bucket/prefix");
	cr_expect_str_eq(pm[1].pipeline, "decode | center 224 | f32");

	in[1].more = 1;
	snprintf(
		want, sizeof(want),
		"member 1: byte %zu is set, past the %zu bytes of struct loader_member this library (version %d.%d) knows",
		sizeof(struct loader_member), sizeof(struct loader_member),
		LOADER_VERSION_MAJOR, LOADER_VERSION_MINOR);
	cr_expect_eq(members(&o, why, sizeof(why)), LOADER_EUSAGE);
	cr_expect_str_eq(why, want);
}
