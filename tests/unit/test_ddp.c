/* tests/unit/test_ddp.c: DDP against single (the equivalence contract) for every
 * loss and optimizer, 1 to 4 ranks, with many tiny buckets, one bucket, no
 * overlap and accumulation; checkpoint and resume with the trace and the
 * --explain story; the bucket assignment; and the runtime faults as
 * ddp_run reports them. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/comm/comm_impl.h" /* a fake communicator that records what it is asked */
#include "ddp/ddp_shared.h"
#include "ddp/fingerprint.h"
#include "ddp/reducer.h"
#include "testutil.h"
#include "common/measure/timing.h"
#include "tsan_criterion.h"

/* A small MLP over a few hundred samples: 240 rows and batch 24 divide by 1..4
 * ranks, so no rank pads its shard and the contract applies exactly. */
#define BASE "--backend cpu --quiet --layers 8,24,16,%d --samples 240 --batch 24 --steps 20 --seed 3"

/* Adam at torch's default lr.  Adam scales every update to about lr, so an
 * element whose gradient is mostly cancellation (and so differs between
 * summation orders by far more than its ulp) moves by ~lr times that noise:
 * at lr 0.01 the difference after 20 steps reaches ~1.5e-8 absolute, i.e.
 * 1.5e-5 on parameters under the 1e-3 floor, which is rounding, not a bug. */
static const char *optims[] = {
    "--optim sgd --lr 0.05 --momentum 0.9",
    "--optim sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 0.01",
    "--optim adam --lr 0.001",
    "--optim adamw --lr 0.001",
};
#define NOPTIMS (sizeof optims / sizeof optims[0])

static const char *gpu_lists[] = {"0", "0,1", "0,1,2", "0,1,2,3"};

/* single(args + single_extra) against ddp on 1..4 ranks (args + ddp_extra). */
static void check_equivalence(const char *args, const char *single_extra, const char *ddp_extra)
{
    char line[1024], err[ERR_LEN];
    run_result_t ref;
    snprintf(line, sizeof line, "%s %s", args, single_extra);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "single: %s", err);
    for (int w = 1; w <= 4; w++) {
        run_result_t res;
        snprintf(line, sizeof line, "%s %s --mode ddp --gpus %s", args, ddp_extra, gpu_lists[w - 1]);
        int rc = tu_run(line, &res, err);
        cr_assert_eq(rc, DDP_OK, "'%s': %s", line, err);
        cr_assert_eq(res.ndev, w);
        cr_assert_eq(res.steps, ref.steps);
        char what[1100];
        snprintf(what, sizeof what, "ddp %d rank%s vs single ('%s')", w, w == 1 ? "" : "s", line);
        tu_assert_params_close(&res, &ref, 1e-5, what);
        /* The printed loss is the global mean, as in single mode. */
        double dl = fabs(res.final_loss - ref.final_loss) / fmax(fabs(ref.final_loss), 1e-3);
        cr_assert(dl < 1e-5, "%s: final loss %.9g vs %.9g", what, res.final_loss, ref.final_loss);
        cr_assert_eq(res.log.n, ref.log.n);
        for (int r = 0; r < w; r++)
            cr_assert_gt(res.dev[r].rows, 0);
        result_free(&res);
    }
    result_free(&ref);
}

static void check_loss(const char *loss, int out)
{
    for (size_t o = 0; o < NOPTIMS; o++) {
        char args[512];
        snprintf(args, sizeof args, BASE " --loss %s %s", out, loss, optims[o]);
        check_equivalence(args, "", "");
    }
}

// ---------------------------------------------------------------------------
// the equivalence contract

Test(ddp, equivalent_to_single_mse, .timeout = 120) { check_loss("mse", 3); }
Test(ddp, equivalent_to_single_bce, .timeout = 120) { check_loss("bce", 2); }
Test(ddp, equivalent_to_single_ce, .timeout = 120) { check_loss("ce", 4); }

/* Many buckets: 0.001 MiB holds 262 floats, so most parameters get their own
 * bucket (the 24x16 weight is larger than the cap) and several launch during
 * backward. */
Test(ddp, equivalent_with_tiny_buckets, .timeout = 120)
{
    char args[512];
    snprintf(args, sizeof args, BASE " --loss ce %s", 4, optims[2]);
    check_equivalence(args, "", "--bucket-mb 0.001 --first-bucket-mb 0.001");
    snprintf(args, sizeof args, BASE " --loss mse %s", 3, optims[0]);
    check_equivalence(args, "", "--bucket-mb 0.001 --first-bucket-mb 0.001");
}

Test(ddp, equivalent_with_one_bucket, .timeout = 120)
{
    char args[512];
    snprintf(args, sizeof args, BASE " --loss bce %s", 2, optims[3]);
    check_equivalence(args, "", "--bucket-mb 1000 --first-bucket-mb 1000");
}

Test(ddp, equivalent_without_overlap, .timeout = 120)
{
    char args[512];
    snprintf(args, sizeof args, BASE " --loss ce %s", 4, optims[1]);
    check_equivalence(args, "", "--no-overlap --bucket-mb 0.001 --first-bucket-mb 0.001");
}

/* --accum 2: two micro-batches of 12 per step, all-reduced only after the
 * second, against single mode's one batch of 24. */
