/*
 * test_awscfg.c - common/awscfg.c: where credentials, region, endpoint
 * and addressing style come from and in which order, the errors that
 * name a variable or a file and line (and never a secret), which
 * buckets and hosts get virtual-host requests, and s3:// URLs.
 *
 * Criterion runs each Test() in a process of its own, so a test may set
 * and unset variables freely. The suite's init gives each one an empty
 * $HOME and no AWS_* variables; its fini removes that $HOME.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "awscfg.h"
#include "diag.h"
#include "loader_error.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

extern char **environ;

static char home[PATH_MAX];

/* Unset every AWS_* variable; unsetenv() reshapes environ, so restart. */
static void unset_aws(void)
{
	bool again = true;

	while (again) {
		again = false;
		for (char **e = environ; *e; e++) {
			char name[256];
			size_t n = strcspn(*e, "=");

			if (strncmp(*e, "AWS_", 4) || n >= sizeof(name))
				continue;
			memcpy(name, *e, n);
			name[n] = '\0';
			unsetenv(name);
			again = true;
			break;
		}
	}
}

static void setup(void)
{
	char dir[PATH_MAX];

	snprintf(home, sizeof(home), "%s/test_awscfg.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	cr_assert_not_null(mkdtemp(home), "mkdtemp: %s", strerror(errno));
	snprintf(dir, sizeof(dir), "%s/.aws", home);
	cr_assert_eq(mkdir(dir, 0700), 0, "mkdir %s: %s", dir, strerror(errno));
	unset_aws();
	setenv("HOME", home, 1);
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void teardown(void)
{
	if (home[0])
		nftw(home, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(awscfg, .init = setup, .fini = teardown);

/* Write text to $HOME/rel, the way a user would have. */
static void put(const char *rel, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", home, rel);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fputs(text, f) >= 0, true);
	cr_assert_eq(fclose(f), 0);
}

/* Resolve, insisting that it succeeds. */
static void resolve_ok(struct aws_cfg *c, const char *profile)
{
	struct diag d = { "" };
	int err = aws_cfg_resolve(c, profile, &d);

	cr_assert_eq(err, 0, "aws_cfg_resolve: %d %s", err, d.msg);
}

/* Resolve, insisting that it fails with err, and that c is wiped. */
static void resolve_err(struct diag *d, const char *profile, int err)
{
	static const struct aws_cfg zero;
	struct aws_cfg c;
	int got;

	memset(&c, 0x5a, sizeof(c));
	d->msg[0] = '\0';
	got = aws_cfg_resolve(&c, profile, d);
	cr_assert_eq(got, err, "got %d (%s), want %d", got, d->msg, err);
	cr_expect_neq(d->msg[0], '\0');
	cr_expect_eq(memcmp(&c, &zero, sizeof(c)), 0, "c not wiped");
}

static void expect_has(const char *msg, const char *part)
{
	cr_expect_not_null(strstr(msg, part), "\"%s\" lacks \"%s\"", msg, part);
}

Test(awscfg, env_only)
{
	struct aws_cfg c;

	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIAENV");
	cr_expect_str_eq(c.secret_key, "envsecret");
	cr_expect_str_eq(c.session_token, "envtoken");
	cr_expect_str_eq(c.region, "us-east-1");
	cr_expect_str_eq(c.endpoint, "https://s3.us-east-1.amazonaws.com");
	cr_expect_eq(c.addressing, AWS_ADDR_AUTO);
	aws_cfg_wipe(&c);
}

Test(awscfg, env_over_files)
{
	struct aws_cfg c;

	put(".aws/credentials", "[default]\n"
				"aws_access_key_id = AKIAFILE\n"
				"aws_secret_access_key = filesecret\n"
				"aws_session_token = filetoken\n");
	put(".aws/config", "[default]\n"
			   "region = eu-west-1\n"
			   "aws_access_key_id = AKIACONF\n"
			   "aws_secret_access_key = confsecret\n");
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_REGION", "ap-south-1", 1);
	setenv("AWS_DEFAULT_REGION", "sa-east-1", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIAENV");
	cr_expect_str_eq(c.secret_key, "envsecret");
	/* The file's token belongs to the file's keys, not to these. */
	cr_expect_str_eq(c.session_token, "");
	cr_expect_str_eq(c.region, "ap-south-1");
	cr_expect_str_eq(c.endpoint, "https://s3.ap-south-1.amazonaws.com");
}

/* A session token without keys in the environment is not used. */
Test(awscfg, env_token_alone_ignored)
{
	struct aws_cfg c;

	put(".aws/credentials", "[default]\n"
				"aws_access_key_id = AKIAFILE\n"
				"aws_secret_access_key = filesecret\n");
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIAFILE");
	cr_expect_str_eq(c.session_token, "");
}

static const char creds_file[] = "# shared credentials\n"
				 "[default]\n"
				 "aws_access_key_id = AKIADEF\n"
				 "aws_secret_access_key = defsecret\n"
				 "\n"
				 "; another\n"
				 "[work]\n"
				 "  AWS_ACCESS_KEY_ID=AKIAWORK  \n"
				 "aws_secret_access_key\t=\tworksecret\n"
				 "aws_session_token = worktoken\n"
				 "[ other ]\n"
				 "aws_access_key_id: AKIAOTHER\n"
				 "aws_secret_access_key: othersecret\n"
				 "[profile work]\n"
				 "aws_access_key_id = AKIANOTTHIS\n"
				 "aws_secret_access_key = notthis\n";

/* Which profile: argument, $AWS_PROFILE, $AWS_DEFAULT_PROFILE, default. */
static const struct {
	const char *arg, *env, *env_default;
	const char *key, *secret, *token;
} profiles[] = {
	{ NULL, NULL, NULL, "AKIADEF", "defsecret", "" },
	{ NULL, "work", NULL, "AKIAWORK", "worksecret", "worktoken" },
	{ NULL, NULL, "work", "AKIAWORK", "worksecret", "worktoken" },
	{ NULL, "other", "work", "AKIAOTHER", "othersecret", "" },
	{ "other", "work", NULL, "AKIAOTHER", "othersecret", "" },
	{ "work", NULL, NULL, "AKIAWORK", "worksecret", "worktoken" },
	{ "", "work", NULL, "AKIAWORK", "worksecret", "worktoken" },
};

Test(awscfg, credentials_profile)
{
	put(".aws/credentials", creds_file);
	for (size_t k = 0; k < NELEM(profiles); k++) {
		struct aws_cfg c;

		unsetenv("AWS_PROFILE");
		unsetenv("AWS_DEFAULT_PROFILE");
		if (profiles[k].env)
			setenv("AWS_PROFILE", profiles[k].env, 1);
		if (profiles[k].env_default)
			setenv("AWS_DEFAULT_PROFILE", profiles[k].env_default,
			       1);
		resolve_ok(&c, profiles[k].arg);
		cr_expect_str_eq(c.access_key, profiles[k].key, "case %zu", k);
		cr_expect_str_eq(c.secret_key, profiles[k].secret, "case %zu",
				 k);
		cr_expect_str_eq(c.session_token, profiles[k].token, "case %zu",
				 k);
	}
}

/* A profile named but in neither file: refused, naming both files. */
Test(awscfg, unknown_profile_refused)
{
	struct aws_cfg c;
	struct diag d = { { 0 } };
	int err;

	put(".aws/credentials", creds_file);
	err = aws_cfg_resolve(&c, "nosuch", &d);
	cr_expect_eq(err, LOADER_EUSAGE, "argument: %d", err);
	cr_expect(strstr(d.msg, "\"nosuch\"") && strstr(d.msg, "credentials"),
		  "%s", d.msg);
	setenv("AWS_PROFILE", "typo", 1);
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	err = aws_cfg_resolve(&c, NULL, &d);
	cr_expect_eq(err, LOADER_EUSAGE, "AWS_PROFILE with keys set: %d", err);
	cr_expect_str_eq(c.access_key, "", "wiped on failure");
	/* With keys in the environment, a profile that exists is fine. */
	setenv("AWS_PROFILE", "work", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIAENV");
}

static const char config_file[] =
	"[default]\n"
	"region = eu-north-1\n"
	"\n"
	"[profile x]\n"
	"region = eu-west-3\n"
	"endpoint_url = https://generic.example\n"
	"s3 =\n"
	"  # a comment in the subsection\n"
	"  endpoint_url = http://minio.local:9000/\n"
	"\n"
	"  addressing_style = Path\n"
	"output = json\n"
	"  endpoint_url = http://continuation.example\n"
	"dynamodb =\n"
	"  endpoint_url = http://dynamo.example\n"
	"  addressing_style = virtual\n"
	"[profile y]\n"
	"region = us-west-2\n"
	"endpoint_url = https://y.example/\n"
	"[sso-session x]\n"
	"region = xx-none-1\n"
	"[x]\n"
	"region = xx-none-2\n";

Test(awscfg, config_profile)
{
	struct aws_cfg c;

	put(".aws/config", config_file);
	resolve_ok(&c, "x");
	cr_expect_str_eq(c.region, "eu-west-3");
	cr_expect_str_eq(c.endpoint, "http://minio.local:9000");
	cr_expect_eq(c.addressing, AWS_ADDR_PATH);
	cr_expect_str_eq(c.access_key, "");

	/* Without an "s3 =" subsection: the profile's own endpoint_url. */
	resolve_ok(&c, "y");
	cr_expect_str_eq(c.region, "us-west-2");
	cr_expect_str_eq(c.endpoint, "https://y.example");
	cr_expect_eq(c.addressing, AWS_ADDR_AUTO);

	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.region, "eu-north-1");
	cr_expect_str_eq(c.endpoint, "https://s3.eu-north-1.amazonaws.com");
}

/* "[profile default]" is the default profile too; the last value wins. */
Test(awscfg, config_profile_default)
{
	struct aws_cfg c;

	put(".aws/config", "[profile default]\n"
			   "region = ca-central-1\n"
			   "aws_access_key_id = AKIACONF\n"
			   "aws_secret_access_key = confsecret\n"
			   "aws_session_token = conftoken\n"
			   "[ profile   default ]\n"
			   "region = ca-west-1\n");
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.region, "ca-west-1");
	cr_expect_str_eq(c.access_key, "AKIACONF");
	cr_expect_str_eq(c.secret_key, "confsecret");
	cr_expect_str_eq(c.session_token, "conftoken");
}

/* The credentials file's keys come before the config file's. */
Test(awscfg, credentials_over_config)
{
	struct aws_cfg c;

	put(".aws/credentials", "[default]\n"
				"aws_access_key_id = AKIAFILE\n"
				"aws_secret_access_key = filesecret\n");
	put(".aws/config", "[default]\n"
			   "aws_access_key_id = AKIACONF\n"
			   "aws_secret_access_key = confsecret\n"
			   "aws_session_token = conftoken\n");
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIAFILE");
	cr_expect_str_eq(c.secret_key, "filesecret");
	cr_expect_str_eq(c.session_token, "");
}

/* $AWS_SHARED_CREDENTIALS_FILE and $AWS_CONFIG_FILE, "~/" included. */
Test(awscfg, file_variables)
{
	char path[PATH_MAX];
	struct aws_cfg c;

	put("creds", "[default]\n"
		     "aws_access_key_id = AKIAVAR\n"
		     "aws_secret_access_key = varsecret\n");
	put("conf", "[default]\nregion = af-south-1\n");
	put(".aws/config", "[default]\nregion = eu-south-1\n");
	snprintf(path, sizeof(path), "%s/creds", home);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_CONFIG_FILE", "~/conf", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIAVAR");
	cr_expect_str_eq(c.region, "af-south-1");
}

/* Endpoint: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, "s3 =", the rest. */
Test(awscfg, endpoint_precedence)
{
	struct aws_cfg c;

	put(".aws/config", "[default]\n"
			   "endpoint_url = http://top.example\n"
			   "s3 =\n"
			   "    endpoint_url = http://sub.example\n");
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.endpoint, "http://sub.example");
	setenv("AWS_ENDPOINT_URL", "http://generic.example:8080//", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.endpoint, "http://generic.example:8080");
	setenv("AWS_ENDPOINT_URL_S3", "HTTPS://s3only.example/base/", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.endpoint, "https://s3only.example/base");
}

Test(awscfg, defaults)
{
	struct aws_cfg c;

	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.region, "us-east-1");
	cr_expect_str_eq(c.endpoint, "https://s3.us-east-1.amazonaws.com");
	cr_expect_eq(c.addressing, AWS_ADDR_AUTO);
	setenv("AWS_DEFAULT_REGION", "eu-central-1", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.region, "eu-central-1");
	cr_expect_str_eq(c.endpoint, "https://s3.eu-central-1.amazonaws.com");
}

/* No files at all: anonymous, no error, and an empty variable is unset. */
Test(awscfg, missing_files_anonymous)
{
	struct aws_cfg c;

	setenv("AWS_ACCESS_KEY_ID", "", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "", 1);
	setenv("AWS_SESSION_TOKEN", "token", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "");
	cr_expect_str_eq(c.secret_key, "");
	cr_expect_str_eq(c.session_token, "");
	cr_expect_str_eq(c.region, "us-east-1");
}

Test(awscfg, no_home)
{
	struct aws_cfg c;

	put(".aws/credentials", creds_file);
	unsetenv("HOME");
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "");
}

