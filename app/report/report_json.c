/* app/report/report_json.c: --json, one object per run (JSON Lines in compare
 * mode).  The keys are a stable interface (docs/results.md; report_json_keys()
 * lists them for the tests): rename or remove one only with a new
 * REPORT_SCHEMA_VERSION. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/fields.h"
#include "app/report/report.h"

/* The key paths a run object carries besides the options'. */
static const char *const other_keys[] = {
    "schema_version",
    "tool",
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
    "launches_per_step",
    "launch_split_per_step",
    "work_cpu_s",
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
    "comm_hook",
    "replicas",
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
};
#define NOTHER ((int)(sizeof other_keys / sizeof *other_keys))

/* Keys under "config" that no row names, built beside the row they follow. */
static const char *const config_extra[][2] = {
    {"ndevices", "devices"}, {"cuda_graph_refused", "cuda_graph"}, {"data.features", "data.samples"}};

const char *const *report_json_keys(void)
{
    static char config[2 * 128][48];
    static const char *keys[2 * 128 + NOTHER + 1];
    if (keys[0])
        return keys;
    int n = 0, nc = 0;
    keys[n++] = other_keys[0]; /* schema_version, tool: first, as in the object */
    keys[n++] = other_keys[1];
    for (int i = 0; i < config_fields(); i++) {
        const char *k = config_field_derive(i)->json;
        bool seen = false;
        for (int j = 2; k && j < n; j++)
            seen = seen || strcmp(keys[j] + 7, k) == 0;
        if (!k || seen || nc >= 2 * 128 - 4)
            continue;
        snprintf(config[nc], sizeof config[nc], "config.%s", k);
        keys[n++] = config[nc++];
        for (size_t e = 0; e < sizeof config_extra / sizeof *config_extra; e++)
            if (strcmp(k, config_extra[e][1]) == 0) {
                snprintf(config[nc], sizeof config[nc], "config.%s", config_extra[e][0]);
                keys[n++] = config[nc++];
            }
    }
    for (int i = 2; i < NOTHER; i++)
        keys[n++] = other_keys[i];
    keys[n] = NULL;
    return keys;
}

// ---------------------------------------------------------------------------
// config

void report_json_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void add_num_or_null(cJSON *o, const char *k, double v, bool known)
{
    report_json_num(o, k, known ? v : NAN);
}

/* launches_per_step and its split by kind of device d (d < 0: nulls). */
static void add_launches(cJSON *o, const report_stats_t *s, int d)
{
    add_num_or_null(o, "launches_per_step", d >= 0 ? s->launches[d] : NAN, d >= 0);
    if (d < 0) {
        cJSON_AddNullToObject(o, "launch_split_per_step");
        return;
    }
    cJSON *k = cJSON_AddObjectToObject(o, "launch_split_per_step");
    for (int i = 0; i < LAUNCH_KINDS; i++)
        add_num_or_null(k, launch_kind_key((launch_kind_t)i), s->launch_split[d][i], true);
}

/* work_cpu_s: {mean, p10, p25, p50}, or null where not measured (a GPU) */
static void add_work(cJSON *o, const double q[4])
{
    if (!isfinite(q[0])) {
        cJSON_AddNullToObject(o, "work_cpu_s");
        return;
    }
    cJSON *w = cJSON_AddObjectToObject(o, "work_cpu_s");
    static const char *const key[4] = {"mean", "p10", "p25", "p50"};
    for (int k = 0; k < 4; k++)
        cJSON_AddNumberToObject(w, key[k], q[k]);
}

/* Row i's value under "config" at its key ("optimizer.lr": in "optimizer"). */
static void add_row(cJSON *o, const char *key, const config_value_t *v)
{
    const char *dot = strchr(key, '.');
    if (dot) {
        char parent[64];
        snprintf(parent, sizeof parent, "%.*s", (int)(dot - key), key);
        cJSON *sub = cJSON_GetObjectItemCaseSensitive(o, parent);
        if (!sub)
            sub = cJSON_AddObjectToObject(o, parent);
        add_row(sub, dot + 1, v);
        return;
    }
    switch (v->type) {
    case CV_BOOL:
        cJSON_AddBoolToObject(o, key, v->b);
        return;
    case CV_INT:
        cJSON_AddNumberToObject(o, key, (double)v->i);
        return;
    case CV_UINT:
        cJSON_AddNumberToObject(o, key, (double)v->u);
        return;
    case CV_FLOAT: { /* as the user typed it (0.003, not 0.003000000026077032) */
        char buf[32];
        snprintf(buf, sizeof buf, "%.7g", (double)v->f);
        cJSON_AddNumberToObject(o, key, strtod(buf, NULL));
        return;
    }
    case CV_DOUBLE:
        cJSON_AddNumberToObject(o, key, v->d);
        return;
    case CV_STR:
        cJSON_AddStringToObject(o, key, v->s ? v->s : "");
        return;
    case CV_LIST:
        if (v->n == 0) { /* none given */
            cJSON_AddNullToObject(o, key);
            return;
        }
        cJSON *a = cJSON_AddArrayToObject(o, key);
        for (int i = 0; i < v->n; i++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v->list[i]));
        return;
    case CV_NONE:
        cJSON_AddNullToObject(o, key);
        return;
    }
}

