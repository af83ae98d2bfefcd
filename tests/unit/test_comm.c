/* tests/unit/test_comm.c: the shared-memory collectives against serial references,
 * with forked ranks like DDP's: every collective for 1 to 4 ranks over sizes
 * 0, 1, odd, not divisible by the rank count, around the chunk size and 64 MiB;
 * device staging; ordering of async ops; timeout, abort and mismatch;
 * the CUDA graph probe on a comm that captures nothing. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/device/backend_impl.h" /* a fake device: host memory taking the GPU path */
#include "common/comm/comm.h"
#include "common/measure/timing.h"
#include "tsan_criterion.h"
#include "tu_pin.h"


// ---------------------------------------------------------------------------
// a group of forked ranks

typedef struct {
    int rc;
    double elapsed_s;
    char msg[ERR_LEN];
} rank_out_t;

typedef struct {
    int world;
    double timeout_s;
    bool device_staging; /* pretend the backend is not host-visible */
    rank_out_t out[8];
    bool crashed[8];
} group_t;

typedef int (*rank_fn)(comm_t *c, void *ctx, char *msg);

/* Fork g->world ranks that each run fn on their own comm; collect what each
 * returned.  The test fails if a rank crashes or the group takes over 60 s. */
static void run_group(group_t *g, rank_fn fn, void *ctx)
{
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, g->world, sizeof(rank_out_t) * 8, err), DDP_OK, "%s", err);
    rank_out_t *shared = comm_seg_extra(seg);
    fflush(NULL);
    pid_t pids[8];
    for (int r = 0; r < g->world; r++) {
        pids[r] = fork();
        cr_assert_neq(pids[r], -1);
        if (pids[r] == 0) {
            rank_out_t *o = &shared[r];
            backend_t *be;
            comm_t *c = NULL;
            o->rc = backend_cpu_create(&be, r, 1, o->msg);
            if (o->rc == DDP_OK) {
                be->host_visible = !g->device_staging;
                comm_args_t a = {COMM_SHM, g->world, r, be, seg, g->timeout_s, 0.0, NULL, NULL};
                o->rc = comm_create(&c, &a, o->msg);
            }
            double t0 = now_s();
            if (o->rc == DDP_OK)
                o->rc = fn(c, ctx, o->msg);
            o->elapsed_s = now_s() - t0;
            comm_destroy(c);
            be->host_visible = true;
            backend_destroy(be);
            _exit(0);
        }
    }
    double deadline = now_s() + 60.0;
    int left = g->world;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < g->world; r++)
                if (pids[r] == p)
                    g->crashed[r] = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
            left--;
            continue;
        }
        if (now_s() > deadline) {
            for (int r = 0; r < g->world; r++)
                kill(pids[r], SIGKILL);
            while (waitpid(-1, NULL, 0) > 0)
                ;
            comm_seg_free(seg);
            cr_assert_fail("the group of %d ranks did not finish within 60 s", g->world);
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    memcpy(g->out, shared, sizeof(rank_out_t) * (size_t)g->world);
    comm_seg_free(seg);
    for (int r = 0; r < g->world; r++)
        cr_assert(!g->crashed[r], "rank %d crashed", r);
}

static void assert_all_ok(const group_t *g, const char *what)
{
    for (int r = 0; r < g->world; r++)
        cr_assert_eq(g->out[r].rc, DDP_OK, "%s, %d ranks: rank %d: %s", what, g->world, r,
                     g->out[r].msg);
}

// ---------------------------------------------------------------------------
// inputs and serial references

/* Rank r's element i: varied magnitudes and signs, so a different summation
 * order would give different bits. */
static float input(int r, size_t i)
{
    uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u + 17u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    float mant = (float)(x & 0xffff) / 65536.0f - 0.5f;
    return mant * (float)(1 << ((x >> 16) % 7));
}

static float ref_sum(int world, size_t i, bool avg)
{
    float s = input(0, i);
    for (int q = 1; q < world; q++)
        s += input(q, i);
    return avg ? s / (float)world : s;
}

static int mismatch(char *msg, const char *what, size_t i, float got, float want)
{
    return err_set(msg, DDP_ERR_RUNTIME, "%s: element %zu is %.9g, expected %.9g", what, i,
                   (double)got, (double)want);
}

typedef struct {
    size_t count;
    bool avg;
    bool out_of_place;
    int root;
    bool run;      /* comm_run (on the calling thread) instead of launch + wait */
} op_ctx_t;

