/* app/report/report_peak.c: how far a run is from the machine (design.md,
 * section 8; docs/results.md): each device's FLOP/s against its peak and DDP's
 * bus bandwidth against the link's, as --explain's sentences and the page's bars. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>

#include "app/report/report_page.h"

static int by_time_desc(const void *a, const void *b)
{
    double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return (x < y) - (x > y);
}

/* How far device d is from its peak and why, "" when unknown. */
static void peak_sentence(char *buf, size_t len, const run_result_t *r, const report_stats_t *s,
                          int d)
{
    const device_stats_t *v = &r->dev[d];
    char how[96], t[32];
    size_t u = 0;
    buf[0] = 0;
    if (!(v->peak_flops > 0.0) || !isfinite(s->flops[d]))
        return;
    report_appendf(buf, len, &u, "%s %d computed %.1f GFLOP/s, ", strategy_words(r->mode)->member,
                   v->device_id, 1e-9 * s->flops[d]);
    buf[0] = (char)toupper((unsigned char)buf[0]);
    if (isfinite(s->share[d]))
        report_appendf(buf, len, &u, "%.0f%% of its peak", 100.0 * s->share[d]);
    else /* over REPORT_SHARE_MAX: no step outruns the arithmetic */
        report_appendf(buf, len, &u, "faster than its peak as measured (its measurement "
                                     "was interrupted twice: no share)");
    if (r->backend == BACKEND_CUDA) /* how the peak was measured */
        snprintf(how, sizeof how, "its FP32 lanes x clock, or a cuBLAS GEMM where that is faster");
    else
        snprintf(how, sizeof how, "an FMA loop at %d bits on its core", backend_cpu_vector_bits());
    report_appendf(buf, len, &u, " (%.1f GFLOP/s: %s)", 1e-9 * v->peak_flops, how);
    double gemm = s->phase[d][PH_FORWARD] + s->phase[d][PH_BACKWARD];
    if (gemm > 0.0 && r->times.n > 0)
        report_appendf(buf, len, &u, "; its forward and backward alone ran at %.0f%% of it",
                       100.0 * v->flops / (double)r->times.n / gemm / v->peak_flops);
    /* the rest of the step: the phases that do no GEMM, longest first */
    double rest[PH_COUNT][2];
    int k = 0;
    for (int p = 0; p < PH_COUNT; p++)
        if (p != PH_FORWARD && p != PH_BACKWARD && p != PH_COMM_HIDDEN && s->phase[d][p] > 0.0)
            rest[k][0] = s->phase[d][p], rest[k++][1] = p;
    qsort(rest, (size_t)k, sizeof rest[0], by_time_desc);
    double sum = 0.0;
    for (int i = 0; i < k; i++)
        sum += rest[i][0];
    if (k > 0)
        report_appendf(buf, len, &u, "; the rest of its step, %s of %s, does no GEMM:",
                       report_fmt_time(t, sizeof t, sum),
                       report_fmt_time(how, sizeof how, s->step_mean));
    for (int i = 0; i < k && i < 3; i++)
        report_appendf(buf, len, &u, "%s %s %s", i ? "," : "",
                       report_phase_label(r->mode, (phase_t)rest[i][1]),
                       report_fmt_time(t, sizeof t, rest[i][0]));
    report_appendf(buf, len, &u, ".");
}

void report_explain_peak(FILE *f, const report_ctx_t *ctx, const run_result_t *r,
                         const report_stats_t *s)
{
    char line[1024];
    for (int d = 0; d < r->ndev && d < 8; d++) {
        peak_sentence(line, sizeof line, r, s, d);
        if (line[0])
            fprintf(f, "  - %s\n", line);
    }
    double bw, link = report_bus_share(r, ctx && ctx->pred ? ctx->pred->all_reduce : NULL,
                                       ctx && ctx->cfg && ctx->cfg->zero, &bw);
    if (isfinite(link))
        fprintf(f, "  - The all-reduce moved %.2f GB/s of bus bandwidth in training, %.0f%% of "
                   "what the link carries at the same sizes (--mode comm): %s.\n",
                1e-9 * bw, 100.0 * link,
                link >= 0.8 ? "the link's speed set its time"
                            : "the rest was waiting for the other ranks or for the cores");
}

