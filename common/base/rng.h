/* common/base/rng.h: the project's own seeded random numbers.
 *
 * Every random thing (parameter init, synthetic data, shuffles) comes from here,
 * on the host, so every mode and every backend starts from the same bits.
 * xoshiro256** seeded through splitmix64; the state is plain data so a
 * checkpoint can store it. */
#ifndef DDPBENCH_RNG_H
#define DDPBENCH_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4];
} rng_t;

void rng_seed(rng_t *r, uint64_t seed);
/* Derive an independent stream: the same (seed, stream) always gives the same numbers. */
void rng_seed_stream(rng_t *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(rng_t *r);
/* Uniform in [0, 1) with 24 random bits (exact in float). */
float rng_uniform(rng_t *r);
/* Uniform in [lo, hi). */
float rng_uniform_range(rng_t *r, float lo, float hi);
/* Standard normal (Box-Muller in double). */
double rng_normal(rng_t *r);
/* Uniform integer in [0, bound), unbiased (Lemire). bound > 0. */
uint64_t rng_below(rng_t *r, uint64_t bound);
/* out[i] = a permutation of 0..n-1 (Fisher-Yates). */
void rng_permutation(rng_t *r, uint32_t *out, size_t n);

/* Stream ids, so that changing one use of randomness never shifts another. */
enum {
    RNG_STREAM_INIT = 1,    /* model parameters */
    RNG_STREAM_DATA = 2,    /* synthetic features */
    RNG_STREAM_TEACHER = 3, /* synthetic teacher model */
    RNG_STREAM_NOISE = 4,   /* synthetic label noise */
    RNG_STREAM_SHUFFLE = 5  /* sampler permutations, offset by epoch */
};

#endif
