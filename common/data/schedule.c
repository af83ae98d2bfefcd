/* common/data/schedule.c: the sample stream, its micro-batches and steps, in
 * the whole or on one DDP rank (see schedule.h). */
#include "common/data/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"

/* Rows r gets when G rows are dealt round-robin to R ranks: ceil((G-r)/R). */
static int deal(long G, int R, int r) { return G > r ? (int)((G - r + R - 1) / R) : 0; }

/* Rank r's rows in micro-batch t of an epoch (0 past its data). */
static int shard_rows(const schedule_t *s, long t, int r)
{
    if (t >= s->shard_micro[r])
        return 0;
    long left = s->shard_n[r] - t * s->shard_batch[r];
    return (int)(left < s->shard_batch[r] ? left : s->shard_batch[r]);
}

/* Rows of global micro-batch t of an epoch (0 when it does not exist). */
static long global_rows(const schedule_t *s, long t)
{
    if (s->own_shards) {
        long g = 0;
        for (int r = 0; r < s->R; r++)
            g += shard_rows(s, t, r);
        return g;
    }
    if (t >= (long)s->micro_batches)
        return 0;
    long left = (long)s->sampler.total - t * s->cfg->batch;
    return left < s->cfg->batch ? left : s->cfg->batch;
}

static int rank_rows(const schedule_t *s, long t, int r)
{
    return s->own_shards ? shard_rows(s, t, r) : deal(global_rows(s, t), s->R, r);
}

/* Micro-batch `micro` of step g as an index into the epoch's micro-batches;
 * -1 when the step has no such micro-batch. */
static long micro_index(const schedule_t *s, long g, int micro)
{
    if (micro < 0 || micro >= s->cfg->accum)
        return -1;
    return (g % s->steps_per_epoch) * s->cfg->accum + micro;
}

// ---------------------------------------------------------------------------
// setup

static int shards_init(schedule_t *s, char *err)
{
    const config_t *c = s->cfg;
    long sum = 0;
    for (int r = 0; r < s->R; r++) {
        s->shard_off[r] = sum;
        s->shard_n[r] = c->rank_samples[r];
        sum += c->rank_samples[r];
    }
    if (sum > (long)s->data->n)
        return err_set(err, DDP_ERR_INPUT,
                       "--rank-samples: the ranks' %ld samples are more than the data's %zu", sum,
                       s->data->n);
    long spe = 0;
    for (int r = 0; r < s->R; r++) {
        int b = deal(c->batch, s->R, r);
        s->shard_batch[r] = b;
        if (b == 0 && s->shard_n[r] > 0)
            return err_set(err, DDP_ERR_INPUT,
                           "--batch: %d rows over %d ranks leave rank %d none for its %ld "
                           "samples (use --batch %d or more, or --batch-per-device N)",
                           c->batch, s->R, r, s->shard_n[r], s->R);
        long mb = b == 0 ? 0 : c->drop_last ? s->shard_n[r] / b : (s->shard_n[r] + b - 1) / b;
        s->shard_micro[r] = mb;
        s->shard_steps[r] = (mb + c->accum - 1) / c->accum;
        if (s->shard_steps[r] > spe)
            spe = s->shard_steps[r];
    }
    if (spe == 0)
        return err_set(err, DDP_ERR_INPUT,
                       "--rank-samples: no rank has a%s batch to train on (rank 0 needs %d "
                       "samples%s)",
                       c->drop_last ? " full" : "", s->shard_batch[0],
                       c->drop_last ? ", or drop --drop-last" : "");
    s->steps_per_epoch = spe;
    return DDP_OK;
}

static int stream_init(schedule_t *s, char *err)
{
    const config_t *c = s->cfg;
    size_t b = (size_t)c->batch, total = s->sampler.total;
    /* DataLoader's: the last micro-batch shorter, or dropped with --drop-last */
    s->micro_batches = c->drop_last ? total / b : (total + b - 1) / b;
    if (s->micro_batches == 0)
        return err_set(err, DDP_ERR_INPUT,
                       "--batch: %d rows with --drop-last leave no full batch in the %zu samples "
                       "of an epoch (use --batch %zu or less, or no --drop-last)",
                       c->batch, total, total);
    s->steps_per_epoch = (long)((s->micro_batches + (size_t)c->accum - 1) / (size_t)c->accum);
    return DDP_OK;
}

