/* common/measure/timing.h: the phases a training step is split into, the same for
 * every strategy, so reports can put modes side by side. */
#ifndef DDPBENCH_TIMING_H
#define DDPBENCH_TIMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/clock.h"

typedef enum {
    PH_DATA = 0,     /* gather sample rows on the host */
    PH_H2D,          /* host -> device copies of the batch */
    PH_SCATTER,      /* DP: batch chunks and output gradients to the devices */
    PH_REPLICATE,    /* DP: parameters from device 0 to the others */
    PH_FORWARD,
    PH_LOSS,         /* loss and its gradient (DP: with the gather to device 0) */
    PH_BACKWARD,
    PH_COMM_EXPOSED, /* communication the step had to wait for */
    PH_GATHER,       /* ZeRO-3: all-gathers of a layer's parameters the step waited for */
    PH_COMM_HIDDEN,  /* communication that ran behind backward */
    PH_OPTIM,
    PH_IDLE,         /* waiting on other devices */
    PH_SKEW,         /* the run's step beyond this device's own (step_meter_skew) */
    PH_DESCHED,      /* runnable, not running: another process had the core (0 on a GPU) */
    PH_COUNT
} phase_t;

/* The phases where a device may wait (and sleep) for another: a collective, a barrier. */
static inline bool phase_waits(phase_t p)
{
    return p == PH_SCATTER || p == PH_REPLICATE || p == PH_COMM_EXPOSED || p == PH_GATHER ||
           p == PH_IDLE;
}

const char *phase_name(phase_t p);       /* "forward" */
const char *phase_key(phase_t p);        /* stable JSON key: "forward_s" */

#endif
