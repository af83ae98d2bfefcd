/* ddp/commbench.c: the collectives alone (--mode comm, and what --predict measures), as
 * nccl-tests measures them, on DDP's process model and comm (docs/modes.md says the
 * procedure and the check).  Each rank writes its times and wrong counts into its slot; the
 * reporting process takes the slowest rank's time and the sum of the wrong counts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/fault.h"
#include "common/comm/comm.h"
#include "common/measure/collperf.h"
#include "ddp/launch.h"

/* --coll's bits are comm.h's kinds (config.h numbers them the same way). */
_Static_assert(COLL_BROADCAST == 0 && COLL_ALL_REDUCE == 1 && COLL_REDUCE == 2 &&
                   COLL_ALL_GATHER == 3 && COLL_REDUCE_SCATTER == 4,
               "--coll bits follow coll_kind_t");

/* The order the tables come in (nccl-tests' all_reduce_perf first). */
static const int coll_order[] = {COLL_ALL_REDUCE, COLL_BROADCAST, COLL_REDUCE_SCATTER,
                                 COLL_ALL_GATHER, COLL_REDUCE};

/* What one rank measured, in the area after the rank records. */
typedef struct {
    double time_s[COLLPERF_MAX_COLLS][COLLPERF_MAX_SIZES][2];
    long wrong[COLLPERF_MAX_COLLS][COLLPERF_MAX_SIZES][2];
} rank_perf_t;

/* The plan every rank and the supervisor share: collectives and sizes. */
static void plan(const config_t *cfg, int world, collperf_t *out)
{
    memset(out, 0, sizeof *out);
    out->world = world;
    out->backend = cfg->backend;
    out->comm = comm_resolve(cfg->comm, cfg->backend);
    for (int i = 0; i < world; i++)
        out->devices[i] = cfg->gpus[i];
    out->iters = cfg->iters;
    out->warmup_iters = cfg->warmup_iters;
    for (size_t k = 0; k < sizeof coll_order / sizeof *coll_order; k++) {
        int kind = coll_order[k];
        if (!(cfg->colls & (1u << kind)))
            continue;
        collperf_coll_t *c = &out->coll[out->ncoll++];
        c->kind = kind;
        static const char *const names[] = {"broadcast", "all-reduce", "reduce", "all-gather",
                                            "reduce-scatter"};
        snprintf(c->name, sizeof c->name, "%s", names[kind]);
        /* split collectives move count floats per rank block: whole blocks only */
        bool split = kind == COLL_ALL_GATHER || kind == COLL_REDUCE_SCATTER;
        c->bus_factor = kind == COLL_ALL_REDUCE ? 2.0 * (world - 1) / world
                      : split                   ? (double)(world - 1) / world
                                                : 1.0;
        long per = split ? (long)sizeof(float) * world : (long)sizeof(float);
        double b = (double)(cfg->min_bytes > 0 ? cfg->min_bytes : 1);
        long last = -1;
        while (b <= (double)cfg->max_bytes + 0.5 && c->npoints < COLLPERF_MAX_SIZES) {
            long count = (long)b / per;
            if (count < 1)
                count = 1;
            long bytes = count * per;
            if (bytes != last) { /* small sizes may round to the same count */
                c->pt[c->npoints++] = (collperf_point_t){.bytes = bytes, .count = count};
                last = bytes;
            }
            if (cfg->step_factor <= 1.0 || cfg->min_bytes == cfg->max_bytes)
                break;
            b *= cfg->step_factor;
        }
    }
}

// ---------------------------------------------------------------------------
// one rank

/* Rank q's input element j: a small integer, so sums are exact. */
static float pattern(int q, long j) { return (float)((int)((j * 7 + q * 13) % 61) - 30); }

typedef struct {
    const config_t *cfg;
    int rank, world;
    backend_t *be;
    comm_t *comm;
    float *sbuf, *rbuf;      /* device buffers, max_bytes (and whole blocks) each */
    float *host;             /* host scratch of the same size */
    size_t cap;              /* floats in each */
    char err[ERR_LEN];
} cb_rank_t;

/* The op of collective kind at count floats, and how many floats each side
 * of it spans (input on this rank, output on this rank). */
static comm_op_t make_op(cb_rank_t *k, int kind, long count, int place, size_t *in_n,
                         size_t *out_n, float **in, float **out)
{
    size_t n = (size_t)count, w = (size_t)k->world, r = (size_t)k->rank;
    comm_op_t op = {.kind = (coll_kind_t)kind, .count = n, .redop = REDOP_SUM, .root = 0};
    bool inplace = place == COLLPERF_IN_PLACE;
    switch (kind) {
    case COLL_ALL_GATHER:
        *in_n = n, *out_n = n * w;
        *out = k->rbuf;
        *in = inplace ? k->rbuf + r * n : k->sbuf;
        break;
    case COLL_REDUCE_SCATTER:
        *in_n = n * w, *out_n = n;
        *in = inplace ? k->rbuf : k->sbuf;
        *out = inplace ? k->rbuf + r * n : k->rbuf;
        break;
    default:
        *in_n = *out_n = n;
        *out = k->rbuf;
        *in = inplace ? k->rbuf : k->sbuf;
    }
    op.recv = *out;
    op.send = inplace ? NULL : *in;
    return op;
}

