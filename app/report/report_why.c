/* app/report/report_why.c: the sentences (compare's verdict and notes,
 * --explain's why and reason), each built from figures the run measured, every
 * threshold named below.  What a figure means is told once in docs/results.md;
 * a sentence here says what this run's numbers show. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/report/report.h"

#define WHY_DESCHED 0.05   /* descheduled time named above this fraction of the step */
#define WHY_ALONE 0.1      /* device 0's alone: the others spend under this of its time */
#define WHY_IDLE_REST 0.1  /* the others' idle beyond device 0's serial work named above */
#define WHY_GAP_PART 0.02  /* a phase named among a gap's parts above this of the gap */
#define WHY_PART 0.05      /* ... and among what a mode adds over single */
#define WHY_LATENCY_BYTES 4096.0 /* the all-reduce's latency floor: its time at this size */
#define WHY_FLOOR_ORDER 0.5 /* the floor explains exposed time of at least this multiple */
/* One run has no interval: modes differ only beyond this, or the run's own
 * (p95 - p50) / p50 when larger (spreads of 1.04-1.31 between quiet runs,
 * docs/benchmarks.md). */
#define WHY_ONE_RUN_NOISE 0.10

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

static const char *mode_title(mode_t_ m) { return strategy_words(m)->title; }

/* A run's figures with the machine's share moved into PH_DESCHED; returns what
 * moved, until the next call. */
static const report_machine_t *stats_of(const run_result_t *r, report_stats_t *s)
{
    static report_machine_t m; /* 7 KB: not on the stack (docs/faults.md) */
    report_stats(r, NULL, s);
    report_stats_apportion(s, r->ndev, &m);
    return &m;
}

/* A wait, "<verb> 250 us<tail>" (the strategy's share s), or "<verb> only for a
 * device that was descheduled: ..." when only the machine's share m is worth
 * naming; app_wait_machine adds m after the caller's words.  Returns whether
 * the strategy had a share. */
static bool app_wait(char *buf, size_t len, size_t *used, const char *verb, double s,
                     const char *tail, double m, double step)
{
    char t[32];
    bool named = m > WHY_DESCHED * step, own = s >= 0.5e-6 || !named;
    if (own)
        report_appendf(buf, len, used, "%s %s%s", verb, fmt_short(t, sizeof t, s), tail);
    else
        report_appendf(buf, len, used, "%s only for a device that was descheduled: %s (the "
                       "machine's)", verb, fmt_short(t, sizeof t, m));
    return own;
}

static void app_wait_machine(char *buf, size_t len, size_t *used, bool own, double m, double step)
{
    char t[32];
    if (own && m > WHY_DESCHED * step)
        report_appendf(buf, len, used, ", and %s more waiting for a device that was descheduled "
                       "(the machine's)", fmt_short(t, sizeof t, m));
}

/* The entry points' start: buf emptied (false: no room), the first run of each
 * mode; their end: trailing characters of trim dropped. */
typedef struct {
    size_t used;
    const run_result_t *single, *dp, *ddp;
} tell_t;

static bool tell_begin(tell_t *t, char *buf, size_t len, const run_result_t *runs, int n)
{
    *t = (tell_t){0};
    for (int i = n - 1; i >= 0; i--) /* backwards: the first of each stays */
        if (strategy_words(runs[i].mode)->reference)
            t->single = &runs[i];
        else if (strategy_words(runs[i].mode)->lead)
            t->dp = &runs[i];
        else if (strategy_words(runs[i].mode)->ranks)
            t->ddp = &runs[i];
    if (len > 0)
        buf[0] = 0;
    return len > 0;
}

static void tell_end(tell_t *t, char *buf, const char *trim)
{
    while (t->used > 0 && strchr(trim, buf[t->used - 1]))
        buf[--t->used] = 0;
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
    for (int i = 0; i < k; i++) /* PH_DESCHED holds the machine time */
        report_appendf(buf, len, used, "%s%s%s %s", i == 0 ? "" : i == k - 1 ? " and " : ", ",
            fmt_short(t, sizeof t, it[i].v), more, it[i].phase == PH_DESCHED ? "machine time"
            : report_phase_label(m, (phase_t)it[i].phase));
}

// ---------------------------------------------------------------------------
// telling two runs apart

/* Whether run a's throughput is beyond run b's noise: --repeat's 95% intervals
 * decide, else one run's noise (WHY_ONE_RUN_NOISE or the step-time spread) and
 * whether the machine decided it (docs/results.md). */
