/* app/report/report_svg.c: --report's figures as SVG (numbers and geometry in
 * C, colours the classes of page.css): the timelines, the phase and memory
 * bars, --predict's and --hardware's curves.  Every mark carries a <title>
 * (the browser's tooltip) and data- attributes the browser test counts. */
#include <math.h>
#include <string.h>

#include "app/report/report_page.h"

#define PLOT_W (FIG_W - LABEL_W - 20)
#define LANE_H 22

// ---------------------------------------------------------------------------
// small helpers

void page_esc(FILE *f, const char *s)
{
    static const char *const ent[] = {['<'] = "&lt;", ['>'] = "&gt;", ['&'] = "&amp;",
                                      ['"'] = "&quot;"};
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < sizeof ent / sizeof *ent && ent[c])
            fputs(ent[c], f);
        else if (c >= 0x20 || c == '\n')
            fputc(c, f);
    }
}

static const char *ph_class(int p)
{
    static const char *const c[PH_COUNT] = {"data",    "h2d",     "scatter", "replicate",
                                            "forward", "loss",    "backward", "exposed",
                                            "exposed", "hidden",  "optim",   "idle",
                                            "skew",    "desched"};
    return p >= 0 && p < PH_COUNT ? c[p] : "other";
}

static const char *kind_class(int k)
{
    switch (k) {
    case TR_ALLREDUCE:
    case TR_REDUCE_SCATTER:
        return "allreduce";
    case TR_BROADCAST:
    case TR_REPLICATE:
        return "replicate";
    case TR_SCATTER:
        return "scatter";
    case TR_GATHER:
        return "gather";
    case TR_REDUCE:
        return "reduce";
    default:
        return k < PH_COUNT ? ph_class(k) : "other";
    }
}

