/*
 * mlp.h - a small multi-layer perceptron trained with SGD and momentum,
 * every matrix product through CBLAS sgemm.
 *
 * The network is sizes[0] -> sizes[1] -> ... -> sizes[nsizes-1]: fully
 * connected layers with ReLU between them and softmax cross-entropy on
 * the last one. The reference trainer uses 784-256-128-10; the tests use
 * tiny nets such as 6-5-4-3.
 *
 * Inputs are row-major f32 [n, sizes[0]]; labels are int64 class numbers
 * in [0, sizes[nsizes-1]). Weights are He-initialised from a seeded
 * splitmix64 generator, so the same sizes and seed give the same net on
 * every machine. Every buffer, for up to max_batch samples, is allocated
 * by mlp_new(): nothing allocates afterwards.
 *
 * The optimiser is SGD with (heavy-ball) momentum, as PyTorch's:
 *   v = momentum * v + g + weight_decay * w;  w -= lr * v
 * Weight decay applies to the weights only, not to the biases.
 *
 * A struct mlp is not thread-safe; the BLAS library may use threads of
 * its own inside each call.
 */
#ifndef LD_MLP_H
#define LD_MLP_H

#include <stdint.h>

/* Most layers (weight matrices) in a net: nsizes <= MLP_MAX_LAYERS + 1. */
#define MLP_MAX_LAYERS 8

struct mlp;

/*
 * One layer's parameters: w is row-major [in, out] (so a layer computes
 * y = x * w + b), b is [out]. gw and gb hold the gradients of the mean
 * loss from the last mlp_grad() or mlp_train_step() (zero before the
 * first). The pointers stay valid until mlp_free(); w and b may be
 * written, e.g. to load a checkpoint or to probe the loss in a test.
 */
struct mlp_view {
	uint32_t in, out;
	float *w, *b;
	const float *gw, *gb;
};

/*
 * Create a net with nsizes layer widths (2 <= nsizes <= MLP_MAX_LAYERS +
 * 1, each width >= 1) for batches of up to max_batch samples, weights
 * drawn from seed. Momentum starts at 0.9, weight decay at 0.
 * Returns 0 and *out, -EINVAL for bad sizes, or -ENOMEM.
 */
int mlp_new(struct mlp **out, const uint32_t *sizes, unsigned nsizes,
	    uint32_t max_batch, uint64_t seed);

/* Free the net. NULL is a no-op. */
void mlp_free(struct mlp *m);

/*
 * Set the optimiser's momentum (0 <= momentum < 1; 0 is plain SGD) and
 * weight decay (>= 0). Returns 0 or -EINVAL.
 */
int mlp_set_optim(struct mlp *m, float momentum, float weight_decay);

/* The number of layers (weight matrices): nsizes - 1. */
unsigned mlp_nlayers(const struct mlp *m);

/* Describe layer i (0 is the input side). Returns 0 or -EINVAL. */
int mlp_layer(struct mlp *m, unsigned i, struct mlp_view *v);

/*
 * Forward and backward pass over n samples (1 <= n <= max_batch): the
 * gradients of the mean cross-entropy go to the layers' gw/gb, the mean
 * loss to *loss (may be NULL). The weights do not change.
 * Returns 0, -EINVAL for a bad n, or -ERANGE if a label is out of range
 * (then nothing is computed).
 */
int mlp_grad(struct mlp *m, const float *x, const int64_t *labels, uint32_t n,
	     float *loss);

/*
 * One optimiser step: mlp_grad(), then update the weights with learning
 * rate lr (> 0). Returns as mlp_grad(), or -EINVAL for a bad lr.
 */
int mlp_train_step(struct mlp *m, const float *x, const int64_t *labels,
		   uint32_t n, float lr, float *loss);

/*
 * The most likely class of each of n samples (any n: larger inputs are
 * taken max_batch samples at a time) into classes[0..n).
 * Returns 0 or -EINVAL.
 */
int mlp_predict(struct mlp *m, const float *x, uint32_t n, uint32_t *classes);

/*
 * Evaluate n samples (any n): *correct gets how many are predicted
 * right, *loss (may be NULL) their mean cross-entropy. No gradients are
 * touched. Returns 0, -EINVAL or -ERANGE (a label out of range).
 */
int mlp_eval(struct mlp *m, const float *x, const int64_t *labels, uint32_t n,
	     uint32_t *correct, float *loss);

#endif /* LD_MLP_H */
