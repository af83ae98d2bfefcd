/* tests/cuda_emu/emu_nccl.c: the NCCL calls ddpbench makes, on the CPU (see
 * nccl.h), for ranks that are forked processes (DDP) or threads of one
 * process (ncclCommInitAll).
 *
 * ncclGetUniqueId creates a shared-memory segment and puts its name in the
 * id; every rank maps it at init (the last to join removes the name, so
 * nothing outlives the group; rank 0 removes it itself if the group never
 * forms).  A collective is queued on the caller's stream and runs on that
 * stream's thread in chunks: each rank copies its part into its slot,
 * publishes a ticket, waits for every rank's ticket, computes its result from
 * all slots in rank order (so every rank gets the same bits), and publishes
 * that it is done, after which the slots may be reused.  A rank whose peer
 * never comes waits on its stream -- like an NCCL kernel -- until
 * ncclCommAbort releases it.  On a capturing stream a collective is
 * recorded like any other work (emu_enqueue), not run, and runs again at
 * every launch of the graph, as NCCL's captured collectives do; the
 * capture's refusals are the runtime's.  Only ncclSum is needed (ddpbench never asks for
 * ncclAvg), of ncclFloat, and for the compression hooks' all-reduce of
 * ncclHalf and ncclBfloat16: an even count (ddpbench pads), each addition
 * rounded to 16 bits as NCCL's FuncSum<half> does (base/half.h), in rank
 * order (real NCCL adds in its ring's order, so it may differ by a rounding
 * per addition). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/base/half.h"
#include "cuda_runtime_api.h"
#include "nccl.h"

#define EMU_NCCL_MAX 64
#define EMU_NCCL_CHUNK (1 << 16) /* floats per rank per chunk */

typedef struct {
    _Atomic int joined;
    _Atomic int unlinked;
    _Atomic uint64_t arrived[EMU_NCCL_MAX]; /* the last chunk each rank staged */
    _Atomic uint64_t done[EMU_NCCL_MAX];    /* the last chunk each rank finished */
    float data[EMU_NCCL_MAX][EMU_NCCL_CHUNK];
} seg_t;

struct emu_nccl_comm {
    seg_t *seg;
    bool shm;              /* a mapping (else a heap segment shared in-process) */
    _Atomic int *seg_users; /* in-process: comms still using the heap segment */
    char name[128];
    int rank, world, dev;
    _Atomic int aborted;
    _Atomic int refs;      /* the owner, and each queued collective */
    _Atomic int in_graphs; /* its collectives a CUDA graph (or a capture) holds */
    uint64_t ticket;       /* chunks this rank has started (its stream thread only) */
};

static __thread char last_error[256];

static ncclResult_t fail(ncclResult_t r, const char *msg)
{
    snprintf(last_error, sizeof last_error, "%s", msg);
    return r;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return last_error;
}

ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

// ---------------------------------------------------------------------------
// the group

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static _Atomic unsigned counter;
    memset(id, 0, sizeof *id);
    /* EMU_NCCL_SHM_TAG (a short word) goes into the name, so a test can count
     * the segments its own runs left behind, not another test's running beside it */
    const char *tag = getenv("EMU_NCCL_SHM_TAG");
    snprintf(id->internal, sizeof id->internal, "/ddpbench-emunccl-%.16s%s%d-%u-%ld", tag ? tag : "",
             tag ? "-" : "", (int)getpid(), atomic_fetch_add(&counter, 1), (long)(time(NULL) % 100000));
    int fd = shm_open(id->internal, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return fail(ncclSystemError, "emulated NCCL: shm_open failed");
    int rc = ftruncate(fd, (off_t)sizeof(seg_t));
    close(fd);
    if (rc != 0) {
        shm_unlink(id->internal);
        return fail(ncclSystemError, "emulated NCCL: ftruncate failed");
    }
    return ncclSuccess;
}

static void unlink_once(struct emu_nccl_comm *c)
{
    if (c->shm && atomic_exchange(&c->seg->unlinked, 1) == 0)
        shm_unlink(c->name);
}

