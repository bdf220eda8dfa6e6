/*
 * test_proto.c - the control protocol's pieces that need no daemon:
 * payload sizes, the outputs option parser, and sending and receiving
 * messages (with descriptors) over a socketpair, good and malformed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "loader.h"
#include "msg.h"
#include "outputs.h"
#include "proto.h"
#include "../unit_util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- proto_payload_size ------------------------------------------------ */

static const struct {
	uint16_t type;
	uint32_t size;
} sizes[] = {
	{ PROTO_HELLO, 8 },
	{ PROTO_HELLO_OK, 24 },
	{ PROTO_FILES, 16 },
	{ PROTO_OPEN, 984 },
	{ PROTO_OPEN_OK, 64 },
	{ PROTO_STATS, 0 },
	{ PROTO_STATS_OK, 64 },
	{ PROTO_ERROR, 0 },
	{ 0, 0 },
	{ PROTO_REMOTE, 5780 },
	{ PROTO_POSITIONS, 8216 },
	{ PROTO_TYPE_END, 0 },
	{ 0xffff, 0 },
};

Test(proto, payload_sizes)
{
	for (size_t i = 0; i < NELEM(sizes); i++)
		cr_expect_eq(proto_payload_size(sizes[i].type), sizes[i].size,
			     "type %u: %u bytes, expected %u", sizes[i].type,
			     proto_payload_size(sizes[i].type), sizes[i].size);
	cr_expect_eq(sizeof(struct proto_hdr), 16);
	cr_expect_eq(sizeof(struct proto_error), 8);
	cr_expect_eq(sizeof(struct proto_output), 40);
}

/* ---- loader_parse_outputs ------------------------------------------------ */

struct want_out {
	const char *field;
	uint32_t cast;
};

static const struct {
	const char *spec;
	uint32_t n;
	struct want_out out[PROTO_MAX_OUTPUTS];
} good_outputs[] = {
	{ "image:unit,label",
	  2,
	  { { "image", PROTO_CAST_F32_UNIT }, { "label", PROTO_CAST_NONE } } },
	{ "x", 1, { { "x", PROTO_CAST_NONE } } },
	{ "x:f32", 1, { { "x", PROTO_CAST_F32 } } },
	{ "a.b-c_D9:unit", 1, { { "a.b-c_D9", PROTO_CAST_F32_UNIT } } },
	{ "abcdefghijklmnopqrstuvwxyz01234",
	  1,
	  { { "abcdefghijklmnopqrstuvwxyz01234", PROTO_CAST_NONE } } },
	{ "a,b:f32,c,d:unit,e,f,g,h",
	  8,
	  { { "a", 0 },
	    { "b", PROTO_CAST_F32 },
	    { "c", 0 },
	    { "d", PROTO_CAST_F32_UNIT },
	    { "e", 0 },
	    { "f", 0 },
	    { "g", 0 },
	    { "h", 0 } } },
};

static const char *const bad_outputs[] = {
	"",
	",",
	"a,",
	",a",
	"a,,b",
	"a:",
	":unit",
	"a:bogus",
	"a:UNIT",
	"a:unit:f32",
	"a:unit,",
	"a b",
	" a",
	"a ",
	"a:unit ",
	"a/b",
	"a\tb",
	"abcdefghijklmnopqrstuvwxyz012345", /* 32 characters */
	"a,b,c,d,e,f,g,h,i",		    /* 9 outputs */
	"a,a",
	"a:unit,a:f32",
	"\xc3\xa9t\xc3\xa9",
};

Test(outputs, good)
{
	struct proto_output out[PROTO_MAX_OUTPUTS];
	char why[256];
	uint32_t n;

	for (size_t i = 0; i < NELEM(good_outputs); i++) {
		memset(out, 0xa5, sizeof(out));
		cr_assert_eq(loader_parse_outputs(good_outputs[i].spec, out, &n,
						  why, sizeof(why)),
			     0, "\"%s\": %s", good_outputs[i].spec, why);
		cr_assert_eq(n, good_outputs[i].n, "\"%s\": %u outputs",
			     good_outputs[i].spec, n);
		for (uint32_t k = 0; k < n; k++) {
			const struct want_out *w = &good_outputs[i].out[k];
			size_t len = strlen(w->field);

			cr_expect_str_eq(out[k].field, w->field);
			cr_expect_eq(out[k].cast, w->cast, "\"%s\" entry %u",
				     good_outputs[i].spec, k);
			cr_expect_eq(out[k].reserved, 0);
			/* Zero-filled past the name: it goes on the wire. */
			for (size_t j = len; j < PROTO_NAME_MAX; j++)
				cr_expect_eq(out[k].field[j], 0);
		}
	}
}

