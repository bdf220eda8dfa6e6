/*
 * jroi.c - region-of-interest, DCT-scaled JPEG decoding (libjpeg API).
 */
#include <errno.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "fault.h"
#include "jerr.h"
#include "jroi.h"
#include "jrst.h"
#include "loader_error.h"
#include "pngd.h"

/*
 * The scales worth decoding at, cheapest first. Measured with
 * libjpeg-turbo 2.1.5, one core, 500x375 q90 4:2:0 photographs: the 7/8,
 * 6/8 and 5/8 IDCTs have no SIMD path and cost as much as 8/8 or more
 * (0.7-1.0x its rate), 3/8 costs more than 4/8, while 4/8, 2/8 and 1/8
 * are each cheaper than the next finer one (1.4x, 1.6x, 2.0x the rate of
 * 8/8 on whole images). A request that 4/8 cannot satisfy is therefore
 * decoded at 8/8.
 */
static const uint8_t jroi_scales[] = { 1, 2, 4, 8 };

/* Rows asked of libjpeg per call (its row groups are 1 to 4 rows). */
#define JROI_ROWS 16

/*
 * Columns decoded beyond each side of the region, in scaled pixels.
 * Fancy (triangle) upsampling of 2x-subsampled chroma reads the chroma
 * sample next to each pixel; at the edge of a cropped row that sample is
 * missing and libjpeg replicates the edge one, so the edge pixels would
 * differ from a full decode. One chroma sample is two pixels.
 */
#define JROI_MARGIN 2

struct jroi_dec {
	struct jpeg_decompress_struct cinfo;
	struct jerr err;
	uint64_t max_pixels;
	/* one decoded row, grown to the widest seen and kept */
	unsigned char *row;
	size_t row_cap;
	/* the sub-JPEG of a region's segments, grown likewise */
	unsigned char *sub;
	size_t sub_cap;
	bool segments;	  /* try the segment path (jroi_set_segments) */
	struct pngd *png; /* for fields that hold a PNG (pngd.h) */
	struct jroi_counts counts;
};

int jroi_new(struct jroi_dec **out, uint64_t max_pixels)
{
	struct jroi_dec *dec = mem_calloc(1, sizeof(*dec));

	*out = NULL;
	if (!dec)
		return -ENOMEM;
	dec->cinfo.err = jerr_init(&dec->err);
	dec->max_pixels = max_pixels ? max_pixels : JROI_DEFAULT_MAX_PIXELS;
	dec->segments = true;
	/* jpeg_create_decompress() fails only by running out of memory. */
	if (setjmp(dec->err.jb)) {
		jpeg_destroy_decompress(&dec->cinfo);
		free(dec);
		return -ENOMEM;
	}
	jpeg_create_decompress(&dec->cinfo);
	jerr_limit_scans(&dec->cinfo, &dec->err);
	if (pngd_new(&dec->png)) {
		jroi_free(dec);
		return -ENOMEM;
	}
	*out = dec;
	return 0;
}

void jroi_free(struct jroi_dec *dec)
{
	if (!dec)
		return;
	jpeg_destroy_decompress(&dec->cinfo);
	pngd_free(dec->png);
	free(dec->row);
	free(dec->sub);
	free(dec);
}

void jroi_set_segments(struct jroi_dec *dec, bool on)
{
	dec->segments = on;
}

void jroi_get_counts(const struct jroi_dec *dec, struct jroi_counts *c)
{
	*c = dec->counts;
}

/*
 * After a longjmp from libjpeg: turn its message into a diag and return
 * the decoder to its idle state, keeping its permanent allocations.
 */
static int jroi_failed(struct jroi_dec *dec, const char *what, struct diag *d)
{
	int err = jerr_diag((j_common_ptr)&dec->cinfo, what, d);

	jpeg_abort_decompress(&dec->cinfo);
	return err;
}

