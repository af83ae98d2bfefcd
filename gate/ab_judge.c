/* gate/ab_judge.c: the A/B gate's judgement at a look (ab.h): the used rounds
 * judged by the rule (gate/paired.h), a busy machine said with one run's own
 * account, and the change placed by device and phase group, each delta with
 * the verdict's kind of interval, so a move within its noise is no finding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gate/ab.h"

const char *const ab_group_names[AB_GROUPS] = {"data", "forward+backward", "comm exposed",
                                               "optimizer", "idle"};

/* The phases of each group (-1 ends a row); ZeRO-3's waits for a layer's gather are comm. */
static const int group_phases[AB_GROUPS][5] = {
    {PH_DATA, PH_H2D, PH_SCATTER, PH_REPLICATE, -1}, {PH_FORWARD, PH_LOSS, PH_BACKWARD, -1},
    {PH_COMM_EXPOSED, PH_GATHER, -1}, {PH_OPTIM, -1}, {PH_IDLE, PH_SKEW, -1}};

/* The phases of group g, seconds per step, summed in the row's order. */
static double group_of(const double *ph, int g)
{
    double s = ph[group_phases[g][0]];
    for (int k = 1; group_phases[g][k] >= 0; k++)
        s += ph[group_phases[g][k]];
    return s;
}

double ab_growth(const ab_judgement_t *j, int dv, double *lo)
{
    if (j->by_work) {
        *lo = isfinite(j->work_lo[dv]) ? j->work_lo[dv] - 1.0 : -INFINITY;
        return isfinite(j->work_ratio[dv]) ? j->work_ratio[dv] - 1.0 : 0.0;
    }
    double b = j->base[dv][1];
    *lo = b > 0 ? j->delta_lo[dv][1] / b : -INFINITY;
    return b > 0 ? j->delta[dv][1] / b : 0.0;
}

/* The first disturbed side's own account among the used rounds (lopsided
 * ones only when `lopsided`): its words, its side and its round. */
static const char *first_why(const ab_round_t *r, int nr, bool lopsided, const char **who, int *at)
{
    for (int i = 0; i < nr; i++)
        for (int k = 0; k < 2 && r[i].used && (!lopsided || ab_lopsided(&r[i])); k++)
            if (r[i].side[k].disturbed && r[i].side[k].why[0]) {
                *who = k == AB_BASE ? "base" : "candidate";
                *at = r[i].round + 1;
                return r[i].side[k].why;
            }
    return "";
}

/* The words for the verdict's reason (wall-judged or busy). */
static void say_reason(const ab_round_t *r, int nr, double tol, ab_judgement_t *j)
{
    const paired_look_t *lk = &j->look;
    int n = lk->est.n, at = 0;
    const char *who = "";
    if (lk->wall_judged) {
        snprintf(j->reason, sizeof j->reason, "the median step grew %+.1f%% at least while the "
                 "work did not (%+.1f%%): the step waits longer (communication, idle)",
                 100.0 * (exp(lk->est_wall.lo) - 1.0), 100.0 * (exp(lk->est.estimate) - 1.0));
        return;
    }
    if (lk->explained) {
        /* the first lopsided round's own account of what happened */
        const char *why = first_why(r, nr, true, &who, &at);
        char ex[220] = "";
        if (why[0])
            snprintf(ex, sizeof ex, " (round %d's %s: %s)", at, who, why);
        snprintf(j->reason, sizeof j->reason,
                 "a busy machine: %d of %d rounds ran with one side disturbed%s, and the %d "
                 "other rounds do not show the %s",
                 lk->lopsided, n, ex, n - lk->lopsided,
                 paired_judge(&lk->est, tol) == PAIRED_IMPROVED ? "improvement" : "regression");
        j->busy = true;
        return;
    }
    if (lk->verdict == PAIRED_NO_VERDICT && (lk->lopsided > 0 || 2 * lk->both >= n)) {
        /* the noise that keeps the interval wide is the machine's: say so,
         * with one run's own account */
        const char *why = first_why(r, nr, false, &who, &at);
        j->busy = true;
        snprintf(j->reason, sizeof j->reason, "a busy machine: %d of %d rounds ran with one side "
                 "disturbed, %d with both%s%s", lk->lopsided, n, lk->both,
                 why[0] ? "; e.g. " : "", why);
    }
}

