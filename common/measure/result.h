/* common/measure/result.h: what a run measured, handed from a strategy to the report.
 * Fixed-size per-device records and step statistics (DDP ranks write theirs in shared
 * memory); the final parameters and the loss log are owned, freed by result_free(). */
#ifndef DDPBENCH_RESULT_H
#define DDPBENCH_RESULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/kinds.h"
#include "common/base/status.h"
#include "common/nn/model.h"
#include "common/measure/disturb.h"
#include "common/measure/timing.h"
#include "common/measure/trace.h"

/* --explain: what the told step (the middle timed step) moved, how much and how long. */
typedef enum {
    MOVE_BATCH = 0,  /* sample rows gathered on the host (and copied to the device) */
    MOVE_SCATTER,    /* DP: input chunks from the host/device 0 to each device */
    MOVE_REPLICATE,  /* DP: parameters from device 0 to the others */
    MOVE_GATHER,     /* DP: outputs of every device to device 0 */
    MOVE_GRAD_OUT,   /* DP: output gradients from device 0 back to each device */
    MOVE_REDUCE,     /* DP: parameter gradients of every device summed on device 0 */
    MOVE_BROADCAST,  /* DDP: initial parameters from rank 0 (before step 1) */
    MOVE_ALLREDUCE,  /* DDP: gradient buckets all-reduced */
    MOVE_COUNT
} move_kind_t;

typedef struct {
    uint64_t bytes;  /* payload bytes moved in the step, all devices together */
    double seconds;  /* wall time those moves took (devices in parallel: the slowest's) */
    int ops;         /* copies / collectives issued */
} move_stat_t;

typedef struct {
    int device_id;               /* the id from --gpus */
    char name[64];               /* "NVIDIA H200"; "" lets the report describe it */
    double phase_s[PH_COUNT];    /* summed over the timed steps */
    long rows;                   /* sample rows this device processed in timed steps */
    size_t mem_peak;             /* bytes, high-water mark of this device's allocations */
    size_t mem_split[MEM_KINDS]; /* what the peak held, by purpose (they add up to it) */
    /* the step --explain tells alone (story.step: the middle timed step) */
    double first_phase_s[PH_COUNT];
    long first_rows;             /* rows this device computed in that step */
    move_stat_t first_move[MOVE_COUNT]; /* what this device's copies moved in it */
    /* DDP ranks: steps with data, and steps shadowed (out of data: zero gradients) */
    long steps_run, steps_shadowed;
    long host_syncs;             /* times the host waited for this device in timed steps */
    long synced_steps;           /* the timed steps they were counted over */
    long launches[LAUNCH_KINDS]; /* work queued on it in those steps, by kind (backend.h) */
    /* the work figure (step_meter.c's work_cpu; 0 steps on a GPU) */
    long work_steps;
    double work_cpu_mean, work_cpu_p10, work_cpu_p25, work_cpu_p50;
    /* peak FLOP/s (0: unknown); the FLOPs of the timed steps' passes and optimizer */
    double peak_flops, flops, flops_optim;
    /* a scenario's watch: batches that repeated the epoch before's; a gradient norm */
    long batches_repeated, batches_compared;
    double grad_norm;
} device_stats_t;

/* --check-replicas (plain data: DDP's rank 0 writes it in shared memory): the largest
 * |difference| from rank 0's parameters at each checked step, and the first one's step. */
#define REPLICA_POINTS_MAX 256
typedef struct {
    long checks;
    double seconds;  /* the checks' wall time, all together (rank 0's, device 0's) */
    int npoints;
    long step[REPLICA_POINTS_MAX];
    double dist[REPLICA_POINTS_MAX];
    bool differed;   /* the replicas differed at some check: */
    long first_step;
} replica_rec_t;
/* Add check g's distance, and whether the replicas differed at it. */
void replica_rec_add(replica_rec_t *r, long g, double dist, bool differed);

#define STORY_MAX_BUCKETS 32

typedef struct {
    int first_layer, last_layer; /* Linear layers whose gradients it holds */
    uint64_t bytes;
    /* offsets in seconds from the start of rank 0's backward in the told step */
    double ready_s;  /* its last gradient was written: all-reduce launched */
    double start_s;  /* the all-reduce began moving data */
    double end_s;    /* the averaged gradients were in place */
} bucket_story_t;

typedef struct {
    bool filled;                 /* the told step reported (the meter wrote this story) */
    long step;                   /* the step told (0-based; the devices' first_* fields) */
    double step_s;               /* its wall time */
    double backward_s;           /* rank/device 0's backward in it */
    move_stat_t move[MOVE_COUNT];
    int nbuckets;                /* DDP buckets (the first STORY_MAX_BUCKETS listed) */
    bucket_story_t bucket[STORY_MAX_BUCKETS];
} step_story_t;

