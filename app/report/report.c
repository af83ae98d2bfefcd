/* app/report/report.c: formatting helpers, the banner, and the figures every
 * report derives from a run (see report.h). */
#include "app/report/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/procfile.h"
#include "common/base/text.h"

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

void report_layers(char *buf, size_t n, const model_spec_t *s)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i <= s->nlayers && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? "-" : "", s->dims[i]);
}

const char *report_phase_label(mode_t_ mode, phase_t p)
{
    const char *w = strategy_words(mode)->phase[p];
    return w ? w : phase_name(p);
}

void report_appendf(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    if (*used >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n > 0)
        *used += (size_t)n < len - *used ? (size_t)n : len - *used - 1;
}

bool report_phase_shown(const report_stats_t *s, int ndev, phase_t p, double unit)
{
    for (int d = 0; d < ndev && d < MAX_DEVICES; d++)
        if (p == PH_SKEW ? fabs(s->phase[d][p]) * unit >= 5e-4 : s->phase[d][p] > 0.0)
            return true;
    return false;
}

double report_phase_sum(const report_stats_t *s, int d)
{
    double sum = 0.0;
    for (int p = 0; p < PH_COUNT; p++)
        if (p != PH_COMM_HIDDEN)
            sum += s->phase[d][p];
    return sum;
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

/* Each device's FLOP/s over the timed wall time, and its share of its peak. */
static void stats_peak(const run_result_t *r, report_stats_t *s)
{
    double peaks = 0.0, t = r->times.timed_s;
    s->flops_all = t > 0.0 ? 0.0 : NAN;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
        const device_stats_t *v = &r->dev[d];
        s->flops[d] = t > 0.0 && v->flops > 0.0 ? (v->flops + v->flops_optim) / t : NAN;
        s->share[d] = s->flops[d] / v->peak_flops;
        if (!(s->share[d] <= REPORT_SHARE_MAX))
            s->share[d] = NAN;
        s->flops_all += s->flops[d];
        peaks += v->peak_flops > 0.0 ? v->peak_flops : NAN;
    }
    s->share_all = s->flops_all / peaks;
    if (!(s->share_all <= REPORT_SHARE_MAX))
        s->share_all = NAN;
}

void report_stats(const run_result_t *r, const run_result_t *ref, report_stats_t *s)
{
    memset(s, 0, sizeof *s);
    if (r->times.n > 0) {
        /* mean, min and max are exact; p50 and p95 come from the sample
         * (every step up to STEP_SAMPLE_MAX, see measure/result.h) */
        s->step_mean = r->times.timed_s / (double)r->times.n;
        s->step_p50 = step_times_quantile(&r->times, 50);
        s->step_p95 = step_times_quantile(&r->times, 95);
        s->step_p10 = step_times_quantile(&r->times, 10);
        s->step_p25 = step_times_quantile(&r->times, 25);
        s->step_min = r->times.min_s;
        s->step_max = r->times.max_s;
    }
    double steps = r->times.n > 0 ? (double)r->times.n : 1.0;
    s->host_syncs_max = NAN;
    s->launches_max_dev = -1;
    for (int k = 0; k < 4; k++)
        s->work_cpu_max[k] = NAN;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
        long ns = r->dev[d].synced_steps;
        s->launches[d] = ns > 0 ? 0.0 : NAN;
        for (int k = 0; k < LAUNCH_KINDS; k++) {
            s->launch_split[d][k] = ns > 0 ? (double)r->dev[d].launches[k] / (double)ns : NAN;
            if (ns > 0 && k != LAUNCH_EVENT)
                s->launches[d] += s->launch_split[d][k];
        }
        if (ns > 0 && (s->launches_max_dev < 0 || s->launches[d] > s->launches[s->launches_max_dev]))
            s->launches_max_dev = d;
        for (int p = 0; p < PH_COUNT; p++)
            s->phase[d][p] = r->dev[d].phase_s[p] / steps;
        s->rows_per_step[d] = (double)r->dev[d].rows / steps;
        if (r->dev[d].mem_peak > s->mem_peak_max)
            s->mem_peak_max = r->dev[d].mem_peak;
        long n = r->dev[d].synced_steps;
        s->host_syncs[d] = n > 0 ? (double)r->dev[d].host_syncs / (double)n : NAN;
        if (n > 0 && !(s->host_syncs[d] <= s->host_syncs_max))
            s->host_syncs_max = s->host_syncs[d];
        const device_stats_t *v = &r->dev[d];
        const double q[4] = {v->work_cpu_mean, v->work_cpu_p10, v->work_cpu_p25, v->work_cpu_p50};
        for (int k = 0; k < 4; k++) {
            s->work_cpu[d][k] = v->work_steps > 0 ? q[k] : NAN;
            if (v->work_steps > 0 && !(s->work_cpu[d][k] <= s->work_cpu_max[k]))
                s->work_cpu_max[k] = s->work_cpu[d][k];
        }
    }
    stats_peak(r, s);
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
        double reach = ref->lr * (double)(ref->steps > 0 ? ref->steps : 1), worst = 0.0;
        for (size_t i = 0; i < r->nparams; i++)
            worst = fmax(worst, fabs((double)r->params[i] - (double)ref->params[i]));
        s->max_step = reach > 0.0 ? worst / reach : worst > 0.0 ? INFINITY : 0.0;
        s->adam = ref->optim == OPTIM_ADAM || ref->optim == OPTIM_ADAMW;
        s->agree = s->rel_l2 <= REPORT_AGREE_L2 &&
                   (s->adam ? s->max_step <= REPORT_AGREE_STEP : s->max_rel <= REPORT_AGREE_MAX);
        if (ref->precision == PREC_BF16) {
            double n = (double)(ref->steps > REPORT_AGREE_BF16_STEPS ? ref->steps : REPORT_AGREE_BF16_STEPS);
            s->agree = s->rel_l2 <= REPORT_AGREE_L2_BF16 *
                                        pow(n / REPORT_AGREE_BF16_STEPS, REPORT_AGREE_BF16_GROWTH);
        }
    }
}

