/*
 * mix.c - the batch stages: mixup, cutmix and soft labels (mix.h).
 */
#include <math.h>
#include <string.h>

#include "dtype.h"
#include "imgkern.h"
#include "mix.h"

/* Sets batch seeds apart from sample seeds: "MIXBATCH" in ASCII. */
#define MIX_DOMAIN 0x4d49584241544348ull
/* Elements of one mixup piece: a pool task's worth (64 KiB of f32). */
#define MIX_PIECE 16384u
/*
 * Elements a kernel handles at a time: pair roll keeps the last
 * sample's original of them on the stack (4 KiB of f32).
 */
#define MIX_CHUNK 1024u

uint64_t mix_seed(uint64_t seed, uint32_t rank, uint32_t epoch, uint64_t batch)
{
	return rng_mix(rng_mix(seed, MIX_DOMAIN, rank), epoch, batch);
}

/* A standard normal variate (Marsaglia's polar method, one of the two). */
static double normal(struct rng *r)
{
	for (;;) {
		double u = 2 * rng_unit(r) - 1, v = 2 * rng_unit(r) - 1;
		double s = u * u + v * v;

		if (s > 0 && s < 1)
			return u * sqrt(-2 * log(s) / s);
	}
}

/*
 * The logarithm of a Gamma(a, 1) variate. Marsaglia and Tsang (2000) for
 * a >= 1; below, Gamma(a) = Gamma(a + 1) U^(1/a), whose logarithm stays
 * finite where U^(1/a) would underflow to 0 (a = 0.01).
 */
static double log_gamma_variate(struct rng *r, double a)
{
	double boost = 0, d, c;

	if (a < 1) {
		boost = log(1.0 - rng_unit(r)) / a; /* U in (0, 1] */
		a += 1;
	}
	d = a - 1.0 / 3.0;
	c = 1.0 / sqrt(9.0 * d);
	for (;;) {
		double x = normal(r), v = 1 + c * x, u;

		if (v <= 0)
			continue;
		v = v * v * v;
		u = 1.0 - rng_unit(r);
		if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
			return log(d * v) + boost;
	}
}

double mix_beta(struct rng *r, double a, double b)
{
	double lx = log_gamma_variate(r, a), ly = log_gamma_variate(r, b);

	/* X / (X + Y) = 1 / (1 + Y / X) */
	return 1.0 / (1.0 + exp(ly - lx));
}

static int64_t clip(int64_t v, int64_t hi)
{
	return v < 0 ? 0 : v > hi ? hi : v;
}

void mix_draw(const struct ispec_batch *sb, uint64_t seed, uint32_t h,
	      uint32_t w, struct mix_draw *d)
{
	struct rng r;
	bool cut;
	double lam, rat;
	int64_t ch, cw, cy, cx;

	memset(d, 0, sizeof(*d));
	d->pair = sb->pair;
	d->lam = 1;
	if (!sb->mixup && !sb->cutmix)
		return;
	rng_seed(&r, seed);
	/* timm draws the switch only when it has both. */
	cut = sb->cutmix > 0 && (!sb->mixup || rng_unit(&r) < sb->cut_p);
	lam = mix_beta(&r, cut ? sb->cutmix : sb->mixup,
		       cut ? sb->cutmix : sb->mixup);
	d->kind = cut ? MIX_CUTMIX : MIX_MIXUP;
	d->lam = lam;
	if (!cut || !h || !w)
		return;
	/* timm's rand_bbox(), then correct_lam. */
	rat = sqrt(1 - lam);
	ch = (int64_t)(h * rat);
	cw = (int64_t)(w * rat);
	cy = (int64_t)rng_below(&r, h);
	cx = (int64_t)rng_below(&r, w);
	d->box[0] = (uint32_t)clip(cx - cw / 2, w);
	d->box[1] = (uint32_t)clip(cy - ch / 2, h);
	d->box[2] = (uint32_t)clip(cx + cw / 2, w);
	d->box[3] = (uint32_t)clip(cy + ch / 2, h);
	d->lam = 1 - (double)(d->box[2] - d->box[0]) *
			     (double)(d->box[3] - d->box[1]) /
			     ((double)h * (double)w);
}

