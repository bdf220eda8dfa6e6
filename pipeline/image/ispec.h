/*
 * ispec.h - the image pipeline spec: its text form (imgkern.h applies
 * its last stages: normalize, cast, layout).
 *
 * One short text describes what happens to every image of a stream, and
 * the client, loaderctl, the config file and the man page all share it:
 *
 *	decode | rrc 224 | flip 0.5 | normalize imagenet | f16 | nchw
 *	decode | resize 256 | center 224 | normalize imagenet | f32 | nchw
 *
 * Stages are separated by '|', in this order:
 *	decode					(required, first)
 *	rrc SIZE [scale LO HI] [ratio LO HI]	(one geometry, required:
 *	  | resize SHORT | center SIZE		 RandomResizedCrop, or an
 *	  | center SIZE				 optional resize + center crop)
 *	flip P					(optional, 0 <= P <= 1)
 *	vflip P					(optional, 0 <= P <= 1)
 *	colour stages, any number up to ISPEC_MAX_OPS, in any order:
 *	  brightness B | contrast C | saturation S [p P]  (ColorJitter's
 *	    factor in [max(0, 1 - X), 1 + X], X >= 0)
 *	  hue H [p P]				(shift in [-H, H], 0 <= H <= 0.5)
 *	  jitter B C S H [p P]			(ColorJitter: all four, in a
 *						 random order)
 *	  grayscale [p P] | invert [p P]	(RandomGrayscale, p 0.1;
 *						 RandomInvert, p 0.5)
 *	  posterize BITS [p P]			(RandomPosterize, 1..8, p 0.5)
 *	  solarize T [p P]			(RandomSolarize, 0..255, p 0.5)
 *	  autocontrast [p P] | equalize [p P]	(RandomAutocontrast,
 *						 RandomEqualize, p 0.5)
 *	  sharpness F [p P]			(RandomAdjustSharpness, F in
 *						 0..1000, p 0.5)
 *	  gaussian_blur K LO HI [p P]		(GaussianBlur: K odd 1..31,
 *						 sigma in [LO, HI], 0 < LO)
 *	  channel_shift X [p P]			(Keras: a shift in [-X, X],
 *						 X in 0..255, clipped to the
 *						 image's range)
 *	geometric stages, among the colour stages, any order:
 *	  rotate D|LO HI [GEO] [p P]		(RandomRotation: an angle in
 *						 [-D, D], counter-clockwise)
 *	  affine [rotate D|LO HI] [translate FX FY] [scale LO HI]
 *	    [zoom LO HI] [shear SX|XLO XHI|XLO XHI YLO YHI] [GEO] [p P]
 *						(RandomAffine; zoom is Keras'
 *						 zoom_range, per axis)
 *	  trivialaugment [GEO]			(TrivialAugmentWide)
 *	  randaugment N M [GEO]			(RandAugment: N ops of
 *						 magnitude M in 0..30)
 *	  autoaugment imagenet [GEO]		(AutoAugment's ImageNet policy)
 *	  GEO: [interp nearest|bilinear] [fill 0|V|V0,V1,V2|nearest|reflect|
 *	    wrap|context]; one pass resamples them all, so the stages that
 *	    give either must agree (default: nearest, fill 0)
 *	normalize imagenet | normalize M0,M1,M2 S0,S1,S2  (optional; on the
 *						 0..1 scale, std > 0)
 *	erase [p P] [scale LO HI] [ratio LO HI] [value 0|V0,V1,V2|random]
 *						(RandomErasing, after normalize:
 *						 p 0.5, scale 0.02 0.33, ratio
 *						 0.3 3.3, value 0)
 *	cutout SIZE [p P]			(a SIZE x SIZE square at a
 *						 uniform centre, clipped; p 1)
 *	u8 | f16 | f32				(optional, default f32)
 *	nchw | nhwc				(optional, default nchw)
 * then the batch stages, optional, in this order (the stream's assembler
 * applies them to a whole batch once its samples are made; mix.h):
 *	mixup ALPHA				(timm's Mixup: lambda ~
 *						 Beta(ALPHA, ALPHA), 0 < ALPHA
 *						 <= 1000)
 *	cutmix ALPHA				(timm's CutMix, correct_lam)
 *	switch P				(with both: the probability
 *						 that a batch cuts, 0..1;
 *						 default 0.5)
 *	pair flip|roll				(with mixup or cutmix: sample
 *						 i's partner is count-1-i, or
 *						 i-1; default flip)
 *	label_smoothing E			(0 <= E < 1)
 *	classes N				(1..ISPEC_CLASSES_MAX; default
 *						 the dataset's class count)
 * With any batch stage the label output becomes soft: f32 [B, classes].
 *	at final | at EPOCH			(optional: read every schedule
 *						 at that epoch, e.g. for an
 *						 evaluation stream)
 * SIZE and SHORT are 1..8192; rrc's scale defaults to 0.08 1, its ratio to
 * 3/4 4/3 (a ratio may be written as a fraction); u8 cannot be normalized.
 *
 * SCHEDULES. Any number may instead be a schedule over epochs (0-based):
 *	VALUE@EPOCH..VALUE@EPOCH[..VALUE@EPOCH]...[/STEP]
 * e.g. "rrc 160@65..192@76/32" (ffcv's progressive resizing: 160 up to
 * epoch 65, 192 from epoch 76, between them the straight line rounded to
 * the nearest multiple of 32) or "randaugment 2 5@0..15@90". Up to the
 * first key's epoch the value is the first key's, from the last key's
 * epoch on the last's; between two keys it is interpolated linearly,
 * rounded to the nearest multiple of STEP when one is given (ties to even)
 * and kept between the two keys. An integer argument (SIZE, BITS, K, N, M)
 * takes the value rounded to the nearest integer. In a comma list (mean,
 * std, fill, value) each element may be one. Every epoch's values must be
 * valid: ispec_parse() checks each epoch up to the last key's.
 * At most ISPEC_MAX_SCHED schedules a spec, ISPEC_SCHED_KEYS keys each,
 * epochs up to ISPEC_SCHED_EPOCH_MAX.
 *
 * This module depends on common/diag.h and pipeline/format/dtype.h only.
 */
