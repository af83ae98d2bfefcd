/* ddp/plant.h: a scenario's planted mistake on a DDP rank (config_t.plant,
 * never an option), set up once through seams the rank already has, so the
 * fenced step runs the same code with or without it:
 *
 *   loss-scale   the step's hooks (train/step.h): after each loss, its
 *                gradient rescaled from 1 / the step's global rows to 1 /
 *                this micro-batch's rows on the rank (the loss averaged per
 *                rank, the gradients summed, accumulation not divided)
 *   no-sync      the buckets' ops (reducer.h): from step S they all-reduce
 *                nothing (no_sync left on for the all-reducing micro-batch)
 *   unused       the replica's layer hook (model.h): from step S, rank R's
 *                backward stops above layer L (a branch that detaches it)
 *   collective   the step's hooks: at step S rank R all-reduces its loss, a
 *                collective the other ranks do not run
 *   bucket-view  the buckets' ops: each bucket copied out of the gradients
 *                into a buffer of its own, all-reduced there and copied
 *                back (PyTorch's gradient_as_bucket_view=False)
 *
 * What it changes is the mistake itself: the same kernels and collectives,
 * on the real step. */
#ifndef DDPBENCH_DDP_PLANT_H
#define DDPBENCH_DDP_PLANT_H

#include "common/comm/comm.h"
#include "common/data/schedule.h"
#include "common/train/step.h"
#include "ddp/reducer.h"

typedef struct planted planted_t;

/* *out NULL when cfg plants nothing on this rank.  After the replica,
 * reducer, shard, hook and step pieces are set up. */
int plant_install(planted_t **out, const config_t *cfg, int rank, train_step_t *t,
                  reducer_t *red, const schedule_t *sch, char *err);
void plant_free(planted_t *p);

#endif
