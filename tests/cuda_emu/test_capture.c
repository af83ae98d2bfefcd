/* tests/cuda_emu/test_capture.c: the emulator's stream capture and graphs
 * (emu_runtime.c) against what the CUDA runtime does: work queued on a
 * capturing stream is recorded, not run; every launch runs it again, on the
 * launch stream; records made with cudaEventRecordExternal are real at every
 * launch; and what CUDA refuses during a capture -- a host synchronisation,
 * an allocation, a synchronous copy on the legacy stream, a wait for a record
 * made outside the capture -- is refused with CUDA's error and breaks the
 * capture (cudaStreamEndCapture: cudaErrorStreamCaptureInvalidated); a
 * stream that joined the capture and was not joined back fails its end
 * (cudaErrorStreamCaptureUnjoined), a join through other streams counting;
 * and only the origin ends it (elsewhere: cudaErrorStreamCaptureUnmatched,
 * the capture invalidated); a cuBLAS GEMM queued on a capturing stream by
 * a handle without a workspace of its own (cuBLAS would allocate one inside
 * the graph) is refused with its reason, and cublasSetStream drops the
 * workspace, as cuBLAS does.  Then CUDA's capture rules one test each
 * (capture_rules): what a capturing thread, another thread under a global
 * capture, the legacy stream, a wait across captures or for a record made
 * outside, an end from another thread, and relaxed mode may and may not do.
 * One graph may span devices and host threads (DataParallel's step): each
 * captured stream replays as a lane of its own, side by side with the
 * others, ordered only by the captured waits (capture_lanes).  Built and
 * run only against the emulator, on 2 emulated GPUs (run.sh); the backend's
 * use of graphs is tested on any GPU by tests/unit/test_cuda.c. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cublas_v2.h"
#include "cuda_runtime_api.h"
#include "nccl.h"

static _Atomic int ran;
static void bump(void *arg) { atomic_fetch_add(&ran, *(int *)arg); }

static cudaStream_t stream(void)
{
    cudaStream_t s;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

/* An event for ordering only (no timing), on the current device. */
static cudaEvent_t event(void)
{
    cudaEvent_t e;
    cr_assert_eq(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    return e;
}

static int one = 1, ten = 10, hundred_k = 100000;

typedef struct {
    cudaStream_t s;
    cudaError_t got;
} sync_call_t;

static void *sync_main(void *arg)
{
    sync_call_t *c = arg;
    cudaSetDevice(emu_stream_device(c->s));
    c->got = cudaStreamSynchronize(c->s);
    return NULL;
}

/* cudaStreamSynchronize(s) from a thread of its own (in the default,
 * global mode), for a thread that may not wait while it captures. */
static cudaError_t sync_elsewhere(cudaStream_t s)
{
    sync_call_t c = {s, cudaErrorInvalidValue};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, sync_main, &c), 0);
    pthread_join(th, NULL);
    return c.got;
}

Test(capture, records_then_replays_on_every_launch)
{
    cudaStream_t s = stream();
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, 4 * sizeof(float)), cudaSuccess);
    float h[4] = {1, 2, 3, 4}, *pin;
    cr_assert_eq(cudaHostAlloc((void **)&pin, sizeof h, 0), cudaSuccess);
    cudaEvent_t a, b;
    cr_assert_eq(cudaEventCreate(&a), cudaSuccess);
    cr_assert_eq(cudaEventCreate(&b), cudaSuccess);
    atomic_store(&ran, 0);
    long launches0 = emu_graph_launches();

    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    enum cudaStreamCaptureStatus st;
    cr_assert_eq(cudaStreamIsCapturing(s, &st), cudaSuccess);
    cr_assert_eq(st, cudaStreamCaptureStatusActive);
    cr_assert_eq(cudaEventRecordWithFlags(a, s, cudaEventRecordExternal), cudaSuccess);
    emu_enqueue(s, bump, &one, NULL);
    cr_assert_eq(cudaMemcpyAsync(d, pin, sizeof h, cudaMemcpyHostToDevice, s), cudaSuccess);
    cr_assert_eq(cudaEventRecordWithFlags(b, s, cudaEventRecordExternal), cudaSuccess);
    cudaGraph_t g;
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cr_assert_not_null(g);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(atomic_load(&ran), 0, "captured work ran during the capture");
    size_t nodes = 0;
    cr_assert_eq(cudaGraphGetNodes(g, NULL, &nodes), cudaSuccess);
    cr_assert_eq(nodes, 4);

    cudaGraphExec_t x;
    cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    cr_assert_eq(cudaGraphDestroy(g), cudaSuccess); /* the instance outlives its graph */
    for (int k = 1; k <= 3; k++) {
        memcpy(pin, h, sizeof h);
        pin[0] = (float)(10 * k); /* the copy reads the pinned source at each launch */
        cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
        cr_assert_eq(cudaEventSynchronize(b), cudaSuccess); /* an external record: real */
        float back[4];
        cr_assert_eq(cudaMemcpyAsync(back, d, sizeof back, cudaMemcpyDeviceToHost, s), cudaSuccess);
        cr_assert_eq(back[0], (float)(10 * k));
        cr_assert_eq(atomic_load(&ran), k);
        float ms = -1.0f;
        cr_assert_eq(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
        cr_assert(ms >= 0.0f);
    }
    cr_assert_eq(emu_graph_launches() - launches0, 3);
    cr_assert_eq(cudaGraphExecDestroy(x), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaFreeHost(pin);
    cudaFree(d);
    cudaStreamDestroy(s);
}

Test(capture, a_forked_stream_joins_and_leaves_with_its_origin)
{
    cudaStream_t s = stream(), t = stream();
    cudaEvent_t fork = event(), join = event();
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    emu_enqueue(s, bump, &one, NULL);
    cr_assert_eq(cudaEventRecord(fork, s), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(t, fork, 0), cudaSuccess); /* t joins the capture */
    emu_enqueue(t, bump, &ten, NULL);
    cr_assert_eq(cudaEventRecord(join, t), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(s, join, 0), cudaSuccess);
    cudaGraph_t g;
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    enum cudaStreamCaptureStatus st;
    cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
    cr_assert_eq(st, cudaStreamCaptureStatusNone, "the joined stream still captures");
    cr_assert_eq(cudaStreamSynchronize(t), cudaSuccess);
    cr_assert_eq(atomic_load(&ran), 0);
    cudaGraphExec_t x;
    cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(atomic_load(&ran), 22);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
}

/* A record made with cudaEventRecordExternal in a capture is a record node
 * and no dependency: a wait for it joins no stream to the capture (the
 * waiting stream's work runs at once), and in the capture it is no edge
 * (CUDA breaks the capture: a wait for a record not of it).  What a capture
 * that must fork and be timed does: the external record first, then a plain
 * record of another event after it, the one the other streams wait for. */
Test(capture, an_external_record_is_no_dependency)
{
    cudaStream_t s = stream(), t = stream();
    cudaEvent_t ext, fork;
    cr_assert_eq(cudaEventCreate(&ext), cudaSuccess);
    fork = event();
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cr_assert_eq(cudaEventRecordWithFlags(ext, s, cudaEventRecordExternal), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(t, ext, 0), cudaSuccess);
    enum cudaStreamCaptureStatus st;
    cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
    cr_assert_eq(st, cudaStreamCaptureStatusNone, "a wait for an external record joined the capture");
    emu_enqueue(t, bump, &ten, NULL);
    /* waited for by another thread: this one captures (thread-local) */
    cr_assert_eq(sync_elsewhere(t), cudaSuccess);
    cr_assert_eq(atomic_load(&ran), 10, "the work of a stream that did not join ran at once");
    /* a plain record after the node: t joins, and its wait is an edge */
    cr_assert_eq(cudaEventRecord(fork, s), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(t, fork, 0), cudaSuccess);
    cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
    cr_assert_eq(st, cudaStreamCaptureStatusActive);
    /* a wait in the capture for the external record: no edge, refused */
    cr_assert_eq(cudaStreamWaitEvent(t, ext, 0), cudaErrorStreamCaptureIsolation);
    cudaGetLastError();
    cudaGraph_t g = (cudaGraph_t)1;
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    cudaGetLastError();
    cr_assert_null(g);
    cudaEventDestroy(ext);
    cudaEventDestroy(fork);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
}

/* CUDA ends a capture only when every stream that joined it was joined back:
 * the origin waited for an event recorded after that stream's last work.  A
 * join before the last work does not count; nothing of the capture runs. */
Test(capture, an_unjoined_stream_fails_the_capture)
{
    cudaStream_t s = stream(), t = stream();
    cudaEvent_t fork = event(), join = event();
    for (int joined_early = 0; joined_early < 2; joined_early++) {
        atomic_store(&ran, 0);
        cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        cr_assert_eq(cudaEventRecord(fork, s), cudaSuccess);
        cr_assert_eq(cudaStreamWaitEvent(t, fork, 0), cudaSuccess);
        emu_enqueue(t, bump, &ten, NULL);
        if (joined_early) { /* joined, then more work on t */
            cr_assert_eq(cudaEventRecord(join, t), cudaSuccess);
            cr_assert_eq(cudaStreamWaitEvent(s, join, 0), cudaSuccess);
            emu_enqueue(t, bump, &one, NULL);
        }
        cudaGraph_t g = (cudaGraph_t)1;
        cudaError_t e = cudaStreamEndCapture(s, &g);
        cr_assert_eq(e, cudaErrorStreamCaptureUnjoined, "an unjoined stream: %s", cudaGetErrorName(e));
        cudaGetLastError();
        cr_assert_null(g);
        enum cudaStreamCaptureStatus st;
        cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
        cr_assert_eq(st, cudaStreamCaptureStatusNone);
        cr_assert_eq(cudaStreamSynchronize(t), cudaSuccess);
        cr_assert_eq(atomic_load(&ran), 0);
    }
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
}

/* cudaStreamEndCapture on a stream that only joined the capture: CUDA's
 * cudaErrorStreamCaptureUnmatched (the capture was not initiated there),
 * and the capture is invalidated -- the origin's own end, joins and all,
 * then answers cudaErrorStreamCaptureInvalidated and nothing runs.  What
 * makes a DP member that ended its leader's capture fail the run. */
Test(capture, a_joined_stream_cannot_end_the_capture)
{
    cudaStream_t s = stream(), t = stream();
    cudaEvent_t fork = event(), join = event();
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cr_assert_eq(cudaEventRecord(fork, s), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(t, fork, 0), cudaSuccess); /* t joins */
    emu_enqueue(t, bump, &ten, NULL);
    cr_assert_eq(cudaEventRecord(join, t), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(s, join, 0), cudaSuccess); /* and is joined back */
    cudaGraph_t g = (cudaGraph_t)1;
    cudaError_t e = cudaStreamEndCapture(t, &g);
    cr_assert_eq(e, cudaErrorStreamCaptureUnmatched, "ended on the joined stream: %s",
                 cudaGetErrorName(e));
    cudaGetLastError();
    cr_assert_null(g);
    enum cudaStreamCaptureStatus st;
    cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
    cr_assert_eq(st, cudaStreamCaptureStatusInvalidated, "the capture was not invalidated");
    g = (cudaGraph_t)1;
    e = cudaStreamEndCapture(s, &g);
    cr_assert_eq(e, cudaErrorStreamCaptureInvalidated, "the origin's end: %s", cudaGetErrorName(e));
    cudaGetLastError();
    cr_assert_null(g);
    cr_assert_eq(cudaStreamIsCapturing(t, &st), cudaSuccess);
    cr_assert_eq(st, cudaStreamCaptureStatusNone, "the joined stream still captures");
    cr_assert_eq(cudaStreamSynchronize(t), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(atomic_load(&ran), 0);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
}

/* Begin a capture, make one refused call (want: its error), and check that
 * the capture is broken and nothing it recorded ever runs. */
typedef cudaError_t (*refused_fn)(cudaStream_t s, void *ctx);

static void refused(const char *what, enum cudaStreamCaptureMode mode, refused_fn fn, void *ctx,
                    cudaError_t want)
{
    cudaStream_t s = stream();
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, mode), cudaSuccess);
    emu_enqueue(s, bump, &one, NULL);
    cudaError_t e = fn(s, ctx);
    cr_assert_eq(e, want, "%s during a capture: %s, want %s", what, cudaGetErrorName(e),
                 cudaGetErrorName(want));
    cudaGetLastError();
    cudaGraph_t g = (cudaGraph_t)1;
    e = cudaStreamEndCapture(s, &g);
    cr_assert_eq(e, cudaErrorStreamCaptureInvalidated, "%s: the capture ended with %s", what,
                 cudaGetErrorName(e));
    cr_assert_null(g);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess); /* usable again */
    cr_assert_eq(atomic_load(&ran), 0, "%s: recorded work ran", what);
    cudaStreamDestroy(s);
}

