/* common/device/backend_cuda.c: the CUDA compute backend (see backend.h).
 *
 * One backend is one GPU replica: its own non-blocking compute stream, a
 * cuBLAS handle bound to that stream, and a table of its live allocations.
 * GEMMs go to cublasSgemm in plain fp32 (no TF32: CUBLAS_DEFAULT_MATH), the
 * rest to the kernels of kernels_*.cu.  Every operation is queued on the
 * stream and returns at once, except d2h() and sync(), which wait.
 *
 * Threads: DP drives each device from its own host thread, and its main
 * thread also touches several devices (replicate, gather).  The CUDA runtime's
 * "current device" is per host thread, so every entry point starts with
 * cudaSetDevice(dev) for its own device: then any thread may call any backend
 * and no caller has to remember to bind itself first.  When the device is
 * already current this is a check of a thread-local value in the runtime,
 * tens of nanoseconds against the microseconds of a kernel launch.  Two
 * threads must not drive the same backend at once (the cuBLAS handle and the
 * allocation table are the backend's own); several backends on one GPU
 * (--gpus 0,0) are independent.
 *
 * Errors: each CUDA/cuBLAS call goes through CUDACHECK/CUBLASCHECK, which put
 * "file:line: call: name: text" into be->last_error and return
 * DDP_ERR_RUNTIME.  Asynchronous faults (an illegal address inside a kernel)
 * surface at the next d2h() or sync(). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "device/backend_cuda.h"
#include "device/backend_impl.h"
#include "device/cuda_check.h"
#include "device/kernels.h"

typedef struct {
    void *p;
    size_t bytes;
} cuda_block_t;

typedef struct {
    int dev;                /* CUDA ordinal, after CUDA_VISIBLE_DEVICES */
    cudaStream_t stream;    /* compute stream; non-blocking: nothing on the legacy
                               default stream (another library, another thread)
                               serialises with it */
    cublasHandle_t blas;
    double *rowloss;        /* loss(): per-row losses for the fixed-order sum */
    int rowloss_cap;
    cuda_block_t *blocks;   /* live alloc() blocks, so free() can account them */
    size_t nblocks, cap_blocks;
} cuda_impl_t;

static inline cuda_impl_t *impl_of(backend_t *be) { return (cuda_impl_t *)be->impl; }

/* Bind the calling thread to this backend's device (see the header comment). */
#define ENTER(be) CUDACHECK((be)->last_error, cudaSetDevice(impl_of(be)->dev))
#define CK(call) CUDACHECK(be->last_error, call)

// ---------------------------------------------------------------------------
// peer access, process-wide

/* peer[dst][src]: 0 not tried yet, 1 dst can read src directly, -1 it cannot
 * (cudaMemcpyPeerAsync then stages through the host by itself). */
#define PEER_MAX 64
static signed char g_peer[PEER_MAX][PEER_MAX];
static pthread_mutex_t g_peer_lock = PTHREAD_MUTEX_INITIALIZER;

/* Called with dst current.  Enabling is once per device pair per process;
 * failure is not an error, only a slower copy. */
static void peer_enable(int dst, int src)
{
    if (dst < 0 || src < 0 || dst >= PEER_MAX || src >= PEER_MAX)
        return;
    /* Why a lock: DP workers on different devices may ask at the same time. */
    pthread_mutex_lock(&g_peer_lock);
    if (g_peer[dst][src] == 0) {
        int can = 0;
        if (cudaDeviceCanAccessPeer(&can, dst, src) == cudaSuccess && can) {
            cudaError_t e = cudaDeviceEnablePeerAccess(src, 0);
            can = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
        }
        cudaGetLastError(); /* a refused enable must not resurface at the next launch */
        g_peer[dst][src] = can ? 1 : -1;
    }
    pthread_mutex_unlock(&g_peer_lock);
}

// ---------------------------------------------------------------------------
// memory

static int blocks_add(cuda_impl_t *c, void *p, size_t bytes)
{
    if (c->nblocks == c->cap_blocks) {
        size_t cap = c->cap_blocks ? 2 * c->cap_blocks : 32;
        cuda_block_t *nb = realloc(c->blocks, cap * sizeof *nb);
        if (!nb)
            return -1;
        c->blocks = nb;
        c->cap_blocks = cap;
    }
    c->blocks[c->nblocks++] = (cuda_block_t){p, bytes};
    return 0;
}