Test(ddp, accumulation_matches_single_at_twice_the_batch, .timeout = 120)
{
    const char *losses[][2] = {{"mse", "3"}, {"ce", "4"}};
    for (int i = 0; i < 2; i++) {
        char args[512];
        snprintf(args, sizeof args,
                 "--backend cpu --quiet --layers 8,24,16,%s --samples 240 --steps 20 --seed 5 "
                 "--loss %s %s",
                 losses[i][1], losses[i][0], optims[i == 0 ? 0 : 2]);
        check_equivalence(args, "--batch 24", "--batch 12 --accum 2 --bucket-mb 0.001");
    }
}

/* Epoch ends and the last short batch: 240 rows at batch 36 leave 24 for the
 * last step of each epoch (6 per rank on 4 ranks, 8 on 3). */
Test(ddp, equivalent_across_short_last_batches, .timeout = 120)
{
    char args[512];
    snprintf(args, sizeof args,
             "--backend cpu --quiet --layers 8,24,16,3 --samples 240 --batch 36 --epochs 3 "
             "--seed 9 --loss mse %s",
             optims[2]);
    char line[600], err[ERR_LEN];
    run_result_t ref, res;
    snprintf(line, sizeof line, "%s", args);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "%s", err);
    for (int w = 2; w <= 4; w += 2) { /* 36 divides by 2 and 4 (and 3) */
        snprintf(line, sizeof line, "%s --mode ddp --gpus %s", args, gpu_lists[w - 1]);
        cr_assert_eq(tu_run(line, &res, err), DDP_OK, "%s", err);
        tu_assert_params_close(&res, &ref, 1e-5, line);
        result_free(&res);
    }
    result_free(&ref);
}

// ---------------------------------------------------------------------------
// ZeRO-1: the same parameters as plain DDP, a 1/world shard of the state

/* ddp (args) against ddp --zero1 on 1..4 ranks: the same final parameters to
 * 1e-5 (reduce-scatter gives each block the all-reduce's bits and the
 * updates are elementwise, so they are in fact equal), every rank's state
 * about 1/world of the arena, and plain DDP's state whole. */
static void check_zero1(const char *args, int nstate)
{
    char line[1024], err[ERR_LEN];
    for (int w = 1; w <= 4; w++) {
        run_result_t plain, z;
        snprintf(line, sizeof line, "%s --mode ddp --gpus %s", args, gpu_lists[w - 1]);
        cr_assert_eq(tu_run(line, &plain, err), DDP_OK, "'%s': %s", line, err);
        snprintf(line, sizeof line, "%s --mode ddp --gpus %s --zero1", args, gpu_lists[w - 1]);
        cr_assert_eq(tu_run(line, &z, err), DDP_OK, "'%s': %s", line, err);
        tu_assert_params_close(&z, &plain, 1e-5, line);
        double dl = fabs(z.final_loss - plain.final_loss) / fmax(fabs(plain.final_loss), 1e-3);
        cr_assert(dl < 1e-5, "%s: final loss %.9g vs %.9g", line, z.final_loss, plain.final_loss);
        size_t arena = z.nparams * sizeof(float);
        for (int r = 0; r < w; r++) {
            size_t full = plain.dev[r].mem_split[MEM_OPTIM], mine = z.dev[r].mem_split[MEM_OPTIM];
            cr_assert_eq(full, (size_t)nstate * arena, "%s: rank %d plain state %zu", line, r, full);
            /* its blocks, plus fewer than world leftover floats per bucket */
            double want = (double)nstate * arena / w;
            cr_assert(mine >= want - nstate * 4.0 * w && mine <= want + nstate * 4.0 * 64 * w,
                      "%s: rank %d holds %zu bytes of state, 1/%d of %zu is %.0f", line, r, mine,
                      w, full, want);
        }
        result_free(&plain);
        result_free(&z);
    }
}

Test(ddp_zero1, same_parameters_as_ddp_every_optimizer_1_to_4_ranks, .timeout = 240)
{
    const int nstate[] = {1, 1, 2, 2};
    for (size_t o = 0; o < NOPTIMS; o++) {
        char args[512];
        snprintf(args, sizeof args, BASE " --loss ce %s", 4, optims[o]);
        check_zero1(args, nstate[o]);
    }
}

/* Tiny buckets (a 3-float bias over 4 ranks has no block, only a leftover),
 * an uneven batch split (25 rows over 3 ranks: 9, 8, 8, each weighted by its
 * rows), accumulation, and no overlap. */
Test(ddp_zero1, same_parameters_with_tiny_buckets_uneven_rows_accumulation, .timeout = 240)
{
    char args[512];
    snprintf(args, sizeof args, BASE " --loss mse %s --bucket-mb 0.001 --first-bucket-mb 0.001", 3,
             optims[2]);
    check_zero1(args, 2);
    snprintf(args, sizeof args,
             "--backend cpu --quiet --layers 8,24,16,3 --samples 240 --batch 25 --steps 20 "
             "--seed 4 --loss mse %s --accum 2 --no-overlap", optims[0]);
    check_zero1(args, 1);
    /* and against single mode, the contract itself */
    run_result_t ref, z;
    char err[ERR_LEN], line[700];
    snprintf(line, sizeof line, "%s --sampler-replicas 3", args);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --mode ddp --gpus 0,1,2 --zero1", args);
    cr_assert_eq(tu_run(line, &z, err), DDP_OK, "%s", err);
    tu_assert_params_close(&z, &ref, 1e-5, line);
    result_free(&ref);
    result_free(&z);
}

