/* common/comm/comm_seg.h: the shared segment's layout and its waiting primitives,
 * private to comm_seg.c and comm_shm.c (the public surface is in comm.h).
 *
 * Layout of one mapping:
 *   seg_header_t   flags, counters and op descriptors, one cache line each
 *   staging        SEG slots of (world + 1) chunks of `chunk` floats: chunk
 *                  slot s holds every rank's input (in[s][r]) and the result
 *                  (out[s]) of the collective chunk that uses slot s
 *   extra          the caller's area (DDP's results)
 *
 * Progress is three monotonic counters per rank, counting collective chunks
 * since the group started (chunk k uses slot k % slots):
 *   staged[r]   r has written its input of chunks < staged[r]
 *   reduced[r]  r has computed its slice of the result of chunks < reduced[r]
 *   done[r]     r has copied out the results of chunks < done[r]
 * Each counter is written by one rank only and read by all. */
#ifndef DDPBENCH_COMM_SEG_H
#define DDPBENCH_COMM_SEG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/comm/comm_impl.h"
#include "common/base/kinds.h"

#define SEG_MAX_RANKS MAX_DEVICES
#define SEG_MAX_SLOTS 16
#define SEG_LINE 64

typedef struct {
    _Alignas(SEG_LINE) _Atomic uint64_t v;
} seg_counter_t;

/* What a rank launched into a slot, so peers can check they run the same op. */
typedef struct {
    _Alignas(SEG_LINE) uint64_t op_seq; /* the op's handle on that rank */
    uint32_t kind, redop;
    int32_t root;
    uint64_t count;
} seg_desc_t;

enum { SEG_STAGED = 0, SEG_REDUCED, SEG_DONE, SEG_NCOUNTERS };

/* A collective as its rank launched it, for the ledger (comm_seg_note). */
#define SEG_LEDGER 4
typedef struct {
    uint64_t seq, count;
    uint32_t kind;
    char tag[28];
} seg_note_t;

typedef struct {
    uint64_t magic;
    int world;
    int slots;              /* ring depth */
    size_t chunk;           /* floats per rank per slot */
    uint64_t spin_ns;       /* how long a waiter spins before sleeping */

    /* The futex word every waiter sleeps on: bumped by a publish that finds
     * a sleeper (waiters > 0), and by an abort. */
    _Alignas(SEG_LINE) _Atomic uint32_t epoch;
    _Alignas(SEG_LINE) _Atomic uint32_t waiters;

    /* Abort: 0 none, else who + 2 (who -1 is the supervisor).  Each would-be
     * aborter has its own reason, abort_why[who + 1], written before it
     * claims abort_who (abort_writing: that slot is taken), so whoever sees
     * the claim finds the winner's reason whole. */
    _Alignas(SEG_LINE) _Atomic int32_t abort_who;
    _Atomic int32_t abort_writing[SEG_MAX_RANKS + 1];
    char abort_why[SEG_MAX_RANKS + 1][ERR_LEN];

    /* Rank 0's opaque id (ncclUniqueId) for the others. */
    _Alignas(SEG_LINE) _Atomic int32_t id_ready;
    uint32_t id_len;
    unsigned char id[COMM_SEG_ID_MAX];

    seg_counter_t ctr[SEG_NCOUNTERS][SEG_MAX_RANKS];
    /* The CPU each rank last published from (sched_getcpu), so a waiter can
     * tell that the rank it waits for shares its core (see seg_wait_counters). */
    struct {
        _Alignas(SEG_LINE) _Atomic int32_t v;
    } cpu[SEG_MAX_RANKS];
    seg_desc_t desc[SEG_MAX_RANKS][SEG_MAX_SLOTS];
    /* Each rank's last SEG_LEDGER collectives, by seq % SEG_LEDGER: written
     * by that rank alone, read on a failure. */
    struct {
        _Alignas(SEG_LINE) seg_note_t n[SEG_LEDGER];
    } ledger[SEG_MAX_RANKS];
} seg_header_t;

struct comm_seg {
    seg_header_t *h;
    float *staging;
    void *extra;
    size_t bytes;
};

/* The staging chunks of slot s. */
static inline float *seg_in(comm_seg_t *s, int slot, int rank)
{
    return s->staging + ((size_t)slot * (size_t)(s->h->world + 1) + (size_t)rank) * s->h->chunk;
}
static inline float *seg_out(comm_seg_t *s, int slot)
{
    return seg_in(s, slot, s->h->world);
}

/* Publish counter `which` of rank = value (release), then wake sleepers. */
void seg_publish(comm_seg_t *s, int which, int rank, uint64_t value);

/* Wait until counter `which` of every rank is >= target.  Spins briefly
 * (not at all while the rank it waits for last ran on this CPU: it may be
 * queued behind us), then sleeps on the futex; returns DDP_OK, or
 * DDP_ERR_RUNTIME with *missing set to
 * the lowest rank that had not arrived when timeout_s passed (-1 when the wait
 * ended because the group was aborted). */
int seg_wait_counters(comm_seg_t *s, int which, uint64_t target, double timeout_s,
                      int *missing);

#endif
