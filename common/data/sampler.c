/* common/data/sampler.c: DistributedSampler's index rule (see sampler.h). */
#include "common/data/sampler.h"

#include <string.h>

#include "common/base/rng.h"
#include "common/base/status.h"

int sampler_init(sampler_t *s, size_t n, int world, int rank, bool shuffle, bool drop_last,
                 uint64_t seed, char *err)
{
    memset(s, 0, sizeof *s);
    if (world < 1 || rank < 0 || rank >= world)
        return err_set(err, DDP_ERR_INPUT, "sampler: rank %d of world %d", rank, world);
    s->n = n;
    s->shuffle = shuffle;
    s->seed = seed;
    size_t w = (size_t)world;
    if (drop_last && n % w != 0)
        /* math.ceil((n - world) / world), which is floor(n / world) for n >= world */
        s->num_samples = n >= w ? (n - w + w - 1) / w : 0;
    else
        s->num_samples = (n + w - 1) / w;
    s->total = s->num_samples * w;
    if (s->num_samples == 0)
        return err_set(err, DDP_ERR_INPUT,
                       "the data has %zu samples: too few for %d device(s)%s", n, world,
                       drop_last ? " with --drop-last" : "");
    return DDP_OK;
}

void sampler_permutation(const sampler_t *s, long epoch, uint32_t *perm)
{
    if (s->shuffle) {
        /* torch: g.manual_seed(self.seed + self.epoch); randperm(len) */
        rng_t r;
        rng_seed_stream(&r, s->seed + (uint64_t)epoch, RNG_STREAM_SHUFFLE);
        rng_permutation(&r, perm, s->n);
    } else {
        for (size_t i = 0; i < s->n; i++)
            perm[i] = (uint32_t)i;
    }
}