static void release(struct emu_nccl_comm *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    if (c->shm) {
        /* rank 0 made the name: if the group never formed, nobody else will
         * remove it */
        if (c->rank == 0)
            unlink_once(c);
        munmap(c->seg, sizeof(seg_t));
    } else if (atomic_fetch_sub(c->seg_users, 1) == 1) {
        free(c->seg);
        free(c->seg_users);
    }
    free(c);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    *out = NULL;
    if (nranks < 1 || nranks > EMU_NCCL_MAX || rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "emulated NCCL: bad rank or group size");
    struct emu_nccl_comm *c = calloc(1, sizeof *c);
    if (!c)
        return fail(ncclSystemError, "emulated NCCL: out of memory");
    snprintf(c->name, sizeof c->name, "%s", id.internal);
    int fd = shm_open(c->name, O_RDWR, 0600);
    if (fd < 0) {
        free(c);
        return fail(ncclSystemError, "emulated NCCL: the group's segment is gone");
    }
    c->seg = mmap(NULL, sizeof(seg_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->seg == MAP_FAILED) {
        free(c);
        return fail(ncclSystemError, "emulated NCCL: mmap failed");
    }
    c->shm = true;
    c->rank = rank;
    c->world = nranks;
    cudaGetDevice(&c->dev);
    atomic_store(&c->refs, 1);
    if (atomic_fetch_add(&c->seg->joined, 1) + 1 == nranks)
        unlink_once(c); /* everyone has it mapped */
    *out = c;
    if (config && !config->blocking)
        return atomic_load(&c->seg->joined) >= nranks ? ncclSuccess : ncclInProgress;
    while (atomic_load(&c->seg->joined) < nranks) /* blocking init waits, like NCCL's */
        usleep(100);
    return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    if (ndev < 1 || ndev > EMU_NCCL_MAX)
        return fail(ncclInvalidArgument, "emulated NCCL: bad device count");
    for (int i = 0; i < ndev; i++)
        for (int j = 0; j < i; j++)
            if (devlist[i] == devlist[j])
                return fail(ncclInvalidUsage, "emulated NCCL: duplicate GPU in the device list");
    seg_t *seg = calloc(1, sizeof *seg);
    _Atomic int *users = calloc(1, sizeof *users);
    if (!seg || !users) {
        free(seg);
        free(users);
        return fail(ncclSystemError, "emulated NCCL: out of memory");
    }
    atomic_store(users, ndev);
    atomic_store(&seg->joined, ndev);
    for (int i = 0; i < ndev; i++) {
        struct emu_nccl_comm *c = calloc(1, sizeof *c);
        if (!c)
            abort();
        c->seg = seg;
        c->seg_users = users;
        c->rank = i;
        c->world = ndev;
        c->dev = devlist ? devlist[i] : i;
        atomic_store(&c->refs, 1);
        comms[i] = c;
    }
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state)
{
    if (atomic_load(&c->aborted))
        *state = ncclRemoteError;
    else
        *state = atomic_load(&c->seg->joined) >= c->world ? ncclSuccess : ncclInProgress;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    (void)c;
    return ncclSuccess;
}

/* NCCL frees a communicator only once no CUDA graph holds its captured
 * collectives: ncclCommDestroy and ncclCommAbort poll until every such graph
 * (a capture's too) is destroyed (src/init.cc, commDestroySync: "keep polling
 * until all graphs referencing us die"), so a process that destroys its
 * graphs after its communicators waits forever.  Here the wait is bounded
 * (EMU_NCCL_GRAPH_WAIT_S, 10 s) and then ends the process, naming it. */
static void wait_for_graphs(struct emu_nccl_comm *c, const char *what)
{
    const char *e = getenv("EMU_NCCL_GRAPH_WAIT_S");
    double limit = e && *e ? atof(e) : 10.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (atomic_load(&c->in_graphs) > 0) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > limit) {
            emu_die("%s of rank %d: CUDA graphs still hold %d of its captured collectives "
                    "after %g s (NCCL waits until they are destroyed: forever)",
                    what, c->rank, atomic_load(&c->in_graphs), limit);
        }
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (c) {
        wait_for_graphs(c, "ncclCommDestroy");
        release(c);
    }
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c)
        return ncclSuccess;
    atomic_store(&c->aborted, 1); /* releases its collectives waiting for peers */
    wait_for_graphs(c, "ncclCommAbort");
    release(c);
    return ncclSuccess;
}

// ---------------------------------------------------------------------------
// collectives, on the stream's thread