int schedule_init(schedule_t *s, const config_t *c, const dataset_t *d, int ranks, int rank,
                  char *err)
{
    memset(s, 0, sizeof *s);
    s->cfg = c;
    s->data = d;
    s->loaded_epoch = -1;
    s->ranks = ranks;
    s->rank = rank;
    s->R = config_stream_ranks(c);
    s->own_shards = c->nrank_samples > 0;
    if (ranks != 1 && ranks != s->R)
        return err_set(err, DDP_ERR_INPUT,
                       "the sample stream is dealt to %d ranks, this run has %d", s->R, ranks);
    /* --rank-samples has no sampler padding: its sizes are those of one replica */
    TRY(sampler_init(&s->sampler, d->n, s->own_shards ? 1 : s->R, 0, c->shuffle, c->drop_last,
                     c->seed, err));
    TRY(s->own_shards ? shards_init(s, err) : stream_init(s, err));
    long spe = s->steps_per_epoch;
    if (c->steps > 0) {
        s->total_steps = c->steps;
        s->epochs = (c->steps + spe - 1) / spe;
    } else {
        s->epochs = c->epochs;
        s->total_steps = c->epochs * spe;
    }
    size_t n = d->n ? d->n : 1, total = s->sampler.total ? s->sampler.total : 1;
    s->perm = malloc(n * sizeof *s->perm);
    /* the view's indices: a copy of the (padded) stream or of a rank's rows;
     * a rank's own shard is read in place from perm */
    if (!(s->own_shards && ranks > 1))
        s->ord = malloc((s->own_shards ? n : total) * sizeof *s->ord);
    if (s->own_shards && ranks == 1)
        s->off = malloc(((size_t)spe * (size_t)c->accum + 1) * sizeof *s->off);
    if (!s->perm || (!s->ord && !(s->own_shards && ranks > 1)) ||
        (s->own_shards && ranks == 1 && !s->off)) {
        schedule_free(s);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the sample order");
    }
    return DDP_OK;
}

void schedule_free(schedule_t *s)
{
    free(s->perm);
    if (!(s->own_shards && s->ranks > 1))
        free(s->ord);
    free(s->off);
    s->ord = s->perm = NULL;
    s->off = NULL;
}

// ---------------------------------------------------------------------------
// an epoch's order

/* Once per epoch, between steps: the only work here that is not O(batch). */
static void load_epoch(schedule_t *s, long epoch)
{
    const int B = s->cfg->batch, R = s->R;
    /* a scenario's planted mistake: DistributedSampler.set_epoch never called */
    sampler_permutation(&s->sampler, s->cfg->plant.kind == PLANT_SAME_ORDER ? 0 : epoch, s->perm);
    s->loaded_epoch = epoch;
    if (s->own_shards) {
        if (s->ranks > 1) { /* this rank's block, in place */
            s->ord = s->perm + s->shard_off[s->rank];
            return;
        }
        /* the global view: each micro-batch is the ranks' micro-batches in rank order */
        size_t pos = 0;
        long nt = s->steps_per_epoch * s->cfg->accum;
        for (long t = 0; t < nt; t++) {
            s->off[t] = pos;
            for (int r = 0; r < R; r++) {
                int k = shard_rows(s, t, r);
                memcpy(s->ord + pos, s->perm + s->shard_off[r] + t * s->shard_batch[r],
                       (size_t)k * sizeof *s->ord);
                pos += (size_t)k;
            }
        }
        s->off[nt] = pos;
        return;
    }
    /* The sampler's stream: position p is perm[p mod n] (padding repeats the
     * start, as often as needed). */
    const size_t n = s->data->n, total = s->sampler.total;
    if (s->ranks == 1) {
        /* q = p mod n, without a division per row (an epoch of the
         * seed-size model is 20 steps of about 1 us: 400 divisions were a
         * tenth of them) */
        for (size_t p = 0, q = 0; p < total; p++, q = q + 1 == n ? 0 : q + 1)
            s->ord[p] = s->perm[q];
        return;
    }
    /* Rank r: rows r, r+R, ... of each micro-batch, a full one's at t*deal(B). */
    const int r = s->rank, per = deal(B, R, r);
    for (long t = 0; t < (long)s->micro_batches; t++) {
        int k = deal(global_rows(s, t), R, r);
        for (int j = 0; j < k; j++)
            s->ord[t * per + j] = s->perm[((size_t)t * B + (size_t)r + (size_t)R * j) % n];
    }
}

