/*
 * test_jrst.c - restart segments (codecs/jrst.c): what the header parse
 * accepts and refuses, the cover of a region, sub-JPEGs that decode to
 * the region's pixels, the segment walk on damaged files, the lossless
 * transcode and what it leaves as it is; random damage to every byte
 * never makes parse, build or walk read out of bounds (run under ASan
 * by the sanitizer build).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */

#include <criterion/criterion.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include "diag.h"
#include "jrst.h"
#include "loader_error.h"
#include "../unit_util.h"
#include "../ut_jpeg.h"
#include "../ut_jrst.h"

/* A w x h test picture as a JPEG; malloc'd. */
static unsigned char *picture_jpeg(unsigned w, unsigned h, int pf, int subsamp,
				   bool prog, size_t *len)
{
	unsigned char *px = malloc((size_t)w * h * 4), *jpg;

	cr_assert_not_null(px);
	ut_picture(px, w, h, (unsigned)tjPixelSize[pf], w * 31 + h);
	jpg = ut_encode_tj(px, (int)w, (int)h, pf, subsamp, prog, len);
	free(px);
	return jpg;
}

/* TurboJPEG's full decode to RGB; malloc'd, w x h in *w, *h. */
static unsigned char *decode_rgb(const unsigned char *jpg, size_t len, int *w,
				 int *h)
{
	tjhandle tj = tjInitDecompress();
	int sub, cs;
	unsigned char *px;

	cr_assert_not_null(tj);
	cr_assert_eq(tjDecompressHeader3(tj, jpg, (unsigned long)len, w, h,
					 &sub, &cs),
		     0, "%s", tjGetErrorStr2(tj));
	px = malloc((size_t)*w * *h * 3);
	cr_assert_not_null(px);
	cr_assert_eq(tjDecompress2(tj, jpg, (unsigned long)len, px, *w, 0, *h,
				   TJPF_RGB, TJFLAG_STOPONWARNING),
		     0, "%s", tjGetErrorStr2(tj));
	tjDestroy(tj);
	return px;
}

