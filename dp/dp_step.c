/* dp/dp_step.c: the step loop every DP device thread runs, and its step,
 * fenced, phase by phase, meeting the others at barriers (see dp.h for the
 * whole picture).  Each phase is timed on the device that runs it; the time
 * a device spends waiting at a barrier is its PH_IDLE, so the report shows
 * who waits for whom: in DP the other devices wait while device 0 stages
 * the batch, computes the loss and steps the optimizer.  On a GPU nothing
 * here makes the host wait: the barriers are also barriers of the devices'
 * queues (dp_barrier), and the step meter's wait for the previous step is
 * each thread's one host synchronisation. */
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
        /* A device gets a replica when it has rows in any micro-batch: a
         * smaller last micro-batch can spread over more devices
         * (torch.chunk(5 rows, 4) gives 3 chunks, of 4 rows gives 4). */
        int n = dp_chunk_count(rows, c->ndev);
        if (n > p->nrep)
            p->nrep = n;
    }
    p->step_rows = schedule_step_rows(&c->sch, g);
}

/* Is step g's first micro-batch staged by device 0 during step g-1, before
 * the barrier that ended it?  Then step g needs no barrier before its
 * scatter (the one that ended step g-1 orders the staging before every
 * device's reads), one barrier less a step: on host memory (a GPU's
 * staging slots alternate by step), when each replica copies its own
 * parameters (a sliced replicate needs that barrier to know every slice is
 * written: dp_sliced), after the run's first step.  Every thread answers
 * alike, so they all pass the same barriers. */
static bool dp_staged_ahead(const dp_ctx_t *c, long g)
{
    return c->host_visible && !dp_sliced(c->spec.nparams) && g > c->start_step;
}

/* A step CUDA graphs may replay: one micro-batch of the whole batch (an
 * epoch's short last batch is other work, run eagerly between replays). */
static bool dp_full_step(const dp_ctx_t *c, const dp_plan_t *pl)
{
    return pl->nmicro == 1 && pl->rows[0] == c->cfg->batch;
}

// ---------------------------------------------------------------------------
// pieces of a step

/* Wait for every device at a barrier; the wait is this device's idle time.
 * Not host memory (a GPU): the devices' queues meet too -- each records its
 * event before the host barrier and waits for every other's after it, so
 * the work any device queued before the barrier is done before the work any
 * device queues after it.  Two events by parity: a device reaches the
 * barrier after next (and records this parity again) only once every other
 * has passed the next one, after its waits for this one. */
static int dp_barrier(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    int par = (int)(dv->nbar++ & 1);
    if (!c->host_visible)
        TRY(step_check(&dv->t, backend_event_record(dv->be, dv->bar[par]), "barrier"));
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
    for (int e = 0; e < c->ndev && !c->host_visible; e++)
        if (e != d)
            TRY(step_check(&dv->t, backend_stream_wait(dv->be, c->dev[e].bar[par]), "barrier"));
    step_meter_lap(&dv->meter, PH_IDLE);
    return DDP_OK;
}

/* Device 0: read micro-batch mi's rows on the host into gx and gy (through
 * pinned staging and the copy stream when device 0 is not host memory).  The
 * other devices copy their chunks out of gx after the next barrier, which
 * orders their copies after device 0's queue up to here. */
static int dp_stage(dp_ctx_t *c, const dp_plan_t *pl, int mi)
{
    float *x, *y;
    TRY(step_stage(&c->dev[0].t, pl->idx[mi], pl->rows[mi], &x, &y));
    /* Written only when they change (on host memory, never): their line is
     * read by every device each step (dp_ctx_t). */
    if (c->gx != x)
        c->gx = x;
    if (c->gy != y)
        c->gy = y;
    return DDP_OK;
}

/* Device 0: gather the outputs, loss and output gradient over the whole
 * micro-batch, scaled by 1/rows of the optimizer step like single mode.
 * The devices copy their slices of gdout after the next barrier. */
