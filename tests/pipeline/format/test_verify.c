/*
 * test_verify.c - verify judges a JPEG as a stream does: a shard of good
 * JPEGs (gray, RGB 4:2:0 and 4:4:4, CMYK, YCCK, progressive) and damaged
 * ones goes through verify_shard() and, record by record, through the
 * image pipeline (imgpipe_run(), a stream's per-sample work) with a
 * center crop of the whole image, so that both read every row. Each
 * record is bad for both or for neither, with the same code and reason,
 * under the default pixel limit and under a smaller one; and a good
 * record's pixels from the codec table (what verify decodes) are the
 * stream's, gray repeated into R, G and B.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h> /* jpeglib.h needs FILE and size_t first */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include "codec.h"
#include "diag.h"
#include "imgpipe.h"
#include "ispec.h"
#include "loader_error.h"
#include "schema.h"
#include "shard.h"
#include "verify.h"
#include "../../unit_util.h"
#include "../../ut_jpeg.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Square images, cropped to their own size: the whole image is read. */
#define SIDE 48
#define SPEC "decode | center 48 | u8 | nhwc"

#define SHARD_NAME "verify.shard"

/* A good JPEG: TurboJPEG's, or CMYK stored as is through libjpeg. */
struct good {
	const char *name;
	int pf, subsamp;
	bool progressive, plain_cmyk;
};

static const struct good goods[] = {
	{ "gray", TJPF_GRAY, TJSAMP_GRAY, false, false },
	{ "rgb420", TJPF_RGB, TJSAMP_420, false, false },
	{ "rgb444", TJPF_RGB, TJSAMP_444, false, false },
	{ "cmyk", TJPF_CMYK, 0, false, true },
	{ "ycck420", TJPF_CMYK, TJSAMP_420, false, false },
	{ "prog_gray", TJPF_GRAY, TJSAMP_GRAY, true, false },
	{ "prog_rgb420", TJPF_RGB, TJSAMP_420, true, false },
	{ "prog_cmyk", TJPF_CMYK, 0, true, true },
	{ "prog_ycck420", TJPF_CMYK, TJSAMP_420, true, false },
};

/* One record's payload. */
struct payload {
	const char *name;
	unsigned char *data;
	size_t len;
};

/* A good JPEG, malloc'd. */
static unsigned char *encode(const struct good *g, unsigned seed, size_t *len)
{
	uint32_t ch = (uint32_t)tjPixelSize[g->pf];
	unsigned char *px = malloc((size_t)SIDE * SIDE * ch), *jpg;

	cr_assert_not_null(px);
	ut_picture(px, SIDE, SIDE, ch, seed);
	if (g->plain_cmyk)
		jpg = ut_encode_cmyk(px, SIDE, SIDE, g->progressive, len);
	else
		jpg = ut_encode_tj(px, SIDE, SIDE, g->pf, g->subsamp,
				   g->progressive, len);
	free(px);
	return jpg;
}

/* A copy of the first n bytes of src, with room to spare. */
static unsigned char *cut(const unsigned char *src, size_t n)
{
	unsigned char *p = malloc(n + 16);

	cr_assert_not_null(p);
	memcpy(p, src, n);
	return p;
}

/*
 * The records: every good kind, then damaged JPEGs made from the good
 * ones: what a stream refuses for each is in its own messages.
 */
static size_t make_payloads(struct payload *p, size_t cap)
{
	size_t n = 0, len;
	unsigned char *rgb, *prog;
	static const char text[] = "GIF89a, not a JPEG";

	for (size_t i = 0; i < NELEM(goods); i++) {
		cr_assert_lt(n, cap);
		p[n].name = goods[i].name;
		p[n].data = encode(&goods[i], (unsigned)i + 1, &p[n].len);
		n++;
	}
	rgb = encode(&goods[1], 100, &len);
	cr_assert_lt(n + 5, cap);
	p[n++] = (struct payload){ "empty", cut(rgb, 0), 0 };
	p[n++] = (struct payload){ "not a JPEG",
				   cut((const void *)text, sizeof(text)),
				   sizeof(text) };
	p[n++] = (struct payload){ "SOI only", cut(rgb, 2), 2 };
	p[n++] = (struct payload){ "cut at half", cut(rgb, len / 2), len / 2 };
	p[n++] = (struct payload){ "no EOI", cut(rgb, len - 2), len - 2 };
	free(rgb);
	prog = encode(&goods[7], 101, &len);
	cr_assert_lt(n + 1, cap);
	p[n++] = (struct payload){ "progressive CMYK cut at 3/4",
				   cut(prog, len * 3 / 4), len * 3 / 4 };
	free(prog);
	return n;
}

static int tmp_fd = -1;

/* Write the payloads as a shard of one jpeg field; returns it open. */
static struct shard *write_shard(const struct payload *p, size_t n)
{
	char path[PATH_MAX];
	struct schema s = { 0 };
	struct shard_writer *w = NULL;
	struct shard *sh = NULL;
	struct diag d = { "" };

