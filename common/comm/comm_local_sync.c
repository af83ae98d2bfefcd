/* common/comm/comm_local_sync.c: how the in-process group's threads wait for each other
 * (comm_local.h): spin a few microseconds on the lines waited for, then sleep on a futex;
 * an abort ends every wait.  Also the group's making and its host barrier. */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/base/affinity.h"
#include "common/base/clock.h"
#include "common/base/cpu_relax.h"
#include "common/comm/comm_local.h"

/* Why spin: a DP step waits about six times, microseconds apart on a tiny model, and a sleep
 * and wake-up cost 10-20 us each (sleeping at every wait made the step 100x the work).  Why
 * briefly: while device 0 alone computes the loss, the others would burn a core.  Not at all
 * with more ranks than CPUs, or beside a rank on the same core (on 2 loaded cores the
 * seed-size step took 138 us p50 with a 20 us spin, 12 us without). */
#define LOCAL_SPIN_NS 30000ull
/* Longest single sleep: a waiter looks again at least this often. */
#define LOCAL_SLEEP_NS 100000000L

int comm_local_group_create(comm_local_group_t **out, int n, char *err)
{
    *out = NULL;
    if (n < 1 || n > MAX_DEVICES)
        return err_set(err, DDP_ERR_RUNTIME, "in-process group: %d ranks", n);
    comm_local_group_t *g = NULL;
    if (posix_memalign((void **)&g, _Alignof(comm_local_group_t), sizeof *g) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "in-process group: out of host memory (%zu bytes)",
                       sizeof *g);
    memset(g, 0, sizeof *g);
    g->n = n;
    g->host = true;
    /* the CPUs this process may use, not the machine's */
    g->spin_ns = n > affinity_cpus() ? 0 : LOCAL_SPIN_NS;
    for (int i = 0; i < n; i++)
        atomic_store(&g->rank[i].cpu, -1);
    *out = g;
    return DDP_OK;
}

void comm_local_group_free(comm_local_group_t *g) { free(g); }

// ---------------------------------------------------------------------------
// sleeping and waking

static void futex_wait(_Atomic uint32_t *addr, uint32_t expect)
{
    struct timespec ts = {0, LOCAL_SLEEP_NS};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expect, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Wake the sleepers, if any.  The announcement is ordered before the read of their count
 * (the fence), as a sleeper's count before its last look: either the sleeper sees the
 * announcement, or this sees the sleeper and moves the futex word it sleeps on. */
void local_wake(comm_local_group_t *g)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&g->sleepers, memory_order_seq_cst) > 0) {
        atomic_fetch_add_explicit(&g->wake, 1, memory_order_seq_cst);
        futex_wake_all(&g->wake);
    }
}

void comm_local_group_abort(comm_local_group_t *g)
{
    if (!g)
        return;
    atomic_store_explicit(&g->aborted, true, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g->wake, 1, memory_order_seq_cst);
    futex_wake_all(&g->wake);
}

// ---------------------------------------------------------------------------
// what a waiter waits for

typedef struct {
    int me, q;             /* q >= 0: that rank's posts; -1: every rank's but me */
    uint64_t count;        /* q >= 0: its posts; barrier: every rank's arrivals */
    const uint64_t *want;  /* q < 0, posts: each rank's count */
    bool barrier;
} wait_for_t;

/* Rank q's post number k is out (a later one: overrun, which local_await reports). */
static bool posted(const comm_local_group_t *g, int q, uint64_t k)
{
    return atomic_load_explicit(&g->rank[q].slot[k % LOCAL_RING].seq, memory_order_acquire) >= k;
}

static bool is_open(const comm_local_group_t *g, const wait_for_t *w)
{
    if (w->q >= 0)
        return posted(g, w->q, w->count);
    for (int i = 0; i < g->n; i++) {
        if (i == w->me)
            continue;
        if (w->barrier ? atomic_load_explicit(&g->rank[i].arrived, memory_order_acquire) < w->count
                       : !posted(g, i, w->want[i]))
            return false;
    }
    return true;
}

