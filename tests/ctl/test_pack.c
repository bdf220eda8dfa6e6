/*
 * test_pack.c - the pack engine (ctl/pack.c) through its API: IDX
 * splits written in the test, and a small ImageFolder of JPEGs made with
 * TurboJPEG, packed into a temporary directory. Checks the manifests,
 * the record counts of the shards, the progress events, the refusals
 * (existing dataset, unknown split, parameters out of range) and that a
 * stopped or failed pack leaves no shard behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include "dataset.h"
#include "diag.h"
#include "jrst.h"
#include "loader_error.h"
#include "pack.h"
#include "shard.h"
#include "source.h"
#include "../unit_util.h"
#include "../ut_jpeg.h"

#define NTRAIN 12
#define NTEST  5

static char tmp[4096];

/* What the progress callback saw; stop_at > 0 stops the pack there. */
struct seen {
	unsigned begin, sample, skip, done, as_is;
	uint64_t last_total;
	struct pack_stats stats; /* of the last PACK_DONE */
	uint64_t stop_at;
};

static int count_events(const struct pack_progress *pg, void *arg)
{
	struct seen *s = arg;

	switch (pg->event) {
	case PACK_BEGIN:
		s->begin++;
		s->last_total = pg->total;
		cr_expect_eq(pg->done, 0);
		break;
	case PACK_SAMPLE: s->sample++; break;
	case PACK_SKIP:
		s->skip++;
		cr_expect_not_null(pg->msg);
		break;
	case PACK_ASIS:
		s->as_is++;
		cr_expect_not_null(pg->msg);
		break;
	case PACK_DONE:
		s->done++;
		cr_assert_not_null(pg->stats);
		s->stats = *pg->stats;
		break;
	case PACK_NOTE: /* what became of a leftover: not counted here */
		cr_expect_not_null(pg->msg);
		break;
	}
	if (s->stop_at && pg->event == PACK_SAMPLE && pg->done == s->stop_at)
		return -ECANCELED;
	return 0;
}

static void path_in(char *buf, size_t n, const char *rel)
{
	snprintf(buf, n, "%s/%s", tmp, rel);
}

