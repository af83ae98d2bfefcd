/* ddp/shard.c: what a DDP rank holds, plain DDP's whole model and ZeRO's stages, in one file
 * (see shard.h; docs/modes.md says how each stage moves its buckets and layers, and why every
 * rank runs every micro-batch under ZeRO-2 and -3). */
#include "ddp/shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Floats of the arena this rank steps, and where their state is. */
typedef struct {
    size_t off, n, state_off;
} piece_t;

struct shard {
    int stage, world, rank;
    backend_t *be;
    comm_t *comm;
    replica_t *rep;
    reducer_t *red;
    step_meter_t *meter;    /* the step's laps, and the waits for gathers: exposed */
    optim_t opt;            /* over the pieces alone under ZeRO */
    /* ZeRO: the pieces this rank steps (its block and each bucket's leftover), in the
     * shard's (and the optimizer state's) order */
    piece_t *piece;
    int npiece;
    size_t nshard;
    size_t *blk_at, *rest_at; /* per bucket: where its block and leftover are in the shard */
    char (*tag)[32];        /* what an all-gather moves, "bucket 2" ("layer 2" under ZeRO-3) */
    /* ZeRO-2 and -3 */
    bool whole;             /* --accum > 1: the gradients are the replica's arena */
    float *gslot[2];        /* the buckets' gradient buffers (not whole) */
    int gslot_bucket[2];    /* which bucket each holds this backward (-1: none) */
    comm_handle_t *last_h;  /* per bucket: its last collective this step */
    float *gshard;          /* the shard's gradients */
    /* ZeRO-3 */
    float *pshard;          /* the shard's parameters */
    float *pslot[2];        /* gathered layers (layer l in pslot[l % 2]) */
    comm_handle_t gather_h[MODEL_MAX_LAYERS]; /* this pass's gather of layer l */
    bool gathered[MODEL_MAX_LAYERS];          /* launched in this pass */
};

// ---------------------------------------------------------------------------
// the pieces

bucket_unit_t shard_bucket_unit(int stage)
{
    return stage == 2 ? BUCKETS_CUT_AT_LAYERS : stage == 3 ? BUCKETS_PER_LAYER : BUCKETS_CAPPED;
}

/* The pieces of bucket b rank `rank` steps: its block, and the leftover. */
static int pieces_of(const bucket_t *b, int world, int rank, piece_t out[2])
{
    size_t blk = reducer_block(b, world), rest = reducer_rest(b, world);
    int n = 0;
    if (blk > 0)
        out[n++] = (piece_t){b->off + blk * (size_t)rank, blk, 0};
    if (rest > 0)
        out[n++] = (piece_t){b->off + blk * (size_t)world, rest, 0};
    return n;
}

static size_t shard_floats(const reducer_t *red, int world, int rank)
{
    size_t n = 0;
    for (int i = 0; i < red->nb; i++) {
        piece_t p[2];
        int k = pieces_of(&red->b[i], world, rank, p);
        for (int j = 0; j < k; j++)
            n += p[j].n;
    }
    return n;
}

unsigned shard_replica_skip(const config_t *cfg)
{
    if (cfg->zero < 2)
        return 0;
    unsigned skip = cfg->accum > 1 ? 0 : REPLICA_NO_GRADS; /* no_sync keeps whole gradients */
    return cfg->zero >= 3 ? skip | REPLICA_NO_PARAMS : skip;
}

