/*
 * imgpipe.h - one JPEG through the image pipeline: header, augmentation
 * parameters, region decode, resample, flip, normalize, cast, layout.
 *
 * The spec (ispec.h) says what happens; this module does it for one
 * sample at a time, writing ispec_out_bytes() bytes straight into the
 * caller's memory (a sample's place in a batch). Per sample:
 *
 *  1. jroi_header(): the image's size, without decoding pixels;
 *  2. the rectangle to crop, from the sample's seed: augment_rrc() for rrc,
 *     augment_resize_center() (or a plain center crop) for center, then
 *     augment_flip() when the spec has a flip stage: the draws come in that
 *     fixed order from one rng seeded with the sample seed, so the output
 *     bytes depend on (seed, JPEG bytes, spec) only;
 *  3. jroi_decode() of that rectangle's rows and columns only, at the
 *     cheapest DCT scale that still gives at least size x size pixels,
 *     from the restart segments that cover it when the JPEG has them
 *     (what loaderctl pack writes; the same pixels either way);
 *  4. rsz (resize.h) of the rectangle (fractional when the DCT scale
 *     does not map its edges onto whole pixels) to size x size, mirrored
 *     when flipped: PIL's antialiased bilinear filter; then the colour
 *     stages (color.h), their parameters drawn in step 2 after the flip;
 *  5. imgkern_emit(): normalize, cast and layout into the destination.
 *
 * Gray JPEGs become RGB by repeating the channel (as PIL's convert("RGB")),
 * CMYK/YCCK through libjpeg-turbo's inverted-CMYK formula (jroi.h).
 *
 * struct imgpipe is the stream's, shared read-only by every worker;
 * struct imgpipe_ws is one worker's decoder and buffers, sized once when
 * it is made so that imgpipe_run() allocates nothing of its own (libjpeg
 * keeps its own per-image pools).
 */
#ifndef LD_IMGPIPE_H
#define LD_IMGPIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "ispec.h"

struct imgpipe;
struct imgpipe_ws;

/* Time spent per stage, summed over the images a worker ran. */
struct imgpipe_times {
	uint64_t images;
	uint64_t header_ns; /* header parse + parameters */
	uint64_t decode_ns; /* region decode (from segments or the file) */
	uint64_t resize_ns; /* plan + resample (+ gray expansion) */
	uint64_t warp_ns;   /* the geometric stages' pass, crop included */
	uint64_t color_ns;  /* vflip and the colour stages */
	uint64_t emit_ns;   /* normalize, cast, layout */
	uint64_t erase_ns;  /* erase and cutout */
	/* decodes that took the restart-segment path (jroi.h); timing or not */
	uint64_t segment_decodes;
};

/*
 * Make the pipeline for spec sp. Images of more than max_pixels source
 * pixels (0: JROI_DEFAULT_MAX_PIXELS) are refused per sample before any
 * pixel memory is allocated for them. Returns 0, LOADER_EUSAGE (a spec
 * this module cannot run, described in d) or -ENOMEM. Free with
 * imgpipe_free().
 */
int imgpipe_new(struct imgpipe **out, const struct ispec *sp,
		uint64_t max_pixels, struct diag *d);

/* Free a pipeline. NULL is a no-op. */
/*
 * A pipeline for sp, another epoch's spec of ip's (ispec_parse_epoch()):
 * the same stages, an output no larger. It shares ip's sizes, so that
 * the worker states of ip (imgpipe_ws_new()) run it too. Returns 0,
 * LOADER_EUSAGE (in d) when sp does not fit ip, or -ENOMEM.
 */
int imgpipe_derive(struct imgpipe **out, const struct imgpipe *ip,
		   const struct ispec *sp, struct diag *d);

void imgpipe_free(struct imgpipe *ip);

/* The spec the pipeline runs (valid as long as ip). */
const struct ispec *imgpipe_spec(const struct imgpipe *ip);

/*
 * Make one worker's state for ip; ip must outlive it. timing: record
 * per-stage times (two clock reads per stage). Returns 0 or -ENOMEM.
 */
int imgpipe_ws_new(const struct imgpipe *ip, bool timing,
		   struct imgpipe_ws **out);

/* Free a worker state. NULL is a no-op. */
void imgpipe_ws_free(struct imgpipe_ws *ws);

/* The bytes one worker state of ip holds (what imgpipe_ws_new() takes). */
size_t imgpipe_ws_bytes(const struct imgpipe *ip);

/* The stage times ws has summed so far (zeros without timing). */
void imgpipe_ws_times(const struct imgpipe_ws *ws, struct imgpipe_times *t);

/*
 * Run the pipeline on the JPEG in jpeg[0..len) with the sample seed
 * seed, writing ispec_out_bytes(spec) bytes at dst. Returns 0, or
 * LOADER_EDECODE (not a JPEG, damaged data, unsupported colour space),
 * LOADER_ETOOBIG (above the pixel limit), LOADER_ERANGE (an image too
 * small for a plain center crop) with the reason in d; dst's contents
 * are undefined after an error. ws is used by one thread at a time.
 */
int imgpipe_run(const struct imgpipe *ip, struct imgpipe_ws *ws,
		const void *jpeg, size_t len, uint64_t seed, void *dst,
		struct diag *d);

/*
 * What the pipeline draws for the sample of seed seed from the JPEG in
 * jpeg[0..len), without decoding its pixels: a line each, "crop X Y W H"
 * (the source rectangle, in the image's pixels), "flip 0|1", "vflip
 * 0|1", each colour stage's line (color_explain()), then erase's and
 * cutout's (erase_explain()). Into buf (n bytes); returns the
 * length, as snprintf, or a negative code with d saying why (a damaged
 * header, an image too small for its crop).
 */
int imgpipe_explain(const struct imgpipe *ip, struct imgpipe_ws *ws,
		    const void *jpeg, size_t len, uint64_t seed, char *buf,
		    size_t n, struct diag *d);

/*
 * Tests only: false makes a fused warp with fill constant or nearest
 * decode the whole crop (and what its filter reads around it) instead of
 * only what its map reaches (the default, true); the bytes are the same
 * either way. Not thread-safe.
 */
void imgpipe_test_tight(bool on);

#endif /* LD_IMGPIPE_H */
