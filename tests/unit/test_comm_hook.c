/* tests/unit/test_comm_hook.c: DDP's communication hooks (ddp/comm_hook.c)
 * and the 16-bit sums under them: base/half.h's conversions against known
 * values and a full round trip; the shm all-reduce of fp16 / bf16 against a
 * serial sum rounded per addition (host and staged device buffers); the
 * fp16 / bf16 hooks' bytes and values through DDP's reducer; PowerSGD
 * recovering a planted rank-1 gradient with rank 1, its biases summed
 * exactly, its bytes.  Forked ranks over shared memory, like DDP's. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/base/half.h"
#include "common/base/rng.h"
#include "common/comm/comm.h"
#include "common/config/config.h"
#include "ddp/comm_hook.h"
#include "ddp/reducer.h"
#include "common/device/backend_impl.h" /* host_visible: the staged device path */
#include "tsan_criterion.h"

// ---------------------------------------------------------------------------
// 16-bit conversions

Test(half, known_values)
{
    cr_assert_eq(half_from_f32(1.0f), 0x3c00);
    cr_assert_eq(half_from_f32(-2.0f), 0xc000);
    cr_assert_eq(half_from_f32(65504.0f), 0x7bff);
    cr_assert_eq(half_from_f32(65519.0f), 0x7bff);      /* below the tie: stays finite */
    cr_assert_eq(half_from_f32(65520.0f), 0x7c00);      /* the tie rounds to even: inf */
    cr_assert_eq(half_from_f32(ldexpf(1.0f, -24)), 0x0001); /* the smallest subnormal */
    cr_assert_eq(half_from_f32(ldexpf(1.0f, -25)), 0x0000); /* its half: a tie to even 0 */
    cr_assert_eq(half_from_f32(ldexpf(1.5f, -25)), 0x0001);
    cr_assert_eq(half_from_f32(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie to even: down */
    cr_assert_eq(half_from_f32(1.0f + ldexpf(3.0f, -11)), 0x3c02); /* tie to even: up */
    cr_assert_eq(bf16_from_f32(1.0f), 0x3f80);
    cr_assert_eq(bf16_from_f32(1.0f + ldexpf(1.0f, -8)), 0x3f80); /* tie: down to even */
    cr_assert_eq(bf16_from_f32(1.0f + ldexpf(3.0f, -8)), 0x3f82); /* tie: up to even */
    cr_assert(isnan(half_to_f32(half_from_f32(NAN))));
    cr_assert(isnan(bf16_to_f32(bf16_from_f32(NAN))));
    /* one addition rounded once: 2048 + 1 is a tie in fp16, to even 2048 */
    cr_assert_eq(dtype16_add(DTYPE_F16, half_from_f32(2048.0f), half_from_f32(1.0f)),
                 half_from_f32(2048.0f));
}

Test(half, every_value_round_trips)
{
    for (uint32_t v = 0; v < 65536; v++) {
        uint16_t h = (uint16_t)v;
        float f = half_to_f32(h), g = bf16_to_f32(h);
        if (!isnan(f))
            cr_assert_eq(half_from_f32(f), h, "fp16 %04x -> %a -> %04x", v, (double)f,
                         half_from_f32(f));
        if (!isnan(g))
            cr_assert_eq(bf16_from_f32(g), h, "bf16 %04x", v);
    }
}

// ---------------------------------------------------------------------------
// forked ranks

typedef struct {
    int rc;
    char msg[ERR_LEN];
    float out[4096]; /* what each rank reports back */
    double bytes[8];
} out_t;

typedef int (*rank_fn)(comm_t *c, backend_t *be, void *ctx, out_t *o);

static void run_ranks(int world, bool staged, rank_fn fn, void *ctx, out_t *outs)
{
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, world, sizeof(out_t) * (size_t)world, err), DDP_OK, "%s",
                 err);
    out_t *shared = comm_seg_extra(seg);
    fflush(NULL);
    pid_t pids[8];
    for (int r = 0; r < world; r++) {
        if ((pids[r] = fork()) == 0) {
            out_t *o = &shared[r];
            backend_t *be;
            comm_t *c = NULL;
            o->rc = backend_cpu_create(&be, r, 1, o->msg);
            if (o->rc == DDP_OK) {
                be->host_visible = !staged;
                comm_args_t a = {COMM_SHM, world, r, be, seg, 20.0, 0.0, NULL, NULL};
                o->rc = comm_create(&c, &a, o->msg);
            }
            if (o->rc == DDP_OK)
                o->rc = fn(c, be, ctx, o);
            comm_destroy(c);
            be->host_visible = true;
            backend_destroy(be);
            _exit(0);
        }
    }
    for (int r = 0; r < world; r++) {
        int st = 0;
        cr_assert_eq(waitpid(pids[r], &st, 0), pids[r]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d crashed", r);
    }
    memcpy(outs, shared, sizeof(out_t) * (size_t)world);
    comm_seg_free(seg);
    for (int r = 0; r < world; r++)
        cr_assert_eq(outs[r].rc, DDP_OK, "rank %d: %s", r, outs[r].msg);
}

/* rank r's input element i: values whose 16-bit sums round at every step */
static float input(int r, size_t i)
{
    return (float)((double)((i * 7919 + (size_t)r * 104729) % 2001) / 1000.0 - 1.0) *
           (r % 2 ? 1000.0f : 1.0f) + (float)r * 0.1f;
}

// ---------------------------------------------------------------------------
// the shm 16-bit all-reduce

typedef struct {
    dtype_t dt;
    size_t n; /* 16-bit elements, even */
} sum16_t;

static int rank_sum16(comm_t *c, backend_t *be, void *ctx, out_t *o)
{
    const sum16_t *t = ctx;
    uint16_t *buf = backend_alloc(be, t->n * sizeof(uint16_t));
    if (!buf)
        return DDP_ERR_RUNTIME;
    for (size_t i = 0; i < t->n; i++)
        buf[i] = dtype16_from_f32(t->dt, input(comm_rank(c), i));
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = (float *)(void *)buf, .count = t->n,
                    .redop = REDOP_SUM, .dtype = t->dt};
    int rc = comm_run(c, &op, NULL);
    for (size_t i = 0; rc == DDP_OK && i < t->n && i < 4096; i++)
        o->out[i] = dtype16_to_f32(t->dt, buf[i]);
    if (rc != DDP_OK)
        snprintf(o->msg, sizeof o->msg, "%s", comm_last_error(c));
    backend_free(be, buf);
    return rc;
}

