/* ddp/zero1.h: ZeRO-1 in DDP (--zero1), the optimizer state sharded over the
 * ranks, as torch's ZeroRedundancyOptimizer and llm.c's -z 1 do.
 *
 * Each gradient bucket is reduce-scattered instead of all-reduced
 * (reducer.h: shard_world): rank q receives the sum of block q of the
 * bucket, count / world floats, bit for bit what the all-reduce gives those
 * floats; the count mod world floats left at the bucket's end are
 * all-reduced.  Rank q then steps only its blocks (and the leftovers, which
 * every rank steps alike), with optimizer state for those floats alone:
 * about 1/world of plain DDP's.  Then each bucket's parameters are
 * all-gathered in place, block q from rank q, so every rank starts the next
 * step with the same parameters, bit for bit those of plain DDP (the
 * updates are elementwise).  Gradients and parameters stay whole on every
 * rank (that is ZeRO-2 and -3's business).
 *
 *   zero1_init(&z, &red, &opt, ...)   the pieces each rank steps; opt's state
 *                                     covers zero1_state_floats() floats
 *   zero1_step(&z, params, grads)     after the reduce-scatters were waited
 *                                     for: step the shard, launch the
 *                                     all-gathers (the caller waits for them) */
#ifndef DDPBENCH_ZERO1_H
#define DDPBENCH_ZERO1_H

#include <stdbool.h>
#include <stddef.h>

#include "common/comm/comm.h"
#include "ddp/reducer.h"
#include "common/nn/optim.h"

typedef struct {
    size_t off, n;       /* floats of the arena this rank steps */
    size_t state_off;    /* where their optimizer state is */
} zero1_piece_t;

typedef struct {
    int world, rank;
    const reducer_t *red;   /* its buckets (their shard_world set) */
    optim_t *opt;           /* state over the shard alone */
    zero1_piece_t *piece;
    int npiece;
    size_t shard;           /* floats of state */
    char (*tag)[32];        /* "all-gather of bucket 2", per bucket */
    bool run_last;          /* the last all-gather runs on the calling thread (comm_run) */
    /* ZeRO-2 and -3 (zero.h): the shard's gradients (and under ZeRO-3 its
     * parameters) are arrays of their own, laid out as the state is
     * (piece.state_off); NULL: the piece's floats of the whole arena.  With
     * pshard nothing is all-gathered after the step: ZeRO-3 gathers each
     * layer when it is needed. */
    const float *gshard;
    float *pshard;
} zero1_t;

/* Floats of optimizer state rank `rank` of `world` needs for red's buckets. */
size_t zero1_state_floats(const reducer_t *red, int world, int rank);
/* The pieces of red's buckets this rank steps, with opt (created over
 * zero1_state_floats() floats) stepping them. */
int zero1_init(zero1_t *z, const reducer_t *red, optim_t *opt, int world, int rank, bool run_last,
               char *err);
void zero1_free(zero1_t *z);
/* Step this rank's shard, then launch each bucket's all-gather as soon as
 * its block is stepped (the comm orders it after that work).  A device
 * failure or a comm failure: its message in err. */
int zero1_step(zero1_t *z, comm_t *comm, float *params, const float *grads, char *err);

#endif
