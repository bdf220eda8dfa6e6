/*
 * mlp.c - a multi-layer perceptron on CBLAS sgemm (see mlp.h).
 *
 * Layout: activations are row-major [n, width], weights row-major
 * [in, out], so with A the layer's input, D the gradient at its output
 * and W its weights:
 *   forward   Z  = A * W + b             sgemm(N, N)
 *   weights   gW = A^T * D               sgemm(T, N)
 *   biases    gb = 1^T * D               sgemm(N, N) with a row of ones
 *   input     dA = D * W^T (then ReLU')  sgemm(N, T)
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "mlp.h"

/*
 * Widths and batch sizes go to sgemm as int; these caps keep every
 * dimension and leading dimension far from INT_MAX.
 */
#define MLP_MAX_WIDTH (1u << 20)
#define MLP_MAX_BATCH (1u << 20)

struct mlp_layer {
	uint32_t in, out;
	float *w, *b;	/* parameters */
	float *gw, *gb; /* gradients of the mean loss */
	float *vw, *vb; /* momentum buffers */
	float *a;	/* output [max_batch, out]: ReLU'd, or logits */
};

struct mlp {
	unsigned nlayers;
	uint32_t max_batch;
	float momentum, weight_decay;
	float *ones; /* [max_batch] of 1.0f: bias gradients as a product */
	float *d[2]; /* [max_batch, widest]: output gradients, ping-pong */
	float *mem;  /* the one block every array above is carved from */
	struct mlp_layer l[MLP_MAX_LAYERS];
};

/* splitmix64: tiny, seedable with any value, the same on every machine. */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A uniform double in [0, 1) from the top 53 bits. */
static double unit(uint64_t *s)
{
	return (double)(splitmix64(s) >> 11) * 0x1.0p-53;
}

/*
 * A standard normal deviate by Box-Muller. We use only the cosine half:
 * initialisation runs once, and one deviate per call keeps the sequence
 * simple to reproduce.
 */