Test(awscfg, one_env_key)
{
	static const struct {
		const char *set, *missing;
	} t[] = {
		{ "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY" },
		{ "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID" },
	};

	/* Even with good keys in the file: no silent change of identity. */
	put(".aws/credentials", creds_file);
	for (size_t k = 0; k < NELEM(t); k++) {
		struct diag d;

		unsetenv(t[k].missing);
		setenv(t[k].set, "abc123", 1);
		resolve_err(&d, NULL, LOADER_EUSAGE);
		expect_has(d.msg, t[k].missing);
		cr_expect_null(strstr(d.msg, "abc123"), "%s", d.msg);
		unsetenv(t[k].set);
	}
}

/* A key without its secret in a file, or the reverse, is an error. */
Test(awscfg, partial_file_keys)
{
	struct diag d;

	put(".aws/credentials", "[default]\n"
				"aws_secret_access_key = lonesecret\n");
	resolve_err(&d, NULL, LOADER_EUSAGE);
	expect_has(d.msg, "credentials:2");
	expect_has(d.msg, "aws_access_key_id");
	cr_expect_null(strstr(d.msg, "lonesecret"), "%s", d.msg);
}

Test(awscfg, too_long)
{
	char text[1024], secret[200];
	struct diag d;

	memset(secret, 's', sizeof(secret) - 1);
	secret[sizeof(secret) - 1] = '\0';
	snprintf(text, sizeof(text),
		 "[default]\n"
		 "aws_access_key_id = AKIAFILE\n"
		 "aws_secret_access_key = %s\n",
		 secret);
	put(".aws/credentials", text);
	resolve_err(&d, NULL, LOADER_EUSAGE);
	expect_has(d.msg, "/.aws/credentials:3");
	expect_has(d.msg, "aws_secret_access_key");
	cr_expect_null(strstr(d.msg, "sss"), "secret in \"%s\"", d.msg);

	/* From the environment: the message names the variable. */
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
	resolve_err(&d, NULL, LOADER_EUSAGE);
	expect_has(d.msg, "AWS_SECRET_ACCESS_KEY");
	cr_expect_null(strstr(d.msg, "sss"), "secret in \"%s\"", d.msg);
}

