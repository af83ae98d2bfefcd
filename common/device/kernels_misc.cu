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

__global__ void scale_kernel(float alpha, float *x, size_t n, bool vec)
{
    if (vec) {
        KERN_GRID_STRIDE4(q, n)
        {
            float4 a = ((float4 *)x)[q];
            a.x *= alpha;
            a.y *= alpha;
            a.z *= alpha;
            a.w *= alpha;
            ((float4 *)x)[q] = a;
        }
        KERN_TAIL(i, n)
        x[i] *= alpha;
        return;
    }
    KERN_GRID_STRIDE(i, n)
    x[i] *= alpha;
}

__global__ void div_kernel(float d, float *x, size_t n, bool vec)
{
    if (vec) {
        KERN_GRID_STRIDE4(q, n)
        {
            float4 a = ((float4 *)x)[q];
            a.x /= d;
            a.y /= d;
            a.z /= d;
            a.w /= d;
            ((float4 *)x)[q] = a;
        }
        KERN_TAIL(i, n)
        x[i] /= d;
        return;
    }
    KERN_GRID_STRIDE(i, n)
    x[i] /= d;
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

extern "C" cudaError_t kern_scale(cudaStream_t s, float alpha, float *x, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    bool vec = kern_aligned16(x);
    scale_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(alpha, x, n, vec);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_div(cudaStream_t s, float d, float *x, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    bool vec = kern_aligned16(x);
    div_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(d, x, n, vec);
    return cudaGetLastError();
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