// ---------------------------------------------------------------------------
// the page: one bar per device, its share of its peak; DDP's bus bandwidth

#define PEAK_W 560 /* 100%: the value is written after it */

/* One bar: the run's label and its tail, the share (0..1) of PEAK_W, its value. */
static void bar(FILE *f, const char *cls, int y, const char *run, const char *tail,
                double share, const char *value)
{
    double w = fmin(fmax(share, 0.0), 1.0) * PEAK_W;
    fprintf(f, "<g class=\"%s\" data-share=\"%.4f\">", cls, share);
    page_label(f, y + 15, run, tail);
    fprintf(f, "<rect class=\"track\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>"
               "<rect class=\"ev c-%s\" x=\"%d\" y=\"%d\" width=\"%.2f\" height=\"%d\"><title>",
            LABEL_W, y, PEAK_W, BAR_H, cls, LABEL_W, y, w, BAR_H);
    page_esc(f, value);
    fprintf(f, "</title></rect><text class=\"val\" x=\"%d\" y=\"%d\">", LABEL_W + PEAK_W + 6,
            y + 15);
    page_esc(f, value);
    fputs("</text></g>\n", f);
}

static int peak_bars(FILE *f, const report_page_t *p)
{
    static report_stats_t st[PAGE_MAX_RUNS]; /* not on the stack (docs/faults.md) */
    const collperf_coll_t *ar = p->ctx && p->ctx->pred ? p->ctx->pred->all_reduce : NULL;
    int n = 0;
    for (int i = 0; i < p->n && i < PAGE_MAX_RUNS; i++) {
        report_stats(&p->runs[i], NULL, &st[i]);
        for (int d = 0; d < p->runs[i].ndev && d < 8; d++)
            n += isfinite(st[i].share[d]);
        double bw;
        n += isfinite(report_bus_share(&p->runs[i], ar, p->cfgs && p->cfgs[i].zero, &bw));
    }
    if (n == 0)
        return 0;
    int h = n * (BAR_H + 8) + 4, y = 2;
    page_svg_open(f, h, "share of the peak");
    for (int i = 0; i < p->n && i < PAGE_MAX_RUNS; i++) {
        const run_result_t *r = &p->runs[i];
        const char *run = page_run_label(p, i);
        char tail[48], value[96];
        for (int d = 0; d < r->ndev && d < 8; d++, y += BAR_H + 8) {
            if (!isfinite(st[i].share[d])) {
                y -= BAR_H + 8;
                continue;
            }
            snprintf(tail, sizeof tail, " %s %d", strategy_words(r->mode)->member, d);
            snprintf(value, sizeof value, "%.1f GFLOP/s, %.0f%% of %.1f", 1e-9 * st[i].flops[d],
                     100.0 * st[i].share[d], 1e-9 * r->dev[d].peak_flops);
            bar(f, "peak", y, run, tail, st[i].share[d], value);
        }
        double bw, link = report_bus_share(r, ar, p->cfgs && p->cfgs[i].zero, &bw);
        if (isfinite(link)) {
            snprintf(value, sizeof value, "%.2f GB/s, %.0f%% of the link", 1e-9 * bw,
                     100.0 * link);
            bar(f, "bus", y, run, " all-reduce", link, value);
            y += BAR_H + 8;
        }
    }
    fputs("</svg>\n", f);
    return n;
}

void page_peak_section(FILE *f, const report_page_t *p)
{
    fputs("<section id=\"peak\"><h2>How far from the machine</h2>\n"
          "<p class=\"lead\">Each device's FLOP/s over the timed steps (forward, backward and the "
          "optimizer, counted from the model) as a share of its peak, measured in the run (on a "
          "CPU an FMA loop on the device's core; on a GPU its lanes x clock, or a cuBLAS GEMM "
          "where faster); DDP's all-reduce bus bandwidth as a share of what the link carries at "
          "the same sizes (--mode comm).  What keeps a step below: docs/results.md.</p>\n",
          f);
    if (peak_bars(f, p) == 0)
        fputs("<p class=\"note\">No device's peak was measured.</p>\n", f);
    fputs("</section>\n", f);
}
