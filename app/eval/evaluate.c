/* app/eval/evaluate.c: the trained parameters over the whole dataset, on the
 * CPU, after the run (see evaluate.h). */
#include "app/eval/evaluate.h"

#include <string.h>

#include "common/base/status.h"
#include "common/device/backend.h"

int eval_params(const model_spec_t *spec, loss_t loss, const float *params, const dataset_t *d,
                double *mean_loss, double *accuracy, char *err)
{
    *mean_loss = -1.0;
    *accuracy = -1.0;
    if (2.0 * (double)spec->nparams * (double)d->n > 2e10)
        return DDP_OK;
    /* Chunks of at most 1024 rows, no more than the data has, and no more
     * than about 64 MiB of activations (a 10^6-column input would otherwise
     * ask for gigabytes it does not need). */
    size_t row_bytes = 0;
    for (int l = 0; l <= spec->nlayers; l++)
        row_bytes += 3 * (size_t)spec->dims[l] * sizeof(float);
    size_t fit = ((size_t)64 << 20) / (row_bytes ? row_bytes : 1);
    size_t rows_max = d->n < 1024 ? d->n : 1024;
    if (rows_max > fit)
        rows_max = fit ? fit : 1;
    const int chunk = (int)(rows_max ? rows_max : 1);
    backend_t *be;
    int rc = backend_cpu_create(&be, 0, 0, err);
    if (rc != DDP_OK)
        return rc;
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
