/* common/comm/comm_seg.h: the shared segment's layout and waits, private to comm_seg.c and
 * comm_shm.c.  One mapping: seg_header_t (one cache line a field), the staging (slots of
 * world + 1 chunks: every rank's input and the result), the caller's extra.  Progress is
 * three monotonic counters per rank of chunks since the group started (chunk k uses slot
 * k % slots): staged, reduced, done; each written by its rank alone, read by all. */
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
    int world;
    int slots;              /* ring depth */
    size_t chunk;           /* floats per rank per slot */
    uint64_t spin_ns;       /* how long a waiter spins before sleeping */

    /* The futex word every waiter sleeps on: bumped by a publish that finds
     * a sleeper (waiters > 0), and by an abort. */
    _Alignas(SEG_LINE) _Atomic uint32_t epoch;
    _Alignas(SEG_LINE) _Atomic uint32_t waiters;

    /* Abort: 0 none, else who + 2 (who -1 is the supervisor).  Each aborter writes its reason
     * in abort_why[who + 1] before it claims abort_who, so the claim's reader has it whole. */
    _Alignas(SEG_LINE) _Atomic int32_t abort_who;
    _Atomic int32_t abort_writing[SEG_MAX_RANKS + 1];
    char abort_why[SEG_MAX_RANKS + 1][ERR_LEN];

    /* Rank 0's opaque id (ncclUniqueId) for the others. */
    _Alignas(SEG_LINE) _Atomic int32_t id_ready;
    uint32_t id_len;
    unsigned char id[COMM_SEG_ID_MAX];

    seg_counter_t ctr[SEG_NCOUNTERS][SEG_MAX_RANKS];
    /* The CPU each rank last published from: a waiter on the same core does not spin. */
    struct {
        _Alignas(SEG_LINE) _Atomic int32_t v;
    } cpu[SEG_MAX_RANKS];
    seg_desc_t desc[SEG_MAX_RANKS][SEG_MAX_SLOTS];
    /* Each rank's last SEG_LEDGER collectives, by seq % SEG_LEDGER, read on a failure. */
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

/* Wait until counter `which` of every rank is >= target: spin briefly, then sleep on the
 * futex.  DDP_ERR_RUNTIME with *missing the lowest rank not arrived within timeout_s (-1 when
 * the group was aborted). */
int seg_wait_counters(comm_seg_t *s, int which, uint64_t target, double timeout_s,
                      int *missing);

#endif