static cudaError_t do_stream_sync(cudaStream_t s, void *c) { (void)c; return cudaStreamSynchronize(s); }
static cudaError_t do_stream_query(cudaStream_t s, void *c) { (void)c; return cudaStreamQuery(s); }
static cudaError_t do_device_sync(cudaStream_t s, void *c) { (void)s; (void)c; return cudaDeviceSynchronize(); }
static cudaError_t do_malloc(cudaStream_t s, void *c)
{
    (void)s;
    return cudaMalloc((void **)c, 64);
}
static cudaError_t do_host_alloc(cudaStream_t s, void *c)
{
    (void)s;
    return cudaHostAlloc((void **)c, 64, 0);
}
static cudaError_t do_memcpy(cudaStream_t s, void *c)
{
    (void)s;
    float a = 1, b = 0;
    (void)c;
    return cudaMemcpy(&b, &a, sizeof a, cudaMemcpyHostToHost); /* the legacy stream */
}
static cudaError_t do_pageable_d2h(cudaStream_t s, void *c)
{
    float back[4];
    return cudaMemcpyAsync(back, c, sizeof back, cudaMemcpyDeviceToHost, s);
}
static cudaError_t do_wait_outside(cudaStream_t s, void *c)
{
    return cudaStreamWaitEvent(s, (cudaEvent_t)c, 0);
}
static cudaError_t do_query_captured(cudaStream_t s, void *c)
{
    cr_assert_eq(cudaEventRecord((cudaEvent_t)c, s), cudaSuccess);
    return cudaEventQuery((cudaEvent_t)c);
}
static cudaError_t do_sync_captured(cudaStream_t s, void *c)
{
    cr_assert_eq(cudaEventRecord((cudaEvent_t)c, s), cudaSuccess);
    return cudaEventSynchronize((cudaEvent_t)c);
}
/* "The operation is not permitted on an event which was last recorded in a
 * capturing stream" (cudaErrorCapturedEvent): its time too, which no launch
 * has made yet */
static cudaError_t do_elapsed_captured(cudaStream_t s, void *c)
{
    cudaEvent_t *ev = c;
    cr_assert_eq(cudaEventRecord(ev[1], s), cudaSuccess);
    float ms;
    return cudaEventElapsedTime(&ms, ev[0], ev[1]);
}

Test(capture, refuses_what_cuda_refuses)
{
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    void *p = NULL;
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, 64), cudaSuccess);
    cudaStream_t other = stream();
    cudaEvent_t outside, ev;
    cr_assert_eq(cudaEventCreate(&outside), cudaSuccess);
    cr_assert_eq(cudaEventCreate(&ev), cudaSuccess);
    cr_assert_eq(cudaEventRecord(outside, other), cudaSuccess);
    const cudaError_t U = cudaErrorStreamCaptureUnsupported;
    refused("cudaStreamSynchronize", cudaStreamCaptureModeRelaxed, do_stream_sync, NULL, U);
    refused("cudaStreamQuery", cudaStreamCaptureModeRelaxed, do_stream_query, NULL, U);
    refused("cudaDeviceSynchronize", cudaStreamCaptureModeGlobal, do_device_sync, NULL, U);
    refused("cudaMalloc", cudaStreamCaptureModeGlobal, do_malloc, &p, U);
    refused("cudaMalloc (thread-local mode)", cudaStreamCaptureModeThreadLocal, do_malloc, &p, U);
    refused("cudaHostAlloc", cudaStreamCaptureModeGlobal, do_host_alloc, &p, U);
    refused("cudaMemcpy", cudaStreamCaptureModeGlobal, do_memcpy, NULL, U);
    refused("a d2h into pageable memory", cudaStreamCaptureModeGlobal, do_pageable_d2h, d, U);
    refused("a wait for a record made outside", cudaStreamCaptureModeGlobal, do_wait_outside,
            outside, cudaErrorStreamCaptureIsolation);
    refused("cudaEventQuery of a captured record", cudaStreamCaptureModeGlobal, do_query_captured,
            ev, cudaErrorCapturedEvent);
    refused("cudaEventSynchronize of a captured record", cudaStreamCaptureModeGlobal,
            do_sync_captured, ev, cudaErrorCapturedEvent);
    cudaEvent_t timed[2];
    cr_assert_eq(cudaEventCreate(&timed[0]), cudaSuccess);
    cr_assert_eq(cudaEventCreate(&timed[1]), cudaSuccess);
    cr_assert_eq(cudaEventRecord(timed[0], other), cudaSuccess);
    cr_assert_eq(cudaEventRecord(timed[1], other), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(other), cudaSuccess);
    refused("cudaEventElapsedTime of a captured record", cudaStreamCaptureModeThreadLocal,
            do_elapsed_captured, timed, cudaErrorCapturedEvent);
    cudaEventDestroy(timed[0]);
    cudaEventDestroy(timed[1]);
    /* a refused call does nothing: no block was allocated */
    cr_assert_null(p);
    cudaEventDestroy(outside);
    cudaEventDestroy(ev);
    cudaStreamDestroy(other);
    cudaFree(d);
}

