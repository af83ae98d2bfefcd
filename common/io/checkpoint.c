/* common/io/checkpoint.c: weights files, checkpoints and resuming (see
 * checkpoint.h for the names and the metadata). */
#include "common/io/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/fault.h"
#include "common/base/hash.h"
#include "common/base/text.h"
#include "common/config/fields.h"
#include "common/io/safetensors.h"
#include "common/base/status.h"

#define CKPT_FORMAT "2"
#define CKPT_MAX_TENSORS (3 * 2 * MODEL_MAX_LAYERS) /* parameters + two state arenas */
#define MAX_FACTS 24

// ---------------------------------------------------------------------------
// names: the tensors of a model (and of its optimizer state)

void ckpt_param_name(int layer, bool bias, char *out, size_t size)
{
    /* nn.Sequential numbers the activation modules too: Linear l is module 2l. */
    snprintf(out, size, "%d.%s", 2 * layer, bias ? "bias" : "weight");
}

typedef struct {
    char name[CKPT_MAX_TENSORS][64];
    st_expect_t e[CKPT_MAX_TENSORS];
    int arena[CKPT_MAX_TENSORS]; /* 0: parameters, 1 + k: state arena k */
    size_t off[CKPT_MAX_TENSORS]; /* floats into that arena */
    st_out_t out[CKPT_MAX_TENSORS]; /* list_out's */
    size_t n;
} tensor_list_t;

static const char *state_prefix(optim_kind_t kind, int k)
{
    /* torch.optim's state keys */
    if (kind == OPTIM_SGD)
        return "optim.momentum_buffer.";
    return k == 0 ? "optim.exp_avg." : "optim.exp_avg_sq.";
}

/* Parameters in arena order, then each state arena in the same order. */
static void list_build(tensor_list_t *L, const model_spec_t *spec, optim_kind_t kind, int nstate)
{
    L->n = 0;
    for (int a = 0; a <= nstate; a++)
        for (int l = 0; l < spec->nlayers; l++)
            for (int b = 0; b < 2; b++) {
                size_t i = L->n++;
                char pn[32];
                ckpt_param_name(l, b, pn, sizeof pn);
                snprintf(L->name[i], sizeof L->name[i], "%s%s", a ? state_prefix(kind, a - 1) : "",
                         pn);
                L->e[i] = (st_expect_t){L->name[i], b ? 1 : 2,
                                        {(uint64_t)spec->dims[l + 1], (uint64_t)spec->dims[l]}};
                L->arena[i] = a;
                L->off[i] = b ? spec->b_off[l] : spec->w_off[l];
            }
}

/* The list's tensors as the writer takes them, into L->out. */
static void list_out(tensor_list_t *L, const float *params, const float *const *state)
{
    for (size_t i = 0; i < L->n; i++) {
        const float *base = L->arena[i] ? state[L->arena[i] - 1] : params;
        L->out[i] = (st_out_t){L->name[i], L->e[i].ndim, {L->e[i].shape[0], L->e[i].shape[1]},
                               base + L->off[i]};
    }
}

/* "0.weight [3, 1] is nan: ..." for element k of tensor t. */
static int nonfinite_error(const st_tensor_t *t, uint64_t k, float v, char *err)
{
    const char *what = isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
    char where[160];
    if (t->ndim == 2 && t->shape[1])
        snprintf(where, sizeof where, "%s [%llu, %llu] is %s", t->name,
                 (unsigned long long)(k / t->shape[1]), (unsigned long long)(k % t->shape[1]),
                 what);
    else
        snprintf(where, sizeof where, "%s [%llu] is %s", t->name, (unsigned long long)k, what);
    return err_set(err, DDP_ERR_INPUT, "%s: the file holds values that are not finite numbers",
                   where);
}

/* Read the list's tensors; every value must be finite.  hashes (may be
 * NULL) receive each tensor's hash for the content checksum. */
