/* common/device/backend_impl.h: how a backend is built, for its implementers
 * (backend_cpu.c, backend_cuda.c) and for tests that build fakes; callers use
 * backend.h alone.
 *
 * A backend is a fixed table of operations (backend_ops_t) plus private state
 * behind impl (a CUDA stream and cuBLAS handle, or nothing on the CPU), in the
 * way ggml-backend-impl.h sits behind ggml-backend.h.  The contract of each operation is
 * the comment on its backend_* function in backend.h. */
#ifndef DDPBENCH_BACKEND_IMPL_H
#define DDPBENCH_BACKEND_IMPL_H

#include <stdatomic.h>

#include "common/device/backend.h"

typedef struct backend_ops {
    const char *name; /* "cpu" or "cuda" */

    /* -- memory ------------------------------------------------------------ */
    /* zeroed; NULL on failure; counted under kind (backend_account) */
    void *(*alloc)(backend_t *be, size_t bytes, mem_kind_t kind);
    void (*free)(backend_t *be, void *p);
    void *(*alloc_host)(backend_t *be, size_t bytes); /* pinned staging memory */
    void (*free_host)(backend_t *be, void *p);
    int (*h2d)(backend_t *be, void *dst, const void *src, size_t bytes); /* src valid until sync */
    int (*d2h)(backend_t *be, void *dst, const void *src, size_t bytes); /* waits */
    int (*d2d)(backend_t *be, void *dst, const void *src, size_t bytes);
    int (*memset0)(backend_t *be, void *dst, size_t bytes);
    int (*peer_copy)(backend_t *be, void *dst, backend_t *src_be, const void *src,
                     size_t bytes);

    /* -- compute: row-major, like torch ------------------------------------ */
    int (*gemm)(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C,
                int ldc);
    int (*bias_act_fwd)(backend_t *be, act_t act, float *z, float *a, const float *b,
                        int rows, int cols);
    int (*act_bwd)(backend_t *be, act_t act, const float *z, const float *a, float *d,
                   size_t n);
    int (*bias_grad)(backend_t *be, float *db, const float *dz, int rows, int cols,
                     bool accumulate);
    int (*loss)(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                int cols, float grad_scale, float *grad, float *loss_sum);
    int (*sgd)(backend_t *be, const sgd_args_t *a, float *p, const float *g, float *buf,
               size_t n);
    int (*adam)(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m,
                float *v, size_t n);
    int (*axpy)(backend_t *be, float alpha, const float *x, float *y, size_t n);
    int (*scale)(backend_t *be, float alpha, float *x, size_t n);
    int (*cast16)(backend_t *be, dtype_t t, bool to16, float *f, uint16_t *h, size_t n);

    /* -- control; sync and the events' init, fini, query, sync and stream_wait may be NULL
     * on a device that computes as it is called (nothing to wait for: done) -- */
    int (*sync)(backend_t *be);
    int (*reserve)(backend_t *be, int rows, int cols); /* NULL: no scratch to reserve */
    void (*destroy)(backend_t *be);

    int (*event_init)(backend_t *be, backend_event_t *ev);  /* fill ev->h */
    void (*event_fini)(backend_t *be, backend_event_t *ev);
    int (*event_record)(backend_t *be, backend_event_t *ev);
    int (*event_query)(backend_t *be, backend_event_t *ev, bool *done);
    int (*event_sync)(backend_t *be, backend_event_t *ev);
    int (*event_time)(backend_t *be, backend_event_t *ev, double *t_s);
    int (*stream_wait)(backend_t *be, backend_event_t *ev);
    int (*copy_async)(backend_t *be, void *dst, backend_t *src_be, const void *src,
                      size_t bytes, backend_event_t *after, backend_event_t *done);
    int (*d2h_async)(backend_t *be, void *dst, const void *src, size_t bytes);
    int (*set_precision)(backend_t *be, precision_t p); /* backend_set_precision */
    double (*peak)(backend_t *be); /* backend_peak_flops */
    /* -- CUDA graphs (backend.h); NULL on a backend without them ----------- */
    int (*graph_capture)(backend_t *be, int key);  /* begin capturing on the compute stream */
    int (*graph_instantiate)(backend_t *be, int key); /* end the capture, instantiate */
    int (*graph_launch)(backend_t *be, int key);   /* launch key's graph on the compute stream */
    void (*graph_drop)(backend_t *be, int key);    /* forget key's graph (after a failure) */
    /* a member's step replayed by its leader's launch (backend_graph_follow):
     * the device's own bookkeeping (CUDA: the clock's next anchor); NULL: none */
    void (*graph_follow)(backend_t *be);
} backend_ops_t;

