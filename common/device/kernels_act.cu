/* common/device/kernels_act.cu: bias + activation forward, activation backward and
 * the bias gradient, with their C launchers (see kernels.h).  The activation
 * formulas are the CPU backend's (device/act_math.h). */
#include "common/base/half.h"
#include "common/device/act_math.h"
#include "common/device/kernels.h"
#include "common/device/kernels_util.cuh"

// ---------------------------------------------------------------------------
// kernels

/* One element of bias + activation, the scalar and the 128-bit kernels'
 * shared arithmetic: z += b (b already rounded under bf16), then a = act(z);
 * under --precision bf16 both are stored as bf16 values (backend.h). */
__device__ __forceinline__ void bias_act_el(act_t act, float &z, float *a, float b, int bf16)
{
    float v = z + b;
    if (bf16)
        v = bf16_round_f32(v);
    z = v;
    if (act != ACT_NONE)
        *a = bf16 ? bf16_round_f32(act_value(act, v)) : act_value(act, v);
}

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
        float v = z[i], av = 0.0f;
        bias_act_el(act, v, &av, bc, bf16);
        z[i] = v;
        if (act != ACT_NONE)
            a[i] = av;
    }
}

/* The same with 128-bit accesses (cols % 4 == 0, every pointer aligned):
 * blockIdx.x picks 1024 columns, four per thread. */
__global__ void bias_act_fwd4_kernel(act_t act, float *z, float *a, const float *b, int rows,
                                     int cols, int bf16)
{
    int c4 = blockIdx.x * blockDim.x + threadIdx.x, q = cols / 4;
    if (c4 >= q)
        return;
    float4 bc = ((const float4 *)b)[c4];
    if (bf16) {
        bc.x = bf16_round_f32(bc.x);
        bc.y = bf16_round_f32(bc.y);
        bc.z = bf16_round_f32(bc.z);
        bc.w = bf16_round_f32(bc.w);
    }
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        size_t i = (size_t)r * q + c4;
        float4 zv = ((float4 *)z)[i], av;
        bias_act_el(act, zv.x, &av.x, bc.x, bf16);
        bias_act_el(act, zv.y, &av.y, bc.y, bf16);
        bias_act_el(act, zv.z, &av.z, bc.z, bf16);
        bias_act_el(act, zv.w, &av.w, bc.w, bf16);
        ((float4 *)z)[i] = zv;
        if (act != ACT_NONE)
            ((float4 *)a)[i] = av;
    }
}

/* d *= act'(z): relu and gelu read z, tanh and sigmoid a, none neither
 * (under bf16 it still rounds d). */
static inline bool act_reads_z(act_t act) { return act == ACT_RELU || act == ACT_GELU; }
static inline bool act_reads_a(act_t act) { return act == ACT_TANH || act == ACT_SIGMOID; }

/* One element of the activation backward; under --precision bf16 the
 * incoming gradient and the result are bf16 values (backend.h). */
__device__ __forceinline__ void act_bwd_el(act_t act, float z, float a, float &d, int bf16)
{
    d = act_backward(act, z, a, bf16 ? bf16_round_f32(d) : d);
    if (bf16)
        d = bf16_round_f32(d);
}

__global__ void act_bwd_kernel(act_t act, const float *z, const float *a, float *d, size_t n,
                               int bf16, bool vec)
{
    /* which input the form reads: the other is never loaded */
    bool zr = act == ACT_RELU || act == ACT_GELU, ar = act == ACT_TANH || act == ACT_SIGMOID;
    if (vec) { /* 128-bit accesses (kernels_util.cuh) */
        KERN_GRID_STRIDE4(q, n)
        {
            float4 in = {0.0f, 0.0f, 0.0f, 0.0f};
            if (zr)
                in = ((const float4 *)z)[q];
            else if (ar)
                in = ((const float4 *)a)[q];
            float4 dv = ((float4 *)d)[q];
            act_bwd_el(act, in.x, in.x, dv.x, bf16);
            act_bwd_el(act, in.y, in.y, dv.y, bf16);
            act_bwd_el(act, in.z, in.z, dv.z, bf16);
            act_bwd_el(act, in.w, in.w, dv.w, bf16);
            ((float4 *)d)[q] = dv;
        }
        KERN_TAIL(i, n)
        act_bwd_el(act, zr ? z[i] : 0.0f, ar ? a[i] : 0.0f, d[i], bf16);
        return;
    }
    KERN_GRID_STRIDE(i, n)
    act_bwd_el(act, zr ? z[i] : 0.0f, ar ? a[i] : 0.0f, d[i], bf16);
}

/* Column sums in two passes, so that a short, wide batch still fills the GPU:
 * pass 1 gives every block 32 columns (threadIdx.x, coalesced) and one slice
 * of the rows (blockIdx.y), which its 8 rows of threads (threadIdx.y) walk
 * every 8th row; the 8 partial sums are added in a fixed order into part[]
 * (or straight into db when there is one slice).  Pass 2 adds each column's
 * slices in slice order.  The number of slices depends on rows and cols
 * only, so the sums are the same bits on every GPU and every run: no
 * atomics.  With 128-bit accesses (cols % 4 == 0, dz, db and part aligned)
 * a thread of pass 1 takes four adjacent columns (blocks of 8 x 8 threads,
 * still 32 columns and the same slices) and one of pass 2 four columns:
 * every column is summed in the same order, so the bits do not change. */
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