/* Capture C = A B (2 x 2, column-major) with h on s: the GEMM's status,
 * and the capture's end (its graph made into *exec when both succeeded). */
static cublasStatus_t capture_gemm(cublasHandle_t h, cudaStream_t s, const float *A,
                                   const float *B, float *C, cudaError_t *end, cudaGraphExec_t *exec)
{
    const float alpha = 1.0f, beta = 0.0f;
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, A, 2, B, 2, &beta, C, 2);
    cudaGraph_t g = NULL;
    *end = cudaStreamEndCapture(s, &g);
    if (g && *end == cudaSuccess)
        cr_assert_eq(cudaGraphInstantiate(exec, g, 0), cudaSuccess);
    if (g)
        cudaGraphDestroy(g);
    return st;
}

Test(capture, a_gemm_without_a_cublas_workspace_is_refused)
{
    cudaStream_t s = stream();
    float *A, *B, *C, *ws;
    float ha[4] = {1, 2, 3, 4}, hb[4] = {5, 6, 7, 8}, hc[4];
    cr_assert_eq(cudaMalloc((void **)&A, sizeof ha), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&B, sizeof hb), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&C, sizeof hc), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&ws, 1 << 16), cudaSuccess);
    cr_assert_eq(cudaMemcpy(A, ha, sizeof ha, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(cudaMemcpy(B, hb, sizeof hb, cudaMemcpyHostToDevice), cudaSuccess);
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    cudaError_t end;
    cudaGraphExec_t exec = NULL;
    /* no workspace: refused, the reason named, the capture broken */
    cublasStatus_t st = capture_gemm(h, s, A, B, C, &end, &exec);
    cr_assert_eq(st, CUBLAS_STATUS_NOT_SUPPORTED, "a GEMM without a workspace was captured");
    cr_assert_not_null(strstr(cublasGetStatusString(st), "no workspace set (cublasSetWorkspace)"),
                       "the refusal says: %s", cublasGetStatusString(st));
    cr_assert_eq(end, cudaErrorStreamCaptureInvalidated);
    /* with one: captured, and each launch computes C */
    cr_assert_eq(cublasSetWorkspace(h, ws, 1 << 16), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(capture_gemm(h, s, A, B, C, &end, &exec), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(end, cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(exec, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(cudaMemcpy(hc, C, sizeof hc, cudaMemcpyDeviceToHost), cudaSuccess);
    const float want[4] = {23, 34, 31, 46}; /* [1 3; 2 4] [5 7; 6 8], column-major */
    cr_assert_arr_eq(hc, want, sizeof want, "the captured GEMM: %g %g %g %g", hc[0], hc[1], hc[2], hc[3]);
    cudaGraphExecDestroy(exec);
    /* cublasSetStream resets the workspace to cuBLAS's pool: refused again */
    cr_assert_eq(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    exec = NULL;
    cr_assert_eq(capture_gemm(h, s, A, B, C, &end, &exec), CUBLAS_STATUS_NOT_SUPPORTED,
                 "cublasSetStream kept the workspace");
    cr_assert_eq(end, cudaErrorStreamCaptureInvalidated);
    /* outside a capture the pool serves: allowed */
    const float alpha = 1.0f, beta = 0.0f;
    cr_assert_eq(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, A, 2, B, 2, &beta, C, 2),
                 CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cublasDestroy(h);
    cudaFree(ws);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaStreamDestroy(s);
}

static void *malloc_elsewhere(void *arg)
{
    cudaSetDevice(0);
    void *p = NULL;
    *(cudaError_t *)arg = cudaMalloc(&p, 64);
    if (p)
        cudaFree(p);
    return NULL;
}

Test(capture, thread_local_and_relaxed_modes_allow_what_they_allow)
{
    cudaStream_t s = stream();
    atomic_store(&ran, 0);
    /* thread-local: another thread may allocate; relaxed: this one too */
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    emu_enqueue(s, bump, &one, NULL);
    cudaError_t e = cudaErrorInvalidValue;
    pthread_t th;
    pthread_create(&th, NULL, malloc_elsewhere, &e);
    pthread_join(th, NULL);
    cr_assert_eq(e, cudaSuccess, "another thread's cudaMalloc: %s", cudaGetErrorName(e));
    cudaGraph_t g;
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphDestroy(g);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    void *p = NULL;
    cr_assert_eq(cudaMalloc(&p, 64), cudaSuccess);
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphDestroy(g);
    cudaFree(p);
    /* an unmatched end: a stream that is not capturing */
    cr_assert_neq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGetLastError();
    cudaStreamSynchronize(s);
    cr_assert_eq(atomic_load(&ran), 0);
    cudaStreamDestroy(s);
}

// ---------------------------------------------------------------------------
// one graph over two devices, captured from two host threads (DataParallel's
// step): the leader begins the capture on device 0's stream and forks it;
// the member, on its own thread and device, joins by waiting for the fork,
// and the two wait for each other's records in both directions

#define N 64

/* Two lanes' ops must run side by side, as a GPU runs a graph's branches:
 * each arrival waits (up to a deadline, so a serial replay fails instead of
 * hanging) for the other lane's arrival at the same launch. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned long arrived;
    int missed; /* a lane came alone; once missed, nobody waits again */
} meet_t;

static void meet(void *arg)
{
    meet_t *m = arg;
    pthread_mutex_lock(&m->mu);
    unsigned long want = (++m->arrived + 1) / 2 * 2; /* this launch's pair complete */
    pthread_cond_broadcast(&m->cv);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    while (m->arrived < want && !m->missed)
        if (pthread_cond_timedwait(&m->cv, &m->mu, &dl) != 0)
            m->missed = 1;
    pthread_mutex_unlock(&m->mu);
}

typedef struct {
    float *x, *other, *y; /* this device's x and y, the other device's x */
    float add;
} buf_op_t;

static void scale(void *arg) /* x = 2x + add, slowly: a missing wait for it shows */
{
    buf_op_t *o = arg;
    usleep(2000);
    for (int i = 0; i < N; i++)
        o->x[i] = 2.0f * o->x[i] + o->add;
}
static void mix(void *arg) { buf_op_t *o = arg; for (int i = 0; i < N; i++) o->y[i] = o->x[i] + 0.5f * o->other[i]; }
static void settle(void *arg) { buf_op_t *o = arg; for (int i = 0; i < N; i++) o->x[i] = o->y[i] * 0.25f; }

typedef struct {
    int dev[2];
    int nccl;                /* an all-reduce of y between the devices in the step */
    cudaStream_t s[2];
    cudaEvent_t fork, join, a[2], b[2];
    float *x[2], *y[2];
    buf_op_t op[2];
    ncclComm_t comm[2];
    meet_t meet;
    pthread_barrier_t bar;
    int capture;             /* this step is captured (by the leader, on s[0]) */
} pair_t;

/* One step, as device k's thread queues it (k = 0: the leader). */
static void pair_step(pair_t *p, int k)
{
    cudaStream_t s = p->s[k];
    if (k == 0) {
        if (p->capture)
            cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
        cr_assert_eq(cudaEventRecord(p->fork, s), cudaSuccess);
    }
    pthread_barrier_wait(&p->bar); /* the fork is recorded */
    if (k == 1)
        cr_assert_eq(cudaStreamWaitEvent(s, p->fork, 0), cudaSuccess); /* joins the capture */
    emu_enqueue(s, scale, &p->op[k], NULL);
    emu_enqueue(s, meet, &p->meet, NULL);
    cr_assert_eq(cudaEventRecord(p->a[k], s), cudaSuccess);
    pthread_barrier_wait(&p->bar); /* both a's recorded: wait for the other's */
    cr_assert_eq(cudaStreamWaitEvent(s, p->a[1 - k], 0), cudaSuccess);
    emu_enqueue(s, mix, &p->op[k], NULL);
    if (p->nccl)
        cr_assert_eq(ncclAllReduce(p->y[k], p->y[k], N, ncclFloat, ncclSum, p->comm[k], s), ncclSuccess);
    cr_assert_eq(cudaEventRecord(p->b[k], s), cudaSuccess);
    pthread_barrier_wait(&p->bar); /* both b's recorded: each has read the other's x */
    cr_assert_eq(cudaStreamWaitEvent(s, p->b[1 - k], 0), cudaSuccess);
    emu_enqueue(s, settle, &p->op[k], NULL);
    if (k == 1)
        cr_assert_eq(cudaEventRecord(p->join, s), cudaSuccess);
    pthread_barrier_wait(&p->bar); /* the join is recorded */
    if (k == 0)
        cr_assert_eq(cudaStreamWaitEvent(s, p->join, 0), cudaSuccess);
}

static void *member_main(void *arg)
{
    pair_t *p = arg;
    cr_assert_eq(cudaSetDevice(p->dev[1]), cudaSuccess);
    pair_step(p, 1);
    return NULL;
}

static void pair_init(pair_t *p, int d0, int d1, int nccl)
{
    memset(p, 0, sizeof *p);
    p->dev[0] = d0;
    p->dev[1] = d1;
    p->nccl = nccl;
    pthread_mutex_init(&p->meet.mu, NULL);
    pthread_cond_init(&p->meet.cv, NULL);
    pthread_barrier_init(&p->bar, NULL, 2);
    if (nccl)
        cr_assert_eq(ncclCommInitAll(p->comm, 2, p->dev), ncclSuccess);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(cudaSetDevice(p->dev[k]), cudaSuccess);
        cr_assert_eq(cudaStreamCreateWithFlags(&p->s[k], cudaStreamNonBlocking), cudaSuccess);
        p->a[k] = event();
        p->b[k] = event();
        if (k == 0)
            p->fork = event();
        else
            p->join = event();
        cr_assert_eq(cudaMalloc((void **)&p->x[k], N * sizeof(float)), cudaSuccess);
        cr_assert_eq(cudaMalloc((void **)&p->y[k], N * sizeof(float)), cudaSuccess);
        for (int i = 0; i < N; i++) /* the emulator's device memory is the host's */
            p->x[k][i] = (float)(i + 100 * k);
    }
    for (int k = 0; k < 2; k++)
        p->op[k] = (buf_op_t){p->x[k], p->x[1 - k], p->y[k], (float)(k + 1)};
    cr_assert_eq(cudaSetDevice(p->dev[0]), cudaSuccess);
}

/* The steps run to the end; the devices' x, y into out (4 N floats). */
static void pair_finish(pair_t *p, float *out)
{
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(cudaSetDevice(p->dev[k]), cudaSuccess);
        cr_assert_eq(cudaStreamSynchronize(p->s[k]), cudaSuccess);
    }
    for (int k = 0; k < 2; k++) {
        memcpy(out + 2 * k * N, p->x[k], N * sizeof(float));
        memcpy(out + (2 * k + 1) * N, p->y[k], N * sizeof(float));
    }
    cr_assert_eq(p->meet.missed, 0, "the lanes of a step did not run side by side");
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(cudaSetDevice(p->dev[k]), cudaSuccess);
        cudaStreamDestroy(p->s[k]);
        cudaEventDestroy(p->a[k]);
        cudaEventDestroy(p->b[k]);
        cudaEventDestroy(k ? p->join : p->fork);
        cudaFree(p->x[k]);
        cudaFree(p->y[k]);
        if (p->nccl)
            ncclCommDestroy(p->comm[k]);
    }
    pthread_barrier_destroy(&p->bar);
}

/* One step queued by the two threads: eager, or captured (the graph, instantiated). */
static cudaGraphExec_t pair_run_step(pair_t *p, int capture)
{
    p->capture = capture;
    pthread_t th;
    pthread_create(&th, NULL, member_main, p);
    pair_step(p, 0);
    pthread_join(th, NULL);
    if (!capture)
        return NULL;
    cudaGraph_t g;
    cudaError_t e = cudaStreamEndCapture(p->s[0], &g);
    cr_assert_eq(e, cudaSuccess, "the two-device capture ended with %s", cudaGetErrorName(e));
    cudaGraphExec_t x;
    cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    cr_assert_eq(cudaGraphDestroy(g), cudaSuccess);
    return x;
}

#define STEPS 4

/* STEPS steps eagerly, and the same captured once and launched STEPS times
 * by the leader alone: the same bits. */
static void two_devices(int d0, int d1, int nccl)
{
    float eager[4 * N], replay[4 * N];
    pair_t p;
    pair_init(&p, d0, d1, nccl);
    for (int i = 0; i < STEPS; i++)
        pair_run_step(&p, 0);
    pair_finish(&p, eager);

    pair_init(&p, d0, d1, nccl);
    long launches0 = emu_graph_launches();
    cudaGraphExec_t x = pair_run_step(&p, 1);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(p.x[k][0], (float)(100 * k), "captured work ran during the capture");
    for (int i = 0; i < STEPS; i++)
        cr_assert_eq(cudaGraphLaunch(x, p.s[0]), cudaSuccess);
    /* the launch stream's later work follows every lane: a wait on it
     * alone sees device 1's last results */
    cr_assert_eq(cudaStreamSynchronize(p.s[0]), cudaSuccess);
    float y1[N];
    for (int i = 0; i < N; i++)
        y1[i] = p.y[1][i] * 0.25f;
    cr_assert_eq(memcmp(p.x[1], y1, sizeof y1), 0, "the launch stream did not wait for lane 1");
    cr_assert_eq(emu_graph_launches() - launches0, STEPS);
    cr_assert_eq(cudaGraphExecDestroy(x), cudaSuccess);
    pair_finish(&p, replay);
    for (int i = 0; i < 4 * N; i++)
        cr_assert_eq(replay[i], eager[i], "device %d's %s[%d]: replay %g, eager %g", i / (2 * N),
                     i / N % 2 ? "y" : "x", i % N, replay[i], eager[i]);
}

Test(capture_lanes, two_threads_two_devices_edges_both_ways, .timeout = 30)
{
    two_devices(0, 1, 0);
}

/* DataParallel over peer copies: two "devices" on one GPU, two threads. */
Test(capture_lanes, two_threads_one_device, .timeout = 30)
{
    two_devices(0, 0, 0);
}

/* The devices' parts of one all-reduce in the graph each block until the
 * other's arrives: a replay in one queue deadlocks (the timeout fails it). */
Test(capture_lanes, an_all_reduce_between_the_devices, .timeout = 30)
{
    two_devices(0, 1, 1);
}

// ---------------------------------------------------------------------------
// joins: CUDA ends a capture when the last work of every stream that joined
// it precedes the origin's end through any chain of waits, other streams'
// included; else cudaErrorStreamCaptureUnjoined

static void on(cudaStream_t q) { cr_assert_eq(cudaSetDevice(emu_stream_device(q)), cudaSuccess); }
static void rec(cudaEvent_t e, cudaStream_t q)
{
    on(q);
    cr_assert_eq(cudaEventRecord(e, q), cudaSuccess);
}
static void await(cudaStream_t q, cudaEvent_t e)
{
    on(q);
    cr_assert_eq(cudaStreamWaitEvent(q, e, 0), cudaSuccess);
}
static void work(cudaStream_t q, int *v)
{
    on(q);
    emu_enqueue(q, bump, v, NULL);
}

static int hundred = 100;

/* s on device 0 (the origin), t on device 1, u on device 0; fork recorded
 * on s, e1 on t, e2 on u.  Case 0: t's work joined through u; 1: t never
 * joined; 2: through u, but u works after its record; 3: u's work joined
 * through t.  want: EndCapture's answer; per_launch: what a launch adds. */
static void join_case(int which, cudaError_t want, int per_launch)
{
    cudaStream_t q[3];
    int dev[3] = {0, 1, 0};
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(cudaSetDevice(dev[k]), cudaSuccess);
        cr_assert_eq(cudaStreamCreateWithFlags(&q[k], cudaStreamNonBlocking), cudaSuccess);
    }
    cudaStream_t s = q[0], t = q[1], u = q[2];
    cudaEvent_t fork, e1, e2;
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    e1 = event();
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    fork = event();
    e2 = event();
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    rec(fork, s);
    await(t, fork);
    work(t, &ten);
    switch (which) {
    case 0:
    case 2:
        rec(e1, t);
        await(u, e1); /* u joins the capture here */
        rec(e2, u);
        if (which == 2)
            work(u, &hundred);
        await(s, e2);
        break;
    case 3:
        await(u, fork);
        work(u, &hundred);
        rec(e2, u);
        await(t, e2);
        rec(e1, t);
        await(s, e1);
        break;
    }
    on(s);
    cudaGraph_t g = (cudaGraph_t)1;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    cr_assert_eq(e, want, "join case %d: %s, want %s", which, cudaGetErrorName(e), cudaGetErrorName(want));
    cudaGetLastError();
    for (int k = 0; k < 3; k++) {
        enum cudaStreamCaptureStatus st;
        on(q[k]);
        cr_assert_eq(cudaStreamIsCapturing(q[k], &st), cudaSuccess);
        cr_assert_eq(st, cudaStreamCaptureStatusNone, "join case %d: stream %d still captures", which, k);
    }
    on(s);
    if (e == cudaSuccess) {
        cudaGraphExec_t x;
        cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
        cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
        cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
        cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess); /* the launch stream waits for every lane */
        cr_assert_eq(cudaGraphExecDestroy(x), cudaSuccess);
        cr_assert_eq(cudaGraphDestroy(g), cudaSuccess);
    } else {
        cr_assert_null(g);
    }
    cr_assert_eq(atomic_load(&ran), 2 * per_launch, "join case %d: %d ran", which, atomic_load(&ran));
    for (int k = 0; k < 3; k++) {
        on(q[k]);
        cudaStreamDestroy(q[k]);
    }
    cudaEventDestroy(fork);
    cudaEventDestroy(e1);
    cudaEventDestroy(e2);
}

