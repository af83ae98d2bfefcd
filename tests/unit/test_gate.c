/* tests/unit/test_gate.c: --repeat's intervals and the regression gate on them,
 * with crafted baselines and crafted runs: no change, a regression
 * (the whole interval below), "too noisy" (an interval wider than the
 * tolerance, the candidate's or the baseline's), peak memory and exposed
 * communication, the phases named in the verdict, and the differences that
 * only warn (another machine, other settings). */
#include <cJSON.h>
#include <math.h>

#include "common/base/procfile.h"
#include "common/measure/disturb.h"
#include "app/repeat/repeat.h"
#include "app/report/report.h"
#include "gate/gate.h"
#include "testutil.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// intervals

Test(repeat, student_interval_of_the_mean)
{
    cr_assert_float_eq(student_t975(1), 12.706, 1e-3);
    cr_assert_float_eq(student_t975(4), 2.776, 1e-3);
    cr_assert_float_eq(student_t975(200), 1.972, 2e-3);
    /* a positive figure: Student's interval on the logs, back on the scale */
    double v[] = {10, 12, 11, 13, 9};
    interval_t iv = interval_of(v, 5);
    cr_assert_float_eq(iv.median, 11.0, 1e-12);
    cr_assert_float_eq(iv.mean, 11.0, 1e-12);
    double ml = 0, ss = 0;
    for (int i = 0; i < 5; i++)
        ml += log(v[i]) / 5;
    for (int i = 0; i < 5; i++)
        ss += (log(v[i]) - ml) * (log(v[i]) - ml);
    double half = 2.776 * sqrt(ss / 4) / sqrt(5.0);
    cr_assert_float_eq(iv.lo, exp(ml - half), 1e-3);
    cr_assert_float_eq(iv.hi, exp(ml + half), 1e-3);
    interval_t one = interval_of(v, 1);
    cr_assert(isnan(one.lo) && isnan(one.hi), "one run has no interval");
    cr_assert_float_eq(one.median, 10.0, 1e-12);
}

/* No interval that cannot be: two throughputs 3x apart gave -7575397..14736049
 * samples/s on the plain scale (t(0.975, 1) = 12.7); on the logs the
 * interval stays above 0.  A phase that is 0 in a run (never below 0) is cut
 * at 0. */
Test(repeat, an_interval_stays_where_the_figure_can_be)
{
    double tp[] = {10000, 30000};
    interval_t iv = interval_of(tp, 2);
    cr_assert(iv.lo > 0 && iv.lo < 10000 && iv.hi > 30000, "%g..%g", iv.lo, iv.hi);
    double ph[] = {0.0, 0.001, 0.002};
    iv = interval_of(ph, 3);
    cr_assert(iv.lo == 0.0 && iv.hi > 0.002, "%g..%g", iv.lo, iv.hi);
    double neg[] = {-1.0, 1.0};
    iv = interval_of(neg, 2);
    cr_assert(iv.lo < -1.0, "a figure that can be negative keeps its interval: %g", iv.lo);
}

/* Two sets of runs' ratio and Welch's interval on the logs, by hand: base
 * logs {0, 0.02, -0.02} (mean 0, s^2 = 4e-4), candidate {0.1, 0.12, 0.08}
 * (mean 0.1, the same spread): se = sqrt(2 x 4e-4 / 3), df = 4, t = 2.776. */
Test(repeat, ratio_interval_by_welch_on_the_logs)
{
    double b[] = {1.0, exp(0.02), exp(-0.02)}, c[] = {exp(0.1), exp(0.12), exp(0.08)};
    ratio_interval_t w;
    cr_assert(ratio_interval_of(b, 3, c, 3, &w));
    double se = sqrt(2 * 4e-4 / 3);
    cr_assert_float_eq(w.ratio, exp(0.1), 1e-12);
    cr_assert_float_eq(w.df, 4.0, 1e-9);
    cr_assert_float_eq(w.lo, exp(0.1 - 2.776 * se), 1e-9);
    cr_assert_float_eq(w.hi, exp(0.1 + 2.776 * se), 1e-9);
    /* one baseline run: the candidate's spread stands for it (df 2) */
    cr_assert(ratio_interval_of(b, 1, c, 3, &w));
    cr_assert_float_eq(w.df, 2.0, 1e-9);
    cr_assert_float_eq(w.hi, exp(0.1 + 4.303 * sqrt(4e-4 + 4e-4 / 3)), 1e-9);
    cr_assert(!ratio_interval_of(b, 1, c, 1, &w), "one run each: no interval");
    double z[] = {0.0, 1.0};
    cr_assert(!ratio_interval_of(z, 2, c, 3, &w), "a figure of 0");
}

/* Summaries come from the run record's totals (not per-step arrays). */
Test(repeat, summary_of_a_run_record)
{
    run_result_t r;
    result_init(&r);
    r.ndev = 2;
    r.samples_per_s = 500.0;
    r.times.n = 10;
    r.times.timed_s = 2.0;
    r.dev[0].phase_s[PH_FORWARD] = 1.0;
    r.dev[1].phase_s[PH_FORWARD] = 3.0;
    r.dev[0].mem_peak = 100;
    r.dev[1].mem_peak = 300;
    run_summary_t s;
    run_summary_of(&r, &s);
    cr_assert_float_eq(s.step_mean_s, 0.2, 1e-12);
    cr_assert_float_eq(s.phase_s[PH_FORWARD], 0.2, 1e-12, "(1+3)/2 devices/10 steps");
    cr_assert_float_eq(s.mem_peak_bytes, 300.0, 1e-12);
    cr_assert_float_eq(run_summary_figure(&s, FIG_THROUGHPUT), 500.0, 1e-12);
}