/* Where path (or the first key under it) stands in report_json_keys(). */
static int key_rank(const char *path)
{
    size_t n = strlen(path);
    const char *const *keys = report_json_keys();
    for (int i = 0; keys[i]; i++)
        if (strncmp(keys[i], path, n) == 0 && (keys[i][n] == 0 || keys[i][n] == '.'))
            return i;
    return 1 << 20; /* not documented yet: last, in the rows' order */
}

/* o's members (and theirs) in report_json_keys()'s order; prefix is o's path. */
static void keep_documented_order(cJSON *o, const char *prefix)
{
    cJSON *items[128];
    int rank[128], n = 0;
    while (o->child && n < 128) {
        cJSON *it = cJSON_DetachItemViaPointer(o, o->child);
        char path[128];
        snprintf(path, sizeof path, "%s.%s", prefix, it->string);
        if (cJSON_IsObject(it))
            keep_documented_order(it, path);
        items[n] = it;
        rank[n++] = key_rank(path);
    }
    for (int i = 1; i < n; i++) /* stable: equal ranks keep the rows' order */
        for (int k = i; k > 0 && rank[k - 1] > rank[k]; k--) {
            cJSON *t = items[k];
            items[k] = items[k - 1];
            items[k - 1] = t;
            int r = rank[k];
            rank[k] = rank[k - 1];
            rank[k - 1] = r;
        }
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(o, items[i]); /* an object's members are a list: names kept */
}

cJSON *report_json_config(const report_ctx_t *ctx, const config_t *c, const run_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    /* every row echoed as its value (fields.h) */
    for (int i = 0; i < config_fields(); i++) {
        const config_derive_t *d = config_field_derive(i);
        if (d->jsonv != J_VALUE)
            continue;
        config_value_t v;
        config_field_value(c, i, &v);
        add_row(o, d->json, &v);
    }
    /* the keys that join several fields (J_DERIVED rows) */
    int ndev = strategy_words(c->mode)->reference ? 1 : c->ngpus;
    cJSON *devs = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; i < ndev; i++)
        cJSON_AddItemToArray(devs, cJSON_CreateNumber(c->gpus[i]));
    cJSON_AddNumberToObject(o, "ndevices", ndev);
    cJSON_AddStringToObject(o, "model", c->model_name[0] ? c->model_name : "custom");
    cJSON *data = cJSON_AddObjectToObject(o, "data");
    const dataset_t *d = ctx ? ctx->data : NULL;
    cJSON_AddStringToObject(data, "source", d ? d->source : "");
    cJSON_AddNumberToObject(data, "samples", d ? (double)d->n : 0.0);
    cJSON_AddNumberToObject(data, "features", d ? d->in_dim : 0);
    cJSON_AddNumberToObject(data, "target_cols", d ? d->tgt_cols : 0);
    cJSON_AddStringToObject(o, "launcher",
                            launcher_name(c->launcher == LAUNCHER_MPI ? LAUNCHER_MPI : LAUNCHER_FORK));
    /* "on" only where this run's steps were replayed as graphs (else why not) */
    bool refused = r && r->graph_refused[0];
    cJSON_AddStringToObject(o, "cuda_graph",
                            config_graphs_on(c, c->mode) && !refused ? "on" : "off");
    report_json_str(o, "cuda_graph_refused", refused ? r->graph_refused : NULL);
    cJSON_AddBoolToObject(o, "tf32", c->precision == PREC_TF32); /* --precision's, for older readers */
    bool ranks = strategy_words(c->mode)->ranks;
    cJSON_AddBoolToObject(o, "zero1", c->zero == 1 && ranks);
    cJSON_AddNumberToObject(o, "zero", ranks ? c->zero : 0);
    char hook[48];
    config_comm_hook_text(c, hook, sizeof hook);
    cJSON_AddStringToObject(o, "comm_hook", ranks ? hook : "none");
    if (c->slow_rank >= 0 && c->slow_factor > 1 && ranks) {
        cJSON *sr = cJSON_AddObjectToObject(o, "slow_rank");
        cJSON_AddNumberToObject(sr, "rank", c->slow_rank);
        cJSON_AddNumberToObject(sr, "factor", c->slow_factor);
    } else {
        cJSON_AddNullToObject(o, "slow_rank");
    }
    keep_documented_order(o, "config");
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
    report_json_str(m, "why", d->disturbed ? d->why : NULL);
    cJSON_AddBoolToObject(m, "proc_stat", d->known);
    cJSON_AddNumberToObject(m, "wall_s", d->wall_s);
    add_num_or_null(m, "loadavg_start", d->load_start, true);
    add_num_or_null(m, "loadavg_end", d->load_end, true);
    cJSON_AddNumberToObject(m, "cpus_online", d->cpus_online);
    cJSON_AddNumberToObject(m, "cpus_allowed",
                            d->cpus_allowed > 0 ? d->cpus_allowed : d->cpus_online);
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
    /* false for DP and DDP: their own threads preempt each other */
    cJSON_AddBoolToObject(m, "involuntary_switches_judged", !d->own_switching);
    cJSON *th = cJSON_AddObjectToObject(m, "thresholds");
    cJSON_AddNumberToObject(th, "contention", DISTURB_CONTENTION_MAX);
    cJSON_AddNumberToObject(th, "steal_pct", DISTURB_STEAL_PCT_MAX);
    cJSON_AddNumberToObject(th, "involuntary_switches_per_s", DISTURB_NIVCSW_PER_S_MAX);
    return m;
}

