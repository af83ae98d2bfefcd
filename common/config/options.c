/* common/config/options.c: the command line.  One table holds every option:
 * its name, its argument, its default and its help; config_defaults() applies
 * the defaults through the same setters the command line uses, and --help
 * prints them from the same rows, so a default is written once.  Every
 * malformed value is one clear line (see config.h). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "base/text.h"
#include "config/config.h"

// ---------------------------------------------------------------------------
// the option table: one row per option, used for the defaults, getopt and --help

enum {
    O_HELP = 'h',
    O_MODE = 256, O_GPUS, O_BACKEND, O_THREADS, O_MODEL, O_LAYERS, O_ACT, O_LOSS, O_OPTIM,
    O_LR, O_MOMENTUM, O_DAMPENING, O_NESTEROV, O_WD, O_BETA1, O_BETA2, O_EPS, O_SEED,
    O_DATASET, O_SAMPLES, O_NOISE, O_DATA, O_TARGETS, O_TARGET_COLS, O_BATCH, O_ACCUM,
    O_EPOCHS, O_STEPS, O_SHUFFLE, O_NO_SHUFFLE, O_DROP_LAST, O_WARMUP, O_LOG_EVERY, O_COMM,
    O_BUCKET_MB, O_FIRST_BUCKET_MB, O_OVERLAP, O_NO_OVERLAP, O_TIMEOUT, O_QUIET, O_JSON, O_CSV,
    O_EXPLAIN, O_TRACE, O_BASELINE, O_TOLERANCE, O_SAVE, O_INIT, O_CHECKPOINT,
    O_CHECKPOINT_EVERY, O_RESUME, O_VERSION, O_BATCH_PER_DEVICE, O_SAMPLER_REPLICAS,
    O_RANK_SAMPLES, O_JOIN, O_NO_JOIN, O_TF32, O_MIN_BYTES, O_MAX_BYTES, O_STEP_FACTOR, O_ITERS,
    O_WARMUP_ITERS, O_COLL, O_REPEAT, O_PREDICT, O_ALLOW_NONFINITE, O_LAUNCHER, O_ZERO1,
    O_SLOW_RANK, O_SCENARIO, O_EMIT_PYTORCH, O_AGAINST, O_CANDIDATE
};

typedef struct {
    const char *name;
    int id;
    const char *arg;     /* NULL: a flag */
    const char *dflt;    /* the default, applied by config_defaults() through the same
                            setter as the command line (a flag: "on" sets it); NULL: the
                            preset's value, or nothing */
    const char *shown;   /* --help's [default] when it is not dflt ("preset", "none") */
    const char *help;
    const char *section; /* starts a new section in --help */
} opt_t;

