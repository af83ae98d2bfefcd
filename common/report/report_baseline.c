/* common/report/report_baseline.c: --baseline FILE --tolerance PCT, the regression
 * gate.  FILE is an earlier --json result (one object, or compare's JSON
 * Lines) and is treated as hostile: its size is bounded before it is read,
 * it must parse, and every key used must be there with the right type.  A
 * baseline of another configuration is refused, naming the field, rather
 * than compared. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/infile.h"
#include "report/report.h"

/* What must match for two runs to be comparable (paths under "config"). */
static const char *const canon[] = {"mode",  "backend", "ndevices", "layers",
                                    "batch", "accum",   "loss",     "optimizer.name"};
#define NCANON ((int)(sizeof canon / sizeof canon[0]))

/* Item at a dot-separated path under o (NULL when absent). */
static const cJSON *at(const cJSON *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
        cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, k) : NULL;
    return cur;
}

// ---------------------------------------------------------------------------
// reading the file

static int read_bounded(const char *path, char **out, size_t *len, char *err)
{
    int fd;
    uint64_t fsize;
    int rc = infile_open(path, &fd, &fsize, err); /* never blocks on a FIFO */
    if (rc != DDP_OK)
        return err_prefix(err, rc, "--baseline %s", path);
    if (fsize > (uint64_t)BASELINE_MAX_BYTES) {
        close(fd);
        return err_set(err, DDP_ERR_INPUT,
                       "--baseline %s: %llu bytes, more than a --json result can be (%ld)", path,
                       (unsigned long long)fsize, BASELINE_MAX_BYTES);
    }
    /* read at most the bound plus one byte: a file that grew since fstat is caught */
    char *buf = malloc((size_t)BASELINE_MAX_BYTES + 2);
    if (!buf) {
        close(fd);
        return err_set(err, DDP_ERR_RUNTIME, "--baseline %s: out of memory", path);
    }
    size_t n = 0;
    while (n <= (size_t)BASELINE_MAX_BYTES) {
        ssize_t k = read(fd, buf + n, (size_t)BASELINE_MAX_BYTES + 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return err_set(err, DDP_ERR_INPUT, "--baseline %s: read failed: %s", path, strerror(e));
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    if (n > (size_t)BASELINE_MAX_BYTES) {
        free(buf);
        return err_set(err, DDP_ERR_INPUT, "--baseline %s: larger than %ld bytes", path,
                       BASELINE_MAX_BYTES);
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return DDP_OK;
}

/* Every key this gate reads, with its type. */
static int check_run(const char *path, int idx, const cJSON *o, char *err)
{
    const cJSON *v = at(o, "schema_version");
    if (!cJSON_IsNumber(v))
        return err_set(err, DDP_ERR_INPUT,
                       "--baseline %s: object %d has no schema_version: not a ddpbench --json "
                       "result",
                       path, idx + 1);
    if (v->valuedouble > REPORT_SCHEMA_VERSION || v->valuedouble < 1)
        return err_set(err, DDP_ERR_INPUT,
                       "--baseline %s: schema_version %g; this ddpbench reads version %d", path,
                       v->valuedouble, REPORT_SCHEMA_VERSION);
    static const struct {
        const char *path;
        int type; /* cJSON_String, cJSON_Number, cJSON_Array */
    } need[] = {{"config.mode", cJSON_String},   {"config.backend", cJSON_String},
                {"config.ndevices", cJSON_Number}, {"config.layers", cJSON_Array},
                {"config.batch", cJSON_Number},  {"config.accum", cJSON_Number},
                {"config.loss", cJSON_String},   {"config.optimizer.name", cJSON_String},
                {"throughput_samples_per_s", cJSON_Number}};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        const cJSON *it = at(o, need[i].path);
        if (!it || (it->type & 0xff) != need[i].type)
            return err_set(err, DDP_ERR_INPUT, "--baseline %s: object %d: %s %s", path, idx + 1,
                           need[i].path, it ? "has the wrong type" : "is missing");
    }
    double tp = at(o, "throughput_samples_per_s")->valuedouble;
    if (!isfinite(tp) || tp <= 0.0)
        return err_set(err, DDP_ERR_INPUT,
                       "--baseline %s: object %d: throughput_samples_per_s %g is not a positive "
                       "number",
                       path, idx + 1, tp);
    return DDP_OK;
}

int baseline_load(baseline_t *b, const char *path, char *err)
{
    memset(b, 0, sizeof *b);
    snprintf(b->path, sizeof b->path, "%s", path);
    char *buf = NULL;
    size_t len = 0;
    int rc = read_bounded(path, &buf, &len, err);
    if (rc != DDP_OK)
        return rc;
    const char *p = buf, *end = buf + len;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
            p++;
        if (p >= end)
            break;
        if (b->nrun == BASELINE_MAX_RUNS) {
            rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: more than %d results in one file",
                         path, BASELINE_MAX_RUNS);
            break;
        }
        const char *stop = NULL;
        cJSON *o = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &stop, false);
        if (!o) {
            long at_byte = stop && stop >= buf && stop <= end ? (long)(stop - buf) : (long)(p - buf);
            rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: not valid JSON (near byte %ld)", path,
                         at_byte);
            break;
        }
        b->run[b->nrun++] = o;
        if (!cJSON_IsObject(o)) {
            rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: expected a JSON object, found %s",
                         path, cJSON_IsArray(o) ? "an array" : "a bare value");
            break;
        }
        if ((rc = check_run(path, b->nrun - 1, o, err)) != DDP_OK)
            break;
        p = stop;
    }
    free(buf);
    if (rc == DDP_OK && b->nrun == 0)
        rc = err_set(err, DDP_ERR_INPUT, "--baseline %s: empty file", path);
    if (rc != DDP_OK)
        baseline_free(b);
    return rc;
}