// ---------------------------------------------------------------------------
// one run

/* Device slot i of run r, its figures s. */
static cJSON *json_device(const run_result_t *r, const report_stats_t *s, int i)
{
    cJSON *d = cJSON_CreateObject();
    char name[160];
    report_device_name(name, sizeof name, r->backend, &r->dev[i]);
    cJSON_AddNumberToObject(d, "slot", i);
    cJSON_AddNumberToObject(d, "id", r->dev[i].device_id);
    cJSON_AddStringToObject(d, "name", name);
    cJSON_AddNumberToObject(d, "rows_per_step", s->rows_per_step[i]);
    /* DDP counts its ranks' steps; every other device runs every step */
    bool ddp = strategy_words(r->mode)->ranks;
    cJSON_AddNumberToObject(d, "steps_run", ddp ? (double)r->dev[i].steps_run : (double)r->steps);
    cJSON_AddNumberToObject(d, "steps_shadowed", ddp ? (double)r->dev[i].steps_shadowed : 0.0);
    cJSON_AddNumberToObject(d, "mem_peak_bytes", (double)r->dev[i].mem_peak);
    cJSON *ms = cJSON_AddObjectToObject(d, "mem_peak_split");
    for (int k = 0; k < MEM_KINDS; k++)
        cJSON_AddNumberToObject(ms, mem_kind_key((mem_kind_t)k), (double)r->dev[i].mem_split[k]);
    add_num_or_null(d, "host_syncs_per_step", s->host_syncs[i], true);
    add_launches(d, s, i);
    add_work(d, s->work_cpu[i]);
    cJSON *ph = cJSON_AddObjectToObject(d, "phases_s_per_step");
    for (int p = 0; p < PH_COUNT; p++)
        cJSON_AddNumberToObject(ph, phase_key((phase_t)p), s->phase[i][p]);
    cJSON_AddNumberToObject(d, "phases_sum_s", report_phase_sum(s, i));
    /* how far from the device (docs/results.md): null where unknown */
    report_json_num(d, "flops_per_s", s->flops[i]);
    report_json_num(d, "peak_flops_per_s", r->dev[i].peak_flops > 0.0 ? r->dev[i].peak_flops : NAN);
    report_json_num(d, "peak_share", s->share[i]);
    return d;
}