static int read_list(st_file_t *sf, const tensor_list_t *L, float *params, float *const *state,
                     uint64_t *hashes, char *err)
{
    for (size_t i = 0; i < L->n; i++) {
        float *dst = (L->arena[i] ? state[L->arena[i] - 1] : params) + L->off[i];
        const st_tensor_t *t = st_find(&sf->h, L->name[i]);
        TRY(st_read_f32_hashed(sf, t, dst, hashes ? &hashes[i] : NULL, err));
        for (uint64_t k = 0; k < t->count; k++)
            if (!isfinite(dst[k]))
                return nonfinite_error(t, k, dst[k], err);
    }
    return DDP_OK;
}

/* Every tensor of an open file read through a small buffer: each value must
 * be finite; with_checksum: the content checksum must match too. */
static int scan_file(st_file_t *sf, bool with_checksum, char *err)
{
    size_t n = sf->h.nt;
    const char **names = malloc((n ? n : 1) * sizeof *names);
    uint64_t *hashes = malloc((n ? n : 1) * sizeof *hashes);
    int rc = names && hashes ? DDP_OK : err_set(err, DDP_ERR_RUNTIME, "out of memory");
    for (size_t i = 0; i < n && rc == DDP_OK; i++) {
        const st_tensor_t *t = &sf->h.t[i];
        uint64_t bad;
        names[i] = t->name;
        hashes[i] = 0;
        if (strcmp(t->dtype, "F32") != 0) /* st_expect refused it if the model reads it */
            continue;
        rc = st_scan_f32(sf, t, &hashes[i], &bad, err);
        if (rc == DDP_OK && bad < t->count) {
            float v = NAN;
            uint8_t b[4];
            if (fseeko(sf->f, (off_t)(sf->h.data_start + t->begin + 4 * bad), SEEK_SET) == 0 &&
                fread(b, 1, 4, sf->f) == 4)
                st_decode_f32(b, 1, &v);
            rc = nonfinite_error(t, bad, v, err);
        }
    }
    if (rc == DDP_OK && with_checksum)
        rc = st_checksum_check(&sf->h, names, hashes, n, err);
    free(names);
    free(hashes);
    return rc;
}

static void layers_str(const model_spec_t *spec, char *out, size_t size)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i <= spec->nlayers && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%d", i ? "," : "", spec->dims[i]);
}

static int state_count(const config_t *cfg)
{
    optim_t o = {.cfg = cfg->optim};
    return optim_state_count(&o);
}

// ---------------------------------------------------------------------------
// weights files: --save and --init

/* The weights file's tensors and metadata, then write (to path, or into a
 * when path is NULL). */
static int weights_write(const char *path, afile_t *a, const config_t *cfg,
                         const model_spec_t *spec, const float *params, char *err)
{
    tensor_list_t *L = malloc(sizeof *L); /* 29 KB: not on the stack (docs/faults.md) */
    if (!L)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    list_build(L, spec, cfg->optim.kind, 0);
    char layers[512];
    layers_str(spec, layers, sizeof layers);
    const st_kv_t meta[] = {{"format", "pt"},
                            {"producer", "ddpbench " DDPBENCH_VERSION},
                            {"layers", layers},
                            {"act", act_name(spec->act)},
                            {"loss", loss_name(cfg->loss)}};
    list_out(L, params, NULL);
    size_t nm = sizeof meta / sizeof meta[0];
    int rc = path ? st_write(path, L->out, L->n, meta, nm, false, err)
                  : st_write_into(a, L->out, L->n, meta, nm, err);
    free(L);
    return rc;
}

int ckpt_save_weights(const char *path, const config_t *cfg, const model_spec_t *spec,
                      const float *params, char *err)
{
    int rc = weights_write(path, NULL, cfg, spec, params, err);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "--save %s", path);
}

int ckpt_weights_into(afile_t *a, const config_t *cfg, const model_spec_t *spec,
                      const float *params, char *err)
{
    return weights_write(NULL, a, cfg, spec, params, err);
}

/* Open a weights file (or a checkpoint, whose optimizer state is skipped) and
 * check its tensors against the model. */
