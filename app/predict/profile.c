/* app/predict/profile.c: hardware and workload profiles from JSON (a file,
 * or one shipped and compiled in: predict_profiles.c, made by the Makefile
 * from app/predict/hardware/ and workload/), each number checked: present,
 * a number, finite and in its range; the first bad key is the one line. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/predict/profile.h"
#include "common/base/infile.h"
#include "common/base/status.h"

/* the shipped profiles (generated: build/gen/predict_profiles.c) */
extern const char *const predict_profile_kind[], *const predict_profile_name[];
extern const char *const predict_profile_text[];
extern const int predict_profile_count;

#define PROFILE_MAX_BYTES (1 << 20)

static const char *const dtype_names[PROF_DTYPES] = {"fp32", "tf32", "fp16", "bf16"};

const char *profile_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < PROF_DTYPES ? dtype_names[dtype] : "?";
}

const char *profile_shipped(const char *kind, const char *name)
{
    for (int i = 0; i < predict_profile_count; i++)
        if (!strcmp(predict_profile_kind[i], kind) && !strcmp(predict_profile_name[i], name))
            return predict_profile_text[i];
    return NULL;
}

void profile_names(const char *kind, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < predict_profile_count && len < n; i++)
        if (!strcmp(predict_profile_kind[i], kind))
            len += (size_t)snprintf(out + len, n - len, "%s%s", len ? ", " : "",
                                    predict_profile_name[i]);
}

// ---------------------------------------------------------------------------
// one key

/* The item at a dotted path ("gpu.flops.fp32"), or NULL. */
static const cJSON *at(const cJSON *o, const char *path)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = NULL, *k = strtok_r(buf, ".", &s); k && o; k = strtok_r(NULL, ".", &s))
        o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return o;
}

typedef struct {
    const cJSON *o;
    const char *from;
    char *err;
} reader_t;

/* A number at key in [lo, hi] (lo excluded when open); absent: dflt when
 * optional (NAN: required). */
static int num(const reader_t *r, const char *key, double lo, bool open, double hi, double dflt,
               double *out)
{
    const cJSON *v = at(r->o, key);
    if (!v && !isnan(dflt)) {
        *out = dflt;
        return DDP_OK;
    }
    if (!v)
        return err_set(r->err, DDP_ERR_INPUT, "%s: %s: missing", r->from, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return err_set(r->err, DDP_ERR_INPUT, "%s: %s: not a number", r->from, key);
    double d = v->valuedouble;
    if (d < lo || (open && d == lo) || d > hi)
        return err_set(r->err, DDP_ERR_INPUT, "%s: %s: %g is out of range (%s %g, at most %g)",
                       r->from, key, d, open ? "more than" : "at least", lo, hi);
    *out = d;
    return DDP_OK;
}

static int text(const reader_t *r, const char *key, bool required, char *out, size_t n)
{
    const cJSON *v = at(r->o, key);
    if (!v && !required)
        return DDP_OK;
    if (!cJSON_IsString(v) || !v->valuestring[0])
        return err_set(r->err, DDP_ERR_INPUT, "%s: %s: %s", r->from, key,
                       v ? "not a non-empty string" : "missing");
    snprintf(out, n, "%s", v->valuestring);
    return DDP_OK;
}

static int flag(const reader_t *r, const char *key, bool required, bool *out)
{
    const cJSON *v = at(r->o, key);
    if (!v && !required)
        return DDP_OK;
    if (!cJSON_IsBool(v))
        return err_set(r->err, DDP_ERR_INPUT, "%s: %s: %s", r->from, key,
                       v ? "not true or false" : "missing");
    *out = cJSON_IsTrue(v);
    return DDP_OK;
}

/* One of names[] at key (absent and optional: *out unchanged). */
static int pick(const reader_t *r, const char *key, bool required, const char *const *names, int n,
                int *out)
{
    char s[PROF_NAME_LEN] = "";
    TRY(text(r, key, required, s, sizeof s));
    if (!s[0])
        return DDP_OK;
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return DDP_OK;
        }
    return err_set(r->err, DDP_ERR_INPUT, "%s: %s: '%s' is not one of %s%s%s%s%s%s%s", r->from,
                   key, s, names[0], n > 1 ? ", " : "", n > 1 ? names[1] : "", n > 2 ? ", " : "",
                   n > 2 ? names[2] : "", n > 3 ? ", " : "", n > 3 ? names[3] : "");
}

// ---------------------------------------------------------------------------
// the two kinds

#define BIG 1e30
#define OPTIONAL(d) (d)
#define REQUIRED NAN

