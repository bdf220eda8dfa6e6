/*
 * pngd.c - PNG decoding (libpng) for image fields (pngd.h).
 *
 * libpng rather than libspng: on 20 photographs saved as PNG by Pillow
 * (500 and 1600 pixels wide), Debian 12's libpng 1.6.39 decoded them to
 * RGB in 0.82-0.83x the time of its libspng 0.7.3 (bench/png_libs.sh),
 * and libpng is on every Debian machine already.
 *
 * A libpng read struct cannot be reset for another image, so each decode
 * makes one (a few allocations a PNG; JPEGs, the common case, reuse
 * their decoder). The row buffer, the block sums and, for interlaced
 * images, the whole-image buffer are the decoder's and only grow.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <zlib.h>

#include "fault.h"
#include "loader_error.h"
#include "pngd.h"

static const unsigned char pngd_sig[8] = { 0x89, 'P',  'N',  'G',
					   '\r', '\n', 0x1a, '\n' };

struct pngd {
	png_structp ps; /* the image being decoded; NULL between calls */
	png_infop pi;
	const unsigned char *src;
	size_t len, pos;
	char why[DIAG_MAX]; /* libpng's error message */
	unsigned char *row;
	size_t row_cap;
	uint32_t *sum;
	size_t sum_cap;
	unsigned char *img; /* an interlaced image, whole */
	size_t img_cap;
	png_bytep *rows;
	size_t rows_cap;
};

