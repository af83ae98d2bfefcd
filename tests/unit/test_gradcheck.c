/* tests/unit/test_gradcheck.c: the model's analytic gradients against central
 * finite differences.
 *
 * The finite differences are taken on an independent double-precision
 * reference of the forward pass and the losses (written here, not shared with
 * the code under test), with a small step, so they are accurate to ~1e-9; the
 * analytic gradients come from the float backend, so they are compared to a
 * few 1e-4 relative.  Random shapes include batch 1 and width 1. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/device/backend.h"
#include "common/nn/model.h"
#include "common/base/rng.h"

// ---------------------------------------------------------------------------
// the double reference

static double ref_act(act_t a, double x)
{
    switch (a) {
    case ACT_RELU:
        return x > 0 ? x : 0;
    case ACT_TANH:
        return tanh(x);
    case ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case ACT_GELU:
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default:
        return x;
    }
}

/* Mean loss over rows of the MLP with params p (double) on x, targets t. */
static double ref_loss(const model_spec_t *s, loss_t lk, const double *p, const float *x,
                       const float *t, int rows)
{
    int maxw = s->max_width;
    double *cur = malloc(sizeof(double) * maxw), *nxt = malloc(sizeof(double) * maxw);
    double total = 0.0;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < s->dims[0]; i++)
            cur[i] = x[(size_t)r * s->dims[0] + i];
        for (int l = 0; l < s->nlayers; l++) {
            int in = s->dims[l], out = s->dims[l + 1];
            for (int o = 0; o < out; o++) {
                double z = p[s->b_off[l] + o];
                for (int i = 0; i < in; i++)
                    z += p[s->w_off[l] + (size_t)o * in + i] * cur[i];
                nxt[o] = l == s->nlayers - 1 ? z : ref_act(s->act, z);
            }
            double *tmp = cur;
            cur = nxt;
            nxt = tmp;
        }
        int out = s->dims[s->nlayers];
        double row = 0.0;
        if (lk == LOSS_MSE) {
            for (int c = 0; c < out; c++) {
                double e = cur[c] - t[(size_t)r * out + c];
                row += e * e;
            }
            row /= out;
        } else if (lk == LOSS_BCE) {
            for (int c = 0; c < out; c++) {
                double z = cur[c], y = t[(size_t)r * out + c];
                double sg = 1.0 / (1.0 + exp(-z));
                row += -(y * log(sg) + (1 - y) * log(1 - sg));
            }
            row /= out;
        } else {
            double mx = cur[0];
            for (int c = 1; c < out; c++)
                mx = fmax(mx, cur[c]);
            double se = 0.0;
            for (int c = 0; c < out; c++)
                se += exp(cur[c] - mx);
            row = mx + log(se) - cur[(int)t[r]];
        }
        total += row;
    }
    free(cur);
    free(nxt);
    return total / rows;
}

// ---------------------------------------------------------------------------
// one check

static void gradcheck(const int *dims, int ndims, act_t act, loss_t lk, int rows, uint64_t seed)
{
    char err[ERR_LEN];
    model_spec_t s;
    cr_assert_eq(model_spec_init(&s, dims, ndims, act, err), DDP_OK, "%s", err);
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    int out = dims[ndims - 1];
    int tcols = lk == LOSS_CE ? 1 : out;
    replica_t r;
    cr_assert_eq(replica_init(&r, be, &s, rows, tcols, err), DDP_OK, "%s", err);

    rng_t g;
    rng_seed(&g, seed);
    model_init_params(&s, seed, r.params);
    for (int i = 0; i < rows * dims[0]; i++)
        r.x[i] = (float)rng_normal(&g);
    for (int i = 0; i < rows * tcols; i++) {
        if (lk == LOSS_MSE)
            r.y[i] = (float)rng_normal(&g);
        else if (lk == LOSS_BCE)
            r.y[i] = rng_uniform(&g) < 0.3f ? rng_uniform(&g) : (float)(rng_next(&g) & 1);
        else
            r.y[i] = (float)rng_below(&g, (uint64_t)out);
    }

    /* analytic: mean loss over the rows, gradient scale 1/rows */
    cr_assert_eq(model_forward(&r, r.x, rows), DDP_OK);
    cr_assert_eq(model_loss(&r, lk, r.y, rows, 1.0f / rows), DDP_OK);
    cr_assert_eq(model_backward(&r, r.x, rows, r.dout, false, NULL, NULL), DDP_OK);

    double *p = malloc(sizeof(double) * s.nparams);
    for (size_t i = 0; i < s.nparams; i++)
        p[i] = r.params[i];
    double f0 = ref_loss(&s, lk, p, r.x, r.y, rows);
    double got = *r.loss_sum / rows;
    cr_assert(fabs(got - f0) <= 1e-5 * fmax(1.0, fabs(f0)),
              "forward loss %.9g, reference %.9g", got, f0);

    /* central differences, every parameter (the shapes are small) */
    const double h = 1e-6;
    double worst = 0.0;
    size_t worst_i = 0;
    double gscale = 0.0;
    for (size_t i = 0; i < s.nparams; i++)
        gscale = fmax(gscale, fabs((double)r.grads[i]));
    for (size_t i = 0; i < s.nparams; i++) {
        double keep = p[i];
        p[i] = keep + h;
        double fp = ref_loss(&s, lk, p, r.x, r.y, rows);
        p[i] = keep - h;
        double fm = ref_loss(&s, lk, p, r.x, r.y, rows);
        p[i] = keep;
        double num = (fp - fm) / (2 * h);
        /* relative to the gradient's own size, with a floor at 1e-3 of the
         * largest gradient so entries that are ~0 are compared absolutely */
        double scale = fmax(fmax(fabs(num), fabs((double)r.grads[i])), 1e-3 * gscale + 1e-12);
        double e = fabs(num - (double)r.grads[i]) / scale;
        if (e > worst) {
            worst = e;
            worst_i = i;
        }
    }
    cr_assert(worst < 2e-3,
              "dims[0]=%d layers=%d act=%s loss=%s rows=%d: worst relative error %.3g at "
              "param %zu (analytic %.9g)",
              dims[0], s.nlayers, act_name(act), loss_name(lk), rows, worst, worst_i,
              (double)r.grads[worst_i]);
    free(p);
    replica_free(&r);
    backend_destroy(be);
}

