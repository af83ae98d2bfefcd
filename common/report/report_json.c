/* common/report/report_json.c: --json, one object per run (JSON Lines in compare
 * mode), built with cJSON.  The keys are a stable interface for regression
 * tooling: README.md documents them and report_json_keys[] lists every path,
 * which the tests walk.  Add keys freely; rename or remove one only with a
 * new REPORT_SCHEMA_VERSION. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

const char *const report_json_keys[] = {
    "schema_version",
    "tool",
    "config.mode",
    "config.backend",
    "config.devices",
    "config.ndevices",
    "config.model",
    "config.layers",
    "config.act",
    "config.loss",
    "config.optimizer.name",
    "config.optimizer.lr",
    "config.optimizer.momentum",
    "config.optimizer.dampening",
    "config.optimizer.nesterov",
    "config.optimizer.weight_decay",
    "config.optimizer.beta1",
    "config.optimizer.beta2",
    "config.optimizer.eps",
    "config.batch",
    "config.accum",
    "config.epochs",
    "config.steps",
    "config.warmup_steps",
    "config.seed",
    "config.shuffle",
    "config.drop_last",
    "config.threads",
    "config.batch_per_device",
    "config.sampler_replicas",
    "config.rank_samples",
    "config.join",
    "config.data.source",
    "config.data.samples",
    "config.data.features",
    "config.data.target_cols",
    "config.comm",
    "config.launcher",
    "config.bucket_mb",
    "config.first_bucket_mb",
    "config.overlap",
    "config.tf32",
    "config.zero1",
    "config.zero",
    "config.slow_rank",
    "environment.backend",
    "environment.devices",
    "environment.gpus",
    "environment.gpu_peers",
    "environment.cpu_model",
    "environment.cpus_online",
    "environment.os",
    "environment.blas",
    "environment.versions.ddpbench",
    "environment.versions.openblas",
    "environment.versions.cjson",
    "environment.versions.cuda",
    "environment.versions.nccl",
    "environment.versions.mpi",
    "steps.total",
    "steps.warmup",
    "steps.timed",
    "steps.epochs",
    "timed_samples",
    "timed_s",
    "total_s",
    "throughput_samples_per_s",
    "step_time_s.mean",
    "step_time_s.p50",
    "step_time_s.p95",
    "step_time_s.p10",
    "step_time_s.p25",
    "step_time_s.min",
    "step_time_s.max",
    "devices",
    "mem_peak_bytes_max",
    "host_syncs_per_step",
    "final_loss",
    "diverged",
    "train_loss",
    "train_accuracy",
    "checksum.sum",
    "checksum.abs_sum",
    "checksum.bits",
    "compare",
    "repeat",
    "predict",
    "bucket_autotune",
    "buckets",
    "notes",
    "environment.host",
    "environment.time_utc",
    "environment.loadavg",
    "environment.revision",
    "environment.compiler",
    "environment.cflags",
    "environment.blas_threads",
    "environment.versions.cuda_runtime",
    "environment.versions.cuda_driver",
    "environment.versions.cublas",
    "environment.versions.nccl_runtime",
    "machine",
    NULL,
};

// ---------------------------------------------------------------------------
// config

static void add_num_or_null(cJSON *o, const char *k, double v, bool known)
{
    if (known && isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* A float option as the user typed it (0.003, not 0.003000000026077032). */
static double flt(float v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)v);
    return strtod(buf, NULL);
}

