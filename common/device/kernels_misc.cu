/* common/device/kernels_misc.cu: the small elementwise kernels (axpy, scale, a
 * division, and the matrix fill an empty GEMM needs), with their C launchers
 * (see kernels.h). */
#include "common/device/kernels.h"
#include "common/device/kernels_util.cuh"

// ---------------------------------------------------------------------------
// kernels

__global__ void axpy_kernel(float alpha, const float *x, float *y, size_t n, bool vec)
{
    if (vec) { /* 128-bit accesses (kernels_util.cuh) */
        KERN_GRID_STRIDE4(q, n)
        {
            float4 a = ((const float4 *)x)[q], b = ((float4 *)y)[q];
            b.x += alpha * a.x;
            b.y += alpha * a.y;
            b.z += alpha * a.z;
            b.w += alpha * a.w;
            ((float4 *)y)[q] = b;
        }
        KERN_TAIL(i, n)
        y[i] += alpha * x[i];
        return;
    }
    KERN_GRID_STRIDE(i, n)
    y[i] += alpha * x[i];
}

/* x *= s, or x /= s when div (kern_div: a division, not a product with 1/s) */
__device__ inline float scale_one(float v, float s, bool div) { return div ? v / s : v * s; }

__global__ void scale_kernel(float s, float *x, size_t n, bool vec, bool div)
{
    if (vec) {
        KERN_GRID_STRIDE4(q, n)
        {
            float4 a = ((float4 *)x)[q];
            a.x = scale_one(a.x, s, div);
            a.y = scale_one(a.y, s, div);
            a.z = scale_one(a.z, s, div);
            a.w = scale_one(a.w, s, div);
            ((float4 *)x)[q] = a;
        }
        KERN_TAIL(i, n)
        x[i] = scale_one(x[i], s, div);
        return;
    }
    KERN_GRID_STRIDE(i, n)
    x[i] = scale_one(x[i], s, div);
}

/* One block row per matrix row (strided), threads across its columns. */
__global__ void scale_matrix_kernel(float beta, float *C, int m, int n, int ldc)
{
    for (int r = blockIdx.x; r < m; r += gridDim.x)
        for (int c = threadIdx.x; c < n; c += blockDim.x) {
            float *e = C + (size_t)r * ldc + c;
            *e = beta == 0.0f ? 0.0f : beta * *e; /* beta 0 overwrites NaNs, as BLAS does */
        }
}

// ---------------------------------------------------------------------------
// launchers

extern "C" cudaError_t kern_axpy(cudaStream_t s, float alpha, const float *x, float *y, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    bool vec = kern_aligned16(x) && kern_aligned16(y);
    axpy_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(alpha, x, y, n, vec);
    return cudaGetLastError();
}

static cudaError_t scale_launch(cudaStream_t st, float s, float *x, size_t n, bool div)
{
    if (n == 0)
        return cudaSuccess;
    bool vec = kern_aligned16(x);
    scale_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, st>>>(s, x, n, vec, div);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_scale(cudaStream_t s, float alpha, float *x, size_t n)
{
    return scale_launch(s, alpha, x, n, false);
}

extern "C" cudaError_t kern_div(cudaStream_t s, float d, float *x, size_t n)
{
    return scale_launch(s, d, x, n, true);
}

extern "C" cudaError_t kern_scale_matrix(cudaStream_t s, float beta, float *C, int m, int n,
                                         int ldc)
{
    if (m <= 0 || n <= 0)
        return cudaSuccess;
    scale_matrix_kernel<<<(unsigned)(m < KERN_MAX_BLOCKS ? m : KERN_MAX_BLOCKS), KERN_THREADS,
                          0, s>>>(beta, C, m, n, ldc);
    return cudaGetLastError();
}