typedef struct {
    int sign;        /* +1 a faster, -1 b faster, 0 cannot tell */
    bool intervals;  /* decided by --repeat's intervals */
    bool machine;    /* one run: the machine's time explains the difference */
    int nruns;       /* the runs behind each interval */
    double diff;     /* |a - b| / the slower's throughput */
    double noise;    /* one run: the fraction below which it cannot tell */
    double m[2], step[2]; /* a's and b's machine time and step (seconds per step) */
    mode_t_ who[2];       /* a's and b's modes */
} apart_t;

/* A run's machine time per step (device 0's) and its step. */
static double machine_time(const run_result_t *r, double *step)
{
    static report_stats_t s; /* 26 KB: not on the stack (docs/faults.md) */
    stats_of(r, &s);
    *step = s.step_mean;
    return s.phase[0][PH_DESCHED];
}

/* Does the machine decide two runs' comparison: their machine times differ by
 * more than the rest of their steps, and one is worth naming?  m, step: each's. */
static bool machine_decides(const run_result_t *a, const run_result_t *b, double m[2],
                            double step[2])
{
    m[0] = machine_time(a, &step[0]);
    m[1] = machine_time(b, &step[1]);
    return fabs(m[0] - m[1]) > fabs((step[0] - m[0]) - (step[1] - m[1])) &&
           fmax(m[0], m[1]) > WHY_DESCHED * fmax(step[0], step[1]);
}

static const repeat_t *reps_of(const report_ctx_t *ctx, const run_result_t *runs,
                               const run_result_t *r)
{
    if (!ctx || !ctx->reps || !runs)
        return NULL;
    const repeat_t *rp = ctx->reps[r - runs];
    return rp && rp->n >= 2 ? rp : NULL;
}

/* A run's throughput: with --repeat, the median over its runs. */
static double tp_of(const report_ctx_t *ctx, const run_result_t *runs, const run_result_t *r)
{
    const repeat_t *rp = reps_of(ctx, runs, r);
    return rp ? repeat_interval(rp, FIG_THROUGHPUT).median : r->samples_per_s;
}

static apart_t told_apart(const report_ctx_t *ctx, const run_result_t *runs, const run_result_t *a,
                          const run_result_t *b)
{
    apart_t ap = {.nruns = 1, .noise = WHY_ONE_RUN_NOISE};
    double ta = tp_of(ctx, runs, a), tb = tp_of(ctx, runs, b);
    double slow = fmin(ta, tb);
    ap.diff = slow > 0 ? fabs(ta - tb) / slow : 0.0;
    const repeat_t *ra = reps_of(ctx, runs, a), *rb = reps_of(ctx, runs, b);
    if (ra && rb) {
        interval_t ia = repeat_interval(ra, FIG_THROUGHPUT), ib = repeat_interval(rb, FIG_THROUGHPUT);
        ap.intervals = true;
        ap.nruns = ra->n < rb->n ? ra->n : rb->n;
        ap.sign = ia.lo > ib.hi ? 1 : ib.lo > ia.hi ? -1 : 0;
        return ap;
    }
    const run_result_t *two[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        report_stats_t s;
        report_stats(two[i], NULL, &s);
        if (s.step_p50 > 0 && (s.step_p95 - s.step_p50) / s.step_p50 > ap.noise)
            ap.noise = (s.step_p95 - s.step_p50) / s.step_p50;
    }
    ap.machine = machine_decides(a, b, ap.m, ap.step);
    ap.who[0] = a->mode, ap.who[1] = b->mode;
    ap.sign = ap.diff <= ap.noise || ap.machine ? 0 : ta > tb ? 1 : -1;
    return ap;
}

/* Why a difference was called one. */
static void app_apart_why(char *buf, size_t len, size_t *used, const apart_t *ap)
{
    if (ap->intervals)
        report_appendf(buf, len, used, " (their 95%% intervals over %d runs do not overlap)",
                       ap->nruns);
    else
        report_appendf(buf, len, used, ", beyond one run's noise (%.0f%%)", 100.0 * ap->noise);
}

static void app_not_apart(char *buf, size_t len, size_t *used, const apart_t *ap, mode_t_ a,
                          mode_t_ b)
{
    char x[32], y[32];
    if (ap->intervals)
        report_appendf(buf, len, used, "; their 95%% intervals over %d runs overlap: neither is "
                       "faster here", ap->nruns);
    else if (ap->machine)
        report_appendf(buf, len, used, "; %s and %s differ by %.0f%%, which the machine's time "
                       "explains (%s of %s's step, %s of %s's; --repeat 5 or a quieter machine "
                       "tells)", mode_title(a), mode_title(b), 100.0 * ap->diff,
                       fmt_short(x, sizeof x, ap->m[0]), mode_title(ap->who[0]),
                       fmt_short(y, sizeof y, ap->m[1]), mode_title(ap->who[1]));
    else
        report_appendf(buf, len, used, "; %s and %s differ by %.0f%%, within one run's noise "
                       "(%.0f%%; --repeat 5 gives intervals)", mode_title(a), mode_title(b),
                       100.0 * ap->diff, 100.0 * ap->noise);
}

