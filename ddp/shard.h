/* ddp/shard.h: what a DDP rank holds of the model, chosen once at set-up from --zero: the
 * whole of it (plain DDP, stage 0), or one rank's share as ZeRO-1 (optimizer state), -2
 * (and gradients) and -3 (and parameters) do (docs/modes.md).  Of each bucket (reducer.h)
 * rank q owns block q (count / world floats), and every rank the count mod world floats left
 * at its end; the final parameters are plain DDP's, bit for bit.  A rank's step calls the
 * same functions whatever the stage: shard_create (after the replica, without the arenas
 * shard_replica_skip leaves out, and the reducer), shard_params_in, then per step
 * shard_last_micro, shard_no_rows, shard_step; shard_params_out at the end. */
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

/* What one rank of `world` holds at stage --zero for model s under c's buckets, optimizer
 * and --accum, in bytes, allocated exactly as the ranks do (the memory table's rows). */
typedef struct {
    double params, grads, optim;
} shard_mem_t;
/* What ZeRO stage `stage` cuts the reducer's buckets to (reducer.h). */
bucket_unit_t shard_bucket_unit(int stage);
int shard_mem(const model_spec_t *s, const config_t *c, int world, shard_mem_t *out, char *err);

/* The arenas the replica leaves out at cfg's stage (REPLICA_NO_*). */
unsigned shard_replica_skip(const config_t *cfg);

int shard_create(shard_t **out, const config_t *cfg, backend_t *be, comm_t *comm, replica_t *rep,
                 reducer_t *red, step_meter_t *meter, char *err);
void shard_free(shard_t *s);
/* The optimizer (its state covers what this rank steps). */
optim_t *shard_optim(shard_t *s);

int shard_params_in(shard_t *s, const float *host0, char *err);
int shard_params_out(shard_t *s, float *host, char *err);

/* The last micro-batch of step g this rank runs (plain: the last with rows here, or 0). */
int shard_last_micro(const shard_t *s, const schedule_t *sch, long g);
/* Micro-batch `last` or earlier without rows here: the collectives of one
 * with rows, its gradients zeros (none when the step computed some). */
int shard_no_rows(shard_t *s, bool last, train_step_t *t);
int shard_step(shard_t *s, char *err);

/* Once step r has run: the backward pass its hidden communication is measured against
 * (ZeRO-2 and -3: from the last loss to the last backward lap). */
void shard_backward(const shard_t *s, const step_rec_t *r, double *t0, double *t1);

#endif