/* Long lines are fine where nobody reads them. */
Test(awscfg, long_line_elsewhere)
{
	static char text[20000];
	struct aws_cfg c;
	int n;

	n = snprintf(text, sizeof(text), "[other]\naws_session_token = ");
	memset(text + n, 't', 10000);
	snprintf(text + n + 10000, sizeof(text) - n - 10000,
		 "\n[default]\naws_access_key_id = AKIA\n"
		 "aws_secret_access_key = s\n");
	put(".aws/credentials", text);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIA");
}

static const struct {
	const char *file; /* config text, or NULL */
	const char *var, *val;
	const char *where; /* part of the message */
} bad_values[] = {
	{ NULL, "AWS_ENDPOINT_URL", "ftp://x.example", "$AWS_ENDPOINT_URL" },
	{ NULL, "AWS_ENDPOINT_URL_S3", "minio:9000", "$AWS_ENDPOINT_URL_S3" },
	{ NULL, "AWS_ENDPOINT_URL", "https://", "$AWS_ENDPOINT_URL" },
	{ NULL, "AWS_ENDPOINT_URL", "http:///path", "$AWS_ENDPOINT_URL" },
	{ NULL, "AWS_ENDPOINT_URL", "http://a b", "$AWS_ENDPOINT_URL" },
	{ "[default]\n\nendpoint_url = minio.local:9000\n", NULL, NULL,
	  "/.aws/config:3" },
	{ "[default]\ns3 =\n  endpoint_url = s3.example\n", NULL, NULL,
	  "/.aws/config:3" },
	{ NULL, "AWS_S3_ADDRESSING_STYLE", "virtual-host",
	  "$AWS_S3_ADDRESSING_STYLE" },
	{ "[default]\ns3 =\n  addressing_style = sideways\n", NULL, NULL,
	  "/.aws/config:3" },
	{ "[default]\ns3 =\n  addressing_style = very-very-long-style\n", NULL,
	  NULL, "/.aws/config:3" },
	{ NULL, "AWS_REGION", "us-east-1 # comment", "$AWS_REGION" },
	{ "[default]\nregion = eu/west\n", NULL, NULL, "/.aws/config:2" },
	{ "[default]\n[profile x\nregion = eu-west-1\n", NULL, NULL,
	  "/.aws/config:2" },
};

