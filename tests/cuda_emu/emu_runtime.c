/* tests/cuda_emu/emu_runtime.c: the CUDA runtime and cuBLAS calls ddpbench
 * makes, on the CPU (see cuda_runtime_api.h).
 *
 * Streams are asynchronous, like a GPU's: each stream has its own host thread
 * that runs its queue in order (copies, memsets, kernels, GEMMs, event
 * records, waits for events), and the calling thread returns at once.  So
 * work on two streams really runs side by side, cudaStreamWaitEvent really
 * holds a stream back, cudaEventSynchronize / cudaStreamSynchronize really
 * hold the host back, and a missing one shows as a wrong result (or, under
 * ThreadSanitizer, a race report).  What the real runtime does synchronously
 * is synchronous here too: cudaFree and cudaFreeHost wait for the device,
 * an h2d copy from pageable memory reads its source at the call, a d2h copy
 * into pageable memory returns once it is done.
 *
 * Checks (abort with a message): the right device is current, pointers are
 * the device's, streams and events are live, GEMM operands fit their leading
 * dimensions.  cudaMalloc fills memory with 0xff bytes (NaNs), so a read of
 * memory nobody zeroed shows.  Stream capture is as strict as CUDA's, by
 * default: what the programming guide and the runtime API forbid during a
 * capture (a capturing thread's queries and waits of anything, the legacy
 * stream while a blocking stream captures, a wait merging two captures, an
 * end from another thread, ...) is refused with CUDA's error and
 * invalidates the capture (capture_refuses, legacy_refuses and their
 * callers; test_capture.c holds each rule; docs/gpu.md lists them).
 *
 * Environment: EMU_NGPU (default 2) emulated GPUs; EMU_NODRIVER answers
 * cudaErrorInsufficientDriver, and so does EMU_DRIVER_VERSION=N (a driver
 * older than the runtime: cudaDriverGetVersion answers N); EMU_GPU_NAME the
 * name cudaGetDeviceProperties gives (the kit matches it to a profile); an empty CUDA_VISIBLE_DEVICES answers
 * cudaErrorNoDevice; EMU_COPY_DELAY_US delays every copy by that much (a
 * slow copy engine, so a missing wait for a copy cannot go unnoticed);
 * EMU_JITTER_US delays every queued operation by a random 0..N us;
 * EMU_TF32_AS_FP32 computes TF32-mode GEMMs in plain fp32, as cuBLAS may
 * when it picks no tensor-core kernel. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cublas_v2.h"
#include "cuda_runtime_api.h"

#define EMU_MAX_BLOCKS 100000
#define EMU_MAX_DEV 64
#define STREAM_MAGIC 0x5eedu
#define EVENT_MAGIC 0xe7e7u

#define DIE(...) emu_die(__VA_ARGS__)

/* The one way the emulator stops a test: "cuda_emu: what", then abort()
 * (the emulated kernels use it too). */
void emu_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cuda_emu: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static __thread int cur_dev;          /* cudaSetDevice is per host thread */
static __thread cudaError_t last_err; /* cudaGetLastError is per host thread */

static cudaError_t fail(cudaError_t e)
{
    last_err = e;
    return e;
}

static double emu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long env_long(const char *name)
{
    const char *v = getenv(name);
    return v ? atol(v) : 0;
}

// ---------------------------------------------------------------------------
// devices and errors

