/* tests/unit/test_cuda.c: the CUDA backend against the CPU backend.
 *
 * Each kernel family on random inputs (gemm in all four transpose forms with
 * padded leading dimensions, bias+activation forward and backward for every
 * activation, the bias gradient, the three losses, SGD/Adam/AdamW, axpy and
 * scale, the copies), then the equivalence contract on CUDA: single mode on
 * the GPU ends where single mode on the CPU ends, within 1e-4 relative after
 * 20 steps, and two GPU runs give the same bits.
 *
 * The activations are held to an exact reference in double, each side within
 * a bound derived from float rounding, not to each other: the CPU's expf,
 * tanhf and erff are glibc's (vectorised, libmvec, at -O3) and the GPU's are
 * CUDA's, each a few ulp from the exact value but not the same bits, and
 * GELU's 1 + erf(x/sqrt 2) cancels for x below about -2, where a one-ulp
 * difference of erf is a large relative one.  Where only + - * / are
 * involved (relu, the tanh and sigmoid derivatives from a) the two sides
 * must also agree bit for bit (--fmad=false).
 *
 * Every GPU test skips, with the probe's reason, when no GPU is visible (or
 * the build has no CUDA), so this suite passes on GPU-less machines; the probe
 * and the --backend error paths are tested everywhere. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/device/backend.h"
#include "tests/unit/cuda_probe_once.h"
#include "common/base/half.h"
#include "common/base/rng.h"
#include "common/nn/model.h"
#include "testutil.h"

/* The emulated GPU's count of cudaMalloc and cudaFree calls
 * (tests/cuda_emu); absent, and so NULL, on a real GPU. */
long emu_alloc_calls(void) __attribute__((weak));

// ---------------------------------------------------------------------------
// helpers

typedef struct {
    backend_t *cpu, *gpu;
} pair_t;

/* Skip the calling test unless a GPU is visible (the probe's reason). */
static void need_gpu(void)
{
    char why[ERR_LEN] = "";
    if (cuda_probe_once(why) <= 0)
        cr_skip_test("no GPU: %s", why);
}

static pair_t pair_open(void)
{
    need_gpu();
    pair_t p;
    char err[ERR_LEN];
    cr_assert_eq(backend_cpu_create(&p.cpu, 0, 1, err), DDP_OK, "%s", err);
    cr_assert_eq(backend_cuda_create(&p.gpu, 0, err), DDP_OK, "%s", err);
    return p;
}

static void pair_close(pair_t *p)
{
    backend_destroy(p->gpu);
    backend_destroy(p->cpu);
}

static void check(backend_t *be, int rc, const char *what)
{
    cr_assert_eq(rc, DDP_OK, "%s on %s: %s", what, backend_name(be), backend_last_error(be));
}

static float *host_random(size_t n, uint64_t seed, float lo, float hi)
{
    rng_t r;
    rng_seed(&r, seed);
    float *h = malloc((n ? n : 1) * sizeof *h);
    cr_assert_not_null(h);
    for (size_t i = 0; i < n; i++)
        h[i] = rng_uniform_range(&r, lo, hi);
    return h;
}

/* A device copy of host[0..n) on be. */
static float *upload(backend_t *be, const float *host, size_t n)
{
    float *d = backend_alloc(be, (n ? n : 1) * sizeof(float));
    cr_assert_not_null(d, "alloc on %s: %s", backend_name(be), backend_last_error(be));
    check(be, backend_h2d(be, d, host, n * sizeof(float)), "h2d");
    check(be, backend_sync(be), "sync");
    return d;
}

/* A host copy of dev[0..n) (waits for be's work). */
static float *download(backend_t *be, const float *dev, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    cr_assert_not_null(h);
    check(be, backend_d2h(be, h, dev, n * sizeof(float)), "d2h");
    return h;
}

/* The same host data on both devices. */
typedef struct {
    float *c, *g;
} buf2_t;

static buf2_t both(pair_t *p, const float *host, size_t n)
{
    return (buf2_t){upload(p->cpu, host, n), upload(p->gpu, host, n)};
}

static void both_free(pair_t *p, buf2_t b)
{
    backend_free(p->cpu, b.c);
    backend_free(p->gpu, b.g);
}

/* Assert the GPU's copy of b equals the CPU's to rel_tol (scale floored at floor). */
static void assert_close(pair_t *p, buf2_t b, size_t n, double rel_tol, double floor,
                         const char *what)
{
    float *hc = download(p->cpu, b.c, n), *hg = download(p->gpu, b.g, n);
    double worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double x = hc[i], y = hg[i];
        double rel = fabs(x - y) / fmax(fmax(fabs(x), fabs(y)), floor);
        if (isnan(x) != isnan(y))
            rel = INFINITY;
        if (rel > worst) {
            worst = rel;
            at = i;
        }
    }
    cr_assert(worst <= rel_tol, "%s: GPU differs from CPU by %.3g relative at [%zu]: cpu %.9g gpu %.9g",
              what, worst, at, n ? hc[at] : 0.0, n ? hg[at] : 0.0);
    free(hc);
    free(hg);
}

// ---------------------------------------------------------------------------
// the probe and the --backend paths (run everywhere)

Test(cuda_probe, answers_with_a_reason)
{
    char why[ERR_LEN] = "", why2[ERR_LEN] = "";
    int n = backend_cuda_probe(why);
    cr_assert_geq(n, 0);
    cr_assert_neq(why[0], 0, "the probe must always say why");
    if (n == 0)
        cr_assert(strstr(why, "cudaErrorInsufficientDriver") || strstr(why, "cudaErrorNoDevice") ||
                      strstr(why, "built without CUDA") || strstr(why, "CUDA probe") ||
                      strstr(why, "cudaGetDeviceCount"),
                  "unexpected reason: %s", why);
    cr_assert_eq(backend_cuda_probe(why2), n, "a second probe must agree");
    cr_assert_str_eq(why, why2);
}

Test(cuda_probe, respects_an_empty_cuda_visible_devices)
{
    /* Set before this process's first probe: the probe's child inherits it. */
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    char why[ERR_LEN] = "";
    cr_assert_eq(backend_cuda_probe(why), 0, "no device may be visible; probe said: %s", why);
    cr_assert(strstr(why, "cudaErrorNoDevice") || strstr(why, "cudaErrorInsufficientDriver") ||
                  strstr(why, "built without CUDA"),
              "unexpected reason: %s", why);
}

