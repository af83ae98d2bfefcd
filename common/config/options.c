/* common/config/options.c: the command line.  One table holds every option:
 * its name, its argument, its default, its help and the field it sets (with
 * the field's kind and bounds, or a setter of its own for the few that need
 * one), and what derives from it (fields.h: the fingerprint, the JSON echo,
 * the baseline's identity, a checkpoint's facts, the twin's constants).
 * config_defaults() applies the defaults through the same setters the
 * command line uses, and --help prints them from the same rows, so an option
 * is one row and a default is written once.  What is left outside the table
 * are the rules that join fields (config_parse's end, config_validate).
 * Every malformed value is one clear line (see config.h). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"
#include "common/base/text.h"
#include "common/config/config.h"
#include "common/config/fields.h"

// ---------------------------------------------------------------------------
// strict number parsing

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out, char *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    bool digits = end != s && !*end && text_is_decimal(s, strlen(s)) && !strpbrk(s, ".eE");
    if (!digits)
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not an integer", opt, s);
    if (errno == ERANGE || v > hi)
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is too large (at most %ld)", opt, s, hi);
    if (v < lo)
        return err_set(err, DDP_ERR_INPUT, "--%s: %ld is too small (at least %ld)", opt, v, lo);
    *out = v;
    return DDP_OK;
}

/* A decimal number (no hex floats, no "inf"/"nan") in [lo, hi], or in
 * (lo, hi] when lo_open. */
static int parse_double(const char *opt, const char *s, double lo, double hi, bool lo_open,
                        double *out, char *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !text_is_decimal(s, strlen(s)))
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not a number", opt, s);
    if (v > hi || !isfinite(v))
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is too large (at most %g)", opt, s, hi);
    if (v < lo || (lo_open && v == lo))
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is too small (%s %g)", opt, s,
                       lo_open ? "it must be more than" : "at least", lo);
    *out = v;
    return DDP_OK;
}

static int parse_float(const char *opt, const char *s, double lo, double hi, float *out,
                       char *err)
{
    double d = 0;
    int rc = parse_double(opt, s, lo, hi, false, &d, err);
    if (rc == DDP_OK)
        *out = (float)d;
    return rc;
}

/* A byte count: digits with an optional K, M or G (powers of 1024), like
 * nccl-tests' -b and -e. */
static int parse_bytes(const char *opt, const char *s, long *out, char *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    long mul = 1;
    if (end != s && (*end == 'K' || *end == 'k'))
        mul = 1L << 10, end++;
    else if (end != s && (*end == 'M' || *end == 'm'))
        mul = 1L << 20, end++;
    else if (end != s && (*end == 'G' || *end == 'g'))
        mul = 1L << 30, end++;
    if (end == s || *end || errno || v < 0)
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not a byte count (e.g. 8, 64K, 16M, 1G)",
                       opt, s);
    if (v > (4L << 30) / mul)
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is more than 4G", opt, s);
    *out = v * mul;
    return DDP_OK;
}

/* --coll: names of comm.h's collectives, in coll_kind_t order (bit k). */
static const char *const coll_names[] = {"broadcast", "all-reduce", "reduce", "all-gather",
                                         "reduce-scatter"};

static int parse_colls(const char *s, unsigned *out, char *err)
{
    *out = 0;
    if (strcmp(s, "all") == 0) {
        *out = CONFIG_COLLS_ALL;
        return DDP_OK;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = -1;
        for (int i = 0; i < (int)(sizeof coll_names / sizeof *coll_names); i++)
            if (strcmp(t, coll_names[i]) == 0)
                k = i;
        if (k < 0)
            return err_set(err, DDP_ERR_INPUT,
                           "--coll: unknown collective '%s' (all-reduce, broadcast, "
                           "reduce-scatter, all-gather, reduce, or all)",
                           t);
        *out |= 1u << k;
    }
    if (!*out)
        return err_set(err, DDP_ERR_INPUT, "--coll: empty list");
    return DDP_OK;
}

static int copy_path(const char *opt, const char *s, char *dst, char *err)
{
    if (!*s)
        return err_set(err, DDP_ERR_INPUT, "--%s: empty file name", opt);
    if (strlen(s) >= CONFIG_PATH_LEN)
        return err_set(err, DDP_ERR_INPUT, "--%s: file name longer than %d bytes", opt,
                       CONFIG_PATH_LEN - 1);
    strcpy(dst, s);
    return DDP_OK;
}

static int parse_name(const char *opt, const char *s, int (*parse)(const char *), int *out,
                      const char *choices, char *err)
{
    int v = parse(s);
    if (v < 0)
        return err_set(err, DDP_ERR_INPUT, "--%s: unknown value '%s' (one of: %s)", opt, s,
                       choices);
    *out = v;
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the options that need a setter of their own

typedef struct {
    bool wd, batch, repeat; /* given on the command line (not a default) */
} explicit_t;

/* A setter: option name's value v (NULL for a flag) into c; ex records what
 * the user gave explicitly (NULL while applying the defaults). */
typedef int (*setter_fn)(config_t *c, const char *name, const char *v, explicit_t *ex,
                         char *err);

static int set_gpus(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    if (strcmp(v, "auto") == 0) {
        c->ngpus = 0;
        return DDP_OK;
    }
    return config_parse_int_list(v, c->gpus, MAX_GPU_LIST, &c->ngpus, name, true, err);
}

static int set_layers(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    TRY(config_parse_int_list(v, c->dims, MODEL_MAX_LAYERS + 1, &c->ndims, name, true, err));
    if (c->ndims < 2)
        return err_set(err, DDP_ERR_INPUT,
                       "--layers: '%s' needs at least an input and an output width", v);
    for (int i = 0; i < c->ndims; i++)
        if (c->dims[i] < 1)
            return err_set(err, DDP_ERR_INPUT, "--layers: width %d in '%s' must be >= 1",
                           c->dims[i], v);
    return DDP_OK;
}

static int set_act(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    int e = act_parse(v);
    if (e < 0 || e == ACT_NONE)
        return err_set(err, DDP_ERR_INPUT, "--%s: unknown value '%s' (one of: relu, tanh, "
                       "sigmoid, gelu)", name, v);
    c->act = (act_t)e;
    return DDP_OK;
}

static int set_weight_decay(config_t *c, const char *name, const char *v, explicit_t *ex,
                            char *err)
{
    if (ex)
        ex->wd = true;
    return parse_float(name, v, 0.0, 1e6, &c->optim.weight_decay, err);
}

static int set_seed(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)name, (void)ex;
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-')
        return err_set(err, DDP_ERR_INPUT, "--seed: '%s' is not a non-negative integer", v);
    c->seed = s;
    return DDP_OK;
}

static int set_batch(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    long l = 0;
    if (ex)
        ex->batch = true;
    TRY(parse_long(name, v, 1, 1 << 24, &l, err));
    c->batch = (int)l;
    return DDP_OK;
}

static int set_rank_samples(config_t *c, const char *name, const char *v, explicit_t *ex,
                            char *err)
{
    (void)ex;
    int n[MAX_DEVICES];
    TRY(config_parse_int_list(v, n, MAX_DEVICES, &c->nrank_samples, name, true, err));
    for (int i = 0; i < c->nrank_samples; i++)
        c->rank_samples[i] = n[i];
    return DDP_OK;
}

static int set_bucket_mb(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    c->bucket_auto = strcmp(v, "auto") == 0;
    if (!c->bucket_auto)
        return parse_double(name, v, 0.0, 1 << 20, true, &c->bucket_mb, err);
    c->bucket_mb = CONFIG_BUCKET_MB; /* the warm-up steps start from the default */
    return DDP_OK;
}

