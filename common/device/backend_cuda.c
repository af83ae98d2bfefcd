/* common/device/backend_cuda.c: the CUDA compute backend (see backend.h).  One backend is
 * one GPU replica: a non-blocking compute stream, a copy stream, a cuBLAS handle on the
 * compute stream (fp32, TF32 or bf16 cublasGemmEx by --precision) and kernels_*.cu.
 * Every entry point binds its own device first (ENTER: the runtime's current device is per
 * host thread, and DP's threads touch several), so any thread may call any backend; two
 * threads must not drive the same one at once.  CUDA errors become be->last_error
 * (CUDACHECK); faults inside kernels surface at the next wait. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/base/clock.h"
#include "common/device/backend_cuda.h"
#include "common/device/backend_impl.h"
#include "common/device/cuda_check.h"
#include "common/device/kernels.h"

typedef struct {
    void *p;
    size_t bytes;
    mem_kind_t kind;
} cuda_block_t;

typedef struct {
    int dev;                /* CUDA ordinal, after CUDA_VISIBLE_DEVICES */
    cudaStream_t stream;    /* compute stream; non-blocking: nothing on the legacy
                               default stream (another library, another thread)
                               serialises with it */
    cudaStream_t copy;      /* copy stream (copy_async), also non-blocking */
    cublasHandle_t blas;
    void *blas_ws;          /* the handle's cuBLAS workspace (cublasSetWorkspace) */
    size_t blas_ws_bytes;
    double *rowloss;        /* loss(): per-row losses for the fixed-order sum */
    size_t rowloss_cap;     /* rows */
    float *bgpart;          /* bias_grad(): per-block partial column sums */
    size_t bgpart_cap;      /* floats */
    uint16_t *bf16[2];      /* --precision bf16: the GEMM's operands as bf16 */
    size_t bf16_cap[2];     /* elements of each */
    size_t reserved;        /* the largest rows x cols reserved (backend_reserve) */
    cuda_block_t *blocks;   /* live alloc() blocks, so free() can account them */
    size_t nblocks, cap_blocks;
    /* the clock: an event's time is its elapsed time from anchor, whose host time is known;
     * cudaEventElapsedTime's float ms keeps only microseconds after minutes, so a candidate
     * recorded with a timed event becomes the anchor once placed (about once a step) */
    cudaEvent_t anchor, cand;
    double anchor_s;
    bool cand_pending;
    double peak;            /* backend_peak_flops, once measured (0: not yet) */
    /* CUDA graphs (backend.h): one instantiated step per key, the event its
     * last launch recorded, and Adam's per-step scalars {step_size,
     * bc2_sqrt} per key, written by the host (pinned) and uploaded by the
     * graph itself, first thing before its Adam kernel reads them */
    cudaGraphExec_t gexec[BACKEND_GRAPH_KEYS];
    cudaEvent_t gdone[BACKEND_GRAPH_KEYS]; /* the key's scalars were uploaded */
    float *gscal_h, *gscal_d;
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

static int blocks_add(cuda_impl_t *c, void *p, size_t bytes, mem_kind_t kind)
{
    if (c->nblocks == c->cap_blocks) {
        size_t cap = c->cap_blocks ? 2 * c->cap_blocks : 32;
        cuda_block_t *nb = realloc(c->blocks, cap * sizeof *nb);
        if (!nb)
            return -1;
        c->blocks = nb;
        c->cap_blocks = cap;
    }
    c->blocks[c->nblocks++] = (cuda_block_t){p, bytes, kind};
    return 0;
}

/* Remove p from the table; its size (and kind), or 0 when p was not ours. */
static size_t blocks_remove(cuda_impl_t *c, void *p, mem_kind_t *kind)
{
    for (size_t i = c->nblocks; i-- > 0;)
        if (c->blocks[i].p == p) {
            size_t bytes = c->blocks[i].bytes;
            *kind = c->blocks[i].kind;
            c->blocks[i] = c->blocks[--c->nblocks];
            return bytes;
        }
    return 0;
}

static int cuda_alloc_impl(backend_t *be, size_t bytes, mem_kind_t kind, void **out)
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
    if (e != cudaSuccess || blocks_add(c, p, sz, kind) != 0) {
        cudaFree(p);
        return err_set(be->last_error, DDP_ERR_RUNTIME, "cuda device %d: allocating %zu bytes: %s",
                       c->dev, sz, e != cudaSuccess ? cudaGetErrorString(e) : "out of host memory");
    }
    backend_account(be, (long long)sz, kind);
    *out = p;
    return DDP_OK;
}

static void *cuda_alloc(backend_t *be, size_t bytes, mem_kind_t kind)
{
    void *p;
    return cuda_alloc_impl(be, bytes, kind, &p) == DDP_OK ? p : NULL;
}