static void check_sum16(int world, dtype_t dt, size_t n, bool staged)
{
    sum16_t t = {dt, n};
    out_t *outs = calloc((size_t)world, sizeof *outs);
    run_ranks(world, staged, rank_sum16, &t, outs);
    for (size_t i = 0; i < n && i < 4096; i++) {
        /* NCCL's semantics in rank order: each addition rounded to 16 bits */
        uint16_t s = dtype16_from_f32(dt, input(0, i));
        for (int r = 1; r < world; r++)
            s = dtype16_add(dt, s, dtype16_from_f32(dt, input(r, i)));
        for (int r = 0; r < world; r++)
            cr_assert_eq(half_f32_bits(outs[r].out[i]), half_f32_bits(dtype16_to_f32(dt, s)),
                         "%s, %d ranks, element %zu on rank %d: %a, want %a",
                         dt == DTYPE_F16 ? "fp16" : "bf16", world, i, r, (double)outs[r].out[i],
                         (double)dtype16_to_f32(dt, s));
    }
    free(outs);
}

Test(comm16, shm_fp16_sum_rounds_each_addition) { check_sum16(3, DTYPE_F16, 4000, false); }
Test(comm16, shm_bf16_sum_rounds_each_addition) { check_sum16(4, DTYPE_BF16, 2, false); }
/* longer than a chunk's short path (split into slices), and staged like a GPU's buffer */
Test(comm16, shm_fp16_long_and_staged) { check_sum16(2, DTYPE_F16, 40000, true); }

