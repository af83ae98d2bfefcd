/* common/device/backend.h: the compute backend seam (one backend is one device), as the
 * model, losses, optimizers and strategies call it; implementers see backend_impl.h.
 * "Device" pointers are backend_alloc()'s (host memory on the CPU: backend_host_visible).
 * Operations run in call order on the device's compute stream and may return before the
 * work is done; each returns DDP_OK or DDP_ERR_RUNTIME with backend_last_error() set. */
#ifndef DDPBENCH_BACKEND_H
#define DDPBENCH_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/half.h"
#include "common/base/kinds.h"
#include "common/base/status.h"

typedef struct backend backend_t;

/* What an allocation is for: a device's peak memory is reported split into these. */
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
/* "parameters", ... and the JSON key ("params", ...). */
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
/* What that peak held, by kind, when it was reached (adds up to backend_mem_peak). */
void backend_mem_peak_split(const backend_t *be, size_t split[MEM_KINDS]);
const char *backend_last_error(const backend_t *be);
/* Record why work on this device failed; returns code.  A message never names its own
 * device (the caller does, once); another device it involves it names by id. */
int backend_error(backend_t *be, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* rc, with "<place>: <the backend's message>" in err when it failed (place may be NULL):
 * TRY(backend_check(be, rc, "device 0", err)). */
int backend_check(const backend_t *be, int rc, const char *place, char *err);

// ---------------------------------------------------------------------------
// memory

void *backend_alloc(backend_t *be, size_t bytes); /* zeroed; NULL on failure; MEM_WORKSPACE */
/* The same, counted under what it is for (the memory split). */
void *backend_alloc_for(backend_t *be, size_t bytes, mem_kind_t kind);
void backend_free(backend_t *be, void *p); /* p may be NULL, as may p below */
void *backend_alloc_host(backend_t *be, size_t bytes); /* pinned staging memory */
void backend_free_host(backend_t *be, void *p);
int backend_h2d(backend_t *be, void *dst, const void *src, size_t bytes); /* src valid until sync */
int backend_d2h(backend_t *be, void *dst, const void *src, size_t bytes); /* waits */
int backend_d2d(backend_t *be, void *dst, const void *src, size_t bytes);
int backend_memset0(backend_t *be, void *dst, size_t bytes);
/* Copy between two devices, queued on be's stream (be owns dst); the caller syncs src_be
 * first, so that src is complete. */
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
/* out[rows,cols] against tgt ([rows,cols] for mse/bce, class ids [rows] for ce):
 * *loss_sum (device) = sum of the rows' losses (mse/bce: each a mean over the row);
 * grad = grad_scale * d(that sum)/d(out). */
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
/* The compression hooks' casts (DTYPE_F16/BF16): to16, h = f rounded to nearest even,
 * else f = h; bit for bit as base/half.h's. */
int backend_cast16(backend_t *be, dtype_t t, bool to16, float *f, uint16_t *h, size_t n);
/* Wait for everything queued on the device. */
int backend_sync(backend_t *be);
/* Reserve the kernels' scratch for rows x cols now, not in a step: a CUDA allocation or
 * free synchronises the whole device.  Larger operations still work (it grows then). */
int backend_reserve(backend_t *be, int rows, int cols);

// ---------------------------------------------------------------------------
// ordering without waiting: events (CPU: a clock reading; every wait free), the copy
// stream; the host waits only in event_sync, sync and d2h, and those are counted

typedef struct backend_event backend_event_t;

/* A new event; timed: backend_event_time() may place it on the clock.  NULL on failure. */
backend_event_t *backend_event_new(backend_t *be, bool timed);
void backend_event_free(backend_t *be, backend_event_t *ev);
/* Mark everything queued on the compute stream so far. */
int backend_event_record(backend_t *be, backend_event_t *ev);
/* Whether the work before ev's last record has completed (never recorded: yes). */
int backend_event_query(backend_t *be, backend_event_t *ev, bool *done);
/* The host waits until it has (a host synchronisation: counted). */
int backend_event_sync(backend_t *be, backend_event_t *ev);
/* When a completed timed event completed, on the now_s() clock. */
int backend_event_time(backend_t *be, backend_event_t *ev, double *t_s);
/* Later work on be's compute stream waits for ev (any device's); the host does not. */
int backend_stream_wait(backend_t *be, backend_event_t *ev);
/* A copy on the copy stream: starts once `after` (or NULL) has completed, records `done`
 * (or NULL) at its end; the compute stream waits only through backend_stream_wait(done).
 * src: pinned host memory (src_be NULL), be's own, or another device src_be's. */
int backend_copy_async(backend_t *be, void *dst, backend_t *src_be, const void *src,
                       size_t bytes, backend_event_t *after, backend_event_t *done);
/* d2h on the compute stream without waiting: dst (pinned host memory) holds
 * the bytes once an event recorded after this call has completed. */
int backend_d2h_async(backend_t *be, void *dst, const void *src, size_t bytes);
/* h2d from pinned host memory, read when the copy runs (until a later event completes, src
 * stays); a CUDA graph may hold it, each launch uploading what src then holds. */
int backend_h2d_pinned(backend_t *be, void *dst, const void *src, size_t bytes);
/* Times the host has waited for this device so far (always 0 on the CPU). */
long backend_host_syncs(const backend_t *be);
/* What the host queued on this device, by kind (--json's launches_per_step; a replayed
 * graph step counts one graph launch, not the work inside). */
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

/* Count a host wait that went through other means (comm_shm's thread polling an event). */
void backend_count_host_sync(backend_t *be);

/* A check every host wait runs while it waits (about every ms): a non-DDP_OK return ends
 * the wait with its message (a communicator's: a peer that never arrives cannot hang a
 * wait for its collective).  fn NULL removes it. */
typedef int (*backend_watch_fn)(void *ctx, char *err);
void backend_set_watch(backend_t *be, backend_watch_fn fn, void *ctx);

// ---------------------------------------------------------------------------
// CUDA graphs: a step queued once, replayed by one launch (docs/gpu.md, CUDA graphs)
//
// Between backend_graph_begin(be, key) and _end the caller queues a step as it would
// eagerly: the first time for a key it is captured, later times nothing is queued and each
// operation is checked against the capture (hashed; a difference is an error) before one
// launch at the end.  Inside, nothing may wait or allocate, the copy stream is unused, and a
// stream waits only for an event recorded in the same step.  Per-step values live in device
// memory (Adam's bias corrections: the backend uploads them per key).  A key's launch must
// have finished before it is replayed (the backend checks, and waits counted if not).  The
// CPU backend has none: begin answers DDP_ERR_INPUT.
#define BACKEND_GRAPH_KEYS 2
bool backend_graphs_supported(const backend_t *be);
int backend_graph_begin(backend_t *be, int key);
/* launch false: the step failed before its end; forget a capture, launch nothing. */
int backend_graph_end(backend_t *be, int key, bool launch);
/* One graph over several devices (DP): after the leader's begin has recorded fork, each
 * member follows from its own thread; capturing, its stream waits for fork (joining the
 * leader's capture), replaying it queues nothing.  Before the leader's end every member's
 * last work is joined back (the leader waits for its event) and members queue nothing more
 * until then; a member's end neither ends a capture (CUDA refuses on a joined stream) nor
 * launches.  The caller shares the leader's outcome (a barrier) before either goes on. */
int backend_graph_follow(backend_t *be, int key, backend_t *leader, backend_event_t *fork);
/* Whether key holds an instantiated graph (the next begin replays it). */
bool backend_graph_ready(const backend_t *be, int key);
/* Forget every key's graph (between steps: the step's work changed, e.g. new buckets). */
void backend_graph_reset(backend_t *be);
/* Whether a graph of this device holds work (any thread may ask).  NCCL frees a
 * communicator only once no graph holds its collectives, so its abort waits for fn(ctx),
 * called on the owning thread when the last graph is dropped; fn NULL removes it. */
bool backend_graphs_held(const backend_t *be);
void backend_on_graphs_released(backend_t *be, void (*fn)(void *ctx), void *ctx);

/* For work other floors queue on this device's streams (comm.h's collectives): the state
 * (*key, and serial: a new number each begin), and backend_graph_note, which folds such an
 * operation's words into the step's check and answers true when replaying (queue nothing).
 * Capturing, that work goes on streams joined to the capture and joined back before end. */
typedef enum { GRAPH_EAGER = 0, GRAPH_CAPTURE, GRAPH_REPLAY } graph_mode_t;
graph_mode_t backend_graph_state(const backend_t *be, int *key, unsigned long *serial);
bool backend_graph_note(backend_t *be, const uint64_t *w, size_t n);

/* --precision (docs/gpu.md): PREC_FP32 by default; PREC_TF32 (CUDA only) lets the GEMMs use
 * TF32; PREC_BF16 (both) is autocast's arithmetic in fp32 buffers: GEMM operands, layer
 * outputs, activations and their gradients rounded to bf16; losses, bias gradients and the
 * optimizers fp32.  An error on a backend without that mode. */
int backend_set_precision(backend_t *be, precision_t p);
precision_t backend_precision(const backend_t *be);

/* The device's peak FLOP/s (a multiply-add is 2) at the run's precision, measured at the
 * first call; 0 when unknown.  Not inside a graph. */
double backend_peak_flops(backend_t *be);

// ---------------------------------------------------------------------------
// creating one

/* The CPU backend for slot device_id with blas_threads OpenBLAS threads.  Under an
 * address-space limit without room for OpenBLAS's buffers, DDP_ERR_RUNTIME naming it. */
int backend_cpu_create(backend_t **out, int device_id, int blas_threads, char *err);

/* True when the CUDA backend was compiled in. */
bool backend_cuda_available(void);
/* The CUDA backend on GPU device_id (in the process that uses it: CUDA survives no fork). */
int backend_cuda_create(backend_t **out, int device_id, char *err);

/* How many GPUs are visible, from a forked probe (CUDA in this process would not survive
 * the supervisor's forks); 0 with the reason in why (ERR_LEN) when none. */
int backend_cuda_probe(char *why);

/* What the probe learnt about each visible GPU, by CUDA ordinal (as --gpus counts). */
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
/* The widest vector this CPU's FMAs take, in bits (512, 256, 128; 0: not x86-64), and the
 * calling core's measured peak fp32 FLOP/s at `bits` (0: the widest); 0 when unknown. */
int backend_cpu_vector_bits(void);
double backend_cpu_core_peak(int bits);

/* Create by kind (BACKEND_CPU or BACKEND_CUDA). */
int backend_create(backend_t **out, backend_kind_t kind, int device_id, int blas_threads,
                   char *err);
void backend_destroy(backend_t *be);

/* Set the process-wide OpenBLAS thread count (the CPU backend's threads share it). */
void backend_cpu_set_threads(int n);
/* True when the program should start again with OPENBLAS_NUM_THREADS=1 (which this sets):
 * an address-space limit and no thread count in the environment (blas_space.h). */
bool backend_cpu_restart_env(void);
/* Stop the pool OpenBLAS started before main, before any device exists: its idle threads
 * spin for about 0.1 s, in every forked rank too (blas_space.h). */
void backend_cpu_pool_stop(void);
/* A short description of the BLAS library ("OpenBLAS 0.3.21 ... (core
 * SkylakeX)", and ", chosen by OPENBLAS_CORETYPE=X" when the variable is set). */
const char *backend_cpu_blas_info(void);
/* The kernels OpenBLAS runs: its core's name, the OPENBLAS_CORETYPE that chose it (NULL:
 * the CPU did), the core's vector width and the CPU's widest (bits; 0 when unknown). */
typedef struct {
    const char *name, *forced;
    int bits, cpu_bits;
} blas_core_t;
blas_core_t backend_cpu_blas_core(void);

#endif
