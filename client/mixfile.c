/*
 * mixfile.c - a mixture file's members: the JSON that loaderctl mix
 * create writes, read into struct loader_member for loader_open() and
 * for loaderctl mix inspect.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "awscfg.h"
#include "loader.h"
#include "mixfile.h"
#include "msg.h"

/* A tar header's magic, at this offset of its 512 bytes. */
#define MIXFILE_TAR_MAGIC_AT 257

/* The keys each object may have, in the order messages list them. */
static const char *const top_keys[] = { "format", "version", "epoch_size",
					"members", NULL };
static const char *const member_keys[] = { "path",   "proportion", "repeat",
					   "choose", "pipeline",   NULL };
/* The member's keys that say how many samples it gives, enum order. */
static const char *const how_keys[] = {
	[LOADER_MIX_PROPORTION] = "proportion",
	[LOADER_MIX_REPEAT] = "repeat",
	[LOADER_MIX_CHOOSE] = "choose",
};

bool loader_is_mixfile(const char *path)
{
	unsigned char b[512];
	struct stat st;
	ssize_t n;
	int fd;

	if (aws_is_url(path))
		return false;
	/* O_NONBLOCK: a FIFO where a file should be must not hang here. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return false;
	}
	n = pread(fd, b, sizeof(b), 0);
	close(fd);
	if (n <= 0)
		return false;
	/* A tar whose first member's name begins with '{' stays a tar. */
	if (n >= MIXFILE_TAR_MAGIC_AT + 5 &&
	    !memcmp(b + MIXFILE_TAR_MAGIC_AT, "ustar", 5))
		return false;
	for (ssize_t i = 0; i < n; i++) {
		if (b[i] == '{')
			return true;
		if (b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r')
			return false;
	}
	return false;
}

/*
 * Text from the file, for a message: control characters shown as '?'
 * and a long one cut, so that a key cannot rewrite a terminal's line.
 */
static const char *loader_shown(char *dst, size_t cap, const char *s)
{
	size_t i = 0;

	for (; s[i] && i + 4 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	if (s[i]) {
		memcpy(dst + i, "...", 3);
		i += 3;
	}
	dst[i] = '\0';
	return dst;
}

/* The first key of object o that keys[] lacks, or NULL. */
static const char *loader_unknown_key(json_t *o, const char *const *keys)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v)
	{
		size_t i = 0;

		while (keys[i] && strcmp(keys[i], k))
			i++;
		if (!keys[i])
			return k;
	}
	return NULL;
}

/*
 * A member's path as loader_open() opens it: a relative path from the
 * file's directory, an absolute path or s3:// URL as it is.
 */
static char *loader_member_path(const char *dir, const char *path)
{
	size_t d, n;
	char *out;

	if (!dir || !strcmp(dir, ".") || path[0] == '/' || aws_is_url(path))
		return strdup(path);
	d = strlen(dir);
	n = strlen(path);
	out = malloc(d + n + 2);
	if (!out)
		return NULL;
	memcpy(out, dir, d);
	if (!d || dir[d - 1] != '/')
		out[d++] = '/';
	memcpy(out + d, path, n + 1);
	return out;
}

/* Member i (object v) into mf->m[i]. */
static int loader_parse_member(struct loader_mixfile *mf, size_t i, json_t *v,
			       const char *name, const char *dir, char *why,
			       size_t whylen)
{
	struct loader_member *m = &mf->m[i];
	char shown[64];
	const char *k;
	json_t *j, *how = NULL;

	if (!json_is_object(v))
		return msg_why(why, whylen, LOADER_EFORMAT,
			       "%s: member %zu is not an object", name, i);
	k = loader_unknown_key(v, member_keys);
	if (k)
		return msg_why(
			why, whylen, LOADER_EFORMAT,
			"%s: member %zu: unknown key \"%s\" (a member has path, proportion, repeat, choose and pipeline)",
			name, i, loader_shown(shown, sizeof(shown), k));
	j = json_object_get(v, "path");
	if (!json_is_string(j) || !json_string_length(j))
		return msg_why(why, whylen, LOADER_EFORMAT,
			       "%s: member %zu: \"path\" is %s", name, i,
			       j ? "not a path" : "missing");
	for (uint32_t h = 0; h <= LOADER_MIX_CHOOSE; h++) {
		json_t *x = json_object_get(v, how_keys[h]);

		if (!x)
			continue;
		if (how)
			return msg_why(
				why, whylen, LOADER_EFORMAT,
				"%s: member %zu: \"%s\" and \"%s\": give one of proportion, repeat and choose",
				name, i, how_keys[m->how], how_keys[h]);
		how = x;
		m->how = h;
	}
	if (!how)
		return msg_why(
			why, whylen, LOADER_EFORMAT,
			"%s: member %zu: no \"proportion\", \"repeat\" or \"choose\"",
			name, i);
	if (m->how == LOADER_MIX_CHOOSE ?
		    (!json_is_integer(how) || json_integer_value(how) < 1) :
		    (!json_is_number(how) || !(json_number_value(how) > 0)))
		return msg_why(why, whylen, LOADER_EFORMAT,
			       "%s: member %zu: \"%s\" is not %s", name, i,
			       how_keys[m->how],
			       m->how == LOADER_MIX_CHOOSE ?
				       "a whole number >= 1" :
				       "a number > 0");
	m->value = json_number_value(how);
	j = json_object_get(v, "pipeline");
	if (j && !json_is_string(j))
		return msg_why(why, whylen, LOADER_EFORMAT,
			       "%s: member %zu: \"pipeline\" is not a string",
			       name, i);
	if (j && !(m->pipeline = strdup(json_string_value(j))))
		return -ENOMEM;
	mf->path[i] = strdup(json_string_value(json_object_get(v, "path")));
	if (!mf->path[i])
		return -ENOMEM;
	m->dataset = loader_member_path(dir, mf->path[i]);
	if (!m->dataset)
		return -ENOMEM;
	return 0;
}

