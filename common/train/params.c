/* common/train/params.c: the starting parameters (see trainer.h). */
#include "common/train/trainer.h"

#include "common/io/checkpoint.h"

int trainer_initial_params(const config_t *c, const model_spec_t *spec, float *host, char *err)
{
    if (c->init_path[0])
        return ckpt_load_weights(c->init_path, "--init", spec, host, err);
    model_init_params(spec, c->seed, host);
    return DDP_OK;
}