/* Seconds in a short unit for titles and axes. */
static const char *tfmt(char *b, size_t n, double s) { return report_fmt_time(b, n, s); }

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about 6 ticks. */
static double nice_step(double span)
{
    if (!(span > 0))
        return 1.0;
    double raw = span / 6.0, p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

void page_svg_open(FILE *f, int h, const char *aria)
{
    fprintf(f, "<svg class=\"fig\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
               "aria-label=\"%s\">\n", FIG_W, h, FIG_W, h, aria);
}

const char *page_run_label(const report_page_t *p, int i)
{
    return p->labels && p->labels[i] ? p->labels[i] : mode_name(p->runs[i].mode);
}

/* A tick's label: "0", "250 us", "1.5 ms", "2 s" (the unit from the step). */
static const char *tick(char *b, size_t n, double v, double step)
{
    if (v == 0.0)
        snprintf(b, n, "0");
    else if (step >= 1.0)
        snprintf(b, n, "%g s", v);
    else if (step >= 1e-3)
        snprintf(b, n, "%g ms", round(v * 1e6) / 1e3);
    else
        snprintf(b, n, "%g us", round(v * 1e9) / 1e3);
    return b;
}

/* A label longer than the room keeps its start and its tail (a long one ran
 * 107 px past the figure's left edge). */
#define LABEL_CHARS 18
void page_label(FILE *f, int y, const char *label, const char *tail)
{
    int room = LABEL_CHARS - (int)strlen(tail), len = (int)strlen(label);
    fprintf(f, "<text class=\"lanelabel\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL_W - 6, y);
    if (len <= room) {
        page_esc(f, label);
    } else {
        char cut[LABEL_CHARS + 1];
        snprintf(cut, sizeof cut, "%.*s", room > 1 ? room - 1 : 0, label);
        page_esc(f, cut);
        fputs("\u2026", f);
    }
    page_esc(f, tail);
    if (len > room) {
        fputs("<title>", f);
        page_esc(f, label);
        page_esc(f, tail);
        fputs("</title>", f);
    }
    fputs("</text>", f);
}

/* A tick's label: centred on it, but ending at it near the figure's right
 * edge, where a centred one ran past it. */
static const char *anchor(double x) { return x > FIG_W - 40 ? "end" : "middle"; }

/* The axis under a plot of `span` at y, ticks every st: times, or (unit > 0)
 * bytes in MiB or KiB. */
static void axis(FILE *f, double span, double st, double unit, int y)
{
    fprintf(f, "<g class=\"axis\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", LABEL_W, y,
            LABEL_W + PLOT_W, y);
    for (int k = 0; k * st <= span * 1.0001 && k < 50; k++) {
        /* bytes: x as the bars' own scale (PLOT_W / span) places them, to the bit */
        double x = unit > 0 ? LABEL_W + k * st * (PLOT_W / span) : LABEL_W + k * st / span * PLOT_W;
        char b[32];
        if (unit > 0)
            snprintf(b, sizeof b, "%g %s", k * st / unit, unit > 1024.0 ? "MiB" : "KiB");
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%s</text>",
                x, y, x, y + 4, x, y + 15, anchor(x), unit > 0 ? b : tick(b, sizeof b, k * st, st));
    }
    fputs("</g>", f);
}

// ---------------------------------------------------------------------------
// the step to show

void report_page_pick_step(const run_result_t *r, page_step_t *out)
{
    memset(out, 0, sizeof *out);
    report_stats_t st;
    report_stats(r, NULL, &st);
    double want = st.step_p50, best = INFINITY;
    /* the steps device 0 recorded; each one's span over every device */
    const trace_rec_t *t0 = r->trace[0];
    for (uint32_t i = 0; t0 && i < t0->n; i++) {
        const trace_event_t *e = &t0->ev[i];
        if (e->kind != TR_STEP)
            continue;
        /* drawn: from the first device's start to the last one's end;
         * compared with the median: the slowest device's own step, as the
         * run's step times are (DP's device 0, DDP's slowest rank) */
        double a = e->t_begin, b = e->t_end, dur = e->t_end - e->t_begin;
        for (int d = 1; d < r->ndev && d < MAX_DEVICES; d++)
            for (uint32_t j = 0; r->trace[d] && j < r->trace[d]->n; j++) {
                const trace_event_t *x = &r->trace[d]->ev[j];
                if (x->kind == TR_STEP && x->step == e->step) {
                    a = fmin(a, x->t_begin);
                    b = fmax(b, x->t_end);
                    dur = fmax(dur, x->t_end - x->t_begin);
                }
            }
        if (out->recorded == 0)
            out->first = e->step;
        out->last = e->step;
        out->recorded++;
        double miss = fabs(dur - want);
        if (miss < best) {
            best = miss;
            out->step = e->step;
            out->t0 = a;
            out->t1 = b;
            out->dur = dur;
        }
    }
}

// ---------------------------------------------------------------------------
// 1. the timelines

/* One lane: device d's events of `step` on `lane`. */
static void lane(FILE *f, const report_page_t *p, int i, int d, int lane_no, int y,
                 const page_step_t *s, double scale)
{
    const run_result_t *r = &p->runs[i];
    const trace_rec_t *t = r->trace[d];
    char dev[160], b1[32], b2[32];
    report_device_name(dev, sizeof dev, r->backend, &r->dev[d]);
    const char *stream = lane_no == LANE_COMPUTE ? "compute" : strategy_words(r->mode)->lane;
    fprintf(f, "<g class=\"lane\" data-run=\"%d\" data-device=\"%d\" data-stream=\"%s\">", i, d,
            stream);
    fprintf(f, "<rect class=\"lanebg\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>", LABEL_W, y,
            PLOT_W, LANE_H - 4);
    fprintf(f, "<text class=\"lanelabel\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s %d %s<title>",
            LABEL_W - 6, y + 13, strategy_words(r->mode)->member, d, stream);
    page_esc(f, dev);
    fputs("</title></text>", f);
    /* the buckets' waits first, so no wait covers another bucket's all-reduce */
    for (uint32_t k = 0; t && k < t->n; k++) {
        const trace_event_t *e = &t->ev[k];
        if (e->step != s->step || e->lane != lane_no || e->kind == TR_STEP)
            continue;
        double x0 = LABEL_W + (e->t_begin - s->t0) * scale;
        if (e->kind >= PH_COUNT && e->t_ready > 0.0 && e->t_ready < e->t_begin) {
            double xr = LABEL_W + (e->t_ready - s->t0) * scale;
            fprintf(f, "<rect class=\"queued\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\">"
                       "<title>bucket %d ready at %s, waited %s for the comm %s</title></rect>",
                    xr, y + 4, fmax(x0 - xr, 0.5), LANE_H - 12, e->bucket,
                    tfmt(b1, sizeof b1, e->t_ready - s->t0), tfmt(b2, sizeof b2, e->t_begin - e->t_ready),
                    r->backend == BACKEND_CUDA ? "stream" : "thread");
        }
    }
    for (uint32_t k = 0; t && k < t->n; k++) {
        const trace_event_t *e = &t->ev[k];
        if (e->step != s->step || e->lane != lane_no || e->kind == TR_STEP)
            continue;
        double x0 = LABEL_W + (e->t_begin - s->t0) * scale, x1 = LABEL_W + (e->t_end - s->t0) * scale;
        const char *name = e->kind < PH_COUNT ? report_phase_label(r->mode, (phase_t)e->kind)
                                              : trace_kind_name((trace_kind_t)e->kind);
        fprintf(f, "<rect class=\"ev c-%s\" data-kind=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
                   "height=\"%d\"><title>%s",
                e->kind < PH_COUNT ? ph_class(e->kind) : kind_class(e->kind), name, x0, y,
                fmax(x1 - x0, 0.5), LANE_H - 4, name);
        if (e->bucket >= 0)
            fprintf(f, " bucket %d", e->bucket);
        if (e->peer >= 0)
            fprintf(f, " %s device %d",
                    e->kind == TR_GATHER || e->kind == TR_REDUCE ? "from" : "to", e->peer);
        fprintf(f, ": %s, from %s", tfmt(b1, sizeof b1, e->t_end - e->t_begin),
                tfmt(b2, sizeof b2, e->t_begin - s->t0));
        if (e->bytes) {
            char b3[32];
            fprintf(f, ", %s", report_fmt_bytes(b3, sizeof b3, (double)e->bytes));
        }
        fputs("</title></rect>", f);
    }
    fputs("</g>\n", f);
}

/* Device d's own step `step`: its [begin, end] and the seconds it was
 * descheduled in it (its PH_DESCHED events); false when it recorded none. */
static bool own_step(const run_result_t *r, int d, int step, double *b, double *e, double *desched)
{
    const trace_rec_t *t = r->trace[d];
    bool found = false;
    *desched = 0.0;
    for (uint32_t k = 0; t && k < t->n; k++) {
        const trace_event_t *x = &t->ev[k];
        if (x->step != step)
            continue;
        if (x->kind == TR_STEP) {
            *b = x->t_begin;
            *e = x->t_end;
            found = true;
        } else if (x->kind == PH_DESCHED) {
            *desched += x->t_end - x->t_begin;
        }
    }
    return found;
}

/* The skew on device d's lane: from the run's first start to its own, and
 * from its own end to the run's last (the time this device was not in the
 * step while another was), drawn as skew with what it is in its title. */
static void skew_marks(FILE *f, const run_result_t *r, int d, int y, const page_step_t *s,
                       double b, double e, double scale)
{
    const double x[2] = {LABEL_W, LABEL_W + (e - s->t0) * scale};
    const double len[2] = {b - s->t0, s->t1 - e};
    static const char *const what[2] = {"began its step %s after the first",
                                        "ended its step %s before the last"};
    char t1[32], title[96];
    for (int k = 0; k < 2; k++) {
        if (!(len[k] > 0.002 * (s->t1 - s->t0)))
            continue;
        snprintf(title, sizeof title, what[k], tfmt(t1, sizeof t1, len[k]));
        fprintf(f, "<rect class=\"ev c-skew\" data-kind=\"skew\" x=\"%.2f\" y=\"%d\" "
                   "width=\"%.2f\" height=\"%d\"><title>skew: %s %d %s</title></rect>",
                x[k], y, len[k] * scale, LANE_H - 4, strategy_words(r->mode)->member, d, title);
    }
}

int svg_timelines(FILE *f, const report_page_t *p)
{
    page_step_t s[PAGE_MAX_RUNS];
    double span = 0.0;
    for (int i = 0; i < p->n && i < PAGE_MAX_RUNS; i++) {
        report_page_pick_step(&p->runs[i], &s[i]);
        if (s[i].step > 0)
            span = fmax(span, s[i].t1 - s[i].t0);
    }
    if (!(span > 0))
        return 0;
    double st = nice_step(span);
    span = ceil(span / st) * st; /* the axis ends on a tick */
    double scale = PLOT_W / span;
    int lanes = 0;
    for (int i = 0; i < p->n && i < PAGE_MAX_RUNS; i++) {
        const run_result_t *r = &p->runs[i];
        char b1[32], b2[32], b3[32];
        if (s[i].step == 0) {
            fprintf(f, "<p class=\"note\">%s: no step was recorded.</p>\n", page_run_label(p, i));
            continue;
        }
        /* each device's own step in it, and what it was descheduled */
        double own_b[MAX_DEVICES], own_e[MAX_DEVICES], most = 0.0;
        int most_dev = 0;
        for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
            double q = 0.0;
            if (!own_step(r, d, s[i].step, &own_b[d], &own_e[d], &q))
                own_b[d] = s[i].t0, own_e[d] = s[i].t1;
            if (q > most)
                most = q, most_dev = d;
        }
        double whole = s[i].t1 - s[i].t0;
        bool skewed = whole > s[i].dur * 1.002;
        int per = strategy_words(r->mode)->lane ? 2 : 1;
        /* a busy machine said on the timeline itself: a device waited for a
         * core in this step (measured: the descheduled phase), or the run's
         * machine record says others took its cores */
        bool busy = most > 0.05 * whole || r->machine.disturbed;
        int top = busy ? 20 : 0;
        int h = top + r->ndev * per * LANE_H + 26;
        fprintf(f, "<figure class=\"timeline\" data-run=\"%d\"><figcaption><b>", i);
        page_esc(f, page_run_label(p, i));
        fprintf(f, "</b> on %d device%s: step %d, %s", r->ndev, r->ndev == 1 ? "" : "s", s[i].step,
                tfmt(b1, sizeof b1, s[i].dur));
        if (r->ndev > 1)
            fprintf(f, " on the slowest %s", strategy_words(r->mode)->member);
        if (skewed)
            fprintf(f, "; the %ss' steps %s apart (skew, drawn pale), %s from the first start to "
                       "the last end",
                    strategy_words(r->mode)->member,
                    tfmt(b2, sizeof b2, whole - s[i].dur), tfmt(b3, sizeof b3, whole));
        fprintf(f, " (the run's median step %s; recorded timed steps %d to %d)</figcaption>\n",
                tfmt(b2, sizeof b2, step_times_quantile(&r->times, 50)),
                s[i].first, s[i].last);
        page_svg_open(f, h, "timeline of one step");
        if (busy) { /* from the left edge, short: at 700 px it must fit the figure */
            fprintf(f, "<text class=\"busy\" x=\"4\" y=\"14\" data-busy=\"1\">Busy machine: ");
            if (most > 0.0)
                fprintf(f, "%s %d waited %s for a core in this step (dark)",
                        strategy_words(r->mode)->member, most_dev,
                        tfmt(b1, sizeof b1, most));
            else
                fprintf(f, "other processes took %.0f%% of the run's cores",
                        100.0 * r->machine.contention);
            fputs("</text>\n", f);
        }
        int y = 2 + top;
        for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++)
            for (int l = 0; l < per; l++, y += LANE_H, lanes++) {
                lane(f, p, i, d, l, y, &s[i], scale);
                if (l == LANE_COMPUTE && skewed)
                    skew_marks(f, r, d, y, &s[i], own_b[d], own_e[d], scale);
            }
        /* the step's end, labelled: no lane runs past it */
        double xe = LABEL_W + whole * scale;
        fprintf(f, "<line class=\"stepend\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\">"
                   "<title>end of step %d: %s after its first start</title></line>\n",
                xe, 2 + top, xe, y, s[i].step, tfmt(b1, sizeof b1, whole));
        axis(f, span, nice_step(span), 0, y + 2);
        fputs("</svg></figure>\n", f);
    }
    return lanes;
}