/* Remove p from the table; its size, or 0 when p was not ours. */
static size_t blocks_remove(cuda_impl_t *c, void *p)
{
    for (size_t i = c->nblocks; i-- > 0;)
        if (c->blocks[i].p == p) {
            size_t bytes = c->blocks[i].bytes;
            c->blocks[i] = c->blocks[--c->nblocks];
            return bytes;
        }
    return 0;
}

static int cuda_alloc_impl(backend_t *be, size_t bytes, void **out)
{
    cuda_impl_t *c = impl_of(be);
    *out = NULL;
    ENTER(be);
    size_t sz = bytes ? bytes : 1;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, sz);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* out of memory is reported here, not at the next launch */
        return err_set(be->last_error, DDP_ERR_RUNTIME, "cudaMalloc(%zu bytes): %s: %s", sz,
                       cudaGetErrorName(e), cudaGetErrorString(e));
    }
    /* Zeroed on the compute stream, so every later use on it sees the zeros
     * (a plain cudaMemset would run on the legacy stream, which a
     * non-blocking stream does not wait for). */
    e = cudaMemsetAsync(p, 0, sz, c->stream);
    if (e != cudaSuccess || blocks_add(c, p, sz) != 0) {
        cudaFree(p);
        return err_set(be->last_error, DDP_ERR_RUNTIME, "cuda device %d: allocating %zu bytes: %s",
                       c->dev, sz, e != cudaSuccess ? cudaGetErrorString(e) : "out of host memory");
    }
    backend_account(be, (long long)sz);
    *out = p;
    return DDP_OK;
}

static void *cuda_alloc(backend_t *be, size_t bytes)
{
    void *p;
    return cuda_alloc_impl(be, bytes, &p) == DDP_OK ? p : NULL;
}

static void cuda_free(backend_t *be, void *p)
{
    if (!p)
        return;
    cuda_impl_t *c = impl_of(be);
    if (cudaSetDevice(c->dev) != cudaSuccess)
        return;
    backend_account(be, -(long long)blocks_remove(c, p));
    /* cudaFree waits for the device to finish with the block. */
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess)
        err_set(be->last_error, DDP_ERR_RUNTIME, "cudaFree: %s", cudaGetErrorString(e));
}

static void *cuda_alloc_host(backend_t *be, size_t bytes)
{
    cuda_impl_t *c = impl_of(be);
    void *p = NULL;
    if (cudaSetDevice(c->dev) != cudaSuccess)
        return NULL;
    /* Pinned, so h2d copies from it are truly asynchronous DMA; portable, so
     * any device of this process may copy from it (DP stages for all). */
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        err_set(be->last_error, DDP_ERR_RUNTIME, "cudaHostAlloc(%zu bytes): %s", bytes,
                cudaGetErrorString(e));
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

static void cuda_free_host(backend_t *be, void *p)
{
    if (!p)
        return;
    /* Pinned memory may still be the source of a queued copy: the caller syncs
     * first (backend.h); cudaFreeHost itself also waits for the device.  The
     * device is set so a thread new to CUDA does not create a context on GPU 0. */
    if (cudaSetDevice(impl_of(be)->dev) != cudaSuccess)
        return;
    cudaError_t e = cudaFreeHost(p);
    if (e != cudaSuccess)
        err_set(be->last_error, DDP_ERR_RUNTIME, "cudaFreeHost: %s", cudaGetErrorString(e));
}

static int cuda_h2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return DDP_OK;
    ENTER(be);
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, impl_of(be)->stream));
    return DDP_OK;
}

static int cuda_d2h(backend_t *be, void *dst, const void *src, size_t bytes)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    if (bytes)
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    /* Why wait: d2h's contract is that dst is filled on return, and the wait
     * also reports any fault of the work queued before it. */
    CK(cudaStreamSynchronize(c->stream));
    return DDP_OK;
}

static int cuda_d2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src)
        return DDP_OK;
    ENTER(be);
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_of(be)->stream));
    return DDP_OK;
}

static int cuda_memset0(backend_t *be, void *dst, size_t bytes)
{
    if (!bytes)
        return DDP_OK;
    ENTER(be);
    CK(cudaMemsetAsync(dst, 0, bytes, impl_of(be)->stream));
    return DDP_OK;
}

