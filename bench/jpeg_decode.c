/*
 * jpeg_decode - the decode-only limit: how many JPEGs one thread turns into
 * RGB pixels per second with libjpeg-turbo's full decode.
 *
 *   bench/jpeg_decode [-t SECONDS] DIR
 *
 * Every *.jpg / *.jpeg file under DIR is read into memory first (jpgset:
 * sorted, hidden entries and symbolic links to directories skipped); then the
 * whole set is decoded (TurboJPEG, tjDecompress2 to packed RGB, default
 * flags: fancy upsampling, accurate integer IDCT) over and over until at
 * least SECONDS (default 2) have passed, and only the decoding is timed.
 * Prints
 *
 *   decode_only img_per_s=... mean_bytes=... images=... decoded=... seconds=...
 *
 * A file TurboJPEG cannot decode is an error: the limit is only meaningful
 * over the same files the loaders read.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "jpgset.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Decode each of the n files once into out (grown as needed); return 0,
 * or -EINVAL after naming the file TurboJPEG refused.
 */
static int decode_all(tjhandle tj, const struct jpgset_file *f, size_t n,
		      unsigned char **out, size_t *out_cap)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct jpgset_file *b = &f[i];
		int w, h, sub, cs;
		size_t need;

		if (tjDecompressHeader3(tj, b->data, b->len, &w, &h, &sub,
					&cs) < 0)
			goto bad;
		need = (size_t)w * h * 3;
		if (need > *out_cap) {
			unsigned char *p = realloc(*out, need);

			if (!p)
				return -ENOMEM;
			*out = p;
			*out_cap = need;
		}
		if (tjDecompress2(tj, b->data, b->len, *out, w, 0, h, TJPF_RGB,
				  0) < 0)
			goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "jpeg_decode: %s: %s\n", f[i].path, tjGetErrorStr2(tj));
	return -EINVAL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: jpeg_decode [-t SECONDS] DIR\n"
		   "Decode every JPEG under DIR (read into memory first) "
		   "on one thread\nuntil at least SECONDS (default 2) "
		   "have passed; print images per second.\n");
}

int main(int argc, char **argv)
{
	struct jpgset *set = NULL;
	const struct jpgset_file *f;
	struct diag d;
	unsigned char *out = NULL;
	size_t out_cap = 0, decoded = 0, n;
	double min_s = 2.0, t0, dt;
	tjhandle tj = NULL;
	int opt, ret = 1;

	while ((opt = getopt(argc, argv, "ht:")) != -1) {
		switch (opt) {
		case 't':
			min_s = strtod(optarg, NULL);
			if (!(min_s > 0)) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (jpgset_load(&set, argv[optind], &d)) {
		fprintf(stderr, "jpeg_decode: %s\n", d.msg);
		goto out;
	}
	f = jpgset_files(set, &n);
	if (!n) {
		fprintf(stderr, "jpeg_decode: no JPEG files under %s\n",
			argv[optind]);
		goto out;
	}
	tj = tjInitDecompress();
	if (!tj) {
		fprintf(stderr, "jpeg_decode: %s\n", tjGetErrorStr2(NULL));
		goto out;
	}

	/* One untimed pass: page in the output buffer and the code. */
	if (decode_all(tj, f, n, &out, &out_cap))
		goto out;
	t0 = now();
	do {
		if (decode_all(tj, f, n, &out, &out_cap))
			goto out;
		decoded += n;
		dt = now() - t0;
	} while (dt < min_s);

	printf("decode_only img_per_s=%.1f mean_bytes=%.0f images=%zu "
	       "decoded=%zu seconds=%.2f\n",
	       decoded / dt, (double)jpgset_bytes(set) / n, n, decoded, dt);
	ret = 0;
out:
	if (tj)
		tjDestroy(tj);
	free(out);
	jpgset_free(set);
	return ret;
}
