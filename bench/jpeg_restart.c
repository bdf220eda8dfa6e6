/*
 * jpeg_restart - what restart segments cost and buy, on one thread, over
 * the same files: the lossless transcode pack applies (size, time), and
 * a RandomResizedCrop's decode three ways.
 *
 *   bench/jpeg_restart [-t SECONDS] [-i N,N,...] [-s SEED] DIR
 *
 * Every *.jpg / *.jpeg under DIR is read into memory (jpgset). For each
 * restart interval N (MCUs per segment; default 1,2,4,8), with and
 * without optimised Huffman tables, every file is transcoded (jrst.h)
 * and the transcode checked to be lossless: its full decode (TurboJPEG,
 * default flags) equals the original's, byte for byte. Then one crop per
 * file (torchvision's RandomResizedCrop(224) parameters, scale 0.08..1,
 * ratio 3/4..4/3, seeded by SEED and the file's index: the same crops
 * every run) is decoded, each way timed over the whole set until SECONDS
 * (default 2) have passed:
 *
 *   full     TurboJPEG full decode of the original, 8/8
 *   region   jroi on the original (skip + crop scanlines, DCT scale)
 *   segments jroi on the transcoded file: the crop's segments only
 *   cut      of that, finding and copying the segments alone
 *   walk     jrst_check over every segment of every file (what
 *            locating the markers by scanning costs at most)
 *
 * and the segment path's pixels are checked against the region path's
 * on the original, byte for byte. One line per configuration:
 *
 *   restart interval=N optimize=0|1 size_pct=... transcode_us=...
 *           full_us=... region_us=... segments_us=... cut_us=...
 *           walk_us=... speedup_vs_region=... exact=K/N
 *
 * (times are per image; size_pct is the transcoded set's size over the
 * original's, in per cent, minus 100).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "augment.h"
#include "clock.h"
#include "jpgset.h"
#include "jroi.h"
#include "jrst.h"
#include "rng.h"

#define OUT_SIZE      224
#define MAX_INTERVALS 8

struct item {
	const unsigned char *orig;
	size_t orig_len;
	unsigned char *rst; /* transcoded */
	size_t rst_len;
	struct jroi_req q;
};

static void usage(void)
{
	fprintf(stderr,
		"usage: jpeg_restart [-t SECONDS] [-i N,N,...] [-s SEED] DIR\n");
	exit(2);
}

/* TurboJPEG full decode into *buf (grown); returns the byte count or 0. */
static size_t full_decode(tjhandle tj, const unsigned char *src, size_t len,
			  unsigned char **buf, size_t *cap)
{
	int w, h, sub, cs;
	size_t need;

	if (tjDecompressHeader3(tj, src, (unsigned long)len, &w, &h, &sub, &cs))
		return 0;
	need = (size_t)w * h * 3;
	if (need > *cap) {
		free(*buf);
		*buf = malloc(need);
		*cap = *buf ? need : 0;
		if (!*buf)
			return 0;
	}
	if (tjDecompress2(tj, src, (unsigned long)len, *buf, w, 0, h, TJPF_RGB,
			  0))
		return 0;
	return need;
}

/* Seconds per pass of fn over the set, timed for at least secs. */
typedef int pass_fn(struct item *v, size_t n, void *arg);

static double timed(pass_fn *fn, struct item *v, size_t n, void *arg,
		    double secs)
{
	double t0 = clock_mono_s(), t;
	unsigned passes = 0;

	do {
		if (fn(v, n, arg))
			return -1;
		passes++;
		t = clock_mono_s() - t0;
	} while (t < secs);
	return t / passes;
}

struct ctx {
	tjhandle tj;
	struct jroi_dec *dec;
	unsigned char *buf;
	size_t cap;
	unsigned char *sub;
	size_t sub_cap;
};

static int pass_full(struct item *v, size_t n, void *arg)
{
	struct ctx *c = arg;

	for (size_t i = 0; i < n; i++) {
		if (!full_decode(c->tj, v[i].orig, v[i].orig_len, &c->buf,
				 &c->cap))
			return -1;
	}
	return 0;
}

