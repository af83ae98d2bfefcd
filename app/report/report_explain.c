/* app/report/report_explain.c: --explain, the middle timed step told for a
 * learner (from the run's step_story_t and its devices' first_* fields): the
 * rows, the copies and reductions, DDP's buckets as a text timeline, each
 * device's compute; then report_why.c's sentences over every timed step. */
#include <string.h>

#include "app/report/report.h"

static const char *t_(char *buf, size_t n, double s) { return report_fmt_time(buf, n, s); }
static const char *b_(char *buf, size_t n, double b) { return report_fmt_bytes(buf, n, b); }

static void explain_rows(FILE *f, const report_ctx_t *ctx, const run_result_t *r)
{
    long total = 0;
    for (int d = 0; d < r->ndev; d++)
        total += r->dev[d].first_rows;
    if (r->ndev == 1) {
        fprintf(f, "  - The global batch of %ld rows went whole to device %d.\n", total,
                r->dev[0].device_id);
        return;
    }
    bool ranks = strategy_words(r->mode)->ranks;
    if (ranks && ctx && ctx->cfg && ctx->cfg->nrank_samples)
        fprintf(f, "  - Each rank read a micro-batch of its own shard (--rank-samples), %ld rows "
                   "in all:",
                total);
    else if (ranks)
        fprintf(f, "  - The global batch of %ld rows was dealt to the ranks, rank r taking rows "
                   "r, r+%d, ... (its DistributedSampler shard):",
                total, r->ndev);
    else
        fprintf(f, "  - The %ld rows were split like torch.chunk:", total);
    for (int d = 0; d < r->ndev; d++)
        fprintf(f, "%s device %d %ld", d ? "," : "", r->dev[d].device_id, r->dev[d].first_rows);
    fputs(".\n", f);
    if (ranks)
        fprintf(f, "  - Each rank scaled its loss by 1 / %ld (1 / global rows) and the buckets "
                   "were summed, so every rank got the mean over all %ld rows: each rank's "
                   "gradient weighted by its share of them (PyTorch scales by 1 / its own rows and "
                   "averages: the same when the shares are equal).\n",
                total, total);
}

/* DDP: what it asks of every rank at every step, and what join does about a
 * rank that runs out of data. */
static void explain_lockstep(FILE *f, const report_ctx_t *ctx, const run_result_t *r)
{
    if (!strategy_words(r->mode)->ranks || r->ndev < 2)
        return;
    const config_t *c = ctx ? ctx->cfg : NULL;
    if (r->zero >= 2) {
        char a[32], g[32], p[32];
        fprintf(f, "  - ZeRO-%d (--zero %d): each %s's gradients were written into a reused "
                   "buffer and reduce-scattered out of it into the rank's shard (1/%d; the floats "
                   "left over all-reduced); each rank stepped its shard of the optimizer state "
                   "(%s on device %d)%s. Device %d held gradients %s and parameters %s at its "
                   "peak.\n",
                r->zero, r->zero, r->zero == 3 ? "layer" : "bucket", r->ndev,
                b_(a, sizeof a, (double)r->dev[0].mem_split[MEM_OPTIM]), r->dev[0].device_id,
                r->zero == 3 ? " in place; each layer's parameters were all-gathered before its "
                               "forward and again before its backward, the next layer's gather "
                               "launched first (prefetch)"
                             : ", then each bucket's parameters were all-gathered",
                r->dev[0].device_id, b_(g, sizeof g, (double)r->dev[0].mem_split[MEM_GRADS]),
                b_(p, sizeof p, (double)r->dev[0].mem_split[MEM_PARAMS]));
    } else if (c && c->zero) {
        char a[32];
        fprintf(f, "  - ZeRO-1 (--zero1): each bucket was reduce-scattered, not all-reduced: rank "
                   "q received the sum of block q (1/%d of it; the floats left over all-reduced), "
                   "stepped only those with its shard of the optimizer state (%s on device %d; "
                   "plain DDP keeps %d times that on every rank), and each bucket's parameters "
                   "were then all-gathered, block q from rank q.\n",
                r->ndev, b_(a, sizeof a, (double)r->dev[0].mem_split[MEM_OPTIM]),
                r->dev[0].device_id, r->ndev);
    }
    if (!c || !c->nrank_samples)
        return;
    fprintf(f, "  - Uneven data (--rank-samples");
    for (int d = 0; d < r->ndev && d < c->nrank_samples; d++)
        fprintf(f, "%s%ld", d ? "," : " ", c->rank_samples[d]);
    fprintf(f, "): steps run/shadowed per rank:");
    for (int d = 0; d < r->ndev; d++)
        fprintf(f, "%s rank %d %ld/%ld", d ? "," : "", d, r->dev[d].steps_run,
                r->dev[d].steps_shadowed);
    fprintf(f, ".\n");
    fprintf(f, "  - %s (docs/modes.md: the sample stream).\n",
            c->join ? "--join: a rank out of data shadowed the others' all-reduces with zero "
                      "gradients and 0 rows"
                    : "--no-join: a rank out of data left; the others wait in their next "
                      "all-reduce until --timeout");
}