static enum jroi_cs jroi_cs_of(J_COLOR_SPACE cs)
{
	switch (cs) {
	case JCS_GRAYSCALE: return JROI_CS_GRAY;
	case JCS_YCbCr: return JROI_CS_YCBCR;
	case JCS_RGB: return JROI_CS_RGB;
	case JCS_CMYK: return JROI_CS_CMYK;
	case JCS_YCCK: return JROI_CS_YCCK;
	default: return JROI_CS_OTHER;
	}
}

/* The decoder's pixel limit against an image of info: 0 or ETOOBIG. */
static int jroi_limit(const struct jroi_dec *dec, const struct jroi_info *info,
		      const char *what, struct diag *d)
{
	if ((uint64_t)info->width * info->height <= dec->max_pixels)
		return 0;
	return diag_set(d, LOADER_ETOOBIG,
			"%s of %ux%u pixels exceeds the limit of %llu pixels",
			what, info->width, info->height,
			(unsigned long long)dec->max_pixels);
}

/*
 * Point libjpeg at src and read the header. Runs under the caller's
 * setjmp; on return the decoder is in DSTATE_READY.
 */
static int jroi_read_header(struct jroi_dec *dec, const void *src, size_t len,
			    struct jroi_info *info, struct diag *d)
{
	struct jpeg_decompress_struct *ci = &dec->cinfo;

	memset(info, 0, sizeof(*info));
	if (!src || len == 0)
		return diag_set(d, LOADER_EDECODE, "empty jpeg (0 bytes)");
	if (len > (unsigned long)-1)
		return diag_set(d, LOADER_ETOOBIG, "JPEG payload of %zu bytes",
				len);
	jpeg_mem_src(ci, (const unsigned char *)src, (unsigned long)len);
	jerr_forget_tables(ci); /* the last file's are not this one's */
	/* require_image: a tables-only stream is an error, not a return */
	jpeg_read_header(ci, TRUE);
	info->width = ci->image_width;
	info->height = ci->image_height;
	info->components = (uint32_t)ci->num_components;
	info->cs = jroi_cs_of(ci->jpeg_color_space);
	info->channels = info->cs == JROI_CS_GRAY ? 1 : 3;
	info->progressive = ci->progressive_mode != 0;
	return jroi_limit(dec, info, "jpeg", d);
}

/* A PNG's header as a JPEG's would be told (pngd.h). */
static int jroi_png_header(const struct jroi_dec *dec, const void *src,
			   size_t len, struct jroi_info *info, struct diag *d)
{
	struct pngd_info pi;
	int err = pngd_header(src, len, &pi, d);

	memset(info, 0, sizeof(*info));
	if (err)
		return err;
	info->width = pi.width;
	info->height = pi.height;
	info->channels = pi.channels;
	info->components = pi.channels;
	info->cs = pi.channels == 1 ? JROI_CS_GRAY : JROI_CS_RGB;
	info->progressive = pi.interlaced;
	return jroi_limit(dec, info, "png", d);
}

int jroi_header(struct jroi_dec *dec, const void *src, size_t len,
		struct jroi_info *info, struct diag *d)
{
	int err;

	if (pngd_is(src, len))
		return jroi_png_header(dec, src, len, info, d);

	if (setjmp(dec->err.jb))
		return jroi_failed(dec, "header", d);
	err = jroi_read_header(dec, src, len, info, d);
	jpeg_abort_decompress(&dec->cinfo);
	return err;
}

static bool jroi_fits(const struct jroi_req *req, uint32_t num)
{
	return (uint64_t)req->w * num >= (uint64_t)req->min_w * JROI_DENOM &&
	       (uint64_t)req->h * num >= (uint64_t)req->min_h * JROI_DENOM;
}

uint32_t jroi_pick_scale(const struct jroi_req *req, uint32_t width,
			 uint32_t height)
{
	size_t n = sizeof(jroi_scales) / sizeof(jroi_scales[0]);

	if (!req->w || !req->h || (uint64_t)req->x + req->w > width ||
	    (uint64_t)req->y + req->h > height)
		return 0;
	if (req->scale_num)
		return req->scale_num <= 2 * JROI_DENOM ? req->scale_num : 0;
	for (size_t i = 0; i < n; i++) {
		if (jroi_fits(req, jroi_scales[i]))
			return jroi_scales[i];
	}
	return jroi_scales[n - 1];
}

