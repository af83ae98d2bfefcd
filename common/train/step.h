/* common/train/step.h: the pieces a training step is made of, shared by the
 * three strategies (single.c's single_step is the worked example), each with
 * what the articles' loop leaves out done around it: the step meter's lap,
 * the rows it counts and the loss it fetches, the device named on a failure,
 * and the hooks a strategy hangs on them.  Nothing here waits for the device. */
#ifndef DDPBENCH_TRAIN_STEP_H
#define DDPBENCH_TRAIN_STEP_H

#include <stdbool.h>

#include "common/comm/comm.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"
#include "common/nn/optim.h"
#include "common/train/graph.h"
#include "common/train/stage.h"

typedef struct {
    backend_t *be;
    replica_t *rep;
    step_meter_t *meter;
    loss_t loss;
    stager_t *stg;         /* where batches are staged (NULL: none here) */
    const dataset_t *data;
    graph_t *graph;        /* begun once a batch is staged; NULL: none */
    const float *dout;     /* backward's output gradient (rep->dout unless set) */
    const char *place;     /* how a failure is named ("device 0"; NULL: the caller names it) */
    bool name_phase;       /* ... with the phase too ("device 1: forward: ...") */
    /* A backward hook that launches collectives (DDP's reducer): its
     * failure is the communicator's when *comm_failed says so. */
    comm_t *comm;
    const bool *comm_failed;
    /* Hooks (NULL: none): extra work before the forward and after the
     * loss (a straggler's passes), given extra_ctx; where the loss sum goes,
     * given loss_ctx (NULL: the meter fetches it when the step logs it). */
    int (*before_forward)(void *ctx, const float *x, int rows, bool first, char *err);
    int (*after_loss)(void *ctx, const float *x, int rows, char *err);
    void *extra_ctx;
    int (*loss_sum)(void *ctx, const float *sum, char *err);
    void *loss_ctx;
    char *err;
    /* the open step */
    bool has_grad;         /* its gradients are in the arena: backward adds to them */
    bool staged;           /* a micro-batch was staged */
} train_step_t;

static inline void step_begin(train_step_t *t)
{
    t->has_grad = false;
    t->staged = false;
}

/* Move the micro-batch idx[0..rows) to the device; *x, *y: where it is. */
int step_stage(train_step_t *t, const uint32_t *idx, int rows, float **x, float **y);
int step_forward(train_step_t *t, const float *x, int rows);
/* The loss of the last forward against y, its gradient scaled by scale. */
int step_loss(train_step_t *t, const float *y, int rows, float scale);
/* Backward (adding to the step's gradients after its first); hook: called
 * as each layer's gradients are written (model.h), may be NULL. */
int step_backward(train_step_t *t, const float *x, int rows, layer_hook_fn hook, void *ctx);
int step_optim(train_step_t *t, optim_t *opt);

/* A device call's status, named as the step names its failures. */
int step_check(const train_step_t *t, int rc, const char *what);

#endif
