/* common/comm/comm.h: the collectives seam, as its callers see it: broadcast, all-reduce, reduce,
 * all-gather, reduce-scatter, scatter, gather and barrier among `world` ranks, each launched
 * asynchronously and waited for by handle (or run at once when the caller has
 * nothing to overlap), plus abort.
 *
 * Like backend.h, a communicator is a fixed table of operations and private
 * state behind impl (comm_impl.h, for the implementers).  Four implementations:
 *   comm_shm.c   ranks that share host memory: DDP's forked processes (the
 *                segment is made before fork); CPU buffers directly, CUDA
 *                buffers staged through pinned host memory so several ranks
 *                may share one GPU.
 *   comm_nccl.c  CUDA ranks over NCCL (built when HAVE_NCCL); it uses the
 *                segment only to pass rank 0's ncclUniqueId to the others
 *                (under mpirun there is none: the caller's exchange, an
 *                MPI_Bcast, does it).
 *   comm_mpi.c   CPU ranks started by mpirun, over MPI's own collectives
 *                (built when HAVE_MPI): Open MPI's shared memory within a
 *                host, TCP or InfiniBand between hosts.
 *   comm_local.c DP's devices: the threads of one process, one rank each,
 *                reading each other's buffers directly (peer copies on GPUs,
 *                or NCCL's broadcast and reduce), as PyTorch's DataParallel
 *                moves its tensors with torch.cuda.comm; the only one that
 *                offers scatter and gather.  Its own rules are below
 *                (comm_local_group_create).
 *
 * Semantics every implementation must match (NCCL's, so comm_nccl.c is thin):
 *
 *  - Data is float32, except an all-reduce with REDOP_SUM may carry 16-bit
 *    floats (dtype DTYPE_F16 or DTYPE_BF16: DDP's compression hooks): count
 *    is then in 16-bit elements and must be even (the caller pads), the
 *    buffers hold that many, and each addition is rounded to 16 bits as
 *    NCCL's ncclHalf / ncclBfloat16 sums do (base/half.h); the order of the
 *    additions is the implementation's (shm: rank order; NCCL: its ring's;
 *    MPI: its algorithm's), so 16-bit sums may differ between transports by
 *    a rounding per addition.  Buffers are device memory of the rank's backend (the
 *    backend_t given at creation): host memory on the CPU backend, cudaMalloc
 *    memory on CUDA.  count is in floats and may be 0 (a no-op that completes
 *    at once, without synchronising the ranks, as in NCCL).
 *  - In place is allowed: send == recv (or send == NULL) for broadcast,
 *    all-reduce and reduce; send == recv + rank*count for all-gather;
 *    recv == send + rank*count for reduce-scatter (send == NULL: the same,
 *    the whole buffer starting rank*count floats before recv).  Other
 *    overlap between send and recv is not allowed.
 *  - Ordering: each rank's collectives run in the order that rank launched
 *    them, one at a time.  Every rank must launch the same sequence of
 *    collectives (same kind, count, op and root); shm detects a mismatch and
 *    fails with a message naming both sides, NCCL would hang until --timeout.
 *    DDP therefore launches buckets in bucket index order on every rank.
 *  - Launch is ordered after all work the rank already issued on its backend
 *    (the gradients a bucket covers).  On CUDA that is an event recorded on
 *    the backend's stream that the comm stream waits on; the host does not
 *    block.  The buffers must stay untouched until the op is waited for.
 *  - run(op) is launch and wait in one, for a caller that would wait at once
 *    (nothing left to overlap: DDP's last bucket, the loss): shm runs it on
 *    the calling thread, sparing the hand-off to its communication thread
 *    and back (two sleeps and wake-ups); NCCL launches and waits.
 *  - wait(h) returns once collective h and every collective launched before it
 *    on this rank are complete, and their results are visible to work the rank
 *    issues on its backend afterwards (NCCL: the backend's stream waits on the
 *    comm stream and the host returns at once; a peer that never arrives is
 *    caught by the watch the comm installs on the backend, so the rank's next
 *    host wait fails with the timeout instead of hanging).  The results
 *    are bit-identical on every rank (each element is reduced once, in a fixed
 *    order, then copied), so replicas never drift apart.
 *  - AVG is the sum, then divided by world: shm divides each element of the
 *    sum; NCCL all-reduces with ncclSum and divides after, never with
 *    ncclAvg (which pre-multiplies by 1/world and so rounds differently, and
 *    which turns off NVLink SHARP).  Callers that can fold 1/world into their
 *    own scaling (DDP folds it into the loss's gradient scale) use SUM and
 *    skip the division altogether.  Sums are deterministic: the same inputs
 *    give the same bits on every run.
 *  - Errors: launch and wait return DDP_OK or DDP_ERR_RUNTIME with one line in
 *    last_error (via comm_last_error()).  An error is sticky: every later
 *    launch and wait fails at once with the same message.  Joining the group
 *    (creation) is bounded by init_timeout_s, which allows for the seconds a
 *    large NCCL group takes to set up.  No wait is unbounded: when a peer
 *    does not arrive within timeout_s the op fails with
 *      "timed out in all-reduce of bucket 2: rank 1 did not arrive within 2 s"
 *    (the tag given at launch names the op; NCCL, which cannot tell which
 *    peer is missing, says "a peer did not arrive" instead), and the comm
 *    aborts so the other ranks fail fast too.
 *  - abort(c, why) may be called from any thread of the rank.  It makes every
 *    pending and future op on every rank of the group fail promptly (shm: a
 *    flag in the segment plus a wake-up; NCCL: ncclCommAbort plus the same flag,
 *    which its wait loop polls).  Peers report "aborted by rank R: why".
 *
 * The segment (comm_seg_t) is created once by the process that forks the
 * ranks, before fork, and inherited by them.  It also carries the abort flag
 * that the supervisor raises when a rank dies, and a small area to pass an
 * opaque id (ncclUniqueId) from rank 0 to everyone. */
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