/* DP's phases split: device 0's alone (alone[], serial in all) and every
 * device's at once (shared[], sync in all), largest first; false when the run
 * has no multi-device step. */
typedef struct {
    item_t alone[PH_COUNT], shared[PH_COUNT];
    int na, ns;
    double serial, sync;
} dp_split_t;

static bool dp_split(const run_result_t *r, report_stats_t *s, dp_split_t *o,
                     const report_machine_t **m)
{
    int ndev = r->ndev;
    if (ndev < 2 || r->times.n == 0)
        return false;
    *m = stats_of(r, s);
    if (s->step_mean <= 0.0)
        return false; /* nothing to tell */
    memset(o, 0, sizeof *o);
    for (int p = 0; p < PH_COUNT; p++) {
        if (p == PH_FORWARD || p == PH_BACKWARD || p == PH_IDLE || p == PH_COMM_HIDDEN ||
            p == PH_SKEW || p == PH_DESCHED)
            continue;
        double v0 = s->phase[0][p], vo = report_phase_mean(s, 1, ndev - 1, p);
        if (v0 <= 0.0 && vo <= 0.0)
            continue;
        /* device 0 alone?  Read from the numbers, not assumed: DP's copies are every
         * device's at once on the CPU and NCCL, device 0's over peers */
        if (vo < WHY_ALONE * v0) {
            o->serial += v0;
            o->alone[o->na++] = (item_t){p, v0};
        } else {
            o->sync += fmax(v0, vo);
            o->shared[o->ns++] = (item_t){p, fmax(v0, vo)};
        }
    }
    sort_items(o->alone, o->na);
    sort_items(o->shared, o->ns);
    return true;
}

/* "optimizer 157 us, gather+loss 40 us" (times: with each one's time) */
static void app_phases(char *buf, size_t len, size_t *used, const item_t *it, int n, bool times)
{
    char t[32];
    for (int i = 0; i < n && i < 4; i++)
        report_appendf(buf, len, used, "%s%s%s%s", i ? ", " : "",
            report_phase_label(MODE_DP, (phase_t)it[i].phase), times ? " " : "",
            times ? fmt_short(t, sizeof t, it[i].v) : "");
}

/* "DP's device 0 works alone 1.20 ms of its 4.10 ms step (29%: optimizer" */
static void app_dev0_alone(char *buf, size_t len, size_t *used, const report_stats_t *s,
                           const dp_split_t *sp, int n, bool times)
{
    char t[32], u[32];
    report_appendf(buf, len, used, "DP's device 0 works alone %s of its %s step (%.0f%%: ",
        fmt_short(t, sizeof t, sp->serial), fmt_short(u, sizeof u, s->step_mean),
        100.0 * sp->serial / s->step_mean);
    app_phases(buf, len, used, sp->alone, n, times);
}

/* The devices descheduled more than WHY_DESCHED of the step (at most two). */
static void app_desched(char *buf, size_t len, size_t *used, const run_result_t *r,
                        const report_stats_t *s, const report_machine_t *m)
{
    int shown = 0;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES && shown < 2; d++) {
        double v = m->desched[d];
        if (!(v > WHY_DESCHED * s->step_mean))
            continue;
        char t[32];
        report_appendf(buf, len, used, "%s %s %d %s", shown ? "," : ";",
                       strategy_words(r->mode)->member, d, fmt_short(t, sizeof t, v));
        shown++;
    }
    if (shown)
        report_appendf(buf, len, used, " a step descheduled (another process had %s core: not "
                       "idle, not work)", shown > 1 ? "their" : "its");
}

/* The machine's share of the idle time of devices first..ndev-1, their mean. */
static double machine_idle(const run_result_t *r, const report_machine_t *m, int first)
{
    double sum = 0.0;
    for (int d = first; d < r->ndev && d < MAX_DEVICES; d++)
        sum += m->machine[d][PH_IDLE];
    return r->ndev > first ? sum / (r->ndev - first) : 0.0;
}

/* DP: what device 0 does alone while the others wait, what every device
 * spends at once on the synchronisation DP adds, and who waits for whom. */
