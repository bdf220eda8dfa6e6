/*
 * ctl_pipeline.c - loaderctl pipeline: check an image pipeline spec, run
 * it on one JPEG, or profile it stage by stage.
 *
 *   SPEC                    check it: canonical text, output dtype, shape
 *                           and bytes per sample;
 *   SPEC IN.jpg OUT.npy     write the sample loaderd would deliver for
 *                           (seed, epoch, index) as a NumPy .npy file;
 *   --profile SPEC DIR      where the time goes: the pipeline's stages on
 *                           one thread over every JPEG under DIR, against
 *                           libjpeg-turbo's full decode of the same files
 *                           (the jpeg codec: the streams' decoder, whole
 *                           images at 8/8, as fast as tjDecompress2()).
 *
 * Everything runs through the modules the daemon uses (ispec, imgpipe,
 * the jpeg codec), so what this prints is what a stream does.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits.h>

#include <jansson.h>

#include "codec.h"
#include "ctl.h"
#include "fdio.h"
#include "imgpipe.h"
#include "imgwrite.h"
#include "ispec.h"
#include "jpgset.h"
#include "jrst.h"
#include "loader_error.h"
#include "npy.h"
#include "opts.h"
#include "progress.h"
#include "rng.h"
#include "schema.h"

#define PFX "loaderctl pipeline: "

/* Longest --profile: a day. */
#define PIPE_SECONDS_MAX 86400.0

struct pipe_cli {
	uint64_t seed, epoch, index, max_pixels;
	const char *seconds, *jpeg_restart;
	uint32_t restart; /* parsed --jpeg-restart; 0: off */
	bool profile, json, explain;
	uint64_t grid; /* samples of a contact sheet; 0: none */
};

#define O(f) offsetof(struct pipe_cli, f)
static const struct opt pipe_table[] = {
	{ "seed", 0, OPT_U64, O(seed), "0", "N",
	  "the stream's seed: the sample seed is rng_mix(N, E, I)", 0, 0, 0 },
	{ "epoch", 0, OPT_U64, O(epoch), "0", "E",
	  "the epoch whose sample to make (and whose values a spec's schedules take)",
	  0, 0, 0 },
	{ "index", 0, OPT_U64, O(index), "0", "I",
	  "the sample's index in the dataset (its id in a batch)", 0, 0, 0 },
	{ "max-pixels", 0, OPT_SIZE, O(max_pixels), "64M", "N",
	  "largest image (width x height) decoded, as loaderd's --max-pixels",
	  0, 0, 0 },
	{ "profile", 0, OPT_FLAG, O(profile), NULL, NULL,
	  "time each stage over every JPEG under DIR, one thread", 0, 0, 0 },
	{ "seconds", 0, OPT_STR, O(seconds), "2", "S",
	  "with --profile: run each part for at least S seconds", 0, 0, 0 },
	{ "jpeg-restart", 0, OPT_STR, O(jpeg_restart), "off", "N|off",
	  "first transcode each JPEG as loaderctl pack --jpeg-restart N stores it (restart segments), to see what a packed dataset decodes like; off: the files as they are",
	  0, 0, 0 },
	{ "explain", 0, OPT_FLAG, O(explain), NULL, NULL,
	  "print what the sample of IN.jpg draws (crop, flip, each colour stage's parameters) instead of making it",
	  0, 0, 0 },
	{ "grid", 0, OPT_U64, O(grid), "0", "N",
	  "write OUT (a .png or .jpg) as a contact sheet of N samples of IN.jpg, indexes I to I + N - 1: its augmented versions, to look at",
	  0, 0, 0 },
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL, "print JSON", 0, 0, 0 },
	OPT_END,
};
#undef O

/* What a spec turns every image into. */
struct pipe_out {
	struct ispec sp;
	char text[ISPEC_TEXT_MAX];
	uint32_t dims[3];
	unsigned ndim;
	size_t bytes;
	/* A spec with schedules: sp is its epoch's; the rest from all. */
	bool sched;
	uint32_t epoch, sched_end, size_max, size_max_epoch;
};

static json_t *out_json(const struct pipe_out *po)
{
	json_t *shape = json_array();

	for (unsigned i = 0; i < po->ndim; i++)
		json_array_append_new(shape, json_integer(po->dims[i]));
	json_t *j = json_pack("{s:s, s:s, s:o, s:I}", "spec", po->text, "dtype",
			      dtype_name(po->sp.dtype), "shape", shape, "bytes",
			      (json_int_t)po->bytes);

	if (po->sched)
		json_object_set_new(
			j, "schedule",
			json_pack("{s:I, s:I, s:I, s:I}", "epoch",
				  (json_int_t)po->epoch, "last_change",
				  (json_int_t)po->sched_end, "size_max",
				  (json_int_t)po->size_max, "size_max_epoch",
				  (json_int_t)po->size_max_epoch));
	return j;
}