/*
 * libjpeg-turbo's conversion of inverted (Adobe) CMYK to RGB, the one
 * its tools use: v * k / 255.0 + 0.5, truncated, in integers.
 */
static void jroi_cmyk_rgb(unsigned char *dst, const unsigned char *src,
			  uint32_t n)
{
	for (uint32_t i = 0; i < n; i++, src += 4, dst += 3) {
		unsigned k = src[3];

		dst[0] = (unsigned char)((2u * src[0] * k + 255u) / 510u);
		dst[1] = (unsigned char)((2u * src[1] * k + 255u) / 510u);
		dst[2] = (unsigned char)((2u * src[2] * k + 255u) / 510u);
	}
}

/* The whole scaled pixels that cover a request at scale num/8. */
static void jroi_cover(const struct jroi_req *req, uint32_t num, uint64_t *x0,
		       uint64_t *y0, uint64_t *x1, uint64_t *y1)
{
	*x0 = (uint64_t)req->x * num / JROI_DENOM;
	*y0 = (uint64_t)req->y * num / JROI_DENOM;
	*x1 = ((uint64_t)req->x + req->w) * num;
	*x1 = (*x1 + JROI_DENOM - 1) / JROI_DENOM;
	*y1 = ((uint64_t)req->y + req->h) * num;
	*y1 = (*y1 + JROI_DENOM - 1) / JROI_DENOM;
}

void jroi_region_size(const struct jroi_req *req, uint32_t num, uint64_t *w,
		      uint64_t *h)
{
	uint64_t x0, y0, x1, y1;

	jroi_cover(req, num, &x0, &y0, &x1, &y1);
	*w = x1 - x0;
	*h = y1 - y0;
}

/* The geometry of a request at scale num/8, in scaled pixels. */
static void jroi_geometry(const struct jroi_req *req, uint32_t num, uint32_t sw,
			  uint32_t sh, struct jroi_out *out)
{
	uint64_t x0, y0, x1, y1;

	jroi_cover(req, num, &x0, &y0, &x1, &y1);

	/* Both are within the scaled image already; keep it obvious. */
	if (x1 > sw)
		x1 = sw;
	if (y1 > sh)
		y1 = sh;
	out->scale_num = num;
	out->scaled_w = sw;
	out->scaled_h = sh;
	out->x0 = (uint32_t)x0;
	out->y0 = (uint32_t)y0;
	out->width = (uint32_t)(x1 - x0);
	out->height = (uint32_t)(y1 - y0);
	out->roi_x = (double)req->x * num / JROI_DENOM - (double)x0;
	out->roi_y = (double)req->y * num / JROI_DENOM - (double)y0;
	out->roi_w = (double)req->w * num / JROI_DENOM;
	out->roi_h = (double)req->h * num / JROI_DENOM;
}

/* Make the row buffer hold n bytes; it only grows. */
static int jroi_row_room(struct jroi_dec *dec, size_t n)
{
	unsigned char *p;

	if (n <= dec->row_cap)
		return 0;
	p = mem_realloc(dec->row, n);
	if (!p)
		return -ENOMEM;
	dec->row = p;
	dec->row_cap = n;
	return 0;
}

/*
 * The request for a decode: req, or (NULL) the whole image of info at
 * 8/8 in *whole; *num gets the scale the table picks (0: it does not
 * fit the image).
 */
static const struct jroi_req *jroi_request(const struct jroi_req *req,
					   const struct jroi_info *info,
					   struct jroi_req *whole,
					   uint32_t *num)
{
	if (!req) {
		*whole = (struct jroi_req){ .w = info->width,
					    .h = info->height,
					    .scale_num = JROI_DENOM };
		req = whole;
	}
	*num = jroi_pick_scale(req, info->width, info->height);
	return req;
}