static int visible(cudaError_t *e)
{
    *e = cudaSuccess;
    if (getenv("EMU_NODRIVER") || env_long("EMU_DRIVER_VERSION") > 0) {
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

#define EMU_MEM (80ull << 30) /* every emulated GPU says it has 80 GiB */
static size_t dev_used[EMU_MAX_DEV];

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    cudaError_t e;
    if (d < 0 || d >= visible(&e))
        return fail(e != cudaSuccess ? e : cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    const char *name = getenv("EMU_GPU_NAME"); /* a real GPU's, for the kit's prediction */
    snprintf(p->name, sizeof p->name, "%s", name && *name ? name : "Emulated GPU");
    p->totalGlobalMem = EMU_MEM;
    p->major = 9;
    p->multiProcessorCount = 132;
    p->pciBusID = 0x10 + d;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d)
{
    cudaError_t e;
    if (d < 0 || d >= visible(&e))
        return fail(e != cudaSuccess ? e : cudaErrorInvalidDevice);
    if (a != cudaDevAttrClockRate)
        return fail(cudaErrorInvalidValue);
    *v = 1980000; /* an H100's boost clock: the emulated GPU's peak means nothing */
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
    cudaError_t e;
    if (d < 0 || d >= visible(&e))
        return fail(e != cudaSuccess ? e : cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "00000000:%02X:00.0", 0x10 + d);
    return cudaSuccess;
}

cudaError_t cudaDeviceGetP2PAttribute(int *v, enum cudaDeviceP2PAttr a, int src, int dst)
{
    cudaError_t e;
    int k = visible(&e);
    if (src < 0 || dst < 0 || src >= k || dst >= k || src == dst)
        return fail(e != cudaSuccess ? e : cudaErrorInvalidDevice);
    *v = a == cudaDevP2PAttrPerformanceRank ? 0 : 1;
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
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
    case cudaErrorStreamCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
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
// streams: a queue and a thread each

typedef struct emu_op {
    void (*fn)(void *);
    void *arg;
    void (*free_arg)(void *);
    struct emu_op *next;
} emu_op_t;

struct emu_stream {
    unsigned magic;
    int dev;
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* work queued, an op done, or stop */
    emu_op_t *head, *tail;
    unsigned long long enq, done; /* ops queued / finished */
    int stop;
    pthread_t th;
    struct emu_stream *next;     /* the registry of live streams */
    struct emu_capture *cap;     /* the capture recording its work (cap_mu), or NULL */
    int cap_lane;                /* ... into this lane of it (-1: a broken capture) */
    int blocking;                /* made without cudaStreamNonBlocking: ordered with
                                    the legacy stream (see legacy_order) */
    int legacy;                  /* the device's legacy stream */
    struct emu_event *order_ev;  /* blocking and legacy streams: recorded on it
                                    for the other side of that order to wait for */
};

// ---------------------------------------------------------------------------
// stream capture: the recorded work (a body, shared by a graph and its
// instantiations) and the captures under way
//
// A body has a lane per captured stream (lane 0: the origin's), each the
// stream's work in its order.  A record of an event in a capture is a mark
// in its lane; a wait for it on another captured stream is an edge: that
// lane goes on only once the mark's lane has reached the mark.  Each lane
// and mark knows, for every lane, how many of its graph nodes precede it
// (through stream order and edges, however indirect): what EndCapture's
// join check reads.

#define EMU_MAX_LANES EMU_MAX_DEV
/* N_OP, N_REC and N_WAIT_EXT are graph nodes; a mark or an edge is none */
enum { N_OP, N_REC, N_WAIT_EXT, N_MARK, N_EDGE };
typedef struct {
    int type;
    void (*fn)(void *);
    void *arg;
    void (*free_arg)(void *);
    struct emu_event *ev; /* N_REC, N_WAIT_EXT */
    size_t mark;          /* N_MARK: its own; N_EDGE: the one it waits for */
} emu_node_t;

typedef unsigned long emu_seen_t[EMU_MAX_LANES]; /* graph nodes of each lane before a point */

typedef struct {
    int dev;
    emu_node_t *v;
    size_t n, cap;
    emu_seen_t seen; /* seen[own lane]: its graph nodes so far */
} emu_lane_t;

typedef struct {
    int lane;
    int used; /* an edge waits for it (else a launch skips it) */
    emu_seen_t seen;
} emu_mark_t;

typedef struct {
    _Atomic int refs;
    emu_lane_t lanes[EMU_MAX_LANES];
    int nlanes;
    emu_mark_t *marks;
    size_t nmarks, marks_cap;
} emu_body_t;

struct emu_capture {
    unsigned long id;
    int mode;             /* enum cudaStreamCaptureMode */
    pthread_t thread;     /* the thread that began it */
    int invalid;          /* refused work broke it: EndCapture fails */
    struct emu_stream *origin;
    emu_body_t *body;
    struct emu_capture *next; /* the active captures */
};

#define GRAPH_MAGIC 0x96a9u
struct emu_graph {
    unsigned magic;
    emu_body_t *body;
};
struct emu_graph_exec {
    unsigned magic;
    emu_body_t *body;
    pthread_mutex_t mu;                     /* one launch at a time */
    struct emu_stream *lane[EMU_MAX_LANES]; /* where a launch runs lanes 1.. */
    struct emu_event *clock[EMU_MAX_LANES]; /* each lane's marks, at a launch */
};

/* Captures under way; the lock also guards every stream's cap and cap_lane,
 * every event's cap_id and cap_mark, and the bodies being recorded. */
static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_capture *active_caps;
static unsigned long next_cap_id;

static void lane_add(emu_body_t *b, int lane, emu_node_t n);
static int lane_new(emu_body_t *b, int dev);
static size_t mark_add(emu_body_t *b, int lane);
static void edge_add(emu_body_t *b, int lane, size_t mark);

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_stream *live_streams;

static void jitter(void)
{
    static __thread unsigned seed;
    long us = env_long("EMU_JITTER_US");
    if (us <= 0)
        return;
    if (!seed)
        seed = (unsigned)(uintptr_t)&seed ^ (unsigned)time(NULL);
    usleep((useconds_t)(rand_r(&seed) % (us + 1)));
}

static void *stream_main(void *arg)
{
    struct emu_stream *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head)
            break; /* stop, and nothing left to run */
        emu_op_t *op = s->head;
        pthread_mutex_unlock(&s->mu);
        jitter();
        op->fn(op->arg);
        if (op->free_arg)
            op->free_arg(op->arg);
        pthread_mutex_lock(&s->mu);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->done++;
        pthread_cond_broadcast(&s->cv);
        free(op);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

void emu_check_stream(cudaStream_t s, const char *what)
{
    if (!s || s == cudaStreamLegacy)
        DIE("%s: the legacy stream (ddpbench never uses it; the emulator takes it for copies, "
            "memsets, events, queries and synchronisations only)", what);
    if (s->magic != STREAM_MAGIC)
        DIE("%s: not a live stream", what);
    if (s->dev != cur_dev)
        DIE("%s: stream of device %d used while device %d is current", what, s->dev, cur_dev);
}

int emu_stream_device(cudaStream_t s) { return s->dev; }

static struct emu_stream *stream_new(int dev, int blocking, int legacy);

/* The legacy stream of each device, made at its first use (never freed). */
static struct emu_stream *legacy_streams[EMU_MAX_DEV];
static pthread_mutex_t legacy_mu = PTHREAD_MUTEX_INITIALIZER;

static struct emu_stream *legacy_stream(int dev)
{
    pthread_mutex_lock(&legacy_mu);
    if (!legacy_streams[dev])
        legacy_streams[dev] = stream_new(dev, 0, 1);
    struct emu_stream *s = legacy_streams[dev];
    pthread_mutex_unlock(&legacy_mu);
    if (!s)
        DIE("out of memory making the legacy stream");
    return s;
}

/* s as a stream of the current device: a null handle and cudaStreamLegacy
 * are its legacy stream. */
static cudaStream_t stream_arg(cudaStream_t s, const char *what)
{
    if (!s || s == cudaStreamLegacy)
        return legacy_stream(cur_dev);
    emu_check_stream(s, what);
    return s;
}

/* The guide's "Prohibited and Unhandled Operations": "When any stream in the
 * same context is being captured, and it was not created with
 * cudaStreamNonBlocking, any attempted use of the legacy stream is invalid"
 * (it encompasses those streams), and so is a synchronous API such as
 * cudaMemcpy, which uses it: true when a blocking stream of device dev
 * captures (as origin or joined), whichever thread asks and whatever the
 * mode; the capture is broken too when `invalidate` (cudaStreamIsCapturing
 * on the legacy stream answers without breaking it, as documented). */
static int legacy_refuses(int dev, int invalidate)
{
    int hit = 0;
    pthread_mutex_lock(&cap_mu); /* before reg_lock, as in cudaStreamEndCapture */
    pthread_mutex_lock(&reg_lock);
    for (struct emu_stream *t = live_streams; t; t = t->next)
        if (t->dev == dev && t->blocking && t->cap) {
            if (invalidate)
                t->cap->invalid = 1;
            hit = 1;
        }
    pthread_mutex_unlock(&reg_lock);
    pthread_mutex_unlock(&cap_mu);
    return hit;
}

static void legacy_order(cudaStream_t s);
static unsigned long long enqueue_raw(cudaStream_t s, void (*fn)(void *), void *arg,
                                      void (*free_arg)(void *));

/* Queue an op; returns its number in the stream (what wait_op waits for).
 * On a capturing stream the op is recorded instead (0): it runs when the
 * graph is launched; on a capture that refused work, it is dropped (the
 * caller answers cudaErrorStreamCaptureInvalidated, see queued()). */
static unsigned long long enqueue(cudaStream_t s, void (*fn)(void *), void *arg,
                                  void (*free_arg)(void *))
{
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = s->cap;
    if (c) {
        if (!c->invalid)
            lane_add(c->body, s->cap_lane, (emu_node_t){N_OP, fn, arg, free_arg, NULL, 0});
        pthread_mutex_unlock(&cap_mu);
        if (c->invalid && free_arg)
            free_arg(arg);
        return 0;
    }
    pthread_mutex_unlock(&cap_mu);
    legacy_order(s);
    return enqueue_raw(s, fn, arg, free_arg);
}

/* Queue an op on s as it is (no capture, no implicit order). */
static unsigned long long enqueue_raw(cudaStream_t s, void (*fn)(void *), void *arg,
                                      void (*free_arg)(void *))
{
    emu_op_t *op = calloc(1, sizeof *op);
    if (!op)
        DIE("out of memory queueing an op");
    op->fn = fn;
    op->arg = arg;
    op->free_arg = free_arg;
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    unsigned long long n = ++s->enq;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* What an async call on s answers once its work is queued (or recorded). */
static cudaError_t queued(cudaStream_t s)
{
    pthread_mutex_lock(&cap_mu);
    int bad = s->cap && s->cap->invalid;
    pthread_mutex_unlock(&cap_mu);
    return bad ? fail(cudaErrorStreamCaptureInvalidated) : cudaSuccess;
}

/* The calling thread's capture interaction mode
 * (cudaThreadExchangeStreamCaptureMode; global by default, as in CUDA). */
static __thread int thread_mode = cudaStreamCaptureModeGlobal;

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
        *mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue);
    int old = thread_mode;
    thread_mode = (int)*mode;
    *mode = (enum cudaStreamCaptureMode)old;
    return cudaSuccess;
}

/* A "potentially unsafe API call" (the runtime API's
 * cudaThreadExchangeStreamCaptureMode) -- one that makes the host wait for a
 * stream, an event or the device, allocates or frees, or copies
 * synchronously -- from a thread that is prohibited from it: true when a
 * capture prohibits this thread, which the call then breaks, as the real
 * runtime does ("any associated capture graphs are invalidated").  A thread
 * whose own capture was not begun relaxed is prohibited, whatever its mode
 * (but relaxed); a thread in the global mode (the default) also by another
 * thread's global-mode capture.  Which calls those are the documentation
 * does not list: these are the ones CUDA is known to refuse with
 * cudaErrorStreamCaptureUnsupported (a capturing thread's host sync, and
 * an event query from another thread during a global capture, which PyTorch's
 * NCCL watchdog met: pytorch#104555). */
static int capture_refuses(void)
{
    int hit = 0;
    if (thread_mode == cudaStreamCaptureModeRelaxed)
        return 0;
    pthread_mutex_lock(&cap_mu);
    for (struct emu_capture *c = active_caps; c; c = c->next) {
        int own = pthread_equal(c->thread, pthread_self());
        if ((own && c->mode != cudaStreamCaptureModeRelaxed) ||
            (!own && c->mode == cudaStreamCaptureModeGlobal && thread_mode == cudaStreamCaptureModeGlobal)) {
            c->invalid = 1;
            hit = 1;
        }
    }
    pthread_mutex_unlock(&cap_mu);
    return hit;
}

/* A host wait on s itself while s records: refused, and the capture broken. */
static int capturing_refuses(cudaStream_t s)
{
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = s->cap;
    if (c)
        c->invalid = 1;
    pthread_mutex_unlock(&cap_mu);
    return c != NULL;
}

void emu_enqueue(cudaStream_t s, void (*fn)(void *), void *arg, void (*free_arg)(void *))
{
    s = stream_arg(s, "emu_enqueue");
    if (s->legacy && legacy_refuses(s->dev, 1)) { /* dropped: cudaGetLastError says why */
        fail(cudaErrorStreamCaptureImplicit);
        if (free_arg)
            free_arg(arg);
        return;
    }
    enqueue(s, fn, arg, free_arg);
    queued(s); /* a launch into a broken capture: the launcher's cudaGetLastError says so */
}

/* Wait until op n of stream s has run. */
static void wait_op(cudaStream_t s, unsigned long long n)
{
    pthread_mutex_lock(&s->mu);
    while (s->done < n)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void drain(cudaStream_t s)
{
    pthread_mutex_lock(&s->mu);
    unsigned long long n = s->enq;
    pthread_mutex_unlock(&s->mu);
    wait_op(s, n);
}

/* Wait for every stream of device dev (-1: of every device). */
static void drain_device(int dev)
{
    pthread_mutex_lock(&reg_lock);
    for (struct emu_stream *s = live_streams; s; s = s->next)
        if (dev < 0 || s->dev == dev)
            drain(s);
    pthread_mutex_unlock(&reg_lock);
}

/* Wait for what the legacy stream of dev encompasses: itself and the
 * device's blocking streams. */
static void drain_legacy(int dev)
{
    pthread_mutex_lock(&reg_lock);
    for (struct emu_stream *s = live_streams; s; s = s->next)
        if (s->dev == dev && (s->blocking || s->legacy))
            drain(s);
    pthread_mutex_unlock(&reg_lock);
}

static struct emu_event *event_internal(int dev);

/* A stream of device dev, running (a graph's lanes have streams of their
 * own); blocking (no cudaStreamNonBlocking) or the device's legacy stream:
 * ordered with the other side (legacy_order). */
static struct emu_stream *stream_new(int dev, int blocking, int legacy)
{
    struct emu_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->dev = dev;
    s->magic = STREAM_MAGIC;
    s->blocking = blocking;
    s->legacy = legacy;
    if (blocking || legacy)
        s->order_ev = event_internal(dev);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->th, NULL, stream_main, s) != 0)
        DIE("cannot start a stream thread");
    pthread_mutex_lock(&reg_lock);
    s->next = live_streams;
    live_streams = s;
    pthread_mutex_unlock(&reg_lock);
    return s;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags)
{
    if (flags != cudaStreamNonBlocking && flags != cudaStreamDefault)
        DIE("cudaStreamCreateWithFlags: unexpected flags %u", flags);
    struct emu_stream *s = stream_new(cur_dev, flags == cudaStreamDefault, 0);
    if (!s)
        return fail(cudaErrorMemoryAllocation);
    *out = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }

/* Whether the host may look at s now (a query or a synchronisation):
 * cudaSuccess, or the refusal, every capture it concerns broken.  Refused:
 * the legacy stream while a blocking stream captures
 * (cudaErrorStreamCaptureImplicit); a stream a capture holds, in every mode
 * ("It is invalid to synchronize or query the execution status of a stream
 * which is being captured"); any stream, from a thread a capture prohibits
 * (capture_refuses). */
static cudaError_t stream_look(cudaStream_t s)
{
    int implicit = s->legacy && legacy_refuses(s->dev, 1);
    int held = capturing_refuses(s);
    int prohibited = capture_refuses();
    return implicit ? fail(cudaErrorStreamCaptureImplicit)
           : held || prohibited ? fail(cudaErrorStreamCaptureUnsupported)
                                : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    s = stream_arg(s, "cudaStreamSynchronize");
    cudaError_t r = stream_look(s);
    if (r != cudaSuccess)
        return r;
    if (s->legacy)
        drain_legacy(s->dev);
    else
        drain(s);
    return cudaSuccess;
}

static int stream_idle(cudaStream_t s)
{
    pthread_mutex_lock(&s->mu);
    int idle = s->done == s->enq;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    s = stream_arg(s, "cudaStreamQuery");
    cudaError_t r = stream_look(s);
    if (r != cudaSuccess)
        return r;
    int idle = 1;
    if (s->legacy) { /* the legacy stream and every blocking stream of its device */
        pthread_mutex_lock(&reg_lock);
        for (struct emu_stream *t = live_streams; t; t = t->next)
            if (t->dev == s->dev && (t->blocking || t->legacy))
                idle &= stream_idle(t);
        pthread_mutex_unlock(&reg_lock);
    } else {
        idle = stream_idle(s);
    }
    return idle ? cudaSuccess : cudaErrorNotReady;
}

/* Unregister s, let its queued work finish, and free it. */
static void stream_free(struct emu_stream *s)
{
    pthread_mutex_lock(&reg_lock);
    for (struct emu_stream **p = &live_streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    pthread_mutex_unlock(&reg_lock);
    /* The real runtime lets queued work finish first, then releases it. */
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    if (s->order_ev) /* freed once no op of the other side waits for it */
        cudaEventDestroy(s->order_ev);
    s->magic = 0;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s || s == cudaStreamLegacy || s->magic != STREAM_MAGIC)
        DIE("cudaStreamDestroy: not a live stream");
    stream_free(s);
    return cudaSuccess;
}

/* A host wait for all of device dev while a capture holds one of its
 * streams (whichever thread or device began it): refused in every mode,
 * as a wait for that stream is, and the capture broken. */
static int device_capture_refuses(int dev)
{
    int hit = 0;
    pthread_mutex_lock(&cap_mu); /* before reg_lock, as in cudaStreamEndCapture */
    pthread_mutex_lock(&reg_lock);
    for (struct emu_stream *s = live_streams; s; s = s->next)
        if (s->dev == dev && s->cap) {
            s->cap->invalid = 1;
            hit = 1;
        }
    pthread_mutex_unlock(&reg_lock);
    pthread_mutex_unlock(&cap_mu);
    return hit;
}

cudaError_t cudaDeviceSynchronize(void)
{
    int refused = capture_refuses();           /* each breaks the captures it concerns */
    refused |= device_capture_refuses(cur_dev);
    if (refused)
        return fail(cudaErrorStreamCaptureUnsupported);
    drain_device(cur_dev);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------
// events: a generation counter each; a record completes its generation when
// its stream reaches it, a wait captures the generation current at the call

struct emu_event {
    unsigned magic;
    int dev;
    unsigned flags;
    unsigned long long recorded, completed;
    double t;      /* when the last completed record ran */
    int refs;      /* queued ops (and graphs) that still use it */
    int destroyed; /* cudaEventDestroy came while ops still used it */
    unsigned long cap_id; /* its last record was made in this capture (0: none), */
    size_t cap_mark;      /* ... where it put this mark (NO_MARK: an external record) */
};

/* cap_mark of an event whose last record in a capture was made with
 * cudaEventRecordExternal: a record node, no mark for other streams to join
 * or wait on (see cudaEventRecordWithFlags). */
#define NO_MARK ((size_t)-1)

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cv = PTHREAD_COND_INITIALIZER;

static void check_event(cudaEvent_t e, const char *what)
{
    if (!e || e->magic != EVENT_MAGIC)
        DIE("%s: not a live event", what);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags)
{
    if (flags & ~(unsigned)cudaEventDisableTiming)
        DIE("cudaEventCreateWithFlags: unexpected flags %u", flags);
    struct emu_event *e = calloc(1, sizeof *e);
    if (!e)
        return fail(cudaErrorMemoryAllocation);
    e->magic = EVENT_MAGIC;
    e->dev = cur_dev;
    e->flags = flags;
    *out = e;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

/* Drop a queued op's hold on e (ev_mu held); free it if it was destroyed. */
static void event_unref_locked(struct emu_event *e)
{
    if (--e->refs == 0 && e->destroyed) {
        e->magic = 0;
        free(e);
    }
}

typedef struct {
    struct emu_event *e;
    unsigned long long gen;
} ev_op_t;

static void run_record(void *arg)
{
    ev_op_t *o = arg;
    pthread_mutex_lock(&ev_mu);
    if (o->gen > o->e->completed) {
        o->e->completed = o->gen;
        o->e->t = emu_now();
    }
    event_unref_locked(o->e);
    pthread_cond_broadcast(&ev_cv);
    pthread_mutex_unlock(&ev_mu);
}

static void run_wait(void *arg)
{
    ev_op_t *o = arg;
    pthread_mutex_lock(&ev_mu);
    while (o->e->completed < o->gen)
        pthread_cond_wait(&ev_cv, &ev_mu);
    event_unref_locked(o->e);
    pthread_mutex_unlock(&ev_mu);
}

static ev_op_t *ev_op(struct emu_event *e, unsigned long long gen)
{
    ev_op_t *o = malloc(sizeof *o);
    if (!o)
        DIE("out of memory");
    o->e = e;
    o->gen = gen;
    e->refs++;
    return o;
}

/* An untimed event of device dev for the emulator's own use. */
static struct emu_event *event_internal(int dev)
{
    struct emu_event *e = calloc(1, sizeof *e);
    if (!e)
        DIE("out of memory");
    e->magic = EVENT_MAGIC;
    e->dev = dev;
    e->flags = cudaEventDisableTiming;
    return e;
}

/* The legacy stream's order, before an op is queued on s: an op on the
 * legacy stream follows what every blocking stream of its device queued
 * before it, and an op on a blocking stream follows what the legacy stream
 * queued before it (the programming guide's "Default Stream": the legacy
 * stream synchronises with all blocking streams of its context; a
 * cudaStreamNonBlocking stream with none).  On the GPU, not the host: the
 * other side records its tail, s waits for that record. */
static void legacy_order(cudaStream_t s)
{
    if (!s->blocking && !s->legacy)
        return;
    pthread_mutex_lock(&reg_lock);
    for (struct emu_stream *t = live_streams; t; t = t->next) {
        if (t == s || t->dev != s->dev || !(s->legacy ? t->blocking : t->legacy) || stream_idle(t))
            continue;
        pthread_mutex_lock(&ev_mu);
        unsigned long long gen = ++t->order_ev->recorded;
        ev_op_t *rec = ev_op(t->order_ev, gen), *wait = ev_op(t->order_ev, gen);
        pthread_mutex_unlock(&ev_mu);
        enqueue_raw(t, run_record, rec, free);
        enqueue_raw(s, run_wait, wait, free);
    }
    pthread_mutex_unlock(&reg_lock);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned flags)
{
    check_event(e, "cudaEventRecord");
    s = stream_arg(s, "cudaEventRecord");
    if (s->legacy && legacy_refuses(s->dev, 1))
        return fail(cudaErrorStreamCaptureImplicit);
    if (e->dev != s->dev)
        DIE("cudaEventRecord: an event of device %d on a stream of device %d", e->dev, s->dev);
    if (flags & ~(unsigned)cudaEventRecordExternal)
        DIE("cudaEventRecordWithFlags: unexpected flags %u", flags);
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = s->cap;
    if (c) {
        /* In a capture: a mark that the streams waiting on it depend on;
         * with cudaEventRecordExternal instead a record node, which every
         * launch performs (so the host can wait for it and time it) and
         * nothing else: CUDA makes no cross-stream dependency of an external
         * record, so a wait for it neither joins a stream to the capture nor
         * orders lanes (PyTorch's torch.cuda.Event(external=True): "create
         * event record and event wait nodes, or create an internal
         * cross-stream dependency"). */
        e->cap_id = c->id;
        e->cap_mark = 0; /* a broken capture's: a wait for it joins the broken capture */
        if (!c->invalid) {
            if (flags & cudaEventRecordExternal) {
                pthread_mutex_lock(&ev_mu);
                e->refs++; /* the graph holds it */
                pthread_mutex_unlock(&ev_mu);
                lane_add(c->body, s->cap_lane, (emu_node_t){N_REC, NULL, NULL, NULL, e, 0});
                e->cap_mark = NO_MARK;
            } else {
                e->cap_mark = mark_add(c->body, s->cap_lane);
            }
        }
        int bad = c->invalid;
        pthread_mutex_unlock(&cap_mu);
        return bad ? fail(cudaErrorStreamCaptureInvalidated) : cudaSuccess;
    }
    e->cap_id = 0;
    pthread_mutex_unlock(&cap_mu);
    pthread_mutex_lock(&ev_mu);
    ev_op_t *o = ev_op(e, ++e->recorded);
    pthread_mutex_unlock(&ev_mu);
    enqueue(s, run_record, o, free);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    return cudaEventRecordWithFlags(e, s, cudaEventRecordDefault);
}

/* Whether capture id is under way (cap_mu held). */
static struct emu_capture *capture_of(unsigned long id)
{
    for (struct emu_capture *c = active_caps; c && id; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    check_event(e, "cudaStreamWaitEvent");
    if (s && s != cudaStreamLegacy && s->magic != STREAM_MAGIC)
        DIE("cudaStreamWaitEvent: not a live stream");
    if (!s || s == cudaStreamLegacy)
        s = legacy_stream(cur_dev);
    if (flags & ~(unsigned)cudaEventWaitExternal)
        DIE("cudaStreamWaitEvent: unexpected flags %u", flags);
    if (s->legacy && legacy_refuses(s->dev, 1))
        return fail(cudaErrorStreamCaptureImplicit);
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *ec = capture_of(e->cap_id);
    struct emu_capture *c = s->cap;
    /* An external record is no mark: outside the capture the wait is for
     * the event's last eager record, inside it a wait for a record not of
     * the capture (below) */
    int marked = ec && e->cap_mark != NO_MARK;
    if (!c && ec && s->legacy) {
        /* the legacy stream cannot capture ("The legacy stream is not
         * supported for stream capture", cudaStreamIsCapturing): a wait
         * that would join it to one is an implicit dependency on it */
        ec->invalid = 1;
        pthread_mutex_unlock(&cap_mu);
        return fail(cudaErrorStreamCaptureImplicit);
    }
    if (!c && marked && !(flags & cudaEventWaitExternal)) {
        /* A wait for a record made in a capture pulls s into it (a fork),
         * whatever its device and whoever calls: its work from now on is
         * recorded too, in a lane of its own, after what it waits for. */
        s->cap = c = ec;
        s->cap_lane = c->invalid ? -1 : lane_new(c->body, s->dev);
    }
    if (c) {
        cudaError_t r = cudaSuccess;
        if (c->invalid) {
            r = cudaErrorStreamCaptureInvalidated;
        } else if (ec && ec != c) {
            /* "It is invalid to merge two separate capture graphs by waiting
             * on a captured event from a stream which is being captured and
             * is associated with a different capture graph than the event"
             * (cudaErrorStreamCaptureMerge, with or without
             * cudaEventWaitExternal); both are associated with the wait, so
             * both are invalidated */
            c->invalid = 1;
            ec->invalid = 1;
            r = cudaErrorStreamCaptureMerge;
        } else if (ec == c && marked && !(flags & cudaEventWaitExternal)) {
            /* recorded earlier in this capture: an edge from its mark
             * (nothing to do on the stream that made the record) */
            if (c->body->marks[e->cap_mark].lane != s->cap_lane)
                edge_add(c->body, s->cap_lane, e->cap_mark);
        } else if (flags & cudaEventWaitExternal) {
            pthread_mutex_lock(&ev_mu);
            e->refs++;
            pthread_mutex_unlock(&ev_mu);
            lane_add(c->body, s->cap_lane, (emu_node_t){N_WAIT_EXT, NULL, NULL, NULL, e, 0});
        } else {
            /* a record made outside the capture (or an external record,
             * which is no dependency), waited for without
             * cudaEventWaitExternal: CUDA refuses it and breaks the capture */
            c->invalid = 1;
            r = cudaErrorStreamCaptureIsolation;
        }
        pthread_mutex_unlock(&cap_mu);
        return r == cudaSuccess ? r : fail(r);
    }
    pthread_mutex_unlock(&cap_mu);
    /* The stream waits for the record that is the event's last at this call
     * (a later record does not count), as on a GPU; across devices too. */
    pthread_mutex_lock(&ev_mu);
    ev_op_t *o = ev_op(e, e->recorded);
    pthread_mutex_unlock(&ev_mu);
    enqueue(s, run_wait, o, free);
    return cudaSuccess;
}

/* A host look at an event whose last record is in a capture under way
 * (cudaErrorCapturedEvent: "not permitted on an event which was last
 * recorded in a capturing stream"): refused to every thread in every mode,
 * relaxed included ("the thread is still prohibited from API calls which
 * necessarily conflict with stream capture, for example, attempting
 * cudaEventQuery on an event that was last recorded inside a capture
 * sequence"), and the capture broken like any refused call's. */
static int captured_event(cudaEvent_t e)
{
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = capture_of(e->cap_id);
    if (c)
        c->invalid = 1;
    pthread_mutex_unlock(&cap_mu);
    return c != NULL;
}

/* Whether the host may look at e now: cudaSuccess, or the refusal (a
 * captured record; any event, from a thread a capture prohibits:
 * cudaEventQuery and cudaEventSynchronize are the runtime's known "unsafe
 * API calls", see capture_refuses), every capture it concerns broken. */
static cudaError_t event_look(cudaEvent_t e)
{
    int captured = captured_event(e);
    int prohibited = capture_refuses();
    return captured ? fail(cudaErrorCapturedEvent)
           : prohibited ? fail(cudaErrorStreamCaptureUnsupported)
                        : cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    check_event(e, "cudaEventQuery");
    cudaError_t r = event_look(e);
    if (r != cudaSuccess)
        return r;
    pthread_mutex_lock(&ev_mu);
    int done = e->completed >= e->recorded;
    pthread_mutex_unlock(&ev_mu);
    return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    check_event(e, "cudaEventSynchronize");
    cudaError_t r = event_look(e);
    if (r != cudaSuccess)
        return r;
    pthread_mutex_lock(&ev_mu);
    unsigned long long want = e->recorded;
    while (e->completed < want)
        pthread_cond_wait(&ev_cv, &ev_mu);
    pthread_mutex_unlock(&ev_mu);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    check_event(a, "cudaEventElapsedTime");
    check_event(b, "cudaEventElapsedTime");
    /* a record in a capture has no time yet (the error's "The operation is
     * not permitted on an event which was last recorded in a capturing
     * stream": any operation; the guide names only the query) */
    int captured = captured_event(a);
    captured |= captured_event(b);
    if (captured)
        return fail(cudaErrorCapturedEvent);
    if ((a->flags | b->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&ev_mu);
    cudaError_t r = cudaSuccess;
    if (!a->recorded || !b->recorded)
        r = cudaErrorInvalidResourceHandle;
    else if (a->completed < a->recorded || b->completed < b->recorded)
        r = cudaErrorNotReady;
    else /* a float of milliseconds, as the real one */
        *ms = (float)((b->t - a->t) * 1e3);
    pthread_mutex_unlock(&ev_mu);
    return r == cudaSuccess ? r : fail(r);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    check_event(e, "cudaEventDestroy");
    pthread_mutex_lock(&ev_mu);
    if (e->refs == 0) { /* queued records and waits keep it alive until they ran */
        e->magic = 0;
        free(e);
    } else {
        e->destroyed = 1;
    }
    pthread_mutex_unlock(&ev_mu);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------
// memory, with the owner device of every block

typedef struct {
    char *p;
    size_t n;
    int dev; /* -1: pinned host memory */
} emu_block_t;

static emu_block_t blocks[EMU_MAX_BLOCKS];
static int nblocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static signed char peer_on[EMU_MAX_DEV][EMU_MAX_DEV];

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
    int owner = b ? b->dev : -2;
    pthread_mutex_unlock(&lock);
    if (!b || owner < 0)
        DIE("%s: [%p, +%zu) is not device memory", what, p, n);
    if (owner != dev)
        DIE("%s: %p is memory of device %d, expected device %d", what, p, owner, dev);
}

void emu_check_ptr(const void *p, size_t n, const char *what) { check_on(p, n, cur_dev, what); }

static int is_pinned(const void *p, size_t n)
{
    pthread_mutex_lock(&lock);
    emu_block_t *b = block_of(p, n);
    int pinned = b && b->dev == -1;
    pthread_mutex_unlock(&lock);
    return pinned;
}

static void add_block(char *m, size_t n, int dev)
{
    pthread_mutex_lock(&lock);
    if (nblocks == EMU_MAX_BLOCKS)
        DIE("more than %d live allocations", EMU_MAX_BLOCKS);
    blocks[nblocks++] = (emu_block_t){m, n, dev};
    if (dev >= 0)
        dev_used[dev] += n;
    pthread_mutex_unlock(&lock);
}

/* Remove p's block; its device (-1 pinned), or -2 when p is no block of that kind. */
static int remove_block(void *p, int pinned)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].p == p && (blocks[i].dev == -1) == pinned) {
            int dev = blocks[i].dev;
            if (dev >= 0)
                dev_used[dev] -= blocks[i].n;
            blocks[i] = blocks[--nblocks];
            pthread_mutex_unlock(&lock);
            return dev;
        }
    pthread_mutex_unlock(&lock);
    return -2;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    pthread_mutex_lock(&lock);
    size_t used = dev_used[cur_dev];
    pthread_mutex_unlock(&lock);
    *total_b = EMU_MEM;
    *free_b = EMU_MEM - used;
    return cudaSuccess;
}

/* cudaMalloc and cudaFree calls so far, every device: each synchronises the
 * whole device on a real GPU, so a test holds a training step to none
 * (emu_alloc_calls, declared weak by the tests that ask). */
static _Atomic long alloc_calls;

long emu_alloc_calls(void) { return alloc_calls; }

cudaError_t cudaMalloc(void **p, size_t n)
{
    if (capture_refuses())
        return fail(cudaErrorStreamCaptureUnsupported);
    alloc_calls++;
    char *m = malloc(n ? n : 1);
    if (!m)
        return fail(cudaErrorMemoryAllocation);
    memset(m, 0xff, n);
    add_block(m, n ? n : 1, cur_dev);
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    if (capture_refuses())
        return fail(cudaErrorStreamCaptureUnsupported);
    alloc_calls++;
    int dev = remove_block(p, 0);
    if (dev < 0)
        DIE("cudaFree(%p): not a cudaMalloc block", p);
    drain_device(dev); /* cudaFree waits for the device, as the real one does */
    free(p);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    (void)flags;
    if (capture_refuses())
        return fail(cudaErrorStreamCaptureUnsupported);
    char *m = malloc(n ? n : 1);
    if (!m)
        return fail(cudaErrorMemoryAllocation);
    memset(m, 0xab, n); /* garbage: the backend must zero it */
    add_block(m, n ? n : 1, -1);
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    if (!p)
        return cudaSuccess;
    if (capture_refuses())
        return fail(cudaErrorStreamCaptureUnsupported);
    if (remove_block(p, 1) != -1)
        DIE("cudaFreeHost(%p): not a cudaHostAlloc block", p);
    drain_device(-1); /* the real one synchronises too */
    free(p);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------
// copies and memsets, queued

typedef struct {
    void *dst;
    const void *src;
    size_t n;
    int v;
    void *owned; /* a private copy of a pageable source, freed after the op */
} copy_op_t;

static void copy_delay(void)
{
    long us = env_long("EMU_COPY_DELAY_US");
    if (us > 0)
        usleep((useconds_t)us);
}

static void run_copy(void *arg)
{
    copy_op_t *o = arg;
    copy_delay();
    memmove(o->dst, o->src, o->n);
}

static void run_memset(void *arg)
{
    copy_op_t *o = arg;
    memset(o->dst, o->v, o->n);
}

static void free_copy(void *arg)
{
    copy_op_t *o = arg;
    free(o->owned);
    free(o);
}

static copy_op_t *copy_op(void *d, const void *s, size_t n)
{
    copy_op_t *o = calloc(1, sizeof *o);
    if (!o)
        DIE("out of memory");
    o->dst = d;
    o->src = s;
    o->n = n;
    return o;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    s = stream_arg(s, "cudaMemsetAsync");
    if (s->legacy && legacy_refuses(s->dev, 1))
        return fail(cudaErrorStreamCaptureImplicit);
    emu_check_ptr(p, n, "cudaMemsetAsync");
    copy_op_t *o = copy_op(p, NULL, n);
    o->v = v;
    enqueue(s, run_memset, o, free_copy);
    return queued(s);
}

cudaError_t cudaMemcpyAsync(void *d, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s)
{
    s = stream_arg(s, "cudaMemcpyAsync");
    if (s->legacy && legacy_refuses(s->dev, 1))
        return fail(cudaErrorStreamCaptureImplicit);
    if (k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice)
        emu_check_ptr(d, n, "cudaMemcpyAsync destination");
    if (k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice)
        emu_check_ptr(src, n, "cudaMemcpyAsync source");
    if (((k == cudaMemcpyDeviceToHost && !is_pinned(d, n)) ||
         (k == cudaMemcpyHostToDevice && !is_pinned(src, n))) && capturing_refuses(s))
        /* pageable memory: the runtime would copy at the call (a host wait
         * for the stream), which a capture cannot record */
        return fail(cudaErrorStreamCaptureUnsupported);
    copy_op_t *o = copy_op(d, src, n);
    if (k == cudaMemcpyHostToDevice && !is_pinned(src, n)) {
        /* Pageable memory: the real runtime reads it before returning. */
        o->owned = malloc(n ? n : 1);
        if (!o->owned)
            DIE("out of memory");
        memcpy(o->owned, src, n);
        o->src = o->owned;
    }
    unsigned long long id = enqueue(s, run_copy, o, free_copy);
    if (k == cudaMemcpyDeviceToHost && !is_pinned(d, n))
        wait_op(s, id); /* into pageable memory: returns once it is done */
    return queued(s);
}

cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *src, int sd, size_t n,
                                cudaStream_t s)
{
    emu_check_stream(s, "cudaMemcpyPeerAsync");
    check_on(d, n, dd, "cudaMemcpyPeerAsync destination");
    check_on(src, n, sd, "cudaMemcpyPeerAsync source");
    enqueue(s, run_copy, copy_op(d, src, n), free_copy);
    return queued(s);
}

// ---------------------------------------------------------------------------
// peers

cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int p)
{
    *can = d != p;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    /* EMU_DRIVER_VERSION: a driver older than the runtime (12040: CUDA
     * 12.4's R550), which cudaGetDeviceCount refuses as CUDA does */
    long old = env_long("EMU_DRIVER_VERSION");
    *v = getenv("EMU_NODRIVER") ? 0 : old > 0 ? (int)old : CUDART_VERSION;
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
    pthread_mutex_lock(&lock);
    int was = peer_on[cur_dev][p];
    peer_on[cur_dev][p] = 1;
    pthread_mutex_unlock(&lock);
    return was ? fail(cudaErrorPeerAccessAlreadyEnabled) : cudaSuccess;
}

// ---------------------------------------------------------------------------
// cuBLAS

struct emu_blas {
    int dev;
    cudaStream_t stream;
    cublasMath_t math;
    void *ws; /* cublasSetWorkspace's, NULL: none (cuBLAS's own pool) */
    size_t ws_bytes;
};

/* Why the last cuBLAS call of this thread was refused (cublasGetStatusString
 * says it, as the runtime's refusals name theirs by their error). */
static __thread const char *blas_why;

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = calloc(1, sizeof **h);
    (*h)->dev = cur_dev;
    (*h)->math = CUBLAS_DEFAULT_MATH;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (!s || s == cudaStreamLegacy || s->magic != STREAM_MAGIC)
        DIE("cublasSetStream: not a live non-legacy stream (ddpbench never uses the legacy stream)");
    if (s->dev != h->dev)
        DIE("cublasSetStream: a stream of device %d for a handle of device %d", s->dev, h->dev);
    h->stream = s;
    /* cuBLAS: cublasSetStream unconditionally resets the workspace to the
     * default pool, so a workspace is set after the stream */
    h->ws = NULL;
    h->ws_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (h->dev != cur_dev)
        DIE("cublasSetWorkspace: handle of device %d while device %d is current", h->dev, cur_dev);
    if (ws && bytes)
        emu_check_ptr(ws, bytes, "cublasSetWorkspace");
    h->ws = bytes ? ws : NULL;
    h->ws_bytes = ws ? bytes : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    if (m != CUBLAS_DEFAULT_MATH && m != CUBLAS_TF32_TENSOR_OP_MATH)
        DIE("cublasSetMathMode(%d): ddpbench uses fp32 or, with --tf32, TF32", (int)m);
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS         ? "CUBLAS_STATUS_SUCCESS"
           : s == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                              : "CUBLAS_STATUS_INVALID_VALUE";
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    return !s ? "success" : s == CUBLAS_STATUS_NOT_SUPPORTED && blas_why ? blas_why : "emulated cuBLAS error";
}

