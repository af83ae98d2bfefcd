/* common/nn/optim.c: optimizer state and steps (see optim.h). */
#include "common/nn/optim.h"

#include <math.h>
#include <string.h>

int optim_cfg_check(const optim_cfg_t *c, char *err)
{
    if (!(c->lr >= 0.0f) || !isfinite(c->lr))
        return err_set(err, DDP_ERR_INPUT, "--lr: must be a finite number >= 0, got %g", c->lr);
    if (!(c->weight_decay >= 0.0f) || !isfinite(c->weight_decay))
        return err_set(err, DDP_ERR_INPUT, "--weight-decay: must be >= 0, got %g",
                       c->weight_decay);
    if (c->kind == OPTIM_SGD) {
        if (!(c->momentum >= 0.0f) || !isfinite(c->momentum))
            return err_set(err, DDP_ERR_INPUT, "--momentum: must be >= 0, got %g", c->momentum);
        if (!(c->dampening >= 0.0f && c->dampening <= 1.0f))
            return err_set(err, DDP_ERR_INPUT, "--dampening: must be in [0, 1], got %g",
                           c->dampening);
        /* torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening" */
        if (c->nesterov && (c->momentum <= 0.0f || c->dampening != 0.0f))
            return err_set(err, DDP_ERR_INPUT,
                           "--nesterov: requires --momentum > 0 and --dampening 0");
    } else {
        if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
            return err_set(err, DDP_ERR_INPUT, "--beta1: must be in [0, 1), got %g", c->beta1);
        if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
            return err_set(err, DDP_ERR_INPUT, "--beta2: must be in [0, 1), got %g", c->beta2);
        if (!(c->eps >= 0.0f) || !isfinite(c->eps))
            return err_set(err, DDP_ERR_INPUT, "--eps: must be >= 0, got %g", c->eps);
    }
    return DDP_OK;
}

int optim_state_count(const optim_t *o)
{
    if (o->cfg.kind == OPTIM_SGD)
        return o->cfg.momentum != 0.0f ? 1 : 0;
    return 2;
}

double optim_flops(const optim_t *o)
{
    const optim_cfg_t *c = &o->cfg;
    double per = 16.0;
    if (c->kind == OPTIM_SGD)
        per = 2.0 + 2.0 * (c->weight_decay != 0.0f) + 2.0 * (c->momentum != 0.0f) +
              (c->momentum != 0.0f && c->dampening != 0.0f) + 2.0 * c->nesterov;
    return per * (double)o->n;
}

int optim_init(optim_t *o, backend_t *be, const optim_cfg_t *cfg, size_t n, char *err)
{
    memset(o, 0, sizeof *o);
    TRY(optim_cfg_check(cfg, err));
    o->cfg = *cfg;
    o->be = be;
    o->n = n;
    int ns = optim_state_count(o);
    size_t bytes = (n ? n : 1) * sizeof(float);
    bool ok = (ns < 1 || (o->s1 = backend_alloc_for(be, bytes, MEM_OPTIM))) &&
              (ns < 2 || (o->s2 = backend_alloc_for(be, bytes, MEM_OPTIM)));
    if (ok)
        return DDP_OK;
    optim_free(o);
    return err_set(err, DDP_ERR_RUNTIME, "device %d: out of memory for optimizer state",
                   backend_device_id(be));
}

void optim_begin_step(optim_t *o) { o->step++; }

int optim_step_slice(optim_t *o, float *params, const float *grads, size_t state_off, size_t n)
{
    backend_t *be = o->be;
    const optim_cfg_t *c = &o->cfg;
    float *s1 = o->s1 ? o->s1 + state_off : NULL, *s2 = o->s2 ? o->s2 + state_off : NULL;
    if (c->kind == OPTIM_SGD) {
        sgd_args_t a = {c->lr, c->momentum, c->dampening, c->weight_decay, c->nesterov,
                        o->step == 1};
        return backend_sgd(be, &a, params, grads, s1, n);
    }
    /* Bias corrections in double on the host, as torch computes them in Python floats. */
    adam_args_t a = {c->lr, c->beta1, c->beta2, c->eps, c->weight_decay,
                     c->kind == OPTIM_ADAMW,
                     1.0 - pow((double)c->beta1, (double)o->step),
                     1.0 - pow((double)c->beta2, (double)o->step)};
    return backend_adam(be, &a, params, grads, s1, s2, n);
}

int optim_step(optim_t *o, float *params, const float *grads)
{
    optim_begin_step(o);
    return optim_step_slice(o, params, grads, 0, o->n);
}

int optim_state_download(const optim_t *o, int k, float *host)
{
    const float *src = k == 0 ? o->s1 : k == 1 ? o->s2 : NULL;
    if (k >= optim_state_count(o) || !src)
        return backend_error(o->be, DDP_ERR_RUNTIME, "optimizer has no state arena %d", k);
    /* d2h waits for the optimizer steps queued before it. */
    return backend_d2h(o->be, host, src, o->n * sizeof(float));
}

int optim_state_upload(optim_t *o, int k, const float *host)
{
    float *dst = k == 0 ? o->s1 : k == 1 ? o->s2 : NULL;
    if (k >= optim_state_count(o) || !dst)
        return backend_error(o->be, DDP_ERR_RUNTIME, "optimizer has no state arena %d", k);
    int rc = backend_h2d(o->be, dst, host, o->n * sizeof(float));
    /* h2d's source must stay valid until a sync: the caller may free it next. */
    return rc == DDP_OK ? backend_sync(o->be) : rc;
}

void optim_free(optim_t *o)
{
    if (o->be) {
        backend_free(o->be, o->s1);
        backend_free(o->be, o->s2);
    }
    memset(o, 0, sizeof *o);
}