Test(cuda_probe, backend_cuda_without_a_gpu_is_an_input_error)
{
    char why[ERR_LEN] = "";
    if (backend_cuda_probe(why) > 0)
        cr_skip_test("a GPU is visible");
    config_t c;
    char err[ERR_LEN] = "";
    cr_assert_eq(tu_parse(&c, "--backend cuda --steps 1", err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--backend cuda") && strstr(err, why), "message: %s", err);
    cr_assert_eq(tu_parse(&c, "--backend auto --steps 1", err), DDP_OK, "%s", err);
    cr_assert_eq(c.backend, BACKEND_CPU, "auto must fall back to the CPU");
}

Test(cuda_probe, describes_every_visible_gpu_from_the_runtime)
{
    /* Names, PCI ids, memory and peer links come from the CUDA runtime in
     * the probe's child (not the driver's /proc files, which list GPUs in PCI
     * order), numbered as --gpus numbers them. */
    need_gpu();
    char why[ERR_LEN];
    int n = backend_cuda_probe(why);
    const gpu_topology_t *t = backend_cuda_gpus();
    cr_assert_not_null(t);
    cr_assert_eq(t->count, n < GPU_INFO_MAX ? n : GPU_INFO_MAX);
    for (int i = 0; i < t->count; i++) {
        cr_assert_neq(t->gpu[i].name[0], 0, "GPU %d has no name", i);
        cr_assert(strchr(t->gpu[i].pci_bus_id, ':'), "GPU %d: PCI id '%s'", i, t->gpu[i].pci_bus_id);
        cr_assert_gt(t->gpu[i].mem_bytes, 0);
        cr_assert_eq(t->peer[i][i], -1, "a GPU is not its own peer");
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(t->gpu[i].pci_bus_id, t->gpu[j].pci_bus_id, "two GPUs, one slot");
    }
}

Test(cuda_probe, leaves_cuda_usable_in_forked_children)
{
    /* The reason the probe forks: after it, this process may still fork a
     * child that uses CUDA (a DDP rank).  Had the probe initialised CUDA here,
     * the child's CUDA calls would fail. */
    need_gpu();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        backend_t *be;
        char err[ERR_LEN];
        if (backend_cuda_create(&be, 0, err) != DDP_OK)
            _exit(3);
        float *d = backend_alloc(be, 64);
        float h[16] = {0};
        int ok = d && backend_d2h(be, h, d, sizeof h) == DDP_OK;
        backend_destroy(be);
        _exit(ok ? 0 : 4);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "a child forked after the probe could not use CUDA (status %d)", st);
}

Test(cuda_backend, device_ids_are_checked_against_the_visible_count)
{
    need_gpu();
    char why[ERR_LEN], err[ERR_LEN] = "";
    int n = backend_cuda_probe(why);
    backend_t *be = NULL;
    cr_assert_eq(backend_cuda_create(&be, n, err), DDP_ERR_INPUT);
    cr_assert_null(be);
    char want[64];
    snprintf(want, sizeof want, "device %d does not exist (%d visible)", n, n);
    cr_assert(strstr(err, "--gpus") && strstr(err, want), "message: %s", err);
}

// ---------------------------------------------------------------------------
// memory and copies

Test(cuda_backend, memory_is_zeroed_accounted_and_copied)
{
    pair_t p = pair_open();
    backend_t *g = p.gpu;
    size_t n = 100000;
    /* a new device holds its cuBLAS workspace (cuda_backend/cublas_workspace_is_counted) */
    size_t ws = backend_mem_in_use(g);
    float *d = backend_alloc(g, n * sizeof(float));
    cr_assert_not_null(d);
    cr_assert_eq(backend_mem_in_use(g), ws + n * sizeof(float));
    float *h = download(g, d, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i], 0.0f, "alloc must zero: [%zu] = %g", i, h[i]);
    free(h);

    float *src = host_random(n, 7, -1, 1);
    float *pinned = backend_alloc_host(g, n * sizeof(float));
    cr_assert_not_null(pinned);
    memcpy(pinned, src, n * sizeof(float));
    check(g, backend_h2d(g, d, pinned, n * sizeof(float)), "h2d");
    float *e = backend_alloc(g, n * sizeof(float));
    check(g, backend_d2d(g, e, d, n * sizeof(float)), "d2d");
    h = download(g, e, n);
    cr_assert_arr_eq(h, src, n * sizeof(float), "h2d then d2d must round-trip exactly");
    free(h);
    check(g, backend_memset0(g, e + 10, 20 * sizeof(float)), "memset0");
    h = download(g, e, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(h[i], i >= 10 && i < 30 ? 0.0f : src[i], "memset0 range at %zu", i);
    free(h);

    /* A second replica on the same GPU (--gpus 0,0): peer_copy is a plain copy. */
    backend_t *g2;
    char err[ERR_LEN];
    cr_assert_eq(backend_cuda_create(&g2, 0, err), DDP_OK, "%s", err);
    float *f = backend_alloc(g2, n * sizeof(float));
    check(g2, backend_peer_copy(g2, f, g, d, n * sizeof(float)), "peer_copy");
    h = download(g2, f, n);
    cr_assert_arr_eq(h, src, n * sizeof(float), "peer_copy between replicas of one GPU");
    free(h);
    backend_free(g2, f);
    backend_destroy(g2);

    backend_free_host(g, pinned);
    backend_free(g, e);
    backend_free(g, d);
    cr_assert_eq(backend_mem_in_use(g), ws, "free must give back what alloc counted");
    cr_assert_geq(backend_mem_peak(g), ws + 2 * n * sizeof(float));
    free(src);
    pair_close(&p);
}

Test(cuda_backend, peer_copy_between_two_gpus)
{
    need_gpu();
    char why[ERR_LEN], err[ERR_LEN];
    if (backend_cuda_probe(why) < 2)
        cr_skip_test("needs two GPUs");
    backend_t *a, *b;
    cr_assert_eq(backend_cuda_create(&a, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(backend_cuda_create(&b, 1, err), DDP_OK, "%s", err);
    size_t n = 1 << 20;
    float *src = host_random(n, 9, -5, 5);
    float *da = upload(a, src, n);
    float *db = backend_alloc(b, n * sizeof(float));
    check(b, backend_peer_copy(b, db, a, da, n * sizeof(float)), "peer_copy 0 -> 1");
    float *h = download(b, db, n);
    cr_assert_arr_eq(h, src, n * sizeof(float));
    free(h);
    free(src);
    backend_free(a, da);
    backend_free(b, db);
    backend_destroy(b);
    backend_destroy(a);
}

// ---------------------------------------------------------------------------
// one host thread per device (DP's workers), the main thread touching all

typedef struct {
    backend_t *be;
    const float *hx;
    int n;
    float *out; /* device result */
    int rc;
    char err[ERR_LEN];
} worker_t;

/* A short forward-like sequence on the worker's own device, from a thread
 * that never called cudaSetDevice itself: the backend must bind it. */
static void *worker_main(void *arg)
{
    worker_t *w = arg;
    backend_t *be = w->be;
    size_t nn = (size_t)w->n * w->n;
    float *x = backend_alloc(be, nn * sizeof(float));
    w->out = backend_alloc(be, nn * sizeof(float));
    float *b = backend_alloc(be, (size_t)w->n * sizeof(float));
    float *g = backend_alloc(be, nn * sizeof(float));
    w->rc = x && w->out && b && g ? DDP_OK : DDP_ERR_RUNTIME;
    for (int rep = 0; rep < 20 && w->rc == DDP_OK; rep++) {
        w->rc = backend_h2d(be, x, w->hx, nn * sizeof(float));
        if (w->rc == DDP_OK)
            w->rc = backend_gemm(be, false, true, w->n, w->n, w->n, 1.0f, x, w->n, x, w->n, 0.0f,
                                  w->out, w->n);
        if (w->rc == DDP_OK)
            w->rc = backend_bias_act_fwd(be, ACT_NONE, w->out, w->out, b, w->n, w->n);
        /* The block-reducing kernels, concurrently with the other workers'. */
        if (w->rc == DDP_OK)
            w->rc = backend_bias_grad(be, b, w->out, w->n, w->n, false);
        if (w->rc == DDP_OK)
            w->rc = backend_loss(be, LOSS_MSE, w->out, x, w->n, w->n, 1.0f, g, b);
        if (w->rc == DDP_OK)
            w->rc = backend_sync(be);
    }
    if (w->rc != DDP_OK)
        snprintf(w->err, sizeof w->err, "%s", backend_last_error(be));
    backend_free(be, x);
    backend_free(be, b);
    backend_free(be, g);
    return NULL;
}

Test(cuda_backend, one_host_thread_per_device)
{
    need_gpu();
    char why[ERR_LEN], err[ERR_LEN];
    int ngpu = backend_cuda_probe(why);
    enum { K = 3, N = 96 };
    worker_t w[K];
    pthread_t th[K];
    float *hx = host_random((size_t)N * N, 131, -1, 1);
    for (int i = 0; i < K; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].hx = hx;
        w[i].n = N;
        /* Devices 0, 1, 2 when there are that many, else replicas sharing them. */
        cr_assert_eq(backend_cuda_create(&w[i].be, i % ngpu, err), DDP_OK, "%s", err);
    }
    for (int i = 0; i < K; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < K; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < K; i++)
        cr_assert_eq(w[i].rc, DDP_OK, "worker %d (device %d): %s", i, backend_device_id(w[i].be), w[i].err);
    /* The main thread gathers every result onto replica 0, as DP does. */
    float *h0 = download(w[0].be, w[0].out, (size_t)N * N);
    float *gathered = backend_alloc(w[0].be, (size_t)N * N * sizeof(float));
    for (int i = 1; i < K; i++) {
        check(w[0].be, backend_peer_copy(w[0].be, gathered, w[i].be, w[i].out,
                                               (size_t)N * N * sizeof(float)), "peer_copy");
        float *hi = download(w[0].be, gathered, (size_t)N * N);
        cr_assert_arr_eq(hi, h0, (size_t)N * N * sizeof(float),
                         "worker %d computed different bits from worker 0", i);
        free(hi);
    }
    backend_free(w[0].be, gathered);
    free(h0);
    for (int i = 0; i < K; i++) {
        backend_free(w[i].be, w[i].out);
        backend_destroy(w[i].be);
    }
    free(hx);
}

// ---------------------------------------------------------------------------
// gemm

static void gemm_case(pair_t *p, bool ta, bool tb, int m, int n, int k, float alpha, float beta)
{
    /* Padded leading dimensions catch a wrong row/column-major mapping. */
    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
    size_t na = (size_t)(ta ? k : m) * lda, nb = (size_t)(tb ? n : k) * ldb, nc = (size_t)m * ldc;
    float *ha = host_random(na, 11, -1, 1), *hb = host_random(nb, 12, -1, 1);
    float *hc = host_random(nc, 13, -1, 1);
    buf2_t A = both(p, ha, na), B = both(p, hb, nb), C = both(p, hc, nc);
    check(p->cpu, backend_gemm(p->cpu, ta, tb, m, n, k, alpha, A.c, lda, B.c, ldb, beta, C.c, ldc), "gemm");
    check(p->gpu, backend_gemm(p->gpu, ta, tb, m, n, k, alpha, A.g, lda, B.g, ldb, beta, C.g, ldc), "gemm");
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%d n=%d k=%d", ta, tb, m, n, k);
    /* Only the summation order differs; the padding columns must be untouched. */
    assert_close(p, C, nc, 1e-4, 1.0, what);
    both_free(p, A);
    both_free(p, B);
    both_free(p, C);
    free(ha);
    free(hb);
    free(hc);
}

Test(cuda_backend, a_training_step_allocates_nothing)
{
    /* The kernels' scratch (the bias gradient's partial sums, the per-row
     * losses) is reserved when the replica is set up: a cudaMalloc or
     * cudaFree inside a step waits for the whole device (and under DP's
     * single-process NCCL can hang it).  Held by the memory figures on any
     * GPU and, on the emulated one, by its count of allocation calls. */
    need_gpu();
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    int dims[] = {40, 300, 70, 10}, rows = 256;
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, dims, 4, ACT_GELU, err), DDP_OK, "%s", err);
    replica_t r;
    cr_assert_eq(replica_init(&r, be, &spec, rows, 1, err), DDP_OK, "%s", err);
    float *hp = malloc(spec.nparams * sizeof *hp), *hx = host_random((size_t)rows * dims[0], 7, -1, 1);
    float *hy = malloc((size_t)rows * sizeof *hy);
    cr_assert(hp && hy);
    model_init_params(&spec, 1, hp);
    for (int i = 0; i < rows; i++)
        hy[i] = (float)(i % dims[3]);
    check(be, backend_h2d(be, r.params, hp, spec.nparams * sizeof *hp), "h2d");
    check(be, backend_h2d(be, r.x, hx, (size_t)rows * dims[0] * sizeof *hx), "h2d");
    check(be, backend_h2d(be, r.y, hy, (size_t)rows * sizeof *hy), "h2d");
    check(be, backend_sync(be), "sync");
    long calls = emu_alloc_calls ? emu_alloc_calls() : 0;
    size_t in_use = backend_mem_in_use(be), peak = backend_mem_peak(be);
    for (int step = 0; step < 3; step++) {
        int n = step == 1 ? rows - 37 : rows; /* a short batch too */
        check(be, model_forward(&r, r.x, n), "forward");
        check(be, model_loss(&r, LOSS_CE, r.y, n, 1.0f / (float)n), "loss");
        check(be, model_backward(&r, r.x, n, r.dout, false, NULL, NULL), "backward");
    }
    check(be, backend_sync(be), "sync");
    cr_assert_eq(backend_mem_in_use(be), in_use, "a step allocated: %zu bytes in use, %zu after setup",
                 backend_mem_in_use(be), in_use);
    cr_assert_eq(backend_mem_peak(be), peak, "a step raised the peak from %zu to %zu bytes", peak,
                 backend_mem_peak(be));
    if (emu_alloc_calls)
        cr_assert_eq(emu_alloc_calls(), calls, "%ld cudaMalloc/cudaFree calls in three steps",
                     emu_alloc_calls() - calls);
    replica_free(&r);
    backend_destroy(be);
    free(hp);
    free(hx);
    free(hy);
}