static void why_dp(char *buf, size_t len, size_t *used, const run_result_t *r)
{
    static report_stats_t s; /* 26 KB: not on the stack (docs/faults.md) */
    dp_split_t sp;
    const report_machine_t *mm;
    if (!dp_split(r, &s, &sp, &mm))
        return;
    double serial = sp.serial;
    char t[32], u[32], w[32];
    if (sp.na > 0) {
        app_dev0_alone(buf, len, used, &s, &sp, sp.na, true);
        report_appendf(buf, len, used, ") while the other devices wait");
    }
    if (sp.ns > 0) {
        report_appendf(buf, len, used, "%severy device spends %s at the same time on what DP "
            "copies each step (", sp.na ? "; " : "DP: ", fmt_short(t, sizeof t, sp.sync));
        app_phases(buf, len, used, sp.shared, sp.ns, true);
        report_appendf(buf, len, used, ")");
    }
    /* the others' idle: device 0's serial work explains part of it; the
     * rest is waiting for each other, which device 0 does too */
    double idle = report_phase_mean(&s, 1, r->ndev - 1, PH_IDLE), idle0 = s.phase[0][PH_IDLE];
    double mi = machine_idle(r, mm, 1);
    if ((idle > 0.0 || mi > 0.0) &&
        app_wait(buf, len, used, "; the other devices sit idle", idle, " per step", mi, s.step_mean)) {
        double expl = idle < serial ? idle : serial;
        if (idle - expl > WHY_IDLE_REST * idle)
            report_appendf(buf, len, used, ", %s of it while device 0 works alone and %s at "
                "hand-offs where device 0 waits too (its idle %s: the hand-offs between "
                "threads, and the slowest device)", fmt_short(t, sizeof t, expl),
                fmt_short(u, sizeof u, idle - expl), fmt_short(w, sizeof w, idle0));
        else
            report_appendf(buf, len, used, ": waiting for device 0's serial work");
        app_wait_machine(buf, len, used, true, mi, s.step_mean);
    }
    app_desched(buf, len, used, r, &s, mm);
    report_appendf(buf, len, used, ". ");
}

/* DDP: how much of the all-reduce ran during backward and how much the step
 * waited for.  Not "saved": that takes a --no-overlap run (on shared cores the
 * comm thread takes its time from backward). */
static void why_ddp(char *buf, size_t len, size_t *used, const run_result_t *r, bool no_overlap)
{
    if (r->ndev < 2 || r->times.n == 0)
        return;
    static report_stats_t s; /* 26 KB: not on the stack (docs/faults.md) */
    const report_machine_t *mm = stats_of(r, &s);
    double hidden = report_phase_mean(&s, 0, r->ndev - 1, PH_COMM_HIDDEN);
    double exposed = report_phase_mean(&s, 0, r->ndev - 1, PH_COMM_EXPOSED), m = 0.0;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++)
        m += mm->machine[d][PH_COMM_EXPOSED] / r->ndev;
    char a[32], b[48];
    if (!no_overlap && hidden + exposed + m <= 0.0)
        return;
    bool own;
    if (no_overlap || hidden <= 0.0) { /* (compare's verdict names --no-overlap) */
        report_appendf(buf, len, used, "DDP %s: every step", no_overlap ? "ran with --no-overlap"
                       : "overlaps none of its all-reduce with backward");
        snprintf(b, sizeof b, " for %s after backward", no_overlap ? "its all-reduce" : "it");
        own = app_wait(buf, len, used, " waits", exposed, b, m, s.step_mean);
    } else {
        report_appendf(buf, len, used, "DDP ran %.0f%% of its all-reduce (%s) during backward",
            100.0 * hidden / (hidden + exposed + m), fmt_short(a, sizeof a, hidden));
        own = app_wait(buf, len, used, " and waited", exposed, " for the rest", m, s.step_mean);
    }
    app_wait_machine(buf, len, used, own, m, s.step_mean);
    report_appendf(buf, len, used, "%s. ", no_overlap || hidden <= 0.0 ? "" :
                   "; what overlap saved is not measured (--no-overlap)");
}

/* The faster of two runs against the slower: the phases where the slower
 * one's device 0 spends more time. */
static void why_gap(char *buf, size_t len, size_t *used, const report_ctx_t *ctx,
                    const run_result_t *runs, const run_result_t *x, const run_result_t *y)
{
    if (x->times.n == 0 || y->times.n == 0)
        return;
    static report_stats_t sx, sy; /* 26 KB: not on the stack (docs/faults.md) */
    stats_of(x, &sx);
    stats_of(y, &sy);
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
        if (d > WHY_GAP_PART * gap)
            it[n++] = (item_t){p, d};
    }
    sort_items(it, n);
    apart_t ap = told_apart(ctx, runs, x, y);
    if (ap.sign == 0) {
        report_appendf(buf, len, used, "%s's and %s's steps differ by %s",
            mode_title(fast->mode), mode_title(slow->mode), fmt_short(t, sizeof t, gap));
        app_not_apart(buf, len, used, &ap, fast->mode, slow->mode);
        report_appendf(buf, len, used, ". ");
        return;
    }
    report_appendf(buf, len, used, "%s's step is %s shorter than %s's: %s is faster by %.0f%%",
        mode_title(fast->mode), fmt_short(t, sizeof t, gap), mode_title(slow->mode),
        mode_title(fast->mode), 100.0 * ap.diff);
    app_apart_why(buf, len, used, &ap);
    if (n > 0) {
        report_appendf(buf, len, used, "; on device 0 %s spends ", mode_title(slow->mode));
        app_items(buf, len, used, it, n < 3 ? n : 3, slow->mode, " more in");
    }
    report_appendf(buf, len, used, ". ");
}