static void cuda_free(backend_t *be, void *p)
{
    cuda_impl_t *c = impl_of(be);
    if (cudaSetDevice(c->dev) != cudaSuccess)
        return;
    mem_kind_t kind = MEM_WORKSPACE;
    size_t bytes = blocks_remove(c, p, &kind);
    backend_account(be, -(long long)bytes, kind);
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
    /* Pinned memory may still be the source of a queued copy: the caller syncs
     * first (backend.h); cudaFreeHost itself also waits for the device.  The
     * device is set so a thread new to CUDA does not create a context on GPU 0. */
    if (cudaSetDevice(impl_of(be)->dev) != cudaSuccess)
        return;
    cudaError_t e = cudaFreeHost(p);
    if (e != cudaSuccess)
        err_set(be->last_error, DDP_ERR_RUNTIME, "cudaFreeHost: %s", cudaGetErrorString(e));
}

/* A copy queued on the compute stream (h2d, d2h_async, d2d). */
static int queue_copy(backend_t *be, void *dst, const void *src, size_t bytes,
                      enum cudaMemcpyKind kind)
{
    if (!bytes || dst == src)
        return DDP_OK;
    ENTER(be);
    CK(cudaMemcpyAsync(dst, src, bytes, kind, impl_of(be)->stream));
    return DDP_OK;
}

static int cuda_h2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    return queue_copy(be, dst, src, bytes, cudaMemcpyHostToDevice);
}

/* Polling back-off for watched waits: spin for about the first millisecond
 * (most waits end sooner, and a sleep would add its latency), then sleep
 * 50 us between checks. */
static void poll_pause(long *spins)
{
    if (++*spins < 2000)
        return;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* The host waits for ev (or, when ev is NULL, for the whole compute stream):
 * counted, and polled with the watch when there is one. */
static int host_wait(backend_t *be, cudaEvent_t ev)
{
    cuda_impl_t *c = impl_of(be);
    be->host_syncs++;
    if (!be->watch) {
        if (ev)
            CK(cudaEventSynchronize(ev));
        else
            CK(cudaStreamSynchronize(c->stream));
        return DDP_OK;
    }
    long spins = 0;
    for (;;) {
        cudaError_t q = ev ? cudaEventQuery(ev) : cudaStreamQuery(c->stream);
        if (q == cudaSuccess)
            return DDP_OK;
        if (q != cudaErrorNotReady) {
            cudaGetLastError();
            CK(q);
        }
        char why[ERR_LEN] = "";
        int rc = be->watch(be->watch_ctx, why);
        if (rc != DDP_OK)
            return err_set(be->last_error, rc, "%s", why[0] ? why : "a watched wait failed");
        poll_pause(&spins);
    }
}

static int cuda_d2h(backend_t *be, void *dst, const void *src, size_t bytes)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    /* Why wait first: d2h's contract is that dst is filled on return, and a
     * copy into pageable memory blocks inside the runtime until the stream
     * reaches it -- where no watch can see a collective that never ends.
     * Waiting for the stream (watched) first leaves the copy nothing to wait
     * for; the wait also reports any fault of the work queued before it. */
    TRY(host_wait(be, NULL));
    if (bytes) {
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
        CK(cudaStreamSynchronize(c->stream)); /* the copy alone: part of the wait above */
    }
    return DDP_OK;
}

/* After the work that wrote src; the caller reads dst once a later event has completed. */
static int cuda_d2h_async(backend_t *be, void *dst, const void *src, size_t bytes)
{
    return queue_copy(be, dst, src, bytes, cudaMemcpyDeviceToHost);
}

static int cuda_d2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    return queue_copy(be, dst, src, bytes, cudaMemcpyDeviceToDevice);
}

static int cuda_memset0(backend_t *be, void *dst, size_t bytes)
{
    if (!bytes)
        return DDP_OK;
    ENTER(be);
    CK(cudaMemsetAsync(dst, 0, bytes, impl_of(be)->stream));
    return DDP_OK;
}

/* A copy from src_be's memory on stream st of be (bound already): a plain copy between
 * replicas sharing one GPU (--gpus 0,0), else a peer copy. */
static int copy_from(backend_t *be, cudaStream_t st, void *dst, backend_t *src_be,
                     const void *src, size_t bytes, const char *what)
{
    cuda_impl_t *c = impl_of(be);
    if (src_be->kind != BACKEND_CUDA)
        return err_set(be->last_error, DDP_ERR_RUNTIME, "%s: source device %d is not a CUDA device",
                       what, src_be->device_id);
    int sdev = impl_of(src_be)->dev;
    if (sdev == c->dev) {
        if (dst != src)
            CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
        return DDP_OK;
    }
    peer_enable(c->dev, sdev);
    CK(cudaMemcpyPeerAsync(dst, c->dev, src, sdev, bytes, st));
    return DDP_OK;
}

