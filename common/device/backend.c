/* common/device/backend.c: the public face of every backend (backend.h):
 * creation by kind, the operations called through the backend's table, what
 * a device is, and the stand-in for the CUDA backend in builds without CUDA. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/device/backend_impl.h"

int backend_create(backend_t **out, backend_kind_t kind, int device_id, int blas_threads,
                   char *err)
{
    *out = NULL;
    switch (kind) {
    case BACKEND_CPU:
        return backend_cpu_create(out, device_id, blas_threads, err);
    case BACKEND_CUDA:
        return backend_cuda_create(out, device_id, err);
    case BACKEND_AUTO:
        break;
    }
    return err_set(err, DDP_ERR_INPUT, "backend: 'auto' must be resolved before creating a device");
}

void backend_destroy(backend_t *be)
{
    if (be)
        be->ops->destroy(be);
}

// ---------------------------------------------------------------------------
// what a device is

backend_kind_t backend_kind(const backend_t *be) { return be->kind; }
const char *backend_name(const backend_t *be) { return be->ops->name; }
int backend_device_id(const backend_t *be) { return be->device_id; }
bool backend_host_visible(const backend_t *be) { return be->host_visible; }
size_t backend_mem_in_use(const backend_t *be) { return be->mem_in_use; }
size_t backend_mem_peak(const backend_t *be) { return be->mem_peak; }

void backend_mem_peak_split(const backend_t *be, size_t split[MEM_KINDS])
{
    for (int k = 0; k < MEM_KINDS; k++)
        split[k] = be->mem_peak_by[k];
}

const char *mem_kind_name(mem_kind_t k)
{
    static const char *const names[MEM_KINDS] = {"parameters",  "gradients", "optimizer state",
                                                 "activations", "staging",   "comm buffers",
                                                 "workspace"};
    return (unsigned)k < MEM_KINDS ? names[k] : "?";
}

const char *mem_kind_key(mem_kind_t k)
{
    static const char *const keys[MEM_KINDS] = {"params",  "grads", "optimizer", "activations",
                                                "staging", "comm",  "workspace"};
    return (unsigned)k < MEM_KINDS ? keys[k] : "?";
}

const char *backend_last_error(const backend_t *be)
{
    return be && be->last_error[0] ? be->last_error : "unknown error";
}

int backend_error(backend_t *be, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(be->last_error, sizeof be->last_error, fmt, ap);
    va_end(ap);
    return code;
}

int backend_check(const backend_t *be, int rc, const char *place, char *err)
{
    if (rc == DDP_OK)
        return DDP_OK;
    if (place)
        return err_set(err, rc, "%s: %s", place, backend_last_error(be));
    return err_set(err, rc, "%s", backend_last_error(be));
}

// ---------------------------------------------------------------------------
// the operations, through the backend's table

void *backend_alloc(backend_t *be, size_t bytes)
{
    return backend_alloc_for(be, bytes, MEM_WORKSPACE);
}

void *backend_alloc_for(backend_t *be, size_t bytes, mem_kind_t kind)
{
    if (be->gmode != GRAPH_EAGER) {
        backend_error(be, DDP_ERR_RUNTIME, "an allocation inside a CUDA graph");
        return NULL;
    }
    return be->ops->alloc(be, bytes, kind);
}
void backend_free(backend_t *be, void *p)
{
    if (p)
        be->ops->free(be, p);
}
void *backend_alloc_host(backend_t *be, size_t bytes) { return be->ops->alloc_host(be, bytes); }
void backend_free_host(backend_t *be, void *p)
{
    if (p)
        be->ops->free_host(be, p);
}

/* One more of kind k queued (see backend_launches); inside a graph the
 * work is counted as the graph's one launch instead. */
static inline void counted(backend_t *be, launch_kind_t k)
{
    if (be->gmode == GRAPH_EAGER)
        atomic_fetch_add_explicit(&be->launches[k], 1, memory_order_relaxed);
}

