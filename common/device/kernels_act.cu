/* common/device/kernels_act.cu: bias + activation forward, activation backward and
 * the bias gradient, with their C launchers (see kernels.h).  The activation
 * formulas are backend_cpu.c's, written the same way (exact gelu with erf,
 * relu'(0) = 0, the two-sided sigmoid); the library functions inside them
 * (expf, tanhf, erff) are CUDA's, within a few ulp of glibc's, not equal. */
#include "base/half.h"
#include "device/kernels.h"
#include "device/kernels_util.cuh"

// ---------------------------------------------------------------------------
// activations (device versions of backend_cpu.c's)

__device__ __forceinline__ float sigmoid_f(float x)
{
    return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
}

__device__ __forceinline__ float gelu_f(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

__device__ __forceinline__ float gelu_grad_f(float x)
{
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

__device__ __forceinline__ float act_f(act_t act, float z)
{
    switch (act) {
    case ACT_RELU:
        return z > 0.0f ? z : 0.0f;
    case ACT_TANH:
        return tanhf(z);
    case ACT_SIGMOID:
        return sigmoid_f(z);
    case ACT_GELU:
        return gelu_f(z);
    case ACT_NONE:
        break;
    }
    return z;
}

// ---------------------------------------------------------------------------
// kernels

/* A 2-D grid: blockIdx.x picks 256 columns, blockIdx.y strides over rows, so
 * every access is coalesced and no thread divides by cols. */
__global__ void bias_act_fwd_kernel(act_t act, float *z, float *a, const float *b, int rows,
                                    int cols, int bf16)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    float bc = bf16 ? bf16_round_f32(b[c]) : b[c];
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        size_t i = (size_t)r * cols + c;
        float v = z[i] + bc;
        if (bf16)
            v = bf16_round_f32(v);
        z[i] = v;
        if (act != ACT_NONE)
            a[i] = bf16 ? bf16_round_f32(act_f(act, v)) : act_f(act, v);
    }
}

__global__ void act_bwd_kernel(act_t act, const float *z, const float *a, float *d, size_t n,
                               int bf16)
{
    KERN_GRID_STRIDE(i, n)
    {
        if (bf16)
            d[i] = bf16_round_f32(d[i]);
        switch (act) {
        case ACT_RELU:
            d[i] = z[i] > 0.0f ? d[i] : 0.0f;
            break;
        case ACT_TANH:
            d[i] *= 1.0f - a[i] * a[i];
            break;
        case ACT_SIGMOID:
            d[i] *= a[i] * (1.0f - a[i]);
            break;
        case ACT_GELU:
            d[i] *= gelu_grad_f(z[i]);
            break;
        case ACT_NONE:
            break;
        }
        if (bf16)
            d[i] = bf16_round_f32(d[i]);
    }
}

/* Column sums in two passes, so that a short, wide batch still fills the GPU:
 * pass 1 gives every block 32 columns (threadIdx.x, coalesced) and one slice
 * of the rows (blockIdx.y), which its 8 rows of threads (threadIdx.y) walk
 * every 8th row; the 8 partial sums are added in a fixed order into part[]
 * (or straight into db when there is one slice).  Pass 2 adds each column's
 * slices in slice order.  The number of slices depends on rows and cols
 * only, so the sums are the same bits on every GPU and every run: no
 * atomics. */
#define BG_COLS 32
#define BG_ROWS 8
#define BG_MIN_SLICE 32   /* rows per slice at least */
#define BG_TARGET 512     /* blocks to aim for (a few per SM on 132 SMs) */

static inline int bg_slices(int rows, int cols)
{
    int colblocks = (cols + BG_COLS - 1) / BG_COLS;
    int want = (BG_TARGET + colblocks - 1) / colblocks;
    int most = (rows + BG_MIN_SLICE - 1) / BG_MIN_SLICE;
    int n = want < most ? want : most;
    return n < 1 ? 1 : n;
}

