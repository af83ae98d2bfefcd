/* common/backend.h: the compute backend seam.
 *
 * A backend is one device: a fixed table of operations (backend_ops_t) plus
 * private state behind impl (a CUDA stream and cuBLAS handle, or nothing on the
 * CPU).  The model, losses, optimizers and strategies call only these, so they
 * never know which device computes.  Pointers called "device" below are what
 * alloc() returned; on the CPU backend they are ordinary host memory
 * (host_visible is true) and strategies may write them directly.
 *
 * Ordering: operations on one backend run in call order (a CUDA stream).  They
 * may return before the work is done; sync() waits for all of it, and d2h()
 * waits for the work before it.  Every operation returns DDP_OK or
 * DDP_ERR_RUNTIME with a message in backend_last_error(). */
#ifndef DDPBENCH_BACKEND_H
#define DDPBENCH_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "base/kinds.h"
#include "base/status.h"

typedef struct backend backend_t;

typedef struct {
    float lr, momentum, dampening, weight_decay;
    bool nesterov;
    bool first_step; /* torch: the first momentum step sets buf = grad */
} sgd_args_t;

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    bool decoupled;   /* AdamW: p *= 1 - lr*wd instead of g += wd*p */
    double bias_correction1; /* 1 - beta1^t */
    double bias_correction2; /* 1 - beta2^t */
} adam_args_t;

typedef struct backend_ops {
    const char *name; /* "cpu" or "cuda" */

    /* -- memory ------------------------------------------------------------ */
    void *(*alloc)(backend_t *be, size_t bytes); /* zeroed; NULL on failure */
    void (*free)(backend_t *be, void *p);
    void *(*alloc_host)(backend_t *be, size_t bytes); /* pinned staging memory */
    void (*free_host)(backend_t *be, void *p);
    int (*h2d)(backend_t *be, void *dst, const void *src, size_t bytes); /* src valid until sync */
    int (*d2h)(backend_t *be, void *dst, const void *src, size_t bytes); /* waits */
    int (*d2d)(backend_t *be, void *dst, const void *src, size_t bytes);
    int (*memset0)(backend_t *be, void *dst, size_t bytes);
    /* Copy between two devices (DP's replicate, scatter, gather, reduce), queued
     * on be's stream (be owns dst).  The caller orders it after the work that
     * produced src (sync src_be first).  CPU: memcpy; CUDA: cudaMemcpyPeerAsync. */
    int (*peer_copy)(backend_t *be, void *dst, backend_t *src_be, const void *src,
                     size_t bytes);

    /* -- compute: row-major, like torch ------------------------------------ */
    /* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C; op(X) = X^T when t. */
    int (*gemm)(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C,
                int ldc);
    /* z[r,c] += b[c]; a = act(z).  a may equal z (act must be ACT_NONE then). */
    int (*bias_act_fwd)(backend_t *be, act_t act, float *z, float *a, const float *b,
                        int rows, int cols);
    /* d[i] *= act'(z[i]) (a = act(z) is given for the cheap forms). */
    int (*act_bwd)(backend_t *be, act_t act, const float *z, const float *a, float *d,
                   size_t n);
    /* db[c] (+)= sum_r dz[r,c]. */
    int (*bias_grad)(backend_t *be, float *db, const float *dz, int rows, int cols,
                     bool accumulate);
    /* Per-row losses of out[rows,cols] against tgt (tgt[rows,cols] for mse/bce,
     * tgt[rows] holding class ids for ce).  *loss_sum (a device float) = sum over
     * rows of the row's loss (mse/bce: mean over the row's elements).
     * grad[rows,cols] = grad_scale * d(sum of row losses)/d(out). */
    int (*loss)(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                int cols, float grad_scale, float *grad, float *loss_sum);
    /* Optimizer updates over a flat arena of n floats (torch.optim rules). */
    int (*sgd)(backend_t *be, const sgd_args_t *a, float *p, const float *g, float *buf,
               size_t n);
    int (*adam)(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m,
                float *v, size_t n);
    /* y += alpha * x */
    int (*axpy)(backend_t *be, float alpha, const float *x, float *y, size_t n);
    /* x *= alpha */
    int (*scale)(backend_t *be, float alpha, float *x, size_t n);

    /* -- control ----------------------------------------------------------- */
    int (*sync)(backend_t *be);
    void (*destroy)(backend_t *be);
} backend_ops_t;

struct backend {
    const backend_ops_t *ops;
    backend_kind_t kind;
    int device_id;      /* the id the user named (--gpus) */
    bool host_visible;  /* device memory is host memory (CPU backend) */
    size_t mem_in_use;  /* bytes from alloc() not yet freed */
    size_t mem_peak;    /* high-water mark of mem_in_use */
    char last_error[ERR_LEN];
    void *impl;         /* the backend's private state */
};

/* Create the CPU backend for device slot device_id; blas_threads is the number
 * of OpenBLAS threads this device may use (1 for a DP/DDP worker). */
int backend_cpu_create(backend_t **out, int device_id, int blas_threads, char *err);

/* True when the CUDA backend was compiled in. */
bool backend_cuda_available(void);
/* Create the CUDA backend on GPU device_id (call only in the process that will
 * use it: CUDA does not survive fork). */
int backend_cuda_create(backend_t **out, int device_id, char *err);

/* How many GPUs are visible, found without initialising CUDA in this process
 * (a forked probe: CUDA does not survive fork, and the supervisor forks ranks).
 * Returns 0 with the reason in why (ERR_LEN) when there are none: "built
 * without CUDA", "no CUDA driver (cudaErrorInsufficientDriver)", "no CUDA
 * device (cudaErrorNoDevice)". */
int backend_cuda_probe(char *why);

/* Create by kind (BACKEND_CPU or BACKEND_CUDA). */
int backend_create(backend_t **out, backend_kind_t kind, int device_id, int blas_threads,
                   char *err);
void backend_destroy(backend_t *be);
const char *backend_last_error(const backend_t *be);

/* Set the process-wide OpenBLAS thread count (the CPU backend's threads share it). */
void backend_cpu_set_threads(int n);
/* A short description of the BLAS library ("OpenBLAS 0.3.21 ... SkylakeX"). */
const char *backend_cpu_blas_info(void);

/* Track an allocation made outside alloc() against the device's memory figures. */
void backend_account(backend_t *be, long long delta_bytes);

#endif