/* What a mode adds to device 0's step against single's, the machine time left
 * out: all phases but the split computation and comm hidden; the largest few
 * that grew, the largest that shrank, and the rest. */
typedef struct {
    item_t more[PH_COUNT], less[PH_COUNT];
    int nmore, nless;
    double added, rest;
} added_t;

static bool added_phase(int p, bool ddp)
{
    return !(p == PH_FORWARD || p == PH_BACKWARD || p == PH_COMM_HIDDEN || p == PH_DESCHED ||
             (ddp && p == PH_LOSS));
}

static void added_parts(const report_stats_t *s1, const report_stats_t *s, bool ddp, added_t *a)
{
    *a = (added_t){.nmore = 0};
    for (int p = 0; p < PH_COUNT; p++)
        if (added_phase(p, ddp))
            a->added += s->phase[0][p] - s1->phase[0][p];
    double floor = WHY_PART * fmax(fabs(a->added), WHY_PART * s->step_mean);
    for (int p = 0; p < PH_COUNT; p++) {
        double d = s->phase[0][p] - s1->phase[0][p];
        if (!added_phase(p, ddp))
            continue;
        if (d > floor)
            a->more[a->nmore++] = (item_t){p, d};
        else if (-d > floor)
            a->less[a->nless++] = (item_t){p, -d};
    }
    sort_items(a->more, a->nmore);
    sort_items(a->less, a->nless);
    a->nmore = a->nmore < 3 ? a->nmore : 3;
    a->nless = a->nless < 2 ? a->nless : 2;
    double listed = 0.0;
    for (int i = 0; i < a->nmore; i++)
        listed += a->more[i].v;
    for (int i = 0; i < a->nless; i++)
        listed -= a->less[i].v;
    a->rest = a->added - listed; /* the smaller parts, net */
}

/* A tiny model: what the mode adds exceeds single's whole computation. */
static void why_tiny(char *buf, size_t len, size_t *used, double compute1, bool ddp,
                     const report_stats_t *s, const predict_in_t *pred)
{
    char a[32], b[32];
    report_appendf(buf, len, used, "; a tiny model, whose whole step computes in %s on one "
        "device, so the fixed cost of each synchronisation swamps the work it splits",
        fmt_short(a, sizeof a, compute1));
    double floor = pred && pred->all_reduce ? collperf_time_at(pred->all_reduce, WHY_LATENCY_BYTES)
                                            : NAN;
    /* the floor explains the exposed time only when that is of its order */
    if (ddp && isfinite(floor) && floor > 0 &&
        s->phase[0][PH_COMM_EXPOSED] >= WHY_FLOOR_ORDER * floor)
        report_appendf(buf, len, used, " (an all-reduce of 4 KiB alone takes %s here: "
            "the latency floor, --mode comm)", fmt_short(b, sizeof b, floor));
}

/* Why a multi-device run is faster or slower than single: what the split saved
 * of forward and backward against what the mode adds per step. */
