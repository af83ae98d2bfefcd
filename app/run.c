/* app/run.c: the training runs, what --predict measures around them, and
 * --mode comm, the same benchmark alone.
 *
 * compare runs single, dp and ddp on the same data; --repeat N runs the
 * whole set N times, each run from scratch (its own warm-up; DDP forks fresh
 * ranks).  The collectives the alpha-beta model needs are measured by
 * --mode comm's benchmark on the run's devices, before anything initialises
 * CUDA in this process (the measurement forks ranks, and CUDA does not
 * survive fork). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "common/comm/comm.h"
#include "common/base/interrupt.h"
#include "ddp/launcher.h"
#include "common/device/backend.h"
#include "common/train/strategy.h"

/* --repeat N re-takes a disturbed run (measure/disturb.h) at most N / RETAKE_SHARE
 * times per mode: a busy machine must not stretch a gate without bound, and
 * a machine busy all along is reported as such (the runs kept say so). */
#define RETAKE_SHARE 2

/* One run with its disturbance record around it (DDP's ranks are reaped
 * inside, so their CPU time and switches are this process's children's). */
static int run_mode(const config_t *c, const dataset_t *d, run_result_t *res, char *err)
{
    disturb_mark_t dm;
    disturb_begin(&dm);
    int rc = strategy_of(c->mode)->run(c, d, res, err);
    /* single computes on one thread (or --threads of OpenBLAS's, one per
     * core of those it may use: dm's, res->machine is not filled yet); DP
     * and DDP run more threads than devices */
    bool own_switching = !strategy_words(c->mode)->reference || c->threads > dm.ncpus;
    disturb_end(&dm, c->ngpus, res->steps, own_switching, &res->machine);
    if (launch_is_rank(c)) {
        /* under mpirun the other ranks are not this process's children: their
         * CPU time would count as other processes'; only the switches judge */
        res->machine.known = false;
        disturb_judge(&res->machine);
    }
    return rc;
}

/* A disturbed run: taken again (retake: which one of at most max) or kept. */
static void disturbed_note(const config_t *c, const run_result_t *r, int run, int retake, int max)
{
    /* compare's one run of each mode: its report says it once, for all */
    if (c->quiet || (c->mode == MODE_COMPARE && c->repeat == 1 && retake == 0))
        return;
    char what[400];
    disturb_describe(&r->machine, what, sizeof what);
    char which[64] = "";
    if (c->repeat > 1)
        snprintf(which, sizeof which, " %d of %d", run + 1, c->repeat);
    if (retake > 0)
        fprintf(stderr, "ddpbench: note: the %s run%s was disturbed (%s): taking it again "
                        "(re-take %d of at most %d)\n",
                mode_name(r->mode), which, what, retake, max);
    else
        fprintf(stderr, "ddpbench: note: the %s run%s was disturbed (%s): %s\n",
                mode_name(r->mode), which, what,
                c->repeat > 1 ? "kept, its re-takes used up; its figures are the busy machine's"
                              : "its figures are the busy machine's; --repeat N re-takes such runs");
}

// ---------------------------------------------------------------------------
// --predict (and compare's predicted column): the alpha-beta model's inputs

/* On the CPU the quickest op of each bench is taken over benches repeated
 * until one more moves no point by more than PREDICT_STILL, at most
 * PREDICT_BENCHES: at load 7 a whole bench came out 2-3x slower than the
 * next at every size (its ranks' threads placed where the load was), so the
 * fits moved 10-80% from run to run (bench/predict_stability.sh). */
#define PREDICT_BENCHES 6
#define PREDICT_STILL 0.05

/* One more bench into p->perf, point by point the quicker; *still when none
 * moved by more than PREDICT_STILL.  The spread of the largest sizes goes
 * into p->in.bench_spread. */
static int more_quickest(predict_t *p, const config_t *c, bool *still, char *err)
{
    static collperf_t more; /* 23 KB: not on the stack */
    TRY(ddp_strategy.comm_bench(c, &more, err));
    *still = true;
    for (int i = 0; i < more.ncoll && i < p->perf.ncoll; i++)
        for (int j = 0; j < more.coll[i].npoints; j++) {
            double *t = p->perf.coll[i].pt[j].time_s, u = more.coll[i].pt[j].time_s[0];
            double lo = fmin(t[0], u), hi = fmax(t[0], u);
            *still = *still && hi <= lo * (1.0 + PREDICT_STILL);
            if (j == more.coll[i].npoints - 1 && lo > 0)
                p->in.bench_spread = fmax(p->in.bench_spread, hi / lo - 1.0);
            t[0] = lo;
        }
    return DDP_OK;
}

/* Measure all-reduce, broadcast and reduce at the sizes the model needs
 * (DDP's buckets up to the whole parameter arena) on the run's devices, or
 * on two CPU workers / GPUs when the run has one. */
