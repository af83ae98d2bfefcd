/* ddp/autotune.c: --bucket-mb auto (autotune.h), and its place between a rank's steps. */
#include "ddp/autotune.h"

#include <string.h>

#include "ddp/rank.h"

static const double candidates[] = {0.25, 1.0, 4.0, 16.0, 25.0, 64.0};
#define NCAND ((int)(sizeof candidates / sizeof candidates[0]))

/* The buckets a cap gives (the same count: the same buckets, the walk being greedy). */
static int buckets_of(const model_spec_t *spec, double first_mb, double mb)
{
    reducer_t r;
    char err[ERR_LEN];
    if (reducer_init(&r, NULL, NULL, spec, NULL, first_mb, mb, true, BUCKETS_CAPPED, err) != DDP_OK)
        return -1;
    int n = r.nb;
    reducer_free(&r);
    return n;
}

void autotune_init(autotune_t *t, const model_spec_t *spec, double first_mb, long start,
                   long warmup)
{
    memset(t, 0, sizeof *t);
    t->chosen = -1;
    t->tuned_g = -1;
    t->first = start + 1; /* the run's first step pays one-time costs: not a trial */
    long room = warmup - 1;
    int last = -1;
    for (int i = 0; i < NCAND && t->n < AUTOTUNE_MAX && t->n < room; i++) {
        int nb = buckets_of(spec, first_mb, candidates[i]);
        if (nb < 0 || nb == last)
            continue;
        last = nb;
        t->mb[t->n++] = candidates[i];
    }
    if (t->n < 2)
        t->n = 0; /* nothing to choose between */
}

int autotune_alloc(autotune_t *t, backend_t *be, char *err)
{
    if (!(t->buf = backend_alloc_for(be, AUTOTUNE_MAX * sizeof(float), MEM_COMM)))
        return err_set(err, DDP_ERR_RUNTIME, "out of device memory");
    return DDP_OK;
}

void autotune_free(autotune_t *t, backend_t *be)
{
    if (be && t->buf)
        backend_free(be, t->buf);
    t->buf = NULL;
}

double autotune_before(const autotune_t *t, long g)
{
    long i = g - t->first;
    return t->n > 0 && i >= 0 && i < t->n ? t->mb[i] : 0.0;
}

/* After step g took dt seconds on this rank. */
static void autotune_after(autotune_t *t, long g, double dt)
{
    long i = g - t->first;
    if (t->n > 0 && i >= 0 && i < t->n)
        t->step_s[i] = dt;
}

bool autotune_due(const autotune_t *t, long g) { return t->n > 0 && g == t->first + t->n - 1; }

/* Sum the ranks' times in t->buf and pick the fastest; *mb: its cap. */
static int autotune_choose(autotune_t *t, comm_t *comm, backend_t *be, double *mb, char *err)
{
    float *buf = t->buf;
    float h[AUTOTUNE_MAX] = {0};
    for (int i = 0; i < t->n; i++)
        h[i] = (float)t->step_s[i];
    /* Why an all-reduce: the sum is the same on every rank, so every rank picks the same
     * cap (a rank with other buckets than its peers would deadlock the group). */
    TRY(backend_check(be, backend_h2d(be, buf, h, sizeof h), NULL, err));
    TRY(comm_check(comm, comm_all_reduce(comm, buf, AUTOTUNE_MAX, REDOP_SUM), "--bucket-mb auto",
                   err));
    TRY(backend_check(be, backend_d2h(be, h, buf, sizeof h), NULL, err));
    t->chosen = 0;
    for (int i = 0; i < t->n; i++) {
        t->step_s[i] = h[i];
        if (h[i] < h[t->chosen])
            t->chosen = i;
    }
    *mb = t->mb[t->chosen];
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// between a rank's steps

/* New buckets with this cap, once every earlier step is reported (the meter resolved
 * them), so no all-reduce of the old buckets is still to be read. */
static int rebucket(rank_t *me, double mb)
{
    TRY(step_meter_finish(&me->meter, me->err));
    bool run_rest = me->red.run_rest;
    reducer_free(&me->red);
    graph_reset(&me->graph); /* other buckets: other collectives to capture */
    TRY(reducer_init(&me->red, me->comm, &me->meter, &me->spec, me->rep.grads,
                     me->cfg->first_bucket_mb, mb, me->cfg->overlap, BUCKETS_CAPPED, me->err));
    me->red.run_rest = run_rest;
    return DDP_OK;
}

int rank_autotune_before(rank_t *me, long g)
{
    if (!me->cfg->bucket_auto)
        return DDP_OK;
    /* The choice comes before the step after the last candidate, which on a device reports
     * only when the next step ends: have it report now (a wait, in the warm-up). */
    if (autotune_due(&me->tune, g - 1) && me->tune.tuned_g < g - 1) {
        TRY(step_meter_finish(&me->meter, me->err));
        TRY(rank_autotune_after(me));
    }
    double mb = autotune_before(&me->tune, g);
    return mb > 0.0 ? rebucket(me, mb) : DDP_OK;
}

int rank_autotune_after(rank_t *me)
{
    autotune_t *t = &me->tune;
    long g;
    double dt;
    if (!me->cfg->bucket_auto || !step_meter_resolved(&me->meter, &g, &dt) || g == t->tuned_g)
        return DDP_OK;
    t->tuned_g = g;
    autotune_after(t, g, dt);
    if (!autotune_due(t, g))
        return DDP_OK;
    double best;
    TRY(autotune_choose(t, me->comm, me->be, &best, me->err));
    if (me->rank == 0) {
        ddp_area_t *a = me->env->area;
        a->ntuned = t->n;
        for (int i = 0; i < t->n && i < RESULT_TUNE_MAX; i++) {
            a->tuned_mb[i] = t->mb[i];
            a->tuned_s[i] = t->step_s[i];
        }
        a->bucket_mb_chosen = best;
    }
    return rebucket(me, best);
}
