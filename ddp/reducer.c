/* ddp/reducer.c: bucket assignment over the gradient arena and the launches
 * that overlap the all-reduces with backward (see reducer.h). */
#include "ddp/reducer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// buckets

/* ZeRO-2 and -3: the buckets cut at every layer boundary, so a bucket holds one layer's
 * gradients at most (FSDP reduce-scatters per wrapped layer; docs/modes.md says why). */
static void cut_at_layers(reducer_t *red)
{
    const model_spec_t *s = red->spec;
    bucket_t cut[2 * MODEL_MAX_LAYERS];
    int n = 0;
    for (int i = 0; i < red->nb; i++) {
        const bucket_t *b = &red->b[i];
        /* backward reaches parameters last first: the last layer's part first */
        for (int p = b->last_param; p >= b->first_param;) {
            int l = p / 2, lo = 2 * l > b->first_param ? 2 * l : b->first_param;
            bucket_t *c = &cut[n++];
            memset(c, 0, sizeof *c);
            c->first_param = lo;
            c->last_param = p;
            c->off = model_param_off(s, lo);
            for (int q = lo; q <= p; q++)
                c->count += model_param_count(s, q);
            p = lo - 1;
        }
    }
    memcpy(red->b, cut, (size_t)n * sizeof *cut);
    red->nb = n;
    for (int i = 0; i < n; i++) {
        snprintf(red->b[i].tag, sizeof red->b[i].tag, "bucket %d", i);
        for (int q = red->b[i].first_param; q <= red->b[i].last_param; q++)
            red->bucket_of[q] = i;
    }
}

int reducer_init(reducer_t *r, comm_t *comm, step_meter_t *meter, const model_spec_t *spec,
                 float *grads, double first_bucket_mb, double bucket_mb, bool overlap,
                 bucket_unit_t unit, char *err)
{
    *r = (reducer_t){.comm = comm, .meter = meter, .spec = spec, .grads = grads,
                     .overlap = overlap};
    int np = 2 * spec->nlayers;
    r->b = calloc((size_t)np, sizeof *r->b);
    if (!r->b)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for gradient buckets");
    /* Walk the parameters last to first, closing a bucket before the parameter that would
     * take it past its cap (ZeRO-3: none); each slice starts at its last-added parameter. */
    double cap = unit == BUCKETS_PER_LAYER ? INFINITY : first_bucket_mb * 1048576.0, bytes = 0.0;
    bucket_t *cur = NULL;
    for (int p = np - 1; p >= 0; p--) {
        double pb = (double)model_param_count(spec, p) * sizeof(float);
        if (!cur || (cur->count > 0 && bytes + pb > cap)) {
            if (cur)
                cap = bucket_mb * 1048576.0;
            cur = &r->b[r->nb];
            snprintf(cur->tag, sizeof cur->tag, "bucket %d", r->nb);
            cur->last_param = p;
            r->nb++;
            bytes = 0.0;
        }
        cur->first_param = p;
        cur->off = model_param_off(spec, p);
        cur->count += model_param_count(spec, p);
        bytes += pb;
        r->bucket_of[p] = r->nb - 1;
    }
    if (unit != BUCKETS_CAPPED)
        cut_at_layers(r);
    for (int i = 0; i < r->nb && unit == BUCKETS_PER_LAYER; i++) /* ZeRO-3's are layers */
        snprintf(r->b[i].tag, sizeof r->b[i].tag, "layer %d", r->b[i].first_param / 2 + 1);
    return DDP_OK;
}

void reducer_free(reducer_t *r)
{
    free(r->b);
    memset(r, 0, sizeof *r);
}

// ---------------------------------------------------------------------------
// one backward

void reducer_begin(reducer_t *r, bool sync, long g)
{
    r->armed = sync;
    r->next = 0;
    r->g = g;
    r->par = (int)(g & 1);
    r->ready = 0;
    for (int i = 0; i < r->nb; i++) {
        r->b[i].pending = r->b[i].last_param - r->b[i].first_param + 1;
        if (sync) { /* the step's record of this bucket starts here */
            r->b[i].h[r->par] = 0;
            r->b[i].ready_mark[r->par] = -1;
        }
    }
}

/* run: launch and wait on this thread (comm_run), nothing being left to overlap. */
static int launch(reducer_t *r, int i, bool run)
{
    bucket_t *b = &r->b[i];
    /* When the gradients are written: a marker on the device's queue (the
     * last bucket under run_rest got its marker in the hook). */
    if (b->ready_mark[r->par] < 0)
        b->ready_mark[r->par] = r->meter ? step_meter_mark(r->meter) : -1;
    /* Ordered after the backward work that wrote the bucket's gradients (the
     * comm contract: launch follows the rank's earlier backend work).  A sum:
     * the loss scale already divided by the global batch (reducer.h). */
    int rc;
    if (r->ops && r->ops->launch) {
        rc = r->ops->launch(r->ops_ctx, r, i, run, &b->h[r->par]);
    } else {
        comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = r->grads + b->off, .count = b->count,
                        .redop = REDOP_SUM, .tag = b->tag};
        rc = run ? comm_run(r->comm, &op, &b->h[r->par]) : comm_launch(r->comm, &op, &b->h[r->par]);
    }
    if (rc != DDP_OK)
        r->launch_failed = true;
    return rc;
}

