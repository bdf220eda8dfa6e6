/*
 * test_shard.c - shard format v1: writer and reader round trips, and the
 * full verify scan (verify.c) against damaged files.
 *
 * The corruption tests know the on-disk layout (shard.h, shard.c): they
 * flip bytes, cut files and, where a test wants to get past a checksum on
 * purpose, recompute the checksums ("re-sign") so that only the structural
 * checks behind it can catch the damage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <xxhash.h>

#include "codec.h"
#include "jpeg.h"
#include "loader_error.h"
#include "schema.h"
#include "shard.h"
#include "verify.h"
#include "zrec.h"
#include "../../unit_util.h"

#define NELEM(a)    (sizeof(a) / sizeof((a)[0]))
#define PAYLOAD_MAX (64u << 10)
#define NSAMPLES    200
#define SHARD_NAME  "unit.shard"

/* ------------------------------------------------------------- helpers */

static inline uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static inline void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/*
 * One temporary file per test (criterion runs each test in a process of
 * its own). It is unlinked as soon as it exists, so that nothing is left
 * behind even when a test crashes; everything goes through the fd.
 */
static int tmp_fd = -1;
static struct codec_ctx *cctx;

static void setup(void)
{
	char path[PATH_MAX];

	ut_tmpl(path, sizeof(path), "loaderd-shard");
	tmp_fd = mkstemp(path);
	cr_assert_geq(tmp_fd, 0, "mkstemp %s: %s", path, strerror(errno));
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(codec_ctx_new(&cctx, 0), 0);
}

static void teardown(void)
{
	if (tmp_fd >= 0)
		close(tmp_fd);
	tmp_fd = -1;
	codec_ctx_free(cctx);
	cctx = NULL;
}

static void parse_schema(struct schema *s, const char *const *texts, unsigned n)
{
	memset(s, 0, sizeof(*s));
	s->nfields = n;
	for (unsigned i = 0; i < n; i++) {
		struct diag d = { "" };

		cr_assert_eq(field_parse(&s->f[i], texts[i], &d), 0, "%s: %s",
			     texts[i], d.msg);
	}
}

/* The whole file, malloc'd. */
static unsigned char *slurp(int fd, size_t *len)
{
	struct stat st;
	unsigned char *buf;

	cr_assert_eq(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	buf = malloc(*len ? *len : 1);
	cr_assert_not_null(buf);
	cr_assert_eq(pread(fd, buf, *len, 0), (ssize_t)*len);
	return buf;
}

/* Make the file hold exactly buf. */
static void rewrite(int fd, const unsigned char *buf, size_t len)
{
	cr_assert_eq(ftruncate(fd, (off_t)len), 0);
	cr_assert_eq(pwrite(fd, buf, len, 0), (ssize_t)len);
}

/* --------------------------------------------------- sample payloads */

/* Dictionaries: one trained on digits, one of raw content. */
static unsigned char dict_trained[2048], dict_raw[509];
static size_t dict_trained_len;

static void make_dicts(void)
{
	static unsigned char samples[NSAMPLES * UT_DIGIT_SIZE];
	size_t sizes[NSAMPLES];
	struct diag d = { "" };

	for (unsigned i = 0; i < NSAMPLES; i++) {
		ut_digit(samples + i * UT_DIGIT_SIZE, 1000 + i);
		sizes[i] = UT_DIGIT_SIZE;
	}
	/* An odd capacity, so that the footer has padding after it. */
	cr_assert_eq(zrec_train(dict_trained, sizeof(dict_trained) - 3, samples,
				sizes, NSAMPLES, &dict_trained_len, &d),
		     0, "%s", d.msg);
	cr_assert_gt(dict_trained_len, 256);
	for (size_t i = 0; i < sizeof(dict_raw); i++)
		dict_raw[i] =
			(unsigned char)("0123456789abcdef"[i % 16] ^ (i / 16));
}

/* The dictionary the tests give field k (alternating the two). */
static struct shard_dict dict_for(unsigned k)
{
	if (k % 2)
		return (struct shard_dict){ dict_trained, dict_trained_len };
	return (struct shard_dict){ dict_raw, sizeof(dict_raw) };
}

/*
 * The raw bytes of field k of record r: deterministic, so that readers
 * regenerate what writers stored.
 */
static size_t gen_raw(const struct field *f, unsigned r, unsigned k,
		      unsigned char *buf)
{
	uint64_t s = (uint64_t)r * 1000003u + k + 1;
	size_t n;

	switch (f->kind) {
	case FIELD_BYTES:
		/* Record 0 has an empty payload: that must work too. */
		n = (r * 131u + k * 17u) % 900u;
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)("loaderd "[i % 8] +
						 (ut_rand(&s) % 3));
		return n;
	case FIELD_JPEG: {
		unsigned w = 8 + 8 * (r % 3), h = 8 + 8 * ((r + k) % 2);
		unsigned ch = r % 2 ? 1 : 3;
		unsigned char px[24 * 16 * 3], *jpg = NULL;
		struct diag d = { "" };

		ut_picture(px, w, h, ch, r + k);
		cr_assert_eq(jpg_encode(cctx, px, w, h, ch, 60 + (int)r % 30,
					&jpg, &n, &d),
			     0, "%s", d.msg);
		cr_assert_leq(n, PAYLOAD_MAX);
		memcpy(buf, jpg, n);
		jpg_free(jpg);
		return n;
	}
	default:
		n = (size_t)field_fixed_size(f);
		cr_assert_leq(n, PAYLOAD_MAX);
		if (f->dtype == DT_U8 && n == UT_DIGIT_SIZE) {
			ut_digit(buf, r);
			return n;
		}
		/* Small values: compressible like real labels and features. */
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)(i % dtype_size(f->dtype) ?
							 0 :
							 ut_rand(&s) % 10);
		return n;
	}
}

/* Compress raw as field f says; returns the stored length. */
static size_t pack(const struct field *f, unsigned k, const unsigned char *raw,
		   size_t n, unsigned char *out)
{
	struct shard_dict sd = dict_for(k);
	struct zrec_enc *enc = NULL;
	struct diag d = { "" };
	size_t len;

	if (f->comp == COMP_NONE) {
		memcpy(out, raw, n);
		return n;
	}
	cr_assert_eq(zrec_enc_new(&enc, f->level,
				  f->comp == COMP_ZSTD_DICT ? sd.data : NULL,
				  f->comp == COMP_ZSTD_DICT ? sd.len : 0, &d),
		     0, "%s", d.msg);
	cr_assert_eq(zrec_compress(enc, raw, n, out, PAYLOAD_MAX, &len, &d), 0,
		     "%s", d.msg);
	zrec_enc_free(enc);
	return len;
}

/* What a write produced, for the reader's checks. */
struct written {
	uint64_t size;
	struct shard_field_stats stats[SCHEMA_MAX_FIELDS];
};

