/* tests/unit/test_zero.c: ZeRO-2 and ZeRO-3 (--zero 2, --zero 3) against plain DDP: the
 * same final parameters, bit for bit over shared memory (every element is
 * summed once in rank order, the updates are elementwise), on every
 * optimizer and loss, 1 to 8 ranks, an uneven batch split, accumulation, a
 * rank out of data, tiny buckets; and the memory each stage holds, against
 * its definition (ddp/shard.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ddp/reducer.h"
#include "testutil.h"

#define BASE "--backend cpu --quiet --layers 8,24,16,%d --samples 240 --batch 24 --steps 12 --seed 3"

static const char *optims[] = {
    "--optim sgd --lr 0.05",
    "--optim sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 0.01",
    "--optim adam --lr 0.001",
    "--optim adamw --lr 0.001",
};
static const char *gpu_lists[] = {"0", "0,1", "0,1,2", "0,1,2,3", "0,1,2,3,4",
                                  "0,1,2,3,4,5", "0,1,2,3,4,5,6", "0,1,2,3,4,5,6,7"};

/* ddp (args) on w ranks against the same with --zero stage: identical bits. */
static void same_bits(const char *args, int w, int stage)
{
    char line[1024], err[ERR_LEN];
    run_result_t plain, z;
    snprintf(line, sizeof line, "%s --mode ddp --gpus %s", args, gpu_lists[w - 1]);
    cr_assert_eq(tu_run(line, &plain, err), DDP_OK, "'%s': %s", line, err);
    snprintf(line, sizeof line, "%s --mode ddp --gpus %s --zero %d", args, gpu_lists[w - 1],
             stage);
    cr_assert_eq(tu_run(line, &z, err), DDP_OK, "'%s': %s", line, err);
    cr_assert_eq(z.nparams, plain.nparams);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < z.nparams; i++)
        if (memcmp(&z.params[i], &plain.params[i], sizeof(float)) != 0 && bad++ == 0)
            first = i;
    cr_assert_eq(bad, 0, "'%s': %zu parameters differ from plain DDP's, the first [%zu] %.9g vs %.9g",
                 line, bad, first, z.params[first], plain.params[first]);
    cr_assert_eq(z.final_loss, plain.final_loss, "'%s': final loss %.9g vs %.9g", line,
                 z.final_loss, plain.final_loss);
    result_free(&plain);
    result_free(&z);
}

Test(zero, every_optimizer_and_loss_1_to_4_ranks, .timeout = 240)
{
    const char *losses[] = {"--loss mse", "--loss bce", "--loss ce"};
    const int outs[] = {3, 2, 4};
    for (int o = 0; o < 4; o++)
        for (int stage = 2; stage <= 3; stage++) {
            char args[512];
            snprintf(args, sizeof args, BASE " %s %s", outs[o % 3], losses[o % 3], optims[o]);
            for (int w = 1; w <= 4; w++)
                same_bits(args, w, stage);
        }
}

/* 5 to 8 ranks: blocks of a few floats, buckets smaller than the world. */
Test(zero, five_to_eight_ranks_tiny_buckets, .timeout = 240)
{
    char args[512];
    snprintf(args, sizeof args,
             "--backend cpu --quiet --layers 8,24,16,3 --samples 240 --batch 40 --steps 6 "
             "--seed 2 --loss mse %s --bucket-mb 0.001 --first-bucket-mb 0.001",
             optims[2]);
    for (int w = 5; w <= 8; w++)
        for (int stage = 2; stage <= 3; stage++)
            same_bits(args, w, stage);
}

/* 25 rows over 3 ranks (9, 8, 8), accumulation over micro-batches in which
 * a rank has no rows (batch 5 over 4 ranks, 2 micro-batches: 3 and 2 rows),
 * no overlap, and a rank out of data under join. */
