/* tests/cuda_emu/test_capture.c: the emulator's stream capture and graphs
 * (emu_runtime.c) against what the CUDA runtime does: work queued on a
 * capturing stream is recorded, not run; every launch runs it again, on the
 * launch stream; records made with cudaEventRecordExternal are real at every
 * launch; and what CUDA refuses during a capture -- a host synchronisation,
 * an allocation, a synchronous copy on the legacy stream, a wait for a record
 * made outside the capture -- is refused with CUDA's error and breaks the
 * capture (cudaStreamEndCapture: cudaErrorStreamCaptureInvalidated); a
 * stream that joined the capture and was not joined back fails its end
 * (cudaErrorStreamCaptureUnjoined).  Built
 * and run only against the emulator (run.sh); the backend's use of graphs is
 * tested on any GPU by tests/unit/test_cuda.c. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cuda_runtime_api.h"

static _Atomic int ran;
static void bump(void *arg) { atomic_fetch_add(&ran, *(int *)arg); }

static cudaStream_t stream(void)
{
    cudaStream_t s;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    return s;
}

static int one = 1, ten = 10;

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
    cudaEvent_t fork, join;
    cr_assert_eq(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
    cr_assert_eq(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
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

/* CUDA ends a capture only when every stream that joined it was joined back:
 * the origin waited for an event recorded after that stream's last work.  A
 * join before the last work does not count; nothing of the capture runs. */
Test(capture, an_unjoined_stream_fails_the_capture)
{
    cudaStream_t s = stream(), t = stream();
    cudaEvent_t fork, join;
    cr_assert_eq(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
    cr_assert_eq(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
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
    /* a refused call does nothing: no block was allocated */
    cr_assert_null(p);
    cudaEventDestroy(outside);
    cudaEventDestroy(ev);
    cudaStreamDestroy(other);
    cudaFree(d);
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