int profile_hardware_json(const cJSON *o, const char *from, hw_profile_t *hw, char *err)
{
    memset(hw, 0, sizeof *hw);
    snprintf(hw->from, sizeof hw->from, "%s", from);
    reader_t r = {o, from, err};
    if (!cJSON_IsObject(o))
        return err_set(err, DDP_ERR_INPUT, "%s: not a JSON object", from);
    double count = 0;
    TRY(text(&r, "name", true, hw->name, sizeof hw->name));
    TRY(text(&r, "source", true, hw->source, sizeof hw->source));
    TRY(text(&r, "gpu.name", true, hw->gpu, sizeof hw->gpu));
    TRY(num(&r, "gpu.count", 1, false, 64, REQUIRED, &count));
    if (count != floor(count))
        return err_set(err, DDP_ERR_INPUT, "%s: gpu.count: %g is not a whole number", from, count);
    hw->count = (int)count;
    static const char *const fk[PROF_DTYPES] = {"gpu.flops.fp32", "gpu.flops.tf32",
                                                "gpu.flops.fp16", "gpu.flops.bf16"};
    for (int d = 0; d < PROF_DTYPES; d++) /* 0: the GPU has no such unit */
        TRY(num(&r, fk[d], 0, d == PROF_FP32, BIG, REQUIRED, &hw->flops[d]));
    TRY(num(&r, "gpu.mem_bw", 0, true, BIG, REQUIRED, &hw->mem_bw));
    TRY(num(&r, "gpu.memory", 0, true, BIG, REQUIRED, &hw->memory));
    TRY(num(&r, "gpu.efficiency", 0, true, 1, OPTIONAL(0.5), &hw->efficiency));
    TRY(text(&r, "link.kind", true, hw->link_kind, sizeof hw->link_kind));
    TRY(flag(&r, "link.p2p", true, &hw->p2p));
    TRY(num(&r, "link.bw", 0, true, BIG, REQUIRED, &hw->link_bw));
    TRY(num(&r, "link.latency", 0, false, 1, REQUIRED, &hw->link_latency));
    TRY(num(&r, "link.gpu_bw", 0, true, BIG, OPTIONAL(hw->link_bw), &hw->gpu_bw));
    TRY(num(&r, "link.allreduce_bw", 0, true, BIG, OPTIONAL(0), &hw->allreduce_bw));
    TRY(num(&r, "host.pcie_bw", 0, true, BIG, REQUIRED, &hw->pcie_bw));
    return DDP_OK;
}

