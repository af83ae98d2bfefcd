/* app/report/report_html.c: --report FILE.html (report_page.h): the verdict,
 * the figures and the numbers in one file with its style and script inlined;
 * its Content-Security-Policy forbids every request, so it opens offline.
 * Written through base/atomic_file.h: a reader never sees half a page. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "common/base/atomic_file.h"
#include "app/report/report_page.h"

int report_page_check(const char *path, char *err)
{
    int rc = afile_check(path, err);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "--report %s", path);
}

/* At most `max` sentences of text, escaped, in a paragraph. */
static void sentences(FILE *f, const char *text, int max)
{
    fputs("<p class=\"verdict\">", f);
    int n = 0;
    const char *s = text;
    while (*s && n < max) {
        while (*s == ' ' || *s == '\n')
            s++;
        const char *e = s;
        /* a sentence ends at ". ", "; " is not an end; "e.g. " is rare here */
        while (*e && !((*e == '.' || *e == '!' || *e == '?') && (e[1] == ' ' || e[1] == '\n' || !e[1])))
            e++;
        if (*e)
            e++;
        if (e == s)
            break;
        char buf[2048];
        size_t len = (size_t)(e - s) < sizeof buf - 1 ? (size_t)(e - s) : sizeof buf - 1;
        memcpy(buf, s, len);
        buf[len] = 0;
        for (char *q = buf; *q; q++)
            if (*q == '\n')
                *q = ' ';
        if (n)
            fputc(' ', f);
        page_esc(f, buf);
        n++;
        s = e;
    }
    fputs("</p>\n", f);
}

// ---------------------------------------------------------------------------
// the sections

static void verdict(FILE *f, const report_page_t *p)
{
    char why[4096] = "";
    if (p->story)
        snprintf(why, sizeof why, "%s", p->story);
    else if (p->n > 1) /* compare's own sentences, at most three: the terminal's, told
                          apart by the noise (--repeat's intervals, or one run's spread) */
        report_compare_verdict(why, sizeof why, p->ctx, p->runs, p->n);
    else if (p->n == 1 && !strategy_words(p->runs[0].mode)->reference && p->ctx && p->ctx->pred)
        report_run_reason(why, sizeof why, p->ctx, &p->runs[0]);
    if (!why[0] && p->n >= 1) {
        /* one run: its throughput and where its step goes */
        const run_result_t *r = &p->runs[0];
        static report_stats_t st; /* 26 KB: not on the stack (docs/faults.md) */
        report_stats(r, NULL, &st);
        report_stats_apportion(&st, r->ndev, NULL); /* a wait's machine share is no phase's */
        int big = PH_FORWARD;
        for (int ph = 0; ph < PH_COUNT; ph++)
            if (ph != PH_COMM_HIDDEN && ph != PH_DESCHED && st.phase[0][ph] > st.phase[0][big])
                big = ph;
        char a[32], b[32];
        size_t used = 0;
        report_appendf(why, sizeof why, &used,
                       "%s on %d device%s trained at %.1f samples/s, a step of %s (median). "
                       "Its longest phase on device 0 is %s, %s per step.",
                       page_run_label(p, 0), r->ndev, r->ndev == 1 ? "" : "s", r->samples_per_s,
                       report_fmt_time(a, sizeof a, st.step_p50),
                       report_phase_label(r->mode, (phase_t)big),
                       report_fmt_time(b, sizeof b, st.phase[0][big]));
        if (st.phase[0][PH_DESCHED] > 0.05 * st.step_mean)
            report_appendf(why, sizeof why, &used, " The machine took %s of its step (descheduled, "
                           "or waiting for a device that was).",
                           report_fmt_time(a, sizeof a, st.phase[0][PH_DESCHED]));
        if (!strategy_words(r->mode)->reference)
            report_appendf(why, sizeof why, &used,
                           " Run --mode compare to see it against single and the other mode.");
    }
    fputs("<section id=\"verdict\"><h2>Verdict</h2>\n", f);
    sentences(f, why, 4); /* three, and the machine's first when it decided */
    fputs("</section>\n", f);
}

