/* common/data/load.h: the dataset a configuration names: its --data file
 * (.npy with --targets, or CSV) or the synthetic set that fits --loss, checked
 * against the model's input and output widths. */
#ifndef DDPBENCH_LOAD_H
#define DDPBENCH_LOAD_H

#include "common/config/config.h"
#include "common/data/data.h"
#include "common/nn/model.h"

/* Load or generate the dataset the config names and check it against the model. */
int data_load(const config_t *c, const model_spec_t *spec, dataset_t *d, char *err);

#endif
