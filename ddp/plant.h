/* ddp/plant.h: a scenario's planted mistake on a DDP rank (config_t.plant, never an option;
 * docs/scenarios.md), set up once through seams the rank already has (the step's hooks, the
 * buckets' ops, the replica's layer hook), so the fenced step runs the same code, kernels
 * and collectives with or without it: loss-scale, no-sync, unused, collective, bucket-view. */
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
