/* common/device/backend.h: the compute backend seam, as its callers see it.
 *
 * A backend is one device.  The model, losses, optimizers and strategies call
 * only the functions below, so they never know which device computes; how a
 * backend is built (its table of operations, its private state) is in
 * backend_impl.h, for the implementers (backend_cpu.c, backend_cuda.c).
 * Pointers called "device" below are what backend_alloc() returned; on the
 * CPU backend they are ordinary host memory (backend_host_visible() is true)
 * and strategies may write them directly.
 *
 * Ordering: operations on one backend run in call order (a CUDA stream, the
 * device's "compute stream").  They may return before the work is done;
 * backend_sync() waits for all of it, and backend_d2h() waits for the work
 * before it.  Events (below) order work without making the host wait: a
 * training step queues its work and waits for the device at most once.
 * Every operation returns DDP_OK or DDP_ERR_RUNTIME with a message in
 * backend_last_error(). */
#ifndef DDPBENCH_BACKEND_H
#define DDPBENCH_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/half.h"
#include "common/base/kinds.h"
#include "common/base/status.h"

typedef struct backend backend_t;

/* What an allocation is for: the peak memory of a device is reported split
 * into these (parameters, gradients, optimizer state, activations, and the
 * buffers: staging, collectives, scratch of the kernels and libraries). */
typedef enum {
    MEM_PARAMS = 0,
    MEM_GRADS,
    MEM_OPTIM,
    MEM_ACTS,      /* layer outputs, their gradients, the batch's inputs and targets */
    MEM_STAGING,   /* the second batch slot the copy stream fills */
    MEM_COMM,      /* buffers of collectives and cross-device copies, NCCL's own */
    MEM_WORKSPACE, /* scratch of the kernels, and anything not said otherwise */
    MEM_KINDS
} mem_kind_t;
/* "parameters", "gradients", "optimizer state", ... and the JSON key
 * ("params", "grads", "optimizer", ...). */
const char *mem_kind_name(mem_kind_t k);
const char *mem_kind_key(mem_kind_t k);

typedef struct {
    float lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool first_step; /* torch: the first momentum step sets buf = grad */
} sgd_args_t;

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    bool decoupled;   /* AdamW: p *= 1 - lr*wd instead of g += wd*p */
    double bias_correction1; /* 1 - beta1^t */
    double bias_correction2; /* 1 - beta2^t */
} adam_args_t;

// ---------------------------------------------------------------------------
// what a device is

backend_kind_t backend_kind(const backend_t *be);
const char *backend_name(const backend_t *be); /* "cpu" or "cuda" */
int backend_device_id(const backend_t *be);    /* the id the user named (--gpus) */
bool backend_host_visible(const backend_t *be); /* device memory is host memory (CPU) */
size_t backend_mem_in_use(const backend_t *be); /* bytes allocated and not yet freed */
size_t backend_mem_peak(const backend_t *be);   /* high-water mark of that */
/* What that peak held, by purpose (mem_kind_t), at the moment it was
 * reached: the kinds add up to backend_mem_peak(). */
void backend_mem_peak_split(const backend_t *be, size_t split[MEM_KINDS]);
const char *backend_last_error(const backend_t *be);
/* Record why work on this device failed (what backend_last_error() returns
 * next); returns code.  A message never names its own device: the caller
 * does (backend_check's place, a DDP rank's prefix), so a line names it
 * once; another device it involves it names by id. */
