/* ddp/comm_hook.c: DDP's communication hooks, fp16 / bf16 and PowerSGD (comm_hook.h). */
#include "ddp/comm_hook.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"

/* A matrix PowerSGD compresses: a layer's weight gradient, n x m row-major. */
typedef struct {
    int n, m, r;           /* rows (out features), columns (in), its rank */
    size_t goff;           /* floats into the gradient arena */
    size_t poff, qoff;     /* floats into its bucket's P and Q */
    float *err;            /* error feedback, n x m */
} hmat_t;

/* What travels uncompressed (vectors, small matrices): a slice of the arena. */
typedef struct {
    size_t goff, count;
} hpiece_t;

typedef struct {
    /* 16-bit: the bucket's slice of the 16-bit buffer, count padded even */
    size_t hoff, hcount;
    /* PowerSGD */
    hmat_t *mat;
    int nmat;
    hpiece_t *piece;
    int npiece;
    size_t ucount, pcount, qcount;
    float *u, *p, *q;      /* uncompressed parts; P; Q (kept: warm start) */
    bool q_ready;          /* Q holds last step's (false: draw the first) */
    bool compressed;       /* the last all-reducing step compressed it */
} hbucket_t;

struct comm_hook {
    comm_hook_kind_t kind;
    dtype_t dt;            /* fp16 / bf16 */
    backend_t *be;
    int world;
    int rank_r;            /* --comm-hook powersgd:RANK */
    long start, iter;      /* plain steps before compressing; all-reducing steps done */
    uint64_t seed;
    uint16_t *h16;         /* 16-bit buffer over every bucket (device) */
    hbucket_t *hb;
    int nb;
};

// ---------------------------------------------------------------------------
// set-up

static int powersgd_init(comm_hook_t *h, const reducer_t *red, char *err)
{
    const model_spec_t *s = red->spec;
    for (int i = 0; i < h->nb; i++) {
        hbucket_t *b = &h->hb[i];
        const bucket_t *bk = &red->b[i];
        int np = bk->last_param - bk->first_param + 1;
        b->mat = calloc((size_t)np, sizeof *b->mat);
        b->piece = calloc((size_t)np, sizeof *b->piece);
        if (!b->mat || !b->piece)
            return err_set(err, DDP_ERR_RUNTIME, "out of memory for PowerSGD's state");
        for (int p = bk->first_param; p <= bk->last_param; p++) {
            int l = p / 2, n = s->dims[l + 1], m = s->dims[l];
            int r = h->rank_r < n ? h->rank_r : n;
            r = r < m ? r : m;
            /* worth it: PyTorch's _should_compress with min_compression_rate 2 */
            if (p % 2 == 0 && (double)(n + m) * r * 2.0 < (double)n * m) {
                hmat_t *mt = &b->mat[b->nmat++];
                *mt = (hmat_t){n, m, r, model_param_off(s, p), b->pcount, b->qcount, NULL};
                b->pcount += (size_t)n * r;
                b->qcount += (size_t)m * r;
                if (!(mt->err = calloc((size_t)n * m, sizeof(float))))
                    return err_set(err, DDP_ERR_RUNTIME, "out of memory for PowerSGD's errors");
            } else {
                b->piece[b->npiece++] = (hpiece_t){model_param_off(s, p), model_param_count(s, p)};
                b->ucount += model_param_count(s, p);
            }
        }
        b->u = calloc(b->ucount + 1, sizeof(float));
        b->p = calloc(b->pcount + 1, sizeof(float));
        b->q = calloc(b->qcount + 1, sizeof(float));
        if (!b->u || !b->p || !b->q)
            return err_set(err, DDP_ERR_RUNTIME, "out of memory for PowerSGD's P and Q");
    }
    return DDP_OK;
}

static const bucket_ops_t hook_ops;

