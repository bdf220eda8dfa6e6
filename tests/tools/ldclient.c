/*
 * ldclient.c - a test and benchmark consumer of loaderd streams.
 *
 *	ldclient [OPTIONS] SOCKET DATASET
 *
 * Reads a stream through libloader and reports what came: per epoch a
 * digest of every id and output byte (--hash), every sample id (--ids),
 * the outputs' shapes (--shapes), or the cost of a handoff (--handoff).
 * It can also stop consuming (--hold-after) or go slowly (--sleep-ms) for
 * the tests that kill one side. --keep K holds up to K batches at once,
 * releasing the oldest when K are held (and checks that releasing the
 * newest first is refused); --batch-hash prints a digest of each batch;
 * --start-batch N starts the first epoch at its batch N. --pipeline and --on-bad set the image
 * pipeline and bad-sample policy; --stats prints the daemon's counters
 * (bad samples among them) at the end; --warmup N starts the rate's
 * clock after the first N batches, as the torchvision peer does.
 * --name NAME opens a named stream (--fresh: from the start, whatever is
 * saved) and prints where it starts ("start E B resumed 0|1");
 * --kill-after N kills the client with SIGKILL right after its Nth
 * release (a trainer crash; every batch printed was released), and with
 * --kill-held it first takes one more batch ("held E B") and does not
 * release it. --after-release prints a batch's --ids and --batch-hash
 * lines only once its release returned 0 (for a named stream: once the
 * daemon saved it), after a line "releasing E B" before the call (a
 * crash between the two leaves that batch's release undecided). --times
 * prints "time E B COUNT NS" for each batch, NS its arrival on
 * CLOCK_MONOTONIC, to compare streams over a common interval. --from
 * E:B,E:B,... gives a named stream the positions where the ranks of its
 * earlier world stopped (loader_opts.from_world; rank r's is the r-th),
 * as a trainer's checkpoint would, and --from-plan ID:END the plan
 * they ran under (a named stream prints its own: "plan ID END").
 * --member HOW:VALUE:PATH (repeated; HOW proportion, repeat or choose)
 * opens a mixture of those datasets (loader_opts.members; DATASET is
 * then only its name), --epoch-size N sets its epoch; a mixture, of
 * members or of a mixture file named as DATASET, prints "members N"
 * and its --ids lines end with each sample's member. Exit
 * status: 0 at the end of the stream,
 * 3 on a stream error (printed as "error: ...").
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "loader.h"
#include "memref.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ldclient [--outputs SPEC] [--batch N] [--order sequential|random|quasi]\n"
		"  [--seed N] [--epochs N] [--start-epoch N] [--rank R] [--world W] [--drop-last]\n"
		"  [--slots N] [--prefetch BYTES] [--threads N] [--timeout-ms T]\n"
		"  [--hash] [--ids] [--shapes] [--hold-after N] [--sleep-ms T]\n"
		"  [--handoff ROUNDS] [--memcpy] [--memcpy-ref] [--direct]\n"
		"  [--pipeline SPEC] [--on-bad skip|fail] [--stats] [--warmup BATCHES]\n"
		"  [--keep K] [--batch-hash] [--start-batch N]\n"
		"  [--name NAME] [--fresh] [--kill-after N [--kill-held]] [--after-release]\n"
		"  [--reconnect-ms T] [--times] [--open-time] [--from E:B,...]\n"
		"  [--from-plan ID:END] [--member HOW:VALUE:PATH ...] [--epoch-size N]\n"
		"  SOCKET DATASET\n");
	exit(2);
}

/*
 * A trainer crash at a known point: every batch printed so far has been
 * released; with held, one more is taken (and named) but not released.
 * Then SIGKILL, so that nothing of libloader runs on the way out.
 */
static void kill_now(struct loader *l, int held, int timeout)
{
	struct loader_batch b;

	if (held && loader_next(l, &b, timeout) == 0)
		printf("held %" PRIu32 " %" PRIu64 "\n", b.epoch, b.index);
	printf("killed\n");
	fflush(stdout);
	raise(SIGKILL);
}

