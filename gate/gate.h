/* gate/gate.h: the regression gate, what the program calls of it: the A/B
 * gate, --against BASE [--candidate CAND] (ab.c; gate/README.md names its
 * parts), and the stored-baseline gate, --baseline FILE (gate.c on
 * baseline.h): the file read and matched to every run before any training,
 * each run's --repeat interval judged after.  Under mpirun it is rank 0's. */
#ifndef DDPBENCH_GATE_H
#define DDPBENCH_GATE_H

#include <stdio.h>

#include "app/report/report.h"
#include "common/config/config.h"
#include "gate/baseline.h"
#include "gate/options.h"

/* The A/B gate: run it and print its result (line: the whole command line,
 * whose options the children take less the gate's); DDP_OK (no change,
 * improved), DDP_ERR_REGRESSED, DDP_ERR_NOISY (no verdict), or an error. */
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
