/* common/base/fault.c: parsing DDPBENCH_FAULT and raising injected faults (see fault.h). */
#include "common/base/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static fault_kind_t g_kind;
static int g_device = -1;
static long g_step = -1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void parse(void)
{
    const char *s = getenv("DDPBENCH_FAULT");
    if (!s)
        return;
    char kind[16];
    int dev;
    long step;
    if (sscanf(s, "%15[a-z]:%d:%ld", kind, &dev, &step) != 3 || dev < 0 || step < 0)
        return;
    static const struct {
        const char *name;
        fault_kind_t kind;
    } kinds[] = {{"error", FAULT_ERROR}, {"kill", FAULT_KILL}, {"exit", FAULT_EXIT},
                 {"stall", FAULT_STALL}, {"write", FAULT_WRITE}, {"pause", FAULT_PAUSE},
                 {"sum", FAULT_SUM}, {"linger", FAULT_LINGER},
                 {"ulp", FAULT_ULP}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kind, kinds[i].name) == 0) {
            g_kind = kinds[i].kind;
            g_device = dev;
            g_step = step;
        }
}

fault_kind_t fault_at(int device_index, long step)
{
    pthread_once(&g_once, parse);
    if (g_kind != FAULT_NONE && device_index == g_device && step == g_step)
        return g_kind;
    return FAULT_NONE;
}

void fault_raise(fault_kind_t kind)
{
    switch (kind) {
    case FAULT_KILL:
        raise(SIGKILL);
        break;
    case FAULT_EXIT:
        _exit(7);
    case FAULT_STALL:
        for (;;)
            pause();
    default:
        break;
    }
}

/* Why atomic: armed and taken by one thread in practice, but a flag any
 * thread may touch must not be a data race. */
static atomic_bool g_pause;

void fault_pause_arm(void) { g_pause = true; }

bool fault_pause_take(void) { return atomic_exchange(&g_pause, false); }