static void write_shard(int fd, const struct schema *s, unsigned nrec,
			struct written *wr)
{
	struct shard_dict dicts[SCHEMA_MAX_FIELDS];
	static unsigned char raw[SCHEMA_MAX_FIELDS][PAYLOAD_MAX];
	static unsigned char stored[SCHEMA_MAX_FIELDS][PAYLOAD_MAX];
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct shard_writer *w = NULL;
	struct diag d = { "" };
	struct stat st;
	uint64_t predicted;

	memset(wr, 0, sizeof(*wr));
	for (unsigned k = 0; k < s->nfields; k++)
		dicts[k] = dict_for(k);
	cr_assert_eq(shard_writer_new(&w, fd, SHARD_NAME, s, dicts, &d), 0,
		     "%s", d.msg);
	for (unsigned r = 0; r < nrec; r++) {
		for (unsigned k = 0; k < s->nfields; k++) {
			size_t n = gen_raw(&s->f[k], r, k, raw[k]);
			size_t len = pack(&s->f[k], k, raw[k], n, stored[k]);

			f[k] = (struct shard_field){ stored[k], (uint32_t)len,
						     n };
			wr->stats[k].raw_bytes += n;
			wr->stats[k].stored_bytes += len;
		}
		cr_assert_eq(shard_writer_add(w, f, &d), 0, "record %u: %s", r,
			     d.msg);
		cr_assert_eq(shard_writer_count(w), r + 1);
	}
	predicted = shard_writer_size(w);
	cr_assert_eq(shard_writer_finish(w, &d), 0, "%s", d.msg);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_expect_eq((uint64_t)st.st_size, predicted,
		     "file of %jd bytes, writer predicted %" PRIu64,
		     (intmax_t)st.st_size, predicted);
	wr->size = (uint64_t)st.st_size;
	shard_writer_free(w);
}

/* Read everything back and compare with what gen_raw()/pack() produce. */
static void check_shard(int fd, const struct schema *s, unsigned nrec,
			const struct written *wr)
{
	static unsigned char raw[PAYLOAD_MAX], stored[PAYLOAD_MAX];
	static unsigned char rec[SCHEMA_MAX_FIELDS * PAYLOAD_MAX];
	static unsigned char out[PAYLOAD_MAX];
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct shard *sh = NULL;
	struct diag d = { "" };
	uint64_t begin, end, expect_off = SHARD_HEADER_SIZE;

	cr_assert_eq(shard_open(&sh, fd, SHARD_NAME, &d), 0, "%s", d.msg);
	cr_expect_eq(shard_count(sh), nrec);
	cr_expect(schema_equal(shard_schema(sh), s), "schema differs");
	cr_expect_str_eq(shard_name(sh), SHARD_NAME);
	cr_expect_eq(shard_file_size(sh), wr->size);
	shard_data_range(sh, &begin, &end);
	cr_expect_eq(begin, SHARD_HEADER_SIZE);
	for (unsigned k = 0; k < s->nfields; k++) {
		struct shard_field_stats st = shard_stats(sh, k);
		size_t dlen;
		const void *dict = shard_dict(sh, k, &dlen);

		cr_expect_eq(st.raw_bytes, wr->stats[k].raw_bytes,
			     "field %s raw", s->f[k].name);
		cr_expect_eq(st.stored_bytes, wr->stats[k].stored_bytes,
			     "field %s stored", s->f[k].name);
		if (s->f[k].comp == COMP_ZSTD_DICT) {
			struct shard_dict sd = dict_for(k);

			cr_expect_not_null(shard_ddict(sh, k));
			cr_assert_eq(dlen, sd.len, "field %s dictionary",
				     s->f[k].name);
			cr_expect_arr_eq(dict, sd.data, sd.len);
		} else {
			cr_expect_null(shard_ddict(sh, k));
			cr_expect_null(dict);
			cr_expect_eq(dlen, 0);
		}
	}
	for (unsigned r = 0; r < nrec; r++) {
		struct shard_rec sr;

		cr_assert_eq(shard_rec(sh, r, &sr), 0);
		cr_expect_eq(sr.offset, expect_off, "record %u offset", r);
		expect_off = sr.offset + sr.length;
		cr_assert_eq(shard_read_record(sh, r, rec, sizeof(rec), f, &d),
			     0, "record %u: %s", r, d.msg);
		for (unsigned k = 0; k < s->nfields; k++) {
			size_t n = gen_raw(&s->f[k], r, k, raw);
			size_t len = pack(&s->f[k], k, raw, n, stored);
			size_t size = 0, got = 0;

			cr_assert_eq(f[k].len, len,
				     "record %u field %s: %" PRIu32
				     " bytes stored, wrote %zu",
				     r, s->f[k].name, f[k].len, len);
			cr_expect_arr_eq(f[k].data, stored, len,
					 "record %u field %s stored bytes", r,
					 s->f[k].name);
			cr_assert_eq(
				shard_field_size(sh, cctx, k, &f[k], &size, &d),
				0, "%s", d.msg);
			cr_expect_eq(size, n, "record %u field %s size", r,
				     s->f[k].name);
			/*
			 * Give exactly the probed size: zstd may use any room
			 * past the output as scratch, so a sentinel is only
			 * meaningful beyond cap.
			 */
			memset(out, 0xee, n + 1);
			cr_assert_eq(shard_unpack_field(sh, cctx, k, &f[k], out,
							size, &got, &d),
				     0, "record %u field %s: %s", r,
				     s->f[k].name, d.msg);
			cr_assert_eq(got, n, "record %u field %s unpacked", r,
				     s->f[k].name);
			cr_expect_arr_eq(out, raw, n,
					 "record %u field %s unpacked bytes", r,
					 s->f[k].name);
			cr_expect_eq(out[n], 0xee, "unpack wrote past %zu", n);
		}
	}
	cr_expect_eq(expect_off, end, "records end at the footer");
	shard_close(sh);
}

/* Open and verify with decoding; every record must be good. */
static void verify_clean(int fd, unsigned nrec)
{
	struct verify_ctx *vc = NULL;
	struct verify_opts o = { .decode = true };
	struct verify_stats st = { 0 };
	struct shard *sh = NULL;
	struct diag d = { "" };
	uint64_t begin, end;

	cr_assert_eq(shard_open(&sh, fd, SHARD_NAME, &d), 0, "%s", d.msg);
	cr_assert_eq(verify_ctx_new(&vc), 0);
	cr_expect_eq(verify_shard(vc, sh, fd, &o, &st, &d), 0, "%s", d.msg);
	shard_data_range(sh, &begin, &end);
	cr_expect_eq(st.records, nrec);
	cr_expect_eq(st.bad, 0);
	cr_expect_eq(st.bytes, end - begin);
	verify_ctx_free(vc);
	shard_close(sh);
}

