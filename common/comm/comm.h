/* common/comm/comm.h: the collectives seam: broadcast, all-reduce, reduce, all-gather,
 * reduce-scatter, scatter, gather and barrier among `world` ranks, each launched
 * asynchronously and waited for by handle (or run at once), plus abort.  A communicator is a
 * table of operations behind impl (comm_impl.h); README.md lists the implementations.
 *
 * The contract every implementation keeps (NCCL's, so comm_nccl.c is thin):
 *  - Data is float32 in memory of the rank's backend; count is in floats and may be 0 (a
 *    no-op that completes at once, without synchronising the ranks).  An all-reduce with
 *    REDOP_SUM may carry 16-bit floats (DTYPE_F16 / DTYPE_BF16, DDP's compression hooks):
 *    count is then in 16-bit elements and even, and each addition is rounded to 16 bits
 *    (base/half.h) in the transport's own order, so 16-bit sums may differ between transports.
 *  - In place: send == recv (or NULL) for broadcast, all-reduce and reduce; send == recv +
 *    rank*count for all-gather; recv == send + rank*count for reduce-scatter (send NULL: the
 *    same).  No other overlap.
 *  - Each rank runs its collectives one at a time, in launch order, and every rank must launch
 *    the same sequence (kind, count, op, root): shm fails naming both sides, NCCL hangs until
 *    --timeout.  DDP therefore launches buckets in bucket index order on every rank.
 *  - Launch is ordered after the work the rank already issued on its backend (CUDA: an event
 *    the comm stream waits on; the host does not block).  Buffers stay untouched until waited.
 *  - run(op) is launch and wait in one, for a caller that would wait at once (shm runs it on
 *    the calling thread, sparing two hand-offs to its communication thread).
 *  - wait(h) returns once h and every op launched before it are complete and visible to work
 *    the rank issues on its backend afterwards (NCCL: the backend's stream waits, the host
 *    does not; a peer that never comes is caught by the watch the comm installs on the
 *    backend).  Results are bit-identical on every rank, so replicas never drift apart.
 *  - AVG is the sum, then divided by world (never ncclAvg: docs/gpu.md); callers that fold
 *    1/world into their own scaling use SUM.  Sums are deterministic run to run.
 *  - Errors: DDP_OK or DDP_ERR_RUNTIME with one line in comm_last_error(), sticky.  Joining is
 *    bounded by init_timeout_s, every wait for a peer by timeout_s ("timed out in all-reduce
 *    of bucket 2: rank 1 did not arrive within 2 s"; NCCL: "a peer did not arrive"), and the
 *    comm then aborts so the other ranks fail fast too.
 *  - abort(c, why), from any thread of the rank, fails every pending and future op on every
 *    rank of the group promptly; peers report "aborted by rank R: why".
 * The segment (comm_seg_t) is made before fork by the process that forks the ranks: it carries
 * the abort flag the supervisor raises when a rank dies, and rank 0's ncclUniqueId. */
#ifndef DDPBENCH_COMM_H
#define DDPBENCH_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/device/backend.h"
#include "common/base/half.h"
#include "common/base/kinds.h"
#include "common/base/status.h"

typedef struct comm comm_t;
typedef struct comm_seg comm_seg_t;

typedef enum {
    COLL_BROADCAST = 0,
    COLL_ALL_REDUCE,
    COLL_REDUCE,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_BARRIER,
    COLL_SCATTER,        /* the in-process group only (comm_local_group_create) */
    COLL_GATHER,
    COLL_COUNT
} coll_kind_t;

typedef enum { REDOP_SUM = 0, REDOP_AVG } redop_t;

/* One collective, as launched.  Broadcast, all-reduce, reduce: send and recv hold count
 * floats (broadcast reads send on the root only; reduce writes recv on the root only).
 * All-gather: send count floats, recv count*world, rank q's block at recv + q*count.
 * Reduce-scatter: send count*world, recv count: rank q gets the reduction of every rank's
 * block q, bit for bit that block of an all-reduce.  Scatter and gather (the in-process
 * group's): each rank's block is its count floats at offset into the root's buffer (any size,
 * like torch.chunk's); the root's own block is read in place (scatter) or copied to recv +
 * offset (gather, unless already there).  Barrier uses none of them. */
typedef struct {
    coll_kind_t kind;
    const float *send;   /* NULL: in place (send = recv, or recv + rank*count) */
    float *recv;
    size_t count;        /* floats per rank */
    redop_t redop;       /* all-reduce, reduce, reduce-scatter */
    int root;            /* broadcast, reduce */
    const char *tag;     /* "bucket 2": names the op in errors (or NULL); valid until waited */
    dtype_t dtype;       /* DTYPE_F32 (0); 16-bit: all-reduce, SUM, even count (above) */
    size_t offset;       /* scatter, gather: this rank's block in the root's buffer */
    bool idle;           /* the in-process group: this rank moves no data, yet keeps the
                            op's place in the order */
} comm_op_t;

/* Collectives are numbered 1, 2, ... per rank in launch order; 0 is "none". */
typedef uint64_t comm_handle_t;

