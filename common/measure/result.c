/* common/measure/result.c: building and freeing a run_result_t (see result.h). */
#include "common/measure/result.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"

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
    if (!r->log.fixed)
        free(r->log.pt);
    free(r->params);
    result_init(r);
}

void replica_rec_add(replica_rec_t *r, long g, double dist, bool differed)
{
    r->checks++;
    if (r->npoints < REPLICA_POINTS_MAX) {
        r->step[r->npoints] = g;
        r->dist[r->npoints++] = dist;
    }
    if (!differed || r->differed)
        return;
    r->differed = true;
    r->first_step = g;
}

// ---------------------------------------------------------------------------
// step times

/* splitmix64: a small, well-mixed stream for the reservoir's draws. */
static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void step_times_add(step_times_t *t, double dt, long samples)
{
    t->n++;
    t->timed_s += dt;
    t->timed_samples += samples;
    if (t->n == 1 || dt < t->min_s)
        t->min_s = dt;
    if (t->n == 1 || dt > t->max_s)
        t->max_s = dt;
    /* Algorithm R: step n replaces a random one of the kept with probability
     * STEP_SAMPLE_MAX / n, which keeps every step equally likely to be in. */
    if (t->n <= STEP_SAMPLE_MAX) {
        t->sample[t->n - 1] = dt;
    } else {
        uint64_t j = next_random(&t->rng) % (uint64_t)t->n;
        if (j < STEP_SAMPLE_MAX)
            t->sample[j] = dt;
    }
}

long step_times_kept(const step_times_t *t)
{
    return t->n < STEP_SAMPLE_MAX ? t->n : STEP_SAMPLE_MAX;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double step_times_quantile(const step_times_t *t, double p)
{
    long n = step_times_kept(t);
    double *c = n > 0 ? malloc((size_t)n * sizeof *c) : NULL;
    if (!c)
        return 0.0;
    memcpy(c, t->sample, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double pos = p / 100.0 * (double)(n - 1);
    long lo = (long)pos, hi = lo + 1 < n ? lo + 1 : lo;
    double out = c[lo] + (c[hi] - c[lo]) * (pos - (double)lo);
    free(c);
    return out;
}

// ---------------------------------------------------------------------------
// the loss log

int loss_log_add(loss_log_t *l, long step, long epoch, double loss)
{
    if (l->n == l->cap) {
        if (l->fixed || l->cap >= LOSS_LOG_MAX)
            return DDP_OK;
        long cap = l->cap ? 2 * l->cap : 64;
        if (cap > LOSS_LOG_MAX)
            cap = LOSS_LOG_MAX;
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