/* An event: which device it belongs to and the backend's handle (CUDA: a
 * cudaEvent_t); on the CPU, t is the host time of its last record. */
struct backend_event {
    backend_t *be;
    bool timed;
    /* the graph step (backend's gstep) of its last record, 0 when recorded
     * eagerly: inside a graph a wait is only for the step's own records */
    unsigned long long gstep;
    double t;
    void *h;
    void *edge; /* CUDA: a second event, the capture's cross-stream dependency
                   (backend_cuda.c's cuda_event_record) */
};

struct backend {
    const backend_ops_t *ops;
    backend_kind_t kind;
    int device_id;      /* the id the user named (--gpus) */
    bool host_visible;  /* device memory is host memory (CPU backend) */
    size_t mem_in_use;  /* bytes from alloc() not yet freed */
    size_t mem_peak;    /* high-water mark of mem_in_use */
    size_t mem_by[MEM_KINDS];      /* mem_in_use by purpose */
    size_t mem_peak_by[MEM_KINDS]; /* mem_by when mem_peak was reached */
    char last_error[ERR_LEN];
    long host_syncs;    /* times the host waited for this device (backend.h) */
    /* work queued on it, by kind (backend.h); atomic: DP's device 0 queues a
     * peer copy on another device's backend while that device's thread reads
     * its counts (relaxed: they are tallies, ordering nothing) */
    _Atomic long launches[LAUNCH_KINDS];
    graph_mode_t gmode; /* inside backend_graph_begin/end: capturing or replaying */
    int gkey;           /* the key being captured or replayed */
    unsigned long gserial; /* backend_graph_begin/_follow calls so far (backend_graph_state) */
    /* the graph step under way, a number unique in the process (shared by a
     * leader and its members); 0 outside one */
    unsigned long long gstep;
    backend_t *glead;   /* following this leader's graph (backend_graph_follow), or NULL */
    bool gready[BACKEND_GRAPH_KEYS];          /* key holds an instantiated graph */
    unsigned long long ghash[BACKEND_GRAPH_KEYS]; /* what its capture queued (hashed) */
    long gops[BACKEND_GRAPH_KEYS];            /* and how many operations */
    /* a graph holds work of this device (gmode or a gready key): set by the
     * owning thread, read by any (backend_graphs_held); when it drops, the
     * owner calls released (backend_on_graphs_released) */
    _Atomic bool gheld;
    void (*released)(void *ctx);
    void *released_ctx;
    unsigned long long rhash; /* the replay so far, checked against ghash at the end */
    long rops;
    precision_t precision; /* --precision (backend_set_precision) */
    backend_watch_fn watch; /* run while the host waits (backend_set_watch) */
    void *watch_ctx;
    void *impl;         /* the backend's private state */
};

/* Track an allocation against the device's memory figures (alloc/free, and
 * memory a library allocates on the device for us), under what it is for: a
 * free gives back what its allocation took under the same kind.  Only the
 * thread that owns the device allocates on it: no lock needed. */
static inline void backend_account(backend_t *be, long long delta_bytes, mem_kind_t kind)
{
    if ((unsigned)kind >= MEM_KINDS)
        kind = MEM_WORKSPACE;
    if (delta_bytes < 0 && (size_t)(-delta_bytes) > be->mem_by[kind])
        delta_bytes = -(long long)be->mem_by[kind];
    be->mem_by[kind] += (size_t)delta_bytes;
    be->mem_in_use += (size_t)delta_bytes;
    if (be->mem_in_use > be->mem_peak) { /* a new peak: what it holds, by kind */
        be->mem_peak = be->mem_in_use;
        for (int k = 0; k < MEM_KINDS; k++)
            be->mem_peak_by[k] = be->mem_by[k];
    }
}

#endif
