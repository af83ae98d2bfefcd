/* tests/unit/test_dp.c: DataParallel against single mode (the equivalence
 * contract, design section 4) on every loss and optimizer with 1 to 4
 * devices, uneven chunks, a batch smaller than the device count, an arena
 * moved in slices and one moved whole, gradient accumulation, bit-for-bit
 * reproducibility, the per-device figures, barriers that open by wake-ups,
 * the torch.chunk split, the device path's trace, story and resume, an
 * injected device fault, and --check-replicas. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/device/backend_impl.h" /* a fake device: host memory taking the GPU path */
#include "dp/dp.h"
#include "testutil.h"
#include "tsan_criterion.h"
#include "tu_pin.h"

/* A small model and data so the whole suite (and its TSan run) stays quick;
 * 20+ steps so differences in summation order have time to grow. */
#define SMALL "--backend cpu --layers 8,24,16,5 --samples 150 --steps 24 --quiet --seed 7"
#define TOL 1e-5

static const char *gpus_list(int k)
{
    static const char *lists[] = {"", "0", "0,1", "0,1,2", "0,1,2,3"};
    return lists[k];
}

/* Run single with `args`, then dp with 1..4 devices with the same args, and
 * compare the final parameters. */
static void check_dp_matches_single(const char *args)
{
    char line[1024], err[ERR_LEN];
    run_result_t ref, dp;
    snprintf(line, sizeof line, "--mode single %s", args);
    cr_assert_eq(tu_run(line, &ref, err), DDP_OK, "%s: %s", line, err);
    for (int k = 1; k <= 4; k++) {
        snprintf(line, sizeof line, "--mode dp --gpus %s %s", gpus_list(k), args);
        cr_assert_eq(tu_run(line, &dp, err), DDP_OK, "%s: %s", line, err);
        cr_assert_eq(dp.mode, MODE_DP);
        cr_assert_eq(dp.ndev, k);
        cr_assert_eq(dp.steps, ref.steps, "%s: steps", line);
        tu_assert_params_close(&dp, &ref, TOL, line);
        /* The logged loss is the mean over the same global batch. */
        cr_assert_float_eq(dp.final_loss, ref.final_loss, 1e-5 * (1.0 + ref.final_loss),
                           "%s: final loss %g vs %g", line, dp.final_loss, ref.final_loss);
        result_free(&dp);
    }
    result_free(&ref);
}

// ---------------------------------------------------------------------------
// every loss x every optimizer, K = 1..4

#define SGD "--optim sgd --lr 0.02 --momentum 0.9 --nesterov --weight-decay 0.01"
#define ADAM "--optim adam --lr 0.001"
#define ADAMW "--optim adamw --lr 0.001 --weight-decay 0.05"

Test(dp_equiv, mse_sgd) { check_dp_matches_single(SMALL " --batch 12 --loss mse " SGD); }
Test(dp_equiv, mse_adam) { check_dp_matches_single(SMALL " --batch 12 --loss mse " ADAM); }
Test(dp_equiv, mse_adamw) { check_dp_matches_single(SMALL " --batch 12 --loss mse " ADAMW); }
Test(dp_equiv, bce_sgd) { check_dp_matches_single(SMALL " --batch 12 --loss bce " SGD); }
Test(dp_equiv, bce_adam) { check_dp_matches_single(SMALL " --batch 12 --loss bce " ADAM); }
Test(dp_equiv, bce_adamw) { check_dp_matches_single(SMALL " --batch 12 --loss bce " ADAMW); }
Test(dp_equiv, ce_sgd) { check_dp_matches_single(SMALL " --batch 12 --loss ce " SGD); }
Test(dp_equiv, ce_adam) { check_dp_matches_single(SMALL " --batch 12 --loss ce " ADAM); }
Test(dp_equiv, ce_adamw) { check_dp_matches_single(SMALL " --batch 12 --loss ce " ADAMW); }