static int predict_measure(const config_t *cfg, const model_spec_t *spec, bool full, predict_t *p,
                           char *err)
{
    predict_in_t *in = &p->in;
    TRY(ddp_strategy.collectives(spec, cfg, in->bucket_bytes, PREDICT_MAX_BUCKETS, &in->nbuckets,
                                 err));
    double smallest = 0.0, largest = 0.0;
    for (int i = 0; i < in->nbuckets; i++) {
        double b = in->bucket_bytes[i];
        smallest = i == 0 || b < smallest ? b : smallest;
        largest = b > largest ? b : largest;
    }
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
    /* On the CPU each op alone, the quickest of 100 kept: a busy machine
     * takes a peer off its core during some of them, and the mean of ops
     * back to back moved 5x from run to run at load 8 (docs/results.md) */
    if (c.backend == BACKEND_CPU) {
        c.coll_quickest = true;
        c.iters = 100;
    }
    if (c.ngpus < 2 && launch_is_rank(&c))
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
    TRY(ddp_strategy.comm_bench(&c, &p->perf, err));
    /* Under mpirun every rank runs this on its own timings: a rank that
     * benched again while another had stopped waited for it at the bench's
     * first barrier until the bound (300 s), so there one bench is kept,
     * the same count on every rank. */
    bool still = !c.coll_quickest || launch_is_rank(&c);
    for (in->benches = 1; !still && in->benches < PREDICT_BENCHES; in->benches++)
        TRY(more_quickest(p, &c, &still, err));
    in->k0 = p->perf.world;
    in->all_reduce = collperf_find(&p->perf, COLL_ALL_REDUCE);
    in->broadcast = collperf_find(&p->perf, COLL_BROADCAST);
    in->reduce = collperf_find(&p->perf, COLL_REDUCE);
    return DDP_OK;
}

static int measure_collectives(app_job_t *j, char *err)
{
    if (!j->cfg.quiet && j->reports) {
        fprintf(j->info, "== the collectives%s (--mode comm)\n",
                j->full ? ", for the alpha-beta model" : " at the bucket sizes");
        fflush(j->info);
    }
    int rc = predict_measure(&j->cfg, &j->spec, j->full, &j->pred, err);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "measuring the collectives");
}

/* The model's table, from single's phases per step. */
static void predict_finish(app_job_t *j, const run_result_t *single)
{
    predict_in_t *in = &j->pred.in;
    const config_t *cfg = &j->cfg;
    double steps = single->times.n > 0 ? (double)single->times.n : 1.0;
    for (int q = 0; q < PH_COUNT; q++)
        in->phase_s[q] = single->dev[0].phase_s[q] / steps;
    in->batch = cfg->batch;
    in->accum = cfg->accum;
    in->param_bytes = (double)j->spec.nparams * sizeof(float);
    in->in_bytes_per_row = (double)j->data.in_dim * sizeof(float);
    in->out_bytes_per_row = (double)model_out_dim(&j->spec) * sizeof(float);
    in->overlap = cfg->overlap;
    predict_steps(in, j->pred.rows);
    j->pred.on = true;
}

// ---------------------------------------------------------------------------
// the runs

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

/* --comm-hook: the same DDP run without the hook, first, for the drift:
 * same seed, data and steps; its outputs are the hooked run's alone. */
static int run_hook_reference(app_job_t *j, char *err)
{
    config_t rc = j->cfgs[0];
    rc.comm_hook = HOOK_NONE;
    rc.loss_lines_off = true;
    /* from the start, not from a hooked checkpoint: the plain run of the whole job, as a
     * resumed hooked run ends as the one that never stopped */
    rc.trace_path[0] = rc.save_path[0] = rc.checkpoint_path[0] = rc.resume_path[0] = 0;
    if (!j->cfg.quiet && j->reports) {
        fprintf(j->info, "== ddp without the hook (the reference for the drift)\n");
        fflush(j->info);
    }
    result_init(&j->hook_ref);
    int r = run_mode(&rc, &j->data, &j->hook_ref, err);
    if (r != DDP_OK)
        err_prefix(err, r, "--comm-hook: the plain DDP reference run");
    else if (!j->cfg.quiet && j->reports)
        fprintf(j->info, "== ddp with --comm-hook %s\n", comm_hook_name(j->cfg.comm_hook));
    return r;
}