// ---------------------------------------------------------------------------
// the gate

/* A baseline object: throughput tp, step mean step_s, forward/backward/comm
 * exposed per step on one device, peak memory mem; rep: a "repeat" of
 * throughput [lo, hi] around tp, or none. */
static cJSON *baseline(double tp, double step_s, double fwd, double bwd, double comm, double mem,
                       const double *rep_lohi)
{
    char txt[2048];
    snprintf(txt, sizeof txt,
             "{\"schema_version\":1,\"throughput_samples_per_s\":%.17g,"
             "\"step_time_s\":{\"mean\":%.17g},\"mem_peak_bytes_max\":%.17g,"
             "\"devices\":[{\"phases_s_per_step\":{\"forward_s\":%.17g,\"backward_s\":%.17g,"
             "\"comm_exposed_s\":%.17g}}]}",
             tp, step_s, mem, fwd, bwd, comm);
    cJSON *o = cJSON_Parse(txt);
    cr_assert_not_null(o);
    if (rep_lohi) {
        cJSON *rep = cJSON_AddObjectToObject(o, "repeat");
        cJSON_AddNumberToObject(rep, "runs", 5);
        cJSON *t = cJSON_AddObjectToObject(rep, "throughput_samples_per_s");
        cJSON_AddNumberToObject(t, "mean", tp);
        cJSON_AddNumberToObject(t, "median", tp);
        cJSON_AddNumberToObject(t, "lo", rep_lohi[0]);
        cJSON_AddNumberToObject(t, "hi", rep_lohi[1]);
    }
    return o;
}

/* Runs with these throughputs; every other figure like the baseline's
 * (forward 50 us, backward 40 us, comm exposed 10 us, 1 MiB), times scale. */
static void runs(repeat_t *r, const double *tp, int n, double bwd_scale, double comm_scale,
                 double mem_scale)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    for (int i = 0; i < n; i++) {
        run_summary_t *s = &r->run[i];
        s->samples_per_s = tp[i];
        s->phase_s[PH_FORWARD] = 50e-6;
        s->phase_s[PH_BACKWARD] = 40e-6 * bwd_scale;
        s->phase_s[PH_COMM_EXPOSED] = 10e-6 * comm_scale;
        s->step_mean_s = 100e-6;
        s->mem_peak_bytes = 1048576.0 * mem_scale;
    }
}

static int judge(const cJSON *b, const repeat_t *r, double tol, char *out)
{
    return baseline_judge(b, "ddp", r, tol, out, 4096);
}