/* The exact result element i of this rank's output. */
static float expected(const cb_rank_t *k, int kind, long count, size_t i)
{
    int w = k->world;
    float s = 0.0f;
    switch (kind) {
    case COLL_BROADCAST:
        return pattern(0, (long)i);
    case COLL_ALL_GATHER:
        return pattern((int)(i / (size_t)count), (long)(i % (size_t)count));
    case COLL_REDUCE_SCATTER:
        for (int q = 0; q < w; q++)
            s += pattern(q, (long)k->rank * count + (long)i);
        return s;
    default: /* all-reduce, reduce */
        for (int q = 0; q < w; q++)
            s += pattern(q, (long)i);
        return s;
    }
}

static int fill(cb_rank_t *k, float *in, size_t n, bool plant)
{
    for (size_t j = 0; j < n; j++)
        k->host[j] = pattern(k->rank, (long)j);
    if (plant && n > 0)
        k->host[n / 2] += 1.0f; /* a wrong addend: the sum at n/2 is off by one */
    return backend_h2d(k->be, in, k->host, n * sizeof(float));
}

static int coll_err(cb_rank_t *k, int rc, const char *what, long bytes)
{
    if (rc == DDP_OK)
        return DDP_OK;
    return err_set(k->err, rc, "%s of %ld bytes: %s", what, bytes, comm_last_error(k->comm));
}

static int dev_err(cb_rank_t *k, int rc) { return backend_check(k->be, rc, NULL, k->err); }

static int measure(cb_rank_t *k, const collperf_coll_t *c, int pi, int place, double *time_s,
                   long *wrong)
{
    const collperf_point_t *p = &c->pt[pi];
    /* the fault tests of --mode comm itself, at size index pi (not when
     * training measures its collectives: those faults are training's) */
    fault_kind_t f = k->cfg->mode == MODE_COMM ? fault_at(k->rank, pi) : FAULT_NONE;
    if (f == FAULT_ERROR)
        return err_set(k->err, DDP_ERR_RUNTIME, "injected fault at size %ld", p->bytes);
    fault_raise(f); /* kill, exit, stall: never returns */
    size_t in_n, out_n;
    float *in, *out;
    comm_op_t op = make_op(k, c->kind, p->count, place, &in_n, &out_n, &in, &out);
    TRY(dev_err(k, fill(k, in, in_n, false)));
    for (long i = 0; i < k->cfg->warmup_iters; i++)
        TRY(coll_err(k, comm_launch(k->comm, &op, NULL), c->name, p->bytes));
    TRY(coll_err(k, comm_wait_all(k->comm), c->name, p->bytes));
    /* Why a barrier: every rank starts its timed loop together, so the
     * first op does not absorb another rank's late start. */
    TRY(coll_err(k, comm_barrier(k->comm), "barrier", 0));
    double t0 = now_s(), best = INFINITY;
    for (long i = 0; i < k->cfg->iters; i++) {
        TRY(coll_err(k, comm_launch(k->comm, &op, NULL), c->name, p->bytes));
        if (k->cfg->coll_quickest) { /* each op alone: a peer off its core moves a few */
            TRY(coll_err(k, comm_wait_all(k->comm), c->name, p->bytes));
            TRY(dev_err(k, backend_sync(k->be)));
            best = fmin(best, now_s() - t0);
            t0 = now_s();
        }
    }
    TRY(coll_err(k, comm_wait_all(k->comm), c->name, p->bytes));
    TRY(dev_err(k, backend_sync(k->be)));
    *time_s = k->cfg->coll_quickest ? best : (now_s() - t0) / (double)k->cfg->iters;

    /* the check: fresh inputs, one op, every element of the result */
    bool plant = fault_at(k->rank, pi) == FAULT_SUM;
    TRY(dev_err(k, fill(k, in, in_n, plant)));
    TRY(coll_err(k, comm_run(k->comm, &op, NULL), c->name, p->bytes));
    TRY(dev_err(k, backend_d2h(k->be, k->host, out, out_n * sizeof(float))));
    long bad = 0;
    bool has_result = c->kind != COLL_REDUCE || k->rank == 0;
    for (size_t i = 0; has_result && i < out_n; i++)
        if (k->host[i] != expected(k, c->kind, p->count, i))
            bad++;
    *wrong = bad;
    return DDP_OK;
}

