/* app/report/report_repeat.c: --repeat N: the median and 95% interval of every
 * figure over the N runs, as a table and as --json's "repeat" object. */
#include <math.h>

#include "app/report/report.h"

static cJSON *interval_json(interval_t iv)
{
    cJSON *o = cJSON_CreateObject();
    report_json_num(o, "median", iv.median);
    report_json_num(o, "mean", iv.mean);
    report_json_num(o, "lo", iv.lo);
    report_json_num(o, "hi", iv.hi);
    return o;
}

cJSON *report_json_repeat(const repeat_t *r)
{
    if (!r || r->n < 2)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "runs", r->n);
    cJSON_AddItemToObject(o, "throughput_samples_per_s",
                          interval_json(repeat_interval(r, FIG_THROUGHPUT)));
    cJSON_AddItemToObject(o, "step_time_s_mean", interval_json(repeat_interval(r, FIG_STEP_MEAN)));
    cJSON_AddItemToObject(o, "mem_peak_bytes_max", interval_json(repeat_interval(r, FIG_MEM_PEAK)));
    /* the gate's figures: one interrupted step cannot move a run's median */
    cJSON_AddItemToObject(o, "step_time_s_median", interval_json(repeat_interval(r, FIG_STEP_MEDIAN)));
    cJSON_AddItemToObject(o, "median_throughput_samples_per_s",
                          interval_json(repeat_interval(r, FIG_MEDIAN_THROUGHPUT)));
    /* what --baseline judges on the CPU; null on a GPU */
    interval_t w = repeat_interval(r, FIG_WORK_P10);
    cJSON_AddItemToObject(o, "work_cpu_s_p10", isfinite(w.mean) ? interval_json(w) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "disturbed_runs", repeat_disturbed(r, NULL));
    cJSON_AddNumberToObject(o, "retaken", r->retaken);
    cJSON *ph = cJSON_AddObjectToObject(o, "phases_s_per_step");
    for (int p = 0; p < PH_COUNT; p++)
        cJSON_AddItemToObject(ph, phase_key((phase_t)p),
                              interval_json(repeat_interval(r, FIG_PHASE0 + p)));
    cJSON *every = cJSON_AddArrayToObject(o, "every_run");
    for (int i = 0; i < r->n; i++) {
        const run_summary_t *s = &r->run[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "throughput_samples_per_s", s->samples_per_s);
        cJSON_AddNumberToObject(e, "step_time_s_mean", s->step_mean_s);
        cJSON_AddNumberToObject(e, "step_time_s_median", s->step_median_s);
        cJSON_AddNumberToObject(e, "mem_peak_bytes_max", s->mem_peak_bytes);
        report_json_num(e, "work_cpu_s_p10", s->work_p10);
        cJSON *rp = cJSON_AddObjectToObject(e, "phases_s_per_step");
        for (int p = 0; p < PH_COUNT; p++)
            cJSON_AddNumberToObject(rp, phase_key((phase_t)p), s->phase_s[p]);
        char bits[24];
        snprintf(bits, sizeof bits, "%016llx", (unsigned long long)s->checksum_bits);
        cJSON_AddStringToObject(e, "checksum_bits", bits);
        cJSON_AddItemToObject(e, "machine", report_json_machine(&s->machine));
        cJSON_AddItemToArray(every, e);
    }
    return o;
}

/* "1234.5 -2.4..+2.5%": the median and the interval's ends relative to it (the
 * ends themselves, "0.001 -0.012..0.023", when one is over 100% off it). */
static void cell(char *buf, size_t n, interval_t iv, double scale, const char *fmt)
{
    char m[32], a[32], b[32];
    snprintf(m, sizeof m, fmt, iv.median * scale);
    double lo = iv.lo / iv.median - 1.0, hi = iv.hi / iv.median - 1.0;
    if (!isfinite(iv.lo) || !isfinite(iv.hi)) {
        snprintf(buf, n, "%s", m);
    } else if (iv.median == 0.0 || fabs(lo) > 1.0 || fabs(hi) > 1.0) {
        snprintf(a, sizeof a, fmt, iv.lo * scale);
        snprintf(b, sizeof b, fmt, iv.hi * scale);
        snprintf(buf, n, "%s %s..%s", m, a, b);
    } else {
        snprintf(buf, n, "%s %+.1f..%+.1f%%", m, 100.0 * lo, 100.0 * hi);
    }
}

/* One row of the table: label, then each mode's cell of figure fig. */
static void row(FILE *f, const char *label, const repeat_t *const *runs, int nmodes, int fig,
                double scale, const char *fmt)
{
    char c[112];
    fprintf(f, "    %-24s", label);
    for (int i = 0; i < nmodes; i++) {
        cell(c, sizeof c, repeat_interval(runs[i], fig), scale, fmt);
        fprintf(f, " %23s", c);
    }
    fputc('\n', f);
}

void report_repeat(FILE *f, const repeat_t *const *runs, const mode_t_ *modes, int nmodes)
{
    if (nmodes < 1 || !runs[0] || runs[0]->n < 2)
        return;
    /* the phase table's unit, from the slowest mode's step */
    double slowest = 0.0;
    for (int i = 0; i < nmodes; i++)
        slowest = fmax(slowest, repeat_interval(runs[i], FIG_STEP_MEAN).median);
    double k = slowest >= 1e-3 ? 1e3 : 1e6;
    fprintf(f, "\n  over %d runs: the median, and the 95%% interval relative to it (Student's t; on "
            "the logs for a figure that is never 0)\n", runs[0]->n);
    fprintf(f, "    %-24s", "");
    for (int i = 0; i < nmodes; i++)
        fprintf(f, " %23s", mode_name(modes[i]));
    fputc('\n', f);
    /* the run's throughput: timed samples over timed seconds (the mean step) */
    row(f, "throughput, mean step/s", runs, nmodes, FIG_THROUGHPUT, 1.0, "%.1f");
    row(f, k == 1e3 ? "step time mean (ms)" : "step time mean (us)", runs, nmodes, FIG_STEP_MEAN,
        k, "%.3f");
    for (int p = 0; p < PH_COUNT; p++) {
        bool any = false;
        for (int i = 0; i < nmodes; i++)
            any |= fabs(repeat_interval(runs[i], FIG_PHASE0 + p).median) * k >= 5e-4;
        if (!any)
            continue;
        char label[48];
        snprintf(label, sizeof label, "%s (%s)", phase_name((phase_t)p), k == 1e3 ? "ms" : "us");
        row(f, label, runs, nmodes, FIG_PHASE0 + p, k, "%.3f");
    }
    row(f, "peak memory (MiB)", runs, nmodes, FIG_MEM_PEAK, 1.0 / 1048576.0, "%.2f");
    /* the runs a busy machine disturbed, kept among them: said here too */
    for (int i = 0; i < nmodes; i++) {
        double cont;
        int nd = repeat_disturbed(runs[i], &cont);
        if (nd > 0)
            fprintf(f, "  note: %d of the %d %s runs were disturbed (other processes took %.0f%% of "
                       "their cores, the median), kept: the intervals hold the busy machine's "
                       "time\n", nd, runs[i]->n, mode_name(modes[i]), 100.0 * cont);
    }
}
