/* gate/ab.c: the A/B gate's rounds (gate.h): a warm-up of each side, then
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
#include "gate/ab.h"
#include "common/base/clock.h"
#include "common/base/status.h"

/* A child's deadline without --timeout: this many times the base's warm-up run
 * (a busy 2-core machine took up to 5 times), never less than the floor. */
#define AB_DEADLINE_X 10.0
#define AB_DEADLINE_FLOOR_S 10.0
/* The next pair's forecast: the longest of the last few (the warm-up's first). */
#define AB_PAIR_MEMORY 4
/* A child's length without --steps or --epochs: the fastest to decide every try
 * on a shared 2-core machine (docs/gate.md, "The length of a child run"). */
#define AB_CHILD_STEPS "16"

static void round_ratio(ab_round_t *x, bool by_work)
{
    x->by_work = by_work;
    x->ratio = round_figure(x, AB_CAND) / round_figure(x, AB_BASE);
    x->ratio_wall = x->side[AB_CAND].step_p50 / x->side[AB_BASE].step_p50;
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

/* A gate's run: its executables, the children's command line, the rounds so far. */
typedef struct {
    const config_t *cfg;
    FILE *info;                 /* its lines: stderr under --json or --csv */
    char self[CONFIG_PATH_LEN]; /* this executable, the candidate by default */
    const char *exe[2];
    ab_gate_t g;
    int cap;                    /* the most rounds, in whole ABBA pairs */
    int retakes;                /* lopsided rounds it may still retake */
    int most;                   /* rounds it has room for: cap, retakes, the warm-up */
    char **args;                /* a child's command line */
    bool own_length;            /* the gate gave the children --steps */
    ab_child_t child;
    char why[96];               /* the children's deadline, said */
    ab_round_t *r;
    int nr;
    double *pair_s;             /* each pair's wall time, the warm-up's first */
    int npairs;
    bool by_work;               /* the figure judged is the work, not the median step */
    double t_start;
} ab_run_t;

/* The executables, the interval calibrated for the most rounds, and the children's
 * command line: the user's options less the gate's own, with --json. */
static int ab_setup(ab_run_t *a, const gate_opts_t *go, const config_line_t *line, int argc,
                    char **argv, char *err)
{
    a->exe[AB_BASE] = go->against;
    a->exe[AB_CAND] = go->candidate;
    if (!go->candidate[0]) {
        ssize_t k = readlink("/proc/self/exe", a->self, sizeof a->self - 1);
        if (k <= 0)
            return err_set(err, DDP_ERR_RUNTIME, "--against: cannot find this executable: %s",
                           strerror(errno));
        a->self[k] = 0;
        a->exe[AB_CAND] = a->self;
    }
    a->g = (ab_gate_t){.base = a->exe[AB_BASE], .cand = a->exe[AB_CAND], .budget_s = go->budget_s,
                       .tolerance_pct = go->tolerance_pct, .stop = AB_STOP_CAP};
    a->cap = go->rounds - go->rounds % PAIRED_EVERY;
    if (a->cap < PAIRED_EVERY ||
        confseq_calibrate(&a->g.cs, PAIRED_SHAPE, a->cap, PAIRED_EVERY, PAIRED_ALPHA) != 0)
        return err_set(err, DDP_ERR_INPUT, "--repeat %d with --against: the most rounds must be "
                       "%d..%d", go->rounds, PAIRED_EVERY, CONFSEQ_MAX);
    int lo_rank, hi_rank;
    confseq_ranks(&a->g.cs, a->cap, &lo_rank, &hi_rank);
    if (lo_rank < 1 || hi_rank > a->cap)
        return err_set(err, DDP_ERR_INPUT, "--repeat %d with --against: so few rounds give no "
                       "%.0f%% interval valid at every look; at least %d do", go->rounds,
                       100 * (1 - PAIRED_ALPHA), fewest_cap());
    static const char *const drop[] = {"against", "candidate", "repeat", "json", "csv",
                                       "tolerance", "quiet", "gate-budget", NULL};
    a->retakes = PAIRED_RETAKES(a->cap);
    a->most = a->cap + a->retakes + 1;
    a->args = calloc((size_t)argc + 5, sizeof *a->args);
    a->r = calloc((size_t)a->most, sizeof *a->r);
    a->pair_s = calloc((size_t)a->cap / PAIRED_EVERY + 1, sizeof *a->pair_s);
    if (!a->args || !a->r || !a->pair_s)
        return err_set(err, DDP_ERR_RUNTIME, "--against: out of memory");
    int na = config_line_argv_without(line, argc, argv, drop, a->args);
    a->own_length = !config_line_given(line, "steps") && !config_line_given(line, "epochs");
    if (a->own_length) {
        a->args[na++] = "--steps";
        a->args[na++] = AB_CHILD_STEPS;
    }
    a->args[na++] = "--json";
    a->args[na] = NULL;
    a->child = (ab_child_t){.args = a->args, .deadline_s = a->cfg->timeout_s,
                            .deadline_why = a->why};
    snprintf(a->why, sizeof a->why, "--timeout %g s", a->cfg->timeout_s);
    return DDP_OK;
}

/* One side's child in round `round` (-1: the warm-up) into x. */
static int ab_side(ab_run_t *a, ab_round_t *x, int which, int round, char *err)
{
    a->args[0] = (char *)a->exe[which];
    a->child.which = which;
    a->child.round = round;
    return ab_child_run(&a->child, &x->side[which], err);
}

/* The warm-up: one run of each side, not counted (a cold page cache: docs/gate.md);
 * the base's sets the children's deadline unless --timeout does. */
static int ab_warmup(ab_run_t *a, bool timeout_given, char *err)
{
    ab_round_t *x = &a->r[a->nr++];
    x->round = -1;
    x->base_first = true;
    for (int which = 0; which < 2; which++) {
        TRY(ab_side(a, x, which, -1, err));
        if (which == AB_BASE && !timeout_given) {
            double base_s = x->side[AB_BASE].wall_s;
            a->child.deadline_s = fmax(AB_DEADLINE_FLOOR_S, AB_DEADLINE_X * base_s);
            snprintf(a->why, sizeof a->why,
                     "%g x the base's warm-up run of %.1f s; --timeout sets it", AB_DEADLINE_X,
                     base_s);
        }
    }
    /* Both sides must run the same BLAS kernels: OpenBLAS's cores differ by
     * twice (AVX2 against AVX-512), which no build's change would explain. */
    const char *bc = x->side[AB_BASE].core, *cc = x->side[AB_CAND].core;
    if (strcmp(bc, cc) != 0)
        return err_set(err, DDP_ERR_INPUT, "--against: the base ran OpenBLAS's %s kernels and the "
                       "candidate its %s kernels (see OPENBLAS_CORETYPE): the rounds would "
                       "compare kernels, not builds", bc[0] ? bc : "unnamed", cc[0] ? cc : "unnamed");
    /* The figure judged: on the CPU each side's work (work_cpu_s.p10, which
     * another process hardly moves: docs/gate.md), elsewhere the median step. */
    a->by_work = x->side[AB_BASE].work_p10 > 0.0 && x->side[AB_CAND].work_p10 > 0.0;
    round_ratio(x, a->by_work);
    a->pair_s[a->npairs++] = now_s() - a->t_start;
    return DDP_OK;
}

/* Round `round`: both sides in its ABBA order, and its ratio. */
static int ab_round(ab_run_t *a, ab_round_t *x, int round, char *err)
{
    x->round = round;
    x->base_first = paired_base_first(round);
    x->used = true;
    for (int k = 0; k < 2; k++)
        TRY(ab_side(a, x, (k == 0) == x->base_first ? AB_BASE : AB_CAND, round, err));
    if (a->by_work && !(x->side[AB_BASE].work_p10 > 0.0 && x->side[AB_CAND].work_p10 > 0.0))
        return err_set(err, DDP_ERR_RUNTIME, "--against: round %d's %s has no work_cpu_s.p10 "
                       "though the warm-up run had it", round + 1,
                       x->side[AB_BASE].work_p10 > 0.0 ? "candidate" : "base");
    round_ratio(x, a->by_work);
    return DDP_OK;
}

/* The rounds in ABBA order, a look after every pair, until a look decides,
 * another pair would not fit the budget, or the most rounds. */
static int ab_rounds(ab_run_t *a, char *err)
{
    const bool quiet = a->cfg->quiet;
    ab_judgement_t j;
    double pair_t0 = now_s();
    for (int round = 0; round < a->cap;) {
        double next = 0.0;
        for (int i = a->npairs - 1; i >= 0 && i >= a->npairs - AB_PAIR_MEMORY; i--)
            next = fmax(next, a->pair_s[i]);
        if (round % PAIRED_EVERY == 0) {
            /* a pair that would end past the budget is not started */
            if (now_s() - a->t_start + next > a->g.budget_s) {
                a->g.stop = AB_STOP_BUDGET;
                return DDP_OK;
            }
            pair_t0 = now_s();
        }
        ab_round_t *x = &a->r[a->nr++];
        TRY(ab_round(a, x, round, err));
        /* retake only what pairing cannot cancel, while retakes are left and
         * another round fits the budget */
        bool lopsided = ab_lopsided(x);
        bool retake = lopsided && a->retakes > 0 && a->nr < a->most &&
                      now_s() - a->t_start + next / PAIRED_EVERY <= a->g.budget_s;
        if (!quiet)
            fprintf(a->info, "  round %2d (%s): base %.3f ms, candidate %.3f ms, ratio %.3f%s\n",
                    round + 1, x->base_first ? "BC" : "CB", 1e3 * round_figure(x, AB_BASE),
                    1e3 * round_figure(x, AB_CAND), x->ratio,
                    retake ? ", one side disturbed: retaken" : lopsided ? ", one side disturbed" : "");
        if (retake) {
            x->used = false;
            a->retakes--;
            a->g.retaken++;
            continue;
        }
        if (++round % PAIRED_EVERY)
            continue;
        a->pair_s[a->npairs++] = now_s() - pair_t0;
        /* a look: the interval is valid at every one, so the gate may stop
         * at the first that settles the verdict */
        ab_judge(&a->g.cs, a->g.tolerance_pct / 100.0, a->r, a->nr, &j);
        if (!quiet) { /* "  look at 8 rounds: 1.004, interval 0.981..1.030: goes on" */
            char rr[64];
            ab_ratio_range(rr, sizeof rr, j.look.est.lo, j.look.est.hi);
            fprintf(a->info, "  look at %d rounds: %.3f, interval %s: %s\n", round,
                    exp(j.look.est.estimate), rr,
                    j.look.verdict == PAIRED_NO_VERDICT ? "goes on"
                                                        : paired_verdict_name(j.look.verdict));
        }
        if (j.look.verdict != PAIRED_NO_VERDICT) {
            a->g.stop = AB_STOP_DECIDED;
            return DDP_OK;
        }
    }
    return DDP_OK;
}

/* The verdict on every used round, its outputs and the exit status. */
static int ab_finish(ab_run_t *a, char *err)
{
    const config_t *cfg = a->cfg;
    ab_judgement_t j;
    int rc = DDP_OK;
    ab_judge(&a->g.cs, a->g.tolerance_pct / 100.0, a->r, a->nr, &j);
    if (cfg->json) {
        if (ab_print_json(stdout, cfg, &a->g, a->r, a->nr, &j) != DDP_OK)
            rc = err_set(err, DDP_ERR_RUNTIME, "stdout: write failed");
    } else if (cfg->csv) {
        ab_print_csv(stdout, cfg, &a->g, a->r, a->nr, &j);
    }
    if (!cfg->quiet || !(cfg->json || cfg->csv))
        ab_print_text(a->info, cfg, &a->g, a->r, a->nr, &j);
    if (rc != DDP_OK)
        return rc;
    if (fflush(stdout) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "stdout: write failed: %s", strerror(errno));
    return j.look.verdict == PAIRED_REGRESSED    ? DDP_ERR_REGRESSED
           : j.look.verdict == PAIRED_NO_VERDICT ? DDP_ERR_NOISY
                                                 : DDP_OK;
}

int ab_main(const gate_opts_t *go, const config_t *cfg, const config_line_t *line, int argc,
            char **argv, char *err)
{
    static ab_run_t a; /* its own path and lines: off the stack */
    a = (ab_run_t){.cfg = cfg, .info = (cfg->json || cfg->csv) ? stderr : stdout};
    int rc = ab_setup(&a, go, line, argc, argv, err);
    if (rc == DDP_OK && !cfg->quiet)
        fprintf(a.info, "A/B: base %s and candidate %s, %s, ABBA order: rounds until the "
                "interval decides, at most %d or %g s (--repeat, --gate-budget)%s\n",
                a.exe[AB_BASE], a.exe[AB_CAND], mode_name(cfg->mode), a.cap, a.g.budget_s,
                a.own_length ? "; each run " AB_CHILD_STEPS " steps (--steps sets it)" : "");
    a.t_start = now_s();
    if (rc == DDP_OK)
        rc = ab_warmup(&a, config_line_given(line, "timeout"), err);
    if (rc == DDP_OK)
        rc = ab_rounds(&a, err);
    a.g.seconds = now_s() - a.t_start;
    if (rc == DDP_OK)
        rc = ab_finish(&a, err);
    free(a.args);
    free(a.pair_s);
    for (int i = 0; i < a.nr; i++)
        for (int k = 0; k < 2; k++)
            cJSON_Delete(a.r[i].side[k].json);
    free(a.r);
    return rc;
}
