/* app/report/report_table.c: the result table printed after every run: figures
 * on the left, one column per device for the phase split and memory. */
#include <math.h>

#include "app/report/report.h"

#define LABEL_W 22
#define COL_W 12
#define MAX_COLS 8 /* devices shown one by one; the rest are summed up in one column */

typedef struct {
    char title[32];
    int first, last; /* device slots averaged in this column */
} col_t;

static int device_columns(const run_result_t *r, col_t *cols)
{
    int n = r->ndev < MAX_COLS ? r->ndev : MAX_COLS - 1;
    for (int i = 0; i < n; i++) {
        snprintf(cols[i].title, sizeof cols[i].title, "device %d", r->dev[i].device_id);
        cols[i].first = cols[i].last = i;
    }
    if (r->ndev > MAX_COLS) {
        snprintf(cols[n].title, sizeof cols[n].title, "mean of %d", (r->ndev - n) % 1000);
        cols[n].first = n;
        cols[n].last = r->ndev - 1;
        n++;
    }
    return n;
}

/* How far from each device: its GFLOP/s, its peak's and the share. */
static void print_peak_rows(FILE *f, const run_result_t *r, const report_stats_t *s,
                            const col_t *cols, int ncol)
{
    static const char *const label[3] = {"GFLOP/s", "its peak", "share of peak"};
    for (int row = 0; row < 3; row++) {
        fprintf(f, "\n    %-*s", LABEL_W - 2, label[row]);
        for (int c = 0; c < ncol; c++) {
            double v = 0.0;
            for (int d = cols[c].first; d <= cols[c].last; d++)
                v += row == 2 ? 100.0 * s->share[d]
                              : 1e-9 * (row ? r->dev[d].peak_flops : s->flops[d]);
            v /= (double)(cols[c].last - cols[c].first + 1);
            char b[16] = "-";
            if (isfinite(v) && v > 0.0)
                snprintf(b, sizeof b, row == 2 ? "%.0f%%" : "%.1f", v);
            fprintf(f, "%*s", COL_W, b);
        }
    }
}

static void print_phase_table(FILE *f, const run_result_t *r, const report_stats_t *s)
{
    col_t cols[MAX_COLS];
    int ncol = device_columns(r, cols);
    /* the table's unit, chosen from the step time */
    double k = s->step_mean >= 10.0 ? 1.0 : s->step_mean >= 1e-3 ? 1e3 : 1e6;
    const char *unit = k == 1.0 ? "s" : k == 1e3 ? "ms" : "us";
    char head[64];
    snprintf(head, sizeof head, "time per step (%s)", unit);
    fprintf(f, "  %-*s", LABEL_W, head);
    for (int c = 0; c < ncol; c++)
        fprintf(f, "%*s", COL_W, cols[c].title);
    fprintf(f, "%*s\n", COL_W, "share");
    double sum[MAX_COLS] = {0};
    bool hidden = false;
    for (int p = 0; p < PH_COUNT; p++) {
        for (int c = 0; c < ncol; c++) /* every phase counts, shown or not */
            if (p != PH_COMM_HIDDEN)
                sum[c] += report_phase_mean(s, cols[c].first, cols[c].last, p);
        if (!report_phase_shown(s, r->ndev, (phase_t)p, k))
            continue;
        hidden |= p == PH_COMM_HIDDEN;
        char label[48];
        snprintf(label, sizeof label, "%s%s", report_phase_label(r->mode, (phase_t)p),
                 p == PH_COMM_HIDDEN ? " *" : "");
        fprintf(f, "    %-*s", LABEL_W - 2, label);
        for (int c = 0; c < ncol; c++) /* hidden time overlaps backward: not in the sum */
            fprintf(f, "%*.3f", COL_W, report_phase_mean(s, cols[c].first, cols[c].last, p) * k);
        double mean = report_phase_mean(s, 0, r->ndev - 1, p);
        fprintf(f, "%*.1f%%\n", COL_W - 1, s->step_mean > 0 ? 100.0 * mean / s->step_mean : 0.0);
    }
    fprintf(f, "    %-*s", LABEL_W - 2, hidden ? "sum of phases *" : "sum of phases");
    for (int c = 0; c < ncol; c++)
        fprintf(f, "%*.3f", COL_W, sum[c] * k);

    fprintf(f, "\n    %-*s", LABEL_W - 2, "step (wall)");
    for (int c = 0; c < ncol; c++)
        fprintf(f, "%*.3f", COL_W, s->step_mean * k);
    fprintf(f, "\n    %-*s", LABEL_W - 2, "rows");
    for (int c = 0; c < ncol; c++) {
        double rows = 0.0;
        for (int d = cols[c].first; d <= cols[c].last; d++)
            rows += s->rows_per_step[d];
        fprintf(f, "%*.0f", COL_W, rows / (double)(cols[c].last - cols[c].first + 1));
    }
    print_peak_rows(f, r, s, cols, ncol);
    bool shadowed = false;
    for (int d = 0; d < r->ndev; d++)
        shadowed |= r->dev[d].steps_shadowed > 0;
    if (shadowed) { /* --rank-samples: a rank out of data shadowed the others (join) */
        fprintf(f, "\n    %-*s", LABEL_W - 2, "steps run/shadowed");
        for (int c = 0; c < ncol; c++) {
            char v[48];
            if (cols[c].first == cols[c].last)
                snprintf(v, sizeof v, "%ld/%ld", r->dev[cols[c].first].steps_run,
                         r->dev[cols[c].first].steps_shadowed);
            else
                snprintf(v, sizeof v, "-");
            fprintf(f, "%*s", COL_W, v);
        }
    }
    if (hidden)
        fprintf(f, "\n    * comm hidden ran while backward computed: it overlaps backward's "
                   "time, so the sum leaves it out");
    fprintf(f, "\n  %-*s", LABEL_W, "peak memory");
    for (int c = 0; c < ncol; c++) {
        double m = 0.0;
        for (int d = cols[c].first; d <= cols[c].last; d++)
            m = fmax(m, (double)r->dev[d].mem_peak);
        char b[32];
        fprintf(f, "%*s", COL_W, report_fmt_bytes(b, sizeof b, m));
    }
    fputc('\n', f);
    /* what the peak held, by purpose (taken where memory is allocated) */
    for (int k = 0; k < MEM_KINDS; k++) {
        bool any = false;
        for (int d = 0; d < r->ndev; d++)
            any |= r->dev[d].mem_split[k] > 0;
        if (!any)
            continue;
        fprintf(f, "    %-*s", LABEL_W - 2, mem_kind_name((mem_kind_t)k));
        for (int c = 0; c < ncol; c++) {
            double m = 0.0;
            for (int d = cols[c].first; d <= cols[c].last; d++)
                m += (double)r->dev[d].mem_split[k];
            char b[32];
            fprintf(f, "%*s", COL_W,
                    report_fmt_bytes(b, sizeof b, m / (cols[c].last - cols[c].first + 1)));
        }
        fputc('\n', f);
    }
}