/* One collective, as launched.  For broadcast, all-reduce and reduce, send and
 * recv hold count floats (send is read on the root only for broadcast, recv is
 * written on the root only for reduce: other ranks' recv is left unspecified).
 * For all-gather, send holds count floats and recv count*world, rank q's block
 * at recv + q*count.  For reduce-scatter (NCCL's ReduceScatter), send holds
 * count*world floats and recv count: rank q receives the reduction of every
 * rank's block q (send + q*count), bit for bit that block of an all-reduce of
 * the same inputs.  Scatter and gather (the in-process group's): each rank's
 * block is its own count floats at offset floats into the root's buffer,
 * blocks of any size (0 too), like torch.chunk's; scatter sends the root's
 * send into every other rank's recv, gather the other ranks' send into the
 * root's recv; the root's own block stays where it is (scatter: read in
 * place, recv unused) or is copied into place (gather: send to recv +
 * offset, unless they are the same).  Barrier uses none of them. */
typedef struct {
    coll_kind_t kind;
    const float *send;   /* NULL: in place (send = recv, or recv + rank*count) */
    float *recv;
    size_t count;        /* floats per rank */
    redop_t redop;       /* all-reduce, reduce, reduce-scatter */
    int root;            /* broadcast, reduce */
    const char *tag;     /* "bucket 2": names the op in errors; NULL for none; must
                            stay valid until the op is waited for */
    dtype_t dtype;       /* DTYPE_F32 (0, the default); 16-bit: all-reduce, SUM only,
                            count in 16-bit elements, even; send/recv point at them */
    size_t offset;       /* scatter, gather: this rank's block in the root's buffer */
    bool idle;           /* the in-process group: this rank takes no part in the data
                            (a broadcast leaves its recv as it was, a reduce adds
                            nothing of it), yet keeps the op's place in the order */
} comm_op_t;

/* Collectives are numbered 1, 2, ... per rank in launch order; 0 is "none". */
typedef uint64_t comm_handle_t;

/* When an op ran, on the now_s() clock (start: it began moving data or waiting
 * for peers; end: its result was in place).  Both 0 when the implementation
 * cannot tell (DDP then reports no hidden communication). */
typedef struct {
    double start_s, end_s;
} comm_span_t;