cJSON *report_json_config(const report_ctx_t *ctx, const config_t *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "mode", mode_name(c->mode));
    cJSON_AddStringToObject(o, "backend", backend_kind_name(c->backend));
    int ndev = c->mode == MODE_SINGLE ? 1 : c->ngpus;
    cJSON *devs = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; i < ndev; i++)
        cJSON_AddItemToArray(devs, cJSON_CreateNumber(c->gpus[i]));
    cJSON_AddNumberToObject(o, "ndevices", ndev);
    cJSON_AddStringToObject(o, "model", c->model_name[0] ? c->model_name : "custom");
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (int i = 0; i < c->ndims; i++)
        cJSON_AddItemToArray(layers, cJSON_CreateNumber(c->dims[i]));
    cJSON_AddStringToObject(o, "act", act_name(c->act));
    cJSON_AddStringToObject(o, "loss", loss_name(c->loss));
    cJSON *opt = cJSON_AddObjectToObject(o, "optimizer");
    cJSON_AddStringToObject(opt, "name", optim_name(c->optim.kind));
    cJSON_AddNumberToObject(opt, "lr", flt(c->optim.lr));
    cJSON_AddNumberToObject(opt, "momentum", flt(c->optim.momentum));
    cJSON_AddNumberToObject(opt, "dampening", flt(c->optim.dampening));
    cJSON_AddBoolToObject(opt, "nesterov", c->optim.nesterov);
    cJSON_AddNumberToObject(opt, "weight_decay", flt(c->optim.weight_decay));
    cJSON_AddNumberToObject(opt, "beta1", flt(c->optim.beta1));
    cJSON_AddNumberToObject(opt, "beta2", flt(c->optim.beta2));
    cJSON_AddNumberToObject(opt, "eps", flt(c->optim.eps));
    cJSON_AddNumberToObject(o, "batch", c->batch);
    cJSON_AddNumberToObject(o, "accum", c->accum);
    cJSON_AddNumberToObject(o, "epochs", (double)c->epochs);
    cJSON_AddNumberToObject(o, "steps", (double)c->steps);
    cJSON_AddNumberToObject(o, "warmup_steps", (double)c->warmup_steps);
    cJSON_AddNumberToObject(o, "seed", (double)c->seed);
    cJSON_AddBoolToObject(o, "shuffle", c->shuffle);
    cJSON_AddBoolToObject(o, "drop_last", c->drop_last);
    cJSON_AddNumberToObject(o, "threads", c->threads);
    /* the sample stream (data/schedule.h): 0 / null when not given */
    cJSON_AddNumberToObject(o, "batch_per_device", c->batch_per_device);
    cJSON_AddNumberToObject(o, "sampler_replicas", config_stream_ranks(c));
    if (c->nrank_samples) {
        cJSON *rs = cJSON_AddArrayToObject(o, "rank_samples");
        for (int i = 0; i < c->nrank_samples; i++)
            cJSON_AddItemToArray(rs, cJSON_CreateNumber((double)c->rank_samples[i]));
    } else {
        cJSON_AddNullToObject(o, "rank_samples");
    }
    cJSON_AddBoolToObject(o, "join", c->join);
    cJSON *data = cJSON_AddObjectToObject(o, "data");
    const dataset_t *d = ctx ? ctx->data : NULL;
    cJSON_AddStringToObject(data, "source", d ? d->source : "");
    cJSON_AddNumberToObject(data, "samples", d ? (double)d->n : 0.0);
    cJSON_AddNumberToObject(data, "features", d ? d->in_dim : 0);
    cJSON_AddNumberToObject(data, "target_cols", d ? d->tgt_cols : 0);
    cJSON_AddStringToObject(o, "comm", comm_name(c->comm));
    cJSON_AddStringToObject(o, "launcher",
                            launcher_name(c->launcher == LAUNCHER_MPI ? LAUNCHER_MPI : LAUNCHER_FORK));
    cJSON_AddNumberToObject(o, "bucket_mb", c->bucket_mb);
    cJSON_AddNumberToObject(o, "first_bucket_mb", c->first_bucket_mb);
    cJSON_AddBoolToObject(o, "overlap", c->overlap);
    cJSON_AddBoolToObject(o, "tf32", c->tf32);
    cJSON_AddBoolToObject(o, "zero1", c->zero == 1 && c->mode == MODE_DDP);
    cJSON_AddNumberToObject(o, "zero", c->mode == MODE_DDP ? c->zero : 0);
    if (c->slow_rank >= 0 && c->slow_factor > 1 && c->mode == MODE_DDP) {
        cJSON *sr = cJSON_AddObjectToObject(o, "slow_rank");
        cJSON_AddNumberToObject(sr, "rank", c->slow_rank);
        cJSON_AddNumberToObject(sr, "factor", c->slow_factor);
    } else {
        cJSON_AddNullToObject(o, "slow_rank");
    }
    return o;
}

// ---------------------------------------------------------------------------
// the machine while it ran