Test(capture_lanes, joins_count_through_other_streams)
{
    join_case(0, cudaSuccess, 10);                     /* t -> u -> s */
    join_case(1, cudaErrorStreamCaptureUnjoined, 0);   /* t never joined */
    join_case(2, cudaErrorStreamCaptureUnjoined, 0);   /* u works after its join */
    join_case(3, cudaSuccess, 110);                    /* u -> t -> s */
}

// ---------------------------------------------------------------------------
// what CUDA refuses during a capture, refused on a stream that joined it from
// another thread and device -- even in thread-local mode, whose other
// restrictions bind the capturing thread only

typedef struct {
    cudaStream_t s1; /* device 1's stream, joined */
    refused_fn fn;
    void *ctx;
    cudaError_t got;
} member_call_t;

static void *member_refused(void *arg)
{
    member_call_t *m = arg;
    cudaSetDevice(1);
    m->got = m->fn(m->s1, m->ctx);
    return NULL;
}

static void refused_on_member(const char *what, refused_fn fn, void *ctx, cudaError_t want)
{
    cudaStream_t s0 = stream(), s1;
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cudaEvent_t fork, join;
    fork = event();
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    join = event();
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    emu_enqueue(s0, bump, &one, NULL);
    cr_assert_eq(cudaEventRecord(fork, s0), cudaSuccess);
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(s1, fork, 0), cudaSuccess);
    emu_enqueue(s1, bump, &ten, NULL);
    member_call_t m = {s1, fn, ctx, cudaSuccess};
    pthread_t th;
    pthread_create(&th, NULL, member_refused, &m);
    pthread_join(th, NULL);
    cr_assert_eq(m.got, want, "%s on a joined stream of device 1, from its thread: %s, want %s", what,
                 cudaGetErrorName(m.got), cudaGetErrorName(want));
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cudaEventRecord(join, s1);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cudaStreamWaitEvent(s0, join, 0);
    cudaGetLastError();
    cudaGraph_t g = (cudaGraph_t)1;
    cudaError_t e = cudaStreamEndCapture(s0, &g);
    cr_assert_eq(e, cudaErrorStreamCaptureInvalidated, "%s: the capture ended with %s", what,
                 cudaGetErrorName(e));
    cr_assert_null(g);
    cr_assert_eq(cudaStreamSynchronize(s0), cudaSuccess);
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s1), cudaSuccess); /* usable again */
    cr_assert_eq(atomic_load(&ran), 0, "%s: recorded work ran", what);
    cudaStreamDestroy(s1);
    cudaEventDestroy(join);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cudaEventDestroy(fork);
    cudaStreamDestroy(s0);
}

