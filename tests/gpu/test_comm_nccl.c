/* tests/gpu/test_comm_nccl.c: comm_nccl.c on GPUs (make builds it wherever NCCL
 * is built, tests/gpu/check.sh runs it on real GPUs, tests/cuda_emu/run.sh on
 * the emulated GPU and NCCL).
 *
 * One rank: every collective with the semantics of comm.h (in place or not,
 * count 0, barrier, handles, spans once the device has run them).  Two ranks
 * on one GPU cannot use NCCL, so the init failure paths use a group of two
 * where only rank 0 shows up: the non-blocking init must give up at the init
 * bound (not --timeout), or at once when the group is aborted, never hang.
 * With two GPUs, two ranks (threads) all-reduce, broadcast and all-gather for
 * real, and a rank whose peer never launches its all-reduce has its next host
 * wait fail at --timeout; with three, AVG is the exact quotient of the sum.
 * Every test has its own time limit, so a hang inside NCCL fails one test. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/device/backend.h"
#include "common/comm/comm_impl.h" /* comm_nccl_create: the NCCL implementation by itself */
#include "common/measure/timing.h"
#include "tests/unit/cuda_probe_once.h"

static void need_gpus(int n)
{
    char why[ERR_LEN] = "";
    int have = cuda_probe_once(why);
    if (have <= 0)
        cr_skip_test("no GPU: %s", why);
    if (have < n)
        cr_skip_test("needs %d GPUs, %d visible", n, have);
}

static float *upload(backend_t *be, const float *h, size_t n)
{
    float *d = backend_alloc(be, n * sizeof(float));
    cr_assert_not_null(d);
    cr_assert_eq(backend_h2d(be, d, h, n * sizeof(float)), DDP_OK);
    cr_assert_eq(backend_sync(be), DDP_OK);
    return d;
}

static void download(backend_t *be, float *h, const float *d, size_t n)
{
    cr_assert_eq(backend_d2h(be, h, d, n * sizeof(float)), DDP_OK, "%s", backend_last_error(be));
}

/* Launch, wait, and (span not NULL) the op's span once the device has run it. */
static int run_op(comm_t *c, comm_op_t op, comm_span_t *span)
{
    comm_handle_t h = 0;
    int rc = comm_launch(c, &op, &h);
    if (rc == DDP_OK)
        rc = comm_wait(c, h, NULL);
    if (rc == DDP_OK && span) {
        /* comm_wait made the device wait, not the host: a span is known
         * once the device work after the wait has run */
        rc = backend_sync(c->be);
        comm_span(c, h, span);
    }
    return rc;
}

static comm_args_t nccl_args(int world, int rank, backend_t *be, comm_seg_t *seg, double timeout,
                             double init_timeout)
{
    return (comm_args_t){.kind = COMM_NCCL, .world = world, .rank = rank, .be = be, .seg = seg,
                         .timeout_s = timeout, .init_timeout_s = init_timeout};
}

