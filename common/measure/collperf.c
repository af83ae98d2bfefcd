/* common/measure/collperf.c: a --mode comm result's bandwidths and alpha-beta fit. */
#include "common/measure/collperf.h"

#include <math.h>
#include <stddef.h>

double collperf_algbw(const collperf_point_t *p, int place)
{
    return p->time_s[place] > 0.0 ? (double)p->bytes / p->time_s[place] : 0.0;
}

double collperf_busbw(const collperf_coll_t *c, const collperf_point_t *p, int place)
{
    return collperf_algbw(p, place) * c->bus_factor;
}

double collperf_avg_busbw(const collperf_t *r)
{
    double sum = 0.0;
    long n = 0;
    for (int i = 0; i < r->ncoll; i++)
        for (int j = 0; j < r->coll[i].npoints; j++)
            for (int place = 0; place < 2; place++) {
                sum += collperf_busbw(&r->coll[i], &r->coll[i].pt[j], place);
                n++;
            }
    return n ? sum / (double)n : 0.0;
}

const collperf_coll_t *collperf_find(const collperf_t *r, int kind)
{
    for (int i = 0; r && i < r->ncoll; i++)
        if (r->coll[i].kind == kind)
            return &r->coll[i];
    return NULL;
}

bool collperf_fit(const collperf_coll_t *c, double *alpha_s, double *beta_s_per_byte)
{
    /* least squares of time on bytes; sizes span decades, so each point is
     * weighted by 1/time^2 (relative error), or the big sizes decide alone */
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int n = 0;
    for (int j = 0; c && j < c->npoints; j++) {
        double y = c->pt[j].time_s[COLLPERF_OUT_OF_PLACE], x = (double)c->pt[j].bytes;
        if (y <= 0.0)
            continue;
        double w = 1.0 / (y * y);
        sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
        n++;
    }
    double det = sw * sxx - sx * sx;
    if (n < 2 || det <= 0.0)
        return false;
    double beta = (sw * sxy - sx * sy) / det;
    double alpha = (sy - beta * sx) / sw;
    /* a latency below zero or a bandwidth beyond infinity is noise: clamp */
    *alpha_s = alpha > 0.0 ? alpha : 0.0;
    *beta_s_per_byte = beta > 0.0 ? beta : 0.0;
    return true;
}

double collperf_time_at(const collperf_coll_t *c, double bytes)
{
    if (!c || c->npoints == 0)
        return NAN;
    /* between two measured sizes: interpolate (log-log); outside: the fit */
    for (int j = 0; j + 1 < c->npoints; j++) {
        const collperf_point_t *a = &c->pt[j], *b = &c->pt[j + 1];
        double ta = a->time_s[0], tb = b->time_s[0];
        if (bytes >= (double)a->bytes && bytes <= (double)b->bytes && b->bytes > a->bytes &&
            ta > 0 && tb > 0) {
            double u = log(bytes / (double)a->bytes) / log((double)b->bytes / (double)a->bytes);
            return exp(log(ta) + u * (log(tb) - log(ta)));
        }
    }
    double alpha, beta;
    if (collperf_fit(c, &alpha, &beta))
        return alpha + beta * bytes;
    return c->pt[0].time_s[0];
}
