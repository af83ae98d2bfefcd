/* app/plan.c: the job before any training: the model, compare's runs, the
 * data, and every check a run could fail late (--baseline, --init, --resume,
 * unwritable --save/--checkpoint/--trace, a sample stream with nothing to
 * train on), so bad input costs no training.  Under mpirun every rank's
 * outcome meets the others' at the start-up agreement (ddp/launcher.h). */
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "common/base/text.h"
#include "common/comm/comm.h"
#include "app/load/load.h"
#include "common/data/schedule.h"
#include "common/io/checkpoint.h"
#include "ddp/launcher.h"
#include "app/report/report_page.h"

/* DDP's DistributedSampler has one replica per rank, whatever stream
 * --sampler-replicas gives single and dp. */
void app_run_config(const config_t *base, mode_t_ mode, config_t *out)
{
    *out = *base;
    out->mode = mode;
    if (strategy_words(mode)->reference)
        out->ngpus = 1;
    if (strategy_words(mode)->ranks && !out->nrank_samples)
        out->sampler_replicas = out->ngpus;
    if (base->mode == MODE_COMPARE && base->log_every == 0)
        out->loss_lines_off = true; /* compare fits a screen: the table has the final loss */
    if (base->mode == MODE_COMPARE) /* compare's ddp is plain; --zero adds columns (app_plan) */
        out->zero = 0;
}

int app_gpu_model(app_job_t *j, char *err)
{
    gpu_lesson_t *g = &j->gpu;
    const char *workload = j->opts.workload;
    memset(g, 0, sizeof *g);
    if (!j->opts.hardware[0])
        return DDP_OK;
    TRY(profile_hardware(j->opts.hardware, &g->hw, err));
    if (workload[0])
        TRY(profile_workload(workload, &g->wl, err));
    else
        profile_workload_mlp(&j->cfg, &g->wl);
    if (workload[0] && j->cfg.batch_per_device > 0) { /* --batch-per-device: the profile's */
        g->wl.batch_per_device = j->cfg.batch_per_device;
        g->wl.global_batch = 0;
    }
    TRY(gpu_model_check(&g->hw, &g->wl, err));
    for (int k = 1; k <= g->hw.count; k++)
        gpu_model_row(&g->hw, &g->wl, k, &g->rows[k - 1]);
    cases_check(g->hw.name, g->check, sizeof g->check);
    g->on = true;
    return DDP_OK;
}

/* What keeps compare from adding runs to its three (--zero's stages,
 * --precision's list): the first option that cannot go with them (under
 * mpirun: mpi, saying what to run instead), or NULL. */
static const char *more_runs_refused(const app_job_t *j, const char *mpi)
{
    const config_t *c = &j->cfg;
    return j->mpi                ? mpi
           : c->report_path[0]   ? "--report"
           : c->trace_path[0]    ? "--trace"
           : j->gate_opts.baseline[0] ? "--baseline"
           : c->repeat > 1       ? "--repeat"
           : c->save_path[0]     ? "--save"
                                 : NULL;
}

