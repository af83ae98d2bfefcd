/* common/nn/model.c: the MLP's layout, init, forward, backward and checksums
 * (see model.h).  Everything here goes through the backend, so it runs
 * unchanged on the CPU and on a GPU. */
#include "common/nn/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/hash.h"
#include "common/base/rng.h"

#define MODEL_MAX_WIDTH (1 << 20)
#define MODEL_MAX_PARAMS ((size_t)1 << 34)

// ---------------------------------------------------------------------------
// layout and init

int model_spec_init(model_spec_t *s, const int *dims, int ndims, act_t act, char *err)
{
    memset(s, 0, sizeof *s);
    if (ndims < 2)
        return err_set(err, DDP_ERR_INPUT,
                       "--layers: needs at least two widths (input,output), got %d", ndims);
    if (ndims - 1 > MODEL_MAX_LAYERS)
        return err_set(err, DDP_ERR_INPUT, "--layers: at most %d layers, got %d",
                       MODEL_MAX_LAYERS, ndims - 1);
    s->nlayers = ndims - 1;
    s->act = act;
    size_t off = 0;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 1 || dims[i] > MODEL_MAX_WIDTH)
            return err_set(err, DDP_ERR_INPUT, "--layers: width %d is out of range 1..%d",
                           dims[i], MODEL_MAX_WIDTH);
        s->dims[i] = dims[i];
        if (dims[i] > s->max_width)
            s->max_width = dims[i];
    }
    for (int l = 0; l < s->nlayers; l++) {
        s->w_off[l] = off;
        off += (size_t)dims[l] * (size_t)dims[l + 1];
        s->b_off[l] = off;
        off += (size_t)dims[l + 1];
        if (off > MODEL_MAX_PARAMS)
            return err_set(err, DDP_ERR_INPUT, "--layers: more than %zu parameters",
                           MODEL_MAX_PARAMS);
    }
    s->nparams = off;
    return DDP_OK;
}

void model_init_params(const model_spec_t *s, uint64_t seed, float *p)
{
    rng_t r;
    rng_seed_stream(&r, seed, RNG_STREAM_INIT);
    for (int l = 0; l < s->nlayers; l++) {
        /* nn.Linear: kaiming_uniform_(a=sqrt(5)) gives bound 1/sqrt(fan_in) for
         * W, and the bias uses the same bound. */
        float bound = 1.0f / sqrtf((float)s->dims[l]);
        size_t nw = (size_t)s->dims[l] * s->dims[l + 1];
        for (size_t i = 0; i < nw; i++)
            p[s->w_off[l] + i] = rng_uniform_range(&r, -bound, bound);
        for (int i = 0; i < s->dims[l + 1]; i++)
            p[s->b_off[l] + i] = rng_uniform_range(&r, -bound, bound);
    }
}

// ---------------------------------------------------------------------------
// replica buffers

static float *alloc_floats(backend_t *be, size_t n, int *rc, char *err, const char *what,
                           mem_kind_t kind)
{
    if (*rc != DDP_OK)
        return NULL;
    float *p = backend_alloc_for(be, (n ? n : 1) * sizeof(float), kind);
    if (!p)
        *rc = err_set(err, DDP_ERR_RUNTIME, "device %d: out of memory allocating %s (%zu bytes)",
                      backend_device_id(be), what, n * sizeof(float));
    return p;
}

double model_flops_per_row(const model_spec_t *s)
{
    double f = 0.0;
    for (int l = 0; l < s->nlayers; l++) { /* z = in W^T + b; dW, db; dx but for l = 0 */
        double in = s->dims[l], out = s->dims[l + 1];
        f += (l > 0 ? 6.0 : 4.0) * in * out + 2.0 * out;
    }
    return f;
}

double replica_act_bytes(const model_spec_t *s, int max_rows, int tgt_cols)
{
    /* as replica_init below: inputs, targets, each layer's z and a (one
     * buffer for the last), the two backward buffers, dout, the loss */
    double rows = max_rows > 0 ? max_rows : 1, n = rows * (s->dims[0] + tgt_cols);
    int L = s->nlayers, hidden_max = 0;
    for (int l = 0; l < L; l++) {
        n += rows * s->dims[l + 1] * (l == L - 1 ? 1 : 2);
        if (l >= 1 && s->dims[l] > hidden_max)
            hidden_max = s->dims[l];
    }
    n += 2.0 * rows * hidden_max + rows * s->dims[L] + 1;
    return n * sizeof(float);
}

