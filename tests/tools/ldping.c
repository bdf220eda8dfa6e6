/*
 * ldping.c - measure how long loaderd takes to answer a bystander.
 *
 *	ldping [--ms DURATION] [--interval-ms N] [--timeout-ms T] SOCKET
 *
 * Connects to SOCKET, says HELLO, prints "ready" (so that a test can
 * start what it wants measured), then for DURATION milliseconds (default
 * 3000) sends a STATS request every N milliseconds (default 5) and times
 * each round trip. A request has T milliseconds (default 30000) to be
 * answered: long enough to measure a daemon whose loop is stalled for
 * seconds. At the end it prints
 *
 *	rounds R max_ms M mean_ms A
 *
 * Exit status: 0, 1 on an error (printed as "error: ..."), 2 for bad
 * usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "loader.h"
#include "msg.h"
#include "proto.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int usage(void)
{
	fprintf(stderr, "usage: ldping [--ms DURATION] [--interval-ms N] "
			"[--timeout-ms T] SOCKET\n");
	return 2;
}

/* Send a request and wait for its answer of type want. */
static int round_trip(int fd, uint16_t type, uint32_t seq, const void *m,
		      uint32_t len, uint16_t want, int timeout_ms)
{
	union {
		struct proto_hello_ok hello;
		struct proto_stats_ok stats;
	} r;
	char why[256];
	int err = msg_request(fd, type, seq, m, len, want, &r,
			      want == PROTO_HELLO_OK ? sizeof(r.hello) :
						       sizeof(r.stats),
			      timeout_ms, why, sizeof(why));

	if (err)
		printf("error: %s\n", why);
	return err;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "ms", 1, 0, 'm' },
		{ "interval-ms", 1, 0, 'i' },
		{ "timeout-ms", 1, 0, 't' },
		{ 0, 0, 0, 0 },
	};
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct proto_hello hello = { .version = PROTO_VERSION };
	long duration = 3000, interval = 5, timeout = 30000;
	uint64_t t_end, max = 0, sum = 0, rounds = 0;
	uint32_t seq = 1;
	int c, fd, rc = 1;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'm': duration = strtol(optarg, NULL, 10); break;
		case 'i': interval = strtol(optarg, NULL, 10); break;
		case 't': timeout = strtol(optarg, NULL, 10); break;
		default: return usage();
		}
	}
	if (optind != argc - 1 || duration <= 0 || interval < 0 ||
	    timeout <= 0 || timeout > 3600000)
		return usage();
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		printf("error: socket: %s\n", strerror(errno));
		return 1;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[optind]);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		printf("error: connect %s: %s\n", argv[optind],
		       strerror(errno));
		goto out;
	}
	if (round_trip(fd, PROTO_HELLO, seq++, &hello, sizeof(hello),
		       PROTO_HELLO_OK, (int)timeout))
		goto out;
	printf("ready\n");
	fflush(stdout);
	t_end = now_ns() + (uint64_t)duration * 1000000;
	while (now_ns() < t_end) {
		uint64_t t0 = now_ns(), dt;

		if (round_trip(fd, PROTO_STATS, seq++, NULL, 0, PROTO_STATS_OK,
			       (int)timeout))
			goto out;
		dt = now_ns() - t0;
		if (dt > max)
			max = dt;
		sum += dt;
		rounds++;
		if (interval)
			usleep((useconds_t)interval * 1000);
	}
	printf("rounds %" PRIu64 " max_ms %.1f mean_ms %.2f\n", rounds,
	       (double)max / 1e6, (double)sum / 1e6 / (double)rounds);
	rc = 0;
out:
	close(fd);
	return rc;
}