#ifndef LD_ISPEC_H
#define LD_ISPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#define ISPEC_SIZE_MAX 8192
#define ISPEC_CHANNELS 3
/* ispec_format() never needs more than this, NUL included. */
#define ISPEC_TEXT_MAX 4096
/* Colour and geometric stages a spec may hold. */
#define ISPEC_MAX_OPS 24
/* Ops a sample may draw from them: one a stage, randaugment N, autoaugment 2. */
#define ISPEC_MAX_STEPS 32
/* Schedules (SCHEDULES above). */
#define ISPEC_MAX_SCHED	      16
#define ISPEC_SCHED_KEYS      8
#define ISPEC_SCHED_EPOCH_MAX 100000

enum ispec_geom {
	ISPEC_RRC = 1, /* RandomResizedCrop to size x size */
	ISPEC_CENTER,  /* optional resize of the short side, center crop */
};

enum ispec_layout {
	ISPEC_NCHW = 0,
	ISPEC_NHWC,
};

/* A colour stage (color.h applies it). */
enum ispec_op_kind {
	ISPEC_OP_BRIGHTNESS = 1,
	ISPEC_OP_CONTRAST,
	ISPEC_OP_SATURATION,
	ISPEC_OP_HUE,
	ISPEC_OP_JITTER,
	ISPEC_OP_GRAYSCALE,
	ISPEC_OP_INVERT,
	ISPEC_OP_POSTERIZE,
	ISPEC_OP_SOLARIZE,
	ISPEC_OP_AUTOCONTRAST,
	ISPEC_OP_EQUALIZE,
	ISPEC_OP_SHARPNESS,
	ISPEC_OP_BLUR,
	ISPEC_OP_CHANNEL_SHIFT,
	/* geometric (warp.h applies them, with the crop, in one pass) */
	ISPEC_OP_ROTATE,
	ISPEC_OP_AFFINE,
	/* policies: one or more of the ops above, drawn per sample */
	ISPEC_OP_TRIVIAL,
	ISPEC_OP_RANDAUG,
	ISPEC_OP_AUTOAUG,
};

