/* ddp/rank.h: one DDP rank's state, shared by the files that make it up:
 * rank.c (its loop and its step), rank_setup.c (what it is wired from, and
 * its teardown) and autotune.c (--bucket-mb auto between its steps). */
#ifndef DDPBENCH_RANK_H
#define DDPBENCH_RANK_H

#include "common/data/schedule.h"
#include "common/io/checkpoint.h"
#include "common/measure/step_meter.h"
#include "common/train/graph.h"
#include "common/train/stage.h"
#include "common/train/step.h"
#include "ddp/autotune.h"
#include "ddp/comm_hook.h"
#include "ddp/global_loss.h"
#include "ddp/launch.h"
#include "ddp/plant.h"
#include "ddp/reducer.h"
#include "ddp/shard.h"
#include "ddp/straggle.h"
#include "ddp/watch.h"

typedef struct {
    const config_t *cfg;
    const dataset_t *data;
    const ddp_env_t *env; /* the launcher's: its rank, the area, the segment or MPI's exchange */
    int rank, world;
    ddp_rank_rec_t *rec;  /* its record in the area */
    model_spec_t spec;
    backend_t *be;
    comm_t *comm;
    schedule_t sch;       /* its shard of the data (DistributedSampler) */
    replica_t rep;
    stager_t stg;
    reducer_t red;        /* the gradient buckets */
    shard_t *shard;       /* what it holds of the model, and its optimizer (--zero) */
    comm_hook_t *hook;    /* --comm-hook: what a bucket sends, or NULL */
    global_loss_t loss;   /* the step's loss over every rank (on the steps that log it) */
    ckpt_run_t ck;        /* --resume (every rank) and --checkpoint (rank 0 writes) */
    step_meter_t meter;
    graph_t graph;        /* --cuda-graph */
    straggle_t slow;      /* --slow-rank */
    autotune_t tune;      /* --bucket-mb auto */
    watch_t *watch;       /* --check-replicas, a scenario's watch (NULL: none) */
    planted_t *plant;     /* a scenario's planted mistake (NULL: none) */
    train_step_t t;       /* the step's pieces on this rank */
    char err[ERR_LEN];
} rank_t;

/* Everything before the first step; the initial parameters broadcast. */
int rank_setup(rank_t *me);
void rank_teardown(rank_t *me);

/* --bucket-mb auto around step g (autotune.c): the cap it tries before, its time after. */
int rank_autotune_before(rank_t *me, long g);
int rank_autotune_after(rank_t *me);

#endif
