/*
 * jrst.c - restart-segmented JPEG: lossless transcode, segment walk and
 * sub-JPEG building (see jrst.h).
 *
 * Why scan for the markers rather than store where they are: a restart
 * marker is the two bytes 0xFF 0xD0..0xD7, and the entropy-coded data
 * holds no other 0xFF but stuffed ones (0xFF 0x00), so memchr() finds
 * the segments at memory speed. On the benchmark corpus (500x375 q90
 * photographs, one marker per MCU) walking every segment of a file
 * costs about 1 % of decoding the file, and a decoder walks only as far
 * as its region's last row. An index would save part of that at the
 * price of format and checks of its own; the markers are the index.
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

/* Marker codes (the byte after 0xFF). */
enum {
	M_SOF0 = 0xC0,
	M_SOF1 = 0xC1,
	M_SOF15 = 0xCF,
	M_DHT = 0xC4,
	M_JPG = 0xC8,
	M_DAC = 0xCC,
	M_RST0 = 0xD0,
	M_RST7 = 0xD7,
	M_SOI = 0xD8,
	M_EOI = 0xD9,
	M_SOS = 0xDA,
	M_DQT = 0xDB,
	M_DNL = 0xDC,
	M_DRI = 0xDD,
	M_APP0 = 0xE0,
	M_APP14 = 0xEE,
	M_APP15 = 0xEF,
	M_COM = 0xFE,
};