/* Batch 10 splits unevenly over 3 (4,4,2) and 4 (3,3,3,1) devices, and 155
 * samples end each epoch with a batch of 5 rows (4 devices: 2,2,1, the
 * fourth sits that step out). */
Test(dp_equiv, uneven_chunks)
{
    check_dp_matches_single("--backend cpu --layers 8,24,16,5 --samples 155 --epochs 2 --quiet "
                            "--seed 11 --batch 10 --loss ce " ADAM);
}

/* An arena of COMM_LOCAL_SLICED floats or more is broadcast and reduced in
 * slices by every thread (comm_local_sliced): 64-64-8 has 4,680 parameters; the
 * model above 701, moved whole.  Adam: with SGD's Nesterov momentum this
 * wider model sits at the tolerance's edge whatever the GEMM kernel (seeds
 * 7-11 on 2-4 devices: 1.9e-6 to 1.02e-5 with the tiny-GEMM kernel, 2.2e-6
 * to 8.5e-6 with OpenBLAS alone); with Adam 1.7e-6 to 4.8e-6 with either. */
Test(dp_equiv, sliced_arena)
{
    cr_assert(comm_local_sliced(64 * 64 + 64 + 64 * 8 + 8));
    cr_assert_not(comm_local_sliced(8 * 24 + 24 + 24 * 16 + 16 + 16 * 5 + 5));
    check_dp_matches_single("--backend cpu --layers 64,64,8 --samples 150 --steps 24 --quiet "
                            "--seed 7 --batch 12 --loss mse " ADAM);
}

/* Batch 2 on up to 4 devices: devices 2 and 3 never get a row. */
Test(dp_equiv, batch_smaller_than_devices)
{
    check_dp_matches_single(SMALL " --batch 2 --loss mse " SGD);
    char err[ERR_LEN];
    run_result_t r;
    cr_assert_eq(tu_run("--mode dp --gpus 0,1,2,3 " SMALL " --batch 2 --loss mse " SGD, &r, err),
                 DDP_OK, "%s", err);
    cr_assert_gt(r.dev[0].rows, 0);
    cr_assert_gt(r.dev[1].rows, 0);
    cr_assert_eq(r.dev[2].rows, 0, "device 2 must sit out");
    cr_assert_eq(r.dev[3].rows, 0, "device 3 must sit out");
    cr_assert_eq(r.dev[3].phase_s[PH_FORWARD], 0.0);
    result_free(&r);
}

// ---------------------------------------------------------------------------
// gradient accumulation: dp with --accum 2 == single at twice the batch

static void check_accum(const char *common, int micro, int k)
{
    char a[1024], b[1024], err[ERR_LEN];
    run_result_t ref, dp;
    snprintf(a, sizeof a, "--mode single %s --batch %d", common, 2 * micro);
    snprintf(b, sizeof b, "--mode dp --gpus %s %s --batch %d --accum 2", gpus_list(k), common,
             micro);
    cr_assert_eq(tu_run(a, &ref, err), DDP_OK, "%s", err);
    cr_assert_eq(tu_run(b, &dp, err), DDP_OK, "%s", err);
    cr_assert_eq(dp.steps, ref.steps, "%s: %ld steps vs %ld", b, dp.steps, ref.steps);
    tu_assert_params_close(&dp, &ref, TOL, b);
    result_free(&ref);
    result_free(&dp);
}

Test(dp_accum, twice_the_batch)
{
    for (int k = 2; k <= 4; k++)
        check_accum("--backend cpu --layers 8,24,16,5 --samples 100 --epochs 3 --quiet --loss ce "
                    ADAMW,
                    8, k);
}

/* 29 samples in micro-batches of 5: the last step is (5 rows, 4 rows); on 4
 * devices the first splits 2,2,1 and the second 1,1,1,1, so device 3 joins
 * only in the second micro-batch and must write, not add, its gradients. */
