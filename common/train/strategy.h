/* common/train/strategy.h: the three ways to train, one entry point each:
 * single_run (single.c, beside this seam), dp_run (dp/) and ddp_run (ddp/).
 *
 * A strategy takes a validated config and a checked dataset, trains, and fills
 * a run_result_t (timings, losses, final parameters).  It returns DDP_OK,
 * DDP_ERR_INPUT (something about the devices the user named) or
 * DDP_ERR_RUNTIME (a fault), with one line in err.  The backend is already
 * resolved (cfg->backend is BACKEND_CPU or BACKEND_CUDA) and cfg->gpus holds
 * at least one id. */
#ifndef DDPBENCH_STRATEGY_H
#define DDPBENCH_STRATEGY_H

#include "common/config/config.h"
#include "common/data/data.h"
#include "common/measure/result.h"

int single_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err);
int dp_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err);
int ddp_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err);

#endif