static int cuda_peer_copy(backend_t *be, void *dst, backend_t *src_be, const void *src,
                          size_t bytes)
{
    if (!bytes)
        return DDP_OK;
    ENTER(be);
    /* On the destination's stream: the caller synced src_be, so src is complete; it syncs
     * be before src_be overwrites src. */
    return copy_from(be, impl_of(be)->stream, dst, src_be, src, bytes, "peer_copy");
}

// ---------------------------------------------------------------------------
// compute

static int grow_bf16(backend_t *be, size_t need);

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
 * row-major matrix read column-major is its transpose: so swap the operands
 * (and m with n) and keep each operand's own transpose flag. */
static int cuda_gemm(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc)
{
    if (m <= 0 || n <= 0) {
        backend_count_launch(be, LAUNCH_KERNEL, -1); /* nothing launched */
        return DDP_OK;
    }
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    if (k <= 0) { /* an empty product: C = beta*C, as the CPU backend does */
        CK(kern_scale_matrix(c->stream, beta, C, m, n, ldc));
        return DDP_OK;
    }
    if (be->precision == PREC_BF16) {
        /* Each operand as it is stored (A [m,k], or [k,m] when transposed;
         * B [k,n] or [n,k]) rounded to bf16 and packed; then bf16 tensor
         * cores, fp32 sums and an fp32 C (backend.h). */
        int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
        size_t need = (size_t)ar * ac > (size_t)br * bc ? (size_t)ar * ac : (size_t)br * bc;
        TRY(grow_bf16(be, need)); /* reserved at setup: nothing to do */
        CK(kern_to_bf16(c->stream, c->bf16[0], A, ar, ac, lda));
        CK(kern_to_bf16(c->stream, c->bf16[1], B, br, bc, ldb));
        /* two conversion kernels before the GEMM: launches_per_step counts them */
        backend_count_launch(be, LAUNCH_KERNEL, 2);
        CUBLASCHECK(be->last_error,
                    cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, c->bf16[1],
                                 CUDA_R_16BF, bc, c->bf16[0], CUDA_R_16BF, ac, &beta, C,
                                 CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
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
    CK(kern_bias_act_fwd(impl_of(be)->stream, act, z, a, b, rows, cols,
                         be->precision == PREC_BF16));
    if (rows <= 0 || cols <= 0)
        backend_count_launch(be, LAUNCH_KERNEL, -1); /* nothing launched */
    return DDP_OK;
}

static int cuda_act_bwd(backend_t *be, act_t act, const float *z, const float *a, float *d,
                        size_t n)
{
    ENTER(be);
    bool bf16 = be->precision == PREC_BF16;
    CK(kern_act_bwd(impl_of(be)->stream, act, z, a, d, n, bf16));
    if (n == 0 || (act == ACT_NONE && !bf16)) /* nothing to do: nothing launched */
        backend_count_launch(be, LAUNCH_KERNEL, -1);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// kernel scratch: reserved at replica setup (cuda_reserve), never in a step

/* Why at setup: cudaMalloc and cudaFree synchronise the whole device, so a
 * scratch that grew inside a step would stall every stream, and under DP's
 * single-process NCCL (one thread per GPU, ncclCommInitAll) a device-wide
 * wait while a peer's collective is queued is the known way to hang.  The
 * replica reserves for each of its layers (backend_reserve); an operation
 * larger than that still grows the scratch here, the one place that may. */
static int regrow(backend_t *be, void **p, size_t *cap, size_t elem, size_t need,
                  const char *what)
{
    if (need <= *cap)
        return DDP_OK;
    /* Forget the old block before freeing it: a failing cudaFree must not leave a pointer
     * that destroy() would free a second time.  cudaFree waits for its last reader. */
    void *old = *p;
    backend_account(be, -(long long)(*cap * elem), MEM_WORKSPACE);
    *p = NULL;
    *cap = 0;
    if (old)
        CK(cudaFree(old));
    cudaError_t e = cudaMalloc(p, need * elem);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return err_set(be->last_error, DDP_ERR_RUNTIME, "cudaMalloc(%s): %s", what,
                       cudaGetErrorString(e));
    }
    *cap = need;
    backend_account(be, (long long)(need * elem), MEM_WORKSPACE);
    return DDP_OK;
}

static int grow_bgpart(backend_t *be, size_t need)
{
    cuda_impl_t *c = impl_of(be);
    return regrow(be, (void **)&c->bgpart, &c->bgpart_cap, sizeof(float), need,
                  "bias gradient scratch");
}

static int grow_rowloss(backend_t *be, int rows)
{
    cuda_impl_t *c = impl_of(be);
    return regrow(be, (void **)&c->rowloss, &c->rowloss_cap, sizeof(double),
                  rows > 0 ? (size_t)rows : 0, "loss scratch");
}

/* --precision bf16: room for a GEMM operand of need elements in each bf16 buffer. */
static int grow_bf16(backend_t *be, size_t need)
{
    cuda_impl_t *c = impl_of(be);
    for (int i = 0; i < 2; i++)
        TRY(regrow(be, (void **)&c->bf16[i], &c->bf16_cap[i], sizeof(uint16_t), need,
                   "bf16 GEMM operands"));
    return DDP_OK;
}

static int cuda_reserve(backend_t *be, int rows, int cols)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    TRY(grow_bgpart(be, kern_bias_grad_scratch(rows, cols)));
    /* a bf16 GEMM's operand may be any reserved shape (an activation, its
     * gradient, a weight): remembered, so that --precision bf16 set later
     * reserves for it too */
    size_t elems = rows > 0 && cols > 0 ? (size_t)rows * (size_t)cols : 0;
    if (elems > c->reserved)
        c->reserved = elems;
    if (be->precision == PREC_BF16)
        TRY(grow_bf16(be, c->reserved));
    return grow_rowloss(be, rows);
}

static int cuda_bias_grad(backend_t *be, float *db, const float *dz, int rows, int cols,
                          bool accumulate)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    TRY(grow_bgpart(be, kern_bias_grad_scratch(rows, cols))); /* reserved at setup: nothing to do */
    CK(kern_bias_grad(c->stream, db, dz, rows, cols, accumulate, c->bgpart));
    if (kern_bias_grad_scratch(rows, cols) > 0) /* slices, then their sums: two launches */
        backend_count_launch(be, LAUNCH_KERNEL, 1);
    return DDP_OK;
}

