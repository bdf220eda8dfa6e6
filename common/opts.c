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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_error.h"
#include "opts.h"

#define OPTS_MAX 64

/* Parse a byte size with an optional K/M/G/T suffix (powers of 1024). */
static int opts_parse_size(const char *s, unsigned long long *out)
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
	case OPT_CHOICE:
		for (const char *w = o->arg; w && *w;) {
			size_t n = strcspn(w, "|");

			if (strlen(val) == n && !strncmp(val, w, n)) {
				*(const char **)p = val;
				return 0;
			}
			w += n + (w[n] == '|');
		}
		return diag_set(d, LOADER_EUSAGE,
				"--%s: \"%s\" is not one of %s", o->name, val,
				o->arg);
	case OPT_MODE:
		errno = 0;
		u = strtoull(val, &end, 8);
		if (end == val || *end || errno || *val == '-' || u > 07777)
			return diag_set(
				d, LOADER_EUSAGE,
				"--%s: \"%s\" is not an octal mode (e.g. 0660)",
				o->name, val);
		*(uint64_t *)p = u;
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

int opts_defaults(const struct opt *table, void *dst, struct diag *d)
{
	for (const struct opt *o = table; o->name; o++) {
		int err;

		if (!o->def)
			continue;
		err = set_value(o, dst, o->def, d);
		if (err)
			return err;
	}
	return 0;
}

int opts_parse(const struct opt *table, void *dst, int argc, char **argv,
	       int *nargs, int *help, struct diag *d)
{
	int err = opts_defaults(table, dst, d);

	if (err)
		return err;
	return opts_parse_argv(table, dst, argc, argv, nargs, help, d);
}

