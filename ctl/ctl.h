/*
 * ctl.h - loaderctl's subcommands. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status:
 * 0 success, 1 the command ran and found a problem (verify), 2 usage or
 * an error that stopped it.
 */
#ifndef LD_CTL_H
#define LD_CTL_H

#include <stdint.h>

#define CTL_OK	  0
#define CTL_FOUND 1
#define CTL_FAIL  2

/*
 * What every JSON output of loaderctl is dumped with besides its layout
 * flags: reals at 6 significant digits ("27.036", not
 * "27.036000000000001").
 */
#define CTL_JSON_REAL JSON_REAL_PRECISION(6)

int ctl_pack(int argc, char **argv);
int ctl_inspect(int argc, char **argv);
int ctl_verify(int argc, char **argv);
int ctl_pipeline(int argc, char **argv);
int ctl_status(int argc, char **argv);
int ctl_streams(int argc, char **argv);
int ctl_stats(int argc, char **argv);
int ctl_forget(int argc, char **argv);
/* mix dispatches to create and inspect (ctl_mix.c). */
int ctl_mix(int argc, char **argv);
/* bench dispatches to its own subcommands (ctl_bench.c's table). */
int ctl_bench(int argc, char **argv);
int ctl_bench_storage(int argc, char **argv);
int ctl_bench_pipeline(int argc, char **argv);

/*
 * Parse a --jpeg-restart value: "off" (0) or MCUs per segment, 1..64.
 * Returns CTL_OK, or CTL_FAIL after printing "PROG: --jpeg-restart: ..."
 * to stderr.
 */
int ctl_parse_restart(const char *prog, const char *s, uint32_t *out);

/* A command (or a subcommand of one) and what it does, for usage. */
struct ctl_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

/*
 * Run the command of cmds (NULL-terminated) that argv[1] names, with
 * argv[1..]; with none, "-h", "--help" or "help", print the list. prog
 * ("loaderctl" or "loaderctl bench"), noun ("command", in errors) and
 * meta ("COMMAND", in the usage line) word the messages.
 */
int ctl_dispatch(const struct ctl_cmd *cmds, const char *prog, const char *noun,
		 const char *meta, int argc, char **argv);

#endif /* LD_CTL_H */
