/* gate/options.c: the gate's option table (options.h) and the rules that
 * join its options to the run's. */
#include "gate/options.h"

#include <sys/stat.h>
#include <unistd.h>

#include "common/base/status.h"

#define OPT_PART gate_opts_t

static const opt_t rows[] = {
    {"baseline", "FILE", NULL, "none", "judge against an earlier --json result: the work per "
     "step (work_cpu_s.p10) on the CPU, the median-step throughput elsewhere",
     NULL, PATH(baseline), .after = "report",
     EFF(CF_OUTPUT)},
    {"tolerance", "PCT", "5", NULL,
     "allowed slowdown against --baseline or --against (exit 3 beyond it)", NULL,
     DOUBLE(tolerance_pct, 0.0, 100.0),
     EFF(CF_OUTPUT)},
    {"against", "BASE", NULL, "none",
     "A/B gate: run the executable BASE and the candidate with these options, round by round "
     "in ABBA order, judging the median of their paired ratios after every pair by an interval "
     "valid at every look, until it decides (exit 0 no change or improved, 3 regressed) or "
     "--gate-budget runs out (4 no verdict); --repeat sets the most rounds (default "
     OPT_STR(GATE_AB_ROUNDS) " here)",
     NULL, PATH(against),
     EFF(CF_META)},
    {"gate-budget", "SEC", OPT_STR(GATE_BUDGET_S), NULL,
     "--against: start no pair of rounds that would end past SEC seconds of the gate", NULL,
     ABOVE(budget_s, 0.0, 1e6),
     EFF(CF_META)},
    {"candidate", "CAND", NULL, "this ddpbench", "the other side of --against", NULL,
     PATH(candidate),
     EFF(CF_META)},
};

/* What the A/B gate's children cannot take: what describes or writes one
 * run has no single run to describe (the A/B result is its text, --json or
 * --csv). */
static const struct {
    const char *opt, *why;
} one_run[] = {{"baseline", " (one gate at a time)"},
               {"predict", ""},
               {"scenario", ""},
               {"emit-pytorch", ""},
               {"save", ""},
               {"trace", " (it describes one run; the A/B result is its text, --json or --csv)"},
               {"report", " (the page describes one run; the A/B result is its text, --json or "
                          "--csv)"},
               {"checkpoint", " (it writes one run's state)"},
               {"resume", " (it continues one run)"},
               {"explain", " (it tells one run's step)"}};

static int check_against(const gate_opts_t *g, const config_t *c, const config_line_t *l,
                         char *err)
{
    /* what the user gave first: compare may be only the default mode */
    for (size_t i = 0; i < sizeof one_run / sizeof *one_run; i++)
        if (config_line_given(l, one_run[i].opt))
            return err_set(err, DDP_ERR_INPUT, "--against: not with --%s%s", one_run[i].opt,
                           one_run[i].why);
    if (c->mode == MODE_COMPARE || c->mode == MODE_COMM)
        return err_set(err, DDP_ERR_INPUT, "--against: not with --mode %s",
                       c->mode == MODE_COMPARE ? "compare (give single, dp or ddp)" : "comm");
    const struct {
        const char *opt, *path;
    } exe[2] = {{"--against", g->against}, {"--candidate", g->candidate}};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (exe[i].path[0] && (stat(exe[i].path, &st) != 0 || !S_ISREG(st.st_mode) ||
                               access(exe[i].path, X_OK) != 0))
            return err_set(err, DDP_ERR_INPUT, "%s: '%s' is not an executable file", exe[i].opt,
                           exe[i].path);
    }
    return DDP_OK;
}

static int finish(void *part, const config_t *c, const config_line_t *l, char *err)
{
    gate_opts_t *g = part;
    /* the A/B gate's most rounds (docs/gate.md), unless --repeat says */
    g->rounds = config_line_given(l, "repeat") ? c->repeat : GATE_AB_ROUNDS;
    if (g->baseline[0] && c->mode == MODE_COMM)
        return err_set(err, DDP_ERR_INPUT, "--baseline: not for --mode comm (it trains nothing)");
    if (g->against[0] && c->comm_hook != HOOK_NONE)
        return err_set(err, DDP_ERR_INPUT, "--comm-hook %s: not with --against (the A/B runs one "
                       "mode)", comm_hook_name(c->comm_hook));
    if (g->candidate[0] && !g->against[0])
        return err_set(err, DDP_ERR_INPUT, "--candidate: needs --against BASE");
    if (g->budget_s != GATE_BUDGET_S && !g->against[0])
        return err_set(err, DDP_ERR_INPUT, "--gate-budget: needs --against BASE");
    return g->against[0] ? check_against(g, c, l, err) : DDP_OK;
}

const opt_table_t gate_options = {rows, (int)(sizeof rows / sizeof rows[0]), sizeof(gate_opts_t),
                                  NULL, finish};
