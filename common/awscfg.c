/*
 * awscfg.c - S3 endpoint and credentials from the environment and the
 * AWS CLI's two files, and s3:// URLs.
 *
 * The files are parsed the way botocore's configparser sees them, as far
 * as we need: names are compared case-insensitively (configparser lowers
 * them), a key ends at the first '=' or ':', a section may appear more
 * than once and the last value wins, and lines indented deeper than the
 * key above them continue its value. Only "s3 =", a key with an empty
 * first line, makes something of those lines (its "name = value"
 * subsection); any other value's further lines are skipped. Lines that
 * are neither a section, a key nor a comment are skipped too, but a
 * section header without its ']' is an error: skipping it would hand
 * the keys below it, secrets included, to the section above.
 *
 * Credentials come from exactly one place. A source with an access key
 * and no secret, or a secret and no key, is an error rather than a
 * reason to look further, since falling through would sign as another
 * identity, or as nobody, without saying so. A session token goes only
 * with the keys of its own source. The config file is read even when
 * the environment holds the keys, because the region and endpoint may
 * still come from it; the credentials file is not then opened at all.
 *
 * Secrets pass through our buffers, getline()'s and stdio's. All three
 * are wiped before they are freed or go out of scope, stdio's by handing
 * it a buffer of ours. No message ever quotes a credential.
 *
 * An empty environment variable counts as unset, as it does for most
 * tools: "AWS_PROFILE= cmd" means no profile, not a profile named "".
 *
 * URLs are strict about what a store would resolve differently from how
 * it reads: "//", "." and ".." in a prefix name other keys on S3 than on
 * a file system, and an HTTP stack may normalise them away, so they are
 * refused rather than guessed at. Only the '/' after the bucket and one
 * trailing '/' ("a directory") are dropped.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "awscfg.h"
#include "loader_error.h"

#define ADDR_MAX 16  /* "virtual", with room for a typo to be seen */
#define SHOW_MAX 200 /* bytes of a URL quoted in a message */

enum { FILE_CRED = 1, FILE_CONF = 2 };
enum { AT_TOP, AT_S3 }; /* where a key sits: the section, or "s3 =" */

/* The keys we read from a profile's section of either file. */
enum fld {
	F_KEY,
	F_SECRET,
	F_TOKEN,
	F_REGION,
	F_ENDPOINT,
	F_S3_ENDPOINT,
	F_S3_ADDRESSING,
	F_N
};

/* What a profile's sections of one file say; line[] is 0 where unset. */
struct section {
	char key[AWS_KEY_MAX];
	char secret[AWS_SECRET_MAX];
	char token[AWS_TOKEN_MAX];
	char region[AWS_REGION_MAX];
	char endpoint[AWS_ENDPOINT_MAX];
	char s3_endpoint[AWS_ENDPOINT_MAX];
	char s3_addressing[ADDR_MAX];
	unsigned long line[F_N];
	bool seen; /* the file has a section of the profile */
};

#define S(f) offsetof(struct section, f), sizeof(((struct section *)0)->f)
static const struct field {
	const char *name;
	int files; /* FILE_CRED, FILE_CONF or both */
	int at;
	size_t off, size;
} fields[F_N] = {
	[F_KEY] = { "aws_access_key_id", FILE_CRED | FILE_CONF, AT_TOP,
		    S(key) },
	[F_SECRET] = { "aws_secret_access_key", FILE_CRED | FILE_CONF, AT_TOP,
		       S(secret) },
	[F_TOKEN] = { "aws_session_token", FILE_CRED | FILE_CONF, AT_TOP,
		      S(token) },
	[F_REGION] = { "region", FILE_CONF, AT_TOP, S(region) },
	[F_ENDPOINT] = { "endpoint_url", FILE_CONF, AT_TOP, S(endpoint) },
	[F_S3_ENDPOINT] = { "endpoint_url", FILE_CONF, AT_S3, S(s3_endpoint) },
	[F_S3_ADDRESSING] = { "addressing_style", FILE_CONF, AT_S3,
			      S(s3_addressing) },
};
#undef S

static const struct {
	const char *name;
	int value;
} addressings[] = {
	{ "auto", AWS_ADDR_AUTO },
	{ "path", AWS_ADDR_PATH },
	{ "virtual", AWS_ADDR_VIRTUAL },
};

