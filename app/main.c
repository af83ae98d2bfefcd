/* app/main.c: the ddpbench program: command line -> config -> strategy ->
 * report.  The only place that prints "ddpbench: error:" and picks the exit
 * status (0 ok, 1 runtime fault, 2 bad input, 3 regression, 4 no verdict,
 * 128 + the signal when SIGINT/SIGTERM/SIGHUP stopped the run).
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
#include "app/scenario.h"
#include "app/commbench.h"
#include "app/twin.h"
#include "app/ab.h"
#include "comm/comm.h"
#include "ddp/launch.h"
#include "ddp/reducer.h"
#include "device/backend.h"
#include "io/checkpoint.h"
#include "config/config.h"
#include "data/data.h"
#include "data/load.h"
#include "data/schedule.h"
#include "report/report.h"
#include "strategies/strategy.h"
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
 * the first device of the list.  DDP's DistributedSampler has one replica per
 * rank, whatever stream --sampler-replicas gives single and dp. */
static void run_config(const config_t *base, mode_t_ mode, config_t *out)
{
    *out = *base;
    out->mode = mode;
    if (mode == MODE_SINGLE)
        out->ngpus = 1;
    if (mode == MODE_DDP && !out->nrank_samples)
        out->sampler_replicas = out->ngpus;
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

// ---------------------------------------------------------------------------
// --predict (and compare's predicted column): the alpha-beta model's inputs

typedef struct {
    bool on;
    collperf_t perf;          /* the collectives, measured by --mode comm */
    predict_in_t in;
    predict_row_t rows[PREDICT_MAX_DEVICES];
} predict_t;

/* Measure all-reduce, broadcast and reduce at the sizes the model needs
 * (DDP's buckets up to the whole parameter arena) on the run's devices, or
 * on two CPU workers / GPUs when the run has one.  Before CUDA is initialised
 * in this process (it forks ranks): on CUDA before single's and dp's runs,
 * elsewhere after the outputs. */
static int predict_measure(const config_t *cfg, const model_spec_t *spec, bool full, predict_t *p,
                           char *err)
{
    predict_in_t *in = &p->in;
    reducer_t red;
    TRY(reducer_init(&red, NULL, NULL, spec, NULL, cfg->first_bucket_mb, cfg->bucket_mb, cfg->overlap,
                     err));
    double smallest = 0.0, largest = 0.0;
    for (int i = 0; i < red.nb && in->nbuckets < PREDICT_MAX_BUCKETS; i++) {
        double b = (double)red.b[i].count * sizeof(float);
        in->bucket_bytes[in->nbuckets++] = b;
        smallest = i == 0 || b < smallest ? b : smallest;
        largest = b > largest ? b : largest;
    }
    reducer_free(&red);
    config_t c = *cfg; /* its mode stays: the fault tests' faults are training's */
    c.colls = (1u << COLL_ALL_REDUCE) | (1u << COLL_BROADCAST) | (1u << COLL_REDUCE);
    /* from latency (1 KiB or the smallest bucket) to bandwidth (the whole
     * arena, at least 256 KiB): the fit needs both regimes */
    c.min_bytes = smallest < 1024 ? (long)(smallest > 4 ? smallest : 4) : 1024;
    c.max_bytes = (long)(spec->nparams * sizeof(float));
    if (c.max_bytes < 256 * 1024)
        c.max_bytes = 256 * 1024;
    if (!full) { /* a DDP run's buckets alone: all-reduce at their sizes */
        c.colls = 1u << COLL_ALL_REDUCE;
        c.min_bytes = (long)(smallest > 4 ? smallest : 4);
        c.max_bytes = (long)(largest > smallest ? largest : smallest);
    }
    c.step_factor = 4.0;
    c.iters = 10;
    c.warmup_iters = 2;
    if (c.ngpus < 2 && c.launcher == LAUNCHER_MPI)
        return DDP_OK; /* one rank under mpirun: nothing to measure, k0 stays 0 */
    if (c.ngpus < 2) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        bool two = c.backend == BACKEND_CPU ? cpus >= 2 : backend_cuda_probe(NULL) >= 2;
        if (!two)
            return DDP_OK; /* one device: nothing to measure, k0 stays 0 */
        c.ngpus = 2;
        c.gpus[0] = 0;
        c.gpus[1] = 1;
    }
    TRY(comm_bench_run(&c, &p->perf, err));
    in->k0 = p->perf.world;
    in->all_reduce = collperf_find(&p->perf, COLL_ALL_REDUCE);
    in->broadcast = collperf_find(&p->perf, COLL_BROADCAST);
    in->reduce = collperf_find(&p->perf, COLL_REDUCE);
    return DDP_OK;
}