static cudaError_t do_query_captured_member(cudaStream_t s, void *c)
{
    cudaEventRecord((cudaEvent_t)c, s);
    return cudaEventQuery((cudaEvent_t)c);
}

Test(capture_lanes, refuses_on_every_stream_it_holds)
{
    const cudaError_t U = cudaErrorStreamCaptureUnsupported;
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    float *d1;
    cudaEvent_t ev;
    cr_assert_eq(cudaMalloc((void **)&d1, 64), cudaSuccess);
    cr_assert_eq(cudaEventCreate(&ev), cudaSuccess);
    refused_on_member("cudaStreamSynchronize", do_stream_sync, NULL, U);
    refused_on_member("cudaStreamQuery", do_stream_query, NULL, U);
    refused_on_member("cudaDeviceSynchronize", do_device_sync, NULL, U);
    refused_on_member("a d2h into pageable memory", do_pageable_d2h, d1, U);
    refused_on_member("cudaEventQuery of a captured record", do_query_captured_member, ev,
                      cudaErrorCapturedEvent);
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cudaEventDestroy(ev);
    cudaFree(d1);
}

// ---------------------------------------------------------------------------
// CUDA's capture rules, one test each, as the CUDA programming guide
// ("Stream Capture": "Prohibited and Unhandled Operations", "Invalidation")
// and the runtime API (cudaStreamBeginCapture, cudaStreamIsCapturing,
// cudaThreadExchangeStreamCaptureMode, the cudaErrorStreamCapture* errors)
// state them.  A thread is "prohibited from potentially unsafe API calls"
// while its own capture (not begun relaxed) is under way, and, in the global
// thread mode (the default), while another thread's global-mode capture is;
// the documentation does not list those calls: queries and synchronisations
// of streams, events and the device, allocations and synchronous copies are
// what CUDA refuses there with cudaErrorStreamCaptureUnsupported (PyTorch
// met an event query from its NCCL watchdog thread breaking a global
// capture: pytorch#104555).  "When an invalid operation is attempted during
// stream capture, any associated capture graphs are invalidated":
// cudaStreamEndCapture then answers cudaErrorStreamCaptureInvalidated and a
// null graph.

enum { HERE, ELSEWHERE };

typedef struct {
    refused_fn fn;
    cudaStream_t s;
    void *ctx;
    int tmode; /* the calling thread's capture interaction mode; -1: the default */
    cudaError_t got;
} call_t;

static void *call_main(void *arg)
{
    call_t *c = arg;
    cudaSetDevice(0);
    if (c->tmode >= 0) {
        enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)c->tmode;
        cr_assert_eq(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
    }
    c->got = c->fn(c->s, c->ctx);
    return NULL;
}

/* Begin a capture in `mode` on a new stream of device 0 (blocking, made
 * without cudaStreamNonBlocking, when asked), record one op in it, make the
 * call fn(s, ctx) on this thread or on another (whose thread mode is tmode,
 * -1 the default) and want its answer; then the capture must end with
 * want_end: cudaSuccess (its graph launched once runs the op) or
 * cudaErrorStreamCaptureInvalidated (no graph; nothing ran). */