__global__ void bias_grad_part_kernel(float *out, const float *dz, int rows, int cols,
                                      int slice_rows, int accumulate, int final)
{
    __shared__ float part[BG_ROWS][BG_COLS + 1];
    int c = blockIdx.x * BG_COLS + threadIdx.x;
    int r0 = blockIdx.y * slice_rows;
    int r1 = r0 + slice_rows < rows ? r0 + slice_rows : rows;
    float s = 0.0f;
    if (c < cols)
        for (int r = r0 + threadIdx.y; r < r1; r += BG_ROWS)
            s += dz[(size_t)r * cols + c];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads(); /* every partial sum is in shared memory before row 0 adds them */
    if (threadIdx.y == 0 && c < cols) {
        float t = part[0][threadIdx.x];
        for (int k = 1; k < BG_ROWS; k++)
            t += part[k][threadIdx.x];
        if (final) /* one slice: this is the column's sum */
            out[c] = accumulate ? out[c] + t : t;
        else
            out[(size_t)blockIdx.y * cols + c] = t;
    }
}

__global__ void bias_grad_sum_kernel(float *db, const float *part, int slices, int cols,
                                     int accumulate)
{
    KERN_GRID_STRIDE(c, (size_t)cols)
    {
        float t = part[c];
        for (int k = 1; k < slices; k++) /* slice order: fixed */
            t += part[(size_t)k * cols + c];
        db[c] = accumulate ? db[c] + t : t;
    }
}

// ---------------------------------------------------------------------------
// launchers

extern "C" cudaError_t kern_bias_act_fwd(cudaStream_t s, act_t act, float *z, float *a,
                                         const float *b, int rows, int cols, int bf16)
{
    if (rows <= 0 || cols <= 0)
        return cudaSuccess;
    dim3 grid((unsigned)((cols + KERN_THREADS - 1) / KERN_THREADS),
              (unsigned)(rows < 1024 ? rows : 1024));
    bias_act_fwd_kernel<<<grid, KERN_THREADS, 0, s>>>(act, z, a, b, rows, cols, bf16);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_act_bwd(cudaStream_t s, act_t act, const float *z, const float *a,
                                    float *d, size_t n, int bf16)
{
    if (n == 0 || (act == ACT_NONE && !bf16))
        return cudaSuccess;
    act_bwd_kernel<<<kern_blocks(n), KERN_THREADS, 0, s>>>(act, z, a, d, n, bf16);
    return cudaGetLastError();
}

extern "C" size_t kern_bias_grad_scratch(int rows, int cols)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    int n = bg_slices(rows, cols);
    return n > 1 ? (size_t)n * (size_t)cols : 0;
}

extern "C" cudaError_t kern_bias_grad(cudaStream_t s, float *db, const float *dz, int rows,
                                      int cols, int accumulate, float *part)
{
    if (cols <= 0)
        return cudaSuccess;
    /* rows == 0 still runs: db becomes 0 (or stays, when accumulating), as on the CPU. */
    if (rows < 0)
        rows = 0;
    int slices = rows > 0 ? bg_slices(rows, cols) : 1;
    int slice_rows = slices > 1 ? (rows + slices - 1) / slices : (rows > 0 ? rows : 1);
    slices = rows > 0 ? (rows + slice_rows - 1) / slice_rows : 1; /* no empty slice */
    dim3 block(BG_COLS, BG_ROWS);
    dim3 grid((unsigned)((cols + BG_COLS - 1) / BG_COLS), (unsigned)slices);
    bool one = slices == 1;
    bias_grad_part_kernel<<<grid, block, 0, s>>>(one ? db : part, dz, rows, cols, slice_rows,
                                                 accumulate, one);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || one)
        return e;
    /* Stream order: the sums start once every slice is written. */
    bias_grad_sum_kernel<<<kern_blocks((size_t)cols), KERN_THREADS, 0, s>>>(db, part, slices,
                                                                           cols, accumulate);
    return cudaGetLastError();
}
