/* ddp/fingerprint.c: the settings, data and binary every rank must share, as
 * "KEY VALUE" lines (fingerprint.h). */
#include "ddp/fingerprint.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"

typedef struct {
    fingerprint_t *fp;
    size_t used;
} writer_t;

static void line(writer_t *w, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void line(writer_t *w, const char *key, const char *fmt, ...)
{
    size_t room = sizeof w->fp->text - w->used;
    int n = snprintf(w->fp->text + w->used, room, "%s ", key);
    if (n < 0 || (size_t)n >= room)
        return;
    w->used += (size_t)n;
    room -= (size_t)n;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(w->fp->text + w->used, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n + 1 >= room) { /* full: end the text on the last whole line */
        w->fp->text[w->used] = 0;
        return;
    }
    w->used += (size_t)n;
    w->fp->text[w->used++] = '\n';
    w->fp->text[w->used] = 0;
}

static const char *onoff(bool b) { return b ? "on" : "off"; }

/* The shortest decimal that reads back as the same float ("0.003", not
 * "0.00300000003"): what the user typed in the usual case. */
static const char *flt(char *buf, size_t n, float v)
{
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)v);
        if ((float)strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

/* A file's bytes, hashed (0 when it cannot be read: the caller's own checks
 * say why). */
static unsigned long long file_hash(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    hash64_t h;
    hash64_init(&h);
    static char buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        hash64_update(&h, buf, (size_t)n);
    close(fd);
    return n < 0 ? 0 : (unsigned long long)hash64_final(&h);
}

void fingerprint_make(fingerprint_t *fp, const config_t *c, const dataset_t *data)
{
    writer_t w = {fp, 0};
    char b[32];
    fp->text[0] = 0;
    line(&w, "--mode", "%s", mode_name(c->mode));
    line(&w, "--backend", "%s", backend_kind_name(c->backend));
    line(&w, "--tf32", "%s", onoff(c->tf32));
    char dims[256] = "";
    for (int i = 0, n = 0; i < c->ndims && n < (int)sizeof dims; i++)
        n += snprintf(dims + n, sizeof dims - (size_t)n, "%s%d", i ? "," : "", c->dims[i]);
    line(&w, "--layers", "%s", dims);
    line(&w, "--act", "%s", act_name(c->act));
    line(&w, "--loss", "%s", loss_name(c->loss));
    line(&w, "--optim", "%s", optim_name(c->optim.kind));
    line(&w, "--lr", "%s", flt(b, sizeof b, c->optim.lr));
    line(&w, "--momentum", "%s", flt(b, sizeof b, c->optim.momentum));
    line(&w, "--dampening", "%s", flt(b, sizeof b, c->optim.dampening));
    line(&w, "--nesterov", "%s", onoff(c->optim.nesterov));
    line(&w, "--weight-decay", "%s", flt(b, sizeof b, c->optim.weight_decay));
    line(&w, "--beta1", "%s", flt(b, sizeof b, c->optim.beta1));
    line(&w, "--beta2", "%s", flt(b, sizeof b, c->optim.beta2));
    line(&w, "--eps", "%s", flt(b, sizeof b, c->optim.eps));
    line(&w, "--seed", "%llu", (unsigned long long)c->seed);
    line(&w, "--dataset", "%s", synth_name(c->dataset));
    line(&w, "--samples", "%ld", c->samples);
    line(&w, "--noise", "%s", flt(b, sizeof b, c->noise));
    line(&w, "--target-cols", "%d", c->target_cols);
    line(&w, "--batch", "%d", c->batch);
    line(&w, "--batch-per-device", "%d", c->batch_per_device);
    line(&w, "--accum", "%d", c->accum);
    line(&w, "--epochs", "%ld", c->epochs);
    line(&w, "--steps", "%ld", c->steps);
    line(&w, "--shuffle", "%s", onoff(c->shuffle));
    line(&w, "--drop-last", "%s", onoff(c->drop_last));
    line(&w, "--warmup-steps", "%ld", c->warmup_steps);
    line(&w, "--log-every", "%ld", c->log_every);
    line(&w, "--allow-nonfinite", "%s", onoff(c->allow_nonfinite));
    line(&w, "--sampler-replicas", "%d", c->sampler_replicas);
    char shards[512] = "none";
    for (int i = 0, n = 0; i < c->nrank_samples && n < (int)sizeof shards; i++)
        n += snprintf(shards + n, sizeof shards - (size_t)n, "%s%ld", i ? "," : "",
                      c->rank_samples[i]);
    line(&w, "--rank-samples", "%s", shards);
    line(&w, "--join", "%s", onoff(c->join));
    line(&w, "--comm", "%s", comm_name(c->comm));
    if (c->bucket_auto)
        line(&w, "--bucket-mb", "auto");
    else
        line(&w, "--bucket-mb", "%.9g", c->bucket_mb);
    line(&w, "--first-bucket-mb", "%.9g", c->first_bucket_mb);
    line(&w, "--overlap", "%s", onoff(c->overlap));
    line(&w, "--timeout", "%.9g", c->timeout_s);
    line(&w, "--min-bytes", "%ld", c->min_bytes);
    line(&w, "--max-bytes", "%ld", c->max_bytes);
    line(&w, "--step-factor", "%.9g", c->step_factor);
    line(&w, "--iters", "%ld", c->iters);
    line(&w, "--warmup-iters", "%ld", c->warmup_iters);
    line(&w, "--coll", "%u", c->colls);
    line(&w, "--repeat", "%d", c->repeat);
    line(&w, "--predict", "%s", onoff(c->predict));
    line(&w, "--trace", "%s", onoff(c->trace_path[0] != 0));
    line(&w, "--checkpoint", "%s", onoff(c->checkpoint_path[0] != 0));
    line(&w, "--checkpoint-every", "%ld", c->checkpoint_every);
    if (c->resume_path[0])
        line(&w, "--resume", "a file of hash %016llx", file_hash(c->resume_path));
    else
        line(&w, "--resume", "none");
    if (data) {
        hash64_t h;
        hash64_init(&h);
        hash64_update(&h, data->x, data->n * (size_t)data->in_dim * sizeof(float));
        hash64_update(&h, data->y, data->n * (size_t)data->tgt_cols * sizeof(float));
        line(&w, "data", "%zu rows of %d features and %d targets, hash %016llx", data->n,
             data->in_dim, data->tgt_cols, (unsigned long long)hash64_final(&h));
    } else {
        line(&w, "data", "none loaded");
    }
    line(&w, "binary", "hash %016llx", file_hash("/proc/self/exe"));
}

/* Line i of text as key and value; false past the end. */
static bool nth_line(const char *text, int i, char *key, size_t klen, char *val, size_t len)
{
    const char *p = text;
    for (; i > 0 && *p; i--) {
        const char *nl = strchr(p, '\n');
        if (!nl)
            return false;
        p = nl + 1;
    }
    if (!*p)
        return false;
    const char *nl = strchr(p, '\n'), *sp = strchr(p, ' ');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    size_t k = sp && sp < p + n ? (size_t)(sp - p) : n;
    snprintf(key, klen, "%.*s", (int)k, p);
    snprintf(val, len, "%.*s", k < n ? (int)(n - k - 1) : 0, k < n ? p + k + 1 : "");
    return true;
}

bool fingerprint_diff(const fingerprint_t *mine, const fingerprint_t *theirs, char *key,
                      char *mine_val, char *their_val, size_t len)
{
    char k1[64], k2[64];
    for (int i = 0;; i++) {
        bool a = nth_line(mine->text, i, k1, sizeof k1, mine_val, len);
        bool b = nth_line(theirs->text, i, k2, sizeof k2, their_val, len);
        if (!a && !b)
            return false;
        if (!a || !b || strcmp(k1, k2) != 0) { /* another layout: another build */
            snprintf(key, len, "%s", "binary");
            snprintf(mine_val, len, "%s", "one build");
            snprintf(their_val, len, "%s", "another");
            return true;
        }
        if (strcmp(mine_val, their_val) != 0) {
            snprintf(key, len, "%s", k1);
            return true;
        }
    }
}
