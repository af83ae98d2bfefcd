/* common/device/peak_cpu.c: a core's measured peak fp32 rate (backend_cpu_core_peak): FMAs
 * at one vector width into PEAK_ACC independent accumulators (4 cycles of latency on 2 pipes
 * keep 8 in flight), the fastest of PEAK_BURSTS short bursts (an interrupted burst only took
 * longer), under a millisecond in all. */
#include "common/base/clock.h"
#include "common/device/backend.h"

#define PEAK_ACC 12
#define PEAK_ITERS 4096
#define PEAK_BURSTS 32

#if defined(__x86_64__)
#include <immintrin.h>

/* the accumulators' sum, so the loop is kept; one per thread: every device
 * thread calibrates its own core at once, and a shared sink is a data race */
static _Thread_local volatile float peak_sink;

/* One burst at one width: the seconds it took (`first` reads a lane, for the sink). */
#define FMA_BURST(name, isa, vec, set1, fma, first)                                        \
    __attribute__((target(isa))) static double name(void)                                  \
    {                                                                                      \
        vec a[PEAK_ACC], m = set1(0.999f), c = set1(1e-3f);                                \
        for (int i = 0; i < PEAK_ACC; i++)                                                 \
            a[i] = set1((float)i);                                                         \
        double t = now_s();                                                                \
        for (int k = 0; k < PEAK_ITERS; k++)                                               \
            for (int i = 0; i < PEAK_ACC; i++)                                             \
                a[i] = fma(a[i], m, c);                                                    \
        t = now_s() - t;                                                                   \
        for (int i = 0; i < PEAK_ACC; i++)                                                 \
            peak_sink += first(a[i]);                                                      \
        return t;                                                                          \
    }
#define MUL_ADD(a, m, c) _mm_add_ps(_mm_mul_ps(a, m), c) /* 2 FLOPs, as an FMA */
FMA_BURST(burst512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_cvtss_f32)
FMA_BURST(burst256, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_cvtss_f32)
FMA_BURST(burst128, "sse2", __m128, _mm_set1_ps, MUL_ADD, _mm_cvtss_f32)

int backend_cpu_vector_bits(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f")                                     ? 512
           : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 256
                                                                                 : 128;
}

double backend_cpu_core_peak(int bits)
{
    int widest = backend_cpu_vector_bits();
    if (bits <= 0 || bits > widest)
        bits = widest;
    double (*burst)(void) = bits == 512 ? burst512 : bits == 256 ? burst256 : burst128;
    double best = 0.0;
    for (int b = 0; b < PEAK_BURSTS; b++) {
        double t = burst();
        if (t > 0.0 && (best == 0.0 || t < best))
            best = t;
    }
    return best > 0.0 ? 2.0 * (bits / 32) * PEAK_ACC * PEAK_ITERS / best : 0.0;
}
#else
int backend_cpu_vector_bits(void) { return 0; }
double backend_cpu_core_peak(int bits) { (void)bits; return 0.0; } /* not measured here */
#endif