int profile_workload_json(const cJSON *o, const char *from, workload_t *wl, char *err)
{
    memset(wl, 0, sizeof *wl);
    snprintf(wl->from, sizeof wl->from, "%s", from);
    reader_t r = {o, from, err};
    if (!cJSON_IsObject(o))
        return err_set(err, DDP_ERR_INPUT, "%s: not a JSON object", from);
    double b = 0, g = 0;
    static const char *const opts[] = {"sgd", "sgd-momentum", "adam"};
    wl->optimizer = PROF_OPT_ADAM;
    TRY(text(&r, "name", true, wl->name, sizeof wl->name));
    TRY(text(&r, "source", true, wl->source, sizeof wl->source));
    TRY(num(&r, "params", 1, false, BIG, REQUIRED, &wl->params));
    TRY(pick(&r, "dtype", true, dtype_names, PROF_DTYPES, &wl->dtype));
    TRY(num(&r, "flops_per_sample", 0, true, BIG, REQUIRED, &wl->flops_per_sample));
    TRY(num(&r, "batch_per_device", 1, false, 1 << 24, REQUIRED, &b));
    TRY(num(&r, "global_batch", 0, false, 1 << 24, OPTIONAL(0), &g));
    if (b != floor(b) || g != floor(g))
        return err_set(err, DDP_ERR_INPUT, "%s: %s: not a whole number", from,
                       b != floor(b) ? "batch_per_device" : "global_batch");
    wl->batch_per_device = (int)b;
    wl->global_batch = (int)g;
    TRY(num(&r, "input_bytes_per_sample", 0, false, BIG, REQUIRED, &wl->in_bytes));
    TRY(num(&r, "output_bytes_per_sample", 0, false, BIG, REQUIRED, &wl->out_bytes));
    TRY(num(&r, "ops_per_step", 0, false, BIG, REQUIRED, &wl->ops));
    TRY(pick(&r, "optimizer", false, opts, 3, &wl->optimizer));
    TRY(flag(&r, "loss_inside", false, &wl->loss_inside));
    TRY(num(&r, "late_params", 0, false, wl->params, OPTIONAL(0), &wl->late_params));
    TRY(num(&r, "load_samples_per_s", 0, false, BIG, OPTIONAL(0), &wl->load_rate));
    double workers = 1;
    TRY(num(&r, "load_workers", 1, false, 4096, OPTIONAL(1), &workers));
    if (workers != floor(workers))
        return err_set(err, DDP_ERR_INPUT, "%s: load_workers: not a whole number", from);
    wl->load_workers = (int)workers;
    TRY(num(&r, "op_s", 0, true, 1, OPTIONAL(PROF_OP_S), &wl->op_s));
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// NAME or FILE

/* The JSON of a shipped profile or a file; from: what the messages call it. */
static cJSON *load(const char *opt, const char *kind, const char *arg, char *from, size_t nfrom,
                   char *err)
{
    const char *shipped = strchr(arg, '/') ? NULL : profile_shipped(kind, arg);
    char *buf = NULL;
    if (shipped) {
        snprintf(from, nfrom, "%s: shipped profile %s", opt, arg);
    } else {
        snprintf(from, nfrom, "%s %s", opt, arg);
        FILE *f = NULL;
        uint64_t size = 0;
        char e[ERR_LEN];
        if (infile_fopen(arg, &f, &size, e) != DDP_OK) {
            char names[512];
            profile_names(kind, names, sizeof names);
            if (!strchr(arg, '/') && !strstr(arg, ".json"))
                err_set(err, DDP_ERR_INPUT, "%s: no shipped %s profile of that name (%s) and no such file",
                        from, kind, names);
            else
                err_set(err, DDP_ERR_INPUT, "%s: %s", from, e);
            return NULL;
        }
        if (size > PROFILE_MAX_BYTES) {
            fclose(f);
            err_set(err, DDP_ERR_INPUT, "%s: %llu bytes (a profile is at most %d)", from,
                    (unsigned long long)size, PROFILE_MAX_BYTES);
            return NULL;
        }
        buf = malloc(size + 1);
        size_t got = buf ? fread(buf, 1, size, f) : 0;
        int rerr = ferror(f);
        fclose(f);
        if (!buf || got != size || rerr) {
            free(buf);
            err_set(err, DDP_ERR_INPUT, "%s: %s", from, buf ? "cannot read it" : "out of memory");
            return NULL;
        }
        buf[size] = 0;
    }
    cJSON *o = cJSON_Parse(shipped ? shipped : buf);
    if (!o) {
        const char *where = cJSON_GetErrorPtr();
        err_set(err, DDP_ERR_INPUT, "%s: not valid JSON near '%.20s'", from, where ? where : "");
    }
    free(buf);
    return o;
}

int profile_hardware(const char *arg, hw_profile_t *hw, char *err)
{
    char from[CONFIG_PATH_LEN + 32];
    cJSON *o = load("--hardware", "hardware", arg, from, sizeof from, err);
    if (!o)
        return DDP_ERR_INPUT;
    int rc = profile_hardware_json(o, from, hw, err);
    cJSON_Delete(o);
    return rc;
}

int profile_workload(const char *arg, workload_t *wl, char *err)
{
    char from[CONFIG_PATH_LEN + 32];
    cJSON *o = load("--workload", "workload", arg, from, sizeof from, err);
    if (!o)
        return DDP_ERR_INPUT;
    int rc = profile_workload_json(o, from, wl, err);
    cJSON_Delete(o);
    return rc;
}

void profile_workload_mlp(const config_t *c, workload_t *wl)
{
    memset(wl, 0, sizeof *wl);
    double weights = 0, params = 0;
    for (int i = 0; i + 1 < c->ndims; i++) {
        weights += (double)c->dims[i] * c->dims[i + 1];
        params += (double)c->dims[i] * c->dims[i + 1] + c->dims[i + 1];
    }
    int layers = c->ndims - 1;
    snprintf(wl->name, sizeof wl->name, "this run's MLP");
    snprintf(wl->source, sizeof wl->source,
             "ddpbench's own model: Linear widths of the run, its global batch and precision");
    snprintf(wl->from, sizeof wl->from, "the run's model");
    wl->params = params;
    wl->dtype = c->precision == PREC_BF16 ? PROF_BF16
              : c->precision == PREC_TF32 ? PROF_TF32 : PROF_FP32;
    wl->flops_per_sample = 6.0 * weights; /* a multiply-add forward, two backward */
    wl->batch_per_device = c->batch > 0 ? c->batch : 1;
    wl->global_batch = wl->batch_per_device;
    wl->in_bytes = 4.0 * c->dims[0];
    wl->out_bytes = 4.0 * c->dims[c->ndims - 1];
    /* PyTorch's twin: forward a Linear and an activation a layer, the loss;
     * backward two GEMMs, a bias sum and the activation's a layer */
    wl->ops = 6.0 * layers + 4.0;
    wl->op_s = PROF_OP_S;
    wl->load_workers = 1;
    wl->optimizer = c->optim.kind == OPTIM_SGD ? (c->optim.momentum > 0 ? PROF_OPT_MOMENTUM
                                                                          : PROF_OPT_SGD)
                                               : PROF_OPT_ADAM;
}
