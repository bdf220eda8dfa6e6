/*
 * test_openreq.c - an OPEN request off the wire (daemon/openreq.c): a
 * valid one maps field by field into the pipeline's stream_config, and
 * every malformed one is refused with the right code and a reason that
 * names what is wrong. A REMOTE's store and credentials map field by
 * field into the S3 client's aws_cfg.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "awscfg.h"
#include "loader_error.h"
#include "openreq.h"
#include "../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A request that every field of the config can be told apart in. */
static void valid_open(struct proto_open *m)
{
	memset(m, 0, sizeof(*m));
	m->batch_size = 32;
	m->order = PROTO_ORDER_RANDOM;
	m->seed = 0x0123456789abcdefull;
	m->epochs = 3;
	m->start_epoch = 5;
	m->rank = 1;
	m->world = 4;
	m->drop_last = 1;
	m->ring_slots = 4;
	m->prefetch_bytes = 3u << 20;
	m->threads = 2;
	m->noutputs = 2;
	m->flags = PROTO_OPEN_DIRECT;
	strcpy(m->out[0].field, "image");
	m->out[0].cast = PROTO_CAST_F32_UNIT;
	strcpy(m->out[1].field, "label");
	m->out[1].cast = PROTO_CAST_F32;
	m->on_bad = PROTO_BAD_SKIP;
	strcpy(m->pipeline, "crop 24");
}

Test(openreq, valid_maps_field_by_field)
{
	struct proto_open m;
	struct stream_config c;
	struct diag d = { "" };

	valid_open(&m);
	memset(&c, 0xa5, sizeof(c));
	cr_assert_eq(openreq_config(&m, &c, &d), 0, "%s", d.msg);
	cr_expect_eq(c.batch_size, 32);
	cr_expect_eq(c.order, ORDER_RANDOM);
	cr_expect_eq(c.seed, 0x0123456789abcdefull);
	cr_expect_eq(c.epochs, 3);
	cr_expect_eq(c.start_epoch, 5);
	cr_expect_eq(c.rank, 1);
	cr_expect_eq(c.world, 4);
	cr_expect(c.drop_last);
	cr_expect(c.direct);
	cr_expect_eq(c.prefetch_bytes, 3u << 20);
	cr_expect_eq(c.threads, 2);
	cr_expect_eq(c.on_bad, STREAM_BAD_SKIP);
	cr_expect_eq(c.noutputs, 2);
	cr_expect_str_eq(c.out[0].field, "image");
	cr_expect_eq(c.out[0].cast, STREAM_CAST_F32_UNIT);
	cr_expect_str_eq(c.out[1].field, "label");
	cr_expect_eq(c.out[1].cast, STREAM_CAST_F32);
	/* Unused outputs are cleared, not left as the caller had them. */
	for (unsigned i = 2; i < STREAM_MAX_OUTPUTS; i++) {
		cr_expect_eq(c.out[i].field[0], '\0', "output %u", i);
		cr_expect_eq(c.out[i].cast, STREAM_CAST_NONE, "output %u", i);
	}
	/* The pipeline text is the request's own, not a copy. */
	cr_expect_eq(c.pipeline, m.pipeline);
	/* Left to the caller, and zero until it sets them. */
	cr_expect_null(c.label);
	cr_expect_eq(c.max_pixels, 0);
}

