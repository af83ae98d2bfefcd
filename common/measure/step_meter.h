/* common/measure/step_meter.h: the bookkeeping around every training step,
 * written once for the three loops (single, DP's device threads, DDP's ranks).
 *
 * A loop body reads as the training step alone:
 *
 *     step_meter_begin(&m, g, timed, first);
 *     ... stage ...;    step_meter_lap(&m, PH_DATA);
 *     ... forward ...;  step_meter_lap(&m, PH_FORWARD);
 *     ...
 *     step_meter_rows(&m, rows);           rows this device computed
 *     step_meter_end(&m, samples);         the step's wall time and totals
 *     step_meter_loss(&m, ...);            the loss line, the log, progress
 *
 * and the meter does the rest: the phase times of timed steps (warm-up steps
 * go to a scratch array), each phase and the step as --trace events, the
 * first step's own phase times for --explain, the step's wall time into the
 * run's step times, the loss log and loss line, and the progress line.
 * Like nccl-tests' BenchTime, it is the one place a measurement is taken.
 *
 * Each device's meter is written by one thread only.  What it writes into is
 * given once (step_meter_sinks_t); a NULL sink is another device's job (in
 * DP only device 0 keeps the run's step times and loss log, in DDP rank 0
 * keeps the loss log while every rank posts its step times to the group that
 * takes each step's slowest rank). */
#ifndef DDPBENCH_STEP_METER_H
#define DDPBENCH_STEP_METER_H

#include <stdbool.h>

#include "config/config.h"
#include "measure/progress.h"
#include "measure/result.h"
#include "measure/timing.h"
#include "measure/trace.h"

typedef struct {
    const config_t *cfg;   /* --quiet, --json/--csv: where the loss line goes */
    device_stats_t *dev;   /* this device's phase times, rows and first step */
    trace_rec_t *trace;    /* --trace recorder, or NULL */
    step_times_t *times;   /* the step wall times this device keeps, or NULL */
    step_group_t *group;   /* DDP: the group this rank posts its step times to, or NULL */
    int keeper;            /* and its place in it (the rank) */
    loss_log_t *log;       /* the loss log, or NULL; its keeper prints the loss line */
    double *final_loss;    /* the last logged loss, or NULL */
    step_story_t *story;   /* --explain: step_s of the run's first step, or NULL */
    progress_t *progress;  /* the progress line, or NULL */
} step_meter_sinks_t;

typedef struct {
    step_meter_sinks_t to;
    phase_clock_t pc;
    double warm[PH_COUNT];   /* phase times of untimed steps (not reported) */
    double before[PH_COUNT]; /* the accumulator when the first step began */
    double t0;               /* when this step began */
    bool timed, first;
    long rows;               /* rows this device computed in this step */
    long samples_done;       /* global samples of the steps ended so far */
    long timed_done;         /* timed steps ended so far */
} step_meter_t;

void step_meter_init(step_meter_t *m, const step_meter_sinks_t *to);

/* Step g (0-based) begins now: timed (after the warm-up) or not; first: the
 * run's first step, which --explain narrates. */
void step_meter_begin(step_meter_t *m, long g, bool timed, bool first);

/* Charge the time since the last lap to phase p (and stamp it for --trace);
 * returns the lap's end on the now_s() clock. */
static inline double step_meter_lap(step_meter_t *m, phase_t p)
{
    double t0 = m->pc.last, t1 = phase_clock_lap(&m->pc, p);
    trace_phase(m->to.trace, p, t0, t1);
    return t1;
}

/* The end of the last lap (now_s() clock). */
static inline double step_meter_last(const step_meter_t *m) { return m->pc.last; }

/* Charge seconds to a phase that no lap measured (DDP's hidden comm). */
static inline void step_meter_charge(step_meter_t *m, phase_t p, double seconds)
{
    m->pc.acc[p] += seconds;
}

/* This device computed rows sample rows in this step. */
static inline void step_meter_rows(step_meter_t *m, long rows) { m->rows += rows; }

/* The step ends now.  samples: what it adds to the kept step times' sample
 * count (the global batch, or a DDP rank's own rows).  Returns its wall time. */
double step_meter_end(step_meter_t *m, long samples);

/* After step g of `total` (epoch 0-based) that processed global_samples
 * samples: when logs, mean (NAN: not fetched) becomes the last loss, goes
 * into the log and out as the loss line; the progress line is updated with
 * mean.  Where the loop stops: DDP_ERR_RUNTIME naming the step when a logged
 * loss is NaN or infinite (unless --allow-nonfinite), DDP_ERR_INTERRUPTED
 * when a signal asked to stop (base/interrupt.h). */
int step_meter_loss(step_meter_t *m, long g, long total, long epoch, bool logs, double mean,
                    long global_samples, char *err);

#endif
