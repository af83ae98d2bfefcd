/* common/data/sampler.h: torch.utils.data.DistributedSampler's sizes and
 * order, one rule for every mode (docs/modes.md, "The sample stream"). */
#ifndef DDPBENCH_SAMPLER_H
#define DDPBENCH_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t n;            /* dataset rows */
    bool shuffle;
    uint64_t seed;
    size_t num_samples;  /* indices this rank sees per epoch */
    size_t total;        /* num_samples * world */
} sampler_t;

/* Returns DDP_ERR_INPUT when the shard would be empty (n < world with drop_last, n = 0). */
int sampler_init(sampler_t *s, size_t n, int world, int rank, bool shuffle, bool drop_last,
                 uint64_t seed, char *err);

/* The epoch's order of all n indices: randperm(n, seed + epoch), or 0..n-1
 * without shuffle.  Rank r's indices are positions r, r+world, ... of it,
 * each taken modulo n (the padding repeats its start). */
void sampler_permutation(const sampler_t *s, long epoch, uint32_t *perm);

#endif
