/* dp/dp_device.c: one DP device's buffers: its backend and replica, and on
 * device 0 also the optimizer, the whole-batch buffers the gather and the
 * loss use, and the initial parameters.  Created and freed on the device's
 * own thread (a CUDA device is current per thread, and a backend's memory
 * figures are kept by the thread that owns it). */
#include <stdio.h>
#include <string.h>

#include "dp/dp.h"

dp_backend_create_fn dp_backend_create_hook;

static float *dp_alloc(backend_t *be, size_t floats, const dp_dev_t *dv, const char *what,
                       int *rc, char *err)
{
    if (*rc != DDP_OK)
        return NULL;
    float *p = backend_alloc(be, (floats ? floats : 1) * sizeof(float));
    if (!p)
        *rc = err_set(err, DDP_ERR_RUNTIME, "%s: out of memory allocating %s (%zu bytes)",
                      dv->name, what, floats * sizeof(float));
    return p;
}

int dp_device_init(dp_ctx_t *c, int d, char *err)
{
    dp_dev_t *dv = &c->dev[d];
    const config_t *cfg = c->cfg;
    /* blas_threads 0: leave the OpenBLAS thread count alone; dp_run set it to
     * one per worker before any thread started (the count is process-wide). */
    int rc = dp_backend_create_hook ? dp_backend_create_hook(&dv->be, cfg, dv->id, err)
                                    : backend_create(&dv->be, cfg->backend, dv->id, 0, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "%s", dv->name);
    backend_t *be = dv->be;
    /* replica_init's message names the device, the buffer and its size */
    rc = replica_init(&dv->rep, be, &c->spec, c->chunk_max, c->data->tgt_cols, err);
    if (rc != DDP_OK || d != 0)
        return rc;

    /* Device 0: the whole micro-batch lives here (it is staged here, the
     * outputs are gathered here and the loss is computed here), like the
     * output_device of torch.nn.DataParallel.  Its own chunk is read in place
     * from gx and gdout, as torch's scatter leaves chunk 0 a view. */
    size_t batch = (size_t)cfg->batch;
    int in = model_in_dim(&c->spec), out = model_out_dim(&c->spec), tgt = c->data->tgt_cols;
    c->gx = dp_alloc(be, batch * in, dv, "the batch inputs", &rc, err);
    c->gy = dp_alloc(be, batch * tgt, dv, "the batch targets", &rc, err);
    c->gout = dp_alloc(be, batch * out, dv, "the gathered outputs", &rc, err);
    c->gdout = dp_alloc(be, batch * out, dv, "the output gradient", &rc, err);
    c->loss_sum = dp_alloc(be, 1, dv, "the loss", &rc, err);
    if (rc == DDP_OK && !backend_host_visible(be)) {
        if (c->k > 1)
            c->gscratch = dp_alloc(be, c->spec.nparams, dv, "the reduce buffer", &rc, err);
        if (rc == DDP_OK) {
            c->staging = backend_alloc_host(be, batch * (in + tgt) * sizeof(float));
            if (!c->staging)
                rc = err_set(err, DDP_ERR_RUNTIME, "%s: out of pinned memory", dv->name);
        }
    }
    if (rc != DDP_OK)
        return rc;
    if ((rc = optim_init(&c->opt, be, &cfg->optim, c->spec.nparams, err)) != DDP_OK)
        return err_prefix(err, rc, "%s", dv->name);
    /* --resume: dp_run read the file; its optimizer state goes to device 0. */
    if ((rc = ckpt_run_upload(&c->ck, &c->opt, err)) != DDP_OK)
        return rc;
    rc = backend_h2d(be, dv->rep.params, c->host_params, c->spec.nparams * sizeof(float));
    /* Why sync: the first replicate copies these parameters to the other
     * devices with peer copies that do not wait for device 0's stream. */
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
    if (d == 0) {
        optim_free(&c->opt);
        float *bufs[] = {c->gx, c->gy, c->gout, c->gdout, c->loss_sum, c->gscratch};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i])
                backend_free(be, bufs[i]);
        if (c->staging)
            backend_free_host(be, c->staging);
        c->gx = c->gy = c->gout = c->gdout = c->loss_sum = c->gscratch = c->staging = NULL;
    }
    replica_free(&dv->rep);
    backend_destroy(be);
    dv->be = NULL;
}