static int rank_all_reduce(comm_t *c, void *vctx, char *msg)
{
    op_ctx_t *x = vctx;
    size_t n = x->count;
    float *buf = malloc((n ? n : 1) * sizeof(float));
    float *send = malloc((n ? n : 1) * sizeof(float));
    float *in = x->out_of_place ? send : buf;
    for (size_t i = 0; i < n; i++)
        in[i] = input(comm_rank(c), i);
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .send = x->out_of_place ? send : NULL, .recv = buf,
                    .count = n, .redop = x->avg ? REDOP_AVG : REDOP_SUM, .tag = "test"};
    comm_handle_t h;
    int rc = x->run ? comm_run(c, &op, &h) : comm_launch(c, &op, &h);
    if (rc == DDP_OK)
        rc = comm_wait(c, h, NULL);
    if (rc != DDP_OK)
        err_set(msg, rc, "%s", comm_last_error(c));
    for (size_t i = 0; rc == DDP_OK && i < n; i++) {
        float want = ref_sum(comm_world(c), i, x->avg);
        if (memcmp(&buf[i], &want, sizeof want) != 0)
            rc = mismatch(msg, "all-reduce", i, buf[i], want);
        if (x->out_of_place && send[i] != input(comm_rank(c), i))
            rc = mismatch(msg, "all-reduce changed its send buffer", i, send[i], input(comm_rank(c), i));
    }
    free(buf);
    free(send);
    return rc;
}

static int rank_broadcast(comm_t *c, void *vctx, char *msg)
{
    op_ctx_t *x = vctx;
    size_t n = x->count;
    float *buf = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        buf[i] = comm_rank(c) == x->root ? input(x->root, i) : -1.0f;
    int rc = comm_broadcast(c, buf, n, x->root);
    if (rc != DDP_OK)
        err_set(msg, rc, "%s", comm_last_error(c));
    for (size_t i = 0; rc == DDP_OK && i < n; i++)
        if (buf[i] != input(x->root, i))
            rc = mismatch(msg, "broadcast", i, buf[i], input(x->root, i));
    free(buf);
    return rc;
}

static int rank_reduce(comm_t *c, void *vctx, char *msg)
{
    op_ctx_t *x = vctx;
    size_t n = x->count;
    float *buf = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        buf[i] = input(comm_rank(c), i);
    comm_op_t op = {.kind = COLL_REDUCE, .recv = buf, .count = n,
                    .redop = x->avg ? REDOP_AVG : REDOP_SUM, .root = x->root};
    int rc = comm_run(c, &op, NULL);
    if (rc != DDP_OK)
        err_set(msg, rc, "%s", comm_last_error(c));
    for (size_t i = 0; rc == DDP_OK && comm_rank(c) == x->root && i < n; i++) {
        float want = ref_sum(comm_world(c), i, x->avg);
        if (memcmp(&buf[i], &want, sizeof want) != 0)
            rc = mismatch(msg, "reduce", i, buf[i], want);
    }
    free(buf);
    return rc;
}

static int rank_all_gather(comm_t *c, void *vctx, char *msg)
{
    op_ctx_t *x = vctx;
    size_t n = x->count, w = (size_t)comm_world(c);
    float *recv = malloc((n * w > 0 ? n * w : 1) * sizeof(float));
    float *send = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n * w; i++)
        recv[i] = -1.0f;
    float *mine = x->out_of_place ? send : recv + (size_t)comm_rank(c) * n;
    for (size_t i = 0; i < n; i++)
        mine[i] = input(comm_rank(c), i);
    int rc = comm_all_gather(c, x->out_of_place ? send : NULL, recv, n);
    if (rc != DDP_OK)
        err_set(msg, rc, "%s", comm_last_error(c));
    for (size_t q = 0; rc == DDP_OK && q < w; q++)
        for (size_t i = 0; rc == DDP_OK && i < n; i++)
            if (recv[q * n + i] != input((int)q, i))
                rc = mismatch(msg, "all-gather", q * n + i, recv[q * n + i], input((int)q, i));
    free(recv);
    free(send);
    return rc;
}

/* Reduce-scatter: send holds every rank's world blocks of count floats (block
 * q, element i is the all-reduce input at q*count + i), rank q keeps block q
 * of the sum, bit for bit what an all-reduce of the same inputs gives there. */