/* ----------------------------------------------------------- round trip */

/* Every field type; jpeg is always stored as-is. */
static const char *const type_texts[] = {
	"b: bytes",
	"img: jpeg",
	"label: int64",
	"px: tensor u8 [28,28]",
	"emb: tensor f32 [3,5]",
	"s: tensor u16 []",
	"q: tensor i8 [2,3,4,5]",
	"d: tensor f64 [7]",
	"big: tensor i32 [64,64]",
};

static void round_trip(const char *comp, unsigned nrec)
{
	char texts[NELEM(type_texts)][FIELD_TEXT_MAX];
	const char *p[NELEM(type_texts)];
	struct schema s;
	struct written wr;

	make_dicts();
	for (unsigned i = 0; i < NELEM(type_texts); i++) {
		snprintf(texts[i], sizeof(texts[i]), "%s%s", type_texts[i],
			 strstr(type_texts[i], "jpeg") ? "" : comp);
		p[i] = texts[i];
	}
	parse_schema(&s, p, NELEM(type_texts));
	write_shard(tmp_fd, &s, nrec, &wr);
	check_shard(tmp_fd, &s, nrec, &wr);
	verify_clean(tmp_fd, nrec);
}

Test(shard, round_trip_none, .init = setup, .fini = teardown)
{
	round_trip("", 9);
}

Test(shard, round_trip_zstd, .init = setup, .fini = teardown)
{
	round_trip(" zstd 3", 9);
}

Test(shard, round_trip_zstd_dict, .init = setup, .fini = teardown)
{
	round_trip(" zstd 5 dict", 9);
}

/* Every compression in one schema, next to each other. */
Test(shard, round_trip_mixed, .init = setup, .fini = teardown)
{
	static const char *const t[] = {
		"a: bytes zstd 1 dict",
		"b: bytes",
		"c: bytes zstd 19",
		"img: jpeg",
		"l0: int64 zstd 3 dict",
		"l1: int64",
		"px: tensor u8 [28,28] zstd 3 dict",
		"px2: tensor u8 [28,28] zstd 3",
		"px3: tensor u8 [28,28]",
		"one: tensor u8 [1] zstd 2",
	};
	struct schema s;
	struct written wr;

	make_dicts();
	parse_schema(&s, t, NELEM(t));
	write_shard(tmp_fd, &s, 17, &wr);
	check_shard(tmp_fd, &s, 17, &wr);
	verify_clean(tmp_fd, 17);
}

/* The most fields a schema may have. */
Test(shard, round_trip_64_fields, .init = setup, .fini = teardown)
{
	char texts[SCHEMA_MAX_FIELDS][FIELD_TEXT_MAX];
	const char *p[SCHEMA_MAX_FIELDS];
	struct schema s;
	struct written wr;

	make_dicts();
	for (unsigned i = 0; i < SCHEMA_MAX_FIELDS; i++) {
		static const char *const kinds[] = {
			"int64",
			"bytes zstd 3",
			"tensor u8 [28,28] zstd 4 dict",
			"tensor f32 [2]",
		};

		snprintf(texts[i], sizeof(texts[i]), "field_%u: %s", i,
			 kinds[i % 4]);
		p[i] = texts[i];
	}
	parse_schema(&s, p, SCHEMA_MAX_FIELDS);
	write_shard(tmp_fd, &s, 3, &wr);
	check_shard(tmp_fd, &s, 3, &wr);
	verify_clean(tmp_fd, 3);
}

Test(shard, empty, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "img: jpeg", "x: bytes zstd 3 dict" };
	struct shard_field f[2];
	unsigned char buf[64];
	struct shard_rec r;
	struct shard *sh = NULL;
	struct schema s;
	struct written wr;
	struct diag d = { "" };
	uint64_t begin, end;

	make_dicts();
	parse_schema(&s, t, NELEM(t));
	write_shard(tmp_fd, &s, 0, &wr);
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	cr_expect_eq(shard_count(sh), 0);
	cr_expect(schema_equal(shard_schema(sh), &s));
	shard_data_range(sh, &begin, &end);
	cr_expect_eq(begin, SHARD_HEADER_SIZE);
	cr_expect_eq(end, SHARD_HEADER_SIZE);
	cr_expect_eq(shard_stats(sh, 1).stored_bytes, 0);
	cr_expect_not_null(shard_ddict(sh, 1));
	cr_expect_eq(shard_rec(sh, 0, &r), LOADER_ERANGE);
	cr_expect_eq(shard_read_record(sh, 0, buf, sizeof(buf), f, &d),
		     LOADER_ERANGE);
	shard_close(sh);
	verify_clean(tmp_fd, 0);
}

Test(shard, read_record_errors, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "b: bytes", "l: int64" };
	unsigned char buf[2048];
	struct shard_field f[2];
	struct shard_rec r;
	struct shard *sh = NULL;
	struct schema s;
	struct written wr;
	struct diag d = { "" };

	parse_schema(&s, t, NELEM(t));
	write_shard(tmp_fd, &s, 4, &wr);
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	cr_assert_eq(shard_rec(sh, 3, &r), 0);
	cr_expect_eq(shard_rec(sh, 4, &r), LOADER_ERANGE);
	cr_expect_eq(shard_rec(sh, UINT64_MAX, &r), LOADER_ERANGE);
	diag_clear(&d);
	cr_expect_eq(shard_read_record(sh, 4, buf, sizeof(buf), f, &d),
		     LOADER_ERANGE);
	cr_expect(strstr(d.msg, SHARD_NAME), "%s", d.msg);
	diag_clear(&d);
	cr_expect_eq(shard_read_record(sh, 3, buf, r.length - 1, f, &d),
		     LOADER_ETOOBIG);
	cr_expect(strstr(d.msg, SHARD_NAME), "%s", d.msg);
	cr_assert_eq(shard_read_record(sh, 3, buf, r.length, f, &d), 0);

	/* shard_parse_record() wants the exact record bytes. */
	cr_expect_eq(shard_parse_record(sh, 3, buf, r.length - 1, f, &d),
		     LOADER_ETRUNC);
	buf[r.length - 1] ^= 1;
	diag_clear(&d);
	cr_expect_eq(shard_parse_record(sh, 3, buf, r.length, f, &d),
		     LOADER_ECHECKSUM);
	cr_expect(strstr(d.msg, "record 3"), "%s", d.msg);
	cr_expect_eq(shard_parse_record(sh, 9, buf, r.length, f, &d),
		     LOADER_ERANGE);
	shard_close(sh);
}

/* ---------------------------------------------------------------- writer */

