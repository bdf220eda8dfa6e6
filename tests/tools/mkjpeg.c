/*
 * mkjpeg.c - write a small test JPEG.
 *
 *	mkjpeg OUT.jpg WIDTH HEIGHT [SEED] [--gray | --cmyk] [--progressive]
 *
 * The picture is smooth pseudo-random content: a coarse grid of random
 * values per channel, bilinearly interpolated, so that it compresses
 * like a photograph rather than like noise. The same arguments always
 * give the same file (quality 90, 4:2:0 chroma subsampling, or one
 * grayscale component with --gray). --cmyk writes four channels (C, M,
 * Y, K) as an Adobe YCCK JPEG: TurboJPEG converts the pixels to YCCK,
 * subsamples the two chroma components 4:2:0 and writes an Adobe marker.
 * --progressive writes a progressive JPEG (libjpeg's default scan
 * script) instead of a baseline one. Exit status: 0, 1 on failure, 2
 * for bad usage.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#define GRID	 8
#define MAX_SIDE 16384

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int usage(void)
{
	fprintf(stderr, "usage: mkjpeg OUT.jpg WIDTH HEIGHT [SEED] "
			"[--gray | --cmyk] [--progressive]\n");
	return 2;
}

static int parse_u64(const char *s, uint64_t max, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || end == s || *end || *v > max || s[0] == '-' ? -1 : 0;
}

/* Bilinear interpolation of grid g (GRID+1 squared values) at (x, y). */
static unsigned char sample(const unsigned char *g, uint64_t x, uint64_t y,
			    uint64_t w, uint64_t h)
{
	/* Fixed point: positions in 1/256 of a grid cell. */
	uint64_t fx = x * GRID * 256 / (w > 1 ? w - 1 : 1);
	uint64_t fy = y * GRID * 256 / (h > 1 ? h - 1 : 1);
	unsigned cx = (unsigned)(fx >> 8), cy = (unsigned)(fy >> 8);
	unsigned ax = (unsigned)(fx & 255), ay = (unsigned)(fy & 255);
	unsigned top, bot;

	if (cx >= GRID) {
		cx = GRID - 1;
		ax = 256;
	}
	if (cy >= GRID) {
		cy = GRID - 1;
		ay = 256;
	}
	top = g[cy * (GRID + 1) + cx] * (256 - ax) +
	      g[cy * (GRID + 1) + cx + 1] * ax;
	bot = g[(cy + 1) * (GRID + 1) + cx] * (256 - ax) +
	      g[(cy + 1) * (GRID + 1) + cx + 1] * ax;
	return (unsigned char)((top * (256 - ay) + bot * ay) >> 16);
}

int main(int argc, char **argv)
{
	const char *pos[4] = { 0 };
	unsigned npos = 0, nc;
	bool gray = false, cmyk = false, progressive = false;
	uint64_t w, h, seed = 1;
	unsigned char grid[4][(GRID + 1) * (GRID + 1)];
	int pf, samp, flags = TJFLAG_ACCURATEDCT;
	unsigned char *pix = NULL, *jpg = NULL;
	unsigned long jlen = 0;
	tjhandle tj = NULL;
	FILE *f = NULL;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--gray"))
			gray = true;
		else if (!strcmp(argv[i], "--cmyk"))
			cmyk = true;
		else if (!strcmp(argv[i], "--progressive"))
			progressive = true;
		else if (npos < 4)
			pos[npos++] = argv[i];
		else
			return usage();
	}
	if (npos < 3 || parse_u64(pos[1], MAX_SIDE, &w) ||
	    parse_u64(pos[2], MAX_SIDE, &h) || !w || !h ||
	    (npos == 4 && parse_u64(pos[3], UINT64_MAX, &seed)) ||
	    (gray && cmyk))
		return usage();
	nc = gray ? 1 : cmyk ? 4 : 3;
	pf = gray ? TJPF_GRAY : cmyk ? TJPF_CMYK : TJPF_RGB;
	samp = gray ? TJSAMP_GRAY : TJSAMP_420;
	if (progressive)
		flags |= TJFLAG_PROGRESSIVE;
	for (unsigned c = 0; c < nc; c++)
		for (unsigned i = 0; i < (GRID + 1) * (GRID + 1); i++)
			grid[c][i] = (unsigned char)(splitmix(&seed) >> 56);
	pix = malloc(w * h * nc);
	if (!pix) {
		fprintf(stderr, "mkjpeg: out of memory\n");
		goto out;
	}
	for (uint64_t y = 0; y < h; y++)
		for (uint64_t x = 0; x < w; x++)
			for (unsigned c = 0; c < nc; c++)
				pix[(y * w + x) * nc + c] =
					sample(grid[c], x, y, w, h);
	tj = tjInitCompress();
	if (!tj) {
		fprintf(stderr, "mkjpeg: tjInitCompress failed\n");
		goto out;
	}
	if (tjCompress2(tj, pix, (int)w, 0, (int)h, pf, &jpg, &jlen, samp, 90,
			flags)) {
		fprintf(stderr, "mkjpeg: %s\n", tjGetErrorStr2(tj));
		goto out;
	}
	f = fopen(pos[0], "wb");
	if (!f || fwrite(jpg, 1, jlen, f) != jlen) {
		fprintf(stderr, "mkjpeg: %s: %s\n", pos[0], strerror(errno));
		goto out;
	}
	if (fclose(f)) {
		f = NULL;
		fprintf(stderr, "mkjpeg: %s: %s\n", pos[0], strerror(errno));
		goto out;
	}
	f = NULL;
	rc = 0;
out:
	if (f)
		fclose(f);
	tjFree(jpg);
	if (tj)
		tjDestroy(tj);
	free(pix);
	return rc;
}
