/*
 * rng.c - xoshiro256** and splitmix64 (public-domain algorithms by
 * Blackman and Vigna), written out from their published definitions.
 */
#include "rng.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

uint64_t rng_mix(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t x = a;
	uint64_t h = splitmix64(&x);

	x = h ^ b;
	h = splitmix64(&x);
	x = h ^ c;
	return splitmix64(&x);
}

uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t rng_below(struct rng *r, uint64_t n)
{
	/* Lemire's multiply-and-reject: unbiased, rarely loops. */
	unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
	uint64_t lo = (uint64_t)m;

	if (lo < n) {
		uint64_t t = -n % n;

		while (lo < t) {
			m = (unsigned __int128)rng_next(r) * n;
			lo = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

void rng_shuffle_u64(struct rng *r, uint64_t *v, uint64_t n)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = rng_below(r, i);
		uint64_t t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}
