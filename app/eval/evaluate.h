/* app/eval/evaluate.h: the trained parameters over the whole dataset, after
 * the run. */
#ifndef DDPBENCH_EVALUATE_H
#define DDPBENCH_EVALUATE_H

#include "common/data/data.h"
#include "common/nn/model.h"

/* Mean loss and accuracy over the whole dataset for host parameters (CPU, in
 * chunks of at most min(1024, rows) rows and about 64 MiB of activations);
 * accuracy < 0 for mse.  Skipped (both < 0) when it would cost more than
 * about 2e10 flops.  The program runs it after --save is written: it is
 * optional, and its failure only leaves both < 0. */
int eval_params(const model_spec_t *spec, loss_t loss, const float *params, const dataset_t *d,
                double *mean_loss, double *accuracy, char *err);

#endif