cJSON *report_json_machine(const disturb_t *d)
{
    if (!d || d->wall_s <= 0.0)
        return cJSON_CreateNull(); /* not taken (a library caller, not the program) */
    cJSON *m = cJSON_CreateObject();
    cJSON_AddBoolToObject(m, "disturbed", d->disturbed);
    if (d->disturbed)
        cJSON_AddStringToObject(m, "why", d->why);
    else
        cJSON_AddNullToObject(m, "why");
    cJSON_AddBoolToObject(m, "proc_stat", d->known);
    cJSON_AddNumberToObject(m, "wall_s", d->wall_s);
    add_num_or_null(m, "loadavg_start", d->load_start, true);
    add_num_or_null(m, "loadavg_end", d->load_end, true);
    cJSON_AddNumberToObject(m, "cpus_online", d->cpus_online);
    cJSON_AddNumberToObject(m, "devices", d->devices);
    cJSON_AddNumberToObject(m, "run_cores", d->run_cores);
    cJSON_AddNumberToObject(m, "own_cpu_s", d->own_cpu_s);
    add_num_or_null(m, "others_cpu_s", d->others_cpu_s, d->known);
    add_num_or_null(m, "others_cores", d->others_cores, d->known);
    add_num_or_null(m, "contention", d->contention, d->known);
    add_num_or_null(m, "steal_s", d->steal_s, d->known);
    add_num_or_null(m, "steal_pct", d->steal_pct, d->known);
    cJSON_AddNumberToObject(m, "involuntary_switches", (double)d->invol_switches);
    cJSON_AddNumberToObject(m, "involuntary_switches_per_step", d->invol_per_step);
    cJSON_AddNumberToObject(m, "involuntary_switches_per_s", d->invol_per_s);
    cJSON *th = cJSON_AddObjectToObject(m, "thresholds");
    cJSON_AddNumberToObject(th, "contention", DISTURB_CONTENTION_MAX);
    cJSON_AddNumberToObject(th, "steal_pct", DISTURB_STEAL_PCT_MAX);
    cJSON_AddNumberToObject(th, "involuntary_switches_per_s", DISTURB_NIVCSW_PER_S_MAX);
    return m;
}

// ---------------------------------------------------------------------------
// one run

