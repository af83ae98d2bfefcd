/* ddp/fingerprint.c: what every rank must share as "KEY VALUE" lines, their comparison, and
 * a forked group's check over its communicator (fingerprint.h). */
#include "ddp/fingerprint.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/hash.h"
#include "common/config/fields.h"

typedef struct {
    fingerprint_t *fp;
    size_t used;
} writer_t;

__attribute__((format(printf, 3, 4))) static void line(writer_t *w, const char *key,
                                                       const char *fmt, ...)
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

/* A file's bytes, hashed (0 when it cannot be read: the caller's own checks say why). */
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
    fp->text[0] = 0;
    /* every option a rank must share, in the table's order (fields.h) */
    for (int i = 0; i < config_fields(); i++) {
        const config_derive_t *d = config_field_derive(i);
        if (d->fp == FP_NONE || d->fpv == FPV_DERIVED || d->fpv == FPV_RANK0)
            continue;
        char key[48], val[512];
        snprintf(key, sizeof key, "--%s", config_field_name(i));
        config_value_t v;
        config_field_value(c, i, &v);
        if (d->fpv == FPV_GIVEN)
            snprintf(val, sizeof val, "%s", v.s && v.s[0] ? "on" : "off");
        else if (d->fpv == FPV_FILE && v.s && v.s[0])
            snprintf(val, sizeof val, "a file of hash %016llx", file_hash(v.s));
        else if (d->fpv == FPV_FILE)
            snprintf(val, sizeof val, "none");
        else
            config_value_text(&v, "on", "off", val, sizeof val);
        line(&w, key, "%s", val);
    }
    /* and what joins several: the data as loaded, the world, the build */
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
    line(&w, "world", "%d ranks", c->ngpus);
    line(&w, "version", "%s", DDPBENCH_VERSION);
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

// ---------------------------------------------------------------------------
// groups and the verdict

/* Each group's words; an option's group is its row's (fields.h), the others' named here. */
static const char *const group_label[FP_NGROUPS] = {
    [FP_NONE] = "other settings (every rank must be started with the same options)",
    [FP_OTHER] = "other settings (every rank must be started with the same options)",
    [FP_MODEL] = "another model (--layers, --act)",
    [FP_LOSS] = "another loss (--loss)",
    [FP_OPTIM] = "another optimizer or hyper-parameters (--optim, --lr, --momentum, "
                 "--weight-decay, ...)",
    [FP_BATCH] = "another batch (--batch, --batch-per-device, --accum)",
    /* the loss all-reduces (--log-every) and checkpoint barriers are
     * collectives too: on other steps they would pair with another op */
    [FP_SCHEDULE] = "another length or schedule (--epochs, --steps, --warmup-steps, "
                    "--log-every, --checkpoint-every, --resume)",
    [FP_ORDER] = "another sample order (--seed, --shuffle, --drop-last, --sampler-replicas, "
                 "--rank-samples, --join)",
    [FP_DATA] = "other data (--data, --targets, --samples, --dataset, --noise, or the files' "
                "contents)",
    [FP_DDP] = "other DDP options (--bucket-mb, --first-bucket-mb, --overlap, --zero, --comm, "
               "--cuda-graph)",
    [FP_WORLD] = "another world (the number of ranks)",
    [FP_BUILD] = "another ddpbench build (every rank must run the same one)",
};

const char *fingerprint_group(const char *key)
{
    cf_fp_group_t g = FP_OTHER;
    int row = strncmp(key, "--", 2) == 0 ? config_field_find(key + 2) : -1;
    if (row >= 0)
        g = config_field_derive(row)->fp;
    else if (strcmp(key, "data") == 0)
        g = FP_DATA;
    else if (strcmp(key, "world") == 0)
        g = FP_WORLD;
    else if (strcmp(key, "version") == 0 || strcmp(key, "binary") == 0)
        g = FP_BUILD;
    return group_label[g];
}