Test(comm_nccl, one_rank_every_collective, .timeout = 60)
{
    need_gpus(1);
    char err[ERR_LEN] = "";
    backend_t *be;
    comm_seg_t *seg;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(comm_seg_create(&seg, 1, 0, err), DDP_OK, "%s", err);
    comm_args_t a = nccl_args(1, 0, be, seg, 30.0, 0.0);
    comm_t *c;
    cr_assert_eq(comm_nccl_create(&c, &a, err), DDP_OK, "%s", err);

    enum { N = 1000 };
    float h[N], got[2 * N];
    for (int i = 0; i < N; i++)
        h[i] = (float)i * 0.25f - 7.0f;
    float *buf = upload(be, h, N), *out = upload(be, h, N);
    float *gat = backend_alloc(be, 2 * N * sizeof(float));

    comm_span_t sp;
    /* With one rank, sum and average are the identity, in place or not. */
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_REDUCE, NULL, buf, N, REDOP_AVG, 0, "bucket 0", DTYPE_F32}, &sp),
                 DDP_OK, "%s", comm_last_error(c));
    download(be, got, buf, N);
    cr_assert_arr_eq(got, h, sizeof h, "in-place average over one rank");
    cr_assert(sp.start_s > 0.0 && sp.end_s >= sp.start_s, "span %f..%f", sp.start_s, sp.end_s);
    cr_assert(sp.end_s <= now_s() + 1e-3, "a span ends before the wait returns");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_REDUCE, buf, out, N, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL), DDP_OK);
    download(be, got, out, N);
    cr_assert_arr_eq(got, h, sizeof h, "out-of-place sum over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_BROADCAST, NULL, buf, N, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL), DDP_OK);
    cr_assert_eq(run_op(c, (comm_op_t){COLL_REDUCE, buf, out, N, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL), DDP_OK);
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_GATHER, buf, gat, N, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL), DDP_OK);
    download(be, got, gat, N);
    cr_assert_arr_eq(got, h, sizeof h, "all-gather over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_REDUCE_SCATTER, buf, out, N, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL),
                 DDP_OK, "%s", comm_last_error(c));
    download(be, got, out, N);
    cr_assert_arr_eq(got, h, sizeof h, "reduce-scatter over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_REDUCE_SCATTER, NULL, buf, N, REDOP_AVG, 0, NULL, DTYPE_F32}, NULL),
                 DDP_OK, "in place: %s", comm_last_error(c));
    cr_assert_eq(comm_run(c, &(comm_op_t){COLL_ALL_REDUCE, NULL, buf, N, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL),
                 DDP_OK, "run: %s", comm_last_error(c));
    download(be, got, buf, N);
    cr_assert_arr_eq(got, h, sizeof h, "run: the identity over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_BARRIER, NULL, NULL, 0, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL), DDP_OK);
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_REDUCE, NULL, buf, 0, REDOP_SUM, 0, NULL, DTYPE_F32}, NULL), DDP_OK,
                 "count 0 is a no-op");

    /* Many launches, one wait for the last: all complete; handles count up. */
    comm_handle_t h1 = 0, hk = 0;
    comm_op_t op = {COLL_ALL_REDUCE, NULL, buf, N, REDOP_SUM, 0, "bucket", DTYPE_F32};
    cr_assert_eq(comm_launch(c, &op, &h1), DDP_OK);
    for (int i = 0; i < 300; i++) /* more than the comm's event slots */
        cr_assert_eq(comm_launch(c, &op, &hk), DDP_OK, "launch %d: %s", i, comm_last_error(c));
    cr_assert_eq(hk, h1 + 300);
    cr_assert_eq(comm_wait(c, hk, NULL), DDP_OK, "%s", comm_last_error(c));
    cr_assert_eq(comm_wait(c, h1, NULL), DDP_OK, "an old handle after a newer one");
    cr_assert_eq(comm_wait(c, 0, NULL), DDP_OK);
    download(be, got, buf, N);
    cr_assert_arr_eq(got, h, sizeof h);

    backend_free(be, buf);
    backend_free(be, out);
    backend_free(be, gat);
    comm_destroy(c);
    comm_seg_free(seg);
    backend_destroy(be);
}

Test(comm_nccl, a_missing_peer_fails_init_at_the_init_bound, .timeout = 60)
{
    need_gpus(1);
    char err[ERR_LEN] = "";
    backend_t *be;
    comm_seg_t *seg;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(comm_seg_create(&seg, 2, 0, err), DDP_OK, "%s", err);
    /* rank 1 never comes; --timeout is short, joining has its own bound */
    comm_args_t a = nccl_args(2, 0, be, seg, 0.5, 3.0);
    comm_t *c = NULL;
    double t0 = now_s();
    int rc = comm_nccl_create(&c, &a, err);
    double took = now_s() - t0;
    cr_assert_eq(rc, DDP_ERR_RUNTIME);
    cr_assert_null(c);
    cr_assert(strstr(err, "NCCL init did not complete within 3 s") && strstr(err, "never joined"),
              "message: %s", err);
    cr_assert(took >= 2.5 && took < 20.0, "gave up after %.1f s (init bound 3 s, --timeout 0.5 s)",
              took);
    cr_assert(comm_seg_aborted(seg, NULL), "the group must be told");
    comm_seg_free(seg);
    backend_destroy(be);
}

typedef struct {
    comm_seg_t *seg;
    double delay_s;
} aborter_t;

static void *abort_later(void *arg)
{
    aborter_t *a = arg;
    usleep((useconds_t)(a->delay_s * 1e6));
    comm_seg_abort(a->seg, 1, "injected by the test");
    return NULL;
}

