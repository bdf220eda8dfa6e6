/*
 * jpegdims.c - print a JPEG's width, height and channel count.
 *
 *	jpegdims [FILE]		(standard input without FILE or with "-")
 *
 * prints "W H C" from the header alone: C is 1 for grayscale, 4 for
 * CMYK/YCCK, 3 otherwise, the colour channels stored (the codec decodes
 * CMYK/YCCK to 3 channels RGB, as a stream does). The
 * integration tests use it on payloads that dsdump --raw extracts.
 * Exit status: 0, 1 if the data is not a JPEG, 2 on a usage or I/O error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

static int read_all(FILE *f, unsigned char **out, size_t *len)
{
	unsigned char *buf = NULL, *p;
	size_t cap = 0, n = 0, r;

	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 1 << 16;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r);
	if (ferror(f)) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	*len = n;
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "-";
	FILE *f = stdin;
	unsigned char *buf = NULL;
	size_t len = 0;
	int w, h, sub, cs, rc = 0;
	tjhandle tj;

	if (argc > 2) {
		fprintf(stderr, "usage: jpegdims [FILE]\n");
		return 2;
	}
	if (strcmp(path, "-")) {
		f = fopen(path, "rb");
		if (!f) {
			fprintf(stderr, "jpegdims: %s: %s\n", path,
				strerror(errno));
			return 2;
		}
	}
	if (read_all(f, &buf, &len)) {
		fprintf(stderr, "jpegdims: %s: read error\n", path);
		rc = 2;
		goto out;
	}
	tj = tjInitDecompress();
	if (!tj) {
		rc = 2;
		goto out;
	}
	if (tjDecompressHeader3(tj, buf, (unsigned long)len, &w, &h, &sub,
				&cs)) {
		fprintf(stderr, "jpegdims: %s: %s\n", path, tjGetErrorStr2(tj));
		rc = 1;
	} else {
		printf("%d %d %d\n", w, h,
		       cs == TJCS_GRAY			  ? 1 :
		       cs == TJCS_CMYK || cs == TJCS_YCCK ? 4 :
							    3);
	}
	tjDestroy(tj);
out:
	free(buf);
	if (f != stdin)
		fclose(f);
	return rc;
}