/* Uneven data under join: a rank out of data still takes part in every
 * reduce-scatter and all-gather and steps its own shard, so the parameters
 * are plain DDP's (a rank that skipped its shard would leave its block of
 * the parameters behind). */
Test(ddp_zero1, same_parameters_when_a_rank_runs_out_of_data)
{
    run_result_t plain, z;
    char err[ERR_LEN], line[700];
    const char *args = "--backend cpu --quiet --layers 8,6,2 --loss mse --samples 80 --batch 6 "
                       "--steps 9 --seed 5 --optim adam --lr 0.01 --rank-samples 40,20,10 "
                       "--mode ddp --gpus 0,1,2";
    snprintf(line, sizeof line, "%s --trace /tmp/unused.json", args);
    cr_assert_eq(tu_run(line, &plain, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --zero1 --trace /tmp/unused.json", args);
    cr_assert_eq(tu_run(line, &z, err), DDP_OK, "%s", err);
    cr_assert_gt(z.dev[2].steps_shadowed, 0, "rank 2 never ran out of data");
    tu_assert_params_close(&z, &plain, 1e-5, line);
    /* the trace names each bucket's collective: a reduce-scatter under --zero1 */
    for (int r = 0; r < 3; r++) {
        int want[2] = {0, 0}, other[2] = {0, 0};
        const trace_rec_t *tr[2] = {plain.trace[r], z.trace[r]};
        for (int v = 0; v < 2; v++) {
            cr_assert_not_null(tr[v], "rank %d recorder", r);
            trace_kind_t mine = v ? TR_REDUCE_SCATTER : TR_ALLREDUCE;
            trace_kind_t not_mine = v ? TR_ALLREDUCE : TR_REDUCE_SCATTER;
            for (uint32_t i = 0; i < tr[v]->n; i++) {
                want[v] += tr[v]->ev[i].kind == (int)mine;
                other[v] += tr[v]->ev[i].kind == (int)not_mine;
            }
            cr_assert(want[v] > 0 && other[v] == 0, "rank %d %s: %d %s events, %d %s", r,
                      v ? "--zero1" : "plain", want[v], trace_kind_name(mine), other[v],
                      trace_kind_name(not_mine));
        }
    }
    result_free(&plain);
    result_free(&z);
}

// ---------------------------------------------------------------------------
// what the run reports

Test(ddp, no_overlap_hides_nothing)
{
    run_result_t res;
    char err[ERR_LEN], line[512];
    snprintf(line, sizeof line, BASE " --loss ce --mode ddp --gpus 0,1 --no-overlap", 4);
    cr_assert_eq(tu_run(line, &res, err), DDP_OK, "%s", err);
    for (int r = 0; r < 2; r++) {
        /* Every launch comes after backward ends: nothing can overlap it. */
        cr_assert_eq(res.dev[r].phase_s[PH_COMM_HIDDEN], 0.0);
        cr_assert_gt(res.dev[r].phase_s[PH_COMM_EXPOSED], 0.0);
        cr_assert_gt(res.dev[r].phase_s[PH_BACKWARD], 0.0);
        cr_assert_eq(res.dev[r].device_id, r);
        cr_assert_gt(res.dev[r].mem_peak, 0);
    }
    cr_assert_eq(res.times.n, res.steps - res.warmup_steps);
    cr_assert_gt(res.samples_per_s, 0.0);
    /* timed samples are global: 24 per step */
    cr_assert_eq(res.times.timed_samples, 24 * res.times.n);
    result_free(&res);
}

// ---------------------------------------------------------------------------
// bucket assignment

/* A comm that records launches instead of running them (world 1). */
typedef struct {
    comm_t c;
    size_t off[64], count[64];
    int n;
} rec_comm_t;

static int rec_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    rec_comm_t *m = (rec_comm_t *)c;
    cr_assert_eq(op->kind, COLL_ALL_REDUCE);
    /* a sum: the loss scale already divides by the global batch */
    cr_assert_eq(op->redop, REDOP_SUM);
    m->off[m->n] = (size_t)(op->recv - (float *)NULL);
    m->count[m->n] = op->count;
    m->n++;
    *h = ++c->issued;
    return DDP_OK;
}
static int rec_wait(comm_t *c, comm_handle_t h, comm_span_t *s)
{
    (void)c, (void)h;
    if (s)
        *s = (comm_span_t){0, 0};
    return DDP_OK;
}
static void rec_span(comm_t *c, comm_handle_t h, comm_span_t *s)
{
    (void)c, (void)h;
    *s = (comm_span_t){0, 0};
}
static void rec_abort(comm_t *c, const char *why) { (void)c, (void)why; }
static void rec_destroy(comm_t *c) { (void)c; }
static const comm_ops_t rec_ops = {.name = "rec", .launch = rec_launch, .wait = rec_wait, .span = rec_span,
                                   .abort = rec_abort, .destroy = rec_destroy};

/* Checkpoint, resume, trace and story together (also under TSan): rank 0
 * writes after a barrier-guarded step, every rank reads the file back, the
 * resumed run ends with the straight run's bits, and each rank's recorder
 * holds one all-reduce per bucket per step. */
Test(ddp, resumes_bit_for_bit_with_trace_and_story, .timeout = 120)
{
    char line[1024], err[ERR_LEN], ck[64];
    snprintf(ck, sizeof ck, "/tmp/ddpbench-test-ddp-ck-%d.safetensors", (int)getpid());
    char args[512];
    snprintf(args, sizeof args, BASE " --mode ddp --gpus 0,1,2 --optim adam --lr 0.01 "
             "--bucket-mb 0.001 --first-bucket-mb 0.001", 4);
    run_result_t straight, part, resumed;
    snprintf(line, sizeof line, "%s --steps 9", args);
    cr_assert_eq(tu_run(line, &straight, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --steps 4 --checkpoint %s --checkpoint-every 2", args, ck);
    cr_assert_eq(tu_run(line, &part, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --steps 9 --resume %s --trace /tmp/unused.json", args, ck);
    cr_assert_eq(tu_run(line, &resumed, err), DDP_OK, "%s", err);
    cr_assert(memcmp(resumed.params, straight.params, straight.nparams * sizeof(float)) == 0,
              "resumed differs from straight");
    cr_assert_eq(resumed.steps, 5);
    cr_assert_eq(resumed.times.n, 3, "5 steps run, 2 of them warm-up");
    /* the story is of the resumed run's first step */
    const step_story_t *st = &resumed.story;
    cr_assert(st->filled);
    cr_assert_geq(st->nbuckets, 3);
    cr_assert_eq(st->move[MOVE_ALLREDUCE].ops, st->nbuckets);
    for (int r = 0; r < 3; r++) {
        const trace_rec_t *t = resumed.trace[r];
        cr_assert_not_null(t, "rank %d recorder", r);
        cr_assert_eq(t->device, r);
        cr_assert_eq(t->dropped, 0);
        int per_bucket[64] = {0}, steps = 0;
        for (uint32_t i = 0; i < t->n; i++) {
            const trace_event_t *e = &t->ev[i];
            cr_assert_geq(e->step, 7, "only steps of the resumed run's timed part");
            steps += e->kind == TR_STEP;
            if (e->kind == TR_ALLREDUCE) {
                cr_assert_eq(e->lane, LANE_COMM);
                cr_assert(e->bucket >= 0 && e->bucket < st->nbuckets && e->bucket < 64);
                per_bucket[e->bucket]++;
            }
        }
        cr_assert_eq(steps, 3);
        for (int b = 0; b < st->nbuckets && b < 64; b++)
            cr_assert_eq(per_bucket[b], 3, "rank %d bucket %d", r, b);
    }
    unlink(ck);
    result_free(&straight);
    result_free(&part);
    result_free(&resumed);
}

Test(ddp, buckets_are_reverse_contiguous_and_capped)
{
    /* Params: W0 4x300=1200 floats, b0 300, W1 300x5=1500, b1 5. */
    int dims[] = {4, 300, 5};
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, dims, 3, ACT_RELU, NULL), DDP_OK);
    rec_comm_t m = {.c = {.ops = &rec_ops, .world = 1}};
    reducer_t r;
    float *base = NULL;
    /* first cap 2000 B (500 floats): b1 (5) fits, W1 (1500) does not -> own
     * bucket; then the 6000 B cap: W1 alone is 6000, b0 joins the next. */
    double first = 2000.0 / 1048576.0, rest = 6000.0 / 1048576.0;
    cr_assert_eq(reducer_init(&r, &m.c, NULL, &spec, base, first, rest, true, BUCKETS_CAPPED, NULL), DDP_OK);
    cr_assert_eq(r.nb, 3);
    cr_assert_eq(r.b[0].off, spec.b_off[1]);
    cr_assert_eq(r.b[0].count, 5);
    cr_assert_eq(r.b[1].off, spec.w_off[1]);
    cr_assert_eq(r.b[1].count, 1500);
    cr_assert_eq(r.b[2].off, 0);
    cr_assert_eq(r.b[2].count, 1500);
    /* Contiguous from the end of the arena back to its start. */
    size_t end = spec.nparams;
    for (int i = 0; i < r.nb; i++) {
        cr_assert_eq(r.b[i].off + r.b[i].count, end, "bucket %d is not contiguous", i);
        end = r.b[i].off;
    }
    cr_assert_eq(end, 0);

    /* Backward reports layer 1 first: buckets 0 and 1 launch at once, bucket 2
     * after layer 0, in index order. */
    reducer_begin(&r, true, 0);
    cr_assert_eq(reducer_hook(&r, 1), DDP_OK);
    cr_assert_eq(m.n, 2);
    cr_assert_eq(m.off[0], spec.b_off[1]);
    cr_assert_eq(m.off[1], spec.w_off[1]);
    cr_assert_eq(reducer_hook(&r, 0), DDP_OK);
    cr_assert_eq(m.n, 3);
    cr_assert_eq(reducer_launch_rest(&r), DDP_OK);
    cr_assert_eq(m.n, 3);

    /* no_sync: nothing launches. */
    reducer_begin(&r, false, 0);
    reducer_hook(&r, 1);
    reducer_hook(&r, 0);
    reducer_launch_rest(&r);
    cr_assert_eq(m.n, 3);

    /* run_rest: the last bucket (nothing left to overlap) waits for
     * launch_rest, which runs it; the others still launch from the hook. */
    r.run_rest = true;
    reducer_begin(&r, true, 1);
    cr_assert_eq(reducer_hook(&r, 1), DDP_OK);
    cr_assert_eq(m.n, 5);
    cr_assert_eq(reducer_hook(&r, 0), DDP_OK);
    cr_assert_eq(m.n, 5, "the last bucket is not handed to the comm thread");
    cr_assert_eq(reducer_launch_rest(&r), DDP_OK);
    cr_assert_eq(m.n, 6);
    cr_assert_eq(m.off[5], 0);
    reducer_free(&r);

    /* Without overlap everything waits for launch_rest, still in order. */
    cr_assert_eq(reducer_init(&r, &m.c, NULL, &spec, base, 1000.0, 1000.0, false, BUCKETS_CAPPED, NULL), DDP_OK);
    cr_assert_eq(r.nb, 1);
    cr_assert_eq(r.b[0].off, 0);
    cr_assert_eq(r.b[0].count, spec.nparams);
    reducer_begin(&r, true, 0);
    reducer_hook(&r, 1);
    reducer_hook(&r, 0);
    cr_assert_eq(m.n, 6);
    reducer_launch_rest(&r);
    cr_assert_eq(m.n, 7);
    cr_assert_eq(m.count[6], spec.nparams);
    reducer_free(&r);
}

// ---------------------------------------------------------------------------
// faults, as the strategy reports them

static int run_fault(const char *fault, const char *extra, char *err, double *secs)
{
    setenv("DDPBENCH_FAULT", fault, 1);
    char line[512];
    snprintf(line, sizeof line, BASE " --loss ce --mode ddp --gpus 0,1,2 %s", 4, extra);
    run_result_t res;
    double t0 = now_s();
    int rc = tu_run(line, &res, err);
    *secs = now_s() - t0;
    result_free(&res);
    return rc;
}

Test(ddp, fault_error_names_the_rank)
{
    char err[ERR_LEN];
    double s;
    cr_assert_eq(run_fault("error:1:4", "", err, &s), DDP_ERR_RUNTIME);
    cr_assert_str_eq(err, "rank 1 (device 1): injected fault at step 4");
    cr_assert(s < 5.0, "took %.2f s", s);
}

Test(ddp, fault_kill_names_the_signal)
{
    char err[ERR_LEN];
    double s;
    cr_assert_eq(run_fault("kill:2:3", "", err, &s), DDP_ERR_RUNTIME);
    cr_assert_str_eq(err, "rank 2 (device 2) killed by signal 9 (Killed)");
    cr_assert(s < 5.0, "took %.2f s", s);
}

Test(ddp, fault_exit_names_the_status)
{
    char err[ERR_LEN];
    double s;
    cr_assert_eq(run_fault("exit:0:1", "", err, &s), DDP_ERR_RUNTIME);
    cr_assert_str_eq(err, "rank 0 (device 0) exited with status 7");
    cr_assert(s < 5.0, "took %.2f s", s);
}

/* --timeout bounds every wait for a peer, start-up's fingerprint exchange
 * included, so it is also the most the ranks may drift apart before the
 * stall: 2 s, not less, as the three ranks' start under a sanitizer on a
 * loaded 2-core box took 0.2 s here (0.5 s left too little for a slower
 * box).  The run must then end within twice the timeout: once is the peers'
 * wait, the rest start-up and the supervisor stopping the stalled rank; a
 * supervisor that waited for it, or peers that timed out one after the other,
 * would take longer. */
#define STALL_TIMEOUT_S 2
#define STR_(x) #x
#define STR(x) STR_(x)
Test(ddp, fault_stall_times_out)
{
    char err[ERR_LEN];
    double s;
    cr_assert_eq(run_fault("stall:1:2", "--timeout " STR(STALL_TIMEOUT_S), err, &s), DDP_ERR_RUNTIME);
    cr_assert(strstr(err, "timed out in all-reduce of bucket 0: rank 1 did not arrive within "
                          STR(STALL_TIMEOUT_S) " s"),
              "%s", err);
    cr_assert(strncmp(err, "rank 0 (device 0): ", 19) == 0 ||
                  strncmp(err, "rank 2 (device 2): ", 19) == 0,
              "%s", err);
    cr_assert(s < 2.0 * STALL_TIMEOUT_S, "took %.2f s with --timeout %d", s, STALL_TIMEOUT_S);
}

Test(ddp, batch_shards_too_large_are_input_errors)
{
    char err[ERR_LEN];
    run_result_t res;
    /* the ranks' shards hold more samples than the data */
    int rc = tu_run("--backend cpu --quiet --layers 4,3 --samples 50 --batch 6 --steps 2 "
                    "--mode ddp --gpus 0,1 --rank-samples 30,30",
                    &res, err);
    cr_assert_eq(rc, DDP_ERR_INPUT);
    cr_assert(strstr(err, "--rank-samples: the ranks' 60 samples are more than the data's 50"),
              "%s", err);
    /* a rank with samples but no row of the batch */
    rc = tu_run("--backend cpu --quiet --layers 4,3 --samples 50 --batch 2 --steps 2 "
                "--mode ddp --gpus 0,1,2 --rank-samples 5,5,5",
                &res, err);
    cr_assert_eq(rc, DDP_ERR_INPUT);
    cr_assert(strstr(err, "leave rank 2 none for its 5 samples (use --batch 3 or more"), "%s", err);
}

// ---------------------------------------------------------------------------
// any device count, any batch: the equivalence contract on uneven splits

/* 37 samples (a prime): the DistributedSampler pads for every world but 1
 * and 37, the epochs end in short batches, and --steps 12 crosses epochs for
 * the larger batches. */
#define UNEVEN "--backend cpu --quiet --layers 6,10,%d --samples 37 --steps 12 --seed 11 --loss %s %s"

static const char *uneven_losses[][2] = {{"mse", "3"}, {"bce", "2"}, {"ce", "3"}};

typedef struct {
    double worst_rel, worst_l2;
    int runs;
} spread_t;

static double rel_l2_of(const run_result_t *a, const run_result_t *b)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a->nparams; i++) {
        double d = (double)a->params[i] - (double)b->params[i];
        num += d * d;
        den += (double)b->params[i] * (double)b->params[i];
    }
    return sqrt(num / den);
}

/* single, dp and ddp on w devices, batch b, all reading ddp's stream. */
static void check_uneven(int w, int b, int li, const char *optim, spread_t *sp)
{
    char args[512], line[700], err[ERR_LEN], gpus[32] = "0";
    for (int i = 1; i < w; i++)
        snprintf(gpus + strlen(gpus), sizeof gpus - strlen(gpus), ",%d", i);
    snprintf(args, sizeof args, UNEVEN " --batch %d", atoi(uneven_losses[li][1]),
             uneven_losses[li][0], optim, b);
    run_result_t ref, dp, ddp;
    snprintf(line, sizeof line, "%s --mode single --sampler-replicas %d", args, w);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "%s: %s", line, err);
    snprintf(line, sizeof line, "%s --mode dp --gpus %s --sampler-replicas %d", args, gpus, w);
    cr_assert_eq(tu_run(line, &dp, err), DDP_OK, "%s: %s", line, err);
    snprintf(line, sizeof line, "%s --mode ddp --gpus %s", args, gpus);
    cr_assert_eq(tu_run(line, &ddp, err), DDP_OK, "%s: %s", line, err);
    const run_result_t *runs[2] = {&dp, &ddp};
    for (int k = 0; k < 2; k++) {
        char what[800];
        snprintf(what, sizeof what, "%s vs single (%s)", k ? "ddp" : "dp", line);
        tu_assert_params_close(runs[k], &ref, 1e-5, what);
        double d = max_rel_diff(runs[k]->params, ref.params, ref.nparams, 1e-3);
        sp->worst_rel = fmax(sp->worst_rel, d);
        sp->worst_l2 = fmax(sp->worst_l2, rel_l2_of(runs[k], &ref));
        sp->runs++;
    }
    cr_assert_eq(ddp.epoch_samples, ref.epoch_samples, "%s: not the same stream", line);
    /* the rows every rank computed add up to the global batch's */
    long rows = 0;
    for (int r = 0; r < w; r++) {
        rows += ddp.dev[r].rows;
        cr_assert_eq(ddp.dev[r].steps_run, 12);
        cr_assert_eq(ddp.dev[r].steps_shadowed, 0);
    }
    cr_assert_eq(rows, ddp.times.timed_samples, "%s: rows %ld, samples %ld", line, rows,
                 ddp.times.timed_samples);
    result_free(&ref);
    result_free(&dp);
    result_free(&ddp);
}