// ---------------------------------------------------------------------------
// 2. the phases per step

typedef struct {
    int run, first, last; /* device slots averaged */
    char title[64];
} column_t;

static int columns(const report_page_t *p, column_t *c, int max)
{
    int n = 0;
    for (int i = 0; i < p->n && n + 2 <= max; i++) {
        const run_result_t *r = &p->runs[i];
        if (r->times.n == 0)
            continue;
        c[n] = (column_t){i, 0, 0, ""};
        snprintf(c[n].title, sizeof c[n].title, r->ndev > 1 ? "%s dev0" : "%s",
                 page_run_label(p, i));
        n++;
        if (r->ndev > 1) {
            c[n] = (column_t){i, 1, r->ndev - 1, ""};
            snprintf(c[n].title, sizeof c[n].title, "%s others", page_run_label(p, i));
            n++;
        }
    }
    return n;
}

int svg_phase_bars(FILE *f, const report_page_t *p)
{
    column_t c[2 * PAGE_MAX_RUNS];
    int n = columns(p, c, 2 * PAGE_MAX_RUNS);
    if (n == 0)
        return 0;
    static report_stats_t st[PAGE_MAX_RUNS]; /* 52 KB: not on the stack (docs/faults.md) */
    for (int i = 0; i < p->n && i < PAGE_MAX_RUNS; i++)
        report_stats(&p->runs[i], NULL, &st[i]);
    double top = 0.0;
    for (int j = 0; j < n; j++) {
        double sum = 0.0;
        for (int ph = 0; ph < PH_COUNT; ph++)
            if (ph != PH_COMM_HIDDEN)
                sum += fmax(report_phase_mean(&st[c[j].run], c[j].first, c[j].last, ph), 0.0);
        top = fmax(top, fmax(sum, st[c[j].run].step_mean));
    }
    if (!(top > 0))
        return 0;
    top *= 1.12; /* room for the value after the longest bar */
    double stp = nice_step(top);
    top = ceil(top / stp) * stp;
    double scale = PLOT_W / top;
    int h = n * (BAR_H + 8) + 26;
    page_svg_open(f, h, "phases per step");
    for (int j = 0; j < n; j++) {
        const report_stats_t *s = &st[c[j].run];
        const run_result_t *r = &p->runs[c[j].run];
        int y = 2 + j * (BAR_H + 8);
        fprintf(f, "<g class=\"bar\" data-col=\"");
        page_esc(f, c[j].title);
        fputs("\">", f);
        page_label(f, y + 14, c[j].title, "");
        double x = LABEL_W, bwd_x = -1, bwd_w = 0;
        for (int ph = 0; ph < PH_COUNT; ph++) {
            double v = report_phase_mean(s, c[j].first, c[j].last, ph);
            if (ph == PH_COMM_HIDDEN || !(v > 0))
                continue;
            char b[32];
            const char *name = report_phase_label(r->mode, (phase_t)ph);
            fprintf(f, "<rect class=\"ev c-%s\" data-kind=\"%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
                       "height=\"%d\"><title>%s: %s per step</title></rect>",
                    ph_class(ph), name, x, y, fmax(v * scale, 0.5), BAR_H, name, tfmt(b, sizeof b, v));
            if (ph == PH_BACKWARD) {
                bwd_x = x;
                bwd_w = v * scale;
            }
            x += v * scale;
        }
        /* comm hidden runs inside backward: drawn over it, hatched */
        double hid = report_phase_mean(s, c[j].first, c[j].last, PH_COMM_HIDDEN);
        if (hid > 0 && bwd_x >= 0) {
            char b[32];
            fprintf(f, "<rect class=\"hidden\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\">"
                       "<title>comm hidden behind backward: %s per step</title></rect>",
                    bwd_x + bwd_w - fmin(hid * scale, bwd_w), y + BAR_H / 2, fmin(hid * scale, bwd_w),
                    BAR_H / 2, tfmt(b, sizeof b, hid));
        }
        char b[32];
        fprintf(f, "<text class=\"val\" x=\"%.1f\" y=\"%d\">%s</text></g>\n", x + 4, y + 14,
                tfmt(b, sizeof b, s->step_mean));
    }
    axis(f, top, nice_step(top), 0, 2 + n * (BAR_H + 8));
    fputs("</svg>\n", f);
    return n;
}