Test(awscfg, bad_values)
{
	for (size_t k = 0; k < NELEM(bad_values); k++) {
		char path[PATH_MAX];
		struct diag d;

		unset_aws();
		snprintf(path, sizeof(path), "%s/.aws/config", home);
		unlink(path);
		if (bad_values[k].file)
			put(".aws/config", bad_values[k].file);
		if (bad_values[k].var)
			setenv(bad_values[k].var, bad_values[k].val, 1);
		resolve_err(&d, NULL, LOADER_EUSAGE);
		expect_has(d.msg, bad_values[k].where);
	}
}

/* Addressing styles in any case, from the variable over the file. */
Test(awscfg, addressing)
{
	static const struct {
		const char *val;
		int want;
	} t[] = {
		{ "path", AWS_ADDR_PATH },
		{ "PATH", AWS_ADDR_PATH },
		{ "virtual", AWS_ADDR_VIRTUAL },
		{ "Virtual", AWS_ADDR_VIRTUAL },
		{ "auto", AWS_ADDR_AUTO },
	};
	struct aws_cfg c;

	put(".aws/config", "[default]\ns3 =\n  addressing_style = virtual\n");
	resolve_ok(&c, NULL);
	cr_expect_eq(c.addressing, AWS_ADDR_VIRTUAL);
	for (size_t k = 0; k < NELEM(t); k++) {
		setenv("AWS_S3_ADDRESSING_STYLE", t[k].val, 1);
		resolve_ok(&c, NULL);
		cr_expect_eq(c.addressing, t[k].want, "%s", t[k].val);
	}
}

