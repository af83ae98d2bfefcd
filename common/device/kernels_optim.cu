/* common/device/kernels_optim.cu: SGD and Adam/AdamW over a whole parameter arena in
 * one launch each, with the C launchers (see kernels.h).  The arithmetic is
 * backend_cpu.c's, statement by statement and in the same order; the scalars
 * the CPU derives once per step (1 - dampening, lr / bias_correction1, ...)
 * arrive precomputed by the host in the same precision, so with --fmad=false
 * the GPU update matches the CPU's bits. */
#include "common/device/kernels.h"
#include "common/device/kernels_util.cuh"

// ---------------------------------------------------------------------------
// kernels

/* One element's update (backend_cpu.c's statements, in its order): the
 * scalar and the 128-bit loops below apply the same function. */
__device__ __forceinline__ void sgd_plain_el(const kern_sgd_t &a, float &p, float g)
{
    float d = a.weight_decay != 0.0f ? g + a.weight_decay * p : g;
    p -= a.lr * d;
}

__device__ __forceinline__ void sgd_momentum_el(const kern_sgd_t &a, float &p, float g, float &buf)
{
    float d = a.weight_decay != 0.0f ? g + a.weight_decay * p : g;
    float b = a.first_step ? d : a.momentum * buf + a.damp * d;
    buf = b;
    d = a.nesterov ? d + a.momentum * b : b;
    p -= a.lr * d;
}

__global__ void sgd_plain_kernel(kern_sgd_t a, float *p, const float *g, size_t n, bool vec)
{
    if (vec) { /* 128-bit accesses (kernels_util.cuh) */
        KERN_GRID_STRIDE4(q, n)
        {
            float4 pv = ((float4 *)p)[q], gv = ((const float4 *)g)[q];
            sgd_plain_el(a, pv.x, gv.x);
            sgd_plain_el(a, pv.y, gv.y);
            sgd_plain_el(a, pv.z, gv.z);
            sgd_plain_el(a, pv.w, gv.w);
            ((float4 *)p)[q] = pv;
        }
        KERN_TAIL(i, n)
        sgd_plain_el(a, p[i], g[i]);
        return;
    }
    KERN_GRID_STRIDE(i, n)
    sgd_plain_el(a, p[i], g[i]);
}

__global__ void sgd_momentum_kernel(kern_sgd_t a, float *p, const float *g, float *buf, size_t n,
                                    bool vec)
{
    if (vec) {
        KERN_GRID_STRIDE4(q, n)
        {
            float4 pv = ((float4 *)p)[q], gv = ((const float4 *)g)[q], bv = ((float4 *)buf)[q];
            sgd_momentum_el(a, pv.x, gv.x, bv.x);
            sgd_momentum_el(a, pv.y, gv.y, bv.y);
            sgd_momentum_el(a, pv.z, gv.z, bv.z);
            sgd_momentum_el(a, pv.w, gv.w, bv.w);
            ((float4 *)buf)[q] = bv;
            ((float4 *)p)[q] = pv;
        }
        KERN_TAIL(i, n)
        sgd_momentum_el(a, p[i], g[i], buf[i]);
        return;
    }
    KERN_GRID_STRIDE(i, n)
    sgd_momentum_el(a, p[i], g[i], buf[i]);
}

__device__ __forceinline__ void adam_el(const kern_adam_t &a, float &p, float g, float &m, float &v)
{
    float gi = g;
    float pi = p;
    if (a.decoupled)
        pi *= a.decay;
    else if (a.weight_decay != 0.0f)
        gi += a.weight_decay * pi;
    float mi = m;
    mi += a.one_minus_beta1 * (gi - mi); /* torch: exp_avg.lerp_(grad, 1 - beta1) */
    float vi = a.beta2 * v + a.one_minus_beta2 * gi * gi;
    float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
    pi -= a.step_size * (mi / denom);
    m = mi;
    v = vi;
    p = pi;
}

/* scal (device memory, or NULL): the per-step scalars {step_size, bc2_sqrt},
 * read on the device so that one captured graph serves every step. */
__global__ void adam_kernel(kern_adam_t a, const float *scal, float *p, const float *g, float *m,
                            float *v, size_t n, bool vec)
{
    if (scal) {
        a.step_size = scal[0];
        a.bc2_sqrt = scal[1];
    }
    if (vec) { /* 128-bit accesses (kernels_util.cuh) */
        KERN_GRID_STRIDE4(q, n)
        {
            float4 pv = ((float4 *)p)[q], gv = ((const float4 *)g)[q];
            float4 mv = ((float4 *)m)[q], vv = ((float4 *)v)[q];
            adam_el(a, pv.x, gv.x, mv.x, vv.x);
            adam_el(a, pv.y, gv.y, mv.y, vv.y);
            adam_el(a, pv.z, gv.z, mv.z, vv.z);
            adam_el(a, pv.w, gv.w, mv.w, vv.w);
            ((float4 *)m)[q] = mv;
            ((float4 *)v)[q] = vv;
            ((float4 *)p)[q] = pv;
        }
        KERN_TAIL(i, n)
        adam_el(a, p[i], g[i], m[i], v[i]);
        return;
    }
    KERN_GRID_STRIDE(i, n)
    adam_el(a, p[i], g[i], m[i], v[i]);
}

// ---------------------------------------------------------------------------
// launchers

extern "C" cudaError_t kern_sgd(cudaStream_t s, kern_sgd_t a, float *p, const float *g,
                                float *buf, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    bool vec = kern_aligned16(p) && kern_aligned16(g) && (a.momentum == 0.0f || kern_aligned16(buf));
    if (a.momentum == 0.0f)
        sgd_plain_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(a, p, g, n, vec);
    else
        sgd_momentum_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(a, p, g, buf, n, vec);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_adam(cudaStream_t s, kern_adam_t a, float *p, const float *g,
                                 float *m, float *v, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    bool vec = kern_aligned16(p) && kern_aligned16(g) && kern_aligned16(m) && kern_aligned16(v);
    adam_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(a, (const float *)0, p, g, m, v, n,
                                                              vec);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_adam_dev(cudaStream_t s, kern_adam_t a, const float *scal, float *p,
                                     const float *g, float *m, float *v, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    bool vec = kern_aligned16(p) && kern_aligned16(g) && kern_aligned16(m) && kern_aligned16(v);
    adam_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(a, scal, p, g, m, v, n, vec);
    return cudaGetLastError();
}