// ---- inside a CUDA graph (backend.h) ----------------------------------------

static inline uint64_t P(const void *p) { return (uint64_t)(uintptr_t)p; }
static inline uint64_t F(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Fold one operation into the step's hash (FNV-1a over its words). */
static void graph_note(backend_t *be, const uint64_t *w, size_t n)
{
    uint64_t h = be->rhash;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            h ^= (w[i] >> (8 * b)) & 0xffu;
            h *= 1099511628211ull;
        }
    be->rhash = h;
    be->rops++;
}

/* Inside a graph: note the operation; when replaying, queue nothing. */
#define GRAPH_OP(be, ...)                                                                  \
    do {                                                                                   \
        if ((be)->gmode != GRAPH_EAGER) {                                                  \
            const uint64_t w_[] = {__VA_ARGS__};                                           \
            graph_note((be), w_, sizeof w_ / sizeof *w_);                                  \
            if ((be)->gmode == GRAPH_REPLAY)                                               \
                return DDP_OK;                                                             \
        }                                                                                  \
    } while (0)

/* What a graph cannot hold: a host wait, an allocation, the copy stream. */
#define NOT_IN_GRAPH(be, what)                                                             \
    do {                                                                                   \
        if ((be)->gmode != GRAPH_EAGER)                                                    \
            return backend_error((be), DDP_ERR_RUNTIME, "%s inside a CUDA graph", (what));      \
    } while (0)

bool backend_graphs_supported(const backend_t *be) { return be->ops->graph_capture != NULL; }

bool backend_graph_ready(const backend_t *be, int key)
{
    return key >= 0 && key < BACKEND_GRAPH_KEYS && be->gready[key];
}

/* After the graph state changed: whether a graph still holds work, and
 * when none does any more, the communicator's deferred abort (released). */
static void graph_held_update(backend_t *be)
{
    bool held = be->gmode != GRAPH_EAGER;
    for (int k = 0; k < BACKEND_GRAPH_KEYS; k++)
        held = held || be->gready[k];
    bool was = atomic_exchange(&be->gheld, held);
    if (was && !held && be->released)
        be->released(be->released_ctx);
}

bool backend_graphs_held(const backend_t *be) { return atomic_load(&be->gheld); }

void backend_on_graphs_released(backend_t *be, void (*fn)(void *ctx), void *ctx)
{
    be->released = fn;
    be->released_ctx = fn ? ctx : NULL;
}

void backend_graph_reset(backend_t *be)
{
    if (!be->ops->graph_drop || be->gmode != GRAPH_EAGER)
        return;
    for (int k = 0; k < BACKEND_GRAPH_KEYS; k++)
        if (be->gready[k]) {
            be->ops->graph_drop(be, k);
            be->gready[k] = false;
        }
    graph_held_update(be);
}

graph_mode_t backend_graph_state(const backend_t *be, int *key, unsigned long *serial)
{
    if (key)
        *key = be->gkey;
    if (serial)
        *serial = be->gserial;
    return be->gmode;
}

bool backend_graph_note(backend_t *be, const uint64_t *w, size_t n)
{
    if (be->gmode == GRAPH_EAGER)
        return false;
    graph_note(be, w, n);
    return be->gmode == GRAPH_REPLAY;
}

/* Graph steps begun in this process: each one's number (gstep). */
static _Atomic unsigned long long g_graph_steps;

/* What beginning and following a graph step share: the checks, and the
 * step's fresh count of the work it queues. */
static int graph_enter(backend_t *be, int key, const char *how)
{
    if (!be->ops->graph_capture)
        return backend_error(be, DDP_ERR_INPUT, "the %s backend has no CUDA graphs", be->ops->name);
    if (key < 0 || key >= BACKEND_GRAPH_KEYS || be->gmode != GRAPH_EAGER)
        return backend_error(be, DDP_ERR_RUNTIME, "graph %d %s inside another or out of range",
                             key, how);
    be->gkey = key;
    be->gserial++;
    be->rhash = 14695981039346656037ull;
    be->rops = 0;
    return DDP_OK;
}