int loader_mixfile_parse(struct loader_mixfile *mf, const char *text,
			 size_t len, const char *name, const char *dir,
			 char *why, size_t whylen)
{
	json_error_t je;
	json_t *root, *j, *v;
	char shown[64];
	const char *k;
	size_t i;
	int err = 0;

	memset(mf, 0, sizeof(*mf));
	/* jansson refuses "\u0000" in strings: a path is a C string. */
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return msg_why(why, whylen, LOADER_EFORMAT,
			       "%s: line %d column %d: %s", name, je.line,
			       je.column, je.text);
	if (!json_is_object(root)) {
		err = msg_why(why, whylen, LOADER_EFORMAT,
			      "%s: not a JSON object", name);
		goto out;
	}
	j = json_object_get(root, "format");
	if (!json_is_string(j) ||
	    strcmp(json_string_value(j), MIXFILE_FORMAT)) {
		err = msg_why(
			why, whylen, LOADER_EFORMAT,
			"%s: \"format\" is not \"%s\": not a mixture file",
			name, MIXFILE_FORMAT);
		goto out;
	}
	j = json_object_get(root, "version");
	if (!json_is_integer(j) || json_integer_value(j) != MIXFILE_VERSION) {
		err = msg_why(why, whylen, LOADER_EVERSION,
			      "%s: \"version\" is not %d", name,
			      MIXFILE_VERSION);
		goto out;
	}
	/* Checked after format and version: another format has other keys. */
	k = loader_unknown_key(root, top_keys);
	if (k) {
		err = msg_why(
			why, whylen, LOADER_EFORMAT,
			"%s: unknown key \"%s\" (a mixture file has format, version, epoch_size and members)",
			name, loader_shown(shown, sizeof(shown), k));
		goto out;
	}
	j = json_object_get(root, "epoch_size");
	if (j && (!json_is_integer(j) || json_integer_value(j) < 0)) {
		err = msg_why(why, whylen, LOADER_EFORMAT,
			      "%s: \"epoch_size\" is not a whole number >= 0",
			      name);
		goto out;
	}
	mf->epoch_size = j ? (uint64_t)json_integer_value(j) : 0;
	j = json_object_get(root, "members");
	if (!json_is_array(j) || !json_array_size(j) ||
	    json_array_size(j) > LOADER_MAX_MEMBERS) {
		err = msg_why(
			why, whylen, LOADER_EFORMAT,
			"%s: \"members\" is not a list of 1 to %d members",
			name, LOADER_MAX_MEMBERS);
		goto out;
	}
	json_array_foreach(j, i, v)
	{
		mf->nmembers = (uint32_t)i + 1;
		err = loader_parse_member(mf, i, v, name, dir, why, whylen);
		if (err == -ENOMEM)
			msg_why(why, whylen, err, "%s: out of memory", name);
		if (err)
			goto out;
	}
out:
	json_decref(root);
	if (err)
		loader_mixfile_free(mf);
	return err;
}

int loader_mixfile_load(struct loader_mixfile *mf, const char *path, char *why,
			size_t whylen)
{
	char *text = NULL, *dir = NULL, *slash;
	struct stat st;
	size_t got = 0;
	int fd, err = 0;

	memset(mf, 0, sizeof(*mf));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return msg_why(why, whylen, -errno, "%s: %s", path,
			       strerror(errno));
	if (fstat(fd, &st)) {
		err = msg_why(why, whylen, -errno, "%s: %s", path,
			      strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = msg_why(why, whylen, LOADER_EFORMAT,
			      "%s: not a regular file", path);
		goto out;
	}
	if (st.st_size > MIXFILE_MAX_BYTES) {
		err = msg_why(why, whylen, LOADER_ETOOBIG,
			      "%s: %lld bytes, a mixture file has at most %d",
			      path, (long long)st.st_size, MIXFILE_MAX_BYTES);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	dir = strdup(path);
	if (!text || !dir) {
		err = msg_why(why, whylen, -ENOMEM, "%s: out of memory", path);
		goto out;
	}
	/* Up to the size fstat() gave: a file that grows is cut there. */
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, text + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = msg_why(why, whylen, -errno, "%s: %s", path,
				      strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0'; /* a file in / */
	else if (slash)
		*slash = '\0';
	err = loader_mixfile_parse(mf, text, got, path, slash ? dir : NULL, why,
				   whylen);
out:
	close(fd);
	free(text);
	free(dir);
	return err;
}

void loader_mixfile_free(struct loader_mixfile *mf)
{
	for (uint32_t i = 0; i < mf->nmembers; i++) {
		/* The strings are ours: loader_parse_member() made them. */
		free((char *)mf->m[i].dataset);
		free((char *)mf->m[i].pipeline);
		free(mf->path[i]);
	}
	memset(mf, 0, sizeof(*mf));
}