// ---------------------------------------------------------------------------
// cases

static const act_t acts[] = {ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_GELU};

Test(gradcheck, every_activation_and_loss_on_a_deep_model)
{
    const int dims[] = {5, 7, 6, 4};
    for (int a = 0; a < 4; a++)
        for (int l = LOSS_MSE; l <= LOSS_CE; l++)
            gradcheck(dims, 4, acts[a], (loss_t)l, 3, 100 + a * 3 + l);
}

Test(gradcheck, batch_of_one)
{
    const int dims[] = {4, 3, 2};
    for (int a = 0; a < 4; a++)
        for (int l = LOSS_MSE; l <= LOSS_CE; l++)
            gradcheck(dims, 3, acts[a], (loss_t)l, 1, 200 + a * 3 + l);
}

Test(gradcheck, widths_of_one)
{
    const int dims[] = {1, 1, 1};
    for (int a = 0; a < 4; a++) {
        gradcheck(dims, 3, acts[a], LOSS_MSE, 4, 300 + a);
        gradcheck(dims, 3, acts[a], LOSS_BCE, 4, 310 + a);
    }
    const int ce_dims[] = {1, 1, 2};
    for (int a = 0; a < 4; a++)
        gradcheck(ce_dims, 3, acts[a], LOSS_CE, 4, 320 + a);
}

Test(gradcheck, single_linear_layer_like_the_seed_demos)
{
    const int lin[] = {10, 10};
    gradcheck(lin, 2, ACT_RELU, LOSS_MSE, 20, 400);
    const int logreg[] = {10, 1};
    gradcheck(logreg, 2, ACT_RELU, LOSS_BCE, 10, 401);
}

Test(gradcheck, random_shapes)
{
    rng_t g;
    rng_seed(&g, 7);
    for (int trial = 0; trial < 24; trial++) {
        int ndims = 2 + (int)rng_below(&g, 3);
        int dims[5];
        for (int i = 0; i < ndims; i++)
            dims[i] = 1 + (int)rng_below(&g, 6);
        loss_t lk = (loss_t)rng_below(&g, 3);
        if (lk == LOSS_CE && dims[ndims - 1] < 2)
            dims[ndims - 1] = 2;
        int rows = 1 + (int)rng_below(&g, 5);
        gradcheck(dims, ndims, acts[rng_below(&g, 4)], lk, rows, 500 + trial);
    }
}

Test(gradcheck, accumulate_adds_to_existing_gradients)
{
    char err[ERR_LEN];
    const int dims[] = {3, 4, 2};
    model_spec_t s;
    cr_assert_eq(model_spec_init(&s, dims, 3, ACT_TANH, err), DDP_OK);
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    replica_t r;
    cr_assert_eq(replica_init(&r, be, &s, 2, 2, err), DDP_OK);
    model_init_params(&s, 1, r.params);
    rng_t g;
    rng_seed(&g, 2);
    for (int i = 0; i < 6; i++)
        r.x[i] = (float)rng_normal(&g);
    for (int i = 0; i < 4; i++)
        r.y[i] = (float)rng_normal(&g);
    cr_assert_eq(model_forward(&r, r.x, 2), DDP_OK);
    cr_assert_eq(model_loss(&r, LOSS_MSE, r.y, 2, 0.5f), DDP_OK);
    cr_assert_eq(model_backward(&r, r.x, 2, r.dout, false, NULL, NULL), DDP_OK);
    float *once = malloc(sizeof(float) * s.nparams);
    memcpy(once, r.grads, sizeof(float) * s.nparams);
    cr_assert_eq(model_backward(&r, r.x, 2, r.dout, true, NULL, NULL), DDP_OK);
    for (size_t i = 0; i < s.nparams; i++)
        cr_assert_float_eq(r.grads[i], 2.0f * once[i], 1e-6f * (1.0f + fabsf(once[i])),
                           "param %zu", i);
    free(once);
    replica_free(&r);
    backend_destroy(be);
}

