/* tests/unit/test_step_meter.c: the step meter (common/measure/step_meter.h), the
 * one place the three loops' measurements are taken: warm-up steps leave the
 * reported phases alone, timed steps add to them and to the step times, the
 * first step is recorded on its own, a NULL sink is left to another device,
 * and the loss line, log and last loss follow the schedule's logging steps;
 * the step times stay in fixed memory with exact totals and quantiles within
 * their documented error, and a DDP group folds each step's slowest rank;
 * a NaN loss at a log point and a signal stop the loop. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/interrupt.h"
#include "measure/step_meter.h"

static void busy(double s)
{
    double t = now_s();
    while (now_s() - t < s)
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
    static step_times_t times;
    step_meter_t m;
    step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .times = &times});

    step_meter_begin(&m, 0, false, false); /* warm-up */
    busy(1e-3);
    step_meter_lap(&m, PH_FORWARD);
    step_meter_rows(&m, 8);
    step_meter_end(&m, 8);
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
        step_meter_charge(&m, PH_COMM_HIDDEN, 5e-4);
        step_meter_rows(&m, 8);
        double dt = step_meter_end(&m, 8);
        cr_assert_geq(dt, 2e-3);
    }
    cr_assert_eq(times.n, 2);
    cr_assert_eq(times.timed_samples, 16);
    cr_assert_eq(dev.rows, 16);
    cr_assert_float_eq(times.timed_s, times.sample[0] + times.sample[1], 1e-12);
    double laps = dev.phase_s[PH_FORWARD] + dev.phase_s[PH_BACKWARD];
    cr_assert_float_eq(laps, times.timed_s, 1e-9, "the laps cover each step: %g vs %g", laps,
                       times.timed_s);
    cr_assert_float_eq(dev.phase_s[PH_COMM_HIDDEN], 1e-3, 1e-12);
}

Test(step_meter, the_first_step_is_recorded_on_its_own)
{
    config_t cfg = {.quiet = true};
    device_stats_t dev = {0};
    step_story_t story = {0};
    step_meter_t m;
    step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .story = &story});
    /* a timed step before it: first_phase_s must be the first step's alone */
    step_meter_begin(&m, 0, true, false);
    busy(2e-3);
    step_meter_lap(&m, PH_OPTIM);
    step_meter_end(&m, 4);
    double before = dev.phase_s[PH_OPTIM];

    step_meter_begin(&m, 1, true, true);
    busy(1e-3);
    step_meter_lap(&m, PH_DATA);
    step_meter_rows(&m, 3);
    step_meter_rows(&m, 2);
    double dt = step_meter_end(&m, 5);
    cr_assert(story.filled);
    cr_assert_float_eq(story.step_s, dt, 1e-12);
    cr_assert_eq(dev.first_rows, 5);
    cr_assert_eq(dev.first_phase_s[PH_OPTIM], 0.0, "the earlier step is not the first's");
    cr_assert_gt(dev.first_phase_s[PH_DATA], 0.0);
    cr_assert_float_eq(dev.first_phase_s[PH_DATA], dev.phase_s[PH_DATA], 1e-12);
    cr_assert_eq(dev.phase_s[PH_OPTIM], before);
}

Test(step_meter, null_sinks_are_another_devices_job)
{
    device_stats_t dev = {0};
    step_meter_t m;
    char err[ERR_LEN] = "";
    step_meter_init(&m, &(step_meter_sinks_t){.dev = &dev}); /* DP's device 1 */
    step_meter_begin(&m, 0, true, true);
    step_meter_lap(&m, PH_IDLE);
    step_meter_end(&m, 10);
    cr_assert_eq(step_meter_loss(&m, 0, 1, 0, true, 0.5, 10, err), 0);
    cr_assert_eq(m.samples_done, 10);
}