/* Where a value came from: a variable, or a file and line (line > 0). */
struct origin {
	const char *name;
	unsigned long line;
};

/* One file being read. */
struct parser {
	const char *path;
	const char *profile;
	int which; /* FILE_CRED or FILE_CONF */
	unsigned long lineno;
	bool in;       /* in one of the profile's sections */
	bool opt;      /* a key above whose value may go on below */
	size_t indent; /* that key's indentation */
	bool s3;       /* that key is "s3" with an empty first line */
	struct section *s;
};

static bool is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' ||
	       ch == '\v' || ch == '\f';
}

static bool is_ctl(char ch)
{
	return (unsigned char)ch < 0x20 || ch == 0x7f;
}

static bool is_lower_alnum(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

/* s without its leading and trailing white space, cut in place. */
static char *trim(char *s)
{
	size_t n;

	while (is_space(*s))
		s++;
	n = strlen(s);
	while (n && is_space(s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* $name, or NULL when it is unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* Describe what is wrong with a value from o; returns LOADER_EUSAGE. */
static int bad(struct diag *d, const struct origin *o, const char *what)
{
	if (o->line)
		return diag_set(d, LOADER_EUSAGE, "%s:%lu: %s", o->name,
				o->line, what);
	return diag_set(d, LOADER_EUSAGE, "$%s: %s", o->name, what);
}

/* Copy v (n bytes) into dst[size], or say that it is too long. */
static int copy(char *dst, size_t size, const char *v, size_t n,
		const char *what, const struct origin *o, struct diag *d)
{
	char msg[128];

	if (n >= size) {
		snprintf(msg, sizeof(msg), "%s is longer than %zu bytes", what,
			 size - 1);
		return bad(d, o, msg);
	}
	memcpy(dst, v, n);
	dst[n] = '\0';
	return 0;
}

/*
 * Whether a section header (the text between the brackets, trimmed)
 * names our profile. The config file says "[profile NAME]", except for
 * the default profile, which may also be "[default]"; the credentials
 * file says "[NAME]".
 */
static bool section_is(const struct parser *p, char *name)
{
	if (p->which == FILE_CRED)
		return !strcmp(name, p->profile);
	if (!strcmp(name, "default"))
		return !strcmp(p->profile, "default");
	if (!strncmp(name, "profile", 7) && is_space(name[7]))
		return !strcmp(trim(name + 7), p->profile);
	return false;
}

static int store(struct parser *p, int at, const char *key, const char *val,
		 struct diag *d)
{
	struct origin o = { p->path, p->lineno };

	for (size_t i = 0; i < F_N; i++) {
		const struct field *f = &fields[i];
		int err;

		if (!(f->files & p->which) || f->at != at ||
		    strcasecmp(key, f->name))
			continue;
		err = copy((char *)p->s + f->off, f->size, val, strlen(val),
			   f->name, &o, d);
		if (err)
			return err;
		p->s->line[i] = p->lineno;
		return 0;
	}
	return 0;
}

/*
 * One line, as configparser reads it: a line indented deeper than the
 * key above it continues that key's value, and blank and comment lines
 * do not end a value. botocore then reads a value whose first line is
 * empty as "name = value" lines: the subsection.
 */
static int parse_line(struct parser *p, char *line, struct diag *d)
{
	size_t indent = strspn(line, " \t");
	char *s = trim(line), *end, *eq, *key, *val;

	if (!*s || *s == '#' || *s == ';')
		return 0;
	if (p->opt && indent > p->indent) {
		if (!p->in || !p->s3 || !(eq = strchr(s, '=')))
			return 0;
		*eq = '\0';
		return store(p, AT_S3, trim(s), trim(eq + 1), d);
	}
	p->opt = false;
	if (*s == '[') {
		/* configparser, too, ignores what follows the last ']'. */
		end = strrchr(s, ']');
		if (!end)
			return diag_set(d, LOADER_EUSAGE,
					"%s:%lu: section header without ']'",
					p->path, p->lineno);
		*end = '\0';
		p->in = section_is(p, trim(s + 1));
		p->s->seen = p->s->seen || p->in;
		return 0;
	}
	eq = strpbrk(s, "=:");
	if (!eq)
		return 0;
	*eq = '\0';
	key = trim(s);
	val = trim(eq + 1);
	p->opt = true;
	p->indent = indent;
	p->s3 = !*val && !strcasecmp(key, "s3");
	if (!*val || !p->in)
		return 0;
	return store(p, AT_TOP, key, val, d);
}

/*
 * Read the profile's sections of the file at path into s. Returns 0,
 * also when there is no such file, or a negative code.
 */
static int read_file(const char *path, int which, const char *profile,
		     struct section *s, struct diag *d)
{
	struct parser p = {
		.path = path, .profile = profile, .which = which, .s = s
	};
	char iobuf[BUFSIZ];
	char *line = NULL;
	size_t cap = 0;
	FILE *f;
	int err = 0;

	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		err = -errno;
		return diag_set(d, err, "%s: %s", path, loader_strerror(err));
	}
	setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
	for (;;) {
		errno = 0;
		if (getline(&line, &cap, f) < 0)
			break;
		p.lineno++;
		err = parse_line(&p, line, d);
		if (err)
			goto out;
	}
	/* getline() says -1 at the end and on errors alike. */
	if (ferror(f) || !feof(f)) {
		err = errno ? -errno : -EIO;
		diag_set(d, err, "%s: %s", path, loader_strerror(err));
	}
out:
	if (line)
		explicit_bzero(line, cap);
	free(line);
	fclose(f);
	explicit_bzero(iobuf, sizeof(iobuf));
	return err;
}

/*
 * The path of one of the two files: $var (a leading "~/" is $HOME's, as
 * botocore has it), else $HOME/.aws/name, else "" (no file to read).
 */
static int file_path(char out[PATH_MAX], const char *var, const char *name,
		     struct diag *d)
{
	const char *v = env(var), *home = env("HOME");
	int n;

	if (v && home && (!strcmp(v, "~") || !strncmp(v, "~/", 2)))
		n = snprintf(out, PATH_MAX, "%s%s", home, v + 1);
	else if (v)
		n = snprintf(out, PATH_MAX, "%s", v);
	else if (home)
		n = snprintf(out, PATH_MAX, "%s/.aws/%s", home, name);
	else
		n = snprintf(out, PATH_MAX, "%s", "");
	if (n < 0 || n >= PATH_MAX)
		return diag_set(
			d, -ENAMETOOLONG,
			"the path of the AWS %s file is longer than %d bytes",
			name, PATH_MAX - 1);
	return 0;
}

/* Credentials from the environment: 1 if there are, 0 if not, or < 0. */
static int env_creds(struct aws_cfg *c, struct diag *d)
{
	static const char *const names[] = { "AWS_ACCESS_KEY_ID",
					     "AWS_SECRET_ACCESS_KEY",
					     "AWS_SESSION_TOKEN" };
	const char *v[3];
	char *dst[3] = { c->access_key, c->secret_key, c->session_token };
	size_t size[3] = { sizeof(c->access_key), sizeof(c->secret_key),
			   sizeof(c->session_token) };

	for (int i = 0; i < 3; i++)
		v[i] = env(names[i]);
	if (!v[0] && !v[1])
		return 0;
	if (!v[0] || !v[1])
		return diag_set(d, LOADER_EUSAGE, "$%s is set but $%s is not",
				names[v[0] ? 0 : 1], names[v[0] ? 1 : 0]);
	for (int i = 0; i < 3; i++) {
		struct origin o = { names[i], 0 };
		int err;

		if (!v[i])
			continue;
		err = copy(dst[i], size[i], v[i], strlen(v[i]), "the value", &o,
			   d);
		if (err)
			return err;
	}
	return 1;
}

/* Credentials from one file's section: 1 if there are, 0 if not, or < 0. */
static int file_creds(struct aws_cfg *c, const struct section *s,
		      const char *path, const char *profile, struct diag *d)
{
	bool key = s->line[F_KEY] && s->key[0];
	bool secret = s->line[F_SECRET] && s->secret[0];

	if (!key && !secret)
		return 0;
	if (!key || !secret)
		return diag_set(d, LOADER_EUSAGE,
				"%s:%lu: profile %s has %s but no %s", path,
				s->line[key ? F_KEY : F_SECRET], profile,
				fields[key ? F_KEY : F_SECRET].name,
				fields[key ? F_SECRET : F_KEY].name);
	/* The sizes match: the section's fields are the same as c's. */
	memcpy(c->access_key, s->key, sizeof(c->access_key));
	memcpy(c->secret_key, s->secret, sizeof(c->secret_key));
	if (s->line[F_TOKEN])
		memcpy(c->session_token, s->token, sizeof(c->session_token));
	return 1;
}

/*
 * Region names are used in a host name and in a signature's scope.
 * AWS's are lower case, digits and '-'; other stores use '_' and '.'.
 */
static int set_region(struct aws_cfg *c, const char *v, const struct origin *o,
		      struct diag *d)
{
	size_t n = strlen(v);

	for (size_t i = 0; i < n; i++)
		if (!is_lower_alnum(v[i]) && !(v[i] >= 'A' && v[i] <= 'Z') &&
		    v[i] != '-' && v[i] != '_' && v[i] != '.')
			return bad(
				d, o,
				"a region is letters, digits, '-', '_' and '.'");
	return copy(c->region, sizeof(c->region), v, n, "the region", o, d);
}

static int set_endpoint(struct aws_cfg *c, const char *v,
			const struct origin *o, struct diag *d)
{
	size_t n = strlen(v), scheme;
	char msg[AWS_ENDPOINT_MAX + 64];
	int err;

	while (n && v[n - 1] == '/')
		n--;
	for (size_t i = 0; i < n; i++)
		if (is_ctl(v[i]) || v[i] == ' ')
			return bad(
				d, o,
				"the endpoint has a space or a control character");
	err = copy(c->endpoint, sizeof(c->endpoint), v, n, "the endpoint", o,
		   d);
	if (err)
		return err;
	if (!strncasecmp(c->endpoint, "http://", 7))
		scheme = 4;
	else if (!strncasecmp(c->endpoint, "https://", 8))
		scheme = 5;
	else {
		snprintf(
			msg, sizeof(msg),
			"endpoint \"%s\" does not start with http:// or https://",
			c->endpoint);
		return bad(d, o, msg);
	}
	/* Signers and HTTP stacks want the scheme as RFC 3986 spells it. */
	for (size_t i = 0; i < scheme; i++)
		c->endpoint[i] |= 0x20;
	if (!c->endpoint[scheme + 3] || c->endpoint[scheme + 3] == '/' ||
	    c->endpoint[scheme + 3] == ':') {
		snprintf(msg, sizeof(msg), "endpoint \"%s\" has no host",
			 c->endpoint);
		return bad(d, o, msg);
	}
	return 0;
}

static int set_addressing(struct aws_cfg *c, const char *v,
			  const struct origin *o, struct diag *d)
{
	for (size_t i = 0; i < sizeof(addressings) / sizeof(addressings[0]);
	     i++) {
		if (!strcasecmp(v, addressings[i].name)) {
			c->addressing = addressings[i].value;
			return 0;
		}
	}
	return bad(d, o, "the addressing style is path, virtual or auto");
}

/* The first of the environment variables names that is set, or NULL. */
static const char *first_env(const char *const *names, struct origin *o)
{
	for (; *names; names++) {
		const char *v = env(*names);

		if (v) {
			o->name = *names;
			o->line = 0;
			return v;
		}
	}
	return NULL;
}

/* The value of field i in s, with its origin, or NULL where unset. */
static const char *from_file(const struct section *s, enum fld i,
			     const char *path, struct origin *o)
{
	if (!s->line[i])
		return NULL;
	o->name = path;
	o->line = s->line[i];
	return (const char *)s + fields[i].off;
}

int aws_cfg_resolve(struct aws_cfg *c, const char *profile, struct diag *d)
{
	static const char *const profile_vars[] = { "AWS_PROFILE",
						    "AWS_DEFAULT_PROFILE",
						    NULL };
	static const char *const region_vars[] = { "AWS_REGION",
						   "AWS_DEFAULT_REGION", NULL };
	static const char *const endpoint_vars[] = { "AWS_ENDPOINT_URL_S3",
						     "AWS_ENDPOINT_URL", NULL };
	static const char *const addressing_vars[] = {
		"AWS_S3_ADDRESSING_STYLE", NULL
	};
	struct section cred, conf;
	char cred_path[PATH_MAX], conf_path[PATH_MAX];
	struct origin o;
	const char *v;
	bool named;
	int got, err;

	memset(c, 0, sizeof(*c));
	memset(&cred, 0, sizeof(cred));
	memset(&conf, 0, sizeof(conf));
	if (!profile || !*profile)
		profile = first_env(profile_vars, &o);
	named = profile != NULL;
	if (!profile)
		profile = "default";

	err = file_path(cred_path, "AWS_SHARED_CREDENTIALS_FILE", "credentials",
			d);
	if (!err)
		err = file_path(conf_path, "AWS_CONFIG_FILE", "config", d);
	if (err)
		goto out;

	/* Credentials: the environment, else one file, else the other. */
	got = env_creds(c, d);
	if (got < 0) {
		err = got;
		goto out;
	}
	/* A named profile is looked for even when the keys are set. */
	if ((got == 0 || named) && cred_path[0]) {
		err = read_file(cred_path, FILE_CRED, profile, &cred, d);
		if (err)
			goto out;
	}
	if (conf_path[0]) {
		err = read_file(conf_path, FILE_CONF, profile, &conf, d);
		if (err)
			goto out;
	}
	/*
	 * A profile asked for by name and found in neither file is a typo
	 * the AWS tools refuse too: anonymous requests would hide it.
	 */
	if (named && !cred.seen && !conf.seen) {
		err = diag_set(
			d, LOADER_EUSAGE,
			"AWS profile \"%s\": no [%s] in %s and no [profile %s] in %s",
			profile, profile,
			cred_path[0] ? cred_path : "(no credentials file)",
			profile, conf_path[0] ? conf_path : "(no config file)");
		goto out;
	}
	if (got == 0)
		got = file_creds(c, &cred, cred_path, profile, d);
	if (got == 0)
		got = file_creds(c, &conf, conf_path, profile, d);
	if (got < 0) {
		err = got;
		goto out;
	}

	v = first_env(region_vars, &o);
	if (!v)
		v = from_file(&conf, F_REGION, conf_path, &o);
	if (v) {
		err = set_region(c, v, &o, d);
		if (err)
			goto out;
	} else {
		strcpy(c->region, "us-east-1");
	}

	v = first_env(endpoint_vars, &o);
	if (!v)
		v = from_file(&conf, F_S3_ENDPOINT, conf_path, &o);
	if (!v)
		v = from_file(&conf, F_ENDPOINT, conf_path, &o);
	if (v) {
		err = set_endpoint(c, v, &o, d);
		if (err)
			goto out;
	} else {
		/* A region of at most 63 bytes leaves this room to spare. */
		snprintf(c->endpoint, sizeof(c->endpoint),
			 "https://s3.%s.amazonaws.com", c->region);
	}

	v = first_env(addressing_vars, &o);
	if (!v)
		v = from_file(&conf, F_S3_ADDRESSING, conf_path, &o);
	c->addressing = AWS_ADDR_AUTO;
	if (v)
		err = set_addressing(c, v, &o, d);
out:
	explicit_bzero(&cred, sizeof(cred));
	explicit_bzero(&conf, sizeof(conf));
	if (err)
		aws_cfg_wipe(c);
	return err;
}

void aws_cfg_wipe(struct aws_cfg *c)
{
	if (c)
		explicit_bzero(c, sizeof(*c));
}

/* S3's DNS-compatible names: 3..63 of [a-z0-9-], alnum at both ends. */
static bool dns_bucket(const char *b)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63 || !is_lower_alnum(b[0]) ||
	    !is_lower_alnum(b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_lower_alnum(b[i]) && b[i] != '-')
			return false;
	return true;
}

/*
 * Whether the endpoint's host is a name that a bucket can be prefixed
 * to: not an IP address (all digits and dots, which also catches the
 * short forms that inet_aton() takes), not "[v6]" and not localhost,
 * which resolvers do not extend to "bucket.localhost" everywhere.
 */
static bool named_host(const char *endpoint)
{
	const char *h = strstr(endpoint, "://");
	size_t n;
	bool digits = true;

	if (!h)
		return false;
	h += 3;
	if (*h == '[')
		return false;
	n = strcspn(h, ":/");
	if (n && h[n - 1] == '.')
		n--;
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(h[i] >= '0' && h[i] <= '9') && h[i] != '.')
			digits = false;
	if (digits)
		return false;
	return !(n == 9 && !strncasecmp(h, "localhost", 9));
}

bool aws_virtual_host(const struct aws_cfg *c, const char *bucket)
{
	switch (c->addressing) {
	case AWS_ADDR_VIRTUAL: return true;
	case AWS_ADDR_AUTO:
		return bucket && dns_bucket(bucket) && named_host(c->endpoint);
	default:
		/* Path style works against every store: the safe fallback. */
		return false;
	}
}

bool aws_is_url(const char *s)
{
	return s && !strncmp(s, "s3://", 5);
}

/* url, fit to be quoted in a message: shortened, control bytes as '?'. */
static void show(char out[SHOW_MAX + 4], const char *url)
{
	size_t n = strnlen(url, SHOW_MAX);

	for (size_t i = 0; i < n; i++)
		out[i] = is_ctl(url[i]) ? '?' : url[i];
	strcpy(out + n, url[n] ? "..." : "");
}

static const char *bucket_problem(const char *b, size_t n)
{
	if (!n)
		return "no bucket name";
	if (n < 3)
		return "a bucket name is at least 3 bytes";
	if (n > AWS_BUCKET_MAX - 1)
		return "a bucket name is at most 63 bytes";
	for (size_t i = 0; i < n; i++) {
		if (!is_lower_alnum(b[i]) && b[i] != '.' && b[i] != '-')
			return "a bucket name is lower-case letters, digits, '.' and '-'";
		if (b[i] == '.' && i + 1 < n && b[i + 1] == '.')
			return "a bucket name has no \"..\"";
	}
	if (!is_lower_alnum(b[0]) || !is_lower_alnum(b[n - 1]))
		return "a bucket name starts and ends with a letter or digit";
	return NULL;
}

/*
 * The prefix p (n bytes, after the '/' that ends the bucket), less one
 * trailing '/'. Returns what is wrong with it, or NULL.
 */
static const char *prefix_problem(const char *p, size_t *n)
{
	size_t seg = 0;

	if (*n && p[*n - 1] == '/') {
		/* "s3://bucket//" is no more a bucket's root than "/x//" is. */
		if (!--*n)
			return "\"//\" in the prefix";
	}
	for (size_t i = 0; i <= *n; i++) {
		if (i < *n && is_ctl(p[i]))
			return "a control character in the prefix";
		if (i < *n && p[i] != '/')
			continue;
		if (i == seg && *n)
			return "\"//\" in the prefix";
		if ((i - seg == 1 && p[seg] == '.') ||
		    (i - seg == 2 && p[seg] == '.' && p[seg + 1] == '.'))
			return "a \".\" or \"..\" segment in the prefix";
		seg = i + 1;
	}
	if (*n > AWS_PREFIX_MAX - 1)
		return "the prefix is longer than 1023 bytes";
	return NULL;
}

int aws_url_parse(const char *url, char bucket[AWS_BUCKET_MAX],
		  char prefix[AWS_PREFIX_MAX], struct diag *d)
{
	char shown[SHOW_MAX + 4];
	const char *b, *p, *why;
	size_t nb, np = 0;

	bucket[0] = '\0';
	prefix[0] = '\0';
	if (!aws_is_url(url)) {
		show(shown, url ? url : "(null)");
		return diag_set(d, LOADER_EUSAGE,
				"\"%s\": not an s3://BUCKET[/PREFIX] URL",
				shown);
	}
	b = url + 5;
	nb = strcspn(b, "/");
	p = b + nb;
	if (*p == '/') {
		p++;
		np = strlen(p);
	}
	why = bucket_problem(b, nb);
	if (!why)
		why = prefix_problem(p, &np);
	if (why) {
		show(shown, url);
		return diag_set(d, LOADER_EUSAGE, "\"%s\": %s", shown, why);
	}
	memcpy(bucket, b, nb);
	bucket[nb] = '\0';
	memcpy(prefix, p, np);
	prefix[np] = '\0';
	return 0;
}