Test(writer, rejects_wrong_tensor_size, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "b: bytes", "px: tensor u8 [28,28]" };
	static const uint32_t bad_len[] = { 0, 783, 785, 784 * 2 };
	unsigned char px[UT_DIGIT_SIZE * 2] = { 0 };
	struct shard_writer *w = NULL;
	struct shard_field f[2];
	struct shard *sh = NULL;
	struct schema s;
	struct diag d = { "" };

	parse_schema(&s, t, NELEM(t));
	cr_assert_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d), 0,
		     "%s", d.msg);
	f[0] = (struct shard_field){ "ab", 2, 2 };
	for (size_t i = 0; i < NELEM(bad_len); i++) {
		f[1] = (struct shard_field){ px, bad_len[i], bad_len[i] };
		diag_clear(&d);
		cr_expect_eq(shard_writer_add(w, f, &d), LOADER_ESCHEMA,
			     "%" PRIu32 " bytes", bad_len[i]);
		cr_expect(strstr(d.msg, SHARD_NAME) && strstr(d.msg, "px") &&
				  strstr(d.msg, "record 0"),
			  "message \"%s\"", d.msg);
		cr_expect_eq(shard_writer_count(w), 0);
	}
	/* A refused record leaves no trace: the shard is still good. */
	f[1] = (struct shard_field){ px, UT_DIGIT_SIZE, UT_DIGIT_SIZE };
	cr_assert_eq(shard_writer_add(w, f, &d), 0, "%s", d.msg);
	cr_assert_eq(shard_writer_finish(w, &d), 0, "%s", d.msg);
	shard_writer_free(w);
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	cr_expect_eq(shard_count(sh), 1);
	shard_close(sh);
}

/* Uncompressed fields count what is stored as raw, whatever raw_len says. */
Test(writer, uncompressed_raw_len_ignored, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "b: bytes" };
	struct shard_writer *w = NULL;
	struct shard_field f[1] = { { "hello", 5, 0 } };
	struct shard *sh = NULL;
	struct schema s;
	struct diag d = { "" };

	parse_schema(&s, t, NELEM(t));
	cr_assert_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d), 0,
		     "%s", d.msg);
	cr_assert_eq(shard_writer_add(w, f, &d), 0, "%s", d.msg);
	cr_assert_eq(shard_writer_finish(w, &d), 0, "%s", d.msg);
	shard_writer_free(w);
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	cr_expect_eq(shard_stats(sh, 0).raw_bytes, 5);
	cr_expect_eq(shard_stats(sh, 0).stored_bytes, 5);
	shard_close(sh);
}

Test(writer, rejects_bad_schema, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "a: bytes zstd 3 dict", "b: int64" };
	struct shard_dict dicts[2] = { { NULL, 0 }, { NULL, 0 } };
	struct shard_writer *w = NULL;
	struct schema s;
	struct diag d = { "" };

	parse_schema(&s, t, NELEM(t));
	/* A dictionary field without a dictionary. */
	cr_expect_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d),
		     LOADER_ESCHEMA);
	cr_expect(strstr(d.msg, SHARD_NAME) && strstr(d.msg, "a"), "%s", d.msg);
	cr_expect_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, dicts, &d),
		     LOADER_ESCHEMA);
	/* Duplicate names, no fields. */
	strcpy(s.f[1].name, "a");
	s.f[1].comp = COMP_NONE;
	s.f[1].level = 0;
	diag_clear(&d);
	cr_expect_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d),
		     LOADER_ESCHEMA);
	cr_expect(strstr(d.msg, SHARD_NAME), "%s", d.msg);
	s.nfields = 0;
	cr_expect_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d),
		     LOADER_ESCHEMA);
	shard_writer_free(NULL);
	shard_close(NULL);
	verify_ctx_free(NULL);
}

Test(writer, unfinished_shard_does_not_open, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "l: int64" };
	struct shard_writer *w = NULL;
	struct shard *sh = NULL;
	struct shard_field f = { "12345678", 8, 8 };
	struct schema s;
	struct diag d = { "" };

	parse_schema(&s, t, 1);
	cr_assert_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d), 0);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(shard_writer_add(w, &f, &d), 0);
	shard_writer_free(w); /* never finished */
	cr_expect_lt(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0);
	cr_expect(strstr(d.msg, SHARD_NAME), "%s", d.msg);
}

/* ------------------------------------------------------------ corruption */

/*
 * The shard the corruption tests damage: 20 records of a JPEG, a tensor
 * compressed with a trained dictionary, and an int64: about 16 KB.
 */
#define CORRUPT_RECORDS 20

static const char *const corrupt_texts[] = {
	"img: jpeg",
	"px: tensor u8 [28,28] zstd 3 dict",
	"label: int64",
};

/* Where things are in the pristine file. */
struct layout {
	unsigned char *buf; /* pristine bytes */
	size_t size;
	uint64_t foff, fsize, ipos; /* footer offset, size; index in it */
	uint64_t rec_off[CORRUPT_RECORDS];
	uint32_t rec_len[CORRUPT_RECORDS];
};

static struct layout L;

static void corrupt_setup(void)
{
	struct schema s;
	struct written wr;
	const unsigned char *tr, *ft;

	setup();
	make_dicts();
	parse_schema(&s, corrupt_texts, NELEM(corrupt_texts));
	write_shard(tmp_fd, &s, CORRUPT_RECORDS, &wr);
	L.buf = slurp(tmp_fd, &L.size);
	cr_assert_lt(L.size, 32u << 10,
		     "shard of %zu bytes is too big "
		     "for the byte-by-byte tests",
		     L.size);
	tr = L.buf + L.size - SHARD_TRAILER_SIZE;
	L.foff = get64(tr);
	L.fsize = get64(tr + 8);
	ft = L.buf + L.foff;
	L.ipos = get64(ft + 24);
	for (unsigned i = 0; i < CORRUPT_RECORDS; i++) {
		const unsigned char *e = ft + L.ipos + i * SHARD_INDEX_ENTRY;

		L.rec_off[i] = get64(e);
		L.rec_len[i] = get32(e + 8);
	}
	cr_assert_eq(L.rec_off[0], SHARD_HEADER_SIZE);
}

static void corrupt_teardown(void)
{
	free(L.buf);
	memset(&L, 0, sizeof(L));
	teardown();
}

/* Recompute every checksum of buf (laid out as the pristine file). */
static void resign(unsigned char *buf)
{
	unsigned char *ft = buf + L.foff, *tr = buf + L.size - 64;

	put64(buf + 56, XXH3_64bits(buf, 56));
	for (unsigned i = 0; i < CORRUPT_RECORDS; i++)
		put64(ft + L.ipos + i * SHARD_INDEX_ENTRY + 16,
		      XXH3_64bits(buf + L.rec_off[i], L.rec_len[i]));
	put64(tr + 24, XXH3_64bits(ft, L.fsize));
	put64(tr + 48, XXH3_64bits(tr, 48));
}