/* Devices 1..8, each with a batch smaller than the world, one larger by one,
 * and primes (7, 13): every loss turns up at every size. */
static void uneven_matrix(int w_lo, int w_hi, const char *optim)
{
    spread_t sp = {0};
    for (int w = w_lo; w <= w_hi; w++) {
        int batches[] = {w - 1, w + 1, 7, 13};
        for (int i = 0; i < 4; i++)
            if (batches[i] >= 1)
                check_uneven(w, batches[i], (w + i) % 3, optim, &sp);
    }
    fprintf(stderr,
            "uneven equivalence, %d..%d devices, %s: %d runs against single, worst parameter "
            "%.2e relative, worst relative L2 distance %.2e\n",
            w_lo, w_hi, optim, sp.runs, sp.worst_rel, sp.worst_l2);
}

Test(ddp_uneven, devices_1_to_4_sgd, .timeout = 240) { uneven_matrix(1, 4, "--optim sgd --lr 0.01 --momentum 0.9"); }
Test(ddp_uneven, devices_5_to_8_sgd, .timeout = 240) { uneven_matrix(5, 8, "--optim sgd --lr 0.01 --momentum 0.9"); }
Test(ddp_uneven, devices_1_to_8_adam, .timeout = 240) { uneven_matrix(1, 8, "--optim adam --lr 0.001"); }

