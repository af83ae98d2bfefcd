/* app/report/report_csv.c: --csv, a header and one row per run, for spreadsheets
 * and bench/sweep.sh.  Fields never contain commas (layers are "64-512-10");
 * unknown values are empty. */
#include <math.h>

#include "app/report/report.h"

void report_csv_header(FILE *f)
{
    fputs("mode,backend,devices,model,layers,batch,accum,steps,warmup_steps,timed_samples,"
          "throughput_samples_per_s,step_mean_s,step_p50_s,step_p95_s,speedup_vs_single,"
          "scaling_efficiency,max_rel_diff_vs_single,final_loss,train_accuracy,"
          "mem_peak_max_bytes,checksum_sum,checksum_bits",
          f);
    for (int p = 0; p < PH_COUNT; p++)
        fprintf(f, ",dev0_%s", phase_key((phase_t)p));
    for (int p = 0; p < PH_COUNT; p++)
        fprintf(f, ",mean_%s", phase_key((phase_t)p));
    fputs(",optimizer,threads", f);
    /* --repeat's intervals and the provenance, so a row compared later says
     * how sure it was and where and when it ran */
    fputs(",runs,throughput_median,throughput_lo,throughput_hi,step_mean_median_s,step_mean_lo_s,"
          "step_mean_hi_s,revision,host,time_utc,loadavg1",
          f);
    fputc('\n', f);
}

/* a CSV field: no commas, no line breaks */
static void text(FILE *f, const char *s)
{
    fputc(',', f);
    for (; *s; s++)
        fputc(*s == ',' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

static void num(FILE *f, double v, bool known)
{
    if (known && isfinite(v))
        fprintf(f, ",%.9g", v);
    else
        fputc(',', f);
}

void report_csv_row(FILE *f, const report_ctx_t *ctx, const config_t *run_cfg,
                    const run_result_t *r, const run_result_t *ref, const repeat_t *rep)
{
    report_stats_t s;
    report_stats(r, ref, &s);
    char layers[256] = "";
    if (ctx && ctx->spec)
        report_layers(layers, sizeof layers, ctx->spec);
    bool self = ref == r;
    fprintf(f, "%s,%s,%d,%s,%s,%d,%d,%ld,%ld,%ld", mode_name(r->mode),
            backend_kind_name(r->backend), r->ndev,
            run_cfg->model_name[0] ? run_cfg->model_name : "custom", layers, run_cfg->batch,
            run_cfg->accum, r->steps, r->warmup_steps, r->times.timed_samples);
    num(f, r->samples_per_s, true);
    num(f, s.step_mean, true);
    num(f, s.step_p50, true);
    num(f, s.step_p95, true);
    num(f, self ? 1.0 : s.speedup, self || s.has_ref);
    num(f, self ? 1.0 : s.efficiency, self || s.has_ref);
    num(f, self ? 0.0 : s.max_rel, self || s.params_compared);
    num(f, r->final_loss, true);
    num(f, r->train_accuracy, r->train_accuracy >= 0.0);
    fprintf(f, ",%zu,%.9e,%016llx", s.mem_peak_max, r->checksum.sum,
            (unsigned long long)r->checksum.bits);
    for (int p = 0; p < PH_COUNT; p++)
        num(f, r->ndev > 0 ? s.phase[0][p] : 0.0, true);
    for (int p = 0; p < PH_COUNT; p++)
        num(f, report_phase_mean(&s, 0, r->ndev - 1, p), true);
    fprintf(f, ",%s,%d", optim_name(run_cfg->optim.kind),
            report_threads(run_cfg, r->mode));
    bool many = rep && rep->n > 1;
    fprintf(f, ",%d", many ? rep->n : 1);
    interval_t tp = many ? repeat_interval(rep, FIG_THROUGHPUT) : (interval_t){0};
    interval_t st = many ? repeat_interval(rep, FIG_STEP_MEAN) : (interval_t){0};
    num(f, tp.median, many);
    num(f, tp.lo, many);
    num(f, tp.hi, many);
    num(f, st.median, many);
    num(f, st.lo, many);
    num(f, st.hi, many);
    text(f, report_revision());
    text(f, report_host());
    text(f, report_time_utc());
    text(f, report_loadavg1());
    fputc('\n', f);
}
