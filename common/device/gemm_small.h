/* common/device/gemm_small.h: the CPU backend's GEMM for tiny shapes (backend_cpu.c alone), where
 * OpenBLAS's fixed cost is the whole cost (measurements: docs/benchmarks.md).  On every path each
 * element of C is acc = fmaf(op(A)[i][p], op(B)[p][j], acc) for p ascending from acc = 0, in fp32,
 * then alpha * acc (alpha != 1) plus beta * C (beta != 0; C unread when beta == 0): a row's bits do
 * not depend on m, so DP's chunk of rows gets single mode's bits. */
#ifndef DDPBENCH_GEMM_SMALL_H
#define DDPBENCH_GEMM_SMALL_H

#include <stdbool.h>

/* The largest GEMM it takes, in multiply-adds (m n k), and the longest k (the
 * scratch holds a k x 16 tile of B^T). */
#define GEMM_SMALL_MAX 16384
#define GEMM_SMALL_KMAX 256
/* Floats of scratch gemm_small needs (one tile of B^T). */
#define GEMM_SMALL_SCRATCH (GEMM_SMALL_KMAX * 16)

typedef enum { GEMM_SMALL_NONE = 0, GEMM_SMALL_AVX2, GEMM_SMALL_AVX512 } gemm_small_isa_t;

/* The best path this CPU runs (NONE: not an x86-64 with AVX2 and FMA). */
gemm_small_isa_t gemm_small_best(void);

/* C[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C, row-major as cblas_sgemm,
 * on path isa (one this CPU runs: gemm_small_best or below), scratch:
 * GEMM_SMALL_SCRATCH floats, its own to this call.  False, with nothing
 * done, when it does not take the shape (m, n, k < 1, m n k above
 * GEMM_SMALL_MAX, k above GEMM_SMALL_KMAX) or the path. */
bool gemm_small(gemm_small_isa_t isa, bool ta, bool tb, int m, int n, int k, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                float *scratch);

#endif