static const opt_t opts[] = {
    {"mode", O_MODE, "M", "compare", NULL,
     "single | dp | ddp | compare (all three on the same devices, data and global batch, side by "
     "side; single uses the first device) | comm (the collectives alone, like nccl-tests)",
     "What to run"},
    {"gpus", O_GPUS, "LIST", "auto", NULL,
     "device ids, e.g. 0,1,2; auto: every visible GPU, or one CPU worker per core (max 8);"
     " on CUDA, dp may repeat an id (0,0) for replicas on one GPU, and so may ddp with --comm shm",
     NULL},
    {"backend", O_BACKEND, "B", "auto", NULL, "auto | cpu | cuda (auto: CUDA when a GPU is visible)", NULL},
    {"threads", O_THREADS, "N", "1", NULL, "OpenBLAS threads for --mode single on the CPU", NULL},
    {"scenario", O_SCENARIO, "NAME", NULL, "none",
     "reproduce a failure PyTorch users meet and explain it: uneven, straggler, dp-device0, "
     "mismatch (list: each in a line); exit 0 when it behaved as described",
     NULL},
    {"tf32", O_TF32, NULL, NULL, "off",
     "CUDA: GEMMs in TF32 tensor-core math (faster; outside the 1e-4 agreement with fp32)", NULL},
    {"model", O_MODEL, "NAME", NULL, CONFIG_DEFAULT_PRESET,
     "preset: seed-linear, seed-logreg, mlp-small, mlp-medium, mlp-large (options override it)",
     "The model"},
    {"layers", O_LAYERS, "D0,..,Dn", NULL, "preset", "Linear widths, input first", NULL},
    {"act", O_ACT, "A", NULL, "preset", "relu | tanh | sigmoid | gelu, between layers", NULL},
    {"loss", O_LOSS, "L", NULL, "preset", "mse | bce (sigmoid + BCE, from logits) | ce (softmax + CE)",
     NULL},
    {"optim", O_OPTIM, "O", NULL, "preset", "sgd | adam | adamw", NULL},
    {"lr", O_LR, "X", NULL, "preset", "learning rate", NULL},
    {"momentum", O_MOMENTUM, "X", NULL, "preset", "SGD momentum", NULL},
    {"dampening", O_DAMPENING, "X", "0", NULL, "SGD dampening", NULL},
    {"nesterov", O_NESTEROV, NULL, NULL, "off", "SGD Nesterov momentum", NULL},
    {"weight-decay", O_WD, "X", "0", "0 (adamw: 0.01)", "weight decay (AdamW: decoupled)", NULL},
    {"beta1", O_BETA1, "X", "0.9", NULL, "Adam beta1", NULL},
    {"beta2", O_BETA2, "X", "0.999", NULL, "Adam beta2", NULL},
    {"eps", O_EPS, "X", "1e-8", NULL, "Adam epsilon", NULL},
    {"seed", O_SEED, "N", "0", NULL, "seed for init, synthetic data and shuffling", NULL},
    {"dataset", O_DATASET, "K", "auto", NULL,
     "synthetic set: regression | binary | classes (auto: the one that fits --loss)", "The data"},
    {"samples", O_SAMPLES, "N", NULL, "preset", "rows of synthetic data", NULL},
    {"noise", O_NOISE, "X", "0.1", NULL, "std of the noise added to synthetic regression targets", NULL},
    {"data", O_DATA, "FILE", NULL, "none", "features: X.npy (with --targets) or a .csv file", NULL},
    {"targets", O_TARGETS, "FILE", NULL, "none", "targets Y.npy for --data X.npy", NULL},
    {"target-cols", O_TARGET_COLS, "N", "1", NULL, "CSV: the last N columns are targets", NULL},
    {"batch", O_BATCH, "N", NULL, "preset",
     "global batch per micro-step (dp splits it like torch.chunk: 256 over 3 is 86, 86, 84; "
     "ddp deals rank r rows r, r+K, ...: 86, 85, 85, and weighs each rank's gradient by its "
     "rows)",
     "The loop"},
    {"batch-per-device", O_BATCH_PER_DEVICE, "N", NULL, "off",
     "each rank's DataLoader batch_size, PyTorch DDP's convention: the global batch is N x "
     "devices (compare: single then runs all of it)",
     NULL},
    {"accum", O_ACCUM, "K", "1", NULL, "micro-batches per optimizer step (ddp: no_sync on the first K-1)",
     NULL},
    {"epochs", O_EPOCHS, "N", NULL, "preset", "passes over the data", NULL},
    {"steps", O_STEPS, "N", NULL, "0 (use --epochs)", "stop after N optimizer steps", NULL},
    {"shuffle", O_SHUFFLE, NULL, "on", NULL, "reshuffle every epoch (seed + epoch)", NULL},
    {"no-shuffle", O_NO_SHUFFLE, NULL, NULL, NULL, "keep the data in file order", NULL},
    {"drop-last", O_DROP_LAST, NULL, NULL, "off", "drop the last incomplete batch (and sampler tail)",
     NULL},
    {"sampler-replicas", O_SAMPLER_REPLICAS, "N", NULL, "auto",
     "read DistributedSampler(num_replicas=N)'s stream (its padding, or its cut with --drop-last)"
     "; auto: the devices in ddp and compare (so all modes read the same samples), 1 in single "
     "and dp",
     NULL},
    {"rank-samples", O_RANK_SAMPLES, "a,b,..", NULL, "none",
     "give rank r its own a, b, ... samples (uneven data: see --join); single and dp read the "
     "same samples step by step",
     NULL},
    {"join", O_JOIN, NULL, "on", NULL,
     "a rank out of data shadows the others' all-reduces with zero gradients (torch's Join)",
     NULL},
    {"no-join", O_NO_JOIN, NULL, NULL, NULL,
     "a rank out of data leaves: the others wait in the all-reduce until --timeout", NULL},
    {"warmup-steps", O_WARMUP, "N", "2", NULL, "steps left out of the throughput", NULL},
    {"log-every", O_LOG_EVERY, "N", "0", "0 (each epoch)", "print the loss every N steps", NULL},
    {"allow-nonfinite", O_ALLOW_NONFINITE, NULL, NULL, "off",
     "keep going when the loss or the parameters become NaN or infinite (otherwise exit 1 "
     "naming the step), and write them to --save and --checkpoint",
     NULL},
    {"comm", O_COMM, "C", "auto", NULL,
     "ddp collectives: auto | shm | nccl | mpi (auto: nccl on CUDA; on the CPU shm, or mpi "
     "under mpirun)",
     "DDP"},
    {"launcher", O_LAUNCHER, "L", "auto", NULL,
     "who starts ddp's ranks: fork (this process, one host) | mpi (mpirun, one process per "
     "rank, on any hosts; each binds --gpus[local rank]); auto: mpi when mpirun started it",
     NULL},
    {"bucket-mb", O_BUCKET_MB, "X", "25", NULL,
     "gradient bucket cap in MiB; auto: tried during the warm-up steps, the fastest kept", NULL},
    {"first-bucket-mb", O_FIRST_BUCKET_MB, "X", "1", NULL, "cap of the first (last layers') bucket", NULL},
    {"overlap", O_OVERLAP, NULL, "on", NULL, "all-reduce each bucket while backward still runs",
     NULL},
    {"no-overlap", O_NO_OVERLAP, NULL, NULL, NULL, "all-reduce only after backward ends", NULL},
    {"timeout", O_TIMEOUT, "SEC", "60", NULL, "limit on any wait for another rank", NULL},
    {"zero1", O_ZERO1, NULL, NULL, "off",
     "ZeRO-1: gradients reduce-scattered, each rank steps its shard of the optimizer state and "
     "parameters, parameters all-gathered (ZeroRedundancyOptimizer)",
     NULL},
    {"slow-rank", O_SLOW_RANK, "R:F", NULL, "none",
     "a straggler: rank R computes each step's forward and backward F times, F from 1 to 100 "
     "and fractional (1.1: 10% more; the same result, F times the work)",
     NULL},
    {"min-bytes", O_MIN_BYTES, "N", "1K", NULL, "smallest message (bytes; K, M, G suffixes)",
     "Collective benchmark (--mode comm, like nccl-tests)"},
    {"max-bytes", O_MAX_BYTES, "N", "16M", NULL, "largest message", NULL},
    {"step-factor", O_STEP_FACTOR, "X", "4", NULL, "each size is the last times X", NULL},
    {"iters", O_ITERS, "N", "20", NULL, "timed iterations per size", NULL},
    {"warmup-iters", O_WARMUP_ITERS, "N", "5", NULL, "untimed iterations before them", NULL},
    {"coll", O_COLL, "LIST", "all", NULL,
     "all-reduce, broadcast, reduce-scatter, all-gather, reduce (a comma list), or all (the first "
     "four)",
     NULL},
    {"quiet", O_QUIET, NULL, NULL, "off", "print only errors and the final result", "Reporting"},
    {"json", O_JSON, NULL, NULL, "off", "print one JSON object per run on stdout, nothing else", NULL},
    {"csv", O_CSV, NULL, NULL, "off", "print one CSV row per run (with a header) on stdout", NULL},
    {"explain", O_EXPLAIN, NULL, NULL, "off",
     "tell the middle timed step: what moved where, how long, DDP's buckets against backward; "
     "then why each mode is as fast as it is",
     NULL},
    {"trace", O_TRACE, "FILE", NULL, "none", "write a Chrome trace (open in Perfetto)", NULL},
    {"baseline", O_BASELINE, "FILE", NULL, "none", "compare throughput with an earlier --json result",
     NULL},
    {"tolerance", O_TOLERANCE, "PCT", "5", NULL,
     "allowed slowdown against --baseline or --against (exit 3 beyond it)", NULL},
    {"against", O_AGAINST, "BASE", NULL, "none",
     "A/B gate: run the executable BASE and the candidate with these options, round by round "
     "in ABBA order, and judge the paired ratios of their median steps (exit 3 regressed, 4 no "
     "verdict); --repeat sets the rounds (default 10 here)",
     NULL},
    {"candidate", O_CANDIDATE, "CAND", NULL, "this ddpbench", "the other side of --against", NULL},
    {"repeat", O_REPEAT, "N", "1", NULL,
     "run N times (DDP: fresh ranks each time); report medians and 95% intervals", NULL},
    {"predict", O_PREDICT, NULL, NULL, "off",
     "predict DP's and DDP's step on 1..8 devices from single's phases and measured collectives",
     NULL},
    {"emit-pytorch", O_EMIT_PYTORCH, "FILE.py", NULL, "none",
     "write a PyTorch script that runs the same job (its initial weights and data beside it) "
     "and prints the same checksum",
     NULL},
    {"save", O_SAVE, "FILE", NULL, "none", "write the final weights (.safetensors)", "Checkpoints"},
    {"init", O_INIT, "FILE", NULL, "none", "start from weights in a .safetensors file", NULL},
    {"checkpoint", O_CHECKPOINT, "FILE", NULL, "none", "write a resumable checkpoint here", NULL},
    {"checkpoint-every", O_CHECKPOINT_EVERY, "N", NULL, "0 (at the end)", "steps between checkpoints",
     NULL},
    {"resume", O_RESUME, "FILE", NULL, "none", "continue exactly from a --checkpoint file", NULL},
    {"help", O_HELP, NULL, NULL, NULL, "this text", "Other"},
    {"version", O_VERSION, NULL, NULL, NULL, "print the version", NULL},
};
#define NOPTS ((int)(sizeof opts / sizeof opts[0]))

