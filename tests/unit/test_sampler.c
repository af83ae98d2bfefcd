/* tests/unit/test_sampler.c: DistributedSampler's rule (sizes, padding, drop_last,
 * rank striding, reshuffling per epoch) and the sample stream's split into
 * micro-batches and optimizer steps (schedule.h). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/sampler.h"
#include "common/base/status.h"

static void shard(size_t n, int world, int rank, bool shuffle, bool drop, long epoch,
                  uint32_t *out, size_t *count)
{
    char err[ERR_LEN];
    sampler_t s;
    cr_assert_eq(sampler_init(&s, n, world, rank, shuffle, drop, 7, err), DDP_OK, "%s", err);
    uint32_t *perm = malloc(n * sizeof *perm);
    /* rank r takes positions r, r+world, ... of the padded order */
    sampler_permutation(&s, epoch, perm);
    for (size_t i = 0; i < s.num_samples; i++)
        out[i] = perm[((size_t)rank + i * (size_t)world) % n];
    *count = s.num_samples;
    free(perm);
}

static void expect(size_t n, int world, bool drop, const uint32_t *want, size_t per_rank)
{
    uint32_t got[64];
    for (int r = 0; r < world; r++) {
        size_t c;
        shard(n, world, r, false, drop, 0, got, &c);
        cr_assert_eq(c, per_rank, "n %zu world %d rank %d: %zu samples", n, world, r, c);
        for (size_t i = 0; i < c; i++)
            cr_assert_eq(got[i], want[r * per_rank + i], "n %zu world %d rank %d [%zu]: %u vs %u",
                         n, world, r, i, got[i], want[r * per_rank + i]);
    }
}

Test(sampler, torch_examples_without_shuffle)
{
    /* torch: n=10, world=3: num_samples 4, total 12, padded with [0,1];
     * rank r takes indices[r::3]. */
    expect(10, 3, false, (uint32_t[]){0, 3, 6, 9, 1, 4, 7, 0, 2, 5, 8, 1}, 4);
    /* drop_last: num_samples ceil((10-3)/3) = 3, the tail 9 is dropped */
    expect(10, 3, true, (uint32_t[]){0, 3, 6, 1, 4, 7, 2, 5, 8}, 3);
    /* padding longer than the data: n=2, world=5 -> [0,1,0,1,0] */
    expect(2, 5, false, (uint32_t[]){0, 1, 0, 1, 0}, 1);
    /* divisible: no padding, no dropping */
    expect(6, 2, true, (uint32_t[]){0, 2, 4, 1, 3, 5}, 3);
    expect(6, 2, false, (uint32_t[]){0, 2, 4, 1, 3, 5}, 3);
}

Test(sampler, every_index_once_apart_from_padding)
{
    for (size_t n = 1; n <= 23; n++)
        for (int world = 1; world <= 5; world++)
            for (int drop = 0; drop <= 1; drop++) {
                if (drop && n < (size_t)world)
                    continue;
                int *seen = calloc(n, sizeof *seen);
                size_t total = 0, per = 0;
                for (int r = 0; r < world; r++) {
                    uint32_t out[32];
                    shard(n, world, r, true, drop, 3, out, &per);
                    for (size_t i = 0; i < per; i++) {
                        cr_assert_lt(out[i], n);
                        seen[out[i]]++;
                    }
                    total += per;
                }
                size_t expect_per = drop && n % world ? (n - world + world - 1) / world
                                                      : (n + world - 1) / world;
                cr_assert_eq(per, expect_per, "n %zu world %d drop %d", n, world, drop);
                size_t distinct = 0, extra = 0;
                for (size_t i = 0; i < n; i++) {
                    distinct += seen[i] > 0;
                    extra += seen[i] > 1 ? (size_t)seen[i] - 1 : 0;
                }
                if (drop) {
                    /* dropped tail: every sample at most once */
                    cr_assert_eq(extra, 0u, "n %zu world %d", n, world);
                    cr_assert_eq(distinct, total);
                } else {
                    /* padding: every sample at least once, repeats = total - n */
                    cr_assert_eq(distinct, n, "n %zu world %d", n, world);
                    cr_assert_eq(extra, total - n, "n %zu world %d", n, world);
                }
                free(seen);
            }
}

Test(sampler, epochs_reshuffle_and_seed_plus_epoch_is_reproducible)
{
    uint32_t a[100], b[100], c[100];
    size_t n;
    shard(100, 1, 0, true, false, 0, a, &n);
    shard(100, 1, 0, true, false, 1, b, &n);
    shard(100, 1, 0, true, false, 0, c, &n);
    cr_assert_neq(memcmp(a, b, sizeof a), 0, "epoch 1 differs from epoch 0");
    cr_assert_eq(memcmp(a, c, sizeof a), 0, "the same epoch gives the same order");
    /* a permutation, not a sample with replacement */
    int seen[100] = {0};
    for (int i = 0; i < 100; i++)
        seen[a[i]]++;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(seen[i], 1);
}

