/* gate/ab_report.c: the A/B gate's outputs (ab.h): the text (the
 * estimate and its interval, the verdict with the rounds it took and why it
 * stopped, the work by device, the attribution beyond its noise, the
 * straggler), --json (the judgement, how the gate ran, every round of both
 * sides) and --csv (a row per round). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gate/ab.h"
#include "app/report/report.h"
#include "common/base/status.h"
#include "common/base/text.h"
#include "common/train/strategy.h"

static const char *dev_word(const config_t *cfg) { return strategy_words(cfg->mode)->member; }

// ---------------------------------------------------------------------------
// text

/* "+4.2%" of the base */
static double pct(double ratio) { return 100.0 * (ratio - 1.0); }

/* "lo..hi" by fmt, an end that is not finite as "open" */
static void range(char *buf, size_t n, const char *fmt, double lo, double hi)
{
    char a[24] = "open", b[24] = "open";
    if (isfinite(lo))
        snprintf(a, sizeof a, fmt, lo);
    if (isfinite(hi))
        snprintf(b, sizeof b, fmt, hi);
    snprintf(buf, n, "%s..%s", a, b);
}

void ab_ratio_range(char *buf, size_t n, double lo, double hi)
{
    range(buf, n, "%.3f", isfinite(lo) ? exp(lo) : NAN, isfinite(hi) ? exp(hi) : NAN);
}

/* "+6.1%..+10.4%" of a ratio's interval (a low end of 0 is open) */
static void pct_range(char *buf, size_t n, double lo_ratio, double hi_ratio)
{
    range(buf, n, "%+.1f%%", lo_ratio > 0 ? pct(lo_ratio) : NAN, pct(hi_ratio));
}

/* "decided", "budget" or "cap" */
static const char *ab_stop_name(ab_stop_t s)
{
    return s == AB_STOP_DECIDED ? "decided" : s == AB_STOP_BUDGET ? "budget" : "cap";
}

/* "after 14 rounds in 23 s: decided" and its kin */
static void stop_words(char *buf, size_t n, const ab_gate_t *g, int rounds)
{
    int k = snprintf(buf, n, "after %d round%s in %.0f s: ", rounds, rounds == 1 ? "" : "s",
                     g->seconds);
    if (k < 0 || (size_t)k >= n)
        return;
    if (g->stop == AB_STOP_DECIDED)
        snprintf(buf + k, n - (size_t)k, "decided");
    else if (g->stop == AB_STOP_BUDGET)
        snprintf(buf + k, n - (size_t)k, "the budget ran out (--gate-budget %g s: another pair "
                 "of rounds would not fit)", g->budget_s);
    else
        snprintf(buf + k, n - (size_t)k, "the most rounds (--repeat %d)", g->cs.cap);
}

/* "straggler: rank 1 (work +10.2%; rank 0 +0.3%)" when one device alone grew */
static void straggler_line(FILE *f, const config_t *cfg, const ab_judgement_t *j)
{
    if (j->straggler < 0)
        return;
    double lo;
    fprintf(f, "straggler: %s %d (%s %+.1f%%; ", dev_word(cfg), j->straggler,
            j->by_work ? "work" : "forward+backward", 100.0 * ab_growth(j, j->straggler, &lo));
    for (int dv = 0, first = 1; dv < j->ndev; dv++)
        if (dv != j->straggler) {
            fprintf(f, "%s%s %d %+.1f%%", first ? "" : ", ", dev_word(cfg), dv,
                    100.0 * ab_growth(j, dv, &lo));
            first = 0;
        }
    fprintf(f, ")\n");
}

/* Where the change went: the largest paired deltas (at least 1% of the base's
 * step), by device and phase group, those beyond their own noise (their
 * interval excludes 0); when none is, the largest is named as within it. */