/* Short forms: nccl-tests' letters for the collective benchmark. */
static const struct {
    int id;
    char letter;
} shorts_tab[] = {{O_MIN_BYTES, 'b'}, {O_MAX_BYTES, 'e'}, {O_STEP_FACTOR, 'f'}, {O_ITERS, 'n'},
                  {O_WARMUP_ITERS, 'w'}};
#define NSHORTS ((int)(sizeof shorts_tab / sizeof shorts_tab[0]))

static char short_of(int id)
{
    for (int i = 0; i < NSHORTS; i++)
        if (shorts_tab[i].id == id)
            return shorts_tab[i].letter;
    return 0;
}

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
        if (short_of(o->id))
            snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", short_of(o->id), o->name, o->arg ? " " : "",
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
    fprintf(f, "\nExit status: 0 ok, 1 runtime fault, 2 bad input, 3 a figure regressed against\n"
               "--baseline or --against, 4 no verdict (an interval wider than --tolerance).\n");
}

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
    double d;
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
// one option

typedef struct {
    bool wd, gpus, batch, repeat;
} explicit_t;

/* Set option id from its value v (NULL for a flag).  ex records what the user
 * gave explicitly (NULL while applying the defaults). */
static int apply_option(config_t *c, int id, const char *name, const char *v, explicit_t *ex,
                        char *err)
{
    long l;
    int e = 0, rc = DDP_OK;
    switch (id) {
    case O_MODE:
        rc = parse_name(name, v, mode_parse, &e, "single, dp, ddp, compare, comm", err);
        c->mode = (mode_t_)e;
        break;
    case O_GPUS:
        if (ex)
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
        if (ex)
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
        if (ex)
            ex->batch = true;
        rc = parse_long(name, v, 1, 1 << 24, &l, err);
        c->batch = (int)l;
        break;
    case O_BATCH_PER_DEVICE:
        rc = parse_long(name, v, 1, 1 << 24, &l, err);
        c->batch_per_device = (int)l;
        break;
    case O_SAMPLER_REPLICAS:
        rc = parse_long(name, v, 1, MAX_DEVICES, &l, err);
        c->sampler_replicas = (int)l;
        break;
    case O_RANK_SAMPLES: {
        int n[MAX_DEVICES];
        rc = config_parse_int_list(v, n, MAX_DEVICES, &c->nrank_samples, name, true, err);
        for (int i = 0; rc == DDP_OK && i < c->nrank_samples; i++)
            c->rank_samples[i] = n[i];
        break;
    }
    case O_JOIN:
        c->join = true;
        break;
    case O_NO_JOIN:
        c->join = false;
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
    case O_ALLOW_NONFINITE:
        c->allow_nonfinite = true;
        break;
    case O_COMM:
        rc = parse_name(name, v, comm_parse, &e, "auto, shm, nccl, mpi", err);
        c->comm = (comm_kind_t)e;
        break;
    case O_LAUNCHER:
        rc = parse_name(name, v, launcher_parse, &e, "auto, fork, mpi", err);
        c->launcher = (launcher_kind_t)e;
        break;
    case O_BUCKET_MB:
        c->bucket_auto = strcmp(v, "auto") == 0;
        if (c->bucket_auto)
            c->bucket_mb = 25.0; /* the warm-up steps start from the default */
        else
            rc = parse_double(name, v, 0.0, 1 << 20, true, &c->bucket_mb, err);
        break;
    case O_FIRST_BUCKET_MB:
        rc = parse_double(name, v, 0.0, 1 << 20, true, &c->first_bucket_mb, err);
        break;
    case O_OVERLAP:
        c->overlap = true;
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
    case O_TF32:
        c->tf32 = true;
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
    case O_MIN_BYTES:
        rc = parse_bytes(name, v, &c->min_bytes, err);
        break;
    case O_MAX_BYTES:
        rc = parse_bytes(name, v, &c->max_bytes, err);
        break;
    case O_STEP_FACTOR:
        rc = parse_double(name, v, 1.0, 1024.0, true, &c->step_factor, err);
        break;
    case O_ITERS:
        rc = parse_long(name, v, 1, 1000000, &c->iters, err);
        break;
    case O_WARMUP_ITERS:
        rc = parse_long(name, v, 0, 1000000, &c->warmup_iters, err);
        break;
    case O_COLL:
        rc = parse_colls(v, &c->colls, err);
        break;
    case O_REPEAT:
        rc = parse_long(name, v, 1, CONFIG_REPEAT_MAX, &l, err);
        c->repeat = (int)l;
        if (ex)
            ex->repeat = true;
        break;
    case O_AGAINST:
        rc = copy_path(name, v, c->against, err);
        break;
    case O_CANDIDATE:
        rc = copy_path(name, v, c->candidate, err);
        break;
    case O_PREDICT:
        c->predict = true;
        break;
    case O_ZERO1:
        c->zero1 = true;
        break;
    case O_SLOW_RANK: {
        const char *colon = strchr(v, ':');
        char r[32];
        if (!colon || (size_t)(colon - v) >= sizeof r)
            return err_set(err, DDP_ERR_INPUT, "--slow-rank: '%s' is not RANK:FACTOR (e.g. 1:3)", v);
        memcpy(r, v, (size_t)(colon - v));
        r[colon - v] = 0;
        rc = parse_long(name, r, 0, MAX_DEVICES - 1, &l, err);
        c->slow_rank = (int)l;
        if (rc == DDP_OK)
            rc = parse_double(name, colon + 1, 1, 100, false, &c->slow_factor, err);
        break;
    }
    case O_SCENARIO:
        if (strlen(v) >= sizeof c->scenario)
            return err_set(err, DDP_ERR_INPUT, "--scenario: unknown scenario '%.40s' (see "
                           "--scenario list)", v);
        strcpy(c->scenario, v);
        break;
    case O_EMIT_PYTORCH:
        rc = copy_path(name, v, c->emit_pytorch, err);
        break;
    default:
        rc = err_set(err, DDP_ERR_INPUT, "internal: unhandled option --%s", name);
    }
    return rc;
}

