/* gate/gate.h: the regression gate, what the program calls of it.
 *
 * The A/B gate, ddpbench --against BASE [--candidate CAND] (ab.c): two
 * executables run the same options as separate child processes with --json
 * (ab_child.h), round by round in ABBA order; each round's pair gives the
 * ratio of their figures.  After every ABBA pair the gate looks at the
 * rounds (ab_judge.h: the median's confidence sequence, valid at every look)
 * and stops as soon as the interval settles the verdict, when another pair
 * would not fit --gate-budget, or at the most rounds (--repeat); then it
 * prints the result (ab_report.h).  Its options are options.h's; line is
 * the whole command line, whose options the children take less the gate's.  The calls run one way: ab.c uses the
 * child, the judgement and the outputs; the outputs use the judgement.
 *
 * The stored-baseline gate, --baseline FILE (gate.c, on baseline.h): the
 * file is read and matched to every run before any training (a wrong
 * baseline must not cost a run), then each run's --repeat interval is
 * judged against it.  Under mpirun it is rank 0's alone. */
#ifndef DDPBENCH_GATE_H
#define DDPBENCH_GATE_H

#include <stdio.h>

#include "app/report/report.h"
#include "common/config/config.h"
#include "gate/baseline.h"
#include "gate/options.h"

/* The A/B gate: run it and print its result; returns a status (DDP_OK for
 * no change or improved, DDP_ERR_REGRESSED, DDP_ERR_NOISY for no verdict,
 * DDP_ERR_RUNTIME / DDP_ERR_INTERRUPTED with err, DDP_ERR_INPUT). */
int ab_main(const gate_opts_t *g, const config_t *cfg, const config_line_t *line, int argc,
            char **argv, char *err);

/* A job's stored baseline: the file, and each run's match in it. */
typedef struct {
    baseline_t file;
    const cJSON *match[BASELINE_MAX_RUNS];
} gate_stored_t;

/* Read path and find the match of each of the runs cfgs[0..n) (their
 * configs as --json echoes them under ctx), before any training. */
int gate_stored_prepare(gate_stored_t *g, const char *path, const report_ctx_t *ctx,
                        const config_t *cfgs, int n, char *err);
/* What differs from the baseline without refusing it: one warning line on
 * stderr (ctx with the data: its size is one of the settings compared). */
void gate_stored_warn(const gate_stored_t *g, const report_ctx_t *ctx, const config_t *cfgs,
                      int n);
/* One verdict per run on its --repeat runs reps[i], each line as the A/B
 * gate's ("verdict: ..." at its start, for a CI log to grep), on out;
 * 0, or DDP_ERR_REGRESSED when any regressed, else DDP_ERR_NOISY when any
 * gave no verdict. */
int gate_stored_judge(const gate_stored_t *g, const config_t *cfgs, const repeat_t *reps, int n,
                      double tolerance_pct, FILE *out);
void gate_stored_free(gate_stored_t *g);

#endif
