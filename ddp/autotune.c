/* ddp/autotune.c: --bucket-mb auto (see autotune.h). */
#include "ddp/autotune.h"

#include <string.h>

static const double candidates[] = {0.25, 1.0, 4.0, 16.0, 25.0, 64.0};
#define NCAND ((int)(sizeof candidates / sizeof candidates[0]))

/* The bucket counts a cap gives (caps with the same count give the same
 * buckets: the walk is greedy from the last parameter). */
static int buckets_of(const model_spec_t *spec, double first_mb, double mb)
{
    reducer_t r;
    char err[ERR_LEN];
    if (reducer_init(&r, NULL, NULL, spec, NULL, first_mb, mb, true, err) != DDP_OK)
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

double autotune_before(const autotune_t *t, long g)
{
    long i = g - t->first;
    return t->n > 0 && i >= 0 && i < t->n ? t->mb[i] : 0.0;
}

void autotune_after(autotune_t *t, long g, double dt)
{
    long i = g - t->first;
    if (t->n > 0 && i >= 0 && i < t->n)
        t->step_s[i] = dt;
}

bool autotune_due(const autotune_t *t, long g) { return t->n > 0 && g == t->first + t->n - 1; }

int autotune_choose(autotune_t *t, comm_t *comm, backend_t *be, float *buf, double *mb, char *err)
{
    float h[AUTOTUNE_MAX] = {0};
    for (int i = 0; i < t->n; i++)
        h[i] = (float)t->step_s[i];
    /* Why an all-reduce: each rank timed its own steps; the sum is the same
     * on every rank, so every rank picks the same cap (a rank with other
     * buckets than its peers would deadlock the group). */
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
