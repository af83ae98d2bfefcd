/* dp/dp_comm.c: DP's collectives on the devices' in-process group, each built from DP's plan
 * (torch.chunk's rows), and what the group tells about them turned into the device's phases,
 * --trace's comm lane and --explain's moves.  How the data moves is the group's. */
#include "dp/dp.h"

// ---------------------------------------------------------------------------
// the group's observer: device d's meter

static void on_waited(void *ctx)
{
    dp_dev_t *dv = ctx;
    step_meter_lap(&dv->meter, PH_IDLE);
}

/* A marker before a copy, when --trace or --explain's told step wants it; else -1. */
static int on_mark(void *ctx)
{
    dp_dev_t *dv = ctx;
    return dv->traced || step_meter_marks(&dv->meter) ? step_meter_mark(&dv->meter) : -1;
}

/* After it: its span on the comm lane and, in the told step, a move (timed once run). */
static void on_moved(void *ctx, int mark0, const comm_move_t *m)
{
    dp_dev_t *dv = ctx;
    trace_kind_t tk = m->kind == COLL_BROADCAST ? TR_REPLICATE
                      : m->kind == COLL_SCATTER ? TR_SCATTER
                      : m->kind == COLL_GATHER  ? TR_GATHER
                                                : TR_REDUCE;
    move_kind_t mk = m->kind == COLL_BROADCAST ? MOVE_REPLICATE
                     : m->kind == COLL_SCATTER ? dv->scatter_what
                     : m->kind == COLL_GATHER  ? MOVE_GATHER
                                               : MOVE_REDUCE;
    step_meter_span(&dv->meter, mark0, step_meter_mark(&dv->meter),
                    &(meter_span_t){.kind = tk, .lane = LANE_COMM, .bytes = m->bytes, .bucket = -1,
                                    .peer = m->peer, .move = mk, .ops = m->ops});
}