/* "f16 [3,224,224]" */
static const char *out_type(const struct pipe_out *po, char *buf, size_t n)
{
	int len = snprintf(buf, n, "%s [", dtype_name(po->sp.dtype));

	for (unsigned i = 0; i < po->ndim && len > 0 && (size_t)len < n; i++)
		len += snprintf(buf + len, n - (size_t)len, "%s%" PRIu32,
				i ? "," : "", po->dims[i]);
	if (len > 0 && (size_t)len < n)
		snprintf(buf + len, n - (size_t)len, "]");
	return buf;
}

/* A uint64 as a JSON integer when it fits one, else as decimal text. */
static json_t *u64_json(uint64_t v)
{
	char buf[24];

	if (v <= INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return json_string(buf);
}

/* Print j and free it; six significant digits are plenty for timings. */
static void print_json(json_t *j)
{
	json_dumpf(j, stdout,
		   JSON_INDENT(2) | JSON_PRESERVE_ORDER |
			   JSON_REAL_PRECISION(6));
	printf("\n");
	json_decref(j);
}

/*
 * The spec of text, as a stream gives it to the samples of epoch: every
 * epoch's values checked, those of epoch kept.
 */
static int parse_spec(const char *text, uint32_t epoch, struct pipe_out *po)
{
	struct diag d;

	if (ispec_parse(&po->sp, text, &d)) {
		fprintf(stderr, PFX "%s\n", d.msg);
		return CTL_FAIL;
	}
	po->sched = po->sp.sched || po->sp.at;
	po->epoch = epoch;
	po->sched_end = po->sp.sched_end;
	po->size_max = po->sp.size_max;
	po->size_max_epoch = po->sp.size_max_epoch;
	if (po->sched && ispec_parse_epoch(&po->sp, text, epoch, &d)) {
		fprintf(stderr, PFX "%s\n", d.msg);
		return CTL_FAIL;
	}
	ispec_format(&po->sp, po->text, sizeof(po->text));
	/*
	 * Batch stages mix a sample with another of its batch: one image
	 * has no batch. They are checked and shown in the spec, not run.
	 */
	if (po->sp.batch.on)
		fprintf(stderr,
			PFX "note: the batch stages (mixup, cutmix, switch, "
			    "pair, label_smoothing, classes) act on a stream's "
			    "batches; one image is made without them\n");
	po->ndim = ispec_out_shape(&po->sp, po->dims);
	po->bytes = ispec_out_bytes(&po->sp);
	return CTL_OK;
}

/* Make a pipeline and one worker state for it; messages name nothing. */
static int make_pipe(const struct pipe_out *po, uint64_t max_pixels,
		     bool timing, struct imgpipe **ip, struct imgpipe_ws **ws)
{
	struct diag d;
	int err;

	*ws = NULL;
	err = imgpipe_new(ip, &po->sp, max_pixels, &d);
	if (err) {
		fprintf(stderr, PFX "%s\n",
			err == LOADER_EUSAGE ? d.msg : strerror(-err));
		return CTL_FAIL;
	}
	err = imgpipe_ws_new(*ip, timing, ws);
	if (err) {
		fprintf(stderr, PFX "%s\n", strerror(-err));
		imgpipe_free(*ip);
		*ip = NULL;
		return CTL_FAIL;
	}
	return CTL_OK;
}

/*
 * The JPEG in src[0..len) as loaderctl pack --jpeg-restart restart
 * stores it: transcoded to restart segments, or as it is when it cannot
 * be (as pack does, saying why). *out is malloc'd. Returns CTL_OK or
 * CTL_FAIL (out of memory).
 */
static int restart_copy(struct jrst_enc *e, uint32_t restart,
			const unsigned char *src, size_t len, const char *path,
			unsigned char **out, size_t *out_len)
{
	struct jrst_params p = { restart, true };
	const unsigned char *o;
	struct diag d;
	int err;

	err = jrst_transcode(e, src, len, &p, &o, out_len, &d);
	if (err == -ENOMEM) {
		fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
		return CTL_FAIL;
	}
	if (err) {
		fprintf(stderr,
			PFX
			"%s: stored as it is, without restart segments: %s\n",
			path, d.msg);
		o = src;
		*out_len = len;
	}
	*out = malloc(*out_len ? *out_len : 1);
	if (!*out) {
		fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
		return CTL_FAIL;
	}
	memcpy(*out, o, *out_len);
	return CTL_OK;
}

/* --- SPEC IN.jpg OUT.npy ------------------------------------------------ */

/* The NumPy kind of a pipeline output's dtype (ispec emits native floats). */
static const struct {
	uint8_t dtype;
	char kind;
} npy_kinds[] = {
	{ DT_U8, 'u' },
	{ DT_F16, 'f' },
	{ DT_F32, 'f' },
};

#define NPY_HDR_MAX 256

/*
 * Write a .npy header for po into hdr; returns its length, or 0 for a
 * dtype .npy cannot name here.
 */
static size_t npy_header(const struct pipe_out *po, unsigned char *hdr)
{
	for (size_t i = 0; i < sizeof(npy_kinds) / sizeof(npy_kinds[0]); i++)
		if (npy_kinds[i].dtype == po->sp.dtype)
			return npy_write_header(
				npy_kinds[i].kind,
				(uint32_t)dtype_size(po->sp.dtype), po->dims,
				po->ndim, hdr, NPY_HDR_MAX + 64);
	return 0;
}

/*
 * Write header and data to path (the .npy of a sample, the bytes of a
 * contact sheet). A regular file (or none) is written as
 * a new file beside it and renamed over it, so that a failure leaves what
 * was there and removes only the new file; anything else (a device, a
 * FIFO: /dev/stdout) is written as it is and never removed.
 */
static int write_out(const char *path, const unsigned char *hdr, size_t hdr_len,
		     const void *data, size_t len)
{
	char tmp[PATH_MAX];
	struct stat st;
	bool direct = !stat(path, &st) && !S_ISREG(st.st_mode);
	int fd, err;

	if (direct) {
		fd = open(path, O_WRONLY | O_CLOEXEC);
	} else if (snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path) >=
		   (int)sizeof(tmp)) {
		fd = -1;
		errno = ENAMETOOLONG;
	} else {
		mode_t mask = umask(0);

		umask(mask);
		/* mkostemp() makes it private; give it open()'s mode. */
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd >= 0)
			fchmod(fd, 0666 & ~mask);
	}
	if (fd < 0) {
		err = -errno;
		goto fail;
	}
	err = fdio_write_all(fd, hdr, hdr_len);
	if (!err)
		err = fdio_write_all(fd, data, len);
	if (close(fd) && !err)
		err = -errno;
	if (!err && !direct && rename(tmp, path))
		err = -errno;
	if (!err)
		return 0;
	if (!direct)
		unlink(tmp);