Test(outputs, null_means_all)
{
	struct proto_output out[PROTO_MAX_OUTPUTS];
	uint32_t n = 99;

	cr_assert_eq(loader_parse_outputs(NULL, out, &n, NULL, 0), 0);
	cr_expect_eq(n, 0);
	cr_expect_eq(loader_parse_outputs("x", NULL, &n, NULL, 0), -EINVAL);
	cr_expect_eq(loader_parse_outputs("x", out, NULL, NULL, 0), -EINVAL);
}

Test(outputs, bad)
{
	struct proto_output out[PROTO_MAX_OUTPUTS];
	char why[256];
	uint32_t n;

	for (size_t i = 0; i < NELEM(bad_outputs); i++) {
		n = 99;
		why[0] = '\0';
		cr_expect_eq(loader_parse_outputs(bad_outputs[i], out, &n, why,
						  sizeof(why)),
			     LOADER_EUSAGE, "\"%s\" accepted", bad_outputs[i]);
		cr_expect_eq(n, 0, "\"%s\": n = %u", bad_outputs[i], n);
		cr_expect_neq(why[0], '\0', "\"%s\": no reason",
			      bad_outputs[i]);
		/* No reason buffer at all must be fine too. */
		cr_expect_eq(
			loader_parse_outputs(bad_outputs[i], out, &n, NULL, 0),
			LOADER_EUSAGE);
	}
}

/* ---- msg_send / msg_recv ------------------------------------------------- */

static int sp[2] = { -1, -1 };

static void pair_setup(void)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp),
		     0);
}

static void pair_teardown(void)
{
	if (sp[0] >= 0)
		close(sp[0]);
	if (sp[1] >= 0)
		close(sp[1]);
	sp[0] = sp[1] = -1;
}

/* Descriptors open in this process: a malformed message must not add any. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own */
}

/* Send raw bytes (a packet msg_send would never make) with nfds fds. */
static void send_raw(const void *buf, size_t len, const int *fds, unsigned nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	cr_assert_leq(nfds, 8);
	if (nfds) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	cr_assert_eq(sendmsg(sp[0], &m, 0), (ssize_t)len);
}

static void hdr_init(struct proto_hdr *h, uint16_t type, uint32_t len)
{
	*h = (struct proto_hdr){ .magic = PROTO_MAGIC,
				 .version = PROTO_VERSION,
				 .type = type,
				 .length = len,
				 .seq = 7 };
}

Test(msg, round_trip, .init = pair_setup, .fini = pair_teardown)
{
	struct proto_hello hello = { .version = PROTO_VERSION, .flags = 0 };
	struct proto_hello got;
	struct proto_hdr h;
	char why[128];

	cr_assert_eq(msg_send(sp[0], PROTO_HELLO, 42, &hello, sizeof(hello),
			      NULL, 0),
		     0);
	cr_assert_eq(msg_recv(sp[1], &h, &got, sizeof(got), NULL, 0, NULL, why,
			      sizeof(why)),
		     0, "%s", why);
	cr_expect_eq(h.magic, PROTO_MAGIC);
	cr_expect_eq(h.version, PROTO_VERSION);
	cr_expect_eq(h.type, PROTO_HELLO);
	cr_expect_eq(h.length, sizeof(hello));
	cr_expect_eq(h.seq, 42);
	cr_expect_eq(got.version, PROTO_VERSION);

	/* An empty payload (STATS) into no buffer at all. */
	cr_assert_eq(msg_send(sp[0], PROTO_STATS, 43, NULL, 0, NULL, 0), 0);
	cr_assert_eq(
		msg_recv(sp[1], &h, NULL, 0, NULL, 0, NULL, why, sizeof(why)),
		0, "%s", why);
	cr_expect_eq(h.type, PROTO_STATS);
	cr_expect_eq(h.seq, 43);
}