Test(gate, exit_policy_on_crafted_runs)
{
    cJSON *b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, NULL);
    char out[4096];
    repeat_t r;

    const double same[] = {1000, 1005, 995, 1002, 998};
    runs(&r, same, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    cr_assert(strstr(out, "verdict: no change: ddp: throughput"), "%s", out);
    cr_assert(strstr(out, "95% interval"), "%s", out);

    /* the whole interval more than 5% below: a regression */
    const double slow[] = {900, 905, 895, 902, 898};
    runs(&r, slow, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "verdict: regressed: ddp: throughput"), "%s", out);

    /* the mean 5.5% below but the interval reaching above -5%, and narrow:
     * not a regression (the gate needs the whole interval), and not "no
     * change" either (that needs it inside): the noise explains the gap */
    const double edge[] = {935, 955, 945, 950, 940};
    runs(&r, edge, 5, 1, 1, 1);
    interval_t iv = repeat_interval(&r, FIG_THROUGHPUT);
    cr_assert(iv.hi > 950.0 && iv.mean < 950.0, "the case: %g..%g", iv.lo, iv.hi);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cr_assert(strstr(out, "straddle the tolerance"), "%s", out);

    /* faster beyond the tolerance: improved, exit 0, said as such */
    const double fast[] = {1200, 1205, 1195, 1202, 1198};
    runs(&r, fast, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    cr_assert(strstr(out, "verdict: improved: ddp: throughput"), "%s", out);

    /* wider than the tolerance: no verdict */
    const double noisy[] = {800, 1200, 900, 1100, 1000};
    runs(&r, noisy, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cr_assert(strstr(out, "verdict: no verdict: too noisy"), "%s", out);
    cr_assert(strstr(out, "this run's interval spans"), "%s", out);

    /* noisy but far below anyway: a regression still */
    const double crash[] = {500, 600, 550, 520, 580};
    runs(&r, crash, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);

    /* one run: the number itself, as before --repeat */
    const double one_slow[] = {900};
    runs(&r, one_slow, 1, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "10.0% below the baseline 1000.0"), "%s", out);
    const double one_ok[] = {980};
    runs(&r, one_ok, 1, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    cJSON_Delete(b);

    /* a baseline whose own interval is wider than the tolerance */
    const double wide[] = {900, 1100};
    b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, wide);
    runs(&r, same, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cr_assert(strstr(out, "verdict: no verdict: the baseline is too noisy: ddp:"), "%s", out);
    cr_assert(strstr(out, "too noisy to gate 5%: the baseline's runs spread 20%"), "%s", out);
    /* ... even against a candidate far below it: refused, not a regression */
    runs(&r, slow, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cJSON_Delete(b);

    /* both sides' intervals: each 4% wide (within 5%), 3% apart: together
     * they reach past -5% (no verdict); 1% apart they stay inside (no change) */
    const double base4[] = {980, 1020};
    b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, base4);
    const double c3[] = {950, 990, 970, 970, 970};
    runs(&r, c3, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    const double c1[] = {990, 991, 989, 990, 990};
    runs(&r, c1, 5, 1, 1, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    cr_assert(strstr(out, "verdict: no change"), "%s", out);
    cJSON_Delete(b);
}

/* A slower candidate whose runs were disturbed enough to explain the gap:
 * no verdict blaming a busy machine, not a regression naming a phase; a
 * gap larger than the disturbance explains stays a regression. */
Test(gate, a_busy_machine_is_blamed_not_a_phase)
{
    cJSON *b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, NULL);
    char out[4096];
    repeat_t r;
    const double slow[] = {800, 805, 795, 802, 798}; /* 20% below */
    runs(&r, slow, 5, 1, 3.0, 1);                    /* and comm exposed x3 */
    for (int i = 0; i < 3; i++) {
        r.run[i].machine.disturbed = true;
        r.run[i].machine.contention = 0.30; /* others took 30% of its cores */
    }
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cr_assert(strstr(out, "verdict: no verdict: a busy machine: ddp:"), "%s", out);
    cr_assert(strstr(out, "3 of 5 runs were disturbed (other processes took 30% of the run's "
                          "cores)"),
              "%s", out);
    cr_assert_null(strstr(out, "by phase"), "%s", out);
    cr_assert_null(strstr(out, "exposed communication"), "%s", out);
    /* the same runs, undisturbed: a regression, with its phases */
    for (int i = 0; i < 3; i++)
        r.run[i].machine.disturbed = false;
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "by phase"), "%s", out);
    /* disturbed by 5% only: a 20% drop is more than it explains */
    for (int i = 0; i < 5; i++) {
        r.run[i].machine.disturbed = true;
        r.run[i].machine.contention = 0.05;
    }
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cJSON_Delete(b);
}

Test(gate, memory_and_exposed_communication)
{
    cJSON *b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, NULL);
    char out[4096];
    repeat_t r;
    const double same[] = {1000, 1001, 999};
    runs(&r, same, 3, 1, 1, 1.2); /* 20% more memory */
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "\nverdict: regressed: ddp: peak memory 1.20 MiB"), "%s", out);
    runs(&r, same, 3, 1, 1, 1.04); /* 4%: within */
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    /* exposed communication 10 -> 20 us: 10% of the 100 us step */
    runs(&r, same, 3, 1, 2.0, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "exposed communication"), "%s", out);
    cr_assert(strstr(out, "grew by 10.0% of the baseline's 100.0 us step"), "%s", out);
    /* 10 -> 14 us: 4% of the step, within 5% */
    runs(&r, same, 3, 1, 1.4, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    /* one run: its exposed time is not judged (too noisy to mean anything) */
    runs(&r, same, 1, 1, 2.0, 1);
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    cr_assert_null(strstr(out, "exposed communication"), "%s", out);
    cJSON_Delete(b);
}

/* The baseline's runs' work (repeat.every_run[].work_cpu_s_p10), as a
 * --repeat --json on the CPU writes it. */
static void with_work(cJSON *b, const double *w, int n)
{
    cJSON *rep = cJSON_GetObjectItemCaseSensitive(b, "repeat");
    if (!rep) {
        rep = cJSON_AddObjectToObject(b, "repeat");
        cJSON_AddNumberToObject(rep, "runs", n);
    }
    cJSON *every = cJSON_AddArrayToObject(rep, "every_run");
    for (int i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "work_cpu_s_p10", w[i]);
        cJSON_AddItemToArray(every, e);
    }
}

/* On the CPU, where both sides' runs carry their work, the work is judged,
 * as the A/B gate does: a baseline whose throughput is too noisy to gate
 * (what a shared machine gives) still gets a verdict; the throughput is
 * judged too only when no run on either side was disturbed. */
