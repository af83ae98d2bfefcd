/* common/base/cpu_relax.h: the pause a spinning waiter takes between two
 * looks at what it waits for (it tells the core, and a sibling hyperthread,
 * that this is a spin loop). */
#ifndef DDPBENCH_CPU_RELAX_H
#define DDPBENCH_CPU_RELAX_H

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
