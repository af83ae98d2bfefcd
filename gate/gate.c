/* gate/gate.c: the stored-baseline gate over a job's runs (gate.h): each
 * run's match in the file before training, the warning on what differs, and
 * each run's verdict after it. */
#include "gate/gate.h"

#include <string.h>

#include "common/base/text.h"

int gate_stored_prepare(gate_stored_t *g, const char *path, const report_ctx_t *ctx,
                        const config_t *cfgs, int n, char *err)
{
    int rc = baseline_load(&g->file, path, err);
    for (int i = 0; rc == DDP_OK && i < n; i++) {
        cJSON *cj = report_json_config(ctx, &cfgs[i], NULL);
        if (!cj)
            return err_set(err, DDP_ERR_RUNTIME, "out of memory");
        rc = baseline_match(&g->file, cj, &g->match[i], err);
        cJSON_Delete(cj);
    }
    return rc;
}

void gate_stored_warn(const gate_stored_t *g, const report_ctx_t *ctx, const config_t *cfgs,
                      int n)
{
    for (int i = 0; i < n; i++) {
        /* the devices this run will use, for the environment: static, as a
         * run's record is 79 KB (nothing large on the stack: docs/faults.md) */
        static run_result_t shape;
        result_init(&shape);
        shape.backend = cfgs[i].backend;
        shape.ndev = cfgs[i].ngpus;
        for (int d = 0; d < shape.ndev; d++)
            shape.dev[d].device_id = cfgs[i].gpus[d];
        cJSON *cj = report_json_config(ctx, &cfgs[i], NULL), *env = report_json_env(ctx, &shape);
        char line[2048];
        line[0] = '\0';
        if (cj && env && baseline_differences(&g->file, g->match[i], cj, env, line, sizeof line))
            text_say(stderr, "ddpbench: ", line); /* it quotes the baseline: escaped */
        cJSON_Delete(cj);
        cJSON_Delete(env);
        if (line[0])
            break; /* compare's runs share the machine and settings: once is enough */
    }
}

int gate_stored_judge(const gate_stored_t *g, const config_t *cfgs, const repeat_t *reps, int n,
                      double tolerance_pct, FILE *out)
{
    bool regressed = false, noisy = false;
    for (int i = 0; i < n; i++) {
        char lines[4096];
        int v = baseline_judge(g->match[i], n > 1 ? mode_name(cfgs[i].mode) : NULL, &reps[i],
                               tolerance_pct, lines, sizeof lines);
        regressed |= v == DDP_ERR_REGRESSED;
        noisy |= v == DDP_ERR_NOISY;
        for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save))
            fprintf(out, "%s\n", l);
    }
    return regressed ? DDP_ERR_REGRESSED : noisy ? DDP_ERR_NOISY : 0;
}

void gate_stored_free(gate_stored_t *g) { baseline_free(&g->file); }
