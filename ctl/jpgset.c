/*
 * jpgset.c - every JPEG under a directory, in memory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "jpgset.h"
#include "loader_error.h"

struct jpgset {
	struct jpgset_file *v;
	size_t n, cap;
	uint64_t bytes;
};

int jpgset_read(const char *path, unsigned char **buf, size_t *len,
		struct diag *d)
{
	int fd, err;

	*buf = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		return diag_set(d, err, "%s: %s", path, strerror(-err));
	}
	err = fdio_read_whole(fd, JPGSET_FILE_MAX, buf, len);
	close(fd);
	if (err == -EINVAL)
		return diag_set(d, err, "%s: not a regular file", path);
	if (err == LOADER_ETOOBIG)
		return diag_set(d, err,
				"%s: %zu bytes, more than any JPEG holds", path,
				*len);
	if (err == LOADER_ETRUNC)
		return diag_set(d, err, "%s: shrank while being read", path);
	if (err)
		return diag_set(d, err, "%s: %s", path, strerror(-err));
	return 0;
}

static bool is_jpeg_name(const char *name)
{
	const char *dot = strrchr(name, '.');

	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

/* Read path into the set, which owns path from the call on, failed or not. */
static int add(struct jpgset *s, char *path, struct diag *d)
{
	struct jpgset_file f = { .path = path };
	int err;

	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct jpgset_file *v = realloc(s->v, cap * sizeof(*v));

		if (!v) {
			free(path);
			return diag_set(d, -ENOMEM, "%s", strerror(ENOMEM));
		}
		s->v = v;
		s->cap = cap;
	}
	err = jpgset_read(path, &f.data, &f.len, d);
	if (err) {
		free(path);
		return err;
	}
	s->v[s->n++] = f;
	s->bytes += f.len;
	return 0;
}

static int scan(struct jpgset *s, const char *dir, struct diag *d)
{
	struct dirent **names = NULL;
	int n, err = 0;

	n = scandir(dir, &names, NULL, alphasort);
	if (n < 0) {
		err = -errno;
		return diag_set(d, err, "%s: %s", dir, strerror(-err));
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		struct stat st, lst;
		char *path = NULL;

		/* After an error, only free what is left. */
		if (err || name[0] == '.')
			goto next;
		if (asprintf(&path, "%s/%s", dir, name) < 0) {
			path = NULL;
			err = diag_set(d, -ENOMEM, "%s", strerror(ENOMEM));
			goto next;
		}
		if (lstat(path, &lst) || stat(path, &st)) {
			err = -errno;
			diag_set(d, err, "%s: %s", path, strerror(-err));
		} else if (S_ISDIR(st.st_mode)) {
			if (!S_ISLNK(lst.st_mode))
				err = scan(s, path, d);
		} else if (S_ISREG(st.st_mode) && is_jpeg_name(name)) {
			err = add(s, path, d);
			path = NULL; /* the set owns it now */
		}
	next:
		free(path);
		free(names[i]);
	}
	free(names);
	return err;
}

int jpgset_load(struct jpgset **out, const char *dir, struct diag *d)
{
	struct jpgset *s = calloc(1, sizeof(*s));
	int err;

	*out = NULL;
	if (!s)
		return diag_set(d, -ENOMEM, "%s", strerror(ENOMEM));
	err = scan(s, dir, d);
	if (err) {
		jpgset_free(s);
		return err;
	}
	*out = s;
	return 0;
}

const struct jpgset_file *jpgset_files(const struct jpgset *s, size_t *n)
{
	*n = s->n;
	return s->v;
}

uint64_t jpgset_bytes(const struct jpgset *s)
{
	return s->bytes;
}

void jpgset_free(struct jpgset *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].data);
		free(s->v[i].path);
	}
	free(s->v);
	free(s);
}
