/* app/repeat/repeat.c: summaries of runs and their intervals (see repeat.h). */
#include "app/repeat/repeat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p-th percentile of v[0..n) (sorted copy, linear interpolation). */
static double percentile(const double *v, long n, double p)
{
    if (n <= 0)
        return 0.0;
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return NAN;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double pos = p / 100.0 * (double)(n - 1);
    long lo = (long)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    double out = c[lo] + (c[hi] - c[lo]) * (pos - (double)lo);
    free(c);
    return out;
}

void run_summary_of(const run_result_t *r, run_summary_t *out)
{
    memset(out, 0, sizeof *out);
    out->samples_per_s = r->samples_per_s;
    long n = r->times.n;
    out->step_mean_s = n > 0 ? r->times.timed_s / (double)n : 0.0;
    double steps = n > 0 ? (double)n : 1.0;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
        out->mem_peak_bytes = fmax(out->mem_peak_bytes, (double)r->dev[d].mem_peak);
        for (int p = 0; p < PH_COUNT; p++)
            out->phase_s[p] += r->dev[d].phase_s[p] / steps / (double)r->ndev;
    }
    /* the work of the busiest device (its quickest tenth of steps): the
     * run's, as work_cpu_s.p10 in its JSON */
    out->work_p10 = NAN;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++)
        if (r->dev[d].work_steps > 0 && !(r->dev[d].work_cpu_p10 <= out->work_p10))
            out->work_p10 = r->dev[d].work_cpu_p10;
    out->checksum_bits = r->checksum.bits;
    out->step_median_s = step_times_quantile(&r->times, 50);
    out->median_samples_per_s = out->step_median_s > 0 && n > 0
                                    ? (double)r->times.timed_samples / (double)n / out->step_median_s
                                    : 0.0;
    out->machine = r->machine;
}

/* t(0.975, df): the table to 30 degrees of freedom, then the normal
 * approximation's series (error < 1e-4 beyond). */
double student_t975(int df)
{
    static const double t[] = {0,      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                               2.306,  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                               2.120,  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                               2.064,  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1)
        return NAN;
    if (df <= 30)
        return t[df];
    double z = 1.959964, g1 = (z * z * z + z) / 4.0,
           g2 = (5 * pow(z, 5) + 16 * pow(z, 3) + 3 * z) / 96.0;
    return z + g1 / df + g2 / ((double)df * df);
}

/* mean and Student's half-width of v[0..n), n >= 2 */
static void student(const double *v, int n, double *mean, double *half)
{
    double s = 0.0, ss = 0.0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - *mean) * (v[i] - *mean);
    *half = student_t975(n - 1) * sqrt(ss / (n - 1)) / sqrt((double)n);
}

interval_t interval_of(const double *v, int n)
{
    interval_t o = {.n = n, .median = NAN, .mean = NAN, .lo = NAN, .hi = NAN};
    if (n <= 0)
        return o;
    o.median = percentile(v, n, 50);
    double s = 0.0;
    bool positive = true, nonneg = true;
    for (int i = 0; i < n; i++) {
        s += v[i];
        positive = positive && v[i] > 0.0;
        nonneg = nonneg && v[i] >= 0.0;
    }
    o.mean = s / n;
    if (n < 2)
        return o;
    double m, half;
    if (positive) {
        double lv[REPEAT_MAX];
        for (int i = 0; i < n && i < REPEAT_MAX; i++)
            lv[i] = log(v[i]);
        student(lv, n < REPEAT_MAX ? n : REPEAT_MAX, &m, &half);
        o.lo = exp(m - half);
        o.hi = exp(m + half);
    } else {
        student(v, n, &m, &half);
        /* a figure never below 0 has no interval below 0: the interval cut
         * at 0 covers it as often */
        o.lo = nonneg ? fmax(0.0, m - half) : m - half;
        o.hi = m + half;
    }
    return o;
}

bool ratio_interval_of(const double *base, int nb, const double *cand, int nc,
                       ratio_interval_t *out)
{
    memset(out, 0, sizeof *out);
    out->ratio = out->lo = out->hi = NAN;
    out->nbase = nb;
    out->ncand = nc;
    if (nb < 1 || nc < 1 || nb > REPEAT_MAX || nc > REPEAT_MAX || (nb < 2 && nc < 2))
        return false;
    double lb[REPEAT_MAX], lc[REPEAT_MAX], mb = 0, mc = 0, vb = 0, vc = 0;
    for (int i = 0; i < nb; i++) {
        if (!(base[i] > 0.0))
            return false;
        mb += (lb[i] = log(base[i])) / nb;
    }
    for (int i = 0; i < nc; i++) {
        if (!(cand[i] > 0.0))
            return false;
        mc += (lc[i] = log(cand[i])) / nc;
    }
    for (int i = 0; i < nb; i++)
        vb += (lb[i] - mb) * (lb[i] - mb) / (nb > 1 ? nb - 1 : 1);
    for (int i = 0; i < nc; i++)
        vc += (lc[i] - mc) * (lc[i] - mc) / (nc > 1 ? nc - 1 : 1);
    /* a side of one run: the other side's spread stands for its own */
    if (nb < 2)
        vb = vc;
    if (nc < 2)
        vc = vb;
    double sb = vb / nb, sc = vc / nc, se = sqrt(sb + sc);
    double df = nb < 2 ? nc - 1 : nc < 2 ? nb - 1
              : (sb + sc) * (sb + sc) / (sb * sb / (nb - 1) + sc * sc / (nc - 1));
    if (!(df >= 1.0))
        df = 1.0;
    out->df = df;
    double half = student_t975((int)floor(df)) * se;
    out->ratio = exp(mc - mb);
    out->lo = exp(mc - mb - half);
    out->hi = exp(mc - mb + half);
    return true;
}

double run_summary_figure(const run_summary_t *s, int fig)
{
    switch (fig) {
    case FIG_THROUGHPUT:
        return s->samples_per_s;
    case FIG_STEP_MEAN:
        return s->step_mean_s;
    case FIG_MEM_PEAK:
        return s->mem_peak_bytes;
    case FIG_STEP_MEDIAN:
        return s->step_median_s;
    case FIG_MEDIAN_THROUGHPUT:
        return s->median_samples_per_s;
    case FIG_WORK_P10:
        return s->work_p10;
    default:
        return fig >= FIG_PHASE0 && fig < FIG_COUNT ? s->phase_s[fig - FIG_PHASE0] : NAN;
    }
}

void repeat_add(repeat_t *r, const run_result_t *res)
{
    if (r->n < REPEAT_MAX)
        run_summary_of(res, &r->run[r->n++]);
}

interval_t repeat_interval(const repeat_t *r, int fig)
{
    double v[REPEAT_MAX];
    for (int i = 0; i < r->n; i++)
        v[i] = run_summary_figure(&r->run[i], fig);
    return interval_of(v, r->n);
}

int repeat_disturbed(const repeat_t *r, double *contention)
{
    double c[REPEAT_MAX];
    int k = 0;
    for (int i = 0; i < r->n; i++)
        if (r->run[i].machine.disturbed)
            c[k++] = r->run[i].machine.contention;
    if (contention)
        *contention = k > 0 ? percentile(c, k, 50) : 0.0;
    return k;
}

double interval_width_pct(interval_t iv)
{
    if (iv.n < 2 || !isfinite(iv.lo) || !isfinite(iv.hi) || iv.mean == 0.0)
        return 0.0;
    return 100.0 * (iv.hi - iv.lo) / fabs(iv.mean);
}
