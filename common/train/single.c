/* common/train/single.c: the baseline strategy, the whole global batch on one
 * device, and the reference the equivalence contract checks DP and DDP
 * against; the fenced single_step is the training step alone.  On a GPU the
 * meter's wait for the previous step is its one host synchronisation, so the
 * host gathers the next batch while the GPU computes this one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/schedule.h"
#include "common/io/checkpoint.h"
#include "common/measure/step_meter.h"
#include "common/nn/optim.h"
#include "common/train/step.h"
#include "common/train/strategy.h"
#include "common/train/trainer.h"

typedef struct {
    const config_t *cfg;
    const dataset_t *data;
    run_result_t *res;
    model_spec_t spec;
    backend_t *be;
    char place[32];     /* "device 0": how its failures are named */
    replica_t rep;
    optim_t opt;
    schedule_t sch;
    stager_t stg;
    ckpt_run_t ck;
    float *host;        /* the initial parameters, then the final ones */
    step_meter_t meter; /* everything measured, the loss and progress lines */
    graph_t graph;      /* --cuda-graph: full steps after the first replayed as CUDA graphs */
    train_step_t t;     /* the step's pieces on this device */
    char *err;
} single_t;

/* A device call's status; a failure is named by the device. */
static int dev(single_t *s, int rc) { return backend_check(s->be, rc, s->place, s->err); }

// ---------------------------------------------------------------------------
// setup and teardown

static int single_setup(single_t *s)
{
    const config_t *cfg = s->cfg;
    run_result_t *res = s->res;
    TRY(config_model_spec(cfg, &s->spec, s->err));
    res->mode = MODE_SINGLE;
    res->backend = cfg->backend;
    res->ndev = 1;
    res->dev[0].device_id = cfg->gpus[0];
    if (result_trace_init(res, cfg->trace_path[0] || cfg->report_path[0], 1, cfg->accum, 0) != DDP_OK)
        return err_set(s->err, DDP_ERR_RUNTIME, "out of memory for the trace");
    TRY(backend_create(&s->be, cfg->backend, cfg->gpus[0], cfg->threads, s->err));
    snprintf(s->place, sizeof s->place, "device %d", cfg->gpus[0]);
    /* before the replica, so a bf16 GEMM's scratch is reserved with it */
    TRY(dev(s, backend_set_precision(s->be, cfg->precision)));
    TRY(schedule_init(&s->sch, cfg, s->data, 1, 0, s->err));
    TRY(replica_init(&s->rep, s->be, &s->spec, cfg->batch, s->data->tgt_cols, s->err));
    TRY(optim_init(&s->opt, s->be, &cfg->optim, s->spec.nparams, s->err));
    if (!(s->host = malloc(s->spec.nparams * sizeof(float))))
        return err_set(s->err, DDP_ERR_RUNTIME, "out of memory for the parameters");
    TRY(trainer_initial_params(cfg, &s->spec, s->host, s->err));
    /* --resume replaces the initial parameters, the optimizer state and the
     * first step; the checkpoints of --checkpoint are written from device 0. */
    TRY(ckpt_run_init(&s->ck, cfg, &s->spec, &s->opt, 0, s->err));
    TRY(ckpt_run_resume(&s->ck, &s->sch, s->host, &s->opt, s->err));
    TRY(stager_init(&s->stg, s->be, s->rep.x, s->rep.y, cfg->batch, cfg->accum, s->data, s->err));
    TRY(dev(s, backend_h2d(s->be, s->rep.params, s->host, s->spec.nparams * sizeof(float))));
    TRY(dev(s, backend_sync(s->be)));
    TRY(graph_init(&s->graph, config_graphs_on(cfg, MODE_SINGLE), s->be, &s->meter, s->place,
                   s->sch.start_step, NULL, 0, s->err));
    s->t = (train_step_t){.be = s->be, .rep = &s->rep, .meter = &s->meter, .loss = cfg->loss,
                          .stg = &s->stg, .data = s->data, .graph = &s->graph,
                          .place = s->place, .err = s->err};

    trainer_begin(res, cfg, &s->sch);
    return step_meter_init(&s->meter,
                           &(step_meter_sinks_t){
                               .cfg = cfg,
                               .dev = &res->dev[0],
                               .trace = res->trace[0],
                               .times = &res->times,
                               .log = &res->log,
                               .final_loss = &res->final_loss,
                               .story = &res->story,
                               .progress = "single",
                               .total_steps = s->sch.total_steps,
                               .be = s->be,
                               .place = s->place,
                               .spec = &s->spec,
                               .optim = &s->opt,
                           },
                           s->err);
}