int comm_hook_init(comm_hook_t **out, const config_t *cfg, backend_t *be, reducer_t *r,
                   char *err)
{
    *out = NULL;
    if (cfg->comm_hook == HOOK_NONE)
        return DDP_OK;
    if (cfg->comm_hook == HOOK_POWERSGD && !backend_host_visible(be))
        return err_set(err, DDP_ERR_INPUT, "--comm-hook powersgd: the CPU backend only");
    comm_hook_t *h = calloc(1, sizeof *h);
    if (!h)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the comm hook");
    *h = (comm_hook_t){.kind = cfg->comm_hook, .be = be, .world = comm_world(r->comm),
                       .dt = cfg->comm_hook == HOOK_BF16 ? DTYPE_BF16 : DTYPE_F16,
                       .rank_r = cfg->powersgd_rank, .start = cfg->powersgd_start,
                       .seed = cfg->seed, .nb = r->nb};
    h->hb = calloc((size_t)r->nb, sizeof *h->hb);
    int rc = h->hb ? DDP_OK : err_set(err, DDP_ERR_RUNTIME, "out of memory for the comm hook");
    if (rc == DDP_OK && h->kind == HOOK_POWERSGD)
        rc = powersgd_init(h, r, err);
    if (rc == DDP_OK && (h->kind == HOOK_FP16 || h->kind == HOOK_BF16)) {
        size_t total = 0;
        for (int i = 0; i < r->nb; i++) {
            h->hb[i].hoff = total; /* even: 16-bit pairs stay 4-byte aligned */
            h->hb[i].hcount = (r->b[i].count + 1) & ~(size_t)1;
            total += h->hb[i].hcount;
        }
        /* zeroed once: a bucket's pad element (odd counts) is sent as 0 */
        if (!(h->h16 = backend_alloc_for(be, total * sizeof(uint16_t), MEM_COMM)) ||
            backend_memset0(be, h->h16, total * sizeof(uint16_t)) != DDP_OK)
            rc = err_set(err, DDP_ERR_RUNTIME, "out of device memory for the 16-bit buckets");
    }
    if (rc != DDP_OK) {
        comm_hook_free(h);
        return rc;
    }
    *out = h;
    r->ops = &hook_ops;
    r->ops_ctx = h;
    return DDP_OK;
}

void comm_hook_free(comm_hook_t *h)
{
    if (!h)
        return;
    for (int i = 0; h->hb && i < h->nb; i++) {
        hbucket_t *b = &h->hb[i];
        for (int j = 0; j < b->nmat; j++)
            free(b->mat[j].err);
        free(b->mat);
        free(b->piece);
        free(b->u);
        free(b->p);
        free(b->q);
    }
    backend_free(h->be, h->h16);
    free(h->hb);
    free(h);
}

// ---------------------------------------------------------------------------
// launch: from the backward hook, bucket by bucket in index order

static int send(reducer_t *r, comm_op_t *op, bool run, comm_handle_t *hd)
{
    return run ? comm_run(r->comm, op, hd) : comm_launch(r->comm, op, hd);
}

static int hook_launch(void *ctx, reducer_t *r, int i, bool run, comm_handle_t *hd)
{
    comm_hook_t *h = ctx;
    bucket_t *bk = &r->b[i];
    hbucket_t *b = &h->hb[i];
    *hd = 0;
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = r->grads + bk->off, .count = bk->count,
                    .redop = REDOP_SUM, .tag = bk->tag};
    if (h->kind == HOOK_FP16 || h->kind == HOOK_BF16) {
        /* Cast on the device's queue: the launch below is ordered after it,
         * as after the gradients it reads (comm.h). */
        uint16_t *dst = h->h16 + b->hoff;
        TRY(backend_cast16(h->be, h->dt, true, r->grads + bk->off, dst, bk->count));
        op.recv = (float *)(void *)dst;
        op.count = b->hcount;
        op.dtype = h->dt;
        return send(r, &op, run, hd);
    }
    /* PowerSGD: plain for the first START steps */
    b->compressed = h->iter >= h->start && b->nmat > 0;
    if (!b->compressed)
        return send(r, &op, run, hd);
    if (b->ucount == 0)
        return DDP_OK;
    /* the uncompressed parts, gathered into one buffer (host memory) */
    size_t at = 0;
    for (int k = 0; k < b->npiece; k++) {
        memcpy(b->u + at, r->grads + b->piece[k].goff, b->piece[k].count * sizeof(float));
        at += b->piece[k].count;
    }
    op.recv = b->u;
    op.count = b->ucount;
    return send(r, &op, run, hd);
}

// ---------------------------------------------------------------------------
// finish: after every bucket was waited for

void comm_hook_orthogonalize(float *p, int n, int r)
{
    for (int k = 0; k < r; k++) {
        double ss = 0.0;
        for (int i = 0; i < n; i++)
            ss += (double)p[(size_t)i * r + k] * p[(size_t)i * r + k];
        float norm = (float)sqrt(ss);
        if (norm > 0.0f)
            for (int i = 0; i < n; i++)
                p[(size_t)i * r + k] /= norm;
        for (int j = k + 1; j < r; j++) { /* the later columns lose their part along k */
            double dot = 0.0;
            for (int i = 0; i < n; i++)
                dot += (double)p[(size_t)i * r + k] * p[(size_t)i * r + j];
            for (int i = 0; i < n; i++)
                p[(size_t)i * r + j] -= (float)dot * p[(size_t)i * r + k];
        }
    }
}

