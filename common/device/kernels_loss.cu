/* common/device/kernels_loss.cu: the three losses (mse, bce from logits, softmax ce)
 * and their gradients, with the C launcher (see kernels.h).
 *
 * One block per row computes the row's loss (accumulated in double, like
 * backend_cpu.c) and writes the row's gradient; a second one-block kernel adds
 * the row losses.  Every sum is a tree over a fixed number of threads in a
 * fixed order and no float atomics are used, so a run's loss log is the same
 * bits every time. */
#include <math.h>

#include "common/device/act_math.h"
#include "common/device/kernels.h"

#define LOSS_THREADS 256 /* a power of two: the tree reductions below halve it */

// ---------------------------------------------------------------------------
// block reductions in a fixed order

template <typename T, typename Op>
__device__ T block_reduce(T v, T *sh, Op op)
{
    int t = threadIdx.x;
    sh[t] = v;
    __syncthreads(); /* every thread's value is in sh before the tree reads it */
    for (int s = LOSS_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            sh[t] = op(sh[t], sh[t + s]);
        __syncthreads(); /* one level complete before the next reads it */
    }
    T r = sh[0];
    __syncthreads(); /* everyone has read sh[0] before sh is reused */
    return r;
}

struct sum_op {
    __device__ double operator()(double a, double b) const { return a + b; }
};
struct max_op {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// ---------------------------------------------------------------------------
// kernels

__global__ void loss_rows_kernel(loss_t kind, const float *out, const float *tgt, int cols,
                                 float grad_scale, float *grad, double *rowloss)
{
    __shared__ double shd[LOSS_THREADS];
    __shared__ float shf[LOSS_THREADS];
    const int r = blockIdx.x;
    const float *o = out + (size_t)r * cols;
    float *g = grad + (size_t)r * cols;
    double part = 0.0, row = 0.0;
    switch (kind) {
    case LOSS_MSE: {
        const float *t = tgt + (size_t)r * cols;
        float gs = 2.0f * grad_scale / (float)cols;
        for (int c = threadIdx.x; c < cols; c += LOSS_THREADS) {
            float e = o[c] - t[c];
            part += (double)e * e;
            g[c] = gs * e;
        }
        row = block_reduce(part, shd, sum_op()) / cols;
        break;
    }
    case LOSS_BCE: {
        /* From logits: l = max(x,0) - x*t + log1p(exp(-|x|)), dl/dx = sigmoid(x) - t. */
        const float *t = tgt + (size_t)r * cols;
        float gs = grad_scale / (float)cols;
        for (int c = threadIdx.x; c < cols; c += LOSS_THREADS) {
            float x = o[c];
            part += (double)(fmaxf(x, 0.0f) - x * t[c] + log1pf(expf(-fabsf(x))));
            g[c] = gs * (act_sigmoid(x) - t[c]);
        }
        row = block_reduce(part, shd, sum_op()) / cols;
        break;
    }
    case LOSS_CE: {
        int label = (int)tgt[r];
        float mx = -INFINITY;
        for (int c = threadIdx.x; c < cols; c += LOSS_THREADS)
            mx = fmaxf(mx, o[c]);
        mx = block_reduce(mx, shf, max_op());
        for (int c = threadIdx.x; c < cols; c += LOSS_THREADS)
            part += exp((double)(o[c] - mx));
        double lse = (double)mx + log(block_reduce(part, shd, sum_op()));
        for (int c = threadIdx.x; c < cols; c += LOSS_THREADS) {
            float gv = grad_scale * (float)exp((double)o[c] - lse);
            if (c == label)
                gv -= grad_scale; /* the CPU's g[label] -= grad_scale, same rounding */
            g[c] = gv;
        }
        /* data_check() keeps labels in range; a bad one poisons the loss
         * instead of reading out of bounds. */
        row = label >= 0 && label < cols ? lse - (double)o[label] : (double)NAN;
        break;
    }
    }
    if (threadIdx.x == 0)
        rowloss[r] = row;
}

__global__ void loss_sum_kernel(const double *rowloss, int rows, float *loss_sum)
{
    __shared__ double shd[LOSS_THREADS];
    double part = 0.0;
    for (int i = threadIdx.x; i < rows; i += LOSS_THREADS)
        part += rowloss[i];
    double total = block_reduce(part, shd, sum_op());
    if (threadIdx.x == 0)
        *loss_sum = (float)total;
}

// ---------------------------------------------------------------------------
// launcher

extern "C" cudaError_t kern_loss(cudaStream_t s, loss_t kind, const float *out, const float *tgt,
                                 int rows, int cols, float grad_scale, float *grad,
                                 double *rowloss, float *loss_sum)
{
    if (rows > 0 && cols > 0) {
        loss_rows_kernel<<<(unsigned)rows, LOSS_THREADS, 0, s>>>(kind, out, tgt, cols,
                                                                 grad_scale, grad, rowloss);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    /* Always runs (one block): no rows is a loss sum of 0, as on the CPU.
     * Stream order puts it after every row's loss is written. */
    loss_sum_kernel<<<1, LOSS_THREADS, 0, s>>>(rowloss, rows > 0 && cols > 0 ? rows : 0,
                                               loss_sum);
    return cudaGetLastError();
}
