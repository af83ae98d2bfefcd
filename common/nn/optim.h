/* common/nn/optim.h: torch.optim's SGD, Adam and AdamW over a flat parameter
 * arena, one per replica that steps; the state (momentum buffer, or Adam's
 * two moments) lives on the device in arenas shaped like the parameters. */
#ifndef DDPBENCH_OPTIM_H
#define DDPBENCH_OPTIM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/device/backend.h"
#include "common/base/kinds.h"

typedef struct {
    optim_kind_t kind;
    float lr;
    float momentum, dampening; /* SGD */
    bool nesterov;             /* SGD; needs momentum > 0 and dampening 0 */
    float weight_decay;
    float beta1, beta2, eps;   /* Adam/AdamW */
} optim_cfg_t;

typedef struct {
    optim_cfg_t cfg;
    backend_t *be;
    size_t n;
    float *s1;   /* SGD momentum buffer, or Adam exp_avg (NULL when unused) */
    float *s2;   /* Adam exp_avg_sq */
    long step;   /* optimizer steps taken (torch's state['step']) */
} optim_t;

/* Validate a configuration like torch.optim's constructors do. */
int optim_cfg_check(const optim_cfg_t *c, char *err);
int optim_init(optim_t *o, backend_t *be, const optim_cfg_t *cfg, size_t n, char *err);
/* One update of params from grads. */
int optim_step(optim_t *o, float *params, const float *grads);
/* The same in pieces, for an optimizer whose state covers only a shard of
 * the parameters (ZeRO-1): optim_begin_step once per step (the step count
 * and Adam's bias corrections), then optim_step_slice for each piece, params
 * and grads pointing at it and its state at state_off of the arenas.  Every
 * update is elementwise, so a piece gets the bits the whole would give it. */
void optim_begin_step(optim_t *o);
int optim_step_slice(optim_t *o, float *params, const float *grads, size_t state_off, size_t n);
void optim_free(optim_t *o);
/* The FLOPs of one update of its n parameters, from the update's formula as
 * the backends compute it. */
double optim_flops(const optim_t *o);
/* Number of state arenas (0, 1 or 2), so checkpoints know what to save. */
int optim_state_count(const optim_t *o);
/* Copy state arena k (0: s1, 1: s2) to or from n floats of host memory, for
 * checkpoints.  Both wait for the copy (and the work queued before it). */
int optim_state_download(const optim_t *o, int k, float *host);
int optim_state_upload(optim_t *o, int k, const float *host);

#endif