/* How rank 0's opaque id (ncclUniqueId) reaches the other ranks when they
 * share no segment: rank 0 passes its len bytes, the others receive them in
 * id; bounded by timeout_s.  DDP_OK, or a status with one line in err. */
typedef int (*comm_exchange_fn)(void *ctx, int rank, void *id, size_t len, double timeout_s,
                                char *err);

/* What a rank needs to join its group. */
typedef struct {
    comm_kind_t kind;     /* COMM_SHM, COMM_NCCL or COMM_MPI (COMM_AUTO: NCCL on CUDA, shm
                             on the CPU) */
    int world, rank;
    backend_t *be;        /* created by this rank (after fork) */
    comm_seg_t *seg;      /* from comm_seg_create() before fork; NULL under mpirun */
    double timeout_s;     /* > 0 */
    double init_timeout_s; /* the bound on joining the group; 0: COMM_INIT_TIMEOUT_S,
                              or timeout_s when that is longer */
    comm_exchange_fn exchange; /* without a segment: how NCCL's id travels (mpirun's
                                  launcher: MPI_Bcast); NULL with one */
    void *exchange_ctx;
} comm_args_t;

/* Joining a group is bounded separately from the collectives: creating CUDA
 * contexts, cuBLAS handles and NCCL's rings on eight GPUs takes seconds. */
#define COMM_INIT_TIMEOUT_S 300.0

/* The factory.  DDP_ERR_INPUT when the kind is not available ("--comm nccl:
 * this ddpbench was built without NCCL") or does not fit the backend. */
int comm_create(comm_t **out, const comm_args_t *a, char *err);
/* True when NCCL was compiled in. */
bool comm_nccl_available(void);
/* DP's in-process form: one NCCL communicator per CUDA backend in bes[0..n)
 * (distinct GPUs; ncclCommInitAll), rank i on bes[i], each to be driven by
 * the thread that owns its backend.  No segment: abort() fails that rank's
 * ops; the caller aborts the others.  DDP_ERR_INPUT without NCCL. */
int comm_nccl_group_create(comm_t **comms, backend_t *const *bes, int n, double timeout_s,
                           char *err);
/* DP's in-process group (comm_local.c): n threads of one process, one rank
 * each, made before the threads start; each thread joins with its own
 * backend once it has one.  It keeps comm.h's contract with these
 * differences, which are what make DP's moves cheap:
 *  - Ranks read each other's buffers directly: a rank whose part needs
 *    another's data (a broadcast's or scatter's receivers, a gather's or
 *    reduce's root) waits for that rank to have launched the op, and no one
 *    waits for more.  A rank whose part needs no one's data (their roots, a
 *    gather's or reduce's other ranks) has done it at launch, and its
 *    buffer is read later: it leaves it untouched until it has waited in a
 *    later op for those readers (DP: a sender's output is written again
 *    after the next scatter from the root, which the root launches after its
 *    gather).  So a root may launch a broadcast or scatter early (DP's next
 *    step's, before it reports the step that ended) and its peers find it
 *    done.
 *  - On host memory an arena of COMM_LOCAL_SLICED floats or more is
 *    broadcast and reduced in slices by every rank (cache-line aligned);
 *    a smaller one moves whole (each receiver copies its own; the root
 *    sums).  Sums run in rank order, (x0 + x1) + x2 ..., whatever the path:
 *    the same bits on every path and every run.  On GPUs every copy is a
 *    peer copy on the receiving device's stream, ordered by events, the
 *    reduce's sources pulled on the root's copy stream into two scratch
 *    arenas in turn (or, in a CUDA graph step, on its compute stream);
 *    with nccl given, broadcast and reduce are NCCL's.
 *  - The host barrier (comm_local_sync, the caller's own meetings) is
 *    counted apart from the ops (COLL_BARRIER is an op: it orders the
 *    devices' queues too): a root's early launch may come before a host
 *    barrier its peers pass first.
 *  - No timeout: a thread that fails aborts the group (comm_local_group_abort),
 *    which ends every wait at once; the threads share a fate.
 *  - An observer (comm_local_observe) is told where a rank waited for its
 *    peers and what it moved, so the caller's meter times the moves. */
