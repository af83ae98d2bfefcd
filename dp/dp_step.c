/* dp/dp_step.c: the step loop every DP device thread runs, phase by phase,
 * meeting the others at barriers (see dp.h for the whole picture).  Each
 * phase is timed on the device that runs it; the time a device spends
 * waiting at a barrier is its PH_IDLE, so the report shows who waits for
 * whom: in DP the other devices wait while device 0 stages the batch,
 * computes the loss and steps the optimizer.  On a GPU nothing here makes
 * the host wait: the barriers are also barriers of the devices' queues
 * (dp_wait), and the step meter's wait for the previous step is each
 * thread's one host synchronisation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/base/fault.h"
#include "dp/dp.h"

/* A call on device dv's backend; a failure is named by the device and what
 * it was doing ("device 1: forward: ..."). */
static int dev(const dp_dev_t *dv, int rc, const char *what, char *err)
{
    if (rc == DDP_OK)
        return DDP_OK;
    return err_set(err, rc, "%s: %s: %s", dv->name, what, backend_last_error(dv->be));
}
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
    p->timed = schedule_timed(&c->sch, g);
    p->end = (step_end_t){.samples = (long)p->step_rows,
                          .global_samples = (long)p->step_rows,
                          .total = c->total_steps,
                          .epoch = schedule_epoch_of(&c->sch, g),
                          .logs = schedule_logs(&c->sch, g),
                          .denom = (double)p->step_rows};
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
static int dp_wait(dp_ctx_t *c, int d, step_meter_t *m, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    int par = (int)(dv->nbar++ & 1);
    if (!c->host_visible)
        TRY(dev(dv, backend_event_record(dv->be, dv->bar[par]), "barrier", err));
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
    for (int e = 0; e < c->ndev && !c->host_visible; e++)
        if (e != d)
            TRY(dev(dv, backend_stream_wait(dv->be, c->dev[e].bar[par]), "barrier", err));
    step_meter_lap(m, PH_IDLE);
    return DDP_OK;
}

/* Device 0: read the micro-batch's rows on the host into gx and gy (through
 * pinned staging and the copy stream when device 0 is not host memory).  The
 * other devices copy their chunks out of gx after the next barrier, which
 * orders their copies after device 0's queue up to here. */
static int dp_stage(dp_ctx_t *c, const uint32_t *idx, int rows, step_meter_t *m, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    return dev(dv, stager_stage(&c->stg, c->data, idx, rows, m, &c->gx, &c->gy), "h2d", err);
}

/* Device 0: gather the outputs, loss and output gradient over the whole
 * micro-batch, scaled by 1/rows of the optimizer step like single mode. */
static int dp_loss(dp_ctx_t *c, const dp_plan_t *pl, int rows, step_meter_t *m, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    backend_t *be = dv->be;
    TRY(dp_gather(c, rows, err));
    float scale = 1.0f / (float)pl->step_rows;
    TRY(dev(dv,
            backend_loss(be, c->cfg->loss, c->gout, c->gy, rows, model_out_dim(&c->spec), scale,
                         c->gdout, c->loss_sum),
            "loss", err));
    /* the loss log wants it; a graph step fetches it always (its work never varies) */
    if (step_meter_logs(m) || dv->in_graph)
        step_meter_fetch(m, c->loss_sum, 1);
    /* The devices copy their slices of gdout after the next barrier. */
    step_meter_lap(m, PH_LOSS);
    return DDP_OK;
}

/* Device 0: the optimizer step and the plan of the next step.  The next
 * step's replicate reads these parameters after the barrier that ends this
 * step. */
static int dp_optimize(dp_ctx_t *c, long g, step_meter_t *m, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    TRY(dev(dv, optim_step(&c->opt, dv->rep.params, dv->rep.grads), "optimizer", err));
    step_meter_lap(m, PH_OPTIM);
    if (g + 1 < c->total_steps)
        dp_plan_step(c, g + 1); /* may load the next epoch's order */
    step_meter_lap(m, PH_DATA); /* every step alike: a graph step's work never varies */
    return DDP_OK;
}

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
    if (d == 0) {
        dp_dev_t *dv = &c->dev[0];
        int rc = ckpt_run_write(&c->ck, &c->sch, dv->rep.params, &c->opt, g, err);
        if (rc != DDP_OK)
            return rc;
    }
    /* Barrier: the checkpoint is written (device 0's parameters are free to
     * read again); the others must not replicate them before. */
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
    return DDP_OK;
}

/* The step meter's start of step g (plan pl). */
static void dp_meter_begin(const dp_ctx_t *c, step_meter_t *m, long g, const dp_plan_t *pl)
{
    /* --explain tells the middle timed step (schedule_told_step) */
    step_meter_begin(m, g, pl->timed, g == c->told_step);
    step_meter_plan(m, &pl->end);
}

// ---------------------------------------------------------------------------
// the loop