// ---------------------------------------------------------------------------
// 3. peak memory by purpose

int svg_memory_bars(FILE *f, const report_page_t *p)
{
    double top = 0.0;
    int n = 0;
    for (int i = 0; i < p->n; i++)
        for (int d = 0; d < p->runs[i].ndev && d < MAX_DEVICES; d++, n++)
            top = fmax(top, (double)p->runs[i].dev[d].mem_peak);
    if (n == 0 || !(top > 0))
        return 0;
    double unit = top >= 1048576.0 ? 1048576.0 : 1024.0;
    top *= 1.12; /* room for the value after the longest bar */
    double stp = nice_step(top / unit) * unit;
    top = ceil(top / stp) * stp;
    double scale = PLOT_W / top;
    int h = n * (BAR_H + 6) + 26;
    page_svg_open(f, h, "peak memory by purpose");
    int row = 0;
    for (int i = 0; i < p->n; i++) {
        const run_result_t *r = &p->runs[i];
        for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++, row++) {
            int y = 2 + row * (BAR_H + 6);
            char b[32];
            char who[96];
            snprintf(who, sizeof who, " %s %d", strategy_words(r->mode)->member, d);
            fprintf(f, "<g class=\"mbar\" data-run=\"%d\" data-device=\"%d\">", i, d);
            page_label(f, y + 14, page_run_label(p, i), who);
            double x = LABEL_W;
            for (int m = 0; m < MEM_KINDS; m++) {
                double v = (double)r->dev[d].mem_split[m];
                if (!(v > 0))
                    continue;
                fprintf(f, "<rect class=\"ev m%d\" data-kind=\"%s\" x=\"%.2f\" y=\"%d\" "
                           "width=\"%.2f\" height=\"%d\"><title>%s: %s</title></rect>",
                        m, mem_kind_name((mem_kind_t)m), x, y, fmax(v * scale, 0.5), BAR_H,
                        mem_kind_name((mem_kind_t)m), report_fmt_bytes(b, sizeof b, v));
                x += v * scale;
            }
            fprintf(f, "<text class=\"val\" x=\"%.1f\" y=\"%d\">%s</text></g>\n",
                    LABEL_W + r->dev[d].mem_peak * scale + 4, y + 14,
                    report_fmt_bytes(b, sizeof b, (double)r->dev[d].mem_peak));
        }
    }
    axis(f, top, stp, unit, 2 + n * (BAR_H + 6));
    fputs("</svg>\n", f);
    return n;
}