static int open_weights(st_file_t *sf, tensor_list_t *L, const char *path, const char *what,
                        const model_spec_t *spec, char *err)
{
    int rc = st_open(sf, path, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "%s %s", what, path);
    list_build(L, spec, OPTIM_SGD, 0);
    bool is_ckpt = st_meta(&sf->h, "checkpoint") != NULL;
    rc = st_expect(&sf->h, L->e, L->n, is_ckpt ? "optim." : NULL, err);
    /* The tensors fit the model; metadata that says otherwise means the
     * file is not what it claims (an edit, or tensors from another model). */
    const char *layers = st_meta(&sf->h, "layers"), *act = st_meta(&sf->h, "act"),
               *loss = st_meta(&sf->h, "loss");
    char mine[512], shown[64];
    layers_str(spec, mine, sizeof mine);
    if (rc == DDP_OK && layers && strcmp(layers, mine) != 0)
        rc = err_set(err, DDP_ERR_INPUT,
                     "its __metadata__ says layers '%s', but its tensors are those of %s",
                     text_escape(layers, strlen(layers), shown, sizeof shown), mine);
    /* the names the warning on another --act or --loss quotes: ours alone */
    const char *bad = act && act_parse(act) < 0 ? act : loss && loss_parse(loss) < 0 ? loss : NULL;
    if (rc == DDP_OK && bad)
        rc = err_set(err, DDP_ERR_INPUT, "its __metadata__ %s '%s' is none of %s",
                     bad == act ? "act" : "loss", text_escape(bad, strlen(bad), shown, sizeof shown),
                     bad == act ? "none, relu, tanh, sigmoid, gelu" : "mse, bce, ce");
    if (rc != DDP_OK) {
        st_close(sf);
        return err_prefix(err, rc, "%s %s", what, path);
    }
    return DDP_OK;
}

int ckpt_load_weights(const char *path, const char *what, const model_spec_t *spec,
                      float *params, char *err)
{
    st_file_t sf;
    tensor_list_t *L = malloc(sizeof *L); /* 29 KB: not on the stack (docs/faults.md) */
    if (!L)
        return err_set(err, DDP_ERR_RUNTIME, "%s %s: out of memory", what, path);
    int rc = open_weights(&sf, L, path, what, spec, err);
    if (rc == DDP_OK) {
        rc = read_list(&sf, L, params, NULL, NULL, err);
        st_close(&sf);
        if (rc != DDP_OK)
            err_prefix(err, rc, "%s %s", what, path);
    }
    free(L);
    return rc;
}

void ckpt_init_note(const config_t *cfg, const model_spec_t *spec, char *note, size_t len)
{
    note[0] = 0;
    if (!cfg->init_path[0] || len == 0)
        return;
    st_file_t sf;
    char err[ERR_LEN];
    if (st_open(&sf, cfg->init_path, err) != DDP_OK)
        return; /* ckpt_preflight has said what is wrong with it */
    const char *act = st_meta(&sf.h, "act"), *loss = st_meta(&sf.h, "loss");
    /* one Linear layer has no activation, whatever an older file says */
    bool act_differs = act && spec->nlayers > 1 && strcmp(act, act_name(cfg->act)) != 0;
    bool loss_differs = loss && strcmp(loss, loss_name(cfg->loss)) != 0;
    if (act_differs || loss_differs)
        snprintf(note, len,
                 "--init %s: its weights were trained with%s%.32s%s%.32s, this run uses%s%s%s%s "
                 "(the shapes match, so they load)",
                 cfg->init_path, act_differs ? " --act " : "", act_differs ? act : "",
                 loss_differs ? " --loss " : "", loss_differs ? loss : "",
                 act_differs ? " --act " : "", act_differs ? act_name(cfg->act) : "",
                 loss_differs ? " --loss " : "", loss_differs ? loss_name(cfg->loss) : "");
    st_close(&sf);
}

// ---------------------------------------------------------------------------
// the facts a checkpoint records about its run

typedef struct {
    char key[32];
    char option[40]; /* how the user sets it, for messages */
    char val[320];
} fact_t;

