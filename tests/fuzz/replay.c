/*
 * replay.c - run a fuzz target over files, without libFuzzer: every file
 * named, and every file in every directory named, once, in name order.
 *
 *	replay_TARGET PATH...
 *
 * Prints how many inputs ran; a crash or a sanitizer report (in the
 * sanitizer build) fails it. Exit 0, or 2 when a path cannot be read.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path, unsigned *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (len == cap) {
			unsigned char *nb;

			cap = cap ? cap * 2 : 65536;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	(*n)++;
	return 0;
}

static int cmp_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	unsigned n = 0;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		struct dirent **v;
		struct stat st;
		int k;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i],
				strerror(errno));
			rc = 2;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i], &n))
				rc = 2;
			continue;
		}
		k = scandir(argv[i], &v, NULL, cmp_name);
		if (k < 0) {
			rc = 2;
			continue;
		}
		for (int j = 0; j < k; j++) {
			char path[4096];

			if (v[j]->d_name[0] != '.') {
				snprintf(path, sizeof(path), "%s/%s", argv[i],
					 v[j]->d_name);
				if (run_file(path, &n))
					rc = 2;
			}
			free(v[j]);
		}
		free(v);
	}
	printf("replayed %u inputs\n", n);
	return rc;
}
