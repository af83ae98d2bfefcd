/* common/comm/comm_local.h: the in-process group's inside, shared by comm_local_sync.c (how
 * its threads wait) and comm_local.c (its collectives).  Each rank announces on cache lines
 * of its own: its barriers (arrived) and its posts ("my part of op k is launched, with this
 * buffer": slot k % LOCAL_RING).  Every rank runs the same ops, so every rank counts alike
 * how many posts each has made (expect[]): a wait is for a count, never a flag to reset. */
#ifndef DDPBENCH_COMM_LOCAL_H
#define DDPBENCH_COMM_LOCAL_H

#include <stdatomic.h>

#include "common/comm/comm_impl.h"

/* Posts a rank may make before a reader has read the oldest (DP's roots run three ahead). */
#define LOCAL_RING 8
/* Device events per rank for its posts, used in turn from the first in each CUDA graph step
 * (so a graph's posts record the same events every step).  DP's ranks read every post but a
 * peer's last two before it posts again, so four never recycle one a reader still needs. */
#define LOCAL_EVENTS 4

/* What a post leaves for the ranks that read it. */
typedef struct {
    const float *buf;        /* the rank's buffer for the op (its send or recv) */
    size_t count, offset;    /* its block (scatter, gather), its floats (else) */
    bool idle;               /* comm_op_t.idle */
    backend_t *be;           /* the rank's device */
    backend_event_t *ev;     /* recorded after its work so far (not host memory), or NULL */
} local_info_t;

/* Post k is slot k % LOCAL_RING of its rank, one cache line: its number (stored last, with
 * release) and its info, so a reader has both in one miss. */
typedef struct {
    _Alignas(64) _Atomic uint64_t seq;
    local_info_t in;
} local_slot_t;

struct comm_local_group {
    int n;
    uint64_t spin_ns;        /* how long a waiter spins before it sleeps */
    _Atomic bool host;       /* every member's memory is host memory (set as they join) */
    struct {
        _Alignas(64) _Atomic uint64_t arrived; /* barriers passed */
        _Atomic int32_t cpu;                   /* where it last waited (sched_getcpu) */
        local_slot_t slot[LOCAL_RING];         /* written by the rank alone */
    } rank[MAX_DEVICES];
    /* Written only when a waiter sleeps or the group aborts: off the posts' lines. */
    _Alignas(64) _Atomic uint32_t wake; /* futex word: bumped to wake sleepers */
    _Atomic uint32_t sleepers;          /* waiters asleep (or about to be) */
    _Atomic bool aborted;
};

/* The floats [*lo, *hi) of an n-float arena that rank w of k moves in a sliced move. */
void comm_local_slice(size_t n, int k, int w, size_t *lo, size_t *hi);

/* comm_local_sync.c: wake the sleepers; the slow part of local_await. */
void local_wake(comm_local_group_t *g);
int local_await_slow(comm_local_group_t *g, int me, int q, uint64_t count, const uint64_t *want,
                     bool *slept);

/* Post: rank me's post number k with its info.  wake: wake the sleepers now; else the caller
 * does it later (local_wake): a fence right after the store waits for its line to come back
 * from the readers, which a rank that posts twice before a barrier pays once. */
static inline void local_post(comm_local_group_t *g, int me, uint64_t k, const local_info_t *info,
                              bool wake)
{
    local_slot_t *s = &g->rank[me].slot[k % LOCAL_RING];
    s->in = *info;
    /* Release: the info, and what this rank wrote before posting, are
     * visible to every rank that sees the number. */
    atomic_store_explicit(&s->seq, k, memory_order_release);
    if (wake)
        local_wake(g);
}

/* Wait until rank q's post number count is out, or (q < 0) every rank's but me has posted
 * want[rank].  DDP_ERR_RUNTIME once aborted or when a post was overwritten before this rank
 * read it.  *slept (may be NULL): whether it had to wait at all. */
static inline int local_await(comm_local_group_t *g, int me, int q, uint64_t count,
                              const uint64_t *want, bool *slept)
{
    bool ready = !atomic_load_explicit(&g->aborted, memory_order_relaxed);
    for (int i = q >= 0 ? q : 0; ready && i < (q >= 0 ? q + 1 : g->n); i++) {
        uint64_t k = q >= 0 ? count : want[i];
        ready = i == me || atomic_load_explicit(&g->rank[i].slot[k % LOCAL_RING].seq,
                                                memory_order_acquire) == k;
    }
    if (ready) {
        if (slept)
            *slept = false;
        return DDP_OK;
    }
    return local_await_slow(g, me, q, count, want, slept);
}

/* Rank q's info for its post number seq (after local_await saw it). */
static inline const local_info_t *local_info(const comm_local_group_t *g, int q, uint64_t seq)
{
    return &g->rank[q].slot[seq % LOCAL_RING].in;
}

#endif