/* Devices the run's mode uses (1 for single): the "world" a checkpoint records. */
static int ckpt_world(const config_t *cfg) { return cfg->mode == MODE_SINGLE ? 1 : cfg->ngpus; }

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The shortest decimal that reads back as the same float ("0.003", not
 * "0.00300000003"): exact, and what the user typed in the usual case. */
static void fmt_float(char *out, size_t size, float v)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(out, size, "%.*g", prec, (double)v);
        if ((float)strtod(out, NULL) == v)
            return;
    }
}

/* What the data is, as far as a resume must agree: the synthetic set's kind
 * and size (its seed is the run's), or the files' names and rows. */
static void data_identity(const config_t *c, const dataset_t *d, char *out, size_t size)
{
    if (c->data_path[0]) {
        snprintf(out, size, "file %.120s%s%.120s rows=%zu", base_name(c->data_path),
                 c->targets_path[0] ? " + " : "", c->targets_path[0] ? base_name(c->targets_path) : "",
                 d->n);
    } else {
        char nz[32];
        fmt_float(nz, sizeof nz, c->noise);
        bool noisy = strcmp(d->source, "synthetic regression") == 0;
        snprintf(out, size, "%s samples=%zu%s%s", d->source, d->n, noisy ? " noise=" : "",
                 noisy ? nz : "");
    }
}

/* The data's contents: a hash of every feature and target value as loaded
 * (the fingerprint's, ddp/fingerprint.c), so other data under the same file
 * name and row count is told apart. */
static void data_contents(const dataset_t *d, char *out, size_t size)
{
    hash64_t h;
    hash64_init(&h);
    hash64_update(&h, d->x, d->n * (size_t)d->in_dim * sizeof(float));
    hash64_update(&h, d->y, d->n * (size_t)d->tgt_cols * sizeof(float));
    snprintf(out, size, "%zu rows of %d features and %d targets, hash %016llx", d->n, d->in_dim,
             d->tgt_cols, (unsigned long long)hash64_final(&h));
}

/* Which sample stream the run reads (schedule.h): the DistributedSampler's
 * over R replicas, or each rank's own shard. */
static void stream_identity(const config_t *c, char *out, size_t size)
{
    if (c->nrank_samples == 0) {
        snprintf(out, size, "sampler replicas=%d", config_stream_ranks(c));
        return;
    }
    size_t used = (size_t)snprintf(out, size, "rank samples=");
    for (int r = 0; r < c->nrank_samples && used < size; r++)
        used += (size_t)snprintf(out + used, size - used, "%s%ld", r ? "," : "", c->rank_samples[r]);
}

/* The run's facts: every option row that records one (config/fields.h),
 * in the table's order, then those that join several fields: the world,
 * the sample stream, the data and its contents. */
static int run_facts(const schedule_t *s, fact_t *f)
{
    const config_t *c = s->cfg;
    int n = 0;
    for (int i = 0; i < config_fields() && n < MAX_FACTS - 4; i++) {
        const config_derive_t *d = config_field_derive(i);
        if (d->ckpt != C_FACT || (d->optims && !(d->optims & (1u << c->optim.kind))))
            continue;
        const char *name = config_field_name(i);
        snprintf(f[n].key, sizeof f[n].key, "%s", name);
        for (char *p = f[n].key; *p; p++)
            if (*p == '-')
                *p = '_';
        /* a flag with a --no- form is named by its field ("shuffle true") */
        char no[48];
        snprintf(no, sizeof no, "no-%s", name);
        snprintf(f[n].option, sizeof f[n].option, "%s%s", config_field_find(no) >= 0 ? "" : "--",
                 name);
        config_value_t v;
        config_field_value(c, i, &v);
        config_value_text(&v, "true", "false", f[n].val, sizeof f[n].val);
        n++;
    }
    static const char *const joined[][2] = {{"world", "device count"},
                                            {"stream", "the sample stream"},
                                            {"data", "data"},
                                            {"data_hash", "data contents"}};
    snprintf(f[n].val, sizeof f[n].val, "%d", ckpt_world(c));
    stream_identity(c, f[n + 1].val, sizeof f[n + 1].val);
    data_identity(c, s->data, f[n + 2].val, sizeof f[n + 2].val);
    data_contents(s->data, f[n + 3].val, sizeof f[n + 3].val);
    for (int k = 0; k < 4; k++, n++) {
        snprintf(f[n].key, sizeof f[n].key, "%s", joined[k][0]);
        snprintf(f[n].option, sizeof f[n].option, "%s", joined[k][1]);
    }
    return n;
}

