/* common/report/report.c: formatting helpers, the banner, and the figures every
 * report derives from a run (see report.h). */
#include "report/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"

// ---------------------------------------------------------------------------
// formatting

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
    else if (b >= 1024.0)
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, n, "%.0f B", b);
    return buf;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double report_percentile(const double *v, long n, double p)
{
    if (n <= 0 || !v)
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

void report_layers(char *buf, size_t n, const model_spec_t *s)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i <= s->nlayers && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? "-" : "", s->dims[i]);
}

const char *report_phase_label(mode_t_ mode, phase_t p)
{
    if (mode == MODE_DP && p == PH_LOSS)
        return "gather+loss";
    if (mode == MODE_DP && p == PH_COMM_EXPOSED)
        return "reduce";
    return phase_name(p);
}

// ---------------------------------------------------------------------------
// derived figures

/* |a - b| / |b| over the whole vectors, in double. */
static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (isnan(num))
        return INFINITY;
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

void report_stats(const run_result_t *r, const run_result_t *ref, report_stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->timed_steps = r->times.n;
    if (r->times.n > 0) {
        /* mean, min and max are exact; p50 and p95 come from the sample
         * (every step up to STEP_SAMPLE_MAX, see measure/result.h) */
        long kept = step_times_kept(&r->times);
        s->step_mean = r->times.timed_s / (double)r->times.n;
        s->step_p50 = report_percentile(r->times.sample, kept, 50);
        s->step_p95 = report_percentile(r->times.sample, kept, 95);
        s->step_min = r->times.min_s;
        s->step_max = r->times.max_s;
    }
    double steps = r->times.n > 0 ? (double)r->times.n : 1.0;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
        for (int p = 0; p < PH_COUNT; p++)
            s->phase[d][p] = r->dev[d].phase_s[p] / steps;
        s->rows_per_step[d] = (double)r->dev[d].rows / steps;
        if (r->dev[d].mem_peak > s->mem_peak_max)
            s->mem_peak_max = r->dev[d].mem_peak;
    }
    if (!ref || ref == r)
        return;
    s->has_ref = ref->samples_per_s > 0.0;
    if (s->has_ref) {
        s->speedup = r->samples_per_s / ref->samples_per_s;
        s->efficiency = s->speedup / (double)(r->ndev > 0 ? r->ndev : 1);
    }
    if (r->params && ref->params && r->nparams == ref->nparams && r->nparams > 0) {
        s->params_compared = true;
        s->max_rel = max_rel_diff(r->params, ref->params, r->nparams, REPORT_REL_FLOOR);
        s->rel_l2 = rel_l2(r->params, ref->params, r->nparams);
        s->agree = s->rel_l2 <= REPORT_AGREE_L2 && s->max_rel <= REPORT_AGREE_MAX;
    }
}

// ---------------------------------------------------------------------------
// the banner

void report_banner(FILE *f, const report_ctx_t *ctx)
{
    const config_t *c = ctx->cfg;
    const model_spec_t *spec = ctx->spec;
    const dataset_t *d = ctx->data;
    char layers[256], devs[256];
    report_layers(layers, sizeof layers, spec);
    size_t used = 0;
    devs[0] = 0;
    for (int i = 0; i < c->ngpus && used < sizeof devs; i++)
        used += (size_t)snprintf(devs + used, sizeof devs - used, "%s%d", i ? "," : "", c->gpus[i]);
    fprintf(f, "ddpbench %s: mode %s, backend %s%s%s, devices %s\n", DDPBENCH_VERSION,
            mode_name(c->mode), backend_kind_name(c->backend), ctx->backend_note ? " " : "",
            ctx->backend_note ? ctx->backend_note : "", devs);
    fprintf(f, "  model %s: %s, %s, %zu parameters, loss %s, optimizer %s (lr %g)\n",
            c->model_name[0] ? c->model_name : "custom", layers, act_name(c->act),
            spec->nparams, loss_name(c->loss), optim_name(c->optim.kind), c->optim.lr);
    char source[2 * sizeof d->source];
    text_escape(d->source, source, sizeof source); /* a file name is shown, never obeyed */
    fprintf(f, "  data %s%s: %zu samples x %d features, batch %d%s, seed %llu\n", source,
            d->header_lines ? " (its first line is a header, skipped)" : "", d->n, d->in_dim,
            c->batch, c->accum > 1 ? " (accumulated)" : "", (unsigned long long)c->seed);
}