// ---------------------------------------------------------------------------
// 4. samples/s against devices 1..n: the plot --predict's chart and
// --hardware's draw on

#define PLOT_H 300
#define PLOT_X0 70
#define PLOT_Y0 20
#define PLOT_PW (FIG_W - PLOT_X0 - 150)
#define PLOT_PH (PLOT_H - 60)

typedef struct {
    int n;      /* devices on the x axis, 1..n */
    double top; /* samples/s at the top of the y axis */
} plot_t;

static double plot_x(const plot_t *p, double k)
{
    return PLOT_X0 + (p->n > 1 ? (k - 1) * (double)PLOT_PW / (p->n - 1) : PLOT_PW / 2.0);
}

static double plot_y(const plot_t *p, double v)
{
    return PLOT_Y0 + PLOT_PH - v / p->top * PLOT_PH;
}

/* The <svg> with its grid and axes, top rounded up to a tick; the caller
 * closes it. */
static void plot_open(FILE *f, plot_t *p, const char *aria)
{
    double stp = nice_step(p->top);
    p->top = ceil(p->top / stp) * stp;
    page_svg_open(f, PLOT_H, aria);
    fputs("<g class=\"axis\">", f);
    for (int k = 0; k * stp <= p->top * 1.0001 && k < 50; k++) {
        double y = plot_y(p, k * stp);
        fprintf(f, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>",
                PLOT_X0, y, PLOT_X0 + PLOT_PW, y, PLOT_X0 - 6, y + 4, k * stp);
    }
    for (int k = 1; k <= p->n; k++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>",
                plot_x(p, k), PLOT_Y0 + PLOT_PH + 18, k);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">devices</text>"
               "<text x=\"14\" y=\"%d\" transform=\"rotate(-90 14 %d)\" text-anchor=\"middle\">"
               "samples/s</text></g>\n",
            plot_x(p, (p->n + 1) / 2.0), PLOT_Y0 + PLOT_PH + 36, PLOT_Y0 + PLOT_PH / 2,
            PLOT_Y0 + PLOT_PH / 2);
}