static int cuda_loss(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                     int cols, float grad_scale, float *grad, float *loss_sum)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    TRY(grow_rowloss(be, rows)); /* reserved at setup: nothing to do */
    /* rows <= 0 before any scratch exists: the sum kernel reads none of it and writes 0. */
    CK(kern_loss(c->stream, kind, out, tgt, rows, cols, grad_scale, grad, c->rowloss, loss_sum));
    if (rows > 0 && cols > 0) /* the rows' losses, then their sum: two launches */
        backend_count_launch(be, LAUNCH_KERNEL, 1);
    /* --precision bf16: an fp32 loss, its gradient back to the bf16 outputs
     * as bf16 (backend.h) */
    if (be->precision == PREC_BF16 && rows > 0 && cols > 0) {
        CK(kern_round_bf16(c->stream, grad, (size_t)rows * (size_t)cols));
        backend_count_launch(be, LAUNCH_KERNEL, 1);
    }
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

/* Before key's graph step rewrites its pinned slot of Adam's scalars: the
 * key's last launch must have read it (gdone, recorded in the graph just
 * after the upload).  It has -- the step meter waited for that launch's end
 * a step ago -- else this waits, and counts the wait.  Never while the
 * thread captures: CUDA refuses a capturing thread's query or wait of any
 * event (cudaErrorStreamCaptureUnsupported) and invalidates the capture, so
 * a capture waits before it begins (cuda_graph_capture). */
static int graph_slot_free(backend_t *be, int key)
{
    cuda_impl_t *c = impl_of(be);
    if (cudaEventQuery(c->gdone[key]) != cudaSuccess) {
        cudaGetLastError();
        TRY(host_wait(be, c->gdone[key]));
    }
    return DDP_OK;
}

static int cuda_adam(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m,
                     float *v, size_t n)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    kern_adam_t k = {.beta2 = a->beta2,
                     .eps = a->eps,
                     .weight_decay = a->weight_decay,
                     .one_minus_beta1 = 1.0f - a->beta1,
                     .one_minus_beta2 = 1.0f - a->beta2,
                     .step_size = (float)(a->lr / a->bias_correction1),
                     .bc2_sqrt = (float)sqrt(a->bias_correction2),
                     .decay = 1.0f - a->lr * a->weight_decay,
                     .decoupled = a->decoupled};
    if (be->gmode == GRAPH_EAGER) {
        CK(kern_adam(c->stream, k, p, g, m, v, n));
        return DDP_OK;
    }
    /* Inside a graph: this step's bias corrections into the key's pinned
     * slot, which the graph uploads when it runs, once the slot is free
     * (graph_slot_free: here when replaying; a capture waited before it
     * began). */
    int key = be->gkey;
    if (be->gmode == GRAPH_REPLAY)
        TRY(graph_slot_free(be, key));
    float *h = c->gscal_h + 2 * key, *d = c->gscal_d + 2 * key;
    h[0] = k.step_size;
    h[1] = k.bc2_sqrt;
    if (be->gmode == GRAPH_REPLAY)
        return DDP_OK; /* the graph holds the upload and the kernel */
    CK(cudaMemcpyAsync(d, h, 2 * sizeof(float), cudaMemcpyHostToDevice, c->stream));
    /* marks, at every launch, that the slot has been read */
    CK(cudaEventRecordWithFlags(c->gdone[key], c->stream, cudaEventRecordExternal));
    CK(kern_adam_dev(c->stream, k, d, p, g, m, v, n));
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

