/*
 * opts.c - table-driven option parsing over getopt_long.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loader_error.h"
#include "opts.h"

#define OPTS_MAX 64

int opts_parse_size(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	}
	if (*end == 'i' && shift)
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

/*
 * Whether v lies in o's range (any v but NaN when o has none). NaN fails
 * the range test too, since every comparison with it is false. Integers
 * are compared as doubles: exact below 2^53, where bounds are named, and
 * a max of (double)UINT64_MAX (2^64) still admits every uint64_t.
 */
static bool in_range(const struct opt *o, double v)
{
	if (!(o->min < o->max))
		return !isnan(v);
	return v >= o->min && v <= o->max;
}

static int set_value(const struct opt *o, void *dst, const char *val,
		     struct diag *d)
{
	void *p = (char *)dst + o->offset;
	char *end;
	unsigned long long u;
	long long i;
	double f;

	switch (o->type) {
	case OPT_FLAG: *(bool *)p = true; return 0;
	case OPT_STR: *(const char **)p = val; return 0;
	case OPT_U64:
		errno = 0;
		u = strtoull(val, &end, 10);
		if (end == val || *end || errno || *val == '-' ||
		    !in_range(o, (double)u))
			break;
		*(uint64_t *)p = u;
		return 0;
	case OPT_I64:
		errno = 0;
		i = strtoll(val, &end, 10);
		if (end == val || *end || errno || !in_range(o, (double)i))
			break;
		*(int64_t *)p = i;
		return 0;
	case OPT_SIZE:
		if (opts_parse_size(val, &u) || !in_range(o, (double)u))
			break;
		*(uint64_t *)p = u;
		return 0;
	case OPT_F64:
		errno = 0;
		f = strtod(val, &end);
		if (end == val || *end || errno || !in_range(o, f))
			break;
		*(double *)p = f;
		return 0;
	}
	/* A ranged option says what it takes; the rest keep the short form. */
	if (o->min < o->max && o->type == OPT_F64)
		return diag_set(d, LOADER_EUSAGE,
				"--%s: \"%s\" is not a number in [%g, %g]",
				o->name, val, o->min, o->max);
	if (o->min < o->max)
		return diag_set(
			d, LOADER_EUSAGE,
			"--%s: \"%s\" is not an integer in [%.0f, %.0f]",
			o->name, val, o->min, o->max);
	return diag_set(d, LOADER_EUSAGE, "--%s: invalid value \"%s\"", o->name,
			val);
}

int opts_parse(const struct opt *table, void *dst, int argc, char **argv,
	       int *nargs, int *help, struct diag *d)
{
	struct option lo[OPTS_MAX + 2];
	char so[3 * OPTS_MAX + 4] = "+:h";
	size_t ns = strlen(so), n = 0;
	int err, c, idx;

	*help = 0;
	for (const struct opt *o = table; o->name; o++, n++) {
		if (o->def) {
			err = set_value(o, dst, o->def, d);
			if (err)
				return err;
		}
		lo[n] = (struct option){ o->name,
					 o->type == OPT_FLAG ?
						 no_argument :
						 required_argument,
					 NULL, 256 + (int)n };
		if (o->short_name) {
			so[ns++] = o->short_name;
			if (o->type != OPT_FLAG)
				so[ns++] = ':';
		}
	}
	so[ns] = '\0';
	lo[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[n] = (struct option){ 0 };

	/* Arguments and options may be mixed: collect arguments as we go. */
	*nargs = 0;
	optind = 1;
	opterr = 0;
	while (optind < argc) {
		idx = -1;
		c = getopt_long(argc, argv, so, lo, &idx);
		if (c == -1) {
			argv[(*nargs)++] = argv[optind++];
			continue;
		}
		if (c == 'h') {
			*help = 1;
			continue;
		}
		if (c == '?' || c == ':') {
			const char *bad = argv[optind - 1];

			return diag_set(d, LOADER_EUSAGE, "%s option %s",
					c == ':' ? "missing argument to" :
						   "unknown",
					bad ? bad : "?");
		}
		if (c < 256) {
			for (const struct opt *o = table; o->name; o++)
				if (o->short_name == c) {
					c = 256 + (int)(o - table);
					break;
				}
		}
		err = set_value(&table[c - 256], dst, optarg, d);
		if (err)
			return err;
	}
	return 0;
}

void opts_help(FILE *f, const char *usage, const char *about,
	       const struct opt *table)
{
	fprintf(f, "usage: %s\n", usage);
	if (about)
		fprintf(f, "\n%s\n", about);
	fprintf(f, "\noptions:\n");
	for (const struct opt *o = table; o->name; o++) {
		char left[64];

		if (o->short_name)
			snprintf(left, sizeof(left), "-%c, --%s%s%s",
				 o->short_name, o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", o->name,
				 o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-26s %s", left, o->help);
		if (o->def && o->type != OPT_FLAG)
			fprintf(f, " (default: %s)", o->def);
		fputc('\n', f);
	}
	fprintf(f, "  %-26s %s\n", "-h, --help", "show this help and exit");
}