static void attribution_lines(FILE *f, const config_t *cfg, const ab_judgement_t *j)
{
    int shown = 0, qd = -1, qg = -1;
    double quiet = 0.01;
    bool seen[MAX_DEVICES][AB_GROUPS] = {{false}};
    for (int pass = 0; pass < 3 && j->base_step > 0; pass++) {
        int bd = -1, bg = -1;
        double best = 0.01;
        for (int dv = 0; dv < j->ndev; dv++)
            for (int g = 0; g < AB_GROUPS; g++) {
                double c = fabs(j->delta[dv][g]) / j->base_step;
                if (seen[dv][g] || !(c >= quiet || c >= best))
                    continue;
                if (!ab_beyond_noise(j->delta_lo[dv][g], j->delta_hi[dv][g])) {
                    if (c >= quiet)
                        quiet = c, qd = dv, qg = g;
                } else if (c >= best) {
                    best = c, bd = dv, bg = g;
                }
            }
        if (bd < 0)
            break;
        seen[bd][bg] = true;
        char who[32] = "";
        if (j->ndev > 1)
            snprintf(who, sizeof who, "%s %d ", dev_word(cfg), bd);
        double b = j->base[bd][bg];
        double rel = b > 0 ? 100.0 * j->delta[bd][bg] / b : NAN;
        fprintf(f, "%s %s%s %+.1f%% (%+.3f ms a step, %+.1f%% of the base's step; interval "
                "%+.3f..%+.3f ms)\n", shown ? "            " : "attribution:", who,
                ab_group_names[bg], rel, 1e3 * j->delta[bd][bg], 100.0 * j->delta[bd][bg] /
                j->base_step, 1e3 * j->delta_lo[bd][bg], 1e3 * j->delta_hi[bd][bg]);
        shown++;
    }
    if (shown == 0 && qd >= 0) {
        char who[32] = "";
        if (j->ndev > 1)
            snprintf(who, sizeof who, "%s %d ", dev_word(cfg), qd);
        double b = j->base[qd][qg];
        char rg[64];
        range(rg, sizeof rg, "%+.3f", 1e3 * j->delta_lo[qd][qg], 1e3 * j->delta_hi[qd][qg]);
        fprintf(f, "attribution: no phase moved beyond its own noise (the largest, %s%s %+.1f%%, "
                "has the interval %s ms a step, which holds 0)\n", who, ab_group_names[qg],
                b > 0 ? 100.0 * j->delta[qd][qg] / b : NAN, rg);
    }
}