static int cuda_cast16(backend_t *be, dtype_t t, bool to16, float *f, uint16_t *h, size_t n)
{
    ENTER(be);
    CK(kern_cast16(impl_of(be)->stream, (int)t, to16 ? 1 : 0, f, h, n));
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// control

static int cuda_sync(backend_t *be)
{
    ENTER(be);
    /* Why: the caller needs every queued operation done (a host read,
     * memory about to be freed or reused); it also reports any fault raised
     * inside a kernel since the last wait. */
    return host_wait(be, NULL);
}

// ---------------------------------------------------------------------------
// events, the clock, the copy stream

static inline cudaEvent_t ev_of(const backend_event_t *ev) { return (cudaEvent_t)ev->h; }

static int cuda_event_init(backend_t *be, backend_event_t *ev)
{
    ENTER(be);
    cudaEvent_t e = NULL;
    /* Untimed events are cheaper to record and to wait for. */
    CK(cudaEventCreateWithFlags(&e, ev->timed ? cudaEventDefault : cudaEventDisableTiming));
    ev->h = e;
    /* made here: inside a capture nothing is created (cuda_event_record) */
    cudaEvent_t edge = NULL;
    cudaError_t r = cudaEventCreateWithFlags(&edge, cudaEventDisableTiming);
    if (r != cudaSuccess) {
        cudaEventDestroy(e);
        ev->h = NULL;
        CK(r);
    }
    ev->edge = edge;
    return DDP_OK;
}

static void cuda_event_fini(backend_t *be, backend_event_t *ev)
{
    if ((ev->h || ev->edge) && cudaSetDevice(impl_of(be)->dev) == cudaSuccess) {
        /* released once pending work no longer needs them */
        if (ev->h)
            cudaEventDestroy(ev_of(ev));
        if (ev->edge)
            cudaEventDestroy((cudaEvent_t)ev->edge);
    }
    cudaGetLastError();
    ev->h = NULL;
    ev->edge = NULL;
}

static int cuda_event_record(backend_t *be, backend_event_t *ev)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    if (be->gmode == GRAPH_CAPTURE) {
        /* Two records, as CUDA gives a record in a capture one meaning or
         * the other (the programming guide's "Cross-stream Dependencies and
         * Events"; cudaEventRecordExternal): the edge, a plain record, is
         * the capture's internal dependency, which a wait in the capture
         * (cuda_stream_wait) turns into the graph's edge and which joins a
         * waiting stream (another device's: DP's one graph of every device,
         * train/graph.c) to the capture; an
         * external record is only a record node, which no wait in the
         * capture depends on.  The event's own record is that node: every
         * launch performs it, so the host waits for it and times it.  Why
         * the node first: the edge then covers it, so a wait for the edge
         * joins the node back too (a capture ends only when every node of a
         * joined stream is waited for).  The clock's candidate anchor is
         * recorded outside, before the launch (cuda_graph_launch). */
        CK(cudaEventRecordWithFlags(ev_of(ev), c->stream, cudaEventRecordExternal));
        CK(cudaEventRecord((cudaEvent_t)ev->edge, c->stream));
        return DDP_OK;
    }
    /* A new clock anchor rides along with a timed event when the last one
     * has been placed (about once a step). */
    if (ev->timed && !c->cand_pending) {
        CK(cudaEventRecord(c->cand, c->stream));
        c->cand_pending = true;
    }
    CK(cudaEventRecord(ev_of(ev), c->stream));
    return DDP_OK;
}

static int cuda_event_query(backend_t *be, backend_event_t *ev, bool *done)
{
    ENTER(be);
    cudaError_t q = cudaEventQuery(ev_of(ev));
    *done = q == cudaSuccess;
    if (q != cudaSuccess && q != cudaErrorNotReady) {
        cudaGetLastError();
        CK(q);
    }
    return DDP_OK;
}

static int cuda_event_sync(backend_t *be, backend_event_t *ev)
{
    ENTER(be);
    return host_wait(be, ev_of(ev));
}

/* Seconds from a to b (completed timed events of this device), in double:
 * works whichever of the two came first. */
static int elapsed_s(backend_t *be, cudaEvent_t a, cudaEvent_t b, double *s)
{
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (ms <= 0.0f) { /* b may precede a: measure the other way round */
        float back = 0.0f;
        CK(cudaEventElapsedTime(&back, b, a));
        if (back > 0.0f)
            ms = -back;
    }
    *s = (double)ms * 1e-3;
    return DDP_OK;
}

