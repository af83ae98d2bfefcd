/* app/predict/profile.c: hardware and workload profiles from JSON (a file,
 * or one compiled in: predict_files), each read through its table of keys:
 * present, of its kind, finite and in its range; the first bad key is the
 * one line. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/predict/profile.h"
#include "common/base/infile.h"
#include "common/base/status.h"
#include "common/base/text.h"

#define PROFILE_MAX_BYTES (1 << 20)

const char *const profile_dtypes[PROF_DTYPES + 1] = {"fp32", "tf32", "fp16", "bf16", NULL};
static const char *const optim_names[] = {"sgd", "sgd-momentum", "adam", NULL};

const char *profile_shipped(const char *kind, const char *name)
{
    for (const predict_file_t *p = predict_files; p->kind; p++)
        if (!strcmp(p->kind, kind) && !strcmp(p->name, name))
            return p->text;
    return NULL;
}

// ---------------------------------------------------------------------------
// the keys

typedef enum { F_TEXT, F_FLAG, F_NAME, F_NUM, F_WHOLE } fkind_t;

/* A key: its dotted path, its kind and its field (a text's size; a name's
 * choices, stored as an index); a number's range [lo, hi] (lo excluded when
 * open; 0 allowed beside it when none: "no such unit" or "the default");
 * absent: dflt, or an error when it is NAN (required). */
typedef struct {
    const char *key;
    fkind_t kind;
    size_t off, size;
    double lo, hi;
    bool open, none;
    double dflt;
    const char *const *names;
} prof_key_t;

#define BIG 1e30
#define LOW 1e6 /* a rate or a size below a million is a slip, and its steps read inf */
#define REQ NAN
#define TEXT(k, S, f) {k, F_TEXT, offsetof(S, f), sizeof((S *)0)->f, .dflt = REQ}
#define FLAG(k, S, f, d) {k, F_FLAG, offsetof(S, f), .dflt = (d)}
#define NAME(k, S, f, ch, d) {k, F_NAME, offsetof(S, f), .dflt = (d), .names = (ch)}
#define NUM(k, S, f, a, op, b, d)                                                          \
    {k, F_NUM, offsetof(S, f), .lo = a, .hi = b, .open = op, .dflt = d}
#define WHOLE(k, S, f, a, b, d) {k, F_WHOLE, offsetof(S, f), .lo = a, .hi = b, .dflt = d}
#define NONE_OR(k, S, f, d)                                                                \
    {k, F_NUM, offsetof(S, f), .lo = LOW, .hi = BIG, .none = true, .dflt = d}

static const prof_key_t hw_keys[] = {
    TEXT("name", hw_profile_t, name),
    TEXT("source", hw_profile_t, source),
    TEXT("gpu.name", hw_profile_t, gpu),
    WHOLE("gpu.count", hw_profile_t, count, 1, 64, REQ),
    NUM("gpu.flops.fp32", hw_profile_t, flops[PROF_FP32], LOW, false, BIG, REQ),
    NONE_OR("gpu.flops.tf32", hw_profile_t, flops[PROF_TF32], REQ), /* 0: none */
    NONE_OR("gpu.flops.fp16", hw_profile_t, flops[PROF_FP16], REQ),
    NONE_OR("gpu.flops.bf16", hw_profile_t, flops[PROF_BF16], REQ),
    NUM("gpu.mem_bw", hw_profile_t, mem_bw, LOW, false, BIG, REQ),
    NUM("gpu.memory", hw_profile_t, memory, LOW, false, BIG, REQ),
    NUM("gpu.efficiency", hw_profile_t, efficiency, 0, true, 1, 0.5),
    TEXT("link.kind", hw_profile_t, link_kind),
    FLAG("link.p2p", hw_profile_t, p2p, REQ),
    NUM("link.bw", hw_profile_t, link_bw, LOW, false, BIG, REQ),
    NUM("link.latency", hw_profile_t, link_latency, 0, false, 1, REQ),
    NONE_OR("link.gpu_bw", hw_profile_t, gpu_bw, 0), /* 0: link.bw */
    NONE_OR("link.allreduce_bw", hw_profile_t, allreduce_bw, 0), /* 0: from the links */
    NUM("host.pcie_bw", hw_profile_t, pcie_bw, LOW, false, BIG, REQ),
};

