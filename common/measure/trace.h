/* common/measure/trace.h: a bounded recorder of timed events for --trace and --report,
 * one per device slot (NULL: tracing off).  ONE writer (the device's thread or the DDP
 * rank's main thread, never a comm thread): no locks or atomics.  No pointers: DDP puts
 * one per rank in its shared segment.  Times are now_s(): ranks line up as they are. */
#ifndef DDPBENCH_TRACE_H
#define DDPBENCH_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/measure/timing.h"

#define TRACE_MAX_STEPS 50        /* timed steps recorded per run */
#define TRACE_MAX_EVENTS (1u << 18) /* per recorder: about 10 MiB */

typedef enum {
    LANE_COMPUTE = 0, /* the device's own timeline: the phases, back to back */
    LANE_COMM,        /* transfers and collectives, which may overlap compute */
    LANE_COUNT
} trace_lane_t;

/* What an event is.  0 .. PH_COUNT-1 are the phases of timing.h. */
typedef enum {
    TR_STEP = PH_COUNT, /* one whole optimizer step (encloses its phases) */
    TR_ALLREDUCE,       /* DDP: one bucket's all-reduce (bucket = its index) */
    TR_BROADCAST,       /* DDP: the initial broadcast of the parameters */
    TR_REPLICATE,       /* DP: parameters copied to device `peer` */
    TR_SCATTER,         /* DP: input rows (or output gradients) to device `peer` */
    TR_GATHER,          /* DP: outputs of device `peer` to device 0 */
    TR_REDUCE,          /* DP: gradients of device `peer` added on device 0 */
    TR_REDUCE_SCATTER,  /* DDP --zero1: one bucket's reduce-scatter (bucket = its index) */
    TR_KIND_COUNT
} trace_kind_t;

typedef struct {
    double t_begin, t_end; /* now_s() */
    double t_ready;        /* a bucket's all-reduce: when it was launched (else 0) */
    uint64_t bytes;        /* bytes moved; 0 when not a transfer */
    int32_t step;          /* optimizer step, 1-based */
    int16_t kind;          /* trace_kind_t */
    int8_t lane;           /* trace_lane_t */
    int8_t unused;
    int32_t bucket;        /* bucket index, -1 when none */
    int32_t peer;          /* the other device slot of a copy, -1 when none */
} trace_event_t;

typedef struct trace_rec {
    uint32_t cap;       /* events ev[] can hold */
    uint32_t n;         /* events recorded */
    uint32_t dropped;   /* events lost because ev[] was full */
    int32_t device;     /* device slot: the index in run_result_t.dev */
    int32_t max_steps;  /* timed steps to record */
    int32_t steps;      /* timed steps begun so far */
    int32_t step;       /* the current step, 1-based (0 before the first) */
    int32_t active;     /* the current step is being recorded */
    trace_event_t ev[]; /* cap events */
} trace_rec_t;

/* Events for TRACE_MAX_STEPS steps of accum micro-batches and extra_per_step more. */
uint32_t trace_capacity(int accum, int extra_per_step);
/* Bytes a recorder of cap events occupies (for placing it in shared memory). */
size_t trace_rec_bytes(uint32_t cap);
/* Set up a recorder in memory of trace_rec_bytes(cap) bytes. */
void trace_rec_init(trace_rec_t *t, uint32_t cap, int device);
/* Allocate and set up one; NULL when out of memory. */
trace_rec_t *trace_rec_create(uint32_t cap, int device);
/* A private copy (n events only) of a recorder, e.g. out of a shared segment. */
trace_rec_t *trace_rec_clone(const trace_rec_t *t);
void trace_rec_free(trace_rec_t *t);

const char *trace_kind_name(trace_kind_t k); /* "forward", "step", "all-reduce", ... */

/* Start optimizer step g (0-based); only timed steps are recorded. */
static inline void trace_step_begin(trace_rec_t *t, long g, bool timed)
{
    if (!t)
        return;
    t->step = (int32_t)(g + 1);
    t->active = timed && t->steps < t->max_steps;
    if (t->active)
        t->steps++;
}

/* Record one event of the current step. */
static inline void trace_event(trace_rec_t *t, trace_kind_t kind, trace_lane_t lane,
                               double t_begin, double t_end, uint64_t bytes, int bucket,
                               int peer)
{
    if (!t || !t->active)
        return;
    if (t->n >= t->cap) {
        t->dropped++;
        return;
    }
    t->ev[t->n++] = (trace_event_t){.t_begin = t_begin, .t_end = t_end, .bytes = bytes,
                                    .step = t->step, .kind = (int16_t)kind, .lane = (int8_t)lane,
                                    .bucket = bucket, .peer = peer};
}

/* A bucket's collective, launched at t_ready (its last gradient), run t_begin..t_end. */
static inline void trace_bucket(trace_rec_t *t, trace_kind_t kind, double t_ready, double t_begin,
                                double t_end, uint64_t bytes, int bucket)
{
    uint32_t n = t ? t->n : 0;
    trace_event(t, kind, LANE_COMM, t_begin, t_end, bytes, bucket, -1);
    if (t && t->n > n)
        t->ev[n].t_ready = t_ready > 0.0 && t_ready <= t_begin ? t_ready : t_begin;
}

/* A phase on the compute lane (what step_meter_lap calls). */
static inline void trace_phase(trace_rec_t *t, phase_t p, double t_begin, double t_end)
{
    trace_event(t, (trace_kind_t)p, LANE_COMPUTE, t_begin, t_end, 0, -1, -1);
}

/* The whole step on the compute lane (call at the end of the step). */
static inline void trace_step_end(trace_rec_t *t, double t_begin, double t_end)
{
    trace_event(t, TR_STEP, LANE_COMPUTE, t_begin, t_end, 0, -1, -1);
}

#endif