fail:
	fprintf(stderr, PFX "%s: %s\n", path, strerror(-err));
	return err;
}

/* The seed a stream gives sample index + i of epoch: order_seed_at(). */
static uint64_t sample_seed(const struct pipe_cli *o, uint64_t i)
{
	return rng_mix(o->seed, (uint32_t)o->epoch, o->index + i);
}

/*
 * The pipeline of po, one worker's state and the file in: what a run, an
 * explanation and a grid start from. On failure, says why and leaves
 * nothing to free.
 */
static int load_one(const struct pipe_cli *o, const struct pipe_out *po,
		    const char *in, struct imgpipe **ip, struct imgpipe_ws **ws,
		    unsigned char **jpeg, size_t *len)
{
	struct diag d;

	*jpeg = NULL;
	if (make_pipe(po, o->max_pixels, false, ip, ws))
		return CTL_FAIL;
	if (jpgset_read(in, jpeg, len, &d)) {
		fprintf(stderr, PFX "%s\n", d.msg);
		imgpipe_ws_free(*ws);
		imgpipe_free(*ip);
		*ws = NULL;
		*ip = NULL;
		return CTL_FAIL;
	}
	return CTL_OK;
}

static int pipe_run(const struct pipe_cli *o, const struct pipe_out *po,
		    const char *in, const char *out)
{
	unsigned char hdr[NPY_HDR_MAX + 64], *jpeg = NULL;
	struct imgpipe *ip = NULL;
	struct imgpipe_ws *ws = NULL;
	void *sample = NULL;
	struct diag d;
	char type[64];
	size_t len, hdr_len;
	uint64_t seed;
	int rc = CTL_FAIL, err;

	hdr_len = npy_header(po, hdr);
	if (!hdr_len) {
		fprintf(stderr, PFX "no .npy type for %s\n",
			dtype_name(po->sp.dtype));
		return CTL_FAIL;
	}
	if (load_one(o, po, in, &ip, &ws, &jpeg, &len))
		return CTL_FAIL;
	if (o->restart) {
		struct jrst_enc *e = NULL;
		unsigned char *copy = NULL;

		if (jrst_enc_new(&e, o->max_pixels)) {
			fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
			goto out;
		}
		err = restart_copy(e, o->restart, jpeg, len, in, &copy, &len);
		jrst_enc_free(e);
		if (err)
			goto out;
		free(jpeg);
		jpeg = copy;
	}
	sample = malloc(po->bytes);
	if (!sample) {
		fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
		goto out;
	}
	seed = sample_seed(o, 0);
	err = imgpipe_run(ip, ws, jpeg, len, seed, sample, &d);
	if (err) {
		fprintf(stderr, PFX "%s: %s\n", in,
			err == -ENOMEM ? strerror(ENOMEM) : d.msg);
		goto out;
	}
	if (write_out(out, hdr, hdr_len, sample, po->bytes))
		goto out;
	if (o->json) {
		json_t *j = out_json(po);

		json_object_set_new(j, "input", json_string(in));
		json_object_set_new(j, "output", json_string(out));
		json_object_set_new(j, "seed", u64_json(o->seed));
		json_object_set_new(j, "epoch", u64_json(o->epoch));
		json_object_set_new(j, "index", u64_json(o->index));
		snprintf(type, sizeof(type), "0x%016" PRIx64, seed);
		json_object_set_new(j, "sample_seed", json_string(type));
		json_object_set_new(
			j, "file_bytes",
			json_integer((json_int_t)(hdr_len + po->bytes)));
		print_json(j);
	} else {
		printf("%s: %s, %zu bytes (seed %" PRIu64 ", epoch %" PRIu64
		       ", index %" PRIu64 ")\n",
		       out, out_type(po, type, sizeof(type)),
		       hdr_len + po->bytes, o->seed, o->epoch, o->index);
	}
	rc = CTL_OK;
out:
	free(sample);
	free(jpeg);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	return rc;
}