Test(cuda_kernels, tf32_is_off_by_default_and_stays_within_tf32_when_on)
{
    /* fp32 by default: within summation-order rounding of the CPU.  --tf32
     * lets cuBLAS round the operands to a 10-bit mantissa on tensor cores,
     * which moves the product by about 1e-3 relative -- but it allows them,
     * it does not force them: for a small product cuBLAS may keep a plain
     * fp32 kernel.  So on a GPU only the bound is held (TF32's error, and
     * fp32 again once it is off); the emulated cuBLAS always rounds (unless
     * EMU_TF32_AS_FP32 plays the other choice), so there the mode must also
     * have reached the GEMM. */
    pair_t p = pair_open();
    cr_assert(backend_precision(p.gpu) == PREC_FP32, "TF32 must be off by default");
    int m = 64, n = 48, k = 256;
    float *ha = host_random((size_t)m * k, 201, -1, 1), *hb = host_random((size_t)k * n, 202, -1, 1);
    float *zero = calloc((size_t)m * n, sizeof(float));
    buf2_t A = both(&p, ha, (size_t)m * k), B = both(&p, hb, (size_t)k * n);
    buf2_t C = both(&p, zero, (size_t)m * n);
    check(p.cpu, backend_gemm(p.cpu, false, false, m, n, k, 1.0f, A.c, k, B.c, n, 0.0f, C.c, n), "gemm");
    check(p.gpu, backend_gemm(p.gpu, false, false, m, n, k, 1.0f, A.g, k, B.g, n, 0.0f, C.g, n), "gemm");
    assert_close(&p, C, (size_t)m * n, 1e-4, 1.0, "fp32 gemm");
    check(p.gpu, backend_set_precision(p.gpu, PREC_TF32), "set_precision tf32");
    cr_assert(backend_precision(p.gpu) == PREC_TF32);
    check(p.gpu, backend_gemm(p.gpu, false, false, m, n, k, 1.0f, A.g, k, B.g, n, 0.0f, C.g, n), "gemm");
    float *hc = download(p.cpu, C.c, (size_t)m * n), *hg = download(p.gpu, C.g, (size_t)m * n);
    double worst = 0.0;
    for (int i = 0; i < m * n; i++)
        worst = fmax(worst, fabs((double)hc[i] - hg[i]) / fmax(fabs((double)hc[i]), 1.0));
    /* TF32's bound: each product's operands carry 2^-11 relative error, over
     * k = 256 terms of |a b| <= 1 against |c| of about sqrt(k)/3 */
    cr_assert(worst < 1e-2, "TF32 moved the product by %.3g relative (TF32 keeps it under 1e-2)", worst);
    if (emu_alloc_calls && !getenv("EMU_TF32_AS_FP32"))
        cr_assert(worst > 1e-5, "the emulated cuBLAS rounds to TF32, yet the product moved by only %.3g", worst);
    free(hg);
    check(p.gpu, backend_set_precision(p.gpu, PREC_FP32), "set_precision fp32");
    check(p.gpu, backend_gemm(p.gpu, false, false, m, n, k, 1.0f, A.g, k, B.g, n, 0.0f, C.g, n), "gemm");
    assert_close(&p, C, (size_t)m * n, 1e-4, 1.0, "fp32 gemm after TF32");
    cr_assert_eq(backend_set_precision(p.cpu, PREC_TF32), DDP_ERR_INPUT, "the CPU has no TF32");
    free(hc);
    both_free(&p, A);
    both_free(&p, B);
    both_free(&p, C);
    free(ha);
    free(hb);
    free(zero);
    pair_close(&p);
}

Test(cuda_kernels, gemm_all_transposes_against_cpu)
{
    pair_t p = pair_open();
    for (int t = 0; t < 4; t++) {
        gemm_case(&p, t & 1, t & 2, 37, 53, 129, 1.0f, 0.0f);
        gemm_case(&p, t & 1, t & 2, 64, 17, 300, 0.7f, 0.3f);
    }
    gemm_case(&p, false, true, 5, 6, 0, 1.0f, 0.5f); /* empty product: C = beta*C */
    gemm_case(&p, false, false, 5, 6, 0, 1.0f, 0.0f);
    pair_close(&p);
}

// ---------------------------------------------------------------------------
// bias + activation, activation backward, bias gradient

static const act_t all_acts[] = {ACT_NONE, ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_GELU};

/* act(x) exactly (in double), and the most a float implementation may be
 * off: a few units of FLT_EPSILON per rounded operation, scaled by what each
 * operation's result is.  For GELU, 0.5 x (1 + erf(x/sqrt 2)): erff within
 * 2 ulp of erf (<= 2 eps, |erf| <= 1), the sum 1 + erf and the scaling of x
 * each half an ulp -- an absolute error of about 1.75 eps |x| whatever the
 * cancellation, plus 2 eps |result| for the final products; the bound below
 * allows twice that. */
#define EPS ((double)FLT_EPSILON)

static double act_ref(act_t act, double x)
{
    switch (act) {
    case ACT_RELU: return x > 0.0 ? x : 0.0;
    case ACT_TANH: return tanh(x);
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case ACT_NONE: break;
    }
    return x;
}

static double act_tol(act_t act, double x, double ref)
{
    switch (act) {
    case ACT_TANH: return 4.0 * EPS * fabs(ref) + FLT_MIN;
    case ACT_SIGMOID: return 6.0 * EPS * fabs(ref) + FLT_MIN;
    case ACT_GELU: return 4.0 * EPS * (fabs(x) + fabs(ref)) + FLT_MIN;
    default: return 0.0; /* a comparison and a copy: exact */
    }
}

/* d * act'(x) exactly, and its bound; a is the float act(x) both sides were
 * given (the tanh and sigmoid derivatives are computed from it). */
static double grad_ref(act_t act, double x, double a, double d)
{
    switch (act) {
    case ACT_RELU: return x > 0.0 ? d : 0.0;
    case ACT_TANH: return d * (1.0 - a * a);
    case ACT_SIGMOID: return d * (a * (1.0 - a));
    case ACT_GELU: {
        double cdf = 0.5 * (1.0 + erf(x / sqrt(2.0)));
        double pdf = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        return d * (cdf + x * pdf);
    }
    case ACT_NONE: break;
    }
    return d;
}

static double grad_tol(act_t act, double x, double a, double d, double ref)
{
    switch (act) {
    case ACT_TANH: /* a*a, 1 - a*a (cancels near |a| = 1), times d */
        return 2.0 * EPS * (fabs(d) * (a * a + fabs(1.0 - a * a)) + fabs(ref)) + FLT_MIN;
    case ACT_SIGMOID:
        return 2.0 * EPS * (fabs(d) * fabs(a) * (1.0 + fabs(1.0 - a)) + fabs(ref)) + FLT_MIN;
    case ACT_GELU: { /* cdf as in act_tol; x*pdf: expf of a rounded -x*x/2, times x */
        double xpdf = fabs(x) * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
        return 4.0 * EPS * (fabs(d) * (1.0 + xpdf * (2.0 + x * x)) + fabs(ref)) + FLT_MIN;
    }
    default:
        return 0.0;
    }
}

/* Each side's values within tol of the exact ones; with exact set, the two
 * sides equal bit for bit too.  ref/tol are filled per element. */
static void assert_vs_ref(pair_t *p, buf2_t b, size_t n, const double *ref, const double *tol,
                          bool exact, const char *what)
{
    float *v[2] = {download(p->cpu, b.c, n), download(p->gpu, b.g, n)};
    const char *side[2] = {"CPU", "GPU"};
    for (int k = 0; k < 2; k++) {
        double worst = 0.0;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            double err = fabs((double)v[k][i] - ref[i]);
            double r = tol[i] > 0.0 ? err / tol[i] : (err > 0.0 ? INFINITY : 0.0);
            if (isnan(v[k][i]) != isnan(ref[i]))
                r = INFINITY;
            if (r > worst) {
                worst = r;
                at = i;
            }
        }
        cr_assert(worst <= 1.0,
                  "%s: the %s is %.3g of its float bound from the exact value at [%zu]: %.9g vs "
                  "%.12g (bound %.3g)",
                  what, side[k], worst, at, n ? v[k][at] : 0.0, n ? ref[at] : 0.0,
                  n ? tol[at] : 0.0);
    }
    if (exact)
        cr_assert_arr_eq(v[0], v[1], n * sizeof(float), "%s: CPU and GPU differ in bits", what);
    free(v[0]);
    free(v[1]);
}

static void bias_act_case(pair_t *p, act_t act, int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    float *hz = host_random(n, 21, -4, 4), *hb = host_random((size_t)cols, 22, -1, 1);
    buf2_t z = both(p, hz, n), b = both(p, hb, (size_t)cols);
    buf2_t a = act == ACT_NONE ? z : both(p, hz, n);
    check(p->cpu, backend_bias_act_fwd(p->cpu, act, z.c, a.c, b.c, rows, cols), "bias_act_fwd");
    check(p->gpu, backend_bias_act_fwd(p->gpu, act, z.g, a.g, b.g, rows, cols), "bias_act_fwd");
    char what[96];
    snprintf(what, sizeof what, "bias_act_fwd %s %dx%d (z)", act_name(act), rows, cols);
    assert_close(p, z, n, 0.0, 1e-30, what); /* one float add: exact */
    double *ref = malloc(n * sizeof *ref), *tol = malloc(n * sizeof *tol);
    cr_assert(ref && tol);
    for (size_t i = 0; i < n; i++) {
        double x = (double)(hz[i] + hb[i % (size_t)cols]); /* the float sum both computed */
        ref[i] = act_ref(act, x);
        tol[i] = act_tol(act, x, ref[i]);
    }
    snprintf(what, sizeof what, "bias_act_fwd %s %dx%d (a)", act_name(act), rows, cols);
    assert_vs_ref(p, a, n, ref, tol, act == ACT_NONE || act == ACT_RELU, what);
    free(ref);
    free(tol);
    if (act != ACT_NONE)
        both_free(p, a);
    both_free(p, z);
    both_free(p, b);
    free(hz);
    free(hb);
}

