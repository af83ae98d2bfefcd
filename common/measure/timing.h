/* common/timing.h: clocks and the phases a training step is split into.
 *
 * Every strategy accumulates wall time per phase per device in the same
 * phase_t buckets, so reports can put modes side by side. */
#ifndef DDPBENCH_TIMING_H
#define DDPBENCH_TIMING_H

#include <stddef.h>
#include <stdint.h>

#include "base/clock.h"

typedef enum {
    PH_DATA = 0,     /* gather sample rows on the host */
    PH_H2D,          /* host -> device copies of the batch */
    PH_SCATTER,      /* DP: batch chunks and output gradients to the devices */
    PH_REPLICATE,    /* DP: parameters from device 0 to the others */
    PH_FORWARD,
    PH_LOSS,         /* loss and its gradient (DP: with the gather to device 0) */
    PH_BACKWARD,
    PH_COMM_EXPOSED, /* communication the step had to wait for */
    PH_COMM_HIDDEN,  /* communication that ran behind backward */
    PH_OPTIM,
    PH_IDLE,         /* waiting on other devices */
    PH_COUNT
} phase_t;

const char *phase_name(phase_t p);       /* "forward" */
const char *phase_key(phase_t p);        /* stable JSON key: "forward_s" */


/* --trace's recorder (trace.h); phase_clock_lap stamps each lap into it. */
struct trace_rec;
void trace_lap(struct trace_rec *t, phase_t p, double t_begin, double t_end);

/* A stopwatch that charges the time since its last lap to a phase:
 * phase_clock_lap(&pc, PH_FORWARD) after the forward pass.  acc points at a
 * device's phase_s[] for timed steps, or at a scratch array during warm-up.
 * With a recorder attached (phase_clock_trace) each lap is also a trace event. */
typedef struct {
    double last;
    double *acc;
    struct trace_rec *tr; /* NULL: not tracing */
} phase_clock_t;

static inline void phase_clock_start(phase_clock_t *pc, double *acc)
{
    pc->acc = acc;
    pc->tr = NULL;
    pc->last = now_s();
}

/* Attach the device's recorder (may be NULL) after phase_clock_start. */
static inline void phase_clock_trace(phase_clock_t *pc, struct trace_rec *tr) { pc->tr = tr; }

static inline void phase_clock_lap(phase_clock_t *pc, phase_t p)
{
    double t = now_s();
    pc->acc[p] += t - pc->last;
    if (pc->tr)
        trace_lap(pc->tr, p, pc->last, t);
    pc->last = t;
}

#endif