Test(gate, the_cpu_work_is_judged_where_both_sides_have_it)
{
    const double wide[] = {700, 1300};
    cJSON *b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, wide);
    const double bw[] = {1.00e-3, 1.01e-3, 0.99e-3, 1.005e-3, 0.995e-3};
    with_work(b, bw, 5);
    char out[4096];
    repeat_t r;
    const double tp[] = {1000, 1200, 800, 1100, 900};
    runs(&r, tp, 5, 1, 1, 1);
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = bw[(i + 2) % 5];
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    cr_assert(strstr(out, "verdict: no change: ddp: work per step (CPU seconds, p10) "), "%s", out);
    cr_assert(strstr(out, "0.0% against the baseline's (95% interval "), "%s", out);
    cr_assert(strstr(out, "\n  ddp: throughput 1000.0 samples/s"), "%s", out);
    /* 10% more work: regressed */
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = 1.1 * bw[i];
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "verdict: regressed: ddp: work per step (CPU seconds, p10) +10.0%"), "%s", out);
    /* the work itself spread +-10%: no verdict, saying what would settle it */
    const double spread[] = {0.9e-3, 1.1e-3, 1.0e-3, 0.85e-3, 1.15e-3};
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = spread[i];
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cr_assert(strstr(out, "verdict: no verdict: ddp: work per step"), "%s", out);
    cJSON_Delete(b);

    /* the same work, the median step 20% slower, a quiet baseline and no
     * run disturbed: the step waits longer: regressed */
    const double tight[] = {995, 1005};
    b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, tight);
    with_work(b, bw, 5);
    const double slow[] = {800, 805, 795, 802, 798};
    runs(&r, slow, 5, 1, 1, 1);
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = bw[i];
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "the median-step throughput fell beyond the tolerance while the work "
                          "did not"), "%s", out);
    /* ... a disturbed run: the throughput is not judged, the work says no change */
    r.run[2].machine.disturbed = true;
    r.run[2].machine.contention = 0.4;
    cr_assert_eq(judge(b, &r, 5, out), DDP_OK, "%s", out);
    cr_assert(strstr(out, "not judged: the work is"), "%s", out);
    cJSON_Delete(b);
}

/* A baseline whose work spreads wider than the tolerance warned so when it
 * was written ("a --baseline of them gives no verdict"), and a --baseline of
 * it gives none, whatever the candidate did (main's gate called a tight
 * candidate 30% above such a baseline regressed, and in bench_baseline.sh's
 * run 3 a planted 15% slowdown 'no change' against one that had warned). */
Test(gate, a_noisy_work_baseline_gives_no_verdict_as_it_warned)
{
    const double tight[] = {995, 1005};
    cJSON *b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, tight);
    const double bw[] = {1.00e-3, 1.10e-3, 0.95e-3, 1.06e-3, 0.92e-3};
    with_work(b, bw, 5);
    repeat_t r;
    const double tp[] = {1000, 1000, 1000, 1000, 1000};
    runs(&r, tp, 5, 1, 1, 1);
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = bw[i];
    char out[4096];
    cr_assert(baseline_too_noisy(&r, NULL, 5, out, sizeof out), "the baseline's runs did not warn");
    cr_assert(strstr(out, "a --baseline of them gives no verdict"), "%s", out);
    for (double k = 0.9; k < 1.35; k += 0.1) {
        for (int i = 0; i < 5; i++)
            r.run[i].work_p10 = k * (1.0 + 0.001 * i) * 1.0e-3;
        cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "work x %.1f: %s", k, out);
        cr_assert(strstr(out, "verdict: no verdict: the baseline is too noisy: ddp: work per step"),
                  "%s", out);
        cr_assert(strstr(out, "too noisy to gate 5%: the baseline's work spreads "), "%s", out);
    }
    cJSON_Delete(b);
}

/* Sides apart in contention read apart in work for the machine's sake alone
 * (up to BASELINE_BUSY_WORK per unit of contention, either way): within
 * that, no verdict saying so, never regressed or improved; beyond it, the
 * verdict stands (main's rule called +12% at contention 0.8 regressed and
 * -11% against a busy baseline improved). */
Test(gate, a_busier_side_moves_the_work_no_verdict_not_an_alarm)
{
    const double tight[] = {995, 1005};
    cJSON *b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, tight);
    const double bw[] = {1.00e-3, 1.01e-3, 0.99e-3, 1.005e-3, 0.995e-3};
    with_work(b, bw, 5);
    char out[4096];
    repeat_t r;
    const double tp[] = {1000, 1000, 1000, 1000, 1000};
    runs(&r, tp, 5, 1, 1, 1);
    for (int i = 0; i < 5; i++) {
        r.run[i].work_p10 = 1.12 * bw[i];
        r.run[i].machine = (disturb_t){.disturbed = true, .contention = 0.8};
    }
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cr_assert(strstr(out, "verdict: no verdict: a busy machine: ddp: work per step (CPU seconds, "
                          "p10) +12.0%"), "%s", out);
    cr_assert(strstr(out, "the two sides ran apart in contention (0.80 here, 0.00 there), which "
                          "moves the work by up to 24%"), "%s", out);
    /* beyond what the machine explains: regressed */
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = 1.5 * bw[i];
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    /* +12% with the candidate as quiet as the baseline: regressed */
    for (int i = 0; i < 5; i++) {
        r.run[i].work_p10 = 1.12 * bw[i];
        r.run[i].machine = (disturb_t){0};
    }
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cJSON_Delete(b);
    /* a busy baseline (contention 0.8 in every run) against a quiet candidate
     * reading 11% less work: no verdict, not improved */
    b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, tight);
    with_work(b, bw, 5);
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(b, "repeat"),
                                                           "every_run"))
    {
        cJSON *m = cJSON_AddObjectToObject(e, "machine");
        cJSON_AddNumberToObject(m, "contention", 0.8);
    }
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = 0.89 * bw[i];
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cr_assert(strstr(out, "ran apart in contention (0.00 here, 0.80 there)"), "%s", out);
    /* ... and a quiet candidate reading 11% MORE than the busy baseline (ddp
     * read so at contention 0.07 against 0.4): no verdict, not regressed */
    for (int i = 0; i < 5; i++)
        r.run[i].work_p10 = 1.11 * bw[i];
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_NOISY, "%s", out);
    cJSON_Delete(b);
}

