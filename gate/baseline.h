/* gate/baseline.h: --baseline FILE --tolerance PCT, the stored-baseline
 * regression gate (rules: docs/gate.md). */
#ifndef DDPBENCH_BASELINE_H
#define DDPBENCH_BASELINE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/config/config.h"
#include "app/repeat/repeat.h"

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
/* Find the baseline run for this config (same mode) and refuse it when the
 * canonical subset (mode, backend, devices, layers, batch, accum, loss,
 * optimizer) differs, naming the field.  *match receives it. */
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
/* --repeat --json, a baseline in the making: whether r's runs (2 or more)
 * spread wider than tol percent (the gate's throughput interval, width over
 * its mean), with one "warning: ..." line in buf saying how wide. */
bool baseline_too_noisy(const repeat_t *r, const char *label, double tol, char *buf, size_t len);

#endif
