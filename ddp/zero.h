/* ddp/zero.h: ZeRO-2 and ZeRO-3 in DDP (--zero 2, --zero 3), the gradients and
 * then the parameters sharded over the ranks, as DeepSpeed's ZeRO stages and
 * PyTorch's FSDP (SHARD_GRAD_OP, FULL_SHARD) do.
 *
 * Both keep ZeRO-1's shard (zero1.h): of each bucket, rank q owns block q
 * (count / world floats) and every rank the count mod world floats left at
 * its end; the optimizer state, and here the gradients, are arrays over
 * those pieces alone (about 1/world of the model).
 *
 * ZeRO-2: the reducer's buckets cut at layer boundaries (a bucket holds one
 * layer at most, as FSDP's unit); backward writes each bucket's gradients
 * into one of two bucket buffers (the largest bucket of each parity;
 * gradient_as_bucket_view on a buffer
 * that is reused instead of an arena that is held); the bucket is
 * reduce-scattered out of it straight into the rank's gradient shard as soon
 * as backward has written it, and the buffer is written again two buckets
 * later, once that reduce-scatter is done.  The parameters stay whole: each
 * rank steps its pieces, then every bucket's parameters are all-gathered in
 * place (as ZeRO-1).
 *
 * ZeRO-3: the unit is a layer (FSDP wrapping each Linear): its buckets are
 * one per layer.  A rank holds its pieces of the parameters alone.  Before a
 * layer's forward, and again before its backward, the layer's parameters are
 * all-gathered into one of two layer buffers, and the next layer's gather is
 * launched before this one is waited for (FSDP's forward and backward
 * prefetch), so it runs while this layer computes; a buffer is reused two
 * layers later, after the comm has seen that layer's work (launches are
 * ordered after the rank's earlier work: comm.h).  Gradients as ZeRO-2, per
 * layer; each rank steps its pieces in place; nothing is gathered after the
 * step.
 *
 * Under --accum K > 1 every micro-batch but the last accumulates into whole
 * gradients (FSDP's no_sync does the same, at the same memory cost), and the
 * last one reduce-scatters them: the gradient buffers are then one arena.
 * Every rank runs every micro-batch, with no rows where it has none (only the
 * collectives, its gradient zeros): ZeRO-3's gathers make the sequence of
 * collectives the same on every rank.
 *
 * The sums are the all-reduce's (each element summed once, in rank order),
 * the updates elementwise: the final parameters are plain DDP's.
 *
 *   zero_init(&z, ...)          after the replica (replica_init_sharded) and
 *                               reducer; ZeRO-3 replaces the reducer's buckets
 *   zero_params_in(&z, host)    the initial parameters (rank 0's) to every shard
 *   zero_skeleton(&z, ...)      a micro-batch without rows: the collectives alone
 *   zero_step(&z, ...)          after the reduce-scatters: step the shard
 *   zero_params_out(&z, host)   the whole parameters back on the host */
#ifndef DDPBENCH_ZERO_H
#define DDPBENCH_ZERO_H

#include <stdbool.h>
#include <stddef.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "ddp/reducer.h"
#include "ddp/zero1.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"
#include "common/nn/optim.h"

typedef struct {
    int stage;              /* 2 or 3 */
    int world, rank;
    backend_t *be;
    comm_t *comm;
    replica_t *rep;
    reducer_t *red;
    step_meter_t *meter;    /* the waits for gathers: exposed communication */
    bool whole;             /* --accum > 1: the gradients are the replica's arena */
    size_t *blk_at, *rest_at; /* per bucket: where its block and leftover are in the shard */
    float *gslot[2];        /* ZeRO-2/3 without whole: the buckets' gradient buffers */
    int gslot_bucket[2];    /* which bucket each holds this backward (-1: none) */
    comm_handle_t *last_h;  /* per bucket: its last collective this step */
    float *gshard;          /* the shard's gradients */
    float *pshard;          /* ZeRO-3: the shard's parameters */
    float *pslot[2];        /* ZeRO-3: gathered layers (layer l in pslot[l % 2]) */
    comm_handle_t gather_h[MODEL_MAX_LAYERS]; /* ZeRO-3: this pass's gather of layer l */
    bool gathered[MODEL_MAX_LAYERS];          /* launched in this pass */
    zero1_t z1;             /* the pieces and their step */
    char (*tag)[32];        /* "all-gather of layer 2", per layer */
} zero_t;

/* Floats of the shard (optimizer state, gradients) for red's buckets, after
 * zero_buckets(). */
size_t zero_shard_floats(const reducer_t *red, int world, int rank);
/* ZeRO-2: red's buckets cut at layer boundaries; ZeRO-3: one bucket per
 * layer, last layer first, in place of red's. */
int zero_buckets(reducer_t *red, int stage, char *err);
/* What the replica leaves out for this stage (REPLICA_NO_*). */
unsigned zero_replica_skip(int stage, int accum);
/* What one rank of `world` holds at ZeRO stage `stage` (0: plain DDP) for
 * model s under c's buckets, optimizer and --accum, in bytes: parameters,
 * gradients and optimizer state, allocated exactly as zero_init and the
 * replica do (the rows of the memory table).  DDP_OK, or a status with err. */
typedef struct {
    double params, grads, optim;
} zero_mem_t;
int zero_mem_plan(const model_spec_t *s, const config_t *c, int stage, int world, zero_mem_t *out,
                  char *err);
/* Set up: buffers, the reducer's launches, the replica's hooks; opt covers
 * zero_shard_floats() floats. */
int zero_init(zero_t *z, int stage, backend_t *be, comm_t *comm, replica_t *rep, reducer_t *red,
              optim_t *opt, step_meter_t *meter, int accum, char *err);
void zero_free(zero_t *z);
/* Rank 0's host parameters (NULL elsewhere) to every rank: ZeRO-2's arena
 * is broadcast whole, ZeRO-3's layer by layer, each rank keeping its pieces. */
int zero_params_in(zero_t *z, const float *host0, char *err);
/* Every rank: the whole parameters into host (ZeRO-3 gathers them). */
int zero_params_out(zero_t *z, float *host, char *err);
/* A micro-batch in which this rank has no rows: the same collectives as one
 * with rows, its gradients zeros when nothing is accumulated yet. */
int zero_skeleton(zero_t *z, bool accumulated, char *err);
/* After every bucket's reduce-scatter was waited for: step the shard
 * (ZeRO-2 then launches the all-gathers, which the caller waits for). */
int zero_step(zero_t *z, char *err);

#endif