int backend_graph_begin(backend_t *be, int key)
{
    TRY(graph_enter(be, key, "begun"));
    be->glead = NULL;
    be->gstep = atomic_fetch_add_explicit(&g_graph_steps, 1, memory_order_relaxed) + 1;
    if (be->gready[key]) {
        be->gmode = GRAPH_REPLAY;
        return DDP_OK;
    }
    TRY(be->ops->graph_capture(be, key));
    be->gmode = GRAPH_CAPTURE;
    graph_held_update(be);
    return DDP_OK;
}

int backend_graph_follow(backend_t *be, int key, backend_t *leader, backend_event_t *fork)
{
    TRY(graph_enter(be, key, "followed"));
    if (leader == be || leader->gmode == GRAPH_EAGER || leader->glead || leader->gkey != key ||
        fork->be != leader)
        return backend_error(be, DDP_ERR_RUNTIME,
                             "graph %d followed where device %d leads no such step", key,
                             leader->device_id);
    /* Both must know the key alike: the one that captures, or the one that
     * replays (the strategy's outcome barrier keeps them so). */
    if (be->gready[key] != (leader->gmode == GRAPH_REPLAY))
        return backend_error(be, DDP_ERR_RUNTIME,
                             "this device %s graph %d while device %d %s it",
                             be->gready[key] ? "holds" : "does not hold", key, leader->device_id,
                             leader->gmode == GRAPH_REPLAY ? "replays" : "captures");
    be->glead = leader;
    be->gstep = leader->gstep;
    be->gmode = leader->gmode;
    graph_held_update(be);
    if (be->gmode == GRAPH_REPLAY && be->ops->graph_follow)
        be->ops->graph_follow(be);
    /* Capturing, this wait joins the compute stream to the leader's capture. */
    return backend_stream_wait(be, fork);
}

/* A step's work against its graph's: kept when captured, checked when replayed. */
static int graph_settle(backend_t *be, int key, graph_mode_t mode)
{
    if (mode == GRAPH_CAPTURE) {
        be->ghash[key] = be->rhash;
        be->gops[key] = be->rops;
        be->gready[key] = true;
        return DDP_OK;
    }
    if (be->rhash != be->ghash[key] || be->rops != be->gops[key])
        return backend_error(be, DDP_ERR_RUNTIME,
                             "a step replayed by CUDA graph %d queued other work (%ld "
                             "operations) than the graph captured (%ld operations)",
                             key, be->rops, be->gops[key]);
    return DDP_OK;
}

/* backend_graph_end's work; the caller updates the held flag after it. */
static int graph_end(backend_t *be, graph_mode_t mode, bool member, int key, bool launch)
{
    if (mode == GRAPH_EAGER || key != be->gkey)
        return backend_error(be, DDP_ERR_RUNTIME, "graph %d ended without its begin", key);
    /* A member's stream only joined the leader's capture: the leader ends
     * it (CUDA refuses cudaStreamEndCapture on a joined stream). */
    if (!launch) {
        if (mode == GRAPH_CAPTURE && !member)
            be->ops->graph_drop(be, key);
        return DDP_OK;
    }
    if (mode == GRAPH_CAPTURE && !member) {
        int rc = be->ops->graph_instantiate(be, key);
        if (rc != DDP_OK) {
            be->ops->graph_drop(be, key);
            return rc;
        }
    }
    TRY(graph_settle(be, key, mode));
    if (member)
        return DDP_OK; /* the leader's launch runs this device's part */
    atomic_fetch_add_explicit(&be->launches[LAUNCH_GRAPH], 1, memory_order_relaxed);
    return be->ops->graph_launch(be, key);
}

int backend_graph_end(backend_t *be, int key, bool launch)
{
    graph_mode_t mode = be->gmode;
    bool member = be->glead != NULL;
    be->gmode = GRAPH_EAGER;
    be->glead = NULL;
    be->gstep = 0;
    int rc = graph_end(be, mode, member, key, launch);
    graph_held_update(be);
    return rc;
}