Test(cuda_kernels, bias_act_fwd_every_activation)
{
    pair_t p = pair_open();
    for (size_t i = 0; i < sizeof all_acts / sizeof all_acts[0]; i++) {
        bias_act_case(&p, all_acts[i], 37, 300);  /* a partial column block */
        bias_act_case(&p, all_acts[i], 1500, 5); /* more rows than grid.y */
    }
    pair_close(&p);
}

Test(cuda_kernels, act_bwd_every_activation)
{
    pair_t p = pair_open();
    int rows = 129, cols = 77;
    size_t n = (size_t)rows * cols;
    float *hz = host_random(n, 31, -4, 4), *hd = host_random(n, 32, -1, 1);
    float *zero = calloc((size_t)cols, sizeof(float));
    double *ref = malloc(n * sizeof *ref), *tol = malloc(n * sizeof *tol);
    cr_assert(zero && ref && tol);
    for (size_t i = 0; i < 50; i++)
        hz[i * 7] = 0.0f; /* relu'(0) = 0 on both */
    for (size_t i = 0; i < sizeof all_acts / sizeof all_acts[0]; i++) {
        act_t act = all_acts[i];
        /* a = act(z) from the CPU, given to both, so only act_bwd is compared. */
        buf2_t z = both(&p, hz, n), b = both(&p, zero, (size_t)cols);
        float *ha = download(p.cpu, z.c, n);
        if (act != ACT_NONE) {
            float *tmp = backend_alloc(p.cpu, n * sizeof(float));
            check(p.cpu, backend_bias_act_fwd(p.cpu, act, z.c, tmp, b.c, rows, cols), "fwd");
            memcpy(ha, tmp, n * sizeof(float));
            backend_free(p.cpu, tmp);
        }
        buf2_t a = both(&p, ha, n), d = both(&p, hd, n);
        check(p.cpu, backend_act_bwd(p.cpu, act, z.c, a.c, d.c, n), "act_bwd");
        check(p.gpu, backend_act_bwd(p.gpu, act, z.g, a.g, d.g, n), "act_bwd");
        for (size_t j = 0; j < n; j++) {
            ref[j] = grad_ref(act, hz[j], ha[j], hd[j]);
            tol[j] = grad_tol(act, hz[j], ha[j], hd[j], ref[j]);
        }
        char what[64];
        snprintf(what, sizeof what, "act_bwd %s", act_name(act));
        assert_vs_ref(&p, d, n, ref, tol, act != ACT_GELU, what);
        both_free(&p, z);
        both_free(&p, b);
        both_free(&p, a);
        both_free(&p, d);
        free(ha);
    }
    free(ref);
    free(tol);
    free(hz);
    free(hd);
    free(zero);
    pair_close(&p);
}

Test(cuda_kernels, bias_grad_sums_columns)
{
    pair_t p = pair_open();
    /* one pass (3 rows) and two (rows split across blocks, then summed in
     * slice order), a partial column block, no rows */
    const int shapes[][2] = {{1000, 70}, {3, 257}, {256, 10}, {2048, 512}, {0, 9}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *hdz = host_random(n, 41, -1, 1), *hdb = host_random((size_t)cols, 42, -1, 1);
        for (int acc = 0; acc < 2; acc++) {
            buf2_t dz = both(&p, hdz, n), db = both(&p, hdb, (size_t)cols);
            check(p.cpu, backend_bias_grad(p.cpu, db.c, dz.c, rows, cols, acc), "bias_grad");
            check(p.gpu, backend_bias_grad(p.gpu, db.g, dz.g, rows, cols, acc), "bias_grad");
            char what[80];
            snprintf(what, sizeof what, "bias_grad %dx%d accumulate=%d", rows, cols, acc);
            /* Sums of up to 1000 terms in another order: the CPU's running sum
             * reaches ~20 and loses ~1e-6 per add, so up to ~1e-4 absolute. */
            assert_close(&p, db, (size_t)cols, 2e-4, 1.0, what);
            both_free(&p, dz);
            both_free(&p, db);
        }
        free(hdz);
        free(hdb);
    }
    pair_close(&p);
}

// ---------------------------------------------------------------------------
// losses

static void loss_case(pair_t *p, loss_t kind, int rows, int cols)
{
    size_t n = (size_t)rows * cols;
    size_t nt = kind == LOSS_CE ? (size_t)rows : n;
    float *ho = host_random(n, 51, -6, 6);
    float *ht = host_random(nt, 52, 0, 1);
    if (kind == LOSS_CE)
        for (size_t i = 0; i < nt; i++)
            ht[i] = (float)((i * 7) % (size_t)cols); /* every class id, the last included */
    else if (kind == LOSS_BCE)
        for (size_t i = 0; i < nt; i++)
            ht[i] = ht[i] < 0.5f ? 0.0f : 1.0f;
    buf2_t o = both(p, ho, n), t = both(p, ht, nt);
    float zero = 0.0f;
    buf2_t g = both(p, ho, n), s = both(p, &zero, 1);
    float scale = 1.0f / (float)rows;
    check(p->cpu, backend_loss(p->cpu, kind, o.c, t.c, rows, cols, scale, g.c, s.c), "loss");
    check(p->gpu, backend_loss(p->gpu, kind, o.g, t.g, rows, cols, scale, g.g, s.g), "loss");
    char what[80];
    snprintf(what, sizeof what, "loss %s %dx%d (gradient)", loss_name(kind), rows, cols);
    /* Scale floored at 1% of grad_scale: an ulp of sigmoid(x) in a gradient
     * sigmoid(x) - t that nearly cancels is not an error. */
    assert_close(p, g, n, 1e-5, 1e-2 * scale, what);
    snprintf(what, sizeof what, "loss %s %dx%d (sum)", loss_name(kind), rows, cols);
    assert_close(p, s, 1, 1e-5, 1e-6, what);
    both_free(p, o);
    both_free(p, t);
    both_free(p, g);
    both_free(p, s);
    free(ho);
    free(ht);
}

Test(cuda_kernels, losses_against_cpu)
{
    pair_t p = pair_open();
    loss_t kinds[] = {LOSS_MSE, LOSS_BCE, LOSS_CE};
    for (int k = 0; k < 3; k++) {
        loss_case(&p, kinds[k], 300, 7);
        loss_case(&p, kinds[k], 33, 1000); /* a row wider than the block */
        loss_case(&p, kinds[k], 1, 1);
    }
    pair_close(&p);
}

Test(cuda_kernels, loss_sum_is_deterministic)
{
    pair_t p = pair_open();
    backend_t *g = p.gpu;
    int rows = 2048, cols = 33;
    size_t n = (size_t)rows * cols;
    float *ho = host_random(n, 61, -3, 3), *ht = host_random(n, 62, -3, 3);
    float *o = upload(g, ho, n), *t = upload(g, ht, n);
    float *grad = backend_alloc(g, n * sizeof(float)), *s = backend_alloc(g, sizeof(float));
    float first = 0.0f;
    for (int rep = 0; rep < 3; rep++) {
        float v;
        check(g, backend_loss(g, LOSS_MSE, o, t, rows, cols, 1.0f, grad, s), "loss");
        check(g, backend_d2h(g, &v, s, sizeof v), "d2h");
        if (rep == 0)
            first = v;
        cr_assert(memcmp(&v, &first, sizeof v) == 0, "run %d: %.9g != %.9g", rep, v, first);
    }
    backend_free(g, o);
    backend_free(g, t);
    backend_free(g, grad);
    backend_free(g, s);
    free(ho);
    free(ht);
    pair_close(&p);
}

// ---------------------------------------------------------------------------
// optimizers, axpy, scale

Test(cuda_kernels, sgd_every_variant)
{
    pair_t p = pair_open();
    size_t n = 100003;
    const sgd_args_t variants[] = {
        {0.1f, 0.0f, 0.0f, 0.0f, false, false},   /* plain */
        {0.1f, 0.0f, 0.0f, 0.01f, false, false},  /* weight decay */
        {0.05f, 0.9f, 0.0f, 0.0f, false, false},  /* momentum */
        {0.05f, 0.9f, 0.1f, 0.001f, false, false}, /* dampening + decay */
        {0.05f, 0.9f, 0.0f, 0.01f, true, false},  /* nesterov */
    };
    float *hp = host_random(n, 71, -1, 1), *hb = host_random(n, 73, -1, 1);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        buf2_t prm = both(&p, hp, n), buf = both(&p, hb, n);
        for (int step = 0; step < 3; step++) {
            float *hg = host_random(n, 80 + step, -1, 1);
            buf2_t g = both(&p, hg, n);
            sgd_args_t a = variants[v];
            a.first_step = step == 0;
            check(p.cpu, backend_sgd(p.cpu, &a, prm.c, g.c, buf.c, n), "sgd");
            check(p.gpu, backend_sgd(p.gpu, &a, prm.g, g.g, buf.g, n), "sgd");
            both_free(&p, g);
            free(hg);
        }
        char what[48];
        snprintf(what, sizeof what, "sgd variant %zu (params)", v);
        assert_close(&p, prm, n, 1e-6, 1e-6, what); /* the same operations: equal bits expected */
        snprintf(what, sizeof what, "sgd variant %zu (momentum)", v);
        assert_close(&p, buf, n, 1e-6, 1e-6, what);
        both_free(&p, prm);
        both_free(&p, buf);
    }
    free(hp);
    free(hb);
    pair_close(&p);
}