/* The record that holds file offset off, or -1. */
static int record_at(uint64_t off)
{
	for (int i = 0; i < CORRUPT_RECORDS; i++)
		if (off >= L.rec_off[i] && off < L.rec_off[i] + L.rec_len[i])
			return i;
	return -1;
}

/* What open + a decoding verify made of the file. */
struct outcome {
	int open_err;
	char open_msg[DIAG_MAX];
	int verify_err;
	uint64_t records, bad;
	int64_t first_bad;
	int first_err;
	char first_msg[DIAG_MAX];
};

static void on_bad(void *arg, const struct shard *sh, uint64_t index, int err,
		   const char *msg)
{
	struct outcome *o = arg;

	if (o->first_bad < 0) {
		o->first_bad = (int64_t)index;
		o->first_err = err;
		snprintf(o->first_msg, sizeof(o->first_msg), "%s", msg);
	}
}

static struct verify_ctx *vctx;

static void scan(struct outcome *o)
{
	struct verify_opts opt = { .decode = true, .bad = on_bad, .arg = o };
	struct verify_stats st = { 0 };
	struct shard *sh = NULL;
	struct diag d = { "" };

	memset(o, 0, sizeof(*o));
	o->first_bad = -1;
	if (!vctx)
		cr_assert_eq(verify_ctx_new(&vctx), 0);
	o->open_err = shard_open(&sh, tmp_fd, SHARD_NAME, &d);
	if (o->open_err) {
		snprintf(o->open_msg, sizeof(o->open_msg), "%s", d.msg);
		return;
	}
	o->verify_err = verify_shard(vctx, sh, tmp_fd, &opt, &st, &d);
	o->records = st.records;
	o->bad = st.bad;
	shard_close(sh);
}

static bool caught(const struct outcome *o)
{
	return o->open_err < 0 || o->verify_err < 0 || o->bad > 0;
}

/* Flip the byte at off with x, scan, put it back, and check the outcome. */
static void flip_one(uint64_t off, unsigned char x)
{
	unsigned char b = (unsigned char)(L.buf[off] ^ x);
	int rec = record_at(off);
	struct outcome o;

	cr_assert_eq(pwrite(tmp_fd, &b, 1, (off_t)off), 1);
	scan(&o);
	cr_assert_eq(pwrite(tmp_fd, &L.buf[off], 1, (off_t)off), 1);
	cr_assert(caught(&o), "flip ^%#x at offset %" PRIu64 " went unnoticed",
		  x, off);
	if (rec < 0) {
		cr_assert_lt(o.open_err, 0,
			     "flip ^%#x at offset %" PRIu64
			     " (outside the records) passed shard_open",
			     x, off);
		cr_assert(strstr(o.open_msg, SHARD_NAME),
			  "offset %" PRIu64 ": message \"%s\"", off,
			  o.open_msg);
		return;
	}
	cr_assert_eq(o.open_err, 0, "flip in record %d: open: %s", rec,
		     o.open_msg);
	cr_assert_eq(o.verify_err, 0);
	cr_assert_eq(o.records, CORRUPT_RECORDS);
	cr_assert_eq(o.bad, 1, "flip at %" PRIu64 ": %" PRIu64 " bad records",
		     off, o.bad);
	cr_assert_eq(o.first_bad, rec,
		     "flip at %" PRIu64 ": record %" PRId64 " reported, not %d",
		     off, o.first_bad, rec);
	cr_assert_eq(o.first_err, LOADER_ECHECKSUM);
}

/*
 * Flip the byte at every offset in [from, to) and scan. Damage in the
 * header, footer or trailer must stop shard_open() (their checksums cover
 * every byte); damage in record i must leave the shard open and make
 * verify report record i, and only it. Outside the records, where a scan
 * stops at shard_open(), every pattern is tried; inside, where each scan
 * reads and decodes all records, the patterns take turns.
 */
static void flip_range(uint64_t from, uint64_t to)
{
	static const unsigned char patterns[] = { 0xff, 0x01, 0x80 };
	struct outcome o;

	cr_assert_leq(to, L.size);
	for (uint64_t off = from; off < to; off++) {
		if (record_at(off) >= 0) {
			flip_one(off, patterns[off % NELEM(patterns)]);
			continue;
		}
		for (size_t k = 0; k < NELEM(patterns); k++)
			flip_one(off, patterns[k]);
	}
	/* The file is whole again. */
	scan(&o);
	cr_expect_not(caught(&o), "restored file: %s", o.open_msg);
	verify_ctx_free(vctx);
	vctx = NULL;
}

Test(corrupt, flip_header, .init = corrupt_setup, .fini = corrupt_teardown)
{
	flip_range(0, SHARD_HEADER_SIZE);
}

/* Records in two halves, so that criterion can run them side by side. */
Test(corrupt, flip_records_1, .init = corrupt_setup, .fini = corrupt_teardown)
{
	flip_range(SHARD_HEADER_SIZE, L.rec_off[CORRUPT_RECORDS / 2]);
}

Test(corrupt, flip_records_2, .init = corrupt_setup, .fini = corrupt_teardown)
{
	flip_range(L.rec_off[CORRUPT_RECORDS / 2], L.foff);
}

Test(corrupt, flip_footer_and_trailer, .init = corrupt_setup,
     .fini = corrupt_teardown)
{
	flip_range(L.foff, L.size);
}

/* The message of a bad record names the file, the record and its offset. */
Test(corrupt, bad_record_message, .init = corrupt_setup,
     .fini = corrupt_teardown)
{
	char rec[32], off[48];
	unsigned char b;
	struct outcome o;

	b = L.buf[L.rec_off[7] + 10] ^ 0x20;
	cr_assert_eq(pwrite(tmp_fd, &b, 1, (off_t)L.rec_off[7] + 10), 1);
	scan(&o);
	cr_assert_eq(o.open_err, 0, "%s", o.open_msg);
	cr_assert_eq(o.bad, 1);
	cr_assert_eq(o.first_bad, 7);
	snprintf(rec, sizeof(rec), "record 7");
	snprintf(off, sizeof(off), "offset %" PRIu64, L.rec_off[7]);
	cr_expect(strstr(o.first_msg, SHARD_NAME), "%s", o.first_msg);
	cr_expect(strstr(o.first_msg, rec), "%s", o.first_msg);
	cr_expect(strstr(o.first_msg, off), "%s", o.first_msg);
	verify_ctx_free(vctx);
	vctx = NULL;
}

/* Every cut of the file, down to nothing, fails to open. */
Test(corrupt, truncate_every_length, .init = corrupt_setup,
     .fini = corrupt_teardown)
{
	struct shard *sh = NULL;

	for (size_t len = L.size; len-- > 0;) {
		struct diag d = { "" };
		int err;

		cr_assert_eq(ftruncate(tmp_fd, (off_t)len), 0);
		err = shard_open(&sh, tmp_fd, SHARD_NAME, &d);
		cr_assert_lt(err, 0, "shard cut to %zu of %zu bytes opened",
			     len, L.size);
		cr_assert(strstr(d.msg, SHARD_NAME),
			  "cut to %zu: message \"%s\"", len, d.msg);
	}
}

