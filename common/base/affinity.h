/* common/base/affinity.h: which CPUs a device's thread runs on.  On the CPU backend a device is
 * a core: each device's thread is pinned to one of the CPUs the process may use, when there is
 * one for each device (why: docs/benchmarks.md, "The instrument's own weight"); the time
 * another process then holds that core is the device's "descheduled" time (timing.h). */
#ifndef DDPBENCH_AFFINITY_H
#define DDPBENCH_AFFINITY_H

#include <sched.h>
#include <stdbool.h>

/* The CPUs the calling thread may run on (sched_getaffinity), at least 1. */
int affinity_cpus(void);

/* The CPUs the process could run on before any thread was pinned (its
 * affinity: taskset, a cpuset), into set; their count, 0 when unknown. */
int affinity_allowed(cpu_set_t *set);

/* Pin the calling thread to the slot-th of the CPUs it may run on, when
 * there are n or more of them (one per device); true when it was pinned.
 * The first call remembers the CPUs the process could use before. */
bool affinity_pin(int slot, int n);

/* Let the calling thread run on the CPUs remembered by affinity_pin (a
 * helper thread started by a pinned one: DDP's communication thread must not
 * share its rank's core); nothing when nothing was pinned. */
void affinity_unpin(void);

#endif
