/* bench/main.c: the ddpbench program: command line -> config -> strategy ->
 * report.  The only place that prints "ddpbench: error:" and picks the exit
 * status (0 ok, 1 runtime fault, 2 bad input, 3 regression, 128 + the signal
 * when SIGINT/SIGTERM/SIGHUP stopped the run).
 *
 * After training, what the user asked to keep comes first and each output
 * stands alone: --save, then the evaluation (optional: its failure is a
 * note), --trace, the result on stdout; one that fails does not cost the
 * others, and the error line says what was and was not written. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/interrupt.h"
#include "base/text.h"
#include "device/backend.h"
#include "io/checkpoint.h"
#include "config/config.h"
#include "data/data.h"
#include "data/load.h"
#include "report/report.h"
#include "train/strategy.h"
#include "train/trainer.h"

#define MAX_RUNS 3 /* compare: single, dp, ddp */

/* The exit status of a status code. */
static int exit_code(int rc)
{
    if (rc == DDP_ERR_INTERRUPTED)
        return 128 + (interrupt_pending() ? interrupt_pending() : 2);
    return rc;
}

/* The one error line: whatever the message quotes (a path with a newline or
 * an ESC in it) is escaped, so it stays one line of plain text. */
static int fail(int code, const char *msg)
{
    char shown[2 * ERR_LEN];
    text_escape(msg, shown, sizeof shown);
    fprintf(stderr, "ddpbench: %s %s\n", code == DDP_ERR_INTERRUPTED ? "stopped:" : "error:",
            shown);
    return exit_code(code);
}

/* stdout after --help or --version: a write that failed (/dev/full) fails. */
static int stdout_status(char *err)
{
    if (fflush(stdout) != 0 || ferror(stdout))
        return err_set(err, DDP_ERR_RUNTIME, "stdout: write failed: %s", strerror(errno));
    return DDP_OK;
}

/* The config of one run: compare gives each run its mode, and single runs on
 * the first device of the list. */
static void run_config(const config_t *base, mode_t_ mode, config_t *out)
{
    *out = *base;
    out->mode = mode;
    if (mode == MODE_SINGLE)
        out->ngpus = 1;
}

static int run_mode(const config_t *c, const dataset_t *d, run_result_t *res, char *err)
{
    switch (c->mode) {
    case MODE_DP:
        return dp_run(c, d, res, err);
    case MODE_DDP:
        return ddp_run(c, d, res, err);
    default:
        return single_run(c, d, res, err);
    }
}

/* Every run's baseline match, found before any training (a wrong baseline
 * must not cost a run). */
static int baseline_prepare(baseline_t *bl, const report_ctx_t *ctx, const config_t *cfgs,
                            int n, const cJSON **match, char *err)
{
    int rc = baseline_load(bl, ctx->cfg->baseline_path, err);
    for (int i = 0; rc == DDP_OK && i < n; i++) {
        cJSON *cj = report_json_config(ctx, &cfgs[i]);
        if (!cj)
            return err_set(err, DDP_ERR_RUNTIME, "out of memory");
        rc = baseline_match(bl, cj, &match[i], err);
        cJSON_Delete(cj);
    }
    return rc;
}

/* The result on stdout in the form asked for. */
static int print_results(const report_ctx_t *ctx, const config_t *cfgs, const run_result_t *res,
                         int n, const run_result_t *ref, char *err)
{
    const config_t *c = ctx->cfg;
    if (c->json) {
        for (int i = 0; i < n; i++) {
            cJSON *o = report_json_run(ctx, &cfgs[i], &res[i], ref, c->mode == MODE_COMPARE);
            int rc = report_json_print(stdout, o);
            cJSON_Delete(o);
            if (rc != DDP_OK)
                return err_set(err, rc, "stdout: could not write the --json result: %s",
                               strerror(errno));
        }
    } else if (c->csv) {
        report_csv_header(stdout);
        for (int i = 0; i < n; i++)
            report_csv_row(stdout, ctx, &cfgs[i], &res[i], ref);
    } else if (c->mode == MODE_COMPARE) {
        report_compare(stdout, ctx, res, n);
    } else {
        report_result(stdout, ctx, &res[0], NULL);
    }
    return fflush(stdout) == 0 && !ferror(stdout)
               ? DDP_OK
               : err_set(err, DDP_ERR_RUNTIME, "stdout: write failed: %s", strerror(errno));
}

/* A diverged run (a NaN or infinite final loss or parameter) is a failure
 * naming the step, unless --allow-nonfinite: then it is reported as it is. */
