/* tests/unit/test_step_meter.c: the step meter (common/measure/step_meter.h), the
 * one place the three loops' measurements are taken: warm-up steps leave the
 * reported phases alone, timed steps add to them and to the step times, the
 * first step is recorded on its own, a NULL sink is left to another device,
 * the told step's --explain story (and the devices' copies merged into it),
 * the loss line, log and last loss follow the schedule's logging steps, on a
 * device that is not host memory every step reports when the next one ends,
 * after exactly one host wait, with the values it fetched; the step times
 * stay in fixed memory with exact totals and quantiles within their
 * documented error; a NaN loss at a log point and a signal stop the loop;
 * the work figure (the CPU time of a step less its waits) is taken from a
 * sample of the steps: every step when steps are long, a bounded number
 * when they are short, and its waits left out. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/interrupt.h"
#include "common/device/backend_impl.h" /* a fake device that counts its waits */
#include "common/measure/step_meter.h"

/* s seconds of this thread's own CPU time: a lap of it is s or more of its
 * phase however busy the machine (the meter takes the time another process
 * had the core out into the descheduled phase) */
static void busy(double s)
{
    double t = thread_cpu_s();
    while (thread_cpu_s() - t < s)
        ;
}

static double sum_phases(const double *p)
{
    double s = 0.0;
    for (int i = 0; i < PH_COUNT; i++)
        s += p[i];
    return s;
}

Test(step_meter, warm_up_steps_stay_out_and_timed_steps_add_up)
{
    config_t cfg = {.quiet = true};
    device_stats_t dev = {0};
    step_times_t times = {0};
    step_meter_t m;
    char err[ERR_LEN] = "";
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .times = &times},
                                 err), 0);

    step_meter_begin(&m, 0, false, false); /* warm-up */
    busy(1e-3);
    step_meter_lap(&m, PH_FORWARD);
    step_meter_rows(&m, 8);
    cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 8}, err), 0);
    cr_assert_eq(sum_phases(dev.phase_s), 0.0, "a warm-up step is not reported");
    cr_assert_eq(dev.rows, 0);
    cr_assert_eq(times.n, 0);
    cr_assert_gt(m.warm[PH_FORWARD], 0.0, "it went to the scratch array");

    for (long g = 1; g <= 2; g++) {
        step_meter_begin(&m, g, true, false);
        busy(1e-3);
        step_meter_lap(&m, PH_FORWARD);
        busy(1e-3);
        step_meter_lap(&m, PH_BACKWARD);
        m.rec[m.cur].charge[PH_COMM_HIDDEN] += 5e-4; /* what DDP's callback adds */
        step_meter_rows(&m, 8);
        cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 8}, err), 0);
        cr_assert_geq(times.sample[times.n - 1], 2e-3);
    }
    cr_assert_eq(times.n, 2);
    cr_assert_eq(times.timed_samples, 16);
    cr_assert_eq(dev.rows, 16);
    cr_assert_float_eq(times.timed_s, times.sample[0] + times.sample[1], 1e-12);
    /* (a busy machine's share apart: the sampled steps read it) */
    double laps = dev.phase_s[PH_FORWARD] + dev.phase_s[PH_BACKWARD] + dev.phase_s[PH_DESCHED];
    cr_assert_float_eq(laps, times.timed_s, 1e-9, "the laps cover each step: %g vs %g", laps,
                       times.timed_s);
    cr_assert_float_eq(dev.phase_s[PH_COMM_HIDDEN], 1e-3, 1e-12);
    cr_assert_eq(dev.synced_steps, 2);
    cr_assert_eq(dev.host_syncs, 0, "no device, no waits");
    step_meter_free(&m);
}

