/*
 * ctl_bench.c - loaderctl bench: its subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "bench_pipeline.h"
#include "ctl.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *about;
} benches[] = {
	{ "pipeline", ctl_bench_pipeline,
	  "the real pipeline on a dataset: stages, bottleneck, sizing" },
};

int ctl_bench(int argc, char **argv)
{
	size_t n = sizeof(benches) / sizeof(benches[0]);

	if (argc >= 2)
		for (size_t i = 0; i < n; i++)
			if (!strcmp(argv[1], benches[i].name))
				return benches[i].run(argc - 1, argv + 1);
	if (argc < 2 || (strcmp(argv[1], "--help") && strcmp(argv[1], "-h")))
		fprintf(stderr, "loaderctl bench: %s%s\n",
			argc < 2 ? "which benchmark?" : "no benchmark ",
			argc < 2 ? "" : argv[1]);
	printf("usage: loaderctl bench BENCHMARK [OPTIONS] ...\n");
	for (size_t i = 0; i < n; i++)
		printf("  %-10s %s\n", benches[i].name, benches[i].about);
	return argc >= 2 && (!strcmp(argv[1], "--help") ||
			     !strcmp(argv[1], "-h")) ?
		       CTL_OK :
		       CTL_FAIL;
}