static void rule(const char *what, enum cudaStreamCaptureMode mode, int blocking, int where,
                 int tmode, refused_fn fn, void *ctx, cudaError_t want, cudaError_t want_end)
{
    cudaStream_t s;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&s, blocking ? cudaStreamDefault : cudaStreamNonBlocking),
                 cudaSuccess);
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, mode), cudaSuccess);
    emu_enqueue(s, bump, &one, NULL);
    call_t c = {fn, s, ctx, tmode, (cudaError_t)-1};
    if (where == HERE) {
        c.got = fn(s, ctx);
    } else {
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, call_main, &c), 0);
        pthread_join(th, NULL);
    }
    cr_assert_eq(c.got, want, "%s: %s, want %s", what, cudaGetErrorName(c.got), cudaGetErrorName(want));
    cudaGetLastError();
    cudaGraph_t g = (cudaGraph_t)1;
    cudaError_t e = cudaStreamEndCapture(s, &g);
    cr_assert_eq(e, want_end, "%s: the capture ended with %s, want %s", what, cudaGetErrorName(e),
                 cudaGetErrorName(want_end));
    cudaGetLastError();
    if (e == cudaSuccess) {
        cudaGraphExec_t x;
        cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
        cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
        cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
        cr_assert_eq(atomic_load(&ran), 1, "%s: the graph's op ran %d times", what, atomic_load(&ran));
        cudaGraphExecDestroy(x);
        cudaGraphDestroy(g);
    } else {
        cr_assert_null(g);
        cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess); /* usable again */
        cr_assert_eq(atomic_load(&ran), 0, "%s: recorded work ran", what);
    }
    cudaStreamDestroy(s);
}

/* ctx: a stream or an event made outside the capture, on device 0 */
static cudaError_t q_stream(cudaStream_t s, void *c) { (void)s; return cudaStreamQuery((cudaStream_t)c); }
static cudaError_t sync_stream(cudaStream_t s, void *c) { (void)s; return cudaStreamSynchronize((cudaStream_t)c); }
static cudaError_t q_event(cudaStream_t s, void *c) { (void)s; return cudaEventQuery((cudaEvent_t)c); }
static cudaError_t sync_event(cudaStream_t s, void *c) { (void)s; return cudaEventSynchronize((cudaEvent_t)c); }
static cudaError_t do_free(cudaStream_t s, void *c) /* *c: a block, freed (NULL) when allowed */
{
    (void)s;
    cudaError_t e = cudaFree(*(void **)c);
    if (e == cudaSuccess)
        *(void **)c = NULL;
    return e;
}

/* ctx: an event; recorded in the capture here, queried from another thread */
static cudaError_t do_query_captured_member_elsewhere(cudaStream_t s, void *c)
{
    cr_assert_eq(cudaEventRecord((cudaEvent_t)c, s), cudaSuccess);
    call_t q = {q_event, s, c, -1, (cudaError_t)-1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, call_main, &q), 0);
    pthread_join(th, NULL);
    return q.got;
}

/* ctx: an event; queried with this thread in the relaxed mode, then back */
static cudaError_t q_event_relaxed(cudaStream_t s, void *c)
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    cr_assert_eq(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
    cudaError_t e = q_event(s, c);
    cr_assert_eq(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
    cr_assert_eq(m, cudaStreamCaptureModeRelaxed);
    return e;
}

/* What the rules below look at: a stream, a completed event, a block, all
 * made before any capture. */
typedef struct {
    cudaStream_t other;
    cudaEvent_t done;
    float *d;
} outside_t;

static void outside_init(outside_t *o)
{
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    o->other = stream();
    o->done = event();
    cr_assert_eq(cudaEventRecord(o->done, o->other), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(o->other), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&o->d, 64), cudaSuccess);
}

static void outside_fini(outside_t *o)
{
    cudaFree(o->d);
    cudaEventDestroy(o->done);
    cudaStreamDestroy(o->other);
}

/* "cudaStreamCaptureModeGlobal ... / ThreadLocal: If the local thread has an
 * ongoing capture sequence not initiated with cudaStreamCaptureModeRelaxed,
 * it is prohibited from potentially unsafe API calls": the capturing thread
 * may not query or wait for any stream or event -- not only those of its
 * capture -- nor the device (the guide: "a broader handle which encompasses
 * an active stream capture, such as a device or context handle"). */
Test(capture_rules, a_capturing_thread_may_not_query_or_wait_for_anything)
{
    outside_t o;
    outside_init(&o);
    const cudaError_t U = cudaErrorStreamCaptureUnsupported, I = cudaErrorStreamCaptureInvalidated;
    enum cudaStreamCaptureMode modes[2] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal};
    for (int m = 0; m < 2; m++) {
        rule("cudaStreamQuery of another stream", modes[m], 0, HERE, -1, q_stream, o.other, U, I);
        rule("cudaStreamSynchronize of another stream", modes[m], 0, HERE, -1, sync_stream, o.other, U, I);
        rule("cudaEventQuery of an event recorded before", modes[m], 0, HERE, -1, q_event, o.done, U, I);
        rule("cudaEventSynchronize of an event recorded before", modes[m], 0, HERE, -1, sync_event, o.done, U, I);
        rule("cudaDeviceSynchronize", modes[m], 0, HERE, -1, do_device_sync, NULL, U, I);
    }
    outside_fini(&o);
}

/* "cudaStreamCaptureModeGlobal: ... or if any other thread has a concurrent
 * capture sequence initiated with cudaStreamCaptureModeGlobal, this thread
 * is prohibited from potentially unsafe API calls": another thread's query,
 * wait, allocation or free breaks a global capture (PyTorch's NCCL watchdog,
 * pytorch#104555) ... */
Test(capture_rules, a_global_capture_prohibits_every_other_thread)
{
    outside_t o;
    outside_init(&o);
    void *p = NULL;
    const cudaError_t U = cudaErrorStreamCaptureUnsupported, I = cudaErrorStreamCaptureInvalidated;
    const enum cudaStreamCaptureMode G = cudaStreamCaptureModeGlobal;
    rule("another thread's cudaStreamQuery", G, 0, ELSEWHERE, -1, q_stream, o.other, U, I);
    rule("another thread's cudaStreamSynchronize", G, 0, ELSEWHERE, -1, sync_stream, o.other, U, I);
    rule("another thread's cudaEventQuery", G, 0, ELSEWHERE, -1, q_event, o.done, U, I);
    rule("another thread's cudaEventSynchronize", G, 0, ELSEWHERE, -1, sync_event, o.done, U, I);
    rule("another thread's cudaDeviceSynchronize", G, 0, ELSEWHERE, -1, do_device_sync, NULL, U, I);
    rule("another thread's cudaMalloc", G, 0, ELSEWHERE, -1, do_malloc, &p, U, I);
    cr_assert_null(p, "a refused cudaMalloc allocated");
    void *blk = o.d;
    rule("another thread's cudaFree", G, 0, ELSEWHERE, -1, do_free, &blk, U, I);
    cr_assert_not_null(blk, "a refused cudaFree freed");
    outside_fini(&o);
}

/* ... while under a thread-local or relaxed capture ("Concurrent capture
 * sequences in other threads are ignored") another thread queries, waits
 * for anything outside the capture, allocates and frees, and the capture
 * stands.  And the calling thread's own mode decides
 * (cudaThreadExchangeStreamCaptureMode): a thread in the thread-local or
 * relaxed mode is not prohibited by another's global capture (what PyTorch
 * gave its watchdog: pytorch#148594). */