static int powersgd_bucket(comm_hook_t *h, reducer_t *r, int i)
{
    hbucket_t *b = &h->hb[i];
    backend_t *be = h->be;
    float *g = r->grads;
    /* the uncompressed parts' sums back into the arena */
    size_t at = 0;
    for (int k = 0; k < b->npiece; k++) {
        memcpy(g + b->piece[k].goff, b->u + at, b->piece[k].count * sizeof(float));
        at += b->piece[k].count;
    }
    if (!b->q_ready) { /* the first Q: normal, from a seed every rank shares */
        rng_t rng;
        rng_seed_stream(&rng, h->seed ^ 0x5067534744ULL, (uint64_t)i);
        for (size_t k = 0; k < b->qcount; k++)
            b->q[k] = (float)rng_normal(&rng);
        b->q_ready = true;
    }
    for (int j = 0; j < b->nmat; j++) {
        hmat_t *mt = &b->mat[j];
        float *M = g + mt->goff, *Q = b->q + mt->qoff, *P = b->p + mt->poff;
        size_t nm = (size_t)mt->n * mt->m;
        /* error feedback: M += error; keep M to measure the new error */
        TRY(backend_axpy(be, 1.0f, mt->err, M, nm));
        memcpy(mt->err, M, nm * sizeof(float));
        comm_hook_orthogonalize(Q, mt->m, mt->r); /* warm start: last step's Q, orthonormal */
        TRY(backend_gemm(be, false, false, mt->n, mt->r, mt->m, 1.0f, M, mt->m, Q, mt->r, 0.0f,
                         P, mt->r));
    }
    /* Why a blocking round: Q = M^T P needs every rank's P summed. */
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = b->p, .count = b->pcount,
                    .redop = REDOP_SUM, .tag = r->b[i].tag};
    TRY(comm_run(r->comm, &op, NULL));
    for (int j = 0; j < b->nmat; j++) {
        hmat_t *mt = &b->mat[j];
        float *M = g + mt->goff, *Q = b->q + mt->qoff, *P = b->p + mt->poff;
        comm_hook_orthogonalize(P, mt->n, mt->r);
        TRY(backend_gemm(be, true, false, mt->m, mt->r, mt->n, 1.0f, M, mt->m, P, mt->r, 0.0f,
                         Q, mt->r));
    }
    /* ... and the approximation needs every rank's Q summed (the sum is PyTorch's average:
     * the gradients already carry 1/world). */
    op.recv = b->q;
    op.count = b->qcount;
    TRY(comm_run(r->comm, &op, NULL));
    for (int j = 0; j < b->nmat; j++) {
        hmat_t *mt = &b->mat[j];
        float *M = g + mt->goff, *Q = b->q + mt->qoff, *P = b->p + mt->poff;
        TRY(backend_gemm(be, false, true, mt->n, mt->m, mt->r, 1.0f, P, mt->r, Q, mt->r, 0.0f, M,
                         mt->m));
        /* this rank's error, its share of what the approximation missed: M - P Q^T / world
         * (docs/modes.md says why PyTorch's M - P Q^T is divided here) */
        TRY(backend_axpy(be, -1.0f / (float)h->world, M, mt->err, (size_t)mt->n * mt->m));
    }
    return DDP_OK;
}

static int hook_finish(void *ctx, reducer_t *r)
{
    comm_hook_t *h = ctx;
    if (h->kind == HOOK_FP16 || h->kind == HOOK_BF16) {
        for (int i = 0; i < r->nb; i++)
            TRY(backend_cast16(h->be, h->dt, false, r->grads + r->b[i].off, h->h16 + h->hb[i].hoff,
                               r->b[i].count));
        return DDP_OK;
    }
    for (int i = 0; i < r->nb; i++)
        if (h->hb[i].compressed)
            TRY(powersgd_bucket(h, r, i));
    h->iter++;
    return DDP_OK;
}

static double hook_bytes(const void *ctx, const reducer_t *r, int i)
{
    const comm_hook_t *h = ctx;
    const hbucket_t *b = &h->hb[i];
    if (h->kind == HOOK_FP16 || h->kind == HOOK_BF16)
        return (double)b->hcount * sizeof(uint16_t);
    if (!b->compressed)
        return (double)r->b[i].count * sizeof(float);
    return (double)(b->ucount + b->pcount + b->qcount) * sizeof(float);
}

static const bucket_ops_t hook_ops = {.launch = hook_launch, .finish = hook_finish,
                                      .bytes = hook_bytes};
