/* tests/gpu/test_comm_nccl.c: comm_nccl.c on real GPUs (run by
 * tests/gpu/check.sh, which builds it against build/release/libddpbench.a;
 * it needs a GPU, NCCL, and comm.c from the DDP work for the segment).
 *
 * One rank: every collective with the semantics of comm.h (in place or not,
 * count 0, barrier, handles, spans).  Two ranks on one GPU cannot use NCCL,
 * so the failure paths use a group of two where only rank 0 shows up: the
 * non-blocking init must give up at --timeout, or at once when the group is
 * aborted, never hang.  With two GPUs, two ranks (threads) all-reduce,
 * broadcast and all-gather for real. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "device/backend.h"
#include "comm/comm_impl.h" /* comm_nccl_create: the NCCL implementation by itself */
#include "measure/timing.h"

static void need_gpus(int n)
{
    char why[ERR_LEN] = "";
    int have = backend_cuda_probe(why);
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

static int run_op(comm_t *c, comm_op_t op, comm_span_t *span)
{
    comm_handle_t h = 0;
    int rc = comm_launch(c, &op, &h);
    if (rc == DDP_OK)
        rc = comm_wait(c, h, span);
    return rc;
}

Test(comm_nccl, one_rank_every_collective)
{
    need_gpus(1);
    char err[ERR_LEN] = "";
    backend_t *be;
    comm_seg_t *seg;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(comm_seg_create(&seg, 1, 0, err), DDP_OK, "%s", err);
    comm_args_t a = {COMM_NCCL, 1, 0, be, seg, 30.0};
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
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_REDUCE, NULL, buf, N, REDOP_AVG, 0, "bucket 0"}, &sp),
                 DDP_OK, "%s", comm_last_error(c));
    download(be, got, buf, N);
    cr_assert_arr_eq(got, h, sizeof h, "in-place average over one rank");
    cr_assert(sp.start_s > 0.0 && sp.end_s >= sp.start_s, "span %f..%f", sp.start_s, sp.end_s);
    cr_assert(sp.end_s <= now_s() + 1e-3, "a span ends before the wait returns");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_REDUCE, buf, out, N, REDOP_SUM, 0, NULL}, NULL), DDP_OK);
    download(be, got, out, N);
    cr_assert_arr_eq(got, h, sizeof h, "out-of-place sum over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_BROADCAST, NULL, buf, N, REDOP_SUM, 0, NULL}, NULL), DDP_OK);
    cr_assert_eq(run_op(c, (comm_op_t){COLL_REDUCE, buf, out, N, REDOP_SUM, 0, NULL}, NULL), DDP_OK);
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_GATHER, buf, gat, N, REDOP_SUM, 0, NULL}, NULL), DDP_OK);
    download(be, got, gat, N);
    cr_assert_arr_eq(got, h, sizeof h, "all-gather over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_REDUCE_SCATTER, buf, out, N, REDOP_SUM, 0, NULL}, NULL),
                 DDP_OK, "%s", comm_last_error(c));
    download(be, got, out, N);
    cr_assert_arr_eq(got, h, sizeof h, "reduce-scatter over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_REDUCE_SCATTER, NULL, buf, N, REDOP_AVG, 0, NULL}, NULL),
                 DDP_OK, "in place: %s", comm_last_error(c));
    cr_assert_eq(comm_run(c, &(comm_op_t){COLL_ALL_REDUCE, NULL, buf, N, REDOP_SUM, 0, NULL}, NULL),
                 DDP_OK, "run: %s", comm_last_error(c));
    download(be, got, buf, N);
    cr_assert_arr_eq(got, h, sizeof h, "run: the identity over one rank");
    cr_assert_eq(run_op(c, (comm_op_t){COLL_BARRIER, NULL, NULL, 0, REDOP_SUM, 0, NULL}, NULL), DDP_OK);
    cr_assert_eq(run_op(c, (comm_op_t){COLL_ALL_REDUCE, NULL, buf, 0, REDOP_SUM, 0, NULL}, NULL), DDP_OK,
                 "count 0 is a no-op");

    /* Many launches, one wait for the last: all complete; handles count up. */
    comm_handle_t h1 = 0, hk = 0;
    comm_op_t op = {COLL_ALL_REDUCE, NULL, buf, N, REDOP_SUM, 0, "bucket"};
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

