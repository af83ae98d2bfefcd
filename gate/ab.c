/* gate/ab.c: the A/B gate's rounds (ab.h): a warm-up of each side, then
 * rounds in ABBA order, a look after every pair, a lopsided round retaken
 * (a bounded number of times), and the end: decided, the budget, or the
 * most rounds.  Each child has a deadline: --timeout when given, else a
 * multiple of the base's own warm-up run. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gate/gate.h"
#include "gate/ab_child.h"
#include "gate/ab_judge.h"
#include "gate/ab_report.h"
#include "common/base/clock.h"
#include "common/base/status.h"

/* A child's deadline when --timeout is not given: this many times the
 * base's warm-up run (a run on a busy 2-core machine took up to 5 times its
 * quiet time), and never less than the floor (a child's start-up alone). */
#define AB_DEADLINE_X 10.0
#define AB_DEADLINE_FLOOR_S 10.0
/* The budget's forecast of the next pair of rounds: the longest of the last
 * few pairs (the warm-up's first), so that a gate does not start a pair it
 * cannot finish in time. */
#define AB_PAIR_MEMORY 4
/* A child's length when neither --steps nor --epochs is given: the length
 * that decided every try fastest on a shared 2-core machine
 * (bench/bench_round_length.sh, docs/gate.md): a run's fixed cost is ~0.2 s
 * quiet, and 16 steps (14 timed) judged as well as 64 in a quarter of the
 * time, where 8 left a busy machine undecided. */
#define AB_CHILD_STEPS "16"

static void round_ratio(ab_round_t *x, bool by_work)
{
    x->by_work = by_work;
    x->ratio = round_figure(x, AB_CAND) / round_figure(x, AB_BASE);
    x->ratio_wall = x->side[AB_CAND].step_p50 / x->side[AB_BASE].step_p50;
}

static void rounds_free(ab_round_t *r, int nr)
{
    for (int i = 0; i < nr; i++)
        for (int k = 0; k < 2; k++)
            cJSON_Delete(r[i].side[k].json);
    free(r);
}

/* The fewest most-rounds (even) whose calibrated interval has two ends by
 * the last look; 0 when none up to CONFSEQ_MAX. */
static int fewest_cap(void)
{
    for (int cap = PAIRED_EVERY; cap <= CONFSEQ_MAX; cap += PAIRED_EVERY) {
        confseq_t cs;
        int lo, hi;
        if (confseq_calibrate(&cs, PAIRED_SHAPE, cap, PAIRED_EVERY, PAIRED_ALPHA) != 0)
            return 0;
        confseq_ranks(&cs, cap, &lo, &hi);
        if (lo >= 1 && hi <= cap)
            return cap;
    }
    return 0;
}

/* The longest of the last AB_PAIR_MEMORY pair times */
static double forecast(const double *pair_s, int npairs)
{
    double m = 0.0;
    for (int i = npairs - 1; i >= 0 && i >= npairs - AB_PAIR_MEMORY; i--)
        m = fmax(m, pair_s[i]);
    return m;
}

