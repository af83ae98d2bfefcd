/* gate/paired.c: the A/B gate's statistics (paired.h): the confidence
 * sequence's shapes, its exact exit probability by dynamic programming over a
 * fair coin's running count, the calibration of its scale and its interval;
 * the median's estimate at a look, Hodges-Lehmann with Wilcoxon's interval
 * (reported), the verdict, ABBA order and the gate's rule at one look. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gate/paired.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MIX_AT 20.0 /* the mixture boundary is tightest near this many observations */

/* rho of Robbins' mixture that makes it tightest at V = n/4: the root of
 * ln((V + rho) / (rho alpha^2)) = V / rho (the derivative of (V + rho) ln(...)
 * in rho), by bisection on a log scale (it is decreasing in rho). */
static double mixture_rho(double alpha)
{
    double v = MIX_AT / 4.0, a = 1e-6, b = 1e6;
    for (int i = 0; i < 200; i++) {
        double r = sqrt(a * b);
        double f = log((v + r) / (r * alpha * alpha)) - v / r;
        if (f < 0)
            a = r;
        else
            b = r;
    }
    return sqrt(a * b);
}

/* g(n): the shape, before the scale c */
static double shape_at(const confseq_t *cs, int n)
{
    double v = n / 4.0, alpha = cs->alpha; /* the walk's variance after n steps */
    switch (cs->shape) {
    case CONFSEQ_MIXTURE: {
        double rho = cs->rho;
        return sqrt((v + rho) * log((v + rho) / (rho * alpha * alpha)));
    }
    case CONFSEQ_STITCHED: {
        if (v < 1.0)
            v = 1.0; /* the bound holds from V = 1 on; wider before */
        return 1.7 * sqrt(v * (log(log(2.0 * v)) + 0.72 * log(10.4 / alpha)));
    }
    default:
        return sqrt((double)n);
    }
}

void confseq_ranks(const confseq_t *cs, int n, int *lo, int *hi)
{
    double u = cs->c * shape_at(cs, n); /* the band's half-width u_n */
    *lo = (int)ceil(n / 2.0 - u);
    *hi = (int)floor(n / 2.0 + u) + 1;
}

/* p[s]: the chance that the count is s after n tosses and the band was never
 * left at a look; each toss moves half of p[s] to s + 1.  At a look n the
 * count may lie in [lo, hi - 1] (confseq_ranks: the m inside the interval
 * are those whose count lies there), and what lies outside has left. */
double confseq_exit(const confseq_t *cs)
{
    double *p = calloc((size_t)cs->cap + 2, sizeof *p);
    if (!p)
        return NAN;
    p[0] = 1.0;
    double out = 0.0;
    for (int n = 1; n <= cs->cap; n++) {
        for (int s = n; s >= 1; s--)
            p[s] = 0.5 * (p[s] + p[s - 1]);
        p[0] *= 0.5;
        if (n % cs->every)
            continue;
        int lo, hi;
        confseq_ranks(cs, n, &lo, &hi);
        for (int s = 0; s <= n; s++)
            if (s < lo || s > hi - 1) {
                out += p[s];
                p[s] = 0.0;
            }
    }
    free(p);
    return out;
}

int confseq_fixed(confseq_t *cs, confseq_shape_t shape, int cap, int every, double alpha,
                  double c)
{
    memset(cs, 0, sizeof *cs);
    if (cap < 1 || cap > CONFSEQ_MAX || every < 1 || !(alpha > 0.0 && alpha < 1.0))
        return -1;
    cs->shape = shape;
    cs->cap = cap;
    cs->every = every;
    cs->alpha = alpha;
    cs->rho = shape == CONFSEQ_MIXTURE ? mixture_rho(alpha) : 0.0;
    cs->c = c;
    cs->exit = confseq_exit(cs);
    return isnan(cs->exit) ? -1 : 0;
}

int confseq_calibrate(confseq_t *cs, confseq_shape_t shape, int cap, int every, double alpha)
{
    /* the exit probability falls as c grows (a wider band at every look):
     * find a c that holds (from 1, doubling), then bisect down to the smallest */
    if (confseq_fixed(cs, shape, cap, every, alpha, 1.0) != 0)
        return -1;
    double lo = 0.0, hi = 1.0, at_hi = cs->exit;
    while (at_hi > alpha) {
        lo = hi;
        hi *= 2.0;
        cs->c = hi;
        at_hi = confseq_exit(cs);
        if (isnan(at_hi))
            return -1;
    }
    while (hi - lo > 1e-9) {
        cs->c = 0.5 * (lo + hi);
        double e = confseq_exit(cs);
        if (isnan(e))
            return -1;
        if (e <= alpha)
            hi = cs->c, at_hi = e;
        else
            lo = cs->c;
    }
    cs->c = hi;
    cs->exit = at_hi;
    return 0;
}