static void explain_moves(FILE *f, const run_result_t *r, bool zero1)
{
    const step_story_t *st = &r->story;
    char a[32], b[32];
    for (int k = 0; k < MOVE_COUNT; k++) {
        const move_stat_t *m = &st->move[k];
        if (m->bytes == 0 && m->ops == 0)
            continue;
        b_(a, sizeof a, (double)m->bytes);
        t_(b, sizeof b, m->seconds);
        fputs("  - ", f);
        switch ((move_kind_t)k) {
        case MOVE_BATCH:
            fprintf(f, "%s of sample rows (features and targets) gathered on the host%s: %s",
                    a, r->backend == BACKEND_CPU ? " (a CPU device reads them in place)"
                                                  : " and copied to the device",
                    b);
            break;
        case MOVE_SCATTER:
            fprintf(f, "scatter: %s of input chunks sent to the devices: %s", a, b);
            break;
        case MOVE_REPLICATE:
            fprintf(f, "replicate: %s of parameters copied from device 0 to the other %d "
                       "device%s: %s",
                    a, r->ndev - 1, r->ndev == 2 ? "" : "s", b);
            break;
        case MOVE_GATHER:
            fprintf(f, "gather: %s of outputs brought to device 0 for the loss: %s", a, b);
            break;
        case MOVE_GRAD_OUT:
            fprintf(f, "%s of output gradients sent from device 0 back to the devices: %s", a, b);
            break;
        case MOVE_REDUCE:
            fprintf(f, "reduce: %s of parameter gradients summed onto device 0: %s", a, b);
            break;
        case MOVE_BROADCAST:
            fprintf(f, "broadcast: %s of initial parameters from rank 0 (once, before training): %s",
                    a, b);
            break;
        case MOVE_ALLREDUCE: {
            /* the buckets' own times added up, and the span from the first
             * one's start to the last one's end (gaps included) */
            double busy = 0.0;
            int nb = st->nbuckets < STORY_MAX_BUCKETS ? st->nbuckets : STORY_MAX_BUCKETS;
            for (int i = 0; i < nb; i++)
                if (st->bucket[i].end_s > st->bucket[i].start_s)
                    busy += st->bucket[i].end_s - st->bucket[i].start_s;
            char c[32];
            fprintf(f, zero1 ? "reduce-scatter (ZeRO): %s of gradients summed across the "
                               "ranks in %d bucket%s, each rank receiving its block: "
                             : "all-reduce: %s of gradients summed across the ranks in %d "
                               "bucket%s: ",
                    a, st->nbuckets, st->nbuckets == 1 ? "" : "s");
            if (nb > 1)
                fprintf(f, "%s in rank 0's buckets added up, over %s from the first one's start "
                           "to the last one's end", t_(c, sizeof c, busy), b);
            else
                fprintf(f, "%s on rank 0", b);
            break;
        }
        default:
            fprintf(f, "%s: %s: %s", move_name((move_kind_t)k), a, b);
        }
        if (m->ops > 1)
            fprintf(f, " (%d operations)", m->ops);
        fputs(".\n", f);
    }
}

#define TIMELINE_W 60

static int col_of(double t, double span)
{
    int c = (int)(t / span * (TIMELINE_W - 1) + 0.5);
    return c < 0 ? 0 : c > TIMELINE_W - 1 ? TIMELINE_W - 1 : c;
}