int backend_h2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    NOT_IN_GRAPH(be, "an upload from pageable memory");
    if (bytes)
        counted(be, LAUNCH_COPY);
    return be->ops->h2d(be, dst, src, bytes);
}

int backend_h2d_pinned(backend_t *be, void *dst, const void *src, size_t bytes)
{
    GRAPH_OP(be, 16, P(dst), P(src), bytes);
    if (bytes)
        counted(be, LAUNCH_COPY);
    /* the same copy as h2d's: on CUDA a cudaMemcpyAsync, which from pinned
     * memory reads its source when it runs */
    return be->ops->h2d(be, dst, src, bytes);
}

int backend_d2h(backend_t *be, void *dst, const void *src, size_t bytes)
{
    NOT_IN_GRAPH(be, "a waiting download");
    if (bytes)
        counted(be, LAUNCH_COPY);
    return be->ops->d2h(be, dst, src, bytes);
}

int backend_d2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    GRAPH_OP(be, 1, P(dst), P(src), bytes);
    if (bytes && dst != src)
        counted(be, LAUNCH_COPY);
    return be->ops->d2d(be, dst, src, bytes);
}

int backend_memset0(backend_t *be, void *dst, size_t bytes)
{
    GRAPH_OP(be, 2, P(dst), bytes);
    if (bytes)
        counted(be, LAUNCH_COPY);
    return be->ops->memset0(be, dst, bytes);
}

int backend_peer_copy(backend_t *be, void *dst, backend_t *src_be, const void *src, size_t bytes)
{
    GRAPH_OP(be, 3, P(dst), P(src_be), P(src), bytes);
    if (bytes)
        counted(be, LAUNCH_COPY);
    return be->ops->peer_copy(be, dst, src_be, src, bytes);
}

