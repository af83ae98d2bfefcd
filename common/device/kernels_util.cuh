/* common/device/kernels_util.cuh: launch geometry shared by the kernels_*.cu files. */
#ifndef DDPBENCH_KERNELS_UTIL_CUH
#define DDPBENCH_KERNELS_UTIL_CUH

#include <stddef.h>

/* Elementwise kernels: 256 threads per block, grid-stride loops, and at most
 * KERN_MAX_BLOCKS blocks (about 8 resident blocks per SM on 132 SMs, H200):
 * enough to fill the GPU, few enough that each thread does several elements. */
#define KERN_THREADS 256
#define KERN_MAX_BLOCKS 1056

static inline unsigned kern_blocks(size_t n)
{
    size_t b = (n + KERN_THREADS - 1) / KERN_THREADS;
    return (unsigned)(b < KERN_MAX_BLOCKS ? b : KERN_MAX_BLOCKS);
}

/* for (i = this thread's first; i < n; i += all threads) */
#define KERN_GRID_STRIDE(i, n)                                                             \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                \
         i += (size_t)gridDim.x * blockDim.x)

#endif