static int rank_reduce_scatter(comm_t *c, void *vctx, char *msg)
{
    op_ctx_t *x = vctx;
    size_t n = x->count, w = (size_t)comm_world(c), r = (size_t)comm_rank(c);
    float *send = malloc((n * w > 0 ? n * w : 1) * sizeof(float));
    float *recv = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n * w; i++)
        send[i] = input((int)r, i);
    float *dst = x->out_of_place ? recv : send + r * n;
    comm_op_t op = {.kind = COLL_REDUCE_SCATTER, .send = x->out_of_place ? send : NULL,
                    .recv = dst, .count = n, .redop = x->avg ? REDOP_AVG : REDOP_SUM};
    comm_handle_t h = 0;
    int rc = x->run ? comm_run(c, &op, NULL) : comm_launch(c, &op, &h);
    if (rc == DDP_OK && !x->run)
        rc = comm_wait(c, h, NULL);
    if (rc != DDP_OK)
        err_set(msg, rc, "%s", comm_last_error(c));
    for (size_t i = 0; rc == DDP_OK && i < n; i++) {
        float want = ref_sum((int)w, r * n + i, x->avg);
        if (memcmp(&dst[i], &want, sizeof want) != 0)
            rc = mismatch(msg, "reduce-scatter", i, dst[i], want);
    }
    for (size_t i = 0; rc == DDP_OK && x->out_of_place && i < n * w; i++)
        if (send[i] != input((int)r, i))
            rc = mismatch(msg, "reduce-scatter changed its send buffer", i, send[i],
                          input((int)r, i));
    free(send);
    free(recv);
    return rc;
}

/* Sizes around every edge: empty, one, odd, not divisible by 3 or 4 ranks,
 * one float either side of the 128 KiB chunk, several chunks. */
static const size_t sizes[] = {0, 1, 2, 3, 7, 1001, 32767, 32768, 32769, 3 * 32768 + 5};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Every size on one group of ranks per world size, one size after the other
 * on the same comm: a group forked for each size (560 groups) was most of
 * this suite's time, three times over with the sanitizers' runs. */
typedef struct {
    rank_fn fn;
    op_ctx_t proto;
} sweep_ctx_t;

static int rank_sizes(comm_t *c, void *vctx, char *msg)
{
    sweep_ctx_t *s = vctx;
    for (size_t i = 0; i < NSIZES; i++) {
        op_ctx_t x = s->proto;
        x.count = sizes[i];
        if (x.root < 0)
            x.root = comm_world(c) - 1;
        int rc = s->fn(c, &x, msg);
        if (rc != DDP_OK) {
            char why[ERR_LEN];
            snprintf(why, sizeof why, "%s", msg);
            return err_set(msg, rc, "%zu floats: %s", sizes[i], why);
        }
    }
    return DDP_OK;
}

static void sweep(rank_fn fn, op_ctx_t proto, const char *what, bool staging)
{
    for (int world = 1; world <= 4; world++) {
        group_t g = {.world = world, .timeout_s = 20.0, .device_staging = staging};
        sweep_ctx_t s = {fn, proto};
        run_group(&g, rank_sizes, &s);
        assert_all_ok(&g, what);
    }
}

// ---------------------------------------------------------------------------
// results against the serial references

Test(comm, all_reduce_sum) { sweep(rank_all_reduce, (op_ctx_t){0}, "all-reduce sum", false); }
Test(comm, all_reduce_avg) { sweep(rank_all_reduce, (op_ctx_t){.avg = true}, "all-reduce avg", false); }
Test(comm, all_reduce_out_of_place)
{
    sweep(rank_all_reduce, (op_ctx_t){.out_of_place = true}, "all-reduce out of place", false);
}
Test(comm, broadcast_root0) { sweep(rank_broadcast, (op_ctx_t){.root = 0}, "broadcast", false); }
Test(comm, broadcast_last_root) { sweep(rank_broadcast, (op_ctx_t){.root = -1}, "broadcast", false); }
Test(comm, reduce) { sweep(rank_reduce, (op_ctx_t){.root = -1, .avg = true}, "reduce avg", false); }
Test(comm, reduce_root0) { sweep(rank_reduce, (op_ctx_t){.root = 0}, "reduce sum", false); }
Test(comm, all_gather_in_place) { sweep(rank_all_gather, (op_ctx_t){0}, "all-gather", false); }
Test(comm, all_gather_out_of_place)
{
    sweep(rank_all_gather, (op_ctx_t){.out_of_place = true}, "all-gather out of place", false);
}

Test(comm, reduce_scatter_in_place)
{
    sweep(rank_reduce_scatter, (op_ctx_t){0}, "reduce-scatter", false);
}
Test(comm, reduce_scatter_out_of_place_avg)
{
    sweep(rank_reduce_scatter, (op_ctx_t){.out_of_place = true, .avg = true},
          "reduce-scatter avg out of place", false);
}
/* comm_run: the op runs on the calling thread, with the same results. */
Test(comm, run_on_the_calling_thread)
{
    sweep(rank_all_reduce, (op_ctx_t){.avg = true, .run = true}, "run all-reduce", false);
    sweep(rank_reduce_scatter, (op_ctx_t){.run = true}, "run reduce-scatter", false);
}

/* The path CUDA buffers take: d2h into pinned staging at launch, h2d at wait. */
Test(comm, device_staging)
{
    sweep(rank_reduce_scatter, (op_ctx_t){.avg = true}, "staged reduce-scatter", true);
    sweep(rank_reduce_scatter, (op_ctx_t){.out_of_place = true}, "staged reduce-scatter", true);
    sweep(rank_all_reduce, (op_ctx_t){.avg = true}, "staged all-reduce", true);
    sweep(rank_all_gather, (op_ctx_t){0}, "staged all-gather", true);
    sweep(rank_broadcast, (op_ctx_t){.root = -1}, "staged broadcast", true);
}

