/* common/report/report_compare.c: compare mode's view: the runs side by side with
 * speed-ups and scaling efficiency, the per-phase split of each, whether the
 * final parameters agree (the equivalence contract), and two or three
 * sentences, computed from the phase times, on where the gap comes from.
 *
 * Why two measures of agreement: max_rel_diff alone (the worst single
 * parameter) is too sensitive under Adam, whose update g/(sqrt(v)+eps) turns
 * fp32 summation-order noise in near-zero gradients into visible differences:
 * single(B) against single(B/2, --accum 2), which differ only in summation
 * order, reach 7e-4 on mlp-small after one Adam step while the relative L2
 * distance of the whole vectors stays at 4e-7.  A real bug (a bucket left out,
 * a wrong average, a stale replica) moves the whole vector, so the verdict
 * needs the L2 distance within REPORT_AGREE_L2 and every parameter within
 * REPORT_AGREE_MAX. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "report/report.h"

#define LABEL_W 26
#define COL_W 13
#define MAX_RUNS 3

// ---------------------------------------------------------------------------
// small helpers

/* "4.10 ms", "850 us", "1.20 s": short forms for sentences. */
static const char *fmt_short(char *buf, size_t n, double s)
{
    if (s >= 1.0)
        snprintf(buf, n, "%.2f s", s);
    else if (s >= 1e-3)
        snprintf(buf, n, "%.2f ms", s * 1e3);
    else
        snprintf(buf, n, "%.0f us", s * 1e6);
    return buf;
}

static const char *mode_title(mode_t_ m)
{
    return m == MODE_DP ? "DP" : m == MODE_DDP ? "DDP" : m == MODE_SINGLE ? "single" : "?";
}

static const run_result_t *find_mode(const run_result_t *runs, int n, mode_t_ m)
{
    for (int i = 0; i < n; i++)
        if (runs[i].mode == m)
            return &runs[i];
    return NULL;
}

/* Mean per-step time of phase p over device slots [first, last]. */
static double phase_mean(const report_stats_t *s, int first, int last, int p)
{
    if (last < first)
        return 0.0;
    double sum = 0.0;
    for (int d = first; d <= last; d++)
        sum += s->phase[d][p];
    return sum / (double)(last - first + 1);
}

typedef struct {
    int phase;
    double v;
} item_t;

static void sort_items(item_t *it, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && it[j].v > it[j - 1].v; j--) {
            item_t t = it[j];
            it[j] = it[j - 1];
            it[j - 1] = t;
        }
}

/* "a 1.00 ms, b 2.00 ms and c 3.00 ms" of the first k items. */
static void app_items(char *buf, size_t len, size_t *used, const item_t *it, int k, mode_t_ m,
                      const char *more)
{
    char t[32];
    for (int i = 0; i < k; i++)
        report_appendf(buf, len, used, "%s%s%s %s", i == 0 ? "" : i == k - 1 ? " and " : ", ",
            fmt_short(t, sizeof t, it[i].v), more, report_phase_label(m, (phase_t)it[i].phase));
}

// ---------------------------------------------------------------------------
// the sentences

/* DP: the work only device 0 does while the others wait. */
static void why_dp(char *buf, size_t len, size_t *used, const run_result_t *r)
{
    if (r->ndev < 2 || r->times.n == 0)
        return;
    report_stats_t s;
    report_stats(r, NULL, &s);
    item_t it[PH_COUNT];
    int n = 0;
    double serial = 0.0;
    for (int p = 0; p < PH_COUNT; p++) {
        /* forward and backward run on every device at once; idle and hidden
         * communication are not work on device 0's critical path */
        if (p == PH_FORWARD || p == PH_BACKWARD || p == PH_IDLE || p == PH_COMM_HIDDEN)
            continue;
        if (s.phase[0][p] <= 0.0)
            continue;
        serial += s.phase[0][p];
        it[n++] = (item_t){p, s.phase[0][p]};
    }
    if (n == 0 || s.step_mean <= 0.0)
        return;
    sort_items(it, n);
    char t[32];
    report_appendf(buf, len, used, "DP spends %.0f%% of its %s step on device 0 alone: ",
        100.0 * serial / s.step_mean, fmt_short(t, sizeof t, s.step_mean));
    /* the parts worth naming: up to four, each at least 2% of the step */
    for (int i = 0; i < n && i < 4 && (i == 0 || it[i].v >= 0.02 * s.step_mean); i++)
        report_appendf(buf, len, used, "%s%s %s", i ? ", " : "",
            report_phase_label(MODE_DP, (phase_t)it[i].phase), fmt_short(t, sizeof t, it[i].v));
    double idle = phase_mean(&s, 1, r->ndev - 1, PH_IDLE);
    if (idle > 0.0)
        report_appendf(buf, len, used, "; the other devices sit idle %s of it", fmt_short(t, sizeof t, idle));
    report_appendf(buf, len, used, ". ");
}