Test(cuda_kernels, adam_and_adamw)
{
    pair_t p = pair_open();
    size_t n = 70001;
    float *hp = host_random(n, 91, -1, 1);
    float *zero = calloc(n, sizeof(float));
    for (int decoupled = 0; decoupled < 2; decoupled++)
        for (int wd = 0; wd < 2; wd++) {
            buf2_t prm = both(&p, hp, n), m = both(&p, zero, n), v = both(&p, zero, n);
            for (int step = 1; step <= 4; step++) {
                float *hg = host_random(n, 100 + step, -1, 1);
                buf2_t g = both(&p, hg, n);
                adam_args_t a = {1e-3f, 0.9f, 0.999f, 1e-8f, wd ? 0.01f : 0.0f, decoupled,
                                 1.0 - pow(0.9, step), 1.0 - pow(0.999, step)};
                check(p.cpu, backend_adam(p.cpu, &a, prm.c, g.c, m.c, v.c, n), "adam");
                check(p.gpu, backend_adam(p.gpu, &a, prm.g, g.g, m.g, v.g, n), "adam");
                both_free(&p, g);
                free(hg);
            }
            char what[64];
            snprintf(what, sizeof what, "%s wd=%d (params)", decoupled ? "adamw" : "adam", wd);
            assert_close(&p, prm, n, 1e-6, 1e-6, what);
            snprintf(what, sizeof what, "%s wd=%d (exp_avg)", decoupled ? "adamw" : "adam", wd);
            assert_close(&p, m, n, 1e-6, 1e-6, what);
            snprintf(what, sizeof what, "%s wd=%d (exp_avg_sq)", decoupled ? "adamw" : "adam", wd);
            assert_close(&p, v, n, 1e-6, 1e-9, what);
            both_free(&p, prm);
            both_free(&p, m);
            both_free(&p, v);
        }
    free(hp);
    free(zero);
    pair_close(&p);
}

Test(cuda_kernels, axpy_and_scale)
{
    pair_t p = pair_open();
    size_t sizes[] = {1, 255, 256, 257, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *hx = host_random(n, 111, -2, 2), *hy = host_random(n, 112, -2, 2);
        buf2_t x = both(&p, hx, n), y = both(&p, hy, n);
        check(p.cpu, backend_axpy(p.cpu, -0.37f, x.c, y.c, n), "axpy");
        check(p.gpu, backend_axpy(p.gpu, -0.37f, x.g, y.g, n), "axpy");
        check(p.cpu, backend_scale(p.cpu, 1.7f, x.c, n), "scale");
        check(p.gpu, backend_scale(p.gpu, 1.7f, x.g, n), "scale");
        assert_close(&p, y, n, 0.0, 1e-30, "axpy"); /* one multiply and one add: exact */
        assert_close(&p, x, n, 0.0, 1e-30, "scale");
        both_free(&p, x);
        both_free(&p, y);
        free(hx);
        free(hy);
    }
    pair_close(&p);
}

// ---------------------------------------------------------------------------
// the equivalence contract on CUDA

static void cpu_vs_gpu(const char *args)
{
    need_gpu();
    char a_cpu[512], a_gpu[512], err[ERR_LEN] = "";
    /* --mode single --gpus 0 on both: left to compare mode's defaults, the
     * CPU (one worker per core) and the GPUs (as many as are visible) would
     * deal the samples over different device counts. */
    snprintf(a_cpu, sizeof a_cpu, "--backend cpu --mode single --gpus 0 --quiet --steps 20 %s", args);
    snprintf(a_gpu, sizeof a_gpu, "--backend cuda --mode single --gpus 0 --quiet --steps 20 %s",
             args);
    run_result_t rc_, rg, rg2;
    cr_assert_eq(tu_run(a_cpu, &rc_, err), DDP_OK, "%s: %s", a_cpu, err);
    cr_assert_eq(tu_run(a_gpu, &rg, err), DDP_OK, "%s: %s", a_gpu, err);
    tu_assert_params_close(&rc_, &rg, 1e-4, args);
    cr_assert(fabs(rc_.final_loss - rg.final_loss) <= 1e-4 * fmax(1.0, fabs(rc_.final_loss)),
              "%s: final loss cpu %.8f gpu %.8f", args, rc_.final_loss, rg.final_loss);
    /* Deterministic kernels and cuBLAS: a second GPU run gives the same bits. */
    cr_assert_eq(tu_run(a_gpu, &rg2, err), DDP_OK, "%s: %s", a_gpu, err);
    cr_assert_eq(rg.checksum.bits, rg2.checksum.bits, "%s: two GPU runs differ", args);
    result_free(&rc_);
    result_free(&rg);
    result_free(&rg2);
}

Test(cuda_equivalence, relu_ce_adam)
{
    /* Explicit rather than a preset, so a preset's retuning cannot make it a
     * test of Adam's sign on noise-level gradients (a larger lr turns the
     * last-bit differences of two GEMM orders into lr-sized steps). */
    cpu_vs_gpu("--layers 32,128,128,10 --act relu --loss ce --dataset classes --optim adam "
               "--lr 0.001 --samples 2048 --batch 256");
}

Test(cuda_equivalence, mse_sgd_momentum_tanh)
{
    cpu_vs_gpu("--layers 24,96,64,5 --act tanh --loss mse --optim sgd --lr 0.05 --momentum 0.9 "
               "--nesterov --samples 1000 --batch 100");
}

Test(cuda_equivalence, bce_adamw_gelu_accum)
{
    cpu_vs_gpu("--layers 16,300,3 --act gelu --loss bce --optim adamw --lr 0.01 --samples 999 "
               "--batch 64 --accum 2");
}

Test(cuda_equivalence, sigmoid_sgd_weight_decay_uneven_batches)
{
    cpu_vs_gpu("--layers 40,50,50,4 --act sigmoid --loss ce --dataset classes --optim sgd --lr 0.5 "
               "--weight-decay 0.001 --samples 500 --batch 96");
}

// ---------------------------------------------------------------------------
// --precision bf16 on CUDA: against the CPU's reference arithmetic

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

Test(cuda_bf16, gemm_is_the_cpu_reference_and_not_fp32)
{
    /* Both devices round the operands to bf16 with the same function (the
     * CPU as it copies them, the GPU in kernels_bf16.cu before cublasGemmEx):
     * the products are exact in fp32, so the two differ only by summation
     * order, like fp32; and the result must be bf16's, not fp32's. */
    pair_t p = pair_open();
    check(p.cpu, backend_set_precision(p.cpu, PREC_BF16), "set_precision bf16");
    check(p.gpu, backend_set_precision(p.gpu, PREC_BF16), "set_precision bf16");
    const int m = 45, n = 38, k = 300, pad = 5;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        int lda = ac + pad, ldb = bc + pad;
        float *ha = host_random((size_t)ar * lda, 301 + t, -1, 1), *hb = host_random((size_t)br * ldb, 311 + t, -1, 1);
        float *zero = calloc((size_t)m * n, sizeof(float));
        buf2_t A = both(&p, ha, (size_t)ar * lda), B = both(&p, hb, (size_t)br * ldb);
        buf2_t C = both(&p, zero, (size_t)m * n);
        check(p.cpu, backend_gemm(p.cpu, ta, tb, m, n, k, 1.0f, A.c, lda, B.c, ldb, 0.0f, C.c, n), "gemm");
        check(p.gpu, backend_gemm(p.gpu, ta, tb, m, n, k, 1.0f, A.g, lda, B.g, ldb, 0.0f, C.g, n), "gemm");
        assert_close(&p, C, (size_t)m * n, 1e-5, 1.0, "bf16 gemm, GPU vs the CPU's reference");
        float *hg = download(p.gpu, C.g, (size_t)m * n);
        double worst = 0.0; /* against the exact product of the unrounded inputs */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int l = 0; l < k; l++)
                    s += (double)(ta ? ha[(size_t)l * lda + i] : ha[(size_t)i * lda + l]) *
                         (tb ? hb[(size_t)j * ldb + l] : hb[(size_t)l * ldb + j]);
                worst = fmax(worst, fabs(hg[(size_t)i * n + j] - s));
            }
        cr_assert(worst > 1e-3, "ta %d tb %d: the GPU's bf16 GEMM is within %.3g of fp32: not bf16", ta,
                  tb, worst);
        free(hg);
        free(zero);
        free(ha);
        free(hb);
        both_free(&p, A);
        both_free(&p, B);
        both_free(&p, C);
    }
    pair_close(&p);
}

/* One shape of the bf16 activation check below, every pointer off floats
 * past an aligned block (0: the 128-bit paths where cols % 4 == 0 and, with
 * a tail, for the backward; 1: the scalar ones). */
static void bf16_act_case(pair_t *p, int rows, int cols, int off)
{
    size_t n = (size_t)rows * cols, span = n + 4;
    for (int act = ACT_NONE; act <= ACT_GELU; act++) {
        float *hz = host_random(span, 401 + act, -3, 3), *hb = host_random(cols + 4, 402, -1, 1);
        float *hd = host_random(span, 403, -1, 1);
        buf2_t Z = both(p, hz, span), A = both(p, hz, span), Bv = both(p, hb, cols + 4);
        buf2_t D = both(p, hd, span);
        check(p->cpu, backend_bias_act_fwd(p->cpu, (act_t)act, Z.c + off, A.c + off, Bv.c + off,
                                           rows, cols), "fwd");
        check(p->gpu, backend_bias_act_fwd(p->gpu, (act_t)act, Z.g + off, A.g + off, Bv.g + off,
                                           rows, cols), "fwd");
        check(p->cpu, backend_act_bwd(p->cpu, (act_t)act, Z.c + off, A.c + off, D.c + off, n), "bwd");
        check(p->gpu, backend_act_bwd(p->gpu, (act_t)act, Z.g + off, A.g + off, D.g + off, n), "bwd");
        buf2_t out[] = {Z, A, D};
        for (int o = 0; o < 3; o++) {
            if (o == 1 && act == ACT_NONE)
                continue; /* no activation written */
            float *c = download(p->cpu, out[o].c, span), *g = download(p->gpu, out[o].g, span);
            for (size_t i = (size_t)off; i < n + (size_t)off; i++) {
                cr_assert((f32_bits(g[i]) & 0xffffu) == 0,
                          "%dx%d+%d act %d, output %d [%zu] = %a: not bf16", rows, cols, off, act, o,
                          i, g[i]);
                double tol = act <= ACT_RELU ? 0.0 : ldexp(fmax(fabs(c[i]), 1e-3), -7);
                cr_assert(fabs((double)c[i] - g[i]) <= tol,
                          "%dx%d+%d act %d, output %d [%zu]: cpu %a gpu %a", rows, cols, off, act,
                          o, i, c[i], g[i]);
            }
            free(c);
            free(g);
        }
        both_free(p, Z);
        both_free(p, A);
        both_free(p, Bv);
        both_free(p, D);
        free(hz);
        free(hb);
        free(hd);
    }
}

