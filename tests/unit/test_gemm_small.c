/* tests/unit/test_gemm_small.c: the tiny GEMM (common/device/gemm_small.h)
 * computes what its header says, bit for bit, on every path this CPU runs;
 * it is the same product as OpenBLAS's (to fp32 rounding); it reads and
 * writes nothing outside its operands; it refuses what it does not take;
 * and the CPU backend's GEMM of a tiny shape is the kernel's. */
#include <criterion/criterion.h>
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/base/rng.h"
#include "common/device/backend.h"
#include "common/device/gemm_small.h"

/* The header's arithmetic, as a plain loop: per element, a chain of fused
 * multiply-adds in fp32 left to right from 0 over p (fmaf: one rounding
 * each; -std=c11 contracts nothing else), then alpha, then beta * C. */
static void gemm_ref(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++) {
                float a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                float b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                acc = fmaf(a, b, acc);
            }
            float o = alpha == 1.0f ? acc : alpha * acc;
            if (beta != 0.0f) {
                float old = C[(size_t)i * ldc + j];
                o = o + (beta == 1.0f ? old : beta * old);
            }
            C[(size_t)i * ldc + j] = o;
        }
}

static void fill(float *x, size_t n, rng_t *r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rng_uniform_range(r, -1.0f, 1.0f);
}

static int rnd(rng_t *r, int lo, int hi) /* lo..hi */
{
    return lo + (int)(rng_uniform_range(r, 0.0f, 0.999999f) * (float)(hi - lo + 1));
}

/* One random case: a shape within the kernel's limits, leading dimensions
 * wider than the operands, alpha and beta from the values the model uses
 * (1, 0) and others. */
typedef struct {
    bool ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
} case_t;

static case_t draw(rng_t *r)
{
    case_t c;
    do {
        c.m = rnd(r, 1, 48);
        c.n = rnd(r, 1, 48);
        c.k = rnd(r, 1, 48);
    } while ((double)c.m * c.n * c.k > GEMM_SMALL_MAX);
    c.ta = rnd(r, 0, 1);
    c.tb = rnd(r, 0, 1);
    c.lda = (c.ta ? c.m : c.k) + rnd(r, 0, 3);
    c.ldb = (c.tb ? c.k : c.n) + rnd(r, 0, 3);
    c.ldc = c.n + rnd(r, 0, 3);
    static const float alphas[] = {1.0f, 1.0f, 0.5f, -1.5f};
    static const float betas[] = {0.0f, 0.0f, 1.0f, 0.25f};
    c.alpha = alphas[rnd(r, 0, 3)];
    c.beta = betas[rnd(r, 0, 3)];
    return c;
}

static size_t a_len(const case_t *c) { return (size_t)(c->ta ? c->k : c->m) * c->lda; }
static size_t b_len(const case_t *c) { return (size_t)(c->tb ? c->n : c->k) * c->ldb; }
static size_t c_len(const case_t *c) { return (size_t)c->m * c->ldc; }

static const gemm_small_isa_t paths[] = {GEMM_SMALL_AVX2, GEMM_SMALL_AVX512};
static const char *const path_names[] = {"AVX2", "AVX-512"};

Test(gemm_small, every_path_is_the_plain_loop_bit_for_bit)
{
    if (gemm_small_best() == GEMM_SMALL_NONE)
        cr_skip_test("this CPU runs neither AVX2 nor AVX-512: the backend uses OpenBLAS");
    static float A[48 * 52], B[48 * 52], C0[48 * 52], C1[48 * 52], C2[48 * 52];
    static float scratch[GEMM_SMALL_SCRATCH];
    rng_t r;
    rng_seed_stream(&r, 7, 1);
    int ran = 0;
    for (int t = 0; t < 4000; t++) {
        case_t c = draw(&r);
        fill(A, a_len(&c), &r);
        fill(B, b_len(&c), &r);
        fill(C0, c_len(&c), &r);
        if (c.beta == 0.0f) /* BLAS does not read C then: NaN must not leak in */
            for (size_t i = 0; i < c_len(&c); i++)
                C0[i] = NAN;
        memcpy(C1, C0, c_len(&c) * sizeof(float));
        gemm_ref(c.ta, c.tb, c.m, c.n, c.k, c.alpha, A, c.lda, B, c.ldb, c.beta, C1, c.ldc);
        for (int p = 0; p < 2; p++) {
            if (paths[p] > gemm_small_best())
                continue;
            memcpy(C2, C0, c_len(&c) * sizeof(float));
            cr_assert(gemm_small(paths[p], c.ta, c.tb, c.m, c.n, c.k, c.alpha, A, c.lda, B, c.ldb,
                                 c.beta, C2, c.ldc, scratch));
            for (int i = 0; i < c.m; i++)
                cr_assert(memcmp(C1 + (size_t)i * c.ldc, C2 + (size_t)i * c.ldc,
                                 (size_t)c.n * sizeof(float)) == 0,
                          "%s: %dx%dx%d ta %d tb %d alpha %g beta %g: row %d differs from the loop",
                          path_names[p], c.m, c.n, c.k, c.ta, c.tb, c.alpha, c.beta, i);
            /* the padding of each row of C is untouched */
            for (int i = 0; i < c.m; i++)
                for (int j = c.n; j < c.ldc; j++) {
                    float was = C0[(size_t)i * c.ldc + j], is = C2[(size_t)i * c.ldc + j];
                    cr_assert(memcmp(&was, &is, sizeof is) == 0,
                              "%s: wrote C[%d][%d], past n = %d", path_names[p], i, j, c.n);
                }
            ran++;
        }
    }
    cr_assert_gt(ran, 4000);
}

