/* app/commbench.c: --mode comm, the collectives alone (nccl-tests' way):
 * the banner, the measurement (ddp_strategy's comm_bench, on DDP's ranks),
 * the report, and a check that found a wrong value. */
#include <stdio.h>

#include "app/app.h"
#include "ddp/launcher.h"
#include "common/train/strategy.h"

// ---------------------------------------------------------------------------
// the mode: run it, report it

int app_comm(const config_t *cfg, const char *note, char *err)
{
    report_ctx_t ctx = {.cfg = cfg, .backend_note = note};
    collperf_t perf;
    bool reports = launch_reports(cfg);
    if (!cfg->quiet && reports) {
        FILE *out = cfg->json ? stderr : stdout;
        char who[1200];
        fprintf(out, "ddpbench %s: mode comm, backend %s%s%s\n", DDPBENCH_VERSION,
                backend_kind_name(cfg->backend), note ? " " : "", note ? note : "");
        launch_describe(cfg, who, sizeof who);
        if (who[0])
            fprintf(out, "  launched by %s\n", who);
    }
    int rc = ddp_strategy.comm_bench(cfg, &perf, err);
    if (rc != DDP_OK)
        return rc;
    if (!reports) /* under mpirun: rank 0 reports for every rank */
        return DDP_OK;
    if (cfg->json) {
        cJSON *o = report_json_comm(&ctx, &perf);
        rc = report_json_print(stdout, o);
        cJSON_Delete(o);
        if (rc != DDP_OK)
            return err_set(err, DDP_ERR_RUNTIME, "--json: could not write the result");
    } else {
        report_comm(stdout, &perf);
    }
    if (fflush(stdout) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "stdout: write failed");
    if (perf.wrong_total > 0) {
        for (int i = 0; i < perf.ncoll; i++)
            for (int j = 0; j < perf.coll[i].npoints; j++)
                for (int place = 0; place < 2; place++)
                    if (perf.coll[i].pt[j].wrong[place]) {
                        snprintf(err, ERR_LEN,
                                 "--mode comm: the check found %ld wrong value%s; the first: "
                                 "%s of %ld bytes %s, %ld wrong",
                                 perf.wrong_total, perf.wrong_total == 1 ? "" : "s",
                                 perf.coll[i].name, perf.coll[i].pt[j].bytes,
                                 place ? "in place" : "out of place",
                                 perf.coll[i].pt[j].wrong[place]);
                        return DDP_ERR_RUNTIME;
                    }
    }
    return DDP_OK;
}
