/*
 * png_libs.c - the two PNG decoders Debian offers, on the same files:
 * libpng (what codecs/pngd.c uses) and libspng, each decoding every
 * file to 8-bit RGB, one thread, REPS passes.
 *
 *	png_libs REPS FILE...
 *
 * Prints "spng S libpng S ratio R": the seconds of each (median of 7
 * rounds) and libpng's time over libspng's. Built by bench/png_libs.sh
 * alone: libspng is no dependency of loaderd, only the other side of
 * this comparison.
 */
#include <png.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 7

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) ||
	    !(b = malloc((size_t)len ? (size_t)len : 1)) ||
	    fread(b, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "png_libs: %s: cannot read\n", path);
		exit(1);
	}
	fclose(f);
	*n = (size_t)len;
	return b;
}

static unsigned char out[256 << 20];

static size_t dec_spng(const unsigned char *b, size_t n)
{
	spng_ctx *c = spng_ctx_new(0);
	size_t sz = 0;
	int e = !c || spng_set_png_buffer(c, b, n) ||
		spng_decoded_image_size(c, SPNG_FMT_RGB8, &sz) ||
		sz > sizeof(out) ||
		spng_decode_image(c, out, sz, SPNG_FMT_RGB8, 0);

	spng_ctx_free(c);
	return e ? 0 : sz;
}

static size_t dec_png(const unsigned char *b, size_t n)
{
	png_image im;

	memset(&im, 0, sizeof(im));
	im.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_memory(&im, b, n))
		return 0;
	im.format = PNG_FORMAT_RGB;
	if (PNG_IMAGE_SIZE(im) > sizeof(out) ||
	    !png_image_finish_read(&im, NULL, out, 0, NULL)) {
		png_image_free(&im);
		return 0;
	}
	return PNG_IMAGE_SIZE(im);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int reps = argc > 2 ? atoi(argv[1]) : 0, nf = argc - 2;
	unsigned char **buf;
	size_t *len;
	double t[2][ROUNDS];

	if (reps < 1) {
		fprintf(stderr, "usage: png_libs REPS FILE...\n");
		return 2;
	}
	buf = calloc((size_t)nf, sizeof(*buf));
	len = calloc((size_t)nf, sizeof(*len));
	if (!buf || !len)
		return 1;
	for (int i = 0; i < nf; i++)
		buf[i] = slurp(argv[i + 2], &len[i]);
	/* Interleaved, so that a slow moment of the machine hits both. */
	for (int r = 0; r < ROUNDS; r++)
		for (int k = 0; k < 2; k++) {
			double t0 = now();

			for (int q = 0; q < reps; q++)
				for (int i = 0; i < nf; i++)
					if (!(k ? dec_png(buf[i], len[i]) :
						  dec_spng(buf[i], len[i]))) {
						fprintf(stderr,
							"png_libs: %s: %s cannot decode it\n",
							argv[i + 2],
							k ? "libpng" :
							    "libspng");
						return 1;
					}
			t[k][r] = now() - t0;
		}
	qsort(t[0], ROUNDS, sizeof(double), cmp);
	qsort(t[1], ROUNDS, sizeof(double), cmp);
	printf("spng %.3f libpng %.3f ratio %.2f\n", t[0][ROUNDS / 2],
	       t[1][ROUNDS / 2], t[1][ROUNDS / 2] / t[0][ROUNDS / 2]);
	return 0;
}