/* A directory where a file should be cannot be read: an error. */
Test(awscfg, unreadable_credentials)
{
	char path[PATH_MAX];
	struct diag d;

	snprintf(path, sizeof(path), "%s/.aws/credentials", home);
	cr_assert_eq(mkdir(path, 0700), 0);
	resolve_err(&d, NULL, -EISDIR);
	expect_has(d.msg, path);
}

Test(awscfg, unreadable_config)
{
	char path[PATH_MAX];
	struct diag d;

	snprintf(path, sizeof(path), "%s/.aws/config", home);
	cr_assert_eq(mkdir(path, 0700), 0);
	/* The config file is read even when the keys are in variables. */
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	resolve_err(&d, NULL, -EISDIR);
	expect_has(d.msg, path);
	cr_expect_null(strstr(d.msg, "envsecret"), "%s", d.msg);
}

/* With keys in the environment the credentials file is not opened. */
Test(awscfg, env_skips_credentials_file)
{
	char path[PATH_MAX];
	struct aws_cfg c;

	snprintf(path, sizeof(path), "%s/.aws/credentials", home);
	cr_assert_eq(mkdir(path, 0700), 0);
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	resolve_ok(&c, NULL);
	cr_expect_str_eq(c.access_key, "AKIAENV");
}

static const struct {
	int addressing;
	const char *endpoint, *bucket;
	bool want;
} vhosts[] = {
	{ AWS_ADDR_PATH, "https://s3.us-east-1.amazonaws.com", "data", false },
	{ AWS_ADDR_VIRTUAL, "http://127.0.0.1:9000", "my.bucket", true },
	{ AWS_ADDR_AUTO, "https://s3.us-east-1.amazonaws.com", "data", true },
	{ AWS_ADDR_AUTO, "https://s3.example:8443/base", "data-1", true },
	{ AWS_ADDR_AUTO, "https://s3.example", "my.bucket", false },
	{ AWS_ADDR_AUTO, "https://s3.example", "ab", false },
	{ AWS_ADDR_AUTO, "https://s3.example", "Data", false },
	{ AWS_ADDR_AUTO, "https://s3.example", "-data", false },
	{ AWS_ADDR_AUTO, "https://s3.example", "data-", false },
	{ AWS_ADDR_AUTO, "https://s3.example", "data_1", false },
	{ AWS_ADDR_AUTO, "https://s3.example",
	  "a1234567890123456789012345678901234567890123456789012345678901bc",
	  false },
	{ AWS_ADDR_AUTO, "https://s3.example",
	  "a123456789012345678901234567890123456789012345678901234567890bc",
	  true },
	{ AWS_ADDR_AUTO, "http://127.0.0.1:9000", "data", false },
	{ AWS_ADDR_AUTO, "http://10.1.2.3/", "data", false },
	{ AWS_ADDR_AUTO, "http://[::1]:9000", "data", false },
	{ AWS_ADDR_AUTO, "http://[fd00::5]", "data", false },
	{ AWS_ADDR_AUTO, "http://localhost:9000", "data", false },
	{ AWS_ADDR_AUTO, "http://LocalHost", "data", false },
	{ AWS_ADDR_AUTO, "http://minio:9000", "data", true },
	{ AWS_ADDR_AUTO, "http://localhost.example:9000", "data", true },
	{ AWS_ADDR_AUTO, "", "data", false },
};

