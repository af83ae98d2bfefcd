/* gate/baseline.c: --baseline FILE --tolerance PCT, the stored-baseline gate
 * (gate.h).  FILE is an earlier --json result (one object, or JSON Lines),
 * treated as hostile: bounded, parsed, every key used typed and in range.
 * Another configuration is refused naming the field; another machine or
 * other settings only warn.  The verdict's rules: docs/gate.md, "--baseline". */
#include "gate/gate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/infile.h"
#include "common/base/text.h"
#include "common/config/fields.h"

/* A run's identity (paths under "config"): each option row says whether its
 * echoed key must match or only warns (config/fields.h); joined keys say it here. */
static const struct {
    const char *path;
    cf_base_t base;
} derived_identity[] = {{"ndevices", B_MATCH}, {"data.features", B_WARN}};
#define MAX_IDENTITY 96

/* The paths of one kind (B_MATCH or B_WARN), rows first, each once. */
static int identity(cf_base_t kind, const char **out)
{
    int n = 0;
    for (int i = 0; i < config_fields(); i++) {
        const config_derive_t *d = config_field_derive(i);
        if (d->base != kind || !d->json)
            continue;
        bool seen = false;
        for (int k = 0; k < n; k++)
            seen = seen || strcmp(out[k], d->json) == 0;
        if (!seen && n < MAX_IDENTITY)
            out[n++] = d->json;
    }
    for (size_t i = 0; i < sizeof derived_identity / sizeof *derived_identity; i++)
        if (derived_identity[i].base == kind && n < MAX_IDENTITY)
            out[n++] = derived_identity[i].path;
    return n;
}

/* What may differ, with a warning: another machine or build (under "environment"). */
static const char *const other_machine[] = {
    "host", "cpu_model", "cpus_online", "os", "blas", "gpus", "gpu_peers", "compiler", "cflags",
    "versions.openblas", "versions.cuda", "versions.nccl", "versions.cuda_runtime",
    "versions.cuda_driver", "versions.cublas", "versions.nccl_runtime"};

static void short_json(char *out, size_t n, const cJSON *v);

/* --precision is the configuration too (bf16's step is several times fp32's
 * on a GPU), checked here rather than by its row (B_NO there): a baseline
 * written before the key existed ran fp32, or tf32 when its "tf32" is true. */
static const char *precision_of(const cJSON *cfg)
{
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "precision"));
    if (p)
        return p;
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "tf32")) ? "tf32" : "fp32";
}

/* Item at a dot-separated path under o (NULL when absent). */
static const cJSON *at(const cJSON *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
        cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, k) : NULL;
    return cur;
}

// ---------------------------------------------------------------------------
// reading the file

/* The figures the verdict reads, checked before any training (a bad one
 * found after it would cost the run), naming the field. */
typedef enum { NUM_ANY, NUM_NONNEG, NUM_POS, NUM_TIME, NUM_RATE, NUM_COUNT, NUM_BYTES } num_rule_t;

static int bad_field(const char *path, int idx, const char *field, const cJSON *it,
                     const char *want, char *err)
{
    char shown[64];
    short_json(shown, sizeof shown, it);
    return err_set(err, DDP_ERR_INPUT, "--baseline %s: object %d: %s is %s, not %s", path, idx + 1,
                   field, shown, want);
}

/* A number at field under o (absent: fine unless required). */
static int check_num(const char *path, int idx, const cJSON *o, const char *prefix,
                     const char *key, num_rule_t rule, bool required, char *err)
{
    char field[160];
    snprintf(field, sizeof field, "%s%s", prefix, key);
    const cJSON *it = at(o, key);
    if (!it)
        return required ? err_set(err, DDP_ERR_INPUT, "--baseline %s: object %d: %s is missing",
                                  path, idx + 1, field)
                        : DDP_OK;
    /* bounds that keep every ratio of two figures finite (a p50 of 1e-308 s is no run's) */
    static const char *const want[] = {
        "a number", "a number >= 0", "a number > 0", "a time from 1e-09 to 1e+09 s",
        "a rate from 1e-30 to 1e+30 a second", "a whole number from 1 to 2^53",
        "a byte count, 0 or from 1 to 2^53"};
    static const double lo[] = {-INFINITY, 0, 0, GATE_TIME_MIN_S, 1e-30, 1, 0},
                        hi[] = {INFINITY, INFINITY, INFINITY, GATE_TIME_MAX_S, 1e30, 0x1p53,
                                0x1p53};
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    if (!isfinite(v) || v < lo[rule] || v > hi[rule] || (rule == NUM_POS && v == 0) ||
        (rule == NUM_COUNT && v != floor(v)) || (rule == NUM_BYTES && v > 0 && v < 1))
        return bad_field(path, idx, field, it, want[rule], err);
    return DDP_OK;
}

/* An interval object {"median","mean","lo","hi"} of the repeat: mean by rule, lo <= hi
 * numbers or null; a rate's ends by its rule too (or 0: none): the verdict divides by them. */