int app_plan(app_job_t *j, int rc, char *err)
{
    config_t *cfg = &j->cfg;
    if (rc == DDP_OK)
        rc = config_model_spec(cfg, &j->spec, err);
    if (rc == DDP_OK && cfg->trace_path[0] && j->reports)
        rc = report_trace_check(cfg->trace_path, err);
    if (rc == DDP_OK && cfg->report_path[0] && j->reports)
        rc = report_page_check(cfg->report_path, err);

    /* the runs: one, or compare's three on the same data (under mpirun two:
     * DP is one process, so single on rank 0 and DDP on every rank) */
    static const mode_t_ compare_modes[MAX_RUNS] = {MODE_SINGLE, MODE_DP, MODE_DDP};
    static const mode_t_ compare_mpi[MAX_RUNS] = {MODE_SINGLE, MODE_DDP};
    j->n = cfg->mode == MODE_COMPARE ? (j->mpi ? 2 : 3) : 1;
    for (int i = 0; i < j->n; i++) {
        app_run_config(cfg,
                       cfg->mode == MODE_COMPARE ? (j->mpi ? compare_mpi : compare_modes)[i]
                                                 : cfg->mode,
                       &j->cfgs[i]);
        result_init(&j->res[i]);
    }
    /* compare --zero 1,2,3: a ddp run per stage beside plain DDP's */
    if (cfg->mode == MODE_COMPARE && cfg->nzero_stages > 0) {
        const char *no = more_runs_refused(j, "mpirun (run --mode ddp --zero N)");
        if (no && rc == DDP_OK)
            rc = err_set(err, DDP_ERR_INPUT, "--zero with --mode compare: not with %s", no);
        for (int k = 0; k < cfg->nzero_stages && rc == DDP_OK; k++, j->n++) {
            app_run_config(cfg, MODE_DDP, &j->cfgs[j->n]);
            j->cfgs[j->n].zero = cfg->zero_stages[k];
            result_init(&j->res[j->n]);
        }
    }
    /* compare --precision fp32,bf16: single, dp and ddp again at each
     * precision after the first (what faster compute does to the share of
     * communication the step waits for) */
    if (cfg->mode == MODE_COMPARE && cfg->nprecisions > 1) {
        const char *no = more_runs_refused(j, "mpirun (run compare once per precision)");
        if (no && rc == DDP_OK)
            rc = err_set(err, DDP_ERR_INPUT, "--precision with a list: not with %s", no);
        for (int k = 1; k < cfg->nprecisions && rc == DDP_OK; k++)
            for (int m = 0; m < 3; m++, j->n++) {
                app_run_config(cfg, compare_modes[m], &j->cfgs[j->n]);
                j->cfgs[j->n].precision = cfg->precisions[k];
                result_init(&j->res[j->n]);
            }
    }
    j->ctx = (report_ctx_t){.cfg = cfg, .spec = &j->spec, .backend_note = j->note[0] ? j->note : NULL};

    /* --baseline is rank 0's to read and judge (under mpirun the others
     * only train) */
    j->gated = j->gate_opts.baseline[0] && j->reports;
    if (rc == DDP_OK && j->gated)
        rc = gate_stored_prepare(&j->gate, j->gate_opts.baseline, &j->ctx, j->cfgs, j->n, err);

    /* What cannot fit the machine's memory (or --mem-limit) is refused now,
     * before the data is generated or read, and again with the data loaded
     * (a file's rows count from then on); not by the kernel's OOM killer
     * during the run. */
    if (rc == DDP_OK) {
        data_shape(cfg, &j->spec, &j->data);
        rc = app_mem_check(j, &j->data, err);
    }
    if (rc == DDP_OK)
        j->loaded = (rc = data_load(cfg, &j->spec, &j->data, err)) == DDP_OK;
    j->ctx.data = j->loaded ? &j->data : NULL;
    if (rc == DDP_OK && j->gated) /* with the data: its size is one of the settings compared */
        gate_stored_warn(&j->gate, &j->ctx, j->cfgs, j->n);
    /* Bad --init/--resume files and unwritable --save/--checkpoint paths are
     * input errors found now, not after the training. */
    if (rc == DDP_OK)
        rc = ckpt_preflight(cfg, &j->spec, &j->data, err);

    /* Every run's sample stream (a batch with nothing to train on, shards
     * larger than the data) is checked before the banner. */
    for (int i = 0; i < j->n && rc == DDP_OK; i++) {
        schedule_t sch;
        if ((rc = schedule_init(&sch, &j->cfgs[i], &j->data, 1, 0, err)) == DDP_OK)
            schedule_free(&sch);
    }
    if (rc == DDP_OK)
        rc = app_mem_check(j, &j->data, err);
    /* Under mpirun every rank's outcome so far and what it was started
     * with meet here (launcher.h): one verdict for all. */
    rc = launch_agree(cfg, j->loaded ? &j->data : NULL, rc, err);
    if (rc == DDP_OK)
        for (int i = 0; i < j->n; i++) { /* the devices every rank has, for the reports */
            int z = j->cfgs[i].zero;
            precision_t p = j->cfgs[i].precision;
            app_run_config(cfg, j->cfgs[i].mode, &j->cfgs[i]);
            j->cfgs[i].zero = z;
            j->cfgs[i].precision = p;
        }
    return rc;
}

int app_prepare(app_job_t *j, int argc, char **argv, char *err)
{
    config_t *cfg = &j->cfg;
    /* --emit-pytorch: the same job as a PyTorch script, written before
     * training (a path it cannot write is bad input); under mpirun by rank 0,
     * which writes the outputs (its failure ends the job: launcher.h) */
    if (j->opts.emit_pytorch[0] && j->reports)
        TRY(twin_emit(&j->cfgs[0], j->opts.emit_pytorch, &j->spec, &j->data, argc, argv,
                      (cfg->json || cfg->csv) ? stderr : stdout, err));

    char note2[ERR_LEN + 1100];
    ckpt_init_note(cfg, &j->spec, note2, sizeof note2);
    if (note2[0] && j->reports) /* it quotes the file: escaped */
        text_say(stderr, "ddpbench: warning: ", note2);

    /* under --json/--csv stdout carries only the result */
    j->info = (cfg->json || cfg->csv) ? stderr : stdout;
    if (!cfg->quiet && j->reports) {
        report_banner(j->info, &j->ctx);
        char who[1200];
        launch_describe(cfg, who, sizeof who);
        if (who[0])
            fprintf(j->info, "  launched by %s, comm %s\n", who, comm_name(cfg->comm));
    }

    /* CUDA does not survive fork: single and dp initialise CUDA in this
     * process, so on CUDA the ddp run (which forks its ranks) goes first.
     * Under mpirun too: the other ranks join DDP at once and rank 0 runs
     * single after it, alone.  The results are still shown in the order
     * single, dp, ddp. */
    for (int i = 0; i < MAX_RUNS; i++)
        j->order[i] = i;
    if (j->n >= 3 && !j->mpi && cfg->backend == BACKEND_CUDA) { /* every ddp run first */
        int k = 0;
        for (int first = 1; first >= 0; first--)
            for (int i = 0; i < j->n; i++)
                if (strategy_words(j->cfgs[i].mode)->ranks == first)
                    j->order[k++] = i;
    }
    if (j->mpi && j->n == 2) {
        j->order[0] = 1;
        j->order[1] = 0;
    }
    /* --predict, and compare on several devices: the collectives for the
     * model; a DDP run: the all-reduce at its bucket sizes (run.c). */
    j->full = cfg->predict || (cfg->mode == MODE_COMPARE && cfg->ngpus >= 2);
    j->measure = j->full || (strategy_words(cfg->mode)->ranks && cfg->ngpus >= 2);
    return DDP_OK;
}

void app_free(app_job_t *j)
{
    for (int i = 0; i < j->n; i++)
        result_free(&j->res[i]);
    if (j->cfg.comm_hook != HOOK_NONE)
        result_free(&j->hook_ref);
    if (j->loaded)
        data_free(&j->data);
    j->loaded = false;
    gate_stored_free(&j->gate);
}