Test(cuda_bf16, activations_gradients_and_loss_round_as_on_the_cpu)
{
    /* Every value the GPU stores is a bf16 value; relu's (and no
     * activation's) are the CPU's bits (no library function), the others
     * within one bf16 step (a one-ulp difference of CUDA's and glibc's
     * expf/tanhf/erff can cross a bf16 rounding boundary); the loss is fp32
     * and the gradient bf16.  Aligned and not, lengths a multiple of 4 and
     * not (33 x 45: a tail of 1). */
    pair_t p = pair_open();
    check(p.cpu, backend_set_precision(p.cpu, PREC_BF16), "set_precision bf16");
    check(p.gpu, backend_set_precision(p.gpu, PREC_BF16), "set_precision bf16");
    const int rows = 70;
    for (int off = 0; off < 2; off++) {
        bf16_act_case(&p, rows, 300, off);
        bf16_act_case(&p, 33, 45, off);
    }
    /* the loss over bf16 outputs: fp32, its gradient bf16 */
    float *ho = host_random((size_t)rows * 10, 405, -4, 4), *ht = malloc(rows * sizeof(float));
    for (int i = 0; i < rows * 10; i++)
        ho[i] = bf16_round_f32(ho[i]);
    for (int i = 0; i < rows; i++)
        ht[i] = (float)(i % 10);
    buf2_t O = both(&p, ho, (size_t)rows * 10), T = both(&p, ht, rows), G = both(&p, ho, (size_t)rows * 10);
    buf2_t L = both(&p, ht, 1);
    check(p.cpu, backend_loss(p.cpu, LOSS_CE, O.c, T.c, rows, 10, 1.0f / rows, G.c, L.c), "loss");
    check(p.gpu, backend_loss(p.gpu, LOSS_CE, O.g, T.g, rows, 10, 1.0f / rows, G.g, L.g), "loss");
    assert_close(&p, L, 1, 1e-5, 1e-3, "the fp32 loss over bf16 outputs");
    float *g = download(p.gpu, G.g, (size_t)rows * 10);
    for (int i = 0; i < rows * 10; i++)
        cr_assert((f32_bits(g[i]) & 0xffffu) == 0, "loss gradient [%d] = %a: not bf16", i, g[i]);
    assert_close(&p, G, (size_t)rows * 10, ldexp(1, -7), 1e-3, "the bf16 loss gradient");
    free(g);
    free(ho);
    free(ht);
    both_free(&p, O);
    both_free(&p, T);
    both_free(&p, G);
    both_free(&p, L);
    pair_close(&p);
}

Test(cuda_bf16, a_step_allocates_nothing)
{
    /* The bf16 operands' room is reserved with the replica (the inputs, the
     * activations, their gradients and the weights), so a bf16 step makes
     * no cudaMalloc either. */
    need_gpu();
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    check(be, backend_set_precision(be, PREC_BF16), "set_precision bf16");
    /* a weight (600 x 500) larger than any activation (64 x 600): the
     * operands' room must come from the weights' shapes too */
    int dims[] = {40, 600, 500, 10}, rows = 64;
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, dims, 4, ACT_GELU, err), DDP_OK, "%s", err);
    replica_t r;
    cr_assert_eq(replica_init(&r, be, &spec, rows, 1, err), DDP_OK, "%s", err);
    float *hp = malloc(spec.nparams * sizeof *hp), *hy = malloc((size_t)rows * sizeof *hy);
    cr_assert(hp && hy);
    model_init_params(&spec, 1, hp);
    for (int i = 0; i < rows; i++)
        hy[i] = (float)(i % dims[3]);
    check(be, backend_h2d(be, r.params, hp, spec.nparams * sizeof *hp), "h2d");
    check(be, backend_h2d(be, r.y, hy, (size_t)rows * sizeof *hy), "h2d");
    check(be, backend_sync(be), "sync");
    long calls = emu_alloc_calls ? emu_alloc_calls() : 0;
    size_t in_use = backend_mem_in_use(be);
    for (int step = 0; step < 2; step++) {
        check(be, model_forward(&r, r.x, rows), "forward");
        check(be, model_loss(&r, LOSS_CE, r.y, rows, 1.0f / (float)rows), "loss");
        check(be, model_backward(&r, r.x, rows, r.dout, false, NULL, NULL), "backward");
    }
    check(be, backend_sync(be), "sync");
    cr_assert_eq(backend_mem_in_use(be), in_use, "a bf16 step allocated");
    if (emu_alloc_calls)
        cr_assert_eq(emu_alloc_calls(), calls, "%ld cudaMalloc/cudaFree calls in two bf16 steps",
                     emu_alloc_calls() - calls);
    replica_free(&r);
    backend_destroy(be);
    free(hp);
    free(hy);
}

/* The kernels and GEMMs the emulated GPU queued (tests/cuda_emu); absent,
 * and so NULL, on a real GPU. */
long emu_kernel_launches(void) __attribute__((weak));

/* One eager step (forward, loss, backward) of a GELU MLP, or of one without
 * activations, at precision prec: the kernels the backend counted must be
 * the kernels queued (bf16's two operand conversions per GEMM included). */
static void launch_count_case(precision_t prec, act_t act)
{
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    check(be, backend_set_precision(be, prec), "set_precision");
    int dims[] = {12, 48, 48, 4}, rows = 16;
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, dims, 4, act, err), DDP_OK, "%s", err);
    replica_t r;
    cr_assert_eq(replica_init(&r, be, &spec, rows, 1, err), DDP_OK, "%s", err);
    float *hp = malloc(spec.nparams * sizeof *hp), *hy = malloc((size_t)rows * sizeof *hy);
    cr_assert(hp && hy);
    model_init_params(&spec, 1, hp);
    for (int i = 0; i < rows; i++)
        hy[i] = (float)(i % dims[3]);
    check(be, backend_h2d(be, r.params, hp, spec.nparams * sizeof *hp), "h2d");
    check(be, backend_h2d(be, r.y, hy, (size_t)rows * sizeof *hy), "h2d");
    check(be, backend_sync(be), "sync");
    long k0 = backend_launches(be, LAUNCH_KERNEL), q0 = emu_kernel_launches();
    check(be, model_forward(&r, r.x, rows), "forward");
    check(be, model_loss(&r, LOSS_CE, r.y, rows, 1.0f / (float)rows), "loss");
    check(be, model_backward(&r, r.x, rows, r.dout, false, NULL, NULL), "backward");
    check(be, backend_sync(be), "sync");
    long counted = backend_launches(be, LAUNCH_KERNEL) - k0, queued = emu_kernel_launches() - q0;
    cr_assert_eq(counted, queued, "precision %d, act %d: %ld kernels counted, %ld queued", (int)prec,
                 (int)act, counted, queued);
    /* 3 layers: 3 forward and 5 backward GEMMs (the first layer's input
     * needs no gradient), each with two conversions under bf16 */
    if (prec == PREC_BF16)
        cr_assert_geq(counted, 3 * 8, "bf16: %ld kernels", counted);
    replica_free(&r);
    backend_destroy(be);
    free(hp);
    free(hy);
}

Test(cuda_backend, launch_counts_are_the_kernels_queued)
{
    /* launches_per_step's kernels, counted in the backend, against what the
     * emulated GPU queued: every GEMM (--precision bf16: with its two
     * conversions to bf16), every kernel, nothing counted that was not
     * launched (the activation backward with no activation in fp32). */
    need_gpu();
    if (!emu_kernel_launches)
        cr_skip_test("a real GPU: the emulator's count of queued kernels is not there");
    launch_count_case(PREC_FP32, ACT_GELU);
    launch_count_case(PREC_BF16, ACT_GELU);
    launch_count_case(PREC_FP32, ACT_NONE);
    launch_count_case(PREC_BF16, ACT_NONE);
}

