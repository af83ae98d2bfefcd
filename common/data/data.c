/* common/data/data.c: synthetic datasets, the dataset/model check, row gathering
 * and freeing (the file loaders live in app/load/). */
#include "common/data/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "common/base/status.h"

// ---------------------------------------------------------------------------
// synthetic sets: features ~ N(0,1), targets from a random teacher

#define BINARY_MARGIN 1.0
#define TEACHER_HIDDEN 32

static int alloc_rows(dataset_t *d, size_t n, int in_dim, int tgt_cols, char *err)
{
    if (n == 0 || n > DATA_MAX_ROWS)
        return err_set(err, DDP_ERR_INPUT, "--samples: must be 1..%zu, got %zu", DATA_MAX_ROWS, n);
    size_t cols = (size_t)in_dim + (size_t)tgt_cols;
    if (cols > DATA_MAX_COLS || n > DATA_MAX_BYTES / sizeof(float) / cols)
        return err_set(err, DDP_ERR_INPUT,
                       "--samples: %zu rows of %zu columns is more than %zu GiB", n, cols,
                       DATA_MAX_BYTES >> 30);
    d->x = malloc(n * (size_t)in_dim * sizeof(float));
    d->y = malloc(n * (size_t)tgt_cols * sizeof(float));
    if (!d->x || !d->y) {
        data_free(d);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for %zu samples", n);
    }
    d->n = n;
    d->in_dim = in_dim;
    d->tgt_cols = tgt_cols;
    return DDP_OK;
}

/* Teacher weights ~ N(0, 1/fan_in) so every teacher output is O(1). */
static float *teacher_matrix(rng_t *r, int out, int in)
{
    float *w = malloc((size_t)out * in * sizeof(float));
    if (!w)
        return NULL;
    double sd = 1.0 / sqrt((double)in);
    for (size_t i = 0; i < (size_t)out * in; i++)
        w[i] = (float)(sd * rng_normal(r));
    return w;
}

