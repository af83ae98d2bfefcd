/* common/base/clock.h: the one clock every layer reads.
 *
 * CLOCK_MONOTONIC, so it never jumps, and shared by every process of the
 * host: DDP ranks stamp events on the same time line without any exchange. */
#ifndef DDPBENCH_CLOCK_H
#define DDPBENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic nanoseconds / seconds. */
static inline uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static inline double now_s(void) { return (double)now_ns() * 1e-9; }

/* CPU seconds the calling thread has run (CLOCK_THREAD_CPUTIME_ID): time the
 * scheduler gave another process is not in it. */
static inline double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#endif