/* A rank whose part of a micro-batch is empty still all-reduces (zeros), and
 * --accum: a rank may sit out one micro-batch and not another. */
Test(ddp_uneven, accumulation_with_empty_parts, .timeout = 120)
{
    char line[700], err[ERR_LEN];
    const char *a = "--backend cpu --quiet --layers 6,10,3 --samples 37 --steps 12 --seed 4 "
                    "--loss ce --optim sgd --lr 0.05 --momentum 0.9";
    run_result_t ref, ddp;
    /* 5 rows over 4 ranks: 2,1,1,1; the epoch's last micro-batch (2 rows) leaves ranks 2, 3 none */
    snprintf(line, sizeof line, "%s --batch 5 --accum 2 --mode single --sampler-replicas 4", a);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --batch 5 --accum 2 --mode ddp --gpus 0,1,2,3 --no-overlap", a);
    cr_assert_eq(tu_run(line, &ddp, err), DDP_OK, "%s", err);
    tu_assert_params_close(&ddp, &ref, 1e-5, line);
    result_free(&ref);
    result_free(&ddp);
}

// ---------------------------------------------------------------------------
// uneven data across ranks: join and no-join

#define JOIN "--backend cpu --quiet --layers 6,10,%s --samples 60 --seed 8 --loss %s %s"

