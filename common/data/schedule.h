/* common/data/schedule.h: which samples each optimizer step reads, in the
 * whole (single, DP) or on one DDP rank: every mode reads one sample stream,
 * cut the same way (docs/modes.md, "The sample stream"), so a global step
 * trains on the same samples in every mode.  Steps group --accum micro-batches
 * (the epoch's last may have fewer); the loss is the mean over a step's
 * global rows, so a DDP rank scales its part by ranks / global rows. */
#ifndef DDPBENCH_SCHEDULE_H
#define DDPBENCH_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config/config.h"
#include "common/data/data.h"
#include "common/data/sampler.h"

typedef struct {
    const config_t *cfg;
    const dataset_t *data;
    int ranks, rank;       /* the view: 1/0 the global micro-batches; R/r DDP rank r's part */
    int R;                 /* the stream's ranks (config_stream_ranks) */
    bool own_shards;       /* --rank-samples */
    sampler_t sampler;     /* the DistributedSampler's sizes over R replicas */
    size_t micro_batches;  /* the sampler stream's global micro-batches an epoch */
    long steps_per_epoch;
    long total_steps;      /* optimizer steps in the whole run */
    long start_step;       /* the first step this process runs (> 0 after --resume) */
    long epochs;           /* epochs the run touches */
    /* --rank-samples: each rank's block and DataLoader */
    long shard_off[MAX_DEVICES], shard_n[MAX_DEVICES];
    int shard_batch[MAX_DEVICES];
    long shard_micro[MAX_DEVICES], shard_steps[MAX_DEVICES]; /* per epoch */
    uint32_t *perm;        /* the epoch's permutation (n) */
    uint32_t *ord;         /* this view's indices for loaded_epoch, micro-batch by micro-batch */
    size_t *off;           /* --rank-samples, global view: where micro-batch t starts in ord */
    long loaded_epoch;
} schedule_t;

/* ranks/rank: 1/0 for single and DP (the whole global micro-batch), or the
 * DDP world and this rank (which must equal config_stream_ranks(c)). */
int schedule_init(schedule_t *s, const config_t *c, const dataset_t *d, int ranks, int rank,
                  char *err);
void schedule_free(schedule_t *s);
static inline long schedule_epoch_of(const schedule_t *s, long g) { return g / s->steps_per_epoch; }
/* Indices of micro-batch `micro` of global step g (0-based) in this view, and
 * their rows (0: none; a DDP rank may have none while others have some).
 * Valid until a step of another epoch is asked for. */
const uint32_t *schedule_micro(schedule_t *s, long g, int micro, int *rows);
/* Rows of step g over all ranks: the denominator of the loss mean. */
size_t schedule_step_rows(const schedule_t *s, long g);
/* Rows of step g in this view (a DDP rank's own; the global ones otherwise). */
size_t schedule_view_rows(const schedule_t *s, long g);
/* Rows rank r of the stream's R has in micro-batch `micro` of step g. */
int schedule_rank_micro_rows(const schedule_t *s, long g, int micro, int r);
/* Does every rank have its whole micro-batch in every micro-batch of step g?
 * The same answer on every rank: a step CUDA graphs may replay. */
bool schedule_full_step(const schedule_t *s, long g);
/* Does rank r have data in step g?  (false: it shadows the step) */
bool schedule_rank_active(const schedule_t *s, long g, int r);
/* Steps per epoch in which rank r has data (steps_per_epoch unless --rank-samples). */
long schedule_rank_steps(const schedule_t *s, int r);
/* Samples one epoch trains on, all ranks together (the padded stream less
 * a dropped last batch, or the ranks' shards less theirs). */
long schedule_epoch_samples(const schedule_t *s);
/* Should the loss of step g be logged (every --log-every steps, else at each epoch end, and the last)? */
bool schedule_logs(const schedule_t *s, long g);
/* Is step g timed (--warmup-steps after start_step; at least the last step always is)? */
bool schedule_timed(const schedule_t *s, long g);
long schedule_warmup(const schedule_t *s);
/* The step --explain tells (0-based): the middle one of the timed steps, so
 * not the first, which pays one-time costs (first touches of memory). */
long schedule_told_step(const schedule_t *s);

#endif