/* Mode m's curve through v[0..n-1] (data-mode: pre and the mode's name), a
 * circle at each point saying what it is ("predicted", "modelled"), and its
 * label after the last point, dy pixels below it. */
static void plot_curve(FILE *f, const plot_t *p, mode_t_ m, const char *pre, const char *what,
                       const double *v, double dy)
{
    const char *name = mode_name(m), *cls = strategy_words(m)->css;
    fprintf(f, "<g class=\"curve\" data-mode=\"%s%s\"><polyline class=\"line c-%s\" points=\"",
            pre, name, cls);
    for (int k = 1; k <= p->n; k++)
        fprintf(f, "%.1f,%.1f ", plot_x(p, k), plot_y(p, v[k - 1]));
    fputs("\"/>", f);
    for (int k = 1; k <= p->n; k++)
        fprintf(f, "<circle class=\"pred c-%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>%s on %d "
                   "device%s, %s: %.*f samples/s</title></circle>", cls, plot_x(p, k),
                plot_y(p, v[k - 1]), name, k, k == 1 ? "" : "s", what, v[k - 1] < 100 ? 1 : 0,
                v[k - 1]);
    fprintf(f, "<text class=\"curvelabel c-%s\" x=\"%.1f\" y=\"%.1f\">%s %s</text></g>\n", cls,
            plot_x(p, p->n) + 8, plot_y(p, v[p->n - 1]) + 4 + dy, name, what);
}