static int check_finite(const config_t *cfg, const model_spec_t *spec, const run_result_t *r,
                        int nruns, char *err)
{
    char where[128] = "";
    size_t bad = r->params ? model_count_nonfinite(spec, r->params, where, sizeof where) : 0;
    if (cfg->allow_nonfinite || bad == 0)
        return DDP_OK;
    err_set(err, DDP_ERR_RUNTIME,
            "after its %ld steps, %zu of the %zu final parameters are not finite (%s): the "
            "training diverged (lower --lr; --allow-nonfinite keeps going)",
            r->steps, bad, spec->nparams, where);
    if (nruns > 1)
        err_prefix(err, DDP_ERR_RUNTIME, "--mode compare: the %s run", mode_name(r->mode));
    return DDP_ERR_RUNTIME;
}

/* A failed output's message, joined to those before it. */
static void add_failure(char *all, const char *one)
{
    size_t n = strlen(all);
    snprintf(all + n, ERR_LEN - n, "%s%s", n ? "; " : "", one);
}

/* --warmup-steps that would leave no timed step: say what the run used. */
static void warmup_note(const config_t *c, const run_result_t *r)
{
    long timed = r->steps - r->warmup_steps;
    if (!c->quiet && r->steps > 0 && r->warmup_steps < c->warmup_steps)
        fprintf(stderr,
                "ddpbench: note: --warmup-steps %ld: the %s run has %ld step%s, so %ld %s "
                "warm-up and %ld %s timed\n",
                c->warmup_steps, mode_name(r->mode), r->steps, r->steps == 1 ? "" : "s",
                r->warmup_steps, r->warmup_steps == 1 ? "is" : "are", timed,
                timed == 1 ? "is" : "are");
}