void ab_print_text(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                   const ab_judgement_t *j)
{
    const paired_est_t *e = &j->look.est;
    double tol = g->tolerance_pct;
    double load_lo = INFINITY, load_hi = -INFINITY;
    for (int i = 0; i < nr; i++)
        for (int k = 0; k < 2; k++)
            if (isfinite(r[i].side[k].load1)) {
                load_lo = fmin(load_lo, r[i].side[k].load1);
                load_hi = fmax(load_hi, r[i].side[k].load1);
            }
    char rr[64], pr[64], stop[200];
    if (e->n == 0) {
        stop_words(stop, sizeof stop, g, 0);
        fprintf(f, "verdict: no verdict: no round ran; %s: a larger --gate-budget or shorter runs "
                "(--steps)\n", stop);
        return;
    }
    ab_ratio_range(rr, sizeof rr, e->lo, e->hi);
    pct_range(pr, sizeof pr, exp(e->lo), exp(e->hi));
    stop_words(stop, sizeof stop, g, e->n);
    fprintf(f, "candidate / base, %s: %.3f (%.0f%% interval at every look %s, %s) over %d "
            "rounds; Hodges-Lehmann %.3f", j->by_work ? "work per step (CPU seconds, p10)" :
            "median step", exp(e->estimate), 100 * (1 - g->cs.alpha),
            rr, pr, e->n, exp(j->est_hl.estimate));
    if (isfinite(load_lo))
        fprintf(f, "; load %.1f..%.1f", load_lo, load_hi);
    fputc('\n', f);
    if (j->by_work) {
        ab_ratio_range(rr, sizeof rr, j->look.est_wall.lo, j->look.est_wall.hi);
        fprintf(f, "candidate / base, median step (wall): %.3f (interval %s), %s\n",
                exp(j->look.est_wall.estimate), rr,
                j->look.lopsided + j->look.both == 0 ? "judged too: no round was disturbed"
                                                     : "not judged: disturbed rounds");
    }
    switch (j->look.verdict) {
    case PAIRED_REGRESSED:
        if (j->look.wall_judged)
            fprintf(f, "verdict: regressed: %s (tolerance %g%%); %s\n", j->reason, tol, stop);
        else
            fprintf(f, "verdict: regressed: the candidate is slower by %+.1f%% at least "
                    "(tolerance %g%%); %s\n", pct(exp(e->lo)), tol, stop);
        break;
    case PAIRED_IMPROVED:
        fprintf(f, "verdict: improved: the candidate is faster by %.1f%% at least (tolerance "
                "%g%%); %s\n", -pct(exp(e->hi)), tol, stop);
        break;
    case PAIRED_NO_CHANGE:
        fprintf(f, "verdict: no change: within +-%g%%; %s\n", tol, stop);
        break;
    default:
        if (j->look.explained)
            fprintf(f, "verdict: no verdict: %s; %s\n", j->reason, stop);
        else if (!isfinite(e->lo) || !isfinite(e->hi))
            fprintf(f, "verdict: no verdict: %d rounds give no interval yet; %s: a larger "
                    "--gate-budget, shorter runs (--steps) or a quieter machine%s%s\n", e->n,
                    stop, j->busy ? "; " : "", j->busy ? j->reason : "");
        else
            fprintf(f, "verdict: no verdict: the interval straddles the %g%% tolerance; %s: a "
                    "larger --gate-budget or a quieter machine would settle it%s%s\n", tol, stop,
                    j->busy ? "; " : "", j->busy ? j->reason : "");
    }
    if (j->by_work && j->ndev > 1) {
        fprintf(f, "work by %s:", dev_word(cfg));
        for (int dv = 0; dv < j->ndev; dv++) {
            char w[64];
            pct_range(w, sizeof w, j->work_lo[dv], j->work_hi[dv]);
            fprintf(f, "%s %s %d %+.1f%% (%s)", dv ? "," : "", dev_word(cfg), dv,
                    pct(j->work_ratio[dv]), w);
        }
        fputc('\n', f);
    }
    if (j->busy) {
        /* a busy core shows as any phase: none is blamed */
        fprintf(f, "attribution: none (a busy machine moves every phase)\n");
        straggler_line(f, cfg, j);
        return;
    }
    attribution_lines(f, cfg, j);
    straggler_line(f, cfg, j);
}

// ---------------------------------------------------------------------------
// --json

static void est_json(cJSON *parent, const char *key, const paired_est_t *e, const char *method)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    cJSON_AddStringToObject(o, "method", method);
    cJSON_AddNumberToObject(o, "rounds", e->n);
    report_json_num(o, "ratio", exp(e->estimate));
    report_json_num(o, "lo", isfinite(e->lo) ? exp(e->lo) : NAN); /* null: open (or none) */
    report_json_num(o, "hi", isfinite(e->hi) ? exp(e->hi) : NAN);
    report_json_num(o, "confidence", e->conf > 0 ? e->conf : NAN);
    cJSON_AddBoolToObject(o, "at_every_look", e->uniform);
    report_json_num(o, "spread_log", e->spread);
}

