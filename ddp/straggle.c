/* ddp/straggle.c: --slow-rank R:F's straggler (see straggle.h; the rule and its measurements:
 * docs/scenarios.md): (F - 1) x the step's micro-batches of extra work, whole passes before the
 * step's first backward (passes()) and the fraction (spin() on the CPU's thread clock; on a GPU a
 * pass over round(frac x rows) rows the real forward overwrites).  The same bits either way. */
#include "ddp/straggle.h"

#include <math.h>

#include "common/base/clock.h"
#include "common/base/status.h"

void straggle_init(straggle_t *s, const config_t *cfg, int rank, backend_t *be, replica_t *rep,
                   step_meter_t *meter)
{
    *s = (straggle_t){.cfg = cfg, .be = be, .rep = rep, .meter = meter, .rank = rank,
                      .slow = rank == cfg->slow_rank && cfg->slow_factor > 1.0,
                      .on_cpu = cfg->backend == BACKEND_CPU};
}

static int dev(straggle_t *s, int rc, char *err) { return backend_check(s->be, rc, NULL, err); }

/* Whole passes: forwards, then backwards that write no gradient of the step. */
static int passes(straggle_t *s, const float *x, int rows, int times, char *err)
{
    replica_t *rep = s->rep;
    for (int i = 0; i < times; i++)
        TRY(dev(s, model_forward(rep, x, rows), err));
    step_meter_lap(s->meter, PH_FORWARD);
    for (int i = 0; i < times; i++)
        TRY(dev(s, model_backward(rep, x, rows, rep->dout, false, NULL, NULL), err));
    step_meter_lap(s->meter, PH_BACKWARD);
    return DDP_OK;
}

/* Compute on this thread until it has used `cpu_s` more CPU seconds. */
static void spin(straggle_t *s, double cpu_s)
{
    volatile double acc = 1.0;
    double until = thread_cpu_s() + cpu_s;
    while (thread_cpu_s() < until)
        for (int i = 0; i < 256; i++)
            acc = acc * 1.0000001 + 1e-9;
    step_meter_lap(s->meter, PH_BACKWARD);
}

/* The step's extra work: whole micro-batch passes, and the fraction of one
 * pass left over (0 <= *frac < 1). */
static int plan(const config_t *cfg, int nmicro, double *frac)
{
    double extra = (cfg->slow_factor - 1.0) * nmicro;
    int whole = (int)floor(extra + 1e-9);
    *frac = extra - whole > 1e-9 ? extra - whole : 0.0;
    return whole;
}

void straggle_begin(straggle_t *s, const schedule_t *sch, long g)
{
    s->nmicro = 0;
    for (int m = 0; m < s->cfg->accum && s->slow; m++)
        s->nmicro += schedule_rank_micro_rows(sch, g, m, s->rank) > 0;
    s->cpu0 = s->slow && s->on_cpu ? thread_cpu_s() : 0.0;
    s->extra_cpu = 0.0;
}

int straggle_before(void *ctx, const float *x, int rows, bool first, char *err)
{
    straggle_t *s = ctx;
    s->frac = 0.0;
    s->whole = s->slow && first ? plan(s->cfg, s->nmicro, &s->frac) : 0;
    long part_rows = s->frac > 0 && !s->on_cpu ? lround(s->frac * rows) : 0;
    if (part_rows >= rows) { /* rounds up to a whole pass */
        s->whole++;
        part_rows = 0;
    }
    if (part_rows > 0) /* the fraction on a GPU: a partial pass the real one overwrites */
        TRY(passes(s, x, (int)part_rows, 1, err));
    return DDP_OK;
}

int straggle_after(void *ctx, const float *x, int rows, char *err)
{
    straggle_t *s = ctx;
    double e0 = s->slow && s->on_cpu ? thread_cpu_s() : 0.0;
    if (s->whole > 0)
        TRY(passes(s, x, rows, s->whole, err));
    if (s->frac > 0 && s->on_cpu) /* nmicro real passes took compute_cpu_s last step */
        spin(s, s->frac * s->compute_cpu_s / s->nmicro);
    if (s->slow && s->on_cpu)
        s->extra_cpu += thread_cpu_s() - e0;
    return DDP_OK;
}

void straggle_end(straggle_t *s, bool computed)
{
    if (s->slow && s->on_cpu && computed) /* the real work alone: the next step's unit */
        s->compute_cpu_s = thread_cpu_s() - s->cpu0 - s->extra_cpu;
}