/* When an op ran (began moving or waiting; result in place), on the now_s() clock; both 0
 * when the implementation cannot tell. */
typedef struct {
    double start_s, end_s;
} comm_span_t;

/* How rank 0's len bytes of id (ncclUniqueId) reach the others without a segment, bounded by
 * timeout_s.  DDP_OK, or a status with one line in err. */
typedef int (*comm_exchange_fn)(void *ctx, int rank, void *id, size_t len, double timeout_s,
                                char *err);

/* What a rank needs to join its group. */
typedef struct {
    comm_kind_t kind;     /* COMM_SHM, COMM_NCCL, COMM_MPI or COMM_AUTO (comm_resolve) */
    int world, rank;
    backend_t *be;        /* created by this rank (after fork) */
    comm_seg_t *seg;      /* from comm_seg_create() before fork; NULL under mpirun */
    double timeout_s;     /* > 0 */
    double init_timeout_s; /* joining the group; 0: COMM_INIT_TIMEOUT_S or timeout_s if longer */
    comm_exchange_fn exchange; /* without a segment: how NCCL's id travels (MPI_Bcast) */
    void *exchange_ctx;
} comm_args_t;

/* Why apart from --timeout: CUDA contexts and NCCL's rings on eight GPUs take seconds. */
#define COMM_INIT_TIMEOUT_S 300.0

/* The factory.  DDP_ERR_INPUT when the kind is not built in or does not fit the backend. */
int comm_create(comm_t **out, const comm_args_t *a, char *err);
/* True when NCCL was compiled in. */
bool comm_nccl_available(void);
/* DP's in-process form: one NCCL communicator per CUDA backend in bes[0..n) (distinct GPUs,
 * ncclCommInitAll), rank i driven by the thread that owns bes[i].  No segment: abort() fails
 * that rank's ops, the caller aborts the others.  DDP_ERR_INPUT without NCCL. */
int comm_nccl_group_create(comm_t **comms, backend_t *const *bes, int n, double timeout_s,
                           char *err);
/* DP's in-process group (comm_local.c): n threads of one process, one rank each, made
 * before the threads start; each joins with its backend once it has one.  comm.h's contract,
 * with these differences, which make DP's moves cheap:
 *  - Ranks read each other's buffers directly.  A rank whose part needs another's data waits
 *    for that rank to have launched the op, no more; a rank whose part needs no one's (a
 *    root that sends, a sender to a root) is done at launch and leaves its buffer untouched
 *    until a later op has waited for its readers.  So a root may launch a broadcast or
 *    scatter early (DP's next step's) and its peers find it done.
 *  - Host arenas of COMM_LOCAL_SLICED floats or more move in cache-line aligned slices, one
 *    per rank; smaller ones whole.  Sums run in rank order, (x0 + x1) + x2 ..., on every path.
 *    On GPUs every copy is a peer copy on the receiving device's stream, ordered by events;
 *    with nccl given, broadcast and reduce are NCCL's.
 *  - The host barrier (comm_local_sync) is counted apart from the ops (COLL_BARRIER is an op:
 *    it orders the devices' queues too).
 *  - No timeout: a thread that fails aborts the group (comm_local_group_abort), which ends
 *    every wait at once.
 *  - An observer (comm_local_observe) is told where a rank waited and what it moved. */
typedef struct comm_local_group comm_local_group_t;
/* Why not always sliced: a sliced move meets every rank twice and its lines cross cores;
 * below 16 KiB one thread moves the arena in less time than a meeting. */
#define COMM_LOCAL_SLICED 4096
static inline bool comm_local_sliced(size_t floats) { return floats >= COMM_LOCAL_SLICED; }
int comm_local_group_create(comm_local_group_t **out, int n, char *err);
/* After every member's comm is destroyed and no thread waits. */
void comm_local_group_free(comm_local_group_t *g);
/* Rank `rank` joins with its backend; nccl: its rank of comm_nccl_group_create's
 * group (owned from now on, destroyed with the comm), or NULL for peer copies. */
int comm_local_join(comm_t **out, comm_local_group_t *g, int rank, backend_t *be, comm_t *nccl,
                    char *err);
/* A host barrier of the group's threads, joined or not; DDP_ERR_RUNTIME once aborted. */
int comm_local_sync(comm_local_group_t *g, int rank);
/* Fail the group: every wait, present and future, returns at once. */
void comm_local_group_abort(comm_local_group_t *g);

/* What a member's ops tell the thread that runs them. */
typedef struct {
    coll_kind_t kind;
    uint64_t bytes;        /* moved (a reduce: read from the sources) */
    int peer;              /* the other rank of a copy, -1 for several */
    int ops;               /* the copies or sums it stands for */
} comm_move_t;
typedef struct {
    void (*waited)(void *ctx); /* it waited for its peers, before it moves anything */
    int (*mark)(void *ctx); /* before a copy: the caller's mark, or -1 when not wanted */
    void (*moved)(void *ctx, int mark, const comm_move_t *m); /* after it */
    void *ctx;
} comm_observer_t;
void comm_local_observe(comm_t *c, const comm_observer_t *obs);
/* Prefetch the others' next two posts this rank's ops will read (e.g. after a barrier). */
void comm_local_prefetch(comm_t *c);

