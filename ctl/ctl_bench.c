/*
 * ctl_bench.c - loaderctl bench: benchmarks, one table of subcommands.
 */
#include <stddef.h>

#include "ctl.h"

static const struct ctl_cmd bench_cmds[] = {
	{ "storage", ctl_bench_storage,
	  "read files with io_uring: MB/s, IOPS, latency, CPU, page cache" },
	{ "pipeline", ctl_bench_pipeline,
	  "the real pipeline on a dataset: stages, bottleneck, fleet sizing" },
	{ NULL, NULL, NULL },
};

int ctl_bench(int argc, char **argv)
{
	return ctl_dispatch(bench_cmds, "loaderctl bench", "subcommand",
			    "SUBCOMMAND", argc, argv);
}
