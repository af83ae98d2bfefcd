/* common/config/config.c: the checks across options, and helpers on a configuration. */
#include "common/config/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"

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
        if (end == p || *p < '0' || *p > '9' || (*end && *end != ','))
            return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not a list of non-negative integers",
                           opt, s);
        if (errno == ERANGE || v > 1 << 20)
            return err_set(err, DDP_ERR_INPUT, "--%s: %.*s in '%s' is too large (at most %d)", opt,
                           (int)(end - p), p, s, 1 << 20);
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

/* The model, the loss and the data it reads. */
static int check_model_data(const config_t *c, char *err)
{
    model_spec_t spec;
    TRY(config_model_spec(c, &spec, err));
    TRY(optim_cfg_check(&c->optim, err));
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
    if (c->sampler_replicas && c->nrank_samples && c->sampler_replicas != c->nrank_samples)
        return err_set(err, DDP_ERR_INPUT,
                       "--sampler-replicas: %d, but --rank-samples lists %d ranks (it gives each "
                       "rank its own samples: no DistributedSampler)",
                       c->sampler_replicas, c->nrank_samples);
    for (int i = 0; i < c->nrank_samples; i++)
        if (c->rank_samples[i] < 0)
            return err_set(err, DDP_ERR_INPUT, "--rank-samples: a count is negative");
    return DDP_OK;
}

/* What the devices, the outputs and --mode comm can take. */
static int check_outputs(const config_t *c, char *err)
{
    if (c->checkpoint_every && !c->checkpoint_path[0])
        return err_set(err, DDP_ERR_INPUT, "--checkpoint-every: needs --checkpoint FILE");
    if (c->json && c->csv)
        return err_set(err, DDP_ERR_INPUT, "--json and --csv: choose one");
    if (c->comm == COMM_NCCL && c->backend == BACKEND_CPU)
        return err_set(err, DDP_ERR_INPUT, "--comm nccl: needs --backend cuda");
    bool tf32 = c->precision == PREC_TF32;
    for (int i = 0; i < c->nprecisions; i++)
        tf32 |= c->precisions[i] == PREC_TF32;
    if (tf32 && c->backend == BACKEND_CPU)
        return err_set(err, DDP_ERR_INPUT,
                       "--precision tf32: needs --backend cuda (the CPU computes in fp32)");
    if (c->min_bytes > c->max_bytes)
        return err_set(err, DDP_ERR_INPUT, "--min-bytes: %ld is more than --max-bytes %ld",
                       c->min_bytes, c->max_bytes);
    const char *no = c->csv                ? "--csv (use --json)"
                     : c->repeat > 1       ? "--repeat"
                     : c->predict          ? "--predict"
                     : c->trace_path[0]    ? "--trace"
                     : c->report_path[0]   ? "--report"
                     : c->explain          ? "--explain"
                     : c->save_path[0] || c->init_path[0] || c->checkpoint_path[0] ||
                             c->resume_path[0]
                         ? "a checkpoint option"
                         : NULL;
    if (no && c->mode == MODE_COMM)
        return err_set(err, DDP_ERR_INPUT, "%s: not for --mode comm (it trains nothing)", no);
    return DDP_OK;
}