int opts_parse_argv(const struct opt *table, void *dst, int argc, char **argv,
		    int *nargs, int *help, struct diag *d)
{
	struct option lo[OPTS_MAX + 2];
	char so[3 * OPTS_MAX + 4] = "+:h";
	size_t ns = strlen(so), n = 0;
	int err, c, idx;

	*help = 0;
	for (const struct opt *o = table; o->name; o++, n++) {
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

/* ---- config files ---------------------------------------------------- */

/* Do a and b name the same option, "_" and "-" alike? */
static bool same_name(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (*a != *b &&
		    !((*a == '_' || *a == '-') && (*b == '_' || *b == '-')))
			return false;
	return !*a && !*b;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static int set_flag(const struct opt *o, void *dst, const char *v)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (!strcmp(v, yes[i]) || !strcmp(v, no[i])) {
			*(bool *)((char *)dst + o->offset) = !strcmp(v, yes[i]);
			return 0;
		}
	}
	return -EINVAL;
}

/* Read the whole of path into a NUL-terminated buffer. */
static int read_all(const char *path, char **out, struct diag *d)
{
	FILE *f = fopen(path, "re");
	size_t cap = 4096, len = 0, n;
	char *buf;

	if (!f)
		return diag_set(d, -errno, "%s: %s", path, strerror(errno));
	buf = malloc(cap);
	while (buf) {
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (len < cap - 1)
			break;
		/* Config files are small: a megabyte is a mistake. */
		if (cap >= (1u << 20)) {
			free(buf);
			fclose(f);
			*out = NULL;
			return diag_set(d, LOADER_ETOOBIG,
					"%s: larger than 1 MiB", path);
		}
		char *nb = realloc(buf, cap * 2);

		if (!nb) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	if (!buf) {
		fclose(f);
		return diag_set(d, -ENOMEM, "%s: out of memory", path);
	}
	if (ferror(f)) {
		int err = -errno;

		free(buf);
		fclose(f);
		return diag_set(d, err ? err : -EIO, "%s: read error", path);
	}
	fclose(f);
	buf[len] = '\0';
	if (memchr(buf, '\0', len)) {
		free(buf);
		return diag_set(d, LOADER_EUSAGE, "%s: not a text file", path);
	}
	*out = buf;
	return 0;
}

int opts_parse_file(const struct opt *table, void *dst, const char *path,
		    char **text, struct diag *d)
{
	unsigned line_of[OPTS_MAX] = { 0 };
	unsigned line = 0;
	char *p, *nl;
	int err;

	*text = NULL;
	err = read_all(path, text, d);
	if (err)
		return err;
	for (p = *text; p; p = nl) {
		const struct opt *o = NULL;
		char *key, *val, *eq, *hash;

		line++;
		nl = strchr(p, '\n');
		if (nl)
			*nl++ = '\0';
		/* A "#" starts a comment, outside double quotes. */
		hash = NULL;
		for (char *q = p, in = 0; *q; q++) {
			if (*q == '"')
				in = !in;
			else if (*q == '#' && !in) {
				hash = q;
				break;
			}
		}
		if (hash)
			*hash = '\0';
		key = trim(p);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq)
			return diag_set(d, LOADER_EUSAGE,
					"%s:%u: \"%s\": expected NAME = VALUE",
					path, line, key);
		*eq = '\0';
		key = trim(key);
		val = trim(eq + 1);
		for (const struct opt *t = table; t->name; t++)
			if (same_name(t->name, key))
				o = t;
		if (!o || (o->flags & OPT_F_CLI_ONLY))
			return diag_set(d, LOADER_EUSAGE, "%s:%u: %s: %s", path,
					line, key,
					o ? "only on the command line" :
					    "no such option");
		if (line_of[o - table])
			return diag_set(
				d, LOADER_EUSAGE,
				"%s:%u: %s: set again (first at line %u)", path,
				line, o->name, line_of[o - table]);
		line_of[o - table] = line;
		if (val[0] == '"') {
			size_t n = strlen(val);

			if (n < 2 || val[n - 1] != '"')
				return diag_set(d, LOADER_EUSAGE,
						"%s:%u: %s: unterminated quote",
						path, line, o->name);
			val[n - 1] = '\0';
			val++;
		}
		if (o->type == OPT_FLAG) {
			if (set_flag(o, dst, val))
				return diag_set(
					d, LOADER_EUSAGE,
					"%s:%u: %s: \"%s\" is not yes or no",
					path, line, o->name, val);
			continue;
		}
		if (!*val && o->type != OPT_STR)
			return diag_set(d, LOADER_EUSAGE, "%s:%u: %s: no value",
					path, line, o->name);
		err = set_value(o, dst, val, d);
		if (err) {
			char why[sizeof(d->msg)];

			/* set_value() names "--option": say where, in the
			 * file's words. */
			snprintf(why, sizeof(why), "%s",
				 d->msg + (strncmp(d->msg, "--", 2) ? 0 : 2));
			return diag_set(d, err, "%s:%u: %s", path, line, why);
		}
	}
	return 0;
}

static void print_value(FILE *f, const struct opt *o, const void *dst)
{
	const void *p = (const char *)dst + o->offset;

	switch (o->type) {
	case OPT_FLAG: fputs(*(const bool *)p ? "yes" : "no", f); break;
	case OPT_STR:
		fputs(*(const char *const *)p ? *(const char *const *)p : "",
		      f);
		break;
	case OPT_U64:
	case OPT_SIZE: fprintf(f, "%" PRIu64, *(const uint64_t *)p); break;
	case OPT_I64: fprintf(f, "%" PRId64, *(const int64_t *)p); break;
	case OPT_F64: fprintf(f, "%g", *(const double *)p); break;
	case OPT_CHOICE: fputs(*(const char *const *)p, f); break;
	case OPT_MODE: fprintf(f, "%04" PRIo64, *(const uint64_t *)p); break;
	}
}

void opts_print_config(FILE *f, const struct opt *table, const void *dst)
{
	for (const struct opt *o = table; o->name; o++) {
		if (o->flags & OPT_F_CLI_ONLY)
			continue;
		fprintf(f, "\n# %s%s\n", o->help,
			o->flags & OPT_F_RELOAD ? " (reloaded on SIGHUP)" : "");
		if (dst && (o->type == OPT_STR || o->type == OPT_CHOICE) &&
		    !*(const char *const *)((const char *)dst + o->offset)) {
			fprintf(f, "#%s =\n", o->name); /* unset */
		} else if (dst) {
			fprintf(f, "%s = ", o->name);
			print_value(f, o, dst);
			fputc('\n', f);
		} else if (o->type == OPT_FLAG) {
			fprintf(f, "#%s = no\n", o->name);
		} else {
			fprintf(f, "#%s = %s\n", o->name, o->def ? o->def : "");
		}
	}
}

void opts_print_values(FILE *f, const struct opt *table, const void *dst,
		       unsigned flags)
{
	const char *sep = "";

	for (const struct opt *o = table; o->name; o++) {
		if ((o->flags & flags) != flags)
			continue;
		fprintf(f, "%s%s ", sep, o->name);
		print_value(f, o, dst);
		sep = ", ";
	}
}

bool opts_same(const struct opt *o, const void *a, const void *b)
{
	const void *x = (const char *)a + o->offset;
	const void *y = (const char *)b + o->offset;

	switch (o->type) {
	case OPT_FLAG: return *(const bool *)x == *(const bool *)y;
	case OPT_CHOICE:
	case OPT_STR: {
		const char *s = *(const char *const *)x;
		const char *t = *(const char *const *)y;

		return s == t || (s && t && !strcmp(s, t));
	}
	case OPT_U64:
	case OPT_MODE:
	case OPT_SIZE: return *(const uint64_t *)x == *(const uint64_t *)y;
	case OPT_I64: return *(const int64_t *)x == *(const int64_t *)y;
	case OPT_F64: return *(const double *)x == *(const double *)y;
	}
	return false;
}

void opts_copy(const struct opt *o, void *dst, const void *src)
{
	size_t n = o->type == OPT_FLAG ? sizeof(bool) :
		   o->type == OPT_STR || o->type == OPT_CHOICE ?
					 sizeof(char *) :
		   o->type == OPT_F64 ? sizeof(double) :
					sizeof(uint64_t);

	memcpy((char *)dst + o->offset, (const char *)src + o->offset, n);
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

const char *opts_size_str(unsigned long long bytes, char *buf, size_t n)
{
	static const char *const unit[] = { "B",   "KiB", "MiB",
					    "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		v /= 1024;
		u++;
	}
	/* One decimal, unless it would be ".0". */
	if (u && (unsigned long long)(v * 10 + 0.5) % 10)
		snprintf(buf, n, "%.1f %s", v, unit[u]);
	else
		snprintf(buf, n, "%.0f %s", v, unit[u]);
	return buf;
}
