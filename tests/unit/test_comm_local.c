/* tests/unit/test_comm_local.c: the in-process group (comm.h's
 * comm_local_group_create, DP's devices) against serial references, with a
 * thread per rank as DP has: broadcast (whole and sliced), scatter and
 * gather in torch.chunk's uneven blocks, reduce (whole, sliced, ranks that
 * add nothing) summed in rank order bit for bit, all-reduce, barrier, on
 * host memory and on the device path (host memory that says it is not: the
 * GPU's events and copy streams, run by the CPU backend), for 1 to 4
 * ranks; a root's early launch; the observer's waits and moves; an abort
 * that ends a wait; a post overwritten before it was read; what the group
 * refuses. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "common/comm/comm_local.h"
#include "common/device/backend_impl.h" /* a fake device: host memory taking the GPU path */
#include "tsan_criterion.h"

#define MAXR 4

typedef struct group group_t;
typedef int (*rank_fn)(group_t *g, int r, comm_t *c, char *msg);

struct group {
    int n;
    bool device;          /* the ranks' backends say they are not host memory */
    comm_local_group_t *grp;
    pthread_barrier_t leave; /* no rank frees its events while another may wait for them */
    rank_fn fn;
    void *ctx;
    int rc[MAXR];
    char msg[MAXR][ERR_LEN];
    int waited[MAXR], moves[MAXR];
    uint64_t bytes[MAXR];
};

typedef struct {
    group_t *g;
    int r;
} arg_t;

static void on_waited(void *ctx) { ((arg_t *)ctx)->g->waited[((arg_t *)ctx)->r]++; }
static int on_mark(void *ctx) { return (void)ctx, 0; }
static void on_moved(void *ctx, int mark, const comm_move_t *m)
{
    arg_t *a = ctx;
    cr_assert_eq(mark, 0);
    a->g->moves[a->r] += m->ops ? m->ops : 1;
    a->g->bytes[a->r] += m->bytes;
}

static void *rank_main(void *p)
{
    arg_t *a = p;
    group_t *g = a->g;
    backend_t *be = NULL;
    comm_t *c = NULL;
    char *msg = g->msg[a->r];
    int rc = backend_cpu_create(&be, a->r, 0, msg);
    if (rc == DDP_OK && g->device)
        be->host_visible = false;
    if (rc == DDP_OK)
        rc = comm_local_join(&c, g->grp, a->r, be, NULL, msg);
    if (rc == DDP_OK) {
        comm_local_observe(c, &(comm_observer_t){on_waited, on_mark, on_moved, a});
        rc = comm_local_sync(g->grp, a->r); /* every rank joined: the group knows its memory */
    }
    if (rc == DDP_OK)
        rc = g->fn(g, a->r, c, msg);
    if (rc != DDP_OK)
        comm_local_group_abort(g->grp);
    g->rc[a->r] = rc;
    pthread_barrier_wait(&g->leave);
    comm_destroy(c);
    backend_destroy(be);
    return NULL;
}

static void run_group(group_t *g, int n, bool device, rank_fn fn, void *ctx)
{
    char err[ERR_LEN];
    memset(g, 0, sizeof *g);
    g->n = n, g->device = device, g->fn = fn, g->ctx = ctx;
    cr_assert_eq(comm_local_group_create(&g->grp, n, err), DDP_OK, "%s", err);
    pthread_barrier_init(&g->leave, NULL, (unsigned)n);
    pthread_t t[MAXR];
    arg_t a[MAXR];
    for (int r = 0; r < n; r++) {
        a[r] = (arg_t){g, r};
        cr_assert_eq(pthread_create(&t[r], NULL, rank_main, &a[r]), 0);
    }
    for (int r = 0; r < n; r++)
        pthread_join(t[r], NULL);
    pthread_barrier_destroy(&g->leave);
    comm_local_group_free(g->grp);
}

static void assert_ok(const group_t *g)
{
    for (int r = 0; r < g->n; r++)
        cr_assert_eq(g->rc[r], DDP_OK, "rank %d of %d%s: %s", r, g->n,
                     g->device ? " (device path)" : "", g->msg[r]);
}

