/* ddp/fingerprint.c: every rank on the same job, checked at start-up (see
 * fingerprint.h). */
#include "ddp/fingerprint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

/* A hash travels as floats holding 24 bits each: exact in float32, so any
 * collective moves it unchanged.  Three per field: 64 bits and change. */
#define FP_WORDS 3

static const char *const labels[FP_FIELDS] = {
    "another model (--layers, --act)",
    "another loss (--loss)",
    "another optimizer or hyper-parameters (--optim, --lr, --momentum, --weight-decay, ...)",
    "another batch (--batch, --batch-per-device, --accum)",
    "another length or schedule (--epochs, --steps, --warmup-steps, --log-every, "
    "--checkpoint-every, --resume)",
    "another sample order (--seed, --shuffle, --drop-last, --sampler-replicas, --rank-samples, "
    "--join)",
    "other data (--data, --targets, --samples, --dataset, --noise, or the files' contents)",
    "other DDP options (--bucket-mb, --first-bucket-mb, --overlap, --zero1, --comm)",
    "another world (the number of ranks)",
    "another ddpbench version",
};

const char *ddp_fingerprint_field(int k)
{
    return k >= 0 && k < FP_FIELDS ? labels[k] : "?";
}

static uint64_t hash_text(const char *s, const dataset_t *data, bool contents)
{
    hash64_t h;
    hash64_init(&h);
    hash64_update(&h, s, strlen(s));
    if (contents && data) { /* the data itself: another file of the same size differs */
        hash64_update(&h, data->x, data->n * (size_t)data->in_dim * sizeof(float));
        hash64_update(&h, data->y, data->n * (size_t)data->tgt_cols * sizeof(float));
    }
    return hash64_final(&h);
}

void ddp_fingerprint(const config_t *c, const dataset_t *d, fingerprint_t *fp)
{
    memset(fp, 0, sizeof *fp);
    char *t;
    size_t n;
    t = fp->text[FP_MODEL], n = sizeof fp->text[0];
    for (int i = 0; i < c->ndims; i++) {
        size_t u = strlen(t);
        snprintf(t + u, n - u, "%s%d", i ? "," : "", c->dims[i]);
    }
    size_t u = strlen(t);
    snprintf(t + u, n - u, " %s", act_name(c->act));
    snprintf(fp->text[FP_LOSS], n, "%s", loss_name(c->loss));
    const optim_cfg_t *o = &c->optim;
    snprintf(fp->text[FP_OPTIM], n, "%s lr %g momentum %g dampening %g nesterov %d wd %g "
             "betas %g,%g eps %g", optim_name(o->kind), o->lr, o->momentum, o->dampening,
             o->nesterov, o->weight_decay, o->beta1, o->beta2, o->eps);
    snprintf(fp->text[FP_BATCH], n, "batch %d per-device %d accum %d", c->batch,
             c->batch_per_device, c->accum);
    /* the loss all-reduces (--log-every) and checkpoint barriers are
     * collectives too: on other steps they would pair with another op */
    snprintf(fp->text[FP_LENGTH], n, "epochs %ld steps %ld warmup %ld log-every %ld "
             "checkpoint-every %ld%s resume %.60s", c->epochs, c->steps, c->warmup_steps,
             c->log_every, c->checkpoint_every, c->checkpoint_path[0] ? "" : " (off)",
             c->resume_path);
    t = fp->text[FP_ORDER];
    snprintf(t, n, "seed %llu shuffle %d drop-last %d replicas %d join %d samples",
             (unsigned long long)c->seed, c->shuffle, c->drop_last, c->sampler_replicas, c->join);
    for (int i = 0; i < c->nrank_samples; i++) {
        u = strlen(t);
        snprintf(t + u, n - u, "%s%ld", i ? "," : " ", c->rank_samples[i]);
    }
    if (d)
        snprintf(fp->text[FP_DATA], n, "%.100s: %zu x %d, %d target cols", d->source, d->n,
                 d->in_dim, d->tgt_cols);
    snprintf(fp->text[FP_DDP], n, "bucket %g first %g overlap %d zero1 %d comm %s", c->bucket_mb,
             c->first_bucket_mb, c->overlap, c->zero1, comm_name(c->comm));
    snprintf(fp->text[FP_WORLD], n, "%d ranks", c->ngpus);
    snprintf(fp->text[FP_VERSION], n, "ddpbench %s", DDPBENCH_VERSION);
    for (int k = 0; k < FP_FIELDS; k++)
        fp->h[k] = hash_text(fp->text[k], d, k == FP_DATA);
}

int ddp_fingerprint_check(comm_t *comm, backend_t *be, const fingerprint_t *mine,
                          const int *devices, char *err)
{
    int world = comm_world(comm), rank = comm_rank(comm);
    size_t per = (size_t)FP_FIELDS * FP_WORDS;
    float words[FP_FIELDS * FP_WORDS];
    for (int k = 0; k < FP_FIELDS; k++)
        for (int w = 0; w < FP_WORDS; w++)
            words[k * FP_WORDS + w] = (float)((mine->h[k] >> (24 * w)) & 0xffffff);
    float *host = malloc((size_t)world * per * sizeof(float));
    float *buf = backend_alloc_for(be, (size_t)world * per * sizeof(float), MEM_COMM);
    int rc = host && buf ? DDP_OK : err_set(err, DDP_ERR_RUNTIME, "out of memory for the "
                                                                  "configuration check");
    /* in place: this rank's block of the gathered array */
    if (rc == DDP_OK)
        rc = backend_check(be, backend_h2d(be, buf + (size_t)rank * per, words, sizeof words),
                           NULL, err);
    if (rc == DDP_OK)
        rc = comm_check(comm, comm_all_gather(comm, NULL, buf, per), "the configuration check",
                        err);
    /* Why wait: the comparison is the host's, once, before training. */
    if (rc == DDP_OK)
        rc = backend_check(be, backend_d2h(be, host, buf, (size_t)world * per * sizeof(float)),
                           NULL, err);
    for (int q = 1; rc == DDP_OK && q < world; q++)
        for (int k = 0; k < FP_FIELDS; k++)
            if (memcmp(host + (size_t)q * per + k * FP_WORDS, host + k * FP_WORDS,
                       FP_WORDS * sizeof(float)) != 0) {
                /* every rank names the same one; what it has is known to that rank */
                rc = err_set(err, DDP_ERR_INPUT,
                             "not the same job on every rank: rank %d (device %d) was started "
                             "with %s than rank 0 (device %d)%s%s",
                             q, devices[q], labels[k], devices[0],
                             rank == q || rank == 0 ? (rank == q ? "; it has: " : "; rank 0 has: ")
                                                    : "",
                             rank == q || rank == 0 ? mine->text[k] : "");
                break;
            }
    if (buf)
        backend_free(be, buf);
    free(host);
    return rc;
}