/* --zero N or a list (1,2,3); --zero1 (no value) is --zero 1 */
static int set_zero(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    if (!v) {
        c->zero = 1;
        c->zero_stages[0] = 1;
        c->nzero_stages = 1;
        return DDP_OK;
    }
    int n[4];
    int k = 0;
    if (strcmp(v, "0") == 0) { /* plain DDP, as without --zero */
        c->zero = c->nzero_stages = 0;
        return DDP_OK;
    }
    TRY(config_parse_int_list(v, n, 3, &k, name, false, err));
    for (int i = 0; i < k; i++) {
        if (n[i] < 1 || n[i] > 3)
            return err_set(err, DDP_ERR_INPUT, "--%s: %d is not a stage (1, 2 or 3)", name, n[i]);
        for (int j = 0; j < i; j++)
            if (n[j] == n[i])
                return err_set(err, DDP_ERR_INPUT, "--%s: stage %d twice", name, n[i]);
        c->zero_stages[i] = n[i];
    }
    c->nzero_stages = k;
    c->zero = n[0];
    return DDP_OK;
}

static int set_mem_limit(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    long b = 0;
    TRY(parse_bytes(name, v, &b, err));
    if (b <= 0)
        return err_set(err, DDP_ERR_INPUT, "--%s: must be more than 0 bytes", name);
    c->mem_limit = (double)b;
    return DDP_OK;
}

/* --repeat N, noted as given: --against's most rounds default to
 * CONFIG_AB_ROUNDS unless it is */
static int set_repeat(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    long l = 0;
    TRY(parse_long(name, v, 1, CONFIG_REPEAT_MAX, &l, err));
    c->repeat = (int)l;
    if (ex)
        ex->repeat = true;
    return DDP_OK;
}

static int set_slow_rank(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    const char *colon = strchr(v, ':');
    char r[32];
    long l = 0;
    if (!colon || (size_t)(colon - v) >= sizeof r)
        return err_set(err, DDP_ERR_INPUT, "--slow-rank: '%s' is not RANK:FACTOR (e.g. 1:3)", v);
    memcpy(r, v, (size_t)(colon - v));
    r[colon - v] = 0;
    TRY(parse_long(name, r, 0, MAX_DEVICES - 1, &l, err));
    c->slow_rank = (int)l;
    return parse_double(name, colon + 1, 1, 100, false, &c->slow_factor, err);
}

/* none | fp16 | bf16 | powersgd:RANK[:START] */
static int set_comm_hook(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    c->powersgd_rank = 0;
    c->powersgd_start = CONFIG_POWERSGD_START;
    if (!strcmp(v, "none") || !strcmp(v, "fp16") || !strcmp(v, "bf16")) {
        c->comm_hook = v[0] == 'n' ? HOOK_NONE : v[0] == 'f' ? HOOK_FP16 : HOOK_BF16;
        return DDP_OK;
    }
    if (strncmp(v, "powersgd:", 9))
        return err_set(err, DDP_ERR_INPUT, "--comm-hook: '%.40s' is not none, fp16, bf16 or "
                       "powersgd:RANK[:START] (e.g. powersgd:2)", v);
    char r[32];
    const char *rk = v + 9, *colon = strchr(rk, ':');
    size_t len = colon ? (size_t)(colon - rk) : strlen(rk);
    if (len == 0 || len >= sizeof r)
        return err_set(err, DDP_ERR_INPUT, "--comm-hook: '%.40s' is not powersgd:RANK[:START] "
                       "(e.g. powersgd:2)", v);
    memcpy(r, rk, len);
    r[len] = 0;
    long l = 0;
    TRY(parse_long(name, r, 1, 1024, &l, err));
    c->powersgd_rank = (int)l;
    /* PowerSGD keeps error feedback and warm start: at least 2 plain steps, as
     * PyTorch requires of start_powerSGD_iter with them */
    if (colon)
        TRY(parse_long(name, colon + 1, 2, 1L << 40, &c->powersgd_start, err));
    c->comm_hook = HOOK_POWERSGD;
    return DDP_OK;
}

static int set_colls(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)name, (void)ex;
    return parse_colls(v, &c->colls, err);
}

/* --tf32: kept from before --precision, a synonym of --precision tf32 */
static int set_tf32(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)name, (void)v, (void)ex, (void)err;
    c->precision = PREC_TF32;
    c->nprecisions = 0;
    return DDP_OK;
}

/* --precision P, or a list under compare (fp32,bf16: single, dp and ddp at
 * each); the run's precision is the first */
static int set_precision(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    char buf[64];
    if (strlen(v) >= sizeof buf)
        return err_set(err, DDP_ERR_INPUT, "--%s: '%.32s...' is too long", name, v);
    snprintf(buf, sizeof buf, "%s", v);
    int k = 0;
    if (!buf[0] || buf[strlen(buf) - 1] == ',' || buf[0] == ',')
        return err_set(err, DDP_ERR_INPUT, "--%s: unknown value '%s' (one of: fp32, tf32, bf16, "
                       "or a list of them under compare)", name, v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int p = precision_parse(t);
        if (p < 0)
            return err_set(err, DDP_ERR_INPUT, "--%s: unknown value '%s' (one of: fp32, tf32, bf16)",
                           name, t);
        if (k == 3)
            return err_set(err, DDP_ERR_INPUT, "--%s: at most three precisions", name);
        for (int j = 0; j < k; j++)
            if ((int)c->precisions[j] == p)
                return err_set(err, DDP_ERR_INPUT, "--%s: %s twice", name, t);
        c->precisions[k++] = (precision_t)p;
    }
    c->nprecisions = k;
    c->precision = c->precisions[0];
    return DDP_OK;
}

static int set_scenario(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)name, (void)ex;
    if (strlen(v) >= sizeof c->scenario)
        return err_set(err, DDP_ERR_INPUT, "--scenario: unknown scenario '%.40s' (see "
                       "--scenario list)", v);
    strcpy(c->scenario, v);
    return DDP_OK;
}

