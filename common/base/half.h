/* common/base/half.h: the 16-bit formats DDP's compression hooks send (IEEE binary16 "fp16",
 * bfloat16 "bf16"), converted to and from float32 with round-to-nearest-even as CUDA's
 * __float2half_rn / __float2bfloat16_rn do, and their sum as NCCL's __hadd (float32 then one
 * rounding: why that is exact, docs/modes.md).  Plain C, so the CPU backend, the collectives and
 * the CUDA kernels (HALF_FN adds __host__ __device__ under nvcc) share one definition. */
#ifndef DDPBENCH_HALF_H
#define DDPBENCH_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define HALF_FN static inline __host__ __device__
#else
#define HALF_FN static inline
#endif

/* The element types a collective may carry (comm.h): float32, or one of the
 * 16-bit formats (all-reduce with a sum only). */
typedef enum { DTYPE_F32 = 0, DTYPE_F16, DTYPE_BF16 } dtype_t;

HALF_FN uint32_t half_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

HALF_FN float half_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* float32 -> binary16, round to nearest even; overflow -> inf, NaN stays NaN
 * (quiet), subnormals rounded like the normal range. */
HALF_FN uint16_t half_from_f32(float f)
{
    uint32_t x = half_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x0200u : 0u));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal (or zero) result */
        if (ax < 0x33000000u) /* below 2^-25: rounds to zero (2^-25 itself is a tie to 0) */
            return sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* value = m * 2^(e-150); unit 2^-24: m >> (126-e) */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    /* normal: rebias the exponent (127 -> 15), keep 10 of 23 mantissa bits */
    uint32_t r = ax - 0x38000000u; /* exponent - 112, so bits >> 13 are the half's */
    uint32_t q = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* a carry into the exponent is right, up to inf */
    return (uint16_t)(sign | q);
}

HALF_FN float half_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        return half_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return half_bits_f32(sign);
        /* subnormal: m * 2^-24, exact in float32 */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return half_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* float32 -> bfloat16 (the upper 16 bits), round to nearest even; NaN stays
 * NaN (quiet). */
HALF_FN uint16_t bf16_from_f32(float f)
{
    uint32_t x = half_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

HALF_FN float bf16_to_f32(uint16_t b) { return half_bits_f32((uint32_t)b << 16); }

/* f rounded to the nearest bfloat16, as a float32: the values --precision
 * bf16 stores (device/backend.h); at most 2^-8 of f away. */
HALF_FN float bf16_round_f32(float f) { return bf16_to_f32(bf16_from_f32(f)); }

HALF_FN uint16_t dtype16_from_f32(dtype_t t, float f)
{
    return t == DTYPE_BF16 ? bf16_from_f32(f) : half_from_f32(f);
}

HALF_FN float dtype16_to_f32(dtype_t t, uint16_t v)
{
    return t == DTYPE_BF16 ? bf16_to_f32(v) : half_to_f32(v);
}

/* a + b in format t, rounded once (NCCL's FuncSum<half> / <__nv_bfloat16>). */
HALF_FN uint16_t dtype16_add(dtype_t t, uint16_t a, uint16_t b)
{
    return dtype16_from_f32(t, dtype16_to_f32(t, a) + dtype16_to_f32(t, b));
}

#endif
