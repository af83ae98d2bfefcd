/* common/base/hash.c: the streaming 64-bit hash (see hash.h). */
#include "common/base/hash.h"

#include <string.h>

#define K1 0x9e3779b97f4a7c15ULL
#define K2 0xbf58476d1ce4e5b9ULL

static inline uint64_t mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * K1;
    return h ^ (h >> 29);
}

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* One 32-byte block: a word into each lane, the lanes independent so the
 * multiplies overlap (about 4x a single chain's speed). */
static inline void block(uint64_t *h, const uint8_t *p)
{
    h[0] = mix(h[0], load_le64(p));
    h[1] = mix(h[1], load_le64(p + 8));
    h[2] = mix(h[2], load_le64(p + 16));
    h[3] = mix(h[3], load_le64(p + 24));
}

void hash64_init(hash64_t *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 4; i++)
        s->h[i] = K2 + (uint64_t)i * K1;
}

void hash64_update(hash64_t *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    s->len += n;
    if (s->ntail) { /* finish a block begun by an earlier update */
        size_t take = HASH64_BLOCK - s->ntail < n ? HASH64_BLOCK - s->ntail : n;
        memcpy(s->tail + s->ntail, b, take);
        s->ntail += (unsigned)take;
        b += take;
        n -= take;
        if (s->ntail < HASH64_BLOCK)
            return;
        block(s->h, s->tail);
        s->ntail = 0;
    }
    for (; n >= HASH64_BLOCK; b += HASH64_BLOCK, n -= HASH64_BLOCK)
        block(s->h, b);
    memcpy(s->tail, b, n);
    s->ntail = (unsigned)n;
}

void hash64_u64(hash64_t *s, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    hash64_update(s, b, sizeof b);
}

uint64_t hash64_final(const hash64_t *s)
{
    uint64_t h[4] = {s->h[0], s->h[1], s->h[2], s->h[3]};
    if (s->ntail) { /* the last partial block, zero-padded (the length tells them apart) */
        uint8_t w[HASH64_BLOCK] = {0};
        memcpy(w, s->tail, s->ntail);
        block(h, w);
    }
    uint64_t v = mix(mix(mix(mix(h[0], h[1]), h[2]), h[3]), s->len);
    v ^= v >> 31;
    v *= K2;
    return v ^ (v >> 32);
}
