/* common/measure/step_meter.c: the bookkeeping around every step (see
 * step_meter.h). */
#include "measure/step_meter.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/interrupt.h"
#include "base/status.h"

void step_meter_init(step_meter_t *m, const step_meter_sinks_t *to)
{
    memset(m, 0, sizeof *m);
    m->to = *to;
}

void step_meter_begin(step_meter_t *m, long g, bool timed, bool first)
{
    double *acc = timed ? m->to.dev->phase_s : m->warm;
    m->timed = timed;
    m->first = first;
    m->rows = 0;
    if (first) /* the first step's phases are the difference */
        memcpy(m->before, acc, sizeof m->before);
    trace_step_begin(m->to.trace, g, timed);
    phase_clock_start(&m->pc, acc);
    m->t0 = m->pc.last;
}

double step_meter_end(step_meter_t *m, long samples)
{
    double dt = m->pc.last - m->t0;
    device_stats_t *dev = m->to.dev;
    trace_step_end(m->to.trace, m->t0, m->pc.last);
    if (m->timed) {
        dev->rows += m->rows;
        if (m->to.times)
            step_times_add(m->to.times, dt, samples);
        if (m->to.group)
            step_group_post(m->to.group, m->to.keeper, m->timed_done, dt, samples);
        m->timed_done++;
    }
    if (m->first) {
        for (int p = 0; p < PH_COUNT; p++)
            dev->first_phase_s[p] = m->pc.acc[p] - m->before[p];
        dev->first_rows = m->rows;
        if (m->to.story) {
            m->to.story->step_s = dt;
            m->to.story->filled = true;
        }
    }
    return dt;
}

int step_meter_loss(step_meter_t *m, long g, long total, long epoch, bool logs, double mean,
                    long global_samples, char *err)
{
    const config_t *c = m->to.cfg;
    /* A logged loss is always fetched: NaN or Inf there is divergence, and
     * a diverged run stops here rather than train (and save) garbage. */
    if (logs && !isfinite(mean) && !c->allow_nonfinite) {
        progress_clear(m->to.progress);
        return err_set(err, DDP_ERR_RUNTIME,
                       "step %ld: the loss is %s: the training diverged (lower --lr; "
                       "--allow-nonfinite keeps going)",
                       g + 1, isnan(mean) ? "nan" : mean > 0 ? "inf" : "-inf");
    }
    if (logs) {
        if (m->to.final_loss)
            *m->to.final_loss = mean;
        if (m->to.log) {
            if (loss_log_add(m->to.log, g + 1, epoch, mean) != DDP_OK)
                return err_set(err, DDP_ERR_RUNTIME, "out of memory for the loss log");
            progress_clear(m->to.progress); /* the loss line replaces it */
            if (!c->quiet)
                fprintf(c->json || c->csv ? stderr : stdout, "step %*ld/%ld  epoch %ld  loss %.6f\n",
                        total >= 1000 ? 5 : 3, g + 1, total, epoch + 1, mean);
        }
    }
    m->samples_done += global_samples;
    progress_update(m->to.progress, g + 1, epoch, mean, m->samples_done);
    /* SIGINT/SIGTERM/SIGHUP: the run stops after the step it was in. */
    int sig = interrupt_pending();
    if (sig) {
        progress_clear(m->to.progress);
        return err_set(err, DDP_ERR_INTERRUPTED, "interrupted by SIG%s after step %ld of %ld",
                       sigabbrev_np(sig), g + 1, total);
    }
    return DDP_OK;
}
