/* tests/unit/test_optim.c: SGD, Adam and AdamW against hand-computed values and
 * against torch.optim's update rules written out in double.
 *
 * The scalar cases start at p = 1 and feed the gradients 1, 0.5, -0.25 with
 * lr 0.1; the expected values were worked through by hand from torch's
 * documented algorithms (derivations in the comments). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/device/backend.h"
#include "common/nn/optim.h"
#include "common/base/rng.h"

static const float grads[3] = {1.0f, 0.5f, -0.25f};

static void run_scalar(optim_cfg_t cfg, const double expect[3], const char *what)
{
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    optim_t o;
    cr_assert_eq(optim_init(&o, be, &cfg, 1, err), DDP_OK, "%s", err);
    float p = 1.0f;
    for (int t = 0; t < 3; t++) {
        cr_assert_eq(optim_step(&o, &p, &grads[t]), DDP_OK);
        cr_assert(fabs(p - expect[t]) <= 2e-7 * fmax(1.0, fabs(expect[t])),
                  "%s step %d: got %.9g, expected %.9g", what, t + 1, p, expect[t]);
    }
    cr_assert_eq(o.step, 3);
    optim_free(&o);
    backend_destroy(be);
}

static optim_cfg_t sgd(float mom, float damp, float wd, bool nesterov)
{
    return (optim_cfg_t){.kind = OPTIM_SGD, .lr = 0.1f, .momentum = mom, .dampening = damp,
                         .weight_decay = wd, .nesterov = nesterov};
}

static optim_cfg_t adam(optim_kind_t k, float wd)
{
    return (optim_cfg_t){.kind = k, .lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                         .weight_decay = wd};
}

Test(optim_hand, sgd_plain)
{
    /* p -= 0.1 g: 0.9, 0.85, 0.875 */
    run_scalar(sgd(0, 0, 0, false), (double[]){0.9, 0.85, 0.875}, "sgd");
}

Test(optim_hand, sgd_momentum_first_step_copies_the_gradient)
{
    /* buf = 1 -> p 0.9; buf = 0.9+0.5 = 1.4 -> 0.76; buf = 1.26-0.25 = 1.01 -> 0.659 */
    run_scalar(sgd(0.9f, 0, 0, false), (double[]){0.9, 0.76, 0.659}, "momentum");
}

Test(optim_hand, sgd_nesterov)
{
    /* d = g + 0.9 buf: 1.9 -> 0.81; 0.5+1.26 = 1.76 -> 0.634; -0.25+0.909 = 0.659 -> 0.5681 */
    run_scalar(sgd(0.9f, 0, 0, true), (double[]){0.81, 0.634, 0.5681}, "nesterov");
}

Test(optim_hand, sgd_weight_decay)
{
    /* d = g + 0.1 p: 1.1 -> 0.89; 0.589 -> 0.8311; -0.25+0.08311 -> 0.847789 */
    run_scalar(sgd(0, 0, 0.1f, false), (double[]){0.89, 0.8311, 0.847789}, "weight decay");
}

Test(optim_hand, sgd_dampening_skipped_on_the_first_step)
{
    /* d = g + 0.1 p; buf = d (first), then 0.9 buf + 0.5 d:
     * 1.1 -> 0.89; 0.99 + 0.2945 = 1.2845 -> 0.76155; 1.15605 - 0.0869225 = 1.0691275 -> 0.65463725 */
    run_scalar(sgd(0.9f, 0.5f, 0.1f, false), (double[]){0.89, 0.76155, 0.65463725}, "dampening");
}

Test(optim_hand, adam)
{
    /* t=1: m 0.1, v 0.001, step 0.1/0.1 = 1, denom 1+eps -> 0.9
     * t=2: m 0.14, v 0.001249, step 0.1/0.19, denom sqrt(0.001249/0.001999) -> 0.806782038
     * t=3: -> 0.750415901 */
    run_scalar(adam(OPTIM_ADAM, 0), (double[]){0.900000001, 0.8067820383, 0.7504159015}, "adam");
}

Test(optim_hand, adam_l2_weight_decay)
{
    /* g' = g + 0.1 p, otherwise as adam */
    run_scalar(adam(OPTIM_ADAM, 0.1f), (double[]){0.9000000009, 0.8057717969, 0.7421953938},
               "adam wd");
}

Test(optim_hand, adamw_decoupled_weight_decay)
{
    /* p *= 1 - 0.1*0.1 before each adam step: 0.99 - 0.1 = 0.89; 0.8811 - 0.0932 = 0.787882 */
    run_scalar(adam(OPTIM_ADAMW, 0.1f), (double[]){0.890000001, 0.7878820383, 0.7236370811},
               "adamw");
}

// ---------------------------------------------------------------------------
// vectors against the double reference, many steps, every combination