typedef enum { K_ALL_REDUCE, K_REDUCE, K_BROADCAST, K_ALL_GATHER, K_REDUCE_SCATTER } kind_t;

typedef struct {
    kind_t kind;
    const float *send;
    float *recv;
    size_t count;       /* floats; 16-bit: pairs of elements (words) */
    int root;
    struct emu_nccl_comm *c;
    dtype_t dt;         /* DTYPE_F32, or the 16-bit all-reduce's format */
    bool captured;      /* held by a graph: counted in c->in_graphs */
} coll_t;

/* Until every rank's counter has reached k; false when aborted. */
static bool wait_all(struct emu_nccl_comm *c, _Atomic uint64_t *ctr, uint64_t k)
{
    for (long spins = 0;; spins++) {
        int q = 0;
        while (q < c->world && atomic_load(&ctr[q]) >= k)
            q++;
        if (q == c->world)
            return true;
        if (atomic_load(&c->aborted))
            return false;
        if (spins > 200)
            usleep(20);
    }
}

/* Reduce-scatter: block b (count floats at send + b*count on every rank) is
 * summed onto rank b's recv, one block after another, in rank order. */
static void run_reduce_scatter(coll_t *o)
{
    struct emu_nccl_comm *c = o->c;
    seg_t *s = c->seg;
    int r = c->rank, n = c->world;
    for (int b = 0; b < n; b++)
        for (size_t off = 0; off < o->count && !atomic_load(&c->aborted); off += EMU_NCCL_CHUNK) {
            size_t len = o->count - off < EMU_NCCL_CHUNK ? o->count - off : EMU_NCCL_CHUNK;
            uint64_t k = ++c->ticket;
            if (!wait_all(c, s->done, k - 1))
                return;
            memcpy(s->data[r], o->send + (size_t)b * o->count + off, len * sizeof(float));
            atomic_store(&s->arrived[r], k);
            if (!wait_all(c, s->arrived, k))
                return;
            if (r == b)
                for (size_t i = 0; i < len; i++) {
                    float t = s->data[0][i];
                    for (int q = 1; q < n; q++)
                        t += s->data[q][i];
                    o->recv[off + i] = t;
                }
            atomic_store(&s->done[r], k);
        }
}

static void run_coll(void *arg)
{
    coll_t *o = arg;
    if (o->kind == K_REDUCE_SCATTER) {
        run_reduce_scatter(o);
        return;
    }
    struct emu_nccl_comm *c = o->c;
    seg_t *s = c->seg;
    int r = c->rank, n = c->world;
    for (size_t off = 0; off < o->count && !atomic_load(&c->aborted); off += EMU_NCCL_CHUNK) {
        size_t len = o->count - off < EMU_NCCL_CHUNK ? o->count - off : EMU_NCCL_CHUNK;
        uint64_t k = ++c->ticket;
        if (!wait_all(c, s->done, k - 1)) /* every rank is through the last chunk */
            return;
        bool stages = o->kind != K_BROADCAST || r == o->root;
        if (stages)
            memcpy(s->data[r], o->send + off, len * sizeof(float));
        atomic_store(&s->arrived[r], k);
        if (!wait_all(c, s->arrived, k))
            return;
        switch (o->kind) {
        case K_ALL_REDUCE:
        case K_REDUCE:
            if (o->kind == K_REDUCE && r != o->root)
                break;
            if (o->dt != DTYPE_F32) { /* 16-bit pairs, each addition rounded */
                uint16_t *out16 = (uint16_t *)(o->recv + off);
                for (size_t i = 0; i < 2 * len; i++) {
                    uint16_t t = ((const uint16_t *)s->data[0])[i];
                    for (int q = 1; q < n; q++)
                        t = dtype16_add(o->dt, t, ((const uint16_t *)s->data[q])[i]);
                    out16[i] = t;
                }
                break;
            }
            for (size_t i = 0; i < len; i++) { /* rank order: the same bits everywhere */
                float t = s->data[0][i];
                for (int q = 1; q < n; q++)
                    t += s->data[q][i];
                o->recv[off + i] = t;
            }
            break;
        case K_BROADCAST:
            memcpy(o->recv + off, s->data[o->root], len * sizeof(float));
            break;
        case K_ALL_GATHER:
            for (int q = 0; q < n; q++)
                memcpy(o->recv + (size_t)q * o->count + off, s->data[q], len * sizeof(float));
            break;
        case K_REDUCE_SCATTER: /* run_reduce_scatter's, above */
            break;
        }
        atomic_store(&s->done[r], k);
    }
}

