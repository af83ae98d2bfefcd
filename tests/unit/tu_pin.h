/* tests/unit/tu_pin.h: run the test process on one CPU (the one it is on),
 * and give back the CPUs it had; for the tests of a sleeper always being
 * woken, where two threads or ranks on one CPU never spin. */
#ifndef DDPBENCH_TU_PIN_H
#define DDPBENCH_TU_PIN_H

#include <criterion/criterion.h>
#include <sched.h>

/* Pin to the current CPU; the affinity before it into before. */
static inline void tu_pin_one_cpu(cpu_set_t *before)
{
    cpu_set_t one;
    cr_assert_eq(sched_getaffinity(0, sizeof *before, before), 0);
    CPU_ZERO(&one);
    int cpu = sched_getcpu();
    CPU_SET(cpu >= 0 ? cpu : 0, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
}

#endif
