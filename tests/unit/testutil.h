/* tests/unit/testutil.h: helpers shared by the Criterion suites: build a config
 * from a command line string the way a user would type it, load its data, run
 * a strategy, and compare parameter arrays. */
#ifndef DDPBENCH_TESTUTIL_H
#define DDPBENCH_TESTUTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/data/data.h"
#include "app/cmdline/cmdline.h"
#include "app/eval/evaluate.h"
#include "app/load/load.h"
#include "common/nn/model.h"
#include "common/train/strategy.h"
#include "common/train/trainer.h"

/* The gate's and the program's options of the last tu_parse_args. */
static gate_opts_t tu_gate;
static app_opts_t tu_opts;

/* Parse "--model mlp-small --steps 5" into c (space separated, no quoting)
 * as the program's command line does (the gate's and the program's options
 * into tu_gate and tu_opts), without config_resolve: for tests that set
 * what resolve reads first. */
static inline int tu_parse_args(config_t *c, const char *args, char *err)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[128];
    int argc = 0;
    argv[argc++] = "ddpbench";
    for (char *tok = strtok(buf, " "); tok && argc < 127; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    FILE *devnull = fopen("/dev/null", "w");
    config_line_t line;
    cmdline_init(&line, c, &tu_gate, &tu_opts);
    int rc = config_line_parse(&line, argc, argv, devnull, err);
    fclose(devnull);
    return rc;
}

/* Parse, then resolve for this machine.  Returns config_parse's status (and
 * config_resolve's when parsing passed). */
static inline int tu_parse(config_t *c, const char *args, char *err)
{
    int rc = tu_parse_args(c, args, err);
    if (rc == DDP_OK) {
        char note[ERR_LEN];
        rc = config_resolve(c, note, sizeof note, err);
    }
    return rc;
}

/* Parse, resolve, make the model's spec and load the data (each must succeed). */
static inline void tu_load(config_t *c, model_spec_t *spec, dataset_t *d, const char *args,
                           char *err)
{
    cr_assert_eq(tu_parse(c, args, err), DDP_OK, "parse '%s': %s", args, err);
    cr_assert_eq(config_model_spec(c, spec, err), DDP_OK, "%s", err);
    cr_assert_eq(data_load(c, spec, d, err), DDP_OK, "data for '%s': %s", args, err);
}

/* Parse (must succeed), load the data, run the config's mode and evaluate. */
static inline int tu_run(const char *args, run_result_t *res, char *err)
{
    config_t c;
    model_spec_t spec;
    dataset_t d;
    tu_load(&c, &spec, &d, args, err);
    /* no --mode: compare's first run, single, the tests' reference */
    cr_assert(c.mode != MODE_COMM, "tu_run runs single, dp or ddp, not '%s'", args);
    int rc = strategy_of(c.mode)->run(&c, &d, res, err);
    /* the final evaluation, as main() runs it after the outputs */
    if (rc == DDP_OK)
        rc = eval_params(&spec, c.loss, res->params, &d, &res->train_loss,
                         &res->train_accuracy, err);
    data_free(&d);
    return rc;
}

/* Assert that two runs ended with parameters equal to rel_tol (relative,
 * with a floor of 1e-3 on the scale so tiny parameters are compared absolutely). */
static inline void tu_assert_params_close(const run_result_t *a, const run_result_t *b,
                                          double rel_tol, const char *what)
{
    cr_assert_eq(a->nparams, b->nparams, "%s: parameter counts differ", what);
    cr_assert_not_null(a->params);
    cr_assert_not_null(b->params);
    double d = max_rel_diff(a->params, b->params, a->nparams, 1e-3);
    cr_assert(d <= rel_tol, "%s: parameters differ by %.3g relative (tolerance %.1g)", what, d,
              rel_tol);
}

#endif
