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

/* 128-bit loads and stores: a kernel given vec reads and writes its arrays as
 * float4 (four floats per access, one instruction each) over the first
 * n / 4 * 4 elements, and the last n % 4 one by one.  Each element gets the
 * same arithmetic as the scalar loop, so the bits do not change.  The
 * launcher asks for it when every pointer is 16-byte aligned (cudaMalloc's
 * blocks are; a slice of one, a DDP bucket or a ZeRO shard, may not be). */
static inline bool kern_aligned16(const void *p) { return ((size_t)p & 15u) == 0; }

/* The grid for n elements, vectorised or not. */
static inline unsigned kern_blocks_v(size_t n, bool vec) { return kern_blocks(vec ? (n + 3) / 4 : n); }

/* for (q = this thread's first quad; q < n / 4; q += all threads), then
 * for the n % 4 elements left: KERN_TAIL(i, n). */
#define KERN_GRID_STRIDE4(q, n) KERN_GRID_STRIDE(q, (n) / 4)
#define KERN_TAIL(i, n)                                                                    \
    for (size_t i = (n) / 4 * 4 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);  \
         i += (size_t)gridDim.x * blockDim.x)

/* for (i = this thread's first; i < n; i += all threads) */
#define KERN_GRID_STRIDE(i, n)                                                             \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                \
         i += (size_t)gridDim.x * blockDim.x)

#endif
