/* dp/dp.c: the DataParallel strategy's entry point: set up the run, start
 * one thread per device, wait for them, and hand back the result (see dp.h
 * for what the threads do each step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp/dp.h"
#include "common/train/strategy.h"

/* The group's barrier, for its CUDA graph (graph.h). */
static int dp_sync(void *pool) { return dp_pool_sync(pool); }

/* The start's barriers: every device is through (DDP_OK), or one failed, which aborts it. */
static int meet(dp_ctx_t *c, int rc, char *err)
{
    if (rc == DDP_OK && (rc = dp_pool_sync(&c->pool)) != DDP_OK)
        err_set(err, rc, "stopped because another device failed");
    return rc;
}

/* What each device thread runs: its buffers, the step loop, its teardown. */
static void dp_worker(void *ctx, int d)
{
    dp_ctx_t *c = ctx;
    dp_dev_t *dv = &c->dev[d];
    char err[ERR_LEN] = "";
    int rc = meet(c, dp_device_init(c, d, err), err);
    if (rc == DDP_OK && d == 0) {
        bool hv = true;
        for (int i = 0; i < c->ndev; i++)
            hv = hv && backend_host_visible(c->dev[i].be);
        c->host_visible = hv;
        c->nccl = c->nccl && !hv;
        if (c->nccl) { /* one NCCL rank per device, all made here at once */
            backend_t *bes[MAX_DEVICES];
            comm_t *comms[MAX_DEVICES];
            for (int i = 0; i < c->ndev; i++)
                bes[i] = c->dev[i].be;
            rc = comm_nccl_group_create(comms, bes, c->ndev, c->cfg->timeout_s, err);
            for (int i = 0; i < c->ndev && rc == DDP_OK; i++)
                c->dev[i].nccl = comms[i];
        }
    }
    /* Barrier: host_visible and the NCCL ranks are set; each device joins the group, and
     * a barrier again: every member is in before any collective. */
    rc = meet(c, rc, err);
    if (rc == DDP_OK && (rc = dp_comm_join(c, d, err)) != DDP_OK)
        err_prefix(err, rc, "%s", dv->name);
    rc = meet(c, rc, err);
    /* Over NCCL with graphs (--cuda-graph on only), before anything trains: whether NCCL
     * captures at all (graph.h).  The probe insists: a refusal fails the run here. */
    if (rc == DDP_OK) {
        char refused[ERR_LEN];
        rc = graph_probe(c->cfg, c->nccl ? dv->nccl : NULL, dv->name, "every device",
                         &dv->graph.on, refused, err);
        if (rc != DDP_OK)
            err_prefix(err, rc, "%s", dv->name);
    }

    double t0 = now_s();
    if (rc == DDP_OK)
        rc = dp_device_loop(c, d, err);
    if (rc == DDP_OK && d == 0) {
        c->res->total_s = now_s() - t0;
        rc = backend_d2h(dv->be, c->host_params, dv->rep.params, c->spec.nparams * sizeof(float));
        if (rc != DDP_OK)
            err_set(err, rc, "%s: %s", dv->name, backend_last_error(dv->be));
    }
    if (rc != DDP_OK) {
        dp_pool_fail(&c->pool, rc, err); /* the first failure is the one reported */
        /* A device whose NCCL collective waits for this one must not wait out --timeout:
         * fail the whole NCCL group now (under a CUDA graph the abort waits for the
         * destroys, after the exit barrier: comm_nccl.c). */
        for (int i = 0; i < c->ndev; i++)
            comm_abort(c->dev[i].nccl, err);
    }
    if (dv->be) {
        c->res->dev[d].mem_peak = backend_mem_peak(dv->be);
        backend_mem_peak_split(dv->be, c->res->dev[d].mem_split);
    }
    /* Exit barrier: every device has stopped queuing; then device 0 ends a capture a failure
     * left open and its launched graphs finish, and only then does any device free. */
    dp_pool_leave(&c->pool, 1);
    graph_abandon(&dv->graph);
    dp_pool_leave(&c->pool, 2);
    dp_device_free(c, d);
}

static void dp_ctx_free(dp_ctx_t *c)
{
    ckpt_run_free(&c->ck);
    for (int i = 0; i < 2; i++)
        free(c->plan[i].idx); /* its rows are in the same block */
    free(c->host_params);
    schedule_free(&c->sch);
    free(c);
}

