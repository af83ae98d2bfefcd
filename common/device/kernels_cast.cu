/* common/device/kernels_cast.cu: float32 <-> fp16 / bf16 for DDP's compression
 * hooks, element by element with base/half.h's conversions (round to
 * nearest even, bit for bit the CPU backend's), with its C launcher (see
 * kernels.h). */
#include "common/base/half.h"
#include "common/device/kernels.h"
#include "common/device/kernels_util.cuh"

// ---------------------------------------------------------------------------
// kernels

__global__ void to16_kernel(int t, const float *f, unsigned short *h, size_t n)
{
    KERN_GRID_STRIDE(i, n)
    h[i] = dtype16_from_f32((dtype_t)t, f[i]);
}

__global__ void from16_kernel(int t, float *f, const unsigned short *h, size_t n)
{
    KERN_GRID_STRIDE(i, n)
    f[i] = dtype16_to_f32((dtype_t)t, h[i]);
}

// ---------------------------------------------------------------------------
// launchers

extern "C" cudaError_t kern_cast16(cudaStream_t s, int t, int to16, float *f, unsigned short *h,
                                   size_t n)
{
    if (n == 0)
        return cudaSuccess;
    if (to16)
        to16_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(t, f, h, n);
    else
        from16_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(t, f, h, n);
    return cudaGetLastError();
}