int backend_error(backend_t *be, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* rc of a backend call, with "<place>: <the backend's message>" in err when it
 * failed (just the message when place is NULL): how a caller turns a device
 * failure into its own error, TRY(backend_check(be, rc, "device 0", err)). */
int backend_check(const backend_t *be, int rc, const char *place, char *err);

// ---------------------------------------------------------------------------
// memory

void *backend_alloc(backend_t *be, size_t bytes); /* zeroed; NULL on failure; MEM_WORKSPACE */
/* The same, counted under what it is for: the memory split is taken where
 * memory is allocated, so the figures need no guessing afterwards. */
void *backend_alloc_for(backend_t *be, size_t bytes, mem_kind_t kind);
void backend_free(backend_t *be, void *p);
void *backend_alloc_host(backend_t *be, size_t bytes); /* pinned staging memory */
void backend_free_host(backend_t *be, void *p);
int backend_h2d(backend_t *be, void *dst, const void *src, size_t bytes); /* src valid until sync */
int backend_d2h(backend_t *be, void *dst, const void *src, size_t bytes); /* waits */
int backend_d2d(backend_t *be, void *dst, const void *src, size_t bytes);
int backend_memset0(backend_t *be, void *dst, size_t bytes);
/* Copy between two devices (DP's replicate, scatter, gather, reduce), queued
 * on be's stream (be owns dst).  The caller orders it after the work that
 * produced src (sync src_be first).  CPU: memcpy; CUDA: cudaMemcpyPeerAsync. */
int backend_peer_copy(backend_t *be, void *dst, backend_t *src_be, const void *src,
                      size_t bytes);

// ---------------------------------------------------------------------------
// compute: row-major, like torch

/* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C; op(X) = X^T when t. */
int backend_gemm(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* z[r,c] += b[c]; a = act(z).  a may equal z (act must be ACT_NONE then). */
int backend_bias_act_fwd(backend_t *be, act_t act, float *z, float *a, const float *b, int rows,
                         int cols);
/* d[i] *= act'(z[i]) (a = act(z) is given for the cheap forms). */
int backend_act_bwd(backend_t *be, act_t act, const float *z, const float *a, float *d, size_t n);
/* db[c] (+)= sum_r dz[r,c]. */
int backend_bias_grad(backend_t *be, float *db, const float *dz, int rows, int cols,
                      bool accumulate);
/* Per-row losses of out[rows,cols] against tgt (tgt[rows,cols] for mse/bce,
 * tgt[rows] holding class ids for ce).  *loss_sum (a device float) = sum over
 * rows of the row's loss (mse/bce: mean over the row's elements).
 * grad[rows,cols] = grad_scale * d(sum of row losses)/d(out). */
int backend_loss(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                 int cols, float grad_scale, float *grad, float *loss_sum);
/* Optimizer updates over a flat arena of n floats (torch.optim rules). */
int backend_sgd(backend_t *be, const sgd_args_t *a, float *p, const float *g, float *buf, size_t n);
int backend_adam(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m, float *v,
                 size_t n);
/* y += alpha * x */
int backend_axpy(backend_t *be, float alpha, const float *x, float *y, size_t n);
/* x *= alpha */
int backend_scale(backend_t *be, float alpha, float *x, size_t n);
/* The compression hooks' casts (t: DTYPE_F16 or DTYPE_BF16): to16, h[i] =
 * f[i] rounded to nearest even; otherwise f[i] = h[i], exactly.  As
 * base/half.h's functions, bit for bit, on every backend. */
int backend_cast16(backend_t *be, dtype_t t, bool to16, float *f, uint16_t *h, size_t n);
/* Wait for everything queued on the device. */
int backend_sync(backend_t *be);
/* Make the scratch the kernels need ready for operations over up to rows
 * rows of cols columns (bias_grad over a layer of that width, the loss over
 * that many rows), now rather than in the first step: a CUDA allocation or
 * free synchronises the whole device.  A replica calls it for each layer at
 * setup; an operation larger than what was reserved still works (its
 * scratch grows then).  Nothing to do on the CPU. */
int backend_reserve(backend_t *be, int rows, int cols);

// ---------------------------------------------------------------------------
// ordering without waiting: events, the copy stream, host synchronisations
//
// An event marks a point in a device's queue.  The CPU backend computes as it
// is called, so there an event is a host clock reading and every wait is
// free; on CUDA an event is a cudaEvent_t and only backend_event_sync(),
// backend_sync() and backend_d2h() make the host wait.  Those waits are
// counted (backend_host_syncs), so a test can hold a training step to one.

typedef struct backend_event backend_event_t;

/* A new event of this device; timed: backend_event_time() may place it on the
 * clock (a phase marker), else it only orders work.  NULL when the device is
 * out of resources (backend_last_error() says why). */
backend_event_t *backend_event_new(backend_t *be, bool timed);
void backend_event_free(backend_t *be, backend_event_t *ev);
/* Mark everything queued on the compute stream so far (CPU: the host time now,
 * when that work is done). */
int backend_event_record(backend_t *be, backend_event_t *ev);
/* Whether the work before ev's last record has completed (an event never
 * recorded has); the host does not wait. */
int backend_event_query(backend_t *be, backend_event_t *ev, bool *done);
/* The host waits until it has (a host synchronisation: counted). */
int backend_event_sync(backend_t *be, backend_event_t *ev);
/* When a completed timed event completed, on the now_s() clock (CUDA: from
 * the GPU's timestamps, re-anchored to the host clock every step, so the
 * precision does not decay over a long run). */
int backend_event_time(backend_t *be, backend_event_t *ev, double *t_s);
/* Work queued on be's compute stream from now on waits until ev completes; ev
 * may belong to another device of this process.  The host does not wait. */
int backend_stream_wait(backend_t *be, backend_event_t *ev);
/* A copy on the device's copy stream, beside the compute stream: it starts
 * once `after` (an event of any device of this process, or NULL) has
 * completed and records `done` (or NULL) when it ends.  The compute stream
 * does not wait for it: backend_stream_wait(be, done) before using dst.  src
 * is pinned host memory (src_be NULL), be's own memory (src_be == be) or
 * memory of another device src_be.  CPU: a memcpy, complete on return. */
int backend_copy_async(backend_t *be, void *dst, backend_t *src_be, const void *src,
                       size_t bytes, backend_event_t *after, backend_event_t *done);
/* d2h on the compute stream without waiting: dst (pinned host memory) holds
 * the bytes once an event recorded after this call has completed. */
int backend_d2h_async(backend_t *be, void *dst, const void *src, size_t bytes);
/* h2d on the compute stream from pinned host memory (backend_alloc_host),
 * read when the copy runs, not at the call: the caller leaves src unchanged
 * until an event recorded after this call has completed.  A CUDA graph may
 * hold it (what the host writes into src before each launch is uploaded by
 * that launch). */
int backend_h2d_pinned(backend_t *be, void *dst, const void *src, size_t bytes);
/* Times the host has waited for this device so far (backend_sync,
 * backend_d2h, backend_event_sync; always 0 on the CPU, which never waits). */
long backend_host_syncs(const backend_t *be);
/* What the host queued on this device, by kind (counted in the backend, so
 * every mode's figure comes from one place): kernels (each compute
 * operation's launches; a GEMM is one cuBLAS call), copies (h2d, d2h, d2d,
 * memsets, peer and copy-stream copies), collectives (launched through
 * comm.h on this device), graph launches (CUDA graphs), and event operations
 * (records and stream waits).  A replayed graph step counts one graph launch
 * instead of the work inside it.  --json reports them per timed step. */
typedef enum {
    LAUNCH_KERNEL = 0,
    LAUNCH_COPY,
    LAUNCH_COLLECTIVE,
    LAUNCH_GRAPH,
    LAUNCH_EVENT,
    LAUNCH_KINDS
} launch_kind_t;
/* "kernels", "copies", "collectives", "graphs", "events": the JSON keys */
const char *launch_kind_key(launch_kind_t k);
long backend_launches(const backend_t *be, launch_kind_t k);
void backend_count_launch(backend_t *be, launch_kind_t k, long n);

/* Count a wait of the host for this device's work that went through other
 * means: a communication thread that polled the device's event while the
 * caller waited for that thread (comm_shm staging a device buffer). */
void backend_count_host_sync(backend_t *be);

/* A check every host wait on this device runs while it waits (about every
 * millisecond): a non-DDP_OK return ends the wait with that status and the
 * checker's message (ERR_LEN) in backend_last_error().  A communicator
 * installs one, so that a peer that never arrives cannot hang a wait on a
 * stream that waits for its collective.  fn NULL removes it. */
typedef int (*backend_watch_fn)(void *ctx, char *err);
void backend_set_watch(backend_t *be, backend_watch_fn fn, void *ctx);

// ---------------------------------------------------------------------------
// CUDA graphs: a step queued once, replayed by one launch
//
// Between backend_graph_begin(be, key) and backend_graph_end(be, key) the
// caller queues a step exactly as it would eagerly.  The first time for a key
// that work is captured (CUDA stream capture; nothing runs), then the graph is
// instantiated and launched; every later time the operations are not queued
// at all: each is checked against what was captured (its kind, pointers,
// sizes and scalars, hashed) and the graph is launched once at the end, so a
// step that would queue other work than its graph is an error, never a silent
// replay of stale work.  Inside a graph nothing may make the host wait or
// allocate (sync, d2h, event_sync/query, alloc/free: an error), the copy
// stream is not used, and a stream waits only for an event recorded inside
// the same graph step (another is an error: at each launch it would pair
// with whatever that event last held).  What changes from step to step must live in device
// memory the graph reads: Adam's bias corrections are uploaded per key by the
// backend itself (they are the only per-step scalars); the batch is staged
// into its slot before the graph launch.  Events recorded inside are recorded
// by every launch, so the step meter's markers still time the phases.  A
// key's launch must have finished before the key is replayed again (two keys
// alternate; the step meter waits for the step before the last): the backend
// checks, and waits (a counted host sync) if not.  The CPU backend has none:
// begin answers DDP_ERR_INPUT there. */
#define BACKEND_GRAPH_KEYS 2
bool backend_graphs_supported(const backend_t *be);
int backend_graph_begin(backend_t *be, int key);
/* launch false: the step failed before its end; forget a capture, launch nothing. */
int backend_graph_end(backend_t *be, int key, bool launch);
/* One graph over several devices (DP): the leader begins the step (above) and
 * records fork, an event of its own, inside it; then each other device, a
 * member, follows from its own thread (a host barrier between: fork is
 * recorded) and queues its part of the step on its own compute stream as it
 * would eagerly.  Capturing, the member's stream waits for fork, which joins
 * it to the leader's capture (CUDA capture is per stream); replaying, the
 * member queues nothing (its work is checked like a replay's) and moves its
 * clock's anchor, as its timed events are recorded by the leader's launch.
 * Before the leader's backend_graph_end the member's last work must be
 * joined back (the leader's stream waits for an event the member recorded
 * after it) and the member must queue nothing more until the leader has
 * ended: a member's own backend_graph_end only keeps or checks its work (it
 * neither ends a capture, which CUDA refuses on a joined stream, nor
 * launches).  Member and leader must agree on whether key holds a graph: the
 * caller shares the leader's outcome (a barrier) before either goes on. */
int backend_graph_follow(backend_t *be, int key, backend_t *leader, backend_event_t *fork);
/* Whether key holds an instantiated graph (the next begin replays it). */
bool backend_graph_ready(const backend_t *be, int key);
/* Forget every key's graph (between steps): the work a step queues changed
 * on purpose (new DDP buckets), so the next graph step captures anew. */
void backend_graph_reset(backend_t *be);
/* Whether a graph of this device holds work (a step under way, or a graph
 * kept for a later one); any thread may ask.  A communicator whose
 * collectives a graph holds defers its abort until none does: NCCL frees
 * one only once no graph holds its collectives.  released(ctx) is called on
 * the owning thread when the last is dropped (backend_graph_reset, a
 * capture ended without a launch), so the communicator carries the abort
 * out then; fn NULL removes it. */
bool backend_graphs_held(const backend_t *be);
void backend_on_graphs_released(backend_t *be, void (*fn)(void *ctx), void *ctx);

/* For work other floors queue on this device's streams themselves (comm.h's
 * collectives): where the backend stands -- GRAPH_EAGER outside
 * backend_graph_begin/_end, else capturing or replaying *key, in the
 * serial-th begin (a new number each begin) -- and backend_graph_note, which
 * folds such an operation (its words: kind, pointers, sizes) into the step's
 * check and answers true when replaying: the graph holds that work, queue
 * nothing.  Capturing, the caller queues its work on streams that joined the
 * compute stream's capture (a wait for an event recorded in it) and joins
 * them back before backend_graph_end (a wait of the compute stream for an
 * event recorded after their last work), as CUDA requires. */
typedef enum { GRAPH_EAGER = 0, GRAPH_CAPTURE, GRAPH_REPLAY } graph_mode_t;
graph_mode_t backend_graph_state(const backend_t *be, int *key, unsigned long *serial);
bool backend_graph_note(backend_t *be, const uint64_t *w, size_t n);

/* --precision: the arithmetic of the operations above; PREC_FP32 by
 * default, an error on a backend that has no such mode.
 *  - PREC_TF32 (CUDA only): the GEMMs may use TF32 tensor-core math (inputs
 *    rounded to 10 mantissa bits; outside the 1e-4 agreement with the CPU).
 *  - PREC_BF16 (both backends; PyTorch autocast's semantics, as the tensors
 *    an autocast nn.Linear/activation stack would store):
 *      gemm: op(A) and op(B) rounded to bf16 (round to nearest even), the
 *        products summed in fp32, C = alpha*sum + beta*C in fp32 (cuBLAS:
 *        cublasGemmEx, CUDA_R_16BF inputs, CUBLAS_COMPUTE_32F);
 *      bias_act_fwd: z = bf16(z + bf16(b)), a = bf16(act(z)): the layer's
 *        output and its activation are bf16 values (autocast's Linear
 *        returns bf16 and the activation keeps its input's dtype);
 *      act_bwd: d = bf16(bf16(d) * act'(z)): activation gradients are bf16;
 *      loss: computed in fp32 from the (bf16) outputs, the output gradient
 *        rounded to bf16 (autocast runs the losses and softmax in fp32 and
 *        casts their gradient back to the logits' bf16);
 *      bias_grad, the optimizers, axpy, scale: fp32, unchanged.
 *    The values are bf16; the buffers stay fp32 (memory is not halved).
 *    Weight and bias gradients stay the fp32 sums (autocast rounds each
 *    micro-batch's to bf16 first: a difference within 2^-8 relative). */
int backend_set_precision(backend_t *be, precision_t p);
precision_t backend_precision(const backend_t *be);

/* The device's peak fp32 FLOP/s (a multiply-add is 2), measured now on the
 * calling thread; 0 when unknown.  The CPU: its core's (backend_cpu_core_peak)
 * times its BLAS threads.  A GPU: the greater of its FP32 lanes x clock x 2
 * (the device's properties) and a cuBLAS GEMM timed at the run's precision,
 * measured at the first call (later calls return that answer).  Not inside
 * a graph. */
double backend_peak_flops(backend_t *be);

// ---------------------------------------------------------------------------
// creating one

/* Create the CPU backend for device slot device_id; blas_threads is the number
 * of OpenBLAS threads this device may use (1 for a DP/DDP worker).  Under an
 * address-space limit without room for OpenBLAS's buffers, DDP_ERR_RUNTIME
 * naming the limit (otherwise OpenBLAS would spin forever at the first GEMM). */
int backend_cpu_create(backend_t **out, int device_id, int blas_threads, char *err);

/* True when the CUDA backend was compiled in. */
bool backend_cuda_available(void);
/* Create the CUDA backend on GPU device_id (call only in the process that will
 * use it: CUDA does not survive fork). */
int backend_cuda_create(backend_t **out, int device_id, char *err);

/* How many GPUs are visible, found without initialising CUDA in this process
 * (a forked probe: CUDA does not survive fork, and the supervisor forks ranks).
 * Returns 0 with the reason in why (ERR_LEN) when there are none: "built
 * without CUDA", "no CUDA driver (cudaErrorInsufficientDriver)", "no CUDA
 * device (cudaErrorNoDevice)". */
int backend_cuda_probe(char *why);

/* What the probe learnt about each visible GPU, by CUDA ordinal (so
 * CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER apply, as to --gpus), from the
 * CUDA runtime in the same forked child that counts them. */
#define GPU_INFO_MAX 16
typedef struct {
    char name[96];        /* "NVIDIA H200" */
    char pci_bus_id[32];  /* "00000000:18:00.0" */
    size_t mem_bytes;     /* total device memory */
    int cc_major, cc_minor; /* compute capability */
} gpu_info_t;

typedef struct {
    int count;            /* GPUs described (at most GPU_INFO_MAX) */
    gpu_info_t gpu[GPU_INFO_MAX];
    /* peer[i][j]: -1 when GPU i cannot read GPU j's memory directly, else
     * cudaDevP2PAttrPerformanceRank (0 is the fastest link); -1 on i == j */
    signed char peer[GPU_INFO_MAX][GPU_INFO_MAX];
    /* the libraries the probe found, for the run's provenance (0: unknown) */
    int runtime_version;  /* cudaRuntimeGetVersion: 13000 is 13.0 */
    int driver_version;   /* cudaDriverGetVersion: the newest CUDA the driver runs */
    int cublas_version;   /* major*10000 + minor*100 + patch */
    int nccl_version;     /* ncclGetVersion (0: built without NCCL) */
} gpu_topology_t;

/* The visible GPUs, probing first if nobody has (backend_cuda_probe); NULL
 * when there are none or CUDA is not built in. */
const gpu_topology_t *backend_cuda_gpus(void);
/* The CPU's model name from /proc/cpuinfo ("" when unknown). */
const char *backend_cpu_model(void);
/* The widest vector this CPU's FMAs take, in bits (512: AVX-512, 256: AVX2
 * with FMA, 128; 0: not an x86-64 CPU), and the calling thread's core's peak
 * fp32 FLOP/s at `bits` (0, or wider than the CPU: the widest), measured now
 * (peak_cpu.c: an FMA loop, the fastest of short bursts); 0 when unknown. */
int backend_cpu_vector_bits(void);
double backend_cpu_core_peak(int bits);

/* Create by kind (BACKEND_CPU or BACKEND_CUDA). */
int backend_create(backend_t **out, backend_kind_t kind, int device_id, int blas_threads,
                   char *err);
void backend_destroy(backend_t *be);

/* Set the process-wide OpenBLAS thread count (the CPU backend's threads share it). */
void backend_cpu_set_threads(int n);
/* Under an address-space limit (ulimit -v), OpenBLAS's start-up (before
 * main) gives every core a pool thread with a 128 MiB buffer, and a thread
 * whose buffer does not fit spins forever (blas_space.h).  True when the
 * program should start again with OPENBLAS_NUM_THREADS=1, which this sets:
 * a finite limit and no thread count in the environment.  The CPU backend
 * sets the counts it needs itself. */
bool backend_cpu_restart_env(void);
/* Stop the pool OpenBLAS started before main, before any device exists:
 * every device computes with one thread (single's --threads N starts it
 * again), and an idle pool thread spins in sched_yield for about 0.1 s
 * after it starts, in the program and again in every forked DDP rank
 * (blas_space.h). */
void backend_cpu_pool_stop(void);
/* A short description of the BLAS library ("OpenBLAS 0.3.21 ... (core
 * SkylakeX)", and ", chosen by OPENBLAS_CORETYPE=X" when the variable is set). */
const char *backend_cpu_blas_info(void);
/* The kernels OpenBLAS runs: its core's name, the OPENBLAS_CORETYPE value
 * that chose it (NULL: OpenBLAS chose from the CPU; the variable is the
 * user's, never set here), the core's vector width and the CPU's widest
 * (bits; 0 when unknown). */
typedef struct {
    const char *name, *forced;
    int bits, cpu_bits;
} blas_core_t;
blas_core_t backend_cpu_blas_core(void);

#endif