/* Every wire value of each enum becomes the pipeline's value of it. */
Test(openreq, enums_map_to_pipeline_values)
{
	static const struct {
		uint32_t wire;
		enum order_kind kind;
	} orders[] = {
		{ PROTO_ORDER_SEQUENTIAL, ORDER_SEQUENTIAL },
		{ PROTO_ORDER_RANDOM, ORDER_RANDOM },
		{ PROTO_ORDER_QUASI, ORDER_QUASI },
	};
	static const struct {
		uint32_t wire;
		enum stream_cast cast;
	} casts[] = {
		{ PROTO_CAST_NONE, STREAM_CAST_NONE },
		{ PROTO_CAST_F32_UNIT, STREAM_CAST_F32_UNIT },
		{ PROTO_CAST_F32, STREAM_CAST_F32 },
	};
	static const struct {
		uint32_t wire;
		enum stream_bad bad;
	} bads[] = {
		{ PROTO_BAD_FAIL, STREAM_BAD_FAIL },
		{ PROTO_BAD_SKIP, STREAM_BAD_SKIP },
	};
	struct proto_open m;
	struct stream_config c;
	struct diag d = { "" };

	for (size_t i = 0; i < NELEM(orders); i++) {
		valid_open(&m);
		m.order = orders[i].wire;
		cr_assert_eq(openreq_config(&m, &c, &d), 0, "%s", d.msg);
		cr_expect_eq(c.order, orders[i].kind, "order %u",
			     orders[i].wire);
	}
	for (size_t i = 0; i < NELEM(casts); i++) {
		valid_open(&m);
		m.out[1].cast = casts[i].wire;
		cr_assert_eq(openreq_config(&m, &c, &d), 0, "%s", d.msg);
		cr_expect_eq(c.out[1].cast, casts[i].cast, "cast %u",
			     casts[i].wire);
	}
	for (size_t i = 0; i < NELEM(bads); i++) {
		valid_open(&m);
		m.on_bad = bads[i].wire;
		cr_assert_eq(openreq_config(&m, &c, &d), 0, "%s", d.msg);
		cr_expect_eq(c.on_bad, bads[i].bad, "on_bad %u", bads[i].wire);
	}
	valid_open(&m);
	m.flags = 0;
	m.drop_last = 0;
	cr_assert_eq(openreq_config(&m, &c, &d), 0, "%s", d.msg);
	cr_expect_not(c.direct);
	cr_expect_not(c.drop_last);
	cr_expect_not(c.pad);
	m.flags = PROTO_OPEN_PAD;
	cr_assert_eq(openreq_config(&m, &c, &d), 0, "%s", d.msg);
	cr_expect(c.pad, "PROTO_OPEN_PAD pads the stream");
}

/* ------------------------------------------------- edges that pass */

static void no_outputs(struct proto_open *m)
{
	m->noutputs = 0;
}

static void max_outputs(struct proto_open *m)
{
	m->noutputs = PROTO_MAX_OUTPUTS;
	for (unsigned i = 0; i < PROTO_MAX_OUTPUTS; i++)
		snprintf(m->out[i].field, PROTO_NAME_MAX, "f%u", i);
}

static void longest_name(struct proto_open *m)
{
	memset(m->out[1].field, 'n', PROTO_NAME_MAX - 1);
	m->out[1].field[PROTO_NAME_MAX - 1] = '\0';
}

static void longest_pipeline(struct proto_open *m)
{
	memset(m->pipeline, 'p', PROTO_PIPELINE_MAX - 1);
	m->pipeline[PROTO_PIPELINE_MAX - 1] = '\0';
}

/* Outputs past noutputs are not looked at. */
static void garbage_past_noutputs(struct proto_open *m)
{
	memset(m->out[2].field, 'x', PROTO_NAME_MAX);
	m->out[2].cast = 99;
}

static void empty_pipeline(struct proto_open *m)
{
	m->pipeline[0] = '\0';
}

Test(openreq, edges_accepted)
{
	static const struct {
		const char *why;
		void (*mut)(struct proto_open *m);
	} t[] = {
		{ "no outputs", no_outputs },
		{ "PROTO_MAX_OUTPUTS outputs", max_outputs },
		{ "a name of PROTO_NAME_MAX - 1 bytes", longest_name },
		{ "a pipeline of PROTO_PIPELINE_MAX - 1 bytes",
		  longest_pipeline },
		{ "garbage past noutputs", garbage_past_noutputs },
		{ "no pipeline", empty_pipeline },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct proto_open m;
		struct stream_config c;
		struct diag d = { "" };

		valid_open(&m);
		t[i].mut(&m);
		cr_expect_eq(openreq_config(&m, &c, &d), 0, "%s: %s", t[i].why,
			     d.msg);
		cr_expect_eq(c.noutputs, m.noutputs, "%s", t[i].why);
		cr_expect_eq(c.pipeline, m.pipeline, "%s", t[i].why);
		if (m.noutputs > 1)
			cr_expect_eq(memcmp(c.out[1].field, m.out[1].field,
					    PROTO_NAME_MAX),
				     0, "%s", t[i].why);
	}
}

/* ------------------------------------------------- malformed requests */

static void unknown_flag(struct proto_open *m)
{
	m->flags |= 0x400;
}

static void positions_unnamed(struct proto_open *m)
{
	m->flags |= PROTO_OPEN_POSITIONS;
	m->name[0] = '\0';
}

static void positions_start_batch(struct proto_open *m)
{
	m->flags |= PROTO_OPEN_POSITIONS;
	snprintf(m->name, sizeof(m->name), "job");
	m->start_batch = 3;
}

static void reserved_set(struct proto_open *m)
{
	m->reserved = 1;
}

static void reserved2_set(struct proto_open *m)
{
	m->reserved2 = 0x80000000u;
}

