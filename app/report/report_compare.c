/* app/report/report_compare.c: compare mode's view, one screen: the runs side
 * by side, the per-phase split and peak memory of each column, whether the
 * final parameters agree (docs/results.md says why two measures), then
 * report_why.c's sentences and notes. */
#include <math.h>
#include <string.h>

#include "app/report/report.h"

#define LABEL_W 26
#define COL_W 13
#define WRAP_W 96 /* the sentences' width */
#define MAX_RUNS 9 /* single, dp, ddp, and --zero's or --precision's further columns */

/* A run's column: its mode, "zero-N", or "MODE PREC" at another precision. */
static const char *run_label(const run_result_t *r, const run_result_t *first, char *buf,
                             size_t size)
{
    if (strategy_words(r->mode)->ranks && r->zero) {
        snprintf(buf, size, "zero-%d", r->zero);
        return buf;
    }
    if (r->precision != first->precision) {
        snprintf(buf, size, "%s %s", mode_name(r->mode), precision_name(r->precision));
        return buf;
    }
    return mode_name(r->mode);
}

/* The single run at precision p: a column's reference. */
static const run_result_t *find_ref(const run_result_t *runs, int n, precision_t p)
{
    for (int i = 0; i < n; i++)
        if (strategy_words(runs[i].mode)->reference && runs[i].precision == p)
            return &runs[i];
    return NULL;
}

/* The last device slot a one-column figure of r averages: every rank when
 * they are alike, else device 0. */
static int alike_last(const run_result_t *r)
{
    return strategy_words(r->mode)->ranks ? r->ndev - 1 : 0;
}

/* The compute and the communication waited for per step of r's one-column
 * devices, for compare's precision rows. */
static const phase_t compute_ph[] = {PH_FORWARD, PH_LOSS, PH_BACKWARD, PH_OPTIM},
                     waited_ph[] = {PH_SCATTER, PH_REPLICATE, PH_COMM_EXPOSED, PH_GATHER};

static double col_sum(const report_stats_t *st, const run_result_t *r, const phase_t *ph)
{
    double t = 0.0;
    for (int k = 0; k < 4; k++)
        t += report_phase_mean(st, 0, alike_last(r), ph[k]);
    return t;
}

// ---------------------------------------------------------------------------
// the side-by-side table

typedef struct {
    const run_result_t *r;
    int first, last; /* device slots averaged */
    char title[COL_W + 1];
} pcol_t;

/* What the pieces of compare's view share. */
typedef struct {
    FILE *f;
    const report_ctx_t *ctx;
    const config_t *c;                  /* the user's config, or NULL */
    const run_result_t *runs;
    int n;
    int nbase;                          /* the first of --zero's or --precision's extra columns */
    bool precs;                         /* they are --precision's */
    const run_result_t *ref;            /* single at the first precision, or NULL */
    const run_result_t *refs[MAX_RUNS]; /* each run's single, of its own precision */
    report_stats_t *s;                  /* each run's figures */
    double k;                           /* the phase tables' unit per second: 1e3 or 1e6 */
    pcol_t pc[2 * MAX_RUNS];            /* the phase split's columns */
    int npc;
} cmp_t;

static void wrap(FILE *f, const char *indent, const char *text)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", text);
    int in = (int)strlen(indent), col = in;
    fputs(indent, f);
    for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
        int wl = (int)strlen(w);
        if (col > in && col + 1 + wl > WRAP_W) {
            fprintf(f, "\n%s", indent);
            col = in;
        } else if (col > in) {
            fputc(' ', f);
            col++;
        }
        fputs(w, f);
        col += wl;
    }
    fputc('\n', f);
}

static void cmp_init(cmp_t *x, FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n)
{
    /* 117 KB: not on the stack (docs/faults.md); one thread prints reports */
    static report_stats_t s[MAX_RUNS];
    *x = (cmp_t){.f = f, .ctx = ctx, .c = ctx ? ctx->cfg : NULL, .runs = runs, .s = s,
                 .n = n > MAX_RUNS ? MAX_RUNS : n};
    n = x->n;
    x->ref = n ? find_ref(runs, n, runs[0].precision) : NULL;
    double slowest = 0.0;
    for (int i = 0; i < n; i++) {
        x->refs[i] = find_ref(runs, n, runs[i].precision);
        report_stats(&runs[i], x->refs[i], &s[i]);
        slowest = fmax(slowest, s[i].step_mean);
    }
    x->k = slowest >= 1e-3 ? 1e3 : 1e6;
    /* --zero's or --precision's extra columns (the verdicts read the first three) */
    x->nbase = n;
    for (int i = 0; i < n && x->nbase == n; i++)
        if ((strategy_words(runs[i].mode)->ranks && runs[i].zero) ||
            runs[i].precision != runs[0].precision)
            x->nbase = i;
    x->precs = x->nbase < n && runs[x->nbase].precision != runs[0].precision;
}