void baseline_free(baseline_t *b)
{
    for (int i = 0; i < b->nrun; i++)
        cJSON_Delete(b->run[i]);
    b->nrun = 0;
}

// ---------------------------------------------------------------------------
// matching and the verdict

static void short_json(char *out, size_t n, const cJSON *v)
{
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(out, n, "%s", t ? t : "missing");
    if (t && strlen(t) >= n && n > 4)
        memcpy(out + n - 4, "...", 4);
    cJSON_free(t);
}

int baseline_match(const baseline_t *b, const cJSON *run_config, const cJSON **match, char *err)
{
    *match = NULL;
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(run_config, "mode");
    const char *m = cJSON_GetStringValue(mode);
    if (!m)
        return err_set(err, DDP_ERR_RUNTIME, "--baseline: internal: run config without a mode");
    int found = 0;
    char modes[256] = "";
    size_t used = 0;
    for (int i = 0; i < b->nrun; i++) {
        const char *bm = cJSON_GetStringValue(at(b->run[i], "config.mode"));
        if (used < sizeof modes)
            used += (size_t)snprintf(modes + used, sizeof modes - used, "%s%s", i ? ", " : "",
                                     bm ? bm : "?");
        if (bm && strcmp(bm, m) == 0) {
            found++;
            *match = b->run[i];
        }
    }
    if (found == 0)
        return err_set(err, DDP_ERR_INPUT, "--baseline %s: holds no %s run (it holds: %s)",
                       b->path, m, modes);
    if (found > 1) {
        *match = NULL;
        return err_set(err, DDP_ERR_INPUT, "--baseline %s: holds %d %s runs; keep one", b->path,
                       found, m);
    }
    const cJSON *base_cfg = cJSON_GetObjectItemCaseSensitive(*match, "config");
    for (int i = 0; i < NCANON; i++) {
        const cJSON *x = at(base_cfg, canon[i]), *y = at(run_config, canon[i]);
        if (!x || !y || !cJSON_Compare(x, y, true)) {
            char there[96], here[96];
            short_json(there, sizeof there, x);
            short_json(here, sizeof here, y);
            *match = NULL;
            return err_set(err, DDP_ERR_INPUT,
                           "--baseline %s: another configuration: %s is %s there, %s here",
                           b->path, canon[i], there, here);
        }
    }
    return DDP_OK;
}

int baseline_verdict(const cJSON *match, const char *label, double samples_per_s,
                     double tolerance_pct, char *line, size_t len)
{
    double base = cJSON_GetObjectItemCaseSensitive(match, "throughput_samples_per_s")->valuedouble;
    double pct = 100.0 * (samples_per_s - base) / base;
    char pre[64] = "";
    if (label && label[0])
        snprintf(pre, sizeof pre, "%s: ", label);
    if (-pct > tolerance_pct) {
        snprintf(line, len, "regression: %s%.1f samples/s is %.1f%% below the baseline %.1f "
                            "(tolerance %g%%)",
                 pre, samples_per_s, -pct, base, tolerance_pct);
        return DDP_ERR_REGRESSED;
    }
    snprintf(line, len, "within tolerance: %s%.1f samples/s is %.1f%% %s the baseline %.1f "
                        "(tolerance %g%%)",
             pre, samples_per_s, fabs(pct), pct < 0 ? "below" : "above", base, tolerance_pct);
    return DDP_OK;
}