// ---------------------------------------------------------------------------
// checkpoints

/* Where a checkpoint stands (the next step, and the sampler's state). */
static const char *const pos_keys[] = {"global_step", "optim_step", "epoch", "epoch_step",
                                       "steps_per_epoch"};

/* The checkpoint of the run s belongs to: host parameters and nstate state
 * arenas, each spec->nparams floats. */
static int ckpt_save(const char *path, const schedule_t *s, const model_spec_t *spec,
                     const float *params, const float *const *state, int nstate,
                     const ckpt_pos_t *pos, bool kill_before_rename, char *err)
{
    fact_t facts[MAX_FACTS];
    int nf = run_facts(s, facts);
    long spe = s->steps_per_epoch;
    long epoch = pos->global_step / spe;
    long vals[] = {pos->global_step, pos->optim_step, epoch, pos->global_step % spe, spe};
    char num[6][24];
    st_kv_t meta[MAX_FACTS + 12];
    size_t nm = 0;
    meta[nm++] = (st_kv_t){"format", "pt"};
    meta[nm++] = (st_kv_t){"producer", "ddpbench " DDPBENCH_VERSION};
    meta[nm++] = (st_kv_t){"checkpoint", CKPT_FORMAT};
    for (int i = 0; i < 5; i++) {
        snprintf(num[i], sizeof num[i], "%ld", vals[i]);
        meta[nm++] = (st_kv_t){pos_keys[i], num[i]};
    }
    snprintf(num[5], sizeof num[5], "%llu", (unsigned long long)(s->cfg->seed + (uint64_t)epoch));
    meta[nm++] = (st_kv_t){"shuffle_seed", num[5]};
    for (int i = 0; i < nf; i++)
        meta[nm++] = (st_kv_t){facts[i].key, facts[i].val};

    tensor_list_t *L = malloc(sizeof *L);
    if (!L)
        return err_set(err, DDP_ERR_RUNTIME, "--checkpoint %s: out of memory", path);
    list_build(L, spec, s->cfg->optim.kind, nstate);
    list_out(L, params, state);
    int rc = st_write_checksummed(path, L->out, L->n, meta, nm, kill_before_rename, err);
    free(L);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "--checkpoint %s", path);
}

/* A non-negative decimal integer, nothing else. */
static bool parse_count(const char *s, long *out)
{
    if (!s || !*s)
        return false;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (1L << 50))
            return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

