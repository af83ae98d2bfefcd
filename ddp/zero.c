/* ddp/zero.c: ZeRO-2's and ZeRO-3's buffers, their collectives and the layer
 * hooks that place each layer (see zero.h). */
#include "ddp/zero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// the shard

static size_t layer_off(const model_spec_t *s, int l) { return s->w_off[l]; }
static size_t layer_count(const model_spec_t *s, int l)
{
    return (size_t)s->dims[l] * (size_t)s->dims[l + 1] + (size_t)s->dims[l + 1];
}

int zero_buckets(reducer_t *red, int stage, char *err)
{
    (void)err;
    if (stage != 3)
        return DDP_OK;
    /* [W_l, b_l] is contiguous in the arena: a layer is one slice.  The
     * reducer allocated 2L buckets; L are used. */
    const model_spec_t *s = red->spec;
    int L = s->nlayers;
    memset(red->b, 0, (size_t)(2 * L) * sizeof *red->b);
    red->nb = L;
    for (int i = 0; i < L; i++) {
        int l = L - 1 - i; /* backward reaches the last layer first */
        bucket_t *b = &red->b[i];
        b->first_param = 2 * l;
        b->last_param = 2 * l + 1;
        b->off = layer_off(s, l);
        b->count = layer_count(s, l);
        snprintf(b->tag, sizeof b->tag, "layer %d", l + 1);
        red->bucket_of[2 * l] = red->bucket_of[2 * l + 1] = i;
    }
    return DDP_OK;
}

size_t zero_shard_floats(const reducer_t *red, int world, int rank)
{
    return zero1_state_floats(red, world, rank);
}

unsigned zero_replica_skip(int stage, int accum)
{
    unsigned skip = accum > 1 ? 0 : REPLICA_NO_GRADS; /* no_sync keeps whole gradients */
    return stage >= 3 ? skip | REPLICA_NO_PARAMS : skip;
}

int zero_mem_plan(const model_spec_t *s, const config_t *c, int stage, int world, zero_mem_t *out,
                  char *err)
{
    double P = (double)s->nparams * sizeof(float);
    int ns = c->optim.kind == OPTIM_SGD ? (c->optim.momentum != 0.0f) : 2;
    *out = (zero_mem_t){P, P, ns * P};
    if (stage == 0)
        return DDP_OK;
    reducer_t r;
    TRY(reducer_init(&r, NULL, NULL, s, NULL, c->first_bucket_mb, c->bucket_mb, true, err));
    zero_buckets(&r, stage, err);
    double shard = (double)zero1_state_floats(&r, world, 0) * sizeof(float);
    size_t big[2] = {0, 0};
    for (int i = 0; i < r.nb; i++)
        if (r.b[i].count > big[i % 2])
            big[i % 2] = r.b[i].count;
    double slots = (double)(big[0] + (r.nb > 1 ? big[1] : 0)) * sizeof(float);
    reducer_free(&r);
    out->optim = ns * shard;
    if (stage >= 2) /* --accum: the whole gradients are kept (no_sync), the shard beside them */
        out->grads = shard + (c->accum > 1 ? P : slots);
    if (stage >= 3)
        out->params = shard + slots;
    return DDP_OK;
}

static float *alloc_kind(zero_t *z, size_t n, mem_kind_t kind)
{
    return backend_alloc_for(z->be, (n ? n : 1) * sizeof(float), kind);
}

// ---------------------------------------------------------------------------
// the gradients: bucket buffers and the reduce-scatter into the shard

/* Where bucket i's gradients are written this backward. */
static float *grad_base(zero_t *z, int i)
{
    return z->whole ? z->rep->grads + z->red->b[i].off : z->gslot[i % 2];
}

/* The reducer's launch of bucket i: its block of the sum to this rank's
 * shard, and the leftover (fewer floats than ranks, or count mod world) to
 * everyone, each straight out of the buffer backward wrote. */