/* A float of rank r's data at i: distinct, not exactly summable. */
static float val(int r, size_t i)
{
    return 0.1f * (float)(r + 1) + 1e-3f * (float)(i % 977) / 3.0f;
}

// ---------------------------------------------------------------------------
// broadcast and reduce, whole and sliced

static const size_t SIZES[] = {1, 110, 4095, 4096, 20001}; /* both sides of COMM_LOCAL_SLICED */

static int bcast_reduce(group_t *g, int r, comm_t *c, char *msg)
{
    (void)g;
    for (size_t si = 0; si < sizeof SIZES / sizeof SIZES[0]; si++) {
        size_t n = SIZES[si];
        float *buf = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            buf[i] = val(r, i);
        /* the last rank of 3 or more takes no part: its buffer stays, adds nothing */
        bool idle = g->n >= 3 && r == g->n - 1;
        comm_op_t b = {.kind = COLL_BROADCAST, .recv = buf, .count = n, .root = 0, .idle = idle};
        int rc = comm_run(c, &b, NULL);
        for (size_t i = 0; i < n && rc == DDP_OK; i++)
            if (buf[i] != val(idle ? r : 0, i))
                rc = err_set(msg, DDP_ERR_RUNTIME, "broadcast of %zu: [%zu] wrong", n, i);
        /* the root's broadcast buffer is its peers' to read until it has waited
         * for them in a later op: the sum goes into another */
        float *sum = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            sum[i] = val(r, i);
        comm_op_t s = {.kind = COLL_REDUCE, .recv = sum, .count = n, .root = 0, .idle = idle};
        comm_op_t bar = {.kind = COLL_BARRIER}; /* the root has read every arena */
        if (rc == DDP_OK && ((rc = comm_run(c, &s, NULL)) != DDP_OK ||
                             (rc = comm_run(c, &bar, NULL)) != DDP_OK))
            err_set(msg, rc, "%s", comm_last_error(c));
        for (size_t i = 0; i < n && rc == DDP_OK && r == 0; i++) {
            float want = val(0, i); /* ((x0 + x1) + x2) ..., the ranks that take part */
            for (int q = 1; q < g->n; q++)
                if (!(g->n >= 3 && q == g->n - 1))
                    want += val(q, i);
            if (memcmp(&sum[i], &want, sizeof want) != 0)
                rc = err_set(msg, DDP_ERR_RUNTIME, "reduce of %zu: [%zu] %.9g, want %.9g", n, i,
                             sum[i], want);
        }
        free(buf);
        free(sum);
        if (rc != DDP_OK)
            return rc;
    }
    return DDP_OK;
}

Test(comm_local, broadcast_and_reduce_whole_and_sliced)
{
    group_t g;
    for (int dev = 0; dev < 2; dev++)
        for (int n = 1; n <= MAXR; n++) {
            run_group(&g, n, dev, bcast_reduce, NULL);
            assert_ok(&g);
        }
}

// ---------------------------------------------------------------------------
// scatter and gather in torch.chunk's blocks

