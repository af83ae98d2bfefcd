/* common/device/kernels_optim.cu: SGD and Adam/AdamW over a whole parameter arena in
 * one launch each, with the C launchers (see kernels.h).  The arithmetic is
 * backend_cpu.c's, statement by statement and in the same order; the scalars
 * the CPU derives once per step (1 - dampening, lr / bias_correction1, ...)
 * arrive precomputed by the host in the same precision, so with --fmad=false
 * the GPU update matches the CPU's bits. */
#include "device/kernels.h"
#include "device/kernels_util.cuh"

// ---------------------------------------------------------------------------
// kernels

__global__ void sgd_plain_kernel(kern_sgd_t a, float *p, const float *g, size_t n)
{
    KERN_GRID_STRIDE(i, n)
    {
        float d = a.weight_decay != 0.0f ? g[i] + a.weight_decay * p[i] : g[i];
        p[i] -= a.lr * d;
    }
}

__global__ void sgd_momentum_kernel(kern_sgd_t a, float *p, const float *g, float *buf, size_t n)
{
    KERN_GRID_STRIDE(i, n)
    {
        float d = a.weight_decay != 0.0f ? g[i] + a.weight_decay * p[i] : g[i];
        float b = a.first_step ? d : a.momentum * buf[i] + a.damp * d;
        buf[i] = b;
        d = a.nesterov ? d + a.momentum * b : b;
        p[i] -= a.lr * d;
    }
}

/* scal (device memory, or NULL): the per-step scalars {step_size, bc2_sqrt},
 * read on the device so that one captured graph serves every step. */
__global__ void adam_kernel(kern_adam_t a, const float *scal, float *p, const float *g, float *m,
                            float *v, size_t n)
{
    if (scal) {
        a.step_size = scal[0];
        a.bc2_sqrt = scal[1];
    }
    KERN_GRID_STRIDE(i, n)
    {
        float gi = g[i];
        float pi = p[i];
        if (a.decoupled)
            pi *= a.decay;
        else if (a.weight_decay != 0.0f)
            gi += a.weight_decay * pi;
        float mi = m[i];
        mi += a.one_minus_beta1 * (gi - mi); /* torch: exp_avg.lerp_(grad, 1 - beta1) */
        float vi = a.beta2 * v[i] + a.one_minus_beta2 * gi * gi;
        float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
        pi -= a.step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}

// ---------------------------------------------------------------------------
// launchers

extern "C" cudaError_t kern_sgd(cudaStream_t s, kern_sgd_t a, float *p, const float *g,
                                float *buf, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    if (a.momentum == 0.0f)
        sgd_plain_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(a, p, g, n);
    else
        sgd_momentum_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(a, p, g, buf, n);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_adam(cudaStream_t s, kern_adam_t a, float *p, const float *g,
                                 float *m, float *v, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    adam_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(a, (const float *)0, p, g, m, v, n);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_adam_dev(cudaStream_t s, kern_adam_t a, const float *scal, float *p,
                                     const float *g, float *m, float *v, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    adam_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(a, scal, p, g, m, v, n);
    return cudaGetLastError();
}