	ut_tmpl(path, sizeof(path), "loaderd-verify");
	tmp_fd = mkstemp(path);
	cr_assert_geq(tmp_fd, 0, "mkstemp %s: %s", path, strerror(errno));
	cr_assert_eq(unlink(path), 0);
	s.nfields = 1;
	cr_assert_eq(field_parse(&s.f[0], "image: jpeg", &d), 0, "%s", d.msg);
	cr_assert_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d), 0,
		     "%s", d.msg);
	for (size_t i = 0; i < n; i++) {
		struct shard_field f = { p[i].data, (uint32_t)p[i].len,
					 p[i].len };

		cr_assert_eq(shard_writer_add(w, &f, &d), 0, "%s: %s",
			     p[i].name, d.msg);
	}
	cr_assert_eq(shard_writer_finish(w, &d), 0, "%s", d.msg);
	shard_writer_free(w);
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	return sh;
}

static void teardown(void)
{
	if (tmp_fd >= 0)
		close(tmp_fd);
	tmp_fd = -1;
}

/* What verify said of each record. */
#define MAX_RECORDS 32
struct verdicts {
	int err[MAX_RECORDS];
	char msg[MAX_RECORDS][DIAG_MAX];
};

static void on_bad(void *arg, const struct shard *sh, uint64_t index, int err,
		   const char *msg)
{
	struct verdicts *v = arg;

	cr_assert_lt(index, MAX_RECORDS);
	v->err[index] = err;
	snprintf(v->msg[index], sizeof(v->msg[index]), "%s", msg);
}

/* Does s end with tail? */
static bool ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);

	return b <= a && !strcmp(s + a - b, tail);
}

/*
 * Verify the shard and run the pipeline on every record, both under the
 * pixel limit max_pixels (0: the default), and compare their verdicts.
 * Returns how many records were bad.
 */
static unsigned judge(struct shard *sh, const struct payload *p, size_t n,
		      uint64_t max_pixels)
{
	struct verdicts v;
	struct verify_opts o = { .decode = true,
				 .max_pixels = max_pixels,
				 .bad = on_bad,
				 .arg = &v };
	struct verify_stats st = { 0 };
	struct verify_ctx *vc = NULL;
	struct imgpipe *ip = NULL;
	struct imgpipe_ws *ws = NULL;
	struct ispec sp;
	struct diag d = { "" };
	unsigned char *out = malloc((size_t)SIDE * SIDE * 3);
	unsigned bad = 0;

	cr_assert_not_null(out);
	memset(&v, 0, sizeof(v));
	cr_assert_eq(verify_ctx_new(&vc), 0);
	cr_assert_eq(verify_shard(vc, sh, tmp_fd, &o, &st, &d), 0, "%s", d.msg);
	cr_expect_eq(st.records, n);
	cr_assert_eq(ispec_parse(&sp, SPEC, &d), 0, "%s", d.msg);
	cr_assert_eq(imgpipe_new(&ip, &sp, max_pixels, &d), 0, "%s", d.msg);
	cr_assert_eq(imgpipe_ws_new(ip, false, &ws), 0);
	for (size_t i = 0; i < n; i++) {
		int err;

		diag_clear(&d);
		err = imgpipe_run(ip, ws, p[i].data, p[i].len, 1, out, &d);
		cr_expect_eq(v.err[i], err,
			     "%s: verify %d (%s), stream %d (%s)", p[i].name,
			     v.err[i], v.msg[i], err, d.msg);
		if (err)
			cr_expect(ends_with(v.msg[i], d.msg),
				  "%s: verify says \"%s\", stream \"%s\"",
				  p[i].name, v.msg[i], d.msg);
		bad += err != 0;
	}
	cr_expect_eq(st.bad, bad);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	verify_ctx_free(vc);
	free(out);
	return bad;
}

Test(verify, judges_as_a_stream, .fini = teardown)
{
	struct payload p[MAX_RECORDS];
	size_t n = make_payloads(p, MAX_RECORDS);
	struct shard *sh = write_shard(p, n);

	/* Every damaged record is bad, every good one good. */
	cr_expect_eq(judge(sh, p, n, 0), n - NELEM(goods));
	/* One pixel under the good images: each is now too big for both. */
	cr_expect_eq(judge(sh, p, n, (uint64_t)SIDE * SIDE - 1), n);
	shard_close(sh);
	for (size_t i = 0; i < n; i++)
		free(p[i].data);
}

/*
 * What verify decodes is what a stream delivers: the codec table's
 * pixels (gray repeated into R, G and B) are the pipeline's output for a
 * crop of the whole image at its own size in u8 NHWC.
 */
