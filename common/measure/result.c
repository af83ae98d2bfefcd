/* common/measure/result.c: building and freeing a run_result_t (see result.h). */
#include "measure/result.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

void result_init(run_result_t *r)
{
    memset(r, 0, sizeof *r);
    r->train_accuracy = -1.0;
    r->train_loss = -1.0;
}

void result_free(run_result_t *r)
{
    for (int i = 0; i < MAX_DEVICES; i++)
        trace_rec_free(r->trace[i]);
    free(r->times.step_s);
    if (!r->log.fixed)
        free(r->log.pt);
    free(r->params);
    result_init(r);
}

int step_times_alloc(step_times_t *t, long timed)
{
    t->step_s = calloc((size_t)(timed > 0 ? timed : 1), sizeof *t->step_s);
    t->cap = t->step_s ? timed : 0;
    return t->step_s ? DDP_OK : DDP_ERR_RUNTIME;
}

void step_times_add(step_times_t *t, double dt, long samples)
{
    if (t->n < t->cap)
        t->step_s[t->n++] = dt;
    t->timed_s += dt;
    t->timed_samples += samples;
}

int loss_log_add(loss_log_t *l, long step, long epoch, double loss)
{
    if (l->n == l->cap) {
        if (l->fixed)
            return DDP_OK;
        long cap = l->cap ? 2 * l->cap : 64;
        loss_point_t *p = realloc(l->pt, (size_t)cap * sizeof *p);
        if (!p)
            return DDP_ERR_RUNTIME;
        l->pt = p;
        l->cap = cap;
    }
    l->pt[l->n++] = (loss_point_t){step, epoch, loss};
    return DDP_OK;
}

void result_finish(run_result_t *r)
{
    r->samples_per_s =
        r->times.timed_s > 0.0 ? (double)r->times.timed_samples / r->times.timed_s : 0.0;
    if (r->params)
        r->checksum = model_checksum(r->params, r->nparams);
}

int result_trace_init(run_result_t *r, bool cfg_trace, int ndev, int accum, int extra_per_step)
{
    if (!cfg_trace)
        return DDP_OK;
    uint32_t cap = trace_capacity(accum, extra_per_step);
    for (int i = 0; i < ndev && i < MAX_DEVICES; i++)
        if (!r->trace[i] && !(r->trace[i] = trace_rec_create(cap, i)))
            return DDP_ERR_RUNTIME;
    return DDP_OK;
}

const char *move_name(move_kind_t k)
{
    static const char *const names[MOVE_COUNT] = {
        "batch", "scatter", "replicate", "gather", "output gradients", "reduce", "broadcast",
        "all-reduce"};
    return (int)k >= 0 && k < MOVE_COUNT ? names[k] : "?";
}