int replica_init(replica_t *r, backend_t *be, const model_spec_t *s, int max_rows,
                 int tgt_cols, char *err)
{
    return replica_init_sharded(r, be, s, max_rows, tgt_cols, 0, err);
}

int replica_init_sharded(replica_t *r, backend_t *be, const model_spec_t *s, int max_rows,
                         int tgt_cols, unsigned skip, char *err)
{
    memset(r, 0, sizeof *r);
    r->be = be;
    r->spec = s;
    r->max_rows = max_rows;
    r->tgt_cols = tgt_cols;
    int rc = DDP_OK;
    size_t rows = (size_t)(max_rows > 0 ? max_rows : 1);
    int L = s->nlayers;
    int hidden_max = 0;
    for (int l = 1; l < L; l++)
        if (s->dims[l] > hidden_max)
            hidden_max = s->dims[l];

    if (!(skip & REPLICA_NO_PARAMS))
        r->params = alloc_floats(be, s->nparams, &rc, err, "parameters", MEM_PARAMS);
    if (!(skip & REPLICA_NO_GRADS))
        r->grads = alloc_floats(be, s->nparams, &rc, err, "gradients", MEM_GRADS);
    for (int l = 0; l < L; l++) {
        r->pw[l] = r->params ? r->params + s->w_off[l] : NULL;
        r->pb[l] = r->params ? r->params + s->b_off[l] : NULL;
        r->gw[l] = r->grads ? r->grads + s->w_off[l] : NULL;
        r->gb[l] = r->grads ? r->grads + s->b_off[l] : NULL;
    }
    r->x = alloc_floats(be, rows * s->dims[0], &rc, err, "inputs", MEM_ACTS);
    r->y = alloc_floats(be, rows * (size_t)tgt_cols, &rc, err, "targets", MEM_ACTS);
    for (int l = 0; l < L; l++) {
        r->z[l] = alloc_floats(be, rows * s->dims[l + 1], &rc, err, "activations", MEM_ACTS);
        r->a[l] = l == L - 1 ? r->z[l] : alloc_floats(be, rows * s->dims[l + 1], &rc, err, "activations", MEM_ACTS);
    }
    if (hidden_max > 0) {
        r->dbuf[0] = alloc_floats(be, rows * hidden_max, &rc, err, "backward buffers", MEM_ACTS);
        r->dbuf[1] = alloc_floats(be, rows * hidden_max, &rc, err, "backward buffers", MEM_ACTS);
    }
    r->dout = alloc_floats(be, rows * s->dims[L], &rc, err, "output gradient", MEM_ACTS);
    r->loss_sum = alloc_floats(be, 1, &rc, err, "loss", MEM_ACTS);
    /* The kernels' scratch for every layer's bias gradient and the loss, now:
     * a step must not allocate (on CUDA that waits for the whole device). */
    for (int l = 0; l < L && rc == DDP_OK; l++)
        if (backend_reserve(be, (int)rows, s->dims[l + 1]) != DDP_OK)
            rc = err_set(err, DDP_ERR_RUNTIME, "device %d: reserving kernel scratch: %s",
                         backend_device_id(be), backend_last_error(be));
    /* bf16 GEMMs convert their operands, the inputs and the weights too */
    for (int l = -1; l < L && rc == DDP_OK && backend_precision(be) == PREC_BF16; l++)
        if (backend_reserve(be, l < 0 ? (int)rows : s->dims[l], s->dims[l < 0 ? 0 : l + 1]) !=
            DDP_OK)
            rc = err_set(err, DDP_ERR_RUNTIME, "device %d: reserving kernel scratch: %s",
                         backend_device_id(be), backend_last_error(be));
    if (rc != DDP_OK)
        replica_free(r);
    return rc;
}