// ---------------------------------------------------------------------------
// warnings a careful engineer would give

/* Fewer timed steps than this make a figure the next run will not repeat. */
#define NOTE_MIN_TIMED 20
/* Step times this uneven (p95 over p50) make the throughput unreliable. */
#define NOTE_MAX_SPREAD 1.5

double report_machine_frac(const double (*ph)[PH_COUNT], int ndev, int d)
{
    double wait = 0.0, peer = 0.0;
    for (int p = 0; p < PH_COUNT; p++)
        wait += phase_waits((phase_t)p) ? ph[d][p] : 0.0;
    for (int e = 0; e < ndev && e < MAX_DEVICES; e++)
        peer = e != d ? fmax(peer, ph[e][PH_DESCHED]) : peer;
    return wait > 0.0 ? fmin(peer, wait) / wait : 0.0;
}

void report_stats_apportion(report_stats_t *s, int ndev, report_machine_t *m)
{
    double f[MAX_DEVICES];
    for (int d = 0; d < ndev && d < MAX_DEVICES; d++)
        f[d] = report_machine_frac((const double (*)[PH_COUNT])s->phase, ndev, d);
    if (m)
        memset(m, 0, sizeof *m);
    for (int d = 0; d < ndev && d < MAX_DEVICES; d++) {
        if (m)
            m->desched[d] = s->phase[d][PH_DESCHED];
        for (int p = 0; p < PH_COUNT; p++)
            if (phase_waits((phase_t)p)) {
                double q = f[d] * s->phase[d][p];
                s->phase[d][PH_DESCHED] += q;
                s->phase[d][p] -= q;
                if (m)
                    m->machine[d][p] = q;
            }
    }
}

double report_phase_mean(const report_stats_t *s, int first, int last, int p)
{
    if (last < first)
        return 0.0;
    double sum = 0.0;
    for (int d = first; d <= last; d++)
        sum += s->phase[d][p];
    return sum / (double)(last - first + 1);
}

