/*
 * test_pngd.c - PNG decoding (codecs/pngd.c) through jroi, the image
 * decoder every caller uses: whole images of every colour type against
 * the pixels written, box-averaged scales and regions against averages
 * computed here, interlaced images, headers, damaged and cut files, and
 * the pixel limit.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <png.h>

#include "diag.h"
#include "jroi.h"
#include "loader_error.h"
#include "pngd.h"

#define W 37
#define H 23

/* Pixels of a test image: ch channels, a pattern that varies everywhere. */
static unsigned char *pattern(uint32_t w, uint32_t h, uint32_t ch)
{
	unsigned char *p = malloc((size_t)w * h * ch);

	cr_assert_not_null(p);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			for (uint32_t c = 0; c < ch; c++)
				p[((size_t)y * w + x) * ch + c] =
					(unsigned char)(x * 7 + y * 13 +
							c * 50 + x * y);
	return p;
}

/* A PNG of px (format: libpng's simplified PNG_FORMAT_*) in memory. */
static unsigned char *encode(const unsigned char *px, uint32_t w, uint32_t h,
			     uint32_t format, size_t *len)
{
	png_image im;
	png_alloc_size_t n = 0;
	unsigned char *buf;

	memset(&im, 0, sizeof(im));
	im.version = PNG_IMAGE_VERSION;
	im.width = w;
	im.height = h;
	im.format = format;
	cr_assert(png_image_write_to_memory(&im, NULL, &n, 0, px, 0, NULL));
	buf = malloc(n);
	cr_assert_not_null(buf);
	cr_assert(png_image_write_to_memory(&im, buf, &n, 0, px, 0, NULL));
	*len = n;
	return buf;
}

/* An interlaced RGB PNG of px, through libpng's own writer. */
struct mem {
	unsigned char *buf;
	size_t len, cap;
};

static void mem_write(png_structp ps, png_bytep data, size_t n)
{
	struct mem *m = png_get_io_ptr(ps);

	if (m->len + n > m->cap) {
		m->cap = (m->len + n) * 2;
		m->buf = realloc(m->buf, m->cap);
		cr_assert_not_null(m->buf);
	}
	memcpy(m->buf + m->len, data, n);
	m->len += n;
}

static void mem_flush(png_structp ps)
{
	(void)ps;
}

static unsigned char *encode_interlaced(const unsigned char *px, uint32_t w,
					uint32_t h, size_t *len)
{
	png_structp ps = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL,
						 NULL, NULL);
	png_infop pi = png_create_info_struct(ps);
	struct mem m = { 0 };
	png_bytep *rows = malloc(h * sizeof(*rows));

	cr_assert(ps && pi && rows);
	for (uint32_t y = 0; y < h; y++)
		rows[y] = (png_bytep)px + (size_t)y * w * 3;
	png_set_write_fn(ps, &m, mem_write, mem_flush);
	png_set_IHDR(ps, pi, w, h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_ADAM7,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_set_rows(ps, pi, rows);
	png_write_png(ps, pi, PNG_TRANSFORM_IDENTITY, NULL);
	png_destroy_write_struct(&ps, &pi);
	free(rows);
	*len = m.len;
	return m.buf;
}

static struct jroi_dec *dec;

static void setup(void)
{
	cr_assert_eq(jroi_new(&dec, 0), 0);
}

static void teardown(void)
{
	jroi_free(dec);
}

TestSuite(pngd, .init = setup, .fini = teardown);

Test(pngd, signature_and_header)
{
	unsigned char *px = pattern(W, H, 3);
	size_t len;
	unsigned char *png = encode(px, W, H, PNG_FORMAT_RGB, &len);
	struct jroi_info info;
	struct diag d;

	cr_assert(pngd_is(png, len));
	cr_assert_not(pngd_is(png, 7));
	cr_assert_not(pngd_is("\xff\xd8\xff\xe0", 4));
	cr_assert_eq(jroi_header(dec, png, len, &info, &d), 0, "%s", d.msg);
	cr_assert_eq(info.width, W);
	cr_assert_eq(info.height, H);
	cr_assert_eq(info.channels, 3);
	cr_assert_eq(info.cs, JROI_CS_RGB);
	/* A wrong IHDR length, and a colour type PNG does not have. */
	png[11] = 14;
	cr_assert_eq(jroi_header(dec, png, len, &info, &d), LOADER_EDECODE);
	png[11] = 13;
	png[25] = 5;
	cr_assert_eq(jroi_header(dec, png, len, &info, &d), LOADER_EDECODE);
	cr_assert(strstr(d.msg, "colour type 5"), "%s", d.msg);
	free(png);
	free(px);
}

