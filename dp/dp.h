/* dp/dp.h: the DataParallel strategy's private pieces, shared by the files of dp/.
 *
 * One process, one persistent host thread per device (dp_pool_t), all running
 * the same step loop (dp_device_loop) and meeting at barriers between phases,
 * like torch.nn.DataParallel does step for step:
 *   device 0 stages the global batch; every device copies its chunk (scatter)
 *   and, once per optimizer step, the parameters of device 0 (replicate);
 *   forward in parallel; device 0 gathers the outputs and computes the loss
 *   over the whole batch; every device copies its slice of the output gradient
 *   (scatter) and runs backward; the gradients are summed onto device 0
 *   (reduce); device 0 steps the optimizer.
 * Devices are indexed by slot (their place in --gpus), never by id: on CUDA an
 * id may repeat (--gpus 0,0).
 *
 * On a GPU every barrier is also a barrier of the devices' queues: before
 * it, each device records an event; after it, each device's stream waits for
 * every other device's event (dp_wait).  So work any device queued before a
 * barrier is done before work any device queues after it -- what a host
 * synchronisation before each barrier would give -- while the host threads
 * run ahead; a device thread waits for its own device once a step (the step
 * meter).  With --cuda-graph, a full step after the first is queued the same
 * way into one CUDA graph of every device and replayed by device 0's one
 * launch (common/train/graph.h's group). */
#ifndef DDPBENCH_DP_H
#define DDPBENCH_DP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "common/data/schedule.h"
#include "common/io/checkpoint.h"
#include "common/measure/progress.h"
#include "common/measure/result.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"
#include "common/nn/optim.h"
#include "common/train/graph.h"
#include "common/train/stage.h"
#include "common/train/step.h"
#include "common/train/trainer.h"

// ---------------------------------------------------------------------------
// dp_workers.c: the thread pool and its barrier

/* n threads, created once per run.  They meet at dp_pool_sync() between
 * phases (each announces its arrival on a cache line of its own; a waiter
 * spins briefly on the others', then sleeps on a futex); a failing thread
 * calls dp_pool_fail(), which makes every present and future dp_pool_sync()
 * return at once, so nobody waits for a thread that has stopped.
 * dp_pool_leave() is the one wait that cannot be aborted: every thread passes
 * it on its way out, so none frees buffers another may still be reading (and
 * a second round, so none frees them before device 0 has ended a CUDA graph
 * capture a failure left open and its launched graphs are done:
 * graph_abandon). */
typedef struct dp_pool dp_pool_t;
typedef struct {
    dp_pool_t *pool;
    int index;
} dp_pool_arg_t;

struct dp_pool {
    int n;                    /* threads running */
    pthread_t tid[MAX_DEVICES];
    dp_pool_arg_t arg[MAX_DEVICES];
    pthread_mutex_t mu;       /* the failure record and dp_pool_leave() */
    pthread_cond_t cv;
    uint64_t spin_ns;         /* how long a barrier waiter spins before sleeping */
    bool pin;                 /* each thread on a CPU of its own (base/affinity.h) */
    /* Thread i's barriers so far, written by it alone: a barrier is open
     * for a thread at its b-th once every thread's count is b or more. */
    struct {
        _Alignas(64) _Atomic uint64_t v;
    } arrived[MAX_DEVICES];
    /* Written only when a waiter sleeps or a thread fails (read at every
     * barrier, so kept off the lines written at every one). */
    _Alignas(64) _Atomic uint32_t wake; /* futex word: bumped to wake sleepers, and at abort */
    _Atomic uint32_t sleepers;/* waiters asleep (or about to be) on wake */
    _Atomic bool aborted;     /* a thread failed: barriers no longer wait */
    struct {                  /* the CPU each thread last arrived from (sched_getcpu) */
        _Alignas(64) _Atomic int32_t v;
    } cpu[MAX_DEVICES];
    int left;                 /* threads at dp_pool_leave() */
    int rc;                   /* the first failure (DDP_OK when none) */
    char err[ERR_LEN];
    void (*fn)(void *ctx, int index);
    void *ctx;
};

/* Start n threads running fn(ctx, index) for index 0..n-1; pin: each on a
 * CPU of its own when the process may use n of them (base/affinity.h). */
