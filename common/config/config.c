/* common/config.c: defaults, presets, the command line (getopt_long) and the
 * checks that turn every malformed value into one clear line (see config.h). */
#include "config/config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

// ---------------------------------------------------------------------------
// presets

typedef struct {
    const char *name;
    const char *about;
    const char *layers;
    act_t act;
    loss_t loss;
    optim_kind_t optim;
    float lr, momentum;
    long samples;
    int batch;
    long epochs;
    long steps;
} preset_t;

static const preset_t presets[] = {
    {"seed-linear", "Linear(10,10) + MSE + SGD(lr 0.001): the DDP article's demo", "10,10",
     ACT_RELU, LOSS_MSE, OPTIM_SGD, 0.001f, 0.0f, 400, 20, 10, 0},
    {"seed-logreg", "Linear(10,1) + sigmoid + BCE + SGD(lr 0.01): the DP vs DDP article's demo",
     "10,1", ACT_RELU, LOSS_BCE, OPTIM_SGD, 0.01f, 0.0f, 100, 10, 10, 0},
    {"mlp-small", "64-512-512-10 GELU classifier, batch 256: trains in seconds on a CPU",
     "64,512,512,10", ACT_GELU, LOSS_CE, OPTIM_ADAM, 0.003f, 0.0f, 8192, 256, 2, 0},
    {"mlp-medium", "1024-2048-2048-1024 regression, batch 256: the CPU performance model",
     "1024,2048,2048,1024", ACT_RELU, LOSS_MSE, OPTIM_SGD, 0.01f, 0.9f, 8192, 256, 1, 0},
    {"mlp-large", "4096-8192x3-4096 (~200M params), batch 2048: sized for GPU benchmarks",
     "4096,8192,8192,8192,4096", ACT_GELU, LOSS_MSE, OPTIM_ADAMW, 0.0001f, 0.0f, 16384, 2048, 1,
     0},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))
#define DEFAULT_PRESET "mlp-small"

// ---------------------------------------------------------------------------
// the option table: one row per option, used for getopt and for --help

enum {
    O_HELP = 'h',
    O_MODE = 256, O_GPUS, O_BACKEND, O_THREADS, O_MODEL, O_LAYERS, O_ACT, O_LOSS, O_OPTIM,
    O_LR, O_MOMENTUM, O_DAMPENING, O_NESTEROV, O_WD, O_BETA1, O_BETA2, O_EPS, O_SEED,
    O_DATASET, O_SAMPLES, O_NOISE, O_DATA, O_TARGETS, O_TARGET_COLS, O_BATCH, O_ACCUM,
    O_EPOCHS, O_STEPS, O_SHUFFLE, O_NO_SHUFFLE, O_DROP_LAST, O_WARMUP, O_LOG_EVERY, O_COMM,
    O_BUCKET_MB, O_FIRST_BUCKET_MB, O_NO_OVERLAP, O_TIMEOUT, O_QUIET, O_JSON, O_CSV,
    O_EXPLAIN, O_TRACE, O_BASELINE, O_TOLERANCE, O_SAVE, O_INIT, O_CHECKPOINT,
    O_CHECKPOINT_EVERY, O_RESUME, O_VERSION
};

typedef struct {
    const char *name;
    int id;
    const char *arg; /* NULL: a flag */
    const char *dflt;
    const char *help;
    const char *section; /* starts a new section in --help */
} opt_t;

