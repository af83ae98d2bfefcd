/* ddp/zero1.c: ZeRO-1's shard of the optimizer and its all-gathers (see zero1.h). */
#include "ddp/zero1.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pieces of bucket b rank `rank` steps: its block, and the leftover. */
static int pieces_of(const bucket_t *b, int world, int rank, zero1_piece_t out[2])
{
    size_t blk = reducer_block(b, world), rest = reducer_rest(b, world);
    int n = 0;
    if (blk > 0)
        out[n++] = (zero1_piece_t){b->off + blk * (size_t)rank, blk, 0};
    if (rest > 0)
        out[n++] = (zero1_piece_t){b->off + blk * (size_t)world, rest, 0};
    return n;
}

size_t zero1_state_floats(const reducer_t *red, int world, int rank)
{
    size_t n = 0;
    for (int i = 0; i < red->nb; i++) {
        zero1_piece_t p[2];
        int k = pieces_of(&red->b[i], world, rank, p);
        for (int j = 0; j < k; j++)
            n += p[j].n;
    }
    return n;
}

int zero1_init(zero1_t *z, const reducer_t *red, optim_t *opt, int world, int rank, bool run_last,
               char *err)
{
    memset(z, 0, sizeof *z);
    z->world = world;
    z->rank = rank;
    z->red = red;
    z->opt = opt;
    z->run_last = run_last;
    z->piece = calloc((size_t)(2 * red->nb), sizeof *z->piece);
    z->tag = calloc((size_t)red->nb, sizeof *z->tag);
    if (!z->piece || !z->tag) {
        zero1_free(z);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for ZeRO-1's shard");
    }
    for (int i = 0; i < red->nb; i++) {
        zero1_piece_t p[2];
        int k = pieces_of(&red->b[i], world, rank, p);
        for (int j = 0; j < k; j++) {
            p[j].state_off = z->shard;
            z->shard += p[j].n;
            z->piece[z->npiece++] = p[j];
        }
        snprintf(z->tag[i], sizeof z->tag[i], "bucket %d", i);
    }
    if (z->shard != opt->n)
        return err_set(err, DDP_ERR_RUNTIME, "ZeRO-1: the optimizer holds %zu floats of state, "
                       "the shard needs %zu", opt->n, z->shard);
    return DDP_OK;
}

void zero1_free(zero1_t *z)
{
    free(z->piece);
    free(z->tag);
    memset(z, 0, sizeof *z);
}

int zero1_step(zero1_t *z, comm_t *comm, float *params, const float *grads, char *err)
{
    const reducer_t *red = z->red;
    optim_begin_step(z->opt);
    int p = 0;
    for (int i = 0; i < red->nb; i++) {
        const bucket_t *b = &red->b[i];
        zero1_piece_t mine[2];
        int k = pieces_of(b, z->world, z->rank, mine);
        for (int j = 0; j < k; j++, p++) {
            const zero1_piece_t *q = &z->piece[p];
            float *pp = z->pshard ? z->pshard + q->state_off : params + q->off;
            const float *gp = z->gshard ? z->gshard + q->state_off : grads + q->off;
            int rc = optim_step_slice(z->opt, pp, gp, q->state_off, q->n);
            if (rc != DDP_OK)
                return backend_check(z->opt->be, rc, "optimizer", err);
        }
        /* Every rank's block of this bucket, stepped by its owner, to
         * everyone: in place, block q from rank q.  Launched now, ordered
         * after the step of this rank's block (the comm contract), so it
         * overlaps the next bucket's step; the last one, with nothing left
         * to overlap, runs on this thread under shm on the CPU. */
        size_t blk = reducer_block(b, z->world);
        if (blk == 0 || z->world < 2 || z->pshard)
            continue;
        comm_op_t op = {.kind = COLL_ALL_GATHER, .recv = params + b->off, .count = blk,
                        .tag = z->tag[i]};
        comm_handle_t h;
        bool last = i == red->nb - 1;
        int rc = last && z->run_last ? comm_run(comm, &op, &h) : comm_launch(comm, &op, &h);
        if (rc != DDP_OK)
            return comm_check(comm, rc, NULL, err);
    }
    return DDP_OK;
}
