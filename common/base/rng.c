/* common/base/rng.c: xoshiro256** + splitmix64 (see rng.h). */
#include "common/base/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_seed(rng_t *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

void rng_seed_stream(rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = stream * 0xD1B54A32D192ED03ull;
    rng_seed(r, seed ^ splitmix64(&x));
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* The generator's step, inlined where it runs in a loop (a permutation
 * draws one per element: an epoch of the seed-size model costs about a
 * step of it, so a call per element showed). */
static inline uint64_t next(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t rng_next(rng_t *r) { return next(r); }

float rng_uniform(rng_t *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float rng_uniform_range(rng_t *r, float lo, float hi) { return lo + (hi - lo) * rng_uniform(r); }

double rng_normal(rng_t *r)
{
    /* u1 in (0, 1] so the log is finite. */
    double u1 = ((double)(rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static inline uint64_t below(rng_t *r, uint64_t bound)
{
    uint64_t x = next(r);
    __uint128_t m = (__uint128_t)x * bound;
    uint64_t l = (uint64_t)m;
    if (l < bound) {
        uint64_t t = -bound % bound;
        while (l < t) {
            x = next(r);
            m = (__uint128_t)x * bound;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

uint64_t rng_below(rng_t *r, uint64_t bound) { return below(r, bound); }

void rng_permutation(rng_t *r, uint32_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)below(r, i);
        uint32_t t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
    }
}
