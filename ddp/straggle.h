/* ddp/straggle.h: --slow-rank R:F, a straggler: rank R does the
 * real work of a device F times slower, around each micro-batch's real
 * forward and backward, with the same bits as without it (straggle.c says
 * how).  A rank that is not the slow one pays one test per call. */
#ifndef DDPBENCH_STRAGGLE_H
#define DDPBENCH_STRAGGLE_H

#include <stdbool.h>

#include "common/config/config.h"
#include "common/data/schedule.h"
#include "common/device/backend.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"

typedef struct {
    const config_t *cfg;
    backend_t *be;
    replica_t *rep;
    step_meter_t *meter;
    int rank;
    bool slow;            /* this rank is --slow-rank's */
    bool on_cpu;          /* the extra fraction is CPU time (straggle.c) */
    double compute_cpu_s; /* on the CPU: the CPU seconds of the last step's own
                             forward, loss and backward (the fraction's unit) */
    double cpu0, extra_cpu; /* this step: the CPU clock at its start, the extra work's */
    int nmicro;           /* this step's micro-batches with rows here */
    int whole;            /* this micro-batch: extra whole passes ... */
    double frac;          /* ... and the fraction of one */
} straggle_t;

void straggle_init(straggle_t *s, const config_t *cfg, int rank, backend_t *be, replica_t *rep,
                   step_meter_t *meter);
/* Step g begins. */
void straggle_begin(straggle_t *s, const schedule_t *sch, long g);
/* Before a micro-batch's real forward (staged at x, rows rows; first: none
 * computed yet this step, the one that carries the step's extra work): on
 * a GPU, the fraction's partial pass.  A device failure has the device's
 * message in err.  (train/step.h's before_forward, ctx the straggle_t.) */
int straggle_before(void *s, const float *x, int rows, bool first, char *err);
/* After its loss, before its real backward: the whole extra passes, and on
 * the CPU the fraction as CPU time (step.h's after_loss). */
int straggle_after(void *s, const float *x, int rows, char *err);
/* After the step's micro-batches (computed: it had rows): the real work's
 * CPU time alone, the next step's unit. */
void straggle_end(straggle_t *s, bool computed);

#endif
