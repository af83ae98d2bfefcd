/* common/device/bf16.h: rounding an fp32 value to bfloat16, round to nearest
 * even, the one definition the CPU backend and the CUDA kernels share (this
 * header is included by backend_cpu.c and kernels_util.cuh), so the CPU
 * reference of --precision bf16 rounds exactly as the GPU's kernels do.
 *
 * bf16 keeps fp32's sign and 8-bit exponent and the top 7 of its 23 stored
 * mantissa bits (an 8-bit significand): a rounding moves a value by at most
 * half a unit in the last place, 2^-8 of it (2^-9 on average over a
 * binade).  NaN stays NaN (quiet);
 * overflow rounds to infinity, as the hardware conversion does. */
#ifndef DDPBENCH_BF16_H
#define DDPBENCH_BF16_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define BF16_FN static __host__ __device__ __forceinline__
#else
#define BF16_FN static inline
#endif

/* The bf16 nearest x (ties to even), as its 16 bits. */
BF16_FN uint16_t bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it one, quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The fp32 value of bf16 bits (exact). */
BF16_FN float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to the nearest bf16, as an fp32 value. */
BF16_FN float bf16_round(float x) { return bf16_value(bf16_bits(x)); }

#endif