static void legend(FILE *f, const char *title, const char *const *cls, const char *const *names,
                   int n)
{
    fprintf(f, "<ul class=\"legend\" aria-label=\"%s\">", title);
    for (int i = 0; i < n; i++)
        fprintf(f, "<li><span class=\"sw %s\"></span>%s</li>", cls[i], names[i]);
    fputs("</ul>\n", f);
}

static void timeline_section(FILE *f, const report_page_t *p)
{
    fputs("<section id=\"timeline\"><h2>One step, to scale</h2>\n"
          "<p class=\"lead\">Each run's timed step whose wall time is closest to the run's "
          "median step (never a warm-up step, which carries one-time costs), every device on "
          "one time axis.  A device has a lane for its compute and one for its transfers: DP's "
          "copies through device 0, DDP's bucket all-reduces on the comm thread (CPU) or "
          "stream (GPU).  A bucket's light part is the time from its ready point (its last "
          "gradient written) to the start of its all-reduce; what overlaps backward above it "
          "is hidden, what runs after backward is the exposed tail.  Dark: the device's "
          "thread was ready but another process had its core (descheduled: the machine's time, "
          "not the strategy's; where in its phase is not known, so it is drawn at the phase's "
          "end).  Pale: skew, before a device's step began or after it ended while another "
          "device was still in it.  The dashed line is the step's end.</p>\n",
          f);
    static const char *const cls[] = {"c-data",     "c-h2d",       "c-scatter", "c-replicate",
                                      "c-forward",  "c-loss",      "c-backward", "c-exposed",
                                      "c-optim",    "c-idle",      "c-allreduce", "c-gather",
                                      "c-reduce",   "queued",      "c-desched",  "c-skew"};
    static const char *const names[] = {"data",       "host to device",
                                        "scatter",    "replicate",
                                        "forward",    "loss (DP: gather + loss)",
                                        "backward",   "comm exposed (DP: reduce)",
                                        "optimizer",  "idle",
                                        "all-reduce", "gather",
                                        "reduce",     "bucket waiting to start",
                                        "descheduled (waiting for a core)",
                                        "skew (not in this device's step)"};
    legend(f, "timeline colours", cls, names, (int)(sizeof cls / sizeof cls[0]));
    if (svg_timelines(f, p) == 0)
        fputs("<p class=\"note\">No step was recorded.</p>\n", f);
    fputs("</section>\n", f);
}

static void phases_section(FILE *f, const report_page_t *p)
{
    fputs("<section id=\"phases\"><h2>Where a step's time goes</h2>\n"
          "<p class=\"lead\">The phases per timed step (mean), one bar per column of compare's "
          "table: a device of its own, or device 0 and the mean of the others.  The hatched "
          "strip over backward is the communication it hid.</p>\n",
          f);
    if (svg_phase_bars(f, p) == 0)
        fputs("<p class=\"note\">No timed step.</p>\n", f);
    fputs("</section>\n", f);
}

static void memory_section(FILE *f, const report_page_t *p)
{
    fputs("<section id=\"memory\"><h2>Peak memory by purpose</h2>\n"
          "<p class=\"lead\">What each device held at its peak.  DP's device 0 holds the "
          "optimizer state, the whole batch and the gathered outputs; DDP's ranks hold equal "
          "shares (with --zero1, each 1/world of the optimizer state).</p>\n",
          f);
    const char *cls[MEM_KINDS], *names[MEM_KINDS];
    static const char *const mcls[] = {"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"};
    int k = 0;
    for (int m = 0; m < MEM_KINDS && m < 8; m++, k++) {
        cls[k] = mcls[m];
        names[k] = mem_kind_name((mem_kind_t)m);
    }
    legend(f, "memory colours", cls, names, k);
    if (svg_memory_bars(f, p) == 0)
        fputs("<p class=\"note\">No memory was counted.</p>\n", f);
    fputs("</section>\n", f);
}

/* The mechanism in plain words: what the figures of this page are evidence
 * of, stated once, whatever this run measured (on a busy CPU a run may not
 * show it; the model below and a GPU run do). */