static const opt_t opts[] = {
    {"mode", O_MODE, "M", "compare",
     "single | dp | ddp | compare (all three on the same devices, data and global batch, side by "
     "side; single uses the first device)",
     "What to run"},
    {"gpus", O_GPUS, "LIST", "auto",
     "device ids, e.g. 0,1,2; auto: every visible GPU, or one CPU worker per core (max 8);"
     " on CUDA, dp may repeat an id (0,0) for replicas on one GPU, and so may ddp with --comm shm",
     NULL},
    {"backend", O_BACKEND, "B", "auto", "auto | cpu | cuda (auto: CUDA when a GPU is visible)", NULL},
    {"threads", O_THREADS, "N", "1", "OpenBLAS threads for --mode single on the CPU", NULL},
    {"model", O_MODEL, "NAME", DEFAULT_PRESET,
     "preset: seed-linear, seed-logreg, mlp-small, mlp-medium, mlp-large (options override it)",
     "The model"},
    {"layers", O_LAYERS, "D0,..,Dn", "preset", "Linear widths, input first", NULL},
    {"act", O_ACT, "A", "relu", "relu | tanh | sigmoid | gelu, between layers", NULL},
    {"loss", O_LOSS, "L", "preset", "mse | bce (sigmoid + BCE, from logits) | ce (softmax + CE)",
     NULL},
    {"optim", O_OPTIM, "O", "preset", "sgd | adam | adamw", NULL},
    {"lr", O_LR, "X", "preset", "learning rate", NULL},
    {"momentum", O_MOMENTUM, "X", "preset (0)", "SGD momentum", NULL},
    {"dampening", O_DAMPENING, "X", "0", "SGD dampening", NULL},
    {"nesterov", O_NESTEROV, NULL, "off", "SGD Nesterov momentum", NULL},
    {"weight-decay", O_WD, "X", "0 (adamw: 0.01)", "weight decay (AdamW: decoupled)", NULL},
    {"beta1", O_BETA1, "X", "0.9", "Adam beta1", NULL},
    {"beta2", O_BETA2, "X", "0.999", "Adam beta2", NULL},
    {"eps", O_EPS, "X", "1e-8", "Adam epsilon", NULL},
    {"seed", O_SEED, "N", "0", "seed for init, synthetic data and shuffling", NULL},
    {"dataset", O_DATASET, "K", "auto",
     "synthetic set: regression | binary | classes (auto: the one that fits --loss)", "The data"},
    {"samples", O_SAMPLES, "N", "preset", "rows of synthetic data", NULL},
    {"noise", O_NOISE, "X", "0.1", "std of the noise added to synthetic regression targets", NULL},
    {"data", O_DATA, "FILE", "none", "features: X.npy (with --targets) or a .csv file", NULL},
    {"targets", O_TARGETS, "FILE", "none", "targets Y.npy for --data X.npy", NULL},
    {"target-cols", O_TARGET_COLS, "N", "1", "CSV: the last N columns are targets", NULL},
    {"batch", O_BATCH, "N", "preset", "global batch per micro-step (ddp: divided among ranks)",
     "The loop"},
    {"accum", O_ACCUM, "K", "1", "micro-batches per optimizer step (ddp: no_sync on the first K-1)",
     NULL},
    {"epochs", O_EPOCHS, "N", "preset", "passes over the data", NULL},
    {"steps", O_STEPS, "N", "0 (use --epochs)", "stop after N optimizer steps", NULL},
    {"shuffle", O_SHUFFLE, NULL, "on", "reshuffle every epoch (seed + epoch)", NULL},
    {"no-shuffle", O_NO_SHUFFLE, NULL, NULL, "keep the data in file order", NULL},
    {"drop-last", O_DROP_LAST, NULL, "off", "drop the last incomplete batch (and sampler tail)",
     NULL},
    {"warmup-steps", O_WARMUP, "N", "2", "steps left out of the throughput", NULL},
    {"log-every", O_LOG_EVERY, "N", "0 (each epoch)", "print the loss every N steps", NULL},
    {"comm", O_COMM, "C", "auto", "ddp collectives: auto | shm | nccl (auto: nccl on CUDA, shm on CPU)",
     "DDP"},
    {"bucket-mb", O_BUCKET_MB, "X", "25", "gradient bucket cap in MiB", NULL},
    {"first-bucket-mb", O_FIRST_BUCKET_MB, "X", "1", "cap of the first (last layers') bucket", NULL},
    {"no-overlap", O_NO_OVERLAP, NULL, "off", "all-reduce only after backward ends", NULL},
    {"timeout", O_TIMEOUT, "SEC", "60", "limit on any wait for another rank", NULL},
    {"quiet", O_QUIET, NULL, "off", "print only errors and the final result", "Reporting"},
    {"json", O_JSON, NULL, "off", "print one JSON object per run on stdout, nothing else", NULL},
    {"csv", O_CSV, NULL, "off", "print one CSV row per run (with a header) on stdout", NULL},
    {"explain", O_EXPLAIN, NULL, "off", "narrate the first step: what moved where, and how long",
     NULL},
    {"trace", O_TRACE, "FILE", "none", "write a Chrome trace (open in Perfetto)", NULL},
    {"baseline", O_BASELINE, "FILE", "none", "compare throughput with an earlier --json result",
     NULL},
    {"tolerance", O_TOLERANCE, "PCT", "5", "allowed throughput drop against --baseline (exit 3)",
     NULL},
    {"save", O_SAVE, "FILE", "none", "write the final weights (.safetensors)", "Checkpoints"},
    {"init", O_INIT, "FILE", "none", "start from weights in a .safetensors file", NULL},
    {"checkpoint", O_CHECKPOINT, "FILE", "none", "write a resumable checkpoint here", NULL},
    {"checkpoint-every", O_CHECKPOINT_EVERY, "N", "0 (at the end)", "steps between checkpoints",
     NULL},
    {"resume", O_RESUME, "FILE", "none", "continue exactly from a --checkpoint file", NULL},
    {"help", O_HELP, NULL, NULL, "this text", "Other"},
    {"version", O_VERSION, NULL, NULL, "print the version", NULL},
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
        snprintf(lhs, sizeof lhs, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        snprintf(text, sizeof text, "%s%s%s%s", o->help, o->dflt ? " [" : "",
                 o->dflt ? o->dflt : "", o->dflt ? "]" : "");
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
    fprintf(f, "\nPresets:\n");
    for (int i = 0; i < NPRESETS; i++)
        fprintf(f, "  %-12s %s\n", presets[i].name, presets[i].about);
    fprintf(f, "\nExit status: 0 ok, 1 runtime fault, 2 bad input, 3 throughput regressed.\n");
}

// ---------------------------------------------------------------------------
// defaults and presets

void config_defaults(config_t *c)
{
    memset(c, 0, sizeof *c);
    c->mode = MODE_COMPARE;
    c->backend = BACKEND_AUTO;
    c->ngpus = 0; /* 0: auto, resolved against the backend */
    c->threads = 1;
    c->act = ACT_RELU;
    c->optim.kind = OPTIM_SGD;
    c->optim.lr = 0.01f;
    c->optim.beta1 = 0.9f;
    c->optim.beta2 = 0.999f;
    c->optim.eps = 1e-8f;
    c->dataset = SYNTH_AUTO;
    c->noise = 0.1f;
    c->target_cols = 1;
    c->batch = 32;
    c->accum = 1;
    c->epochs = 1;
    c->shuffle = true;
    c->warmup_steps = 2;
    c->comm = COMM_AUTO;
    c->bucket_mb = 25.0;
    c->first_bucket_mb = 1.0;
    c->overlap = true;
    c->timeout_s = 60.0;
    c->tolerance_pct = 5.0;
}

int config_parse_int_list(const char *s, int *out, int max, int *n, const char *opt,
                          bool allow_dup, char *err)
{
    *n = 0;
    if (!s || !*s)
        return err_set(err, DDP_ERR_INPUT, "--%s: empty list", opt);
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 1 << 20 || (*end && *end != ','))
            return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not a list of non-negative integers",
                           opt, s);
        if (*n >= max)
            return err_set(err, DDP_ERR_INPUT, "--%s: more than %d entries", opt, max);
        if (!allow_dup)
            for (int i = 0; i < *n; i++)
                if (out[i] == (int)v)
                    return err_set(err, DDP_ERR_INPUT, "--%s: %ld appears twice in '%s'", opt, v, s);
        out[(*n)++] = (int)v;
        if (!*end)
            break;
        p = end + 1;
    }
    return DDP_OK;
}