Test(step_meter, the_first_step_is_recorded_on_its_own)
{
    config_t cfg = {.quiet = true};
    device_stats_t dev = {0};
    step_story_t story = {0};
    step_meter_t m;
    char err[ERR_LEN] = "";
    step_times_t times = {0};
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .story = &story,
                                                           .times = &times},
                                 err), 0);
    /* a timed step before it: first_phase_s must be the first step's alone */
    step_meter_begin(&m, 0, true, false);
    busy(2e-3);
    step_meter_lap(&m, PH_OPTIM);
    step_meter_end(&m, &(step_end_t){.samples = 4}, err);
    double before = dev.phase_s[PH_OPTIM];

    step_meter_begin(&m, 1, true, true);
    busy(1e-3);
    step_meter_lap(&m, PH_DATA);
    busy(1e-3);
    step_meter_lap(&m, PH_DATA); /* a second lap of the phase: first_lap keeps the first */
    step_meter_rows(&m, 3);
    step_meter_rows(&m, 2);
    step_meter_end(&m, &(step_end_t){.samples = 5}, err);
    double dt = times.sample[1];
    cr_assert(story.filled);
    cr_assert_float_eq(story.step_s, dt, 1e-12);
    cr_assert_lt(step_meter_first_lap(&m, PH_DATA), dev.first_phase_s[PH_DATA]);
    cr_assert_geq(step_meter_first_lap(&m, PH_DATA), 1e-3);
    cr_assert_eq(dev.first_rows, 5);
    cr_assert_eq(dev.first_phase_s[PH_OPTIM], 0.0, "the earlier step is not the first's");
    cr_assert_gt(dev.first_phase_s[PH_DATA], 0.0);
    cr_assert_float_eq(dev.first_phase_s[PH_DATA], dev.phase_s[PH_DATA], 1e-12);
    cr_assert_eq(dev.phase_s[PH_OPTIM], before);
    step_meter_free(&m);
}


/* --explain's story is the meter's to write: the told step, its wall time,
 * its first backward lap, the batch it staged (global rows x row bytes; its
 * micro-batches x the devices that stage their own part), a move outside
 * the steps, and each device's copies (spans) in its own first_move, which
 * step_meter_story_merge adds up: bytes and operations summed, the slowest
 * device's seconds.  A field the meter stops filling fails here. */
