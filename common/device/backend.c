/* common/device/backend.c: the public face of every backend (backend.h):
 * creation by kind, the operations called through the backend's table, what
 * a device is, and the stand-in for the CUDA backend in builds without CUDA. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/backend_impl.h"

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
    return be->ops->alloc(be, bytes, MEM_WORKSPACE);
}

void *backend_alloc_for(backend_t *be, size_t bytes, mem_kind_t kind)
{
    return be->ops->alloc(be, bytes, kind);
}
void backend_free(backend_t *be, void *p) { be->ops->free(be, p); }
void *backend_alloc_host(backend_t *be, size_t bytes) { return be->ops->alloc_host(be, bytes); }
void backend_free_host(backend_t *be, void *p) { be->ops->free_host(be, p); }

int backend_h2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    return be->ops->h2d(be, dst, src, bytes);
}

int backend_d2h(backend_t *be, void *dst, const void *src, size_t bytes)
{
    return be->ops->d2h(be, dst, src, bytes);
}

int backend_d2d(backend_t *be, void *dst, const void *src, size_t bytes)
{
    return be->ops->d2d(be, dst, src, bytes);
}

int backend_memset0(backend_t *be, void *dst, size_t bytes)
{
    return be->ops->memset0(be, dst, bytes);
}

int backend_peer_copy(backend_t *be, void *dst, backend_t *src_be, const void *src, size_t bytes)
{
    return be->ops->peer_copy(be, dst, src_be, src, bytes);
}

int backend_gemm(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    return be->ops->gemm(be, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

int backend_bias_act_fwd(backend_t *be, act_t act, float *z, float *a, const float *b, int rows,
                         int cols)
{
    return be->ops->bias_act_fwd(be, act, z, a, b, rows, cols);
}

int backend_act_bwd(backend_t *be, act_t act, const float *z, const float *a, float *d, size_t n)
{
    return be->ops->act_bwd(be, act, z, a, d, n);
}

int backend_bias_grad(backend_t *be, float *db, const float *dz, int rows, int cols,
                      bool accumulate)
{
    return be->ops->bias_grad(be, db, dz, rows, cols, accumulate);
}

int backend_loss(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                 int cols, float grad_scale, float *grad, float *loss_sum)
{
    return be->ops->loss(be, kind, out, tgt, rows, cols, grad_scale, grad, loss_sum);
}

int backend_sgd(backend_t *be, const sgd_args_t *a, float *p, const float *g, float *buf, size_t n)
{
    return be->ops->sgd(be, a, p, g, buf, n);
}

int backend_adam(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m, float *v,
                 size_t n)
{
    return be->ops->adam(be, a, p, g, m, v, n);
}

int backend_axpy(backend_t *be, float alpha, const float *x, float *y, size_t n)
{
    return be->ops->axpy(be, alpha, x, y, n);
}

int backend_scale(backend_t *be, float alpha, float *x, size_t n)
{
    return be->ops->scale(be, alpha, x, n);
}

int backend_cast16(backend_t *be, dtype_t t, bool to16, float *f, uint16_t *h, size_t n)
{
    return be->ops->cast16(be, t, to16, f, h, n);
}

int backend_sync(backend_t *be) { return be->ops->sync(be); }

int backend_reserve(backend_t *be, int rows, int cols)
{
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
    if (be->ops->event_init(be, ev) != DDP_OK) {
        free(ev);
        return NULL;
    }
    return ev;
}

void backend_event_free(backend_t *be, backend_event_t *ev)
{
    if (!ev)
        return;
    be->ops->event_fini(be, ev);
    free(ev);
}

int backend_event_record(backend_t *be, backend_event_t *ev)
{
    return be->ops->event_record(be, ev);
}

int backend_event_query(backend_t *be, backend_event_t *ev, bool *done)
{
    return be->ops->event_query(be, ev, done);
}

int backend_event_sync(backend_t *be, backend_event_t *ev) { return be->ops->event_sync(be, ev); }

int backend_event_time(backend_t *be, backend_event_t *ev, double *t_s)
{
    if (!ev->timed)
        return backend_error(be, DDP_ERR_RUNTIME, "an untimed event has no time");
    return be->ops->event_time(be, ev, t_s);
}

int backend_stream_wait(backend_t *be, backend_event_t *ev)
{
    if (ev->be->kind != be->kind)
        return backend_error(be, DDP_ERR_RUNTIME, "device %d (%s) cannot wait for an event of "
                             "device %d (%s)", be->device_id, be->ops->name, ev->be->device_id,
                             ev->be->ops->name);
    return be->ops->stream_wait(be, ev);
}

int backend_copy_async(backend_t *be, void *dst, backend_t *src_be, const void *src,
                       size_t bytes, backend_event_t *after, backend_event_t *done)
{
    return be->ops->copy_async(be, dst, src_be, src, bytes, after, done);
}

int backend_d2h_async(backend_t *be, void *dst, const void *src, size_t bytes)
{
    return be->ops->d2h_async(be, dst, src, bytes);
}

long backend_host_syncs(const backend_t *be) { return be->host_syncs; }

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