Test(verify, same_pixels_as_a_stream)
{
	const struct codec_ops *jpeg = codec_get(CODEC_JPEG);
	struct codec_ctx *ctx = NULL;
	struct imgpipe *ip = NULL;
	struct imgpipe_ws *ws = NULL;
	struct ispec sp;
	struct diag d = { "" };
	size_t n = (size_t)SIDE * SIDE * 3;
	unsigned char *dec = malloc(n), *rgb = malloc(n), *out = malloc(n);

	cr_assert(dec && rgb && out);
	cr_assert_eq(codec_ctx_new(&ctx, 0), 0);
	cr_assert_eq(ispec_parse(&sp, SPEC, &d), 0, "%s", d.msg);
	cr_assert_eq(ispec_out_bytes(&sp), n);
	cr_assert_eq(imgpipe_new(&ip, &sp, 0, &d), 0, "%s", d.msg);
	cr_assert_eq(imgpipe_ws_new(ip, false, &ws), 0);
	for (size_t i = 0; i < NELEM(goods); i++) {
		struct codec_src src = { 0 };
		struct codec_info info;
		size_t len;
		unsigned char *jpg = encode(&goods[i], 7, &len);

		src.data = jpg;
		src.len = len;
		cr_assert_eq(jpeg->decode(ctx, &src, dec, n, &info, &d), 0,
			     "%s: %s", goods[i].name, d.msg);
		cr_assert_eq(info.width, SIDE);
		cr_assert_eq(info.height, SIDE);
		cr_assert_eq(info.channels, goods[i].pf == TJPF_GRAY ? 1u : 3u,
			     "%s", goods[i].name);
		for (size_t k = 0; k < (size_t)SIDE * SIDE; k++)
			for (int c = 0; c < 3; c++)
				rgb[k * 3 + c] = info.channels == 1 ?
							 dec[k] :
							 dec[k * 3 + c];
		cr_assert_eq(imgpipe_run(ip, ws, jpg, len, 1, out, &d), 0,
			     "%s: %s", goods[i].name, d.msg);
		for (size_t k = 0; k < n; k++)
			cr_assert_eq(out[k], rgb[k],
				     "%s: byte %zu: stream %u, verify %u",
				     goods[i].name, k, out[k], rgb[k]);
		free(jpg);
	}
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	codec_ctx_free(ctx);
	free(dec);
	free(rgb);
	free(out);
}

/*
 * A bytes field whose zstd frame claims 4 GiB - 1 bytes (and holds 1000):
 * verify says it is damaged without allocating what it claims. Under an
 * address-space limit of 1 GiB, allocating it would fail (-ENOMEM).
 */
Test(verify, claimed_size_not_allocated, .fini = teardown)
{
	static const unsigned char frame[] = {
		0x28, 0xb5, 0x2f, 0xfd, /* magic */
		0x80,			/* 4-byte content size, not single */
		0x38,			/* window 128 KiB */
		0xff, 0xff, 0xff, 0xff, /* content size 4294967295 */
		0x43, 0x1f, 0x00,	/* last block, RLE, 1000 bytes */
		'x',
	};
	struct rlimit as = { 1ull << 30, 1ull << 30 };
	char path[PATH_MAX];
	struct schema s = { 0 };
	struct shard_writer *w = NULL;
	struct shard *sh = NULL;
	struct verdicts v;
	struct verify_opts o = { .decode = true, .bad = on_bad, .arg = &v };
	struct verify_stats st = { 0 };
	struct verify_ctx *vc = NULL;
	struct diag d = { "" };
	struct shard_field f = { frame, sizeof(frame), 1000 };

	ut_tmpl(path, sizeof(path), "loaderd-verify");
	tmp_fd = mkstemp(path);
	cr_assert_geq(tmp_fd, 0);
	cr_assert_eq(unlink(path), 0);
	s.nfields = 1;
	cr_assert_eq(field_parse(&s.f[0], "text: bytes zstd", &d), 0, "%s",
		     d.msg);
	cr_assert_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d), 0,
		     "%s", d.msg);
	cr_assert_eq(shard_writer_add(w, &f, &d), 0, "%s", d.msg);
	cr_assert_eq(shard_writer_finish(w, &d), 0, "%s", d.msg);
	shard_writer_free(w);
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	memset(&v, 0, sizeof(v));
	cr_assert_eq(verify_ctx_new(&vc), 0);
#ifndef __SANITIZE_ADDRESS__
	/* ASan's shadow takes more address space than that on its own. */
	cr_assert_eq(setrlimit(RLIMIT_AS, &as), 0);
#else
	(void)as;
#endif
	cr_assert_eq(verify_shard(vc, sh, tmp_fd, &o, &st, &d), 0, "%s", d.msg);
	cr_expect_eq(st.bad, 1);
	cr_expect_eq(v.err[0], LOADER_EDECODE, "not -ENOMEM: %d (%s)", v.err[0],
		     v.msg[0]);
	cr_expect(strstr(v.msg[0], "field text"), "%s", v.msg[0]);
	verify_ctx_free(vc);
	shard_close(sh);
}