int backend_cuda_event_time(backend_t *be, cudaEvent_t ev, double *t_s)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    double d;
    TRY(elapsed_s(be, c->anchor, ev, &d));
    *t_s = c->anchor_s + d;
    /* Re-anchor once the candidate has completed: it is placed from the old
     * anchor over a short interval, so no precision is lost. */
    if (c->cand_pending && cudaEventQuery(c->cand) == cudaSuccess) {
        TRY(elapsed_s(be, c->anchor, c->cand, &d));
        c->anchor_s += d;
        cudaEvent_t old = c->anchor;
        c->anchor = c->cand;
        c->cand = old;
        c->cand_pending = false;
    }
    cudaGetLastError();
    return DDP_OK;
}

double backend_cuda_anchor_s(const backend_t *be) { return ((const cuda_impl_t *)be->impl)->anchor_s; }

static int cuda_event_time(backend_t *be, backend_event_t *ev, double *t_s)
{
    return backend_cuda_event_time(be, ev_of(ev), t_s);
}

static int cuda_stream_wait(backend_t *be, backend_event_t *ev)
{
    ENTER(be);
    /* The GPU waits, the host does not; ev may be another device's.  In a
     * capture the wait is for the step's own record (backend.c holds it to
     * that): its edge, the dependency the capture keeps (cuda_event_record). */
    cudaEvent_t e = be->gmode == GRAPH_CAPTURE ? (cudaEvent_t)ev->edge : ev_of(ev);
    CK(cudaStreamWaitEvent(impl_of(be)->stream, e, 0));
    return DDP_OK;
}

static int cuda_copy_async(backend_t *be, void *dst, backend_t *src_be, const void *src,
                           size_t bytes, backend_event_t *after, backend_event_t *done)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    /* Why wait on `after`: the caller's proof that dst is free (its last
     * reader has run) and that src is complete. */
    if (after)
        CK(cudaStreamWaitEvent(c->copy, ev_of(after), 0));
    if (bytes && !src_be)
        CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->copy));
    else if (bytes)
        TRY(copy_from(be, c->copy, dst, src_be, src, bytes, "copy_async"));
    if (done)
        CK(cudaEventRecord(ev_of(done), c->copy));
    return DDP_OK;
}

static int cuda_set_precision(backend_t *be, precision_t p)
{
    ENTER(be);
    /* TF32 rounds the GEMM inputs to a 10-bit mantissa: faster on tensor
     * cores, but outside the 1e-4 agreement with the CPU; off by default.
     * bf16 needs no math mode (cublasGemmEx's bf16 inputs are tensor-core
     * math by themselves), only its operands' room, for what the replicas
     * reserved so far (setup, not a step: cudaMalloc waits for the device). */
    CUBLASCHECK(be->last_error, cublasSetMathMode(impl_of(be)->blas, p == PREC_TF32
                                                                        ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                        : CUBLAS_DEFAULT_MATH));
    if (p == PREC_BF16)
        TRY(grow_bf16(be, impl_of(be)->reserved));
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// CUDA graphs (backend.h)

static int cuda_graph_capture(backend_t *be, int key)
{
    ENTER(be);
    /* Why wait now: the capture's adam() rewrites key's slot, and once the
     * capture has begun this thread may not wait (graph_slot_free). */
    TRY(graph_slot_free(be, key));
    /* Thread-local: DP's other device threads may keep calling CUDA (their
     * own captures, a peer's event query) while this thread captures. */
    CK(cudaStreamBeginCapture(impl_of(be)->stream, cudaStreamCaptureModeThreadLocal));
    return DDP_OK;
}

static void cuda_graph_drop(backend_t *be, int key)
{
    cuda_impl_t *c = impl_of(be);
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaSetDevice(c->dev) != cudaSuccess)
        return;
    if (cudaStreamIsCapturing(c->stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
        cudaGraph_t g = NULL; /* a capture a failure left open */
        cudaStreamEndCapture(c->stream, &g);
        if (g)
            cudaGraphDestroy(g);
    }
    if (c->gexec[key])
        cudaGraphExecDestroy(c->gexec[key]);
    c->gexec[key] = NULL;
    cudaGetLastError();
}

static int cuda_graph_instantiate(backend_t *be, int key)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    cudaGraph_t g = NULL;
    CK(cudaStreamEndCapture(c->stream, &g));
    cudaError_t e = cudaGraphInstantiate(&c->gexec[key], g, 0);
    cudaGraphDestroy(g); /* the instance keeps what it needs */
    CK(e);
    return DDP_OK;
}

static int cuda_graph_launch(backend_t *be, int key)
{
    ENTER(be);
    cuda_impl_t *c = impl_of(be);
    /* The clock's next anchor rides in front of the launch (a record
     * inside the graph would be fixed at capture). */
    if (!c->cand_pending) {
        CK(cudaEventRecord(c->cand, c->stream));
        c->cand_pending = true;
    }
    CK(cudaGraphLaunch(c->gexec[key], c->stream));
    return DDP_OK;
}