/* --- --grid N SPEC IN.jpg OUT.png ---------------------------------------- */

#define GRID_MAX 256 /* samples on one sheet */
#define GRID_GAP 4   /* white pixels between them */

/*
 * Sample v of output element c as a byte to look at: the value the
 * pipeline wrote, normalize undone, x 255.
 */
static uint8_t grid_byte(const struct ispec *sp, float v, unsigned c)
{
	double x = v;

	if (sp->has_normalize)
		x = x * sp->std[c] + sp->mean[c];
	x = nearbyint(x * 255.0);
	return x <= 0 ? 0 : x >= 255 ? 255 : (uint8_t)x;
}

static int pipe_grid(const struct pipe_cli *o, const struct pipe_out *po,
		     const char *in, const char *out)
{
	struct pipe_out fo = *po;
	struct imgpipe *ip = NULL;
	struct imgpipe_ws *ws = NULL;
	unsigned char *jpeg = NULL, *sheet = NULL;
	void *png = NULL;
	size_t plen = 0;
	float *sample = NULL;
	uint32_t s = po->sp.size, cols, rows, w, h;
	struct diag d;
	size_t len;
	int rc = CTL_FAIL, err;

	if (!imgwrite_named(out)) {
		fprintf(stderr,
			PFX
			"%s: write a .png or a .jpg (the extension says which)\n",
			out);
		return CTL_FAIL;
	}
	if (o->grid > GRID_MAX) {
		fprintf(stderr, PFX "--grid: at most %d samples\n", GRID_MAX);
		return CTL_FAIL;
	}
	/* The samples as f32 nhwc, whatever the spec's own type. */
	fo.sp.dtype = DT_F32;
	fo.sp.layout = ISPEC_NHWC;
	cols = (uint32_t)ceil(sqrt((double)o->grid));
	rows = (uint32_t)((o->grid + cols - 1) / cols);
	w = cols * s + (cols - 1) * GRID_GAP;
	h = rows * s + (rows - 1) * GRID_GAP;
	if ((uint64_t)w * h > 64ull << 20) {
		fprintf(stderr,
			PFX "--grid %" PRIu64
			    " of %u: a %ux%u sheet, too large\n",
			o->grid, s, w, h);
		return CTL_FAIL;
	}
	if (load_one(o, &fo, in, &ip, &ws, &jpeg, &len))
		return CTL_FAIL;
	sample = malloc(ispec_out_bytes(&fo.sp));
	sheet = malloc((size_t)w * h * 3);
	if (!sample || !sheet) {
		fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
		goto out;
	}
	memset(sheet, 255, (size_t)w * h * 3);
	for (uint64_t i = 0; i < o->grid; i++) {
		uint32_t x0 = (uint32_t)(i % cols) * (s + GRID_GAP);
		uint32_t y0 = (uint32_t)(i / cols) * (s + GRID_GAP);

		err = imgpipe_run(ip, ws, jpeg, len, sample_seed(o, i), sample,
				  &d);
		if (err) {
			fprintf(stderr, PFX "%s: %s\n", in,
				err == -ENOMEM ? strerror(ENOMEM) : d.msg);
			goto out;
		}
		for (uint32_t y = 0; y < s; y++)
			for (uint32_t x = 0; x < s; x++)
				for (unsigned c = 0; c < 3; c++)
					sheet[((size_t)(y0 + y) * w + x0 + x) *
						      3 +
					      c] =
						grid_byte(
							&fo.sp,
							sample[((size_t)y * s +
								x) * 3 +
							       c],
							c);
	}
	if (imgwrite_encode(out, sheet, w, h, &png, &plen, &d)) {
		fprintf(stderr, PFX "%s\n", d.msg);
		goto out;
	}
	if (write_out(out, png, plen, NULL, 0))
		goto out;
	printf("%s: %" PRIu64 " samples of %s, %ux%u (%u x %u)\n", out, o->grid,
	       in, w, h, cols, rows);
	rc = CTL_OK;
out:
	free(png);
	free(sheet);
	free(sample);
	free(jpeg);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	return rc;
}

/* --- --explain SPEC IN.jpg ---------------------------------------------- */