static uint32_t be16(const unsigned char *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t div_up(uint32_t a, uint32_t b)
{
	return (uint32_t)(((uint64_t)a + b - 1) / b);
}

static int keep(struct jrst_map *m, size_t off, size_t len, struct diag *d)
{
	if (m->ncopy == JRST_MAX_COPY)
		return diag_set(d, -ENOTSUP,
				"jpeg header of more than %u table segments",
				JRST_MAX_COPY);
	m->copy[m->ncopy].off = (uint32_t)off;
	m->copy[m->ncopy].len = (uint32_t)len;
	m->ncopy++;
	return 0;
}

/* The frame header: 8-bit samples, 1..4 components, their sampling. */
static int parse_sof(struct jrst_map *m, const unsigned char *p, uint32_t n,
		     uint32_t hv[4], struct diag *d)
{
	uint32_t nf, hmax = 1, vmax = 1, hmin = 4;

	if (n < 6)
		return diag_set(d, LOADER_EDECODE,
				"jpeg frame header of %u bytes", n);
	if (p[0] != 8)
		return diag_set(d, -ENOTSUP, "jpeg of %u-bit samples", p[0]);
	m->height = be16(p + 1);
	m->width = be16(p + 3);
	nf = p[5];
	if (!m->width || !m->height)
		return diag_set(
			d, -ENOTSUP,
			"jpeg of %ux%u pixels (height in a DNL marker?)",
			m->width, m->height);
	if (nf < 1 || nf > 4 || n != 6 + 3 * nf)
		return diag_set(d, LOADER_EDECODE,
				"jpeg frame header: %u components in %u bytes",
				nf, n);
	for (uint32_t i = 0; i < nf; i++) {
		uint32_t h = p[7 + 3 * i] >> 4, v = p[7 + 3 * i] & 15;

		if (h < 1 || h > 4 || v < 1 || v > 4)
			return diag_set(d, LOADER_EDECODE,
					"jpeg component %u sampled %ux%u", i, h,
					v);
		hv[i] = h << 4 | v;
		hmax = h > hmax ? h : hmax;
		hmin = h < hmin ? h : hmin;
		vmax = v > vmax ? v : vmax;
	}
	m->components = nf;
	m->h_max = nf == 1 ? 1 : hmax;
	m->h_min = nf == 1 ? 1 : hmin;
	/* A scan of one component has one block per MCU, whatever its factors. */
	m->mcu_w = nf == 1 ? 8 : 8 * hmax;
	m->mcu_h = nf == 1 ? 8 : 8 * vmax;
	m->mcus_per_row = div_up(m->width, m->mcu_w);
	m->mcu_rows = div_up(m->height, m->mcu_h);
	return 0;
}

/* The scan header: every component, in one sequential scan. */
static int parse_sos(const struct jrst_map *m, const unsigned char *p,
		     uint32_t n, struct diag *d)
{
	uint32_t ns;

	if (n < 1)
		return diag_set(d, LOADER_EDECODE,
				"jpeg scan header of 0 bytes");
	ns = p[0];
	if (n != 4 + 2 * ns)
		return diag_set(d, LOADER_EDECODE,
				"jpeg scan header: %u components in %u bytes",
				ns, n);
	if (ns != m->components)
		return diag_set(
			d, -ENOTSUP,
			"jpeg scan of %u of %u components (not interleaved)",
			ns, m->components);
	if (p[1 + 2 * ns] != 0 || p[2 + 2 * ns] != 63 || p[3 + 2 * ns] != 0)
		return diag_set(
			d, -ENOTSUP,
			"jpeg scan of coefficients %u..%u (not sequential)",
			p[1 + 2 * ns], p[2 + 2 * ns]);
	return 0;
}

/* How the segments tile the MCUs, or why they do not. */
static int layout(struct jrst_map *m, struct diag *d)
{
	uint64_t mcus = (uint64_t)m->mcus_per_row * m->mcu_rows;

	if (!m->interval)
		return diag_set(d, -ENOTSUP, "jpeg without restart markers");
	if (m->mcus_per_row % m->interval == 0) {
		m->seg_mcus = m->interval;
		m->band_rows = 1;
	} else if (m->interval % m->mcus_per_row == 0) {
		m->seg_mcus = 0;
		m->band_rows = m->interval / m->mcus_per_row;
	} else {
		return diag_set(
			d, -ENOTSUP,
			"jpeg restart interval of %u MCUs straddles rows of %u",
			m->interval, m->mcus_per_row);
	}
	m->segments = (mcus + m->interval - 1) / m->interval;
	return 0;
}

int jrst_parse(const void *src, size_t len, struct jrst_map *m, struct diag *d)
{
	const unsigned char *s = src;
	uint32_t hv[4];
	bool have_sof = false;
	size_t pos = 2;
	int err;

	memset(m, 0, sizeof(*m));
	if (len < 4 || s[0] != 0xFF || s[1] != M_SOI)
		return diag_set(d, LOADER_EDECODE,
				"not a jpeg (no SOI marker)");
	for (;;) {
		size_t at;
		uint32_t mk, n;

		/* A marker: 0xFF, any fill bytes 0xFF, then its code. */
		if (pos >= len || s[pos] != 0xFF)
			return diag_set(d, LOADER_EDECODE,
					"jpeg header: no marker at offset %zu",
					pos);
		while (pos < len && s[pos] == 0xFF)
			pos++;
		if (pos >= len)
			return diag_set(d, LOADER_EDECODE,
					"jpeg header cut short at offset %zu",
					pos);
		/* A copy starts at the last fill byte: 0xFF, code, length. */
		at = pos - 1;
		mk = s[pos++];
		if (mk == M_EOI || mk == M_SOI ||
		    (mk >= M_RST0 && mk <= M_RST7) || mk == 0x01 || mk == 0x00)
			return diag_set(
				d, LOADER_EDECODE,
				"jpeg header: marker 0x%02x at offset %zu", mk,
				at);
		if (len - pos < 2 || be16(s + pos) < 2 ||
		    be16(s + pos) > len - pos)
			return diag_set(
				d, LOADER_EDECODE,
				"jpeg marker 0x%02x at offset %zu: its length runs past the end",
				mk, at);
		n = be16(s + pos) - 2;
		pos += 2;
		switch (mk) {
		case M_SOF0:
		case M_SOF1:
			if (have_sof)
				return diag_set(d, LOADER_EDECODE,
						"jpeg with two frame headers");
			err = parse_sof(m, s + pos, n, hv, d);
			if (err)
				return err;
			have_sof = true;
			m->sof = at;
			err = keep(m, at, pos + n - at, d);
			break;
		case M_DHT:
		case M_DQT:
		case M_APP0:
		case M_APP14: err = keep(m, at, pos + n - at, d); break;
		case M_DRI:
			if (n != 2)
				return diag_set(d, LOADER_EDECODE,
						"jpeg DRI of %u bytes", n);
			m->interval = be16(s + pos);
			err = keep(m, at, pos + n - at, d);
			break;
		case M_SOS:
			if (!have_sof)
				return diag_set(d, LOADER_EDECODE,
						"jpeg scan before its frame");
			err = parse_sos(m, s + pos, n, d);
			if (!err)
				err = keep(m, at, pos + n - at, d);
			if (!err)
				err = layout(m, d);
			m->entropy = pos + n;
			return err;
		case M_DAC:
			return diag_set(d, -ENOTSUP, "arithmetic-coded jpeg");
		case M_DNL:
			return diag_set(d, -ENOTSUP, "jpeg with a DNL marker");
		case M_COM: err = 0; break;
		default:
			if (mk >= M_APP0 && mk <= M_APP15) {
				err = 0; /* dropped: no pixel depends on it */
				break;
			}
			if (mk >= M_SOF0 && mk <= M_SOF15 && mk != M_JPG)
				return diag_set(
					d, -ENOTSUP,
					"jpeg of frame type 0x%02x (progressive, lossless or arithmetic)",
					mk);
			return diag_set(d, -ENOTSUP,
					"jpeg marker 0x%02x at offset %zu", mk,
					at);
		}
		if (err)
			return err;
		pos += n;
	}
}

void jrst_cover(const struct jrst_map *m, const struct jrst_rect *r,
		struct jrst_rect *out)
{
	uint32_t r0 = r->y / m->mcu_h, r1 = div_up(r->y + r->h, m->mcu_h);
	uint32_t c0 = 0, c1 = m->mcus_per_row;
	uint64_t x1, y1;

	if (m->seg_mcus) {
		uint32_t g = m->seg_mcus * m->mcu_w;

		c0 = r->x / g * m->seg_mcus;
		c1 = div_up(r->x + r->w, g) * m->seg_mcus;
	} else {
		r0 = r0 / m->band_rows * m->band_rows;
		r1 = div_up(r1, m->band_rows) * m->band_rows;
	}
	x1 = (uint64_t)c1 * m->mcu_w;
	y1 = (uint64_t)r1 * m->mcu_h;
	out->x = c0 * m->mcu_w;
	out->y = r0 * m->mcu_h;
	out->w = (uint32_t)((x1 < m->width ? x1 : m->width) - out->x);
	out->h = (uint32_t)((y1 < m->height ? y1 : m->height) - out->y);
}

/*
 * Chroma samples in a row of an image w pixels wide at scale num/8, for
 * the most subsampled component (libjpeg's downsampled_width).
 */
static uint64_t chroma_w(const struct jrst_map *m, uint32_t w, uint32_t num)
{
	uint64_t sw = ((uint64_t)w * num + 7) / 8;

	return (sw * m->h_min + m->h_max - 1) / m->h_max;
}

void jrst_cover_scaled(const struct jrst_map *m, const struct jrst_rect *r,
		       uint32_t num, struct jrst_rect *out)
{
	uint32_t mg = (JRST_MARGIN * 8 + num - 1) / num;
	uint64_t x1 = (uint64_t)r->x + r->w + mg,
		 y1 = (uint64_t)r->y + r->h + mg;
	struct jrst_rect w;

	w.x = r->x > mg ? r->x - mg : 0;
	w.y = r->y > mg ? r->y - mg : 0;
	w.w = (uint32_t)((x1 < m->width ? x1 : m->width) - w.x);
	w.h = (uint32_t)((y1 < m->height ? y1 : m->height) - w.y);
	jrst_cover(m, &w, out);
	/*
	 * libjpeg-turbo upsamples 2x-subsampled chroma with the triangle
	 * filter only when a row holds more than two chroma samples, and
	 * decides so from the width of the file, not of a cropped region:
	 * a sub-image that narrow would be upsampled by replication.
	 */
	while (out->w < m->width && chroma_w(m, out->w, num) <= 2 &&
	       chroma_w(m, m->width, num) > 2) {
		if (out->x + out->w < m->width) {
			w.w = out->x + out->w + 1 - w.x;
		} else {
			w.w = w.x + w.w - (out->x - 1);
			w.x = out->x - 1;
		}
		jrst_cover(m, &w, out);
	}
}

/*
 * One step of the segment walk: from p, the next marker in the
 * entropy-coded data. Returns its first 0xFF (where the segment's data
 * ends), with its code in *mk and the byte after it in *next; NULL when
 * the data ends first.
 */
static const unsigned char *next_marker(const unsigned char *p,
					const unsigned char *end, unsigned *mk,
					const unsigned char **next)
{
	while (p < end) {
		const unsigned char *q,
			*ff = memchr(p, 0xFF, (size_t)(end - p));

		if (!ff)
			return NULL;
		q = ff + 1;
		while (q < end && *q == 0xFF)
			q++;
		if (q == end)
			return NULL;
		if (*q == 0x00) { /* a stuffed 0xFF data byte */
			p = q + 1;
			continue;
		}
		*mk = *q;
		*next = q + 1;
		return ff;
	}
	return NULL;
}

/* A segment walk: where it is, and what it found wrong. */
struct walk {
	const unsigned char *p, *end;
	uint64_t seg; /* index of the segment starting at p */
	const unsigned char *base;
};

/*
 * Find the end of segment w->seg, which starts at w->p: its data is
 * [w->p, *stop). Moves w past the marker that ends it.
 */
static int walk_one(const struct jrst_map *m, struct walk *w,
		    const unsigned char **stop, struct diag *d)
{
	const unsigned char *ff, *next;
	unsigned mk;
	bool last = w->seg + 1 == m->segments;

	ff = next_marker(w->p, w->end, &mk, &next);
	if (!ff)
		return diag_set(
			d, LOADER_EDECODE,
			"jpeg segment %llu of %llu runs past the end of the data",
			(unsigned long long)w->seg,
			(unsigned long long)m->segments);
	if (last ? mk != M_EOI : mk != M_RST0 + (unsigned)(w->seg & 7))
		return diag_set(
			d, LOADER_EDECODE,
			"jpeg segment %llu of %llu ends at offset %zu with marker 0x%02x, not %s%u",
			(unsigned long long)w->seg,
			(unsigned long long)m->segments, (size_t)(ff - w->base),
			mk, last ? "EOI" : "RST",
			last ? 0 : (unsigned)(w->seg & 7));
	*stop = ff;
	w->p = next;
	w->seg++;
	return 0;
}

/* The segments [first, first + n) cover rect c; n per row of them. */
static void segs_of(const struct jrst_map *m, const struct jrst_rect *c,
		    uint64_t *first, uint32_t *per_row, uint32_t *rows)
{
	uint32_t r0 = c->y / m->mcu_h, r1 = div_up(c->y + c->h, m->mcu_h);

	if (m->seg_mcus) {
		uint32_t g = m->seg_mcus * m->mcu_w;
		uint32_t gpr = m->mcus_per_row / m->seg_mcus;
		uint32_t g0 = c->x / g, g1 = div_up(c->x + c->w, g);

		*first = (uint64_t)r0 * gpr + g0;
		*per_row = g1 - g0;
		*rows = r1 - r0;
	} else {
		*first = r0 / m->band_rows;
		*per_row = 1;
		*rows = (uint32_t)(div_up(r1, m->band_rows) - *first);
	}
}

/* Whether c is a rectangle jrst_cover() gives. */
static bool cover_ok(const struct jrst_map *m, const struct jrst_rect *c)
{
	struct jrst_rect again;

	if (!c->w || !c->h || c->x >= m->width || c->y >= m->height ||
	    c->w > m->width - c->x || c->h > m->height - c->y)
		return false;
	jrst_cover(m, c, &again);
	return !memcmp(&again, c, sizeof(again));
}

int jrst_build(const struct jrst_map *m, const void *src, size_t len,
	       const struct jrst_rect *c, void *dst, size_t cap,
	       size_t *out_len, struct diag *d)
{
	const unsigned char *s = src;
	unsigned char *o = dst, *oend = o + cap;
	struct walk w = { .base = s };
	uint64_t first, want, skip;
	uint32_t per_row, rows, gpr, k = 0;
	int err;

	*out_len = 0;
	if (!cover_ok(m, c))
		return diag_set(d, LOADER_ERANGE,
				"jpeg segments cannot cut %ux%u+%u+%u", c->w,
				c->h, c->x, c->y);
	if (cap < jrst_build_bound(len))
		return diag_set(
			d, LOADER_ETOOBIG,
			"room for %zu bytes, a sub-jpeg of a %zu-byte file needs %zu",
			cap, len, jrst_build_bound(len));
	segs_of(m, c, &first, &per_row, &rows);
	gpr = m->seg_mcus ? m->mcus_per_row / m->seg_mcus : 1;

	*o++ = 0xFF;
	*o++ = M_SOI;
	for (uint32_t i = 0; i < m->ncopy; i++) {
		memcpy(o, s + m->copy[i].off, m->copy[i].len);
		if (m->copy[i].off == m->sof) {
			/* marker, length, precision, then height and width */
			o[5] = (unsigned char)(c->h >> 8);
			o[6] = (unsigned char)c->h;
			o[7] = (unsigned char)(c->w >> 8);
			o[8] = (unsigned char)c->w;
		}
		o += m->copy[i].len;
	}

	/*
	 * Walk from the first segment, copying those inside c: per_row in
	 * each of rows segment rows, the rest of each row skipped.
	 */
	w.p = s + m->entropy;
	w.end = s + len;
	want = (uint64_t)per_row * rows;
	skip = first;
	for (uint64_t got = 0; got < want;) {
		const unsigned char *start = w.p, *stop;

		err = walk_one(m, &w, &stop, d);
		if (err)
			return err;
		if (skip) {
			skip--;
			continue;
		}
		/* never past the bound: the source held these bytes too */
		if ((size_t)(stop - start) + 4 > (size_t)(oend - o))
			return diag_set(d, LOADER_ETOOBIG, "sub-jpeg overflow");
		memcpy(o, start, (size_t)(stop - start));
		o += stop - start;
		got++;
		if (got < want) {
			*o++ = 0xFF;
			*o++ = (unsigned char)(M_RST0 + (k++ & 7));
		}
		if (got % per_row == 0)
			skip = gpr - per_row;
	}
	*o++ = 0xFF;
	*o++ = M_EOI;
	*out_len = (size_t)(o - (unsigned char *)dst);
	return 0;
}

int jrst_check(const struct jrst_map *m, const void *src, size_t len,
	       struct diag *d)
{
	const unsigned char *s = src;
	struct walk w = { .base = s, .p = s + m->entropy, .end = s + len };

	while (w.seg < m->segments) {
		const unsigned char *stop;
		int err = walk_one(m, &w, &stop, d);

		if (err)
			return err;
	}
	return 0;
}

/* --- the transcoder ------------------------------------------------------ */

/*
 * Both objects report through one error manager and jump to one place:
 * only one of them runs at a time, on one thread.
 */
struct jrst_enc {
	struct jpeg_decompress_struct din;
	struct jpeg_compress_struct cout;
	struct jerr err;
	uint64_t max_pixels;
	unsigned char *buf; /* the output buffer, kept between calls */
	size_t cap, len;
	bool optimized; /* cout holds the last image's optimal tables */
};

int jrst_enc_new(struct jrst_enc **out, uint64_t max_pixels)
{
	struct jrst_enc *e = mem_calloc(1, sizeof(*e));

	*out = NULL;
	if (!e)
		return -ENOMEM;
	e->max_pixels = max_pixels ? max_pixels : JROI_DEFAULT_MAX_PIXELS;
	e->din.err = jerr_init(&e->err);
	e->cout.err = &e->err.pub;
	/* Creating either fails only by running out of memory. */
	if (setjmp(e->err.jb)) {
		jpeg_destroy_compress(&e->cout);
		jpeg_destroy_decompress(&e->din);
		free(e);
		return -ENOMEM;
	}
	jpeg_create_decompress(&e->din);
	jerr_limit_scans(&e->din, &e->err);
	jpeg_create_compress(&e->cout);
	*out = e;
	return 0;
}

void jrst_enc_free(struct jrst_enc *e)
{
	if (!e)
		return;
	jpeg_destroy_compress(&e->cout);
	jpeg_destroy_decompress(&e->din);
	free(e->buf);
	free(e);
}

/* The largest divisor of n that is at most want. */
static uint32_t divisor_upto(uint32_t n, uint32_t want)
{
	for (uint32_t k = want; k > 1; k--) {
		if (n % k == 0)
			return k;
	}
	return 1;
}

/*
 * Room for the output: the same coefficients in baseline Huffman with
 * a marker and at most a byte of padding per segment come to well under
 * twice the input (standard tables cost a few per cent over optimal
 * ones), so libjpeg normally writes into this buffer and never grows a
 * buffer of its own, which it would leak if a later step failed.
 */
static int out_room(struct jrst_enc *e, size_t len)
{
	size_t want = 2 * len + 65536;
	unsigned char *p;

	if (want <= e->cap)
		return 0;
	p = mem_alloc(want);
	if (!p)
		return -ENOMEM;
	free(e->buf);
	e->buf = p;
	e->cap = want;
	return 0;
}

/*
 * Are all of the image's coefficients codable as baseline 8-bit? A
 * damaged or hostile Huffman table can decode to AC values of up to 15
 * bits, which libjpeg reads without complaint but whose baseline
 * encoding (10 bits at most) libjpeg-turbo does not check: it would
 * write other pixels. DC values stay within what 8-bit samples give
 * (-1024..1023), so that every difference fits 11 bits.
 */
static bool coefs_in_range(struct jpeg_decompress_struct *di,
			   jvirt_barray_ptr *coefs)
{
	for (int ci = 0; ci < di->num_components; ci++) {
		const jpeg_component_info *c = &di->comp_info[ci];

		for (JDIMENSION row = 0; row < c->height_in_blocks; row++) {
			JBLOCKARRAY b = (*di->mem->access_virt_barray)(
				(j_common_ptr)di, coefs[ci], row, 1, FALSE);
			const JCOEF *q = b[0][0];
			int bad = 0;

			for (JDIMENSION k = 0; k < c->width_in_blocks;
			     k++, q += DCTSIZE2) {
				bad |= q[0] < -1024 || q[0] > 1023;
				for (int i = 1; i < DCTSIZE2; i++)
					bad |= q[i] < -1023 || q[i] > 1023;
			}
			if (bad)
				return false;
		}
	}
	return true;
}

/*
 * Did a progressive file send every bit of every coefficient? One that
 * stops early is valid, and libjpeg decodes it with its missing AC
 * coefficients guessed from the neighbours (block smoothing); the same
 * coefficients written as baseline decode without the guess, to other
 * pixels. Such a file is stored as it is.
 */
static bool coefs_complete(const struct jpeg_decompress_struct *di)
{
	if (!di->progressive_mode)
		return true;
	for (int ci = 0; ci < di->num_components; ci++)
		for (int k = 0; k < DCTSIZE2; k++)
			if (di->coef_bits[ci][k] != 0)
				return false;
	return true;
}

/* The body of jrst_transcode(), under its setjmp. */
static int transcode(struct jrst_enc *e, const void *src, size_t len,
		     const struct jrst_params *p, struct diag *d)
{
	struct jpeg_decompress_struct *di = &e->din;
	struct jpeg_compress_struct *co = &e->cout;
	jvirt_barray_ptr *coefs;
	unsigned long size = (unsigned long)e->cap;
	unsigned char *buf = e->buf;
	uint32_t mcu_w, mpr;

	/*
	 * jpeg_set_defaults() installs the standard Huffman tables only
	 * where none is allocated (libjpeg-turbo shares that code with the
	 * decoder, which must not overwrite): after an image with optimal
	 * tables, the next image without would be coded with those and come
	 * out corrupt. A fresh object has none.
	 */
	if (e->optimized && !p->optimize) {
		jpeg_destroy_compress(co);
		co->err = &e->err.pub;
		jpeg_create_compress(co);
		e->optimized = false;
	}
	jpeg_mem_src(di, src, (unsigned long)len);
	jerr_forget_tables(di); /* the last file's are not this one's */
	jpeg_read_header(di, TRUE);
	if (di->arith_code)
		return diag_set(d, -ENOTSUP, "arithmetic-coded jpeg");
	if ((uint64_t)di->image_width * di->image_height > e->max_pixels)
		return diag_set(
			d, LOADER_ETOOBIG,
			"jpeg of %ux%u pixels exceeds the limit of %llu pixels",
			di->image_width, di->image_height,
			(unsigned long long)e->max_pixels);
	coefs = jpeg_read_coefficients(di);
	if (jerr_check_tables(di, d))
		return LOADER_EDECODE;
	if (!coefs_complete(di))
		return diag_set(
			d, -ENOTSUP,
			"progressive jpeg without every coefficient bit");
	if (!coefs_in_range(di, coefs))
		return diag_set(d, -ENOTSUP,
				"jpeg coefficients out of the baseline range");
	jpeg_copy_critical_parameters(di, co);
	/* No segment may straddle two rows: take a divisor of a row. */
	mcu_w = di->num_components == 1 ? 8 :
					  8u * (uint32_t)di->max_h_samp_factor;
	mpr = (uint32_t)((di->image_width + mcu_w - 1) / mcu_w);
	co->restart_interval = divisor_upto(mpr, p->interval);
	co->restart_in_rows = 0;
	co->optimize_coding = p->optimize ? TRUE : FALSE;
	e->optimized |= p->optimize;
	jpeg_mem_dest(co, &buf, &size);
	jpeg_write_coefficients(co, coefs);
	jpeg_finish_compress(co);
	/* Reads to the end marker: damage after the last block shows too. */
	jpeg_finish_decompress(di);
	/*
	 * Had libjpeg outgrown our buffer, the output is in one it made
	 * (malloc'd, ours now): keep that one instead. Its size is at least
	 * the output's, which is all we know of it.
	 */
	if (buf != e->buf) {
		free(e->buf);
		e->buf = buf;
		e->cap = size;
	}
	e->len = size;
	return 0;
}

int jrst_transcode(struct jrst_enc *e, const void *src, size_t len,
		   const struct jrst_params *p, const unsigned char **out,
		   size_t *out_len, struct diag *d)
{
	int err;

	*out = NULL;
	*out_len = 0;
	if (!p->interval || p->interval > JRST_INTERVAL_MAX)
		return diag_set(d, LOADER_EUSAGE,
				"jpeg transcode: restart interval %u (1..%u)",
				p->interval, JRST_INTERVAL_MAX);
	if (!src || len < 4)
		return diag_set(d, LOADER_EDECODE, "empty jpeg (%zu bytes)",
				len);
	if (len > (unsigned long)-1 / 4)
		return diag_set(d, LOADER_ETOOBIG, "JPEG payload of %zu bytes",
				len);
	if (out_room(e, len))
		return diag_set(d, -ENOMEM, "no memory for a %zu-byte jpeg",
				len);
	/*
	 * Every libjpeg call below runs under this setjmp; transcode()
	 * keeps its state in its own frame, which the longjmp discards.
	 */
	if (setjmp(e->err.jb)) {
		err = jerr_diag((j_common_ptr)&e->din, "transcode", d);
		jpeg_abort_compress(&e->cout);
		jpeg_abort_decompress(&e->din);
		return err;
	}
	err = transcode(e, src, len, p, d);
	if (err) {
		jpeg_abort_compress(&e->cout);
		jpeg_abort_decompress(&e->din);
		return err;
	}
	*out = e->buf;
	*out_len = e->len;
	return 0;
}
