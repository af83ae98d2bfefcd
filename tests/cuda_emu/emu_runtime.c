/* tests/cuda_emu/emu_runtime.c: the CUDA runtime and cuBLAS calls ddpbench
 * makes, on the CPU (see cuda_runtime_api.h).  Work runs at once, in call
 * order, so stream semantics are not tested here -- only that the right
 * device is current, the pointers are the device's, the GEMM operands fit
 * their leading dimensions, and the arithmetic is right.
 *
 * EMU_NGPU (default 2) is the number of emulated GPUs; EMU_NODRIVER makes
 * cudaGetDeviceCount answer cudaErrorInsufficientDriver; an empty
 * CUDA_VISIBLE_DEVICES answers cudaErrorNoDevice.  cudaMalloc fills memory
 * with 0xff bytes (NaNs), so a read of memory nobody zeroed shows. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublas_v2.h"
#include "cuda_runtime_api.h"

#define EMU_MAX_BLOCKS 100000
#define EMU_MAX_DEV 64

struct emu_stream {
    int dev;
    unsigned magic;
};
struct emu_blas {
    int dev;
    cudaStream_t stream;
};
typedef struct {
    char *p;
    size_t n;
    int dev;
} emu_block_t;

static __thread int cur_dev;             /* cudaSetDevice is per host thread */
static __thread cudaError_t last_err;    /* cudaGetLastError is per host thread */
static emu_block_t blocks[EMU_MAX_BLOCKS];
static int nblocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static signed char peer_on[EMU_MAX_DEV][EMU_MAX_DEV];

#define DIE(...)                                                                           \
    do {                                                                                   \
        fprintf(stderr, "cuda_emu: " __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                               \
        abort();                                                                           \
    } while (0)

static cudaError_t fail(cudaError_t e)
{
    last_err = e;
    return e;
}

// ---------------------------------------------------------------------------
// devices and errors

static int visible(cudaError_t *e)
{
    *e = cudaSuccess;
    if (getenv("EMU_NODRIVER")) {
        *e = cudaErrorInsufficientDriver;
        return 0;
    }
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && !*cvd) {
        *e = cudaErrorNoDevice;
        return 0;
    }
    const char *n = getenv("EMU_NGPU");
    int k = n ? atoi(n) : 2;
    return k < 0 ? 0 : k > EMU_MAX_DEV ? EMU_MAX_DEV : k;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    cudaError_t e;
    int k = visible(&e);
    if (e != cudaSuccess)
        return fail(e);
    *n = k;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    cudaError_t e;
    int k = visible(&e);
    if (e != cudaSuccess)
        return fail(e);
    if (d < 0 || d >= k)
        return fail(cudaErrorInvalidDevice);
    cur_dev = d;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
    *d = cur_dev;
    return cudaSuccess;
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    default: return "cudaErrorEmulated";
    }
}

const char *cudaGetErrorString(cudaError_t e) { return e ? "emulated CUDA error" : "no error"; }

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_err;
    last_err = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_err; }

// ---------------------------------------------------------------------------
// memory, with the owner device of every block

/* The block holding [p, p+n), or NULL; call with lock held. */
static emu_block_t *block_of(const void *p, size_t n)
{
    for (int i = 0; i < nblocks; i++)
        if ((const char *)p >= blocks[i].p && (const char *)p + n <= blocks[i].p + blocks[i].n)
            return &blocks[i];
    return NULL;
}

static void check_on(const void *p, size_t n, int dev, const char *what)
{
    pthread_mutex_lock(&lock);
    emu_block_t *b = block_of(p, n);
    int owner = b ? b->dev : -1;
    pthread_mutex_unlock(&lock);
    if (!b)
        DIE("%s: [%p, +%zu) is not device memory", what, p, n);
    if (owner != dev)
        DIE("%s: %p is memory of device %d, expected device %d", what, p, owner, dev);
}

void emu_check_ptr(const void *p, size_t n, const char *what) { check_on(p, n, cur_dev, what); }

void emu_check_stream(cudaStream_t s, const char *what)
{
    if (!s || s->magic != 0x5eed)
        DIE("%s: not a live stream", what);
    if (s->dev != cur_dev)
        DIE("%s: stream of device %d used while device %d is current", what, s->dev, cur_dev);
}

int emu_stream_device(cudaStream_t s) { return s->dev; }