Test(sampler, global_steps_draw_the_same_samples_in_every_mode)
{
    /* single (world 1, batch 12) and 3 ranks (batch 4 each) read the same set in every step */
    enum { N = 48, R = 3, B = 12 };
    uint32_t all[N], part[R][N / R];
    size_t n;
    shard(N, 1, 0, true, false, 2, all, &n);
    for (int r = 0; r < R; r++)
        shard(N, R, r, true, false, 2, part[r], &n);
    for (int step = 0; step < N / B; step++) {
        int in_single[N] = {0}, in_ddp[N] = {0};
        for (int i = 0; i < B; i++)
            in_single[all[step * B + i]]++;
        for (int r = 0; r < R; r++)
            for (int i = 0; i < B / R; i++)
                in_ddp[part[r][step * (B / R) + i]]++;
        cr_assert_eq(memcmp(in_single, in_ddp, sizeof in_single), 0, "step %d", step);
    }
}

Test(sampler, empty_shards_are_an_input_error)
{
    char err[ERR_LEN];
    sampler_t s;
    cr_assert_eq(sampler_init(&s, 2, 3, 0, false, true, 0, err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "too few"), "%s", err);
    cr_assert_eq(sampler_init(&s, 0, 1, 0, false, false, 0, err), DDP_ERR_INPUT);
}

// ---------------------------------------------------------------------------
// the sample stream (schedule.h): one stream, dealt to the ranks

#include "common/config/config.h"
#include "common/data/schedule.h"

static void stream_cfg(config_t *c, int batch, int accum, int replicas, bool drop)
{
    config_defaults(c);
    c->batch = batch;
    c->accum = accum;
    c->sampler_replicas = replicas;
    c->drop_last = drop;
    c->epochs = 2;
    c->steps = 0;
    c->seed = 7; /* shard()'s */
    c->shuffle = true;
}

/* DataLoader's micro-batches (the last shorter, or dropped with drop_last)
 * grouped by accum into steps (the last group may be shorter). */