Test(zero, uneven_rows_accumulation_and_a_rank_out_of_data, .timeout = 240)
{
    const char *cases[][2] = {
        {"--backend cpu --quiet --layers 8,24,16,3 --samples 240 --batch 25 --steps 10 --seed 4 "
         "--loss mse --optim sgd --lr 0.05 --momentum 0.9", "0,1,2"},
        {"--backend cpu --quiet --layers 8,24,16,3 --samples 240 --batch 25 --steps 10 --seed 4 "
         "--loss mse --optim adam --lr 0.001 --accum 2 --no-overlap", "0,1,2"},
        {"--backend cpu --quiet --layers 8,24,16,3 --samples 240 --batch 5 --steps 10 --seed 6 "
         "--loss ce --optim adamw --lr 0.001 --accum 2 --bucket-mb 0.001 --first-bucket-mb "
         "0.001", "0,1,2,3"},
        {"--backend cpu --quiet --layers 8,6,2 --loss mse --samples 80 --batch 6 --steps 9 "
         "--seed 5 --optim adam --lr 0.01 --rank-samples 40,20,10", "0,1,2"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int w = (int)(strlen(cases[k][1]) + 1) / 2;
        for (int stage = 2; stage <= 3; stage++)
            same_bits(cases[k][0], w, stage);
    }
}

// ---------------------------------------------------------------------------
// memory: each stage's rows against their definition

/* The buckets --zero stage uses for args' model (ZeRO-3: one per layer). */
static size_t shard_floats(const model_spec_t *s, const config_t *c, int w, int rank, int stage,
                           size_t biggest[2])
{
    reducer_t r;
    char err[ERR_LEN];
    cr_assert_eq(reducer_init(&r, NULL, NULL, s, NULL, c->first_bucket_mb, c->bucket_mb, true,
                              BUCKETS_CAPPED, err), DDP_OK);
    if (stage == 3) { /* layer l = bucket L-1-l */
        r.nb = s->nlayers;
        for (int i = 0; i < r.nb; i++) {
            int l = s->nlayers - 1 - i;
            r.b[i].count = (size_t)s->dims[l] * s->dims[l + 1] + s->dims[l + 1];
        }
    }
    size_t n = 0;
    biggest[0] = biggest[1] = 0;
    for (int i = 0; i < r.nb; i++) {
        size_t blk = reducer_block(&r.b[i], w), rest = reducer_rest(&r.b[i], w);
        n += blk + rest;
        if (r.b[i].count > biggest[i % 2])
            biggest[i % 2] = r.b[i].count;
        (void)rank;
    }
    reducer_free(&r);
    return n;
}

/* Plain DDP: parameters, gradients and state whole.  ZeRO-2: gradients its
 * shard plus the two bucket buffers (each its parity's largest bucket).
 * ZeRO-3: the same for parameters (layer buffers) and gradients (a bucket
 * per layer).  The state: the shard, as ZeRO-1. */
Test(zero, memory_rows_follow_each_stages_definition, .timeout = 120)
{
    const char *args = "--backend cpu --quiet --layers 16,64,64,64,64,4 --samples 240 --batch 24 "
                       "--steps 3 --seed 3 --loss mse --optim adam --lr 0.001 --bucket-mb 0.01 "
                       "--first-bucket-mb 0.01";
    char line[1024], err[ERR_LEN];
    config_t c;
    model_spec_t spec;
    cr_assert_eq(tu_parse(&c, args, err), DDP_OK, "%s", err);
    cr_assert_eq(config_model_spec(&c, &spec, err), DDP_OK, "%s", err);
    double P = (double)spec.nparams * sizeof(float);
    const int w = 4;
    run_result_t res[4];
    for (int stage = 0; stage <= 3; stage++) {
        snprintf(line, sizeof line, "%s --mode ddp --gpus %s --zero %d", args, gpu_lists[w - 1],
                 stage);
        if (stage == 0)
            snprintf(line, sizeof line, "%s --mode ddp --gpus %s", args, gpu_lists[w - 1]);
        cr_assert_eq(tu_run(line, &res[stage], err), DDP_OK, "'%s': %s", line, err);
    }
    for (int r = 0; r < w; r++) {
        const size_t *p = res[0].dev[r].mem_split;
        cr_assert_eq(p[MEM_PARAMS], (size_t)P);
        cr_assert_eq(p[MEM_GRADS], (size_t)P);
        cr_assert_eq(p[MEM_OPTIM], (size_t)(2 * P));
        for (int stage = 1; stage <= 3; stage++) {
            size_t big[2];
            size_t sh = shard_floats(&spec, &c, w, r, stage, big) * sizeof(float);
            const size_t *m = res[stage].dev[r].mem_split;
            size_t slots = (big[0] + big[1]) * sizeof(float);
            cr_assert_eq(m[MEM_OPTIM], 2 * sh, "stage %d rank %d: state %zu, shard %zu", stage, r,
                         m[MEM_OPTIM], sh);
            cr_assert_eq(m[MEM_GRADS], stage >= 2 ? sh + slots : (size_t)P,
                         "stage %d rank %d: gradients %zu, shard %zu + buffers %zu", stage, r,
                         m[MEM_GRADS], sh, slots);
            cr_assert_eq(m[MEM_PARAMS], stage >= 3 ? sh + slots : (size_t)P,
                         "stage %d rank %d: parameters %zu, shard %zu + buffers %zu", stage, r,
                         m[MEM_PARAMS], sh, slots);
            cr_assert(stage < 2 || m[MEM_GRADS] < P, "stage %d: gradients not below the arena",
                      stage);
            cr_assert(stage < 3 || m[MEM_PARAMS] < P, "stage 3: parameters not below the arena");
        }
    }
    for (int stage = 0; stage <= 3; stage++)
        result_free(&res[stage]);
}

/* The peaks fall stage by stage on a deep model (256, then six 1024-wide
 * layers, 10 out; Adam, 2 ranks, the default 25 MiB buckets): ZeRO-2 holds
 * its gradient shard and the buffers of the buckets in flight, each bucket
 * one layer at most, so its gradients are below ZeRO-1's whole ones (before:
 * ddp 91.4, ZeRO-1 70.3, ZeRO-2 80.9, ZeRO-3 65.3 MiB: one bucket held most
 * of the model, and its buffer sat beside the shard). */
Test(zero, peaks_fall_stage_by_stage_on_a_deep_model, .timeout = 240)
{
    const char *args = "--backend cpu --quiet --layers 256,1024,1024,1024,1024,1024,1024,10 "
                       "--loss ce --optim adam --samples 512 --batch 64 --steps 3 --mode ddp "
                       "--gpus 0,1";
    char line[1024], err[ERR_LEN];
    config_t c;
    model_spec_t spec;
    cr_assert_eq(tu_parse(&c, args, err), DDP_OK, "%s", err);
    cr_assert_eq(config_model_spec(&c, &spec, err), DDP_OK, "%s", err);
    size_t peak[4], grads[4], layer = 0;
    for (int l = 0; l < spec.nlayers; l++) {
        size_t n = ((size_t)spec.dims[l] * spec.dims[l + 1] + spec.dims[l + 1]) * sizeof(float);
        layer = n > layer ? n : layer;
    }
    for (int stage = 0; stage <= 3; stage++) {
        run_result_t r;
        snprintf(line, sizeof line, "%s --zero %d", args, stage);
        cr_assert_eq(tu_run(line, &r, err), DDP_OK, "'%s': %s", line, err);
        peak[stage] = r.dev[0].mem_peak;
        grads[stage] = r.dev[0].mem_split[MEM_GRADS];
        result_free(&r);
    }
    for (int stage = 1; stage <= 3; stage++)
        cr_assert_lt(peak[stage], peak[stage - 1], "ZeRO-%d's peak %.1f MiB is not below %s's %.1f",
                     stage, peak[stage] / 1048576.0, stage == 1 ? "ddp" : "the stage before",
                     peak[stage - 1] / 1048576.0);
    /* ZeRO-2: the shard (half) and two buckets of a layer at most */
    double P = (double)spec.nparams * sizeof(float);
    cr_assert_leq((double)grads[2], P / 2 + 2.0 * (double)layer + 4096.0,
                  "ZeRO-2 holds %.1f MiB of gradients: more than its shard %.1f and two layers "
                  "%.1f", grads[2] / 1048576.0, P / 2 / 1048576.0, 2.0 * layer / 1048576.0);
}

/* --zero's input errors. */
Test(zero, bad_values)
{
    config_t c;
    char err[ERR_LEN];
    const char *bad[][2] = {
        {"--zero 4", "--zero: 4 is not a stage"},
        {"--zero 2,2 --mode compare", "--zero: 2 appears twice"},
        {"--zero 1,3 --mode ddp", "--zero: a list of stages is for --mode compare"},
        {"--zero 2 --mode dp", "--zero: only ddp shards"},
        {"--zero 3 --mode ddp --slow-rank 0:2", "--slow-rank: not with --zero 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(tu_parse(&c, bad[i][0], err), DDP_ERR_INPUT, "'%s' was accepted", bad[i][0]);
        cr_assert(strstr(err, bad[i][1]), "'%s': %s", bad[i][0], err);
    }
    cr_assert_eq(tu_parse(&c, "--mode ddp --zero1", err), DDP_OK, "%s", err);
    cr_assert_eq(c.zero, 1);
}
