/* app/commbench.h: --mode comm, the collectives alone (nccl-tests' way), on
 * DDP's process model: a mode of the program, not a way to train. */
#ifndef DDPBENCH_COMMBENCH_H
#define DDPBENCH_COMMBENCH_H

#include "config/config.h"
#include "measure/collperf.h"

/* Runs every collective --coll names over --min-bytes..--max-bytes on the
 * run's devices (one rank each) and fills out; DDP_OK, DDP_ERR_INPUT or
 * DDP_ERR_RUNTIME with one line in err. */
int comm_bench_run(const config_t *cfg, collperf_t *out, char *err);

#endif