static int pipe_explain(const struct pipe_cli *o, const struct pipe_out *po,
			const char *in)
{
	struct imgpipe *ip = NULL;
	struct imgpipe_ws *ws = NULL;
	unsigned char *jpeg = NULL;
	char text[4096];
	struct diag d;
	size_t len;
	int rc = CTL_FAIL, n;

	if (load_one(o, po, in, &ip, &ws, &jpeg, &len))
		return CTL_FAIL;
	n = imgpipe_explain(ip, ws, jpeg, len, sample_seed(o, 0), text,
			    sizeof(text), &d);
	if (n < 0) {
		fprintf(stderr, PFX "%s: %s\n", in, d.msg);
		goto out;
	}
	if (o->json) {
		json_t *j = out_json(po);

		json_object_set_new(j, "input", json_string(in));
		json_object_set_new(j, "seed", u64_json(o->seed));
		json_object_set_new(j, "epoch", u64_json(o->epoch));
		json_object_set_new(j, "index", u64_json(o->index));
		json_object_set_new(j, "drawn", json_string(text));
		print_json(j);
	} else {
		fputs(text, stdout);
	}
	rc = CTL_OK;
out:
	free(jpeg);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	return rc;
}

/* --- --profile SPEC DIR ------------------------------------------------- */

/*
 * One pass of the pipeline over the n files f, pass p being the epoch of
 * the sample seeds. Returns 0, or -1 after naming the file that failed.
 */
static int pipe_pass(const struct pipe_cli *o, const struct jpgset_file *f,
		     size_t n, struct imgpipe *ip, struct imgpipe_ws *ws,
		     void *dst, uint64_t p)
{
	struct diag d;

	for (size_t i = 0; i < n; i++) {
		int err = imgpipe_run(ip, ws, f[i].data, f[i].len,
				      rng_mix(o->seed, p, i), dst, &d);

		if (err) {
			fprintf(stderr, PFX "%s: %s\n", f[i].path,
				err == -ENOMEM ? strerror(ENOMEM) : d.msg);
			return -1;
		}
	}
	return 0;
}

/*
 * One pass of the full decode; the same contract. The jpeg codec is the
 * decoder a stream uses (jroi) on the whole image, which writes rows
 * straight into dst as tjDecompress2() does, so this is libjpeg-turbo's
 * full-decode rate.
 */
static int full_pass(const struct jpgset_file *f, size_t n,
		     struct codec_ctx *ctx, void *dst, size_t cap)
{
	const struct codec_ops *ops = codec_get(CODEC_JPEG);
	struct codec_info info;
	struct diag d;

	for (size_t i = 0; i < n; i++) {
		struct codec_src src = { f[i].data, f[i].len, NULL };

		if (ops->decode(ctx, &src, dst, cap, &info, &d)) {
			fprintf(stderr, PFX "%s: full decode: %s\n", f[i].path,
				d.msg);
			return -1;
		}
	}
	return 0;
}

/* The stages of struct imgpipe_times, in pipeline order. */
static const struct {
	const char *name;
	size_t offset;
} pipe_stages[] = {
	{ "header+params", offsetof(struct imgpipe_times, header_ns) },
	{ "region decode", offsetof(struct imgpipe_times, decode_ns) },
	{ "resize", offsetof(struct imgpipe_times, resize_ns) },
	{ "warp", offsetof(struct imgpipe_times, warp_ns) },
	{ "colour", offsetof(struct imgpipe_times, color_ns) },
	{ "emit", offsetof(struct imgpipe_times, emit_ns) },
	{ "erase", offsetof(struct imgpipe_times, erase_ns) },
};
#define PIPE_NSTAGES (sizeof(pipe_stages) / sizeof(pipe_stages[0]))

static uint64_t stage_ns(const struct imgpipe_times *t, size_t k)
{
	return *(const uint64_t *)((const char *)t + pipe_stages[k].offset);
}

/* What a profile measured. */
struct pipe_prof {
	uint64_t images, wall_ns, stage[PIPE_NSTAGES];
	uint64_t full_images, full_ns;
	uint64_t segment_decodes; /* of images, from restart segments */
	uint32_t restart;	  /* --jpeg-restart: 0, or MCUs a segment */
	uint64_t bytes_before, bytes_after; /* of the files, with restart */
	uint64_t skipped;      /* files that do not decode, left out */
	uint64_t files, bytes; /* those profiled */
};

/* Leave out a file that does not decode, naming it. */
static void skip(struct pipe_prof *p, const char *path, const char *why)
{
	fprintf(stderr, PFX "skipped %s: %s\n", path, why);
	p->skipped++;
}

/* Nanoseconds since start, a progress_now() reading. */
static uint64_t elapsed_ns(double start)
{
	return (uint64_t)((progress_now() - start) * 1e9);
}

static double per_img_us(uint64_t ns, uint64_t images)
{
	return images ? (double)ns / 1e3 / (double)images : 0.0;
}