/*
 * Whether out's rows fit cap bytes at *stride (0: packed rows, then set
 * to a row's bytes): 0, or LOADER_ETOOBIG naming what ("jpeg", "png").
 */
static int jroi_room(const struct jroi_out *out, const char *what,
		     size_t *stride, size_t cap, struct diag *d)
{
	size_t row_bytes = (size_t)out->width * out->channels;

	if (!*stride)
		*stride = row_bytes;
	if (*stride < row_bytes || cap < row_bytes ||
	    out->height - 1 > (cap - row_bytes) / *stride)
		return diag_set(
			d, LOADER_ETOOBIG,
			"%s region decodes to %ux%ux%u, room for %zu bytes at stride %zu",
			what, out->width, out->height, out->channels, cap,
			*stride);
	return 0;
}

/*
 * The body of jroi_decode(), under its setjmp. On success the decoder is
 * idle again; on an error return the caller aborts the decompression.
 */
static int jroi_run(struct jroi_dec *dec, const void *src, size_t len,
		    const struct jroi_req *req, unsigned char *dst,
		    size_t stride, size_t cap, struct jroi_out *out,
		    struct diag *d)
{
	struct jpeg_decompress_struct *ci = &dec->cinfo;
	struct jroi_req whole;
	struct jroi_info info;
	JDIMENSION xoff, cw, lead;
	uint32_t num, ch, cols;
	size_t row_bytes, in_row;
	bool direct;
	int err;

	err = jroi_read_header(dec, src, len, &info, d);
	if (err)
		return err;
	req = jroi_request(req, &info, &whole, &num);
	if (!num || !req->w || !req->h)
		return diag_set(
			d, LOADER_ERANGE,
			"jpeg region %ux%u+%u+%u at scale %u/8 does not fit a %ux%u image",
			req->w, req->h, req->x, req->y, req->scale_num,
			info.width, info.height);
	switch (info.cs) {
	case JROI_CS_GRAY: ci->out_color_space = JCS_GRAYSCALE; break;
	case JROI_CS_YCBCR:
	case JROI_CS_RGB: ci->out_color_space = JCS_RGB; break;
	case JROI_CS_CMYK:
	case JROI_CS_YCCK: ci->out_color_space = JCS_CMYK; break;
	default:
		return diag_set(
			d, LOADER_EDECODE,
			"jpeg colour space %d with %u components is not supported",
			(int)ci->jpeg_color_space, info.components);
	}
	ch = info.channels;
	ci->scale_num = num;
	ci->scale_denom = JROI_DENOM;
	jpeg_calc_output_dimensions(ci);
	jroi_geometry(req, num, ci->output_width, ci->output_height, out);
	out->channels = ch;
	row_bytes = (size_t)out->width * ch;
	err = jroi_room(out, "jpeg", &stride, cap, d);
	if (err)
		return err;

	/* Widen by the margin, then let libjpeg align to an iMCU column. */
	xoff = out->x0 > JROI_MARGIN ? out->x0 - JROI_MARGIN : 0;
	cw = out->x0 + out->width + JROI_MARGIN;
	if (cw > ci->output_width)
		cw = ci->output_width;
	cw -= xoff;