/* ddp with every rank's own shard against single reading the same stream
 * (the ranks' micro-batches end to end): the same parameters, and each rank
 * ran the steps its shard allows and shadowed the rest. */
static void check_join(const char *loss, const char *out, const char *optim, const char *extra,
                       const long *want_run, long steps)
{
    char args[512], line[700], err[ERR_LEN];
    snprintf(args, sizeof args, JOIN " %s", out, loss, optim, extra);
    run_result_t ref, dp, ddp;
    snprintf(line, sizeof line, "%s --mode single", args);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "%s: %s", line, err);
    snprintf(line, sizeof line, "%s --mode dp --gpus 0,1", args);
    cr_assert_eq(tu_run(line, &dp, err), DDP_OK, "%s: %s", line, err);
    snprintf(line, sizeof line, "%s --mode ddp --gpus 0,1,2", args);
    cr_assert_eq(tu_run(line, &ddp, err), DDP_OK, "%s: %s", line, err);
    cr_assert_eq(ref.steps, steps, "%s: %ld steps", line, ref.steps);
    cr_assert_eq(ddp.steps, steps);
    tu_assert_params_close(&dp, &ref, 1e-5, line);
    tu_assert_params_close(&ddp, &ref, 1e-5, line);
    double dl = fabs(ddp.final_loss - ref.final_loss) / fmax(fabs(ref.final_loss), 1e-3);
    cr_assert(dl < 1e-5, "%s: final loss %.9g vs %.9g", line, ddp.final_loss, ref.final_loss);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(ddp.dev[r].steps_run, want_run[r], "%s: rank %d ran %ld steps", line, r,
                     ddp.dev[r].steps_run);
        cr_assert_eq(ddp.dev[r].steps_shadowed, steps - want_run[r]);
    }
    result_free(&ref);
    result_free(&dp);
    result_free(&ddp);
}

