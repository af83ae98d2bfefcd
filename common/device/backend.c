/* common/device/backend.c: the public face of every backend (backend.h):
 * creation by kind, the operations called through the backend's table, what
 * a device is, and the stand-in for the CUDA backend in builds without CUDA. */
#include <stdarg.h>
#include <stdio.h>
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

void *backend_alloc(backend_t *be, size_t bytes) { return be->ops->alloc(be, bytes); }
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

int backend_sync(backend_t *be) { return be->ops->sync(be); }

#ifndef HAVE_CUDA
bool backend_cuda_available(void) { return false; }

int backend_cuda_probe(char *why)
{
    err_set(why, DDP_OK, "this ddpbench was built without CUDA");
    return 0;
}

void backend_cuda_probe_info(gpu_probe_t *out) { memset(out, 0, sizeof *out); }

int backend_cuda_create(backend_t **out, int device_id, char *err)
{
    *out = NULL;
    return err_set(err, DDP_ERR_INPUT,
                   "--backend cuda: this ddpbench was built without CUDA (device %d)", device_id);
}
#endif