/*
 * The structural checks behind the checksums: flip a byte, recompute every
 * checksum, and the damage must still be caught, by shard_open() or by the
 * scan. Skipped, because nothing structural can tell: the checksums
 * themselves (re-signed), dictionary contents and payloads (only decoding
 * sees them) and the raw totals of compressed fields, which nothing reads.
 */
static bool structural(uint64_t off)
{
	uint64_t tr = L.size - SHARD_TRAILER_SIZE;
	int rec = record_at(off);

	if (off >= 56 && off < 64)
		return false;
	if (rec >= 0)
		return off < L.rec_off[rec] + 4 * NELEM(corrupt_texts);
	if (off >= tr)
		return !(off >= tr + 24 && off < tr + 32) &&
		       !(off >= tr + 48 && off < tr + 56);
	off -= L.foff;
	if (off >= L.ipos)
		return (off - L.ipos) % SHARD_INDEX_ENTRY < 16;
	for (unsigned i = 0; i < NELEM(corrupt_texts); i++) {
		const unsigned char *p = L.buf + L.foff + SHARD_FOOTER_HEAD +
					 i * SHARD_FIELD_DESC;

		/* A dictionary; the padding after it is structural. */
		if (off >= get64(p + 56) && off < get64(p + 56) + get64(p + 64))
			return false;
	}
	if (off >= SHARD_FOOTER_HEAD &&
	    off < SHARD_FOOTER_HEAD + NELEM(corrupt_texts) * SHARD_FIELD_DESC) {
		uint64_t i = (off - SHARD_FOOTER_HEAD) / SHARD_FIELD_DESC;
		uint64_t at = (off - SHARD_FOOTER_HEAD) % SHARD_FIELD_DESC;

		if (strstr(corrupt_texts[i], "zstd") && at >= 72 && at < 80)
			return false;
	}
	return true;
}

Test(corrupt, resigned_structure, .init = corrupt_setup,
     .fini = corrupt_teardown)
{
	unsigned char *buf = malloc(L.size);
	unsigned checked = 0;

	cr_assert_not_null(buf);
	for (uint64_t off = 0; off < L.size; off++) {
		struct outcome o;

		if (!structural(off))
			continue;
		memcpy(buf, L.buf, L.size);
		/* 0xff: a flip of 1 could turn a level 3 into a valid 2. */
		buf[off] ^= 0xff;
		resign(buf);
		rewrite(tmp_fd, buf, L.size);
		scan(&o);
		checked++;
		cr_assert(caught(&o),
			  "re-signed flip at offset %" PRIu64 " went unnoticed",
			  off);
		if (o.open_err)
			cr_assert(strstr(o.open_msg, SHARD_NAME), "%s",
				  o.open_msg);
	}
	cr_expect_gt(checked, 900, "only %u offsets checked", checked);
	/* The dictionary's odd size leaves padding to damage. */
	cr_expect_gt(L.ipos, SHARD_FOOTER_HEAD +
				     NELEM(corrupt_texts) * SHARD_FIELD_DESC +
				     dict_trained_len);
	/* Re-signing the pristine bytes changes nothing. */
	memcpy(buf, L.buf, L.size);
	resign(buf);
	cr_expect_arr_eq(buf, L.buf, L.size);
	free(buf);
	verify_ctx_free(vctx);
	vctx = NULL;
}

/* Payloads that pass their checksum but do not decode: only verify sees. */
Test(corrupt, verify_decodes_payloads, .init = corrupt_setup,
     .fini = corrupt_teardown)
{
	unsigned char *buf = malloc(L.size);
	struct outcome o;
	struct verify_ctx *vc = NULL;
	struct verify_opts opt = { .decode = false };
	struct verify_stats st = { 0 };
	struct shard *sh = NULL;
	struct diag d = { "" };
	uint64_t img3, px9;
	char off[48];

	cr_assert_not_null(buf);
	memcpy(buf, L.buf, L.size);
	/* Fields follow the 3 length prefixes: img, then px. */
	img3 = L.rec_off[3] + 12;
	px9 = L.rec_off[9] + 12 + get32(buf + L.rec_off[9]);
	cr_assert_eq(buf[img3], 0xff, "record 3 does not start with SOI");
	cr_assert_eq(get32(buf + px9), 0xfd2fb528, "not a zstd frame");
	buf[img3 + 1] = 0x00; /* SOI marker */
	buf[px9] ^= 0xff;     /* zstd magic */
	resign(buf);
	rewrite(tmp_fd, buf, L.size);

	scan(&o);
	cr_assert_eq(o.open_err, 0, "%s", o.open_msg);
	cr_expect_eq(o.records, CORRUPT_RECORDS);
	cr_expect_eq(o.bad, 2);
	cr_expect_eq(o.first_bad, 3);
	cr_expect_eq(o.first_err, LOADER_EDECODE);
	snprintf(off, sizeof(off), "offset %" PRIu64, L.rec_off[3]);
	cr_expect(strstr(o.first_msg, SHARD_NAME) &&
			  strstr(o.first_msg, "record 3") &&
			  strstr(o.first_msg, off) &&
			  strstr(o.first_msg, "img"),
		  "message \"%s\"", o.first_msg);

	/* Checksums alone do not see it. */
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0);
	cr_assert_eq(verify_ctx_new(&vc), 0);
	cr_expect_eq(verify_shard(vc, sh, tmp_fd, &opt, &st, &d), 0);
	cr_expect_eq(st.bad, 0);
	cr_expect_eq(st.records, CORRUPT_RECORDS);
	verify_ctx_free(vc);
	verify_ctx_free(vctx);
	vctx = NULL;
	shard_close(sh);
	free(buf);
}

/* A damaged copy of the pristine file, opened; returns the error. */
static int open_damaged(unsigned char *buf, bool sign, struct diag *d)
{
	struct shard *sh = NULL;
	int err;

	if (sign)
		resign(buf);
	rewrite(tmp_fd, buf, L.size);
	diag_clear(d);
	err = shard_open(&sh, tmp_fd, SHARD_NAME, d);
	shard_close(sh);
	return err;
}

