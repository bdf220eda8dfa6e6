/*
 * jrst.h - restart-segmented JPEG: the lossless transcode that pack
 * applies (baseline Huffman, a restart marker every few MCUs), and the
 * sub-JPEG of the segments that cover a region, which jroi decodes
 * instead of the whole image.
 *
 * A restart marker resets the entropy decoder's DC predictors, so the
 * entropy-coded data between two markers (a segment) decodes on its own.
 * When every segment holds whole MCUs of one MCU row, the segments of a
 * rectangle of MCUs, copied after the original's tables with the frame
 * header resized and the markers renumbered, form a JPEG file whose
 * pixels are those of that rectangle of the original, bit for bit: the
 * DCT coefficients are the same, and the inverse DCT works block by
 * block. What reaches beyond a block is chroma upsampling, which reads
 * the neighbouring chroma sample; the caller asks for a rectangle with a
 * margin around what it needs (jroi does), and the pixels at the margin's
 * inner edge are then exact.
 *
 * No index is stored: the markers are found by scanning the entropy-coded
 * data, which costs a few per cent of decoding it (see jrst.c), and the
 * file stays a plain JPEG that any decoder reads. Nothing here trusts the
 * data: every length is checked against the buffer, every marker's
 * number against its place, and anything unexpected is reported (the
 * caller then decodes the whole file the usual way, whose verdict
 * stands).
 */
#ifndef LD_JRST_H
#define LD_JRST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* Header segments (tables, frame, scan) a map can copy into a sub-JPEG. */
#define JRST_MAX_COPY 48

/* Largest restart interval pack writes (MCUs per segment). */
#define JRST_INTERVAL_MAX 64

/*
 * Where a JPEG's segments are, as far as its header tells: filled by
 * jrst_parse(), used by jrst_build() and jrst_check(). Offsets are into
 * the buffer that was parsed.
 */
struct jrst_map {
	uint32_t width, height; /* pixels */
	uint32_t components;	/* 1..4 */
	uint32_t mcu_w, mcu_h;	/* pixels per MCU */
	uint32_t h_max, h_min;	/* horizontal sampling factors (1 if gray) */
	uint32_t mcus_per_row, mcu_rows;
	uint32_t interval; /* MCUs per segment (the DRI value) */
	/*
	 * Segment layout: with seg_mcus != 0, each segment is seg_mcus MCUs
	 * of one MCU row (seg_mcus divides mcus_per_row); otherwise each is
	 * band_rows whole MCU rows.
	 */
	uint32_t seg_mcus, band_rows;
	uint64_t segments; /* in the whole image */
	size_t sof;	   /* offset of the frame header's marker */
	size_t entropy;	   /* offset of the first entropy-coded byte */
	uint32_t ncopy;	   /* header segments to copy, in file order */
	struct {
		uint32_t off, len; /* from the marker's 0xFF, marker included */
	} copy[JRST_MAX_COPY];
};

/* A rectangle of pixels, in the image's own coordinates. */
struct jrst_rect {
	uint32_t x, y, w, h;
};

/*
 * Read the JPEG header in src[0..len) into m. Returns 0 when the file can
 * be cut into segments: baseline or extended sequential Huffman, 8-bit,
 * one interleaved scan of every component, a restart interval that holds
 * whole MCUs of one row or whole rows. Returns -ENOTSUP for a valid JPEG
 * that cannot (no restart markers, progressive, arithmetic coding, more
 * than one scan, an interval that straddles rows) and LOADER_EDECODE for
 * a damaged header; d, if not NULL, gets the reason either way.
 */
int jrst_parse(const void *src, size_t len, struct jrst_map *m, struct diag *d);

/*
 * The smallest rectangle the segments can give that covers r (which must
 * lie inside the image): whole segments horizontally, whole MCU rows
 * vertically, clipped to the image. Its x and y are multiples of the MCU
 * size.
 */
void jrst_cover(const struct jrst_map *m, const struct jrst_rect *r,
		struct jrst_rect *out);

/*
 * The rectangle whose sub-JPEG decodes r (inside the image) at scale
 * num/8 (1..16) to exactly the pixels the whole file gives there: r
 * widened by JRST_MARGIN scaled pixels each side (chroma upsampling reads
 * the neighbouring sample, and a sub-image replicates its own edges),
 * then by whole segments while the sub-image would hold too few chroma
 * samples a row for libjpeg-turbo to upsample them as it does the whole
 * image's, then covered as by jrst_cover().
 */
#define JRST_MARGIN 2
void jrst_cover_scaled(const struct jrst_map *m, const struct jrst_rect *r,
		       uint32_t num, struct jrst_rect *out);

/* Bytes jrst_build() may write for a file of len bytes. */
static inline size_t jrst_build_bound(size_t len)
{
	return len + 8;
}

/*
 * Write into dst (cap bytes) the JPEG of the rectangle c of the image in
 * src[0..len), which m describes and c comes from jrst_cover(): its SOI,
 * the header segments with the frame resized, the segments covering c
 * with their markers renumbered, and an EOI; *out_len gets its length.
 * Returns 0; LOADER_ERANGE for a c not from jrst_cover(); LOADER_ETOOBIG
 * when cap is too small; LOADER_EDECODE when the entropy-coded data does
 * not hold the segments where the header says (a marker missing, out of
 * place or misnumbered, the data cut short), with the reason in d.
 */
int jrst_build(const struct jrst_map *m, const void *src, size_t len,
	       const struct jrst_rect *c, void *dst, size_t cap,
	       size_t *out_len, struct diag *d);

/*
 * Walk every segment of the file in src[0..len), which m describes:
 * each marker numbered after its place, as many segments as the image
 * has MCUs for, then the end of the image. Returns 0 or LOADER_EDECODE
 * with the segment and the problem in d. (What verify checks; a decoder
 * only ever walks as far as its region needs.)
 */
int jrst_check(const struct jrst_map *m, const void *src, size_t len,
	       struct diag *d);

/* What jrst_transcode() is asked to write. */
struct jrst_params {
	uint32_t interval; /* MCUs per segment, 1..JRST_INTERVAL_MAX */
	bool optimize;	   /* optimal Huffman tables for each image */
};

struct jrst_enc;

/*
 * Make a transcoder. Images of more than max_pixels pixels (0: jroi's
 * default limit) are refused. Returns 0 or -ENOMEM; free with
 * jrst_enc_free().
 */
int jrst_enc_new(struct jrst_enc **out, uint64_t max_pixels);

/* Free a transcoder. NULL is a no-op. */
void jrst_enc_free(struct jrst_enc *e);

/*
 * Transcode the JPEG in src[0..len) without loss: the same DCT
 * coefficients, quantization tables, sampling and colour space, written
 * as baseline Huffman with a restart marker every p->interval MCUs
 * (rounded down to a divisor of the MCUs in a row, so that no segment
 * straddles two rows). Markers other than JFIF and Adobe (which say how
 * the colours are stored) are dropped: they do not change the pixels.
 * On 0, *out and *out_len give the new file, valid until the next call
 * or jrst_enc_free(). Returns -ENOTSUP for a file to store as it is
 * (arithmetic-coded, not 8-bit, lossless, not decodable by libjpeg-turbo
 * at all), LOADER_EDECODE for damaged data (libjpeg's warnings count),
 * LOADER_ETOOBIG above the pixel limit, -ENOMEM; the reason goes to d.
 */
int jrst_transcode(struct jrst_enc *e, const void *src, size_t len,
		   const struct jrst_params *p, const unsigned char **out,
		   size_t *out_len, struct diag *d);

#endif /* LD_JRST_H */
