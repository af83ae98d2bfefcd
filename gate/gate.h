/* gate/gate.h: the regression gate, what the program calls of it: the A/B
 * gate, --against BASE [--candidate CAND] (ab.c; gate/README.md names its
 * parts), and the stored-baseline gate, --baseline FILE (baseline.c): the
 * file read and matched to every run before any training, each run's
 * --repeat interval judged after.  Under mpirun it is rank 0's. */
#ifndef DDPBENCH_GATE_H
#define DDPBENCH_GATE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "app/report/report.h"
#include "app/repeat/repeat.h"
#include "common/config/config.h"
#include "gate/options.h"

// ---------------------------------------------------------------------------
// the stored baseline's file (rules: docs/gate.md)

/* A time a --json result holds (a baseline's, an A/B child's), seconds: the
 * clock's nanosecond at least, 1e9 s at most; outside that a figure is an
 * edit or a broken run, and ratios of such figures overflow ("+inf%"). */
#define GATE_TIME_MIN_S 1e-9
#define GATE_TIME_MAX_S 1e9
#define BASELINE_MAX_BYTES ((long)1 << 20)
#define BASELINE_MAX_RUNS 16

typedef struct {
    char path[CONFIG_PATH_LEN];
    cJSON *run[BASELINE_MAX_RUNS]; /* the objects in the file, in order */
    int nrun;
} baseline_t;

/* Read and check FILE (every figure the gate reads, before training).
 * DDP_ERR_INPUT with one line naming the field. */
int baseline_load(baseline_t *b, const char *path, char *err);
void baseline_free(baseline_t *b);
/* The baseline run of this config's mode into *match, refused when its
 * identity (common/config/fields.h) differs, naming the field. */
int baseline_match(const baseline_t *b, const cJSON *run_config, const cJSON **match, char *err);
/* The gate on a mode's runs (one or more) against the baseline: DDP_OK (no
 * change, improved), DDP_ERR_REGRESSED or DDP_ERR_NOISY (no verdict); buf
 * gets the lines (newline separated, none at the end), the verdict first. */
int baseline_judge(const cJSON *match, const char *label, const repeat_t *runs, double tol_pct,
                   char *buf, size_t len);
/* What differs but does not refuse the baseline: another machine or build
 * (environment) and other settings (config).  One "warning: ..." line in
 * buf ("" when nothing differs); returns how many differences. */
int baseline_differences(const baseline_t *b, const cJSON *match, const cJSON *run_config,
                         const cJSON *run_env, char *buf, size_t len);
/* --repeat --json, a baseline in the making: whether r's runs (2 or more) are
 * too noisy to gate tol percent, with one "warning: ..." line in buf. */
bool baseline_too_noisy(const repeat_t *r, const char *label, double tol, char *buf, size_t len);

// ---------------------------------------------------------------------------
// the gates, as the program calls them

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
/* One verdict per run on its --repeat runs reps[i] on out ("verdict: ..." as
 * the A/B gate's); 0, DDP_ERR_REGRESSED if any regressed, else DDP_ERR_NOISY
 * if any gave no verdict. */
int gate_stored_judge(const gate_stored_t *g, const config_t *cfgs, const repeat_t *reps, int n,
                      double tolerance_pct, FILE *out);
void gate_stored_free(gate_stored_t *g);

#endif