static const prof_key_t wl_keys[] = {
    TEXT("name", workload_t, name),
    TEXT("source", workload_t, source),
    NUM("params", workload_t, params, 1, false, BIG, REQ),
    NAME("dtype", workload_t, dtype, profile_dtypes, REQ),
    NUM("flops_per_sample", workload_t, flops_per_sample, 0, true, BIG, REQ),
    WHOLE("batch_per_device", workload_t, batch_per_device, 1, 1 << 24, REQ),
    WHOLE("global_batch", workload_t, global_batch, 0, 1 << 24, 0),
    NUM("input_bytes_per_sample", workload_t, in_bytes, 0, false, BIG, REQ),
    NUM("output_bytes_per_sample", workload_t, out_bytes, 0, false, BIG, REQ),
    NUM("ops_per_step", workload_t, ops, 0, false, BIG, REQ),
    NAME("optimizer", workload_t, optimizer, optim_names, PROF_OPT_ADAM),
    FLAG("loss_inside", workload_t, loss_inside, 0),
    NUM("late_params", workload_t, late_params, 0, false, BIG, 0), /* at most params: below */
    NUM("load_samples_per_s", workload_t, load_rate, 0, false, BIG, 0),
    WHOLE("load_workers", workload_t, load_workers, 1, 4096, 1),
    NUM("op_s", workload_t, op_s, 0, true, 1, PROF_OP_S),
};

/* The item at a dotted path ("gpu.flops.fp32"), or NULL. */
static const cJSON *at(const cJSON *o, const char *path)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = NULL, *k = strtok_r(buf, ".", &s); k && o; k = strtok_r(NULL, ".", &s))
        o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return o;
}

/* Key k's value v into its field at p; what is wrong with it (into why),
 * or NULL. */
