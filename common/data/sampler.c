/* common/data/sampler.c: DistributedSampler's index rule and the epoch's split into
 * micro-batches and optimizer steps (see sampler.h). */
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
    s->world = world;
    s->rank = rank;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
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

void sampler_epoch(const sampler_t *s, long epoch, uint32_t *out, uint32_t *scratch)
{
    sampler_permutation(s, epoch, scratch);
    /* Position p of the padded list is indices[p % n] (padding repeats the
     * list from its start, as often as needed); rank r takes p = r, r+R, ... */
    for (size_t i = 0; i < s->num_samples; i++) {
        size_t p = (size_t)s->rank + i * (size_t)s->world;
        out[i] = scratch[p % s->n];
    }
}

void epoch_plan_init(epoch_plan_t *p, size_t samples, int batch, int accum, bool drop_last)
{
    memset(p, 0, sizeof *p);
    p->samples = samples;
    p->batch = batch;
    p->accum = accum;
    p->drop_last = drop_last;
    size_t b = (size_t)batch;
    p->micro_batches = drop_last ? samples / b : (samples + b - 1) / b;
    p->steps = (p->micro_batches + (size_t)accum - 1) / (size_t)accum;
}

void epoch_plan_micro(const epoch_plan_t *p, size_t step, int micro, size_t *first, int *rows)
{
    size_t idx = step * (size_t)p->accum + (size_t)micro;
    *first = 0;
    *rows = 0;
    if (micro < 0 || micro >= p->accum || idx >= p->micro_batches)
        return;
    *first = idx * (size_t)p->batch;
    size_t left = p->samples - *first;
    *rows = (int)(left < (size_t)p->batch ? left : (size_t)p->batch);
}

size_t epoch_plan_step_rows(const epoch_plan_t *p, size_t step)
{
    size_t total = 0;
    for (int m = 0; m < p->accum; m++) {
        size_t first;
        int rows;
        epoch_plan_micro(p, step, m, &first, &rows);
        total += (size_t)rows;
    }
    return total;
}
