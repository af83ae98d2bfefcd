/* bench/main.c: the ddpbench program: command line -> config -> strategy ->
 * report.  The only place that prints "ddpbench: error:" and picks the exit
 * status (0 ok, 1 runtime fault, 2 bad input, 3 regression). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
#include "config.h"
#include "data.h"
#include "report.h"
#include "strategy.h"
#include "trainer.h"

static int fail(int code, const char *msg)
{
    fprintf(stderr, "ddpbench: error: %s\n", msg);
    return code;
}

int main(int argc, char **argv)
{
    config_t cfg;
    char err[ERR_LEN] = "";
    int rc = config_parse(&cfg, argc, argv, stdout, err);
    if (rc == CONFIG_EXIT_OK)
        return 0;
    if (rc != DDP_OK)
        return fail(rc, err);

    char note[ERR_LEN];
    if ((rc = config_resolve(&cfg, note, sizeof note, err)) != DDP_OK)
        return fail(rc, err);
    /* Options parsed for the features still being built: refuse them rather
     * than ignore them. */
    const struct {
        bool set;
        const char *name;
    } pending[] = {{cfg.mode == MODE_COMPARE, "--mode compare"}, {cfg.json, "--json"},
                   {cfg.csv, "--csv"}, {cfg.explain, "--explain"}, {cfg.trace_path[0], "--trace"},
                   {cfg.baseline_path[0], "--baseline"}};
    for (size_t i = 0; i < sizeof pending / sizeof pending[0]; i++)
        if (pending[i].set) {
            snprintf(err, sizeof err, "%s: not built yet", pending[i].name);
            return fail(DDP_ERR_INPUT, err);
        }

    model_spec_t spec;
    if ((rc = config_model_spec(&cfg, &spec, err)) != DDP_OK)
        return fail(rc, err);
    dataset_t data;
    if ((rc = trainer_load_data(&cfg, &spec, &data, err)) != DDP_OK)
        return fail(rc, err);
    /* Bad --init/--resume files and unwritable --save/--checkpoint paths are
     * input errors found now, not after the training. */
    if ((rc = ckpt_preflight(&cfg, &spec, &data, err)) != DDP_OK) {
        data_free(&data);
        return fail(rc, err);
    }

    FILE *info = (cfg.json || cfg.csv) ? stderr : stdout;
    if (!cfg.quiet)
        report_banner(info, &cfg, &spec, &data, note[0] ? note : NULL);

    run_result_t res;
    switch (cfg.mode) {
    case MODE_DP:
        rc = dp_run(&cfg, &data, &res, err);
        break;
    case MODE_DDP:
        rc = ddp_run(&cfg, &data, &res, err);
        break;
    default:
        rc = single_run(&cfg, &data, &res, err);
        break;
    }
    if (rc != DDP_OK) {
        data_free(&data);
        return fail(rc, err);
    }
    if (cfg.save_path[0] &&
        (rc = ckpt_save_weights(cfg.save_path, &cfg, &spec, res.params, err)) != DDP_OK) {
        result_free(&res);
        data_free(&data);
        return fail(rc, err);
    }
    report_result(stdout, &cfg, &spec, &res);
    result_free(&res);
    data_free(&data);
    return 0;
}