static int scatter_gather(group_t *g, int r, comm_t *c, char *msg)
{
    const int rows = 7, cols = 3; /* chunks of 2 rows: 2, 2, 2, 1 on 4 ranks */
    int size = (rows + g->n - 1) / g->n;
    int off = r * size < rows ? r * size : rows;
    int mine = rows - off < size ? rows - off : size;
    float whole[21], out[21], part[21] = {0}, back[21];
    for (int i = 0; i < rows * cols; i++)
        whole[i] = r == 0 ? val(9, (size_t)i) : -1.0f, out[i] = -2.0f;
    comm_op_t s = {.kind = COLL_SCATTER, .send = whole, .recv = part, .count = (size_t)mine * cols,
                   .offset = (size_t)off * cols, .root = 0};
    int rc = comm_run(c, &s, NULL);
    for (int i = 0; r > 0 && rc == DDP_OK && i < mine * cols; i++)
        if (part[i] != val(9, (size_t)(off * cols + i)))
            rc = err_set(msg, DDP_ERR_RUNTIME, "scatter: rank %d [%d] wrong", r, i);
    /* gather every rank's block, each doubled, back onto rank 0 */
    const float *src = r == 0 ? whole + off * cols : part;
    for (int i = 0; i < mine * cols; i++)
        back[i] = 2.0f * src[i];
    comm_op_t ga = {.kind = COLL_GATHER, .send = back, .recv = out, .count = (size_t)mine * cols,
                    .offset = (size_t)off * cols, .root = 0};
    if (rc == DDP_OK && (rc = comm_run(c, &ga, NULL)) != DDP_OK)
        return err_set(msg, rc, "%s", comm_last_error(c));
    /* rank 0 reads the others' blocks: nobody writes them before a later op */
    comm_op_t bar = {.kind = COLL_BARRIER};
    if (rc == DDP_OK && (rc = comm_run(c, &bar, NULL)) != DDP_OK)
        return err_set(msg, rc, "%s", comm_last_error(c));
    for (int i = 0; r == 0 && rc == DDP_OK && i < rows * cols; i++)
        if (out[i] != 2.0f * val(9, (size_t)i))
            rc = err_set(msg, DDP_ERR_RUNTIME, "gather [%d] %g", i, out[i]);
    return rc;
}

Test(comm_local, scatter_and_gather_uneven_blocks)
{
    group_t g;
    for (int dev = 0; dev < 2; dev++)
        for (int n = 1; n <= MAXR; n++) {
            run_group(&g, n, dev, scatter_gather, NULL);
            assert_ok(&g);
            /* the others copied their blocks in, rank 0 copied theirs out */
            for (int r = 1; r < n; r++)
                cr_assert_geq(g.moves[r], 1, "n %d rank %d", n, r);
            cr_assert_eq(g.moves[0], n - 1, "n %d: rank 0's gather copies", n);
        }
}

// ---------------------------------------------------------------------------
// all-reduce, a root's early launch, the observer

static int early(group_t *g, int r, comm_t *c, char *msg)
{
    float p[110], x[4];
    for (int i = 0; i < 110; i++)
        p[i] = val(r, (size_t)i);
    for (int i = 0; i < 4; i++)
        x[i] = val(r, (size_t)i + 5);
    comm_op_t b = {.kind = COLL_BROADCAST, .recv = p, .count = 110, .root = 0};
    comm_op_t s = {.kind = COLL_SCATTER, .send = x, .recv = x, .count = 4, .offset = 0, .root = 0};
    comm_handle_t hb = 0, hs = 0;
    int rc = DDP_OK;
    /* the root launches both before a barrier its peers pass first */
    if (r == 0 && (comm_launch(c, &b, &hb) != DDP_OK || comm_launch(c, &s, &hs) != DDP_OK))
        return err_set(msg, DDP_ERR_RUNTIME, "%s", comm_last_error(c));
    if (comm_local_sync(g->grp, r) != DDP_OK)
        return err_set(msg, DDP_ERR_RUNTIME, "the barrier");
    rc = r == 0 ? comm_wait(c, hs, NULL) : comm_run(c, &b, NULL);
    if (rc == DDP_OK && r > 0)
        rc = comm_run(c, &s, NULL);
    if (rc != DDP_OK)
        return err_set(msg, rc, "%s", comm_last_error(c));
    if (p[7] != val(0, 7) || x[2] != val(0, 7))
        return err_set(msg, DDP_ERR_RUNTIME, "rank %d: not the root's", r);
    float a[5];
    for (int i = 0; i < 5; i++)
        a[i] = (float)(r + 1) * (float)(i + 1);
    comm_op_t ar = {.kind = COLL_ALL_REDUCE, .recv = a, .count = 5};
    if ((rc = comm_run(c, &ar, NULL)) != DDP_OK)
        return err_set(msg, rc, "%s", comm_last_error(c));
    float k = (float)(g->n * (g->n + 1) / 2);
    for (int i = 0; i < 5; i++)
        if (a[i] != k * (float)(i + 1))
            return err_set(msg, DDP_ERR_RUNTIME, "all-reduce [%d] %g", i, a[i]);
    return DDP_OK;
}