typedef struct {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int tf32;
    const uint16_t *A16, *B16; /* cublasGemmEx: bf16 operands instead of A, B */
} gemm_op_t;

/* n bf16 values at p as fp32 (exact: bf16 is fp32's top half) */
static float *bf16_expand(const uint16_t *p, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f)
        DIE("out of memory");
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)p[i] << 16;
        memcpy(&f[i], &u, sizeof u);
    }
    return f;
}

/* TF32: 10 explicit mantissa bits, rounded to nearest. */
static float to_tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) /* not inf/nan */
        u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&x, &u, sizeof u);
    return x;
}

/* C = alpha op(A) op(B) + beta C, column-major, each element summed over l
 * in ascending order; loops arranged so the inner one runs along memory. */
static void run_gemm(void *arg)
{
    const gemm_op_t *g = arg;
    const float *A = g->A, *B = g->B;
    float *ta = NULL, *tb = NULL;
    if (g->A16) { /* bf16 tensor cores: the products exact, summed in fp32 */
        A = ta = bf16_expand(g->A16, (size_t)g->lda * (size_t)(g->ta == CUBLAS_OP_N ? g->k : g->m));
        B = tb = bf16_expand(g->B16, (size_t)g->ldb * (size_t)(g->tb == CUBLAS_OP_N ? g->n : g->k));
    } else if (g->tf32) { /* tensor cores see the operands rounded to TF32 */
        size_t na = (size_t)g->lda * (size_t)(g->ta == CUBLAS_OP_N ? g->k : g->m);
        size_t nb = (size_t)g->ldb * (size_t)(g->tb == CUBLAS_OP_N ? g->n : g->k);
        ta = malloc(na * sizeof *ta);
        tb = malloc(nb * sizeof *tb);
        if (!ta || !tb)
            DIE("out of memory");
        for (size_t i = 0; i < na; i++)
            ta[i] = to_tf32(A[i]);
        for (size_t i = 0; i < nb; i++)
            tb[i] = to_tf32(B[i]);
        A = ta;
        B = tb;
    }
    float *acc = malloc((size_t)(g->m > 0 ? g->m : 1) * sizeof *acc);
    if (!acc)
        DIE("out of memory");
    for (int j = 0; j < g->n; j++) {
        float *s = acc;
        if (g->ta == CUBLAS_OP_N) { /* s[i] += A(i,l) B(l,j), column by column */
            for (int i = 0; i < g->m; i++)
                s[i] = 0.0f;
            for (int l = 0; l < g->k; l++) {
                float b = g->tb == CUBLAS_OP_N ? B[l + (size_t)j * g->ldb] : B[j + (size_t)l * g->ldb];
                const float *a = A + (size_t)l * g->lda;
                for (int i = 0; i < g->m; i++)
                    s[i] += a[i] * b;
            }
        } else { /* op(A)(i,:) is a column of A: dot products */
            float *col = malloc((size_t)(g->k ? g->k : 1) * sizeof *col);
            if (!col)
                DIE("out of memory");
            for (int l = 0; l < g->k; l++)
                col[l] = g->tb == CUBLAS_OP_N ? B[l + (size_t)j * g->ldb] : B[j + (size_t)l * g->ldb];
            for (int i = 0; i < g->m; i++) {
                const float *a = A + (size_t)i * g->lda;
                float t = 0.0f;
                for (int l = 0; l < g->k; l++)
                    t += a[l] * col[l];
                s[i] = t;
            }
            free(col);
        }
        for (int i = 0; i < g->m; i++) {
            float *c = &g->C[i + (size_t)j * g->ldc];
            *c = g->beta == 0.0f ? g->alpha * s[i] : g->alpha * s[i] + g->beta * *c;
        }
    }
    free(acc);
    free(ta);
    free(tb);
}

