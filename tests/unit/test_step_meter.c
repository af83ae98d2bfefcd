/* tests/unit/test_step_meter.c: the step meter (common/measure/step_meter.h), the
 * one place the three loops' measurements are taken: warm-up steps leave the
 * reported phases alone, timed steps add to them and to the step times, the
 * first step is recorded on its own, a NULL sink is left to another device,
 * and the loss line, log and last loss follow the schedule's logging steps. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
