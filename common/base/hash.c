/* common/base/hash.c: the streaming 64-bit hash (see hash.h). */
#include "base/hash.h"

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

void hash64_init(hash64_t *s)
{
    memset(s, 0, sizeof *s);
    s->h = K2;
}

void hash64_update(hash64_t *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    s->len += n;
    while (n && s->ntail && s->ntail < 8) { /* finish a word begun by an earlier update */
        s->tail[s->ntail++] = *b++;
        n--;
        if (s->ntail == 8) {
            s->h = mix(s->h, load_le64(s->tail));
            s->ntail = 0;
        }
    }
    for (; n >= 8; b += 8, n -= 8)
        s->h = mix(s->h, load_le64(b));
    if (n) { /* n < 8, and the tail is empty: a word was finished or none begun */
        memcpy(s->tail, b, n);
        s->ntail = (unsigned)n;
    }
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
    uint64_t h = s->h;
    if (s->ntail) {
        uint8_t w[8] = {0};
        memcpy(w, s->tail, s->ntail);
        h = mix(h, load_le64(w));
    }
    h = mix(h, s->len);
    h ^= h >> 31;
    h *= K2;
    return h ^ (h >> 32);
}
