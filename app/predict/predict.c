/* app/predict/predict.c: the alpha-beta model of --predict (see predict.h). */
#include "app/predict/predict.h"

#include <math.h>
#include <string.h>

/* alpha and beta of one copy over a link, from a fit measured at k0 ranks
 * with bus factor f (busbw = algbw x f): per link, time = a + b bytes. */
static void link_of(const collperf_coll_t *c, double f_at_k0, double *a, double *b)
{
    double alpha = 0.0, beta = 0.0;
    if (c)
        collperf_fit(c, &alpha, &beta);
    *a = alpha;
    *b = f_at_k0 > 0 ? beta / f_at_k0 : beta;
}

double predict_all_reduce_s(const predict_in_t *in, int k, double bytes)
{
    if (k < 2 || !in->all_reduce || in->k0 < 2)
        return 0.0;
    /* the fit at k0: alpha0 = 2(k0-1) a, beta0 = 2(k0-1)/k0 b */
    double alpha0, beta0;
    if (!collperf_fit(in->all_reduce, &alpha0, &beta0))
        return 0.0;
    double a = alpha0 / (2.0 * (in->k0 - 1)), b = beta0 / (2.0 * (in->k0 - 1) / in->k0);
    return 2.0 * (k - 1) * a + 2.0 * (k - 1) / k * b * bytes;
}

/* A copy of `bytes` from device 0 to another: broadcast's fit (its bus
 * factor is 1: each receiver gets the whole message once). */
static double copy_s(const predict_in_t *in, double bytes)
{
    double a, b;
    link_of(in->broadcast, 1.0, &a, &b);
    return in->broadcast ? a + b * bytes : 0.0;
}

/* Summing one device's arena into device 0's: reduce's fit at k0 ranks did
 * k0-1 of them. */
static double add_s(const predict_in_t *in, double bytes)
{
    if (!in->reduce || in->k0 < 2)
        return copy_s(in, bytes);
    double alpha, beta;
    if (!collperf_fit(in->reduce, &alpha, &beta))
        return 0.0;
    return (alpha + beta * bytes) / (in->k0 - 1);
}

void predict_row(const predict_in_t *in, int k, predict_row_t *out)
{
    memset(out, 0, sizeof *out);
    out->devices = k;
    const double *s = in->phase_s;
    int b = in->batch > 0 ? in->batch : 1;
    int rows = (b + k - 1) / k; /* torch.chunk's largest chunk; DDP: batch/K */
    double share = (double)rows / b;
    double micro = in->accum > 0 ? in->accum : 1;

    /* DDP: each rank its shard, all-reduce per bucket */
    double *d = out->ddp_phase_s;
    d[PH_DATA] = s[PH_DATA] * share;
    d[PH_H2D] = s[PH_H2D] * share;
    d[PH_FORWARD] = s[PH_FORWARD] * share;
    d[PH_LOSS] = s[PH_LOSS] * share;
    d[PH_BACKWARD] = s[PH_BACKWARD] * share;
    d[PH_OPTIM] = s[PH_OPTIM];
    double total = 0.0, last = 0.0, rest = 0.0, all = 0.0;
    for (int i = 0; i < in->nbuckets; i++)
        all += in->bucket_bytes[i];
    for (int i = 0; i < in->nbuckets; i++) {
        double t = predict_all_reduce_s(in, k, in->bucket_bytes[i]);
        total += t;
        if (i == in->nbuckets - 1)
            last = t;
        else
            rest += t;
    }
    out->ddp_comm_s = total;
    if (in->overlap && in->nbuckets > 1) {
        /* the other buckets are ready while the last one's share of
         * backward (the first layers) is still to run */
        double left = all > 0 ? d[PH_BACKWARD] * in->bucket_bytes[in->nbuckets - 1] / all : 0.0;
        double hidden = fmin(rest, left);
        d[PH_COMM_EXPOSED] = last + rest - hidden;
        d[PH_COMM_HIDDEN] = hidden;
    } else {
        d[PH_COMM_EXPOSED] = total;
    }
    for (int p = 0; p < PH_COUNT; p++)
        if (p != PH_COMM_HIDDEN)
            out->ddp_step_s += d[p];

    /* DP: device 0 does the serial work, every copy through its link */
    double *q = out->dp_phase_s;
    int others = k - 1;
    q[PH_DATA] = s[PH_DATA];
    q[PH_H2D] = s[PH_H2D];
    q[PH_REPLICATE] = others * copy_s(in, in->param_bytes);
    q[PH_FORWARD] = s[PH_FORWARD] * share;
    /* device 0 gathers the outputs (gather+loss); the others copy their
     * input rows and output gradients from it, and device 0 waits for them
     * (its idle): per micro-batch, through its link */
    double out_bytes = in->out_bytes_per_row * rows;
    q[PH_LOSS] = s[PH_LOSS] + micro * others * copy_s(in, out_bytes);
    q[PH_IDLE] = micro * others * (copy_s(in, in->in_bytes_per_row * rows) + copy_s(in, out_bytes));
    q[PH_BACKWARD] = s[PH_BACKWARD] * share;
    q[PH_COMM_EXPOSED] = others * add_s(in, in->param_bytes);
    q[PH_OPTIM] = s[PH_OPTIM];
    if (k == 1) /* nothing to copy */
        q[PH_REPLICATE] = q[PH_IDLE] = q[PH_COMM_EXPOSED] = 0.0;
    for (int p = 0; p < PH_COUNT; p++)
        if (p != PH_COMM_HIDDEN)
            out->dp_step_s += q[p];
}

void predict_steps(const predict_in_t *in, predict_row_t rows[PREDICT_MAX_DEVICES])
{
    for (int k = 1; k <= PREDICT_MAX_DEVICES; k++)
        predict_row(in, k, &rows[k - 1]);
}

/* in, for a model `scale` times as large (predict_crossover) */
static void scaled(const predict_in_t *in, double scale, predict_in_t *out)
{
    *out = *in;
    out->phase_s[PH_FORWARD] *= scale;
    out->phase_s[PH_BACKWARD] *= scale;
    out->phase_s[PH_OPTIM] *= scale;
    out->param_bytes *= scale;
    for (int i = 0; i < out->nbuckets; i++)
        out->bucket_bytes[i] *= scale;
}

static double exposed_at(const predict_in_t *in, int k, double s)
{
    predict_in_t x;
    predict_row_t row;
    scaled(in, s, &x);
    predict_row(&x, k, &row);
    return row.ddp_phase_s[PH_COMM_EXPOSED];
}

double predict_crossover(const predict_in_t *in, int k, double single_s, double single_grow,
                         double ddp_s, double ddp_grow, double *scale)
{
    *scale = 0.0;
    if (k < 2 || k > PREDICT_MAX_DEVICES || !in->all_reduce || in->k0 < 2 || single_s <= 0 ||
        ddp_s <= 0)
        return -1.0;
    double first = -1.0, e1 = exposed_at(in, k, 1.0);
    for (double e = -48; e <= 48; e++) { /* 2^(e/4): 1/4096 .. 4096 */
        double s = pow(2.0, e / 4.0);
        double one = single_s + (s - 1.0) * single_grow;
        double many = ddp_s + (s - 1.0) * ddp_grow + exposed_at(in, k, s) - e1;
        bool wins = many < one;
        if (wins && first < 0)
            first = s;
        else if (!wins)
            first = -1.0; /* a win that does not last is no crossover */
    }
    if (first < 0)
        return -1.0;
    *scale = first;
    return first * in->param_bytes / sizeof(float);
}
