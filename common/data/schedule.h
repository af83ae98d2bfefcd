/* common/data/schedule.h: which samples each optimizer step reads on this rank.
 *
 * The DistributedSampler's order (sampler.h) cut into micro-batches and steps
 * (epoch_plan_t), over as many epochs as --epochs or --steps ask for, plus
 * the two questions every loop asks of a step: is its loss logged, is it
 * timed (after --warmup-steps).  One schedule per rank; single and DP are one
 * rank of world 1. */
#ifndef DDPBENCH_SCHEDULE_H
#define DDPBENCH_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "data/data.h"
#include "data/sampler.h"

typedef struct {
    const config_t *cfg;
    const dataset_t *data;
    sampler_t sampler;
    epoch_plan_t plan;     /* this rank's micro-batches and steps per epoch */
    long total_steps;      /* optimizer steps in the whole run */
    long start_step;       /* the first step this process runs (> 0 after --resume) */
    long epochs;           /* epochs the run touches */
    uint32_t *idx;         /* this rank's indices for epoch loaded_epoch */
    uint32_t *perm;        /* the epoch's permutation (n) */
    long loaded_epoch;
} schedule_t;

/* world/rank: the DistributedSampler's (1/0 for single and DP); local_batch:
 * rows per micro-batch on this rank (the global batch, or batch/world in DDP). */
int schedule_init(schedule_t *s, const config_t *c, const dataset_t *d, int world, int rank,
                  int local_batch, char *err);
void schedule_free(schedule_t *s);
static inline long schedule_epoch_of(const schedule_t *s, long g) { return g / (long)s->plan.steps; }
/* Indices of micro-batch `micro` of global step g (0-based) and its rows (0 when absent). */
const uint32_t *schedule_micro(schedule_t *s, long g, int micro, int *rows);
/* Rows of step g on this rank (the denominator of the loss mean). */
size_t schedule_step_rows(const schedule_t *s, long g);
/* Should the loss of step g be logged (every --log-every steps, else at each epoch end, and the last)? */
bool schedule_logs(const schedule_t *s, long g);
/* Is step g timed (--warmup-steps after start_step; at least the last step always is)? */
bool schedule_timed(const schedule_t *s, long g);
long schedule_warmup(const schedule_t *s);

#endif