static void why_paragraph(FILE *f)
{
    fputs("<p class=\"why\" id=\"why-ddp\"><b>Why DDP wins on GPUs.</b> Every step DP copies "
          "the parameters from device 0 to each other device, scatters the batch from it, gathers "
          "the outputs back to it, computes the loss there, and sums every device's gradients "
          "onto it, where the optimizer steps alone; device 0's copies go out one after "
          "another, so its share of the step grows with the device count. DDP copies no "
          "parameters after the start: each device reads its own shard, keeps its own optimizer, "
          "and averages gradients with a ring all-reduce in buckets that runs while backward "
          "is still computing, so only its tail is exposed. On a CPU, where DP's replicas are C "
          "threads without Python's GIL and a copy is a memcpy, a run may not show it: the "
          "columns above (device 0's serial work) and the model below do.</p>\n",
          f);
}

/* --hardware's GPU box beside the CPU's measured model: the chart, what it
 * was checked against and the sentence naming DP's slower term. */
static void gpu_section(FILE *f, const gpu_lesson_t *g)
{
    char why[512];
    report_gpu_sentence(why, sizeof why, g);
    fputs("<div class=\"gpu-lesson\" id=\"gpu-lesson\"><h3>Modelled for ", f);
    page_esc(f, g->hw.name);
    fputs(" (", f);
    page_esc(f, g->wl.name);
    fputs(", not measured)</h3>\n<p class=\"note\">", f);
    page_esc(f, g->check[0] ? g->check : "no published case on this box");
    fputs("</p>\n", f);
    svg_gpu(f, g);
    fputs("<p class=\"note\">", f);
    page_esc(f, why);
    fputs("</p></div>\n", f);
}

static void predict_section(FILE *f, const report_page_t *p)
{
    fputs("<section id=\"predict\"><h2>On 1 to 8 devices (--predict)</h2>\n", f);
    why_paragraph(f);
    if (!p->pred || !p->rows || p->pred->k0 < 2) {
        fputs("<p class=\"note\">Not measured: run with --predict (compare on two or more "
              "devices measures it too) to see DP's and DDP's throughput predicted on 1 to 8 "
              "devices from single's phases and the measured collectives.</p>\n",
              f);
    } else {
        fprintf(f, "<h3>Measured on this CPU</h3><p class=\"lead\">Throughput predicted by the "
                   "alpha-beta model (single's phases per step, the collectives measured on %d "
                   "ranks); the squares are what was measured%s.</p>\n",
                p->pred->k0,
                p->reps && p->reps[0].n > 1 ? ", with the 95% interval over --repeat's runs" : "");
        /* the squares hold a busy machine's time, the model a quiet machine's */
        for (int i = 0; i < p->n; i++) {
            static report_stats_t st; /* 26 KB: not on the stack (docs/faults.md) */
            report_stats(&p->runs[i], NULL, &st);
            report_stats_apportion(&st, p->runs[i].ndev, NULL);
            char a[32], b[32];
            if (st.phase[0][PH_DESCHED] > 0.05 * st.step_mean)
                fprintf(f, "<p class=\"note\">Busy machine: %s's measured step holds %s of the "
                           "machine's time (descheduled, or waiting for a device that was) in "
                           "its %s, which the model leaves out.</p>\n", page_run_label(p, i),
                        report_fmt_time(a, sizeof a, st.phase[0][PH_DESCHED]),
                        report_fmt_time(b, sizeof b, st.step_mean));
        }
        svg_predict(f, p);
    }
    if (p->gpu)
        gpu_section(f, p->gpu);
    fputs("</section>\n", f);
}

/* A figure with its --repeat interval when there is one. */
static void cell_iv(FILE *f, const report_page_t *p, int i, int fig, const char *fmt, double v,
                    double k)
{
    fputs("<td>", f);
    fprintf(f, fmt, v * k);
    if (p->reps && p->reps[i].n > 1) {
        interval_t iv = repeat_interval(&p->reps[i], fig);
        if (isfinite(iv.lo)) {
            fputs("<br><small>", f);
            fprintf(f, fmt, iv.lo * k);
            fputs(" to ", f);
            fprintf(f, fmt, iv.hi * k);
            fprintf(f, " (95%%, %d runs)</small>", iv.n);
        }
    }
    fputs("</td>", f);
}