static int pass_jroi(struct item *v, size_t n, void *arg, bool rst)
{
	struct ctx *c = arg;
	struct jroi_out o;

	for (size_t i = 0; i < n; i++) {
		if (jroi_decode(c->dec, rst ? v[i].rst : v[i].orig,
				rst ? v[i].rst_len : v[i].orig_len, &v[i].q,
				c->buf, 0, c->cap, &o, NULL))
			return -1;
	}
	return 0;
}

static int pass_region(struct item *v, size_t n, void *arg)
{
	return pass_jroi(v, n, arg, false);
}

static int pass_segments(struct item *v, size_t n, void *arg)
{
	return pass_jroi(v, n, arg, true);
}

/* What the segment path does before libjpeg sees a byte. */
static int pass_cut(struct item *v, size_t n, void *arg)
{
	struct ctx *c = arg;

	for (size_t i = 0; i < n; i++) {
		struct jrst_map m;
		struct jrst_rect r = { v[i].q.x, v[i].q.y, v[i].q.w, v[i].q.h },
				 cov;
		size_t len;

		if (jrst_parse(v[i].rst, v[i].rst_len, &m, NULL))
			return -1;
		jrst_cover(&m, &r, &cov);
		if (jrst_build(&m, v[i].rst, v[i].rst_len, &cov, c->sub,
			       c->sub_cap, &len, NULL))
			return -1;
	}
	return 0;
}

