/* common/device/backend_cpu.c: the CPU compute backend, the reference the CUDA backend is
 * held to.  GEMMs go to gemm_small.c's kernel when tiny (AVX2/AVX-512), else OpenBLAS;
 * the rest are plain loops gcc vectorises.  Device memory is host memory and every
 * operation completes before it returns: no sync, events are host times, nothing waits.
 * impl: the room held for OpenBLAS's buffer (blas_space.h) and bf16's rounded inputs. */
#include <pthread.h>
#include <stdatomic.h>
#include <cblas.h>
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base/clock.h"
#include <sys/mman.h>
#include <sys/resource.h>

#include "common/device/act_math.h"
#include "common/device/backend_impl.h"
#include "common/base/half.h"
#include "common/base/procfile.h"
#include "common/device/blas_space.h"
#include "common/device/gemm_small.h"

/* Declared by OpenBLAS's cblas.h; repeated so the intent is visible. */
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);
char *openblas_get_corename(void);

#define CPU_ALIGN 64
/* A block of HUGE_MIN bytes or more (a weight matrix, its gradient and
 * optimizer state) is aligned to a 2 MiB page and asked for huge pages:
 * OpenBLAS packs a weight matrix across its rows before each GEMM, and in
 * 4 KiB pages mlp-medium's 33 MB of weights overflow the TLB (Zen 4's
 * covers 12 MB).  Where the kernel's THP setting is "madvise" (Debian's), the
 * ask decides: the work of a step at 128 rows fell by 3.9% (A/B gate, 12
 * rounds: 0.961 [0.946..0.987]), at 256 by 1.1% (0.989 [0.979..1.012]). */
#define HUGE_PAGE (2u << 20)
#define HUGE_MIN (4u << 20)

/* Why a lock of our own: OpenBLAS (Debian's pthread build) runs a 1-thread GEMM in the
 * caller with buffers from a pool under a plain mutex, which sleeps at once; DP's devices
 * leave a barrier together, so on a small model nearly every GEMM met the other's and slept
 * (seed-size p50 step 10 us).  Where the small kernel does not run, while more than one CPU
 * device lives, a GEMM of SMALL_GEMM multiply-adds or fewer (about a microsecond) first
 * takes gemm_lock, which spins before it sleeps (glibc's adaptive mutex). */
#define SMALL_GEMM 16384
static pthread_mutex_t gemm_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static _Atomic int g_devices; /* CPU devices alive in this process */

/* impl: OpenBLAS's room, the tiny GEMM's path and its scratch, and the
 * scratch of --precision bf16's GEMMs (the two inputs rounded to bf16, kept
 * as fp32 values: sgemm then multiplies them exactly, an 8-bit by 8-bit
 * significand product fits fp32's 24, and sums in fp32, as a bf16 tensor
 * core does).  That one grows to the largest GEMM and stays: a step
 * allocates nothing after the first. */
typedef struct {
    blas_space_t room;
    float *in[2];
    size_t cap[2]; /* floats */
    gemm_small_isa_t small;             /* the tiny GEMM's path (NONE: OpenBLAS only) */
    int threads;                        /* its BLAS threads (its cores, for the peak) */
    float scratch[GEMM_SMALL_SCRATCH];  /* its tile of B^T */
} cpu_impl_t;

/* The elementwise loops are memory- or libm-bound and run on every step; each
 * is compiled for baseline x86-64, AVX2 and AVX-512 and the loader picks the
 * one this CPU runs (an ifunc).  -std=c11 keeps FMA contraction off, so the
 * clones round +, * and / identically.  Not under ThreadSanitizer: its
 * runtime is not up yet when the loader runs the clones' ifunc resolvers. */
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CPU_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
/* glibc's libmvec (linked through libm) has vector expf/erff/tanhf; declared
 * simd here, and with -fno-math-errno, gcc vectorises the activation loops
 * (a GELU pass is ~12x faster than calling erff element by element). */
__attribute__((simd("notinbranch"))) float expf(float);
__attribute__((simd("notinbranch"))) float erff(float);
__attribute__((simd("notinbranch"))) float tanhf(float);
#else
#define CPU_CLONES
#endif

// ---------------------------------------------------------------------------
// memory

/* Each block carries its size and kind in a 64-byte header so free() can
 * account it. */