static void numbers_section(FILE *f, const report_page_t *p)
{
    const run_result_t *ref = NULL; /* the single run, the figures' reference */
    for (int i = 0; i < p->n && !ref; i++)
        if (strategy_words(p->runs[i].mode)->reference)
            ref = &p->runs[i];
    static report_stats_t st[PAGE_MAX_RUNS]; /* 52 KB: not on the stack (docs/faults.md) */
    for (int i = 0; i < p->n && i < PAGE_MAX_RUNS; i++)
        report_stats(&p->runs[i], ref, &st[i]);
    fputs("<section id=\"numbers\"><h2>The numbers</h2>\n<table class=\"num\"><thead><tr><th></th>",
          f);
    for (int i = 0; i < p->n; i++) {
        fputs("<th>", f);
        page_esc(f, page_run_label(p, i));
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    char b[64];
#define ROW(label, ...)                                                                          \
    do {                                                                                         \
        fprintf(f, "<tr><th>%s</th>", label);                                                    \
        for (int i = 0; i < p->n; i++) {                                                         \
            const run_result_t *r = &p->runs[i];                                                 \
            const report_stats_t *s = &st[i];                                                    \
            (void)r, (void)s;                                                                    \
            __VA_ARGS__;                                                                         \
        }                                                                                        \
        fputs("</tr>\n", f);                                                                     \
    } while (0)
    ROW("devices", fprintf(f, "<td>%d</td>", r->ndev));
    ROW("throughput (samples/s)", cell_iv(f, p, i, FIG_THROUGHPUT, "%.1f", r->samples_per_s, 1.0));
    if (ref) {
        ROW("speed-up vs single", fprintf(f, "<td>%.2fx</td>", r == ref ? 1.0 : s->speedup));
        ROW("scaling efficiency",
            fprintf(f, "<td>%.0f%%</td>", 100.0 * (r == ref ? 1.0 : s->efficiency)));
    }
    ROW("step time mean (ms)", cell_iv(f, p, i, FIG_STEP_MEAN, "%.3f", s->step_mean, 1e3));
    ROW("step time p50", fprintf(f, "<td>%s</td>", report_fmt_time(b, sizeof b, s->step_p50)));
    ROW("step time p95", fprintf(f, "<td>%s</td>", report_fmt_time(b, sizeof b, s->step_p95)));
    ROW("timed steps", fprintf(f, "<td>%ld of %ld</td>", r->times.n, r->steps));
    ROW("peak memory (max device)",
        fprintf(f, "<td>%s</td>", report_fmt_bytes(b, sizeof b, (double)s->mem_peak_max)));
    ROW("final loss", fprintf(f, "<td>%.6f</td>", r->final_loss));
    ROW("checksum (sum)", fprintf(f, "<td>%.5e</td>", r->checksum.sum));
    if (ref)
        ROW("params vs single",
            fprintf(f, "<td>%s</td>",
                    r == ref ? "-" : !s->params_compared ? "n/a" : s->agree ? "agree" : "DIFFER"));
#undef ROW
    fputs("</tbody></table>\n", f);
    /* compare's notes (the CPU's limits, a busy machine), then each run's (i >= 0) */
    for (int i = p->n > 1 && !p->story ? -1 : 0; p->ctx && i < p->n; i++) {
        char notes[8][256];
        int k = i < 0 ? report_compare_notes(p->ctx, p->runs, p->n, notes, 4)
                      : report_notes_of(p->ctx, &p->runs[i], notes, 8);
        for (int j = 0; j < k; j++) {
            fputs("<p class=\"note\">", f);
            if (i >= 0 && p->n > 1) {
                page_esc(f, page_run_label(p, i));
                fputs(": ", f);
            }
            page_esc(f, notes[j]);
            fputs("</p>\n", f);
        }
    }
    fputs("</section>\n", f);
}

static void header(FILE *f, const report_page_t *p)
{
    const config_t *c = p->ctx ? p->ctx->cfg : NULL;
    fputs("<header><h1>ddpbench: ", f);
    page_esc(f, p->title ? p->title : c ? mode_name(c->mode) : "run");
    fputs("</h1>\n<p class=\"sub\">", f);
    if (p->n) {
        const run_result_t *r = &p->runs[0];
        int ndev = 0;
        for (int i = 0; i < p->n; i++)
            ndev = p->runs[i].ndev > ndev ? p->runs[i].ndev : ndev;
        char layers[128] = "";
        if (p->ctx && p->ctx->spec)
            report_layers(layers, sizeof layers, p->ctx->spec);
        fprintf(f, "backend %s, %d device%s", backend_kind_name(r->backend), ndev,
                ndev == 1 ? "" : "s");
        if (c)
            fprintf(f, ", model %s%s%s%s, global batch %d%s, %s", c->model_name[0] ? c->model_name : "",
                    layers[0] ? " (" : "", layers, layers[0] ? ")" : "", c->batch,
                    c->accum > 1 ? " (accumulated)" : "", optim_name(c->optim.kind));
        fprintf(f, ", %ld steps (%ld warm-up)", r->steps, r->warmup_steps);
        if (c && c->zero)
            fputs(", ddp with --zero1", f);
    }
    time_t now = time(NULL);
    struct tm tm;
    char when[64] = "";
    if (localtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    fprintf(f, ".  ddpbench %s (%s), %s.</p></header>\n", DDPBENCH_VERSION, report_revision(), when);
}

/* A small SVG of curves over the steps (a hook's losses, the replicas'
 * distance): curve j's point k is at(ctx, j, k, &step); curve 0 solid,
 * curve 1 grey and dashed; a non-finite value drawn at the top. */
typedef struct {
    const char *cls, *aria;
    int nc;
    long n[PAGE_MAX_RUNS];
    double (*at)(const void *ctx, int j, long k, double *step);
    const void *ctx;
    bool zero; /* the axis starts at 0 */
} curves_t;

static void curves(FILE *f, const curves_t *c)
{
    double lo = c->zero ? 0.0 : INFINITY, hi = -INFINITY, s0 = INFINITY, s1 = -INFINITY, x;
    for (int j = 0; j < c->nc; j++)
        for (long k = 0; k < c->n[j]; k++) {
            double v = c->at(c->ctx, j, k, &x);
            s0 = fmin(s0, x);
            s1 = fmax(s1, x);
            lo = isfinite(v) ? fmin(lo, v) : lo;
            hi = isfinite(v) ? fmax(hi, v) : hi;
        }
    if (!(hi > lo))
        hi = lo + (lo > 0 ? lo : 1.0);
    const double W = 560, H = 180, L = 50, T = 10, PW = W - L - 10, PH = H - T - 30;
    fprintf(f, "<svg class=\"%s\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">\n",
            c->cls, W, H, c->aria);
    fprintf(f, "<text x=\"4\" y=\"%.0f\" font-size=\"10\">%.4g</text><text x=\"4\" y=\"%.0f\" "
               "font-size=\"10\">%.4g</text><text x=\"%.0f\" y=\"%.0f\" font-size=\"10\">step "
               "%.0f to %.0f</text>\n",
            T + 8, hi, T + PH, lo, L, H - 6, s0, s1);
    for (int j = 0; j < c->nc; j++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
                j ? "#888" : "#2a6fdb", j ? " stroke-dasharray=\"4 3\"" : "");
        for (long k = 0; k < c->n[j]; k++) {
            double v = c->at(c->ctx, j, k, &x);
            fprintf(f, "%.1f,%.1f ", L + (s1 > s0 ? (x - s0) / (s1 - s0) : 0.0) * PW,
                    T + (hi - (isfinite(v) ? v : hi)) / (hi - lo) * PH);
        }
        fputs("\"/>\n", f);
    }
    fputs("</svg>\n", f);
}

/* The hook's run (curve 0) and its plain reference's loss per logged step. */
static double hook_loss(const void *ctx, int j, long k, double *step)
{
    const run_result_t *r = ctx, *x = j ? r->hook_ref : r;
    *step = (double)x->log.pt[k].step;
    return x->log.pt[k].loss;
}

/* --comm-hook: what the hook sent against plain DDP, and its drift: the
 * two loss curves (plain dashed) over the logged steps. */
static void hook_section(FILE *f, const report_page_t *p)
{
    const run_result_t *r = &p->runs[0];
    const config_t *c = &p->cfgs[0];
    const run_result_t *ref = r->hook_ref;
    if (c->comm_hook == HOOK_NONE || !strategy_words(r->mode)->ranks || !ref)
        return;
    char name[48], a[32], b[32];
    config_comm_hook_text(c, name, sizeof name);
    double sent = 0.0, plain = (double)r->nparams * sizeof(float), mx = 0.0;
    for (int i = 0; i < r->nbuckets; i++)
        sent += r->bucket_bytes[i];
    double d = report_param_distance(r, ref, &mx);
    fputs("<section id=\"hook\"><h2>Communication hook</h2>\n<p class=\"lead\">", f);
    fprintf(f, "--comm-hook %s sent %s per step from each rank where plain DDP sends %s "
               "(%.2fx less). Against the same run without the hook (made first): the final "
               "parameters' relative distance is %.3g; the loss curves, plain dashed:</p>\n",
            name, report_fmt_bytes(a, sizeof a, sent), report_fmt_bytes(b, sizeof b, plain),
            sent > 0 ? plain / sent : 0.0, d);
    long n = r->log.n < ref->log.n ? r->log.n : ref->log.n;
    if (n < 2)
        fputs("<p class=\"note\">Fewer than two logged losses (--log-every N logs more).</p>", f);
    else
        curves(f, &(curves_t){.cls = "hookloss", .nc = 2, .n = {n, n}, .at = hook_loss, .ctx = r,
                              .aria = "loss per logged step, with and without the hook"});
    fputs("</section>\n", f);
}

/* Run j's replicas' distance at its check k. */
static double replica_dist(const void *ctx, int j, long k, double *step)
{
    const replica_rec_t *r = &((const report_page_t *)ctx)->runs[j].replicas;
    *step = (double)r->step[k] + 1;
    return r->dist[k];
}

/* --check-replicas: the replicas' distance at each checked step, a curve
 * per run (the first solid, the second dashed), 0 while they agree: where a
 * drift starts and how it grows. */
static void replicas_section(FILE *f, const report_page_t *p)
{
    curves_t c = {.cls = "replicas", .nc = p->n < 2 ? p->n : 2, .at = replica_dist, .ctx = p,
                  .zero = true, .aria = "the replicas' distance at each checked step"};
    long any = 0;
    for (int j = 0; j < c.nc; j++)
        any += c.n[j] = p->runs[j].replicas.npoints;
    if (!any)
        return;
    fputs("<section id=\"replicas\"><h2>Replicas</h2>\n<p class=\"lead\">", f);
    fprintf(f, "--check-replicas %d: the largest difference of one parameter from rank 0's "
               "(device 0's in dp) at each check, 0 while the replicas agree; ",
            p->cfgs[0].check_replicas);
    for (int j = 0; j < c.nc; j++) {
        const replica_rec_t *r = &p->runs[j].replicas;
        fputs(j ? "; dashed, " : "solid, ", f);
        page_esc(f, page_run_label(p, j));
        fputc(' ', f);
        if (r->differed)
            fprintf(f, "first differed after step %ld", r->first_step + 1);
        else
            fprintf(f, "agreed at all %ld checks", r->checks);
    }
    fputs(".</p>\n", f);
    curves(f, &c);
    fputs("</section>\n", f);
}

static void write_page(FILE *f, const report_page_t *p)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>ddpbench: ",
          f);
    page_esc(f, p->title ? p->title : "run");
    fputs("</title>\n<style>\n", f);
    fputs(report_page_css, f);
    fputs("</style></head>\n<body>\n", f);
    header(f, p);
    verdict(f, p);
    replicas_section(f, p); /* a drift is the page's lesson where there is one */
    timeline_section(f, p);
    phases_section(f, p);
    page_peak_section(f, p);
    memory_section(f, p);
    hook_section(f, p);
    predict_section(f, p);
    numbers_section(f, p);
    fputs("<footer>Written by ddpbench --report: one file, no network; the figures are SVG and "
          "read the same without the script, which only highlights what the pointer is "
          "over.</footer>\n<script>\n",
          f);
    fputs(report_page_js, f);
    fputs("</script>\n</body></html>\n", f);
}

int report_page_write(const char *path, const report_page_t *p, char *err)
{
    afile_t a;
    int rc = afile_open(&a, path, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "--report %s", path);
    FILE *f = afile_stream(&a);
    if (f)
        write_page(f, p);
    rc = afile_commit(&a, false, err);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "--report %s", path);
}
