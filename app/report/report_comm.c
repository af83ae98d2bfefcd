/* app/report/report_comm.c: --mode comm's output as nccl-tests prints it, and
 * the same as one --json object. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "app/report/report.h"

static const char *factor_text(const collperf_coll_t *c)
{
    if (strcmp(c->name, "all-reduce") == 0)
        return "busbw = algbw x 2(n-1)/n";
    if (strcmp(c->name, "all-gather") == 0 || strcmp(c->name, "reduce-scatter") == 0)
        return "busbw = algbw x (n-1)/n";
    return "busbw = algbw";
}

void report_comm(FILE *f, const collperf_t *r)
{
    char devs[256] = "";
    size_t used = 0;
    for (int i = 0; i < r->world && used < sizeof devs; i++)
        used += (size_t)snprintf(devs + used, sizeof devs - used, "%s%d", i ? "," : "",
                                 r->devices[i]);
    fprintf(f, "# ddpbench --mode comm: %s on %s, %d rank%s (devices %s), float32 sum, %ld "
               "iterations after %ld warm-up\n",
            comm_name(r->comm), backend_kind_name(r->backend), r->world, r->world == 1 ? "" : "s",
            devs, r->iters, r->warmup_iters);
    for (int i = 0; i < r->ncoll; i++) {
        const collperf_coll_t *c = &r->coll[i];
        fprintf(f, "#\n# %s (%s)\n", c->name, factor_text(c));
        fprintf(f, "#%37s  %27s%11s  %27s%11s\n", "", "out-of-place", "", "in-place", "");
        fprintf(f, "# %10s %10s %7s %6s", "size", "count", "type", "redop");
        for (int place = 0; place < 2; place++)
            fprintf(f, "  %10s %8s %8s %7s", "time", "algbw", "busbw", "#wrong");
        fprintf(f, "\n# %10s %10s %7s %6s", "(B)", "(elements)", "", "");
        for (int place = 0; place < 2; place++)
            fprintf(f, "  %10s %8s %8s %7s", "(us)", "(GB/s)", "(GB/s)", "");
        fputc('\n', f);
        for (int j = 0; j < c->npoints; j++) {
            const collperf_point_t *p = &c->pt[j];
            fprintf(f, "  %10ld %10ld %7s %6s", p->bytes, p->count, "float",
                    strcmp(c->name, "all-gather") == 0 || strcmp(c->name, "broadcast") == 0
                        ? "none"
                        : "sum");
            for (int place = 0; place < 2; place++)
                fprintf(f, "  %10.2f %8.2f %8.2f %7ld", 1e6 * p->time_s[place],
                        1e-9 * collperf_algbw(p, place), 1e-9 * collperf_busbw(c, p, place),
                        p->wrong[place]);
            fputc('\n', f);
        }
        double alpha, beta;
        if (collperf_fit(c, &alpha, &beta))
            fprintf(f, "# fit: time = %.2f us + bytes / %.2f GB/s (latency and bandwidth for "
                       "--predict)\n",
                    1e6 * alpha, beta > 0 ? 1e-9 / beta : INFINITY);
    }
    fprintf(f, "# Out of bounds values : %ld %s\n", r->wrong_total,
            r->wrong_total ? "FAILED" : "OK");
    fprintf(f, "# Avg bus bandwidth    : %.3f GB/s\n", 1e-9 * collperf_avg_busbw(r));
}

static cJSON *place_json(const collperf_coll_t *c, const collperf_point_t *p, int place)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "time_s", p->time_s[place]);
    cJSON_AddNumberToObject(o, "algbw_gbs", 1e-9 * collperf_algbw(p, place));
    cJSON_AddNumberToObject(o, "busbw_gbs", 1e-9 * collperf_busbw(c, p, place));
    cJSON_AddNumberToObject(o, "wrong", (double)p->wrong[place]);
    return o;
}

cJSON *report_json_comm(const report_ctx_t *ctx, const collperf_t *r)
{
    const config_t *cfg = ctx->cfg;
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "schema_version", REPORT_SCHEMA_VERSION);
    cJSON_AddStringToObject(o, "tool", "ddpbench");
    cJSON *c = cJSON_AddObjectToObject(o, "config");
    cJSON_AddStringToObject(c, "mode", "comm");
    cJSON_AddStringToObject(c, "backend", backend_kind_name(r->backend));
    cJSON_AddStringToObject(c, "comm", comm_name(r->comm));
    cJSON_AddStringToObject(c, "launcher", launcher_name(cfg->launcher == LAUNCHER_MPI
                                                             ? LAUNCHER_MPI
                                                             : LAUNCHER_FORK));
    cJSON *devs = cJSON_AddArrayToObject(c, "devices");
    for (int i = 0; i < r->world; i++)
        cJSON_AddItemToArray(devs, cJSON_CreateNumber(r->devices[i]));
    cJSON_AddNumberToObject(c, "ndevices", r->world);
    cJSON_AddNumberToObject(c, "min_bytes", (double)cfg->min_bytes);
    cJSON_AddNumberToObject(c, "max_bytes", (double)cfg->max_bytes);
    cJSON_AddNumberToObject(c, "step_factor", cfg->step_factor);
    cJSON_AddNumberToObject(c, "iters", (double)r->iters);
    cJSON_AddNumberToObject(c, "warmup_iters", (double)r->warmup_iters);
    cJSON_AddStringToObject(c, "dtype", "float32");
    cJSON_AddStringToObject(c, "redop", "sum");
    /* the devices, for the environment: 79 KB, not on the stack (docs/faults.md) */
    run_result_t *shape = malloc(sizeof *shape);
    if (!shape) {
        cJSON_Delete(o);
        return NULL;
    }
    result_init(shape);
    shape->backend = r->backend;
    shape->ndev = r->world;
    for (int i = 0; i < r->world; i++)
        shape->dev[i].device_id = r->devices[i];
    cJSON_AddItemToObject(o, "environment", report_json_env(ctx, shape));
    free(shape);
    cJSON *arr = cJSON_AddArrayToObject(o, "collectives");
    for (int i = 0; i < r->ncoll; i++) {
        const collperf_coll_t *cc = &r->coll[i];
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "name", cc->name);
        cJSON_AddNumberToObject(k, "bus_factor", cc->bus_factor);
        cJSON *pts = cJSON_AddArrayToObject(k, "points");
        for (int j = 0; j < cc->npoints; j++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "bytes", (double)cc->pt[j].bytes);
            cJSON_AddNumberToObject(p, "count", (double)cc->pt[j].count);
            cJSON_AddItemToObject(p, "out_of_place", place_json(cc, &cc->pt[j], 0));
            cJSON_AddItemToObject(p, "in_place", place_json(cc, &cc->pt[j], 1));
            cJSON_AddItemToArray(pts, p);
        }
        double alpha, beta;
        if (collperf_fit(cc, &alpha, &beta)) {
            cJSON *fit = cJSON_AddObjectToObject(k, "fit");
            cJSON_AddNumberToObject(fit, "alpha_s", alpha);
            cJSON_AddNumberToObject(fit, "beta_s_per_byte", beta);
        } else {
            cJSON_AddNullToObject(k, "fit");
        }
        cJSON_AddItemToArray(arr, k);
    }
    cJSON_AddNumberToObject(o, "avg_busbw_gbs", 1e-9 * collperf_avg_busbw(r));
    cJSON_AddNumberToObject(o, "wrong_total", (double)r->wrong_total);
    return o;
}