int fingerprint_judge(const fingerprint_t *fps, int world, const char *const *who, char *err)
{
    for (int r = 1; r < world; r++) {
        char key[64], v0[200], vr[200];
        if (!fingerprint_diff(&fps[0], &fps[r], key, v0, vr, sizeof v0))
            continue;
        /* an option's value is shown as typed ("--lr 0.003"), the others as said */
        bool opt = key[0] == '-';
        return err_set(err, DDP_ERR_INPUT,
                       "not the same job on every rank: %s was started with %s than %s: %s%s%s "
                       "there, %s%s%s on rank 0",
                       who[r],
                       fingerprint_group(key), who[0], opt ? key : "", opt ? " " : "", vr,
                       opt ? key : "", opt ? " " : "", v0);
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// a forked group's check

/* What travels is small (it must not set a tiny model's peak memory): a 48-bit hash of each
 * line, then, only when a rank differs, that line.  Each float holds 24 bits, which any
 * collective moves unchanged. */
#define FP_LINES 96
#define FP_HASH_WORDS (1 + 2 * FP_LINES) /* the line count, then two words a line */
#define FP_LINE_LEN 255
#define FP_LINE_WORDS ((FP_LINE_LEN + 1 + 2) / 3)

static void pack(float *w, size_t nw, const char *bytes, size_t n)
{
    const unsigned char *t = (const unsigned char *)bytes;
    for (size_t i = 0; i < nw; i++) {
        unsigned v = 0;
        for (size_t b = 0; b < 3 && 3 * i + b < n; b++)
            v |= (unsigned)t[3 * i + b] << (8 * b);
        w[i] = (float)v;
    }
}

static void unpack(char *bytes, size_t n, const float *w, size_t nw)
{
    for (size_t i = 0; i < nw; i++) {
        unsigned v = (unsigned)w[i];
        for (size_t b = 0; b < 3 && 3 * i + b < n; b++)
            bytes[3 * i + b] = (char)(v >> (8 * b));
    }
    bytes[n - 1] = 0;
}

/* All-gather nw words from every rank (in place in buf, world * nw floats) into host. */
static int gather(comm_t *comm, backend_t *be, float *buf, float *host, const float *mine,
                  size_t nw, char *err)
{
    int world = comm_world(comm), rank = comm_rank(comm);
    TRY(backend_check(be, backend_h2d(be, buf + (size_t)rank * nw, mine, nw * sizeof(float)),
                      NULL, err));
    TRY(comm_check(comm, comm_all_gather(comm, NULL, buf, nw), "the configuration check", err));
    /* Why wait: the comparison is the host's, once, before training. */
    return backend_check(be, backend_d2h(be, host, buf, (size_t)world * nw * sizeof(float)), NULL,
                         err);
}

/* Line i of fp's text ("" past the end) into out (FP_LINE_LEN + 1 bytes). */
static void line_of(const fingerprint_t *fp, int i, char *out)
{
    const char *p = fp->text;
    for (; i > 0 && p; i--)
        if ((p = strchr(p, '\n')))
            p++;
    size_t n = p ? strcspn(p, "\n") : 0;
    snprintf(out, FP_LINE_LEN + 1, "%.*s", (int)n, p ? p : "");
}

int ddp_fingerprint_check(comm_t *comm, backend_t *be, const fingerprint_t *mine,
                          const int *devices, char *err)
{
    int world = comm_world(comm);
    size_t most = FP_HASH_WORDS > FP_LINE_WORDS ? FP_HASH_WORDS : FP_LINE_WORDS;
    float words[FP_HASH_WORDS] = {0};
    float *host = malloc((size_t)world * most * sizeof(float));
    float *buf = backend_alloc_for(be, (size_t)world * most * sizeof(float), MEM_COMM);
    int rc = host && buf ? DDP_OK
                         : err_set(err, DDP_ERR_RUNTIME, "out of memory for the configuration check");
    /* 1. every line's hash: which rank and which line differ first */
    int nlines = 0;
    for (int i = 0; i < FP_LINES; i++) {
        char l[FP_LINE_LEN + 1];
        line_of(mine, i, l);
        if (!l[0])
            break;
        hash64_t h;
        hash64_init(&h);
        hash64_update(&h, l, strlen(l));
        uint64_t v = hash64_final(&h);
        words[1 + 2 * i] = (float)(v & 0xffffff);
        words[2 + 2 * i] = (float)((v >> 24) & 0xffffff);
        nlines++;
    }
    words[0] = (float)nlines;
    if (rc == DDP_OK)
        rc = gather(comm, be, buf, host, words, FP_HASH_WORDS, err);
    int q = -1, at = -1;
    for (int r = 1; rc == DDP_OK && r < world && q < 0; r++) {
        const float *a = host, *b = host + (size_t)r * FP_HASH_WORDS;
        /* line by line (a line past one's end hashes as zeros there, so
         * fewer lines show as the first line that one lacks), then the count */
        for (int i = 1; i < FP_HASH_WORDS && q < 0; i++)
            if (a[i] != b[i]) {
                q = r;
                at = (i - 1) / 2;
            }
        if (q < 0 && a[0] != b[0]) {
            q = r;
            at = (int)(a[0] < b[0] ? a[0] : b[0]);
        }
    }
    /* 2. only on a difference: that line from every rank, so every rank
     * names the same one with both values */
    if (rc == DDP_OK && q > 0) {
        float lw[FP_LINE_WORDS];
        char l[FP_LINE_LEN + 1];
        line_of(mine, at, l);
        pack(lw, FP_LINE_WORDS, l, sizeof l);
        rc = gather(comm, be, buf, host, lw, FP_LINE_WORDS, err);
        static fingerprint_t two[2];
        for (int k = 0; rc == DDP_OK && k < 2; k++) {
            unpack(two[k].text, FP_LINE_LEN + 1, host + (size_t)(k ? q : 0) * FP_LINE_WORDS,
                   FP_LINE_WORDS);
            if (!two[k].text[0]) /* one has fewer lines: another build */
                snprintf(two[k].text, sizeof two[k].text, "binary %s", k ? "another" : "one");
        }
        char n0[32], nq[32];
        snprintf(n0, sizeof n0, "rank 0 (device %d)", devices[0]);
        snprintf(nq, sizeof nq, "rank %d (device %d)", q, devices[q]);
        const char *who[2] = {n0, nq};
        if (rc == DDP_OK && (rc = fingerprint_judge(two, 2, who, err)) == DDP_OK)
            rc = err_set(err, DDP_ERR_INPUT, "not the same job on every rank: %s differs from "
                         "rank 0", nq); /* a hash differed, the text did not: say so anyway */
    }
    backend_free(be, buf);
    free(host);
    return rc;
}