static void order_3(struct proto_open *m)
{
	m->order = 3;
}

static void drop_last_2(struct proto_open *m)
{
	m->drop_last = 2;
}

static void on_bad_2(struct proto_open *m)
{
	m->on_bad = 2;
}

static void pipeline_unterminated(struct proto_open *m)
{
	memset(m->pipeline, 'p', sizeof(m->pipeline));
}

static void name_unterminated(struct proto_open *m)
{
	memset(m->out[1].field, 'n', PROTO_NAME_MAX);
}

static void cast_3(struct proto_open *m)
{
	m->out[1].cast = 3;
}

static void outputs_9(struct proto_open *m)
{
	m->noutputs = PROTO_MAX_OUTPUTS + 1;
}

/* Values a named stream would index by, refused before it can. */
static void rank_huge(struct proto_open *m)
{
	strcpy(m->name, "pwn");
	m->rank = 0x7fffffff;
	m->world = 1;
}

static void rank_is_world(struct proto_open *m)
{
	m->rank = 4;
}

static void world_huge(struct proto_open *m)
{
	m->world = 65537;
	m->rank = 0;
}

static void batch_huge(struct proto_open *m)
{
	m->batch_size = 1u << 30;
}

static void slots_3(struct proto_open *m)
{
	m->ring_slots = 3;
}

static void epochs_wrap(struct proto_open *m)
{
	m->start_epoch = 0xfffffff0u;
	m->epochs = 0x20;
}

Test(openreq, malformed_refused)
{
	static const struct {
		const char *why;
		void (*mut)(struct proto_open *m);
		int code;
		const char *needle; /* in the reason */
	} t[] = {
		{ "unknown flag bit", unknown_flag, LOADER_EUSAGE,
		  "unknown flags 0x401" },
		{ "positions without a name", positions_unnamed, LOADER_EUSAGE,
		  "positions of an earlier world need a stream name" },
		{ "positions with a start batch", positions_start_batch,
		  LOADER_EUSAGE, "start batch 3 with positions" },
		{ "reserved != 0", reserved_set, LOADER_EUSAGE,
		  "reserved 0x1" },
		{ "reserved2 != 0", reserved2_set, LOADER_EUSAGE,
		  "reserved2 0x80000000" },
		{ "order 3", order_3, LOADER_EUSAGE, "unknown order 3" },
		{ "drop_last 2", drop_last_2, LOADER_EUSAGE, "drop_last" },
		{ "on_bad 2", on_bad_2, LOADER_EUSAGE, "bad sample policy 2" },
		{ "pipeline without NUL", pipeline_unterminated, LOADER_EPROTO,
		  "pipeline not terminated" },
		{ "output name without NUL", name_unterminated, LOADER_EPROTO,
		  "output 1: name not terminated" },
		{ "cast 3", cast_3, LOADER_EUSAGE,
		  "output label: unknown cast 3" },
		{ "9 outputs", outputs_9, LOADER_EUSAGE,
		  "9 outputs, at most 8" },
		{ "named, rank 2^31-1 of world 1", rank_huge, LOADER_EUSAGE,
		  "rank 2147483647 of world 1" },
		{ "rank 4 of world 4", rank_is_world, LOADER_EUSAGE,
		  "rank 4 of world 4" },
		{ "world 65537", world_huge, LOADER_EUSAGE,
		  "rank 0 of world 65537" },
		{ "batch 2^30", batch_huge, LOADER_EUSAGE, "batch size" },
		{ "epochs past 2^32", epochs_wrap, LOADER_EUSAGE,
		  "epochs out of range" },
		{ "3 ring slots (before a dataset is staged)", slots_3,
		  LOADER_EUSAGE, "ring slots 3: a power of two in 2..1024" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct proto_open m;
		struct stream_config c;
		struct diag d = { "" };
		int err;

		valid_open(&m);
		t[i].mut(&m);
		err = openreq_config(&m, &c, &d);
		cr_expect_eq(err, t[i].code, "%s: got %d (%s), want %d",
			     t[i].why, err, d.msg, t[i].code);
		cr_expect_not_null(strstr(d.msg, t[i].needle),
				   "%s: reason \"%s\" lacks \"%s\"", t[i].why,
				   d.msg, t[i].needle);
	}
}

/* POSITIONS of world, ranks first .. first + count - 1 at epoch rank. */
static void positions(struct proto_positions *m, uint32_t world, uint32_t first,
		      uint32_t count)
{
	memset(m, 0, sizeof(*m));
	m->world = world;
	m->first = first;
	m->count = count;
	m->plan = 7;
	m->plan_end = 2;
	for (uint32_t i = 0; i < count && i < PROTO_POSITIONS_MAX; i++)
		m->pos[i] =
			(struct proto_position){ .epoch = first + i,
						 .batch = 10 * (first + i) };
}

Test(openreq, positions_gathered_and_checked)
{
	static struct proto_positions m;
	struct openreq_given g = { 0 };
	struct diag d = { "" };

	positions(&m, 0, 0, 1);
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO);
	cr_expect(strstr(d.msg, "world 0 (1..65536)"), "%s", d.msg);
	positions(&m, 65537, 0, 1);
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO);
	positions(&m, 3, 1, 1);
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO,
		     "rank 1 before rank 0");
	positions(&m, 3, 0, 4);
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO,
		     "4 ranks of a world of 3");
	positions(&m, 3, 0, 0);
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO);
	positions(&m, 3, 0, 2);
	m.pos[1].reserved = 1;
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO);
	cr_expect(strstr(d.msg, "rank 1 has reserved bits"), "%s", d.msg);
	cr_expect_null(g.pos, "nothing refused was taken");
	positions(&m, 3, 0, 2);
	cr_assert_eq(openreq_positions(&g, &m, &d), 0, "%s", d.msg);
	cr_expect_eq(openreq_given_check(&g, PROTO_OPEN_POSITIONS, &d),
		     LOADER_EPROTO, "an OPEN before rank 2 came");
	cr_expect_eq(openreq_given_check(&g, 0, &d), LOADER_EPROTO,
		     "positions, and an OPEN not from them");
	positions(&m, 3, 2, 1);
	m.plan = 8;
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO,
		     "another plan");
	positions(&m, 4, 2, 1);
	cr_expect_eq(openreq_positions(&g, &m, &d), LOADER_EPROTO,
		     "another world");
	positions(&m, 3, 2, 1);
	cr_assert_eq(openreq_positions(&g, &m, &d), 0, "%s", d.msg);
	cr_expect_eq(openreq_given_check(&g, PROTO_OPEN_POSITIONS, &d), 0);
	cr_expect_eq(openreq_given_rank(&g, 3, 2)->epoch, 2);
	cr_expect_eq(openreq_given_rank(&g, 3, 1)->batch, 10);
	cr_expect_null(openreq_given_rank(&g, 3, 3), "rank 3 of world 3");
	cr_expect_null(openreq_given_rank(&g, 2, 1), "of another world");
	cr_expect_null(openreq_given_rank(&g, 3, 0x7fffffff));
	openreq_given_clear(&g);
	cr_expect(!g.pos && !g.got && !g.world);
	cr_expect_eq(openreq_given_check(&g, 0, &d), 0);
}