/* The same product as OpenBLAS's, to fp32 rounding: a wrong index or a
 * missed term is far outside it. */
Test(gemm_small, agrees_with_openblas)
{
    if (gemm_small_best() == GEMM_SMALL_NONE)
        cr_skip_test("this CPU runs neither AVX2 nor AVX-512");
    static float A[48 * 52], B[48 * 52], C1[48 * 52], C2[48 * 52];
    static float scratch[GEMM_SMALL_SCRATCH];
    rng_t r;
    rng_seed_stream(&r, 8, 1);
    int differ = 0;
    for (int t = 0; t < 1000; t++) {
        case_t c = draw(&r);
        fill(A, a_len(&c), &r);
        fill(B, b_len(&c), &r);
        fill(C1, c_len(&c), &r);
        memcpy(C2, C1, c_len(&c) * sizeof(float));
        cblas_sgemm(CblasRowMajor, c.ta ? CblasTrans : CblasNoTrans,
                    c.tb ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, c.alpha, A, c.lda, B, c.ldb,
                    c.beta, C1, c.ldc);
        cr_assert(gemm_small(gemm_small_best(), c.ta, c.tb, c.m, c.n, c.k, c.alpha, A, c.lda, B,
                             c.ldb, c.beta, C2, c.ldc, scratch));
        for (int i = 0; i < c.m; i++)
            for (int j = 0; j < c.n; j++) {
                float x = C1[(size_t)i * c.ldc + j], y = C2[(size_t)i * c.ldc + j];
                /* each sum has k terms of magnitude <= 1 */
                cr_assert_leq(fabsf(x - y), 4e-7f * (float)(c.k + 2),
                              "%dx%dx%d: C[%d][%d] %.9g vs OpenBLAS %.9g", c.m, c.n, c.k, i, j, y,
                              x);
                differ += x != y;
            }
    }
    /* The bits are the kernel's own, not OpenBLAS's (whose kernels split
     * and reorder the sums over k past 7 terms): the test compares two
     * different sums. */
    cr_assert_gt(differ, 0);
}

/* Operands that end right before an unmapped page: a read or write past
 * any of them (the masked loads of the last columns, the last row of B)
 * would be a fault. */
Test(gemm_small, touches_nothing_past_its_operands)
{
    if (gemm_small_best() == GEMM_SMALL_NONE)
        cr_skip_test("this CPU runs neither AVX2 nor AVX-512");
    long page = sysconf(_SC_PAGESIZE);
    static float scratch[GEMM_SMALL_SCRATCH];
    rng_t r;
    rng_seed_stream(&r, 9, 1);
    for (int t = 0; t < 300; t++) {
        case_t c = draw(&r);
        c.lda = c.ta ? c.m : c.k; /* tight: the last element ends the buffer */
        c.ldb = c.tb ? c.k : c.n;
        c.ldc = c.n;
        float *ops[3];
        size_t len[3] = {a_len(&c), b_len(&c), c_len(&c)};
        void *map[3];
        size_t bytes[3];
        for (int o = 0; o < 3; o++) {
            size_t data = len[o] * sizeof(float);
            size_t pages = (data + (size_t)page - 1) / (size_t)page;
            bytes[o] = (pages + 1) * (size_t)page;
            map[o] = mmap(NULL, bytes[o], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                          0);
            cr_assert_neq(map[o], MAP_FAILED);
            char *guard = (char *)map[o] + pages * (size_t)page;
            cr_assert_eq(mprotect(guard, (size_t)page, PROT_NONE), 0);
            ops[o] = (float *)(guard - data);
            fill(ops[o], len[o], &r);
        }
        for (int p = 0; p < 2; p++)
            if (paths[p] <= gemm_small_best())
                cr_assert(gemm_small(paths[p], c.ta, c.tb, c.m, c.n, c.k, c.alpha, ops[0], c.lda,
                                     ops[1], c.ldb, c.beta, ops[2], c.ldc, scratch));
        for (int o = 0; o < 3; o++)
            munmap(map[o], bytes[o]);
    }
}