/* The checkpoint's settings, position and tensors against this run (no data read). */
static int check_checkpoint(const st_header_t *h, const schedule_t *s, const model_spec_t *spec,
                            int nstate, tensor_list_t *L, ckpt_pos_t *pos, char *err)
{
    const char *v = st_meta(h, "checkpoint");
    if (!v)
        return err_set(err, DDP_ERR_INPUT,
                       "not a ddpbench checkpoint (no 'checkpoint' in its __metadata__); a "
                       "weights file goes to --init");
    if (strcmp(v, CKPT_FORMAT) != 0)
        return err_set(err, DDP_ERR_INPUT, "checkpoint format '%.32s'; this ddpbench reads "
                                           "format " CKPT_FORMAT, v);
    fact_t facts[MAX_FACTS];
    int nf = run_facts(s, facts);
    for (int i = 0; i < nf; i++) {
        const char *old = st_meta(h, facts[i].key);
        char implied[64];
        if (!old && strcmp(facts[i].key, "stream") == 0) {
            /* written before the stream was recorded: single and dp read the
             * plain order, ddp its sampler's over the ranks */
            snprintf(implied, sizeof implied, "sampler replicas=%d", ckpt_world(s->cfg));
            old = implied;
        }
        /* written before these were recorded: not compared (the data's
         * name and rows are; such a file may come from an fp32 run or a
         * bf16 one, with a hook or without) */
        static const char *const later[] = {"data_hash", "precision", "comm_hook"};
        bool unrecorded = false;
        for (int k = 0; k < 3 && !old; k++)
            unrecorded |= strcmp(facts[i].key, later[k]) == 0;
        if (unrecorded)
            continue;
        /* one Linear layer has no activation (older files named one) */
        if (strcmp(facts[i].key, "act") == 0 && spec->nlayers == 1)
            continue;
        if (!old)
            return err_set(err, DDP_ERR_INPUT, "the checkpoint does not record '%s'",
                           facts[i].key);
        if (strcmp(old, facts[i].val) != 0)
            return err_set(err, DDP_ERR_INPUT,
                           "the checkpoint was written with %s %.160s, this run has %s %.160s "
                           "(a resumed run keeps the settings it started with)",
                           facts[i].option, old, facts[i].option, facts[i].val);
    }
    long g, os, epoch, epoch_step, spe;
    long *vals[] = {&g, &os, &epoch, &epoch_step, &spe};
    for (int i = 0; i < 5; i++)
        if (!parse_count(st_meta(h, pos_keys[i]), vals[i]))
            return err_set(err, DDP_ERR_INPUT, "__metadata__ '%s' is missing or not a count",
                           pos_keys[i]);
    if (spe != s->steps_per_epoch)
        return err_set(err, DDP_ERR_INPUT,
                       "the checkpoint's epochs have %ld steps, this run's %ld", spe,
                       s->steps_per_epoch);
    if (epoch != g / spe || epoch_step != g % spe || os > g)
        return err_set(err, DDP_ERR_INPUT,
                       "inconsistent position (global_step %ld, epoch %ld, epoch_step %ld, "
                       "optim_step %ld)",
                       g, epoch, epoch_step, os);
    const char *ss = st_meta(h, "shuffle_seed");
    char want_ss[24];
    snprintf(want_ss, sizeof want_ss, "%llu", (unsigned long long)(s->cfg->seed + (uint64_t)epoch));
    if (!ss || strcmp(ss, want_ss) != 0)
        return err_set(err, DDP_ERR_INPUT,
                       "__metadata__ 'shuffle_seed' is %.24s, but seed + epoch is %s", ss ? ss : "missing",
                       want_ss);
    if (g >= s->total_steps)
        return err_set(err, DDP_ERR_INPUT,
                       "the checkpoint is at step %ld and this run ends at step %ld: nothing "
                       "left to run (raise --steps or --epochs)",
                       g, s->total_steps);
    list_build(L, spec, s->cfg->optim.kind, nstate);
    TRY(st_expect(h, L->e, L->n, NULL, err));
    pos->global_step = g;
    pos->optim_step = os;
    return DDP_OK;
}

/* Check a checkpoint against the run and read it ("--resume PATH: " messages). */
static int ckpt_load(const char *path, const schedule_t *s, const model_spec_t *spec,
                     float *params, float *const *state, int nstate, ckpt_pos_t *pos, char *err)
{
    st_file_t sf;
    int rc = st_open(&sf, path, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "--resume %s", path);
    tensor_list_t *L = malloc(sizeof *L);
    if (!L)
        rc = err_set(err, DDP_ERR_RUNTIME, "out of memory");
    if (rc == DDP_OK)
        rc = check_checkpoint(&sf.h, s, spec, nstate, L, pos, err);
    uint64_t *hashes = rc == DDP_OK ? malloc(L->n * sizeof *hashes) : NULL;
    if (rc == DDP_OK && !hashes)
        rc = err_set(err, DDP_ERR_RUNTIME, "out of memory");
    if (rc == DDP_OK)
        rc = read_list(&sf, L, params, state, hashes, err);
    if (rc == DDP_OK) {
        const char *names[CKPT_MAX_TENSORS];
        for (size_t i = 0; i < L->n; i++)
            names[i] = L->name[i];
        rc = st_checksum_check(&sf.h, names, hashes, L->n, err);
    }
    free(hashes);
    free(L);
    st_close(&sf);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "--resume %s", path);
}

