/* app/outputs.c: what the user asked to keep, each output on its own:
 * --save first (the weights are what a failure after training must not
 * cost), then the evaluation (optional: its failure is a note), --trace, the
 * result on stdout, --explain, and last --report.  One that fails does not
 * cost the others, and the error line says what was and was not written. */
#include <errno.h>
#include <string.h>

#include "app/app.h"
#include "app/eval/evaluate.h"
#include "common/io/checkpoint.h"
#include "app/report/report_page.h"

/* A failed output's message, joined to those before it. */
static void add_failure(char *all, const char *one)
{
    size_t n = strlen(all);
    snprintf(all + n, ERR_LEN - n, "%s%s", n ? "; " : "", one);
}

void app_write_files(app_job_t *j, char *failed, char *written, size_t wlen)
{
    const config_t *cfg = &j->cfg;
    if (cfg->save_path[0]) {
        char e[ERR_LEN];
        if (ckpt_save_weights(cfg->save_path, cfg, &j->spec, j->res[0].params, e) == DDP_OK)
            snprintf(written, wlen, "--save %s", cfg->save_path);
        else
            add_failure(failed, e);
    }
    for (int i = 0; i < j->n; i++) {
        char e[ERR_LEN];
        run_result_t *r = &j->res[i];
        if (eval_params(&j->spec, cfg->loss, r->params, &j->data, &r->train_loss,
                        &r->train_accuracy, e) != DDP_OK)
            fprintf(stderr, "ddpbench: note: the %s run's final evaluation was skipped: %s\n",
                    mode_name(r->mode), e);
    }
    if (cfg->trace_path[0]) {
        char e[ERR_LEN];
        if (report_trace_write(cfg->trace_path, j->res, j->n, e) == DDP_OK) {
            size_t w = strlen(written);
            snprintf(written + w, wlen - w, "%s--trace %s", w ? ", " : "", cfg->trace_path);
            for (int i = 0; i < j->n; i++)
                if (!j->res[i].trace[0])
                    fprintf(stderr, "ddpbench: note: the %s run recorded no trace events\n",
                            mode_name(j->res[i].mode));
        } else {
            add_failure(failed, e);
        }
    }
}

/* The result on stdout in the form asked for. */
static int print_results(app_job_t *j, char *err)
{
    const report_ctx_t *ctx = &j->ctx;
    const config_t *c = &j->cfg;
    const predict_t *pr = &j->pred;
    const run_result_t *ref = c->mode == MODE_COMPARE ? &j->res[0] : NULL;
    int n = j->n;
    /* compare --precision fp32,bf16: each run against the single run of its
     * own precision (the first of the three at that precision) */
    const run_result_t *refs[MAX_RUNS];
    for (int i = 0; i < n; i++) {
        refs[i] = ref;
        for (int k = 0; ref && k < n; k++)
            if (strategy_words(j->cfgs[k].mode)->reference &&
                j->cfgs[k].precision == j->cfgs[i].precision) {
                refs[i] = &j->res[k];
                break;
            }
    }
    if (c->json) {
        for (int i = 0; i < n; i++) {
            cJSON *o = report_json_run(ctx, &j->cfgs[i], &j->res[i], refs[i], c->mode == MODE_COMPARE);
            if (o && j->reps[i].n > 1)
                cJSON_ReplaceItemInObjectCaseSensitive(o, "repeat", report_json_repeat(&j->reps[i]));
            if (o && pr->on)
                cJSON_ReplaceItemInObjectCaseSensitive(
                    o, "predict", report_json_predict(&pr->in, pr->rows, &j->res[i]));
            if (o && j->gpu.on) { /* --hardware: the GPU model, the CPU's under "cpu" */
                cJSON *g = report_json_gpu(&j->gpu);
                cJSON_AddItemToObject(g, "cpu", cJSON_DetachItemFromObject(o, "predict"));
                cJSON_AddItemToObject(o, "predict", g);
            }
            if (o && pr->in.all_reduce)
                cJSON_ReplaceItemInObjectCaseSensitive(
                    o, "buckets",
                    report_json_buckets(&j->res[i], pr->in.all_reduce, j->cfgs[i].zero));
            int rc = report_json_print(stdout, o);
            cJSON_Delete(o);
            if (rc != DDP_OK)
                return err_set(err, rc, "stdout: could not write the --json result: %s",
                               strerror(errno));
        }
    } else if (c->csv) {
        report_csv_header(stdout);
        for (int i = 0; i < n; i++)
            report_csv_row(stdout, ctx, &j->cfgs[i], &j->res[i], refs[i], &j->reps[i]);
        for (int i = 0; i < n; i++) /* stdout holds the CSV alone: the notes go to stderr */
            report_notes(stderr, ctx, &j->res[i], n > 1);
    } else {
        if (c->mode == MODE_COMPARE)
            report_compare(stdout, ctx, j->res, n);
        else
            report_result(stdout, ctx, &j->res[0], NULL);
        if (strategy_words(c->mode)->ranks)
            report_buckets(stdout, &j->res[0], pr->in.all_reduce, c->zero);
        report_hook(stdout, c, &j->res[0]);
        /* compare's --zero columns are modelled in the ZeRO table below; its
         * --precision columns are not modelled */
        int nbase = n;
        for (int i = 0; i < n && c->mode == MODE_COMPARE; i++)
            if (((strategy_words(j->cfgs[i].mode)->ranks && j->cfgs[i].zero) ||
                 j->cfgs[i].precision != j->cfgs[0].precision) && nbase == n)
                nbase = i;
        if (pr->on && pr->in.k0 >= 2)
            report_predicted(stdout, j->res, nbase, pr->rows);
        if (pr->on && pr->in.k0 >= 2 && c->zero && strategy_words(c->mode)->ranks)
            printf("  (ddp predicted as plain DDP; its ZeRO stage in the ZeRO table below, "
                   "with --predict)\n");
        if (pr->on && c->predict)
            report_predict_table(stdout, &pr->in, pr->rows);
        if (pr->on && c->predict)
            predict_zero_table(stdout, c, j->opts.mem_limit, &j->spec, j->data.tgt_cols, &pr->in,
                               &ddp_strategy);
        if (j->gpu.on)
            report_gpu(stdout, &j->gpu);
        const repeat_t *rp[MAX_RUNS];
        mode_t_ modes[MAX_RUNS];
        for (int i = 0; i < n; i++) {
            rp[i] = &j->reps[i];
            modes[i] = j->cfgs[i].mode;
        }
        report_repeat(stdout, rp, modes, n);
        report_notes_runs(stdout, ctx, j->res, n);
    }
    return fflush(stdout) == 0 && !ferror(stdout)
               ? DDP_OK
               : err_set(err, DDP_ERR_RUNTIME, "stdout: write failed: %s", strerror(errno));
}

