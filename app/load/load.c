/* app/load/load.c: the dataset a configuration names (see load.h). */
#include "app/load/load.h"

#include <string.h>

#include "common/base/status.h"

void data_shape(const config_t *c, const model_spec_t *spec, dataset_t *d)
{
    memset(d, 0, sizeof *d);
    d->n = c->data_path[0] ? 0 : (size_t)c->samples;
    d->in_dim = model_in_dim(spec);
    d->tgt_cols = c->loss == LOSS_CE ? 1 : model_out_dim(spec);
}

int data_load(const config_t *c, const model_spec_t *spec, dataset_t *d, char *err)
{
    int rc;
    bool labels = c->loss == LOSS_CE;
    if (c->data_path[0]) {
        size_t n = strlen(c->data_path);
        if (n >= 4 && strcmp(c->data_path + n - 4, ".npy") == 0)
            rc = data_load_npy(d, c->data_path, c->targets_path, labels, err);
        else
            rc = data_load_csv(d, c->data_path, c->target_cols, labels, err);
    } else {
        synth_kind_t k = c->dataset;
        if (k == SYNTH_AUTO)
            k = c->loss == LOSS_MSE ? SYNTH_REGRESSION
                : c->loss == LOSS_BCE ? SYNTH_BINARY : SYNTH_CLASSES;
        if (k == SYNTH_CLASSES && c->loss != LOSS_CE)
            return err_set(err, DDP_ERR_INPUT,
                           "--dataset classes: holds class ids, which only --loss ce takes");
        if (k != SYNTH_CLASSES && c->loss == LOSS_CE)
            return err_set(err, DDP_ERR_INPUT, "--dataset %s: --loss ce needs --dataset classes",
                           synth_name(k));
        rc = data_synthetic(d, k, (size_t)c->samples, model_in_dim(spec), model_out_dim(spec),
                            c->seed, c->noise, err);
    }
    if (rc != DDP_OK)
        return rc;
    rc = data_check(d, model_in_dim(spec), model_out_dim(spec), c->loss, err);
    if (rc != DDP_OK)
        data_free(d);
    return rc;
}