int config_apply_preset(config_t *c, const char *name, char *err)
{
    for (int i = 0; i < NPRESETS; i++) {
        const preset_t *p = &presets[i];
        if (strcmp(p->name, name) != 0)
            continue;
        snprintf(c->model_name, sizeof c->model_name, "%s", p->name);
        int rc = config_parse_int_list(p->layers, c->dims, MODEL_MAX_LAYERS + 1, &c->ndims,
                                       "layers", true, err);
        if (rc != DDP_OK)
            return rc;
        c->act = p->act;
        c->loss = p->loss;
        c->optim.kind = p->optim;
        c->optim.lr = p->lr;
        c->optim.momentum = p->momentum;
        c->samples = p->samples;
        c->batch = p->batch;
        c->epochs = p->epochs;
        c->steps = p->steps;
        return DDP_OK;
    }
    char names[256] = "";
    for (int i = 0; i < NPRESETS; i++) {
        strncat(names, presets[i].name, sizeof names - strlen(names) - 3);
        if (i + 1 < NPRESETS)
            strcat(names, ", ");
    }
    return err_set(err, DDP_ERR_INPUT, "--model: unknown preset '%s' (one of: %s)", name, names);
}

// ---------------------------------------------------------------------------
// strict number parsing

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out, char *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno)
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not an integer", opt, s);
    if (v < lo || v > hi)
        return err_set(err, DDP_ERR_INPUT, "--%s: %ld is out of range %ld..%ld", opt, v, lo, hi);
    *out = v;
    return DDP_OK;
}