Test(msg, descriptors, .init = pair_setup, .fini = pair_teardown)
{
	struct proto_open_ok ok = { .ring_bytes = 1 << 20, .cons_bytes = 4096 };
	struct proto_open_ok got;
	struct proto_hdr h;
	int p[2], fds[2], rfds[2];
	unsigned n = 9;
	char why[128], c = 0;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	fds[0] = p[0];
	fds[1] = p[1];
	cr_assert_eq(msg_send(sp[0], PROTO_OPEN_OK, 3, &ok, sizeof(ok), fds, 2),
		     0);
	close(p[0]);
	close(p[1]);
	cr_assert_eq(msg_recv(sp[1], &h, &got, sizeof(got), rfds, 2, &n, why,
			      sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(n, 2);
	cr_expect_eq(got.ring_bytes, 1 << 20);
	/* They are the pipe's two ends, close-on-exec. */
	cr_expect(fcntl(rfds[0], F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(write(rfds[1], "x", 1), 1);
	cr_assert_eq(read(rfds[0], &c, 1), 1);
	cr_expect_eq(c, 'x');
	close(rfds[0]);
	close(rfds[1]);
}

Test(msg, error_payload, .init = pair_setup, .fini = pair_teardown)
{
	struct {
		struct proto_error e;
		char reason[PROTO_REASON_MAX];
	} m = { .e = { .code = LOADER_EUSAGE, .len = 5 } }, got;
	struct proto_hdr h;
	char why[128];

	memcpy(m.reason, "nope!", 5);
	cr_assert_eq(
		msg_send(sp[0], PROTO_ERROR, 1, &m, sizeof(m.e) + 5, NULL, 0),
		0);
	cr_assert_eq(msg_recv(sp[1], &h, &got, sizeof(got), NULL, 0, NULL, why,
			      sizeof(why)),
		     0, "%s", why);
	cr_expect_eq(got.e.code, LOADER_EUSAGE);
	cr_expect_eq(got.e.len, 5);
	cr_expect_eq(memcmp(got.reason, "nope!", 5), 0);
}

Test(msg, send_limits, .init = pair_setup, .fini = pair_teardown)
{
	static char big[PROTO_MAX_MSG];
	int fds[PROTO_MAX_FDS + 1] = { 0 };

	cr_expect_eq(msg_send(sp[0], PROTO_OPEN, 1, big,
			      PROTO_MAX_MSG - sizeof(struct proto_hdr) + 1,
			      NULL, 0),
		     -EMSGSIZE);
	cr_expect_eq(msg_send(sp[0], PROTO_FILES, 1, big, 16, fds,
			      PROTO_MAX_FDS + 1),
		     -EINVAL);
	cr_expect_eq(msg_send(sp[0], PROTO_HELLO, 1, NULL, 8, NULL, 0),
		     -EINVAL);
	close(sp[1]);
	sp[1] = -1;
	cr_expect_eq(msg_send(sp[0], PROTO_STATS, 1, NULL, 0, NULL, 0), -EPIPE);
}

Test(msg, peer_closed, .init = pair_setup, .fini = pair_teardown)
{
	struct proto_hdr h;
	char buf[64], why[128];

	close(sp[0]);
	sp[0] = -1;
	cr_expect_eq(msg_recv(sp[1], &h, buf, sizeof(buf), NULL, 0, NULL, why,
			      sizeof(why)),
		     -EPIPE);
}

/* A 0-byte packet is a malformed message, not a hang-up. */
Test(msg, empty_packet, .init = pair_setup, .fini = pair_teardown)
{
	struct proto_hdr h;
	char buf[64], why[128] = "";

	cr_assert_eq(send(sp[0], "", 0, 0), 0);
	cr_expect_eq(msg_recv(sp[1], &h, buf, sizeof(buf), NULL, 0, NULL, why,
			      sizeof(why)),
		     LOADER_EPROTO);
	cr_expect(strstr(why, "empty packet"), "reason \"%s\"", why);
	/* The connection is still good. */
	cr_expect_eq(msg_send(sp[0], PROTO_STATS, 7, NULL, 0, NULL, 0), 0);
	cr_expect_eq(msg_recv(sp[1], &h, buf, sizeof(buf), NULL, 0, NULL, why,
			      sizeof(why)),
		     0);
	cr_expect_eq(h.seq, 7);
}

/*
 * Malformed packets: each is sent raw, with two descriptors attached,
 * and must come back as LOADER_EPROTO with a reason and no descriptor
 * left open.
 */
enum bad_kind {
	BAD_MAGIC,
	BAD_VERSION,
	BAD_TYPE_ZERO,
	BAD_TYPE_HIGH,
	BAD_SHORT,
	BAD_EMPTY,
	BAD_LEN_SAYS_MORE,
	BAD_LEN_SAYS_LESS,
	BAD_LEN_FOR_TYPE,
	BAD_TOO_LONG,
	BAD_ERROR_SHORT,
	BAD_ERROR_REASON_LEN,
	BAD_ERROR_REASON_MAX,
};

static const struct {
	enum bad_kind kind;
	const char *name;
} bad_msgs[] = {
	{ BAD_MAGIC, "wrong magic" },
	{ BAD_VERSION, "wrong version" },
	{ BAD_TYPE_ZERO, "type 0" },
	{ BAD_TYPE_HIGH, "type past the end" },
	{ BAD_SHORT, "short packet" },
	{ BAD_EMPTY, "zero-length header fragment" },
	{ BAD_LEN_SAYS_MORE, "length above the bytes sent" },
	{ BAD_LEN_SAYS_LESS, "length below the bytes sent" },
	{ BAD_LEN_FOR_TYPE, "length not the type's" },
	{ BAD_TOO_LONG, "longer than the buffer" },
	{ BAD_ERROR_SHORT, "ERROR shorter than its head" },
	{ BAD_ERROR_REASON_LEN, "ERROR reason length mismatch" },
	{ BAD_ERROR_REASON_MAX, "ERROR reason over the maximum" },
};

Test(msg, malformed, .init = pair_setup, .fini = pair_teardown)
{
	unsigned char pkt[1024];
	unsigned char buf[512];
	struct proto_hdr h, got;
	struct proto_error e;
	int p[2], rfds[4];
	int before;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	before = count_fds();
	for (size_t i = 0; i < NELEM(bad_msgs); i++) {
		size_t len = sizeof(h) + sizeof(struct proto_hello);
		unsigned n = 9;
		char why[128] = "";

		memset(pkt, 0, sizeof(pkt));
		hdr_init(&h, PROTO_HELLO, sizeof(struct proto_hello));
		switch (bad_msgs[i].kind) {
		case BAD_MAGIC: h.magic ^= 1; break;
		case BAD_VERSION: h.version = PROTO_VERSION + 1; break;
		case BAD_TYPE_ZERO: h.type = 0; break;
		case BAD_TYPE_HIGH: h.type = PROTO_TYPE_END; break;
		case BAD_SHORT: len = sizeof(h) - 1; break;
		case BAD_EMPTY: len = 4; break;
		case BAD_LEN_SAYS_MORE: h.length += 1; break;
		case BAD_LEN_SAYS_LESS: len += 4; break;
		case BAD_LEN_FOR_TYPE:
			h.length = 4;
			len = sizeof(h) + 4;
			break;
		case BAD_TOO_LONG:
			h.type = PROTO_OPEN;
			h.length = sizeof(struct proto_open);
			len = sizeof(h) + h.length; /* buf holds only 512 */
			cr_assert_gt(h.length, 0);
			break;
		case BAD_ERROR_SHORT:
			h.type = PROTO_ERROR;
			h.length = 4;
			len = sizeof(h) + 4;
			break;
		case BAD_ERROR_REASON_LEN:
			h.type = PROTO_ERROR;
			h.length = sizeof(e) + 10;
			len = sizeof(h) + h.length;
			e = (struct proto_error){ .code = -EIO, .len = 9 };
			memcpy(pkt + sizeof(h), &e, sizeof(e));
			break;
		case BAD_ERROR_REASON_MAX:
			h.type = PROTO_ERROR;
			h.length = sizeof(e) + PROTO_REASON_MAX + 1;
			len = sizeof(h) + h.length;
			e = (struct proto_error){ .code = -EIO,
						  .len = PROTO_REASON_MAX + 1 };
			memcpy(pkt + sizeof(h), &e, sizeof(e));
			break;
		}
		memcpy(pkt, &h, sizeof(h));
		send_raw(pkt, len, p, 2);
		/*
		 * BAD_TOO_LONG needs a buffer smaller than its 904 bytes;
		 * BAD_ERROR_REASON_MAX one larger than its 409.
		 */
		cr_expect_eq(msg_recv(sp[1], &got, buf,
				      bad_msgs[i].kind == BAD_TOO_LONG ?
					      64 :
					      sizeof(buf),
				      rfds, 4, &n, why, sizeof(why)),
			     LOADER_EPROTO, "%s: accepted", bad_msgs[i].name);
		cr_expect_eq(n, 0, "%s: %u fds", bad_msgs[i].name, n);
		cr_expect_neq(why[0], '\0', "%s: no reason", bad_msgs[i].name);
		cr_expect_eq(count_fds(), before, "%s: leaked descriptors",
			     bad_msgs[i].name);
		/* A server echoes the seq of a bad message it could parse. */
		if (len >= sizeof(h))
			cr_expect_eq(got.seq, 7, "%s: header not kept",
				     bad_msgs[i].name);
	}
	close(p[0]);
	close(p[1]);
}

Test(msg, too_many_fds, .init = pair_setup, .fini = pair_teardown)
{
	struct proto_hello hello = { .version = PROTO_VERSION };
	struct proto_hello got;
	struct proto_hdr h;
	int p[2], fds[3], rfds[2];
	unsigned n = 9;
	char why[128] = "";
	int before;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	fds[0] = p[0];
	fds[1] = p[1];
	fds[2] = p[0];
	before = count_fds();

	/* Three descriptors where two fit: MSG_CTRUNC. */
	cr_assert_eq(
		msg_send(sp[0], PROTO_HELLO, 1, &hello, sizeof(hello), fds, 3),
		0);
	cr_expect_eq(msg_recv(sp[1], &h, &got, sizeof(got), rfds, 2, &n, why,
			      sizeof(why)),
		     LOADER_EPROTO);
	cr_expect_eq(n, 0);
	cr_expect_neq(why[0], '\0');
	cr_expect_eq(count_fds(), before, "leaked descriptors");

	/* One where none is expected. */
	cr_assert_eq(
		msg_send(sp[0], PROTO_HELLO, 2, &hello, sizeof(hello), fds, 1),
		0);
	cr_expect_eq(msg_recv(sp[1], &h, &got, sizeof(got), NULL, 0, NULL, why,
			      sizeof(why)),
		     LOADER_EPROTO);
	cr_expect_eq(count_fds(), before, "leaked descriptors");

	/* The socket still works: boundaries are kept. */
	cr_assert_eq(
		msg_send(sp[0], PROTO_HELLO, 3, &hello, sizeof(hello), NULL, 0),
		0);
	cr_expect_eq(msg_recv(sp[1], &h, &got, sizeof(got), rfds, 2, &n, why,
			      sizeof(why)),
		     0, "%s", why);
	cr_expect_eq(h.seq, 3);
	close(p[0]);
	close(p[1]);
}

Test(msg, recv_arguments, .init = pair_setup, .fini = pair_teardown)
{
	struct proto_hdr h;
	char buf[16];
	int fds[1];
	unsigned n;

	cr_expect_eq(
		msg_recv(sp[1], &h, buf, sizeof(buf), NULL, 1, &n, NULL, 0),
		-EINVAL);
	cr_expect_eq(msg_recv(sp[1], &h, buf, sizeof(buf), fds,
			      PROTO_MAX_FDS + 1, &n, NULL, 0),
		     -EINVAL);
	cr_expect_eq(msg_recv(sp[1], &h, NULL, 8, NULL, 0, NULL, NULL, 0),
		     -EINVAL);
	cr_expect_eq(msg_type_name(PROTO_OPEN_OK)[0], 'O');
	cr_expect_str_eq(msg_type_name(0), "?");
	cr_expect_str_eq(msg_type_name(PROTO_TYPE_END), "?");
}