Test(comm16, odd_count_is_refused)
{
    sum16_t t = {DTYPE_F16, 3};
    out_t outs[1];
    char err[ERR_LEN];
    comm_seg_t *seg;
    cr_assert_eq(comm_seg_create(&seg, 1, 0, err), DDP_OK);
    backend_t *be;
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), DDP_OK);
    comm_t *c;
    comm_args_t a = {COMM_SHM, 1, 0, be, seg, 5.0, 0.0, NULL, NULL};
    cr_assert_eq(comm_create(&c, &a, err), DDP_OK, "%s", err);
    (void)t, (void)outs;
    uint16_t buf[4] = {0};
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = (float *)(void *)buf, .count = 3,
                    .redop = REDOP_SUM, .dtype = DTYPE_F16};
    cr_assert_neq(comm_run(c, &op, NULL), DDP_OK);
    cr_assert(strstr(comm_last_error(c), "even"), "%s", comm_last_error(c));
    comm_destroy(c);
    backend_destroy(be);
    comm_seg_free(seg);
}

// ---------------------------------------------------------------------------
// the hooks through DDP's reducer

typedef struct {
    int dims[3], ndims;
    config_t cfg;
    int planted;   /* PowerSGD: W_r = (r + 1) u v^T */
} hook_case_t;

static void fill(const hook_case_t *hc, const model_spec_t *s, float *g, int rank)
{
    for (size_t i = 0; i < s->nparams; i++)
        g[i] = input(rank, i) * 1e-3f;
    if (!hc->planted)
        return;
    int n = s->dims[1], m = s->dims[0];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) /* u_i = 1 + i/n, v_j = cos(j) */
            g[s->w_off[0] + (size_t)i * m + j] =
                (float)(rank + 1) * (1.0f + (float)i / (float)n) * cosf((float)j);
}

static int rank_hook(comm_t *c, backend_t *be, void *ctx, out_t *o)
{
    const hook_case_t *hc = ctx;
    model_spec_t spec;
    int rc = model_spec_init(&spec, hc->dims, hc->ndims, ACT_RELU, o->msg);
    float *g = rc == DDP_OK ? backend_alloc(be, spec.nparams * sizeof(float)) : NULL;
    reducer_t red;
    comm_hook_t *hook = NULL;
    if (!g)
        return DDP_ERR_RUNTIME;
    /* small caps: several buckets */
    rc = reducer_init(&red, c, NULL, &spec, g, 1e-4, 1e-4, true, BUCKETS_CAPPED, o->msg);
    if (rc == DDP_OK)
        rc = comm_hook_init(&hook, &hc->cfg, be, &red, o->msg);
    fill(hc, &spec, g, comm_rank(c));
    reducer_begin(&red, true, 0);
    for (int l = spec.nlayers - 1; rc == DDP_OK && l >= 0; l--)
        rc = reducer_hook(&red, l);
    if (rc == DDP_OK)
        rc = reducer_launch_rest(&red);
    if (rc == DDP_OK)
        rc = comm_wait_all(c);
    if (rc == DDP_OK)
        rc = reducer_finish(&red);
    if (rc != DDP_OK && !o->msg[0])
        snprintf(o->msg, sizeof o->msg, "%s", comm_last_error(c));
    for (size_t i = 0; i < spec.nparams && i < 4096; i++)
        o->out[i] = g[i];
    for (int i = 0; i < red.nb && i < 8; i++)
        o->bytes[i] = reducer_bytes(&red, i);
    comm_hook_free(hook);
    reducer_free(&red);
    backend_free(be, g);
    return rc;
}

static double total_bytes(const out_t *o)
{
    double t = 0.0;
    for (int i = 0; i < 8; i++)
        t += o->bytes[i];
    return t;
}

static hook_case_t hook_case(comm_hook_kind_t k, int d0, int d1, int d2)
{
    hook_case_t hc = {.dims = {d0, d1, d2}, .ndims = d2 ? 3 : 2};
    config_defaults(&hc.cfg);
    hc.cfg.comm_hook = k;
    return hc;
}