static void why_verdict(char *buf, size_t len, size_t *used, const run_result_t *single,
                        const run_result_t *r, const predict_in_t *pred)
{
    if (!single || r->ndev < 2 || r->times.n == 0 || single->times.n == 0)
        return;
    static report_stats_t s1, s; /* 26 KB: not on the stack (docs/faults.md) */
    stats_of(single, &s1);
    stats_of(r, &s);
    bool ddp = strategy_words(r->mode)->ranks;
    /* the split computation: forward and backward (and DDP's loss, which
     * each rank computes on its rows; DP's is device 0's, gather included) */
    double c1 = s1.phase[0][PH_FORWARD] + s1.phase[0][PH_BACKWARD] + (ddp ? s1.phase[0][PH_LOSS] : 0);
    double cr = s.phase[0][PH_FORWARD] + s.phase[0][PH_BACKWARD] + (ddp ? s.phase[0][PH_LOSS] : 0);
    double compute1 = c1 + (ddp ? 0.0 : s1.phase[0][PH_LOSS]) + s1.phase[0][PH_OPTIM];
    double saved = c1 - cr;
    added_t ad;
    added_parts(&s1, &s, ddp, &ad);
    double added = ad.added, rest = ad.rest;
    int n = ad.nmore, nl = ad.nless;
    char a[32], b[32], c[32], d[32];
    double speed = s.step_mean > 0 ? s1.step_mean / s.step_mean : 0.0;
    report_appendf(buf, len, used, "Why %s is %.2fx single: splitting the batch over %d devices "
        "took forward and backward from %s to %s per step (%s %s), while ", mode_title(r->mode),
        speed, r->ndev, fmt_short(a, sizeof a, c1), fmt_short(b, sizeof b, cr),
        saved >= 0 ? "saving" : "not less: longer by", fmt_short(c, sizeof c, fabs(saved)));
    if (added >= 0)
        report_appendf(buf, len, used, "what %s adds costs %s per step", mode_title(r->mode),
                       fmt_short(d, sizeof d, added));
    else
        report_appendf(buf, len, used, "the rest of %s's step is shorter by %s", mode_title(r->mode),
                       fmt_short(d, sizeof d, -added));
    if (n + nl > 0) {
        report_appendf(buf, len, used, " on device 0 (");
        if (n > 0)
            app_items(buf, len, used, ad.more, n, r->mode, " more");
        if (nl > 0) {
            report_appendf(buf, len, used, "%s", n > 0 ? ", " : "");
            app_items(buf, len, used, ad.less, nl, r->mode, " less");
        }
        if (fabs(rest) >= 0.5e-6)
            report_appendf(buf, len, used, ", %s %s in the rest", fmt_short(a, sizeof a, fabs(rest)),
                           rest > 0 ? "more" : "less");
    }
    double d1 = s1.phase[0][PH_DESCHED], dr = s.phase[0][PH_DESCHED];
    if (d1 > 0.0 || dr > 0.0)
        report_appendf(buf, len, used, "%seach run's machine time left out: %s a step here, "
                       "%s in single",
                       n + nl > 0 ? "; " : " (", fmt_short(a, sizeof a, dr),
                       fmt_short(b, sizeof b, d1));
    if (n + nl > 0 || d1 > 0.0 || dr > 0.0)
        report_appendf(buf, len, used, ")");
    report_appendf(buf, len, used, saved > added ? ": the split saves more than %s adds"
                                                 : ": %s adds more than the split saves",
                   mode_title(r->mode));
    /* the machine's share, when it decided which run was faster */
    if (saved > added && speed < 1.0)
        report_appendf(buf, len, used, ", and it is slower for the machine time: the busy "
                       "machine's, not %s's", mode_title(r->mode));
    else if (saved <= added && speed > 1.0)
        report_appendf(buf, len, used, ", and it is faster only for single's machine time: "
                       "the busy machine's");
    if (added > compute1 && compute1 > 0)
        why_tiny(buf, len, used, compute1, ddp, &s, pred);
    report_appendf(buf, len, used, ". ");
}

/* At what model size DDP starts to beat single here (predict_crossover). */
static void why_crossover(char *buf, size_t len, size_t *used, const run_result_t *single,
                          const run_result_t *r, const predict_in_t *pred)
{
    if (!single || !pred || !pred->all_reduce || pred->param_bytes <= 0 || r->ndev < 2 ||
        r->ndev > PREDICT_MAX_DEVICES || r->times.n == 0 || single->times.n == 0)
        return;
    static report_stats_t s1, s; /* 26 KB: not on the stack (docs/faults.md) */
    report_stats(single, NULL, &s1);
    report_stats(r, NULL, &s);
    double g1 = s1.phase[0][PH_FORWARD] + s1.phase[0][PH_BACKWARD] + s1.phase[0][PH_OPTIM];
    double gr = report_phase_mean(&s, 0, r->ndev - 1, PH_FORWARD) +
                report_phase_mean(&s, 0, r->ndev - 1, PH_BACKWARD) +
                report_phase_mean(&s, 0, r->ndev - 1, PH_OPTIM);
    double scale, params = predict_crossover(pred, r->ndev, s1.step_mean, g1, s.step_mean, gr,
                                             &scale);
    double now = pred->param_bytes / sizeof(float);
    if (params < 0) {
        /* the split saved (almost) nothing: the alpha-beta model alone, each
         * rank computing its share of the rows, says where it would pay */
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
            "shrank too little", PREDICT_SCALE_MAX, now, r->ndev);
        if (pm > 0)
            report_appendf(buf, len, used, "; the alpha-beta model alone, each rank computing "
                "its share of the rows, has DDP beating single ");
        if (pm > 0 && sm <= 1.0 / PREDICT_SCALE_MAX)
            report_appendf(buf, len, used, "at every size from 1/%.0f of this model up. ",
                           PREDICT_SCALE_MAX);
        else if (pm > 0)
            report_appendf(buf, len, used, "from about %.3g parameters (%.2gx this model). ", pm,
                           sm);
        else
            report_appendf(buf, len, used, ", and the alpha-beta model alone finds no size "
                "either. ");
    }
    else if (scale <= 1.0 / PREDICT_SCALE_MAX)
        report_appendf(buf, len, used, "Scaled from this run's steps by the alpha-beta model "
            "(--predict, not measured), DDP on %d devices would beat single at every size from "
            "1/%.0f of this model up. ", r->ndev, PREDICT_SCALE_MAX);
    else
        report_appendf(buf, len, used, "The crossover, scaled from this run's steps by the "
            "alpha-beta model (--predict, not measured): DDP on %d devices would start to beat "
            "single on this machine at about %.3g parameters, %.2gx this model's %.3g. ", r->ndev,
            params, scale, now);
}