static int measure_collectives(const config_t *cfg, const model_spec_t *spec, bool full,
                               predict_t *p, FILE *info, char *err)
{
    if (!cfg->quiet && ddp_launch_reports(cfg)) {
        fprintf(info, "== the collectives%s (--mode comm)\n",
                full ? ", for the alpha-beta model" : " at the bucket sizes");
        fflush(info);
    }
    int rc = predict_measure(cfg, spec, full, p, err);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "measuring the collectives");
}

/* The model's table, from single's phases per step. */
static void predict_finish(predict_t *p, const config_t *cfg, const model_spec_t *spec,
                           const dataset_t *data, const run_result_t *single)
{
    predict_in_t *in = &p->in;
    double steps = single->times.n > 0 ? (double)single->times.n : 1.0;
    for (int q = 0; q < PH_COUNT; q++)
        in->phase_s[q] = single->dev[0].phase_s[q] / steps;
    in->batch = cfg->batch;
    in->accum = cfg->accum;
    in->param_bytes = (double)spec->nparams * sizeof(float);
    in->in_bytes_per_row = (double)data->in_dim * sizeof(float);
    in->out_bytes_per_row = (double)model_out_dim(spec) * sizeof(float);
    in->overlap = cfg->overlap;
    predict_steps(in, p->rows);
    p->on = true;
}

/* What differs from the baseline without refusing it: one warning line. */
static void baseline_warn(const baseline_t *bl, const report_ctx_t *ctx, const config_t *cfgs,
                          int n, const cJSON **match)
{
    for (int i = 0; i < n; i++) {
        run_result_t shape; /* the devices this run will use, for the environment */
        result_init(&shape);
        shape.backend = cfgs[i].backend;
        shape.ndev = cfgs[i].ngpus;
        for (int d = 0; d < shape.ndev; d++)
            shape.dev[d].device_id = cfgs[i].gpus[d];
        cJSON *cj = report_json_config(ctx, &cfgs[i]), *env = report_json_env(ctx, &shape);
        char line[2048];
        if (cj && env && baseline_differences(bl, match[i], cj, env, line, sizeof line) > 0)
            fprintf(stderr, "ddpbench: %s\n", line);
        cJSON_Delete(cj);
        cJSON_Delete(env);
        if (line[0])
            break; /* compare's runs share the machine and settings: once is enough */
    }
}

