/* dp/dp.c: the DataParallel strategy's entry point: set up the run, start
 * one thread per device, wait for them, and hand back the result (see dp.h
 * for what the threads do each step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "strategy.h"

/* What each device thread runs: its buffers, the step loop, its teardown. */
static void dp_worker(void *ctx, int d)
{
    dp_ctx_t *c = ctx;
    dp_dev_t *dv = &c->dev[d];
    char err[ERR_LEN] = "";
    int rc = dp_device_init(c, d, err);
    /* Barrier: every device is ready (or one failed, which aborts it). */
    if (rc == DDP_OK && (rc = dp_pool_sync(&c->pool)) != DDP_OK)
        err_set(err, rc, "stopped because another device failed");
    if (rc == DDP_OK && d == 0) {
        bool hv = true;
        for (int i = 0; i < c->k; i++)
            hv = hv && c->dev[i].be->host_visible;
        c->host_visible = hv;
    }
    /* Barrier: host_visible is set (the others read it from now on). */
    if (rc == DDP_OK && (rc = dp_pool_sync(&c->pool)) != DDP_OK)
        err_set(err, rc, "stopped because another device failed");

    double t0 = now_s();
    if (rc == DDP_OK)
        rc = dp_device_loop(c, d, err);
    if (rc == DDP_OK && d == 0) {
        c->res->total_s = now_s() - t0;
        rc = dv->be->ops->d2h(dv->be, c->host_params, dv->rep.params,
                              c->spec.nparams * sizeof(float));
        if (rc != DDP_OK)
            err_set(err, rc, "%s: %s", dv->name, backend_last_error(dv->be));
    }
    if (rc != DDP_OK)
        dp_pool_fail(&c->pool, rc, err); /* the first failure is the one reported */
    if (dv->be)
        c->res->dev[d].mem_peak = dv->be->mem_peak;
    dp_pool_leave(&c->pool);
    dp_device_free(c, d);
}

static void dp_ctx_free(dp_ctx_t *c)
{
    for (int i = 0; i < 2; i++) {
        free(c->plan[i].rows);
        free(c->plan[i].idx);
    }
    free(c->host_params);
    schedule_free(&c->sch);
    free(c);
}

int dp_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err)
{
    result_init(res);
    int k = cfg->ngpus;
    if (k < 1 || k > MAX_DEVICES)
        return err_set(err, DDP_ERR_INPUT, "--gpus: dp takes 1 to %d devices, got %d",
                       MAX_DEVICES, k);
    dp_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    int rc = config_model_spec(cfg, &c->spec, err);
    if (rc != DDP_OK) {
        dp_ctx_free(c);
        return rc;
    }
    c->cfg = cfg;
    c->data = data;
    c->k = k;
    c->chunk_max = (cfg->batch + k - 1) / k;
    c->res = res;
    res->mode = MODE_DP;
    res->backend = cfg->backend;
    res->ndev = k;
    for (int d = 0; d < k; d++) {
        dp_dev_t *dv = &c->dev[d];
        dv->slot = d;
        dv->id = cfg->gpus[d];
        res->dev[d].device_id = dv->id;
        /* Messages name the slot (what DDPBENCH_FAULT and the report count)
         * and the id when it differs (ids may repeat on CUDA). */
        if (dv->id == d)
            snprintf(dv->name, sizeof dv->name, "device %d", d);
        else
            snprintf(dv->name, sizeof dv->name, "device %d (id %d)", d, dv->id);
    }

    if ((rc = schedule_init(&c->sch, cfg, data, 1, 0, cfg->batch, err)) != DDP_OK)
        goto out;
    c->total_steps = c->sch.total_steps;
    c->warmup = schedule_warmup(&c->sch);
    for (int i = 0; i < 2; i++) {
        c->plan[i].rows = calloc((size_t)cfg->accum, sizeof *c->plan[i].rows);
        c->plan[i].idx = calloc((size_t)cfg->accum, sizeof *c->plan[i].idx);
    }
    c->host_params = malloc(c->spec.nparams * sizeof(float));
    res->step_s = calloc((size_t)(c->total_steps - c->warmup), sizeof(double));
    if (!c->plan[0].rows || !c->plan[0].idx || !c->plan[1].rows || !c->plan[1].idx ||
        !c->host_params || !res->step_s) {
        rc = err_set(err, DDP_ERR_RUNTIME, "out of memory");
        goto out;
    }
    if ((rc = trainer_initial_params(cfg, &c->spec, c->host_params, err)) != DDP_OK)
        goto out;
    res->steps = c->total_steps;
    res->warmup_steps = c->warmup;
    res->epochs = c->sch.epochs;
    dp_plan_step(c, 0); /* step 0's plan, before any thread reads it */

    /* One BLAS thread per worker, set once here: the count is process-wide
     * and changing it while another worker runs a GEMM is not safe. */
    if (cfg->backend == BACKEND_CPU)
        backend_cpu_set_threads(1);
    rc = dp_pool_start(&c->pool, k, dp_worker, c, err);
    /* Join in every case: a failed start still has threads to wait for. */
    char jerr[ERR_LEN];
    int jrc = dp_pool_join(&c->pool, jerr);
    if (rc == DDP_OK && jrc != DDP_OK)
        rc = err_set(err, jrc, "%s", jerr);
    if (rc != DDP_OK)
        goto out;

    res->nparams = c->spec.nparams;
    res->params = c->host_params;
    c->host_params = NULL;
    result_finish(res);
    rc = trainer_evaluate(&c->spec, cfg->loss, res->params, data, &res->train_loss,
                          &res->train_accuracy, err);
out:
    if (rc != DDP_OK)
        result_free(res);
    dp_ctx_free(c);
    return rc;
}