	jpeg_start_decompress(ci);
	err = jerr_check_tables(ci, d);
	if (err)
		return err;
	if (cw < ci->output_width)
		jpeg_crop_scanline(ci, &xoff, &cw);
	lead = out->x0 - xoff;
	cols = ci->output_width;
	in_row = (size_t)cols * (size_t)ci->output_components;
	/*
	 * When libjpeg's rows are exactly the rows asked for (whole width,
	 * no colour conversion of our own), it writes them straight into
	 * dst, as TurboJPEG does for a full decode: the same bytes without
	 * a copy. Otherwise rows go through the decoder's row buffer.
	 */
	direct = lead == 0 && cols == out->width &&
		 ci->out_color_space != JCS_CMYK;
	if (!direct) {
		err = jroi_row_room(dec, in_row * JROI_ROWS);
		if (err)
			return diag_set(d, err, "jpeg rows of %u pixels", cols);
	}
	if (out->y0 && jpeg_skip_scanlines(ci, out->y0) != out->y0)
		return diag_set(d, LOADER_EDECODE, "jpeg: cannot skip %u rows",
				out->y0);
	/*
	 * Several rows per call: one row at a time makes libjpeg's
	 * upsampler, which makes two rows at once for 4:2:0, keep the
	 * second in a spare buffer and copy it out on the next call.
	 */
	for (uint32_t r = 0; r < out->height;) {
		JSAMPROW rows[JROI_ROWS];
		JDIMENSION want = out->height - r, got;

		if (want > JROI_ROWS)
			want = JROI_ROWS;
		for (JDIMENSION k = 0; k < want; k++)
			rows[k] = direct ? dst + (size_t)(r + k) * stride :
					   dec->row + k * in_row;
		got = jpeg_read_scanlines(ci, rows, want);
		/* A memory source never suspends: 0 rows is an error. */
		if (got == 0)
			return diag_set(d, LOADER_EDECODE,
					"jpeg: row %u did not decode",
					out->y0 + r);
		if (direct) {
			r += got;
			continue;
		}
		for (JDIMENSION k = 0; k < got; k++, r++) {
			unsigned char *o = dst + (size_t)r * stride;

			if (ci->out_color_space == JCS_CMYK)
				jroi_cmyk_rgb(o, rows[k] + (size_t)lead * 4,
					      out->width);
			else
				memcpy(o, rows[k] + (size_t)lead * ch,
				       row_bytes);
		}
	}
	/*
	 * Having read every row, finish: that checks the data up to the end
	 * marker, as a full decode does. Otherwise stop here and skip the
	 * rest of the entropy-coded data, which is the point.
	 */
	if (ci->output_scanline == ci->output_height)
		jpeg_finish_decompress(ci);
	else
		jpeg_abort_decompress(ci);
	return 0;
}

/* Make the sub-JPEG buffer hold n bytes; it only grows. */
static int jroi_sub_room(struct jroi_dec *dec, size_t n)
{
	unsigned char *p;

	if (n <= dec->sub_cap)
		return 0;
	p = mem_realloc(dec->sub, n);
	if (!p)
		return -ENOMEM;
	dec->sub = p;
	dec->sub_cap = n;
	return 0;
}

/*
 * The segment path: cut the segments that cover the request, with a
 * margin, out of a restart-segmented JPEG (jrst.h), decode that file as
 * jroi_run() decodes any, and say where its pixels lie in the whole
 * image. Returns 0, or 1 when the file or the request does not allow it
 * or anything fails: the caller then decodes the original, whose
 * verdict stands (so the path changes no verdict, only the time to
 * reach it; damage outside the segments it reads goes unnoticed, as
 * damage below the last row read always did).
 */
