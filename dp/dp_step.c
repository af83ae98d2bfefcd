/* dp/dp_step.c: the step loop every DP device thread runs, phase by phase,
 * meeting the others at barriers (see dp.h for the whole picture).  Each
 * phase is timed on the thread that runs it; the time a thread spends waiting
 * at a barrier is its PH_IDLE, so the report shows who waits for whom: in DP
 * the other devices wait while device 0 stages the batch, computes the loss
 * and steps the optimizer. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/fault.h"
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
        int n = dp_chunk_count(rows, c->k);
        if (n > p->nrep)
            p->nrep = n;
    }
    p->step_rows = schedule_step_rows(&c->sch, g);
    p->epoch = schedule_epoch_of(&c->sch, g);
    p->timed = schedule_timed(&c->sch, g);
    p->logs = schedule_logs(&c->sch, g);
}

// ---------------------------------------------------------------------------
// pieces of a step

/* Wait for every device at a barrier; the wait is this thread's idle time. */
static int dp_wait(dp_ctx_t *c, step_meter_t *m, char *err)
{
    if (dp_pool_sync(&c->pool) != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "stopped because another device failed");
    step_meter_lap(m, PH_IDLE);
    return DDP_OK;
}

/* Device 0: read the micro-batch's rows on the host into gx and gy (through
 * the staging buffer and h2d copies when device 0 is not host memory). */
static int dp_stage(dp_ctx_t *c, const uint32_t *idx, int rows, step_meter_t *m, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    backend_t *be = dv->be;
    const dataset_t *data = c->data;
    if (backend_host_visible(be)) {
        data_gather(data, idx, rows, c->gx, c->gy);
        step_meter_lap(m, PH_DATA);
        return DDP_OK;
    }
    float *sx = c->staging, *sy = c->staging + (size_t)c->cfg->batch * data->in_dim;
    data_gather(data, idx, rows, sx, sy);
    step_meter_lap(m, PH_DATA);
    TRY(dev(dv, backend_h2d(be, c->gx, sx, (size_t)rows * data->in_dim * sizeof(float)), "h2d", err));
    TRY(dev(dv, backend_h2d(be, c->gy, sy, (size_t)rows * data->tgt_cols * sizeof(float)), "h2d", err));
    /* Why sync: the other devices copy their chunks out of gx with peer
     * copies that do not wait for device 0's stream. */
    TRY(dev(dv, backend_sync(be), "h2d", err));
    step_meter_lap(m, PH_H2D);
    return DDP_OK;
}

/* Device 0: gather the outputs, loss and output gradient over the whole
 * micro-batch, scaled by 1/rows of the optimizer step like single mode. */
static int dp_loss(dp_ctx_t *c, const dp_plan_t *pl, int rows, bool want_loss,
                   double *step_loss, step_meter_t *m, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    backend_t *be = dv->be;
    TRY(dp_gather(c, rows, err));
    float scale = 1.0f / (float)pl->step_rows;
    TRY(dev(dv,
            backend_loss(be, c->cfg->loss, c->gout, c->gy, rows, model_out_dim(&c->spec), scale,
                         c->gdout, c->loss_sum),
            "loss", err));
    if (want_loss) {
        float sum = 0.0f;
        TRY(dev(dv, backend_d2h(be, &sum, c->loss_sum, sizeof sum), "loss", err));
        *step_loss += sum;
    }
    /* Why sync: the devices copy their slices of gdout with peer copies that
     * do not wait for device 0's stream (and the lap then measures the work). */
    TRY(dev(dv, backend_sync(be), "loss", err));
    step_meter_lap(m, PH_LOSS);
    return DDP_OK;
}

/* Device 0: the optimizer step, the loss line, the progress line, and the
 * plan of the next step. */
