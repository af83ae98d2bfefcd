/* common/train/step.c: a training step's pieces (see step.h). */
#include "common/train/step.h"

int step_check(const train_step_t *t, int rc, const char *what)
{
    if (rc == DDP_OK)
        return DDP_OK;
    if (t->comm_failed && *t->comm_failed)
        return comm_check(t->comm, rc, NULL, t->err);
    if (t->name_phase)
        return err_set(t->err, rc, "%s: %s: %s", t->place, what, backend_last_error(t->be));
    return backend_check(t->be, rc, t->place, t->err);
}

int step_stage(train_step_t *t, const uint32_t *idx, int rows, float **x, float **y)
{
    TRY(step_check(t, stager_stage(t->stg, t->data, idx, rows, t->meter, x, y), "h2d"));
    t->staged = true;
    /* a graph step begins after its batch: the copy stream is not captured */
    return t->graph ? step_check(t, graph_open(t->graph), "graph") : DDP_OK;
}

int step_forward(train_step_t *t, const float *x, int rows)
{
    if (t->before_forward)
        TRY(t->before_forward(t->extra_ctx, x, rows, !t->has_grad, t->err));
    TRY(step_check(t, model_forward(t->rep, x, rows), "forward"));
    step_meter_lap(t->meter, PH_FORWARD);
    return DDP_OK;
}

int step_loss(train_step_t *t, const float *y, int rows, float scale)
{
    replica_t *rep = t->rep;
    TRY(step_check(t, model_loss(rep, t->loss, y, rows, scale), "loss"));
    if (t->loss_sum)
        TRY(t->loss_sum(t->loss_ctx, rep->loss_sum, t->err));
    else if (step_meter_logs(t->meter))
        step_meter_fetch(t->meter, rep->loss_sum, 1);
    step_meter_lap(t->meter, PH_LOSS);
    return DDP_OK;
}

int step_backward(train_step_t *t, const float *x, int rows, layer_hook_fn hook, void *ctx)
{
    if (t->after_loss)
        TRY(t->after_loss(t->extra_ctx, x, rows, t->err));
    const float *dout = t->dout ? t->dout : t->rep->dout;
    TRY(step_check(t, model_backward(t->rep, x, rows, dout, t->has_grad, hook, ctx), "backward"));
    step_meter_lap(t->meter, PH_BACKWARD);
    step_meter_rows(t->meter, rows);
    t->has_grad = true;
    return DDP_OK;
}

int step_optim(train_step_t *t, optim_t *opt)
{
    TRY(step_check(t, optim_step(opt, t->rep->params, t->rep->grads), "optimizer"));
    step_meter_lap(t->meter, PH_OPTIM);
    return DDP_OK;
}
