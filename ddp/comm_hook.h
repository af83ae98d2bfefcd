/* ddp/comm_hook.h: DDP's communication hooks (--comm-hook), what a bucket's all-reduce sends
 * in place of its float32 gradients, as PyTorch's ddp_comm_hooks do: fp16 / bf16 compression
 * and PowerSGD (docs/modes.md says each, and how it differs from PyTorch).  fp16/bf16 launch
 * from the backward hook and cast back in reducer_finish; PowerSGD launches a bucket's
 * uncompressed part from the hook and runs its two dependent rounds in reducer_finish. */
#ifndef DDPBENCH_COMM_HOOK_H
#define DDPBENCH_COMM_HOOK_H

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "ddp/reducer.h"

typedef struct comm_hook comm_hook_t;

/* The hook cfg->comm_hook asks for over r's buckets, installed as their bucket_ops_t (*out
 * NULL for HOOK_NONE: r is left plain). */
int comm_hook_init(comm_hook_t **out, const config_t *cfg, backend_t *be, reducer_t *r,
                   char *err);
void comm_hook_free(comm_hook_t *h);

/* PowerSGD's Gram-Schmidt over the r columns of row-major P (n x r), PyTorch's
 * _orthogonalize_gram_schmidt with epsilon 0.  Exposed for the tests. */
void comm_hook_orthogonalize(float *p, int n, int r);

#endif