// ---------------------------------------------------------------------------
// the defaults and the parse

int config_defaults_for(config_t *c, const char *preset, char *err)
{
    memset(c, 0, sizeof *c);
    c->slow_rank = -1; /* no straggler */
    for (int i = 0; i < NOPTS; i++) {
        const opt_t *o = &opts[i];
        if (!o->dflt)
            continue;
        int rc = apply_option(c, o->id, o->name, o->arg ? o->dflt : NULL, NULL, err);
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

int config_parse(config_t *c, int argc, char **argv, FILE *out, char *err)
{
    struct option lo[NOPTS + 1];
    for (int i = 0; i < NOPTS; i++)
        lo[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument,
                                NULL, opts[i].id};
    lo[NOPTS] = (struct option){0, 0, 0, 0};

    const char *preset = CONFIG_DEFAULT_PRESET;
    /* "+h" and each row's short letter ("b:" for -b N) */
    char shorts[2 * NOPTS + 4] = "+h";
    size_t ns = 2;
    for (int i = 0; i < NOPTS; i++)
        if (short_of(opts[i].id)) {
            shorts[ns++] = short_of(opts[i].id);
            if (opts[i].arg)
                shorts[ns++] = ':';
        }
    shorts[ns] = 0;

    /* Pass 1: --help, --version, --model (the preset fills what the rest overrides). */
    opterr = 0;
    optind = 0; /* GNU: 0 restarts the scan from scratch */
    int id, idx;
    while ((id = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
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
    int rc = config_defaults_for(c, preset, err);
    if (rc != DDP_OK)
        return rc;

    /* Pass 2: every option, in order; the last one of a kind wins. */
    explicit_t ex = {0};
    optind = 0;
    while ((id = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
        if (id == '?') {
            const char *bad = argv[optind - 1];
            for (int i = 0; optopt && i < NSHORTS; i++)
                if (optopt == shorts_tab[i].letter)
                    for (int j = 0; j < NOPTS; j++)
                        if (opts[j].id == shorts_tab[i].id)
                            return err_set(err, DDP_ERR_INPUT, "-%c (--%s): needs a value (%s)",
                                           optopt, opts[j].name, opts[j].arg);
            if (optopt && optopt < 256)
                return err_set(err, DDP_ERR_INPUT, "unknown option '-%c' (see --help)", optopt);
            for (int i = 0; i < NOPTS; i++)
                if (opts[i].id == optopt && opts[i].arg)
                    return err_set(err, DDP_ERR_INPUT, "--%s: needs a value (%s)", opts[i].name,
                                   opts[i].arg);
            return err_set(err, DDP_ERR_INPUT, "unknown option '%s' (see --help)", bad);
        }
        const char *name = NULL;
        for (int i = 0; i < NSHORTS; i++)
            if (id == shorts_tab[i].letter)
                id = shorts_tab[i].id; /* -b is --min-bytes */
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
    /* --layers or --act that change the preset's network make it a custom
     * model: it must not be reported under the preset's name. */
    config_t p;
    if (config_defaults_for(&p, preset, err) == DDP_OK &&
        (p.ndims != c->ndims || p.act != c->act ||
         memcmp(p.dims, c->dims, (size_t)c->ndims * sizeof c->dims[0]) != 0))
        c->model_name[0] = 0;
    /* the A/B gate's rounds: enough for a 95% interval with one bad round
     * on each side (docs/gate.md), unless --repeat says otherwise */
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
                                NULL, opts[i].id};
    lo[NOPTS] = (struct option){0, 0, 0, 0};
    char shorts[2 * NOPTS + 4] = "+h";
    size_t ns = 2;
    for (int i = 0; i < NOPTS; i++)
        if (short_of(opts[i].id)) {
            shorts[ns++] = short_of(opts[i].id);
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
        for (int i = 0; i < NSHORTS; i++)
            if (id == shorts_tab[i].letter)
                id = shorts_tab[i].id;
        const char *name = NULL;
        for (int i = 0; i < NOPTS; i++)
            if (opts[i].id == id)
                name = opts[i].name;
        bool gone = false;
        for (int k = 0; name && drop[k]; k++)
            gone = gone || strcmp(drop[k], name) == 0;
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