const char *move_name(move_kind_t k); /* "replicate", "all-reduce", ... */

typedef struct {
    long step;   /* optimizer step (1-based) */
    long epoch;  /* 0-based */
    double loss; /* mean loss of that step's global batch */
} loss_point_t;

/* The timed steps in fixed memory (DDP keeps one in shared memory): the exact count,
 * total, minimum and maximum, and for the quantiles a uniform sample of STEP_SAMPLE_MAX
 * (Vitter's algorithm R, seeded the same in every run; its error: docs/results.md). */
#define STEP_SAMPLE_MAX 4096
typedef struct {
    long n;              /* timed steps */
    double timed_s;      /* wall seconds of the timed steps (their sum) */
    double min_s, max_s; /* the shortest and longest step (0 when n == 0) */
    long timed_samples;  /* samples in timed steps (the run: all devices') */
    uint64_t rng;        /* the reservoir's random stream */
    double sample[STEP_SAMPLE_MAX]; /* min(n, STEP_SAMPLE_MAX) step times */
} step_times_t;

/* Append one timed step of dt seconds and `samples` samples. */
void step_times_add(step_times_t *t, double dt, long samples);
/* Step times kept in the sample: min(n, STEP_SAMPLE_MAX). */
long step_times_kept(const step_times_t *t);
/* The p-th percentile (0..100) of the sample, as numpy's default; 0 when empty. */
double step_times_quantile(const step_times_t *t, double p);

/* The first LOSS_LOG_MAX logged losses; fixed: pt is cap points DDP's segment owns. */
#define LOSS_LOG_MAX 65536
typedef struct {
    loss_point_t *pt;
    long n, cap;
    bool fixed;
} loss_log_t;

/* Append a point (DDP_ERR_RUNTIME when out of memory; a full log drops it). */
int loss_log_add(loss_log_t *l, long step, long epoch, double loss);

#define RESULT_TUNE_MAX 8

typedef struct run_result {
    mode_t_ mode;
    int zero;               /* ddp: its ZeRO stage (--zero; 0 plain) */
    backend_kind_t backend;
    comm_kind_t comm;            /* DDP only */
    int ndev;
    device_stats_t dev[MAX_DEVICES];

    long steps;                  /* optimizer steps run */
    long warmup_steps;           /* of which untimed */
    long epochs;                 /* epochs started */
    step_times_t times;          /* the timed steps (timed_samples: global) */
    double total_s;              /* wall seconds of the whole training loop */
    double samples_per_s;        /* times.timed_samples / times.timed_s */

    loss_log_t log;              /* the losses that were logged */

    double final_loss;           /* loss of the last step */
    double train_accuracy;       /* over the whole dataset after training; < 0 if n/a */
    double train_loss;           /* mean loss over the whole dataset after training */

    float *params;               /* final parameters on the host [nparams] */
    size_t nparams;
    param_checksum_t checksum;

    /* what it trained on, for compare's verdict (trainer_begin) */
    optim_kind_t optim;
    double lr;
    precision_t precision;       /* --precision (bf16 has its own agreement) */
    int stream_replicas;         /* its DistributedSampler's replicas; 0: --rank-samples */
    long epoch_samples;          /* samples an epoch of its stream trains on */

    step_story_t story;          /* --explain: the told step */
    trace_rec_t *trace[MAX_DEVICES]; /* --trace: per device slot, owned; NULL when off */

    /* --bucket-mb auto: the caps tried, their summed step times, the one chosen (or 0) */
    int ntuned;
    double tuned_mb[RESULT_TUNE_MAX], tuned_s[RESULT_TUNE_MAX];
    double bucket_mb_chosen;

    /* DDP: rank 0's buckets: bytes, and each one's all-reduce seconds per step */
    int nbuckets;
    double bucket_bytes[STORY_MAX_BUCKETS], bucket_s[STORY_MAX_BUCKETS];

    disturb_t machine;           /* what else the machine did (disturb.h; wall_s 0: not taken) */

    /* --cuda-graph auto: why every rank ran eagerly ("rank R (device D): why"), or "" */
    char graph_refused[ERR_LEN];

    replica_rec_t replicas;      /* --check-replicas */

    /* --comm-hook: the run without the hook, for the drift (not owned), or NULL */
    const struct run_result *hook_ref;
} run_result_t;

void result_init(run_result_t *r);
void result_free(run_result_t *r);
/* --trace (cfg_trace): one recorder per device slot, sized by trace_capacity. */
int result_trace_init(run_result_t *r, bool cfg_trace, int ndev, int accum, int extra_per_step);
/* Derive samples_per_s, checksum. */
void result_finish(run_result_t *r);

#endif