void ab_judge(const confseq_t *cs, double tol, const ab_round_t *r, int nr, ab_judgement_t *j)
{
    memset(j, 0, sizeof *j);
    j->straggler = -1;
    j->look.verdict = PAIRED_NO_VERDICT;
    paired_round_t *pr = calloc((size_t)nr + 1, sizeof *pr);
    double *d = calloc((size_t)nr + 1, sizeof *d), *tb = calloc((size_t)nr + 1, sizeof *tb);
    if (!pr || !d || !tb) {
        free(pr), free(d), free(tb);
        snprintf(j->reason, sizeof j->reason, "out of memory");
        return;
    }
    int n = 0;
    j->ndev = MAX_DEVICES;
    for (int i = 0; i < nr; i++) {
        if (!r[i].used)
            continue;
        j->by_work = r[i].by_work;
        pr[n].d = log(r[i].ratio);
        pr[n].d_wall = log(r[i].ratio_wall);
        pr[n].lopsided = ab_lopsided(&r[i]);
        pr[n].both = r[i].side[AB_BASE].disturbed && r[i].side[AB_CAND].disturbed;
        d[n] = pr[n].d;
        n++;
        for (int k = 0; k < 2; k++)
            if (r[i].side[k].ndev < j->ndev)
                j->ndev = r[i].side[k].ndev;
    }
    if (n == 0) { /* no round fit: no estimate, an interval open at both ends */
        paired_est_t none = {.estimate = NAN, .lo = -INFINITY, .hi = INFINITY, .spread = NAN};
        j->look.est = j->look.est_wall = j->look.est_clean = j->est_hl = none;
        j->ndev = 0;
        free(pr), free(d), free(tb);
        return;
    }
    paired_look(cs, pr, n, j->by_work, tol, &j->look);
    paired_estimate_hl(d, n, PAIRED_ALPHA, &j->est_hl);
    say_reason(r, nr, tol, j);

    /* attribution: per device and phase group, the median of the paired
     * deltas and their interval, against the base's median of that group
     * and of the step */
    paired_est_t e;
    for (int g = 0; g < AB_GROUPS; g++)
        for (int dv = 0; dv < j->ndev; dv++) {
            int m = 0;
            for (int i = 0; i < nr; i++) {
                if (!r[i].used)
                    continue;
                double b = group_of(r[i].side[AB_BASE].phase[dv], g);
                d[m] = group_of(r[i].side[AB_CAND].phase[dv], g) - b;
                tb[m++] = b;
            }
            paired_estimate_seq(cs, d, m, &e);
            j->delta[dv][g] = e.estimate;
            j->delta_lo[dv][g] = e.lo;
            j->delta_hi[dv][g] = e.hi;
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
                d[k++] = log(r[i].side[AB_CAND].work_dev[dv] / r[i].side[AB_BASE].work_dev[dv]);
        j->work_ratio[dv] = j->work_lo[dv] = j->work_hi[dv] = NAN;
        if (k > 0 && paired_estimate_seq(cs, d, k, &e) == 0) {
            j->work_ratio[dv] = exp(e.estimate);
            j->work_lo[dv] = exp(e.lo);
            j->work_hi[dv] = exp(e.hi);
        }
    }
    /* a straggler: one device whose work (on the CPU; elsewhere its
     * forward+backward) grew by more than 3%, beyond its own noise, while
     * every other's grew by less than half as much */
    if (j->ndev > 1) {
        int top = -1;
        double best = 0.0, lo;
        for (int dv = 0; dv < j->ndev; dv++) {
            double rel = ab_growth(j, dv, &lo);
            if (rel > best)
                best = rel, top = dv;
        }
        bool alone = top >= 0 && best > 0.03 && (ab_growth(j, top, &lo), lo > 0.0);
        for (int dv = 0; alone && dv < j->ndev; dv++)
            if (dv != top && ab_growth(j, dv, &lo) > best / 2)
                alone = false;
        if (alone)
            j->straggler = top;
    }
    free(pr), free(d), free(tb);
}
