/* common/base/affinity.c: device threads pinned to cores (see affinity.h). */
#include "common/base/affinity.h"

#include <pthread.h>
#include <sched.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cpu_set_t g_before; /* the CPUs the process could use before any pin */
static bool g_have;

static void remember(void)
{
    g_have = sched_getaffinity(0, sizeof g_before, &g_before) == 0;
}

int affinity_cpus(void)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        return 1;
    int n = CPU_COUNT(&s);
    return n > 0 ? n : 1;
}

int affinity_allowed(cpu_set_t *set)
{
    pthread_once(&g_once, remember);
    if (!g_have)
        return 0;
    *set = g_before;
    return CPU_COUNT(set);
}

bool affinity_pin(int slot, int n)
{
    /* Remembered once, before the first pin: a DP thread pinned already
     * must not make the next one's "before" a single CPU. */
    pthread_once(&g_once, remember);
    if (!g_have || slot < 0 || n < 1 || CPU_COUNT(&g_before) < n)
        return false;
    int seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &g_before))
            continue;
        if (seen++ == slot) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            return sched_setaffinity(0, sizeof one, &one) == 0;
        }
    }
    return false;
}

void affinity_unpin(void)
{
    pthread_once(&g_once, remember);
    if (g_have)
        sched_setaffinity(0, sizeof g_before, &g_before);
}
