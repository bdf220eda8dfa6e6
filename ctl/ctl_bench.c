/*
 * ctl_bench.c - loaderctl bench: benchmarks, one table of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

static const struct bench_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} bench_cmds[] = {
	{ "storage", ctl_bench_storage,
	  "read files with io_uring: MB/s, IOPS, latency, CPU, page cache" },
	{ "pipeline", ctl_bench_pipeline,
	  "the real pipeline on a dataset: stages, bottleneck, fleet sizing" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: loaderctl bench SUBCOMMAND [OPTIONS] [ARGS]\n\n"
		   "subcommands:\n");
	for (const struct bench_cmd *c = bench_cmds; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fprintf(f, "\n'loaderctl bench SUBCOMMAND --help' describes one; see "
		   "loaderctl(1).\n");
}

int ctl_bench(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return CTL_FAIL;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return CTL_OK;
	}
	for (const struct bench_cmd *c = bench_cmds; c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "loaderctl bench: unknown subcommand \"%s\"\n\n",
		argv[1]);
	usage(stderr);
	return CTL_FAIL;
}