Test(step_meter, the_told_step_tells_its_story)
{
    config_t cfg = {.quiet = true};
    static run_result_t r; /* large: off the stack */
    memset(&r, 0, sizeof r);
    r.ndev = 2;
    step_meter_t m[2];
    char err[ERR_LEN] = "";
    for (int d = 0; d < 2; d++)
        cr_assert_eq(step_meter_init(&m[d],
                                     &(step_meter_sinks_t){.cfg = &cfg, .dev = &r.dev[d],
                                                           .story = d == 0 ? &r.story : NULL,
                                                           .stagers = 3},
                                     err),
                     0);
    step_meter_moved(&m[0], MOVE_BROADCAST, 4096, 0.25);
    step_meter_moved(&m[1], MOVE_BROADCAST, 1, 1.0); /* no story there: dropped */
    for (long g = 0; g < 3; g++)
        for (int d = 0; d < 2; d++) {
            step_meter_t *mm = &m[d];
            step_meter_begin(mm, g, true, g == 1);
            for (int mi = 0; mi < 2 && d == 0; mi++) { /* device 0 stages two micro-batches */
                step_meter_staged(mm, 36);
                busy(2e-4);
                step_meter_lap(mm, PH_DATA);
            }
            int a = step_meter_mark(mm);
            busy(d == 0 ? 3e-4 : 6e-4);
            int b = step_meter_mark(mm);
            step_meter_span(mm, a, b,
                            &(meter_span_t){.kind = TR_SCATTER, .lane = LANE_COMM,
                                            .bytes = 100u + 10u * (unsigned)d, .bucket = -1,
                                            .peer = d, .move = MOVE_SCATTER});
            step_meter_span(mm, a, b,
                            &(meter_span_t){.kind = TR_REDUCE, .lane = LANE_COMM, .bytes = 8,
                                            .bucket = -1, .peer = -1, .move = MOVE_REDUCE,
                                            .ops = 3});
            step_meter_span(mm, a, b, /* traced, no move */
                            &(meter_span_t){.kind = TR_GATHER, .lane = LANE_COMM, .bytes = 8,
                                            .bucket = -1, .peer = -1, .move = -1});
            busy(1e-3);
            step_meter_lap(mm, PH_BACKWARD);
            busy(1e-4);
            step_meter_lap(mm, PH_BACKWARD); /* a second lap: the story keeps the first */
            cr_assert_eq(step_meter_end(mm, &(step_end_t){.samples = 10, .global_samples = 10}, err), 0);
        }
    const step_story_t *st = &r.story;
    cr_assert(st->filled);
    cr_assert_eq(st->step, 1);
    cr_assert_gt(st->step_s, 0.0);
    cr_assert_float_eq(st->backward_s, step_meter_first_lap(&m[0], PH_BACKWARD), 1e-12);
    cr_assert_geq(st->backward_s, 1e-3);
    cr_assert_eq(st->move[MOVE_BATCH].bytes, 10u * 36, "global rows x row bytes");
    cr_assert_eq(st->move[MOVE_BATCH].ops, 2 * 3, "micro-batches x stagers");
    cr_assert_float_eq(st->move[MOVE_BATCH].seconds,
                       r.dev[0].first_phase_s[PH_DATA] + r.dev[0].first_phase_s[PH_H2D], 1e-12);
    cr_assert_eq(st->move[MOVE_BROADCAST].bytes, 4096);
    cr_assert_eq(st->move[MOVE_BROADCAST].ops, 1);
    cr_assert_eq(st->move[MOVE_BROADCAST].seconds, 0.25);
    /* the copies: each device's own, in the told step only, until merged */
    cr_assert_eq(r.dev[1].first_move[MOVE_SCATTER].bytes, 110);
    cr_assert_eq(r.dev[1].first_move[MOVE_SCATTER].ops, 1);
    cr_assert_eq(r.dev[0].first_move[MOVE_REDUCE].ops, 3);
    cr_assert_eq(r.dev[0].first_move[MOVE_GATHER].ops, 0, "no move: traced only");
    cr_assert_eq(st->move[MOVE_SCATTER].bytes, 0, "not merged yet");
    double s0 = r.dev[0].first_move[MOVE_SCATTER].seconds,
           s1 = r.dev[1].first_move[MOVE_SCATTER].seconds;
    cr_assert(s0 >= 3e-4 && s1 >= 6e-4, "%g %g", s0, s1);
    step_meter_story_merge(&r);
    cr_assert_eq(st->move[MOVE_SCATTER].bytes, 210);
    cr_assert_eq(st->move[MOVE_SCATTER].ops, 2);
    cr_assert_eq(st->move[MOVE_SCATTER].seconds, s0 > s1 ? s0 : s1, "the slowest device's");
    cr_assert_eq(st->move[MOVE_REDUCE].bytes, 16);
    cr_assert_eq(st->move[MOVE_REDUCE].ops, 6);
    cr_assert_eq(st->move[MOVE_BATCH].ops, 2 * 3, "nothing merged into the batch");
    for (int d = 0; d < 2; d++)
        step_meter_free(&m[d]);
}
Test(step_meter, null_sinks_are_another_devices_job)
{
    device_stats_t dev = {0};
    step_meter_t m;
    char err[ERR_LEN] = "";
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.dev = &dev}, err), 0); /* DP's device 1 */
    step_meter_begin(&m, 0, true, true);
    step_meter_lap(&m, PH_IDLE);
    cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 10, .global_samples = 10, .total = 1,
                                                  .logs = true, .denom = 1.0},
                                err), 0);
    cr_assert_eq(m.samples_done, 10);
    step_meter_free(&m);
}

Test(step_meter, logging_steps_fill_the_log_and_the_last_loss)
{
    config_t cfg = {.quiet = true};
    device_stats_t dev = {0};
    loss_log_t log = {0};
    double final_loss = -1.0;
    char err[ERR_LEN] = "";
    step_meter_t m;
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .log = &log,
                                                           .final_loss = &final_loss},
                                 err), 0);
    for (long g = 0; g < 100; g++) {
        step_meter_begin(&m, g, true, false);
        bool logs = (g + 1) % 10 == 0;
        float sums[2] = {(float)g, (float)g}; /* two micro-batches' loss sums */
        if (logs)
            step_meter_fetch(&m, sums, 2);
        cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 2, .global_samples = 4,
                                                      .total = 100, .epoch = g / 50,
                                                      .logs = logs, .denom = 2.0},
                                    err), 0);
    }
    cr_assert_eq(log.n, 10, "every tenth step");
    cr_assert_eq(log.pt[0].step, 10);
    cr_assert_eq(log.pt[9].step, 100);
    cr_assert_eq(log.pt[9].epoch, 1);
    cr_assert_eq(final_loss, 99.0);
    cr_assert_eq(m.samples_done, 400);
    step_meter_free(&m);
    free(log.pt);

    /* a fixed log (DDP's, in the shared area) never grows past its room */
    loss_point_t room[2];
    loss_log_t fixed = {.pt = room, .cap = 2, .fixed = true};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(loss_log_add(&fixed, i + 1, 0, 1.0), 0);
    cr_assert_eq(fixed.n, 2);
}