static int cb_rank_body(const config_t *cfg, const ddp_env_t *env, void *ctx)
{
    collperf_t *pl = ctx;
    int rank = env->rank;
    ddp_area_t *area = env->area;
    ddp_rank_rec_t *rec = &area->rank[rank];
    rank_perf_t *mine = (rank_perf_t *)((char *)area + area->off_trace) + rank;
    cb_rank_t k = {.cfg = cfg, .rank = rank, .world = pl->world};
    rec->state = RANK_RUNNING;
    rec->stats.device_id = cfg->gpus[rank];
    /* floats each buffer needs: the largest size, in whole blocks */
    for (int i = 0; i < pl->ncoll; i++)
        for (int j = 0; j < pl->coll[i].npoints; j++) {
            size_t n = (size_t)pl->coll[i].pt[j].bytes / sizeof(float);
            if (n > k.cap)
                k.cap = n;
        }
    int rc = backend_create(&k.be, cfg->backend, cfg->gpus[rank], 1, k.err);
    if (rc == DDP_OK) {
        comm_args_t a = {cfg->comm, pl->world, rank,          k.be,
                         env->seg,  cfg->timeout_s, 0.0, env->exchange, NULL};
        rc = comm_create(&k.comm, &a, k.err);
    }
    if (rc == DDP_OK) {
        k.sbuf = backend_alloc_for(k.be, k.cap * sizeof(float), MEM_COMM);
        k.rbuf = backend_alloc_for(k.be, k.cap * sizeof(float), MEM_COMM);
        k.host = malloc(k.cap * sizeof(float));
        if (!k.sbuf || !k.rbuf || !k.host)
            rc = err_set(k.err, DDP_ERR_RUNTIME, "out of memory for %zu bytes of buffers",
                         3 * k.cap * sizeof(float));
    }
    for (int i = 0; rc == DDP_OK && i < pl->ncoll; i++)
        for (int j = 0; rc == DDP_OK && j < pl->coll[i].npoints; j++)
            for (int place = 0; rc == DDP_OK && place < 2 - cfg->coll_quickest; place++)
                rc = measure(&k, &pl->coll[i], j, place, &mine->time_s[i][j][place],
                             &mine->wrong[i][j][place]);
    ddp_rank_end(env, k.comm, rc, k.err);
    free(k.host);
    if (k.be) {
        backend_free(k.be, k.sbuf);
        backend_free(k.be, k.rbuf);
    }
    comm_destroy(k.comm);
    backend_destroy(k.be);
    return rc;
}

// ---------------------------------------------------------------------------
// the supervisor's side

int ddp_comm_bench(const config_t *cfg, collperf_t *out, char *err)
{
    int world = cfg->ngpus;
    if (world < 1 || world > MAX_DEVICES)
        return err_set(err, DDP_ERR_INPUT, "--gpus: --mode comm runs 1..%d ranks, got %d",
                       MAX_DEVICES, world);
    comm_kind_t kind = comm_resolve(cfg->comm, cfg->backend);
    if (kind == COMM_NCCL && !comm_nccl_available())
        return err_set(err, DDP_ERR_INPUT,
                       "--comm nccl: this ddpbench was built without NCCL (use --comm shm)");
    plan(cfg, world, out);
    /* the area: rank records, then each rank's measurements */
    size_t head = (ddp_area_layout(NULL, world, 0, 0, 0) + 63) & ~(size_t)63;
    size_t bytes = head + (size_t)world * sizeof(rank_perf_t);
    ddp_group_t *g;
    TRY(ddp_group_open(&g, cfg, bytes, err));
    ddp_area_t *area = ddp_group_area(g);
    ddp_area_layout(area, world, 0, 0, 0);
    area->off_trace = head; /* no recorders: the slots after the records are ours */
    area->trace_stride = sizeof(rank_perf_t);
    int rc = ddp_group_run(g, cb_rank_body, out, err);
    if (rc == DDP_OK && ddp_group_reports(g)) { /* under mpirun: rank 0, which gathered them */
        const rank_perf_t *rp = (const rank_perf_t *)((char *)area + head);
        for (int i = 0; i < out->ncoll; i++)
            for (int j = 0; j < out->coll[i].npoints; j++)
                for (int place = 0; place < 2; place++) {
                    collperf_point_t *p = &out->coll[i].pt[j];
                    for (int r = 0; r < world; r++) {
                        p->time_s[place] = fmax(p->time_s[place], rp[r].time_s[i][j][place]);
                        p->wrong[place] += rp[r].wrong[i][j][place];
                    }
                    out->wrong_total += p->wrong[place];
                }
    }
    ddp_group_close(g);
    return rc;
}
