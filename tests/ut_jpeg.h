/*
 * ut_jpeg.h - JPEGs the unit tests need and TurboJPEG cannot write.
 *
 * Include after <stdio.h> (jpeglib.h needs FILE and size_t first),
 * <criterion/criterion.h>, <jpeglib.h> and <turbojpeg.h>; link with
 * libjpeg and libturbojpeg.
 */
#ifndef UT_JPEG_H
#define UT_JPEG_H

#include <stdbool.h>
#include <stddef.h>

/*
 * w x h pixels of cs (JCS_CMYK: 4 bytes each, stored as CMYK with an
 * Adobe marker and no transform; JCS_RGB: 3 bytes, stored as YCbCr) at
 * quality 90, progressive or arithmetic-coded if asked, through libjpeg.
 * Returns the JPEG (free() it) and its length in *len.
 */
static inline unsigned char *ut_encode_lj(const unsigned char *px, unsigned w,
					  unsigned h, J_COLOR_SPACE cs,
					  bool prog, bool arith, size_t *len)
{
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	unsigned char *out = NULL;
	unsigned long n = 0;
	unsigned ch = cs == JCS_CMYK ? 4 : 3;

	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &out, &n);
	c.image_width = w;
	c.image_height = h;
	c.input_components = (int)ch;
	c.in_color_space = cs;
	jpeg_set_defaults(&c);
	if (cs == JCS_CMYK)
		jpeg_set_colorspace(&c, JCS_CMYK);
	jpeg_set_quality(&c, 90, TRUE);
	if (prog)
		jpeg_simple_progression(&c);
	c.arith_code = arith ? TRUE : FALSE;
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < c.image_height) {
		JSAMPROW row = (JSAMPROW)px + (size_t)c.next_scanline * w * ch;

		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	*len = n;
	return out;
}

/*
 * w x h RGB pixels as a progressive JPEG of 1 + 63 * 3 scans: the DC
 * of every component, then each AC coefficient of each component in a
 * scan of its own (valid, and costly: a "scan bomb"). Returns the JPEG
 * (free() it) and its length in *len.
 */
static inline unsigned char *ut_encode_scans(const unsigned char *px,
					     unsigned w, unsigned h,
					     size_t *len)
{
	static jpeg_scan_info scans[1 + 63 * 3];
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	unsigned char *out = NULL;
	unsigned long n = 0;
	int k = 0;

	scans[k++] = (jpeg_scan_info){ 3, { 0, 1, 2, 0 }, 0, 0, 0, 0 };
	for (int comp = 0; comp < 3; comp++)
		for (int ss = 1; ss < 64; ss++)
			scans[k++] = (jpeg_scan_info){ 1, { comp, 0, 0, 0 },
						       ss, ss, 0, 0 };
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	jpeg_mem_dest(&c, &out, &n);
	c.image_width = w;
	c.image_height = h;
	c.input_components = 3;
	c.in_color_space = JCS_RGB;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, 90, TRUE);
	c.scan_info = scans;
	c.num_scans = k;
	jpeg_start_compress(&c, TRUE);
	while (c.next_scanline < c.image_height) {
		JSAMPROW row = (JSAMPROW)px + (size_t)c.next_scanline * w * 3;

		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	*len = n;
	return out;
}

/* w x h CMYK pixels stored as CMYK, progressive if asked (ut_encode_lj). */
static inline unsigned char *ut_encode_cmyk(const unsigned char *px, unsigned w,
					    unsigned h, bool prog, size_t *len)
{
	return ut_encode_lj(px, w, h, JCS_CMYK, prog, false, len);
}

/* w x h RGB pixels as an arithmetic-coded JPEG (ut_encode_lj). */
static inline unsigned char *ut_encode_arith(const unsigned char *px,
					     unsigned w, unsigned h, size_t *len)
{
	return ut_encode_lj(px, w, h, JCS_RGB, false, true, len);
}

/*
 * w x h pixels of TurboJPEG format pf at quality 90 with subsampling
 * subsamp, progressive if asked; a failure fails the test. Returns the
 * JPEG (free() it) and its length in *len.
 */
static inline unsigned char *ut_encode_tj(const unsigned char *px, int w, int h,
					  int pf, int subsamp, bool prog,
					  size_t *len)
{
	unsigned char *jpg = NULL, *copy;
	unsigned long n = 0;
	tjhandle tc = tjInitCompress();

	cr_assert_not_null(tc);
	cr_assert_eq(tjCompress2(tc, px, w, 0, h, pf, &jpg, &n, subsamp, 90,
				 prog ? TJFLAG_PROGRESSIVE : 0),
		     0, "tjCompress2: %s", tjGetErrorStr2(tc));
	tjDestroy(tc);
	copy = malloc(n);
	cr_assert_not_null(copy);
	memcpy(copy, jpg, n);
	tjFree(jpg);
	*len = n;
	return copy;
}

#endif /* UT_JPEG_H */
