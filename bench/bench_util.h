/* bench/bench_util.h: shared by the benchmark programs: build a config from a
 * command line string, run the mode it names, and a timed sgemm reference. */
#ifndef DDPBENCH_BENCH_UTIL_H
#define DDPBENCH_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "train/strategy.h"
#include "data/load.h"
#include "train/trainer.h"

/* Run "args" (as typed after ddpbench) and fill res; exits the benchmark on error. */
static inline void bench_run(const char *args, run_result_t *res)
{
    char buf[4096], err[ERR_LEN] = "";
    snprintf(buf, sizeof buf, "%s", args);
    char *argv[128];
    int argc = 0;
    argv[argc++] = "ddpbench";
    for (char *t = strtok(buf, " "); t && argc < 127; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    config_t c;
    char note[ERR_LEN];
    model_spec_t spec;
    dataset_t d;
    int rc = config_parse(&c, argc, argv, stderr, err);
    if (rc == DDP_OK)
        rc = config_resolve(&c, note, sizeof note, err);
    if (rc == DDP_OK)
        rc = config_model_spec(&c, &spec, err);
    if (rc == DDP_OK)
        rc = data_load(&c, &spec, &d, err);
    if (rc != DDP_OK) {
        fprintf(stderr, "bench: '%s': %s\n", args, err);
        exit(1);
    }
    rc = c.mode == MODE_DP ? dp_run(&c, &d, res, err)
         : c.mode == MODE_DDP ? ddp_run(&c, &d, res, err) : single_run(&c, &d, res, err);
    data_free(&d);
    if (rc != DDP_OK) {
        fprintf(stderr, "bench: '%s': %s\n", args, err);
        exit(1);
    }
}

#endif