cudaError_t cudaMalloc(void **p, size_t n)
{
    char *m = malloc(n ? n : 1);
    if (!m)
        return fail(cudaErrorMemoryAllocation);
    memset(m, 0xff, n);
    pthread_mutex_lock(&lock);
    if (nblocks == EMU_MAX_BLOCKS)
        DIE("more than %d live allocations", EMU_MAX_BLOCKS);
    blocks[nblocks++] = (emu_block_t){m, n, cur_dev};
    pthread_mutex_unlock(&lock);
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].p == p) {
            blocks[i] = blocks[--nblocks];
            pthread_mutex_unlock(&lock);
            free(p);
            return cudaSuccess;
        }
    pthread_mutex_unlock(&lock);
    DIE("cudaFree(%p): not a cudaMalloc block", p);
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    *p = malloc(n ? n : 1);
    if (!*p)
        return fail(cudaErrorMemoryAllocation);
    memset(*p, 0xab, n); /* garbage: the backend must zero it */
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    emu_check_stream(s, "cudaMemsetAsync");
    emu_check_ptr(p, n, "cudaMemsetAsync");
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s)
{
    emu_check_stream(s, "cudaMemcpyAsync");
    if (k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice)
        emu_check_ptr(d, n, "cudaMemcpyAsync destination");
    if (k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice)
        emu_check_ptr(src, n, "cudaMemcpyAsync source");
    memmove(d, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *src, int sd, size_t n,
                                cudaStream_t s)
{
    emu_check_stream(s, "cudaMemcpyPeerAsync");
    check_on(d, n, dd, "cudaMemcpyPeerAsync destination");
    check_on(src, n, sd, "cudaMemcpyPeerAsync source");
    memmove(d, src, n);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------
// streams and peers

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    if (flags != cudaStreamNonBlocking)
        DIE("cudaStreamCreateWithFlags: unexpected flags %u", flags);
    *s = calloc(1, sizeof **s);
    (*s)->dev = cur_dev;
    (*s)->magic = 0x5eed;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (!s || s->magic != 0x5eed)
        DIE("cudaStreamSynchronize: not a live stream");
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    s->magic = 0;
    free(s);
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int p)
{
    *can = d != p;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    snprintf(p->name, sizeof p->name, "Emulated GPU %d", d);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
    snprintf(id, (size_t)len, "0000:%02X:00.0", 0x10 + d);
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cublasStatus_t cublasGetProperty(libraryPropertyType t, int *v)
{
    *v = t == MAJOR_VERSION ? 13 : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cudaError_t cudaDeviceEnablePeerAccess(int p, unsigned flags)
{
    (void)flags;
    if (peer_on[cur_dev][p])
        return fail(cudaErrorPeerAccessAlreadyEnabled);
    peer_on[cur_dev][p] = 1;
    return cudaSuccess;
}

// ---------------------------------------------------------------------------
// cuBLAS

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = calloc(1, sizeof **h);
    (*h)->dev = cur_dev;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (s->dev != h->dev)
        DIE("cublasSetStream: a stream of device %d for a handle of device %d", s->dev, h->dev);
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    (void)h;
    if (m != CUBLAS_DEFAULT_MATH)
        DIE("cublasSetMathMode(%d): ddpbench must stay in plain fp32", (int)m);
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    return s ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_SUCCESS";
}

const char *cublasGetStatusString(cublasStatus_t s) { return s ? "emulated cuBLAS error" : "success"; }

/* Column-major, like cuBLAS; it checks what cuBLAS checks and the operand extents. */
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc)
{
    if (h->dev != cur_dev)
        DIE("cublasSgemm: handle of device %d while device %d is current", h->dev, cur_dev);
    emu_check_stream(h->stream, "cublasSgemm");
    int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) ||
        ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (k > 0) {
        emu_check_ptr(A, ((size_t)(ca - 1) * lda + ra) * sizeof(float), "cublasSgemm A");
        emu_check_ptr(B, ((size_t)(cb - 1) * ldb + rb) * sizeof(float), "cublasSgemm B");
    }
    emu_check_ptr(C, ((size_t)(n - 1) * ldc + m) * sizeof(float), "cublasSgemm C");
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0.0f;
            for (int l = 0; l < k; l++) {
                float a = ta == CUBLAS_OP_N ? A[i + (size_t)l * lda] : A[l + (size_t)i * lda];
                float b = tb == CUBLAS_OP_N ? B[l + (size_t)j * ldb] : B[j + (size_t)l * ldb];
                s += a * b;
            }
            float *c = &C[i + (size_t)j * ldc];
            *c = *beta == 0.0f ? *alpha * s : *alpha * s + *beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}
