/* tests/unit/test_bf16.c: --precision bf16 on the CPU backend, the reference
 * the CUDA backend is held to (backend.h states the arithmetic): bf16
 * rounding (to nearest, ties to even), the GEMM on bf16-rounded inputs with
 * fp32 sums, the layer outputs, activations and gradients stored as bf16
 * values with an fp32 loss; and the equivalence contract's bf16 row:
 * single == dp == ddp within BF16_TOL, while bf16 itself moves the result
 * far outside it (so a mode that forgot bf16 fails). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "common/device/backend.h"
#include "common/base/half.h"
#include "testutil.h"

/* The bf16 row's tolerance on the final parameters: the relative L2 distance
 * of the whole parameter vector (docs/gpu.md derives it; bench/
 * bf16_tolerance.sh measures it).  Per parameter, bf16 is no place for a
 * fixed bound: a value an fp32 summation order moves across a bf16 rounding
 * boundary moves by 2^-8 of itself, and Adam turns the gradients of the
 * parameters whose gradient is mostly cancellation into lr-sized steps. */
#define BF16_TOL 1e-3

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static bool is_bf16(float x) { return (bits_of(x) & 0xffffu) == 0; }

static void fill(float *x, size_t n, uint64_t seed)
{
    rng_t r;
    rng_seed_stream(&r, seed, 1);
    for (size_t i = 0; i < n; i++)
        x[i] = rng_uniform_range(&r, -1.0f, 1.0f);
}

static backend_t *cpu(precision_t p)
{
    backend_t *be = NULL;
    char err[ERR_LEN];
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK, "%s", err);
    cr_assert_eq(backend_set_precision(be, p), DDP_OK);
    return be;
}

// ---------------------------------------------------------------------------
// rounding

Test(bf16, rounds_to_nearest_even)
{
    const float ulp = 0x1p-7f; /* bf16's unit in the last place at 1 */
    cr_assert_eq(bf16_round_f32(1.0f), 1.0f);
    cr_assert_eq(bf16_round_f32(1.0f + ulp / 2), 1.0f, "a tie goes to the even neighbour (1)");
    cr_assert_eq(bf16_round_f32(1.0f + 1.5f * ulp), 1.0f + 2 * ulp, "a tie goes to the even neighbour");
    cr_assert_eq(bf16_round_f32(1.0f + ulp / 2 + 0x1p-20f), 1.0f + ulp, "above the tie: up");
    cr_assert_eq(bf16_round_f32(1.0f + ulp / 2 - 0x1p-20f), 1.0f, "below the tie: down");
    cr_assert_eq(bf16_round_f32(-(1.0f + 1.5f * ulp)), -(1.0f + 2 * ulp), "symmetric");
    cr_assert_eq(bf16_round_f32(3.14159265f), 3.140625f);
    cr_assert(isinf(bf16_round_f32(FLT_MAX)), "past bf16's largest finite value: infinity");
    cr_assert(isinf(bf16_round_f32(INFINITY)) && bf16_round_f32(-INFINITY) < 0);
    cr_assert(isnan(bf16_round_f32(NAN)), "NaN stays NaN");
    cr_assert_eq(bf16_round_f32(0.0f), 0.0f);
    cr_assert_eq(bf16_from_f32(1.0f), 0x3f80);
    cr_assert_eq(bf16_to_f32(0x4049), 3.140625f);
    /* half an ulp at most, anywhere */
    rng_t r;
    rng_seed_stream(&r, 7, 1);
    for (int i = 0; i < 100000; i++) {
        float x = ldexpf(rng_uniform_range(&r, -1.0f, 1.0f), (int)(rng_uniform_range(&r, -60, 60)));
        float y = bf16_round_f32(x);
        cr_assert(is_bf16(y));
        cr_assert(fabsf(y - x) <= ldexpf(fabsf(x), -8) + FLT_MIN,
                  "%a rounds to %a: more than half an ulp", x, y);
    }
}

// ---------------------------------------------------------------------------
// the operations (backend.h's PREC_BF16)