const uint32_t *schedule_micro(schedule_t *s, long g, int micro, int *rows)
{
    *rows = 0;
    long t = micro_index(s, g, micro);
    if (t < 0)
        return NULL;
    long epoch = schedule_epoch_of(s, g);
    if (epoch != s->loaded_epoch)
        load_epoch(s, epoch);
    if (s->ranks == 1) {
        *rows = (int)global_rows(s, t);
        return s->ord + (s->own_shards ? s->off[t] : (size_t)t * s->cfg->batch);
    }
    *rows = rank_rows(s, t, s->rank);
    int per = s->own_shards ? s->shard_batch[s->rank] : deal(s->cfg->batch, s->R, s->rank);
    return s->ord + (size_t)t * (size_t)per;
}

// ---------------------------------------------------------------------------
// rows and steps

size_t schedule_step_rows(const schedule_t *s, long g)
{
    size_t total = 0;
    for (int m = 0; m < s->cfg->accum; m++)
        total += (size_t)global_rows(s, micro_index(s, g, m));
    return total;
}

size_t schedule_view_rows(const schedule_t *s, long g)
{
    if (s->ranks == 1)
        return schedule_step_rows(s, g);
    size_t total = 0;
    for (int m = 0; m < s->cfg->accum; m++)
        total += (size_t)rank_rows(s, micro_index(s, g, m), s->rank);
    return total;
}

int schedule_rank_micro_rows(const schedule_t *s, long g, int micro, int r)
{
    long t = micro_index(s, g, micro);
    return t < 0 || r < 0 || r >= s->R ? 0 : rank_rows(s, t, r);
}

bool schedule_full_step(const schedule_t *s, long g)
{
    for (int m = 0; m < s->cfg->accum; m++) {
        long t = micro_index(s, g, m);
        for (int r = 0; r < s->R; r++) {
            int full = s->own_shards ? s->shard_batch[r] : deal(s->cfg->batch, s->R, r);
            if (t < 0 || full == 0 || rank_rows(s, t, r) != full)
                return false;
        }
    }
    return true;
}

bool schedule_rank_active(const schedule_t *s, long g, int r)
{
    return !s->own_shards || g % s->steps_per_epoch < s->shard_steps[r];
}

long schedule_rank_steps(const schedule_t *s, int r)
{
    return s->own_shards ? s->shard_steps[r] : s->steps_per_epoch;
}

long schedule_epoch_samples(const schedule_t *s)
{
    long total = 0;
    for (long t = 0; t < s->steps_per_epoch * s->cfg->accum; t++)
        total += global_rows(s, t);
    return total;
}

bool schedule_logs(const schedule_t *s, long g)
{
    if (g == s->total_steps - 1)
        return true;
    if (s->cfg->log_every > 0)
        return (g + 1) % s->cfg->log_every == 0;
    return (g + 1) % s->steps_per_epoch == 0;
}

long schedule_warmup(const schedule_t *s)
{
    long w = s->cfg->warmup_steps, run = s->total_steps - s->start_step;
    return w < run ? w : run - 1;
}

bool schedule_timed(const schedule_t *s, long g) { return g >= s->start_step + schedule_warmup(s); }

long schedule_told_step(const schedule_t *s)
{
    long t0 = s->start_step + schedule_warmup(s);
    return t0 + (s->total_steps - t0 - 1) / 2;
}
