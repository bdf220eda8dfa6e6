/*
 * gather_limit.c - the limit of the raw path's gather on one thread:
 * records of one size, kept back to back in memory as the node cache
 * keeps them, copied batch by batch into a ring of slots in a random
 * order (a new permutation each epoch), as a light stream's assembler
 * copies them (pipeline/stream/assemble.c: every line of the record 16 samples
 * ahead asked for first). In the same run, memcpy of the same volume
 * batch by batch, as ldclient --memcpy-ref measures it (memref.h). Prints both rates and their ratio: the most
 * one thread gathering can reach against bench/stream_core.sh's memcpy.
 *
 * With --handoff, each batch also makes one wake-up round trip with
 * another process (a byte through a pipe and back), as a batch handed
 * to a client that sleeps until it comes costs: what that alone takes
 * from the rate, with no daemon.
 *
 *   gather_limit [--handoff] [RECORD_BYTES [RECORDS [BATCH [EPOCHS]]]]
 *       defaults: 792 60000 256 20 (Fashion-MNIST's train split)
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memref.h"

#define SLOTS 8
#define AHEAD 16

/* --handoff: the pipes to the other process and back, else -1. */
static int to_peer = -1, from_peer = -1;

/* A byte to the other process and back: one wake-up each way. */
static void handoff(void)
{
	char c = 0;

	if (to_peer < 0)
		return;
	if (write(to_peer, &c, 1) != 1 || read(from_peer, &c, 1) != 1) {
		fprintf(stderr, "gather_limit: the other process is gone\n");
		exit(1);
	}
}

/* Start the other process of --handoff: it echoes every byte. */
static int start_peer(void)
{
	int there[2], back[2];
	pid_t pid;

	if (pipe(there) || pipe(back))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		char c;

		close(there[1]);
		close(back[0]);
		while (read(there[0], &c, 1) == 1)
			if (write(back[1], &c, 1) != 1)
				break;
		_exit(0);
	}
	close(there[0]);
	close(back[1]);
	to_peer = there[1];
	from_peer = back[0];
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: a fixed sequence, so that every run gathers the same. */
static uint64_t next_rand(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15u);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

static void prefetch(const unsigned char *p, uint64_t len)
{
	for (uint64_t c = 0; c < len; c += 64)
		__builtin_prefetch(p + c);
}

/*
 * Gather epochs of records from data into the ring, batch by batch, each
 * epoch in a new random order (perm). Returns the bytes copied.
 */
static uint64_t gather_epochs(const unsigned char *data, unsigned char *ring,
			      uint32_t *perm, uint64_t rec, uint64_t n,
			      uint64_t batch, uint64_t epochs, uint64_t *seed)
{
	uint64_t bytes = 0;

	for (uint64_t e = 0; e < epochs; e++) {
		for (uint64_t i = n - 1; i > 0; i--) {
			uint64_t j = next_rand(seed) % (i + 1);
			uint32_t v = perm[i];

			perm[i] = perm[j];
			perm[j] = v;
		}
		for (uint64_t b = 0; b + batch <= n; b += batch) {
			unsigned char *slot =
				ring + (b / batch % SLOTS) * batch * rec;
			const uint32_t *p = perm + b;

			for (uint64_t k = 0; k < AHEAD && k < batch; k++)
				prefetch(data + p[k] * rec, rec);
			for (uint64_t k = 0; k < batch; k++) {
				if (k + AHEAD < batch)
					prefetch(data + p[k + AHEAD] * rec,
						 rec);
				memcpy(slot + k * rec, data + p[k] * rec, rec);
			}
			bytes += batch * rec;
			handoff();
		}
	}
	return bytes;
}

int main(int argc, char **argv)
{
	int hand = argc > 1 && !strcmp(argv[1], "--handoff");
	uint64_t rec =
		argc > 1 + hand ? strtoull(argv[1 + hand], NULL, 10) : 792;
	uint64_t n =
		argc > 2 + hand ? strtoull(argv[2 + hand], NULL, 10) : 60000;
	uint64_t batch =
		argc > 3 + hand ? strtoull(argv[3 + hand], NULL, 10) : 256;
	uint64_t epochs =
		argc > 4 + hand ? strtoull(argv[4 + hand], NULL, 10) : 20;
	uint64_t bytes, seed = 1, t0, t1;
	unsigned char *data, *ring;
	struct memref m;
	uint32_t *perm;
	double gather, copy;

	if (!rec || !n || !batch || batch > n || !epochs) {
		fprintf(stderr, "usage: gather_limit [--handoff] [RECORD_BYTES "
				"[RECORDS [BATCH [EPOCHS]]]]\n");
		return 2;
	}
	if (hand && start_peer()) {
		perror("gather_limit: --handoff");
		return 1;
	}
	data = malloc(rec * n);
	ring = malloc(SLOTS * batch * rec);
	perm = malloc(n * sizeof(*perm));
	if (!data || !ring || !perm) {
		fprintf(stderr, "gather_limit: out of memory\n");
		return 1;
	}
	/* Bytes of their own: pages alike could be shared by the host. */
	for (uint64_t i = 0; i < rec * n / 8; i++) {
		uint64_t v = next_rand(&seed);

		memcpy(data + i * 8, &v, 8);
	}
	memset(ring, 2, SLOTS * batch * rec);
	for (uint64_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;

	/* One epoch untimed: the pages of the data and the ring touched. */
	gather_epochs(data, ring, perm, rec, n, batch, 1, &seed);
	t0 = now_ns();
	bytes = gather_epochs(data, ring, perm, rec, n, batch, epochs, &seed);
	t1 = now_ns();
	gather = (double)bytes / (double)(t1 - t0);

	if (memref_run(bytes, batch * rec, &m)) {
		fprintf(stderr, "gather_limit: out of memory\n");
		return 1;
	}
	copy = (double)m.bytes / (double)m.ns;
	printf("gather bytes %" PRIu64 " GBps %.3f memcpy GBps %.3f ratio %.2f"
	       " (check %u %u)\n",
	       bytes, gather, copy, gather / copy, ring[rec / 2], m.check);
	free(data);
	free(ring);
	free(perm);
	return 0;
}
