/*
 * epoch_count.c - stream one epoch of a dataset from loaderd and print
 * how many samples came: the smallest C consumer of libloader, built on
 * <loader.h> alone.
 *
 *	epoch_count SOCKET DATASET
 *
 * Build it against a build tree (README.md, "The pieces") or against the
 * installed library, with pkg-config's flags for loader either way:
 *
 *	cc -o epoch_count epoch_count.c $(pkg-config --cflags --libs loader)
 *
 * Prints "samples N" and exits 0 at the end of the epoch; on an error,
 * prints it (loader_strerror() and the daemon's reason) and exits 1.
 */
#include <stdio.h>

#include <loader.h>

int main(int argc, char **argv)
{
	struct loader_opts o = LOADER_OPTS_INIT;
	struct loader_batch b;
	struct loader *l;
	unsigned long long n = 0;
	char err[256] = "";
	int r;

	if (argc != 3) {
		fprintf(stderr, "usage: epoch_count SOCKET DATASET\n");
		return 2;
	}
	o.socket_path = argv[1];
	o.epochs = 1;
	o.batch_size = 100;
	r = loader_open(&l, argv[2], &o, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "epoch_count: %s: %s%s%s\n", argv[2],
			loader_strerror(r), *err ? ": " : "", err);
		return 1;
	}
	/* Each batch is a view of the daemon's ring until it is released. */
	while ((r = loader_next(l, &b, 10000)) == 0) {
		n += b.count;
		r = loader_release(l, &b);
		if (r < 0)
			break;
	}
	if (r == LOADER_EEND)
		printf("samples %llu\n", n);
	else
		fprintf(stderr, "epoch_count: %s: %s: %s\n", argv[2],
			loader_strerror(r), loader_reason(l));
	loader_close(l);
	return r == LOADER_EEND ? 0 : 1;
}