int ab_print_json(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                  const ab_judgement_t *j)
{
    const paired_look_t *lk = &j->look;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "tool", "ddpbench");
    cJSON *ab = cJSON_AddObjectToObject(o, "ab");
    cJSON_AddStringToObject(ab, "base", g->base);
    cJSON_AddStringToObject(ab, "candidate", g->cand);
    cJSON_AddStringToObject(ab, "mode", mode_name(cfg->mode));
    cJSON_AddStringToObject(ab, "order", "ABBA");
    cJSON_AddStringToObject(ab, "figure", j->by_work ? "work_cpu_s.p10" : "step_time_s.p50");
    cJSON_AddNumberToObject(ab, "rounds", lk->est.n);
    cJSON_AddNumberToObject(ab, "rounds_cap", g->cs.cap);
    cJSON_AddNumberToObject(ab, "retaken", g->retaken);
    report_json_num(ab, "seconds", g->seconds);
    report_json_num(ab, "budget_s", g->budget_s);
    cJSON_AddStringToObject(ab, "stopped", ab_stop_name(g->stop));
    cJSON_AddNumberToObject(ab, "tolerance_pct", g->tolerance_pct);
    cJSON *cs = cJSON_AddObjectToObject(ab, "confidence_sequence");
    cJSON_AddStringToObject(cs, "band", "|S_n - n/2| <= c sqrt(n)");
    report_json_num(cs, "c", g->cs.c);
    report_json_num(cs, "alpha", g->cs.alpha);
    cJSON_AddNumberToObject(cs, "every", g->cs.every);
    report_json_num(cs, "exit_probability", g->cs.exit);
    est_json(ab, "estimate", &lk->est, "median of paired log-ratios, confidence sequence");
    est_json(ab, "hodges_lehmann", &j->est_hl, "Hodges-Lehmann, Wilcoxon signed-rank interval "
             "(fixed sample, not judged)");
    est_json(ab, "even_rounds", &lk->est_clean, "median of the rounds not lopsided, confidence "
             "sequence");
    est_json(ab, "wall", &lk->est_wall, "median step: median of paired log-ratios, confidence "
             "sequence");
    cJSON_AddBoolToObject(ab, "wall_judged", lk->wall_judged);
    cJSON *wr = cJSON_AddArrayToObject(ab, "work_ratio_by_device");
    for (int dv = 0; j->by_work && dv < j->ndev; dv++) {
        cJSON *w = cJSON_CreateObject();
        report_json_num(w, "ratio", j->work_ratio[dv]);
        report_json_num(w, "lo", j->work_lo[dv]);
        report_json_num(w, "hi", j->work_hi[dv]);
        cJSON_AddItemToArray(wr, w);
    }
    cJSON_AddStringToObject(ab, "verdict", paired_verdict_name(lk->verdict));
    cJSON_AddNumberToObject(ab, "exit_status", lk->verdict == PAIRED_REGRESSED    ? 3
                                               : lk->verdict == PAIRED_NO_VERDICT ? 4
                                                                                  : 0);
    cJSON_AddNumberToObject(ab, "lopsided_rounds", lk->lopsided);
    cJSON_AddNumberToObject(ab, "both_disturbed_rounds", lk->both);
    cJSON_AddBoolToObject(ab, "busy_machine", j->busy);
    cJSON_AddStringToObject(ab, "reason", j->reason);
    if (j->straggler >= 0)
        cJSON_AddNumberToObject(ab, "straggler", j->straggler);
    else
        cJSON_AddNullToObject(ab, "straggler");
    cJSON *att = cJSON_AddArrayToObject(ab, "attribution");
    for (int dv = 0; dv < j->ndev; dv++)
        for (int k = 0; k < AB_GROUPS; k++) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "device", dv);
            cJSON_AddStringToObject(a, "phases", ab_group_names[k]);
            report_json_num(a, "base_s", j->base[dv][k]);
            report_json_num(a, "delta_s", j->delta[dv][k]);
            report_json_num(a, "delta_lo_s", j->delta_lo[dv][k]);
            report_json_num(a, "delta_hi_s", j->delta_hi[dv][k]);
            cJSON_AddBoolToObject(a, "beyond_noise",
                                  ab_beyond_noise(j->delta_lo[dv][k], j->delta_hi[dv][k]));
            report_json_num(a, "delta_of_step",
                            j->base_step > 0 ? j->delta[dv][k] / j->base_step : NAN);
            cJSON_AddItemToArray(att, a);
        }
    cJSON *rounds = cJSON_AddArrayToObject(o, "rounds");
    for (int i = 0; i < nr; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "round", r[i].round + 1); /* 0: the warm-up */
        cJSON_AddStringToObject(x, "order", r[i].base_first ? "base,candidate" : "candidate,base");
        cJSON_AddBoolToObject(x, "used", r[i].used);
        report_json_num(x, "ratio", r[i].ratio);
        report_json_num(x, "ratio_wall", r[i].ratio_wall);
        cJSON_AddItemToObject(x, "base", cJSON_Duplicate(r[i].side[AB_BASE].json, 1));
        cJSON_AddItemToObject(x, "candidate", cJSON_Duplicate(r[i].side[AB_CAND].json, 1));
        report_json_num(x, "base_wall_s", r[i].side[AB_BASE].wall_s);
        report_json_num(x, "candidate_wall_s", r[i].side[AB_CAND].wall_s);
        cJSON_AddItemToArray(rounds, x);
    }
    int rc = report_json_print(f, o);
    cJSON_Delete(o);
    return rc;
}

