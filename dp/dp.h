/* dp/dp.h: the DataParallel strategy's private pieces, shared by the files of dp/ (the step
 * is README.md's).  One host thread per device, each a rank of one in-process group
 * (comm.h's comm_local_group_create) whose collectives move DP's data.  Devices are indexed
 * by slot (their place in --gpus), never by id: on CUDA an id may repeat (--gpus 0,0). */
#ifndef DDPBENCH_DP_H
#define DDPBENCH_DP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "common/data/schedule.h"
#include "common/io/checkpoint.h"
#include "common/measure/result.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"
#include "common/nn/optim.h"
#include "common/train/graph.h"
#include "common/train/stage.h"
#include "common/train/step.h"
#include "common/train/trainer.h"

// ---------------------------------------------------------------------------
// dp_workers.c: the thread pool

/* n threads, created once per run, the ranks of one in-process group (grp).  A failing
 * thread calls dp_pool_fail(), which aborts the group: every wait returns at once.
 * dp_pool_leave() is the one wait that cannot be aborted: every thread passes it on its way
 * out, so none frees buffers another may still be reading (a second round: none frees them
 * before device 0 has ended a capture a failure left open, graph_abandon). */
typedef struct dp_pool dp_pool_t;
typedef struct {
    dp_pool_t *pool;
    int index;
} dp_pool_arg_t;

struct dp_pool {
    int n;                    /* threads running */
    pthread_t tid[MAX_DEVICES];
    dp_pool_arg_t arg[MAX_DEVICES];
    comm_local_group_t *grp;  /* the threads' group: its barrier and collectives */
    pthread_mutex_t mu;       /* the failure record and dp_pool_leave() */
    pthread_cond_t cv;
    bool pin;                 /* each thread on a CPU of its own (base/affinity.h) */
    int left;                 /* threads at dp_pool_leave() */
    int rc;                   /* the first failure (DDP_OK when none) */
    char err[ERR_LEN];
    void (*fn)(void *ctx, int index);
    void *ctx;
};

/* Start n threads running fn(ctx, index), the ranks of a new group. */
int dp_pool_start(dp_pool_t *p, int n, bool pin, void (*fn)(void *ctx, int index), void *ctx,
                  char *err);
/* Barrier across the n threads: DDP_OK, or DDP_ERR_RUNTIME once aborted. */
int dp_pool_sync(dp_pool_t *p);
/* Record a failure (the first one wins) and abort the group. */
void dp_pool_fail(dp_pool_t *p, int rc, const char *msg);
/* The exit barriers (not abortable): every thread passes round 1, 2, ... once, in order. */
void dp_pool_leave(dp_pool_t *p, int round);
/* Join every thread and free the group; the first failure, its message in err. */
int dp_pool_join(dp_pool_t *p, char *err);

// ---------------------------------------------------------------------------
// dp_comm.c: how rows are split

/* torch.chunk along dim 0: chunk = ceil(batch/k); device d gets rows
 * [off, off+rows), rows 0 when it sits the micro-batch out. */
typedef struct {
    int off, rows;
} dp_chunk_t;
dp_chunk_t dp_chunk(int batch, int k, int d);
/* How many devices get rows (torch.chunk can return fewer than k chunks). */
int dp_chunk_count(int batch, int k);

// ---------------------------------------------------------------------------
// the run's state

/* The plan of one optimizer step, written by device 0 one step ahead (double buffered by step
 * parity), on cache lines of its own, its arrays too: writing one must not evict the other. */
typedef struct {
    _Alignas(64) int nmicro;  /* micro-batches in the step (>= 1) */
    int *rows;                /* [accum] rows of each micro-batch */
    const uint32_t **idx;     /* [accum] their sample indices (device 0 only) */
    int nrep;                 /* devices with rows in any micro-batch: they get replicas */
    size_t step_rows;         /* rows of the whole step: the loss's mean denominator */
} dp_plan_t;

typedef struct {
    int id;
    char name[48];            /* "device 1" or "device 1 (id 5)", for messages */
    backend_t *be;
    replica_t rep;            /* params, grads, activations for one chunk */
    train_step_t t;           /* the step's pieces on this device */
    step_meter_t meter;       /* this thread's measurements */
    graph_t graph;            /* --cuda-graph: its part of the group's graph */
    comm_t *comm;             /* its rank of the group (comm_local_join), or NULL */
    comm_t *nccl;             /* its rank of the NCCL group the group's comm owns (nccl) */
    comm_handle_t early[2];   /* device 0: the next step's broadcast and first scatter,
                                 launched before the step (dp_launch_next); 0: none */
    bool traced;              /* it has a --trace recorder */
    move_kind_t scatter_what; /* what its scatter moves (the observer's: dp_comm.c) */
} dp_dev_t;