Test(capture_rules, other_threads_go_on_under_thread_local_and_in_their_own_mode)
{
    outside_t o;
    outside_init(&o);
    const cudaError_t S = cudaSuccess;
    enum cudaStreamCaptureMode modes[2] = {cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
    for (int m = 0; m < 2; m++) {
        void *p = NULL;
        rule("another thread's cudaStreamQuery", modes[m], 0, ELSEWHERE, -1, q_stream, o.other, S, S);
        rule("another thread's cudaStreamSynchronize", modes[m], 0, ELSEWHERE, -1, sync_stream, o.other, S, S);
        rule("another thread's cudaEventQuery", modes[m], 0, ELSEWHERE, -1, q_event, o.done, S, S);
        rule("another thread's cudaEventSynchronize", modes[m], 0, ELSEWHERE, -1, sync_event, o.done, S, S);
        rule("another thread's cudaMalloc", modes[m], 0, ELSEWHERE, -1, do_malloc, &p, S, S);
        rule("another thread's cudaFree", modes[m], 0, ELSEWHERE, -1, do_free, &p, S, S);
        cr_assert_null(p);
    }
    for (int m = 0; m < 2; m++) {
        int tmode = (int)modes[m];
        rule("cudaEventQuery from a thread of its own mode", cudaStreamCaptureModeGlobal, 0, ELSEWHERE, tmode,
             q_event, o.done, S, S);
        rule("cudaStreamSynchronize from a thread of its own mode", cudaStreamCaptureModeGlobal, 0, ELSEWHERE,
             tmode, sync_stream, o.other, S, S);
    }
    /* a mode that is none of the three is refused, the thread's kept */
    enum cudaStreamCaptureMode bad = (enum cudaStreamCaptureMode)7;
    cr_assert_eq(cudaThreadExchangeStreamCaptureMode(&bad), cudaErrorInvalidValue);
    cudaGetLastError();
    enum cudaStreamCaptureMode was = cudaStreamCaptureModeRelaxed;
    cr_assert_eq(cudaThreadExchangeStreamCaptureMode(&was), cudaSuccess);
    cr_assert_eq(was, cudaStreamCaptureModeGlobal, "a thread's default mode is global");
    outside_fini(&o);
}

/* "cudaStreamCaptureModeRelaxed: The local thread is not prohibited from
 * potentially unsafe API calls.  Note that the thread is still prohibited
 * from API calls which necessarily conflict with stream capture, for
 * example, attempting cudaEventQuery on an event that was last recorded
 * inside a capture sequence": the relaxed capturing thread queries and
 * waits for what is outside its capture, allocates, frees and copies
 * synchronously; it still may not look at a record of its capture
 * (cudaErrorCapturedEvent, and the capture is invalidated like any refused
 * call's), nor wait for its capturing stream or the device that holds it. */
Test(capture_rules, what_relaxed_mode_allows_and_what_it_does_not)
{
    outside_t o;
    outside_init(&o);
    const cudaError_t S = cudaSuccess, U = cudaErrorStreamCaptureUnsupported,
                      I = cudaErrorStreamCaptureInvalidated;
    const enum cudaStreamCaptureMode R = cudaStreamCaptureModeRelaxed;
    void *p = NULL;
    rule("cudaStreamQuery of another stream", R, 0, HERE, -1, q_stream, o.other, S, S);
    rule("cudaStreamSynchronize of another stream", R, 0, HERE, -1, sync_stream, o.other, S, S);
    rule("cudaEventQuery of an event recorded before", R, 0, HERE, -1, q_event, o.done, S, S);
    rule("cudaEventSynchronize of an event recorded before", R, 0, HERE, -1, sync_event, o.done, S, S);
    rule("cudaMalloc", R, 0, HERE, -1, do_malloc, &p, S, S);
    rule("cudaFree", R, 0, HERE, -1, do_free, &p, S, S);
    rule("cudaMemcpy (no blocking stream captures)", R, 0, HERE, -1, do_memcpy, NULL, S, S);
    cudaEvent_t ev = event();
    rule("cudaEventQuery of a record in the capture", R, 0, HERE, -1, do_query_captured, ev,
         cudaErrorCapturedEvent, I);
    rule("another thread's cudaEventQuery of a record in the capture", R, 0, HERE, -1,
         do_query_captured_member_elsewhere, ev, cudaErrorCapturedEvent, I);
    rule("cudaStreamSynchronize of the capturing stream", R, 0, HERE, -1, do_stream_sync, NULL, U, I);
    rule("cudaDeviceSynchronize", R, 0, HERE, -1, do_device_sync, NULL, U, I);
    /* a thread-local capture's own thread, in the relaxed thread mode, is
     * not prohibited either (PyTorch's allocator queries so: pytorch#158352) */
    rule("cudaEventQuery from its own thread in the relaxed mode", cudaStreamCaptureModeThreadLocal, 0, HERE,
         -1, q_event_relaxed, o.done, S, S);
    cudaEventDestroy(ev);
    outside_fini(&o);
}

/* ctx: a block of device 0 (64 bytes) or an event made outside the capture */
static cudaError_t legacy_memset(cudaStream_t s, void *c) { (void)s; return cudaMemsetAsync(c, 0, 64, 0); }
static cudaError_t legacy_record(cudaStream_t s, void *c) { (void)s; return cudaEventRecord((cudaEvent_t)c, 0); }
static cudaError_t legacy_wait(cudaStream_t s, void *c) { (void)s; return cudaStreamWaitEvent(0, (cudaEvent_t)c, 0); }
static cudaError_t legacy_sync(cudaStream_t s, void *c) { (void)s; (void)c; return cudaStreamSynchronize(0); }
static cudaError_t legacy_query(cudaStream_t s, void *c) { (void)s; (void)c; return cudaStreamQuery(cudaStreamLegacy); }
static cudaError_t legacy_work(cudaStream_t s, void *c)
{
    (void)s;
    (void)c;
    cudaGetLastError();
    emu_enqueue(cudaStreamLegacy, bump, &hundred_k, NULL); /* would count 100000 if it ran */
    return cudaGetLastError();
}
static cudaError_t legacy_is_capturing(cudaStream_t s, void *c)
{
    (void)s;
    (void)c;
    enum cudaStreamCaptureStatus st;
    return cudaStreamIsCapturing(0, &st);
}

/* "When any stream in the same context is being captured, and it was not
 * created with cudaStreamNonBlocking, any attempted use of the legacy stream
 * is invalid ... It is therefore also invalid to call synchronous APIs in
 * this case" (the guide): refused with cudaErrorStreamCaptureImplicit ("a
 * disallowed implicit dependency on a current capture sequence from
 * cudaStreamLegacy"), from any thread and in every mode, the capture
 * invalidated -- but for cudaStreamIsCapturing, which "will return
 * cudaErrorStreamCaptureImplicit ... The blocking stream capture is not
 * invalidated" (the runtime API).  While only non-blocking streams capture,
 * the legacy stream serves other threads; and "Capture may not be initiated
 * if stream is cudaStreamLegacy". */
Test(capture_rules, no_legacy_stream_while_a_blocking_stream_captures)
{
    outside_t o;
    outside_init(&o);
    const cudaError_t S = cudaSuccess, M = cudaErrorStreamCaptureImplicit,
                      I = cudaErrorStreamCaptureInvalidated;
    enum cudaStreamCaptureMode modes[3] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                           cudaStreamCaptureModeRelaxed};
    for (int m = 0; m < 3; m++)
        for (int where = HERE; where <= ELSEWHERE; where++) {
            rule("a memset on the legacy stream", modes[m], 1, where, -1, legacy_memset, o.d, M, I);
            rule("a kernel on the legacy stream", modes[m], 1, where, -1, legacy_work, NULL, M, I);
            rule("a record on the legacy stream", modes[m], 1, where, -1, legacy_record, o.done, M, I);
            rule("a wait on the legacy stream", modes[m], 1, where, -1, legacy_wait, o.done, M, I);
            rule("cudaStreamSynchronize of the legacy stream", modes[m], 1, where, -1, legacy_sync, NULL, M, I);
            rule("cudaStreamQuery of the legacy stream", modes[m], 1, where, -1, legacy_query, NULL, M, I);
            rule("cudaMemcpy", modes[m], 1, where, -1, do_memcpy, NULL, M, I);
            rule("cudaStreamIsCapturing of the legacy stream", modes[m], 1, where, -1, legacy_is_capturing,
                 NULL, M, S);
        }
    /* a non-blocking stream's capture (thread-local): other threads' legacy stream */
    const enum cudaStreamCaptureMode T = cudaStreamCaptureModeThreadLocal;
    rule("another thread's memset on the legacy stream", T, 0, ELSEWHERE, -1, legacy_memset, o.d, S, S);
    rule("another thread's cudaStreamSynchronize(0)", T, 0, ELSEWHERE, -1, legacy_sync, NULL, S, S);
    rule("another thread's cudaMemcpy", T, 0, ELSEWHERE, -1, do_memcpy, NULL, S, S);
    rule("cudaStreamIsCapturing of the legacy stream", T, 0, HERE, -1, legacy_is_capturing, NULL, S, S);
    cr_assert_eq(cudaStreamBeginCapture(0, cudaStreamCaptureModeRelaxed), cudaErrorStreamCaptureUnsupported);
    cr_assert_eq(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeRelaxed),
                 cudaErrorStreamCaptureUnsupported);
    cudaGetLastError();
    outside_fini(&o);
}

