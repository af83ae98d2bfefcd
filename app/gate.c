/* app/gate.c: the stored-baseline regression gate (--baseline FILE
 * --tolerance PCT): the baseline is read and matched to every run before any
 * training (a wrong baseline must not cost a run), then each run's --repeat
 * interval is judged against it.  Under mpirun it is rank 0's alone. */
#include <string.h>

#include "app/app.h"

int app_gate_prepare(app_job_t *j, char *err)
{
    int rc = baseline_load(&j->bl, j->cfg.baseline_path, err);
    for (int i = 0; rc == DDP_OK && i < j->n; i++) {
        cJSON *cj = report_json_config(&j->ctx, &j->cfgs[i], NULL);
        if (!cj)
            return err_set(err, DDP_ERR_RUNTIME, "out of memory");
        rc = baseline_match(&j->bl, cj, &j->match[i], err);
        cJSON_Delete(cj);
    }
    return rc;
}

void app_gate_warn(app_job_t *j)
{
    for (int i = 0; i < j->n; i++) {
        /* the devices this run will use, for the environment: static, as a
         * run's record is 79 KB (nothing large on the stack: docs/faults.md) */
        static run_result_t shape;
        result_init(&shape);
        shape.backend = j->cfgs[i].backend;
        shape.ndev = j->cfgs[i].ngpus;
        for (int d = 0; d < shape.ndev; d++)
            shape.dev[d].device_id = j->cfgs[i].gpus[d];
        cJSON *cj = report_json_config(&j->ctx, &j->cfgs[i], NULL), *env = report_json_env(&j->ctx, &shape);
        char line[2048];
        line[0] = '\0';
        if (cj && env && baseline_differences(&j->bl, j->match[i], cj, env, line, sizeof line) > 0)
            fprintf(stderr, "ddpbench: %s\n", line);
        cJSON_Delete(cj);
        cJSON_Delete(env);
        if (line[0])
            break; /* compare's runs share the machine and settings: once is enough */
    }
}

/* One verdict per run on its --repeat runs, each line as the A/B gate's
 * ("verdict: ..." at its start, for a CI log to grep); any regression exits
 * 3, else any no verdict 4. */
int app_gate_judge(app_job_t *j)
{
    bool regressed = false, noisy = false;
    if (!j->cfg.baseline_path[0])
        return 0;
    for (int i = 0; i < j->n; i++) {
        char lines[4096];
        int v = baseline_judge(j->match[i], j->n > 1 ? mode_name(j->cfgs[i].mode) : NULL,
                               &j->reps[i], j->cfg.tolerance_pct, lines, sizeof lines);
        regressed |= v == DDP_ERR_REGRESSED;
        noisy |= v == DDP_ERR_NOISY;
        for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save))
            fprintf(j->info, "%s\n", l);
    }
    return regressed ? DDP_ERR_REGRESSED : noisy ? DDP_ERR_NOISY : 0;
}
