/* common/result.h: what a run measured, handed from a strategy to the report.
 *
 * Fixed-size per-device records (device_stats_t) so DDP ranks can write theirs
 * into shared memory; the variable parts (per-step times, final parameters,
 * loss log) are owned arrays freed by result_free(). */
#ifndef DDPBENCH_RESULT_H
#define DDPBENCH_RESULT_H

#include <stddef.h>

#include "kinds.h"
#include "model.h"
#include "timing.h"

#define MAX_DEVICES 64

typedef struct {
    int device_id;               /* the id from --gpus */
    double phase_s[PH_COUNT];    /* summed over the timed steps */
    long rows;                   /* sample rows this device processed in timed steps */
    size_t mem_peak;             /* bytes, high-water mark of this device's allocations */
} device_stats_t;

typedef struct {
    long step;   /* optimizer step (1-based) */
    long epoch;  /* 0-based */
    double loss; /* mean loss of that step's global batch */
} loss_point_t;

typedef struct {
    mode_t_ mode;
    backend_kind_t backend;
    comm_kind_t comm;            /* DDP only */
    int ndev;
    device_stats_t dev[MAX_DEVICES];

    long steps;                  /* optimizer steps run */
    long warmup_steps;           /* of which untimed */
    long epochs;                 /* epochs started */
    long timed_samples;          /* global samples in timed steps */
    double timed_s;              /* wall seconds of the timed steps */
    double total_s;              /* wall seconds of the whole training loop */
    double samples_per_s;        /* timed_samples / timed_s */

    double *step_s;              /* wall time of each timed step [timed steps] */
    long nstep_s;

    loss_point_t *log;           /* the losses that were logged */
    long nlog, cap_log;

    double final_loss;           /* loss of the last step */
    double train_accuracy;       /* over the whole dataset after training; < 0 if n/a */
    double train_loss;           /* mean loss over the whole dataset after training */

    float *params;               /* final parameters on the host [nparams] */
    size_t nparams;
    param_checksum_t checksum;
} run_result_t;

void result_init(run_result_t *r);
void result_free(run_result_t *r);
/* Append to the loss log (grows the array; not for the hot path of every step). */
int result_log_loss(run_result_t *r, long step, long epoch, double loss);
/* Derive samples_per_s, checksum. */
void result_finish(run_result_t *r);

#endif
