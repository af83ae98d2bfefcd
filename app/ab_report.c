/* app/ab_report.c: the A/B gate's judgement and its outputs (ab.h): the
 * paired statistic on the used rounds (measure/paired.h), the verdict (and
 * "a busy machine" when the disturbed rounds explain it), the attribution by
 * phase and by device from the paired deltas, and the text, --json and
 * --csv forms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/ab.h"
#include "common/base/status.h"

#define AB_ALPHA 0.05

const char *const ab_group_names[AB_GROUPS] = {"data", "forward+backward", "comm exposed",
                                               "optimizer", "idle"};

/* The phases of group g, seconds per step. */
static double group_of(const double *ph, int g)
{
    switch (g) {
    case 0:
        return ph[PH_DATA] + ph[PH_H2D] + ph[PH_SCATTER] + ph[PH_REPLICATE];
    case 1:
        return ph[PH_FORWARD] + ph[PH_LOSS] + ph[PH_BACKWARD];
    case 2:
        return ph[PH_COMM_EXPOSED] + ph[PH_GATHER]; /* ZeRO-3: waits for a layer's gather */
    case 3:
        return ph[PH_OPTIM];
    default:
        return ph[PH_IDLE] + ph[PH_SKEW];
    }
}

/* How much device dv's work grew (by the work), else its forward+backward. */
static double growth(const ab_judgement_t *j, int dv)
{
    if (j->by_work)
        return isfinite(j->work_ratio[dv]) ? j->work_ratio[dv] - 1.0 : 0.0;
    return j->base[dv][1] > 0 ? j->delta[dv][1] / j->base[dv][1] : 0.0;
}

bool ab_lopsided(const ab_round_t *r)
{
    return r->side[AB_BASE].disturbed != r->side[AB_CAND].disturbed;
}

static const char *dev_word(const config_t *cfg) { return cfg->mode == MODE_DDP ? "rank" : "device"; }