Test(comm_nccl, a_missing_peer_times_out_instead_of_hanging)
{
    need_gpus(1);
    char err[ERR_LEN] = "";
    backend_t *be;
    comm_seg_t *seg;
    cr_assert_eq(backend_cuda_create(&be, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(comm_seg_create(&seg, 2, 0, err), DDP_OK, "%s", err);
    comm_args_t a = {COMM_NCCL, 2, 0, be, seg, 3.0}; /* rank 1 never comes */
    comm_t *c = NULL;
    double t0 = now_s();
    int rc = comm_nccl_create(&c, &a, err);
    double took = now_s() - t0;
    cr_assert_eq(rc, DDP_ERR_RUNTIME);
    cr_assert_null(c);
    cr_assert(strstr(err, "timed out") && strstr(err, "did not arrive"), "message: %s", err);
    cr_assert(took >= 2.5 && took < 20.0, "gave up after %.1f s (timeout 3 s)", took);
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

Test(comm_nccl, an_abort_stops_a_waiting_init_at_once)
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
    comm_args_t a = {COMM_NCCL, 2, 0, be, seg, 60.0};
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

Test(comm_nccl, needs_a_cuda_backend)
{
    char err[ERR_LEN] = "";
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    comm_args_t a = {COMM_NCCL, 1, 0, be, NULL, 1.0};
    comm_t *c = NULL;
    cr_assert_eq(comm_nccl_create(&c, &a, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--backend cuda"), "message: %s", err);
    backend_destroy(be);
}

// ---------------------------------------------------------------------------
// two ranks on two GPUs, one thread each

typedef struct {
    int rank;
    comm_seg_t *seg;
    float got_avg[64], got_bcast[64], got_gather[128], got_rs[32];
    int rc;
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
    comm_args_t a = {COMM_NCCL, 2, r->rank, be, r->seg, 30.0};
    if ((r->rc = comm_nccl_create(&c, &a, r->err)) != DDP_OK)
        goto out;
    for (int i = 0; i < 64; i++)
        h[i] = (float)(r->rank + 1) * (float)i + 0.1f; /* rank 0: i + .1, rank 1: 2i + .1 */
    buf = backend_alloc(be, sizeof h);
    gat = backend_alloc(be, 2 * sizeof h);
    backend_h2d(be, buf, h, sizeof h);
    comm_op_t ops[] = {
        {COLL_ALL_GATHER, buf, gat, 64, REDOP_SUM, 0, NULL}, /* each rank's own values */
        {COLL_ALL_REDUCE, NULL, buf, 64, REDOP_AVG, 0, "bucket 0"},
    };
    for (int i = 0; i < 2 && r->rc == DDP_OK; i++)
        r->rc = run_op(c, ops[i], NULL);
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_avg, buf, sizeof h);
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_gather, gat, 2 * sizeof h);
    backend_h2d(be, buf, h, sizeof h);
    if (r->rc == DDP_OK)
        r->rc = run_op(c, (comm_op_t){COLL_BROADCAST, NULL, buf, 64, REDOP_SUM, 1, NULL}, NULL);
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_bcast, buf, sizeof h);
    /* reduce-scatter in place: rank q keeps block q (32 floats) of the sum */
    backend_h2d(be, buf, h, sizeof h);
    if (r->rc == DDP_OK)
        r->rc = run_op(c, (comm_op_t){COLL_REDUCE_SCATTER, NULL, buf + 32 * r->rank, 32, REDOP_SUM,
                                      0, NULL},
                       NULL);
    if (r->rc == DDP_OK)
        r->rc = backend_d2h(be, r->got_rs, buf + 32 * r->rank, sizeof r->got_rs);
    if (r->rc != DDP_OK && !r->err[0])
        err_set(r->err, r->rc, "%s / %s", comm_last_error(c), backend_last_error(be));
out:
    if (buf)
        backend_free(be, buf);
    if (gat)
        backend_free(be, gat);
    if (c)
        comm_destroy(c);
    backend_destroy(be);
    return NULL;
}

Test(comm_nccl, two_ranks_on_two_gpus)
{
    need_gpus(2);
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, 2, 0, err), DDP_OK, "%s", err);
    rank_t r[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].rank = i;
        r[i].seg = seg;
        cr_assert_eq(pthread_create(&th[i], NULL, rank_main, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(r[i].rc, DDP_OK, "rank %d: %s", i, r[i].err);
    for (int k = 0; k < 64; k++) {
        float want = ((float)k + 0.1f + 2.0f * (float)k + 0.1f) / 2.0f;
        cr_assert(fabsf(r[0].got_avg[k] - want) <= 1e-5f * fmaxf(1.0f, want), "avg[%d] = %g, want %g", k,
                  r[0].got_avg[k], want);
        cr_assert_eq(r[1].got_bcast[k], 2.0f * (float)k + 0.1f, "broadcast from rank 1");
        cr_assert_eq(r[0].got_bcast[k], r[1].got_bcast[k]);
        cr_assert_eq(r[0].got_gather[k], (float)k + 0.1f, "all-gather: rank 0's block");
        cr_assert_eq(r[0].got_gather[64 + k], 2.0f * (float)k + 0.1f, "all-gather: rank 1's block");
        float sum = ((float)k + 0.1f) + (2.0f * (float)k + 0.1f);
        cr_assert(fabsf(r[k / 32].got_rs[k % 32] - sum) <= 1e-5f * fmaxf(1.0f, sum),
                  "reduce-scatter: element %d is %g, want %g", k, r[k / 32].got_rs[k % 32], sum);
    }
    cr_assert_arr_eq(r[0].got_avg, r[1].got_avg, sizeof r[0].got_avg, "both ranks, the same bits");
    cr_assert_arr_eq(r[0].got_gather, r[1].got_gather, sizeof r[0].got_gather);
    comm_seg_free(seg);
}
