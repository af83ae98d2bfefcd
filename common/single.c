/* common/single.c: the baseline strategy: the whole global batch on one
 * device, no synchronisation.  It is also the reference the equivalence
 * contract checks DP and DDP against. */
#include <stdlib.h>
#include <string.h>

#include "optim.h"
#include "strategy.h"
#include "trainer.h"

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
    float *host = NULL;

    result_init(res);
    res->mode = MODE_SINGLE;
    res->backend = cfg->backend;
    res->ndev = 1;
    res->dev[0].device_id = cfg->gpus[0];

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
    if ((rc = stager_init(&stg, be, cfg->batch, data, err)) != DDP_OK)
        goto fail_quiet;
    TRY(be->ops->h2d(be, rep.params, host, spec.nparams * sizeof(float)));
    TRY(be->ops->sync(be));

    res->steps = sch.total_steps;
    res->warmup_steps = schedule_warmup(&sch);
    res->epochs = sch.epochs;
    res->step_s = calloc((size_t)(sch.total_steps - res->warmup_steps), sizeof(double));
    if (!res->step_s) {
        rc = err_set(err, DDP_ERR_RUNTIME, "out of memory for step timings");
        goto fail_quiet;
    }

    double scratch[PH_COUNT];
    double t_start = now_s();
    float loss_sum = 0.0f;
    for (long g = 0; g < sch.total_steps; g++) {
        bool timed = schedule_timed(&sch, g);
        bool want_loss = schedule_logs(&sch, g);
        phase_clock_t pc;
        phase_clock_start(&pc, timed ? res->dev[0].phase_s : scratch);
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
            TRY(be->ops->sync(be)); /* so the lap measures the work, not its launch */
            phase_clock_lap(&pc, PH_FORWARD);
            TRY(model_loss(&rep, cfg->loss, rep.y, rows, scale));
            if (want_loss) {
                TRY(be->ops->d2h(be, &loss_sum, rep.loss_sum, sizeof loss_sum));
                step_loss += loss_sum;
            }
            TRY(be->ops->sync(be));
            phase_clock_lap(&pc, PH_LOSS);
            TRY(model_backward(&rep, rep.x, rows, rep.dout, m > 0, NULL, NULL));
            TRY(be->ops->sync(be));
            phase_clock_lap(&pc, PH_BACKWARD);
            if (timed)
                res->dev[0].rows += rows;
        }
        TRY(optim_step(&opt, rep.params, rep.grads));
        TRY(be->ops->sync(be));
        phase_clock_lap(&pc, PH_OPTIM);
        if (timed) {
            res->step_s[res->nstep_s++] = pc.last - t0;
            res->timed_s += pc.last - t0;
            res->timed_samples += (long)step_rows;
        }
        if (want_loss) {
            double mean = step_loss / (double)step_rows;
            res->final_loss = mean;
            long epoch = schedule_epoch_of(&sch, g);
            result_log_loss(res, g + 1, epoch, mean);
            trainer_log_loss(cfg, g + 1, sch.total_steps, epoch, mean);
        }
    }
    res->total_s = now_s() - t_start;

    res->nparams = spec.nparams;
    res->params = host;
    host = NULL;
    TRY(be->ops->d2h(be, res->params, rep.params, spec.nparams * sizeof(float)));
    res->dev[0].mem_peak = be->mem_peak;
    result_finish(res);
    rc = trainer_evaluate(&spec, cfg->loss, res->params, data, &res->train_loss,
                          &res->train_accuracy, err);
    goto done;

fail:
    err_set(err, rc, "device %d: %s", be->device_id, backend_last_error(be));
fail_quiet:
done:
    free(host);
    stager_free(&stg);
    optim_free(&opt);
    replica_free(&rep);
    schedule_free(&sch);
    backend_destroy(be);
    return rc;
}