int confseq_interval(const confseq_t *cs, const double *d, int n, double *lo, double *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (n < 1 || n > cs->cap)
        return -1;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return -1;
    memcpy(s, d, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    int rl, rh;
    confseq_ranks(cs, n, &rl, &rh);
    if (rl >= 1)
        *lo = s[rl - 1];
    if (rh <= n)
        *hi = s[rh - 1];
    free(s);
    return 0;
}

double paired_median(const double *v, int n)
{
    if (n <= 0)
        return NAN;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* The null distribution of T = sum of the ranks with a positive sign: each
 * rank k joins with probability 1/2, so p_k(s) = (p_{k-1}(s) + p_{k-1}(s-k))/2
 * (probabilities, not counts: 2^n overflows nothing this way); p[0..m]
 * (NULL: no memory). */
static double *signed_rank_pmf(int n, long m)
{
    double *p = calloc((size_t)m + 1, sizeof *p);
    if (!p)
        return NULL;
    p[0] = 1.0;
    long top = 0;
    for (int k = 1; k <= n; k++) {
        top += k;
        for (long s = top; s >= 0; s--)
            p[s] = 0.5 * (p[s] + (s >= k ? p[s - k] : 0.0));
    }
    return p;
}

double paired_signed_rank_cdf(int n, int t)
{
    if (t < 0)
        return 0.0;
    long m = (long)n * (n + 1) / 2;
    if (t >= m)
        return 1.0;
    double *p = signed_rank_pmf(n, m);
    if (!p)
        return NAN;
    double c = 0.0;
    for (long s = 0; s <= t; s++)
        c += p[s];
    free(p);
    return c;
}

/* 1.4826 x the median absolute deviation of d[0..n) from m */
static double robust_spread(const double *d, int n, double m)
{
    double *dev = malloc((size_t)n * sizeof *dev);
    if (!dev)
        return NAN;
    for (int i = 0; i < n; i++)
        dev[i] = fabs(d[i] - m);
    double s = 1.4826 * paired_median(dev, n);
    free(dev);
    return s;
}

int paired_estimate_hl(const double *d, int n, double alpha, paired_est_t *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->estimate = out->lo = out->hi = out->spread = NAN;
    out->conf = 0.0;
    if (n < 1 || n > PAIRED_MAX)
        return -1;
    long m = (long)n * (n + 1) / 2;
    double *w = malloc((size_t)m * sizeof *w);
    if (!w)
        return -1;
    long k = 0;
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++)
            w[k++] = 0.5 * (d[i] + d[j]);
    qsort(w, (size_t)m, sizeof *w, cmp_double);
    out->estimate = m % 2 ? w[m / 2] : 0.5 * (w[m / 2 - 1] + w[m / 2]);
    out->spread = robust_spread(d, n, paired_median(d, n));

    /* c: the most Walsh averages one may cut from each end, the largest c
     * with P(T <= c-1) <= alpha/2; the interval is [W_(c), W_(m+1-c)]. */
    long c = 0;
    double *p = signed_rank_pmf(n, m);
    if (p) {
        double cum = 0.0;
        while (c + 1 <= m / 2 && cum + p[c] <= alpha / 2)
            cum += p[c++];
        out->conf = 1.0 - 2.0 * cum;
        free(p);
    }
    if (c >= 1) {
        out->lo = w[c - 1];
        out->hi = w[m - c];
    } else {
        out->conf = 0.0;
    }
    free(w);
    return 0;
}

int paired_estimate_seq(const confseq_t *cs, const double *d, int n, paired_est_t *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->estimate = out->lo = out->hi = out->spread = NAN;
    if (n < 1 || n > cs->cap)
        return -1;
    out->estimate = paired_median(d, n);
    out->spread = robust_spread(d, n, out->estimate);
    if (confseq_interval(cs, d, n, &out->lo, &out->hi) != 0)
        return -1;
    out->conf = 1.0 - cs->alpha;
    out->uniform = true;
    return 0;
}

paired_verdict_t paired_judge(const paired_est_t *e, double tol)
{
    if (isnan(e->lo) || isnan(e->hi))
        return PAIRED_NO_VERDICT;
    double up = log1p(tol), down = log1p(-tol);
    if (e->lo > up)
        return PAIRED_REGRESSED;
    if (e->hi < down)
        return PAIRED_IMPROVED;
    if (e->lo >= down && e->hi <= up)
        return PAIRED_NO_CHANGE;
    return PAIRED_NO_VERDICT;
}

const char *paired_verdict_name(paired_verdict_t v)
{
    static const char *const names[] = {"no change", "improved", "regressed", "no verdict"};
    return names[v >= PAIRED_NO_CHANGE && v < PAIRED_NO_VERDICT ? v : PAIRED_NO_VERDICT];
}

int paired_look(const confseq_t *cs, const paired_round_t *r, int n, bool by_work, double tol,
                paired_look_t *out)
{
    memset(out, 0, sizeof *out);
    out->verdict = PAIRED_NO_VERDICT;
    if (n < 1 || n > cs->cap)
        return -1;
    double *d = malloc(3 * (size_t)n * sizeof *d);
    if (!d)
        return -1;
    double *dc = d + n, *dw = d + 2 * n;
    int rc = -1;
    int nc = 0;
    for (int i = 0; i < n; i++) {
        d[i] = r[i].d;
        dw[i] = r[i].d_wall;
        /* a lopsided round is what a busy machine can turn into a false
         * change; a round disturbed on both sides is paired noise, which the
         * interval already carries */
        if (r[i].lopsided)
            out->lopsided++;
        else
            dc[nc++] = r[i].d;
        out->both += r[i].both;
    }
    if (paired_estimate_seq(cs, d, n, &out->est) != 0 ||
        paired_estimate_seq(cs, dw, n, &out->est_wall) != 0)
        goto done;
    if (nc > 0 && paired_estimate_seq(cs, dc, nc, &out->est_clean) != 0)
        goto done;
    out->verdict = paired_judge(&out->est, tol);
    if (by_work && out->verdict != PAIRED_REGRESSED && out->lopsided == 0 && out->both == 0 &&
        paired_judge(&out->est_wall, tol) == PAIRED_REGRESSED) {
        out->verdict = PAIRED_REGRESSED;
        out->wall_judged = true;
    }
    if (!out->wall_judged && out->lopsided > 0 &&
        (out->verdict == PAIRED_REGRESSED || out->verdict == PAIRED_IMPROVED) &&
        (nc == 0 || paired_judge(&out->est_clean, tol) != out->verdict)) {
        out->verdict = PAIRED_NO_VERDICT;
        out->explained = true;
    }
    rc = 0;
done:
    free(d);
    return rc;
}