/* The verdict names the phases that moved, largest first, with their +-. */
Test(gate, attributes_the_change_to_phases)
{
    cJSON *b = baseline(1000, 100e-6, 50e-6, 40e-6, 10e-6, 1048576, NULL);
    char out[4096];
    repeat_t r;
    const double slow[] = {800, 801, 799};
    runs(&r, slow, 3, 1.6, 1, 1); /* backward 40 -> 64 us */
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "by phase: backward +60% (+-0%), forward +0% (+-0%)"), "%s", out);
    cJSON_Delete(b);
    /* a baseline taken on a busy machine: its step 99% descheduled, every
     * phase under 2% of it; the phases are weighed against the step less
     * the machine's time (the gate named none: e2e_gate failed at load 10) */
    b = baseline(1000, 10e-3, 50e-6, 40e-6, 10e-6, 1048576, NULL);
    cJSON *ph = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(b, "devices"), 0),
                                    "phases_s_per_step");
    cJSON_AddNumberToObject(ph, phase_key(PH_DESCHED), 9.9e-3);
    cr_assert_eq(judge(b, &r, 5, out), DDP_ERR_REGRESSED, "%s", out);
    cr_assert(strstr(out, "by phase: backward +60% (+-0%), forward +0% (+-0%)"), "%s", out);
    cJSON_Delete(b);
}

// ---------------------------------------------------------------------------
// what only warns

Test(gate, another_machine_or_settings_warn_saying_what)
{
    baseline_t bl = {.path = "b.json"};
    cJSON *m = cJSON_Parse("{\"config\":{\"seed\":0,\"comm\":\"shm\"},\"environment\":{\"host\":"
                           "\"box-a\",\"cpu_model\":\"X\",\"cpus_online\":2}}");
    cJSON *cfg = cJSON_Parse("{\"seed\":5,\"comm\":\"shm\"}");
    cJSON *env = cJSON_Parse("{\"host\":\"box-b\",\"cpu_model\":\"X\",\"cpus_online\":8}");
    char out[2048];
    cr_assert_eq(baseline_differences(&bl, m, cfg, env, out, sizeof out), 3, "%s", out);
    cr_assert(strstr(out, "warning: --baseline b.json: another machine or build: host is "
                          "\"box-a\" there, \"box-b\" here; cpus_online is 2 there, 8 here; other "
                          "settings: seed is 0 there, 5 here"),
              "%s", out);
    cJSON *same_env = cJSON_Parse("{\"host\":\"box-a\",\"cpu_model\":\"X\",\"cpus_online\":2}");
    cJSON *same_cfg = cJSON_Parse("{\"seed\":0}");
    cr_assert_eq(baseline_differences(&bl, m, same_cfg, same_env, out, sizeof out), 0, "%s", out);
    cr_assert_str_eq(out, "");
    cJSON_Delete(m);
    cJSON_Delete(cfg);
    cJSON_Delete(env);
    cJSON_Delete(same_env);
    cJSON_Delete(same_cfg);
}

/* A real run gated with --repeat: the "repeat" JSON round-trips through the
 * gate (a baseline with an interval), and judges its own runs within. */
Test(gate, repeat_json_is_a_baseline)
{
    repeat_t r;
    memset(&r, 0, sizeof r);
    char err[ERR_LEN];
    for (int i = 0; i < 3; i++) {
        run_result_t res;
        cr_assert_eq(tu_run("--mode single --model seed-linear --steps 30 --backend cpu --quiet",
                            &res, err),
                     DDP_OK, "%s", err);
        repeat_add(&r, &res);
        result_free(&res);
    }
    cr_assert_eq(r.n, 3);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "repeat", report_json_repeat(&r));
    cJSON_AddNumberToObject(o, "throughput_samples_per_s", 1.0);
    const cJSON *rep = cJSON_GetObjectItem(o, "repeat");
    const cJSON *t = cJSON_GetObjectItem(rep, "throughput_samples_per_s");
    interval_t iv = repeat_interval(&r, FIG_THROUGHPUT);
    cr_assert_float_eq(cJSON_GetObjectItem(t, "lo")->valuedouble, iv.lo, 1e-9 * iv.mean);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "repeat"),
                                                        "every_run")),
                 3);
    char out[4096];
    /* a tolerance wider than any machine's noise: judged against its own mean */
    cr_assert_eq(baseline_judge(o, NULL, &r, 1000.0, out, sizeof out), DDP_OK, "%s", out);
    cJSON_Delete(o);
}

// ---------------------------------------------------------------------------
// every field the gate reads, checked when the baseline is loaded

/* Load a one-object baseline whose text is txt; the status, the message in err. */
static int load_text(const char *txt, char *err)
{
    char path[] = "/tmp/ddpbench_gate_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, txt, strlen(txt)), (ssize_t)strlen(txt));
    close(fd);
    baseline_t b;
    int rc = baseline_load(&b, path, err);
    if (rc == DDP_OK)
        baseline_free(&b);
    unlink(path);
    return rc;
}