/* The legacy stream eagerly: it follows what every blocking stream of its
 * device queued before it, and they follow what it queued before them (the
 * guide's "Default Stream"), but a non-blocking stream is ordered with
 * neither: cudaStreamSynchronize(0) returns while one is held back (or the
 * test times out). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate_t;

static void gate_wait(void *arg)
{
    gate_t *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

typedef struct {
    _Atomic int *from, *to;
    int add;
} step_t;

static void slow_step(void *arg) /* to = from + add, after a while: a missing order shows */
{
    step_t *st = arg;
    usleep(20000);
    atomic_store(st->to, atomic_load(st->from) + st->add);
}

Test(capture_rules, the_legacy_stream_orders_blocking_streams_only, .timeout = 20)
{
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cudaStream_t b, n;
    cr_assert_eq(cudaStreamCreate(&b), cudaSuccess);
    n = stream();
    gate_t g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    emu_enqueue(n, gate_wait, &g, NULL); /* n holds until the end */
    _Atomic int x = 0, y = 0, z = 0;
    step_t s1 = {&x, &x, 1}, s2 = {&x, &y, 10}, s3 = {&y, &z, 100};
    emu_enqueue(b, slow_step, &s1, NULL);    /* x = 1 */
    emu_enqueue(0, slow_step, &s2, NULL);    /* y = x + 10: after b's */
    emu_enqueue(b, slow_step, &s3, NULL);    /* z = y + 100: after the legacy stream's */
    cr_assert_eq(cudaStreamSynchronize(0), cudaSuccess); /* waits for b too, not for n */
    cr_assert_eq(atomic_load(&z), 111, "x %d, y %d, z %d: the legacy stream's order was not kept",
                 atomic_load(&x), atomic_load(&y), atomic_load(&z));
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    cr_assert_eq(cudaStreamSynchronize(n), cudaSuccess);
    cudaStreamDestroy(b);
    cudaStreamDestroy(n);
}

/* "It is invalid to merge two separate capture graphs by waiting on a
 * captured event from a stream which is being captured and is associated
 * with a different capture graph than the event" (the guide):
 * cudaErrorStreamCaptureMerge ("would have resulted in a merge of two
 * independent capture sequences"), with or without cudaEventWaitExternal,
 * and both captures, each associated with the wait, are invalidated. */
Test(capture_rules, no_wait_merges_two_captures)
{
    for (int ext = 0; ext < 2; ext++) {
        cudaStream_t s1 = stream(), s2 = stream();
        cudaEvent_t e = event();
        atomic_store(&ran, 0);
        cr_assert_eq(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        emu_enqueue(s1, bump, &one, NULL);
        cr_assert_eq(cudaEventRecord(e, s1), cudaSuccess);
        cr_assert_eq(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        emu_enqueue(s2, bump, &ten, NULL);
        cudaError_t r = cudaStreamWaitEvent(s2, e, ext ? cudaEventWaitExternal : 0);
        cr_assert_eq(r, cudaErrorStreamCaptureMerge, "a wait for another capture's record%s: %s",
                     ext ? " (external)" : "", cudaGetErrorName(r));
        cudaGetLastError();
        for (int k = 0; k < 2; k++) {
            cudaGraph_t g = (cudaGraph_t)1;
            r = cudaStreamEndCapture(k ? s1 : s2, &g);
            cr_assert_eq(r, cudaErrorStreamCaptureInvalidated, "capture %d ended with %s", k ? 1 : 2,
                         cudaGetErrorName(r));
            cudaGetLastError();
            cr_assert_null(g);
        }
        cr_assert_eq(cudaStreamSynchronize(s1), cudaSuccess);
        cr_assert_eq(cudaStreamSynchronize(s2), cudaSuccess);
        cr_assert_eq(atomic_load(&ran), 0);
        cudaEventDestroy(e);
        cudaStreamDestroy(s1);
        cudaStreamDestroy(s2);
    }
}

/* "It is invalid to wait on a non-captured event from a stream which is
 * being captured without specifying the cudaEventWaitExternal flag" (the
 * guide; cudaErrorStreamCaptureIsolation, "a dependency ... which crosses the
 * capture sequence boundary"): refused and invalidated without it -- an
 * event recorded before, one never recorded, one whose record was in a
 * capture that has ended -- and with it an event wait node, which every
 * launch performs (the launch waits for the event's record current then). */
static cudaError_t wait_plain(cudaStream_t s, void *c) { return cudaStreamWaitEvent(s, (cudaEvent_t)c, 0); }
static cudaError_t wait_ext(cudaStream_t s, void *c)
{
    return cudaStreamWaitEvent(s, (cudaEvent_t)c, cudaEventWaitExternal);
}

Test(capture_rules, a_non_captured_event_is_waited_for_only_as_external, .timeout = 20)
{
    outside_t o;
    outside_init(&o);
    const cudaError_t S = cudaSuccess, X = cudaErrorStreamCaptureIsolation,
                      I = cudaErrorStreamCaptureInvalidated;
    const enum cudaStreamCaptureMode T = cudaStreamCaptureModeThreadLocal;
    cudaEvent_t never = event(), ended = event();
    cudaStream_t s = stream();
    cr_assert_eq(cudaStreamBeginCapture(s, T), cudaSuccess);
    cr_assert_eq(cudaEventRecord(ended, s), cudaSuccess);
    cudaGraph_t g;
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphDestroy(g);
    rule("a wait for an event recorded before", T, 0, HERE, -1, wait_plain, o.done, X, I);
    rule("a wait for an event never recorded", T, 0, HERE, -1, wait_plain, never, X, I);
    rule("a wait for a record of an ended capture", T, 0, HERE, -1, wait_plain, ended, X, I);
    rule("an external wait for an event recorded before", T, 0, HERE, -1, wait_ext, o.done, S, S);
    /* the node waits at each launch: a launch behind a held record is held */
    gate_t gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    cudaEvent_t late = event();
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, T), cudaSuccess);
    cr_assert_eq(cudaStreamWaitEvent(s, late, cudaEventWaitExternal), cudaSuccess);
    emu_enqueue(s, bump, &one, NULL);
    cr_assert_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
    cudaGraphExec_t x;
    cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    emu_enqueue(o.other, gate_wait, &gate, NULL);
    cr_assert_eq(cudaEventRecord(late, o.other), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
    usleep(20000);
    cr_assert_eq(atomic_load(&ran), 0, "the launch did not wait for the external event");
    pthread_mutex_lock(&gate.mu);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(atomic_load(&ran), 1);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    cudaEventDestroy(late);
    cudaEventDestroy(never);
    cudaEventDestroy(ended);
    cudaStreamDestroy(s);
    outside_fini(&o);
}

/* "If mode is not cudaStreamCaptureModeRelaxed, cudaStreamEndCapture must
 * be called on this stream from the same thread" (cudaStreamBeginCapture):
 * from another, cudaErrorStreamCaptureWrongThread ("A stream capture
 * sequence not initiated with the cudaStreamCaptureModeRelaxed argument ...
 * was passed to cudaStreamEndCapture in a different thread"), and the
 * capture is invalidated (a refused call, the guide's "Invalidation"): its
 * own thread's end then fails too.  A relaxed capture ends on any thread. */
static cudaError_t end_capture(cudaStream_t s, void *c)
{
    cudaGraph_t *g = c;
    return cudaStreamEndCapture(s, g);
}

Test(capture_rules, a_capture_ends_on_the_thread_that_began_it)
{
    enum cudaStreamCaptureMode modes[2] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal};
    for (int m = 0; m < 2; m++) {
        cudaGraph_t g = (cudaGraph_t)1;
        rule("cudaStreamEndCapture from another thread", modes[m], 0, ELSEWHERE, -1, end_capture, &g,
             cudaErrorStreamCaptureWrongThread, cudaErrorStreamCaptureInvalidated);
        cr_assert_null(g, "a refused end gave a graph");
    }
    cudaStream_t s = stream();
    atomic_store(&ran, 0);
    cr_assert_eq(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    emu_enqueue(s, bump, &one, NULL);
    cudaGraph_t g = NULL;
    call_t c = {end_capture, s, &g, -1, (cudaError_t)-1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, call_main, &c), 0);
    pthread_join(th, NULL);
    cr_assert_eq(c.got, cudaSuccess, "a relaxed capture ended on another thread: %s", cudaGetErrorName(c.got));
    cudaGraphExec_t x;
    cr_assert_eq(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
    cr_assert_eq(cudaGraphLaunch(x, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(atomic_load(&ran), 1);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
}