/* "compare: mlp-small on cpu, 2 devices, ...": what ran, on one line. */
static void cmp_title(const cmp_t *x)
{
    FILE *f = x->f;
    const config_t *c = x->c;
    const run_result_t *runs = x->runs;
    int n = x->n, ndev = 0;
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
    if (x->precs) {
        fprintf(f, ", precision %s", precision_name(runs[0].precision));
        for (int i = x->nbase; i < n; i++)
            if (runs[i].precision != runs[i - 1].precision)
                fprintf(f, " then %s", precision_name(runs[i].precision));
    } else if (x->nbase < n) {
        fprintf(f, ", ZeRO stage");
        for (int i = x->nbase; i < n; i++)
            fprintf(f, "%s %d", i == x->nbase ? "" : ",", runs[i].zero);
        fprintf(f, " beside ddp");
    }
    fputc('\n', f);
}

/* One row of the side-by-side table: its label, then each run's cell. */
#define ROW(label, ...)                                                                    \
    do {                                                                                   \
        fprintf(f, "  %-*s", LABEL_W, label);                                              \
        for (int i = 0; i < x->n; i++) {                                                   \
            const run_result_t *r = &x->runs[i];                                           \
            const report_stats_t *st = &x->s[i];                                           \
            (void)r, (void)st;                                                             \
            __VA_ARGS__;                                                                   \
        }                                                                                  \
        fputc('\n', f);                                                                    \
    } while (0)

/* The runs side by side. */
static void cmp_rows(const cmp_t *x)
{
    FILE *f = x->f;
    char a[32], lb[COL_W + 1];
    fprintf(f, "  %-*s", LABEL_W, "");
    for (int i = 0; i < x->n; i++)
        fprintf(f, "%*s", COL_W, run_label(&x->runs[i], &x->runs[0], lb, sizeof lb));
    fputc('\n', f);
    ROW("devices", fprintf(f, "%*d", COL_W, r->ndev));
    ROW("throughput (samples/s)", fprintf(f, "%*.1f", COL_W, r->samples_per_s));
    if (x->ref) {
        ROW(x->precs ? "speed-up vs its single" : "speed-up vs single",
            fprintf(f, "%*.2fx", COL_W - 1, r == x->refs[i] || !x->refs[i] ? 1.0 : st->speedup));
        ROW("scaling efficiency",
            fprintf(f, "%*.0f%%", COL_W - 1,
                    100.0 * (r == x->refs[i] || !x->refs[i] ? 1.0 : st->efficiency)));
    }
    ROW("GFLOP/s per device", fprintf(f, "%*.1f", COL_W, 1e-9 * st->flops_all / r->ndev));
    ROW("share of peak", isfinite(st->share_all)
                             ? fprintf(f, "%*.0f%%", COL_W - 1, 100.0 * st->share_all)
                             : fprintf(f, "%*s", COL_W, "-"));
    ROW("step time mean", fprintf(f, "%*s", COL_W, report_fmt_time(a, sizeof a, st->step_mean)));
    ROW("step time p95", fprintf(f, "%*s", COL_W, report_fmt_time(a, sizeof a, st->step_p95)));
    ROW("final loss", fprintf(f, "%*.6f", COL_W, r->final_loss));
    if (x->ref)
        ROW(x->precs ? "params vs its single" : "params vs single",
            fprintf(f, "%*s", COL_W,
                    r == x->refs[i]        ? "-"
                    : !st->params_compared ? "n/a"
                    : st->agree            ? "agree"
                                           : "DIFFER"));
    /* --precision's list: the compute and the communication waited for */
    if (!x->precs)
        return;
    double k = x->k;
    ROW(k == 1e3 ? "compute per step (ms)" : "compute per step (us)",
        fprintf(f, "%*.3f", COL_W, col_sum(st, r, compute_ph) * k));
    ROW(k == 1e3 ? "comm waited per step (ms)" : "comm waited per step (us)",
        fprintf(f, "%*.3f", COL_W, col_sum(st, r, waited_ph) * k));
    ROW("comm waited, % of step",
        strategy_words(r->mode)->reference || !(st->step_mean > 0.0)
            ? fprintf(f, "%*s", COL_W, "-")
            : fprintf(f, "%*.1f%%", COL_W - 1,
                      100.0 * col_sum(st, r, waited_ph) / st->step_mean));
}
#undef ROW