/* Under ThreadSanitizer (every access checked, 5-10x slower) 8 MiB: still
 * 64 chunks of 128 KiB round the ring of 8 slots, the same path, without a minute of a loaded machine's
 * time that a slow CI box could stretch past the group's timeout. */
#ifdef __SANITIZE_THREAD__
#define BIG_MIB 8u
#else
#define BIG_MIB 64u
#endif
Test(comm, all_reduce_64mib, .timeout = 120)
{
    for (int world = 1; world <= 4; world++) {
        group_t g = {.world = world, .timeout_s = 60.0};
        op_ctx_t x = {.count = (BIG_MIB << 20) / sizeof(float), .avg = world == 3};
        run_group(&g, rank_all_reduce, &x);
        assert_all_ok(&g, "all-reduce of 64 MiB");
    }
}

/* Ranks may also be threads of one process (DP's case).  Here ThreadSanitizer
 * sees both sides of the segment protocol, so it checks that every staging
 * read is ordered after the write it reads. */
typedef struct {
    comm_seg_t *seg;
    int rank, world;
    size_t count;
    int rc;
    char msg[ERR_LEN];
} thread_rank_t;

static void *thread_rank(void *arg)
{
    thread_rank_t *t = arg;
    backend_t *be;
    comm_t *c;
    if ((t->rc = backend_cpu_create(&be, t->rank, 1, t->msg)) != DDP_OK)
        return NULL;
    comm_args_t a = {COMM_SHM, t->world, t->rank, be, t->seg, 20.0, 0.0, NULL, NULL};
    if ((t->rc = comm_create(&c, &a, t->msg)) == DDP_OK) {
        op_ctx_t x = {.count = t->count, .avg = true};
        t->rc = rank_all_reduce(c, &x, t->msg);
        op_ctx_t y = {.count = t->count, .root = t->world - 1};
        if (t->rc == DDP_OK)
            t->rc = rank_broadcast(c, &y, t->msg);
        if (t->rc == DDP_OK)
            t->rc = rank_all_gather(c, &y, t->msg);
        op_ctx_t z = {.count = t->count / 3, .run = true};
        if (t->rc == DDP_OK)
            t->rc = rank_reduce_scatter(c, &z, t->msg);
        if (t->rc == DDP_OK)
            t->rc = rank_all_reduce(c, &z, t->msg);
        comm_destroy(c);
    }
    backend_destroy(be);
    return NULL;
}

Test(comm, threads_as_ranks)
{
    for (int world = 2; world <= 3; world++) {
        char err[ERR_LEN];
        comm_seg_t *seg;
        cr_assert_eq(comm_seg_create(&seg, world, 0, err), DDP_OK, "%s", err);
        pthread_t th[3];
        thread_rank_t t[3];
        for (int r = 0; r < world; r++) {
            t[r] = (thread_rank_t){.seg = seg, .rank = r, .world = world, .count = 3 * 32768 + 5};
            cr_assert_eq(pthread_create(&th[r], NULL, thread_rank, &t[r]), 0);
        }
        for (int r = 0; r < world; r++) {
            pthread_join(th[r], NULL);
            cr_assert_eq(t[r].rc, DDP_OK, "thread rank %d of %d: %s", r, world, t[r].msg);
        }
        comm_seg_free(seg);
    }
}

// ---------------------------------------------------------------------------
// async ordering, barrier, spans

/* Ops queued on the comm thread, then one run on the calling thread: the run
 * waits for them, takes the next handle, and every result is right. */
