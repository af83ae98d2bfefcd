/* app/report/report_predict.c: --predict's table (app/predict/predict.h),
 * compare's predicted next to measured, and both in --json. */
#include <math.h>

#include "app/report/report.h"

#define MISS_PCT 20.0

static const char *fmt_t(char *b, size_t n, double s) { return report_fmt_time(b, n, s); }

double report_rate(const predict_in_t *in, double step_s)
{
    return step_s > 0 ? (double)in->batch * (in->accum > 0 ? in->accum : 1) / step_s : 0.0;
}

static void fit_line(FILE *f, const char *name, const collperf_coll_t *c)
{
    double a, b;
    if (c && collperf_fit(c, &a, &b))
        fprintf(f, "  %s %.2f us + bytes / %.2f GB/s", name, 1e6 * a, b > 0 ? 1e-9 / b : INFINITY);
    else
        fprintf(f, "  %s not measured", name);
}

void report_predict_table(FILE *f, const predict_in_t *in, const predict_row_t *rows)
{
    char a[32], b[32], c[32];
    fprintf(f, "\npredict: the alpha-beta model from single's phases (%s per step",
            fmt_t(a, sizeof a, rows[0].ddp_step_s));
    if (in->phase_s[PH_DESCHED] > 0.05 * rows[0].ddp_step_s) /* a busy machine's: not the model's */
        fprintf(f, "; its %s descheduled left out", fmt_t(a, sizeof a, in->phase_s[PH_DESCHED]));
    fprintf(f, ") and the collectives measured on %d rank%s (--mode comm", in->k0,
            in->k0 == 1 ? "" : "s");
    if (in->benches > 1)
        fprintf(f, "; each op's quickest over %d benches, %.0f%% apart at the largest size",
                in->benches, 100.0 * in->bench_spread);
    fprintf(f, "):\n");
    fit_line(f, "all-reduce", in->all_reduce);
    fit_line(f, ";  broadcast", in->broadcast);
    fit_line(f, ";  reduce", in->reduce);
    fprintf(f, "\n  %-8s %12s %14s %9s %12s %14s %9s %14s\n", "devices", "dp step", "dp samples/s",
            "speed-up", "ddp step", "ddp samples/s", "speed-up", "ddp all-reduce");
    double base = report_rate(in, rows[0].ddp_step_s);
    for (int k = 0; k < PREDICT_MAX_DEVICES; k++) {
        const predict_row_t *r = &rows[k];
        double tdp = report_rate(in, r->dp_step_s), tddp = report_rate(in, r->ddp_step_s);
        fprintf(f, "  %-8d %12s %14.1f %8.2fx %12s %14.1f %8.2fx %14s\n", r->devices,
                fmt_t(a, sizeof a, r->dp_step_s), tdp, base > 0 ? tdp / base : 0.0,
                fmt_t(b, sizeof b, r->ddp_step_s), tddp, base > 0 ? tddp / base : 0.0,
                fmt_t(c, sizeof c, r->ddp_comm_s));
    }
    fprintf(f, "  (ring all-reduce; DP copies through device 0's link one after another; no "
               "shared cores, no barrier wake-ups, no busy machine: see README.md)\n");
}

/* The phase of device 0 the model missed most, each wait less the machine's
 * share (the model's is a quiet machine); *machine, *step: the run's. */
static int missed_phase(const run_result_t *r, const double *pred, double *got, double *want,
                        double *machine, double *step)
{
    static report_stats_t s; /* 26 KB: not on the stack (docs/faults.md) */
    report_stats(r, NULL, &s);
    report_stats_apportion(&s, r->ndev, NULL);
    *machine = s.phase[0][PH_DESCHED];
    *step = s.step_mean;
    int best = -1;
    double worst = 0.0;
    for (int p = 0; p < PH_COUNT; p++) {
        if (p == PH_COMM_HIDDEN || p == PH_SKEW || p == PH_DESCHED) /* not the model's */
            continue;
        double m = s.phase[0][p], d = fabs(m - pred[p]);
        if (d > worst) {
            worst = d;
            best = p;
            *got = m;
            *want = pred[p];
        }
    }
    return best;
}

/* The prediction for run r's mode and device count (NULL for single). */
static const double *pred_of(const run_result_t *r, const predict_row_t *rows, double *step)
{
    const strategy_words_t *w = strategy_words(r->mode);
    if (r->ndev < 1 || r->ndev > PREDICT_MAX_DEVICES || w->reference)
        return NULL;
    const predict_row_t *row = &rows[r->ndev - 1];
    *step = w->lead ? row->dp_step_s : row->ddp_step_s;
    return w->lead ? row->dp_phase_s : row->ddp_phase_s;
}