/* C = op(A) op(B) in bf16 against double sums of the rounded and of the
 * unrounded inputs: equal to the first within fp32 summation, away from the
 * second by bf16's rounding; operands with a leading dimension wider than
 * their rows, so the packing of the rounded copy is checked too. */
Test(bf16, gemm_rounds_its_inputs_and_sums_in_fp32)
{
    backend_t *be = cpu(PREC_BF16);
    const int m = 37, n = 29, k = 131, pad = 3;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        int lda = ac + pad, ldb = bc + pad;
        float *A = malloc(sizeof(float) * (size_t)ar * lda), *B = malloc(sizeof(float) * (size_t)br * ldb);
        float *C = malloc(sizeof(float) * (size_t)m * n);
        fill(A, (size_t)ar * lda, 1 + t);
        fill(B, (size_t)br * ldb, 11 + t);
        cr_assert_eq(backend_gemm(be, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, 0.0f, C, n), DDP_OK);
        double worst_r = 0, worst = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0, sr = 0;
                for (int l = 0; l < k; l++) {
                    float a = ta ? A[(size_t)l * lda + i] : A[(size_t)i * lda + l];
                    float b = tb ? B[(size_t)j * ldb + l] : B[(size_t)l * ldb + j];
                    s += (double)a * b;
                    sr += (double)bf16_round_f32(a) * bf16_round_f32(b);
                }
                worst_r = fmax(worst_r, fabs(C[(size_t)i * n + j] - sr));
                worst = fmax(worst, fabs(C[(size_t)i * n + j] - s));
            }
        /* |terms| <= 1, k of them: fp32 sums are within k * 2^-24 * k */
        cr_assert(worst_r < 2e-5, "ta %d tb %d: %.3g from the sum of the rounded inputs", ta, tb, worst_r);
        cr_assert(worst > 1e-3, "ta %d tb %d: only %.3g from the unrounded product: no bf16 rounding?",
                  ta, tb, worst);
        free(A);
        free(B);
        free(C);
    }
    backend_destroy(be);
}

Test(bf16, activations_and_gradients_are_bf16_and_the_loss_is_fp32)
{
    enum { R = 16, K = 24 };
    static float z[R * K], a[R * K], b[K], z0[R * K], d[R * K], out[R * 4], tgt[R], g[R * 4];
    for (int p = 0; p < 2; p++) {
        precision_t prec = p ? PREC_BF16 : PREC_FP32;
        backend_t *be = cpu(prec);
        for (int act = ACT_RELU; act <= ACT_GELU; act++) {
            fill(z0, R * K, 3);
            fill(b, K, 4);
            memcpy(z, z0, sizeof z);
            cr_assert_eq(backend_bias_act_fwd(be, (act_t)act, z, a, b, R, K), DDP_OK);
            int off = 0;
            for (int i = 0; i < R * K; i++) {
                float want = bf16_round_f32(z0[i] + bf16_round_f32(b[i % K]));
                if (prec == PREC_BF16) {
                    cr_assert_eq(z[i], want, "act %d: z[%d] %a, not bf16(z + bf16(b)) %a", act, i, z[i], want);
                    cr_assert(is_bf16(a[i]), "act %d: a[%d] = %a is not a bf16 value", act, i, a[i]);
                }
                off += !is_bf16(z[i]) || !is_bf16(a[i]);
            }
            if (prec == PREC_FP32)
                cr_assert_gt(off, R * K / 2, "fp32 must not round (act %d)", act);
            fill(d, R * K, 5);
            cr_assert_eq(backend_act_bwd(be, (act_t)act, z, a, d, R * K), DDP_OK);
            off = 0;
            for (int i = 0; i < R * K; i++)
                off += !is_bf16(d[i]);
            cr_assert(prec == PREC_FP32 ? off > 0 : off == 0, "act %d, %s: %d gradients not bf16", act,
                      precision_name(prec), off);
        }
        backend_destroy(be);
    }
    /* the loss: fp32 from the same outputs in both precisions, the gradient rounded */
    float loss[2];
    for (int l = LOSS_MSE; l <= LOSS_CE; l++) {
        for (int p = 0; p < 2; p++) {
            backend_t *be = cpu(p ? PREC_BF16 : PREC_FP32);
            fill(out, R * 4, 6);
            for (int i = 0; i < R * 4; i++)
                out[i] = bf16_round_f32(out[i]);
            for (int i = 0; i < R; i++)
                tgt[i] = l == LOSS_CE ? (float)(i % 4) : 0.5f;
            float *t = l == LOSS_CE ? tgt : out; /* mse/bce: a target per output */
            static float tt[R * 4];
            if (l != LOSS_CE) {
                fill(tt, R * 4, 8);
                t = tt;
            }
            cr_assert_eq(backend_loss(be, (loss_t)l, out, t, R, 4, 1.0f / R, g, &loss[p]), DDP_OK);
            int off = 0;
            for (int i = 0; i < R * 4; i++)
                off += !is_bf16(g[i]);
            cr_assert(p ? off == 0 : off > 0, "loss %d: %d gradients not bf16 (%s)", l, off, p ? "bf16" : "fp32");
            backend_destroy(be);
        }
        cr_assert_eq(bits_of(loss[0]), bits_of(loss[1]), "loss %d: the bf16 run's loss is not the fp32 one", l);
    }
}