int dp_pool_start(dp_pool_t *p, int n, bool pin, void (*fn)(void *ctx, int index), void *ctx,
                  char *err);
/* Barrier across the n threads: DDP_OK, or DDP_ERR_RUNTIME once aborted. */
int dp_pool_sync(dp_pool_t *p);
/* Record a failure (the first one wins) and abort every barrier. */
void dp_pool_fail(dp_pool_t *p, int rc, const char *msg);
/* The exit barriers (not abortable), round 1, 2, ...: every thread passes
 * each round once, in order. */
void dp_pool_leave(dp_pool_t *p, int round);
/* Join every thread; returns the first failure with its message in err. */
int dp_pool_join(dp_pool_t *p, char *err);

// ---------------------------------------------------------------------------
// dp_scatter.c: how rows and arenas are split

/* torch.chunk along dim 0: chunk = ceil(batch/k); device d gets rows
 * [off, off+rows), rows 0 when it sits the micro-batch out. */
typedef struct {
    int off, rows;
} dp_chunk_t;
dp_chunk_t dp_chunk(int batch, int k, int d);
/* How many devices get rows (torch.chunk can return fewer than k chunks). */
int dp_chunk_count(int batch, int k);

/* The part [*lo, *hi) of an n-float arena that worker w of k copies or sums
 * (cache-line aligned, so no two workers write the same line). */
void dp_slice(size_t n, int k, int w, size_t *lo, size_t *hi);
/* On host-visible devices: is an n-float arena replicated and reduced in
 * slices by every thread (then the reduce ends at a barrier), or whole by
 * one thread each (each replica copies its own; device 0 sums)? */
bool dp_sliced(size_t n);

// ---------------------------------------------------------------------------
// the run's state

/* The plan of one optimizer step, written by device 0 one step ahead (double
 * buffered by step parity, so the next plan never overwrites the one the
 * other threads are reading).  Each on cache lines of its own, its arrays
 * too (dp_setup): writing one plan must not evict the other from the
 * cores that read it. */
typedef struct {
    _Alignas(64) int nmicro;  /* micro-batches in the step (>= 1) */
    int *rows;                /* [accum] rows of each micro-batch */
    const uint32_t **idx;     /* [accum] their sample indices (device 0 only) */
    int nrep;                 /* devices with rows in any micro-batch: they get replicas */
    size_t step_rows;         /* rows of the whole step: the loss's mean denominator */
} dp_plan_t;

typedef struct {
    int slot, id;
    char name[48];            /* "device 1" or "device 1 (id 5)", for messages */
    backend_t *be;
    replica_t rep;            /* params, grads, activations for one chunk */
    train_step_t t;           /* the step's pieces on this device (t.has_grad: rep.grads
                                 holds gradients of this optimizer step) */
    step_meter_t meter;       /* this thread's measurements */
    graph_t graph;            /* --cuda-graph: its part of the group's graph */
    backend_event_t *bar[2];  /* recorded before each barrier (by the barrier's parity) */
    long nbar;                /* barriers passed */
    comm_t *comm;             /* this device's rank of the NCCL group (nccl), or NULL */
} dp_dev_t;