/* The phase split's columns: device 0 and the mean of the others per
 * multi-device run; one column for --zero's or another precision's. */
static void cmp_columns(cmp_t *x)
{
    char lb[COL_W + 1];
    const run_result_t *first = &x->runs[0];
    x->npc = 0;
    for (int i = 0; i < x->n; i++) {
        const run_result_t *r = &x->runs[i];
        pcol_t *pc = &x->pc[x->npc];
        if (r->times.n == 0)
            continue;
        x->npc++;
        if (strategy_words(r->mode)->ranks && r->zero) { /* its ranks alike: their mean */
            *pc = (pcol_t){r, 0, r->ndev - 1, ""};
            snprintf(pc->title, COL_W + 1, "%s", run_label(r, first, lb, sizeof lb));
        } else if (r->precision != first->precision) {
            /* ddp's ranks' mean, dp's device 0 (its reduce) */
            *pc = (pcol_t){r, 0, alike_last(r), ""};
            snprintf(pc->title, COL_W + 1,
                     strategy_words(r->mode)->lead && r->ndev > 1 ? "%s dev0" : "%s",
                     run_label(r, first, lb, sizeof lb));
        } else {
            *pc = (pcol_t){r, 0, 0, ""};
            snprintf(pc->title, COL_W + 1, r->ndev > 1 ? "%s dev0" : "%s", mode_name(r->mode));
            if (r->ndev > 1) {
                x->pc[x->npc] = (pcol_t){r, 1, r->ndev - 1, ""};
                snprintf(x->pc[x->npc++].title, COL_W + 1, "%s others", mode_name(r->mode));
            }
        }
    }
}

/* Each column's time per step by phase, their sum and the step. */
static void cmp_phases(const cmp_t *x)
{
    FILE *f = x->f;
    double k = x->k;
    fprintf(f, "\n  %-*s", LABEL_W, k == 1e3 ? "time per step (ms)" : "time per step (us)");
    for (int j = 0; j < x->npc; j++)
        fprintf(f, "%*s", COL_W, x->pc[j].title);
    fputc('\n', f);
    for (int p = 0; p < PH_COUNT; p++) {
        bool any = false;
        for (int i = 0; i < x->n; i++)
            any |= report_phase_shown(&x->s[i], x->runs[i].ndev, (phase_t)p, k);
        if (!any)
            continue;
        const char *label = p == PH_LOSS          ? "loss (dp: gather+loss)"
                            : p == PH_COMM_EXPOSED ? "comm exposed (dp: reduce)"
                            : p == PH_COMM_HIDDEN  ? "comm hidden (in bwd)"
                                                   : phase_name((phase_t)p);
        fprintf(f, "    %-*s", LABEL_W - 2, label);
        for (int j = 0; j < x->npc; j++)
            fprintf(f, "%*.3f", COL_W,
                    report_phase_mean(&x->s[x->pc[j].r - x->runs], x->pc[j].first, x->pc[j].last,
                                      p) * k);
        fputc('\n', f);
    }
    /* the phases add up to the step (comm hidden overlaps backward) */
    fprintf(f, "    %-*s", LABEL_W - 2, "sum of phases");
    for (int j = 0; j < x->npc; j++) {
        const pcol_t *pc = &x->pc[j];
        double sum = 0.0;
        for (int d = pc->first; d <= pc->last; d++)
            sum += report_phase_sum(&x->s[pc->r - x->runs], d);
        fprintf(f, "%*.3f", COL_W, sum / (double)(pc->last - pc->first + 1) * k);
    }
    fprintf(f, "\n    %-*s", LABEL_W - 2, "step (wall)");
    for (int j = 0; j < x->npc; j++)
        fprintf(f, "%*.3f", COL_W, x->s[x->pc[j].r - x->runs].step_mean * k);
    fputc('\n', f);
}

/* Each column's peak memory and what it held by purpose: the optimizer state,
 * what ZeRO shards with its columns, every purpose under --explain. */
