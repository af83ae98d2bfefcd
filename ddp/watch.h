/* ddp/watch.h: what a DDP rank checks and records between its steps, outside the fenced step
 * and only when asked (rank_t.watch NULL otherwise): --check-replicas N (docs/faults.md's
 * Divergence: a hash all-gathered, and on a difference rank 0's parameters broadcast and the
 * distances all-gathered), and a scenario's watch (the micro-batches that repeat the epoch
 * before's, the first step's gradient norm).  DDPBENCH_FAULT=ulp:R:S plants a drift. */
#ifndef DDPBENCH_DDP_WATCH_H
#define DDPBENCH_DDP_WATCH_H

#include "common/comm/comm.h"
#include "common/data/schedule.h"
#include "common/measure/result.h"
#include "common/nn/model.h"

typedef struct watch watch_t;

/* *out stays NULL when nothing is asked (no --check-replicas, no watch).
 * rec: where rank 0 records the checks (NULL on the others); stats: this
 * rank's record. */
int watch_init(watch_t **out, const config_t *cfg, comm_t *comm, replica_t *rep,
               schedule_t *sch, replica_rec_t *rec, device_stats_t *stats, char *err);
/* After step g, every rank together. */
int watch_step(watch_t *w, long g, char *err);
void watch_free(watch_t *w);

#endif