Test(schedule, micro_batches_and_steps)
{
    char err[ERR_LEN];
    config_t c;
    dataset_t d = {.n = 10};
    schedule_t g;
    /* 10 samples, batch 4: micro-batches 4,4,2; accum 2: steps {4,4} and {2} */
    stream_cfg(&c, 4, 2, 1, false);
    c.shuffle = false;
    cr_assert_eq(schedule_init(&g, &c, &d, 1, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(g.micro_batches, 3u);
    cr_assert_eq(g.steps_per_epoch, 2);
    cr_assert_eq(schedule_step_rows(&g, 0), 8u);
    cr_assert_eq(schedule_step_rows(&g, 1), 2u);
    int rows;
    const uint32_t *idx = schedule_micro(&g, 1, 0, &rows);
    cr_assert_eq(rows, 2);
    cr_assert_eq(idx[0], 8u);
    schedule_micro(&g, 1, 1, &rows);
    cr_assert_eq(rows, 0, "the short last step has one micro-batch");
    schedule_free(&g);
    /* drop_last drops the incomplete micro-batch */
    stream_cfg(&c, 4, 1, 1, true);
    cr_assert_eq(schedule_init(&g, &c, &d, 1, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(g.micro_batches, 2u);
    cr_assert_eq(g.steps_per_epoch, 2);
    cr_assert_eq(schedule_step_rows(&g, 1), 4u);
    schedule_free(&g);
}

/* Rank r of R reads rows r, r+R, ... of every global micro-batch: 86, 85, 85
 * of 256; together the ranks read exactly the global micro-batch; and when R
 * divides the batch, a rank's rows are its DistributedSampler shard. */
Test(schedule, ranks_deal_out_each_global_micro_batch)
{
    char err[ERR_LEN];
    const int cases[][3] = {{1000, 256, 3}, {37, 7, 3}, {37, 2, 4}, {100, 12, 3}, {240, 24, 4}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = cases[k][0], B = cases[k][1], R = cases[k][2];
        config_t c;
        stream_cfg(&c, B, 1, R, false);
        dataset_t d = {.n = (size_t)n};
        schedule_t g, rk[8];
        cr_assert_eq(schedule_init(&g, &c, &d, 1, 0, err), DDP_OK, "%s", err);
        for (int r = 0; r < R; r++)
            cr_assert_eq(schedule_init(&rk[r], &c, &d, R, r, err), DDP_OK, "%s", err);
        for (long s = 0; s < g.total_steps; s++) {
            int rows;
            const uint32_t *all = schedule_micro(&g, s, 0, &rows);
            size_t sum = 0;
            for (int r = 0; r < R; r++) {
                int mine;
                const uint32_t *idx = schedule_micro(&rk[r], s, 0, &mine);
                cr_assert_eq(mine, rows > r ? (rows - r + R - 1) / R : 0);
                cr_assert_eq(mine, schedule_rank_micro_rows(&g, s, 0, r));
                for (int j = 0; j < mine; j++)
                    cr_assert_eq(idx[j], all[r + R * j], "n %d B %d R %d step %ld rank %d", n,
                                 B, R, s, r);
                sum += (size_t)mine;
                cr_assert_eq(schedule_step_rows(&rk[r], s), (size_t)rows);
            }
            cr_assert_eq(sum, (size_t)rows);
            /* a step CUDA graphs may replay: every rank its whole share,
             * the same answer in every view */
            for (int r = 0; r < R; r++)
                cr_assert_eq(schedule_full_step(&rk[r], s), rows == B && B >= R,
                             "n %d B %d R %d step %ld rank %d: full step?", n, B, R, s, r);
        }
        if (B % R == 0) { /* the DistributedSampler shard, batch/R at a time */
            for (int r = 0; r < R; r++) {
                uint32_t want[1100];
                size_t cnt;
                shard((size_t)n, R, r, true, false, 1, want, &cnt);
                size_t pos = 0;
                for (long s = g.steps_per_epoch; s < 2 * g.steps_per_epoch; s++) {
                    int mine;
                    const uint32_t *idx = schedule_micro(&rk[r], s, 0, &mine);
                    for (int j = 0; j < mine; j++)
                        cr_assert_eq(idx[j], want[pos++]);
                }
                cr_assert_eq(pos, cnt);
            }
        }
        if (n == 1000) { /* 256 over 3: 86, 85, 85 */
            cr_assert_eq(schedule_rank_micro_rows(&g, 0, 0, 0), 86);
            cr_assert_eq(schedule_rank_micro_rows(&g, 0, 0, 1), 85);
            cr_assert_eq(schedule_rank_micro_rows(&g, 0, 0, 2), 85);
        }
        cr_assert_eq(schedule_epoch_samples(&g), (n + R - 1) / R * R, "the padded stream");
        schedule_free(&g);
        for (int r = 0; r < R; r++)
            schedule_free(&rk[r]);
    }
}

/* --rank-samples: blocks of the permutation, each read alone; the global
 * view is the ranks' micro-batches end to end; a rank out of data is inactive. */
Test(schedule, own_shards_and_the_join_stream)
{
    char err[ERR_LEN];
    config_t c;
    stream_cfg(&c, 9, 2, 0, false); /* 3 rows a rank, 2 micro-batches a step */
    c.nrank_samples = 3;
    c.rank_samples[0] = 20, c.rank_samples[1] = 7, c.rank_samples[2] = 0;
    dataset_t d = {.n = 30};
    schedule_t g, rk[3];
    cr_assert_eq(schedule_init(&g, &c, &d, 1, 0, err), DDP_OK, "%s", err);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(schedule_init(&rk[r], &c, &d, 3, r, err), DDP_OK, "%s", err);
    /* rank 0: 7 micro-batches (4 steps), rank 1: 3 (2 steps), rank 2: none */
    cr_assert_eq(g.steps_per_epoch, 4);
    cr_assert_eq(schedule_rank_steps(&g, 0), 4);
    cr_assert_eq(schedule_rank_steps(&g, 1), 2);
    cr_assert_eq(schedule_rank_steps(&g, 2), 0);
    cr_assert(schedule_rank_active(&g, 1, 1));
    cr_assert_not(schedule_rank_active(&g, 2, 1));
    cr_assert_not(schedule_rank_active(&g, 0, 2));
    cr_assert_eq(schedule_epoch_samples(&g), 27);
    for (long s = 0; s < g.total_steps; s++) /* rank 2 never has data: no step is full */
        cr_assert_not(schedule_full_step(&rk[0], s));
    for (long s = 0; s < g.total_steps; s++) {
        for (int m = 0; m < 2; m++) {
            int rows;
            const uint32_t *all = schedule_micro(&g, s, m, &rows);
            int at = 0;
            for (int r = 0; r < 3; r++) {
                int mine;
                const uint32_t *idx = schedule_micro(&rk[r], s, m, &mine);
                for (int j = 0; j < mine; j++)
                    cr_assert_eq(idx[j], all[at + j], "step %ld micro %d rank %d", s, m, r);
                at += mine;
            }
            cr_assert_eq(at, rows);
        }
    }
    /* the blocks are disjoint: rank 0 and rank 1 never read the same sample */
    int seen[30] = {0};
    for (long s = 0; s < g.steps_per_epoch; s++)
        for (int m = 0; m < 2; m++)
            for (int r = 0; r < 2; r++) {
                int mine;
                const uint32_t *idx = schedule_micro(&rk[r], s, m, &mine);
                for (int j = 0; j < mine; j++)
                    cr_assert_eq(seen[idx[j]]++, 0, "sample %u read twice", idx[j]);
            }
    schedule_free(&g);
    for (int r = 0; r < 3; r++)
        schedule_free(&rk[r]);
}
