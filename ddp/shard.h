/* ddp/shard.h: what a DDP rank holds of the model, chosen once at set-up from
 * --zero: the whole of it (plain DDP, stage 0), or one rank's share as
 * DeepSpeed's ZeRO stages, torch's ZeroRedundancyOptimizer and FSDP do:
 *
 *   ZeRO-1   the optimizer state (--zero 1, llm.c's -z 1)
 *   ZeRO-2   and the gradients (FSDP's SHARD_GRAD_OP; its buckets cut at
 *            layer boundaries)
 *   ZeRO-3   and the parameters (FULL_SHARD)
 *
 * Of each bucket (reducer.h) rank q owns block q (count / world floats) and
 * every rank the count mod world floats left at its end; what a rank shards
 * is an array over those pieces alone, about 1/world of the model.  The
 * gradients are reduce-scattered instead of all-reduced (block q's sum to
 * rank q, bit for bit what the all-reduce gives those floats; the leftover
 * all-reduced); each rank steps its pieces; ZeRO-1 and -2 then all-gather
 * each bucket's parameters in place, ZeRO-3 gathers a layer's before it
 * computes.  The sums are the all-reduce's and the updates elementwise, so
 * the final parameters are plain DDP's, bit for bit.
 *
 * A rank's step calls the same things whatever the stage:
 *
 *   shard_create(&s, ...)       after the replica (without the arenas
 *                               shard_replica_skip leaves out) and the
 *                               reducer: the optimizer, the buckets' launch,
 *                               ZeRO-2's and -3's buffers and layer hooks
 *   shard_params_in(s, host0)   rank 0's initial parameters to every rank
 *   shard_last_micro(s, ...)    the micro-batches it runs (ZeRO-2 and -3:
 *                               every one, so ZeRO-3's gathers are the same
 *                               collectives on every rank)
 *   shard_no_rows(s, ...)       a micro-batch without rows here
 *   shard_step(s, err)          after every bucket was waited for: the
 *                               optimizer on what this rank holds, and the
 *                               parameters gathered back (waited for)
 *   shard_params_out(s, host)   the whole parameters on the host */
#ifndef DDPBENCH_SHARD_H
#define DDPBENCH_SHARD_H

#include <stdbool.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/data/schedule.h"
#include "common/nn/optim.h"
#include "common/train/step.h"
#include "ddp/reducer.h"

typedef struct shard shard_t;

/* What one rank of `world` holds at stage `stage` (0: plain DDP) for model
 * s under c's buckets, optimizer and --accum, in bytes: parameters,
 * gradients and optimizer state, allocated exactly as the ranks do (the
 * rows of the memory table). */
typedef struct {
    double params, grads, optim;
} shard_mem_t;
/* What ZeRO stage `stage` cuts the reducer's buckets to (reducer.h). */
bucket_unit_t shard_bucket_unit(int stage);
int shard_mem(const model_spec_t *s, const config_t *c, int stage, int world, shard_mem_t *out,
              char *err);

/* The arenas the replica leaves out at cfg's stage (REPLICA_NO_*). */
unsigned shard_replica_skip(const config_t *cfg);

int shard_create(shard_t **out, const config_t *cfg, backend_t *be, comm_t *comm, replica_t *rep,
                 reducer_t *red, step_meter_t *meter, char *err);
void shard_free(shard_t *s);
/* The optimizer (its state covers what this rank steps). */
optim_t *shard_optim(shard_t *s);

int shard_params_in(shard_t *s, const float *host0, char *err);
int shard_params_out(shard_t *s, float *host, char *err);

/* The last micro-batch of step g this rank runs (plain: the last in which
 * it has rows, or 0 when it has none). */
int shard_last_micro(const shard_t *s, const schedule_t *sch, long g);
/* Micro-batch `last` or earlier without rows here: the collectives of one
 * with rows, its gradients zeros (none when the step computed some). */
int shard_no_rows(shard_t *s, bool last, train_step_t *t);
int shard_step(shard_t *s, char *err);

/* Once step r has run: the backward pass its hidden communication is
 * measured against (ZeRO-2 and -3 split it into laps around their waits:
 * from the last loss to the last backward lap). */
void shard_backward(const shard_t *s, const step_rec_t *r, double *t0, double *t1);

#endif