int dp_device_loop(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    step_meter_t *m = &dv->meter; /* set up with the device (dp_device_init) */
    int in = model_in_dim(&c->spec), out = model_out_dim(&c->spec);
    for (long g = c->start_step; g < c->total_steps; g++) {
        /* plan[g & 1] was written by device 0 before the barrier that ended
         * the previous step (or before the first one); device 0 writes the
         * other half during this step. */
        const dp_plan_t *pl = &c->plan[g & 1];
        /* --cuda-graph: a full step after the first is one graph of every
         * device (dp_graph.c); a member begins its meter once it follows,
         * so that every marker of its step is the graph's. */
        bool graph = dp_graph_step(c, pl, g);
        if (d == 0 || !graph)
            dp_meter_begin(c, m, g, pl);
        dv->has_grad = false;

        /* Device 0 stages the first micro-batch before anything else: a
         * graph step begins after it (the copy stream is not captured). */
        if (d == 0)
            TRY(dp_stage(c, pl->idx[0], pl->rows[0], m, err));
        if (graph) {
            TRY(dp_graph_fork(c, d, g, err));
            if (d != 0)
                dp_meter_begin(c, m, g, pl);
        }

        /* Replicate once per optimizer step.  torch's DataParallel replicates
         * on every forward call and reduces on every backward; with --accum
         * the parameters do not change between micro-batches and the sum is
         * linear, so one replicate and one reduce per step give the same
         * result for less traffic. */
        TRY(dp_replicate(c, d, pl->nrep, err));
        step_meter_lap(m, PH_REPLICATE);

        for (int mi = 0; mi < pl->nmicro; mi++) {
            int batch = pl->rows[mi];
            if (d == 0 && mi > 0)
                TRY(dp_stage(c, pl->idx[mi], batch, m, err));
            /* Barrier: the batch is on device 0 and every replica is written. */
            TRY(dp_wait(c, d, m, err));

            dp_chunk_t ch = dp_chunk(batch, c->ndev, d);
            const float *x = d == 0 ? c->gx : dv->rep.x;
            if (d != 0 && ch.rows > 0) {
                TRY(dp_scatter_rows(c, d, dv->rep.x, c->gx, in, ch, MOVE_SCATTER, err));
                step_meter_lap(m, PH_SCATTER);
            }
            if (mi == 0 && fault_at(d, g) == FAULT_ERROR)
                return err_set(err, DDP_ERR_RUNTIME, "%s: injected fault at step %ld", dv->name,
                               g);
            if (ch.rows > 0) {
                TRY(dev(dv, model_forward(&dv->rep, x, ch.rows), "forward", err));
                step_meter_lap(m, PH_FORWARD);
            }
            /* Barrier: every output chunk is complete (device 0 gathers them). */
            TRY(dp_wait(c, d, m, err));

            if (d == 0)
                TRY(dp_loss(c, pl, batch, m, err));
            /* Barrier: the output gradient is complete on device 0. */
            TRY(dp_wait(c, d, m, err));

            if (ch.rows > 0) {
                const float *dout = d == 0 ? c->gdout : dv->rep.dout;
                if (d != 0) {
                    TRY(dp_scatter_rows(c, d, dv->rep.dout, c->gdout, out, ch, MOVE_GRAD_OUT,
                                        err));
                    step_meter_lap(m, PH_SCATTER);
                }
                /* A device that sat out an earlier micro-batch of this step
                 * has no gradients yet: it writes instead of adding. */
                TRY(dev(dv, model_backward(&dv->rep, x, ch.rows, dout, dv->has_grad, NULL, NULL),
                        "backward", err));
                step_meter_lap(m, PH_BACKWARD);
                dv->has_grad = true;
                step_meter_rows(m, ch.rows);
            }
        }
        /* Barrier: every device's gradients (and has_grad) are final. */
        TRY(dp_wait(c, d, m, err));
        TRY(dp_reduce(c, d, err));
        step_meter_lap(m, PH_COMM_EXPOSED);
        if (c->host_visible && c->ndev > 1)
            /* Barrier: every slice of the sum is on device 0. */
            TRY(dp_wait(c, d, m, err));
        if (d == 0)
            TRY(dp_optimize(c, g, m, err));
        /* Barrier: device 0's parameters are updated and the next plan is
         * written; it also makes every device's step span the same wall time,
         * so the phase sums of all devices add up to the step time, and device
         * 0's meter times the step when every device is through it. */
        TRY(dp_wait(c, d, m, err));
        if (graph) {
            bool next_eager =
                g + 1 < c->total_steps && !dp_graph_step(c, &c->plan[(g + 1) & 1], g + 1);
            TRY(dp_graph_join(c, d, next_eager, err));
        }
        TRY(step_meter_end(m, NULL, err));
        TRY(dp_checkpoint(c, d, g, err));
    }
    return step_meter_finish(m, err);
}