typedef struct comm_local_group comm_local_group_t;
/* Why not always sliced: a sliced move meets every rank before and after,
 * and each slice of a replica is written by another core than the one that
 * reads it next; on the seed-size model (110 floats) those meetings and
 * lines crossing between cores were most of DP's moves.  Below this many
 * floats (16 KiB) one thread moves the arena in less time than a meeting. */
#define COMM_LOCAL_SLICED 4096
static inline bool comm_local_sliced(size_t floats) { return floats >= COMM_LOCAL_SLICED; }
int comm_local_group_create(comm_local_group_t **out, int n, char *err);
/* After every member's comm is destroyed and no thread waits. */
void comm_local_group_free(comm_local_group_t *g);
/* Rank `rank` joins with its backend; nccl: its rank of comm_nccl_group_create's
 * group (owned from now on, destroyed with the comm), or NULL for peer copies. */
int comm_local_join(comm_t **out, comm_local_group_t *g, int rank, backend_t *be, comm_t *nccl,
                    char *err);
/* A barrier of the group's threads on the host alone, before or after they
 * joined: DDP_OK, or DDP_ERR_RUNTIME once the group is aborted. */
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
    /* this rank waited for its peers (on a GPU its queue waits for theirs);
     * called before it moves anything */
    void (*waited)(void *ctx);
    /* before a copy: a mark (the caller's), or -1 when not wanted ... */
    int (*mark)(void *ctx);
    /* ... and after it */
    void (*moved)(void *ctx, int mark, const comm_move_t *m);
    void *ctx;
} comm_observer_t;
void comm_local_observe(comm_t *c, const comm_observer_t *obs);
/* Ask the cache for what this rank's next ops read of the others' posts
 * first (their next two), e.g. after a barrier while the thread does other
 * work: posts already made then cost no miss when read. */
void comm_local_prefetch(comm_t *c);

/* COMM_AUTO resolved for a backend kind. */
comm_kind_t comm_resolve(comm_kind_t k, backend_kind_t b);

// ---------------------------------------------------------------------------
// the segment: made before fork, shared by the ranks and their supervisor

/* A shared mapping for world ranks with `extra` bytes for the caller (DDP's
 * result area, 64-byte aligned, zeroed).  Created under an unpredictable name
 * with O_EXCL and mode 0600 and unlinked before this returns: the ranks
 * inherit the mapping through fork, and no /dev/shm entry outlives the call. */
int comm_seg_create(comm_seg_t **out, int world, size_t extra, char *err);
/* Unmap (in each process that has it; the memory goes with the last one). */
void comm_seg_free(comm_seg_t *s);
void *comm_seg_extra(comm_seg_t *s);
int comm_seg_world(const comm_seg_t *s);

/* Raise the group's abort flag (who: a rank, or -1 for the supervisor) with a
 * reason, and wake every waiter.  The first reason wins.  Safe from any
 * thread or process that maps the segment. */
void comm_seg_abort(comm_seg_t *s, int who, const char *why);
/* Non-zero once aborted; msg (ERR_LEN, may be NULL) receives
 * "aborted by rank R: why" / "aborted by the supervisor: why". */
bool comm_seg_aborted(comm_seg_t *s, char *msg);

/* For the supervisor: who raised the abort flag (a rank, -1 the supervisor,
 * -2 nobody) and why (ERR_LEN, may be NULL; "" while the reason is being written). */
int comm_seg_abort_origin(comm_seg_t *s, char *why);

/* The group's ledger, PyTorch's Flight Recorder told as it happens: every
 * launch of a rank whose comm has a segment (shm, NCCL under fork) notes
 * the collective's number on that rank (its handle), kind, count and tag
 * (comm.c); a timeout or a mismatch says where each rank stands:
 * "rank 0: #41 all-reduce of bucket 0 (250 floats); rank 1: #42 ...", each
 * rank's collective #seq when it still holds it (its last 4), else the
 * last one it launched (seq 0: each one's last). */
void comm_seg_note(comm_seg_t *s, int rank, uint64_t seq, const comm_op_t *op);
void comm_seg_ledger(comm_seg_t *s, uint64_t seq, char *buf, size_t n);

/* Rank 0 publishes len bytes (<= COMM_SEG_ID_MAX), every other rank waits for
 * them (bounded by timeout_s and the abort flag) and copies them into id.
 * Used once per group, for ncclUniqueId. */
