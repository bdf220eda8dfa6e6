/*
 * test_opts.c - the option tables of common/opts.c: values of every type,
 * [min, max] ranges (defaults included), the messages that name the
 * option and its range, and that tables without ranges are unchanged.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "diag.h"
#include "loader_error.h"
#include "opts.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

struct vals {
	uint64_t u, size, big;
	int64_t i;
	double f, any, lr;
	const char *s;
	bool flag;
};

#define V(f) offsetof(struct vals, f)
static const struct opt table[] = {
	{ "u", 'u', OPT_U64, V(u), "128", "N", "ranged integer", 1, 65536, 0 },
	{ "size", 0, OPT_SIZE, V(size), "1K", "BYTES", "ranged size", 0,
	  1 << 20, 0 },
	{ "big", 0, OPT_U64, V(big), "1", "N", "up to UINT64_MAX", 0,
	  (double)UINT64_MAX, 0 },
	{ "i", 0, OPT_I64, V(i), "-1", "N", "unranged signed", 0, 0, 0 },
	{ "f", 0, OPT_F64, V(f), "0.9", "X", "ranged number", 0, 0.999, 0 },
	{ "any", 0, OPT_F64, V(any), "2", "X", "unranged number", 0, 0, 0 },
	{ "lr", 0, OPT_F64, V(lr), "0.05", "RATE", "tiny minimum", 1e-9, 10, 0 },
	{ "s", 0, OPT_STR, V(s), NULL, "TEXT", "text", 0, 0, 0 },
	{ "flag", 'f', OPT_FLAG, V(flag), NULL, NULL, "a flag", 0, 0, 0 },
	OPT_END,
};
#undef V

/* Parse the arguments (after a program name); returns opts_parse()'s. */
static int parse(struct vals *v, struct diag *d, int *nargs, int n, ...)
{
	char *argv[16] = { "prog" };
	int help;
	va_list ap;

	cr_assert_lt(n, (int)NELEM(argv));
	va_start(ap, n);
	for (int i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	memset(v, 0, sizeof(*v));
	d->msg[0] = '\0';
	return opts_parse(table, v, n + 1, argv, nargs, &help, d);
}

Test(opts, defaults_in_range)
{
	struct vals v;
	struct diag d;
	int nargs;

	cr_assert_eq(parse(&v, &d, &nargs, 0), 0, "%s", d.msg);
	cr_expect_eq(v.u, 128);
	cr_expect_eq(v.size, 1024);
	cr_expect_eq(v.i, -1);
	cr_expect_float_eq(v.f, 0.9, 1e-12);
	cr_expect_float_eq(v.any, 2.0, 1e-12);
	cr_expect_float_eq(v.lr, 0.05, 1e-12);
	cr_expect_null(v.s);
	cr_expect_not(v.flag);
	cr_expect_eq(nargs, 0);
}

/* Values accepted: the bounds themselves are inside. */
static const struct {
	const char *opt, *val;
	size_t off;
	int type;
	double want;
} good[] = {
	{ "--u", "1", offsetof(struct vals, u), OPT_U64, 1 },
	{ "--u", "65536", offsetof(struct vals, u), OPT_U64, 65536 },
	{ "-u", "7", offsetof(struct vals, u), OPT_U64, 7 },
	{ "--size", "1M", offsetof(struct vals, size), OPT_SIZE, 1 << 20 },
	{ "--big", "18446744073709551615", offsetof(struct vals, big), OPT_U64,
	  (double)UINT64_MAX },
	{ "--i", "-42", offsetof(struct vals, i), OPT_I64, -42 },
	{ "--f", "0", offsetof(struct vals, f), OPT_F64, 0 },
	{ "--f", "0.999", offsetof(struct vals, f), OPT_F64, 0.999 },
	{ "--f", "5e-1", offsetof(struct vals, f), OPT_F64, 0.5 },
	{ "--any", "-1e300", offsetof(struct vals, any), OPT_F64, -1e300 },
	{ "--any", "inf", offsetof(struct vals, any), OPT_F64, INFINITY },
	{ "--lr", "1e-9", offsetof(struct vals, lr), OPT_F64, 1e-9 },
	{ "--lr", "10", offsetof(struct vals, lr), OPT_F64, 10 },
};

Test(opts, good_values)
{
	for (size_t k = 0; k < NELEM(good); k++) {
		struct vals v;
		struct diag d;
		int nargs;
		double got;
		const char *p;

		cr_assert_eq(parse(&v, &d, &nargs, 2, good[k].opt, good[k].val),
			     0, "%s %s: %s", good[k].opt, good[k].val, d.msg);
		p = (const char *)&v + good[k].off;
		switch (good[k].type) {
		case OPT_I64: got = (double)*(const int64_t *)p; break;
		case OPT_F64: got = *(const double *)p; break;
		default: got = (double)*(const uint64_t *)p; break;
		}
		cr_expect(got == good[k].want, "%s %s: got %g", good[k].opt,
			  good[k].val, got);
	}
}

/* Values refused, and the message each gives. */
static const struct {
	const char *opt, *val, *msg;
} bad[] = {
	{ "--u", "0", "--u: \"0\" is not an integer in [1, 65536]" },
	{ "--u", "65537", "--u: \"65537\" is not an integer in [1, 65536]" },
	{ "--u", "12x", "--u: \"12x\" is not an integer in [1, 65536]" },
	{ "--u", "-1", "--u: \"-1\" is not an integer in [1, 65536]" },
	{ "--size", "2M", "--size: \"2M\" is not an integer in [0, 1048576]" },
	{ "--big", "-1",
	  "--big: \"-1\" is not an integer in [0, 18446744073709551616]" },
	{ "--i", "x", "--i: invalid value \"x\"" },
	{ "--f", "1", "--f: \"1\" is not a number in [0, 0.999]" },
	{ "--f", "-0.1", "--f: \"-0.1\" is not a number in [0, 0.999]" },
	{ "--f", "nan", "--f: \"nan\" is not a number in [0, 0.999]" },
	{ "--f", "0.5x", "--f: \"0.5x\" is not a number in [0, 0.999]" },
	{ "--f", "", "--f: \"\" is not a number in [0, 0.999]" },
	{ "--lr", "0", "--lr: \"0\" is not a number in [1e-09, 10]" },
	{ "--lr", "1e-400", "--lr: \"1e-400\" is not a number in [1e-09, 10]" },
	{ "--any", "nan", "--any: invalid value \"nan\"" },
	{ "--any", "1e999", "--any: invalid value \"1e999\"" },
	{ "--any", "two", "--any: invalid value \"two\"" },
};

Test(opts, bad_values)
{
	for (size_t k = 0; k < NELEM(bad); k++) {
		struct vals v;
		struct diag d;
		int nargs;

		cr_expect_eq(parse(&v, &d, &nargs, 2, bad[k].opt, bad[k].val),
			     LOADER_EUSAGE, "%s %s accepted", bad[k].opt,
			     bad[k].val);
		cr_expect_str_eq(d.msg, bad[k].msg);
	}
}

/* A default outside its range is a bug in the table, reported as such. */
Test(opts, bad_default)
{
	static const struct opt t[] = {
		{ "n", 0, OPT_U64, 0, "0", "N", "", 1, 9, 0 },
		OPT_END,
	};
	char *argv[] = { "prog" };
	uint64_t n;
	struct diag d;
	int nargs, help;

	cr_expect_eq(opts_parse(t, &n, 1, argv, &nargs, &help, &d),
		     LOADER_EUSAGE);
	cr_expect_str_eq(d.msg, "--n: \"0\" is not an integer in [1, 9]");
}

Test(opts, args_flags_help)
{
	char *argv[] = { "prog", "a", "--flag", "--f=0.25", "b", "-h" };
	struct vals v = { 0 };
	struct diag d;
	int nargs, help;

	cr_assert_eq(opts_parse(table, &v, (int)NELEM(argv), argv, &nargs,
				&help, &d),
		     0, "%s", d.msg);
	cr_expect(v.flag);
	cr_expect_float_eq(v.f, 0.25, 1e-12);
	cr_expect_eq(help, 1);
	cr_assert_eq(nargs, 2);
	cr_expect_str_eq(argv[0], "a");
	cr_expect_str_eq(argv[1], "b");
}

/* ---- config files ------------------------------------------------------ */

/* The same table, with a command-line-only option and a choice. */
struct fvals {
	uint64_t u, mode;
	const char *s, *level;
	bool flag, cli;
};

#define F(f) offsetof(struct fvals, f)
static const struct opt ftable[] = {
	{ "max-u", 0, OPT_U64, F(u), "5", "N", "ranged", 1, 100, OPT_F_RELOAD },
	{ "mode", 0, OPT_MODE, F(mode), "0660", "MODE", "a mode", 0, 0, 0 },
	{ "s", 0, OPT_STR, F(s), NULL, "TEXT", "text", 0, 0, 0 },
	{ "level", 0, OPT_CHOICE, F(level), "info", "err|info|debug", "a choice",
	  0, 0, 0 },
	{ "flag", 0, OPT_FLAG, F(flag), NULL, NULL, "a flag", 0, 0, 0 },
	{ "cli", 0, OPT_FLAG, F(cli), NULL, NULL, "command line only", 0, 0,
	  OPT_F_CLI_ONLY },
	OPT_END,
};
#undef F

/* Write text to a file and read it over v (after the defaults). */
static int parse_file(const char *text, struct fvals *v, struct diag *d)
{
	char path[] = "/tmp/test_opts.XXXXXX", *buf = NULL;
	int fd = mkstemp(path), err;
	FILE *f;

	cr_assert_geq(fd, 0);
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	memset(v, 0, sizeof(*v));
	d->msg[0] = '\0';
	cr_assert_eq(opts_defaults(ftable, v, d), 0, "%s", d->msg);
	err = opts_parse_file(ftable, v, path, &buf, d);
	/* The strings point into buf: copy what the tests look at. */
	{
		static char s[64], level[16];

		snprintf(s, sizeof(s), "%s", v->s ? v->s : "(null)");
		snprintf(level, sizeof(level), "%s", v->level);
		v->s = s;
		v->level = level;
	}
	free(buf);
	unlink(path);
	/* The message starts with the path: keep the rest. */
	if (err) {
		char *c = strchr(d->msg, ':');

		if (c)
			memmove(d->msg, c + 1, strlen(c + 1) + 1);
	}
	return err;
}

Test(opts, file_values)
{
	struct fvals v;
	struct diag d;

	cr_assert_eq(parse_file("# a comment\n\n  max_u = 42   # trailing\n"
				"mode=0600\ns = \"  two words # not a comment \"\n"
				"level = debug\nflag = yes\n",
				&v, &d),
		     0, "%s", d.msg);
	cr_expect_eq(v.u, 42);
	cr_expect_eq(v.mode, 0600);
	cr_expect_str_eq(v.s, "  two words # not a comment ");
	cr_expect_str_eq(v.level, "debug");
	cr_expect(v.flag);
	cr_assert_eq(parse_file("flag = off\n", &v, &d), 0, "%s", d.msg);
	cr_expect_not(v.flag);
	cr_expect_eq(v.u, 5, "an option the file leaves keeps its default");
	cr_expect_str_eq(v.level, "info");
}

Test(opts, file_errors)
{
	static const struct {
		const char *text, *msg;
	} t[] = {
		{ "max-u = 0\n", "1: max-u: \"0\" is not an integer in [1, 100]" },
		{ "\nmax-u = x\n", "2: max-u: \"x\" is not an integer in [1, 100]" },
		{ "nope = 1\n", "1: nope: no such option" },
		{ "cli = yes\n", "1: cli: only on the command line" },
		{ "s = a\ns = b\n", "2: s: set again (first at line 1)" },
		{ "flag = maybe\n", "1: flag: \"maybe\" is not yes or no" },
		{ "level = loud\n",
		  "1: level: \"loud\" is not one of err|info|debug" },
		{ "mode = 0999\n", "1: mode: \"0999\" is not an octal mode (e.g. 0660)" },
		{ "mode = 010000\n",
		  "1: mode: \"010000\" is not an octal mode (e.g. 0660)" },
		{ "s = \"open\n", "1: s: unterminated quote" },
		{ "max-u =\n", "1: max-u: no value" },
		{ "words only\n", "1: \"words only\": expected NAME = VALUE" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct fvals v;
		struct diag d;

		cr_expect_eq(parse_file(t[i].text, &v, &d), LOADER_EUSAGE,
			     "%s", t[i].text);
		cr_expect_str_eq(d.msg, t[i].msg, "%s", t[i].text);
	}
}

Test(opts, file_missing)
{
	struct fvals v = { 0 };
	struct diag d = { "" };
	char *buf = (char *)1;

	cr_expect_eq(opts_parse_file(ftable, &v, "/nonexistent/x.conf", &buf,
				     &d),
		     -ENOENT);
	cr_expect_null(buf);
	cr_expect_str_eq(d.msg, "/nonexistent/x.conf: No such file or directory");
}

/* --print-config's output, read back, sets the same values. */
Test(opts, print_config_round_trip)
{
	struct fvals a, b;
	struct diag d;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_eq(parse_file("max-u = 7\nmode = 0640\nlevel = err\n"
				"flag = yes\n",
				&a, &d),
		     0, "%s", d.msg);
	a.s = NULL; /* unset: printed commented out */
	opts_print_config(f, ftable, &a);
	fclose(f);
	cr_expect_null(strstr(text, "cli ="), "a command-line-only option");
	cr_assert_eq(parse_file(text, &b, &d), 0, "%s\n%s", d.msg, text);
	cr_expect_eq(b.u, 7);
	cr_expect_eq(b.mode, 0640);
	cr_expect_str_eq(b.level, "err");
	cr_expect(b.flag);
	cr_expect_str_eq(b.s, "(null)");
	cr_expect(opts_same(&ftable[0], &a, &b));
	cr_expect_not(opts_same(&ftable[0], &a, &(struct fvals){ .u = 8 }));
	free(text);
}