void ab_judge(const config_t *cfg, const ab_round_t *r, int nr, ab_judgement_t *j)
{
    memset(j, 0, sizeof *j);
    j->straggler = -1;
    double tol = cfg->tolerance_pct / 100.0;
    double *d = calloc((size_t)nr + 1, sizeof *d), *dc = calloc((size_t)nr + 1, sizeof *dc);
    double *dw = calloc((size_t)nr + 1, sizeof *dw);
    double *tmp = calloc((size_t)nr + 1, sizeof *tmp), *tb = calloc((size_t)nr + 1, sizeof *tb);
    if (!d || !dc || !dw || !tmp || !tb) {
        free(d), free(dc), free(dw), free(tmp), free(tb);
        j->verdict = PAIRED_NO_VERDICT;
        snprintf(j->reason, sizeof j->reason, "out of memory");
        return;
    }
    int n = 0, nc = 0;
    j->ndev = MAX_DEVICES;
    for (int i = 0; i < nr; i++) {
        if (!r[i].used)
            continue;
        j->by_work = r[i].by_work;
        dw[n] = log(r[i].ratio_wall);
        d[n++] = log(r[i].ratio);
        /* a lopsided round (one side disturbed, the other not) is what a busy
         * machine can turn into a false change; a round disturbed on both
         * sides is paired noise, which the interval already carries */
        if (ab_lopsided(&r[i]))
            j->disturbed++;
        else
            dc[nc++] = log(r[i].ratio);
        if (r[i].side[AB_BASE].disturbed && r[i].side[AB_CAND].disturbed)
            j->both_disturbed++;
        for (int k = 0; k < 2; k++)
            if (r[i].side[k].ndev < j->ndev)
                j->ndev = r[i].side[k].ndev;
    }
    if (n == 0)
        j->ndev = 0;
    paired_estimate_median(d, n, AB_ALPHA, &j->est);
    paired_estimate_hl(d, n, AB_ALPHA, &j->est_hl);
    paired_estimate_median(dc, nc, AB_ALPHA, &j->est_clean);
    paired_estimate_median(dw, n, AB_ALPHA, &j->est_wall);
    j->verdict = paired_judge(&j->est, tol);
    j->rounds_to_settle = paired_rounds_to_settle(&j->est, tol);
    /* Judged by the work, a change in waiting alone (communication, idle)
     * would pass unseen: when no round was disturbed, the wall time can be
     * trusted, and a wall regression the work does not show is one. */
    if (j->by_work && j->verdict != PAIRED_REGRESSED && j->disturbed == 0 &&
        j->both_disturbed == 0 && paired_judge(&j->est_wall, tol) == PAIRED_REGRESSED) {
        j->verdict = PAIRED_REGRESSED;
        j->wall_judged = true;
        snprintf(j->reason, sizeof j->reason, "the median step grew %+.1f%% at least while the "
                 "work did not (%+.1f%%): the step waits longer (communication, idle)",
                 100.0 * (exp(j->est_wall.lo) - 1.0), 100.0 * (exp(j->est.estimate) - 1.0));
    }

    /* a busy machine: when lopsided rounds are among the used ones, a
     * change must stand on the even rounds alone */
    if (!j->wall_judged && j->disturbed > 0 && (j->verdict == PAIRED_REGRESSED || j->verdict == PAIRED_IMPROVED) &&
        paired_judge(&j->est_clean, tol) != j->verdict) {
        /* the first lopsided round's own account of what happened */
        const char *why = "", *who = "";
        int at = 0;
        for (int i = 0; i < nr && !why[0]; i++)
            for (int k = 0; k < 2 && r[i].used && ab_lopsided(&r[i]); k++)
                if (r[i].side[k].disturbed && r[i].side[k].why[0] && !why[0]) {
                    why = r[i].side[k].why;
                    who = k == AB_BASE ? "base" : "candidate";
                    at = r[i].round + 1;
                }
        char ex[220] = "";
        if (why[0])
            snprintf(ex, sizeof ex, " (round %d's %s: %s)", at, who, why);
        snprintf(j->reason, sizeof j->reason,
                 "a busy machine: %d of %d rounds ran with one side disturbed%s, and the %d "
                 "other rounds do not show the %s",
                 j->disturbed, n, ex, nc,
                 j->verdict == PAIRED_REGRESSED ? "regression" : "improvement");
        j->verdict = PAIRED_NO_VERDICT;
        j->busy = j->explained = true;
    } else if (j->verdict == PAIRED_NO_VERDICT && (j->disturbed > 0 || 2 * j->both_disturbed >= n)) {
        /* the noise that keeps the interval wide is the machine's: say so,
         * with one run's own account */
        const char *why = "";
        for (int i = 0; i < nr && !why[0]; i++)
            for (int k = 0; k < 2 && r[i].used; k++)
                if (r[i].side[k].disturbed && r[i].side[k].why[0] && !why[0])
                    why = r[i].side[k].why;
        j->busy = true;
        snprintf(j->reason, sizeof j->reason, "a busy machine: %d of %d rounds ran with one side "
                 "disturbed, %d with both%s%s", j->disturbed, n, j->both_disturbed,
                 why[0] ? "; e.g. " : "", why);
    }

    /* attribution: per device and phase group, the median of the paired
     * deltas, against the base's median of that group and of the step */
    for (int g = 0; g < AB_GROUPS; g++)
        for (int dv = 0; dv < j->ndev; dv++) {
            int m = 0;
            for (int i = 0; i < nr; i++) {
                if (!r[i].used)
                    continue;
                double b = group_of(r[i].side[AB_BASE].phase[dv], g);
                double c = group_of(r[i].side[AB_CAND].phase[dv], g);
                tmp[m] = c - b;
                tb[m++] = b;
            }
            j->delta[dv][g] = paired_median(tmp, m);
            j->base[dv][g] = paired_median(tb, m);
        }
    int m = 0;
    for (int i = 0; i < nr; i++)
        if (r[i].used)
            tb[m++] = r[i].side[AB_BASE].step_p50;
    j->base_step = paired_median(tb, m);

    /* by the work: each device's median paired ratio of its own work */
    for (int dv = 0; j->by_work && dv < j->ndev; dv++) {
        int k = 0;
        for (int i = 0; i < nr; i++)
            if (r[i].used && r[i].side[AB_BASE].work_dev[dv] > 0.0 &&
                r[i].side[AB_CAND].work_dev[dv] > 0.0)
                tmp[k++] = r[i].side[AB_CAND].work_dev[dv] / r[i].side[AB_BASE].work_dev[dv];
        j->work_ratio[dv] = k > 0 ? paired_median(tmp, k) : NAN;
    }
    /* a straggler: one device whose work (on the CPU; elsewhere its
     * forward+backward) grew by more than 3% while every other's grew by less
     * than half as much */
    if (j->ndev > 1) {
        int top = -1;
        double best = 0.0;
        for (int dv = 0; dv < j->ndev; dv++) {
            double rel = growth(j, dv);
            if (rel > best)
                best = rel, top = dv;
        }
        bool alone = top >= 0 && best > 0.03;
        for (int dv = 0; alone && dv < j->ndev; dv++) {
            double rel = growth(j, dv);
            if (dv != top && rel > best / 2)
                alone = false;
        }
        if (alone)
            j->straggler = top;
    }
    free(d), free(dc), free(dw), free(tmp), free(tb);
}