__device__ __forceinline__ void add4(float4 &t, float4 u)
{
    t.x += u.x;
    t.y += u.y;
    t.z += u.z;
    t.w += u.w;
}

/* t = o + t, each lane (db + this step's sum, as the scalar loop adds) */
__device__ __forceinline__ void add4_onto(float4 o, float4 &t)
{
    t.x = o.x + t.x;
    t.y = o.y + t.y;
    t.z = o.z + t.z;
    t.w = o.w + t.w;
}

/* Pass 1 with 128-bit accesses: threadIdx.x picks four of the block's 32
 * columns. */
__global__ void bias_grad_part4_kernel(float *out, const float *dz, int rows, int cols,
                                       int slice_rows, int accumulate, int final)
{
    __shared__ float4 part4[BG_ROWS][BG_COLS / 4];
    int q = cols / 4, c4 = blockIdx.x * (BG_COLS / 4) + threadIdx.x;
    int r0 = blockIdx.y * slice_rows;
    int r1 = r0 + slice_rows < rows ? r0 + slice_rows : rows;
    float4 s = {0.0f, 0.0f, 0.0f, 0.0f};
    if (c4 < q)
        for (int r = r0 + threadIdx.y; r < r1; r += BG_ROWS)
            add4(s, ((const float4 *)dz)[(size_t)r * q + c4]);
    part4[threadIdx.y][threadIdx.x] = s;
    __syncthreads(); /* every partial sum is in shared memory before row 0 adds them */
    if (threadIdx.y == 0 && c4 < q) {
        float4 t = part4[0][threadIdx.x];
        for (int k = 1; k < BG_ROWS; k++)
            add4(t, part4[k][threadIdx.x]);
        if (final) { /* one slice: this is the column's sum */
            if (accumulate)
                add4_onto(((const float4 *)out)[c4], t);
            ((float4 *)out)[c4] = t;
        } else {
            ((float4 *)out)[(size_t)blockIdx.y * q + c4] = t;
        }
    }
}

__global__ void bias_grad_sum_kernel(float *db, const float *part, int slices, int cols,
                                     int accumulate, bool vec)
{
    if (vec) { /* 128-bit accesses: four columns a thread */
        size_t q4 = (size_t)cols / 4;
        KERN_GRID_STRIDE(q, q4)
        {
            float4 t = ((const float4 *)part)[q];
            for (int k = 1; k < slices; k++) /* slice order: fixed, as below */
                add4(t, ((const float4 *)part)[(size_t)k * q4 + q]);
            if (accumulate)
                add4_onto(((const float4 *)db)[q], t);
            ((float4 *)db)[q] = t;
        }
        return;
    }
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
    unsigned gy = (unsigned)(rows < 1024 ? rows : 1024);
    if (cols % 4 == 0 && kern_aligned16(z) && kern_aligned16(b) &&
        (act == ACT_NONE || kern_aligned16(a))) { /* 128-bit accesses */
        dim3 grid4((unsigned)((cols / 4 + KERN_THREADS - 1) / KERN_THREADS), gy);
        bias_act_fwd4_kernel<<<grid4, KERN_THREADS, 0, s>>>(act, z, a, b, rows, cols, bf16);
        return cudaGetLastError();
    }
    dim3 grid((unsigned)((cols + KERN_THREADS - 1) / KERN_THREADS), gy);
    bias_act_fwd_kernel<<<grid, KERN_THREADS, 0, s>>>(act, z, a, b, rows, cols, bf16);
    return cudaGetLastError();
}

extern "C" cudaError_t kern_act_bwd(cudaStream_t s, act_t act, const float *z, const float *a,
                                    float *d, size_t n, int bf16)
{
    if (n == 0 || (act == ACT_NONE && !bf16))
        return cudaSuccess;
    bool vec = kern_aligned16(d) && (!act_reads_z(act) || kern_aligned16(z)) &&
               (!act_reads_a(act) || kern_aligned16(a));
    act_bwd_kernel<<<kern_blocks_v(n, vec), KERN_THREADS, 0, s>>>(act, z, a, d, n, bf16, vec);
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
    bool one = slices == 1;
    float *out = one ? db : part;
    /* 128-bit accesses where every pointer is aligned (a slice of an arena
     * may not be) and rows are whole float4s */
    bool vec = cols % 4 == 0 && kern_aligned16(db) && kern_aligned16(dz) &&
               (one || kern_aligned16(part));
    dim3 grid((unsigned)((cols + BG_COLS - 1) / BG_COLS), (unsigned)slices);
    if (vec)
        bias_grad_part4_kernel<<<grid, dim3(BG_COLS / 4, BG_ROWS), 0, s>>>(
            out, dz, rows, cols, slice_rows, accumulate, one);
    else
        bias_grad_part_kernel<<<grid, dim3(BG_COLS, BG_ROWS), 0, s>>>(out, dz, rows, cols,
                                                                     slice_rows, accumulate, one);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || one)
        return e;
    /* Stream order: the sums start once every slice is written. */
    bias_grad_sum_kernel<<<kern_blocks_v((size_t)cols, vec), KERN_THREADS, 0, s>>>(
        db, part, slices, cols, accumulate, vec);
    return cudaGetLastError();
}