void report_predicted(FILE *f, const run_result_t *runs, int n, const predict_row_t *rows)
{
    /* each mode's predicted step against measured; then each mode off by more
     * than MISS_PCT, naming the phase the model missed most */
    char a[32], b[32];
    int cols = 0;
    double got, want, mach, m;
    for (int i = 0; i < n; i++) {
        double step;
        const double *pred = pred_of(&runs[i], rows, &step);
        if (!pred || runs[i].times.n == 0)
            continue;
        missed_phase(&runs[i], pred, &got, &want, &mach, &m);
        fprintf(f, "%s%s %s (measured %.2fx", cols++ ? ", " : "\n  predicted step (alpha-beta "
                "model, --predict): ", mode_name(runs[i].mode), fmt_t(a, sizeof a, step),
                step > 0 ? m / step : 0.0);
        if (mach > 0.05 * m && step > 0) /* the model's is a quiet machine */
            fprintf(f, "; %.2fx without the machine's %s, which the model leaves out",
                    (m - mach) / step, fmt_t(a, sizeof a, mach));
        fputc(')', f);
    }
    if (cols == 0)
        return;
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        double step;
        const double *pred = pred_of(&runs[i], rows, &step);
        if (!pred || step <= 0 || runs[i].times.n == 0)
            continue;
        int p = missed_phase(&runs[i], pred, &got, &want, &mach, &m);
        double off = 100.0 * (m - mach - step) / step;
        if (fabs(off) <= MISS_PCT)
            continue;
        fprintf(f, "  %s's step less the machine's time is %+.0f%% off; the model missed %s on "
                   "device 0 most: %s, predicted %s\n", mode_name(runs[i].mode), off,
                p >= 0 ? report_phase_label(runs[i].mode, (phase_t)p) : "?",
                fmt_t(a, sizeof a, got), fmt_t(b, sizeof b, want));
    }
}

static void fit_json(cJSON *o, const char *k, const collperf_coll_t *c)
{
    double a, b;
    if (c && collperf_fit(c, &a, &b)) {
        cJSON *x = cJSON_AddObjectToObject(o, k);
        cJSON_AddNumberToObject(x, "alpha_s", a);
        cJSON_AddNumberToObject(x, "beta_s_per_byte", b);
    } else {
        cJSON_AddNullToObject(o, k);
    }
}

cJSON *report_json_predict(const predict_in_t *in, const predict_row_t *rows,
                           const run_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", "alpha-beta");
    cJSON_AddNumberToObject(o, "collectives_ranks", in->k0);
    fit_json(o, "all_reduce", in->all_reduce);
    fit_json(o, "broadcast", in->broadcast);
    fit_json(o, "reduce", in->reduce);
    cJSON *arr = cJSON_AddArrayToObject(o, "rows");
    for (int k = 0; k < PREDICT_MAX_DEVICES; k++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "devices", rows[k].devices);
        cJSON_AddNumberToObject(x, "dp_step_s", rows[k].dp_step_s);
        cJSON_AddNumberToObject(x, "ddp_step_s", rows[k].ddp_step_s);
        cJSON_AddNumberToObject(x, "dp_samples_per_s", report_rate(in, rows[k].dp_step_s));
        cJSON_AddNumberToObject(x, "ddp_samples_per_s", report_rate(in, rows[k].ddp_step_s));
        cJSON_AddNumberToObject(x, "ddp_all_reduce_s", rows[k].ddp_comm_s);
        cJSON_AddNumberToObject(x, "ddp_comm_exposed_s", rows[k].ddp_phase_s[PH_COMM_EXPOSED]);
        cJSON_AddItemToArray(arr, x);
    }
    double step;
    const double *pred = r ? pred_of(r, rows, &step) : NULL;
    if (pred && r->times.n > 0) {
        cJSON *t = cJSON_AddObjectToObject(o, "this_run");
        double m = r->times.timed_s / r->times.n;
        cJSON_AddNumberToObject(t, "predicted_step_s", step);
        cJSON_AddNumberToObject(t, "measured_step_s", m);
        cJSON_AddNumberToObject(t, "measured_over_predicted", step > 0 ? m / step : 0.0);
        cJSON *ph = cJSON_AddObjectToObject(t, "predicted_phases_s_per_step");
        for (int p = 0; p < PH_COUNT; p++)
            cJSON_AddNumberToObject(ph, phase_key((phase_t)p), pred[p]);
        double got, want, mach, ms;
        int p = missed_phase(r, pred, &got, &want, &mach, &ms);
        bool missed = p >= 0 && step > 0 && fabs(ms - mach - step) / step > MISS_PCT / 100.0;
        report_json_str(t, "missed_phase", missed ? phase_key((phase_t)p) : NULL);
    } else {
        cJSON_AddNullToObject(o, "this_run");
    }
    return o;
}