bool pngd_is(const void *src, size_t len)
{
	return src && len >= sizeof(pngd_sig) &&
	       !memcmp(src, pngd_sig, sizeof(pngd_sig));
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

int pngd_header(const void *src, size_t len, struct pngd_info *info,
		struct diag *d)
{
	const unsigned char *p = src;
	uint32_t ct, bd;

	memset(info, 0, sizeof(*info));
	if (!pngd_is(src, len))
		return diag_set(d, LOADER_EDECODE, "not a PNG file");
	/* The signature, then IHDR: length 13, type, 13 bytes, CRC. */
	if (len < 8 + 8 + 13 + 4 || be32(p + 8) != 13 ||
	    memcmp(p + 12, "IHDR", 4))
		return diag_set(d, LOADER_EDECODE,
				"png header: no IHDR chunk first");
	info->width = be32(p + 16);
	info->height = be32(p + 20);
	bd = p[24];
	ct = p[25];
	info->bit_depth = bd;
	info->color_type = ct;
	info->interlaced = p[28] != 0;
	if (!info->width || !info->height || info->width > 0x7fffffffu ||
	    info->height > 0x7fffffffu)
		return diag_set(d, LOADER_EDECODE, "png header: %ux%u pixels",
				info->width, info->height);
	/* The colour types and depths PNG allows (its spec, table 11.1). */
	if (!((ct == 0 &&
	       (bd == 1 || bd == 2 || bd == 4 || bd == 8 || bd == 16)) ||
	      (ct == 3 && (bd == 1 || bd == 2 || bd == 4 || bd == 8)) ||
	      ((ct == 2 || ct == 4 || ct == 6) && (bd == 8 || bd == 16))))
		return diag_set(
			d, LOADER_EDECODE,
			"png header: colour type %u with %u-bit samples", ct,
			bd);
	if (p[26] != 0 || p[27] != 0 || p[28] > 1)
		return diag_set(
			d, LOADER_EDECODE,
			"png header: unknown compression, filter or interlace method");
	info->channels = ct == 0 || ct == 4 ? 1 : 3;
	return 0;
}

int pngd_new(struct pngd **out)
{
	*out = mem_calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void pngd_free(struct pngd *p)
{
	if (!p)
		return;
	free(p->row);
	free(p->sum);
	free(p->img);
	free(p->rows);
	free(p);
}

static void on_error(png_structp ps, png_const_charp msg)
{
	struct pngd *p = png_get_error_ptr(ps);

	snprintf(p->why, sizeof(p->why), "%s", msg);
	png_longjmp(ps, 1);
}

static void on_warning(png_structp ps, png_const_charp msg)
{
	(void)ps;
	(void)msg;
}

static void on_read(png_structp ps, png_bytep out, size_t n)
{
	struct pngd *p = png_get_io_ptr(ps);

	if (n > p->len - p->pos)
		png_error(ps, "the file ends before its image data does");
	memcpy(out, p->src + p->pos, n);
	p->pos += n;
}

/* Grow *buf (of *cap bytes) to n; it never shrinks. */
static int room(void **buf, size_t *cap, size_t n)
{
	void *q;

	if (n <= *cap)
		return 0;
	q = realloc(*buf, n);
	if (!q)
		return -ENOMEM;
	*buf = q;
	*cap = n;
	return 0;
}

/*
 * Add source row r (rowbytes of ch-channel pixels) to the sums of the
 * scaled columns [x0, x1), or copy it when f is 1.
 */
static void take_row(struct pngd *p, const unsigned char *row, uint32_t f,
		     uint32_t width, uint32_t ch, uint32_t x0, uint32_t x1,
		     unsigned char *out)
{
	if (f == 1) {
		memcpy(out, row + (size_t)x0 * ch, (size_t)(x1 - x0) * ch);
		return;
	}
	for (uint32_t x = x0; x < x1; x++) {
		uint32_t a = x * f, b = a + f < width ? a + f : width;
		uint32_t *s = p->sum + (size_t)(x - x0) * ch;

		for (uint32_t i = a; i < b; i++)
			for (uint32_t c = 0; c < ch; c++)
				s[c] += row[(size_t)i * ch + c];
	}
}

/* Write the averages of a finished band of n rows, and clear the sums. */
static void put_band(struct pngd *p, uint32_t f, uint32_t width, uint32_t ch,
		     uint32_t x0, uint32_t x1, uint32_t n, unsigned char *out)
{
	for (uint32_t x = x0; x < x1; x++) {
		uint32_t a = x * f, b = a + f < width ? a + f : width;
		uint32_t cnt = (b - a) * n;
		uint32_t *s = p->sum + (size_t)(x - x0) * ch;

		for (uint32_t c = 0; c < ch; c++) {
			out[(size_t)(x - x0) * ch + c] =
				(unsigned char)((s[c] + cnt / 2) / cnt);
			s[c] = 0;
		}
	}
}

/* The body of pngd_decode(), under its setjmp. */
static int run(struct pngd *p, uint32_t f, uint32_t x0, uint32_t y0,
	       uint32_t x1, uint32_t y1, unsigned char *dst, size_t stride,
	       struct diag *d)
{
	png_structp ps = p->ps;
	png_infop pi = p->pi;
	uint32_t width, height, ch, passes, last, band = 0;
	size_t rowbytes;
	const unsigned char *row;

	png_set_read_fn(ps, p, on_read);
	png_read_info(ps, pi);
	width = png_get_image_width(ps, pi);
	height = png_get_image_height(ps, pi);
	/* Pillow's convert("RGB"): see pngd.h. */
	png_set_expand(ps);
	png_set_strip_16(ps);
	png_set_strip_alpha(ps);
	passes = (uint32_t)png_set_interlace_handling(ps);
	png_read_update_info(ps, pi);
	ch = png_get_channels(ps, pi);
	rowbytes = png_get_rowbytes(ps, pi);
	if ((ch != 1 && ch != 3) || rowbytes != (size_t)width * ch)
		return diag_set(d, LOADER_EDECODE,
				"png decode: %u channels after conversion", ch);
	if ((uint64_t)x1 * f > (uint64_t)width + f - 1 ||
	    (uint64_t)y1 * f > (uint64_t)height + f - 1 || x0 >= x1 || y0 >= y1)
		return diag_set(d, LOADER_ERANGE,
				"png decode: region outside the image");
	if (room((void **)&p->sum, &p->sum_cap,
		 (size_t)(x1 - x0) * ch * sizeof(*p->sum)))
		return diag_set(d, -ENOMEM, "png decode: out of memory");
	memset(p->sum, 0, (size_t)(x1 - x0) * ch * sizeof(*p->sum));
	/* The last source row the region needs. */
	last = y1 * f < height ? y1 * f : height;
	if (passes > 1) {
		if (room((void **)&p->img, &p->img_cap, rowbytes * height) ||
		    room((void **)&p->rows, &p->rows_cap,
			 height * sizeof(*p->rows)))
			return diag_set(
				d, -ENOMEM,
				"png decode: no memory for an interlaced %ux%u image",
				width, height);
		for (uint32_t r = 0; r < height; r++)
			p->rows[r] = p->img + (size_t)r * rowbytes;
		png_read_image(ps, p->rows);
	} else if (room((void **)&p->row, &p->row_cap, rowbytes)) {
		return diag_set(d, -ENOMEM, "png decode: out of memory");
	}
	for (uint32_t r = 0; r < last; r++) {
		unsigned char *out;

		if (passes > 1) {
			row = p->rows[r];
		} else {
			png_read_row(ps, p->row, NULL);
			row = p->row;
		}
		if (r < y0 * f)
			continue;
		out = dst + (size_t)(r / f - y0) * stride;
		take_row(p, row, f, width, ch, x0, x1, out);
		if (f > 1 && (++band == f || r + 1 == last)) {
			put_band(p, f, width, ch, x0, x1, band, out);
			band = 0;
		}
	}
	/* Damage after the last row shows only if read: read it all then. */
	if (last == height)
		png_read_end(ps, NULL);
	return 0;
}

/*
 * Every chunk whole and its CRC right, up to IEND. libpng checks a
 * chunk's CRC when it reaches the chunk's end: a region that stops
 * before the image's last row would not get there, and damage in the
 * image data could pass as other pixels. (crc32 costs a small part of
 * inflating the same bytes.)
 */
static int chunks_ok(const unsigned char *src, size_t len, struct diag *d)
{
	size_t pos = sizeof(pngd_sig);

	while (len - pos >= 12) {
		uint32_t n = be32(src + pos);

		if (n > len - pos - 12)
			return diag_set(
				d, LOADER_EDECODE,
				"png decode: the file ends inside a chunk at offset %zu",
				pos);
		if ((uint32_t)crc32(0, src + pos + 4, n + 4) !=
		    be32(src + pos + 8 + n))
			return diag_set(
				d, LOADER_EDECODE,
				"png decode: chunk %.4s at offset %zu: CRC error",
				(const char *)src + pos + 4, pos);
		if (!memcmp(src + pos + 4, "IEND", 4))
			return 0;
		pos += 12 + (size_t)n;
	}
	return diag_set(d, LOADER_EDECODE,
			"png decode: the file ends before its IEND chunk");
}

int pngd_decode(struct pngd *p, const void *src, size_t len, uint32_t f,
		uint32_t x0, uint32_t y0, uint32_t x1, uint32_t y1,
		unsigned char *dst, size_t stride, struct diag *d)
{
	int err;

	if (f != 1 && f != 2 && f != 4 && f != 8)
		return diag_set(d, LOADER_ERANGE, "png decode: scale 1/%u", f);
	err = chunks_ok(src, len, d);
	if (err)
		return err;
	p->src = src;
	p->len = len;
	p->pos = 0;
	p->why[0] = '\0';
	p->ps = png_create_read_struct(PNG_LIBPNG_VER_STRING, p, on_error,
				       on_warning);
	p->pi = p->ps ? png_create_info_struct(p->ps) : NULL;
	if (!p->pi) {
		png_destroy_read_struct(&p->ps, NULL, NULL);
		return diag_set(d, -ENOMEM, "png decode: out of memory");
	}
	/*
	 * Every libpng call below runs under this setjmp; run() keeps its
	 * state in its own frame and in p, and the jump discards the frame.
	 */
	if (setjmp(png_jmpbuf(p->ps))) {
		err = diag_set(
			d, strstr(p->why, "memory") ? -ENOMEM : LOADER_EDECODE,
			"png decode: %s", p->why);
	} else {
		err = run(p, f, x0, y0, x1, y1, dst, stride, d);
	}
	png_destroy_read_struct(&p->ps, &p->pi, NULL);
	return err;
}