typedef struct {
    const config_t *cfg;
    const dataset_t *data;
    model_spec_t spec;
    int ndev;                 /* devices */
    int chunk_max;            /* ceil(batch/ndev): rows of the largest chunk */
    bool host_visible;        /* every device's memory is host memory (CPU) */
    bool nccl;                /* replicate and reduce are NCCL broadcast and reduce
                                 (CUDA, NCCL built, distinct GPUs), as torch's
                                 DataParallel does; else peer copies: config_dp_nccl) */
    bool graphs;              /* --cuda-graph: full steps replayed as one CUDA graph of
                                 every device (the group's) */
    graph_group_t group;
    run_result_t *res;
    dp_pool_t pool;
    dp_dev_t dev[MAX_DEVICES];

    /* Why the alignments below: what device 0 writes every step (the
     * optimizer's state, the schedule, the next plan) and what every device
     * reads every step (the step counts, the plans, the batch's buffers) on
     * separate cache lines.  Sharing one, each step's write by device 0
     * evicted it from the other cores, and their next read of it was a
     * miss to device 0's core (about 0.3 us on this project's VM). */

    /* the schedule, read by device 0's thread only after the start (the
     * others read only total_steps, which never changes, via ckpt_run_due) */
    schedule_t sch;
    _Alignas(64) long total_steps;
    long start_step;          /* the first step this run runs (> 0 after --resume) */
    dp_plan_t plan[2];        /* plan[g & 1] is step g's */
    float *host_params;       /* initial parameters, then the final ones */

    /* device 0's extra buffers: the whole micro-batch and its loss */
    _Alignas(64) optim_t opt;
    /* the micro-batch's inputs [batch, in] and targets [batch, tgt]: the
     * slot the stager filled last (device 0 sets them, when they change,
     * before the barrier the others read them after) */
    _Alignas(64) float *gx;
    float *gy;
    float *gout, *gdout;      /* gathered outputs and their gradient [batch, out] */
    float *loss_sum;          /* one device float */
    stager_t stg;             /* device 0's batch staging (its first slot: bx, by) */
    float *bx, *by;
    /* the reduce when not host-visible: two gradient arenas, filled on device
     * 0's copy stream while its compute stream adds the other */
    float *gscratch[2];
    backend_event_t *red_copied[2], *red_free;

    /* device 0's thread only (dp_run reads them after the join) */
    ckpt_run_t ck;            /* --checkpoint / --resume (loaded by dp_run before the start) */
} dp_ctx_t;

// ---------------------------------------------------------------------------
// dp_device.c: a device's buffers

/* The test seam for the device backends: NULL (the default) means
 * backend_create(cfg->backend, ...).  Tests set it to run the paths for
 * devices that are not host memory (the CUDA ones) on the CPU backend. */
typedef int (*dp_backend_create_fn)(backend_t **out, const config_t *cfg, int device_id,
                                    char *err);
extern dp_backend_create_fn dp_backend_create_hook;

/* Create device d's backend and replica (device 0: also the optimizer, the
 * whole-batch buffers and the initial parameters).  Runs on d's own thread,
 * because a CUDA device is current per thread. */
int dp_device_init(dp_ctx_t *c, int d, char *err);
void dp_device_free(dp_ctx_t *c, int d);

// ---------------------------------------------------------------------------
// dp_step.c: the step loop every device thread runs

/* Fill plan[g & 1] for step g: device 0's thread (one step ahead), or
 * dp_run for step 0 before the threads start. */
void dp_plan_step(dp_ctx_t *c, long g);
int dp_device_loop(dp_ctx_t *c, int d, char *err);

// ---------------------------------------------------------------------------
// dp_comm.c: the cross-device moves (peer copies; see the file for the order)

/* Every copy is also a span of the copying thread's step meter: an event on
 * its comm lane of --trace and, in the told step, a move of --explain's
 * story (step_meter_span); each move laps its phase on that meter
 * (PH_SCATTER, PH_REPLICATE, PH_COMM_EXPOSED). */
/* Copy chunk ch of device 0's rows src0 [batch, cols] into device d's dst
 * (nothing on device 0, whose chunk is read in place, or for no rows);
 * what is MOVE_SCATTER (inputs) or MOVE_GRAD_OUT (output gradients). */
int dp_scatter_rows(dp_ctx_t *c, int d, float *dst, const float *src0, int cols,
                    dp_chunk_t ch, move_kind_t what, char *err);
/* Device d's share of copying device 0's parameters into the replicas of
 * devices 1..nrep-1 (host-visible: a slice of every replica; NCCL: its part
 * of one broadcast, every device; else its own copy). */
int dp_replicate(dp_ctx_t *c, int d, int nrep, char *err);
/* Device d (not 0), right after the barrier that ended a step, on host
 * memory with an arena moved whole: ask the cache for what its next step
 * copies from device 0 first (the parameters, its chunk of the staged
 * batch, plan pl's first micro-batch), so those lines cross from device
 * 0's core while d's meter reports the step that ended. */
void dp_prefetch_next(const dp_ctx_t *c, int d, const dp_plan_t *pl);
/* Device 0: copy every device's output chunk into gout. */
int dp_gather(dp_ctx_t *c, int batch, char *err);
/* Device d's share of summing the gradients of the devices that have them
 * onto device 0's (host-visible: a slice; NCCL: its part of one reduce, every
 * device, those without gradients adding zeros; else device 0 does it all). */
int dp_reduce(dp_ctx_t *c, int d, char *err);

#endif