static void cmp_memory(const cmp_t *x)
{
    FILE *f = x->f;
    /* in KiB when every peak is under 1 MiB: a tiny model's would read 0.00 MiB */
    double top = 0.0;
    for (int j = 0; j < x->npc; j++)
        for (int d = x->pc[j].first; d <= x->pc[j].last; d++)
            top = fmax(top, (double)x->pc[j].r->dev[d].mem_peak);
    double unit = top >= 1048576.0 ? 1048576.0 : 1024.0;
    bool every = x->c && x->c->explain, sharded = x->nbase < x->n;
    for (int m = -1; m < MEM_KINDS; m++) {
        if (!every && m >= 0 && m != MEM_OPTIM &&
            !(sharded && (m == MEM_PARAMS || m == MEM_GRADS)))
            continue;
        bool any = m < 0;
        for (int j = 0; j < x->npc && !any; j++)
            for (int d = x->pc[j].first; d <= x->pc[j].last; d++)
                any |= x->pc[j].r->dev[d].mem_split[m] > 0;
        if (!any)
            continue;
        if (m < 0)
            fprintf(f, "  %-*s", LABEL_W, unit > 1024.0 ? "peak memory (MiB)" : "peak memory (KiB)");
        else
            fprintf(f, "    %-*s", LABEL_W - 2, mem_kind_name((mem_kind_t)m));
        for (int j = 0; j < x->npc; j++) {
            const pcol_t *pc = &x->pc[j];
            double v = 0.0;
            for (int d = pc->first; d <= pc->last; d++)
                v += (double)(m < 0 ? pc->r->dev[d].mem_peak : pc->r->dev[d].mem_split[m]);
            fprintf(f, "%*.2f", COL_W, v / (pc->last - pc->first + 1) / unit);
        }
        fputc('\n', f);
    }
}

/* Lines of text, one paragraph each, wrapped under indent. */
static void wrap_lines(FILE *f, const char *indent, char *text)
{
    for (char *p = text, *nl; *p; p = nl ? nl + 1 : p + strlen(p)) {
        if ((nl = strchr(p, '\n')))
            *nl = 0;
        wrap(f, indent, p);
    }
}

/* The samples every mode read, and each run's parameters against its single's. */
static void cmp_contract(const cmp_t *x)
{
    FILE *f = x->f;
    char line[1024], lb[COL_W + 1];
    fputc('\n', f);
    report_stream_note(line, sizeof line, x->ctx, x->ref);
    wrap_lines(f, "  ", line);
    bool said = false;
    for (int i = 0; i < x->n; i++) {
        const run_result_t *r = &x->runs[i];
        const report_stats_t *st = &x->s[i];
        if (r == x->refs[i])
            continue;
        bool other = r->precision != x->runs[0].precision;
        fprintf(f, "  parameters: %s vs single%s%s ", run_label(r, &x->runs[0], lb, sizeof lb),
                other ? " " : "", other ? precision_name(r->precision) : "");
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
            report_differ_cause(line, sizeof line, x->ctx, r, x->refs[i] ? x->refs[i] : x->ref,
                                said);
            if (line[0])
                wrap(f, "    ", line);
            said = true;
        }
    }
}

/* The sentences and the notes; --explain's narrative after them. */
static void cmp_sentences(const cmp_t *x)
{
    FILE *f = x->f;
    char why[4096];
    report_compare_verdict(why, sizeof why, x->ctx, x->runs, x->nbase);
    if (why[0])
        fputc('\n', f);
    wrap_lines(f, "  ", why);
    char notes[4][256];
    int nn = report_compare_notes(x->ctx, x->runs, x->nbase, notes, 4);
    for (int i = 0; i < nn; i++) {
        char line[sizeof notes[0] + 8];
        snprintf(line, sizeof line, "note: %.*s", (int)sizeof notes[i] - 1, notes[i]);
        wrap(f, "  ", line);
    }
    if (!x->c || !x->c->explain)
        return;
    report_compare_why(why, sizeof why, x->ctx, x->runs, x->nbase);
    if (why[0]) {
        fputc('\n', f);
        wrap(f, "  ", why);
    }
    report_compare_reason(why, sizeof why, x->ctx, x->runs, x->nbase);
    if (why[0]) {
        fputc('\n', f);
        wrap(f, "  ", why);
    }
}

void report_compare(FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n)
{
    static cmp_t x; /* its columns and pointers: off the stack, like its figures */
    cmp_init(&x, f, ctx, runs, n);
    cmp_title(&x);
    cmp_rows(&x);
    cmp_columns(&x);
    if (x.npc > 0) {
        cmp_phases(&x);
        cmp_memory(&x);
    }
    if (x.ref)
        cmp_contract(&x);
    cmp_sentences(&x);
}
