/* tests/unit/tsan_criterion.h: lets a Criterion suite run under ThreadSanitizer.
 * Include it in exactly one file of each test binary that TSan runs.
 *
 * Criterion's runner maps its shared arena at a random address between
 * 0x200000000000 and 0x600000000000, drawing 10 candidates with rand_r();
 * under TSan nearly all of that range is shadow memory, every draw is taken,
 * and the runner dies with "Could not initialize inheritable arena" before any
 * test runs (Snaipe/Criterion#274).  The only application range TSan leaves
 * there is 0x550000000000-0x568000000000, so under TSan this binary's rand_r
 * (which only that code calls) draws from it.  Harmless otherwise: the
 * definition exists only in -fsanitize=thread builds. */
#ifndef DDPBENCH_TSAN_CRITERION_H
#define DDPBENCH_TSAN_CRITERION_H

#if defined(__SANITIZE_THREAD__)
#include <stdint.h>

int rand_r(unsigned int *seed);
int rand_r(unsigned int *seed)
{
    /* BoxFort's address is 0x200000000000 + (r & 0x3fffff) << 24; keep it in
     * [0x550000000000, 0x568000000000) and let the page check skip collisions. */
    *seed = *seed * 1103515245u + 12345u;
    return (int)(0x350000u + (*seed >> 8) % 0x18000u);
}

/* DDP ranks start their communication thread after fork() in a process that
 * already has threads (OpenBLAS's pool): supported, and TSan must be told so. */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "die_after_fork=0"; }
#endif

#endif
