/* common/device/backend.h: the compute backend seam, as its callers see it.
 *
 * A backend is one device.  The model, losses, optimizers and strategies call
 * only the functions below, so they never know which device computes; how a
 * backend is built (its table of operations, its private state) is in
 * backend_impl.h, for the implementers (backend_cpu.c, backend_cuda.c).
 * Pointers called "device" below are what backend_alloc() returned; on the
 * CPU backend they are ordinary host memory (backend_host_visible() is true)
 * and strategies may write them directly.
 *
 * Ordering: operations on one backend run in call order (a CUDA stream).  They
 * may return before the work is done; backend_sync() waits for all of it, and
 * backend_d2h() waits for the work before it.  Every operation returns DDP_OK
 * or DDP_ERR_RUNTIME with a message in backend_last_error(). */
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

// ---------------------------------------------------------------------------
// what a device is

backend_kind_t backend_kind(const backend_t *be);
const char *backend_name(const backend_t *be); /* "cpu" or "cuda" */
int backend_device_id(const backend_t *be);    /* the id the user named (--gpus) */
bool backend_host_visible(const backend_t *be); /* device memory is host memory (CPU) */
size_t backend_mem_in_use(const backend_t *be); /* bytes allocated and not yet freed */
size_t backend_mem_peak(const backend_t *be);   /* high-water mark of that */
const char *backend_last_error(const backend_t *be);
/* Record why work on this device failed (what backend_last_error() returns
 * next); returns code. */
int backend_error(backend_t *be, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* rc of a backend call, with "<place>: <the backend's message>" in err when it
 * failed (just the message when place is NULL): how a caller turns a device
 * failure into its own error, TRY(backend_check(be, rc, "device 0", err)). */
int backend_check(const backend_t *be, int rc, const char *place, char *err);

// ---------------------------------------------------------------------------
// memory

void *backend_alloc(backend_t *be, size_t bytes); /* zeroed; NULL on failure */
void backend_free(backend_t *be, void *p);
void *backend_alloc_host(backend_t *be, size_t bytes); /* pinned staging memory */
void backend_free_host(backend_t *be, void *p);
int backend_h2d(backend_t *be, void *dst, const void *src, size_t bytes); /* src valid until sync */
int backend_d2h(backend_t *be, void *dst, const void *src, size_t bytes); /* waits */
int backend_d2d(backend_t *be, void *dst, const void *src, size_t bytes);
int backend_memset0(backend_t *be, void *dst, size_t bytes);
/* Copy between two devices (DP's replicate, scatter, gather, reduce), queued
 * on be's stream (be owns dst).  The caller orders it after the work that
 * produced src (sync src_be first).  CPU: memcpy; CUDA: cudaMemcpyPeerAsync. */
int backend_peer_copy(backend_t *be, void *dst, backend_t *src_be, const void *src,
                      size_t bytes);

// ---------------------------------------------------------------------------
// compute: row-major, like torch

/* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C; op(X) = X^T when t. */
int backend_gemm(backend_t *be, bool ta, bool tb, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* z[r,c] += b[c]; a = act(z).  a may equal z (act must be ACT_NONE then). */
int backend_bias_act_fwd(backend_t *be, act_t act, float *z, float *a, const float *b, int rows,
                         int cols);
/* d[i] *= act'(z[i]) (a = act(z) is given for the cheap forms). */
int backend_act_bwd(backend_t *be, act_t act, const float *z, const float *a, float *d, size_t n);
/* db[c] (+)= sum_r dz[r,c]. */
int backend_bias_grad(backend_t *be, float *db, const float *dz, int rows, int cols,
                      bool accumulate);
/* Per-row losses of out[rows,cols] against tgt (tgt[rows,cols] for mse/bce,
 * tgt[rows] holding class ids for ce).  *loss_sum (a device float) = sum over
 * rows of the row's loss (mse/bce: mean over the row's elements).
 * grad[rows,cols] = grad_scale * d(sum of row losses)/d(out). */
int backend_loss(backend_t *be, loss_t kind, const float *out, const float *tgt, int rows,
                 int cols, float grad_scale, float *grad, float *loss_sum);
/* Optimizer updates over a flat arena of n floats (torch.optim rules). */
int backend_sgd(backend_t *be, const sgd_args_t *a, float *p, const float *g, float *buf, size_t n);
int backend_adam(backend_t *be, const adam_args_t *a, float *p, const float *g, float *m, float *v,
                 size_t n);
/* y += alpha * x */
int backend_axpy(backend_t *be, float alpha, const float *x, float *y, size_t n);
/* x *= alpha */
int backend_scale(backend_t *be, float alpha, float *x, size_t n);
/* Wait for everything queued on the device. */
int backend_sync(backend_t *be);

// ---------------------------------------------------------------------------
// creating one

/* Create the CPU backend for device slot device_id; blas_threads is the number
 * of OpenBLAS threads this device may use (1 for a DP/DDP worker).  Under an
 * address-space limit without room for OpenBLAS's buffers, DDP_ERR_RUNTIME
 * naming the limit (otherwise OpenBLAS would spin forever at the first GEMM). */
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

/* Set the process-wide OpenBLAS thread count (the CPU backend's threads share it). */
void backend_cpu_set_threads(int n);
/* Under an address-space limit (ulimit -v), OpenBLAS's start-up (before
 * main) gives every core a pool thread with a 128 MiB buffer, and a thread
 * whose buffer does not fit spins forever (blas_space.h).  True when the
 * program should start again with OPENBLAS_NUM_THREADS=1, which this sets:
 * a finite limit and no thread count in the environment.  The CPU backend
 * sets the counts it needs itself. */
bool backend_cpu_restart_env(void);
/* A short description of the BLAS library ("OpenBLAS 0.3.21 ... SkylakeX"). */
const char *backend_cpu_blas_info(void);

#endif
