/*
 * opts.h - command-line options from one table.
 *
 * Each command describes its options once (name, type, where the value
 * goes, default, help); the same table drives parsing, defaults and the
 * --help text, so they cannot drift apart. The config file (later) reads
 * the same tables.
 */
#ifndef LD_OPTS_H
#define LD_OPTS_H

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
};

#define OPT_END                                                                \
	{                                                                      \
		NULL, 0, OPT_FLAG, 0, NULL, NULL, NULL, 0, 0                   \
	}

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

/* Parse a byte size with an optional K/M/G/T suffix (powers of 1024). */
int opts_parse_size(const char *s, unsigned long long *out);

#endif /* LD_OPTS_H */