static void reference(const optim_cfg_t *c, double *p, const double *g, double *s1, double *s2,
                      long t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double d = g[i];
        if (c->kind == OPTIM_SGD) {
            d += c->weight_decay * p[i];
            if (c->momentum != 0) {
                s1[i] = t == 1 ? d : c->momentum * s1[i] + (1 - c->dampening) * d;
                d = c->nesterov ? d + c->momentum * s1[i] : s1[i];
            }
            p[i] -= c->lr * d;
        } else {
            if (c->kind == OPTIM_ADAMW)
                p[i] *= 1 - (double)c->lr * c->weight_decay;
            else
                d += c->weight_decay * p[i];
            s1[i] = c->beta1 * s1[i] + (1 - c->beta1) * d;
            s2[i] = c->beta2 * s2[i] + (1 - c->beta2) * d * d;
            double bc1 = 1 - pow(c->beta1, (double)t), bc2 = 1 - pow(c->beta2, (double)t);
            p[i] -= c->lr / bc1 * s1[i] / (sqrt(s2[i]) / sqrt(bc2) + c->eps);
        }
    }
}

static void compare_vector(optim_cfg_t c)
{
    char err[ERR_LEN];
    enum { N = 257, STEPS = 25 };
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    optim_t o;
    cr_assert_eq(optim_init(&o, be, &c, N, err), DDP_OK, "%s", err);
    float p[N], g[N];
    double pd[N], gd[N], s1[N] = {0}, s2[N] = {0};
    rng_t r;
    rng_seed(&r, 9);
    for (int i = 0; i < N; i++)
        pd[i] = p[i] = (float)rng_normal(&r);
    for (long t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++)
            gd[i] = g[i] = (float)rng_normal(&r);
        cr_assert_eq(optim_step(&o, p, g), DDP_OK);
        reference(&c, pd, gd, s1, s2, t, N);
    }
    for (int i = 0; i < N; i++)
        cr_assert(fabs(p[i] - pd[i]) <= 1e-5 * fmax(1.0, fabs(pd[i])),
                  "%s mom %g damp %g wd %g nest %d: p[%d] %.8g vs %.8g", optim_name(c.kind),
                  c.momentum, c.dampening, c.weight_decay, c.nesterov, i, p[i], pd[i]);
    optim_free(&o);
    backend_destroy(be);
}

Test(optim_reference, every_sgd_combination)
{
    const float moms[] = {0.0f, 0.9f}, damps[] = {0.0f, 0.3f}, wds[] = {0.0f, 0.01f};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int w = 0; w < 2; w++)
                for (int nest = 0; nest < 2; nest++) {
                    optim_cfg_t c = sgd(moms[a], damps[b], wds[w], nest);
                    c.lr = 0.05f;
                    if (nest && (moms[a] == 0.0f || damps[b] != 0.0f))
                        continue; /* torch rejects it; see the validation test */
                    compare_vector(c);
                }
}

Test(optim_reference, adam_and_adamw)
{
    const float wds[] = {0.0f, 0.05f};
    for (int k = OPTIM_ADAM; k <= OPTIM_ADAMW; k++)
        for (int w = 0; w < 2; w++) {
            optim_cfg_t c = adam((optim_kind_t)k, wds[w]);
            c.lr = 0.01f;
            c.beta1 = 0.8f;
            c.beta2 = 0.99f;
            c.eps = 1e-6f;
            compare_vector(c);
        }
}

Test(optim_validation, rejects_what_torch_rejects)
{
    char err[ERR_LEN];
    optim_cfg_t c = sgd(0.0f, 0.0f, 0.0f, true);
    cr_assert_eq(optim_cfg_check(&c, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--nesterov"), "%s", err);
    c = sgd(0.9f, 0.1f, 0.0f, true);
    cr_assert_eq(optim_cfg_check(&c, err), DDP_ERR_INPUT);
    c = adam(OPTIM_ADAM, 0);
    c.beta1 = 1.0f;
    cr_assert_eq(optim_cfg_check(&c, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--beta1"), "%s", err);
    c = sgd(0, 0, 0, false);
    c.lr = -1.0f;
    cr_assert_eq(optim_cfg_check(&c, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--lr"), "%s", err);
}

Test(optim_state, counts_the_arenas_to_checkpoint)
{
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    optim_t o;
    optim_cfg_t c = sgd(0, 0, 0, false);
    cr_assert_eq(optim_init(&o, be, &c, 4, err), DDP_OK);
    cr_assert_eq(optim_state_count(&o), 0);
    optim_free(&o);
    c = sgd(0.9f, 0, 0, false);
    cr_assert_eq(optim_init(&o, be, &c, 4, err), DDP_OK);
    cr_assert_eq(optim_state_count(&o), 1);
    optim_free(&o);
    c = adam(OPTIM_ADAMW, 0.01f);
    cr_assert_eq(optim_init(&o, be, &c, 4, err), DDP_OK);
    cr_assert_eq(optim_state_count(&o), 2);
    cr_assert_not_null(o.s2);
    optim_free(&o);
    cr_assert_eq(backend_mem_in_use(be), 0, "every state arena freed");
    backend_destroy(be);
}