Test(gemm_small, refuses_what_it_does_not_take)
{
    static float A[4], B[4], C[4] = {1, 2, 3, 4};
    static float scratch[GEMM_SMALL_SCRATCH];
    gemm_small_isa_t best = gemm_small_best();
    /* too large, k too long, empty, a path this CPU lacks or none */
    cr_assert_not(gemm_small(best, false, false, 64, 64, 8, 1.0f, A, 8, B, 64, 0.0f, C, 64, scratch));
    cr_assert_not(gemm_small(best, false, false, 1, 1, GEMM_SMALL_KMAX + 1, 1.0f, A, 1000, B, 1,
                             0.0f, C, 1, scratch));
    cr_assert_not(gemm_small(best, false, false, 0, 1, 1, 1.0f, A, 1, B, 1, 0.0f, C, 1, scratch));
    cr_assert_not(gemm_small(GEMM_SMALL_NONE, false, false, 1, 1, 1, 1.0f, A, 1, B, 1, 0.0f, C, 1,
                             scratch));
    if (best != GEMM_SMALL_AVX512)
        cr_assert_not(gemm_small(GEMM_SMALL_AVX512, false, false, 1, 1, 1, 1.0f, A, 1, B, 1, 0.0f,
                                 C, 1, scratch));
    cr_assert(C[0] == 1 && C[1] == 2 && C[2] == 3 && C[3] == 4, "a refused call wrote C");
}

/* The CPU backend's GEMM of the seed-size model's shapes is the kernel's
 * (on a CPU that runs it), and a larger one is OpenBLAS's. */
Test(gemm_small, the_backend_runs_it_for_tiny_shapes)
{
    if (gemm_small_best() == GEMM_SMALL_NONE)
        cr_skip_test("this CPU runs neither AVX2 nor AVX-512");
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK, "%s", err);
    static float A[64 * 64], B[64 * 64], C1[64 * 64], C2[64 * 64];
    rng_t r;
    rng_seed_stream(&r, 10, 1);
    fill(A, 64 * 64, &r);
    fill(B, 64 * 64, &r);
    /* x W^T, d^T x, d W of a 10-10 layer on 20 rows */
    const case_t tiny[] = {{false, true, 20, 10, 10, 10, 10, 10, 1.0f, 0.0f},
                           {true, false, 10, 10, 20, 10, 10, 10, 1.0f, 1.0f},
                           {false, false, 20, 10, 10, 10, 10, 10, 1.0f, 0.0f}};
    for (int s = 0; s < 3; s++) {
        const case_t *c = &tiny[s];
        memset(C1, 0, sizeof C1);
        memset(C2, 0, sizeof C2);
        cr_assert_eq(backend_gemm(be, c->ta, c->tb, c->m, c->n, c->k, c->alpha, A, c->lda, B,
                                  c->ldb, c->beta, C1, c->ldc),
                     DDP_OK);
        gemm_ref(c->ta, c->tb, c->m, c->n, c->k, c->alpha, A, c->lda, B, c->ldb, c->beta, C2,
                 c->ldc);
        cr_assert(memcmp(C1, C2, sizeof C1) == 0, "shape %d: not the kernel's bits", s);
    }
    /* 64 x 64 x 64 is OpenBLAS's */
    memset(C1, 0, sizeof C1);
    memset(C2, 0, sizeof C2);
    cr_assert_eq(backend_gemm(be, false, true, 64, 64, 64, 1.0f, A, 64, B, 64, 0.0f, C1, 64),
                 DDP_OK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 64, 64, 64, 1.0f, A, 64, B, 64, 0.0f, C2,
                64);
    cr_assert(memcmp(C1, C2, sizeof C1) == 0, "64x64x64: not OpenBLAS's bits");
    backend_destroy(be);
}