int backend_gemm(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    GRAPH_OP(be, 4, ta, tb, (uint64_t)m, (uint64_t)n, (uint64_t)k, F(alpha), P(A), (uint64_t)lda,
             P(B), (uint64_t)ldb, F(beta), P(C), (uint64_t)ldc);
    counted(be, LAUNCH_KERNEL);
    return be->ops->gemm(be, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

int backend_bias_act_fwd(backend_t *be, act_t act, float *z, float *a, const float *b, int rows,
                         int cols)
{
    GRAPH_OP(be, 5, act, P(z), P(a), P(b), (uint64_t)rows, (uint64_t)cols);
    counted(be, LAUNCH_KERNEL);
    return be->ops->bias_act_fwd(be, act, z, a, b, rows, cols);
}

int backend_act_bwd(backend_t *be, act_t act, const float *z, const float *a, float *d, size_t n)
{
    GRAPH_OP(be, 6, act, P(z), P(a), P(d), n);
    counted(be, LAUNCH_KERNEL);
    return be->ops->act_bwd(be, act, z, a, d, n);
}

int backend_bias_grad(backend_t *be, float *db, const float *dz, int rows, int cols,
                      bool accumulate)
{
    GRAPH_OP(be, 7, P(db), P(dz), (uint64_t)rows, (uint64_t)cols, accumulate);
    counted(be, LAUNCH_KERNEL);
    return be->ops->bias_grad(be, db, dz, rows, cols, accumulate);
}

int backend_loss(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                 int cols, float grad_scale, float *grad, float *loss_sum)
{
    GRAPH_OP(be, 8, kind, P(out), P(tgt), (uint64_t)rows, (uint64_t)cols, F(grad_scale), P(grad),
             P(loss_sum));
    counted(be, LAUNCH_KERNEL);
    return be->ops->loss(be, kind, out, tgt, rows, cols, grad_scale, grad, loss_sum);
}

int backend_sgd(backend_t *be, const sgd_args_t *a, float *p, const float *g, float *buf, size_t n)
{
    GRAPH_OP(be, 9, F(a->lr), F(a->momentum), F(a->dampening), F(a->weight_decay), a->nesterov,
             a->first_step, P(p), P(g), P(buf), n);
    counted(be, LAUNCH_KERNEL);
    return be->ops->sgd(be, a, p, g, buf, n);
}

int backend_adam(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m, float *v,
                 size_t n)
{
    if (be->gmode != GRAPH_EAGER) {
        /* The bias corrections change every step: the backend hands them to
         * the graph through device memory (so they are not in the hash), and
         * its adam() is called when replaying too, to write them. */
        const uint64_t w[] = {10, F(a->lr), F(a->beta1), F(a->beta2), F(a->eps),
                              F(a->weight_decay), a->decoupled, P(p), P(g), P(m), P(v), n};
        graph_note(be, w, sizeof w / sizeof *w);
    }
    counted(be, LAUNCH_KERNEL);
    return be->ops->adam(be, a, p, g, m, v, n);
}

int backend_axpy(backend_t *be, float alpha, const float *x, float *y, size_t n)
{
    GRAPH_OP(be, 11, F(alpha), P(x), P(y), n);
    counted(be, LAUNCH_KERNEL);
    return be->ops->axpy(be, alpha, x, y, n);
}

int backend_scale(backend_t *be, float alpha, float *x, size_t n)
{
    GRAPH_OP(be, 12, F(alpha), P(x), n);
    counted(be, LAUNCH_KERNEL);
    return be->ops->scale(be, alpha, x, n);
}

int backend_cast16(backend_t *be, dtype_t t, bool to16, float *f, uint16_t *h, size_t n)
{
    GRAPH_OP(be, 15, t, to16, P(f), P(h), n);
    counted(be, LAUNCH_KERNEL);
    return be->ops->cast16(be, t, to16, f, h, n);
}

int backend_sync(backend_t *be)
{
    NOT_IN_GRAPH(be, "a host synchronisation");
    return be->ops->sync ? be->ops->sync(be) : DDP_OK;
}

int backend_reserve(backend_t *be, int rows, int cols)
{
    NOT_IN_GRAPH(be, "reserving scratch");
    return be->ops->reserve ? be->ops->reserve(be, rows, cols) : DDP_OK;
}

// ---------------------------------------------------------------------------
// events, the copy stream, host synchronisations

backend_event_t *backend_event_new(backend_t *be, bool timed)
{
    backend_event_t *ev = calloc(1, sizeof *ev);
    if (!ev) {
        backend_error(be, DDP_ERR_RUNTIME, "out of host memory for an event");
        return NULL;
    }
    ev->be = be;
    ev->timed = timed;
    if (be->ops->event_init && be->ops->event_init(be, ev) != DDP_OK) {
        free(ev);
        return NULL;
    }
    return ev;
}

void backend_event_free(backend_t *be, backend_event_t *ev)
{
    if (!ev)
        return;
    if (be->ops->event_fini)
        be->ops->event_fini(be, ev);
    free(ev);
}

int backend_event_record(backend_t *be, backend_event_t *ev)
{
    ev->gstep = be->gstep; /* what a wait inside the step may look for */
    GRAPH_OP(be, 13, P(ev));
    counted(be, LAUNCH_EVENT);
    return be->ops->event_record(be, ev);
}

int backend_event_query(backend_t *be, backend_event_t *ev, bool *done)
{
    NOT_IN_GRAPH(be, "an event query");
    *done = true;
    return be->ops->event_query ? be->ops->event_query(be, ev, done) : DDP_OK;
}

int backend_event_sync(backend_t *be, backend_event_t *ev)
{
    NOT_IN_GRAPH(be, "a host wait for an event");
    return be->ops->event_sync ? be->ops->event_sync(be, ev) : DDP_OK;
}

int backend_event_time(backend_t *be, backend_event_t *ev, double *t_s)
{
    if (!ev->timed)
        return backend_error(be, DDP_ERR_RUNTIME, "an untimed event has no time");
    return be->ops->event_time(be, ev, t_s);
}

int backend_stream_wait(backend_t *be, backend_event_t *ev)
{
    if (ev->be->kind != be->kind)
        return backend_error(be, DDP_ERR_RUNTIME, "a %s device cannot wait for an event of "
                             "device %d (%s)", be->ops->name, ev->be->device_id,
                             ev->be->ops->name);
    /* Inside a graph step only the step's own records: a record from before
     * it would pair, at each launch, with whatever that event last held. */
    if (be->gmode != GRAPH_EAGER && (ev->gstep == 0 || ev->gstep != be->gstep))
        return backend_error(be, DDP_ERR_RUNTIME,
                             "a wait inside a CUDA graph for an event of device %d recorded "
                             "outside the graph's step", ev->be->device_id);
    GRAPH_OP(be, 17, P(ev));
    counted(be, LAUNCH_EVENT);
    return be->ops->stream_wait ? be->ops->stream_wait(be, ev) : DDP_OK;
}

int backend_copy_async(backend_t *be, void *dst, backend_t *src_be, const void *src,
                       size_t bytes, backend_event_t *after, backend_event_t *done)
{
    NOT_IN_GRAPH(be, "a copy on the copy stream");
    if (bytes)
        counted(be, LAUNCH_COPY);
    return be->ops->copy_async(be, dst, src_be, src, bytes, after, done);
}

int backend_d2h_async(backend_t *be, void *dst, const void *src, size_t bytes)
{
    GRAPH_OP(be, 14, P(dst), P(src), bytes);
    if (bytes)
        counted(be, LAUNCH_COPY);
    return be->ops->d2h_async(be, dst, src, bytes);
}

long backend_host_syncs(const backend_t *be) { return be->host_syncs; }

const char *launch_kind_key(launch_kind_t k)
{
    static const char *const keys[LAUNCH_KINDS] = {"kernels", "copies", "collectives", "graphs",
                                                   "events"};
    return (unsigned)k < LAUNCH_KINDS ? keys[k] : "?";
}

long backend_launches(const backend_t *be, launch_kind_t k)
{
    return (unsigned)k < LAUNCH_KINDS ? atomic_load_explicit(&be->launches[k], memory_order_relaxed)
                                      : 0;
}

void backend_count_launch(backend_t *be, launch_kind_t k, long n)
{
    if ((unsigned)k < LAUNCH_KINDS && be->gmode == GRAPH_EAGER)
        atomic_fetch_add_explicit(&be->launches[k], n, memory_order_relaxed);
}

void backend_count_host_sync(backend_t *be)
{
    if (!be->host_visible) /* the CPU computes as it is called: nothing to wait for */
        be->host_syncs++;
}

void backend_set_watch(backend_t *be, backend_watch_fn fn, void *ctx)
{
    be->watch = fn;
    be->watch_ctx = fn ? ctx : NULL;
}

double backend_peak_flops(backend_t *be)
{
    return be->gmode == GRAPH_EAGER && be->ops->peak ? be->ops->peak(be) : 0.0;
}

int backend_set_precision(backend_t *be, precision_t p)
{
    int rc = be->ops->set_precision(be, p);
    if (rc == DDP_OK)
        be->precision = p;
    return rc;
}

precision_t backend_precision(const backend_t *be) { return be->precision; }

#ifndef HAVE_CUDA
bool backend_cuda_available(void) { return false; }

int backend_cuda_probe(char *why)
{
    err_set(why, DDP_OK, "this ddpbench was built without CUDA");
    return 0;
}

const gpu_topology_t *backend_cuda_gpus(void) { return NULL; }

int backend_cuda_create(backend_t **out, int device_id, char *err)
{
    *out = NULL;
    return err_set(err, DDP_ERR_INPUT,
                   "--backend cuda: this ddpbench was built without CUDA (device %d)", device_id);
}
#endif
