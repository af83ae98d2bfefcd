/* tests/unit/test_backend_cpu.c: the CPU backend's GEMM is safe to call from
 * several threads at once with one OpenBLAS thread (what DP's workers do):
 * products computed by 4 threads concurrently are bit-identical to the same
 * products computed one after another (OpenBLAS's and, for tiny shapes, the
 * backend's own kernel).  Also run under ThreadSanitizer by
 * `make test-tsan`. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tsan_criterion.h"

#include "common/device/backend.h"
#include "common/base/rng.h"

#define NTHREADS 4
#define REPEATS 3

typedef struct {
    int m, n, k;
    bool ta, tb;
} shape_t;

/* The shapes DP's forward and backward produce (x W^T, d^T x, d W) and some
 * that are not multiples of any kernel's block size; the last three are
 * tiny (gemm_small.h: the backend's own kernel, not OpenBLAS). */
static const shape_t shapes[] = {
    {64, 128, 96, false, true}, {128, 96, 64, true, false}, {64, 96, 128, false, false},
    {33, 47, 129, false, true}, {129, 33, 47, true, false}, {200, 160, 190, false, true},
    {20, 10, 10, false, true},  {10, 10, 20, true, false},  {13, 21, 11, false, false},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

typedef struct {
    backend_t *be;
    float *a[NSHAPES], *b[NSHAPES];
    float *serial[NSHAPES];
    float *concurrent[NSHAPES][REPEATS];
    pthread_barrier_t *start;
} worker_t;

static void fill(float *x, size_t n, uint64_t seed)
{
    rng_t r;
    rng_seed_stream(&r, seed, 1);
    for (size_t i = 0; i < n; i++)
        x[i] = rng_uniform_range(&r, -1.0f, 1.0f);
}

static void gemm(backend_t *be, int s, const float *a, const float *b, float *c)
{
    const shape_t *sh = &shapes[s];
    int lda = sh->ta ? sh->m : sh->k;
    int ldb = sh->tb ? sh->k : sh->n;
    int rc = backend_gemm(be, sh->ta, sh->tb, sh->m, sh->n, sh->k, 1.0f, a, lda, b, ldb, 0.0f, c,
                           sh->n);
    cr_assert_eq(rc, DDP_OK);
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    /* Why a barrier: start every thread's GEMMs at the same moment, so they
     * really overlap inside OpenBLAS. */
    pthread_barrier_wait(w->start);
    for (int r = 0; r < REPEATS; r++)
        for (int s = 0; s < NSHAPES; s++)
            gemm(w->be, s, w->a[s], w->b[s], w->concurrent[s][r]);
    return NULL;
}

Test(backend_cpu, concurrent_sgemm_matches_serial, .timeout = 60)
{
    char err[ERR_LEN];
    backend_cpu_set_threads(1);
    worker_t w[NTHREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int t = 0; t < NTHREADS; t++) {
        cr_assert_eq(backend_cpu_create(&w[t].be, t, 0, err), DDP_OK, "%s", err);
        w[t].start = &start;
        for (int s = 0; s < NSHAPES; s++) {
            size_t na = (size_t)shapes[s].m * shapes[s].k, nb = (size_t)shapes[s].k * shapes[s].n;
            size_t nc = (size_t)shapes[s].m * shapes[s].n;
            w[t].a[s] = malloc(na * sizeof(float));
            w[t].b[s] = malloc(nb * sizeof(float));
            w[t].serial[s] = malloc(nc * sizeof(float));
            cr_assert(w[t].a[s] && w[t].b[s] && w[t].serial[s]);
            fill(w[t].a[s], na, 100u * t + s);
            fill(w[t].b[s], nb, 100u * t + s + 50);
            for (int r = 0; r < REPEATS; r++) {
                w[t].concurrent[s][r] = malloc(nc * sizeof(float));
                cr_assert_not_null(w[t].concurrent[s][r]);
            }
        }
    }
    /* The reference: every thread's products, one after another. */
    for (int t = 0; t < NTHREADS; t++)
        for (int s = 0; s < NSHAPES; s++)
            gemm(w[t].be, s, w[t].a[s], w[t].b[s], w[t].serial[s]);

    pthread_t tid[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        cr_assert_eq(pthread_create(&tid[t], NULL, worker_main, &w[t]), 0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(tid[t], NULL);

    for (int t = 0; t < NTHREADS; t++)
        for (int s = 0; s < NSHAPES; s++) {
            size_t nc = (size_t)shapes[s].m * shapes[s].n;
            for (int r = 0; r < REPEATS; r++)
                cr_assert(memcmp(w[t].serial[s], w[t].concurrent[s][r], nc * sizeof(float)) == 0,
                          "thread %d shape %d (%dx%dx%d) repeat %d differs from the serial result",
                          t, s, shapes[s].m, shapes[s].n, shapes[s].k, r);
        }
    /* And the products are not trivially equal (a broken GEMM writing zeros
     * would pass the comparison above). */
    cr_assert(memcmp(w[0].serial[0], w[1].serial[0],
                     (size_t)shapes[0].m * shapes[0].n * sizeof(float)) != 0);
    float norm = 0.0f;
    for (int i = 0; i < shapes[0].m * shapes[0].n; i++)
        norm += w[0].serial[0][i] * w[0].serial[0][i];
    cr_assert_gt(norm, 1.0f);

    for (int t = 0; t < NTHREADS; t++) {
        for (int s = 0; s < NSHAPES; s++) {
            free(w[t].a[s]);
            free(w[t].b[s]);
            free(w[t].serial[s]);
            for (int r = 0; r < REPEATS; r++)
                free(w[t].concurrent[s][r]);
        }
        backend_destroy(w[t].be);
    }
    pthread_barrier_destroy(&start);
}
