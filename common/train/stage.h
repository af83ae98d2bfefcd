/* common/train/stage.h: moving a micro-batch's rows from the dataset to the
 * device a replica computes on.  Laps PH_DATA (the host gathers the rows)
 * and PH_H2D (on a device: what the compute stream waited for the copy) on
 * the step meter.
 *
 * On a device that is host memory (the CPU) the rows are gathered straight
 * into the replica's x and y.  On a GPU the stager (below) gathers them into
 * a pinned host buffer and copies them on the device's copy stream into one
 * of two device slots, so the copy of the next batch overlaps the compute
 * of this one, and the host never waits:
 *
 *   - a pinned buffer is gathered into again only once the copy that read it
 *     has completed (its event; with 2 x accum buffers that copy belongs to a
 *     step the step meter has already waited for, so the check never waits);
 *   - a device slot is overwritten only after the compute work queued before
 *     the previous stage (the slot's last reader: the micro-batch before the
 *     previous one) -- the copy stream waits for that event, not the host;
 *   - the compute stream waits for the copy's event before it reads the slot. */
#ifndef DDPBENCH_STAGE_H
#define DDPBENCH_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/data/data.h"
#include "common/device/backend.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"

#define STAGE_MAX_HOST 8         /* pinned buffers at most */
#define STAGE_MAX_PINNED (256u << 20) /* and at most this many bytes of them (beyond 2) */

typedef struct {
    float *buf;              /* pinned, max_rows*(in+tgt) floats */
    backend_event_t *copied; /* the copy that last read it has completed */
} stage_host_t;

typedef struct {
    backend_t *be;
    int max_rows;
    int nhost;                  /* 0 when the device is host memory */
    stage_host_t host[STAGE_MAX_HOST];
    float *x[2], *y[2];         /* the device slots (slot 0 is the caller's x0 and y0) */
    backend_event_t *freed;     /* compute work queued before the last stage */
    long n;                     /* batches staged so far */
} stager_t;

/* For batches of up to max_rows rows on be, whose first slot is x0 and y0
 * (device buffers of max_rows rows: a replica's x and y), stepping accum
 * micro-batches per optimizer step (it sizes the ring of pinned buffers). */
int stager_init(stager_t *s, backend_t *be, float *x0, float *y0, int max_rows, int accum,
                const dataset_t *d, char *err);
void stager_free(stager_t *s);
static inline bool stager_active(const stager_t *s) { return s->nhost > 0; }

/* Move rows idx[0..rows) of d to the device; *x and *y are where the
 * micro-step reads them (on host memory: x0 and y0).  A backend status
 * (message in backend_last_error). */
int stager_stage(stager_t *s, const dataset_t *d, const uint32_t *idx, int rows, step_meter_t *m,
                 float **x, float **y);
/* A step that stages nothing (a DDP rank without rows) still takes its
 * turn of the two slots, so the slot a step reads keeps the step's parity
 * (what a CUDA graph step was captured with); the next stage, which
 * overwrites the slot the last one filled, waits for everything queued so
 * far. */
int stager_skip(stager_t *s);

#endif
