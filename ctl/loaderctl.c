/*
 * loaderctl.c - the command line of loaderd: one table of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "ctl.h"

static const struct ctl_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} ctl_cmds[] = {
	{ "pack", ctl_pack,
	  "pack IDX files, an ImageFolder or a tar into a sharded dataset" },
	{ "inspect", ctl_inspect,
	  "show a dataset's or shard's schema, counts and sizes" },
	{ "verify", ctl_verify,
	  "check every record's checksum and decode every field" },
	{ "pipeline", ctl_pipeline,
	  "check an image pipeline spec, run it on a JPEG, or profile it" },
	{ "status", ctl_status, "what a running loaderd is doing" },
	{ "streams", ctl_streams, "a running loaderd's streams, a line each" },
	{ "stats", ctl_stats,
	  "a running loaderd's streams over time: rates, bottleneck; JSON, Prometheus" },
	{ "bench", ctl_bench, "benchmarks: storage (io_uring reads)" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: loaderctl COMMAND [OPTIONS] [ARGS]\n\ncommands:\n");
	for (const struct ctl_cmd *c = ctl_cmds; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fprintf(f,
		"\n'loaderctl COMMAND --help' describes a command; see loaderctl(1).\n");
}

int main(int argc, char **argv)
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
	if (!strcmp(argv[1], "--version")) {
		printf("loaderctl %s\n", PACKAGE_VERSION);
		return CTL_OK;
	}
	for (const struct ctl_cmd *c = ctl_cmds; c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "loaderctl: unknown command \"%s\"\n\n", argv[1]);
	usage(stderr);
	return CTL_FAIL;
}