int report_notes_of(const report_ctx_t *ctx, const run_result_t *r, char notes[][256], int max)
{
    int n = 0;
    report_stats_t s;
    report_stats(r, NULL, &s);
    if (n < max && r->times.n < NOTE_MIN_TIMED)
        snprintf(notes[n++], 256,
                 "only %ld timed step%s: too few for a figure to repeat; time at least %d "
                 "(--steps, --warmup-steps)",
                 r->times.n, r->times.n == 1 ? "" : "s", NOTE_MIN_TIMED);
    /* a run the disturbance record explains is said by its own note */
    if (n < max && r->times.n >= 2 && s.step_p50 > 0 && s.step_p95 / s.step_p50 > NOTE_MAX_SPREAD &&
        !(r->machine.known && r->machine.disturbed)) {
        char line[128], load[48] = "";
        double la;
        if (procfile_value("/proc/loadavg", "", line, sizeof line) &&
            sscanf(line, "%lf", &la) == 1 && isfinite(la))
            snprintf(load, sizeof load, " (load average now %.2f)", la);
        snprintf(notes[n++], 256,
                 "step times vary: p95 is %.1fx p50, so the throughput is unreliable; was the "
                 "machine busy%s?",
                 s.step_p95 / s.step_p50, load);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const config_t *c = ctx ? ctx->cfg : NULL;
    int threads = report_threads(c, r->mode);
    if (n < max && r->backend == BACKEND_CPU && cpus > 0 && (long)r->ndev * threads > cpus)
        snprintf(notes[n++], 256,
                 "%d CPU worker%s%s on %ld core%s: they queue for a core, so the devices sit "
                 "idle and the speed-up is understated",
                 r->ndev * threads, r->ndev * threads == 1 ? "" : "s",
                 threads > 1 ? " (BLAS threads)" : "", cpus, cpus == 1 ? "" : "s");
    return n;
}

void report_notes(FILE *f, const report_ctx_t *ctx, const run_result_t *r, bool name_mode)
{
    char notes[4][256];
    int n = report_notes_of(ctx, r, notes, 4);
    for (int i = 0; i < n; i++)
        fprintf(f, "  note: %s%s%s\n", name_mode ? mode_name(r->mode) : "", name_mode ? ": " : "",
                notes[i]);
}

void report_notes_runs(FILE *f, const report_ctx_t *ctx, const run_result_t *runs, int n)
{
    enum { PER_RUN = 4, MAX = 3 * PER_RUN };
    char notes[MAX][256], who[MAX][64];
    int k = 0;
    for (int i = 0; i < n && i < 3; i++) {
        char mine[PER_RUN][256];
        int m = report_notes_of(ctx, &runs[i], mine, PER_RUN);
        for (int j = 0; j < m; j++) {
            int same = 0;
            while (same < k && strcmp(notes[same], mine[j]) != 0)
                same++;
            if (same == k) {
                memcpy(notes[k], mine[j], sizeof notes[k]);
                who[k++][0] = 0;
            }
            size_t w = strlen(who[same]);
            snprintf(who[same] + w, sizeof who[same] - w, "%s%s", w ? ", " : "",
                     mode_name(runs[i].mode));
        }
    }
    for (int i = 0; i < k; i++)
        fprintf(f, "  note: %s%s%s\n", n > 1 ? who[i] : "", n > 1 ? ": " : "", notes[i]);
}

void report_autotune(FILE *f, const config_t *cfg, const run_result_t *r)
{
    if (!cfg || !cfg->bucket_auto || !strategy_words(r->mode)->ranks)
        return;
    if (r->ntuned == 0) {
        fprintf(f, "  %-22snot tuned: the warm-up is too short to try two caps (give "
                   "--warmup-steps 3 or more); %g MiB used\n",
                "bucket cap (auto)", cfg->bucket_mb);
        return;
    }
    fprintf(f, "  %-22s%g MiB, the fastest of", "bucket cap (auto)", r->bucket_mb_chosen);
    char t[32];
    for (int i = 0; i < r->ntuned && i < RESULT_TUNE_MAX; i++)
        fprintf(f, "%s %g MiB (%s)", i ? "," : "", r->tuned_mb[i],
                report_fmt_time(t, sizeof t, r->tuned_s[i] / r->ndev));
        /* the ranks' summed step time, per rank */
    fprintf(f, " in the warm-up\n");
}

/* A bucket's all-reduce in training reached this share of what --mode comm
 * measures at its size: then the link, not waiting, sets its time. */
#define BUS_BOUND 0.8

static double ar_busbw(double bytes, double s, int n)
{
    return s > 0 && n > 1 ? bytes / s * 2.0 * (n - 1) / n : 0.0;
}

/* nccl-tests' reduce-scatter: the whole buffer's bytes, x (n-1)/n */
static double bucket_busbw(double bytes, double s, int n, bool zero1)
{
    return zero1 ? ar_busbw(bytes, s, n) / 2.0 : ar_busbw(bytes, s, n);
}

double report_bus_share(const run_result_t *r, const collperf_coll_t *ar, bool zero1,
                        double *busbw)
{
    double bytes = 0.0, train = 0.0, link = 0.0;
    for (int i = 0; i < r->nbuckets; i++) {
        bytes += r->bucket_bytes[i];
        train += r->bucket_s[i];
        link += ar && !zero1 ? collperf_time_at(ar, r->bucket_bytes[i]) : NAN;
    }
    *busbw = bucket_busbw(bytes, train, r->ndev, zero1);
    bool known = strategy_words(r->mode)->ranks && r->ndev > 1 && r->nbuckets > 0 && train > 0.0;
    return known && link > 0.0 ? link / train : NAN;
}

/* Bucket i's bus bandwidth in training, and what --mode comm's all-reduce
 * (ar, NULL under zero1: another collective) takes at its size (NAN: not
 * measured). */
static double bucket_bw(const run_result_t *r, int i, const collperf_coll_t *ar, bool zero1,
                        double *ref)
{
    double t = ar && !zero1 ? collperf_time_at(ar, r->bucket_bytes[i]) : NAN;
    *ref = isfinite(t) && t > 0 ? ar_busbw(r->bucket_bytes[i], t, r->ndev) : NAN;
    return bucket_busbw(r->bucket_bytes[i], r->bucket_s[i], r->ndev, zero1);
}

void report_buckets(FILE *f, const run_result_t *r, const collperf_coll_t *ar, bool zero1)
{
    if (!strategy_words(r->mode)->ranks || r->ndev < 2 || r->nbuckets == 0)
        return;
    char a[32], b[32];
    if (zero1)
        fprintf(f, "  reduce-scatter per %s (ZeRO-%d; busbw = bytes / time x (n-1)/n):\n",
                r->zero == 3 ? "layer" : "bucket", r->zero ? r->zero : 1);
    else
        fprintf(f, "  all-reduce per bucket (busbw = bytes / time x 2(n-1)/n; --mode comm at the "
                   "same size):\n");
    for (int i = 0; i < r->nbuckets; i++) {
        double ref, bw = bucket_bw(r, i, ar, zero1, &ref);
        fprintf(f, "    bucket %-3d %10s  %10s  busbw %7.2f GB/s", i,
                report_fmt_bytes(a, sizeof a, r->bucket_bytes[i]),
                report_fmt_time(b, sizeof b, r->bucket_s[i]), 1e-9 * bw);
        if (isfinite(ref))
            fprintf(f, "   comm %7.2f GB/s: %s\n", 1e-9 * ref,
                    bw >= BUS_BOUND * ref ? "bandwidth-bound (the link's speed)"
                                          : "below the link's speed (waiting, not moving data)");
        else
            fputc('\n', f);
    }
}

cJSON *report_json_buckets(const run_result_t *r, const collperf_coll_t *ar, bool zero1)
{
    if (!strategy_words(r->mode)->ranks || r->nbuckets == 0)
        return cJSON_CreateNull();
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < r->nbuckets; i++) {
        cJSON *o = cJSON_CreateObject();
        double ref, bw = bucket_bw(r, i, ar, zero1, &ref);
        cJSON_AddNumberToObject(o, "bytes", r->bucket_bytes[i]);
        cJSON_AddStringToObject(o, "collective", zero1 ? "reduce-scatter" : "all-reduce");
        cJSON_AddNumberToObject(o, "all_reduce_s", r->bucket_s[i]);
        cJSON_AddNumberToObject(o, "busbw_gbs", 1e-9 * bw);
        if (isfinite(ref)) {
            cJSON_AddNumberToObject(o, "comm_busbw_gbs", 1e-9 * ref);
            cJSON_AddBoolToObject(o, "bandwidth_bound", bw >= BUS_BOUND * ref);
        } else {
            cJSON_AddNullToObject(o, "comm_busbw_gbs");
            cJSON_AddNullToObject(o, "bandwidth_bound");
        }
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
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
    char per[48] = "";
    if (c->batch_per_device)
        snprintf(per, sizeof per, " (%d per device)", c->batch_per_device);
    char source[2 * sizeof d->source];
    text_escape(d->source, strlen(d->source), source, sizeof source); /* a file name is shown, never obeyed */
    fprintf(f, "  data %s%s: %zu samples x %d features, batch %d%s%s, seed %llu\n", source,
            d->header_lines ? " (its first line is a header, skipped)" : "", d->n, d->in_dim,
            c->batch, per, c->accum > 1 ? " (accumulated)" : "", (unsigned long long)c->seed);
    /* a batch larger than an epoch is one batch of the whole epoch, as a
     * DataLoader gives it (with --drop-last it is refused earlier) */
    if (!c->nrank_samples && d->n > 0) {
        size_t R = (size_t)config_stream_ranks(c), total = (d->n + R - 1) / R * R;
        if ((size_t)c->batch > total)
            fprintf(f,
                    "  batch %d > the %zu samples of an epoch: each step trains on all %zu\n",
                    c->batch, total, total);
    }
    if (c->backend == BACKEND_CUDA) { /* --cuda-graph: what is replayed, and why not */
        bool compare = c->mode == MODE_COMPARE; /* the three modes, each named */
        for (mode_t_ m = MODE_SINGLE; m <= MODE_DDP; m++) {
            if (!compare && c->mode != m)
                continue;
            const char *why = config_graph_why_not(c, m);
            fprintf(f, "  cuda graphs%s%s: %s%s\n", compare ? " in " : "",
                    compare ? mode_name(m) : "",
                    c->cuda_graph == CUDA_GRAPH_OFF ? "off (--cuda-graph off)"
                    : why                           ? "off: "
                                                    : strategy_words(m)->graphs,
                    c->cuda_graph != CUDA_GRAPH_OFF && why ? why : "");
        }
    }
    report_provenance(f, ctx);
}