static void free_coll(void *arg)
{
    coll_t *o = arg;
    if (o->captured)
        atomic_fetch_sub(&o->c->in_graphs, 1);
    release(o->c);
    free(o);
}

/* A planted refusal, as a build or configuration of NCCL that cannot be
 * captured answers: EMU_NCCL_REFUSE_CAPTURE=N makes the N-th collective
 * (of any kind) queued on a capturing stream in this process, and every
 * later one, return ncclInvalidUsage (1: every one; 2: ddp's start-up
 * probe's all-reduce passes, a step's first collective is refused), only on
 * rank EMU_NCCL_REFUSE_RANK when that is set.  Nothing is queued and the
 * communicator stays usable. */
static bool refuse_capture(ncclComm_t c, cudaStream_t s)
{
    static _Atomic long captured;
    const char *n = getenv("EMU_NCCL_REFUSE_CAPTURE"), *r = getenv("EMU_NCCL_REFUSE_RANK");
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (!n || !*n || !c || (r && *r && atoi(r) != c->rank) ||
        cudaStreamIsCapturing(s, &st) != cudaSuccess || st != cudaStreamCaptureStatusActive)
        return false;
    return atomic_fetch_add(&captured, 1) + 1 >= atol(n);
}

static ncclResult_t enqueue(kind_t kind, const void *send, void *recv, size_t count,
                            ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                            cudaStream_t s)
{
    if (!c || atomic_load(&c->aborted))
        return fail(ncclInvalidUsage, "emulated NCCL: the communicator was aborted");
    if (refuse_capture(c, s))
        return fail(ncclInvalidUsage, "emulated NCCL: EMU_NCCL_REFUSE_CAPTURE: this NCCL does "
                                      "not capture collectives");
    dtype_t dt = t == ncclHalf ? DTYPE_F16 : t == ncclBfloat16 ? DTYPE_BF16 : DTYPE_F32;
    if ((t != ncclFloat && dt == DTYPE_F32) || op != ncclSum)
        return fail(ncclInvalidArgument, "emulated NCCL: only float, half and bfloat16 sums "
                                         "are emulated");
    if (dt != DTYPE_F32) {
        if (kind != K_ALL_REDUCE || count % 2)
            return fail(ncclInvalidArgument, "emulated NCCL: 16-bit types only in an all-reduce "
                                             "of an even count");
        count /= 2; /* moved as float-sized pairs */
    }
    if (root < 0 || root >= c->world)
        return fail(ncclInvalidArgument, "emulated NCCL: bad root");
    size_t out = kind == K_ALL_GATHER ? count * (size_t)c->world : count;
    size_t in = kind == K_REDUCE_SCATTER ? count * (size_t)c->world : count;
    if (count) {
        emu_check_ptr(recv, out * sizeof(float), "nccl recv");
        if (kind != K_BROADCAST || c->rank == root)
            emu_check_ptr(send, in * sizeof(float), "nccl send");
    }
    emu_check_stream(s, "nccl collective");
    coll_t *o = malloc(sizeof *o);
    if (!o)
        return fail(ncclSystemError, "emulated NCCL: out of memory");
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    bool captured = cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
    *o = (coll_t){kind, send, recv, count, root, c, dt, captured};
    atomic_fetch_add(&c->refs, 1);
    if (captured)
        atomic_fetch_add(&c->in_graphs, 1);
    emu_enqueue(s, run_coll, o, free_coll);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t s)
{
    return enqueue(K_ALL_REDUCE, send, recv, count, t, op, 0, comm, s);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s)
{
    return enqueue(K_REDUCE, send, recv, count, t, op, root, comm, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t s)
{
    return enqueue(K_BROADCAST, send, recv, count, t, ncclSum, root, comm, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t s)
{
    return enqueue(K_ALL_GATHER, send, recv, count, t, ncclSum, 0, comm, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t s)
{
    return enqueue(K_REDUCE_SCATTER, send, recv, count, t, op, 0, comm, s);
}

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH;
    return ncclSuccess;
}
