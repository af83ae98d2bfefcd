/* ddp/global_loss.h: a DDP step's loss over every rank.  Each
 * rank adds up its micro-batches' loss sums on its device, then sends the
 * sum and its row count in one all-reduce (the same collective on every
 * rank, on the steps the schedule logs), so every rank reads the global
 * mean, sum / rows, when the step meter reports the step.  Nothing here
 * waits for the device: the pair is fetched after the step's wait for its
 * collectives (step_meter_fetch_ratio). */
#ifndef DDPBENCH_GLOBAL_LOSS_H
#define DDPBENCH_GLOBAL_LOSS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/comm/comm.h"
#include "common/device/backend.h"
#include "common/measure/step_meter.h"

typedef struct {
    backend_t *be;
    comm_t *comm;
    step_meter_t *meter;  /* whether the step logs its loss (step_meter_logs) */
    float *buf;   /* device [2]: the step's loss sum and rows, all-reduced */
    float *host;  /* pinned [2][2]: the rows sent up, by step parity */
    bool has;     /* a micro-batch's sum is in buf[0] this step */
} global_loss_t;

/* Its buffers on be (DDP_ERR_RUNTIME with err when out of memory). */
int global_loss_init(global_loss_t *l, backend_t *be, comm_t *comm, step_meter_t *m, char *err);
/* Waits for the device first: no copy may still use the buffers. */
void global_loss_free(global_loss_t *l);

/* A new step: no sum yet. */
static inline void global_loss_begin(global_loss_t *l) { l->has = false; }
/* A micro-batch's loss sum (one device float), on a step that logs it: the
 * first copied, the rest added.  A device failure has the device's message
 * in err.  (train/step.h's loss_sum, ctx the global_loss_t.) */
int global_loss_add(void *l, const float *sum, char *err);
/* After backward, step g: this rank's rows (a zero sum when it had none)
 * and the all-reduce of the pair; run: at once on this thread (comm_run:
 * nothing is left for it to overlap), else queued. */
int global_loss_reduce(global_loss_t *l, long g, size_t rows, bool run, char *err);
/* After the step's wait for its collectives: the meter reads the mean. */
static inline void global_loss_fetch(global_loss_t *l, step_meter_t *m)
{
    step_meter_fetch_ratio(m, l->buf);
}

#endif