static int launch_bucket(void *ctx, int i, bool run, comm_handle_t *h)
{
    zero_t *z = ctx;
    const bucket_t *b = &z->red->b[i];
    size_t blk = reducer_block(b, z->world), rest = reducer_rest(b, z->world);
    const float *src = grad_base(z, i);
    comm_op_t ops[2];
    int n = 0;
    if (blk > 0)
        ops[n++] = (comm_op_t){.kind = COLL_REDUCE_SCATTER, .send = src,
                               .recv = z->gshard + z->blk_at[i], .count = blk,
                               .redop = REDOP_SUM, .tag = b->tag};
    if (rest > 0)
        ops[n++] = (comm_op_t){.kind = COLL_ALL_REDUCE, .send = src + blk * (size_t)z->world,
                               .recv = z->gshard + z->rest_at[i], .count = rest,
                               .redop = REDOP_SUM, .tag = b->tag};
    for (int k = 0; k < n; k++) {
        comm_handle_t hk = 0;
        int rc = run ? comm_run(z->comm, &ops[k], &hk) : comm_launch(z->comm, &ops[k], &hk);
        if (rc != DDP_OK)
            return rc;
        if (k == 0)
            *h = hk;
        z->last_h[i] = hk;
    }
    return DDP_OK;
}

/* Before backward writes bucket i: its buffer's last bucket (i - 2) must
 * have been reduce-scattered out of it.  Why wait here and not earlier: that
 * reduce-scatter ran while backward computed bucket i - 1. */
static int open_bucket(zero_t *z, int i)
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
static int place_grads(zero_t *z, int l)
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

/* Layer l's gather into pslot[l % 2]: every rank's block, then the leftover
 * (the same on every rank) copied from this rank's shard.  Launched after
 * the rank's earlier work (comm.h), so the slot's last layer (l +- 2) has
 * been computed from it. */
static int gather_layer(zero_t *z, int l)
{
    int i = z->rep->spec->nlayers - 1 - l;
    const bucket_t *b = &z->red->b[i];
    size_t blk = reducer_block(b, z->world), rest = reducer_rest(b, z->world);
    float *slot = z->pslot[l % 2];
    z->gathered[l] = true;
    z->gather_h[l] = 0;
    if (z->world < 2) /* the shard is the layer */
        return backend_d2d(z->be, slot, z->pshard + z->blk_at[i], b->count * sizeof(float));
    if (rest > 0) {
        int rc = backend_d2d(z->be, slot + blk * (size_t)z->world, z->pshard + z->rest_at[i],
                             rest * sizeof(float));
        if (rc != DDP_OK)
            return rc;
    }
    if (blk == 0)
        return DDP_OK;
    comm_op_t op = {.kind = COLL_ALL_GATHER, .send = z->pshard + z->blk_at[i], .recv = slot,
                    .count = blk, .tag = z->tag[l]};
    int rc = comm_launch(z->comm, &op, &z->gather_h[l]);
    if (rc != DDP_OK)
        z->red->launch_failed = true; /* the comm has the message */
    return rc;
}

/* The layer hook before layer l's forward or backward.  Forward runs layers
 * 0..L-1, backward L-1..0: the next one in that direction is prefetched
 * before this one is waited for, so its gather runs while this one computes. */