void emu_gemm_now(int ta, int tb, int m, int n, int k, float alpha, const void *A, int lda,
                  const void *B, int ldb, int bf16, float beta, float *C, int ldc)
{
    gemm_op_t g = {(cublasOperation_t)ta, (cublasOperation_t)tb, m, n, k, lda, ldb, ldc, alpha,
                   beta, bf16 ? NULL : A, bf16 ? NULL : B, C, 0, bf16 ? A : NULL, bf16 ? B : NULL};
    run_gemm(&g);
}

/* Kernels (emu_launch) and GEMMs queued so far, every device and stream: what
 * the backend's launches_per_step must count (a test compares them). */
static _Atomic long kernel_launches;

long emu_kernel_launches(void) { return kernel_launches; }
void emu_count_kernel(void) { kernel_launches++; }

/* What cuBLAS checks of a product (column-major) and the operands' extents,
 * for cublasSgemm and cublasGemmEx alike (A and B of `ab_size`-byte elements,
 * C of floats): CUBLAS_STATUS_INVALID_VALUE for bad sizes, SUCCESS for an
 * empty product (nothing to queue), -1 to go on and queue it. */
static int gemm_check(const char *name, cublasHandle_t h, cublasOperation_t ta,
                      cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                      const void *B, int ldb, size_t ab_size, const void *C, int ldc)
{
    char what[64];
    if (h->dev != cur_dev)
        DIE("%s: handle of device %d while device %d is current", name, h->dev, cur_dev);
    emu_check_stream(h->stream, name);
    /* Since CUDA 12.2 cuBLAS takes the workspace of a handle given none with
     * cudaMallocAsync, which inside a stream capture becomes allocation nodes
     * of the graph (PyTorch sets one per handle for this): refused here, and
     * the capture broken, so a capture that leans on it cannot pass. */
    blas_why = NULL;
    if (!h->ws && capturing_refuses(h->stream)) {
        blas_why = "a GEMM on a capturing stream with no workspace set (cublasSetWorkspace): "
                   "cuBLAS would allocate its workspace inside the graph";
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0 || lda < (ra > 1 ? ra : 1) || ldb < (rb > 1 ? rb : 1) ||
        ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (k > 0) {
        snprintf(what, sizeof what, "%s A", name);
        emu_check_ptr(A, ((size_t)(ca - 1) * lda + ra) * ab_size, what);
        snprintf(what, sizeof what, "%s B", name);
        emu_check_ptr(B, ((size_t)(cb - 1) * ldb + rb) * ab_size, what);
    }
    snprintf(what, sizeof what, "%s C", name);
    emu_check_ptr(C, ((size_t)(n - 1) * ldc + m) * sizeof(float), what);
    return -1;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc)
{
    int st = gemm_check("cublasSgemm", h, ta, tb, m, n, k, A, lda, B, ldb, sizeof(float), C, ldc);
    if (st >= 0)
        return (cublasStatus_t)st;
    gemm_op_t *g = malloc(sizeof *g);
    if (!g)
        DIE("out of memory");
    /* alpha and beta are host scalars: read now, as cuBLAS does by default. */
    *g = (gemm_op_t){ta, tb, m, n, k, lda, ldb, ldc, *alpha, *beta, A, B, C,
                     /* TF32 math allows tensor cores, it does not force them:
                      * cuBLAS may still pick a plain fp32 kernel (a small
                      * product), which EMU_TF32_AS_FP32 plays */
                     h->math == CUBLAS_TF32_TENSOR_OP_MATH && !getenv("EMU_TF32_AS_FP32"), NULL, NULL};
    emu_count_kernel();
    enqueue(h->stream, run_gemm, g, free);
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------
// the legacy stream's synchronous copy (refused during a capture)

cudaError_t cudaMemcpy(void *d, const void *src, size_t n, enum cudaMemcpyKind k)
{
    (void)k;
    /* a synchronous API: it queues on the legacy stream and waits for it, so
     * it is refused while a blocking stream captures (the guide: "It is
     * therefore also invalid to call synchronous APIs in this case"), and
     * to a thread a capture prohibits (capture_refuses) */
    int implicit = legacy_refuses(cur_dev, 1);
    int prohibited = capture_refuses();
    if (implicit)
        return fail(cudaErrorStreamCaptureImplicit);
    if (prohibited)
        return fail(cudaErrorStreamCaptureUnsupported);
    /* after the blocking streams' earlier work (legacy_order), not the
     * non-blocking streams': ddpbench's streams are all non-blocking */
    cudaStream_t l = legacy_stream(cur_dev);
    wait_op(l, enqueue(l, run_copy, copy_op(d, src, n), free_copy));
    return cudaSuccess;
}

// ---------------------------------------------------------------------------
// stream capture and graphs
//
// A capture records the work queued on its stream and on every stream that
// joined it (by waiting for an event recorded in it: any device, any host
// thread), each stream's in a lane of its own, the waits between them as
// edges (see emu_body_t).  A launch replays the lanes side by side, as a GPU
// runs a graph's branches: lane 0 on the launch stream, every other one on
// a stream the instantiation made on that lane's device; a lane holds back
// at an edge until the lane it waits for has passed the mark.  So the
// devices' parts of one collective in a graph meet, as on GPUs, where a
// replay in one queue would deadlock.  The launch stream then waits for
// every lane: its later work follows the whole graph.  Event records made
// with cudaEventRecordExternal are records at every launch (the host can
// wait for them and time them); waits with cudaEventWaitExternal wait at
// every launch for the event's record current then.  The same op arguments
// serve every launch: a kernel reads the pointers and scalars it was
// captured with.

static _Atomic long graph_launches;

long emu_graph_launches(void) { return graph_launches; }

/* Room for one more of n elements of size elem in *v (capacity *cap,
 * doubling from first). */
static void grow(void *v, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return;
    size_t c = *cap ? 2 * *cap : first;
    void *p = realloc(*(void **)v, c * elem);
    if (!p)
        DIE("out of memory recording a graph");
    *(void **)v = p;
    *cap = c;
}

/* The body grows under cap_mu while its capture is under way. */
static void lane_add(emu_body_t *b, int lane, emu_node_t n)
{
    emu_lane_t *l = &b->lanes[lane];
    grow(&l->v, &l->cap, l->n, sizeof *l->v, 64);
    l->v[l->n++] = n;
    if (n.type == N_OP || n.type == N_REC || n.type == N_WAIT_EXT)
        l->seen[lane]++;
}

/* A lane for a stream of device dev that joins the capture; its index. */
static int lane_new(emu_body_t *b, int dev)
{
    if (b->nlanes == EMU_MAX_LANES)
        DIE("a capture of more than %d streams", EMU_MAX_LANES);
    b->lanes[b->nlanes].dev = dev;
    return b->nlanes++;
}

/* A record in the lane: a mark, which knows what precedes it. */
static size_t mark_add(emu_body_t *b, int lane)
{
    grow(&b->marks, &b->marks_cap, b->nmarks, sizeof *b->marks, 16);
    emu_mark_t *m = &b->marks[b->nmarks];
    m->lane = lane;
    m->used = 0;
    memcpy(m->seen, b->lanes[lane].seen, sizeof m->seen);
    lane_add(b, lane, (emu_node_t){N_MARK, NULL, NULL, NULL, NULL, b->nmarks});
    return b->nmarks++;
}

/* A wait in the lane for a mark of another: an edge; what preceded the mark
 * precedes the lane's work from now on. */
static void edge_add(emu_body_t *b, int lane, size_t mark)
{
    emu_mark_t *m = &b->marks[mark];
    emu_lane_t *l = &b->lanes[lane];
    m->used = 1;
    for (int k = 0; k < b->nlanes; k++)
        if (m->seen[k] > l->seen[k])
            l->seen[k] = m->seen[k];
    lane_add(b, lane, (emu_node_t){N_EDGE, NULL, NULL, NULL, NULL, mark});
}

static void event_release(struct emu_event *e)
{
    pthread_mutex_lock(&ev_mu);
    event_unref_locked(e);
    pthread_mutex_unlock(&ev_mu);
}

static void body_unref(void *arg)
{
    emu_body_t *b = arg;
    if (atomic_fetch_sub(&b->refs, 1) != 1)
        return;
    for (int k = 0; k < b->nlanes; k++) {
        emu_lane_t *l = &b->lanes[k];
        for (size_t i = 0; i < l->n; i++) {
            emu_node_t *n = &l->v[i];
            if (n->type == N_OP && n->free_arg)
                n->free_arg(n->arg);
            if (n->type == N_REC || n->type == N_WAIT_EXT)
                event_release(n->ev);
        }
        free(l->v);
    }
    free(b->marks);
    free(b);
}

static void nothing(void *arg) { (void)arg; }

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    /* "Capture may not be initiated if stream is cudaStreamLegacy" (the
     * runtime API; its error is not named: cudaErrorStreamCaptureUnsupported) */
    if (!s || s == cudaStreamLegacy)
        return fail(cudaErrorStreamCaptureUnsupported);
    emu_check_stream(s, "cudaStreamBeginCapture");
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return fail(cudaErrorInvalidValue);
    struct emu_capture *c = calloc(1, sizeof *c);
    emu_body_t *b = calloc(1, sizeof *b);
    if (!c || !b)
        DIE("out of memory");
    atomic_init(&b->refs, 1);
    lane_new(b, s->dev); /* lane 0: the origin's */
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;
    c->body = b;
    pthread_mutex_lock(&cap_mu);
    if (s->cap) {
        pthread_mutex_unlock(&cap_mu);
        free(c);
        body_unref(b);
        return fail(cudaErrorStreamCaptureUnsupported); /* already capturing */
    }
    c->id = ++next_cap_id;
    c->next = active_caps;
    active_caps = c;
    s->cap = c;
    s->cap_lane = 0;
    pthread_mutex_unlock(&cap_mu);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    s = stream_arg(s, "cudaStreamIsCapturing");
    /* the legacy stream while a blocking stream of its device captures:
     * cudaErrorStreamCaptureImplicit, "The blocking stream capture is not
     * invalidated" (the runtime API) */
    if (s->legacy && legacy_refuses(s->dev, 0))
        return fail(cudaErrorStreamCaptureImplicit);
    pthread_mutex_lock(&cap_mu);
    *st = !s->cap ? cudaStreamCaptureStatusNone
          : s->cap->invalid ? cudaStreamCaptureStatusInvalidated
                            : cudaStreamCaptureStatusActive;
    pthread_mutex_unlock(&cap_mu);
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    emu_check_stream(s, "cudaStreamEndCapture");
    *g = NULL;
    pthread_mutex_lock(&cap_mu);
    struct emu_capture *c = s->cap;
    if (!c) {
        pthread_mutex_unlock(&cap_mu);
        return fail(cudaErrorIllegalState);
    }
    /* A stream that only joined the capture did not initiate it: CUDA
     * answers cudaErrorStreamCaptureUnmatched, and as for any call a
     * capture refuses, the capture is invalidated (the origin's end then
     * fails); the stream stays in it until the origin ends it. */
    if (c->origin != s) {
        c->invalid = 1;
        pthread_mutex_unlock(&cap_mu);
        return fail(cudaErrorStreamCaptureUnmatched);
    }
    /* "If mode is not cudaStreamCaptureModeRelaxed, cudaStreamEndCapture
     * must be called on this stream from the same thread"
     * (cudaStreamBeginCapture): from another, cudaErrorStreamCaptureWrongThread,
     * and, as for any call a capture refuses, the capture is invalidated;
     * it stays under way until its own thread ends it */
    if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self())) {
        c->invalid = 1;
        pthread_mutex_unlock(&cap_mu);
        return fail(cudaErrorStreamCaptureWrongThread);
    }
    for (struct emu_capture **p = &active_caps; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    /* CUDA ends a capture only when every stream that joined it was joined
     * back: its last node precedes the origin's end, through any chain of
     * waits (another stream's included).  The streams leave it either way. */
    emu_body_t *b = c->body;
    int unjoined = 0;
    for (int k = 1; k < b->nlanes; k++)
        unjoined |= b->lanes[k].seen[k] > b->lanes[0].seen[k];
    pthread_mutex_lock(&reg_lock);
    for (struct emu_stream *t = live_streams; t; t = t->next)
        if (t->cap == c)
            t->cap = NULL;
    pthread_mutex_unlock(&reg_lock);
    s->cap = NULL;
    pthread_mutex_unlock(&cap_mu);
    int invalid = c->invalid;
    free(c);
    if (invalid || unjoined) {
        body_unref(b);
        return fail(invalid ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnjoined);
    }
    struct emu_graph *gr = calloc(1, sizeof *gr);
    if (!gr)
        DIE("out of memory");
    gr->magic = GRAPH_MAGIC;
    gr->body = b;
    *g = gr;
    return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
    if (!g || g->magic != GRAPH_MAGIC)
        DIE("cudaGraphGetNodes: not a graph");
    (void)nodes;
    size_t k = 0; /* what the real graph holds: no node for a bare dependency */
    for (int l = 0; l < g->body->nlanes; l++)
        k += g->body->lanes[l].seen[l];
    *n = k;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags)
{
    (void)flags;
    if (!g || g->magic != GRAPH_MAGIC)
        DIE("cudaGraphInstantiate: not a graph");
    struct emu_graph_exec *x = calloc(1, sizeof *x);
    if (!x)
        return fail(cudaErrorMemoryAllocation);
    x->magic = GRAPH_MAGIC + 1;
    x->body = g->body;
    pthread_mutex_init(&x->mu, NULL);
    for (int k = 0; k < x->body->nlanes; k++) {
        int dev = x->body->lanes[k].dev;
        if (k && !(x->lane[k] = stream_new(dev, 0, 0)))
            DIE("out of memory");
        struct emu_event *clock = calloc(1, sizeof *clock);
        if (!clock)
            DIE("out of memory");
        clock->magic = EVENT_MAGIC;
        clock->dev = dev;
        clock->flags = cudaEventDisableTiming;
        clock->refs = 1; /* the instantiation's */
        clock->destroyed = 1; /* freed with the last op that uses it */
        x->clock[k] = clock;
    }
    atomic_fetch_add(&g->body->refs, 1); /* it outlives the graph, as in CUDA */
    *e = x;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    if (!g || g->magic != GRAPH_MAGIC)
        DIE("cudaGraphDestroy: not a graph");
    g->magic = 0;
    body_unref(g->body);
    free(g);
    return cudaSuccess;
}