/* DDP's backward and each bucket's all-reduce, to scale, from the start of
 * backward: '=' backward computing, '.' a bucket ready and waiting for its
 * turn, '#' its all-reduce moving data; '|' where backward ends. */
static void explain_timeline(FILE *f, const step_story_t *st, int shown)
{
    double span = st->backward_s;
    for (int i = 0; i < shown; i++)
        span = span > st->bucket[i].end_s ? span : st->bucket[i].end_s;
    if (span <= 0.0)
        return;
    /* a span the comm reports from before backward began is drawn from its start */
#define COL(t) col_of((t), span)
    char line[TIMELINE_W + 1], a[32];
    int bend = COL(st->backward_s);
    fprintf(f, "    backward and buckets, to scale (= backward, . ready and waiting, # all-reduce):\n");
    memset(line, ' ', TIMELINE_W);
    line[TIMELINE_W] = 0;
    for (int c = 0; c <= bend; c++)
        line[c] = '=';
    fprintf(f, "      %-10s|%s|\n", "backward", line);
    for (int i = 0; i < shown; i++) {
        const bucket_story_t *bk = &st->bucket[i];
        memset(line, ' ', TIMELINE_W);
        for (int c = COL(bk->ready_s); c < COL(bk->start_s) && c < TIMELINE_W; c++)
            line[c] = '.';
        int c0 = COL(bk->start_s), c1 = COL(bk->end_s);
        for (int c = c0; c <= c1 && c < TIMELINE_W; c++)
            line[c] = '#';
        if (bend < TIMELINE_W - 1 && line[bend] == ' ')
            line[bend] = '|';
        char name[16];
        snprintf(name, sizeof name, "bucket %d", i);
        fprintf(f, "      %-10s|%s|\n", name, line);
    }
    fprintf(f, "      %-10s0%*s\n", "", TIMELINE_W, t_(a, sizeof a, span));
#undef COL
}

static void explain_buckets(FILE *f, const run_result_t *r, bool zero1)
{
    const step_story_t *st = &r->story;
    if (st->nbuckets == 0)
        return;
    char a[32], b[32], c[32], d[32];
    fprintf(f, "  - Backward on rank 0 took %s; the buckets, timed from its start:\n",
            t_(a, sizeof a, st->backward_s));
    int shown = st->nbuckets < STORY_MAX_BUCKETS ? st->nbuckets : STORY_MAX_BUCKETS;
    for (int i = 0; i < shown; i++) {
        const bucket_story_t *bk = &st->bucket[i];
        const char *when = bk->end_s <= st->backward_s ? "inside backward: hidden"
                           : bk->start_s >= st->backward_s ? "after backward: exposed"
                                                            : "partly after backward";
        fprintf(f, "      bucket %d (layers %d-%d, %s): ready at %s, %s %s to %s (%s)\n",
                i, bk->first_layer, bk->last_layer, b_(a, sizeof a, (double)bk->bytes),
                t_(b, sizeof b, bk->ready_s), zero1 ? "reduce-scatter" : "all-reduce",
                t_(c, sizeof c, bk->start_s),
                t_(d, sizeof d, bk->end_s), when);
    }
    if (st->nbuckets > shown)
        fprintf(f, "      ... and %d more\n", st->nbuckets - shown);
    explain_timeline(f, st, shown);
    /* the machine's share of rank 0's wait in this step (docs/results.md):
     * an all-reduce ends when the last rank arrives */
    static double ph[MAX_DEVICES][PH_COUNT];
    int peer = -1;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
        memcpy(ph[d], r->dev[d].first_phase_s, sizeof ph[d]);
        peer = d && (peer < 0 || ph[d][PH_DESCHED] > ph[peer][PH_DESCHED]) ? d : peer;
    }
    double m = report_machine_frac((const double (*)[PH_COUNT])ph, r->ndev, 0) *
               ph[0][PH_COMM_EXPOSED];
    if (peer > 0 && m > 0.05 * st->step_s)
        fprintf(f, "    Of rank 0's %s waited after backward, %s is the machine's: rank %d was "
                   "descheduled %s in this step (another process had its core), and an "
                   "all-reduce ends when the last rank arrives.\n",
                t_(a, sizeof a, ph[0][PH_COMM_EXPOSED]), t_(b, sizeof b, m), peer,
                t_(c, sizeof c, ph[peer][PH_DESCHED]));
}