/* DDP: how much of the all-reduce ran behind backward. */
static void why_ddp(char *buf, size_t len, size_t *used, const run_result_t *r)
{
    if (r->ndev < 2 || r->times.n == 0)
        return;
    report_stats_t s;
    report_stats(r, NULL, &s);
    double hidden = phase_mean(&s, 0, r->ndev - 1, PH_COMM_HIDDEN);
    double exposed = phase_mean(&s, 0, r->ndev - 1, PH_COMM_EXPOSED);
    char a[32], b[32];
    if (hidden + exposed <= 0.0)
        return;
    if (hidden <= 0.0)
        report_appendf(buf, len, used,
            "DDP hides none of its all-reduce: every step waits %s for it after backward. ",
            fmt_short(a, sizeof a, exposed));
    else
        report_appendf(buf, len, used,
            "DDP hides %.0f%% of its all-reduce behind backward (%s hidden, %s exposed per "
            "step). ",
            100.0 * hidden / (hidden + exposed), fmt_short(a, sizeof a, hidden),
            fmt_short(b, sizeof b, exposed));
}

/* The faster of two runs against the slower: the phases where the slower
 * one's device 0 spends more time. */
static void why_gap(char *buf, size_t len, size_t *used, const run_result_t *x,
                    const run_result_t *y)
{
    if (x->times.n == 0 || y->times.n == 0)
        return;
    report_stats_t sx, sy;
    report_stats(x, NULL, &sx);
    report_stats(y, NULL, &sy);
    const run_result_t *fast = x, *slow = y;
    const report_stats_t *sf = &sx, *ss = &sy;
    if (sy.step_mean < sx.step_mean) {
        fast = y, slow = x;
        sf = &sy, ss = &sx;
    }
    double gap = ss->step_mean - sf->step_mean;
    char t[32];
    if (gap <= 0.0 || ss->step_mean <= 0.0) {
        report_appendf(buf, len, used, "%s and %s take the same time per step. ", mode_title(x->mode),
            mode_title(y->mode));
        return;
    }
    item_t it[PH_COUNT];
    int n = 0;
    for (int p = 0; p < PH_COUNT; p++) {
        if (p == PH_COMM_HIDDEN)
            continue;
        double d = ss->phase[0][p] - sf->phase[0][p];
        if (d > 0.02 * gap)
            it[n++] = (item_t){p, d};
    }
    sort_items(it, n);
    report_appendf(buf, len, used, "%s's step is %s (%.0f%%) shorter than %s's", mode_title(fast->mode),
        fmt_short(t, sizeof t, gap), 100.0 * gap / ss->step_mean, mode_title(slow->mode));
    if (n > 0) {
        report_appendf(buf, len, used, "; on device 0 %s spends ", mode_title(slow->mode));
        app_items(buf, len, used, it, n < 3 ? n : 3, slow->mode, " more in");
    }
    report_appendf(buf, len, used, ". ");
}

void report_compare_why(char *buf, size_t len, const run_result_t *runs, int n)
{
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = 0;
    const run_result_t *single = find_mode(runs, n, MODE_SINGLE);
    const run_result_t *dp = find_mode(runs, n, MODE_DP);
    const run_result_t *ddp = find_mode(runs, n, MODE_DDP);
    if (dp)
        why_dp(buf, len, &used, dp);
    if (ddp)
        why_ddp(buf, len, &used, ddp);
    if (dp && ddp)
        why_gap(buf, len, &used, dp, ddp);
    else if (single && (dp || ddp))
        why_gap(buf, len, &used, single, dp ? dp : ddp);
    while (used > 0 && buf[used - 1] == ' ')
        buf[--used] = 0;
}

// ---------------------------------------------------------------------------
// the side-by-side table

typedef struct {
    const run_result_t *r;
    int first, last; /* device slots averaged */
    char title[COL_W + 1];
} pcol_t;

