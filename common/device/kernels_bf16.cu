/* common/device/kernels_bf16.cu: --precision bf16's conversions, with their C
 * launchers (see kernels.h): a GEMM operand rounded to bf16 storage for
 * cublasGemmEx, and an fp32 buffer rounded to bf16 values in place (the
 * loss's gradient).  Both round with base/half.h's bf16_from_f32, the CPU
 * backend's own function, so the CPU reference and the GPU round every
 * value alike. */
#include "common/base/half.h"
#include "common/device/kernels.h"
#include "common/device/kernels_util.cuh"

// ---------------------------------------------------------------------------
// kernels

/* dst[r*cols + c] = bf16(src[r*ld + c]): packed, so the GEMM reads it with
 * leading dimension cols.  The model's operands are already packed (ld ==
 * cols): then no division per element. */
__global__ void to_bf16_kernel(uint16_t *dst, const float *src, int rows, int cols, int ld)
{
    size_t n = (size_t)rows * (size_t)cols;
    if (ld == cols) {
        KERN_GRID_STRIDE(i, n)
        dst[i] = bf16_from_f32(src[i]);
        return;
    }
    KERN_GRID_STRIDE(i, n)
    {
        size_t r = i / (size_t)cols, c = i % (size_t)cols;
        dst[i] = bf16_from_f32(src[r * (size_t)ld + c]);
    }
}

__global__ void round_bf16_kernel(float *x, size_t n)
{
    KERN_GRID_STRIDE(i, n)
    x[i] = bf16_round_f32(x[i]);
}

// ---------------------------------------------------------------------------
// launchers

extern "C" cudaError_t kern_to_bf16(cudaStream_t s, uint16_t *dst, const float *src, int rows,
                                    int cols, int ld)
{
    size_t n = rows > 0 && cols > 0 ? (size_t)rows * (size_t)cols : 0;
    if (n == 0)
        return cudaSuccess;
    to_bf16_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(dst, src, rows, cols, ld);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_round_bf16(cudaStream_t s, float *x, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    round_bf16_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(x, n);
    return cudaGetLastError();
}