Test(step_meter, the_loss_line_goes_where_the_config_says)
{
    char path[] = "/tmp/ddpbench-meter-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w+");
    FILE *saved = stdout;
    stdout = f; /* the meter prints the loss line on stdout without --json/--csv */
    config_t cfg = {0};
    device_stats_t dev = {0};
    loss_log_t log = {0};
    char err[ERR_LEN] = "";
    step_meter_t m;
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .log = &log},
                                 err), 0);
    step_meter_begin(&m, 4, true, false);
    float sum = 1.0f;
    step_meter_fetch(&m, &sum, 1);
    cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 1, .total = 9, .epoch = 1,
                                                  .logs = true, .denom = 4.0},
                                err), 0);
    step_meter_free(&m);
    fflush(f);
    stdout = saved;
    char line[128] = "";
    rewind(f);
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "step   5/9  epoch 2  loss 0.250000\n");
    fclose(f);
    unlink(path);
    free(log.pt);
}

// ---------------------------------------------------------------------------
// a device that is not host memory: steps report a step late

/* The CPU backend taking a GPU's path, whose event waits count as host
 * synchronisations like the CUDA backend's. */
static backend_ops_t counting_ops;

static int counting_event_sync(backend_t *be, backend_event_t *ev)
{
    (void)ev;
    be->host_syncs++;
    return 0;
}

typedef struct {
    int calls;
    long last_g;
} seen_t;

static void on_resolved(void *ctx, step_meter_t *m, step_rec_t *r)
{
    (void)m;
    seen_t *s = ctx;
    s->calls++;
    s->last_g = r->g;
    r->charge[PH_COMM_HIDDEN] += 1.0; /* what DDP's callback adds */
}

Test(step_meter, on_a_device_a_step_reports_when_the_next_ends_after_one_wait)
{
    backend_t *be;
    char err[ERR_LEN] = "";
    cr_assert_eq(backend_cpu_create(&be, 0, 1, err), 0);
    counting_ops = *be->ops;
    counting_ops.event_sync = counting_event_sync;
    be->ops = &counting_ops;
    be->host_visible = false;
    config_t cfg = {.quiet = true, .accum = 1};
    device_stats_t dev = {0};
    loss_log_t log = {0};
    step_times_t times = {0};
    seen_t seen = {0, -1};
    step_meter_t m;
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .log = &log,
                                                           .times = &times, .be = be,
                                                           .resolved = on_resolved, .ctx = &seen},
                                 err), 0);
    float *loss = backend_alloc(be, sizeof(float));
    for (long g = 0; g < 4; g++) {
        step_meter_begin(&m, g, true, false);
        busy(1e-4);
        step_meter_lap(&m, PH_FORWARD);
        *loss = (float)(10 * (g + 1));
        step_meter_fetch(&m, loss, 1);
        *loss = -1.0f; /* overwritten after the fetch: the report holds what was fetched */
        cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 2, .total = 4, .logs = true,
                                                      .denom = 2.0},
                                    err), 0, "%s", err);
        cr_assert_eq(seen.calls, g, "after step %ld ends, the steps before it have reported", g);
        cr_assert_eq(log.n, g);
        if (g > 0)
            cr_assert_eq(seen.last_g, g - 1);
    }
    cr_assert_eq(step_meter_finish(&m, err), 0, "%s", err);
    cr_assert_eq(seen.calls, 4, "finish reports the last step");
    cr_assert_eq(log.n, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(log.pt[i].loss, 5.0 * (i + 1), 1e-12);
    cr_assert_eq(times.n, 4);
    cr_assert_eq(dev.synced_steps, 4);
    /* one wait per step: steps 1..3 waited for their predecessor inside
     * their end; step 0 had none before it, and finish's wait for step 3
     * comes after the loop, outside every step */
    cr_assert_eq(dev.host_syncs, 3, "%ld waits in 4 steps", dev.host_syncs);
    cr_assert_float_eq(dev.phase_s[PH_COMM_HIDDEN], 4.0, 1e-12, "the callback's charges count");
    /* Consecutive steps are timed end to end, the host's time between them
     * as the step's idle, so the phases still add up to the steps. */
    double laps = dev.phase_s[PH_FORWARD] + dev.phase_s[PH_IDLE];
    cr_assert_float_eq(laps, times.timed_s, 1e-9, "phases %g, steps %g", laps, times.timed_s);
    cr_assert_gt(dev.phase_s[PH_IDLE], 0.0, "the time between steps is there");
    backend_free(be, loss);
    step_meter_free(&m);
    free(log.pt);
    backend_destroy(be);
}