void report_compare_why(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *runs,
                        int n)
{
    tell_t t;
    if (!tell_begin(&t, buf, len, runs, n))
        return;
    if (t.dp)
        why_dp(buf, len, &t.used, t.dp);
    if (t.ddp)
        why_ddp(buf, len, &t.used, t.ddp, false);
    if (t.dp && t.ddp)
        why_gap(buf, len, &t.used, ctx, runs, t.dp, t.ddp);
    else if (t.single && (t.dp || t.ddp))
        why_gap(buf, len, &t.used, ctx, runs, t.single, t.dp ? t.dp : t.ddp);
    tell_end(&t, buf, " ");
}

void report_compare_reason(char *buf, size_t len, const report_ctx_t *ctx,
                           const run_result_t *runs, int n)
{
    tell_t t;
    if (!tell_begin(&t, buf, len, runs, n))
        return;
    const predict_in_t *pred = ctx ? ctx->pred : NULL;
    if (t.dp)
        why_verdict(buf, len, &t.used, t.single, t.dp, pred);
    if (t.ddp) {
        why_verdict(buf, len, &t.used, t.single, t.ddp, pred);
        why_crossover(buf, len, &t.used, t.single, t.ddp, pred);
    }
    tell_end(&t, buf, " ");
}

void report_run_reason(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *r)
{
    tell_t t;
    if (!tell_begin(&t, buf, len, NULL, 0))
        return;
    const predict_in_t *pred = ctx ? ctx->pred : NULL;
    if (!pred || pred->phase_s[PH_BACKWARD] <= 0 || r->ndev < 2 ||
        strategy_words(r->mode)->reference)
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
    why_verdict(buf, len, &t.used, one, r, pred);
    if (strategy_words(r->mode)->ranks)
        why_crossover(buf, len, &t.used, one, r, pred);
    free(one);
    tell_end(&t, buf, " ");
}

// ---------------------------------------------------------------------------
// compare's three sentences and its notes

/* 1. The speed-ups, and DP against DDP only as far as the noise tells. */
static void verdict_speed(char *buf, size_t len, size_t *used, const report_ctx_t *ctx,
                          const run_result_t *runs, const run_result_t *single,
                          const run_result_t *dp, const run_result_t *ddp)
{
    const run_result_t *multi = dp ? dp : ddp;
    double t1 = single ? tp_of(ctx, runs, single) : 0.0;
    if (!single || !multi || t1 <= 0)
        return;
    report_appendf(buf, len, used, "On %d device%s", multi->ndev, multi->ndev == 1 ? "" : "s");
    if (dp)
        report_appendf(buf, len, used, " DP runs %.2fx single", tp_of(ctx, runs, dp) / t1);
    if (ddp)
        report_appendf(buf, len, used, "%s DDP %.2fx%s", dp ? " and" : "",
                       tp_of(ctx, runs, ddp) / t1, dp ? "" : " single");
    if (reps_of(ctx, runs, single))
        report_appendf(buf, len, used, " (the medians over %d runs)", reps_of(ctx, runs, single)->n);
    if (dp && ddp) {
        apart_t ap = told_apart(ctx, runs, dp, ddp);
        if (ap.sign != 0) {
            report_appendf(buf, len, used, ": %s is faster by %.0f%%",
                           ap.sign > 0 ? "DP" : "DDP", 100.0 * ap.diff);
            app_apart_why(buf, len, used, &ap);
        } else {
            app_not_apart(buf, len, used, &ap, MODE_DP, MODE_DDP);
        }
    }
    report_appendf(buf, len, used, ".\n");
}