typedef struct {
    const config_t *cfg;
    const dataset_t *data;
    model_spec_t spec;
    int ndev;                 /* devices */
    int chunk_max;            /* ceil(batch/ndev): rows of the largest chunk */
    bool host_visible;        /* every device's memory is host memory (CPU) */
    bool nccl;                /* broadcast and reduce are NCCL's (config_dp_nccl) */
    bool graphs;              /* --cuda-graph: one CUDA graph of every device per step */
    graph_group_t group;
    run_result_t *res;
    dp_pool_t pool;
    dp_dev_t dev[MAX_DEVICES];

    /* Why the alignments below: what device 0 writes every step and what every device reads
     * every step on separate cache lines (sharing one cost each reader a miss, ~0.3 us). */

    /* the schedule: device 0's thread only after the start (others: total_steps) */
    schedule_t sch;
    _Alignas(64) long total_steps;
    long start_step;          /* the first step this run runs (> 0 after --resume) */
    dp_plan_t plan[2];        /* plan[g & 1] is step g's */
    float *host_params;       /* initial parameters, then the final ones */

    /* device 0's extra buffers: the whole micro-batch and its loss */
    _Alignas(64) optim_t opt;
    /* the micro-batch's inputs and targets: the stager's last slot (set by device 0 before
     * the barrier the others read them after) */
    _Alignas(64) float *gx;
    float *gy;
    float *gout, *gdout;      /* gathered outputs and their gradient [batch, out] */
    float *loss_sum;          /* one device float */
    stager_t stg;             /* device 0's batch staging (its first slot: bx, by) */
    float *bx, *by;

    /* device 0's thread only (dp_run reads them after the join) */
    ckpt_run_t ck;            /* --checkpoint / --resume (loaded by dp_run before the start) */
    /* --check-replicas (dp_replicas.c): each device's hash and host parameters, its time */
    struct dp_check {
        float *fp[MAX_DEVICES], *host[MAX_DEVICES + 1];
        float ref[2][4];
        double secs[MAX_DEVICES];
    } check;
} dp_ctx_t;

// ---------------------------------------------------------------------------
// dp_device.c: a device's buffers

/* The test seam: NULL means backend_create(cfg->backend, ...); tests run the paths for
 * memory that is not the host's on the CPU backend. */
typedef int (*dp_backend_create_fn)(backend_t **out, const config_t *cfg, int device_id,
                                    char *err);
extern dp_backend_create_fn dp_backend_create_hook;

/* Device d's backend and replica (device 0: also the optimizer and whole-batch buffers), on
 * d's own thread: a CUDA device is current per thread. */
int dp_device_init(dp_ctx_t *c, int d, char *err);
void dp_device_free(dp_ctx_t *c, int d);

// ---------------------------------------------------------------------------
// dp_step.c: the step loop every device thread runs

/* Fill plan[g & 1] for step g (device 0, one step ahead; dp_run for step 0). */
void dp_plan_step(dp_ctx_t *c, long g);
int dp_device_loop(dp_ctx_t *c, int d, char *err);

// ---------------------------------------------------------------------------
// dp_replicas.c: --check-replicas

/* Device 0 before step g, every device after its last barrier (after); checked steps only. */
int dp_replicas(dp_ctx_t *c, int d, long g, bool after, char *err);
void dp_replicas_free(dp_ctx_t *c, int d);

// ---------------------------------------------------------------------------
// dp_comm.c: DP's collectives, each on the group (see the file)

/* Device d's part of each; its meter's phases, --trace's spans and --explain's moves come
 * from the group's observer, set by dp_comm_join. */
int dp_comm_join(dp_ctx_t *c, int d, char *err);
/* Device 0's parameters into the replicas of devices 1..nrep-1. */
int dp_broadcast(dp_ctx_t *c, int d, int nrep, char *err);
/* Micro-batch mi of plan pl: device 0 stages it (unless done), every device gets its chunk. */
int dp_scatter_batch(dp_ctx_t *c, int d, const dp_plan_t *pl, int mi, char *err);
/* Chunk ch of device 0's output gradient into device d's. */
int dp_scatter_grad(dp_ctx_t *c, int d, dp_chunk_t ch, char *err);
/* Every device's output chunk of a rows-row micro-batch into device 0's gout. */
int dp_gather(dp_ctx_t *c, int d, int rows, char *err);
/* The gradients of the devices that have them summed onto device 0's. */
int dp_reduce(dp_ctx_t *c, int d, char *err);
/* Device 0, host memory, right after the barrier that ends a step: launch the next step's
 * broadcast and scatter (plan pl), so the others find them done (dp_staged_ahead). */
int dp_launch_next(dp_ctx_t *c, const dp_plan_t *pl, char *err);
/* Device d (not 0), after that barrier: prefetch what its next step copies from device 0,
 * while its meter reports the step that ended. */
void dp_prefetch_next(const dp_ctx_t *c, int d, const dp_plan_t *pl);
/* Device 0: read micro-batch mi's rows into gx and gy (staged when not host memory). */
int dp_stage(dp_ctx_t *c, const dp_plan_t *pl, int mi);

#endif