static int pre_layer(void *ctx, int l, bool backward)
{
    zero_t *z = ctx;
    replica_t *rep = z->rep;
    const model_spec_t *s = rep->spec;
    int L = s->nlayers;
    if (z->stage >= 3) {
        bool first = backward ? l == L - 1 : l == 0;
        if (first)
            memset(z->gathered, 0, sizeof z->gathered);
        if (!z->gathered[l])
            TRY(gather_layer(z, l));
        int next = backward ? l - 1 : l + 1;
        if (next >= 0 && next < L && !z->gathered[next])
            TRY(gather_layer(z, next));
        if (z->gather_h[l]) {
            /* The step waits for this layer's parameters: what the prefetch
             * did not hide is exposed communication. */
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
    if (backward) {
        int rc = place_grads(z, l);
        if (rc != DDP_OK)
            z->red->launch_failed = true;
        return rc;
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// set-up

int zero_init(zero_t *z, int stage, backend_t *be, comm_t *comm, replica_t *rep, reducer_t *red,
              optim_t *opt, step_meter_t *meter, int accum, char *err)
{
    memset(z, 0, sizeof *z);
    z->stage = stage;
    z->be = be;
    z->comm = comm;
    z->rep = rep;
    z->red = red;
    z->meter = meter;
    z->world = comm_world(comm);
    z->rank = comm_rank(comm);
    z->whole = accum > 1;
    z->gslot_bucket[0] = z->gslot_bucket[1] = -1;
    const model_spec_t *s = rep->spec;
    int nb = red->nb;
    z->blk_at = calloc((size_t)nb, sizeof *z->blk_at);
    z->rest_at = calloc((size_t)nb, sizeof *z->rest_at);
    z->last_h = calloc((size_t)nb, sizeof *z->last_h);
    z->tag = calloc((size_t)s->nlayers, sizeof *z->tag);
    if (!z->blk_at || !z->rest_at || !z->last_h || !z->tag)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for ZeRO-%d's shard", stage);
    /* the shard's layout: per bucket its block, then its leftover (zero1's
     * pieces, in the order of the optimizer state) */
    size_t at = 0, biggest[2] = {0, 0};
    for (int i = 0; i < nb; i++) {
        const bucket_t *b = &red->b[i];
        z->blk_at[i] = at;
        at += reducer_block(b, z->world) > 0 ? reducer_block(b, z->world) : 0;
        z->rest_at[i] = at;
        at += reducer_rest(b, z->world);
        /* bucket i's buffer is gslot[i % 2]: each sized for its own buckets */
        biggest[i % 2] = b->count > biggest[i % 2] ? b->count : biggest[i % 2];
    }
    for (int l = 0; l < s->nlayers; l++)
        snprintf(z->tag[l], sizeof z->tag[l], "layer %d", l + 1);
    if (!(z->gshard = alloc_kind(z, at, MEM_GRADS)))
        return err_set(err, DDP_ERR_RUNTIME, "out of device memory for the gradient shard");
    if (!z->whole) /* one buffer when one bucket is all there is */
        for (int k = 0; k < (nb > 1 ? 2 : 1); k++)
            if (!(z->gslot[k] = alloc_kind(z, biggest[k], MEM_GRADS)))
                return err_set(err, DDP_ERR_RUNTIME, "out of device memory for bucket buffers");
    if (stage >= 3) {
        if (!(z->pshard = alloc_kind(z, at, MEM_PARAMS)))
            return err_set(err, DDP_ERR_RUNTIME, "out of device memory for the parameter shard");
        /* layer l (bucket L-1-l) in pslot[l % 2] */
        for (int k = 0; k < (s->nlayers > 1 ? 2 : 1); k++)
            if (!(z->pslot[k] = alloc_kind(z, biggest[(s->nlayers - 1 - k) % 2], MEM_PARAMS)))
                return err_set(err, DDP_ERR_RUNTIME, "out of device memory for layer buffers");
        if (s->nlayers == 1)
            z->pslot[1] = z->pslot[0];
    }
    TRY(zero1_init(&z->z1, red, opt, z->world, z->rank, red->run_rest, err));
    z->z1.gshard = z->gshard;
    z->z1.pshard = z->pshard;
    red->launch_fn = launch_bucket;
    red->launch_ctx = z;
    rep->pre = pre_layer;
    rep->pre_ctx = z;
    return DDP_OK;
}

void zero_free(zero_t *z)
{
    if (z->be) {
        backend_free(z->be, z->gshard);
        backend_free(z->be, z->pshard);
        for (int k = 0; k < 2; k++) {
            backend_free(z->be, z->gslot[k]);
            if (k == 0 || z->pslot[1] != z->pslot[0])
                backend_free(z->be, z->pslot[k]);
        }
    }
    zero1_free(&z->z1);
    free(z->blk_at);
    free(z->rest_at);
    free(z->last_h);
    free(z->tag);
    memset(z, 0, sizeof *z);
}

// ---------------------------------------------------------------------------
// parameters in and out, a micro-batch without rows, the step

int zero_params_in(zero_t *z, const float *host0, char *err)
{
    const model_spec_t *s = z->rep->spec;
    if (z->stage < 3) { /* the arena is whole: one broadcast, as plain DDP */
        if (z->rank == 0)
            TRY(backend_check(z->be, backend_h2d(z->be, z->rep->params, host0,
                                                 s->nparams * sizeof(float)), NULL, err));
        return comm_check(z->comm, comm_broadcast(z->comm, z->rep->params, s->nparams, 0), NULL,
                          err);
    }
    /* ZeRO-3: each layer through a layer buffer, never the whole model */
    for (int i = 0; i < z->red->nb; i++) {
        const bucket_t *b = &z->red->b[i];
        float *slot = z->pslot[(s->nlayers - 1 - i) % 2]; /* layer L-1-i's, its size */
        if (z->rank == 0)
            TRY(backend_check(z->be, backend_h2d(z->be, slot, host0 + b->off,
                                                 b->count * sizeof(float)), NULL, err));
        TRY(comm_check(z->comm, comm_broadcast(z->comm, slot, b->count, 0), NULL, err));
        size_t blk = reducer_block(b, z->world), rest = reducer_rest(b, z->world);
        size_t mine = z->world > 1 ? blk * (size_t)z->rank : 0;
        TRY(backend_check(z->be, backend_d2d(z->be, z->pshard + z->blk_at[i], slot + mine,
                                             blk * sizeof(float)), NULL, err));
        if (rest > 0)
            TRY(backend_check(z->be, backend_d2d(z->be, z->pshard + z->rest_at[i],
                                                 slot + blk * (size_t)z->world,
                                                 rest * sizeof(float)), NULL, err));
        TRY(backend_check(z->be, backend_sync(z->be), NULL, err)); /* the slot is reused */
    }
    return DDP_OK;
}

int zero_params_out(zero_t *z, float *host, char *err)
{
    const model_spec_t *s = z->rep->spec;
    if (z->stage < 3)
        return backend_check(z->be, backend_d2h(z->be, host, z->rep->params,
                                                s->nparams * sizeof(float)), NULL, err);
    for (int l = 0; l < s->nlayers; l++) {
        TRY(backend_check(z->be, gather_layer(z, l), NULL, err));
        if (z->gather_h[l])
            TRY(comm_check(z->comm, comm_wait(z->comm, z->gather_h[l], NULL), NULL, err));
        TRY(backend_check(z->be, backend_d2h(z->be, host + s->w_off[l], z->pslot[l % 2],
                                             layer_count(s, l) * sizeof(float)), NULL, err));
    }
    return DDP_OK;
}

int zero_skeleton(zero_t *z, bool accumulated, char *err)
{
    replica_t *rep = z->rep;
    const model_spec_t *s = rep->spec;
    int L = s->nlayers;
    int rc = DDP_OK;
    /* the forward's gathers, then backward's, each layer's gradients zero
     * (unless earlier micro-batches left some) and handed to the reducer */
    for (int l = 0; l < L && rc == DDP_OK; l++)
        rc = pre_layer(z, l, false);
    for (int l = L - 1; l >= 0 && rc == DDP_OK; l--) {
        rc = pre_layer(z, l, true);
        if (rc == DDP_OK && !accumulated) {
            rc = backend_memset0(z->be, rep->gw[l], (size_t)s->dims[l] * s->dims[l + 1] *
                                                        sizeof(float));
            if (rc == DDP_OK)
                rc = backend_memset0(z->be, rep->gb[l], (size_t)s->dims[l + 1] * sizeof(float));
            if (rc != DDP_OK)
                return backend_check(z->be, rc, NULL, err);
        }
        if (rc == DDP_OK)
            rc = reducer_hook(z->red, l);
    }
    if (rc != DDP_OK)
        return z->red->launch_failed ? comm_check(z->comm, rc, NULL, err)
                                     : backend_check(z->be, rc, NULL, err);
    return DDP_OK;
}

int zero_step(zero_t *z, char *err)
{
    /* the buffers' next backward starts afresh (every reduce-scatter is done) */
    z->gslot_bucket[0] = z->gslot_bucket[1] = -1;
    memset(z->last_h, 0, (size_t)z->red->nb * sizeof *z->last_h);
    return zero1_step(&z->z1, z->comm, z->rep->params, NULL, err);
}