Test(corrupt, named_errors, .init = corrupt_setup, .fini = corrupt_teardown)
{
	static const struct {
		const char *what;
		int err;
		const char *needle; /* in the message, besides the name */
	} t[] = {
		{ "bad magic", LOADER_EFORMAT, "offset 0" },
		{ "header version 2", LOADER_EVERSION, "offset 8" },
		{ "trailer version 2", LOADER_EVERSION, "version 2" },
		{ "header checksum", LOADER_ECHECKSUM, "offset 56" },
		{ "footer checksum", LOADER_ECHECKSUM, "footer" },
		{ "footer beyond the file", LOADER_ERANGE, "footer" },
		{ "index beyond the footer", LOADER_ERANGE, "index" },
		{ "record beyond the file", LOADER_ERANGE, "index entry 5" },
		{ "header flags", LOADER_EVERSION, "offset 16" },
		{ "trailer magic", LOADER_ETRUNC, "trailer" },
	};
	unsigned char *buf = malloc(L.size);
	uint64_t tr = L.size - SHARD_TRAILER_SIZE;

	cr_assert_not_null(buf);
	for (size_t i = 0; i < NELEM(t); i++) {
		struct diag d = { "" };
		bool sign = true;
		int err;

		memcpy(buf, L.buf, L.size);
		switch (i) {
		case 0: buf[0] ^= 0xff; break;
		case 1: put32(buf + 8, 2); break;
		case 2: put32(buf + tr + 32, 2); break;
		case 3:
			buf[30] = 1;
			sign = false;
			break;
		case 4:
			buf[L.foff + 40] ^= 1;
			sign = false;
			break;
		case 5: put64(buf + tr, L.size + 4096); break;
		case 6: put64(buf + L.foff + 24, L.size * 2); break;
		case 7:
			put64(buf + L.foff + L.ipos + 5 * SHARD_INDEX_ENTRY,
			      L.size + 100);
			break;
		case 8: buf[16] = 1; break;
		default: buf[L.size - 2] ^= 0xff; break;
		}
		err = open_damaged(buf, sign, &d);
		cr_expect_eq(err, t[i].err, "%s: %d (%s)", t[i].what, err,
			     d.msg);
		cr_expect(strstr(d.msg, SHARD_NAME), "%s: message \"%s\"",
			  t[i].what, d.msg);
		cr_expect(strstr(d.msg, t[i].needle), "%s: message \"%s\"",
			  t[i].what, d.msg);
	}
	free(buf);
}

Test(corrupt, not_a_shard, .init = setup, .fini = teardown)
{
	static const size_t sizes[] = { 0, 7, 8, 159, 160, 4096 };
	unsigned char junk[4096];
	uint64_t s = 99;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)ut_rand(&s);
	for (size_t i = 0; i < NELEM(sizes); i++) {
		struct shard *sh = NULL;
		struct diag d = { "" };

		rewrite(tmp_fd, junk, sizes[i]);
		cr_expect_lt(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0,
			     "%zu random bytes opened", sizes[i]);
		cr_expect(strstr(d.msg, SHARD_NAME), "%s", d.msg);
	}
}

/* ---------------------------------------------------------- footer size */

/*
 * What a footer claims: the trailer's footer size and record count, and
 * the footer head's field count, record count and index offset.
 */
struct claim {
	const char *what;
	uint64_t region; /* bytes of records (left sparse) */
	uint64_t fsize, count;
	uint32_t nf;
	uint64_t head_count, ioff;
	int err;
	const char *needle; /* in the message, besides name, offset, size */
};

/*
 * A shard file with a valid header and trailer around a sparse record
 * region and a sparse footer whose head says what c says. The file costs
 * a few blocks whatever size it claims. Returns the footer's offset.
 */
static uint64_t write_claim(const struct claim *c)
{
	unsigned char hdr[SHARD_HEADER_SIZE] = { 0 };
	unsigned char head[SHARD_FOOTER_HEAD] = { 0 };
	unsigned char tr[SHARD_TRAILER_SIZE] = { 0 };
	uint64_t foff = SHARD_HEADER_SIZE + c->region;
	uint64_t size = foff + c->fsize + SHARD_TRAILER_SIZE;

	memcpy(hdr, SHARD_MAGIC, 8);
	put32(hdr + 8, SHARD_VERSION);
	put32(hdr + 12, SHARD_HEADER_SIZE);
	put64(hdr + 56, XXH3_64bits(hdr, 56));
	put32(head, c->nf);
	put32(head + 4, SHARD_FIELD_DESC);
	put32(head + 8, SHARD_INDEX_ENTRY);
	put64(head + 16, c->head_count);
	put64(head + 24, c->ioff);
	put64(tr, foff);
	put64(tr + 8, c->fsize);
	put64(tr + 16, c->count);
	put32(tr + 32, SHARD_VERSION);
	put64(tr + 48, XXH3_64bits(tr, 48));
	memcpy(tr + 56, SHARD_MAGIC, 8);
	cr_assert_eq(ftruncate(tmp_fd, 0), 0);
	cr_assert_eq(ftruncate(tmp_fd, (off_t)size), 0, "%s: %s", c->what,
		     strerror(errno));
	cr_assert_eq(pwrite(tmp_fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	cr_assert_eq(pwrite(tmp_fd, head, sizeof(head), (off_t)foff),
		     (ssize_t)sizeof(head));
	cr_assert_eq(pwrite(tmp_fd, tr, sizeof(tr),
			    (off_t)(size - SHARD_TRAILER_SIZE)),
		     (ssize_t)sizeof(tr));
	return foff;
}

/*
 * A footer's size comes from the file: one that claims more than the
 * bounds allow, or more than its own index, is refused before it is
 * allocated and read. Had it been read, the footer checksum (left zero
 * here) would have failed instead, after allocating all of it.
 */
Test(footer, size_bounded_by_index, .init = setup, .fini = teardown)
{
	const uint64_t big = SHARD_MAX_RECORDS + 1ull;
	const uint64_t pre1 = SHARD_FOOTER_HEAD + SHARD_FIELD_DESC;
	const struct claim t[] = {
		{ "1 GiB footer, no records", 0, 1ull << 30, 0, 1, 0, pre1,
		  LOADER_ETOOBIG, "at most" },
		{ "4 GiB footer, records to fill it", 1ull << 32, 4ull << 30,
		  (4ull << 30) / SHARD_INDEX_ENTRY, 1,
		  (4ull << 30) / SHARD_INDEX_ENTRY, pre1, LOADER_ETOOBIG,
		  "at most 16777216" },
		{ "one record more than a shard holds", big * 4,
		  pre1 + big * SHARD_INDEX_ENTRY, big, 1, big, pre1,
		  LOADER_ETOOBIG, "16777217 records" },
		{ "footer longer than its index", 40 * 10, 1u << 20, 10, 1, 10,
		  pre1, LOADER_ERANGE, "does not match its index" },
		{ "footer shorter than its index", 40 * 1000, pre1 + 24 * 999,
		  1000, 1, 1000, pre1, LOADER_ERANGE,
		  "does not match its index" },
		{ "head and trailer count differ", 40 * 10, pre1 + 24 * 10, 10,
		  1, 11, pre1, LOADER_ERANGE, "does not match its index" },
		{ "index inside the descriptors", 40 * 10, 64 + 24 * 10, 10, 1,
		  10, 64, LOADER_ERANGE, "does not match its index" },
		{ "index after too many dictionary bytes", 40 * 10,
		  pre1 + 8 + SHARD_MAX_DICT_BYTES + 8 + 24 * 10, 10, 1, 10,
		  pre1 + 8 + SHARD_MAX_DICT_BYTES + 8, LOADER_ERANGE,
		  "does not match its index" },
		{ "no fields", 40 * 10, pre1 + 24 * 10, 10, 0, 10, pre1,
		  LOADER_ESCHEMA, "0 fields" },
		{ "more records than the record bytes hold", 100,
		  SHARD_FOOTER_HEAD + 2 * SHARD_FIELD_DESC + 24 * 1000, 1000, 2,
		  1000, SHARD_FOOTER_HEAD + 2 * SHARD_FIELD_DESC, LOADER_ERANGE,
		  "at least 8 bytes" },
	};

	for (size_t i = 0; i < NELEM(t); i++) {
		struct shard *sh = NULL;
		struct diag d = { "" };
		char off[48], size[48];
		uint64_t foff = write_claim(&t[i]);
		int err;

		err = shard_open(&sh, tmp_fd, SHARD_NAME, &d);
		shard_close(sh);
		snprintf(off, sizeof(off), "offset %" PRIu64, foff);
		snprintf(size, sizeof(size), "footer of %" PRIu64 " bytes",
			 t[i].fsize);
		cr_expect_eq(err, t[i].err, "%s: %d (%s)", t[i].what, err,
			     d.msg);
		cr_expect(strstr(d.msg, SHARD_NAME) && strstr(d.msg, off) &&
				  strstr(d.msg, size),
			  "%s: message \"%s\" lacks the file, %s or %s",
			  t[i].what, d.msg, off, size);
		cr_expect(strstr(d.msg, t[i].needle), "%s: message \"%s\"",
			  t[i].what, d.msg);
	}
}

/* The writer keeps within the bounds that readers check. */
Test(footer, writer_bounds_dictionaries, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "a: bytes zstd 3 dict",
					 "b: bytes zstd 3 dict" };
	size_t half = SHARD_MAX_DICT_BYTES / 2;
	struct shard_dict dicts[2];
	struct shard_writer *w = NULL;
	struct schema s;
	struct diag d = { "" };
	unsigned char *buf = calloc(1, half + 1);
	int err;

	cr_assert_not_null(buf);
	parse_schema(&s, t, 2);
	dicts[0] = (struct shard_dict){ buf, half };
	dicts[1] = (struct shard_dict){ buf, half + 1 };
	err = shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, dicts, &d);
	cr_expect_eq(err, LOADER_ETOOBIG, "%d: %s", err, d.msg);
	cr_expect(strstr(d.msg, SHARD_NAME) && strstr(d.msg, "field b"), "%s",
		  d.msg);
	dicts[1].len = half;
	diag_clear(&d);
	cr_expect_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, dicts, &d), 0,
		     "%s", d.msg);
	shard_writer_free(w);
	free(buf);
}