uint32_t mix_partner(unsigned pair, uint32_t i, uint32_t count)
{
	if (pair == ISPEC_PAIR_ROLL)
		return i ? i - 1 : count - 1;
	return count - 1 - i;
}

/* ------------------------------------------------------------ kernels */

/* binary16 -> binary32, exactly (subnormals, infinities and NaN too). */
static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ffu, bits;
	float f;

	if (e == 0x1f) {
		bits = sign | 0x7f800000u | m << 13;
	} else if (e) {
		bits = sign | (e + 112) << 23 | m << 13;
	} else {
		/* zero or subnormal: m x 2^-24 */
		f = (float)m * 0x1p-24f;
		return sign ? -f : f;
	}
	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* The weights of a mix: lam of a sample's own, rest of its partner's. */
struct kern {
	bool copy; /* cutmix: the partner's, bit for bit */
	float lam, rest;
};

/*
 * The loops below have no branch inside, so that the compiler can
 * vectorize them: a branch per element (copy or mix, pair or not) made
 * mixup of a batch of 256 f32 224 x 224 images several times slower.
 */

/* a[i] = lam a[i] + rest b[i]; a and b may be the same. */
static void lerp_u8(const struct kern *k, uint8_t *a, const uint8_t *b,
		    uint32_t n)
{
	/* timm mixes u8 in float and rounds to nearest. */
	for (uint32_t i = 0; i < n; i++)
		a[i] = (uint8_t)(k->lam * (float)a[i] + k->rest * (float)b[i] +
				 0.5f);
}

static void lerp_f32(const struct kern *k, float *a, const float *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		a[i] = k->lam * a[i] + k->rest * b[i];
}

static void lerp_f16(const struct kern *k, uint16_t *a, const uint16_t *b,
		     uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		a[i] = imgkern_f32_to_f16(k->lam * f16_to_f32(a[i]) +
					  k->rest * f16_to_f32(b[i]));
}

/* Both of a pair at once: a from b's original, b from a's. */
static void lerp2_u8(const struct kern *k, uint8_t *restrict a,
		     uint8_t *restrict b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		float va = a[i], vb = b[i];

		a[i] = (uint8_t)(k->lam * va + k->rest * vb + 0.5f);
		b[i] = (uint8_t)(k->lam * vb + k->rest * va + 0.5f);
	}
}

static void lerp2_f32(const struct kern *k, float *restrict a,
		      float *restrict b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		float va = a[i], vb = b[i];

		a[i] = k->lam * va + k->rest * vb;
		b[i] = k->lam * vb + k->rest * va;
	}
}

static void lerp2_f16(const struct kern *k, uint16_t *restrict a,
		      uint16_t *restrict b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		float va = f16_to_f32(a[i]), vb = f16_to_f32(b[i]);

		a[i] = imgkern_f32_to_f16(k->lam * va + k->rest * vb);
		b[i] = imgkern_f32_to_f16(k->lam * vb + k->rest * va);
	}
}

/*
 * x (own) becomes the mix of itself and y (the partner), n elements;
 * with pair true (x and y apart), y becomes the mix of itself and x's
 * original too.
 */
static void mix_run(const struct kern *k, unsigned dt, void *x, void *y,
		    uint32_t n, bool pair)
{
	size_t bytes = n * dtype_size(dt);

	if (k->copy) {
		unsigned char tmp[MIX_CHUNK * 4];

		if (!pair) {
			memmove(x, y, bytes);
			return;
		}
		memcpy(tmp, x, bytes);
		memcpy(x, y, bytes);
		memcpy(y, tmp, bytes);
		return;
	}
	switch (dt) {
	case DT_U8:
		if (pair)
			lerp2_u8(k, x, y, n);
		else
			lerp_u8(k, x, y, n);
		break;
	case DT_F16:
		if (pair)
			lerp2_f16(k, x, y, n);
		else
			lerp_f16(k, x, y, n);
		break;
	default:
		if (pair)
			lerp2_f32(k, x, y, n);
		else
			lerp_f32(k, x, y, n);
		break;
	}
}

/*
 * Elements [off, off + n) of every sample, n <= MIX_CHUNK. Flip mixes
 * the pairs (i, count - 1 - i) together, each from the other's original;
 * the middle sample of an odd count mixes with itself. Roll goes from
 * the last sample down, each from its predecessor's still original
 * elements, and sample 0 from the last one's, kept aside first.
 */