Test(jrst, parse_geometry)
{
	static const struct {
		int pf, subsamp;
		uint32_t mcu_w, mcu_h;
	} t[] = {
		{ TJPF_RGB, TJSAMP_420, 16, 16 }, { TJPF_RGB, TJSAMP_422, 16, 8 },
		{ TJPF_RGB, TJSAMP_444, 8, 8 },	  { TJPF_RGB, TJSAMP_440, 8, 16 },
		{ TJPF_RGB, TJSAMP_411, 32, 8 },  { TJPF_GRAY, TJSAMP_GRAY, 8, 8 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		size_t len, rlen;
		unsigned char *jpg = picture_jpeg(203, 157, t[i].pf,
						  t[i].subsamp, false, &len);
		unsigned char *rst = ut_restart_copy(jpg, len, 1, true, &rlen);
		struct jrst_map m;
		struct diag d = { "" };

		cr_assert_eq(jrst_parse(rst, rlen, &m, &d), 0, "%s", d.msg);
		cr_expect_eq(m.width, 203);
		cr_expect_eq(m.height, 157);
		cr_expect_eq(m.mcu_w, t[i].mcu_w, "case %zu", i);
		cr_expect_eq(m.mcu_h, t[i].mcu_h, "case %zu", i);
		cr_expect_eq(m.mcus_per_row, (203 + m.mcu_w - 1) / m.mcu_w);
		cr_expect_eq(m.mcu_rows, (157 + m.mcu_h - 1) / m.mcu_h);
		cr_expect_eq(m.interval, 1);
		cr_expect_eq(m.seg_mcus, 1);
		cr_expect_eq(m.segments, (uint64_t)m.mcus_per_row * m.mcu_rows);
		cr_expect_eq(jrst_check(&m, rst, rlen, &d), 0, "%s", d.msg);
		/* the original has no markers */
		cr_expect_eq(jrst_parse(jpg, len, &m, &d), -ENOTSUP);
		cr_expect(strstr(d.msg, "without restart markers"), "%s", d.msg);
		free(jpg);
		free(rst);
	}
}

/* What the parse refuses, and why. */
Test(jrst, parse_refuses)
{
	size_t len, rlen;
	unsigned char *prog = picture_jpeg(64, 48, TJPF_RGB, TJSAMP_420, true,
					   &len);
	unsigned char *rst = ut_restart_copy(prog, len, 1, false, &rlen);
	struct jrst_map m;
	struct diag d = { "" };

	cr_expect_eq(jrst_parse(prog, len, &m, &d), -ENOTSUP);
	cr_expect(strstr(d.msg, "progressive"), "%s", d.msg);
	/* the transcode of a progressive file is baseline, with segments */
	cr_expect_eq(jrst_parse(rst, rlen, &m, &d), 0, "%s", d.msg);
	cr_expect_eq(jrst_parse("", 0, &m, &d), LOADER_EDECODE);
	cr_expect_eq(jrst_parse("\xff\xd8\xff", 3, &m, &d), LOADER_EDECODE);
	cr_expect_eq(jrst_parse("not a jpeg at all", 17, &m, &d),
		     LOADER_EDECODE);
	/* every cut of the header is damage, never a read past the end */
	for (size_t cut = 0; cut < m.entropy; cut++)
		cr_expect_eq(jrst_parse(rst, cut, &m, &d), LOADER_EDECODE,
			     "cut at %zu", cut);
	free(prog);
	free(rst);
}

/*
 * A sub-JPEG is a JPEG of its own: it decodes, without a warning, to the
 * rectangle jrst_cover() gave, and inside the margin its pixels are the
 * whole image's.
 */
Test(jrst, build_decodes_to_cover)
{
	size_t len, rlen, slen;
	unsigned char *jpg = picture_jpeg(203, 157, TJPF_RGB, TJSAMP_444, false,
					  &len);
	unsigned char *rst = ut_restart_copy(jpg, len, 2, true, &rlen);
	unsigned char *sub = malloc(jrst_build_bound(rlen));
	struct jrst_map m;
	struct diag d = { "" };
	int w, h, sw, sh;
	unsigned char *whole, *part;
	uint64_t seed = 5;

	cr_assert_not_null(sub);
	cr_assert_eq(jrst_parse(rst, rlen, &m, &d), 0, "%s", d.msg);
	cr_assert_eq(m.seg_mcus, 2, "two MCUs a segment, rows of 26: %u",
		     m.seg_mcus);
	whole = decode_rgb(rst, rlen, &w, &h);
	for (int k = 0; k < 50; k++) {
		struct jrst_rect r, c;

		r.w = 1 + (uint32_t)(ut_rand(&seed) % 203);
		r.h = 1 + (uint32_t)(ut_rand(&seed) % 157);
		r.x = (uint32_t)(ut_rand(&seed) % (203 - r.w + 1));
		r.y = (uint32_t)(ut_rand(&seed) % (157 - r.h + 1));
		jrst_cover(&m, &r, &c);
		cr_assert(c.x <= r.x && c.y <= r.y && c.x + c.w >= r.x + r.w &&
			  c.y + c.h >= r.y + r.h);
		cr_assert_eq(c.x % m.mcu_w, 0);
		cr_assert_eq(c.y % m.mcu_h, 0);
		cr_assert_eq(jrst_build(&m, rst, rlen, &c, sub,
					jrst_build_bound(rlen), &slen, &d),
			     0, "%s", d.msg);
		cr_assert_leq(slen, jrst_build_bound(rlen));
		part = decode_rgb(sub, slen, &sw, &sh);
		cr_assert_eq((uint32_t)sw, c.w);
		cr_assert_eq((uint32_t)sh, c.h);
		/* 4:4:4 has no chroma upsampling: every pixel is exact */
		for (int y = 0; y < sh; y++)
			cr_assert_eq(memcmp(part + (size_t)y * sw * 3,
					    whole + ((size_t)(c.y + y) * w + c.x) * 3,
					    (size_t)sw * 3),
				     0, "case %d row %d", k, y);
		free(part);
	}
	free(whole);
	free(sub);
	free(rst);
	free(jpg);
}

Test(jrst, build_refuses)
{
	size_t len, rlen, slen;
	unsigned char *jpg = picture_jpeg(64, 48, TJPF_RGB, TJSAMP_420, false,
					  &len);
	unsigned char *rst = ut_restart_copy(jpg, len, 1, true, &rlen);
	unsigned char *sub = malloc(jrst_build_bound(rlen));
	struct jrst_map m;
	struct diag d = { "" };
	struct jrst_rect bad[] = {
		{ 1, 0, 16, 16 },  /* not aligned */
		{ 0, 0, 17, 16 },  /* not a whole segment */
		{ 0, 0, 0, 16 },   /* empty */
		{ 48, 32, 32, 16 }, /* past the edge */
		{ 64, 0, 16, 16 },
	}, ok = { 16, 16, 32, 16 };

	cr_assert_eq(jrst_parse(rst, rlen, &m, &d), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(jrst_build(&m, rst, rlen, &bad[i], sub,
					jrst_build_bound(rlen), &slen, &d),
			     LOADER_ERANGE, "rect %zu", i);
	cr_expect_eq(jrst_build(&m, rst, rlen, &ok, sub, rlen, &slen, &d),
		     LOADER_ETOOBIG);
	cr_expect_eq(jrst_build(&m, rst, rlen, &ok, sub, jrst_build_bound(rlen),
				&slen, &d),
		     0, "%s", d.msg);
	free(sub);
	free(rst);
	free(jpg);
}

/* The walk names what is wrong: a marker misnumbered, missing, cut off. */
Test(jrst, check_damage)
{
	size_t len, rlen;
	unsigned char *jpg = picture_jpeg(64, 48, TJPF_RGB, TJSAMP_420, false,
					  &len);
	unsigned char *rst = ut_restart_copy(jpg, len, 1, true, &rlen);
	unsigned char *bad = malloc(rlen);
	struct jrst_map m;
	struct diag d = { "" };
	size_t at;

	cr_assert_eq(jrst_parse(rst, rlen, &m, &d), 0);
	cr_assert_eq(m.segments, 12);
	cr_expect_eq(jrst_check(&m, rst, rlen, &d), 0, "%s", d.msg);
	/* find the third marker */
	at = m.entropy;
	for (int k = 0; k < 3; at++) {
		if (rst[at] == 0xFF && rst[at + 1] >= 0xD0 && rst[at + 1] <= 0xD7)
			k++;
	}
	at--;
	memcpy(bad, rst, rlen);
	bad[at + 1] = 0xD5;
	cr_expect_eq(jrst_check(&m, bad, rlen, &d), LOADER_EDECODE);
	cr_expect(strstr(d.msg, "segment 2 of 12") && strstr(d.msg, "RST2"),
		  "%s", d.msg);
	bad[at + 1] = 0x00; /* no longer a marker */
	cr_expect_eq(jrst_check(&m, bad, rlen, &d), LOADER_EDECODE, "%s",
		     d.msg);
	cr_expect_eq(jrst_check(&m, rst, rlen - 2, &d), LOADER_EDECODE);
	cr_expect(strstr(d.msg, "past the end"), "%s", d.msg);
	cr_expect_eq(jrst_check(&m, rst, at, &d), LOADER_EDECODE);
	free(bad);
	free(rst);
	free(jpg);
}

/*
 * Lossless in every colour space and sampling, progressive input
 * included; the interval is rounded down to a divisor of the row.
 */
Test(jrst, transcode_lossless)
{
	static const struct {
		int pf, subsamp;
		bool prog;
	} t[] = {
		{ TJPF_RGB, TJSAMP_420, false }, { TJPF_RGB, TJSAMP_422, false },
		{ TJPF_RGB, TJSAMP_444, false }, { TJPF_RGB, TJSAMP_440, false },
		{ TJPF_RGB, TJSAMP_411, false }, { TJPF_GRAY, TJSAMP_GRAY, false },
		{ TJPF_RGB, TJSAMP_420, true },	 { TJPF_GRAY, TJSAMP_GRAY, true },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		for (uint32_t iv = 1; iv <= 8; iv *= 2) {
			size_t len, rlen;
			unsigned char *jpg = picture_jpeg(
				200, 120, t[i].pf, t[i].subsamp, t[i].prog,
				&len);
			unsigned char *rst = ut_restart_copy(jpg, len, iv, iv != 2,
						       &rlen);
			struct jrst_map m;
			int w, h, rw, rh;
			unsigned char *a = decode_rgb(jpg, len, &w, &h);
			unsigned char *b = decode_rgb(rst, rlen, &rw, &rh);

			cr_assert_eq(w, rw);
			cr_assert_eq(h, rh);
			cr_expect_eq(memcmp(a, b, (size_t)w * h * 3), 0,
				     "case %zu interval %u", i, iv);
			cr_assert_eq(jrst_parse(rst, rlen, &m, NULL), 0);
			cr_expect_eq(m.mcus_per_row % m.interval, 0);
			cr_expect_leq(m.interval, iv);
			free(a);
			free(b);
			free(rst);
			free(jpg);
		}
	}
}

/*
 * One transcoder, optimal tables then standard ones: libjpeg-turbo keeps
 * the first image's tables as "standard" unless the transcoder starts
 * afresh, which made the second file corrupt.
 */
Test(jrst, transcode_reuse)
{
	size_t len;
	unsigned char *jpg = picture_jpeg(160, 96, TJPF_RGB, TJSAMP_420, false,
					  &len);
	struct jrst_enc *e;
	int w, h, rw, rh;
	unsigned char *a = decode_rgb(jpg, len, &w, &h);

	cr_assert_eq(jrst_enc_new(&e, 0), 0);
	for (int k = 0; k < 6; k++) {
		struct jrst_params p = { 1 + (uint32_t)(k % 2), k % 3 == 0 };
		const unsigned char *o;
		size_t olen;
		struct diag d = { "" };
		unsigned char *b;

		cr_assert_eq(jrst_transcode(e, jpg, len, &p, &o, &olen, &d), 0,
			     "%s", d.msg);
		b = decode_rgb(o, olen, &rw, &rh);
		cr_expect_eq(memcmp(a, b, (size_t)w * h * 3), 0, "round %d", k);
		free(b);
	}
	jrst_enc_free(e);
	jrst_enc_free(NULL);
	free(a);
	free(jpg);
}

/* What is left as it is, and damaged input, with reasons. */
Test(jrst, transcode_refuses)
{
	size_t len;
	unsigned char *jpg = picture_jpeg(64, 64, TJPF_RGB, TJSAMP_420, false,
					  &len);
	struct jrst_params p = { 1, true }, zero = { 0, true };
	struct jrst_enc *e, *small;
	const unsigned char *o;
	size_t olen;
	struct diag d = { "" };
	unsigned char px[32 * 32 * 3], *arith;
	size_t alen;

	cr_assert_eq(jrst_enc_new(&e, 0), 0);
	cr_expect_eq(jrst_transcode(e, jpg, len, &zero, &o, &olen, &d),
		     LOADER_EUSAGE);
	for (size_t cut = 0; cut < len; cut += 1 + cut / 4)
		cr_expect_eq(jrst_transcode(e, jpg, cut, &p, &o, &olen, &d),
			     LOADER_EDECODE, "cut at %zu", cut);
	cr_expect_eq(jrst_transcode(e, jpg, len, &p, &o, &olen, &d), 0, "%s",
		     d.msg);

	/* a scan bomb is damaged data at pack time too */
	{
		static unsigned char big[128 * 128 * 3];
		size_t blen;
		unsigned char *bomb;

		ut_picture(big, 128, 128, 3, 2);
		bomb = ut_encode_scans(big, 128, 128, &blen);
		cr_expect_eq(jrst_transcode(e, bomb, blen, &p, &o, &olen, &d),
			     LOADER_EDECODE);
		cr_expect(strstr(d.msg, "more than 64 scans"), "%s", d.msg);
		free(bomb);
		cr_expect_eq(jrst_transcode(e, jpg, len, &p, &o, &olen, &d), 0,
			     "and the encoder works after: %s", d.msg);
	}
	/* arithmetic coding: stored as it is */
	ut_picture(px, 32, 32, 3, 1);
	arith = ut_encode_arith(px, 32, 32, &alen);
	cr_expect_eq(jrst_transcode(e, arith, alen, &p, &o, &olen, &d),
		     -ENOTSUP);
	cr_expect(strstr(d.msg, "arithmetic"), "%s", d.msg);
	{
		struct jrst_map m;

		cr_expect_eq(jrst_parse(arith, alen, &m, &d), -ENOTSUP);
	}
	free(arith);

	/* the pixel limit */
	cr_assert_eq(jrst_enc_new(&small, 64 * 63), 0);
	cr_expect_eq(jrst_transcode(small, jpg, len, &p, &o, &olen, &d),
		     LOADER_ETOOBIG);
	jrst_enc_free(small);
	jrst_enc_free(e);
	free(jpg);
}

/*
 * Random damage to a segmented file, header and data alike: parse,
 * cover, build and walk return 0 or an error and stay in bounds; what
 * the build writes never passes its bound.
 */
Test(jrst, random_damage)
{
	size_t len, rlen;
	unsigned char *jpg = picture_jpeg(96, 80, TJPF_RGB, TJSAMP_420, false,
					  &len);
	unsigned char *rst = ut_restart_copy(jpg, len, 1, true, &rlen);
	size_t cap = jrst_build_bound(rlen);
	unsigned char *bad = malloc(rlen), *sub = malloc(cap);
	uint64_t seed = 77;
	unsigned parsed = 0, built = 0;

	cr_assert(bad && sub);
	for (int k = 0; k < 20000; k++) {
		struct jrst_map m;
		size_t blen = rlen, slen;

		memcpy(bad, rst, rlen);
		for (int j = 0; j < 1 + k % 5; j++)
			bad[ut_rand(&seed) % rlen] =
				(unsigned char)ut_rand(&seed);
		if (k % 7 == 0)
			blen = ut_rand(&seed) % rlen;
		if (jrst_parse(bad, blen, &m, NULL))
			continue;
		parsed++;
		cr_assert(m.entropy <= blen);
		cr_assert(m.width && m.height && m.segments);
		(void)jrst_check(&m, bad, blen, NULL);
		for (int q = 0; q < 3; q++) {
			struct jrst_rect r, c;

			r.w = 1 + (uint32_t)(ut_rand(&seed) % m.width);
			r.h = 1 + (uint32_t)(ut_rand(&seed) % m.height);
			r.x = (uint32_t)(ut_rand(&seed) % (m.width - r.w + 1));
			r.y = (uint32_t)(ut_rand(&seed) % (m.height - r.h + 1));
			jrst_cover_scaled(&m, &r, 1 + (uint32_t)(q * 3), &c);
			if (!jrst_build(&m, bad, blen, &c, sub, cap, &slen,
					NULL)) {
				cr_assert_leq(slen, cap);
				built++;
			}
		}
	}
	cr_expect_gt(parsed, 100);
	cr_expect_gt(built, 100);
	free(bad);
	free(sub);
	free(rst);
	free(jpg);
}