static int rank_queued_then_run(comm_t *c, void *vctx, char *msg)
{
    (void)vctx;
    enum { NOPS = 4, LEN = 5000 }; /* long enough that the queued ones are still running */
    float *bufs = malloc(sizeof(float) * NOPS * LEN);
    for (int i = 0; i < NOPS * LEN; i++)
        bufs[i] = input(comm_rank(c), (size_t)i);
    comm_handle_t h[NOPS];
    int rc = DDP_OK;
    for (int k = 0; k < NOPS - 1 && rc == DDP_OK; k++)
        rc = comm_all_reduce_async(c, bufs + k * LEN, LEN, REDOP_SUM, "queued", &h[k]);
    comm_op_t last = {.kind = COLL_ALL_REDUCE, .recv = bufs + (NOPS - 1) * LEN, .count = LEN};
    if (rc == DDP_OK)
        rc = comm_run(c, &last, &h[NOPS - 1]);
    comm_span_t sp = {0, 0};
    if (rc == DDP_OK) /* already done: the wait returns its span at once */
        rc = comm_wait(c, h[0], NULL) == DDP_OK ? comm_wait(c, h[NOPS - 1], &sp) : DDP_ERR_RUNTIME;
    if (rc != DDP_OK)
        err_set(msg, rc, "%s", comm_last_error(c));
    for (int k = 1; rc == DDP_OK && k < NOPS; k++)
        if (h[k] != h[k - 1] + 1)
            rc = err_set(msg, DDP_ERR_RUNTIME, "handle %d is %llu after %llu", k,
                         (unsigned long long)h[k], (unsigned long long)h[k - 1]);
    if (rc == DDP_OK && !(sp.start_s > 0.0 && sp.end_s >= sp.start_s))
        rc = err_set(msg, DDP_ERR_RUNTIME, "the run's span is %f..%f", sp.start_s, sp.end_s);
    for (int i = 0; rc == DDP_OK && i < NOPS * LEN; i++) {
        float want = ref_sum(comm_world(c), (size_t)i, false);
        if (memcmp(&bufs[i], &want, sizeof want) != 0)
            rc = mismatch(msg, "queued then run", (size_t)i, bufs[i], want);
    }
    free(bufs);
    return rc;
}

Test(comm, queued_ops_then_a_run)
{
    for (int world = 2; world <= 3; world++) {
        group_t g = {.world = world, .timeout_s = 20.0};
        run_group(&g, rank_queued_then_run, NULL);
        assert_all_ok(&g, "queued ops then a run");
    }
}

/* Many ops in flight at once (more than the queue holds), waited for only at
 * the end, each checked: launches run in order and never overlap wrongly. */
static int rank_many_async(comm_t *c, void *vctx, char *msg)
{
    (void)vctx;
    enum { NOPS = 300, LEN = 37 };
    float *bufs = malloc(sizeof(float) * NOPS * LEN);
    char tags[NOPS][16];
    for (int k = 0; k < NOPS; k++)
        for (int i = 0; i < LEN; i++)
            bufs[k * LEN + i] = input(comm_rank(c), (size_t)(k * LEN + i));
    comm_handle_t first = 0, last = 0;
    int rc = DDP_OK;
    for (int k = 0; k < NOPS && rc == DDP_OK; k++) {
        snprintf(tags[k], sizeof tags[k], "op %d", k);
        comm_handle_t h;
        rc = comm_all_reduce_async(c, bufs + k * LEN, LEN, REDOP_SUM, tags[k], &h);
        if (k == 0)
            first = h;
        if (rc == DDP_OK && h != last + 1 && last)
            rc = err_set(msg, DDP_ERR_RUNTIME, "handle %llu after %llu", (unsigned long long)h,
                         (unsigned long long)last);
        last = h;
    }
    comm_span_t s0, s1;
    if (rc == DDP_OK)
        rc = comm_wait(c, last, &s1);
    if (rc == DDP_OK)
        rc = comm_wait(c, last, &s1); /* waiting twice is fine */
    if (rc == DDP_OK)
        rc = comm_wait(c, last - 1, &s0);
    if (rc != DDP_OK && !msg[0])
        err_set(msg, rc, "%s", comm_last_error(c));
    if (rc == DDP_OK && !(s0.start_s > 0 && s0.end_s >= s0.start_s && s1.start_s >= s0.end_s))
        rc = err_set(msg, DDP_ERR_RUNTIME, "spans out of order: [%f,%f] then [%f,%f]", s0.start_s,
                     s0.end_s, s1.start_s, s1.end_s);
    for (int k = 0; rc == DDP_OK && k < NOPS; k++)
        for (int i = 0; rc == DDP_OK && i < LEN; i++) {
            float want = ref_sum(comm_world(c), (size_t)(k * LEN + i), false);
            if (bufs[k * LEN + i] != want)
                rc = mismatch(msg, "async all-reduce", (size_t)(k * LEN + i), bufs[k * LEN + i], want);
        }
    if (rc == DDP_OK && comm_barrier(c) != DDP_OK)
        rc = err_set(msg, DDP_ERR_RUNTIME, "barrier: %s", comm_last_error(c));
    if (rc == DDP_OK && comm_wait(c, 0, NULL) != DDP_OK)
        rc = err_set(msg, DDP_ERR_RUNTIME, "wait(0) failed");
    (void)first;
    free(bufs);
    return rc;
}

Test(comm, many_async_ops_in_order)
{
    for (int world = 1; world <= 4; world++) {
        group_t g = {.world = world, .timeout_s = 20.0};
        run_group(&g, rank_many_async, NULL);
        assert_all_ok(&g, "async ops");
    }
}