Test(awscfg, virtual_host)
{
	for (size_t k = 0; k < NELEM(vhosts); k++) {
		struct aws_cfg c;

		memset(&c, 0, sizeof(c));
		c.addressing = vhosts[k].addressing;
		snprintf(c.endpoint, sizeof(c.endpoint), "%s",
			 vhosts[k].endpoint);
		cr_expect_eq(aws_virtual_host(&c, vhosts[k].bucket),
			     vhosts[k].want, "%d %s %s", vhosts[k].addressing,
			     vhosts[k].endpoint, vhosts[k].bucket);
	}
}

static const struct {
	const char *url, *bucket, *prefix;
} good_urls[] = {
	{ "s3://bucket", "bucket", "" },
	{ "s3://bucket/", "bucket", "" },
	{ "s3://my.bucket-1/a", "my.bucket-1", "a" },
	{ "s3://abc/train/shards/", "abc", "train/shards" },
	{ "s3://abc/a/b.c/..d/.e", "abc", "a/b.c/..d/.e" },
	{ "s3://abc/with space/x?y#z", "abc", "with space/x?y#z" },
	{ "s3://123/x", "123", "x" },
};

Test(awscfg, url_good)
{
	for (size_t k = 0; k < NELEM(good_urls); k++) {
		char bucket[AWS_BUCKET_MAX], prefix[AWS_PREFIX_MAX];
		struct diag d = { "" };
		int err;

		cr_expect(aws_is_url(good_urls[k].url));
		err = aws_url_parse(good_urls[k].url, bucket, prefix, &d);
		cr_assert_eq(err, 0, "%s: %s", good_urls[k].url, d.msg);
		cr_expect_str_eq(bucket, good_urls[k].bucket, "%s",
				 good_urls[k].url);
		cr_expect_str_eq(prefix, good_urls[k].prefix, "%s",
				 good_urls[k].url);
	}
}