/* COMM_AUTO resolved for a backend kind. */
comm_kind_t comm_resolve(comm_kind_t k, backend_kind_t b);

// ---------------------------------------------------------------------------
// the segment: made before fork, shared by the ranks and their supervisor

/* A shared mapping for world ranks with `extra` zeroed, 64-byte aligned bytes for the caller
 * (DDP's results); its /dev/shm name (O_EXCL, 0600) is unlinked before this returns. */
int comm_seg_create(comm_seg_t **out, int world, size_t extra, char *err);
void comm_seg_free(comm_seg_t *s);
void *comm_seg_extra(comm_seg_t *s);
int comm_seg_world(const comm_seg_t *s);

/* Raise the group's abort flag (who: a rank, -1 the supervisor) and wake every waiter; the
 * first reason wins.  Safe from any thread or process that maps the segment. */
void comm_seg_abort(comm_seg_t *s, int who, const char *why);
/* Non-zero once aborted; msg (ERR_LEN, may be NULL) receives
 * "aborted by rank R: why" / "aborted by the supervisor: why". */
bool comm_seg_aborted(comm_seg_t *s, char *msg);

/* Who raised the abort flag (a rank, -1 the supervisor, -2 nobody) and why (may be NULL). */
int comm_seg_abort_origin(comm_seg_t *s, char *why);

/* The group's ledger (PyTorch's Flight Recorder): every launch with a segment notes its
 * handle, kind, count and tag; a failure says where each rank stands ("rank 0: #41
 * all-reduce of bucket 0 (250 floats); rank 1: #42 ..."): #seq if still held, else its last. */
void comm_seg_note(comm_seg_t *s, int rank, uint64_t seq, const comm_op_t *op);
void comm_seg_ledger(comm_seg_t *s, uint64_t seq, char *buf, size_t n);

/* Rank 0 publishes len bytes (ncclUniqueId), every other rank waits for them (bounded by
 * timeout_s and the abort flag) and copies them into id. */
#define COMM_SEG_ID_MAX 256
int comm_seg_exchange_id(comm_seg_t *s, int rank, void *id, size_t len, double timeout_s,
                         char *err);

// ---------------------------------------------------------------------------
// convenience: the forms callers use (comm.c)

int comm_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h);
/* span (may be NULL): op h's timing if already known, else zeros (comm_span asks later). */
int comm_wait(comm_t *c, comm_handle_t h, comm_span_t *span);
/* Op h's timing, once the device work queued after its wait has run; zeros when the
 * implementation cannot tell, or no longer can (a few hundred ops later). */
void comm_span(comm_t *c, comm_handle_t h, comm_span_t *span);
/* Launch op and wait for it and everything before it; *h (may be NULL): its handle. */
int comm_run(comm_t *c, const comm_op_t *op, comm_handle_t *h);
/* Wait for everything launched so far. */
int comm_wait_all(comm_t *c);
int comm_all_reduce_async(comm_t *c, float *buf, size_t count, redop_t op, const char *tag,
                          comm_handle_t *h);
/* Blocking forms: launch, then wait for it. */
int comm_all_reduce(comm_t *c, float *buf, size_t count, redop_t op);
int comm_broadcast(comm_t *c, float *buf, size_t count, int root);
int comm_all_gather(comm_t *c, const float *send, float *recv, size_t count);
int comm_barrier(comm_t *c);
void comm_abort(comm_t *c, const char *why);
void comm_destroy(comm_t *c);
const char *comm_last_error(const comm_t *c);
/* rc, with "<place>: <the comm's message>" in err on failure (place NULL: the message). */
int comm_check(const comm_t *c, int rc, const char *place, char *err);

/* CUDA graphs: can this group's collectives be captured (docs/gpu.md: not every NCCL does)?
 * Every rank calls it at the same point, no op in flight: each captures an all-reduce into a
 * graph of its own, the ranks agree over an eager all-reduce, then each launches its graph
 * and checks the sum.  out->refused_by: -1 when all held, else the lowest rank that could not
 * capture (out->why on that rank only), the comm as it was, for eager steps.  insist: a rank
 * that cannot capture fails at once (DDP_ERR_RUNTIME) and the others' agreement with its
 * abort.  A wrong sum or a comm failure is DDP_ERR_RUNTIME.  shm and mpi: refused by rank 0. */
typedef struct {
    int refused_by;
    char why[ERR_LEN];
} comm_graph_probe_t;
int comm_graph_probe(comm_t *c, bool insist, comm_graph_probe_t *out, char *err);

/* What a communicator is. */
int comm_world(const comm_t *c);
int comm_rank(const comm_t *c);
/* The bound on every wait for a peer; change it only with no op in flight (the comm's
 * thread reads it). */
double comm_timeout(const comm_t *c);
void comm_set_timeout(comm_t *c, double seconds);

#endif