/* Every colour type decodes to what was written, as Pillow's RGB has it. */
Test(pngd, colour_types_whole)
{
	static const struct {
		uint32_t format, in_ch, out_ch;
	} v[] = {
		{ PNG_FORMAT_RGB, 3, 3 },
		{ PNG_FORMAT_RGBA, 4, 3 }, /* alpha dropped, not composited */
		{ PNG_FORMAT_GRAY, 1, 1 },
		{ PNG_FORMAT_GA, 2, 1 },
	};

	for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
		unsigned char *px = pattern(W, H, v[k].in_ch);
		unsigned char out[W * H * 3];
		struct jroi_out jo;
		struct diag d;
		size_t len;
		unsigned char *png = encode(px, W, H, v[k].format, &len);

		cr_assert_eq(jroi_decode(dec, png, len, NULL, out, 0,
					 sizeof(out), &jo, &d),
			     0, "format %u: %s", v[k].format, d.msg);
		cr_assert_eq(jo.channels, v[k].out_ch);
		cr_assert_eq(jo.width, W);
		cr_assert_eq(jo.height, H);
		for (size_t i = 0; i < (size_t)W * H; i++)
			for (uint32_t c = 0; c < v[k].out_ch; c++)
				cr_assert_eq(out[i * v[k].out_ch + c],
					     px[i * v[k].in_ch + c],
					     "format %u pixel %zu", v[k].format,
					     i);
		free(png);
		free(px);
	}
}

/*
 * A region at a scale below 8/8: each pixel the rounded average of its
 * f x f block (partial blocks at the edges over what they have).
 */
static void check_scaled(const unsigned char *png, size_t len,
			 const unsigned char *px, uint32_t x, uint32_t y,
			 uint32_t w, uint32_t h, uint32_t num)
{
	struct jroi_req q = { x, y, w, h, 0, 0, num };
	unsigned char out[W * H * 3];
	uint32_t f = 8 / num;
	struct jroi_out jo;
	struct diag d;

	cr_assert_eq(
		jroi_decode(dec, png, len, &q, out, 0, sizeof(out), &jo, &d), 0,
		"%s", d.msg);
	cr_assert_eq(jo.scale_num, num);
	cr_assert_eq(jo.scaled_w, (W + f - 1) / f);
	cr_assert_eq(jo.scaled_h, (H + f - 1) / f);
	cr_assert_eq(jo.x0, x / f);
	cr_assert_eq(jo.y0, y / f);
	for (uint32_t oy = 0; oy < jo.height; oy++)
		for (uint32_t ox = 0; ox < jo.width; ox++)
			for (uint32_t c = 0; c < 3; c++) {
				uint32_t sx = (jo.x0 + ox) * f;
				uint32_t sy = (jo.y0 + oy) * f, sum = 0, n = 0;

				for (uint32_t yy = sy; yy < sy + f && yy < H;
				     yy++)
					for (uint32_t xx = sx;
					     xx < sx + f && xx < W; xx++, n++)
						sum += px[((size_t)yy * W +
							   xx) * 3 +
							  c];
				cr_assert_eq(
					out[((size_t)oy * jo.width + ox) * 3 +
					    c],
					(sum + n / 2) / n,
					"scale %u/8 at %u,%u", num, ox, oy);
			}
}

Test(pngd, scaled_regions)
{
	unsigned char *px = pattern(W, H, 3);
	size_t len;
	unsigned char *png = encode(px, W, H, PNG_FORMAT_RGB, &len);

	for (uint32_t num = 1; num <= 8; num *= 2) {
		check_scaled(png, len, px, 0, 0, W, H, num);
		check_scaled(png, len, px, 5, 3, 20, 17, num);
		check_scaled(png, len, px, W - 4, H - 3, 4, 3, num);
	}
	free(png);
	free(px);
}

