/* dp/dp_step.c: the step loop every DP device thread runs, and its step, fenced: DataParallel's
 * collectives (dp_comm.c) between each device's forward and backward.  A device's wait for the
 * others is its PH_IDLE, so the report shows who waits for whom.  On a GPU nothing here makes
 * the host wait: the group orders the queues by events, the meter's wait is the one sync. */
#include <stdio.h>

#include "common/base/fault.h"
#include "dp/dp.h"

// ---------------------------------------------------------------------------
// the plan of a step (device 0)

void dp_plan_step(dp_ctx_t *c, long g)
{
    dp_plan_t *p = &c->plan[g & 1];
    p->nmicro = 0;
    p->nrep = 1;
    for (int m = 0; m < c->cfg->accum; m++) {
        int rows;
        const uint32_t *idx = schedule_micro(&c->sch, g, m, &rows);
        if (rows == 0)
            break; /* the short last step of an epoch */
        p->rows[m] = rows;
        p->idx[m] = idx;
        p->nmicro++;
        /* a smaller last micro-batch can spread over more devices (torch.chunk) */
        int n = dp_chunk_count(rows, c->ndev);
        if (n > p->nrep)
            p->nrep = n;
    }
    p->step_rows = schedule_step_rows(&c->sch, g);
}

/* Is step g's first micro-batch staged during step g-1 and its broadcast and scatter launched
 * right after the barrier that ended it (dp_launch_next)?  On host memory only (a GPU's
 * staging belongs to the step that uses it), after the first step.  Every thread alike. */
static bool dp_staged_ahead(const dp_ctx_t *c, long g)
{
    return c->host_visible && g > c->start_step;
}

/* A step CUDA graphs may replay: one micro-batch of the whole batch. */
static bool dp_full_step(const dp_ctx_t *c, const dp_plan_t *pl)
{
    return pl->nmicro == 1 && pl->rows[0] == c->cfg->batch;
}

// ---------------------------------------------------------------------------
// pieces of a step

/* The barrier that ends a step; the wait is this device's idle time. */
static int dp_barrier(dp_ctx_t *c, int d, char *err)
{
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
    step_meter_lap(&c->dev[d].meter, PH_IDLE);
    return DDP_OK;
}

/* Device 0: the loss and output gradient over the whole gathered micro-
 * batch, scaled by 1/rows of the optimizer step like single mode. */
static int dp_loss(dp_ctx_t *c, const dp_plan_t *pl, int rows)
{
    dp_dev_t *dv = &c->dev[0];
    step_meter_t *m = &dv->meter;
    float scale = 1.0f / (float)pl->step_rows;
    TRY(step_check(&dv->t, backend_loss(dv->be, c->cfg->loss, c->gout, c->gy, rows,
                                        model_out_dim(&c->spec), scale, c->gdout, c->loss_sum),
                   "loss"));
    if (step_meter_logs(m))
        step_meter_fetch(m, c->loss_sum, 1);
    step_meter_lap(m, PH_LOSS);
    return DDP_OK;
}

// ---- TRAINING STEP BEGIN ----------------------------------------------------

/* Step g (plan pl) on device d's thread, as torch's DataParallel runs it (docs/modes.md).
 * torch replicates on every forward and reduces on every backward; with --accum the
 * parameters do not change between micro-batches and the sum is linear, so one of each per
 * step gives the same result for less traffic. */
static int dp_step(dp_ctx_t *c, int d, const dp_plan_t *pl, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    TRY(dp_broadcast(c, d, pl->nrep, err));
    for (int mi = 0; mi < pl->nmicro; mi++) {
        int rows = pl->rows[mi];
        dp_chunk_t ch = dp_chunk(rows, c->ndev, d); /* this device's rows */
        TRY(dp_scatter_batch(c, d, pl, mi, err));
        const float *x = d == 0 ? c->gx : dv->rep.x; /* device 0 reads its chunk in place */
        if (ch.rows > 0)
            TRY(step_forward(&dv->t, x, ch.rows));
        TRY(dp_gather(c, d, rows, err));
        if (d == 0)
            TRY(dp_loss(c, pl, rows));
        TRY(dp_scatter_grad(c, d, ch, err));
        if (ch.rows > 0) /* adds after the first micro-batch it had rows in */
            TRY(step_backward(&dv->t, x, ch.rows, NULL, NULL));
    }
    TRY(dp_reduce(c, d, err));
    return d == 0 ? step_optim(&dv->t, &c->opt) : DDP_OK;
}