int ab_main(const gate_opts_t *go, const config_t *cfg, const config_line_t *line, int argc,
            char **argv, char *err)
{
    char self[CONFIG_PATH_LEN] = "";
    const char *exe[2] = {go->against, go->candidate};
    if (!go->candidate[0]) {
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0)
            return err_set(err, DDP_ERR_RUNTIME, "--against: cannot find this executable: %s",
                           strerror(errno));
        self[k] = 0;
        exe[AB_CAND] = self;
    }
    ab_gate_t g = {.base = exe[AB_BASE], .cand = exe[AB_CAND], .budget_s = go->budget_s,
                  .tolerance_pct = go->tolerance_pct};
    /* the most rounds, in whole ABBA pairs, and the interval calibrated
     * for them before any round runs */
    int cap = go->rounds - go->rounds % PAIRED_EVERY;
    if (cap < PAIRED_EVERY ||
        confseq_calibrate(&g.cs, PAIRED_SHAPE, cap, PAIRED_EVERY, PAIRED_ALPHA) != 0)
        return err_set(err, DDP_ERR_INPUT, "--repeat %d with --against: the most rounds must be "
                       "%d..%d", go->rounds, PAIRED_EVERY, CONFSEQ_MAX);
    int lo_rank, hi_rank;
    confseq_ranks(&g.cs, cap, &lo_rank, &hi_rank);
    if (lo_rank < 1 || hi_rank > cap)
        return err_set(err, DDP_ERR_INPUT, "--repeat %d with --against: so few rounds give no "
                       "%.0f%% interval valid at every look; at least %d do", go->rounds,
                       100 * (1 - PAIRED_ALPHA), fewest_cap());
    bool timeout_given = config_line_given(line, "timeout");

    /* the children run the user's options less the gate's own, with --json */
    static const char *const drop[] = {"against", "candidate", "repeat", "json", "csv",
                                       "tolerance", "quiet", "gate-budget", NULL};
    char **args = calloc((size_t)argc + 5, sizeof *args);
    int retakes = PAIRED_RETAKES(cap); /* bounded: a machine busy throughout cannot be waited out */
    int most = cap + retakes + 1;      /* and the warm-up */
    ab_round_t *r = calloc((size_t)most, sizeof *r);
    double *pair_s = calloc((size_t)cap / PAIRED_EVERY + 1, sizeof *pair_s);
    if (!args || !r || !pair_s) {
        free(args), free(r), free(pair_s);
        return err_set(err, DDP_ERR_RUNTIME, "--against: out of memory");
    }
    int na = config_line_argv_without(line, argc, argv, drop, args);
    bool own_length = !config_line_given(line, "steps") && !config_line_given(line, "epochs");
    if (own_length) {
        args[na++] = "--steps";
        args[na++] = AB_CHILD_STEPS;
    }
    args[na++] = "--json";
    args[na] = NULL;

    FILE *info = (cfg->json || cfg->csv) ? stderr : stdout;
    if (!cfg->quiet)
        fprintf(info, "A/B: base %s and candidate %s, %s, ABBA order: rounds until the interval "
                "decides, at most %d or %g s (--repeat, --gate-budget)%s\n", exe[AB_BASE],
                exe[AB_CAND], mode_name(cfg->mode), cap, g.budget_s,
                own_length ? "; each run " AB_CHILD_STEPS " steps (--steps sets it)" : "");
    double t_start = now_s();
    ab_child_t child = {.args = args, .deadline_s = cfg->timeout_s};
    char why[96];
    snprintf(why, sizeof why, "--timeout %g s", cfg->timeout_s);
    child.deadline_why = why;
    int rc = DDP_OK, nr = 0, npairs = 0;
    /* warm-up: one run of each side first, not counted: the first run of an
     * executable pays for its cold page cache and libraries (the first
     * rounds measured without this were the furthest from 1) */
    r[nr].round = -1;
    r[nr].base_first = true;
    for (int which = 0; which < 2 && rc == DDP_OK; which++) {
        args[0] = (char *)exe[which];
        child.exe = exe[which];
        child.which = which;
        child.round = -1;
        rc = ab_child_run(&child, &r[nr].side[which], err);
        if (rc == DDP_OK && which == AB_BASE && !timeout_given) {
            /* from now on a child's deadline is the base's own run time's */
            double base_s = r[nr].side[AB_BASE].wall_s;
            child.deadline_s = fmax(AB_DEADLINE_FLOOR_S, AB_DEADLINE_X * base_s);
            snprintf(why, sizeof why, "%g x the base's warm-up run of %.1f s; --timeout sets it",
                     AB_DEADLINE_X, base_s);
        }
    }
    /* The figure judged: on the CPU, each side's work (work_cpu_s.p10: the
     * CPU seconds of the quickest tenth of its steps' work, which another
     * process on the machine hardly moves; docs/gate.md measures it against
     * the median step); elsewhere (a GPU, an older build without it) the
     * median step. */
    bool by_work = rc == DDP_OK && r[nr].side[AB_BASE].work_p10 > 0.0 &&
                   r[nr].side[AB_CAND].work_p10 > 0.0;
    if (rc == DDP_OK) {
        round_ratio(&r[nr], by_work);
        pair_s[npairs++] = now_s() - t_start;
    }
    nr++;
    g.stop = AB_STOP_CAP;
    ab_judgement_t j;
    double pair_t0 = now_s();
    for (int round = 0; rc == DDP_OK && round < cap;) {
        double elapsed = now_s() - t_start, next = forecast(pair_s, npairs);
        if (round % PAIRED_EVERY == 0) {
            /* a pair that would end past the budget is not started */
            if (elapsed + next > g.budget_s) {
                g.stop = AB_STOP_BUDGET;
                break;
            }
            pair_t0 = now_s();
        }
        ab_round_t *x = &r[nr++];
        x->round = round;
        x->base_first = paired_base_first(round);
        x->used = true;
        for (int k = 0; k < 2 && rc == DDP_OK; k++) {
            int which = (k == 0) == x->base_first ? AB_BASE : AB_CAND;
            args[0] = (char *)exe[which];
            child.exe = exe[which];
            child.which = which;
            child.round = round;
            rc = ab_child_run(&child, &x->side[which], err);
        }
        if (rc != DDP_OK)
            break;
        if (by_work && !(x->side[AB_BASE].work_p10 > 0.0 && x->side[AB_CAND].work_p10 > 0.0)) {
            rc = err_set(err, DDP_ERR_RUNTIME, "--against: round %d's %s has no work_cpu_s.p10 "
                         "though the warm-up run had it", round + 1,
                         x->side[AB_BASE].work_p10 > 0.0 ? "candidate" : "base");
            break;
        }
        round_ratio(x, by_work);
        /* retake only what pairing cannot cancel, while retakes are left and
         * another round fits the budget */
        bool lopsided = ab_lopsided(x);
        bool retake = lopsided && retakes > 0 && nr < most &&
                      now_s() - t_start + next / PAIRED_EVERY <= g.budget_s;
        if (!cfg->quiet)
            fprintf(info, "  round %2d (%s): base %.3f ms, candidate %.3f ms, ratio %.3f%s\n",
                    round + 1, x->base_first ? "BC" : "CB", 1e3 * round_figure(x, AB_BASE),
                    1e3 * round_figure(x, AB_CAND), x->ratio,
                    retake ? ", one side disturbed: retaken" : lopsided ? ", one side disturbed" : "");
        if (retake) {
            x->used = false;
            retakes--;
            g.retaken++;
            continue;
        }
        round++;
        if (round % PAIRED_EVERY)
            continue;
        pair_s[npairs++] = now_s() - pair_t0;
        /* a look: the interval is valid at every one, so the gate may stop
         * at the first that settles the verdict */
        ab_judge(&g.cs, g.tolerance_pct / 100.0, r, nr, &j);
        if (!cfg->quiet) {
            const paired_est_t *e = &j.look.est;
            char lo[24] = "open", hi[24] = "open";
            if (isfinite(e->lo))
                snprintf(lo, sizeof lo, "%.3f", exp(e->lo));
            if (isfinite(e->hi))
                snprintf(hi, sizeof hi, "%.3f", exp(e->hi));
            fprintf(info, "  look at %d rounds: %.3f, interval %s..%s: %s\n", round,
                    exp(e->estimate), lo, hi,
                    j.look.verdict == PAIRED_NO_VERDICT ? "goes on"
                                                        : paired_verdict_name(j.look.verdict));
        }
        if (j.look.verdict != PAIRED_NO_VERDICT) {
            g.stop = AB_STOP_DECIDED;
            break;
        }
    }
    free(args);
    free(pair_s);
    g.seconds = now_s() - t_start;
    if (rc != DDP_OK) {
        rounds_free(r, nr);
        return rc;
    }
    ab_judge(&g.cs, g.tolerance_pct / 100.0, r, nr, &j);
    if (cfg->json) {
        if (ab_print_json(stdout, cfg, &g, r, nr, &j) != DDP_OK)
            rc = err_set(err, DDP_ERR_RUNTIME, "stdout: write failed");
    } else if (cfg->csv) {
        ab_print_csv(stdout, cfg, &g, r, nr, &j);
    }
    if (!cfg->quiet || !(cfg->json || cfg->csv))
        ab_print_text(info, cfg, &g, r, nr, &j);
    rounds_free(r, nr);
    if (rc != DDP_OK)
        return rc;
    if (fflush(stdout) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "stdout: write failed: %s", strerror(errno));
    return j.look.verdict == PAIRED_REGRESSED    ? DDP_ERR_REGRESSED
           : j.look.verdict == PAIRED_NO_VERDICT ? DDP_ERR_NOISY
                                                 : DDP_OK;
}
