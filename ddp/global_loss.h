/* ddp/global_loss.h: a DDP step's loss over every rank: each rank sums its micro-batches'
 * losses on its device and all-reduces the sum with its row count (on the steps that log),
 * so every rank reads the global mean; fetched after the step's wait, never waiting itself. */
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
/* A micro-batch's loss sum (one device float) on a step that logs it: the first copied, the
 * rest added (step.h's loss_sum, ctx the global_loss_t). */
int global_loss_add(void *l, const float *sum, char *err);
/* After backward, step g: this rank's rows (a zero sum when it had none) and the pair's
 * all-reduce; run: at once on this thread (comm_run), else queued. */
int global_loss_reduce(global_loss_t *l, long g, size_t rows, bool run, char *err);
/* After the step's wait for its collectives: the meter reads the mean. */
static inline void global_loss_fetch(global_loss_t *l) { step_meter_fetch_ratio(l->meter, l->buf); }

#endif