static void mix_chunk(const struct kern *k, const struct mix_draw *d,
		      const struct mix_image *im, uint64_t off, uint32_t n)
{
	_Alignas(64) unsigned char keep[MIX_CHUNK * 4];
	size_t es = dtype_size(im->dtype);
	uint32_t c = im->count;
	unsigned char *p0 = im->base + off * es;

#define AT(i) (p0 + (uint64_t)(i)*im->sample_bytes)
	if (d->pair == ISPEC_PAIR_ROLL) {
		memcpy(keep, AT(c - 1), n * es);
		for (uint32_t i = c - 1; i > 0; i--)
			mix_run(k, im->dtype, AT(i), AT(i - 1), n, false);
		mix_run(k, im->dtype, AT(0), keep, n, false);
		return;
	}
	for (uint32_t i = 0; i < c / 2; i++)
		mix_run(k, im->dtype, AT(i), AT(c - 1 - i), n, true);
	if (c % 2)
		mix_run(k, im->dtype, AT(c / 2), AT(c / 2), n, false);
#undef AT
}

uint32_t mix_pieces(const struct mix_draw *d, const struct mix_image *im)
{
	uint64_t elems = (uint64_t)ISPEC_CHANNELS * im->h * im->w;
	uint32_t rows = d->box[3] - d->box[1];

	if (!im->count)
		return 0;
	switch (d->kind) {
	case MIX_MIXUP: return (uint32_t)((elems + MIX_PIECE - 1) / MIX_PIECE);
	case MIX_CUTMIX:
		if (d->box[2] == d->box[0])
			return 0;
		return im->layout == ISPEC_NCHW ? ISPEC_CHANNELS * rows : rows;
	default: return 0;
	}
}

void mix_piece(const struct mix_draw *d, const struct mix_image *im, uint32_t k)
{
	struct kern kn = { .copy = d->kind == MIX_CUTMIX,
			   .lam = (float)d->lam,
			   .rest = (float)(1 - d->lam) };
	uint64_t off, len;

	if (d->kind == MIX_MIXUP) {
		uint64_t elems = (uint64_t)ISPEC_CHANNELS * im->h * im->w;

		off = (uint64_t)k * MIX_PIECE;
		len = elems - off < MIX_PIECE ? elems - off : MIX_PIECE;
	} else if (im->layout == ISPEC_NCHW) {
		/* channel k / rows, row box[1] + k % rows */
		uint32_t rows = d->box[3] - d->box[1];
		uint64_t ch = k / rows, y = d->box[1] + k % rows;

		off = (ch * im->h + y) * im->w + d->box[0];
		len = d->box[2] - d->box[0];
	} else {
		uint64_t y = d->box[1] + k;

		off = (y * im->w + d->box[0]) * ISPEC_CHANNELS;
		len = (uint64_t)(d->box[2] - d->box[0]) * ISPEC_CHANNELS;
	}
	for (uint64_t at = 0; at < len; at += MIX_CHUNK)
		mix_chunk(&kn, d, im, off + at,
			  (uint32_t)(len - at < MIX_CHUNK ? len - at :
							    MIX_CHUNK));
}

void mix_image(const struct mix_draw *d, const struct mix_image *im)
{
	uint32_t n = mix_pieces(d, im);

	for (uint32_t k = 0; k < n; k++)
		mix_piece(d, im, k);
}

void mix_labels(const struct mix_draw *d, const int64_t *label, uint32_t count,
		uint32_t classes, double eps, float *out)
{
	double lam = d->kind == MIX_NONE ? 1 : d->lam, off = eps / classes;

	for (uint32_t i = 0; i < count; i++) {
		float *y = out + (uint64_t)i * classes;
		int64_t own = label[i];
		int64_t other = label[mix_partner(d->pair, i, count)];

		for (uint32_t c = 0; c < classes; c++)
			y[c] = (float)off;
		/* (lam onehot + (1 - lam) onehot)(1 - eps) + eps / classes */
		y[own] = (float)(lam * (1 - eps) + off +
				 (other == own ? (1 - lam) * (1 - eps) : 0));
		if (other != own)
			y[other] = (float)((1 - lam) * (1 - eps) + off);
	}
}