Test(comm_nccl, an_abort_stops_a_waiting_init_at_once, .timeout = 60)
{
    need_gpus(1);
    char err[ERR_LEN] = "";
    backend_t *be;
    comm_seg_t *seg;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(comm_seg_create(&seg, 2, 0, err), DDP_OK, "%s", err);
    aborter_t ab = {seg, 1.0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, abort_later, &ab), 0);
    comm_args_t a = nccl_args(2, 0, be, seg, 60.0, 60.0);
    comm_t *c = NULL;
    double t0 = now_s();
    int rc = comm_nccl_create(&c, &a, err);
    double took = now_s() - t0;
    pthread_join(th, NULL);
    cr_assert_eq(rc, DDP_ERR_RUNTIME);
    cr_assert(strstr(err, "aborted by rank 1") && strstr(err, "injected"), "message: %s", err);
    cr_assert(took < 15.0, "took %.1f s to notice the abort (timeout 60 s)", took);
    comm_seg_free(seg);
    backend_destroy(be);
}

Test(comm_nccl, needs_a_cuda_backend, .timeout = 30)
{
    char err[ERR_LEN] = "";
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    comm_args_t a = nccl_args(1, 0, be, NULL, 1.0, 0.0);
    comm_t *c = NULL;
    cr_assert_eq(comm_nccl_create(&c, &a, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--backend cuda"), "message: %s", err);
    backend_destroy(be);
}

// ---------------------------------------------------------------------------
// ranks on their own GPUs, one thread each

typedef struct {
    int rank, world;
    comm_seg_t *seg;
    bool idle;          /* joins, then launches nothing (a stuck peer) */
    double timeout_s;
    float got_avg[64], got_bcast[64], got_gather[3 * 64], got_rs[16];
    float got_graph[64];  /* three launches of a captured in-place sum */
    comm_span_t graph_span; /* the last launch's all-reduce */
    int changed_rc;     /* a replay whose collective changed (must fail) */
    int probe_rc, probe_refused_by; /* comm_graph_probe after it all */
    int rc;
    double took_s;      /* the stuck peer's partner: how long its sync took */
    char err[ERR_LEN];
} rank_t;

static void *rank_main(void *arg)
{
    rank_t *r = arg;
    backend_t *be = NULL;
    comm_t *c = NULL;
    float h[64], *buf = NULL, *gat = NULL;
    r->rc = backend_cuda_create(&be, r->rank, r->err);
    if (r->rc != DDP_OK)
        return NULL;
    comm_args_t a = nccl_args(r->world, r->rank, be, r->seg, r->timeout_s, 60.0);
    if ((r->rc = comm_nccl_create(&c, &a, r->err)) != DDP_OK)
        goto out;
    for (int i = 0; i < 64; i++) /* small whole numbers: every sum is exact, in any order */
        h[i] = (float)((r->rank + 1) * (i + 1));
    buf = backend_alloc(be, sizeof h);
    gat = backend_alloc(be, (size_t)r->world * sizeof h);
    backend_h2d(be, buf, h, sizeof h);
    if (r->idle) {
        /* Stay in the group until the partner has given up, then leave. */
        while (!comm_seg_aborted(r->seg, NULL))
            usleep(10000);
        goto out;
    }
    comm_op_t ops[] = {
        {COLL_ALL_GATHER, buf, gat, 64, REDOP_SUM, 0, NULL, DTYPE_F32}, /* each rank's own values */
        {COLL_ALL_REDUCE, NULL, buf, 64, REDOP_AVG, 0, "bucket 0", DTYPE_F32},
    };
    double t0 = now_s();
    for (int i = 0; i < 2 && r->rc == DDP_OK; i++)
        r->rc = run_op(c, ops[i], NULL);
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_avg, buf, sizeof h);
    r->took_s = now_s() - t0;
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_gather, gat, (size_t)r->world * sizeof h);
    backend_h2d(be, buf, h, sizeof h);
    if (r->rc == DDP_OK)
        r->rc = run_op(c, (comm_op_t){COLL_BROADCAST, NULL, buf, 64, REDOP_SUM, 1, NULL, DTYPE_F32}, NULL);
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_bcast, buf, sizeof h);
    /* reduce-scatter in place: rank q keeps block q (16 floats) of the sum */
    backend_h2d(be, buf, h, sizeof h);
    if (r->rc == DDP_OK)
        r->rc = run_op(c, (comm_op_t){COLL_REDUCE_SCATTER, NULL, buf + 16 * r->rank, 16, REDOP_SUM,
                                      0, NULL, DTYPE_F32},
                       NULL);
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_rs, buf + 16 * r->rank, sizeof r->got_rs);
    /* CUDA graphs: the in-place sum captured in a graph step (the comm
     * stream joined to the capture and back), then launched three times in
     * all: every launch sums again; the last one's span is timed.  Then a
     * step that queues another collective than the graph holds is refused. */
    backend_h2d(be, buf, h, sizeof h);
    comm_op_t sum = {COLL_ALL_REDUCE, NULL, buf, 64, REDOP_SUM, 0, "bucket 0", DTYPE_F32};
    comm_handle_t hg = 0;
    for (int i = 0; i < 3 && r->rc == DDP_OK; i++) {
        r->rc = backend_graph_begin(be, 0);
        if (r->rc == DDP_OK)
            r->rc = comm_launch(c, &sum, &hg);
        if (r->rc == DDP_OK)
            r->rc = comm_wait_all(c);
        int rc2 = backend_graph_end(be, 0, r->rc == DDP_OK);
        if (r->rc == DDP_OK)
            r->rc = rc2;
    }
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_graph, buf, sizeof h);
    if (r->rc == DDP_OK)
        comm_span(c, hg, &r->graph_span);
    if (r->rc == DDP_OK) {
        sum.count = 32;
        r->changed_rc = backend_graph_begin(be, 0);
        if (r->changed_rc == DDP_OK)
            r->changed_rc = comm_launch(c, &sum, &hg);
        if (r->changed_rc == DDP_OK)
            r->changed_rc = comm_wait_all(c);
        int rc2 = backend_graph_end(be, 0, r->changed_rc == DDP_OK);
        if (r->changed_rc == DDP_OK)
            r->changed_rc = rc2;
    }
    /* Whether NCCL captures (the start-up probe ddp's ranks run): every
     * rank captured, agreed, launched and summed; then an eager op still
     * runs, so the communicator is as it was. */
    if (r->rc == DDP_OK) {
        comm_graph_probe_t p;
        char perr[ERR_LEN] = "";
        r->probe_rc = comm_graph_probe(c, false, &p, perr);
        r->probe_refused_by = p.refused_by;
        if (r->probe_rc != DDP_OK || p.refused_by >= 0)
            err_set(r->err, 0, "probe: %s %s", perr, p.why);
        else
            r->probe_rc = run_op(c, (comm_op_t){COLL_BARRIER, NULL, NULL, 0, REDOP_SUM, 0, NULL,
                                                DTYPE_F32},
                                 NULL);
        if (r->probe_rc == DDP_OK)
            r->probe_rc = backend_sync(be);
    }
    if (r->rc != DDP_OK && !r->err[0])
        err_set(r->err, r->rc, "%s / %s", comm_last_error(c), backend_last_error(be));
