/* app/twin.h: --emit-pytorch FILE.py, the PyTorch twin of a run: the script and the files
 * beside it that it reads (docs/checkpoints.md, "The PyTorch twin"), each written
 * atomically. */
#ifndef DDPBENCH_TWIN_H
#define DDPBENCH_TWIN_H

#include <stdio.h>

#include "common/config/config.h"
#include "common/data/data.h"
#include "common/nn/model.h"

/* run_cfg: the run's own config (its mode single, dp or ddp); path: the
 * script (--emit-pytorch FILE.py, the files beside it); argv: the
 * command line, quoted in the script's docstring.  DDP_ERR_INPUT when the
 * job has no twin (compare; ddp on a batch its ranks do not divide;
 * --rank-samples; --resume; --zero1) or a file cannot be written there. */
int twin_emit(const config_t *run_cfg, const char *path, const model_spec_t *spec,
              const dataset_t *data, int argc, char **argv, FILE *info, char *err);

#endif
