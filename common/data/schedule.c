/* common/data/schedule.c: the sample schedule of a rank (see schedule.h). */
#include "data/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

int schedule_init(schedule_t *s, const config_t *c, const dataset_t *d, int world, int rank,
                  int local_batch, char *err)
{
    memset(s, 0, sizeof *s);
    s->cfg = c;
    s->data = d;
    s->loaded_epoch = -1;
    int rc = sampler_init(&s->sampler, d->n, world, rank, c->shuffle, c->drop_last, c->seed, err);
    if (rc != DDP_OK)
        return rc;
    epoch_plan_init(&s->plan, s->sampler.num_samples, local_batch, c->accum, c->drop_last);
    if (s->plan.steps == 0)
        return err_set(err, DDP_ERR_INPUT,
                       "--batch: %d rows per device with --drop-last leaves no full batch in %zu "
                       "samples per device",
                       local_batch, s->sampler.num_samples);
    if (c->steps > 0) {
        s->total_steps = c->steps;
        s->epochs = (c->steps + (long)s->plan.steps - 1) / (long)s->plan.steps;
    } else {
        s->epochs = c->epochs;
        s->total_steps = c->epochs * (long)s->plan.steps;
    }
    s->idx = malloc((s->sampler.num_samples ? s->sampler.num_samples : 1) * sizeof *s->idx);
    s->perm = malloc((d->n ? d->n : 1) * sizeof *s->perm);
    if (!s->idx || !s->perm) {
        schedule_free(s);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the sample order");
    }
    return DDP_OK;
}

void schedule_free(schedule_t *s)
{
    free(s->idx);
    free(s->perm);
    s->idx = s->perm = NULL;
}

const uint32_t *schedule_micro(schedule_t *s, long g, int micro, int *rows)
{
    long epoch = schedule_epoch_of(s, g);
    if (epoch != s->loaded_epoch) {
        /* Once per epoch, between steps: the only work here that is not O(batch). */
        sampler_epoch(&s->sampler, epoch, s->idx, s->perm);
        s->loaded_epoch = epoch;
    }
    size_t first;
    epoch_plan_micro(&s->plan, (size_t)(g % (long)s->plan.steps), micro, &first, rows);
    return s->idx + first;
}

size_t schedule_step_rows(const schedule_t *s, long g)
{
    return epoch_plan_step_rows(&s->plan, (size_t)(g % (long)s->plan.steps));
}

bool schedule_logs(const schedule_t *s, long g)
{
    if (g == s->total_steps - 1)
        return true;
    if (s->cfg->log_every > 0)
        return (g + 1) % s->cfg->log_every == 0;
    return (g + 1) % (long)s->plan.steps == 0;
}

long schedule_warmup(const schedule_t *s)
{
    long w = s->cfg->warmup_steps, run = s->total_steps - s->start_step;
    return w < run ? w : run - 1;
}

bool schedule_timed(const schedule_t *s, long g) { return g >= s->start_step + schedule_warmup(s); }