// ---------------------------------------------------------------------------
// --csv: one row per round, with the interval and the provenance

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsString(x) ? x->valuestring : "";
}

/* a CSV field of a child's words: escaped (one line, no control codes), no commas */
static void field(FILE *f, const char *s)
{
    char shown[256];
    fputc(',', f);
    for (const char *p = text_escape(s, strlen(s), shown, sizeof shown); *p; p++)
        fputc(*p == ',' ? ' ' : *p, f);
}

void ab_print_csv(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                  const ab_judgement_t *j)
{
    fputs("round,order,used,mode,figure,base_s,candidate_s,ratio,ratio_wall,lopsided,"
          "ratio_estimate,ratio_lo,ratio_hi,confidence,rounds,tolerance_pct,verdict,stopped,"
          "base_revision,candidate_revision,host,base_time_utc,candidate_time_utc,base_load1,"
          "candidate_load1\n",
          f);
    const paired_est_t *e = &j->look.est;
    for (int i = 0; i < nr; i++) {
        const ab_side_t *b = &r[i].side[AB_BASE], *c = &r[i].side[AB_CAND];
        fprintf(f, "%d,%s,%d,%s,%s,%.9g,%.9g,%.9g,%.9g,%d", r[i].round + 1,
                r[i].base_first ? "BC" : "CB", r[i].used, mode_name(cfg->mode),
                r[i].by_work ? "work_cpu_s.p10" : "step_time_s.p50", round_figure(&r[i], AB_BASE),
                round_figure(&r[i], AB_CAND), r[i].ratio, r[i].ratio_wall, ab_lopsided(&r[i]));
        fprintf(f, ",%.9g", exp(e->estimate));
        const double ends[2] = {e->lo, e->hi};
        for (int k = 0; k < 2; k++) { /* an open end is an empty field */
            fputc(',', f);
            if (isfinite(ends[k]))
                fprintf(f, "%.9g", exp(ends[k]));
        }
        fprintf(f, ",%.6g,%d,%g,%s,%s", e->conf, e->n, g->tolerance_pct,
                paired_verdict_name(j->look.verdict), ab_stop_name(g->stop));
        field(f, str_at(b->json, "environment", "revision"));
        field(f, str_at(c->json, "environment", "revision"));
        field(f, str_at(b->json, "environment", "host"));
        field(f, str_at(b->json, "environment", "time_utc"));
        field(f, str_at(c->json, "environment", "time_utc"));
        for (int k = 0; k < 2; k++)
            if (isfinite(r[i].side[k].load1))
                fprintf(f, ",%.2f", r[i].side[k].load1);
            else
                fputc(',', f);
        fputc('\n', f);
    }
}