// the work figure: a sample of the steps' CPU time

/* n timed steps of `work` seconds of busy work each, then `wait` asleep in
 * an idle lap; returns the device's record. */
static device_stats_t run_worked(int n, double work, double wait)
{
    config_t cfg = {.quiet = true, .accum = 1};
    device_stats_t dev = {0};
    step_times_t times = {0};
    step_meter_t m;
    char err[ERR_LEN] = "";
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev,
                                                           .times = &times}, err), 0);
    for (long g = 0; g < n; g++) {
        step_meter_begin(&m, g, true, false);
        busy(work);
        step_meter_lap(&m, PH_FORWARD);
        if (wait > 0.0) {
            struct timespec ts = {0, (long)(wait * 1e9)};
            nanosleep(&ts, NULL);
            step_meter_lap(&m, PH_IDLE);
        }
        cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 1}, err), 0, "%s", err);
    }
    cr_assert_eq(step_meter_finish(&m, err), 0, "%s", err);
    step_meter_free(&m);
    return dev;
}

Test(step_meter, long_steps_are_all_sampled_and_their_waits_left_out)
{
    /* 3 ms of work and 4 ms asleep: every step is 2 ms or more after the
     * last sample began, so each is a sample; the sleep is a wait */
    device_stats_t dev = run_worked(20, 3e-3, 4e-3);
    cr_assert_eq(dev.work_steps, 20, "%ld of 20 steps sampled", dev.work_steps);
    /* busy() spins on the CPU clock: 3 ms of CPU time a step (plus the
     * clock reads); the 4 ms asleep would put it above 4 ms */
    cr_assert_gt(dev.work_cpu_p50, 0.0);
    cr_assert_lt(dev.work_cpu_p50, 3.5e-3, "work %g s: the idle lap is not work",
                 dev.work_cpu_p50);
    cr_assert_leq(dev.work_cpu_p10, dev.work_cpu_p50);
}

Test(step_meter, short_steps_are_sampled_a_bounded_number_of_times)
{
    /* 2000 steps of 20 us (about 40 ms of steps): the first 16, then one
     * step each 2 ms at most (about 20 more); never every step */
    device_stats_t dev = run_worked(2000, 20e-6, 0.0);
    double wall = dev.phase_s[PH_FORWARD] + dev.phase_s[PH_DATA] + dev.phase_s[PH_DESCHED];
    long most = 16 + (long)(wall / 2e-3) + 2;
    cr_assert_geq(dev.work_steps, 16, "%ld sampled", dev.work_steps);
    cr_assert_leq(dev.work_steps, most, "%ld sampled in %.1f ms of steps (at most %ld)",
                  dev.work_steps, wall * 1e3, most);
    cr_assert_gt(dev.work_cpu_p50, 0.0);
}