static int hook_order[8], nhooks;
static int record_hook(void *ctx, int layer)
{
    (void)ctx;
    hook_order[nhooks++] = layer;
    return DDP_OK;
}

Test(gradcheck, backward_hook_sees_layers_last_first)
{
    char err[ERR_LEN];
    const int dims[] = {3, 4, 5, 2};
    model_spec_t s;
    cr_assert_eq(model_spec_init(&s, dims, 4, ACT_RELU, err), DDP_OK);
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    replica_t r;
    cr_assert_eq(replica_init(&r, be, &s, 1, 2, err), DDP_OK);
    model_init_params(&s, 1, r.params);
    cr_assert_eq(model_forward(&r, r.x, 1), DDP_OK);
    cr_assert_eq(model_loss(&r, LOSS_MSE, r.y, 1, 1.0f), DDP_OK);
    nhooks = 0;
    cr_assert_eq(model_backward(&r, r.x, 1, r.dout, false, record_hook, NULL), DDP_OK);
    cr_assert_eq(nhooks, 3);
    cr_assert_eq(hook_order[0], 2);
    cr_assert_eq(hook_order[1], 1);
    cr_assert_eq(hook_order[2], 0);
    replica_free(&r);
    backend_destroy(be);
}

Test(model, init_matches_nn_linear_bounds_and_is_seeded)
{
    char err[ERR_LEN];
    const int dims[] = {16, 64, 4};
    model_spec_t s;
    cr_assert_eq(model_spec_init(&s, dims, 3, ACT_RELU, err), DDP_OK);
    cr_assert_eq(s.nparams, (size_t)(16 * 64 + 64 + 64 * 4 + 4));
    cr_assert_eq(s.w_off[1], (size_t)(16 * 64 + 64));
    float *a = malloc(sizeof(float) * s.nparams), *b = malloc(sizeof(float) * s.nparams);
    model_init_params(&s, 42, a);
    model_init_params(&s, 42, b);
    cr_assert_eq(memcmp(a, b, sizeof(float) * s.nparams), 0, "same seed, same bits");
    model_init_params(&s, 43, b);
    cr_assert_neq(memcmp(a, b, sizeof(float) * s.nparams), 0, "another seed differs");
    for (int l = 0; l < 2; l++) {
        float bound = 1.0f / sqrtf((float)dims[l]);
        float lo = 1, hi = -1;
        for (size_t i = s.w_off[l]; i < s.b_off[l] + (size_t)dims[l + 1]; i++) {
            cr_assert(fabsf(a[i]) <= bound, "layer %d value %g beyond %g", l, a[i], bound);
            lo = fminf(lo, a[i]);
            hi = fmaxf(hi, a[i]);
        }
        /* uniform over the whole range, not a narrower one */
        cr_assert(hi > 0.9f * bound && lo < -0.9f * bound, "layer %d range [%g, %g]", l, lo, hi);
    }
    free(a);
    free(b);
}

Test(model, spec_rejects_bad_layers)
{
    char err[ERR_LEN];
    model_spec_t s;
    const int one[] = {4};
    cr_assert_eq(model_spec_init(&s, one, 1, ACT_RELU, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--layers"), "%s", err);
    const int zero[] = {4, 0, 2};
    cr_assert_eq(model_spec_init(&s, zero, 3, ACT_RELU, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "width 0"), "%s", err);
}

Test(model, checksums_tell_bits_from_rounding)
{
    float a[3] = {1.0f, -2.0f, 3.0f}, b[3] = {1.0f, -2.0f, 3.0f};
    param_checksum_t ca = model_checksum(a, 3), cb = model_checksum(b, 3);
    cr_assert_eq(ca.bits, cb.bits);
    cr_assert_float_eq(ca.sum, 2.0, 1e-12);
    cr_assert_float_eq(ca.abs_sum, 6.0, 1e-12);
    b[1] = nextafterf(-2.0f, 0.0f);
    cb = model_checksum(b, 3);
    cr_assert_neq(ca.bits, cb.bits, "one ulp changes the bit hash");
    cr_assert(max_rel_diff(a, b, 3, 1e-3) < 1e-6);
    cr_assert(max_rel_diff(a, b, 3, 1e-3) > 0.0);
}
