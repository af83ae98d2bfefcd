/* common/device/kernels.h: the C entry points of the CUDA kernels (kernels_*.cu), one per
 * family.  Each queues on the given stream, launches nothing for an empty problem and
 * returns cudaGetLastError(); semantics are backend.h's and backend_cpu.c's operation by
 * operation (--fmad=false: + - * / and sqrtf round as the CPU's; the transcendentals do not:
 * docs/gpu.md). */
#ifndef DDPBENCH_KERNELS_H
#define DDPBENCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "common/base/kinds.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- kernels_act.cu: bias + activation, activation backward, bias gradient --
/* bf16 != 0: --precision bf16's roundings (backend.h): z = bf16(z + bf16(b)),
 * a = bf16(act(z)); d = bf16(bf16(d) * act'(z)). */
cudaError_t kern_bias_act_fwd(cudaStream_t s, act_t act, float *z, float *a, const float *b,
                              int rows, int cols, int bf16);
cudaError_t kern_act_bwd(cudaStream_t s, act_t act, const float *z, const float *a, float *d,
                         size_t n, int bf16);
/* Column sums in a fixed order (deterministic, no atomics): rows are split
 * into slices across blocks, then each column's slices are added in order.
 * part is device scratch of kern_bias_grad_scratch(rows, cols) floats (NULL
 * when that is 0). */
size_t kern_bias_grad_scratch(int rows, int cols);
cudaError_t kern_bias_grad(cudaStream_t s, float *db, const float *dz, int rows, int cols,
                           int accumulate, float *part);

// ---- kernels_loss.cu: per-row losses, their gradient, and their sum ---------
/* rowloss is device scratch of at least rows doubles; the sum of the rows'
 * losses is reduced from it in a fixed order into *loss_sum (a device float),
 * so the same inputs give the same bits on every run. */
cudaError_t kern_loss(cudaStream_t s, loss_t kind, const float *out, const float *tgt, int rows,
                      int cols, float grad_scale, float *grad, double *rowloss, float *loss_sum);

// ---- kernels_bf16.cu: --precision bf16's conversions --------------------------
/* dst (rows x cols, packed) = src (rows x cols, leading dimension ld) as
 * bf16 bits, round to nearest even: a GEMM operand for cublasGemmEx. */
cudaError_t kern_to_bf16(cudaStream_t s, uint16_t *dst, const float *src, int rows, int cols,
                         int ld);
/* x[i] = bf16(x[i]), an fp32 value. */
cudaError_t kern_round_bf16(cudaStream_t s, float *x, size_t n);

// ---- kernels_optim.cu: optimizer updates over a whole arena, one launch ----
typedef struct {
    float lr, weight_decay, momentum;
    float damp;          /* 1 - dampening */
    int nesterov;
    int first_step;
} kern_sgd_t;

typedef struct {
    float beta2, eps, weight_decay;
    float one_minus_beta1, one_minus_beta2;
    float step_size;     /* (float)(lr / bias_correction1) */
    float bc2_sqrt;      /* (float)sqrt(bias_correction2) */
    float decay;         /* 1 - lr * weight_decay (AdamW) */
    int decoupled;
} kern_adam_t;

cudaError_t kern_sgd(cudaStream_t s, kern_sgd_t a, float *p, const float *g, float *buf,
                     size_t n);
cudaError_t kern_adam(cudaStream_t s, kern_adam_t a, float *p, const float *g, float *m,
                      float *v, size_t n);
/* The same, with a.step_size and a.bc2_sqrt read from scal[0..1] (device
 * memory) when the kernel runs: a CUDA graph's Adam, whose bias corrections
 * change every step. */
cudaError_t kern_adam_dev(cudaStream_t s, kern_adam_t a, const float *scal, float *p,
                          const float *g, float *m, float *v, size_t n);

// ---- kernels_misc.cu: axpy, scale, division, matrix fill -------------------
cudaError_t kern_axpy(cudaStream_t s, float alpha, const float *x, float *y, size_t n);
cudaError_t kern_scale(cudaStream_t s, float alpha, float *x, size_t n);
/* x[i] /= d: an average as comm.h defines it (the sum divided by world, as
 * comm_shm.c divides, which x * (1/world) would not round the same way). */
cudaError_t kern_div(cudaStream_t s, float d, float *x, size_t n);
/* C[i*ldc+j] = beta == 0 ? 0 : beta*C[i*ldc+j] for an m x n block (an empty GEMM). */
cudaError_t kern_scale_matrix(cudaStream_t s, float beta, float *C, int m, int n, int ldc);

// ---- kernels_cast.cu: float32 <-> 16-bit floats (the compression hooks) ---
/* to16: h[i] = f[i] rounded to dtype t (base/half.h's dtype_t); else f[i] = h[i]. */
cudaError_t kern_cast16(cudaStream_t s, int t, int to16, float *f, unsigned short *h, size_t n);

#ifdef __cplusplus
}
#endif

#endif
