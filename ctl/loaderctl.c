/*
 * loaderctl.c - the command line of loaderd: one table of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "ctl.h"
#include "s3ds.h"

static const struct ctl_cmd ctl_cmds[] = {
	{ "pack", ctl_pack,
	  "pack IDX files, an ImageFolder or a tar into a dataset, here or at s3://" },
	{ "inspect", ctl_inspect,
	  "show a dataset's or shard's schema, counts and sizes, here or at s3://" },
	{ "verify", ctl_verify,
	  "check every record's checksum and decode every field" },
	{ "pipeline", ctl_pipeline,
	  "check an image pipeline spec, run it on a JPEG, or profile it" },
	{ "status", ctl_status, "what a running loaderd is doing" },
	{ "streams", ctl_streams, "a running loaderd's streams, a line each" },
	{ "stats", ctl_stats,
	  "a running loaderd's streams over time: rates, bottleneck; JSON, Prometheus" },
	{ "forget", ctl_forget, "drop a saved named stream's position" },
	{ "mix", ctl_mix,
	  "write and inspect a mixture file: datasets streamed as one, by weight" },
	{ "bench", ctl_bench,
	  "measure storage and the pipeline; size a fleet of accelerators" },
	{ NULL, NULL, NULL },
};

static void usage(FILE *f, const struct ctl_cmd *cmds, const char *prog,
		  const char *meta)
{
	fprintf(f, "usage: %s %s [OPTIONS] [ARGS]\n\n", prog, meta);
	for (const struct ctl_cmd *c = cmds; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fprintf(f, "\n'%s %s --help' describes one; see loaderctl(1).\n", prog,
		meta);
}

int ctl_dispatch(const struct ctl_cmd *cmds, const char *prog, const char *noun,
		 const char *meta, int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr, cmds, prog, meta);
		return CTL_FAIL;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout, cmds, prog, meta);
		return CTL_OK;
	}
	for (const struct ctl_cmd *c = cmds; c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown %s \"%s\"\n\n", prog, noun, argv[1]);
	usage(stderr, cmds, prog, meta);
	return CTL_FAIL;
}

int main(int argc, char **argv)
{
	/*
	 * libcurl's global state, before any command starts a thread (pack
	 * and bench do). Its failure is reported by the s3:// commands that
	 * need it; the others run without it.
	 */
	(void)s3ds_global_init();
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("loaderctl %s\n", PACKAGE_VERSION);
		return CTL_OK;
	}
	return ctl_dispatch(ctl_cmds, "loaderctl", "command", "COMMAND", argc,
			    argv);
}