static void check_no_join(void);

Test(ddp_join, matches_single_and_no_join_times_out, .timeout = 120)
{
    /* 9 rows over 3 ranks: 3 each; 24, 15 and 6 samples last 8, 5 and 2 steps an epoch */
    const long run2[] = {16, 10, 4}; /* two epochs of 8 steps */
    check_join("mse", "3", "--optim sgd --lr 0.05 --momentum 0.9",
               "--batch 9 --epochs 2 --rank-samples 24,15,6", run2, 16);
    check_join("ce", "3", "--optim adam --lr 0.001", "--batch 9 --epochs 2 --rank-samples 24,15,6",
               run2, 16);
    /* --batch-per-device 4, --accum 2, --drop-last: 17 samples make 4 full
     * micro-batches (2 steps), 9 make 2 (1 step), 30 make 7 (4 steps) */
    const long run3[] = {2, 1, 4};
    check_join("bce", "2", "--optim adamw --lr 0.001",
               "--batch-per-device 4 --accum 2 --drop-last --epochs 1 --rank-samples 17,9,30",
               run3, 4);
    /* a rank with no data at all shadows every step */
    const long run4[] = {0, 5, 3};
    check_join("mse", "3", "--optim sgd --lr 0.05",
               "--batch 9 --epochs 1 --rank-samples 0,15,8", run4, 5);
    check_no_join();
}

/* --no-join: the rank out of data leaves, the others block in the
 * all-reduce until --timeout; the error names the rank, the step and the fix.
 * (Run from the test above, not beside it: two of these tests in parallel
 * workers make Criterion's runner leak 48 bytes under LeakSanitizer.) */
static void check_no_join(void)
{
    char err[ERR_LEN];
    run_result_t res;
    double t0 = now_s();
    int rc = tu_run("--backend cpu --quiet --layers 6,10,3 --samples 60 --seed 8 --loss mse "
                    "--batch 9 --epochs 1 --rank-samples 24,15,6 --mode ddp --gpus 0,1,2 "
                    "--no-join --timeout " STR(STALL_TIMEOUT_S),
                    &res, err);
    double secs = now_s() - t0;
    cr_assert_eq(rc, DDP_ERR_RUNTIME, "%s", err);
    cr_assert(strstr(err, "timed out in all-reduce of bucket 0: rank 2 did not arrive within "
                          STR(STALL_TIMEOUT_S) " s"),
              "%s", err);
    cr_assert(strstr(err, "rank 2 ran out of data after step 2 (6 samples: 2 steps an epoch, rank 0 "
                          "has 8) and left without --join: --join lets it shadow"),
              "%s", err);
    /* the same bound and the same timeout as the stall's (fault_stall_times_out) */
    cr_assert(secs < 2.0 * STALL_TIMEOUT_S, "took %.2f s with --timeout %d", secs, STALL_TIMEOUT_S);
    /* with --join (the default) the same run completes */
    rc = tu_run("--backend cpu --quiet --layers 6,10,3 --samples 60 --seed 8 --loss mse "
                "--batch 9 --epochs 1 --rank-samples 24,15,6 --mode ddp --gpus 0,1,2 --timeout "
                STR(STALL_TIMEOUT_S),
                &res, err);
    cr_assert_eq(rc, DDP_OK, "%s", err);
    result_free(&res);
}

