/*
 * test_mixfile.c - a mixture file to struct loader_member
 * (client/mixfile.h), with no daemon: the format's example and each of
 * its forms, relative paths taken from the file's directory, every
 * refusal with its code and exact message (jansson's own words only by
 * their start), the file read from disk, and which files are mixture
 * files at all. test_open_opts.c opens mixture files through
 * loader_open(), where the members' values are checked as options'.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "loader.h"
#include "mixfile.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* The example of libloader(3), MIXTURES (and of mixfile.h). */
static const char example[] =
	"{\"format\": \"loaderd-mixture\", \"version\": 1,\n"
	" \"epoch_size\": 0,\n"
	" \"members\": [\n"
	"   {\"path\": \"fm-a/test\", \"proportion\": 0.7},\n"
	"   {\"path\": \"s3://bucket/prefix\", \"proportion\": 0.3,"
	" \"pipeline\": \"decode | center 224 | f32\"}\n"
	" ]}\n";

static int parse(struct loader_mixfile *mf, const char *text, const char *dir,
		 char *why, size_t len)
{
	memset(why, 0, len);
	return loader_mixfile_parse(mf, text, strlen(text), "mix.json", dir,
				    why, len);
}

Test(mixfile, example)
{
	struct loader_mixfile mf;
	char why[512];

	cr_assert_eq(parse(&mf, example, "base", why, sizeof(why)), 0, "%s",
		     why);
	cr_expect_eq(mf.nmembers, 2);
	cr_expect_eq(mf.epoch_size, 0);
	cr_expect_str_eq(mf.m[0].dataset, "base/fm-a/test");
	cr_expect_str_eq(mf.path[0], "fm-a/test",
			 "the path as the file has it");
	cr_expect_eq(mf.m[0].how, LOADER_MIX_PROPORTION);
	cr_expect_eq(mf.m[0].value, 0.7);
	cr_expect_null(mf.m[0].pipeline);
	cr_expect_eq(mf.m[0].reserved, 0);
	/* A URL is not a path: no directory before it. */
	cr_expect_str_eq(mf.m[1].dataset, "s3://bucket/prefix");
	cr_expect_str_eq(mf.path[1], "s3://bucket/prefix");
	cr_expect_eq(mf.m[1].value, 0.3);
	cr_expect_str_eq(mf.m[1].pipeline, "decode | center 224 | f32");
	loader_mixfile_free(&mf);
	cr_expect_eq(mf.nmembers, 0);
	cr_expect_null(mf.path[0]);
	loader_mixfile_free(&mf); /* freed twice: nothing left */
}

Test(mixfile, forms)
{
	static const char text[] =
		"{\"members\": [{\"choose\": 1000, \"path\": \"/abs/b\"},"
		" {\"path\": \"c\", \"repeat\": 2.5, \"pipeline\": \"\"},"
		" {\"path\": \"d/e\", \"repeat\": 1}],"
		" \"version\": 1, \"format\": \"loaderd-mixture\"}";
	struct loader_mixfile mf;
	char why[512];

	cr_assert_eq(parse(&mf, text, "/data/mix", why, sizeof(why)), 0, "%s",
		     why);
	cr_expect_eq(mf.nmembers, 3);
	cr_expect_eq(mf.epoch_size, 0, "no epoch_size: 0");
	cr_expect_str_eq(mf.m[0].dataset, "/abs/b", "an absolute path");
	cr_expect_eq(mf.m[0].how, LOADER_MIX_CHOOSE);
	cr_expect_eq(mf.m[0].value, 1000);
	cr_expect_str_eq(mf.m[1].dataset, "/data/mix/c");
	cr_expect_str_eq(mf.path[1], "c");
	cr_expect_eq(mf.m[1].how, LOADER_MIX_REPEAT);
	cr_expect_eq(mf.m[1].value, 2.5);
	cr_expect_str_eq(mf.m[1].pipeline, "");
	cr_expect_str_eq(mf.m[2].dataset, "/data/mix/d/e");
	cr_expect_eq(mf.m[2].value, 1, "an integer repeat");
	loader_mixfile_free(&mf);
}