/* A member's step replayed by the leader's launch: its timed events are
 * recorded by that launch, never by this thread, so the clock's next anchor
 * is recorded here (else the anchor stays at the last eager record and the
 * times, elapsed from it in float milliseconds, lose precision as the run
 * goes on).  Its stream is idle, so the anchor lands now, ahead of the
 * graph's work on this device: any point of the device's clock serves. */
static void cuda_graph_follow(backend_t *be)
{
    cuda_impl_t *c = impl_of(be);
    if (c->cand_pending || cudaSetDevice(c->dev) != cudaSuccess)
        return;
    if (cudaEventRecord(c->cand, c->stream) == cudaSuccess)
        c->cand_pending = true;
    cudaGetLastError();
}

static void cuda_destroy(backend_t *be)
{
    cuda_impl_t *c = impl_of(be);
    if (c) {
        if (cudaSetDevice(c->dev) == cudaSuccess) {
            /* nothing may still use what we free */
            if (c->stream)
                cudaStreamSynchronize(c->stream);
            if (c->copy)
                cudaStreamSynchronize(c->copy);
            for (int k = 0; k < BACKEND_GRAPH_KEYS; k++) {
                if (c->gexec[k])
                    cudaGraphExecDestroy(c->gexec[k]);
                if (c->gdone[k])
                    cudaEventDestroy(c->gdone[k]);
            }
            if (c->gscal_h)
                cudaFreeHost(c->gscal_h);
            cudaFree(c->gscal_d); /* cudaFree(NULL) does nothing */
            for (size_t i = 0; i < c->nblocks; i++) /* blocks a failed run left behind */
                cudaFree(c->blocks[i].p);
            cudaFree(c->rowloss);
            cudaFree(c->bgpart);
            cudaFree(c->bf16[0]);
            cudaFree(c->bf16[1]);
            if (c->anchor)
                cudaEventDestroy(c->anchor);
            if (c->cand)
                cudaEventDestroy(c->cand);
            if (c->blas)
                cublasDestroy(c->blas);
            cudaFree(c->blas_ws); /* after the handle that used it */
            if (c->stream)
                cudaStreamDestroy(c->stream);
            if (c->copy)
                cudaStreamDestroy(c->copy);
            cudaGetLastError(); /* teardown errors must not leak into another backend */
        }
        free(c->blocks);
        free(c);
    }
    free(be);
}

// ---------------------------------------------------------------------------
// the peak (backend_peak_flops)

/* FP32 lanes an SM issues a multiply-add on each clock, by compute
 * capability (CUDA's programming guide); 0: not known here. */
static int fp32_lanes(int major, int minor)
{
    if (major >= 9 || ((major == 8 || major == 6) && minor > 0) || major == 5)
        return 128;
    return major >= 6 ? 64 : major == 3 ? 192 : 0;
}

/* An n x n x n GEMM at the run's math (bf16: cublasGemmEx on bf16 inputs) on
 * zeroed memory, timed by events: FLOP/s, 0 on any failure. */
static double timed_gemm(backend_t *be, int n)
{
    cuda_impl_t *c = impl_of(be);
    size_t nn = (size_t)n * n;
    float *m = NULL, one = 1.0f, zero = 0.0f, ms = 0.0f;
    cudaEvent_t e[2] = {NULL, NULL};
    bool ok = cudaMalloc((void **)&m, 3 * nn * sizeof(float)) == cudaSuccess &&
              cudaEventCreate(&e[0]) == cudaSuccess && cudaEventCreate(&e[1]) == cudaSuccess &&
              cudaMemsetAsync(m, 0, 3 * nn * sizeof(float), c->stream) == cudaSuccess &&
              cudaEventRecord(e[0], c->stream) == cudaSuccess;
    if (ok && be->precision == PREC_BF16)
        ok = cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, m, CUDA_R_16BF, n,
                          m + nn, CUDA_R_16BF, n, &zero, m + 2 * nn, CUDA_R_32F, n,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    else if (ok)
        ok = cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, m, n, m + nn, n, &zero,
                         m + 2 * nn, n) == CUBLAS_STATUS_SUCCESS;
    ok = ok && cudaEventRecord(e[1], c->stream) == cudaSuccess &&
         cudaEventSynchronize(e[1]) == cudaSuccess &&
         cudaEventElapsedTime(&ms, e[0], e[1]) == cudaSuccess;
    for (int i = 0; i < 2; i++)
        if (e[i])
            cudaEventDestroy(e[i]);
    cudaFree(m);
    cudaGetLastError(); /* a failed allocation is no error of the run's */
    return ok && ms > 0.0f ? 2.0 * (double)nn * n / (1e-3 * ms) : 0.0;
}

/* The greater of the properties' FP32 lanes x clock x 2 and a cuBLAS GEMM,
 * n from 256, doubled until one takes a millisecond or n is 4096 (an
 * emulated GPU stops at the first: its figures mean nothing); its memory is
 * the calibration's own, freed at once, in no memory figure. */