/* Output k of b into h: its bytes, and a ragged one's offsets after. */
static void hash_output(const struct loader *l, const struct loader_batch *b,
			uint32_t k, XXH3_state_t *h)
{
	const uint64_t *off = loader_offsets(l, b, k);

	XXH3_64bits_update(h, b->out[k].data, b->out[k].bytes);
	if (off)
		XXH3_64bits_update(h, off, (b->count + 1) * sizeof(*off));
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "outputs", 1, 0, 'o' },      { "batch", 1, 0, 'b' },
		{ "order", 1, 0, 'O' },	       { "seed", 1, 0, 's' },
		{ "epochs", 1, 0, 'e' },       { "start-epoch", 1, 0, 'E' },
		{ "rank", 1, 0, 'r' },	       { "world", 1, 0, 'w' },
		{ "drop-last", 0, 0, 'd' },    { "slots", 1, 0, 'S' },
		{ "prefetch", 1, 0, 'p' },     { "threads", 1, 0, 't' },
		{ "timeout-ms", 1, 0, 'T' },   { "hash", 0, 0, 'H' },
		{ "ids", 0, 0, 'i' },	       { "shapes", 0, 0, 'P' },
		{ "hold-after", 1, 0, 'h' },   { "sleep-ms", 1, 0, 'z' },
		{ "handoff", 1, 0, 'x' },      { "memcpy", 0, 0, 'm' },
		{ "memcpy-ref", 0, 0, 'R' },   { "direct", 0, 0, 'D' },
		{ "pipeline", 1, 0, 'L' },     { "on-bad", 1, 0, 'B' },
		{ "stats", 0, 0, 'Q' },	       { "warmup", 1, 0, 'W' },
		{ "keep", 1, 0, 'K' },	       { "batch-hash", 0, 0, 'G' },
		{ "start-batch", 1, 0, 'N' },  { "name", 1, 0, 'n' },
		{ "fresh", 0, 0, 'F' },	       { "kill-after", 1, 0, 'k' },
		{ "kill-held", 0, 0, 'j' },    { "after-release", 0, 0, 'a' },
		{ "reconnect-ms", 1, 0, 'c' }, { "times", 0, 0, 'y' },
		{ "open-time", 0, 0, 'U' },    { "from", 1, 0, 'f' },
		{ "from-plan", 1, 0, 'g' },    { "member", 1, 0, 'M' },
		{ "epoch-size", 1, 0, 'Z' },   { 0, 0, 0, 0 }
	};
	struct loader_opts o = { .size = sizeof(o),
				 .epochs = 1,
				 .member_size = sizeof(struct loader_member) };
	static struct loader_member members[LOADER_MAX_MEMBERS];
	uint32_t nmembers = 0;
	int hash = 0, ids = 0, shapes = 0, stats = 0, timeout = 10000, c, r, rc;
	long hold = -1, sleep_ms = 0, handoff = 0, do_memcpy = 0, ref = 0;
	uint64_t batch_bytes = 0;
	struct loader *l;
	char err[512] = "";
	XXH3_state_t *xx = XXH3_createState(), *bx = XXH3_createState();
	uint64_t nb = 0, ns = 0, bytes = 0, ep_batches = 0, ep_samples = 0;
	uint32_t epoch = UINT32_MAX;
	uint64_t *lat = NULL, nlat = 0, t0, warmup = 0, ns0 = 0, bytes0 = 0;
	unsigned char *copy = NULL;
	size_t copy_cap = 0;
	static struct loader_batch held[1024];
	long keep = 1, nheld = 0, first = 0;
	int bhash = 0, order_err = 0, kill_held = 0, after = 0, times = 0;
	int open_time = 0;
	uint64_t t_open;
	char *mbuf = NULL;
	size_t msize = 0;
	long kill_after = -1;
	static uint32_t from_epoch[4096];
	static uint64_t from_batch[4096];

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'o': o.outputs = optarg; break;
		case 'b': o.batch_size = (uint32_t)atol(optarg); break;
		case 'O':
			o.order = !strcmp(optarg, "random") ?
					  LOADER_ORDER_RANDOM :
				  !strcmp(optarg, "quasi") ?
					  LOADER_ORDER_QUASI :
					  LOADER_ORDER_SEQUENTIAL;
			break;
		case 's': o.seed = strtoull(optarg, NULL, 10); break;
		case 'e': o.epochs = (uint32_t)atol(optarg); break;
		case 'E': o.start_epoch = (uint32_t)atol(optarg); break;
		case 'r': o.rank = (uint32_t)atol(optarg); break;
		case 'w': o.world = (uint32_t)atol(optarg); break;
		case 'd': o.drop_last = 1; break;
		case 'S': o.ring_slots = (uint32_t)atol(optarg); break;
		case 'p': o.prefetch_bytes = strtoull(optarg, NULL, 10); break;
		case 't': o.threads = (uint32_t)atol(optarg); break;
		case 'T': timeout = atoi(optarg); break;
		case 'H': hash = 1; break;
		case 'i': ids = 1; break;
		case 'P': shapes = 1; break;
		case 'h': hold = atol(optarg); break;
		case 'z': sleep_ms = atol(optarg); break;
		case 'x': handoff = atol(optarg); break;
		case 'm': do_memcpy = 1; break;
		case 'R': ref = 1; break;
		case 'D': o.direct = 1; break;
		case 'L': o.pipeline = optarg; break;
		case 'Q': stats = 1; break;
		case 'W': warmup = strtoull(optarg, NULL, 10); break;
		case 'K':
			keep = atol(optarg);
			if (keep < 1 || keep > 1024)
				usage();
			break;
		case 'G': bhash = 1; break;
		case 'y': times = 1; break;
		case 'U': open_time = 1; break;
		case 'g': {
			char *end;

			o.from_plan = strtoull(optarg, &end, 16);
			if (*end != ':')
				usage();
			o.from_plan_end = (uint32_t)strtoul(end + 1, NULL, 10);
			break;
		}
		case 'f':
			for (char *p = optarg; *p;) {
				char *end;

				if (o.from_world == 4096)
					usage();
				from_epoch[o.from_world] =
					(uint32_t)strtoul(p, &end, 10);
				if (*end != ':')
					usage();
				from_batch[o.from_world++] =
					strtoull(end + 1, &end, 10);
				if (*end && *end != ',')
					usage();
				p = *end ? end + 1 : end;
			}
			o.from_epoch = from_epoch;
			o.from_batch = from_batch;
			break;
		case 'M': {
			static const char *const how[] = { "proportion",
							   "repeat", "choose" };
			char *end, *colon = strchr(optarg, ':');
			struct loader_member *m = &members[nmembers];

			if (!colon || nmembers == LOADER_MAX_MEMBERS)
				usage();
			*colon = '\0';
			m->how = UINT32_MAX;
			for (uint32_t h = 0; h < 3; h++)
				if (!strcmp(optarg, how[h]))
					m->how = h;
			m->value = strtod(colon + 1, &end);
			if (m->how == UINT32_MAX || *end != ':')
				usage();
			m->dataset = end + 1;
			o.members = members;
			o.nmembers = ++nmembers;
			break;
		}
		case 'Z': o.epoch_size = strtoull(optarg, NULL, 10); break;
		case 'N': o.start_batch = strtoull(optarg, NULL, 10); break;
		case 'n': o.name = optarg; break;
		case 'F': o.fresh = 1; break;
		case 'k': kill_after = atol(optarg); break;
		case 'j': kill_held = 1; break;
		case 'a': after = 1; break;
		case 'c': o.reconnect_ms = atoi(optarg); break;
		case 'B':
			if (!strcmp(optarg, "skip"))
				o.on_bad = LOADER_BAD_SKIP;
			else if (!strcmp(optarg, "fail"))
				o.on_bad = LOADER_BAD_FAIL;
			else
				usage();
			break;
		default: usage();
		}
	}
	if (argc - optind != 2)
		usage();
	o.socket_path = argv[optind];
	t_open = now_ns();
	r = loader_open(&l, argv[optind + 1], &o, err, sizeof(err));
	if (open_time)
		printf("open_s %.4f\n", (double)(now_ns() - t_open) / 1e9);
	if (r) {
		printf("error: open: %s: %s\n", loader_strerror(r), err);
		XXH3_freeState(xx);
		XXH3_freeState(bx);
		return 3;
	}
	if (o.name) {
		uint32_t se;
		uint64_t sb;
		int resumed = loader_start(l, &se, &sb);

		uint32_t pend;
		uint64_t plan = loader_plan(l, &pend);

		printf("start %" PRIu32 " %" PRIu64 " resumed %d\n", se, sb,
		       resumed);
		printf("plan %016" PRIx64 " %" PRIu32 "\n", plan, pend);
	}
	if (loader_nmembers(l))
		printf("members %" PRIu32 "\n", loader_nmembers(l));
	if (kill_after == 0)
		kill_now(l, kill_held, timeout);
	if (handoff)
		lat = calloc((size_t)handoff * 64, sizeof(*lat));
	t0 = now_ns();
	for (;;) {
		struct loader_batch b;
		uint64_t a0, a1, at;
		FILE *out;

		if (handoff && nb % 8 == 0) {
			/* Let the ring fill, so that the next calls find ready batches. */
			usleep(20000);
		}
		a0 = now_ns();
		r = loader_next(l, &b, timeout);
		if (r)
			break;
		at = times ? now_ns() : 0;
		if (b.epoch != epoch) {
			if (hash && epoch != UINT32_MAX)
				printf("epoch %" PRIu32 " batches %" PRIu64
				       " samples %" PRIu64 " xxh3 %016" PRIx64
				       "\n",
				       epoch, ep_batches, ep_samples,
				       XXH3_64bits_digest(xx));
			epoch = b.epoch;
			ep_batches = ep_samples = 0;
			XXH3_64bits_reset(xx);
		}
		if (shapes && nb == 0)
			for (uint32_t k = 0; k < b.noutputs; k++) {
				printf("output %s dtype %" PRIu32 " shape",
				       b.out[k].name, b.out[k].dtype);
				for (uint32_t d = 0; d < b.out[k].ndim; d++)
					printf(" %" PRIu64, b.out[k].shape[d]);
				printf(" bytes %zu\n", b.out[k].bytes);
			}
		/* --after-release: this batch's lines wait for its release. */
		out = stdout;
		if (after && keep == 1) {
			out = open_memstream(&mbuf, &msize);
			if (!out)
				out = stdout;
		}
		if (times)
			fprintf(out,
				"time %" PRIu32 " %" PRIu64 " %" PRIu32
				" %" PRIu64 "\n",
				b.epoch, b.index, b.count, at);
		if (ids) {
			const uint32_t *mem = loader_members(l, &b);

			for (uint32_t i = 0; i < b.count; i++) {
				fprintf(out,
					"id %" PRIu32 " %" PRIu64 " %" PRIu64,
					b.epoch, b.index, b.ids[i]);
				if (mem)
					fprintf(out, " %" PRIu32, mem[i]);
				fputc('\n', out);
			}
		}
		if (bhash) {
			XXH3_64bits_reset(bx);
			XXH3_64bits_update(bx, b.ids, b.count * sizeof(*b.ids));
			for (uint32_t k = 0; k < b.noutputs; k++)
				hash_output(l, &b, k, bx);
			fprintf(out,
				"batch %" PRIu32 " %" PRIu64 " %" PRIu32
				" xxh3 %016" PRIx64 "\n",
				b.epoch, b.index, b.count,
				XXH3_64bits_digest(bx));
		}
		if (hash) {
			XXH3_64bits_update(xx, b.ids, b.count * sizeof(*b.ids));
			for (uint32_t k = 0; k < b.noutputs; k++)
				hash_output(l, &b, k, xx);
		}
		if (nb == 0)
			for (uint32_t k = 0; k < b.noutputs; k++)
				batch_bytes += b.out[k].bytes;
		for (uint32_t k = 0; k < b.noutputs; k++) {
			bytes += b.out[k].bytes;
			if (do_memcpy) {
				if (copy_cap < b.out[k].bytes) {
					copy = realloc(copy, b.out[k].bytes);
					copy_cap = b.out[k].bytes;
				}
				memcpy(copy, b.out[k].data, b.out[k].bytes);
			}
		}
		nb++;
		ns += b.count;
		ep_batches++;
		ep_samples += b.count;
		if (hold >= 0 && nb >= (uint64_t)hold) {
			printf("holding after %" PRIu64 " batches\n", nb);
			fflush(stdout);
			pause();
		}
		/*
		 * Hold up to `keep` batches; release the oldest when that
		 * many are held. Releasing out of order must be refused.
		 * With one, release at once: the array of held batches is
		 * not touched inside the timed handoff.
		 */
		if (keep == 1) {
			int rr;

			/*
			 * A crash inside the release leaves it undecided:
			 * say which batch that would be.
			 */
			if (out != stdout) {
				printf("releasing %" PRIu32 " %" PRIu64 "\n",
				       b.epoch, b.index);
				fflush(stdout);
			}
			rr = loader_release(l, &b);

			if (out != stdout) {
				fclose(out);
				if (rr == 0) {
					fwrite(mbuf, 1, msize, stdout);
					fflush(stdout);
				} else {
					printf("release failed: %s\n",
					       loader_strerror(rr));
				}
				free(mbuf);
				mbuf = NULL;
			}
		} else {
			held[(first + nheld) % 1024] = b;
			nheld++;
			if (nheld >= 2 &&
			    loader_release(l,
					   &held[(first + nheld - 1) % 1024]) !=
				    -EINVAL)
				order_err = 1;
			if (nheld == keep) {
				loader_release(l, &held[first]);
				first = (first + 1) % 1024;
				nheld--;
			}
		}
		a1 = now_ns();
		if (handoff && nb % 8 != 1 && nlat < (uint64_t)handoff * 64)
			lat[nlat++] = a1 - a0; /* not the first after a fill */
		if (handoff && nb >= (uint64_t)handoff * 8)
			break;
		if (kill_after > 0 && nb == (uint64_t)kill_after)
			kill_now(l, kill_held, timeout);
		if (sleep_ms)
			usleep((useconds_t)sleep_ms * 1000);
		if (warmup && nb == warmup) {
			/* The rate counts from here: the pipeline is full. */
			t0 = now_ns();
			ns0 = ns;
			bytes0 = bytes;
		}
	}
	if (hash && epoch != UINT32_MAX && r == LOADER_EEND)
		printf("epoch %" PRIu32 " batches %" PRIu64 " samples %" PRIu64
		       " xxh3 %016" PRIx64 "\n",
		       epoch, ep_batches, ep_samples, XXH3_64bits_digest(xx));
	if (handoff && nlat) {
		qsort(lat, nlat, sizeof(*lat), cmp_u64);
		printf("handoff %" PRIu64
		       " calls p50 %.2f us p99 %.2f us max %.2f us\n",
		       nlat, lat[nlat / 2] / 1e3, lat[nlat * 99 / 100] / 1e3,
		       lat[nlat - 1] / 1e3);
	} else {
		double s = (double)(now_ns() - t0) * 1e-9;

		printf("total batches %" PRIu64 " samples %" PRIu64
		       " bytes %" PRIu64
		       " seconds %.3f samples_per_s %.0f GBps %.3f warmup %" PRIu64
		       "\n",
		       nb, ns, bytes, s, (ns - ns0) / s,
		       (bytes - bytes0) / s / 1e9, warmup);
	}
	if (stats) {
		struct loader_stats st = LOADER_STATS_INIT;
		int e = loader_stats(l, &st);

		if (e)
			printf("error: stats: %s\n", loader_strerror(e));
		else
			printf("stats bad_samples %" PRIu64
			       " bytes_read %" PRIu64 " rss %" PRIu64
			       " cache_hits %" PRIu64 " cache_misses %" PRIu64
			       "\n",
			       st.daemon_bad_samples, st.daemon_bytes_read,
			       st.daemon_rss, st.daemon_cache_hits,
			       st.daemon_cache_misses);
	}
	if (ref && bytes && batch_bytes) {
		/* The limit to compare with (memref.h). */
		struct memref m;

		if (memref_run(bytes, batch_bytes, &m))
			printf("error: memcpy: no memory for the reference\n");
		else
			printf("memcpy bytes %" PRIu64
			       " seconds %.3f GBps %.3f (check %u)\n",
			       m.bytes, m.ns * 1e-9, (double)m.bytes / m.ns,
			       m.check);
	}
	rc = 0;
	if (order_err) {
		printf("error: a release out of order was accepted\n");
		rc = 3;
	}
	if (r && r != LOADER_EEND &&
	    !(handoff && nb >= (uint64_t)handoff * 8)) {
		printf("error: %s: %s\n", loader_strerror(r), loader_reason(l));
		rc = 3;
	}
	fflush(stdout);
	loader_close(l);
	free(lat);
	free(copy);
	XXH3_freeState(xx);
	XXH3_freeState(bx);
	return rc;
}