/* What only ddp has, what only compare lists, and what --repeat cannot take. */
static int check_modes(const config_t *c, char *err)
{
    if (c->zero && c->mode != MODE_DDP && c->mode != MODE_COMPARE)
        return err_set(err, DDP_ERR_INPUT, "--zero: only ddp shards (--mode ddp, or compare's "
                       "ddp runs)");
    if (c->zero >= 2 && c->slow_rank >= 0)
        return err_set(err, DDP_ERR_INPUT, "--slow-rank: not with --zero %d (its extra passes "
                       "would gather and scatter the layers again)", c->zero);
    if (c->nprecisions > 1 && c->mode != MODE_COMPARE)
        return err_set(err, DDP_ERR_INPUT, "--precision: a list of precisions is for --mode "
                       "compare (single, dp and ddp at each); --mode %s runs one", mode_name(c->mode));
    if (c->nprecisions > 1 && c->nzero_stages > 0)
        return err_set(err, DDP_ERR_INPUT, "--precision: a list is not with --zero under compare "
                       "(one set of extra columns at a time)");
    if (c->nzero_stages > 1 && c->mode != MODE_COMPARE)
        return err_set(err, DDP_ERR_INPUT, "--zero: a list of stages is for --mode compare (a "
                       "ddp column each); --mode ddp runs one");
    if (c->zero && (c->checkpoint_path[0] || c->resume_path[0]))
        return err_set(err, DDP_ERR_INPUT, "--zero: not with %s (each rank holds only its "
                       "shard of the optimizer state)",
                       c->checkpoint_path[0] ? "--checkpoint" : "--resume");
    if (c->zero && c->bucket_auto)
        return err_set(err, DDP_ERR_INPUT, "--zero: not with --bucket-mb auto (each rank's "
                       "shard follows the buckets, which the warm-up would change)");
    const char *no = c->mode != MODE_DDP ? "only ddp has buckets to compress (--mode ddp)"
                     : c->zero           ? "not with --zero (its buckets are reduce-scattered)"
                     : c->bucket_auto    ? "not with --bucket-mb auto (the hook's buffers "
                                           "follow the buckets)"
                     : c->comm_hook == HOOK_POWERSGD && (c->checkpoint_path[0] || c->resume_path[0])
                         ? "powersgd not with --checkpoint or --resume (its error feedback "
                           "and warm start are not saved)"
                         : NULL;
    if (no && c->comm_hook != HOOK_NONE)
        return err_set(err, DDP_ERR_INPUT, "--comm-hook %s: %s", comm_hook_name(c->comm_hook), no);
    bool zero3 = c->zero == 3;
    for (int i = 0; i < c->nzero_stages; i++)
        zero3 = zero3 || c->zero_stages[i] == 3;
    if (c->check_replicas && (c->mode == MODE_SINGLE || zero3))
        return err_set(err, DDP_ERR_INPUT, "--check-replicas: %s", zero3
                       ? "not with --zero 3 (each rank holds its own 1/world of the parameters: "
                         "there is no replica to compare)"
                       : "--mode single holds one copy of the parameters (dp, ddp, compare)");
    if (c->slow_rank >= 0 && c->mode != MODE_DDP && c->mode != MODE_COMPARE)
        return err_set(err, DDP_ERR_INPUT, "--slow-rank: only ddp has ranks (--mode ddp, or "
                       "compare's ddp run)");
    no = c->trace_path[0]        ? "--trace"
         : c->checkpoint_path[0] ? "--checkpoint"
         : c->resume_path[0]     ? "--resume"
         : c->explain            ? "--explain"
                                 : NULL;
    if (no && c->repeat > 1)
        return err_set(err, DDP_ERR_INPUT,
                       "--repeat: not with %s (it describes one run; drop --repeat)", no);
    return DDP_OK;
}

int config_validate(const config_t *c, char *err)
{
    TRY(check_model_data(c, err));
    TRY(check_outputs(c, err));
    return check_modes(c, err);
}

int config_stream_ranks(const config_t *c)
{
    if (c->nrank_samples > 0)
        return c->nrank_samples;
    return c->sampler_replicas > 0 ? c->sampler_replicas : 1;
}

int config_model_spec(const config_t *c, model_spec_t *spec, char *err)
{
    return model_spec_init(spec, c->dims, c->ndims, c->act, err);
}

void config_comm_hook_text(const config_t *c, char *buf, size_t n)
{
    if (c->comm_hook == HOOK_POWERSGD)
        snprintf(buf, n, "powersgd:%d:%ld", c->powersgd_rank, c->powersgd_start);
    else
        snprintf(buf, n, "%s", comm_hook_name(c->comm_hook));
}