#define COMM_SEG_ID_MAX 256
int comm_seg_exchange_id(comm_seg_t *s, int rank, void *id, size_t len, double timeout_s,
                         char *err);

// ---------------------------------------------------------------------------
// convenience: the forms callers use (comm.c)

int comm_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h);
/* span (may be NULL): op h's timing when it is already known (shm: always,
 * NCCL: once its events have completed), else zeros; comm_span asks later. */
int comm_wait(comm_t *c, comm_handle_t h, comm_span_t *span);
/* Op h's timing, asked once the rank's device work queued after the wait for
 * it has run (the step that waited for it has reported); zeros when the
 * implementation cannot tell, or no longer can (a few hundred ops later). */
void comm_span(comm_t *c, comm_handle_t h, comm_span_t *span);
/* Launch op and wait for it (and everything launched before it); *h (may be
 * NULL) receives its handle, for comm_wait's span later.  For a caller that
 * would wait at once anyway: see run above. */
int comm_run(comm_t *c, const comm_op_t *op, comm_handle_t *h);
/* Wait for everything launched so far. */
int comm_wait_all(comm_t *c);
int comm_all_reduce_async(comm_t *c, float *buf, size_t count, redop_t op, const char *tag,
                          comm_handle_t *h);
/* Blocking forms: launch, then wait for it. */
int comm_all_reduce(comm_t *c, float *buf, size_t count, redop_t op);
int comm_broadcast(comm_t *c, float *buf, size_t count, int root);
int comm_reduce(comm_t *c, float *buf, size_t count, redop_t op, int root);
int comm_all_gather(comm_t *c, const float *send, float *recv, size_t count);
/* send: count*world floats (NULL: in place, recv == send + rank*count);
 * recv: this rank's count floats of the reduction. */
int comm_reduce_scatter(comm_t *c, const float *send, float *recv, size_t count, redop_t op);
int comm_barrier(comm_t *c);
void comm_abort(comm_t *c, const char *why);
void comm_destroy(comm_t *c);
const char *comm_last_error(const comm_t *c);
/* rc of a comm call, with "<place>: <the comm's message>" in err when it
 * failed (just the message when place is NULL), like backend_check(). */
int comm_check(const comm_t *c, int rc, const char *place, char *err);

/* CUDA graphs: can this group's collectives be captured?  NCCL lets an
 * all-reduce queued on a capturing stream become nodes of a graph, but not
 * every build or configuration does (an older NCCL, some settings answer
 * ncclInvalidUsage): a step that captures its collectives must learn that
 * before it trains, not in its first graph step (comm_graph_probe.c).
 * Every rank of the group calls it at the same point, with no op in flight:
 * each captures an all-reduce of a few floats into a graph of its own,
 * running nothing; the ranks agree on the outcome over an eager all-reduce
 * (every rank must have captured); then each launches its graph and checks
 * the sum.  out->refused_by is -1 when all of that held, else the lowest
 * rank that could not capture (out->why: its reason, on that rank only;
 * "" elsewhere): nothing was launched and the communicator is as it was,
 * for eager steps.  insist: a rank that cannot capture returns its reason
 * at once as a failure (DDP_ERR_RUNTIME, err) without the agreement, so it
 * fails first and the others' agreement fails with its abort.  A wrong sum,
 * or the comm's own failure, is DDP_ERR_RUNTIME with the reason in err.
 * A communicator without graphs (shm, mpi) answers at once, on every rank:
 * refused by rank 0, which says why. */
typedef struct {
    int refused_by;
    char why[ERR_LEN];
} comm_graph_probe_t;
int comm_graph_probe(comm_t *c, bool insist, comm_graph_probe_t *out, char *err);

/* What a communicator is. */
int comm_world(const comm_t *c);
int comm_rank(const comm_t *c);
/* The bound on every wait for a peer (comm_args_t.timeout_s at creation).
 * Change it only while no op is in flight (after a wait for all): the comm's
 * thread reads it. */
double comm_timeout(const comm_t *c);
void comm_set_timeout(comm_t *c, double seconds);

#endif
