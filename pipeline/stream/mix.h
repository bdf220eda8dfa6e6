/*
 * mix.h - the batch stages: mixup, cutmix and soft labels, applied by a
 * stream's assembler (assemble.c) to a whole batch once its samples are
 * made.
 *
 * They follow timm's Mixup in "batch" mode. Per batch, with both mixup
 * and cutmix, the batch cuts with probability cut_p (timm's switch_prob);
 * lambda ~ Beta(alpha, alpha) of the one chosen. Sample i mixes with its
 * partner: count - 1 - i (pair flip, timm's x.flip(0)) or i - 1, sample
 * 0 with count - 1 (pair roll, torchvision's batch.roll(1, 0)), count
 * being the batch's own (a short last batch's too). mixup makes
 * x_i = lambda x_i + (1 - lambda) x_partner; cutmix copies a box of the
 * partner into x_i (timm's rand_bbox, correct_lam), and lambda becomes
 * 1 - box area / (H W). Every sample mixes with its partner's original.
 * Labels become y_i = lambda onehot(l_i) + (1 - lambda) onehot(l_partner),
 * smoothed to y (1 - E) + E / classes.
 *
 * Every number a batch draws comes from mix_seed() of (seed, rank, epoch,
 * batch): a batch is the same for any thread count and after a resume.
 * Nothing here allocates, locks or calls the system; every function is
 * safe to call from many threads at once on distinct data.
 */
#ifndef LD_MIX_H
#define LD_MIX_H

#include <stdbool.h>
#include <stdint.h>

#include "ispec.h"
#include "rng.h"

enum mix_kind {
	MIX_NONE = 0, /* no mixing: labels only smoothed (or one-hot) */
	MIX_MIXUP = 1,
	MIX_CUTMIX = 2,
};

/* What a batch drew; a plain value. */
struct mix_draw {
	uint8_t kind; /* enum mix_kind */
	uint8_t pair; /* enum ispec_pair */
	double lam;   /* weight of a sample's own pixels and label; 1: none */
	uint32_t box[4]; /* cutmix: x0, y0, x1, y1 (exclusive ends); else 0 */
};

/* The images of one output of a batch, to mix in place. */
struct mix_image {
	unsigned char *base;   /* sample 0 */
	uint64_t sample_bytes; /* from one sample to the next */
	uint32_t count;	       /* samples */
	uint8_t dtype;	       /* DT_U8, DT_F16 or DT_F32 */
	uint8_t layout;	       /* enum ispec_layout */
	uint32_t h, w;	       /* of each image, 3 channels */
};

/*
 * The seed of batch `batch` of epoch `epoch` on rank `rank`: a domain of
 * its own, apart from every sample's rng_mix(seed, epoch, index).
 */
uint64_t mix_seed(uint64_t seed, uint32_t rank, uint32_t epoch, uint64_t batch);

/*
 * A Beta(a, b) variate (a, b > 0) as X / (X + Y) of two Gamma variates
 * (Marsaglia and Tsang's method; below 1, Gamma(a + 1) U^(1/a)), computed
 * from their logarithms, so that a small a neither underflows nor gives
 * 0 / 0. Deterministic: a function of r's state alone.
 */
double mix_beta(struct rng *r, double a, double b);

/*
 * Draw batch's mixing into d, from seed (mix_seed()), for images h x w.
 * Without mixup and cutmix: kind MIX_NONE, lam 1.
 */
void mix_draw(const struct ispec_batch *sb, uint64_t seed, uint32_t h,
	      uint32_t w, struct mix_draw *d);

/* Sample i's partner in a batch of count (> i) samples. */
uint32_t mix_partner(unsigned pair, uint32_t i, uint32_t count);

/*
 * The pixel work of d on im, cut in independent pieces for a pool:
 * mix_pieces() says how many (0: nothing to do), mix_piece() does piece
 * k of them for every sample of the batch. Pieces never overlap, so they
 * may run on many threads at once, in any order. mix_image() does all.
 */
uint32_t mix_pieces(const struct mix_draw *d, const struct mix_image *im);
void mix_piece(const struct mix_draw *d, const struct mix_image *im,
	       uint32_t k);
void mix_image(const struct mix_draw *d, const struct mix_image *im);

/*
 * The soft labels of a batch of count samples into out (count x classes
 * floats): from label[i] (each in [0, classes), checked by the caller),
 * d's lambda and pair, and smoothing eps. Computed in double, rounded
 * once to float.
 */
void mix_labels(const struct mix_draw *d, const int64_t *label, uint32_t count,
		uint32_t classes, double eps, float *out);

#endif /* LD_MIX_H */
