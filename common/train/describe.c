/* common/train/describe.c: what a run trained on, recorded in its result
 * for compare's verdict (see trainer.h). */
#include "train/trainer.h"

void trainer_describe(run_result_t *res, const config_t *c, const schedule_t *sch)
{
    res->optim = c->optim.kind;
    res->lr = c->optim.lr;
    res->precision = c->precision;
    res->stream_replicas = c->nrank_samples ? 0 : config_stream_ranks(c);
    res->epoch_samples = schedule_epoch_samples(sch);
}