static int check_interval(const char *path, int idx, const cJSON *rep, const char *key,
                          num_rule_t rule, bool required, char *err)
{
    char field[160];
    snprintf(field, sizeof field, "repeat.%s", key);
    const cJSON *iv = at(rep, key);
    if (!iv) /* missing: an error when required */
        return check_num(path, idx, rep, "repeat.", key, NUM_ANY, required, err);
    if (!cJSON_IsObject(iv))
        return bad_field(path, idx, field, iv, "an object", err);
    char pre[170];
    snprintf(pre, sizeof pre, "%s.", field);
    TRY(check_num(path, idx, iv, pre, "mean", rule, true, err));
    const char *ends[] = {"lo", "hi"};
    for (int i = 0; i < 2; i++) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(iv, ends[i]);
        if (!e || cJSON_IsNull(e))
            continue;
        if (rule != NUM_RATE)
            TRY(check_num(path, idx, iv, pre, ends[i], NUM_ANY, false, err));
        else if (!cJSON_IsNumber(e) || e->valuedouble != 0.0) /* 0: none, as null (tp_pair) */
            TRY(check_num(path, idx, iv, pre, ends[i], NUM_RATE, false, err));
    }
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(iv, "lo"),
                *hi = cJSON_GetObjectItemCaseSensitive(iv, "hi");
    if (cJSON_IsNumber(lo) && cJSON_IsNumber(hi) && lo->valuedouble > hi->valuedouble)
        return err_set(err, DDP_ERR_INPUT, "--baseline %s: object %d: %s: lo %g is above hi %g",
                       path, idx + 1, field, lo->valuedouble, hi->valuedouble);
    return DDP_OK;
}

static int check_gate_fields(const char *path, int idx, const cJSON *o, char *err)
{
    /* at() finds nothing under a key that is not an object: a dotted path is absent there */
    const cJSON *st = at(o, "step_time_s");
    if (st && !cJSON_IsObject(st))
        return bad_field(path, idx, "step_time_s", st, "an object", err);
    TRY(check_num(path, idx, o, "", "step_time_s.mean", NUM_TIME, false, err));
    TRY(check_num(path, idx, o, "", "step_time_s.p50", NUM_TIME, false, err));
    TRY(check_num(path, idx, o, "", "timed_samples", NUM_COUNT, false, err));
    TRY(check_num(path, idx, o, "", "steps.timed", NUM_COUNT, false, err));
    TRY(check_num(path, idx, o, "", "mem_peak_bytes_max", NUM_BYTES, false, err));
    const cJSON *work = at(o, "work_cpu_s");
    if (work && !cJSON_IsNull(work) && !cJSON_IsObject(work))
        return bad_field(path, idx, "work_cpu_s", work, "an object or null", err);
    TRY(check_num(path, idx, o, "", "work_cpu_s.p10", NUM_TIME, false, err));
    const cJSON *devs = at(o, "devices"), *d;
    if (devs && !cJSON_IsArray(devs))
        return bad_field(path, idx, "devices", devs, "an array", err);
    int di = 0;
    cJSON_ArrayForEach(d, devs)
    {
        char pre[64];
        snprintf(pre, sizeof pre, "devices[%d].", di++);
        const cJSON *ph = cJSON_IsObject(d) ? at(d, "phases_s_per_step") : NULL;
        if (!cJSON_IsObject(d) || (ph && !cJSON_IsObject(ph)))
            return bad_field(path, idx, pre, d, "an object with phases_s_per_step", err);
        for (int p = 0; ph && p < PH_COUNT; p++) {
            char ppre[96];
            snprintf(ppre, sizeof ppre, "%sphases_s_per_step.", pre);
            TRY(check_num(path, idx, ph, ppre, phase_key((phase_t)p), NUM_ANY, false, err));
        }
    }
    const cJSON *mach = at(o, "machine");
    if (mach && !cJSON_IsNull(mach)) {
        if (!cJSON_IsObject(mach))
            return bad_field(path, idx, "machine", mach, "an object or null", err);
        const cJSON *dist = at(mach, "disturbed");
        if (dist && !cJSON_IsBool(dist))
            return bad_field(path, idx, "machine.disturbed", dist, "true or false", err);
    }
    const cJSON *rep = at(o, "repeat");
    if (!rep || cJSON_IsNull(rep))
        return DDP_OK;
    if (!cJSON_IsObject(rep))
        return bad_field(path, idx, "repeat", rep, "an object or null", err);
    TRY(check_num(path, idx, rep, "repeat.", "runs", NUM_POS, true, err));
    double runs = at(rep, "runs")->valuedouble;
    if (runs != floor(runs) || runs < 2 || runs > REPEAT_MAX)
        return bad_field(path, idx, "repeat.runs", at(rep, "runs"), "a whole number 2..100", err);
    TRY(check_interval(path, idx, rep, "throughput_samples_per_s", NUM_RATE, true, err));
    TRY(check_interval(path, idx, rep, "median_throughput_samples_per_s", NUM_RATE, false, err));
    TRY(check_interval(path, idx, rep, "step_time_s_mean", NUM_TIME, false, err));
    TRY(check_interval(path, idx, rep, "mem_peak_bytes_max", NUM_BYTES, false, err));
    const cJSON *rph = at(rep, "phases_s_per_step");
    if (rph && !cJSON_IsObject(rph))
        return bad_field(path, idx, "repeat.phases_s_per_step", rph, "an object", err);
    for (int p = 0; rph && p < PH_COUNT; p++) {
        char key[96];
        snprintf(key, sizeof key, "phases_s_per_step.%s", phase_key((phase_t)p));
        TRY(check_interval(path, idx, rep, key, NUM_ANY, false, err));
    }
    TRY(check_num(path, idx, rep, "repeat.", "disturbed_runs", NUM_NONNEG, false, err));
    const cJSON *every = at(rep, "every_run"), *e;
    if (every && !cJSON_IsArray(every))
        return bad_field(path, idx, "repeat.every_run", every, "an array", err);
    int ei = 0;
    cJSON_ArrayForEach(e, every)
    {
        char pre[64];
        snprintf(pre, sizeof pre, "repeat.every_run[%d].", ei++);
        if (!cJSON_IsObject(e))
            return bad_field(path, idx, pre, e, "an object", err);
        const cJSON *wk = at(e, "work_cpu_s_p10");
        if (wk && !cJSON_IsNull(wk))
            TRY(check_num(path, idx, e, pre, "work_cpu_s_p10", NUM_TIME, false, err));
    }
    return DDP_OK;
}

