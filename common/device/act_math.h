/* common/device/act_math.h: the activations and their derivatives, written
 * once for the CPU backend and the CUDA kernels (ACT_FN adds __host__
 * __device__ under nvcc).  Exact forms, like torch: gelu with erf, relu'(0)
 * = 0, tanh' and sigmoid' from the activation's output.  The 1e-5 agreement
 * of the backends rests on these being one; the library functions inside
 * them (expf, tanhf, erff) are each side's own, CUDA's within a few ulp of
 * glibc's. */
#ifndef DDPBENCH_ACT_MATH_H
#define DDPBENCH_ACT_MATH_H

#include <math.h>

#include "common/base/kinds.h"

#ifdef __CUDACC__
#define ACT_FN static inline __host__ __device__
#else
#define ACT_FN static inline
#endif

/* One branch-free form, so the CPU's loops vectorise: for x << 0 expf(-x)
 * becomes inf and the result 0, for x >> 0 it is 1. */
ACT_FN float act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

ACT_FN float act_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

ACT_FN float act_gelu_grad(float x)
{
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

/* act(z) */
ACT_FN float act_value(act_t act, float z)
{
    switch (act) {
    case ACT_RELU:
        return z > 0.0f ? z : 0.0f;
    case ACT_TANH:
        return tanhf(z);
    case ACT_SIGMOID:
        return act_sigmoid(z);
    case ACT_GELU:
        return act_gelu(z);
    case ACT_NONE:
        break;
    }
    return z;
}

/* d * act'(z), a = act(z) (relu selects: a gradient past a dead unit is 0,
 * never 0 * inf). */
ACT_FN float act_backward(act_t act, float z, float a, float d)
{
    switch (act) {
    case ACT_RELU:
        return z > 0.0f ? d : 0.0f;
    case ACT_TANH:
        return d * (1.0f - a * a);
    case ACT_SIGMOID:
        return d * (a * (1.0f - a));
    case ACT_GELU:
        return d * act_gelu_grad(z);
    case ACT_NONE:
        break;
    }
    return d;
}

#endif
