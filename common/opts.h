/*
 * opts.h - command-line options from one table.
 *
 * Each command describes its options once (name, type, where the value
 * goes, default, help); the same table drives parsing, defaults and the
 * --help text, so they cannot drift apart. A config file of
 * "name = value" lines (opts_parse_file) reads the same tables, and
 * opts_print_config() writes one.
 */
#ifndef LD_OPTS_H
#define LD_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "diag.h"

enum opt_type {
	OPT_FLAG, /* bool, no argument */
	OPT_STR,  /* const char * */
	OPT_U64,  /* uint64_t, decimal */
	OPT_I64,  /* int64_t, decimal */
	OPT_SIZE, /* uint64_t bytes, with an optional K/M/G/T suffix (1024s) */
	OPT_F64,  /* double, as strtod() reads it; NaN is never accepted */
	OPT_CHOICE, /* const char *, one of the "|"-separated words of arg */
	OPT_MODE,   /* uint64_t, an octal file mode up to 07777 */
};

struct opt {
	const char *name; /* long name, without "--" */
	char short_name;  /* 0 for none */
	enum opt_type type;
	size_t offset;	 /* of the value in the options struct */
	const char *def; /* default as text; NULL for none (flags: off) */
	const char *arg; /* argument name for help, e.g. "BYTES" */
	const char *help;
	/*
	 * Numbers only: the value (and the default) must lie in [min, max],
	 * checked when min < max; leave both 0 for "any value of the type".
	 */
	double min, max;
	unsigned flags; /* OPT_F_* */
};

/* The option is for the command line only, never in a config file. */
#define OPT_F_CLI_ONLY 1u
/* A running program applies a new value on reload (SIGHUP). */
#define OPT_F_RELOAD 2u

#define OPT_END                                                                \
	{                                                                      \
		NULL, 0, OPT_FLAG, 0, NULL, NULL, NULL, 0, 0, 0                \
	}

/* Set every option of table that has a default to it. */
int opts_defaults(const struct opt *table, void *dst, struct diag *d);

/*
 * Parse argv over dst, as opts_parse() does but without setting the
 * defaults first (a config file may have set values in between).
 */
int opts_parse_argv(const struct opt *table, void *dst, int argc, char **argv,
		    int *nargs, int *help, struct diag *d);

/*
 * Read the config file path over dst: "name = value" lines, names being
 * the table's long names ("_" and "-" alike), "#" starting a comment, a
 * value taken whole to the end of its line (trimmed; double quotes
 * around it are dropped). Flags take yes/no, true/false, on/off or 1/0.
 * An option set twice, an unknown or command-line-only name, or a bad
 * value is an error. String values point into *text, which the caller
 * frees (free()) after the last use of dst; it is set even on error.
 * Returns 0, -errno when the file cannot be read, or LOADER_EUSAGE, with
 * "PATH:LINE: reason" in d.
 */
int opts_parse_file(const struct opt *table, void *dst, const char *path,
		    char **text, struct diag *d);

/*
 * Write a config file of every option a file may set, each with its help
 * as a comment: with dst's values, or (dst NULL) the defaults commented
 * out.
 */
void opts_print_config(FILE *f, const struct opt *table, const void *dst);

/*
 * "NAME VALUE, NAME VALUE, ..." on one line (no newline): every option
 * of table with all of flags set, with dst's values.
 */
void opts_print_values(FILE *f, const struct opt *table, const void *dst,
		       unsigned flags);

/* Do a and b (two structs of table's) hold the same value of option o? */
bool opts_same(const struct opt *o, const void *a, const void *b);

/* Copy option o's value from src to dst (two structs of table's). */
void opts_copy(const struct opt *o, void *dst, const void *src);

/*
 * Apply the defaults of table to dst, then parse argv. Non-option
 * arguments are moved to the front of argv; *nargs gets their count.
 * "-h"/"--help" sets *help. Returns 0 or LOADER_EUSAGE, with a message
 * in d naming the option (and, for a ranged one, the range it allows).
 */
int opts_parse(const struct opt *table, void *dst, int argc, char **argv,
	       int *nargs, int *help, struct diag *d);

/* Print "usage" then one line per option, with defaults. */
void opts_help(FILE *f, const char *usage, const char *about,
	       const struct opt *table);

/*
 * bytes in the binary units OPT_SIZE options take, for messages and
 * status lines: "512 B", "64 KiB", "1 GiB", "1.5 GiB" (one decimal at
 * most, dropped when the value is whole). Writes into buf (n bytes,
 * 16 are enough) and returns it.
 */
const char *opts_size_str(unsigned long long bytes, char *buf, size_t n);

#endif /* LD_OPTS_H */