// ---------------------------------------------------------------------------
// the equivalence contract, bf16 row

static double l2_rel(const run_result_t *a, const run_result_t *b)
{
    cr_assert_eq(a->nparams, b->nparams);
    double num = 0, den = 0;
    for (size_t i = 0; i < a->nparams; i++) {
        double x = a->params[i], y = b->params[i];
        num += (x - y) * (x - y);
        den += x * x;
    }
    return sqrt(num / den);
}

/* mlp-small's shape at a quarter of its width (the whole model takes seconds
 * on a busy CPU), Adam, 12 steps: single, dp on 2 and ddp on 2 and 4 in bf16
 * agree within BF16_TOL; bf16 against fp32 ends many times further apart, so
 * a mode that ran fp32 would fail. */
Test(bf16, single_dp_ddp_agree_within_the_bf16_tolerance, .timeout = 120)
{
    const char *base = "--backend cpu --quiet --layers 64,128,128,10 --act gelu --loss ce "
                       "--optim adam --lr 0.003 --dataset classes --samples 2048 --batch 256 --steps 12";
    char line[512], err[ERR_LEN];
    run_result_t ref, f32;
    snprintf(line, sizeof line, "%s --precision bf16", base);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --precision fp32", base);
    cr_assert_eq(tu_run(line, &f32, err), DDP_OK, "%s", err);
    double apart = l2_rel(&ref, &f32);
    cr_assert(apart > 3 * BF16_TOL, "bf16 ends only %.3g from fp32: the test could not see it", apart);
    const char *modes[] = {"--mode dp --gpus 0,1", "--mode ddp --gpus 0,1", "--mode ddp --gpus 0,1,2,3"};
    for (int i = 0; i < 3; i++) {
        run_result_t r;
        snprintf(line, sizeof line, "%s --precision bf16 %s", base, modes[i]);
        cr_assert_eq(tu_run(line, &r, err), DDP_OK, "'%s': %s", modes[i], err);
        double dist = l2_rel(&r, &ref);
        cr_log_info("bf16 %s vs single: %.3g (bf16 vs fp32: %.3g)", modes[i], dist, apart);
        cr_assert(dist <= BF16_TOL, "bf16 %s ends %.3g from single (tolerance %.0e; bf16 vs fp32 %.3g)",
                  modes[i], dist, BF16_TOL, apart);
        double dl = fabs(r.final_loss - ref.final_loss) / fmax(fabs(ref.final_loss), 1e-3);
        cr_assert(dl <= BF16_TOL, "bf16 %s: final loss %.9g vs %.9g", modes[i], r.final_loss, ref.final_loss);
        result_free(&r);
    }
    result_free(&ref);
    result_free(&f32);
}
