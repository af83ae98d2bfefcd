/* common/config/options.c: a run's options, one row each: name, argument, default,
 * help, the config_t field it sets (its kind and bounds, or a setter of its own) and
 * what derives from it (fields.h).  The defaults, the parse and --help all read the
 * rows (opt_table.c), so a default is written once; the rules that join fields are
 * finish below and config_validate.  Every malformed value is one clear line. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"
#include "common/config/opt_table.h"

/* --coll: names of comm.h's collectives, in coll_kind_t order (bit k). */
static const char *const coll_names[] = {"broadcast", "all-reduce", "reduce", "all-gather",
                                         "reduce-scatter"};

static int set_colls(void *p, const char *name, const char *s, char *err)
{
    unsigned *out = &((config_t *)p)->colls;
    (void)name;
    *out = 0;
    if (strcmp(s, "all") == 0) {
        *out = CONFIG_COLLS_ALL;
        return DDP_OK;
    }
    char buf[256];
    if (strlen(s) >= sizeof buf) /* cut, it would run another list */
        return err_set(err, DDP_ERR_INPUT, "--coll: '%.32s...' is too long", s);
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

// ---------------------------------------------------------------------------
// the options that need a setter of their own

static int set_gpus(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
    if (strcmp(v, "auto") == 0) {
        c->ngpus = 0;
        return DDP_OK;
    }
    return config_parse_int_list(v, c->gpus, MAX_GPU_LIST, &c->ngpus, name, true, err);
}

static int set_layers(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
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

static int set_seed(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
    (void)name;
    char *end;
    errno = 0;
    unsigned long long s = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-')
        return err_set(err, DDP_ERR_INPUT, "--seed: '%s' is not a non-negative integer", v);
    c->seed = s;
    return DDP_OK;
}

static int set_rank_samples(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
    int n[MAX_DEVICES];
    TRY(config_parse_int_list(v, n, MAX_DEVICES, &c->nrank_samples, name, true, err));
    for (int i = 0; i < c->nrank_samples; i++)
        c->rank_samples[i] = n[i];
    return DDP_OK;
}

static int set_bucket_mb(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
    c->bucket_auto = strcmp(v, "auto") == 0;
    if (!c->bucket_auto)
        return opt_parse_double(name, v, 0.0, 1 << 20, true, &c->bucket_mb, err);
    c->bucket_mb = CONFIG_BUCKET_MB; /* the warm-up steps start from the default */
    return DDP_OK;
}

/* --zero N or a list (1,2,3); --zero1 (no value) is --zero 1 */
static int set_zero(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
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

static int set_slow_rank(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
    const char *colon = strchr(v, ':');
    char r[32];
    long l = 0;
    if (!colon || (size_t)(colon - v) >= sizeof r)
        return err_set(err, DDP_ERR_INPUT, "--slow-rank: '%s' is not RANK:FACTOR (e.g. 1:3)", v);
    memcpy(r, v, (size_t)(colon - v));
    r[colon - v] = 0;
    TRY(opt_parse_long(name, r, 0, MAX_DEVICES - 1, &l, err));
    c->slow_rank = (int)l;
    return opt_parse_double(name, colon + 1, 1, 100, false, &c->slow_factor, err);
}

/* none | fp16 | bf16 | powersgd:RANK[:START] */
static int set_comm_hook(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
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
    TRY(opt_parse_long(name, r, 1, 1024, &l, err));
    c->powersgd_rank = (int)l;
    /* PowerSGD keeps error feedback and warm start: at least 2 plain steps, as
     * PyTorch requires of start_powerSGD_iter with them */
    if (colon)
        TRY(opt_parse_long(name, colon + 1, 2, 1L << 40, &c->powersgd_start, err));
    c->comm_hook = HOOK_POWERSGD;
    return DDP_OK;
}

/* --tf32: kept from before --precision, a synonym of --precision tf32 */
static int set_tf32(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
    (void)name, (void)v, (void)err;
    c->precision = PREC_TF32;
    c->nprecisions = 0;
    return DDP_OK;
}

/* --precision P, or a list under compare; the run's precision is the first */
static int set_precision(void *p, const char *name, const char *v, char *err)
{
    config_t *c = p;
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

// ---------------------------------------------------------------------------
// the values the derivations read (fields.h), where a field's kind does not say

static void list_of_int(config_value_t *v, const int *a, int n)
{
    v->type = CV_LIST;
    v->n = n;
    for (int i = 0; i < n; i++)
        v->list[i] = a[i];
}

static void get_gpus(const void *p, config_value_t *v)
{
    list_of_int(v, ((const config_t *)p)->gpus, ((const config_t *)p)->ngpus);
}
static void get_layers(const void *p, config_value_t *v)
{
    list_of_int(v, ((const config_t *)p)->dims, ((const config_t *)p)->ndims);
}

static void get_rank_samples(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_LIST;
    v->n = c->nrank_samples;
    for (int i = 0; i < c->nrank_samples; i++)
        v->list[i] = c->rank_samples[i];
}

static void get_seed(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_UINT;
    v->u = (unsigned long long)c->seed;
}

static void get_colls(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_UINT;
    v->u = c->colls;
}

/* the cap as a number (the warm-up's start under auto), the word beside it */
static void get_bucket_mb(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_DOUBLE;
    v->d = c->bucket_mb;
    v->word = c->bucket_auto ? "auto" : NULL;
}

/* the precision (a list under compare: the first, the main columns') */
static void get_precision(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_STR;
    v->s = precision_name(c->precision);
}

/* the stage (a list under compare: the first, as --mode ddp would run it) */
static void get_zero(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_INT;
    v->i = c->zero;
}

static void get_zero1(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_BOOL;
    v->b = c->zero == 1;
}

static void get_comm_hook(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_STR;
    config_comm_hook_text(c, v->buf, sizeof v->buf);
    v->s = v->buf;
}

static void get_slow_rank(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_STR;
    snprintf(v->buf, sizeof v->buf, "%d:%.9g", c->slow_rank, c->slow_factor);
    v->s = v->buf;
}

/* the stream every mode reads: --rank-samples' ranks, else the sampler's */
static void get_stream_ranks(const void *p, config_value_t *v)
{
    const config_t *c = p;
    v->type = CV_INT;
    v->i = config_stream_ranks(c);
}

/* --act: an activation between layers ("none" is what one layer has, not a choice) */
static int hidden_act_parse(const char *s)
{
    int e = act_parse(s);
    return e == ACT_NONE ? -1 : e;
}

static const char *show_hidden_act(int v) { return act_name((act_t)v); }
static const char *show_mode(int v) { return mode_name((mode_t_)v); }
static const char *show_backend_kind(int v) { return backend_kind_name((backend_kind_t)v); }
static const char *show_loss(int v) { return loss_name((loss_t)v); }
static const char *show_optim(int v) { return optim_name((optim_kind_t)v); }
static const char *show_synth(int v) { return synth_name((synth_kind_t)v); }
static const char *show_comm(int v) { return comm_name((comm_kind_t)v); }
static const char *show_launcher(int v) { return launcher_name((launcher_kind_t)v); }
static const char *show_cuda_graph(int v) { return cuda_graph_name((cuda_graph_t)v); }

// ---------------------------------------------------------------------------
// the option table: a new option is one row (opt_table.h's kinds, or SET(a setter))

#define OPT_PART config_t
#define STR OPT_STR

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
    {"precision", "P", "fp32", NULL,
     "fp32 | tf32 (CUDA: TF32 tensor-core GEMMs, outside the 1e-4 agreement with fp32) | bf16 "
     "(PyTorch autocast: fp32 weights, bf16 GEMM inputs and activations, fp32 accumulation, "
     "loss and gradients); a list under compare (fp32,bf16: single, dp and ddp at each)",
     NULL, SET(set_precision, get_precision, "bf16", "tf32"),
     /* NO: gate/baseline.c checks it (older baselines ran fp32); a checkpoint fact:
      * a resumed run ends with the same bits only in the precision it started with */
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
     /* shared: a ddp rank that would capture probes NCCL first, a collective of all */
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("cuda_graph", WARN)},
    {"model", "NAME", NULL, CONFIG_DEFAULT_PRESET,
     "preset: seed-linear, seed-logreg, mlp-small, mlp-medium, mlp-large (options override it)",
     "The model", PASS1,
     EFF(CF_META), JSON_D("model", NO)},
    {"layers", "D0,..,Dn", NULL, "preset", "Linear widths, input first", NULL, SET(set_layers, get_layers, "3,5,2", "4,2"),
     EFF(CF_ARITH), FPRINT(MODEL), JSON("layers", MATCH), CKPT, TWIN("LAYERS", "Linear widths, input first")},
    {"act", "A", NULL, "preset", "relu | tanh | sigmoid | gelu, between layers", NULL, NAME(act, hidden_act, "relu, tanh, sigmoid, gelu"),
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
    {"weight-decay", "X", "0", "0 (adamw: 0.01)", "weight decay (AdamW: decoupled)", NULL, FLOAT(optim.weight_decay, 0.0, 1e6),
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
     "The loop", INT(batch, 1, 1 << 24),
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
    /* --zero1 first: its fingerprint line is the first to differ when it is flipped */
    {"zero1", NULL, NULL, "off", "the same as --zero 1", NULL, SET(set_zero, get_zero1, "1", NULL),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("zero1", WARN), TWIN_REFUSED},
    {"zero", "N", "0", NULL,
     "ZeRO stage N (a list under compare: a ddp column each): 0 none, 1 the optimizer state sharded "
     "(ZeroRedundancyOptimizer), 2 and the gradients, 3 and the parameters (FSDP FULL_SHARD)",
     NULL, SET(set_zero, get_zero, "2", "3"),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("zero", WARN), TWIN_REFUSED},
    {"comm-hook", "H", "none", NULL,
     "ddp's communication hook, as PyTorch's: none | fp16 | bf16 (each bucket all-reduced in "
     "16 bits) | powersgd:RANK[:START] (rank-RANK PowerSGD with error feedback and warm start "
     "after START plain steps, default " STR(CONFIG_POWERSGD_START) "); a plain DDP reference "
     "runs first, for the drift",
     NULL, SET(set_comm_hook, get_comm_hook, "fp16", "powersgd:2"),
     EFF(CF_ARITH | CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("comm_hook", WARN), CKPT,
     TWIN_REFUSED},
    {"slow-rank", "R:F", NULL, "none",
     "a straggler: rank R computes each step's forward and backward F times, F from 1 to 100 "
     "and fractional (1.1: 10% more; the same result, F times the work)",
     NULL, SET(set_slow_rank, get_slow_rank, "1:2", "0:3"),
     EFF(CF_SHARED | CF_SPEED), FPRINT(DDP), JSON_D("slow_rank", WARN)},
    {"check-replicas", "N", "0", "off",
     "dp, ddp: after every N steps the replicas compare a hash of their parameters (one "
     "small collective); the first step they differ stops the run (exit 1) naming the ranks, "
     "the first layer that differs and by how much",
     NULL, INT(check_replicas, 0, 1 << 30),
     EFF(CF_SHARED), FPRINT(DDP)},
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
    {"repeat", "N", "1", NULL,
     "run N times (DDP: fresh ranks each time); report medians and 95% intervals", NULL,
     INT(repeat, 1, CONFIG_REPEAT_MAX),
     EFF(CF_SHARED), FPRINT(OTHER)},
    {"predict", NULL, NULL, "off",
     "predict DP's and DDP's step on 1..8 devices from single's phases and measured collectives",
     NULL, ON(predict),
     EFF(CF_SHARED | CF_OUTPUT), FPRINT(OTHER)},
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

/* Once every option is read: what joins the run's fields. */
static int finish(void *part, const config_t *run, const config_line_t *line, char *err)
{
    config_t *c = part;
    (void)run;
    /* --layers or --act that change the preset's network make it a custom model. */
    config_t *p = malloc(sizeof *p); /* 14 KB: not on the stack (docs/faults.md) */
    if (!p)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    if (config_defaults_for(p, c->model_name, err) == DDP_OK &&
        (p->ndims != c->ndims || p->act != c->act ||
         memcmp(p->dims, c->dims, (size_t)c->ndims * sizeof c->dims[0]) != 0))
        c->model_name[0] = 0;
    free(p);
    /* torch.optim.AdamW defaults weight_decay to 1e-2. */
    if (c->optim.kind == OPTIM_ADAMW && !config_line_given(line, "weight-decay"))
        c->optim.weight_decay = 0.01f;
    if (config_line_given(line, "batch") && c->batch_per_device)
        return err_set(err, DDP_ERR_INPUT,
                       "--batch and --batch-per-device: choose one (--batch is the global batch, "
                       "--batch-per-device N makes it N x devices)");
    /* One Linear layer has no hidden layer, so no activation. */
    if (c->ndims == 2)
        c->act = ACT_NONE;
    return config_validate(c, err);
}

static int defaults(void *part, const char *preset, char *err)
{
    config_t *c = part;
    memset(c, 0, sizeof *c);
    c->slow_rank = -1; /* no straggler */
    TRY(opt_defaults(&config_options, c, err));
    return config_apply_preset(c, preset, err);
}

const opt_table_t config_options = {opts, NOPTS, sizeof(config_t), defaults, finish};

int config_defaults_for(config_t *c, const char *preset, char *err)
{
    return defaults(c, preset, err);
}

void config_line_init(config_line_t *l, config_t *run)
{
    memset(l, 0, sizeof *l);
    config_line_add(l, &config_options, run);
}

void config_defaults(config_t *c)
{
    char err[ERR_LEN];
    config_defaults_for(c, CONFIG_DEFAULT_PRESET, err);
}

int config_parse(config_t *c, int argc, char **argv, FILE *out, char *err)
{
    config_line_t l;
    config_line_init(&l, c);
    return config_line_parse(&l, argc, argv, out, err);
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
    /* what each kind's field reads as (K_SET's row has its get; K_PASS1 none) */
    static const cv_type_t type[K_SET + 1] = {
        [K_ON] = CV_BOOL,   [K_OFF] = CV_BOOL,    [K_INT] = CV_INT,       [K_LONG] = CV_INT,
        [K_BYTES] = CV_INT, [K_FLOAT] = CV_FLOAT, [K_DOUBLE] = CV_DOUBLE, [K_ABOVE] = CV_DOUBLE,
        [K_PATH] = CV_STR,  [K_NAME] = CV_STR};
    const opt_t *o = &opts[i];
    const void *f = (const char *)c + o->off;
    memset(v, 0, offsetof(config_value_t, list));
    v->buf[0] = 0;
    if (o->get) {
        o->get(c, v);
        return;
    }
    v->type = type[o->kind];
    if (o->kind == K_ON || o->kind == K_OFF)
        v->b = *(const bool *)f;
    else if (o->kind == K_INT)
        v->i = *(const int *)f;
    else if (o->kind == K_LONG || o->kind == K_BYTES)
        v->i = *(const long *)f;
    else if (o->kind == K_FLOAT)
        v->f = *(const float *)f;
    else if (v->type == CV_DOUBLE)
        v->d = *(const double *)f;
    else if (o->kind == K_PATH)
        v->s = (const char *)f;
    else if (o->kind == K_NAME)
        v->s = o->show(*(const int *)f);
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