// ---------------------------------------------------------------------------
// text

/* "+4.2%" of the base step */
static double pct(double ratio) { return 100.0 * (ratio - 1.0); }

/* "straggler: rank 1 (work +10.2%; rank 0 +0.3%)" when one device alone grew */
static void straggler_line(FILE *f, const config_t *cfg, const ab_judgement_t *j)
{
    if (j->straggler < 0)
        return;
    fprintf(f, "straggler: %s %d (%s %+.1f%%; ", dev_word(cfg), j->straggler,
            j->by_work ? "work" : "forward+backward", 100.0 * growth(j, j->straggler));
    for (int dv = 0, first = 1; dv < j->ndev; dv++)
        if (dv != j->straggler) {
            fprintf(f, "%s%s %d %+.1f%%", first ? "" : ", ", dev_word(cfg), dv, 100.0 * growth(j, dv));
            first = 0;
        }
    fprintf(f, ")\n");
}

void ab_print_text(FILE *f, const config_t *cfg, const char *base, const char *cand,
                   const ab_round_t *r, int nr, const ab_judgement_t *j)
{
    (void)base, (void)cand;
    const paired_est_t *e = &j->est;
    double tol = cfg->tolerance_pct;
    double load_lo = INFINITY, load_hi = -INFINITY;
    for (int i = 0; i < nr; i++)
        for (int k = 0; k < 2; k++)
            if (isfinite(r[i].side[k].load1)) {
                load_lo = fmin(load_lo, r[i].side[k].load1);
                load_hi = fmax(load_hi, r[i].side[k].load1);
            }
    fprintf(f, "candidate / base, %s: %.3f", j->by_work ? "work per step (CPU seconds, p10)" : "median step",
            exp(e->estimate));
    if (!isnan(e->lo))
        fprintf(f, " (%.0f%% interval %.3f..%.3f, %+.1f%%..%+.1f%%)", 100 * e->conf, exp(e->lo),
                exp(e->hi), pct(exp(e->lo)), pct(exp(e->hi)));
    fprintf(f, " over %d rounds; Hodges-Lehmann %.3f", e->n, exp(j->est_hl.estimate));
    if (isfinite(load_lo))
        fprintf(f, "; load %.1f..%.1f", load_lo, load_hi);
    fputc('\n', f);
    if (j->by_work && !isnan(j->est_wall.lo))
        fprintf(f, "candidate / base, median step (wall): %.3f (%.0f%% interval %.3f..%.3f), %s\n",
                exp(j->est_wall.estimate), 100 * j->est_wall.conf, exp(j->est_wall.lo),
                exp(j->est_wall.hi),
                j->disturbed + j->both_disturbed == 0 ? "judged too: no round was disturbed"
                                                      : "not judged: disturbed rounds");
    switch (j->verdict) {
    case PAIRED_REGRESSED:
        if (j->wall_judged)
            fprintf(f, "verdict: regressed: %s (tolerance %g%%)\n", j->reason, tol);
        else
            fprintf(f, "verdict: regressed: the candidate is slower by %+.1f%% at least "
                    "(tolerance %g%%)\n", pct(exp(e->lo)), tol);
        break;
    case PAIRED_IMPROVED:
        fprintf(f, "verdict: improved: the candidate is faster by %.1f%% at least (tolerance %g%%)\n",
                -pct(exp(e->hi)), tol);
        break;
    case PAIRED_NO_CHANGE:
        fprintf(f, "verdict: no change: within +-%g%%\n", tol);
        break;
    default:
        if (j->explained)
            fprintf(f, "verdict: no verdict: %s\n", j->reason);
        else if (e->n < PAIRED_MIN_ROUNDS)
            fprintf(f, "verdict: no verdict: %d rounds give no 95%% interval; use --repeat %d or "
                    "more%s%s\n", e->n, PAIRED_MIN_ROUNDS, j->busy ? "; " : "",
                    j->busy ? j->reason : "");
        else if (j->rounds_to_settle < 0)
            fprintf(f, "verdict: no verdict: the interval straddles the %g%% tolerance; at this "
                    "noise more than %d rounds would settle it (or none, when the change sits on "
                    "the tolerance): a quieter machine%s%s\n", tol, PAIRED_MAX,
                    j->busy ? "; " : "", j->busy ? j->reason : "");
        else
            fprintf(f, "verdict: no verdict: the interval straddles the %g%% tolerance; about %d "
                    "more rounds would settle it at this noise (--repeat %d), or a quieter "
                    "machine%s%s\n", tol, j->rounds_to_settle - e->n, j->rounds_to_settle,
                    j->busy ? "; " : "", j->busy ? j->reason : "");
    }
    /* where the change went: the largest paired deltas (at least 1% of the
     * base's step), by device and phase group; not when the machine is
     * what moved (a busy core shows as any phase) */
    if (j->by_work && j->ndev > 1) {
        fprintf(f, "work by %s:", dev_word(cfg));
        for (int dv = 0; dv < j->ndev; dv++)
            fprintf(f, "%s %s %d %+.1f%%", dv ? "," : "", dev_word(cfg), dv,
                    pct(j->work_ratio[dv]));
        fputc('\n', f);
    }
    if (j->busy) {
        fprintf(f, "attribution: none (a busy machine moves every phase)\n");
        straggler_line(f, cfg, j);
        return;
    }
    int shown = 0;
    bool seen[MAX_DEVICES][AB_GROUPS] = {{false}};
    for (int pass = 0; pass < 3 && j->base_step > 0; pass++) {
        int bd = -1, bg = -1;
        double best = 0.01;
        for (int dv = 0; dv < j->ndev; dv++)
            for (int g = 0; g < AB_GROUPS; g++) {
                double c = fabs(j->delta[dv][g]) / j->base_step;
                if (!seen[dv][g] && c >= best)
                    best = c, bd = dv, bg = g;
            }
        if (bd < 0)
            break;
        seen[bd][bg] = true;
        char who[32] = "";
        if (j->ndev > 1)
            snprintf(who, sizeof who, "%s %d ", dev_word(cfg), bd);
        double rel = j->base[bd][bg] > 0 ? 100.0 * j->delta[bd][bg] / j->base[bd][bg] : NAN;
        fprintf(f, "%s %s%s %+.1f%% (%+.3f ms a step, %+.1f%% of the base's step)\n",
                shown ? "            " : "attribution:", who, ab_group_names[bg], rel,
                1e3 * j->delta[bd][bg], 100.0 * j->delta[bd][bg] / j->base_step);
        shown++;
    }
    straggler_line(f, cfg, j);
}