Test(cuda_equivalence, bf16_single_against_the_cpu_reference)
{
    /* The whole bf16 step on the GPU against the CPU's: the relative L2
     * distance of the final parameters within the bf16 row's tolerance
     * (1e-3, docs/gpu.md), and bf16 many times further from fp32. */
    need_gpu();
    const char *base = "--mode single --gpus 0 --quiet --layers 64,128,128,10 --act gelu --loss ce "
                       "--optim adam --lr 0.003 --dataset classes --samples 2048 --batch 256 --steps 12";
    char line[512], err[ERR_LEN];
    run_result_t c, g, f;
    snprintf(line, sizeof line, "--backend cpu %s --precision bf16", base);
    cr_assert_eq(tu_run(line, &c, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "--backend cuda %s --precision bf16", base);
    cr_assert_eq(tu_run(line, &g, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "--backend cpu %s --precision fp32", base);
    cr_assert_eq(tu_run(line, &f, err), DDP_OK, "%s", err);
    double num = 0, den = 0, numf = 0;
    for (size_t i = 0; i < c.nparams; i++) {
        num += ((double)c.params[i] - g.params[i]) * ((double)c.params[i] - g.params[i]);
        numf += ((double)c.params[i] - f.params[i]) * ((double)c.params[i] - f.params[i]);
        den += (double)c.params[i] * c.params[i];
    }
    double d = sqrt(num / den), df = sqrt(numf / den);
    cr_log_info("bf16 GPU vs CPU: %.3g relative L2 (bf16 vs fp32 on the CPU: %.3g)", d, df);
    cr_assert(d <= 1e-3, "bf16 on the GPU ends %.3g from the CPU's bf16 (tolerance 1e-3)", d);
    cr_assert(df > 3e-3, "bf16 ends only %.3g from fp32: the test could not see a GPU that ran fp32", df);
    result_free(&c);
    result_free(&g);
    result_free(&f);
}

/* The compression hooks' casts: the kernel's bits are base/half.h's (the
 * CPU backend's), both ways, over values that round, overflow and underflow. */
Test(cuda_kernels, cast16_matches_the_cpu_bit_for_bit)
{
    pair_t p = pair_open();
    size_t n = 4099;
    float *h = host_random(n, 11, -1.0f, 1.0f);
    for (size_t i = 0; i < n; i++)
        h[i] = ldexpf(h[i], (int)(i % 60) - 40); /* 2^-40 .. 2^19: subnormals, overflow */
    float *d = upload(p.gpu, h, n);
    uint16_t *d16 = backend_alloc(p.gpu, n * sizeof(uint16_t));
    uint16_t *h16 = malloc(n * sizeof(uint16_t));
    cr_assert(d16 && h16);
    for (int t = DTYPE_F16; t <= DTYPE_BF16; t++) {
        check(p.gpu, backend_cast16(p.gpu, (dtype_t)t, true, d, d16, n), "cast16 to");
        check(p.gpu, backend_d2h(p.gpu, h16, d16, n * sizeof(uint16_t)), "d2h");
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(h16[i], dtype16_from_f32((dtype_t)t, h[i]), "type %d element %zu", t, i);
        check(p.gpu, backend_cast16(p.gpu, (dtype_t)t, false, d, d16, n), "cast16 from");
        float *back = download(p.gpu, d, n);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(half_f32_bits(back[i]), half_f32_bits(dtype16_to_f32((dtype_t)t, h16[i])),
                         "type %d element %zu", t, i);
        free(back);
        check(p.gpu, backend_h2d(p.gpu, d, h, n * sizeof(float)), "h2d");
    }
    backend_free(p.gpu, d16);
    backend_free(p.gpu, d);
    free(h16);
    free(h);
    pair_close(&p);
}

Test(cuda_backend, a_graph_replays_its_step_and_refuses_other_work)
{
    /* backend_graph_begin/end: captured once, then one launch per replay
     * that queues nothing else; a replay that would queue other work, and a
     * host wait or an allocation inside a graph, are errors. */
    need_gpu();
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    cr_assert(backend_graphs_supported(be));
    float h[4] = {1, 2, 3, 4}, back[4];
    float *x = upload(be, h, 4);
    long k0 = backend_launches(be, LAUNCH_KERNEL), g0 = backend_launches(be, LAUNCH_GRAPH);
    for (int i = 0; i < 3; i++) {
        check(be, backend_graph_begin(be, 0), "graph begin");
        check(be, backend_scale(be, 2.0f, x, 4), "scale in a graph");
        check(be, backend_graph_end(be, 0, true), "graph end");
        cr_assert(backend_graph_ready(be, 0));
    }
    check(be, backend_d2h(be, back, x, sizeof back), "d2h");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(back[i], h[i] * 8.0f, "element %d: %g after three launches", i, back[i]);
    cr_assert_eq(backend_launches(be, LAUNCH_GRAPH) - g0, 3);
    cr_assert_eq(backend_launches(be, LAUNCH_KERNEL) - k0, 0, "work inside graphs counted as kernels");
    /* other work under the same key: refused, nothing launched */
    check(be, backend_graph_begin(be, 0), "graph begin");
    check(be, backend_scale(be, 3.0f, x, 4), "scale in a graph");
    /* the line a strategy makes of it names the device once (its place) */
    char line[ERR_LEN];
    cr_assert_neq(backend_check(be, backend_graph_end(be, 0, true), "device 0", line), DDP_OK,
                  "a replay of other work was launched");
    cr_assert_str_eq(line, "device 0: a step replayed by CUDA graph 0 queued other work "
                           "(1 operations) than the graph captured (1 operations)");
    /* a host wait and an allocation inside a capture */
    check(be, backend_graph_begin(be, 1), "graph begin");
    cr_assert_neq(backend_check(be, backend_sync(be), "device 0", line), DDP_OK);
    cr_assert_str_eq(line, "device 0: a host synchronisation inside a CUDA graph");
    cr_assert_null(backend_alloc(be, 64));
    check(be, backend_graph_end(be, 1, false), "dropping a capture");
    cr_assert(!backend_graph_ready(be, 1));
    check(be, backend_d2h(be, back, x, sizeof back), "d2h");
    cr_assert_eq(back[0], h[0] * 8.0f);
    backend_free(be, x);
    backend_destroy(be);
}

Test(cuda_backend, a_gemm_is_captured_with_the_handles_own_workspace)
{
    /* cuBLAS given no workspace takes one with cudaMallocAsync, which a
     * capture would make allocation nodes of the graph (the emulated cuBLAS
     * refuses that GEMM): the backend sets its handle's own at creation, so
     * a step's GEMMs are captured and replayed like its kernels. */
    pair_t p = pair_open();
    int m = 5, n = 3, k = 4;
    float *ha = host_random((size_t)m * k, 11, -1, 1), *hb = host_random((size_t)k * n, 12, -1, 1);
    float want[15], got[15];
    float *ca = upload(p.cpu, ha, (size_t)m * k), *cb = upload(p.cpu, hb, (size_t)k * n);
    float *cc = backend_alloc(p.cpu, sizeof want);
    check(p.cpu, backend_gemm(p.cpu, false, false, m, n, k, 1.0f, ca, k, cb, n, 0.0f, cc, n), "cpu gemm");
    check(p.cpu, backend_d2h(p.cpu, want, cc, sizeof want), "d2h");
    backend_t *be = p.gpu;
    float *a = upload(be, ha, (size_t)m * k), *b = upload(be, hb, (size_t)k * n);
    float *c = backend_alloc(be, sizeof got);
    long g0 = backend_launches(be, LAUNCH_GRAPH);
    for (int i = 0; i < 2; i++) { /* captured, then replayed */
        check(be, backend_memset0(be, c, sizeof got), "memset0");
        check(be, backend_graph_begin(be, 0), "graph begin");
        check(be, backend_gemm(be, false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n), "gemm in a graph");
        check(be, backend_graph_end(be, 0, true), "graph end");
        check(be, backend_d2h(be, got, c, sizeof got), "d2h");
        for (int j = 0; j < m * n; j++)
            cr_assert_float_eq(got[j], want[j], 1e-5f, "launch %d, element %d: %g, not %g", i, j,
                               (double)got[j], (double)want[j]);
    }
    cr_assert_eq(backend_launches(be, LAUNCH_GRAPH) - g0, 2);
    backend_free(be, a);
    backend_free(be, b);
    backend_free(be, c);
    backend_free(p.cpu, ca);
    backend_free(p.cpu, cb);
    backend_free(p.cpu, cc);
    free(ha);
    free(hb);
    pair_close(&p);
}

/* One step of a graph led by lead and followed by mem (DP's shape): the
 * member doubles x after the fork and joins back; bad, when not NULL, is an
 * event the member then tries to wait for (refused: recorded outside the
 * step).  The leader launches, the member only keeps or checks its part. */
static void two_device_step(backend_t *lead, backend_t *mem, int key, float *x,
                            backend_event_t *fork, backend_event_t *join, backend_event_t *bad)
{
    check(lead, backend_graph_begin(lead, key), "leader's begin");
    check(lead, backend_event_record(lead, fork), "fork");
    check(mem, backend_graph_follow(mem, key, lead, fork), "follow");
    check(mem, backend_scale(mem, 2.0f, x, 4), "the member's work");
    check(mem, backend_event_record(mem, join), "join");
    if (bad) {
        cr_assert_neq(backend_stream_wait(mem, bad), DDP_OK,
                      "a wait inside a graph for a record made before its step was allowed");
        char line[ERR_LEN];
        backend_check(mem, DDP_ERR_RUNTIME, "device 1", line);
        cr_assert_str_eq(line, "device 1: a wait inside a CUDA graph for an event of device 0 "
                               "recorded outside the graph's step");
    }
    check(lead, backend_stream_wait(lead, join), "the leader waits for the join");
    check(lead, backend_graph_end(lead, key, true), "leader's end");
    check(mem, backend_graph_end(mem, key, true), "member's end");
}

Test(cuda_backend, a_graph_over_two_devices_follows_its_leader)
{
    /* backend_graph_follow: the member's work is captured into the leader's
     * graph (its stream joined by the fork, joined back by the leader's
     * wait) and replayed by the leader's one launch, the member queuing
     * nothing; inside the step a wait is only for the step's own records,
     * at capture and at replay; a device that holds no graph cannot follow
     * a replay. */
    need_gpu();
    char err[ERR_LEN];
    backend_t *lead, *mem, *late;
    cr_assert_eq(backend_cuda_create(&lead, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(backend_cuda_create(&mem, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(backend_cuda_create(&late, 0, err), DDP_OK, "%s", err);
    float h[4] = {1, 2, 3, 4}, back[4];
    float *x = upload(mem, h, 4);
    backend_event_t *fork = backend_event_new(lead, false), *join = backend_event_new(mem, false);
    backend_event_t *before = backend_event_new(lead, false);
    cr_assert(fork && join && before);
    check(lead, backend_event_record(lead, before), "an eager record");
    long mk = backend_launches(mem, LAUNCH_KERNEL), lg = backend_launches(lead, LAUNCH_GRAPH);
    two_device_step(lead, mem, 0, x, fork, join, NULL);   /* captured */
    two_device_step(lead, mem, 0, x, fork, join, before); /* replayed */
    cr_assert(backend_graph_ready(mem, 0) && backend_graph_ready(lead, 0));
    check(lead, backend_sync(lead), "sync the leader (the graph runs from its stream)");
    check(mem, backend_d2h(mem, back, x, sizeof back), "d2h");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(back[i], h[i] * 4.0f, "element %d: %g after two launches", i, back[i]);
    cr_assert_eq(backend_launches(lead, LAUNCH_GRAPH) - lg, 2);
    cr_assert_eq(backend_launches(mem, LAUNCH_KERNEL) - mk, 0, "the member queued its work itself");
    /* a device that never captured key 0 cannot follow its replay */
    check(lead, backend_graph_begin(lead, 0), "leader's begin");
    check(lead, backend_event_record(lead, fork), "fork");
    char line[ERR_LEN];
    cr_assert_neq(backend_check(late, backend_graph_follow(late, 0, lead, fork), "device 2", line),
                  DDP_OK);
    cr_assert_str_eq(line, "device 2: this device does not hold graph 0 while device 0 replays it");
    check(lead, backend_graph_end(lead, 0, false), "leader's end, launching nothing");
    backend_event_free(lead, fork);
    backend_event_free(lead, before);
    backend_event_free(mem, join);
    backend_free(mem, x);
    backend_destroy(late);
    backend_destroy(mem);
    backend_destroy(lead);
}

#ifdef DDPBENCH_CUDA_LINKED /* the backend's own functions: linked in, not dlopened */
#include "common/device/backend_cuda.h"

Test(cuda_backend, cublas_workspace_is_counted)
{
    /* The handle's workspace is device memory the run holds from creation:
     * in the memory figures as workspace, PyTorch's size for the arch. */
    need_gpu();
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    struct cudaDeviceProp prop;
    cr_assert_eq(cudaGetDeviceProperties(&prop, backend_cuda_device(be)), cudaSuccess);
    size_t ws = backend_cuda_blas_workspace_bytes(prop.major);
    cr_assert_eq(backend_mem_in_use(be), ws, "%zu bytes in use at creation, not the %zu of the workspace",
                 backend_mem_in_use(be), ws);
    size_t split[MEM_KINDS];
    backend_mem_peak_split(be, split);
    cr_assert_eq(split[MEM_WORKSPACE], ws, "the workspace counted as %zu bytes of workspace",
                 split[MEM_WORKSPACE]);
    cr_assert_eq(backend_cuda_blas_workspace_bytes(8), 8519680);   /* ":4096:2:16:8" */
    cr_assert_eq(backend_cuda_blas_workspace_bytes(9), 33554432);  /* Hopper: 32 MiB */
    cr_assert_eq(backend_cuda_blas_workspace_bytes(12), 33554432); /* Blackwell */
    backend_destroy(be);
}

Test(cuda_backend, a_member_moves_its_clock_anchor_as_it_follows)
{
    /* A member's timed events inside the graph are recorded by the leader's
     * launch, never by its own thread, so its clock's anchor moves only
     * because following a replay records one (cuda_graph_follow); else its
     * times are elapsed in float milliseconds from an ever older anchor
     * (after an hour, float keeps about a quarter of a millisecond).  The
     * anchor must move past a pause that precedes the replays. */
    need_gpu();
    char err[ERR_LEN];
    backend_t *lead, *mem;
    cr_assert_eq(backend_cuda_create(&lead, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(backend_cuda_create(&mem, 0, err), DDP_OK, "%s", err);
    float h[4] = {1, 2, 3, 4};
    float *x = upload(mem, h, 4);
    backend_event_t *fork = backend_event_new(lead, false), *join = backend_event_new(mem, false);
    backend_event_t *mark = backend_event_new(mem, true); /* a member's phase marker */
    cr_assert(fork && join && mark);
    double t = 0, before = 0;
    for (int step = 0; step < 4; step++) { /* captured, then replayed 3 times */
        if (step == 1) {
            before = backend_cuda_anchor_s(mem);
            usleep(50000); /* the replays come at least 50 ms after the anchor */
        }
        check(lead, backend_graph_begin(lead, 0), "leader's begin");
        check(lead, backend_event_record(lead, fork), "fork");
        check(mem, backend_graph_follow(mem, 0, lead, fork), "follow");
        check(mem, backend_scale(mem, 2.0f, x, 4), "the member's work");
        check(mem, backend_event_record(mem, mark), "the member's marker");
        check(mem, backend_event_record(mem, join), "join");
        check(lead, backend_stream_wait(lead, join), "the leader waits for the join");
        check(lead, backend_graph_end(lead, 0, true), "leader's end");
        check(mem, backend_graph_end(mem, 0, true), "member's end");
        check(lead, backend_sync(lead), "sync the leader (the graph runs from its stream)");
        /* and the member: the anchor it recorded as it followed is taken only
         * once done, and its stream's thread may lag behind on a loaded box */
        check(mem, backend_sync(mem), "sync the member");
        check(mem, backend_event_time(mem, mark, &t), "the marker's time");
    }
    double moved = backend_cuda_anchor_s(mem) - before;
    cr_assert_geq(moved, 0.05, "the member's anchor moved %.6f s over replays 50 ms or more after it",
                  moved);
    /* The last replay's marker came after the pause, and its time says so.
     * (Not "after the new anchor": the member's stream records that anchor on
     * its own, beside the leader's launch, and any point of the device's
     * clock serves -- on a loaded machine the emulator's stream thread
     * recorded it after the replay's marker once.) */
    cr_assert_geq(t, before + 0.05, "the last replay's marker at %.6f s, before the pause ended (%.6f s)",
                  t, before + 0.05);
    backend_event_free(lead, fork);
    backend_event_free(mem, join);
    backend_event_free(mem, mark);
    backend_free(mem, x);
    backend_destroy(mem);
    backend_destroy(lead);
}
#endif

/* Run every vectorised kernel on data at offset off (floats) from an aligned
 * block: off 0 takes the 128-bit path, off 1 the scalar one. */
/* src's first span - off floats, placed off floats into a new device block */
static float *upload_at(backend_t *be, const float *src, size_t span, int off, bool positive)
{
    float *t = calloc(span, sizeof(float));
    cr_assert_not_null(t);
    for (size_t k = 0; k + (size_t)off < span; k++)
        t[k + (size_t)off] = positive ? fabsf(src[k]) : src[k];
    float *d = upload(be, t, span);
    free(t);
    return d;
}

static void vec_case(backend_t *be, int off, const float *h, size_t n, int rows, int cols,
                     float *out)
{
    /* (the precision is be's: fp32 or bf16's roundings) */
    size_t span = n + 8;
    float *p = upload_at(be, h, span, off, false), *g = upload_at(be, h + span, span, off, false);
    float *m = upload_at(be, h + 1, span, off, false), *v = upload_at(be, h + 2, span, off, true);
    float *z = upload_at(be, h + 3, span, off, false), *a = upload_at(be, h + 4, span, off, false);
    float *b = upload_at(be, h + 5, span, off, false);
    sgd_args_t sa = {0.01f, 0.9f, 0.1f, 0.001f, false, false};
    adam_args_t aa = {0.001f, 0.9f, 0.999f, 1e-8f, 0.01f, true, 0.19, 0.002};
    check(be, backend_sgd(be, &sa, p + off, g + off, m + off, n), "sgd");
    check(be, backend_adam(be, &aa, p + off, g + off, m + off, v + off, n), "adam");
    check(be, backend_axpy(be, 0.5f, g + off, p + off, n), "axpy");
    check(be, backend_scale(be, 1.5f, p + off, n), "scale");
    for (int act = ACT_NONE; act <= ACT_GELU; act++)
        check(be, backend_act_bwd(be, (act_t)act, z + off, a + off, p + off, n), "act_bwd");
    check(be, backend_bias_act_fwd(be, ACT_GELU, z + off, a + off, b + off, rows, cols), "bias_act");
    check(be, backend_bias_act_fwd(be, ACT_NONE, a + off, a + off, b + off, rows, cols),
          "bias_act none");
    /* two slices (then their sums), accumulating; then one slice, not */
    check(be, backend_bias_grad(be, b + off, a + off, rows, cols, true), "bias_grad");
    check(be, backend_bias_grad(be, b + off, a + off, 9, cols, true), "bias_grad one slice");
    check(be, backend_bias_grad(be, g + off, a + off, rows, cols, false), "bias_grad");
    check(be, backend_bias_grad(be, b + off, g + off, 5, cols, false), "bias_grad one slice");
    float *o = download(be, p, span), *oa = download(be, a, span), *ob = download(be, b, span);
    float *og = download(be, g, span);
    memcpy(out, o + off, n * sizeof(float));
    memcpy(out + n, oa + off, (size_t)rows * cols * sizeof(float));
    memcpy(out + n + (size_t)rows * cols, ob + off, (size_t)cols * sizeof(float));
    memcpy(out + n + (size_t)rows * cols + cols, og + off, (size_t)cols * sizeof(float));
    free(og);
    free(o);
    free(oa);
    free(ob);
    float *all[] = {p, g, m, v, z, a, b};
    for (int k = 0; k < 7; k++)
        backend_free(be, all[k]);
}

Test(cuda_kernels, vectorised_paths_give_the_scalar_paths_bits)
{
    /* 128-bit loads and stores where every pointer is 16-byte aligned
     * (offset 0), one float at a time where not (offset 1): the same bits,
     * with a tail of n % 4 elements, on the optimizers, axpy, scale, bias +
     * activation, every activation's backward and both passes of the bias
     * gradient, in fp32 and under --precision bf16's roundings. */
    need_gpu();
    char err[ERR_LEN];
    for (int prec = 0; prec < 2; prec++) {
        backend_t *be;
        cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
        if (prec)
            check(be, backend_set_precision(be, PREC_BF16), "set_precision bf16");
        int rows = 37, cols = 28; /* cols % 4 == 0; rows * cols + tail = n */
        size_t n = (size_t)rows * cols + 3;
        cr_assert_eq(backend_reserve(be, rows, cols), DDP_OK);
        float *h = host_random(2 * (n + 8), 11, -2, 2);
        size_t outn = n + (size_t)rows * cols + (size_t)cols + 8;
        float *r0 = calloc(outn + n + 8, sizeof(float)), *r1 = calloc(outn + n + 8, sizeof(float));
        cr_assert(r0 && r1);
        vec_case(be, 0, h, n, rows, cols, r0);
        vec_case(be, 1, h, n, rows, cols, r1);
        size_t cmp = n + (size_t)rows * cols + 2 * (size_t)cols;
        for (size_t i = 0; i < cmp; i++)
            cr_assert_eq(memcmp(&r0[i], &r1[i], sizeof(float)), 0,
                         "%s element %zu: %.9g vectorised, %.9g scalar", prec ? "bf16" : "fp32", i,
                         r0[i], r1[i]);
        free(r0);
        free(r1);
        free(h);
        backend_destroy(be);
    }
}
