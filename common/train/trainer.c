/* common/trainer.c: the schedule, data loading, initial parameters, batch
 * staging and evaluation shared by every strategy (see trainer.h). */
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "base/status.h"

// ---------------------------------------------------------------------------
// data and parameters

int trainer_load_data(const config_t *c, const model_spec_t *spec, dataset_t *d, char *err)
{
    int rc;
    bool labels = c->loss == LOSS_CE;
    if (c->data_path[0]) {
        size_t n = strlen(c->data_path);
        if (n >= 4 && strcmp(c->data_path + n - 4, ".npy") == 0)
            rc = data_load_npy(d, c->data_path, c->targets_path, labels, err);
        else
            rc = data_load_csv(d, c->data_path, c->target_cols, labels, err);
    } else {
        synth_kind_t k = c->dataset;
        if (k == SYNTH_AUTO)
            k = c->loss == LOSS_MSE ? SYNTH_REGRESSION
                : c->loss == LOSS_BCE ? SYNTH_BINARY : SYNTH_CLASSES;
        if (k == SYNTH_CLASSES && c->loss != LOSS_CE)
            return err_set(err, DDP_ERR_INPUT,
                           "--dataset classes: holds class ids, which only --loss ce takes");
        if (k != SYNTH_CLASSES && c->loss == LOSS_CE)
            return err_set(err, DDP_ERR_INPUT, "--dataset %s: --loss ce needs --dataset classes",
                           synth_name(k));
        rc = data_synthetic(d, k, (size_t)c->samples, model_in_dim(spec), model_out_dim(spec),
                            c->seed, c->noise, err);
    }
    if (rc != DDP_OK)
        return rc;
    rc = data_check(d, model_in_dim(spec), model_out_dim(spec), c->loss, err);
    if (rc != DDP_OK)
        data_free(d);
    return rc;
}