static void matvec(const float *w, const float *x, int out, int in, double *y)
{
    for (int o = 0; o < out; o++) {
        double s = 0.0;
        for (int i = 0; i < in; i++)
            s += (double)w[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

int data_synthetic(dataset_t *d, synth_kind_t kind, size_t n, int in_dim, int out_dim,
                   uint64_t seed, float noise, char *err)
{
    memset(d, 0, sizeof *d);
    if (in_dim < 1 || out_dim < 1)
        return err_set(err, DDP_ERR_INPUT, "synthetic data needs widths >= 1");
    if (kind == SYNTH_CLASSES && out_dim < 2)
        return err_set(err, DDP_ERR_INPUT,
                       "--dataset classes: the last layer must have >= 2 outputs (classes), got %d",
                       out_dim);
    bool labels = kind == SYNTH_CLASSES;
    TRY(alloc_rows(d, n, in_dim, labels ? 1 : out_dim, err));
    d->labels = labels;
    snprintf(d->source, sizeof d->source, "synthetic %s", synth_name(kind));

    rng_t rx, rt, rn;
    rng_seed_stream(&rx, seed, RNG_STREAM_DATA);
    rng_seed_stream(&rt, seed, RNG_STREAM_TEACHER);
    rng_seed_stream(&rn, seed, RNG_STREAM_NOISE);
    for (size_t i = 0; i < n * (size_t)in_dim; i++)
        d->x[i] = (float)rng_normal(&rx);

    /* Regression teacher: in -> TEACHER_HIDDEN (tanh) -> out.  The narrow
     * hidden layer keeps generation O(n (in + out)), so the large presets
     * start in seconds.  Binary and classes: a linear teacher, so the labels
     * are linearly separable. */
    int hidden = kind == SYNTH_REGRESSION ? TEACHER_HIDDEN : 0;
    float *w1 = teacher_matrix(&rt, kind == SYNTH_REGRESSION ? hidden : out_dim, in_dim);
    float *w2 = kind == SYNTH_REGRESSION ? teacher_matrix(&rt, out_dim, hidden) : NULL;
    int width = hidden > out_dim ? hidden : out_dim;
    double *h = malloc((size_t)width * sizeof(double));
    double *o = malloc((size_t)out_dim * sizeof(double));
    float *hf = malloc((size_t)width * sizeof(float));
    if (!w1 || (kind == SYNTH_REGRESSION && !w2) || !h || !o || !hf) {
        free(w1), free(w2), free(h), free(o), free(hf);
        data_free(d);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the synthetic teacher");
    }
    for (size_t r = 0; r < n; r++) {
        const float *x = d->x + r * (size_t)in_dim;
        float *y = d->y + r * (size_t)d->tgt_cols;
        switch (kind) {
        case SYNTH_REGRESSION:
            matvec(w1, x, hidden, in_dim, h);
            for (int j = 0; j < hidden; j++)
                hf[j] = (float)tanh(h[j]);
            matvec(w2, hf, out_dim, hidden, o);
            for (int j = 0; j < out_dim; j++)
                y[j] = (float)(o[j] + noise * rng_normal(&rn));
            break;
        case SYNTH_BINARY:
            matvec(w1, x, out_dim, in_dim, o);
            for (int j = 0; j < out_dim; j++)
                y[j] = o[j] > 0.0 ? 1.0f : 0.0f;
            if (out_dim == 1) {
                /* Move each point BINARY_MARGIN away from the teacher's plane,
                 * on its own side: the classes stay separable by the same
                 * teacher, now with a margin a short SGD run can find. */
                double norm2 = 0.0;
                for (int i = 0; i < in_dim; i++)
                    norm2 += (double)w1[i] * w1[i];
                double shift = (o[0] > 0.0 ? BINARY_MARGIN : -BINARY_MARGIN) / sqrt(norm2);
                for (int i = 0; i < in_dim; i++)
                    d->x[r * (size_t)in_dim + i] += (float)(shift * w1[i]);
            }
            break;
        case SYNTH_CLASSES: {
            matvec(w1, x, out_dim, in_dim, o);
            int best = 0;
            for (int j = 1; j < out_dim; j++)
                if (o[j] > o[best])
                    best = j;
            y[0] = (float)best;
            break;
        }
        case SYNTH_AUTO:
            break;
        }
    }
    free(w1), free(w2), free(h), free(o), free(hf);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// checks, gathering, freeing

int data_check(const dataset_t *d, int model_in, int model_out, loss_t loss, char *err)
{
    if (d->in_dim != model_in)
        return err_set(err, DDP_ERR_INPUT,
                       "--layers: the model takes %d input%s but %s has %d feature column%s",
                       model_in, model_in == 1 ? "" : "s", d->source, d->in_dim,
                       d->in_dim == 1 ? "" : "s");
    if (loss == LOSS_CE) {
        if (d->tgt_cols != 1)
            return err_set(err, DDP_ERR_INPUT,
                           "--loss ce: needs one column of class ids, %s has %d target column%s",
                           d->source, d->tgt_cols, d->tgt_cols == 1 ? "" : "s");
        if (model_out < 2)
            return err_set(err, DDP_ERR_INPUT,
                           "--loss ce: the last layer must have >= 2 outputs (one per class)");
    } else if (d->tgt_cols != model_out) {
        return err_set(err, DDP_ERR_INPUT,
                       "--layers: the model has %d outputs but %s has %d target columns",
                       model_out, d->source, d->tgt_cols);
    }
    for (size_t i = 0; i < d->n * (size_t)d->in_dim; i++)
        if (!isfinite(d->x[i]))
            return err_set(err, DDP_ERR_INPUT, "%s: feature row %zu holds %g", d->source,
                           i / (size_t)d->in_dim, d->x[i]);
    for (size_t i = 0; i < d->n * (size_t)d->tgt_cols; i++) {
        float t = d->y[i];
        size_t row = i / (size_t)d->tgt_cols;
        if (!isfinite(t))
            return err_set(err, DDP_ERR_INPUT, "%s: target row %zu holds %g", d->source, row, t);
        if (loss == LOSS_CE && (t != floorf(t) || t < 0.0f || t >= (float)model_out))
            return err_set(err, DDP_ERR_INPUT,
                           "--loss ce: %s target row %zu is %g, not a class id in 0..%d",
                           d->source, row, t, model_out - 1);
        if (loss == LOSS_BCE && (t < 0.0f || t > 1.0f))
            return err_set(err, DDP_ERR_INPUT,
                           "--loss bce: %s target row %zu is %g, outside [0, 1]", d->source, row,
                           t);
    }
    return DDP_OK;
}

void data_gather(const dataset_t *d, const uint32_t *idx, int rows, float *x, float *y)
{
    size_t xs = (size_t)d->in_dim * sizeof(float), ys = (size_t)d->tgt_cols * sizeof(float);
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * d->in_dim, d->x + (size_t)idx[r] * d->in_dim, xs);
        memcpy(y + (size_t)r * d->tgt_cols, d->y + (size_t)idx[r] * d->tgt_cols, ys);
    }
}

void data_free(dataset_t *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}