/* How the geometric stages sample the image. */
enum ispec_interp {
	ISPEC_INTERP_NEAREST = 0,
	ISPEC_INTERP_BILINEAR,
};

/*
 * What the geometric stages show where their map leaves the crop:
 * a constant colour, the nearest edge pixel, the mirror image (about the
 * edge, the edge pixel repeated: scipy's "reflect"), the crop repeated,
 * or the real pixels around the crop (what only a fused pass can give).
 */
enum ispec_fill {
	ISPEC_FILL_CONSTANT = 0,
	ISPEC_FILL_NEAREST,
	ISPEC_FILL_REFLECT,
	ISPEC_FILL_WRAP,
	ISPEC_FILL_CONTEXT,
};

/* Policies' op sets (autoaugment POLICY). */
enum ispec_policy {
	ISPEC_POLICY_IMAGENET = 0,
};

/* RandomAffine's ranges, and Keras' zoom (affine's arguments). */
struct ispec_affine {
	double deg[2];	     /* angle range, degrees, counter-clockwise */
	double translate[2]; /* largest shift, fraction of width, height */
	double scale[2];     /* isotropic scale range; 1 1: none */
	double zoom[2];	     /* per-axis zoom range; 1 1: none */
	double shear[4];     /* x range, y range, degrees */
};

/*
 * One colour or geometric stage: its kind, the probability that it
 * applies to a sample, and its arguments: the factor ranges' X
 * (brightness, contrast, saturation; jitter's a[0..3] are B, C, S, H),
 * hue's H, posterize's BITS, solarize's T, sharpness's F,
 * gaussian_blur's K, LO, HI, channel_shift's X; rotate's range LO, HI;
 * randaugment's N, M; autoaugment's policy; affine's ranges in af.
 */
struct ispec_op {
	uint8_t kind; /* enum ispec_op_kind */
	double p;
	double a[4];
	struct ispec_affine af;
};

/* How a batch stage pairs sample i with its partner (mix.h). */
enum ispec_pair {
	ISPEC_PAIR_FLIP = 0, /* count - 1 - i: timm's x.flip(0) */
	ISPEC_PAIR_ROLL,     /* i - 1, 0 with count - 1: batch.roll(1, 0) */
};

#define ISPEC_ALPHA_MAX	  1000
#define ISPEC_CLASSES_MAX 1000000

/*
 * The batch stages (mixup, cutmix, label smoothing): on is set by any of
 * them; mixup and cutmix are their alphas (0: not given); the others
 * hold their defaults until given.
 */
struct ispec_batch {
	bool on;
	bool has_smoothing;
	uint8_t pair;	  /* enum ispec_pair */
	double mixup;	  /* Beta's alpha; 0: no mixup */
	double cutmix;	  /* Beta's alpha; 0: no cutmix */
	double cut_p;	  /* with both: P(cutmix) (switch); 0.5 */
	double smoothing; /* label smoothing E */
	uint32_t classes; /* 0: the dataset's */
};

/* RandomErasing's value: 0, one per channel, or random normal. */
enum ispec_erase_value {
	ISPEC_ERASE_ZERO = 0,
	ISPEC_ERASE_RGB,
	ISPEC_ERASE_RANDOM,
};