/* Every key this gate reads, with its type. */
static int check_run(const char *path, int idx, const cJSON *o, char *err)
{
    const cJSON *v = at(o, "schema_version");
    if (!cJSON_IsNumber(v))
        return err_set(err, DDP_ERR_INPUT,
                       "--baseline %s: object %d has no schema_version: not a ddpbench --json "
                       "result",
                       path, idx + 1);
    if (v->valuedouble > REPORT_SCHEMA_VERSION || v->valuedouble < 1)
        return err_set(err, DDP_ERR_INPUT,
                       "--baseline %s: schema_version %g; this ddpbench reads version %d", path,
                       v->valuedouble, REPORT_SCHEMA_VERSION);
    static const struct {
        const char *path;
        int type; /* cJSON_String, cJSON_Number, cJSON_Array */
    } need[] = {{"config.mode", cJSON_String},   {"config.backend", cJSON_String},
                {"config.ndevices", cJSON_Number}, {"config.layers", cJSON_Array},
                {"config.batch", cJSON_Number},  {"config.accum", cJSON_Number},
                {"config.loss", cJSON_String},   {"config.optimizer.name", cJSON_String},
                {"throughput_samples_per_s", cJSON_Number}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        const cJSON *it = at(o, need[i].path);
        if (!it || (it->type & 0xff) != need[i].type)
            return err_set(err, DDP_ERR_INPUT, "--baseline %s: object %d: %s %s", path, idx + 1,
                           need[i].path, it ? "has the wrong type" : "is missing");
    }
    TRY(check_num(path, idx, o, "", "throughput_samples_per_s", NUM_RATE, true, err));
    return check_gate_fields(path, idx, o, err);
}

int baseline_load(baseline_t *b, const char *path, char *err)
{
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", path);
    char *buf = NULL;
    size_t len = 0;
    int rc = infile_read(path, BASELINE_MAX_BYTES, &buf, &len, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "--baseline %s", path);
    const char *p = buf, *end = buf + len;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
            p++;
        if (p >= end)
            break;
        if (b->nrun == BASELINE_MAX_RUNS) {
            rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: more than %d results in one file",
                         path, BASELINE_MAX_RUNS);
            break;
        }
        const char *stop = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &stop, false);
        if (!o) {
            long at_byte = stop && stop >= buf && stop <= end ? (long)(stop - buf) : (long)(p - buf);
            rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: not valid JSON (near byte %ld)", path,
                         at_byte);
            break;
        }
        b->run[b->nrun++] = o;
        if (!cJSON_IsObject(o)) {
            rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: expected a JSON object, found %s",
                         path, cJSON_IsArray(o) ? "an array" : "a bare value");
            break;
        }
        if ((rc = check_run(path, b->nrun - 1, o, err)) != DDP_OK)
            break;
        p = stop;
    }
    free(buf);
    if (rc == DDP_OK && b->nrun == 0)
        rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: empty file", path);
    if (rc != DDP_OK)
        baseline_free(b);
    return rc;
}

void baseline_free(baseline_t *b)
{
    for (int i = 0; i < b->nrun; i++)
        cJSON_Delete(b->run[i]);
    b->nrun = 0;
}

// ---------------------------------------------------------------------------
// matching and the verdict

static void short_json(char *out, size_t n, const cJSON *v)
{
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(out, n, "%s", t ? t : "missing");
    if (t && strlen(t) >= n && n > 4)
        memcpy(out + n - 4, "...", 4);
    cJSON_free(t);
}