static double per_s(uint64_t images, uint64_t ns)
{
	return ns ? (double)images * 1e9 / (double)ns : 0.0;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/*
 * The time the stages do not account for: the loop, and the clock reads
 * that timing adds.
 */
static uint64_t other_ns(const struct pipe_prof *p)
{
	uint64_t sum = 0;

	for (size_t k = 0; k < PIPE_NSTAGES; k++)
		sum += p->stage[k];
	return p->wall_ns > sum ? p->wall_ns - sum : 0;
}

static void prof_print_json(const struct pipe_out *po, const char *dir,
			    double seconds, const struct pipe_prof *p)
{
	json_t *j = out_json(po), *st = json_array();
	double pipe_rate = per_s(p->images, p->wall_ns);
	double full_rate = per_s(p->full_images, p->full_ns);
	for (size_t k = 0; k <= PIPE_NSTAGES; k++) {
		uint64_t ns = k < PIPE_NSTAGES ? p->stage[k] : other_ns(p);

		json_array_append_new(
			st, json_pack("{s:s, s:f, s:f}", "stage",
				      k < PIPE_NSTAGES ? pipe_stages[k].name :
							 "other",
				      "us_per_img", per_img_us(ns, p->images),
				      "percent", pct(ns, p->wall_ns)));
	}
	json_object_set_new(j, "dir", json_string(dir));
	json_object_set_new(j, "files", json_integer((json_int_t)p->files));
	json_object_set_new(j, "skipped", json_integer((json_int_t)p->skipped));
	json_object_set_new(j, "mean_file_bytes",
			    json_real((double)p->bytes / (double)p->files));
	json_object_set_new(j, "min_seconds", json_real(seconds));
	json_object_set_new(j, "pipeline",
			    json_pack("{s:I, s:f, s:f, s:f}", "images",
				      (json_int_t)p->images, "seconds",
				      (double)p->wall_ns / 1e9, "img_per_s",
				      pipe_rate, "us_per_img",
				      per_img_us(p->wall_ns, p->images)));
	json_object_set_new(j, "stages", st);
	json_object_set_new(j, "segment_decodes",
			    json_integer((json_int_t)p->segment_decodes));
	if (p->restart)
		json_object_set_new(
			j, "jpeg_restart",
			json_pack("{s:I, s:I, s:I}", "interval",
				  (json_int_t)p->restart, "bytes_before",
				  (json_int_t)p->bytes_before, "bytes_after",
				  (json_int_t)p->bytes_after));
	json_object_set_new(j, "full_decode",
			    json_pack("{s:I, s:f, s:f, s:f}", "images",
				      (json_int_t)p->full_images, "seconds",
				      (double)p->full_ns / 1e9, "img_per_s",
				      full_rate, "us_per_img",
				      per_img_us(p->full_ns, p->full_images)));
	json_object_set_new(
		j, "ratio",
		json_real(full_rate > 0 ? pipe_rate / full_rate : 0.0));
	print_json(j);
}

static void prof_print(const struct pipe_out *po, const char *dir,
		       const struct pipe_prof *p)
{
	double pipe_rate = per_s(p->images, p->wall_ns);
	double full_rate = per_s(p->full_images, p->full_ns);
	char type[64], b[32];

	printf("spec           %s\n", po->text);
	printf("output         %s, %zu bytes\n",
	       out_type(po, type, sizeof(type)), po->bytes);
	printf("files          %" PRIu64 " under %s, %s mean", p->files, dir,
	       progress_bytes((double)p->bytes / (double)p->files, b,
			      sizeof(b)));
	if (p->skipped)
		printf(", %" PRIu64 " skipped (they do not decode)",
		       p->skipped);
	printf("\n");
	if (p->restart)
		printf("jpeg restart   transcoded as pack --jpeg-restart %u stores them: %+.2f %% in size\n",
		       p->restart,
		       p->bytes_before ?
			       100.0 * ((double)p->bytes_after /
						(double)p->bytes_before -
					1) :
			       0.0);
	printf("segments       %" PRIu64 " of %" PRIu64
	       " decodes from restart segments\n",
	       p->segment_decodes, p->images);
	printf("%-15s%9s %6s\n", "stage", "us/img", "%");
	for (size_t k = 0; k <= PIPE_NSTAGES; k++) {
		uint64_t ns = k < PIPE_NSTAGES ? p->stage[k] : other_ns(p);

		printf("%-15s%9.2f %6.1f\n",
		       k < PIPE_NSTAGES ? pipe_stages[k].name : "other",
		       per_img_us(ns, p->images), pct(ns, p->wall_ns));
	}
	printf("%-15s%9.2f %6.1f  %.1f img/s (%" PRIu64 " images, %.2f s)\n",
	       "pipeline", per_img_us(p->wall_ns, p->images), 100.0, pipe_rate,
	       p->images, (double)p->wall_ns / 1e9);
	printf("%-15s%9.2f %6s  %.1f img/s (%" PRIu64
	       " images, %.2f s; whole image to RGB)\n",
	       "full decode", per_img_us(p->full_ns, p->full_images), "",
	       full_rate, p->full_images, (double)p->full_ns / 1e9);
	printf("%-15s%9.2f %6s  pipeline img/s / full decode img/s\n", "ratio",
	       full_rate > 0 ? pipe_rate / full_rate : 0.0, "");
}

static int parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !(v > 0) || v > PIPE_SECONDS_MAX) {
		fprintf(stderr,
			PFX "--seconds: invalid value \"%s\" (0 < S <= %g)\n",
			s, PIPE_SECONDS_MAX);
		return CTL_FAIL;
	}
	*out = v;
	return CTL_OK;
}