/* The result on stdout in the form asked for; reps: each run's --repeat runs. */
static int print_results(const report_ctx_t *ctx, const config_t *cfgs, const run_result_t *res,
                         int n, const run_result_t *ref, const repeat_t *reps,
                         const predict_t *pr, char *err)
{
    const config_t *c = ctx->cfg;
    if (c->json) {
        for (int i = 0; i < n; i++) {
            cJSON *o = report_json_run(ctx, &cfgs[i], &res[i], ref, c->mode == MODE_COMPARE);
            if (o && reps[i].n > 1)
                cJSON_ReplaceItemInObjectCaseSensitive(o, "repeat", report_json_repeat(&reps[i]));
            if (o && pr->on)
                cJSON_ReplaceItemInObjectCaseSensitive(
                    o, "predict", report_json_predict(&pr->in, pr->rows, &res[i]));
            if (o && pr->in.all_reduce)
                cJSON_ReplaceItemInObjectCaseSensitive(
                    o, "buckets", report_json_buckets(&res[i], pr->in.all_reduce, cfgs[i].zero1));
            int rc = report_json_print(stdout, o);
            cJSON_Delete(o);
            if (rc != DDP_OK)
                return err_set(err, rc, "stdout: could not write the --json result: %s",
                               strerror(errno));
        }
    } else if (c->csv) {
        report_csv_header(stdout);
        for (int i = 0; i < n; i++)
            report_csv_row(stdout, ctx, &cfgs[i], &res[i], ref, &reps[i]);
        for (int i = 0; i < n; i++) /* stdout holds the CSV alone: the notes go to stderr */
            report_notes(stderr, ctx, &res[i], n > 1);
    } else {
        if (c->mode == MODE_COMPARE)
            report_compare(stdout, ctx, res, n);
        else
            report_result(stdout, ctx, &res[0], NULL);
        if (c->mode == MODE_DDP)
            report_buckets(stdout, &res[0], pr->in.all_reduce, c->zero1);
        if (pr->on && pr->in.k0 >= 2)
            report_predicted(stdout, res, n, &pr->in, pr->rows);
        if (pr->on && pr->in.k0 >= 2 && c->zero1)
            printf("  (ddp predicted as plain DDP: --zero1's reduce-scatter, sharded optimizer "
                   "step and all-gather are not modelled)\n");
        if (pr->on && c->predict)
            report_predict_table(stdout, &pr->in, pr->rows);
        const repeat_t *rp[MAX_RUNS];
        mode_t_ modes[MAX_RUNS];
        for (int i = 0; i < n; i++) {
            rp[i] = &reps[i];
            modes[i] = cfgs[i].mode;
        }
        report_repeat(stdout, rp, modes, n);
        for (int i = 0; i < n; i++)
            report_notes(stdout, ctx, &res[i], n > 1);
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

/* --mode comm: the collectives alone; exit 1 when a check found a wrong value. */
static int run_comm(const config_t *cfg, const char *note)
{
    char err[ERR_LEN] = "";
    report_ctx_t ctx = {cfg, NULL, NULL, note, NULL};
    collperf_t perf;
    bool reports = ddp_launch_reports(cfg);
    if (!cfg->quiet && reports)
        fprintf(cfg->json ? stderr : stdout, "ddpbench %s: mode comm, backend %s%s%s\n",
                DDPBENCH_VERSION, backend_kind_name(cfg->backend), note ? " " : "",
                note ? note : "");
    if (!cfg->quiet && reports) {
        char who[1200];
        ddp_launch_describe(cfg, who, sizeof who);
        if (who[0])
            fprintf(cfg->json ? stderr : stdout, "  launched by %s\n", who);
    }
    int rc = comm_bench_run(cfg, &perf, err);
    if (rc != DDP_OK)
        return fail(rc, err);
    if (!reports) /* under mpirun: rank 0 reports for every rank */
        return 0;
    if (cfg->json) {
        cJSON *o = report_json_comm(&ctx, &perf);
        rc = report_json_print(stdout, o);
        cJSON_Delete(o);
        if (rc != DDP_OK)
            return fail(DDP_ERR_RUNTIME, "--json: could not write the result");
    } else {
        report_comm(stdout, &perf);
    }
    if (fflush(stdout) != 0)
        return fail(DDP_ERR_RUNTIME, "stdout: write failed");
    if (perf.wrong_total > 0) {
        for (int i = 0; i < perf.ncoll; i++)
            for (int j = 0; j < perf.coll[i].npoints; j++)
                for (int place = 0; place < 2; place++)
                    if (perf.coll[i].pt[j].wrong[place]) {
                        snprintf(err, sizeof err,
                                 "--mode comm: the check found %ld wrong value%s; the first: "
                                 "%s of %ld bytes %s, %ld wrong",
                                 perf.wrong_total, perf.wrong_total == 1 ? "" : "s",
                                 perf.coll[i].name, perf.coll[i].pt[j].bytes,
                                 place ? "in place" : "out of place",
                                 perf.coll[i].pt[j].wrong[place]);
                        return fail(DDP_ERR_RUNTIME, err);
                    }
    }
    return 0;
}

/* A failure agreed by every rank under mpirun is said once, by rank 0 (its
 * err is the line; the others' is empty): the exit status is the same. */
static int fail_or_quiet(int code, const char *msg)
{
    return msg[0] ? fail(code, msg) : exit_code(code);
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
    /* The launcher first (ddp/launch.h): under mpirun this process forks its
     * watcher and becomes a rank; even a bad option is then judged with the
     * other ranks' at the start-up check, so it is said once. */
    int code;
    char lerr[ERR_LEN] = "";
    int lrc = ddp_launch_init(&cfg, &code, lerr);
    if (lrc == DDP_LAUNCH_WATCHER)
        return code;
    if (lrc != DDP_OK && rc == DDP_OK) {
        if (cfg.launcher != LAUNCHER_MPI || cfg.world_size == 0) /* no group to tell */
            return ddp_launch_end(&cfg, fail(lrc, lerr));
        rc = lrc;
        snprintf(err, sizeof err, "%s", lerr);
    }
    bool mpi = cfg.launcher == LAUNCHER_MPI;
    if (!mpi) /* under mpirun, mpirun's signals end the job */
        interrupt_install();
    if (rc == DDP_OK && cfg.against[0]) { /* the A/B gate: its runs are child processes */
        if (!mpi)
            return (rc = ab_main(&cfg, argc, argv, err)) == DDP_OK ? 0
                   : rc == DDP_ERR_REGRESSED || rc == DDP_ERR_NOISY ? rc
                                                                    : fail(rc, err);
        rc = err_set(err, DDP_ERR_INPUT, "--against: starts its own runs on one host; run it "
                     "without mpirun");
    }
    if (rc == DDP_OK && cfg.scenario[0]) { /* a failure reproduced and explained
                                             (scenario.h): its runs are this process's */
        if (!mpi)
            return scenario_main(argc, argv, cfg.scenario, stdout);
        rc = err_set(err, DDP_ERR_INPUT, "--scenario %s: forks its own ranks on one host; run it "
                     "without mpirun", cfg.scenario);
    }

    report_start(); /* the run's start time and load average, for its provenance */
    char note[ERR_LEN] = "";
    if (rc == DDP_OK)
        rc = config_resolve(&cfg, note, sizeof note, err);
    if (cfg.mode == MODE_COMM) {
        if ((rc = ddp_launch_agree(&cfg, NULL, rc, err)) != DDP_OK)
            return ddp_launch_end(&cfg, fail_or_quiet(rc, err));
        return ddp_launch_end(&cfg, run_comm(&cfg, note[0] ? note : NULL));
    }
    model_spec_t spec;
    if (rc == DDP_OK)
        rc = config_model_spec(&cfg, &spec, err);
    if (rc == DDP_OK && cfg.trace_path[0] && ddp_launch_reports(&cfg))
        rc = report_trace_check(cfg.trace_path, err);

    /* the runs: one, or compare's three on the same data (under mpirun two:
     * DP is one process, so single on rank 0 and DDP on every rank) */
    static const mode_t_ compare_modes[MAX_RUNS] = {MODE_SINGLE, MODE_DP, MODE_DDP};
    static const mode_t_ compare_mpi[MAX_RUNS] = {MODE_SINGLE, MODE_DDP};
    int n = cfg.mode == MODE_COMPARE ? (mpi ? 2 : MAX_RUNS) : 1;
    config_t cfgs[MAX_RUNS];
    static run_result_t res[MAX_RUNS]; /* static: each holds its step statistics */
    for (int i = 0; i < n; i++) {
        run_config(&cfg,
                   cfg.mode == MODE_COMPARE ? (mpi ? compare_mpi : compare_modes)[i] : cfg.mode,
                   &cfgs[i]);
        result_init(&res[i]);
    }
    report_ctx_t ctx = {&cfg, &spec, NULL, note[0] ? note : NULL, NULL};

    /* --baseline is rank 0's to read and judge (under mpirun the others
     * only train) */
    baseline_t bl = {0};
    const cJSON *match[MAX_RUNS] = {0};
    bool gate = cfg.baseline_path[0] && ddp_launch_reports(&cfg);
    if (rc == DDP_OK && gate)
        rc = baseline_prepare(&bl, &ctx, cfgs, n, match, err);

    dataset_t data;
    bool loaded = false;
    if (rc == DDP_OK)
        loaded = (rc = data_load(&cfg, &spec, &data, err)) == DDP_OK;
    ctx.data = loaded ? &data : NULL;
    if (rc == DDP_OK && gate) /* with the data: its size is one of the settings compared */
        baseline_warn(&bl, &ctx, cfgs, n, match);
    /* Bad --init/--resume files and unwritable --save/--checkpoint paths are
     * input errors found now, not after the training. */
    if (rc == DDP_OK)
        rc = ckpt_preflight(&cfg, &spec, &data, err);

    /* Every run's sample stream (a batch with nothing to train on, shards
     * larger than the data) is checked before the banner. */
    for (int i = 0; i < n && rc == DDP_OK; i++) {
        schedule_t sch;
        if ((rc = schedule_init(&sch, &cfgs[i], &data, 1, 0, err)) == DDP_OK)
            schedule_free(&sch);
    }
    /* Under mpirun every rank's outcome so far and what it was started
     * with meet here (launch.h): one verdict for all. */
    rc = ddp_launch_agree(&cfg, loaded ? &data : NULL, rc, err);
    if (rc == DDP_OK)
        for (int i = 0; i < n; i++) /* the devices every rank has, for the reports */
            run_config(&cfg, cfgs[i].mode, &cfgs[i]);
    if (rc != DDP_OK) {
        if (loaded)
            data_free(&data);
        baseline_free(&bl);
        return ddp_launch_end(&cfg, fail_or_quiet(rc, err));
    }
    bool reports = ddp_launch_reports(&cfg);

    /* --emit-pytorch: the same job as a PyTorch script, written before
     * training (a path it cannot write is bad input); under mpirun by rank 0,
     * which writes the outputs (its failure ends the job: ddp_launch_end) */
    if (cfg.emit_pytorch[0] && reports &&
        (rc = twin_emit(&cfgs[0], &spec, &data, argc, argv, (cfg.json || cfg.csv) ? stderr : stdout,
                        err)) != DDP_OK) {
        data_free(&data);
        baseline_free(&bl);
        return ddp_launch_end(&cfg, fail(rc, err));
    }

    char note2[ERR_LEN + 1100];
    ckpt_init_note(&cfg, &spec, note2, sizeof note2);
    if (note2[0] && reports)
        fprintf(stderr, "ddpbench: warning: %s\n", note2);

    /* under --json/--csv stdout carries only the result */
    FILE *info = (cfg.json || cfg.csv) ? stderr : stdout;
    if (!cfg.quiet && reports) {
        report_banner(info, &ctx);
        char who[1200];
        ddp_launch_describe(&cfg, who, sizeof who);
        if (who[0])
            fprintf(info, "  launched by %s, comm %s\n", who, comm_name(cfg.comm));
    }

    /* CUDA does not survive fork: single and dp initialise CUDA in this
     * process, so on CUDA the ddp run (which forks its ranks) goes first.
     * Under mpirun too: the other ranks join DDP at once and rank 0 runs
     * single after it, alone.  The results are still shown in the order
     * single, dp, ddp. */
    int order[MAX_RUNS] = {0, 1, 2};
    if (n == MAX_RUNS && cfg.backend == BACKEND_CUDA) {
        order[0] = 2;
        order[1] = 0;
        order[2] = 1;
    }
    if (mpi && n == 2) {
        order[0] = 1;
        order[1] = 0;
    }
    /* --predict, and compare on several devices: the collectives for the
     * model; a DDP run: the all-reduce at its bucket sizes.  After the
     * training runs (a Ctrl-C meant for training finds its ranks), but
     * before anything initialises CUDA in this process: the measurement
     * forks ranks, and CUDA does not survive fork. */
    static predict_t pred;
    bool full = cfg.predict || (cfg.mode == MODE_COMPARE && cfg.ngpus >= 2);
    bool measure = full || (cfg.mode == MODE_DDP && cfg.ngpus >= 2);

    /* --repeat N: the whole set N times, each run from scratch (its own
     * warm-up; DDP forks fresh ranks); the reports show the last run and,
     * over all of them, medians and intervals (repeat.h) */
    static repeat_t reps[MAX_RUNS];
    /* Which run goes when: on the CPU the modes take turns, repetition by
     * repetition, so a change in the machine's load falls on all of them;
     * on CUDA every DDP repetition comes first (its ranks are forked, and
     * CUDA does not survive fork: single and dp initialise it here). */
    int total = n * cfg.repeat;
    for (int j = 0; j < total && rc == DDP_OK; j++) {
        bool by_mode = cfg.backend == BACKEND_CUDA;
        int k = by_mode ? j / cfg.repeat : j % n, r = by_mode ? j % cfg.repeat : j / n;
        int i = order[k];
        if (r > 0) { /* the reports show the last repetition */
            result_free(&res[i]);
            result_init(&res[i]);
        }
        if (interrupt_pending()) {
            rc = err_set(err, DDP_ERR_INTERRUPTED, "interrupted by SIG%s before the %s run",
                         sigabbrev_np(interrupt_pending()), mode_name(cfgs[i].mode));
            break;
        }
        if (measure && cfg.backend == BACKEND_CUDA && cfgs[i].mode != MODE_DDP) {
            rc = measure_collectives(&cfg, &spec, full, &pred, info, err);
            measure = false;
            if (rc != DDP_OK)
                break;
        }
        if (!reports && cfgs[i].mode != MODE_DDP)
            continue; /* under mpirun, single is rank 0's alone */
        if ((n > 1 || cfg.repeat > 1) && !cfg.quiet && reports) {
            fprintf(info, "== %s on %d device%s", mode_name(cfgs[i].mode), cfgs[i].ngpus,
                    cfgs[i].ngpus == 1 ? "" : "s");
            if (cfg.repeat > 1)
                fprintf(info, " (run %d of %d)", r + 1, cfg.repeat);
            fputc('\n', info);
            fflush(info);
        }
        rc = run_mode(&cfgs[i], &data, &res[i], err);
        if (rc == DDP_OK)
            rc = check_finite(&cfg, &spec, &res[i], n, err);
        else if (n > 1)
            err_prefix(err, rc, "--mode compare: the %s run", mode_name(cfgs[i].mode));
        if (rc == DDP_OK) {
            repeat_add(&reps[i], &res[i]);
            if (r == cfg.repeat - 1 && reports)
                warmup_note(&cfg, &res[i]);
        }
    }
    if (!reports) {
        /* Under mpirun, a rank other than 0: rank 0 writes the outputs and
         * reports for all; this rank only joins the collectives' measurement
         * (a group run of every rank), whose failure rank 0 reports. */
        if (rc == DDP_OK && measure) {
            char e[ERR_LEN];
            int mrc = measure_collectives(&cfg, &spec, full, &pred, info, e);
            if (mrc != DDP_OK && cfg.predict)
                rc = err_set(err, mrc, "%s", e);
        }
        for (int i = 0; i < n; i++)
            result_free(&res[i]);
        data_free(&data);
        baseline_free(&bl);
        return ddp_launch_end(&cfg, rc == DDP_OK ? 0 : fail(rc, err));
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
    /* The collectives for --predict (and for compare's predicted column and
     * DDP's bucket bandwidths): after the outputs, so its failure costs none
     * of them; only --predict needs it, elsewhere a failure is a note. */
    if (rc == DDP_OK && measure) {
        char e[ERR_LEN];
        int mrc = measure_collectives(&cfg, &spec, full, &pred, info, e);
        if (mrc != DDP_OK && cfg.predict)
            rc = err_set(err, mrc, "%s", e);
        else if (mrc != DDP_OK)
            fprintf(stderr, "ddpbench: note: %s (the report goes without them)\n", e);
        full = full && mrc == DDP_OK;
    }
    const run_result_t *ref = cfg.mode == MODE_COMPARE ? &res[0] : NULL;
    /* the model needs single's phases: the run's own, or one more run */
    if (rc == DDP_OK && full) {
        if (cfgs[0].mode == MODE_SINGLE) {
            predict_finish(&pred, &cfg, &spec, &data, &res[0]);
        } else {
            config_t one;
            run_config(&cfg, MODE_SINGLE, &one);
            static run_result_t s; /* static: it holds its step statistics */
            result_init(&s);
            if (!cfg.quiet)
                fprintf(info, "== single on 1 device, for --predict\n");
            rc = run_mode(&one, &data, &s, err);
            if (rc == DDP_OK)
                predict_finish(&pred, &cfg, &spec, &data, &s);
            result_free(&s);
        }
    }
    /* the narrative's latency floor and crossover read the measured collectives */
    if (pred.in.all_reduce)
        ctx.pred = &pred.in;
    if (rc == DDP_OK) {
        char e[ERR_LEN];
        if (print_results(&ctx, cfgs, res, n, ref, reps, &pred, e) != DDP_OK)
            add_failure(failed, e);
    }
    if (rc == DDP_OK && cfg.explain)
        for (int i = 0; i < n; i++)
            report_explain(info, &ctx, &res[i]);

    /* the regression gate: one verdict per run on its --repeat interval;
     * any regression exits 3, else any "too noisy" 4 (README.md) */
    bool regressed = false, noisy = false;
    if (rc == DDP_OK && cfg.baseline_path[0]) {
        for (int i = 0; i < n; i++) {
            char lines[4096];
            int v = baseline_judge(match[i], n > 1 ? mode_name(cfgs[i].mode) : NULL, &reps[i],
                                   cfg.tolerance_pct, lines, sizeof lines);
            regressed |= v == DDP_ERR_REGRESSED;
            noisy |= v == DDP_ERR_NOISY;
            for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l;
                 l = strtok_r(NULL, "\n", &save))
                fprintf(info, "ddpbench: %s\n", l);
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
        return ddp_launch_end(&cfg, fail(rc, err));
    return ddp_launch_end(&cfg, regressed ? DDP_ERR_REGRESSED : noisy ? DDP_ERR_NOISY : 0);
}