/* compare's figures against single (ref; null outside compare). */
static void json_compare(cJSON *o, const run_result_t *r, const run_result_t *ref,
                         const report_stats_t *s, bool in_compare)
{
    if (!in_compare) {
        cJSON_AddNullToObject(o, "compare");
        return;
    }
    cJSON *cmp = cJSON_AddObjectToObject(o, "compare");
    bool self = ref == r;
    add_num_or_null(cmp, "speedup_vs_single", self ? 1.0 : s->speedup, self || s->has_ref);
    add_num_or_null(cmp, "scaling_efficiency", self ? 1.0 : s->efficiency, self || s->has_ref);
    cJSON *pv = cJSON_AddObjectToObject(cmp, "params_vs_single");
    bool known = self || s->params_compared;
    add_num_or_null(pv, "max_rel_diff", self ? 0.0 : s->max_rel, known);
    add_num_or_null(pv, "rel_l2", self ? 0.0 : s->rel_l2, known);
    if (known)
        cJSON_AddBoolToObject(pv, "agree", self || s->agree);
    else
        cJSON_AddNullToObject(pv, "agree");
}

/* --bucket-mb auto: the caps tried and the one chosen (null otherwise). */
static void json_autotune(cJSON *o, const run_result_t *r)
{
    if (r->ntuned <= 0) {
        cJSON_AddNullToObject(o, "bucket_autotune");
        return;
    }
    cJSON *bt = cJSON_AddObjectToObject(o, "bucket_autotune");
    cJSON_AddNumberToObject(bt, "chosen_mb", r->bucket_mb_chosen);
    cJSON *tried = cJSON_AddArrayToObject(bt, "tried");
    for (int i = 0; i < r->ntuned && i < RESULT_TUNE_MAX; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "mb", r->tuned_mb[i]);
        cJSON_AddNumberToObject(t, "step_s", r->tuned_s[i] / (r->ndev > 0 ? r->ndev : 1));
        cJSON_AddItemToArray(tried, t);
    }
}

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
    cJSON_AddItemToObject(o, "config", report_json_config(ctx, run_cfg, r));
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
    static const char *const tk[] = {"mean", "p50", "p95", "p10", "p25", "min", "max"};
    const double tv[] = {s.step_mean, s.step_p50, s.step_p95, s.step_p10, s.step_p25, s.step_min,
                         s.step_max};
    for (int k = 0; k < 7; k++)
        cJSON_AddNumberToObject(t, tk[k], tv[k]);

    cJSON *devs = cJSON_AddArrayToObject(o, "devices");
    for (int i = 0; i < r->ndev; i++)
        cJSON_AddItemToArray(devs, json_device(r, &s, i));
    cJSON_AddNumberToObject(o, "mem_peak_bytes_max", (double)s.mem_peak_max);
    report_json_num(o, "flops_per_s", s.flops_all); /* every device's, and of their peaks */
    report_json_num(o, "peak_share", s.share_all);
    /* host waits per timed step, the most of any device (0 on the CPU) */
    add_num_or_null(o, "host_syncs_per_step", s.host_syncs_max, true);
    /* what the busiest device queued per timed step (counted in the backend) */
    add_launches(o, &s, s.launches_max_dev);
    /* the CPU seconds of work per step, the most of any device (docs/gate.md) */
    add_work(o, s.work_cpu_max);
    add_num_or_null(o, "final_loss", r->final_loss, true);
    /* final_loss is null when not computed or not finite: "diverged" tells which */
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

    json_compare(o, r, ref, &s, in_compare);
    cJSON_AddNullToObject(o, "repeat"); /* --repeat N: main replaces it (report_json_repeat) */
    cJSON_AddNullToObject(o, "predict"); /* --predict and compare: main replaces it */
    /* main replaces it with --mode comm's figures at the same sizes */
    cJSON_AddItemToObject(o, "buckets", report_json_buckets(r, NULL, run_cfg && run_cfg->zero));
    cJSON_AddItemToObject(o, "comm_hook", run_cfg ? report_json_hook(run_cfg, r)
                                                  : cJSON_CreateNull());
    json_autotune(o, r);
    const replica_rec_t *rp = &r->replicas; /* --check-replicas: null when off */
    cJSON *rj = rp->checks ? cJSON_AddObjectToObject(o, "replicas") : NULL;
    if (!rj)
        cJSON_AddNullToObject(o, "replicas");
    else {
        cJSON_AddNumberToObject(rj, "checks", (double)rp->checks);
        cJSON_AddNumberToObject(rj, "check_s", rp->seconds / (double)rp->checks);
        cJSON_AddBoolToObject(rj, "differed", rp->differed);
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