/* A parsed spec: a plain value, copied freely; nothing to free. */
struct ispec {
	uint8_t geom;	    /* enum ispec_geom */
	uint8_t dtype;	    /* DT_U8, DT_F16 or DT_F32 (dtype.h) */
	uint8_t layout;	    /* enum ispec_layout */
	bool has_flip;	    /* a flip stage was given */
	bool has_normalize; /* a normalize stage was given */
	uint32_t size;	    /* output side: the output is size x size */
	uint32_t resize;    /* ISPEC_CENTER: short side first; 0 = none */
	double scale[2];    /* ISPEC_RRC: area fraction range */
	double ratio[2];    /* ISPEC_RRC: aspect ratio range */
	double flip;	    /* probability of a horizontal flip */
	double mean[3];	    /* per channel (RGB), 0..1 scale */
	double std[3];	    /* per channel, > 0 */
	uint32_t nops;	    /* colour and geometric stages, in order */
	struct ispec_op ops[ISPEC_MAX_OPS];
	bool has_vflip;
	double vflip; /* probability of a vertical flip */
	bool has_erase;
	struct {
		double p, scale[2], ratio[2];
		uint8_t value; /* enum ispec_erase_value */
		double rgb[3];
	} erase;
	bool has_cutout;
	struct {
		double p;
		uint32_t size;
	} cutout;
	/* the geometric stages' one resampling pass */
	uint8_t interp;	    /* enum ispec_interp */
	uint8_t fill;	    /* enum ispec_fill */
	double fill_rgb[3]; /* ISPEC_FILL_CONSTANT: 0..255 per channel */
	struct ispec_batch batch;
	/*
	 * Schedules: the values above are those of one epoch. sched: some
	 * number is a schedule; sched_end: the last key's epoch (nothing
	 * changes after it); at: the spec has an "at" stage. size_max is
	 * the largest size of any epoch and size_max_epoch one that has it
	 * (ispec_parse() only; ispec_parse_epoch() sets size_max to size).
	 */
	bool sched, at;
	uint32_t sched_end;
	uint32_t size_max, size_max_epoch;
};

/*
 * Parse text into sp. Returns 0, or LOADER_EUSAGE with a message in d
 * that names the column (1-based, in bytes), the stage and the word at
 * fault (and for a schedule's value, the schedule and the epoch). sp is
 * fully written either way (zeroed on error). A spec with schedules gives
 * its values at epoch 0 (or at its "at" stage's epoch), with sched,
 * sched_end, size_max and size_max_epoch set.
 */
int ispec_parse(struct ispec *sp, const char *text, struct diag *d);

/*
 * Parse text into sp with every schedule read at epoch (or at the epoch
 * of the spec's "at" stage): the spec a stream uses for that epoch's
 * batches. It checks that epoch's values only: parse the text with
 * ispec_parse() first. Returns as ispec_parse().
 */
int ispec_parse_epoch(struct ispec *sp, const char *text, uint32_t epoch,
		      struct diag *d);

/*
 * Write the canonical text of sp into buf: every stage that sp holds,
 * dtype and layout always, rrc's scale and ratio only when they differ
 * from the defaults, numbers in the shortest form that parses back to
 * the same double. ispec_parse() of the result gives sp back. A spec
 * with schedules is written with its values at the epoch it was parsed
 * for (no schedule, no "at"). Returns the length, as snprintf.
 */
int ispec_format(const struct ispec *sp, char *buf, size_t n);

/* A colour or geometric stage's name in a spec ("brightness"), or NULL. */
const char *ispec_op_name(unsigned kind);

/* Whether a stage of this kind moves pixels (rotate, affine, policies). */
bool ispec_op_geometric(unsigned kind);

/* Whether sp has a stage that moves pixels. */
bool ispec_has_warp(const struct ispec *sp);

/*
 * The per-sample output shape: {3, size, size} for nchw, {size, size, 3}
 * for nhwc. Returns the number of dimensions (3).
 */
unsigned ispec_out_shape(const struct ispec *sp, uint32_t dims[3]);

/* Bytes of one output sample. */
size_t ispec_out_bytes(const struct ispec *sp);

#endif /* LD_ISPEC_H */