// ---- TRAINING STEP END ------------------------------------------------------

/* After step g, when a checkpoint is due: device 0 writes it while the
 * others wait at a barrier (untimed, like single's write between steps). */
static int dp_checkpoint(dp_ctx_t *c, int d, long g, char *err)
{
    if (!ckpt_run_due(&c->ck, &c->sch, g))
        return DDP_OK;
    /* Nobody else reads device 0's state now: every device passed the barrier that ended
     * step g, and step g+1's replicate starts only after the barrier below. */
    if (d == 0)
        TRY(ckpt_run_write(&c->ck, &c->sch, c->dev[0].rep.params, &c->opt, g, err));
    /* Barrier: the checkpoint is written; the others must not replicate before. */
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the loop

int dp_device_loop(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    step_meter_t *m = &dv->meter; /* set up with the device (dp_device_init) */
    bool check = c->cfg->check_replicas > 0;
    for (long g = c->start_step; g < c->total_steps; g++) {
        /* written by device 0 before the barrier that ended the previous step */
        const dp_plan_t *pl = &c->plan[g & 1];
        /* --cuda-graph: a member begins its meter once it follows, so every marker of its
         * step is the graph's (graph.h). */
        bool graph = graph_arm(&dv->graph, g, dp_full_step(c, pl));
        if (d == 0 && check)
            TRY(dp_replicas(c, d, g, false, err));
        if (d == 0 || !graph)
            trainer_step_begin(m, &c->sch, g);
        step_begin(&dv->t);
        /* Device 0 stages the first micro-batch before a graph step begins (the copy stream
         * is not captured), unless it did in the step before. */
        if (d == 0 && !dp_staged_ahead(c, g))
            TRY(dp_stage(c, pl, 0));
        if (graph) {
            TRY(graph_fork(&dv->graph, g, err));
            if (d != 0)
                trainer_step_begin(m, &c->sch, g);
        }
        if (fault_at(d, g) == FAULT_ERROR)
            return err_set(err, DDP_ERR_RUNTIME, "%s: injected fault at step %ld", dv->name, g);
        TRY(dp_step(c, d, pl, err));
        if (d == 0 && g + 1 < c->total_steps) {
            dp_plan_step(c, g + 1); /* may load the next epoch's order */
            if (dp_staged_ahead(c, g + 1)) /* every device has read this step's */
                TRY(dp_stage(c, &c->plan[(g + 1) & 1], 0));
        }
        if (d == 0)
            step_meter_lap(m, PH_DATA); /* every step alike: a graph step's work never varies */
        /* Barrier: device 0's parameters are updated and the next plan written; every
         * device's step spans the same wall time, so the phase sums add up to the step. */
        TRY(dp_barrier(c, d, err));
        /* (a graph step's and a host run's steps ahead are never the same run) */
        if (graph) { /* the replicas' check after it is eager too */
            bool next_eager = g + 1 < c->total_steps && !dp_full_step(c, &c->plan[(g + 1) & 1]);
            TRY(graph_join(&dv->graph, next_eager || check, err));
        }
        if (check)
            TRY(dp_replicas(c, d, g, true, err));
        if (g + 1 < c->total_steps && dp_staged_ahead(c, g + 1)) {
            if (d == 0)
                TRY(dp_launch_next(c, &c->plan[(g + 1) & 1], err));
            dp_prefetch_next(c, d, &c->plan[(g + 1) & 1]);
        }
        TRY(step_meter_end(m, NULL, err));
        TRY(dp_checkpoint(c, d, g, err));
    }
    return step_meter_finish(m, err);
}