static int parse_double(const char *opt, const char *s, double lo, double hi, bool lo_open,
                        double *out, char *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not a number", opt, s);
    if (v < lo || v > hi || (lo_open && v == lo))
        return err_set(err, DDP_ERR_INPUT, "--%s: %g is out of range %s%g..%g", opt, v,
                       lo_open ? "(" : "", lo, hi);
    *out = v;
    return DDP_OK;
}

static int parse_float(const char *opt, const char *s, double lo, double hi, float *out,
                       char *err)
{
    double d;
    int rc = parse_double(opt, s, lo, hi, false, &d, err);
    if (rc == DDP_OK)
        *out = (float)d;
    return rc;
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
// one option

typedef struct {
    bool wd, gpus;
} explicit_t;

static int apply_option(config_t *c, int id, const char *name, const char *v, explicit_t *ex,
                        char *err)
{
    long l;
    int e = 0, rc = DDP_OK;
    switch (id) {
    case O_MODE:
        rc = parse_name(name, v, mode_parse, &e, "single, dp, ddp, compare", err);
        c->mode = (mode_t_)e;
        break;
    case O_GPUS:
        ex->gpus = true;
        if (strcmp(v, "auto") == 0)
            c->ngpus = 0;
        else
            rc = config_parse_int_list(v, c->gpus, MAX_GPU_LIST, &c->ngpus, name, true, err);
        break;
    case O_BACKEND:
        rc = parse_name(name, v, backend_kind_parse, &e, "auto, cpu, cuda", err);
        c->backend = (backend_kind_t)e;
        break;
    case O_THREADS:
        rc = parse_long(name, v, 1, 256, &l, err);
        c->threads = (int)l;
        break;
    case O_MODEL:
        break; /* applied before the other options */
    case O_LAYERS:
        rc = config_parse_int_list(v, c->dims, MODEL_MAX_LAYERS + 1, &c->ndims, name, true, err);
        if (rc == DDP_OK && c->ndims < 2)
            rc = err_set(err, DDP_ERR_INPUT,
                         "--layers: '%s' needs at least an input and an output width", v);
        for (int i = 0; rc == DDP_OK && i < c->ndims; i++)
            if (c->dims[i] < 1)
                rc = err_set(err, DDP_ERR_INPUT, "--layers: width %d in '%s' must be >= 1",
                             c->dims[i], v);
        break;
    case O_ACT:
        rc = parse_name(name, v, act_parse, &e, "relu, tanh, sigmoid, gelu", err);
        if (rc == DDP_OK && e == ACT_NONE)
            rc = err_set(err, DDP_ERR_INPUT,
                         "--act: unknown value 'none' (one of: relu, tanh, sigmoid, gelu)");
        c->act = (act_t)e;
        break;
    case O_LOSS:
        rc = parse_name(name, v, loss_parse, &e, "mse, bce, ce", err);
        c->loss = (loss_t)e;
        break;
    case O_OPTIM:
        rc = parse_name(name, v, optim_parse, &e, "sgd, adam, adamw", err);
        c->optim.kind = (optim_kind_t)e;
        break;
    case O_LR:
        rc = parse_float(name, v, 0.0, 1e6, &c->optim.lr, err);
        break;
    case O_MOMENTUM:
        rc = parse_float(name, v, 0.0, 1e6, &c->optim.momentum, err);
        break;
    case O_DAMPENING:
        rc = parse_float(name, v, 0.0, 1.0, &c->optim.dampening, err);
        break;
    case O_NESTEROV:
        c->optim.nesterov = true;
        break;
    case O_WD:
        ex->wd = true;
        rc = parse_float(name, v, 0.0, 1e6, &c->optim.weight_decay, err);
        break;
    case O_BETA1:
        rc = parse_float(name, v, 0.0, 0.999999999, &c->optim.beta1, err);
        break;
    case O_BETA2:
        rc = parse_float(name, v, 0.0, 0.999999999, &c->optim.beta2, err);
        break;
    case O_EPS:
        rc = parse_float(name, v, 0.0, 1.0, &c->optim.eps, err);
        break;
    case O_SEED: {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (end == v || *end || errno || v[0] == '-')
            rc = err_set(err, DDP_ERR_INPUT, "--seed: '%s' is not a non-negative integer", v);
        c->seed = s;
        break;
    }
    case O_DATASET:
        rc = parse_name(name, v, synth_parse, &e, "regression, binary, classes", err);
        c->dataset = (synth_kind_t)e;
        break;
    case O_SAMPLES:
        rc = parse_long(name, v, 1, 1L << 31, &c->samples, err);
        break;
    case O_NOISE:
        rc = parse_float(name, v, 0.0, 1e6, &c->noise, err);
        break;
    case O_DATA:
        rc = copy_path(name, v, c->data_path, err);
        break;
    case O_TARGETS:
        rc = copy_path(name, v, c->targets_path, err);
        break;
    case O_TARGET_COLS:
        rc = parse_long(name, v, 1, 1 << 20, &l, err);
        c->target_cols = (int)l;
        break;
    case O_BATCH:
        rc = parse_long(name, v, 1, 1 << 24, &l, err);
        c->batch = (int)l;
        break;
    case O_ACCUM:
        rc = parse_long(name, v, 1, 1 << 16, &l, err);
        c->accum = (int)l;
        break;
    case O_EPOCHS:
        rc = parse_long(name, v, 1, 1L << 30, &c->epochs, err);
        break;
    case O_STEPS:
        rc = parse_long(name, v, 1, 1L << 40, &c->steps, err);
        break;
    case O_SHUFFLE:
        c->shuffle = true;
        break;
    case O_NO_SHUFFLE:
        c->shuffle = false;
        break;
    case O_DROP_LAST:
        c->drop_last = true;
        break;
    case O_WARMUP:
        rc = parse_long(name, v, 0, 1L << 40, &c->warmup_steps, err);
        break;
    case O_LOG_EVERY:
        rc = parse_long(name, v, 0, 1L << 40, &c->log_every, err);
        break;
    case O_COMM:
        rc = parse_name(name, v, comm_parse, &e, "auto, shm, nccl", err);
        c->comm = (comm_kind_t)e;
        break;
    case O_BUCKET_MB:
        rc = parse_double(name, v, 0.0, 1 << 20, true, &c->bucket_mb, err);
        break;
    case O_FIRST_BUCKET_MB:
        rc = parse_double(name, v, 0.0, 1 << 20, true, &c->first_bucket_mb, err);
        break;
    case O_NO_OVERLAP:
        c->overlap = false;
        break;
    case O_TIMEOUT:
        rc = parse_double(name, v, 0.0, 1e6, true, &c->timeout_s, err);
        break;
    case O_QUIET:
        c->quiet = true;
        break;
    case O_JSON:
        c->json = true;
        break;
    case O_CSV:
        c->csv = true;
        break;
    case O_EXPLAIN:
        c->explain = true;
        break;
    case O_TRACE:
        rc = copy_path(name, v, c->trace_path, err);
        break;
    case O_BASELINE:
        rc = copy_path(name, v, c->baseline_path, err);
        break;
    case O_TOLERANCE:
        rc = parse_double(name, v, 0.0, 100.0, false, &c->tolerance_pct, err);
        break;
    case O_SAVE:
        rc = copy_path(name, v, c->save_path, err);
        break;
    case O_INIT:
        rc = copy_path(name, v, c->init_path, err);
        break;
    case O_CHECKPOINT:
        rc = copy_path(name, v, c->checkpoint_path, err);
        break;
    case O_CHECKPOINT_EVERY:
        rc = parse_long(name, v, 1, 1L << 40, &c->checkpoint_every, err);
        break;
    case O_RESUME:
        rc = copy_path(name, v, c->resume_path, err);
        break;
    default:
        rc = err_set(err, DDP_ERR_INPUT, "internal: unhandled option --%s", name);
    }
    return rc;
}

// ---------------------------------------------------------------------------
// the parse

int config_parse(config_t *c, int argc, char **argv, FILE *out, char *err)
{
    struct option lo[NOPTS + 1];
    for (int i = 0; i < NOPTS; i++)
        lo[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument,
                                NULL, opts[i].id};
    lo[NOPTS] = (struct option){0, 0, 0, 0};

    config_defaults(c);
    const char *preset = DEFAULT_PRESET;

    /* Pass 1: --help, --version, --model (the preset fills what the rest overrides). */
    opterr = 0;
    optind = 0; /* GNU: 0 restarts the scan from scratch */
    int id, idx;
    while ((id = getopt_long(argc, argv, "+h", lo, &idx)) != -1) {
        if (id == O_HELP) {
            config_usage(out);
            return CONFIG_EXIT_OK;
        }
        if (id == O_VERSION) {
            fprintf(out, "ddpbench %s\n", DDPBENCH_VERSION);
            return CONFIG_EXIT_OK;
        }
        if (id == O_MODEL)
            preset = optarg;
    }
    int rc = config_apply_preset(c, preset, err);
    if (rc != DDP_OK)
        return rc;

    /* Pass 2: every option, in order; the last one of a kind wins. */
    explicit_t ex = {0};
    optind = 0;
    while ((id = getopt_long(argc, argv, "+h", lo, &idx)) != -1) {
        if (id == '?') {
            const char *bad = argv[optind - 1];
            if (optopt && optopt < 256)
                return err_set(err, DDP_ERR_INPUT, "unknown option '-%c' (see --help)", optopt);
            for (int i = 0; i < NOPTS; i++)
                if (opts[i].id == optopt && opts[i].arg)
                    return err_set(err, DDP_ERR_INPUT, "--%s: needs a value (%s)", opts[i].name,
                                   opts[i].arg);
            return err_set(err, DDP_ERR_INPUT, "unknown option '%s' (see --help)", bad);
        }
        const char *name = NULL;
        for (int i = 0; i < NOPTS; i++)
            if (opts[i].id == id)
                name = opts[i].name;
        rc = apply_option(c, id, name ? name : "?", optarg, &ex, err);
        if (rc != DDP_OK)
            return rc;
    }
    if (optind < argc)
        return err_set(err, DDP_ERR_INPUT, "unexpected argument '%s' (options start with --)",
                       argv[optind]);
    /* torch.optim.AdamW defaults weight_decay to 1e-2. */
    if (c->optim.kind == OPTIM_ADAMW && !ex.wd)
        c->optim.weight_decay = 0.01f;
    return config_validate(c, err);
}

int config_validate(const config_t *c, char *err)
{
    model_spec_t spec;
    int rc = config_model_spec(c, &spec, err);
    if (rc != DDP_OK)
        return rc;
    if ((rc = optim_cfg_check(&c->optim, err)) != DDP_OK)
        return rc;
    if (c->loss == LOSS_CE && model_out_dim(&spec) < 2)
        return err_set(err, DDP_ERR_INPUT,
                       "--loss ce: the last layer must have >= 2 outputs (one per class), got %d",
                       model_out_dim(&spec));
    if (!c->data_path[0] && c->targets_path[0])
        return err_set(err, DDP_ERR_INPUT, "--targets: needs --data X.npy");
    if (c->data_path[0]) {
        size_t n = strlen(c->data_path);
        bool npy = n >= 4 && strcmp(c->data_path + n - 4, ".npy") == 0;
        if (npy && !c->targets_path[0])
            return err_set(err, DDP_ERR_INPUT, "--data %s: a .npy file needs --targets Y.npy",
                           c->data_path);
        if (!npy && c->targets_path[0])
            return err_set(err, DDP_ERR_INPUT,
                           "--targets: only for --data X.npy (a CSV holds its own targets)");
    }
    if (c->loss == LOSS_CE && c->target_cols != 1)
        return err_set(err, DDP_ERR_INPUT, "--target-cols: --loss ce takes one column of class ids");
    if ((c->mode == MODE_DDP || c->mode == MODE_COMPARE) && c->ngpus > 0 &&
        c->batch % c->ngpus != 0)
        return err_set(err, DDP_ERR_INPUT,
                       "--batch: %d is not divisible by %d devices (ddp gives every rank "
                       "batch/devices rows)",
                       c->batch, c->ngpus);
    if (c->checkpoint_every && !c->checkpoint_path[0])
        return err_set(err, DDP_ERR_INPUT, "--checkpoint-every: needs --checkpoint FILE");
    if (c->json && c->csv)
        return err_set(err, DDP_ERR_INPUT, "--json and --csv: choose one");
    if (c->comm == COMM_NCCL && c->backend == BACKEND_CPU)
        return err_set(err, DDP_ERR_INPUT, "--comm nccl: needs --backend cuda");
    return DDP_OK;
}

int config_model_spec(const config_t *c, model_spec_t *spec, char *err)
{
    return model_spec_init(spec, c->dims, c->ndims, c->act, err);
}