static const struct {
	const char *url, *why;
} bad_urls[] = {
	{ "bucket/prefix", "not an s3://" },
	{ "S3://bucket", "not an s3://" },
	{ "s3:/bucket", "not an s3://" },
	{ "s3://", "no bucket" },
	{ "s3:///prefix", "no bucket" },
	{ "s3://ab", "at least 3" },
	{ "s3://a234567890123456789012345678901234567890123456789012345678901234",
	  "at most 63" },
	{ "s3://Bucket/x", "lower-case" },
	{ "s3://buck_et", "lower-case" },
	{ "s3://-bucket", "starts and ends" },
	{ "s3://bucket./x", "starts and ends" },
	{ "s3://a..b", "\"..\"" },
	{ "s3://bucket//x", "\"//\"" },
	{ "s3://bucket//", "\"//\"" },
	{ "s3://bucket/a//b", "\"//\"" },
	{ "s3://bucket/a//", "\"//\"" },
	{ "s3://bucket/.", "segment" },
	{ "s3://bucket/a/../b", "segment" },
	{ "s3://bucket/a/./", "segment" },
	{ "s3://bucket/a/..", "segment" },
	{ "s3://bucket/a\nb", "control" },
	{ "s3://bucket/a\x7f", "control" },
};

Test(awscfg, url_bad)
{
	for (size_t k = 0; k < NELEM(bad_urls); k++) {
		char bucket[AWS_BUCKET_MAX], prefix[AWS_PREFIX_MAX];
		struct diag d = { "" };
		int err;

		err = aws_url_parse(bad_urls[k].url, bucket, prefix, &d);
		cr_expect_eq(err, LOADER_EUSAGE, "%s", bad_urls[k].url);
		expect_has(d.msg, bad_urls[k].why);
		cr_expect_null(strchr(d.msg, '\n'), "%s", d.msg);
		cr_expect_str_eq(bucket, "");
		cr_expect_str_eq(prefix, "");
	}
}

/* The message names the URL; prefixes fill their buffer and no more. */
Test(awscfg, url_lengths)
{
	static char url[AWS_PREFIX_MAX + 64];
	char bucket[AWS_BUCKET_MAX], prefix[AWS_PREFIX_MAX];
	struct diag d = { "" };
	int n;

	cr_expect_eq(aws_url_parse("s3://bucket/a//b", bucket, prefix, &d),
		     LOADER_EUSAGE);
	expect_has(d.msg, "s3://bucket/a//b");

	n = snprintf(url, sizeof(url), "s3://bucket/");
	memset(url + n, 'p', AWS_PREFIX_MAX - 1);
	url[n + AWS_PREFIX_MAX - 1] = '/';
	url[n + AWS_PREFIX_MAX] = '\0';
	cr_expect_eq(aws_url_parse(url, bucket, prefix, &d), 0, "%s", d.msg);
	cr_expect_eq(strlen(prefix), AWS_PREFIX_MAX - 1);
	url[n + AWS_PREFIX_MAX - 1] = 'p';
	cr_expect_eq(aws_url_parse(url, bucket, prefix, &d), LOADER_EUSAGE);
	expect_has(d.msg, "longer than");
	cr_expect_lt(strlen(d.msg), 400);
}

Test(awscfg, is_url)
{
	cr_expect(aws_is_url("s3://b"));
	cr_expect(aws_is_url("s3://"));
	cr_expect_not(aws_is_url("/data/s3://b"));
	cr_expect_not(aws_is_url("s3:"));
	cr_expect_not(aws_is_url(NULL));
}

Test(awscfg, wipe)
{
	static const struct aws_cfg zero;
	struct aws_cfg c;

	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	resolve_ok(&c, NULL);
	aws_cfg_wipe(&c);
	cr_expect_eq(memcmp(&c, &zero, sizeof(c)), 0);
	aws_cfg_wipe(NULL);
}