static double normal(uint64_t *s)
{
	double u1 = 1.0 - unit(s); /* (0, 1]: log() stays finite */
	double u2 = unit(s);

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/*
 * Arrays are carved from one block at 64-byte boundaries, which suits
 * the BLAS kernels' vector loads. With base NULL this only counts.
 */
static float *carve(float *base, size_t *off, size_t n)
{
	float *p = base ? base + *off : NULL;

	*off += (n + 15) & ~(size_t)15;
	return p;
}

static size_t layout(struct mlp *m, float *base)
{
	size_t off = 0, widest = 0, mb = m->max_batch;

	for (unsigned i = 0; i < m->nlayers; i++) {
		struct mlp_layer *l = &m->l[i];
		size_t nw = (size_t)l->in * l->out;

		l->w = carve(base, &off, nw);
		l->gw = carve(base, &off, nw);
		l->vw = carve(base, &off, nw);
		l->b = carve(base, &off, l->out);
		l->gb = carve(base, &off, l->out);
		l->vb = carve(base, &off, l->out);
		l->a = carve(base, &off, mb * l->out);
		if (l->out > widest)
			widest = l->out;
	}
	m->ones = carve(base, &off, mb);
	m->d[0] = carve(base, &off, mb * widest);
	m->d[1] = carve(base, &off, mb * widest);
	return off;
}

int mlp_new(struct mlp **out, const uint32_t *sizes, unsigned nsizes,
	    uint32_t max_batch, uint64_t seed)
{
	struct mlp *m;
	size_t nfloats;
	void *mem;
	uint64_t rs = seed;

	*out = NULL;
	if (!sizes || nsizes < 2 || nsizes > MLP_MAX_LAYERS + 1 ||
	    max_batch == 0 || max_batch > MLP_MAX_BATCH)
		return -EINVAL;
	for (unsigned i = 0; i < nsizes; i++)
		if (sizes[i] == 0 || sizes[i] > MLP_MAX_WIDTH)
			return -EINVAL;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->nlayers = nsizes - 1;
	m->max_batch = max_batch;
	m->momentum = 0.9f;
	for (unsigned i = 0; i < m->nlayers; i++) {
		m->l[i].in = sizes[i];
		m->l[i].out = sizes[i + 1];
	}
	nfloats = layout(m, NULL);
	if (nfloats > SIZE_MAX / sizeof(float) ||
	    posix_memalign(&mem, 64, nfloats * sizeof(float))) {
		free(m);
		return -ENOMEM;
	}
	/* Zero: gradients and momentum start at 0, biases too. */
	memset(mem, 0, nfloats * sizeof(float));
	m->mem = mem;
	layout(m, m->mem);

	for (uint32_t i = 0; i < max_batch; i++)
		m->ones[i] = 1.0f;
	/*
	 * He initialisation: N(0, 2/in) keeps the variance of ReLU
	 * activations about constant from layer to layer.
	 */
	for (unsigned i = 0; i < m->nlayers; i++) {
		struct mlp_layer *l = &m->l[i];
		double sd = sqrt(2.0 / l->in);

		for (size_t k = 0; k < (size_t)l->in * l->out; k++)
			l->w[k] = (float)(sd * normal(&rs));
	}
	*out = m;
	return 0;
}

void mlp_free(struct mlp *m)
{
	if (!m)
		return;
	free(m->mem);
	free(m);
}

int mlp_set_optim(struct mlp *m, float momentum, float weight_decay)
{
	/* Written so that NaN fails every test. */
	if (!(momentum >= 0.0f && momentum < 1.0f) || !(weight_decay >= 0.0f))
		return -EINVAL;
	m->momentum = momentum;
	m->weight_decay = weight_decay;
	return 0;
}

unsigned mlp_nlayers(const struct mlp *m)
{
	return m->nlayers;
}

int mlp_layer(struct mlp *m, unsigned i, struct mlp_view *v)
{
	if (i >= m->nlayers)
		return -EINVAL;
	v->in = m->l[i].in;
	v->out = m->l[i].out;
	v->w = m->l[i].w;
	v->b = m->l[i].b;
	v->gw = m->l[i].gw;
	v->gb = m->l[i].gb;
	return 0;
}

static uint32_t nclasses(const struct mlp *m)
{
	return m->l[m->nlayers - 1].out;
}

static int check_labels(const struct mlp *m, const int64_t *labels, uint32_t n)
{
	int64_t c = nclasses(m);

	for (uint32_t i = 0; i < n; i++)
		if (labels[i] < 0 || labels[i] >= c)
			return -ERANGE;
	return 0;
}

/* Forward pass over n <= max_batch samples; returns the logits [n, C]. */
static const float *forward(struct mlp *m, const float *x, uint32_t n)
{
	const float *in = x;

	for (unsigned i = 0; i < m->nlayers; i++) {
		struct mlp_layer *l = &m->l[i];
		size_t cells = (size_t)n * l->out;

		/* Seed every row with the bias; sgemm then adds A * W. */
		for (uint32_t r = 0; r < n; r++)
			memcpy(l->a + (size_t)r * l->out, l->b,
			       l->out * sizeof(float));
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n,
			    (int)l->out, (int)l->in, 1.0f, in, (int)l->in, l->w,
			    (int)l->out, 1.0f, l->a, (int)l->out);
		if (i + 1 < m->nlayers)
			for (size_t k = 0; k < cells; k++)
				l->a[k] = l->a[k] > 0.0f ? l->a[k] : 0.0f;
		in = l->a;
	}
	return in;
}

/*
 * Softmax cross-entropy of one row of logits z[0..c) against class y:
 * returns the loss, the argmax in *best, and with d non-NULL writes the
 * gradient (softmax - onehot) * scale. Subtracting the row's maximum
 * keeps expf() from overflowing; the loss is log(sum) - (z[y] - max).
 */
static double xent_row(const float *z, uint32_t c, uint32_t y, float *d,
		       float scale, uint32_t *best)
{
	float mx = z[0];
	double sum = 0.0;
	uint32_t arg = 0;

	for (uint32_t j = 1; j < c; j++)
		if (z[j] > mx) {
			mx = z[j];
			arg = j;
		}
	for (uint32_t j = 0; j < c; j++)
		sum += exp((double)(z[j] - mx));
	if (d) {
		for (uint32_t j = 0; j < c; j++)
			d[j] = (float)(exp((double)(z[j] - mx)) / sum) * scale;
		d[y] -= scale;
	}
	*best = arg;
	return log(sum) - (double)(z[y] - mx);
}

