/* common/backend.c: backend creation by kind, memory accounting, and the
 * stand-in for the CUDA backend in builds without CUDA. */
#include "device/backend.h"

#include <stdio.h>

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

const char *backend_last_error(const backend_t *be)
{
    return be && be->last_error[0] ? be->last_error : "unknown error";
}

void backend_account(backend_t *be, long long delta_bytes)
{
    /* Only the thread that owns the device allocates on it: no lock needed. */
    if (delta_bytes < 0 && (size_t)(-delta_bytes) > be->mem_in_use)
        be->mem_in_use = 0;
    else
        be->mem_in_use += (size_t)delta_bytes;
    if (be->mem_in_use > be->mem_peak)
        be->mem_peak = be->mem_in_use;
}

#ifndef HAVE_CUDA
bool backend_cuda_available(void) { return false; }

int backend_cuda_probe(char *why)
{
    err_set(why, DDP_OK, "this ddpbench was built without CUDA");
    return 0;
}

int backend_cuda_create(backend_t **out, int device_id, char *err)
{
    *out = NULL;
    return err_set(err, DDP_ERR_INPUT,
                   "--backend cuda: this ddpbench was built without CUDA (device %d)", device_id);
}
#endif
