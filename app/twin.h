/* app/twin.h: --emit-pytorch FILE.py, the PyTorch twin of a run.
 *
 * Writes FILE.py, a short PyTorch script that runs the same job, and beside
 * it what it reads: FILE.init.safetensors (the initial weights, by the names
 * of nn.Sequential's state_dict), FILE.x.npy and FILE.y.npy (the data as
 * ddpbench loaded or generated it; class ids as int64), FILE.order.npy (the
 * permutation ddpbench drew for each epoch, [epochs, samples]: its own RNG,
 * which torch.randperm cannot repeat).  The script has the job's constants
 * on top (every hyper-parameter, named after its option) and a fixed body
 * (app/twin_body.py, compiled in): the same model, loss, optimizer,
 * DistributedSampler stream and global batch, as single, nn.DataParallel or
 * DDP (spawned ranks; gloo on the CPU, nccl on GPUs), printing the final
 * loss and ddpbench's checksum line.  Every file is written atomically. */
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