Test(gate, every_field_the_gate_reads_is_checked_naming_it)
{
    const char *head = "{\"schema_version\":1,\"config\":{\"mode\":\"ddp\",\"backend\":\"cpu\","
                       "\"ndevices\":2,\"layers\":[4,2],\"batch\":8,\"accum\":1,\"loss\":\"mse\","
                       "\"optimizer\":{\"name\":\"sgd\"}},\"throughput_samples_per_s\":100";
    static const struct {
        const char *tail, *field;
    } bad[] = {
        {",\"repeat\":\"fast\"}", "repeat is \"fast\", not an object or null"},
        {",\"repeat\":[1]}", "repeat is [1], not an object"},
        {",\"repeat\":{\"throughput_samples_per_s\":{\"mean\":100}}}", "repeat.runs is missing"},
        {",\"repeat\":{\"runs\":1.5,\"throughput_samples_per_s\":{\"mean\":100}}}",
         "repeat.runs is 1.5, not a whole number"},
        {",\"repeat\":{\"runs\":3}}", "repeat.throughput_samples_per_s is missing"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":0}}}",
         "repeat.throughput_samples_per_s.mean is 0, not a rate from 1e-30 to 1e+30 a second"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":-5}}}",
         "repeat.throughput_samples_per_s.mean is -5, not a rate from 1e-30 to 1e+30 a second"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":\"100\"}}}",
         "repeat.throughput_samples_per_s.mean is \"100\", not a rate from 1e-30 to 1e+30 a second"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100,\"lo\":\"x\"}}}",
         "repeat.throughput_samples_per_s.lo is \"x\", not a rate"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100,\"lo\":120,"
         "\"hi\":90}}}",
         "lo 120 is above hi 90"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100},"
         "\"median_throughput_samples_per_s\":{\"mean\":0}}}",
         "repeat.median_throughput_samples_per_s.mean is 0"},
        {",\"step_time_s\":{\"mean\":0}}", "step_time_s.mean is 0, not a time from 1e-09 to 1e+09 s"},
        /* no run's figures: their ratios would overflow ("+inf%") */
        {",\"step_time_s\":{\"p50\":1e-308}}", "step_time_s.p50 is 1e-308, not a time"},
        {",\"work_cpu_s\":{\"p10\":1e-320}}", "work_cpu_s.p10 is"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":1e-300}}}",
         "repeat.throughput_samples_per_s.mean is 1e-300, not a rate"},
        {",\"timed_samples\":1e300}", "timed_samples is 1e+300, not a whole number from 1 to 2^53"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100},"
         "\"every_run\":[{\"work_cpu_s_p10\":1e-320}]}}", "every_run[0].work_cpu_s_p10 is"},
        {",\"step_time_s\":{\"p50\":\"1\"}}", "step_time_s.p50 is \"1\""},
        {",\"mem_peak_bytes_max\":-1}", "mem_peak_bytes_max is -1, not a byte count"},
        {",\"mem_peak_bytes_max\":5e-324}",
         "mem_peak_bytes_max is 4.94065645841247e-324, not a byte count, 0 or from 1 to 2^53"},
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100},"
         "\"mem_peak_bytes_max\":{\"mean\":5e-324}}}", "repeat.mem_peak_bytes_max.mean is"},
        /* a rate's ends are divisors too (a lo of 5e-324 printed "+inf%") */
        {",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100},"
         "\"median_throughput_samples_per_s\":{\"mean\":100,\"lo\":5e-324}}}",
         "repeat.median_throughput_samples_per_s.lo is 4.94065645841247e-324, not a rate"},
        {",\"devices\":{}}", "devices is {}, not an array"},
        {",\"devices\":[{\"phases_s_per_step\":{\"forward_s\":\"slow\"}}]}",
         "devices[0].phases_s_per_step.forward_s is \"slow\", not a number"},
        {",\"machine\":{\"disturbed\":1}}", "machine.disturbed is 1, not true or false"},
    };
    char err[ERR_LEN], txt[1024];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(txt, sizeof txt, "%s%s", head, bad[i].tail);
        cr_assert_eq(load_text(txt, err), DDP_ERR_INPUT, "%s: loaded", bad[i].tail);
        cr_assert(strstr(err, bad[i].field), "%s: %s", bad[i].tail, err);
        cr_assert(strstr(err, "object 1: "), "%s", err);
    }
    /* the good forms load: a repeat with null ends, a null repeat, no repeat */
    snprintf(txt, sizeof txt, "%s%s", head,
             ",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100,\"lo\":null,"
             "\"hi\":null}},\"machine\":null,\"mem_peak_bytes_max\":0}");
    cr_assert_eq(load_text(txt, err), DDP_OK, "%s", err);
    /* a rate's end of 0 is none, as null */
    snprintf(txt, sizeof txt, "%s%s", head,
             ",\"repeat\":{\"runs\":3,\"throughput_samples_per_s\":{\"mean\":100,\"lo\":0,"
             "\"hi\":1e9}}}");
    cr_assert_eq(load_text(txt, err), DDP_OK, "%s", err);
    snprintf(txt, sizeof txt, "%s%s", head, ",\"repeat\":null}");
    cr_assert_eq(load_text(txt, err), DDP_OK, "%s", err);
}