// ---------------------------------------------------------------------------
// 5. --predict's curves and the measured points

int svg_predict(FILE *f, const report_page_t *p)
{
    const predict_in_t *in = p->pred;
    if (!in || !p->rows || in->k0 < 2)
        return 0;
    double v[2][PREDICT_MAX_DEVICES];
    plot_t pl = {PREDICT_MAX_DEVICES, 0.0};
    for (int k = 0; k < PREDICT_MAX_DEVICES; k++) {
        v[0][k] = report_rate(in, p->rows[k].dp_step_s);
        v[1][k] = report_rate(in, p->rows[k].ddp_step_s);
        pl.top = fmax(pl.top, fmax(v[0][k], v[1][k]));
    }
    for (int i = 0; i < p->n; i++) {
        pl.top = fmax(pl.top, p->runs[i].samples_per_s);
        if (p->reps && p->reps[i].n > 1) {
            interval_t iv = repeat_interval(&p->reps[i], FIG_THROUGHPUT);
            if (isfinite(iv.hi))
                pl.top = fmax(pl.top, iv.hi);
        }
    }
    if (!(pl.top > 0))
        return 0;
    plot_open(f, &pl, "predicted throughput");
    plot_curve(f, &pl, MODE_DP, "", "predicted", v[0], 0);
    plot_curve(f, &pl, MODE_DDP, "", "predicted", v[1], 0);
    int points = 0;
    for (int i = 0; i < p->n; i++) {
        const run_result_t *r = &p->runs[i];
        if (r->ndev < 1 || r->ndev > PREDICT_MAX_DEVICES || !(r->samples_per_s > 0))
            continue;
        const char *cls = strategy_words(r->mode)->css;
        double x = plot_x(&pl, r->ndev) + strategy_words(r->mode)->dx;
        fprintf(f, "<g class=\"measured\" data-run=\"%d\">", i);
        if (p->reps && p->reps[i].n > 1) {
            interval_t iv = repeat_interval(&p->reps[i], FIG_THROUGHPUT);
            if (isfinite(iv.lo) && isfinite(iv.hi))
                fprintf(f, "<path class=\"errbar\" d=\"M%.1f %.1fV%.1fM%.1f %.1fh8M%.1f %.1fh8\">"
                           "<title>95%% interval over %d runs: %.0f to %.0f samples/s</title></path>",
                        x, plot_y(&pl, fmax(iv.lo, 0)), plot_y(&pl, iv.hi), x - 4,
                        plot_y(&pl, fmax(iv.lo, 0)), x - 4, plot_y(&pl, iv.hi), iv.n, iv.lo,
                        iv.hi);
        }
        fprintf(f, "<rect class=\"pt c-%s\" x=\"%.1f\" y=\"%.1f\" width=\"9\" height=\"9\"><title>",
                cls, x - 4.5, plot_y(&pl, r->samples_per_s) - 4.5);
        page_esc(f, page_run_label(p, i));
        fprintf(f, " on %d device%s, measured: %.0f samples/s</title></rect></g>\n", r->ndev,
                r->ndev == 1 ? "" : "s", r->samples_per_s);
        points++;
    }
    fputs("</svg>\n", f);
    return points + 2 * PREDICT_MAX_DEVICES;
}

// ---------------------------------------------------------------------------
// 6. --hardware's modelled GPU box

void svg_gpu(FILE *f, const gpu_lesson_t *g)
{
    double v[GPU_MODES][GPU_MAX_DEVICES];
    plot_t pl = {g->hw.count, 0.0};
    for (int m = 0; m < GPU_MODES; m++)
        for (int k = 0; k < pl.n; k++)
            pl.top = fmax(pl.top, v[m][k] = g->rows[k].m[m].rate);
    plot_open(f, &pl, "modelled GPU throughput");
    for (int m = 0; m < GPU_MODES; m++)
        plot_curve(f, &pl, (mode_t_)m, "gpu-", "modelled", v[m], 12.0 * (m - 1));
    fputs("</svg>\n", f);
}