int app_train(app_job_t *j, char *err)
{
    const config_t *cfg = &j->cfg;
    int rc = DDP_OK;
    /* Which run goes when: on the CPU the modes take turns, repetition by
     * repetition, so a change in the machine's load falls on all of them;
     * on CUDA every DDP repetition comes first (its ranks are forked, and
     * CUDA does not survive fork: single and dp initialise it here).  The
     * reports show the last repetition and, over all of them, medians and
     * intervals (repeat.h). */
    int total = j->n * cfg->repeat;
    int retakes[MAX_RUNS] = {0}, retake_max = cfg->repeat / RETAKE_SHARE;
    if (strategy_words(cfg->mode)->ranks && cfg->comm_hook != HOOK_NONE)
        rc = run_hook_reference(j, err);
    for (int s = 0; s < total && rc == DDP_OK; s++) {
        bool by_mode = cfg->backend == BACKEND_CUDA;
        int k = by_mode ? s / cfg->repeat : s % j->n, r = by_mode ? s % cfg->repeat : s / j->n;
        int i = j->order[k];
        if (r > 0) { /* the reports show the last repetition */
            result_free(&j->res[i]);
            result_init(&j->res[i]);
        }
        if (interrupt_pending()) {
            rc = err_set(err, DDP_ERR_INTERRUPTED, "interrupted by SIG%s before the %s run",
                         sigabbrev_np(interrupt_pending()), mode_name(j->cfgs[i].mode));
            break;
        }
        /* on CUDA, before single or dp initialises CUDA in this process */
        bool ranks = strategy_words(j->cfgs[i].mode)->ranks;
        if (j->measure && cfg->backend == BACKEND_CUDA && !ranks) {
            rc = measure_collectives(j, err);
            j->measure = false;
            if (rc != DDP_OK)
                break;
        }
        if (!j->reports && !ranks)
            continue; /* under mpirun, single is rank 0's alone */
        if ((j->n > 1 || cfg->repeat > 1) && !cfg->quiet && j->reports) {
            fprintf(j->info, "== %s on %d device%s", mode_name(j->cfgs[i].mode), j->cfgs[i].ngpus,
                    j->cfgs[i].ngpus == 1 ? "" : "s");
            if (cfg->repeat > 1)
                fprintf(j->info, " (run %d of %d)", r + 1, cfg->repeat);
            fputc('\n', j->info);
            fflush(j->info);
        }
        rc = run_mode(&j->cfgs[i], &j->data, &j->res[i], err);
        if (rc == DDP_OK)
            rc = check_finite(cfg, &j->spec, &j->res[i], j->n, err);
        else if (j->n > 1)
            err_prefix(err, rc, "--mode compare: the %s run", mode_name(j->cfgs[i].mode));
        if (rc == DDP_OK && j->res[i].machine.disturbed && j->reports) {
            /* under mpirun every rank would have to agree to re-take: kept */
            bool again = retakes[i] < retake_max && !j->mpi;
            disturbed_note(cfg, &j->res[i], r, again ? retakes[i] + 1 : 0, retake_max);
            if (again) { /* the same run once more; the disturbed one is dropped */
                retakes[i]++;
                j->reps[i].retaken++;
                result_free(&j->res[i]);
                result_init(&j->res[i]);
                s--;
                continue;
            }
        }
        if (rc == DDP_OK) {
            repeat_add(&j->reps[i], &j->res[i]);
            if (r == cfg->repeat - 1 && j->reports)
                warmup_note(cfg, &j->res[i]);
        }
    }
    if (rc == DDP_OK && strategy_words(cfg->mode)->ranks && cfg->comm_hook != HOOK_NONE)
        j->res[0].hook_ref = &j->hook_ref; /* the drift's reference (report_hook) */
    return rc;
}

int app_train_follow(app_job_t *j, int rc, char *err)
{
    if (rc == DDP_OK && j->measure) {
        char e[ERR_LEN];
        int mrc = measure_collectives(j, e);
        if (mrc != DDP_OK && j->cfg.predict)
            rc = err_set(err, mrc, "%s", e);
    }
    return rc;
}

int app_predict(app_job_t *j, char *err)
{
    int rc = DDP_OK;
    /* After the outputs, so its failure costs none of them; only --predict
     * needs it, elsewhere a failure is a note. */
    if (j->measure) {
        char e[ERR_LEN];
        int mrc = measure_collectives(j, e);
        if (mrc != DDP_OK && j->cfg.predict)
            return err_set(err, mrc, "%s", e);
        else if (mrc != DDP_OK)
            fprintf(stderr, "ddpbench: note: %s (the report goes without them)\n", e);
        j->full = j->full && mrc == DDP_OK;
    }
    /* the model needs single's phases: the run's own, or one more run */
    if (j->full) {
        if (strategy_words(j->cfgs[0].mode)->reference) {
            predict_finish(j, &j->res[0]);
        } else {
            config_t one;
            app_run_config(&j->cfg, MODE_SINGLE, &one);
            static run_result_t s; /* static: it holds its step statistics */
            result_init(&s);
            if (!j->cfg.quiet)
                fprintf(j->info, "== single on 1 device, for --predict\n");
            rc = run_mode(&one, &j->data, &s, err);
            if (rc == DDP_OK)
                predict_finish(j, &s);
            result_free(&s);
        }
    }
    /* the narrative's latency floor and crossover read the measured collectives */
    if (j->pred.in.all_reduce)
        j->ctx.pred = &j->pred.in;
    /* compare's sentences judge differences on --repeat's intervals */
    for (int i = 0; i < j->n; i++)
        j->rep_of[i] = &j->reps[i];
    j->ctx.reps = j->rep_of;
    return rc;
}

// ---------------------------------------------------------------------------
// --mode comm: the collectives alone (nccl-tests' way), on DDP's ranks

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
