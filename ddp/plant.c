/* ddp/plant.c: a scenario's planted mistake on a DDP rank (see plant.h). */
#include "ddp/plant.h"

#include <stdlib.h>

struct planted {
    plant_t p;
    train_step_t *t;
    reducer_t *red;
    const schedule_t *sch;
    float *copy;            /* bucket-view: the buckets' own buffer */
    bucket_ops_t ops;
    /* the step's hooks it stands in front of (the straggler's) */
    int (*before)(void *ctx, const float *x, int rows, bool first, char *err);
    int (*after)(void *ctx, const float *x, int rows, char *err);
    void *ctx;
    int (*pre)(void *ctx, int layer, bool backward); /* the replica's (ZeRO's) */
    void *pre_ctx;
    long fired;             /* collective: the step it ran its extra one (-1: not yet) */
};

static int before(void *ctx, const float *x, int rows, bool first, char *err)
{
    planted_t *p = ctx;
    return p->before ? p->before(p->ctx, x, rows, first, err) : DDP_OK;
}

/* loss-scale: this micro-batch's gradient x (global rows / its rows here). */
static int rank_mean(void *ctx, const float *x, int rows, char *err)
{
    planted_t *p = ctx;
    TRY(p->after ? p->after(p->ctx, x, rows, err) : DDP_OK);
    replica_t *rep = p->t->rep;
    float k = (float)schedule_step_rows(p->sch, p->red->g) / (float)rows;
    return step_check(p->t, backend_scale(rep->be, k, rep->dout,
                                           (size_t)rows * model_out_dim(rep->spec)), "loss");
}

/* collective: rank R all-reduces its loss at step S, as a rank that logs a
 * metric under a condition only it meets. */
static int extra(void *ctx, const float *x, int rows, char *err)
{
    planted_t *p = ctx;
    TRY(p->after ? p->after(p->ctx, x, rows, err) : DDP_OK);
    if (p->red->g != p->p.step || p->fired == p->red->g)
        return DDP_OK;
    p->fired = p->red->g;
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = p->t->rep->loss_sum, .count = 1,
                    .tag = "the loss this rank logs"};
    return comm_check(p->t->comm, comm_run(p->t->comm, &op, NULL), NULL, err);
}

/* unused: from step S, backward stops above layer L. */
static int detach(void *ctx, int layer, bool backward)
{
    planted_t *p = ctx;
    if (p->pre)
        TRY(p->pre(p->pre_ctx, layer, backward));
    return backward && layer < p->p.layer && p->red->g >= p->p.step ? MODEL_DETACH : DDP_OK;
}

/* no-sync and bucket-view: bucket i's collective in place of the plain all-reduce. */
static int launch(void *ctx, reducer_t *r, int i, bool run, comm_handle_t *h)
{
    planted_t *p = ctx;
    const bucket_t *b = &r->b[i];
    *h = 0;
    if (p->p.kind == PLANT_NO_SYNC && r->g >= p->p.step)
        return DDP_OK; /* nothing sent: each rank keeps its own gradients */
    float *buf = r->grads + b->off;
    if (p->copy) { /* the gradients copied into the bucket (ordered before the launch) */
        buf = p->copy + b->off;
        TRY(backend_d2d(p->t->be, buf, r->grads + b->off, b->count * sizeof *buf));
    }
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = buf, .count = b->count, .redop = REDOP_SUM,
                    .tag = b->tag};
    return run ? comm_run(r->comm, &op, h) : comm_launch(r->comm, &op, h);
}

/* bucket-view: after the wait for every bucket, the sums copied back. */
static int copy_back(void *ctx, reducer_t *r)
{
    planted_t *p = ctx;
    for (int i = 0; i < r->nb; i++)
        TRY(backend_d2d(p->t->be, r->grads + r->b[i].off, p->copy + r->b[i].off,
                        r->b[i].count * sizeof(float)));
    return DDP_OK;
}

int plant_install(planted_t **out, const config_t *cfg, int rank, train_step_t *t,
                  reducer_t *red, const schedule_t *sch, char *err)
{
    const plant_t *pl = &cfg->plant;
    bool everyone = pl->kind == PLANT_RANK_MEAN || pl->kind == PLANT_NO_SYNC ||
                    pl->kind == PLANT_BUCKET_COPY;
    *out = NULL;
    if ((pl->kind != PLANT_DETACH && pl->kind != PLANT_EXTRA_COLL && !everyone) ||
        (!everyone && rank != pl->rank))
        return DDP_OK;
    bool ops = pl->kind == PLANT_NO_SYNC || pl->kind == PLANT_BUCKET_COPY;
    if (ops && red->ops)
        return err_set(err, DDP_ERR_INPUT, "this scenario plants its mistake in plain DDP's "
                       "buckets: not with --zero or --comm-hook");
    planted_t *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the scenario");
    *p = (planted_t){.p = *pl, .t = t, .red = red, .sch = sch, .before = t->before_forward,
                     .after = t->after_loss, .ctx = t->extra_ctx, .pre = t->rep->pre,
                     .pre_ctx = t->rep->pre_ctx, .fired = -1};
    *out = p;
    size_t bytes = red->spec->nparams * sizeof(float);
    if (pl->kind == PLANT_BUCKET_COPY && !(p->copy = backend_alloc_for(t->be, bytes, MEM_COMM)))
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the buckets (%zu bytes)", bytes);
    if (ops) {
        p->ops = (bucket_ops_t){.launch = launch, .finish = p->copy ? copy_back : NULL};
        red->ops = &p->ops;
        red->ops_ctx = p;
    } else if (pl->kind == PLANT_DETACH) {
        t->rep->pre = detach;
        t->rep->pre_ctx = p;
    } else {
        t->before_forward = before;
        t->after_loss = pl->kind == PLANT_RANK_MEAN ? rank_mean : extra;
        t->extra_ctx = p;
    }
    return DDP_OK;
}

void plant_free(planted_t *p)
{
    if (!p)
        return;
    backend_free(p->t->be, p->copy);
    free(p);
}