static int cuda_peer_copy(backend_t *be, void *dst, backend_t *src_be, const void *src,
                          size_t bytes)
{
    if (!bytes)
        return DDP_OK;
    if (src_be->kind != BACKEND_CUDA)
        return err_set(be->last_error, DDP_ERR_RUNTIME,
                       "peer_copy: source device %d is not a CUDA device", src_be->device_id);
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    int sdev = impl_of(src_be)->dev;
    /* Queued on the destination's stream: the caller synced src_be, so src is
     * complete; the caller syncs be before src_be overwrites src. */
    if (sdev == c->dev) { /* replicas sharing one GPU (--gpus 0,0) */
        if (dst != src)
            CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
        return DDP_OK;
    }
    peer_enable(c->dev, sdev);
    CK(cudaMemcpyPeerAsync(dst, c->dev, src, sdev, bytes, c->stream));
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// compute

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
 * row-major matrix read column-major is its transpose: so swap the operands
 * (and m with n) and keep each operand's own transpose flag. */
static int cuda_gemm(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc)
{
    if (m <= 0 || n <= 0)
        return DDP_OK;
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    if (k <= 0) { /* an empty product: C = beta*C, as the CPU backend does */
        CK(kern_scale_matrix(c->stream, beta, C, m, n, ldc));
        return DDP_OK;
    }
    CUBLASCHECK(be->last_error,
                cublasSgemm(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            n, m, k, &alpha, B, ldb, A, lda, &beta, C, ldc));
    return DDP_OK;
}

static int cuda_bias_act_fwd(backend_t *be, act_t act, float *z, float *a, const float *b,
                             int rows, int cols)
{
    ENTER(be);
    CK(kern_bias_act_fwd(impl_of(be)->stream, act, z, a, b, rows, cols));
    return DDP_OK;
}

static int cuda_act_bwd(backend_t *be, act_t act, const float *z, const float *a, float *d,
                        size_t n)
{
    ENTER(be);
    CK(kern_act_bwd(impl_of(be)->stream, act, z, a, d, n));
    return DDP_OK;
}

static int cuda_bias_grad(backend_t *be, float *db, const float *dz, int rows, int cols,
                          bool accumulate)
{
    ENTER(be);
    CK(kern_bias_grad(impl_of(be)->stream, db, dz, rows, cols, accumulate));
    return DDP_OK;
}

static int cuda_loss(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                     int cols, float grad_scale, float *grad, float *loss_sum)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    if (rows > c->rowloss_cap) {
        /* Grows to the largest batch once (the first step), never per step.
         * cudaFree waits for the old scratch's last reader. */
        if (c->rowloss) {
            backend_account(be, -(long long)((size_t)c->rowloss_cap * sizeof(double)));
            CK(cudaFree(c->rowloss));
            c->rowloss = NULL;
            c->rowloss_cap = 0;
        }
        cudaError_t e = cudaMalloc((void **)&c->rowloss, (size_t)rows * sizeof(double));
        if (e != cudaSuccess) {
            cudaGetLastError();
            c->rowloss = NULL;
            return err_set(be->last_error, DDP_ERR_RUNTIME, "cudaMalloc(loss scratch): %s",
                           cudaGetErrorString(e));
        }
        c->rowloss_cap = rows;
        backend_account(be, (long long)((size_t)rows * sizeof(double)));
    }
    /* rows <= 0 before any scratch exists: the sum kernel reads none of it and writes 0. */
    CK(kern_loss(c->stream, kind, out, tgt, rows, cols, grad_scale, grad, c->rowloss, loss_sum));
    return DDP_OK;
}

static int cuda_sgd(backend_t *be, const sgd_args_t *a, float *p, const float *g, float *buf,
                    size_t n)
{
    ENTER(be);
    /* The scalars backend_cpu.c hoists out of its loop, computed the same way. */
    kern_sgd_t k = {.lr = a->lr,
                    .weight_decay = a->weight_decay,
                    .momentum = a->momentum,
                    .damp = 1.0f - a->dampening,
                    .nesterov = a->nesterov,
                    .first_step = a->first_step};
    CK(kern_sgd(impl_of(be)->stream, k, p, g, buf, n));
    return DDP_OK;
}

static int cuda_adam(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m,
                     float *v, size_t n)
{
    ENTER(be);
    kern_adam_t k = {.beta2 = a->beta2,
                     .eps = a->eps,
                     .weight_decay = a->weight_decay,
                     .one_minus_beta1 = 1.0f - a->beta1,
                     .one_minus_beta2 = 1.0f - a->beta2,
                     .step_size = (float)(a->lr / a->bias_correction1),
                     .bc2_sqrt = (float)sqrt(a->bias_correction2),
                     .decay = 1.0f - a->lr * a->weight_decay,
                     .decoupled = a->decoupled};
    CK(kern_adam(impl_of(be)->stream, k, p, g, m, v, n));
    return DDP_OK;
}