/* Every post waited for is the one wanted, not a later one in its slot. */
static bool in_place(const comm_local_group_t *g, const wait_for_t *w)
{
    for (int i = w->q >= 0 ? w->q : 0; i < (w->q >= 0 ? w->q + 1 : g->n); i++) {
        uint64_t k = w->q >= 0 ? w->count : w->want[i];
        if (i != w->me && atomic_load_explicit(&g->rank[i].slot[k % LOCAL_RING].seq,
                                               memory_order_relaxed) != k)
            return false;
    }
    return true;
}

/* Spin, then sleep, until w is open (DDP_OK) or the group aborted. */
static int wait_open(comm_local_group_t *g, const wait_for_t *w)
{
    uint64_t spin_until = now_ns() + g->spin_ns;
    /* Where we are, for the others; another rank last waiting on this core: do not spin. */
    int cpu = sched_getcpu();
    if (atomic_load_explicit(&g->rank[w->me].cpu, memory_order_relaxed) != cpu)
        atomic_store_explicit(&g->rank[w->me].cpu, cpu, memory_order_relaxed);
    for (int i = 0; i < g->n && cpu >= 0; i++)
        if (i != w->me && atomic_load_explicit(&g->rank[i].cpu, memory_order_relaxed) == cpu)
            spin_until = 0;
    for (;;) {
        if (is_open(g, w))
            return DDP_OK;
        if (atomic_load_explicit(&g->aborted, memory_order_acquire))
            break;
        if (now_ns() < spin_until) {
            for (int i = 0; i < 16; i++)
                cpu_relax();
            continue;
        }
        /* Sleep: count ourselves in, read the futex word, look once more after the fence
         * (local_wake's order); a rank that announces after our count wakes us. */
        atomic_fetch_add_explicit(&g->sleepers, 1, memory_order_seq_cst);
        uint32_t word = atomic_load_explicit(&g->wake, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
        if (!is_open(g, w) && !atomic_load_explicit(&g->aborted, memory_order_seq_cst))
            futex_wait(&g->wake, word);
        atomic_fetch_sub_explicit(&g->sleepers, 1, memory_order_seq_cst);
    }
    /* Aborted; what was already open stays a success, as for the ranks that saw it open. */
    return is_open(g, w) ? DDP_OK : DDP_ERR_RUNTIME;
}

// ---------------------------------------------------------------------------
// posts and barriers

int local_await_slow(comm_local_group_t *g, int me, int q, uint64_t count, const uint64_t *want,
                     bool *slept)
{
    wait_for_t w = {.me = me, .q = q, .count = count, .want = want};
    if (slept)
        *slept = false;
    if (atomic_load_explicit(&g->aborted, memory_order_acquire))
        return DDP_ERR_RUNTIME;
    if (!is_open(g, &w)) {
        if (slept)
            *slept = true;
        TRY(wait_open(g, &w));
    }
    return in_place(g, &w) ? DDP_OK : DDP_ERR_RUNTIME;
}

/* Why a count per rank on a line of its own, not one shared count: the last to arrive had to
 * take the shared line, then publish a generation, two misses in a row on every barrier's
 * critical path; now an arrival is one store to the rank's own line: one miss each way. */
int comm_local_sync(comm_local_group_t *g, int rank)
{
    if (atomic_load_explicit(&g->aborted, memory_order_acquire))
        return DDP_ERR_RUNTIME;
    uint64_t b = atomic_load_explicit(&g->rank[rank].arrived, memory_order_relaxed) + 1;
    /* Release: what this thread wrote before arriving is visible to whoever sees it open. */
    atomic_store_explicit(&g->rank[rank].arrived, b, memory_order_release);
    wait_for_t w = {.me = rank, .q = -1, .count = b, .barrier = true};
    if (!is_open(g, &w))
        TRY(wait_open(g, &w));
    /* Whoever sees the barrier open wakes the sleepers. */
    local_wake(g);
    return DDP_OK;
}