static double cuda_peak(backend_t *be)
{
    cuda_impl_t *c = impl_of(be);
    if (c->peak > 0.0 || cudaSetDevice(c->dev) != cudaSuccess)
        return c->peak;
    struct cudaDeviceProp prop;
    int khz = 0;
    if (cudaGetDeviceProperties(&prop, c->dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, c->dev) == cudaSuccess)
        c->peak = 2.0 * fp32_lanes(prop.major, prop.minor) * prop.multiProcessorCount * 1e3 * khz;
    for (int n = 256; n <= 4096; n *= 2) {
        double t0 = now_s(), f = timed_gemm(be, n);
        c->peak = fmax(c->peak, f);
        if (f <= 0.0 || now_s() - t0 >= 1e-3)
            break;
    }
    return c->peak;
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
    .cast16 = cuda_cast16,
    .sync = cuda_sync,
    .reserve = cuda_reserve,
    .destroy = cuda_destroy,
    .event_init = cuda_event_init,
    .event_fini = cuda_event_fini,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_time = cuda_event_time,
    .stream_wait = cuda_stream_wait,
    .copy_async = cuda_copy_async,
    .d2h_async = cuda_d2h_async,
    .set_precision = cuda_set_precision,
    .graph_capture = cuda_graph_capture,
    .graph_instantiate = cuda_graph_instantiate,
    .graph_launch = cuda_graph_launch,
    .graph_drop = cuda_graph_drop,
    .graph_follow = cuda_graph_follow,
    .peak = cuda_peak,
};

// ---------------------------------------------------------------------------
// creation

bool backend_cuda_available(void) { return true; }

size_t backend_cuda_blas_workspace_bytes(int major)
{
    /* PyTorch's default (CublasHandlePool.cpp): 32 MiB on Hopper and
     * Blackwell (compute capability 9, 10, 12), else ":4096:2:16:8" */
    if (major == 9 || major == 10 || major == 12)
        return (size_t)4096 * 8 * 1024;
    return (size_t)4096 * 1024 * 2 + (size_t)16 * 1024 * 8;
}

static int cuda_setup(backend_t *be)
{
    cuda_impl_t *c = impl_of(be);
    CK(cudaSetDevice(c->dev));
    CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
    CUBLASCHECK(be->last_error, cublasCreate(&c->blas));
    CUBLASCHECK(be->last_error, cublasSetStream(c->blas, c->stream));
    /* Plain fp32 GEMMs unless --precision asks (that would break the 1e-4
     * agreement with the CPU); default math allows only algorithms of full
     * fp32 precision. */
    CUBLASCHECK(be->last_error, cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    /* The handle's own workspace.  Why: given none, cuBLAS (since CUDA 12.2)
     * takes one with cudaMallocAsync, which inside a captured step becomes
     * allocation nodes of the graph; PyTorch sets one per handle for this.
     * After cublasSetStream, which resets it to cuBLAS's default pool. */
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, c->dev));
    c->blas_ws_bytes = backend_cuda_blas_workspace_bytes(prop.major);
    CK(cudaMalloc(&c->blas_ws, c->blas_ws_bytes));
    backend_account(be, (long long)c->blas_ws_bytes, MEM_WORKSPACE);
    CUBLASCHECK(be->last_error, cublasSetWorkspace(c->blas, c->blas_ws, c->blas_ws_bytes));
    /* The clock's first anchor: the one wait at creation.  Its host time is
     * read before the record: on the idle stream the event completes at once,
     * while the wait may return late on a busy host, and a time read after it
     * put every event of the run that late (a span ending after the host saw
     * it end). */
    CK(cudaEventCreate(&c->anchor));
    CK(cudaEventCreate(&c->cand));
    double anchor_host_s = now_s();
    CK(cudaEventRecord(c->anchor, c->stream));
    CK(cudaEventSynchronize(c->anchor));
    c->anchor_s = anchor_host_s;
    /* CUDA graphs' per-key events and scalars: made here, as nothing may be
     * allocated once a step is being captured */
    for (int k = 0; k < BACKEND_GRAPH_KEYS; k++)
        CK(cudaEventCreateWithFlags(&c->gdone[k], cudaEventDisableTiming));
    CK(cudaHostAlloc((void **)&c->gscal_h, 2 * BACKEND_GRAPH_KEYS * sizeof(float),
                     cudaHostAllocPortable));
    CK(cudaMalloc((void **)&c->gscal_d, 2 * BACKEND_GRAPH_KEYS * sizeof(float)));
    CK(cudaMemsetAsync(c->gscal_d, 0, 2 * BACKEND_GRAPH_KEYS * sizeof(float), c->stream));
    /* (16 bytes, like the clock's events: not in the memory figures, which
     * start at 0 for a new device) */
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

void backend_cuda_account(backend_t *be, long long delta_bytes)
{
    backend_account(be, delta_bytes, MEM_COMM); /* NCCL's buffers */
}