int reducer_hook(void *ctx, int layer)
{
    reducer_t *r = ctx;
    if (!r->armed)
        return DDP_OK;
    r->ready |= 3ull << (2 * layer);
    if (!r->overlap)
        return DDP_OK;
    r->b[r->bucket_of[2 * layer]].pending--;
    r->b[r->bucket_of[2 * layer + 1]].pending--;
    bucket_t *last = &r->b[r->nb - 1];
    if (r->run_rest && last->pending == 0 && last->ready_mark[r->par] < 0 && r->meter)
        last->ready_mark[r->par] = step_meter_mark(r->meter); /* launch_rest runs it */
    /* Launch in index order only: a ready bucket behind a pending one waits,
     * so every rank issues the same sequence of collectives.  The last one
     * becomes ready when backward ends: under run_rest it is launch_rest's. */
    int stop = r->run_rest ? r->nb - 1 : r->nb;
    for (; r->next < stop && r->b[r->next].pending == 0; r->next++)
        TRY(launch(r, r->next, false));
    return DDP_OK;
}

int reducer_unready(const reducer_t *r, char *names, size_t n)
{
    int np = 2 * r->spec->nlayers, k = 0;
    uint64_t none = (np == 64 ? ~0ull : (1ull << np) - 1) & ~r->ready;
    if (!r->armed || !r->ready || !none) /* (no hook at all: a rank without rows) */
        return 0;
    names[0] = 0;
    for (int p = 0; p < np; p++) {
        size_t u = strlen(names);
        char name[32];
        if (none >> p & 1 && ++k)
            snprintf(names + u, n - u, "%s%s", u ? ", " : "", model_param_name(p, name, sizeof name));
    }
    return k;
}

int reducer_launch_rest(reducer_t *r)
{
    if (!r->armed)
        return DDP_OK;
    for (; r->next < r->nb; r->next++)
        TRY(launch(r, r->next, r->run_rest));
    return DDP_OK;
}

int reducer_finish(reducer_t *r)
{
    return r->ops && r->ops->finish && r->armed ? r->ops->finish(r->ops_ctx, r) : DDP_OK;
}

double reducer_bytes(const reducer_t *r, int i)
{
    if (r->ops && r->ops->bytes)
        return r->ops->bytes(r->ops_ctx, r, i);
    return (double)r->b[i].count * sizeof(float);
}

/* --explain, the told step: the buckets as they ran, timed from the start of
 * the backward pass that all-reduced them [t0, t1] (reducer_spans has just
 * placed them), and what they sent (a --comm-hook's bytes). */
static void story_buckets(const reducer_t *r, step_story_t *st, double t0, double t1)
{
    move_stat_t *mv = &st->move[MOVE_ALLREDUCE];
    double first = 0.0, last = 0.0;
    st->nbuckets = r->nb;
    st->backward_s = t1 - t0;
    for (int i = 0; i < r->nb; i++) {
        const bucket_t *b = &r->b[i];
        uint64_t bytes = (uint64_t)reducer_bytes(r, i); /* what was sent */
        mv->bytes += bytes;
        mv->ops++;
        if (b->span.end_s > 0.0) {
            first = mv->ops == 1 || b->span.start_s < first ? b->span.start_s : first;
            last = b->span.end_s > last ? b->span.end_s : last;
        }
        if (i < STORY_MAX_BUCKETS)
            /* layers in the order backward reaches them: last first */
            st->bucket[i] = (bucket_story_t){b->last_param / 2, b->first_param / 2, bytes,
                                             b->ready_s - t0, b->span.start_s - t0,
                                             b->span.end_s - t0};
    }
    mv->seconds = last > first ? last - first : 0.0;
}

double reducer_spans(reducer_t *r, const step_rec_t *rec, double t0, double t1)
{
    double hidden = 0.0;
    int par = (int)(rec->g & 1);
    for (int i = 0; i < r->nb; i++) {
        bucket_t *bk = &r->b[i];
        comm_span_t s = {0, 0};
        int mk = bk->ready_mark[par];
        bk->ready_s = mk >= 0 && mk < rec->n ? step_rec_time(rec, mk) : 0.0;
        if (bk->h[par])
            comm_span(r->comm, bk->h[par], &s);
        bk->span = s;
        if (s.end_s <= 0.0)
            continue;
        double a = s.start_s > t0 ? s.start_s : t0;
        double b = s.end_s < t1 ? s.end_s : t1;
        if (b > a)
            hidden += b - a;
    }
    step_story_t *st = r->meter ? step_rec_story(r->meter, rec) : NULL;
    if (st) /* the meter keeps the story (rank 0) and this is the told step */
        story_buckets(r, st, t0, t1);
    return hidden;
}

void reducer_record(const reducer_t *r, bool timed, int *nb, double *bytes, double *secs,
                    trace_rec_t *tr)
{
    if (timed) { /* each bucket's all-reduce, for its bus bandwidth in the report */
        *nb = r->nb < STORY_MAX_BUCKETS ? r->nb : STORY_MAX_BUCKETS;
        for (int i = 0; i < *nb; i++) {
            const bucket_t *b = &r->b[i];
            bytes[i] = reducer_bytes(r, i);
            secs[i] += b->span.end_s > b->span.start_s ? b->span.end_s - b->span.start_s : 0.0;
        }
    }
    trace_kind_t kind = r->ops && r->ops->kind ? r->ops->kind : TR_ALLREDUCE;
    for (int i = 0; i < r->nb && tr; i++) {
        const bucket_t *b = &r->b[i];
        if (b->span.end_s > 0.0)
            trace_bucket(tr, kind, b->ready_s, b->span.start_s, b->span.end_s,
                         (uint64_t)b->count * sizeof(float), i);
    }
}
