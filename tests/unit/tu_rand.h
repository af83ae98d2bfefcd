/* tests/unit/tu_rand.h: the simulations' random numbers (xorshift64, a
 * uniform in (0, 1), a standard normal by Box-Muller), over a state the test
 * owns and seeds, so every run draws the same sequence. */
#ifndef DDPBENCH_TU_RAND_H
#define DDPBENCH_TU_RAND_H

#include <math.h>
#include <stdint.h>

static inline double tu_unif(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return ((double)(*s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static inline double tu_gauss(uint64_t *s)
{
    return sqrt(-2 * log(tu_unif(s))) * cos(6.283185307179586 * tu_unif(s));
}

#endif