static int dp_loss(dp_ctx_t *c, const dp_plan_t *pl, int rows, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    step_meter_t *m = &dv->meter;
    TRY(dp_gather(c, rows, err));
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

/* Step g (plan pl) on device d's thread, every device's thread running it
 * together: replicate device 0's parameters; per micro-batch, scatter the
 * rows, forward in parallel, gather the outputs on device 0 and compute the
 * loss there, scatter the output gradient, backward in parallel; reduce the
 * gradients onto device 0; step on device 0.  torch's DataParallel
 * replicates on every forward and reduces on every backward; with --accum
 * the parameters do not change between micro-batches and the sum is
 * linear, so one of each per step gives the same result for less traffic. */
static int dp_step(dp_ctx_t *c, int d, const dp_plan_t *pl, bool ahead, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    int in = model_in_dim(&c->spec), out = model_out_dim(&c->spec);
    TRY(dp_replicate(c, d, pl->nrep, err));
    for (int mi = 0; mi < pl->nmicro; mi++) {
        int rows = pl->rows[mi];
        dp_chunk_t ch = dp_chunk(rows, c->ndev, d); /* this device's rows */
        if (d == 0 && mi > 0)
            TRY(dp_stage(c, pl, mi));
        if (mi > 0 || !ahead) /* else the previous step's last barrier did it */
            TRY(dp_barrier(c, d, err)); /* the batch is on device 0, every replica written */
        const float *x = d == 0 ? c->gx : dv->rep.x; /* device 0 reads its chunk in place */
        TRY(dp_scatter_rows(c, d, dv->rep.x, c->gx, in, ch, MOVE_SCATTER, err));
        if (ch.rows > 0)
            TRY(step_forward(&dv->t, x, ch.rows));
        TRY(dp_barrier(c, d, err)); /* every output chunk is complete */
        if (d == 0)
            TRY(dp_loss(c, pl, rows, err));
        TRY(dp_barrier(c, d, err)); /* the output gradient is complete on device 0 */
        TRY(dp_scatter_rows(c, d, dv->rep.dout, c->gdout, out, ch, MOVE_GRAD_OUT, err));
        if (ch.rows > 0) /* adds after the first micro-batch it had rows in */
            TRY(step_backward(&dv->t, x, ch.rows, NULL, NULL));
    }
    TRY(dp_barrier(c, d, err)); /* every device's gradients (and has_grad) are final */
    TRY(dp_reduce(c, d, err));
    if (c->host_visible && c->ndev > 1 && dp_sliced(c->spec.nparams))
        TRY(dp_barrier(c, d, err)); /* every slice of the sum is on device 0 */
    return d == 0 ? step_optim(&dv->t, &c->opt) : DDP_OK;
}

// ---- TRAINING STEP END ------------------------------------------------------

/* After step g, when a checkpoint is due: device 0 writes it while the
 * others wait at a barrier (untimed, like single's write between steps). */
static int dp_checkpoint(dp_ctx_t *c, int d, long g, char *err)
{
    if (!ckpt_run_due(&c->ck, &c->sch, g))
        return DDP_OK;
    /* Device 0 owns the parameters and the optimizer state, and nobody else
     * reads them now: every device passed the barrier that ended step g (so
     * the reduce is over), and the next reader, step g+1's replicate, starts
     * only after the barrier below.  The checkpoint's copies wait for device
     * 0's queue, so they hold the state after step g. */
    if (d == 0)
        TRY(ckpt_run_write(&c->ck, &c->sch, c->dev[0].rep.params, &c->opt, g, err));
    /* Barrier: the checkpoint is written (device 0's parameters are free to
     * read again); the others must not replicate them before. */
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
    for (long g = c->start_step; g < c->total_steps; g++) {
        /* plan[g & 1] was written by device 0 before the barrier that ended
         * the previous step (or before the first one); device 0 writes the
         * other half during this step. */
        const dp_plan_t *pl = &c->plan[g & 1];
        /* --cuda-graph: a full step after the first is one graph of every
         * device (graph.h); a member begins its meter once it follows, so
         * that every marker of its step is the graph's. */
        bool graph = graph_arm(&dv->graph, g, dp_full_step(c, pl));
        if (d == 0 || !graph)
            trainer_step_begin(m, &c->sch, g);
        step_begin(&dv->t);
        /* Device 0 stages the first micro-batch before anything else: a
         * graph step begins after it (the copy stream is not captured);
         * or it did in the step before (dp_staged_ahead). */
        bool ahead = dp_staged_ahead(c, g);
        if (d == 0 && !ahead)
            TRY(dp_stage(c, pl, 0));
        if (graph) {
            TRY(graph_fork(&dv->graph, g, err));
            if (d != 0)
                trainer_step_begin(m, &c->sch, g);
        }
        if (fault_at(d, g) == FAULT_ERROR)
            return err_set(err, DDP_ERR_RUNTIME, "%s: injected fault at step %ld", dv->name, g);
        TRY(dp_step(c, d, pl, ahead, err));
        if (d == 0 && g + 1 < c->total_steps) {
            dp_plan_step(c, g + 1); /* may load the next epoch's order */
            /* Every device has read this step's batch (its scatter came
             * before the loss's barrier), and device 0 its own chunk and
             * targets (its backward is done): the next one may replace it. */
            if (dp_staged_ahead(c, g + 1))
                TRY(dp_stage(c, &c->plan[(g + 1) & 1], 0));
        }
        if (d == 0)
            step_meter_lap(m, PH_DATA); /* every step alike: a graph step's work never varies */
        /* Barrier: device 0's parameters are updated and the next plan is
         * written; it also makes every device's step span the same wall time,
         * so the phase sums of all devices add up to the step time, and device
         * 0's meter times the step when every device is through it. */
        TRY(dp_barrier(c, d, err));
        if (g + 1 < c->total_steps && dp_staged_ahead(c, g + 1))
            dp_prefetch_next(c, d, &c->plan[(g + 1) & 1]);
        if (graph) {
            bool next_eager = g + 1 < c->total_steps && !dp_full_step(c, &c->plan[(g + 1) & 1]);
            TRY(graph_join(&dv->graph, next_eager, err));
        }
        TRY(step_meter_end(m, NULL, err));
        TRY(dp_checkpoint(c, d, g, err));
    }
    return step_meter_finish(m, err);
}