out:
    if (buf)
        backend_free(be, buf);
    if (gat)
        backend_free(be, gat);
    /* the graph first: NCCL frees a communicator only once no CUDA graph
     * holds its captured collectives */
    backend_graph_reset(be);
    if (c)
        comm_destroy(c);
    backend_destroy(be);
    return NULL;
}

static void run_group(rank_t *r, int world, int idle_rank, double timeout_s)
{
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, world, 0, err), DDP_OK, "%s", err);
    pthread_t th[3];
    for (int i = 0; i < world; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].rank = i;
        r[i].world = world;
        r[i].seg = seg;
        r[i].idle = i == idle_rank;
        r[i].timeout_s = timeout_s;
        cr_assert_eq(pthread_create(&th[i], NULL, rank_main, &r[i]), 0);
    }
    for (int i = 0; i < world; i++)
        pthread_join(th[i], NULL);
    comm_seg_free(seg);
}

/* What every rank of a group of `world` must hold after rank_main. */
static void check_group(const rank_t *r, int world)
{
    for (int i = 0; i < world; i++)
        cr_assert_eq(r[i].rc, DDP_OK, "rank %d: %s", i, r[i].err);
    for (int k = 0; k < 64; k++) {
        /* AVG is the sum divided by world, not a sum of pre-divided terms
         * (ncclAvg): with whole numbers the sum is exact in any order, so the
         * quotient is exact too. */
        float sum = 0.0f;
        for (int q = 0; q < world; q++)
            sum += (float)((q + 1) * (k + 1));
        float want = sum / (float)world;
        cr_assert_eq(r[0].got_avg[k], want, "avg[%d] = %.9g, want %.9g (sum %.9g / %d)", k,
                     r[0].got_avg[k], want, sum, world);
        cr_assert_eq(r[0].got_bcast[k], (float)(2 * (k + 1)), "broadcast from rank 1");
        for (int q = 0; q < world; q++)
            cr_assert_eq(r[0].got_gather[q * 64 + k], (float)((q + 1) * (k + 1)),
                         "all-gather: rank %d's block", q);
    }
    for (int i = 0; i < world; i++) { /* the graph: 3 launches, world^2 x the sum */
        for (int k = 0; k < 64; k++) {
            float sum = 0.0f;
            for (int q = 0; q < world; q++)
                sum += (float)((q + 1) * (k + 1));
            cr_assert_eq(r[i].got_graph[k], sum * (float)(world * world),
                         "rank %d: a captured all-reduce launched 3 times: [%d] = %.9g, want %.9g",
                         i, k, r[i].got_graph[k], sum * (float)(world * world));
        }
        cr_assert(r[i].graph_span.end_s > 0.0 && r[i].graph_span.end_s >= r[i].graph_span.start_s,
                  "rank %d: the replayed all-reduce's span %f..%f", i, r[i].graph_span.start_s,
                  r[i].graph_span.end_s);
        cr_assert_eq(r[i].changed_rc, DDP_ERR_RUNTIME,
                     "rank %d: a replay that queued another collective was not refused", i);
        cr_assert(r[i].probe_rc == DDP_OK && r[i].probe_refused_by == -1,
                  "rank %d: the capture probe: rc %d, refused by %d: %s", i, r[i].probe_rc,
                  r[i].probe_refused_by, r[i].err);
    }
    for (int q = 0; q < world; q++) /* reduce-scatter: rank q holds block q of the sum */
        for (int k = 0; k < 16; k++) {
            float sum = 0.0f;
            for (int p = 0; p < world; p++)
                sum += (float)((p + 1) * (q * 16 + k + 1));
            cr_assert_eq(r[q].got_rs[k], sum, "reduce-scatter: rank %d element %d is %.9g, want %.9g",
                         q, k, r[q].got_rs[k], sum);
        }
    for (int i = 1; i < world; i++) {
        cr_assert_arr_eq(r[0].got_avg, r[i].got_avg, sizeof r[0].got_avg, "the same bits");
        cr_assert_arr_eq(r[0].got_bcast, r[i].got_bcast, sizeof r[0].got_bcast);
        cr_assert_arr_eq(r[0].got_gather, r[i].got_gather, (size_t)world * 64 * sizeof(float));
    }
}