/* Every wait sleeps on the futex when the ranks outnumber the CPUs (no
 * spin): each collective then depends on a publish waking its sleeping
 * peer.  A wake-up lost would leave the sleeper to its longest sleep
 * (100 ms, comm_seg.c) before it looked again: no op may take that long. */
enum { WAKE_OPS = 400 };

static int rank_sleepers_woken(comm_t *c, void *vctx, char *msg)
{
    (void)vctx;
    float v[3];
    for (int k = 0; k < WAKE_OPS; k++) {
        for (int i = 0; i < 3; i++)
            v[i] = (float)(comm_rank(c) + 1);
        comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = v, .count = 3};
        double t0 = now_s();
        if (comm_run(c, &op, NULL) != DDP_OK)
            return err_set(msg, DDP_ERR_RUNTIME, "op %d: %s", k, comm_last_error(c));
        double dt = now_s() - t0;
        if (dt >= 0.09)
            return err_set(msg, DDP_ERR_RUNTIME,
                           "op %d of %d took %.0f ms: a sleeper was not woken", k, WAKE_OPS,
                           dt * 1e3);
        float want = (float)(comm_world(c) * (comm_world(c) + 1) / 2);
        if (v[0] != want || v[2] != want)
            return err_set(msg, DDP_ERR_RUNTIME, "op %d: %g, not %g", k, v[0], want);
    }
    return DDP_OK;
}

Test(comm, sleeping_waiters_are_always_woken, .timeout = 60)
{
    /* One CPU for the segment's maker and the ranks it forks: two ranks on
     * it never spin (comm_seg.c) */
    cpu_set_t before;
    tu_pin_one_cpu(&before);
    for (int world = 2; world <= 3; world++) {
        group_t g = {.world = world, .timeout_s = 5.0}; /* a rank that failed early: the rest */
        run_group(&g, rank_sleepers_woken, NULL);
        assert_all_ok(&g, "sleeping waiters");
    }
    sched_setaffinity(0, sizeof before, &before);
}

/* A barrier holds every rank until the last one arrives: every rank leaves
 * after the late rank entered (times on the shared monotonic clock, kept in a
 * mapping the forked ranks share). */
typedef struct {
    double enter[8], leave[8];
} barrier_times_t;

static int rank_barrier(comm_t *c, void *vctx, char *msg)
{
    barrier_times_t *t = vctx;
    if (comm_rank(c) == comm_world(c) - 1) {
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
    }
    t->enter[comm_rank(c)] = now_s();
    if (comm_barrier(c) != DDP_OK)
        return err_set(msg, DDP_ERR_RUNTIME, "%s", comm_last_error(c));
    t->leave[comm_rank(c)] = now_s();
    return DDP_OK;
}

Test(comm, barrier_waits_for_everyone)
{
    barrier_times_t *t = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                              -1, 0);
    cr_assert_neq(t, MAP_FAILED);
    for (int world = 2; world <= 3; world++) {
        group_t g = {.world = world, .timeout_s = 20.0};
        memset(t, 0, sizeof *t);
        run_group(&g, rank_barrier, t);
        assert_all_ok(&g, "barrier");
        double last_in = t->enter[world - 1];
        for (int r = 0; r < world; r++)
            cr_assert(t->leave[r] >= last_in,
                      "rank %d left the barrier %.6f s before the last rank entered", r,
                      last_in - t->leave[r]);
    }
    munmap(t, sizeof *t);
}

// ---------------------------------------------------------------------------
// failures: timeout, abort, mismatch, missing NCCL, no /dev/shm entry

/* Rank 1 never joins: rank 0 must fail within about the timeout, naming rank 1. */
static int rank_absent_peer(comm_t *c, void *vctx, char *msg)
{
    (void)vctx;
    if (comm_rank(c) == 1) {
        struct timespec ts = {1, 500000000};
        nanosleep(&ts, NULL);
        return err_set(msg, DDP_ERR_RUNTIME, "slept");
    }
    float buf[8] = {0};
    comm_handle_t h;
    int rc = comm_all_reduce_async(c, buf, 8, REDOP_AVG, "bucket 2", &h);
    if (rc == DDP_OK)
        rc = comm_wait(c, h, NULL);
    err_set(msg, rc, "%s", rc == DDP_OK ? "no error" : comm_last_error(c));
    /* The error is sticky: later ops fail at once with the same message. */
    if (rc != DDP_OK && comm_barrier(c) == DDP_OK)
        return err_set(msg, DDP_ERR_INPUT, "a barrier succeeded after the comm failed");
    return rc;
}