Test(dp_accum, device_joins_in_later_micro_batch)
{
    check_accum("--backend cpu --layers 8,24,16,5 --samples 29 --epochs 4 --quiet --loss mse " SGD,
                5, 4);
}

// ---------------------------------------------------------------------------
// reproducibility and the figures the report reads

Test(dp_run, reproducible_bit_for_bit)
{
    char err[ERR_LEN];
    run_result_t a, b;
    const char *args = "--mode dp --gpus 0,1,2 " SMALL " --batch 11 --loss bce " ADAM;
    cr_assert_eq(tu_run(args, &a, err), DDP_OK, "%s", err);
    cr_assert_eq(tu_run(args, &b, err), DDP_OK, "%s", err);
    cr_assert_eq(a.nparams, b.nparams);
    cr_assert(memcmp(a.params, b.params, a.nparams * sizeof(float)) == 0,
              "two dp runs must give identical bits");
    cr_assert_eq(a.checksum.bits, b.checksum.bits);
    result_free(&a);
    result_free(&b);
}

/* More devices than CPUs: no barrier spins (dp_workers.c), every wait
 * sleeps on the futex and a barrier opens only by a wake-up.  A wake-up
 * lost would leave the sleeper to its longest sleep (100 ms) before it
 * looked again: no step may take that long. */
Test(dp_run, sleeping_devices_are_always_woken, .timeout = 60)
{
    char err[ERR_LEN];
    run_result_t r;
    cpu_set_t before;
    tu_pin_one_cpu(&before);
    int rc = tu_run("--mode dp --gpus 0,1,2 --backend cpu --layers 10,10 --samples 120 "
                    "--batch 12 --steps 400 --warmup-steps 0 --quiet",
                    &r, err);
    sched_setaffinity(0, sizeof before, &before);
    cr_assert_eq(rc, DDP_OK, "%s", err);
    cr_assert_eq(r.times.n, 400);
    cr_assert_lt(r.times.max_s, 0.09, "the slowest step took %.0f ms: a sleeper was not woken",
                 r.times.max_s * 1e3);
    result_free(&r);
}

Test(dp_run, fills_the_result)
{
    char err[ERR_LEN];
    run_result_t r;
    cr_assert_eq(tu_run("--mode dp --gpus 0,2,5 --backend cpu --layers 8,24,16,5 --samples 144 "
                        "--steps 24 --quiet --batch 12 --loss ce --warmup-steps 4 " ADAM,
                        &r, err),
                 DDP_OK, "%s", err);
    cr_assert_eq(r.mode, MODE_DP);
    cr_assert_eq(r.backend, BACKEND_CPU);
    cr_assert_eq(r.ndev, 3);
    cr_assert_eq(r.dev[1].device_id, 2);
    cr_assert_eq(r.dev[2].device_id, 5);
    cr_assert_eq(r.steps, 24);
    cr_assert_eq(r.warmup_steps, 4);
    cr_assert_eq(r.times.n, 20);
    cr_assert_eq(r.times.timed_samples, 20 * 12);
    long rows = 0;
    for (int d = 0; d < 3; d++) {
        rows += r.dev[d].rows;
        cr_assert_gt(r.dev[d].phase_s[PH_FORWARD], 0.0, "device %d forward", d);
        cr_assert_gt(r.dev[d].phase_s[PH_BACKWARD], 0.0, "device %d backward", d);
        cr_assert_gt(r.dev[d].mem_peak, 0, "device %d memory", d);
    }
    cr_assert_eq(rows, r.times.timed_samples, "every timed row on exactly one device");
    /* Device 0's extra work is its own, and the others wait for it. */
    cr_assert_gt(r.dev[0].phase_s[PH_OPTIM], 0.0);
    cr_assert_gt(r.dev[0].phase_s[PH_LOSS], 0.0);
    cr_assert_eq(r.dev[1].phase_s[PH_OPTIM], 0.0);
    cr_assert_eq(r.dev[1].phase_s[PH_LOSS], 0.0);
    cr_assert_gt(r.dev[1].phase_s[PH_SCATTER], 0.0);
    cr_assert_gt(r.dev[1].phase_s[PH_IDLE], 0.0);
    /* Every device's phases cover the same steps: their sums agree with the
     * step time, give or take the wake-up from the barrier that ends each
     * step (counted as idle, outside device 0's step time). */
    for (int d = 0; d < 3; d++) {
        double sum = 0.0;
        for (int p = 0; p < PH_COUNT; p++)
            sum += r.dev[d].phase_s[p];
        cr_assert(sum <= r.times.timed_s * 1.05 + 5e-3 * r.times.n && sum >= r.times.timed_s * 0.5,
                  "device %d: phases %g s vs timed %g s", d, sum, r.times.timed_s);
    }
    cr_assert_not_null(r.params);
    cr_assert_gt(r.samples_per_s, 0.0);
    cr_assert_geq(r.train_accuracy, 0.0);
    result_free(&r);
}