static int jroi_segments(struct jroi_dec *dec, const void *src, size_t len,
			 const struct jroi_req *req, unsigned char *dst,
			 size_t stride, size_t cap, struct jroi_out *out)
{
	struct jrst_map m;
	struct jrst_rect r, c;
	struct jroi_req sq;
	size_t sub_len;
	uint32_t num;

	if (jrst_parse(src, len, &m, NULL) ||
	    (uint64_t)m.width * m.height > dec->max_pixels)
		return 1;
	num = jroi_pick_scale(req, m.width, m.height);
	if (!num)
		return 1;
	r = (struct jrst_rect){ req->x, req->y, req->w, req->h };
	jrst_cover_scaled(&m, &r, num, &c);
	if (c.w == m.width && c.h == m.height)
		return 1; /* the whole image: nothing to cut */
	if (jroi_sub_room(dec, jrst_build_bound(len)) ||
	    jrst_build(&m, src, len, &c, dec->sub, dec->sub_cap, &sub_len,
		       NULL))
		return 1;
	sq = *req;
	sq.x -= c.x;
	sq.y -= c.y;
	sq.scale_num = num;
	/* As in jroi_decode(): no local changes between here and a jump. */
	if (setjmp(dec->err.jb)) {
		jpeg_abort_decompress(&dec->cinfo);
		return 1;
	}
	if (jroi_run(dec, dec->sub, sub_len, &sq, dst, stride, cap, out,
		     NULL)) {
		jpeg_abort_decompress(&dec->cinfo);
		return 1;
	}
	/* Back to the whole image's scaled pixels (c is MCU-aligned). */
	out->x0 += c.x * num / JROI_DENOM;
	out->y0 += c.y * num / JROI_DENOM;
	out->scaled_w = (uint32_t)(((uint64_t)m.width * num + JROI_DENOM - 1) /
				   JROI_DENOM);
	out->scaled_h = (uint32_t)(((uint64_t)m.height * num + JROI_DENOM - 1) /
				   JROI_DENOM);
	return 0;
}

/*
 * A PNG: the region at the scale the table picks, made a power of two
 * no finer than it (box averages, pngd.h), so that it fits where the
 * picked one would.
 */
static int jroi_png(struct jroi_dec *dec, const void *src, size_t len,
		    const struct jroi_req *req, unsigned char *dst,
		    size_t stride, size_t cap, struct jroi_out *out,
		    struct diag *d)
{
	struct jroi_req whole;
	struct jroi_info info;
	uint32_t num, sw, sh;
	int err;

	err = jroi_png_header(dec, src, len, &info, d);
	if (err)
		return err;
	req = jroi_request(req, &info, &whole, &num);
	if (!num || num > JROI_DENOM)
		return diag_set(
			d, LOADER_ERANGE,
			"png region %ux%u+%u+%u at scale %u/8 does not fit a %ux%u image (a PNG decodes at 1/8 to 8/8)",
			req->w, req->h, req->x, req->y, req->scale_num,
			info.width, info.height);
	while (num & (num - 1))
		num &= num - 1;
	sw = (uint32_t)(((uint64_t)info.width * num + JROI_DENOM - 1) /
			JROI_DENOM);
	sh = (uint32_t)(((uint64_t)info.height * num + JROI_DENOM - 1) /
			JROI_DENOM);
	jroi_geometry(req, num, sw, sh, out);
	out->channels = info.channels;
	err = jroi_room(out, "png", &stride, cap, d);
	if (err)
		return err;
	dec->counts.whole++;
	return pngd_decode(dec->png, src, len, JROI_DENOM / num, out->x0,
			   out->y0, out->x0 + out->width, out->y0 + out->height,
			   dst, stride, d);
}

int jroi_decode(struct jroi_dec *dec, const void *src, size_t len,
		const struct jroi_req *req, void *dst, size_t dst_stride,
		size_t dst_cap, struct jroi_out *out, struct diag *d)
{
	int err;

	memset(out, 0, sizeof(*out));
	if (pngd_is(src, len))
		return jroi_png(dec, src, len, req, dst, dst_stride, dst_cap,
				out, d);
	if (req && dec->segments && src &&
	    jroi_segments(dec, src, len, req, dst, dst_stride, dst_cap, out) ==
		    0) {
		dec->counts.segments++;
		return 0;
	}
	memset(out, 0, sizeof(*out));
	dec->counts.whole++;
	/*
	 * Every libjpeg call made below runs under this setjmp, and jroi_run
	 * keeps its state in its own frame, which the longjmp discards: no
	 * local here changes between setjmp and a jump.
	 */
	if (setjmp(dec->err.jb))
		return jroi_failed(dec, "decode", d);
	err = jroi_run(dec, src, len, req, dst, dst_stride, dst_cap, out, d);
	if (err)
		jpeg_abort_decompress(&dec->cinfo);
	return err;
}