/* ---------------------------------------------------------------- verify */

struct progress {
	uint64_t bytes, calls;
};

static void on_progress(void *arg, uint64_t bytes)
{
	struct progress *p = arg;

	p->bytes += bytes;
	p->calls++;
}

/* A record larger than verify's read chunk still gets read whole. */
Test(verify, large_record_and_progress, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "blob: bytes", "l: int64" };
	static const size_t sizes[] = { 1000, 9u << 20, 10, 0, 3u << 20 };
	struct progress p = { 0 };
	struct verify_opts o = { .decode = true,
				 .progress = on_progress,
				 .arg = &p };
	struct verify_stats st = { 0 };
	struct shard_writer *w = NULL;
	struct verify_ctx *vc = NULL;
	struct shard *sh = NULL;
	unsigned char *blob = malloc(9u << 20);
	struct schema s;
	struct diag d = { "" };
	uint64_t begin, end;

	cr_assert_not_null(blob);
	memset(blob, 'x', 9u << 20);
	parse_schema(&s, t, NELEM(t));
	cr_assert_eq(shard_writer_new(&w, tmp_fd, SHARD_NAME, &s, NULL, &d), 0);
	for (size_t i = 0; i < NELEM(sizes); i++) {
		int64_t label = (int64_t)i;
		struct shard_field f[2] = {
			{ blob, (uint32_t)sizes[i], sizes[i] },
			{ &label, 8, 8 },
		};

		cr_assert_eq(shard_writer_add(w, f, &d), 0, "%s", d.msg);
	}
	cr_assert_eq(shard_writer_finish(w, &d), 0, "%s", d.msg);
	shard_writer_free(w);

	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	cr_assert_eq(verify_ctx_new(&vc), 0);
	cr_expect_eq(verify_shard(vc, sh, tmp_fd, &o, &st, &d), 0, "%s", d.msg);
	shard_data_range(sh, &begin, &end);
	cr_expect_eq(st.records, NELEM(sizes));
	cr_expect_eq(st.bad, 0);
	cr_expect_eq(st.bytes, end - begin);
	cr_expect_eq(p.bytes, st.bytes);
	cr_expect_geq(p.calls, 2, "one chunk cannot hold 12 MiB");

	/* Stats add up across shards. */
	cr_expect_eq(verify_shard(vc, sh, tmp_fd, &o, &st, &d), 0);
	cr_expect_eq(st.records, 2 * NELEM(sizes));
	verify_ctx_free(vc);
	shard_close(sh);
	free(blob);
}

/* A read error stops the scan and is returned, naming the file. */
Test(verify, io_error_stops_scan, .init = setup, .fini = teardown)
{
	static const char *const t[] = { "b: bytes" };
	struct verify_opts o = { .decode = true };
	struct verify_stats st = { 0 };
	struct verify_ctx *vc = NULL;
	struct shard *sh = NULL;
	struct schema s;
	struct written wr;
	struct diag d = { "" };
	int err;

	parse_schema(&s, t, 1);
	write_shard(tmp_fd, &s, 8, &wr);
	cr_assert_eq(shard_open(&sh, tmp_fd, SHARD_NAME, &d), 0, "%s", d.msg);
	/* The file shrinks under the open shard. */
	cr_assert_eq(ftruncate(tmp_fd, 100), 0);
	cr_assert_eq(verify_ctx_new(&vc), 0);
	err = verify_shard(vc, sh, tmp_fd, &o, &st, &d);
	cr_expect_eq(err, LOADER_ETRUNC, "%d: %s", err, d.msg);
	cr_expect(strstr(d.msg, SHARD_NAME), "%s", d.msg);
	verify_ctx_free(vc);
	shard_close(sh);
}
