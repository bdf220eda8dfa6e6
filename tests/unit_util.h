/*
 * unit_util.h - small helpers shared by the criterion unit tests: a
 * deterministic generator, synthetic images, temporary files.
 *
 * Everything is static inline so that each test program stays one
 * translation unit and nothing here is linked into the libraries.
 */
#ifndef LD_UNIT_UTIL_H
#define LD_UNIT_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Side of the synthetic "digit" images, and their size in bytes. */
#define UT_DIGIT_SIDE 28
#define UT_DIGIT_SIZE (UT_DIGIT_SIDE * UT_DIGIT_SIDE)

/* xorshift64*: the same sequence on every run and every machine. */
static inline uint64_t ut_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * A 28x28 grey "image" that shares most of its structure with every other
 * one (a frame, a stroke, a dark background) and differs in the stroke's
 * position and some noise. Dictionaries trained on these learn a lot.
 */
static inline void ut_digit(unsigned char *img, unsigned seed)
{
	uint64_t s = 0x1234567ull + seed * 0x9e3779b9ull;
	unsigned cx = 10 + seed % 8, cy = 9 + (seed / 8) % 10;

	for (unsigned y = 0; y < UT_DIGIT_SIDE; y++) {
		for (unsigned x = 0; x < UT_DIGIT_SIDE; x++) {
			unsigned char v = 0;

			if (x == 0 || y == 0 || x == UT_DIGIT_SIDE - 1 ||
			    y == UT_DIGIT_SIDE - 1)
				v = 0x40;
			else if ((x >= cx && x < cx + 3) ||
				 (y >= cy && y < cy + 2 && x > 4 && x < 24))
				v = 0xf0 + (unsigned char)(ut_rand(&s) & 7);
			else if ((ut_rand(&s) & 31) == 0)
				v = (unsigned char)(ut_rand(&s) & 0x1f);
			img[y * UT_DIGIT_SIDE + x] = v;
		}
	}
}

/*
 * A smooth image (gradients and a soft disc) that JPEG reproduces well,
 * packed as width * channels bytes per row.
 */
static inline void ut_picture(unsigned char *px, unsigned w, unsigned h,
			      unsigned ch, unsigned seed)
{
	for (unsigned y = 0; y < h; y++) {
		for (unsigned x = 0; x < w; x++) {
			long dx = (long)x - (long)w / 2;
			long dy = (long)y - (long)h / 2;
			long r2 = dx * dx + dy * dy;
			long lim = (long)(w * w + h * h) / 16;
			unsigned char *p = px + ((size_t)y * w + x) * ch;

			for (unsigned c = 0; c < ch; c++) {
				unsigned v =
					(x * (60 + 40 * c)) / (w ? w : 1) +
					(y * (120 - 30 * c)) / (h ? h : 1) +
					seed * 7;

				if (r2 < lim)
					v += 60;
				p[c] = (unsigned char)(v > 255 ? 255 : v);
			}
		}
	}
}

/* Mean absolute difference of two byte arrays. */
static inline double ut_mae(const unsigned char *a, const unsigned char *b,
			    size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += (uint64_t)(a[i] > b[i] ? a[i] - b[i] : b[i] - a[i]);
	return n ? (double)sum / (double)n : 0.0;
}

/* "$TMPDIR/<stem>-XXXXXX" (or /tmp) into path, ready for mkstemp(). */
static inline void ut_tmpl(char *path, size_t n, const char *stem)
{
	const char *dir = getenv("TMPDIR");

	if (!dir || !*dir)
		dir = "/tmp";
	snprintf(path, n, "%s/%s-XXXXXX", dir, stem);
}

/*
 * Criterion keeps a few bytes from its argument parsing for the life of
 * the process. Under --enable-sanitizers LeakSanitizer would count them
 * and fail every test program, so they are suppressed here; LSan looks
 * this hook up by name, and without sanitizers nothing calls it.
 */
__attribute__((visibility("default"))) const char *
__lsan_default_suppressions(void);
__attribute__((visibility("default"))) const char *
__lsan_default_suppressions(void)
{
	return "leak:libcriterion\n";
}

/*
 * n samples cut into shards of uneven sizes, empty and one-record shards
 * included, the last one cut short to fit: their sizes into rec (room
 * for max), from a pattern whose largest shard is big. Returns the
 * number of shards, or max + 1 where more would be needed.
 */
static inline uint32_t ut_shards(uint64_t *rec, uint32_t max, uint64_t n,
				 uint64_t big)
{
	const uint64_t pat[] = { 1, 37, 5, 0, 200, 1, 16, 3, big, 64 };
	uint32_t k = 0;

	for (unsigned i = 0; n; i++) {
		uint64_t r = pat[i % (sizeof(pat) / sizeof(pat[0]))];

		if (r > n)
			r = n;
		if (k == max)
			return max + 1;
		rec[k++] = r;
		n -= r;
	}
	return k;
}

#endif /* LD_UNIT_UTIL_H */
