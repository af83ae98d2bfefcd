/* bench/bench_util.h: shared by the benchmark programs: build a config from a
 * command line string, run the mode it names, the median of rounds, and the
 * PASS / FAIL line against a goal.  Every benchmark reports the median of
 * its rounds: the best round flatters, and a shared machine's noise moves
 * the median least. */
#ifndef DDPBENCH_BENCH_UTIL_H
#define DDPBENCH_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/train/strategy.h"
#include "app/load/load.h"
#include "common/train/trainer.h"
#include "gate/paired.h" /* paired_median: the median of rounds */

/* The config of "args" (as typed after ddpbench), resolved. */
static inline int bench_config(config_t *c, const char *args, char *err)
{
    char buf[4096], note[ERR_LEN];
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[256];
    int argc = 0;
    argv[argc++] = "ddpbench";
    for (char *t = strtok(buf, " "); t && argc < 255; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    int rc = config_parse(c, argc, argv, stderr, err);
    return rc == DDP_OK ? config_resolve(c, note, sizeof note, err) : rc;
}

/* Run "args" (as typed after ddpbench) and fill res; exits the benchmark on error. */
static inline void bench_run(const char *args, run_result_t *res)
{
    char err[ERR_LEN] = "";
    config_t c;
    model_spec_t spec;
    dataset_t d;
    int rc = bench_config(&c, args, err);
    if (rc == DDP_OK)
        rc = config_model_spec(&c, &spec, err);
    if (rc == DDP_OK)
        rc = data_load(&c, &spec, &d, err);
    if (rc != DDP_OK) {
        fprintf(stderr, "bench: '%s': %s\n", args, err);
        exit(1);
    }
    rc = strategy_of(c.mode)->run(&c, &d, res, err);
    data_free(&d);
    if (rc != DDP_OK) {
        fprintf(stderr, "bench: '%s': %s\n", args, err);
        exit(1);
    }
}

/* "goal: ratio >= 1.80: PASS" (at_least: the value must reach goal, else stay
 * under it); returns 1 when met. */
static inline int bench_goal(const char *what, double value, double goal, int at_least)
{
    int ok = at_least ? value >= goal : value <= goal;
    printf("goal: %s %s %.2f: %.2f: %s\n", what, at_least ? ">=" : "<=", goal, value,
           ok ? "PASS" : "FAIL");
    return ok;
}

#endif