static void *cpu_alloc(backend_t *be, size_t bytes, mem_kind_t kind)
{
    void *p = NULL;
    bool huge = bytes >= HUGE_MIN;
    if (bytes > SIZE_MAX - CPU_ALIGN ||
        posix_memalign(&p, huge ? HUGE_PAGE : CPU_ALIGN, bytes + CPU_ALIGN) != 0)
        return NULL;
    if (huge)
        madvise(p, bytes + CPU_ALIGN, MADV_HUGEPAGE);
    memset(p, 0, bytes + CPU_ALIGN);
    ((size_t *)p)[0] = bytes;
    ((size_t *)p)[1] = (size_t)kind;
    backend_account(be, (long long)bytes, kind);
    return (char *)p + CPU_ALIGN;
}

static void cpu_free(backend_t *be, void *p)
{
    char *base = (char *)p - CPU_ALIGN;
    backend_account(be, -(long long)((size_t *)base)[0], (mem_kind_t)((size_t *)base)[1]);
    free(base);
}

static void *cpu_alloc_host(backend_t *be, size_t bytes)
{
    (void)be;
    void *p = NULL;
    if (posix_memalign(&p, CPU_ALIGN, bytes ? bytes : 1) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

static void cpu_free_host(backend_t *be, void *p)
{
    (void)be;
    free(p);
}

static int cpu_copy(backend_t *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes && dst != src)
        memmove(dst, src, bytes);
    return DDP_OK;
}

static int cpu_peer_copy(backend_t *be, void *dst, backend_t *src_be, const void *src,
                         size_t bytes)
{
    (void)src_be;
    return cpu_copy(be, dst, src, bytes);
}

static int cpu_memset0(backend_t *be, void *dst, size_t bytes)
{
    (void)be;
    if (bytes)
        memset(dst, 0, bytes);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// dense algebra

/* The rows x cols matrix X (leading dimension ld) rounded to bf16 into input
 * scratch i, packed (leading dimension cols); NULL when out of memory. */
static const float *bf16_input(backend_t *be, int i, const float *X, int rows, int cols, int ld)
{
    cpu_impl_t *c = be->impl;
    size_t need = (size_t)rows * (size_t)cols;
    if (need > c->cap[i]) {
        float *p = realloc(c->in[i], need * sizeof(float));
        if (!p)
            return NULL;
        backend_account(be, (long long)((need - c->cap[i]) * sizeof(float)), MEM_WORKSPACE);
        c->in[i] = p;
        c->cap[i] = need;
    }
    float *restrict d = c->in[i];
    for (int r = 0; r < rows; r++) {
        const float *restrict s = X + (size_t)r * ld;
        for (int j = 0; j < cols; j++)
            d[(size_t)r * cols + j] = bf16_round_f32(s[j]);
    }
    return d;
}

static int cpu_gemm(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc)
{
    /* The room held for OpenBLAS's buffer goes to it now (blas_space.h). */
    blas_space_first_gemm(&((cpu_impl_t *)be->impl)->room);
    if (m <= 0 || n <= 0)
        return DDP_OK;
    if (k <= 0) { /* an empty product: C = beta*C, as BLAS does */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return DDP_OK;
    }
    if (be->precision == PREC_BF16) {
        /* bf16 inputs, fp32 sums (backend.h): each operand as it is stored,
         * A [m,k] or [k,m] when transposed, B [k,n] or [n,k], rounded. */
        A = bf16_input(be, 0, A, ta ? k : m, ta ? m : k, lda);
        B = bf16_input(be, 1, B, tb ? n : k, tb ? k : n, ldb);
        if (!A || !B)
            return err_set(be->last_error, DDP_ERR_RUNTIME,
                           "out of memory for the bf16 GEMM inputs (%dx%dx%d)", m, n, k);
        lda = ta ? m : k;
        ldb = tb ? k : n;
    }
    cpu_impl_t *c = be->impl;
    if (c->small != GEMM_SMALL_NONE && gemm_small(c->small, ta, tb, m, n, k, alpha, A, lda, B,
                                                  ldb, beta, C, ldc, c->scratch))
        return DDP_OK;
    /* Another device may call sgemm now (DP's workers): a small GEMM waits
     * its turn awake, not in OpenBLAS's lock (see the top of this file). */
    bool turn = atomic_load_explicit(&g_devices, memory_order_relaxed) > 1 &&
                (double)m * n * k <= SMALL_GEMM;
    if (turn)
        pthread_mutex_lock(&gemm_lock);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    if (turn)
        pthread_mutex_unlock(&gemm_lock);
    return DDP_OK;
}

CPU_CLONES static int cpu_axpy(backend_t *be, float alpha, const float *restrict x, float *restrict y,
                    size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
    return DDP_OK;
}

CPU_CLONES static int cpu_scale(backend_t *be, float alpha, float *x, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++)
        x[i] *= alpha;
    return DDP_OK;
}

static int cpu_cast16(backend_t *be, dtype_t t, bool to16, float *restrict f,
                      uint16_t *restrict h, size_t n)
{
    (void)be;
    if (to16)
        for (size_t i = 0; i < n; i++)
            h[i] = dtype16_from_f32(t, f[i]);
    else
        for (size_t i = 0; i < n; i++)
            f[i] = dtype16_to_f32(t, h[i]);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// activations (device/act_math.h: the formulas the CUDA kernels share)

/* --precision bf16: z = bf16(z + bf16(b)), a = bf16(act(z)) (backend.h). */
static int bias_act_fwd_bf16(act_t act, float *z, float *a, const float *b, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        float *restrict zr = z + (size_t)r * cols;
        float *restrict ar = a + (size_t)r * cols;
        for (int c = 0; c < cols; c++) {
            float v = bf16_round_f32(zr[c] + bf16_round_f32(b[c]));
            zr[c] = v;
            if (act != ACT_NONE)
                ar[c] = bf16_round_f32(act_value(act, v));
        }
    }
    return DDP_OK;
}

/* --precision bf16: d = bf16(bf16(d) * act'(z)) (backend.h). */
static int act_bwd_bf16(act_t act, const float *z, const float *a, float *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = bf16_round_f32(act_backward(act, z[i], a[i], bf16_round_f32(d[i])));
    return DDP_OK;
}

CPU_CLONES static int cpu_bias_act_fwd(backend_t *be, act_t act, float *z, float *a, const float *b,
                            int rows, int cols)
{
    if (be->precision == PREC_BF16)
        return bias_act_fwd_bf16(act, z, a, b, rows, cols);
    for (int r = 0; r < rows; r++) {
        float *restrict zr = z + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            zr[c] += b[c];
        if (act == ACT_NONE)
            continue;
        float *restrict ar = a + (size_t)r * cols;
        switch (act) {
        case ACT_RELU:
            for (int c = 0; c < cols; c++)
                ar[c] = zr[c] > 0.0f ? zr[c] : 0.0f;
            break;
        case ACT_TANH:
            for (int c = 0; c < cols; c++)
                ar[c] = tanhf(zr[c]);
            break;
        case ACT_SIGMOID:
            for (int c = 0; c < cols; c++)
                ar[c] = act_sigmoid(zr[c]);
            break;
        case ACT_GELU:
            for (int c = 0; c < cols; c++)
                ar[c] = act_gelu(zr[c]);
            break;
        case ACT_NONE:
            break;
        }
    }
    return DDP_OK;
}

CPU_CLONES static int cpu_act_bwd(backend_t *be, act_t act, const float *restrict z,
                       const float *restrict a, float *restrict d, size_t n)
{
    if (be->precision == PREC_BF16)
        return act_bwd_bf16(act, z, a, d, n);
    switch (act) {
    case ACT_NONE:
        break;
    case ACT_RELU:
        for (size_t i = 0; i < n; i++)
            d[i] = z[i] > 0.0f ? d[i] : 0.0f;
        break;
    case ACT_TANH:
        for (size_t i = 0; i < n; i++)
            d[i] *= 1.0f - a[i] * a[i];
        break;
    case ACT_SIGMOID:
        for (size_t i = 0; i < n; i++)
            d[i] *= a[i] * (1.0f - a[i]);
        break;
    case ACT_GELU:
        for (size_t i = 0; i < n; i++)
            d[i] *= act_gelu_grad(z[i]);
        break;
    }
    return DDP_OK;
}

CPU_CLONES static int cpu_bias_grad(backend_t *be, float *restrict db, const float *restrict dz, int rows,
                         int cols, bool accumulate)
{
    (void)be;
    if (!accumulate)
        memset(db, 0, sizeof(float) * (size_t)cols);
    /* Row by row so the inner loop is unit stride and vectorises. */
    for (int r = 0; r < rows; r++) {
        const float *restrict row = dz + (size_t)r * cols;
        for (int c = 0; c < cols; c++)
            db[c] += row[c];
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// losses

/* MSE's rows [0, rows): each row's squared errors summed in double, left
 * to right, divided by cols, and the rows' means summed in order into
 * *total; the gradient gs * (out - tgt).  Two passes over blocks of rows:
 * the elementwise part over the block's contiguous elements (vectorised),
 * then the sums, one chain of additions per row, the rows' chains
 * independent (each addition waits for the last of its own row only): the
 * same operations in the same order as a row at a time. */
#define MSE_BLOCK 512 /* doubles of squared errors kept at once (4 KiB) */
CPU_CLONES static double mse_rows(const float *restrict out, const float *restrict tgt, int rows,
                                  int cols, float gs, float *restrict grad)
{
    double sq[MSE_BLOCK];
    double total = 0.0;
    if (cols > MSE_BLOCK) { /* a row longer than the block: in pieces, in order */
        for (int r = 0; r < rows; r++) {
            double row = 0.0;
            for (int c0 = 0; c0 < cols; c0 += MSE_BLOCK) {
                int len = cols - c0 < MSE_BLOCK ? cols - c0 : MSE_BLOCK;
                size_t at = (size_t)r * cols + c0;
                for (int c = 0; c < len; c++) {
                    float e = out[at + c] - tgt[at + c];
                    grad[at + c] = gs * e;
                    sq[c] = (double)e * e;
                }
                for (int c = 0; c < len; c++)
                    row += sq[c];
            }
            total += row / cols;
        }
        return total;
    }
    int block = MSE_BLOCK / cols;
    for (int r0 = 0; r0 < rows; r0 += block) {
        int nr = rows - r0 < block ? rows - r0 : block;
        size_t at = (size_t)r0 * cols, n = (size_t)nr * cols;
        for (size_t i = 0; i < n; i++) {
            float e = out[at + i] - tgt[at + i];
            grad[at + i] = gs * e;
            sq[i] = (double)e * e;
        }
        for (int r = 0; r < nr; r++) {
            const double *q = sq + (size_t)r * cols;
            double row = 0.0;
            for (int c = 0; c < cols; c++)
                row += q[c];
            total += row / cols;
        }
    }
    return total;
}

static int cpu_loss(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                    int cols, float grad_scale, float *grad, float *loss_sum)
{
    double total = 0.0;
    if (kind == LOSS_MSE) /* 2/cols: d/dx of the mean of (x - t)^2 over the row */
        total = mse_rows(out, tgt, rows, cols, 2.0f * grad_scale / (float)cols, grad);
    else for (int r = 0; r < rows; r++) {
        const float *o = out + (size_t)r * cols;
        float *g = grad + (size_t)r * cols;
        double row = 0.0;
        switch (kind) {
        case LOSS_MSE: /* mse_rows */
            break;
        case LOSS_BCE: {
            /* From logits: l = max(x,0) - x*t + log1p(exp(-|x|)), dl/dx = sigmoid(x) - t. */
            const float *t = tgt + (size_t)r * cols;
            float gs = grad_scale / (float)cols;
            for (int c = 0; c < cols; c++) {
                float x = o[c];
                row += (double)(fmaxf(x, 0.0f) - x * t[c] + log1pf(expf(-fabsf(x))));
                g[c] = gs * (act_sigmoid(x) - t[c]);
            }
            row /= cols;
            break;
        }
        case LOSS_CE: {
            int label = (int)tgt[r];
            float mx = o[0];
            for (int c = 1; c < cols; c++)
                mx = fmaxf(mx, o[c]);
            double se = 0.0;
            for (int c = 0; c < cols; c++)
                se += exp((double)(o[c] - mx));
            double lse = (double)mx + log(se);
            row = lse - (double)o[label];
            for (int c = 0; c < cols; c++)
                g[c] = grad_scale * (float)exp((double)o[c] - lse);
            g[label] -= grad_scale;
            break;
        }
        }
        total += row;
    }
    *loss_sum = (float)total;
    /* --precision bf16: the loss above is fp32; its gradient goes back to
     * the bf16 outputs as bf16 (backend.h). */
    if (be->precision == PREC_BF16)
        for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++)
            grad[i] = bf16_round_f32(grad[i]);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// optimizers (torch.optim single-tensor rules, in the same operation order)

CPU_CLONES static int cpu_sgd(backend_t *be, const sgd_args_t *a, float *restrict p,
                   const float *restrict g, float *restrict buf, size_t n)
{
    (void)be;
    const float lr = a->lr, wd = a->weight_decay, mom = a->momentum;
    const float damp = 1.0f - a->dampening;
    /* One loop per case, so each is branch-free and vectorises: this pass is
     * memory-bound over the whole arena and shows up in every step. */
    if (mom == 0.0f) {
        if (wd == 0.0f)
            for (size_t i = 0; i < n; i++)
                p[i] -= lr * g[i];
        else
            for (size_t i = 0; i < n; i++)
                p[i] -= lr * (g[i] + wd * p[i]);
    } else if (a->first_step) {
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + wd * p[i];
            buf[i] = d;
            p[i] -= lr * (a->nesterov ? d + mom * d : d);
        }
    } else if (a->nesterov) {
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + wd * p[i];
            float b = mom * buf[i] + damp * d;
            buf[i] = b;
            p[i] -= lr * (d + mom * b);
        }
    } else if (wd == 0.0f && damp == 1.0f) {
        for (size_t i = 0; i < n; i++) {
            float b = mom * buf[i] + g[i];
            buf[i] = b;
            p[i] -= lr * b;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            float d = g[i] + wd * p[i];
            float b = mom * buf[i] + damp * d;
            buf[i] = b;
            p[i] -= lr * b;
        }
    }
    return DDP_OK;
}

CPU_CLONES static int cpu_adam(backend_t *be, const adam_args_t *a, float *restrict p,
                    const float *restrict g, float *restrict m, float *restrict v, size_t n)
{
    (void)be;
    const float b1 = a->beta1, b2 = a->beta2, eps = a->eps, wd = a->weight_decay;
    const float step_size = (float)(a->lr / a->bias_correction1);
    const float bc2_sqrt = (float)sqrt(a->bias_correction2);
    /* AdamW scales p before the update; Adam adds wd*p to the gradient. */
    const float decay = a->decoupled ? 1.0f - a->lr * wd : 1.0f;
    const float l2 = a->decoupled ? 0.0f : wd;
    for (size_t i = 0; i < n; i++) {
        float pi = p[i] * decay;
        float gi = g[i] + l2 * pi;
        float mi = m[i] + (1.0f - b1) * (gi - m[i]); /* torch: exp_avg.lerp_(grad, 1 - beta1) */
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// control

static void cpu_destroy(backend_t *be)
{
    cpu_impl_t *c = be->impl;
    atomic_fetch_sub(&g_devices, 1);
    blas_space_free(&c->room);
    free(c->in[0]);
    free(c->in[1]);
    free(c);
    free(be);
}

// ---------------------------------------------------------------------------
// events: every operation is complete when it returns, so an event is the
// host time of its record and nothing ever waits (backend.h)

static int cpu_event_record(backend_t *be, backend_event_t *ev)
{
    (void)be;
    ev->t = now_s();
    return DDP_OK;
}

static int cpu_event_time(backend_t *be, backend_event_t *ev, double *t_s)
{
    (void)be;
    *t_s = ev->t;
    return DDP_OK;
}

static int cpu_copy_async(backend_t *be, void *dst, backend_t *src_be, const void *src,
                          size_t bytes, backend_event_t *after, backend_event_t *done)
{
    (void)src_be;
    (void)after;
    cpu_copy(be, dst, src, bytes);
    if (done)
        done->t = now_s();
    return DDP_OK;
}

static int cpu_set_precision(backend_t *be, precision_t p)
{
    if (p != PREC_TF32)
        return DDP_OK; /* fp32, or bf16 by rounding (backend.h) */
    return err_set(be->last_error, DDP_ERR_INPUT,
                   "--precision tf32: the CPU backend has no TF32 mode (it computes in fp32)");
}

static double cpu_peak(backend_t *be)
{
    return backend_cpu_core_peak(0) * ((cpu_impl_t *)be->impl)->threads;
}

static const backend_ops_t cpu_ops = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .alloc_host = cpu_alloc_host,
    .free_host = cpu_free_host,
    .h2d = cpu_copy,
    .d2h = cpu_copy,
    .d2d = cpu_copy,
    .memset0 = cpu_memset0,
    .peer_copy = cpu_peer_copy,
    .gemm = cpu_gemm,
    .bias_act_fwd = cpu_bias_act_fwd,
    .act_bwd = cpu_act_bwd,
    .bias_grad = cpu_bias_grad,
    .loss = cpu_loss,
    .sgd = cpu_sgd,
    .adam = cpu_adam,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .cast16 = cpu_cast16,
    .destroy = cpu_destroy,
    .event_record = cpu_event_record,
    .event_time = cpu_event_time,
    .copy_async = cpu_copy_async,
    .d2h_async = cpu_copy,
    .set_precision = cpu_set_precision,
    .peak = cpu_peak,
};

void backend_cpu_set_threads(int n) { blas_space_threads(n < 1 ? 1 : n); }

void backend_cpu_pool_stop(void) { blas_space_pool_stop(); }

/* OpenBLAS's x86-64 cores by the vector width of their GEMM kernels (the
 * rest: 128 bits). */
static int core_bits(const char *core)
{
    static const char *const wide[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx[] = {"Haswell", "Zen", "Excavator", "Steamroller", "Piledriver",
                                      "Bulldozer", "Sandybridge"};
    for (size_t i = 0; i < sizeof wide / sizeof *wide; i++)
        if (strcasecmp(core, wide[i]) == 0)
            return 512;
    for (size_t i = 0; i < sizeof avx / sizeof *avx; i++)
        if (strcasecmp(core, avx[i]) == 0)
            return 256;
    return 128;
}

blas_core_t backend_cpu_blas_core(void)
{
    const char *name = openblas_get_corename(), *forced = getenv("OPENBLAS_CORETYPE");
    return (blas_core_t){.name = name ? name : "unknown",
                         .forced = forced && forced[0] ? forced : NULL,
                         .bits = name ? core_bits(name) : 0,
                         .cpu_bits = backend_cpu_vector_bits()};
}

const char *backend_cpu_blas_info(void)
{
    static char info[224];
    if (!info[0]) {
        const char *cfg = openblas_get_config();
        blas_core_t k = backend_cpu_blas_core();
        snprintf(info, sizeof info, "%s (core %s%s%s)", cfg ? cfg : "OpenBLAS", k.name,
                 k.forced ? ", chosen by OPENBLAS_CORETYPE=" : "", k.forced ? k.forced : "");
    }
    return info;
}

int backend_cpu_create(backend_t **out, int device_id, int blas_threads, char *err)
{
    *out = NULL;
    backend_t *be = calloc(1, sizeof *be);
    cpu_impl_t *impl = calloc(1, sizeof *impl);
    blas_space_t *room = impl ? &impl->room : NULL;
    if (!be || !impl) {
        free(be);
        free(impl);
        return err_set(err, DDP_ERR_RUNTIME, "cpu device %d: out of host memory (%zu bytes)",
                       device_id, sizeof *be + sizeof *impl);
    }
    /* OpenBLAS's buffers, one per thread that will compute (blas_space.h):
     * without the room it would spin forever at the first GEMM. */
    int rc = blas_space_reserve(room, blas_threads > 1 ? blas_threads : 1, device_id, err);
    /* Why here: the count is process-wide, so it is set while no worker runs a
     * GEMM yet (backends are created before any worker starts). */
    if (rc == DDP_OK && blas_threads > 0)
        rc = blas_space_set_threads(room, blas_threads, err);
    if (rc != DDP_OK) {
        blas_space_free(room);
        free(be);
        free(impl);
        return rc;
    }
    be->ops = &cpu_ops;
    be->kind = BACKEND_CPU;
    be->device_id = device_id;
    be->host_visible = true;
    be->impl = impl;
    impl->small = gemm_small_best();
    impl->threads = blas_threads > 1 ? blas_threads : 1;
    atomic_fetch_add(&g_devices, 1);
    *out = be;
    return DDP_OK;
}

bool backend_cpu_restart_env(void)
{
    struct rlimit rl;
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("GOTO_NUM_THREADS") ||
        getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return false;
    return setenv("OPENBLAS_NUM_THREADS", "1", 0) == 0;
}

// ---------------------------------------------------------------------------
// the CPU's name

const char *backend_cpu_model(void)
{
    static char line[160], *model;
    if (!model) { /* "model name\t: AMD EPYC": what follows the colon, trimmed */
        model = line;
        if (procfile_value("/proc/cpuinfo", "model name", line, sizeof line) && strchr(line, ':'))
            model = strchr(line, ':') + 1 + strspn(strchr(line, ':') + 1, " \t");
        else
            line[0] = 0;
        for (size_t l = strlen(model); l > 0 && isspace((unsigned char)model[l - 1]);)
            model[--l] = 0;
    }
    return model;
}