// ---------------------------------------------------------------------------
// devices that are not host memory (the CUDA path), run on the CPU backend

/* The CPU backend with host_visible cleared: dp then stages through pinned
 * memory and h2d copies, reduces by peer copies into a scratch arena plus
 * axpy on device 0, and each device replicates its own parameters, as it
 * does on GPUs.  Its operations ignore host_visible, so results are real. */
static int create_opaque_cpu(backend_t **out, const config_t *cfg, int id, char *err)
{
    (void)cfg;
    int rc = backend_cpu_create(out, id, 0, err);
    if (rc == DDP_OK)
        (*out)->host_visible = false;
    return rc;
}

Test(dp_opaque, matches_single_and_the_host_path_bit_for_bit)
{
    const char *common = SMALL " --batch 11 --loss ce " SGD;
    char line[1024], err[ERR_LEN];
    for (int k = 1; k <= 4; k++) {
        run_result_t host, opaque;
        snprintf(line, sizeof line, "--mode dp --gpus %s %s", gpus_list(k), common);
        dp_backend_create_hook = NULL;
        cr_assert_eq(tu_run(line, &host, err), DDP_OK, "%s", err);
        dp_backend_create_hook = create_opaque_cpu;
        cr_assert_eq(tu_run(line, &opaque, err), DDP_OK, "%s", err);
        dp_backend_create_hook = NULL;
        /* Same sums in the same order (g0 + g1) + g2 ...: identical bits. */
        cr_assert(memcmp(host.params, opaque.params, host.nparams * sizeof(float)) == 0,
                  "k=%d: the not-host-visible path must give the same bits", k);
        cr_assert_gt(opaque.dev[0].phase_s[PH_H2D], 0.0, "k=%d: staged through h2d", k);
        result_free(&host);
        result_free(&opaque);
    }
    dp_backend_create_hook = create_opaque_cpu;
    check_dp_matches_single(common);
    check_accum("--backend cpu --layers 8,24,16,5 --samples 29 --epochs 4 --quiet --loss mse " SGD,
                5, 4);
    dp_backend_create_hook = NULL;
}

/* The same path with --trace and a checkpoint: the copies are waited for
 * before they are stamped (each device's comm lane holds real spans), the
 * first step's moves are those of the host path, and a run resumed from a
 * checkpoint written on this path ends bit for bit where the straight one
 * does. */