static int pipe_profile(const struct pipe_cli *o, const struct pipe_out *po,
			const char *dir)
{
	const struct codec_ops *jpeg = codec_get(CODEC_JPEG);
	struct jpgset *set = NULL;
	const struct jpgset_file *f;
	struct imgpipe *ip = NULL;
	struct imgpipe_ws *ws = NULL;
	struct codec_ctx *ctx = NULL;
	struct imgpipe_times t0, t1;
	struct pipe_prof p = { .restart = o->restart };
	struct jpgset_file *g = NULL;  /* the files the pipeline runs on */
	struct jpgset_file *ok = NULL; /* the files that decode */
	size_t kept = 0;
	struct jrst_enc *enc = NULL;
	void *sample = NULL, *full = NULL;
	size_t n, full_cap = 0;
	uint64_t min_ns, pass;
	double seconds, start;
	struct diag d;
	int rc = CTL_FAIL;

	if (parse_seconds(o->seconds, &seconds))
		return CTL_FAIL;
	min_ns = (uint64_t)(seconds * 1e9);
	if (jpgset_load(&set, dir, &d)) {
		fprintf(stderr, PFX "%s\n", d.msg);
		goto out;
	}
	f = jpgset_files(set, &n);
	if (!n) {
		fprintf(stderr, PFX "%s: no .jpg or .jpeg files\n", dir);
		goto out;
	}
	if (make_pipe(po, o->max_pixels, true, &ip, &ws))
		goto out;
	if (codec_ctx_new(&ctx, o->max_pixels)) {
		fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
		goto out;
	}
	ok = calloc(n, sizeof(*ok));
	g = calloc(n, sizeof(*g));
	if (!ok || !g) {
		fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
		goto out;
	}
	/*
	 * A file that does not decode (damaged, or not an image) is named
	 * and left out, as pack --skip-bad leaves it out; the rest are
	 * profiled. First the headers, to size the full decode's buffer.
	 */
	for (size_t i = 0; i < n; i++) {
		struct codec_src src = { f[i].data, f[i].len, NULL };
		struct codec_info info;

		if (jpeg->probe(ctx, &src, &info, &d)) {
			skip(&p, f[i].path, d.msg);
			continue;
		}
		if (info.size > full_cap)
			full_cap = info.size;
		ok[kept++] = f[i];
	}
	sample = malloc(po->bytes);
	full = malloc(full_cap ? full_cap : 1);
	if (!sample || !full ||
	    (o->restart && jrst_enc_new(&enc, o->max_pixels))) {
		fprintf(stderr, PFX "%s\n", strerror(ENOMEM));
		goto out;
	}
	/*
	 * The pipeline runs on the files as a packed dataset would hold them
	 * (--jpeg-restart), the full decode on the files as they are. One
	 * untimed pass of each, file by file: every file kept goes through
	 * both, and the buffers and code are paged in before the clock.
	 */
	n = kept;
	kept = 0;
	for (size_t i = 0; i < n; i++) {
		struct jpgset_file h = ok[i];
		struct codec_src src = { h.data, h.len, NULL };
		struct codec_info info;

		if (jpeg->decode(ctx, &src, full, full_cap, &info, &d)) {
			skip(&p, h.path, d.msg);
			continue;
		}
		if (o->restart) {
			h.data = NULL;
			if (restart_copy(enc, o->restart, ok[i].data, ok[i].len,
					 ok[i].path, &h.data, &h.len))
				goto out;
		}
		if (imgpipe_run(ip, ws, h.data, h.len, rng_mix(o->seed, 0, i),
				sample, &d)) {
			skip(&p, h.path, d.msg);
			if (o->restart)
				free(h.data);
			continue;
		}
		if (o->restart) {
			p.bytes_before += ok[i].len;
			p.bytes_after += h.len;
		}
		ok[kept] = ok[i];
		g[kept++] = h;
	}
	n = kept;
	f = ok;
	p.files = n;
	for (size_t i = 0; i < n; i++)
		p.bytes += f[i].len;
	if (!n) {
		fprintf(stderr,
			PFX "%s: none of its %" PRIu64
			    " .jpg or .jpeg files could be profiled\n",
			dir, p.skipped);
		goto out;
	}

	imgpipe_ws_times(ws, &t0);
	start = progress_now();
	pass = 1;
	do {
		if (pipe_pass(o, g, n, ip, ws, sample, pass++))
			goto out;
		p.images += n;
		p.wall_ns = elapsed_ns(start);
	} while (p.wall_ns < min_ns);
	imgpipe_ws_times(ws, &t1);
	for (size_t k = 0; k < PIPE_NSTAGES; k++)
		p.stage[k] = stage_ns(&t1, k) - stage_ns(&t0, k);
	p.segment_decodes = t1.segment_decodes - t0.segment_decodes;

	start = progress_now();
	do {
		if (full_pass(f, n, ctx, full, full_cap))
			goto out;
		p.full_images += n;
		p.full_ns = elapsed_ns(start);
	} while (p.full_ns < min_ns);

	if (o->json)
		prof_print_json(po, dir, seconds, &p);
	else
		prof_print(po, dir, &p);
	rc = CTL_OK;
out:
	for (size_t i = 0; g && o->restart && i < kept; i++)
		free(g[i].data);
	free(g);
	free(ok);
	jrst_enc_free(enc);
	free(full);
	free(sample);
	codec_ctx_free(ctx);
	imgpipe_ws_free(ws);
	imgpipe_free(ip);
	jpgset_free(set);
	return rc;
}