/* A destroyed instantiation's lanes: their streams finish what launches
 * queued on them (counted by cudaDeviceSynchronize meanwhile), then go. */
static void *reap_lanes(void *arg)
{
    struct emu_graph_exec *x = arg;
    for (int k = 1; k < x->body->nlanes; k++) {
        drain(x->lane[k]);
        stream_free(x->lane[k]);
    }
    body_unref(x->body);
    free(x);
    return NULL;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
    if (!x || x->magic != GRAPH_MAGIC + 1)
        DIE("cudaGraphExecDestroy: not an instantiated graph");
    x->magic = 0;
    /* Launches may still be queued: the launch stream's share of each
     * holds the body and the clocks until it has run, and the lanes'
     * streams go once they have run theirs.  As in CUDA the call does not
     * wait for them -- a lane may wait for a peer's collective that only
     * an abort ends -- so a thread of its own frees them. */
    for (int k = 0; k < x->body->nlanes; k++)
        event_release(x->clock[k]);
    pthread_mutex_destroy(&x->mu);
    pthread_t th;
    if (x->body->nlanes == 1)
        reap_lanes(x);
    else if (pthread_create(&th, NULL, reap_lanes, x) != 0 || pthread_detach(th) != 0)
        DIE("cannot start a thread to free a graph's lanes");
    return cudaSuccess;
}

