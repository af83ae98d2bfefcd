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

/* A forked child's threads must not take a stack that one of its parent's
 * live threads had.  In the child glibc hands the stacks of the threads that
 * did not survive fork (Criterion's nanomsg thread, OpenBLAS's pool) to its
 * stack cache, so the child's first pthread_create can get the very address
 * -- and pthread_t -- of a thread TSan still counts as alive: TSan then stops
 * the rank with "dup thread with used id" and the test fails.  Which cached
 * stack is taken depends on how many threads the parent had, so it failed
 * every run under OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1 or one CPU and
 * passed on two.  Every process asks for a stack one step larger than its
 * parent's (fork_depth counts the forks since the test began): glibc reuses a
 * cached stack only when it is at least the size asked for, so a parent's
 * are never handed out again.  Only threads created with default attributes
 * (all of ours) are changed. */
#include <dlfcn.h>
#include <pthread.h>

static unsigned tsan_fork_depth;
static void tsan_forked(void) { tsan_fork_depth++; }
__attribute__((constructor)) static void tsan_count_forks(void) { pthread_atfork(NULL, NULL, tsan_forked); }

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    static create_fn next; /* TSan's interceptor, which calls glibc's */
    if (!next)
        *(void **)&next = dlsym(RTLD_NEXT, "pthread_create");
    if (attr)
        return next(t, attr, fn, arg);
    pthread_attr_t own;
    pthread_attr_init(&own);
    pthread_attr_setstacksize(&own, ((size_t)8 << 20) + ((size_t)tsan_fork_depth + 1) * ((size_t)256 << 10));
    int rc = next(t, &own, fn, arg);
    pthread_attr_destroy(&own);
    return rc;
}
#endif

#endif
