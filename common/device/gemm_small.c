/* common/device/gemm_small.c: the tiny GEMM (see gemm_small.h): one kernel per vector width, the
 * same loop nest and arithmetic in each.  C in tiles of W columns (W floats a vector); in a tile,
 * blocks of R = 8 rows (8 independent chains of additions hide an addition's latency; the rows
 * left take blocks of 4, 2, 1), each row's W sums in one register, and for p ascending the tile's
 * row p of op(B) loaded once (masked past n).  B^T (tb) is copied a tile (k x W) to scratch. */
#include "common/device/gemm_small.h"

#include <stdatomic.h>
#include <stddef.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define GEMM_SMALL_X86 1
#endif

#ifdef GEMM_SMALL_X86

/* The tile of op(B) for columns [j0, j0 + nj), k rows of w floats at ldp:
 * B itself, or B^T copied into the scratch. */
static const float *tile_of_b(bool tb, int k, const float *B, int ldb, int j0, int nj, int w,
                              float *scratch, int *ldp)
{
    if (!tb) {
        *ldp = ldb;
        return B + j0;
    }
    for (int jj = 0; jj < nj; jj++) {
        const float *src = B + (size_t)(j0 + jj) * ldb;
        for (int p = 0; p < k; p++)
            scratch[(size_t)p * w + jj] = src[p];
    }
    *ldp = w;
    return scratch;
}

// ---------------------------------------------------------------------------
// AVX-512F: 16 columns a tile

/* R rows from i0 of the tile at column j0 (mask mk: its nj columns); R and
 * ta are constants where it is inlined. */