/* ------------------------------------------------- the tars' names */

static int text_fd(const char *text)
{
	int fd = memfd_create("tars", MFD_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	return fd;
}

/* The client's names for its tars: all n of them, or none. */
Test(openreq, tar_labels)
{
	static const struct {
		const char *text;
		uint32_t n;
		bool taken;
		const char *why;
	} t[] = {
		{ PROTO_TARS_MAGIC "a.tar\nsub/b.tar\n", 2, true, "two names" },
		{ PROTO_TARS_MAGIC "a.tar\n", 2, false, "one short" },
		{ PROTO_TARS_MAGIC "a.tar\nb.tar\nc.tar\n", 2, false,
		  "one too many" },
		{ PROTO_TARS_MAGIC "a.tar\nb.tar", 2, false,
		  "the last without its newline" },
		{ PROTO_TARS_MAGIC "a.tar\n\nb.tar\n", 2, false,
		  "an empty one" },
		{ PROTO_TARS_MAGIC "a\x01.tar\nb.tar\n", 2, false,
		  "a control character" },
		{ "loaderd-tars 2\na.tar\nb.tar\n", 2, false,
		  "another version" },
		{ "", 2, false, "an empty file" },
	};
	char **l;

	for (size_t i = 0; i < NELEM(t); i++) {
		int fd = text_fd(t[i].text);

		l = openreq_tar_labels(fd, t[i].n);
		cr_expect_eq(l != NULL, t[i].taken, "%s", t[i].why);
		if (l && t[i].taken) {
			cr_expect_str_eq(l[0], "a.tar", "%s", t[i].why);
			cr_expect_str_eq(l[1], "sub/b.tar", "%s", t[i].why);
		}
		openreq_labels_free(l, t[i].n);
		close(fd);
	}
	{
		char big[260];
		char text[300];
		int fd;

		memset(big, 'x', 201);
		big[201] = '\0';
		snprintf(text, sizeof(text), PROTO_TARS_MAGIC "%s\n", big);
		fd = text_fd(text);
		cr_expect_null(openreq_tar_labels(fd, 1),
			       "a name of 201 bytes");
		close(fd);
		big[200] = '\0';
		snprintf(text, sizeof(text), PROTO_TARS_MAGIC "%s\n", big);
		fd = text_fd(text);
		l = openreq_tar_labels(fd, 1);
		cr_expect(l && strlen(l[0]) == 200, "a name of 200 bytes");
		openreq_labels_free(l, 1);
		close(fd);
	}
}

/* ---------------------------------------------- REMOTE into aws_cfg */

/* Each string of a REMOTE and where openreq_remote_cfg() puts it. */
#define REMOTE_FIELD(f)                                                        \
	{                                                                      \
#f, offsetof(struct proto_remote, f),                          \
			offsetof(struct aws_cfg, f),                           \
			sizeof(((struct aws_cfg *)0)->f)                       \
	}
static const struct {
	const char *name;
	size_t wire, cfg, len;
} remote_fields[] = {
	REMOTE_FIELD(access_key),    REMOTE_FIELD(secret_key),
	REMOTE_FIELD(session_token), REMOTE_FIELD(region),
	REMOTE_FIELD(endpoint),
};

Test(openreq, remote_maps_field_by_field)
{
	static struct proto_remote r;
	static struct aws_cfg cfg;

	memset(&r, 0, sizeof(r));
	strcpy(r.url, "s3://bucket/prefix");
	strcpy(r.endpoint, "http://127.0.0.1:7480");
	strcpy(r.region, "eu-west-3");
	strcpy(r.access_key, "AKIDEXAMPLE");
	strcpy(r.secret_key, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
	strcpy(r.session_token, "token");
	r.addressing = AWS_ADDR_PATH;
	memset(&cfg, 0xa5, sizeof(cfg));
	openreq_remote_cfg(&r, &cfg);
	cr_expect_str_eq(cfg.endpoint, "http://127.0.0.1:7480");
	cr_expect_str_eq(cfg.region, "eu-west-3");
	cr_expect_str_eq(cfg.access_key, "AKIDEXAMPLE");
	cr_expect_str_eq(cfg.secret_key,
			 "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
	cr_expect_str_eq(cfg.session_token, "token");
	cr_expect_eq(cfg.addressing, AWS_ADDR_PATH);
	/* Whole: what follows each string is the wire's too, not the 0xa5. */
	for (size_t i = 0; i < NELEM(remote_fields); i++)
		cr_expect(!memcmp((char *)&cfg + remote_fields[i].cfg,
				  (char *)&r + remote_fields[i].wire,
				  remote_fields[i].len),
			  "%s", remote_fields[i].name);
	/* Anonymous: empty keys stay empty. */
	memset(&r, 0, sizeof(r));
	strcpy(r.endpoint, "https://s3.example.com");
	openreq_remote_cfg(&r, &cfg);
	cr_expect_str_eq(cfg.access_key, "");
	cr_expect_str_eq(cfg.secret_key, "");
	cr_expect_str_eq(cfg.session_token, "");
	cr_expect_eq(cfg.addressing, AWS_ADDR_AUTO);
}

/*
 * Nothing is checked at the copy (the REMOTE was, when it came): every
 * byte of a string with no terminator is copied as it is, and so is an
 * addressing style out of range.
 */
Test(openreq, remote_copied_as_is)
{
	static struct proto_remote r;
	static struct aws_cfg cfg;

	memset(&r, 0, sizeof(r));
	for (size_t i = 0; i < NELEM(remote_fields); i++)
		for (size_t k = 0; k < remote_fields[i].len; k++)
			((unsigned char *)&r)[remote_fields[i].wire + k] =
				(unsigned char)(1 + (i * 37 + k) % 255);
	r.addressing = 7;
	r.reserved = 1;
	memset(&cfg, 0, sizeof(cfg));
	openreq_remote_cfg(&r, &cfg);
	for (size_t i = 0; i < NELEM(remote_fields); i++) {
		const char *c = (const char *)&cfg + remote_fields[i].cfg;

		cr_expect(!memcmp(c, (const char *)&r + remote_fields[i].wire,
				  remote_fields[i].len),
			  "%s", remote_fields[i].name);
		cr_expect_null(memchr(c, '\0', remote_fields[i].len),
			       "%s: no terminator added",
			       remote_fields[i].name);
	}
	cr_expect_eq(cfg.addressing, 7);
}