/* A scale that is no power of two is taken as the coarser one that is. */
Test(pngd, odd_scale_rounds_down)
{
	unsigned char *px = pattern(W, H, 3);
	size_t len;
	unsigned char *png = encode(px, W, H, PNG_FORMAT_RGB, &len);
	struct jroi_req q = { 0, 0, W, H, 0, 0, 6 };
	unsigned char out[W * H * 3];
	struct jroi_out jo;
	struct diag d;

	cr_assert_eq(
		jroi_decode(dec, png, len, &q, out, 0, sizeof(out), &jo, &d), 0,
		"%s", d.msg);
	cr_assert_eq(jo.scale_num, 4);
	q.scale_num = 16;
	cr_assert_eq(
		jroi_decode(dec, png, len, &q, out, 0, sizeof(out), &jo, &d),
		LOADER_ERANGE);
	free(png);
	free(px);
}

Test(pngd, interlaced)
{
	unsigned char *px = pattern(W, H, 3);
	size_t len;
	unsigned char *png = encode_interlaced(px, W, H, &len);
	unsigned char out[W * H * 3];
	struct jroi_info info;
	struct jroi_out jo;
	struct diag d;

	cr_assert_eq(jroi_header(dec, png, len, &info, &d), 0, "%s", d.msg);
	cr_assert(info.progressive);
	cr_assert_eq(
		jroi_decode(dec, png, len, NULL, out, 0, sizeof(out), &jo, &d),
		0, "%s", d.msg);
	cr_assert_eq(memcmp(out, px, sizeof(out)), 0);
	check_scaled(png, len, px, 3, 2, 30, 19, 2);
	free(png);
	free(px);
}

/* Cut short or damaged: an error, never pixels. */
Test(pngd, damaged)
{
	unsigned char *px = pattern(W, H, 3);
	size_t len;
	unsigned char *png = encode(px, W, H, PNG_FORMAT_RGB, &len);
	unsigned char out[W * H * 3];
	struct jroi_out jo;
	struct diag d;

	cr_assert_eq(jroi_decode(dec, png, len * 9 / 10, NULL, out, 0,
				 sizeof(out), &jo, &d),
		     LOADER_EDECODE);
	cr_assert(strstr(d.msg, "png decode"), "%s", d.msg);
	/*
	 * The last byte of the image data flipped: a region of the top rows
	 * does not read that far, and is refused all the same.
	 */
	{
		struct jroi_req top = { 0, 0, W, 2, 0, 0, JROI_DENOM };

		png[len - 17] ^= 0x55;
		cr_assert_eq(jroi_decode(dec, png, len, &top, out, 0,
					 sizeof(out), &jo, &d),
			     LOADER_EDECODE);
		cr_assert(strstr(d.msg, "CRC error"), "%s", d.msg);
		png[len - 17] ^= 0x55;
	}
	/* A flipped byte in the image data: its chunk's CRC is wrong. */
	png[len / 2] ^= 0x55;
	cr_assert_eq(
		jroi_decode(dec, png, len, NULL, out, 0, sizeof(out), &jo, &d),
		LOADER_EDECODE);
	cr_assert_eq(
		jroi_decode(dec, png, 20, NULL, out, 0, sizeof(out), &jo, &d),
		LOADER_EDECODE);
	free(png);
	free(px);
}

Test(pngd, limits)
{
	unsigned char *px = pattern(W, H, 3);
	size_t len;
	unsigned char *png = encode(px, W, H, PNG_FORMAT_RGB, &len);
	unsigned char out[W * H * 3];
	struct jroi_dec *small;
	struct jroi_info info;
	struct jroi_out jo;
	struct diag d;

	/* Room for less than the image. */
	cr_assert_eq(jroi_decode(dec, png, len, NULL, out, 0, sizeof(out) - 1,
				 &jo, &d),
		     LOADER_ETOOBIG);
	/* A decoder whose pixel limit is below the image's. */
	cr_assert_eq(jroi_new(&small, W * H - 1), 0);
	cr_assert_eq(jroi_header(small, png, len, &info, &d), LOADER_ETOOBIG);
	cr_assert(strstr(d.msg, "exceeds the limit"), "%s", d.msg);
	jroi_free(small);
	free(png);
	free(px);
}
