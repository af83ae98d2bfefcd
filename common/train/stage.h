/* common/train/stage.h: moving a micro-batch's rows from the dataset into a
 * replica's x and y (on a device that is not host memory, through pinned
 * staging memory and an h2d copy).  Laps PH_DATA (the host gathers the rows)
 * and PH_H2D (the copy is queued) on the step meter. */
#ifndef DDPBENCH_STAGE_H
#define DDPBENCH_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "data/data.h"
#include "device/backend.h"
#include "measure/step_meter.h"
#include "nn/model.h"

/* Gather rows idx[0..rows) into the replica's x and y.  staging holds
 * max_rows*(in+tgt) floats, NULL on host-visible devices. */
int stage_batch(replica_t *r, const dataset_t *d, const uint32_t *idx, int rows, float *staging,
                step_meter_t *m);

/* Double-buffered pinned staging for devices that are not host-visible, so
 * the host gathers the next micro-batch while the device still computes the
 * current one.  stager_stage() moves a batch into the replica (gathering it
 * unless stager_prefetch() already did) and queues its h2d from one buffer;
 * stager_prefetch() gathers the next batch into the other buffer.  Batches are
 * named by a caller's key (e.g. step*accum + micro) so a prefetch is only used
 * for the batch it was made for.  The rule that makes it safe: between two
 * stager_stage() calls the caller syncs the device at least once, so the h2d
 * that last read a buffer is complete before the host gathers into it again.
 * On host-visible devices (CPU) it holds nothing: stage gathers straight into
 * the replica and prefetch does nothing. */
typedef struct {
    backend_t *be;
    float *buf[2];  /* pinned, max_rows*(in+tgt) floats each; NULL when host-visible */
    int max_rows;
    int last;       /* buffer the last h2d read (-1: none yet) */
    long ready_key; /* batch prefetched into buf[ready_buf] (-1: none) */
    int ready_buf;
} stager_t;

int stager_init(stager_t *s, backend_t *be, int max_rows, const dataset_t *d, char *err);
void stager_free(stager_t *s);
static inline bool stager_active(const stager_t *s) { return s->buf[0] != NULL; }
/* Laps PH_DATA (unless prefetched) then PH_H2D. */
int stager_stage(stager_t *s, replica_t *r, const dataset_t *d, long key, const uint32_t *idx,
                 int rows, step_meter_t *m);
/* Laps PH_DATA; a no-op when not active or rows == 0. */
void stager_prefetch(stager_t *s, const dataset_t *d, long key, const uint32_t *idx, int rows,
                     step_meter_t *m);

#endif