static void check_16bit_hook(comm_hook_kind_t k, dtype_t dt)
{
    hook_case_t hc = hook_case(k, 9, 7, 3); /* 70 + 24 floats: odd-sized buckets */
    out_t outs[2];
    run_ranks(2, false, rank_hook, &hc, outs);
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, hc.dims, hc.ndims, ACT_RELU, NULL), DDP_OK);
    for (size_t i = 0; i < spec.nparams; i++) {
        uint16_t s = dtype16_add(dt, dtype16_from_f32(dt, input(0, i) * 1e-3f),
                                 dtype16_from_f32(dt, input(1, i) * 1e-3f));
        for (int r = 0; r < 2; r++)
            cr_assert_eq(half_f32_bits(outs[r].out[i]), half_f32_bits(dtype16_to_f32(dt, s)),
                         "element %zu rank %d", i, r);
    }
    /* each bucket sends 2 bytes per element, padded to an even count */
    double total = total_bytes(&outs[0]);
    cr_assert_eq(total, 2.0 * (3 * 7 + 3 + 1) + 2.0 * (7 * 9 + 7 + 1), "bytes %g", total);
}

Test(comm_hook, fp16_sends_half_the_bytes_and_sums_in_16_bits)
{
    check_16bit_hook(HOOK_FP16, DTYPE_F16);
}
Test(comm_hook, bf16_sends_half_the_bytes_and_sums_in_16_bits)
{
    check_16bit_hook(HOOK_BF16, DTYPE_BF16);
}

Test(comm_hook, powersgd_rank1_recovers_a_planted_rank1_gradient)
{
    hook_case_t hc = hook_case(HOOK_POWERSGD, 32, 16, 0); /* W 16 x 32, b 16 */
    hc.cfg.powersgd_rank = 1;
    hc.cfg.powersgd_start = 0; /* compress from the first step */
    hc.planted = 1;
    out_t outs[2];
    run_ranks(2, false, rank_hook, &hc, outs);
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, hc.dims, hc.ndims, ACT_RELU, NULL), DDP_OK);
    float want[1024];
    fill(&hc, &spec, want, 0);
    float other[1024];
    fill(&hc, &spec, other, 1);
    double err2 = 0.0, n2 = 0.0;
    for (size_t i = 0; i < spec.nparams; i++) {
        float w = want[i] + other[i];
        bool weight = i >= spec.w_off[0] && i < spec.w_off[0] + 16 * 32;
        for (int r = 0; r < 2; r++)
            cr_assert_eq(half_f32_bits(outs[r].out[i]), half_f32_bits(outs[0].out[i]),
                         "the ranks disagree at %zu", i);
        if (weight) {
            err2 += (outs[0].out[i] - w) * (double)(outs[0].out[i] - w);
            n2 += (double)w * w;
        } else { /* the bias travels uncompressed: the plain sum */
            cr_assert_eq(outs[0].out[i], w, "bias element %zu", i);
        }
    }
    cr_assert_lt(sqrt(err2 / n2), 1e-6, "rank-1 PowerSGD missed the rank-1 gradient by %g",
                 sqrt(err2 / n2));
    /* P (16 x 1), Q (32 x 1) and the bias (16), in floats */
    cr_assert_eq(total_bytes(&outs[0]), 4.0 * (16 + 32 + 16), "bytes %g", total_bytes(&outs[0]));
}

Test(comm_hook, powersgd_is_plain_before_its_start)
{
    hook_case_t hc = hook_case(HOOK_POWERSGD, 32, 16, 0);
    hc.cfg.powersgd_rank = 1;
    hc.cfg.powersgd_start = 1; /* the first step all-reduces plainly */
    out_t outs[2];
    run_ranks(2, false, rank_hook, &hc, outs);
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, hc.dims, hc.ndims, ACT_RELU, NULL), DDP_OK);
    for (size_t i = 0; i < spec.nparams; i++)
        cr_assert_eq(outs[0].out[i], input(0, i) * 1e-3f + input(1, i) * 1e-3f, "element %zu", i);
    cr_assert_eq(total_bytes(&outs[0]), 4.0 * (16 * 32 + 16));
}

Test(comm_hook, orthogonalize_makes_orthonormal_columns)
{
    float p[6 * 3];
    rng_t rng;
    rng_seed(&rng, 3);
    for (int i = 0; i < 18; i++)
        p[i] = (float)rng_normal(&rng);
    comm_hook_orthogonalize(p, 6, 3);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            double d = 0.0;
            for (int i = 0; i < 6; i++)
                d += (double)p[i * 3 + a] * p[i * 3 + b];
            cr_assert_float_eq(d, a == b ? 1.0 : 0.0, 1e-5, "columns %d, %d: %g", a, b, d);
        }
}
