/* dp/dp_device.c: one DP device's buffers (backend, replica, step meter; device 0 also the
 * optimizer and the whole-batch buffers), made and freed on the device's own thread. */
#include <stdio.h>
#include <string.h>

#include "dp/dp.h"

dp_backend_create_fn dp_backend_create_hook;

static float *dp_alloc(backend_t *be, size_t floats, const dp_dev_t *dv, const char *what,
                       mem_kind_t kind, int *rc, char *err)
{
    if (*rc != DDP_OK)
        return NULL;
    float *p = backend_alloc_for(be, (floats ? floats : 1) * sizeof(float), kind);
    if (!p)
        *rc = err_set(err, DDP_ERR_RUNTIME, "%s: out of memory allocating %s (%zu bytes)",
                      dv->name, what, floats * sizeof(float));
    return p;
}

/* Device d's step meter; device 0's also keeps the run's times, loss log, progress, story. */
static int dp_meter_init(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    run_result_t *res = c->res;
    return step_meter_init(&dv->meter,
                           &(step_meter_sinks_t){
                               .cfg = c->cfg,
                               .dev = &res->dev[d],
                               .trace = res->trace[d],
                               .times = d == 0 ? &res->times : NULL,
                               .log = d == 0 ? &res->log : NULL,
                               .final_loss = d == 0 ? &res->final_loss : NULL,
                               .story = d == 0 ? &res->story : NULL,
                               .progress = d == 0 ? "dp" : NULL,
                               .total_steps = c->total_steps,
                               .be = dv->be,
                               .place = dv->name,
                               .spec = &c->spec,
                               .optim = d == 0 ? &c->opt : NULL, /* set up after it */
                           },
                           err);
}

int dp_device_init(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    const config_t *cfg = c->cfg;
    /* blas_threads 0: dp_run set the process-wide count to one before any thread started */
    int rc = dp_backend_create_hook ? dp_backend_create_hook(&dv->be, cfg, dv->id, err)
                                    : backend_create(&dv->be, cfg->backend, dv->id, 0, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "%s", dv->name);
    backend_t *be = dv->be;
    if ((rc = backend_set_precision(be, cfg->precision)) != DDP_OK)
        return err_set(err, rc, "%s: %s", dv->name, backend_last_error(be));
    TRY(graph_init(&dv->graph, c->graphs, be, &dv->meter, dv->name, c->start_step, &c->group, d,
                   err));
    rc = replica_init(&dv->rep, be, &c->spec, c->chunk_max, c->data->tgt_cols, err);
    if (rc == DDP_OK)
        rc = dp_meter_init(c, d, err);
    dv->traced = c->res->trace[d] != NULL;
    dv->t = (train_step_t){.be = be, .rep = &dv->rep, .meter = &dv->meter, .loss = cfg->loss,
                           .place = dv->name, .name_phase = true, .err = err};
    if (rc != DDP_OK || d != 0)
        return rc;

    /* Device 0 holds the whole micro-batch, like DataParallel's output_device; its own chunk
     * is read in place from gx and gdout, as torch's scatter leaves chunk 0 a view. */
    size_t batch = (size_t)cfg->batch;
    int in = model_in_dim(&c->spec), out = model_out_dim(&c->spec), tgt = c->data->tgt_cols;
    c->bx = dp_alloc(be, batch * in, dv, "the batch inputs", MEM_ACTS, &rc, err);
    c->by = dp_alloc(be, batch * tgt, dv, "the batch targets", MEM_ACTS, &rc, err);
    c->gx = c->bx;
    c->gy = c->by;
    c->gout = dp_alloc(be, batch * out, dv, "the gathered outputs", MEM_ACTS, &rc, err);
    c->gdout = dp_alloc(be, batch * out, dv, "the output gradient", MEM_ACTS, &rc, err);
    c->loss_sum = dp_alloc(be, 1, dv, "the loss", MEM_ACTS, &rc, err);
    /* The loss's scratch for the whole micro-batch now, not in the first step. */
    if (rc == DDP_OK && backend_reserve(be, cfg->batch, out) != DDP_OK)
        rc = err_set(err, DDP_ERR_RUNTIME, "%s: reserving the loss's scratch: %s", dv->name,
                     backend_last_error(be));
    if (rc == DDP_OK)
        rc = stager_init(&c->stg, be, c->bx, c->by, cfg->batch, cfg->accum, c->data, err);
    dv->t.stg = &c->stg;
    dv->t.data = c->data;
    dv->t.dout = c->gdout; /* its chunk of the output gradient, read in place */
    if (rc != DDP_OK)
        return rc;
    if ((rc = optim_init(&c->opt, be, &cfg->optim, c->spec.nparams, err)) != DDP_OK)
        return err_prefix(err, rc, "%s", dv->name);
    /* --resume: dp_run read the file; its optimizer state goes to device 0. */
    TRY(ckpt_run_upload(&c->ck, &c->opt, err));
    rc = backend_h2d(be, dv->rep.params, c->host_params, c->spec.nparams * sizeof(float));
    /* Why sync: the first broadcast's copies wait for device 0's queue from
     * its post on, which these need not precede. */
    if (rc == DDP_OK)
        rc = backend_sync(be);
    if (rc != DDP_OK)
        return err_set(err, rc, "%s: %s", dv->name, backend_last_error(be));
    return DDP_OK;
}

void dp_device_free(dp_ctx_t *c, int d)
{
    dp_dev_t *dv = &c->dev[d];
    backend_t *be = dv->be;
    if (!be)
        return;
    /* Nothing queued may still use what is freed: the others passed the exit barrier, their
     * copies from here are queued before their teardown waits.  A deferred NCCL abort is
     * carried out here, device 0 having dropped its graphs. */
    comm_destroy(dv->comm ? dv->comm : dv->nccl); /* the group's owns its NCCL rank */
    dv->comm = dv->nccl = NULL;
    backend_sync(be);
    dp_replicas_free(c, d);
    if (d == 0) {
        optim_free(&c->opt);
        stager_free(&c->stg);
        float *bufs[] = {c->bx, c->by, c->gout, c->gdout, c->loss_sum};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            backend_free(be, bufs[i]);
        c->gx = c->gy = c->bx = c->by = c->gout = c->gdout = c->loss_sum = NULL;
    }
    step_meter_free(&dv->meter);
    graph_free(&dv->graph);
    replica_free(&dv->rep);
    backend_destroy(be);
    dv->be = NULL;
}