int trainer_initial_params(const config_t *c, const model_spec_t *spec, float *host, char *err)
{
    if (c->init_path[0])
        return ckpt_load_weights(c->init_path, "--init", spec, host, err);
    model_init_params(spec, c->seed, host);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// moving a batch

/* Queue the h2d of a gathered batch (staging holds max_rows rows of x, then of y). */
static int stage_h2d(replica_t *r, const dataset_t *d, const float *staging, int max_rows,
                     int rows, phase_clock_t *pc)
{
    backend_t *be = r->be;
    const float *sx = staging, *sy = staging + (size_t)max_rows * d->in_dim;
    int rc = backend_h2d(be, r->x, sx, (size_t)rows * d->in_dim * sizeof(float));
    if (rc == DDP_OK)
        rc = backend_h2d(be, r->y, sy, (size_t)rows * d->tgt_cols * sizeof(float));
    phase_clock_lap(pc, PH_H2D);
    return rc;
}

int trainer_stage_batch(replica_t *r, const dataset_t *d, const uint32_t *idx, int rows,
                        float *staging, phase_clock_t *pc)
{
    backend_t *be = r->be;
    if (backend_host_visible(be)) {
        data_gather(d, idx, rows, r->x, r->y);
        phase_clock_lap(pc, PH_DATA);
        return DDP_OK;
    }
    data_gather(d, idx, rows, staging, staging + (size_t)r->max_rows * d->in_dim);
    phase_clock_lap(pc, PH_DATA);
    return stage_h2d(r, d, staging, r->max_rows, rows, pc);
}

// ---------------------------------------------------------------------------
// double-buffered staging (see trainer.h)

int stager_init(stager_t *s, backend_t *be, int max_rows, const dataset_t *d, char *err)
{
    memset(s, 0, sizeof *s);
    s->be = be;
    s->max_rows = max_rows;
    s->last = -1;
    s->ready_key = -1;
    if (backend_host_visible(be))
        return DDP_OK;
    size_t bytes = (size_t)max_rows * (size_t)(d->in_dim + d->tgt_cols) * sizeof(float);
    for (int i = 0; i < 2; i++)
        if (!(s->buf[i] = backend_alloc_host(be, bytes))) {
            stager_free(s);
            return err_set(err, DDP_ERR_RUNTIME, "device %d: out of pinned memory (%zu bytes): %s",
                           backend_device_id(be), bytes, backend_last_error(be));
        }
    return DDP_OK;
}

void stager_free(stager_t *s)
{
    for (int i = 0; i < 2; i++)
        if (s->buf[i])
            backend_free_host(s->be, s->buf[i]);
    s->buf[0] = s->buf[1] = NULL;
}

static float *stager_gather(stager_t *s, int b, const dataset_t *d, const uint32_t *idx, int rows)
{
    float *buf = s->buf[b];
    data_gather(d, idx, rows, buf, buf + (size_t)s->max_rows * d->in_dim);
    return buf;
}

int stager_stage(stager_t *s, replica_t *r, const dataset_t *d, long key, const uint32_t *idx,
                 int rows, phase_clock_t *pc)
{
    if (!stager_active(s))
        return trainer_stage_batch(r, d, idx, rows, NULL, pc);
    int b;
    if (key >= 0 && key == s->ready_key) {
        b = s->ready_buf; /* gathered while the device ran the previous micro-step */
    } else {
        b = s->last < 0 ? 0 : s->last ^ 1;
        stager_gather(s, b, d, idx, rows);
        phase_clock_lap(pc, PH_DATA);
    }
    s->ready_key = -1;
    s->last = b;
    /* Why the other buffer is free for the next gather: this h2d reads buf[b]
     * only; the caller syncs before the next stage (see trainer.h). */
    return stage_h2d(r, d, s->buf[b], s->max_rows, rows, pc);
}

void stager_prefetch(stager_t *s, const dataset_t *d, long key, const uint32_t *idx, int rows,
                     phase_clock_t *pc)
{
    if (!stager_active(s) || rows <= 0)
        return;
    /* Not the buffer the last h2d read (it may still be in flight); the one
     * before it was read by an h2d that a sync has since completed. */
    int b = s->last < 0 ? 0 : s->last ^ 1;
    stager_gather(s, b, d, idx, rows);
    s->ready_key = key;
    s->ready_buf = b;
    phase_clock_lap(pc, PH_DATA);
}

// ---------------------------------------------------------------------------
// evaluation over the whole dataset

int trainer_evaluate(const model_spec_t *spec, loss_t loss, const float *params,
                     const dataset_t *d, double *mean_loss, double *accuracy, char *err)
{
    *mean_loss = -1.0;
    *accuracy = -1.0;
    if (2.0 * (double)spec->nparams * (double)d->n > 2e10)
        return DDP_OK;
    backend_t *be;
    int rc = backend_cpu_create(&be, 0, 0, err);
    if (rc != DDP_OK)
        return rc;
    const int chunk = 1024;
    replica_t r;
    rc = replica_init(&r, be, spec, chunk, d->tgt_cols, err);
    if (rc != DDP_OK) {
        backend_destroy(be);
        return rc;
    }
    memcpy(r.params, params, spec->nparams * sizeof(float));
    int out = model_out_dim(spec);
    double total = 0.0;
    size_t correct = 0, judged = 0;
    for (size_t first = 0; first < d->n && rc == DDP_OK; first += chunk) {
        int rows = (int)(d->n - first < (size_t)chunk ? d->n - first : (size_t)chunk);
        memcpy(r.x, d->x + first * d->in_dim, (size_t)rows * d->in_dim * sizeof(float));
        memcpy(r.y, d->y + first * d->tgt_cols, (size_t)rows * d->tgt_cols * sizeof(float));
        rc = model_forward(&r, r.x, rows);
        if (rc == DDP_OK)
            rc = model_loss(&r, loss, r.y, rows, 1.0f);
        if (rc != DDP_OK)
            break;
        total += *r.loss_sum;
        const float *o = replica_output(&r);
        for (int i = 0; i < rows; i++) {
            const float *oi = o + (size_t)i * out;
            if (loss == LOSS_CE) {
                int best = 0;
                for (int c = 1; c < out; c++)
                    if (oi[c] > oi[best])
                        best = c;
                correct += best == (int)r.y[i];
                judged++;
            } else if (loss == LOSS_BCE) {
                for (int c = 0; c < out; c++) {
                    correct += (oi[c] > 0.0f) == (r.y[(size_t)i * out + c] > 0.5f);
                    judged++;
                }
            }
        }
    }
    if (rc == DDP_OK) {
        *mean_loss = total / (double)d->n;
        if (judged)
            *accuracy = (double)correct / (double)judged;
    } else {
        err_set(err, rc, "evaluation: %s", backend_last_error(be));
    }
    replica_free(&r);
    backend_destroy(be);
    return rc;
}

void trainer_log_loss(const config_t *c, long step, long total, long epoch, double loss)
{
    if (c->quiet)
        return;
    FILE *f = (c->json || c->csv) ? stderr : stdout;
    fprintf(f, "step %*ld/%ld  epoch %ld  loss %.6f\n", total >= 1000 ? 5 : 3, step, total,
            epoch + 1, loss);
}