/* --- SPEC --------------------------------------------------------------- */

static int pipe_check(const struct pipe_cli *o, const struct pipe_out *po)
{
	char type[64];

	if (o->json) {
		print_json(out_json(po));
		return CTL_OK;
	}
	printf("spec:    %s\n", po->text);
	printf("output:  %s\n", out_type(po, type, sizeof(type)));
	printf("bytes:   %zu per sample\n", po->bytes);
	if (po->sched)
		printf("epoch:   %" PRIu32
		       " (schedules change up to epoch %" PRIu32
		       "; the largest output, size %" PRIu32
		       ", first at epoch %" PRIu32 ")\n",
		       po->epoch, po->sched_end, po->size_max,
		       po->size_max_epoch);
	return CTL_OK;
}

int ctl_pipeline(int argc, char **argv)
{
	static const char usage[] =
		"loaderctl pipeline [OPTIONS] SPEC [IN.jpg OUT.npy]\n"
		"       loaderctl pipeline --explain [OPTIONS] SPEC IN.jpg\n"
		"       loaderctl pipeline --grid N [OPTIONS] SPEC IN.jpg OUT.png|OUT.jpg\n"
		"       loaderctl pipeline --profile [OPTIONS] SPEC DIR";
	struct pipe_cli o = { 0 };
	struct pipe_out po;
	struct diag d = { { 0 } };
	int nargs, help, err;
	const char *why = NULL;

	err = opts_parse(pipe_table, &o, argc, argv, &nargs, &help, &d);
	if (!err && !help) {
		if (o.profile && o.explain)
			why = "--profile and --explain: one at a time";
		else if (o.profile && nargs != 2)
			why = "--profile expects SPEC DIR";
		else if (o.explain && nargs != 2)
			why = "--explain expects SPEC IN.jpg";
		else if (o.grid && (o.explain || o.profile || nargs != 3))
			why = "--grid N expects SPEC IN.jpg OUT.png (or .jpg)";
		else if (!o.profile && !o.explain && nargs != 1 && nargs != 3)
			why = "expected SPEC, or SPEC IN.jpg OUT.npy";
	}
	if (err || help || why) {
		if (help) {
			opts_help(
				stdout, usage,
				"Check an image pipeline spec (see loaderd(8), PIPELINE): print its\n"
				"canonical text, output dtype, shape and bytes per sample. With\n"
				"IN.jpg OUT.npy, run it on one JPEG with the seed a stream gives\n"
				"sample I of epoch E, and write the sample as a NumPy .npy file.\n"
				"With --grid N and OUT.png (or .jpg), write N samples of IN.jpg\n"
				"(indexes I to I + N - 1) as one contact sheet, to look at.\n"
				"With --explain, print what that sample draws instead: its crop,\n"
				"flip and each colour stage's parameters, a line each.\n"
				"With --profile, run it on one thread over every JPEG under DIR\n"
				"and print img/s and the time per stage, against libjpeg-turbo's\n"
				"full decode of the same files.",
				pipe_table);
			return CTL_OK;
		}
		fprintf(stderr, PFX "%s\nusage: %s\n(--help for options)\n",
			err ? d.msg : why, usage);
		return CTL_FAIL;
	}
	if (ctl_parse_restart("loaderctl pipeline", o.jpeg_restart, &o.restart))
		return CTL_FAIL;
	if (o.epoch > UINT32_MAX) {
		fprintf(stderr, PFX "--epoch: at most %" PRIu32 "\n",
			UINT32_MAX);
		return CTL_FAIL;
	}
	if (parse_spec(argv[0], (uint32_t)o.epoch, &po))
		return CTL_FAIL;
	if (o.profile)
		return pipe_profile(&o, &po, argv[1]);
	if (o.explain)
		return pipe_explain(&o, &po, argv[1]);
	if (o.grid)
		return pipe_grid(&o, &po, argv[1], argv[2]);
	if (nargs == 3)
		return pipe_run(&o, &po, argv[1], argv[2]);
	return pipe_check(&o, &po);
}
