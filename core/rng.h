/*
 * Random numbers that make runs reproducible.
 *
 * struct dt_rng is xoshiro256** seeded through splitmix64 from (seed, stream):
 * every consumer derives its own stream (the permutation of epoch e uses
 * stream e, initializers use the parameter index, ...), so the numbers one
 * consumer draws never depend on how many another drew. dt_hash64() is a
 * counter-based generator for elementwise randomness (dropout masks): the value
 * for element i depends only on (key, i), on any device and thread count.
 */
#ifndef DT_RNG_H
#define DT_RNG_H

#include <stdint.h>

/* Functions both the CPU and the CUDA backend (device code) call. */
#ifdef __CUDACC__
#define DT_HOST_DEVICE __host__ __device__
#else
#define DT_HOST_DEVICE
#endif

struct dt_rng {
	uint64_t s[4];
};

void dt_rng_seed(struct dt_rng *r, uint64_t seed, uint64_t stream);
uint64_t dt_rng_next(struct dt_rng *r);
/* Uniform in [0, 1). */
double dt_rng_uniform(struct dt_rng *r);
/* Standard normal (Box-Muller). */
double dt_rng_normal(struct dt_rng *r);
/* Uniform integer in [0, n). */
uint64_t dt_rng_below(struct dt_rng *r, uint64_t n);

/* A well-mixed 64-bit function of (a, b). */
uint64_t dt_hash64(uint64_t a, uint64_t b);

/*
 * Uniform float in [0, 1) from (key, counter), counter < 2^32: a 32-bit
 * integer hash (lowbias32) of the counter mixed with both halves of the key,
 * cheap enough to vectorize inside elementwise loops. The CUDA backend's
 * dropout kernel calls this same function: masks agree across devices.
 */
static inline DT_HOST_DEVICE float dt_hash_uniform(uint64_t key, uint32_t counter)
{
	uint32_t x = counter ^ (uint32_t)key;
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	x ^= (uint32_t)(key >> 32);
	x *= 0x9e3779b1u;
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	return (float)(x >> 8) * (1.0f / 16777216.0f);
}

#endif
