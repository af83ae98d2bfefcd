/* app/commbench.h: --mode comm, the collectives alone (nccl-tests' way), on
 * DDP's process model: a mode of the program, not a way to train. */
#ifndef DDPBENCH_COMMBENCH_H
#define DDPBENCH_COMMBENCH_H

#include "common/config/config.h"
#include "common/measure/collperf.h"

/* The mode itself: the banner, the measurement (ddp_strategy.comm_bench),
 * the report on stdout; DDP_OK,
 * or a status with one line in err (a check that found a wrong value is
 * DDP_ERR_RUNTIME). */
int app_comm(const config_t *cfg, const char *note, char *err);

#endif