int dp_comm_join(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    TRY(comm_local_join(&dv->comm, c->pool.grp, d, dv->be, dv->nccl, err));
    comm_local_observe(dv->comm, &(comm_observer_t){on_waited, on_mark, on_moved, dv});
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the ops

/* torch.chunk along dim 0 */
dp_chunk_t dp_chunk(int batch, int k, int d)
{
    dp_chunk_t c = {0, 0};
    if (batch <= 0 || k <= 0)
        return c;
    int size = (batch + k - 1) / k; /* torch.chunk: ceil(batch / chunks) */
    long off = (long)d * size;
    if (off >= batch)
        return c; /* torch.chunk returned fewer chunks: this device sits out */
    c.off = (int)off;
    c.rows = batch - c.off < size ? batch - c.off : size;
    return c;
}

int dp_chunk_count(int batch, int k)
{
    if (batch <= 0 || k <= 0)
        return 0;
    int size = (batch + k - 1) / k;
    return (batch + size - 1) / size;
}

static comm_op_t broadcast_op(const dp_ctx_t *c, int d, int nrep)
{
    /* devices without rows in the step need no replica */
    return (comm_op_t){.kind = COLL_BROADCAST, .recv = c->dev[d].rep.params,
                       .count = c->spec.nparams, .root = 0, .idle = d >= nrep,
                       .tag = "the parameters"};
}

/* Chunk ch of device 0's rows src0 [batch, cols] into dst. */
static comm_op_t scatter_op(float *dst, const float *src0, int cols, dp_chunk_t ch,
                            const char *tag)
{
    return (comm_op_t){.kind = COLL_SCATTER, .send = src0, .recv = dst,
                       .count = (size_t)ch.rows * cols, .offset = (size_t)ch.off * cols,
                       .root = 0, .tag = tag};
}

/* Run op on device d's rank, or wait for it if launched before the step (*early), then lap
 * phase p (PH_COUNT: none). */
static int dp_coll(dp_ctx_t *c, int d, const comm_op_t *op, comm_handle_t *early, phase_t p,
                   char *err)
{
    dp_dev_t *dv = &c->dev[d];
    comm_handle_t h = early ? *early : 0;
    if (early)
        *early = 0;
    int rc = h ? comm_wait(dv->comm, h, NULL) : comm_run(dv->comm, op, NULL);
    if (rc != DDP_OK)
        return comm_check(dv->comm, rc, dv->name, err);
    if (p != PH_COUNT)
        step_meter_lap(&dv->meter, p);
    return DDP_OK;
}

int dp_broadcast(dp_ctx_t *c, int d, int nrep, char *err)
{
    comm_op_t op = broadcast_op(c, d, nrep);
    return dp_coll(c, d, &op, &c->dev[d].early[0], PH_REPLICATE, err);
}

/* The phase a scatter laps: a receiver's copy (device 0's part is a post). */
static phase_t scatter_phase(int d, dp_chunk_t ch)
{
    return d > 0 && ch.rows > 0 ? PH_SCATTER : PH_COUNT;
}

int dp_scatter_batch(dp_ctx_t *c, int d, const dp_plan_t *pl, int mi, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    if (d == 0 && mi > 0) /* the first was staged before the step */
        TRY(dp_stage(c, pl, mi));
    dp_chunk_t ch = dp_chunk(pl->rows[mi], c->ndev, d);
    /* the others read device 0's post, not gx, which device 0 may be changing now */
    comm_op_t op = scatter_op(dv->rep.x, d == 0 ? c->gx : NULL, model_in_dim(&c->spec), ch,
                              "the rows");
    dv->scatter_what = MOVE_SCATTER;
    return dp_coll(c, d, &op, &dv->early[1], scatter_phase(d, ch), err);
}

int dp_scatter_grad(dp_ctx_t *c, int d, dp_chunk_t ch, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    comm_op_t op = scatter_op(dv->rep.dout, c->gdout, model_out_dim(&c->spec), ch,
                              "the output gradient");
    dv->scatter_what = MOVE_GRAD_OUT;
    return dp_coll(c, d, &op, NULL, scatter_phase(d, ch), err);
}

int dp_gather(dp_ctx_t *c, int d, int rows, char *err)
{
    int out = model_out_dim(&c->spec);
    dp_chunk_t ch = dp_chunk(rows, c->ndev, d);
    comm_op_t op = {.kind = COLL_GATHER, .send = replica_output(&c->dev[d].rep), .recv = c->gout,
                    .count = (size_t)ch.rows * out, .offset = (size_t)ch.off * out, .root = 0,
                    .tag = "the outputs"};
    return dp_coll(c, d, &op, NULL, PH_COUNT, err); /* device 0 laps it with its loss */
}

int dp_reduce(dp_ctx_t *c, int d, char *err)
{
    /* a device that sat the whole step out adds nothing */
    dp_dev_t *dv = &c->dev[d];
    comm_op_t op = {.kind = COLL_REDUCE, .recv = dv->rep.grads, .count = c->spec.nparams,
                    .redop = REDOP_SUM, .root = 0, .idle = !dv->t.has_grad,
                    .tag = "the gradients"};
    return dp_coll(c, d, &op, NULL, PH_COMM_EXPOSED, err);
}

// ---------------------------------------------------------------------------
// staging and the next step's first moves

int dp_stage(dp_ctx_t *c, const dp_plan_t *pl, int mi)
{
    float *x, *y;
    TRY(step_stage(&c->dev[0].t, pl->idx[mi], pl->rows[mi], &x, &y));
    /* Written only when they change: their line is read by every device each step. */
    if (c->gx != x)
        c->gx = x;
    if (c->gy != y)
        c->gy = y;
    return DDP_OK;
}

int dp_launch_next(dp_ctx_t *c, const dp_plan_t *pl, char *err)
{
    /* Why after the barrier: a post is a store to a line the others read, which held up
     * device 0's arrival at the barrier (the seed-size step 6% slower). */
    dp_dev_t *dv = &c->dev[0];
    comm_op_t b = broadcast_op(c, 0, pl->nrep);
    comm_op_t s = scatter_op(dv->rep.x, c->gx, model_in_dim(&c->spec),
                             dp_chunk(pl->rows[0], c->ndev, 0), "the rows");
    if (comm_launch(dv->comm, &b, &dv->early[0]) != DDP_OK ||
        comm_launch(dv->comm, &s, &dv->early[1]) != DDP_OK)
        return comm_check(dv->comm, DDP_ERR_RUNTIME, dv->name, err);
    return DDP_OK;
}

static void prefetch(const float *p, size_t floats)
{
    for (size_t i = 0; i < floats; i += 16) /* a 64-byte line */
        __builtin_prefetch(p + i, 0, 3);
    if (floats > 0)
        __builtin_prefetch(p + floats - 1, 0, 3);
}

void dp_prefetch_next(const dp_ctx_t *c, int d, const dp_plan_t *pl)
{
    /* Why: those first reads of d's step are each a miss to another core, one after the
     * other; a prefetch starts them all at once.  Only for arenas moved whole. */
    size_t n = c->spec.nparams;
    if (d == 0 || comm_local_sliced(n) || pl->nmicro < 1)
        return;
    comm_local_prefetch(c->dev[d].comm); /* device 0's posts of them */
    if (d < pl->nrep)
        prefetch(c->dev[0].rep.params, n);
    dp_chunk_t ch = dp_chunk(pl->rows[0], c->ndev, d);
    int in = model_in_dim(&c->spec);
    if (ch.rows > 0)
        prefetch(c->gx + (size_t)ch.off * in, (size_t)ch.rows * in);
}
