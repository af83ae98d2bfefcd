/* gate/options.h: the gate's own options (its table, options.c, on the
 * command line beside the run's): --baseline, --tolerance, --against,
 * --candidate, --gate-budget.  The program reads them to call the gate;
 * nothing below the program does. */
#ifndef DDPBENCH_GATE_OPTIONS_H
#define DDPBENCH_GATE_OPTIONS_H

#include "common/config/opt_table.h"

/* --against's most rounds when --repeat is not given (docs/gate.md: the
 * interval is calibrated for this cap; the budget ends most gates first) */
#define GATE_AB_ROUNDS 40
/* --gate-budget's default, seconds */
#define GATE_BUDGET_S 60

typedef struct {
    char baseline[CONFIG_PATH_LEN];  /* --baseline FILE: the stored-baseline gate */
    double tolerance_pct;            /* --tolerance: the slowdown either gate allows */
    char against[CONFIG_PATH_LEN];   /* --against BASE: the A/B gate's base executable */
    char candidate[CONFIG_PATH_LEN]; /* --candidate CAND: its other side ("": this ddpbench) */
    double budget_s;                 /* --gate-budget: it starts no pair of rounds past it */
    int rounds;                      /* --against's most rounds: --repeat, or GATE_AB_ROUNDS */
} gate_opts_t;

extern const opt_table_t gate_options;

#endif