/* 2. DP's device 0: what it does alone while the others wait. */
static void verdict_dp(char *buf, size_t len, size_t *used, const run_result_t *r)
{
    static report_stats_t s; /* 26 KB: not on the stack (docs/faults.md) */
    dp_split_t sp;
    const report_machine_t *mm;
    if (!r || !dp_split(r, &s, &sp, &mm))
        return;
    double idle = report_phase_mean(&s, 1, r->ndev - 1, PH_IDLE), mi = machine_idle(r, mm, 1);
    if (sp.na == 0) {
        report_appendf(buf, len, used, "DP's device 0 did nothing alone here");
        bool own = app_wait(buf, len, used, "; the other devices sit idle", idle, " per step", mi,
                            s.step_mean);
        app_wait_machine(buf, len, used, own, mi, s.step_mean);
        report_appendf(buf, len, used, ".\n");
        return;
    }
    app_dev0_alone(buf, len, used, &s, &sp, sp.na < 3 ? sp.na : 3, false);
    report_appendf(buf, len, used, ")");
    bool own = app_wait(buf, len, used, "; the others idle", idle, "", mi, s.step_mean);
    app_wait_machine(buf, len, used, own, mi, s.step_mean);
    app_desched(buf, len, used, r, &s, mm);
    report_appendf(buf, len, used, ".\n");
}

/* 3. DDP: its all-reduce against backward (why_ddp's sentence). */
static void verdict_ddp(char *buf, size_t len, size_t *used, const report_ctx_t *ctx,
                        const run_result_t *r)
{
    if (!r)
        return;
    size_t before = *used;
    why_ddp(buf, len, used, r, ctx && ctx->cfg && !ctx->cfg->overlap);
    if (*used > before && buf[*used - 1] == ' ')
        buf[*used - 1] = '\n';
}

/* 0. When the machine's time decided a comparison (no --repeat): said first. */
static void verdict_machine(char *buf, size_t len, size_t *used, const report_ctx_t *ctx,
                            const run_result_t *runs, const tell_t *t)
{
    const run_result_t *r[3] = {t->single, t->dp, t->ddp};
    double m[2], step[2];
    bool decided = false;
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            decided |= r[i] && r[j] && !reps_of(ctx, runs, r[i]) &&
                       machine_decides(r[i], r[j], m, step);
    if (!decided)
        return;
    report_appendf(buf, len, used, "This run measured the machine, not the strategies: the "
                   "machine took");
    for (int i = 0, k = 0; i < 3; i++) {
        char a[32], b[32];
        if (!r[i])
            continue;
        fmt_short(a, sizeof a, machine_time(r[i], &step[0]));
        report_appendf(buf, len, used, "%s %s of %s's %s step", k++ ? "," : "", a,
                       mode_title(r[i]->mode), fmt_short(b, sizeof b, step[0]));
    }
    report_appendf(buf, len, used, " (descheduled, or waiting for a device that was), more than "
                   "the rest of their steps differ; rerun quiet or with --repeat 5.\n");
}

void report_compare_verdict(char *buf, size_t len, const report_ctx_t *ctx,
                            const run_result_t *runs, int n)
{
    tell_t t;
    if (!tell_begin(&t, buf, len, runs, n))
        return;
    verdict_machine(buf, len, &t.used, ctx, runs, &t);
    verdict_speed(buf, len, &t.used, ctx, runs, t.single, t.dp, t.ddp);
    verdict_dp(buf, len, &t.used, t.dp);
    verdict_ddp(buf, len, &t.used, ctx, t.ddp);
    tell_end(&t, buf, "\n ");
}

int report_compare_notes(const report_ctx_t *ctx, const run_result_t *runs, int n,
                         char notes[][256], int max)
{
    int k = 0;
    bool cpu = false, repeated = false;
    for (int i = 0; i < n; i++) {
        cpu |= runs[i].backend == BACKEND_CPU && runs[i].ndev > 1;
        repeated |= reps_of(ctx, runs, &runs[i]) != NULL;
    }
    if (k < max && cpu)
        snprintf(notes[k++], 256, "a CPU has no GIL, per-replica Python or NVLink: DP does better "
                 "than on GPUs (README)");
    /* a single run the machine disturbed: the worst one's, once */
    const disturb_t *worst = NULL;
    for (int i = 0; i < n; i++)
        if (runs[i].machine.disturbed &&
            (!worst || runs[i].machine.contention > worst->contention))
            worst = &runs[i].machine;
    if (k < max && !repeated && worst) {
        char what[200];
        disturb_describe(worst, what, sizeof what);
        snprintf(notes[k++], 256, "busy machine (%.200s): one run may not repeat; use --repeat 5",
                 what);
    }
    return k;
}
