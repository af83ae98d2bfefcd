/* common/report.c: the banner and the per-run result table (see report.h). */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *report_fmt_time(char *buf, size_t n, double s)
{
    if (s >= 1.0)
        snprintf(buf, n, "%.3f s", s);
    else if (s >= 1e-3)
        snprintf(buf, n, "%.3f ms", s * 1e3);
    else
        snprintf(buf, n, "%.1f us", s * 1e6);
    return buf;
}

const char *report_fmt_bytes(char *buf, size_t n, double b)
{
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    return buf;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double report_percentile(const double *v, long n, double p)
{
    if (n <= 0)
        return 0.0;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return 0.0;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    /* linear interpolation between closest ranks, like numpy's default */
    double pos = p / 100.0 * (double)(n - 1);
    long lo = (long)floor(pos);
    long hi = lo + 1 < n ? lo + 1 : lo;
    double out = c[lo] + (c[hi] - c[lo]) * (pos - (double)lo);
    free(c);
    return out;
}

static void format_layers(char *buf, size_t n, const model_spec_t *s)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i <= s->nlayers && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? "-" : "", s->dims[i]);
}

void report_banner(FILE *f, const config_t *c, const model_spec_t *spec, const dataset_t *d,
                   const char *backend_note)
{
    char layers[256], devs[256];
    format_layers(layers, sizeof layers, spec);
    size_t used = 0;
    devs[0] = 0;
    for (int i = 0; i < c->ngpus && used < sizeof devs; i++)
        used += (size_t)snprintf(devs + used, sizeof devs - used, "%s%d", i ? "," : "", c->gpus[i]);
    fprintf(f, "ddpbench %s: mode %s, backend %s%s%s, devices %s\n", DDPBENCH_VERSION,
            mode_name(c->mode), backend_kind_name(c->backend), backend_note ? " " : "",
            backend_note ? backend_note : "", devs);
    fprintf(f, "  model %s%s%s: %s, %s, %zu parameters, loss %s, optimizer %s (lr %g)\n",
            c->model_name[0] ? c->model_name : "custom", "", "", layers, act_name(c->act),
            spec->nparams, loss_name(c->loss), optim_name(c->optim.kind), c->optim.lr);
    fprintf(f, "  data %s: %zu samples x %d features, batch %d%s, seed %llu\n", d->source, d->n,
            d->in_dim, c->batch, c->accum > 1 ? " (accumulated)" : "",
            (unsigned long long)c->seed);
}

void report_result(FILE *f, const config_t *c, const model_spec_t *spec, const run_result_t *r)
{
    (void)spec;
    char a[32], b[32], d[32];
    fprintf(f, "result: %s on %s, %d device%s\n", mode_name(r->mode), backend_kind_name(r->backend),
            r->ndev, r->ndev == 1 ? "" : "s");
    fprintf(f, "  throughput     %12.1f samples/s  (%ld timed steps after %ld warm-up)\n",
            r->samples_per_s, r->nstep_s, r->warmup_steps);
    if (r->nstep_s > 0)
        fprintf(f, "  step time      mean %s  p50 %s  p95 %s\n",
                report_fmt_time(a, sizeof a, r->timed_s / (double)r->nstep_s),
                report_fmt_time(b, sizeof b, report_percentile(r->step_s, r->nstep_s, 50)),
                report_fmt_time(d, sizeof d, report_percentile(r->step_s, r->nstep_s, 95)));
    for (int i = 0; i < r->ndev && r->nstep_s > 0; i++) {
        fprintf(f, "  device %-3d     per step:", r->dev[i].device_id);
        for (int p = 0; p < PH_COUNT; p++)
            if (r->dev[i].phase_s[p] > 0.0)
                fprintf(f, "  %s %s", phase_name((phase_t)p),
                        report_fmt_time(a, sizeof a, r->dev[i].phase_s[p] / (double)r->nstep_s));
        fprintf(f, "  | peak mem %s\n", report_fmt_bytes(b, sizeof b, (double)r->dev[i].mem_peak));
    }
    fprintf(f, "  final loss     %.6f\n", r->final_loss);
    if (r->train_accuracy >= 0.0)
        fprintf(f, "  train accuracy %.2f %%  (mean loss over the data %.6f)\n",
                100.0 * r->train_accuracy, r->train_loss);
    fprintf(f, "  checksum       sum %+.6e  |sum| %.6e  bits %016llx\n", r->checksum.sum,
            r->checksum.abs_sum, (unsigned long long)r->checksum.bits);
    (void)c;
}
