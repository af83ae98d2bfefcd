/* ddp/autotune.h: --bucket-mb auto, Horovod's autotune idea on DDP's bucket cap: each
 * candidate cap runs one warm-up step, and the ranks' summed times pick the fastest
 * (docs/modes.md). */
#ifndef DDPBENCH_AUTOTUNE_H
#define DDPBENCH_AUTOTUNE_H

#include <stdbool.h>

#include "common/comm/comm.h"
#include "ddp/reducer.h"

#define AUTOTUNE_MAX 8

typedef struct {
    int n;                       /* candidates to try */
    double mb[AUTOTUNE_MAX];     /* their caps */
    double step_s[AUTOTUNE_MAX]; /* this rank's time of each; then the sum over ranks */
    long first;                  /* the step that tries candidate 0 */
    int chosen;                  /* the winner's index, -1 before the choice */
    long tuned_g;                /* the last step whose time it was given (-1: none) */
    float *buf;                  /* device [AUTOTUNE_MAX]: the times' all-reduce */
} autotune_t;

/* Plan the candidates for this model, its first-bucket cap, and a warm-up
 * of `warmup` steps from `start` (none when there is no room for two). */
void autotune_init(autotune_t *t, const model_spec_t *spec, double first_mb, long start,
                   long warmup);
/* The rank's buffer for the times' all-reduce, on its device. */
int autotune_alloc(autotune_t *t, backend_t *be, char *err);
void autotune_free(autotune_t *t, backend_t *be);
/* Before step g: the cap to use from now on, or 0 to keep the current one. */
double autotune_before(const autotune_t *t, long g);
/* After step g: true when the choice is due now (after the last candidate). */
bool autotune_due(const autotune_t *t, long g);

#endif