// ---------------------------------------------------------------------------
// --json

static void add_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *est_json(const paired_est_t *e, const char *method)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", method);
    cJSON_AddNumberToObject(o, "rounds", e->n);
    add_num(o, "ratio", exp(e->estimate));
    add_num(o, "lo", exp(e->lo));
    add_num(o, "hi", exp(e->hi));
    add_num(o, "confidence", e->conf > 0 ? e->conf : NAN);
    add_num(o, "spread_log", e->spread);
    return o;
}

int ab_print_json(FILE *f, const config_t *cfg, const char *base, const char *cand,
                  const ab_round_t *r, int nr, const ab_judgement_t *j)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "tool", "ddpbench");
    cJSON *ab = cJSON_AddObjectToObject(o, "ab");
    cJSON_AddStringToObject(ab, "base", base);
    cJSON_AddStringToObject(ab, "candidate", cand);
    cJSON_AddStringToObject(ab, "mode", mode_name(cfg->mode));
    cJSON_AddStringToObject(ab, "order", "ABBA");
    cJSON_AddStringToObject(ab, "figure", j->by_work ? "work_cpu_s.p10" : "step_time_s.p50");
    cJSON_AddNumberToObject(ab, "rounds_asked", cfg->repeat);
    cJSON_AddNumberToObject(ab, "tolerance_pct", cfg->tolerance_pct);
    cJSON_AddItemToObject(ab, "estimate", est_json(&j->est, "median of paired log-ratios, "
                                                            "sign-test interval"));
    cJSON_AddItemToObject(ab, "hodges_lehmann", est_json(&j->est_hl, "Hodges-Lehmann, "
                                                                     "Wilcoxon signed-rank interval"));
    cJSON_AddItemToObject(ab, "even_rounds", est_json(&j->est_clean, "median of the rounds not "
                                                                    "lopsided, sign-test interval"));
    cJSON_AddItemToObject(ab, "wall", est_json(&j->est_wall, "median step: median of paired "
                                                              "log-ratios, sign-test interval"));
    cJSON_AddBoolToObject(ab, "wall_judged", j->wall_judged);
    cJSON *wr = cJSON_AddArrayToObject(ab, "work_ratio_by_device");
    for (int dv = 0; j->by_work && dv < j->ndev; dv++)
        cJSON_AddItemToArray(wr, isfinite(j->work_ratio[dv]) ? cJSON_CreateNumber(j->work_ratio[dv])
                                                             : cJSON_CreateNull());
    cJSON_AddStringToObject(ab, "verdict", paired_verdict_name(j->verdict));
    cJSON_AddNumberToObject(ab, "exit_status", j->verdict == PAIRED_REGRESSED    ? 3
                                               : j->verdict == PAIRED_NO_VERDICT ? 4
                                                                                 : 0);
    if (j->verdict == PAIRED_NO_VERDICT && j->rounds_to_settle >= 0)
        cJSON_AddNumberToObject(ab, "rounds_to_settle", j->rounds_to_settle);
    else
        cJSON_AddNullToObject(ab, "rounds_to_settle");
    cJSON_AddNumberToObject(ab, "lopsided_rounds", j->disturbed);
    cJSON_AddNumberToObject(ab, "both_disturbed_rounds", j->both_disturbed);
    cJSON_AddBoolToObject(ab, "busy_machine", j->busy);
    cJSON_AddStringToObject(ab, "reason", j->reason);
    if (j->straggler >= 0)
        cJSON_AddNumberToObject(ab, "straggler", j->straggler);
    else
        cJSON_AddNullToObject(ab, "straggler");
    cJSON *att = cJSON_AddArrayToObject(ab, "attribution");
    for (int dv = 0; dv < j->ndev; dv++)
        for (int g = 0; g < AB_GROUPS; g++) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "device", dv);
            cJSON_AddStringToObject(a, "phases", ab_group_names[g]);
            add_num(a, "base_s", j->base[dv][g]);
            add_num(a, "delta_s", j->delta[dv][g]);
            add_num(a, "delta_of_step", j->base_step > 0 ? j->delta[dv][g] / j->base_step : NAN);
            cJSON_AddItemToArray(att, a);
        }
    cJSON *rounds = cJSON_AddArrayToObject(o, "rounds");
    for (int i = 0; i < nr; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "round", r[i].round + 1); /* 0: the warm-up */
        cJSON_AddStringToObject(x, "order", r[i].base_first ? "base,candidate" : "candidate,base");
        cJSON_AddBoolToObject(x, "used", r[i].used);
        add_num(x, "ratio", r[i].ratio);
        add_num(x, "ratio_wall", r[i].ratio_wall);
        cJSON_AddItemToObject(x, "base", cJSON_Duplicate(r[i].side[AB_BASE].json, 1));
        cJSON_AddItemToObject(x, "candidate", cJSON_Duplicate(r[i].side[AB_CAND].json, 1));
        add_num(x, "base_wall_s", r[i].side[AB_BASE].wall_s);
        add_num(x, "candidate_wall_s", r[i].side[AB_CAND].wall_s);
        cJSON_AddItemToArray(rounds, x);
    }
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!txt)
        return DDP_ERR_RUNTIME;
    fputs(txt, f);
    fputc('\n', f);
    cJSON_free(txt);
    return ferror(f) ? DDP_ERR_RUNTIME : DDP_OK;
}