static const char *value(const prof_key_t *k, const cJSON *v, char *p, char *why, size_t n)
{
    if (k->kind == F_FLAG) {
        if (!cJSON_IsBool(v))
            return "not true or false";
        *(bool *)p = cJSON_IsTrue(v);
        return NULL;
    }
    if (k->kind == F_TEXT || k->kind == F_NAME) {
        if (!cJSON_IsString(v) || !v->valuestring[0])
            return "not a non-empty string";
        if (k->kind == F_TEXT)
            return text_escape(v->valuestring, strlen(v->valuestring), p, k->size), NULL;
        size_t used = (size_t)snprintf(why, n, "'%.40s' is not one of", v->valuestring);
        for (int i = 0; k->names[i]; i++) {
            if (!strcmp(v->valuestring, k->names[i]))
                return *(int *)p = i, NULL;
            used += (size_t)snprintf(why + used, used < n ? n - used : 0, "%s %s", i ? "," : "",
                                     k->names[i]);
        }
        return why;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return "not a number";
    double d = v->valuedouble;
    if (k->none && d >= 0 && d < k->lo && d != 0)
        return snprintf(why, n, "%g is out of range (0, or at least %g)", d, k->lo), why;
    if (!(k->none && d == 0) && (d < k->lo || (k->open && d == k->lo) || d > k->hi))
        return snprintf(why, n, "%g is out of range (%s %g, at most %g)", d,
                        k->open ? "more than" : "at least", k->lo, k->hi), why;
    if (k->kind == F_WHOLE && d != floor(d))
        return snprintf(why, n, "%g is not a whole number", d), why;
    if (k->kind == F_WHOLE)
        *(int *)p = (int)d;
    else
        *(double *)p = d;
    return NULL;
}

/* The first key of o (at any depth, "sources" aside: the citations) that the
 * table does not name or that stands twice (*dup), into path; false when
 * there is none.  A misspelt optional key would otherwise read as its default,
 * and of a key given twice cJSON reads the first. */
static bool unknown_key(const cJSON *o, const char *pre, const prof_key_t *keys, int n,
                        char *path, size_t np, bool *dup)
{
    for (const cJSON *c = o->child; c; c = c->next) {
        snprintf(path, np, "%s%s", pre, c->string);
        for (const cJSON *b = o->child; b != c; b = b->next)
            if (!strcmp(b->string, c->string))
                return *dup = true;
        if (!*pre && !strcmp(c->string, "sources"))
            continue;
        bool named = false;
        for (int i = 0; i < n && !named; i++)
            named = !strcmp(keys[i].key, path);
        if (named)
            continue;
        char sub[64];
        snprintf(sub, sizeof sub, "%s.", path);
        if (!cJSON_IsObject(c) || unknown_key(c, sub, keys, n, path, np, dup))
            return true;
    }
    return false;
}

/* Every key of the table from o into out; absent, its default. */
static int read_keys(const cJSON *o, const char *from, const prof_key_t *keys, int n, void *out,
                     char *err)
{
    if (!cJSON_IsObject(o))
        return err_set(err, DDP_ERR_INPUT, "%s: not a JSON object", from);
    char path[64];
    bool dup = false;
    if (unknown_key(o, "", keys, n, path, sizeof path, &dup))
        return err_set(err, DDP_ERR_INPUT, "%s: %s: %s", from, path,
                       dup ? "given twice" : "not a key of this profile (misspelt? an optional "
                       "key left out reads as its default)");
    for (const prof_key_t *k = keys; k < keys + n; k++) {
        const cJSON *v = at(o, k->key);
        char *p = (char *)out + k->off, why[160];
        const char *bad = v ? value(k, v, p, why, sizeof why) : isnan(k->dflt) ? "missing" : NULL;
        if (bad)
            return err_set(err, DDP_ERR_INPUT, "%s: %s: %s", from, k->key, bad);
        if (!v && k->kind == F_NUM)
            *(double *)p = k->dflt;
        else if (!v && k->kind == F_FLAG)
            *(bool *)p = k->dflt != 0;
        else if (!v)
            *(int *)p = (int)k->dflt;
    }
    return DDP_OK;
}

int profile_hardware_json(const cJSON *o, const char *from, hw_profile_t *hw, char *err)
{
    memset(hw, 0, sizeof *hw);
    snprintf(hw->from, sizeof hw->from, "%s", from);
    TRY(read_keys(o, from, hw_keys, (int)(sizeof hw_keys / sizeof *hw_keys), hw, err));
    if (hw->gpu_bw == 0) /* one link is all a GPU has */
        hw->gpu_bw = hw->link_bw;
    return DDP_OK;
}

int profile_workload_json(const cJSON *o, const char *from, workload_t *wl, char *err)
{
    memset(wl, 0, sizeof *wl);
    TRY(read_keys(o, from, wl_keys, (int)(sizeof wl_keys / sizeof *wl_keys), wl, err));
    if (wl->late_params > wl->params)
        return err_set(err, DDP_ERR_INPUT, "%s: late_params: %g is out of range (at least 0, at "
                       "most params, %g)", from, wl->late_params, wl->params);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// NAME or FILE

/* The JSON of a shipped profile or a file; from: what the messages call it. */
static cJSON *load(const char *kind, const char *arg, char *from, size_t nfrom, char *err)
{
    const char *shipped = strchr(arg, '/') ? NULL : profile_shipped(kind, arg);
    char *buf = NULL, e[ERR_LEN], names[512] = "";
    size_t len = 0;
    snprintf(from, nfrom, shipped ? "--%s: shipped profile %s" : "--%s %s", kind, arg);
    if (!shipped && infile_read(arg, PROFILE_MAX_BYTES, &buf, &len, e) != DDP_OK) {
        for (const predict_file_t *p = predict_files; p->kind; p++)
            if (!strcmp(p->kind, kind))
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? ", " : "", p->name);
        if (!strchr(arg, '/') && !strstr(arg, ".json"))
            err_set(err, DDP_ERR_INPUT, "%s: no shipped %s profile of that name (%s) and no such "
                    "file", from, kind, names);
        else
            err_set(err, DDP_ERR_INPUT, "%s: %s", from, e);
        return NULL;
    }
    cJSON *o = cJSON_Parse(shipped ? shipped : buf);
    if (!o)
        err_set(err, DDP_ERR_INPUT, "%s: not valid JSON near '%.20s'", from,
                cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
    free(buf);
    return o;
}

int profile_hardware(const char *arg, hw_profile_t *hw, char *err)
{
    char from[CONFIG_PATH_LEN + 32];
    cJSON *o = load("hardware", arg, from, sizeof from, err);
    int rc = o ? profile_hardware_json(o, from, hw, err) : DDP_ERR_INPUT;
    cJSON_Delete(o);
    return rc;
}

int profile_workload(const char *arg, workload_t *wl, char *err)
{
    char from[CONFIG_PATH_LEN + 32];
    cJSON *o = load("workload", arg, from, sizeof from, err);
    int rc = o ? profile_workload_json(o, from, wl, err) : DDP_ERR_INPUT;
    cJSON_Delete(o);
    return rc;
}

void profile_workload_mlp(const config_t *c, workload_t *wl)
{
    memset(wl, 0, sizeof *wl);
    double weights = 0;
    for (int i = 0; i + 1 < c->ndims; i++) {
        weights += (double)c->dims[i] * c->dims[i + 1];
        wl->params += (double)c->dims[i] * c->dims[i + 1] + c->dims[i + 1];
    }
    snprintf(wl->name, sizeof wl->name, "this run's MLP");
    snprintf(wl->source, sizeof wl->source,
             "ddpbench's own model: Linear widths of the run, its global batch and precision");
    wl->dtype = c->precision == PREC_BF16 ? PROF_BF16
              : c->precision == PREC_TF32 ? PROF_TF32 : PROF_FP32;
    wl->flops_per_sample = 6.0 * weights; /* a multiply-add forward, two backward */
    wl->batch_per_device = wl->global_batch = c->batch > 0 ? c->batch : 1;
    wl->in_bytes = 4.0 * c->dims[0];
    wl->out_bytes = 4.0 * c->dims[c->ndims - 1];
    /* PyTorch's twin: forward a Linear and an activation a layer, the loss;
     * backward two GEMMs, a bias sum and the activation's a layer */
    wl->ops = 6.0 * (c->ndims - 1) + 4.0;
    wl->op_s = PROF_OP_S;
    wl->load_workers = 1;
    wl->optimizer = c->optim.kind != OPTIM_SGD ? PROF_OPT_ADAM
                  : c->optim.momentum > 0 ? PROF_OPT_MOMENTUM : PROF_OPT_SGD;
}