static int pass_walk(struct item *v, size_t n, void *arg)
{
	(void)arg;
	for (size_t i = 0; i < n; i++) {
		struct jrst_map m;

		if (jrst_parse(v[i].rst, v[i].rst_len, &m, NULL) ||
		    jrst_check(&m, v[i].rst, v[i].rst_len, NULL))
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct jpgset_file *files;
	uint32_t intervals[MAX_INTERVALS] = { 1, 2, 4, 8 };
	unsigned nint = 4;
	double secs = 2;
	uint64_t seed = 0;
	struct jpgset *set;
	struct item *v;
	struct ctx c = { 0 };
	struct jrst_enc *enc;
	unsigned char *ref = NULL, *got = NULL;
	size_t n, ref_cap = 0, got_cap = 0, max_len = 0;
	struct diag d;
	int opt;

	while ((opt = getopt(argc, argv, "t:i:s:")) != -1) {
		char *s, *tok;

		switch (opt) {
		case 't': secs = atof(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'i':
			nint = 0;
			s = optarg;
			while ((tok = strtok(s, ",")) && nint < MAX_INTERVALS) {
				intervals[nint++] = (uint32_t)atoi(tok);
				s = NULL;
			}
			break;
		default: usage();
		}
	}
	if (optind + 1 != argc || secs <= 0 || !nint)
		usage();
	if (jpgset_load(&set, argv[optind], &d)) {
		fprintf(stderr, "jpeg_restart: %s\n", d.msg);
		return 1;
	}
	files = jpgset_files(set, &n);
	if (!n) {
		fprintf(stderr, "jpeg_restart: no JPEGs under %s\n",
			argv[optind]);
		return 1;
	}
	v = calloc(n, sizeof(*v));
	c.tj = tjInitDecompress();
	if (!v || !c.tj || jroi_new(&c.dec, 0) || jrst_enc_new(&enc, 0))
		return 1;
	for (size_t i = 0; i < n; i++) {
		struct jroi_info info;
		struct augment_rect rect;
		struct rng r;

		v[i].orig = files[i].data;
		v[i].orig_len = files[i].len;
		max_len = files[i].len > max_len ? files[i].len : max_len;
		if (jroi_header(c.dec, files[i].data, files[i].len, &info,
				&d)) {
			fprintf(stderr, "jpeg_restart: %s: %s\n", files[i].path,
				d.msg);
			return 1;
		}
		rng_seed(&r, rng_mix(seed, i, 0));
		augment_rrc(&r, info.width, info.height, 0.08, 1.0, 3.0 / 4,
			    4.0 / 3, &rect);
		v[i].q = (struct jroi_req){ (uint32_t)rect.x,
					    (uint32_t)rect.y,
					    (uint32_t)rect.w,
					    (uint32_t)rect.h,
					    OUT_SIZE,
					    OUT_SIZE,
					    0 };
	}
	c.cap = 64u << 20;
	c.buf = malloc(c.cap);
	c.sub_cap = jrst_build_bound(4 * max_len);
	c.sub = malloc(c.sub_cap);
	if (!c.buf || !c.sub)
		return 1;

	for (unsigned k = 0; k < nint; k++) {
		for (int optimize = 0; optimize < 2; optimize++) {
			struct jrst_params p = { intervals[k], optimize };
			uint64_t in = 0, out = 0;
			size_t exact = 0;
			double t0, tx, full, region, segs, cut, walk;

			t0 = clock_mono_s();
			for (size_t i = 0; i < n; i++) {
				const unsigned char *o;
				size_t len;

				if (jrst_transcode(enc, v[i].orig,
						   v[i].orig_len, &p, &o, &len,
						   &d)) {
					fprintf(stderr,
						"jpeg_restart: %s: %s\n",
						files[i].path, d.msg);
					return 1;
				}
				free(v[i].rst);
				v[i].rst = malloc(len);
				if (!v[i].rst)
					return 1;
				memcpy(v[i].rst, o, len);
				v[i].rst_len = len;
				in += v[i].orig_len;
				out += len;
			}
			tx = (clock_mono_s() - t0) / n;
			/* Lossless: the same full decode, byte for byte. */
			for (size_t i = 0; i < n; i++) {
				size_t a = full_decode(c.tj, v[i].orig,
						       v[i].orig_len, &ref,
						       &ref_cap);
				size_t b = full_decode(c.tj, v[i].rst,
						       v[i].rst_len, &got,
						       &got_cap);

				if (!a || a != b || memcmp(ref, got, a)) {
					fprintf(stderr,
						"jpeg_restart: %s: transcode is not lossless\n",
						files[i].path);
					return 1;
				}
			}
			/* The segment path against the region path. */
			for (size_t i = 0; i < n; i++) {
				struct jroi_out oa, ob;

				jroi_set_segments(c.dec, false);
				if (jroi_decode(c.dec, v[i].orig, v[i].orig_len,
						&v[i].q, c.buf, 0, c.cap / 2,
						&oa, &d))
					return 1;
				jroi_set_segments(c.dec, true);
				if (jroi_decode(c.dec, v[i].rst, v[i].rst_len,
						&v[i].q, c.buf + c.cap / 2, 0,
						c.cap / 2, &ob, &d))
					return 1;
				exact += !memcmp(&oa, &ob, sizeof(oa)) &&
					 !memcmp(c.buf, c.buf + c.cap / 2,
						 (size_t)oa.width * oa.height *
							 oa.channels);
			}
			full = timed(pass_full, v, n, &c, secs);
			jroi_set_segments(c.dec, false);
			region = timed(pass_region, v, n, &c, secs);
			jroi_set_segments(c.dec, true);
			segs = timed(pass_segments, v, n, &c, secs);
			cut = timed(pass_cut, v, n, &c, secs);
			walk = timed(pass_walk, v, n, &c, secs);
			if (full < 0 || region < 0 || segs < 0 || cut < 0 ||
			    walk < 0) {
				fprintf(stderr,
					"jpeg_restart: a pass failed\n");
				return 1;
			}
			printf("restart interval=%u optimize=%d size_pct=%+.2f transcode_us=%.0f full_us=%.1f region_us=%.1f segments_us=%.1f cut_us=%.1f walk_us=%.1f speedup_vs_region=%.3f exact=%zu/%zu images=%zu\n",
			       p.interval, optimize,
			       100.0 * ((double)out / in - 1), tx * 1e6,
			       full / n * 1e6, region / n * 1e6, segs / n * 1e6,
			       cut / n * 1e6, walk / n * 1e6, region / segs,
			       exact, n, n);
			fflush(stdout);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].rst);
	free(v);
	free(ref);
	free(got);
	free(c.buf);
	free(c.sub);
	jrst_enc_free(enc);
	jroi_free(c.dec);
	tjDestroy(c.tj);
	jpgset_free(set);
	return 0;
}