/* Queue a record (run_record) or a wait (run_wait) of generation gen of e. */
static void enqueue_ev(cudaStream_t q, void (*fn)(void *), struct emu_event *e,
                       unsigned long long gen)
{
    pthread_mutex_lock(&ev_mu);
    ev_op_t *o = ev_op(e, gen);
    pthread_mutex_unlock(&ev_mu);
    enqueue(q, fn, o, free);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
    if (!x || x->magic != GRAPH_MAGIC + 1)
        DIE("cudaGraphLaunch: not an instantiated graph");
    emu_check_stream(s, "cudaGraphLaunch");
    emu_body_t *b = x->body;
    if (b->lanes[0].dev != s->dev)
        DIE("cudaGraphLaunch: a graph of device %d on a stream of device %d", b->lanes[0].dev, s->dev);
    pthread_mutex_lock(&cap_mu);
    int capturing = s->cap != NULL;
    pthread_mutex_unlock(&cap_mu);
    if (capturing)
        return fail(cudaErrorStreamCaptureUnsupported); /* no graphs inside graphs here */
    graph_launches++;
    /* This launch's generation of each mark an edge waits for, numbered on
     * its lane's clock in lane order before anything is queued (a lane may
     * wait for a later one's mark).  One launch at a time per instantiation,
     * so a clock's generations complete in the order they were numbered. */
    pthread_mutex_lock(&x->mu);
    unsigned long long *gen = malloc((b->nmarks ? b->nmarks : 1) * sizeof *gen);
    if (!gen)
        DIE("out of memory");
    pthread_mutex_lock(&ev_mu);
    for (size_t m = 0; m < b->nmarks; m++)
        if (b->marks[m].used)
            gen[m] = ++x->clock[b->marks[m].lane]->recorded;
    pthread_mutex_unlock(&ev_mu);
    for (int k = 0; k < b->nlanes; k++) {
        cudaStream_t q = k ? x->lane[k] : s;
        emu_lane_t *l = &b->lanes[k];
        for (size_t i = 0; i < l->n; i++) {
            emu_node_t *n = &l->v[i];
            switch (n->type) {
            case N_OP:
                enqueue(q, n->fn, n->arg, NULL); /* the body keeps the arguments */
                break;
            case N_REC:
            case N_WAIT_EXT: {
                pthread_mutex_lock(&cap_mu);
                n->ev->cap_id = 0;
                pthread_mutex_unlock(&cap_mu);
                pthread_mutex_lock(&ev_mu);
                unsigned long long g = n->type == N_REC ? ++n->ev->recorded : n->ev->recorded;
                pthread_mutex_unlock(&ev_mu);
                enqueue_ev(q, n->type == N_REC ? run_record : run_wait, n->ev, g);
                break;
            }
            case N_MARK:
                if (b->marks[n->mark].used)
                    enqueue_ev(q, run_record, x->clock[k], gen[n->mark]);
                break;
            case N_EDGE: /* why: the captured wait, now between two lanes */
                enqueue_ev(q, run_wait, x->clock[b->marks[n->mark].lane], gen[n->mark]);
                break;
            }
        }
        if (k) { /* why: the launch is one unit of the launch stream's order */
            pthread_mutex_lock(&ev_mu);
            unsigned long long end = ++x->clock[k]->recorded;
            pthread_mutex_unlock(&ev_mu);
            enqueue_ev(q, run_record, x->clock[k], end);
            enqueue_ev(s, run_wait, x->clock[k], end);
        }
    }
    pthread_mutex_unlock(&x->mu);
    free(gen);
    /* the body lives until this launch has run, whatever is destroyed meanwhile */
    atomic_fetch_add(&b->refs, 1);
    enqueue(s, nothing, b, body_unref);
    return cudaSuccess;
}