Test(mixfile, directories)
{
	static const struct {
		const char *dir, *want;
	} t[] = {
		{ NULL, "fm-a/test" },		{ ".", "fm-a/test" },
		{ "/", "/fm-a/test" },		{ "x/", "x/fm-a/test" },
		{ "../up", "../up/fm-a/test" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_mixfile mf;
		char why[512];

		cr_assert_eq(parse(&mf, example, t[i].dir, why, sizeof(why)), 0,
			     "%s", why);
		cr_expect_str_eq(mf.m[0].dataset, t[i].want, "dir %s",
				 t[i].dir ? t[i].dir : "NULL");
		loader_mixfile_free(&mf);
	}
}

Test(mixfile, epoch_size_and_32_members)
{
	char text[8192], why[512];
	struct loader_mixfile mf;
	int n;

	n = snprintf(text, sizeof(text),
		     "{\"format\": \"loaderd-mixture\", \"version\": 1, "
		     "\"epoch_size\": 123456789012, \"members\": [");
	for (int i = 0; i < LOADER_MAX_MEMBERS; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n,
			      "%s{\"path\": \"d%d\", \"proportion\": %d}",
			      i ? ", " : "", i, i + 1);
	snprintf(text + n, sizeof(text) - (size_t)n, "]}");
	cr_assert_eq(parse(&mf, text, NULL, why, sizeof(why)), 0, "%s", why);
	cr_expect_eq(mf.nmembers, LOADER_MAX_MEMBERS);
	cr_expect_eq(mf.epoch_size, 123456789012ull);
	cr_expect_str_eq(mf.m[31].dataset, "d31");
	cr_expect_eq(mf.m[31].value, 32);
	loader_mixfile_free(&mf);
}

/* A file made of one member "m" and the top-level keys before it. */
#define TOP(rest) "{\"format\": \"loaderd-mixture\", \"version\": 1, " rest "}"
#define ONE(m)	  TOP("\"members\": [" m "]")
#define SECOND(m) ONE("{\"path\": \"a\", \"proportion\": 1}, " m)

Test(mixfile, refusals)
{
	static const struct {
		const char *text;
		int err;
		const char *why;
	} t[] = {
		{ "[]", LOADER_EFORMAT, "mix.json: not a JSON object" },
		{ "{}", LOADER_EFORMAT,
		  "mix.json: \"format\" is not \"loaderd-mixture\": not a mixture file" },
		{ "{\"format\": \"loaderd-dataset\", \"version\": 1}",
		  LOADER_EFORMAT,
		  "mix.json: \"format\" is not \"loaderd-mixture\": not a mixture file" },
		{ "{\"format\": \"loaderd-mixture\", \"version\": 2}",
		  LOADER_EVERSION, "mix.json: \"version\" is not 1" },
		{ "{\"format\": \"loaderd-mixture\", \"version\": \"1\"}",
		  LOADER_EVERSION, "mix.json: \"version\" is not 1" },
		{ "{\"format\": \"loaderd-mixture\"}", LOADER_EVERSION,
		  "mix.json: \"version\" is not 1" },
		{ TOP("\"seed\": 1, \"members\": []"), LOADER_EFORMAT,
		  "mix.json: unknown key \"seed\" (a mixture file has format, version, epoch_size and members)" },
		{ TOP("\"s\\u001bd\": 1"), LOADER_EFORMAT,
		  "mix.json: unknown key \"s?d\" (a mixture file has format, version, epoch_size and members)" },
		{ TOP("\"epoch_size\": -1"), LOADER_EFORMAT,
		  "mix.json: \"epoch_size\" is not a whole number >= 0" },
		{ TOP("\"epoch_size\": 1.5"), LOADER_EFORMAT,
		  "mix.json: \"epoch_size\" is not a whole number >= 0" },
		{ TOP("\"epoch_size\": \"10\""), LOADER_EFORMAT,
		  "mix.json: \"epoch_size\" is not a whole number >= 0" },
		{ TOP("\"epoch_size\": 0"), LOADER_EFORMAT,
		  "mix.json: \"members\" is not a list of 1 to 32 members" },
		{ TOP("\"members\": {}"), LOADER_EFORMAT,
		  "mix.json: \"members\" is not a list of 1 to 32 members" },
		{ ONE(""), LOADER_EFORMAT,
		  "mix.json: \"members\" is not a list of 1 to 32 members" },
		{ SECOND("\"b\""), LOADER_EFORMAT,
		  "mix.json: member 1 is not an object" },
		{ SECOND("{\"path\": \"b\", \"weight\": 1}"), LOADER_EFORMAT,
		  "mix.json: member 1: unknown key \"weight\" (a member has path, proportion, repeat, choose and pipeline)" },
		{ ONE("{\"proportion\": 1}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"path\" is missing" },
		{ ONE("{\"path\": 3, \"proportion\": 1}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"path\" is not a path" },
		{ ONE("{\"path\": \"\", \"proportion\": 1}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"path\" is not a path" },
		{ ONE("{\"path\": \"a\"}"), LOADER_EFORMAT,
		  "mix.json: member 0: no \"proportion\", \"repeat\" or \"choose\"" },
		{ ONE("{\"path\": \"a\", \"proportion\": 1, \"choose\": 2}"),
		  LOADER_EFORMAT,
		  "mix.json: member 0: \"proportion\" and \"choose\": give one of proportion, repeat and choose" },
		{ ONE("{\"path\": \"a\", \"repeat\": 1, \"choose\": 2}"),
		  LOADER_EFORMAT,
		  "mix.json: member 0: \"repeat\" and \"choose\": give one of proportion, repeat and choose" },
		{ ONE("{\"path\": \"a\", \"proportion\": 0}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"proportion\" is not a number > 0" },
		{ SECOND("{\"path\": \"b\", \"proportion\": -0.5}"),
		  LOADER_EFORMAT,
		  "mix.json: member 1: \"proportion\" is not a number > 0" },
		{ ONE("{\"path\": \"a\", \"proportion\": \"0.5\"}"),
		  LOADER_EFORMAT,
		  "mix.json: member 0: \"proportion\" is not a number > 0" },
		{ ONE("{\"path\": \"a\", \"proportion\": null}"),
		  LOADER_EFORMAT,
		  "mix.json: member 0: \"proportion\" is not a number > 0" },
		{ ONE("{\"path\": \"a\", \"repeat\": 0}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"repeat\" is not a number > 0" },
		{ ONE("{\"path\": \"a\", \"choose\": 0}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"choose\" is not a whole number >= 1" },
		{ ONE("{\"path\": \"a\", \"choose\": 1.5}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"choose\" is not a whole number >= 1" },
		{ ONE("{\"path\": \"a\", \"choose\": 2.0}"), LOADER_EFORMAT,
		  "mix.json: member 0: \"choose\" is not a whole number >= 1" },
		{ ONE("{\"path\": \"a\", \"choose\": 1, \"pipeline\": 5}"),
		  LOADER_EFORMAT,
		  "mix.json: member 0: \"pipeline\" is not a string" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_mixfile mf;
		char why[512];
		int err;

		err = parse(&mf, t[i].text, NULL, why, sizeof(why));
		cr_expect_eq(err, t[i].err, "%s: %d (%s)", t[i].text, err, why);
		cr_expect_str_eq(why, t[i].why, "%s", t[i].text);
		cr_expect_eq(mf.nmembers, 0, "%s: nothing kept", t[i].text);
		cr_expect_eq(loader_mixfile_parse(&mf, t[i].text,
						  strlen(t[i].text), "mix.json",
						  NULL, NULL, 0),
			     t[i].err, "%s, without a buffer", t[i].text);
	}
}

/* What jansson refuses: its words, after the file's name, line and column. */
Test(mixfile, not_json)
{
	static const char *const t[] = {
		"",
		"{",
		"{\"format\": \"loaderd-mixture\", \"format\": \"x\"}",
		ONE("{\"path\": \"a\\u0000b\", \"choose\": 1}"),
		"{\"version\": 1e999}",
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct loader_mixfile mf;
		char why[512];
		int line, column, n = 0;

		cr_expect_eq(parse(&mf, t[i], NULL, why, sizeof(why)),
			     LOADER_EFORMAT, "%s", t[i]);
		sscanf(why, "mix.json: line %d column %d: %n", &line, &column,
		       &n);
		cr_expect_gt(n, 0, "%s: %s", t[i], why);
	}
}

/* ---- the file ------------------------------------------------------------ */

static char dir[64];

static void mkdir_tmp(void)
{
	strcpy(dir, "/tmp/test_mixfile.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void rm_tmp(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

static const char *write_file(const char *name, const void *data, size_t n)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(write(fd, data, n), (ssize_t)n);
	close(fd);
	return path;
}

Test(mixfile, load, .init = mkdir_tmp, .fini = rm_tmp)
{
	struct loader_mixfile mf;
	char want[128], why[512];
	const char *path = write_file("mix.json", example, strlen(example));

	cr_assert_eq(loader_mixfile_load(&mf, path, why, sizeof(why)), 0, "%s",
		     why);
	snprintf(want, sizeof(want), "%s/fm-a/test", dir);
	cr_expect_str_eq(mf.m[0].dataset, want, "from the file's directory");
	cr_expect_str_eq(mf.m[1].dataset, "s3://bucket/prefix");
	loader_mixfile_free(&mf);

	path = write_file("bad.json", "{\"format\": 1}", 13);
	snprintf(
		want, sizeof(want),
		"%s: \"format\" is not \"loaderd-mixture\": not a mixture file",
		path);
	cr_expect_eq(loader_mixfile_load(&mf, path, why, sizeof(why)),
		     LOADER_EFORMAT);
	cr_expect_str_eq(why, want, "the reason names the file");

	snprintf(want, sizeof(want), "%s/none.json", dir);
	cr_expect_eq(loader_mixfile_load(&mf, want, why, sizeof(why)), -ENOENT);
	cr_expect_not_null(strstr(why, "none.json: No such file"), "%s", why);
}

Test(mixfile, load_refuses_a_large_file, .init = mkdir_tmp, .fini = rm_tmp)
{
	static char big[MIXFILE_MAX_BYTES + 1];
	struct loader_mixfile mf;
	const char *path;
	char why[512];

	memset(big, ' ', sizeof(big));
	big[0] = '{';
	path = write_file("big.json", big, sizeof(big));
	cr_expect_eq(loader_mixfile_load(&mf, path, why, sizeof(why)),
		     LOADER_ETOOBIG);
	cr_expect_not_null(strstr(why, ": 1048577 bytes, a mixture file has "
				       "at most 1048576"),
			   "%s", why);
}

Test(mixfile, which_files_are_mixtures, .init = mkdir_tmp, .fini = rm_tmp)
{
	unsigned char tar[1024];
	char path[128];

	cr_expect(loader_is_mixfile(write_file("a.json", example, 10)));
	cr_expect(loader_is_mixfile(write_file("b", " \n\t\r{}", 6)),
		  "white space first");
	cr_expect_not(loader_is_mixfile(write_file("c", "x{}", 3)));
	cr_expect_not(loader_is_mixfile(write_file("d", "", 0)), "empty");
	cr_expect_not(loader_is_mixfile(write_file("e", "   ", 3)),
		      "only white space");
	/* A tar whose first member's name begins with '{'. */
	memset(tar, 0, sizeof(tar));
	memcpy(tar, "{key}.txt", 9);
	memcpy(tar + 257, "ustar", 5);
	cr_expect_not(loader_is_mixfile(write_file("f.tar", tar, sizeof(tar))),
		      "a tar");
	cr_expect_not(loader_is_mixfile(dir), "a directory");
	snprintf(path, sizeof(path), "%s/none", dir);
	cr_expect_not(loader_is_mixfile(path), "no file");
	cr_expect_not(loader_is_mixfile("s3://bucket/mix.json"), "a URL");
}