int shard_mem(const model_spec_t *s, const config_t *c, int world, shard_mem_t *out, char *err)
{
    double P = (double)s->nparams * sizeof(float);
    int ns = c->optim.kind == OPTIM_SGD ? (c->optim.momentum != 0.0f) : 2;
    *out = (shard_mem_t){P, P, ns * P};
    if (c->zero == 0)
        return DDP_OK;
    reducer_t r;
    TRY(reducer_init(&r, NULL, NULL, s, NULL, c->first_bucket_mb, c->bucket_mb, true,
                     shard_bucket_unit(c->zero), err));
    double shard = (double)shard_floats(&r, world, 0) * sizeof(float);
    size_t big[2] = {0, 0};
    for (int i = 0; i < r.nb; i++)
        if (r.b[i].count > big[i % 2])
            big[i % 2] = r.b[i].count;
    double slots = (double)(big[0] + (r.nb > 1 ? big[1] : 0)) * sizeof(float);
    reducer_free(&r);
    out->optim = ns * shard;
    if (c->zero >= 2) /* --accum: the whole gradients are kept (no_sync), the shard beside them */
        out->grads = shard + (c->accum > 1 ? P : slots);
    if (c->zero >= 3)
        out->params = shard + slots;
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the gradients: reduce-scattered into the shard

/* Where bucket i's gradients are written this backward. */
static float *grad_base(shard_t *z, int i)
{
    return z->gshard && !z->whole ? z->gslot[i % 2] : z->rep->grads + z->red->b[i].off;
}

/* The reducer's launch of bucket i (ZeRO): its block of the sum to this rank, the leftover
 * to everyone; ZeRO-1 in place, ZeRO-2 and -3 out of the buffer backward wrote. */
static int launch_bucket(void *ctx, reducer_t *red, int i, bool run, comm_handle_t *h)
{
    shard_t *z = ctx;
    const bucket_t *b = &red->b[i];
    size_t blk = reducer_block(b, z->world), rest = reducer_rest(b, z->world);
    float *src = grad_base(z, i), *g = z->gshard;
    comm_op_t ops[2];
    int n = 0;
    if (blk > 0)
        ops[n++] = (comm_op_t){.kind = COLL_REDUCE_SCATTER, .send = g ? src : NULL,
                               .recv = g ? g + z->blk_at[i] : src + blk * (size_t)z->rank,
                               .count = blk, .redop = REDOP_SUM, .tag = b->tag};
    if (rest > 0)
        ops[n++] = (comm_op_t){.kind = COLL_ALL_REDUCE,
                               .send = g ? src + blk * (size_t)z->world : NULL,
                               .recv = g ? g + z->rest_at[i] : src + blk * (size_t)z->world,
                               .count = rest, .redop = REDOP_SUM, .tag = b->tag};
    for (int k = 0; k < n; k++) {
        comm_handle_t hk = 0;
        TRY(run ? comm_run(z->comm, &ops[k], &hk) : comm_launch(z->comm, &ops[k], &hk));
        if (k == 0)
            *h = hk;
        z->last_h[i] = hk;
    }
    return DDP_OK;
}

static const bucket_ops_t zero_ops = {.launch = launch_bucket, .kind = TR_REDUCE_SCATTER};

/* Before backward writes bucket i: its buffer's last bucket (i - 2) must have been
 * reduce-scattered out of it.  Why wait here: that ran while backward computed i - 1. */
static int open_bucket(shard_t *z, int i)
{
    int s = i % 2;
    if (z->whole || z->gslot_bucket[s] == i)
        return DDP_OK;
    int prev = z->gslot_bucket[s];
    if (prev >= 0 && z->last_h[prev]) {
        step_meter_lap(z->meter, PH_BACKWARD);
        int rc = comm_wait(z->comm, z->last_h[prev], NULL);
        step_meter_lap(z->meter, PH_COMM_EXPOSED);
        if (rc != DDP_OK)
            return rc;
    }
    z->gslot_bucket[s] = i;
    return DDP_OK;
}

/* Layer l's gradient pointers into its buckets' buffers. */
static int place_grads(shard_t *z, int l)
{
    const model_spec_t *s = z->rep->spec;
    if (z->whole)
        return DDP_OK;
    int ib = z->red->bucket_of[2 * l + 1], iw = z->red->bucket_of[2 * l];
    TRY(open_bucket(z, ib));
    if (iw != ib)
        TRY(open_bucket(z, iw));
    z->rep->gb[l] = grad_base(z, ib) + (s->b_off[l] - z->red->b[ib].off);
    z->rep->gw[l] = grad_base(z, iw) + (s->w_off[l] - z->red->b[iw].off);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// ZeRO-3: a layer's parameters gathered before it computes

/* Layer l's gather into pslot[l % 2]: every rank's block, then the leftover copied from this
 * rank's shard.  Launched after the rank's earlier work (comm.h), so the slot's last layer
 * (l +- 2) has been computed from it. */
static int gather_layer(shard_t *z, int l)
{
    int i = z->rep->spec->nlayers - 1 - l;
    const bucket_t *b = &z->red->b[i];
    size_t blk = reducer_block(b, z->world), rest = reducer_rest(b, z->world);
    float *slot = z->pslot[l % 2];
    z->gathered[l] = true;
    z->gather_h[l] = 0;
    if (z->world < 2) /* the shard is the layer */
        return backend_d2d(z->be, slot, z->pshard + z->blk_at[i], b->count * sizeof(float));
    if (rest > 0)
        TRY(backend_d2d(z->be, slot + blk * (size_t)z->world, z->pshard + z->rest_at[i],
                        rest * sizeof(float)));
    if (blk == 0)
        return DDP_OK;
    comm_op_t op = {.kind = COLL_ALL_GATHER, .send = z->pshard + z->blk_at[i], .recv = slot,
                    .count = blk, .tag = z->tag[l]};
    int rc = comm_launch(z->comm, &op, &z->gather_h[l]);
    if (rc != DDP_OK)
        z->red->launch_failed = true; /* the comm has the message */
    return rc;
}

/* The layer hook before layer l's forward or backward: the next layer in that direction is
 * prefetched before this one is waited for, so its gather runs while this one computes. */
static int pre_layer(void *ctx, int l, bool backward)
{
    shard_t *z = ctx;
    replica_t *rep = z->rep;
    const model_spec_t *s = rep->spec;
    int L = s->nlayers;
    if (z->stage >= 3) {
        if (l == (backward ? L - 1 : 0))
            memset(z->gathered, 0, sizeof z->gathered);
        if (!z->gathered[l])
            TRY(gather_layer(z, l));
        int next = backward ? l - 1 : l + 1;
        if (next >= 0 && next < L && !z->gathered[next])
            TRY(gather_layer(z, next));
        if (z->gather_h[l]) {
            /* The step waits for this layer's parameters: what the prefetch did not hide
             * is exposed communication. */
            step_meter_lap(z->meter, backward ? PH_BACKWARD : PH_FORWARD);
            int rc = comm_wait(z->comm, z->gather_h[l], NULL);
            step_meter_lap(z->meter, PH_GATHER);
            if (rc != DDP_OK) {
                z->red->launch_failed = true;
                return rc;
            }
        }
        float *slot = z->pslot[l % 2];
        rep->pw[l] = slot;
        rep->pb[l] = slot + (s->b_off[l] - s->w_off[l]);
    }
    if (!backward)
        return DDP_OK;
    int rc = place_grads(z, l);
    if (rc != DDP_OK)
        z->red->launch_failed = true;
    return rc;
}

// ---------------------------------------------------------------------------
// set-up

static float *alloc_kind(shard_t *z, size_t n, mem_kind_t kind)
{
    return backend_alloc_for(z->be, (n ? n : 1) * sizeof(float), kind);
}

/* The pieces and the shard's layout (per bucket its block, then its leftover); the tags. */
static int pieces_init(shard_t *z, char *err)
{
    const reducer_t *red = z->red;
    int nb = red->nb, L = z->rep->spec->nlayers;
    z->piece = calloc((size_t)(2 * nb), sizeof *z->piece);
    z->blk_at = calloc((size_t)nb, sizeof *z->blk_at);
    z->rest_at = calloc((size_t)nb, sizeof *z->rest_at);
    z->last_h = calloc((size_t)nb, sizeof *z->last_h);
    z->tag = calloc((size_t)(nb > L ? nb : L), sizeof *z->tag);
    if (!z->piece || !z->blk_at || !z->rest_at || !z->last_h || !z->tag)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for ZeRO-%d's shard", z->stage);
    for (int i = 0; i < nb; i++) {
        const bucket_t *b = &red->b[i];
        piece_t p[2];
        int k = pieces_of(b, z->world, z->rank, p);
        z->blk_at[i] = z->nshard;
        z->rest_at[i] = z->nshard + reducer_block(b, z->world);
        for (int j = 0; j < k; j++) {
            p[j].state_off = z->nshard;
            z->nshard += p[j].n;
            z->piece[z->npiece++] = p[j];
        }
        snprintf(z->tag[i], sizeof z->tag[i], "bucket %d", i);
    }
    for (int l = 0; l < L && z->stage >= 3; l++)
        snprintf(z->tag[l], sizeof z->tag[l], "layer %d", l + 1);
    return DDP_OK;
}

/* ZeRO-2 and -3: the shard's gradients, the buckets' buffers, ZeRO-3's
 * parameter shard and layer buffers, and the layer hooks. */
static int buffers_init(shard_t *z, int accum, char *err)
{
    const model_spec_t *s = z->rep->spec;
    int nb = z->red->nb;
    z->whole = accum > 1;
    z->gslot_bucket[0] = z->gslot_bucket[1] = -1;
    size_t biggest[2] = {0, 0}; /* bucket i's buffer is gslot[i % 2]: each sized for its own */
    for (int i = 0; i < nb; i++)
        if (z->red->b[i].count > biggest[i % 2])
            biggest[i % 2] = z->red->b[i].count;
    if (!(z->gshard = alloc_kind(z, z->nshard, MEM_GRADS)))
        return err_set(err, DDP_ERR_RUNTIME, "out of device memory for the gradient shard");
    if (!z->whole) /* one buffer when one bucket is all there is */
        for (int k = 0; k < (nb > 1 ? 2 : 1); k++)
            if (!(z->gslot[k] = alloc_kind(z, biggest[k], MEM_GRADS)))
                return err_set(err, DDP_ERR_RUNTIME, "out of device memory for bucket buffers");
    if (z->stage >= 3) {
        if (!(z->pshard = alloc_kind(z, z->nshard, MEM_PARAMS)))
            return err_set(err, DDP_ERR_RUNTIME, "out of device memory for the parameter shard");
        /* layer l (bucket L-1-l) in pslot[l % 2] */
        for (int k = 0; k < (s->nlayers > 1 ? 2 : 1); k++)
            if (!(z->pslot[k] = alloc_kind(z, biggest[(s->nlayers - 1 - k) % 2], MEM_PARAMS)))
                return err_set(err, DDP_ERR_RUNTIME, "out of device memory for layer buffers");
        if (s->nlayers == 1)
            z->pslot[1] = z->pslot[0];
    }
    z->rep->pre = pre_layer;
    z->rep->pre_ctx = z;
    return DDP_OK;
}

int shard_create(shard_t **out, const config_t *cfg, backend_t *be, comm_t *comm, replica_t *rep,
                 reducer_t *red, step_meter_t *meter, char *err)
{
    shard_t *z = calloc(1, sizeof *z);
    if (!(*out = z))
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the rank's shard");
    *z = (shard_t){.stage = cfg->zero, .world = comm_world(comm), .rank = comm_rank(comm),
                   .be = be, .comm = comm, .rep = rep, .red = red, .meter = meter};
    size_t state = rep->spec->nparams;
    if (z->stage > 0) {
        TRY(pieces_init(z, err));
        state = z->nshard;
        red->ops = &zero_ops;
        red->ops_ctx = z;
    }
    TRY(optim_init(&z->opt, be, &cfg->optim, state, err));
    return z->stage >= 2 ? buffers_init(z, cfg->accum, err) : DDP_OK;
}

void shard_free(shard_t *z)
{
    if (!z)
        return;
    if (z->be) {
        backend_free(z->be, z->gshard);
        backend_free(z->be, z->pshard);
        for (int k = 0; k < 2; k++) {
            backend_free(z->be, z->gslot[k]);
            if (k == 0 || z->pslot[1] != z->pslot[0])
                backend_free(z->be, z->pslot[k]);
        }
    }
    optim_free(&z->opt);
    free(z->piece);
    free(z->blk_at);
    free(z->rest_at);
    free(z->last_h);
    free(z->tag);
    free(z);
}

optim_t *shard_optim(shard_t *z) { return &z->opt; }

// ---------------------------------------------------------------------------
// parameters in and out

static int dev(shard_t *z, int rc, char *err) { return backend_check(z->be, rc, NULL, err); }
static int coll(shard_t *z, int rc, char *err) { return comm_check(z->comm, rc, NULL, err); }

int shard_params_in(shard_t *z, const float *host0, char *err)
{
    const model_spec_t *s = z->rep->spec;
    if (z->stage < 3) { /* the arena is whole: rank 0's, broadcast */
        if (z->rank == 0)
            TRY(dev(z, backend_h2d(z->be, z->rep->params, host0, s->nparams * sizeof(float)),
                    err));
        return coll(z, comm_broadcast(z->comm, z->rep->params, s->nparams, 0), err);
    }
    /* ZeRO-3: each layer through a layer buffer, never the whole model */
    for (int i = 0; i < z->red->nb; i++) {
        const bucket_t *b = &z->red->b[i];
        float *slot = z->pslot[(s->nlayers - 1 - i) % 2]; /* layer L-1-i's, its size */
        if (z->rank == 0)
            TRY(dev(z, backend_h2d(z->be, slot, host0 + b->off, b->count * sizeof(float)), err));
        TRY(coll(z, comm_broadcast(z->comm, slot, b->count, 0), err));
        size_t blk = reducer_block(b, z->world), rest = reducer_rest(b, z->world);
        size_t mine = z->world > 1 ? blk * (size_t)z->rank : 0;
        TRY(dev(z, backend_d2d(z->be, z->pshard + z->blk_at[i], slot + mine, blk * sizeof(float)),
                err));
        if (rest > 0)
            TRY(dev(z, backend_d2d(z->be, z->pshard + z->rest_at[i], slot + blk * (size_t)z->world,
                                   rest * sizeof(float)), err));
        TRY(dev(z, backend_sync(z->be), err)); /* the slot is reused */
    }
    return DDP_OK;
}

int shard_params_out(shard_t *z, float *host, char *err)
{
    const model_spec_t *s = z->rep->spec;
    if (z->stage < 3)
        return dev(z, backend_d2h(z->be, host, z->rep->params, s->nparams * sizeof(float)), err);
    for (int l = 0; l < s->nlayers; l++) {
        size_t n = z->red->b[s->nlayers - 1 - l].count; /* layer l's bucket: [W_l, b_l] */
        TRY(dev(z, gather_layer(z, l), err));
        if (z->gather_h[l])
            TRY(coll(z, comm_wait(z->comm, z->gather_h[l], NULL), err));
        TRY(dev(z, backend_d2h(z->be, host + s->w_off[l], z->pslot[l % 2], n * sizeof(float)),
                err));
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the step

int shard_last_micro(const shard_t *z, const schedule_t *sch, long g)
{
    int accum = sch->cfg->accum, last = 0;
    if (z->stage >= 2)
        return accum - 1;
    for (int m = 0; m < accum; m++)
        if (schedule_rank_micro_rows(sch, g, m, z->rank) > 0)
            last = m;
    return last;
}

/* ZeRO-2 and -3: the forward's gathers, then backward's, each layer's gradients zero (unless
 * earlier micro-batches left some) and handed to the reducer. */
static int skeleton(shard_t *z, bool accumulated)
{
    replica_t *rep = z->rep;
    const model_spec_t *s = rep->spec;
    for (int l = 0; l < s->nlayers; l++)
        TRY(pre_layer(z, l, false));
    for (int l = s->nlayers - 1; l >= 0; l--) {
        TRY(pre_layer(z, l, true));
        if (!accumulated) {
            TRY(backend_memset0(z->be, rep->gw[l], (size_t)s->dims[l] * s->dims[l + 1] *
                                                       sizeof(float)));
            TRY(backend_memset0(z->be, rep->gb[l], (size_t)s->dims[l + 1] * sizeof(float)));
        }
        TRY(reducer_hook(z->red, l));
    }
    return DDP_OK;
}

int shard_no_rows(shard_t *z, bool last, train_step_t *t)
{
    int rc = DDP_OK;
    if (z->stage >= 2) { /* every rank's collectives, zero gradients (torch's Join) */
        rc = skeleton(z, t->has_grad);
        t->has_grad = true;
    } else if (last) {
        /* No rows this step: it still takes part in every all-reduce, with zero gradients
         * (torch's Join hook shadows the others' all-reduces the same way). */
        rc = backend_memset0(z->be, z->rep->grads, z->rep->spec->nparams * sizeof(float));
    } else {
        return DDP_OK; /* a micro-batch too small to reach this rank */
    }
    TRY(step_check(t, rc, "backward"));
    step_meter_lap(z->meter, PH_BACKWARD);
    return DDP_OK;
}

/* ZeRO: step this rank's pieces, launching each bucket's all-gather as soon as its block is
 * stepped (the comm orders it after that work) to overlap the next bucket's step; the last
 * one runs on this thread under run_rest.  ZeRO-3 gathers each layer when it computes. */
static int step_pieces(shard_t *z, char *err)
{
    const reducer_t *red = z->red;
    float *params = z->rep->params;
    optim_begin_step(&z->opt);
    int p = 0;
    for (int i = 0; i < red->nb; i++) {
        const bucket_t *b = &red->b[i];
        piece_t mine[2];
        int k = pieces_of(b, z->world, z->rank, mine);
        for (int j = 0; j < k; j++, p++) {
            const piece_t *q = &z->piece[p];
            float *pp = z->pshard ? z->pshard + q->state_off : params + q->off;
            const float *gp = z->gshard ? z->gshard + q->state_off : z->rep->grads + q->off;
            TRY(backend_check(z->be, optim_step_slice(&z->opt, pp, gp, q->state_off, q->n),
                              "optimizer", err));
        }
        size_t blk = reducer_block(b, z->world);
        if (blk == 0 || z->world < 2 || z->pshard)
            continue;
        comm_op_t op = {.kind = COLL_ALL_GATHER, .recv = params + b->off, .count = blk,
                        .tag = z->tag[i]};
        comm_handle_t h;
        bool run = i == red->nb - 1 && red->run_rest;
        TRY(coll(z, run ? comm_run(z->comm, &op, &h) : comm_launch(z->comm, &op, &h), err));
    }
    return DDP_OK;
}

int shard_step(shard_t *z, char *err)
{
    if (z->stage == 0) {
        TRY(dev(z, optim_step(&z->opt, z->rep->params, z->rep->grads), err));
        step_meter_lap(z->meter, PH_OPTIM);
        return DDP_OK;
    }
    /* the buffers' next backward starts afresh (every reduce-scatter is done) */
    z->gslot_bucket[0] = z->gslot_bucket[1] = -1;
    memset(z->last_h, 0, (size_t)z->red->nb * sizeof *z->last_h);
    TRY(step_pieces(z, err));
    step_meter_lap(z->meter, PH_OPTIM);
    /* the next step's forward needs the parameters gathered */
    TRY(coll(z, comm_wait_all(z->comm), err));
    step_meter_lap(z->meter, PH_COMM_EXPOSED);
    return DDP_OK;
}

void shard_backward(const shard_t *z, const step_rec_t *r, double *t0, double *t1)
{
    double l0, l1;
    *t0 = *t1 = 0.0;
    step_rec_last_lap(r, PH_BACKWARD, t0, t1);
    if (z->stage >= 2 && step_rec_last_lap(r, PH_LOSS, &l0, &l1) && l1 < *t1)
        *t0 = l1;
}