Test(comm_local, early_launch_all_reduce_and_the_observer)
{
    group_t g;
    for (int dev = 0; dev < 2; dev++) {
        run_group(&g, 3, dev, early, NULL);
        assert_ok(&g);
        /* each receiver: its parameters and its rows; rank 0: the sums of two arenas */
        for (int r = 1; r < 3; r++) {
            cr_assert_geq(g.moves[r], 3, "rank %d", r);
            cr_assert_geq(g.bytes[r], 110 * 4 + 4 * 4, "rank %d", r);
        }
        if (dev) /* on a device every wait is told (its queue waits) */
            cr_assert_geq(g.waited[1], 3);
    }
}

// ---------------------------------------------------------------------------
// failures

static int waits_forever(group_t *g, int r, comm_t *c, char *msg)
{
    (void)g;
    float x = 0;
    if (r == 1) { /* fails instead of launching its part: the root must not hang */
        comm_local_group_abort(g->grp);
        return err_set(msg, DDP_ERR_RUNTIME, "planted failure");
    }
    comm_op_t s = {.kind = COLL_REDUCE, .recv = &x, .count = 1, .root = 0};
    int rc = comm_run(c, &s, NULL);
    err_set(msg, rc, "%s", comm_last_error(c));
    return rc;
}

Test(comm_local, an_abort_ends_every_wait, .timeout = 20)
{
    group_t g;
    run_group(&g, 2, false, waits_forever, NULL);
    cr_assert_eq(g.rc[0], DDP_ERR_RUNTIME);
    cr_assert(strstr(g.msg[0], "another device failed"), "%s", g.msg[0]);
}

static int runs_ahead(group_t *g, int r, comm_t *c, char *msg)
{
    float x[LOCAL_RING + 1] = {0};
    comm_op_t s = {.kind = COLL_SCATTER, .send = x, .recv = x, .count = 1, .root = 0};
    comm_handle_t h;
    int rc = DDP_OK;
    if (r == 0) /* posts LOCAL_RING + 1 scatters before its peer reads one */
        for (int i = 0; i <= LOCAL_RING && rc == DDP_OK; i++)
            rc = comm_launch(c, &s, &h);
    if (comm_local_sync(g->grp, r) != DDP_OK || rc != DDP_OK)
        return err_set(msg, DDP_ERR_RUNTIME, "setup");
    if (r == 1 && (rc = comm_run(c, &s, NULL)) != DDP_OK)
        err_set(msg, rc, "%s", comm_last_error(c));
    return rc;
}

Test(comm_local, a_post_overwritten_before_it_was_read_fails)
{
    group_t g;
    run_group(&g, 2, false, runs_ahead, NULL);
    cr_assert_eq(g.rc[1], DDP_ERR_RUNTIME);
    cr_assert(strstr(g.msg[1], "ops ahead"), "%s", g.msg[1]);
}

static int refused(group_t *g, int r, comm_t *c, char *msg)
{
    (void)g, (void)r;
    float x[4] = {0};
    comm_op_t ag = {.kind = COLL_ALL_GATHER, .recv = x, .count = 1};
    if (comm_run(c, &ag, NULL) == DDP_OK || !strstr(comm_last_error(c), "not offered"))
        return err_set(msg, DDP_ERR_RUNTIME, "all-gather: %s", comm_last_error(c));
    return DDP_OK;
}

Test(comm_local, refuses_what_it_does_not_offer)
{
    group_t g;
    run_group(&g, 1, false, refused, NULL);
    assert_ok(&g);
}

Test(comm_local, slices_cover_the_arena)
{
    size_t ns[] = {1, 15, 16, 17, 1000, 8390656};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int k = 1; k <= 5; k++) {
            size_t next = 0;
            for (int w = 0; w < k; w++) {
                size_t lo, hi;
                comm_local_slice(ns[i], k, w, &lo, &hi);
                cr_assert_eq(lo, next, "n %zu k %d w %d", ns[i], k, w);
                cr_assert_geq(hi, lo);
                cr_assert(lo % 16 == 0 || lo == ns[i], "slice starts on a cache line");
                next = hi;
            }
            cr_assert_eq(next, ns[i], "n %zu k %d: slices end at n", ns[i], k);
        }
}
