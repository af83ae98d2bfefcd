/* ddp/watch.h: what a DDP rank checks and records between its steps,
 * outside the fenced step, and only when asked (rank_t.watch is NULL
 * otherwise, and a step pays nothing):
 *
 *   --check-replicas N   after every Nth step (steps N, 2N, ...) each rank
 *                        hashes its parameters and the ranks all-gather the
 *                        hashes (4 floats a rank: one small collective); when
 *                        one differs, rank 0's parameters are broadcast and
 *                        every rank's difference all-gathered (a second
 *                        exchange, only then), and the run stops naming the
 *                        step, the ranks, the first layer that differs and by
 *                        how much (or, watched by a scenario, records the
 *                        distance and goes on)
 *   a scenario's watch   (config_t.watch) the micro-batches that repeat the
 *                        epoch before's, and the first step's gradient norm
 *
 * DDPBENCH_FAULT=ulp:R:S (base/fault.h) nudges rank R's parameters after
 * step S, before its check: the planted drift the check must catch. */
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