Test(comm, timeout_names_the_missing_rank)
{
    group_t g = {.world = 2, .timeout_s = 0.5};
    run_group(&g, rank_absent_peer, NULL);
    cr_assert_eq(g.out[0].rc, DDP_ERR_RUNTIME, "rank 0: %s", g.out[0].msg);
    /* the ledger: where each rank stands (comm.h) */
    cr_assert_str_eq(g.out[0].msg,
                     "timed out in all-reduce of bucket 2: rank 1 did not arrive within 0.5 s "
                     "(rank 0: #1 all-reduce of bucket 2 (8 floats); rank 1: none yet)");
    /* At least the timeout; the upper bound only says "not stuck" (sanitizers
     * and a shared machine slow everything down). */
    cr_assert(g.out[0].elapsed_s >= 0.5 && g.out[0].elapsed_s < 3.0, "took %.3f s",
              g.out[0].elapsed_s);
}

/* One rank aborts while the others wait in a collective: they stop at once. */
static int rank_aborter(comm_t *c, void *vctx, char *msg)
{
    (void)vctx;
    if (comm_rank(c) == 1) {
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        comm_abort(c, "device 1: injected fault");
        return err_set(msg, DDP_ERR_RUNTIME, "%s", comm_last_error(c));
    }
    float buf[4] = {0};
    int rc = comm_all_reduce(c, buf, 4, REDOP_SUM);
    return err_set(msg, rc, "%s", rc == DDP_OK ? "no error" : comm_last_error(c));
}

Test(comm, abort_stops_every_rank)
{
    group_t g = {.world = 3, .timeout_s = 30.0};
    run_group(&g, rank_aborter, NULL);
    for (int r = 0; r < 3; r += 2) {
        cr_assert_eq(g.out[r].rc, DDP_ERR_RUNTIME);
        cr_assert_str_eq(g.out[r].msg, "aborted by rank 1: device 1: injected fault");
        cr_assert(g.out[r].elapsed_s < 5.0, "rank %d took %.3f s to notice", r, g.out[r].elapsed_s);
    }
    cr_assert_str_eq(g.out[1].msg, "aborted: device 1: injected fault");
}

static int rank_mismatch(comm_t *c, void *vctx, char *msg)
{
    (void)vctx;
    float buf[10] = {0};
    int rc = comm_rank(c) == 0 ? comm_all_reduce(c, buf, 10, REDOP_SUM) : comm_broadcast(c, buf, 10, 0);
    return err_set(msg, rc, "%s", rc == DDP_OK ? "no error" : comm_last_error(c));
}

Test(comm, mismatched_collectives_fail)
{
    group_t g = {.world = 2, .timeout_s = 10.0};
    run_group(&g, rank_mismatch, NULL);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(g.out[r].rc, DDP_ERR_RUNTIME);
        cr_assert(strstr(g.out[r].msg, "mismatched collectives"), "rank %d: %s", r, g.out[r].msg);
        /* each rank's #1 named, whichever saw it (one sees it first and aborts) */
        cr_assert(strstr(g.out[r].msg, "rank 0: #1 all-reduce (10 floats); rank 1: #1 broadcast "
                                       "(10 floats)"), "rank %d: %s", r, g.out[r].msg);
        cr_assert(g.out[r].elapsed_s < 5.0);
    }
}

/* comm_graph_probe on a comm whose collectives cannot be captured (shm):
 * every rank answers at once, with no collective, refused by rank 0, which
 * alone says why; insisting, every rank fails with that reason.  Then an
 * all-reduce still runs: the comm is as it was. */
static int rank_graph_probe(comm_t *c, void *vctx, char *msg)
{
    bool insist = *(const bool *)vctx;
    comm_graph_probe_t p;
    char err[ERR_LEN] = "";
    int rc = comm_graph_probe(c, insist, &p, err);
    float buf[4] = {1, 2, 3, 4};
    if (comm_all_reduce(c, buf, 4, REDOP_SUM) != DDP_OK || buf[3] != 4.0f * (float)comm_world(c))
        return err_set(msg, DDP_ERR_RUNTIME, "the all-reduce after the probe: %s", comm_last_error(c));
    err_set(msg, 0, "rc %d refused_by %d why '%s' err '%s'", rc, p.refused_by, p.why, err);
    return DDP_OK;
}

Test(comm, graph_probe_without_graphs_refuses_on_every_rank_at_once)
{
    const char *why = "--comm shm: its collectives are not captured";
    for (int insist = 0; insist < 2; insist++) {
        group_t g = {.world = 3, .timeout_s = 10.0};
        bool ins = insist;
        run_group(&g, rank_graph_probe, &ins);
        assert_all_ok(&g, "comm_graph_probe");
        for (int r = 0; r < 3; r++) {
            char want[ERR_LEN];
            if (insist)
                snprintf(want, sizeof want, "rc %d refused_by 0 why '' err '%s'", DDP_ERR_RUNTIME, why);
            else
                snprintf(want, sizeof want, "rc 0 refused_by 0 why '%s' err ''", r == 0 ? why : "");
            cr_assert_str_eq(g.out[r].msg, want, "insist %d, rank %d", insist, r);
        }
    }
}