int baseline_match(const baseline_t *b, const cJSON *run_config, const cJSON **match, char *err)
{
    *match = NULL;
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(run_config, "mode");
    const char *m = cJSON_GetStringValue(mode);
    if (!m)
        return err_set(err, DDP_ERR_RUNTIME, "--baseline: internal: run config without a mode");
    int found = 0;
    char modes[256] = "";
    size_t used = 0;
    for (int i = 0; i < b->nrun; i++) {
        const char *bm = cJSON_GetStringValue(at(b->run[i], "config.mode"));
        if (used < sizeof modes)
            used += (size_t)snprintf(modes + used, sizeof modes - used, "%s%s", i ? ", " : "",
                                     bm ? bm : "?");
        if (bm && strcmp(bm, m) == 0) {
            found++;
            *match = b->run[i];
        }
    }
    if (found == 0)
        return err_set(err, DDP_ERR_INPUT, "--baseline %s: holds no %s run (it holds: %s)",
                       b->path, m, modes);
    if (found > 1) {
        *match = NULL;
        return err_set(err, DDP_ERR_INPUT, "--baseline %s: holds %d %s runs; keep one", b->path,
                       found, m);
    }
    const cJSON *base_cfg = cJSON_GetObjectItemCaseSensitive(*match, "config");
    const char *canon[MAX_IDENTITY];
    int ncanon = identity(B_MATCH, canon);
    for (int i = 0; i < ncanon; i++) {
        const cJSON *x = at(base_cfg, canon[i]), *y = at(run_config, canon[i]);
        if (!x || !y || !cJSON_Compare(x, y, true)) {
            char there[96], here[96];
            short_json(there, sizeof there, x);
            short_json(here, sizeof here, y);
            *match = NULL;
            return err_set(err, DDP_ERR_INPUT,
                           "--baseline %s: another configuration: %s is %s there, %s here",
                           b->path, canon[i], there, here);
        }
    }
    const char *there = precision_of(base_cfg), *here = precision_of(run_config);
    if (strcmp(there, here) != 0) {
        *match = NULL;
        return err_set(err, DDP_ERR_INPUT,
                       "--baseline %s: another configuration: precision is \"%.16s\" there, \"%.16s\" here",
                       b->path, there, here);
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the differences that only warn

static void list_diffs(const cJSON *there, const cJSON *here, const char *const *paths, int n,
                       char *buf, size_t len, size_t *used, int *count)
{
    for (int i = 0; i < n && *used < len; i++) {
        const cJSON *x = at(there, paths[i]), *y = at(here, paths[i]);
        if (!x || !y || cJSON_Compare(x, y, true))
            continue; /* a key only one side has (an older file) is no difference */
        char a[64], b[64];
        short_json(a, sizeof a, x);
        short_json(b, sizeof b, y);
        *used += (size_t)snprintf(buf + *used, len - *used, "%s%s is %s there, %s here",
                                  *count ? "; " : "", paths[i], a, b);
        (*count)++;
    }
}

int baseline_differences(const baseline_t *b, const cJSON *match, const cJSON *run_config,
                         const cJSON *run_env, char *buf, size_t len)
{
    char machine[768] = "", settings[768] = "";
    size_t um = 0, us = 0;
    int nm = 0, ns = 0;
    list_diffs(cJSON_GetObjectItemCaseSensitive(match, "environment"), run_env, other_machine,
               (int)(sizeof other_machine / sizeof *other_machine), machine, sizeof machine, &um,
               &nm);
    const char *other_settings[MAX_IDENTITY];
    list_diffs(cJSON_GetObjectItemCaseSensitive(match, "config"), run_config, other_settings,
               identity(B_WARN, other_settings), settings, sizeof settings, &us, &ns);
    buf[0] = 0;
    if (nm + ns == 0)
        return 0;
    snprintf(buf, len, "warning: --baseline %s: %s%s%s%s%s (figures may differ for that reason "
                       "alone)",
             b->path, nm ? "another machine or build: " : "", machine, nm && ns ? "; " : "",
             ns ? "other settings: " : "", settings);
    return nm + ns;
}

// ---------------------------------------------------------------------------
// the verdict

/* The baseline's value of a figure: its repeat's mean and interval when it
 * has one (repeat.<rkey>), else the run's own number (at top, or the mean
 * over devices[].phases_s_per_step.<phase>).  false when absent. */
typedef struct {
    double ref, lo, hi; /* lo/hi NAN without a repeat */
    int runs;
} base_fig_t;

static bool num_at(const cJSON *o, const char *path, double *v)
{
    const cJSON *it = at(o, path);
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return false;
    *v = it->valuedouble;
    return true;
}

static bool base_figure(const cJSON *match, const char *rkey, const char *top, const char *phase,
                        base_fig_t *out)
{
    char path[160];
    out->lo = out->hi = NAN;
    out->runs = 1;
    snprintf(path, sizeof path, "repeat.%s.mean", rkey);
    if (num_at(match, path, &out->ref)) {
        snprintf(path, sizeof path, "repeat.%s.lo", rkey);
        num_at(match, path, &out->lo);
        snprintf(path, sizeof path, "repeat.%s.hi", rkey);
        num_at(match, path, &out->hi);
        double n;
        if (num_at(match, "repeat.runs", &n))
            out->runs = (int)n;
        return true;
    }
    if (top)
        return num_at(match, top, &out->ref);
    /* a phase: the mean over the devices */
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(match, "devices"), *d;
    double sum = 0.0;
    int nd = 0;
    cJSON_ArrayForEach(d, devs)
    {
        double v;
        snprintf(path, sizeof path, "phases_s_per_step.%s", phase);
        if (!num_at(d, path, &v))
            return false;
        sum += v;
        nd++;
    }
    if (nd == 0)
        return false;
    out->ref = sum / nd;
    return true;
}

/* The candidate's figure: its interval over the runs (n = 1: lo = hi = it). */
static interval_t cand(const repeat_t *r, int fig)
{
    interval_t iv = repeat_interval(r, fig);
    if (r->n < 2)
        iv.lo = iv.hi = iv.mean;
    return iv;
}

/* "comm exposed +40% (+-5%), backward +1% (+-2%)": the phases that moved
 * most against the baseline, by the time they moved. */
static void attribute(const cJSON *match, const repeat_t *r, double step_ref, char *buf, size_t len)
{
    typedef struct {
        int p;
        double moved, pct, pm;
    } mv_t;
    mv_t mv[PH_COUNT];
    int n = 0;
    /* the step less the machine's time: a baseline taken on a busy machine
     * (descheduled 90% of its step) left every phase under 2% of the whole */
    base_fig_t d;
    char dkey[64];
    snprintf(dkey, sizeof dkey, "phases_s_per_step.%s", phase_key(PH_DESCHED));
    if (step_ref > 0 && base_figure(match, dkey, NULL, phase_key(PH_DESCHED), &d) &&
        d.ref > 0 && d.ref < step_ref)
        step_ref -= d.ref;
    for (int p = 0; p < PH_COUNT; p++) {
        base_fig_t b;
        char rkey[64];
        snprintf(rkey, sizeof rkey, "phases_s_per_step.%s", phase_key((phase_t)p));
        if (p == PH_SKEW || p == PH_DESCHED || /* the machine's, not a phase of the code's */
            !base_figure(match, rkey, NULL, phase_key((phase_t)p), &b))
            continue;
        interval_t c = cand(r, FIG_PHASE0 + p);
        /* phases under 2% of the step on both sides are noise, not causes */
        if (step_ref > 0 && fabs(b.ref) < 0.02 * step_ref && fabs(c.mean) < 0.02 * step_ref)
            continue;
        mv[n].p = p;
        mv[n].moved = c.mean - b.ref;
        mv[n].pct = b.ref > 0 ? 100.0 * (c.mean - b.ref) / b.ref : INFINITY;
        mv[n].pm = r->n >= 2 && b.ref > 0 ? 50.0 * (c.hi - c.lo) / b.ref : NAN;
        n++;
    }
    for (int i = 1; i < n; i++) /* largest move in time first */
        for (int j = i; j > 0 && fabs(mv[j].moved) > fabs(mv[j - 1].moved); j--) {
            mv_t t = mv[j];
            mv[j] = mv[j - 1];
            mv[j - 1] = t;
        }
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && i < 4 && used < len; i++) {
        char pct[32], pm[32] = "";
        if (isfinite(mv[i].pct))
            snprintf(pct, sizeof pct, "%+.0f%%", mv[i].pct);
        else
            snprintf(pct, sizeof pct, "new");
        if (isfinite(mv[i].pm))
            snprintf(pm, sizeof pm, " (+-%.0f%%)", mv[i].pm);
        used += (size_t)snprintf(buf + used, len - used, "%s%s %s%s", i ? ", " : "",
                                 phase_name((phase_t)mv[i].p), pct, pm);
    }
}

/* "1234.5 samples/s (95% interval 1200.0..1260.0 over 5 runs)" */
static void describe(char *buf, size_t n, interval_t c, int runs, double scale, const char *unit,
                     const char *fmt)
{
    char m[32], a[32], b[32];
    snprintf(m, sizeof m, fmt, c.mean * scale);
    if (runs < 2) {
        snprintf(buf, n, "%s%s", m, unit);
        return;
    }
    snprintf(a, sizeof a, fmt, c.lo * scale);
    snprintf(b, sizeof b, fmt, c.hi * scale);
    snprintf(buf, n, "%s%s (95%% interval %s..%s over %d runs)", m, unit, a, b, runs);
}

/* The gate's throughput on both sides: the median-step throughput where both
 * have it, else the mean throughput (an older baseline): docs/gate.md. */
typedef struct {
    bool median;                 /* which statistic */
    double ref, lo, hi;          /* the baseline's (lo = hi = ref for one run) */
    int bruns;
    interval_t c;                /* the candidate's (lo = hi = mean for one run) */
} tp_pair_t;

static bool base_median_tp(const cJSON *match, base_fig_t *out)
{
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(match, "repeat");
    if (cJSON_IsObject(rep) && at(rep, "median_throughput_samples_per_s"))
        return base_figure(match, "median_throughput_samples_per_s", NULL, NULL, out) &&
               out->ref > 0;
    if (cJSON_IsObject(rep))
        return false; /* a repeat without the median: the mean on both sides */
    double samples, steps, p50;
    if (!num_at(match, "timed_samples", &samples) || !num_at(match, "steps.timed", &steps) ||
        !num_at(match, "step_time_s.p50", &p50) || steps <= 0 || p50 <= 0 || samples <= 0)
        return false;
    out->ref = samples / steps / p50;
    out->lo = out->hi = NAN;
    out->runs = 1;
    return true;
}

static bool tp_pair(const cJSON *match, const repeat_t *r, tp_pair_t *out)
{
    base_fig_t b;
    bool cand_median = r->n >= 1;
    for (int i = 0; i < r->n; i++)
        cand_median &= r->run[i].median_samples_per_s > 0;
    out->median = cand_median && base_median_tp(match, &b);
    if (!out->median &&
        (!base_figure(match, "throughput_samples_per_s", "throughput_samples_per_s", NULL, &b) ||
         b.ref <= 0.0))
        return false;
    out->ref = b.ref;
    out->lo = isfinite(b.lo) && b.lo > 0 ? b.lo : b.ref;
    out->hi = isfinite(b.hi) && b.hi > 0 ? b.hi : b.ref;
    out->bruns = b.runs;
    out->c = cand(r, out->median ? FIG_MEDIAN_THROUGHPUT : FIG_THROUGHPUT);
    return true;
}

/* The baseline's disturbance: its repeat's disturbed runs, or its one run's
 * flag; and the median contention of its runs (0 where not recorded). */
static int base_disturbed(const cJSON *match, int *of, double *cont)
{
    double v, runs, c[REPEAT_MAX];
    int n = 0;
    const cJSON *every = at(match, "repeat.every_run"), *e;
    cJSON_ArrayForEach(e, every)
        if (n < REPEAT_MAX && num_at(e, "machine.contention", &c[n]))
            n++;
    if (n == 0 && num_at(match, "machine.contention", &c[0]))
        n = 1;
    *cont = n > 0 ? interval_of(c, n).median : 0.0;
    *of = 1;
    if (num_at(match, "repeat.disturbed_runs", &v)) {
        *of = num_at(match, "repeat.runs", &runs) ? (int)runs : 1;
        return (int)v;
    }
    return cJSON_IsTrue(at(match, "machine.disturbed")) ? 1 : 0;
}

/* The median contention of a mode's runs here. */
static double cand_contention(const repeat_t *r)
{
    double c[REPEAT_MAX];
    for (int i = 0; i < r->n; i++)
        c[i] = r->run[i].machine.contention;
    return r->n > 0 ? interval_of(c, r->n).median : 0.0;
}

/* The baseline's CPU work per run (repeat.every_run[].work_cpu_s_p10, or
 * its one run's work_cpu_s.p10): how many into v (0: none, a GPU run or a
 * baseline written before the work was kept). */
static int base_work(const cJSON *match, double *v, int max)
{
    const cJSON *every = at(match, "repeat.every_run"), *e;
    int n = 0;
    if (cJSON_IsArray(every)) {
        cJSON_ArrayForEach(e, every)
        {
            double w;
            if (n >= max || !num_at(e, "work_cpu_s_p10", &w) || !(w > 0))
                return 0; /* all of them or none */
            v[n++] = w;
        }
        return n;
    }
    double w;
    if (num_at(match, "work_cpu_s.p10", &w) && w > 0) {
        v[0] = w;
        return 1;
    }
    return 0;
}

/* The CPU work of both sides (each run's work_cpu_s.p10): their ratio and
 * its interval (Welch's t on the logs); false when a side has none. */
static bool work_pair(const cJSON *match, const repeat_t *r, ratio_interval_t *out)
{
    double b[REPEAT_MAX], c[REPEAT_MAX];
    int nb = base_work(match, b, REPEAT_MAX);
    for (int i = 0; i < r->n; i++) {
        if (!(r->run[i].work_p10 > 0))
            return false;
        c[i] = r->run[i].work_p10;
    }
    return nb > 0 && ratio_interval_of(b, nb, c, r->n, out);
}

static const char *const verdict_word[] = {"no change", "improved", "regressed", "no verdict"};

/* How far the work may move, either way, per unit of contention between two
 * sides for the machine's sake alone (docs/gate.md, "The busy allowance"). */
#define BASELINE_BUSY_WORK 0.3
enum { V_SAME = 0, V_BETTER, V_WORSE, V_NONE };

/* What the verdict on a mode's runs is made of, and the lines it writes. */
typedef struct {
    const cJSON *match;
    const repeat_t *r;
    double tol;
    char pre[64];       /* "dp: " before the figures of compare's runs */
    char *buf;
    size_t len, used;
    tp_pair_t tp;
    double lo_pct, hi_pct; /* the change, between the two sides' interval ends */
    double width, bwidth;  /* this run's interval and the baseline's, % of its figure */
    double step_ref;       /* the baseline's mean step (0: none) */
    double cont;           /* how much of the run's cores other processes took */
    double ccand, cbase;   /* the median contention of the runs here and there */
    int ndist, bof, bdist; /* disturbed runs here; the baseline's runs and disturbed ones */
    char why[512];         /* the phases that moved most */
    char what[200];        /* this run's throughput, said */
    int v;                 /* the throughput's verdict */
    const char *because;
    bool busy, noisy_base;
} judge_t;

/* The throughput's verdict (docs/gate.md, "Both sides' intervals"). */
static void judge_rule(judge_t *j)
{
    double tol = j->tol;
    j->because = "";
    if (j->bwidth > tol) {
        /* a baseline noisier than the tolerance cannot gate it, whatever
         * the candidate did: refused, saying how noisy */
        j->v = V_NONE, j->because = "the baseline is too noisy: ";
        j->noisy_base = true;
    } else if (j->hi_pct < -tol && j->ndist > 0 &&
               1.0 + j->hi_pct / 100.0 >= (1.0 - j->cont) * (1.0 - tol / 100.0)) {
        /* slower, but other processes took enough of the run's cores to
         * explain it (a run left 1 - c of its cores runs at best 1 - c of its
         * speed): the machine, not the code -- no verdict, not a false alarm */
        j->v = V_NONE, j->because = "a busy machine: ";
        j->busy = true;
    } else if (j->hi_pct < -tol) {
        j->v = V_WORSE;
    } else if (j->lo_pct > tol) {
        j->v = V_BETTER;
    } else if (j->lo_pct >= -tol && j->hi_pct <= tol) {
        j->v = V_SAME;
    } else {
        /* the intervals straddle the tolerance: the noise explains the gap */
        j->v = V_NONE, j->because = j->ndist > 0 ? "a busy machine: " : "too noisy: ";
        j->busy = j->ndist > 0;
    }
}

/* On the CPU the work is judged, as the A/B gate does, and the throughput said
 * beside it (judged too only when no run on either side was disturbed). */
static int judge_work(judge_t *j, const ratio_interval_t *w)
{
    double up = 1.0 + j->tol / 100.0, down = 1.0 - j->tol / 100.0;
    double a = BASELINE_BUSY_WORK * fabs(j->ccand - j->cbase);
    /* a baseline whose own work spreads wider than the tolerance gives no
     * verdict, whatever the candidate did: what baseline_too_noisy warned
     * when it was written (a 15% slowdown read +2.3%, 'no change', against
     * one that had warned so) */
    double bv[REPEAT_MAX];
    int nb = base_work(j->match, bv, REPEAT_MAX);
    double bwidth = nb >= 2 ? interval_width_pct(interval_of(bv, nb)) : 0.0;
    bool noisy = bwidth > j->tol;
    int wv = noisy                            ? V_NONE
             : w->lo > up * (1.0 + a)         ? V_WORSE
             : w->hi < down / (1.0 + a)       ? V_BETTER
             : w->lo >= down && w->hi <= up   ? V_SAME
                                              : V_NONE;
    bool busy = !noisy && wv == V_NONE && (w->lo > up || w->hi < down);
    bool tp_judged = j->ndist == 0 && j->bdist == 0 && !j->noisy_base && !noisy;
    bool by_wall = wv != V_WORSE && tp_judged && j->v == V_WORSE;
    int fv = by_wall ? V_WORSE : wv;
    report_appendf(j->buf, j->len, &j->used, "verdict: %s: %s%swork per step (CPU seconds, p10) "
        "%+.1f%% against the baseline's (95%% interval %+.1f..%+.1f%%, Welch's t on the logs of "
        "%d run%s here and %d there; tolerance %g%%)", verdict_word[fv],
        noisy ? "the baseline is too noisy: " : busy && !by_wall ? "a busy machine: " : "", j->pre,
        100.0 * (w->ratio - 1.0), 100.0 * (w->lo - 1.0), 100.0 * (w->hi - 1.0), w->ncand,
        w->ncand == 1 ? "" : "s", w->nbase, j->tol);
    if (noisy)
        report_appendf(j->buf, j->len, &j->used, "; too noisy to gate %g%%: the baseline's work "
            "spreads %.0f%% over %d runs, as it warned when written: take it again on a quieter "
            "machine or with more --repeat", j->tol, bwidth, nb);
    else if (busy && !by_wall)
        report_appendf(j->buf, j->len, &j->used, "; the two sides ran apart in contention (%.2f "
            "here, %.2f there), which moves the work by up to %.0f%% (docs/gate.md): take both "
            "on equally quiet machines", j->ccand, j->cbase, 100.0 * a);
    else if (by_wall)
        report_appendf(j->buf, j->len, &j->used, "; the median-step throughput fell beyond the "
            "tolerance while the work did not: the step waits longer (communication, idle)");
    else if (fv == V_NONE)
        report_appendf(j->buf, j->len, &j->used, "; more --repeat runs on both sides or a quieter "
            "machine would settle it");
    if (fv == V_WORSE && !j->busy && j->why[0])
        report_appendf(j->buf, j->len, &j->used, "; by phase: %s", j->why);
    report_appendf(j->buf, j->len, &j->used, "\n  %s%sthroughput %s, %+.1f..%+.1f%% against the "
        "baseline's %.1f: %s", j->pre, j->tp.median ? "median-step " : "", j->what, j->lo_pct,
        j->hi_pct, j->tp.ref,
        by_wall ? "judged: no run was disturbed"
        : tp_judged ? "judged too (no run was disturbed): within what the work says"
                    : "not judged: the work is (disturbed runs, or a noisy baseline)");
    return fv == V_WORSE ? DDP_ERR_REGRESSED : fv == V_NONE ? DDP_ERR_NOISY : DDP_OK;
}

/* Elsewhere the throughput alone, and why it gives no verdict. */
static int judge_throughput(judge_t *j)
{
    const char *stat = j->tp.median ? "median-step " : "";
    int v = j->v, n = j->r->n;
    if (n < 2 && j->tp.bruns < 2)
        report_appendf(j->buf, j->len, &j->used, "verdict: %s: %s%s%sthroughput %s is %.1f%% %s "
            "the baseline %.1f (tolerance %g%%)", verdict_word[v], j->because, j->pre, stat,
            j->what, fabs(j->lo_pct), j->lo_pct < 0 ? "below" : "above", j->tp.ref, j->tol);
    else
        report_appendf(j->buf, j->len, &j->used, "verdict: %s: %s%s%sthroughput %s is "
            "%+.1f..%+.1f%% against the baseline %.1f (tolerance %g%%)", verdict_word[v],
            j->because, j->pre, stat, j->what, j->lo_pct, j->hi_pct, j->tp.ref, j->tol);
    if (j->noisy_base)
        report_appendf(j->buf, j->len, &j->used, "; too noisy to gate %g%%: the baseline's runs "
            "spread %.0f%% (its interval %.1f..%.1f over %d runs): take it again on a quieter "
            "machine or with more --repeat", j->tol, j->bwidth, j->tp.lo, j->tp.hi, j->tp.bruns);
    else if (j->busy)
        report_appendf(j->buf, j->len, &j->used, "; %d of %d run%s disturbed (other processes took "
            "%.0f%% of the run's cores), enough to explain the gap: run again on a quieter machine",
            j->ndist, n, n == 1 ? " was" : "s were", 100.0 * j->cont);
    else if (v == V_NONE && j->width > j->tol)
        report_appendf(j->buf, j->len, &j->used, "; this run's interval spans %.1f%%: more --repeat "
            "runs or a quieter machine", j->width);
    else if (v == V_NONE)
        report_appendf(j->buf, j->len, &j->used, "; the intervals (this run's %.1f%% wide, the "
            "baseline's %.1f%%) straddle the tolerance: more --repeat runs on both sides would "
            "settle it", j->width, j->bwidth);
    if (!j->busy && !j->noisy_base && j->why[0])
        report_appendf(j->buf, j->len, &j->used, "; by phase: %s", j->why);
    return v == V_WORSE ? DDP_ERR_REGRESSED : v == V_NONE ? DDP_ERR_NOISY : DDP_OK;
}

/* Peak memory and exposed communication (against the baseline's step: small
 * and noisy, against itself it would never decide; on an interval only: one
 * run's moves with every preemption).  true: either regressed. */
static bool judge_memory_comm(judge_t *j)
{
    bool worse = false;
    base_fig_t bm, bc;
    char d[160];
    if (base_figure(j->match, "mem_peak_bytes_max", "mem_peak_bytes_max", NULL, &bm) &&
        bm.ref > 0) {
        interval_t m = cand(j->r, FIG_MEM_PEAK);
        double pct = 100.0 * (m.lo - bm.ref) / bm.ref;
        if (pct > j->tol) {
            describe(d, sizeof d, m, j->r->n, 1.0 / 1048576.0, " MiB", "%.2f");
            report_appendf(j->buf, j->len, &j->used, "\nverdict: regressed: %speak memory %s is "
                "%.1f%% above the baseline %.2f MiB (tolerance %g%%)", j->pre, d, pct,
                bm.ref / 1048576.0, j->tol);
            worse = true;
        }
    }
    if (j->r->n >= 2 && j->step_ref > 0 && j->ndist == 0 && !j->noisy_base &&
        base_figure(j->match, "phases_s_per_step.comm_exposed_s", NULL, "comm_exposed_s", &bc)) {
        interval_t c = cand(j->r, FIG_PHASE0 + PH_COMM_EXPOSED);
        double grew = 100.0 * (c.lo - bc.ref) / j->step_ref;
        if (grew > j->tol) {
            describe(d, sizeof d, c, j->r->n, 1e6, " us", "%.1f");
            report_appendf(j->buf, j->len, &j->used, "\nverdict: regressed: %sexposed communication "
                "%s per step grew by %.1f%% of the baseline's %.1f us step (it was %.1f us; "
                "tolerance %g%%)", j->pre, d, grew, j->step_ref * 1e6, bc.ref * 1e6, j->tol);
            worse = true;
        }
    }
    return worse;
}

int baseline_judge(const cJSON *match, const char *label, const repeat_t *r, double tol,
                   char *buf, size_t len)
{
    static judge_t j; /* its lines and sentences: off the stack */
    j = (judge_t){.match = match, .r = r, .tol = tol, .buf = buf, .len = len};
    buf[0] = 0;
    if (label && label[0])
        snprintf(j.pre, sizeof j.pre, "%s: ", label);
    /* throughput: the one figure the gate always has */
    if (r->n < 1 || !tp_pair(match, r, &j.tp)) {
        report_appendf(buf, len, &j.used, "verdict: no verdict: %sthe baseline has no throughput",
                       j.pre);
        return DDP_ERR_NOISY;
    }
    interval_t t = j.tp.c;
    /* Both sides' intervals: the change lies between the candidate's worst
     * against the baseline's best and the other way round. */
    j.lo_pct = 100.0 * (t.lo / j.tp.hi - 1.0), j.hi_pct = 100.0 * (t.hi / j.tp.lo - 1.0);
    j.width = 100.0 * (t.hi - t.lo) / j.tp.ref;
    j.bwidth = 100.0 * (j.tp.hi - j.tp.lo) / j.tp.ref;
    base_fig_t bs;
    if (base_figure(match, "step_time_s_mean", "step_time_s.mean", NULL, &bs))
        j.step_ref = bs.ref;
    j.ndist = repeat_disturbed(r, &j.cont);
    j.bdist = base_disturbed(match, &j.bof, &j.cbase);
    j.ccand = cand_contention(r);
    attribute(match, r, j.step_ref, j.why, sizeof j.why);
    describe(j.what, sizeof j.what, t, r->n, 1.0, " samples/s", "%.1f");
    judge_rule(&j);
    ratio_interval_t w;
    int verdict = work_pair(match, r, &w) ? judge_work(&j, &w) : judge_throughput(&j);
    if (j.bdist > 0 && !j.noisy_base)
        report_appendf(buf, len, &j.used, "; note: %d of the baseline's %d run%s disturbed when "
            "it was taken", j.bdist, j.bof, j.bof == 1 ? " was" : "s were");
    return judge_memory_comm(&j) ? DDP_ERR_REGRESSED : verdict;
}

bool baseline_too_noisy(const repeat_t *r, const char *label, double tol, char *buf, size_t len)
{
    buf[0] = 0;
    if (!r || r->n < 2)
        return false;
    /* the figure the gate will judge (baseline_judge): the work where the
     * runs have it, else the median-step throughput (or the mean's) */
    bool median = true, work = true;
    for (int i = 0; i < r->n; i++) {
        median &= r->run[i].median_samples_per_s > 0;
        work &= r->run[i].work_p10 > 0;
    }
    int fig = work ? FIG_WORK_P10 : median ? FIG_MEDIAN_THROUGHPUT : FIG_THROUGHPUT;
    interval_t iv = repeat_interval(r, fig);
    double w = interval_width_pct(iv), busy = work ? BASELINE_BUSY_WORK * cand_contention(r) : 0;
    bool noisy = w > tol, loud = busy > tol / 100.0;
    if (!noisy && !loud)
        return false;
    int nd = repeat_disturbed(r, NULL);
    size_t used = 0;
    report_appendf(buf, len, &used, "warning: %s%s", label ? label : "", label ? ": " : "");
    if (noisy)
        report_appendf(buf, len, &used, "these runs are too noisy to gate %g%% against: their %s "
            "spreads %.0f%% (95%% interval %.4g..%.4g over %d runs)%s; a --baseline of them "
            "gives no verdict", tol, work ? "work per step (CPU seconds, p10)"
            : median ? "median-step throughput" : "mean throughput", w, iv.lo, iv.hi, r->n,
            nd > 0 ? " and some were disturbed" : "");
    if (loud)
        report_appendf(buf, len, &used, "%sother processes took %.0f%% of these runs' cores: "
            "against them a candidate on a quiet machine may read up to %.0f%% apart in work, "
            "which a --baseline of them calls no verdict", noisy ? "; " : "",
            100.0 * cand_contention(r), 100.0 * busy);
    report_appendf(buf, len, &used, ": take it on a quieter machine%s",
                   noisy ? " or with more --repeat" : "");
    return true;
}

// ---------------------------------------------------------------------------
// the gate over a job's runs (gate.h): each run's match before training, the
// warning on what differs, each run's verdict after it

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