static void wrap(FILE *f, const char *indent, const char *text, int width)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", text);
    int col = 0;
    fputs(indent, f);
    col = (int)strlen(indent);
    for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
        int wl = (int)strlen(w);
        if (col > (int)strlen(indent) && col + 1 + wl > width) {
            fprintf(f, "\n%s", indent);
            col = (int)strlen(indent);
        } else if (col > (int)strlen(indent)) {
            fputc(' ', f);
            col++;
        }
        fputs(w, f);
        col += wl;
    }
    fputc('\n', f);
}

void report_compare(FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n)
{
    if (n > MAX_RUNS)
        n = MAX_RUNS;
    const run_result_t *ref = find_mode(runs, n, MODE_SINGLE);
    report_stats_t s[MAX_RUNS];
    for (int i = 0; i < n; i++)
        report_stats(&runs[i], ref, &s[i]);
    const config_t *c = ctx ? ctx->cfg : NULL;
    int ndev = 0;
    for (int i = 0; i < n; i++)
        ndev = runs[i].ndev > ndev ? runs[i].ndev : ndev;
    fprintf(f, "compare: %s on %s, %d device%s", c && c->model_name[0] ? c->model_name : "model",
            n ? backend_kind_name(runs[0].backend) : "?", ndev, ndev == 1 ? "" : "s");
    if (c)
        fprintf(f, ", global batch %d%s, %s, single on %d BLAS thread%s", c->batch,
                c->accum > 1 ? " (accumulated)" : "", optim_name(c->optim.kind), c->threads,
                c->threads == 1 ? "" : "s");
    if (n)
        fprintf(f, ", %ld steps (%ld timed)", runs[0].steps, runs[0].times.n);
    fputc('\n', f);

    char a[32];
    fprintf(f, "  %-*s", LABEL_W, "");
    for (int i = 0; i < n; i++)
        fprintf(f, "%*s", COL_W, mode_name(runs[i].mode));
    fputc('\n', f);
#define ROW(label, ...)                                                                    \
    do {                                                                                   \
        fprintf(f, "  %-*s", LABEL_W, label);                                              \
        for (int i = 0; i < n; i++) {                                                      \
            const run_result_t *r = &runs[i];                                              \
            const report_stats_t *st = &s[i];                                              \
            (void)r, (void)st;                                                             \
            __VA_ARGS__;                                                                   \
        }                                                                                  \
        fputc('\n', f);                                                                    \
    } while (0)
    ROW("devices", fprintf(f, "%*d", COL_W, r->ndev));
    ROW("throughput (samples/s)", fprintf(f, "%*.1f", COL_W, r->samples_per_s));
    if (ref) {
        ROW("speed-up vs single", fprintf(f, "%*.2fx", COL_W - 1, r == ref ? 1.0 : st->speedup));
        ROW("scaling efficiency",
            fprintf(f, "%*.0f%%", COL_W - 1, 100.0 * (r == ref ? 1.0 : st->efficiency)));
    }
    ROW("step time mean", fprintf(f, "%*s", COL_W, report_fmt_time(a, sizeof a, st->step_mean)));
    ROW("step time p50", fprintf(f, "%*s", COL_W, report_fmt_time(a, sizeof a, st->step_p50)));
    ROW("step time p95", fprintf(f, "%*s", COL_W, report_fmt_time(a, sizeof a, st->step_p95)));
    ROW("peak memory (max device)",
        fprintf(f, "%*s", COL_W, report_fmt_bytes(a, sizeof a, (double)st->mem_peak_max)));
    ROW("final loss", fprintf(f, "%*.6f", COL_W, r->final_loss));
    ROW("checksum (sum)", fprintf(f, "%*.5e", COL_W, r->checksum.sum));
    if (ref)
        ROW("params vs single",
            fprintf(f, "%*s", COL_W,
                    r == ref ? "-" : !st->params_compared ? "n/a" : st->agree ? "agree" : "DIFFER"));

    /* the phase split: single's device, then device 0 and the mean of the
     * others for each multi-device run (DP's device 0 does the extra work) */
    pcol_t pc[2 * MAX_RUNS];
    int npc = 0;
    for (int i = 0; i < n; i++) {
        const run_result_t *r = &runs[i];
        if (r->times.n == 0)
            continue;
        pc[npc] = (pcol_t){r, 0, 0, ""};
        snprintf(pc[npc].title, COL_W + 1, r->ndev > 1 ? "%s dev0" : "%s", mode_name(r->mode));
        npc++;
        if (r->ndev > 1) {
            pc[npc] = (pcol_t){r, 1, r->ndev - 1, ""};
            snprintf(pc[npc].title, COL_W + 1, "%s others", mode_name(r->mode));
            npc++;
        }
    }
    if (npc > 0) {
        double slowest = 0.0;
        for (int i = 0; i < n; i++)
            slowest = fmax(slowest, s[i].step_mean);
        double k = slowest >= 1e-3 ? 1e3 : 1e6;
        fprintf(f, "\n  %-*s", LABEL_W, k == 1e3 ? "time per step (ms)" : "time per step (us)");
        for (int j = 0; j < npc; j++)
            fprintf(f, "%*s", COL_W, pc[j].title);
        fputc('\n', f);
        for (int p = 0; p < PH_COUNT; p++) {
            bool any = false;
            for (int i = 0; i < n; i++)
                any |= report_phase_shown(&s[i], runs[i].ndev, (phase_t)p, k);
            if (!any)
                continue;
            const char *label = p == PH_LOSS ? "loss (dp: gather+loss)"
                                : p == PH_COMM_EXPOSED ? "comm exposed (dp: reduce)"
                                : p == PH_COMM_HIDDEN  ? "comm hidden (in bwd)"
                                                       : phase_name((phase_t)p);
            fprintf(f, "    %-*s", LABEL_W - 2, label);
            for (int j = 0; j < npc; j++) {
                const report_stats_t *st = &s[pc[j].r - runs];
                fprintf(f, "%*.3f", COL_W, phase_mean(st, pc[j].first, pc[j].last, p) * k);
            }
            fputc('\n', f);
        }
        /* the phases add up to the step (comm hidden overlaps backward) */
        fprintf(f, "    %-*s", LABEL_W - 2, "sum of phases");
        for (int j = 0; j < npc; j++) {
            const report_stats_t *st = &s[pc[j].r - runs];
            double sum = 0.0;
            for (int d = pc[j].first; d <= pc[j].last; d++)
                sum += report_phase_sum(st, d);
            fprintf(f, "%*.3f", COL_W, sum / (double)(pc[j].last - pc[j].first + 1) * k);
        }
        fprintf(f, "\n    %-*s", LABEL_W - 2, "step (wall)");
        for (int j = 0; j < npc; j++)
            fprintf(f, "%*.3f", COL_W, s[pc[j].r - runs].step_mean * k);
        fputc('\n', f);
    }

    /* the equivalence contract */
    if (ref) {
        fputc('\n', f);
        char line[1024];
        report_stream_note(line, sizeof line, ctx, ref);
        for (char *p = line, *nl; *p; p = nl ? nl + 1 : p + strlen(p)) {
            if ((nl = strchr(p, '\n')))
                *nl = 0;
            wrap(f, "  ", p, 96);
        }
        bool said = false;
        for (int i = 0; i < n; i++) {
            if (&runs[i] == ref)
                continue;
            const report_stats_t *st = &s[i];
            fprintf(f, "  parameters: %s vs single ", mode_name(runs[i].mode));
            char worst[64];
            if (st->adam)
                snprintf(worst, sizeof worst, "worst parameter %.1e of lr x steps", st->max_step);
            else
                snprintf(worst, sizeof worst, "worst parameter %.1e", st->max_rel);
            if (!st->params_compared)
                fprintf(f, "not compared (no final parameters)\n");
            else if (st->agree)
                fprintf(f, "agree (relative L2 distance %.1e, %s)\n", st->rel_l2, worst);
            else if (st->rel_l2 > REPORT_AGREE_L2)
                fprintf(f, "DIFFER by %.1e (relative L2 distance; %s)\n", st->rel_l2, worst);
            else
                fprintf(f, "DIFFER: %s (relative L2 distance %.1e)\n", worst, st->rel_l2);
            if (st->params_compared && !st->agree) {
                report_differ_cause(line, sizeof line, ctx, &runs[i], ref, said);
                if (line[0])
                    wrap(f, "    ", line, 96);
                said = true;
            }
        }
    }
    char why[2048];
    report_compare_why(why, sizeof why, runs, n);
    if (why[0]) {
        fputc('\n', f);
        wrap(f, "  ", why, 96);
    }
#undef ROW
}