static int dp_optimize(dp_ctx_t *c, long g, const dp_plan_t *pl, bool want_loss,
                       double step_loss, step_meter_t *m, char *err)
{
    dp_dev_t *dv = &c->dev[0];
    backend_t *be = dv->be;
    TRY(dev(dv, optim_step(&c->opt, dv->rep.params, dv->rep.grads), "optimizer", err));
    /* Why sync: the next step's replicate reads these parameters with peer
     * copies that do not wait for device 0's stream. */
    TRY(dev(dv, backend_sync(be), "optimizer", err));
    step_meter_lap(m, PH_OPTIM);
    if (g + 1 < c->total_steps) {
        dp_plan_step(c, g + 1); /* may load the next epoch's order */
        step_meter_lap(m, PH_DATA);
    }
    double mean = want_loss ? step_loss / (double)pl->step_rows : NAN;
    return step_meter_loss(m, g, c->total_steps, pl->epoch, pl->logs, mean, (long)pl->step_rows,
                           err);
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
     * only after the barrier below.  Device 0's optimizer step was synced,
     * so the copy is the state after step g. */
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

// ---------------------------------------------------------------------------
// the loop

int dp_device_loop(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    backend_t *be = dv->be;
    run_result_t *res = c->res;
    step_meter_t *m = &dv->meter;
    int in = model_in_dim(&c->spec), out = model_out_dim(&c->spec);
    /* Device 0 keeps the run's step times, loss log and progress line; every
     * device its own phases and --trace recorder (written by this thread only). */
    step_meter_init(m, &(step_meter_sinks_t){
                           .cfg = c->cfg,
                           .dev = &res->dev[d],
                           .trace = res->trace[d],
                           .times = d == 0 ? &res->times : NULL,
                           .log = d == 0 ? &res->log : NULL,
                           .final_loss = d == 0 ? &res->final_loss : NULL,
                           .story = d == 0 ? &res->story : NULL,
                           .progress = d == 0 ? &c->prog : NULL,
                       });

    for (long g = c->start_step; g < c->total_steps; g++) {
        /* plan[g & 1] was written by device 0 before the barrier that ended
         * the previous step (or before the first one); device 0 writes the
         * other half during this step. */
        const dp_plan_t *pl = &c->plan[g & 1];
        /* The progress line wants this step's loss now and then (device 0
         * computes the loss, so only it decides). */
        bool want_loss = d == 0 && (pl->logs || progress_due(&c->prog));
        /* --explain narrates this run's first step */
        step_meter_begin(m, g, pl->timed, g == c->start_step);
        double step_loss = 0.0;
        dv->has_grad = false;

        /* Replicate once per optimizer step.  torch's DataParallel replicates
         * on every forward call and reduces on every backward; with --accum
         * the parameters do not change between micro-batches and the sum is
         * linear, so one replicate and one reduce per step give the same
         * result for less traffic. */
        TRY(dp_replicate(c, d, pl->nrep, err));
        TRY(dev(dv, backend_sync(be), "replicate", err));
        step_meter_lap(m, PH_REPLICATE);

        for (int mi = 0; mi < pl->nmicro; mi++) {
            int batch = pl->rows[mi];
            if (d == 0)
                TRY(dp_stage(c, pl->idx[mi], batch, m, err));
            /* Barrier: the batch is on device 0 and every replica is written. */
            TRY(dp_wait(c, m, err));

            dp_chunk_t ch = dp_chunk(batch, c->k, d);
            const float *x = d == 0 ? c->gx : dv->rep.x;
            if (d != 0 && ch.rows > 0) {
                TRY(dp_scatter_rows(c, d, dv->rep.x, c->gx, in, ch, MOVE_SCATTER, err));
                TRY(dev(dv, backend_sync(be), "scatter", err));
                step_meter_lap(m, PH_SCATTER);
            }
            if (mi == 0 && fault_at(d, g) == FAULT_ERROR)
                return err_set(err, DDP_ERR_RUNTIME, "%s: injected fault at step %ld", dv->name,
                               g);
            if (ch.rows > 0) {
                TRY(dev(dv, model_forward(&dv->rep, x, ch.rows), "forward", err));
                /* Why sync: device 0 gathers this output with a peer copy that
                 * does not wait for this device's stream. */
                TRY(dev(dv, backend_sync(be), "forward", err));
                step_meter_lap(m, PH_FORWARD);
            }
            /* Barrier: every output chunk is complete. */
            TRY(dp_wait(c, m, err));

            if (d == 0)
                TRY(dp_loss(c, pl, batch, want_loss, &step_loss, m, err));
            /* Barrier: the output gradient is complete on device 0. */
            TRY(dp_wait(c, m, err));

            if (ch.rows > 0) {
                const float *dout = d == 0 ? c->gdout : dv->rep.dout;
                if (d != 0) {
                    TRY(dp_scatter_rows(c, d, dv->rep.dout, c->gdout, out, ch, MOVE_GRAD_OUT,
                                        err));
                    TRY(dev(dv, backend_sync(be), "scatter", err));
                    step_meter_lap(m, PH_SCATTER);
                }
                double t_bwd = step_meter_last(m);
                /* A device that sat out an earlier micro-batch of this step
                 * has no gradients yet: it writes instead of adding. */
                TRY(dev(dv, model_backward(&dv->rep, x, ch.rows, dout, dv->has_grad, NULL, NULL),
                        "backward", err));
                /* Why sync: the reduce reads these gradients from other threads
                 * (and, on a GPU, with peer copies that do not wait). */
                TRY(dev(dv, backend_sync(be), "backward", err));
                double t_end = step_meter_lap(m, PH_BACKWARD);
                if (d == 0 && m->first && mi == 0)
                    c->first_backward_s = t_end - t_bwd;
                dv->has_grad = true;
                step_meter_rows(m, ch.rows);
            }
        }
        /* Barrier: every device's gradients (and has_grad) are final. */
        TRY(dp_wait(c, m, err));
        TRY(dp_reduce(c, d, err));
        TRY(dev(dv, backend_sync(be), "reduce", err));
        step_meter_lap(m, PH_COMM_EXPOSED);
        if (c->host_visible && c->k > 1)
            /* Barrier: every slice of the sum is on device 0. */
            TRY(dp_wait(c, m, err));
        if (d == 0)
            TRY(dp_optimize(c, g, pl, want_loss, step_loss, m, err));
        /* Barrier: device 0's parameters are updated and the next plan is
         * written; it also makes every device's step span the same wall time,
         * so the phase sums of all devices add up to the step time, and device
         * 0's meter times the step when every device is through it. */
        TRY(dp_wait(c, m, err));
        if (m->first && d == 0)
            c->first_nmicro = pl->nmicro;
        step_meter_end(m, (long)pl->step_rows);
        TRY(dp_checkpoint(c, d, g, err));
    }
    return DDP_OK;
}
