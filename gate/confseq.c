/* gate/confseq.c: the median's confidence sequence (confseq.h):
 * the band's shapes, its exact exit probability by dynamic programming over
 * a fair coin's running count, the calibration of its scale, and the
 * interval from order statistics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gate/confseq.h"

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

static int setup(confseq_t *cs, confseq_shape_t shape, int cap, int every, double alpha)
{
    memset(cs, 0, sizeof *cs);
    if (cap < 1 || cap > CONFSEQ_MAX || every < 1 || !(alpha > 0.0 && alpha < 1.0))
        return -1;
    cs->shape = shape;
    cs->cap = cap;
    cs->every = every;
    cs->alpha = alpha;
    cs->rho = shape == CONFSEQ_MIXTURE ? mixture_rho(alpha) : 0.0;
    return 0;
}

int confseq_fixed(confseq_t *cs, confseq_shape_t shape, int cap, int every, double alpha,
                  double c)
{
    if (setup(cs, shape, cap, every, alpha) != 0)
        return -1;
    cs->c = c;
    cs->exit = confseq_exit(cs);
    return isnan(cs->exit) ? -1 : 0;
}

int confseq_calibrate(confseq_t *cs, confseq_shape_t shape, int cap, int every, double alpha)
{
    if (setup(cs, shape, cap, every, alpha) != 0)
        return -1;
    /* the exit probability falls as c grows (a wider band at every look):
     * find a c that holds, then bisect down to the smallest */
    double lo = 0.0, hi = 1.0, at_hi;
    for (;;) {
        cs->c = hi;
        at_hi = confseq_exit(cs);
        if (isnan(at_hi))
            return -1;
        if (at_hi <= alpha)
            break;
        lo = hi;
        hi *= 2.0;
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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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