/* The supervisor's abort (a dead rank) reaches ranks blocked in a wait. */
Test(comm, supervisor_abort_reaches_waiting_ranks)
{
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, 2, sizeof(rank_out_t) * 2, err), DDP_OK, "%s", err);
    rank_out_t *shared = comm_seg_extra(seg);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        backend_t *be;
        comm_t *c;
        backend_cpu_create(&be, 0, 1, NULL);
        comm_args_t a = {COMM_SHM, 2, 0, be, seg, 30.0, 0.0, NULL, NULL};
        comm_create(&c, &a, NULL);
        float buf[4] = {0};
        double t0 = now_s();
        shared[0].rc = comm_all_reduce(c, buf, 4, REDOP_SUM);
        shared[0].elapsed_s = now_s() - t0;
        snprintf(shared[0].msg, ERR_LEN, "%s", comm_last_error(c));
        comm_destroy(c);
        backend_destroy(be);
        _exit(0);
    }
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    comm_seg_abort(seg, -1, "rank 1 (device 1) killed by signal 9 (Killed)");
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert_eq(shared[0].rc, DDP_ERR_RUNTIME);
    cr_assert_str_eq(shared[0].msg,
                     "aborted by the supervisor: rank 1 (device 1) killed by signal 9 (Killed)");
    cr_assert(shared[0].elapsed_s < 5.0);
    char why[ERR_LEN];
    cr_assert_eq(comm_seg_abort_origin(seg, why), -1);
    comm_seg_free(seg);
}

static int count_shm_entries(void)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "ddpbench-%d-", (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

Test(comm, segment_leaves_no_dev_shm_entry)
{
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, 4, 1 << 20, err), DDP_OK, "%s", err);
    cr_assert_eq(count_shm_entries(), 0, "the segment's name is still in /dev/shm");
    memset(comm_seg_extra(seg), 0xab, 1 << 20); /* the whole extra area is mapped */
    comm_seg_free(seg);
    cr_assert_eq(comm_seg_create(&seg, 65, 0, err), DDP_ERR_INPUT);
}

Test(comm, nccl_without_nccl_is_an_input_error)
{
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    comm_t *c;
    comm_args_t a = {COMM_NCCL, 1, 0, be, NULL, 1.0, 0.0, NULL, NULL};
    cr_assert_eq(comm_create(&c, &a, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--comm nccl"), "%s", err);
    cr_assert_eq(comm_resolve(COMM_AUTO, BACKEND_CPU), COMM_SHM);
    cr_assert_eq(comm_resolve(COMM_AUTO, BACKEND_CUDA), COMM_NCCL);
    backend_destroy(be);
}

/* --comm mpi needs ranks started by mpirun: created in a process where MPI
 * was never initialised (or a build without MPI), it is an input error that
 * says so; on a CUDA backend it is refused before MPI is asked at all. */
Test(comm, mpi_without_mpirun_is_an_input_error)
{
    char err[ERR_LEN];
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    comm_t *c = NULL;
    comm_args_t a = {COMM_MPI, 2, 0, be, NULL, 1.0, 0.0, NULL, NULL};
    cr_assert_eq(comm_create(&c, &a, err), DDP_ERR_INPUT);
    cr_assert_null(c);
    cr_assert(strstr(err, "--comm mpi") && (strstr(err, "mpirun") || strstr(err, "without MPI")),
              "%s", err);
    cr_assert_eq(comm_resolve(COMM_MPI, BACKEND_CPU), COMM_MPI);
    backend_destroy(be);
}

Test(comm, id_exchange)
{
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, 2, 0, err), DDP_OK, "%s", err);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char id[128];
        memset(id, 0x5a, sizeof id);
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        _exit(comm_seg_exchange_id(seg, 0, id, sizeof id, 5.0, NULL) == DDP_OK ? 0 : 1);
    }
    unsigned char got[128] = {0};
    cr_assert_eq(comm_seg_exchange_id(seg, 1, got, sizeof got, 5.0, err), DDP_OK, "%s", err);
    for (size_t i = 0; i < sizeof got; i++)
        cr_assert_eq(got[i], 0x5a);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    comm_seg_free(seg);
    /* Nobody publishes: a bounded wait that says who is missing. */
    cr_assert_eq(comm_seg_create(&seg, 2, 0, err), DDP_OK, "%s", err);
    double t0 = now_s();
    cr_assert_eq(comm_seg_exchange_id(seg, 1, got, sizeof got, 0.3, err), DDP_ERR_RUNTIME);
    cr_assert(now_s() - t0 < 3.0);
    cr_assert(strstr(err, "rank 0 did not arrive within 0.3 s"), "%s", err);
    comm_seg_free(seg);
}
