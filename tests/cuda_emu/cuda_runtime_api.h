/* tests/cuda_emu/cuda_runtime_api.h: the slice of the CUDA runtime API that
 * ddpbench uses, emulated on the CPU (emu_runtime.c) so the CUDA backend can
 * be tested where there is no GPU (see run.sh).  Device memory is host memory
 * tagged with its device; every copy, launch and GEMM checks that its stream
 * and pointers belong to the calling thread's current device, as the real
 * runtime would fail otherwise.  Streams are asynchronous, as on a GPU: each
 * runs its work on its own host thread, and events, stream waits and
 * synchronisations really wait, so a missing one shows. */
#ifndef EMU_CUDA_RUNTIME_API_H
#define EMU_CUDA_RUNTIME_API_H
#include <stddef.h>
#define CUDART_VERSION 13000 /* as the real header: runtime 13.0 */
#ifdef __cplusplus
extern "C" {
#endif
typedef enum cudaError {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInsufficientDriver = 35, cudaErrorInvalidDevice = 101, cudaErrorNoDevice = 100,
    cudaErrorInvalidResourceHandle = 400, cudaErrorIllegalState = 401, cudaErrorNotReady = 600,
    cudaErrorPeerAccessAlreadyEnabled = 704, cudaErrorLaunchFailure = 719,
    /* stream capture (CUDA graphs): what the runtime answers to work it
     * cannot record, and to a capture that such work broke */
    cudaErrorStreamCaptureUnsupported = 900, cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureMerge = 902, cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureUnjoined = 904, cudaErrorStreamCaptureIsolation = 905,
    cudaErrorStreamCaptureImplicit = 906, cudaErrorCapturedEvent = 907,
    cudaErrorStreamCaptureWrongThread = 908
} cudaError_t;
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph_exec *cudaGraphExec_t;
typedef struct emu_graph_node *cudaGraphNode_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1,
                               cudaStreamCaptureStatusInvalidated = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaDeviceP2PAttr { cudaDevP2PAttrPerformanceRank = 1, cudaDevP2PAttrAccessSupported = 2, cudaDevP2PAttrNativeAtomicSupported = 3, cudaDevP2PAttrCudaArrayAccessSupported = 4 };
struct cudaDeviceProp { /* the fields ddpbench reads (the real struct has many more) */
    char name[256];
    size_t totalGlobalMem;
    int major, minor, multiProcessorCount, pciBusID, pciDeviceID, pciDomainID;
};
#define cudaStreamDefault 0x00     /* a blocking stream: ordered with the legacy stream */
#define cudaStreamNonBlocking 0x01
/* the legacy default stream (as is a null stream handle): ddpbench never uses
 * it; the emulator takes it where the capture tests use it (copies, memsets,
 * event records and waits, queries, synchronisations, emu_enqueue) and stops
 * a kernel or a cuBLAS call queued there */
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaHostAllocPortable 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaEventRecordDefault 0x00
#define cudaEventRecordExternal 0x01 /* in a capture: a real record node, visible to the host */
#define cudaEventWaitDefault 0x00
#define cudaEventWaitExternal 0x01   /* in a capture: wait for a record made outside it */
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d);
enum cudaDeviceAttr { cudaDevAttrClockRate = 13 }; /* the one ddpbench asks: kHz */
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d);
cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d);
cudaError_t cudaDeviceGetP2PAttribute(int *v, enum cudaDeviceP2PAttr a, int src, int dst);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, cudaStream_t st);
cudaError_t cudaStreamCreate(cudaStream_t *s); /* blocking (cudaStreamDefault) */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags);
cudaError_t cudaDeviceSynchronize(void);
/* synchronous, on the legacy stream (ddpbench's code never calls it; the
 * capture tests do, to see it refused) */
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
/* stream capture and graphs: work queued on a capturing stream is recorded,
 * not run; a launch queues the recorded work again, on the launch stream */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st);
/* the calling thread's capture interaction mode (default: global), swapped */
cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int p);
cudaError_t cudaDeviceEnablePeerAccess(int p, unsigned flags);
/* for the probe's provenance */
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDriverGetVersion(int *v);
/* The emulator's own checks (abort with a message on a violation). */
long emu_alloc_calls(void); /* cudaMalloc + cudaFree calls so far */
long emu_graph_launches(void); /* cudaGraphLaunch calls so far */
long emu_kernel_launches(void); /* kernels and cuBLAS GEMMs queued so far */
void emu_count_kernel(void);    /* one more of those (emu_launch, the GEMMs) */
void emu_check_stream(cudaStream_t s, const char *what); /* launches: stream on the current device */
int emu_stream_device(cudaStream_t s);
void emu_check_ptr(const void *p, size_t bytes, const char *what); /* device memory of the current device */
/* Print "cuda_emu: " and the message, then abort(): how the emulator stops a test. */
void emu_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* On a stream's thread, at once: C = alpha op(A) op(B) + beta C, column-major
 * (op: 0 none, 1 transposed), as the emulated cuBLAS computes it; A and B
 * are fp32, or bf16 bits when bf16 != 0 (the products exact, fp32 sums). */
void emu_gemm_now(int ta, int tb, int m, int n, int k, float alpha, const void *A, int lda,
                  const void *B, int ldb, int bf16, float beta, float *C, int ldc);
/* Queue fn(arg) on stream s (a kernel, a GEMM); free_arg(arg) after it ran. */
void emu_enqueue(cudaStream_t s, void (*fn)(void *), void *arg, void (*free_arg)(void *));
#ifdef __cplusplus
}
#endif
#endif