void report_result(FILE *f, const report_ctx_t *ctx, const run_result_t *r,
                   const run_result_t *ref)
{
    report_stats_t s;
    report_stats(r, ref, &s);
    char a[32], b[32], c[32], batch[128] = "";
    if (ctx && ctx->cfg) {
        const config_t *k = ctx->cfg;
        int threads = report_threads(k, r->mode);
        snprintf(batch, sizeof batch, ", global batch %d%s, %s, %d BLAS thread%s", k->batch,
                 k->accum > 1 ? " (accumulated)" : "", optim_name(k->optim.kind), threads,
                 threads == 1 ? "" : "s");
    }
    static const char *const sharded[] = {"", " (ZeRO-1: optimizer state sharded)",
                                          " (ZeRO-2: optimizer state and gradients sharded)",
                                          " (ZeRO-3: optimizer state, gradients and parameters "
                                          "sharded)"};
    int zs = strategy_words(r->mode)->ranks && r->zero >= 1 && r->zero <= 3 ? r->zero : 0;
    fprintf(f, "result: %s%s on %s, %d device%s%s, %ld steps\n", mode_name(r->mode),
            sharded[zs], backend_kind_name(r->backend),
            r->ndev, r->ndev == 1 ? "" : "s", batch, r->steps);
    fprintf(f, "  %-*s%12.1f samples/s  (%ld timed steps after %ld warm-up: %ld samples in %s)\n",
            LABEL_W, "throughput", r->samples_per_s, r->times.n, r->warmup_steps,
            r->times.timed_samples, report_fmt_time(a, sizeof a, r->times.timed_s));
    if (r->times.n > 0)
        fprintf(f, "  %-*smean %s   p50 %s   p95 %s\n", LABEL_W, "step time",
                report_fmt_time(a, sizeof a, s.step_mean), report_fmt_time(b, sizeof b, s.step_p50),
                report_fmt_time(c, sizeof c, s.step_p95));
    if (s.has_ref)
        fprintf(f, "  %-*s%.2fx single, scaling efficiency %.0f%% on %d device%s\n", LABEL_W,
                "speed-up", s.speedup, 100.0 * s.efficiency, r->ndev, r->ndev == 1 ? "" : "s");
    if (r->times.n > 0)
        print_phase_table(f, r, &s);
    const config_t *pcfg = ctx ? ctx->cfg : NULL;
    precision_t prec = pcfg ? pcfg->precision : PREC_FP32;
    if (r->backend != BACKEND_CUDA && prec == PREC_BF16)
        fprintf(f, "  %-*s%s\n", LABEL_W, "precision",
                "bf16 (autocast: bf16 GEMM inputs and activations, fp32 sums, loss, "
                "gradients, weights; rounded on the CPU)");
    if (r->backend == BACKEND_CUDA) {
        fprintf(f, "  %-*s%s\n", LABEL_W, "GEMM math",
                prec == PREC_TF32   ? "TF32 tensor cores (--precision tf32)"
                : prec == PREC_BF16 ? "bf16 tensor cores, fp32 accumulation (--precision bf16: "
                                      "autocast)"
                                    : "fp32 (cuBLAS default math)");
        if (!isnan(s.host_syncs_max))
            fprintf(f, "  %-*s%.2f per step (times the host waited for a GPU)\n", LABEL_W,
                    "host syncs", s.host_syncs_max);
    }
    report_autotune(f, ctx ? ctx->cfg : NULL, r);
    fprintf(f, "  %-*s%.6f\n", LABEL_W, "final loss", r->final_loss);
    if (r->train_accuracy >= 0.0)
        fprintf(f, "  %-*s%.2f %%  (mean loss over the data %.6f)\n", LABEL_W, "train accuracy",
                100.0 * r->train_accuracy, r->train_loss);
    fprintf(f, "  %-*ssum %+.6e  |sum| %.6e  bits %016llx\n", LABEL_W, "checksum",
            r->checksum.sum, r->checksum.abs_sum, (unsigned long long)r->checksum.bits);
    char t[32];
    if (r->replicas.checks) /* --check-replicas */
        fprintf(f, "  %-*s%s at %ld checks, %s a check\n", LABEL_W, "replicas",
                r->replicas.differed ? "differed" : "agreed", r->replicas.checks,
                report_fmt_time(t, sizeof t, r->replicas.seconds / (double)r->replicas.checks));
}