// ---------------------------------------------------------------------------
// every rank on the same job (ddp/fingerprint.h)

static config_t g_odd;
static const config_t *odd_lr(const config_t *cfg, int rank)
{
    return rank == 2 ? &g_odd : cfg;
}

/* A rank given another learning rate is refused at start-up, named with
 * what differs, as an input error; nothing trains and nothing hangs. */
Test(ddp_fingerprint, a_rank_on_another_job_is_refused_at_start_up, .timeout = 30)
{
    char err[ERR_LEN], line[600];
    snprintf(line, sizeof line, BASE " --loss mse %s --mode ddp --gpus 0,1,2 --timeout 5", 3,
             optims[0]);
    config_t c;
    model_spec_t spec;
    dataset_t d;
    tu_load(&c, &spec, &d, line, err);
    g_odd = c;
    g_odd.optim.lr *= 2.0f;
    run_result_t res;
    double t0 = now_s();
    int rc = ddp_strategy.run_each(&c, &d, odd_lr, &res, err);
    cr_assert_eq(rc, DDP_ERR_INPUT, "rc %d: %s", rc, err);
    cr_assert(strstr(err, "rank 2 (device 2) was started with another optimizer"), "%s", err);
    /* both values, the option as the user writes it */
    char want[200];
    snprintf(want, sizeof want, "than rank 0 (device 0): --lr %g there, --lr %g on rank 0",
             (double)g_odd.optim.lr, (double)c.optim.lr);
    cr_assert(strstr(err, want), "'%s' lacks '%s'", err, want);
    cr_assert_lt(now_s() - t0, 4.0, "the check took %.1f s", now_s() - t0);
    /* the same run with every rank alike trains */
    cr_assert_eq(ddp_strategy.run(&c, &d, &res, err), DDP_OK, "%s", err);
    result_free(&res);
    data_free(&d);
}

/* What changes a rank's sequence of collectives is checked too: another
 * --log-every adds loss all-reduces on other steps, another
 * --checkpoint-every barriers; either would pair one rank's collective with
 * another's (shm names the mismatch at run time; NCCL may hang or sum
 * unrelated buffers). */
Test(ddp_fingerprint, options_that_change_the_collectives_are_checked, .timeout = 30)
{
    char err[ERR_LEN], line[600];
    snprintf(line, sizeof line, BASE " --loss mse %s --mode ddp --gpus 0,1,2 --timeout 5", 3,
             optims[0]);
    config_t c;
    model_spec_t spec;
    dataset_t d;
    tu_load(&c, &spec, &d, line, err);
    for (int k = 0; k < 2; k++) {
        g_odd = c;
        if (k == 0)
            g_odd.log_every = 3;
        else { /* rank 0 writes; the others meet it at a barrier after the write */
            g_odd.checkpoint_every = 4;
            snprintf(g_odd.checkpoint_path, sizeof g_odd.checkpoint_path, "/tmp/ddp_fp_%d.st",
                     (int)getpid());
        }
        run_result_t res;
        double t0 = now_s();
        int rc = ddp_strategy.run_each(&c, &d, odd_lr, &res, err);
        if (rc == DDP_OK)
            result_free(&res);
        cr_assert_eq(rc, DDP_ERR_INPUT, "case %d: rc %d: %s", k, rc, err);
        cr_assert(strstr(err, "rank 2 (device 2) was started with another length or schedule"),
                  "%s", err);
        cr_assert_lt(now_s() - t0, 4.0, "the check took %.1f s", now_s() - t0);
    }
    data_free(&d);
}

/* Each line says what it names: another data file of the same shape
 * changes the data line alone, a wider layer --layers alone, and each is
 * put in its group for the message. */
Test(ddp_fingerprint, lines_follow_the_config_and_the_data)
{
    char err[ERR_LEN], line[600];
    snprintf(line, sizeof line, BASE " --loss mse %s", 3, optims[0]);
    config_t c;
    model_spec_t spec;
    dataset_t d;
    tu_load(&c, &spec, &d, line, err);
    static fingerprint_t a, b;
    char key[64], va[200], vb[200];
    fingerprint_make(&a, &c, &d);
    fingerprint_make(&b, &c, &d);
    cr_assert_not(fingerprint_diff(&a, &b, key, va, vb, sizeof va), "the same run: %s", key);
    d.x[17] += 1.0f;
    fingerprint_make(&b, &c, &d);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "data");
    cr_assert(strstr(fingerprint_group(key), "other data"), "%s", fingerprint_group(key));
    d.x[17] -= 1.0f;
    config_t e = c;
    e.dims[1]++;
    fingerprint_make(&b, &e, &d);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "--layers");
    cr_assert_str_eq(fingerprint_group(key), "another model (--layers, --act)");
    e = c;
    e.zero = 2;
    fingerprint_make(&b, &e, &d);
    cr_assert(fingerprint_diff(&a, &b, key, va, vb, sizeof va));
    cr_assert_str_eq(key, "--zero");
    cr_assert(strstr(fingerprint_group(key), "other DDP options"));
    data_free(&d);
}
