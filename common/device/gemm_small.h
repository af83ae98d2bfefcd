/* common/device/gemm_small.h: the CPU backend's GEMM for tiny shapes
 * (backend_cpu.c alone), where OpenBLAS's fixed cost is the whole cost.
 *
 * A tiny GEMM (the seed-size model's are 20 x 10 x 10: 2,000 multiply-adds)
 * takes OpenBLAS (0.3.21) 120-180 ns on this project's 2-core VM, nearly all
 * of it around the arithmetic: the interface, its buffer pool (a lock and a
 * table shared by every thread of the process), packing both operands,
 * scaling C by beta, edge tiles.  Its own small-matrix path does not take
 * these shapes (only n of 8, 16 or 32, and only on the cores it calls
 * SkylakeX).  And the pool is shared: DP's devices meet in it at every GEMM,
 * so each GEMM moved the pool's lines from one core to the other (measured:
 * the seed-size DP step 7.7 us with a lock taken around them, 10.3 us
 * without).  This kernel keeps nothing shared: C's rows in registers, B read
 * in place (B^T, the forward's W^T, packed a tile at a time into the
 * caller's scratch), about 55 ns for 20 x 10 x 10 (90 ns with B^T).
 *
 * Its arithmetic, the same on every path (AVX-512F, AVX2 with FMA; the unit
 * test holds them to a plain loop bit for bit): each element of C is
 *     acc = 0; for p = 0 .. k-1 ascending: acc = fmaf(op(A)[i][p], op(B)[p][j], acc)
 * in fp32 (a fused multiply-add: one rounding a term), then alpha * acc
 * (when alpha != 1), plus C's old value times beta (when beta != 0; C is not
 * read when beta == 0, as in BLAS).  An element's value depends on its row
 * of op(A) and column of op(B) alone, not on m or where the row lies: DP's
 * chunk of rows gets the bits single mode gets for those rows.  (OpenBLAS's
 * Haswell kernel gives the same bits up to k = 7, other bits past that.) */
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