__attribute__((target("avx512f"), always_inline)) static inline void
block16(const int R, const bool ta, int k, float alpha, const float *A, int lda, const float *Bt,
        int ldp, float beta, float *C, int ldc, int i0, int j0, __mmask16 mk)
{
    __m512 acc[8];
    for (int r = 0; r < R; r++)
        acc[r] = _mm512_setzero_ps();
    for (int p = 0; p < k; p++) {
        __m512 b = _mm512_maskz_loadu_ps(mk, Bt + (size_t)p * ldp);
        for (int r = 0; r < R; r++) {
            float a = ta ? A[(size_t)p * lda + i0 + r] : A[(size_t)(i0 + r) * lda + p];
            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float *c = C + (size_t)(i0 + r) * ldc + j0;
        __m512 o = alpha == 1.0f ? acc[r] : _mm512_mul_ps(_mm512_set1_ps(alpha), acc[r]);
        if (beta != 0.0f) {
            __m512 old = _mm512_maskz_loadu_ps(mk, c);
            o = _mm512_add_ps(o, beta == 1.0f ? old : _mm512_mul_ps(_mm512_set1_ps(beta), old));
        }
        _mm512_mask_storeu_ps(c, mk, o);
    }
}

/* NAME: every row of the tile at column j0, in blocks of 8, 4, 2, 1 of BLOCK (one width's
 * block function, its mask type and target). */
#define DEFINE_ROWS(name, block, mask_t, isa)                                              \
    __attribute__((target(isa), always_inline)) static inline void name(                   \
        const bool ta, int m, int k, float alpha, const float *A, int lda, const float *Bt,  \
        int ldp, float beta, float *C, int ldc, int j0, mask_t mk)                         \
    {                                                                                      \
        int i = 0;                                                                         \
        for (; i + 8 <= m; i += 8)                                                         \
            block(8, ta, k, alpha, A, lda, Bt, ldp, beta, C, ldc, i, j0, mk);              \
        if (i + 4 <= m) {                                                                  \
            block(4, ta, k, alpha, A, lda, Bt, ldp, beta, C, ldc, i, j0, mk);              \
            i += 4;                                                                        \
        }                                                                                  \
        if (i + 2 <= m) {                                                                  \
            block(2, ta, k, alpha, A, lda, Bt, ldp, beta, C, ldc, i, j0, mk);              \
            i += 2;                                                                        \
        }                                                                                  \
        if (i < m)                                                                         \
            block(1, ta, k, alpha, A, lda, Bt, ldp, beta, C, ldc, i, j0, mk);              \
    }

DEFINE_ROWS(rows16, block16, __mmask16, "avx512f")

__attribute__((target("avx512f"))) static void
gemm16(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
       const float *B, int ldb, float beta, float *C, int ldc, float *scratch)
{
    for (int j0 = 0; j0 < n; j0 += 16) {
        int nj = n - j0 < 16 ? n - j0 : 16, ldp;
        __mmask16 mk = (__mmask16)((1u << nj) - 1u);
        const float *Bt = tile_of_b(tb, k, B, ldb, j0, nj, 16, scratch, &ldp);
        if (ta)
            rows16(true, m, k, alpha, A, lda, Bt, ldp, beta, C, ldc, j0, mk);
        else
            rows16(false, m, k, alpha, A, lda, Bt, ldp, beta, C, ldc, j0, mk);
    }
}

// ---------------------------------------------------------------------------
// AVX2: 8 columns a tile

__attribute__((target("avx2,fma"), always_inline)) static inline void
block8(const int R, const bool ta, int k, float alpha, const float *A, int lda, const float *Bt,
       int ldp, float beta, float *C, int ldc, int i0, int j0, __m256i mk)
{
    __m256 acc[8];
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (int p = 0; p < k; p++) {
        __m256 b = _mm256_maskload_ps(Bt + (size_t)p * ldp, mk);
        for (int r = 0; r < R; r++) {
            float a = ta ? A[(size_t)p * lda + i0 + r] : A[(size_t)(i0 + r) * lda + p];
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(a), b, acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float *c = C + (size_t)(i0 + r) * ldc + j0;
        __m256 o = alpha == 1.0f ? acc[r] : _mm256_mul_ps(_mm256_set1_ps(alpha), acc[r]);
        if (beta != 0.0f) {
            __m256 old = _mm256_maskload_ps(c, mk);
            o = _mm256_add_ps(o, beta == 1.0f ? old : _mm256_mul_ps(_mm256_set1_ps(beta), old));
        }
        _mm256_maskstore_ps(c, mk, o);
    }
}

DEFINE_ROWS(rows8, block8, __m256i, "avx2,fma")

__attribute__((target("avx2,fma"))) static void
gemm8(bool ta, bool tb, int m, int n, int k, float alpha, const float *A, int lda,
      const float *B, int ldb, float beta, float *C, int ldc, float *scratch)
{
    for (int j0 = 0; j0 < n; j0 += 8) {
        int nj = n - j0 < 8 ? n - j0 : 8, ldp;
        /* lane l on when l < nj: its sign bit set */
        __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(nj),
                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        const float *Bt = tile_of_b(tb, k, B, ldb, j0, nj, 8, scratch, &ldp);
        if (ta)
            rows8(true, m, k, alpha, A, lda, Bt, ldp, beta, C, ldc, j0, mk);
        else
            rows8(false, m, k, alpha, A, lda, Bt, ldp, beta, C, ldc, j0, mk);
    }
}

gemm_small_isa_t gemm_small_best(void)
{
    static _Atomic int best = -1; /* every thread that asks first finds the same */
    int b = atomic_load_explicit(&best, memory_order_relaxed);
    if (b < 0) {
        __builtin_cpu_init();
        b = __builtin_cpu_supports("avx512f")                                    ? GEMM_SMALL_AVX512
            : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? GEMM_SMALL_AVX2
                                                                              : GEMM_SMALL_NONE;
        atomic_store_explicit(&best, b, memory_order_relaxed);
    }
    return (gemm_small_isa_t)b;
}

#else

gemm_small_isa_t gemm_small_best(void) { return GEMM_SMALL_NONE; }

#endif

bool gemm_small(gemm_small_isa_t isa, bool ta, bool tb, int m, int n, int k, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                float *scratch)
{
    if (m < 1 || n < 1 || k < 1 || k > GEMM_SMALL_KMAX ||
        (double)m * (double)n * (double)k > GEMM_SMALL_MAX || isa == GEMM_SMALL_NONE ||
        isa > gemm_small_best())
        return false;
#ifdef GEMM_SMALL_X86
    if (isa == GEMM_SMALL_AVX512)
        gemm16(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, scratch);
    else
        gemm8(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, scratch);
    return true;
#else
    (void)ta, (void)tb, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb, (void)beta;
    (void)C, (void)ldc, (void)scratch;
    return false;
#endif
}