static void explain_compute(FILE *f, const run_result_t *r)
{
    char a[32];
    int shown = r->ndev < 8 ? r->ndev : 8;
    for (int d = 0; d < shown; d++) {
        fprintf(f, "  - Device %d:", r->dev[d].device_id);
        int k = 0;
        for (int p = 0; p < PH_COUNT; p++) {
            double v = r->dev[d].first_phase_s[p];
            if (v <= 0.0)
                continue;
            fprintf(f, "%s %s %s", k++ ? "," : "", report_phase_label(r->mode, (phase_t)p),
                    t_(a, sizeof a, v));
        }
        fputs(k ? ".\n" : " nothing recorded.\n", f);
    }
    if (r->ndev > shown)
        fprintf(f, "  - ... and %d more devices.\n", r->ndev - shown);
}

/* What each device's memory held at its peak, by purpose. */
static void explain_memory(FILE *f, const run_result_t *r)
{
    char a[32], b[32];
    int shown = r->ndev < 4 ? r->ndev : 4;
    for (int d = 0; d < shown; d++) {
        fprintf(f, "  - Memory of device %d at its peak: %s (", r->dev[d].device_id,
                b_(a, sizeof a, (double)r->dev[d].mem_peak));
        int k = 0;
        for (int m = 0; m < MEM_KINDS; m++)
            if (r->dev[d].mem_split[m] > 0)
                fprintf(f, "%s%s %s", k++ ? ", " : "", mem_kind_name((mem_kind_t)m),
                        b_(b, sizeof b, (double)r->dev[d].mem_split[m]));
        fputs(").\n", f);
    }
    if (r->ndev > shown)
        fprintf(f, "  - ... and %d more devices.\n", r->ndev - shown);
}

/* Over the timed steps: who works alone, what every device does at once,
 * who waits, what overlaps (the compare narrative's sentences for one run). */
static void explain_why(FILE *f, const report_ctx_t *ctx, const run_result_t *r)
{
    if (r->ndev < 2 || r->times.n == 0)
        return;
    if (ctx && ctx->cfg && ctx->cfg->mode == MODE_COMPARE)
        return; /* compare's --explain tells it for the three runs at once */
    char why[2048];
    report_compare_why(why, sizeof why, NULL, r, 1);
    if (why[0])
        fprintf(f, "  Over the %ld timed steps: %s\n", r->times.n, why);
    /* with --predict (or in compare), single's step is known: the verdict's reason */
    report_run_reason(why, sizeof why, ctx, r);
    if (why[0])
        fprintf(f, "  Against single (its step from --predict's single run): %s\n", why);
}

void report_explain(FILE *f, const report_ctx_t *ctx, const run_result_t *r)
{
    if (!r->story.filled) {
        fprintf(f, "explain: %s on %s: the strategy recorded no step\n", mode_name(r->mode),
                backend_kind_name(r->backend));
        return;
    }
    static report_stats_t s; /* 15 KB: not on the stack (docs/faults.md) */
    report_stats(r, NULL, &s);
    char p50[32], took[32];
    fprintf(f, "explain: step %ld of %s on %s, %d device%s (the middle timed step: %s; the "
               "timed steps' median %s)\n",
            r->story.step + 1, mode_name(r->mode), backend_kind_name(r->backend), r->ndev,
            r->ndev == 1 ? "" : "s", t_(took, sizeof took, r->story.step_s),
            t_(p50, sizeof p50, s.step_p50));
    explain_rows(f, ctx, r);
    /* --zero1 (its ddp run): the buckets were reduce-scattered */
    bool zero1 = strategy_words(r->mode)->ranks && ctx && ctx->cfg && ctx->cfg->zero;
    explain_moves(f, r, zero1);
    explain_buckets(f, r, zero1);
    explain_compute(f, r);
    report_explain_peak(f, ctx, r, &s);
    explain_memory(f, r);
    explain_lockstep(f, ctx, r);
    char b[32];
    if (r->ndev == 1 && ctx && ctx->spec)
        fprintf(f, "  - Nothing to synchronise: one device holds the only copy of the %zu "
                   "parameters (%s).\n",
                ctx->spec->nparams, b_(b, sizeof b, (double)ctx->spec->nparams * sizeof(float)));
    explain_why(f, ctx, r);
}