cJSON *report_json_run(const report_ctx_t *ctx, const config_t *run_cfg, const run_result_t *r,
                       const run_result_t *ref, bool in_compare)
{
    report_stats_t s;
    report_stats(r, ref, &s);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "schema_version", REPORT_SCHEMA_VERSION);
    cJSON_AddStringToObject(o, "tool", "ddpbench");
    cJSON_AddItemToObject(o, "config", report_json_config(ctx, run_cfg));
    cJSON_AddItemToObject(o, "environment", report_json_env(ctx, r));

    cJSON *st = cJSON_AddObjectToObject(o, "steps");
    cJSON_AddNumberToObject(st, "total", (double)r->steps);
    cJSON_AddNumberToObject(st, "warmup", (double)r->warmup_steps);
    cJSON_AddNumberToObject(st, "timed", (double)r->times.n);
    cJSON_AddNumberToObject(st, "epochs", (double)r->epochs);
    cJSON_AddNumberToObject(o, "timed_samples", (double)r->times.timed_samples);
    cJSON_AddNumberToObject(o, "timed_s", r->times.timed_s);
    cJSON_AddNumberToObject(o, "total_s", r->total_s);
    cJSON_AddNumberToObject(o, "throughput_samples_per_s", r->samples_per_s);
    cJSON *t = cJSON_AddObjectToObject(o, "step_time_s");
    cJSON_AddNumberToObject(t, "mean", s.step_mean);
    cJSON_AddNumberToObject(t, "p50", s.step_p50);
    cJSON_AddNumberToObject(t, "p95", s.step_p95);
    cJSON_AddNumberToObject(t, "p10", s.step_p10);
    cJSON_AddNumberToObject(t, "p25", s.step_p25);
    cJSON_AddNumberToObject(t, "min", s.step_min);
    cJSON_AddNumberToObject(t, "max", s.step_max);

    cJSON *devs = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; i < r->ndev; i++) {
        cJSON *d = cJSON_CreateObject();
        char name[160];
        report_device_name(name, sizeof name, r->backend, &r->dev[i]);
        cJSON_AddNumberToObject(d, "slot", i);
        cJSON_AddNumberToObject(d, "id", r->dev[i].device_id);
        cJSON_AddStringToObject(d, "name", name);
        cJSON_AddNumberToObject(d, "rows_per_step", s.rows_per_step[i]);
        /* DDP counts its ranks' steps; every other device runs every step */
        bool ddp = r->mode == MODE_DDP;
        cJSON_AddNumberToObject(d, "steps_run", ddp ? (double)r->dev[i].steps_run : (double)r->steps);
        cJSON_AddNumberToObject(d, "steps_shadowed", ddp ? (double)r->dev[i].steps_shadowed : 0.0);
        cJSON_AddNumberToObject(d, "mem_peak_bytes", (double)r->dev[i].mem_peak);
        cJSON *ms = cJSON_AddObjectToObject(d, "mem_peak_split");
        for (int k = 0; k < MEM_KINDS; k++)
            cJSON_AddNumberToObject(ms, mem_kind_key((mem_kind_t)k), (double)r->dev[i].mem_split[k]);
        add_num_or_null(d, "host_syncs_per_step", s.host_syncs[i], true);
        cJSON *ph = cJSON_AddObjectToObject(d, "phases_s_per_step");
        for (int p = 0; p < PH_COUNT; p++)
            cJSON_AddNumberToObject(ph, phase_key((phase_t)p), s.phase[i][p]);
        cJSON_AddNumberToObject(d, "phases_sum_s", report_phase_sum(&s, i));
        cJSON_AddItemToArray(devs, d);
    }
    cJSON_AddNumberToObject(o, "mem_peak_bytes_max", (double)s.mem_peak_max);
    /* how often a timed step made the host wait for a device (the most of
     * any device); 0 on the CPU, which never waits */
    add_num_or_null(o, "host_syncs_per_step", s.host_syncs_max, true);
    add_num_or_null(o, "final_loss", r->final_loss, true);
    /* final_loss is null both when it was not computed and when it is NaN or
     * infinite (JSON has no such numbers): "diverged" tells them apart. */
    bool diverged = !isfinite(r->final_loss);
    for (size_t i = 0; r->params && i < r->nparams && !diverged; i++)
        diverged = !isfinite(r->params[i]);
    cJSON_AddBoolToObject(o, "diverged", diverged);
    add_num_or_null(o, "train_loss", r->train_loss, r->train_loss >= 0.0);
    add_num_or_null(o, "train_accuracy", r->train_accuracy, r->train_accuracy >= 0.0);
    cJSON *ck = cJSON_AddObjectToObject(o, "checksum");
    cJSON_AddNumberToObject(ck, "sum", r->checksum.sum);
    cJSON_AddNumberToObject(ck, "abs_sum", r->checksum.abs_sum);
    char bits[24];
    snprintf(bits, sizeof bits, "%016llx", (unsigned long long)r->checksum.bits);
    cJSON_AddStringToObject(ck, "bits", bits);

    if (in_compare) {
        cJSON *cmp = cJSON_AddObjectToObject(o, "compare");
        bool self = ref == r;
        add_num_or_null(cmp, "speedup_vs_single", self ? 1.0 : s.speedup, self || s.has_ref);
        add_num_or_null(cmp, "scaling_efficiency", self ? 1.0 : s.efficiency, self || s.has_ref);
        cJSON *pv = cJSON_AddObjectToObject(cmp, "params_vs_single");
        bool known = self || s.params_compared;
        add_num_or_null(pv, "max_rel_diff", self ? 0.0 : s.max_rel, known);
        add_num_or_null(pv, "rel_l2", self ? 0.0 : s.rel_l2, known);
        if (known)
            cJSON_AddBoolToObject(pv, "agree", self || s.agree);
        else
            cJSON_AddNullToObject(pv, "agree");
    } else {
        cJSON_AddNullToObject(o, "compare");
    }
    cJSON_AddNullToObject(o, "repeat"); /* --repeat N: main replaces it (report_json_repeat) */
    cJSON_AddNullToObject(o, "predict"); /* --predict and compare: main replaces it */
    /* main replaces it with --mode comm's figures at the same sizes */
    cJSON_AddItemToObject(o, "buckets", report_json_buckets(r, NULL, run_cfg && run_cfg->zero));
    if (r->ntuned > 0) {
        cJSON *bt = cJSON_AddObjectToObject(o, "bucket_autotune");
        cJSON_AddNumberToObject(bt, "chosen_mb", r->bucket_mb_chosen);
        cJSON *tried = cJSON_AddArrayToObject(bt, "tried");
        for (int i = 0; i < r->ntuned && i < RESULT_TUNE_MAX; i++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "mb", r->tuned_mb[i]);
            cJSON_AddNumberToObject(t, "step_s", r->tuned_s[i] / (r->ndev > 0 ? r->ndev : 1));
            cJSON_AddItemToArray(tried, t);
        }
    } else {
        cJSON_AddNullToObject(o, "bucket_autotune");
    }
    cJSON_AddItemToObject(o, "machine", report_json_machine(&r->machine));
    char notes[4][256];
    int nn = report_notes_of(ctx, r, notes, 4);
    cJSON *na = cJSON_AddArrayToObject(o, "notes");
    for (int i = 0; i < nn; i++)
        cJSON_AddItemToArray(na, cJSON_CreateString(notes[i]));
    return o;
}

int report_json_print(FILE *f, const cJSON *obj)
{
    char *txt = obj ? cJSON_PrintUnformatted(obj) : NULL;
    if (!txt)
        return DDP_ERR_RUNTIME;
    fputs(txt, f);
    fputc('\n', f);
    cJSON_free(txt);
    return fflush(f) == 0 ? DDP_OK : DDP_ERR_RUNTIME;
}