/* Everything before the threads start; dp_run frees c whatever this returns. */
static int dp_setup(dp_ctx_t *c, const config_t *cfg, const dataset_t *data, run_result_t *res,
                    char *err)
{
    int ndev = cfg->ngpus;
    TRY(config_model_spec(cfg, &c->spec, err));
    c->cfg = cfg;
    c->data = data;
    c->ndev = ndev;
    c->chunk_max = (cfg->batch + ndev - 1) / ndev;
    c->res = res;
    c->nccl = config_dp_nccl(cfg);
    c->graphs = config_graphs_on(cfg, MODE_DP);
    c->group = (graph_group_t){.n = ndev, .sync = dp_sync, .ctx = &c->pool};
    res->mode = MODE_DP;
    res->backend = cfg->backend;
    res->ndev = ndev;
    for (int d = 0; d < ndev; d++) {
        dp_dev_t *dv = &c->dev[d];
        dv->id = cfg->gpus[d];
        res->dev[d].device_id = dv->id;
        /* Messages name the slot (what DDPBENCH_FAULT counts), and the id when it differs. */
        if (dv->id == d)
            snprintf(dv->name, sizeof dv->name, "device %d", d);
        else
            snprintf(dv->name, sizeof dv->name, "device %d (id %d)", d, dv->id);
    }

    /* --trace and --report: one recorder per device, written by its thread only.  Beyond
     * trace_capacity's phases a step records 7 more and its copies: replicate and reduce
     * ndev-1 each, per micro-batch two scatters (devices 1..) or ndev-1 gathers (device 0). */
    int extra = 7 + (ndev - 1) * (cfg->accum + 2) + 2 * cfg->accum;
    bool record = cfg->trace_path[0] || cfg->report_path[0]; /* --report draws a step of them */
    int rc = result_trace_init(res, record, ndev, cfg->accum, extra);
    if (rc != DDP_OK)
        return err_set(err, rc, "dp: out of host memory for the --trace recorders");
    TRY(schedule_init(&c->sch, cfg, data, 1, 0, err));
    for (int i = 0; i < 2; i++) {
        /* one block of whole cache lines each: idx, then rows (dp_plan_t) */
        size_t bytes = (size_t)cfg->accum * (sizeof *c->plan[i].idx + sizeof *c->plan[i].rows);
        void *block = NULL;
        if (posix_memalign(&block, 64, (bytes + 63) / 64 * 64) == 0) {
            memset(block, 0, (bytes + 63) / 64 * 64);
            c->plan[i].idx = block;
            c->plan[i].rows = (int *)(c->plan[i].idx + cfg->accum);
        }
        if (!c->plan[i].rows || !c->plan[i].idx)
            return err_set(err, DDP_ERR_RUNTIME,
                           "dp: out of host memory for the step plans (%zu bytes)",
                           (size_t)cfg->accum * (sizeof *c->plan[i].rows + sizeof *c->plan[i].idx));
    }
    c->host_params = malloc(c->spec.nparams * sizeof(float));
    if (!c->host_params)
        return err_set(err, DDP_ERR_RUNTIME,
                       "dp: out of host memory for the parameters (%zu bytes)",
                       c->spec.nparams * sizeof(float));
    TRY(trainer_initial_params(cfg, &c->spec, c->host_params, err));
    /* --resume replaces the initial parameters and the first step here; the optimizer state
     * waits in c->ck for device 0's thread, which owns it (dp_device_init). */
    TRY(ckpt_run_init(&c->ck, cfg, &c->spec, NULL, 0, err));
    TRY(ckpt_run_load(&c->ck, &c->sch, c->host_params, err));
    c->total_steps = c->sch.total_steps;
    c->start_step = c->sch.start_step;
    trainer_begin(res, cfg, &c->sch);
    dp_plan_step(c, c->start_step); /* the first step's plan, before any thread reads it */
    return DDP_OK;
}

/* The threads' run, then what the result keeps. */
static int dp_train(dp_ctx_t *c, char *err)
{
    /* One BLAS thread per worker, set once here: the count is process-wide
     * and changing it while another worker runs a GEMM is not safe. */
    if (c->cfg->backend == BACKEND_CPU)
        backend_cpu_set_threads(1);
    int rc = dp_pool_start(&c->pool, c->ndev, c->cfg->backend == BACKEND_CPU, dp_worker, c, err);
    /* Join in every case: a failed start still has threads to wait for. */
    char jerr[ERR_LEN];
    int jrc = dp_pool_join(&c->pool, jerr);
    if (rc == DDP_OK && jrc != DDP_OK)
        rc = err_set(err, jrc, "%s", jerr);
    if (rc != DDP_OK)
        return rc;

    /* --check-replicas: device 0's part of each check, and the slowest other's */
    double others = 0.0;
    for (int d = 1; d < c->ndev; d++)
        others = c->check.secs[d] > others ? c->check.secs[d] : others;
    c->res->replicas.seconds = c->check.secs[0] + others;
    /* device 0 timed the steps; the others' edges differ by a hair (skew) */
    trainer_end(c->res, c->spec.nparams, c->host_params);
    c->host_params = NULL;
    return DDP_OK;
}

static int dp_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err)
{
    result_init(res);
    int ndev = cfg->ngpus;
    if (ndev < 1 || ndev > MAX_DEVICES)
        return err_set(err, DDP_ERR_INPUT, "--gpus: dp takes 1 to %d devices, got %d",
                       MAX_DEVICES, ndev);
    /* Aligned as its type asks (cache lines of their own: dp.h); calloc gives 16. */
    dp_ctx_t *c = NULL;
    if (posix_memalign((void **)&c, _Alignof(dp_ctx_t), sizeof *c) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "dp: out of host memory for the run's state (%zu bytes)",
                       sizeof *c);
    memset(c, 0, sizeof *c);
    int rc = dp_setup(c, cfg, data, res, err);
    if (rc == DDP_OK)
        rc = dp_train(c, err);
    if (rc != DDP_OK)
        result_free(res);
    dp_ctx_free(c);
    return rc;
}

/* Device 0 steps the optimizer; the others hold a replica and its gradients. */
static int dp_mem(const model_spec_t *s, const config_t *c, int devices, int device,
                  strategy_mem_t *out, char *err)
{
    (void)devices, (void)err;
    *out = strategy_mem_whole(s, c, device == 0);
    return DDP_OK;
}

const strategy_t dp_strategy = {.run = dp_run, .mem = dp_mem};