static int cuda_axpy(backend_t *be, float alpha, const float *x, float *y, size_t n)
{
    ENTER(be);
    CK(kern_axpy(impl_of(be)->stream, alpha, x, y, n));
    return DDP_OK;
}

static int cuda_scale(backend_t *be, float alpha, float *x, size_t n)
{
    ENTER(be);
    CK(kern_scale(impl_of(be)->stream, alpha, x, n));
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// control

static int cuda_sync(backend_t *be)
{
    ENTER(be);
    /* Why: the caller needs every queued operation done (a timing lap, a
     * host read, another device about to read our memory); it also reports
     * any fault raised inside a kernel since the last wait. */
    CK(cudaStreamSynchronize(impl_of(be)->stream));
    return DDP_OK;
}

static void cuda_destroy(backend_t *be)
{
    cuda_impl_t *c = impl_of(be);
    if (c) {
        if (cudaSetDevice(c->dev) == cudaSuccess) {
            if (c->stream)
                cudaStreamSynchronize(c->stream); /* nothing may still use what we free */
            for (size_t i = 0; i < c->nblocks; i++) /* blocks a failed run left behind */
                cudaFree(c->blocks[i].p);
            if (c->rowloss)
                cudaFree(c->rowloss);
            if (c->blas)
                cublasDestroy(c->blas);
            if (c->stream)
                cudaStreamDestroy(c->stream);
            cudaGetLastError(); /* teardown errors must not leak into another backend */
        }
        free(c->blocks);
        free(c);
    }
    free(be);
}

static const backend_ops_t cuda_ops = {
    .name = "cuda",
    .alloc = cuda_alloc,
    .free = cuda_free,
    .alloc_host = cuda_alloc_host,
    .free_host = cuda_free_host,
    .h2d = cuda_h2d,
    .d2h = cuda_d2h,
    .d2d = cuda_d2d,
    .memset0 = cuda_memset0,
    .peer_copy = cuda_peer_copy,
    .gemm = cuda_gemm,
    .bias_act_fwd = cuda_bias_act_fwd,
    .act_bwd = cuda_act_bwd,
    .bias_grad = cuda_bias_grad,
    .loss = cuda_loss,
    .sgd = cuda_sgd,
    .adam = cuda_adam,
    .axpy = cuda_axpy,
    .scale = cuda_scale,
    .sync = cuda_sync,
    .destroy = cuda_destroy,
};

// ---------------------------------------------------------------------------
// creation

bool backend_cuda_available(void) { return true; }

static int cuda_setup(backend_t *be)
{
    cuda_impl_t *c = impl_of(be);
    CK(cudaSetDevice(c->dev));
    CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLASCHECK(be->last_error, cublasCreate(&c->blas));
    CUBLASCHECK(be->last_error, cublasSetStream(c->blas, c->stream));
    /* Plain fp32 GEMMs: never TF32 (that would break the 1e-4 agreement with
     * the CPU); default math allows only algorithms of full fp32 precision. */
    CUBLASCHECK(be->last_error, cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    return DDP_OK;
}

int backend_cuda_create(backend_t **out, int device_id, char *err)
{
    *out = NULL;
    char why[ERR_LEN];
    /* Asked in this process, which is about to use CUDA anyway: for DDP this
     * runs inside the rank, after the fork. */
    int n = cuda_count_devices(why);
    if (n <= 0)
        return err_set(err, DDP_ERR_INPUT, "--backend cuda: no GPU: %s", why);
    if (device_id < 0 || device_id >= n)
        return err_set(err, DDP_ERR_INPUT, "--gpus: device %d does not exist (%d visible)",
                       device_id, n);
    backend_t *be = calloc(1, sizeof *be);
    cuda_impl_t *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return err_set(err, DDP_ERR_RUNTIME, "cuda device %d: out of host memory", device_id);
    }
    be->ops = &cuda_ops;
    be->kind = BACKEND_CUDA;
    be->device_id = device_id;
    be->host_visible = false;
    be->impl = c;
    c->dev = device_id;
    if (cuda_setup(be) != DDP_OK) {
        int rc = err_set(err, DDP_ERR_RUNTIME, "cuda device %d: %s", device_id, be->last_error);
        cuda_destroy(be);
        return rc;
    }
    *out = be;
    return DDP_OK;
}

int backend_cuda_device(const backend_t *be) { return ((const cuda_impl_t *)be->impl)->dev; }

cudaStream_t backend_cuda_stream(const backend_t *be)
{
    return ((const cuda_impl_t *)be->impl)->stream;
}

void backend_cuda_account(backend_t *be, long long delta_bytes) { backend_account(be, delta_bytes); }
