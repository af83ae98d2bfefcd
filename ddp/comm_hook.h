/* ddp/comm_hook.h: DDP's communication hooks (--comm-hook), what a
 * bucket's all-reduce sends in place of its float32 gradients, as PyTorch's
 * torch.distributed.algorithms.ddp_comm_hooks do:
 *
 *   fp16, bf16   fp16_compress_hook / bf16_compress_hook: the bucket cast to
 *                16 bits (round to nearest even), all-reduced in 16 bits
 *                (each addition rounded, as NCCL's ncclHalf / ncclBfloat16
 *                sums), cast back.  PyTorch divides by the world size before
 *                the cast; here the gradients already carry 1/world (the
 *                loss's scale is 1 / global rows: reducer.h), so the cast
 *                takes the divided values.
 *   powersgd     powerSGD_hook (Vogels et al. 2019), CPU backend: each
 *                bucket's matrices M (n x m, a layer's weight gradient) that
 *                compress at least 2x ((n + m) r * 2 < n m, PyTorch's
 *                min_compression_rate) are sent as P = M Q (n x r) and Q =
 *                M^T P (m x r): M += error; P = M Q; all-reduce P;
 *                orthogonalise P (Gram-Schmidt); Q = M^T P; all-reduce Q;
 *                M = P Q^T; error = M_before - P Q^T / world.  Q is kept from
 *                step to step (warm start; the first one random normal from
 *                a seed every rank shares, orthogonalised).  Vectors (biases)
 *                and matrices too small to compress are all-reduced
 *                uncompressed, in one buffer per bucket.  The first START
 *                all-reducing steps are plain (start_powerSGD_iter).
 *
 * Timing: fp16/bf16 launch from the backward hook like plain buckets and
 * cast back after the wait for all (reducer_finish).  PowerSGD launches a
 * bucket's uncompressed part from the hook; its two dependent rounds (P,
 * then Q) run in reducer_finish, after backward, on the rank's thread:
 * they do not overlap backward (PyTorch chains them on futures). */
#ifndef DDPBENCH_COMM_HOOK_H
#define DDPBENCH_COMM_HOOK_H

#include <stdbool.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "ddp/reducer.h"

typedef struct comm_hook comm_hook_t;

/* The hook cfg->comm_hook asks for over r's buckets, installed as their
 * bucket_ops_t (NULL in *out for HOOK_NONE: r is left plain).  seed: shared
 * by every rank (PowerSGD's first Q). */
int comm_hook_init(comm_hook_t **out, const config_t *cfg, backend_t *be, reducer_t *r,
                   char *err);
void comm_hook_free(comm_hook_t *h);

/* PowerSGD's Gram-Schmidt over the r columns of row-major P (n x r), as
 * PyTorch's _orthogonalize_gram_schmidt with epsilon 0 (a zero column stays
 * zero).  Exposed for the tests. */
void comm_hook_orthogonalize(float *p, int n, int r);

#endif
