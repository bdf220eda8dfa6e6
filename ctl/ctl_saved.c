/*
 * ctl_saved.c - a running loaderd's saved named streams: loaderctl
 * streams --saved lists them, loaderctl forget drops one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ctl.h"
#include "daemon_query.h"
#include "escape.h"
#include "loader_error.h"
#include "opts.h"
#include "proto.h"

/* "2026-12-01 22:51:40" in local time, from milliseconds since 1970. */
static void when(uint64_t ms, char *buf, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm) || !strftime(buf, n, "%F %T", &tm))
		snprintf(buf, n, "%" PRIu64, ms);
}

int ctl_saved_list(int fd, uint32_t *seq, bool json, const char *prog)
{
	struct proto_saved q = { 0 };
	struct proto_saved_ok r;
	json_t *arr = json ? json_array() : NULL;
	char why[DIAG_MAX];
	uint32_t total = 1;

	for (q.index = 0; q.index < total; q.index++) {
		char at[64], epochs[32], name[4 * sizeof(r.name)];
		int err = daemon_ask(fd, seq, PROTO_SAVED, &q, sizeof(q),
				     PROTO_SAVED_OK, &r, sizeof(r), why,
				     sizeof(why));

		if (err) {
			fprintf(stderr, "%s: %s\n", prog, why);
			json_decref(arr);
			return CTL_FAIL;
		}
		total = r.total;
		if (!total)
			break;
		r.name[sizeof(r.name) - 1] = '\0';
		when(r.updated_ms, at, sizeof(at));
		if (json) {
			json_array_append_new(
				arr,
				json_pack(
					"{s:s, s:i, s:I, s:I, s:I, s:I, s:b, s:i, s:i, s:s, s:I}",
					"name", r.name, "uid", (int)r.uid,
					"epoch", (json_int_t)r.epoch, "batch",
					(json_int_t)r.batch,
					"batches_per_epoch",
					(json_int_t)r.batches_per_epoch,
					"epochs", (json_int_t)r.epochs,
					"finished", (int)r.finished, "rank",
					(int)r.rank, "world", (int)r.world,
					"updated", at, "updated_ms",
					(json_int_t)r.updated_ms));
			continue;
		}
		if (q.index == 0)
			printf("%-24s %6s %6s %10s %8s %9s  %s\n", "NAME",
			       "UID", "EPOCH", "BATCH", "OF", "RANK", "SAVED");
		if (r.epochs)
			snprintf(epochs, sizeof(epochs), "/%" PRIu32, r.epochs);
		else
			snprintf(epochs, sizeof(epochs), "/-");
		printf("%-24s %6" PRIu32 " %4" PRIu32 "%-3s %10" PRIu64
		       " %8" PRIu64 " %4" PRIu32 "/%-4" PRIu32 "  %s%s\n",
		       esc_str(name, sizeof(name), r.name), r.uid, r.epoch,
		       epochs, r.batch, r.batches_per_epoch, r.rank, r.world,
		       at, r.finished ? " (finished)" : "");
	}
	if (json) {
		json_dumpf(arr, stdout, JSON_INDENT(2) | CTL_JSON_REAL);
		putchar('\n');
		json_decref(arr);
	} else if (!total) {
		printf("no saved named streams\n");
	}
	return CTL_OK;
}

struct forget_cli {
	const char *socket;
	int64_t uid;
};

#define O(f) offsetof(struct forget_cli, f)
static const struct opt forget_table[] = {
	DAEMON_SOCKET_OPT(O(socket)),
	{ "uid", 0, OPT_I64, O(uid), "-1", "UID",
	  "the stream's owner (root only; default: yourself)", 0, 0, 0 },
	OPT_END,
};
#undef O

int ctl_forget(int argc, char **argv)
{
	static const char usage[] =
		"loaderctl forget [--socket PATH] [--uid UID] NAME";
	struct forget_cli o = { 0 };
	struct proto_forget q = { 0 };
	struct proto_forget_ok r;
	struct diag d = { { 0 } };
	char why[DIAG_MAX], buf[108];
	uint32_t seq = 0;
	int nargs, help, err, fd;

	err = opts_parse(forget_table, &o, argc, argv, &nargs, &help, &d);
	if (err || help || nargs != 1) {
		if (help) {
			opts_help(
				stdout, usage,
				"Drop the saved position of the named stream NAME, so that\n"
				"the next stream of that name starts where it asks.",
				forget_table);
			return CTL_OK;
		}
		fprintf(stderr, "loaderctl forget: %s\nusage: %s\n",
			err ? d.msg : "expected one NAME", usage);
		return CTL_FAIL;
	}
	if (!argv[0][0] || strlen(argv[0]) >= sizeof(q.name)) {
		fprintf(stderr, "loaderctl forget: a name is 1 to %zu bytes\n",
			sizeof(q.name) - 1);
		return CTL_FAIL;
	}
	if (o.uid > UINT32_MAX) {
		fprintf(stderr,
			"loaderctl forget: --uid %" PRId64 " out of range\n",
			o.uid);
		return CTL_FAIL;
	}
	memcpy(q.name, argv[0], strlen(argv[0]) + 1);
	if (o.uid >= 0) {
		q.uid = (uint32_t)o.uid;
		q.flags = PROTO_FORGET_UID;
	}
	fd = daemon_dial(daemon_socket_path(o.socket, buf, sizeof(buf)), &seq,
			 why, sizeof(why));
	if (fd < 0) {
		fprintf(stderr, "loaderctl forget: %s\n", why);
		return CTL_FAIL;
	}
	err = daemon_ask(fd, &seq, PROTO_FORGET, &q, sizeof(q), PROTO_FORGET_OK,
			 &r, sizeof(r), why, sizeof(why));
	close(fd);
	if (err) {
		fprintf(stderr, "loaderctl forget: %s\n", why);
		return err == -ENOENT ? CTL_FOUND : CTL_FAIL;
	}
	printf("forgot \"%s\" of uid %" PRIu32 "\n", q.name, r.uid);
	return CTL_OK;
}