// ---------------------------------------------------------------------------
// before the run

int ckpt_preflight(const config_t *cfg, const model_spec_t *spec, const dataset_t *data,
                   char *err)
{
    const struct {
        const char *path, *opt;
    } outs[] = {{cfg->save_path, "--save"}, {cfg->checkpoint_path, "--checkpoint"},
                {cfg->resume_path, "--resume"}};
    if (cfg->mode == MODE_COMPARE)
        for (int i = 0; i < 3; i++)
            if (outs[i].path[0])
                return err_set(err, DDP_ERR_INPUT,
                               "%s: not with --mode compare (it trains three models; run one "
                               "mode)",
                               outs[i].opt);
    if (cfg->init_path[0] && cfg->resume_path[0])
        return err_set(err, DDP_ERR_INPUT,
                       "--init and --resume: choose one (a checkpoint holds the weights)");

    int rc = DDP_OK;
    st_file_t sf;
    tensor_list_t *L = malloc(sizeof *L);
    if (!L)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    /* The data is read too (through a small buffer): a NaN weight or an
     * edited checkpoint is bad input, found before anything runs. */
    if (cfg->init_path[0] && (rc = open_weights(&sf, L, cfg->init_path, "--init", spec, err)) == DDP_OK) {
        /* a checkpoint of this format has its checksum (a weights file, as
         * PyTorch writes it, none): one deleted is an edit */
        const char *format = st_meta(&sf.h, "checkpoint");
        bool sealed = st_meta(&sf.h, ST_CHECKSUM_KEY) || (format && !strcmp(format, CKPT_FORMAT));
        if ((rc = scan_file(&sf, sealed, err)) != DDP_OK)
            err_prefix(err, rc, "--init %s", cfg->init_path);
        st_close(&sf);
    }
    if (rc == DDP_OK && cfg->resume_path[0]) {
        schedule_t s;
        rc = schedule_init(&s, cfg, data, 1, 0, err);
        if (rc == DDP_OK) {
            if ((rc = st_open(&sf, cfg->resume_path, err)) == DDP_OK) {
                ckpt_pos_t pos;
                rc = check_checkpoint(&sf.h, &s, spec, state_count(cfg), L, &pos, err);
                if (rc == DDP_OK)
                    rc = scan_file(&sf, true, err);
                st_close(&sf);
            }
            if (rc != DDP_OK)
                err_prefix(err, rc, "--resume %s", cfg->resume_path);
            schedule_free(&s);
        }
    }
    free(L);
    for (int i = 0; i < 2 && rc == DDP_OK; i++)
        if (outs[i].path[0] && (rc = afile_check(outs[i].path, err)) != DDP_OK)
            err_prefix(err, rc, "%s %s", outs[i].opt, outs[i].path);
    return rc;
}

// ---------------------------------------------------------------------------
// what a strategy calls

int ckpt_run_init(ckpt_run_t *c, const config_t *cfg, const model_spec_t *spec,
                  const optim_t *o, int device_index, char *err)
{
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->spec = spec;
    c->device_index = device_index;
    c->nstate = o ? optim_state_count(o) : state_count(cfg);
    if (!cfg->checkpoint_path[0] && !cfg->resume_path[0])
        return DDP_OK;
    size_t bytes = (spec->nparams ? spec->nparams : 1) * sizeof(float);
    bool ok = true;
    if (cfg->checkpoint_path[0])
        ok = (c->params = malloc(bytes)) != NULL;
    for (int k = 0; k < c->nstate && ok; k++)
        ok = (c->state[k] = malloc(bytes)) != NULL;
    if (!ok) {
        ckpt_run_free(c);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the checkpoint buffers");
    }
    return DDP_OK;
}