// ---------------------------------------------------------------------------
// --csv: one row per round, with the interval and the provenance

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsString(x) ? x->valuestring : "";
}

/* a CSV field without commas or newlines */
static void field(FILE *f, const char *s)
{
    fputc(',', f);
    for (; *s; s++)
        fputc(*s == ',' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

void ab_print_csv(FILE *f, const config_t *cfg, const ab_round_t *r, int nr,
                  const ab_judgement_t *j)
{
    fputs("round,order,used,mode,figure,base_s,candidate_s,ratio,ratio_wall,lopsided,"
          "ratio_estimate,ratio_lo,ratio_hi,confidence,rounds,tolerance_pct,verdict,"
          "base_revision,candidate_revision,host,base_time_utc,candidate_time_utc,base_load1,"
          "candidate_load1\n",
          f);
    const paired_est_t *e = &j->est;
    for (int i = 0; i < nr; i++) {
        const ab_side_t *b = &r[i].side[AB_BASE], *c = &r[i].side[AB_CAND];
        fprintf(f, "%d,%s,%d,%s,%s,%.9g,%.9g,%.9g,%.9g,%d", r[i].round + 1,
                r[i].base_first ? "BC" : "CB", r[i].used, mode_name(cfg->mode),
                r[i].by_work ? "work_cpu_s.p10" : "step_time_s.p50", round_figure(&r[i], AB_BASE),
                round_figure(&r[i], AB_CAND), r[i].ratio, r[i].ratio_wall, ab_lopsided(&r[i]));
        fprintf(f, ",%.9g", exp(e->estimate));
        if (isnan(e->lo))
            fputs(",,,", f);
        else
            fprintf(f, ",%.9g,%.9g,%.6g", exp(e->lo), exp(e->hi), e->conf);
        fprintf(f, ",%d,%g,%s", e->n, cfg->tolerance_pct, paired_verdict_name(j->verdict));
        field(f, str_at(b->json, "environment", "revision"));
        field(f, str_at(c->json, "environment", "revision"));
        field(f, str_at(b->json, "environment", "host"));
        field(f, str_at(b->json, "environment", "time_utc"));
        field(f, str_at(c->json, "environment", "time_utc"));
        if (isfinite(b->load1))
            fprintf(f, ",%.2f", b->load1);
        else
            fputc(',', f);
        if (isfinite(c->load1))
            fprintf(f, ",%.2f", c->load1);
        else
            fputc(',', f);
        fputc('\n', f);
    }
}
