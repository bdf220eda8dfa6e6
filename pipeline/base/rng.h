/*
 * rng.h - deterministic random numbers for sample order and augmentation.
 *
 * xoshiro256** seeded through splitmix64: fast, small state, and the same
 * sequence on every machine for the same seed. The order contract
 * (doc/design.md) derives every stream's numbers from (seed, epoch, index) by
 * rng_mix(), so nothing depends on threads or timing.
 */
#ifndef LD_RNG_H
#define LD_RNG_H

#include <stddef.h>
#include <stdint.h>

struct rng {
	uint64_t s[4];
};

/* Seed from one 64-bit value (any value, including 0, is fine). */
void rng_seed(struct rng *r, uint64_t seed);

/* Combine values into one seed, e.g. rng_mix(seed, epoch, index). */
uint64_t rng_mix(uint64_t a, uint64_t b, uint64_t c);

/* The next 64 random bits. */
uint64_t rng_next(struct rng *r);

/* A uniform integer in [0, n), without modulo bias. n must be > 0. */
uint64_t rng_below(struct rng *r, uint64_t n);

/* A uniform double in [0, 1). */
double rng_unit(struct rng *r);

/* Shuffle v[0..n) in place (Fisher-Yates). */
void rng_shuffle_u64(struct rng *r, uint64_t *v, uint64_t n);

#endif /* LD_RNG_H */
