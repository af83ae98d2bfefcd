/* common/single.c: the baseline strategy: the whole global batch on one
 * device, no synchronisation.  It is also the reference the equivalence
 * contract checks DP and DDP against. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "nn/optim.h"
#include "measure/progress.h"
#include "train/strategy.h"
#include "train/trainer.h"

#define TRY(call)                                                                          \
    do {                                                                                   \
        if ((rc = (call)) != DDP_OK)                                                       \
            goto fail;                                                                     \
    } while (0)

/* Gather the micro-batch after (g, m) while the device computes (g, m). */
static void prefetch_next(stager_t *stg, schedule_t *sch, const dataset_t *data, long g, int m,
                          int accum, phase_clock_t *pc)
{
    long ng = m + 1 < accum ? g : g + 1;
    int nm = m + 1 < accum ? m + 1 : 0;
    if (ng >= sch->total_steps)
        return;
    int rows;
    const uint32_t *idx = schedule_micro(sch, ng, nm, &rows);
    stager_prefetch(stg, data, ng * accum + nm, idx, rows, pc);
}

int single_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err)
{
    model_spec_t spec;
    int rc = config_model_spec(cfg, &spec, err);
    if (rc != DDP_OK)
        return rc;

    backend_t *be = NULL;
    replica_t rep = {0};
    optim_t opt = {0};
    schedule_t sch = {0};
    stager_t stg = {0};
    ckpt_run_t ck = {0};
    float *host = NULL;
    progress_t prog = {0}; /* off until the loop starts */

    result_init(res);
    res->mode = MODE_SINGLE;
    res->backend = cfg->backend;
    res->ndev = 1;
    res->dev[0].device_id = cfg->gpus[0];
    if ((rc = result_trace_init(res, cfg->trace_path[0] != 0, 1, cfg->accum, 0)) != DDP_OK)
        return err_set(err, rc, "out of memory for the trace");

    if ((rc = backend_create(&be, cfg->backend, cfg->gpus[0], cfg->threads, err)) != DDP_OK)
        return rc;
    if ((rc = schedule_init(&sch, cfg, data, 1, 0, cfg->batch, err)) != DDP_OK)
        goto fail_quiet;
    if ((rc = replica_init(&rep, be, &spec, cfg->batch, data->tgt_cols, err)) != DDP_OK)
        goto fail_quiet;
    if ((rc = optim_init(&opt, be, &cfg->optim, spec.nparams, err)) != DDP_OK)
        goto fail_quiet;
    host = malloc(spec.nparams * sizeof(float));
    if (!host) {
        rc = err_set(err, DDP_ERR_RUNTIME, "out of memory for the parameters");
        goto fail_quiet;
    }
    if ((rc = trainer_initial_params(cfg, &spec, host, err)) != DDP_OK)
        goto fail_quiet;
    /* --resume replaces the initial parameters, the optimizer state and the
     * first step; the checkpoints of --checkpoint are written from device 0. */
    if ((rc = ckpt_run_init(&ck, cfg, &spec, &opt, 0, err)) != DDP_OK)
        goto fail_quiet;
    if ((rc = ckpt_run_resume(&ck, &sch, host, &opt, err)) != DDP_OK)
        goto fail_quiet;
    if ((rc = stager_init(&stg, be, cfg->batch, data, err)) != DDP_OK)
        goto fail_quiet;
    TRY(backend_h2d(be, rep.params, host, spec.nparams * sizeof(float)));
    TRY(backend_sync(be));

    res->steps = sch.total_steps - sch.start_step;
    res->warmup_steps = schedule_warmup(&sch);
    res->epochs = sch.epochs;
    res->step_s = calloc((size_t)(res->steps - res->warmup_steps), sizeof(double));
    if (!res->step_s) {
        rc = err_set(err, DDP_ERR_RUNTIME, "out of memory for step timings");
        goto fail_quiet;
    }

    double scratch[PH_COUNT] = {0};
    trace_rec_t *tr = res->trace[0];
    progress_init(&prog, cfg, "single", sch.total_steps);
    double t_start = now_s();
    float loss_sum = 0.0f;
    long samples_done = 0;
    for (long g = sch.start_step; g < sch.total_steps; g++) {
        bool timed = schedule_timed(&sch, g);
        bool want_loss = schedule_logs(&sch, g) || progress_due(&prog);
        phase_clock_t pc;
        double *acc = timed ? res->dev[0].phase_s : scratch;
        double before[PH_COUNT];
        bool first = g == sch.start_step; /* --explain narrates this run's first step */
        if (first) /* its phases are the difference */
            memcpy(before, acc, sizeof before);
        phase_clock_start(&pc, acc);
        trace_step_begin(tr, g, timed);
        phase_clock_trace(&pc, tr);
        double t0 = pc.last;
        size_t step_rows = schedule_step_rows(&sch, g);
        float scale = 1.0f / (float)step_rows; /* mean over the whole optimizer step */
        double step_loss = 0.0;
        for (int m = 0; m < cfg->accum; m++) {
            int rows;
            const uint32_t *idx = schedule_micro(&sch, g, m, &rows);
            if (rows == 0)
                break;
            TRY(stager_stage(&stg, &rep, data, g * cfg->accum + m, idx, rows, &pc));
            TRY(model_forward(&rep, rep.x, rows));
            if (stager_active(&stg)) {
                /* The device runs the forward pass queued above while the host
                 * gathers the next micro-batch into the other staging buffer. */
                phase_clock_lap(&pc, PH_FORWARD);
                prefetch_next(&stg, &sch, data, g, m, cfg->accum, &pc);
            }
            TRY(backend_sync(be)); /* so the lap measures the work, not its launch */
            phase_clock_lap(&pc, PH_FORWARD);
            TRY(model_loss(&rep, cfg->loss, rep.y, rows, scale));
            if (want_loss) {
                TRY(backend_d2h(be, &loss_sum, rep.loss_sum, sizeof loss_sum));
                step_loss += loss_sum;
            }
            TRY(backend_sync(be));
            phase_clock_lap(&pc, PH_LOSS);
            double t_bwd = pc.last;
            TRY(model_backward(&rep, rep.x, rows, rep.dout, m > 0, NULL, NULL));
            TRY(backend_sync(be));
            phase_clock_lap(&pc, PH_BACKWARD);
            if (first && m == 0)
                res->story.backward_s = pc.last - t_bwd;
            if (first) {
                res->dev[0].first_rows += rows;
                move_stat_t *mv = &res->story.move[MOVE_BATCH];
                mv->bytes += (uint64_t)rows * (data->in_dim + data->tgt_cols) * sizeof(float);
                mv->ops++;
            }
            if (timed)
                res->dev[0].rows += rows;
        }
        TRY(optim_step(&opt, rep.params, rep.grads));
        TRY(backend_sync(be));
        phase_clock_lap(&pc, PH_OPTIM);
        trace_step_end(tr, t0, pc.last);
        if (first) {
            step_story_t *st = &res->story;
            for (int p = 0; p < PH_COUNT; p++)
                res->dev[0].first_phase_s[p] = acc[p] - before[p];
            st->move[MOVE_BATCH].seconds =
                res->dev[0].first_phase_s[PH_DATA] + res->dev[0].first_phase_s[PH_H2D];
            st->step_s = pc.last - t0;
            st->filled = true;
        }
        if (timed) {
            res->step_s[res->nstep_s++] = pc.last - t0;
            res->timed_s += pc.last - t0;
            res->timed_samples += (long)step_rows;
        }
        double mean = want_loss ? step_loss / (double)step_rows : NAN;
        long epoch = schedule_epoch_of(&sch, g);
        if (schedule_logs(&sch, g)) {
            res->final_loss = mean;
            result_log_loss(res, g + 1, epoch, mean);
            progress_clear(&prog); /* the loss line replaces it */
            trainer_log_loss(cfg, g + 1, sch.total_steps, epoch, mean);
        }
        if (ckpt_run_due(&ck, &sch, g) &&
            (rc = ckpt_run_write(&ck, &sch, rep.params, &opt, g, err)) != DDP_OK)
            goto fail_quiet;
        samples_done += (long)step_rows;
        progress_update(&prog, g + 1, epoch, mean, samples_done);
    }
    progress_end(&prog);
    res->total_s = now_s() - t_start;

    res->nparams = spec.nparams;
    res->params = host;
    host = NULL;
    TRY(backend_d2h(be, res->params, rep.params, spec.nparams * sizeof(float)));
    res->dev[0].mem_peak = backend_mem_peak(be);
    result_finish(res);
    rc = trainer_evaluate(&spec, cfg->loss, res->params, data, &res->train_loss,
                          &res->train_accuracy, err);
    goto done;

fail:
    err_set(err, rc, "device %d: %s", backend_device_id(be), backend_last_error(be));
fail_quiet:
done:
    progress_end(&prog); /* a fault must not leave a half line on the terminal */
    free(host);
    ckpt_run_free(&ck);
    stager_free(&stg);
    optim_free(&opt);
    replica_free(&rep);
    schedule_free(&sch);
    backend_destroy(be);
    return rc;
}
