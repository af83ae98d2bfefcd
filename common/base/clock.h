/* common/base/clock.h: the one clock every layer reads.
 *
 * CLOCK_MONOTONIC, so it never jumps, and shared by every process of the
 * host: DDP ranks stamp events on the same time line without any exchange. */
#ifndef DDPBENCH_CLOCK_H
#define DDPBENCH_CLOCK_H

#include <stdint.h>

/* Monotonic nanoseconds / seconds. */
uint64_t now_ns(void);
double now_s(void);
/* CPU seconds the calling thread has run (CLOCK_THREAD_CPUTIME_ID): time the
 * scheduler gave another process is not in it. */
double thread_cpu_s(void);

#endif