void replica_free(replica_t *r)
{
    if (!r->be)
        return;
    backend_t *be = r->be;
    int L = r->spec->nlayers;
    for (int l = 0; l < L; l++) {
        if (r->a[l] != r->z[l])
            backend_free(be, r->a[l]);
        backend_free(be, r->z[l]);
    }
    float *bufs[] = {r->params, r->grads, r->x, r->y, r->dbuf[0], r->dbuf[1], r->dout, r->loss_sum};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        backend_free(be, bufs[i]);
    memset(r, 0, sizeof *r);
}

// ---------------------------------------------------------------------------
// forward, loss, backward

int model_forward(replica_t *r, const float *x, int rows)
{
    const model_spec_t *s = r->spec;
    backend_t *be = r->be;
    const float *in = x;
    for (int l = 0; l < s->nlayers; l++) {
        int din = s->dims[l], dout = s->dims[l + 1];
        if (r->pre)
            TRY(r->pre(r->pre_ctx, l, false));
        const float *W = r->pw[l];
        const float *b = r->pb[l];
        /* z = in W^T (rows x dout), then z += b and a = act(z) in one pass. */
        TRY(backend_gemm(be, false, true, rows, dout, din, 1.0f, in, din, W, din, 0.0f,
                         r->z[l], dout));
        act_t act = l == s->nlayers - 1 ? ACT_NONE : s->act;
        TRY(backend_bias_act_fwd(be, act, r->z[l], r->a[l], b, rows, dout));
        in = r->a[l];
    }
    return DDP_OK;
}

int model_loss(replica_t *r, loss_t kind, const float *tgt, int rows, float grad_scale)
{
    backend_t *be = r->be;
    return backend_loss(be, kind, replica_output(r), tgt, rows, model_out_dim(r->spec),
                         grad_scale, r->dout, r->loss_sum);
}

int model_backward(replica_t *r, const float *x, int rows, const float *dout, bool accumulate,
                   layer_hook_fn hook, void *hook_ctx)
{
    const model_spec_t *s = r->spec;
    backend_t *be = r->be;
    const float *d = dout;
    int pp = 0;
    float beta = accumulate ? 1.0f : 0.0f;
    for (int l = s->nlayers - 1; l >= 0; l--) {
        int din = s->dims[l], dout_w = s->dims[l + 1];
        const float *in = l == 0 ? x : r->a[l - 1];
        int rc = r->pre ? r->pre(r->pre_ctx, l, true) : DDP_OK;
        if (rc == MODEL_DETACH)
            return DDP_OK;
        TRY(rc);
        /* dW = d^T in  [dout x din];  db = column sums of d. */
        TRY(backend_gemm(be, true, false, dout_w, din, rows, 1.0f, d, dout_w, in, din, beta,
                         r->gw[l], din));
        TRY(backend_bias_grad(be, r->gb[l], d, rows, dout_w, accumulate));
        /* Layer l's gradients are final: the reducer may start on them now,
         * while the input gradient below is still being computed. */
        if (hook)
            TRY(hook(hook_ctx, l));
        if (l == 0)
            break; /* the input's gradient is never needed */
        /* dx = d W  [rows x din], then through the activation of layer l-1. */
        float *next = r->dbuf[pp];
        pp ^= 1;
        TRY(backend_gemm(be, false, false, rows, din, dout_w, 1.0f, d, dout_w,
                         r->pw[l], din, 0.0f, next, din));
        TRY(backend_act_bwd(be, s->act, r->z[l - 1], r->a[l - 1], next, (size_t)rows * din));
        d = next;
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// comparison helpers

param_checksum_t model_checksum(const float *p, size_t n)
{
    param_checksum_t c = {0.0, 0.0, 0xcbf29ce484222325ull};
    for (size_t i = 0; i < n; i++) {
        c.sum += p[i];
        c.abs_sum += fabs((double)p[i]);
        uint32_t bits;
        memcpy(&bits, &p[i], sizeof bits);
        for (int k = 0; k < 4; k++) {
            c.bits ^= (bits >> (8 * k)) & 0xffu;
            c.bits *= 0x100000001b3ull;
        }
    }
    return c;
}

size_t model_count_nonfinite(const model_spec_t *s, const float *p, char *where, size_t size)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < s->nparams; i++)
        if (!isfinite(p[i]) && bad++ == 0)
            first = i;
    if (!bad || !where || !size)
        return bad;
    for (int l = 0; l < s->nlayers; l++) {
        size_t in = (size_t)s->dims[l];
        const char *v = isnan(p[first]) ? "nan" : p[first] > 0 ? "inf" : "-inf";
        if (first >= s->w_off[l] && first < s->b_off[l]) {
            size_t k = first - s->w_off[l];
            snprintf(where, size, "layer %d weight [%zu, %zu] is %s", l + 1, k / in, k % in, v);
            break;
        }
        if (first >= s->b_off[l] && first < s->b_off[l] + (size_t)s->dims[l + 1]) {
            snprintf(where, size, "layer %d bias [%zu] is %s", l + 1, first - s->b_off[l], v);
            break;
        }
    }
    return bad;
}