Test(step_meter, logging_steps_fill_the_log_and_the_last_loss)
{
    config_t cfg = {.quiet = true};
    device_stats_t dev = {0};
    loss_log_t log = {0};
    double final_loss = -1.0;
    char err[ERR_LEN] = "";
    step_meter_t m;
    step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .log = &log,
                                              .final_loss = &final_loss});
    for (long g = 0; g < 100; g++) {
        step_meter_begin(&m, g, true, false);
        step_meter_end(&m, 2);
        bool logs = (g + 1) % 10 == 0;
        cr_assert_eq(step_meter_loss(&m, g, 100, g / 50, logs, logs ? (double)g : NAN, 4, err), 0);
    }
    cr_assert_eq(log.n, 10, "every tenth step");
    cr_assert_eq(log.pt[0].step, 10);
    cr_assert_eq(log.pt[9].step, 100);
    cr_assert_eq(log.pt[9].epoch, 1);
    cr_assert_eq(final_loss, 99.0);
    cr_assert_eq(m.samples_done, 400);
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
    step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .log = &log});
    step_meter_begin(&m, 4, true, false);
    step_meter_end(&m, 1);
    cr_assert_eq(step_meter_loss(&m, 4, 9, 1, true, 0.25, 1, err), 0);
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

Test(step_times, a_group_takes_each_steps_slowest_keeper)
{
    static step_group_t g;
    step_group_init(&g, 3);
    /* keeper 2 runs one step behind; keeper 1 is the slow one on odd steps */
    const long n = 3 * STEP_WINDOW;
    double want = 0.0;
    for (long i = 0; i < n; i++) {
        double t0 = 1.0, t1 = i % 2 ? 5.0 : 0.5, t2 = 2.0;
        want += i % 2 ? 5.0 : 2.0;
        if (i > 0)
            step_group_post(&g, 2, i - 1, t2, 10);
        step_group_post(&g, 1, i, t1, 10);
        step_group_post(&g, 0, i, t0, 10);
        cr_assert_geq(g.folded, i - STEP_FOLD_LAG, "keeper 0 folds as it goes");
    }
    step_group_post(&g, 2, n - 1, 2.0, 10);
    step_group_finish(&g);
    cr_assert_eq(g.run.n, n);
    cr_assert_eq(g.run.timed_samples, 30 * n, "the keepers' samples add up");
    cr_assert_float_eq(g.run.timed_s, want, 1e-9);
    cr_assert_eq(g.run.max_s, 5.0);
    cr_assert_eq(g.run.min_s, 2.0);
}

// ---------------------------------------------------------------------------
// where a loop stops

Test(step_meter, a_logged_nan_loss_stops_the_run_naming_the_step)
{
    config_t cfg = {.quiet = true};
    device_stats_t dev = {0};
    step_meter_t m;
    step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev});
    char err[ERR_LEN] = "";
    cr_assert_eq(step_meter_loss(&m, 3, 10, 0, false, NAN, 8, err), DDP_OK,
                 "a step that fetched no loss says nothing");
    cr_assert_eq(step_meter_loss(&m, 4, 10, 0, true, NAN, 8, err), DDP_ERR_RUNTIME);
    cr_assert(strstr(err, "step 5: the loss is nan: the training diverged"), "%s", err);
    cr_assert_eq(step_meter_loss(&m, 5, 10, 0, true, -INFINITY, 8, err), DDP_ERR_RUNTIME);
    cr_assert(strstr(err, "the loss is -inf"), "%s", err);
    cfg.allow_nonfinite = true;
    cr_assert_eq(step_meter_loss(&m, 6, 10, 0, true, NAN, 8, err), DDP_OK);
}

Test(step_meter, a_signal_stops_the_run_after_its_step)
{
    config_t cfg = {.quiet = true};
    device_stats_t dev = {0};
    step_meter_t m;
    step_meter_init(&m, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev});
    char err[ERR_LEN] = "";
    cr_assert_eq(step_meter_loss(&m, 0, 10, 0, true, 1.0, 8, err), DDP_OK);
    interrupt_note(SIGTERM); /* what the handler records (each test is its own process) */
    cr_assert_eq(step_meter_loss(&m, 1, 10, 0, false, NAN, 8, err), DDP_ERR_INTERRUPTED);
    cr_assert_str_eq(err, "interrupted by SIGTERM after step 2 of 10");
}