static void write_file(const char *rel, const void *data, size_t len)
{
	char path[4200];
	FILE *f;

	path_in(path, sizeof(path), rel);
	f = fopen(path, "wb");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* An IDX pair PREFIX-images-idx3-ubyte / PREFIX-labels-idx1-ubyte in idx/. */
static void write_idx(const char *prefix, unsigned n)
{
	size_t ilen = 16 + (size_t)n * UT_DIGIT_SIZE, llen = 8 + n;
	unsigned char *img = malloc(ilen), *lab = malloc(llen);
	char rel[256];

	cr_assert(img && lab);
	memcpy(img, "\0\0\x08\x03", 4);
	put_be32(img + 4, n);
	put_be32(img + 8, UT_DIGIT_SIDE);
	put_be32(img + 12, UT_DIGIT_SIDE);
	memcpy(lab, "\0\0\x08\x01", 4);
	put_be32(lab + 4, n);
	for (unsigned i = 0; i < n; i++) {
		ut_digit(img + 16 + (size_t)i * UT_DIGIT_SIZE, i);
		lab[8 + i] = (unsigned char)(i % 10);
	}
	snprintf(rel, sizeof(rel), "idx/%s-images-idx3-ubyte", prefix);
	write_file(rel, img, ilen);
	snprintf(rel, sizeof(rel), "idx/%s-labels-idx1-ubyte", prefix);
	write_file(rel, lab, llen);
	free(img);
	free(lab);
}

/* A 48x32 JPEG at rel. */
static void write_jpeg(const char *rel, unsigned seed)
{
	unsigned char px[48 * 32 * 3], *jpg = NULL;
	unsigned long len = 0;
	tjhandle tj = tjInitCompress();

	cr_assert_not_null(tj);
	ut_picture(px, 48, 32, 3, seed);
	cr_assert_eq(tjCompress2(tj, px, 48, 0, 32, TJPF_RGB, &jpg, &len,
				 TJSAMP_420, 90, 0),
		     0, "%s", tjGetErrorStr2(tj));
	write_file(rel, jpg, len);
	tjFree(jpg);
	tjDestroy(tj);
}

static void mkdir_in(const char *rel)
{
	char path[4200];

	path_in(path, sizeof(path), rel);
	cr_assert_eq(mkdir(path, 0777), 0, "%s: %s", path, strerror(errno));
}

static void setup(void)
{
	ut_tmpl(tmp, sizeof(tmp), "test_pack");
	cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
	mkdir_in("idx");
	write_idx("train", NTRAIN);
	write_idx("t10k", NTEST);
	mkdir_in("img");
	mkdir_in("img/cat");
	mkdir_in("img/dog");
	write_jpeg("img/cat/1.jpg", 1);
	write_jpeg("img/cat/2.jpg", 2);
	write_jpeg("img/dog/1.jpg", 3);
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Parameters as loaderctl pack's defaults, for the source rel. */
static struct pack_params params(const char *rel, const char *out,
				 struct seen *s, char *src, char *dst)
{
	path_in(src, 4200, rel);
	path_in(dst, 4200, out);
	return (struct pack_params){
		.format = pack_source_find("auto", src),
		.src = src,
		.outdir = dst,
		.shard_size = 256u << 20,
		.compress = PACK_COMPRESS_NONE,
		.level = 3,
		.dict_size = 112u << 10,
		.shuffle = -1,
		.quality = 90,
		.progress = count_events,
		.arg = s,
	};
}

/*
 * Load the dataset in rel and check it: records in the manifest, and the
 * sum of the shards' own record counts. Returns its shard count.
 */
static uint32_t check_dataset(const char *rel, uint64_t records)
{
	char dir[4200];
	struct dataset *ds = NULL;
	struct diag d = { { 0 } };
	uint64_t sum = 0;
	uint32_t n;

	path_in(dir, sizeof(dir), rel);
	cr_assert_eq(dataset_load(&ds, dir, &d), 0, "%s", d.msg);
	cr_expect_eq(ds->records, records, "%s: %llu records", rel,
		     (unsigned long long)ds->records);
	for (uint32_t i = 0; i < ds->nshards; i++) {
		struct shard *sh = NULL;
		int fd = -1;

		cr_assert_eq(dataset_open_shard(ds, i, &fd, &sh, &d), 0, "%s",
			     d.msg);
		cr_expect_eq(shard_count(sh), ds->shards[i].records);
		sum += shard_count(sh);
		shard_close(sh);
		close(fd);
	}
	cr_expect_eq(sum, records);
	n = ds->nshards;
	dataset_free(ds);
	return n;
}

/* True if rel holds no shard and no manifest. */
static bool no_dataset(const char *rel)
{
	char path[4200];

	path_in(path, sizeof(path), rel);
	strcat(path, "/" DSFILES_MANIFEST);
	if (!access(path, F_OK))
		return false;
	path_in(path, sizeof(path), rel);
	strcat(path, "/shard-00000.lds");
	return access(path, F_OK) != 0;
}

Test(pack, source_find, .init = setup, .fini = teardown)
{
	char idx[4200], img[4200];

	path_in(idx, sizeof(idx), "idx");
	path_in(img, sizeof(img), "img");
	cr_expect_eq(pack_source_find("idx", "/nonexistent"), &source_idx_ops);
	cr_expect_eq(pack_source_find("tar", idx), &source_tar_ops);
	cr_expect_eq(pack_source_find("auto", idx), &source_idx_ops);
	cr_expect_eq(pack_source_find(NULL, img), &source_folder_ops);
	cr_expect_null(pack_source_find("nope", idx));
	cr_expect_null(pack_source_find("auto", "/nonexistent"));
}

/* Both IDX splits, small shards: counts in manifests, shards and events. */
Test(pack, idx_splits, .init = setup, .fini = teardown)
{
	char src[4200], dst[4200];
	struct seen s = { 0 };
	struct pack_params p = params("idx", "out", &s, src, dst);
	struct diag d = { { 0 } };

	p.shard_size = PACK_SHARD_SIZE_MIN;
	cr_assert_eq(pack_run(&p, &d), 0, "%s", d.msg);
	cr_expect_eq(s.begin, 2);
	cr_expect_eq(s.done, 2);
	cr_expect_eq(s.sample, NTRAIN + NTEST);
	cr_expect_eq(s.skip, 0);
	/* Splits come sorted: test, then train. */
	cr_expect_eq(s.last_total, NTRAIN);
	cr_expect_eq(s.stats.records, NTRAIN);
	cr_expect_eq(check_dataset("out/test", NTEST), 2);
	/* About 800 bytes a record: four to a 4 KiB shard. */
	cr_expect_eq(check_dataset("out/train", NTRAIN), 3);
	cr_expect_eq(s.stats.shards, 3);
	cr_expect_gt(s.stats.bytes_out, (uint64_t)NTRAIN * UT_DIGIT_SIZE);
}

Test(pack, zstd_one_split, .init = setup, .fini = teardown)
{
	char src[4200], dst[4200], dir[4200];
	struct seen s = { 0 };
	struct pack_params p = params("idx", "out", &s, src, dst);
	struct diag d = { { 0 } };
	struct dataset *ds = NULL;

	p.split = "test";
	p.compress = PACK_COMPRESS_ZSTD;
	p.shuffle = 7;
	cr_assert_eq(pack_run(&p, &d), 0, "%s", d.msg);
	cr_expect_eq(s.begin, 1);
	cr_expect_eq(s.sample, NTEST);
	cr_expect_eq(check_dataset("out/test", NTEST), 1);
	cr_expect(no_dataset("out/train"));
	path_in(dir, sizeof(dir), "out/test");
	cr_assert_eq(dataset_load(&ds, dir, &d), 0, "%s", d.msg);
	cr_expect_eq(ds->schema.f[0].comp, COMP_ZSTD);
	cr_expect_eq(ds->origin.shuffle_seed, 7);
	dataset_free(ds);

	p.split = "valid";
	memset(&s, 0, sizeof(s));
	cr_expect_eq(pack_run(&p, &d), -ENOENT);
	cr_expect(strstr(d.msg, "has no split \"valid\""), "%s", d.msg);
	cr_expect_eq(s.begin, 0);
}

Test(pack, folder_skip_bad, .init = setup, .fini = teardown)
{
	char src[4200], dst[4200];
	struct seen s = { 0 };
	struct pack_params p = params("img", "out", &s, src, dst);
	struct diag d = { { 0 } };

	write_file("img/dog/2.jpg", "not a jpeg", 10);
	cr_assert_lt(pack_run(&p, &d), 0);
	cr_expect(strstr(d.msg, "2.jpg"), "%s", d.msg);
	cr_expect(no_dataset("out"));
	cr_expect_eq(s.done, 0);

	memset(&s, 0, sizeof(s));
	p.skip_bad = true;
	cr_assert_eq(pack_run(&p, &d), 0, "%s", d.msg);
	cr_expect_eq(s.begin, 1);
	cr_expect_eq(s.sample, 3);
	cr_expect_eq(s.skip, 1);
	cr_expect_eq(s.stats.skipped, 1);
	cr_expect_eq(check_dataset("out", 3), 1);
}

Test(pack, refuses_existing_dataset, .init = setup, .fini = teardown)
{
	char src[4200], dst[4200];
	struct seen s = { 0 };
	struct pack_params p = params("img", "out", &s, src, dst);
	struct diag d = { { 0 } };

	cr_assert_eq(pack_run(&p, &d), 0, "%s", d.msg);
	cr_expect_eq(pack_run(&p, &d), -EEXIST);
	cr_expect(strstr(d.msg, "already holds a dataset"), "%s", d.msg);
	p.force = true;
	cr_expect_eq(pack_run(&p, &d), 0, "%s", d.msg);
	cr_expect_eq(check_dataset("out", 3), 1);
}

/* A callback that stops the pack: its code comes back, no shard stays. */
Test(pack, callback_stops, .init = setup, .fini = teardown)
{
	char src[4200], dst[4200];
	struct seen s = { .stop_at = 5 };
	struct pack_params p = params("idx", "out", &s, src, dst);
	struct diag d = { { 0 } };

	p.split = "train";
	p.shard_size = PACK_SHARD_SIZE_MIN;
	cr_expect_eq(pack_run(&p, &d), -ECANCELED);
	cr_expect_eq(s.sample, 5);
	cr_expect_eq(s.done, 0);
	cr_expect(no_dataset("out/train"));
	path_in(src, sizeof(src), "out/train/shard-00001.lds");
	cr_expect_neq(access(src, F_OK), 0);
}

Test(pack, bad_params, .init = setup, .fini = teardown)
{
	static const struct {
		const char *what;
		uint64_t shard_size, dict_size, quality, max_side;
		int level;
	} bad[] = {
		{ "shard size", 4095, 1024, 90, 0, 3 },
		{ "dict size", 4096, 1023, 90, 0, 3 },
		{ "quality 0", 4096, 1024, 0, 0, 3 },
		{ "quality 101", 4096, 1024, 101, 0, 3 },
		{ "max side", 4096, 1024, 90, 65536, 3 },
		{ "level 0", 4096, 1024, 90, 0, 0 },
		{ "level 23", 4096, 1024, 90, 0, 23 },
	};

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		char src[4200], dst[4200];
		struct seen s = { 0 };
		struct pack_params p = params("img", "out", &s, src, dst);
		struct diag d = { { 0 } };

		p.shard_size = bad[k].shard_size;
		p.dict_size = bad[k].dict_size;
		p.quality = bad[k].quality;
		p.max_side = bad[k].max_side;
		p.level = bad[k].level;
		cr_expect_eq(pack_run(&p, &d), LOADER_EUSAGE, "%s accepted",
			     bad[k].what);
		cr_expect_eq(s.begin, 0, "%s", bad[k].what);
	}
	cr_expect(no_dataset("out"));
}

/* ------------------------------------------------ JPEG restart segments */

/* TurboJPEG's full decode to pixel format pf (malloc'd), *n bytes. */
static unsigned char *full_rgb(const void *jpg, size_t len, int pf, size_t *n)
{
	tjhandle tj = tjInitDecompress();
	int w, h, sub, cs;
	unsigned char *px;

	cr_assert_not_null(tj);
	cr_assert_eq(tjDecompressHeader3(tj, jpg, (unsigned long)len, &w, &h,
					 &sub, &cs),
		     0, "%s", tjGetErrorStr2(tj));
	*n = (size_t)w * h * (size_t)tjPixelSize[pf];
	px = malloc(*n);
	cr_assert_not_null(px);
	cr_assert_eq(tjDecompress2(tj, jpg, (unsigned long)len, px, w, 0, h, pf,
				   TJFLAG_STOPONWARNING),
		     0, "%s", tjGetErrorStr2(tj));
	tjDestroy(tj);
	return px;
}

/*
 * An ImageFolder of every kind of JPEG (4:2:0, 4:4:4, 4:2:2, 4:4:0,
 * gray, progressive, CMYK, odd sizes) packed with restart segments:
 * every record is restart-segmented and its full decode equals the
 * original file's, byte for byte; the manifest and the summary count
 * them. An arithmetic-coded file is stored as it was, and said so.
 */
Test(pack, jpeg_restart_round_trip, .init = setup, .fini = teardown)
{
	static const struct {
		int pf, subsamp;
		bool prog;
		unsigned w, h;
	} kinds[] = {
		{ TJPF_RGB, TJSAMP_420, false, 203, 157 },
		{ TJPF_RGB, TJSAMP_444, false, 64, 64 },
		{ TJPF_RGB, TJSAMP_422, false, 99, 31 },
		{ TJPF_RGB, TJSAMP_440, false, 45, 77 },
		{ TJPF_GRAY, TJSAMP_GRAY, false, 30, 200 },
		{ TJPF_RGB, TJSAMP_420, true, 160, 120 },
		{ TJPF_CMYK, TJSAMP_420, false, 50, 40 },
		{ TJPF_RGB, TJSAMP_411, false, 100, 33 },
	};
	enum { NK = sizeof(kinds) / sizeof(kinds[0]) };
	unsigned char *orig[NK + 1];
	size_t orig_len[NK + 1];
	char src[4200], dst[4200], rel[64];
	struct seen s = { 0 };
	struct pack_params p;
	struct diag d = { { 0 } };
	struct dataset *ds = NULL;
	struct shard *sh = NULL;
	uint64_t before = 0, after = 0;
	int fd = -1;

	mkdir_in("kinds");
	mkdir_in("kinds/a");
	for (unsigned k = 0; k <= NK; k++) {
		unsigned w = k < NK ? kinds[k].w : 90,
			 h = k < NK ? kinds[k].h : 60;
		int pf = k < NK ? kinds[k].pf : TJPF_RGB;
		unsigned char *px = malloc((size_t)w * h * 4);

		cr_assert_not_null(px);
		ut_picture(px, w, h, (unsigned)tjPixelSize[pf], 10 + k);
		if (k == NK)
			orig[k] = ut_encode_arith(px, w, h, &orig_len[k]);
		else
			orig[k] = ut_encode_tj(px, (int)w, (int)h, pf,
					       kinds[k].subsamp, kinds[k].prog,
					       &orig_len[k]);
		free(px);
		/* names sort in k order: the records come in that order */
		snprintf(rel, sizeof(rel), "kinds/a/%02u.jpg", k);
		write_file(rel, orig[k], orig_len[k]);
		before += orig_len[k];
	}
	p = params("kinds", "out", &s, src, dst);
	p.jpeg_restart = 1;
	cr_assert_eq(pack_run(&p, &d), 0, "%s", d.msg);
	cr_expect_eq(s.as_is, 1, "one file is arithmetic-coded");
	cr_expect_eq(s.stats.jpeg_transcoded, NK);
	cr_expect_eq(s.stats.jpeg_as_is, 1);
	cr_expect_eq(s.stats.jpeg_bytes_before, before);

	path_in(src, sizeof(src), "out");
	cr_assert_eq(dataset_load(&ds, src, &d), 0, "%s", d.msg);
	cr_expect_eq(ds->origin.jpeg_restart, 1);
	cr_expect_eq(ds->origin.jpeg_transcoded, NK);
	cr_expect_eq(ds->origin.jpeg_as_is, 1);
	cr_expect_eq(ds->origin.jpeg_bytes_before, before);
	cr_assert_eq(dataset_open_shard(ds, 0, &fd, &sh, &d), 0, "%s", d.msg);
	cr_assert_eq(shard_count(sh), NK + 1);
	for (unsigned k = 0; k <= NK; k++) {
		static unsigned char buf[1 << 20];
		struct shard_field f[SCHEMA_MAX_FIELDS];
		struct jrst_map m;
		size_t na, nb;
		unsigned char *a, *b;

		cr_assert_eq(shard_read_record(sh, k, buf, sizeof(buf), f, &d),
			     0, "%s", d.msg);
		after += f[0].len;
		if (k == NK) {
			/* stored as it was, byte for byte */
			cr_expect_eq(f[0].len, orig_len[k]);
			cr_expect_eq(memcmp(f[0].data, orig[k], orig_len[k]),
				     0);
			cr_expect_eq(jrst_parse(f[0].data, f[0].len, &m, NULL),
				     -ENOTSUP);
			continue;
		}
		cr_assert_eq(jrst_parse(f[0].data, f[0].len, &m, &d), 0,
			     "kind %u: %s", k, d.msg);
		cr_expect_eq(m.interval, 1, "kind %u", k);
		cr_expect_eq(jrst_check(&m, f[0].data, f[0].len, &d), 0,
			     "kind %u: %s", k, d.msg);
		a = full_rgb(orig[k], orig_len[k],
			     kinds[k].pf == TJPF_CMYK ? TJPF_CMYK : TJPF_RGB,
			     &na);
		b = full_rgb(f[0].data, f[0].len,
			     kinds[k].pf == TJPF_CMYK ? TJPF_CMYK : TJPF_RGB,
			     &nb);
		cr_assert_eq(na, nb);
		cr_expect_eq(memcmp(a, b, na), 0,
			     "kind %u: pixels differ from the original's", k);
		free(a);
		free(b);
	}
	cr_expect_eq(ds->origin.jpeg_bytes_after, after);
	shard_close(sh);
	close(fd);
	dataset_free(ds);
	for (unsigned k = 0; k <= NK; k++)
		free(orig[k]);
}

/* jpeg_restart 0 stores every JPEG as it was, and says nothing of it. */
Test(pack, jpeg_restart_off, .init = setup, .fini = teardown)
{
	char src[4200], dst[4200];
	struct seen s = { 0 };
	struct pack_params p = params("img", "out", &s, src, dst);
	struct diag d = { { 0 } };
	struct dataset *ds = NULL;

	cr_assert_eq(pack_run(&p, &d), 0, "%s", d.msg);
	cr_expect_eq(s.stats.jpeg_transcoded + s.stats.jpeg_as_is, 0);
	path_in(src, sizeof(src), "out");
	cr_assert_eq(dataset_load(&ds, src, &d), 0, "%s", d.msg);
	cr_expect_eq(ds->origin.jpeg_restart, 0);
	cr_expect_eq(ds->origin.jpeg_transcoded, 0);
	dataset_free(ds);
	p.jpeg_restart = PACK_JPEG_RESTART_MAX + 1;
	p.force = true;
	cr_expect_eq(pack_run(&p, &d), LOADER_EUSAGE);
}