Test(comm_nccl, two_ranks_on_two_gpus, .timeout = 90)
{
    need_gpus(2);
    rank_t r[2];
    run_group(r, 2, -1, 30.0);
    check_group(r, 2);
}

Test(comm_nccl, three_ranks_average_as_sum_over_world, .timeout = 90)
{
    need_gpus(3);
    rank_t r[3];
    run_group(r, 3, -1, 30.0);
    check_group(r, 3);
}

Test(comm_nccl, a_peer_that_never_launches_fails_the_next_host_wait, .timeout = 90)
{
    /* wait() makes the GPU wait, not the host: the watch the comm installs
     * on the backend is what turns the stuck all-gather into an error, at
     * --timeout, in the host wait that follows (the d2h). */
    need_gpus(2);
    rank_t r[2];
    run_group(r, 2, 1, 2.0);
    cr_assert_eq(r[0].rc, DDP_ERR_RUNTIME, "rank 0 must fail, not hang");
    cr_assert(strstr(r[0].err, "timed out in all-gather") && strstr(r[0].err, "did not arrive"),
              "message: %s", r[0].err);
    cr_assert(r[0].took_s >= 1.5 && r[0].took_s < 30.0, "gave up after %.1f s (--timeout 2 s)",
              r[0].took_s);
}