static void single_teardown(single_t *s)
{
    if (s->be)
        graph_abandon(&s->graph);
    free(s->host);
    ckpt_run_free(&s->ck);
    stager_free(&s->stg);
    step_meter_free(&s->meter);
    optim_free(&s->opt);
    replica_free(&s->rep);
    schedule_free(&s->sch);
    backend_destroy(s->be);
}

// ---- TRAINING STEP BEGIN ----------------------------------------------------

/* Step g: every micro-batch forward, loss and backward (the gradients add
 * up), then the optimizer. */
static int single_step(single_t *s, long g)
{
    train_step_t *t = &s->t;
    float scale = 1.0f / (float)schedule_step_rows(&s->sch, g); /* the mean over the step */
    for (int mi = 0; mi < s->cfg->accum; mi++) {
        int rows;
        const uint32_t *idx = schedule_micro(&s->sch, g, mi, &rows);
        if (rows == 0)
            break; /* an epoch's short last step */
        float *x, *y;
        TRY(step_stage(t, idx, rows, &x, &y));
        TRY(step_forward(t, x, rows));
        TRY(step_loss(t, y, rows, scale));
        TRY(step_backward(t, x, rows, NULL, NULL));
    }
    return step_optim(t, &s->opt);
}

// ---- TRAINING STEP END ------------------------------------------------------

// ---------------------------------------------------------------------------
// the loop

static int single_train(single_t *s)
{
    schedule_t *sch = &s->sch;
    step_meter_t *m = &s->meter;
    run_result_t *res = s->res;
    double t_start = now_s();
    for (long g = sch->start_step; g < sch->total_steps; g++) {
        trainer_step_begin(m, sch, g);
        graph_arm(&s->graph, g, schedule_full_step(sch, g));
        step_begin(&s->t);
        TRY(graph_close(&s->graph, single_step(s, g), s->err));
        TRY(step_meter_end(m, NULL, s->err));
        if ((s->cfg->watch & WATCH_GRAD) && g == sch->start_step) /* a scenario's record */
            TRY(dev(s, replica_grad_norm(&s->rep, &res->dev[0].grad_norm)));
        if (ckpt_run_due(&s->ck, sch, g))
            TRY(ckpt_run_write(&s->ck, sch, s->rep.params, &s->opt, g, s->err));
    }
    TRY(step_meter_finish(m, s->err));
    res->total_s = now_s() - t_start;

    TRY(dev(s, backend_d2h(s->be, s->host, s->rep.params, s->spec.nparams * sizeof(float))));
    res->dev[0].mem_peak = backend_mem_peak(s->be);
    backend_mem_peak_split(s->be, res->dev[0].mem_split);
    trainer_end(res, s->spec.nparams, s->host);
    s->host = NULL;
    return DDP_OK;
}

static int single_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err)
{
    single_t s = {.cfg = cfg, .data = data, .res = res, .err = err};
    result_init(res);
    int rc = single_setup(&s);
    if (rc == DDP_OK)
        rc = single_train(&s);
    single_teardown(&s);
    return rc;
}

static int single_mem(const model_spec_t *s, const config_t *c, int devices, int device,
                      strategy_mem_t *out, char *err)
{
    (void)devices, (void)device, (void)err;
    *out = strategy_mem_whole(s, c, true);
    return DDP_OK;
}

const strategy_t single_strategy = {.run = single_run, .mem = single_mem};