/* --hardware, --workload: a profile's name or file (app/predict/ reads it) */
static int set_profile(config_t *c, const char *name, const char *v, explicit_t *ex, char *err)
{
    (void)ex;
    char *f = strcmp(name, "hardware") == 0 ? c->hardware : c->workload;
    if (!*v || strlen(v) >= CONFIG_PROFILE_LEN)
        return err_set(err, DDP_ERR_INPUT, "--%s: '%.40s' is %s (a profile's name or a file of "
                       "fewer than %d characters)", name, v, *v ? "too long" : "empty",
                       CONFIG_PROFILE_LEN);
    strcpy(f, v);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the values the derivations read (fields.h), where a field's kind does not say

static void list_of_int(config_value_t *v, const int *a, int n)
{
    v->type = CV_LIST;
    v->n = n;
    for (int i = 0; i < n; i++)
        v->list[i] = a[i];
}

static void get_gpus(const config_t *c, config_value_t *v) { list_of_int(v, c->gpus, c->ngpus); }
static void get_layers(const config_t *c, config_value_t *v) { list_of_int(v, c->dims, c->ndims); }

static void get_rank_samples(const config_t *c, config_value_t *v)
{
    v->type = CV_LIST;
    v->n = c->nrank_samples;
    for (int i = 0; i < c->nrank_samples; i++)
        v->list[i] = c->rank_samples[i];
}

static void get_scenario(const config_t *c, config_value_t *v)
{
    v->type = CV_STR;
    v->s = c->scenario;
}

static void get_act(const config_t *c, config_value_t *v)
{
    v->type = CV_STR;
    v->s = act_name(c->act);
}

static void get_weight_decay(const config_t *c, config_value_t *v)
{
    v->type = CV_FLOAT;
    v->f = c->optim.weight_decay;
}

static void get_seed(const config_t *c, config_value_t *v)
{
    v->type = CV_UINT;
    v->u = (unsigned long long)c->seed;
}

static void get_batch(const config_t *c, config_value_t *v)
{
    v->type = CV_INT;
    v->i = c->batch;
}

static void get_repeat(const config_t *c, config_value_t *v)
{
    v->type = CV_INT;
    v->i = c->repeat;
}

static void get_colls(const config_t *c, config_value_t *v)
{
    v->type = CV_UINT;
    v->u = c->colls;
}

/* the cap as a number (the warm-up's start under auto), the word beside it */
static void get_bucket_mb(const config_t *c, config_value_t *v)
{
    v->type = CV_DOUBLE;
    v->d = c->bucket_mb;
    v->word = c->bucket_auto ? "auto" : NULL;
}

/* the precision (a list under compare: the first, the main columns') */
static void get_precision(const config_t *c, config_value_t *v)
{
    v->type = CV_STR;
    v->s = precision_name(c->precision);
}

/* the stage (a list under compare: the first, as --mode ddp would run it) */
static void get_zero(const config_t *c, config_value_t *v)
{
    v->type = CV_INT;
    v->i = c->zero;
}

static void get_zero1(const config_t *c, config_value_t *v)
{
    v->type = CV_BOOL;
    v->b = c->zero == 1;
}

static void get_mem_limit(const config_t *c, config_value_t *v)
{
    v->type = CV_DOUBLE;
    v->d = c->mem_limit;
}

static void get_comm_hook(const config_t *c, config_value_t *v)
{
    v->type = CV_STR;
    config_comm_hook_text(c, v->buf, sizeof v->buf);
    v->s = v->buf;
}

static void get_slow_rank(const config_t *c, config_value_t *v)
{
    v->type = CV_STR;
    snprintf(v->buf, sizeof v->buf, "%d:%.9g", c->slow_rank, c->slow_factor);
    v->s = v->buf;
}

/* the stream every mode reads: --rank-samples' ranks, else the sampler's */
static void get_stream_ranks(const config_t *c, config_value_t *v)
{
    v->type = CV_INT;
    v->i = config_stream_ranks(c);
}

static const char *show_mode(int v) { return mode_name((mode_t_)v); }
static const char *show_backend_kind(int v) { return backend_kind_name((backend_kind_t)v); }
static const char *show_loss(int v) { return loss_name((loss_t)v); }
static const char *show_optim(int v) { return optim_name((optim_kind_t)v); }
static const char *show_synth(int v) { return synth_name((synth_kind_t)v); }
static const char *show_comm(int v) { return comm_name((comm_kind_t)v); }
static const char *show_launcher(int v) { return launcher_name((launcher_kind_t)v); }
static const char *show_cuda_graph(int v) { return cuda_graph_name((cuda_graph_t)v); }

// ---------------------------------------------------------------------------
// the option table: one row per option, used for the defaults, getopt, --help
// and the parse.  A new option is one row: its name, argument, default, help
// and what it sets (one of the kinds below, or SET(its own setter)).

typedef enum {
    K_PASS1, /* handled before the others (--help, --version, --model) */
    K_ON,    /* a flag: the bool field becomes true */
    K_OFF,   /* a flag: the bool field becomes false (--no-X) */
    K_INT,   /* an int in [lo, hi] */
    K_LONG,  /* a long in [lo, hi] */
    K_FLOAT, /* a float in [lo, hi] */
    K_DOUBLE,/* a double in [lo, hi] */
    K_ABOVE, /* a double in (lo, hi] */
    K_BYTES, /* a long byte count, K/M/G suffixes */
    K_PATH,  /* a file name (CONFIG_PATH_LEN) */
    K_NAME,  /* an enum by name: parse(v) >= 0, choices for the error */
    K_SET,   /* set(): a setter of its own */
} opt_kind_t;

typedef struct {
    const char *name;
    const char *arg;     /* NULL: a flag */
    const char *dflt;    /* the default, applied by config_defaults() through the same
                            setter as the command line (a flag: "on" sets it); NULL: the
                            preset's value, or nothing */
    const char *shown;   /* --help's [default] when it is not dflt ("preset", "none") */
    const char *help;
    const char *section; /* starts a new section in --help */
    opt_kind_t kind;
    size_t off;          /* the field in config_t */
    double lo, hi;
    int (*parse)(const char *); /* K_NAME */
    const char *choices;        /* K_NAME */
    const char *(*show)(int);   /* K_NAME: the value's name */
    setter_fn set;              /* K_SET */
    /* the value the derivations see, when it is not the field's as its kind
     * reads it (a setter's field, or a figure resolved from several) */
    void (*get)(const config_t *c, config_value_t *v);
    const char *examples[2];    /* K_SET: two values for config_field_flip (tests) */
    char letter;                /* a short form (nccl-tests' letters for --mode comm) */
    config_derive_t d;          /* what derives from it (fields.h) */
} opt_t;

#define FIELD(f) .off = offsetof(config_t, f)
#define ON(f) .kind = K_ON, FIELD(f)
#define OFF(f) .kind = K_OFF, FIELD(f)
#define INT(f, a, b) .kind = K_INT, FIELD(f), .lo = (a), .hi = (b)
#define LONG(f, a, b) .kind = K_LONG, FIELD(f), .lo = (a), .hi = (b)
#define FLOAT(f, a, b) .kind = K_FLOAT, FIELD(f), .lo = (a), .hi = (b)
#define DOUBLE(f, a, b) .kind = K_DOUBLE, FIELD(f), .lo = (a), .hi = (b)
#define ABOVE(f, a, b) .kind = K_ABOVE, FIELD(f), .lo = (a), .hi = (b)
#define BYTES(f) .kind = K_BYTES, FIELD(f)
#define PATH(f) .kind = K_PATH, FIELD(f)
#define NAME(f, stem, ch)                                                                  \
    .kind = K_NAME, FIELD(f), .parse = stem##_parse, .show = show_##stem, .choices = (ch)
#define SET(fn, get_fn, ex1, ex2)                                                          \
    .kind = K_SET, .set = (fn), .get = (get_fn), .examples = {(ex1), (ex2)}
/* what derives from a row (fields.h): its effect, then the fingerprint
 * (group, and how), the JSON echo (key, and the baseline: MATCH | WARN | NO),
 * the checkpoint, the twin */
#define EFF(e) .d.effect = (e)
#define FPRINT(g) .d.fp = FP_##g
#define FPRINT_GIVEN(g) .d.fp = FP_##g, .d.fpv = FPV_GIVEN
#define FPRINT_FILE(g) .d.fp = FP_##g, .d.fpv = FPV_FILE
#define FPRINT_D(g) .d.fp = FP_##g, .d.fpv = FPV_DERIVED
#define FPRINT_RANK0 .d.fpv = FPV_RANK0
#define JSON(k, b) .d.json = (k), .d.jsonv = J_VALUE, .d.base = B_##b
#define JSON_D(k, b) .d.json = (k), .d.jsonv = J_DERIVED, .d.base = B_##b
#define NO_JSON .d.jsonv = J_NO
#define CKPT .d.ckpt = C_FACT
#define CKPT_D .d.ckpt = C_DERIVED
#define CKPT_FREE .d.ckpt = C_FREE
#define SGD_ONLY .d.optims = 1u << OPTIM_SGD
#define ADAM_ONLY .d.optims = (1u << OPTIM_ADAM) | (1u << OPTIM_ADAMW)
#define TWIN(k, note) .d.twin = (k), .d.twin_note = (note), .d.twinv = T_CONST
#define TWIN_D(k) .d.twin = (k), .d.twinv = T_DERIVED
#define TWIN_FILES .d.twinv = T_FILES
#define TWIN_REFUSED .d.twinv = T_REFUSED
#define TWIN_MOOT .d.twinv = T_MOOT
#define PASS1 .kind = K_PASS1
#define STR_(x) #x
#define STR(x) STR_(x) /* a default written as a number elsewhere */

static const opt_t opts[] = {
    {"mode", "M", "compare", NULL,
     "single | dp | ddp | compare (all three on the same devices, data and global batch, side by "
     "side; single uses the first device) | comm (the collectives alone, like nccl-tests)",
     "What to run", NAME(mode, mode, "single, dp, ddp, compare, comm"),
     EFF(CF_ARITH), FPRINT(OTHER), JSON("mode", MATCH), CKPT, TWIN("MODE", "single | dp | ddp")},
    {"gpus", "LIST", "auto", NULL,
     "device ids, e.g. 0,1,2; auto: every visible GPU, or one CPU worker per core (max 8);"
     " on CUDA, dp may repeat an id (0,0) for replicas on one GPU, and so may ddp with --comm shm",
     NULL, SET(set_gpus, get_gpus, "0,1,2", "0"),
     EFF(CF_ARITH), FPRINT_D(WORLD), JSON_D("devices", WARN), CKPT_D, TWIN_D("WORLD")},
    {"backend", "B", "auto", NULL, "auto | cpu | cuda (auto: CUDA when a GPU is visible)", NULL, NAME(backend, backend_kind, "auto, cpu, cuda"),
     EFF(CF_ARITH | CF_SPEED), FPRINT(OTHER), JSON("backend", MATCH), CKPT_FREE, TWIN_D("DEVICE")},
    {"threads", "N", "1", NULL, "OpenBLAS threads for --mode single on the CPU", NULL, INT(threads, 1, 256),
     EFF(CF_SPEED), JSON("threads", WARN)},
    {"scenario", "NAME", NULL, "none",
     "reproduce a failure PyTorch users meet and explain it: uneven, straggler, dp-device0, "
     "mismatch (list: each in a line); exit 0 when it behaved as described",
     NULL, SET(set_scenario, get_scenario, "uneven", "straggler"),
     EFF(CF_META)},
    {"precision", "P", "fp32", NULL,
     "fp32 | tf32 (CUDA: TF32 tensor-core GEMMs, outside the 1e-4 agreement with fp32) | bf16 "
     "(PyTorch autocast: fp32 weights, bf16 GEMM inputs and activations, fp32 accumulation, "
     "loss and gradients); a list under compare (fp32,bf16: single, dp and ddp at each)",
     NULL, SET(set_precision, get_precision, "bf16", "tf32"),
     /* the baseline's check is report_baseline.c's own (a baseline from
      * before this key ran fp32), hence NO here */
     /* a checkpoint fact: the state is fp32 either way, but a resumed run
      * ends with the bits of the run that never stopped only in the
      * precision it started with (--init starts over in another) */
     EFF(CF_ARITH | CF_SPEED), FPRINT(OTHER), JSON("precision", NO), CKPT,
     TWIN("PRECISION", "fp32 | tf32 | bf16 (torch.autocast to bfloat16)")},
    /* a synonym: what it changes is --precision's (its row derives) */
    {"tf32", NULL, NULL, "off", "the same as --precision tf32", NULL, SET(set_tf32, NULL, NULL, NULL),
     EFF(CF_META), JSON_D("tf32", WARN)},
    {"cuda-graph", "M", "auto", NULL,
     "CUDA: capture each full step after the first as a CUDA graph and replay it (one launch "
     "a step; single, each ddp rank over NCCL, dp as one graph of every device): auto (where "
     "the step qualifies and NCCL captures, dp over NCCL eagerly; it says why not) | on (an "
     "error where not) | off",
     NULL, NAME(cuda_graph, cuda_graph, "auto, on, off"),
     /* shared: a ddp rank over NCCL that would capture probes NCCL first, a
      * collective of every rank (common/train/graph_probe.c) */
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("cuda_graph", WARN)},
    {"model", "NAME", NULL, CONFIG_DEFAULT_PRESET,
     "preset: seed-linear, seed-logreg, mlp-small, mlp-medium, mlp-large (options override it)",
     "The model", PASS1,
     EFF(CF_META), JSON_D("model", NO)},
    {"layers", "D0,..,Dn", NULL, "preset", "Linear widths, input first", NULL, SET(set_layers, get_layers, "3,5,2", "4,2"),
     EFF(CF_ARITH), FPRINT(MODEL), JSON("layers", MATCH), CKPT, TWIN("LAYERS", "Linear widths, input first")},
    {"act", "A", NULL, "preset", "relu | tanh | sigmoid | gelu, between layers", NULL, SET(set_act, get_act, "tanh", "relu"),
     EFF(CF_ARITH), FPRINT(MODEL), JSON("act", WARN), CKPT, TWIN("ACT", "between the layers")},
    {"loss", "L", NULL, "preset", "mse | bce (sigmoid + BCE, from logits) | ce (softmax + CE)",
     NULL, NAME(loss, loss, "mse, bce, ce"),
     EFF(CF_ARITH), FPRINT(LOSS), JSON("loss", MATCH), CKPT, TWIN("LOSS", "mse | bce (from logits) | ce")},
    {"optim", "O", NULL, "preset", "sgd | adam | adamw", NULL, NAME(optim.kind, optim, "sgd, adam, adamw"),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.name", MATCH), CKPT, TWIN("OPTIM", "sgd | adam | adamw")},
    {"lr", "X", NULL, "preset", "learning rate", NULL, FLOAT(optim.lr, 0.0, 1e6),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.lr", WARN), CKPT, TWIN("LR", NULL)},
    {"momentum", "X", NULL, "preset", "SGD momentum", NULL, FLOAT(optim.momentum, 0.0, 1e6),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.momentum", WARN), CKPT, SGD_ONLY, TWIN("MOMENTUM", "SGD")},
    {"dampening", "X", "0", NULL, "SGD dampening", NULL, FLOAT(optim.dampening, 0.0, 1.0),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.dampening", WARN), CKPT, SGD_ONLY, TWIN("DAMPENING", "SGD")},
    {"nesterov", NULL, NULL, "off", "SGD Nesterov momentum", NULL, ON(optim.nesterov),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.nesterov", WARN), CKPT, SGD_ONLY, TWIN("NESTEROV", "SGD")},
    {"weight-decay", "X", "0", "0 (adamw: 0.01)", "weight decay (AdamW: decoupled)", NULL, SET(set_weight_decay, get_weight_decay, "0.5", "0.25"),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.weight_decay", WARN), CKPT, TWIN("WEIGHT_DECAY", NULL)},
    {"beta1", "X", "0.9", NULL, "Adam beta1", NULL, FLOAT(optim.beta1, 0.0, 0.999999999),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.beta1", WARN), CKPT, ADAM_ONLY, TWIN("BETA1", "Adam, AdamW")},
    {"beta2", "X", "0.999", NULL, "Adam beta2", NULL, FLOAT(optim.beta2, 0.0, 0.999999999),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.beta2", WARN), CKPT, ADAM_ONLY, TWIN("BETA2", "Adam, AdamW")},
    {"eps", "X", "1e-8", NULL, "Adam epsilon", NULL, FLOAT(optim.eps, 0.0, 1.0),
     EFF(CF_ARITH), FPRINT(OPTIM), JSON("optimizer.eps", WARN), CKPT, ADAM_ONLY, TWIN("EPS", "Adam, AdamW")},
    {"seed", "N", "0", NULL, "seed for init, synthetic data and shuffling", NULL, SET(set_seed, get_seed, "7", "8"),
     EFF(CF_ARITH), FPRINT(ORDER), JSON("seed", WARN), CKPT, TWIN("SEED", NULL)},
    {"dataset", "K", "auto", NULL,
     "synthetic set: regression | binary | classes (auto: the one that fits --loss)", "The data", NAME(dataset, synth, "regression, binary, classes"),
     EFF(CF_ARITH), FPRINT(DATA), JSON_D("data.source", WARN), CKPT_D, TWIN_FILES},
    {"samples", "N", NULL, "preset", "rows of synthetic data", NULL, LONG(samples, 1, 1L << 31),
     EFF(CF_ARITH), FPRINT(DATA), JSON_D("data.samples", WARN), CKPT_D, TWIN_FILES},
    {"noise", "X", "0.1", NULL, "std of the noise added to synthetic regression targets", NULL, FLOAT(noise, 0.0, 1e6),
     EFF(CF_ARITH), FPRINT(DATA), NO_JSON, CKPT_D, TWIN_FILES},
    {"data", "FILE", NULL, "none", "features: X.npy (with --targets) or a .csv file", NULL, PATH(data_path),
     EFF(CF_ARITH), FPRINT_D(DATA), JSON_D("data.source", WARN), CKPT_D, TWIN_FILES},
    {"targets", "FILE", NULL, "none", "targets Y.npy for --data X.npy", NULL, PATH(targets_path),
     EFF(CF_ARITH), FPRINT_D(DATA), NO_JSON, CKPT_D, TWIN_FILES},
    {"target-cols", "N", "1", NULL, "CSV: the last N columns are targets", NULL, INT(target_cols, 1, 1 << 20),
     EFF(CF_ARITH), FPRINT(DATA), JSON_D("data.target_cols", WARN), CKPT_D, TWIN_FILES},
    {"batch", "N", NULL, "preset",
     "global batch per micro-step (dp splits it like torch.chunk: 256 over 3 is 86, 86, 84; "
     "ddp deals rank r rows r, r+K, ...: 86, 85, 85, and weighs each rank's gradient by its "
     "rows)",
     "The loop", SET(set_batch, get_batch, "3", "5"),
     EFF(CF_ARITH), FPRINT(BATCH), JSON("batch", MATCH), CKPT, TWIN("BATCH", "the global batch of a micro-batch")},
    {"batch-per-device", "N", NULL, "off",
     "each rank's DataLoader batch_size, PyTorch DDP's convention: the global batch is N x "
     "devices (compare: single then runs all of it)",
     NULL, INT(batch_per_device, 1, 1 << 24),
     EFF(CF_ARITH), FPRINT(BATCH), JSON("batch_per_device", WARN), CKPT_D, TWIN_MOOT},
    {"accum", "K", "1", NULL, "micro-batches per optimizer step (ddp: no_sync on the first K-1)",
     NULL, INT(accum, 1, 1 << 16),
     EFF(CF_ARITH), FPRINT(BATCH), JSON("accum", MATCH), CKPT, TWIN("ACCUM", "micro-batches per optimizer step")},
    {"epochs", "N", NULL, "preset", "passes over the data", NULL, LONG(epochs, 1, 1L << 30),
     EFF(CF_ARITH), FPRINT(SCHEDULE), JSON("epochs", MATCH), CKPT_FREE, TWIN_D("STEPS")},
    {"steps", "N", NULL, "0 (use --epochs)", "stop after N optimizer steps", NULL, LONG(steps, 1, 1L << 40),
     EFF(CF_ARITH), FPRINT(SCHEDULE), JSON("steps", MATCH), CKPT_FREE, TWIN_D("STEPS")},
    {"shuffle", NULL, "on", NULL, "reshuffle every epoch (seed + epoch)", NULL, ON(shuffle),
     EFF(CF_ARITH), FPRINT(ORDER), JSON("shuffle", WARN), CKPT, TWIN("SHUFFLE", "a new order every epoch (drawn by ddpbench: ORDER_FILE)")},
    {"no-shuffle", NULL, NULL, NULL, "keep the data in file order", NULL, OFF(shuffle)},
    {"drop-last", NULL, NULL, "off", "drop the last incomplete batch (and sampler tail)",
     NULL, ON(drop_last),
     EFF(CF_ARITH), FPRINT(ORDER), JSON("drop_last", WARN), CKPT, TWIN("DROP_LAST", NULL)},
    {"sampler-replicas", "N", NULL, "auto",
     "read DistributedSampler(num_replicas=N)'s stream (its padding, or its cut with --drop-last)"
     "; auto: the devices in ddp and compare (so all modes read the same samples), 1 in single "
     "and dp",
     NULL, INT(sampler_replicas, 1, MAX_DEVICES), .get = get_stream_ranks,
     EFF(CF_ARITH), FPRINT(ORDER), JSON("sampler_replicas", WARN), CKPT_D, TWIN("REPLICAS", "DistributedSampler(num_replicas) of the stream every mode reads")},
    {"rank-samples", "a,b,..", NULL, "none",
     "give rank r its own a, b, ... samples (uneven data: see --join); single and dp read the "
     "same samples step by step",
     NULL, SET(set_rank_samples, get_rank_samples, "10,20", "5,5"),
     EFF(CF_ARITH), FPRINT(ORDER), JSON("rank_samples", WARN), CKPT_D, TWIN_REFUSED},
    {"join", NULL, "on", NULL,
     "a rank out of data shadows the others' all-reduces with zero gradients (torch's Join)",
     NULL, ON(join),
     EFF(CF_ARITH | CF_SHARED), FPRINT(ORDER), JSON("join", WARN), CKPT_FREE, TWIN_MOOT},
    {"no-join", NULL, NULL, NULL,
     "a rank out of data leaves: the others wait in the all-reduce until --timeout", NULL, OFF(join)},
    {"warmup-steps", "N", "2", NULL, "steps left out of the throughput", NULL, LONG(warmup_steps, 0, 1L << 40),
     EFF(CF_SHARED), FPRINT(SCHEDULE), JSON("warmup_steps", MATCH)},
    {"log-every", "N", "0", "0 (each epoch; compare: none)", "print the loss every N steps", NULL, LONG(log_every, 0, 1L << 40),
     EFF(CF_SHARED | CF_OUTPUT), FPRINT(SCHEDULE)},
    {"allow-nonfinite", NULL, NULL, "off",
     "keep going when the loss or the parameters become NaN or infinite (otherwise exit 1 "
     "naming the step), and write them to --save and --checkpoint",
     NULL, ON(allow_nonfinite),
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"comm", "C", "auto", NULL,
     "ddp collectives: auto | shm | nccl | mpi (auto: nccl on CUDA; on the CPU shm, or mpi "
     "under mpirun)",
     "DDP", NAME(comm, comm, "auto, shm, nccl, mpi"),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON("comm", WARN)},
    {"launcher", "L", "auto", NULL,
     "who starts ddp's ranks: fork (this process, one host) | mpi (mpirun, one process per "
     "rank, on any hosts; each binds --gpus[local rank]); auto: mpi when mpirun started it",
     NULL, NAME(launcher, launcher, "auto, fork, mpi"),
     EFF(CF_SPEED), JSON_D("launcher", NO)},
    {"bucket-mb", "X", STR(CONFIG_BUCKET_MB), NULL,
     "gradient bucket cap in MiB; auto: tried during the warm-up steps, the fastest kept", NULL, SET(set_bucket_mb, get_bucket_mb, "3", "auto"),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON("bucket_mb", WARN), TWIN("BUCKET_MB", "DDP's gradient buckets")},
    {"first-bucket-mb", "X", "1", NULL, "cap of the first (last layers') bucket", NULL, ABOVE(first_bucket_mb, 0.0, 1 << 20),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON("first_bucket_mb", WARN)},
    {"overlap", NULL, "on", NULL, "all-reduce each bucket while backward still runs",
     NULL, ON(overlap),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON("overlap", WARN)},
    {"no-overlap", NULL, NULL, NULL, "all-reduce only after backward ends", NULL, OFF(overlap)},
    {"timeout", "SEC", STR(DEFAULT_TIMEOUT_S), NULL, "limit on any wait for another rank", NULL, ABOVE(timeout_s, 0.0, 1e6),
     EFF(CF_SHARED), FPRINT(OTHER)},
    /* --zero1 first: the fingerprint's lines follow the rows, and its line is
     * the first to differ when it is flipped */
    {"zero1", NULL, NULL, "off", "the same as --zero 1", NULL, SET(set_zero, get_zero1, "1", NULL),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("zero1", WARN), TWIN_REFUSED},
    {"zero", "N", "0", NULL,
     "ZeRO stage N (a list under compare: a ddp column each): 0 none, 1 the optimizer state sharded "
     "(ZeroRedundancyOptimizer), 2 and the gradients, 3 and the parameters (FSDP FULL_SHARD)",
     NULL, SET(set_zero, get_zero, "2", "3"),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("zero", WARN), TWIN_REFUSED},
    {"mem-limit", "BYTES", NULL, "none",
     "each device's memory (K, M, G suffixes): a run whose estimated peak exceeds it is refused",
     NULL, SET(set_mem_limit, get_mem_limit, "64M", "1G"), EFF(CF_META)},
    {"comm-hook", "H", "none", NULL,
     "ddp's communication hook, as PyTorch's: none | fp16 | bf16 (each bucket all-reduced in "
     "16 bits) | powersgd:RANK[:START] (rank-RANK PowerSGD with error feedback and warm start "
     "after START plain steps, default " STR(CONFIG_POWERSGD_START) "); a plain DDP reference "
     "runs first, for the drift",
     NULL, SET(set_comm_hook, get_comm_hook, "fp16", "powersgd:2"),
     EFF(CF_ARITH | CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("comm_hook", WARN), CKPT_FREE,
     TWIN_REFUSED},
    {"slow-rank", "R:F", NULL, "none",
     "a straggler: rank R computes each step's forward and backward F times, F from 1 to 100 "
     "and fractional (1.1: 10% more; the same result, F times the work)",
     NULL, SET(set_slow_rank, get_slow_rank, "1:2", "0:3"),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("slow_rank", WARN)},
    {"min-bytes", "N", "1K", NULL, "smallest message (bytes; K, M, G suffixes)",
     "Collective benchmark (--mode comm, like nccl-tests)", BYTES(min_bytes), .letter = 'b',
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"max-bytes", "N", "16M", NULL, "largest message", NULL, BYTES(max_bytes), .letter = 'e',
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"step-factor", "X", "4", NULL, "each size is the last times X", NULL, ABOVE(step_factor, 1.0, 1024.0), .letter = 'f',
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"iters", "N", "20", NULL, "timed iterations per size", NULL, LONG(iters, 1, 1000000), .letter = 'n',
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"warmup-iters", "N", "5", NULL, "untimed iterations before them", NULL, LONG(warmup_iters, 0, 1000000), .letter = 'w',
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"coll", "LIST", "all", NULL,
     "all-reduce, broadcast, reduce-scatter, all-gather, reduce (a comma list), or all (the first "
     "four)",
     NULL, SET(set_colls, get_colls, "reduce", "broadcast"),
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"quiet", NULL, NULL, "off", "print only errors and the final result", "Reporting", ON(quiet),
     EFF(CF_OUTPUT)},
    {"json", NULL, NULL, "off", "print one JSON object per run on stdout, nothing else", NULL, ON(json),
     EFF(CF_OUTPUT)},
    {"csv", NULL, NULL, "off", "print one CSV row per run (with a header) on stdout", NULL, ON(csv),
     EFF(CF_OUTPUT)},
    {"explain", NULL, NULL, "off",
     "tell the middle timed step: what moved where, how long, DDP's buckets against backward; "
     "then why each mode is as fast as it is",
     NULL, ON(explain),
     EFF(CF_OUTPUT)},
    {"trace", "FILE", NULL, "none", "write a Chrome trace (open in Perfetto)", NULL, PATH(trace_path),
     EFF(CF_SHARED | CF_OUTPUT), FPRINT_GIVEN(OTHER)},
    {"report", "FILE.html", NULL, "none",
     "write one offline HTML page: a median step's timeline per device, phase and memory bars, "
     "--predict's curves, the verdict",
     NULL, PATH(report_path),
     EFF(CF_SHARED | CF_OUTPUT), FPRINT_GIVEN(OTHER)},
    {"baseline", "FILE", NULL, "none", "compare throughput with an earlier --json result",
     NULL, PATH(baseline_path),
     EFF(CF_OUTPUT)},
    {"tolerance", "PCT", "5", NULL,
     "allowed slowdown against --baseline or --against (exit 3 beyond it)", NULL,
     DOUBLE(tolerance_pct, 0.0, 100.0),
     EFF(CF_OUTPUT)},
    {"against", "BASE", NULL, "none",
     "A/B gate: run the executable BASE and the candidate with these options, round by round "
     "in ABBA order, judging the median of their paired ratios after every pair by an interval "
     "valid at every look, until it decides (exit 0 no change or improved, 3 regressed) or "
     "--gate-budget runs out (4 no verdict); --repeat sets the most rounds (default "
     STR(CONFIG_AB_ROUNDS) " here)",
     NULL, PATH(against),
     EFF(CF_META)},
    {"gate-budget", "SEC", STR(CONFIG_GATE_BUDGET_S), NULL,
     "--against: start no pair of rounds that would end past SEC seconds of the gate", NULL,
     ABOVE(gate_budget_s, 0.0, 1e6),
     EFF(CF_META)},
    {"candidate", "CAND", NULL, "this ddpbench", "the other side of --against", NULL,
     PATH(candidate),
     EFF(CF_META)},
    {"repeat", "N", "1", NULL,
     "run N times (DDP: fresh ranks each time); report medians and 95% intervals", NULL,
     SET(set_repeat, get_repeat, "3", "2"),
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"predict", NULL, NULL, "off",
     "predict DP's and DDP's step on 1..8 devices from single's phases and measured collectives",
     NULL, ON(predict),
     EFF(CF_SHARED | CF_OUTPUT), FPRINT(OTHER)},
    {"hardware", "NAME|FILE", NULL, "none",
     "model single, dp and ddp on a GPU box one does not have, term by term, on 1..its GPUs: "
     "a shipped profile (2x-titan-rtx-nvlink, 2x-titan-rtx-pcie, dgx1-v100, 8x-a100-sxm, "
     "8x-h100-sxm, 2x-h100-pcie, 1x-h200, ...) or a JSON file (app/predict/README.md)",
     NULL, SET(set_profile, NULL, "dgx1-v100", "8x-a100-sxm"), EFF(CF_OUTPUT)},
    {"workload", "NAME|FILE", NULL, "the run's MLP",
     "with --hardware: the model to put on it instead of the run's (gpt2-small, resnet50, "
     "bert-base, ... or a JSON file); nothing is trained",
     NULL, SET(set_profile, NULL, "gpt2-small", "resnet50"), EFF(CF_META)},
    {"emit-pytorch", "FILE.py", NULL, "none",
     "write a PyTorch script that runs the same job (its initial weights and data beside it) "
     "and prints the same checksum",
     NULL, PATH(emit_pytorch),
     EFF(CF_OUTPUT)},
    {"save", "FILE", NULL, "none", "write the final weights (.safetensors)", "Checkpoints", PATH(save_path),
     EFF(CF_OUTPUT)},
    {"init", "FILE", NULL, "none", "start from weights in a .safetensors file", NULL, PATH(init_path),
     EFF(CF_ARITH), FPRINT_RANK0, NO_JSON, CKPT_FREE, TWIN_FILES},
    {"checkpoint", "FILE", NULL, "none", "write a resumable checkpoint here", NULL, PATH(checkpoint_path),
     EFF(CF_SHARED | CF_OUTPUT), FPRINT_GIVEN(SCHEDULE)},
    {"checkpoint-every", "N", NULL, "0 (at the end)", "steps between checkpoints",
     NULL, LONG(checkpoint_every, 1, 1L << 40),
     EFF(CF_SHARED | CF_OUTPUT), FPRINT(SCHEDULE)},
    {"resume", "FILE", NULL, "none", "continue exactly from a --checkpoint file", NULL, PATH(resume_path),
     EFF(CF_ARITH), FPRINT_FILE(SCHEDULE), NO_JSON, CKPT_FREE, TWIN_REFUSED},
    {"help", NULL, NULL, NULL, "this text", "Other", PASS1,
     EFF(CF_META)},
    {"version", NULL, NULL, NULL, "print the version", NULL, PASS1,
     EFF(CF_META)},
};
#define NOPTS ((int)(sizeof opts / sizeof opts[0]))

void config_usage(FILE *f)
{
    fprintf(f,
            "usage: ddpbench [options]\n"
            "Trains one MLP on one host three ways (single device, DataParallel,\n"
            "DistributedDataParallel) and reports throughput, where the time goes,\n"
            "memory, and whether the results agree.\n");
    for (int i = 0; i < NOPTS; i++) {
        const opt_t *o = &opts[i];
        if (o->section)
            fprintf(f, "\n%s:\n", o->section);
        char lhs[64], text[512];
        if (o->letter)
            snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", o->letter, o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        else
            snprintf(lhs, sizeof lhs, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        const char *d = o->shown ? o->shown : o->dflt;
        snprintf(text, sizeof text, "%s%s%s%s", o->help, d ? " [" : "", d ? d : "", d ? "]" : "");
        /* wrap the text at 79 columns under its own column */
        fprintf(f, "  %-24s", lhs);
        int col = 26;
        for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) {
            int len = (int)strlen(w);
            if (col > 26 && col + 1 + len > 79) {
                fprintf(f, "\n%26s", "");
                col = 26;
            }
            fprintf(f, " %s", w);
            col += 1 + len;
        }
        fputc('\n', f);
    }
    config_presets_usage(f);
    fprintf(f, "\nExit status: 0 ok (or no change, or improved), 1 a run failed, 2 bad input, 3\n"
               "regressed against --baseline or --against, 4 no verdict (the interval still\n"
               "straddles --tolerance), 128 + N stopped by signal N.  Both gates print a line\n"
               "starting \"verdict: \" (regressed, improved, no change or no verdict).\n");
}

// ---------------------------------------------------------------------------
// one option

/* Set row o's field from its value v (NULL for a flag). */
static int apply_option(config_t *c, const opt_t *o, const char *v, explicit_t *ex, char *err)
{
    void *f = (char *)c + o->off;
    long l = 0;
    switch (o->kind) {
    case K_PASS1:
        return DDP_OK;
    case K_ON:
    case K_OFF:
        *(bool *)f = o->kind == K_ON;
        return DDP_OK;
    case K_INT:
        TRY(parse_long(o->name, v, (long)o->lo, (long)o->hi, &l, err));
        *(int *)f = (int)l;
        return DDP_OK;
    case K_LONG:
        return parse_long(o->name, v, (long)o->lo, (long)o->hi, (long *)f, err);
    case K_FLOAT:
        return parse_float(o->name, v, o->lo, o->hi, (float *)f, err);
    case K_DOUBLE:
    case K_ABOVE:
        return parse_double(o->name, v, o->lo, o->hi, o->kind == K_ABOVE, (double *)f, err);
    case K_BYTES:
        return parse_bytes(o->name, v, (long *)f, err);
    case K_PATH:
        return copy_path(o->name, v, (char *)f, err);
    case K_NAME: {
        int e = 0;
        TRY(parse_name(o->name, v, o->parse, &e, o->choices, err));
        *(int *)f = e; /* an enum field */
        return DDP_OK;
    }
    case K_SET:
        return o->set(c, o->name, v, ex, err);
    }
    return err_set(err, DDP_ERR_INPUT, "internal: unhandled option --%s", o->name);
}

int config_defaults_for(config_t *c, const char *preset, char *err)
{
    memset(c, 0, sizeof *c);
    c->slow_rank = -1; /* no straggler */
    for (int i = 0; i < NOPTS; i++) {
        const opt_t *o = &opts[i];
        if (!o->dflt)
            continue;
        int rc = apply_option(c, o, o->arg ? o->dflt : NULL, NULL, err);
        if (rc != DDP_OK) /* a bad row in the table: the defaults must parse */
            return err_prefix(err, DDP_ERR_RUNTIME, "internal: the default of --%s", o->name);
    }
    return config_apply_preset(c, preset, err);
}

void config_defaults(config_t *c)
{
    char err[ERR_LEN];
    config_defaults_for(c, CONFIG_DEFAULT_PRESET, err);
}

/* getopt's value for row i (its short letter comes back as itself). */
#define OPT_VAL(i) (256 + (i))

/* The row of getopt's answer id: a long option's OPT_VAL, or a letter. */
static const opt_t *row_of(int id)
{
    if (id >= OPT_VAL(0) && id < OPT_VAL(NOPTS))
        return &opts[id - OPT_VAL(0)];
    for (int i = 0; id > 0 && i < NOPTS; i++)
        if (opts[i].letter == id)
            return &opts[i];
    return NULL;
}

static bool is(const opt_t *o, const char *name)
{
    return o && strcmp(o->name, name) == 0;
}

int config_parse(config_t *c, int argc, char **argv, FILE *out, char *err)
{
    struct option lo[NOPTS + 1];
    for (int i = 0; i < NOPTS; i++)
        lo[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument,
                                NULL, OPT_VAL(i)};
    lo[NOPTS] = (struct option){0, 0, 0, 0};

    const char *preset = CONFIG_DEFAULT_PRESET;
    /* "+h" (-h: --help, unlisted) and each row's short letter ("b:" for -b N) */
    char shorts[2 * NOPTS + 4] = "+h";
    size_t ns = 2;
    for (int i = 0; i < NOPTS; i++)
        if (opts[i].letter) {
            shorts[ns++] = opts[i].letter;
            if (opts[i].arg)
                shorts[ns++] = ':';
        }
    shorts[ns] = 0;

    /* Pass 1: --help, --version, --model (the preset fills what the rest overrides). */
    opterr = 0;
    optind = 0; /* GNU: 0 restarts the scan from scratch */
    int id, idx;
    while ((id = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
        const opt_t *o = row_of(id);
        if (id == 'h' || is(o, "help")) {
            config_usage(out);
            return CONFIG_EXIT_OK;
        }
        if (is(o, "version")) {
            fprintf(out, "ddpbench %s\n", DDPBENCH_VERSION);
            return CONFIG_EXIT_OK;
        }
        if (is(o, "model"))
            preset = optarg;
    }
    int rc = config_defaults_for(c, preset, err);
    if (rc != DDP_OK)
        return rc;

    /* Pass 2: every option, in order; the last one of a kind wins. */
    explicit_t ex = {0};
    optind = 0;
    while ((id = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
        if (id == '?') {
            const char *bad = argv[optind - 1];
            const opt_t *o = row_of(optopt);
            if (o && o->letter && optopt == o->letter)
                return err_set(err, DDP_ERR_INPUT, "-%c (--%s): needs a value (%s)", optopt,
                               o->name, o->arg);
            if (optopt && optopt < 256)
                return err_set(err, DDP_ERR_INPUT, "unknown option '-%c' (see --help)", optopt);
            if (o && o->arg)
                return err_set(err, DDP_ERR_INPUT, "--%s: needs a value (%s)", o->name, o->arg);
            return err_set(err, DDP_ERR_INPUT, "unknown option '%s' (see --help)", bad);
        }
        const opt_t *o = row_of(id);
        if (!o)
            return err_set(err, DDP_ERR_INPUT, "internal: unhandled option '%s'", argv[optind - 1]);
        rc = apply_option(c, o, optarg, &ex, err);
        if (rc != DDP_OK)
            return rc;
    }
    if (optind < argc)
        return err_set(err, DDP_ERR_INPUT, "unexpected argument '%s' (options start with --)",
                       argv[optind]);
    /* --layers or --act that change the preset's network make it a custom
     * model: it must not be reported under the preset's name. */
    config_t *p = malloc(sizeof *p); /* 14 KB: not on the stack (docs/faults.md) */
    if (!p)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    if (config_defaults_for(p, preset, err) == DDP_OK &&
        (p->ndims != c->ndims || p->act != c->act ||
         memcmp(p->dims, c->dims, (size_t)c->ndims * sizeof c->dims[0]) != 0))
        c->model_name[0] = 0;
    free(p);
    /* the A/B gate's most rounds (docs/gate.md), unless --repeat says
     * otherwise */
    if (c->against[0] && !ex.repeat)
        c->repeat = CONFIG_AB_ROUNDS;
    /* torch.optim.AdamW defaults weight_decay to 1e-2. */
    if (c->optim.kind == OPTIM_ADAMW && !ex.wd)
        c->optim.weight_decay = 0.01f;
    if (ex.batch && c->batch_per_device)
        return err_set(err, DDP_ERR_INPUT,
                       "--batch and --batch-per-device: choose one (--batch is the global batch, "
                       "--batch-per-device N makes it N x devices)");
    /* One Linear layer has no hidden layer, so no activation (the presets'
     * --act applies once --layers adds one). */
    if (c->ndims == 2)
        c->act = ACT_NONE;
    return config_validate(c, err);
}


// ---------------------------------------------------------------------------
// argv for a child run

int config_argv_without(int argc, char **argv, const char *const *drop, char **out)
{
    struct option lo[NOPTS + 1];
    for (int i = 0; i < NOPTS; i++)
        lo[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument,
                                NULL, OPT_VAL(i)};
    lo[NOPTS] = (struct option){0, 0, 0, 0};
    char shorts[2 * NOPTS + 4] = "+h";
    size_t ns = 2;
    for (int i = 0; i < NOPTS; i++)
        if (opts[i].letter) {
            shorts[ns++] = opts[i].letter;
            if (opts[i].arg)
                shorts[ns++] = ':';
        }
    shorts[ns] = 0;
    int n = 0;
    if (argc > 0)
        out[n++] = argv[0];
    opterr = 0;
    optind = 0;
    int id, idx, at = 1;
    /* getopt_long leaves optind past the words an option took (one for
     * --x=v or a flag, two for --x v): those words go or stay together */
    while ((id = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
        const opt_t *o = row_of(id);
        bool gone = false;
        for (int k = 0; o && drop[k]; k++)
            gone = gone || is(o, drop[k]);
        for (; at < optind && at < argc; at++)
            if (!gone)
                out[n++] = argv[at];
    }
    for (; at < argc; at++)
        out[n++] = argv[at];
    out[n] = NULL;
    optind = 0;
    return n;
}

// ---------------------------------------------------------------------------
// the rows for what derives from them (fields.h)

int config_fields(void) { return NOPTS; }
const char *config_field_name(int i) { return opts[i].name; }
const config_derive_t *config_field_derive(int i) { return &opts[i].d; }

int config_field_find(const char *name)
{
    for (int i = 0; i < NOPTS; i++)
        if (strcmp(opts[i].name, name) == 0)
            return i;
    return -1;
}

void config_field_value(const config_t *c, int i, config_value_t *v)
{
    const opt_t *o = &opts[i];
    const void *f = (const char *)c + o->off;
    memset(v, 0, offsetof(config_value_t, list));
    v->buf[0] = 0;
    if (o->get) {
        o->get(c, v);
        return;
    }
    switch (o->kind) {
    case K_ON:
    case K_OFF:
        v->type = CV_BOOL;
        v->b = *(const bool *)f;
        return;
    case K_INT:
        v->type = CV_INT;
        v->i = *(const int *)f;
        return;
    case K_LONG:
    case K_BYTES:
        v->type = CV_INT;
        v->i = *(const long *)f;
        return;
    case K_FLOAT:
        v->type = CV_FLOAT;
        v->f = *(const float *)f;
        return;
    case K_DOUBLE:
    case K_ABOVE:
        v->type = CV_DOUBLE;
        v->d = *(const double *)f;
        return;
    case K_PATH:
        v->type = CV_STR;
        v->s = (const char *)f;
        return;
    case K_NAME:
        v->type = CV_STR;
        v->s = o->show(*(const int *)f);
        return;
    case K_PASS1:
    case K_SET: /* a setter's row has its get */
        v->type = CV_NONE;
        return;
    }
}

void config_value_text(const config_value_t *v, const char *yes, const char *no, char *out,
                       size_t n)
{
    if (!out || n == 0)
        return; /* (and gcc under -fsanitize=address stops guessing out may be NULL) */
    size_t used = 0;
    out[0] = 0;
    if (v->word) {
        snprintf(out, n, "%s", v->word);
        return;
    }
    switch (v->type) {
    case CV_NONE:
        return;
    case CV_BOOL:
        snprintf(out, n, "%s", v->b ? yes : no);
        return;
    case CV_INT:
        snprintf(out, n, "%lld", v->i);
        return;
    case CV_UINT:
        snprintf(out, n, "%llu", v->u);
        return;
    case CV_FLOAT: /* the shortest decimal that reads back as the same float */
        for (int prec = 1; prec <= 9; prec++) {
            snprintf(out, n, "%.*g", prec, (double)v->f);
            if ((float)strtod(out, NULL) == v->f)
                break;
        }
        return;
    case CV_DOUBLE:
        snprintf(out, n, "%.9g", v->d);
        return;
    case CV_STR:
        snprintf(out, n, "%s", v->s ? v->s : "");
        return;
    case CV_LIST:
        if (v->n == 0)
            snprintf(out, n, "none");
        for (int i = 0; i < v->n && used < n; i++)
            used += (size_t)snprintf(out + used, n - used, "%s%ld", i ? "," : "", v->list[i]);
        return;
    }
}

/* Another number than v within [lo, hi] (v below lo: an unresolved "auto",
 * which stands for lo or more). */
static double other_number(double v, double lo, double hi)
{
    if (v < lo)
        return lo + 1 <= hi ? lo + 1 : hi;
    if (v + 1 <= hi)
        return v + 1;
    if (v - 1 >= lo && v - 1 > lo)
        return v - 1;
    return (v + lo) / 2;
}

int config_field_flip(config_t *c, int i, char *err)
{
    const opt_t *o = &opts[i];
    void *f = (char *)c + o->off;
    char buf[64];
    switch (o->kind) {
    case K_ON:
        *(bool *)f = !*(bool *)f;
        return DDP_OK;
    case K_INT:
        *(int *)f = (int)other_number(*(int *)f, o->lo, o->hi);
        return DDP_OK;
    case K_LONG:
    case K_BYTES:
        *(long *)f = o->kind == K_BYTES ? *(long *)f * 2 + 1
                                        : (long)other_number((double)*(long *)f, o->lo, o->hi);
        return DDP_OK;
    case K_FLOAT:
        *(float *)f = (float)other_number(*(float *)f, o->lo, o->hi);
        return DDP_OK;
    case K_DOUBLE:
    case K_ABOVE:
        *(double *)f = other_number(*(double *)f, o->lo, o->hi);
        return DDP_OK;
    case K_PATH:
        snprintf((char *)f, CONFIG_PATH_LEN, "%s", *(char *)f ? "" : "flipped.file");
        return DDP_OK;
    case K_NAME: { /* the next of its choices that is another value */
        int now = *(int *)f;
        snprintf(buf, sizeof buf, "%s", o->choices);
        for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
            if (o->parse(t) >= 0 && o->parse(t) != now) {
                *(int *)f = o->parse(t);
                return DDP_OK;
            }
        break;
    }
    case K_SET: {
        config_t before = *c;
        for (int k = 0; k < 2 && o->examples[k]; k++) {
            TRY(o->set(c, o->name, o->examples[k], NULL, err));
            if (memcmp(&before, c, sizeof *c) != 0)
                return DDP_OK;
        }
        break;
    }
    case K_OFF:
    case K_PASS1:
        break;
    }
    return err_set(err, DDP_ERR_INPUT, "--%s: no other value to flip to", o->name);
}