void app_print(app_job_t *j, char *failed)
{
    char e[ERR_LEN];
    if (print_results(j, e) != DDP_OK)
        add_failure(failed, e);
    /* --repeat --json writes what may become a baseline: one too noisy to
     * gate --tolerance is said now, not found when it is used */
    for (int i = 0; j->cfg.json && j->cfg.repeat > 1 && i < j->n; i++) {
        char w[512];
        if (baseline_too_noisy(&j->reps[i], j->n > 1 ? mode_name(j->cfgs[i].mode) : NULL,
                               j->gate_opts.tolerance_pct, w, sizeof w))
            fprintf(stderr, "ddpbench: %s\n", w);
    }
    if (j->cfg.explain)
        for (int i = 0; i < j->n; i++)
            report_explain(j->info, &j->ctx, &j->res[i]);
    if (j->cfg.explain && j->gpu.on)
        report_gpu_explain(j->info, &j->gpu);
}

void app_write_page(app_job_t *j, char *failed, char *written, size_t wlen)
{
    const config_t *cfg = &j->cfg;
    if (!cfg->report_path[0])
        return;
    /* the last repetition's timeline, every repetition's intervals */
    const char *labels[MAX_RUNS] = {0};
    static const char *const zl[] = {"", "ddp --zero 1", "ddp --zero 2", "ddp --zero 3"};
    for (int i = 0; i < j->n; i++)
        if (strategy_words(j->cfgs[i].mode)->ranks && j->cfgs[i].zero >= 1 && j->cfgs[i].zero <= 3)
            labels[i] = zl[j->cfgs[i].zero];
    const predict_t *pr = &j->pred;
    bool model = pr->on && pr->in.k0 >= 2;
    report_page_t p = {.ctx = &j->ctx,
                       .title = mode_name(cfg->mode),
                       .cfgs = j->cfgs,
                       .runs = j->res,
                       .labels = labels,
                       .n = j->n,
                       .reps = j->reps,
                       .pred = model ? &pr->in : NULL,
                       .rows = model ? pr->rows : NULL,
                       .gpu = j->gpu.on ? &j->gpu : NULL};
    char e[ERR_LEN];
    if (report_page_write(cfg->report_path, &p, e) == DDP_OK) {
        size_t w = strlen(written);
        snprintf(written + w, wlen - w, "%s--report %s", w ? ", " : "", cfg->report_path);
    } else {
        add_failure(failed, e);
    }
}

int app_outputs_status(const app_job_t *j, const char *failed, const char *written, char *err)
{
    char all[ERR_LEN];
    snprintf(all, sizeof all, "%s", failed);
    if (j->info == stdout && (fflush(stdout) != 0 || ferror(stdout)) && !all[0])
        add_failure(all, "stdout: write failed");
    if (!all[0])
        return DDP_OK;
    bool files = j->cfg.save_path[0] || j->cfg.trace_path[0] || j->cfg.report_path[0];
    return err_set(err, DDP_ERR_RUNTIME, "%s%s%s%s", all,
                   written[0] ? " (written: " : files ? " (no file was written)" : "", written,
                   written[0] ? ")" : "");
}

/* --workload: the GPU lesson alone, nothing trained. */
int app_gpu_lesson(app_job_t *j, char *err)
{
    TRY(app_gpu_model(j, err));
    cJSON *o = j->cfg.json ? cJSON_CreateObject() : NULL;
    if (o) { /* a failed write is stdout's error, below */
        cJSON_AddStringToObject(o, "ddpbench", DDPBENCH_VERSION);
        cJSON_AddStringToObject(o, "mode", "predict");
        cJSON_AddItemToObject(o, "predict", report_json_gpu(&j->gpu));
        report_json_print(stdout, o);
        cJSON_Delete(o);
    } else {
        report_gpu(stdout, &j->gpu);
    }
    if (j->cfg.explain)
        report_gpu_explain(j->cfg.json ? stderr : stdout, &j->gpu);
    if (fflush(stdout) != 0 || ferror(stdout))
        return err_set(err, DDP_ERR_RUNTIME, "stdout: write failed");
    return DDP_OK;
}
