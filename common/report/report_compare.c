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
#include <stdlib.h>
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
    else if (s >= 10e-6 || s <= 0)
        snprintf(buf, n, "%.0f us", s * 1e6);
    else
        snprintf(buf, n, "%.1f us", s * 1e6);
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

/* Does device 0 do phase p alone (the other devices spent next to nothing in
 * it), or every device at once?  Read from the numbers, not assumed: DP's
 * replicate and reduce are copies every device makes at the same time on
 * the CPU and under NCCL, but device 0's alone over peer copies. */
static bool dev0_alone(const report_stats_t *s, int ndev, int p)
{
    return phase_mean(s, 1, ndev - 1, p) < 0.1 * s->phase[0][p];
}

/* DP: what device 0 does alone while the others wait, what every device
 * spends at once on the synchronisation DP adds, and who waits for whom. */
static void why_dp(char *buf, size_t len, size_t *used, const run_result_t *r)
{
    if (r->ndev < 2 || r->times.n == 0)
        return;
    report_stats_t s;
    report_stats(r, NULL, &s);
    if (s.step_mean <= 0.0)
        return;
    item_t alone[PH_COUNT], shared[PH_COUNT];
    int na = 0, ns = 0;
    double serial = 0.0, sync = 0.0;
    for (int p = 0; p < PH_COUNT; p++) {
        /* forward and backward are the split computation; idle, skew and
         * hidden communication are no one's work */
        if (p == PH_FORWARD || p == PH_BACKWARD || p == PH_IDLE || p == PH_COMM_HIDDEN ||
            p == PH_SKEW)
            continue;
        double v0 = s.phase[0][p], vo = phase_mean(&s, 1, r->ndev - 1, p);
        if (v0 <= 0.0 && vo <= 0.0)
            continue;
        if (dev0_alone(&s, r->ndev, p)) {
            serial += v0;
            alone[na++] = (item_t){p, v0};
        } else {
            double v = v0 > vo ? v0 : vo;
            sync += v;
            shared[ns++] = (item_t){p, v};
        }
    }
    sort_items(alone, na);
    sort_items(shared, ns);
    char t[32], u[32], w[32];
    if (na > 0) {
        report_appendf(buf, len, used, "DP's device 0 works alone %s of its %s step (%.0f%%: ",
            fmt_short(t, sizeof t, serial), fmt_short(u, sizeof u, s.step_mean),
            100.0 * serial / s.step_mean);
        for (int i = 0; i < na && i < 4; i++)
            report_appendf(buf, len, used, "%s%s %s", i ? ", " : "",
                report_phase_label(MODE_DP, (phase_t)alone[i].phase),
                fmt_short(t, sizeof t, alone[i].v));
        report_appendf(buf, len, used, ") while the other devices wait");
    }
    if (ns > 0) {
        report_appendf(buf, len, used, "%severy device spends %s at the same time on what DP "
            "copies each step (", na ? "; " : "DP: ", fmt_short(t, sizeof t, sync));
        for (int i = 0; i < ns && i < 4; i++)
            report_appendf(buf, len, used, "%s%s %s", i ? ", " : "",
                report_phase_label(MODE_DP, (phase_t)shared[i].phase),
                fmt_short(t, sizeof t, shared[i].v));
        report_appendf(buf, len, used, ")");
    }
    /* the others' idle: device 0's serial work explains part of it; the
     * rest is waiting at barriers, which device 0 does too */
    double idle = phase_mean(&s, 1, r->ndev - 1, PH_IDLE), idle0 = s.phase[0][PH_IDLE];
    if (idle > 0.0) {
        double expl = idle < serial ? idle : serial;
        report_appendf(buf, len, used, "; the other devices sit idle %s per step",
            fmt_short(t, sizeof t, idle));
        if (idle - expl > 0.1 * idle)
            report_appendf(buf, len, used, ", %s of it while device 0 works alone and %s at "
                "barriers where device 0 waits too (its idle %s: the hand-offs between "
                "threads, and the slowest device)", fmt_short(t, sizeof t, expl),
                fmt_short(u, sizeof u, idle - expl), fmt_short(w, sizeof w, idle0));
        else
            report_appendf(buf, len, used, ": waiting for device 0's serial work");
    }
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

/* Why a multi-device run is faster or slower than single: what splitting
 * the batch saved of forward and backward against what the mode adds per
 * step (its synchronisation, device 0's serial work, the waits); a tiny
 * model is named as such when what it adds exceeds single's whole
 * computation, with the collective's latency floor when it was measured. */
static void why_verdict(char *buf, size_t len, size_t *used, const run_result_t *single,
                        const run_result_t *r, const predict_in_t *pred)
{
    if (!single || r->ndev < 2 || r->times.n == 0 || single->times.n == 0)
        return;
    report_stats_t s1, s;
    report_stats(single, NULL, &s1);
    report_stats(r, NULL, &s);
    bool ddp = r->mode == MODE_DDP;
    /* the split computation: forward and backward (and DDP's loss, which
     * each rank computes on its rows; DP's is device 0's, gather included) */
    double c1 = s1.phase[0][PH_FORWARD] + s1.phase[0][PH_BACKWARD] + (ddp ? s1.phase[0][PH_LOSS] : 0);
    double cr = s.phase[0][PH_FORWARD] + s.phase[0][PH_BACKWARD] + (ddp ? s.phase[0][PH_LOSS] : 0);
    double compute1 = c1 + (ddp ? 0.0 : s1.phase[0][PH_LOSS]) + s1.phase[0][PH_OPTIM];
    double saved = c1 - cr, added = s.step_mean - s1.step_mean + saved;
    /* what grew, and what shrank (a rank reads 1/K of the data): the
     * parts then add up to the total, not over it */
    item_t it[PH_COUNT], less[PH_COUNT];
    int n = 0, nl = 0;
    for (int p = 0; p < PH_COUNT; p++) {
        if (p == PH_FORWARD || p == PH_BACKWARD || p == PH_COMM_HIDDEN || (ddp && p == PH_LOSS))
            continue;
        double d = s.phase[0][p] - s1.phase[0][p];
        double floor = 0.05 * (added > 0 ? added : s.step_mean);
        if (d > floor)
            it[n++] = (item_t){p, d};
        else if (-d > floor)
            less[nl++] = (item_t){p, -d};
    }
    sort_items(it, n);
    sort_items(less, nl);
    char a[32], b[32], c[32], d[32];
    double speed = s.step_mean > 0 ? s1.step_mean / s.step_mean : 0.0;
    report_appendf(buf, len, used, "Why %s is %.2fx single: splitting the batch over %d devices "
        "took forward and backward from %s to %s per step (%s %s), while what %s adds costs %s "
        "per step", mode_title(r->mode), speed, r->ndev, fmt_short(a, sizeof a, c1),
        fmt_short(b, sizeof b, cr), saved >= 0 ? "saving" : "not less: longer by",
        fmt_short(c, sizeof c, fabs(saved)), mode_title(r->mode),
        fmt_short(d, sizeof d, added > 0 ? added : 0.0));
    if (n > 0) {
        report_appendf(buf, len, used, " on device 0 (");
        app_items(buf, len, used, it, n < 3 ? n : 3, r->mode, "");
        if (nl > 0) {
            report_appendf(buf, len, used, ", less ");
            app_items(buf, len, used, less, nl < 2 ? nl : 2, r->mode, "");
        }
        report_appendf(buf, len, used, ")");
    }
    report_appendf(buf, len, used, saved > added ? ": the split saves more than %s adds"
                                                 : ": %s adds more than the split saves",
                   mode_title(r->mode));
    if (added > compute1 && compute1 > 0) {
        report_appendf(buf, len, used, "; a tiny model, whose whole step computes in %s on one "
            "device, so the fixed cost of each synchronisation swamps the work it splits",
            fmt_short(a, sizeof a, compute1));
        double floor = pred && pred->all_reduce ? collperf_time_at(pred->all_reduce, 4096.0) : NAN;
        /* the floor explains the exposed time only when that is of its order */
        if (ddp && isfinite(floor) && floor > 0 && s.phase[0][PH_COMM_EXPOSED] >= 0.5 * floor)
            report_appendf(buf, len, used, " (an all-reduce of 4 KiB alone takes %s here: "
                "the latency floor, --mode comm)", fmt_short(b, sizeof b, floor));
    }
    report_appendf(buf, len, used, ". ");
}

/* At what model size DDP on this run's devices starts to beat single on
 * this machine: its measured steps, scaled by the alpha-beta model's
 * all-reduce (predict_crossover). */
static void why_crossover(char *buf, size_t len, size_t *used, const run_result_t *single,
                          const run_result_t *r, const predict_in_t *pred)
{
    if (!single || !pred || !pred->all_reduce || pred->param_bytes <= 0 || r->ndev < 2 ||
        r->ndev > PREDICT_MAX_DEVICES || r->times.n == 0 || single->times.n == 0)
        return;
    report_stats_t s1, s;
    report_stats(single, NULL, &s1);
    report_stats(r, NULL, &s);
    double g1 = s1.phase[0][PH_FORWARD] + s1.phase[0][PH_BACKWARD] + s1.phase[0][PH_OPTIM];
    double gr = phase_mean(&s, 0, r->ndev - 1, PH_FORWARD) +
                phase_mean(&s, 0, r->ndev - 1, PH_BACKWARD) +
                phase_mean(&s, 0, r->ndev - 1, PH_OPTIM);
    double scale, params = predict_crossover(pred, r->ndev, s1.step_mean, g1, s.step_mean, gr,
                                             &scale);
    double now = pred->param_bytes / sizeof(float);
    if (params < 0) {
        /* The measured split saved (almost) nothing: at this size forward and
         * backward are fixed costs.  The alpha-beta model alone, the split
         * ideal (each rank computing its share of the rows), says where it
         * would start to pay. */
        predict_row_t one, many;
        predict_row(pred, 1, &one);
        predict_row(pred, r->ndev, &many);
        double share = many.ddp_phase_s[PH_FORWARD] + many.ddp_phase_s[PH_BACKWARD] +
                       many.ddp_phase_s[PH_OPTIM];
        double g1m = pred->phase_s[PH_FORWARD] + pred->phase_s[PH_BACKWARD] +
                     pred->phase_s[PH_OPTIM];
        double sm, pm = predict_crossover(pred, r->ndev, one.ddp_step_s, g1m, many.ddp_step_s,
                                          share, &sm);
        report_appendf(buf, len, used, "Scaled up to %.0fx this model's %.3g parameters, DDP "
            "on %d devices never beats single from this run's steps: its forward and backward "
            "shrank too little on %d devices (fixed costs at this size, or devices that share "
            "cores)", PREDICT_SCALE_MAX, now, r->ndev, r->ndev);
        if (pm > 0 && sm <= 1.0 / PREDICT_SCALE_MAX)
            report_appendf(buf, len, used, "; the alpha-beta model alone, each rank computing "
                "its share of the rows, has DDP beating single at every size from 1/%.0f of "
                "this model up. ", PREDICT_SCALE_MAX);
        else if (pm > 0)
            report_appendf(buf, len, used, "; the alpha-beta model alone, each rank computing "
                "its share of the rows, has DDP beating single from about %.3g parameters "
                "(%.2gx this model). ", pm, sm);
        else
            report_appendf(buf, len, used, ", and the alpha-beta model alone finds no size "
                "either. ");
    }
    else if (scale <= 1.0 / PREDICT_SCALE_MAX)
        report_appendf(buf, len, used, "DDP on %d devices beats single at every size from "
            "1/%.0f of this model up (measured steps, the all-reduce scaled by its alpha-beta "
            "fit). ", r->ndev, PREDICT_SCALE_MAX);
    else
        report_appendf(buf, len, used, "The crossover: DDP on %d devices starts to beat single "
            "on this machine at about %.3g parameters, %.2gx this model's %.3g (its measured "
            "steps with compute and bytes grown with the parameters, the all-reduce by its "
            "alpha-beta fit). ", r->ndev, params, scale, now);
}

/* Memory at the peak: DP's device 0 against the others, DDP's equal split. */
static void why_memory(char *buf, size_t len, size_t *used, const run_result_t *dp,
                       const run_result_t *ddp, bool zero1)
{
    char a[32], b[32];
    if (dp && dp->ndev >= 2) {
        double other = 0.0, diff[MEM_KINDS] = {0};
        for (int d = 1; d < dp->ndev; d++)
            other += (double)dp->dev[d].mem_peak / (dp->ndev - 1);
        item_t it[MEM_KINDS];
        int n = 0;
        for (int k = 0; k < MEM_KINDS; k++) {
            double o = 0.0;
            for (int d = 1; d < dp->ndev; d++)
                o += (double)dp->dev[d].mem_split[k] / (dp->ndev - 1);
            diff[k] = (double)dp->dev[0].mem_split[k] - o;
            if (diff[k] > 0.01 * (double)dp->dev[0].mem_peak)
                it[n++] = (item_t){k, diff[k]};
        }
        sort_items(it, n);
        report_appendf(buf, len, used, "Memory: DP's device 0 peaks at %s, each other device at "
            "%s", report_fmt_bytes(a, sizeof a, (double)dp->dev[0].mem_peak),
            report_fmt_bytes(b, sizeof b, other));
        for (int i = 0; i < n; i++)
            report_appendf(buf, len, used, "%s%s more %s", i ? ", " : ": device 0 holds ",
                report_fmt_bytes(a, sizeof a, it[i].v), mem_kind_name((mem_kind_t)it[i].phase));
        if (n > 0)
            report_appendf(buf, len, used, " (the optimizer, the whole batch, the gathered "
                "outputs and their gradient live there)");
        report_appendf(buf, len, used, ". ");
    }
    if (ddp && ddp->ndev >= 2) {
        double lo = (double)ddp->dev[0].mem_peak, hi = lo;
        for (int d = 1; d < ddp->ndev; d++) {
            lo = fmin(lo, (double)ddp->dev[d].mem_peak);
            hi = fmax(hi, (double)ddp->dev[d].mem_peak);
        }
        report_appendf(buf, len, used, "DDP's %d devices each peak at %s", ddp->ndev,
            report_fmt_bytes(a, sizeof a, hi));
        if (hi - lo > 0.01 * hi)
            report_appendf(buf, len, used, " (the smallest %s)", report_fmt_bytes(b, sizeof b, lo));
        report_appendf(buf, len, used, zero1 ? ", the same split on every device; with --zero1 "
            "each holds 1/%d of the optimizer state (%s). "
            : ", the same split on every device: each holds the whole parameters, gradients "
            "and optimizer state (%d x %s of optimizer state in all). ", ddp->ndev,
            report_fmt_bytes(b, sizeof b, (double)ddp->dev[0].mem_split[MEM_OPTIM]));
    }
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

void report_compare_reason(char *buf, size_t len, const report_ctx_t *ctx,
                           const run_result_t *runs, int n)
{
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = 0;
    const run_result_t *single = find_mode(runs, n, MODE_SINGLE);
    const run_result_t *dp = find_mode(runs, n, MODE_DP);
    const run_result_t *ddp = find_mode(runs, n, MODE_DDP);
    const predict_in_t *pred = ctx ? ctx->pred : NULL;
    if (dp)
        why_verdict(buf, len, &used, single, dp, pred);
    if (ddp) {
        why_verdict(buf, len, &used, single, ddp, pred);
        why_crossover(buf, len, &used, single, ddp, pred);
    }
    why_memory(buf, len, &used, dp, ddp, ctx && ctx->cfg && ctx->cfg->zero1);
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
    if (c && c->zero1) /* the ddp column is ZeRO-1's */
        fprintf(f, ", ddp with --zero1");
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

        /* the memory story: each column's peak, and what it held by purpose
         * (DP's device 0 against the others; DDP's ranks alike) */
        /* in KiB when every peak is under 1 MiB: a tiny model's would read 0.00 MiB */
        double top = 0.0;
        for (int j = 0; j < npc; j++)
            for (int d = pc[j].first; d <= pc[j].last; d++)
                top = fmax(top, (double)pc[j].r->dev[d].mem_peak);
        double unit = top >= 1048576.0 ? 1048576.0 : 1024.0;
        fprintf(f, "\n  %-*s", LABEL_W, unit > 1024.0 ? "peak memory (MiB)" : "peak memory (KiB)");
        for (int j = 0; j < npc; j++)
            fprintf(f, "%*s", COL_W, pc[j].title);
        fputc('\n', f);
        for (int m = -1; m < MEM_KINDS; m++) {
            bool any = m < 0;
            for (int j = 0; j < npc && !any; j++)
                for (int d = pc[j].first; d <= pc[j].last; d++)
                    any |= pc[j].r->dev[d].mem_split[m] > 0;
            if (!any)
                continue;
            fprintf(f, "    %-*s", LABEL_W - 2, m < 0 ? "at the peak" : mem_kind_name((mem_kind_t)m));
            for (int j = 0; j < npc; j++) {
                double v = 0.0;
                for (int d = pc[j].first; d <= pc[j].last; d++)
                    v += (double)(m < 0 ? pc[j].r->dev[d].mem_peak : pc[j].r->dev[d].mem_split[m]);
                fprintf(f, "%*.2f", COL_W, v / (pc[j].last - pc[j].first + 1) / unit);
            }
            fputc('\n', f);
        }
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
    report_compare_reason(why, sizeof why, ctx, runs, n);
    if (why[0]) {
        fputc('\n', f);
        wrap(f, "  ", why, 96);
    }
#undef ROW
}

void report_run_reason(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *r)
{
    size_t used = 0;
    if (len == 0)
        return;
    buf[0] = 0;
    const predict_in_t *pred = ctx ? ctx->pred : NULL;
    if (!pred || pred->phase_s[PH_BACKWARD] <= 0 || r->ndev < 2 || r->mode == MODE_SINGLE)
        return;
    /* single's step, as --predict's single run measured it (its phases per step) */
    run_result_t *one = calloc(1, sizeof *one);
    if (!one)
        return;
    one->mode = MODE_SINGLE;
    one->ndev = 1;
    double step = 0.0;
    for (int p = 0; p < PH_COUNT; p++)
        if (p != PH_COMM_HIDDEN) {
            one->dev[0].phase_s[p] = pred->phase_s[p];
            step += pred->phase_s[p];
        }
    step_times_add(&one->times, step, 0);
    why_verdict(buf, len, &used, one, r, pred);
    if (r->mode == MODE_DDP)
        why_crossover(buf, len, &used, one, r, pred);
    free(one);
    while (used > 0 && buf[used - 1] == ' ')
        buf[--used] = 0;
}