/* The one form --precision bf16 calls: bf16 A and B, fp32 C, fp32 compute
 * (cuBLAS's "CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F" row);
 * anything else is not what ddpbench means to call and stops the test. */
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                            const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    if (Atype != CUDA_R_16BF || Btype != CUDA_R_16BF || Ctype != CUDA_R_32F ||
        compute != CUBLAS_COMPUTE_32F || algo != CUBLAS_GEMM_DEFAULT)
        DIE("cublasGemmEx(A %d, B %d, C %d, compute %d, algo %d): ddpbench uses bf16 inputs, an "
            "fp32 C and fp32 compute", (int)Atype, (int)Btype, (int)Ctype, (int)compute, (int)algo);
    int st = gemm_check("cublasGemmEx", h, ta, tb, m, n, k, A, lda, B, ldb, sizeof(uint16_t), C, ldc);
    if (st >= 0)
        return (cublasStatus_t)st;
    gemm_op_t *g = malloc(sizeof *g);
    if (!g)
        DIE("out of memory");
    *g = (gemm_op_t){ta, tb, m, n, k, lda, ldb, ldc, *(const float *)alpha, *(const float *)beta,
                     NULL, NULL, C, 0, A, B};
    emu_count_kernel();
    enqueue(h->stream, run_gemm, g, free);
    return CUBLAS_STATUS_SUCCESS;
}
