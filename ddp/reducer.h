/* ddp/reducer.h: DDP's gradient buckets and their all-reduces, overlapped with backward
 * (torch DDP's Reducer; docs/modes.md says how buckets are cut).  Per optimizer step:
 * reducer_begin before each micro-batch's backward, reducer_hook from model_backward (it
 * launches every bucket whose gradients are all ready, in index order: the same on every
 * rank), reducer_launch_rest after backward, comm_wait_all, reducer_finish, and
 * reducer_spans once the step has run.  The buckets are summed, not averaged: the loss's
 * gradient already carries 1 / global rows.  Handles and marks are kept by step parity,
 * since a step reports when the next one ends. */
#ifndef DDPBENCH_REDUCER_H
#define DDPBENCH_REDUCER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/comm/comm.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"

typedef struct {
    size_t off, count;     /* floats: the slice of the gradient arena */
    int first_param;       /* parameter indices covered: [first_param, last_param] */
    int last_param;        /* (param 2l is W_l, 2l+1 is b_l) */
    int pending;           /* parameters not yet ready in this backward */
    comm_handle_t h[2];    /* its all-reduce in the steps of each parity */
    int ready_mark[2];     /* the step meter's marker at its launch (-1: none) */
    char tag[24];          /* "bucket 2", for error messages */
    /* the step reducer_spans was last asked about: */
    double ready_s;        /* its gradients were written: the all-reduce was launched */
    comm_span_t span;      /* when it ran (0s when unknown) */
} bucket_t;

typedef struct reducer reducer_t;

/* What a bucket sends in place of plain DDP's float32 all-reduce: a --comm-hook's
 * (comm_hook.h) or a ZeRO stage's reduce-scatter (shard.h).  NULL: the plain one's. */
typedef struct {
    /* Launch bucket i's collectives (run: at once, comm_run); *h: the first one's handle. */
    int (*launch)(void *ctx, reducer_t *r, int i, bool run, comm_handle_t *h);
    /* After the wait for every bucket: the gradients the optimizer applies. */
    int (*finish)(void *ctx, reducer_t *r);
    /* Bytes bucket i carried in the last all-reducing step. */
    double (*bytes)(const void *ctx, const reducer_t *r, int i);
    trace_kind_t kind; /* its --trace event (0: TR_ALLREDUCE) */
} bucket_ops_t;

struct reducer {
    comm_t *comm;
    const model_spec_t *spec;
    float *grads;          /* the replica's gradient arena (device) */
    bucket_t *b;
    int nb;
    int bucket_of[2 * MODEL_MAX_LAYERS]; /* parameter -> bucket */
    bool overlap;          /* launch from the hook (false: --no-overlap) */
    bool run_rest;         /* the last bucket waits for launch_rest, which runs what is left
                              with comm_run (nothing left to overlap); false: from the hook */
    bool armed;            /* this backward all-reduces (the last micro-batch) */
    long g;                /* the step (reducer_begin's) */
    int par;               /* the step's parity */
    uint64_t ready;        /* bit p: parameter p got its gradient in this backward */
    int next;              /* next bucket to launch */
    bool launch_failed;    /* a launch from the hook failed: the comm has the error */
    step_meter_t *meter;   /* marks each launch on the device's queue */
    const bucket_ops_t *ops; /* NULL: plain all-reduces */
    void *ops_ctx;
};

/* A bucket's blocks over world ranks (ZeRO): floats per rank, and the leftover at its end. */
static inline size_t reducer_block(const bucket_t *b, int world)
{
    return world > 1 ? b->count / (size_t)world : b->count;
}
static inline size_t reducer_rest(const bucket_t *b, int world)
{
    return b->count - reducer_block(b, world) * (size_t)(world > 1 ? world : 1);
}

/* What a bucket is cut to: PyTorch DDP's caps, or a ZeRO stage's unit (shard_bucket_unit). */
typedef enum {
    BUCKETS_CAPPED = 0,    /* --first-bucket-mb, then --bucket-mb (DDP, ZeRO-1) */
    BUCKETS_CUT_AT_LAYERS, /* ZeRO-2: the capped buckets cut at every layer boundary */
    BUCKETS_PER_LAYER,     /* ZeRO-3: one bucket per layer (FSDP wrapping each Linear) */
} bucket_unit_t;

/* Assign buckets over spec's arena in grads, by unit.  Caps in MiB (> 0). */
int reducer_init(reducer_t *r, comm_t *comm, step_meter_t *meter, const model_spec_t *spec,
                 float *grads, double first_bucket_mb, double bucket_mb, bool overlap,
                 bucket_unit_t unit, char *err);
void reducer_free(reducer_t *r);

/* Before a micro-batch's backward in step g: sync false skips the all-reduce (no_sync). */
void reducer_begin(reducer_t *r, bool sync, long g);
/* The layer hook for model_backward (ctx is the reducer_t). */
int reducer_hook(void *ctx, int layer);
/* After an all-reducing backward that computed: the parameters that got no gradient, named
 * into names ("layer 1 weight, layer 1 bias"), and how many (PyTorch's "Expected to have
 * finished reduction in the prior iteration"). */
int reducer_unready(const reducer_t *r, char *names, size_t n);
/* After backward: launch the buckets the hook did not (all of them without overlap). */
int reducer_launch_rest(reducer_t *r);
/* After comm_wait_all: the gradients the optimizer applies (bucket_ops_t's finish). */
int reducer_finish(reducer_t *r);
/* Bytes bucket i carried in the last all-reducing step. */
double reducer_bytes(const reducer_t *r, int i);
/* Once step rec->g has run: seconds of its bucket all-reduces inside [t0, t1] (backward),
 * from the comm's spans (0: cannot tell).  Leaves each bucket's span and launch time in b[i]
 * and adds the buckets to --explain's told step. */
double reducer_spans(reducer_t *r, const step_rec_t *rec, double t0, double t1);
/* The same step's buckets for the run's record (timed steps: each bucket's
 * bytes and seconds, added up) and, with tr, as --trace events. */
void reducer_record(const reducer_t *r, bool timed, int *nb, double *bytes, double *secs,
                    trace_rec_t *tr);

#endif