int mlp_grad(struct mlp *m, const float *x, const int64_t *labels, uint32_t n,
	     float *loss)
{
	uint32_t c = nclasses(m), best;
	const float *z;
	float *cur = m->d[0], *next = m->d[1], *t, scale;
	double sum = 0.0;
	int err;

	if (!x || !labels || n == 0 || n > m->max_batch)
		return -EINVAL;
	err = check_labels(m, labels, n);
	if (err)
		return err;

	z = forward(m, x, n);
	/* The loss is a mean over the batch, so is each sample's gradient. */
	scale = 1.0f / (float)n;
	for (uint32_t r = 0; r < n; r++)
		sum += xent_row(z + (size_t)r * c, c, (uint32_t)labels[r],
				cur + (size_t)r * c, scale, &best);

	for (unsigned i = m->nlayers; i-- > 0;) {
		struct mlp_layer *l = &m->l[i];
		const float *a = i ? m->l[i - 1].a : x;
		int in = (int)l->in, o = (int)l->out;

		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, o,
			    (int)n, 1.0f, a, in, cur, o, 0.0f, l->gw, o);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, o,
			    (int)n, 1.0f, m->ones, (int)n, cur, o, 0.0f, l->gb,
			    o);
		/* The first layer's input gradient is never used: skip it. */
		if (i == 0)
			break;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, in,
			    o, 1.0f, cur, o, l->w, o, 0.0f, next, in);
		/* ReLU passes the gradient only where it passed the value. */
		for (size_t k = 0; k < (size_t)n * l->in; k++)
			if (!(a[k] > 0.0f))
				next[k] = 0.0f;
		t = cur;
		cur = next;
		next = t;
	}
	if (loss)
		*loss = (float)(sum / n);
	return 0;
}

static void sgd(float *w, float *v, const float *g, size_t n, float lr,
		float mu, float wd)
{
	for (size_t k = 0; k < n; k++) {
		v[k] = mu * v[k] + g[k] + wd * w[k];
		w[k] -= lr * v[k];
	}
}

int mlp_train_step(struct mlp *m, const float *x, const int64_t *labels,
		   uint32_t n, float lr, float *loss)
{
	int err;

	if (!(lr > 0.0f))
		return -EINVAL;
	err = mlp_grad(m, x, labels, n, loss);
	if (err)
		return err;
	for (unsigned i = 0; i < m->nlayers; i++) {
		struct mlp_layer *l = &m->l[i];

		sgd(l->w, l->vw, l->gw, (size_t)l->in * l->out, lr, m->momentum,
		    m->weight_decay);
		sgd(l->b, l->vb, l->gb, l->out, lr, m->momentum, 0.0f);
	}
	return 0;
}

/*
 * Forward over any n, max_batch at a time. With labels, count the
 * correct predictions and sum the losses; with classes, store the
 * predictions.
 */
static void infer(struct mlp *m, const float *x, const int64_t *labels,
		  uint32_t n, uint32_t *classes, uint32_t *correct, double *sum)
{
	uint32_t c = nclasses(m), in = m->l[0].in, best;

	for (uint32_t done = 0; done < n;) {
		uint32_t k = n - done < m->max_batch ? n - done : m->max_batch;
		const float *z = forward(m, x + (size_t)done * in, k);

		for (uint32_t r = 0; r < k; r++) {
			const float *row = z + (size_t)r * c;
			uint32_t y = labels ? (uint32_t)labels[done + r] : 0;
			double l = xent_row(row, c, y, NULL, 0.0f, &best);

			if (classes)
				classes[done + r] = best;
			if (labels) {
				*sum += l;
				*correct += best == y;
			}
		}
		done += k;
	}
}

int mlp_predict(struct mlp *m, const float *x, uint32_t n, uint32_t *classes)
{
	if ((!x || !classes) && n)
		return -EINVAL;
	infer(m, x, NULL, n, classes, NULL, NULL);
	return 0;
}

int mlp_eval(struct mlp *m, const float *x, const int64_t *labels, uint32_t n,
	     uint32_t *correct, float *loss)
{
	uint32_t ok = 0;
	double sum = 0.0;
	int err;

	if (!correct || ((!x || !labels) && n))
		return -EINVAL;
	err = check_labels(m, labels, n);
	if (err)
		return err;
	infer(m, x, labels, n, NULL, &ok, &sum);
	*correct = ok;
	if (loss)
		*loss = n ? (float)(sum / n) : 0.0f;
	return 0;
}