// step statistics in bounded memory

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p-quantile of the kept sample (the report's reading, without the report) */
static double sample_quantile(const step_times_t *t, double p)
{
    long k = step_times_kept(t);
    double *c = malloc((size_t)k * sizeof *c);
    memcpy(c, t->sample, (size_t)k * sizeof *c);
    qsort(c, (size_t)k, sizeof *c, cmp_d);
    double v = c[(long)(p * (double)(k - 1) + 0.5)];
    free(c);
    return v;
}

Test(step_times, a_million_steps_in_fixed_memory_with_exact_totals_and_bounded_quantiles)
{
    cr_assert_lt(sizeof(step_times_t), (size_t)40 << 10, "%zu bytes", sizeof(step_times_t));
    static step_times_t t;
    /* step i of N takes a time whose rank among all steps is a known
     * permutation of i: the true p-quantile is p (N - 1) */
    const long n = 1000000;
    double sum = 0.0;
    for (long i = 0; i < n; i++) {
        double v = (double)((i * 7919) % n); /* 7919 is prime to 10^6: a permutation */
        step_times_add(&t, v, 3);
        sum += v;
    }
    cr_assert_eq(t.n, n);
    cr_assert_eq(t.timed_samples, 3 * n);
    cr_assert_float_eq(t.timed_s, sum, 1e-6 * sum, "the total is exact");
    cr_assert_eq(t.min_s, 0.0);
    cr_assert_eq(t.max_s, (double)(n - 1));
    cr_assert_eq(step_times_kept(&t), STEP_SAMPLE_MAX);
    /* the documented bound, 2 sqrt(p(1-p)/4096) of the steps, with room: 3 */
    const double ps[] = {0.5, 0.95};
    for (int i = 0; i < 2; i++) {
        double p = ps[i], got = sample_quantile(&t, p) / (double)(n - 1);
        double bound = 3.0 * sqrt(p * (1 - p) / STEP_SAMPLE_MAX);
        cr_assert(fabs(got - p) <= bound, "p%.0f read at rank %.4f (bound %.4f)", 100 * p, got,
                  bound);
    }
}

Test(step_times, up_to_the_sample_size_every_step_is_kept)
{
    static step_times_t t;
    for (int i = 0; i < 100; i++)
        step_times_add(&t, 1.0 + i, 0);
    cr_assert_eq(step_times_kept(&t), 100);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(t.sample[i], 1.0 + i);
}

// ---------------------------------------------------------------------------
// where a loop stops

/* One step g on a host meter: fetches *loss when given, logs when logs. */
static int one_step(step_meter_t *m, long g, const float *loss, bool logs, char *err)
{
    step_meter_begin(m, g, true, false);
    step_meter_lap(m, PH_FORWARD);
    if (loss)
        step_meter_fetch(m, loss, 1);
    return step_meter_end(m, &(step_end_t){.samples = 8, .total = 10, .logs = logs, .denom = 1.0},
                          err);
}

Test(step_meter, a_logged_nan_loss_stops_the_run_naming_the_step)
{
    config_t cfg = {.quiet = true, .accum = 1};
    device_stats_t dev = {0};
    step_meter_t m;
    char err[ERR_LEN] = "";
    float nan = NAN, ninf = -INFINITY;
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev}, err), 0);
    cr_assert_eq(one_step(&m, 3, NULL, false, err), DDP_OK, "a step that fetched no loss says nothing");
    cr_assert_eq(one_step(&m, 4, &nan, true, err), DDP_ERR_RUNTIME);
    cr_assert(strstr(err, "step 5: the loss is nan: the training diverged"), "%s", err);
    step_meter_free(&m);
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev}, err), 0);
    cr_assert_eq(one_step(&m, 5, &ninf, true, err), DDP_ERR_RUNTIME);
    cr_assert(strstr(err, "the loss is -inf"), "%s", err);
    step_meter_free(&m);
    cfg.allow_nonfinite = true;
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev}, err), 0);
    cr_assert_eq(one_step(&m, 6, &nan, true, err), DDP_OK, "--allow-nonfinite keeps going");
    step_meter_free(&m);
}

Test(step_meter, a_signal_stops_the_run_after_its_step)
{
    config_t cfg = {.quiet = true, .accum = 1};
    device_stats_t dev = {0};
    step_meter_t m;
    char err[ERR_LEN] = "";
    float one = 1.0f;
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev}, err), 0);
    cr_assert_eq(one_step(&m, 0, &one, true, err), DDP_OK);
    interrupt_note(SIGTERM); /* what the handler records (each test is its own process) */
    cr_assert_eq(one_step(&m, 1, NULL, false, err), DDP_ERR_INTERRUPTED);
    cr_assert_str_eq(err, "interrupted by SIGTERM after step 2 of 10");
    step_meter_free(&m);
}