Test(dp_opaque, traces_explains_and_resumes)
{
    char line[1024], err[ERR_LEN], trace[64], ck[64];
    snprintf(trace, sizeof trace, "/tmp/ddpbench-test-dp-trace-%d.json", (int)getpid());
    snprintf(ck, sizeof ck, "/tmp/ddpbench-test-dp-ck-%d.safetensors", (int)getpid());
    const char *common = "--mode dp --gpus 0,1,2 --backend cpu --layers 8,24,16,5 --samples 150 "
                         "--quiet --seed 7 --batch 11 --accum 2 --loss ce " SGD;
    run_result_t host, opaque, part, resumed;
    snprintf(line, sizeof line, "%s --steps 9", common);
    cr_assert_eq(tu_run(line, &host, err), DDP_OK, "%s", err);
    dp_backend_create_hook = create_opaque_cpu;
    snprintf(line, sizeof line, "%s --steps 9 --trace %s", common, trace);
    cr_assert_eq(tu_run(line, &opaque, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --steps 4 --checkpoint %s", common, ck);
    cr_assert_eq(tu_run(line, &part, err), DDP_OK, "%s", err);
    snprintf(line, sizeof line, "%s --steps 9 --resume %s", common, ck);
    cr_assert_eq(tu_run(line, &resumed, err), DDP_OK, "%s", err);
    dp_backend_create_hook = NULL;
    cr_assert(memcmp(resumed.params, host.params, host.nparams * sizeof(float)) == 0,
              "resumed on the device path differs from straight");
    cr_assert_eq(resumed.steps, 5);

    for (int m = MOVE_SCATTER; m <= MOVE_REDUCE; m++) {
        cr_assert_eq(opaque.story.move[m].bytes, host.story.move[m].bytes, "%s bytes",
                     move_name((move_kind_t)m));
        cr_assert_gt(opaque.story.move[m].seconds, 0.0, "%s timed", move_name((move_kind_t)m));
    }
    /* each device replicates its own arena and device 0 pulls every gradient */
    int replicate[3] = {0}, reduce_from[3] = {0}, gather_from[3] = {0}, steps = 0;
    for (int d = 0; d < 3; d++) {
        const trace_rec_t *t = opaque.trace[d];
        cr_assert_not_null(t);
        cr_assert_eq(t->dropped, 0);
        for (uint32_t i = 0; i < t->n; i++) {
            const trace_event_t *e = &t->ev[i];
            cr_assert_geq(e->t_end, e->t_begin);
            if (e->kind == TR_STEP && d == 0)
                steps++;
            if (e->lane != LANE_COMM)
                continue;
            cr_assert_gt(e->bytes, 0);
            if (e->kind == TR_REPLICATE) {
                cr_assert_eq(e->peer, d, "device %d replicates into its own replica", d);
                replicate[d]++;
            } else if (e->kind == TR_REDUCE) {
                cr_assert_eq(d, 0, "only device 0 reduces off the host");
                reduce_from[e->peer]++;
            } else if (e->kind == TR_GATHER) {
                gather_from[e->peer]++;
            }
        }
    }
    cr_assert_eq(steps, (int)opaque.times.n);
    cr_assert_eq(replicate[0], 0);
    for (int d = 1; d < 3; d++) {
        cr_assert_eq(replicate[d], steps, "device %d", d);
        cr_assert_eq(reduce_from[d], steps, "from device %d", d);
        cr_assert_eq(gather_from[d], 2 * steps, "from device %d, two micro-batches", d);
    }
    unlink(ck);
    result_free(&host);
    result_free(&opaque);
    result_free(&part);
    result_free(&resumed);
}

// ---------------------------------------------------------------------------
// a device that fails

/* The fault is read from the environment once per process; Criterion runs
 * each test in its own process, so setting it here affects only this test. */
Test(dp_fault, injected_error_names_the_device, .timeout = 20)
{
    setenv("DDPBENCH_FAULT", "error:2:5", 1);
    char err[ERR_LEN] = "";
    run_result_t r;
    double t0 = now_s();
    int rc = tu_run("--mode dp --gpus 0,1,2,3 " SMALL " --batch 12 --loss ce " ADAM, &r, err);
    double dt = now_s() - t0;
    cr_assert_eq(rc, DDP_ERR_RUNTIME, "rc %d: %s", rc, err);
    cr_assert_not_null(strstr(err, "device 2"), "message names the device: '%s'", err);
    cr_assert_not_null(strstr(err, "injected fault at step 5"), "message: '%s'", err);
    cr_assert_lt(dt, 10.0, "a failing device must not make the others hang");
    cr_assert_null(r.params, "a failed run hands back no parameters");
}

Test(dp_fault, on_device_zero, .timeout = 20)
{
    setenv("DDPBENCH_FAULT", "error:0:0", 1);
    char err[ERR_LEN] = "";
    run_result_t r;
    int rc = tu_run("--mode dp --gpus 0,1 " SMALL " --batch 12 --loss mse " SGD, &r, err);
    cr_assert_eq(rc, DDP_ERR_RUNTIME, "rc %d: %s", rc, err);
    cr_assert_not_null(strstr(err, "device 0: injected fault at step 0"), "message: '%s'", err);
}

// ---------------------------------------------------------------------------
// --check-replicas

/* Every replica agrees at every check, the result unchanged (under TSan:
 * device 0's copy and hash reach the others through the broadcast, and its
 * two copies in turn outlive their readers); a replica nudged one ulp after a
 * checked step is named with its layer. */
Test(dp_replicas, agree_at_every_check, .timeout = 30)
{
    char err[ERR_LEN] = "";
    run_result_t r, ref;
    const char *a = "--mode dp --gpus 0,1,2 " SMALL " --batch 12 --loss mse " ADAM;
    char line[512];
    snprintf(line, sizeof line, "%s --check-replicas 1", a);
    cr_assert_eq(tu_run(line, &r, err), DDP_OK, "%s", err);
    cr_assert_eq(tu_run(a, &ref, err), DDP_OK, "%s", err);
    cr_assert_eq(r.replicas.checks, 24);
    cr_assert(!r.replicas.differed && r.replicas.seconds > 0.0);
    cr_assert_eq(r.checksum.bits, ref.checksum.bits, "the check changed the result");
    result_free(&r);
    result_free(&ref);
}

Test(dp_replicas, a_planted_drift_is_named, .timeout = 30)
{
    setenv("DDPBENCH_FAULT", "ulp:2:5", 1);
    char err[ERR_LEN] = "";
    run_result_t r;
    int rc = tu_run("--mode dp --gpus 0,1,2 " SMALL " --batch 12 --loss mse " ADAM
                    " --check-replicas 3", &r, err);
    cr_assert_eq(rc, DDP_ERR_RUNTIME, "rc %d: %s", rc, err);
    cr_assert_not_null(strstr(err, "the replicas differ after step 6 (--check-replicas 3): "
                                   "device 2's layer 2 weight is up to"), "%s", err);
}

// ---------------------------------------------------------------------------
// the split itself

Test(dp_split, chunks_like_torch_chunk)
{
    /* torch.chunk(torch.arange(n), k) sizes. */
    struct {
        int batch, k, sizes[4];
    } cases[] = {
        {10, 4, {3, 3, 3, 1}}, {5, 4, {2, 2, 1, 0}}, {2, 4, {1, 1, 0, 0}},
        {8, 3, {3, 3, 2, 0}},  {12, 4, {3, 3, 3, 3}}, {6, 4, {2, 2, 2, 0}},
        {1, 3, {1, 0, 0, 0}},  {7, 1, {7, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int off = 0, count = 0;
        for (int d = 0; d < cases[i].k; d++) {
            dp_chunk_t c = dp_chunk(cases[i].batch, cases[i].k, d);
            cr_assert_eq(c.rows, cases[i].sizes[d], "chunk(%d, %d)[%d]: %d rows", cases[i].batch,
                         cases[i].k, d, c.rows);
            if (c.rows > 0) {
                cr_assert_eq(c.off, off);
                off += c.rows;
                count++;
            }
        }
        cr_assert_eq(off, cases[i].batch);
        cr_assert_eq(dp_chunk_count(cases[i].batch, cases[i].k), count);
    }
}
