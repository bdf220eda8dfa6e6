/*
 * jpegdims.c - print a JPEG's width, height and channel count; or
 * whether two JPEGs decode to the same pixels.
 *
 *	jpegdims [FILE]		(standard input without FILE or with "-")
 *	jpegdims --same A B	(exit 0: the same pixels, 1: not)
 *
 * prints "W H C" from the header alone: C is 1 for grayscale, 4 for
 * CMYK/YCCK, 3 otherwise, the colour channels stored (the codec decodes
 * CMYK/YCCK to 3 channels RGB, as a stream does). The
 * integration tests use it on payloads that dsdump --raw extracts.
 * --same decodes both in full (TurboJPEG, default flags, warnings as
 * errors; CMYK/YCCK to CMYK) and compares every byte: the check that a
 * lossless transcode (pack --jpeg-restart) kept the pixels.
 * Exit status: 0, 1 if the data is not a JPEG (or --same: the pixels
 * differ), 2 on a usage or I/O error.
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

/* Read path whole into *buf (malloc'd). Returns 0 or 2 after a message. */
static int load(const char *path, unsigned char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	int err;

	if (!f) {
		fprintf(stderr, "jpegdims: %s: %s\n", path, strerror(errno));
		return 2;
	}
	err = read_all(f, buf, len);
	fclose(f);
	if (err) {
		fprintf(stderr, "jpegdims: %s: read error\n", path);
		return 2;
	}
	return 0;
}

/* Full decode of buf into *px (malloc'd); 0, or 1 after a message. */
static int pixels(tjhandle tj, const char *path, const unsigned char *buf,
		  size_t len, unsigned char **px, size_t *n)
{
	int w, h, sub, cs, pf;

	if (tjDecompressHeader3(tj, buf, (unsigned long)len, &w, &h, &sub,
				&cs)) {
		fprintf(stderr, "jpegdims: %s: %s\n", path, tjGetErrorStr2(tj));
		return 1;
	}
	pf = cs == TJCS_CMYK || cs == TJCS_YCCK ? TJPF_CMYK :
	     cs == TJCS_GRAY			  ? TJPF_GRAY :
						    TJPF_RGB;
	*n = (size_t)w * h * (size_t)tjPixelSize[pf];
	*px = malloc(*n ? *n : 1);
	if (!*px)
		return 2;
	if (tjDecompress2(tj, buf, (unsigned long)len, *px, w, 0, h, pf,
			  TJFLAG_STOPONWARNING)) {
		fprintf(stderr, "jpegdims: %s: %s\n", path, tjGetErrorStr2(tj));
		return 1;
	}
	return 0;
}

static int same(const char *a, const char *b)
{
	unsigned char *ba = NULL, *bb = NULL, *pa = NULL, *pb = NULL;
	size_t la = 0, lb = 0, na = 0, nb = 0;
	tjhandle tj = tjInitDecompress();
	int rc;

	if (!tj)
		return 2;
	rc = load(a, &ba, &la);
	if (!rc)
		rc = load(b, &bb, &lb);
	if (!rc)
		rc = pixels(tj, a, ba, la, &pa, &na);
	if (!rc)
		rc = pixels(tj, b, bb, lb, &pb, &nb);
	if (!rc && (na != nb || memcmp(pa, pb, na))) {
		fprintf(stderr, "jpegdims: %s and %s decode to other pixels\n",
			a, b);
		rc = 1;
	}
	tjDestroy(tj);
	free(ba);
	free(bb);
	free(pa);
	free(pb);
	return rc;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "-";
	FILE *f = stdin;
	unsigned char *buf = NULL;
	size_t len = 0;
	int w, h, sub, cs, rc = 0;
	tjhandle tj;

	if (argc == 4 && !strcmp(argv[1], "--same"))
		return same(argv[2], argv[3]);
	if (argc > 2) {
		fprintf(stderr, "usage: jpegdims [FILE] | --same A B\n");
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
