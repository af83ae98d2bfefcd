/* common/measure/paired.c: the A/B gate's statistics: Hodges-Lehmann
 * estimate, Wilcoxon signed-rank interval, verdict, rounds to settle, ABBA
 * order (paired.h says why these). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/measure/paired.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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
 * (probabilities, not counts: 2^n overflows nothing this way). */
double paired_signed_rank_cdf(int n, int t)
{
    if (t < 0)
        return 0.0;
    long m = (long)n * (n + 1) / 2;
    if (t >= m)
        return 1.0;
    double *p = calloc((size_t)m + 1, sizeof *p);
    if (!p)
        return NAN;
    p[0] = 1.0;
    long top = 0;
    for (int k = 1; k <= n; k++) {
        top += k;
        for (long s = top; s >= 0; s--)
            p[s] = 0.5 * (p[s] + (s >= k ? p[s - k] : 0.0));
    }
    double c = 0.0;
    for (long s = 0; s <= t; s++)
        c += p[s];
    free(p);
    return c;
}

int paired_estimate_hl(const double *d, int n, double alpha, paired_est_t *out)
{
    out->n = n;
    out->estimate = out->lo = out->hi = out->median = out->spread = NAN;
    out->conf = 0.0;
    if (n < 1 || n > PAIRED_MAX)
        return -1;
    long m = (long)n * (n + 1) / 2;
    double *w = malloc((size_t)m * sizeof *w);
    double *dev = malloc((size_t)n * sizeof *dev);
    if (!w || !dev) {
        free(w);
        free(dev);
        return -1;
    }
    long k = 0;
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++)
            w[k++] = 0.5 * (d[i] + d[j]);
    qsort(w, (size_t)m, sizeof *w, cmp_double);
    out->estimate = m % 2 ? w[m / 2] : 0.5 * (w[m / 2 - 1] + w[m / 2]);
    out->median = paired_median(d, n);
    for (int i = 0; i < n; i++)
        dev[i] = fabs(d[i] - out->median);
    out->spread = 1.4826 * paired_median(dev, n);

    /* c: the most Walsh averages one may cut from each end, the largest c
     * with P(T <= c-1) <= alpha/2; the interval is [W_(c), W_(m+1-c)]. */
    long c = 0;
    double *p = calloc((size_t)m + 1, sizeof *p);
    if (p) {
        p[0] = 1.0;
        long top = 0;
        for (int r = 1; r <= n; r++) {
            top += r;
            for (long s = top; s >= 0; s--)
                p[s] = 0.5 * (p[s] + (s >= r ? p[s - r] : 0.0));
        }
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
    free(dev);
    return 0;
}

/* P(B <= k) for B ~ Binomial(n, 1/2): the sign test's null distribution. */
double paired_sign_cdf(int n, int k)
{
    if (k < 0)
        return 0.0;
    if (k >= n)
        return 1.0;
    double c = 0.0;
    for (int i = 0; i <= k; i++)
        c += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
    return c;
}

int paired_estimate_median(const double *d, int n, double alpha, paired_est_t *out)
{
    out->n = n;
    out->estimate = out->lo = out->hi = out->median = out->spread = NAN;
    out->conf = 0.0;
    if (n < 1 || n > PAIRED_MAX)
        return -1;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return -1;
    memcpy(s, d, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    out->median = out->estimate = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    for (int i = 0; i < n; i++)
        s[i] = fabs(d[i] - out->median);
    out->spread = 1.4826 * paired_median(s, n);
    memcpy(s, d, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    /* c: the most order statistics one may cut from each end, the largest c
     * with P(B <= c-1) <= alpha/2; the interval is [d_(c), d_(n+1-c)]: the
     * median lies below d_(c) only if fewer than c of the n land below it */
    int c = 0;
    while (c + 1 <= n / 2 && paired_sign_cdf(n, c) <= alpha / 2)
        c++;
    if (c >= 1) {
        out->lo = s[c - 1];
        out->hi = s[n - c];
        out->conf = 1.0 - 2.0 * paired_sign_cdf(n, c - 1);
    }
    free(s);
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
    switch (v) {
    case PAIRED_NO_CHANGE:
        return "no change";
    case PAIRED_IMPROVED:
        return "improved";
    case PAIRED_REGRESSED:
        return "regressed";
    default:
        return "no verdict";
    }
}

int paired_rounds_to_settle(const paired_est_t *e, double tol)
{
    if (e->n < PAIRED_MIN_ROUNDS || isnan(e->lo))
        return PAIRED_MIN_ROUNDS;
    if (paired_judge(e, tol) != PAIRED_NO_VERDICT)
        return 0;
    double up = log1p(tol), down = log1p(-tol), x = e->estimate;
    /* the bound inside the interval nearest the estimate, and the side of
     * the interval that must pull back past it */
    double bound, side;
    bool straddles_up = e->lo <= up && e->hi > up, straddles_down = e->lo < down && e->hi >= down;
    if (straddles_up && (!straddles_down || fabs(x - up) <= fabs(x - down)))
        bound = up;
    else
        bound = down;
    side = x > bound ? x - e->lo : e->hi - x;
    double dist = fabs(x - bound);
    if (dist <= 0.0 || side <= 0.0)
        return -1;
    double need = (double)e->n * (side / dist) * (side / dist);
    if (need > PAIRED_MAX)
        return -1;
    int r = (int)ceil(need);
    return r > e->n ? r : e->n + 1;
}

bool paired_base_first(int round)
{
    return round % 2 == 0;
}