void ckpt_run_free(ckpt_run_t *c)
{
    free(c->params);
    free(c->state[0]);
    free(c->state[1]);
    c->params = c->state[0] = c->state[1] = NULL;
}

int ckpt_run_load(ckpt_run_t *c, schedule_t *s, float *host_params, char *err)
{
    const config_t *cfg = c->cfg;
    if (!cfg->resume_path[0])
        return DDP_OK;
    TRY(ckpt_load(cfg->resume_path, s, c->spec, host_params, c->state, c->nstate, &c->pos, err));
    c->loaded = true;
    s->start_step = c->pos.global_step;
    return DDP_OK;
}

int ckpt_run_upload(ckpt_run_t *c, optim_t *o, char *err)
{
    if (!c->loaded)
        return DDP_OK;
    for (int k = 0; k < c->nstate; k++)
        if (optim_state_upload(o, k, c->state[k]) != DDP_OK)
            return err_set(err, DDP_ERR_RUNTIME, "device %d: %s", backend_device_id(o->be),
                           backend_last_error(o->be));
    o->step = c->pos.optim_step; /* Adam's bias correction and SGD's first step go on from here */
    return DDP_OK;
}

int ckpt_run_resume(ckpt_run_t *c, schedule_t *s, float *host_params, optim_t *o, char *err)
{
    int rc = ckpt_run_load(c, s, host_params, err);
    return rc == DDP_OK ? ckpt_run_upload(c, o, err) : rc;
}

bool ckpt_run_due(const ckpt_run_t *c, const schedule_t *s, long g)
{
    const config_t *cfg = c->cfg;
    if (!cfg->checkpoint_path[0])
        return false;
    return g == s->total_steps - 1 ||
           (cfg->checkpoint_every > 0 && (g + 1) % cfg->checkpoint_every == 0);
}

int ckpt_run_write(ckpt_run_t *c, const schedule_t *s, const float *dev_params, const optim_t *o,
                   long g, char *err)
{
    backend_t *be = o->be;
    /* d2h waits for the step's work on this device, so the copy is step g's state. */
    int rc = backend_d2h(be, c->params, dev_params, c->spec->nparams * sizeof(float));
    for (int k = 0; k < c->nstate && rc == DDP_OK; k++)
        rc = optim_state_download(o, k, c->state[k]);
    if (rc != DDP_OK)
        return err_set(err, DDP_ERR_RUNTIME, "device %d: %s", backend_device_id(be),
                       backend_last_error(be));
    /* A diverged run must not replace a good checkpoint with NaNs. */
    if (!c->cfg->allow_nonfinite) {
        char where[128];
        size_t bad = model_count_nonfinite(c->spec, c->params, where, sizeof where);
        for (int k = 0; k < c->nstate && !bad; k++)
            for (size_t i = 0; i < c->spec->nparams && !bad; i++)
                if (!isfinite(c->state[k][i])) {
                    bad = 1;
                    snprintf(where, sizeof where, "the optimizer state holds %g", c->state[k][i]);
                }
        if (bad)
            return err_set(err, DDP_ERR_RUNTIME,
                           "step %ld: %s: the training diverged; --checkpoint %s was not "
                           "written (--allow-nonfinite writes it anyway)",
                           g + 1, where, c->cfg->checkpoint_path);
    }
    ckpt_pos_t pos = {g + 1, o->step};
    fault_kind_t f = fault_at(c->device_index, g);
    bool kill = f == FAULT_WRITE;
    if (f == FAULT_PAUSE)
        fault_pause_arm();
    rc = ckpt_save(c->cfg->checkpoint_path, s, c->spec, c->params,
                   (const float *const *)c->state, c->nstate, &pos, kill, err);
    /* The path passed its checks before the run: what fails now (its folder
     * removed, the disk full) is a fault at run time, exit 1, not bad input. */
    if (rc == DDP_ERR_INPUT)
        rc = DDP_ERR_RUNTIME;
    return rc == DDP_OK ? rc : err_prefix(err, rc, "step %ld", g + 1);
}