int main(int argc, char **argv)
{
    /* Under ulimit -v, start again with one OpenBLAS thread at load: its
     * pool threads would otherwise each map a buffer before main and spin
     * forever where one does not fit (backend.h).  Nothing has run yet. */
    if (backend_cpu_restart_env())
        execv("/proc/self/exe", argv); /* on failure, go on as we are */

    config_t cfg;
    char err[ERR_LEN] = "";
    int rc = config_parse(&cfg, argc, argv, stdout, err);
    if (rc == CONFIG_EXIT_OK)
        return (rc = stdout_status(err)) == DDP_OK ? 0 : fail(rc, err);
    if (rc != DDP_OK)
        return fail(rc, err);
    interrupt_install();

    char note[ERR_LEN];
    if ((rc = config_resolve(&cfg, note, sizeof note, err)) != DDP_OK)
        return fail(rc, err);
    model_spec_t spec;
    if ((rc = config_model_spec(&cfg, &spec, err)) != DDP_OK)
        return fail(rc, err);
    if (cfg.trace_path[0] && (rc = report_trace_check(cfg.trace_path, err)) != DDP_OK)
        return fail(rc, err);

    /* the runs: one, or compare's three on the same data */
    static const mode_t_ compare_modes[MAX_RUNS] = {MODE_SINGLE, MODE_DP, MODE_DDP};
    int n = cfg.mode == MODE_COMPARE ? MAX_RUNS : 1;
    config_t cfgs[MAX_RUNS];
    static run_result_t res[MAX_RUNS]; /* static: each holds its step statistics */
    for (int i = 0; i < n; i++) {
        run_config(&cfg, cfg.mode == MODE_COMPARE ? compare_modes[i] : cfg.mode, &cfgs[i]);
        result_init(&res[i]);
    }
    report_ctx_t ctx = {&cfg, &spec, NULL, note[0] ? note : NULL};

    baseline_t bl = {0};
    const cJSON *match[MAX_RUNS] = {0};
    if (cfg.baseline_path[0] && (rc = baseline_prepare(&bl, &ctx, cfgs, n, match, err)) != DDP_OK) {
        baseline_free(&bl);
        return fail(rc, err);
    }

    dataset_t data;
    if ((rc = data_load(&cfg, &spec, &data, err)) != DDP_OK) {
        baseline_free(&bl);
        return fail(rc, err);
    }
    ctx.data = &data;
    /* Bad --init/--resume files and unwritable --save/--checkpoint paths are
     * input errors found now, not after the training. */
    if ((rc = ckpt_preflight(&cfg, &spec, &data, err)) != DDP_OK) {
        data_free(&data);
        baseline_free(&bl);
        return fail(rc, err);
    }

    /* under --json/--csv stdout carries only the result */
    FILE *info = (cfg.json || cfg.csv) ? stderr : stdout;
    if (!cfg.quiet)
        report_banner(info, &ctx);

    /* CUDA does not survive fork: single and dp initialise CUDA in this
     * process, so on CUDA the ddp run (which forks its ranks) goes first.
     * The results are still shown in the order single, dp, ddp. */
    int order[MAX_RUNS] = {0, 1, 2};
    if (n == MAX_RUNS && cfg.backend == BACKEND_CUDA) {
        order[0] = 2;
        order[1] = 0;
        order[2] = 1;
    }
    for (int k = 0; k < n && rc == DDP_OK; k++) {
        int i = order[k];
        if (interrupt_pending()) {
            rc = err_set(err, DDP_ERR_INTERRUPTED, "interrupted by SIG%s before the %s run",
                         sigabbrev_np(interrupt_pending()), mode_name(cfgs[i].mode));
            break;
        }
        if (n > 1 && !cfg.quiet) {
            fprintf(info, "== %s on %d device%s\n", mode_name(cfgs[i].mode),
                    cfgs[i].ngpus, cfgs[i].ngpus == 1 ? "" : "s");
            fflush(info);
        }
        rc = run_mode(&cfgs[i], &data, &res[i], err);
        if (rc == DDP_OK)
            rc = check_finite(&cfg, &spec, &res[i], n, err);
        else if (n > 1)
            err_prefix(err, rc, "--mode compare: the %s run", mode_name(cfgs[i].mode));
        if (rc == DDP_OK)
            warmup_note(&cfg, &res[i]);
    }

    /* The outputs, each on its own: --save first (the weights are what a
     * failure after training must not cost), then the evaluation, --trace and
     * the result on stdout. */
    char failed[ERR_LEN] = "", written[2 * CONFIG_PATH_LEN + 32] = "";
    if (rc == DDP_OK && cfg.save_path[0]) {
        char e[ERR_LEN];
        if (ckpt_save_weights(cfg.save_path, &cfg, &spec, res[0].params, e) == DDP_OK)
            snprintf(written, sizeof written, "--save %s", cfg.save_path);
        else
            add_failure(failed, e);
    }
    for (int i = 0; rc == DDP_OK && i < n; i++) {
        char e[ERR_LEN];
        if (trainer_evaluate(&spec, cfg.loss, res[i].params, &data, &res[i].train_loss,
                             &res[i].train_accuracy, e) != DDP_OK)
            fprintf(stderr, "ddpbench: note: the %s run's final evaluation was skipped: %s\n",
                    mode_name(res[i].mode), e);
    }
    if (rc == DDP_OK && cfg.trace_path[0]) {
        char e[ERR_LEN];
        if (report_trace_write(cfg.trace_path, res, n, e) == DDP_OK) {
            size_t w = strlen(written);
            snprintf(written + w, sizeof written - w, "%s--trace %s", w ? ", " : "",
                     cfg.trace_path);
            for (int i = 0; i < n; i++)
                if (!res[i].trace[0])
                    fprintf(stderr, "ddpbench: note: the %s run recorded no trace events\n",
                            mode_name(res[i].mode));
        } else {
            add_failure(failed, e);
        }
    }
    const run_result_t *ref = cfg.mode == MODE_COMPARE ? &res[0] : NULL;
    if (rc == DDP_OK) {
        char e[ERR_LEN];
        if (print_results(&ctx, cfgs, res, n, ref, e) != DDP_OK)
            add_failure(failed, e);
    }
    if (rc == DDP_OK && cfg.explain)
        for (int i = 0; i < n; i++)
            report_explain(info, &ctx, &res[i]);

    /* the regression gate: one verdict per run; any regression exits 3 */
    bool regressed = false;
    if (rc == DDP_OK && cfg.baseline_path[0]) {
        for (int i = 0; i < n; i++) {
            char line[ERR_LEN];
            if (baseline_verdict(match[i], n > 1 ? mode_name(cfgs[i].mode) : NULL,
                                 res[i].samples_per_s, cfg.tolerance_pct, line,
                                 sizeof line) == DDP_ERR_REGRESSED)
                regressed = true;
            fprintf(info, "ddpbench: %s\n", line);
        }
    }
    if (rc == DDP_OK && info == stdout && (fflush(stdout) != 0 || ferror(stdout)) && !failed[0])
        add_failure(failed, "stdout: write failed");
    if (rc == DDP_OK && failed[0]) {
        bool files = cfg.save_path[0] || cfg.trace_path[0];
        rc = err_set(err, DDP_ERR_RUNTIME, "%s%s%s%s", failed,
                     written[0] ? " (written: " : files ? " (no file was written)" : "", written,
                     written[0] ? ")" : "");
    }

    for (int i = 0; i < n; i++)
        result_free(&res[i]);
    baseline_free(&bl);
    data_free(&data);
    if (rc != DDP_OK)
        return fail(rc, err);
    return regressed ? DDP_ERR_REGRESSED : 0;
}