int replica_nudge(replica_t *r, int *p)
{
    *p = 2 * ((r->spec->nlayers - 1) / 2);
    size_t n = model_param_count(r->spec, *p), k = 0;
    float *w = r->params + model_param_off(r->spec, *p), *h = malloc(n * sizeof *h);
    if (!h)
        return backend_error(r->be, DDP_ERR_RUNTIME, "out of memory for the fault");
    int rc = backend_d2h(r->be, h, w, n * sizeof *h);
    for (size_t i = 1; i < n; i++)
        k = fabsf(h[i]) > fabsf(h[k]) ? i : k;
    h[k] = nextafterf(h[k], INFINITY);
    if (rc == DDP_OK && (rc = backend_h2d(r->be, w + k, h + k, sizeof *h)) == DDP_OK)
        rc = backend_sync(r->be);
    free(h);
    return rc;
}

int replica_grad_norm(replica_t *r, double *norm)
{
    size_t n = r->spec->nparams;
    float *h = backend_host_visible(r->be) ? r->grads : malloc(n * sizeof *h);
    if (!h)
        return backend_error(r->be, DDP_ERR_RUNTIME, "out of memory for the gradients' norm");
    int rc = h == r->grads ? DDP_OK : backend_d2h(r->be, h, r->grads, n * sizeof *h);
    double s = 0.0;
    for (size_t i = 0; rc == DDP_OK && i < n; i++)
        s += (double)h[i] * h[i];
    *norm = sqrt(s);
    if (h != r->grads)
        free(h);
    return rc;
}

void model_fingerprint(const float *p, size_t n, float f[4])
{
    hash64_t h;
    hash64_init(&h);
    hash64_update(&h, p, n * sizeof *p);
    uint64_t v = hash64_final(&h);
    for (int i = 0; i < 4; i++)
        f[i] = (float)((v >> (16 * i)) & 0xffff);
}

const char *model_param_name(int p, char *buf, size_t n)
{
    snprintf(buf, n, "layer %d %s", p / 2 + 1, p % 2 ? "bias" : "weight");
    return buf;
}

double model_diff(const model_spec_t *s, const float *a, const float *b, int *first,
                  double *first_delta)
{
    double worst = 0.0;
    *first = -1;
    *first_delta = 0.0;
    for (int p = 0; p < 2 * s->nlayers; p++) {
        size_t off = model_param_off(s, p), n = model_param_count(s, p);
        if (memcmp(a + off, b + off, n * sizeof *a) == 0)
            continue;
        double d = 0.0;
        for (size_t i = off; i < off + n; i++) {
            double x = fabs((double)a[i] - (double)b[i]);
            d = fmax(d, x == x ? x : isnan(a[i]) && isnan(b[i]) ? 0.0 : INFINITY);
        }
        if (*first < 0) {
            *first = p;
            *first_delta = d;
        }
        worst = fmax(worst, d);
    }
    return worst;
}

double max_rel_diff(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = a[i], y = b[i];
        if (isnan(x) || isnan(y))
            return INFINITY;
        double scale = fmax(fmax(fabs(x), fabs(y)), floor);
        double rel = fabs(x - y) / scale;
        if (rel > worst)
            worst = rel;
    }
    return worst;
}