// ---------------------------------------------------------------------------
// the disturbance record

/* A fake /proc: stat with `busy` user jiffies and `steal` steal jiffies on 2
 * CPUs, and a load average. */
static void fake_proc(const char *dir, unsigned long busy, unsigned long steal, double load)
{
    char p[256];
    snprintf(p, sizeof p, "%s/stat", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fprintf(f, "cpu  %lu 0 0 100000 0 0 0 %lu 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n", busy, steal);
    fclose(f);
    snprintf(p, sizeof p, "%s/loadavg", dir);
    f = fopen(p, "w");
    cr_assert_not_null(f);
    fprintf(f, "%.2f 0.50 0.40 1/100 4242\n", load);
    fclose(f);
}

/* The one /proc reader (base/procfile.h) that the memory check
 * (MemAvailable), the DDP supervisor (oom_kill) and the disturbance record
 * (the cpu line, the load) share: the first line that starts with the key,
 * after it; a key that only starts another line's name is not it. */
Test(disturb, one_proc_line_by_its_key)
{
    char dir[] = "/tmp/ddpbench_proc_XXXXXX", p[300], v[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/vmstat", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fprintf(f, "nr_free 12\noom_kill_later 9\noom_kill 3\noom_kill 4\nMemAvailable:  2048 kB\n");
    fclose(f);
    cr_assert(procfile_value(p, "oom_kill ", v, sizeof v));
    cr_assert_str_eq(v, "3");
    cr_assert(procfile_value(p, "MemAvailable:", v, sizeof v));
    cr_assert_str_eq(v, "  2048 kB");
    cr_assert(procfile_value(p, "", v, sizeof v));
    cr_assert_str_eq(v, "nr_free 12");
    cr_assert_not(procfile_value(p, "pgfault ", v, sizeof v));
    unlink(p);
    cr_assert_not(procfile_value(p, "oom_kill ", v, sizeof v), "no file");
    rmdir(dir);
}

/* Burn about s seconds of this thread's CPU. */
static void burn(double s)
{
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    volatile double x = 1.0;
    do {
        for (int i = 0; i < 10000; i++)
            x = x * 1.0000001 + 1e-9;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    } while ((double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec) < s);
}

/* A planted quiet machine: /proc/stat's busy time grows by this process's
 * own CPU time alone, so nothing else ran: not disturbed, the loads read. */
/* The planted machine's CPUs, all of them the run's: the test's own
 * affinity (make test under taskset -c 0) is not the planted machine's. */
static void every_cpu_the_runs(void)
{
    int n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < n; c++)
        CPU_SET(c, &all);
    disturb_set_cpus(&all, n);
}

Test(disturb, a_quiet_fake_proc_is_quiet)
{
    char dir[] = "/tmp/ddpbench_proc_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    disturb_set_proc_dir(dir);
    every_cpu_the_runs();
    fake_proc(dir, 1000, 0, 0.25);
    disturb_mark_t m;
    disturb_begin(&m);
    burn(0.2);
    double own = m.own0_s;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double now = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    long hz = sysconf(_SC_CLK_TCK);
    fake_proc(dir, 1000 + (unsigned long)((now - own) * (double)hz), 0, 0.75);
    disturb_t d;
    disturb_end(&m, 1, 1000000, false, &d);
    cr_assert(d.known);
    cr_assert_float_eq(d.load_start, 0.25, 1e-9);
    cr_assert_float_eq(d.load_end, 0.75, 1e-9);
    cr_assert(d.others_cpu_s < 0.05, "others %g", d.others_cpu_s);
    cr_assert_float_eq(d.contention, 0.0, 1e-12);
    cr_assert_null(strstr(d.why, "other processes"), "%s", d.why);
    /* this test's own switches are the real machine's (a busy one preempts
     * it): without them the planted machine is quiet */
    d.invol_switches = 0;
    disturb_judge(&d);
    cr_assert(!d.disturbed, "%s", d.why);
    /* the same run with every CPU's worth of someone else's time on top, and
     * a fifth of a CPU stolen: disturbed, saying both */
    double cpus = (double)sysconf(_SC_NPROCESSORS_ONLN);
    fake_proc(dir, 1000 + (unsigned long)((now - own + cpus * d.wall_s) * (double)hz),
              (unsigned long)(0.2 * cpus * d.wall_s * (double)hz), 0.75);
    disturb_end(&m, 1, 1000000, false, &d);
    cr_assert(d.disturbed);
    cr_assert(d.contention > 0.5, "%g", d.contention);
    cr_assert(strstr(d.why, "other processes took"), "%s", d.why);
    cr_assert(strstr(d.why, "of the run's 1 core"), "%s", d.why);
    cr_assert(strstr(d.why, "of the CPU time stolen"), "%s", d.why);
    disturb_set_proc_dir(NULL);
    disturb_set_cpus(NULL, 0);
    char p[300];
    snprintf(p, sizeof p, "%s/stat", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/loadavg", dir);
    unlink(p);
    rmdir(dir);
}

/* A run that may use CPU 0 alone (taskset -c 0) on a 2-CPU machine: only
 * CPU 0's busy time (its "cpu0" line) is others' taking from it.  A hog on
 * CPU 1 takes nothing; the same hog on CPU 0 takes half the run's one core
 * (the aggregate line, read before, put it on the "spare" CPU 1 and the
 * run was quiet). */
Test(disturb, only_the_cpus_the_run_may_use_count)
{
    char dir[] = "/tmp/ddpbench_proc_XXXXXX", p[300];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/loadavg", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fprintf(f, "1.00 0.50 0.40 1/100 4242\n");
    fclose(f);
    disturb_set_proc_dir(dir);
    cpu_set_t zero;
    CPU_ZERO(&zero);
    CPU_SET(0, &zero);
    disturb_set_cpus(&zero, 2);
    long hz = sysconf(_SC_CLK_TCK);
    for (int on = 0; on < 2; on++) { /* the hog on CPU 1, then on CPU 0 */
        snprintf(p, sizeof p, "%s/stat", dir);
        f = fopen(p, "w");
        cr_assert_not_null(f);
        fprintf(f, "cpu  1000 0 0 100000 0 0 0 0 0 0\ncpu0 500 0 0 50000 0 0 0 0 0 0\n"
                   "cpu1 500 0 0 50000 0 0 0 0 0 0\nintr 1\n");
        fclose(f);
        disturb_mark_t m;
        disturb_begin(&m);
        cr_assert(m.stat_ok && !m.all_cpus && m.ncpus == 1);
        burn(0.2);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double own = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                     (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec - m.own0_s;
        /* the run's own time on CPU 0; a wall second of a hog's on CPU `on` */
        double wall = now_s() - m.t0;
        unsigned long c0 = 500 + (unsigned long)((own + (on ? wall : 0)) * (double)hz);
        unsigned long c1 = 500 + (unsigned long)((on ? 0 : wall) * (double)hz);
        f = fopen(p, "w");
        cr_assert_not_null(f);
        fprintf(f, "cpu  %lu 0 0 100000 0 0 0 0 0 0\ncpu0 %lu 0 0 50000 0 0 0 0 0 0\n"
                   "cpu1 %lu 0 0 50000 0 0 0 0 0 0\nintr 1\n", c0 + c1, c0, c1);
        fclose(f);
        disturb_t d;
        disturb_end(&m, 1, 1000000, false, &d);
        d.invol_switches = 0; /* the test's own, from the real machine */
        disturb_judge(&d);
        cr_assert(d.known);
        cr_assert_eq(d.cpus_online, 2);
        cr_assert_eq(d.cpus_allowed, 1);
        cr_assert_eq(d.run_cores, 1);
        if (on) {
            cr_assert(d.disturbed && d.contention > 0.5, "on CPU 0: %g: %s", d.contention, d.why);
            cr_assert(strstr(d.why, "of the run's 1 core"), "%s", d.why);
            char line[256];
            disturb_describe(&d, line, sizeof line);
            cr_assert(strstr(line, "on 1 of 2 CPUs"), "%s", line);
        } else {
            cr_assert(!d.disturbed && d.contention == 0.0, "on CPU 1: %g: %s", d.contention,
                      d.why);
        }
    }
    /* a CPU of the run's that /proc/stat does not list: not known */
    CPU_SET(5, &zero);
    disturb_set_cpus(&zero, 8);
    disturb_mark_t m;
    disturb_begin(&m);
    cr_assert(!m.stat_ok);
    disturb_set_proc_dir(NULL);
    disturb_set_cpus(NULL, 0);
    unlink(p);
    snprintf(p, sizeof p, "%s/loadavg", dir);
    unlink(p);
    rmdir(dir);
}

/* The judgement on planted figures: spare cores absorb others' time; past
 * them, the share of the run's cores taken; the switches per step. */
Test(disturb, thresholds_on_planted_figures)
{
    disturb_t d = {.known = true, .wall_s = 10.0, .cpus_online = 4, .devices = 2, .steps = 100};
    d.others_cpu_s = 19.0; /* 1.9 cores: the 2 spare ones hold it */
    disturb_judge(&d);
    cr_assert(!d.disturbed, "%s", d.why);
    cr_assert_float_eq(d.contention, 0.0, 1e-12);
    d.others_cpu_s = 25.0; /* 2.5 cores: half a core of the run's 2 */
    disturb_judge(&d);
    cr_assert(d.disturbed);
    cr_assert_float_eq(d.contention, 0.25, 1e-12);
    d.others_cpu_s = 0.0;
    d.invol_switches = 150; /* 15 a second: within */
    disturb_judge(&d);
    cr_assert(!d.disturbed, "%s", d.why);
    d.invol_switches = 1000; /* 100 a second */
    disturb_judge(&d);
    cr_assert(d.disturbed);
    cr_assert(strstr(d.why, "100 involuntary context switches a second"), "%s", d.why);
    /* a run whose own threads outnumber its cores (DP, DDP) preempts itself:
     * its switches are not another process's and do not judge it */
    d.own_switching = true;
    disturb_judge(&d);
    cr_assert(!d.disturbed, "%s", d.why);
    d.own_switching = false;
    /* without /proc/stat only the switches judge */
    d = (disturb_t){.known = false, .wall_s = 1, .cpus_online = 1, .devices = 1,
                    .others_cpu_s = 5, .steps = 10};
    disturb_judge(&d);
    cr_assert(!d.disturbed, "%s", d.why);
}
